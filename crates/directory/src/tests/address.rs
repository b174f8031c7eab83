//! Address and domain syntax, including every length limit at and past its edge.

use crate::address::{Address, LocalCase, normalize_domain, parse_address, subaddress_base};
use crate::{ADDRESS_BYTES_MAX, DOMAIN_BYTES_MAX, LABEL_BYTES_MAX, LOCAL_PART_BYTES_MAX};

fn parsed(address: &str, case: LocalCase) -> Address {
    parse_address(address, case).expect(address)
}

/// A syntactically valid domain of exactly `len` bytes: labels of at most 63 letters.
pub(crate) fn domain_of_len(len: usize) -> String {
    let mut domain = String::new();
    let mut remaining = len;
    while remaining > LABEL_BYTES_MAX {
        // Never leave nothing after a dot.
        let take = if remaining == LABEL_BYTES_MAX + 1 {
            LABEL_BYTES_MAX - 1
        } else {
            LABEL_BYTES_MAX
        };
        domain.push_str(&"a".repeat(take));
        domain.push('.');
        remaining -= take + 1;
    }
    domain.push_str(&"a".repeat(remaining));
    assert_eq!(domain.len(), len);
    domain
}

#[test]
fn domains_are_lowercased() {
    assert_eq!(normalize_domain("Example.ORG").unwrap(), "example.org");
    assert_eq!(normalize_domain("localhost").unwrap(), "localhost");
    assert_eq!(
        normalize_domain("xn--bcher-kva.example").unwrap(),
        "xn--bcher-kva.example"
    );
    assert_eq!(normalize_domain("1.2.3.example").unwrap(), "1.2.3.example");
}

#[test]
fn bad_domains_are_refused_with_a_reason() {
    let cases = [
        ("", "empty domain"),
        (
            "exa mple.org",
            "domain may hold only letters, digits, hyphens and dots",
        ),
        (
            "under_score.org",
            "domain may hold only letters, digits, hyphens and dots",
        ),
        ("example.org.", "domain ends with a dot"),
        (".example.org", "domain has an empty label"),
        ("a..b", "domain has an empty label"),
        ("-a.org", "domain label starts or ends with a hyphen"),
        ("a-.org", "domain label starts or ends with a hyphen"),
        ("[192.0.2.1]", "address literals are not supported"),
        (
            "bücher.example",
            "non-ASCII domains are not supported (use the A-label, xn--...)",
        ),
        ("a\nb.org", "contains a control character"),
        ("a\u{7f}.org", "contains a control character"),
    ];
    for (domain, reason) in cases {
        assert_eq!(normalize_domain(domain), Err(reason), "{domain:?}");
    }
}

#[test]
fn domain_limits() {
    assert!(normalize_domain(&domain_of_len(DOMAIN_BYTES_MAX)).is_ok());
    assert_eq!(
        normalize_domain(&domain_of_len(DOMAIN_BYTES_MAX + 1)),
        Err("domain is longer than 255 octets")
    );
    let label = "a".repeat(LABEL_BYTES_MAX);
    assert!(normalize_domain(&format!("{label}.org")).is_ok());
    assert_eq!(
        normalize_domain(&format!("{label}a.org")),
        Err("domain label is longer than 63 octets")
    );
}

#[test]
fn addresses_are_split_and_normalised() {
    let folded = parsed("John.Doe+Tag@Example.ORG", LocalCase::Fold);
    assert_eq!(folded.joined(), "john.doe+tag@example.org");
    let kept = parsed("John.Doe@Example.ORG", LocalCase::Keep);
    assert_eq!(kept.joined(), "John.Doe@example.org");
    // Every atext character is allowed.
    let all = "!#$%&'*+-/=?^_`{|}~09AZaz";
    assert_eq!(parsed(&format!("{all}@x.org"), LocalCase::Keep).local, all);
}

#[test]
fn bad_addresses_are_refused_with_a_reason() {
    let cases = [
        ("", "missing @domain"),
        ("nobody", "missing @domain"),
        ("@example.org", "empty local part"),
        ("a@", "empty domain"),
        (".a@x.org", "local part starts or ends with a dot"),
        ("a.@x.org", "local part starts or ends with a dot"),
        ("a..b@x.org", "local part has two dots in a row"),
        (
            "a b@x.org",
            "local part has a character not allowed in a dot-string (RFC 5321 4.1.2)",
        ),
        (
            "a@b@x.org",
            "local part has a character not allowed in a dot-string (RFC 5321 4.1.2)",
        ),
        (
            "a(b)@x.org",
            "local part has a character not allowed in a dot-string (RFC 5321 4.1.2)",
        ),
        ("\"a b\"@x.org", "quoted local parts are not supported"),
        (
            "jörg@x.org",
            "non-ASCII local parts are not supported (SMTPUTF8)",
        ),
        ("a\r\n@x.org", "contains a control character"),
        ("a\0@x.org", "contains a control character"),
        (
            "a@x_y.org",
            "domain may hold only letters, digits, hyphens and dots",
        ),
        ("a@[192.0.2.1]", "address literals are not supported"),
    ];
    for (address, reason) in cases {
        assert_eq!(
            parse_address(address, LocalCase::Fold),
            Err(reason),
            "{address:?}"
        );
    }
}

#[test]
fn local_part_limit() {
    let local = "a".repeat(LOCAL_PART_BYTES_MAX);
    assert!(parse_address(&format!("{local}@x.org"), LocalCase::Fold).is_ok());
    assert_eq!(
        parse_address(&format!("{local}a@x.org"), LocalCase::Fold),
        Err("local part is longer than 64 octets")
    );
}

#[test]
fn address_limit() {
    // 64 + 1 + 189 = 254.
    let local = "a".repeat(LOCAL_PART_BYTES_MAX);
    let domain = domain_of_len(ADDRESS_BYTES_MAX - LOCAL_PART_BYTES_MAX - 1);
    let at_limit = format!("{local}@{domain}");
    assert_eq!(at_limit.len(), ADDRESS_BYTES_MAX);
    assert!(parse_address(&at_limit, LocalCase::Fold).is_ok());
    let past_limit = format!("{local}@b{domain}");
    assert_eq!(
        parse_address(&past_limit, LocalCase::Fold),
        Err("address is longer than 254 octets")
    );
}

#[test]
fn subaddress_base_rules() {
    assert_eq!(subaddress_base("bob+tag"), Some("bob"));
    assert_eq!(subaddress_base("bob+tag+more"), Some("bob"));
    assert_eq!(subaddress_base("bob+"), Some("bob"));
    assert_eq!(subaddress_base("+tag"), None);
    assert_eq!(subaddress_base("bob"), None);
}
