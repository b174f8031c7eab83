//! What a session asks of its shell, and what the shell answers.

use std::fmt;

/// Output of [`crate::Session::poll`], in the order the shell must act on it. `Debug` hides the
/// password, so logging an event never logs a secret.
#[derive(Clone, PartialEq, Eq)]
pub enum Event {
    /// Bytes to write, whole lines ending in CRLF. Consecutive replies come coalesced.
    Reply(Vec<u8>),
    /// `+OK Begin TLS negotiation` was the last reply: flush it, run the handshake, then call
    /// `tls_started`. Input that arrived with or after the `STLS` line has been discarded, so
    /// nothing sent in plaintext is read as if it came over TLS (RFC 2595 4, CVE-2011-0411).
    StartTls,
    /// Check these credentials (from `USER`+`PASS` or `AUTH PLAIN`), then call `auth_result`.
    /// `authzid` is empty unless an `AUTH PLAIN` client asked to act as another user; whether
    /// that is allowed is the shell's decision (RFC 4616 2).
    /// `mechanism`: `USER` (USER and PASS) or `PLAIN` (AUTH PLAIN), for the shell's log
    /// (not shown by `Debug`).
    Auth {
        mechanism: &'static str,
        username: String,
        password: String,
        authzid: String,
    },
    /// Read the message with this UID and call `retrieve_result`. `top_lines` is `Some(n)` for
    /// `TOP msg n`: a hint only, the session cuts the lines itself.
    Retrieve { uid: u32, top_lines: Option<u32> },
    /// RFC 1939 6: expunge these UIDs (ascending, never empty) durably, then call
    /// `update_result`. Sent only for `QUIT` in TRANSACTION with messages marked deleted.
    Update { expunge: Vec<u32> },
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
            Event::Auth {
                username,
                password: _,
                authzid,
                ..
            } => formatter
                .debug_struct("Auth")
                .field("username", username)
                .field("password", &format_args!("<redacted>"))
                .field("authzid", authzid)
                .finish(),
            Event::Retrieve { uid, top_lines } => formatter
                .debug_struct("Retrieve")
                .field("uid", uid)
                .field("top_lines", top_lines)
                .finish(),
            Event::Update { expunge } => formatter
                .debug_struct("Update")
                .field("expunge", expunge)
                .finish(),
            Event::Close => formatter.write_str("Close"),
        }
    }
}

/// The shell's answer to [`Event::Auth`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthResult {
    /// Credentials accepted, exclusive maildrop lock taken (RFC 1939 4), folder opened.
    Success { maildrop: Maildrop },
    /// Unknown user or wrong password; the reply does not say which.
    BadCredentials,
    /// RFC 2449 8.1.2: another session holds the maildrop lock.
    InUse,
    /// RFC 3206 4: a temporary failure; the text goes after `-ERR [SYS/TEMP]`.
    Temporary(String),
}

/// The messages of a maildrop as the session sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Maildrop {
    /// With the UID, the source of the stable `UIDL` value (RFC 1939 7).
    pub uidvalidity: u32,
    /// `(uid, size in octets)` in UID order; message number n is `messages[n - 1]`.
    pub messages: Vec<(u32, u64)>,
}
