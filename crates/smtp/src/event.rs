//! What a session asks of its shell.

use std::fmt;

use crate::config::Peer;

/// The next thing the shell must do, from `Session::poll`. `Debug` hides the password and
/// the message content, so logging an event never logs a secret or a message.
///
/// `Auth`, `MailFrom`, `RcptTo` and `Message` are decisions: the session waits (and reads no
/// further input) until the shell answers with the matching `Session::*_result` call.
#[derive(Clone, PartialEq, Eq)]
pub enum Event {
    /// Bytes to write to the socket: one or more CRLF-terminated reply lines.
    Reply(Vec<u8>),
    /// The `220` reply to STARTTLS was the `Reply` before this. The shell writes everything
    /// before it, does the TLS handshake, then calls `Session::tls_started`. Plaintext input
    /// after the STARTTLS line has been discarded (CVE-2011-0411), and so is any fed before
    /// `tls_started`.
    StartTls,
    /// Decide whether to serve this connection (only with `Config::decide_connect`, as the
    /// first event, before any greeting); answer with `Session::connect_result`.
    Connect,
    /// Accept or refuse the client's EHLO, HELO or LHLO (only with `Config::decide_hello`);
    /// answer with `Session::hello_result`.
    Hello {
        /// The name the client gave.
        name: String,
    },
    /// Verify these credentials and answer with `Session::auth_result`. The session has done
    /// the SASL exchange (RFC 4954) and the base64 decoding.
    Auth {
        /// `"PLAIN"` or `"LOGIN"`, for the shell's log (not shown by `Debug`).
        mechanism: &'static str,
        username: String,
        password: String,
        /// The authorization identity of PLAIN (RFC 4616), empty when absent or for LOGIN.
        authzid: String,
    },
    /// Accept or refuse the sender; answer with `Session::mail_result`.
    MailFrom {
        /// The reverse-path, `""` for the null sender (bounces).
        from: String,
        /// SIZE= (RFC 1870), already checked against `Config::message_bytes_max`; `SIZE=0` is
        /// reported as `None`.
        size: Option<u64>,
        /// BODY=8BITMIME (RFC 6152) or BODY=BINARYMIME (RFC 3030).
        body_8bit: bool,
        /// SMTPUTF8 (RFC 6531).
        smtputf8: bool,
        /// RET=FULL is `Some(true)`, RET=HDRS `Some(false)` (RFC 3461 4.3).
        ret_full: Option<bool>,
        /// ENVID= (RFC 3461 4.4), xtext-decoded.
        envid: Option<String>,
    },
    /// Accept or refuse a recipient; answer with `Session::rcpt_result`.
    RcptTo {
        /// The forward-path; `RCPT TO:<Postmaster>` arrives as `"postmaster"` (RFC 5321 4.5.1).
        to: String,
        /// NOTIFY= (RFC 3461 4.1): `"NEVER"` or a comma list of SUCCESS, FAILURE, DELAY.
        notify: Option<String>,
        /// ORCPT= (RFC 3461 4.2) as `"rfc822;"` and the xtext-decoded address.
        orcpt: Option<String>,
    },
    /// A complete message: make it durable, then answer with `Session::message_result`. Only
    /// that answer produces the `250`.
    Message {
        envelope: Envelope,
        /// After DATA: dot-unstuffed, CRLF line ends (bare CR and LF were refused), without
        /// the final `.CRLF`. After BDAT: the chunks' exact bytes. Never the Received header.
        content: Vec<u8>,
    },
    /// Close the connection after writing every reply before this.
    Close,
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Reply(bytes) => f
                .debug_tuple("Reply")
                .field(&String::from_utf8_lossy(bytes))
                .finish(),
            Event::StartTls => f.write_str("StartTls"),
            Event::Connect => f.write_str("Connect"),
            Event::Hello { name } => f.debug_struct("Hello").field("name", name).finish(),
            Event::Auth {
                username, authzid, ..
            } => f
                .debug_struct("Auth")
                .field("username", username)
                .field("password", &format_args!("<redacted>"))
                .field("authzid", authzid)
                .finish(),
            Event::MailFrom {
                from,
                size,
                body_8bit,
                smtputf8,
                ret_full,
                envid,
            } => f
                .debug_struct("MailFrom")
                .field("from", from)
                .field("size", size)
                .field("body_8bit", body_8bit)
                .field("smtputf8", smtputf8)
                .field("ret_full", ret_full)
                .field("envid", envid)
                .finish(),
            Event::RcptTo { to, notify, orcpt } => f
                .debug_struct("RcptTo")
                .field("to", to)
                .field("notify", notify)
                .field("orcpt", orcpt)
                .finish(),
            Event::Message { envelope, content } => f
                .debug_struct("Message")
                .field("envelope", envelope)
                .field("content", &format_args!("<{} bytes>", content.len()))
                .finish(),
            Event::Close => f.write_str("Close"),
        }
    }
}

/// The envelope of a complete message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The argument of EHLO, HELO or LHLO.
    pub helo: String,
    pub from: String,
    /// Accepted recipients, in the order accepted. LMTP replies follow this order.
    pub recipients: Vec<String>,
    /// The user of a successful AUTH.
    pub authenticated: Option<String>,
    pub peer: Peer,
    pub tls: bool,
    /// The WITH protocol of the Received header (RFC 3848): SMTP, ESMTP, ESMTPS, ESMTPA,
    /// ESMTPSA, LMTP, LMTPS, LMTPA, LMTPSA.
    pub protocol: &'static str,
    pub body_8bit: bool,
    pub smtputf8: bool,
    pub ret_full: Option<bool>,
    pub envid: Option<String>,
    /// `XORIGIN=` of a cluster peer's MAIL ([`crate::Config::cluster_routes`]): the node that
    /// handed the message over and its queue id there, `node:id`.
    pub origin: Option<String>,
    /// `XEPOCH=` of each recipient's RCPT, parallel to `recipients` (`None` where absent).
    pub epochs: Vec<Option<u64>>,
}
