//! A compiled script, and the host a run of it asks.

use std::sync::Arc;

use crate::context::Location;
use crate::ir::Cmd;

/// A compiled script: cheap to clone and share between threads.
#[derive(Debug, Clone)]
pub struct Script {
    pub(crate) inner: Arc<ScriptInner>,
}

/// What compiling keeps: the typed tree and what is known of it beforehand.
#[derive(Debug)]
pub(crate) struct ScriptInner {
    pub(crate) commands: Vec<Cmd>,
    pub(crate) required: Vec<String>,
    /// Slots for the script's own variables.
    pub(crate) locals: usize,
    /// Whether the script requires "variables" (then `:matches` and `:regex` set the
    /// match variables, RFC 5229 3.2).
    pub(crate) variables: bool,
    pub(crate) may_reject: bool,
    pub(crate) may_reply: bool,
}

impl Script {
    /// Whether a run of this script can end in `reject` or `ereject` (so a server may run it
    /// before its `250` to refuse instead of bouncing). Computed from the script's own
    /// commands: a script it includes is not known at compile time.
    pub fn may_reject(&self) -> bool {
        self.inner.may_reject
    }

    /// Whether a run can ask for `vacation` (in this script's own commands).
    pub fn may_reply(&self) -> bool {
        self.inner.may_reply
    }

    /// The extensions the script `require`s (lower-cased, in order, with those a
    /// capability implies: "spamtestplus" brings "spamtest").
    pub fn required(&self) -> &[String] {
        &self.inner.required
    }
}

/// What a run asks its caller.
pub trait Host {
    /// Whether the user has a mailbox of this name (RFC 5490 3.1 `mailboxexists`).
    fn mailbox_exists(&self, name: &str) -> bool;
    /// Whether a message with this tracking id was seen by this user within `period`
    /// seconds (RFC 7352 3). Recording the id is the caller's, after a successful
    /// delivery: see [`crate::Outcome::duplicate_marks`].
    fn duplicate(&self, handle: &str, id: &str, period_seconds: u64) -> bool;
    /// Another script, for `include`; `Err` says why there is none (a missing script is a
    /// run-time error unless `:optional`).
    fn include(&self, location: Location, name: &str) -> Result<Script, String>;
}
