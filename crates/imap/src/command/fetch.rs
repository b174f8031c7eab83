//! RFC 9051 6.4.5 FETCH (and UID FETCH), with BINARY (RFC 3516) and CONDSTORE (RFC 7162
//! 3.1.4 MODSEQ, 3.1.4.1 CHANGEDSINCE).
//!
//! Index items (UID, FLAGS, INTERNALDATE, RFC822.SIZE, MODSEQ) come from the session's view
//! and read nothing. ENVELOPE and BODYSTRUCTURE come from the structure cached at arrival
//! (the store's summary). Sections read the message once, and only the part they need.

use imap_codec::imap_types::command::FetchModifier;
use imap_codec::imap_types::fetch::MacroOrMessageDataItemNames;
use imap_codec::imap_types::sequence::SequenceSet;
use mail_model::{FlagOp, Flags, MessageInfo};
use mime_structure::{Structure, decode_binary, filter_header_fields};

use crate::backend::Backend;
use crate::fetch_plan::{Item, Plan, Spec};
use crate::response::{flags_list_recent, internal_date};
use crate::session::{FetchWork, Session, StorageStep};

#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    s: &mut Session,
    tag: &str,
    set: SequenceSet,
    names: MacroOrMessageDataItemNames<'static>,
    uid: bool,
    modifiers: Vec<FetchModifier>,
    b: &Backend<'_>,
) {
    let (Some(user), Some(sel)) = (s.user.clone(), s.selected.as_mut()) else {
        return;
    };
    let mut plan = Plan::new(names, uid, s.enabled.condstore);
    let mut vanished = false;
    for m in &modifiers {
        match m {
            FetchModifier::ChangedSince(v) => {
                plan.changed_since = Some(v.get());
                plan.modseq = true;
            }
            // RFC 7162 3.2.6: only in a UID FETCH with CHANGEDSINCE, QRESYNC enabled.
            FetchModifier::Vanished if !s.enabled.qresync => {
                s.tagged(tag, "BAD VANISHED needs QRESYNC enabled");
                return;
            }
            FetchModifier::Vanished if !uid => {
                s.tagged(tag, "BAD VANISHED needs UID FETCH");
                return;
            }
            FetchModifier::Vanished => vanished = true,
        }
    }
    if vanished && plan.changed_since.is_none() {
        s.tagged(tag, "BAD VANISHED needs CHANGEDSINCE");
        return;
    }
    if vanished {
        // RFC 7162 3.2.6: the set's UIDs that are gone, before the FETCH responses.
        use super::sequence::{missing_uids, uid_ranges};
        use crate::response::ranges_text;
        let ranges = uid_ranges(&set, sel.uidnext.saturating_sub(1));
        let gone = missing_uids(&ranges, &sel.messages);
        if !gone.is_empty() {
            s.out.extend_from_slice(
                format!("* VANISHED (EARLIER) {}\r\n", ranges_text(&gone)).as_bytes(),
            );
        }
    }
    if plan.modseq {
        // RFC 7162 3.1: a MODSEQ fetch enables CONDSTORE for the session.
        s.enabled
            .condstore_by_command(sel.highest_modseq, &mut s.out);
    }
    let mut indexes = match super::sequence::resolve(&set, &sel.messages, uid) {
        Ok(i) => i,
        Err(text) => {
            s.tagged(tag, &format!("BAD {text}"));
            return;
        }
    };
    if let Some(since) = plan.changed_since {
        indexes.retain(|&i| sel.messages[i].modseq > since);
    }
    if plan.sets_seen && !sel.read_only {
        let unseen: Vec<u32> = indexes
            .iter()
            .map(|&i| &sel.messages[i])
            .filter(|m| !m.flags.contains(Flags::SEEN))
            .map(|m| m.uid)
            .collect();
        if !unseen.is_empty() {
            match b
                .store
                .set_flags(&user, &sel.name, &unseen, FlagOp::Add, Flags::SEEN, &[])
            {
                Ok(modseq) => {
                    let messages = std::sync::Arc::make_mut(&mut sel.messages);
                    for &i in &indexes {
                        let m = &mut messages[i];
                        if unseen.binary_search(&m.uid).is_ok() {
                            m.flags |= Flags::SEEN;
                            m.modseq = modseq;
                        }
                    }
                }
                Err(e) => {
                    super::no(s, tag, &e);
                    return;
                }
            }
        }
    }
    s.fetch_continue(
        FetchWork {
            tag: tag.to_string(),
            plan,
            indexes,
            next: 0,
            uid,
        },
        b,
    );
}

