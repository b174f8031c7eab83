//! Client errors: each variant is one `NO` on the wire, and each counts toward
//! `Config::errors_max` (the failed logins also toward `Config::auth_failures_max`). Answers
//! of the shell that are not the client's fault (`TRYLATER`, `NONEXISTENT`, a script that
//! does not compile...) are written by the session directly and never count.

use crate::reply::Code;

/// A command the session refuses. `Display` is the human-readable text of the `NO`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Error {
    #[error("Unknown command")]
    UnknownCommand,
    #[error("Authenticate first")]
    NotAuthenticated,
    #[error("Already authenticated")]
    AlreadyAuthenticated,
    #[error("Syntax: {usage}")]
    Syntax { usage: &'static str },
    #[error("Empty command")]
    Empty,
    #[error("Line too long")]
    LineTooLong,
    #[error("Too many arguments")]
    TooManyArguments,
    // RFC 5804 1.6.
    #[error("Invalid script name: {reason}")]
    ScriptName { reason: &'static str },
    // RFC 5228 2.1: a script is UTF-8.
    #[error("Script is not UTF-8")]
    ScriptNotUtf8,
    #[error("Unsupported SASL mechanism")]
    Mechanism,
    // RFC 5804 1.3 ENCRYPT-NEEDED, 2.1; RFC 4616 4.
    #[error("Plaintext authentication disallowed without TLS")]
    EncryptNeeded,
    #[error("Invalid base64 in SASL response")]
    Base64,
    #[error("Malformed PLAIN response")]
    Plain,
    // RFC 5804 2.1: the client aborts with "*" and the server answers NO.
    #[error("Authentication cancelled")]
    Cancelled,
    // RFC 4616 2: acting as another user is the server's decision; refused unless configured.
    #[error("Authorization identity must be the authentication identity")]
    Authzid,
    #[error("Authentication failed")]
    AuthFailed,
    #[error("TLS already active")]
    TlsActive,
    #[error("STARTTLS not available")]
    TlsUnavailable,
}

impl Error {
    /// The response code (RFC 5804 1.3) the `NO` carries, if any.
    pub(crate) fn code(&self) -> Option<Code> {
        match self {
            Error::EncryptNeeded => Some(Code::EncryptNeeded),
            _ => None,
        }
    }

    /// A failed login attempt, counted toward `Config::auth_failures_max`.
    pub(crate) fn is_auth_failure(&self) -> bool {
        matches!(
            self,
            Error::AuthFailed | Error::Plain | Error::Base64 | Error::Authzid
        )
    }
}
