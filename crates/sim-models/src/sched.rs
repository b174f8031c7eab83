//! I/O schedulers: the order in which queued requests go to the device, and the merging of
//! adjacent ones (as the kernel's elevator does before either scheduler sees them).

use std::collections::{BTreeMap, VecDeque};

use des::{MILLISECOND, Nanos};
use serde::Deserialize;

use crate::{Op, Request};

pub trait IoScheduler {
    /// Queues a request, merging it into a queued one it continues or precedes.
    fn add(&mut self, now: Nanos, req: Request);
    /// The next request for the device.
    fn next(&mut self, now: Nanos) -> Option<Request>;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Requests merged into others so far.
    fn merges(&self) -> u64;
    /// The largest request it builds (`max_sectors_kb`); submitters split larger ones.
    fn max_sectors(&self) -> u64;
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase", tag = "kind")]
pub enum SchedulerParams {
    /// First come, first served, with merging.
    Noop {
        #[serde(default = "max_sectors_default")]
        max_sectors: u64,
    },
    /// Sector order in batches, reads before writes, each with a deadline (Linux's
    /// `deadline`/`mq-deadline`: read_expire 500 ms, write_expire 5 s, fifo_batch 16,
    /// writes_starved 2).
    Deadline {
        #[serde(default = "max_sectors_default")]
        max_sectors: u64,
        #[serde(default = "read_expire_ms_default")]
        read_expire_ms: u64,
        #[serde(default = "write_expire_ms_default")]
        write_expire_ms: u64,
        #[serde(default = "fifo_batch_default")]
        fifo_batch: u32,
        #[serde(default = "writes_starved_default")]
        writes_starved: u32,
    },
}

fn max_sectors_default() -> u64 {
    // max_sectors_kb = 1280 on many disks; 1 MiB keeps the numbers round.
    2048
}
fn read_expire_ms_default() -> u64 {
    500
}
fn write_expire_ms_default() -> u64 {
    5000
}
fn fifo_batch_default() -> u32 {
    16
}
fn writes_starved_default() -> u32 {
    2
}

impl Default for SchedulerParams {
    fn default() -> Self {
        SchedulerParams::Deadline {
            max_sectors: max_sectors_default(),
            read_expire_ms: read_expire_ms_default(),
            write_expire_ms: write_expire_ms_default(),
            fifo_batch: fifo_batch_default(),
            writes_starved: writes_starved_default(),
        }
    }
}

impl SchedulerParams {
    /// The same scheduler building requests of at most `max_sectors`.
    pub fn with_max_sectors(self, max_sectors: u64) -> SchedulerParams {
        match self {
            SchedulerParams::Noop { .. } => SchedulerParams::Noop { max_sectors },
            SchedulerParams::Deadline {
                read_expire_ms,
                write_expire_ms,
                fifo_batch,
                writes_starved,
                ..
            } => SchedulerParams::Deadline {
                max_sectors,
                read_expire_ms,
                write_expire_ms,
                fifo_batch,
                writes_starved,
            },
        }
    }
}

/// Longest deadline a request may be given.
pub const EXPIRE_MS_MAX: u64 = 3_600_000;

pub fn build(p: &SchedulerParams) -> Result<Box<dyn IoScheduler>, String> {
    Ok(match *p {
        SchedulerParams::Noop { max_sectors } => {
            if max_sectors == 0 {
                return Err("max_sectors must be at least 1".into());
            }
            Box::new(Noop {
                queue: VecDeque::new(),
                max_sectors,
                merges: 0,
            })
        }
        SchedulerParams::Deadline {
            max_sectors,
            read_expire_ms,
            write_expire_ms,
            fifo_batch,
            writes_starved,
        } => {
            if max_sectors == 0 || fifo_batch == 0 {
                return Err("max_sectors and fifo_batch must be at least 1".into());
            }
            if read_expire_ms > EXPIRE_MS_MAX || write_expire_ms > EXPIRE_MS_MAX {
                return Err(format!(
                    "read_expire_ms and write_expire_ms must be at most {EXPIRE_MS_MAX} (an hour)"
                ));
            }
            Box::new(Deadline {
                sorted: [BTreeMap::new(), BTreeMap::new()],
                fifo: [VecDeque::new(), VecDeque::new()],
                expire: [read_expire_ms * MILLISECOND, write_expire_ms * MILLISECOND],
                max_sectors,
                fifo_batch,
                writes_starved,
                batch_left: 0,
                batch_dir: Op::Read,
                next_sector: 0,
                starved: 0,
                next_key: 0,
                merges: 0,
            })
        }
    })
}

/// Merges `req` into `into` if it continues or precedes it within the size limit.
fn try_merge(into: &mut Request, req: &Request, max_sectors: u64) -> bool {
    if into.op != req.op || into.flush || req.flush || into.sectors + req.sectors > max_sectors {
        return false;
    }
    if into.end() == req.sector {
        into.sectors += req.sectors;
    } else if req.end() == into.sector {
        into.sector = req.sector;
        into.sectors += req.sectors;
    } else {
        return false;
    }
    into.ids.extend_from_slice(&req.ids);
    into.submitted = into.submitted.min(req.submitted);
    true
}

struct Noop {
    queue: VecDeque<Request>,
    max_sectors: u64,
    merges: u64,
}

impl IoScheduler for Noop {
    fn add(&mut self, _now: Nanos, req: Request) {
        for q in self.queue.iter_mut().rev() {
            if try_merge(q, &req, self.max_sectors) {
                self.merges += 1;
                return;
            }
        }
        self.queue.push_back(req);
    }

