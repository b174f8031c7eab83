//! RFC 9051 6.3.4 CREATE.

use crate::session::{Backend, Session};

pub(crate) fn run(s: &mut Session, tag: &str, name: &str, b: &Backend<'_>) {
    let Some(user) = s.user.clone() else {
        return;
    };
    // RFC 9051 6.3.4: a trailing delimiter only says a child will be created under it.
    let name = name.strip_suffix('/').unwrap_or(name);
    if name.eq_ignore_ascii_case("INBOX") {
        s.tagged(tag, "NO [ALREADYEXISTS] INBOX always exists");
        return;
    }
    // RFC 9051 6.3.4: missing superior names are created too, so the hierarchy can be
    // listed and selected; all of them in one store commit, so a refused CREATE (too deep,
    // too many folders) leaves nothing behind.
    match b.store.create_folder_path(&user, name) {
        Ok(_) => s.done(tag, "OK CREATE completed", b, true),
        Err(e) => super::no(s, tag, &e),
    }
}
