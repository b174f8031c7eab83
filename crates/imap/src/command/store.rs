//! RFC 9051 6.4.6 STORE (and UID STORE), with UNCHANGEDSINCE (RFC 7162 3.1.3).

use imap_codec::imap_types::command::StoreModifier;
use imap_codec::imap_types::flag::{Flag, StoreResponse, StoreType};
use imap_codec::imap_types::sequence::SequenceSet;
use mail_model::{FlagOp, Flags};

use crate::backend::Backend;
use crate::response::{flags_list_recent, uid_set};
use crate::session::Session;

/// Splits IMAP flags into system flags and keywords; `Err` names a flag that cannot be
/// stored (RFC 9051 2.3.2: \Recent is not settable, unknown \-flags are not flags).
pub(crate) fn split_flags(flags: &[Flag<'_>]) -> Result<(Flags, Vec<String>), String> {
    let mut system = Flags::EMPTY;
    let mut keywords = Vec::new();
    for f in flags {
        match f {
            Flag::Answered => system |= Flags::ANSWERED,
            Flag::Deleted => system |= Flags::DELETED,
            Flag::Draft => system |= Flags::DRAFT,
            Flag::Flagged => system |= Flags::FLAGGED,
            Flag::Seen => system |= Flags::SEEN,
            Flag::Keyword(k) => keywords.push(k.inner().to_string()),
            other => return Err(format!("Cannot store flag {other}")),
        }
    }
    Ok((system, keywords))
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    s: &mut Session,
    tag: &str,
    set: SequenceSet,
    kind: StoreType,
    response: StoreResponse,
    flags: Vec<Flag<'static>>,
    uid: bool,
    modifiers: Vec<StoreModifier>,
    b: &Backend<'_>,
) {
    let (Some(user), Some(sel)) = (s.user.clone(), s.selected.as_mut()) else {
        return;
    };
    if !modifiers.is_empty() {
        s.enabled
            .condstore_by_command(sel.highest_modseq, &mut s.out);
    }
    let condstore = s.enabled.condstore;
    if sel.read_only {
        s.tagged(tag, "NO [READ-ONLY] Mailbox is read-only");
        return;
    }
    let (system, keywords) = match split_flags(&flags) {
        Ok(v) => v,
        Err(text) => {
            s.tagged(tag, &format!("BAD {text}"));
            return;
        }
    };
    let indexes = match super::sequence::resolve(&set, &sel.messages, uid) {
        Ok(i) => i,
        Err(text) => {
            s.tagged(tag, &format!("BAD {text}"));
            return;
        }
    };
    let unchanged_since = modifiers
        .iter()
        .map(|StoreModifier::UnchangedSince(v)| *v)
        .min();
    let mut modified = Vec::new();
    let mut targets = Vec::with_capacity(indexes.len());
    for &i in &indexes {
        let m = &sel.messages[i];
        match unchanged_since {
            // RFC 7162 3.1.3: a message changed since the client looked is not touched.
            Some(v) if m.modseq > v => modified.push(m.uid),
            _ => targets.push(i),
        }
    }
    let op = match kind {
        StoreType::Add => FlagOp::Add,
        StoreType::Remove => FlagOp::Remove,
        StoreType::Replace => FlagOp::Replace,
    };
    let uids: Vec<u32> = targets.iter().map(|&i| sel.messages[i].uid).collect();
    let modseq = if uids.is_empty() {
        0
    } else {
        match b
            .store
            .set_flags(&user, &sel.name, &uids, op, system, &keywords)
        {
            Ok(m) => m,
            Err(e) => {
                super::no(s, tag, &e);
                return;
            }
        }
    };
    // RFC 3501 7.2.6: a new keyword is announced before the FETCH responses that use it.
    if op != FlagOp::Remove && !targets.is_empty() {
        sel.announce_keywords(&keywords, &mut s.out);
    }
    let mut lines = Vec::new();
    let recent: Vec<bool> = targets
        .iter()
        .map(|&i| sel.is_recent(sel.messages[i].uid))
        .collect();
    let messages = std::sync::Arc::make_mut(&mut sel.messages);
    for (n, &i) in targets.iter().enumerate() {
        let m = &mut messages[i];
        m.flags = match op {
            FlagOp::Add => m.flags | system,
            FlagOp::Remove => m.flags.difference(system),
            FlagOp::Replace => system,
        };
        match op {
            FlagOp::Add => {
                for k in &keywords {
                    if !m.keywords.contains(k) {
                        m.keywords.push(k.clone());
                    }
                }
            }
            FlagOp::Remove => m.keywords.retain(|k| !keywords.contains(k)),
            FlagOp::Replace => m.keywords = keywords.clone(),
        }
        m.modseq = modseq;
        // RFC 7162 3.2: with CONDSTORE the MODSEQ is sent even for .SILENT.
        if response == StoreResponse::Answer || condstore {
            let mut line = format!("* {} FETCH (", i + 1);
            if uid {
                line.push_str(&format!("UID {} ", m.uid));
            }
            if response == StoreResponse::Answer {
                line.push_str(&format!(
                    "FLAGS {}",
                    flags_list_recent(m.flags, &m.keywords, recent[n])
                ));
                if condstore {
                    line.push(' ');
                }
            }
            if condstore {
                line.push_str(&format!("MODSEQ ({modseq})"));
            }
            line.push_str(")\r\n");
            lines.push(line);
        }
    }
    for line in lines {
        s.out.extend_from_slice(line.as_bytes());
    }
    let verb = if uid { "UID STORE" } else { "STORE" };
    let text = if modified.is_empty() {
        format!("OK {verb} completed")
    } else {
        format!(
            "OK [MODIFIED {}] Conditional {verb} failed for some messages",
            uid_set(&modified)
        )
    };
    s.done(tag, &text, b, uid);
}
