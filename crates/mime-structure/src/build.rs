//! From mail-parser's part tree to the part table and the BODY / BODYSTRUCTURE strings.

use std::sync::LazyLock;

use mail_parser::{
    Attribute, ContentType, Header, HeaderName, Message, MessageParser, MessagePart, PartType,
};

use crate::envelope::{NIL_ENVELOPE, encoding, encoding_token, field, find, write_envelope};
use crate::format::link_messages;
use crate::limits::{DEPTH_MAX, LIST_BYTES_MAX, PARTS_MAX, STRUCTURE_BYTES_MAX};
use crate::preview::{self, Preview};
use crate::structure::{Encoding, Kind, Part, Structure};
use crate::wire::{capped, write_nstring, write_string, write_upper};

/// Only the fields that decide the structure are parsed; every other value is read raw from
/// its offsets, which IMAP wants anyway.
///
/// Content-Transfer-Encoding is deliberately not parsed: mail-parser then decodes nothing
/// while looking for parts, so arrival does not pay for decoding attachments, and every
/// offset it reports points into the original content. (With it parsed, a base64
/// message/rfc822 part would be decoded and parsed apart, with offsets into the decoded
/// copy, and recursively copied once per nesting level.) Encodings are read raw instead.
static PARSER: LazyLock<MessageParser> = LazyLock::new(|| {
    MessageParser::new()
        .header_content_type(HeaderName::ContentType)
        .header_content_type(HeaderName::ContentDisposition)
        .header_comma_separated(HeaderName::ContentLanguage)
        .default_header_ignore()
});

/// Extra parses spent on transfer-encoded message/rfc822 parts (see [`encoded_messages`]).
/// Each round neutralizes all the ones it finds; a mis-parse can hide more, so a few rounds
/// are allowed, and no more, so hostile mail cannot multiply the parsing work.
const ENCODED_ROUNDS_MAX: usize = 3;

/// Written over the first byte of an encoded message part's subtype ("rfc822", "global")
/// in a copy of the content. A NUL is no header character, so the marked subtype
/// ("\0fc822", "\0lobal") is not one mail-parser knows, and it treats the part as data.
const MARK: u8 = 0;

/// RFC 9051 7.5.2: a body with no content, where one must be written but none is described.
const EMPTY_BODY: &[u8] = b"(\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 0 0)";
const EMPTY_BODY_EXT: &[u8] =
    b"(\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 0 0 NIL NIL NIL NIL)";

impl Structure {
    /// Parses `content` once. Never panics, whatever the input: content mail-parser finds
    /// no header in (or of 4 GiB and more) is described as one text/plain body.
    pub fn parse(content: &[u8]) -> Structure {
        parse(content).0
    }

    /// [`Structure::parse`] and the summary's [`Preview`] from the same parse (the preview
    /// reads at most 16 KiB of one part).
    pub fn parse_with_preview(content: &[u8]) -> (Structure, Preview) {
        parse(content)
    }
}

fn parse(content: &[u8]) -> (Structure, Preview) {
    // mail-parser keeps offsets in u32.
    if u32::try_from(content.len()).is_err() {
        return (opaque(content), preview::of_text(content));
    }
    let mut marked: Option<Vec<u8>> = None;
    let mut round = 0;
    loop {
        let data = marked.as_deref().unwrap_or(content);
        let Some(message) = PARSER.parse(data) else {
            return (opaque(content), preview::of_text(content));
        };
        let marks = if round < ENCODED_ROUNDS_MAX {
            encoded_messages(&message, data)
        } else {
            Vec::new()
        };
        if marks.is_empty() {
            // The marked copy differs from the content only inside Content-Type values,
            // which are never copied out raw: describing it describes the content.
            let (structure, preview) = if message.parts.is_empty() {
                (opaque(data), preview::of_text(data))
            } else {
                (
                    describe_within_budget(data, &message),
                    preview::of_message(&message, data),
                )
            };
            dismantle(message);
            return (structure, preview);
        }
        dismantle(message);
        let copy = marked.get_or_insert_with(|| content.to_vec());
        for at in marks {
            copy[at] = MARK;
        }
        round += 1;
    }
}

