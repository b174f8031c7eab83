//! RFC 9051 6.1.1 CAPABILITY.

use crate::session::{Backend, Session};

pub(crate) fn run(s: &mut Session, tag: &str, b: &Backend<'_>) {
    let caps = s.capabilities();
    s.untagged(&format!("CAPABILITY {caps}"));
    s.done(tag, "OK CAPABILITY completed", b, true);
}
