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
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuParams {
    pub syscall_ns: f64,
    pub knee_bytes: u64,
    pub cached_ns_per_page: f64,
    pub memory_ns_per_page: f64,
    /// The first page of a read that does not follow the previous one: its source is not
    /// streaming through the CPU's prefetchers.
    pub random_page_ns: f64,
    /// Per page a call touches, besides the copy: the page cache lookup and accounting
    /// (the dissertation's per-page loop in `generic_file_read`).
    pub page_lookup_ns: f64,
    /// Per page a `write()` puts in the cache, besides the copy: allocating the page,
    /// the file system's `write_begin`/`write_end`, dirty accounting.
    pub write_page_ns: f64,
    /// Per `write()` call, besides the system call and its pages: the file system's
    /// per-call work (`ext4_da_write_begin`'s journal and reservation checks, the
    /// `file_update_time` and `balance_dirty_pages_ratelimited` calls). Large writes hide
    /// it; a 4 KiB write into a dropped file costs several times its page.
    #[serde(default)]
    pub write_call_ns: f64,
}

impl Default for CpuParams {
    fn default() -> Self {
        // Placeholders until `sim validate` measures them (docs/simulator.md 5).
        CpuParams {
            syscall_ns: 300.0,
            knee_bytes: 128 << 10,
            cached_ns_per_page: 150.0,
            memory_ns_per_page: 400.0,
            random_page_ns: 0.0,
            page_lookup_ns: 0.0,
            write_page_ns: 0.0,
            write_call_ns: 0.0,
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
        let pages = bytes.div_ceil(PAGE_BYTES) as f64;
        (self.syscall_ns + self.copy_ns(bytes) + pages * self.page_lookup_ns).round() as Nanos
    }
}

/// How dirty pages reach the device (the kernel's writeback and the ext3/ext4 journal).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WritebackParams {
    /// Past this share of the page cache dirty, the flusher writes in the background.
    pub dirty_background_ratio: f64,
    /// Past this share, a writing call itself waits for writeback (throttling).
    pub dirty_ratio: f64,
    /// Pages dirty this long are written at the flusher's next wake-up.
    pub dirty_expire_ms: u64,
    /// The flusher's period (`dirty_writeback_centisecs`).
    pub writeback_interval_ms: u64,
    pub journal: JournalMode,
    pub journal_bytes: u64,
    /// The journal commits a transaction this often (`commit=`).
    pub commit_interval_ms: u64,
    /// Pages the flusher writes per pass.
    pub flush_pages: u64,
    /// The coarse clock's tick that stamps a file's modification time: an overwrite
    /// dirties the inode (metadata a sync must commit) only when the clock has moved.
    pub timestamp_granularity_ns: u64,
    /// What freeing a file's blocks (a truncate) costs its caller: a fixed part and a part
    /// per MiB freed. Mounted with online discard and without a journal, ext4 issues the
    /// discard in `ext4_free_blocks` and waits for it (190 us plus 0.13 ms per MiB here);
    /// with a journal the discard follows the commit and the caller pays almost nothing.
    pub truncate_us: f64,
    pub truncate_us_per_mib: f64,
}

impl WritebackParams {
    /// What truncating `bytes` off a file costs its caller, in ns.
    pub fn truncate_ns(&self, bytes: u64) -> Nanos {
        let mib = bytes as f64 / (1 << 20) as f64;
        ((self.truncate_us + mib * self.truncate_us_per_mib) * 1e3).round() as Nanos
    }
}

impl Default for WritebackParams {
    fn default() -> Self {
        WritebackParams {
            dirty_background_ratio: 0.10,
            dirty_ratio: 0.20,
            dirty_expire_ms: 30_000,
            writeback_interval_ms: 5_000,
            journal: JournalMode::Ordered,
            journal_bytes: 128 << 20,
            commit_interval_ms: 5_000,
            flush_pages: 1024,
            timestamp_granularity_ns: 4_000_000,
            truncate_us: 0.0,
            truncate_us_per_mib: 0.0,
        }
    }
}

/// ext3/ext4 `data=` modes (dissertation 4.4, 5.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JournalMode {
    /// Metadata journaled; a transaction's data is written home before its commit.
    Ordered,
    /// Metadata journaled; data written home whenever.
    Writeback,
    /// Data and metadata journaled: every byte is written twice, to the journal and home.
    Data,
    /// No journal (ext4 made without one, as this project's machine's root, or ext2): a
    /// sync writes the data and then the inode in place, and flushes; nothing commits.
    #[serde(rename = "none")]
    NoJournal,
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

