//! RFC 9051 6.3.5 DELETE.

use crate::backend::Backend;
use crate::session::Session;

pub(crate) fn run(s: &mut Session, tag: &str, name: &str, b: &Backend<'_>) {
    let Some(user) = s.user.clone() else {
        return;
    };
    if name.eq_ignore_ascii_case("INBOX") {
        s.tagged(tag, "NO [CANNOT] INBOX cannot be deleted");
        return;
    }
    // RFC 9051 6.3.5: a name with inferiors is not deleted here (we have no \Noselect
    // placeholders to leave behind).
    let prefix = format!("{name}/");
    if b.store
        .list_folders(&user)
        .iter()
        .any(|f| f.starts_with(&prefix))
    {
        s.tagged(tag, "NO [INUSE] Mailbox has children; delete them first");
        return;
    }
    if s.selected.as_ref().is_some_and(|sel| sel.name == name) {
        s.selected = None;
        s.state = crate::session::State::Authenticated;
    }
    match b.store.delete_folder(&user, name) {
        Ok(()) => {
            let _ = b.special_uses.set(&user, name, &[]);
            s.done(tag, "OK DELETE completed", b, true)
        }
        Err(e) => super::no(s, tag, &e),
    }
}
