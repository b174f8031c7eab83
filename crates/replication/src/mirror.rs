//! The owner's side: a `Disk` whose every change also goes, in order, to the partner, and whose
//! syncs wait for the partner (docs/replication.md, "States of the owner's side").

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use disk::{Disk, File};

use crate::stream::REPLICA_ACK_WAIT_MAX;
use crate::wire::{self, Op};

/// Writes to the directory which partner, if any, holds every acknowledged change
/// (`nodes.replica`), only while the node's epoch is still `epoch` (a stale process must not
/// write the row of the one serving the node now). Called from a thread of the mirror's
/// own, never from an async task; an error is retried a second later.
pub trait Registry: Send + Sync + 'static {
    fn record(&self, epoch: u64, replica: Option<&str>) -> Result<(), String>;
}

/// What the server configures.
#[derive(Debug, Clone)]
pub struct MirrorConfig {
    /// This node's name.
    pub node: String,
    /// The cluster's stream key ([`crate::stream_key`]).
    pub key: [u8; 32],
    /// The data directory: every mirrored path is relative to it.
    pub root: PathBuf,
    /// What a full copy sends: files and directories directly under `root` (e.g. `queue`,
    /// `store`, `cluster-delivered`).
    pub copy_roots: Vec<String>,
    /// The node's epoch when the mirror starts ([`Mirror::set_epoch`] later).
    pub epoch: u64,
    /// The backlog of sent operations kept for a resume (`replication_backlog_bytes_max`).
    pub backlog_bytes_max: usize,
    /// A full copy's rate (`replication_copy_bytes_per_s`).
    pub copy_bytes_per_s: u64,
    /// How long a sync waits for a partner in sync ([`REPLICA_ACK_WAIT_MAX`]).
    pub ack_wait_max: Duration,
}

impl MirrorConfig {
    pub fn new(node: &str, key: [u8; 32], root: &Path) -> MirrorConfig {
        MirrorConfig {
            node: node.to_string(),
            key,
            root: root.to_path_buf(),
            copy_roots: vec!["queue".into(), "store".into(), "cluster-delivered".into()],
            epoch: 1,
            backlog_bytes_max: 256 << 20,
            copy_bytes_per_s: 64 << 20,
            ack_wait_max: REPLICA_ACK_WAIT_MAX,
        }
    }
}

/// Where the owner's side stands with its partner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No partner.
    Alone,
    /// Connecting, or resuming, or copying: the partner does not have everything yet.
    CatchingUp,
    /// Every sync waits for the partner.
    InSync,
    /// The partner stopped answering, or fell out of the backlog: syncs go on alone.
    Behind,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Alone => "alone",
            Phase::CatchingUp => "catching_up",
            Phase::InSync => "in_sync",
            Phase::Behind => "behind",
        })
    }
}

/// Whether this node may acknowledge changes (docs/replication.md, "Failover").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fence {
    Open,
    /// Its lease ran out by its own clock: syncs wait until it is renewed (nothing is
    /// acknowledged meanwhile), writes go on (they are not acknowledgements).
    Lapsed(String),
    /// Another machine took the node over: every change and sync fails, for good.
    TakenOver(String),
}

/// What the directory was last told (`nodes.replica`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// Not known, or a write is under way.
    Unknown,
    Nobody,
    Partner(String),
}

/// One entry of the stream.
#[derive(Debug)]
pub(crate) enum Entry {
    Op(Op),
    CopyStart(Vec<(String, u64)>),
    CopyDone,
}

impl Entry {
    fn weight(&self) -> usize {
        match self {
            Entry::Op(op) => op.weight(),
            Entry::CopyStart(files) => 64 * files.len() + 64,
            Entry::CopyDone => 64,
        }
    }
}

/// The partner the owner streams to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Partner {
    pub(crate) name: String,
    pub(crate) address: String,
}

