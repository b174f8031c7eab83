//! Background work: replication backlogs, keepalive, stats.

use super::*;

impl Fs {
    /// Pending replication work: (messages, bytes) owed to accounts.
    pub fn pending(&self) -> (u64, u64) {
        let (j, jb) = self.journal.pending();
        let (w, wb) = self.tree.writeback.pending();
        let journal = (j + w, jb + wb);
        self.replicas.accounts.iter().fold(journal, |(n, b), a| {
            let (an, ab) = a.backlog_len();
            (n + an, b + ab)
        })
    }

    /// One replicator pass: pays backlogs of reachable accounts, probes down ones, and
    /// pings idle ones (keepalive).
    pub fn replicate_once(&self) {
        for a in &self.replicas.accounts {
            if a.is_up() {
                if a.backlog_len().0 > 0
                    && let Err(e) = a.replay(false)
                {
                    a.mark_down(&e);
                }
            } else if let Err(e) = a.replay(true) {
                tracing::debug!(account = %a.remote.describe(), "still down: {e}");
            }
        }
    }

    pub fn keepalive(&self) {
        for a in &self.replicas.accounts {
            if a.is_up()
                && let Err(e) = a.remote.ping()
            {
                a.mark_down(&e);
            }
        }
    }

    /// Runs the replicator and keepalive until [`Fs::shutdown`].
    pub fn spawn_background(self: &Arc<Self>) -> std::thread::JoinHandle<()> {
        let fetchers: usize = self.replicas.connections.iter().sum::<usize>().clamp(2, 32);
        self.spawn_fetchers(fetchers);
        let flusher = self.spawn_flusher();
        let committers = self.spawn_committers();
        let stats = self.spawn_stats_writer();
        let reclaimer = self.spawn_reclaimer();
        let fs = self.clone();
        std::thread::spawn(move || {
            let mut tick = 0u64;
            while !fs.stop.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(200));
                if let Err(e) = fs.drain_journal() {
                    tracing::debug!("journal not drained yet: {e}");
                }
                fs.replicate_once();
                tick += 1;
                if tick.is_multiple_of(25) {
                    fs.keepalive();
                }
                if tick.is_multiple_of(300) {
                    fs.refresh_quota();
                }
            }
            let _ = stats.join();
            fs.tree.writeback.wake_all();
            if let Some(r) = reclaimer {
                let _ = r.join();
            }
            for c in committers {
                let _ = c.join();
            }
            if let Some(flusher) = flusher {
                fs.tree.metalog.wake();
                let _ = flusher.join();
            }
        })
    }

    /// Writes the stats file every second and as soon as an account is marked down or
    /// up, in a thread of its own: the replicator's loop can wait a member deadline on a
    /// silent account, and `fs stats` must not show it up meanwhile.
    fn spawn_stats_writer(self: &Arc<Self>) -> std::thread::JoinHandle<()> {
        let fs = self.clone();
        std::thread::spawn(move || {
            let mut seen = u64::MAX;
            while !fs.stop.load(Ordering::SeqCst) {
                seen = fs
                    .replicas
                    .health
                    .wait(seen, std::time::Duration::from_secs(1));
                fs.write_stats_file();
            }
        })
    }

    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        // The stats writer ends now, not at its next second.
        self.replicas.health.notify();
    }

    pub fn stats_text(&self) -> String {
        let (ops, bytes) = self.pending();
        let s = &self.stats;
        let up: Vec<String> = self
            .replicas
            .accounts
            .iter()
            .map(|a| format!("{}={}", a.raid, if a.is_up() { "up" } else { "down" }))
            .collect();
        format!(
            "pending_ops={ops}\npending_bytes={bytes}\njournal_ops={}\naccounts={}\nintegrity_errors={}\ndir_writes={}\nblocks_written={}\nbytes_written={}\nblocks_fetched={}\nbytes_fetched={}\nrepairs={}\njournal_sent={}\njournal_coalesced={}\ncache_memory_bytes={}\ncache_disk_bytes={}\nchunks_written={}\nchunks_reused={}\nbytes_deduplicated={}\npartial_fetches={}\nscan_blocks_uncached={}\nlog_pages={}\ncheckpoints={}\nhedged_reads={}\nhedge_wins={}\nhedged_writes={}\n",
            self.journal.pending().0,
            up.join(","),
            s.integrity_errors.load(Ordering::Relaxed),
            s.dir_writes.load(Ordering::Relaxed),
            s.blocks_written.load(Ordering::Relaxed),
            s.bytes_written.load(Ordering::Relaxed),
            s.blocks_fetched.load(Ordering::Relaxed),
            s.bytes_fetched.load(Ordering::Relaxed),
            s.repairs.load(Ordering::Relaxed),
            s.journal_sent.load(Ordering::Relaxed),
            s.journal_coalesced.load(Ordering::Relaxed),
            self.blocks.cache.memory_bytes(),
            self.blocks.cache.disk_bytes(),
            s.chunks_written.load(Ordering::Relaxed),
            s.chunks_reused.load(Ordering::Relaxed),
            s.bytes_deduplicated.load(Ordering::Relaxed),
            s.partial_fetches.load(Ordering::Relaxed),
            s.scan_blocks_uncached.load(Ordering::Relaxed),
            s.log_pages.load(Ordering::Relaxed),
            s.checkpoints.load(Ordering::Relaxed),
            s.hedged_reads.load(Ordering::Relaxed),
            s.hedge_wins.load(Ordering::Relaxed),
            s.hedged_writes.load(Ordering::Relaxed),
        ) + &self.reclaim_stats_text()
    }

    pub fn write_stats_file(&self) {
        let path = self.state_dir.join("stats");
        let tmp = self.state_dir.join("stats.tmp");
        if std::fs::write(&tmp, self.stats_text()).is_ok() {
            let _ = std::fs::rename(tmp, path);
        }
    }

    /// Makes everything written so far durable (`syncfs`, which FUSE does not pass on: an
    /// fsync of the mount's root, docs/mailfs.md 6): every changed file is committed, those
    /// queued for the committers too, then the metadata batch goes out as a page. Files
    /// commit in parallel, as many at a time as there are committers, since each commit
    /// waits for its own round trips.
    pub fn sync_all(&self) -> Result<(), FsError> {
        let inos: Vec<u64> = self.lock().writers.keys().copied().collect();
        let threads = self.committer_count().min(inos.len());
        if threads <= 1 {
            for &ino in &inos {
                self.flush(ino)?;
            }
        } else {
            let next = AtomicU64::new(0);
            let first_error: Mutex<Option<FsError>> = Mutex::new(None);
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| {
                        while let Some(&ino) =
                            inos.get(next.fetch_add(1, Ordering::Relaxed) as usize)
                        {
                            if let Err(e) = self.flush(ino) {
                                first_error.lock_or_panic().get_or_insert(e);
                                return;
                            }
                        }
                    });
                }
            });
            if let Some(e) = first_error.lock_or_panic().take() {
                return Err(e);
            }
        }
        self.sync_metadata()
    }

    /// Flushes every changed file and the metadata log, then folds the log into a
    /// checkpoint, so the next mount replays nothing (unmount).
    pub fn flush_all(&self) -> Result<(), FsError> {
        self.sync_all()?;
        self.checkpoint()?;
        Ok(())
    }
}
