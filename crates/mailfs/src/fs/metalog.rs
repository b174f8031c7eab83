//! The metadata log (docs/mailfs.md 12a): a directory change is a small record in a batch,
//! and a batch is one appended message (a log page), instead of a whole directory message
//! per change. Directory messages become checkpoints, written by compaction.
//!
//! Order and atomicity: changes enter the batch under the tree lock, in the order the tree
//! saw them; pages go out one at a time in sequence order; a page is one message, so an
//! account holds all of it or none. After a crash the servers hold a prefix of the pages,
//! so the tree is the tree as it was at some instant, which is what every crash rule of
//! layout 1 (sections 5 and 7) already assumes: each of them holds for every prefix of the
//! sequence of directory versions, and a page only skips versions nobody could observe.
//!
//! Lock order: tree, then `writing`, then `state`; never the other way.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::*;
use crate::meta::{DirDelta, LogPage};

/// A batch past this many bytes is written before the next change enters it: the memory a
/// mount holds for unwritten metadata stays bounded, and a server that is down for long
/// shows up as errors instead of growth.
pub(crate) const LOG_BATCH_BYTES_MAX: usize = 4 << 20;

/// Directory messages a checkpoint holds in memory and sends at once (whole directories:
/// a directory's pages never straddle two sends).
pub(crate) const CHECKPOINT_BATCH_BYTES_MAX: usize = 32 << 20;

/// One directory's changes not yet in a page: from `base` to `version`, the latest value
/// of every name touched (`None`: removed).
#[derive(Debug, Clone)]
pub(super) struct Pending {
    base: u64,
    version: u64,
    parent: u64,
    attr: Attr,
    changes: BTreeMap<Vec<u8>, Option<Entry>>,
}

impl Pending {
    /// The change from `old` (what the tree holds now, if loaded) to `new` at `version`.
    pub(super) fn between(old: Option<&DirState>, new: &DirState, version: u64) -> Pending {
        let mut changes = BTreeMap::new();
        let base = match old {
            Some(o) => {
                for (name, e) in &new.entries {
                    if o.entries.get(name) != Some(e) {
                        changes.insert(name.clone(), Some(e.clone()));
                    }
                }
                for name in o.entries.keys() {
                    if !new.entries.contains_key(name) {
                        changes.insert(name.clone(), None);
                    }
                }
                o.version
            }
            None => {
                for (name, e) in &new.entries {
                    changes.insert(name.clone(), Some(e.clone()));
                }
                new.version
            }
        };
        Pending {
            base,
            version,
            parent: new.parent,
            attr: new.attr,
            changes,
        }
    }

    /// The change `edit_dir` made: the named entries as they are now in `d` (absent:
    /// removed), from `base`.
    pub(super) fn of_names(base: u64, d: &DirState, names: &[&[u8]]) -> Pending {
        Pending {
            base,
            version: base + 1,
            parent: d.parent,
            attr: d.attr,
            changes: names
                .iter()
                .map(|n| (n.to_vec(), d.entries.get(*n).cloned()))
                .collect(),
        }
    }

    /// Folds `later`, which starts where this one ends, into this one: within a page only
    /// the end state of each name matters (nobody can observe the states in between).
    fn then(&mut self, later: Pending) {
        debug_assert_eq!(later.base, self.version, "changes fold in order");
        self.version = later.version;
        self.parent = later.parent;
        self.attr = later.attr;
        self.changes.extend(later.changes);
    }

    fn bytes(&self) -> usize {
        64 + self
            .changes
            .iter()
            .map(|(n, e)| n.len() + 16 + e.as_ref().map_or(0, entry_bytes))
            .sum::<usize>()
    }

    fn delta(&self, id: u64) -> DirDelta {
        let mut put = Vec::new();
        let mut removed = Vec::new();
        for (name, e) in &self.changes {
            match e {
                Some(e) => put.push(e.clone()),
                None => removed.push(serde_bytes::ByteBuf::from(name.clone())),
            }
        }
        DirDelta {
            id,
            base: self.base,
            version: self.version,
            parent: self.parent,
            attr: self.attr,
            put,
            removed,
        }
    }
}

