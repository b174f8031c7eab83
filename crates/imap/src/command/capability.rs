//! RFC 9051 6.1.1 CAPABILITY.

use crate::backend::Backend;
use crate::session::Session;

/// `b`: the store, in a selected folder, for the updates the answer carries.
pub(crate) fn run(s: &mut Session, tag: &str, b: Option<&Backend<'_>>) {
    let caps = s.capabilities();
    s.untagged(&format!("CAPABILITY {caps}"));
    if let Some(b) = b {
        s.sync(b, true);
    }
    s.tagged(tag, "OK CAPABILITY completed");
}
