//! RFC 5256 SORT (with RFC 5957's DISPLAYFROM and DISPLAYTO) and THREAD=ORDEREDSUBJECT.
//!
//! The messages are those SEARCH finds (`search::hits`); the keys come from the summary the
//! store keeps with every message (the decoded subject, the Date field, the IMAP envelope for
//! the addresses), never from message bodies. Strings compare under i;ascii-casemap; equal
//! keys fall back to the sequence number (RFC 5256 3).

use std::cmp::Ordering;

use imap_codec::imap_types::core::{Charset, Vec1};
use imap_codec::imap_types::extensions::sort::{SortCriterion, SortKey};
use imap_codec::imap_types::search::SearchKey;
use mail_model::{MessageInfo, Summary};

use crate::backend::Backend;
use crate::parse::SearchReturn;
use crate::session::Session;

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
    /// For REFERENCES threading: the subject was a reply or forward's.
    reply: bool,
    message_id: String,
    /// Older first (`Summary::references`, or the envelope's In-Reply-To for a message
    /// stored before the summary kept them).
    /// space separated (one string: a message's ids are read once, never kept apart).
    references: String,
}

impl Keys {
    /// How the answer names the message: its UID for the UID form, else its number.
    fn number(&self, uid: bool) -> usize {
        if uid { self.uid as usize } else { self.seq }
    }
}

/// Writes the untagged answer (`SORT ...`, `THREAD ...`) and the tagged OK.
fn answer(s: &mut Session, tag: &str, verb: &str, line: &str, uid: bool, b: &Backend<'_>) {
    s.untagged(line.trim_end());
    let verb = if uid {
        format!("UID {verb}")
    } else {
        verb.to_string()
    };
    s.done(tag, &format!("OK {verb} completed"), b, uid);
}

fn casemap(s: &str) -> String {
    s.to_ascii_uppercase()
}

/// Which keys a command needs: the others are left empty (a SORT by date parses no
/// subject and no envelope).
#[derive(Clone, Copy, Default)]
struct Needs {
    sent: bool,
    subject: bool,
    addresses: bool,
    threading: bool,
}

impl Needs {
    fn of(criteria: &[SortCriterion]) -> Needs {
        let mut needs = Needs::default();
        for c in criteria {
            match c.key {
                SortKey::Date => needs.sent = true,
                SortKey::Subject => needs.subject = true,
                SortKey::Cc
                | SortKey::From
                | SortKey::To
                | SortKey::DisplayFrom
                | SortKey::DisplayTo => needs.addresses = true,
                SortKey::Arrival | SortKey::Size => {}
            }
        }
        needs
    }

    /// THREAD: subjects and sent dates, and for REFERENCES the ids.
    fn thread(references: bool) -> Needs {
        Needs {
            sent: true,
            subject: true,
            addresses: false,
            threading: references,
        }
    }
}

/// The sent date (RFC 5256 2.2): the Date field, which the store keeps in seconds
/// (`Summary::sent`) beside the RFC 5322 text it wrote; that text parsed when the form is
/// another; the internal date when there is none.
fn sent_date(summary: Option<&Summary>, internal: i64) -> i64 {
    summary
        .filter(|s| !s.date.is_empty())
        .and_then(|s| {
            s.sent.or_else(|| {
                chrono::DateTime::parse_from_rfc2822(&s.date)
                    .ok()
                    .map(|d| d.timestamp())
            })
        })
        .unwrap_or(internal)
}

