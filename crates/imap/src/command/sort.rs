//! RFC 5256 SORT (with RFC 5957's DISPLAYFROM and DISPLAYTO) and THREAD=ORDEREDSUBJECT.
//!
//! The messages are those SEARCH finds (`search::hits`); the keys come from the summary the
//! store keeps with every message (the decoded subject, the Date field, the IMAP envelope for
//! the addresses), never from message bodies. Strings compare under i;ascii-casemap; equal
//! keys fall back to the sequence number (RFC 5256 3).

use std::cmp::Ordering;
use std::sync::Arc;

use imap_codec::imap_types::core::{Charset, Vec1};
use imap_codec::imap_types::extensions::sort::{SortCriterion, SortKey};
use imap_codec::imap_types::search::SearchKey;
use store::{MessageInfo, Summary};

use crate::session::{Backend, Session};

/// RFC 5256 3: US-ASCII and UTF-8 must be accepted (mail-parser has decoded the text).
fn charset_ok(charset: &Charset<'_>) -> bool {
    let name = charset.as_ref();
    name.eq_ignore_ascii_case("UTF-8") || name.eq_ignore_ascii_case("US-ASCII")
}

/// What a message is sorted or threaded by.
struct Keys {
    seq: usize,
    uid: u32,
    arrival: i64,
    /// Seconds since the epoch, in UTC (RFC 5256 3: the internal date when Date is absent
    /// or invalid).
    sent: i64,
    size: u64,
    subject: String,
    from: String,
    to: String,
    cc: String,
    display_from: String,
    display_to: String,
}

fn casemap(s: &str) -> String {
    s.to_ascii_uppercase()
}

fn keys_of(seq: usize, m: &MessageInfo, summary: Option<&Summary>) -> Keys {
    let sent = summary
        .and_then(|s| chrono::DateTime::parse_from_rfc2822(&s.date).ok())
        .map_or(m.internal_date, |d| d.timestamp());
    let envelope = summary
        .and_then(|s| mime_structure::Structure::from_bytes(&s.structure).ok())
        .map(|st| envelope::fields(st.envelope()))
        .unwrap_or_default();
    let first = |field: usize| envelope::first_address(envelope.get(field));
    let (from, to, cc) = (first(2), first(5), first(6));
    Keys {
        seq,
        uid: m.uid,
        arrival: m.internal_date,
        sent,
        size: m.size,
        subject: casemap(&base_subject(summary.map_or("", |s| s.subject.as_str()))),
        display_from: casemap(&from.display()),
        display_to: casemap(&to.display()),
        from: casemap(&from.mailbox),
        to: casemap(&to.mailbox),
        cc: casemap(&cc.mailbox),
    }
}

fn compare(a: &Keys, b: &Keys, criteria: &[SortCriterion]) -> Ordering {
    for c in criteria {
        let order = match c.key {
            SortKey::Arrival => a.arrival.cmp(&b.arrival),
            SortKey::Cc => a.cc.cmp(&b.cc),
            SortKey::Date => a.sent.cmp(&b.sent),
            SortKey::From => a.from.cmp(&b.from),
            SortKey::Size => a.size.cmp(&b.size),
            SortKey::Subject => a.subject.cmp(&b.subject),
            SortKey::To => a.to.cmp(&b.to),
            SortKey::DisplayFrom => a.display_from.cmp(&b.display_from),
            SortKey::DisplayTo => a.display_to.cmp(&b.display_to),
        };
        let order = if c.reverse { order.reverse() } else { order };
        if order != Ordering::Equal {
            return order;
        }
    }
    // RFC 5256 3: exact matches go by sequence number (never reversed).
    a.seq.cmp(&b.seq)
}

/// The keys of the messages `criteria` finds, or the command's answer when it fails. With
/// `addresses`, the summaries are read whole from the store (the session's header cache
/// keeps them without the envelope the address keys come from).
fn found(
    s: &mut Session,
    tag: &str,
    charset: &Charset<'_>,
    criteria: &Vec1<SearchKey<'static>>,
    addresses: bool,
    b: &Backend<'_>,
) -> Option<Vec<Keys>> {
    if !charset_ok(charset) {
        s.tagged(tag, "NO [BADCHARSET (US-ASCII UTF-8)] Unsupported charset");
        return None;
    }
    let user = s.user.clone()?;
    let sel = s.selected.as_ref()?;
    let hits = match super::search::hits(sel, &user, criteria, b) {
        Ok((hits, _)) => hits,
        Err(text) => {
            s.tagged(tag, &format!("BAD {text}"));
            return None;
        }
    };
    Some(
        hits.into_iter()
            .map(|i| {
                let m = &sel.messages[i];
                let summary = if addresses {
                    b.store.summary(&user, &sel.name, m.uid).ok().map(Arc::new)
                } else {
                    super::search::summary_of(b, &user, &sel.name, sel.uidvalidity, m.uid)
                };
                keys_of(i + 1, m, summary.as_deref())
            })
            .collect(),
    )
}

