//! Transport security of outbound mail, end to end (issue 39 part 5): a sending mailstow with
//! direct delivery asks a real BIND resolver (test-peers, DNSSEC-signed and unsigned zones on
//! loopback) for its recipients' exchangers, which are other mailstow servers on their own
//! loopback addresses at ports 25 and 443 with certificates from a test CA (openssl).
//!
//! - MTA-STS (RFC 8461) `enforce`: the receiver serves its policy over HTTPS; a good
//!   certificate delivers, a certificate for another name defers (never plaintext), and once
//!   the certificate is fixed (SIGHUP) a `queue retry` delivers.
//! - DANE (RFC 7672): a signed zone whose TLSA 3 1 1 record matches the receiver's key
//!   delivers (with a self-signed certificate no WebPKI check would pass); a non-matching
//!   record defers (`tlsa-invalid`).

mod common;

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Server, mail, mailstow, must, setup};
use test_peers::{Bind, Zone};

/// The test CA and the certificates it signs, made with the openssl command line.
struct Ca {
    dir: PathBuf,
}

impl Ca {
    fn new(dir: &Path) -> Ca {
        std::fs::create_dir_all(dir).unwrap();
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "30",
            "-subj",
            "/CN=mailstow transport test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            dir.join("ca.key").to_str().unwrap(),
            "-out",
            dir.join("ca.pem").to_str().unwrap(),
        ]);
        Ca {
            dir: dir.to_path_buf(),
        }
    }

    fn pem(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A P-256 key `NAME.key` and a certificate `NAME.pem` for `dns_names`, signed by the CA.
    fn issue(&self, name: &str, dns_names: &[&str]) -> (PathBuf, PathBuf) {
        let key = self.dir.join(format!("{name}.key"));
        let csr = self.dir.join(format!("{name}.csr"));
        let cert = self.dir.join(format!("{name}.pem"));
        let ext = self.dir.join(format!("{name}.ext"));
        let sans: Vec<String> = dns_names.iter().map(|n| format!("DNS:{n}")).collect();
        std::fs::write(
            &ext,
            format!(
                "subjectAltName={}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n\
                 extendedKeyUsage=serverAuth\n",
                sans.join(",")
            ),
        )
        .unwrap();
        new_key(&key);
        openssl(&[
            "req",
            "-new",
            "-key",
            key.to_str().unwrap(),
            "-subj",
            &format!("/CN={}", dns_names[0]),
            "-out",
            csr.to_str().unwrap(),
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            csr.to_str().unwrap(),
            "-CA",
            self.pem().to_str().unwrap(),
            "-CAkey",
            self.dir.join("ca.key").to_str().unwrap(),
            "-set_serial",
            &format!(
                "0x{:x}",
                std::process::id() as u64 * 1000 + name.len() as u64
            ),
            "-days",
            "30",
            "-extfile",
            ext.to_str().unwrap(),
            "-out",
            cert.to_str().unwrap(),
        ]);
        (cert, key)
    }
}

fn new_key(path: &Path) {
    openssl(&[
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-out",
        path.to_str().unwrap(),
    ]);
}

/// A self-signed certificate for `host` (no CA anyone trusts): only DANE-EE can vouch for it.
fn self_signed(dir: &Path, host: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (
        dir.join(format!("{host}.pem")),
        dir.join(format!("{host}.key")),
    );
    new_key(&key);
    openssl(&[
        "req",
        "-x509",
        "-new",
        "-key",
        key.to_str().unwrap(),
        "-days",
        "30",
        "-subj",
        &format!("/CN={host}"),
        "-addext",
        &format!("subjectAltName=DNS:{host}"),
        "-out",
        cert.to_str().unwrap(),
    ]);
    (cert, key)
}

