//! Models of the storage simulator (docs/simulator.md 3), each a component on the
//! discrete-event core with its own state, random stream and statistics.
//!
//! - [`device`]: service times of a spinning disk (seek curve, rotation, zoned transfer)
//!   and of an SSD (latency, bandwidth, parallel channels).
//! - [`sched`]: I/O schedulers (noop and deadline) with request merging.
//! - [`block`]: the block layer: requests in, the scheduler's order, the device's service,
//!   completions out, with utilisation, queue length and latency.

pub mod block;
pub mod device;
pub mod localfs;
pub mod pagecache;
pub mod readahead;
pub mod sched;

/// Bytes per sector: offsets and sizes at the block layer are in sectors, as in the kernel.
pub const SECTOR_BYTES: u64 = 512;

/// A read or a write.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    #[default]
    Read,
    Write,
}

/// One request at the block layer: `sectors` sectors from `sector`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Identifies the request to whoever submitted it; a merged request carries every
    /// part's id.
    pub ids: Vec<u64>,
    pub op: Op,
    pub sector: u64,
    pub sectors: u64,
    /// A cache flush (`REQ_PREFLUSH` with no data): the device's volatile write cache
    /// reaches stable media before it completes. `sectors` is 0; never merged.
    pub flush: bool,
    /// When it was submitted (virtual ns).
    pub submitted: des::Nanos,
}

impl Request {
    /// `sectors` sectors from `sector`, submitted at `submitted`, known as `id`.
    pub fn new(id: u64, op: Op, sector: u64, sectors: u64, submitted: des::Nanos) -> Request {
        Request {
            ids: vec![id],
            op,
            sector,
            sectors,
            flush: false,
            submitted,
        }
    }

    /// A cache flush (a write of no sectors).
    pub fn cache_flush(id: u64, submitted: des::Nanos) -> Request {
        Request {
            flush: true,
            ..Request::new(id, Op::Write, 0, 0, submitted)
        }
    }

    pub fn end(&self) -> u64 {
        self.sector + self.sectors
    }

    pub fn bytes(&self) -> u64 {
        self.sectors * SECTOR_BYTES
    }
}
