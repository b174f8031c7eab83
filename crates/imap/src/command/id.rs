//! RFC 2971 ID.

use crate::backend::Backend;
use crate::session::Session;

/// `b`: the store, in a selected folder, for the updates the answer carries.
pub(crate) fn run(s: &mut Session, tag: &str, b: Option<&Backend<'_>>) {
    s.untagged(&format!(
        "ID (\"name\" \"mailstow\" \"version\" \"{}\")",
        env!("CARGO_PKG_VERSION")
    ));
    if let Some(b) = b {
        s.sync(b, true);
    }
    s.tagged(tag, "OK ID completed");
}
