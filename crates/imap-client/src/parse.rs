//! Turning one framed response into a [`Resp`]: imap-codec first, then small own
//! parsers for what imap-codec rejects but real servers send.

use bytes::Bytes;
use imap_codec::ResponseCodec;
use imap_codec::decode::Decoder;
use imap_codec::imap_types::core::{IString, NString, NString8};
use imap_codec::imap_types::extensions::quota::Resource;
use imap_codec::imap_types::fetch::MessageDataItem;
use imap_codec::imap_types::flag::{FlagFetch, FlagNameAttribute};
use imap_codec::imap_types::mailbox::Mailbox;
use imap_codec::imap_types::response::{Data, Response, Status, StatusKind};

use crate::Error;

/// What the client needs from one server response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resp {
    /// `+ ...` command continuation request (RFC 3501 7.5).
    Continue,
    /// Status response (RFC 3501 7.1); `tag` is None for untagged ones.
    Status {
        tag: Option<String>,
        kind: Kind,
        /// Contents of the `[...]` response code, raw.
        code: Option<String>,
        /// The whole resp-text as sent, code included.
        text: String,
    },
    /// `* BYE` (RFC 3501 7.1.5) with its resp-text.
    Bye(String),
    /// `* CAPABILITY` (RFC 3501 7.2.1), upper-cased.
    Capability(Vec<String>),
    /// `* n EXISTS` (RFC 3501 7.3.1).
    Exists(u32),
    /// `* SEARCH` (RFC 3501 7.2.5) or `* ESEARCH ... ALL` (RFC 4731 3.1).
    Search(Vec<u32>),
    /// `* n FETCH (...)` (RFC 3501 7.4.2): the UID and the data of a BODY[...] or
    /// BINARY[...] item (None when absent or NIL).
    Fetch {
        seq: u32,
        uid: Option<u32>,
        data: Option<Bytes>,
        /// FLAGS, INTERNALDATE and MODSEQ when the response had any of them.
        meta: Option<Box<Meta>>,
    },
    /// `* LIST (attributes) delimiter name` (RFC 3501 7.2.2): the name decoded from
    /// modified UTF-7, the delimiter, and whether the name can be selected.
    List {
        name: String,
        delimiter: Option<char>,
        selectable: bool,
    },
    /// `* QUOTA root (resource usage limit ...)` (RFC 2087 5.1 / RFC 9208 5.1).
    Quota(Vec<(String, u64, u64)>),
    /// Anything else; ignored (RFC 3501 2.2.2: clients must cope with unsolicited data).
    Other,
}

/// The message attributes of a FETCH response besides its UID and body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Meta {
    /// As sent (`\\Seen`, keywords), `\\Recent` included.
    pub(crate) flags: Option<Vec<String>>,
    /// Unix seconds.
    pub(crate) internal_date: Option<i64>,
    pub(crate) modseq: Option<u64>,
}

/// Status condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Ok,
    No,
    Bad,
}

/// Parses one complete response as framed by [`crate::framer::Framer`].
#[cfg(test)]
pub(crate) fn parse(bytes: &[u8]) -> Result<Resp, Error> {
    parse_owned(bytes.to_vec())
}

/// Parses one complete response, keeping a large FETCH literal where it was received: the
/// data handed back is a view of `bytes`, not a copy.
pub(crate) fn parse_owned(bytes: Vec<u8>) -> Result<Resp, Error> {
    if bytes.starts_with(b"+") {
        return Ok(Resp::Continue);
    }
    if bytes.len() >= LITERAL_CUT_MIN
        && let Some((seq, uid, literal, meta)) = parse_cutting_literal(&bytes)
    {
        return Ok(Resp::Fetch {
            seq,
            uid,
            data: Some(Bytes::from(bytes).slice(literal)),
            meta,
        });
    }
    match ResponseCodec::default().decode(&bytes) {
        Ok((b"", response)) => Ok(from_codec(&bytes, response)),
        _ => fallback(&bytes),
    }
}

/// Literals at least this long are cut out of a FETCH before imap-codec sees it: it checks
/// a literal byte by byte and copies it, which was 8 % of the CPU of a mail file system
/// read. The framer already knows where the literal ends.
const LITERAL_CUT_MIN: usize = 64 * 1024;

/// A FETCH with one large literal: the response is parsed with the literal announced as
/// `{0}`; its sequence number, UID, where the literal lies in `bytes`, and its other
/// attributes. None (parse it whole) for anything else.
#[allow(clippy::type_complexity)]
fn parse_cutting_literal(
    bytes: &[u8],
) -> Option<(u32, Option<u32>, std::ops::Range<usize>, Option<Box<Meta>>)> {
    let mut big = None;
    let mut at = 0;
    while let Some(lf) = memchr::memchr(b'\n', &bytes[at..]) {
        let line_end = at + lf + 1;
        let Some(n) = crate::framer::literal_announcement(&bytes[at..line_end]) else {
            at = line_end;
            continue;
        };
        let brace = at + memchr::memrchr(b'{', &bytes[at..line_end])?;
        let end = line_end.checked_add(n).filter(|&e| e <= bytes.len())?;
        if n >= LITERAL_CUT_MIN {
            if big.is_some() {
                return None;
            }
            big = Some((brace, line_end..end));
        }
        at = end;
    }
    let (brace, literal) = big?;
    let mut skeleton = Vec::with_capacity(bytes.len() - literal.len() + 8);
    skeleton.extend_from_slice(&bytes[..brace]);
    skeleton.extend_from_slice(b"{0}\r\n");
    skeleton.extend_from_slice(&bytes[literal.end..]);
    let parsed = match ResponseCodec::default().decode(&skeleton) {
        Ok((b"", response)) => from_codec(&skeleton, response),
        // imap-codec does not know every item (MODSEQ): our own parser then.
        _ => fallback(&skeleton).ok()?,
    };
    match parsed {
        Resp::Fetch {
            seq,
            uid,
            data: Some(d),
            meta,
        } if d.is_empty() => Some((seq, uid, literal, meta)),
        _ => None,
    }
}

