//! Records, zone text, TLSA data and the check against a table of answers.

use std::collections::HashMap;
use std::io::Write as _;
use std::net::IpAddr;
use std::process::{Command, Stdio};

use crate::*;

const DKIM_VALUE: &str = "v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";

fn facts() -> Facts {
    Facts {
        domain: "Example.org".into(),
        hostname: "mail.example.org.".into(),
        addresses: vec![
            "192.0.2.10".parse().unwrap(),
            "2001:db8::10".parse().unwrap(),
        ],
        dkim: vec![DkimKey {
            selector: "mail2026".into(),
            txt_value: DKIM_VALUE.into(),
        }],
        mta_sts: Some(MtaSts {
            id: "20260101T000000".into(),
            mode: MtaStsMode::Enforce,
        }),
        tls_rpt_rua: Some("mailto:tls-reports@example.org".into()),
        dmarc: Dmarc {
            policy: DmarcPolicy::Reject,
            rua: Some("mailto:dmarc-reports@example.org".into()),
        },
        services: vec![
            Service {
                name: ServiceName::Submissions,
                port: 465,
            },
            Service {
                name: ServiceName::Submission,
                port: 587,
            },
            Service {
                name: ServiceName::Imaps,
                port: 993,
            },
        ],
        tlsa: vec![Tlsa {
            usage: 3,
            selector: 1,
            matching: 1,
            data_hex: "AB".repeat(32),
        }],
        autoconfig: true,
    }
}

/// Every record of a domain with everything on, as it is printed: the whole list, so any
/// change to a record shows here.
#[test]
fn zone_text_of_a_full_domain() {
    let text = zone_text(&records(&facts()).unwrap());
    let expected = format!(
        "\
; Mail exchanger: where mail for the domain is delivered (RFC 5321 5.1)
example.org.                     IN MX    10 mail.example.org.

; The mail host's addresses
mail.example.org.                IN A     192.0.2.10
mail.example.org.                IN AAAA  2001:db8::10

; SPF: the hosts that may send mail from the domain (RFC 7208)
example.org.                     IN TXT   \"v=spf1 ip4:192.0.2.10 ip6:2001:db8::10 ~all\"

; DKIM public key: receivers verify our signatures with it (RFC 6376 3.6)
mail2026._domainkey.example.org. IN TXT   \"{DKIM_VALUE}\"

; DMARC policy and where aggregate reports go (RFC 7489 6)
_dmarc.example.org.              IN TXT   \"v=DMARC1; p=reject; rua=mailto:dmarc-reports@example.org\"

; MTA-STS: senders must use TLS to us; the mta-sts name serves the policy (RFC 8461 3)
_mta-sts.example.org.            IN TXT   \"v=STSv1; id=20260101T000000\"
mta-sts.example.org.             IN CNAME mail.example.org.

; TLS-RPT: where senders report TLS failures (RFC 8460 3)
_smtp._tls.example.org.          IN TXT   \"v=TLSRPTv1; rua=mailto:tls-reports@example.org\"

; Client services: mail clients find host and port here (RFC 6186, RFC 8314 for submissions)
_submissions._tcp.example.org.   IN SRV   0 1 465 mail.example.org.
_submission._tcp.example.org.    IN SRV   10 1 587 mail.example.org.
_imaps._tcp.example.org.         IN SRV   0 1 993 mail.example.org.
_imap._tcp.example.org.          IN SRV   0 0 0 .
_pop3s._tcp.example.org.         IN SRV   0 0 0 .
_pop3._tcp.example.org.          IN SRV   0 0 0 .

; Client autoconfiguration: Thunderbird autoconfig and Microsoft Autodiscover
autoconfig.example.org.          IN CNAME mail.example.org.
autodiscover.example.org.        IN CNAME mail.example.org.
_autodiscover._tcp.example.org.  IN SRV   0 0 443 mail.example.org.

; DANE: the key of our SMTP server, for senders that check it (RFC 7672 3.1)
_25._tcp.mail.example.org.       IN TLSA  3 1 1 {}
",
        "ab".repeat(32)
    );
    assert_eq!(text, expected, "got:\n{text}");
}

