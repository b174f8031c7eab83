//! What the engine's operations fail with; the FUSE adapter maps each to an errno in one
//! place.

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

impl From<crate::remote::RemoteError> for FsError {
    fn from(e: crate::remote::RemoteError) -> FsError {
        FsError::Unavailable(e.to_string())
    }
}