pub(crate) fn sort(
    s: &mut Session,
    tag: &str,
    criteria: Vec1<SortCriterion>,
    charset: Charset<'static>,
    search: Vec1<SearchKey<'static>>,
    uid: bool,
    b: &Backend<'_>,
) {
    let addresses = criteria.as_ref().iter().any(|c| {
        matches!(
            c.key,
            SortKey::Cc | SortKey::From | SortKey::To | SortKey::DisplayFrom | SortKey::DisplayTo
        )
    });
    let Some(mut keys) = found(s, tag, &charset, &search, addresses, b) else {
        return;
    };
    keys.sort_by(|a, z| compare(a, z, criteria.as_ref()));
    let mut line = String::from("SORT");
    for k in &keys {
        line.push(' ');
        line.push_str(&if uid { k.uid as usize } else { k.seq }.to_string());
    }
    s.untagged(&line);
    let verb = if uid { "UID SORT" } else { "SORT" };
    s.done(tag, &format!("OK {verb} completed"), b, uid);
}

/// RFC 5256 3 ORDEREDSUBJECT: the messages grouped by base subject, each group sorted by
/// sent date (then sequence number); the first message of a group is its parent and the
/// others its children; the groups ordered by their first message's sent date.
pub(crate) fn thread_ordered_subject(
    s: &mut Session,
    tag: &str,
    charset: Charset<'static>,
    search: Vec1<SearchKey<'static>>,
    uid: bool,
    b: &Backend<'_>,
) {
    let Some(mut keys) = found(s, tag, &charset, &search, false, b) else {
        return;
    };
    keys.sort_by(|a, z| {
        a.subject
            .cmp(&z.subject)
            .then(a.sent.cmp(&z.sent))
            .then(a.seq.cmp(&z.seq))
    });
    let mut groups: Vec<&[Keys]> = keys.chunk_by(|a, z| a.subject == z.subject).collect();
    groups.sort_by(|a, z| {
        let (a, z) = (&a[0], &z[0]);
        a.sent.cmp(&z.sent).then(a.seq.cmp(&z.seq))
    });
    let number = |k: &Keys| if uid { k.uid as usize } else { k.seq };
    let mut line = String::from("THREAD ");
    for group in groups {
        line.push('(');
        line.push_str(&number(&group[0]).to_string());
        match group.len() {
            1 => {}
            // One child: a chain, `(parent child)`.
            2 => line.push_str(&format!(" {}", number(&group[1]))),
            _ => {
                line.push(' ');
                for child in &group[1..] {
                    line.push_str(&format!("({})", number(child)));
                }
            }
        }
        line.push(')');
    }
    s.untagged(line.trim_end());
    let verb = if uid { "UID THREAD" } else { "THREAD" };
    s.done(tag, &format!("OK {verb} completed"), b, uid);
}

/// RFC 5256 2.1: the base subject, for sorting and threading by subject: trailing `(fwd)`
/// and leading `Re:`, `Fw:`, `Fwd:` (each with optional `[blob]`s), leading `[blob]`s that
/// leave something, and a `[Fwd: ...]` wrapper, removed until nothing changes; white space
/// collapsed. The subject is already decoded (RFC 2047) by the store's parser.
pub(crate) fn base_subject(subject: &str) -> String {
    // (1) Collapse white space.
    let mut s: String = subject.split_whitespace().collect::<Vec<_>>().join(" ");
    loop {
        // (2) Remove every trailing "(fwd)" and white space.
        loop {
            let trimmed = s.trim_end();
            let len = trimmed.len();
            let tail = len.checked_sub(5).and_then(|at| trimmed.get(at..));
            if tail.is_some_and(|t| t.eq_ignore_ascii_case("(fwd)")) {
                s = trimmed[..len - 5].to_string();
            } else {
                s = trimmed.to_string();
                break;
            }
        }
        // (3)-(5) Remove leading subj-leader and subj-blob, until nothing changes.
        loop {
            let trimmed = s.trim_start();
            if let Some(rest) = strip_refwd(trimmed) {
                s = rest.to_string();
                continue;
            }
            if let Some(rest) = strip_blob(trimmed)
                && !rest.trim().is_empty()
            {
                s = rest.to_string();
                continue;
            }
            s = trimmed.to_string();
            break;
        }
        // (6) A "[fwd: ... ]" wrapper: remove it and start again.
        // "[fwd:" and "]" are ASCII: the slice between them is on character boundaries.
        if s.len() >= 6
            && s.get(..5).is_some_and(|h| h.eq_ignore_ascii_case("[fwd:"))
            && s.ends_with(']')
        {
            s = s[5..s.len() - 1].to_string();
            continue;
        }
        return s;
    }
}

