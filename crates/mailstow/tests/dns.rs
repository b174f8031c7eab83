//! `mailstow dns DOMAIN` prints a zone that a real name server (BIND 9, from Debian, on
//! loopback) loads, and `mailstow dns check DOMAIN` asking through it finds every record of
//! that zone, or exactly the ones taken out or changed. The real binary, a real data
//! directory with a real DKIM key, a certificate made by openssl.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{mailstow, must, set_up_data_dir};
use test_peers::{Bind, Zone};

const DOMAIN: &str = "example.test";
const HOST: &str = "mail.example.test";
const ADDRESS: &str = "192.0.2.10";

/// `mailstow --config CONFIG ARGS`.
fn with_config(data: &Path, config: &Path, args: &[&str]) -> Output {
    let mut all = vec!["--config", config.to_str().unwrap()];
    all.extend_from_slice(args);
    mailstow(data, &all)
}

/// The SHA-256 of the certificate's SubjectPublicKeyInfo, as openssl computes it: what a
/// TLSA 3 1 1 record holds.
fn spki_sha256(cert: &Path) -> String {
    let script = format!(
        "openssl x509 -in '{}' -noout -pubkey | openssl pkey -pubin -outform DER | \
         openssl dgst -sha256 -r",
        cert.display()
    );
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

/// The report's `VERDICT NAME TYPE` lines (not the details, not the summary).
fn verdicts(report: &str) -> Vec<(String, String, String)> {
    report
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.contains(" records: "))
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(words.len(), 3, "{l}");
            (words[0].into(), words[1].into(), words[2].into())
        })
        .collect()
}

/// A data directory with example.test and an RSA key (a TXT record longer than one
/// 255-byte string), `[acme]` with a certificate where ACME keeps its own (made by openssl
/// here; nothing asks the ACME server), MTA-STS in testing mode.
fn prepared() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let (dir, data) = set_up_data_dir();
    must(mailstow(
        &data,
        &[
            "dkim",
            "generate",
            DOMAIN,
            "--selector",
            "s1",
            "--algorithm",
            "rsa",
        ],
    ));
    let acme = data.join("acme");
    std::fs::create_dir_all(&acme).unwrap();
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={HOST}"),
            "-keyout",
        ])
        .arg(acme.join("key.pem"))
        .arg("-out")
        .arg(acme.join("cert.pem"))
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let config = dir.path().join("mailstow.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nhostname = \"{HOST}\"\nmta_sts = \"testing\"\n\
             [acme]\ndirectory_url = \"https://acme.invalid/directory\"\n"
        ),
    )
    .unwrap();
    (dir, data, config)
}

