//! Section contents that need more than a byte range: BINARY (RFC 3516) and
//! HEADER.FIELDS[.NOT] (RFC 9051 6.4.5).

use std::fmt;

use mail_parser::decoders::base64::base64_decode;
use mail_parser::parsers::MessageStream;

use crate::structure::Encoding;

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

/// RFC 3516 4.2: a part's body with its Content-Transfer-Encoding undone, for
/// `BINARY[section]` and `BINARY.SIZE[section]`. Damaged encodings are decoded as far as
/// they make sense rather than refused: the client asked for the content, and a best effort
/// is what other servers give. An unknown encoding is `Err(UnknownCte)` (RFC 3516 4.3).
pub fn decode_binary(encoding: Encoding, body: &[u8]) -> Result<Vec<u8>, UnknownCte> {
    match encoding {
        Encoding::SevenBit | Encoding::EightBit | Encoding::Binary => Ok(body.to_vec()),
        Encoding::Base64 => {
            // RFC 2045 6.8: characters outside the base64 alphabet are ignored. Once they are
            // gone mail-parser's decoder has nothing left to refuse.
            let alphabet: Vec<u8> = body
                .iter()
                .copied()
                .filter(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
                .collect();
            Ok(base64_decode(&alphabet).unwrap_or_default())
        }
        Encoding::QuotedPrintable => {
            let repaired = escape_stray_equals(body);
            let (_, decoded) = MessageStream::new(&repaired).decode_quoted_printable_mime(b"");
            Ok(decoded.into_owned())
        }
        Encoding::Other => Err(UnknownCte),
    }
}

/// RFC 2045 6.7 (note 1): an `=` that starts neither a hex pair nor a soft line break is
/// kept as it is. mail-parser's decoder gives up on some of those (`==`), so they are
/// written as `=3D` first.
fn escape_stray_equals(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 8);
    for (i, &b) in body.iter().enumerate() {
        if b == b'=' && !starts_escape(&body[i + 1..]) {
            out.extend_from_slice(b"=3D");
        } else {
            out.push(b);
        }
    }
    out
}

/// Whether what follows an `=` is a hex pair, or blanks up to the end of the line (a soft
/// line break, trailing blanks allowed by RFC 2045 6.7 rule 3).
fn starts_escape(rest: &[u8]) -> bool {
    if rest.len() >= 2 && rest[0].is_ascii_hexdigit() && rest[1].is_ascii_hexdigit() {
        return true;
    }
    rest.iter()
        .find(|&&b| !matches!(b, b' ' | b'\t' | b'\r'))
        .is_none_or(|&b| b == b'\n')
}

/// RFC 9051 6.4.5 HEADER.FIELDS / HEADER.FIELDS.NOT: from a header block, the fields whose
/// names are (or, with `not`, are not) in `names` (compared case-insensitively), each with
/// its folded continuation lines, then the blank line that ends a header.
///
/// Reading stops at the header's blank line. Lines end in CRLF in the result, as IMAP sends
/// them. Lines that are no field at all (no name before a colon) never match a name, so
/// HEADER.FIELDS.NOT keeps them.
pub fn filter_header_fields(header: &[u8], names: &[&[u8]], not: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut keep = false;
    for line in header.split_inclusive(|&b| b == b'\n') {
        let bare = line.strip_suffix(b"\n").unwrap_or(line);
        let bare = bare.strip_suffix(b"\r").unwrap_or(bare);
        if bare.is_empty() {
            break;
        }
        // RFC 5322 2.2.3: a line starting with a blank continues the field before it.
        if !matches!(bare[0], b' ' | b'\t') {
            let name = bare
                .iter()
                .position(|&b| b == b':')
                .map(|colon| bare[..colon].trim_ascii());
            let named = name.is_some_and(|name| names.iter().any(|n| n.eq_ignore_ascii_case(name)));
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