fn from_codec(bytes: &[u8], response: Response<'_>) -> Resp {
    match response {
        Response::CommandContinuationRequest(_) => Resp::Continue,
        Response::Status(Status::Bye(_)) => Resp::Bye(resp_text(bytes)),
        Response::Status(status) => {
            let kind = match &status {
                Status::Untagged(body) => body.kind,
                Status::Tagged(tagged) => tagged.body.kind,
                Status::Bye(_) => StatusKind::Ok,
            };
            let text = resp_text(bytes);
            Resp::Status {
                tag: status.tag().map(|t| t.inner().to_string()),
                kind: match kind {
                    StatusKind::Ok => Kind::Ok,
                    StatusKind::No => Kind::No,
                    StatusKind::Bad => Kind::Bad,
                },
                code: code_of(&text).map(str::to_string),
                text,
            }
        }
        Response::Data(Data::Capability(caps)) => Resp::Capability(
            caps.as_ref()
                .iter()
                .map(|c| c.to_string().to_ascii_uppercase())
                .collect(),
        ),
        Response::Data(Data::Exists(n)) => Resp::Exists(n),
        Response::Data(Data::Search(uids, _)) => {
            Resp::Search(uids.into_iter().map(|n| n.get()).collect())
        }
        Response::Data(Data::Fetch { seq, items }) => {
            let mut uid = None;
            let mut data = None;
            let mut meta: Option<Box<Meta>> = None;
            for item in items.into_iter() {
                match item {
                    MessageDataItem::Uid(n) => uid = Some(n.get()),
                    MessageDataItem::Flags(flags) => {
                        meta.get_or_insert_default().flags = Some(
                            flags
                                .iter()
                                .map(|f| match f {
                                    FlagFetch::Flag(f) => f.to_string(),
                                    FlagFetch::Recent => "\\Recent".to_string(),
                                })
                                .collect(),
                        );
                    }
                    MessageDataItem::InternalDate(date) => {
                        meta.get_or_insert_default().internal_date =
                            Some(date.as_ref().timestamp());
                    }
                    MessageDataItem::ModSeq(n) => {
                        meta.get_or_insert_default().modseq = Some(n.get());
                    }
                    MessageDataItem::BodyExt { data: d, .. } => data = nstring(d),
                    MessageDataItem::Binary { value, .. } => {
                        data = match value {
                            NString8::NString(d) => nstring(d),
                            NString8::Literal8(l) => Some(Bytes::from(l.data.into_owned())),
                        }
                    }
                    _ => {}
                }
            }
            Resp::Fetch {
                seq: seq.get(),
                uid,
                data,
                meta,
            }
        }
        Response::Data(Data::List {
            items,
            delimiter,
            mailbox,
        }) => {
            let raw: &[u8] = match &mailbox {
                Mailbox::Inbox => b"INBOX",
                Mailbox::Other(other) => other.as_ref(),
            };
            Resp::List {
                name: utf7_decode(raw).unwrap_or_else(|| String::from_utf8_lossy(raw).into_owned()),
                delimiter: delimiter.map(|d| d.inner()),
                selectable: !items.iter().any(|a| {
                    matches!(a, FlagNameAttribute::Noselect)
                        || a.to_string().eq_ignore_ascii_case("\\NonExistent")
                }),
            }
        }
        Response::Data(Data::Quota { quotas, .. }) => Resp::Quota(
            quotas
                .into_iter()
                .map(|q| {
                    let name = match q.resource {
                        Resource::Storage => "STORAGE".to_string(),
                        other => other.to_string().to_ascii_uppercase(),
                    };
                    (name, q.usage, q.limit)
                })
                .collect(),
        ),
        Response::Data(_) => Resp::Other,
    }
}

fn nstring(n: NString<'_>) -> Option<Bytes> {
    match n.0 {
        None => None,
        Some(IString::Literal(l)) => Some(Bytes::copy_from_slice(l.data())),
        Some(IString::Quoted(q)) => Some(Bytes::copy_from_slice(q.inner().as_bytes())),
    }
}

/// The resp-text of a status response: everything after `tag SP cond SP` without CRLF.
fn resp_text(bytes: &[u8]) -> String {
    let line = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut parts = line.splitn(3, |&b| b == b' ');
    let _tag = parts.next();
    let _cond = parts.next();
    String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned()
}

/// The contents of a leading `[...]` response code (RFC 3501 7.1).
pub(crate) fn code_of(text: &str) -> Option<&str> {
    let rest = text.strip_prefix('[')?;
    rest.find(']').map(|end| &rest[..end])
}

