//! RFC 9051 6.4.3 EXPUNGE and 6.4.9 UID EXPUNGE (RFC 4315 2.1).
//!
//! One store call, one journal record, whatever the number of messages: the store never
//! moves the mail behind them.

use imap_codec::imap_types::sequence::SequenceSet;
use mail_model::Flags;

use crate::backend::Backend;
use crate::session::Session;

pub(crate) fn run(s: &mut Session, tag: &str, set: Option<SequenceSet>, b: &Backend<'_>) {
    // See \Deleted set by other sessions too (the responses are sent now, before EXPUNGE's).
    s.sync(b, true);
    let (Some(user), Some(sel)) = (s.user.clone(), s.selected.as_ref()) else {
        return;
    };
    if sel.read_only {
        s.tagged(tag, "NO [READ-ONLY] Mailbox is read-only");
        return;
    }
    let candidates: Vec<usize> = match &set {
        Some(set) => match super::sequence::resolve(set, &sel.messages, true) {
            Ok(i) => i,
            Err(text) => {
                s.tagged(tag, &format!("BAD {text}"));
                return;
            }
        },
        None => (0..sel.messages.len()).collect(),
    };
    let uids: Vec<u32> = candidates
        .into_iter()
        .map(|i| &sel.messages[i])
        .filter(|m| m.flags.contains(Flags::DELETED))
        .map(|m| m.uid)
        .collect();
    if !uids.is_empty()
        && let Err(e) = b.store.expunge(&user, &sel.name, &uids)
    {
        super::no(s, tag, &e);
        return;
    }
    let verb = if set.is_some() {
        "UID EXPUNGE"
    } else {
        "EXPUNGE"
    };
    s.done(tag, &format!("OK {verb} completed"), b, true);
}
