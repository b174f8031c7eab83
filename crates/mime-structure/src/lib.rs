//! A message's MIME structure in the forms an IMAP server answers with: the ENVELOPE, BODY and
//! BODYSTRUCTURE wire strings (RFC 9051 7.5.2, RFC 3501 7.4.2) and the byte ranges of every
//! addressable part (FETCH BODY[section], RFC 9051 6.4.5).
//!
//! Why a crate of its own: parsing MIME is the expensive part of FETCH, and its result never
//! changes for a stored message. So the server calls [`Structure::parse`] once, when mail
//! arrives, keeps [`Structure::to_bytes`] next to the message, and answers every later FETCH
//! from [`Structure::from_bytes`] plus byte ranges of the original content, without parsing
//! the message again.
//!
//! mail-parser does the MIME parsing; this crate only walks its part tree and writes IMAP.
//! Everything is sans-IO and pure.
//!
//! Hostile mail cannot make the stored form large or the walk deep: parts nested deeper than
//! [`DEPTH_MAX`] are opaque leaves, at most [`PARTS_MAX`] parts are described (fewer if
//! BODYSTRUCTURE would outgrow [`STRUCTURE_BYTES_MAX`]), and header values and address lists
//! are capped by [`FIELD_BYTES_MAX`] and [`LIST_BYTES_MAX`].

mod binary;
mod build;
mod envelope;
mod format;
mod preview;
mod wire;

use std::fmt;
use std::ops::Range;

pub use binary::{decode_binary, filter_header_fields};
pub use preview::{PREVIEW_CHARS_MAX, Preview};
pub use wire::write_nstring;

/// Nesting levels (multiparts and encapsulated messages) that get described; a part at this
/// depth is an opaque leaf. Bounds the recursion when writing BODYSTRUCTURE.
pub const DEPTH_MAX: usize = 64;
/// Parts described, the top-level message included; further parts are left out of
/// BODYSTRUCTURE and the part table (shallow parts win: the table is filled breadth first).
pub const PARTS_MAX: usize = 10_000;
/// BODYSTRUCTURE size above which fewer parts are described (halving until it fits). Many
/// small encapsulated messages, each with its envelope, could otherwise make it several times
/// the size of the message.
pub const STRUCTURE_BYTES_MAX: usize = 1 << 20;
/// Bytes kept of one header value or parameter value in ENVELOPE and BODYSTRUCTURE.
pub const FIELD_BYTES_MAX: usize = 4096;
/// Bytes after which no more items of one list are written: the addresses of one address
/// header in ENVELOPE, the parameters or languages of one part in BODYSTRUCTURE.
pub const LIST_BYTES_MAX: usize = 64 << 10;

/// A part's Content-Transfer-Encoding (RFC 2045 6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    SevenBit,
    EightBit,
    Binary,
    Base64,
    QuotedPrintable,
    /// Not one of RFC 2045's: BINARY must answer `NO [UNKNOWN-CTE]` (RFC 3516 4.3).
    Other,
}

impl Encoding {
    /// From the first token of a raw Content-Transfer-Encoding value; absent means 7bit
    /// (RFC 2045 6.1).
    fn from_token(token: &[u8]) -> Encoding {
        let is = |name: &[u8]| token.eq_ignore_ascii_case(name);
        if token.is_empty() || is(b"7bit") {
            Encoding::SevenBit
        } else if is(b"8bit") {
            Encoding::EightBit
        } else if is(b"binary") {
            Encoding::Binary
        } else if is(b"base64") {
            Encoding::Base64
        } else if is(b"quoted-printable") {
            Encoding::QuotedPrintable
        } else {
            Encoding::Other
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

/// What a part holds, as far as section numbers are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// No sub-parts (including parts cut off by the limits).
    Leaf,
    /// A multipart with at least one described child.
    Multipart,
    /// A message/rfc822 (or message/global) whose encapsulated message is described: one
    /// child, that message's top-level entity.
    Message,
}

/// One entity of the message: the top-level message, a MIME part, or the top-level entity of
/// an encapsulated message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    header_start: u64,
    body_start: u64,
    body_end: u64,
    encoding: Encoding,
    kind: Kind,
    /// Children are consecutive in the part table (it is filled breadth first).
    first_child: u32,
    child_count: u32,
    /// For [`Kind::Message`]: the encapsulated message's header start, body start and end,
    /// copied from the child so that a `Part` answers `[n.HEADER]` and `[n.TEXT]` alone.
    message: Option<(u64, u64, u64)>,
}

impl Part {
    fn leaf(header_start: u64, body_start: u64, body_end: u64, encoding: Encoding) -> Part {
        Part {
            header_start,
            body_start,
            body_end,
            encoding,
            kind: Kind::Leaf,
            first_child: 0,
            child_count: 0,
            message: None,
        }
    }

