//! A virtual disk: one account with its RAID index, the map of what it holds, its health,
//! and the durable backlog of messages it still owes (docs/mailfs.md 7).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use disk::Disk;

use crate::FsError;
use crate::durable;
use crate::locking::{CondvarExt, MutexExt};
use crate::message_name::{MessageName, NameId};
use crate::remote::{Remote, RemoteError};

/// Messages one backlog replay sends per APPEND batch.
const REPLAY_BATCH_MAX: usize = 32;

pub struct Account {
    pub raid: u8,
    pub group: usize,
    pub remote: Box<dyn Remote>,
    fsid: [u8; 16],
    /// Our messages on this account: content id → (uid, time). More than one uid per id
    /// happens when a copy was re-sent after a timeout, or a third party added one; readers
    /// try each.
    index: Mutex<HashMap<NameId, Vec<u32>>>,
    /// The newest copy's time of each chunk (dedup reuses only young copies, see
    /// `Fs::chunk_reusable`).
    chunk_times: Mutex<HashMap<NameId, i64>>,
    /// Names we could not parse or that belong to another file system (reported by fsck).
    pub foreign: AtomicU64,
    up: AtomicBool,
    /// Smoothed latency of recent commands, in microseconds (reads prefer the fastest).
    latency_us: AtomicU64,
    /// Since when a command of this member's has gone unanswered that a hedge to another
    /// member beat (docs/mailfs.md 7); cleared by its next answer. A hung member's latency
    /// grows with it, so reads and quorum writes pass it by before its deadline.
    silent_since: Mutex<Option<Instant>>,
    backlog: Backlog,
    health: Arc<HealthSignal>,
}

/// Wakes the writer of the stats file when an account is marked down or up, so `fs stats`
/// says so at once and not when a loop that may be waiting on that account comes round.
#[derive(Default)]
pub struct HealthSignal {
    changes: Mutex<u64>,
    changed: Condvar,
}

impl HealthSignal {
    pub fn notify(&self) {
        *self.changes.lock_or_panic() += 1;
        self.changed.notify_all();
    }

    /// Waits until the count of changes differs from `seen`, or `max`; returns it.
    pub fn wait(&self, seen: u64, max: Duration) -> u64 {
        let changes = self.changes.lock_or_panic();
        if *changes != seen {
            return *changes;
        }
        *self.changed.wait_timeout_or_panic(changes, max).0
    }
}

