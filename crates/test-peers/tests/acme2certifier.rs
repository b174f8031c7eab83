//! acme2certifier with Debian's certbot as the reference ACME client: HTTP-01 validated at port
//! 80 of a loopback address that the name resolves to through the test BIND, and the
//! certificate chains to the peer's CA. certbot has no TLS-ALPN-01, so that challenge is
//! answered by a short script on Debian's python3-acme (certbot's own ACME library, a
//! dependency of the certbot package): `tls_alpn_client.py`.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use test_peers::{Acme2Certifier, AcmeOptions, Bind, Zone};

/// `openssl x509 -noout TEXT_OPTIONS -in CERT`.
fn x509(cert: &Path, options: &[&str]) -> String {
    let output = Command::new("openssl")
        .args(["x509", "-noout", "-in"])
        .arg(cert)
        .args(options)
        .output()
        .expect("openssl runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn certbot_gets_a_certificate_by_http_01() {
    let address = test_peers::free_loopback_address(&[80]).unwrap();
    let bind = Bind::start(&[Zone::unsigned(
        "acme.test.",
        &format!("mail IN A {address}\n"),
    )])
    .unwrap_or_else(|e| panic!("{e}"));

    let started = Instant::now();
    let acme = Acme2Certifier::start(&AcmeOptions {
        dns: bind.resolver(),
        validity_days: 2,
    })
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("Acme2Certifier::start took {:?}", started.elapsed());
    assert!(acme.directory_url().starts_with("https://127.0.0.1:"));

    let work = tempfile::tempdir().unwrap();
    let dir = |name: &str| work.path().join(name).display().to_string();
    let started = Instant::now();
    let output = Command::new("certbot")
        .env("REQUESTS_CA_BUNDLE", acme.ca_cert_path())
        .args([
            "certonly",
            "--standalone",
            "--non-interactive",
            "--agree-tos",
        ])
        .args([
            "--register-unsafely-without-email",
            "--no-random-sleep-on-renew",
        ])
        .args(["--preferred-challenges", "http-01"])
        .args([
            "--http-01-address",
            &address.to_string(),
            "--http-01-port",
            "80",
        ])
        .args(["--server", &acme.directory_url()])
        .args(["--config-dir", &dir("config"), "--work-dir", &dir("work")])
        .args(["--logs-dir", &dir("logs"), "--key-type", "ecdsa"])
        .args(["-d", "mail.acme.test"])
        .output()
        .expect("certbot (Debian's certbot package) runs");
    eprintln!("certbot took {:?}", started.elapsed());
    assert!(
        output.status.success(),
        "certbot failed: {}\n{}\n--- certbot log ---\n{}\n--- acme2certifier ---\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        std::fs::read_to_string(work.path().join("logs/letsencrypt.log"))
            .unwrap_or_default()
            .lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .join("\n"),
        acme.log_tail(),
        bind.log_tail()
    );

    let live = work.path().join("config/live/mail.acme.test");
    let cert = live.join("cert.pem");
    let verify = Command::new("openssl")
        .arg("verify")
        .arg("-CAfile")
        .arg(acme.ca_cert_path())
        .arg("-untrusted")
        .arg(live.join("chain.pem"))
        .arg(&cert)
        .output()
        .expect("openssl runs");
    assert!(
        verify.status.success(),
        "certificate does not chain to the peer's CA: {verify:?}"
    );
    let names = x509(&cert, &["-ext", "subjectAltName"]);
    assert!(names.contains("DNS:mail.acme.test"), "{names}");

    // Valid for the configured two days (give or take the clock's minutes).
    let dates = x509(&cert, &["-checkend", &(2 * 86400 - 3600).to_string()]);
    assert!(dates.contains("will not expire"), "{dates}");
    let expires_later = Command::new("openssl")
        .args([
            "x509",
            "-noout",
            "-checkend",
            &(2 * 86400 + 3600).to_string(),
            "-in",
        ])
        .arg(&cert)
        .status()
        .unwrap();
    assert!(
        !expires_later.success(),
        "certificate outlives validity_days: {}",
        x509(&cert, &["-dates"])
    );
}

#[test]
fn a_name_that_does_not_resolve_is_refused() {
    let address = test_peers::free_loopback_address(&[80]).unwrap();
    let bind = Bind::start(&[Zone::unsigned("acme.test.", "other IN A 127.0.0.1\n")])
        .unwrap_or_else(|e| panic!("{e}"));
    let acme = Acme2Certifier::start(&AcmeOptions {
        dns: bind.resolver(),
        validity_days: 1,
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let work = tempfile::tempdir().unwrap();
    let dir = |name: &str| work.path().join(name).display().to_string();
    let output = Command::new("certbot")
        .env("REQUESTS_CA_BUNDLE", acme.ca_cert_path())
        .args([
            "certonly",
            "--standalone",
            "--non-interactive",
            "--agree-tos",
        ])
        .args([
            "--register-unsafely-without-email",
            "--preferred-challenges",
            "http-01",
        ])
        .args([
            "--http-01-address",
            &address.to_string(),
            "--http-01-port",
            "80",
        ])
        .args(["--server", &acme.directory_url()])
        .args(["--config-dir", &dir("config"), "--work-dir", &dir("work")])
        .args(["--logs-dir", &dir("logs")])
        .args(["-d", "missing.acme.test"])
        .output()
        .expect("certbot runs");
    assert!(
        !output.status.success(),
        "certbot got a certificate for a name with no address:\n{}",
        acme.log_tail()
    );
    assert!(!work.path().join("config/live/missing.acme.test").exists());
}

#[test]
fn python_acme_gets_a_certificate_by_tls_alpn_01() {
    let address = test_peers::free_loopback_address(&[443]).unwrap();
    let bind = Bind::start(&[Zone::signed(
        "alpn.test.",
        &format!("mail IN A {address}\n"),
    )])
    .unwrap_or_else(|e| panic!("{e}"));
    let acme = Acme2Certifier::start(&AcmeOptions {
        dns: bind.resolver(),
        validity_days: 1,
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let work = tempfile::tempdir().unwrap();
    let script = work.path().join("tls_alpn_client.py");
    std::fs::write(&script, include_str!("tls_alpn_client.py")).unwrap();
    let chain = work.path().join("fullchain.pem");
    let started = Instant::now();
    let output = Command::new("/usr/bin/python3")
        .env("REQUESTS_CA_BUNDLE", acme.ca_cert_path())
        .arg(&script)
        .arg(acme.directory_url())
        .arg("mail.alpn.test")
        .arg(address.to_string())
        .arg(&chain)
        .output()
        .expect("Debian's python3 runs");
    eprintln!("TLS-ALPN-01 order took {:?}", started.elapsed());
    assert!(
        output.status.success(),
        "TLS-ALPN-01 order failed: {}\n{}\n--- acme2certifier ---\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        acme.log_tail()
    );
    let verify = Command::new("openssl")
        .arg("verify")
        .arg("-CAfile")
        .arg(acme.ca_cert_path())
        .arg(&chain)
        .output()
        .expect("openssl runs");
    assert!(verify.status.success(), "{verify:?}");
    let names = x509(&chain, &["-ext", "subjectAltName"]);
    assert!(names.contains("DNS:mail.alpn.test"), "{names}");
}
