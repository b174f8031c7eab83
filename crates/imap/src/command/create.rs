//! RFC 9051 6.3.4 CREATE, with RFC 6154 3's USE parameter (CREATE-SPECIAL-USE).

use crate::backend::Backend;
use crate::session::Session;

pub(crate) fn run(s: &mut Session, tag: &str, name: &str, uses: &[String], b: &Backend<'_>) {
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
    // RFC 6154 3: an attribute we cannot give (unknown, or \All and \Flagged, which name
    // virtual folders) refuses the CREATE with USEATTR and creates nothing.
    let mut attributes = Vec::new();
    for attr in uses {
        match super::special_use::settable(attr) {
            Some(a) if !attributes.contains(&a) => attributes.push(a),
            Some(_) => {}
            None => {
                s.tagged(
                    tag,
                    &format!("NO [USEATTR] {attr} cannot be given to a folder here"),
                );
                return;
            }
        }
    }
    if let Err(e) = b.store.create_folder_path(&user, name) {
        super::no(s, tag, &e);
        return;
    }
    if !attributes.is_empty() {
        let attributes: Vec<String> = attributes.iter().map(|a| a.to_string()).collect();
        if let Err(e) = b.special_uses.set(&user, name, &attributes) {
            let _ = b.store.delete_folder(&user, name);
            let e = crate::session::one_line(&e);
            s.tagged(tag, &format!("NO [USEATTR] {e}"));
            return;
        }
    }
    s.done(tag, "OK CREATE completed", b, true);
}