impl Session {
    /// Renders messages until the output chunk fills, then parks the rest in `work`.
    pub(crate) fn fetch_continue(&mut self, mut work: FetchWork, b: &Backend<'_>) {
        let Some(user) = self.user.clone() else {
            return;
        };
        while work.next < work.indexes.len() {
            if self.out.len() >= self.config.output_chunk_bytes {
                self.storage = Some(StorageStep::Fetch(work));
                return;
            }
            let i = work.indexes[work.next];
            work.next += 1;
            let Some(sel) = self.selected.as_ref() else {
                return;
            };
            let Some(m) = sel.messages.get(i) else {
                continue;
            };
            let recent = sel.is_recent(m.uid);
            match render(
                b,
                &user,
                &sel.name,
                (i + 1, recent),
                m,
                &work.plan,
                &mut self.out,
            ) {
                Ok(()) => {}
                // Expunged by another session since our view was synced: nothing to show
                // (RFC 9051 7.5.1 lets the server omit it).
                Err(Failure::Gone) => {}
                Err(Failure::UnknownCte) => {
                    self.tagged(
                        &work.tag,
                        "NO [UNKNOWN-CTE] Unknown Content-Transfer-Encoding",
                    );
                    return;
                }
                Err(Failure::Store(e)) => {
                    super::no(self, &work.tag, &e);
                    return;
                }
            }
        }
        let verb = if work.uid { "UID FETCH" } else { "FETCH" };
        // RFC 9051 7.5.1: no EXPUNGE during a FETCH by sequence number.
        self.done(&work.tag, &format!("OK {verb} completed"), b, work.uid);
    }
}

pub(crate) enum Failure {
    Gone,
    UnknownCte,
    Store(mail_model::StoreError),
}

impl From<mail_model::StoreError> for Failure {
    fn from(e: mail_model::StoreError) -> Failure {
        if e.is_not_found() {
            Failure::Gone
        } else {
            Failure::Store(e)
        }
    }
}

