//! The local file system's read path (dissertation 4.3, Figures 19 to 23): a `read()` call
//! looks up each page of its range in the page cache; a miss starts read-ahead, whose pages
//! go to the block layer as one request per contiguous run; the call waits for its own
//! pages, then pays the system call and the copy to user space (4.5). Files are laid out
//! contiguously on the device, one after another.
//!
//! Like the block layer, the model does not own the event queue: calls and completions
//! return what to schedule.

use std::collections::HashMap;
use std::ops::Range;

use des::Nanos;
use serde::Deserialize;

use crate::block::{BlockLayer, Dispatch};
use crate::pagecache::{Lookup, PAGE_BYTES, PageCache, PageKey};
use crate::readahead::{Readahead, ReadaheadParams};
use crate::{Op, Request, SECTOR_BYTES};

/// The CPU side of a call (4.5): a fixed system-call cost, and the copy between kernel and
/// user at `cached_ns_per_page` while the copied range fits the part of the CPU cache the
/// copy gets (`knee_bytes`: the dissertation measured L2 / 8) and `memory_ns_per_page` for
/// every page past it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuParams {
    pub syscall_ns: f64,
    pub knee_bytes: u64,
    pub cached_ns_per_page: f64,
    pub memory_ns_per_page: f64,
}

impl Default for CpuParams {
    fn default() -> Self {
        // Placeholders until `sim validate` measures them (docs/simulator.md 5).
        CpuParams {
            syscall_ns: 300.0,
            knee_bytes: 128 << 10,
            cached_ns_per_page: 150.0,
            memory_ns_per_page: 400.0,
        }
    }
}

impl CpuParams {
    /// The dissertation's copy cost for `bytes` (4.5): `n_thr T_L2 + x T_memory`.
    pub fn copy_ns(&self, bytes: u64) -> f64 {
        let pages = bytes.div_ceil(PAGE_BYTES) as f64;
        let fit = (self.knee_bytes / PAGE_BYTES) as f64;
        if pages <= fit {
            pages * self.cached_ns_per_page
        } else {
            fit * self.cached_ns_per_page + (pages - fit) * self.memory_ns_per_page
        }
    }

    pub fn call_ns(&self, bytes: u64) -> Nanos {
        (self.syscall_ns + self.copy_ns(bytes)).round() as Nanos
    }
}

/// A call finished at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallDone {
    pub call: u64,
    pub at: Nanos,
    /// Served without waiting for the device.
    pub hit: bool,
}

/// What a call or a completion asks the caller to schedule.
#[derive(Debug, Default)]
pub struct Step {
    pub dispatches: Vec<Dispatch>,
    pub done: Vec<CallDone>,
}

struct Waiting {
    pages_left: usize,
    cpu_ns: Nanos,
}

pub struct LocalFs {
    pub cache: PageCache,
    pub block: BlockLayer,
    readahead_params: ReadaheadParams,
    cpu: CpuParams,
    /// Per file: first sector and size in bytes.
    files: Vec<(u64, u64)>,
    readahead: HashMap<u32, Readahead>,
    waiting: HashMap<u64, Waiting>,
    page_waiters: HashMap<PageKey, Vec<u64>>,
    /// Block request id -> the pages it reads.
    reads: HashMap<u64, (u32, Range<u64>)>,
    next_request: u64,
}

impl LocalFs {
    pub fn new(
        cache: PageCache,
        block: BlockLayer,
        readahead_params: ReadaheadParams,
        cpu: CpuParams,
    ) -> LocalFs {
        LocalFs {
            cache,
            block,
            readahead_params,
            cpu,
            files: Vec::new(),
            readahead: HashMap::new(),
            waiting: HashMap::new(),
            page_waiters: HashMap::new(),
            reads: HashMap::new(),
            next_request: 0,
        }
    }

    /// Creates a file of `bytes` after the last one; returns its number.
    pub fn create(&mut self, bytes: u64) -> Result<u32, String> {
        let start = self.files.last().map_or(0, |&(s, b)| {
            s + b.div_ceil(PAGE_BYTES) * (PAGE_BYTES / SECTOR_BYTES)
        });
        let sectors = bytes.div_ceil(PAGE_BYTES) * (PAGE_BYTES / SECTOR_BYTES);
        if start + sectors > self.block.capacity_sectors() {
            return Err(format!("a {bytes}-byte file does not fit on the device"));
        }
        let n = u32::try_from(self.files.len()).map_err(|_| "too many files".to_string())?;
        self.files.push((start, bytes));
        Ok(n)
    }