impl Account {
    pub fn new(
        raid: u8,
        group: usize,
        remote: Box<dyn Remote>,
        fsid: [u8; 16],
        disk: Arc<dyn Disk>,
        state_dir: &Path,
        health: Arc<HealthSignal>,
    ) -> Result<Account, FsError> {
        Ok(Account {
            raid,
            group,
            remote,
            fsid,
            index: Mutex::new(HashMap::new()),
            chunk_times: Mutex::new(HashMap::new()),
            foreign: AtomicU64::new(0),
            up: AtomicBool::new(true),
            latency_us: AtomicU64::new(1_000),
            silent_since: Mutex::new(None),
            backlog: Backlog::open(disk, &state_dir.join(format!("backlog-{raid}")))?,
            health,
        })
    }

    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::SeqCst)
    }

    pub fn mark_down(&self, why: &RemoteError) {
        if self.up.swap(false, Ordering::SeqCst) {
            tracing::warn!(account = %self.remote.describe(), "marked down: {why}");
            self.health.notify();
        }
    }

    /// Recent latency: the smoothed one, or how long the member has been silent since a
    /// hedge beat it, whichever is longer.
    pub fn latency_us(&self) -> u64 {
        let silent = self
            .silent_since
            .lock_or_panic()
            .map_or(0, |t| t.elapsed().as_micros() as u64);
        self.latency_us.load(Ordering::Relaxed).max(silent)
    }

    /// A read of this member's that a hedge to another member beat had waited
    /// `at_least`: the member is at least that slow now (the command may never finish,
    /// when it hangs), so the next reads prefer the member that answered; its own answers
    /// bring the latency down again.
    pub fn note_slow(&self, at_least: Duration) {
        self.latency_us
            .fetch_max(at_least.as_micros() as u64, Ordering::Relaxed);
        let now = Instant::now();
        let started = now.checked_sub(at_least).unwrap_or(now);
        self.silent_since.lock_or_panic().get_or_insert(started);
    }

    fn sample(&self, us: u64) {
        let old = self.latency_us.load(Ordering::Relaxed);
        self.latency_us.store((old * 7 + us) / 8, Ordering::Relaxed);
    }

    fn observe<T>(&self, started: Instant, r: Result<T, RemoteError>) -> Result<T, RemoteError> {
        match &r {
            Ok(_) => {
                self.sample(started.elapsed().as_micros() as u64);
                *self.silent_since.lock_or_panic() = None;
            }
            Err(e @ RemoteError::Unavailable(_)) => self.mark_down(e),
            Err(RemoteError::Refused(_)) => {}
        }
        r
    }

    /// Reads the account's whole message list into the index (mount, fsck, gc).
    pub fn load_index(&self) -> Result<Vec<(u32, MessageName)>, RemoteError> {
        let started = Instant::now();
        let listed = self.observe(started, self.remote.list())?;
        Ok(self.install_index(listed))
    }

    /// Replaces the index with a message list already read from this account.
    pub fn install_index(&self, listed: Vec<(u32, String)>) -> Vec<(u32, MessageName)> {
        let mut ours = Vec::with_capacity(listed.len());
        let mut foreign = 0;
        let mut index = HashMap::with_capacity(listed.len());
        let mut times = HashMap::new();
        for (uid, name) in listed {
            match MessageName::parse(&name) {
                Some(k) if k.fsid == self.fsid => {
                    index.entry(k.id()).or_insert_with(Vec::new).push(uid);
                    if k.kind == mailfs_format::Kind::Chunk {
                        let t = times.entry(k.id()).or_insert(k.time);
                        *t = k.time.max(*t);
                    }
                    ours.push((uid, k));
                }
                _ => foreign += 1,
            }
        }
        *self.index.lock_or_panic() = index;
        *self.chunk_times.lock_or_panic() = times;
        self.foreign.store(foreign, Ordering::Relaxed);
        ours
    }

    pub fn uids(&self, id: &NameId) -> Vec<u32> {
        self.index
            .lock_or_panic()
            .get(id)
            .cloned()
            .unwrap_or_default()
    }

    pub fn has(&self, id: &NameId) -> bool {
        self.index.lock_or_panic().contains_key(id)
    }

    /// The time in the name of the newest copy of a chunk held here.
    pub fn chunk_time(&self, id: &NameId) -> Option<i64> {
        if !self.has(id) {
            return None;
        }
        self.chunk_times.lock_or_panic().get(id).copied()
    }

    /// Every content id of `kind` and `object` known here, with its uids.
    pub fn ids_matching(&self, f: impl Fn(&NameId) -> bool) -> Vec<(NameId, Vec<u32>)> {
        self.index
            .lock_or_panic()
            .iter()
            .filter(|(k, _)| f(k))
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    }

    pub fn forget(&self, id: &NameId, uids: &[u32]) {
        let mut index = self.index.lock_or_panic();
        if let Some(v) = index.get_mut(id) {
            v.retain(|u| !uids.contains(u));
            if v.is_empty() {
                index.remove(id);
            }
        }
    }

    /// Appends now; records the new UIDs (or finds them with a SEARCH when the server does
    /// not report them).
    pub fn append_now(&self, batch: &[(MessageName, Vec<u8>)]) -> Result<(), RemoteError> {
        // Names beside borrowed bodies: a batch is many MiB, copied once already by sealing.
        let named: Vec<(String, &[u8])> = batch
            .iter()
            .map(|(k, b)| (k.render(), b.as_slice()))
            .collect();
        let started = Instant::now();
        let uids = self.observe(started, self.remote.append(&named))?;
        for ((name, _), uid) in batch.iter().zip(uids) {
            let uids = match uid {
                Some(u) => vec![u],
                None => self.remote.find(&name.render()).unwrap_or_default(),
            };
            let mut index = self.index.lock_or_panic();
            let v = index.entry(name.id()).or_default();
            for u in uids {
                if !v.contains(&u) {
                    v.push(u);
                }
            }
            if name.kind == mailfs_format::Kind::Chunk {
                let mut times = self.chunk_times.lock_or_panic();
                let t = times.entry(name.id()).or_insert(name.time);
                *t = name.time.max(*t);
            }
        }
        Ok(())
    }

    pub fn fetch(&self, uid: u32) -> Result<Option<Vec<u8>>, RemoteError> {
        let started = Instant::now();
        self.observe(started, self.remote.fetch(uid))
    }

    pub fn fetch_range(
        &self,
        uid: u32,
        start: usize,
        len: usize,
    ) -> Result<Option<Vec<u8>>, RemoteError> {
        let started = Instant::now();
        self.observe(started, self.remote.fetch_range(uid, start, len))
    }

    pub fn expunge(&self, uids: &[u32]) -> Result<(), RemoteError> {
        let started = Instant::now();
        self.observe(started, self.remote.expunge(uids))
    }

    /// Owes a message to this account: durable before the caller acknowledges (M6).
    pub fn owe(&self, name: &MessageName, envelope: &[u8]) -> Result<(), FsError> {
        self.backlog.push(&name.render(), envelope)
    }

    pub fn backlog_len(&self) -> (u64, u64) {
        self.backlog.pending()
    }

    /// Sends what is owed, oldest first. With `then_up`, a caught-up account that answers
    /// is marked up again (it serves reads only once it holds everything).
    pub fn replay(&self, then_up: bool) -> Result<usize, RemoteError> {
        let mut sent = 0;
        loop {
            let items = self.backlog.oldest(REPLAY_BATCH_MAX);
            if items.is_empty() {
                break;
            }
            let mut batch = Vec::with_capacity(items.len());
            for (_, name, body) in &items {
                if let Some(k) = MessageName::parse(name) {
                    batch.push((k, body.clone()));
                }
            }
            self.append_now(&batch)?;
            for (path, _, _) in &items {
                self.backlog.remove(path);
            }
            sent += items.len();
        }
        if then_up && !self.is_up() {
            let started = Instant::now();
            self.observe(started, self.remote.ping())?;
            if self.backlog.pending().0 == 0 {
                // A reconnected account's index may be stale (another mount wrote meanwhile).
                self.load_index()?;
                self.up.store(true, Ordering::SeqCst);
                tracing::info!(account = %self.remote.describe(), "caught up, marked up");
                self.health.notify();
            }
        }
        Ok(sent)
    }
}

