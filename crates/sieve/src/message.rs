//! The message a run looks at: its header fields split once per run (and edited in place
//! by editheader, RFC 5293), values decoded lazily (RFC 2047 encoded-words, RFC 5228
//! 2.7.2), the body parsed by mail-parser only when a `body` test asks.

use std::borrow::Cow;
use std::cell::OnceCell;

use mail_parser::parsers::MessageStream;
use mail_parser::{HeaderValue, MessageParser, PartType};

/// One header field: its name as written and its raw value (the bytes after the colon,
/// folding kept, without the final line break).
#[derive(Debug)]
pub(crate) struct Field {
    pub(crate) name: String,
    pub(crate) raw: Vec<u8>,
    decoded: OnceCell<String>,
    addresses: OnceCell<Vec<String>>,
}

impl Field {
    pub(crate) fn new(name: String, raw: Vec<u8>) -> Field {
        Field {
            name,
            raw,
            decoded: OnceCell::new(),
            addresses: OnceCell::new(),
        }
    }

    /// The addresses in the value (parsed once, for every address test of the run).
    pub(crate) fn addresses(&self) -> &[String] {
        self.addresses
            .get_or_init(|| crate::address::parse_list(&self.raw))
    }

    /// The value unfolded, encoded-words decoded, blanks trimmed.
    pub(crate) fn decoded(&self) -> &str {
        self.decoded.get_or_init(|| decode_value(&self.raw))
    }

    /// The value unfolded and trimmed, not decoded (for ids and dates).
    pub(crate) fn unfolded(&self) -> String {
        let unfolded: Vec<u8> = self
            .raw
            .iter()
            .copied()
            .filter(|&b| b != b'\r' && b != b'\n')
            .collect();
        String::from_utf8_lossy(&unfolded).trim().to_string()
    }
}

/// Unfolds and decodes a raw header value.
pub(crate) fn decode_value(raw: &[u8]) -> String {
    let unfolded: Vec<u8> = raw
        .iter()
        .copied()
        .filter(|&b| b != b'\r' && b != b'\n')
        .collect();
    if !unfolded.windows(2).any(|w| w == b"=?") {
        return String::from_utf8_lossy(&unfolded).trim().to_string();
    }
    let mut buf = unfolded;
    buf.extend_from_slice(b"\r\n");
    match MessageStream::new(&buf).parse_unstructured() {
        HeaderValue::Text(t) => t.trim().to_string(),
        _ => String::new(),
    }
}

/// A text part of the body, for the `body` test (RFC 5173).
#[derive(Debug)]
pub(crate) struct BodyPart {
    /// "type/subtype", lower-cased.
    pub(crate) content_type: String,
    pub(crate) text: String,
}

/// The message as a run sees it.
#[derive(Debug)]
pub(crate) struct Message<'a> {
    raw: Cow<'a, [u8]>,
    pub(crate) fields: Vec<Field>,
    /// Where the body starts in `raw` (after the blank line).
    body_start: usize,
    pub(crate) edited: bool,
    parts: OnceCell<Vec<BodyPart>>,
}

impl<'a> Message<'a> {
    pub(crate) fn new(raw: Cow<'a, [u8]>) -> Message<'a> {
        let (fields, body_start) = split_header(&raw);
        Message {
            raw,
            fields,
            body_start,
            edited: false,
            parts: OnceCell::new(),
        }
    }

    /// RFC 5228 5.9: the size of the message as it would be stored.
    pub(crate) fn size(&self) -> u64 {
        if self.edited {
            self.serialize().len() as u64
        } else {
            self.raw.len() as u64
        }
    }

    /// The raw body (after the header section).
    pub(crate) fn body(&self) -> &[u8] {
        &self.raw[self.body_start.min(self.raw.len())..]
    }

    /// Whether the header is followed by the empty line (RFC 5173 5: a message of a header
    /// only, without it, has no body, and every `body` test is false).
    pub(crate) fn has_body(&self) -> bool {
        let head = &self.raw[..self.body_start.min(self.raw.len())];
        self.body_start < self.raw.len()
            || head.ends_with(b"\n\n")
            || head.ends_with(b"\n\r\n")
            || head == b"\r\n"
            || head == b"\n"
    }

    /// The fields named `name` (case-insensitively), in order.
    pub(crate) fn fields_named<'s, 'n>(
        &'s self,
        name: &'n str,
    ) -> impl DoubleEndedIterator<Item = &'s Field> + Clone + use<'s, 'n> {
        self.fields
            .iter()
            .filter(move |f| f.name.eq_ignore_ascii_case(name))
    }

    /// The message with its edited header.
    pub(crate) fn serialize(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.raw.len() + 256);
        for f in &self.fields {
            out.extend_from_slice(f.name.as_bytes());
            out.push(b':');
            out.extend_from_slice(&f.raw);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(self.body());
        out
    }

