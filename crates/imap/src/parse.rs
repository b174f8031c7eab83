//! From a whole command (lines and literals) to a [`Request`].
//!
//! imap-codec parses the grammar of RFC 3501 and its extensions. The few IMAP4rev2 forms it
//! does not know are parsed here: APPEND with several messages (MULTIAPPEND, RFC 3502),
//! LIST with selection and return options (LIST-EXTENDED RFC 5258, LIST-STATUS RFC 5819,
//! SPECIAL-USE RFC 6154), and SEARCH with RETURN options (ESEARCH RFC 4731, RFC 9051 6.4.4),
//! whose criteria imap-codec still parses once the RETURN part is taken off.

use imap_codec::CommandCodec;
use imap_codec::decode::{CommandDecodeError, Decoder};
use imap_codec::imap_types::IntoStatic;
use imap_codec::imap_types::command::CommandBody;
use imap_codec::imap_types::core::Vec1;
use imap_codec::imap_types::search::SearchKey;
use imap_codec::imap_types::utils::indicators::is_astring_char;
use mail_model::Flags;

use crate::framer::tag_of;

/// The items STATUS (and LIST ... RETURN (STATUS ...)) understands.
pub(crate) const STATUS_ITEMS: [&str; 9] = [
    "MESSAGES",
    "RECENT",
    "UIDNEXT",
    "UIDVALIDITY",
    "UNSEEN",
    "DELETED",
    "SIZE",
    "HIGHESTMODSEQ",
    "APPENDLIMIT",
];