fn keys_of(
    seq: usize,
    m: &MessageInfo,
    summary: Option<&Summary>,
    envelope: &[envelope::Field],
    needs: Needs,
) -> Keys {
    let mut keys = Keys {
        seq,
        uid: m.uid,
        arrival: m.internal_date,
        sent: 0,
        size: m.size,
        subject: String::new(),
        reply: false,
        message_id: String::new(),
        references: String::new(),
        display_from: String::new(),
        display_to: String::new(),
        from: String::new(),
        to: String::new(),
        cc: String::new(),
    };
    if needs.sent {
        keys.sent = sent_date(summary, m.internal_date);
    }
    if needs.subject {
        let (subject, reply) = base_subject_and_reply(summary.map_or("", |s| s.subject.as_str()));
        keys.subject = casemap(&subject);
        keys.reply = reply;
    }
    if needs.addresses {
        let first = |field: usize| envelope::first_address(envelope.get(field));
        let (from, to, cc) = (first(2), first(5), first(6));
        // RFC 5957 2: display names compare under i;unicode-casemap once decoded; its
        // titlecase is upper case for ASCII, so mixed lists order as under i;ascii-casemap.
        keys.display_from = from.display().to_uppercase();
        keys.display_to = to.display().to_uppercase();
        keys.from = casemap(&from.mailbox);
        keys.to = casemap(&to.mailbox);
        keys.cc = casemap(&cc.mailbox);
    }
    if needs.threading {
        keys.message_id = summary.map(|s| s.message_id.clone()).unwrap_or_default();
        match summary.and_then(|s| s.references.as_deref()) {
            Some(ids) => keys.references = ids.to_string(),
            // Stored before the summary kept the ids: the envelope's In-Reply-To.
            None => {
                if let Some(envelope::Field::Id(id)) = envelope.get(8) {
                    keys.references = id.clone();
                }
            }
        }
    }
    keys
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

/// The keys of the messages `criteria` finds, or the command's answer when it fails. The
/// summaries come from `Mailstore::summaries`, which an implementation keeps in memory
/// without the MIME structure (the store's summary cache); the envelope (for the address
/// keys, and the In-Reply-To of a message stored before the summary kept threading ids) is
/// read from the store only for those.
fn found(
    s: &mut Session,
    tag: &str,
    charset: &Charset<'_>,
    criteria: &Vec1<SearchKey<'static>>,
    needs: Needs,
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
    let uids: Vec<u32> = hits.iter().map(|&i| sel.messages[i].uid).collect();
    let summaries = b.store.summaries(&user, &sel.name, sel.uidvalidity, &uids);
    Some(
        hits.into_iter()
            .zip(summaries)
            .map(|(i, summary)| {
                let m = &sel.messages[i];
                let old = summary.as_ref().is_none_or(|s| s.references.is_none());
                let envelope = if needs.addresses || (needs.threading && old) {
                    b.store
                        .summary(&user, &sel.name, m.uid)
                        .ok()
                        .and_then(|s| mime_structure::Structure::from_bytes(&s.structure).ok())
                        .map(|st| envelope::fields(st.envelope()))
                        .unwrap_or_default()
                } else {
                    Vec::new()
                };
                keys_of(i + 1, m, summary.as_deref(), &envelope, needs)
            })
            .collect(),
    )
}

#[allow(clippy::too_many_arguments)] // SORT's parts as imap-codec gives them, and RETURN.
pub(crate) fn sort(
    s: &mut Session,
    tag: &str,
    criteria: Vec1<SortCriterion>,
    charset: Charset<'static>,
    search: Vec1<SearchKey<'static>>,
    uid: bool,
    ret: Option<Vec<SearchReturn>>,
    b: &Backend<'_>,
) {
    let needs = Needs::of(criteria.as_ref());
    let Some(keys) = found(s, tag, &charset, &search, needs, b) else {
        return;
    };
    // Positions are sorted, not the (large) keys; a first criterion that is a number travels
    // with the position, so most comparisons of a sort by date, arrival or size touch no key.
    let first = &criteria.as_ref()[0];
    let number_key = |k: &Keys| match first.key {
        SortKey::Date => k.sent,
        SortKey::Arrival => k.arrival,
        SortKey::Size => i64::try_from(k.size).unwrap_or(i64::MAX),
        _ => 0,
    };
    let mut order: Vec<(i64, usize)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (number_key(k), i))
        .collect();
    order.sort_unstable_by(|a, z| {
        let by_number = if first.reverse {
            z.0.cmp(&a.0)
        } else {
            a.0.cmp(&z.0)
        };
        // Ties (and keys that are not numbers) by every criterion, then the sequence number,
        // which is unique: the order is total, so an unstable sort gives RFC 5256's.
        by_number.then_with(|| compare(&keys[a.1], &keys[z.1], criteria.as_ref()))
    });
    let numbers: Vec<u32> = order
        .iter()
        .map(|&(_, i)| keys[i].number(uid) as u32)
        .collect();
    let Some(ret) = ret else {
        let mut line = String::from("SORT");
        for n in &numbers {
            line.push(' ');
            line.push_str(&n.to_string());
        }
        answer(s, tag, "SORT", &line, uid, b);
        return;
    };
    // RFC 5267 3.2 ESORT: an ESEARCH response in sort order; MIN and MAX are the first and
    // last messages of that order. Updates are given for SEARCH only (4.3.1).
    let mut line = format!("ESEARCH (TAG \"{tag}\")");
    if uid {
        line.push_str(" UID");
    }
    for opt in &ret {
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
            SearchReturn::All => {
                if !numbers.is_empty() {
                    line.push_str(&format!(" ALL {}", crate::response::ordered_set(&numbers)));
                }
            }
            SearchReturn::Partial(low, high) => {
                line.push_str(&crate::response::partial(&numbers, *low, *high));
            }
            SearchReturn::Save | SearchReturn::Update | SearchReturn::Context => {}
        }
    }
    if ret.contains(&SearchReturn::Update) {
        s.untagged(&format!(
            "NO [NOUPDATE \"{tag}\"] Updates are given for SEARCH only"
        ));
    }
    answer(s, tag, "SORT", &line, uid, b);
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
    let Some(mut keys) = found(s, tag, &charset, &search, Needs::thread(false), b) else {
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
    let number = |k: &Keys| k.number(uid);
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
    answer(s, tag, "THREAD", &line, uid, b);
}

