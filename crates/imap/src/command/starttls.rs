//! RFC 9051 6.2.1 STARTTLS.

use crate::event::Event;
use crate::session::Session;

pub(crate) fn run(s: &mut Session, tag: &str) {
    if s.tls || !s.config.starttls {
        s.tagged(tag, "BAD TLS is not available here");
        return;
    }
    s.tagged(tag, "OK Begin TLS negotiation now");
    // Whatever the client pipelined after STARTTLS was sent in the clear: drop it.
    s.framer.discard_input();
    let out = std::mem::take(&mut s.out);
    s.events.push_back(Event::Reply(out));
    s.events.push_back(Event::StartTls);
}