/// Applies `deltas` (in page order) to a directory's checkpoint, as far as they follow
/// one another; a gap (a page lost everywhere) ends the replay there, so the directory is
/// a state it really had.
pub(super) fn replay(
    id: u64,
    mut cur: Option<DirState>,
    deltas: &[DirDelta],
) -> Result<DirState, FsError> {
    for d in deltas {
        let at = cur.as_ref().map_or(0, |c| c.version);
        if d.version <= at {
            continue;
        }
        if d.base != at {
            tracing::warn!(
                "directory {id:x}: the log goes from v{} on, the directory is at v{at}; replay stops",
                d.base
            );
            break;
        }
        let c = cur.get_or_insert_with(|| DirState {
            version: 0,
            id,
            parent: d.parent,
            attr: d.attr,
            entries: BTreeMap::new(),
            inline_bytes: 0,
            subdirs: 0,
        });
        c.version = d.version;
        c.parent = d.parent;
        c.attr = d.attr;
        for name in &d.removed {
            c.entries.remove(name.as_slice());
        }
        for e in &d.put {
            c.entries.insert(e.name.clone(), e.clone());
        }
    }
    if let Some(c) = &mut cur {
        c.recount();
    }
    cur.ok_or_else(|| FsError::Corrupt(format!("directory {id:x} not found")))
}

pub(crate) struct MetaLog {
    /// How long a change may wait in the batch (config `metadata_batch_ms`); 0: every
    /// change is a page of its own, written before the operation returns.
    pub(super) batch_ms: u64,
    /// Log pages after the last checkpoint that make the next one due (`log_pages_max`).
    pages_max: u64,
    state: Mutex<LogState>,
    /// Wakes the flusher: a batch started, a sync waits, the mount stops.
    wake: std::sync::Condvar,
    /// One page (or checkpoint) on its way at a time, so they go out in sequence order.
    writing: Mutex<()>,
}

#[derive(Default)]
struct LogState {
    batch: BTreeMap<u64, Pending>,
    batch_bytes: usize,
    /// When the oldest change in the batch entered it.
    since: Option<Instant>,
    /// The next page's sequence number.
    next_seq: u64,
    /// The checkpoint the superblock names: pages up to here are in directory messages.
    log_from: u64,
    /// The checkpoint before it, written by this mount (0: none yet): no superblock gc
    /// keeps (the two newest) needs a page up to here replayed (reclaim, docs/mailfs.md 8).
    prev_log_from: u64,
    /// Pages written (or replayed at open) after the checkpoint.
    pages_since_checkpoint: u64,
    /// Directories changed by those pages: the next checkpoint writes them.
    unchecked: HashSet<u64>,
    /// Changes read at open from the pages after the checkpoint, applied when a directory
    /// is loaded.
    replay: HashMap<u64, Vec<DirDelta>>,
    /// The last failed page write, until one succeeds.
    error: Option<String>,
    /// Groups open (`begin_group`): their records stay together in the batch.
    group: u32,
    /// Batches taken to be written as a page (a failed one puts its records back, and a
    /// later take carries them): a record made when `takes` was `n` is on the servers once
    /// a take after `n` succeeded (reclaim, docs/mailfs.md 8).
    takes: u64,
    /// The last take written.
    written_take: u64,
    /// `takes` when the last record was made (records are made under the tree lock, so
    /// the caller of `edit_dir` reads its own).
    last_record_take: u64,
}

impl MetaLog {
    pub(super) fn new(batch_ms: u64, pages_max: u64) -> MetaLog {
        MetaLog {
            batch_ms,
            pages_max: pages_max.max(1),
            state: Mutex::new(LogState {
                next_seq: 1,
                ..LogState::default()
            }),
            wake: std::sync::Condvar::new(),
            writing: Mutex::new(()),
        }
    }