/// `* ...` / `tag ...` responses imap-codec rejected: FETCH with items it cannot read
/// (a partial `BINARY[1]<0> ~{n}`, NUL in a `{n}` literal), ESEARCH, odd status codes.
fn fallback(bytes: &[u8]) -> Result<Resp, Error> {
    let mut p = Cursor { b: bytes, i: 0 };
    let first = p.token();
    if first != b"*" {
        // Tagged status (RFC 3501 7.1): tag SP ("OK" / "NO" / "BAD") SP resp-text.
        p.sp()?;
        let cond = p.token().to_ascii_uppercase();
        let kind = match cond.as_slice() {
            b"OK" => Kind::Ok,
            b"NO" => Kind::No,
            b"BAD" => Kind::Bad,
            _ => return Err(p.error("tagged response without OK/NO/BAD")),
        };
        let text = resp_text(bytes);
        return Ok(Resp::Status {
            tag: Some(String::from_utf8_lossy(first).into_owned()),
            kind,
            code: code_of(&text).map(str::to_string),
            text,
        });
    }
    p.sp()?;
    let word = p.token().to_ascii_uppercase();
    match word.as_slice() {
        b"OK" | b"NO" | b"BAD" => {
            let text = resp_text(bytes);
            Ok(Resp::Status {
                tag: None,
                kind: match word.as_slice() {
                    b"OK" => Kind::Ok,
                    b"NO" => Kind::No,
                    _ => Kind::Bad,
                },
                code: code_of(&text).map(str::to_string),
                text,
            })
        }
        b"BYE" => Ok(Resp::Bye(resp_text(bytes))),
        b"ESEARCH" => esearch(&mut p),
        w if !w.is_empty() && w.iter().all(u8::is_ascii_digit) => {
            let seq = parse_u32(w).ok_or_else(|| p.error("bad message number"))?;
            p.sp()?;
            let what = p.token().to_ascii_uppercase();
            if what == b"FETCH" {
                p.sp()?;
                fetch(&mut p, seq)
            } else {
                tracing::debug!("ignoring unparsed response {}", snippet(bytes));
                Ok(Resp::Other)
            }
        }
        _ => {
            tracing::debug!("ignoring unparsed response {}", snippet(bytes));
            Ok(Resp::Other)
        }
    }
}

/// `msg-att` list of a FETCH response (RFC 3501 7.4.2, RFC 3516 4.2).
fn fetch(p: &mut Cursor<'_>, seq: u32) -> Result<Resp, Error> {
    p.expect(b'(')?;
    let mut uid = None;
    let mut data = None;
    let mut meta: Option<Box<Meta>> = None;
    loop {
        p.skip_spaces();
        if p.peek() == Some(b')') {
            p.i += 1;
            break;
        }
        let name = p.item_name()?.to_ascii_uppercase();
        p.sp()?;
        if name == b"FLAGS" || name == b"MODSEQ" {
            // A list of atoms (flags begin with `\\`, which `value` does not keep).
            let list = p.atom_list()?;
            let meta = meta.get_or_insert_default();
            if name == b"FLAGS" {
                meta.flags = Some(list);
            } else {
                meta.modseq = Some(
                    list.first()
                        .and_then(|n| n.parse().ok())
                        .ok_or_else(|| p.error("bad MODSEQ"))?,
                );
            }
            continue;
        }
        let value = p.value()?;
        if name == b"INTERNALDATE" {
            let Value::Bytes(date) = value else {
                return Err(p.error("bad INTERNALDATE"));
            };
            meta.get_or_insert_default().internal_date = Some(
                internal_date(&String::from_utf8_lossy(&date))
                    .ok_or_else(|| p.error("bad INTERNALDATE"))?,
            );
            continue;
        }
        if name == b"UID" {
            uid = match value {
                Value::Atom(a) => parse_u32(a),
                _ => None,
            };
            if uid.is_none() {
                return Err(p.error("bad UID"));
            }
        } else if name.starts_with(b"BODY[") || name.starts_with(b"BINARY[") {
            data = match value {
                Value::Bytes(b) => Some(Bytes::from(b)),
                _ => None,
            };
        }
    }
    p.end()?;
    Ok(Resp::Fetch {
        seq,
        uid,
        data,
        meta,
    })
}

/// `* ESEARCH [search-correlator] [SP "UID"] *(SP search-return-data)` (RFC 4731 3.1).
fn esearch(p: &mut Cursor<'_>) -> Result<Resp, Error> {
    let mut uids = Vec::new();
    loop {
        p.skip_spaces();
        if p.at_end() {
            break;
        }
        if p.peek() == Some(b'(') {
            p.value()?; // (TAG "a1")
            continue;
        }
        let key = p.token().to_ascii_uppercase();
        if key.is_empty() {
            return Err(p.error("bad ESEARCH"));
        }
        if key == b"UID" {
            continue;
        }
        p.sp()?;
        let value = p.value()?;
        if key == b"ALL"
            && let Value::Atom(set) = value
        {
            let set = std::str::from_utf8(set).map_err(|_| p.error("bad ESEARCH ALL"))?;
            uids.extend(
                crate::seqset::expand(set, 100_000_000)
                    .ok_or_else(|| p.error("bad ESEARCH ALL"))?,
            );
        }
    }
    Ok(Resp::Search(uids))
}

