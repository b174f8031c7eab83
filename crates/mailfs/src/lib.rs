//! The mail file system's engine (docs/mailfs.md): a POSIX tree kept in IMAP accounts.
//!
//! - [`meta`]: directory and superblock payloads (CBOR);
//! - [`message_name`]: the `X-Mailfs` name every message carries, and how it parses;
//! - [`keys`]: encryption keys (passphrase, wrapped data key, sealing);
//! - [`locking`]: the one lock-poisoning policy (a poisoned lock is a panic);
//! - [`account`]: a virtual disk (RAID index, message index, health, durable backlog);
//! - [`fs`]: the tree, the crash protocol (dirty → blocks → clean), placement, replication
//!   and failover, versions and snapshots;
//! - [`maint`]: gc and fsck;
//! - [`imap_remote`]: accounts over IMAP.
//!
//! The FUSE adapter (`mailfs-fuse`) is a thin shell over [`fs::Fs`]; every error maps to an
//! errno in one place there.

pub mod account;
pub mod cache;
mod clock;
pub mod config;
mod durable;
mod error;
pub mod fs;
pub mod imap_remote;
pub(crate) mod journal;
pub mod keys;
pub mod locking;
pub mod maint;
pub mod message_name;
pub mod meta;
pub mod remote;
pub mod snapview;

pub use config::Config;
pub use fs::{Fs, Stat};

pub use clock::{now_ns, now_secs};
pub use error::FsError;

#[cfg(test)]
mod tests;
