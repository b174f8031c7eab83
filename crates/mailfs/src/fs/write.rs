//! Writing files: the per-file writer, background uploads, truncate, and the commit
//! (dirty entry, blocks, clean entry).

use std::collections::HashSet;

use super::*;

/// The stored content of blocks a change starts from, by index.
type Bases = HashMap<u64, Arc<Vec<u8>>>;

impl Fs {
    pub(super) fn writer<'t>(
        &self,
        tree: &'t mut Loaded,
        ino: u64,
    ) -> Result<&'t mut Writer, FsError> {
        if !tree.writers.contains_key(&ino) {
            let e = self.file_entry(tree, ino)?;
            let fm = e.file.clone().unwrap_or(FileMeta {
                version: 0,
                block_size: self.block_size,
                blocks: Vec::new(),
                dirty: None,
                inline: None,
            });
            // Inline content is block 0, in memory already: a change starts from it.
            let mut dirty = BTreeMap::new();
            if let Some(data) = fm.inline {
                dirty.insert(0, data);
            }
            tree.writers.insert(
                ino,
                Writer {
                    id: rand::random(),
                    new_version: fm.version + 1,
                    size: e.size,
                    blocks: fm.blocks.into_iter().map(|b| (b.index, b)).collect(),
                    dirty_bytes: dirty.len() as u64 * self.bs(),
                    dirty,
                    pending: BTreeMap::new(),
                    in_flight: 0,
                    upload_error: None,
                    changed: false,
                    mtime: now_ns(),
                    filled: HashMap::new(),
                    next_write: u64::from(rand::random::<u32>()),
                },
            );
        }
        Ok(tree.writers.get_mut(&ino).expect("inserted"))
    }

    /// Stored blocks a write or truncate drops from the writer: those uploaded for the
    /// version not yet committed (write-behind) were never named by a record (a commit
    /// names its blocks under the version it then leaves behind), so reclaim takes them.
    fn superseded_unnamed(&self, ino: u64, w: &Writer, dropped: &[BlockRef]) {
        let unnamed: Vec<BlockRef> = dropped
            .iter()
            .filter(|b| file_version_of(b.version) == w.new_version)
            .cloned()
            .collect();
        self.reclaim.push_unnamed(ino, unnamed);
    }

    pub(super) fn bs(&self) -> u64 {
        self.block_size as u64
    }

    /// Which group stores block `index` of `file`: round robin from a per-file start, so
    /// all groups work in parallel, skipping groups without room for a block.
    pub(super) fn place(&self, file: u64, index: u64) -> u8 {
        let g = self.replicas.groups.len() as u64;
        let start = blake3::hash(&file.to_le_bytes()).as_bytes()[0] as u64;
        for step in 0..g {
            let cand = ((start + index + step) % g) as usize;
            if self.replicas.group_free[cand].load(Ordering::Relaxed) >= self.bs() {
                return cand as u8;
            }
        }
        ((start + index) % g) as u8
    }

    /// Takes the tree lock with the stored content of those `indices` whose base a change
    /// needs (not dirty, not pending, stored). Loads happen outside the lock; if the writer
    /// moved on meanwhile (an upload landed, another write), they are redone, so the base a
    /// change starts from is always the block's current content.
    fn lock_with_bases(
        &self,
        ino: u64,
        indices: &[u64],
    ) -> Result<(MutexGuard<'_, Loaded>, Bases), FsError> {
        let mut loaded: HashMap<u64, (u64, Arc<Vec<u8>>)> = HashMap::new();
        loop {
            let mut tree = self.lock();
            let w = self.writer(&mut tree, ino)?;
            let missing: Vec<BlockRef> = indices
                .iter()
                .filter(|i| !w.dirty.contains_key(i) && !w.pending.contains_key(i))
                .filter_map(|i| w.blocks.get(i))
                .filter(|b| loaded.get(&b.index).is_none_or(|(v, _)| *v != b.version))
                .cloned()
                .collect();
            if missing.is_empty() {
                let bases = loaded.into_iter().map(|(i, (_, d))| (i, d)).collect();
                return Ok((tree, bases));
            }
            drop(tree);
            for b in missing {
                let d = self.load_block(ino, &b)?;
                loaded.insert(b.index, (b.version, d));
            }
        }
    }

    /// Makes block `idx` dirty, starting from its current content: pending, stored (from
    /// `bases`) or a hole.
    fn make_dirty(&self, ino: u64, w: &mut Writer, idx: u64, bases: &Bases) {
        if w.dirty.contains_key(&idx) {
            return;
        }
        let bs = self.bs();
        let stored = w.blocks.remove(&idx);
        self.superseded_unnamed(ino, w, stored.as_slice());
        let mut buf = match (w.pending.remove(&idx), stored) {
            (Some((_, d)), _) => d.as_ref().clone(),
            (None, Some(_)) => bases
                .get(&idx)
                .map(|d| d.as_ref().clone())
                .unwrap_or_default(),
            (None, None) => Vec::new(),
        };
        // Bytes past the end of file read as zeros (POSIX holes). A dirty buffer is only
        // as long as its content: the rest of the block is zeros (a small file does not
        // cost a block-sized allocation, zeroed).
        let valid = w.size.saturating_sub(idx * bs).min(bs) as usize;
        buf.truncate(valid);
        w.dirty.insert(idx, buf);
        w.dirty_bytes += bs;
        w.filled.insert(idx, 0);
    }

    pub fn write(&self, ino: u64, offset: u64, data: &[u8]) -> Result<usize, FsError> {
        crate::snapview::refuse(ino)?;
        self.writable()?;
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|&e| e <= FILE_BYTES_MAX)
            .ok_or(FsError::NoSpace("file too large".into()))?;
        if data.is_empty() {
            return Ok(0);
        }
        let bs = self.bs();
        let first = offset / bs;
        let last = (end - 1) / bs;
        // Blocks only partly overwritten keep the rest of their current content.
        let mut partial: Vec<u64> = [first, last]
            .into_iter()
            .filter(|&i| !(offset <= i * bs && end >= (i + 1) * bs))
            .collect();
        partial.dedup();
        let batch = self.upload_batch();
        let (mut tree, bases) = self.lock_with_bases(ino, &partial)?;
        let w = self.writer(&mut tree, ino)?;
        let mut pos = 0usize;
        for idx in first..=last {
            let block_start = idx * bs;
            let from = (offset.max(block_start) - block_start) as usize;
            let to = (end.min(block_start + bs) - block_start) as usize;
            let n = to - from;
            if n as u64 == bs && !w.dirty.contains_key(&idx) {
                // The write replaces the whole block: no base to load, nothing to zero.
                w.pending.remove(&idx);
                let stored = w.blocks.remove(&idx);
                self.superseded_unnamed(ino, w, stored.as_slice());
                w.dirty.insert(idx, data[pos..pos + n].to_vec());
                w.dirty_bytes += bs;
                w.filled.insert(idx, bs);
                pos += n;
                continue;
            }
            self.make_dirty(ino, w, idx, &bases);
            let buf = w.dirty.get_mut(&idx).expect("made dirty");
            if buf.len() < to {
                // A block written in pieces past its first 64 KiB is a large file's: take
                // the whole block at once rather than copying it as the Vec doubles.
                if to > 64 << 10 && buf.capacity() < bs as usize {
                    buf.reserve_exact(bs as usize - buf.len());
                }
                buf.resize(to, 0);
            }
            buf[from..to].copy_from_slice(&data[pos..pos + n]);
            *w.filled.entry(idx).or_default() += n as u64;
            pos += n;
        }
        w.size = w.size.max(end);
        w.changed = true;
        w.mtime = now_ns();
        // Write-behind: blocks written whole go up in the background, a batch at a time;
        // past the dirty limit everything but the block being written goes.
        let over = w.dirty_bytes > self.dirty_bytes_max;
        let ready: Vec<u64> = w
            .dirty
            .keys()
            .copied()
            .filter(|i| {
                if over {
                    *i != last
                } else {
                    w.filled.get(i).copied().unwrap_or(0) >= bs && (i + 1) * bs <= w.size
                }
            })
            .collect();
        if (WRITE_BEHIND && ready.len() >= batch) || (over && !ready.is_empty()) {
            let bufs: Vec<(u64, Vec<u8>)> = ready
                .into_iter()
                .map(|i| {
                    w.filled.remove(&i);
                    w.dirty_bytes -= bs;
                    (i, w.dirty.remove(&i).expect("listed"))
                })
                .collect();
            let jobs = self.plan_blocks(ino, w, bufs);
            self.start_upload(ino, w, jobs);
        }
        let wait = w.in_flight > self.uploads_in_flight_max();
        drop(tree);
        if wait {
            self.settle_to(ino, self.uploads_in_flight_max())?;
        }
        Ok(data.len())
    }

    /// Blocks per background upload: one per connection, so a batch spreads over every
    /// account and each stream sends its share in one MULTIAPPEND.
    pub(super) fn upload_batch(&self) -> usize {
        self.replicas.connections.iter().sum::<usize>().clamp(4, 64)
    }

    /// Background uploads one file may have in flight (see `UPLOAD_BYTES_IN_FLIGHT_MAX`).
    pub(super) fn uploads_in_flight_max(&self) -> usize {
        let batch_bytes = self.upload_batch() as u64 * self.bs();
        (UPLOAD_BYTES_IN_FLIGHT_MAX / batch_bytes).clamp(2, 32) as usize
    }

    pub(super) fn block_version(w: &mut Writer) -> u64 {
        let v = (w.new_version << BLOCK_VERSION_SHIFT)
            | (w.next_write & ((1 << BLOCK_VERSION_SHIFT) - 1));
        w.next_write += 1;
        v
    }

    /// Names, hashes and places blocks about to be uploaded (cut to the file's size).
    pub(super) fn plan_blocks(
        &self,
        file: u64,
        w: &mut Writer,
        bufs: Vec<(u64, Vec<u8>)>,
    ) -> Vec<(BlockRef, Arc<Vec<u8>>)> {
        let bs = self.bs();
        let mut jobs = Vec::with_capacity(bufs.len());
        for (idx, mut buf) in bufs {
            let start = idx * bs;
            if start >= w.size {
                continue;
            }
            // Cut to the file's size, or filled out with the zeros a short buffer stands
            // for.
            buf.resize((w.size - start).min(bs) as usize, 0);
            let manifest = if self.dedup { MANIFEST_BIT } else { 0 };
            let r = BlockRef {
                index: idx,
                version: Self::block_version(w) | manifest,
                group: self.place(file, idx),
                len: buf.len() as u32,
                hash: *blake3::hash(&buf).as_bytes(),
            };
            jobs.push((r, Arc::new(buf)));
        }
        jobs
    }

    /// Sends blocks in the background; they are pending until the upload lands.
    pub(super) fn start_upload(
        &self,
        file: u64,
        w: &mut Writer,
        jobs: Vec<(BlockRef, Arc<Vec<u8>>)>,
    ) {
        for (r, d) in &jobs {
            w.pending.insert(r.index, (r.clone(), d.clone()));
        }
        w.in_flight += 1;
        let writer = w.id;
        match self.me.get().and_then(std::sync::Weak::upgrade) {
            Some(fs) => {
                std::thread::spawn(move || {
                    let r = fs.emit_blocks(file, &jobs);
                    let stored = r.is_ok();
                    let mut tree = fs.lock();
                    if let Some(w) = tree.writers.get_mut(&file)
                        && w.id == writer
                    {
                        // Written again or cut while on its way: no record will name it.
                        let passed: Vec<BlockRef> = jobs
                            .iter()
                            .filter(|(b, _)| {
                                stored
                                    && w.pending
                                        .get(&b.index)
                                        .is_none_or(|(p, _)| p.version != b.version)
                            })
                            .map(|(b, _)| b.clone())
                            .collect();
                        fs.reclaim.push_unnamed(file, passed);
                        Self::land(fs.bs(), w, &jobs, r);
                    }
                    drop(tree);
                    fs.tree.landed.notify_all();
                });
            }
            None => Self::land(
                self.bs(),
                w,
                &jobs,
                Err(FsError::Local("file system closed".into())),
            ),
        }
    }

    /// Records a finished background upload (see `land_blocks`) and its failure, if any,
    /// for the next settle.
    fn land(bs: u64, w: &mut Writer, jobs: &[(BlockRef, Arc<Vec<u8>>)], r: Result<(), FsError>) {
        w.in_flight = w.in_flight.saturating_sub(1);
        Self::land_blocks(bs, w, jobs, r.is_ok());
        if let Err(e) = r {
            w.upload_error.get_or_insert(e);
        }
    }

    /// Uploaded blocks still pending become stored, or, if the upload failed, dirty again
    /// so the next flush retries and nothing is lost. A block changed again since is left
    /// to its newer version.
    fn land_blocks(bs: u64, w: &mut Writer, jobs: &[(BlockRef, Arc<Vec<u8>>)], stored: bool) {
        for (b, _) in jobs {
            if w.pending
                .get(&b.index)
                .is_none_or(|(p, _)| p.version != b.version)
            {
                continue;
            }
            let (b, data) = w.pending.remove(&b.index).expect("checked");
            if stored {
                w.blocks.insert(b.index, b);
            } else {
                w.dirty.insert(b.index, data.as_ref().clone());
                w.dirty_bytes += bs;
                w.changed = true;
            }
        }
    }

    /// Waits until at most `max` background uploads of a file are in flight; reports the
    /// first upload failure since the last settle.
    pub(super) fn settle_to(&self, ino: u64, max: usize) -> Result<(), FsError> {
        let mut tree = self.lock();
        loop {
            let Some(w) = tree.writers.get_mut(&ino) else {
                return Ok(());
            };
            if w.in_flight <= max {
                return w.upload_error.take().map_or(Ok(()), Err);
            }
            tree = self.tree.landed.wait_or_panic(tree);
        }
    }

    pub(super) fn truncate(&self, ino: u64, size: u64) -> Result<(), FsError> {
        // POSIX truncate: EFBIG past the largest file, not ENOSPC (there may be room).
        if size > FILE_BYTES_MAX {
            return Err(FsError::FileTooLarge);
        }
        let bs = self.bs();
        let tail_idx = size / bs;
        let tail_len = size % bs;
        let partial: Vec<u64> = if tail_len > 0 {
            vec![tail_idx]
        } else {
            Vec::new()
        };
        let (mut tree, bases) = self.lock_with_bases(ino, &partial)?;
        let w = self.writer(&mut tree, ino)?;
        if size < w.size {
            if tail_len > 0 {
                self.make_dirty(ino, w, tail_idx, &bases);
                if let Some(buf) = w.dirty.get_mut(&tail_idx) {
                    buf.truncate(tail_len as usize);
                }
            }
            let keep_blocks = size.div_ceil(bs);
            let cut: Vec<BlockRef> = w
                .blocks
                .range(keep_blocks..)
                .map(|(_, b)| b.clone())
                .collect();
            self.superseded_unnamed(ino, w, &cut);
            w.blocks.retain(|&i, _| i < keep_blocks);
            // Uploads of cut blocks may still land: `land` ignores what is not pending.
            w.pending.retain(|&i, _| i < keep_blocks);
            let before = w.dirty.len();
            w.dirty.retain(|&i, _| i < keep_blocks);
            w.dirty_bytes -= (before - w.dirty.len()) as u64 * bs;
            w.filled.retain(|&i, _| i < keep_blocks);
        }
        if size != w.size {
            w.size = size;
            w.changed = true;
            w.mtime = now_ns();
        }
        drop(tree);
        self.flush(ino)
    }

    /// Commits a changed file (docs/mailfs.md 5): dirty entry naming old and new block
    /// lists, then the blocks, then the clean entry. A crash anywhere leaves the old or the
    /// new content. One commit per file at a time.
    pub fn flush(&self, ino: u64) -> Result<(), FsError> {
        self.tree.one_commit(ino, || self.commit(ino))
    }

    fn commit(&self, ino: u64) -> Result<(), FsError> {
        let bs = self.bs();
        // Under the lock with nothing in flight, take the dirty blocks: together with the
        // stored ones they are the file at this instant.
        let (size, version, mut refs, planned, mtime) = {
            let mut tree = self.lock();
            loop {
                if tree.orphans.contains_key(&ino) {
                    // Unlinked while open: nothing names it any more, nothing to store;
                    // its handles keep reading the writer.
                    let size = tree.writers.get(&ino).map(|w| w.size);
                    if let (Some(size), Some(e)) = (size, tree.orphans.get_mut(&ino)) {
                        e.size = size;
                    }
                    return Ok(());
                }
                let Some(w) = tree.writers.get_mut(&ino) else {
                    return Ok(());
                };
                if let Some(e) = w.upload_error.take() {
                    // The blocks are dirty again; this commit retries them.
                    tracing::warn!("file {ino:x}: background upload failed, retrying: {e}");
                }
                if !w.changed {
                    return Ok(());
                }
                if w.in_flight == 0 {
                    if self.commit_inline(&mut tree, ino)? {
                        return Ok(());
                    }
                    break;
                }
                tree = self.tree.landed.wait_or_panic(tree);
            }
            let w = tree.writers.get_mut(&ino).expect("checked");
            let dirty: Vec<(u64, Vec<u8>)> = std::mem::take(&mut w.dirty).into_iter().collect();
            w.dirty_bytes = 0;
            w.filled.clear();
            w.changed = false;
            // Name, hash and place the new blocks before anything is written, so the dirty
            // entry can name them; readers find them pending meanwhile.
            let planned = self.plan_blocks(ino, w, dirty);
            for (r, d) in &planned {
                w.pending.insert(r.index, (r.clone(), d.clone()));
            }
            let version = w.new_version;
            // The next change commits as the next version, whatever happens to this one.
            w.new_version += 1;
            (w.size, version, w.blocks.clone(), planned, w.mtime)
        };
        for (r, _) in &planned {
            refs.insert(r.index, r.clone());
        }
        refs.retain(|i, _| i * bs < size);
        let blocks: Vec<BlockRef> = refs.values().cloned().collect();
        // A failed commit keeps the data: the planned blocks become dirty again (unless
        // written since), for the next flush to retry.
        let give_back = |e: FsError| {
            self.settle_planned(ino, &planned, false);
            Err(e)
        };
        // What the entry named before (with a dirty entry's previous list, M5): minus the
        // new list, what this commit supersedes, for reclaim once the clean entry is
        // recorded (docs/mailfs.md 8).
        let generation = self.reclaim.generation();
        let mut before: Vec<BlockRef> = Vec::new();
        let mut old_version = 0;
        // Step 1: the dirty entry.
        let step1 = (|| {
            let mut tree = self.lock();
            let (parent, name) = self.entry_of(&mut tree, ino)?;
            self.edit_dir(&mut tree, parent, &[&name], |d| {
                let e = d.entries.get_mut(&name).ok_or(FsError::NotFound)?;
                let old = e.file.clone().unwrap_or(FileMeta {
                    version: 0,
                    block_size: self.block_size,
                    blocks: Vec::new(),
                    dirty: None,
                    inline: None,
                });
                old_version = old.version;
                before = old.blocks.clone();
                before.extend(old.dirty.iter().flat_map(|p| p.blocks.iter().cloned()));
                // A previous commit that never cleaned stays the baseline to roll back to.
                let prev = old.dirty.clone().unwrap_or(Previous {
                    version: old.version,
                    size: e.size,
                    blocks: old.blocks.clone(),
                    inline: old.inline.clone(),
                });
                e.file = Some(FileMeta {
                    version,
                    block_size: self.block_size,
                    blocks: blocks.clone(),
                    dirty: Some(prev),
                    inline: None,
                });
                e.size = size;
                if let Some(a) = &mut e.attr {
                    a.mtime = mtime;
                    a.ctime = now_ns();
                }
                Ok(())
            })
        })();
        if let Err(e) = step1 {
            return give_back(e);
        }
        // Step 2: the blocks, in parallel over every account.
        if let Err(e) = self.emit_blocks(ino, &planned) {
            return give_back(e);
        }
        // Step 3: clean, wherever the entry is now (it may have been renamed meanwhile).
        let step3 = (|| -> Result<Option<u64>, FsError> {
            let mut tree = self.lock();
            let Ok((parent, name)) = self.entry_of(&mut tree, ino) else {
                return Ok(None); // unlinked meanwhile
            };
            let dirty_here = self
                .ensure_dir(&mut tree, parent)?
                .entries
                .get(&name)
                .is_some_and(|e| {
                    e.id == ino
                        && e.file
                            .as_ref()
                            .is_some_and(|fm| fm.version == version && fm.dirty.is_some())
                });
            if !dirty_here {
                return Ok(None);
            }
            self.edit_dir(&mut tree, parent, &[&name], |d| {
                if let Some(fm) = d.entries.get_mut(&name).and_then(|e| e.file.as_mut()) {
                    fm.dirty = None;
                }
                Ok(())
            })?;
            // Still under the tree lock: the last record is this one.
            Ok(Some(self.tree.metalog.last_record_ticket()))
        })();
        // The blocks are stored either way: they join the writer's stored list. A clean
        // entry that failed to write leaves the dirty one, which names complete blocks (a
        // remount's repair cleans it); the file stays changed so the next flush commits it.
        self.settle_planned(ino, &planned, true);
        if step3.is_err() {
            let mut tree = self.lock();
            if let Some(w) = tree.writers.get_mut(&ino) {
                w.changed = true;
            }
        }
        if let Some(ticket) = step3? {
            let kept: HashSet<(u64, u64)> = blocks.iter().map(|b| (b.index, b.version)).collect();
            before.retain(|b| !kept.contains(&(b.index, b.version)));
            before.sort_by_key(|b| (b.index, b.version));
            before.dedup_by_key(|b| (b.index, b.version));
            self.reclaim.push(reclaim::Commit {
                file: ino,
                old_version,
                version,
                generation,
                ticket,
                blocks: before,
            });
        }
        let mut tree = self.lock();
        // The next change starts from what was just committed.
        if tree.writers.get(&ino).is_some_and(|w| {
            !w.changed && w.dirty.is_empty() && w.in_flight == 0 && w.pending.is_empty()
        }) {
            tree.writers.remove(&ino);
        }
        Ok(())
    }

    /// A file small enough to live in its entry (docs/mailfs.md 12a, inline data) commits
    /// as one directory change, under the tree lock: no block message, no dirty mark (the
    /// change is atomic), nothing to wait for. The writer goes: the entry holds it all.
    /// Called with no upload in flight; false when the file does not qualify.
    fn commit_inline(&self, tree: &mut Loaded, ino: u64) -> Result<bool, FsError> {
        if !self.fits_inline(tree, ino)? {
            return Ok(false);
        }
        let Some(w) = tree.writers.get(&ino) else {
            return Ok(false);
        };
        let size = w.size;
        // A short buffer (or none: a hole) stands for zeros up to the size.
        let mut content = w
            .dirty
            .get(&0)
            .map(|b| b[..b.len().min(size as usize)].to_vec())
            .unwrap_or_default();
        content.resize(size as usize, 0);
        let (version, mtime) = (w.new_version, w.mtime);
        let (parent, name) = self.entry_of(tree, ino)?;
        let generation = self.reclaim.generation();
        let (mut before, mut old_version) = (Vec::new(), 0);
        self.edit_dir(tree, parent, &[&name], |d| {
            let e = d.entries.get_mut(&name).ok_or(FsError::NotFound)?;
            if let Some(old) = &e.file {
                // A file cut back under the inline limit: every block it had goes.
                old_version = old.version;
                before = old.blocks.clone();
                before.extend(old.dirty.iter().flat_map(|p| p.blocks.iter().cloned()));
            }
            e.file = Some(FileMeta {
                version,
                block_size: self.block_size,
                blocks: Vec::new(),
                dirty: None,
                inline: (size > 0).then_some(content),
            });
            e.size = size;
            if let Some(a) = &mut e.attr {
                a.mtime = mtime;
                a.ctime = now_ns();
            }
            Ok(())
        })?;
        // Under the tree lock still: the last record is this one.
        self.reclaim.push(reclaim::Commit {
            file: ino,
            old_version,
            version,
            generation,
            ticket: self.tree.metalog.last_record_ticket(),
            blocks: before,
        });
        tree.writers.remove(&ino);
        Ok(true)
    }

    /// Whether the file's content can go into its entry now: at most
    /// `INLINE_BYTES_MAX` (and one block), all of it in memory, and room in its
    /// directory's inline budget (`DIR_INLINE_BYTES_MAX`).
    pub(super) fn fits_inline(&self, tree: &mut Loaded, ino: u64) -> Result<bool, FsError> {
        let bs = self.bs();
        let Some(w) = tree.writers.get(&ino) else {
            return Ok(false);
        };
        let size = w.size;
        let live = |i: u64| i * bs < size;
        if size > (meta::INLINE_BYTES_MAX as u64).min(bs)
            || w.in_flight > 0
            || !w.pending.is_empty()
            || w.blocks.keys().any(|&i| live(i))
            || w.dirty.keys().any(|&i| i != 0 && live(i))
        {
            return Ok(false);
        }
        let (parent, name) = self.entry_of(tree, ino)?;
        let d = self.ensure_dir(tree, parent)?;
        let old = d
            .entries
            .get(&name)
            .and_then(|e| e.file.as_ref()?.inline.as_ref())
            .map_or(0, Vec::len);
        Ok(d.inline_bytes - old + size as usize <= meta::DIR_INLINE_BYTES_MAX)
    }

    /// After a commit's upload: its planned blocks still pending become stored or dirty.
    fn settle_planned(&self, ino: u64, planned: &[(BlockRef, Arc<Vec<u8>>)], stored: bool) {
        let mut tree = self.lock();
        if let Some(w) = tree.writers.get_mut(&ino) {
            Self::land_blocks(self.bs(), w, planned, stored);
        }
    }

    /// The file's data, then every directory change so far (its name included): durable
    /// on every replica the strategy needs (in asynchronous mode, in the journal).
    pub fn fsync(&self, ino: u64) -> Result<(), FsError> {
        self.flush(ino)?;
        self.sync_metadata()
    }
}