/// `subj-blob = "[" *BLOBCHAR "]" *WSP`: what follows it.
fn strip_blob(s: &str) -> Option<&str> {
    let rest = s.strip_prefix('[')?;
    let end = rest.find([']', '['])?;
    (rest.as_bytes()[end] == b']').then(|| rest[end + 1..].trim_start())
}

/// `subj-refwd = ("re" / ("fw" ["d"])) *WSP [subj-blob] ":"`, after any leading blobs: what
/// follows it.
fn strip_refwd(s: &str) -> Option<&str> {
    let mut rest = s;
    while let Some(after) = strip_blob(rest) {
        rest = after;
    }
    let lower = rest.get(..3).unwrap_or(rest).to_ascii_lowercase();
    let word = if lower.starts_with("re") {
        2
    } else if lower.starts_with("fwd") {
        3
    } else if lower.starts_with("fw") {
        2
    } else {
        return None;
    };
    let mut after = rest[word..].trim_start();
    if let Some(x) = strip_blob(after) {
        after = x;
    }
    after.strip_prefix(':')
}

/// Reading the IMAP ENVELOPE the store keeps (RFC 9051 7.5.2), for the address keys.
mod envelope {
    /// One envelope field: a string (NIL = empty) or a list of addresses.
    #[derive(Debug, Clone, Default)]
    pub(super) enum Field {
        #[default]
        Nil,
        Text,
        Addresses(Vec<Address>),
    }

    #[derive(Debug, Clone, Default)]
    pub(super) struct Address {
        pub(super) name: String,
        pub(super) mailbox: String,
        pub(super) host: String,
    }

    impl Address {
        /// RFC 5957 2: the display name when there is one, else the address.
        pub(super) fn display(&self) -> String {
            if !self.name.is_empty() {
                return decode_words(&self.name);
            }
            if self.host.is_empty() {
                self.mailbox.clone()
            } else {
                format!("{}@{}", self.mailbox, self.host)
            }
        }
    }

    fn decode_words(name: &str) -> String {
        if !name.contains("=?") {
            return name.to_string();
        }
        let header = format!("Subject: {name}\r\n\r\n");
        mail_parser::MessageParser::default()
            .parse_headers(header.as_bytes())
            .and_then(|m| m.subject().map(str::to_string))
            .unwrap_or_else(|| name.to_string())
    }

    /// The first real address of an address-list field: group markers (NIL host, RFC 9051
    /// 7.5.2) skipped; a real address always has a host here (`MISSING_DOMAIN` at worst).
    pub(super) fn first_address(field: Option<&Field>) -> Address {
        match field {
            Some(Field::Addresses(list)) => list
                .iter()
                .find(|a| !a.host.is_empty())
                .cloned()
                .unwrap_or_default(),
            _ => Address::default(),
        }
    }

