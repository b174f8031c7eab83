//! What callers hand the writer thread: the requests it commits in its rounds, the
//! tickets that answer them once durable, and the deferred copy a `finish` prepares.
//!
//! The callers' side (`queue.rs`, `operator.rs`) builds and submits these and the writer
//! (`writer.rs`) takes them, so the callers need none of the writer's code.

use crate::MessageId;
use crate::error::QueueError;
use crate::format;

/// Completion callback of a request.
pub(crate) type Ticket<T> = Box<dyn FnOnce(Result<T, QueueError>) + Send>;

/// A deferred copy prepared by the caller of `finish` (who already read the original).
pub(crate) struct CopyRecord {
    pub(crate) envelope: Vec<u8>,
    pub(crate) statuses: Vec<u8>,
    pub(crate) content: Vec<u8>,
    pub(crate) attempts: u16,
    pub(crate) arrival_ms: u64,
    pub(crate) next_attempt_ms: u64,
}

pub(crate) struct FinishRequest {
    pub(crate) id: MessageId,
    pub(crate) token: u64,
    /// The original's status bytes with this attempt's deliveries applied.
    pub(crate) now: Vec<u8>,
    pub(crate) copy: Option<CopyRecord>,
    pub(crate) done: Ticket<()>,
}

pub(crate) enum Request {
    Enqueue {
        envelope: Vec<u8>,
        statuses: Vec<u8>,
        content: Vec<u8>,
        arrival_ms: u64,
        done: Ticket<MessageId>,
    },
    Finish(FinishRequest),
    FinishBounce {
        id: MessageId,
        token: u64,
        done: Ticket<()>,
    },
    /// Set the done flag of a record a reader found fully settled (already out of the index).
    Resolve {
        seg: u64,
        index: u32,
    },
    /// An operator's removal (`Queue::remove`): set the done flag of a record already taken
    /// out of the index, and answer once it is durable.
    Remove {
        seg: u64,
        index: u32,
        done: Ticket<()>,
    },
}

impl Request {
    pub(crate) fn fail(self, e: QueueError) {
        match self {
            Request::Enqueue { done, .. } => done(Err(e)),
            Request::Finish(f) => (f.done)(Err(e)),
            Request::FinishBounce { done, .. } => done(Err(e)),
            Request::Resolve { .. } => {}
            Request::Remove { done, .. } => done(Err(e)),
        }
    }

    /// Bytes of the record a new message takes in its segment (0 for anything else).
    pub(crate) fn record_len(&self) -> u64 {
        match self {
            Request::Enqueue {
                envelope,
                statuses,
                content,
                ..
            } => crate::format::record_len(statuses.len(), envelope.len(), content.len()),
            _ => 0,
        }
    }

    /// Record bytes this request adds to a batch.
    pub(crate) fn bytes(&self) -> usize {
        match self {
            Request::Enqueue {
                envelope,
                statuses,
                content,
                ..
            } => format::record_len(statuses.len(), envelope.len(), content.len()) as usize,
            Request::Finish(FinishRequest { copy: Some(c), .. }) => {
                format::record_len(c.statuses.len(), c.envelope.len(), c.content.len()) as usize
            }
            _ => 0,
        }
    }
}
