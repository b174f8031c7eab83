//! The BIND pair, checked with Debian's `dig`: a signed zone validates (AD) through the
//! resolver, an unsigned one does not, a TLSA record is served, an update is seen, and a zone
//! that loses its signatures under a trust anchor is SERVFAIL.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Instant;

use test_peers::{Bind, Zone};

const SIGNED_RECORDS: &str = "\
mx  IN A 127.0.0.1
@   IN MX 10 mx
_25._tcp.mx IN TLSA 3 1 1 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
";

/// `dig @server +dnssec NAME TYPE`: the flags line and the answer section's records.
fn dig(server: SocketAddr, name: &str, rtype: &str) -> (String, String, Vec<String>) {
    let output = Command::new("dig")
        .arg(format!("@{}", server.ip()))
        .args(["-p", &server.port().to_string()])
        .args(["+dnssec", "+tries=1", "+time=3", name, rtype])
        .output()
        .expect("dig (bind9-dnsutils) runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let status = text
        .lines()
        .find_map(|l| {
            l.split_once("status: ")
                .map(|(_, s)| s.split(',').next().unwrap_or("").to_string())
        })
        .unwrap_or_else(|| panic!("no status in dig output:\n{text}"));
    let flags = text
        .lines()
        .find_map(|l| {
            l.split_once(";; flags: ")
                .map(|(_, f)| f.split(';').next().unwrap_or("").to_string())
        })
        .unwrap_or_default();
    let mut answers = Vec::new();
    let mut in_answer = false;
    for line in text.lines() {
        if line.starts_with(";; ANSWER SECTION") {
            in_answer = true;
        } else if line.is_empty() || line.starts_with(";;") {
            in_answer = false;
        } else if in_answer {
            answers.push(line.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    (status, flags, answers)
}

fn has_ad(flags: &str) -> bool {
    flags.split_whitespace().any(|flag| flag == "ad")
}

#[test]
fn signed_zone_validates_and_unsigned_does_not() {
    let started = Instant::now();
    let mut bind = Bind::start(&[
        Zone::signed("example.test.", SIGNED_RECORDS),
        Zone::unsigned("plain.test", "www IN A 127.0.0.2\n"),
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("Bind::start took {:?}", started.elapsed());
    let resolver = bind.resolver();

    let (status, flags, answers) = dig(resolver, "mx.example.test", "A");
    assert_eq!(status, "NOERROR", "{}", bind.log_tail());
    assert!(
        has_ad(&flags),
        "signed answer without AD: {flags}\n{}",
        bind.log_tail()
    );
    assert!(
        answers.iter().any(|a| a.ends_with("IN A 127.0.0.1")),
        "{answers:?}"
    );
    assert!(
        answers.iter().any(|a| a.contains(" RRSIG A ")),
        "{answers:?}"
    );

    let (status, flags, answers) = dig(resolver, "_25._tcp.mx.example.test", "TLSA");
    assert_eq!(status, "NOERROR", "{}", bind.log_tail());
    assert!(has_ad(&flags), "TLSA without AD: {flags}");
    assert!(
        answers
            .iter()
            .any(|a| a.contains("TLSA 3 1 1 0123456789ABCDEF")),
        "{answers:?}"
    );

    let (status, flags, answers) = dig(resolver, "www.plain.test", "A");
    assert_eq!(status, "NOERROR", "{}", bind.log_tail());
    assert!(!has_ad(&flags), "unsigned answer with AD: {flags}");
    assert!(
        answers.iter().any(|a| a.ends_with("IN A 127.0.0.2")),
        "{answers:?}"
    );

    // A name that does not exist in the signed zone: NXDOMAIN, proven (AD).
    let (status, flags, _) = dig(resolver, "nothing.example.test", "A");
    assert_eq!(status, "NXDOMAIN");
    assert!(has_ad(&flags), "denial without AD: {flags}");

    // The authoritative server answers with AA and no AD (it validates nothing).
    let (status, flags, _) = dig(bind.authoritative(), "mx.example.test", "A");
    assert_eq!(status, "NOERROR");
    assert!(flags.split_whitespace().any(|f| f == "aa"), "{flags}");

    // An update is served at once through the resolver, still signed.
    let started = Instant::now();
    bind.update(&Zone::signed(
        "example.test.",
        &SIGNED_RECORDS.replace("127.0.0.1", "127.0.0.9"),
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("Bind::update (signed) took {:?}", started.elapsed());
    let (status, flags, answers) = dig(resolver, "mx.example.test", "A");
    assert_eq!(status, "NOERROR", "{}", bind.log_tail());
    assert!(has_ad(&flags));
    assert!(
        answers.iter().any(|a| a.ends_with("IN A 127.0.0.9")),
        "{answers:?}"
    );

    // The same zone without signatures, while the resolver trusts its KSK: bogus.
    bind.update(&Zone::unsigned("example.test.", SIGNED_RECORDS))
        .unwrap_or_else(|e| panic!("{e}"));
    let (status, _, answers) = dig(resolver, "_25._tcp.mx.example.test", "TLSA");
    assert_eq!(status, "SERVFAIL", "stripped zone not bogus: {answers:?}");

    assert!(
        bind.trust_anchor("example.test")
            .is_some_and(|k| k.starts_with("257 3 13 "))
    );
    assert!(bind.trust_anchor("plain.test.").is_none());
    assert!(bind.update(&Zone::unsigned("other.test.", "")).is_err());
}

#[test]
fn a_broken_zone_is_an_error_naming_the_line() {
    let error = match Bind::start(&[Zone::unsigned("broken.test.", "www IN A not-an-address\n")]) {
        Ok(_) => panic!("a zone with a bad A record was served"),
        Err(error) => error.to_string(),
    };
    assert!(error.contains("named-checkzone"), "{error}");
    assert!(
        error.contains("not-an-address") || error.contains(":5:"),
        "{error}"
    );
}