impl Step {
    fn finish(&mut self, call: u64, at: Nanos, hit: bool) {
        self.done.push(CallDone { call, at, hit });
    }
}

/// Why a device write was issued.
/// Where a sync (fsync, O_SYNC) is. jbd2 writes a commit's body, then its commit block
/// with PREFLUSH and FUA: on a device without FUA (most virtual disks), a flush, the
/// block, and a flush. A sync that commits nothing ends with a flush of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SyncStage {
    /// Ordered mode: the data goes home before the commit.
    Data,
    /// The journal body (and, in writeback mode, the data).
    Body,
    PreFlush,
    /// The last write before the final flush: the commit block, or in writeback mode data
    /// that needed no commit.
    Tail,
    Flush,
}

#[derive(Debug, Clone)]
enum WriteKind {
    /// Pages written to their home location.
    Home(Vec<PageKey>),
    /// A journal write (descriptor, metadata, data in data mode, commit) of `pages` pages,
    /// or without a journal an inode written in place.
    Journal,
    /// A sync's cache flush.
    Flush,
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
    /// Where each file's last read and last write ended (page), for the random-access
    /// cost.
    last_read_end: HashMap<u32, u64>,
    last_write_end: HashMap<u32, u64>,
    waiting: HashMap<u64, Waiting>,
    page_waiters: HashMap<PageKey, Vec<u64>>,
    /// Block request id -> the pages it reads.
    reads: HashMap<u64, (u32, Range<u64>)>,
    next_request: u64,
    wb: WritebackParams,
    /// Dirty pages, in file order, with the time each became dirty.
    dirty: std::collections::BTreeMap<PageKey, Nanos>,
    /// Pages dirtied since the last journal commit.
    txn: std::collections::BTreeSet<PageKey>,
    /// Block request id -> what it writes.
    writes: HashMap<u64, WriteKind>,
    /// The background flusher's requests.
    flusher_requests: std::collections::HashSet<u64>,
    /// A checkpoint's home writes in flight: the journal's space returns when they finish.
    checkpoint_requests: std::collections::HashSet<u64>,
    /// Writers waiting for journal space.
    journal_waiters: Vec<(u64, Nanos)>,
    /// Pages being written home.
    under_writeback: u64,
    /// The background flusher's requests in flight (0: idle).
    flusher_in_flight: u64,
    /// Calls waiting for the dirty count to fall under the limit.
    throttled: Vec<(u64, Nanos)>,
    /// Calls waiting for particular requests (fsync, O_SYNC): call -> (requests left, cpu,
    /// what those requests are).
    syncing: HashMap<u64, (u64, Nanos, SyncStage)>,
    request_waiters: HashMap<u64, Vec<u64>>,
    /// The running transaction holds metadata (an inode whose modification time moved):
    /// without it, ordered and writeback modes have nothing to commit.
    metadata_dirty: bool,
    /// Per file: the coarse-clock tick of its modification time.
    mtime_tick: HashMap<u32, u64>,
    /// Next journal block (sector offset in the journal area) and pages journaled since
    /// the last checkpoint.
    journal_head: u64,
    journal_used: u64,
    last_commit: Nanos,
    /// Bytes written home and to the journal.
    pub home_bytes: u64,
    pub journal_written_bytes: u64,
}

impl LocalFs {
    pub fn new(
        cache: PageCache,
        block: BlockLayer,
        readahead_params: ReadaheadParams,
        cpu: CpuParams,
    ) -> LocalFs {
        Self::with_writeback(
            cache,
            block,
            readahead_params,
            cpu,
            WritebackParams::default(),
        )
    }

    pub fn with_writeback(
        cache: PageCache,
        block: BlockLayer,
        readahead_params: ReadaheadParams,
        cpu: CpuParams,
        wb: WritebackParams,
    ) -> LocalFs {
        LocalFs {
            cache,
            block,
            readahead_params,
            cpu,
            files: Vec::new(),
            readahead: HashMap::new(),
            last_read_end: HashMap::new(),
            last_write_end: HashMap::new(),
            waiting: HashMap::new(),
            page_waiters: HashMap::new(),
            reads: HashMap::new(),
            next_request: 0,
            wb,
            dirty: Default::default(),
            txn: Default::default(),
            writes: HashMap::new(),
            flusher_requests: Default::default(),
            checkpoint_requests: Default::default(),
            journal_waiters: Vec::new(),
            under_writeback: 0,
            flusher_in_flight: 0,
            throttled: Vec::new(),
            syncing: HashMap::new(),
            request_waiters: HashMap::new(),
            metadata_dirty: false,
            mtime_tick: HashMap::new(),
            journal_head: 0,
            journal_used: 0,
            last_commit: 0,
            home_bytes: 0,
            journal_written_bytes: 0,
        }
    }

