//! EHLO, HELO (RFC 5321 4.1.1.1) and LHLO (RFC 2033 4.1).

use crate::config::Mode;
use crate::event::Event;
use crate::reply::Reply;
use crate::session::{Greeting, Hello, Pending, Phase, Session};

impl Session {
    pub(crate) fn hello(&mut self, hello: Hello, name: &str) {
        match (self.config.mode, hello) {
            // RFC 2033 4.1: an LMTP server must not accept HELO or EHLO.
            (Mode::Lmtp, Hello::Helo | Hello::Ehlo) => {
                return self.error(Reply::new(500, (5, 5, 1), "Use LHLO in LMTP"));
            }
            (Mode::Mx | Mode::Submission, Hello::Lhlo) => {
                return self.error(Reply::new(500, (5, 5, 1), "Command unrecognized"));
            }
            _ => {}
        }
        // RFC 5321 4.1.4: a second EHLO/HELO resets the state like RSET.
        self.transaction = None;
        self.greeting = None;
        if self.config.decide_hello {
            self.set_phase(Phase::Pending(Pending::Hello(hello, name.to_string())));
            self.output.push_back(Event::Hello {
                name: name.to_string(),
            });
            return;
        }
        self.greeted(hello, name.to_string());
    }

    /// The greeting accepted: remembered, and answered. RFC 5321 4.1.4 says not to refuse
    /// a session because of the name given, so we check none (a filter the shell asks
    /// may).
    pub(crate) fn greeted(&mut self, hello: Hello, name: String) {
        self.greeting = Some(Greeting { hello, name });
        let text = match hello {
            Hello::Helo => self.config.hostname.clone(),
            Hello::Ehlo | Hello::Lhlo => self.capabilities().join("\n"),
        };
        self.reply(Reply::plain(250, text));
    }

    /// The EHLO/LHLO reply lines (RFC 5321 4.1.1.1): our name, then one extension per line.
    fn capabilities(&self) -> Vec<String> {
        let config = &self.config;
        let mut lines = vec![
            config.hostname.clone(),
            "PIPELINING".to_string(),                     // RFC 2920
            format!("SIZE {}", config.message_bytes_max), // RFC 1870
            "8BITMIME".to_string(),                       // RFC 6152
            "ENHANCEDSTATUSCODES".to_string(),            // RFC 2034
            "SMTPUTF8".to_string(),                       // RFC 6531
            "CHUNKING".to_string(),                       // RFC 3030
            "BINARYMIME".to_string(),                     // RFC 3030
        ];
        // DSN (RFC 3461) is not offered: its NOTIFY and RET parameters are parsed, but the
        // queue does not yet keep them, so bounces could not honour them.
        // RFC 3207 4: not after TLS is active.
        if config.tls_available && !self.peer.tls {
            lines.push("STARTTLS".to_string());
        }
        // RFC 4954; plaintext passwords only when allowed (RFC 4954 4, 14). Local delivery
        // has no users to authenticate.
        if config.mode != Mode::Lmtp && (self.peer.tls || config.auth_without_tls) {
            lines.push("AUTH PLAIN LOGIN".to_string());
        }
        if config.mode == Mode::Lmtp && config.cluster_routes {
            lines.push(crate::command::cluster::KEYWORD.to_string());
        }
        lines
    }
}
