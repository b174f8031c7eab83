//! The wall clock as the engine stamps entries and messages with it.

/// Nanoseconds since the epoch.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

pub fn now_secs() -> i64 {
    now_ns() / 1_000_000_000
}
