//! The header section as raw fields: enough to strip our own Authentication-Results, to find
//! the From field, and to know which fields a message has, without parsing the whole message.

use std::borrow::Cow;

use mail_parser::parsers::MessageStream;
use mail_parser::{Address, HeaderValue};

/// One header field: its name, and its whole extent (name, colon, value and continuation lines,
/// up to and including the final line end).
pub(crate) struct Field<'a> {
    pub(crate) name: &'a [u8],
    /// Everything after the colon, line ends included (empty for a line without a colon).
    pub(crate) value: &'a [u8],
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// The fields of the header section, which ends at the first empty line (RFC 5322 2.1).
/// Lines may end in CRLF or a bare LF. A line without a colon is a field with an empty value
/// and its whole line as the name, so that nothing is silently merged into a neighbour.
pub(crate) fn fields(message: &[u8]) -> impl Iterator<Item = Field<'_>> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let rest = message.get(pos..)?;
        if rest.is_empty() || rest.starts_with(b"\r\n") || rest.starts_with(b"\n") {
            return None;
        }
        let start = pos;
        let mut end = start + line_len(rest);
        // RFC 5322 2.2.3: a line starting with white space continues the field.
        while let Some(next) = message.get(end..)
            && matches!(next.first(), Some(b' ' | b'\t'))
        {
            end += line_len(next);
        }
        pos = end;
        let field = message.get(start..end)?;
        let (name, value) = match colon_in_first_line(field) {
            Some(colon) => (trim_end(&field[..colon]), &field[colon + 1..]),
            None => (field, &field[field.len()..]),
        };
        Some(Field {
            name,
            value,
            start,
            end,
        })
    })
}

/// The length of the first line of `bytes`, its LF included (all of `bytes` without one).
fn line_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |lf| lf + 1)
}

fn colon_in_first_line(field: &[u8]) -> Option<usize> {
    let line = &field[..line_len(field)];
    line.iter().position(|&b| b == b':')
}

fn trim_end(bytes: &[u8]) -> &[u8] {
    let len = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |last| last + 1);
    &bytes[..len]
}

/// Whether the header section has a field named `name` (case-insensitive, RFC 5322 1.2.2).
pub(crate) fn has_field(message: &[u8], name: &str) -> bool {
    fields(message).any(|field| field.name.eq_ignore_ascii_case(name.as_bytes()))
}

/// Removes every Authentication-Results header field whose authserv-id is `hostname`
/// (case-insensitive, a trailing dot ignored), continuation lines included, from the header
/// section only; the body is never touched, even where its lines look like header fields.
///
/// RFC 8601 5: a receiving MTA must remove such fields that claim to come from inside its
/// trust boundary, since only it may have added them. Returns the message unchanged
/// (borrowed) when there is none.
pub fn strip_our_authentication_results<'a>(message: &'a [u8], hostname: &str) -> Cow<'a, [u8]> {
    let ours: Vec<(usize, usize)> = fields(message)
        .filter(|field| field.name.eq_ignore_ascii_case(b"Authentication-Results"))
        .filter(|field| authserv_id(field.value).is_some_and(|id| same_host(&id, hostname)))
        .map(|field| (field.start, field.end))
        .collect();
    if ours.is_empty() {
        return Cow::Borrowed(message);
    }
    let mut kept = Vec::with_capacity(message.len());
    let mut pos = 0;
    for (start, end) in ours {
        kept.extend_from_slice(&message[pos..start]);
        pos = end;
    }
    kept.extend_from_slice(&message[pos..]);
    Cow::Owned(kept)
}

fn same_host(id: &str, hostname: &str) -> bool {
    id.trim_end_matches('.')
        .eq_ignore_ascii_case(hostname.trim_end_matches('.'))
}

/// The authserv-id of an Authentication-Results value (RFC 8601 2.2: `[CFWS] authserv-id`,
/// where authserv-id is a token or a quoted-string), or None when there is none.
fn authserv_id(value: &[u8]) -> Option<String> {
    let mut rest = skip_cfws(value);
    if let Some(quoted) = rest.strip_prefix(b"\"") {
        let mut id = Vec::new();
        rest = quoted;
        loop {
            match rest {
                [b'\\', escaped, tail @ ..] => {
                    id.push(*escaped);
                    rest = tail;
                }
                [b'"', ..] => break,
                [byte, tail @ ..] => {
                    id.push(*byte);
                    rest = tail;
                }
                [] => return None,
            }
        }
        return Some(String::from_utf8_lossy(&id).into_owned());
    }
    let len = rest
        .iter()
        .position(|&b| b == b';' || b == b'(' || b == b'"' || b.is_ascii_whitespace())
        .unwrap_or(rest.len());
    (len > 0).then(|| String::from_utf8_lossy(&rest[..len]).into_owned())
}

