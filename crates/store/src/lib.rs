//! The mailbox store, after the POP3 defrag-on-delete thesis (docs/storage.md, Part 2).
//!
//! All message data lives in one preallocated file, `volume.dat`, divided into 512-byte
//! units that the store's own extent allocator hands out, so a folder's fragments are exact.
//! The index (users → folders → messages) lives in memory; on disk it is a checkpoint
//! (`index.snap`) plus a journal of chained records (`index-<generation>.log`).
//!
//! - Appends are group-committed: whoever holds the writer commits every append waiting,
//!   with one volume sync and one journal sync per batch; a message is visible only after its
//!   batch is durable.
//! - Expunge writes one small journal record and frees the extents; no message byte moves,
//!   unless the thesis's two-fragments rule fires (`StoreConfig::defrag_on_delete`).
//! - Opening a folder copies in-memory entries; no message byte is read.
//! - Readers never block on I/O of the writer and check every message they read against its
//!   header and CRC, so a message freed under them reads as expunged, never as garbage.
//!
//! Every I/O goes through [`disk::Disk`], so tests run the store on [`disk::SimDisk`].
//!
//! Invariants S1–S7 of docs/storage.md are asserted where they are established: S1 in
//! `commit.rs` (data synced before the journal record), S2/S5 in `alloc.rs` and `fsck.rs`,
//! S3/S4 in `index.rs` (`apply` refuses a non-ascending UID or MODSEQ), S6 in `commit.rs`
//! (extents are freed only after the record that stops naming them is durable), S7 in
//! `read.rs` (`open_folder` and `status` touch only the index).

mod alloc;
mod cache;
mod commit;
mod config;
mod defrag;
mod error;
mod flags;
mod format;
mod fsck;
mod import;
mod index;
mod journal;
mod names;
mod open;
mod read;
mod recent;
mod snapshot;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use config::{KEYWORDS_PER_FOLDER_LIMIT, StoreConfig};
pub use format::parse_summary;
pub use fsck::FsckReport;
pub use import::ImportBatch;
pub use mail_model::{
    AppendRequest, Appended, FlagOp, Flags, FolderChanges, FolderStatus, FolderView, MessageInfo,
    NewMessage, OverQuota, Quota, StoreError, Summary, Usage,
};

use commit::Inner;

/// Called with a user's name after every committed change to one of their folders.
pub type Observer = Arc<dyn Fn(&str) + Send + Sync>;

/// An append on its way (see [`Store::incoming`]).
pub struct Incoming {
    inner: Arc<Inner>,
}

impl Drop for Incoming {
    fn drop(&mut self) {
        self.inner
            .incoming
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        // Taking the lock orders this with the leader's check-then-wait, so the wake-up is
        // never lost between the two.
        drop(commit::lock(&self.inner.queue));
        self.inner.queue_cv.notify_all();
    }
}

/// What `read_folder` calls with each message: its UID and content.
pub type MessageSink<'a> = dyn FnMut(u32, &[u8]) -> Result<(), StoreError> + 'a;

/// The mailbox store. Cheap to clone (an `Arc` inside); `Send + Sync`.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
    summaries: Arc<cache::SummaryCache>,
    views: Arc<cache::ViewCache>,
}

/// A message to import ([`Store::prepare_import`]): a [`NewMessage`] with the UID its source
/// gave it, if it had one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportedMessage {
    /// Kept if it ascends past the folder's UIDNEXT when its batch commits; otherwise (or if
    /// `None`) the message gets the folder's next UID.
    pub uid: Option<u32>,
    pub flags: Flags,
    pub keywords: Vec<String>,
    /// Unix seconds.
    pub internal_date: i64,
    pub content: Vec<u8>,
}

/// The folder an import writes to ([`Store::import_folder`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportTarget {
    pub status: FolderStatus,
    /// The import created the folder (and any missing parent).
    pub created: bool,
    /// The folder's UIDVALIDITY is the one the source gave: its UIDs mean the same here.
    pub uidvalidity_kept: bool,
}

