//! Session policy and limits, chosen by the shell. `Default` gives the production values.

use std::time::Duration;

/// RFC 1939 3: an inactivity autologout timer "MUST be of at least 10 minutes' duration".
pub const AUTOLOGOUT: Duration = Duration::from_secs(10 * 60);

/// Reply bytes queued but not yet polled, above which the session stops running pipelined
/// commands until the shell polls. Without it one 64 KiB feed of `LIST` lines over a large
/// maildrop could queue gigabytes of replies.
pub(crate) const REPLY_QUEUE_MAX: usize = 64 * 1024;

/// Text the shell hands in for a `-ERR` line is cut to this many characters, so a long
/// internal error cannot produce an unbounded reply line.
pub(crate) const SHELL_TEXT_MAX: usize = 200;

/// What one [`crate::Session`] allows. Shared by all sessions of a listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Named in the greeting and the sign-off.
    pub hostname: String,
    /// Longest line accepted, in octets including CRLF. RFC 2449 4 raises commands to 255
    /// octets; the default, 1024, leaves room for an `AUTH PLAIN` response carrying long
    /// credentials (base64 grows them by a third). A longer line is discarded whole and
    /// answered `-ERR line too long`.
    pub line_max: usize,
    /// Client errors (any `-ERR` caused by what the client sent, failed logins included) before
    /// the session answers `-ERR too many errors` and closes. 0 closes on the first error.
    pub errors_max: usize,
    /// Offer and accept `STLS` (RFC 2595 4) while the connection is not yet TLS.
    pub tls_available: bool,
    /// Allow `USER`/`PASS` and `AUTH PLAIN` without TLS. Off by default (RFC 2595 2.3: a
    /// server must be able to refuse clear-text logins without an encryption layer); then the
    /// session answers `-ERR [AUTH]` and `CAPA` does not list `USER` or `SASL`.
    pub plaintext_auth: bool,
    /// AUTHORIZATION may last this long in total, however the client spreads its commands
    /// (the autologout timer alone restarts with every byte). Default 60 s.
    pub login_deadline: Duration,
    /// A command line must be complete this long after its first byte. Default 60 s.
    pub command_deadline: Duration,
    /// Pipelined input (RFC 2449 6.6) the session holds beyond one partial line while a
    /// decision is outstanding. A shell that reads at most this much per `feed`, and only while
    /// `wants_input()`, never reaches it; past it the session answers `-ERR input buffer full`
    /// and closes.
    pub input_buffer_max: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            hostname: "localhost".to_owned(),
            line_max: 1024,
            errors_max: 10,
            tls_available: false,
            plaintext_auth: false,
            login_deadline: Duration::from_secs(60),
            command_deadline: Duration::from_secs(60),
            input_buffer_max: 64 * 1024,
        }
    }
}

impl Config {
    /// Most bytes of input a session ever holds: the pipelined bound plus one partial line.
    pub(crate) fn input_bound(&self) -> usize {
        self.input_buffer_max.saturating_add(self.line_max)
    }
}
