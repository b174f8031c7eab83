//! Records as zone-file lines (RFC 1035 5.1), ready to paste.

use std::fmt::Write as _;

use crate::records::{Kind, Record};

/// RFC 1035 3.3.14: a TXT record is one or more character-strings of at most 255 bytes each;
/// receivers join them (RFC 7208 3.3, RFC 6376 3.6.2.2).
pub const TXT_STRING_BYTES_MAX: usize = 255;

/// The records as zone-file lines: a `; purpose` comment above each run of records with the
/// same purpose, then `NAME IN TYPE VALUE` with the names padded to one column. No TTL: the
/// zone's `$TTL` applies. A TXT value is quoted (`"` and `\` escaped, bytes outside printable
/// ASCII as `\DDD`), split into several strings when longer than 255 bytes, and then written
/// in parentheses over several lines. Names are fully qualified, so the lines paste into
/// any zone; those outside the domain (the host's A/AAAA and TLSA when the host lives in
/// another domain) belong in that domain's zone.
pub fn zone_text(records: &[Record]) -> String {
    let width = records.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    let mut purpose_before: Option<&str> = None;
    for record in records {
        if purpose_before != Some(record.purpose) {
            if purpose_before.is_some() {
                out.push('\n');
            }
            let _ = writeln!(out, "; {}", record.purpose);
            purpose_before = Some(record.purpose);
        }
        let head = format!("{:width$} IN {:<5}", record.name, record.kind.name());
        if record.kind != Kind::Txt {
            let _ = writeln!(out, "{head} {}", record.value);
            continue;
        }
        let strings = txt_strings(record.value.as_bytes());
        match strings.as_slice() {
            [one] => {
                let _ = writeln!(out, "{head} {one}");
            }
            _ => {
                // RFC 1035 5.1: parentheses continue a record over lines.
                let indent = " ".repeat(head.len() + 3);
                let _ = write!(out, "{head} ( ");
                for (index, string) in strings.iter().enumerate() {
                    if index > 0 {
                        let _ = write!(out, "\n{indent}");
                    }
                    out.push_str(string);
                }
                out.push_str(" )\n");
            }
        }
    }
    out
}

/// A TXT value as quoted character-strings of at most [`TXT_STRING_BYTES_MAX`] bytes each
/// (counted before escaping: the limit is on the wire).
pub(crate) fn txt_strings(value: &[u8]) -> Vec<String> {
    if value.is_empty() {
        return vec!["\"\"".to_string()];
    }
    value.chunks(TXT_STRING_BYTES_MAX).map(quoted).collect()
}

/// RFC 1035 5.1: one quoted character-string; `\X` quotes X, `\DDD` is the byte DDD.
fn quoted(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for &byte in bytes {
        match byte {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(char::from(byte));
            }
            0x20..=0x7e => out.push(char::from(byte)),
            _ => {
                let _ = write!(out, "\\{byte:03}");
            }
        }
    }
    out.push('"');
    out
}
