//! corrupt