    /// The body's parts for `body :text` and `:content`: every leaf part with its type,
    /// text parts decoded to text, the total bounded by `bytes_max`.
    pub(crate) fn body_parts(&self, bytes_max: usize) -> &[BodyPart] {
        self.parts.get_or_init(|| {
            let mut out = Vec::new();
            let Some(parsed) = MessageParser::default().parse(self.raw.as_ref()) else {
                return out;
            };
            let mut budget = bytes_max;
            collect_parts(&parsed, &mut budget, &mut out, 0);
            out
        })
    }
}

/// A header field's raw value in the part, as written.
fn raw_field<'r>(
    raw: &'r [u8],
    part: &mail_parser::MessagePart<'_>,
    name: &str,
) -> Option<std::borrow::Cow<'r, str>> {
    let h = part
        .headers
        .iter()
        .find(|h| h.name.as_str().eq_ignore_ascii_case(name))?;
    let value = raw.get(h.offset_start as usize..(h.offset_end as usize).min(raw.len()))?;
    Some(String::from_utf8_lossy(value))
}

/// Whether the part has no Content-Transfer-Encoding or one RFC 2045 6.1 defines.
fn known_encoding(raw: &[u8], part: &mail_parser::MessagePart<'_>) -> bool {
    raw_field(raw, part, "content-transfer-encoding").is_none_or(|v| {
        let v = v.trim();
        ["7bit", "8bit", "binary", "quoted-printable", "base64"]
            .iter()
            .any(|e| v.eq_ignore_ascii_case(e))
    })
}

/// Whether the part's Content-Type field starts with one `type "/" subtype` (RFC 2045
/// 5.1: tokens, one slash), as written in the raw message.
fn valid_media_type(raw: &[u8], part: &mail_parser::MessagePart<'_>) -> bool {
    let Some(value) = raw_field(raw, part, "content-type") else {
        return true;
    };
    let media = value.split(';').next().unwrap_or("");
    let token = |t: &str| {
        let t = t.trim();
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?=".contains(&b))
    };
    matches!(media.split_once('/'), Some((ty, sub)) if token(ty) && token(sub))
}

/// The parts of `message`, descending into message/rfc822 parts (RFC 5173 5.2: the search
/// "automatically descends into multipart and message/rfc822 MIME parts").
fn collect_parts(
    message: &mail_parser::Message<'_>,
    budget: &mut usize,
    out: &mut Vec<BodyPart>,
    depth: usize,
) {
    for part in &message.parts {
        let content_type = match part.content_type() {
            // A type that is not one type/subtype pair ("text/plain/stupid") is no type
            // at all: the part matches neither :text nor any :content (as Pigeonhole;
            // mail-parser would read it as text/plain).
            Some(_) if !valid_media_type(message.raw_message(), part) => String::new(),
            // RFC 2045 6.4: an unrecognized Content-Transfer-Encoding makes the part
            // application/octet-stream.
            _ if !known_encoding(message.raw_message(), part) => {
                "application/octet-stream".to_string()
            }
            Some(ct) => match ct.subtype() {
                Some(sub) => format!("{}/{}", ct.ctype(), sub).to_ascii_lowercase(),
                None => ct.ctype().to_ascii_lowercase(),
            },
            None => "text/plain".to_string(),
        };
        let mut text = match &part.body {
            PartType::Text(t) | PartType::Html(t) => t.to_string(),
            PartType::Binary(b) | PartType::InlineBinary(b) => {
                String::from_utf8_lossy(b).into_owned()
            }
            PartType::Message(_) | PartType::Multipart(_) => String::new(),
        };
        match &part.body {
            PartType::Multipart(_) => {
                // RFC 5173 5.2: a multipart's own text is its prologue and epilogue.
                let raw = message.raw_message();
                let body = raw
                    .get(part.offset_body as usize..(part.offset_end as usize).min(raw.len()))
                    .unwrap_or_default();
                if let Some(boundary) = part.content_type().and_then(|c| c.attribute("boundary")) {
                    text = prologue_epilogue(body, boundary);
                    crate::strings::truncate(&mut text, *budget);
                    *budget -= text.len();
                }
                out.push(BodyPart { content_type, text });
                continue;
            }
            PartType::Message(nested) => {
                // RFC 5173 5.2: a message/rfc822 part's own text is the header of the
                // message it carries.
                let raw = nested.raw_message();
                // (mail-parser's offsets in it count from the outer message's start)
                let end = nested.parts.first().map_or(raw.len(), |p| {
                    p.offset_body.saturating_sub(part.offset_body) as usize
                });
                let mut header = &raw[..end.min(raw.len())];
                for blank in [&b"\r\n"[..], b"\n"] {
                    if header.ends_with(blank) && header.len() > blank.len() {
                        let rest = &header[..header.len() - blank.len()];
                        if rest.ends_with(b"\n") {
                            header = rest;
                            break;
                        }
                    }
                }
                text = String::from_utf8_lossy(header).into_owned();
                crate::strings::truncate(&mut text, *budget);
                *budget -= text.len();
                out.push(BodyPart { content_type, text });
                // mail-parser bounds the nesting; this keeps the walk bounded anyway.
                if depth < 8 {
                    collect_parts(nested, budget, out, depth + 1);
                }
                continue;
            }
            _ => {}
        }
        crate::strings::truncate(&mut text, *budget);
        *budget -= text.len();
        out.push(BodyPart { content_type, text });
    }
}

