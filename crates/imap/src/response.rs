//! Encoding of response pieces: strings, flag lists, dates, UID sets.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use mail_model::Flags;

/// The flags a folder can store (RFC 9051 7.3.5 FLAGS, 7.1 PERMANENTFLAGS).
pub(crate) const SYSTEM_FLAGS: &str = "\\Answered \\Flagged \\Deleted \\Seen \\Draft";

/// `(\Seen kw ...)` for a FETCH FLAGS, with `\Recent` (RFC 3501 2.3.2) when `recent`.
pub(crate) fn flags_list_recent(flags: Flags, keywords: &[String], recent: bool) -> String {
    let mut s = String::from("(");
    if recent {
        s.push_str("\\Recent");
    }
    for name in flags.names() {
        if s.len() > 1 {
            s.push(' ');
        }
        s.push_str(name);
    }
    for k in keywords {
        if s.len() > 1 {
            s.push(' ');
        }
        s.push_str(k);
    }
    s.push(')');
    s
}

/// The FLAGS response of a folder: system flags and the keywords in use.
pub(crate) fn folder_flags(keywords: &BTreeSet<String>) -> String {
    let mut s = format!("({SYSTEM_FLAGS}");
    for k in keywords {
        s.push(' ');
        s.push_str(k);
    }
    s.push(')');
    s
}

/// The PERMANENTFLAGS of a writable folder: the system flags, its keywords, and `\*` (new
/// keywords may be made), RFC 9051 7.1.
pub(crate) fn permanent_flags(keywords: &BTreeSet<String>) -> String {
    let mut s = format!("({SYSTEM_FLAGS}");
    for k in keywords {
        s.push(' ');
        s.push_str(k);
    }
    s.push_str(" \\*)");
    s
}

/// A string as an IMAP quoted string if it can be one, else a literal (RFC 9051 4.3).
pub(crate) fn write_string(out: &mut Vec<u8>, value: &[u8]) {
    mime_structure::write_nstring(out, Some(value));
}

/// A mailbox name: an atom-safe name goes bare, anything else as a quoted string (with
/// UTF-8 in it only for a client that reads UTF-8 names, RFC 9051 4.3 / RFC 6855 3: the
/// others get modified UTF-7, all ASCII), or a literal if it holds a control character.
pub(crate) fn write_mailbox(out: &mut Vec<u8>, name: &str) {
    let atom = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"(){ %*\"\\]".contains(&b));
    if atom {
        out.extend_from_slice(name.as_bytes());
    } else if name.chars().all(|c| !c.is_control()) {
        out.push(b'"');
        for b in name.bytes() {
            if b == b'"' || b == b'\\' {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.push(b'"');
    } else {
        write_string(out, name.as_bytes());
    }
}

/// RFC 9051 9 date-time: `"17-Jul-1996 02:44:25 +0000"`.
pub(crate) fn internal_date(secs: i64) -> String {
    let date = DateTime::<Utc>::from_timestamp(secs, 0).unwrap_or_default();
    format!("\"{}\"", date.format("%d-%b-%Y %H:%M:%S +0000"))
}

/// A compact UID set, `1:3,7,9:10`, from ascending UIDs (RFC 4315 uid-set).
pub(crate) fn uid_set(uids: &[u32]) -> String {
    let mut s = String::new();
    let mut i = 0;
    while i < uids.len() {
        let start = uids[i];
        let mut end = start;
        while i + 1 < uids.len() && uids[i + 1] == end + 1 {
            i += 1;
            end = uids[i];
        }
        if !s.is_empty() {
            s.push(',');
        }
        if start == end {
            s.push_str(&start.to_string());
        } else {
            s.push_str(&format!("{start}:{end}"));
        }
        i += 1;
    }
    s
}

/// Ranges as an IMAP sequence set (`1:3,7`).
pub(crate) fn ranges_text(ranges: &[(u32, u32)]) -> String {
    ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}:{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A set in the order given, ranges only over ascending runs (RFC 5267 3.2 for ESORT's ALL;
/// an ascending input gives the usual compact set).
pub(crate) fn ordered_set(numbers: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < numbers.len() {
        let start = numbers[i];
        let mut end = start;
        while i + 1 < numbers.len() && numbers[i + 1] == end.wrapping_add(1) {
            end = numbers[i + 1];
            i += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}:{end}"));
        }
        i += 1;
    }
    out
}

/// RFC 5267 4.4: `PARTIAL (low:high set)`, the results at those positions (1-based) of
/// `numbers` in their order, `NIL` if there are none.
pub(crate) fn partial(numbers: &[u32], low: u32, high: u32) -> String {
    let from = (low as usize).saturating_sub(1).min(numbers.len());
    let to = (high as usize).min(numbers.len());
    let set = ordered_set(&numbers[from..to.max(from)]);
    let set = if set.is_empty() {
        "NIL".to_string()
    } else {
        set
    };
    format!(" PARTIAL ({low}:{high} {set})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_sets_are_compact() {
        assert_eq!(uid_set(&[]), "");
        assert_eq!(uid_set(&[4]), "4");
        assert_eq!(uid_set(&[1, 2, 3, 7, 9, 10]), "1:3,7,9:10");
    }

    #[test]
    fn flags_lists() {
        assert_eq!(flags_list_recent(Flags::EMPTY, &[], false), "()");
        assert_eq!(
            flags_list_recent(Flags::SEEN | Flags::FLAGGED, &["$Junk".into()], false),
            "(\\Seen \\Flagged $Junk)"
        );
        assert_eq!(
            flags_list_recent(Flags::SEEN, &[], true),
            "(\\Recent \\Seen)"
        );
    }

    #[test]
    fn internal_dates_are_rfc_9051_date_times() {
        assert_eq!(internal_date(0), "\"01-Jan-1970 00:00:00 +0000\"");
        assert_eq!(internal_date(837571465), "\"17-Jul-1996 02:44:25 +0000\"");
    }

    #[test]
    fn mailbox_names_are_atoms_or_strings() {
        let mut out = Vec::new();
        write_mailbox(&mut out, "INBOX");
        out.push(b' ');
        write_mailbox(&mut out, "Folder with space");
        assert_eq!(out, b"INBOX \"Folder with space\"");
    }

    #[test]
    fn sets_keep_their_order() {
        assert_eq!(ordered_set(&[1, 2, 3, 7, 9, 10]), "1:3,7,9:10");
        assert_eq!(ordered_set(&[5, 6, 2, 3, 1]), "5:6,2:3,1");
        assert_eq!(ordered_set(&[]), "");
        assert_eq!(partial(&[5, 6, 2, 3, 1], 2, 3), " PARTIAL (2:3 6,2)");
        assert_eq!(partial(&[5, 6], 3, 9), " PARTIAL (3:9 NIL)");
        assert_eq!(partial(&[5, 6], 1, 9), " PARTIAL (1:9 5:6)");
    }
}
