//! The queue's error type: one variant per kind of failure, each a clear one-line message.

use std::io;
use std::path::PathBuf;

use crate::MessageId;

/// Everything a queue operation can fail with. Bad on-disk data and bad input are errors,
/// never panics.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// An I/O call failed; `op` says what the queue was doing.
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// Data on disk failed a check (checksum, magic, length, field range).
    #[error("corrupt queue data: {what}")]
    Corrupt { what: String },
    /// A segment carries a format version above this build's: a newer build wrote it. The
    /// queue neither opens nor checks (let alone quarantines) a directory holding one.
    #[error(
        "{} was written by a newer mailstow (format {found}); this build reads up to format \
         {supported}: run the newer mailstow, or restore the backup taken before the upgrade \
         (docs/operations.md)",
        path.display()
    )]
    NewerFormat {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// An input exceeded a configured limit.
    #[error("{what} is too large: {size} > {max}")]
    TooLarge {
        what: &'static str,
        size: usize,
        max: usize,
    },
    /// An input was malformed (empty recipient list, outcome for an unknown recipient, ...).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The configuration cannot be used.
    #[error("invalid queue configuration: {0}")]
    InvalidConfig(String),
    /// The message is not in the queue (finished, quarantined or never existed).
    #[error("message {0} is not in the queue")]
    UnknownMessage(MessageId),
    /// `finish`/`finish_bounce` on a message the caller does not hold a lease on.
    #[error("message {0} is not leased (take it with next_batch/take_bounces first)")]
    NotLeased(MessageId),
    /// An operator command on a message a delivery agent holds right now.
    #[error("message {0} is being delivered right now; try again in a moment")]
    Leased(MessageId),
    /// The queue was closed.
    #[error("the queue is closed")]
    Closed,
    /// An earlier write or sync failed; nothing the queue holds in memory is trusted any more.
    /// Reopen the queue: recovery establishes what is durable.
    #[error("the queue stopped after an I/O failure ({0}); reopen it")]
    Poisoned(String),
    /// The file system is full: the request needed a new segment and none could be made.
    /// Nothing was written and the queue goes on; try again when space is freed.
    #[error("the queue's file system is full ({0}); try again when space is freed")]
    NoSpace(String),
}

impl QueueError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> QueueError {
        QueueError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// A segment could not be created: `NoSpace` if the file system is full.
    pub(crate) fn creating_segment(path: &std::path::Path, source: io::Error) -> QueueError {
        if disk::is_out_of_space(&source) {
            QueueError::NoSpace(format!("creating {}: {source}", path.display()))
        } else {
            QueueError::io("create segment", path, source)
        }
    }

    /// True when the request failed only for want of room (nothing was written; it can be
    /// tried again as it is).
    pub fn is_out_of_space(&self) -> bool {
        matches!(self, QueueError::NoSpace(_))
    }

    pub(crate) fn corrupt(what: impl Into<String>) -> QueueError {
        QueueError::Corrupt { what: what.into() }
    }

    /// A copy for another waiter of the same failed batch (`io::Error` is not `Clone`).
    pub(crate) fn duplicate(&self) -> QueueError {
        match self {
            QueueError::Io { op, path, source } => QueueError::Io {
                op,
                path: path.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
            QueueError::NewerFormat {
                path,
                found,
                supported,
            } => QueueError::NewerFormat {
                path: path.clone(),
                found: *found,
                supported: *supported,
            },
            QueueError::Corrupt { what } => QueueError::Corrupt { what: what.clone() },
            QueueError::TooLarge { what, size, max } => QueueError::TooLarge {
                what,
                size: *size,
                max: *max,
            },
            QueueError::InvalidInput(s) => QueueError::InvalidInput(s.clone()),
            QueueError::InvalidConfig(s) => QueueError::InvalidConfig(s.clone()),
            QueueError::UnknownMessage(id) => QueueError::UnknownMessage(*id),
            QueueError::NotLeased(id) => QueueError::NotLeased(*id),
            QueueError::Leased(id) => QueueError::Leased(*id),
            QueueError::Closed => QueueError::Closed,
            QueueError::Poisoned(s) => QueueError::Poisoned(s.clone()),
            QueueError::NoSpace(s) => QueueError::NoSpace(s.clone()),
        }
    }
}
