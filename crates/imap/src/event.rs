//! What a session asks of its shell, and what the shell answers.

use std::fmt;

/// Output of [`crate::Session::poll`], in the order the shell must act on it. `Debug` hides
/// the password, so logging an event never logs a secret.
#[derive(Clone, PartialEq, Eq)]
pub enum Event {
    /// Bytes to write. Consecutive responses come coalesced.
    Reply(Vec<u8>),
    /// The next step reads or changes mail: call `Session::run` with the store (and the
    /// directory's subscriptions, special uses and quotas) and the time, where blocking on
    /// the store is fine, then poll again. The session holds no store between steps, so the
    /// shell decides where and when each runs (before login none does).
    Storage,
    /// The `OK Begin TLS negotiation now` response was the last reply: flush it, run the
    /// handshake, then call `tls_started`. Input that came with or after the STARTTLS line
    /// has been discarded (RFC 9051 6.2.1, CVE-2011-0411).
    StartTls,
    /// Check these credentials (LOGIN or AUTHENTICATE PLAIN), then call `auth_result`.
    /// `authzid` is empty unless the client asked to act as another user (RFC 4616 2).
    /// `mechanism`: `LOGIN` or `PLAIN`, for the shell's log (not shown by `Debug`).
    Auth {
        mechanism: &'static str,
        username: String,
        password: String,
        authzid: String,
    },
    /// RFC 4978 COMPRESS DEFLATE: may this connection be compressed (the shell bounds how
    /// many are, each holding a compressor's memory)? Answer with `compress_result`.
    Compress,
    /// The `OK DEFLATE active` response was the last reply: flush it, then compress
    /// everything written and decompress everything read from here on. Input that came after
    /// the COMPRESS line was discarded (the client must wait for the answer, RFC 4978 3).
    Deflate,
    /// Flush replies and close the connection; the session is over.
    Close,
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Reply(bytes) => f
                .debug_tuple("Reply")
                .field(&String::from_utf8_lossy(bytes))
                .finish(),
            Event::Storage => f.write_str("Storage"),
            Event::StartTls => f.write_str("StartTls"),
            Event::Compress => f.write_str("Compress"),
            Event::Deflate => f.write_str("Deflate"),
            Event::Auth {
                username, authzid, ..
            } => f
                .debug_struct("Auth")
                .field("username", username)
                .field("password", &format_args!("<redacted>"))
                .field("authzid", authzid)
                .finish(),
            Event::Close => f.write_str("Close"),
        }
    }
}

/// The shell's answer to [`Event::Auth`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthResult {
    /// Logged in as this store user.
    Success { user: String },
    /// Unknown user or wrong password; the response does not say which.
    BadCredentials,
    /// The user has as many sessions as allowed (RFC 5530 LIMIT).
    TooManySessions,
    /// A temporary failure (RFC 5530 UNAVAILABLE); the text goes to the client.
    Temporary(String),
}
