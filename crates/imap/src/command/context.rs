//! RFC 5267 CONTEXT=SEARCH: searches that keep the client up to date (`RETURN (UPDATE)`).
//!
//! A context keeps the UIDs its criteria matched when last told. Expunged members leave it
//! with a REMOVEFROM before the EXPUNGE (or VANISHED) that reports them, numbered as the client
//! still numbers them; after each sync that changed the folder (its HIGHESTMODSEQ or size), the
//! criteria run again and the difference goes out as REMOVEFROM and ADDTO, after the EXISTS
//! and FETCH responses it follows from (RFC 5267 4.3.2). Positions are 0 ("not given"), which
//! the RFC allows for SEARCH. At most `Config::search_updates_max` contexts per selected
//! folder; past it the search answers without updates and says `NO [NOUPDATE]` (4.3.1).

use imap_codec::imap_types::core::Vec1;
use imap_codec::imap_types::search::SearchKey;
use mail_model::MessageInfo;

use crate::session::{Backend, Session};

pub(crate) struct SearchUpdate {
    pub(crate) tag: String,
    pub(crate) uid: bool,
    pub(crate) criteria: Vec1<SearchKey<'static>>,
    /// Ascending.
    pub(crate) uids: Vec<u32>,
    /// The folder's (HIGHESTMODSEQ, messages) when the UIDs were last found.
    pub(crate) seen: (u64, usize),
}

/// A set in the order given, ranges only over ascending runs (RFC 5267 3.2 for ESORT's ALL;
/// an ascending input gives the usual compact set).
pub(crate) fn ordered_set(numbers: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < numbers.len() {
        let start = numbers[i];
        let mut end = start;
        while i + 1 < numbers.len() && numbers[i + 1] == end.wrapping_add(1) {
            end = numbers[i + 1];
            i += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}:{end}"));
        }
        i += 1;
    }
    out
}

/// RFC 5267 4.4: `PARTIAL (low:high set)`, the results at those positions (1-based) of
/// `numbers` in their order, `NIL` if there are none.
pub(crate) fn partial(numbers: &[u32], low: u32, high: u32) -> String {
    let from = (low as usize).saturating_sub(1).min(numbers.len());
    let to = (high as usize).min(numbers.len());
    let set = ordered_set(&numbers[from..to.max(from)]);
    let set = if set.is_empty() {
        "NIL".to_string()
    } else {
        set
    };
    format!(" PARTIAL ({low}:{high} {set})")
}

fn update_line(update: &SearchUpdate, removed: &[u32], added: &[u32]) -> String {
    let mut line = format!("* ESEARCH (TAG \"{}\")", update.tag);
    if update.uid {
        line.push_str(" UID");
    }
    if !removed.is_empty() {
        line.push_str(&format!(" REMOVEFROM (0 {})", ordered_set(removed)));
    }
    if !added.is_empty() {
        line.push_str(&format!(" ADDTO (0 {})", ordered_set(added)));
    }
    line.push_str("\r\n");
    line
}

/// Before expunges of `gone` (ascending UIDs) are reported on `messages` (the view as the
/// client still numbers it): each context loses them, with one REMOVEFROM.
pub(crate) fn before_expunge(
    updates: &mut [SearchUpdate],
    messages: &[MessageInfo],
    gone: &[u32],
    out: &mut Vec<u8>,
) {
    for update in updates {
        let leaving: Vec<u32> = gone
            .iter()
            .filter(|u| update.uids.binary_search(u).is_ok())
            .copied()
            .collect();
        if leaving.is_empty() {
            continue;
        }
        update.uids.retain(|u| leaving.binary_search(u).is_err());
        let removed: Vec<u32> = if update.uid {
            leaving
        } else {
            leaving
                .iter()
                .filter_map(|&u| messages.binary_search_by_key(&u, |m| m.uid).ok())
                .map(|i| i as u32 + 1)
                .collect()
        };
        out.extend_from_slice(update_line(update, &removed, &[]).as_bytes());
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_keep_their_order() {
        assert_eq!(ordered_set(&[1, 2, 3, 7, 9, 10]), "1:3,7,9:10");
        assert_eq!(ordered_set(&[5, 6, 2, 3, 1]), "5:6,2:3,1");
        assert_eq!(ordered_set(&[]), "");
        assert_eq!(partial(&[5, 6, 2, 3, 1], 2, 3), " PARTIAL (2:3 6,2)");
        assert_eq!(partial(&[5, 6], 3, 9), " PARTIAL (3:9 NIL)");
        assert_eq!(partial(&[5, 6], 1, 9), " PARTIAL (1:9 5:6)");
    }
}
