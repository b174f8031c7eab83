//! What a session works on in a storage step ([`crate::Event::Storage`]): the mail store and
//! the parts of the directory IMAP needs (subscriptions, special-use attributes, quotas). The
//! shell builds a [`Backend`] for each [`crate::Session::run`]; the session keeps none of it
//! between steps.

use mail_model::{Mailstore, OverQuota, Quota, Usage};

/// Where subscriptions live (RFC 9051 6.3.7): outside the store, in the directory.
pub trait Subscriptions: Send + Sync {
    /// The user's subscribed names.
    fn list(&self, user: &str) -> Result<Vec<String>, String>;
    fn set(&self, user: &str, mailbox: &str, subscribed: bool) -> Result<(), String>;
}

/// Where the special-use attributes a client gave its folders live (RFC 6154 3,
/// CREATE-SPECIAL-USE): outside the store, in the directory.
pub trait SpecialUses: Send + Sync {
    /// (folder, attribute) for each attribute a folder of the user was given.
    fn list(&self, user: &str) -> Result<Vec<(String, String)>, String>;
    /// Gives `mailbox` exactly `attributes` (none: forgets it).
    fn set(&self, user: &str, mailbox: &str, attributes: &[String]) -> Result<(), String>;
    /// The folder `from` and its children are now under `to`.
    fn renamed(&self, user: &str, from: &str, to: &str) -> Result<(), String>;
}

/// Where a user's limits live (RFC 9208): outside the store, in the directory. Asked at every
/// addition, so a limit changed while a session is open applies to its next APPEND.
pub trait Quotas: Send + Sync {
    /// The user's limits; unlimited when it has none.
    fn quota(&self, user: &str) -> Quota;

    /// An addition of `added` was refused `NO [OVERQUOTA]`: for the shell's mail log.
    fn refused(&self, _user: &str, _added: Usage, _why: OverQuota) {}

    /// Whether the server's disk has no room for `added_bytes` more above its free-space
    /// reserve: then additions are refused `NO [UNAVAILABLE]` before anything is written.
    fn storage_full(&self, _added_bytes: u64) -> bool {
        false
    }
}

/// Who hears of messages a user files from one folder into another (COPY, MOVE): the
/// spam filter learns from moves into and out of Junk. Told after the copies are stored;
/// must not block.
pub trait Filing: Send + Sync {
    /// `uids` are the copies' UIDs in `to`.
    fn filed(&self, user: &str, from: &str, to: &str, uids: &[u32]);
}

/// Hears nothing.
pub struct NoFiling;

impl Filing for NoFiling {
    fn filed(&self, _user: &str, _from: &str, _to: &str, _uids: &[u32]) {}
}

/// What a session works on in one storage step.
pub struct Backend<'a> {
    pub store: &'a dyn Mailstore,
    pub subscriptions: &'a dyn Subscriptions,
    pub special_uses: &'a dyn SpecialUses,
    pub quotas: &'a dyn Quotas,
    pub filing: &'a dyn Filing,
}
