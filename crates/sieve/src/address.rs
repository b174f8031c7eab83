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

/// A mailbox for `redirect` (RFC 5228 4.2: "an RFC 5322 address"), normalized to its bare
/// addr-spec: `Name <a@b>`, quoted local parts that need no quotes (`"a"@b` is `a@b`),
/// blanks and comments (CFWS) around the words and dots are all accepted, as Pigeonhole
/// does. None when `s` is not one mailbox (a group, a list, a missing `@`, ...).
pub(crate) fn normalize_mailbox(s: &str) -> Option<String> {
    let tokens = tokenize(s)?;
    let mut rest: &[Token] = &tokens;
    let spec = if let Some(open) = rest.iter().position(|t| *t == Token::Special('<')) {
        // name-addr: an optional display-name (words, and the dots obs-phrase allows).
        let (name, after) = rest.split_at(open);
        if name.first() == Some(&Token::Special('.'))
            || !name
                .iter()
                .all(|t| matches!(t, Token::Atom(_) | Token::Quoted(_) | Token::Special('.')))
        {
            return None;
        }
        rest = &after[1..];
        let spec = addr_spec(&mut rest)?;
        if rest != [Token::Special('>')] {
            return None;
        }
        spec
    } else {
        let spec = addr_spec(&mut rest)?;
        if !rest.is_empty() {
            return None;
        }
        spec
    };
    Some(spec)
}

/// Whether `s` is one mailbox `redirect` accepts (see [`normalize_mailbox`]).
pub(crate) fn valid_address(s: &str) -> bool {
    normalize_mailbox(s).is_some()
}

#[derive(Debug, PartialEq)]
enum Token {
    Atom(String),
    Quoted(String),
    Literal(String),
    Special(char),
}

fn is_atext(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || !c.is_ascii()
}

/// RFC 5322 3.2: atoms, quoted strings, domain literals and specials, with CFWS dropped.
fn tokenize(s: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\r' | '\n' => {}
            '(' => {
                let mut depth = 1;
                while depth > 0 {
                    match chars.next()? {
                        '\\' => {
                            chars.next()?;
                        }
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ => {}
                    }
                }
            }
            '"' => {
                let mut text = String::new();
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => text.push(chars.next()?),
                        '\r' | '\n' => {}
                        c if c.is_ascii_control() && c != '\t' => return None,
                        c => text.push(c),
                    }
                }
                out.push(Token::Quoted(text));
            }
            '[' => {
                let mut text = String::new();
                loop {
                    match chars.next()? {
                        ']' => break,
                        '[' | '\\' => return None,
                        c if c.is_whitespace() => {}
                        c if c.is_ascii_control() => return None,
                        c => text.push(c),
                    }
                }
                out.push(Token::Literal(text));
            }
            '<' | '>' | '@' | '.' | ',' | ':' | ';' | ')' | ']' | '\\' => {
                out.push(Token::Special(c))
            }
            c if is_atext(c) => {
                let mut atom = String::from(c);
                while let Some(&n) = chars.peek() {
                    if !is_atext(n) {
                        break;
                    }
                    atom.push(n);
                    chars.next();
                }
                out.push(Token::Atom(atom));
            }
            _ => return None,
        }
    }
    Some(out)
}

/// addr-spec = local-part "@" domain (with obs-local-part: words joined by dots), written
/// back without CFWS and with the local part quoted only when it is not a dot-atom.
fn addr_spec(rest: &mut &[Token]) -> Option<String> {
    let mut local = String::new();
    loop {
        match rest.first()? {
            Token::Atom(a) | Token::Quoted(a) => local.push_str(a),
            _ => return None,
        }
        *rest = &rest[1..];
        match rest.first()? {
            Token::Special('.') => {
                local.push('.');
                *rest = &rest[1..];
            }
            Token::Special('@') => {
                *rest = &rest[1..];
                break;
            }
            _ => return None,
        }
    }
    let dot_atom = !local.is_empty()
        && local
            .split('.')
            .all(|w| !w.is_empty() && w.chars().all(is_atext));
    let mut out = if dot_atom {
        local
    } else {
        let mut q = String::from('"');
        for c in local.chars() {
            if c == '"' || c == '\\' {
                q.push('\\');
            }
            q.push(c);
        }
        q.push('"');
        q
    };
    out.push('@');
    match rest.first()? {
        Token::Literal(l) => {
            out.push('[');
            out.push_str(l);
            out.push(']');
            *rest = &rest[1..];
        }
        _ => loop {
            match rest.first()? {
                Token::Atom(a) => out.push_str(a),
                _ => return None,
            }
            *rest = &rest[1..];
            if rest.first() == Some(&Token::Special('.')) {
                out.push('.');
                *rest = &rest[1..];
            } else {
                break;
            }
        },
    }
    Some(out)
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

    // RFC 5228 4.2 (an RFC 5322 address), RFC 5322 3.4 (name-addr, CFWS) and 3.4.1
    // (quoted local parts): what Pigeonhole's compile/redirect.sieve and
    // execute/address-normalize.svtest accept, normalized to the bare addr-spec.
    #[test]
    fn redirect_addresses_normalize() {
        for (given, want) in [
            ("stephan@example.org", "stephan@example.org"),
            (" stephan @ example.org ", "stephan@example.org"),
            ("Stephan Bosch<stephan@example.org>", "stephan@example.org"),
            (
                "  Stephan Bosch  <  stephan  @  example.org  > ",
                "stephan@example.org",
            ),
            (
                "\"Stephan Bosch\" <\"S.Bosch\"@example.net>",
                "S.Bosch@example.net",
            ),
            ("\"Sirius\"@example.net", "Sirius@example.net"),
            ("\"S[r]us\"@example.net", "\"S[r]us\"@example.net"),
            (
                "\"Stephan Bosch\"@example.org",
                "\"Stephan Bosch\"@example.org",
            ),
            ("a (comment) @ (more (nested)) b.example", "a@b.example"),
            ("<a@b.example>", "a@b.example"),
            ("a@[192.0.2.1]", "a@[192.0.2.1]"),
        ] {
            assert_eq!(normalize_mailbox(given).as_deref(), Some(want), "{given}");
        }
        for bad in [
            "",
            "stephan",
            "@example.org",
            "stephan@",
            "a@b, c@d",
            "group: a@b;",
            "a@b.",
            ".a@b",
            "a..b@c",
            "Name <a@b",
            "<a@b> junk",
            "a@b@c",
            "\"open@example.org",
        ] {
            assert_eq!(normalize_mailbox(bad), None, "{bad}");
        }
    }
}