/// Where to mark the transfer-encoded message/rfc822 (and message/global) parts mail-parser
/// read as encapsulated messages.
///
/// RFC 2046 5.2.1 forbids encoding them, but such parts exist. Content-Transfer-Encoding is
/// not parsed (see [`PARSER`]), so mail-parser reads the encoded text as the encapsulated
/// message's header, and its header parser does not stop at boundaries: the parts after it
/// are swallowed. Parsed again with the subtype marked, the part is opaque data, written as a
/// message/rfc822 with an empty envelope and body (RFC 9051 9 needs them after "MESSAGE").
fn encoded_messages(message: &Message<'_>, data: &[u8]) -> Vec<usize> {
    let mut marks = Vec::new();
    let mut stack = vec![message];
    while let Some(message) = stack.pop() {
        for part in &message.parts {
            let PartType::Message(inner) = &part.body else {
                continue;
            };
            stack.push(inner);
            if matches!(
                encoding(part, data),
                Encoding::SevenBit | Encoding::EightBit | Encoding::Binary
            ) {
                continue;
            }
            if let Some(at) = find(part, &HeaderName::ContentType).and_then(|h| subtype_at(data, h))
            {
                marks.push(at);
            }
        }
    }
    marks
}

/// The offset of the subtype in a `message/rfc822` or `message/global` Content-Type value.
fn subtype_at(data: &[u8], header: &Header<'_>) -> Option<usize> {
    let start = header.offset_start as usize;
    let value = data.get(start..(header.offset_end as usize).min(data.len()))?;
    let mut i = value.iter().position(|b| !b.is_ascii_whitespace())?;
    if !value.get(i..i + 7)?.eq_ignore_ascii_case(b"message") {
        return None;
    }
    i += 7;
    i += value[i..]
        .iter()
        .take_while(|b| b.is_ascii_whitespace())
        .count();
    if value.get(i) != Some(&b'/') {
        return None;
    }
    i += 1;
    i += value[i..]
        .iter()
        .take_while(|b| b.is_ascii_whitespace())
        .count();
    let subtype = value.get(i..i + 6)?;
    (subtype.eq_ignore_ascii_case(b"rfc822") || subtype.eq_ignore_ascii_case(b"global"))
        .then_some(start + i)
}

/// Content without a header mail-parser can find (empty, or blank), or too large for its u32
/// offsets: one text/plain body, which is what RFC 2045 5.2 makes of a message without
/// Content-Type.
fn opaque(content: &[u8]) -> Structure {
    let len = content.len() as u64;
    let fields = format!(
        "(\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" {len} {}",
        line_count(content)
    );
    Structure {
        envelope: NIL_ENVELOPE.to_vec(),
        body_structure: format!("{fields} NIL NIL NIL NIL)").into_bytes(),
        body: format!("{fields})").into_bytes(),
        parts: vec![Part::leaf(0, 0, len, Encoding::SevenBit)],
    }
}

/// Drops a parsed message without recursion. mail-parser nests encapsulated messages as
/// values inside their parts without limit, and the derived drop would recurse once per
/// level: a message nesting message/rfc822 parts a hundred thousand deep would overflow the
/// stack.
fn dismantle(message: Message<'_>) {
    let mut stack = vec![message];
    while let Some(mut message) = stack.pop() {
        for part in &mut message.parts {
            if let PartType::Message(inner) = &mut part.body {
                stack.push(std::mem::take(inner));
            }
        }
    }
}

/// One entity while describing: where mail-parser has it and what the table says.
struct Node<'a, 'x> {
    message: &'a Message<'x>,
    id: usize,
    depth: usize,
    /// RFC 2046 5.1.5: in a multipart/digest, a part without Content-Type is message/rfc822.
    in_digest: bool,
    part: Part,
}

impl<'a, 'x> Node<'a, 'x> {
    fn source(&self) -> &'a MessagePart<'x> {
        &self.message.parts[self.id]
    }

    fn raw(&self) -> &'a [u8] {
        self.message.raw_message.as_ref()
    }
}

/// [`describe`] with fewer parts until BODYSTRUCTURE fits [`STRUCTURE_BYTES_MAX`], or down to
/// the top-level entity alone (whose strings and lists are capped).
fn describe_within_budget(content: &[u8], message: &Message<'_>) -> Structure {
    let mut parts_max = PARTS_MAX;
    loop {
        let structure = describe(content, message, parts_max);
        if structure.body_structure.len() <= STRUCTURE_BYTES_MAX || parts_max == 1 {
            return structure;
        }
        parts_max = (structure.parts.len() / 2).max(1);
    }
}

