//! Reading files: one fetch per block in flight, read-ahead, caches; random reads of a
//! small part of a block fetch only the segments they need.

use super::*;

/// A random read of at most this fraction of a block fetches only its segments.
const RANGE_READ_FRACTION: usize = 4;
/// How far from the last read's end a read still counts as sequential: the kernel's
/// read-ahead window (`max_readahead`, set by mailfs-fuse).
const SEQUENTIAL_SLACK_BYTES: u64 = 1 << 20;
/// Blocks remembered as read in part (then the memory starts over).
const READ_IN_PART_MAX: usize = 65_536;
/// Files whose last read position is remembered (then the memory starts over).
const READ_ENDS_MAX: usize = 4096;

/// A file's sequential read stream: where its last read ended and where it began.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stream {
    end: u64,
    start: u64,
}

/// The read side of the blocks (one of `Fs`'s parts, with the tree and the replicas):
/// what is cached, what is being fetched, what read-ahead has queued, and where each
/// file's reads are going. Locks here are leaves: nothing else is taken while one is held.
pub(crate) struct Blocks {
    pub(super) cache: Cache,
    /// Blocks after a read that read-ahead fetches (config `readahead_blocks`).
    pub(super) readahead: usize,
    /// How far into a sequential stream its read-ahead counts as a scan (config
    /// `scan_bytes`; 0: never).
    pub(super) scan_bytes: u64,
    /// One fetch per block in flight; other readers of it wait on its slot.
    pub(super) inflight: Mutex<HashMap<BlockId, Arc<Slot>>>,
    /// Read-ahead requests for the background fetchers (present while mounted).
    /// (file, block, whether it is a scan's: `load_block_for`).
    pub(super) readahead_tx: Mutex<Option<std::sync::mpsc::Sender<(u64, BlockRef, bool)>>>,
    pub(super) readahead_queued: Mutex<std::collections::HashSet<BlockId>>,
    /// Where each file's last read ended, and where its sequential stream started: a read
    /// far from the end is random access, served without read-ahead and, for a small part
    /// of a block, by partial FETCH; read-ahead far into a stream is a scan.
    pub(super) read_ends: Mutex<HashMap<u64, Stream>>,
    /// Blocks read in part once: a second partial read loads the whole block.
    pub(super) read_in_part: Mutex<std::collections::HashSet<BlockId>>,
}

impl Fs {
    /// One block's plain content, from the caches or from a member of its group.
    pub(crate) fn load_block(&self, file: u64, b: &BlockRef) -> Result<Arc<Vec<u8>>, FsError> {
        self.load_block_for(file, b, false)
    }

    /// `scan`: read-ahead further than `scan_bytes` into a sequential stream, whose block
    /// goes to the disk cache only if a scan fetched it before (docs/mailfs.md 6).
    fn load_block_for(&self, file: u64, b: &BlockRef, scan: bool) -> Result<Arc<Vec<u8>>, FsError> {
        let cid = BlockId::of(file, b);
        if let Some(d) = self.blocks.cache.get(cid) {
            return Ok(d);
        }
        if let Some(d) = self.journal.block(file, b)
            && d.len() == b.len as usize
            && *blake3::hash(&d).as_bytes() == b.hash
        {
            return Ok(Arc::new(d));
        }
        // One fetch per block at a time: a reader and the read-ahead wait for the same one.
        let (slot, leader) = {
            let mut inflight = self.blocks.inflight.lock_or_panic();
            match inflight.get(&cid) {
                Some(s) => (s.clone(), false),
                None => {
                    let s = Arc::new(Slot::default());
                    inflight.insert(cid, s.clone());
                    (s, true)
                }
            }
        };
        if !leader {
            let mut done = slot.done.lock_or_panic();
            while done.is_none() {
                done = slot.ready.wait_or_panic(done);
            }
            return done.clone().expect("set");
        }
        let r = self.fetch_block(file, b, cid, scan);
        *slot.done.lock_or_panic() = Some(r.clone());
        slot.ready.notify_all();
        self.blocks.inflight.lock_or_panic().remove(&cid);
        r
    }