    fn journal_sectors(&self) -> u64 {
        self.wb.journal_bytes / SECTOR_BYTES
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

    /// A call's file size, the end of its range within the file, and its CPU time.
    fn call_range(&self, file: u32, offset: u64, len: u64) -> Result<(u64, u64, Nanos), String> {
        let &(_, size) = self.files.get(file as usize).ok_or("no such file")?;
        let end = offset.saturating_add(len).min(size);
        Ok((size, end, self.cpu.call_ns(end.saturating_sub(offset))))
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
        let (size, end, cpu_ns) = self.call_range(file, offset, len)?;
        let mut step = Step::default();
        if offset >= end {
            step.finish(call, now + cpu_ns, true);
            return Ok(step);
        }
        let file_pages = size.div_ceil(PAGE_BYTES);
        let pages = offset / PAGE_BYTES..end.div_ceil(PAGE_BYTES);
        let follows = continues(&mut self.last_read_end, file, &pages);
        let cpu_ns = if follows {
            cpu_ns
        } else {
            cpu_ns + self.cpu.random_page_ns.round() as Nanos
        };
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
            step.finish(call, now + cpu_ns, !missed);
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

    /// The most pages one request carries: runs longer than this go out in pieces.
    fn max_request_pages(&self) -> u64 {
        (self.block.max_request_sectors() / (PAGE_BYTES / SECTOR_BYTES)).max(1)
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
            let req = Request::new(
                id,
                Op::Read,
                start_sector + r.start * pages_per,
                (r.end - r.start) * pages_per,
                now,
            );
            step.dispatches.extend(fs.block.submit(now, req)?);
            Ok(())
        };
        let max_pages = self.max_request_pages();
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
            if let Some(r) = run.take_if(|r| r.end - r.start >= max_pages) {
                flush(self, r, step)?;
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
    pub fn complete(&mut self, now: Nanos, req: &Request) -> Result<Step, String> {
        let mut step = Step {
            dispatches: self.block.complete(now, req),
            done: Vec::new(),
        };
        for id in &req.ids {
            if let Some(kind) = self.writes.remove(id) {
                self.write_done(now, *id, kind, &mut step)?;
                continue;
            }
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
                        step.finish(call, now + cpu_ns, false);
                    }
                }
            }
        }
        // Throttled writers go on once dirty and in-writeback pages are under the limit;
        // while they wait, writeback keeps going.
        if !self.throttled.is_empty() {
            if self.dirty.len() as u64 + self.under_writeback <= self.dirty_limit() {
                for (call, cpu_ns) in self.throttled.drain(..) {
                    step.finish(call, now + cpu_ns, false);
                }
            } else if self.under_writeback == 0 {
                let keys = self.first_dirty(self.wb.flush_pages);
                self.start_writeback(now, keys, &mut step, false)?;
            }
        }
        if self.flusher_in_flight == 0 && self.dirty.len() as u64 > self.background_limit() {
            self.flush(now, &mut step)?;
        }
        Ok(step)
    }

    fn write_done(
        &mut self,
        now: Nanos,
        id: u64,
        kind: WriteKind,
        step: &mut Step,
    ) -> Result<(), String> {
        if let WriteKind::Home(keys) = kind {
            self.under_writeback -= keys.len() as u64;
            self.home_bytes += keys.len() as u64 * PAGE_BYTES;
            for k in keys {
                // Dirtied again while it was being written: it stays dirty.
                if !self.dirty.contains_key(&k) {
                    self.cache.set_dirty(k, false);
                }
            }
        }
        if self.flusher_requests.remove(&id) {
            self.flusher_in_flight -= 1;
        }
        if self.checkpoint_requests.remove(&id) && self.checkpoint_requests.is_empty() {
            self.journal_space_freed(now, step)?;
        }
        for call in self.request_waiters.remove(&id).unwrap_or_default() {
            let Some((left, cpu_ns, stage)) = self.syncing.get_mut(&call) else {
                continue;
            };
            *left -= 1;
            if *left > 0 {
                continue;
            }
            let (cpu_ns, stage) = (*cpu_ns, *stage);
            self.syncing.remove(&call);
            let (ids, next) = match stage {
                SyncStage::Data => {
                    // Ordered mode: the data is on the device; now the commit.
                    let ids = self.commit(now, step, false)?;
                    if ids.is_empty() {
                        (vec![self.submit_flush(now, step)?], SyncStage::Flush)
                    } else {
                        (ids, SyncStage::Body)
                    }
                }
                SyncStage::Body => (vec![self.submit_flush(now, step)?], SyncStage::PreFlush),
                SyncStage::PreFlush => (self.journal_write(now, 1, step)?, SyncStage::Tail),
                SyncStage::Tail => (vec![self.submit_flush(now, step)?], SyncStage::Flush),
                SyncStage::Flush => {
                    step.finish(call, now + cpu_ns, false);
                    continue;
                }
            };
            self.wait_for(call, cpu_ns, next, ids);
        }
        Ok(())
    }