fn describe(content: &[u8], message: &Message<'_>, parts_max: usize) -> Structure {
    let len = content.len() as u64;
    let root = &message.parts[0];
    let body_start = u64::from(root.offset_body).min(len);
    let mut nodes = vec![Node {
        message,
        id: 0,
        depth: 0,
        in_digest: false,
        part: Part::leaf(0, body_start, len, encoding(root, content)),
    }];

    // Breadth first, so that each part's children are consecutive in the table and the
    // parts kept under `parts_max` are the shallow ones.
    let mut i = 0;
    while i < nodes.len() {
        let node = &nodes[i];
        let (message, id, depth) = (node.message, node.id, node.depth);
        let parent_body = (node.part.body_start, node.part.body_end);
        let source = node.source();
        let first = nodes.len();
        if depth < DEPTH_MAX {
            match &source.body {
                PartType::Multipart(ids) => {
                    let digest = content_type(source)
                        .and_then(ContentType::subtype)
                        .is_some_and(|s| s.eq_ignore_ascii_case("digest"));
                    for &child in ids {
                        let child = child as usize;
                        if nodes.len() >= parts_max {
                            break;
                        }
                        // Children come after their multipart in mail-parser's list; anything
                        // else is not a tree and is skipped.
                        let Some(child_part) = message.parts.get(child).filter(|_| child > id)
                        else {
                            continue;
                        };
                        nodes.push(Node {
                            message,
                            id: child,
                            depth: depth + 1,
                            in_digest: digest,
                            part: within(child_part, parent_body, message.raw_message.as_ref()),
                        });
                    }
                }
                PartType::Message(inner) if nodes.len() < parts_max => {
                    if let Some(inner_root) = inner.parts.first() {
                        nodes.push(Node {
                            message: inner,
                            id: 0,
                            depth: depth + 1,
                            in_digest: false,
                            part: within(inner_root, parent_body, inner.raw_message.as_ref()),
                        });
                    }
                }
                _ => {}
            }
        }
        let children = nodes.len() - first;
        if children > 0 {
            let is_multipart = matches!(source.body, PartType::Multipart(_));
            let part = &mut nodes[i].part;
            part.kind = if is_multipart {
                Kind::Multipart
            } else {
                Kind::Message
            };
            part.first_child = first as u32;
            part.child_count = children as u32;
        }
        i += 1;
    }

    let mut writer = Writer {
        nodes: &nodes,
        content,
        ext: Vec::with_capacity(256),
        plain: Vec::with_capacity(192),
    };
    writer.body(0);
    let Writer { ext, plain, .. } = writer;

    let mut envelope = Vec::with_capacity(256);
    write_envelope(&mut envelope, root, message.raw_message.as_ref());

    let mut parts: Vec<Part> = nodes.into_iter().map(|n| n.part).collect();
    link_messages(&mut parts);
    Structure {
        envelope,
        body_structure: ext,
        body: plain,
        parts,
    }
}

/// A part's table entry, its ranges kept inside its parent's body whatever mail-parser
/// reported, so that ranges nest and never leave the content.
fn within(source: &MessagePart<'_>, (start, end): (u64, u64), raw: &[u8]) -> Part {
    let header_start = u64::from(source.offset_header).clamp(start, end);
    let body_start = u64::from(source.offset_body).clamp(header_start, end);
    let body_end = u64::from(source.offset_end).clamp(body_start, end);
    Part::leaf(header_start, body_start, body_end, encoding(source, raw))
}

fn content_type<'p>(part: &'p MessagePart<'_>) -> Option<&'p ContentType<'p>> {
    find(part, &HeaderName::ContentType)?
        .value
        .as_content_type()
}

/// RFC 9051 7.5.2 body-fld-lines: Dovecot's count, the line feeds in the body. (The CRLF
/// before a boundary belongs to the boundary, RFC 2046 5.1.1, so a part's last line has none.)
fn line_count(body: &[u8]) -> usize {
    body.iter().filter(|&&b| b == b'\n').count()
}

/// How a non-multipart entity is written (RFC 9051 9 body-type-1part).
enum Shape {
    /// body-type-text: fields and lines.
    Text,
    /// body-type-msg: fields, envelope, body and lines.
    Message,
    /// body-type-basic: fields only.
    Basic,
}

struct Media<'p> {
    media_type: &'p [u8],
    subtype: &'p [u8],
    params: Option<&'p [Attribute<'p>]>,
    /// RFC 2045 5.2: text without a charset parameter is us-ascii; written out like Dovecot.
    default_charset: bool,
    shape: Shape,
}