pub(crate) struct State {
    pub(crate) next_seq: u64,
    /// Entries by ascending seq, acknowledged or not: the acknowledged ones stay (up to the
    /// byte bound) so a replica whose stored position lags its acks can still resume.
    pub(crate) backlog: VecDeque<(u64, Arc<Entry>)>,
    pub(crate) backlog_bytes: usize,
    /// An entry not yet acknowledged was dropped: the partner needs a full copy.
    pub(crate) lost: bool,
    pub(crate) acked: u64,
    /// When the oldest unacknowledged entry was queued (for the lag).
    pub(crate) oldest_unacked: Option<Instant>,
    pub(crate) phase: Phase,
    pub(crate) partner: Option<Partner>,
    /// Bumped whenever the partner changes: the sender drops a connection of an older one.
    pub(crate) partner_generation: u64,
    pub(crate) epoch: u64,
    pub(crate) fence: Fence,
    /// Back in sync once the partner has acknowledged this seq (set when a connection
    /// resumes, a full copy ends, or a slow partner fell behind on a live connection).
    pub(crate) catch_up_target: Option<u64>,
    /// In sync since this seq: the directory may name the partner once it is acknowledged
    /// (changes before it may have been acknowledged with one copy).
    pub(crate) record_after: Option<u64>,
    /// The seq of the last full copy's `CopyStart`, and of its `CopyDone` once queued: an
    /// entry before the copy is on the partner only once the copy is.
    pub(crate) copy_start: Option<u64>,
    pub(crate) copy_done: Option<u64>,
    pub(crate) recorded: Recorded,
    /// What the registry writer should write next (`None`: nothing).
    pub(crate) to_record: Option<Option<String>>,
    pub(crate) stopping: bool,
}

impl State {
    /// Whether the entry `seq` is on the partner.
    pub(crate) fn is_replicated(&self, seq: u64) -> bool {
        match self.copy_start {
            Some(start) if seq < start => self.copy_done.is_some_and(|done| self.acked >= done),
            _ => self.acked >= seq,
        }
    }
}

pub(crate) struct Shared {
    pub(crate) config: MirrorConfig,
    pub(crate) inner: Arc<dyn Disk>,
    pub(crate) session: u128,
    pub(crate) state: Mutex<State>,
    /// Signalled on every change of `state`.
    pub(crate) changed: Condvar,
    /// The files by their current name. A handle keeps its file's entry, which follows
    /// renames (the engines write through a handle opened under a temporary name and renamed
    /// since) and is detached by a removal or a rename over it.
    files: Mutex<HashMap<String, Arc<FileName>>>,
    registry: Box<dyn Registry>,
}

/// One file as the mirror knows it.
pub(crate) struct FileName {
    /// Its name now (relative); `None` once removed or replaced: its changes are no one's.
    pub(crate) name: Mutex<Option<String>>,
    /// Held while a change to the file is made and queued, and while a full copy reads a
    /// chunk of it, so the chunk lands between the right changes on the partner.
    pub(crate) lock: Mutex<()>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The entry of the file now named `path`.
    pub(crate) fn file_name(&self, path: &str) -> Arc<FileName> {
        let mut files = lock(&self.files);
        if files.len() > 4096 {
            // Files come and go (queue segments, journals): forget the ones nobody holds.
            files.retain(|_, f| Arc::strong_count(f) > 1);
        }
        files
            .entry(path.to_string())
            .or_insert_with(|| {
                Arc::new(FileName {
                    name: Mutex::new(Some(path.to_string())),
                    lock: Mutex::new(()),
                })
            })
            .clone()
    }