/// RFC 5256 3 REFERENCES: threads from the References and In-Reply-To ids, then threads of
/// the same base subject merged (`references::threads`).
pub(crate) fn thread_references(
    s: &mut Session,
    tag: &str,
    charset: Charset<'static>,
    search: Vec1<SearchKey<'static>>,
    uid: bool,
    b: &Backend<'_>,
) {
    let Some(keys) = found(s, tag, &charset, &search, Needs::thread(true), b) else {
        return;
    };
    let line = format!("THREAD {}", references::threads(&keys, uid));
    answer(s, tag, "THREAD", &line, uid, b);
}

/// RFC 5256 2.1: the base subject, for sorting and threading by subject: trailing `(fwd)`
/// and leading `Re:`, `Fw:`, `Fwd:` (each with optional `[blob]`s), leading `[blob]`s that
/// leave something, and a `[Fwd: ...]` wrapper, removed until nothing changes; white space
/// collapsed. The subject is already decoded (RFC 2047) by the store's parser.
#[cfg(test)]
pub(crate) fn base_subject(subject: &str) -> String {
    base_subject_and_reply(subject).0
}

/// [`base_subject`], and whether a `Re`/`Fwd` leader, a `(fwd)` trailer or a `[Fwd: ...]`
/// wrapper was removed: the message is a reply or forward (RFC 5256 3, REFERENCES step 5).
fn base_subject_and_reply(subject: &str) -> (String, bool) {
    let mut reply = false;
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
                reply = true;
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
                reply = true;
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
            reply = true;
            continue;
        }
        return (s, reply);
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

/// RFC 5256 3, the REFERENCES algorithm, on an arena of containers.
mod references {
    use std::collections::HashMap;

    use super::Keys;

    /// Containers (messages and the dummies of ids no message has) per message threaded.
    const CONTAINERS_PER_MESSAGE_MAX: usize = 4;

    /// How far up a thread the loop check of a new link looks (see `Tree::is_under`).
    const LINK_CHECK_DEPTH_MAX: usize = 1000;

    struct Container {
        /// The message (an index into the keys), or `None` for a dummy.
        message: Option<usize>,
        parent: Option<usize>,
        children: Vec<usize>,
    }

