//! DNS blocklists and allowlists (RFC 5782): the names to look up for an address or a
//! domain, whether an answer is a listing, and the keys of a message a lookup or the
//! reputation is about (its link domains, its From address, the client's network).

use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

use crate::header;
use crate::text;
use crate::tokens::TokenLimits;
use crate::url::{self, Host};

/// The name to look up for `ip` in `zone`: RFC 5782 2.1, an IPv4 address's octets reversed
/// (`192.0.2.99` in `zone` is `99.2.0.192.zone`); RFC 5782 2.4, an IPv6 address's 32 nibbles
/// reversed, each a label. An IPv4-mapped IPv6 address (`::ffff:192.0.2.99`, as a dual-stack
/// socket reports IPv4 clients) is looked up as the IPv4 address it is.
pub fn ip_query(ip: IpAddr, zone: &str) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            format!("{d}.{c}.{b}.{a}.{zone}")
        }
        IpAddr::V6(v6) => {
            let mut name = String::with_capacity(64 + zone.len());
            for byte in v6.octets().iter().rev() {
                name.push(hex_digit(byte & 0x0f));
                name.push('.');
                name.push(hex_digit(byte >> 4));
                name.push('.');
            }
            name.push_str(zone);
            name
        }
    }
}

fn hex_digit(nibble: u8) -> char {
    char::from_digit(u32::from(nibble), 16).unwrap_or('0')
}

/// The name to look up for `domain` in `zone` (RFC 5782 2.3: the domain prefixed to the
/// zone), the domain lowercased and without its trailing dot.
pub fn domain_query(domain: &str, zone: &str) -> String {
    let domain = domain
        .strip_suffix('.')
        .unwrap_or(domain)
        .to_ascii_lowercase();
    format!("{domain}.{zone}")
}

/// A range of answers that count as a listing (a zone's `codes`): `127.0.0.2`, or
/// `127.0.0.2-127.0.0.11`, both ends included.
#[derive(Clone, Debug, PartialEq)]
pub struct CodeRange {
    pub first: Ipv4Addr,
    pub last: Ipv4Addr,
}

impl FromStr for CodeRange {
    type Err = String;

    fn from_str(s: &str) -> Result<CodeRange, String> {
        let parse = |part: &str| {
            part.trim()
                .parse::<Ipv4Addr>()
                .map_err(|_| format!("{:?} is not an IPv4 address (in {s:?})", part.trim()))
        };
        let (first, last) = match s.split_once('-') {
            Some((first, last)) => (parse(first)?, parse(last)?),
            None => (parse(s)?, parse(s)?),
        };
        if first > last {
            return Err(format!("{s:?}: the range ends before it starts"));
        }
        Ok(CodeRange { first, last })
    }
}

impl std::fmt::Display for CodeRange {
    /// The form `FromStr` reads.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

/// Whether an A record answered for a query name is a listing. RFC 5782 2.1: answers are
/// in 127.0.0.0/8; RFC 5782 5: 127.0.0.1 is never a listing (it is the "not listed" test
/// entry's address and what broken resolvers invent). With `codes`, the answer must be in one
/// of them; without, any other 127/8 answer counts, except 127.255.255.0/24, where Spamhaus
/// answers about the query rather than the address (252: a mistyped zone, 254: a public
/// resolver, 255: too many queries), so that such an answer does not list everyone.
pub fn listed(answer: Ipv4Addr, codes: &[CodeRange]) -> bool {
    let [first, second, third, _] = answer.octets();
    if first != 127 || answer == Ipv4Addr::new(127, 0, 0, 1) {
        return false;
    }
    if codes.is_empty() {
        return !(second == 255 && third == 255);
    }
    codes
        .iter()
        .any(|range| range.first <= answer && answer <= range.last)
}

/// The host names of the `http` and `https` links in a message's text parts (and the
/// `href`s of its HTML): lowercased, without trailing dot, in order of appearance, each once,
/// at most `max`. IP literals are left out (the client IP is what `kind = "ip"` zones are
/// asked about), and so are names that are not ASCII (looking them up needs IDNA). Reads
/// what the tokenizer reads, within the same default bounds.
pub fn link_domains(message: &[u8], max: usize) -> Vec<String> {
    let limits = TokenLimits::default();
    let mut domains: Vec<String> = Vec::new();
    let Some(parsed) = text::parse(message, limits.message_bytes_max()) else {
        return domains;
    };
    let body = text::body(&parsed, limits.text_bytes_max);
    for word in body.texts.iter().flat_map(|t| t.split_whitespace()) {
        for link in url::urls(word) {
            if domains.len() >= max {
                return domains;
            }
            if let Some(Host::Name { name, ascii: true }) = link.host
                && !domains.contains(&name)
            {
                domains.push(name);
            }
        }
    }
    domains
}

/// The address of the message's From field (RFC 5322 3.6.2), its first if it has several,
/// lowercased whole: it is a reputation key, and mail systems treat local parts as
/// case-insensitive in practice (RFC 5321 2.4 allows otherwise, no one does). None without
/// a From field or an address with `@` in it.
pub fn from_address(message: &[u8]) -> Option<String> {
    let field = header::fields(message).find(|f| f.name.eq_ignore_ascii_case(b"From"))?;
    let mut stream = mail_parser::parsers::MessageStream::new(field.value);
    let value = stream.parse_address();
    let address = value.as_address()?.first()?.address()?.trim();
    let (local, domain) = address.rsplit_once('@')?;
    if local.is_empty() || domain.is_empty() {
        return None;
    }
    Some(address.to_lowercase())
}

/// The reputation key of a client's network (docs/spam.md 2): the /24 of an IPv4 address
/// (`203.0.113.0/24`), the /48 of an IPv6 one (`2001:db8:1::/48`), the IPv4 address of an
/// IPv4-mapped one.
pub fn network_key(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            format!("{a}.{b}.{c}.0/24")
        }
        IpAddr::V6(v6) => {
            let mut segments = v6.segments();
            segments[3..].fill(0);
            format!("{}/48", std::net::Ipv6Addr::from(segments))
        }
    }
}

#[cfg(test)]
mod tests;