    /// Queues `entry` with the next seq and returns it.
    pub(crate) fn push(&self, st: &mut State, entry: Entry) -> u64 {
        let seq = st.next_seq;
        st.next_seq += 1;
        st.backlog_bytes += entry.weight();
        st.backlog.push_back((seq, Arc::new(entry)));
        if st.oldest_unacked.is_none() && seq > st.acked {
            st.oldest_unacked = Some(Instant::now());
        }
        while st.backlog_bytes > self.config.backlog_bytes_max {
            let Some((old, entry)) = st.backlog.pop_front() else {
                break;
            };
            st.backlog_bytes -= entry.weight();
            if old > st.acked && !st.lost {
                // The partner will never get this entry from the backlog.
                st.lost = true;
                if st.phase == Phase::InSync || st.phase == Phase::CatchingUp {
                    self.leave_sync(st, "the backlog overflowed");
                }
            }
        }
        self.changed.notify_all();
        seq
    }

    /// Queues one change, unless the node is fenced; `None` when there is no partner to
    /// stream to (one that appears gets a full copy).
    fn queue(&self, entry: Entry) -> io::Result<Option<u64>> {
        let mut st = self.state();
        if let Fence::TakenOver(why) = &st.fence {
            return Err(fenced_error(why));
        }
        if st.partner.is_none() {
            st.lost = true;
            return Ok(None);
        }
        Ok(Some(self.push(&mut st, entry)))
    }

    /// Leaves InSync: syncs stop waiting for the partner once the directory says so.
    pub(crate) fn leave_sync(&self, st: &mut State, why: &str) {
        if st.phase == Phase::InSync {
            tracing::warn!(
                event = "replica_behind",
                node = %self.config.node,
                replica = st.partner.as_ref().map(|p| p.name.as_str()).unwrap_or(""),
                reason = why,
                msg = "acknowledging changes with one copy until the replica catches up"
            );
        }
        st.phase = if st.partner.is_some() {
            Phase::Behind
        } else {
            Phase::Alone
        };
        st.record_after = None;
        st.catch_up_target = Some(st.next_seq - 1);
        if st.recorded != Recorded::Nobody {
            st.to_record = Some(None);
        }
        self.changed.notify_all();
    }