#[test]
fn without_addresses_spf_names_mx_and_no_address_is_printed() {
    let mut facts = facts();
    facts.addresses.clear();
    let records = records(&facts).unwrap();
    assert!(
        !records
            .iter()
            .any(|r| matches!(r.kind, Kind::A | Kind::Aaaa))
    );
    let spf: Vec<_> = records
        .iter()
        .filter(|r| r.value.starts_with("v=spf1"))
        .collect();
    assert_eq!(spf.len(), 1);
    assert_eq!(spf[0].value, "v=spf1 mx ~all");
    assert_eq!(spf[0].name, "example.org.");
}

#[test]
fn a_host_named_like_an_alias_gets_no_cname_to_itself() {
    let mut facts = facts();
    facts.hostname = "autoconfig.example.org".into();
    let records = records(&facts).unwrap();
    let cnames: Vec<&str> = records
        .iter()
        .filter(|r| r.kind == Kind::Cname)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(
        cnames,
        ["mta-sts.example.org.", "autodiscover.example.org."]
    );
}

#[test]
fn optional_parts_left_out() {
    let mut facts = facts();
    facts.mta_sts = None;
    facts.tls_rpt_rua = None;
    facts.tlsa.clear();
    facts.autoconfig = false;
    facts.dmarc.rua = None;
    let records = records(&facts).unwrap();
    assert!(!records.iter().any(|r| r.name.contains("mta-sts")
        || r.name.contains("_smtp._tls")
        || r.name.contains("auto")
        || r.kind == Kind::Tlsa));
    let dmarc = records.iter().find(|r| r.role == Role::Dmarc).unwrap();
    assert_eq!(dmarc.value, "v=DMARC1; p=reject");
}

/// A change that spoils valid facts.
type Spoil = Box<dyn Fn(&mut Facts)>;

#[test]
fn bad_facts_are_errors() {
    let cases: Vec<(&str, Spoil)> = vec![
        ("domain", Box::new(|f| f.domain = "exa mple.org".into())),
        ("empty domain", Box::new(|f| f.domain = ".".into())),
        (
            "host",
            Box::new(|f| f.hostname = "mail..example.org".into()),
        ),
        (
            "label",
            Box::new(|f| f.hostname = format!("{}.org", "a".repeat(64))),
        ),
        ("selector", Box::new(|f| f.dkim[0].selector = "a b".into())),
        (
            "selector dot",
            Box::new(|f| f.dkim[0].selector = "sel.".into()),
        ),
        (
            "dkim value",
            Box::new(|f| f.dkim[0].txt_value = "v=DKIM1;\np=x".into()),
        ),
        (
            "long dkim",
            Box::new(|f| f.dkim[0].txt_value = "p".repeat(TXT_VALUE_BYTES_MAX + 1)),
        ),
        (
            "sts id",
            Box::new(|f| f.mta_sts.as_mut().unwrap().id = "2026-01".into()),
        ),
        (
            "sts id long",
            Box::new(|f| f.mta_sts.as_mut().unwrap().id = "1".repeat(33)),
        ),
        (
            "rua",
            Box::new(|f| f.tls_rpt_rua = Some("mailto:a@b; p=none".into())),
        ),
        (
            "dmarc rua",
            Box::new(|f| f.dmarc.rua = Some("nowhere".into())),
        ),
        ("tlsa hex", Box::new(|f| f.tlsa[0].data_hex = "abc".into())),
        (
            "tlsa not hex",
            Box::new(|f| f.tlsa[0].data_hex = "zz".into()),
        ),
        (
            "service twice",
            Box::new(|f| {
                f.services.push(Service {
                    name: ServiceName::Imaps,
                    port: 994,
                })
            }),
        ),
        (
            "port 0",
            Box::new(|f| {
                f.services.push(Service {
                    name: ServiceName::Pop3,
                    port: 0,
                })
            }),
        ),
        (
            "too many",
            Box::new(|f| f.addresses = vec![IpAddr::from([192, 0, 2, 1]); LIST_LEN_MAX + 1]),
        ),
    ];
    for (case, spoil) in cases {
        let mut facts = facts();
        spoil(&mut facts);
        assert!(records(&facts).is_err(), "{case}: accepted");
    }
}

