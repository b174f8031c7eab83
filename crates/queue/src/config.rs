//! Queue configuration and its validation.
//!
//! Every limit the queue enforces on input lives here, so a server can size them from its own
//! configuration file and the errors name the limit that was hit.

use crate::error::QueueError;
use crate::format;

/// Tunables of a [`crate::Queue`]. `Default` gives the values documented in `docs/storage.md`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// Largest size of a new segment file (preallocated). Default 64 MiB, minimum 1 MiB, a
    /// multiple of 4096, below 4 GiB (record offsets are 32-bit). It also bounds the largest
    /// record.
    pub segment_bytes: u64,
    /// Smallest size of a new segment file. A new segment is as large as the segments of its
    /// kind together (so the files double while the queue grows), between this and
    /// `segment_bytes`: an empty queue takes this much per kind, not `segment_bytes`.
    /// Default 1 MiB (the minimum), a multiple of 4096.
    pub segment_bytes_min: u64,
    /// Free space a new segment leaves on the file system: a segment that would eat into it
    /// is made smaller (down to `segment_bytes_min`, or what its first record needs), so the
    /// doubling never takes the room the server keeps for itself (`disk_reserve_bytes`).
    /// Default 0.
    pub disk_reserve_bytes: u64,
    /// Most records the writer commits in one round.
    pub batch_records_max: usize,
    /// Most record bytes the writer commits in one round (a single larger record still goes
    /// alone).
    pub batch_bytes_max: usize,
    /// Free (recycled) segments kept per kind for reuse; more are unlinked.
    pub free_segments_max: usize,
    /// Largest message content accepted by `enqueue`.
    pub message_bytes_max: usize,
    /// Most recipients of one message.
    pub recipients_max: usize,
    /// Longest sender or recipient address, in bytes.
    pub address_bytes_max: usize,
    /// How long the writer may hold a round open for producers that announced an enqueue
    /// ([`crate::Queue::incoming`]) and have not submitted it yet. Only announced producers
    /// are waited for, so a lone message never waits; zero disables the wait.
    pub commit_wait_max: std::time::Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            segment_bytes: 64 << 20,
            segment_bytes_min: format::SEGMENT_BYTES_MIN,
            disk_reserve_bytes: 0,
            batch_records_max: 1024,
            batch_bytes_max: 8 << 20,
            free_segments_max: 4,
            message_bytes_max: 64 << 20,
            recipients_max: 1000,
            address_bytes_max: 1024,
            commit_wait_max: std::time::Duration::from_millis(2),
        }
    }
}

impl QueueConfig {
    /// Checks the values against what the on-disk format can express.
    pub fn validate(&self) -> Result<(), QueueError> {
        let bad = |what: String| Err(QueueError::InvalidConfig(what));
        if self.segment_bytes < format::SEGMENT_BYTES_MIN {
            return bad(format!(
                "segment_bytes {} is below the minimum of 1 MiB",
                self.segment_bytes
            ));
        }
        if self.segment_bytes > u64::from(u32::MAX) {
            return bad(format!(
                "segment_bytes {} must be below 4 GiB",
                self.segment_bytes
            ));
        }
        if !self.segment_bytes.is_multiple_of(4096) {
            return bad(format!(
                "segment_bytes {} must be a multiple of 4096",
                self.segment_bytes
            ));
        }
        if self.segment_bytes_min < format::SEGMENT_BYTES_MIN
            || self.segment_bytes_min > self.segment_bytes
            || !self.segment_bytes_min.is_multiple_of(4096)
        {
            return bad(format!(
                "segment_bytes_min {} must be a multiple of 4096 between 1 MiB and segment_bytes ({})",
                self.segment_bytes_min, self.segment_bytes
            ));
        }
        if self.batch_records_max == 0 || self.batch_bytes_max == 0 {
            return bad("batch_records_max and batch_bytes_max must be at least 1".into());
        }
        if self.recipients_max == 0 || self.recipients_max > format::RECIPIENTS_LIMIT {
            return bad(format!(
                "recipients_max {} must be between 1 and {}",
                self.recipients_max,
                format::RECIPIENTS_LIMIT
            ));
        }
        if self.address_bytes_max == 0 || self.address_bytes_max > format::STRING_LIMIT {
            return bad(format!(
                "address_bytes_max {} must be between 1 and {}",
                self.address_bytes_max,
                format::STRING_LIMIT
            ));
        }
        Ok(())
    }
}