/// The text of a multipart body outside its parts: before the first boundary line and
/// after the closing one.
fn prologue_epilogue(body: &[u8], boundary: &str) -> String {
    let open = format!("--{boundary}");
    let close = format!("--{boundary}--");
    let mut out = String::new();
    let mut state = 0; // 0: prologue, 1: in parts, 2: epilogue
    for line in String::from_utf8_lossy(body).split_inclusive('\n') {
        let bare = line.trim_end();
        if state < 2 && bare == close {
            state = 2;
            continue;
        }
        if state == 0 && bare == open {
            state = 1;
            continue;
        }
        if state != 1 {
            out.push_str(line);
        }
    }
    out
}

use mail_parser::MimeHeaders;

/// Splits the header section into fields; returns them and where the body starts.
pub(crate) fn split_header(raw: &[u8]) -> (Vec<Field>, usize) {
    let mut fields: Vec<Field> = Vec::new();
    let mut at = 0;
    while at < raw.len() {
        let end = raw[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(raw.len(), |p| at + p + 1);
        let line = &raw[at..end];
        let content = line.strip_suffix(b"\n").unwrap_or(line);
        let content = content.strip_suffix(b"\r").unwrap_or(content);
        if content.is_empty() {
            return (fields, end);
        }
        if matches!(content[0], b' ' | b'\t') {
            if let Some(last) = fields.last_mut() {
                last.raw.extend_from_slice(b"\r\n");
                last.raw.extend_from_slice(content);
            }
        } else if let Some(colon) = content.iter().position(|&b| b == b':') {
            let name = String::from_utf8_lossy(&content[..colon])
                .trim()
                .to_string();
            if !name.is_empty() && !name.contains(' ') {
                fields.push(Field::new(name, content[colon + 1..].to_vec()));
            }
        }
        at = end;
    }
    (fields, raw.len())
}

/// A field name (RFC 5322 3.6.8): printable ASCII but ':'.
pub(crate) fn valid_field_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (33..=126).contains(&b) && b != b':')
}

/// Whether `value` can be an added field's value (RFC 5293 4: "unstructured", RFC 5322
/// 3.2.5): a NUL cannot be written in a header at all, so it is an error, as in Pigeonhole;
/// line breaks become folding white space, other control characters are let through
/// (obs-utext allows them). A value longer than `max` bytes is an error too (RFC 5293 4
/// lets the implementation set a limit, not under 998).
pub(crate) fn check_field_value(value: &str, max: usize) -> Result<(), String> {
    if value.len() > max {
        return Err(format!(
            "the value is {} bytes, more than sieve_header_value_bytes_max ({max})",
            value.len()
        ));
    }
    if value.contains('\0') {
        let shown: String = value
            .chars()
            .take(40)
            .map(|c| if c == '\0' { '\u{2400}' } else { c })
            .collect();
        return Err(format!(
            "the value \"{shown}\" is invalid (it holds a NUL character)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 5293 4, RFC 5322 3.2.5
    #[test]
    fn field_values() {
        assert!(check_field_value("Frop", 2048).is_ok());
        assert!(check_field_value("Frop\r\nFrml", 2048).is_ok());
        assert!(check_field_value("Yeah\u{7}!", 2048).is_ok());
        assert!(
            check_field_value("Woah\0!", 2048)
                .unwrap_err()
                .contains("Woah")
        );
        assert!(check_field_value(&"A".repeat(1024), 1024).is_ok());
        assert!(check_field_value(&"A".repeat(1025), 1024).is_err());
    }

    // RFC 5228 2.7.2 (tests compare decoded values)
    #[test]
    fn header_fields() {
        let m = Message::new(Cow::Borrowed(
            b"Subject: =?utf-8?q?caf=C3=A9?=\r\n and more\r\nX-A: 1\r\n\r\nbody\r\n".as_slice(),
        ));
        assert_eq!(m.fields.len(), 2);
        assert_eq!(m.fields[0].decoded(), "caf\u{e9} and more");
        assert_eq!(m.fields_named("x-a").next().unwrap().decoded(), "1");
        assert_eq!(m.body(), b"body\r\n");
        assert_eq!(m.serialize(), m.raw.to_vec());
    }

    #[test]
    fn no_body() {
        let m = Message::new(Cow::Borrowed(b"A: b".as_slice()));
        assert_eq!(m.fields.len(), 1);
        assert_eq!(m.body(), b"");
        let m = Message::new(Cow::Borrowed(b"".as_slice()));
        assert!(m.fields.is_empty());
    }
}
