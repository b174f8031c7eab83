//! RFC 9051 6.4.4 SEARCH (and UID SEARCH), with ESEARCH results (RFC 4731, RFC 9051
//! 7.3.4) and MODSEQ (RFC 7162 3.1.5).
//!
//! Keys are compiled once against the view (sequence sets become sorted lists), then each
//! message is tested, cheapest data first: index keys never read anything, FROM, TO,
//! SUBJECT, Message-ID and the Date come from the summary parsed at arrival, and only
//! other headers and body text read the message.

use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use imap_codec::imap_types::core::Vec1;
use imap_codec::imap_types::search::SearchKey;
use mail_model::{Flags, MessageInfo, Summary};

use crate::backend::Backend;
use crate::parse::SearchReturn;
use crate::response::uid_set;
use crate::session::Session;

enum Key {
    All,
    Not(Box<Key>),
    And(Vec<Key>),
    Or(Box<Key>, Box<Key>),
    /// Positions (0-based, ascending).
    Positions(Vec<usize>),
    Flag(Flags, bool),
    Keyword(String, bool),
    Larger(u64),
    Smaller(u64),
    Internal(DateCmp, NaiveDate),
    Sent(DateCmp, NaiveDate),
    Header(String, Vec<u8>),
    Body(Vec<u8>),
    Text(Vec<u8>),
    ModSeq(u64),
    /// RFC 3501 2.3.2: the session's recent UID ranges.
    Recent(Vec<(u32, u32)>),
}

#[derive(Clone, Copy)]
enum DateCmp {
    Before,
    On,
    Since,
}

impl DateCmp {
    fn test(self, date: NaiveDate, key: NaiveDate) -> bool {
        match self {
            DateCmp::Before => date < key,
            DateCmp::On => date == key,
            DateCmp::Since => date >= key,
        }
    }
}

fn lower(s: &[u8]) -> Vec<u8> {
    s.to_ascii_lowercase()
}

fn compile(
    key: &SearchKey<'_>,
    messages: &[MessageInfo],
    recent: &[(u32, u32)],
    uses_modseq: &mut bool,
) -> Result<Key, String> {
    use SearchKey as K;
    Ok(match key {
        K::And(keys) => Key::And(
            keys.as_ref()
                .iter()
                .map(|k| compile(k, messages, recent, uses_modseq))
                .collect::<Result<_, _>>()?,
        ),
        K::SequenceSet(set) => {
            Key::Positions(super::sequence::resolve(set, messages, false).unwrap_or_default())
        }
        K::Uid(set) => Key::Positions(super::sequence::resolve(set, messages, true)?),
        K::All => Key::All,
        K::Answered => Key::Flag(Flags::ANSWERED, true),
        K::Deleted => Key::Flag(Flags::DELETED, true),
        K::Draft => Key::Flag(Flags::DRAFT, true),
        K::Flagged => Key::Flag(Flags::FLAGGED, true),
        K::Seen => Key::Flag(Flags::SEEN, true),
        K::Unanswered => Key::Flag(Flags::ANSWERED, false),
        K::Undeleted => Key::Flag(Flags::DELETED, false),
        K::Undraft => Key::Flag(Flags::DRAFT, false),
        K::Unflagged => Key::Flag(Flags::FLAGGED, false),
        K::Unseen => Key::Flag(Flags::SEEN, false),
        // RFC 3501 6.4.4: RECENT, NEW = RECENT UNSEEN, OLD = NOT RECENT (an IMAP4rev2
        // session has no recent message).
        K::Recent => Key::Recent(recent.to_vec()),
        K::New => Key::And(vec![
            Key::Recent(recent.to_vec()),
            Key::Flag(Flags::SEEN, false),
        ]),
        K::Old => Key::Not(Box::new(Key::Recent(recent.to_vec()))),
        K::Keyword(k) => Key::Keyword(k.inner().to_string(), true),
        K::Unkeyword(k) => Key::Keyword(k.inner().to_string(), false),
        K::Larger(n) => Key::Larger(*n as u64),
        K::Smaller(n) => Key::Smaller(*n as u64),
        K::Before(d) => Key::Internal(DateCmp::Before, *d.as_ref()),
        K::On(d) => Key::Internal(DateCmp::On, *d.as_ref()),
        K::Since(d) => Key::Internal(DateCmp::Since, *d.as_ref()),
        K::SentBefore(d) => Key::Sent(DateCmp::Before, *d.as_ref()),
        K::SentOn(d) => Key::Sent(DateCmp::On, *d.as_ref()),
        K::SentSince(d) => Key::Sent(DateCmp::Since, *d.as_ref()),
        K::Bcc(v) => Key::Header("bcc".into(), lower(v.as_ref())),
        K::Cc(v) => Key::Header("cc".into(), lower(v.as_ref())),
        K::From(v) => Key::Header("from".into(), lower(v.as_ref())),
        K::To(v) => Key::Header("to".into(), lower(v.as_ref())),
        K::Subject(v) => Key::Header("subject".into(), lower(v.as_ref())),
        K::Header(field, v) => Key::Header(
            String::from_utf8_lossy(field.as_ref()).to_ascii_lowercase(),
            lower(v.as_ref()),
        ),
        K::Body(v) => Key::Body(lower(v.as_ref())),
        K::Text(v) => Key::Text(lower(v.as_ref())),
        K::Not(k) => Key::Not(Box::new(compile(k, messages, recent, uses_modseq)?)),
        K::Or(a, b) => Key::Or(
            Box::new(compile(a, messages, recent, uses_modseq)?),
            Box::new(compile(b, messages, recent, uses_modseq)?),
        ),
        K::ModSequence { modseq, .. } => {
            *uses_modseq = true;
            Key::ModSeq(*modseq)
        }
        #[allow(unreachable_patterns)]
        _ => return Err("Unsupported search key".into()),
    })
}

