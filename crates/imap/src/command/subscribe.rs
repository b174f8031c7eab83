//! RFC 9051 6.3.7 SUBSCRIBE and 6.3.8 UNSUBSCRIBE.

use crate::backend::Backend;
use crate::session::Session;

pub(crate) fn run(s: &mut Session, tag: &str, name: &str, on: bool, b: &Backend<'_>) {
    let Some(user) = s.user.clone() else {
        return;
    };
    let name = if name.eq_ignore_ascii_case("INBOX") {
        "INBOX"
    } else {
        name
    };
    match b.subscriptions.set(&user, name, on) {
        Ok(()) => {
            let verb = if on { "SUBSCRIBE" } else { "UNSUBSCRIBE" };
            s.done(tag, &format!("OK {verb} completed"), b, true)
        }
        Err(e) => {
            let e = crate::session::one_line(&e);
            s.tagged(tag, &format!("NO [UNAVAILABLE] {e}"))
        }
    }
}