/// The type a non-multipart entity is described with.
fn media<'p>(node: &Node<'_, '_>, ct: Option<&'p ContentType<'p>>) -> Media<'p> {
    let declared = ct.and_then(|ct| {
        let subtype = ct.subtype().filter(|s| !s.is_empty())?;
        (!ct.ctype().is_empty()).then_some((ct.ctype().as_bytes(), subtype.as_bytes()))
    });
    let params = ct.and_then(ContentType::attributes);
    let is_message = |t: &[u8], s: &[u8]| {
        t.eq_ignore_ascii_case(b"message")
            && (s.eq_ignore_ascii_case(b"rfc822") || s.eq_ignore_ascii_case(b"global"))
    };
    // A subtype marked by `parse` (an encoded message part) is the one it was.
    let declared = declared.map(|(t, s)| match s {
        [MARK, rest @ ..] if rest.eq_ignore_ascii_case(b"fc822") => (t, &b"rfc822"[..]),
        [MARK, rest @ ..] if rest.eq_ignore_ascii_case(b"lobal") => (t, &b"global"[..]),
        _ => (t, s),
    });
    match declared {
        // An encapsulated message, described or not: the grammar wants an envelope and a
        // body after "MESSAGE" "RFC822" (RFC 9051 9 media-message).
        Some((t, s)) if is_message(t, s) => Media {
            media_type: b"MESSAGE",
            subtype: s,
            params,
            default_charset: false,
            shape: Shape::Message,
        },
        _ if node.part.kind == Kind::Message => Media {
            media_type: b"MESSAGE",
            subtype: b"RFC822",
            params,
            default_charset: false,
            shape: Shape::Message,
        },
        // A multipart mail-parser found no parts in (no boundary), or one cut off by
        // DEPTH_MAX: written as opaque data, since clients expect a "MULTIPART" body to
        // have parts.
        Some((t, _)) if t.eq_ignore_ascii_case(b"multipart") => Media {
            media_type: b"APPLICATION",
            subtype: b"OCTET-STREAM",
            params,
            default_charset: false,
            shape: Shape::Basic,
        },
        Some((t, s)) => {
            let text = t.eq_ignore_ascii_case(b"text");
            Media {
                media_type: t,
                subtype: s,
                params,
                default_charset: text,
                shape: if text { Shape::Text } else { Shape::Basic },
            }
        }
        None if node.in_digest => Media {
            media_type: b"MESSAGE",
            subtype: b"RFC822",
            params: None,
            default_charset: false,
            shape: Shape::Message,
        },
        // RFC 2045 5.2: no (or no valid) Content-Type is text/plain; charset=us-ascii.
        None => Media {
            media_type: b"TEXT",
            subtype: b"PLAIN",
            params: None,
            default_charset: true,
            shape: Shape::Text,
        },
    }
}

/// Writes BODYSTRUCTURE (`ext`) and BODY (`plain`) side by side.
struct Writer<'n, 'a, 'x> {
    nodes: &'n [Node<'a, 'x>],
    content: &'n [u8],
    ext: Vec<u8>,
    plain: Vec<u8>,
}

