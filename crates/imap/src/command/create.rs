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
    // Create missing superior names, so the hierarchy can be listed and selected.
    let parts: Vec<&str> = name.split('/').collect();
    let existing = b.store.list_folders(&user);
    for depth in 1..parts.len() {
        let parent = parts[..depth].join("/");
        if !existing.contains(&parent)
            && let Err(e) = b.store.create_folder(&user, &parent)
        {
            super::no(s, tag, &e);
            return;
        }
    }
    match b.store.create_folder(&user, name) {
        Ok(_) => s.done(tag, "OK CREATE completed", b, true),
        Err(e) => super::no(s, tag, &e),
    }
}
