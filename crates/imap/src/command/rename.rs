//! RFC 9051 6.3.6 RENAME.

use crate::backend::Backend;
use crate::session::Session;

pub(crate) fn run(s: &mut Session, tag: &str, from: &str, to: &str, b: &Backend<'_>) {
    let Some(user) = s.user.clone() else {
        return;
    };
    if from.eq_ignore_ascii_case("INBOX") {
        // RFC 9051 6.3.6 moves INBOX's messages; we keep it simple and refuse.
        s.tagged(tag, "NO [CANNOT] Renaming INBOX is not supported");
        return;
    }
    match b.store.rename_folder(&user, from, to) {
        Ok(()) => {
            // RFC 6154 3: a folder's special use goes with it.
            let _ = b.special_uses.renamed(&user, from, to);
            if let Some(sel) = s.selected.as_mut()
                && sel.name == from
            {
                sel.name = to.to_string();
            }
            s.done(tag, "OK RENAME completed", b, true)
        }
        Err(e) => super::no(s, tag, &e),
    }
}
