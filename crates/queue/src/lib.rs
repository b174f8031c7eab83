//! The mail server's durable disk queue, after FlashQ (Wu et al., 2003).
//!
//! Messages are appended to large preallocated segment files (`main-*.seg` for new mail,
//! `deferred-*.seg` for mail waiting for a retry and for bounces) by one writer thread that
//! commits whatever is waiting with one record write, one slot write and one `fdatasync`
//! (the paper's *Lazy Write*, without its timer). Each segment starts with a slot area, the
//! on-disk index (the paper's MIN table), so recovery rebuilds the in-memory index from slots
//! alone. Readers lease runs of adjacent messages and read each run with one `pread`
//! (*Ahead Read*). A delivered recipient is a one-byte status write in place; a message with a
//! temporary failure is copied to the deferred queue and its original marked moved.
//!
//! The on-disk formats, commit protocol, invariants Q1–Q6 and crash analysis are in Part 1 of
//! `docs/storage.md`; that page is the contract this crate implements.
//!
//! All I/O goes through [`disk::Disk`], so tests run the queue on [`disk::SimDisk`] and crash
//! it anywhere.

mod config;
mod error;
mod format;
mod fsck;
mod handle;
mod index;
mod operator;
mod queue;
mod recovery;
mod request;
mod segment;
mod writer;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

#[cfg(test)]
mod tests;

use std::time::Duration;

pub use config::QueueConfig;
pub use error::QueueError;
pub use fsck::{FsckProblem, FsckReport, check};
pub use handle::{Incoming, Queue};
pub use operator::{MessageClass, MessageDetail, QueueEntry};

/// A message id: queue-wide, ascending in commit order, never reused.
pub type MessageId = u64;

/// The SMTP envelope of a queued message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// The reverse path; empty for the null sender `<>`.
    pub sender: String,
    pub recipients: Vec<Recipient>,
    /// When the message was received (Unix ms).
    pub arrival_ms: u64,
}

/// One recipient and how far its delivery got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recipient {
    pub address: String,
    pub status: RecipientStatus,
    /// The last delivery error (temporary or permanent), if any.
    pub last_error: Option<String>,
}

/// Delivery state of one recipient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecipientStatus {
    /// Still to be delivered.
    Pending,
    Delivered,
    /// Failed permanently; a bounce reports it.
    Failed,
    /// A deferred copy of the message carries this recipient on.
    Moved,
}

/// The result of one delivery attempt to one recipient.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    /// A temporary failure: retry at or after `retry_at_ms`.
    Deferred {
        retry_at_ms: u64,
        reason: String,
    },
    /// A permanent failure: the recipient goes to a bounce.
    Failed {
        reason: String,
    },
}

/// A leased message, as handed out by [`Queue::next_batch`] and [`Queue::take_bounces`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedMessage {
    pub id: MessageId,
    /// The envelope with every recipient's current status and last error.
    pub envelope: Envelope,
    pub content: Vec<u8>,
    /// Delivery attempts made so far (deferrals and failures).
    pub attempts: u32,
    /// From `next_batch`: indexes of the recipients still pending; [`Queue::finish`] takes
    /// exactly one outcome for each. From `take_bounces`: indexes of the failed recipients
    /// the bounce must report.
    pub pending: Vec<usize>,
    /// The message comes from the deferred queue (it has been tried before).
    pub deferred: bool,
}

/// Counters and gauges of a running queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub main_segments: usize,
    pub deferred_segments: usize,
    pub free_segments: usize,
    /// Messages with pending recipients in the main queue (leased or not).
    pub pending_messages: usize,
    /// Messages with pending recipients in the deferred queue (leased or not).
    pub deferred_messages: usize,
    /// Messages waiting for `take_bounces` (leased or not).
    pub bounces: usize,
    pub leased: usize,
    /// Records taken out of the queue because they failed a check when read.
    pub quarantined: usize,
    /// Record bytes of every message in the queue.
    pub bytes_used: u64,
    /// `fdatasync` calls since open.
    pub fdatasyncs: u64,
    /// Records (new messages and deferred copies) committed since open.
    pub records_committed: u64,
    /// Writer rounds that committed something since open.
    pub batches_committed: u64,
}

/// What [`Queue::open`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Readable segment files.
    pub segments: usize,
    /// Messages with pending recipients in the main queue.
    pub pending: usize,
    /// Messages with pending recipients in the deferred queue.
    pub deferred: usize,
    /// Messages waiting for `take_bounces`.
    pub bounces: usize,
    /// Records dropped from the ends of slot chains: batches that never became durable.
    pub torn_tail_cut: u64,
    /// Segment files left untouched because their header is bad: `"name: reason"`.
    pub unreadable_segments: Vec<String>,
    /// Other damage found and worked around (damaged slots, impossible status bytes, ...).
    pub problems: Vec<String>,
    /// Messages found in two records (a deferral interrupted after its copy was durable);
    /// the newer copy was kept.
    pub duplicates_resolved: usize,
    pub elapsed: Duration,
}
