//! ENVELOPE (RFC 9051 7.5.2, RFC 3501 7.4.2) and raw header values.

use std::borrow::Cow;

use mail_parser::parsers::MessageStream;
use mail_parser::{Addr, Address, Header, HeaderName, HeaderValue, MessagePart};

use crate::limits::{FIELD_BYTES_MAX, LIST_BYTES_MAX};
use crate::structure::Encoding;
use crate::wire::{capped, write_nstring, write_string};

/// An envelope for a message/rfc822 part whose encapsulated message is not described.
pub(crate) const NIL_ENVELOPE: &[u8] = b"(NIL NIL NIL NIL NIL NIL NIL NIL NIL NIL)";

/// The field of that name; the last one when there are more (RFC 5322 3.6 allows most once),
/// because that is the one mail-parser builds the part tree from.
pub(crate) fn find<'p, 'x>(
    part: &'p MessagePart<'x>,
    name: &HeaderName<'_>,
) -> Option<&'p Header<'x>> {
    part.headers.iter().rev().find(|h| h.name == *name)
}

/// A field's value as it is in the message (IMAP sends header values undecoded: RFC 2047
/// encoded-words stay encoded), unfolded (RFC 5322 2.2.3: the CRLFs of folding removed),
/// trimmed and capped.
pub(crate) fn raw_value(raw: &[u8], header: &Header<'_>) -> Vec<u8> {
    let start = header.offset_start as usize;
    let end = (header.offset_end as usize).min(raw.len());
    let value = raw.get(start..end).unwrap_or_default();
    let mut out = Vec::with_capacity(value.len().min(FIELD_BYTES_MAX));
    for &b in value.trim_ascii() {
        if b != b'\r' && b != b'\n' {
            out.push(b);
            if out.len() == FIELD_BYTES_MAX {
                break;
            }
        }
    }
    out
}

/// [`raw_value`] of the field of that name (see [`find`]).
pub(crate) fn field(part: &MessagePart<'_>, raw: &[u8], name: &HeaderName<'_>) -> Option<Vec<u8>> {
    find(part, name).map(|h| raw_value(raw, h))
}

/// Writes the ENVELOPE of the message whose top-level entity is `part`; `raw` is the buffer
/// its header offsets point into.
pub(crate) fn write_envelope(out: &mut Vec<u8>, part: &MessagePart<'_>, raw: &[u8]) {
    // RFC 9051 7.5.2: date, subject, from, sender, reply-to, to, cc, bcc, in-reply-to,
    // message-id.
    out.push(b'(');
    write_nstring(out, field(part, raw, &HeaderName::Date).as_deref());
    out.push(b' ');
    write_nstring(out, field(part, raw, &HeaderName::Subject).as_deref());
    out.push(b' ');
    let from_start = out.len();
    write_addresses(out, part, raw, &HeaderName::From);
    let from = out[from_start..].to_vec();
    for name in [HeaderName::Sender, HeaderName::ReplyTo] {
        out.push(b' ');
        // RFC 3501 7.4.2 / RFC 9051 7.5.2: an absent or empty Sender or Reply-To is the
        // same as From.
        if !write_addresses(out, part, raw, &name) {
            out.truncate(out.len() - 3);
            out.extend_from_slice(&from);
        }
    }
    for name in [HeaderName::To, HeaderName::Cc, HeaderName::Bcc] {
        out.push(b' ');
        write_addresses(out, part, raw, &name);
    }
    out.push(b' ');
    write_nstring(out, field(part, raw, &HeaderName::InReplyTo).as_deref());
    out.push(b' ');
    write_nstring(out, field(part, raw, &HeaderName::MessageId).as_deref());
    out.push(b')');
}

/// Private-use characters, one of which stands in for the `=` of `=?` while mail-parser reads
/// an address list. Its address parser always decodes RFC 2047 encoded-words, and IMAP wants
/// them as they are in the message.
const STAND_INS: [char; 4] = ['\u{E000}', '\u{E001}', '\u{E002}', '\u{E003}'];

/// Writes an address list (RFC 9051 7.5.2: `(name adl mailbox host)` per address, groups
/// as `(NIL NIL "group" NIL)` ... `(NIL NIL NIL NIL)`), or NIL. Returns false for NIL.
fn write_addresses(
    out: &mut Vec<u8>,
    part: &MessagePart<'_>,
    raw: &[u8],
    name: &HeaderName<'_>,
) -> bool {
    let Some(header) = find(part, name) else {
        out.extend_from_slice(b"NIL");
        return false;
    };
    let start = (header.offset_start as usize).min(raw.len());
    let end = (header.offset_end as usize).clamp(start, raw.len());
    let value = &raw[start..end];

    let stand_in: Option<String> = if value.windows(2).any(|w| w == b"=?") {
        STAND_INS
            .iter()
            .map(|c| c.to_string())
            .find(|s| !value.windows(s.len()).any(|w| w == s.as_bytes()))
    } else {
        None
    };
    let shielded = stand_in.as_deref().map(|s| shield(value, s.as_bytes()));
    let input = shielded.as_deref().unwrap_or(value);
    let restore = |s: &str| -> Vec<u8> {
        let bytes = match &stand_in {
            // The stand-in is valid UTF-8, so it survives mail-parser's lossy conversion.
            Some(stand_in) => Cow::Owned(s.replace(stand_in.as_str(), "=").into_bytes()),
            None => Cow::Borrowed(s.as_bytes()),
        };
        capped(&bytes).to_vec()
    };

    let parsed = MessageStream::new(input).parse_address();
    // mail-parser reads a comment standing alone (`group: (foo) ;`) as an address named
    // "foo"; RFC 5322 3.2.2 makes it white space. Such an entry has no address, and its
    // name does not appear in the value once comments are taken out.
    let uncommented = without_comments(input);
    let is_comment = |addr: &Addr<'_>| {
        addr.address.is_none()
            && addr.name.as_deref().is_some_and(|n| {
                !n.is_empty() && !uncommented.windows(n.len()).any(|w| w == n.as_bytes())
            })
    };
    let list_start = out.len();
    out.push(b'(');
    let full = |out: &Vec<u8>| out.len() - list_start >= LIST_BYTES_MAX;
    match &parsed {
        HeaderValue::Address(Address::List(addrs)) => {
            for addr in addrs {
                if full(out) {
                    break;
                }
                if !is_comment(addr) {
                    write_addr(out, addr, &restore);
                }
            }
        }
        HeaderValue::Address(Address::Group(groups)) => {
            for group in groups {
                if full(out) {
                    break;
                }
                // Addresses outside any group come as a group without a name.
                if let Some(name) = &group.name {
                    out.extend_from_slice(b"(NIL NIL ");
                    write_string(out, &restore(name));
                    out.extend_from_slice(b" NIL)");
                }
                for addr in &group.addresses {
                    if full(out) {
                        break;
                    }
                    if !is_comment(addr) {
                        write_addr(out, addr, &restore);
                    }
                }
                if group.name.is_some() {
                    out.extend_from_slice(b"(NIL NIL NIL NIL)");
                }
            }
        }
        _ => {}
    }
    if out.len() == list_start + 1 {
        out.truncate(list_start);
        out.extend_from_slice(b"NIL");
        false
    } else {
        out.push(b')');
        true
    }
}

