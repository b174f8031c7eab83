//! RFC 2177 IDLE (RFC 9051 6.3.13): updates are pushed as they happen until DONE.

use crate::backend::Backend;
use crate::session::{Session, Waiting};

pub(crate) fn run(s: &mut Session, tag: &str, b: &Backend<'_>) {
    s.out.extend_from_slice(b"+ idling\r\n");
    s.idles = s.idles.wrapping_add(1);
    s.sync(b, s.state == crate::session::State::Selected);
    s.waiting = Some(Waiting::Idle {
        tag: tag.to_string(),
    });
}
