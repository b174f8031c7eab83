//! Does an SPF record authorize our host? Judged from the record alone: mechanisms that
//! need more DNS (`include:`, `redirect=`, `a:`/`mx:` of another name, `exists:`, `ptr`) are
//! not followed, and are reported as what kept the answer open.

use std::net::IpAddr;

/// What a record says about our host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Judgement {
    /// It authorizes us; the note says something worth knowing (`+all`).
    Authorized(Option<String>),
    /// Something we did not follow decides.
    Undetermined(String),
    /// A term we can judge decides against us, or nothing matches us.
    NotAuthorized(String),
}

/// Who asks: one of our addresses, or (none known) the host as the domain's MX.
#[derive(Clone, Copy)]
enum Subject {
    Address(IpAddr),
    MxHost,
}

impl Subject {
    fn shown(self) -> String {
        match self {
            Subject::Address(address) => address.to_string(),
            Subject::MxHost => "our host".to_string(),
        }
    }
}

/// RFC 7208 4.6–4.7 and 5, for each of our `addresses` (none: our host as the domain's MX):
/// terms are tried left to right and the first that matches decides by its qualifier.
/// `record` is the whole `v=spf1 ...` text; `domain` and `host` are fully qualified, lower
/// case, with the root dot.
pub(crate) fn judge(record: &str, domain: &str, host: &str, addresses: &[IpAddr]) -> Judgement {
    let subjects: Vec<Subject> = if addresses.is_empty() {
        vec![Subject::MxHost]
    } else {
        addresses.iter().copied().map(Subject::Address).collect()
    };
    let mut open = None;
    let mut note = None;
    for subject in subjects {
        match judge_one(record, domain, host, subject) {
            Judgement::NotAuthorized(reason) => return Judgement::NotAuthorized(reason),
            Judgement::Undetermined(reason) => open = open.or(Some(reason)),
            Judgement::Authorized(n) => note = note.or(n),
        }
    }
    match open {
        Some(reason) => Judgement::Undetermined(reason),
        None => Judgement::Authorized(note),
    }
}

/// Whether one term matches the subject, as far as the record alone tells.
enum Matches {
    Yes,
    No,
    /// It needs DNS we do not follow; the text names it.
    Unknown(String),
}

fn judge_one(record: &str, domain: &str, host: &str, subject: Subject) -> Judgement {
    // Terms we could not judge that would pass us if they matched, and those that would not.
    let mut open_pass: Option<String> = None;
    let mut open_other: Option<String> = None;
    let mut redirect = None;
    for term in record.split_ascii_whitespace().skip(1) {
        let (qualifier, rest) = match term.as_bytes().first() {
            Some(q @ (b'+' | b'-' | b'~' | b'?')) => (*q, &term[1..]),
            _ => (b'+', term),
        };
        let name_end = rest.find([':', '/', '=']).unwrap_or(rest.len());
        let (name, argument) = rest.split_at(name_end);
        let name = name.to_ascii_lowercase();
        // RFC 7208 6: modifiers are `name=value`; only redirect changes the result.
        if let Some(value) = argument.strip_prefix('=') {
            if name == "redirect" {
                redirect = Some(value.to_string());
            }
            continue;
        }
        let target = argument.strip_prefix(':');
        let matches = match name.as_str() {
            "all" => Matches::Yes,
            // RFC 7208 5.3 and 5.4: a/mx name a host; without a name, the domain itself.
            "a" | "mx" => {
                let spec = target.map(|t| t.split('/').next().unwrap_or(t));
                let named = spec.map_or(domain.to_string(), |s| {
                    format!("{}.", s.trim_end_matches('.').to_ascii_lowercase())
                });
                if (name == "a" && named == host) || (name == "mx" && named == domain) {
                    Matches::Yes
                } else {
                    Matches::Unknown(term.to_string())
                }
            }
            "ip4" | "ip6" => match (subject, target) {
                (Subject::Address(address), Some(network)) => match in_network(address, network) {
                    Some(true) => Matches::Yes,
                    Some(false) => Matches::No,
                    None => return Judgement::NotAuthorized(format!("{term} does not parse")),
                },
                (Subject::MxHost, _) => Matches::Unknown(term.to_string()),
                (_, None) => return Judgement::NotAuthorized(format!("{term} has no network")),
            },
            "include" | "exists" | "ptr" => Matches::Unknown(term.to_string()),
            // RFC 7208 5: an unknown mechanism is a permanent error.
            _ => return Judgement::NotAuthorized(format!("{term} is not an SPF mechanism")),
        };
        match matches {
            Matches::Yes if qualifier == b'+' => {
                if let Some(unjudged) = open_other {
                    return Judgement::Undetermined(format!("{unjudged} was not followed"));
                }
                let note = (name == "all").then(|| "+all authorizes every host".to_string());
                return Judgement::Authorized(note);
            }
            Matches::Yes => {
                if let Some(unjudged) = open_pass {
                    return Judgement::Undetermined(format!("{unjudged} was not followed"));
                }
                return Judgement::NotAuthorized(format!(
                    "{term} decides for {} before anything authorizes it",
                    subject.shown()
                ));
            }
            Matches::No => {}
            Matches::Unknown(text) if qualifier == b'+' => {
                open_pass = open_pass.or(Some(text));
            }
            Matches::Unknown(text) => open_other = open_other.or(Some(text)),
        }
    }
    // RFC 7208 6.1: redirect applies when no mechanism matched.
    if let Some(target) = redirect {
        return Judgement::Undetermined(format!("redirect={target} was not followed"));
    }
    match open_pass.or(open_other) {
        Some(unjudged) => Judgement::Undetermined(format!("{unjudged} was not followed")),
        None => Judgement::NotAuthorized(format!("nothing in it matches {}", subject.shown())),
    }
}

