//! A filter's changes to a message, and applying them.

use crate::header::{Field, split};

/// A change a filter asked for at the end of a message.
///
/// Header values are the text that follows the colon as it is written, leading space
/// included: the session adds the space Sendmail would when `SMFIP_HDR_LEADSPC` was not
/// negotiated (Postfix milter8.c `MILTER8_HDR_SPACE`). Folded lines may be separated by LF or
/// CRLF. ESMTP arguments of `SMFIR_ADDRCPT_PAR` and `SMFIR_CHGFROM` are not kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Modification {
    /// Append a field to the header (`SMFIR_ADDHEADER`).
    AddHeader { name: String, value: String },
    /// Change the `index`th field named `name` (1-based, names compared without regard to
    /// case); an empty value deletes it; past the last one, a non-empty value is appended
    /// (`SMFIR_CHGHEADER`, libmilter `smfi_chgheader`).
    ChangeHeader {
        index: u32,
        name: String,
        value: String,
    },
    /// Insert a field after the first `index` fields, 0 meaning at the top
    /// (`SMFIR_INSHEADER`, libmilter `smfi_insheader`); past the end, it is appended.
    InsertHeader {
        index: u32,
        name: String,
        value: String,
    },
    /// The new body, CRLF lines (`SMFIR_REPLBODY`; consecutive packets joined).
    ReplaceBody(Vec<u8>),
    /// Add an envelope recipient (`SMFIR_ADDRCPT`, `SMFIR_ADDRCPT_PAR`).
    AddRecipient(String),
    /// Remove an envelope recipient (`SMFIR_DELRCPT`).
    DeleteRecipient(String),
    /// Replace the envelope sender (`SMFIR_CHGFROM`).
    ChangeFrom(String),
    /// Hold the message, for this reason (`SMFIR_QUARANTINE`).
    Quarantine(String),
}

/// Applies the header and body changes, in order, to a CRLF message: the same bytes that were
/// sent to the filter, so that indexes count the same fields. Envelope changes and quarantine
/// are the caller's; they leave the message as it is. Without a header or body change the
/// message comes back unchanged; with one, every line of the header section and of a
/// replaced body ends in CRLF, and values cannot end the header section early (an empty line
/// in a value is dropped, a line not starting with a space or tab gets one).
pub fn apply(message: &[u8], modifications: &[Modification]) -> Vec<u8> {
    let changes_header = modifications.iter().any(|m| {
        matches!(
            m,
            Modification::AddHeader { .. }
                | Modification::ChangeHeader { .. }
                | Modification::InsertHeader { .. }
        )
    });
    let mut new_body: Option<Vec<u8>> = None;
    for modification in modifications {
        if let Modification::ReplaceBody(piece) = modification {
            new_body
                .get_or_insert_with(Vec::new)
                .extend_from_slice(piece);
        }
    }
    if !changes_header && new_body.is_none() {
        return message.to_vec();
    }
    let split = split(message);
    let mut fields: Vec<(Vec<u8>, Vec<u8>)> = split
        .fields
        .iter()
        .map(|Field { name, raw }| (name.to_vec(), with_line_end(raw)))
        .collect();
    for modification in modifications {
        edit(&mut fields, modification);
    }
    let body = match &new_body {
        Some(body) => crlf_lines(body),
        None => split.body.to_vec(),
    };
    let separator: &[u8] = if split.separator.is_empty() && !body.is_empty() {
        b"\r\n"
    } else {
        split.separator
    };
    let mut out = Vec::with_capacity(message.len() + 256);
    for (_, raw) in &fields {
        out.extend_from_slice(raw);
    }
    out.extend_from_slice(separator);
    out.extend_from_slice(&body);
    out
}

/// One header change on the list of (name, field) pairs.
fn edit(fields: &mut Vec<(Vec<u8>, Vec<u8>)>, modification: &Modification) {
    match modification {
        Modification::AddHeader { name, value } => {
            fields.push((name.as_bytes().to_vec(), field(name, value)));
        }
        Modification::ChangeHeader { index, name, value } => {
            // Postfix milter8.c: index 0 is taken as 1, for Sendmail compatibility.
            let nth = usize::try_from((*index).max(1)).unwrap_or(usize::MAX);
            let found = fields
                .iter()
                .enumerate()
                .filter(|(_, (field_name, _))| field_name.eq_ignore_ascii_case(name.as_bytes()))
                .nth(nth - 1)
                .map(|(position, _)| position);
            match (found, value.is_empty()) {
                (Some(position), true) => {
                    fields.remove(position);
                }
                (Some(position), false) => fields[position].1 = field(name, value),
                (None, false) => fields.push((name.as_bytes().to_vec(), field(name, value))),
                (None, true) => {}
            }
        }
        Modification::InsertHeader { index, name, value } => {
            let position = usize::try_from(*index)
                .unwrap_or(usize::MAX)
                .min(fields.len());
            fields.insert(position, (name.as_bytes().to_vec(), field(name, value)));
        }
        Modification::ReplaceBody(_)
        | Modification::AddRecipient(_)
        | Modification::DeleteRecipient(_)
        | Modification::ChangeFrom(_)
        | Modification::Quarantine(_) => {}
    }
}