    /// Waits until the change `seq` is on the partner, or the directory names no partner
    /// (docs/replication.md R2).
    fn wait_replicated(&self, seq: Option<u64>) -> io::Result<()> {
        let deadline = Instant::now() + self.config.ack_wait_max;
        let mut st = self.state();
        loop {
            match &st.fence {
                Fence::TakenOver(why) => return Err(fenced_error(why)),
                Fence::Lapsed(why) if st.stopping => return Err(fenced_error(why)),
                Fence::Lapsed(_) => {
                    // Nothing is acknowledged without a lease; wait for its renewal.
                    st = self
                        .changed
                        .wait_timeout(st, Duration::from_secs(1))
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    continue;
                }
                Fence::Open => {}
            }
            if seq.is_some_and(|seq| st.is_replicated(seq)) {
                return Ok(());
            }
            let now = Instant::now();
            if st.phase == Phase::InSync {
                if now < deadline {
                    st = self
                        .changed
                        .wait_timeout(st, deadline - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    continue;
                }
                self.leave_sync(&mut st, "no acknowledgement in time");
            }
            if st.recorded == Recorded::Nobody {
                return Ok(());
            }
            if st.to_record.is_none() {
                st.to_record = Some(None);
                self.changed.notify_all();
            }
            st = self
                .changed
                .wait_timeout(st, Duration::from_secs(1))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The registry writer: one thread, writes what `to_record` says, retries each second.
    fn record_loop(self: Arc<Self>) {
        loop {
            let (want, epoch) = {
                let mut st = self.state();
                loop {
                    // Taken over: the row is the new epoch's, nothing more is written.
                    if st.stopping || matches!(st.fence, Fence::TakenOver(_)) {
                        return;
                    }
                    if let Some(want) = st.to_record.take() {
                        let already = match (&want, &st.recorded) {
                            (None, Recorded::Nobody) => true,
                            (Some(p), Recorded::Partner(q)) => p == q,
                            _ => false,
                        };
                        if !already {
                            if want.is_some() {
                                // From now on nobody may count on "no replica named".
                                st.recorded = Recorded::Unknown;
                            }
                            break (want, st.epoch);
                        }
                    }
                    st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
                }
            };
            let result = self.registry.record(epoch, want.as_deref());
            let mut st = self.state();
            match result {
                Ok(()) => {
                    st.recorded = match &want {
                        None => Recorded::Nobody,
                        Some(p) => Recorded::Partner(p.clone()),
                    };
                    match &want {
                        Some(p) => tracing::info!(
                            event = "replica_caught_up",
                            node = %self.config.node,
                            replica = %p,
                            msg = "the replica holds every acknowledged change"
                        ),
                        None => tracing::info!(
                            event = "replica_unnamed",
                            node = %self.config.node,
                            msg = "the directory names no replica for this node"
                        ),
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        event = "replica_record_error",
                        node = %self.config.node,
                        error = %e,
                        msg = "could not write the replica state to the directory; retrying"
                    );
                    if st.to_record.is_none() {
                        st.to_record = Some(want);
                    }
                    drop(st);
                    std::thread::sleep(Duration::from_secs(1));
                    st = self.state();
                }
            }
            self.changed.notify_all();
            drop(st);
        }
    }
}

fn fenced_error(why: &str) -> io::Error {
    io::Error::other(format!("this node is fenced: {why}"))
}

/// The server's handle: partner, epoch, fencing, status.
#[derive(Clone)]
pub struct Mirror {
    shared: Arc<Shared>,
}

/// What `node list`, the metrics and the logs show.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorStatus {
    pub phase: Phase,
    pub partner: Option<String>,
    /// Seconds the oldest change not yet on the partner has waited (0 when none).
    pub lag_seconds: f64,
    pub acked: u64,
    pub queued: u64,
    pub fenced: bool,
    /// The directory names the partner as holding every acknowledged change.
    pub recorded: bool,
}

impl Mirror {
    /// The mirror and its disk, with the registry writer running; the sender is started by
    /// [`Mirror::new`].
    pub(crate) fn create(
        config: MirrorConfig,
        inner: Arc<dyn Disk>,
        registry: Box<dyn Registry>,
    ) -> std::io::Result<(Mirror, Arc<dyn Disk>, Arc<Shared>)> {
        let epoch = config.epoch;
        let shared = Arc::new(Shared {
            session: rand::random(),
            config,
            inner,
            state: Mutex::new(State {
                next_seq: 1,
                backlog: VecDeque::new(),
                backlog_bytes: 0,
                lost: true,
                acked: 0,
                oldest_unacked: None,
                phase: Phase::Alone,
                partner: None,
                partner_generation: 0,
                epoch,
                fence: Fence::Open,
                catch_up_target: None,
                record_after: None,
                copy_start: None,
                copy_done: None,
                recorded: Recorded::Unknown,
                // At start nobody knows what the partner has: say so first.
                to_record: Some(None),
                stopping: false,
            }),
            changed: Condvar::new(),
            files: Mutex::new(HashMap::new()),
            registry,
        });
        let recorder = shared.clone();
        std::thread::Builder::new()
            .name("replica-registry".into())
            .spawn(move || recorder.record_loop())?;
        let disk = Arc::new(MirrorDisk {
            shared: shared.clone(),
        });
        Ok((
            Mirror {
                shared: shared.clone(),
            },
            disk,
            shared,
        ))
    }

    /// The partner to stream to (`None`: nobody). A new partner gets a full copy.
    pub fn set_partner(&self, partner: Option<(&str, &str)>) {
        let shared = &self.shared;
        let mut st = shared.state();
        let new = partner.map(|(name, address)| Partner {
            name: name.to_string(),
            address: address.to_string(),
        });
        if st.partner == new {
            return;
        }
        if let Some(p) = &new {
            tracing::info!(event = "replica_partner", node = %shared.config.node, replica = %p.name, address = %p.address);
        }
        shared.leave_sync(&mut st, "the partner changed");
        st.partner = new;
        st.partner_generation += 1;
        st.lost = true;
        st.phase = if st.partner.is_some() {
            Phase::CatchingUp
        } else {
            Phase::Alone
        };
        shared.changed.notify_all();
    }

    /// The node's epoch, carried by every stream (a replica refuses an older one).
    pub fn set_epoch(&self, epoch: u64) {
        let mut st = self.shared.state();
        st.epoch = epoch;
        self.shared.changed.notify_all();
    }

    /// The node's lease ran out by its own clock (`Some(why)`): syncs wait, so nothing is
    /// acknowledged, until it is renewed (`None`). Nothing after [`Mirror::set_taken_over`].
    pub fn set_lapsed(&self, why: Option<&str>) {
        let mut st = self.shared.state();
        if matches!(st.fence, Fence::TakenOver(_)) {
            return;
        }
        st.fence = match why {
            Some(why) => Fence::Lapsed(why.to_string()),
            None => Fence::Open,
        };
        self.shared.changed.notify_all();
    }

    /// Whether another machine took the node over ([`Mirror::set_taken_over`]).
    pub fn is_taken_over(&self) -> bool {
        matches!(self.shared.state().fence, Fence::TakenOver(_))
    }

    /// Another machine took the node over: every change and sync fails from now on.
    pub fn set_taken_over(&self, why: &str) {
        let mut st = self.shared.state();
        st.fence = Fence::TakenOver(why.to_string());
        self.shared.changed.notify_all();
    }

    pub fn status(&self) -> MirrorStatus {
        let st = self.shared.state();
        MirrorStatus {
            phase: st.phase,
            partner: st.partner.as_ref().map(|p| p.name.clone()),
            lag_seconds: st
                .oldest_unacked
                .map(|t| t.elapsed().as_secs_f64())
                .unwrap_or(0.0),
            acked: st.acked,
            queued: st.next_seq - 1,
            fenced: st.fence != Fence::Open,
            recorded: matches!(st.recorded, Recorded::Partner(_)),
        }
    }

    /// Stops the threads (the disk keeps working, alone).
    pub fn stop(&self) {
        let mut st = self.shared.state();
        st.stopping = true;
        self.shared.changed.notify_all();
    }
}

/// The `Disk` the engines get.
pub struct MirrorDisk {
    shared: Arc<Shared>,
}

impl MirrorDisk {
    /// `path` relative to the data directory, checked.
    fn relative(&self, path: &Path) -> io::Result<String> {
        let rel = path
            .strip_prefix(&self.shared.config.root)
            .map_err(|_| {
                io::Error::other(format!(
                    "{} is outside the mirrored data directory",
                    path.display()
                ))
            })?
            .to_str()
            .ok_or_else(|| io::Error::other(format!("{} is not UTF-8", path.display())))?
            .to_string();
        let rel = if rel.is_empty() { ".".to_string() } else { rel };
        wire::check_path(&rel).map_err(|e| io::Error::other(e.0))?;
        Ok(rel)
    }
}

impl Disk for MirrorDisk {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn File>> {
        let rel = self.relative(path)?;
        let name = self.shared.file_name(&rel);
        let _held = lock(&name.lock);
        let existed = !create || self.shared.inner.exists(path);
        let file = self.shared.inner.open(path, create)?;
        if !existed {
            self.shared.queue(Entry::Op(Op::Create { path: rel }))?;
        }
        Ok(Arc::new(MirrorFile {
            inner: file,
            name: name.clone(),
            shared: self.shared.clone(),
        }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let rel = self.relative(path)?;
        self.shared.inner.create_dir_all(path)?;
        self.shared
            .queue(Entry::Op(Op::CreateDirAll { path: rel }))?;
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.shared.inner.list(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        self.shared.inner.exists(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (rel_from, rel_to) = (self.relative(from)?, self.relative(to)?);
        let (a, b) = (
            self.shared.file_name(&rel_from),
            self.shared.file_name(&rel_to),
        );
        // Always in the same order, whatever the direction of the rename.
        let (first, second) = if rel_from <= rel_to {
            (&a, &b)
        } else {
            (&b, &a)
        };
        let _one = lock(&first.lock);
        let _two = (!Arc::ptr_eq(first, second)).then(|| lock(&second.lock));
        self.shared.inner.rename(from, to)?;
        if !Arc::ptr_eq(&a, &b) {
            let mut files = lock(&self.shared.files);
            // What was named `to` is gone; what was `from` is `to` now.
            *lock(&b.name) = None;
            *lock(&a.name) = Some(rel_to.clone());
            files.remove(&rel_from);
            files.insert(rel_to.clone(), a.clone());
        }
        self.shared.queue(Entry::Op(Op::Rename {
            from: rel_from,
            to: rel_to,
        }))?;
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let rel = self.relative(path)?;
        let name = self.shared.file_name(&rel);
        let _held = lock(&name.lock);
        self.shared.inner.remove(path)?;
        *lock(&name.name) = None;
        lock(&self.shared.files).remove(&rel);
        self.shared.queue(Entry::Op(Op::Remove { path: rel }))?;
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let rel = self.relative(dir)?;
        let seq = self.shared.queue(Entry::Op(Op::SyncDir { path: rel }))?;
        self.shared.inner.sync_dir(dir)?;
        self.shared.wait_replicated(seq)
    }

    fn available_bytes(&self, dir: &Path) -> io::Result<u64> {
        self.shared.inner.available_bytes(dir)
    }
}

/// A file of the mirrored disk.
struct MirrorFile {
    inner: Arc<dyn File>,
    name: Arc<FileName>,
    shared: Arc<Shared>,
}

impl MirrorFile {
    /// Makes a change locally and queues it under the file's current name, holding the
    /// file's lock; a file removed or replaced since it was opened changes only here.
    fn change(
        &self,
        local: impl FnOnce() -> io::Result<()>,
        ops: impl FnOnce(&str) -> Vec<Op>,
    ) -> io::Result<()> {
        let _held = lock(&self.name.lock);
        if let Fence::TakenOver(why) = &self.shared.state().fence {
            return Err(fenced_error(why));
        }
        local()?;
        let Some(path) = lock(&self.name.name).clone() else {
            return Ok(());
        };
        for op in ops(&path) {
            self.shared.queue(Entry::Op(op))?;
        }
        Ok(())
    }
}

impl File for MirrorFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.change(
            || self.inner.write_all_at(buf, offset),
            |path| {
                buf.chunks(wire::WRITE_BYTES_MAX)
                    .scan(offset, |at, chunk| {
                        let op = Op::Write {
                            path: path.to_string(),
                            offset: *at,
                            bytes: chunk.to_vec(),
                        };
                        *at += chunk.len() as u64;
                        Some(op)
                    })
                    .collect()
            },
        )
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.change(
            || self.inner.set_len(len),
            |path| {
                vec![Op::SetLen {
                    path: path.to_string(),
                    len,
                }]
            },
        )
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        self.change(
            || self.inner.allocate(len),
            |path| {
                vec![Op::Allocate {
                    path: path.to_string(),
                    len,
                }]
            },
        )
    }

    fn sync_data(&self) -> io::Result<()> {
        let path = lock(&self.name.name).clone();
        // Queued first, so the partner's sync runs while ours does.
        let seq = match path {
            Some(path) => self.shared.queue(Entry::Op(Op::Sync { path }))?,
            None => None,
        };
        self.inner.sync_data()?;
        self.shared.wait_replicated(seq)
    }

    fn write_zeros(&self, offset: u64, len: u64) -> io::Result<()> {
        self.change(
            || self.inner.write_zeros(offset, len),
            |path| {
                vec![Op::Zeros {
                    path: path.to_string(),
                    offset,
                    len,
                }]
            },
        )
    }
}