    fn wait_for(&mut self, call: u64, cpu_ns: Nanos, stage: SyncStage, ids: Vec<u64>) {
        self.syncing.insert(call, (ids.len() as u64, cpu_ns, stage));
        for id in ids {
            self.request_waiters.entry(id).or_default().push(call);
        }
    }

    fn dirty_limit(&self) -> u64 {
        (self.cache.capacity() as f64 * self.wb.dirty_ratio) as u64
    }

    fn background_limit(&self) -> u64 {
        (self.cache.capacity() as f64 * self.wb.dirty_background_ratio) as u64
    }

    /// Dirty pages, by the most pages in file order (what writeback takes next).
    pub fn dirty_pages(&self) -> u64 {
        self.dirty.len() as u64
    }

    fn first_dirty(&self, n: u64) -> Vec<PageKey> {
        self.dirty.keys().take(n as usize).copied().collect()
    }

    /// `write(file, offset, len)` at `now` by call `call`: pages of the range become dirty
    /// (whole-page writes: no page is read first). A call that finds too many pages dirty
    /// waits for writeback (throttling); with `sync` (O_SYNC) it returns once its pages and
    /// a journal commit are on the device.
    pub fn write(
        &mut self,
        now: Nanos,
        call: u64,
        file: u32,
        offset: u64,
        len: u64,
        sync: bool,
    ) -> Result<Step, String> {
        let (_, end, cpu_ns) = self.call_range(file, offset, len)?;
        let mut step = Step::default();
        if offset >= end {
            step.finish(call, now + cpu_ns, true);
            return Ok(step);
        }
        let pages = offset / PAGE_BYTES..end.div_ceil(PAGE_BYTES);
        // A write that does not follow the last one starts where no CPU cache or TLB has
        // the page cache's tree, as a read does.
        let follows = continues(&mut self.last_write_end, file, &pages);
        let random_ns = if follows {
            0.0
        } else {
            self.cpu.random_page_ns
        };
        let cpu_ns = cpu_ns
            + ((pages.end - pages.start) as f64 * self.cpu.write_page_ns
                + self.cpu.write_call_ns
                + random_ns)
                .round() as Nanos;
        // `file_update_time`: the stamp comes from the coarse clock, so the inode is
        // dirtied once per tick however many writes fall in it.
        let tick = now / self.wb.timestamp_granularity_ns.max(1);
        if self.mtime_tick.insert(file, tick) != Some(tick) {
            self.metadata_dirty = true;
        }
        for p in pages.clone() {
            let key = (file, p);
            if self.cache.contains(key) {
                self.cache.access(key);
            } else if self.cache.insert_in_flight(key) {
                self.cache.filled(key);
            } else {
                // Every page is dirty or busy: wait for writeback.
                self.throttled.push((call, cpu_ns));
                if self.under_writeback == 0 {
                    let keys = self.first_dirty(self.wb.flush_pages);
                    self.start_writeback(now, keys, &mut step, false)?;
                }
                return Ok(step);
            }
            self.cache.set_dirty(key, true);
            self.dirty.entry(key).or_insert(now);
            self.txn.insert(key);
        }
        if sync {
            let keys: Vec<PageKey> = pages.map(|p| (file, p)).collect();
            self.sync(now, call, cpu_ns, keys, &mut step)?;
            return Ok(step);
        }
        // A transaction may fill at most a quarter of the journal: then it commits at once
        // (in the background; the writer does not wait for it) unless the journal has no
        // room, when the writer waits for a checkpoint to free it.
        if self.txn_journal_pages() * PAGE_BYTES >= self.wb.journal_bytes / 4 {
            let room = self.wb.journal_bytes / PAGE_BYTES;
            if self.journal_used + self.txn_journal_pages() > room {
                self.journal_waiters.push((call, cpu_ns));
                if self.checkpoint_requests.is_empty() {
                    self.checkpoint(now, &mut step)?;
                }
                return Ok(step);
            }
            self.commit(now, &mut step, true)?;
        }
        if self.dirty.len() as u64 + self.under_writeback > self.dirty_limit() {
            self.throttled.push((call, cpu_ns));
            if self.under_writeback == 0 {
                let keys = self.first_dirty(self.wb.flush_pages);
                self.start_writeback(now, keys, &mut step, false)?;
            }
            return Ok(step);
        }
        if self.flusher_in_flight == 0 && self.dirty.len() as u64 > self.background_limit() {
            self.flush(now, &mut step)?;
        }
        step.finish(call, now + cpu_ns, true);
        Ok(step)
    }

