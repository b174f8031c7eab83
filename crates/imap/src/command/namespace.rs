//! RFC 2342 NAMESPACE (RFC 9051 6.3.10): one personal namespace, "/" as delimiter.

use crate::backend::Backend;
use crate::session::Session;

/// `b`: the store, in a selected folder, for the updates the answer carries.
pub(crate) fn run(s: &mut Session, tag: &str, b: Option<&Backend<'_>>) {
    s.untagged("NAMESPACE ((\"\" \"/\")) NIL NIL");
    if let Some(b) = b {
        s.sync(b, true);
    }
    s.tagged(tag, "OK NAMESPACE completed");
}