enum Value<'a> {
    Atom(&'a [u8]),
    Bytes(Vec<u8>),
    Nil,
    List,
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn at_end(&self) -> bool {
        matches!(&self.b[self.i..], b"" | b"\n" | b"\r\n")
    }

    fn end(&mut self) -> Result<(), Error> {
        self.skip_spaces();
        if self.at_end() {
            Ok(())
        } else {
            Err(self.error("trailing data"))
        }
    }

    fn error(&self, what: &str) -> Error {
        Error::Protocol(format!(
            "{what} at byte {} of response {}",
            self.i,
            snippet(self.b)
        ))
    }

    fn sp(&mut self) -> Result<(), Error> {
        self.expect(b' ')
    }

    fn expect(&mut self, c: u8) -> Result<(), Error> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected {:?}", c as char)))
        }
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }

    /// Bytes up to SP, CR, LF, `(`, `)`, `[` or `{`.
    fn token(&mut self) -> &'a [u8] {
        let start = self.i;
        while let Some(c) = self.peek() {
            if matches!(c, b' ' | b'\r' | b'\n' | b'(' | b')' | b'[' | b'{' | b'"') {
                break;
            }
            self.i += 1;
        }
        &self.b[start..self.i]
    }

    /// A fetch item name such as `UID`, `BODY[HEADER.FIELDS (X-A)]<0>`, `BINARY[1]`.
    fn item_name(&mut self) -> Result<&'a [u8], Error> {
        let start = self.i;
        self.token();
        if self.peek() == Some(b'[') {
            // Section specs may hold spaces and parentheses but no `]`.
            let close = self.b[self.i..]
                .iter()
                .position(|&c| c == b']')
                .ok_or_else(|| self.error("unterminated section"))?;
            self.i += close + 1;
            if self.peek() == Some(b'<') {
                let close = self.b[self.i..]
                    .iter()
                    .position(|&c| c == b'>')
                    .ok_or_else(|| self.error("unterminated origin"))?;
                self.i += close + 1;
            }
        }
        if self.i == start {
            return Err(self.error("expected a fetch item"));
        }
        Ok(&self.b[start..self.i])
    }

    /// nstring / literal8 / number / atom / parenthesized list (skipped).
    fn value(&mut self) -> Result<Value<'a>, Error> {
        match self.peek() {
            Some(b'"') => self.quoted().map(Value::Bytes),
            Some(b'{') => self.literal().map(Value::Bytes),
            Some(b'~') if self.b.get(self.i + 1) == Some(&b'{') => {
                self.i += 1;
                self.literal().map(Value::Bytes)
            }
            Some(b'(') => {
                self.i += 1;
                loop {
                    self.skip_spaces();
                    match self.peek() {
                        Some(b')') => {
                            self.i += 1;
                            return Ok(Value::List);
                        }
                        None | Some(b'\r') | Some(b'\n') => {
                            return Err(self.error("unterminated list"));
                        }
                        Some(b'[') => {
                            self.item_name()?;
                        }
                        _ => {
                            if self.token().is_empty() {
                                self.value()?;
                            } else if self.peek() == Some(b'[') {
                                self.item_name()?;
                            }
                        }
                    }
                }
            }
            _ => {
                let atom = self.token();
                if atom.is_empty() {
                    Err(self.error("expected a value"))
                } else if atom.eq_ignore_ascii_case(b"NIL") {
                    Ok(Value::Nil)
                } else {
                    Ok(Value::Atom(atom))
                }
            }
        }
    }

    /// `(` atom *(SP atom) `)`, each atom up to SP or `)`.
    fn atom_list(&mut self) -> Result<Vec<String>, Error> {
        self.expect(b'(')?;
        let mut out = Vec::new();
        loop {
            self.skip_spaces();
            match self.peek() {
                Some(b')') => {
                    self.i += 1;
                    return Ok(out);
                }
                None | Some(b'\r') | Some(b'\n') | Some(b'(') => {
                    return Err(self.error("unterminated list"));
                }
                _ => {
                    let start = self.i;
                    while self
                        .peek()
                        .is_some_and(|c| !matches!(c, b' ' | b')' | b'\r' | b'\n' | b'('))
                    {
                        self.i += 1;
                    }
                    out.push(String::from_utf8_lossy(&self.b[start..self.i]).into_owned());
                }
            }
        }
    }

    fn quoted(&mut self) -> Result<Vec<u8>, Error> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    let c = self
                        .b
                        .get(self.i + 1)
                        .copied()
                        .ok_or_else(|| self.error("bad escape"))?;
                    out.push(c);
                    self.i += 2;
                }
                None | Some(b'\r') | Some(b'\n') => return Err(self.error("unterminated string")),
                Some(c) => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
    }

    /// `{n}` CRLF n octets (RFC 3501 4.3); the `~` of literal8 is already consumed.
    fn literal(&mut self) -> Result<Vec<u8>, Error> {
        self.expect(b'{')?;
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit() || c == b'+') {
            self.i += 1;
        }
        let digits = &self.b[start..self.i];
        let n: usize = std::str::from_utf8(digits.strip_suffix(b"+").unwrap_or(digits))
            .ok()
            .and_then(|d| d.parse().ok())
            .ok_or_else(|| self.error("bad literal length"))?;
        self.expect(b'}')?;
        if self.peek() == Some(b'\r') {
            self.i += 1;
        }
        self.expect(b'\n')?;
        if self.b.len() - self.i < n {
            return Err(self.error("short literal"));
        }
        let data = self.b[self.i..self.i + n].to_vec();
        self.i += n;
        Ok(data)
    }
}

