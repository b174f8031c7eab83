//! The workspace's boundaries, checked by `cargo test -p tidy` (rust-analyzer's `tidy`,
//! TigerBeetle's `tidy.zig`): every claim of ARCHITECTURE.md that a machine can check is a
//! test here, so the map cannot drift from the country.
//!
//! - the dependency edges between our crates are exactly the ones ARCHITECTURE.md lists;
//! - no protocol crate depends on tokio, the store, the queue or the directory;
//! - only the CLI crate depends on a configuration parser or prints;
//! - the shipped binary links no test or bench crate;
//! - no crate's modules import each other in a cycle.
//!
//! Nothing links this crate; it has no code outside its tests.

#[cfg(test)]
mod checks;
#[cfg(test)]
mod workspace;
