//! Session limits and identity. Every limit is named `*_max` and enforced by the session.

use std::time::Duration;

/// RFC 9051 5.4: an inactivity autologout timer must be at least 30 minutes once logged in.
pub const AUTOLOGOUT: Duration = Duration::from_secs(30 * 60);
/// Before login there is nothing to protect by waiting long.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct Config {
    /// Host name in the greeting.
    pub hostname: String,
    /// Allow LOGIN and AUTHENTICATE without TLS (tests, loopback benchmarks).
    pub plaintext_auth: bool,
    /// Offer STARTTLS (a TLS configuration exists).
    pub starttls: bool,
    /// One line of a command, CRLF included. RFC 7162 4 asks for at least 8192.
    pub line_bytes_max: usize,
    /// One literal; also the APPENDLIMIT (RFC 7889) advertised.
    pub literal_bytes_max: u64,
    /// A whole command, lines and literals (a MULTIAPPEND is one command).
    pub command_bytes_max: u64,
    /// Parenthesised lists (and section brackets) nested in one command.
    pub nesting_depth_max: u32,
    /// Commands answered BAD in a row before the session is closed.
    pub errors_max: u32,
    /// Messages in one MULTIAPPEND.
    pub append_messages_max: usize,
    /// Output produced before a long FETCH yields to the shell to write it.
    pub output_chunk_bytes: usize,
    /// Autologout timer once logged in (RFC 9051 5.4) and while idling.
    pub autologout: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            hostname: "localhost".into(),
            plaintext_auth: false,
            starttls: true,
            line_bytes_max: 64 << 10,
            literal_bytes_max: 64 << 20,
            command_bytes_max: 80 << 20,
            nesting_depth_max: 32,
            errors_max: 20,
            append_messages_max: 1000,
            output_chunk_bytes: 1 << 20,
            autologout: AUTOLOGOUT,
        }
    }
}