    /// `fsync(file)`: the file's dirty pages and a journal commit, then the call returns.
    pub fn fsync(&mut self, now: Nanos, call: u64, file: u32) -> Result<Step, String> {
        let keys: Vec<PageKey> = self
            .dirty
            .range((file, 0)..(file.saturating_add(1), 0))
            .map(|(k, _)| *k)
            .collect();
        let mut step = Step::default();
        let cpu_ns = self.cpu.syscall_ns.round() as Nanos;
        self.sync(now, call, cpu_ns, keys, &mut step)?;
        Ok(step)
    }

    fn sync(
        &mut self,
        now: Nanos,
        call: u64,
        cpu_ns: Nanos,
        keys: Vec<PageKey>,
        step: &mut Step,
    ) -> Result<(), String> {
        // ext4_sync_file: whatever was written, the device's cache is flushed last (the
        // journal commit's PREFLUSH/FUA, or a flush of its own when nothing commits).
        let mut ids = Vec::new();
        match self.wb.journal {
            // The commit puts the data in the journal; its home write can wait.
            JournalMode::Data => {}
            // The data first; the commit goes out when it is on the device (`write_done`).
            JournalMode::Ordered => {
                ids.extend(self.start_writeback(now, keys, step, false)?);
                if !ids.is_empty() {
                    self.wait_for(call, cpu_ns, SyncStage::Data, ids);
                    return Ok(());
                }
            }
            // No ordering between the data and the commit (or the inode's write).
            JournalMode::Writeback | JournalMode::NoJournal => {
                ids.extend(self.start_writeback(now, keys, step, false)?)
            }
        }
        let body = self.commit(now, step, false)?;
        let committing = !body.is_empty() && self.wb.journal != JournalMode::NoJournal;
        ids.extend(body);
        if ids.is_empty() {
            let flush = vec![self.submit_flush(now, step)?];
            self.wait_for(call, cpu_ns, SyncStage::Flush, flush);
            return Ok(());
        }
        // Writeback mode's data without a commit: then straight to the final flush.
        let stage = if committing {
            SyncStage::Body
        } else {
            SyncStage::Tail
        };
        self.wait_for(call, cpu_ns, stage, ids);
        Ok(())
    }

    fn submit_flush(&mut self, now: Nanos, step: &mut Step) -> Result<u64, String> {
        let id = self.next_request;
        self.next_request += 1;
        self.writes.insert(id, WriteKind::Flush);
        let req = Request::cache_flush(id, now);
        step.dispatches.extend(self.block.submit(now, req)?);
        Ok(id)
    }

    /// Writes `keys` that are still dirty to their home locations, one request per
    /// contiguous run; returns the request ids.
    fn start_writeback(
        &mut self,
        now: Nanos,
        mut keys: Vec<PageKey>,
        step: &mut Step,
        flusher: bool,
    ) -> Result<Vec<u64>, String> {
        keys.sort_unstable();
        let mut ids = Vec::new();
        let mut run: Vec<PageKey> = Vec::new();
        let max_pages = self.max_request_pages();
        for key in keys {
            if self.dirty.remove(&key).is_none() {
                continue;
            }
            if let Some(&(f, p)) = run.last()
                && (f != key.0 || p + 1 != key.1 || run.len() as u64 >= max_pages)
            {
                ids.push(self.submit_home(now, std::mem::take(&mut run), step)?);
            }
            run.push(key);
        }
        if !run.is_empty() {
            ids.push(self.submit_home(now, run, step)?);
        }
        if flusher {
            self.flusher_in_flight += ids.len() as u64;
            self.flusher_requests.extend(ids.iter().copied());
        }
        Ok(ids)
    }

