//! Sending blocks: to every member of their groups now, or through the journal.

use super::*;

impl Fs {
    /// Sends blocks now (synchronous mode) or through the journal (asynchronous mode).
    pub(super) fn emit_blocks(
        &self,
        file: u64,
        jobs: &[(BlockRef, Arc<Vec<u8>>)],
    ) -> Result<(), FsError> {
        if !self.asynchronous {
            return self.put_blocks(file, jobs);
        }
        if jobs.is_empty() {
            return Ok(());
        }
        self.journal.append(&crate::journal::Record::Blocks {
            file,
            blocks: jobs
                .iter()
                .map(|(b, d)| (b.clone(), serde_bytes::ByteBuf::from(d.as_ref().clone())))
                .collect(),
        })
    }

    pub(crate) fn superblock_sealing(&self) -> Sealing {
        keys::superblock_sealing(&self.kek)
    }

    /// Sends what the journal holds, in order (the background writer and unmount).
    pub fn drain_journal(&self) -> Result<usize, FsError> {
        self.journal.drain(self)
    }

    /// Uploads blocks to every member of their groups, `connections` streams per account,
    /// batched into MULTIAPPENDs; a member that fails is owed the rest (M6). Fails when a
    /// block reached no member of its group.
    pub(crate) fn put_blocks(
        &self,
        file: u64,
        jobs: &[(BlockRef, Arc<Vec<u8>>)],
    ) -> Result<(), FsError> {
        if jobs.is_empty() {
            return Ok(());
        }
        // Per account, the blocks it should get now.
        let mut per_account: Vec<Vec<usize>> = vec![Vec::new(); self.accounts.len()];
        for (j, (r, _)) in jobs.iter().enumerate() {
            let members = &self.groups[r.group as usize];
            let mut live: Vec<usize> = members
                .iter()
                .copied()
                .filter(|&m| self.accounts[m].is_up())
                .collect();
            live.sort_by_key(|&m| self.accounts[m].latency_us());
            let now: Vec<usize> = match self.strategy {
                Strategy::Strong => live,
                Strategy::Fast => live.into_iter().take(1).collect(),
            };
            for m in now {
                per_account[m].push(j);
            }
        }
        let delivered: Vec<Mutex<Vec<usize>>> =
            jobs.iter().map(|_| Mutex::new(Vec::new())).collect();
        let failed_accounts: Mutex<Vec<usize>> = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for (a, list) in per_account.iter().enumerate() {
                if list.is_empty() {
                    continue;
                }
                let streams = self.connections[a].max(1).min(list.len());
                let next = AtomicU64::new(0);
                let next = Arc::new(next);
                for _ in 0..streams {
                    let next = next.clone();
                    let delivered = &delivered;
                    let failed_accounts = &failed_accounts;
                    s.spawn(move || {
                        loop {
                            // Take a batch of consecutive jobs.
                            let start = next.fetch_add(1, Ordering::SeqCst) as usize;
                            if start >= list.len() {
                                break;
                            }
                            let mut batch = vec![list[start]];
                            let mut bytes = jobs[list[start]].1.len();
                            while batch.len() < APPEND_BATCH_MAX && bytes < APPEND_BATCH_BYTES_MAX {
                                let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                                if i >= list.len() {
                                    break;
                                }
                                bytes += jobs[list[i]].1.len();
                                batch.push(list[i]);
                            }
                            let mut msgs = Vec::with_capacity(batch.len());
                            for &j in &batch {
                                let (r, data) = &jobs[j];
                                let key = self.key(MsgKind::Block, file, r.index, r.version);
                                match seal_with(&self.sealing, &key, a as u8, data) {
                                    Ok(env) => msgs.push((key, env)),
                                    Err(_) => return,
                                }
                            }
                            if self.accounts[a].append_now(&msgs).is_err() {
                                failed_accounts.lock().unwrap().push(a);
                                break;
                            }
                            for (&j, (_, env)) in batch.iter().zip(&msgs) {
                                let mut got = delivered[j].lock().unwrap();
                                if got.is_empty() && self.keep_written {
                                    let (r, data) = &jobs[j];
                                    self.cache.put_sealed(
                                        BlockId::of(file, r),
                                        a as u8,
                                        env,
                                        data.clone(),
                                    );
                                }
                                got.push(a);
                            }
                        }
                    });
                }
            }
        });
        let mut written = 0u64;
        for (j, (r, data)) in jobs.iter().enumerate() {
            let got = delivered[j].lock().unwrap().clone();
            if got.is_empty() {
                // Strong or fast: try any other live member once before giving up.
                let mut ok = false;
                for &m in &self.groups[r.group as usize] {
                    if !self.accounts[m].is_up() {
                        continue;
                    }
                    let key = self.key(MsgKind::Block, file, r.index, r.version);
                    let env = seal_with(&self.sealing, &key, m as u8, data)?;
                    if self.accounts[m].append_now(&[(key, env)]).is_ok() {
                        delivered[j].lock().unwrap().push(m);
                        ok = true;
                        break;
                    }
                }
                if !ok {
                    return Err(FsError::Unavailable(format!(
                        "no member of group {} took block {} of file {file:x}",
                        r.group, r.index
                    )));
                }
            }
            let got = delivered[j].lock().unwrap().clone();
            for &m in &self.groups[r.group as usize] {
                if !got.contains(&m) {
                    let key = self.key(MsgKind::Block, file, r.index, r.version);
                    let env = seal_with(&self.sealing, &key, m as u8, data)?;
                    self.accounts[m].owe(&key, &env)?;
                }
            }
            written += data.len() as u64;
        }
        self.stats
            .blocks_written
            .fetch_add(jobs.len() as u64, Ordering::Relaxed);
        self.stats
            .bytes_written
            .fetch_add(written, Ordering::Relaxed);
        Ok(())
    }
}
