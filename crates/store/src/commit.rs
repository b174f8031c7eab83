//! The writer: group commit of appends, and the commit of every other change (folders,
//! flags, expunge, users). The changes a mail protocol makes are written in `mailstore.rs`
//! (the `Mailstore` implementation) on top of what is here; the operator's are in `users.rs`
//! (delete, rename) and `expunge.rs` (expunging below a UID), both through [`Store::commit`].
//!
//! One writer at a time holds [`Store::writer`]. A change is made in this order, always:
//!
//! 1. plan under the writer lock (UIDs, MODSEQs, extents from the allocator);
//! 2. write message data and `fdatasync` the volume (S1: data before the index names it);
//! 3. append one journal record and `fdatasync` the journal: the commit point;
//! 4. apply the record to the in-memory index ([`crate::index::apply`]), making it visible;
//! 5. release extents the record stopped naming (S6: only now, after it is durable).
//!
//! A failure in 2 frees the planned extents and fails the batch; nothing was named. A failure
//! in 3 leaves the journal's tail unknown, so the writer stops (every later change fails with
//! `StoreError::Failed`) until the store is reopened and recovery decides.
//!
//! Appends are group-committed: callers queue their prepared messages; a caller that finds
//! no leader becomes it, takes everything waiting (up to the batch limits), commits it with
//! one volume sync and one journal sync, and wakes everyone; callers whose messages were in
//! someone else's batch just collect their result. A batch is committed in the phases of
//! docs/storage.md, "Phases of an append batch": `plan_appends` (1), `write_appends` (2),
//! `commit` (3 to 5), each ending by asserting what it established.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::Instant;

use disk::{Disk, File};
use mail_model::Mailstore;

use crate::Flags;
use crate::StoreError;
use crate::alloc::Allocator;
use crate::cache::{SummaryCache, ViewCache};
use crate::config::StoreConfig;
use crate::error::IoContext;
use crate::flags::KeywordSet;
use crate::format::{MSG_HEADER_BYTES, MsgHeader, UNIT, encode_summary, parse_summary, units_for};
use crate::index::{Catalog, FolderCell, Freed};
use crate::journal::{AppendOp, Journal, Op, encode_ops};
use crate::names::{normalize_folder, validate_keyword, validate_user};
use crate::recent::Recent;
use crate::{AppendRequest, Appended, FolderStatus, NewMessage};

/// Largest single `pwrite` when laying out a batch's adjacent messages.
const WRITE_RUN_BYTES_MAX: usize = 8 << 20;
/// A message content at least this large is written from its own buffer, not copied into a
/// record buffer first.
const CONTENT_IN_PLACE_BYTES: usize = 1 << 20;

/// Cumulative I/O counters (relaxed atomics: statistics, not synchronisation).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) data_syncs: AtomicU64,
    pub(crate) journal_syncs: AtomicU64,
    pub(crate) data_bytes: AtomicU64,
    pub(crate) journal_bytes: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) appended: AtomicU64,
    pub(crate) checkpoints: AtomicU64,
    pub(crate) defrag_messages: AtomicU64,
    pub(crate) defrag_bytes: AtomicU64,
}

pub(crate) fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// State only the writer touches.
pub(crate) struct Writer {
    pub(crate) journal: Journal,
    pub(crate) alloc: Allocator,
    /// Set after a failed journal write: nothing more is written until reopen.
    pub(crate) failed: Option<String>,
    /// Size of the last snapshot: the journal may hold as much before the next checkpoint.
    pub(crate) snapshot_bytes: u64,
    /// Why the last checkpoint failed (a full disk, usually), until one succeeds. The store
    /// goes on meanwhile: the journal keeps every change.
    pub(crate) checkpoint_problem: Option<String>,
    /// No automatic checkpoint is tried before this, after one failed.
    pub(crate) checkpoint_retry_at: Option<Instant>,
}

/// How long the writer waits before trying a failed checkpoint again.
const CHECKPOINT_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// An append validated and laid out outside any lock.
pub(crate) struct Prepared {
    pub(crate) user: String,
    pub(crate) folder: String,
    pub(crate) flags: Flags,
    pub(crate) keywords: Vec<String>,
    pub(crate) internal_date: i64,
    /// The UID an import asks for: used if it ascends past the folder's UIDNEXT when the
    /// batch is planned, else the next UID is given (see `Store::commit_import`). `None` for
    /// ordinary appends.
    pub(crate) uid: Option<u32>,
    /// The record's start: header placeholder and summary. The content follows it on disk,
    /// then zero padding to a whole unit; they are kept apart so a large message is not
    /// copied into a record buffer (held twice) to be written.
    head: Vec<u8>,
    content: Vec<u8>,
    summary_len: u32,
    content_len: u32,
    data_crc: u32,
    /// The key of the handed-over copy this append stores (its last append, for a copy
    /// filed into several folders): journaled in the batch's record (docs/storage.md,
    /// "Delivered keys").
    pub(crate) delivered: Option<crate::DeliveredKey>,
}

