//! RFC 9051 6.1.2 NOOP (and RFC 3501 6.4.1 CHECK, which is NOOP here: every change is
//! durable when acknowledged). The point of both is the updates they let the server send.

use crate::backend::Backend;
use crate::session::Session;

/// `b`: the store, in a selected folder, for the updates the answer carries.
pub(crate) fn run(s: &mut Session, tag: &str, b: Option<&Backend<'_>>) {
    if let Some(b) = b {
        s.sync(b, true);
    }
    s.tagged(tag, "OK NOOP completed");
}
