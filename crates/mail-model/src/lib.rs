//! The data of mail storage, shared by the store that keeps it and the protocols that serve
//! it: flags, message entries and summaries, folder counters, quotas, and the error type.
//! Plain data and pure functions only: no I/O, so a protocol crate can depend on it without
//! depending on a storage engine.

mod error;
mod flags;
mod quota;

pub use error::StoreError;
pub use flags::{FlagOp, Flags};
pub use quota::{OverQuota, Quota, Usage};

/// A message to append.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewMessage {
    pub flags: Flags,
    pub keywords: Vec<String>,
    /// Unix seconds.
    pub internal_date: i64,
    pub content: Vec<u8>,
}

/// One append of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendRequest {
    pub user: String,
    pub folder: String,
    pub message: NewMessage,
}

/// What an acknowledged append got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub uid: u32,
    pub uidvalidity: u32,
    pub modseq: u64,
}

/// Header fields parsed once at append and stored in front of the content.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub from: String,
    pub to: String,
    pub subject: String,
    pub date: String,
    pub message_id: String,
    pub size: u64,
    /// The MIME structure (`mime_structure::Structure::to_bytes`), computed at arrival so
    /// IMAP FETCH never parses a message again. Empty for messages stored before it existed.
    pub structure: Vec<u8>,
    /// JMAP's `preview` (RFC 8621 4.1.4): at most 256 characters of the first text body,
    /// white space collapsed (`mime_structure::Preview`). Empty for messages stored before
    /// it existed, and for messages without a text body.
    pub preview: String,
    /// JMAP's `hasAttachment`: a part a client should offer as downloadable.
    pub has_attachment: bool,
    /// The message ids this message follows, for threading (RFC 5256 3, REFERENCES): the
    /// References field's, or the first of In-Reply-To when there is no References, oldest
    /// first, without angle brackets, space separated; the newest kept when they do not fit
    /// in `summary_field_bytes_max`. `None` for messages stored before it existed (a reader
    /// that needs it then looks at the envelope's In-Reply-To).
    pub references: Option<String>,
}

/// A message as the index knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageInfo {
    pub uid: u32,
    pub size: u64,
    pub flags: Flags,
    pub keywords: Vec<String>,
    pub modseq: u64,
    pub internal_date: i64,
}

/// A folder's counters, O(1) to get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FolderStatus {
    pub messages: u64,
    /// Sum of message sizes.
    pub bytes: u64,
    pub uidvalidity: u32,
    pub uidnext: u32,
    pub highest_modseq: u64,
}

/// A folder opened for a session: its status and every message's index entry, UID order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderView {
    pub status: FolderStatus,
    pub messages: Vec<MessageInfo>,
}

/// What changed in a folder since a MODSEQ (see [`Store::changes_since`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderChanges {
    pub status: FolderStatus,
    /// Messages whose MODSEQ is above the one asked about (new ones and changed flags),
    /// UID order.
    pub changed: Vec<MessageInfo>,
}
