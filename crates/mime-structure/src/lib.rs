//! A message's MIME structure in the forms IMAP answers with: the ENVELOPE, BODYSTRUCTURE and
//! BODY wire strings (RFC 9051 7.5.2) and the byte ranges of every part (for BODY[section],
//! RFC 9051 6.4.5).
//!
//! It is computed once, when mail arrives, and stored next to the message
//! ([`Structure::to_bytes`]), so FETCH never parses a message again. mail-parser does the MIME
//! parsing; this crate only walks its part tree and writes IMAP.
//!
//! Hostile mail cannot make the structure large: parts deeper than [`DEPTH_MAX`] are treated
//! as opaque leaves, and at most [`PARTS_MAX`] parts are described.

use std::ops::Range;

use mail_parser::{Address, Message, MessageParser, MimeHeaders, PartType};

/// Nesting of multiparts and encapsulated messages followed; deeper parts are leaves.
pub const DEPTH_MAX: usize = 32;
/// Parts described; further parts are left out of BODYSTRUCTURE and the part table.
pub const PARTS_MAX: usize = 5_000;
/// Header fields longer than this are cut in the envelope.
pub const FIELD_BYTES_MAX: usize = 8192;

const FORMAT_VERSION: u8 = 1;

/// A part's Content-Transfer-Encoding (RFC 2045 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    SevenBit,
    EightBit,
    Binary,
    Base64,
    QuotedPrintable,
    /// Unknown: BINARY fetch must answer `NO [UNKNOWN-CTE]` (RFC 3516 4.3).
    Other,
}

impl Encoding {
    fn from_name(name: &str) -> Encoding {
        match name.trim().to_ascii_lowercase().as_str() {
            "" | "7bit" => Encoding::SevenBit,
            "8bit" => Encoding::EightBit,
            "binary" => Encoding::Binary,
            "base64" => Encoding::Base64,
            "quoted-printable" => Encoding::QuotedPrintable,
            _ => Encoding::Other,
        }
    }

    fn code(self) -> u8 {
        match self {
            Encoding::SevenBit => 0,
            Encoding::EightBit => 1,
            Encoding::Binary => 2,
            Encoding::Base64 => 3,
            Encoding::QuotedPrintable => 4,
            Encoding::Other => 5,
        }
    }

    fn from_code(code: u8) -> Option<Encoding> {
        Some(match code {
            0 => Encoding::SevenBit,
            1 => Encoding::EightBit,
            2 => Encoding::Binary,
            3 => Encoding::Base64,
            4 => Encoding::QuotedPrintable,
            5 => Encoding::Other,
            _ => return None,
        })
    }
}

/// One addressable part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    path: Vec<u32>,
    mime_header: Range<u64>,
    body: Range<u64>,
    encoding: Encoding,
    /// For message/rfc822: the encapsulated message's header and text.
    message: Option<(Range<u64>, Range<u64>)>,
}

impl Part {
    /// `[n.MIME]`: the part's own MIME header.
    pub fn mime_header_range(&self) -> Range<u64> {
        self.mime_header.clone()
    }
    /// `[n]`: the part's contents, still transfer-encoded.
    pub fn body_range(&self) -> Range<u64> {
        self.body.clone()
    }
    /// `[n.HEADER]` of a message/rfc822 part.
    pub fn message_header_range(&self) -> Option<Range<u64>> {
        self.message.as_ref().map(|m| m.0.clone())
    }
    /// `[n.TEXT]` of a message/rfc822 part.
    pub fn message_text_range(&self) -> Option<Range<u64>> {
        self.message.as_ref().map(|m| m.1.clone())
    }
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
}

/// The structure of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Structure {
    envelope: Vec<u8>,
    body_structure: Vec<u8>,
    body: Vec<u8>,
    header: Range<u64>,
    text: Range<u64>,
    parts: Vec<Part>,
}

/// A stored structure that cannot be read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

/// BINARY of a part whose Content-Transfer-Encoding is unknown (RFC 3516 4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownCte;