    /// The pages after the superblock's checkpoint, read at open: their changes wait in
    /// `replay` for their directories to load. Stops at the first page that no account has
    /// or that fails to open (M1), so the tree is a prefix of what was written. A page
    /// that some live accounts lack (a crash in the middle of `Fs::put`) is put back on
    /// them, as fsck would: the tree now depends on it, and the accounts that hold it may
    /// be the next to fail.
    pub(super) fn load(&self, fs: &Fs, log_from: u64) {
        // Every account's list, even one down now: a page's name is never used twice.
        let seqs = fs.log_page_seqs(false);
        let mut incomplete = Vec::new();
        let mut st = self.state.lock_or_panic();
        st.log_from = log_from;
        // Never reuse a page's name, not even one past a gap.
        st.next_seq = seqs.last().map_or(1, |s| s + 1).max(log_from + 1);
        let after = seqs.into_iter().filter(|&s| s > log_from);
        for (expect, seq) in (log_from + 1..).zip(after) {
            if seq != expect {
                tracing::warn!("log page {expect} is missing everywhere; replay stops before it");
                break;
            }
            let (page, payload) = match fs.log_page_payload(seq) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!("log page {seq}: {e}; replay stops before it");
                    break;
                }
            };
            for d in page.dirs {
                st.unchecked.insert(d.id);
                st.replay.entry(d.id).or_default().push(d);
            }
            st.pages_since_checkpoint += 1;
            incomplete.push((seq, payload));
        }
        drop(st);
        for (seq, payload) in incomplete {
            fs.complete_log_page(seq, &payload);
        }
    }

    /// The changes replayed at open for directory `id`, in page order.
    pub(super) fn replay_for(&self, id: u64) -> Vec<DirDelta> {
        self.state
            .lock_or_panic()
            .replay
            .get(&id)
            .cloned()
            .unwrap_or_default()
    }

    /// The highest version the log gives directory `id` (0: none).
    pub(super) fn version_in_log(&self, id: u64) -> u64 {
        let st = self.state.lock_or_panic();
        let replayed = st
            .replay
            .get(&id)
            .and_then(|d| d.last())
            .map_or(0, |d| d.version);
        replayed.max(st.batch.get(&id).map_or(0, |p| p.version))
    }

    pub(crate) fn log_from(&self) -> u64 {
        self.state.lock_or_panic().log_from
    }

    /// The log_from of the checkpoint before the last one this mount wrote (see
    /// `LogState::prev_log_from`).
    pub(super) fn prev_log_from(&self) -> u64 {
        self.state.lock_or_panic().prev_log_from
    }

    /// The ticket of the last record made: read under the tree lock right after a change,
    /// it is that change's (see `LogState::takes`).
    pub(super) fn last_record_ticket(&self) -> u64 {
        self.state.lock_or_panic().last_record_take
    }

    /// Whether the record with `ticket` is in a page written (in asynchronous mode: in the
    /// journal).
    pub(super) fn written_through(&self, ticket: u64) -> bool {
        self.state.lock_or_panic().written_take > ticket
    }

    /// Records a change (called by `write_dir` and `edit_dir`, under the tree lock). With
    /// no batching it is written as a page of its own before this returns; otherwise it
    /// joins the batch, which is written first if it is full (and then a failure refuses
    /// this change). Inside a group (`begin_group`) it joins the batch whatever the mode,
    /// and nothing is written until the group ends.
    pub(super) fn record(&self, fs: &Fs, id: u64, change: Pending) -> Result<(), FsError> {
        let grouped = self.state.lock_or_panic().group > 0;
        if !grouped {
            let (leftover, full) = {
                let st = self.state.lock_or_panic();
                (!st.batch.is_empty(), st.batch_bytes > LOG_BATCH_BYTES_MAX)
            };
            if self.batch_ms == 0 {
                debug_assert!(!leftover, "a failed group takes its changes back");
                if leftover {
                    self.flush(fs)?;
                }
                let _w = self.writing.lock_or_panic();
                let (seq, take) = {
                    let mut st = self.state.lock_or_panic();
                    st.last_record_take = st.takes;
                    st.takes += 1;
                    (st.next_seq, st.takes)
                };
                let mut batch = BTreeMap::new();
                batch.insert(id, change);
                fs.write_page(seq, &batch)?;
                let mut st = self.state.lock_or_panic();
                st.written_take = st.written_take.max(take);
                st.next_seq = seq + 1;
                st.pages_since_checkpoint += 1;
                st.unchecked.insert(id);
                return Ok(());
            }
            if full {
                self.flush(fs)?;
            }
        }
        let mut st = self.state.lock_or_panic();
        st.last_record_take = st.takes;
        st.batch_bytes += change.bytes();
        match st.batch.get_mut(&id) {
            Some(p) => p.then(change),
            None => {
                st.batch.insert(id, change);
            }
        }
        if st.since.is_none() {
            st.since = Some(Instant::now());
            self.wake.notify_all();
        }
        Ok(())
    }

    /// Starts a change of several directories that must reach the servers together (a
    /// hard link names the inode and the name; a rename over a hard link drops a count):
    /// its records all go into one page, which is atomic. Called under the tree lock, and
    /// `end_group` under the same lock: `flush` waits for the group's end before it takes
    /// the batch, and a full batch waits for it too (a group is a few records).
    pub(super) fn begin_group(&self) {
        self.state.lock_or_panic().group += 1;
    }

    /// Ends a group. Without batching, its records are written now, as one page; if that
    /// fails they are put back in the batch and the error is returned (`Fs::grouped` then
    /// takes the changes back and empties the batch).
    pub(super) fn end_group(&self, fs: &Fs) -> Result<(), FsError> {
        let outermost = {
            let mut st = self.state.lock_or_panic();
            st.group -= 1;
            st.group == 0
        };
        if outermost {
            self.wake.notify_all();
        }
        if outermost && self.batch_ms == 0 {
            return self.flush(fs);
        }
        Ok(())
    }

    /// Ends a group whose operation failed, writing nothing (`Fs::grouped` takes its
    /// changes back without batching; with batching they stay in the batch).
    pub(super) fn end_group_discarding(&self) {
        let mut st = self.state.lock_or_panic();
        st.group -= 1;
        if st.group == 0 {
            self.wake.notify_all();
        }
    }

    /// Forgets the batch: only for a failed group without batching, whose changes are
    /// all of it and are being taken back.
    pub(super) fn discard_batch(&self) {
        debug_assert_eq!(
            self.batch_ms, 0,
            "with batching the batch holds others' changes"
        );
        let mut st = self.state.lock_or_panic();
        st.batch.clear();
        st.batch_bytes = 0;
        st.since = None;
    }

    /// Writes the batch as the next page, if there is one (fsync, the flusher, unmount,
    /// a full batch). A failure puts the batch back (ahead of what came since) for the
    /// next try, and is returned. A group of changes is never cut: a group is open only
    /// while its thread holds the tree lock and needs no page until it ends, so waiting
    /// for it here (holding `writing`) cannot deadlock, and the tree stays free while a
    /// page is written.
    pub(super) fn flush(&self, fs: &Fs) -> Result<(), FsError> {
        let _w = self.writing.lock_or_panic();
        let (batch, seq, take) = {
            let mut st = self.state.lock_or_panic();
            while st.group > 0 {
                st = self.wake.wait_or_panic(st);
            }
            if st.batch.is_empty() {
                return Ok(());
            }
            st.batch_bytes = 0;
            st.since = None;
            st.takes += 1;
            (std::mem::take(&mut st.batch), st.next_seq, st.takes)
        };
        let written = fs.write_page(seq, &batch);
        let mut st = self.state.lock_or_panic();
        match written {
            Ok(()) => {
                st.written_take = st.written_take.max(take);
                st.next_seq = seq + 1;
                st.pages_since_checkpoint += 1;
                st.unchecked.extend(batch.keys().copied());
                st.error = None;
                Ok(())
            }
            Err(e) => {
                put_back(&mut st, batch);
                st.error = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// Whether a checkpoint is due (`log_pages_max` pages since the last one).
    pub(super) fn checkpoint_due(&self) -> bool {
        self.state.lock_or_panic().pages_since_checkpoint >= self.pages_max
    }

    pub(crate) fn has_uncheckpointed(&self) -> bool {
        let st = self.state.lock_or_panic();
        st.pages_since_checkpoint > 0 || !st.batch.is_empty()
    }

    /// Waits (at most `max`) until the batch is due: old enough, or `stop` is set.
    /// Returns whether there is something to write.
    pub(super) fn wait_due(&self, stop: &AtomicBool, max: Duration) -> bool {
        let deadline = Instant::now() + max;
        let mut st = self.state.lock_or_panic();
        loop {
            let now = Instant::now();
            let due = st.since.map(|t| t + Duration::from_millis(self.batch_ms));
            match due {
                Some(due) if due <= now || stop.load(Ordering::SeqCst) => return true,
                _ if now >= deadline || stop.load(Ordering::SeqCst) => return false,
                Some(due) => {
                    st = self
                        .wake
                        .wait_timeout_or_panic(st, due.min(deadline) - now)
                        .0;
                }
                None => st = self.wake.wait_timeout_or_panic(st, deadline - now).0,
            }
        }
    }

    pub(super) fn wake(&self) {
        self.wake.notify_all();
    }

    /// Compaction (docs/mailfs.md 12a): every directory the pages since the last
    /// checkpoint changed is written whole, as of the end of the last page, then the
    /// superblock names that page. A crash in between leaves the old checkpoint named, and
    /// the pages after it still replay (the new directory messages are then just newer
    /// copies of versions the pages also reach).
    pub(super) fn checkpoint(&self, fs: &Fs) -> Result<usize, FsError> {
        let mut tree = fs.lock();
        // Directories only the replay knows are loaded first (loading may repair, which
        // records a change: before `writing` is taken, as the lock order requires).
        let waiting: Vec<u64> = self.state.lock_or_panic().replay.keys().copied().collect();
        for id in waiting {
            if let Err(e) = fs.ensure_dir(&mut tree, id) {
                tracing::debug!("directory {id:x} in the log but not loadable: {e}");
            }
        }
        let _w = self.writing.lock_or_panic();
        let (batch, seq, dirs, take) = {
            let mut st = self.state.lock_or_panic();
            st.batch_bytes = 0;
            st.since = None;
            st.takes += 1;
            let batch = std::mem::take(&mut st.batch);
            let mut dirs = std::mem::take(&mut st.unchecked);
            dirs.extend(batch.keys().copied());
            (batch, st.next_seq, dirs, st.takes)
        };
        // The states as of the end of `batch`: taken under the tree lock, with the batch.
        let states: Vec<DirState> = dirs
            .iter()
            .filter_map(|id| tree.dirs.get(id).cloned())
            .collect();
        drop(tree);
        let restore = |batch: BTreeMap<u64, Pending>, e: &FsError| {
            let mut st = self.state.lock_or_panic();
            put_back(&mut st, batch);
            st.unchecked.extend(dirs.iter().copied());
            st.error = Some(e.to_string());
        };
        let last = if batch.is_empty() {
            seq - 1
        } else {
            if let Err(e) = fs.write_page(seq, &batch) {
                restore(batch, &e);
                return Err(e);
            }
            let mut st = self.state.lock_or_panic();
            st.next_seq = seq + 1;
            st.written_take = st.written_take.max(take);
            seq
        };
        let written = (|| {
            if fs.asynchronous {
                // The pages the checkpoint covers must be on the servers before the
                // superblock says they need not be replayed.
                fs.drain_journal()?;
            }
            fs.write_checkpoints(&states)?;
            let (_, mut sb) = fs.superblock();
            sb.log_from = last;
            sb.inodes |= states.iter().any(|d| d.id == INODES);
            fs.write_superblock(sb)
        })();
        if let Err(e) = written {
            restore(BTreeMap::new(), &e);
            return Err(e);
        }
        let mut st = self.state.lock_or_panic();
        if last != st.log_from {
            st.prev_log_from = st.log_from;
        }
        st.log_from = last;
        st.pages_since_checkpoint = 0;
        st.replay.clear();
        st.error = None;
        fs.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            directories = states.len(),
            log_from = last,
            "metadata checkpoint written"
        );
        Ok(states.len())
    }
}

/// A failed batch goes back in front of the changes made since.
fn put_back(st: &mut LogState, batch: BTreeMap<u64, Pending>) {
    for (id, mut p) in batch {
        st.batch_bytes += p.bytes();
        if let Some(later) = st.batch.remove(&id) {
            p.then(later);
        }
        st.batch.insert(id, p);
    }
    st.since.get_or_insert_with(Instant::now);
}

pub(crate) fn page_id(seq: u64) -> NameId {
    NameId {
        kind: MsgKind::LogPage,
        object: 0,
        index: seq,
        version: 0,
    }
}

impl Fs {
    /// Writes one log page: to the journal in asynchronous mode, else to every account.
    fn write_page(&self, seq: u64, batch: &BTreeMap<u64, Pending>) -> Result<(), FsError> {
        self.writable()?;
        let page = LogPage {
            format: META_FORMAT,
            seq,
            written_at: now_secs(),
            dirs: batch.iter().map(|(id, p)| p.delta(*id)).collect(),
        };
        let payload = meta::encode(&page);
        if payload.len() > mailfs_format::PAYLOAD_BYTES_MAX {
            return Err(FsError::NoSpace("log page too large".into()));
        }
        let name = self.message_name(MsgKind::LogPage, 0, seq, 0);
        if self.asynchronous {
            self.journal.append(&crate::journal::Record::Dir {
                name: name.render(),
                payload,
            })?;
        } else {
            self.put(&self.all_accounts(), name, &payload, &self.sealing)?;
        }
        self.stats.log_pages.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes a directory whole, at its current version (fsck's recreated directory).
    pub(super) fn write_checkpoint(&self, d: &DirState) -> Result<(), FsError> {
        self.write_checkpoints(std::slice::from_ref(d))
    }

    /// Writes directories whole, at their current versions (a checkpoint): one message
    /// per page, page 0 of each last, so a reader that finds page 0 finds the others too.
    /// They go out together (`Fs::put_many`, in order on every account), up to
    /// [`CHECKPOINT_BATCH_BYTES_MAX`] at a time: unmount's checkpoint after a tar of a
    /// thousand directories was a thousand APPENDs, one round trip each.
    pub(super) fn write_checkpoints(&self, dirs: &[DirState]) -> Result<(), FsError> {
        self.writable()?;
        let mut msgs: Vec<(MessageName, Vec<u8>)> = Vec::new();
        let mut bytes = 0;
        let send = |msgs: &mut Vec<(MessageName, Vec<u8>)>| {
            let borrowed: Vec<(MessageName, &[u8])> =
                msgs.iter().map(|(n, p)| (*n, p.as_slice())).collect();
            self.put_many(&self.all_accounts(), &borrowed, &self.sealing)?;
            self.stats
                .dir_writes
                .fetch_add(msgs.len() as u64, Ordering::Relaxed);
            msgs.clear();
            Ok::<(), FsError>(())
        };
        for d in dirs {
            let pages = d.to_pages();
            for (i, page) in pages.iter().enumerate().rev() {
                let name = self.message_name(MsgKind::Directory, d.id, i as u64, d.version);
                let payload = meta::encode(page);
                if payload.len() > mailfs_format::PAYLOAD_BYTES_MAX {
                    return Err(FsError::NoSpace("directory page too large".into()));
                }
                bytes += payload.len();
                msgs.push((name, payload));
            }
            if bytes >= CHECKPOINT_BATCH_BYTES_MAX {
                send(&mut msgs)?;
                bytes = 0;
            }
        }
        send(&mut msgs)
    }

    /// Makes every change so far durable (fsync, fsyncdir, unmount, the end of a CLI
    /// command): the batch goes out as a page now.
    pub fn sync_metadata(&self) -> Result<(), FsError> {
        self.tree.metalog.flush(self)
    }

    /// Writes a checkpoint now, if any page came since the last one (unmount, snapshot,
    /// gc, fsck): afterwards every current directory version is a directory message.
    pub fn checkpoint(&self) -> Result<usize, FsError> {
        if !self.tree.metalog.has_uncheckpointed() {
            return Ok(0);
        }
        self.tree.metalog.checkpoint(self)
    }

    pub(crate) fn log_from(&self) -> u64 {
        self.tree.metalog.log_from()
    }

    pub(crate) fn log_page(&self, seq: u64) -> Result<LogPage, FsError> {
        self.log_page_payload(seq).map(|(page, _)| page)
    }

    /// A log page and the payload it was decoded from.
    fn log_page_payload(&self, seq: u64) -> Result<(LogPage, Vec<u8>), FsError> {
        let payload = self.get(&self.all_accounts(), page_id(seq), &self.sealing)?;
        let page = meta::decode_log_page(&payload)?;
        if page.seq != seq {
            return Err(FsError::Integrity(format!(
                "log page {seq} says {}",
                page.seq
            )));
        }
        Ok((page, payload))
    }

    /// Puts log page `seq` back on the live accounts that do not list it (mount-time
    /// repair, docs/mailfs.md 8). An account that fails is marked down and catches up
    /// later as any other; one that is down now is left to fsck.
    fn complete_log_page(&self, seq: u64, payload: &[u8]) {
        let id = page_id(seq);
        for a in &self.replicas.accounts {
            if !a.is_up() || a.has(&id) {
                continue;
            }
            let name = self.message_name(MsgKind::LogPage, 0, seq, 0);
            let put = seal_with(&self.sealing, &name, a.raid, payload)
                .and_then(|env| a.append_now(&[(name, env)]).map_err(FsError::from));
            match put {
                Ok(()) => {
                    self.stats.repairs.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(account = %a.remote.describe(), "put back log page {seq}");
                }
                Err(e) => {
                    tracing::warn!(account = %a.remote.describe(), "log page {seq} not put back: {e}")
                }
            }
        }
    }

    /// Every log page the accounts still hold (history: versions, restore, gc, rebuild),
    /// in sequence order; unreadable ones are skipped.
    pub(crate) fn log_pages(&self) -> Vec<LogPage> {
        self.log_page_seqs(true)
            .into_iter()
            .filter_map(|seq| self.log_page(seq).ok())
            .collect()
    }

    /// The sequence numbers of the log pages the accounts list (only those up, or all),
    /// sorted, once each.
    pub(crate) fn log_page_seqs(&self, up_only: bool) -> Vec<u64> {
        let mut seqs: Vec<u64> = self
            .replicas
            .accounts
            .iter()
            .filter(|a| !up_only || a.is_up())
            .flat_map(|a| a.ids_matching(|k| k.kind == MsgKind::LogPage))
            .map(|(k, _)| k.index)
            .collect();
        seqs.sort_unstable();
        seqs.dedup();
        seqs
    }

    /// The flusher: writes the batch when it is `metadata_batch_ms` old, and a checkpoint
    /// when `log_pages_max` pages came since the last one.
    pub(super) fn spawn_flusher(self: &Arc<Self>) -> Option<std::thread::JoinHandle<()>> {
        if self.tree.metalog.batch_ms == 0 {
            return None;
        }
        let fs = self.clone();
        Some(std::thread::spawn(move || {
            loop {
                let stopping = fs.stop.load(Ordering::SeqCst);
                if fs
                    .tree
                    .metalog
                    .wait_due(&fs.stop, Duration::from_millis(500))
                    && let Err(e) = fs.tree.metalog.flush(&fs)
                {
                    tracing::warn!("metadata log page not written yet: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                }
                if fs.tree.metalog.checkpoint_due()
                    && let Err(e) = fs.tree.metalog.checkpoint(&fs)
                {
                    tracing::warn!("metadata checkpoint not written yet: {e}");
                }
                if stopping {
                    break;
                }
            }
        }))
    }
}
