//! What a message's MIME structure is: its parts (byte ranges, transfer encoding, children)
//! and the ENVELOPE, BODY and BODYSTRUCTURE strings, with the lookups FETCH makes on them.
//! Built by `build.rs` (`Structure::parse`), stored and read back by `format.rs`
//! (`Structure::to_bytes`, `Structure::from_bytes`).

use std::ops::Range;

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
    pub(crate) fn from_token(token: &[u8]) -> Encoding {
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

    pub(crate) fn code(self) -> u8 {
        match self {
            Encoding::SevenBit => 0,
            Encoding::EightBit => 1,
            Encoding::Binary => 2,
            Encoding::Base64 => 3,
            Encoding::QuotedPrintable => 4,
            Encoding::Other => 5,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Encoding> {
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
pub(crate) enum Kind {
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
    pub(crate) header_start: u64,
    pub(crate) body_start: u64,
    pub(crate) body_end: u64,
    pub(crate) encoding: Encoding,
    pub(crate) kind: Kind,
    /// Children are consecutive in the part table (it is filled breadth first).
    pub(crate) first_child: u32,
    pub(crate) child_count: u32,
    /// For [`Kind::Message`]: the encapsulated message's header start, body start and end,
    /// copied from the child so that a `Part` answers `[n.HEADER]` and `[n.TEXT]` alone.
    pub(crate) message: Option<(u64, u64, u64)>,
}

impl Part {
    pub(crate) fn leaf(
        header_start: u64,
        body_start: u64,
        body_end: u64,
        encoding: Encoding,
    ) -> Part {
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

    pub(crate) fn child(&self, index: u32) -> Option<usize> {
        (index < self.child_count).then(|| (self.first_child + index) as usize)
    }
}

/// The MIME structure of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Structure {
    pub(crate) envelope: Vec<u8>,
    pub(crate) body_structure: Vec<u8>,
    pub(crate) body: Vec<u8>,
    /// Breadth first; `parts[0]` is the top-level message. Never empty.
    pub(crate) parts: Vec<Part>,
}

impl Structure {
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