/// Messages owed to one account, one file each, fsynced before they count (M6).
struct Backlog {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    state: Mutex<BacklogState>,
}

struct BacklogState {
    next: u64,
    count: u64,
    bytes: u64,
}

const BACKLOG_SUFFIX: &str = ".msg";

impl Backlog {
    fn open(disk: Arc<dyn Disk>, dir: &Path) -> Result<Backlog, FsError> {
        disk.create_dir_all(dir)
            .map_err(|e| FsError::Local(format!("{}: {e}", dir.display())))?;
        let mut next = 0;
        let mut count = 0;
        let mut bytes = 0;
        // A half-written entry from a crash was never acknowledged.
        durable::remove_leftovers(&*disk, dir);
        for seq in durable::sequence(&*disk, dir, BACKLOG_SUFFIX) {
            next = next.max(seq + 1);
            count += 1;
            bytes += durable::file_len(&*disk, &dir.join(format!("{seq:016}{BACKLOG_SUFFIX}")));
        }
        Ok(Backlog {
            disk,
            dir: dir.to_path_buf(),
            state: Mutex::new(BacklogState { next, count, bytes }),
        })
    }

    fn push(&self, name: &str, body: &[u8]) -> Result<(), FsError> {
        let mut st = self.state.lock_or_panic();
        let seq = st.next;
        durable::write_file(
            &*self.disk,
            &self.dir,
            &format!("{seq:016}{BACKLOG_SUFFIX}"),
            &[name.as_bytes(), b"\n", body],
        )
        .map_err(|e| FsError::Local(format!("backlog {}: {e}", self.dir.display())))?;
        st.next += 1;
        st.count += 1;
        st.bytes += (name.len() + 1 + body.len()) as u64;
        Ok(())
    }

    fn pending(&self) -> (u64, u64) {
        let st = self.state.lock_or_panic();
        (st.count, st.bytes)
    }

    fn oldest(&self, max: usize) -> Vec<(PathBuf, String, Vec<u8>)> {
        let mut seqs = durable::sequence(&*self.disk, &self.dir, BACKLOG_SUFFIX);
        seqs.truncate(max);
        seqs.into_iter()
            .filter_map(|seq| {
                let p = self.dir.join(format!("{seq:016}{BACKLOG_SUFFIX}"));
                let data = durable::read_file(&*self.disk, &p).ok()?;
                let nl = data.iter().position(|&b| b == b'\n')?;
                let name = String::from_utf8(data[..nl].to_vec()).ok()?;
                Some((p, name, data[nl + 1..].to_vec()))
            })
            .collect()
    }

    fn remove(&self, path: &Path) {
        let len = durable::file_len(&*self.disk, path);
        if self.disk.remove(path).is_ok() {
            let mut st = self.state.lock_or_panic();
            st.count = st.count.saturating_sub(1);
            st.bytes = st.bytes.saturating_sub(len);
        }
    }
}
