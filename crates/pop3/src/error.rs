//! Client errors: each variant is one `-ERR` line on the wire, and each counts toward
//! `Config::errors_max`. Failures that are not the client's fault (`[IN-USE]`, `[SYS/TEMP]`)
//! are written by the session directly and never count.

/// A command the session refuses. `Display` is the text after `-ERR `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Error {
    #[error("unknown command")]
    UnknownCommand,
    #[error("command not valid in this state")]
    WrongState,
    #[error("syntax: {usage}")]
    Syntax { usage: &'static str },
    #[error("arguments must be UTF-8 without control characters")]
    Text,
    #[error("line too long")]
    LineTooLong,
    #[error("invalid message number")]
    InvalidNumber,
    #[error("no such message, only {} in maildrop", crate::reply::messages(*.count))]
    NoSuchMessage { count: usize },
    #[error("message {number} already deleted")]
    Deleted { number: usize },
    // RFC 2595 2.3: clear-text logins can be refused without TLS; RFC 3206 5: [AUTH].
    #[error("[AUTH] Plaintext authentication disallowed without TLS")]
    PlaintextDisallowed,
    #[error("USER first")]
    UserFirst,
    #[error("[AUTH] Authentication failed")]
    AuthFailed,
    #[error("unsupported SASL mechanism")]
    Mechanism,
    #[error("invalid base64 in SASL response")]
    Base64,
    #[error("malformed PLAIN response")]
    Plain,
    #[error("authentication cancelled")]
    Cancelled,
    #[error("command not permitted when TLS active")]
    TlsActive,
    #[error("STLS not available")]
    TlsUnavailable,
}