/// Where in the original content a (possibly nested) message's offsets start.
struct Walk<'a> {
    content: &'a [u8],
    parts: Vec<Part>,
}

impl Structure {
    /// Parses once. Never panics; anything mail-parser cannot make sense of is described as
    /// a single text/plain part.
    pub fn parse(content: &[u8]) -> Structure {
        let parsed = MessageParser::default().parse(content);
        let mut walk = Walk {
            content,
            parts: Vec::new(),
        };
        match parsed {
            Some(message) if !message.parts.is_empty() => {
                let (header, text) = message_ranges(&message, 0, content.len() as u64);
                let envelope = envelope(&message, content, 0);
                let (body_structure, body) = walk.message(&message, 0, &[], 0);
                walk.parts.sort_by(|a, b| a.path.cmp(&b.path));
                Structure {
                    envelope,
                    body_structure,
                    body,
                    header,
                    text,
                    parts: walk.parts,
                }
            }
            _ => Structure::plain(content),
        }
    }

    /// A message mail-parser could not parse: one text/plain body, no header.
    fn plain(content: &[u8]) -> Structure {
        let len = content.len() as u64;
        let lines = line_count(content);
        let body = format!(
            "(\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" {len} {lines})"
        );
        let ext = format!(
            "(\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" {len} {lines} NIL NIL NIL NIL)"
        );
        Structure {
            envelope: b"(NIL NIL NIL NIL NIL NIL NIL NIL NIL NIL)".to_vec(),
            body_structure: ext.into_bytes(),
            body: body.into_bytes(),
            header: 0..0,
            text: 0..len,
            parts: vec![Part {
                path: vec![1],
                mime_header: 0..0,
                body: 0..len,
                encoding: Encoding::SevenBit,
                message: None,
            }],
        }
    }

    pub fn envelope(&self) -> &[u8] {
        &self.envelope
    }
    pub fn body_structure(&self) -> &[u8] {
        &self.body_structure
    }
    pub fn body(&self) -> &[u8] {
        &self.body
    }
    /// The top-level header, blank line included (`[HEADER]`).
    pub fn header_range(&self) -> Range<u64> {
        self.header.clone()
    }
    /// The top-level body (`[TEXT]`).
    pub fn text_range(&self) -> Range<u64> {
        self.text.clone()
    }
    /// A part by section path (RFC 9051 6.4.5).
    pub fn part(&self, path: &[u32]) -> Option<&Part> {
        self.parts
            .binary_search_by(|p| p.path.as_slice().cmp(path))
            .ok()
            .map(|i| &self.parts[i])
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![FORMAT_VERSION];
        for blob in [&self.envelope, &self.body_structure, &self.body] {
            put_u32(&mut out, blob.len() as u32);
            out.extend_from_slice(blob);
        }
        put_range(&mut out, &self.header);
        put_range(&mut out, &self.text);
        put_u32(&mut out, self.parts.len() as u32);
        for p in &self.parts {
            out.push(p.path.len() as u8);
            for n in &p.path {
                put_u32(&mut out, *n);
            }
            put_range(&mut out, &p.mime_header);
            put_range(&mut out, &p.body);
            out.push(p.encoding.code());
            match &p.message {
                Some((h, t)) => {
                    out.push(1);
                    put_range(&mut out, h);
                    put_range(&mut out, t);
                }
                None => out.push(0),
            }
        }
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Structure, DecodeError> {
        let mut r = Reader { bytes, pos: 0 };
        if r.u8()? != FORMAT_VERSION {
            return Err(DecodeError("unknown structure version".into()));
        }
        let envelope = r.blob()?;
        let body_structure = r.blob()?;
        let body = r.blob()?;
        let header = r.range()?;
        let text = r.range()?;
        let count = r.u32()? as usize;
        if count > PARTS_MAX + 1 {
            return Err(DecodeError("too many parts".into()));
        }
        let mut parts = Vec::with_capacity(count);
        for _ in 0..count {
            let depth = r.u8()? as usize;
            let mut path = Vec::with_capacity(depth);
            for _ in 0..depth {
                path.push(r.u32()?);
            }
            let mime_header = r.range()?;
            let body = r.range()?;
            let encoding =
                Encoding::from_code(r.u8()?).ok_or_else(|| DecodeError("bad encoding".into()))?;
            let message = match r.u8()? {
                0 => None,
                1 => Some((r.range()?, r.range()?)),
                _ => return Err(DecodeError("bad part kind".into())),
            };
            parts.push(Part {
                path,
                mime_header,
                body,
                encoding,
                message,
            });
        }
        if r.pos != bytes.len() {
            return Err(DecodeError("trailing bytes".into()));
        }
        if parts.windows(2).any(|w| w[0].path >= w[1].path) {
            return Err(DecodeError("parts out of order".into()));
        }
        Ok(Structure {
            envelope,
            body_structure,
            body,
            header,
            text,
            parts,
        })
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_range(out: &mut Vec<u8>, r: &Range<u64>) {
    put_u32(out, r.start as u32);
    put_u32(out, r.end as u32);
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| DecodeError("truncated structure".into()))?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn blob(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn range(&mut self) -> Result<Range<u64>, DecodeError> {
        let start = self.u32()? as u64;
        let end = self.u32()? as u64;
        if end < start {
            return Err(DecodeError("bad range".into()));
        }
        Ok(start..end)
    }
}

/// The header and text ranges of a (nested) message whose offsets start at `base`.
fn message_ranges(message: &Message<'_>, base: u64, end: u64) -> (Range<u64>, Range<u64>) {
    let root = &message.parts[0];
    let header = base + root.offset_header as u64..base + root.offset_body as u64;
    let text_end = (base + root.offset_end as u64)
        .max(header.end)
        .min(end.max(header.end));
    let text = header.end..text_end;
    (header, text)
}

impl Walk<'_> {
    /// Describes `message` (whose offsets start at `base`) as the body at `path`; returns
    /// (BODYSTRUCTURE, BODY) of its root part.
    fn message(
        &mut self,
        message: &Message<'_>,
        base: u64,
        path: &[u32],
        depth: usize,
    ) -> (Vec<u8>, Vec<u8>) {
        // A non-multipart message's only part is "1" (RFC 9051 6.4.5).
        let root_is_multi = matches!(message.parts[0].body, PartType::Multipart(_));
        let child_path = |n: u32| {
            let mut p = path.to_vec();
            p.push(n);
            p
        };
        if root_is_multi {
            self.part(message, 0, base, path, depth)
        } else {
            self.part(message, 0, base, &child_path(1), depth)
        }
    }

    /// Describes part `id` of `message` at `path`: pushes it to the part table, returns its
    /// (BODYSTRUCTURE, BODY).
    fn part(
        &mut self,
        message: &Message<'_>,
        id: usize,
        base: u64,
        path: &[u32],
        depth: usize,
    ) -> (Vec<u8>, Vec<u8>) {
        let Some(part) = message.parts.get(id) else {
            return (b"NIL".to_vec(), b"NIL".to_vec());
        };
        let clamp = |v: u64| v.min(self.content.len() as u64);
        let header = clamp(base + part.offset_header as u64)..clamp(base + part.offset_body as u64);
        let body = clamp(base + part.offset_body as u64)
            ..clamp((base + part.offset_end as u64).max(base + part.offset_body as u64));
        let ct = part.content_type();
        let (c_type, c_subtype) = match ct {
            Some(ct) => (
                ct.c_type.to_string(),
                ct.c_subtype.as_deref().unwrap_or("").to_string(),
            ),
            None => ("text".to_string(), "plain".to_string()),
        };
        let params = params_of(ct.and_then(|c| c.attributes.as_deref()), ct.is_none());
        if let PartType::Multipart(children) = &part.body
            && depth < DEPTH_MAX
        {
            if !path.is_empty() {
                self.push(Part {
                    path: path.to_vec(),
                    mime_header: header.clone(),
                    body: body.clone(),
                    encoding: Encoding::SevenBit,
                    message: None,
                });
            }
            let mut ext = b"(".to_vec();
            let mut plain = b"(".to_vec();
            for (n, &child) in children.iter().enumerate() {
                if self.parts.len() >= PARTS_MAX {
                    break;
                }
                let mut p = path.to_vec();
                p.push(n as u32 + 1);
                let (e, b) = self.part(message, child as usize, base, &p, depth + 1);
                ext.extend_from_slice(&e);
                plain.extend_from_slice(&b);
            }
            if children.is_empty() {
                // RFC 9051 9 body-type-mpart needs a body; an empty multipart gets an empty
                // text part.
                let empty = b"(\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" 0 0)";
                ext.extend_from_slice(empty);
                plain.extend_from_slice(empty);
            }
            let sub = quoted(&c_subtype);
            plain.extend_from_slice(format!(" {sub})").as_bytes());
            ext.extend_from_slice(
                format!(
                    " {sub} {params} {} {} {})",
                    disposition(part),
                    language(part, self.content, base),
                    location(part)
                )
                .as_bytes(),
            );
            return (ext, plain);
        }
        let encoding_name = raw_header(part, self.content, base, "content-transfer-encoding")
            .map(|v| String::from_utf8_lossy(&v).trim().to_string())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "7bit".to_string());
        let encoding = Encoding::from_name(&encoding_name);
        let size = body.end - body.start;
        let lines = line_count(&self.content[body.start as usize..body.end as usize]);
        let id_field = nstring(raw_header(part, self.content, base, "content-id").as_deref());
        let desc = nstring(raw_header(part, self.content, base, "content-description").as_deref());
        let mut common = format!(
            "({} {} {params} {id_field} {desc} {} {size}",
            quoted(&c_type),
            quoted(&c_subtype),
            quoted(&encoding_name)
        )
        .into_bytes();
        let mut message_ranges_of = None;
        let is_message = c_type.eq_ignore_ascii_case("message")
            && (c_subtype.eq_ignore_ascii_case("rfc822")
                || c_subtype.eq_ignore_ascii_case("global"));
        let mut nested = None;
        if is_message
            && let PartType::Message(inner) = &part.body
            && !inner.parts.is_empty()
            && depth < DEPTH_MAX
        {
            {
                // mail-parser gives offsets relative to the whole message when the
                // encapsulated one is inside a multipart (they start where this body starts),
                // and relative to the part's body when it is the top-level body. Either way
                // they must land inside this body.
                let absolute = (inner.parts[0].offset_header as u64 + base) >= body.start
                    && inner.parts[0].offset_header != 0;
                let inner_base = if absolute { base } else { body.start };
                let (h, t) = message_ranges(inner, inner_base, body.end);
                if h.start >= body.start && t.end <= body.end {
                    message_ranges_of = Some((h, t));
                    nested = Some((inner, inner_base));
                }
            }
        }
        let mut plain = common.clone();
        if let Some((inner, inner_base)) = nested {
            let env = envelope(inner, self.content, inner_base);
            let (e, b) = self.message(inner, inner_base, path, depth + 1);
            common.push(b' ');
            common.extend_from_slice(&env);
            common.push(b' ');
            common.extend_from_slice(&e);
            common.extend_from_slice(format!(" {lines}").as_bytes());
            plain.push(b' ');
            plain.extend_from_slice(&env);
            plain.push(b' ');
            plain.extend_from_slice(&b);
            plain.extend_from_slice(format!(" {lines}").as_bytes());
        } else if c_type.eq_ignore_ascii_case("text") {
            common.extend_from_slice(format!(" {lines}").as_bytes());
            plain.extend_from_slice(format!(" {lines}").as_bytes());
        }
        plain.push(b')');
        common.extend_from_slice(
            format!(
                " NIL {} {} {})",
                disposition(part),
                language(part, self.content, base),
                location(part)
            )
            .as_bytes(),
        );
        self.push(Part {
            path: path.to_vec(),
            mime_header: header,
            body,
            encoding,
            message: message_ranges_of,
        });
        (common, plain)
    }

    fn push(&mut self, part: Part) {
        if self.parts.len() < PARTS_MAX {
            self.parts.push(part);
        }
    }
}

