//! What a mail protocol asks of mail storage: the store's own interface, declared here (not in
//! the store) so a protocol crate is written against it without depending on a storage engine.
//! The store (`crates/store`) implements it, and so does the in-memory store the IMAP
//! transcripts also run on (`crates/imap/src/tests/memory.rs`); IMAP sessions are handed one
//! with each storage step.
//!
//! The contract a protocol relies on (RFC 9051 2.3.1.1 for UIDs, RFC 7162 3.1 for MODSEQs):
//! - a folder's UIDs ascend and are never reused under one UIDVALIDITY; MODSEQs ascend;
//! - [`Mailstore::shared_view`] and [`Mailstore::changes_since`] are consistent snapshots:
//!   every message they list was committed, in UID order;
//! - a message read after it was expunged is an error whose `is_not_found` is true, never
//!   another message's bytes;
//! - a change is acknowledged only once it is durable.

use std::sync::Arc;

use crate::{
    AppendRequest, Appended, ExpungeReport, FlagOp, Flags, FolderChanges, FolderStatus,
    MessageInfo, StoreError, Summary, Usage,
};

pub trait Mailstore: Send + Sync {
    /// A user's folders by full name, sorted. Empty for an unknown user.
    fn list_folders(&self, user: &str) -> Vec<String>;

    /// Creates a folder (and the user, if new).
    fn create_folder(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError>;

    /// Creates a folder and every missing folder above it (RFC 9051 6.3.4), atomically: a
    /// refusal (a bad name, a limit, the folder exists) creates nothing.
    fn create_folder_path(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError>;

    /// Renames a folder and the folders below it. INBOX cannot be renamed.
    fn rename_folder(&self, user: &str, from: &str, to: &str) -> Result<(), StoreError>;

    /// Deletes a folder and its messages. INBOX cannot be deleted; folders below it are kept.
    fn delete_folder(&self, user: &str, folder: &str) -> Result<(), StoreError>;

    /// A folder's counters, O(1).
    fn status(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError>;

    /// RFC 3501 2.3.2 `\Recent`: (the lowest UID no session has been told of, the folder's
    /// UIDNEXT): every UID between is recent. With `claim` (a read-write SELECT, or a
    /// selected session learning of new mail) the caller takes them, and no later call
    /// returns them.
    fn recent(&self, user: &str, folder: &str, claim: bool) -> Result<(u32, u32), StoreError>;

    /// A folder's status and every message's entry, UID order, shared (copy-on-write) with
    /// every other caller while the folder is unchanged, so opening a big folder again costs
    /// one status lookup, not a copy of every entry.
    fn shared_view(
        &self,
        user: &str,
        folder: &str,
    ) -> Result<(FolderStatus, Arc<Vec<MessageInfo>>), StoreError>;

    /// Messages changed or added since `modseq` (MODSEQ above it), UID order, with the
    /// folder's status, from one look. Expunges show only in the status's count (and in
    /// [`Mailstore::uids`]).
    fn changes_since(
        &self,
        user: &str,
        folder: &str,
        modseq: u64,
    ) -> Result<FolderChanges, StoreError>;

    /// Every UID in the folder, ascending.
    fn uids(&self, user: &str, folder: &str) -> Result<Vec<u32>, StoreError>;

    /// A message's content.
    fn read(&self, user: &str, folder: &str, uid: u32) -> Result<Vec<u8>, StoreError>;

    /// The summary parsed when the message arrived, with its MIME structure.
    fn summary(&self, user: &str, folder: &str, uid: u32) -> Result<Summary, StoreError>;

    /// A message's summary and content from one read (IMAP FETCH of a section needs both).
    fn read_with_summary(
        &self,
        user: &str,
        folder: &str,
        uid: u32,
    ) -> Result<(Summary, Vec<u8>), StoreError>;

    /// The searchable fields of many messages' summaries (their MIME structure may be left
    /// out), in a folder as the caller knows it (its UIDVALIDITY): what SEARCH, SORT and
    /// THREAD read for every message of a folder, so an implementation should keep them in
    /// memory. `None` for a message that is gone.
    fn summaries(
        &self,
        user: &str,
        folder: &str,
        uidvalidity: u32,
        uids: &[u32],
    ) -> Vec<Option<Arc<Summary>>>;

    /// Changes flags and keywords of the given UIDs (missing UIDs are ignored). Returns the
    /// MODSEQ the change got (the current one if no UID matched).
    fn set_flags(
        &self,
        user: &str,
        folder: &str,
        uids: &[u32],
        op: FlagOp,
        flags: Flags,
        keywords: &[String],
    ) -> Result<u64, StoreError>;

    /// Expunges the given UIDs (missing ones are ignored), and says what that did.
    fn expunge(&self, user: &str, folder: &str, uids: &[u32]) -> Result<ExpungeReport, StoreError>;

    /// Appends many messages (any users and folders), each acknowledged only once durable;
    /// results in request order. Creates INBOX on first delivery; other folders must exist.
    fn append_batch(&self, requests: Vec<AppendRequest>) -> Vec<Result<Appended, StoreError>>;

    /// What a user holds (folders, messages, bytes), for quotas (RFC 9208).
    fn usage(&self, user: &str) -> Usage;
}