    struct Reader<'a> {
        bytes: &'a [u8],
        at: usize,
    }

    impl Reader<'_> {
        fn skip_spaces(&mut self) {
            while self.bytes.get(self.at) == Some(&b' ') {
                self.at += 1;
            }
        }

        /// NIL, a quoted string or a literal, as bytes (`None` for NIL).
        fn nstring(&mut self) -> Option<Vec<u8>> {
            self.skip_spaces();
            match self.bytes.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    let mut out = Vec::new();
                    while let Some(&c) = self.bytes.get(self.at) {
                        self.at += 1;
                        match c {
                            b'\\' => {
                                if let Some(&n) = self.bytes.get(self.at) {
                                    out.push(n);
                                    self.at += 1;
                                }
                            }
                            b'"' => break,
                            c => out.push(c),
                        }
                    }
                    Some(out)
                }
                b'{' => {
                    let close = self.bytes[self.at..].iter().position(|&c| c == b'}')?;
                    let len: usize = std::str::from_utf8(&self.bytes[self.at + 1..self.at + close])
                        .ok()?
                        .parse()
                        .ok()?;
                    let start = self.at + close + 3;
                    let end = start.checked_add(len)?.min(self.bytes.len());
                    self.at = end;
                    Some(self.bytes.get(start..end)?.to_vec())
                }
                _ => {
                    // NIL (or anything unexpected: skipped as one word).
                    while let Some(&c) = self.bytes.get(self.at) {
                        if c == b' ' || c == b')' || c == b'(' {
                            break;
                        }
                        self.at += 1;
                    }
                    None
                }
            }
        }

        fn field(&mut self) -> Field {
            self.skip_spaces();
            if self.bytes.get(self.at) != Some(&b'(') {
                return match self.nstring() {
                    Some(_) => Field::Text,
                    None => Field::Nil,
                };
            }
            self.at += 1;
            let mut list = Vec::new();
            loop {
                self.skip_spaces();
                match self.bytes.get(self.at) {
                    Some(b'(') => {
                        self.at += 1;
                        let text = |b: Option<Vec<u8>>| {
                            String::from_utf8_lossy(&b.unwrap_or_default()).into_owned()
                        };
                        let name = text(self.nstring());
                        let _adl = self.nstring();
                        let mailbox = text(self.nstring());
                        let host = text(self.nstring());
                        self.skip_spaces();
                        if self.bytes.get(self.at) == Some(&b')') {
                            self.at += 1;
                        }
                        list.push(Address {
                            name,
                            mailbox,
                            host,
                        });
                    }
                    Some(b')') => {
                        self.at += 1;
                        break;
                    }
                    _ => break,
                }
            }
            Field::Addresses(list)
        }
    }

    /// The ten fields of an ENVELOPE: date, subject, from, sender, reply-to, to, cc, bcc,
    /// in-reply-to, message-id.
    pub(super) fn fields(envelope: &[u8]) -> Vec<Field> {
        let mut r = Reader {
            bytes: envelope,
            at: 0,
        };
        if r.bytes.first() != Some(&b'(') {
            return Vec::new();
        }
        r.at = 1;
        (0..10).map(|_| r.field()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::base_subject;

    #[test]
    fn base_subjects_follow_rfc_5256() {
        for (subject, base) in [
            ("Re: hello", "hello"),
            ("RE: Re:  re:hello  ", "hello"),
            ("Fwd: Re: [list] hello (fwd)", "hello"),
            ("[list] Re: hello", "hello"),
            ("[Fwd: hello]", "hello"),
            ("[Fwd: Re: [x] hello (fwd)]", "hello"),
            ("[only a blob]", "[only a blob]"),
            ("Re[2]: hello", "hello"),
            ("Fw : hello", "hello"),
            ("Regarding the plan", "Regarding the plan"),
            ("", ""),
            ("\tSpaced\t  out\r\n subject", "Spaced out subject"),
            ("Réunion: ünïcode", "Réunion: ünïcode"),
            ("[é] Re: x (fwd)", "x"),
            ("[Fwd: é]", "é"),
            ("ééé(fwd)", "ééé"),
            ("[", "["),
            ("]", "]"),
            ("Re:", ""),
            ("[a][b]", "[b]"),
        ] {
            assert_eq!(base_subject(subject), base, "{subject:?}");
        }
    }

    #[test]
    fn envelopes_give_their_first_addresses() {
        let env = r#"("Mon, 7 Feb 1994 21:52:25 -0800" "hi" (("Ann A" NIL "ann" "x.example")) NIL NIL ((NIL NIL "grp" NIL)(NIL NIL "bob" "y.example")(NIL NIL NIL NIL)) (({3}
Ce! NIL "cc" "z.example")) NIL NIL NIL)"#;
        let env = env.replace('\n', "\r\n");
        let f = super::envelope::fields(env.as_bytes());
        let from = super::envelope::first_address(f.get(2));
        assert_eq!(
            (from.mailbox.as_str(), from.display().as_str()),
            ("ann", "Ann A")
        );
        let to = super::envelope::first_address(f.get(5));
        assert_eq!(to.mailbox, "bob", "the group marker is skipped");
        let cc = super::envelope::first_address(f.get(6));
        assert_eq!(cc.mailbox, "cc");
    }
}
