//! The sender's reputation keys (docs/spam.md 2): its From address, its authenticated
//! domain, its client network. At arrival they come from the checks; when a stored message
//! is trained, from the trace fields this server wrote on it (our Authentication-Results,
//! RFC 8601, and our Received, RFC 5321 4.4), which a sender cannot forge: fields claiming
//! our authserv-id are removed on arrival.

use std::net::IpAddr;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SenderKeys {
    /// The From: address, lowercase.
    pub address: Option<String>,
    /// The From: domain passed SPF or DKIM (or DMARC).
    pub address_authenticated: bool,
    /// A domain SPF or DKIM vouched for: the first passing DKIM `d=`, else SPF's domain.
    pub domain: Option<String>,
    /// The client's network (`spam::network_key`).
    pub network: Option<String>,
}

impl SenderKeys {
    /// The keys as the directory stores them.
    pub fn keys(&self) -> Vec<String> {
        let mut keys = Vec::new();
        if let Some(a) = &self.address {
            keys.push(format!("a:{a}"));
        }
        if let Some(d) = &self.domain {
            keys.push(format!("d:{d}"));
        }
        if let Some(n) = &self.network {
            keys.push(format!("n:{n}"));
        }
        keys
    }

    /// The reputation they have in `counts`.
    pub(crate) fn reputation(
        &self,
        counts: &std::collections::HashMap<String, spam::Counts>,
    ) -> spam::Reputation {
        let get = |key: Option<String>| key.and_then(|k| counts.get(&k).copied());
        spam::Reputation {
            address: get(self.address.as_ref().map(|a| format!("a:{a}"))),
            address_authenticated: self.address_authenticated,
            domain: get(self.domain.as_ref().map(|d| format!("d:{d}"))),
            network: get(self.network.as_ref().map(|n| format!("n:{n}"))),
        }
    }
}

/// The keys of a message arriving now, from the checks' verdict.
pub fn at_arrival(
    message: &[u8],
    client: IpAddr,
    verdict: Option<&sender_auth::Verdict>,
) -> SenderKeys {
    let address = spam::from_address(message);
    let from_domain = address
        .as_deref()
        .and_then(|a| a.rsplit_once('@'))
        .map(|(_, d)| d.to_string());
    let (address_authenticated, domain) = match verdict {
        Some(v) => {
            let authenticated = v.dmarc == sender_auth::DmarcResult::Pass
                || from_domain
                    .as_deref()
                    .is_some_and(|d| v.authenticated_for(d));
            let dkim = v
                .dkim
                .iter()
                .find(|d| d.result == sender_auth::DkimResult::Pass && !d.domain.is_empty())
                .map(|d| d.domain.trim_end_matches('.').to_ascii_lowercase());
            let spf = (v.spf == sender_auth::SpfResult::Pass && !v.spf_domain.is_empty())
                .then(|| v.spf_domain.trim_end_matches('.').to_ascii_lowercase());
            (authenticated, dkim.or(spf))
        }
        None => (false, None),
    };
    SenderKeys {
        address,
        address_authenticated,
        domain,
        network: Some(spam::network_key(client)),
    }
}

