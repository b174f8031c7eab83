//! Errors of the IMAP client.

/// Everything that can go wrong on one connection.
///
/// After [`Error::Io`], [`Error::Tls`], [`Error::Timeout`], [`Error::Bye`],
/// [`Error::Closed`], [`Error::Protocol`] or [`Error::TooLarge`] the connection is in an
/// unknown state: the client refuses further commands with [`Error::Unusable`] and the
/// caller should drop it (see [`crate::Client::is_usable`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Socket error.
    #[error("IMAP I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// TLS setup or handshake failed.
    #[error("IMAP TLS error: {0}")]
    Tls(String),
    /// Connecting, or one read or write, took longer than the configured timeout.
    #[error("IMAP server did not answer within the timeout")]
    Timeout,
    /// Tagged NO (RFC 3501 7.1.2); the text includes the response code, e.g.
    /// `[ALREADYEXISTS] Mailbox already exists`.
    #[error("IMAP server said NO: {0}")]
    No(String),
    /// Tagged BAD (RFC 3501 7.1.3): the server did not accept the command.
    #[error("IMAP server said BAD: {0}")]
    Bad(String),
    /// The server sent BYE (RFC 3501 7.1.5) and closed the connection.
    #[error("IMAP server closed the connection: BYE {0}")]
    Bye(String),
    /// The server closed the connection without BYE.
    #[error("IMAP server closed the connection")]
    Closed,
    /// The server sent something this client cannot understand.
    #[error("IMAP protocol error: {0}")]
    Protocol(String),
    /// A response exceeded `response_bytes_max`, or a message exceeds APPENDLIMIT.
    #[error("IMAP data too large: {0}")]
    TooLarge(String),
    /// The server lacks a capability the call needs (e.g. UIDPLUS for UID EXPUNGE).
    #[error("IMAP server does not support {0}")]
    Unsupported(String),
    /// An argument cannot be sent as asked (bad header name, NUL in a non-binary literal…).
    #[error("invalid IMAP argument: {0}")]
    InvalidArgument(String),
    /// An earlier error left this connection in an unknown state.
    #[error("IMAP connection unusable after an earlier error: {0}")]
    Unusable(String),
}

impl Error {
    /// Whether the connection cannot be used any more after this error.
    pub fn is_fatal(&self) -> bool {
        !matches!(
            self,
            Error::No(_) | Error::Bad(_) | Error::Unsupported(_) | Error::InvalidArgument(_)
        )
    }
}