    /// Puts a file's pages in the cache as if read before (a warm cache).
    pub fn warm(&mut self, file: u32) -> Result<(), String> {
        let &(_, bytes) = self.files.get(file as usize).ok_or("no such file")?;
        for page in 0..bytes.div_ceil(PAGE_BYTES) {
            if !self.cache.insert_in_flight((file, page)) {
                return Err("the page cache is full of busy pages".into());
            }
            self.cache.filled((file, page));
        }
        Ok(())
    }

    /// `read(file, offset, len)` issued at `now` by call `call`.
    pub fn read(
        &mut self,
        now: Nanos,
        call: u64,
        file: u32,
        offset: u64,
        len: u64,
    ) -> Result<Step, String> {
        let &(_, size) = self.files.get(file as usize).ok_or("no such file")?;
        let end = offset.saturating_add(len).min(size);
        let mut step = Step::default();
        let cpu_ns = self.cpu.call_ns(end.saturating_sub(offset));
        if offset >= end {
            step.done.push(CallDone {
                call,
                at: now + cpu_ns,
                hit: true,
            });
            return Ok(step);
        }
        let file_pages = size.div_ceil(PAGE_BYTES);
        let pages = offset / PAGE_BYTES..end.div_ceil(PAGE_BYTES);
        let mut missed = false;
        for p in pages.clone() {
            if self.cache.access((file, p)) == Lookup::Miss {
                missed = true;
            }
        }
        let ra = self.readahead.entry(file).or_default();
        let fetch = if missed {
            Some(ra.on_miss(&self.readahead_params, pages.clone(), file_pages))
        } else {
            ra.on_hit(&self.readahead_params, pages.clone(), file_pages)
        };
        if let Some(range) = fetch {
            self.fetch(now, file, range, &mut step)?;
        }
        let waiting: Vec<PageKey> = pages
            .map(|p| (file, p))
            .filter(|&k| self.cache.is_in_flight(k))
            .collect();
        if waiting.is_empty() {
            step.done.push(CallDone {
                call,
                at: now + cpu_ns,
                hit: !missed,
            });
        } else {
            for k in &waiting {
                self.page_waiters.entry(*k).or_default().push(call);
            }
            self.waiting.insert(
                call,
                Waiting {
                    pages_left: waiting.len(),
                    cpu_ns,
                },
            );
        }
        Ok(step)
    }

    /// Reads the pages of `range` that are not in the cache, one request per contiguous run.
    fn fetch(
        &mut self,
        now: Nanos,
        file: u32,
        range: Range<u64>,
        step: &mut Step,
    ) -> Result<(), String> {
        let start_sector = self.files[file as usize].0;
        let mut run: Option<Range<u64>> = None;
        let pages_per = PAGE_BYTES / SECTOR_BYTES;
        let flush = |fs: &mut LocalFs, r: Range<u64>, step: &mut Step| -> Result<(), String> {
            let id = fs.next_request;
            fs.next_request += 1;
            fs.reads.insert(id, (file, r.clone()));
            let req = Request {
                ids: vec![id],
                op: Op::Read,
                sector: start_sector + r.start * pages_per,
                sectors: (r.end - r.start) * pages_per,
                submitted: now,
            };
            step.dispatches.extend(fs.block.submit(now, req)?);
            Ok(())
        };
        for p in range {
            if self.cache.contains((file, p)) {
                if let Some(r) = run.take() {
                    flush(self, r, step)?;
                }
                continue;
            }
            if !self.cache.insert_in_flight((file, p)) {
                return Err("the page cache is full of pages being read".into());
            }
            run = Some(match run {
                Some(r) => r.start..p + 1,
                None => p..p + 1,
            });
        }
        if let Some(r) = run {
            flush(self, r, step)?;
        }
        Ok(())
    }

    /// The device finished `req` at `now`.
    pub fn complete(&mut self, now: Nanos, req: &Request) -> Step {
        let mut step = Step {
            dispatches: self.block.complete(now, req),
            done: Vec::new(),
        };
        for id in &req.ids {
            let Some((file, pages)) = self.reads.remove(id) else {
                continue;
            };
            for p in pages {
                self.cache.filled((file, p));
                for call in self.page_waiters.remove(&(file, p)).unwrap_or_default() {
                    let Some(w) = self.waiting.get_mut(&call) else {
                        continue;
                    };
                    w.pages_left -= 1;
                    if w.pages_left == 0 {
                        let cpu_ns = w.cpu_ns;
                        self.waiting.remove(&call);
                        step.done.push(CallDone {
                            call,
                            at: now + cpu_ns,
                            hit: false,
                        });
                    }
                }
            }
        }
        step
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Hdd, HddParams};
    use crate::sched::{SchedulerParams, build};
    use des::Scheduler;

