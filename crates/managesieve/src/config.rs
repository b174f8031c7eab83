//! Session policy and limits, chosen by the shell. `Default` gives the production values.

use std::time::Duration;

/// Reply bytes queued but not yet polled, above which the session stops running pipelined
/// commands until the shell polls (a feed of `LISTSCRIPTS` lines cannot queue unbounded
/// replies).
pub(crate) const REPLY_QUEUE_MAX: usize = 64 * 1024;

/// Text the shell hands in (a compile error, a temporary failure) is cut to this many bytes
/// before it reaches the wire.
pub(crate) const SHELL_TEXT_MAX: usize = 4096;

/// What one [`crate::Session`] allows and announces. Shared by all sessions of a listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// RFC 5804 1.7 `IMPLEMENTATION`: the server's name and version. Default `mailstow`.
    pub implementation: String,
    /// RFC 5804 1.7 `SIEVE`: the Sieve extensions the interpreter implements, announced
    /// space-separated (the shell passes `sieve::EXTENSIONS`). Default empty.
    pub sieve_extensions: Vec<String>,
    /// RFC 5804 1.7 `SASL`: the mechanisms offered. The session implements `PLAIN` (RFC 4616)
    /// only; other names in the list are never announced or accepted. Default `["PLAIN"]`.
    pub sasl_mechanisms: Vec<String>,
    /// RFC 5804 1.7 `MAXREDIRECTS`: the interpreter's redirect limit per run, announced when
    /// set. Default `None`.
    pub max_redirects: Option<u32>,
    /// RFC 5804 1.7 `NOTIFY`: the `enotify` methods, announced when not empty. Default empty.
    pub notify_methods: Vec<String>,
    /// Offer and accept `STARTTLS` (RFC 5804 2.2) while the connection is not yet TLS.
    pub tls_available: bool,
    /// Allow `AUTHENTICATE "PLAIN"` without TLS. Off by default (RFC 5804 2.1, RFC 4616 4:
    /// PLAIN is clear text); then `SASL` is announced empty and AUTHENTICATE answers
    /// `NO (ENCRYPT-NEEDED)`, like IMAP's LOGINDISABLED.
    pub plaintext_auth: bool,
    /// Pass a PLAIN authorization identity that differs from the authentication identity to
    /// the shell (which decides whether the one may act as the other, RFC 4616 2). Off by
    /// default: the session refuses such a login itself.
    pub authzid_allowed: bool,
    /// Longest command in octets, CRLF and literal markers included and a script literal's
    /// content excluded (names and SASL strings sent as literals count). A longer command is
    /// read to its end, dropped and answered `NO "line too long"`. Default 8 KiB.
    pub line_max: usize,
    /// Largest script (PUTSCRIPT, CHECKSCRIPT, HAVESPACE's size) in octets; a larger literal
    /// is read to its end without being kept and answered `NO (QUOTA/MAXSIZE)`. Default 64
    /// KiB, like `sieve::Limits::script_bytes_max`.
    pub script_bytes_max: usize,
    /// Longest script name in octets (RFC 5804 1.6 sets no limit). Default 255.
    pub script_name_bytes_max: usize,
    /// Arguments after the command name; no command takes more than two. Default 4.
    pub arguments_max: usize,
    /// Client errors (any `NO` caused by what the client sent) before the session answers
    /// `BYE` and closes. Default 10.
    pub errors_max: usize,
    /// Failed AUTHENTICATE exchanges (bad credentials, malformed or cancelled PLAIN
    /// responses) before `BYE`. Default 3.
    pub auth_failures_max: usize,
    /// Commands before a login succeeds (CAPABILITY, NOOP, STARTTLS, AUTHENTICATE and its
    /// responses, each counted) before `BYE`. Default 20.
    pub commands_before_login_max: usize,
    /// Pipelined input the session holds unread while a decision is outstanding; past it the
    /// session answers `BYE` and closes. A shell that feeds only while `wants_input()` and at
    /// most this much at a time never reaches it. At least 1 is used. Default 64 KiB.
    pub input_buffer_max: usize,
    /// The non-authenticated state may last this long in total, from the greeting (or
    /// UNAUTHENTICATE) to a successful login. Default 60 s.
    pub login_deadline: Duration,
    /// Each line of a command (the part before a literal, and the part after it) must arrive
    /// this long after it started. Default 60 s.
    pub command_deadline: Duration,
    /// A literal must arrive within this, plus one second per `literal_rate_min` bytes
    /// received, up to `literal_deadline_max`. Defaults 60 s, 1 KiB/s, 10 min.
    pub literal_deadline: Duration,
    pub literal_rate_min: u64,
    pub literal_deadline_max: Duration,
    /// No input for this long while the session waits for a command: `BYE` and close.
    /// Default 30 min (RFC 5804 sets none; IMAP's autologout, RFC 3501 5.4, is 30 min).
    pub idle_timeout: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            implementation: "mailstow".to_owned(),
            sieve_extensions: Vec::new(),
            sasl_mechanisms: vec!["PLAIN".to_owned()],
            max_redirects: None,
            notify_methods: Vec::new(),
            tls_available: false,
            plaintext_auth: false,
            authzid_allowed: false,
            line_max: 8 * 1024,
            script_bytes_max: 64 * 1024,
            script_name_bytes_max: 255,
            arguments_max: 4,
            errors_max: 10,
            auth_failures_max: 3,
            commands_before_login_max: 20,
            input_buffer_max: 64 * 1024,
            login_deadline: Duration::from_secs(60),
            command_deadline: Duration::from_secs(60),
            literal_deadline: Duration::from_secs(60),
            literal_rate_min: 1024,
            literal_deadline_max: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(30 * 60),
        }
    }
}

impl Config {
    /// Unread input held while a decision is outstanding.
    pub(crate) fn pending_max(&self) -> usize {
        self.input_buffer_max.max(1)
    }

    /// Most bytes of input a session ever holds: unread input, plus one command being
    /// received (its line bytes and its script). What [`crate::Session::buffered_len`] never
    /// exceeds.
    pub fn input_bound(&self) -> usize {
        self.pending_max()
            .saturating_add(self.line_max)
            .saturating_add(self.script_bytes_max)
    }

    /// Whether the session can do this SASL mechanism and the configuration offers it.
    pub(crate) fn offers(&self, mechanism: &str) -> bool {
        mechanism.eq_ignore_ascii_case("PLAIN")
            && self
                .sasl_mechanisms
                .iter()
                .any(|offered| offered.eq_ignore_ascii_case(mechanism))
    }
}