/// RFC 7672 3.1.1 and RFC 6698 2.1: the data of a `3 1 1` record, the SHA-256 of the key's
/// SubjectPublicKeyInfo, in hex.
fn spki_sha256(key: &Path) -> String {
    let spki = Command::new("openssl")
        .args([
            "pkey",
            "-in",
            key.to_str().unwrap(),
            "-pubout",
            "-outform",
            "DER",
        ])
        .output()
        .unwrap();
    assert!(spki.status.success(), "{spki:?}");
    let dir = key.parent().unwrap();
    let der = dir.join("spki.der");
    std::fs::write(&der, &spki.stdout).unwrap();
    let digest = Command::new("openssl")
        .args(["dgst", "-sha256", "-r", der.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(digest.status.success(), "{digest:?}");
    let text = String::from_utf8(digest.stdout).unwrap();
    let hex = text.split_whitespace().next().unwrap().to_string();
    assert_eq!(hex.len(), 64, "{text}");
    hex
}

fn openssl(args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

/// The subject alternative names of the certificate served at `address` (implicit TLS).
fn served_names(address: &str, server_name: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {address} -servername {server_name} </dev/null \
             2>/dev/null | openssl x509 -noout -ext subjectAltName"
        ))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits until `address` serves a certificate naming `name` (after a reload).
fn wait_for_certificate(address: &str, server_name: &str, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let names = served_names(address, server_name);
        if names.contains(&format!("DNS:{name}")) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{address} still serves {names:?}, not {name}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until something accepts TCP connections at `address`.
fn wait_for_listener(address: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(address).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {address}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A receiving mailstow: `hostname`, `domains` each with the user `carol`, SMTP on
/// `address:25`, HTTPS (the MTA-STS policy) on `address:443`, this certificate.
fn start_receiver(
    dir: &Path,
    hostname: &str,
    domains: &[&str],
    address: Ipv4Addr,
    cert: &Path,
    key: &Path,
    bind: &Bind,
) -> (Server, PathBuf) {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    for domain in domains {
        must(mailstow(&data, &["domain", "add", domain]));
        must(mailstow(
            &data,
            &[
                "user",
                "add",
                &format!("carol@{domain}"),
                "--password",
                "secret-pw",
            ],
        ));
    }
    let extra = format!(
        "tls_cert = \"{}\"\ntls_key = \"{}\"\nmta_sts = \"enforce\"\nhttps = \"{address}:443\"\n\
         dns_servers = [\"{}\"]\n",
        cert.display(),
        key.display(),
        bind.resolver()
    );
    let smtp = format!("{address}:25");
    let started = mail::start_args(&data, hostname, &extra, &["--smtp", &smtp]);
    wait_for_listener(&smtp);
    wait_for_listener(&format!("{address}:443"));
    started
}

/// The sending mailstow: `example.test` with alice (set up on the first start), direct
/// delivery through `bind`'s resolver, the test CA trusted for MTA-STS, metrics on,
/// `transport` added to `[server]`.
fn start_sender(dir: &Path, bind: &Bind, ca: &Ca, transport: &str) -> (Server, PathBuf) {
    let data = dir.join("data");
    if !data.exists() {
        std::fs::create_dir_all(&data).unwrap();
        setup(&data);
    }
    let extra = format!(
        "direct_delivery = true\ndns_servers = [\"{}\"]\ntls_roots_file = \"{}\"\n{transport}",
        bind.resolver(),
        ca.pem().display()
    );
    mail::start_args(
        &data,
        "mail.example.test",
        &extra,
        &["--metrics", "127.0.0.1:0"],
    )
}

/// alice@example.test submits a message with `subject` to `to` on `sender`.
fn submit(sender: &Server, to: &str, subject: &str) {
    let (codes, last) = mail::send(
        sender,
        "submission",
        Some("alice@example.test"),
        "alice@example.test",
        &[to],
        &format!("From: alice@example.test\r\nTo: {to}\r\nSubject: {subject}\r\n\r\nhello\r\n"),
    );
    assert_eq!(codes, [250, 250, 354, 250], "{last}");
}

/// The subjects in carol@`domain`'s INBOX on `receiver`.
fn subjects(receiver: &Server, domain: &str) -> Vec<String> {
    mail::fetch_all(receiver, &format!("carol@{domain}"), "INBOX")
        .into_iter()
        .filter_map(|(_, body)| {
            body.lines()
                .find_map(|l| l.strip_prefix("Subject: ").map(str::to_string))
        })
        .collect()
}

/// `queue_id=N` of a mail log line.
fn queue_id(line: &str) -> String {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("queue_id="))
        .unwrap_or_else(|| panic!("no queue_id in {line}"))
        .trim_matches('"')
        .to_string()
}

/// The value of the `/metrics` sample `name` (labels included), 0 when absent.
fn metric(server: &Server, name: &str) -> f64 {
    let mut http = TcpStream::connect(server.metrics.expect("metrics")).unwrap();
    http.write_all(b"GET /metrics HTTP/1.0\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    http.read_to_string(&mut text).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

const TLS_SESSIONS: &str = "mailstow_outbound_tls_sessions_total";

/// MTA-STS enforce: good certificate delivers; a certificate for another name defers and the
/// message is not sent in plaintext; fixed and retried, it arrives.
#[test]
fn mta_sts_enforce_defers_on_a_bad_certificate_and_delivers_on_a_good_one() {
    let tmp = tempfile::tempdir().unwrap();
    let address = test_peers::free_loopback_address(&[25, 443]).unwrap();
    let bind = Bind::start(&[
        Zone::unsigned("example.test.", "@ TXT \"v=spf1 -all\"\n"),
        Zone::unsigned(
            "sts.test.",
            &format!(
                "@ MX 10 mx\nmx A {address}\nmta-sts A {address}\n\
                 _mta-sts TXT \"v=STSv1; id=20260101\"\n\
                 _smtp._tls TXT \"v=TLSRPTv1; rua=mailto:tls-reports@sts.test\"\n"
            ),
        ),
    ])
    .unwrap();
    let ca = Ca::new(&tmp.path().join("ca"));
    let (good_cert, good_key) = ca.issue("good", &["mx.sts.test", "mta-sts.sts.test"]);
    let (wrong_cert, wrong_key) = ca.issue("wrong", &["other.test"]);
    // The receiver reads its certificate from these two files; the test swaps their content.
    let (cert, key) = (tmp.path().join("mx.pem"), tmp.path().join("mx.key"));
    std::fs::copy(&good_cert, &cert).unwrap();
    std::fs::copy(&good_key, &key).unwrap();
    let (receiver, _) = start_receiver(
        &tmp.path().join("receiver"),
        "mx.sts.test",
        &["sts.test"],
        address,
        &cert,
        &key,
        &bind,
    );
    let (sender, log) = start_sender(&tmp.path().join("sender"), &bind, &ca, "");

    // A good certificate: the policy is fetched (and kept on disk), the mail delivered.
    submit(&sender, "carol@sts.test", "sts first");
    let delivered = mail::log_lines(&log, &["event=delivered", "carol@sts.test"], 1);
    assert_eq!(delivered.len(), 1, "not delivered");
    assert!(delivered[0].contains("mx.sts.test["), "{delivered:?}");
    assert_eq!(
        mail::messages(&receiver, "carol@sts.test", "INBOX", 1).len(),
        1
    );
    let cache = std::fs::read_to_string(
        tmp.path()
            .join("sender/data/mta-sts")
            .join(transport_cache_file()),
    )
    .expect("the policy cache file");
    assert!(
        cache.contains("sts.test") && cache.contains("enforce"),
        "{cache}"
    );
    assert_eq!(
        metric(
            &sender,
            &format!("{TLS_SESSIONS}{{policy=\"sts\",result=\"success\"}}")
        ),
        1.0
    );

    // A certificate for another name (from the same trusted CA): deferred, not delivered.
    std::fs::copy(&wrong_cert, &cert).unwrap();
    std::fs::copy(&wrong_key, &key).unwrap();
    receiver.hangup();
    wait_for_certificate(&format!("{address}:443"), "mx.sts.test", "other.test");
    submit(&sender, "carol@sts.test", "sts second");
    let deferred = mail::log_lines(&log, &["event=deferred", "carol@sts.test"], 1);
    assert_eq!(deferred.len(), 1, "not deferred");
    assert!(
        deferred[0].contains("MTA-STS") && deferred[0].contains("certificate-host-mismatch"),
        "{deferred:?}"
    );
    let id = queue_id(&deferred[0]);
    let failures = mail::log_lines(
        &log,
        &["event=outbound_tls", "result=certificate-host-mismatch"],
        1,
    );
    assert!(failures[0].contains("policy=sts"), "{failures:?}");
    let listed = must(mailstow(
        &tmp.path().join("sender/data"),
        &["queue", "list"],
    ));
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with(&format!("{id} deferred")) && l.contains("carol@sts.test")),
        "{listed}"
    );
    // Never in plaintext: the receiver has only the first message.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(subjects(&receiver, "sts.test"), ["sts first"]);

    // The certificate fixed (reload) and the message retried: it arrives.
    std::fs::copy(&good_cert, &cert).unwrap();
    std::fs::copy(&good_key, &key).unwrap();
    receiver.hangup();
    wait_for_certificate(&format!("{address}:443"), "mx.sts.test", "mx.sts.test");
    must(mailstow(
        &tmp.path().join("sender/data"),
        &["queue", "retry", &id],
    ));
    let delivered = mail::log_lines(&log, &["event=delivered", "carol@sts.test"], 2);
    assert_eq!(delivered.len(), 2, "not delivered after the retry");
    assert!(
        delivered[1].contains(&format!("queue_id={id}")),
        "{delivered:?}"
    );
    let mut got = mail::messages(&receiver, "carol@sts.test", "INBOX", 2);
    got.retain(|(_, body)| body.contains("Subject: sts second"));
    assert_eq!(got.len(), 1);
    assert_eq!(
        metric(
            &sender,
            &format!("{TLS_SESSIONS}{{policy=\"sts\",result=\"success\"}}")
        ),
        2.0
    );

    // TLS-RPT (RFC 8460): the day's sessions under sts.test's policy, reported to the
    // address its `_smtp._tls` record names and taken in by its exchanger: the successes
    // and the certificate-host-mismatch failures counted above.
    let failed = mail::log_lines(&log, &["event=outbound_tls", "policy=sts"], 1).len();
    let tomorrow = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 86_400;
    let sent = must(mailstow(
        &tmp.path().join("sender/data"),
        &["report", "send", "--now", &tomorrow.to_string()],
    ));
    assert!(sent.contains("sts.test"), "{sent}");
    let receiver_data = tmp.path().join("receiver/data");
    let deadline = Instant::now() + Duration::from_secs(30);
    let listed = loop {
        let listed = must(mailstow(
            &receiver_data,
            &["report", "list", "--kind", "tlsrpt"],
        ));
        if listed.contains(" sts.test ") {
            break listed;
        }
        assert!(
            Instant::now() < deadline,
            "no TLS-RPT report arrived: {listed}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let field = |name: &str| -> u64 {
        listed
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {listed}"))
    };
    assert_eq!(field("failed="), failed as u64, "{listed}");
    assert_eq!(field("sessions=") - field("failed="), 2, "{listed}");
    let id = listed.split_whitespace().next().unwrap();
    let shown = must(mailstow(&receiver_data, &["report", "show", id]));
    assert!(shown.contains("mx.sts.test"), "{shown}");
    sender.stop_cleanly();
    receiver.stop_cleanly();
}

fn transport_cache_file() -> &'static str {
    "mta-sts-policies.json"
}

/// DANE: a TLSA 3 1 1 record matching the receiver's key delivers to a self-signed
/// certificate; a record that does not match defers (`tlsa-invalid`), never plaintext.
#[test]
fn dane_delivers_with_a_matching_tlsa_record_and_defers_without() {
    let tmp = tempfile::tempdir().unwrap();
    let address = test_peers::free_loopback_address(&[25, 443]).unwrap();
    let certs = tmp.path().join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let (cert, key) = self_signed(&certs, "mx.dane.test");
    let matching = spki_sha256(&key);
    let other = spki_sha256(&self_signed(&certs, "elsewhere.test").1);
    let zone = |tlsa: &str| format!("@ MX 10 mx\nmx A {address}\n_25._tcp.mx TLSA 3 1 1 {tlsa}\n");
    let bind = Bind::start(&[
        Zone::unsigned("example.test.", "@ TXT \"v=spf1 -all\"\n"),
        Zone::signed("dane.test.", &zone(&matching)),
        Zone::signed("badtlsa.test.", &zone(&other)),
    ])
    .unwrap();
    let ca = Ca::new(&tmp.path().join("ca"));
    let (receiver, _) = start_receiver(
        &tmp.path().join("receiver"),
        "mx.dane.test",
        &["dane.test", "badtlsa.test"],
        address,
        &cert,
        &key,
        &bind,
    );
    let (sender, log) = start_sender(&tmp.path().join("sender"), &bind, &ca, "");

    submit(&sender, "carol@dane.test", "dane good");
    let delivered = mail::log_lines(&log, &["event=delivered", "carol@dane.test"], 1);
    assert_eq!(delivered.len(), 1, "not delivered");
    assert_eq!(subjects(&receiver, "dane.test"), ["dane good"]);
    assert_eq!(
        metric(
            &sender,
            &format!("{TLS_SESSIONS}{{policy=\"tlsa\",result=\"success\"}}")
        ),
        1.0
    );

    submit(&sender, "carol@badtlsa.test", "dane bad");
    let deferred = mail::log_lines(&log, &["event=deferred", "carol@badtlsa.test"], 1);
    assert_eq!(deferred.len(), 1, "not deferred");
    assert!(
        deferred[0].contains("DANE") && deferred[0].contains("tlsa-invalid"),
        "{deferred:?}"
    );
    let failures = mail::log_lines(&log, &["event=outbound_tls", "result=tlsa-invalid"], 1);
    assert!(failures[0].contains("policy=tlsa"), "{failures:?}");
    std::thread::sleep(Duration::from_secs(1));
    assert!(subjects(&receiver, "badtlsa.test").is_empty());
    assert_eq!(
        metric(
            &sender,
            &format!("{TLS_SESSIONS}{{policy=\"tlsa\",result=\"tlsa-invalid\"}}")
        ),
        1.0
    );

    // With DANE off the same exchanger gets opportunistic TLS: the message goes (the
    // deferral above was DANE's doing, not a broken receiver).
    sender.stop_cleanly();
    let (sender, log) = start_sender(
        &tmp.path().join("sender"),
        &bind,
        &ca,
        "outbound_dane = false\n",
    );
    must(mailstow(
        &tmp.path().join("sender/data"),
        &["queue", "retry", &queue_id(&deferred[0])],
    ));
    let delivered = mail::log_lines(&log, &["event=delivered", "carol@badtlsa.test"], 1);
    assert_eq!(delivered.len(), 1, "not delivered without DANE");
    assert_eq!(subjects(&receiver, "badtlsa.test"), ["dane bad"]);
    sender.stop_cleanly();
    receiver.stop_cleanly();
}

/// The measurement behind `bench/run-transport.sh` (ignored by `cargo test`): outbound
/// delivery from one mailstow to a loopback MX (a second mailstow) with MTA-STS and DANE
/// checks on and off, one after the other on the same receiver, name server and messages.
///
/// Half the messages go to `dane.test` (signed, TLSA 3 1 1 for the receiver's key), half to
/// `sts.test` (an `enforce` policy naming the same exchanger, its certificate from the test
/// CA); `off` is `outbound_mta_sts = false`, `outbound_dane = false` (opportunistic TLS to
/// the same exchanger). Each mode gets a fresh sender; one warm-up message per domain first,
/// so the policy and the TLSA records are cached (by the planner and BIND's resolver) before
/// the timed messages. The figure is timed messages over the mail log's span from the first
/// timed message accepted to the last delivered. Env: BENCH_MSGS (400), BENCH_CONNS (4,
/// submission connections), BENCH_RUN (1; odd runs start with `off`).
#[test]
#[ignore = "a benchmark: bench/run-transport.sh runs it"]
fn bench_outbound_transport() {
    let number = |name: &str, default: usize| -> usize {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (msgs, conns, run) = (
        number("BENCH_MSGS", 400),
        number("BENCH_CONNS", 4).max(1),
        number("BENCH_RUN", 1),
    );
    let tmp = tempfile::tempdir().unwrap();
    let address = test_peers::free_loopback_address(&[25, 443]).unwrap();
    let ca = Ca::new(&tmp.path().join("ca"));
    let (cert, key) = ca.issue("mx", &["mx.dane.test", "mta-sts.sts.test"]);
    let bind = Bind::start(&[
        Zone::unsigned("example.test.", "@ TXT \"v=spf1 -all\"\n"),
        Zone::signed(
            "dane.test.",
            &format!(
                "@ MX 10 mx\nmx A {address}\n_25._tcp.mx TLSA 3 1 1 {}\n",
                spki_sha256(&key)
            ),
        ),
        Zone::unsigned(
            "sts.test.",
            &format!(
                "@ MX 10 mx.dane.test.\nmta-sts A {address}\n\
                 _mta-sts TXT \"v=STSv1; id=1\"\n"
            ),
        ),
    ])
    .unwrap();
    let (receiver, _) = start_receiver(
        &tmp.path().join("receiver"),
        "mx.dane.test",
        &["dane.test", "sts.test"],
        address,
        &cert,
        &key,
        &bind,
    );
    let modes = if run % 2 == 1 {
        ["off", "on"]
    } else {
        ["on", "off"]
    };
    for mode in modes {
        let transport = match mode {
            "on" => "",
            _ => "outbound_mta_sts = false\noutbound_dane = false\n",
        };
        let dir = tmp.path().join(format!("sender-{mode}"));
        let (sender, log) = start_sender(&dir, &bind, &ca, transport);
        submit_many(
            &sender,
            &["carol@dane.test", "carol@sts.test"],
            2,
            1,
            "warm-up",
        );
        assert_eq!(
            mail::log_lines(&log, &["event=delivered"], 2).len(),
            2,
            "warm-up not delivered ({mode})"
        );
        let accepted_before = mail::log_lines(&log, &["event=accepted"], 0).len();
        let started = Instant::now();
        submit_many(
            &sender,
            &["carol@dane.test", "carol@sts.test"],
            msgs,
            conns,
            "timed",
        );
        let client_seconds = started.elapsed().as_secs_f64();
        let deadline = Instant::now() + Duration::from_secs(600);
        let delivered = loop {
            let delivered = mail::log_lines(&log, &["event=delivered"], 0);
            if delivered.len() >= msgs + 2 || Instant::now() > deadline {
                break delivered;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(delivered.len(), msgs + 2, "not all delivered ({mode})");
        let accepted = mail::log_lines(&log, &["event=accepted"], 0);
        let first = log_ms(&accepted[accepted_before]);
        let last = delivered.iter().map(|l| log_ms(l)).max().unwrap();
        let seconds = (last - first) as f64 / 1000.0;
        let verified = metric(
            &sender,
            &format!("{TLS_SESSIONS}{{policy=\"tlsa\",result=\"success\"}}"),
        ) + metric(
            &sender,
            &format!("{TLS_SESSIONS}{{policy=\"sts\",result=\"success\"}}"),
        );
        let failed = mail::log_lines(&log, &["event=outbound_tls"], 0).len()
            + mail::log_lines(&log, &["event=deferred"], 0).len();
        println!(
            "RESULT transport_outbound_delivered label={mode} run={run} msgs={msgs} \
             seconds={seconds:.3} msgs_per_s={:.1} client_seconds={client_seconds:.3} \
             verified_sessions={verified} failures={failed}",
            msgs as f64 / seconds
        );
        sender.stop_cleanly();
    }
    receiver.stop_cleanly();
}

/// `count` messages from alice, to `recipients` in turn, over `conns` submission connections
/// (one transaction after another on each).
fn submit_many(sender: &Server, recipients: &[&str], count: usize, conns: usize, tag: &str) {
    use std::io::BufRead as _;
    let address = sender.addr("submission");
    let body = "x".repeat(76) + "\r\n";
    let body = body.repeat(24);
    std::thread::scope(|scope| {
        for c in 0..conns {
            let (address, body) = (address.clone(), body.clone());
            scope.spawn(move || {
                let stream = TcpStream::connect(&address).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(60)))
                    .unwrap();
                let mut writer = stream.try_clone().unwrap();
                let mut reader = std::io::BufReader::new(stream);
                let mut expect = |writer: &mut TcpStream, line: &str, code: u16| {
                    if !line.is_empty() {
                        writer.write_all(line.as_bytes()).unwrap();
                    }
                    let got = common::smtp_reply(&mut reader).unwrap();
                    assert_eq!(got, code, "after {line:?}");
                };
                expect(&mut writer, "", 220);
                expect(&mut writer, "EHLO bench\r\n", 250);
                let plain = common::base64(b"\0alice@example.test\0secret-pw");
                expect(&mut writer, &format!("AUTH PLAIN {plain}\r\n"), 235);
                for n in (c..count).step_by(conns) {
                    let to = recipients[n % recipients.len()];
                    expect(&mut writer, "MAIL FROM:<alice@example.test>\r\n", 250);
                    expect(&mut writer, &format!("RCPT TO:<{to}>\r\n"), 250);
                    expect(&mut writer, "DATA\r\n", 354);
                    let message = format!(
                        "From: alice@example.test\r\nTo: {to}\r\nSubject: {tag} {n}\r\n\r\n{body}.\r\n"
                    );
                    expect(&mut writer, &message, 250);
                }
                let _ = writer.write_all(b"QUIT\r\n");
                let mut rest = String::new();
                let _ = reader.read_line(&mut rest);
            });
        }
    });
}

/// A mail log line's `ts=` stamp (`2026-11-29T01:45:27.907Z`) in milliseconds since 1970.
fn log_ms(line: &str) -> i64 {
    let ts = line
        .split_whitespace()
        .find_map(|f| f.strip_prefix("ts="))
        .unwrap_or_else(|| panic!("no ts= in {line}"));
    let field = |range: std::ops::Range<usize>| -> i64 { ts[range].parse().unwrap() };
    let (y, m, d) = (field(0..4), field(5..7), field(8..10));
    let (h, min, s, ms) = (field(11..13), field(14..16), field(17..19), field(20..23));
    // Days from civil (H. Hinnant): the proleptic Gregorian calendar.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 24 + h) * 60 + min) * 60_000 + s * 1000 + ms
}