/// `name:value\r\n`, each folded line of the value on its own CRLF line and starting with
/// white space, no empty line, no bare CR.
fn field(name: &str, value: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len() + value.len() + 4);
    out.extend_from_slice(name.as_bytes());
    out.push(b':');
    for (n, line) in value.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if n > 0 {
            if line.trim_matches([' ', '\t', '\r']).is_empty() {
                continue;
            }
            out.extend_from_slice(b"\r\n");
            if !line.starts_with([' ', '\t']) {
                out.push(b' ');
            }
        }
        out.extend(line.bytes().map(|b| if b == b'\r' { b' ' } else { b }));
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// A field of the original message, ending in a line end (the last line of a message may
/// lack one).
fn with_line_end(raw: &[u8]) -> Vec<u8> {
    let mut out = raw.to_vec();
    if !out.ends_with(b"\n") {
        out.extend_from_slice(b"\r\n");
    } else if !out.ends_with(b"\r\n") {
        out.pop();
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A replaced body as CRLF lines: LF alone becomes CRLF and a last line without a line end
/// gets one, as Postfix stores the body a filter sends line by line (milter8.c).
fn crlf_lines(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + body.len() / 32 + 2);
    let mut lines = body.split(|&b| b == b'\n').peekable();
    while let Some(line) = lines.next() {
        let last = lines.peek().is_none();
        if last && line.is_empty() {
            break;
        }
        out.extend_from_slice(line.strip_suffix(b"\r").unwrap_or(line));
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MESSAGE: &[u8] =
        b"Received: by mx\r\nSubject: one\r\nX-Tag: a\r\nx-tag: b\r\n\r\nbody\r\n";

    fn add(name: &str, value: &str) -> Modification {
        Modification::AddHeader {
            name: name.into(),
            value: value.into(),
        }
    }

    fn change(index: u32, name: &str, value: &str) -> Modification {
        Modification::ChangeHeader {
            index,
            name: name.into(),
            value: value.into(),
        }
    }

    fn insert(index: u32, name: &str, value: &str) -> Modification {
        Modification::InsertHeader {
            index,
            name: name.into(),
            value: value.into(),
        }
    }

    fn applied(modifications: &[Modification]) -> String {
        String::from_utf8(apply(MESSAGE, modifications)).unwrap()
    }

    #[test]
    fn nothing_to_apply_leaves_the_bytes_alone() {
        assert_eq!(apply(MESSAGE, &[]), MESSAGE);
        let envelope = [
            Modification::AddRecipient("<c@example.org>".into()),
            Modification::Quarantine("x".into()),
        ];
        assert_eq!(apply(b"no header\n", &envelope), b"no header\n");
    }

    #[test]
    fn add_appends_to_the_header() {
        assert_eq!(
            applied(&[add("X-Spam", " yes")]),
            "Received: by mx\r\nSubject: one\r\nX-Tag: a\r\nx-tag: b\r\nX-Spam: yes\r\n\r\nbody\r\n"
        );
    }

    #[test]
    fn change_counts_fields_of_that_name_from_one() {
        assert_eq!(
            applied(&[change(2, "X-TAG", " c")]),
            "Received: by mx\r\nSubject: one\r\nX-Tag: a\r\nX-TAG: c\r\n\r\nbody\r\n"
        );
        // Index 0 is taken as 1 (Postfix); an empty value deletes.
        assert_eq!(
            applied(&[change(0, "x-tag", "")]),
            "Received: by mx\r\nSubject: one\r\nx-tag: b\r\n\r\nbody\r\n"
        );
        // Past the last one: appended; deleting what is not there does nothing.
        assert_eq!(
            applied(&[change(3, "X-Tag", " c"), change(5, "Subject", "")]),
            "Received: by mx\r\nSubject: one\r\nX-Tag: a\r\nx-tag: b\r\nX-Tag: c\r\n\r\nbody\r\n"
        );
    }

    #[test]
    fn insert_counts_all_fields_from_zero_at_the_top() {
        assert_eq!(
            applied(&[insert(0, "X-Top", " 1"), insert(2, "X-Third", " 3")]),
            "X-Top: 1\r\nReceived: by mx\r\nX-Third: 3\r\nSubject: one\r\n\
             X-Tag: a\r\nx-tag: b\r\n\r\nbody\r\n"
        );
        assert!(applied(&[insert(99, "X-End", " e")]).contains("x-tag: b\r\nX-End: e\r\n\r\n"));
    }

    #[test]
    fn edits_apply_in_order_to_the_edited_header() {
        assert_eq!(
            applied(&[
                add("X-Tag", " c"),
                change(3, "X-Tag", ""),
                change(1, "Subject", "")
            ]),
            "Received: by mx\r\nX-Tag: a\r\nx-tag: b\r\n\r\nbody\r\n"
        );
    }

    #[test]
    fn folded_values_cannot_end_the_header() {
        assert_eq!(
            applied(&[add("X-Long", " a\n\tb\r\n\r\nc\rd")]),
            "Received: by mx\r\nSubject: one\r\nX-Tag: a\r\nx-tag: b\r\n\
             X-Long: a\r\n\tb\r\n c d\r\n\r\nbody\r\n"
        );
    }

    #[test]
    fn body_is_replaced_by_the_joined_pieces() {
        let out = apply(
            MESSAGE,
            &[
                Modification::ReplaceBody(b"new\nbo".to_vec()),
                Modification::ReplaceBody(b"dy".to_vec()),
            ],
        );
        assert_eq!(
            out,
            b"Received: by mx\r\nSubject: one\r\nX-Tag: a\r\nx-tag: b\r\n\r\nnew\r\nbody\r\n"
        );
        // A message without an empty line gets one before its new body.
        assert_eq!(
            apply(
                b"Subject: x",
                &[Modification::ReplaceBody(b"b\r\n".to_vec())]
            ),
            b"Subject: x\r\n\r\nb\r\n"
        );
        assert_eq!(
            apply(MESSAGE, &[Modification::ReplaceBody(Vec::new())]),
            b"Received: by mx\r\nSubject: one\r\nX-Tag: a\r\nx-tag: b\r\n\r\n"
        );
    }
}