/// What one imported message got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportOutcome {
    pub uid: u32,
    /// The message asked for a UID and got it.
    pub uid_kept: bool,
    pub modseq: u64,
    /// Keywords left off the message, with the reason: not an IMAP atom, or past the folder's
    /// keyword limit ([`KEYWORDS_PER_FOLDER_LIMIT`]).
    pub dropped_keywords: Vec<(String, String)>,
}

/// What [`Store::import`] did to one folder.
#[derive(Debug, Clone)]
pub struct ImportReport {
    pub target: ImportTarget,
    /// One per message, in the order given.
    pub outcomes: Vec<Result<ImportOutcome, StoreError>>,
    /// The folder after the import (UIDNEXT raised).
    pub status: FolderStatus,
}

/// A page of a folder's messages (see [`Store::page`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub status: FolderStatus,
    /// Messages without `\Seen` in the whole folder.
    pub unseen: u64,
    /// Newest (highest UID) first.
    pub messages: Vec<MessageInfo>,
}

/// What `Store::open` found.
#[derive(Debug, Clone, Default)]
pub struct OpenReport {
    pub folders: u64,
    pub messages: u64,
    pub snapshot_gen: u64,
    /// Messages loaded from the snapshot.
    pub snapshot_messages: u64,
    pub journal_gen: u64,
    pub journal_records_replayed: u64,
    /// An interrupted (never acknowledged) record cut off the end of the journal.
    pub torn_tail: Option<String>,
    /// Anything else noticed: leftover files removed, damage skipped in salvage mode,
    /// extents outside the volume.
    pub problems: Vec<String>,
    pub created: bool,
    pub elapsed: Duration,
}

/// What `Store::delete_user` removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeletedUser {
    pub folders: u64,
    pub messages: u64,
    pub bytes: u64,
}

/// What one expunge did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpungeReport {
    pub expunged: u64,
    /// Volume bytes (whole units) returned to free space.
    pub bytes_freed: u64,
    /// Messages relocated by the defrag-on-delete rule.
    pub moves: u64,
    pub bytes_moved: u64,
    /// The folder's MODSEQ after the expunge.
    pub modseq: u64,
    /// The expunge is durable, but a defrag move after it failed (the store may have
    /// stopped; see `StoreError::Failed`).
    pub defrag_error: Option<String>,
}

/// What a whole-store defrag did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DefragReport {
    pub folders: u64,
    /// Rounds of copy-sync-switch-release.
    pub rounds: u64,
    pub messages_moved: u64,
    pub bytes_moved: u64,
    pub fragments_before: u64,
    pub fragments_after: u64,
}

/// One folder in [`StoreStats`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderStats {
    pub user: String,
    pub folder: String,
    pub messages: u64,
    pub bytes: u64,
    pub fragments: u64,
}

/// The cumulative I/O counters alone: read without taking any lock or walking any folder, so
/// a server can poll them often (see [`Store::io_counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounters {
    pub data_syncs: u64,
    pub journal_syncs: u64,
    pub data_bytes_written: u64,
    pub journal_bytes_written: u64,
    pub batches: u64,
    pub messages_appended: u64,
    pub checkpoints: u64,
    pub defrag_messages_moved: u64,
    pub defrag_bytes_moved: u64,
}

/// Space and I/O counters. The byte counters are cumulative since open, so a benchmark can
/// diff them around one operation (e.g. bytes written per deletion).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub folders: Vec<FolderStats>,
    pub volume_bytes: u64,
    pub used_bytes: u64,
    pub free_bytes: u64,
    pub free_extents: u64,
    pub reserved_bytes: u64,
    pub data_syncs: u64,
    pub journal_syncs: u64,
    pub data_bytes_written: u64,
    pub journal_bytes_written: u64,
    pub batches: u64,
    pub messages_appended: u64,
    pub checkpoints: u64,
    pub defrag_messages_moved: u64,
    pub defrag_bytes_moved: u64,
    pub journal_gen: u64,
    pub journal_bytes: u64,
}

