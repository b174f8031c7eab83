//! SPF, DKIM and DMARC verdicts against a zone served on loopback, and against name servers
//! that never answer or are not there.

mod common;

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use common::{FakeDns, MESSAGE, runtime, signed, signer};
use sender_auth::{
    Algorithm, CHECK_TIME_MAX, CheckInput, Checker, DKIM_SIGNATURES_MAX, DkimResult, DmarcPolicy,
    DmarcResult, Signer, SpfResult, Verdict,
};

const AUTHORISED: [u8; 4] = [192, 0, 2, 1];
const STRANGER: [u8; 4] = [203, 0, 113, 5];

/// The zone of the tests; `dkim_zone` is the key record of example.org's signer.
fn zone(dkim_zone: &str) -> Vec<String> {
    [
        dkim_zone,
        "example.org TXT v=spf1 ip4:192.0.2.1 -all",
        "_dmarc.example.org TXT v=DMARC1; p=reject",
        "soft.test TXT v=spf1 ip4:192.0.2.1 ~all",
        "_dmarc.soft.test TXT v=DMARC1; p=quarantine",
        "nospf.test A 192.0.2.9",
        "helo.test TXT v=spf1 ip4:192.0.2.1 -all",
        "neutral.test TXT v=spf1 ?all",
        "perm.test TXT v=spf1 include:missing.test -all",
        "mx.test TXT v=spf1 a mx -all",
        "mx.test A 192.0.2.7",
        "mx.test MX mail.mx.test",
        "mail.mx.test A 192.0.2.8",
        "_dmarc.parent.test TXT v=DMARC1; p=none; sp=reject",
        "sub.parent.test A 192.0.2.50",
        "sub.parent.test TXT v=spf1 -all",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect()
}

fn from(address: &str) -> Vec<u8> {
    String::from_utf8_lossy(MESSAGE)
        .replace("alice@example.org", address)
        .into_bytes()
}

fn check(checker: &Checker, ip: [u8; 4], helo: &str, mail_from: &str, message: &[u8]) -> Verdict {
    runtime().block_on(checker.check(&CheckInput {
        ip: IpAddr::from(ip),
        helo,
        mail_from,
        message,
    }))
}

struct Fixture {
    dns: FakeDns,
    signer: Signer,
}

fn fixture() -> Fixture {
    let (_, signer, dkim_zone) = signer(Algorithm::Ed25519, "example.org");
    Fixture {
        dns: FakeDns::start(&zone(&dkim_zone)),
        signer,
    }
}

#[test]
fn everything_passes_for_authorised_signed_mail() {
    let f = fixture();
    let v = check(
        &f.dns.checker(),
        AUTHORISED,
        "client.example.org",
        "alice@example.org",
        &signed(&f.signer, MESSAGE),
    );
    assert_eq!(
        (v.spf, v.spf_domain.as_str()),
        (SpfResult::Pass, "example.org")
    );
    assert_eq!(v.dkim.len(), 1);
    assert_eq!(v.dkim[0].result, DkimResult::Pass);
    assert_eq!(
        (v.dmarc, v.dmarc_policy),
        (DmarcResult::Pass, DmarcPolicy::Reject)
    );
    assert!(!v.dmarc_rejects());
    assert_eq!(v.from_domain.as_deref(), Some("example.org"));
    assert!(v.authenticated_for("example.org"));
    assert!(v.header.starts_with("Authentication-Results: mx.receiver.test;\r\n\tspf=pass smtp.mailfrom=alice@example.org;\r\n\tdkim=pass header.d=example.org header.s=s1 header.b="), "{}", v.header);
    assert!(
        v.header
            .ends_with(";\r\n\tdmarc=pass header.from=example.org policy.dmarc=reject\r\n"),
        "{}",
        v.header
    );
}

/// RFC 7489 6.6.2: SPF fails, there is no signature, and the domain says p=reject.
#[test]
fn a_forgery_fails_dmarc_under_reject() {
    let f = fixture();
    let v = check(
        &f.dns.checker(),
        STRANGER,
        "forger.test",
        "alice@example.org",
        MESSAGE,
    );
    assert_eq!(v.spf, SpfResult::Fail);
    assert!(v.dkim.is_empty());
    assert_eq!(
        (v.dmarc, v.dmarc_policy),
        (DmarcResult::Fail, DmarcPolicy::Reject)
    );
    assert!(v.dmarc_rejects());
    assert!(!v.authenticated_for("example.org"));
    assert!(v.header.contains("\tdkim=none;"), "{}", v.header);
    assert!(
        v.header
            .contains("dmarc=fail header.from=example.org policy.dmarc=reject"),
        "{}",
        v.header
    );

    // The same forgery with an envelope of the forger's own: SPF has nothing to say about
    // example.org, and DMARC still fails.
    let v = check(
        &f.dns.checker(),
        STRANGER,
        "forger.test",
        "x@nospf.test",
        MESSAGE,
    );
    assert_eq!(v.spf, SpfResult::None);
    assert!(v.dmarc_rejects());
}

/// Forwarded mail: SPF fails at the forwarder's address, the intact signature carries DMARC.
#[test]
fn dkim_alone_passes_dmarc() {
    let f = fixture();
    let v = check(
        &f.dns.checker(),
        STRANGER,
        "forwarder.test",
        "alice@example.org",
        &signed(&f.signer, MESSAGE),
    );
    assert_eq!(v.spf, SpfResult::Fail);
    assert_eq!(v.dmarc, DmarcResult::Pass);
    assert!(!v.dmarc_rejects());
    assert!(v.authenticated_for("example.org"));
    assert!(v.authenticated_for("sub.example.org"));
}

#[test]
fn softfail_under_quarantine_does_not_reject() {
    let f = fixture();
    let v = check(
        &f.dns.checker(),
        STRANGER,
        "x.test",
        "bob@soft.test",
        &from("bob@soft.test"),
    );
    assert_eq!(
        (v.spf, v.spf_domain.as_str()),
        (SpfResult::SoftFail, "soft.test")
    );
    assert_eq!(
        (v.dmarc, v.dmarc_policy),
        (DmarcResult::Fail, DmarcPolicy::Quarantine)
    );
    assert!(!v.dmarc_rejects());
    assert!(
        v.header
            .contains("spf=softfail smtp.mailfrom=bob@soft.test"),
        "{}",
        v.header
    );
}

#[test]
fn no_records_give_none() {
    let f = fixture();
    let v = check(
        &f.dns.checker(),
        STRANGER,
        "x.test",
        "carol@nospf.test",
        &from("carol@nospf.test"),
    );
    assert_eq!(v.spf, SpfResult::None);
    assert_eq!(
        (v.dmarc, v.dmarc_policy),
        (DmarcResult::None, DmarcPolicy::None)
    );
    assert_eq!(v.from_domain.as_deref(), Some("nospf.test"));
    assert!(
        v.header
            .ends_with("\tdmarc=none header.from=nospf.test\r\n"),
        "{}",
        v.header
    );
}

/// RFC 7208 2.4: with the null sender, SPF checks the HELO identity.
#[test]
fn the_null_sender_is_checked_by_helo() {
    let f = fixture();
    let v = check(
        &f.dns.checker(),
        AUTHORISED,
        "helo.test",
        "",
        &from("mailer-daemon@helo.test"),
    );
    assert_eq!(
        (v.spf, v.spf_domain.as_str()),
        (SpfResult::Pass, "helo.test")
    );
    assert!(
        v.header.contains("spf=pass smtp.helo=helo.test"),
        "{}",
        v.header
    );
    let v = check(
        &f.dns.checker(),
        STRANGER,
        "helo.test",
        "",
        &from("mailer-daemon@helo.test"),
    );
    assert_eq!(v.spf, SpfResult::Fail);
}

#[test]
fn neutral_permerror_and_the_mx_mechanism() {
    let f = fixture();
    let checker = f.dns.checker();
    assert_eq!(
        check(&checker, STRANGER, "x", "a@neutral.test", MESSAGE).spf,
        SpfResult::Neutral
    );
    assert_eq!(
        check(&checker, STRANGER, "x", "a@perm.test", MESSAGE).spf,
        SpfResult::PermError
    );
    assert_eq!(
        check(&checker, [192, 0, 2, 8], "x", "a@mx.test", MESSAGE).spf,
        SpfResult::Pass
    );
    assert_eq!(
        check(&checker, [192, 0, 2, 7], "x", "a@mx.test", MESSAGE).spf,
        SpfResult::Pass
    );
    assert_eq!(
        check(&checker, STRANGER, "x", "a@mx.test", MESSAGE).spf,
        SpfResult::Fail
    );
}

/// RFC 7489 6.3: a subdomain without a record of its own takes the parent's sp=.
#[test]
fn a_subdomain_takes_the_subdomain_policy() {
    let f = fixture();
    let v = check(
        &f.dns.checker(),
        STRANGER,
        "x.test",
        "d@sub.parent.test",
        &from("d@sub.parent.test"),
    );
    assert_eq!(
        (v.dmarc, v.dmarc_policy),
        (DmarcResult::Fail, DmarcPolicy::Reject)
    );
    assert!(v.dmarc_rejects());
}

/// A thousand signatures cost `DKIM_SIGNATURES_MAX` key lookups; a signature listing too many
/// fields is reported without being verified.
#[test]
fn signatures_are_bounded() {
    let f = fixture();
    let header = f.signer.sign(MESSAGE).expect("sign");
    let mut message = Vec::new();
    for i in 0..1000 {
        message.extend_from_slice(
            header
                .replace("d=example.org", &format!("d=d{i}.test"))
                .as_bytes(),
        );
    }
    message.extend_from_slice(MESSAGE);
    let v = check(
        &f.dns.checker(),
        AUTHORISED,
        "x",
        "alice@example.org",
        &message,
    );
    assert_eq!(v.dkim.len(), DKIM_SIGNATURES_MAX);
    assert!(
        v.dkim.iter().all(|o| o.result == DkimResult::PermError),
        "{:?}",
        v.dkim
    );
    let key_lookups = f
        .dns
        .queries()
        .iter()
        .filter(|q| q.contains("._domainkey."))
        .count();
    assert_eq!(key_lookups, DKIM_SIGNATURES_MAX);

    let many_fields = format!("h={}", vec!["Subject"; 101].join(":"));
    let unfolded = header.replace("\r\n\t", " ");
    let start = unfolded.find("h=").expect("h=");
    let end = start + unfolded[start..].find(';').expect(";");
    let mut message = unfolded
        .replace(&unfolded[start..end], &many_fields)
        .into_bytes();
    message.extend_from_slice(MESSAGE);
    let v = check(
        &f.dns.checker(),
        AUTHORISED,
        "x",
        "alice@example.org",
        &message,
    );
    assert_eq!(v.dkim.len(), 1);
    assert_eq!(
        (v.dkim[0].domain.as_str(), v.dkim[0].result),
        ("example.org", DkimResult::Policy)
    );
    assert!(
        v.header.contains("dkim=policy header.d=example.org"),
        "{}",
        v.header
    );
}

/// A name server that never answers: every check that needs it gives temperror, and
/// `check` returns within `CHECK_TIME_MAX`.
#[test]
fn a_silent_name_server_gives_temperror_in_time() {
    let (_, signer, _) = signer(Algorithm::Ed25519, "example.org");
    let dns = FakeDns::start(&["* SILENT"]);
    let started = Instant::now();
    let v = check(
        &dns.checker(),
        AUTHORISED,
        "x",
        "alice@example.org",
        &signed(&signer, MESSAGE),
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed <= CHECK_TIME_MAX + Duration::from_secs(1),
        "took {elapsed:?}"
    );
    assert_eq!(v.spf, SpfResult::TempError);
    assert_eq!(v.dkim.len(), 1);
    assert_eq!(v.dkim[0].result, DkimResult::TempError);
    assert_eq!(v.dmarc, DmarcResult::TempError);
    assert!(!v.dmarc_rejects());
    assert!(v.header.contains("spf=temperror"), "{}", v.header);
    eprintln!("silent name server: {elapsed:?}");
}

/// No name server at the address at all (hickory's UDP socket sees no port-unreachable
/// error, so this is the silent case again): temperror in time.
#[test]
fn an_absent_name_server_gives_temperror_in_time() {
    let closed = {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
        socket.local_addr().expect("addr")
    };
    let checker = Checker::new(&[closed], "mx.receiver.test").expect("checker");
    let started = Instant::now();
    let v = check(&checker, AUTHORISED, "x", "alice@example.org", MESSAGE);
    assert_eq!(v.spf, SpfResult::TempError);
    assert_eq!(v.dmarc, DmarcResult::TempError);
    let elapsed = started.elapsed();
    assert!(
        elapsed <= CHECK_TIME_MAX + Duration::from_secs(1),
        "took {elapsed:?}"
    );
}

#[test]
fn checker_needs_a_plain_hostname() {
    let any: SocketAddr = "127.0.0.1:53".parse().expect("addr");
    assert!(Checker::new(&[any], "mx; spf=pass").is_err());
    assert!(Checker::new(&[any], "").is_err());
}

#[test]
fn check_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let any: SocketAddr = "127.0.0.1:53".parse().expect("addr");
    let checker = runtime()
        .block_on(async { Checker::new(&[any], "mx.test") })
        .expect("checker");
    let input = CheckInput {
        ip: IpAddr::from(AUTHORISED),
        helo: "",
        mail_from: "",
        message: b"",
    };
    assert_send(&checker.check(&input));
}

/// RFC 7208 4.6.4: at most 10 DNS-querying terms, then permerror (mail-auth enforces it).
#[test]
fn spf_stops_after_ten_lookups() {
    let mut zone: Vec<String> = (0..20)
        .map(|i| format!("l{i}.test TXT v=spf1 include:l{}.test -all", i + 1))
        .collect();
    zone.push("l20.test TXT v=spf1 +all".into());
    let dns = FakeDns::start(&zone);
    let v = check(&dns.checker(), STRANGER, "x", "a@l0.test", MESSAGE);
    assert_eq!(v.spf, SpfResult::PermError);
    let spf_lookups = dns.queries().iter().filter(|q| q.starts_with('l')).count();
    assert_eq!(spf_lookups, 11, "{:?}", dns.queries());
}