impl Prepared {
    /// Bytes of the record on disk, padding included: whole units.
    fn record_len(&self) -> usize {
        (units_for(self.summary_len, self.content_len) * UNIT) as usize
    }

    /// Appends the whole record (head, content, padding) to `out`.
    fn record_into(&self, out: &mut Vec<u8>) {
        let end = out.len() + self.record_len();
        out.extend_from_slice(&self.head);
        out.extend_from_slice(&self.content);
        out.resize(end, 0);
    }

    /// Writes the record at `offset` of `volume`: a large content straight from its own
    /// buffer (head, content and padding in three writes), a small record in one write.
    fn write_at(&self, volume: &dyn File, offset: u64) -> std::io::Result<()> {
        if self.content.len() < CONTENT_IN_PLACE_BYTES {
            let mut record = Vec::with_capacity(self.record_len());
            self.record_into(&mut record);
            return volume.write_all_at(&record, offset);
        }
        volume.write_all_at(&self.head, offset)?;
        let content_at = offset + self.head.len() as u64;
        volume.write_all_at(&self.content, content_at)?;
        let padding = self.record_len() - self.head.len() - self.content.len();
        if padding > 0 {
            volume.write_all_at(&vec![0u8; padding], content_at + self.content.len() as u64)?;
        }
        Ok(())
    }
}

struct Slot {
    bytes: usize,
    prepared: Mutex<Option<Prepared>>,
    result: Mutex<Option<Result<Appended, StoreError>>>,
}

impl Slot {
    fn done(&self) -> bool {
        lock(&self.result).is_some()
    }
}

#[derive(Default)]
pub(crate) struct CommitQueue {
    waiting: VecDeque<Arc<Slot>>,
    leader: bool,
}

/// Locks a mutex, ignoring poison: every critical section leaves its state consistent.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The mailbox store: the index, the volume, the writer and the caches, shared by every
/// caller as an `Arc<Store>` (`Send + Sync`). Its methods live with their concern: changes
/// here (users in `users.rs`, expunge in `expunge.rs`), reads in `read.rs`, imports in
/// `import.rs`, defragmentation in `defrag.rs`, the check in `fsck.rs`, open and checkpoints in
/// `open.rs`.
pub struct Store {
    pub(crate) disk: Arc<dyn Disk>,
    pub(crate) dir: PathBuf,
    pub(crate) config: StoreConfig,
    pub(crate) store_id: u64,
    pub(crate) volume: Arc<dyn File>,
    pub(crate) catalog: RwLock<Catalog>,
    pub(crate) writer: Mutex<Writer>,
    pub(crate) queue: Mutex<CommitQueue>,
    pub(crate) queue_cv: Condvar,
    pub(crate) counters: Counters,
    /// Told the user of every folder a committed record changed (see `Store::set_observer`).
    pub(crate) observer: RwLock<Option<crate::Observer>>,
    /// RFC 3501 `\Recent`, in memory (`recent.rs`).
    pub(crate) recent: Recent,
    /// Summaries without their MIME structure (`summary_cache_bytes_max`).
    pub(crate) summaries: SummaryCache,
    /// Folder views shared while a folder is unchanged (`view_cache_bytes_max`).
    pub(crate) views: ViewCache,
}

/// Clears the leader flag even if the leader's commit panicked, so followers are not stuck.
struct LeaderGuard<'a>(&'a Store);

impl Drop for LeaderGuard<'_> {
    fn drop(&mut self) {
        lock(&self.0.queue).leader = false;
        self.0.queue_cv.notify_all();
    }
}

/// Per-folder planning state while a batch is laid out.
struct Planned {
    uidvalidity: u32,
    uidnext: u32,
    modseq: u64,
    keywords: Vec<String>,
    tail_end: Option<u64>,
}

/// Defines the keywords the folder's table lacks (one `DefineKeyword` each, in this batch's
/// record) and returns the message's keyword bits.
fn define_keywords(
    t: &mut Planned,
    folder: u32,
    keywords: &[String],
    ops: &mut Vec<Op>,
) -> KeywordSet {
    for k in keywords {
        if !t.keywords.contains(k) {
            ops.push(Op::DefineKeyword {
                folder,
                index: t.keywords.len() as u8,
                name: k.clone(),
            });
            t.keywords.push(k.clone());
        }
    }
    let mut kw = KeywordSet::default();
    for k in keywords {
        if let Some(ix) = t.keywords.iter().position(|x| x == k) {
            kw.insert(ix);
        }
    }
    kw
}

/// A batch of appends as the writer lays it out (`Store::plan_appends`).
struct AppendPlan {
    /// One outcome per append of the batch, in order: `None` until it is planned.
    results: Vec<Option<Result<Appended, StoreError>>>,
    /// The batch's journal record.
    ops: Vec<Op>,
    planned: HashMap<u32, Planned>,
    by_name: HashMap<(String, String), u32>,
    /// (position in the batch, start unit, units) of every append given an extent.
    placed: Vec<(usize, u64, u64)>,
    next_folder_id: u32,
    last_uidvalidity: u32,
    new_folders_per_user: HashMap<String, usize>,
    /// Record bytes of the placed appends.
    batch_bytes: u64,
}