impl Store {
    /// Opens (or creates) the store in `dir`: reads the snapshot, replays the journal, cuts
    /// a torn tail, derives free space.
    pub fn open(
        disk: Arc<dyn disk::Disk>,
        dir: &Path,
        config: StoreConfig,
    ) -> Result<(Store, OpenReport), StoreError> {
        let summaries = Arc::new(cache::SummaryCache::new(config.summary_cache_bytes_max));
        let views = Arc::new(cache::ViewCache::new(config.view_cache_bytes_max));
        let (inner, report) = open::open(disk, dir, config)?;
        Ok((
            Store {
                inner: Arc::new(inner),
                summaries,
                views,
            },
            report,
        ))
    }

    pub fn config(&self) -> &StoreConfig {
        &self.inner.config
    }

    /// Creates a folder (and the user, if new).
    pub fn create_folder(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError> {
        self.inner.create_folder(user, folder)
    }

    /// Creates a folder and every missing folder above it, atomically: a refusal (bad name,
    /// `folders_per_user_max`, the folder exists) creates nothing.
    pub fn create_folder_path(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError> {
        self.inner.create_folder_path(user, folder)
    }

    /// Deletes every folder of a user, INBOX included, in one durable journal record, and
    /// returns their space. What was removed is reported.
    pub fn delete_user(&self, user: &str) -> Result<DeletedUser, StoreError> {
        self.inner.delete_user(user)
    }

    /// Gives every folder of `from` to `to`, in one durable journal record: UIDs,
    /// UIDVALIDITY, flags and data stay as they are. Refused when `to` has folders; a user
    /// with none (renamed already, or never given mail) renames as a no-op. Returns what
    /// moved.
    pub fn rename_user(&self, from: &str, to: &str) -> Result<Usage, StoreError> {
        self.inner.rename_user(from, to)
    }

    /// What a user holds: folders, messages and their bytes, from the index (no I/O).
    pub fn usage(&self, user: &str) -> Usage {
        self.inner.usage(user)
    }

    /// Renames a folder and the folders below it. INBOX cannot be renamed.
    pub fn rename_folder(&self, user: &str, from: &str, to: &str) -> Result<(), StoreError> {
        self.inner.rename_folder(user, from, to)
    }

    /// Deletes a folder and frees its messages' space (one journal record). INBOX cannot be
    /// deleted; folders below it are kept.
    pub fn delete_folder(&self, user: &str, folder: &str) -> Result<(), StoreError> {
        self.inner.delete_folder(user, folder)
    }

    /// A user's folders, sorted. Empty for an unknown user.
    pub fn list_folders(&self, user: &str) -> Vec<String> {
        self.inner.list_folders(user)
    }

    /// Every user with at least one folder, sorted.
    pub fn list_users(&self) -> Vec<String> {
        self.inner.list_users()
    }

    /// Appends one message, group-committed with whatever else is waiting. Creates INBOX on
    /// first delivery; other folders must exist.
    pub fn append(
        &self,
        user: &str,
        folder: &str,
        message: NewMessage,
    ) -> Result<Appended, StoreError> {
        let req = AppendRequest {
            user: user.to_string(),
            folder: folder.to_string(),
            message,
        };
        self.inner
            .append_batch(vec![req], None)
            .pop()
            .unwrap_or_else(|| Err(StoreError::Invalid("append produced no result".into())))
    }

    /// Appends many messages (any users and folders); results in request order.
    pub fn append_batch(&self, requests: Vec<AppendRequest>) -> Vec<Result<Appended, StoreError>> {
        self.inner.append_batch(requests, None)
    }

    /// Announces an append on its way (a cluster node's hand-over whose recipient was
    /// accepted, its content still arriving): until the guard drops, a commit may wait up to
    /// `commit_wait_max` for it, so concurrent senders share one commit. Pass it to
    /// [`Store::append_batch_announced`], or drop it when no append will come.
    pub fn incoming(&self) -> Incoming {
        self.inner
            .incoming
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Incoming {
            inner: self.inner.clone(),
        }
    }

    /// [`Store::append_batch`] for a caller that announced itself: the announcement ends once
    /// the requests are queued for the next commit.
    pub fn append_batch_announced(
        &self,
        requests: Vec<AppendRequest>,
        announced: Incoming,
    ) -> Vec<Result<Appended, StoreError>> {
        self.inner.append_batch(requests, Some(announced))
    }

    /// Gets the folder an import writes to, creating it (and its missing parents, in one
    /// record) if it does not exist. A new folder gets `uidvalidity` (the source's) unless it
    /// is 0 or far ahead of the clock and of every UIDVALIDITY the store gave
    /// (2^24 seconds), which would use up the store-wide ascending sequence; an existing
    /// folder keeps its own. [`ImportTarget::uidvalidity_kept`] says which happened.
    pub fn import_folder(
        &self,
        user: &str,
        folder: &str,
        uidvalidity: Option<u32>,
    ) -> Result<ImportTarget, StoreError> {
        self.inner.import_folder(user, folder, uidvalidity)
    }

    /// Validates and lays out messages for [`Store::commit_import`]: summaries and MIME
    /// structures are computed here, without any lock, so a caller can prepare the next batch
    /// while the last one commits. A message too large, and keywords that are not IMAP atoms,
    /// are refused here (the message, or only the keyword, reported in the outcome).
    pub fn prepare_import(
        &self,
        user: &str,
        folder: &str,
        messages: Vec<ImportedMessage>,
    ) -> Result<ImportBatch, StoreError> {
        self.inner.prepare_import(user, folder, messages)
    }

    /// Commits one prepared batch into an existing folder as one transaction: the data of
    /// every message, one volume sync, one journal record, one journal sync (the same commit
    /// as a group-committed append batch, but holding only this batch). In order, each
    /// message keeps the UID it asks for if that is at least the folder's UIDNEXT at that
    /// point (below `u32::MAX - 1`); a UID that would go backwards or collide, or none, is
    /// replaced by UIDNEXT, and [`ImportOutcome::uid_kept`] is false. Keywords beyond the
    /// folder's limit are left off the message and reported. Per-message results are in
    /// order; an `Err` of the whole call (I/O, a missing folder, a stopped store) means nothing
    /// of the batch was committed. Keep a batch within `batch_messages_max` and
    /// `batch_bytes_max` (one record holds it all).
    pub fn commit_import(
        &self,
        batch: ImportBatch,
    ) -> Result<Vec<Result<ImportOutcome, StoreError>>, StoreError> {
        self.inner.commit_import(batch)
    }

    /// Raises the folder's UIDNEXT to `uidnext` (one journal record, a new MODSEQ); a value
    /// at or below the current UIDNEXT changes nothing. An import calls it last with its
    /// source's next UID, so UIDs the source gave out are never given again here.
    pub fn raise_uidnext(
        &self,
        user: &str,
        folder: &str,
        uidnext: u32,
    ) -> Result<FolderStatus, StoreError> {
        self.inner.raise_uidnext(user, folder, uidnext)
    }

    /// Raises the folder's HIGHESTMODSEQ to `modseq` (one journal record); a value at or
    /// below the current one changes nothing. Every later change gets a MODSEQ above it. A
    /// user moved from another node calls it with the source folder's HIGHESTMODSEQ before
    /// importing, so the folder's MODSEQs never go backwards for a CONDSTORE/QRESYNC client.
    pub fn raise_modseq(
        &self,
        user: &str,
        folder: &str,
        modseq: u64,
    ) -> Result<FolderStatus, StoreError> {
        self.inner.raise_modseq(user, folder, modseq)
    }

    /// Gives the messages `entries` names (UID, MODSEQ) the MODSEQs they had in another
    /// store, and sets the folder's HIGHESTMODSEQ to `highest` (one journal record). This is
    /// the one change that can lower MODSEQs (S4's exception, docs/storage.md), so it is only
    /// for a folder no client has seen here: a user moved from another node calls it after
    /// copying a folder and again after the delta, before the switch, so every message keeps
    /// its MODSEQ and the folder its HIGHESTMODSEQ. Refused (nothing written) for a UID not
    /// in the folder, a MODSEQ of 0 or above `highest`, or a `highest` below the MODSEQ of a
    /// message not named.
    pub fn restore_modseqs(
        &self,
        user: &str,
        folder: &str,
        entries: Vec<(u32, u64)>,
        highest: u64,
    ) -> Result<FolderStatus, StoreError> {
        self.inner.restore_modseqs(user, folder, entries, highest)
    }

    /// Imports a whole folder: [`Store::import_folder`] with `uidvalidity`, then the messages
    /// in batches of at most `batch_messages_max` messages and `batch_bytes_max` bytes (each
    /// one [`Store::commit_import`]), then, if the folder's UIDVALIDITY is the source's,
    /// [`Store::raise_uidnext`] to `uidnext`. A crash leaves a prefix of whole batches.
    pub fn import(
        &self,
        user: &str,
        folder: &str,
        uidvalidity: Option<u32>,
        uidnext: Option<u32>,
        messages: Vec<ImportedMessage>,
    ) -> Result<ImportReport, StoreError> {
        let target = self.import_folder(user, folder, uidvalidity)?;
        let mut outcomes = Vec::with_capacity(messages.len());
        let config = self.config();
        let mut batch: Vec<ImportedMessage> = Vec::new();
        let mut bytes = 0usize;
        let mut messages = messages.into_iter().peekable();
        while let Some(m) = messages.next() {
            bytes += m.content.len();
            batch.push(m);
            let full = messages.peek().is_none_or(|next| {
                batch.len() >= config.batch_messages_max
                    || bytes + next.content.len() > config.batch_bytes_max
            });
            if full {
                let prepared = self.prepare_import(user, folder, std::mem::take(&mut batch))?;
                outcomes.extend(self.commit_import(prepared)?);
                bytes = 0;
            }
        }
        let status = match uidnext {
            Some(next) if target.uidvalidity_kept => self.raise_uidnext(user, folder, next)?,
            _ => self.status(user, folder)?,
        };
        Ok(ImportReport {
            target,
            outcomes,
            status,
        })
    }

    /// A folder's counters, O(1).
    pub fn status(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError> {
        self.inner.status(user, folder)
    }

    /// RFC 3501 2.3.2 `\Recent`: (the lowest UID no session has been told of, the folder's
    /// UIDNEXT): every UID between is recent. With `claim` (a read-write SELECT, or a
    /// selected session learning of new mail) the caller takes them, and no later call
    /// returns them. In memory only: mail stored before the store opened is not recent.
    pub fn recent(&self, user: &str, folder: &str, claim: bool) -> Result<(u32, u32), StoreError> {
        let cell = self.inner.folder(user, folder)?;
        let (first, uidnext) = {
            let f = cell.read();
            (self.inner.recent.take(f.id, f.uidnext, claim), f.uidnext)
        };
        if self.inner.recent.len() > recent::MARKS_PRUNE_AT {
            let catalog = self.inner.catalog.read().unwrap_or_else(|p| p.into_inner());
            self.inner
                .recent
                .retain(|id| catalog.folders.contains_key(&id));
        }
        Ok((first.min(uidnext), uidnext))
    }

    /// The folder's index entries, from memory only (S7).
    pub fn open_folder(&self, user: &str, folder: &str) -> Result<FolderView, StoreError> {
        self.inner.open_folder(user, folder)
    }

    /// Messages changed or added since `modseq`, with the folder's status, from one look at
    /// the index (S7: no message byte is read). Expunges show only in the status's count
    /// (and in [`Store::uids`]).
    pub fn changes_since(
        &self,
        user: &str,
        folder: &str,
        modseq: u64,
    ) -> Result<FolderChanges, StoreError> {
        self.inner.changes_since(user, folder, modseq)
    }

    /// Newest first, at most `count` messages with a UID below `before` (all when `None`),
    /// with the folder's status and unseen count: a page of a message list, from the index
    /// only (S7), its cost independent of where in the folder the page is.
    pub fn page(
        &self,
        user: &str,
        folder: &str,
        before: Option<u32>,
        count: usize,
    ) -> Result<Page, StoreError> {
        self.inner.page(user, folder, before, count)
    }

    /// Every UID in the folder, ascending, from the index.
    pub fn uids(&self, user: &str, folder: &str) -> Result<Vec<u32>, StoreError> {
        self.inner.uids(user, folder)
    }

    /// Installs the function told about every committed change (IMAP IDLE wakes on it).
    /// It runs on the committing thread, after the change is durable: keep it short.
    pub fn set_observer(&self, observer: Observer) {
        *self
            .inner
            .observer
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Some(observer);
    }

    /// A message's content, checked against its header and CRC.
    pub fn read(&self, user: &str, folder: &str, uid: u32) -> Result<Vec<u8>, StoreError> {
        self.inner.read(user, folder, uid)
    }

    /// A message's summary and content from one read (IMAP FETCH of a section needs both).
    pub fn read_with_summary(
        &self,
        user: &str,
        folder: &str,
        uid: u32,
    ) -> Result<(Summary, Vec<u8>), StoreError> {
        self.inner.read_with_summary(user, folder, uid)
    }

    /// `len` bytes of a message's content from `offset` (cut at the end of the message).
    pub fn read_range(
        &self,
        user: &str,
        folder: &str,
        uid: u32,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, StoreError> {
        self.inner.read_range(user, folder, uid, offset, len)
    }

    /// The summary parsed when the message arrived.
    pub fn summary(&self, user: &str, folder: &str, uid: u32) -> Result<Summary, StoreError> {
        self.inner.summary(user, folder, uid)
    }

    /// The summaries of `uids` in a folder as the caller knows it (its UIDVALIDITY), without
    /// their MIME structure, from memory after the first read (`summary_cache_bytes_max`).
    /// `None` for a message that is gone.
    pub fn summaries(
        &self,
        user: &str,
        folder: &str,
        uidvalidity: u32,
        uids: &[u32],
    ) -> Vec<Option<Arc<Summary>>> {
        let mut found = self.summaries.get_many(user, folder, uidvalidity, uids);
        if found.iter().any(Option::is_none)
            && self.status(user, folder).map(|s| s.uidvalidity).ok() != Some(uidvalidity)
        {
            // The folder was deleted, or deleted and created again: its UIDs name other
            // messages now (RFC 9051 2.3.1.1).
            return vec![None; uids.len()];
        }
        for (slot, &uid) in found.iter_mut().zip(uids) {
            if slot.is_none()
                && let Ok(summary) = self.inner.summary(user, folder, uid)
            {
                *slot = Some(self.summaries.put(user, folder, uidvalidity, uid, &summary));
            }
        }
        found
    }

    /// Bytes the summary cache holds now.
    pub fn summary_cache_bytes(&self) -> usize {
        self.summaries.bytes()
    }

    /// A folder's status and entries, shared (copy-on-write) with every other caller while
    /// the folder is unchanged, so opening a big folder again costs one status lookup, not a
    /// copy of every entry (`view_cache_bytes_max`).
    pub fn shared_view(
        &self,
        user: &str,
        folder: &str,
    ) -> Result<(FolderStatus, Arc<Vec<MessageInfo>>), StoreError> {
        self.views.open(self, user, folder)
    }

    /// Streams every message of a folder in UID order, reading runs of adjacent messages with
    /// one read each (at most `read_chunk_bytes_max`).
    pub fn read_folder(
        &self,
        user: &str,
        folder: &str,
        each: &mut MessageSink<'_>,
    ) -> Result<(), StoreError> {
        self.inner.read_folder(user, folder, each)
    }

    /// Changes flags and keywords of the given UIDs (missing UIDs are ignored). Returns the
    /// MODSEQ the change got (the current one if no UID matched).
    pub fn set_flags(
        &self,
        user: &str,
        folder: &str,
        uids: &[u32],
        op: FlagOp,
        flags: Flags,
        keywords: &[String],
    ) -> Result<u64, StoreError> {
        self.inner
            .set_flags(user, folder, uids, op, flags, keywords)
    }

    /// Expunges the given UIDs (missing ones are ignored): one journal record, no data I/O
    /// unless the defrag-on-delete rule moves fragments.
    pub fn expunge(
        &self,
        user: &str,
        folder: &str,
        uids: &[u32],
    ) -> Result<ExpungeReport, StoreError> {
        self.inner.expunge(user, folder, uids)
    }

    /// Expunges every UID below `uid` with one record; `u32::MAX` empties the folder.
    pub fn expunge_below(
        &self,
        user: &str,
        folder: &str,
        uid: u32,
    ) -> Result<ExpungeReport, StoreError> {
        self.inner.expunge_below(user, folder, uid)
    }

    /// Expunges every message of the folder.
    pub fn expunge_all(&self, user: &str, folder: &str) -> Result<ExpungeReport, StoreError> {
        self.inner.expunge_below(user, folder, u32::MAX)
    }

    /// Applies the two-fragments rule at every fragment boundary of every folder, online.
    /// `progress(folders_done, folders_total)`.
    pub fn defrag(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<DefragReport, StoreError> {
        self.inner.defrag_all(progress)
    }

    /// Writes a checkpoint now (normally automatic once the journal passes
    /// `journal_checkpoint_bytes`).
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.inner.checkpoint()
    }

    /// Every folder's counters (fragments included: one pass over each folder's messages)
    /// and the volume's space, under the writer lock. For the I/O counters alone, cheaply,
    /// use [`Store::io_counters`].
    pub fn stats(&self) -> StoreStats {
        self.inner.stats()
    }

    /// The I/O counters, lock-free.
    pub fn io_counters(&self) -> IoCounters {
        self.inner.io_counters()
    }

    /// Checks every message against the index (header and CRC), extent overlaps and bounds,
    /// free-space accounting (S5) and the journal chain. With `repair`, expunges messages
    /// whose data is damaged. `progress(bytes_done, bytes_total)`.
    pub fn fsck(
        &self,
        repair: bool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<FsckReport, StoreError> {
        self.inner.fsck(repair, progress)
    }
}

impl fmt::Display for DefragReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "defrag: {} folders, {} rounds, {} messages ({} bytes) moved, fragments {} -> {}",
            self.folders,
            self.rounds,
            self.messages_moved,
            self.bytes_moved,
            self.fragments_before,
            self.fragments_after
        )
    }
}

impl fmt::Display for OpenReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} folders, {} messages; snapshot generation {} ({} messages), journal generation {} ({} records replayed)",
            self.folders,
            self.messages,
            self.snapshot_gen,
            self.snapshot_messages,
            self.journal_gen,
            self.journal_records_replayed
        )?;
        if let Some(t) = &self.torn_tail {
            write!(f, "; torn tail cut: {t}")?;
        }
        for p in &self.problems {
            write!(f, "\n  {p}")?;
        }
        write!(f, "\n  opened in {:.3} s", self.elapsed.as_secs_f64())
    }
}
