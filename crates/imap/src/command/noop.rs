//! RFC 9051 6.1.2 NOOP (and RFC 3501 6.4.1 CHECK, which is NOOP here: every change is
//! durable when acknowledged). The point of both is the updates they let the server send.

use crate::session::{Backend, Session};

pub(crate) fn run(s: &mut Session, tag: &str, b: &Backend<'_>) {
    s.done(tag, "OK NOOP completed", b, true);
}
