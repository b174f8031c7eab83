//! What a session needs from mail storage. The crate does no I/O: the shell hands a session an
//! implementation of [`Mailstore`] with each `poll` (the server's is the store, in the server
//! crate; the transcript tests also run on the in-memory one in `tests/memory.rs`).
//!
//! The contract a session relies on (RFC 9051 2.3.1.1 for UIDs, RFC 7162 3.1 for MODSEQs):
//! - a folder's UIDs ascend and are never reused under one UIDVALIDITY; MODSEQs ascend;
//! - [`Mailstore::view`] and [`Mailstore::changes_since`] are consistent snapshots: every
//!   message they list was committed, in UID order;
//! - a message read after it was expunged is an error whose `is_not_found` is true, never
//!   another message's bytes.

use std::sync::Arc;

use mail_model::{
    AppendRequest, Appended, FlagOp, Flags, FolderChanges, FolderStatus, MessageInfo, StoreError,
    Summary, Usage,
};

pub trait Mailstore: Send + Sync {
    /// Every folder of the user, by full name.
    fn list_folders(&self, user: &str) -> Vec<String>;
    fn create_folder(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError>;
    /// Creates the folder and any missing parent (RFC 9051 6.3.4).
    fn create_folder_path(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError>;
    /// Renames the folder and its children.
    fn rename_folder(&self, user: &str, from: &str, to: &str) -> Result<(), StoreError>;
    fn delete_folder(&self, user: &str, folder: &str) -> Result<(), StoreError>;
    fn status(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError>;
    /// RFC 3501 2.3.2: `(first, uidnext)`, the UIDs from `first` below `uidnext` are recent
    /// to the caller; with `claim`, to no later caller.
    fn recent(&self, user: &str, folder: &str, claim: bool) -> Result<(u32, u32), StoreError>;
    /// The folder's status and every message's entry, UID order; shared between callers.
    fn view(
        &self,
        user: &str,
        folder: &str,
    ) -> Result<(FolderStatus, Arc<Vec<MessageInfo>>), StoreError>;
    /// Messages whose MODSEQ is above `modseq`, UID order.
    fn changes_since(
        &self,
        user: &str,
        folder: &str,
        modseq: u64,
    ) -> Result<FolderChanges, StoreError>;
    /// Every UID in the folder, ascending.
    fn uids(&self, user: &str, folder: &str) -> Result<Vec<u32>, StoreError>;
    fn read(&self, user: &str, folder: &str, uid: u32) -> Result<Vec<u8>, StoreError>;
    /// The summary with its MIME structure.
    fn summary(&self, user: &str, folder: &str, uid: u32) -> Result<Summary, StoreError>;
    fn read_with_summary(
        &self,
        user: &str,
        folder: &str,
        uid: u32,
    ) -> Result<(Summary, Vec<u8>), StoreError>;
    /// The searchable fields of many messages' summaries (their MIME structure may be left
    /// out): what SEARCH, SORT and THREAD read for every message of a folder, so an
    /// implementation should keep them in memory. `None` for a message that is gone.
    fn summaries(
        &self,
        user: &str,
        folder: &str,
        uidvalidity: u32,
        uids: &[u32],
    ) -> Vec<Option<Arc<Summary>>>;
    /// Applies `op` to each message; returns the MODSEQ the change got.
    fn set_flags(
        &self,
        user: &str,
        folder: &str,
        uids: &[u32],
        op: FlagOp,
        flags: Flags,
        keywords: &[String],
    ) -> Result<u64, StoreError>;
    fn expunge(&self, user: &str, folder: &str, uids: &[u32]) -> Result<(), StoreError>;
    /// Appends every request, each acknowledged only once durable.
    fn append_batch(&self, requests: Vec<AppendRequest>) -> Vec<Result<Appended, StoreError>>;
    /// What the user holds, for quotas (RFC 9208).
    fn usage(&self, user: &str) -> Usage;
}

/// Implements [`Mailstore`] for `$ty` by forwarding each method to its field `$field`, a value
/// with the mail store's methods of the same names (`shared_view` for [`Mailstore::view`];
/// `expunge`'s report dropped): the server's store and the tests' share one forwarding.
#[macro_export]
macro_rules! forward_mailstore {
    ($ty:ty, $field:tt) => {
        impl $crate::Mailstore for $ty {
            fn list_folders(&self, user: &str) -> Vec<String> {
                self.$field.list_folders(user)
            }

            fn create_folder(
                &self,
                user: &str,
                folder: &str,
            ) -> Result<$crate::mail_model::FolderStatus, $crate::mail_model::StoreError> {
                self.$field.create_folder(user, folder)
            }

            fn create_folder_path(
                &self,
                user: &str,
                folder: &str,
            ) -> Result<$crate::mail_model::FolderStatus, $crate::mail_model::StoreError> {
                self.$field.create_folder_path(user, folder)
            }

            fn rename_folder(
                &self,
                user: &str,
                from: &str,
                to: &str,
            ) -> Result<(), $crate::mail_model::StoreError> {
                self.$field.rename_folder(user, from, to)
            }

            fn delete_folder(
                &self,
                user: &str,
                folder: &str,
            ) -> Result<(), $crate::mail_model::StoreError> {
                self.$field.delete_folder(user, folder)
            }

            fn status(
                &self,
                user: &str,
                folder: &str,
            ) -> Result<$crate::mail_model::FolderStatus, $crate::mail_model::StoreError> {
                self.$field.status(user, folder)
            }

            fn recent(
                &self,
                user: &str,
                folder: &str,
                claim: bool,
            ) -> Result<(u32, u32), $crate::mail_model::StoreError> {
                self.$field.recent(user, folder, claim)
            }

            fn view(
                &self,
                user: &str,
                folder: &str,
            ) -> Result<
                (
                    $crate::mail_model::FolderStatus,
                    ::std::sync::Arc<Vec<$crate::mail_model::MessageInfo>>,
                ),
                $crate::mail_model::StoreError,
            > {
                self.$field.shared_view(user, folder)
            }

            fn changes_since(
                &self,
                user: &str,
                folder: &str,
                modseq: u64,
            ) -> Result<$crate::mail_model::FolderChanges, $crate::mail_model::StoreError> {
                self.$field.changes_since(user, folder, modseq)
            }

            fn uids(
                &self,
                user: &str,
                folder: &str,
            ) -> Result<Vec<u32>, $crate::mail_model::StoreError> {
                self.$field.uids(user, folder)
            }

            fn read(
                &self,
                user: &str,
                folder: &str,
                uid: u32,
            ) -> Result<Vec<u8>, $crate::mail_model::StoreError> {
                self.$field.read(user, folder, uid)
            }

            fn summary(
                &self,
                user: &str,
                folder: &str,
                uid: u32,
            ) -> Result<$crate::mail_model::Summary, $crate::mail_model::StoreError> {
                self.$field.summary(user, folder, uid)
            }

            fn read_with_summary(
                &self,
                user: &str,
                folder: &str,
                uid: u32,
            ) -> Result<($crate::mail_model::Summary, Vec<u8>), $crate::mail_model::StoreError>
            {
                self.$field.read_with_summary(user, folder, uid)
            }

            fn summaries(
                &self,
                user: &str,
                folder: &str,
                uidvalidity: u32,
                uids: &[u32],
            ) -> Vec<Option<::std::sync::Arc<$crate::mail_model::Summary>>> {
                self.$field.summaries(user, folder, uidvalidity, uids)
            }

            fn set_flags(
                &self,
                user: &str,
                folder: &str,
                uids: &[u32],
                op: $crate::mail_model::FlagOp,
                flags: $crate::mail_model::Flags,
                keywords: &[String],
            ) -> Result<u64, $crate::mail_model::StoreError> {
                self.$field
                    .set_flags(user, folder, uids, op, flags, keywords)
            }

            fn expunge(
                &self,
                user: &str,
                folder: &str,
                uids: &[u32],
            ) -> Result<(), $crate::mail_model::StoreError> {
                self.$field.expunge(user, folder, uids).map(drop)
            }

            fn append_batch(
                &self,
                requests: Vec<$crate::mail_model::AppendRequest>,
            ) -> Vec<Result<$crate::mail_model::Appended, $crate::mail_model::StoreError>> {
                self.$field.append_batch(requests)
            }

            fn usage(&self, user: &str) -> $crate::mail_model::Usage {
                self.$field.usage(user)
            }
        }
    };
}
