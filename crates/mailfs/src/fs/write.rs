//! Writing files: the per-file writer, background uploads, truncate, and the commit
//! (dirty entry, blocks, clean entry).

use super::*;

impl Fs {
    pub(super) fn writer<'t>(
        &self,
        tree: &'t mut Tree,
        ino: u64,
    ) -> Result<&'t mut Writer, FsError> {
        if !tree.writers.contains_key(&ino) {
            let e = self.file_entry(tree, ino)?;
            let fm = e.file.clone().unwrap_or(FileMeta {
                version: 0,
                block_size: self.block_size,
                blocks: Vec::new(),
                dirty: None,
            });
            tree.writers.insert(
                ino,
                Writer {
                    new_version: fm.version + 1,
                    size: e.size,
                    blocks: fm.blocks.into_iter().map(|b| (b.index, b)).collect(),
                    dirty: BTreeMap::new(),
                    dirty_bytes: 0,
                    changed: false,
                    mtime: now_ns(),
                    filled: HashMap::new(),
                    next_write: u64::from(rand::random::<u32>()),
                    uploading: Default::default(),
                },
            );
        }
        Ok(tree.writers.get_mut(&ino).expect("inserted"))
    }

    pub(super) fn bs(&self) -> u64 {
        self.block_size as u64
    }

    /// Which group stores block `index` of `file`: round robin from a per-file start, so
    /// all groups work in parallel, skipping groups without room for a block.
    pub(super) fn place(&self, file: u64, index: u64) -> u8 {
        let g = self.groups.len() as u64;
        let start = blake3::hash(&file.to_le_bytes()).as_bytes()[0] as u64;
        for step in 0..g {
            let cand = ((start + index + step) % g) as usize;
            if self.group_free[cand].load(Ordering::Relaxed) >= self.bs() {
                return cand as u8;
            }
        }
        ((start + index) % g) as u8
    }

    pub fn write(&self, ino: u64, offset: u64, data: &[u8]) -> Result<usize, FsError> {
        crate::snapview::refuse(ino)?;
        self.writable()?;
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|&e| e <= FILE_BYTES_MAX)
            .ok_or(FsError::NoSpace("file too large".into()))?;
        let bs = self.bs();
        let first = offset / bs;
        let last = if data.is_empty() {
            first
        } else {
            (end - 1) / bs
        };
        // A block still on its way up must land before it is changed again.
        let touches_upload = {
            let mut tree = self.lock();
            let w = self.writer(&mut tree, ino)?;
            w.uploading.iter().any(|u| {
                u.blocks
                    .iter()
                    .any(|(b, _)| (first..=last).contains(&b.index))
            })
        };
        if touches_upload {
            self.settle(ino)?;
        }
        // Blocks partly overwritten need their current content first (outside the lock).
        let mut needed = Vec::new();
        {
            let mut tree = self.lock();
            let w = self.writer(&mut tree, ino)?;
            for idx in [first, last] {
                let covers_whole = offset <= idx * bs && end >= (idx + 1) * bs;
                if !covers_whole
                    && !w.dirty.contains_key(&idx)
                    && let Some(b) = w.blocks.get(&idx)
                    && !needed.iter().any(|(_, x): &(u64, BlockRef)| x.index == idx)
                {
                    needed.push((ino, b.clone()));
                }
            }
        }
        let mut loaded = HashMap::new();
        for (file, b) in needed {
            loaded.insert(b.index, self.load_block(file, &b)?);
        }
        let batch = self.upload_batch();
        let wait_for = {
            let mut tree = self.lock();
            let w = self.writer(&mut tree, ino)?;
            let mut pos = 0usize;
            for idx in first..=last {
                if data.is_empty() {
                    break;
                }
                let block_start = idx * bs;
                let from = offset.max(block_start) - block_start;
                let to = end.min(block_start + bs) - block_start;
                if !w.dirty.contains_key(&idx) {
                    let mut buf = match (loaded.get(&idx), w.blocks.get(&idx)) {
                        (Some(d), _) => d.as_ref().clone(),
                        _ => Vec::new(),
                    };
                    // Bytes past the old end of file read as zeros (POSIX holes).
                    let valid = w.size.saturating_sub(block_start).min(bs) as usize;
                    buf.truncate(valid);
                    buf.resize(bs as usize, 0);
                    w.dirty.insert(idx, buf);
                    w.dirty_bytes += bs;
                    w.filled.insert(idx, 0);
                    w.blocks.remove(&idx);
                }
                let buf = w.dirty.get_mut(&idx).expect("inserted");
                let n = (to - from) as usize;
                buf[from as usize..to as usize].copy_from_slice(&data[pos..pos + n]);
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
            // Write-behind of whole blocks before the dirty limit is off: with it on, the
            // SIGKILL test found commits naming only a file's last block (the early blocks'
            // refs lost; not yet explained, docs/mailfs.md 13). The spill past
            // `dirty_bytes_max` stays: memory must stay bounded.
            let write_behind = false;
            if (write_behind && ready.len() >= batch) || (over && !ready.is_empty()) {
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
            w.uploading.len() > self.uploads_in_flight_max()
        };
        if wait_for {
            self.settle_oldest(ino)?;
        }
        Ok(data.len())
    }

    /// Blocks per background upload: one per connection, so a batch spreads over every
    /// account and each stream sends its share in one MULTIAPPEND.
    pub(super) fn upload_batch(&self) -> usize {
        self.connections.iter().sum::<usize>().clamp(4, 64)
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
            buf.truncate((w.size - start).min(bs) as usize);
            let r = BlockRef {
                index: idx,
                version: Self::block_version(w),
                group: self.place(file, idx),
                len: buf.len() as u32,
                hash: *blake3::hash(&buf).as_bytes(),
            };
            jobs.push((r, Arc::new(buf)));
        }
        jobs
    }

    pub(super) fn start_upload(
        &self,
        file: u64,
        w: &mut Writer,
        jobs: Vec<(BlockRef, Arc<Vec<u8>>)>,
    ) {
        let fs = self.me.get().and_then(std::sync::Weak::upgrade);
        let blocks = jobs.clone();
        let handle = std::thread::spawn(move || match fs {
            Some(fs) => fs.emit_blocks(file, &jobs),
            None => Err(FsError::Local("file system closed".into())),
        });
        w.uploading.push_back(Upload { blocks, handle });
    }

    /// Waits for one background upload (the oldest) of a file.
    pub(super) fn settle_oldest(&self, ino: u64) -> Result<(), FsError> {
        let up = {
            let mut tree = self.lock();
            tree.writers
                .get_mut(&ino)
                .and_then(|w| w.uploading.pop_front())
        };
        match up {
            Some(up) => self.land(ino, up),
            None => Ok(()),
        }
    }

    /// Waits for every background upload of a file.
    pub(super) fn settle(&self, ino: u64) -> Result<(), FsError> {
        let ups: Vec<Upload> = {
            let mut tree = self.lock();
            match tree.writers.get_mut(&ino) {
                Some(w) => w.uploading.drain(..).collect(),
                None => return Ok(()),
            }
        };
        let mut first_err = None;
        for up in ups {
            if let Err(e) = self.land(ino, up) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Records a finished upload in the writer; a failed one puts its data back as dirty,
    /// so the next flush tries again and nothing is lost.
    pub(super) fn land(&self, ino: u64, up: Upload) -> Result<(), FsError> {
        let r = up
            .handle
            .join()
            .unwrap_or_else(|_| Err(FsError::Local("upload thread panicked".into())));
        let bs = self.bs();
        let mut tree = self.lock();
        let Some(w) = tree.writers.get_mut(&ino) else {
            return r;
        };
        for (b, data) in up.blocks {
            if b.index * bs >= w.size || w.dirty.contains_key(&b.index) {
                continue;
            }
            if r.is_ok() {
                w.blocks.insert(b.index, b);
            } else {
                let mut buf = data.as_ref().clone();
                buf.resize(bs as usize, 0);
                w.dirty.insert(b.index, buf);
                w.dirty_bytes += bs;
                w.changed = true;
            }
        }
        r
    }

    pub(super) fn truncate(&self, ino: u64, size: u64) -> Result<(), FsError> {
        if size > FILE_BYTES_MAX {
            return Err(FsError::NoSpace("file too large".into()));
        }
        self.settle(ino)?;
        let bs = self.bs();
        let tail_idx = size / bs;
        let tail_len = (size % bs) as usize;
        let need = {
            let mut tree = self.lock();
            let w = self.writer(&mut tree, ino)?;
            if tail_len > 0 && size < w.size && !w.dirty.contains_key(&tail_idx) {
                w.blocks.get(&tail_idx).cloned()
            } else {
                None
            }
        };
        let loaded = match need {
            Some(b) => Some(self.load_block(ino, &b)?),
            None => None,
        };
        let mut tree = self.lock();
        let w = self.writer(&mut tree, ino)?;
        if size < w.size {
            let keep_blocks = size.div_ceil(bs);
            w.blocks.retain(|&i, _| i < keep_blocks);
            let before = w.dirty.len();
            w.dirty.retain(|&i, _| i < keep_blocks);
            w.dirty_bytes -= (before - w.dirty.len()) as u64 * bs;
            if tail_len > 0 {
                if let Some(data) = loaded {
                    let mut buf = data.as_ref().clone();
                    buf.resize(bs as usize, 0);
                    w.blocks.remove(&tail_idx);
                    w.dirty.insert(tail_idx, buf);
                    w.dirty_bytes += bs;
                }
                if let Some(buf) = w.dirty.get_mut(&tail_idx) {
                    buf[tail_len..].fill(0);
                }
            }
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
    /// new content.
    pub fn flush(&self, ino: u64) -> Result<(), FsError> {
        self.settle(ino)?;
        let (size, version, mut refs, planned, mtime, orphan) = loop {
            let mut tree = self.lock();
            let Some(w) = tree.writers.get_mut(&ino) else {
                return Ok(());
            };
            if !w.changed {
                return Ok(());
            }
            if !w.uploading.is_empty() {
                // A write started uploads after the settle above: a commit must name every
                // block, so wait for them too.
                drop(tree);
                self.settle(ino)?;
                continue;
            }
            let dirty: Vec<(u64, Vec<u8>)> = std::mem::take(&mut w.dirty).into_iter().collect();
            w.dirty_bytes = 0;
            w.filled.clear();
            w.changed = false;
            // Plan the new blocks (name, hash, group) before anything is written, so the
            // dirty entry can name them.
            let planned = self.plan_blocks(ino, w, dirty);
            let (size, version, blocks, mtime) = (w.size, w.new_version, w.blocks.clone(), w.mtime);
            break (
                size,
                version,
                blocks,
                planned,
                mtime,
                tree.orphans.contains_key(&ino),
            );
        };
        if orphan {
            // Unlinked while open: nothing names it any more, nothing to store.
            let mut tree = self.lock();
            if let Some(e) = tree.orphans.get_mut(&ino) {
                e.size = size;
            }
            return Ok(());
        }
        let bs = self.bs();
        for (r, _) in &planned {
            refs.insert(r.index, r.clone());
        }
        refs.retain(|i, _| i * bs < size);
        let blocks: Vec<BlockRef> = refs.values().cloned().collect();
        // Step 1: the dirty entry.
        let restore_writer = |this: &Self, planned: &[(BlockRef, Arc<Vec<u8>>)]| {
            // A failed commit keeps the data in memory, to be retried by the next flush.
            let mut tree = this.lock();
            if let Some(w) = tree.writers.get_mut(&ino) {
                for (r, data) in planned {
                    let mut buf = data.as_ref().clone();
                    buf.resize(bs as usize, 0);
                    w.dirty.entry(r.index).or_insert(buf);
                    w.dirty_bytes += bs;
                }
                w.changed = true;
            }
        };
        let (parent, name) = {
            let mut tree = self.lock();
            let (parent, name) = self.entry_of(&mut tree, ino)?;
            let mut d = self.ensure_dir(&mut tree, parent)?.clone();
            let e = d.entries.get_mut(&name).ok_or(FsError::NotFound)?;
            let old = e.file.clone().unwrap_or(FileMeta {
                version: 0,
                block_size: self.block_size,
                blocks: Vec::new(),
                dirty: None,
            });
            // A previous commit that never cleaned stays the baseline to roll back to.
            let prev = old.dirty.clone().unwrap_or(Previous {
                version: old.version,
                size: e.size,
                blocks: old.blocks.clone(),
            });
            e.file = Some(FileMeta {
                version,
                block_size: self.block_size,
                blocks: blocks.clone(),
                dirty: Some(prev),
            });
            e.size = size;
            if let Some(a) = &mut e.attr {
                a.mtime = mtime;
                a.ctime = now_ns();
            }
            if let Err(err) = self.write_dir(&mut tree, d) {
                drop(tree);
                restore_writer(self, &planned);
                return Err(err);
            }
            (parent, name)
        };
        // Step 2: the blocks, in parallel over every account.
        if let Err(err) = self.emit_blocks(ino, &planned) {
            restore_writer(self, &planned);
            return Err(err);
        }
        for (r, data) in &planned {
            self.cache
                .put_memory_only(BlockId::of(ino, r), data.clone());
        }
        // Step 3: clean.
        let mut tree = self.lock();
        let mut d = self.ensure_dir(&mut tree, parent)?.clone();
        if let Some(e) = d.entries.get_mut(&name)
            && e.id == ino
            && let Some(fm) = &mut e.file
        {
            fm.dirty = None;
        } else if let Some(e) = d.entries.values_mut().find(|e| e.id == ino)
            && let Some(fm) = &mut e.file
        {
            // Renamed meanwhile.
            fm.dirty = None;
        }
        self.write_dir(&mut tree, d)?;
        if let Some(w) = tree.writers.get_mut(&ino) {
            for (i, r) in refs {
                if !w.dirty.contains_key(&i) {
                    w.blocks.insert(i, r);
                }
            }
            if !w.changed {
                w.new_version = version + 1;
                w.next_write = u64::from(rand::random::<u32>());
            }
        }
        // The next change starts from what was just committed.
        if tree
            .writers
            .get(&ino)
            .is_some_and(|w| !w.changed && w.dirty.is_empty() && w.uploading.is_empty())
        {
            tree.writers.remove(&ino);
        }
        Ok(())
    }

    pub fn fsync(&self, ino: u64) -> Result<(), FsError> {
        self.flush(ino)
    }
}
