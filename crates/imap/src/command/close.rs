//! RFC 9051 6.4.1 CLOSE and 6.4.2 UNSELECT.

use crate::backend::Backend;
use crate::session::{Session, State};

/// CLOSE expunges \Deleted messages silently (no EXPUNGE responses), unless read-only.
pub(crate) fn close(s: &mut Session, tag: &str, b: &Backend<'_>) {
    if let (Some(user), Some(sel)) = (s.user.clone(), s.selected.take())
        && !sel.read_only
    {
        let deleted: Vec<u32> = sel
            .messages
            .iter()
            .filter(|m| m.flags.contains(mail_model::Flags::DELETED))
            .map(|m| m.uid)
            .collect();
        if !deleted.is_empty()
            && let Err(e) = b.store.expunge(&user, &sel.name, &deleted)
        {
            s.state = State::Authenticated;
            super::no(s, tag, &e);
            return;
        }
    }
    s.selected = None;
    s.state = State::Authenticated;
    s.tagged(tag, "OK CLOSE completed");
}

pub(crate) fn unselect(s: &mut Session, tag: &str) {
    s.selected = None;
    s.state = State::Authenticated;
    s.tagged(tag, "OK UNSELECT completed");
}
