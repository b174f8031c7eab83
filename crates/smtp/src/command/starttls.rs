//! STARTTLS (RFC 3207).

use crate::event::Event;
use crate::reply::Reply;
use crate::session::{Phase, Session};

impl Session {
    pub(crate) fn starttls(&mut self, text: &str) {
        // RFC 3207 4: "501 Syntax error (no parameters allowed)".
        if !text.trim().eq_ignore_ascii_case("STARTTLS") {
            return self.error(Reply::new(501, (5, 5, 4), "Syntax: STARTTLS"));
        }
        if self.peer.tls {
            return self.error(Reply::new(503, (5, 5, 1), "TLS already active"));
        }
        // RFC 3207 4: 454 when TLS is not available.
        if !self.config.tls_available {
            return self.reply(Reply::new(454, (4, 7, 0), "TLS not available"));
        }
        self.reply(Reply::new(220, (2, 0, 0), "Ready to start TLS"));
        self.event(Event::StartTls);
        // Input after the STARTTLS line is dropped by `advance` (CVE-2011-0411).
        self.set_phase(Phase::AwaitingTls);
    }
}
