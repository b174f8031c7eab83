//! What a run decides: the actions for the caller to carry out.

/// A mailbox flag (imap4flags, RFC 5232): the IMAP flag as written, `\Seen` or a keyword.
pub type Flag = String;

/// One action the caller carries out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Store in INBOX (explicit `keep`, or the implicit keep) with these flags.
    Keep { flags: Vec<Flag> },
    /// Store in `mailbox` (RFC 5228 4.1) with these flags; `create` (RFC 5490 3.2) makes it
    /// if missing.
    FileInto {
        mailbox: String,
        flags: Vec<Flag>,
        create: bool,
    },
    /// Send the message on to `address` (RFC 5228 4.2).
    Redirect { address: String },
    /// Refuse the message (RFC 5429): `extended` for `ereject` (refuse in the protocol
    /// if at all possible).
    Reject { reason: String, extended: bool },
    /// Send a vacation reply (RFC 5230); whether one is actually sent (RFC 3834 rules, the
    /// once-per-period record) is the caller's: see the [`vacation`] helpers.
    Vacation(Vacation),
}

/// A `vacation` action's arguments, evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vacation {
    /// At most one reply per sender within this many seconds (`:days` * 86400 or
    /// `:seconds`, RFC 6131).
    pub period_seconds: u64,
    pub subject: Option<String>,
    pub from: Option<String>,
    /// The user's other addresses (`:addresses`).
    pub addresses: Vec<String>,
    /// `:mime`: `reason` is a MIME entity, headers included.
    pub mime: bool,
    /// The handle identifying this reply for the once-per-period record (`:handle`, or one
    /// derived from the arguments per RFC 5230 4.2).
    pub handle: String,
    pub reason: String,
}

/// What a run decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The actions, in the order the script took them, the implicit keep included as a
    /// `Keep` when it applies. Never empty unless the script discarded the message.
    pub actions: Vec<Action>,
    /// The header edits (editheader, RFC 5293) applied to the message: when `Some`, the
    /// message to store and redirect is this one instead of the original.
    pub edited_message: Option<Vec<u8>>,
    /// Tracking ids to record once the message is delivered (RFC 7352 3):
    /// (handle, id, period in seconds).
    pub duplicate_marks: Vec<(String, String, u64)>,
    /// Commands and tests evaluated.
    pub instructions: u64,
    /// Whether the implicit keep applies (then the last action is its `Keep`): nothing
    /// cancelled it (RFC 5228 2.10.2).
    pub implicit_keep: bool,
    /// Problems found at run time that did not fail the run (a `:regex` key built from
    /// variables that is not a valid regex: that key matches nothing); worth logging.
    pub warnings: Vec<String>,
}