    pub(super) fn fetch_block(
        &self,
        file: u64,
        b: &BlockRef,
        cid: BlockId,
        scan: bool,
    ) -> Result<Arc<Vec<u8>>, FsError> {
        // Scan resistance: a block a scan fetches for the first time stays in memory only.
        let admitted = !scan || self.blocks.cache.scanned_before(cid);
        let to_disk = admitted && self.blocks.cache.has_disk();
        if !admitted {
            self.stats
                .scan_blocks_uncached
                .fetch_add(1, Ordering::Relaxed);
        }
        let members = self
            .replicas
            .groups
            .get(b.group as usize)
            .ok_or(FsError::Corrupt(format!("block names group {}", b.group)))?;
        let id = b.name_id(file);
        if b.version & MANIFEST_BIT != 0 {
            let data = Arc::new(self.fetch_chunked(members, id, b)?);
            self.stats.blocks_fetched.fetch_add(1, Ordering::Relaxed);
            self.blocks.cache.put(cid, data.clone(), to_disk);
            return Ok(data);
        }
        // From the members (hedged), until one copy authenticates and hashes right.
        let (len, hash) = (b.len as usize, b.hash);
        let expected =
            move |data: &[u8]| data.len() == len && *blake3::hash(data).as_bytes() == hash;
        let (data, raid, envelope) =
            self.get_sealed_where(members, id, &self.sealing, to_disk, expected)?;
        self.stats.blocks_fetched.fetch_add(1, Ordering::Relaxed);
        self.stats
            .bytes_fetched
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        let data = Arc::new(data);
        self.blocks
            .cache
            .put_sealed(cid, raid, envelope, data.clone(), to_disk);
        Ok(data)
    }

