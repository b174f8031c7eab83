//! torn
