//! The selected folder as this session sees it: message sequence numbers are positions in
//! `messages` (RFC 9051 2.3.1.2), which change only when this session reports an EXPUNGE.

use std::collections::BTreeSet;
use std::sync::Arc;

use imap_codec::imap_types::core::Vec1;
use imap_codec::imap_types::search::SearchKey;
use mail_model::{MessageInfo, StoreError};

use crate::response::ordered_set;

pub(crate) struct Selected {
    pub(crate) name: String,
    pub(crate) read_only: bool,
    pub(crate) uidvalidity: u32,
    /// Messages with a UID below this are in `messages` unless reported expunged.
    pub(crate) uidnext: u32,
    pub(crate) highest_modseq: u64,
    /// Shared with other sessions (and the view cache) until this session changes it.
    pub(crate) messages: Arc<Vec<MessageInfo>>,
    /// Keywords any message here carries (the FLAGS response, RFC 9051 7.3.5).
    pub(crate) keywords: BTreeSet<String>,
    /// RFC 3501 2.3.2: UID ranges `[from, to)` recent to this session (claimed from the store
    /// by a read-write session, looked at by a read-only one). `None`: an IMAP4rev2 session,
    /// which has no `\Recent`.
    pub(crate) recent: Option<Vec<(u32, u32)>>,
    /// The RECENT count the client was last told.
    pub(crate) recent_told: usize,
    /// RFC 5182: the UIDs the last `SEARCH RETURN (SAVE)` kept, `$`; empty until one ran.
    pub(crate) saved: Vec<u32>,
    /// RFC 5267 4.3: the searches this session is kept up to date on.
    pub(crate) updates: Vec<SearchUpdate>,
}

impl Selected {
    pub(crate) fn open(
        store: &dyn mail_model::Mailstore,
        user: &str,
        name: &str,
        read_only: bool,
        rev1: bool,
    ) -> Result<Selected, StoreError> {
        let (status, messages) = store.shared_view(user, name)?;
        let mut keywords = BTreeSet::new();
        for m in messages.iter() {
            keywords.extend(m.keywords.iter().cloned());
        }
        let mut selected = Selected {
            name: name.to_string(),
            read_only,
            uidvalidity: status.uidvalidity,
            uidnext: status.uidnext,
            highest_modseq: status.highest_modseq,
            messages,
            keywords,
            recent: rev1.then(Vec::new),
            recent_told: 0,
            saved: Vec::new(),
            updates: Vec::new(),
        };
        selected.take_recent(store, user)?;
        selected.recent_told = selected.recent_count();
        Ok(selected)
    }

    /// RFC 3501 2.3.2: takes the messages no session has been told of (a read-write
    /// session claims them; a read-only one only sees them as recent).
    fn take_recent(
        &mut self,
        store: &dyn mail_model::Mailstore,
        user: &str,
    ) -> Result<(), StoreError> {
        let Some(ranges) = self.recent.as_mut() else {
            return Ok(());
        };
        let (first, uidnext) = store.recent(user, &self.name, !self.read_only)?;
        if first < uidnext {
            ranges.push((first, uidnext));
        }
        Ok(())
    }

    /// Whether the message is `\Recent` to this session.
    pub(crate) fn is_recent(&self, uid: u32) -> bool {
        self.recent
            .as_ref()
            .is_some_and(|r| r.iter().any(|&(from, to)| (from..to).contains(&uid)))
    }

    /// How many messages of the view are recent (the RECENT response, RFC 3501 7.3.2).
    pub(crate) fn recent_count(&self) -> usize {
        let Some(ranges) = &self.recent else {
            return 0;
        };
        ranges
            .iter()
            .map(|&(from, to)| {
                let lo = self.messages.partition_point(|m| m.uid < from);
                let hi = self.messages.partition_point(|m| m.uid < to);
                hi - lo
            })
            .sum()
    }

    /// A message's FETCH FLAGS list, `\Recent` included when it is recent here.
    pub(crate) fn flags_of(&self, m: &MessageInfo) -> String {
        crate::response::flags_list_recent(m.flags, &m.keywords, self.is_recent(m.uid))
    }

