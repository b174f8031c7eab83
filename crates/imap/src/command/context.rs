//! RFC 5267 CONTEXT=SEARCH: searches that keep the client up to date (`RETURN (UPDATE)`).
//!
//! A context keeps the UIDs its criteria matched when last told. Expunged members leave it
//! with a REMOVEFROM before the EXPUNGE (or VANISHED) that reports them, numbered as the client
//! still numbers them; after each sync that changed the folder (its HIGHESTMODSEQ or size), the
//! criteria run again and the difference goes out as REMOVEFROM and ADDTO, after the EXISTS
//! and FETCH responses it follows from (RFC 5267 4.3.2). Positions are 0 ("not given"), which
//! the RFC allows for SEARCH. At most `Config::search_updates_max` contexts per selected
//! folder; past it the search answers without updates and says `NO [NOUPDATE]` (4.3.1).

use crate::backend::Backend;
use crate::selected::update_line;
use crate::session::Session;

/// After a sync: every context whose folder changed is searched again, and told the
/// difference.
pub(crate) fn after_sync(s: &mut Session, b: &Backend<'_>) {
    let (Some(user), Some(sel)) = (s.user.clone(), s.selected.as_mut()) else {
        return;
    };
    if sel.updates.is_empty() {
        return;
    }
    let now = (sel.highest_modseq, sel.messages.len());
    let mut updates = std::mem::take(&mut sel.updates);
    for update in &mut updates {
        if update.seen == now {
            continue;
        }
        let Some(sel) = s.selected.as_ref() else {
            return;
        };
        let Ok((hits, _)) = super::search::hits(sel, &user, &update.criteria, b) else {
            continue;
        };
        update.seen = now;
        let found: Vec<u32> = hits.iter().map(|&i| sel.messages[i].uid).collect();
        let removed: Vec<u32> = update
            .uids
            .iter()
            .filter(|u| found.binary_search(u).is_err())
            .copied()
            .collect();
        let added: Vec<u32> = found
            .iter()
            .filter(|u| update.uids.binary_search(u).is_err())
            .copied()
            .collect();
        update.uids = found;
        if removed.is_empty() && added.is_empty() {
            continue;
        }
        let numbers = |uids: &[u32]| -> Vec<u32> {
            if update.uid {
                uids.to_vec()
            } else {
                uids.iter()
                    .filter_map(|&u| sel.index_of(u))
                    .map(|i| i as u32 + 1)
                    .collect()
            }
        };
        let line = update_line(update, &numbers(&removed), &numbers(&added));
        s.out.extend_from_slice(line.as_bytes());
    }
    if let Some(sel) = s.selected.as_mut() {
        sel.updates = updates;
    }
}

/// `CANCELUPDATE` (RFC 5267 4.3.3).
pub(crate) fn cancel(s: &mut Session, tag: &str, tags: &[String]) {
    let Some(sel) = s.selected.as_mut() else {
        return;
    };
    let unknown = tags
        .iter()
        .any(|t| !sel.updates.iter().any(|u| &u.tag == t));
    if unknown {
        s.tagged(tag, "NO Unknown tag");
        return;
    }
    sel.updates.retain(|u| !tags.contains(&u.tag));
    s.tagged(tag, "OK Updates cancelled");
}