    fn fs(cache_pages: u64) -> LocalFs {
        let block = BlockLayer::new(
            Box::new(Hdd::new(HddParams::default()).unwrap()),
            build(&SchedulerParams::default()).unwrap(),
            des::stream(1, 1),
        );
        LocalFs::new(
            PageCache::new(cache_pages),
            block,
            ReadaheadParams::default(),
            CpuParams::default(),
        )
    }

    enum Ev {
        Io(Request),
        Call(CallDone),
    }

    /// Reads `file` from start to end in `record` calls, one at a time; returns the time
    /// and the calls that waited for the device.
    fn read_through(fs: &mut LocalFs, file: u32, size: u64, record: u64) -> (Nanos, u64) {
        let mut sim: Scheduler<Ev> = Scheduler::new();
        let mut offset = 0;
        let mut misses = 0;
        let mut call = 0;
        let apply = |sim: &mut Scheduler<Ev>, step: Step| {
            for d in step.dispatches {
                sim.at(d.at, Ev::Io(d.req));
            }
            for c in step.done {
                sim.at(c.at, Ev::Call(c));
            }
        };
        let start = sim.now();
        let step = fs.read(0, call, file, offset, record).unwrap();
        apply(&mut sim, step);
        while let Some(ev) = sim.pop() {
            let now = sim.now();
            match ev {
                Ev::Io(r) => {
                    let step = fs.complete(now, &r);
                    apply(&mut sim, step);
                }
                Ev::Call(c) => {
                    misses += u64::from(!c.hit);
                    offset += record;
                    if offset < size {
                        call += 1;
                        let step = fs.read(now, call, file, offset, record).unwrap();
                        apply(&mut sim, step);
                    }
                }
            }
        }
        (sim.now() - start, misses)
    }

    #[test]
    fn a_cold_sequential_read_streams_with_read_ahead_and_a_warm_one_only_copies() {
        let mut f = fs(1 << 20);
        let size = 64 << 20;
        let file = f.create(size).unwrap();
        let (cold, waited) = read_through(&mut f, file, size, 64 << 10);
        let cold_mb_s = size as f64 / (cold as f64 / 1e9) / 1e6;
        // Read-ahead keeps the disk streaming: close to its 200 MB/s.
        assert!((150.0..201.0).contains(&cold_mb_s), "{cold_mb_s} MB/s");
        assert!(waited < 1024, "{waited} of 1024 calls waited");
        // Again: every page cached, only system calls and copies.
        let (warm, waited) = read_through(&mut f, file, size, 64 << 10);
        assert_eq!(waited, 0);
        let per_call = warm as f64 / 1024.0;
        assert!((per_call - CpuParams::default().call_ns(64 << 10) as f64).abs() < 1.0);
    }

    #[test]
    fn the_copy_cost_has_its_knee_where_the_cache_ends() {
        let cpu = CpuParams::default();
        let per_page = |bytes: u64| cpu.copy_ns(bytes) / (bytes / PAGE_BYTES) as f64;
        assert_eq!(per_page(4096), 150.0);
        assert_eq!(per_page(128 << 10), 150.0);
        assert!(per_page(256 << 10) > 150.0);
        // Far past the knee the cost per page tends to the memory's.
        assert!((per_page(64 << 20) - 400.0).abs() < 1.0);
    }

    #[test]
    fn a_file_larger_than_the_cache_is_read_cold_every_time() {
        // 16 MiB of cache, a 64 MiB file read twice: the second pass finds nothing.
        let mut f = fs(4096);
        let size = 64 << 20;
        let file = f.create(size).unwrap();
        read_through(&mut f, file, size, 1 << 20);
        let hits_before = f.cache.stats.hits;
        let (_, waited) = read_through(&mut f, file, size, 1 << 20);
        assert!(waited > 50, "{waited} of 64 calls waited");
        assert!(f.cache.len() <= 4096);
        assert!(f.cache.stats.evictions > 0 && f.cache.stats.hits >= hits_before);
    }

    #[test]
    fn files_must_fit_on_the_device() {
        let mut f = fs(16);
        assert!(f.create(2_000_000_000_000).is_err());
        assert!(f.read(0, 0, 7, 0, 1).is_err());
    }
}