/// The keys of a stored message, from the fields `authserv_id` (our host name) wrote.
pub fn of_stored(message: &[u8], authserv_id: &str) -> SenderKeys {
    let address = spam::from_address(message);
    let from_domain = address
        .as_deref()
        .and_then(|a| a.rsplit_once('@'))
        .map(|(_, d)| d.to_string());
    let mut keys = SenderKeys {
        address,
        ..SenderKeys::default()
    };
    let header_end = header_end(message);
    let header = String::from_utf8_lossy(&message[..header_end]);
    for (name, value) in fields(&header) {
        if name.eq_ignore_ascii_case("authentication-results") && keys.domain.is_none() {
            let Some((id, results)) = value.split_once(';') else {
                continue;
            };
            if !id.trim().eq_ignore_ascii_case(authserv_id) {
                continue;
            }
            let mut dkim = None;
            let mut spf = None;
            for result in results.split(';') {
                let words: Vec<&str> = result.split_whitespace().collect();
                let Some(method) = words.first() else {
                    continue;
                };
                let property = |prefix: &str| {
                    words
                        .iter()
                        .find_map(|w| w.strip_prefix(prefix))
                        .map(|v| v.trim_end_matches('.').to_ascii_lowercase())
                };
                match method.to_ascii_lowercase().as_str() {
                    "dkim=pass" if dkim.is_none() => dkim = property("header.d="),
                    "spf=pass" => {
                        spf = property("smtp.mailfrom=")
                            .map(|m| m.rsplit_once('@').map_or(m.clone(), |(_, d)| d.to_string()))
                    }
                    "dmarc=pass" => keys.address_authenticated = true,
                    _ => {}
                }
            }
            if let Some(from) = &from_domain
                && [&dkim, &spf].iter().any(|d| {
                    d.as_deref()
                        .is_some_and(|d| from == d || from.ends_with(&format!(".{d}")))
                })
            {
                keys.address_authenticated = true;
            }
            keys.domain = dkim.or(spf);
        }
        // Our Received from the MX hop (not a cluster node's LMTP hand-over).
        if name.eq_ignore_ascii_case("received") && keys.network.is_none() {
            let lower = value.to_ascii_lowercase();
            if !lower.contains(&format!("by {}", authserv_id.to_ascii_lowercase()))
                || lower.contains("with lmtp")
            {
                continue;
            }
            if let Some(ip) = bracketed_ip(&value) {
                keys.network = Some(spam::network_key(ip));
            }
        }
    }
    keys
}

/// The end of the header section (after the blank line), or the whole message.
fn header_end(message: &[u8]) -> usize {
    message
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(message.len(), |p| p + 2)
}

/// Header fields, unfolded, in order.
fn fields(header: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in header.split("\r\n") {
        if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = out.last_mut() {
                value.push(' ');
                value.push_str(line.trim());
            }
        } else if let Some((name, value)) = line.split_once(':') {
            out.push((name.trim().to_string(), value.trim().to_string()));
        }
    }
    out
}

/// The client's address literal of our Received field: `from HELO ([address])`. The HELO
/// name may hold brackets but never a parenthesis (smtp::received_header turns it into
/// `_`), so the first `([` is ours (RFC 5321 4.4's TCP-info).
fn bracketed_ip(value: &str) -> Option<IpAddr> {
    let after = &value[value.find("([")? + 2..];
    let literal = &after[..after.find(']')?];
    literal
        .strip_prefix("IPv6:")
        .unwrap_or(literal)
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_message_gives_the_keys_our_fields_vouch_for() {
        let message = b"Authentication-Results: mx.test; dkim=pass header.d=example.org header.s=s1;\r\n spf=pass smtp.mailfrom=bob@example.org; dmarc=pass header.from=example.org\r\n\
Received: from client.example.org ([203.0.113.9])\r\n\tby mx.test with ESMTPS id 1; Sat, 28 Nov 2026 10:00:00 +0000\r\n\
Authentication-Results: evil.test; dkim=pass header.d=forged.test\r\n\
From: Bob <Bob@Example.org>\r\nSubject: hi\r\n\r\nbody\r\n";
        let keys = of_stored(message, "mx.test");
        assert_eq!(keys.address.as_deref(), Some("bob@example.org"));
        assert_eq!(keys.domain.as_deref(), Some("example.org"));
        assert!(keys.address_authenticated);
        assert_eq!(keys.network.as_deref(), Some("203.0.113.0/24"));
        // Another host's fields vouch for nothing.
        let keys = of_stored(message, "other.test");
        assert_eq!(keys.domain, None);
        assert!(!keys.address_authenticated);
        assert_eq!(keys.network, None);
    }

    #[test]
    fn a_hand_over_received_is_not_the_client() {
        let message =
            b"Received: from [10.0.0.1] ([127.0.0.5])\r\n\tby mx.test with LMTP id 2; x\r\n\
Received: from [10.9.9.9] ([198.51.100.7])\r\n\tby mx.test with ESMTP id 1; x\r\n\r\nb\r\n";
        assert_eq!(
            of_stored(message, "mx.test").network.as_deref(),
            Some("198.51.100.0/24")
        );
    }
}
