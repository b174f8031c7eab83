//! Signatures made by `Signer`, verified by mail-auth's verifier (through `Checker`) with the
//! public key served by a DNS server on loopback.

mod common;

use std::net::IpAddr;

use common::{FakeDns, MESSAGE, runtime, signed, signer};
use sender_auth::{Algorithm, CheckInput, DkimResult, Verdict, dns_record};

fn check(dns: &FakeDns, message: &[u8]) -> Verdict {
    let checker = dns.checker();
    runtime().block_on(checker.check(&CheckInput {
        ip: IpAddr::from([192, 0, 2, 1]),
        helo: "client.example.org",
        mail_from: "alice@example.org",
        message,
    }))
}

fn dkim_results(verdict: &Verdict) -> Vec<(String, DkimResult)> {
    verdict
        .dkim
        .iter()
        .map(|outcome| (outcome.domain.clone(), outcome.result))
        .collect()
}

fn sign_and_verify(algorithm: Algorithm) {
    let (_, signer, zone) = signer(algorithm, "example.org");
    let dns = FakeDns::start(&[zone]);
    let message = signed(&signer, MESSAGE);

    let verdict = check(&dns, &message);
    assert_eq!(
        dkim_results(&verdict),
        [("example.org".into(), DkimResult::Pass)]
    );
    assert!(verdict.authenticated_for("example.org"));
    let outcome = &verdict.dkim[0];
    assert_eq!(outcome.selector, "s1");
    assert_eq!(outcome.signature_prefix.len(), 8);
    assert!(
        verdict
            .header
            .contains("dkim=pass header.d=example.org header.s=s1"),
        "{}",
        verdict.header
    );

    // RFC 6376 3.4.4: relaxed body canonicalisation ignores trailing white space and
    // changes in its runs, but not a changed word.
    let tolerated = String::from_utf8(message.clone())
        .expect("utf-8")
        .replace("At noon.", "At  noon. \t");
    assert_eq!(
        check(&dns, tolerated.as_bytes()).dkim[0].result,
        DkimResult::Pass
    );
    let body_changed = String::from_utf8(message.clone())
        .expect("utf-8")
        .replace("At noon.", "At one.");
    let verdict = check(&dns, body_changed.as_bytes());
    assert_eq!(
        dkim_results(&verdict),
        [("example.org".into(), DkimResult::Fail)]
    );
    assert!(!verdict.authenticated_for("example.org"));
    let subject_changed = String::from_utf8(message)
        .expect("utf-8")
        .replace("Lunch on", "Dinner on");
    assert_eq!(
        check(&dns, subject_changed.as_bytes()).dkim[0].result,
        DkimResult::Fail
    );
}

#[test]
fn ed25519_signatures_verify_and_changes_fail() {
    sign_and_verify(Algorithm::Ed25519);
}

#[test]
fn rsa_signatures_verify_and_changes_fail() {
    sign_and_verify(Algorithm::Rsa);
}

/// A key record too long for one UDP answer (even at EDNS0's 1232 bytes) arrives over TCP
/// after a truncated UDP answer (RFC 7766).
#[test]
fn a_record_longer_than_a_udp_answer_comes_over_tcp() {
    let (key, signer, _) = signer(Algorithm::Rsa, "example.org");
    // n= is a note for humans (RFC 6376 3.6.1): verifiers skip it.
    let record = dns_record(Algorithm::Rsa, &key.public_key_b64)
        .replace("v=DKIM1;", &format!("v=DKIM1; n={};", "x".repeat(1500)));
    let dns = FakeDns::start(&[format!("s1._domainkey.example.org TXT {record}")]);
    let verdict = check(&dns, &signed(&signer, MESSAGE));
    assert_eq!(
        dkim_results(&verdict),
        [("example.org".into(), DkimResult::Pass)]
    );
}

#[test]
fn a_key_of_another_algorithm_or_none_fails() {
    let (_, ed_signer, _) = signer(Algorithm::Ed25519, "example.org");
    let (_, _, rsa_zone) = signer(Algorithm::Rsa, "example.org");
    let dns = FakeDns::start(&[rsa_zone]);
    let verdict = check(&dns, &signed(&ed_signer, MESSAGE));
    assert_eq!(verdict.dkim.len(), 1);
    assert_ne!(verdict.dkim[0].result, DkimResult::Pass);

    let (_, signer, _) = signer(Algorithm::Ed25519, "nokey.example");
    let verdict = check(&dns, &signed(&signer, MESSAGE));
    // RFC 6376 6.1.2: no key record is a permanent failure.
    assert_eq!(
        dkim_results(&verdict),
        [("nokey.example".into(), DkimResult::PermError)]
    );
}
