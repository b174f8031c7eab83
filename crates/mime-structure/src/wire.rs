//! IMAP string encoding (RFC 9051 4.3).

use crate::limits::FIELD_BYTES_MAX;

/// Longest value sent as a quoted string; longer ones go as literals, which clients read
/// without scanning for escapes.
const QUOTED_BYTES_MAX: usize = 1024;

/// Writes an IMAP nstring: `NIL` for `None`; a quoted string (with `\"` and `\\` escaped)
/// when the value is short printable 7-bit text; otherwise a literal `{n}\r\n...`.
///
/// RFC 9051 4.3: a quoted string may not hold CR, LF, NUL or (without UTF8=ACCEPT) 8-bit
/// bytes, and a literal may not hold NUL (CHAR8 is %x01-ff), so NUL bytes are left out.
pub fn write_nstring(out: &mut Vec<u8>, value: Option<&[u8]>) {
    let Some(value) = value else {
        out.extend_from_slice(b"NIL");
        return;
    };
    let quotable = value.len() <= QUOTED_BYTES_MAX
        && value
            .iter()
            .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b));
    if quotable {
        out.reserve(value.len() + 2);
        out.push(b'"');
        for &b in value {
            if b == b'"' || b == b'\\' {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.push(b'"');
    } else {
        let nuls = value.iter().filter(|&&b| b == 0).count();
        out.push(b'{');
        out.extend_from_slice((value.len() - nuls).to_string().as_bytes());
        out.extend_from_slice(b"}\r\n");
        if nuls == 0 {
            out.extend_from_slice(value);
        } else {
            out.extend(value.iter().copied().filter(|&b| b != 0));
        }
    }
}

/// A string that is never NIL.
pub(crate) fn write_string(out: &mut Vec<u8>, value: &[u8]) {
    write_nstring(out, Some(value));
}

/// A string in upper case: media types, subtypes, parameter names, encodings and
/// disposition types are case-insensitive, and RFC 3501 7.4.2's examples write them so.
pub(crate) fn write_upper(out: &mut Vec<u8>, value: &[u8]) {
    write_string(out, &value.to_ascii_uppercase());
}

/// `value` cut to [`crate::FIELD_BYTES_MAX`].
pub(crate) fn capped(value: &[u8]) -> &[u8] {
    &value[..value.len().min(FIELD_BYTES_MAX)]
}
