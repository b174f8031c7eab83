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
pub mod config;
mod durable;
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

use thiserror::Error;

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum FsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("file exists")]
    Exists,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    #[error("name too long")]
    NameTooLong,
    /// Past `FILE_BYTES_MAX` (EFBIG).
    #[error("file too large")]
    FileTooLarge,
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// What POSIX forbids outright (EPERM): a hard link to a directory.
    #[error("operation not permitted: {0}")]
    NotPermitted(String),
    /// A file past `LINKS_MAX` names (EMLINK).
    #[error("too many links")]
    TooManyLinks,
    #[error("read-only (snapshot)")]
    ReadOnly,
    #[error("no space: {0}")]
    NoSpace(String),
    /// No replica could be reached or took the write.
    #[error("accounts unavailable: {0}")]
    Unavailable(String),
    /// A message failed authentication or was not the one expected (M1).
    #[error("integrity: {0}")]
    Integrity(String),
    #[error("corrupt metadata: {0}")]
    Corrupt(String),
    #[error("configuration: {0}")]
    Config(String),
    #[error("local state: {0}")]
    Local(String),
}

impl From<remote::RemoteError> for FsError {
    fn from(e: remote::RemoteError) -> FsError {
        FsError::Unavailable(e.to_string())
    }
}

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

#[cfg(test)]
mod tests;
