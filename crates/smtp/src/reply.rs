//! Replies and the shell's answers to decisions.

/// One SMTP reply: a code, an optional enhanced status code (RFC 3463) and text.
///
/// `text` may hold several lines separated by `\n`; they become a multi-line reply
/// (RFC 5321 4.2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub code: u16,
    pub enhanced: Option<(u8, u16, u16)>,
    pub text: String,
}

impl Reply {
    /// A reply with an enhanced status code, e.g. `Reply::new(550, (5, 1, 1), "no such user")`.
    pub fn new(code: u16, enhanced: (u8, u16, u16), text: impl Into<String>) -> Reply {
        Reply {
            code,
            enhanced: Some(enhanced),
            text: text.into(),
        }
    }

    /// A reply without an enhanced status code (greeting, EHLO, 354, 334).
    pub fn plain(code: u16, text: impl Into<String>) -> Reply {
        Reply {
            code,
            enhanced: None,
            text: text.into(),
        }
    }

    /// 550 5.1.1: the recipient does not exist (RFC 3463 X.1.1).
    pub fn mailbox_unavailable() -> Reply {
        Reply::new(550, (5, 1, 1), "Mailbox unavailable")
    }

    /// 554 5.7.1: not a local recipient and the client may not relay (RFC 7372).
    pub fn relay_denied() -> Reply {
        Reply::new(554, (5, 7, 1), "Relay access denied")
    }

    /// 550 5.7.1: the sender is refused by policy.
    pub fn sender_rejected() -> Reply {
        Reply::new(550, (5, 7, 1), "Sender rejected")
    }

    /// 550 5.7.1 with the shell's own text: refused by policy.
    pub fn policy(text: impl Into<String>) -> Reply {
        Reply::new(550, (5, 7, 1), text)
    }

    /// 452 4.2.2: the mailbox is over quota for now (RFC 3463 X.2.2).
    pub fn mailbox_full() -> Reply {
        Reply::new(452, (4, 2, 2), "Mailbox full")
    }

    /// 552 5.2.2: the message alone is larger than the mailbox quota.
    pub fn message_over_quota() -> Reply {
        Reply::new(552, (5, 2, 2), "Message exceeds the mailbox quota")
    }

    /// 452 4.3.1: the system is out of storage (RFC 3463 X.3.1).
    pub fn insufficient_storage() -> Reply {
        Reply::new(452, (4, 3, 1), "Insufficient system storage")
    }

    /// 451 4.3.0: a local error; the client should try again later.
    pub fn temporary_failure() -> Reply {
        Reply::new(451, (4, 3, 0), "Temporary failure, try again later")
    }

    /// The reply as wire bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.text.len().saturating_add(16));
        self.write_to(&mut out);
        out
    }

    /// Appends the reply as wire bytes: one line per line of `text`, `code-` on all but the
    /// last (RFC 5321 4.2.1), each CRLF-terminated.
    ///
    /// The encoder keeps the wire valid whatever the fields hold: a code outside 200..=599
    /// becomes 451, an enhanced class that disagrees with the code takes the code's class
    /// (RFC 3463 2), and control characters in the text become spaces, so no text can end a
    /// line early or inject a reply.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let code = if (200..=599).contains(&self.code) {
            self.code
        } else {
            451
        };
        let text = self.text.strip_suffix('\n').unwrap_or(&self.text);
        let mut lines = text.split('\n').peekable();
        while let Some(line) = lines.next() {
            let separator = if lines.peek().is_some() { '-' } else { ' ' };
            out.extend_from_slice(format!("{code}{separator}").as_bytes());
            let mut wrote_enhanced = false;
            if let Some((_, subject, detail)) = self.enhanced {
                let class = code / 100;
                out.extend_from_slice(format!("{class}.{subject}.{detail}").as_bytes());
                wrote_enhanced = true;
            }
            let line = line.strip_suffix('\r').unwrap_or(line);
            if !line.is_empty() {
                if wrote_enhanced {
                    out.push(b' ');
                }
                for ch in line.chars() {
                    if ch.is_control() && ch != '\t' {
                        out.push(b' ');
                    } else {
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    }
                }
            }
            out.extend_from_slice(b"\r\n");
        }
    }

    /// A 4xx or 5xx reply.
    pub(crate) fn is_failure(&self) -> bool {
        (400..=599).contains(&self.code)
    }
}

/// The shell's answer to `Event::MailFrom`, `Event::RcptTo` and `Event::Message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accept,
    /// Refuse with this reply. A reply whose code is not 4xx or 5xx is sent as
    /// 451 4.3.0 instead: a refusal must never read as success to the client.
    Reject(Reply),
}

/// The shell's answer to `Event::Auth`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthResult {
    /// The credentials are good; `user` is the canonical name the session reports in
    /// `Envelope::authenticated`.
    Success { user: String },
    /// Wrong credentials: 535 5.7.8 (RFC 4954 6).
    Failed,
    /// The check could not be made (directory down, throttled): 454 4.7.0 (RFC 4954 6).
    TemporaryFailure,
}