    fn submit_home(
        &mut self,
        now: Nanos,
        run: Vec<PageKey>,
        step: &mut Step,
    ) -> Result<u64, String> {
        let (file, first) = run[0];
        let pages = run.len() as u64;
        let id = self.next_request;
        self.next_request += 1;
        self.under_writeback += pages;
        self.writes.insert(id, WriteKind::Home(run));
        let per = PAGE_BYTES / SECTOR_BYTES;
        let req = Request::new(
            id,
            Op::Write,
            self.files[file as usize].0 + first * per,
            pages * per,
            now,
        );
        step.dispatches.extend(self.block.submit(now, req)?);
        Ok(id)
    }

    /// `pages` journal blocks written at the journal's head, sequentially, wrapping at the
    /// journal's end (one request per piece of at most the queue's largest).
    fn journal_write(
        &mut self,
        now: Nanos,
        pages: u64,
        step: &mut Step,
    ) -> Result<Vec<u64>, String> {
        let per = PAGE_BYTES / SECTOR_BYTES;
        let mut left = pages * per;
        let mut ids = Vec::new();
        while left > 0 {
            if self.journal_head >= self.journal_sectors() {
                self.journal_head = 0;
            }
            let sectors = left
                .min(self.journal_sectors() - self.journal_head)
                .min(self.block.max_request_sectors());
            let id = self.next_request;
            self.next_request += 1;
            self.writes.insert(id, WriteKind::Journal);
            let req = Request::new(id, Op::Write, self.journal_head, sectors, now);
            self.journal_head += sectors;
            self.journal_written_bytes += sectors * SECTOR_BYTES;
            step.dispatches.extend(self.block.submit(now, req)?);
            ids.push(id);
            left -= sectors;
        }
        self.journal_used += pages;
        Ok(ids)
    }

    /// Without a journal: the file's inode block written in place, at the device's start
    /// (where the inode table of its first block group would be).
    fn metadata_write(&mut self, now: Nanos, step: &mut Step) -> Result<u64, String> {
        let id = self.next_request;
        self.next_request += 1;
        self.writes.insert(id, WriteKind::Journal);
        let req = Request::new(id, Op::Write, 0, PAGE_BYTES / SECTOR_BYTES, now);
        step.dispatches.extend(self.block.submit(now, req)?);
        Ok(id)
    }

    /// Journal blocks the running transaction will take at its commit.
    fn txn_journal_pages(&self) -> u64 {
        let pages = self.txn.len() as u64;
        let data = if self.wb.journal == JournalMode::Data {
            pages
        } else {
            0
        };
        2 + pages.div_ceil(512) + data
    }

    /// Commits the running transaction: in ordered mode its data goes home first (here:
    /// with the commit, the caller waiting for both), in data mode into the journal; every
    /// mode writes a descriptor, one metadata block per 512 pages touched, and a commit
    /// block. Past half the journal, a checkpoint writes everything journaled home.
    /// A sync writes the commit block itself, after the body and a flush
    /// (`with_commit_block` false); a background commit writes it with the body.
    fn commit(
        &mut self,
        now: Nanos,
        step: &mut Step,
        with_commit_block: bool,
    ) -> Result<Vec<u64>, String> {
        let pages: Vec<PageKey> = std::mem::take(&mut self.txn).into_iter().collect();
        self.last_commit = now;
        let mut ids = Vec::new();
        // Overwrites within one clock tick change no metadata: in ordered and writeback
        // mode the transaction is empty (the data is written back as any dirty page).
        let inode_dirty = std::mem::take(&mut self.metadata_dirty);
        if pages.is_empty() || (!inode_dirty && self.wb.journal != JournalMode::Data) {
            return Ok(ids);
        }
        if self.wb.journal == JournalMode::NoJournal {
            // The inode's block, in place (the inode table sits where a journal would).
            ids.push(self.metadata_write(now, step)?);
            return Ok(ids);
        }
        if self.wb.journal == JournalMode::Ordered {
            ids.extend(self.start_writeback(now, pages.clone(), step, false)?);
        }
        let metadata = 1 + u64::from(with_commit_block) + (pages.len() as u64).div_ceil(512);
        let data = if self.wb.journal == JournalMode::Data {
            pages.len() as u64
        } else {
            0
        };
        ids.extend(self.journal_write(now, metadata + data, step)?);
        if self.journal_used * PAGE_BYTES > self.wb.journal_bytes / 2
            && self.checkpoint_requests.is_empty()
        {
            self.checkpoint(now, step)?;
        }
        Ok(ids)
    }