/// The message's sequence number, and whether it is `\Recent` to this session.
fn render(
    b: &Backend<'_>,
    user: &str,
    folder: &str,
    (seq, recent): (usize, bool),
    m: &MessageInfo,
    plan: &Plan,
    out: &mut Vec<u8>,
) -> Result<(), Failure> {
    // One read when both are needed: the summary sits in front of the content.
    let (summary, content) = match (plan.needs_structure, plan.needs_content) {
        (true, true) => {
            let (s, c) = b.store.read_with_summary(user, folder, m.uid)?;
            (Some(s), Some(c))
        }
        (true, false) => (Some(b.store.summary(user, folder, m.uid)?), None),
        (false, true) => (None, Some(b.store.read(user, folder, m.uid)?)),
        (false, false) => (None, None),
    };
    let structure = match summary {
        Some(summary) => Some(match Structure::from_bytes(&summary.structure) {
            Ok(s) => s,
            // Stored before structures were cached, or damaged: parse once now.
            Err(_) => match &content {
                Some(c) => Structure::parse(c),
                None => Structure::parse(&b.store.read(user, folder, m.uid)?),
            },
        }),
        None => None,
    };
    let mut line = format!("* {seq} FETCH (").into_bytes();
    let mut first = true;
    let mut sep = |line: &mut Vec<u8>| {
        if !first {
            line.push(b' ');
        }
        first = false;
    };
    for item in &plan.items {
        sep(&mut line);
        match item {
            Item::Uid => line.extend_from_slice(format!("UID {}", m.uid).as_bytes()),
            Item::Flags => line.extend_from_slice(
                format!("FLAGS {}", flags_list_recent(m.flags, &m.keywords, recent)).as_bytes(),
            ),
            Item::InternalDate => line.extend_from_slice(
                format!("INTERNALDATE {}", internal_date(m.internal_date)).as_bytes(),
            ),
            Item::Size => line.extend_from_slice(format!("RFC822.SIZE {}", m.size).as_bytes()),
            Item::Envelope => {
                line.extend_from_slice(b"ENVELOPE ");
                line.extend_from_slice(structure.as_ref().map_or(&[][..], |s| s.envelope()));
            }
            Item::BodyStructure => {
                line.extend_from_slice(b"BODYSTRUCTURE ");
                line.extend_from_slice(structure.as_ref().map_or(&[][..], |s| s.body_structure()));
            }
            Item::Body => {
                line.extend_from_slice(b"BODY ");
                line.extend_from_slice(structure.as_ref().map_or(&[][..], |s| s.body()));
            }
            Item::Section {
                label,
                spec,
                partial,
                binary,
            } => {
                let content = content.as_deref().unwrap_or_default();
                let data = section(content, structure.as_ref(), spec, *binary)?;
                let data = match partial {
                    // RFC 9051 6.4.5: a partial beyond the end is empty.
                    Some((offset, len)) => {
                        let start = (*offset as usize).min(data.len());
                        let end = start.saturating_add(*len as usize).min(data.len());
                        data[start..end].to_vec()
                    }
                    None => data,
                };
                line.extend_from_slice(label.as_bytes());
                line.push(b' ');
                let data = if *binary {
                    // RFC 3516 4.3: binary data with NUL goes as literal8.
                    if data.contains(&0) {
                        line.push(b'~');
                    }
                    data
                } else if data.contains(&0) {
                    // RFC 9051 4.3: a literal carries no NUL; a message stored with one (a
                    // literal8 APPEND, RFC 3516) shows it as 0x80 outside BINARY, as Dovecot
                    // does, keeping every offset and length.
                    data.into_iter()
                        .map(|b| if b == 0 { 0x80 } else { b })
                        .collect()
                } else {
                    data
                };
                line.extend_from_slice(format!("{{{}}}\r\n", data.len()).as_bytes());
                line.extend_from_slice(&data);
            }
            Item::BinarySize { label, path } => {
                let content = content.as_deref().unwrap_or_default();
                let spec = if path.is_empty() {
                    Spec::Full
                } else {
                    Spec::Part(path.clone())
                };
                let data = section(content, structure.as_ref(), &spec, true)?;
                line.extend_from_slice(format!("{label} {}", data.len()).as_bytes());
            }
        }
    }
    if plan.modseq {
        sep(&mut line);
        line.extend_from_slice(format!("MODSEQ ({})", m.modseq).as_bytes());
    }
    line.extend_from_slice(b")\r\n");
    out.extend_from_slice(&line);
    Ok(())
}

fn slice(content: &[u8], range: std::ops::Range<u64>) -> Vec<u8> {
    let start = (range.start as usize).min(content.len());
    let end = (range.end as usize).clamp(start, content.len());
    content[start..end].to_vec()
}

/// The bytes of one section (RFC 9051 6.4.5); a section that does not exist is empty.
pub(crate) fn section(
    content: &[u8],
    structure: Option<&Structure>,
    spec: &Spec,
    binary: bool,
) -> Result<Vec<u8>, Failure> {
    let Some(st) = structure else {
        return Ok(content.to_vec());
    };
    let data = match spec {
        Spec::Full => {
            if binary {
                // BINARY[] of a whole message: nothing to decode at the top level.
                return Ok(content.to_vec());
            }
            content.to_vec()
        }
        Spec::Header(path) if path.is_empty() => slice(content, st.header_range()),
        Spec::Text(path) if path.is_empty() => slice(content, st.text_range()),
        Spec::HeaderFields(path, names, not) => {
            let header = if path.is_empty() {
                Some(slice(content, st.header_range()))
            } else {
                st.part(path)
                    .and_then(|p| p.message_header_range())
                    .map(|r| slice(content, r))
            };
            let names: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
            header
                .map(|h| filter_header_fields(&h, &names, *not))
                .unwrap_or_default()
        }
        Spec::Header(path) => st
            .part(path)
            .and_then(|p| p.message_header_range())
            .map(|r| slice(content, r))
            .unwrap_or_default(),
        Spec::Text(path) => st
            .part(path)
            .and_then(|p| p.message_text_range())
            .map(|r| slice(content, r))
            .unwrap_or_default(),
        Spec::Mime(path) => st
            .part(path)
            .map(|p| slice(content, p.mime_header_range()))
            .unwrap_or_default(),
        Spec::Part(path) => match st.part(path) {
            Some(p) => {
                let body = slice(content, p.body_range());
                if binary {
                    return decode_binary(p.encoding(), &body).map_err(|_| Failure::UnknownCte);
                }
                body
            }
            None => Vec::new(),
        },
    };
    Ok(data)
}