/// Skips white space, line folds and (nested) comments (RFC 5322 3.2.2 CFWS).
fn skip_cfws(mut bytes: &[u8]) -> &[u8] {
    loop {
        match bytes.first() {
            Some(b) if b.is_ascii_whitespace() => bytes = &bytes[1..],
            Some(b'(') => {
                let mut depth = 0usize;
                let mut escaped = false;
                let mut end = bytes.len();
                for (i, &b) in bytes.iter().enumerate() {
                    match b {
                        _ if escaped => escaped = false,
                        b'\\' => escaped = true,
                        b'(' => depth += 1,
                        b')' => {
                            depth -= 1;
                            if depth == 0 {
                                end = i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                bytes = &bytes[end..];
            }
            _ => return bytes,
        }
    }
}

/// The domain of the RFC5322.From header field, lowercase; None when the field is missing or
/// unparsable, or when there is more than one From field or more than one address in it (a
/// message may carry only one, RFC 5322 3.6; RFC 7489 6.6.1 leaves such messages to policy).
pub fn from_domain(message: &[u8]) -> Option<String> {
    let mut froms = fields(message).filter(|field| field.name.eq_ignore_ascii_case(b"From"));
    let from = froms.next()?;
    if froms.next().is_some() {
        return None;
    }
    let value = MessageStream::new(from.value).parse_address();
    let mut addresses = match &value {
        HeaderValue::Address(Address::List(list)) => list.iter().collect::<Vec<_>>(),
        HeaderValue::Address(Address::Group(groups)) => groups
            .iter()
            .flat_map(|group| group.addresses.iter())
            .collect(),
        _ => return None,
    };
    let address = addresses.pop()?;
    if !addresses.is_empty() {
        return None;
    }
    let (_, domain) = address.address.as_deref()?.rsplit_once('@')?;
    let domain = domain.trim().trim_end_matches('.');
    (!domain.is_empty()).then(|| domain.to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_cover_the_header_section_only() {
        let message = b"From: a@example.org\r\nSubject: one\r\n two\r\nbad line\r\n\r\nX: body\r\n";
        let names: Vec<&[u8]> = fields(message).map(|field| field.name).collect();
        assert_eq!(names, [&b"From"[..], b"Subject", b"bad line\r\n"]);
        let subject = fields(message).nth(1).map(|field| field.value);
        assert_eq!(subject, Some(&b" one\r\n two\r\n"[..]));
    }

    #[test]
    fn fields_take_bare_line_feeds_and_a_missing_body() {
        let names: Vec<&[u8]> = fields(b"A: 1\nB: 2").map(|field| field.name).collect();
        assert_eq!(names, [&b"A"[..], b"B"]);
        assert_eq!(fields(b"\r\nA: 1\r\n").count(), 0);
        assert_eq!(fields(b"").count(), 0);
    }

    #[test]
    fn authserv_id_skips_comments_and_unquotes() {
        assert_eq!(
            authserv_id(b" mx.example.org; spf=pass").as_deref(),
            Some("mx.example.org")
        );
        assert_eq!(
            authserv_id(b" (c (nested)) mx.example.org 1; none").as_deref(),
            Some("mx.example.org")
        );
        assert_eq!(
            authserv_id(b" \"mx.exa\\mple.org\"; none").as_deref(),
            Some("mx.example.org")
        );
        assert_eq!(
            authserv_id(b"\r\n\tmx.example.org;").as_deref(),
            Some("mx.example.org")
        );
        assert_eq!(authserv_id(b" ; none"), None);
        assert_eq!(authserv_id(b" \"open"), None);
        assert_eq!(authserv_id(b" (unclosed"), None);
    }

    #[test]
    fn from_domain_wants_exactly_one_address() {
        assert_eq!(
            from_domain(b"From: A <a@Example.ORG>\r\n\r\n").as_deref(),
            Some("example.org")
        );
        assert_eq!(
            from_domain(b"from: a@example.org.\r\n\r\n").as_deref(),
            Some("example.org")
        );
        assert_eq!(from_domain(b"From: a@x.org, b@y.org\r\n\r\n"), None);
        assert_eq!(from_domain(b"From: a@x.org\r\nFrom: b@x.org\r\n\r\n"), None);
        assert_eq!(
            from_domain(b"Subject: no from\r\n\r\nFrom: a@x.org\r\n"),
            None
        );
        assert_eq!(from_domain(b"From: nobody\r\n\r\n"), None);
        assert_eq!(
            from_domain(b"From: group: a@x.org;\r\n\r\n").as_deref(),
            Some("x.org")
        );
        assert_eq!(from_domain(b"From: a@\r\n\r\n"), None);
    }
}