impl AppendPlan {
    fn new(appends: usize, next_folder_id: u32, last_uidvalidity: u32) -> AppendPlan {
        AppendPlan {
            results: (0..appends).map(|_| None).collect(),
            ops: Vec::new(),
            planned: HashMap::new(),
            by_name: HashMap::new(),
            placed: Vec::new(),
            next_folder_id,
            last_uidvalidity,
            new_folders_per_user: HashMap::new(),
            batch_bytes: 0,
        }
    }
}

impl Store {
    pub(crate) fn writer(&self) -> Result<MutexGuard<'_, Writer>, StoreError> {
        let w = lock(&self.writer);
        if let Some(reason) = &w.failed {
            return Err(StoreError::Failed(reason.clone()));
        }
        Ok(w)
    }

    pub(crate) fn catalog(&self) -> std::sync::RwLockReadGuard<'_, Catalog> {
        self.catalog.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Finds a folder by user and (unnormalised) name.
    pub(crate) fn folder(&self, user: &str, folder: &str) -> Result<Arc<FolderCell>, StoreError> {
        validate_user(user, &self.config)?;
        let name = normalize_folder(folder, &self.config)?;
        let cat = self.catalog();
        let Some(names) = cat.users.get(user) else {
            return Err(StoreError::NoSuchUser(user.to_string()));
        };
        names
            .get(&name)
            .and_then(|id| cat.folders.get(id))
            .cloned()
            .ok_or_else(|| StoreError::NoSuchFolder {
                user: user.to_string(),
                folder: name,
            })
    }

    /// Journals `ops` as one record (the commit point), applies them, frees what they stopped
    /// naming. Returns the freed extents.
    pub(crate) fn commit(&self, w: &mut Writer, ops: &[Op]) -> Result<Vec<Freed>, StoreError> {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let payload = encode_ops(ops);
        // Room first: refused for want of space, nothing was written and the store goes on.
        w.journal.make_room(payload.len())?;
        match w.journal.append(&payload) {
            Ok(n) => {
                bump(&self.counters.journal_syncs, 1);
                bump(&self.counters.journal_bytes, n);
            }
            Err(e) => {
                w.failed = Some(e.to_string());
                return Err(e);
            }
        }
        // Looked up before applying: a deleted folder leaves the catalog.
        let users = self.users_to_notify(ops);
        let mut freed = Vec::new();
        for op in ops {
            if let Err(msg) = crate::index::apply(&self.catalog, op, &mut freed) {
                // The record is durable but does not fit the index: a bug. Stop writing;
                // recovery will refuse the same record with a clear error.
                let reason = format!("a committed change does not apply: {msg}");
                w.failed = Some(reason.clone());
                return Err(StoreError::Failed(reason));
            }
        }
        // S6: the record that stops naming these extents is durable; only now free them.
        for f in &freed {
            w.alloc.free(f.start, f.units);
        }
        // O(1): free + reserved + used is the volume, and no free was refused.
        assert_eq!(
            w.alloc.check_accounting(),
            Ok(()),
            "S5 violated after commit"
        );
        self.maybe_checkpoint(w);
        self.notify(&users);
        Ok(freed)
    }

    /// The users whose folders `ops` change, if anyone is watching.
    fn users_to_notify(&self, ops: &[Op]) -> Vec<String> {
        if self
            .observer
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
        {
            return Vec::new();
        }
        let mut folders: Vec<u32> = ops.iter().filter_map(Op::folder).collect();
        folders.sort_unstable();
        folders.dedup();
        let mut users: Vec<String> = {
            let catalog = self.catalog();
            folders
                .iter()
                .filter_map(|id| {
                    catalog
                        .folders
                        .get(id)
                        .map(|c| c.read().user.clone())
                        .or_else(|| {
                            // A folder this very record creates is not in the catalog yet.
                            ops.iter().find_map(|op| match op {
                                Op::CreateFolder { folder, user, .. } if folder == id => {
                                    Some(user.clone())
                                }
                                _ => None,
                            })
                        })
                })
                .collect()
        };
        users.sort_unstable();
        users.dedup();
        users
    }

    /// Installs the function told about every committed change (IMAP IDLE wakes on it).
    /// It runs on the committing thread, after the change is durable: keep it short.
    pub fn set_observer(&self, observer: crate::Observer) {
        *self.observer.write().unwrap_or_else(|p| p.into_inner()) = Some(observer);
    }

    /// Tells the observer whose folders changed; the change is durable and applied, so
    /// whoever looks now sees it.
    fn notify(&self, users: &[String]) {
        let observer = self.observer.read().unwrap_or_else(|p| p.into_inner());
        if let Some(observer) = observer.as_ref() {
            for user in users {
                observer(user);
            }
        }
    }

    /// Starts a checkpoint once the journal holds as much as the last snapshot (within the
    /// configured bounds). A failure leaves every file as a crash there would, which the
    /// journal covers (docs/storage.md, crash table): the store goes on, reports the problem,
    /// and tries again after `CHECKPOINT_RETRY_AFTER`.
    fn maybe_checkpoint(&self, w: &mut Writer) {
        if w.journal.used() < self.config.checkpoint_after_bytes(w.snapshot_bytes)
            || w.checkpoint_retry_at.is_some_and(|at| Instant::now() < at)
        {
            return;
        }
        let _ = self.checkpoint_noting(w);
    }

    /// [`Store::checkpoint_locked`], noting a failure for `write_problem` and the retry.
    pub(crate) fn checkpoint_noting(&self, w: &mut Writer) -> Result<(), StoreError> {
        let r = self.checkpoint_locked(w);
        match &r {
            Ok(()) => {
                w.checkpoint_problem = None;
                w.checkpoint_retry_at = None;
            }
            // A full disk is reported where it is seen (the free-space reserve) and passes
            // with it: only another cause stays on record until a checkpoint succeeds.
            Err(e) if e.is_out_of_space() => {
                w.checkpoint_retry_at = Some(Instant::now() + CHECKPOINT_RETRY_AFTER);
            }
            Err(e) => {
                w.checkpoint_problem = Some(format!("checkpoint failed: {e}"));
                w.checkpoint_retry_at = Some(Instant::now() + CHECKPOINT_RETRY_AFTER);
            }
        }
        r
    }

    /// Why the store cannot write, or could not checkpoint, if it cannot; `None` when healthy.
    /// For a health check: a failed write stops the store until it is reopened; a failed
    /// checkpoint (a full disk) passes by itself once space is freed.
    pub fn write_problem(&self) -> Option<String> {
        let w = lock(&self.writer);
        w.failed
            .as_ref()
            .map(|f| format!("the store stopped after a failed write: {f}"))
            .or_else(|| w.checkpoint_problem.clone())
    }

    /// Allocates `units` for a folder; releases every reservation, then grows the volume, if
    /// nothing fits.
    pub(crate) fn allocate(
        &self,
        w: &mut Writer,
        folder: u32,
        tail_end: Option<u64>,
        units: u64,
    ) -> Result<u64, StoreError> {
        if let Some(s) = w.alloc.allocate(folder, tail_end, units) {
            return Ok(s);
        }
        w.alloc.release_all_reservations();
        if let Some(s) = w.alloc.allocate(folder, tail_end, units) {
            return Ok(s);
        }
        // The volume grows by as much as it holds (docs/storage.md, "Sizes"); on a full file
        // system, by only what this message needs, so the last free bytes are still used.
        let volume_units = w.alloc.end() - w.alloc.base();
        let mut step = self
            .config
            .volume_step_bytes(volume_units * UNIT)
            .div_ceil(UNIT);
        if let Ok(available) = self.disk.available_bytes(&self.dir) {
            step = step.min(available.saturating_sub(self.config.disk_reserve_bytes) / UNIT);
        }
        let step = step.max(units);
        let mut new_end = w.alloc.end() + step;
        // The new length becomes durable with the volume's fdatasync, before any journal
        // record names space in it (S1).
        let grown = match self.volume.allocate(new_end * UNIT) {
            Err(e) if disk::is_out_of_space(&e) && step > units => {
                new_end = w.alloc.end() + units;
                self.volume.allocate(new_end * UNIT)
            }
            other => other,
        };
        grown.ctx(|| "growing volume.dat".to_string())?;
        w.alloc.grow(new_end);
        w.alloc
            .allocate(folder, tail_end, units)
            .ok_or_else(|| StoreError::corrupt("allocator: no space after growing the volume"))
    }

    fn next_uidvalidity(last: u32) -> u32 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as u32)
            .unwrap_or(1);
        now.max(last.saturating_add(1)).max(1)
    }

    // ---- appends ----------------------------------------------------------------------

    pub(crate) fn prepare(&self, req: AppendRequest) -> Result<Prepared, StoreError> {
        let c = &self.config;
        validate_user(&req.user, c)?;
        let folder = normalize_folder(&req.folder, c)?;
        let m = req.message;
        if m.content.len() > c.message_bytes_max {
            return Err(StoreError::TooLarge {
                what: format!(
                    "message of {} bytes (limit {})",
                    m.content.len(),
                    c.message_bytes_max
                ),
            });
        }
        let mut keywords: Vec<String> = Vec::new();
        for k in m.keywords {
            validate_keyword(&k, c)?;
            if !keywords.contains(&k) {
                keywords.push(k);
            }
        }
        if keywords.len() > c.keywords_per_folder_max {
            return Err(StoreError::Limit {
                what: format!("more than {} keywords", c.keywords_per_folder_max),
            });
        }
        let summary = encode_summary(&parse_summary(&m.content, c.summary_field_bytes_max));
        let summary_len = summary.len() as u32;
        let content_len = m.content.len() as u32;
        let data_crc = crc32c::crc32c_append(crc32c::crc32c(&summary), &m.content);
        let mut head = Vec::with_capacity(MSG_HEADER_BYTES + summary.len());
        head.resize(MSG_HEADER_BYTES, 0);
        head.extend_from_slice(&summary);
        Ok(Prepared {
            user: req.user,
            folder,
            flags: m.flags,
            keywords,
            internal_date: m.internal_date,
            uid: None,
            head,
            content: m.content,
            summary_len,
            content_len,
            data_crc,
            delivered: None,
        })
    }

    /// Appends one message, group-committed with whatever else is waiting. Creates INBOX on
    /// first delivery; other folders must exist.
    pub fn append(
        &self,
        user: &str,
        folder: &str,
        message: NewMessage,
    ) -> Result<Appended, StoreError> {
        let request = AppendRequest {
            user: user.to_string(),
            folder: folder.to_string(),
            message,
        };
        self.group_commit(vec![request])
            .pop()
            .unwrap_or_else(|| Err(StoreError::Invalid("append produced no result".into())))
    }

    /// Appends every request in the next group commit.
    pub(crate) fn group_commit(
        &self,
        requests: Vec<AppendRequest>,
    ) -> Vec<Result<Appended, StoreError>> {
        self.append_batch_delivered(requests.into_iter().map(|r| (r, None)).collect())
    }

    /// Appends every request in the next group commit, each with the key of the handed-over
    /// copy it stores, if any: the keys of the appends that are stored go into the same
    /// journal record, so a copy and its key are durable together (docs/storage.md,
    /// "Delivered keys"; [`Store::already_delivered`]). A copy filed into several folders
    /// gives its key to its last append. Results in order.
    pub fn append_batch_delivered(
        &self,
        requests: Vec<(AppendRequest, Option<crate::DeliveredKey>)>,
    ) -> Vec<Result<Appended, StoreError>> {
        let mut out: Vec<Option<Result<Appended, StoreError>>> = Vec::with_capacity(requests.len());
        let mut mine: Vec<(usize, Arc<Slot>)> = Vec::new();
        for (i, (req, delivered)) in requests.into_iter().enumerate() {
            match self.prepare(req) {
                Ok(mut p) => {
                    p.delivered = delivered;
                    out.push(None);
                    let bytes = p.record_len();
                    mine.push((
                        i,
                        Arc::new(Slot {
                            bytes,
                            prepared: Mutex::new(Some(p)),
                            result: Mutex::new(None),
                        }),
                    ));
                }
                Err(e) => out.push(Some(Err(e))),
            }
        }
        if !mine.is_empty() {
            let mut q = lock(&self.queue);
            q.waiting.extend(mine.iter().map(|(_, s)| s.clone()));
            loop {
                if mine.iter().all(|(_, s)| s.done()) {
                    break;
                }
                if q.leader {
                    q = self.queue_cv.wait(q).unwrap_or_else(|p| p.into_inner());
                    continue;
                }
                q.leader = true;
                let batch = self.take_batch(&mut q.waiting);
                drop(q);
                {
                    let _guard = LeaderGuard(self);
                    self.commit_batch(&batch);
                }
                q = lock(&self.queue);
            }
        }
        for (i, slot) in mine {
            out[i] = lock(&slot.result).take();
        }
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(StoreError::Invalid("append lost its result".into()))))
            .collect()
    }

    fn take_batch(&self, waiting: &mut VecDeque<Arc<Slot>>) -> Vec<Arc<Slot>> {
        let mut batch = Vec::new();
        let mut bytes = 0usize;
        while let Some(next) = waiting.front() {
            if !batch.is_empty()
                && (batch.len() >= self.config.batch_messages_max
                    || bytes + next.bytes > self.config.batch_bytes_max)
            {
                break;
            }
            bytes += next.bytes;
            batch.extend(waiting.pop_front());
        }
        batch
    }

    fn commit_batch(&self, slots: &[Arc<Slot>]) {
        let preps: Vec<Option<Prepared>> = slots.iter().map(|s| lock(&s.prepared).take()).collect();
        let results = match self.writer() {
            Ok(mut w) => self.commit_appends(&mut w, preps),
            Err(e) => preps.iter().map(|_| Err(e.clone())).collect(),
        };
        for (slot, r) in slots.iter().zip(results) {
            *lock(&slot.result) = Some(r);
        }
    }

    /// Commits a batch of appends in phases (docs/storage.md, "Phases of an append batch"):
    /// plan under the writer lock, write the data and sync the volume (S1), then one journal
    /// record, the commit point. Results in batch order.
    pub(crate) fn commit_appends(
        &self,
        w: &mut Writer,
        mut preps: Vec<Option<Prepared>>,
    ) -> Vec<Result<Appended, StoreError>> {
        let mut plan = {
            let cat = self.catalog();
            AppendPlan::new(preps.len(), cat.next_folder_id, cat.last_uidvalidity)
        };
        if let Err(e) = self.plan_appends(w, &mut preps, &mut plan) {
            return self.fail_batch(w, &plan.placed, plan.results, e);
        }
        if let Err(e) = self.write_appends(&preps, &plan) {
            return self.fail_batch(w, &plan.placed, plan.results, e);
        }
        // The keys of the handed-over copies stored here, in the same record (S1 holds for
        // them as for the appends: durable together or not at all).
        let keys: Vec<crate::DeliveredKey> = plan
            .placed
            .iter()
            .filter_map(|&(i, _, _)| preps[i].as_ref().and_then(|p| p.delivered))
            .collect();
        plan.ops.extend(delivered_op(&w.journal, keys));
        drop(preps);
        // Phase 3: the commit point.
        if let Err(e) = self.commit(w, &plan.ops) {
            return self.fail_batch(w, &[], plan.results, e);
        }
        bump(&self.counters.batches, 1);
        bump(&self.counters.appended, plan.placed.len() as u64);
        debug_assert!(
            self.indexed_as_appended(&plan.ops),
            "S1: visible once durable"
        );
        plan.results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(StoreError::Invalid("append not planned".into()))))
            .collect()
    }

    /// Phase 1: each append in turn gets its folder (INBOX created on first delivery), its
    /// keywords defined, a UID, a MODSEQ and an extent, or a refusal of its own. Only a
    /// failure to allocate fails the whole batch (`Err`).
    fn plan_appends(
        &self,
        w: &mut Writer,
        preps: &mut [Option<Prepared>],
        plan: &mut AppendPlan,
    ) -> Result<(), StoreError> {
        for (i, prep) in preps.iter_mut().enumerate() {
            let Some(p) = prep.as_mut() else {
                plan.results[i] = Some(Err(StoreError::Invalid("append was already taken".into())));
                continue;
            };
            match self.plan_folder(p, plan) {
                Ok(fid) => self.plan_append(w, i, p, fid, plan)?,
                Err(e) => plan.results[i] = Some(Err(e)),
            }
        }
        // Every append has its outcome; the planned extents lie inside the volume (S2) and
        // apart, since the allocator handed each out once.
        assert!(plan.results.iter().all(Option::is_some));
        let (base, end) = (w.alloc.base(), w.alloc.end());
        assert!(
            plan.placed
                .iter()
                .all(|&(_, s, u)| s >= base && u > 0 && s + u <= end)
        );
        let mut extents: Vec<(u64, u64)> = plan.placed.iter().map(|&(_, s, u)| (s, u)).collect();
        extents.sort_unstable();
        assert!(extents.windows(2).all(|p| p[0].0 + p[0].1 <= p[1].0));
        Ok(())
    }

    /// The folder an append goes to, looked up once per batch; INBOX is created (in this
    /// batch's record) on first delivery, within `folders_per_user_max`.
    fn plan_folder(&self, p: &Prepared, plan: &mut AppendPlan) -> Result<u32, StoreError> {
        let key = (p.user.clone(), p.folder.clone());
        if let Some(&id) = plan.by_name.get(&key) {
            return Ok(id);
        }
        let cat = self.catalog();
        let found = cat.lookup(&p.user, &p.folder);
        let user_folders = cat.users.get(&p.user).map(|f| f.len());
        drop(cat);
        let id = match found {
            Some(cell) => {
                let f = cell.read();
                let planned = Planned {
                    uidvalidity: f.uidvalidity,
                    uidnext: f.uidnext,
                    modseq: f.highest_modseq,
                    keywords: f.keywords.clone(),
                    tail_end: f.tail_end(),
                };
                plan.planned.insert(f.id, planned);
                f.id
            }
            None if p.folder == "INBOX" => {
                let extra = plan.new_folders_per_user.entry(p.user.clone()).or_default();
                if user_folders.unwrap_or(0) + *extra >= self.config.folders_per_user_max {
                    return Err(StoreError::Limit {
                        what: format!("{} folders per user", self.config.folders_per_user_max),
                    });
                }
                *extra += 1;
                let id = plan.next_folder_id;
                plan.next_folder_id += 1;
                let uidvalidity = Self::next_uidvalidity(plan.last_uidvalidity);
                plan.last_uidvalidity = uidvalidity;
                plan.ops.push(Op::CreateFolder {
                    folder: id,
                    uidvalidity,
                    user: p.user.clone(),
                    name: p.folder.clone(),
                });
                let planned = Planned {
                    uidvalidity,
                    uidnext: 1,
                    modseq: 1,
                    keywords: Vec::new(),
                    tail_end: None,
                };
                plan.planned.insert(id, planned);
                id
            }
            None if user_folders.is_some() => {
                return Err(StoreError::NoSuchFolder {
                    user: p.user.clone(),
                    folder: p.folder.clone(),
                });
            }
            None => return Err(StoreError::NoSuchUser(p.user.clone())),
        };
        plan.by_name.insert(key, id);
        // Existing or new, the folder has an id below the next one the store gives.
        assert!(plan.planned.contains_key(&id) && id < plan.next_folder_id);
        Ok(id)
    }

    /// One append of the plan: new keywords defined, then a UID (an import's own if it
    /// ascends, S3), the folder's next MODSEQ (S4) and an extent; its header is laid out.
    /// A refusal is the append's own result; `Err` only if no extent could be allocated.
    fn plan_append(
        &self,
        w: &mut Writer,
        i: usize,
        p: &mut Prepared,
        fid: u32,
        plan: &mut AppendPlan,
    ) -> Result<(), StoreError> {
        let config = &self.config;
        let Some(t) = plan.planned.get_mut(&fid) else {
            let e = StoreError::Invalid("folder vanished while planning".into());
            plan.results[i] = Some(Err(e));
            return Ok(());
        };
        let new_keywords = p.keywords.iter().filter(|k| !t.keywords.contains(k));
        if t.keywords.len() + new_keywords.count() > config.keywords_per_folder_max {
            let what = format!("{} keywords per folder", config.keywords_per_folder_max);
            plan.results[i] = Some(Err(StoreError::Limit { what }));
            return Ok(());
        }
        if t.uidnext >= u32::MAX - 1 {
            let what = "UIDs of this folder are used up".into();
            plan.results[i] = Some(Err(StoreError::Limit { what }));
            return Ok(());
        }
        let kw = define_keywords(t, fid, &p.keywords, &mut plan.ops);
        let units = units_for(p.summary_len, p.content_len);
        let start = self.allocate(w, fid, t.tail_end, units)?;
        // An import's UID is kept when it ascends (S3); anything else gets the next one.
        let (uidnext_before, modseq_before) = (t.uidnext, t.modseq);
        let uid = match p.uid {
            Some(u) if u >= t.uidnext && u < u32::MAX - 1 => u,
            _ => t.uidnext,
        };
        t.uidnext = uid + 1;
        t.modseq += 1;
        t.tail_end = Some(start + units);
        let header = MsgHeader {
            folder: fid,
            uid,
            summary_len: p.summary_len,
            content_len: p.content_len,
            data_crc: p.data_crc,
        };
        p.head[..MSG_HEADER_BYTES].copy_from_slice(&header.encode());
        plan.ops.push(Op::Append(AppendOp {
            folder: fid,
            uid,
            start,
            summary_len: p.summary_len,
            content_len: p.content_len,
            data_crc: p.data_crc,
            internal_date: p.internal_date,
            flags: p.flags.bits(),
            keywords: kw,
            modseq: t.modseq,
        }));
        plan.batch_bytes += p.record_len() as u64;
        plan.placed.push((i, start, units));
        let appended = Appended {
            uid,
            uidvalidity: t.uidvalidity,
            modseq: t.modseq,
        };
        plan.results[i] = Some(Ok(appended));
        assert!(uid >= uidnext_before && t.uidnext == uid + 1, "S3");
        assert_eq!(t.modseq, modseq_before + 1, "S4");
        Ok(())
    }

    /// Phase 2: message data first (S1), in runs of adjacent extents (one `pwrite` each, at
    /// most `WRITE_RUN_BYTES_MAX`), then one `fdatasync` of the volume.
    fn write_appends(
        &self,
        preps: &[Option<Prepared>],
        plan: &AppendPlan,
    ) -> Result<(), StoreError> {
        if plan.placed.is_empty() {
            return Ok(());
        }
        let mut order: Vec<(usize, u64, u64)> = plan.placed.clone();
        order.sort_unstable_by_key(|&(_, s, _)| s);
        let mut k = 0;
        let mut written = 0;
        while k < order.len() {
            let (i0, s0, u0) = order[k];
            let mut end = s0 + u0;
            let mut j = k + 1;
            let mut run_bytes = (u0 * UNIT) as usize;
            while j < order.len()
                && order[j].1 == end
                && run_bytes + (order[j].2 * UNIT) as usize <= WRITE_RUN_BYTES_MAX
            {
                end += order[j].2;
                run_bytes += (order[j].2 * UNIT) as usize;
                j += 1;
            }
            let res = if j == k + 1 {
                match preps[i0].as_ref() {
                    Some(p) => p.write_at(&*self.volume, s0 * UNIT),
                    None => Ok(()),
                }
            } else {
                let mut buf = Vec::with_capacity(run_bytes);
                for &(i, _, _) in &order[k..j] {
                    if let Some(p) = preps[i].as_ref() {
                        p.record_into(&mut buf);
                    }
                }
                self.volume.write_all_at(&buf, s0 * UNIT)
            };
            res.map_err(|e| StoreError::io("writing volume.dat", e))?;
            written += j - k;
            k = j;
        }
        bump(&self.counters.data_bytes, plan.batch_bytes);
        self.volume
            .sync_data()
            .map_err(|e| StoreError::io("syncing volume.dat", e))?;
        bump(&self.counters.data_syncs, 1);
        assert_eq!(
            written,
            plan.placed.len(),
            "every planned message is written once"
        );
        Ok(())
    }

    /// Every `Append` of `ops` is in the index, at its extent.
    fn indexed_as_appended(&self, ops: &[Op]) -> bool {
        let cat = self.catalog();
        ops.iter().all(|op| match op {
            Op::Append(a) => cat.folders.get(&a.folder).is_some_and(|cell| {
                cell.read().messages.get(&a.uid).map(|e| e.start) == Some(a.start)
            }),
            _ => true,
        })
    }

    /// Gives back every extent planned for a batch that failed before its commit point, and
    /// fails every planned append with `e` (requests refused while planning keep their own
    /// error).
    fn fail_batch(
        &self,
        w: &mut Writer,
        placed: &[(usize, u64, u64)],
        results: Vec<Option<Result<Appended, StoreError>>>,
        e: StoreError,
    ) -> Vec<Result<Appended, StoreError>> {
        for &(_, start, units) in placed {
            w.alloc.free(start, units);
        }
        results
            .into_iter()
            .map(|r| match r {
                Some(Err(own)) => Err(own),
                _ => Err(e.clone()),
            })
            .collect()
    }

    // ---- folders ----------------------------------------------------------------------

    /// Creates `folder`, with `parents` also every missing folder above it, in one journal
    /// record: either all of them exist afterwards, or (on any refusal: a bad name, the folder
    /// limit, an existing target) none was created. `uidvalidity` is given to `folder` itself
    /// (an import keeping its source's); parents, and `folder` without it, get the store's
    /// next value.
    pub(crate) fn create_folders(
        &self,
        user: &str,
        folder: &str,
        parents: bool,
        uidvalidity: Option<u32>,
    ) -> Result<FolderStatus, StoreError> {
        validate_user(user, &self.config)?;
        let name = normalize_folder(folder, &self.config)?;
        let mut names = Vec::new();
        if parents {
            let parts: Vec<&str> = name.split('/').collect();
            for depth in 1..parts.len() {
                names.push(normalize_folder(&parts[..depth].join("/"), &self.config)?);
            }
        }
        names.push(name.clone());
        let mut w = self.writer()?;
        let ops = {
            let cat = self.catalog();
            let existing = cat.users.get(user);
            let exists = |n: &String| existing.is_some_and(|e| e.contains_key(n));
            if exists(&name) {
                return Err(StoreError::FolderExists {
                    user: user.to_string(),
                    folder: name,
                });
            }
            let missing: Vec<&String> = names.iter().filter(|n| !exists(n)).collect();
            let count = existing.map_or(0, |e| e.len());
            if count.saturating_add(missing.len()) > self.config.folders_per_user_max {
                return Err(StoreError::Limit {
                    what: format!("{} folders per user", self.config.folders_per_user_max),
                });
            }
            let mut id = cat.next_folder_id;
            let mut last = cat.last_uidvalidity;
            missing
                .into_iter()
                .map(|missing| {
                    let uidvalidity = match uidvalidity {
                        Some(given) if *missing == name => given,
                        _ => {
                            last = Self::next_uidvalidity(last);
                            last
                        }
                    };
                    let op = Op::CreateFolder {
                        folder: id,
                        uidvalidity,
                        user: user.to_string(),
                        name: missing.clone(),
                    };
                    id = id.saturating_add(1);
                    op
                })
                .collect::<Vec<_>>()
        };
        self.commit(&mut w, &ops)?;
        drop(w);
        self.status(user, &name)
    }
}