    struct Tree<'a> {
        keys: &'a [Keys],
        nodes: Vec<Container>,
    }

    impl<'a> Tree<'a> {
        fn new_node(&mut self, message: Option<usize>) -> usize {
            self.nodes.push(Container {
                message,
                parent: None,
                children: Vec::new(),
            });
            self.nodes.len() - 1
        }

        /// Whether `a` is `b` or below it, so making `a` the parent of `b` would close a
        /// loop. `b` without children can only be `a` itself; otherwise the walk up from `a`
        /// stops after [`LINK_CHECK_DEPTH_MAX`] steps and answers yes: a link that deep is
        /// not made (a thread of a folder's worth of answers would otherwise cost the
        /// folder's size squared).
        fn is_under(&self, mut a: usize, b: usize) -> bool {
            if self.nodes[b].children.is_empty() {
                return a == b;
            }
            for _ in 0..LINK_CHECK_DEPTH_MAX {
                if a == b {
                    return true;
                }
                match self.nodes[a].parent {
                    Some(p) => a = p,
                    None => return false,
                }
            }
            true
        }

        fn unlink(&mut self, child: usize) {
            if let Some(p) = self.nodes[child].parent.take() {
                self.nodes[p].children.retain(|&c| c != child);
            }
        }

        fn link(&mut self, parent: usize, child: usize) {
            self.nodes[child].parent = Some(parent);
            self.nodes[parent].children.push(child);
        }

        /// (sent date, sequence number) of a container: its message's, or for a dummy its
        /// first child's (children already sorted).
        fn date_of(&self, node: usize) -> (i64, usize) {
            match self.nodes[node].message {
                Some(k) => (self.keys[k].sent, self.keys[k].seq),
                None => self.nodes[node]
                    .children
                    .first()
                    .map_or((i64::MAX, usize::MAX), |&c| self.date_of(c)),
            }
        }

        fn subject_of(&self, node: usize) -> Option<&'a str> {
            let k = match self.nodes[node].message {
                Some(k) => k,
                None => self.nodes[self.nodes[node].children.first().copied()?].message?,
            };
            Some(self.keys[k].subject.as_str()).filter(|s| !s.is_empty())
        }

        fn is_reply(&self, node: usize) -> bool {
            self.nodes[node].message.is_some_and(|k| self.keys[k].reply)
        }

        /// Every node under `top` (itself included), parents before their children. Without
        /// recursion: a thread may be as deep as the folder is long (each message answering
        /// the one before), and a session thread's stack is not.
        fn preorder(&self, top: usize) -> Vec<usize> {
            let mut order = Vec::new();
            let mut stack = vec![top];
            while let Some(n) = stack.pop() {
                order.push(n);
                stack.extend(self.nodes[n].children.iter().copied());
            }
            order
        }

        /// Step 6: siblings by sent date, the youngest sets first (children before parents).
        fn sort_children(&mut self, top: usize) {
            for n in self.preorder(top).into_iter().rev() {
                let mut children = std::mem::take(&mut self.nodes[n].children);
                children.sort_by_key(|&c| self.date_of(c));
                self.nodes[n].children = children;
            }
        }
    }

    pub(super) fn threads(keys: &[Keys], uid: bool) -> String {
        let mut t = Tree {
            keys,
            nodes: Vec::with_capacity(keys.len() * 2),
        };
        // Ids borrowed from the keys: no copy of any id.
        let mut by_id: HashMap<&str, usize> = HashMap::with_capacity(keys.len() * 2);
        let dummies_max = keys.len().saturating_mul(CONTAINERS_PER_MESSAGE_MAX);
        // Step 1: one container per message id; a message without one, or with one seen
        // already, gets a unique one (its own container, in no table).
        let mut message_node = Vec::with_capacity(keys.len());
        for (k, key) in keys.iter().enumerate() {
            let id = key.message_id.as_str();
            let node = match by_id.get(id) {
                Some(&n) if !id.is_empty() && t.nodes[n].message.is_none() => {
                    t.nodes[n].message = Some(k);
                    n
                }
                _ => {
                    let n = t.new_node(Some(k));
                    if !id.is_empty() && !by_id.contains_key(id) {
                        by_id.insert(id, n);
                    }
                    n
                }
            };
            message_node.push(node);
            // 1.A: the references, each the parent of the next; dummies for unknown ids.
            let mut previous: Option<usize> = None;
            for r in key.references.split(' ').filter(|r| !r.is_empty()) {
                let r_node = match by_id.get(r) {
                    Some(&n) => n,
                    // Past the bound, an unknown id is passed over: memory stays a few
                    // containers per message, whatever the References say.
                    None if t.nodes.len() >= dummies_max => continue,
                    None => {
                        let n = t.new_node(None);
                        by_id.insert(r, n);
                        n
                    }
                };
                if let Some(p) = previous
                    && t.nodes[r_node].parent.is_none()
                    && !t.is_under(p, r_node)
                {
                    t.link(p, r_node);
                }
                previous = Some(r_node);
            }
            // 1.B: the last reference is the parent. A parent the message already has (from
            // another message's References, "probably ... truncated") is dropped first, and
            // only then is the new link checked for a loop: a message's own References
            // outrank what others said of it, even when its own link cannot be made (as
            // Dovecot does; imaptest's `thread`: a, b refs "a c", c refs b gives (c b)(a)).
            t.unlink(node);
            if let Some(p) = previous
                && !t.is_under(p, node)
            {
                t.link(p, node);
            }
        }
        // Step 2: the root set.
        let mut roots: Vec<usize> = (0..t.nodes.len())
            .filter(|&n| t.nodes[n].parent.is_none())
            .collect();
        // Step 3: prune dummies, children before parents. Below the top, a dummy gives its
        // place to its children (none: it just goes); at the top, it stays only with two
        // children or more (one is promoted, none drops it).
        let order: Vec<usize> = roots.iter().flat_map(|&r| t.preorder(r)).collect();
        for &n in order.iter().rev() {
            if t.nodes[n].message.is_some() {
                continue;
            }
            let Some(parent) = t.nodes[n].parent else {
                continue;
            };
            let children = std::mem::take(&mut t.nodes[n].children);
            for &c in &children {
                t.nodes[c].parent = Some(parent);
            }
            let siblings = &mut t.nodes[parent].children;
            if let Some(at) = siblings.iter().position(|&x| x == n) {
                siblings.splice(at..=at, children);
            }
            t.nodes[n].parent = None;
        }
        let mut pruned = Vec::with_capacity(roots.len());
        for r in roots {
            if t.nodes[r].message.is_some() || t.nodes[r].children.len() >= 2 {
                pruned.push(r);
            } else if let [only] = t.nodes[r].children[..] {
                t.nodes[r].children.clear();
                t.nodes[only].parent = None;
                pruned.push(only);
            }
        }
        roots = pruned;
        // Step 4: the roots by sent date (a dummy by its first child).
        for &r in &roots {
            if t.nodes[r].message.is_none() {
                t.sort_children(r);
            }
        }
        roots.sort_by_key(|&r| t.date_of(r));
        // Step 5: merge the threads with the same base subject.
        let mut table: HashMap<&str, usize> = HashMap::with_capacity(roots.len());
        for &r in &roots {
            let Some(subject) = t.subject_of(r) else {
                continue;
            };
            match table.get(subject) {
                None => {
                    table.insert(subject, r);
                }
                Some(&held) => {
                    let held_dummy = t.nodes[held].message.is_none();
                    if !held_dummy
                        && (t.nodes[r].message.is_none() || (t.is_reply(held) && !t.is_reply(r)))
                    {
                        table.insert(subject, r);
                    }
                }
            }
        }
        // 5.C, in root order. A root merged under another gets a parent (a dummy merged into
        // another is emptied and dropped); a new dummy takes its held thread's place.
        let mut emptied = vec![false; t.nodes.len()];
        for r in roots.clone() {
            if t.nodes[r].parent.is_some() || emptied.get(r).copied().unwrap_or(false) {
                continue;
            }
            let Some(subject) = t.subject_of(r) else {
                continue;
            };
            let Some(&held) = table.get(subject) else {
                continue;
            };
            if held == r {
                continue;
            }
            let r_dummy = t.nodes[r].message.is_none();
            let held_dummy = t.nodes[held].message.is_none();
            if r_dummy && held_dummy {
                let children = std::mem::take(&mut t.nodes[r].children);
                for c in children {
                    t.nodes[c].parent = None;
                    t.link(held, c);
                }
                emptied[r] = true;
            } else if held_dummy || (t.is_reply(r) && !t.is_reply(held)) {
                t.link(held, r);
            } else {
                let dummy = t.new_node(None);
                emptied.push(false);
                if let Some(slot) = roots.iter_mut().find(|x| **x == held) {
                    *slot = dummy;
                }
                t.link(dummy, held);
                t.link(dummy, r);
                table.insert(subject, dummy);
            }
        }
        let roots: Vec<usize> = roots
            .into_iter()
            .filter(|&r| t.nodes[r].parent.is_none() && !emptied.get(r).copied().unwrap_or(false))
            .collect();
        // Step 6: every set of siblings by sent date, the top level as well.
        for &r in &roots {
            t.sort_children(r);
        }
        let mut roots = roots;
        roots.sort_by_key(|&r| t.date_of(r));
        let mut out = String::new();
        for r in roots {
            out.push('(');
            members(&t, r, uid, &mut out);
            out.push(')');
        }
        out
    }

    /// A thread's members (RFC 5256 4: a chain of only children on one level, several
    /// children each in parentheses), without recursion (see `Tree::preorder`).
    fn members(t: &Tree<'_>, node: usize, uid: bool, out: &mut String) {
        enum Step {
            Open,
            Node(usize),
            Close,
        }
        let mut steps = vec![Step::Node(node)];
        while let Some(step) = steps.pop() {
            let mut current = match step {
                Step::Open => {
                    out.push('(');
                    continue;
                }
                Step::Close => {
                    out.push(')');
                    continue;
                }
                Step::Node(n) => n,
            };
            loop {
                if let Some(k) = t.nodes[current].message {
                    if !out.ends_with('(') {
                        out.push(' ');
                    }
                    out.push_str(&t.keys[k].number(uid).to_string());
                }
                match t.nodes[current].children.as_slice() {
                    [] => break,
                    [only] => current = *only,
                    children => {
                        if t.nodes[current].message.is_some() {
                            out.push(' ');
                        }
                        // Opened in order: pushed in reverse, each as "(" node ")".
                        for &c in children.iter().rev() {
                            steps.push(Step::Close);
                            steps.push(Step::Node(c));
                            steps.push(Step::Open);
                        }
                        break;
                    }
                }
            }
        }
    }
}

