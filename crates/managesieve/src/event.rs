//! What a session asks of its shell, and what the shell answers.

use std::fmt;

/// Output of [`crate::Session::poll`], in the order the shell must act on it. `Debug` hides
/// the password and script contents, so logging an event never logs a secret or a script.
///
/// Every decision names the `user` it is for (the authorization identity the shell accepted),
/// so an answer can never apply to another login after UNAUTHENTICATE.
#[derive(Clone, PartialEq, Eq)]
pub enum Event {
    /// Bytes to write. Consecutive replies come coalesced.
    Reply(Vec<u8>),
    /// `OK` to STARTTLS was the last reply: flush it, run the handshake, then call
    /// `tls_started` (or drop the connection if it failed). Input that arrived with or after
    /// the STARTTLS line has been discarded (CVE-2011-0411).
    StartTls,
    /// Check these PLAIN credentials (RFC 4616), then call `authenticated`. `authzid` is
    /// empty unless the client asked to act as another user, which reaches the shell only
    /// with `Config::authzid_allowed`.
    Authenticate {
        mechanism: &'static str,
        authcid: String,
        password: String,
        authzid: String,
    },
    /// LISTSCRIPTS (RFC 5804 2.7): call `scripts_listed`.
    ListScripts { user: String },
    /// GETSCRIPT (2.9): call `script_got`.
    GetScript { user: String, name: String },
    /// PUTSCRIPT (2.6): compile `script`; if it compiles, store it under `name` (replacing a
    /// script of that name, active or not), then call `script_put`.
    PutScript {
        user: String,
        name: String,
        script: String,
    },
    /// CHECKSCRIPT (2.12): compile `script` without storing it, then call `script_checked`.
    CheckScript { user: String, script: String },
    /// HAVESPACE (2.5): would a script of `size` octets named `name` fit the user's quota?
    /// Call `space_checked`. Sizes above `Config::script_bytes_max` never get here.
    HaveSpace {
        user: String,
        name: String,
        size: u32,
    },
    /// SETACTIVE (2.8): make `name` the active script, or with `None` (the empty name)
    /// deactivate whichever is active. Call `active_set`.
    SetActive { user: String, name: Option<String> },
    /// DELETESCRIPT (2.10): delete `name` unless it is active. Call `script_deleted`.
    DeleteScript { user: String, name: String },
    /// RENAMESCRIPT (2.11): rename `from` to `to` (an active script stays active). Call
    /// `script_renamed`.
    RenameScript {
        user: String,
        from: String,
        to: String,
    },
    /// Flush replies and close the connection; the session is over.
    Close,
}

impl fmt::Debug for Event {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Reply(bytes) => formatter
                .debug_tuple("Reply")
                .field(&String::from_utf8_lossy(bytes))
                .finish(),
            Event::StartTls => formatter.write_str("StartTls"),
            Event::Authenticate {
                mechanism,
                authcid,
                password: _,
                authzid,
            } => formatter
                .debug_struct("Authenticate")
                .field("mechanism", mechanism)
                .field("authcid", authcid)
                .field("password", &format_args!("<redacted>"))
                .field("authzid", authzid)
                .finish(),
            Event::ListScripts { user } => formatter
                .debug_struct("ListScripts")
                .field("user", user)
                .finish(),
            Event::GetScript { user, name } => formatter
                .debug_struct("GetScript")
                .field("user", user)
                .field("name", name)
                .finish(),
            Event::PutScript { user, name, script } => formatter
                .debug_struct("PutScript")
                .field("user", user)
                .field("name", name)
                .field("script", &format_args!("<{} bytes>", script.len()))
                .finish(),
            Event::CheckScript { user, script } => formatter
                .debug_struct("CheckScript")
                .field("user", user)
                .field("script", &format_args!("<{} bytes>", script.len()))
                .finish(),
            Event::HaveSpace { user, name, size } => formatter
                .debug_struct("HaveSpace")
                .field("user", user)
                .field("name", name)
                .field("size", size)
                .finish(),
            Event::SetActive { user, name } => formatter
                .debug_struct("SetActive")
                .field("user", user)
                .field("name", name)
                .finish(),
            Event::DeleteScript { user, name } => formatter
                .debug_struct("DeleteScript")
                .field("user", user)
                .field("name", name)
                .finish(),
            Event::RenameScript { user, from, to } => formatter
                .debug_struct("RenameScript")
                .field("user", user)
                .field("from", from)
                .field("to", to)
                .finish(),
            Event::Close => formatter.write_str("Close"),
        }
    }
}

/// The shell's answer to [`Event::Authenticate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthResult {
    /// Logged in as `user` (the authorization identity, announced as `OWNER`, RFC 5804 1.7).
    Success { user: String },
    /// Unknown user, wrong password, or an authzid the authcid may not use: `NO`, counted
    /// against `Config::auth_failures_max`. The reply does not say which.
    BadCredentials,
    /// RFC 5804 1.3 `AUTH-TOO-WEAK`: policy wants a stronger mechanism for this user.
    TooWeak,
    /// RFC 5804 1.3 `TRANSITION-NEEDED`: the user must log in once with PLAIN (over TLS) so
    /// the server can update the stored credentials.
    TransitionNeeded,
    /// RFC 5804 1.3 `REFERRAL`: the user's scripts are on another server; the `sieve://` URL
    /// (RFC 5804 3) goes to the client.
    Referral(String),
    /// The directory is unavailable: `NO (TRYLATER)` with this text. Not counted.
    Unavailable(String),
}

/// Why the shell could not do what a storage decision asked. Each is one `NO` on the wire
/// (RFC 5804 1.3). None counts against `Config::errors_max`: a user editing a script that
/// does not compile yet is not misbehaving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// `NONEXISTENT`: no script of that name.
    NonExistent,
    /// `ALREADYEXISTS`: RENAMESCRIPT's new name is taken.
    AlreadyExists,
    /// `ACTIVE`: DELETESCRIPT of the active script.
    Active,
    /// `QUOTA`, `QUOTA/MAXSCRIPTS` or `QUOTA/MAXSIZE`.
    Quota(Quota),
    /// The script does not compile: the interpreter's error text (e.g. `line 3, column 5:
    /// unknown command`), sent as a string (a literal if it has line breaks).
    Invalid(String),
    /// `TRYLATER`: storage is down; the text is for the client.
    Unavailable(String),
}

/// Which quota a script would exceed (RFC 5804 1.3 `QUOTA`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quota {
    /// Some other quota (the sum of the user's scripts, say).
    Other,
    /// The number of scripts.
    MaxScripts,
    /// One script's size.
    MaxSize,
}

/// One line of LISTSCRIPTS (RFC 5804 2.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptInfo {
    pub name: String,
    pub active: bool,
}