impl Store {
    /// Whether a copy with this key was stored (or settled by the user's rules) here within
    /// the bounds the keys are kept for. From memory, no I/O.
    pub fn already_delivered(&self, key: &crate::DeliveredKey) -> bool {
        self.catalog().delivered.contains(key)
    }

    /// Journals `keys` alone, in one record synced before this returns: copies that stored
    /// nothing (the user's rules discarded, rejected or sent them on) and keys brought from
    /// elsewhere (the cluster's old `cluster-delivered` file). Copies that are stored carry
    /// their keys in their own record instead ([`Store::append_batch_delivered`]). Nothing
    /// is written for no keys, or while the journal is of index format 1 (see
    /// docs/storage.md, "Index format 2").
    pub fn record_delivered(&self, keys: &[crate::DeliveredKey]) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        let mut w = self.writer()?;
        let Some(op) = delivered_op(&w.journal, keys.to_vec()) else {
            return Ok(());
        };
        self.commit(&mut w, &[op])?;
        Ok(())
    }
}

/// The `Delivered` operation for `keys`, recorded now; `None` when there are none or the
/// journal cannot hold one (index format 1).
pub(crate) fn delivered_op(
    journal: &crate::journal::Journal,
    keys: Vec<crate::DeliveredKey>,
) -> Option<Op> {
    if keys.is_empty() || journal.version < crate::format::INDEX_FORMAT_VERSION {
        return None;
    }
    Some(Op::Delivered {
        at: crate::delivered::unix_now(),
        keys,
    })
}
