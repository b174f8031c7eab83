//! deferred