/// Whether `address` is in `network` (`192.0.2.0/24`, `2001:db8::1`); `None` when the
/// network does not parse. An address of the other family is not in it.
fn in_network(address: IpAddr, network: &str) -> Option<bool> {
    let (base, length) = match network.split_once('/') {
        Some((base, length)) => (base, Some(length.parse::<u8>().ok()?)),
        None => (network, None),
    };
    let base: IpAddr = base.parse().ok()?;
    match (address, base) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let length = length.unwrap_or(32);
            if length > 32 {
                return None;
            }
            let mask = u32::MAX.checked_shl(32 - u32::from(length)).unwrap_or(0);
            Some(u32::from(a) & mask == u32::from(b) & mask)
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let length = length.unwrap_or(128);
            if length > 128 {
                return None;
            }
            let mask = u128::MAX.checked_shl(128 - u32::from(length)).unwrap_or(0);
            Some(u128::from(a) & mask == u128::from(b) & mask)
        }
        _ => Some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOMAIN: &str = "example.org.";
    const HOST: &str = "mail.example.org.";

    fn ours() -> Vec<IpAddr> {
        vec![
            "192.0.2.10".parse().unwrap(),
            "2001:db8::10".parse().unwrap(),
        ]
    }

    fn judged(record: &str) -> Judgement {
        judge(record, DOMAIN, HOST, &ours())
    }

    #[test]
    fn our_own_records_authorize_us() {
        assert_eq!(
            judged("v=spf1 ip4:192.0.2.10 ip6:2001:db8::10 ~all"),
            Judgement::Authorized(None)
        );
        assert_eq!(judged("v=spf1 mx ~all"), Judgement::Authorized(None));
        assert_eq!(
            judge("v=spf1 mx -all", DOMAIN, HOST, &[]),
            Judgement::Authorized(None)
        );
        assert_eq!(
            judged("v=spf1 a:mail.example.org -all"),
            Judgement::Authorized(None)
        );
        assert_eq!(
            judged("v=spf1 ip4:192.0.2.0/24 ip6:2001:db8::/32 -all"),
            Judgement::Authorized(None)
        );
    }

    #[test]
    fn a_term_that_fails_us_first_decides() {
        assert!(matches!(
            judged("v=spf1 ip4:192.0.2.10 -all"),
            Judgement::NotAuthorized(_)
        ));
        assert!(matches!(
            judged("v=spf1 -ip4:192.0.2.10 mx"),
            Judgement::NotAuthorized(_)
        ));
        assert!(matches!(
            judged("v=spf1 ip4:198.51.100.1 ~all"),
            Judgement::NotAuthorized(_)
        ));
        assert!(matches!(judged("v=spf1"), Judgement::NotAuthorized(_)));
        assert!(matches!(
            judged("v=spf1 bogus:x mx"),
            Judgement::NotAuthorized(_)
        ));
    }

    #[test]
    fn what_we_do_not_follow_leaves_it_open() {
        let include = judged("v=spf1 include:_spf.provider.example ~all");
        assert_eq!(
            include,
            Judgement::Undetermined("include:_spf.provider.example was not followed".into())
        );
        assert!(matches!(
            judged("v=spf1 redirect=_spf.example.net"),
            Judgement::Undetermined(_)
        ));
        // An include before a term that authorizes us cannot take the authorization away.
        assert_eq!(
            judged("v=spf1 include:x.example mx -all"),
            Judgement::Authorized(None)
        );
        // But one that could fail us first can.
        assert!(matches!(
            judged("v=spf1 -include:x.example mx"),
            Judgement::Undetermined(_)
        ));
        assert!(matches!(
            judged("v=spf1 a ~all"),
            Judgement::Undetermined(_)
        ));
    }

    #[test]
    fn plus_all_is_noted() {
        assert_eq!(
            judged("v=spf1 +all"),
            Judgement::Authorized(Some("+all authorizes every host".into()))
        );
    }

    #[test]
    fn networks() {
        let a: IpAddr = "192.0.2.10".parse().unwrap();
        assert_eq!(in_network(a, "192.0.2.0/24"), Some(true));
        assert_eq!(in_network(a, "192.0.3.0/24"), Some(false));
        assert_eq!(in_network(a, "0.0.0.0/0"), Some(true));
        assert_eq!(in_network(a, "192.0.2.10/33"), None);
        assert_eq!(in_network(a, "2001:db8::/32"), Some(false));
        assert_eq!(in_network(a, "nonsense"), None);
    }
}
