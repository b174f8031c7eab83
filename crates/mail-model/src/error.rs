//! The error type of mail storage: one line per error, no panics on bad input or bad data.

use std::io;
use std::sync::Arc;

/// Everything that can go wrong. Cloneable so one failed group-commit batch can hand the
/// same error to every caller in it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("no such user: {0}")]
    NoSuchUser(String),
    #[error("no such folder: {user}/{folder}")]
    NoSuchFolder { user: String, folder: String },
    #[error("no such message: UID {uid} in {folder}")]
    NoSuchMessage { folder: String, uid: u32 },
    #[error("folder already exists: {user}/{folder}")]
    FolderExists { user: String, folder: String },
    #[error("invalid name {name:?}: {reason}")]
    InvalidName { name: String, reason: String },
    #[error("too large: {what}")]
    TooLarge { what: String },
    #[error("limit reached: {what}")]
    Limit { what: String },
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("corrupt {what}")]
    Corrupt { what: String },
    #[error("I/O error: {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: Arc<io::Error>,
    },
    #[error("store stopped after a failed write ({0}); reopen it to recover")]
    Failed(String),
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A file of the store carries a format version above the one this build reads: it was
    /// written by a newer build, and this one must neither read nor repair it.
    #[error(
        "{file} was written by a newer mailstow (format {found}); this build reads up to \
         format {supported}: run the newer mailstow, or restore the backup taken before the \
         upgrade (docs/operations.md)"
    )]
    NewerFormat {
        file: String,
        found: u32,
        supported: u32,
    },
}

impl StoreError {
    pub fn io(context: impl Into<String>, source: io::Error) -> StoreError {
        StoreError::Io {
            context: context.into(),
            source: Arc::new(source),
        }
    }

    /// True for a write refused for want of room (`ENOSPC`, a quota): an ordinary condition
    /// that passes when space is freed, not damage.
    pub fn is_out_of_space(&self) -> bool {
        matches!(self, StoreError::Io { source, .. }
            if matches!(source.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded))
    }

    pub fn corrupt(what: impl Into<String>) -> StoreError {
        StoreError::Corrupt { what: what.into() }
    }

    /// True for errors that say a message is gone (expunged, or its folder deleted).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            StoreError::NoSuchMessage { .. }
                | StoreError::NoSuchFolder { .. }
                | StoreError::NoSuchUser(_)
        )
    }
}
