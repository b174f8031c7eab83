//! Session limits and identity. Every limit is named `*_max` and enforced by the session.

use std::sync::Arc;
use std::time::Duration;

use limits::ByteBudget;

/// RFC 9051 5.4: an inactivity autologout timer must be at least 30 minutes once logged in.
pub const AUTOLOGOUT: Duration = Duration::from_secs(30 * 60);
/// Before login there is nothing to protect by waiting long.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(60);

/// RFC 7888 4: what LITERAL- allows a non-synchronising literal to be.
pub const LITERAL_MINUS_BYTES_MAX: u64 = 4096;

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
    /// RFC 5267 4.3: searches kept up to date (`RETURN (UPDATE)`) per selected folder; past
    /// it a search answers `NO [NOUPDATE]` and gets no updates. Each costs a search of the
    /// folder whenever it changes. Default 10.
    pub search_updates_max: usize,
    /// Messages in one MULTIAPPEND.
    pub append_messages_max: usize,
    /// Parts (TEXT literals and URLs) of one CATENATE message (RFC 4469 5). Each URL is a
    /// message read from the store; the built message is bounded by `literal_bytes_max`, a
    /// command's by `command_bytes_max`. Default 100.
    pub catenate_parts_max: usize,
    /// Output produced before a long FETCH yields to the shell to write it.
    pub output_chunk_bytes: usize,
    /// Autologout timer once logged in (RFC 9051 5.4) and while idling.
    pub autologout: Duration,
    /// Before login: the longest line. Every byte before login is a stranger's, so this is
    /// the longest line a client may need there: an RFC 2971 ID with its 30 pairs at their
    /// largest (30-octet fields, 1024-octet values, quoted, each pair with its 6 quotes and
    /// spaces: 31,800 bytes) and the command around it. Default 40 KiB.
    pub prelogin_line_bytes_max: usize,
    /// Before login: the largest literal, synchronising or not. A larger synchronising one
    /// gets `BAD [TOOBIG]` instead of `+`; a larger non-synchronising one (RFC 7888 4's
    /// LITERAL- rule, which is what we advertise before login) gets `BAD [TOOBIG]` and the
    /// connection is closed rather than read. Default 4096.
    pub prelogin_literal_bytes_max: u64,
    /// The time from connect to a successful login, whatever the client sends. Default 60 s.
    pub login_deadline: Duration,
    /// A command must be complete (line and literals) this long after its first byte, plus
    /// one second per `transfer_rate_min` literal bytes received, at most
    /// `command_deadline_max`. Default 60 s.
    pub command_deadline: Duration,
    /// The slowest literal transfer that keeps earning time, bytes per second. Default 1024.
    pub transfer_rate_min: u64,
    /// The longest one command may take to arrive. Default one hour.
    pub command_deadline_max: Duration,
    /// The longest one IDLE may last (RFC 9051 6.3.13: the server may log out a client that
    /// idles past its inactivity timeout; clients re-issue IDLE every 29 minutes). Default
    /// 30 minutes.
    pub idle_deadline: Duration,
    /// Literal bytes held in memory by every connection together (APPEND). A literal that
    /// does not fit is refused with `NO [LIMIT]` (before `+`), or read and discarded and then
    /// refused (LITERAL+). `None`: no shared budget (tests).
    pub inflight: Option<Arc<ByteBudget>>,
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
            search_updates_max: 10,
            append_messages_max: 1000,
            catenate_parts_max: 100,
            output_chunk_bytes: 1 << 20,
            autologout: AUTOLOGOUT,
            prelogin_line_bytes_max: 40 << 10,
            prelogin_literal_bytes_max: LITERAL_MINUS_BYTES_MAX,
            login_deadline: LOGIN_TIMEOUT,
            command_deadline: Duration::from_secs(60),
            transfer_rate_min: 1024,
            command_deadline_max: Duration::from_secs(60 * 60),
            idle_deadline: AUTOLOGOUT,
            inflight: None,
        }
    }
}