impl Writer<'_, '_, '_> {
    fn both(&mut self, bytes: &[u8]) {
        self.ext.extend_from_slice(bytes);
        self.plain.extend_from_slice(bytes);
    }

    /// RFC 9051 7.5.2 / 9 `body`. Recursion is bounded by DEPTH_MAX.
    fn body(&mut self, i: usize) {
        let node = &self.nodes[i];
        let source = node.source();
        let raw = node.raw();
        let ct = content_type(source);
        let mut buf = Vec::with_capacity(128);

        if node.part.kind == Kind::Multipart {
            // body-type-mpart: the parts, no separator, then the subtype.
            self.both(b"(");
            let first = node.part.first_child as usize;
            for child in first..first + node.part.child_count as usize {
                self.body(child);
            }
            buf.push(b' ');
            // RFC 2046 5.1.3: an unrecognized multipart subtype is treated as mixed.
            let subtype = ct.and_then(ContentType::subtype).filter(|s| !s.is_empty());
            write_upper(&mut buf, subtype.unwrap_or("mixed").as_bytes());
            self.both(&buf);
            // body-ext-mpart: params, disposition, language, location.
            buf.clear();
            buf.push(b' ');
            write_params(&mut buf, ct.and_then(ContentType::attributes), false);
            buf.push(b' ');
            write_extension(&mut buf, source, raw);
            self.ext.extend_from_slice(&buf);
            self.both(b")");
            return;
        }

        let media = media(node, ct);
        // body-fields: type, subtype, params, id, description, encoding, octets.
        buf.push(b'(');
        write_upper(&mut buf, media.media_type);
        buf.push(b' ');
        write_upper(&mut buf, media.subtype);
        buf.push(b' ');
        write_params(&mut buf, media.params, media.default_charset);
        buf.push(b' ');
        write_nstring(
            &mut buf,
            field(source, raw, &HeaderName::ContentId).as_deref(),
        );
        buf.push(b' ');
        write_nstring(
            &mut buf,
            field(source, raw, &HeaderName::ContentDescription).as_deref(),
        );
        buf.push(b' ');
        let token = encoding_token(source, raw);
        write_upper(&mut buf, if token.is_empty() { b"7bit" } else { &token });
        let body = node.part.body_range();
        let content = self
            .content
            .get(body.start as usize..body.end as usize)
            .unwrap_or_default();
        buf.extend_from_slice(format!(" {}", content.len()).as_bytes());
        match media.shape {
            Shape::Basic => self.both(&buf),
            Shape::Text => {
                buf.extend_from_slice(format!(" {}", line_count(content)).as_bytes());
                self.both(&buf);
            }
            Shape::Message => {
                buf.push(b' ');
                match (node.part.kind, &source.body) {
                    (Kind::Message, _) => {
                        let inner = &self.nodes[node.part.first_child as usize];
                        write_envelope(&mut buf, inner.source(), inner.raw());
                        buf.push(b' ');
                        self.both(&buf);
                        self.body(node.part.first_child as usize);
                    }
                    // Cut off by a limit: the envelope is still known.
                    (_, PartType::Message(inner)) if !inner.parts.is_empty() => {
                        write_envelope(&mut buf, &inner.parts[0], inner.raw_message.as_ref());
                        buf.push(b' ');
                        self.both(&buf);
                        self.ext.extend_from_slice(EMPTY_BODY_EXT);
                        self.plain.extend_from_slice(EMPTY_BODY);
                    }
                    _ => {
                        buf.extend_from_slice(NIL_ENVELOPE);
                        buf.push(b' ');
                        self.both(&buf);
                        self.ext.extend_from_slice(EMPTY_BODY_EXT);
                        self.plain.extend_from_slice(EMPTY_BODY);
                    }
                }
                self.both(format!(" {}", line_count(content)).as_bytes());
            }
        }
        // body-ext-1part: md5 (not computed), disposition, language, location.
        buf.clear();
        buf.extend_from_slice(b" NIL ");
        write_extension(&mut buf, source, raw);
        self.ext.extend_from_slice(&buf);
        self.both(b")");
    }
}

/// body-fld-param: `("NAME" "value" ...)` or NIL.
fn write_params(out: &mut Vec<u8>, params: Option<&[Attribute<'_>]>, default_charset: bool) {
    let params = params.unwrap_or_default();
    let add_charset = default_charset
        && !params
            .iter()
            .any(|a| a.name.eq_ignore_ascii_case("charset"));
    if params.is_empty() && !add_charset {
        out.extend_from_slice(b"NIL");
        return;
    }
    let start = out.len();
    out.push(b'(');
    if add_charset {
        out.extend_from_slice(b"\"CHARSET\" \"US-ASCII\"");
    }
    for (n, a) in params.iter().enumerate() {
        if out.len() - start >= LIST_BYTES_MAX {
            break;
        }
        if n > 0 || add_charset {
            out.push(b' ');
        }
        write_upper(out, capped(a.name.as_bytes()));
        out.push(b' ');
        write_string(out, capped(a.value.as_bytes()));
    }
    out.push(b')');
}

/// body-fld-dsp, body-fld-lang and body-fld-loc, space separated.
fn write_extension(out: &mut Vec<u8>, part: &MessagePart<'_>, raw: &[u8]) {
    match find(part, &HeaderName::ContentDisposition).and_then(|h| h.value.as_content_type()) {
        Some(d) if !d.ctype().is_empty() => {
            out.push(b'(');
            write_upper(out, capped(d.ctype().as_bytes()));
            out.push(b' ');
            write_params(out, d.attributes(), false);
            out.push(b')');
        }
        _ => out.extend_from_slice(b"NIL"),
    }
    out.push(b' ');
    let languages: Vec<&str> = find(part, &HeaderName::ContentLanguage)
        .and_then(|h| h.value.as_text_list())
        .unwrap_or_default()
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect();
    if languages.is_empty() {
        out.extend_from_slice(b"NIL");
    } else {
        let start = out.len();
        out.push(b'(');
        for (n, language) in languages.iter().enumerate() {
            if out.len() - start >= LIST_BYTES_MAX {
                break;
            }
            if n > 0 {
                out.push(b' ');
            }
            write_string(out, capped(language.as_bytes()));
        }
        out.push(b')');
    }
    out.push(b' ');
    write_nstring(
        out,
        field(part, raw, &HeaderName::ContentLocation).as_deref(),
    );
}