/// One message's data, loaded the first time a key needs it.
struct Lazy<'a> {
    b: &'a Backend<'a>,
    user: &'a str,
    folder: &'a str,
    uidvalidity: u32,
    uid: u32,
    summary: Option<Option<Arc<Summary>>>,
    content: Option<Option<Vec<u8>>>,
}

impl Lazy<'_> {
    fn summary(&mut self) -> Option<&Summary> {
        if self.summary.is_none() {
            let (user, folder, v, uid) = (self.user, self.folder, self.uidvalidity, self.uid);
            self.summary = Some(summary_of(self.b, user, folder, v, uid));
        }
        self.summary.as_ref().and_then(|s| s.as_deref())
    }

    fn content(&mut self) -> Option<&[u8]> {
        if self.content.is_none() {
            self.content = Some(self.b.store.read(self.user, self.folder, self.uid).ok());
        }
        self.content.as_ref().and_then(|c| c.as_deref())
    }
}

fn contains(haystack: &[u8], needle_lower: &[u8]) -> bool {
    if needle_lower.is_empty() {
        return true;
    }
    haystack
        .windows(needle_lower.len())
        .any(|w| w.eq_ignore_ascii_case(needle_lower))
}

/// The unfolded values of a header field in a header block.
fn header_values(content: &[u8], field: &str) -> Vec<Vec<u8>> {
    let end = content
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 2)
        .or_else(|| content.windows(2).position(|w| w == b"\n\n").map(|p| p + 1))
        .unwrap_or(content.len());
    let header = &content[..end];
    let mut values: Vec<Vec<u8>> = Vec::new();
    let mut current: Option<Vec<u8>> = None;
    for line in header.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
            if let Some(v) = current.as_mut() {
                v.extend_from_slice(line);
            }
            continue;
        }
        if let Some(v) = current.take() {
            values.push(v);
        }
        if let Some(colon) = line.iter().position(|&b| b == b':')
            && line[..colon]
                .trim_ascii()
                .eq_ignore_ascii_case(field.as_bytes())
        {
            current = Some(line[colon + 1..].trim_ascii().to_vec());
        }
    }
    values.extend(current);
    values
}

fn test(key: &Key, i: usize, m: &MessageInfo, lazy: &mut Lazy<'_>) -> bool {
    match key {
        Key::All => true,
        Key::Not(k) => !test(k, i, m, lazy),
        Key::And(keys) => keys.iter().all(|k| test(k, i, m, lazy)),
        Key::Or(a, b) => test(a, i, m, lazy) || test(b, i, m, lazy),
        Key::Positions(p) => p.binary_search(&i).is_ok(),
        Key::Flag(f, set) => m.flags.contains(*f) == *set,
        Key::Keyword(k, set) => m.keywords.iter().any(|x| x.eq_ignore_ascii_case(k)) == *set,
        Key::Larger(n) => m.size > *n,
        Key::Smaller(n) => m.size < *n,
        Key::ModSeq(v) => m.modseq >= *v,
        Key::Recent(ranges) => ranges.iter().any(|&(from, to)| (from..to).contains(&m.uid)),
        Key::Internal(cmp, d) => {
            let date = DateTime::<Utc>::from_timestamp(m.internal_date, 0)
                .unwrap_or_default()
                .date_naive();
            cmp.test(date, *d)
        }
        Key::Sent(cmp, d) => {
            let date = lazy
                .summary()
                .and_then(|s| DateTime::parse_from_rfc2822(&s.date).ok())
                .map(|d| d.date_naive());
            date.is_some_and(|date| cmp.test(date, *d))
        }
        Key::Header(field, needle) => {
            // The summary answers the common fields without reading the message.
            let from_summary = match field.as_str() {
                "subject" => lazy.summary().map(|s| s.subject.clone().into_bytes()),
                "from" => lazy.summary().map(|s| s.from.clone().into_bytes()),
                "to" => lazy.summary().map(|s| s.to.clone().into_bytes()),
                "message-id" => lazy.summary().map(|s| {
                    if s.message_id.is_empty() {
                        Vec::new()
                    } else {
                        format!("<{}>", s.message_id).into_bytes()
                    }
                }),
                _ => None,
            };
            match from_summary {
                Some(value) if !value.is_empty() || !needle.is_empty() => contains(&value, needle),
                _ => lazy
                    .content()
                    .map(|c| header_values(c, field).iter().any(|v| contains(v, needle)))
                    .unwrap_or(false),
            }
        }
        Key::Body(needle) => lazy
            .content()
            .map(|c| {
                let start = c
                    .windows(4)
                    .position(|w| w == b"\r\n\r\n")
                    .map(|p| p + 4)
                    .unwrap_or(c.len());
                contains(&c[start..], needle)
            })
            .unwrap_or(false),
        Key::Text(needle) => lazy.content().map(|c| contains(c, needle)).unwrap_or(false),
    }
}