    /// Writes everything journaled home (every dirty page: the model does not tell
    /// journaled pages from others); the journal's space is free once those writes finish
    /// (5.7: checkpointing at half the journal).
    fn checkpoint(&mut self, now: Nanos, step: &mut Step) -> Result<(), String> {
        let all: Vec<PageKey> = self.dirty.keys().copied().collect();
        let ids = self.start_writeback(now, all, step, false)?;
        if ids.is_empty() {
            self.journal_space_freed(now, step)?;
        }
        self.checkpoint_requests.extend(ids);
        Ok(())
    }

    fn journal_space_freed(&mut self, now: Nanos, step: &mut Step) -> Result<(), String> {
        self.journal_used = 0;
        let waiters = std::mem::take(&mut self.journal_waiters);
        if !waiters.is_empty() {
            self.commit(now, step, true)?;
        }
        for (call, cpu_ns) in waiters {
            step.finish(call, now + cpu_ns, false);
        }
        Ok(())
    }

    /// Background writeback: the next `flush_pages` dirty pages in file order.
    fn flush(&mut self, now: Nanos, step: &mut Step) -> Result<(), String> {
        let keys = self.first_dirty(self.wb.flush_pages);
        self.start_writeback(now, keys, step, true)?;
        Ok(())
    }

    /// The flusher's periodic wake-up: pages dirty longer than `dirty_expire_ms` are
    /// written, and the journal commits if its interval passed. Returns when to call again.
    pub fn tick(&mut self, now: Nanos) -> Result<(Step, Nanos), String> {
        let mut step = Step::default();
        let expire = now.saturating_sub(self.wb.dirty_expire_ms * des::MILLISECOND);
        let old: Vec<PageKey> = self
            .dirty
            .iter()
            .filter(|&(_, &since)| since <= expire)
            .map(|(k, _)| *k)
            .collect();
        if !old.is_empty() {
            self.start_writeback(now, old, &mut step, true)?;
        }
        if now.saturating_sub(self.last_commit) >= self.wb.commit_interval_ms * des::MILLISECOND {
            self.commit(now, &mut step, true)?;
        }
        let next = now + self.wb.writeback_interval_ms.max(1) * des::MILLISECOND;
        Ok((step, next))
    }
}