    fn next(&mut self, _now: Nanos) -> Option<Request> {
        self.queue.pop_front()
    }

    fn len(&self) -> usize {
        self.queue.len()
    }

    fn merges(&self) -> u64 {
        self.merges
    }

    fn max_sectors(&self) -> u64 {
        self.max_sectors
    }
}

fn dir(op: Op) -> usize {
    match op {
        Op::Read => 0,
        Op::Write => 1,
    }
}

/// Requests by direction: sorted by sector (key: sector, then arrival) and in arrival order
/// with their deadlines.
struct Deadline {
    sorted: [BTreeMap<(u64, u64), Request>; 2],
    fifo: [VecDeque<((u64, u64), Nanos)>; 2],
    expire: [Nanos; 2],
    max_sectors: u64,
    fifo_batch: u32,
    writes_starved: u32,
    batch_left: u32,
    batch_dir: Op,
    next_sector: u64,
    /// Read batches chosen while writes waited.
    starved: u32,
    next_key: u64,
    merges: u64,
}

impl Deadline {
    fn take(&mut self, d: usize, key: (u64, u64)) -> Option<Request> {
        let req = self.sorted[d].remove(&key)?;
        self.fifo[d].retain(|(k, _)| *k != key);
        self.next_sector = req.end();
        Some(req)
    }

    /// The first request at or after the last one's end, else the lowest (one-way elevator).
    fn in_order(&self, d: usize) -> Option<(u64, u64)> {
        self.sorted[d]
            .range((self.next_sector, 0)..)
            .next()
            .or_else(|| self.sorted[d].iter().next())
            .map(|(k, _)| *k)
    }

    fn expired(&self, d: usize, now: Nanos) -> Option<(u64, u64)> {
        self.fifo[d]
            .front()
            .filter(|(_, deadline)| *deadline <= now)
            .map(|(k, _)| *k)
    }
}

impl IoScheduler for Deadline {
    fn add(&mut self, now: Nanos, req: Request) {
        let d = dir(req.op);
        // A back merge: a queued request ending where this one starts.
        let before = self.sorted[d]
            .range(..(req.sector, 0))
            .next_back()
            .map(|(k, _)| *k);
        if let Some(k) = before
            && let Some(q) = self.sorted[d].get_mut(&k)
            && try_merge(q, &req, self.max_sectors)
        {
            self.merges += 1;
            return;
        }
        // A front merge changes the merged request's sector, so it is re-keyed.
        let after = self.sorted[d]
            .range((req.end(), 0)..)
            .next()
            .map(|(k, _)| *k);
        if let Some(k) = after
            && k.0 == req.end()
            && let Some(mut q) = self.sorted[d].remove(&k)
        {
            if try_merge(&mut q, &req, self.max_sectors) {
                self.merges += 1;
                let key = (q.sector, k.1);
                for (fk, _) in self.fifo[d].iter_mut() {
                    if *fk == k {
                        *fk = key;
                    }
                }
                self.sorted[d].insert(key, q);
                return;
            }
            self.sorted[d].insert(k, q);
        }
        let key = (req.sector, self.next_key);
        self.next_key += 1;
        self.fifo[d].push_back((key, now + self.expire[d]));
        self.sorted[d].insert(key, req);
    }

    fn next(&mut self, now: Nanos) -> Option<Request> {
        // Go on with the current batch in sector order unless a deadline passed.
        if self.batch_left > 0 {
            let d = dir(self.batch_dir);
            if self.expired(d, now).is_none()
                && let Some(k) = self.sorted[d]
                    .range((self.next_sector, 0)..)
                    .next()
                    .map(|(k, _)| *k)
            {
                self.batch_left -= 1;
                return self.take(d, k);
            }
        }
        let reads = !self.sorted[0].is_empty();
        let writes = !self.sorted[1].is_empty();
        let d = match (reads, writes) {
            (false, false) => return None,
            (true, false) => 0,
            (false, true) => 1,
            // Reads first, unless writes have waited through `writes_starved` read batches.
            (true, true) if self.starved < self.writes_starved => {
                self.starved += 1;
                0
            }
            (true, true) => 1,
        };
        if d == 1 {
            self.starved = 0;
        }
        self.batch_dir = if d == 0 { Op::Read } else { Op::Write };
        self.batch_left = self.fifo_batch - 1;
        // A new batch starts at the oldest request if its deadline passed, else in order.
        let key = self.expired(d, now).or_else(|| self.in_order(d))?;
        self.take(d, key)
    }