/// The positions (0-based, ascending) of the selected folder's messages that match every
/// key, and whether a key was MODSEQ; `Err` is a BAD's text. SEARCH, SORT and THREAD share
/// it (RFC 5256 3: their search criteria are SEARCH's).
pub(crate) fn hits(
    sel: &crate::selected::Selected,
    user: &str,
    criteria: &Vec1<SearchKey<'static>>,
    b: &Backend<'_>,
) -> Result<(Vec<usize>, bool), String> {
    let mut uses_modseq = false;
    let recent = sel.recent.as_deref().unwrap_or_default();
    let keys: Vec<Key> = criteria
        .as_ref()
        .iter()
        .map(|k| compile(k, &sel.messages, recent, &mut uses_modseq))
        .collect::<Result<_, _>>()?;
    let key = Key::And(keys);
    let mut found: Vec<usize> = Vec::new();
    for (i, m) in sel.messages.iter().enumerate() {
        let mut lazy = Lazy {
            b,
            user,
            folder: &sel.name,
            uidvalidity: sel.uidvalidity,
            uid: m.uid,
            summary: None,
            content: None,
        };
        if test(&key, i, m, &mut lazy) {
            found.push(i);
        }
    }
    Ok((found, uses_modseq))
}

/// A message's searchable summary (kept in memory by the store after the first read).
pub(crate) fn summary_of(
    b: &Backend<'_>,
    user: &str,
    folder: &str,
    uidvalidity: u32,
    uid: u32,
) -> Option<Arc<Summary>> {
    b.store
        .summaries(user, folder, uidvalidity, &[uid])
        .pop()
        .flatten()
}

