//! What the harness reads of a test message: its envelope, header fields, mailbox names and
//! attachments.

use sieve::Envelope;

pub(crate) fn envelope_of(message: &[u8]) -> Envelope {
    let header = header_of(message);
    let first = |names: &[&str]| {
        names.iter().find_map(|n| {
            header
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                .and_then(|(_, v)| address_in(v))
        })
    };
    let to = first(&["envelope-to", "to"]).unwrap_or_else(|| "recipient@example.com".into());
    let from =
        first(&["return-path", "sender", "from"]).unwrap_or_else(|| "sender@example.com".into());
    Envelope {
        from,
        orig_to: Some(to.clone()),
        to,
        auth: None,
    }
}

/// The first address in a header value (between angle brackets, or the bare one).
pub(crate) fn address_in(value: &str) -> Option<String> {
    let v = value.trim();
    let a = match (v.find('<'), v.find('>')) {
        (Some(l), Some(r)) if l < r => v[l + 1..r].trim().to_string(),
        _ => v
            .split(',')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .find(|w| w.contains('@'))
            .unwrap_or("")
            .to_string(),
    };
    (a.contains('@')).then_some(a)
}

/// Header fields (unfolded) of a message.
pub(crate) fn header_of(message: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(message);
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.trim_end_matches('\r').is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            if let Some(last) = out.last_mut() {
                last.1.push(' ');
                last.1.push_str(line.trim());
            }
        } else if let Some((k, v)) = line.split_once(':') {
            out.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

/// A mailbox name as the store knows it: INBOX, and the top level of its hierarchy, in
/// capitals (IMAP's INBOX is case-insensitive, RFC 3501 5.1).
pub(crate) fn mailbox_name(name: &str) -> String {
    match name.get(..5) {
        Some(head)
            if head.eq_ignore_ascii_case("INBOX")
                && matches!(name.as_bytes().get(5), None | Some(b'.') | Some(b'/')) =>
        {
            format!("INBOX{}", &name[5..])
        }
        _ => name.to_string(),
    }
}

/// Whether a message has an attachment, roughly as Dovecot's attachment detection sees it:
/// a part with `Content-Disposition: attachment`.
pub(crate) fn has_attachment(message: &[u8]) -> bool {
    String::from_utf8_lossy(message)
        .to_ascii_lowercase()
        .contains("content-disposition: attachment")
}
