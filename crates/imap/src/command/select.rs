//! RFC 9051 6.3.2 SELECT and 6.3.3 EXAMINE, with CONDSTORE (RFC 7162 3.1.8).

use imap_codec::imap_types::command::SelectParameter;
use mail_model::Flags;

use crate::backend::Backend;
use crate::response::folder_flags;
use crate::selected::Selected;
use crate::session::{Session, State};

pub(crate) fn run(
    s: &mut Session,
    tag: &str,
    name: &str,
    read_only: bool,
    parameters: &[SelectParameter],
    b: &Backend<'_>,
) {
    let Some(user) = s.user.clone() else {
        return;
    };
    // RFC 7162 3.2.5: (uidvalidity modseq [known-uids]); the seq-match data only helps a
    // server that must guess, which this one never does.
    let qresync = parameters.iter().find_map(|p| match p {
        SelectParameter::QResync {
            uid_validity,
            mod_sequence_value,
            known_uids,
            ..
        } => Some((
            uid_validity.get(),
            mod_sequence_value.get(),
            known_uids.clone(),
        )),
        _ => None,
    });
    if qresync.is_some() && !s.enabled.qresync {
        // RFC 7162 3.2.5: only after ENABLE QRESYNC.
        s.tagged(tag, "BAD QRESYNC is not enabled");
        return;
    }
    if parameters.contains(&SelectParameter::CondStore) {
        s.enabled.condstore = true;
    }
    // RFC 9051 6.3.2: selecting closes the current mailbox first, without expunging.
    if s.selected.take().is_some() {
        s.state = State::Authenticated;
        s.untagged("OK [CLOSED] Previous mailbox closed");
    }
    let sel = match Selected::open(b.store, &user, name, read_only, !s.enabled.rev2) {
        Ok(sel) => sel,
        Err(e) => {
            super::no(s, tag, &e);
            return;
        }
    };
    s.untagged(&format!("FLAGS {}", folder_flags(&sel.keywords)));
    s.untagged(&format!("{} EXISTS", sel.messages.len()));
    if !s.enabled.rev2 {
        // RFC 3501 7.3.2 (\Recent is gone in IMAP4rev2).
        s.untagged(&format!("{} RECENT", sel.recent_count()));
        if let Some(i) = sel
            .messages
            .iter()
            .position(|m| !m.flags.contains(Flags::SEEN))
        {
            s.untagged(&format!("OK [UNSEEN {}] First unseen", i + 1));
        }
    }
    if read_only {
        s.untagged("OK [PERMANENTFLAGS ()] Read-only mailbox");
    } else {
        s.untagged(&format!(
            "OK [PERMANENTFLAGS {}] Flags permitted",
            crate::response::permanent_flags(&sel.keywords)
        ));
    }
    s.untagged(&format!("OK [UIDVALIDITY {}] UIDs valid", sel.uidvalidity));
    s.untagged(&format!("OK [UIDNEXT {}] Predicted next UID", sel.uidnext));
    s.untagged(&format!(
        "OK [HIGHESTMODSEQ {}] Highest",
        sel.highest_modseq
    ));
    // RFC 7162 3.2.5.1: with the client's UIDVALIDITY, what it must forget (VANISHED
    // (EARLIER)) and what changed since its MODSEQ (FETCH with UID, FLAGS and MODSEQ).
    if let Some((validity, since, known)) = qresync
        && validity == sel.uidvalidity
    {
        use super::sequence::{missing_uids, uid_ranges};
        use crate::response::ranges_text;
        let largest = sel.uidnext.saturating_sub(1);
        let ranges = match &known {
            Some(set) => uid_ranges(set, largest),
            None if largest >= 1 => vec![(1, largest)],
            None => Vec::new(),
        };
        let vanished = missing_uids(&ranges, &sel.messages);
        if !vanished.is_empty() {
            s.untagged(&format!("VANISHED (EARLIER) {}", ranges_text(&vanished)));
        }
        let within =
            |uid: u32| known.is_none() || ranges.iter().any(|&(a, b)| (a..=b).contains(&uid));
        for (i, m) in sel.messages.iter().enumerate() {
            if m.modseq > since && within(m.uid) {
                s.untagged(&format!(
                    "{} FETCH (UID {} FLAGS {} MODSEQ ({}))",
                    i + 1,
                    m.uid,
                    sel.flags_of(m),
                    m.modseq
                ));
            }
        }
    }
    let code = if read_only { "READ-ONLY" } else { "READ-WRITE" };
    let verb = if read_only { "EXAMINE" } else { "SELECT" };
    s.selected = Some(sel);
    s.state = State::Selected;
    s.tagged(tag, &format!("OK [{code}] {verb} completed"));
}
