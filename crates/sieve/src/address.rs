//! Addresses in header fields (RFC 5228 5.1, via mail-parser's RFC 5322 address parser)
//! and their parts (RFC 5228 2.7.4, RFC 5233 subaddress).

use mail_parser::parsers::MessageStream;
use mail_parser::{Address, HeaderValue};

use crate::ir::AddressPart;

/// The addresses (addr-specs) in a raw header field value; a value that parses to none
/// but is not blank counts as one address, written as it is.
pub(crate) fn parse_list(raw: &[u8]) -> Vec<String> {
    let mut buf = Vec::with_capacity(raw.len() + 2);
    buf.extend_from_slice(raw);
    buf.extend_from_slice(b"\r\n");
    let mut out = Vec::new();
    if let HeaderValue::Address(address) = MessageStream::new(&buf).parse_address() {
        match address {
            Address::List(list) => {
                out.extend(
                    list.into_iter()
                        .filter_map(|a| a.address.map(|s| s.into_owned())),
                );
            }
            Address::Group(groups) => {
                for g in groups {
                    out.extend(
                        g.addresses
                            .into_iter()
                            .filter_map(|a| a.address.map(|s| s.into_owned())),
                    );
                }
            }
        }
    }
    if out.is_empty() {
        let text = String::from_utf8_lossy(raw);
        let text = text.trim();
        // A blank field is one empty address (so `:all ""` matches it, as `header` would).
        if text.is_empty() {
            out.push(String::new());
        } else if !text.ends_with(';') {
            out.push(text.trim_matches(|c| c == '<' || c == '>').to_string());
        }
    }
    out
}

/// The part of `address` a test looks at; None when it has no such part (`:detail` of an
/// address without a separator, RFC 5233 4), and for every part but `:all` when the
/// address is not syntactically valid (no "@", or an empty local part or domain: RFC 5228
/// 2.7.4, "it will not be matched by tests specifying :localpart or :domain").
pub(crate) fn part(address: &str, part: AddressPart) -> Option<&str> {
    if part == AddressPart::All {
        return Some(address);
    }
    let (local, domain) = match address.rfind('@') {
        Some(at) if at > 0 && at + 1 < address.len() => (&address[..at], &address[at + 1..]),
        _ => return None,
    };
    match part {
        AddressPart::All => Some(address),
        AddressPart::LocalPart => Some(local),
        AddressPart::Domain => Some(domain),
        AddressPart::User => Some(local.split_once('+').map_or(local, |(u, _)| u)),
        AddressPart::Detail => local.split_once('+').map(|(_, d)| d),
    }
}

/// A plausible mailbox for `redirect` (RFC 5228 4.2: an RFC 5322 address): local@domain,
/// no blanks or angle brackets.
pub(crate) fn valid_address(s: &str) -> bool {
    let s = s.trim();
    match s.rsplit_once('@') {
        Some((l, d)) => {
            !l.is_empty()
                && !d.is_empty()
                && !s
                    .chars()
                    .any(|c| c.is_whitespace() || c == '<' || c == '>' || c == ',')
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 5228 5.1 and 2.7.4
    #[test]
    fn addresses_and_parts() {
        let list =
            parse_list(b" \"Coyote, W.\" <coyote@desert.example.org>, road@acme.example (r)");
        assert_eq!(list, vec!["coyote@desert.example.org", "road@acme.example"]);
        assert_eq!(part("a@b.c", AddressPart::LocalPart), Some("a"));
        assert_eq!(part("a@b.c", AddressPart::Domain), Some("b.c"));
        assert_eq!(
            parse_list(b" undisclosed-recipients:;"),
            Vec::<String>::new()
        );
    }

    // RFC 5233 4
    #[test]
    fn subaddress() {
        assert_eq!(
            part("ken+sieve@example.org", AddressPart::User),
            Some("ken")
        );
        assert_eq!(
            part("ken+sieve@example.org", AddressPart::Detail),
            Some("sieve")
        );
        assert_eq!(part("ken+@example.org", AddressPart::Detail), Some(""));
        assert_eq!(part("ken@example.org", AddressPart::Detail), None);
        assert_eq!(part("ken@example.org", AddressPart::User), Some("ken"));
    }
}
