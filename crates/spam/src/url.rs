//! Links in text: where an `http://` or `https://` URL starts in a word, and its host, as
//! the tokenizer and the domain blocklist lookups (RFC 5782 2.3) want it.

use std::net::Ipv4Addr;

/// The longest host name (RFC 1035 2.3.4: 255 octets on the wire, so 253 characters).
const HOST_CHARS_MAX: usize = 253;
/// The longest label of a host name (RFC 1035 2.3.4).
const LABEL_CHARS_MAX: usize = 63;

/// A URL's host.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Host {
    /// A host name: lowercased, the trailing dot gone, at least two labels. `ascii` says
    /// whether it can be looked up as it is (non-ASCII names would need IDNA first).
    Name { name: String, ascii: bool },
    /// An IP literal, in any of the forms browsers accept (`1.2.3.4`, `[::1]`, `3232235777`).
    Ip,
}

/// A URL found in a word.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Url<'a> {
    /// `true` for `https`.
    pub(crate) secure: bool,
    pub(crate) host: Option<Host>,
    /// Everything after the host: path, query and fragment.
    pub(crate) rest: &'a str,
}

/// The `http`/`https` URLs in `word` (a run of text without white space), in order; a word
/// that starts with `www.` is one too. Each URL ends where the next begins.
pub(crate) fn urls(word: &str) -> Vec<Url<'_>> {
    // Most words are not links: no allocation for them.
    let www = word.len() >= 4 && word.as_bytes()[..4].eq_ignore_ascii_case(b"www.");
    if !www && !word.contains("://") {
        return Vec::new();
    }
    let lower = word.to_ascii_lowercase();
    let mut starts: Vec<(usize, bool, usize)> = Vec::new();
    let mut from = 0;
    while let Some(at) = lower[from..].find("http") {
        let at = from + at;
        let after = &lower[at + 4..];
        if after.starts_with("://") {
            starts.push((at, false, at + 7));
        } else if after.starts_with("s://") {
            starts.push((at, true, at + 8));
        }
        from = at + 4;
    }
    if starts.is_empty() && lower.starts_with("www.") {
        starts.push((0, false, 0));
    }
    let mut out = Vec::with_capacity(starts.len());
    for (i, &(_, secure, authority_start)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(word.len(), |next| next.0);
        let Some(text) = word.get(authority_start..end) else {
            continue;
        };
        let text = text.trim_end_matches(TRAILING_PUNCTUATION);
        let authority_len = text.find(['/', '?', '#', '\\']).unwrap_or(text.len());
        out.push(Url {
            secure,
            host: host(&text[..authority_len]),
            rest: &text[authority_len..],
        });
    }
    out
}

/// What text around a link leaves at its end: `(see http://x.example/).`
const TRAILING_PUNCTUATION: &[char] = &[')', ']', '>', '.', ',', ';', ':', '!', '?', '"', '\''];

/// The host of a URL's authority (RFC 3986 3.2: `userinfo@host:port`).
pub(crate) fn host(authority: &str) -> Option<Host> {
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    if host_port.starts_with('[') {
        return Some(Host::Ip);
    }
    let host = host_port.split(':').next().unwrap_or(host_port);
    let host = host.strip_suffix('.').unwrap_or(host).to_lowercase();
    if host.is_empty() || host.len() > HOST_CHARS_MAX {
        return None;
    }
    // Browsers take `3232235777`, `0xC0A80101` and `192.168.1.1` alike as addresses.
    if host.parse::<Ipv4Addr>().is_ok()
        || host.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        || host.starts_with("0x") && host[2..].bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Some(Host::Ip);
    }
    let mut labels = 0;
    for label in host.split('.') {
        let valid = !label.is_empty()
            && label.chars().count() <= LABEL_CHARS_MAX
            && label
                .chars()
                .all(|c| c.is_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return None;
        }
        labels += 1;
    }
    if labels < 2 {
        return None;
    }
    let ascii = host.is_ascii();
    Some(Host::Name { name: host, ascii })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(host: &str) -> Option<Host> {
        Some(Host::Name {
            name: host.to_string(),
            ascii: host.is_ascii(),
        })
    }

    #[test]
    fn urls_in_a_word() {
        let found = urls("(HTTPS://User:pw@Shop.Example.COM.:8080/buy?x=1).");
        assert_eq!(
            found,
            [Url {
                secure: true,
                host: name("shop.example.com"),
                rest: "/buy?x=1",
            }]
        );
        let two = urls("http://a.example/http://b.example");
        assert_eq!(two.len(), 2);
        assert_eq!(two[1].host, name("b.example"));
        assert_eq!(urls("www.example.org")[0].host, name("www.example.org"));
        assert!(urls("httpx").is_empty());
        assert!(urls("ftp://x.example").is_empty());
    }

    #[test]
    fn hosts() {
        assert_eq!(host("192.0.2.1:25"), Some(Host::Ip));
        assert_eq!(host("[2001:db8::1]"), Some(Host::Ip));
        assert_eq!(host("3232235777"), Some(Host::Ip));
        assert_eq!(host("0xc0a80101"), Some(Host::Ip));
        assert_eq!(host("localhost"), None);
        assert_eq!(host("a..example"), None);
        assert_eq!(host("bad%2e.example"), None);
        assert_eq!(host("bücher.example"), name("bücher.example"));
        assert_eq!(host(""), None);
    }

    proptest::proptest! {
        #[test]
        fn any_word_is_read(word in "(http|s|://|www\\.|@|:|\\[|\\]|/|\\.|0x|é|\\PC){0,24}") {
            for url in urls(&word) {
                proptest::prop_assert!(word.ends_with(url.rest) || url.rest.is_empty() || word.contains(url.rest));
            }
            host(&word);
        }
    }
}