/// Reading the IMAP ENVELOPE the store keeps (RFC 9051 7.5.2), for the address keys.
mod envelope {
    /// One envelope field: a string (NIL = empty) or a list of addresses.
    #[derive(Debug, Clone, Default)]
    pub(super) enum Field {
        #[default]
        Nil,
        Text,
        /// In-Reply-To: its first message id, without angle brackets.
        Id(String),
        Addresses(Vec<Address>),
    }

    #[derive(Debug, Clone, Default)]
    pub(super) struct Address {
        pub(super) name: String,
        pub(super) mailbox: String,
        pub(super) host: String,
    }

    impl Address {
        /// RFC 5957 2: the display name when there is one, else the address (a group's
        /// name, an address without a domain: its mailbox alone).
        pub(super) fn display(&self) -> String {
            if !self.name.is_empty() {
                return decode_words(&self.name);
            }
            if self.host.is_empty() || self.host == "MISSING_DOMAIN" {
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

    /// The first address of an address-list field (RFC 5256 3: "the first ... address"),
    /// which for a list that opens with a group is the group's start marker (RFC 9051 7.5.2:
    /// NIL host, the group's name as the mailbox): RFC 5256 and 5957 say nothing of groups,
    /// and this is what Dovecot sorts by (imaptest's sort-addresses and sort-display-to
    /// expect `Cc: user2: blah@x;` to sort as "user2", `To: empty:;` as "empty").
    pub(super) fn first_address(field: Option<&Field>) -> Address {
        match field {
            Some(Field::Addresses(list)) => list.first().cloned().unwrap_or_default(),
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
        let mut fields: Vec<Field> = (0..8).map(|_| r.field()).collect();
        // In-Reply-To (a string of ids): the first id.
        let id = r.nstring().and_then(|v| {
            let v = String::from_utf8_lossy(&v).into_owned();
            let start = v.find('<')? + 1;
            let end = start + v[start..].find('>')?;
            Some(v[start..end].trim().to_string()).filter(|id| !id.is_empty())
        });
        fields.push(id.map_or(Field::Nil, Field::Id));
        fields
    }
}

#[cfg(test)]
mod tests {
    use super::base_subject;

    #[test]
    fn stored_dates_read_like_rfc_5322() {
        for text in [
            "Tue, 3 Jan 2023 10:00:00 +0000",
            "Fri, 31 Dec 1999 23:59:59 -0830",
            "Mon, 29 Feb 2016 00:00:01 +1400",
        ] {
            let general = chrono::DateTime::parse_from_rfc2822(text)
                .unwrap()
                .timestamp();
            assert_eq!(mail_model::sent_at(text), Some(general), "{text}");
        }
        for odd in [
            "",
            "3 Jan 2023 10:00:00 +0000",
            "Tue, 3 Jan 2023 10:00 +0000",
            "Tue, 31 Feb 2023 10:00:00 +0000",
            "Tue, 3 Jan 2023 10:00:00 GMT",
            "Tue, 3 Jan 2023 10:00:00 +0000 extra",
            "Tue, 3 Foo 2023 10:00:00 +0000",
        ] {
            assert_eq!(mail_model::sent_at(odd), None, "{odd}");
        }
    }

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
        assert_eq!(to.mailbox, "grp", "a group sorts by its name");
        assert_eq!(to.display(), "grp");
        let cc = super::envelope::first_address(f.get(6));
        assert_eq!(cc.mailbox, "cc");
    }
}

#[cfg(test)]
mod deep_tests {
    use super::Keys;

    pub(super) fn key_for_tests(seq: usize, id: &str, refs: &[String]) -> Keys {
        key(seq, id, refs)
    }

    fn key(seq: usize, id: &str, refs: &[String]) -> Keys {
        Keys {
            seq,
            uid: seq as u32,
            arrival: seq as i64,
            sent: seq as i64,
            size: 1,
            subject: String::new(),
            from: String::new(),
            to: String::new(),
            cc: String::new(),
            display_from: String::new(),
            display_to: String::new(),
            reply: false,
            message_id: id.to_string(),
            references: refs.join(" "),
        }
    }

    /// A hostile or merely long conversation: 200,000 messages each answering the one
    /// before, and a thread branching at every level: no stack overflow.
    #[test]
    fn deep_threads_need_no_deep_stack() {
        let n = 200_000;
        let keys: Vec<Keys> = (1..=n)
            .map(|i| {
                let refs = if i == 1 {
                    vec![]
                } else {
                    vec![format!("{}", i - 1)]
                };
                key(i, &i.to_string(), &refs)
            })
            .collect();
        let out = super::references::threads(&keys, false);
        assert!(
            out.starts_with("(1 2 3 ") && out.ends_with(&format!(" {n})")),
            "{}",
            &out[..40]
        );
        // Every message with two answers, each answering the one before's first answer.
        let keys: Vec<Keys> = (1..=n)
            .map(|i| {
                let parent = if i <= 2 {
                    None
                } else {
                    Some(((i - 1) / 2) * 2 - 1)
                };
                let refs: Vec<String> = parent.map(|p| p.to_string()).into_iter().collect();
                key(i, &i.to_string(), &refs)
            })
            .collect();
        let out = super::references::threads(&keys, false);
        assert_eq!(out.matches('(').count(), out.matches(')').count());
    }
}

#[cfg(test)]
mod bound_tests {
    /// References naming thousands of ids no message has: the containers stay bounded.
    #[test]
    fn unknown_references_cannot_grow_memory() {
        let keys: Vec<super::Keys> = (1..=1000usize)
            .map(|i| {
                let refs: Vec<String> = (0..300).map(|j| format!("fake-{i}-{j}")).collect();
                super::deep_tests::key_for_tests(i, &i.to_string(), &refs)
            })
            .collect();
        let out = super::references::threads(&keys, false);
        assert_eq!(out.matches('(').count(), out.matches(')').count());
        assert!(out.contains("1000"));
    }
}
