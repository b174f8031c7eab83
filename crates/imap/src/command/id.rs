//! RFC 2971 ID.

use crate::session::{Backend, Session};

pub(crate) fn run(s: &mut Session, tag: &str, b: &Backend<'_>) {
    s.untagged(&format!(
        "ID (\"name\" \"mailstow\" \"version\" \"{}\")",
        env!("CARGO_PKG_VERSION")
    ));
    s.done(tag, "OK ID completed", b, true);
}