#[test]
fn service_labels() {
    for name in ServiceName::ALL {
        assert_eq!(ServiceName::from_label(name.label()), Some(name));
    }
    assert_eq!(ServiceName::from_label("IMAPS"), Some(ServiceName::Imaps));
    assert_eq!(ServiceName::from_label("smtp"), None);
}

fn txt_record(value: &str) -> Record {
    Record {
        name: "sel._domainkey.example.org.".into(),
        kind: Kind::Txt,
        value: value.into(),
        purpose: "test",
        role: Role::Dkim,
    }
}

#[test]
fn long_txt_values_are_split_at_255_bytes_and_quoting_is_escaped() {
    let exactly = "a".repeat(TXT_STRING_BYTES_MAX);
    let text = zone_text(&[txt_record(&exactly)]);
    assert_eq!(text.matches('"').count(), 2, "{text}");

    let long = format!("v=DKIM1; k=rsa; p={}", "B".repeat(600));
    let text = zone_text(&[txt_record(&long)]);
    let strings = quoted_strings(&text);
    assert_eq!(strings.len(), 3, "{text}");
    assert!(strings.iter().all(|s| s.len() <= TXT_STRING_BYTES_MAX));
    assert_eq!(strings.concat(), long);
    assert!(text.contains("IN TXT   ( \""), "{text}");
    assert!(text.trim_end().ends_with("\" )"), "{text}");

    let text = zone_text(&[txt_record("say \"hi\" \\ bye")]);
    assert!(text.contains(r#""say \"hi\" \\ bye""#), "{text}");
    let text = zone_text(&[txt_record("caf\u{e9}")]);
    assert!(text.contains(r#""caf\195\169""#), "{text}");
}

/// The strings between unescaped quotes, unescaped.
fn quoted_strings(text: &str) -> Vec<String> {
    let mut strings = Vec::new();
    let mut bytes = text.bytes();
    while let Some(byte) = bytes.next() {
        if byte != b'"' {
            continue;
        }
        let mut string = Vec::new();
        while let Some(byte) = bytes.next() {
            match byte {
                b'"' => break,
                b'\\' => string.push(bytes.next().unwrap()),
                other => string.push(other),
            }
        }
        strings.push(String::from_utf8(string).unwrap());
    }
    strings
}

/// BIND's own zone parser reads the printed lines back: each record is valid, and a long
/// TXT value comes back whole, in strings of at most 255 bytes.
#[test]
fn named_checkzone_reads_the_zone_text() {
    let mut facts = facts();
    facts.dkim.push(DkimKey {
        selector: "rsa".into(),
        txt_value: format!("v=DKIM1; k=rsa; p={}", "Q".repeat(700)),
    });
    facts.dmarc.rua = Some("mailto:a\"b\\c@example.org".into());
    let records = records(&facts).unwrap();
    let zone = format!(
        "$ORIGIN example.org.\n$TTL 300\n@ IN SOA ns.example.org. hostmaster.example.org. 1 3600 600 86400 300\n@ IN NS ns.example.org.\nns IN A 192.0.2.53\n{}",
        zone_text(&records)
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("example.org.zone");
    std::fs::write(&path, &zone).unwrap();
    // -D dumps the zone in BIND's canonical form; -i none: the TLSA name is under our zone.
    let output = Command::new("named-checkzone")
        .args(["-q", "-D", "-o", "-", "-i", "none", "example.org"])
        .arg(&path)
        .output()
        .expect("named-checkzone (Debian package bind9-utils) must be installed");
    let dump = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{zone}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rsa = dump
        .lines()
        .find(|line| line.starts_with("rsa._domainkey.example.org."))
        .unwrap_or_else(|| panic!("no rsa key in\n{dump}"));
    let strings = quoted_strings(rsa);
    assert_eq!(strings.len(), 3, "{rsa}");
    assert_eq!(strings.concat(), facts.dkim[1].txt_value);
    let dmarc = dump
        .lines()
        .find(|line| line.starts_with("_dmarc."))
        .unwrap();
    assert_eq!(
        quoted_strings(dmarc).concat(),
        "v=DMARC1; p=reject; rua=mailto:a\"b\\c@example.org"
    );
    // Every record we printed is in BIND's dump.
    for record in &records {
        assert!(
            dump.lines().any(|line| {
                let words: Vec<&str> = line.split_ascii_whitespace().collect();
                words.first() == Some(&record.name.as_str())
                    && words.get(3) == Some(&record.kind.name())
            }),
            "{} {} not in\n{dump}",
            record.name,
            record.kind
        );
    }
}

/// The TLSA data equals what OpenSSL computes from the same certificate:
/// `openssl x509 -pubkey | openssl pkey -pubin -outform der | sha256sum`.
#[test]
fn tlsa_data_matches_openssl() {
    for algorithm in [&rcgen::PKCS_ECDSA_P256_SHA256, &rcgen::PKCS_ED25519] {
        let key = rcgen::KeyPair::generate_for(algorithm).unwrap();
        let params = rcgen::CertificateParams::new(vec!["mail.example.org".to_string()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        let ours = tlsa_3_1_1(cert.der()).unwrap();
        let theirs = openssl_spki_sha256(&cert.pem());
        assert_eq!(ours, theirs);
        assert_eq!(ours.len(), 64);
        let record = Tlsa::dane_ee_spki_sha256(cert.der()).unwrap();
        assert_eq!((record.usage, record.selector, record.matching), (3, 1, 1));
        assert_eq!(record.data_hex, ours);
    }
}

fn openssl_spki_sha256(pem: &str) -> String {
    let pubkey = pipe("openssl", &["x509", "-pubkey", "-noout"], pem.as_bytes());
    let der = pipe("openssl", &["pkey", "-pubin", "-outform", "der"], &pubkey);
    let sum = pipe("sha256sum", &[], &der);
    String::from_utf8(sum)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn pipe(program: &str, args: &[&str], input: &[u8]) -> Vec<u8> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("{program}: {err}"));
    child.stdin.take().unwrap().write_all(input).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{program} {args:?} failed");
    output.stdout
}

#[test]
fn tlsa_of_what_is_not_a_certificate_is_an_error() {
    assert!(tlsa_3_1_1(b"").is_err());
    assert!(tlsa_3_1_1(b"-----BEGIN CERTIFICATE-----").is_err());
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["a.example".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let mut trailing = cert.der().to_vec();
    trailing.push(0);
    assert!(tlsa_3_1_1(&trailing).is_err());
    assert!(tlsa_3_1_1(&cert.der()[..cert.der().len() - 1]).is_err());
}

/// Answers from a table; a name and type not in it has no records.
#[derive(Default)]
struct Table(HashMap<(String, Kind), Answer>);

impl Table {
    fn set(&mut self, name: &str, kind: Kind, values: &[&str]) {
        let values = values.iter().map(|v| v.to_string()).collect();
        self.0
            .insert((name.to_string(), kind), Answer::Records(values));
    }

    /// Everything `records` expects, published as printed.
    fn publishing(records: &[Record]) -> Table {
        let mut table = Table::default();
        for record in records {
            match table
                .0
                .entry((record.name.clone(), record.kind))
                .or_insert(Answer::NoRecords)
            {
                Answer::Records(values) => values.push(record.value.clone()),
                answer => *answer = Answer::Records(vec![record.value.clone()]),
            }
        }
        table
    }
}

impl Lookup for Table {
    async fn query(&self, name: &str, kind: Kind) -> Answer {
        self.0
            .get(&(name.to_string(), kind))
            .cloned()
            .unwrap_or(Answer::NoRecords)
    }
}

fn run<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

#[test]
fn everything_published_as_printed_is_ok() {
    let expected = records(&facts()).unwrap();
    let findings = run(check(&Table::publishing(&expected), &expected));
    assert_eq!(findings.len(), expected.len());
    for finding in &findings {
        assert_eq!(finding.verdict, Verdict::Ok, "{finding:?}");
        assert_eq!(finding.note, None, "{finding:?}");
    }
    let text = render_findings(&findings);
    assert!(
        text.ends_with(&format!(
            "{} records: {} ok, 0 missing, 0 wrong, 0 unavailable\n",
            expected.len(),
            expected.len()
        )),
        "{text}"
    );
}

/// One record missing, one wrong, SPF twice, an old MTA-STS id, a lookup that fails, and
/// an alias published as addresses: each gets its verdict, and the report says so.
#[test]
fn missing_wrong_and_duplicate_records_are_reported() {
    let mut facts = facts();
    facts.tlsa.clear();
    facts.autoconfig = false;
    facts.services.clear();
    let expected = records(&facts).unwrap();
    let mut table = Table::publishing(&expected);
    table
        .0
        .remove(&("_dmarc.example.org.".to_string(), Kind::Txt));
    table.set(
        "mail2026._domainkey.example.org.",
        Kind::Txt,
        &["v=DKIM1; k=ed25519; p=AAAAC3NzaC1lZDI1NTE5AAAAIOtherKey="],
    );
    table.set(
        "example.org.",
        Kind::Txt,
        &[
            "v=spf1 mx ~all",
            "google-site-verification=x",
            "v=spf1 ip4:192.0.2.10 -all",
        ],
    );
    table.set(
        "_mta-sts.example.org.",
        Kind::Txt,
        &["v=STSv1; id=20250101"],
    );
    table.0.insert(
        ("_smtp._tls.example.org.".into(), Kind::Txt),
        Answer::Failed("request timed out".into()),
    );
    table
        .0
        .remove(&("mta-sts.example.org.".to_string(), Kind::Cname));
    table.set("mta-sts.example.org.", Kind::A, &["192.0.2.10"]);
    table.set("mta-sts.example.org.", Kind::Aaaa, &["2001:db8::10"]);

    let findings = run(check(&table, &expected));
    let by_name = |name: &str, kind: Kind| {
        findings
            .iter()
            .find(|f| f.record.name == name && f.record.kind == kind)
            .unwrap_or_else(|| panic!("no finding for {name} {kind}"))
    };
    assert_eq!(
        by_name("_dmarc.example.org.", Kind::Txt).verdict,
        Verdict::Missing
    );
    assert!(matches!(
        by_name("mail2026._domainkey.example.org.", Kind::Txt).verdict,
        Verdict::Wrong { .. }
    ));
    let spf = by_name("example.org.", Kind::Txt);
    assert_eq!(
        spf.verdict,
        Verdict::Wrong {
            found: vec!["v=spf1 mx ~all".into(), "v=spf1 ip4:192.0.2.10 -all".into()]
        }
    );
    assert!(spf.note.as_deref().unwrap().contains("RFC 7208 4.5"));
    let sts = by_name("_mta-sts.example.org.", Kind::Txt);
    assert!(matches!(sts.verdict, Verdict::Wrong { .. }));
    assert!(sts.note.as_deref().unwrap().contains("changed policy"));
    assert_eq!(
        by_name("_smtp._tls.example.org.", Kind::Txt).verdict,
        Verdict::Unavailable("request timed out".into())
    );
    let alias = by_name("mta-sts.example.org.", Kind::Cname);
    assert_eq!(alias.verdict, Verdict::Ok);
    assert!(alias.note.is_some());
    assert_eq!(by_name("example.org.", Kind::Mx).verdict, Verdict::Ok);

    let text = render_findings(&findings);
    let expected_text = "\
ok example.org. MX
ok mail.example.org. A
ok mail.example.org. AAAA
wrong example.org. TXT
  expected: v=spf1 ip4:192.0.2.10 ip6:2001:db8::10 ~all
  found: v=spf1 mx ~all
  found: v=spf1 ip4:192.0.2.10 -all
  note: more than one SPF record: a permanent error for every receiver (RFC 7208 4.5)
wrong mail2026._domainkey.example.org. TXT
  expected: v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=
  found: v=DKIM1; k=ed25519; p=AAAAC3NzaC1lZDI1NTE5AAAAIOtherKey=
  note: another key (p=)
missing _dmarc.example.org. TXT
  expected: v=DMARC1; p=reject; rua=mailto:dmarc-reports@example.org
wrong _mta-sts.example.org. TXT
  expected: v=STSv1; id=20260101T000000
  found: v=STSv1; id=20250101
  note: another policy id: senders take it for a changed policy and fetch it
ok mta-sts.example.org. CNAME
  note: no CNAME, but the same addresses as mail.example.org.
unavailable _smtp._tls.example.org. TXT
  expected: v=TLSRPTv1; rua=mailto:tls-reports@example.org
  error: request timed out
ok _submissions._tcp.example.org. SRV
ok _submission._tcp.example.org. SRV
ok _imaps._tcp.example.org. SRV
ok _imap._tcp.example.org. SRV
ok _pop3s._tcp.example.org. SRV
ok _pop3._tcp.example.org. SRV
15 records: 10 ok, 1 missing, 3 wrong, 1 unavailable
";
    assert_eq!(text, expected_text, "got:\n{text}");
}

fn spf_finding(published: &[&str], addresses: &[&str]) -> Finding {
    let mut facts = facts();
    facts.addresses = addresses.iter().map(|a| a.parse().unwrap()).collect();
    let expected: Vec<Record> = records(&facts)
        .unwrap()
        .into_iter()
        .filter(|r| matches!(r.role, Role::Spf { .. }))
        .collect();
    let mut table = Table::default();
    table.set("example.org.", Kind::Txt, published);
    run(check(&table, &expected)).remove(0)
}

#[test]
fn spf_that_does_not_authorize_us_is_wrong_and_an_include_is_noted() {
    let finding = spf_finding(&["v=spf1 ip4:198.51.100.7 -all"], &["192.0.2.10"]);
    assert!(
        matches!(finding.verdict, Verdict::Wrong { .. }),
        "{finding:?}"
    );
    let finding = spf_finding(
        &["v=spf1 include:_spf.provider.example ~all"],
        &["192.0.2.10"],
    );
    assert_eq!(finding.verdict, Verdict::Ok);
    assert!(
        finding
            .note
            .unwrap()
            .contains("include:_spf.provider.example")
    );
    let finding = spf_finding(&["v=spf1 mx -all"], &[]);
    assert_eq!((finding.verdict, finding.note), (Verdict::Ok, None));
    // Only one of two addresses authorized: mail sent over the other fails SPF.
    let finding = spf_finding(
        &["v=spf1 ip4:192.0.2.10 -all"],
        &["192.0.2.10", "2001:db8::10"],
    );
    assert!(
        matches!(finding.verdict, Verdict::Wrong { .. }),
        "{finding:?}"
    );
    let finding = spf_finding(&["some other text"], &[]);
    assert_eq!(finding.verdict, Verdict::Missing);
}

#[test]
fn dmarc_must_parse_and_a_weaker_policy_is_noted() {
    let expected: Vec<Record> = records(&facts())
        .unwrap()
        .into_iter()
        .filter(|r| r.role == Role::Dmarc)
        .collect();
    let judged = |published: &[&str]| {
        let mut table = Table::default();
        table.set("_dmarc.example.org.", Kind::Txt, published);
        run(check(&table, &expected)).remove(0)
    };
    let finding = judged(&["v=DMARC1; p=none"]);
    assert_eq!(finding.verdict, Verdict::Ok);
    assert_eq!(
        finding.note.as_deref(),
        Some("p=none where we print p=reject")
    );
    assert!(matches!(
        judged(&["v=DMARC1; p=maybe"]).verdict,
        Verdict::Wrong { .. }
    ));
    assert!(matches!(
        judged(&["v=DMARC1; rua=mailto:x@y"]).verdict,
        Verdict::Wrong { .. }
    ));
    assert!(matches!(
        judged(&["v=DMARC1; p=reject", "v=DMARC1; p=none"]).verdict,
        Verdict::Wrong { .. }
    ));
    assert_eq!(judged(&["v=DMARC1;p=reject"]).verdict, Verdict::Ok);
    assert_eq!(judged(&["v=DMARC10; p=reject"]).verdict, Verdict::Missing);
}

#[test]
fn srv_cname_and_tlsa_comparisons() {
    let mut facts = facts();
    facts.services.truncate(1);
    let expected = records(&facts).unwrap();
    let pick = |name: &str, kind: Kind| {
        vec![
            expected
                .iter()
                .find(|r| r.name == name && r.kind == kind)
                .unwrap()
                .clone(),
        ]
    };
    let mut table = Table::default();
    // Another priority and weight, same port and target: ok. Upper case is a name still.
    table.set(
        "_submissions._tcp.example.org.",
        Kind::Srv,
        &["5 5 465 MAIL.example.org"],
    );
    table.set(
        "_imap._tcp.example.org.",
        Kind::Srv,
        &["0 1 143 mail.example.org."],
    );
    table.set(
        "autoconfig.example.org.",
        Kind::Cname,
        &["other.example.net."],
    );
    table.set("autodiscover.example.org.", Kind::A, &["192.0.2.99"]);
    table.set("mail.example.org.", Kind::A, &["192.0.2.10"]);
    table.set(
        "_25._tcp.mail.example.org.",
        Kind::Tlsa,
        &["3 1 1 0000", &format!("3 1 1 {}", "AB".repeat(32))],
    );
    let verdict = |records: Vec<Record>| run(check(&table, &records)).remove(0);
    assert_eq!(
        verdict(pick("_submissions._tcp.example.org.", Kind::Srv)).verdict,
        Verdict::Ok
    );
    assert!(matches!(
        verdict(pick("_imap._tcp.example.org.", Kind::Srv)).verdict,
        Verdict::Wrong { .. }
    ));
    assert_eq!(
        verdict(pick("_pop3._tcp.example.org.", Kind::Srv)).verdict,
        Verdict::Missing
    );
    assert_eq!(
        verdict(pick("autoconfig.example.org.", Kind::Cname)).verdict,
        Verdict::Wrong {
            found: vec!["other.example.net.".into()]
        }
    );
    assert_eq!(
        verdict(pick("autodiscover.example.org.", Kind::Cname)).verdict,
        Verdict::Wrong {
            found: vec!["192.0.2.99".into()]
        }
    );
    assert_eq!(
        verdict(pick("mta-sts.example.org.", Kind::Cname)).verdict,
        Verdict::Missing
    );
    assert_eq!(
        verdict(pick("_25._tcp.mail.example.org.", Kind::Tlsa)).verdict,
        Verdict::Ok
    );
}

#[test]
fn found_lists_are_bounded_and_printed_on_one_line_each() {
    let expected: Vec<Record> = records(&facts())
        .unwrap()
        .into_iter()
        .filter(|r| r.kind == Kind::Mx)
        .collect();
    let mut table = Table::default();
    let many: Vec<String> = (0..40).map(|i| format!("{i} mx{i}.example.net.")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    table.set("example.org.", Kind::Mx, &many);
    let findings = run(check(&table, &expected));
    match &findings[0].verdict {
        Verdict::Wrong { found } => assert_eq!(found.len(), FOUND_MAX),
        other => panic!("{other:?}"),
    }
    let mut table = Table::default();
    table.set(
        "example.org.",
        Kind::Mx,
        &["10 evil.example.\nok example.org. MX"],
    );
    let text = render_findings(&run(check(&table, &expected)));
    assert_eq!(
        text.lines().filter(|l| l.starts_with("ok ")).count(),
        0,
        "{text}"
    );
}
