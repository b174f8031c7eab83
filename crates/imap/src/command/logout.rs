//! RFC 9051 6.1.3 LOGOUT.

use crate::session::Session;

pub(crate) fn run(s: &mut Session, tag: &str) {
    s.untagged("BYE Logging out");
    s.tagged(tag, "OK LOGOUT completed");
    s.close();
}
