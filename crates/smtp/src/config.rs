//! What the shell tells a session before it starts: the configuration shared by all sessions of
//! a listener, and the peer of one connection.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use limits::ByteBudget;

/// Which protocol a listener speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Mail exchange from other servers (RFC 5321), usually port 25.
    Mx,
    /// Message submission from users (RFC 6409), port 587 or 465; MAIL needs AUTH when
    /// `Config::require_auth` is set.
    Submission,
    /// Local delivery (RFC 2033): LHLO instead of EHLO, one reply per recipient after the data.
    Lmtp,
}

/// Limits and options of a listener. Every size an outsider controls has a `*_max` here, and
/// every step a client can drag out has a deadline.
#[derive(Debug, Clone)]
pub struct Config {
    /// Our name in the greeting, the EHLO reply and the Received header.
    pub hostname: String,
    pub mode: Mode,
    /// Longest command line, CRLF included. RFC 5321 4.5.3.1.4 sets 512 but allows more, and
    /// ESMTP parameters (SIZE, BODY, RET, ENVID, NOTIFY, ORCPT, SMTPUTF8 addresses) easily pass
    /// 512. Also bounds a SASL response line (RFC 4954 4 asks for 12288, which only matters
    /// for mechanisms with large tokens; PLAIN and LOGIN fit in a few hundred bytes).
    /// Default 4096.
    pub command_line_max: usize,
    /// Longest line of message text, CRLF included. RFC 5321 4.5.3.1.6 says 1000, but real
    /// mail (generated HTML, long base64 lines) often breaks that, and rejecting it would bounce
    /// legitimate mail; 4.5.3.1 asks to impose no limit where possible. We keep a generous one
    /// so that the message parsers behind us never see unbounded lines. Default 32 KiB.
    pub text_line_max: usize,
    /// Largest message content, advertised with SIZE (RFC 1870). Dot-unstuffed bytes, not
    /// counting the Received header the shell adds. Default 50 MiB.
    pub message_bytes_max: u64,
    /// Most accepted recipients per transaction; RFC 5321 4.5.3.1.8 asks for at least 100.
    /// Default 100.
    pub recipients_max: usize,
    /// Protocol errors (unknown commands, bad syntax, bad sequence, failed AUTH, bad data)
    /// a session may make; the last one is followed by 421 and Close. Default 10.
    pub errors_max: usize,
    /// Commands in a row that do not move a transaction forward (NOOP, RSET, VRFY, HELP, EHLO,
    /// rejected MAIL/RCPT, errors ...); the one past this limit gets 421 and Close.
    /// Default 100.
    pub commands_without_progress_max: usize,
    /// Unprocessed input the session holds (pipelined commands waiting behind a decision).
    /// `Session::wants_input` turns false at this size. A command line can never be longer
    /// than this, whatever `command_line_max` says. Default 64 KiB.
    pub input_buffer_max: usize,
    /// STARTTLS is offered on a plaintext connection.
    pub tls_available: bool,
    /// AUTH is offered without TLS. Off by default: PLAIN and LOGIN send passwords in clear.
    pub auth_without_tls: bool,
    /// In `Mode::Submission`, MAIL needs a successful AUTH (RFC 6409 4.3). Other modes ignore it.
    pub require_auth: bool,
    /// A command or SASL line must be complete this long after its first byte arrived,
    /// however slowly the rest trickles in (the idle timeout alone would let one byte every
    /// few minutes hold the connection forever). Default 60 s.
    pub command_deadline: Duration,
    /// A message transfer (DATA to the final dot; a BDAT transaction from its first chunk to
    /// LAST) may take this long, plus one second per `transfer_rate_min` bytes received, at
    /// most `transfer_deadline_max`. The base is RFC 5321 4.5.3.2.7's 5 minutes, so a client
    /// that pauses as long as the RFC lets it never runs out. Default 5 minutes.
    pub transfer_deadline: Duration,
    /// The slowest transfer rate that keeps earning time, bytes per second (Postfix's
    /// `smtpd_min_data_rate` plays the same part). Default 1024.
    pub transfer_rate_min: u64,
    /// The longest any one message transfer may take. Default one hour.
    pub transfer_deadline_max: Duration,
    /// In `Mode::Submission` with `require_auth`: the time from connect to a successful
    /// AUTH. Default 60 s.
    pub login_deadline: Duration,
    /// Message bytes held in memory by every connection together. A message that would go
    /// past it is read to its end but refused with 452 4.3.1 (RFC 3463: mail system full).
    /// `None`: no shared budget (tests).
    pub inflight: Option<Arc<ByteBudget>>,
    /// In `Mode::Lmtp`: take the routing parameters of mailstow's cluster (advertised as
    /// `XMAILSTOW-ROUTE`): `XORIGIN=node:queue-id` on MAIL (who hands the message over, so
    /// the owner can recognise a retry of a message it already stored) and `XEPOCH=n` on RCPT
    /// (the owner epoch the sender routed with, so a stale route is refused). They reach the
    /// shell in [`crate::Envelope`]. Default false: the parameters are unknown (555).
    pub cluster_routes: bool,
    /// The shell decides whether to serve the connection before the greeting
    /// (`Event::Connect`, answered by `Session::connect_result`): a filter's verdict on the
    /// client. Off: the 220 greeting comes at once. Default false.
    pub decide_connect: bool,
    /// The shell decides on EHLO, HELO and LHLO (`Event::Hello`, answered by
    /// `Session::hello_result`). Off: they are answered at once. Default false.
    pub decide_hello: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            hostname: "localhost".to_string(),
            mode: Mode::Mx,
            command_line_max: 4096,
            text_line_max: 32 * 1024,
            message_bytes_max: 50 * 1024 * 1024,
            recipients_max: 100,
            errors_max: 10,
            commands_without_progress_max: 100,
            input_buffer_max: 64 * 1024,
            tls_available: false,
            auth_without_tls: false,
            require_auth: true,
            command_deadline: Duration::from_secs(60),
            transfer_deadline: Duration::from_secs(5 * 60),
            transfer_rate_min: 1024,
            transfer_deadline_max: Duration::from_secs(60 * 60),
            login_deadline: Duration::from_secs(60),
            inflight: None,
            cluster_routes: false,
            decide_connect: false,
            decide_hello: false,
        }
    }
}

impl Config {
    /// The command line limit in force: `command_line_max`, but never more than the input
    /// buffer, so that a line that cannot fit is a line-too-long error rather than a stall.
    pub(crate) fn line_max(&self) -> usize {
        self.command_line_max.min(self.input_buffer_max).max(1)
    }
}

/// The other end of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub ip: IpAddr,
    /// The connection is encrypted: implicit TLS, or after STARTTLS.
    pub tls: bool,
}