pub(crate) enum Request {
    Codec(CommandBody<'static>),
    Append {
        mailbox: String,
        messages: Vec<AppendMessage>,
    },
    List(ListRequest),
    Search {
        uid: bool,
        /// `None`: a plain SEARCH (untagged SEARCH response); `Some`: ESEARCH.
        ret: Option<Vec<SearchReturn>>,
        criteria: Vec1<SearchKey<'static>>,
    },
    /// RFC 5267 3.2 ESORT: SORT with RETURN options; `body` is the SORT imap-codec parsed.
    SortReturn {
        ret: Vec<SearchReturn>,
        body: CommandBody<'static>,
    },
    /// RFC 5267 4.3.3: `CANCELUPDATE "tag" ...`.
    CancelUpdate(Vec<String>),
    /// RFC 6154 3: `CREATE name (USE (attrs))`; a CREATE without parameters goes to
    /// imap-codec.
    CreateSpecialUse {
        mailbox: String,
        uses: Vec<String>,
    },
}

pub(crate) struct AppendMessage {
    pub(crate) flags: Flags,
    pub(crate) keywords: Vec<String>,
    pub(crate) date: Option<i64>,
    pub(crate) data: AppendData,
}

pub(crate) enum AppendData {
    /// The message. A literal8 (RFC 3516 4.4) may contain NUL; a plain literal may not.
    Literal(Vec<u8>),
    /// RFC 4469 CATENATE: the message is these parts joined, in order.
    Catenate(Vec<CatenatePart>),
}

pub(crate) enum CatenatePart {
    /// `TEXT literal`: bytes as sent.
    Text(Vec<u8>),
    /// `URL astring`: an IMAP URL (RFC 5092) whose message or section goes here.
    Url(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SearchReturn {
    Min,
    Max,
    All,
    Count,
    /// RFC 5182 2.4: keep the result as `$`.
    Save,
    /// RFC 5267 4.4: the results from position `.0` to `.1` (1-based, inclusive).
    Partial(u32, u32),
    /// RFC 5267 4.3: tell the client as the results change, until CANCELUPDATE.
    Update,
    /// RFC 5267 4.2: a hint that more commands refine this search; nothing to do.
    Context,
}

#[derive(Debug, Default)]
pub(crate) struct ListRequest {
    pub(crate) lsub: bool,
    pub(crate) reference: String,
    pub(crate) patterns: Vec<String>,
    pub(crate) select_subscribed: bool,
    pub(crate) select_special_use: bool,
    pub(crate) recursive_match: bool,
    pub(crate) return_subscribed: bool,
    pub(crate) return_children: bool,
    pub(crate) return_special_use: bool,
    /// RFC 5819: STATUS items to return for each listed folder.
    pub(crate) return_status: Option<Vec<String>>,
    /// LIST-EXTENDED syntax was used: CHILDREN info is always given then (RFC 5258 4).
    pub(crate) extended: bool,
}

type ParseError = (Option<String>, String);

/// Parses a whole command. An error carries the tag, when there was a valid one, and the
/// text of the BAD response.
pub(crate) fn parse(bytes: &[u8]) -> Result<(String, Request), ParseError> {
    let Some(tag) = tag_of(bytes) else {
        return Err((None, "Invalid tag".into()));
    };
    let bad = |text: &str| (Some(tag.clone()), text.to_string());
    let mut c = Cursor::new(bytes);
    c.word();
    if !c.sp() {
        return Err(bad("Missing command"));
    }
    let name = c.word().to_ascii_uppercase();
    let result = match name.as_slice() {
        b"APPEND" => {
            parse_append(&mut c).map(|(mailbox, messages)| Request::Append { mailbox, messages })
        }
        b"LIST" => parse_list(&mut c, false).map(Request::List),
        b"LSUB" => parse_list(&mut c, true).map(Request::List),
        b"SEARCH" => return parse_search(bytes, &tag, c, false),
        b"SORT" => return parse_sort(bytes, &tag, c, false),
        b"CANCELUPDATE" => parse_cancel_update(&mut c).map(Request::CancelUpdate),
        b"CREATE" => match parse_create(c.clone()) {
            Some(parsed) => {
                parsed.map(|(mailbox, uses)| Request::CreateSpecialUse { mailbox, uses })
            }
            None => return codec(bytes, &tag),
        },
        b"UID" => {
            let mut peek = c.clone();
            if peek.sp() {
                let name = peek.word().to_ascii_uppercase();
                if name == b"SEARCH" {
                    return parse_search(bytes, &tag, peek, true);
                }
                if name == b"SORT" {
                    return parse_sort(bytes, &tag, peek, true);
                }
            }
            return codec(bytes, &tag);
        }
        _ => return codec(bytes, &tag),
    };
    result.map(|r| (tag.clone(), r)).map_err(|e| bad(&e))
}

fn codec(bytes: &[u8], tag: &str) -> Result<(String, Request), ParseError> {
    match CommandCodec::default().decode(bytes) {
        Ok((b"", command)) => Ok((tag.to_string(), Request::Codec(command.body.into_static()))),
        Ok(_) => Err((
            Some(tag.to_string()),
            "Unexpected data after command".into(),
        )),
        Err(CommandDecodeError::Failed)
        | Err(CommandDecodeError::Incomplete)
        | Err(CommandDecodeError::LiteralFound { .. }) => Err((
            Some(tag.to_string()),
            "Syntax error or unknown command".into(),
        )),
    }
}

/// `SEARCH [RETURN (opts)] [CHARSET x] criteria`: the RETURN part is ours, the rest goes
/// to imap-codec as a plain SEARCH.
fn parse_search(
    bytes: &[u8],
    tag: &str,
    mut c: Cursor<'_>,
    uid: bool,
) -> Result<(String, Request), ParseError> {
    let bad = |text: &str| (Some(tag.to_string()), text.to_string());
    let after_name = c.pos;
    let mut ret = None;
    let mut rest_start = after_name;
    let mut peek = c.clone();
    if peek.sp() && peek.word().eq_ignore_ascii_case(b"RETURN") {
        if !peek.sp() || !peek.eat(b'(') {
            return Err(bad("RETURN needs a list of options"));
        }
        let mut opts = return_options(&mut peek).map_err(bad)?;
        // RFC 4731 3.1: RETURN () means ALL.
        if opts.is_empty() {
            opts.push(SearchReturn::All);
        }
        ret = Some(opts);
        rest_start = peek.pos;
        c = peek;
    }
    let _ = c;
    // Rebuild `tag SEARCH <rest>` for imap-codec.
    let mut plain = Vec::with_capacity(bytes.len());
    plain.extend_from_slice(tag.as_bytes());
    plain.extend_from_slice(b" SEARCH");
    plain.extend_from_slice(&bytes[rest_start..]);
    match codec(&plain, tag)? {
        (tag, Request::Codec(CommandBody::Search { criteria, .. })) => {
            Ok((tag, Request::Search { uid, ret, criteria }))
        }
        _ => Err(bad("Bad SEARCH")),
    }
}

/// The options of `RETURN (` up to and including `)` (RFC 4731, RFC 5182, RFC 5267).
fn return_options(c: &mut Cursor<'_>) -> Result<Vec<SearchReturn>, &'static str> {
    let mut opts = Vec::new();
    loop {
        if c.eat(b')') {
            return Ok(opts);
        }
        if !opts.is_empty() && !c.sp() {
            return Err("Bad RETURN list");
        }
        let word = c.word().to_ascii_uppercase();
        opts.push(match word.as_slice() {
            b"MIN" => SearchReturn::Min,
            b"MAX" => SearchReturn::Max,
            b"ALL" => SearchReturn::All,
            b"COUNT" => SearchReturn::Count,
            b"SAVE" => SearchReturn::Save,
            b"UPDATE" => SearchReturn::Update,
            b"CONTEXT" => SearchReturn::Context,
            b"PARTIAL" => {
                // RFC 5267 4.4: partial-range = number ":" number.
                if !c.sp() {
                    return Err("PARTIAL needs a range");
                }
                let range = String::from_utf8_lossy(c.word()).into_owned();
                let (low, high) = range.split_once(':').ok_or("Bad PARTIAL range")?;
                let (low, high): (u32, u32) = (
                    low.parse().map_err(|_| "Bad PARTIAL range")?,
                    high.parse().map_err(|_| "Bad PARTIAL range")?,
                );
                if low == 0 || high == 0 {
                    return Err("Bad PARTIAL range");
                }
                SearchReturn::Partial(low.min(high), low.max(high))
            }
            b"" => return Err("Bad RETURN list"),
            _ => return Err("Unsupported RETURN option"),
        });
    }
}

/// `SORT RETURN (opts) (criteria) charset keys` (RFC 5267 3.2): the RETURN part is ours,
/// the rest goes to imap-codec as a plain SORT.
fn parse_sort(
    bytes: &[u8],
    tag: &str,
    c: Cursor<'_>,
    uid: bool,
) -> Result<(String, Request), ParseError> {
    let bad = |text: &str| (Some(tag.to_string()), text.to_string());
    let mut peek = c.clone();
    if !(peek.sp() && peek.word().eq_ignore_ascii_case(b"RETURN")) {
        return codec(bytes, tag);
    }
    if !peek.sp() || !peek.eat(b'(') {
        return Err(bad("RETURN needs a list of options"));
    }
    let mut ret = return_options(&mut peek).map_err(bad)?;
    // RFC 5267 3.2 (as RFC 4731 3.1): RETURN () means ALL.
    if ret.is_empty() {
        ret.push(SearchReturn::All);
    }
    let mut plain = Vec::with_capacity(bytes.len());
    plain.extend_from_slice(tag.as_bytes());
    plain.extend_from_slice(if uid { b" UID SORT" } else { b" SORT" });
    plain.extend_from_slice(&bytes[peek.pos..]);
    match codec(&plain, tag)? {
        (tag, Request::Codec(body @ CommandBody::Sort { .. })) => {
            Ok((tag, Request::SortReturn { ret, body }))
        }
        _ => Err(bad("Bad SORT")),
    }
}

/// `CREATE mailbox SP "(" "USE" SP "(" [attr *(SP attr)] ")" ")"` (RFC 6154 6). `None`: no
/// parameter list, a plain CREATE.
fn parse_create(mut c: Cursor<'_>) -> Option<Result<(String, Vec<String>), String>> {
    if !c.sp() {
        return None;
    }
    let mailbox = c.astring()?;
    if !c.sp() || c.peek() != Some(b'(') {
        return None;
    }
    let parsed = (|| {
        let mailbox = String::from_utf8(mailbox).map_err(|_| "Mailbox name is not UTF-8")?;
        c.eat(b'(');
        if !c.word().eq_ignore_ascii_case(b"USE") || !c.sp() || !c.eat(b'(') {
            return Err("Unknown CREATE parameter".to_string());
        }
        let mut uses = Vec::new();
        while !c.eat(b')') {
            if !uses.is_empty() && !c.sp() {
                return Err("Bad USE list".to_string());
            }
            let attr = c.flag().ok_or("Bad USE list")?;
            uses.push(String::from_utf8(attr).map_err(|_| "Bad USE list")?);
            if uses.len() > 16 {
                return Err("Too many USE attributes".to_string());
            }
        }
        if !c.eat(b')') || !c.at_end() {
            return Err("Bad CREATE parameters".to_string());
        }
        Ok((mailbox, uses))
    })();
    Some(parsed)
}

/// `CANCELUPDATE "tag" *(SP "tag")` (RFC 5267 4.3.3).
fn parse_cancel_update(c: &mut Cursor<'_>) -> Result<Vec<String>, String> {
    let mut tags = Vec::new();
    while c.sp() {
        let tag = c.quoted().ok_or("CANCELUPDATE takes quoted tags")?;
        tags.push(String::from_utf8(tag).map_err(|_| "Bad tag")?);
    }
    if tags.is_empty() || !c.at_end() {
        return Err("CANCELUPDATE takes quoted tags".into());
    }
    Ok(tags)
}

fn parse_append(c: &mut Cursor<'_>) -> Result<(String, Vec<AppendMessage>), String> {
    if !c.sp() {
        return Err("APPEND needs a mailbox".into());
    }
    let mailbox = c.astring().ok_or("Bad mailbox name")?;
    let mailbox = String::from_utf8(mailbox).map_err(|_| "Mailbox name is not UTF-8")?;
    let mut messages = Vec::new();
    // RFC 3502 6: append-data repeats.
    while c.sp() {
        let mut flags = Flags::EMPTY;
        let mut keywords = Vec::new();
        if c.eat(b'(') {
            let mut first = true;
            loop {
                if c.eat(b')') {
                    break;
                }
                if !first && !c.sp() {
                    return Err("Bad flag list".into());
                }
                first = false;
                let flag = c.flag().ok_or("Bad flag list")?;
                let flag = String::from_utf8(flag).map_err(|_| "Bad flag")?;
                if flag.starts_with('\\') {
                    match Flags::parse(&flag) {
                        Some(f) => flags |= f,
                        None if flag.eq_ignore_ascii_case("\\Recent") => {}
                        None => return Err(format!("Unknown flag {flag}")),
                    }
                } else {
                    keywords.push(flag);
                }
            }
            if !c.sp() {
                return Err("APPEND needs a message".into());
            }
        }
        let mut date = None;
        if c.peek() == Some(b'"') {
            let text = c.quoted().ok_or("Bad date-time")?;
            let text = String::from_utf8(text).map_err(|_| "Bad date-time")?;
            date = Some(parse_date_time(&text).ok_or("Bad date-time")?);
            if !c.sp() {
                return Err("APPEND needs a message".into());
            }
        }
        let catenate = c.peek().is_some_and(|b| b.eq_ignore_ascii_case(&b'C'));
        let data = if catenate {
            AppendData::Catenate(catenate_parts(c)?)
        } else {
            AppendData::Literal(append_literal(c)?)
        };
        messages.push(AppendMessage {
            flags,
            keywords,
            date,
            data,
        });
    }
    if messages.is_empty() {
        return Err("APPEND needs a message".into());
    }
    if !c.at_end() {
        return Err("Unexpected data after APPEND".into());
    }
    Ok((mailbox, messages))
}

/// A message literal: `literal`, `literal8` (RFC 3516 4.4), or RFC 6855 4's
/// `UTF8 (literal8)`, a message with UTF-8 headers.
fn append_literal(c: &mut Cursor<'_>) -> Result<Vec<u8>, String> {
    let utf8 = c.peek().is_some_and(|b| b.eq_ignore_ascii_case(&b'U'));
    if utf8 && (!c.word().eq_ignore_ascii_case(b"UTF8") || !c.sp() || !c.eat(b'(')) {
        return Err("Bad UTF8 append data".into());
    }
    let binary = c.eat(b'~');
    if utf8 && !binary {
        return Err("UTF8 append data is a literal8".into());
    }
    let content = c.literal().ok_or("APPEND needs a message literal")?;
    if utf8 && !c.eat(b')') {
        return Err("Bad UTF8 append data".into());
    }
    if !binary && content.contains(&0) {
        return Err("NUL in a literal; use literal8 (BINARY)".into());
    }
    Ok(content)
}

/// RFC 4469 5: `"CATENATE" SP "(" cat-part *(SP cat-part) ")"`, `cat-part = "TEXT" SP
/// literal / "URL" SP astring` (a TEXT may be a literal8, RFC 3516 4.4). The number of parts
/// is bounded by the command's size here and by `catenate_parts_max` when it runs.
fn catenate_parts(c: &mut Cursor<'_>) -> Result<Vec<CatenatePart>, String> {
    if !c.word().eq_ignore_ascii_case(b"CATENATE") || !c.sp() || !c.eat(b'(') {
        return Err("Bad CATENATE".into());
    }
    let mut parts = Vec::new();
    loop {
        if !parts.is_empty() && c.eat(b')') {
            return Ok(parts);
        }
        if !parts.is_empty() && !c.sp() {
            return Err("Bad CATENATE part list".into());
        }
        let kind = c.word().to_ascii_uppercase();
        if !c.sp() {
            return Err("Bad CATENATE part".into());
        }
        parts.push(match kind.as_slice() {
            b"TEXT" => {
                let binary = c.eat(b'~');
                let text = c.literal().ok_or("CATENATE TEXT needs a literal")?;
                if !binary && text.contains(&0) {
                    return Err("NUL in a literal; use literal8 (BINARY)".into());
                }
                CatenatePart::Text(text)
            }
            b"URL" => {
                let url = c.astring().ok_or("CATENATE URL needs a string")?;
                CatenatePart::Url(String::from_utf8(url).map_err(|_| "URL is not UTF-8")?)
            }
            _ => return Err("A CATENATE part is TEXT or URL".into()),
        });
    }
}

fn parse_list(c: &mut Cursor<'_>, lsub: bool) -> Result<ListRequest, String> {
    let mut req = ListRequest {
        lsub,
        ..ListRequest::default()
    };
    if !c.sp() {
        return Err("LIST needs arguments".into());
    }
    if !lsub && c.eat(b'(') {
        req.extended = true;
        let mut first = true;
        while !c.eat(b')') {
            if !first && !c.sp() {
                return Err("Bad selection options".into());
            }
            first = false;
            match c.word().to_ascii_uppercase().as_slice() {
                b"SUBSCRIBED" => req.select_subscribed = true,
                b"SPECIAL-USE" => req.select_special_use = true,
                b"RECURSIVEMATCH" => req.recursive_match = true,
                b"REMOTE" => {}
                _ => return Err("Unknown selection option".into()),
            }
        }
        // RFC 5258 3: RECURSIVEMATCH alone is an error.
        if req.recursive_match && !req.select_subscribed && !req.select_special_use {
            return Err("RECURSIVEMATCH needs another selection option".into());
        }
        if !c.sp() {
            return Err("LIST needs a reference".into());
        }
    }
    let reference = c.astring().ok_or("Bad reference")?;
    req.reference = String::from_utf8(reference).map_err(|_| "Reference is not UTF-8")?;
    if !c.sp() {
        return Err("LIST needs a mailbox pattern".into());
    }
    if !lsub && c.eat(b'(') {
        req.extended = true;
        loop {
            let p = c.list_mailbox().ok_or("Bad pattern")?;
            req.patterns
                .push(String::from_utf8(p).map_err(|_| "Pattern is not UTF-8")?);
            if c.eat(b')') {
                break;
            }
            if !c.sp() {
                return Err("Bad pattern list".into());
            }
        }
    } else {
        let p = c.list_mailbox().ok_or("Bad pattern")?;
        req.patterns
            .push(String::from_utf8(p).map_err(|_| "Pattern is not UTF-8")?);
    }
    if !lsub && c.sp() {
        if !c.word().eq_ignore_ascii_case(b"RETURN") || !c.sp() || !c.eat(b'(') {
            return Err("Bad return options".into());
        }
        req.extended = true;
        let mut first = true;
        while !c.eat(b')') {
            if !first && !c.sp() {
                return Err("Bad return options".into());
            }
            first = false;
            match c.word().to_ascii_uppercase().as_slice() {
                b"SUBSCRIBED" => req.return_subscribed = true,
                b"CHILDREN" => req.return_children = true,
                b"SPECIAL-USE" => req.return_special_use = true,
                b"STATUS" => {
                    if !c.sp() || !c.eat(b'(') {
                        return Err("STATUS needs a list".into());
                    }
                    let mut items = Vec::new();
                    while !c.eat(b')') {
                        if !items.is_empty() && !c.sp() {
                            return Err("Bad STATUS list".into());
                        }
                        let item =
                            String::from_utf8(c.word().to_ascii_uppercase()).unwrap_or_default();
                        if !STATUS_ITEMS.contains(&item.as_str()) {
                            return Err("Unknown STATUS item".into());
                        }
                        items.push(item);
                    }
                    req.return_status = Some(items);
                }
                _ => return Err("Unknown return option".into()),
            }
        }
    }
    if !c.at_end() {
        return Err("Unexpected data after LIST".into());
    }
    Ok(req)
}

/// RFC 9051 9 date-time: `dd-Mon-yyyy hh:mm:ss +zzzz` (day may be space-padded).
pub(crate) fn parse_date_time(text: &str) -> Option<i64> {
    let text = text.trim_start();
    chrono::DateTime::parse_from_str(text, "%d-%b-%Y %H:%M:%S %z")
        .ok()
        .map(|d| d.timestamp())
}

/// A position in a whole command.
#[derive(Clone)]
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, pos: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn sp(&mut self) -> bool {
        self.eat(b' ')
    }

    fn at_end(&self) -> bool {
        matches!(&self.bytes[self.pos..], b"\r\n" | b"\n" | b"")
    }

    /// Atom characters up to a space, parenthesis or line end.
    fn word(&mut self) -> &'a [u8] {
        let start = self.pos;
        while let Some(b) = self.peek() {
            if b == b' ' || b == b'(' || b == b')' || b == b'\r' || b == b'\n' {
                break;
            }
            self.pos += 1;
        }
        &self.bytes[start..self.pos]
    }

    fn flag(&mut self) -> Option<Vec<u8>> {
        let start = self.pos;
        let backslash = self.eat(b'\\');
        while let Some(b) = self.peek() {
            if !is_astring_char(b) || b == b']' {
                break;
            }
            self.pos += 1;
        }
        (self.pos > start + usize::from(backslash)).then(|| self.bytes[start..self.pos].to_vec())
    }

    fn quoted(&mut self) -> Option<Vec<u8>> {
        if !self.eat(b'"') {
            return None;
        }
        let mut out = Vec::new();
        loop {
            let b = self.peek()?;
            self.pos += 1;
            match b {
                b'"' => return Some(out),
                b'\\' => {
                    let e = self.peek()?;
                    if e != b'"' && e != b'\\' {
                        return None;
                    }
                    out.push(e);
                    self.pos += 1;
                }
                b'\r' | b'\n' | 0 => return None,
                _ => out.push(b),
            }
        }
    }

    fn literal(&mut self) -> Option<Vec<u8>> {
        if !self.eat(b'{') {
            return None;
        }
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        let n: usize = std::str::from_utf8(&self.bytes[start..self.pos])
            .ok()?
            .parse()
            .ok()?;
        self.eat(b'+');
        if !self.eat(b'}') {
            return None;
        }
        self.eat(b'\r');
        if !self.eat(b'\n') {
            return None;
        }
        let data = self.bytes.get(self.pos..self.pos.checked_add(n)?)?.to_vec();
        self.pos += n;
        Some(data)
    }

    fn astring(&mut self) -> Option<Vec<u8>> {
        match self.peek()? {
            b'"' => self.quoted(),
            b'{' => self.literal(),
            _ => {
                let start = self.pos;
                while self.peek().is_some_and(is_astring_char) {
                    self.pos += 1;
                }
                (self.pos > start).then(|| self.bytes[start..self.pos].to_vec())
            }
        }
    }

    /// RFC 9051 9 list-mailbox: list-chars (atom chars plus `%`, `*`, `]`) or a string.
    fn list_mailbox(&mut self) -> Option<Vec<u8>> {
        match self.peek()? {
            b'"' => self.quoted(),
            b'{' => self.literal(),
            _ => {
                let start = self.pos;
                while self
                    .peek()
                    .is_some_and(|b| is_astring_char(b) || b == b'%' || b == b'*')
                {
                    self.pos += 1;
                }
                (self.pos > start).then(|| self.bytes[start..self.pos].to_vec())
            }
        }
    }
}

#[cfg(test)]
mod tests;