    /// Adds `keywords` to the folder's; when any is new, writes the untagged FLAGS and (for a
    /// writable folder) PERMANENTFLAGS responses naming them all (RFC 3501 7.2.6, RFC 9051
    /// 7.3.5 and 7.1): the caller writes them before any FETCH response that uses one.
    pub(crate) fn announce_keywords<'a>(
        &mut self,
        keywords: impl IntoIterator<Item = &'a String>,
        out: &mut Vec<u8>,
    ) {
        let mut new = false;
        for k in keywords {
            if !self.keywords.contains(k) {
                self.keywords.insert(k.clone());
                new = true;
            }
        }
        if !new {
            return;
        }
        let flags = crate::response::folder_flags(&self.keywords);
        out.extend_from_slice(format!("* FLAGS {flags}\r\n").as_bytes());
        if !self.read_only {
            out.extend_from_slice(
                format!(
                    "* OK [PERMANENTFLAGS {}] Flags permitted\r\n",
                    crate::response::permanent_flags(&self.keywords)
                )
                .as_bytes(),
            );
        }
    }

    /// The position of a UID, if this session still shows it.
    pub(crate) fn index_of(&self, uid: u32) -> Option<usize> {
        self.messages.binary_search_by_key(&uid, |m| m.uid).ok()
    }

    /// Reads what changed since the view was last synced and writes the untagged
    /// responses. With `expunge` false (during FETCH, STORE, SEARCH) removals wait for a
    /// later sync; they are found again then because the counts will not add up.
    pub(crate) fn sync(
        &mut self,
        store: &dyn mail_model::Mailstore,
        user: &str,
        expunge: bool,
        (condstore, qresync): (bool, bool),
        out: &mut Vec<u8>,
    ) -> Result<(), StoreError> {
        let changes = store.changes_since(user, &self.name, self.highest_modseq)?;
        let status = changes.status;
        if status.uidvalidity != self.uidvalidity {
            return Err(StoreError::NoSuchFolder {
                user: user.to_string(),
                folder: self.name.clone(),
            });
        }
        let new_count = changes
            .changed
            .iter()
            .filter(|m| m.uid >= self.uidnext)
            .count();
        let present_old = (status.messages as usize).saturating_sub(new_count);
        if expunge && present_old != self.messages.len() {
            let uids = store.uids(user, &self.name)?;
            if !self.updates.is_empty() {
                // RFC 5267 4.3.2: REMOVEFROM before the EXPUNGE that reports the message.
                let gone: Vec<u32> = self
                    .messages
                    .iter()
                    .map(|m| m.uid)
                    .filter(|u| uids.binary_search(u).is_err())
                    .collect();
                before_expunge(&mut self.updates, &self.messages, &gone, out);
            }
            let mut kept = Vec::with_capacity(self.messages.len());
            let mut vanished: Vec<(u32, u32)> = Vec::new();
            for m in Arc::make_mut(&mut self.messages).drain(..) {
                if uids.binary_search(&m.uid).is_ok() {
                    kept.push(m);
                } else if qresync {
                    // RFC 7162 3.2.10: with QRESYNC, one VANISHED for them all.
                    match vanished.last_mut() {
                        Some(last) if last.1 + 1 == m.uid => last.1 = m.uid,
                        _ => vanished.push((m.uid, m.uid)),
                    }
                } else {
                    // RFC 9051 7.5.1: each EXPUNGE renumbers the ones after it.
                    let seq = kept.len() + 1;
                    out.extend_from_slice(format!("* {seq} EXPUNGE\r\n").as_bytes());
                }
            }
            if !vanished.is_empty() {
                out.extend_from_slice(
                    format!("* VANISHED {}\r\n", crate::response::ranges_text(&vanished))
                        .as_bytes(),
                );
            }
            self.messages = Arc::new(kept);
        }
        // RFC 3501 7.2.6, RFC 9051 7.3.5: a keyword is announced in FLAGS before any FETCH
        // response uses it.
        self.announce_keywords(changes.changed.iter().flat_map(|m| &m.keywords), out);
        let mut added = 0usize;
        for m in changes.changed {
            if m.uid >= self.uidnext {
                if self.messages.last().is_none_or(|l| l.uid < m.uid) {
                    Arc::make_mut(&mut self.messages).push(m);
                    added += 1;
                }
                continue;
            }
            let Some(i) = self.index_of(m.uid) else {
                continue;
            };
            let old = &self.messages[i];
            if old.flags == m.flags
                && old.keywords == m.keywords
                && !(condstore && old.modseq != m.modseq)
            {
                if old.modseq != m.modseq {
                    Arc::make_mut(&mut self.messages)[i].modseq = m.modseq;
                }
                continue;
            }
            let mut line = format!(
                "* {} FETCH (UID {} FLAGS {}",
                i + 1,
                m.uid,
                self.flags_of(&m)
            );
            if condstore {
                line.push_str(&format!(" MODSEQ ({})", m.modseq));
            }
            line.push_str(")\r\n");
            out.extend_from_slice(line.as_bytes());
            Arc::make_mut(&mut self.messages)[i] = m;
        }
        if added > 0 {
            out.extend_from_slice(format!("* {} EXISTS\r\n", self.messages.len()).as_bytes());
            // RFC 3501 7.3.2: new mail is recent to the first session told of it; the count
            // follows EXISTS when it changed.
            if self.recent.is_some() {
                self.take_recent(store, user)?;
                let count = self.recent_count();
                if count != self.recent_told {
                    self.recent_told = count;
                    out.extend_from_slice(format!("* {count} RECENT\r\n").as_bytes());
                }
            }
        }
        self.uidnext = self.uidnext.max(status.uidnext);
        self.highest_modseq = self.highest_modseq.max(status.highest_modseq);
        Ok(())
    }
}

/// RFC 5267 4.3: a search the client is kept up to date on (`RETURN (UPDATE)`, see
/// `command/context.rs`).
pub(crate) struct SearchUpdate {
    pub(crate) tag: String,
    pub(crate) uid: bool,
    pub(crate) criteria: Vec1<SearchKey<'static>>,
    /// Ascending.
    pub(crate) uids: Vec<u32>,
    /// The folder's (HIGHESTMODSEQ, messages) when the UIDs were last found.
    pub(crate) seen: (u64, usize),
}

/// `* ESEARCH (TAG ...) REMOVEFROM ... ADDTO ...` for one context (RFC 5267 4.3).
pub(crate) fn update_line(update: &SearchUpdate, removed: &[u32], added: &[u32]) -> String {
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