/// `value` without its comments (RFC 5322 3.2.2: parentheses, nested, with `\` quoting,
/// not inside a quoted string).
fn without_comments(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    let (mut depth, mut quoted, mut escaped) = (0usize, false, false);
    for &b in value {
        if escaped {
            escaped = false;
            if depth == 0 {
                out.push(b);
            }
            continue;
        }
        match b {
            b'\\' => {
                escaped = true;
                if depth == 0 {
                    out.push(b);
                }
            }
            b'"' if depth == 0 => {
                quoted = !quoted;
                out.push(b);
            }
            b'(' if !quoted => depth += 1,
            b')' if !quoted && depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(b),
            _ => {}
        }
    }
    out
}

/// `value` with the `=` of every `=?` replaced by `stand_in`.
fn shield(value: &[u8], stand_in: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 8);
    for (i, &b) in value.iter().enumerate() {
        if b == b'=' && value.get(i + 1) == Some(&b'?') {
            out.extend_from_slice(stand_in);
        } else {
            out.push(b);
        }
    }
    out
}

/// One `(name adl mailbox host)`. The host is never NIL (that would start a group), so the
/// parts an address lacks are filled in the way Dovecot does.
fn write_addr(out: &mut Vec<u8>, addr: &Addr<'_>, restore: &dyn Fn(&str) -> Vec<u8>) {
    let name = addr.name.as_deref().map(restore).filter(|n| !n.is_empty());
    let address = addr.address.as_deref().map(restore);
    let (name, mailbox, host) = match address {
        Some(address) => match address.iter().rposition(|&b| b == b'@') {
            Some(at) => (name, address[..at].to_vec(), address[at + 1..].to_vec()),
            None => (name, address, b"MISSING_DOMAIN".to_vec()),
        },
        // mail-parser reads a bare `foo` as a name; a single word is a local mailbox.
        None => match name {
            Some(word) if !word.iter().any(u8::is_ascii_whitespace) => {
                (None, word, b"MISSING_DOMAIN".to_vec())
            }
            name => (
                name,
                b"MISSING_MAILBOX".to_vec(),
                b"MISSING_DOMAIN".to_vec(),
            ),
        },
    };
    let (route, mailbox) = split_route(&mailbox);
    out.push(b'(');
    write_nstring(out, name.as_deref());
    out.push(b' ');
    write_nstring(out, route);
    out.push(b' ');
    write_string(out, mailbox);
    out.push(b' ');
    write_string(out, &host);
    out.push(b')');
}

/// RFC 3501 7.4.2 / RFC 9051 7.5.2: addr-adl is the source route of an RFC 822 route-addr
/// (`<@route1,@route2:user@domain>`, RFC 5322 4.4's obs-route). mail-parser leaves it in
/// front of the local part; this takes it off: (the route, the mailbox). A route is `@`
/// domains up to the first `:` outside a domain literal's brackets.
fn split_route(mailbox: &[u8]) -> (Option<&[u8]>, &[u8]) {
    if mailbox.first() != Some(&b'@') {
        return (None, mailbox);
    }
    let mut in_literal = false;
    for (i, &b) in mailbox.iter().enumerate() {
        match b {
            b'[' => in_literal = true,
            b']' => in_literal = false,
            b':' if !in_literal => return (Some(&mailbox[..i]), &mailbox[i + 1..]),
            _ => {}
        }
    }
    (None, mailbox)
}

/// The first token of the raw Content-Transfer-Encoding value (comments and junk after it
/// ignored), or empty when there is none.
pub(crate) fn encoding_token(part: &MessagePart<'_>, raw: &[u8]) -> Vec<u8> {
    let mut value = field(part, raw, &HeaderName::ContentTransferEncoding).unwrap_or_default();
    let end = value
        .iter()
        .position(|&b| b.is_ascii_whitespace() || b == b'(' || b == b';')
        .unwrap_or(value.len());
    value.truncate(end);
    value
}

/// A part's Content-Transfer-Encoding, from its raw header value (RFC 2045 6.1).
pub(crate) fn encoding(part: &MessagePart<'_>, raw: &[u8]) -> Encoding {
    Encoding::from_token(&encoding_token(part, raw))
}