pub(crate) fn run(
    s: &mut Session,
    tag: &str,
    uid: bool,
    ret: Option<Vec<SearchReturn>>,
    criteria: Vec1<SearchKey<'static>>,
    b: &Backend<'_>,
) {
    let (Some(user), Some(sel)) = (s.user.clone(), s.selected.as_ref()) else {
        return;
    };
    let save = ret
        .as_ref()
        .is_some_and(|opts| opts.contains(&SearchReturn::Save));
    let update = ret
        .as_ref()
        .is_some_and(|opts| opts.contains(&SearchReturn::Update));
    // RFC 5267 4.3: a tag names one updating search at a time.
    if update && sel.updates.iter().any(|u| u.tag == tag) {
        s.tagged(tag, "BAD Tag is in use by an updating search");
        return;
    }
    let (hits, uses_modseq) = match hits(sel, &user, &criteria, b) {
        Ok(found) => found,
        Err(text) => {
            // RFC 5182 2.1: a failed SEARCH that would have saved leaves `$` empty.
            if save && let Some(sel) = s.selected.as_mut() {
                sel.saved.clear();
            }
            s.tagged(tag, &format!("BAD {text}"));
            return;
        }
    };
    // RFC 5182 2.4: SAVE keeps what the other options name when they are only MIN and/or
    // MAX, else every match; with SAVE alone there is no ESEARCH response.
    // UPDATE and CONTEXT alone answer as ALL (RFC 5267 4.2, 4.3).
    let ret = ret.map(|opts| {
        let shown: Vec<SearchReturn> = opts
            .iter()
            .copied()
            .filter(|o| {
                !matches!(
                    o,
                    SearchReturn::Save | SearchReturn::Update | SearchReturn::Context
                )
            })
            .collect();
        if shown.is_empty() && !save {
            vec![SearchReturn::All]
        } else {
            shown
        }
    });
    // RFC 7162 3.1.5: the highest MODSEQ of the messages the answer names: all hits, or with
    // only MIN and/or MAX asked for, those (at most two) messages.
    let only_min_max = ret.as_ref().is_some_and(|opts| {
        !opts.is_empty()
            && opts
                .iter()
                .all(|o| matches!(o, SearchReturn::Min | SearchReturn::Max))
    });
    if save {
        let kept: Vec<usize> = if only_min_max {
            let opts = ret.as_deref().unwrap_or_default();
            let mut kept: Vec<usize> = Vec::new();
            if opts.contains(&SearchReturn::Min) {
                kept.extend(hits.first());
            }
            if opts.contains(&SearchReturn::Max) {
                kept.extend(hits.last().filter(|l| Some(*l) != hits.first()));
            }
            kept
        } else {
            hits.clone()
        };
        let uids = kept.iter().map(|&i| sel.messages[i].uid).collect();
        if let Some(sel) = s.selected.as_mut() {
            sel.saved = uids;
        }
    }
    if update && let Some(sel) = s.selected.as_ref() {
        let found: Vec<u32> = hits.iter().map(|&i| sel.messages[i].uid).collect();
        let seen = (sel.highest_modseq, sel.messages.len());
        let max = s.config.search_updates_max;
        if let Some(sel) = s.selected.as_mut()
            && sel.updates.len() < max
        {
            sel.updates.push(crate::selected::SearchUpdate {
                tag: tag.to_string(),
                uid,
                criteria: criteria.clone(),
                uids: found,
                seen,
            });
        } else {
            // RFC 5267 4.3.1.
            s.untagged(&format!(
                "NO [NOUPDATE \"{tag}\"] Too many updating searches (search_updates_max)"
            ));
        }
    }
    let Some(sel) = s.selected.as_ref() else {
        return;
    };
    let number = |i: usize| {
        if uid {
            sel.messages[i].uid
        } else {
            i as u32 + 1
        }
    };
    let highest = if only_min_max {
        let opts = ret.as_deref().unwrap_or_default();
        let mut named = Vec::new();
        if opts.contains(&SearchReturn::Min) {
            named.extend(hits.first());
        }
        if opts.contains(&SearchReturn::Max) {
            named.extend(hits.last());
        }
        named.iter().map(|&&i| sel.messages[i].modseq).max()
    } else {
        hits.iter().map(|&i| sel.messages[i].modseq).max()
    };
    let mut line = String::new();
    match ret {
        None => {
            line.push_str("* SEARCH");
            for &i in &hits {
                line.push(' ');
                line.push_str(&number(i).to_string());
            }
            // RFC 7162 3.1.5: the highest MODSEQ of the results.
            if uses_modseq && let Some(h) = highest {
                line.push_str(&format!(" (MODSEQ {h})"));
            }
        }
        Some(opts) if opts.is_empty() => {
            // SAVE alone.
            let verb = if uid { "UID SEARCH" } else { "SEARCH" };
            s.done(tag, &format!("OK {verb} completed"), b, uid);
            return;
        }
        Some(opts) => {
            line.push_str(&format!("* ESEARCH (TAG \"{tag}\")"));
            if uid {
                line.push_str(" UID");
            }
            let numbers: Vec<u32> = hits.iter().map(|&i| number(i)).collect();
            for opt in &opts {
                match opt {
                    SearchReturn::Min => {
                        if let Some(n) = numbers.first() {
                            line.push_str(&format!(" MIN {n}"));
                        }
                    }
                    SearchReturn::Max => {
                        if let Some(n) = numbers.last() {
                            line.push_str(&format!(" MAX {n}"));
                        }
                    }
                    SearchReturn::Count => line.push_str(&format!(" COUNT {}", numbers.len())),
                    SearchReturn::Partial(low, high) => {
                        line.push_str(&crate::response::partial(&numbers, *low, *high));
                    }
                    SearchReturn::Save | SearchReturn::Update | SearchReturn::Context => {}
                    SearchReturn::All => {
                        if !numbers.is_empty() {
                            line.push_str(&format!(" ALL {}", uid_set(&numbers)));
                        }
                    }
                }
            }
            if uses_modseq && let Some(h) = highest {
                line.push_str(&format!(" MODSEQ {h}"));
            }
        }
    }
    if uses_modseq {
        let highest_modseq = sel.highest_modseq;
        s.enabled.condstore_by_command(highest_modseq, &mut s.out);
    }
    s.untagged(&line[2..]);
    let verb = if uid { "UID SEARCH" } else { "SEARCH" };
    s.done(tag, &format!("OK {verb} completed"), b, uid);
}