/// Lines of a body: a last line without its CRLF (the CRLF before a boundary belongs to the
/// boundary, RFC 2046 5.1.1) still counts.
fn line_count(body: &[u8]) -> usize {
    let newlines = body.iter().filter(|&&b| b == b'\n').count();
    newlines + usize::from(body.last().is_some_and(|&b| b != b'\n'))
}

/// A header field's raw value, unfolded and trimmed.
fn raw_header(
    part: &mail_parser::MessagePart<'_>,
    content: &[u8],
    base: u64,
    name: &str,
) -> Option<Vec<u8>> {
    let h = part
        .headers
        .iter()
        .find(|h| h.name.as_str().eq_ignore_ascii_case(name))?;
    let start = (base + h.offset_start as u64) as usize;
    let end = (base + h.offset_end as u64) as usize;
    let raw = content.get(start..end.min(content.len()))?;
    let mut value: Vec<u8> = raw
        .iter()
        .copied()
        .filter(|&b| b != b'\r' && b != b'\n')
        .collect();
    let trimmed = value.trim_ascii().to_vec();
    value = trimmed;
    value.truncate(FIELD_BYTES_MAX);
    Some(value)
}

fn quoted(s: &str) -> String {
    let mut out = Vec::new();
    write_nstring(&mut out, Some(s.as_bytes()));
    String::from_utf8_lossy(&out).into_owned()
}

