//! Write-back of closed files (docs/mailfs.md 5): `close` of a changed file too large to be
//! inline hands its commit to background committers instead of waiting for its blocks to
//! reach the servers, as a local file system's close does not wait for the disk. The
//! commit itself is unchanged (blocks, then the entry naming them), so a crash still leaves
//! every file old or new; `fsync` commits at once and waits. Queued files keep their data
//! in memory: past `WRITEBACK_BYTES_MAX` a close commits itself, so memory stays bounded
//! and a server that is down shows as an error instead of growth.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use super::*;

/// Bytes of closed files waiting for their commit (their dirty blocks, whole).
pub(crate) const WRITEBACK_BYTES_MAX: u64 = 256 << 20;

pub(crate) struct WriteBack {
    state: Mutex<Queue>,
    wake: std::sync::Condvar,
    /// [`WRITEBACK_BYTES_MAX`], smaller in tests.
    bytes_max: AtomicU64,
}

impl Default for WriteBack {
    fn default() -> Self {
        WriteBack {
            state: Mutex::default(),
            wake: std::sync::Condvar::new(),
            bytes_max: AtomicU64::new(WRITEBACK_BYTES_MAX),
        }
    }
}

#[derive(Default)]
struct Queue {
    order: VecDeque<u64>,
    /// Each queued file's bytes, as counted when it was queued.
    bytes_of: HashMap<u64, u64>,
    bytes: u64,
    /// Committer threads running (0: closes commit themselves).
    committers: usize,
}

impl WriteBack {
    /// Queues `ino` (a file already queued, or being committed, stays where it is: its
    /// committer looks again when done); false when the queue is full or nobody would
    /// take it.
    fn enqueue(&self, ino: u64, bytes: u64) -> bool {
        let mut q = self.state.lock_or_panic();
        if q.committers == 0 {
            return false;
        }
        if q.bytes_of.contains_key(&ino) {
            return true;
        }
        if q.bytes + bytes > self.bytes_max.load(Ordering::Relaxed) {
            return false;
        }
        q.bytes += bytes;
        q.bytes_of.insert(ino, bytes);
        q.order.push_back(ino);
        self.wake.notify_one();
        true
    }

    fn next(&self, stop: &AtomicBool) -> Option<u64> {
        let mut q = self.state.lock_or_panic();
        loop {
            if let Some(ino) = q.order.pop_front() {
                return Some(ino);
            }
            if stop.load(Ordering::SeqCst) {
                return None;
            }
            q = self
                .wake
                .wait_timeout_or_panic(q, Duration::from_millis(200))
                .0;
        }
    }

    /// Done with `ino`: it leaves the queue, or goes to its back when it must be committed
    /// again (changed since its commit began, or its commit failed).
    fn finish(&self, ino: u64, again: bool) {
        let mut q = self.state.lock_or_panic();
        if again {
            q.order.push_back(ino);
        } else if let Some(b) = q.bytes_of.remove(&ino) {
            q.bytes -= b;
        }
    }

    /// Files waiting for their commit, and their bytes.
    pub(crate) fn pending(&self) -> (u64, u64) {
        let q = self.state.lock_or_panic();
        (q.bytes_of.len() as u64, q.bytes)
    }

    #[cfg(test)]
    pub(crate) fn set_bytes_max(&self, max: u64) {
        self.bytes_max.store(max, Ordering::Relaxed);
    }

    pub(super) fn wake_all(&self) {
        self.wake.notify_all();
    }
}

impl Fs {
    /// `close` of a file (FUSE FLUSH, and the last RELEASE): commits a small file at once
    /// (one directory change in the batch, no round trip) and hands a larger one to the
    /// committers. With `metadata_batch_ms = 0`, with `dedup`, or with no committers (CLI,
    /// tests), it commits and waits, as `flush` does.
    pub fn close(&self, ino: u64) -> Result<(), FsError> {
        if self.close_commits() {
            return self.flush(ino);
        }
        let bytes = {
            let mut tree = self.lock();
            if !tree.writers.get(&ino).is_some_and(|w| w.changed) {
                return Ok(());
            }
            if self.fits_inline(&mut tree, ino)? {
                None
            } else {
                let w = &tree.writers[&ino];
                Some(w.dirty.values().map(|b| b.len() as u64).sum::<u64>().max(1))
            }
        };
        match bytes {
            Some(b) if self.tree.writeback.enqueue(ino, b) => Ok(()),
            _ => self.flush(ino),
        }
    }

    /// Whether `close` commits and waits (`metadata_batch_ms = 0`, or `dedup`: a copy
    /// closed right after its original must find the original's chunks stored, not racing
    /// it up in another committer); otherwise it only queues the file, or puts a small
    /// one's content in the batch, and the last handle's RELEASE may do that as well
    /// (docs/mailfs.md 5, write-back).
    pub fn close_commits(&self) -> bool {
        self.tree.metalog.batch_ms == 0 || self.dedup
    }

    /// Commits that run at once: one per account connection, 2 to 16.
    pub(super) fn committer_count(&self) -> usize {
        self.replicas.connections.iter().sum::<usize>().clamp(2, 16)
    }

    /// Background committers: one per account connection (2 to 16), taking queued files
    /// in the order they were closed. A failed commit leaves the file changed and goes to
    /// the back of the queue (the next `fsync` reports the error).
    pub(super) fn spawn_committers(self: &Arc<Self>) -> Vec<std::thread::JoinHandle<()>> {
        if self.tree.metalog.batch_ms == 0 {
            return Vec::new();
        }
        let n = self.committer_count();
        self.tree.writeback.state.lock_or_panic().committers = n;
        (0..n)
            .map(|_| {
                let fs = self.clone();
                std::thread::spawn(move || {
                    while let Some(ino) = fs.tree.writeback.next(&fs.stop) {
                        let r = fs.flush(ino);
                        if let Err(e) = &r {
                            tracing::warn!(
                                "file {ino:x}: commit after close failed, retrying: {e}"
                            );
                            std::thread::sleep(Duration::from_millis(500));
                        }
                        // Written again since the commit took its data, or not committed:
                        // once more (at unmount, `flush_all` takes what is left).
                        let again = !fs.stop.load(Ordering::SeqCst)
                            && fs.lock().writers.get(&ino).is_some_and(|w| w.changed);
                        fs.tree.writeback.finish(ino, again);
                    }
                    fs.tree.writeback.state.lock_or_panic().committers -= 1;
                })
            })
            .collect()
    }
}