    fn len(&self) -> usize {
        self.sorted[0].len() + self.sorted[1].len()
    }

    fn merges(&self) -> u64 {
        self.merges
    }

    fn max_sectors(&self) -> u64 {
        self.max_sectors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: u64, op: Op, sector: u64, sectors: u64) -> Request {
        Request::new(id, op, sector, sectors, 0)
    }

    fn drain(s: &mut dyn IoScheduler, now: Nanos) -> Vec<(u64, u64)> {
        std::iter::from_fn(|| s.next(now))
            .map(|r| (r.sector, r.sectors))
            .collect()
    }

    #[test]
    fn noop_keeps_arrival_order_and_merges_neighbours() {
        let mut s = build(&SchedulerParams::Noop { max_sectors: 64 }).unwrap();
        s.add(0, req(1, Op::Read, 100, 8));
        s.add(0, req(2, Op::Read, 10, 8));
        s.add(0, req(3, Op::Read, 108, 8)); // back merge into 1
        s.add(0, req(4, Op::Read, 2, 8)); // front merge into 2
        s.add(0, req(5, Op::Write, 116, 8)); // another direction: no merge
        assert_eq!(s.merges(), 2);
        assert_eq!(drain(s.as_mut(), 0), [(100, 16), (2, 16), (116, 8)]);
        // The size limit stops merging.
        let mut s = build(&SchedulerParams::Noop { max_sectors: 16 }).unwrap();
        for i in 0..4 {
            s.add(0, req(i, Op::Write, i * 8, 8));
        }
        assert_eq!(drain(s.as_mut(), 0), [(0, 16), (16, 16)]);
    }

    #[test]
    fn deadline_sorts_batches_prefers_reads_and_honours_deadlines() {
        let p = SchedulerParams::Deadline {
            max_sectors: 8,
            read_expire_ms: 500,
            write_expire_ms: 5000,
            fifo_batch: 16,
            writes_starved: 2,
        };
        let mut s = build(&p).unwrap();
        for (i, sector) in [500u64, 100, 300, 200].into_iter().enumerate() {
            s.add(0, req(i as u64, Op::Read, sector, 8));
        }
        s.add(0, req(9, Op::Write, 50, 8));
        // One sorted sweep of the reads, then the write.
        assert_eq!(
            drain(s.as_mut(), 0),
            [(100, 8), (200, 8), (300, 8), (500, 8), (50, 8)]
        );
        // An expired read jumps the sweep.
        let mut s = build(&p).unwrap();
        s.add(0, req(1, Op::Read, 900, 8));
        s.add(400 * MILLISECOND, req(2, Op::Read, 100, 8));
        s.add(400 * MILLISECOND, req(3, Op::Read, 200, 8));
        let now = 600 * MILLISECOND;
        assert_eq!(
            s.next(now).map(|r| r.sector),
            Some(900),
            "its deadline passed"
        );
        assert_eq!(drain(s.as_mut(), now), [(100, 8), (200, 8)]);
    }

    #[test]
    fn deadline_does_not_starve_writes() {
        let p = SchedulerParams::Deadline {
            max_sectors: 8,
            read_expire_ms: 500,
            write_expire_ms: 5000,
            fifo_batch: 1,
            writes_starved: 2,
        };
        let mut s = build(&p).unwrap();
        s.add(0, req(100, Op::Write, 0, 8));
        for i in 0..10 {
            s.add(0, req(i, Op::Read, 1000 + i * 100, 8));
        }
        // Batches of one: two read batches, then the waiting write.
        let ops: Vec<Op> = (0..3).filter_map(|_| s.next(0)).map(|r| r.op).collect();
        assert_eq!(ops, [Op::Read, Op::Read, Op::Write]);
    }

    #[test]
    fn deadline_merges_both_ways() {
        let mut s = build(&SchedulerParams::default()).unwrap();
        s.add(0, req(1, Op::Read, 100, 8));
        s.add(0, req(2, Op::Read, 108, 8));
        s.add(0, req(3, Op::Read, 92, 8));
        assert_eq!(s.merges(), 2);
        let r = s.next(0).unwrap();
        assert_eq!((r.sector, r.sectors), (92, 24));
        assert_eq!(r.ids.len(), 3);
        assert!(s.is_empty());
    }

    #[test]
    fn zero_limits_are_refused() {
        assert!(build(&SchedulerParams::Noop { max_sectors: 0 }).is_err());
    }
}