/// Whether a call on `pages` of `file` starts where the last one ended; records where it
/// ends.
fn continues(last_end: &mut HashMap<u32, u64>, file: u32, pages: &Range<u64>) -> bool {
    last_end.insert(file, pages.end) == Some(pages.start)
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
    /// Reads all of `file` in `record`s on `sim`'s clock, which goes on from the last pass.
    fn read_through(
        sim: &mut Scheduler<Ev>,
        fs: &mut LocalFs,
        file: u32,
        size: u64,
        record: u64,
    ) -> (Nanos, u64) {
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
        let step = fs.read(start, call, file, offset, record).unwrap();
        apply(sim, step);
        while let Some(ev) = sim.pop() {
            let now = sim.now();
            match ev {
                Ev::Io(r) => {
                    let step = fs.complete(now, &r).unwrap();
                    apply(sim, step);
                }
                Ev::Call(c) => {
                    misses += u64::from(!c.hit);
                    offset += record;
                    if offset < size {
                        call += 1;
                        let step = fs.read(now, call, file, offset, record).unwrap();
                        apply(sim, step);
                    }
                }
            }
        }
        (sim.now() - start, misses)
    }

    /// O_SYNC overwrites of `record` bytes, one at a time, each `gap` after the last
    /// returned, on an SSD with a volatile cache; returns (journal bytes, flushes, time).
    fn sync_overwrites(writes: u64, record: u64, gap: Nanos) -> (u64, u64, Nanos) {
        let (journal, flushes, _, took) =
            sync_overwrites_on(JournalMode::Ordered, writes, record, gap);
        (journal, flushes, took)
    }

    /// O_SYNC overwrites on a file system journaled in `journal`: the journal's bytes,
    /// the flushes, the other writes, and the time taken.
    fn sync_overwrites_on(
        journal: JournalMode,
        writes: u64,
        record: u64,
        gap: Nanos,
    ) -> (u64, u64, u64, Nanos) {
        let ssd = crate::device::Ssd::new(crate::device::SsdParams {
            flush_latency_us: 50.0,
            ..Default::default()
        })
        .unwrap();
        let block = BlockLayer::new(
            Box::new(ssd),
            build(&SchedulerParams::default()).unwrap(),
            des::stream(1, 1),
        );
        let mut fs = LocalFs::with_writeback(
            PageCache::new(1 << 16),
            block,
            ReadaheadParams::default(),
            CpuParams::default(),
            WritebackParams {
                journal,
                ..WritebackParams::default()
            },
        );
        let file = fs.create(64 << 20).unwrap();
        let mut sim: Scheduler<Ev> = Scheduler::new();
        let mut flushes = 0;
        let mut other = 0;
        let mut done = 0;
        let mut apply = |sim: &mut Scheduler<Ev>, step: Step, flushes: &mut u64| {
            for d in step.dispatches {
                *flushes += u64::from(d.req.flush);
                other += u64::from(!d.req.flush && d.req.op == Op::Write);
                sim.at(d.at, Ev::Io(d.req));
            }
            for c in step.done {
                sim.at(c.at, Ev::Call(c));
            }
        };
        let step = fs.write(0, 0, file, 0, record, true).unwrap();
        apply(&mut sim, step, &mut flushes);
        while let Some(ev) = sim.pop() {
            let now = sim.now();
            let step = match ev {
                Ev::Io(r) => fs.complete(now, &r).unwrap(),
                Ev::Call(_) => {
                    done += 1;
                    if done == writes {
                        continue;
                    }
                    fs.write(now + gap, done, file, done * record, record, true)
                        .unwrap()
                }
            };
            apply(&mut sim, step, &mut flushes);
        }
        (fs.journal_written_bytes, flushes, other, sim.now())
    }

    #[test]
    fn sync_overwrites_commit_once_per_clock_tick_and_each_flushes_the_cache() {
        // 20 writes inside one 4 ms tick: one commit (the first write moved the
        // modification time), a flush each, and the commit's flush before its block.
        let (journal, flushes, took) = sync_overwrites(20, 4096, 0);
        assert!(took < 4_000_000, "{took}");
        assert_eq!(journal, 3 * PAGE_BYTES, "descriptor, metadata, commit once");
        assert_eq!(flushes, 21);
        // One write per 5 ms: every one moves the time, so every one commits.
        let (journal, flushes, _) = sync_overwrites(20, 4096, 5_000_000);
        assert_eq!(journal, 20 * 3 * PAGE_BYTES);
        assert_eq!(flushes, 40);
    }

    #[test]
    fn without_a_journal_a_sync_writes_the_data_then_the_inode_in_place_and_flushes() {
        // One write per 5 ms, so every one moves the modification time: the data, the
        // inode, one flush each; nothing journaled.
        let (journal, flushes, writes, _) =
            sync_overwrites_on(JournalMode::NoJournal, 20, 4096, 5_000_000);
        assert_eq!((journal, flushes, writes), (0, 20, 40));
        // Inside one tick only the first write dirties the inode.
        let (journal, flushes, writes, _) = sync_overwrites_on(JournalMode::NoJournal, 20, 4096, 0);
        assert_eq!((journal, flushes, writes), (0, 20, 21));
    }

    #[test]
    fn a_cold_sequential_read_streams_with_read_ahead_and_a_warm_one_only_copies() {
        let mut f = fs(1 << 20);
        let size = 64 << 20;
        let file = f.create(size).unwrap();
        let mut sim = Scheduler::new();
        let (cold, waited) = read_through(&mut sim, &mut f, file, size, 64 << 10);
        let cold_mb_s = size as f64 / (cold as f64 / 1e9) / 1e6;
        // Read-ahead keeps the disk streaming: close to its 200 MB/s.
        assert!((150.0..201.0).contains(&cold_mb_s), "{cold_mb_s} MB/s");
        assert!(waited < 1024, "{waited} of 1024 calls waited");
        // Again: every page cached, only system calls and copies.
        let (warm, waited) = read_through(&mut sim, &mut f, file, size, 64 << 10);
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
        let mut sim = Scheduler::new();
        read_through(&mut sim, &mut f, file, size, 1 << 20);
        let hits_before = f.cache.stats.hits;
        let (_, waited) = read_through(&mut sim, &mut f, file, size, 1 << 20);
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