fn nstring(v: Option<&[u8]>) -> String {
    let mut out = Vec::new();
    write_nstring(&mut out, v);
    String::from_utf8_lossy(&out).into_owned()
}

fn params_of(attributes: Option<&[mail_parser::Attribute<'_>]>, defaulted: bool) -> String {
    match attributes {
        Some(attrs) if !attrs.is_empty() => {
            let items: Vec<String> = attrs
                .iter()
                .map(|a| format!("{} {}", quoted(&a.name), quoted(&a.value)))
                .collect();
            format!("({})", items.join(" "))
        }
        // RFC 2045 5.2: no Content-Type means text/plain; charset=us-ascii.
        _ if defaulted => "(\"charset\" \"us-ascii\")".to_string(),
        _ => "NIL".to_string(),
    }
}

fn disposition(part: &mail_parser::MessagePart<'_>) -> String {
    match part.content_disposition() {
        Some(d) => format!(
            "({} {})",
            quoted(&d.c_type),
            params_of(d.attributes.as_deref(), false)
        ),
        None => "NIL".to_string(),
    }
}

fn language(part: &mail_parser::MessagePart<'_>, content: &[u8], base: u64) -> String {
    nstring(raw_header(part, content, base, "content-language").as_deref())
}

fn location(part: &mail_parser::MessagePart<'_>) -> String {
    nstring(part.content_location().map(str::as_bytes))
}

/// RFC 9051 7.5.2 ENVELOPE, from the raw header values (IMAP sends them undecoded).
fn envelope(message: &Message<'_>, content: &[u8], base: u64) -> Vec<u8> {
    let root = &message.parts[0];
    let field = |name: &str| raw_header(root, content, base, name);
    let mut out = b"(".to_vec();
    write_nstring(&mut out, field("date").as_deref());
    out.push(b' ');
    write_nstring(&mut out, field("subject").as_deref());
    let from = message.from();
    for list in [
        from,
        message.sender().or(from),
        message.reply_to().or(from),
        message.to(),
        message.cc(),
        message.bcc(),
    ] {
        out.push(b' ');
        write_addresses(&mut out, list);
    }
    out.push(b' ');
    write_nstring(&mut out, field("in-reply-to").as_deref());
    out.push(b' ');
    write_nstring(&mut out, field("message-id").as_deref());
    out.push(b')');
    out
}

fn write_addr(out: &mut Vec<u8>, a: &mail_parser::Addr<'_>) {
    out.push(b'(');
    write_nstring(out, a.name.as_deref().map(str::as_bytes));
    out.extend_from_slice(b" NIL ");
    match a.address.as_deref() {
        Some(addr) => match addr.rsplit_once('@') {
            Some((local, host)) => {
                write_nstring(out, Some(local.as_bytes()));
                out.push(b' ');
                write_nstring(out, Some(host.as_bytes()));
            }
            None => {
                write_nstring(out, Some(addr.as_bytes()));
                out.extend_from_slice(b" NIL");
            }
        },
        None => out.extend_from_slice(b"NIL NIL"),
    }
    out.push(b')');
}

fn write_addresses(out: &mut Vec<u8>, list: Option<&Address<'_>>) {
    let Some(list) = list else {
        out.extend_from_slice(b"NIL");
        return;
    };
    let start = out.len();
    out.push(b'(');
    match list {
        Address::List(addrs) => {
            for a in addrs.iter().take(1000) {
                write_addr(out, a);
            }
        }
        // RFC 9051 7.5.2: a group is (NIL NIL "name" NIL) members (NIL NIL NIL NIL).
        Address::Group(groups) => {
            for g in groups.iter().take(100) {
                match &g.name {
                    Some(name) => {
                        out.extend_from_slice(b"(NIL NIL ");
                        write_nstring(out, Some(name.as_bytes()));
                        out.extend_from_slice(b" NIL)");
                        for a in g.addresses.iter().take(1000) {
                            write_addr(out, a);
                        }
                        out.extend_from_slice(b"(NIL NIL NIL NIL)");
                    }
                    None => {
                        for a in g.addresses.iter().take(1000) {
                            write_addr(out, a);
                        }
                    }
                }
            }
        }
    }
    if out.len() == start + 1 {
        out.truncate(start);
        out.extend_from_slice(b"NIL");
    } else {
        out.push(b')');
    }
}

/// An IMAP nstring: NIL, a quoted string when the value is short 7-bit text, else a literal
/// (RFC 9051 4.3, 4.5).
pub fn write_nstring(out: &mut Vec<u8>, value: Option<&[u8]>) {
    let Some(value) = value else {
        out.extend_from_slice(b"NIL");
        return;
    };
    let quotable = value.len() <= 1024 && value.iter().all(|&b| (0x20..0x7f).contains(&b));
    if quotable {
        out.push(b'"');
        for &b in value {
            if b == b'"' || b == b'\\' {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.push(b'"');
    } else {
        out.extend_from_slice(format!("{{{}}}\r\n", value.len()).as_bytes());
        out.extend_from_slice(value);
    }
}

/// RFC 3516: a part's body with its transfer encoding undone.
pub fn decode_binary(encoding: Encoding, body: &[u8]) -> Result<Vec<u8>, UnknownCte> {
    match encoding {
        Encoding::SevenBit | Encoding::EightBit | Encoding::Binary => Ok(body.to_vec()),
        Encoding::Base64 => {
            let clean: Vec<u8> = body
                .iter()
                .copied()
                .filter(|b| !b.is_ascii_whitespace())
                .collect();
            Ok(mail_parser::decoders::base64::base64_decode(&clean).unwrap_or_default())
        }
        Encoding::QuotedPrintable => Ok(
            mail_parser::decoders::quoted_printable::quoted_printable_decode(body)
                .unwrap_or_default(),
        ),
        Encoding::Other => Err(UnknownCte),
    }
}

/// RFC 9051 6.4.5 HEADER.FIELDS / HEADER.FIELDS.NOT: the named fields (with their folded
/// lines) kept, or dropped, then the blank line that ends a header.
pub fn filter_header_fields(header: &[u8], names: &[&[u8]], not: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut keep = false;
    for line in header.split_inclusive(|&b| b == b'\n') {
        let bare = line.strip_suffix(b"\n").unwrap_or(line);
        let bare = bare.strip_suffix(b"\r").unwrap_or(bare);
        if bare.is_empty() {
            break;
        }
        if !(line[0] == b' ' || line[0] == b'\t') {
            let name = bare
                .split(|&b| b == b':')
                .next()
                .unwrap_or_default()
                .trim_ascii();
            let named = names.iter().any(|n| n.eq_ignore_ascii_case(name));
            keep = named != not;
        }
        if keep {
            out.extend_from_slice(bare);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests;