    /// A deduplicated block: its manifest, then its chunks (in parallel), checked against
    /// the block reference's length and hash.
    pub(crate) fn fetch_chunked(
        &self,
        members: &[usize],
        id: NameId,
        b: &BlockRef,
    ) -> Result<Vec<u8>, FsError> {
        let manifest = meta::decode_manifest(&self.get(members, id, &self.sealing)?)?;
        // One cell per chunk, each set once by the thread that took its index: no lock to
        // poison (a thread that panics makes `scope` panic here before any cell is read).
        let parts: Vec<OnceLock<Result<Vec<u8>, FsError>>> =
            manifest.chunks.iter().map(|_| OnceLock::new()).collect();
        let next = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..manifest.chunks.len().min(CHUNK_FETCHES_MAX) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                        let Some(c) = manifest.chunks.get(i) else {
                            break;
                        };
                        let _ = parts[i].set(self.fetch_chunk(c));
                    }
                });
            }
        });
        let mut out = Vec::with_capacity(b.len as usize);
        for p in parts {
            let part = p
                .into_inner()
                .unwrap_or_else(|| Err(FsError::Local("a chunk fetch did not finish".into())))?;
            out.extend_from_slice(&part);
        }
        if out.len() != b.len as usize || *blake3::hash(&out).as_bytes() != b.hash {
            self.stats.integrity_errors.fetch_add(1, Ordering::Relaxed);
            return Err(FsError::Integrity(format!(
                "block {} v{:x}: its chunks do not make the block",
                b.index, b.version
            )));
        }
        Ok(out)
    }

    /// One chunk, from any member of its group, checked against its name.
    pub(crate) fn fetch_chunk(&self, c: &meta::ChunkRef) -> Result<Vec<u8>, FsError> {
        let name_id = c.name_id();
        let members = &self.replicas.groups[self.chunk_group(c) as usize];
        let (key, len, id) = (self.chunk_key, c.len as usize, c.id);
        let expected =
            move |d: &[u8]| d.len() == len && blake3::keyed_hash(&key, d).as_bytes()[..16] == id;
        let (data, _, _) =
            self.get_sealed_where(members, name_id, &self.sealing, false, expected)?;
        self.stats
            .bytes_fetched
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(data)
    }

    pub fn read(&self, ino: u64, offset: u64, size: u32) -> Result<Vec<u8>, FsError> {
        self.read_with(ino, offset, size, <[u8]>::to_vec)
    }

    /// Reads and hands the bytes to `reply`: straight from the block when the read lies
    /// within one (a sequential reader's every request), so the FUSE reply is the only
    /// copy; assembled otherwise.
    pub fn read_with<R>(
        &self,
        ino: u64,
        offset: u64,
        size: u32,
        reply: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, FsError> {
        let bs = self.bs();
        // Snapshot what the read needs under the lock; fetch outside it.
        let file = crate::snapview::object_of(ino);
        // The blocks this read touches and those read-ahead may queue: nothing else is
        // copied out of the tree.
        let req_first = offset / bs;
        let req_last = offset.saturating_add(u64::from(size.max(1)) - 1) / bs;
        let wanted = req_first..=req_last.saturating_add(self.blocks.readahead as u64);
        let (file_size, sources) = {
            let mut tree = self.lock();
            if crate::snapview::is_snap(ino) {
                drop(tree);
                let e = self.snap_entry(ino)?;
                (e.size, stored_sources(e.file, &wanted))
            } else if let Some(w) = tree.writers.get(&ino) {
                let mut src = Vec::new();
                for (i, b) in w.blocks.range(wanted.clone()) {
                    src.push((*i, Source::Stored(b.clone())));
                }
                for (i, (_, d)) in w.pending.range(req_first..=req_last) {
                    src.push((*i, Source::Memory(d.clone())));
                }
                for (i, d) in w.dirty.range(req_first..=req_last) {
                    src.push((*i, Source::Memory(Arc::new(d.clone()))));
                }
                (w.size, src)
            } else {
                let e = self.file_entry(&mut tree, ino)?;
                (e.size, stored_sources(e.file, &wanted))
            }
        };
        if offset >= file_size {
            return Ok(reply(&[]));
        }
        let end = file_size.min(offset + u64::from(size));
        let first = offset / bs;
        let last = (end - 1) / bs;
        let by_index: HashMap<u64, Source> = sources.into_iter().collect();
        let (random, stream_start) = self.note_read(ino, offset, end);
        // The blocks this read needs are fetched now, in parallel; the next few are handed to
        // the background fetchers (read-ahead), so a sequential reader finds them cached.
        let missing = |i: &u64| match by_index.get(i) {
            Some(Source::Stored(b)) if !self.blocks.cache.in_memory(BlockId::of(file, b)) => {
                Some(b.clone())
            }
            _ => None,
        };
        if !random {
            let ahead: Vec<BlockRef> = (last + 1..=last + self.blocks.readahead as u64)
                .filter_map(|i| missing(&i))
                .collect();
            self.read_ahead(file, ahead, stream_start);
        }
        let needed: Vec<BlockRef> = (first..=last).filter_map(|i| missing(&i)).collect();
        if needed.len() > 1 {
            self.prefetch(file, &needed);
        }
        if first == last {
            let block_start = first * bs;
            let (from, to) = (
                (offset - block_start) as usize,
                (end - block_start) as usize,
            );
            let data = match by_index.get(&first) {
                Some(Source::Memory(d)) => Some(d.clone()),
                Some(Source::Stored(b)) => {
                    if random
                        && to - from <= bs as usize / RANGE_READ_FRACTION
                        && let Some(part) = self.load_range(file, b, from..to)
                    {
                        return Ok(reply(&part));
                    }
                    Some(self.load_block(file, b)?)
                }
                None => None,
            };
            if let Some(d) = data.filter(|d| d.len() >= to) {
                return Ok(reply(&d[from..to]));
            }
        }
        let mut out = Vec::with_capacity((end - offset) as usize);
        for idx in first..=last {
            let block_start = idx * bs;
            let from = offset.max(block_start) - block_start;
            let to = end.min(block_start + bs) - block_start;
            let data: Option<Arc<Vec<u8>>> = match by_index.get(&idx) {
                Some(Source::Memory(d)) => Some(d.clone()),
                Some(Source::Stored(b)) => Some(self.load_block(file, b)?),
                None => None,
            };
            let (from, to) = (from as usize, to as usize);
            match data {
                Some(d) => {
                    let avail = d.len().min(to);
                    if from < avail {
                        out.extend_from_slice(&d[from..avail]);
                    }
                    out.resize(out.len() + (to - avail.max(from)), 0);
                }
                None => out.resize(out.len() + (to - from), 0),
            }
        }
        Ok(reply(&out))
    }

    /// Records a read of `offset..end`; says whether it is random access (further than
    /// the kernel's read-ahead window from where the file's last read ended; a first read
    /// is sequential only near the start) and where its sequential stream started.
    /// Concurrent read-ahead requests arrive a little out of order, hence the slack.
    fn note_read(&self, ino: u64, offset: u64, end: u64) -> (bool, u64) {
        let slack = SEQUENTIAL_SLACK_BYTES;
        let mut ends = self.blocks.read_ends.lock_or_panic();
        if ends.len() >= READ_ENDS_MAX && !ends.contains_key(&ino) {
            ends.clear();
        }
        let previous = ends.get(&ino).copied();
        let random = match previous {
            Some(p) => offset.abs_diff(p.end) > slack,
            None => offset > slack,
        };
        let start = match previous {
            Some(p) if !random => p.start.min(offset),
            _ => offset,
        };
        ends.insert(ino, Stream { end, start });
        (random, start)
    }

    /// Plain bytes `range` of a stored block that is in no cache and was not read in part
    /// before, fetched as the segments holding them (partial FETCH, docs/mailfs.md 3) and
    /// authenticated on their own. None when that does not apply or does not work (an
    /// unsegmented block, a failure): the caller then loads the whole block, which reports
    /// errors.
    pub(super) fn load_range(
        &self,
        file: u64,
        b: &BlockRef,
        range: std::ops::Range<usize>,
    ) -> Option<Vec<u8>> {
        let len = b.len as usize;
        if b.version & MANIFEST_BIT != 0
            || len < 2 * mailfs_format::SEGMENT_BYTES
            || range.is_empty()
            || range.end > len
        {
            return None;
        }
        let cid = BlockId::of(file, b);
        if self.blocks.cache.in_memory(cid)
            || self.blocks.cache.on_disk(cid)
            || self.journal.has_block(file, b)
        {
            return None;
        }
        // A block read in part before is read again: load it whole, into the caches, so a
        // working set that fits them is fetched once.
        {
            let mut seen = self.blocks.read_in_part.lock_or_panic();
            if seen.len() >= READ_IN_PART_MAX {
                seen.clear();
            }
            if !seen.insert(cid) {
                seen.remove(&cid);
                return None;
            }
        }
        let id = b.name_id(file);
        let segments = mailfs_format::segments_for(len, range.clone());
        let span = mailfs_format::segment_span(len, segments.start).start
            ..mailfs_format::segment_span(len, segments.end - 1).end;
        let mut order: Vec<usize> = self
            .replicas
            .groups
            .get(b.group as usize)?
            .iter()
            .copied()
            .filter(|&t| self.replicas.accounts[t].is_up())
            .collect();
        order.sort_by_key(|&t| self.replicas.accounts[t].latency_us());
        for t in order {
            let acct = &self.replicas.accounts[t];
            let expected = MessageName {
                time: 0,
                ..self.message_name(id.kind, id.object, id.index, id.version)
            }
            .header(t as u8);
            for uid in acct.uids(&id) {
                let Ok(Some(prefix)) = acct.fetch_range(uid, 0, mailfs_format::PREFIX_BYTES) else {
                    continue;
                };
                match mailfs_format::peek(&prefix) {
                    Ok(h) if h.flags & mailfs_format::FLAG_SEGMENTED != 0 => {}
                    _ => continue,
                }
                let Ok(Some(sealed)) = acct.fetch_range(uid, span.start, span.len()) else {
                    continue;
                };
                match mailfs_format::open_segments(
                    &self.sealing,
                    &expected,
                    &prefix,
                    len,
                    segments.clone(),
                    &sealed,
                ) {
                    Ok(plain) => {
                        self.stats.partial_fetches.fetch_add(1, Ordering::Relaxed);
                        self.stats
                            .bytes_fetched
                            .fetch_add(plain.len() as u64, Ordering::Relaxed);
                        let at = range.start - segments.start * mailfs_format::SEGMENT_BYTES;
                        return plain.get(at..at + range.len()).map(<[u8]>::to_vec);
                    }
                    Err(e) => {
                        tracing::debug!(account = %acct.remote.describe(), uid, "partial read: {e}");
                    }
                }
            }
        }
        None
    }

    /// Fetches blocks in parallel: those the current read needs are waited for; the rest
    /// are fetched too (read-ahead) before returning, so a sequential reader finds them.
    pub(super) fn prefetch(&self, ino: u64, wanted: &[BlockRef]) {
        let width: usize = self
            .replicas
            .accounts
            .iter()
            .enumerate()
            .filter(|(_, a)| a.is_up())
            .map(|(i, _)| self.replicas.connections[i])
            .sum::<usize>()
            .max(1);
        let next = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..width.min(wanted.len()) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                        let Some(b) = wanted.get(i) else { break };
                        // Errors surface when the block is read for real.
                        let _ = self.load_block(ino, b);
                    }
                });
            }
        });
    }

    /// Queues blocks for the background fetchers (none outside a mount: then nothing);
    /// those further than `scan_bytes` from `stream_start` are a scan's.
    pub(super) fn read_ahead(&self, file: u64, blocks: Vec<BlockRef>, stream_start: u64) {
        let tx = self.blocks.readahead_tx.lock_or_panic();
        let Some(tx) = tx.as_ref() else { return };
        let mut queued = self.blocks.readahead_queued.lock_or_panic();
        for b in blocks {
            let id = BlockId::of(file, &b);
            let scan = self.blocks.scan_bytes > 0
                && b.index.saturating_mul(self.bs())
                    >= stream_start.saturating_add(self.blocks.scan_bytes);
            if queued.insert(id) {
                let _ = tx.send((file, b, scan));
            }
        }
    }

    /// Starts `n` read-ahead fetchers; they stop when the file system shuts down.
    pub(super) fn spawn_fetchers(self: &Arc<Self>, n: usize) {
        let (tx, rx) = std::sync::mpsc::channel::<(u64, BlockRef, bool)>();
        let rx = Arc::new(Mutex::new(rx));
        *self.blocks.readahead_tx.lock_or_panic() = Some(tx);
        for _ in 0..n {
            let fs = Arc::downgrade(self);
            let rx = rx.clone();
            std::thread::spawn(move || {
                loop {
                    let job = rx
                        .lock_or_panic()
                        .recv_timeout(std::time::Duration::from_millis(500));
                    let Some(fs) = fs.upgrade() else { break };
                    if fs.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok((file, b, scan)) = job else { continue };
                    // Errors surface when the block is read for real.
                    let _ = fs.load_block_for(file, &b, scan);
                    fs.blocks
                        .readahead_queued
                        .lock_or_panic()
                        .remove(&BlockId::of(file, &b));
                }
            });
        }
    }
}

/// Stored blocks of a committed file within `wanted`, as read sources.
fn stored_sources(
    file: Option<FileMeta>,
    wanted: &std::ops::RangeInclusive<u64>,
) -> Vec<(u64, Source)> {
    file.map(|f| {
        if let Some(data) = f.inline {
            // Small files live in their entry: block 0, in memory.
            return if wanted.contains(&0) {
                vec![(0, Source::Memory(Arc::new(data)))]
            } else {
                Vec::new()
            };
        }
        f.blocks
            .into_iter()
            .filter(|b| wanted.contains(&b.index))
            .map(|b| (b.index, Source::Stored(b)))
            .collect()
    })
    .unwrap_or_default()
}