#[test]
fn dns_prints_a_zone_and_dns_check_reports_the_missing_and_the_wrong_record() {
    let (dir, data, config) = prepared();
    let zone = must(with_config(
        &data,
        &config,
        &["dns", DOMAIN, "--address", ADDRESS],
    ));

    // Only zone-file text: records, blank lines, `;` comments.
    let records: Vec<Vec<&str>> = zone
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with(';') && !l.starts_with(' '))
        .map(|l| l.split_whitespace().collect())
        .collect();
    for record in &records {
        assert_eq!(record[1], "IN", "{record:?}");
    }
    let find = |name: &str, kind: &str| -> Vec<String> {
        records
            .iter()
            .filter(|r| r[0] == name && r[2] == kind)
            .map(|r| r[3..].join(" "))
            .collect()
    };
    assert_eq!(find("example.test.", "MX"), ["10 mail.example.test."]);
    assert_eq!(find("mail.example.test.", "A"), [ADDRESS]);
    assert_eq!(
        find("example.test.", "TXT"),
        ["\"v=spf1 ip4:192.0.2.10 ~all\""]
    );
    assert_eq!(
        find("_dmarc.example.test.", "TXT"),
        ["\"v=DMARC1; p=quarantine; rua=mailto:dmarc-reports@example.test\""]
    );
    assert_eq!(
        find("_smtp._tls.example.test.", "TXT"),
        ["\"v=TLSRPTv1; rua=mailto:tls-reports@example.test\""]
    );
    // The built-in listeners' ports.
    assert_eq!(
        find("_submission._tcp.example.test.", "SRV"),
        ["10 1 5587 mail.example.test."]
    );
    assert_eq!(
        find("_imaps._tcp.example.test.", "SRV"),
        ["0 1 1993 mail.example.test."]
    );
    let mta_sts = find("_mta-sts.example.test.", "TXT");
    let id = mta_sts[0]
        .strip_prefix("\"v=STSv1; id=")
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or_else(|| panic!("{mta_sts:?}"));
    assert!(
        id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    assert_eq!(
        find("_25._tcp.mail.example.test.", "TLSA"),
        [format!(
            "3 1 1 {}",
            spki_sha256(&data.join("acme/cert.pem"))
        )]
    );
    // The RSA key's record continues over lines in parentheses.
    let dkim = find("s1._domainkey.example.test.", "TXT");
    assert!(
        dkim[0].starts_with("( \"v=DKIM1; k=rsa; p=MIIB"),
        "{dkim:?}"
    );

    // The zone served without the DMARC record and with another DKIM key.
    let broken: String = zone
        .lines()
        .filter(|l| !l.starts_with("_dmarc."))
        .map(|l| format!("{}\n", l.replacen("p=MIIB", "p=MIIC", 1)))
        .collect();
    assert_ne!(broken.len(), zone.len());
    assert!(broken.contains("p=MIIC") && !broken.contains("_dmarc."));
    let mut bind = Bind::start(&[Zone::unsigned("example.test.", &broken)])
        .expect("BIND (apt-get install bind9 bind9-utils bind9-dnsutils)");
    let checked = dir.path().join("checked.toml");
    std::fs::write(
        &checked,
        format!(
            "[server]\nhostname = \"{HOST}\"\nmta_sts = \"testing\"\ndns_servers = [\"{}\"]\n\
             [acme]\ndirectory_url = \"https://acme.invalid/directory\"\n",
            bind.resolver()
        ),
    )
    .unwrap();
    let out = with_config(
        &data,
        &checked,
        &["dns", "check", DOMAIN, "--address", ADDRESS],
    );
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{report}\n{stderr}");
    assert!(
        stderr.contains("2 of ") && stderr.contains("missing, wrong or unavailable"),
        "{stderr}"
    );
    let found = verdicts(&report);
    assert_eq!(found.len(), records.len(), "{report}");
    let not_ok: Vec<_> = found.iter().filter(|(v, _, _)| v != "ok").collect();
    assert_eq!(
        not_ok,
        [
            &(
                "wrong".to_string(),
                "s1._domainkey.example.test.".to_string(),
                "TXT".to_string()
            ),
            &(
                "missing".to_string(),
                "_dmarc.example.test.".to_string(),
                "TXT".to_string()
            ),
        ],
        "{report}"
    );
    let lines: Vec<&str> = report.lines().collect();
    let at = |head: &str| lines.iter().position(|l| *l == head).unwrap();
    let wrong = at("wrong s1._domainkey.example.test. TXT");
    assert!(
        lines[wrong + 1].starts_with("  expected: v=DKIM1; k=rsa; p=MIIB"),
        "{report}"
    );
    assert!(
        lines[wrong + 2].starts_with("  found: v=DKIM1; k=rsa; p=MIIC"),
        "{report}"
    );
    let missing = at("missing _dmarc.example.test. TXT");
    assert_eq!(
        lines[missing + 1],
        "  expected: v=DMARC1; p=quarantine; rua=mailto:dmarc-reports@example.test"
    );
    let n = found.len();
    assert_eq!(
        *lines.last().unwrap(),
        format!(
            "{n} records: {} ok, 1 missing, 1 wrong, 0 unavailable",
            n - 2
        )
    );

    // The whole zone: every record ok, exit 0; without --address the host's address is the
    // one DNS answers for it, and the same records are expected.
    bind.update(&Zone::unsigned("example.test.", &zone))
        .expect("zone updated");
    let out = with_config(&data, &checked, &["dns", "check", DOMAIN]);
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{report}\n{stderr}");
    assert!(
        stderr.contains("the host's addresses as DNS answers"),
        "{stderr}"
    );
    assert!(found.len() == verdicts(&report).len());
    assert!(
        verdicts(&report).iter().all(|(v, _, _)| v == "ok"),
        "{report}"
    );
    assert!(report.contains("ok mail.example.test. A\n"), "{report}");
    assert_eq!(
        report.lines().last().unwrap(),
        format!("{n} records: {n} ok, 0 missing, 0 wrong, 0 unavailable")
    );
}

#[test]
fn dns_refuses_a_domain_that_is_not_ours_and_needs_no_certificate() {
    let (dir, data) = set_up_data_dir();
    let config = dir.path().join("mailstow.toml");
    std::fs::write(&config, format!("[server]\nhostname = \"{HOST}\"\n")).unwrap();
    let out = with_config(&data, &config, &["dns", "other.test", "--address", ADDRESS]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("other.test is not a local domain"),
        "{stderr}"
    );

    // No DKIM key, the self-signed certificate, no MTA-STS: said in comments, and those
    // records are left out.
    let zone = must(with_config(
        &data,
        &config,
        &["dns", DOMAIN, "--address", ADDRESS],
    ));
    assert!(zone.contains("; no DKIM key for example.test"), "{zone}");
    assert!(
        zone.contains("; no TLSA record: the server uses its self-signed"),
        "{zone}"
    );
    assert!(
        zone.contains("are served by the https listener, which is off"),
        "{zone}"
    );
    for absent in ["_domainkey", "TLSA", "_mta-sts", "mta-sts."] {
        assert!(
            zone.lines()
                .filter(|l| !l.starts_with(';'))
                .all(|l| !l.contains(absent)),
            "{absent}: {zone}"
        );
    }
}

/// A name server that does not answer: every record `unavailable` with the error, exit 1,
/// and the check gives up asking instead of waiting out every query's time-outs.
#[test]
fn dns_check_reports_an_unreachable_name_server_as_unavailable_and_gives_up() {
    let (dir, data) = set_up_data_dir();
    // A bound UDP socket that never answers.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let config = dir.path().join("mailstow.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nhostname = \"{HOST}\"\ndns_servers = [\"{}\"]\n",
            silent.local_addr().unwrap()
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = with_config(
        &data,
        &config,
        &["dns", "check", DOMAIN, "--address", ADDRESS],
    );
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{report}");
    let found = verdicts(&report);
    assert!(found.len() > 10, "{report}");
    assert!(found.iter().all(|(v, _, _)| v == "unavailable"), "{report}");
    assert!(
        report.contains("  error: not asked: the 2 queries before failed"),
        "{report}"
    );
    let n = found.len();
    assert_eq!(
        report.lines().last().unwrap(),
        format!("{n} records: 0 ok, 0 missing, 0 wrong, {n} unavailable")
    );
    // Two queries of 2 tries of 5 s each, not one per record.
    assert!(started.elapsed() < std::time::Duration::from_secs(40));
}