/// An IMAP date-time (RFC 3501 9): `dd-Mon-yyyy hh:mm:ss +zzzz`, the day maybe
/// space-padded; Unix seconds.
pub(crate) fn internal_date(s: &str) -> Option<i64> {
    let s = s.trim_start();
    let (date, rest) = s.split_once(' ')?;
    let (time, zone) = rest.trim_start().split_once(' ')?;
    let mut d = date.split('-');
    let day: i64 = d.next()?.parse().ok()?;
    let month = d.next()?.to_ascii_lowercase();
    let year: i64 = d.next()?.parse().ok()?;
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month)? as i64 + 1;
    let mut t = time.split(':');
    let (h, m, sec): (i64, i64, i64) = (
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
    );
    let zone = zone.trim();
    if zone.len() != 5 || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let sign = match &zone[..1] {
        "+" => 1,
        "-" => -1,
        _ => return None,
    };
    let zh: i64 = zone[1..3].parse().ok()?;
    let zm: i64 = zone[3..5].parse().ok()?;
    // Days from 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + m * 60 + sec - sign * (zh * 3600 + zm * 60))
}

/// Modified UTF-7 (RFC 3501 5.1.3) to UTF-8; None if it is not valid.
pub(crate) fn utf7_decode(raw: &[u8]) -> Option<String> {
    use base64::Engine as _;
    let mut out = String::new();
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        if c != b'&' {
            if !(0x20..0x7f).contains(&c) {
                return None;
            }
            out.push(c as char);
            i += 1;
            continue;
        }
        let end = i + 1 + raw[i + 1..].iter().position(|&b| b == b'-')?;
        if end == i + 1 {
            out.push('&');
        } else {
            let b64: Vec<u8> = raw[i + 1..end]
                .iter()
                .map(|&b| if b == b',' { b'/' } else { b })
                .collect();
            let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(&b64)
                .ok()?;
            if bytes.len() % 2 != 0 {
                return None;
            }
            let units: Vec<u16> = bytes
                .chunks(2)
                .map(|p| u16::from_be_bytes([p[0], p[1]]))
                .collect();
            out.push_str(&String::from_utf16(&units).ok()?);
        }
        i = end + 1;
    }
    Some(out)
}

fn parse_u32(b: &[u8]) -> Option<u32> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// The first 200 bytes of a response for error messages.
pub(crate) fn snippet(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(200)];
    let mut s = String::from_utf8_lossy(cut).escape_debug().to_string();
    if bytes.len() > cut.len() {
        s.push_str(&format!("… ({} bytes)", bytes.len()));
    }
    s
}

/// The unfolded (RFC 5322 2.2.3), trimmed value of header `field` in a header block as
/// returned for `BODY[HEADER.FIELDS (field)]`; empty if absent.
pub(crate) fn header_value(block: &[u8], field: &str) -> String {
    let text = String::from_utf8_lossy(block);
    let mut value: Option<String> = None;
    let mut done = false;
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(v) = value.as_mut()
            && !done
        {
            if line.starts_with([' ', '\t']) {
                v.push(' ');
                v.push_str(line.trim());
                continue;
            }
            done = true;
        }
        if value.is_none()
            && let Some((name, rest)) = line.split_once(':')
            && name.trim_end().eq_ignore_ascii_case(field)
        {
            value = Some(rest.trim().to_string());
        }
    }
    value.unwrap_or_default().trim().to_string()
}

/// A mailbox name as an IMAP astring: modified UTF-7 (RFC 3501 5.1.3), then quoted.
pub(crate) fn mailbox(name: &str) -> Vec<u8> {
    quoted(utf7_encode(name).as_bytes())
}

/// Quoted string (RFC 3501 4.3): `"` and `\` escaped. Only for bytes that a quoted
/// string may carry (7-bit, no CR/LF/NUL); see [`can_quote`].
pub(crate) fn quoted(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'"');
    for &b in s {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
    out
}

/// Whether `s` fits a quoted string (RFC 3501 9, `QUOTED-CHAR`).
pub(crate) fn can_quote(s: &[u8]) -> bool {
    s.iter()
        .all(|&b| (0x01..=0x7f).contains(&b) && b != b'\r' && b != b'\n')
}