    /// `[n.MIME]`: the part's own header, blank line included.
    pub fn mime_header_range(&self) -> Range<u64> {
        self.header_start..self.body_start
    }

    /// `[n]`: the part's contents, still transfer-encoded.
    pub fn body_range(&self) -> Range<u64> {
        self.body_start..self.body_end
    }

    /// `[n.HEADER]` of a message/rfc822 part: the encapsulated message's header.
    pub fn message_header_range(&self) -> Option<Range<u64>> {
        self.message.map(|(h, b, _)| h..b)
    }

    /// `[n.TEXT]` of a message/rfc822 part: the encapsulated message's body.
    pub fn message_text_range(&self) -> Option<Range<u64>> {
        self.message.map(|(_, b, e)| b..e)
    }

    /// The part's Content-Transfer-Encoding, for BINARY (RFC 3516).
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    fn child(&self, index: u32) -> Option<usize> {
        (index < self.child_count).then(|| (self.first_child + index) as usize)
    }
}

/// The MIME structure of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Structure {
    envelope: Vec<u8>,
    body_structure: Vec<u8>,
    body: Vec<u8>,
    /// Breadth first; `parts[0]` is the top-level message. Never empty.
    parts: Vec<Part>,
}

/// A stored structure that cannot be read back (damaged, truncated, or another version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError {
    what: &'static str,
}

impl DecodeError {
    fn new(what: &'static str) -> DecodeError {
        DecodeError { what }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stored MIME structure is unreadable: {}", self.what)
    }
}

impl std::error::Error for DecodeError {}

/// BINARY of a part whose Content-Transfer-Encoding is unknown (RFC 3516 4.3: the server
/// answers `NO [UNKNOWN-CTE]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownCte;

impl fmt::Display for UnknownCte {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown Content-Transfer-Encoding")
    }
}

impl std::error::Error for UnknownCte {}

impl Structure {
    /// Parses `content` once. Never panics, whatever the input: content mail-parser finds
    /// no header in (or of 4 GiB and more) is described as one text/plain body.
    pub fn parse(content: &[u8]) -> Structure {
        build::parse(content).0
    }

    /// [`Structure::parse`] and the summary's [`Preview`] from the same parse (the preview
    /// reads at most 16 KiB of one part).
    pub fn parse_with_preview(content: &[u8]) -> (Structure, Preview) {
        build::parse(content)
    }

    /// The compact, versioned form to store next to the message.
    pub fn to_bytes(&self) -> Vec<u8> {
        format::encode(self)
    }

    /// Reads back [`Structure::to_bytes`]. Never panics; damaged input is an error.
    pub fn from_bytes(bytes: &[u8]) -> Result<Structure, DecodeError> {
        format::decode(bytes)
    }

    /// ENVELOPE (RFC 9051 7.5.2), a parenthesized list.
    pub fn envelope(&self) -> &[u8] {
        &self.envelope
    }

    /// BODYSTRUCTURE (RFC 9051 7.5.2), with extension data.
    pub fn body_structure(&self) -> &[u8] {
        &self.body_structure
    }

    /// BODY (RFC 9051 7.5.2): BODYSTRUCTURE without extension data.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// `[HEADER]`: the top-level header, the blank line that ends it included.
    pub fn header_range(&self) -> Range<u64> {
        self.parts[0].mime_header_range()
    }

    /// `[TEXT]`: the top-level body.
    pub fn text_range(&self) -> Range<u64> {
        self.parts[0].body_range()
    }

    /// The part at a section path such as `[1, 2]` for `BODY[1.2]`; `None` if there is no
    /// such part (or it was cut off by [`DEPTH_MAX`] / [`PARTS_MAX`]), and for the empty path.
    pub fn part(&self, path: &[u32]) -> Option<&Part> {
        // RFC 9051 6.4.5: a multipart's parts are numbered from 1; a non-multipart message
        // has only part 1, its body; a message/rfc822 part's sub-parts are those of the
        // message it encapsulates.
        let (&first, rest) = path.split_first()?;
        let index = first.checked_sub(1)?;
        let root = &self.parts[0];
        let mut current = match root.kind {
            Kind::Multipart => &self.parts[root.child(index)?],
            _ if index == 0 => root,
            _ => return None,
        };
        for &n in rest {
            let index = n.checked_sub(1)?;
            current = match current.kind {
                Kind::Multipart => &self.parts[current.child(index)?],
                Kind::Message => {
                    let inner = &self.parts[current.child(0)?];
                    match inner.kind {
                        Kind::Multipart => &self.parts[inner.child(index)?],
                        _ if index == 0 => inner,
                        _ => return None,
                    }
                }
                Kind::Leaf => return None,
            };
        }
        Some(current)
    }
}

#[cfg(test)]
mod tests;
