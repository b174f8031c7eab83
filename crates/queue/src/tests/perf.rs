//! perf