/// Modified UTF-7 for mailbox names (RFC 3501 5.1.3).
pub(crate) fn utf7_encode(name: &str) -> String {
    use base64::Engine;
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::IMAP_MUTF7,
        base64::engine::general_purpose::NO_PAD,
    );
    let mut out = String::new();
    let mut pending: Vec<u16> = Vec::new();
    let flush = |pending: &mut Vec<u16>, out: &mut String| {
        if !pending.is_empty() {
            let bytes: Vec<u8> = pending.iter().flat_map(|u| u.to_be_bytes()).collect();
            out.push('&');
            out.push_str(&engine.encode(bytes));
            out.push('-');
            pending.clear();
        }
    };
    for c in name.chars() {
        if (' '..='~').contains(&c) {
            flush(&mut pending, &mut out);
            if c == '&' {
                out.push_str("&-");
            } else {
                out.push(c);
            }
        } else {
            let mut units = [0u16; 2];
            pending.extend_from_slice(c.encode_utf16(&mut units));
        }
    }
    flush(&mut pending, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(tag: Option<&str>, kind: Kind, code: Option<&str>, text: &str) -> Resp {
        Resp::Status {
            tag: tag.map(str::to_string),
            kind,
            code: code.map(str::to_string),
            text: text.to_string(),
        }
    }

    #[test]
    fn appenduid_single_and_multi() {
        // RFC 4315 3: resp-code-apnd = "APPENDUID" SP nz-number SP append-uid
        assert_eq!(
            parse(b"a1 OK [APPENDUID 38505 3955] APPEND completed\r\n").unwrap(),
            status(
                Some("a1"),
                Kind::Ok,
                Some("APPENDUID 38505 3955"),
                "[APPENDUID 38505 3955] APPEND completed"
            )
        );
        // MULTIAPPEND: a uid-set, which imap-codec keeps as an unknown code.
        assert_eq!(
            parse(b"a2 OK [APPENDUID 38505 3955:3957,3960] Append completed.\r\n").unwrap(),
            status(
                Some("a2"),
                Kind::Ok,
                Some("APPENDUID 38505 3955:3957,3960"),
                "[APPENDUID 38505 3955:3957,3960] Append completed."
            )
        );
    }

    #[test]
    fn binary_literal8_fetch() {
        // RFC 3516 4.2: "BINARY" section-binary SP (nstring / literal8)
        let mut raw = b"* 3 FETCH (UID 12 BINARY[1] ~{4}\r\n".to_vec();
        raw.extend_from_slice(&[0, 255, b'\r', b'\n']);
        raw.extend_from_slice(b")\r\n");
        assert_eq!(
            parse(&raw).unwrap(),
            Resp::Fetch {
                seq: 3,
                uid: Some(12),
                data: Some(Bytes::from(vec![0, 255, b'\r', b'\n'])),
                meta: None,
            }
        );
        // Partial: imap-codec has no origin for BINARY; the own parser takes over.
        let mut raw = b"* 3 FETCH (UID 12 BINARY[1]<2> ~{2}\r\n".to_vec();
        raw.extend_from_slice(&[0, 1]);
        raw.extend_from_slice(b" FLAGS (\\Seen))\r\n");
        assert_eq!(
            parse(&raw).unwrap(),
            Resp::Fetch {
                seq: 3,
                uid: Some(12),
                data: Some(Bytes::from(vec![0, 1])),
                meta: Some(Box::new(Meta {
                    flags: Some(vec!["\\Seen".to_string()]),
                    ..Meta::default()
                })),
            }
        );
        // NUL inside a plain literal (imap-codec refuses it).
        let mut raw = b"* 4 FETCH (BODY[TEXT] {3}\r\na".to_vec();
        raw.extend_from_slice(&[0, b'b']);
        raw.extend_from_slice(b" UID 13 MODSEQ (42))\r\n");
        assert_eq!(
            parse(&raw).unwrap(),
            Resp::Fetch {
                seq: 4,
                uid: Some(13),
                data: Some(Bytes::from_static(b"a\0b")),
                meta: Some(Box::new(Meta {
                    modseq: Some(42),
                    ..Meta::default()
                })),
            }
        );
    }

    #[test]
    fn large_literals_are_cut_out_before_the_codec_and_come_back_whole() {
        let seen = || {
            Some(Box::new(Meta {
                flags: Some(vec!["\\Seen".to_string()]),
                ..Meta::default()
            }))
        };
        let body: Vec<u8> = (0..LITERAL_CUT_MIN + 7)
            .map(|i| b'A' + (i % 26) as u8)
            .collect();
        let fetch = |item: &str, data: &[u8]| {
            let mut raw = format!("* 9 FETCH (UID 41 {item} {{{}}}\r\n", data.len()).into_bytes();
            raw.extend_from_slice(data);
            raw.extend_from_slice(b" FLAGS (\\Seen))\r\n");
            raw
        };
        let raw = fetch("BODY[]", &body);
        let expected = Resp::Fetch {
            seq: 9,
            uid: Some(41),
            data: Some(Bytes::from(body.clone())),
            meta: seen(),
        };
        let header = format!("* 9 FETCH (UID 41 BODY[] {{{}}}\r\n", body.len()).len();
        assert_eq!(
            parse_cutting_literal(&raw),
            Some((9, Some(41), header..header + body.len(), seen()))
        );
        // The same as imap-codec parsing it whole.
        let (_, whole) = ResponseCodec::default().decode(&raw).unwrap();
        assert_eq!(from_codec(&raw, whole), expected);
        assert_eq!(parse(&raw).unwrap(), expected);
        // A literal8 with NUL and CRLF inside.
        let mut binary = body.clone();
        binary[10..14].copy_from_slice(&[0, b'\r', b'\n', 0]);
        let mut raw = format!("* 9 FETCH (UID 41 BINARY[1] ~{{{}}}\r\n", binary.len()).into_bytes();
        raw.extend_from_slice(&binary);
        raw.extend_from_slice(b")\r\n");
        assert_eq!(
            parse(&raw).unwrap(),
            Resp::Fetch {
                seq: 9,
                uid: Some(41),
                data: Some(Bytes::from(binary)),
                meta: None,
            }
        );
        // Two large literals, a literal announced past the end, or no FETCH: not cut.
        let mut two = format!("* 9 FETCH (UID 41 BODY[1] {{{}}}\r\n", body.len()).into_bytes();
        two.extend_from_slice(&body);
        two.extend_from_slice(format!(" BODY[2] {{{}}}\r\n", body.len()).as_bytes());
        two.extend_from_slice(&body);
        two.extend_from_slice(b")\r\n");
        assert_eq!(parse_cutting_literal(&two), None);
        let mut short = fetch("BODY[]", &body);
        short.truncate(short.len() - 100);
        assert_eq!(parse_cutting_literal(&short), None);
        let mut list = format!("* LIST () \"/\" {{{}}}\r\n", body.len()).into_bytes();
        list.extend_from_slice(&body);
        list.extend_from_slice(b"\r\n");
        assert_eq!(parse_cutting_literal(&list), None);
    }

    #[test]
    fn header_fields_fetch() {
        let raw = b"* 1 FETCH (UID 7 BODY[HEADER.FIELDS (X-MAILFS-ID)] {34}\r\nX-Mailfs-Id: abc\r\n def\r\nFoo: x\r\n\r\n)\r\n";
        let resp = parse(raw).unwrap();
        let Resp::Fetch {
            uid: Some(7),
            data: Some(data),
            ..
        } = resp
        else {
            panic!("{resp:?}")
        };
        assert_eq!(header_value(&data, "x-mailfs-id"), "abc def");
        assert_eq!(header_value(&data, "foo"), "x");
        assert_eq!(header_value(b"\r\n", "foo"), "");
        // Fallback parser on the same item (MODSEQ list forces nothing, but check it).
        let mut p = Cursor { b: raw, i: 2 };
        p.token();
        p.sp().unwrap();
        p.token();
        p.sp().unwrap();
        assert!(matches!(
            fetch(&mut p, 1).unwrap(),
            Resp::Fetch {
                uid: Some(7),
                data: Some(_),
                ..
            }
        ));
        assert_eq!(
            parse(b"* 2 FETCH (UID 8 BODY[HEADER.FIELDS (X-A)] NIL)\r\n").unwrap(),
            Resp::Fetch {
                seq: 2,
                uid: Some(8),
                data: None,
                meta: None,
            }
        );
    }

    #[test]
    fn search_and_esearch() {
        assert_eq!(
            parse(b"* SEARCH 2 84 882\r\n").unwrap(),
            Resp::Search(vec![2, 84, 882])
        );
        assert_eq!(parse(b"* SEARCH\r\n").unwrap(), Resp::Search(vec![]));
        // RFC 4731 3.1 example
        assert_eq!(
            parse(b"* ESEARCH (TAG \"A283\") UID ALL 2,10:11\r\n").unwrap(),
            Resp::Search(vec![2, 10, 11])
        );
        assert_eq!(
            parse(b"* ESEARCH (TAG \"A284\") UID COUNT 0\r\n").unwrap(),
            Resp::Search(vec![])
        );
    }

    #[test]
    fn quota() {
        // RFC 2087 5.1
        assert_eq!(
            parse(b"* QUOTA \"User quota\" (STORAGE 10 512 MESSAGE 1 1000)\r\n").unwrap(),
            Resp::Quota(vec![
                ("STORAGE".to_string(), 10, 512),
                ("MESSAGE".to_string(), 1, 1000)
            ])
        );
        assert_eq!(
            parse(b"* QUOTAROOT INBOX \"User quota\"\r\n").unwrap(),
            Resp::Other
        );
    }

    #[test]
    fn no_bad_bye() {
        assert_eq!(
            parse(b"a3 NO [ALREADYEXISTS] Mailbox already exists\r\n").unwrap(),
            status(
                Some("a3"),
                Kind::No,
                Some("ALREADYEXISTS"),
                "[ALREADYEXISTS] Mailbox already exists"
            )
        );
        assert_eq!(
            parse(b"a4 BAD Error in IMAP command UID: Invalid arguments.\r\n").unwrap(),
            status(
                Some("a4"),
                Kind::Bad,
                None,
                "Error in IMAP command UID: Invalid arguments."
            )
        );
        assert_eq!(
            parse(b"* BYE Server shutting down.\r\n").unwrap(),
            Resp::Bye("Server shutting down.".to_string())
        );
        assert_eq!(parse(b"+ OK\r\n").unwrap(), Resp::Continue);
        assert_eq!(parse(b"+\r\n").unwrap(), Resp::Continue);
    }

    #[test]
    fn select_transcript() {
        let t: &[&[u8]] = &[
            b"* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)\r\n",
            b"* OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft \\*)] Flags permitted.\r\n",
            b"* 20 EXISTS\r\n",
            b"* 0 RECENT\r\n",
            b"* OK [UIDVALIDITY 1700000000] UIDs valid\r\n",
            b"* OK [UIDNEXT 21] Predicted next UID\r\n",
            b"* OK [HIGHESTMODSEQ 5] Highest\r\n",
            b"a5 OK [READ-WRITE] Select completed (0.001 + 0.000 secs).\r\n",
        ];
        let got: Vec<Resp> = t.iter().map(|r| parse(r).unwrap()).collect();
        assert_eq!(got[2], Resp::Exists(20));
        assert_eq!(
            got[4],
            status(
                None,
                Kind::Ok,
                Some("UIDVALIDITY 1700000000"),
                "[UIDVALIDITY 1700000000] UIDs valid"
            )
        );
        assert!(matches!(&got[7], Resp::Status { tag: Some(t), kind: Kind::Ok, .. } if t == "a5"));
        assert_eq!(
            parse(b"* CAPABILITY IMAP4rev1 LITERAL+ BINARY APPENDLIMIT=100 AUTH=PLAIN\r\n")
                .unwrap(),
            Resp::Capability(
                [
                    "IMAP4REV1",
                    "LITERAL+",
                    "BINARY",
                    "APPENDLIMIT=100",
                    "AUTH=PLAIN"
                ]
                .map(String::from)
                .to_vec()
            )
        );
    }

    #[test]
    fn garbage_fetch_is_an_error() {
        assert!(matches!(
            parse(b"* 1 FETCH (UID\r\n"),
            Err(Error::Protocol(_))
        ));
        assert!(matches!(
            parse(b"* 1 FETCH (UID x)\r\n"),
            Err(Error::Protocol(_))
        ));
    }

    #[test]
    fn mailbox_names() {
        // RFC 3501 5.1.3 example
        assert_eq!(
            utf7_encode("~peter/mail/台北/日本語"),
            "~peter/mail/&U,BTFw-/&ZeVnLIqe-"
        );
        assert_eq!(utf7_encode("A&B"), "A&-B");
        assert_eq!(mailbox("a\"b\\c"), b"\"a\\\"b\\\\c\"".to_vec());
        assert_eq!(mailbox("x\r\ny"), b"\"x&AA0ACg-y\"".to_vec());
        assert!(can_quote(b"pw 1"));
        assert!(!can_quote("pä".as_bytes()));
    }

    #[test]
    fn fetch_with_flags_internaldate_and_modseq() {
        let meta = |flags: &[&str], date, modseq| {
            Some(Box::new(Meta {
                flags: Some(flags.iter().map(|f| f.to_string()).collect()),
                internal_date: date,
                modseq,
            }))
        };
        // MODSEQ: our own parser (imap-codec may not know it).
        let r = parse(
            b"* 2 FETCH (UID 9 FLAGS (\\Seen $Junk \\Recent) INTERNALDATE \" 7-Jul-1996 02:44:25 -0700\" MODSEQ (12345) BODY[] {3}\r\nabc)\r\n",
        )
        .unwrap();
        assert_eq!(
            r,
            Resp::Fetch {
                seq: 2,
                uid: Some(9),
                data: Some(Bytes::from_static(b"abc")),
                meta: meta(
                    &["\\Seen", "$Junk", "\\Recent"],
                    Some(836_732_665),
                    Some(12345)
                ),
            }
        );
        let r = parse(b"* 1 FETCH (UID 4 FLAGS () MODSEQ (7))\r\n").unwrap();
        assert_eq!(
            r,
            Resp::Fetch {
                seq: 1,
                uid: Some(4),
                data: None,
                meta: meta(&[], None, Some(7)),
            }
        );
        // Without MODSEQ, through imap-codec.
        let r = parse(b"* 1 FETCH (UID 4 FLAGS (\\Answered kw))\r\n").unwrap();
        assert_eq!(
            r,
            Resp::Fetch {
                seq: 1,
                uid: Some(4),
                data: None,
                meta: meta(&["\\Answered", "kw"], None, None),
            }
        );
        // A large literal is still cut out, and the attributes kept.
        let body = vec![b'x'; LITERAL_CUT_MIN + 10];
        let mut wire = format!(
            "* 3 FETCH (UID 5 FLAGS (\\Flagged) INTERNALDATE \"01-Jan-1970 00:00:10 +0000\" MODSEQ (99) BODY[] {{{}}}\r\n",
            body.len()
        )
        .into_bytes();
        wire.extend_from_slice(&body);
        wire.extend_from_slice(b")\r\n");
        assert_eq!(
            parse_owned(wire).unwrap(),
            Resp::Fetch {
                seq: 3,
                uid: Some(5),
                data: Some(Bytes::from(body)),
                meta: meta(&["\\Flagged"], Some(10), Some(99)),
            }
        );
    }

    #[test]
    fn dates_and_list_names() {
        assert_eq!(internal_date("01-Jan-1970 00:00:00 +0000"), Some(0));
        assert_eq!(
            internal_date("29-Feb-2024 12:00:00 +0100"),
            Some(1_709_204_400)
        );
        assert_eq!(internal_date("31-Foo-2024 12:00:00 +0100"), None);
        assert_eq!(
            utf7_decode(b"Entw&APw-rfe").as_deref(),
            Some("Entw\u{fc}rfe")
        );
        assert_eq!(utf7_decode(b"a&-b").as_deref(), Some("a&b"));
        assert_eq!(utf7_decode(b"&Jjo-"), Some("\u{263a}".to_string()));
        assert_eq!(utf7_decode(b"bad&"), None);
        assert_eq!(
            parse(b"* LIST (\\HasNoChildren) \"/\" \"Archive/Entw&APw-rfe\"\r\n").unwrap(),
            Resp::List {
                name: "Archive/Entw\u{fc}rfe".into(),
                delimiter: Some('/'),
                selectable: true
            }
        );
        assert_eq!(
            parse(b"* LIST (\\Noselect) \"/\" Archive\r\n").unwrap(),
            Resp::List {
                name: "Archive".into(),
                delimiter: Some('/'),
                selectable: false
            }
        );
        assert_eq!(
            parse(b"* LIST () \"/\" INBOX\r\n").unwrap(),
            Resp::List {
                name: "INBOX".into(),
                delimiter: Some('/'),
                selectable: true
            }
        );
    }
}
