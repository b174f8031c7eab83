//! recycle
