//! RFC 2342 NAMESPACE (RFC 9051 6.3.10): one personal namespace, "/" as delimiter.

use crate::session::{Backend, Session};

pub(crate) fn run(s: &mut Session, tag: &str, b: &Backend<'_>) {
    s.untagged("NAMESPACE ((\"\" \"/\")) NIL NIL");
    s.done(tag, "OK NAMESPACE completed", b, true);
}
