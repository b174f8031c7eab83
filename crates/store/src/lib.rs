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
//! [`Store`] is the engine itself, shared as an `Arc<Store>` ([`Store::open`] returns one);
//! its methods live with their concern (`commit.rs` changes, `read.rs` reads, `import.rs`,
//! `defrag.rs`, `fsck.rs`, `open.rs`), and what a mail protocol asks of it is its
//! [`Mailstore`] implementation (`mailstore.rs`). This root only declares the data the API
//! speaks in.
//!
//! Invariants S1–S7 of docs/storage.md are asserted where they are established: S1 in
//! `commit.rs` (data synced before the journal record), S2/S5 in `alloc.rs` and `fsck.rs`,
//! S3/S4 in `index.rs` (`apply` refuses a non-ascending UID or MODSEQ), S6 in `commit.rs`
//! (extents are freed only after the record that stops naming them is durable), S7 in
//! `read.rs` and `mailstore.rs` (`open_folder` and `status` touch only the index).

mod alloc;
mod cache;
mod commit;
mod config;
mod defrag;
mod delivered;
mod error;
mod expunge;
mod flags;
mod format;
mod fsck;
mod import;
mod index;
mod journal;
mod mailstore;
mod names;
mod open;
mod read;
mod recent;
mod snapshot;
mod users;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use commit::Store;
pub use config::{KEYWORDS_PER_FOLDER_LIMIT, StoreConfig};
pub use delivered::DeliveredKey;
pub use format::parse_summary;
pub use fsck::FsckReport;
pub use import::ImportBatch;
pub use mail_model::{
    AppendRequest, Appended, ExpungeReport, FlagOp, Flags, FolderChanges, FolderStatus, FolderView,
    Mailstore, MessageInfo, NewMessage, OverQuota, Quota, StoreError, Summary, Usage,
};

/// Called with a user's name after every committed change to one of their folders.
pub type Observer = Arc<dyn Fn(&str) + Send + Sync>;

/// What `read_folder` calls with each message: its UID and content.
pub type MessageSink<'a> = dyn FnMut(u32, &[u8]) -> Result<(), StoreError> + 'a;

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
