//! `obtain` against a real ACME server: acme2certifier with its local OpenSSL CA
//! (`test_peers::Acme2Certifier`), the test names resolved by a private BIND
//! (`test_peers::Bind`) to a loopback address where this test answers the challenges: an HTTP
//! server on port 80 for HTTP-01 and a tokio-rustls server on port 443 that answers ALPN
//! `acme-tls/1` for TLS-ALPN-01, as the mail server's listeners will.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use acme::{Challenge, Config, Error, Issued, Responder};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use test_peers::{Acme2Certifier, AcmeOptions, Bind, Zone};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The zone every test name is in.
const ORIGIN: &str = "acme.test.";

/// Bytes of an HTTP request this responder reads.
const REQUEST_BYTES_MAX: usize = 8192;

/// How long one challenge connection may take.
const CONNECTION_MAX: Duration = Duration::from_secs(10);

/// What the test's listeners answer, and how often they were asked.
#[derive(Default)]
struct Answers {
    http01: Mutex<HashMap<String, String>>,
    tls_alpn01: Mutex<HashMap<String, Arc<CertifiedKey>>>,
    http01_served: Mutex<u32>,
    tls_alpn01_served: Mutex<u32>,
}

impl Responder for Answers {
    fn put_http01(&self, token: &str, key_authorization: &str) {
        self.http01
            .lock()
            .unwrap()
            .insert(token.to_owned(), key_authorization.to_owned());
    }

    fn put_tls_alpn01(
        &self,
        name: &str,
        certificate: CertificateDer<'static>,
        key: PrivateKeyDer<'static>,
    ) {
        let signing_key = rustls::crypto::aws_lc_rs::sign::any_supported_type(&key).unwrap();
        let certified = Arc::new(CertifiedKey::new(vec![certificate], signing_key));
        self.tls_alpn01
            .lock()
            .unwrap()
            .insert(name.to_owned(), certified);
    }

    fn clear_http01(&self, token: &str) {
        self.http01.lock().unwrap().remove(token);
    }

    fn clear_tls_alpn01(&self, name: &str) {
        self.tls_alpn01.lock().unwrap().remove(name);
    }
}

impl Answers {
    fn is_empty(&self) -> bool {
        self.http01.lock().unwrap().is_empty() && self.tls_alpn01.lock().unwrap().is_empty()
    }
}

/// The TLS listener's certificate choice: the challenge certificate for a client that offers
/// `acme-tls/1` (RFC 8737 3), nothing otherwise (this listener serves nothing else).
#[derive(Debug)]
struct ChallengeResolver(Arc<Answers>);

impl std::fmt::Debug for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Answers")
    }
}

impl ResolvesServerCert for ChallengeResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let offers_acme = hello
            .alpn()
            .is_some_and(|mut protocols| protocols.any(|p| p == acme::ACME_TLS_ALPN_PROTOCOL));
        if !offers_acme {
            return None;
        }
        let name = hello.server_name()?.to_owned();
        self.0.tls_alpn01.lock().unwrap().get(&name).cloned()
    }
}

/// Serves HTTP-01 on `address:80` and TLS-ALPN-01 on `address:443` until the runtime ends.
async fn serve_challenges(address: Ipv4Addr, answers: Arc<Answers>) {
    let http = TcpListener::bind((address, 80)).await.unwrap();
    let tls = TcpListener::bind((address, 443)).await.unwrap();
    let http_answers = answers.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = http.accept().await else {
                continue;
            };
            let answers = http_answers.clone();
            tokio::spawn(tokio::time::timeout(
                CONNECTION_MAX,
                answer_http01(stream, answers),
            ));
        }
    });
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_cert_resolver(Arc::new(ChallengeResolver(answers.clone())));
    config.alpn_protocols = vec![acme::ACME_TLS_ALPN_PROTOCOL.to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = tls.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            let answers = answers.clone();
            tokio::spawn(tokio::time::timeout(CONNECTION_MAX, async move {
                // RFC 8737 3: the handshake is the whole answer; then close.
                if let Ok(mut stream) = acceptor.accept(stream).await {
                    *answers.tls_alpn01_served.lock().unwrap() += 1;
                    let _ = stream.shutdown().await;
                }
            }));
        }
    });
}

/// `GET /.well-known/acme-challenge/TOKEN` (RFC 8555 8.3): 200 and the key authorization, or
/// 404.
async fn answer_http01(mut stream: tokio::net::TcpStream, answers: Arc<Answers>) {
    let mut request = Vec::new();
    let mut buffer = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < REQUEST_BYTES_MAX {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buffer[..n]),
        }
    }
    let request = String::from_utf8_lossy(&request);
    let path = request.split_whitespace().nth(1).unwrap_or("");
    let answer = path
        .strip_prefix("/.well-known/acme-challenge/")
        .and_then(|token| answers.http01.lock().unwrap().get(token).cloned());
    let response = match answer {
        Some(body) => {
            *answers.http01_served.lock().unwrap() += 1;
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
        }
        None => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".into(),
    };
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// The peers, the names, and a directory for the store.
struct Setup {
    // Dropped in order: the ACME server before the DNS it asks.
    acme: Acme2Certifier,
    bind: Bind,
    address: Ipv4Addr,
    names: Vec<String>,
    store: tempfile::TempDir,
}

impl Setup {
    /// `names` (relative to [`ORIGIN`]) resolve to a free loopback address; the ACME server
    /// issues certificates valid `validity_days`.
    fn start(names: &[&str], validity_days: u32) -> Setup {
        let address = test_peers::free_loopback_address(&[80, 443]).unwrap();
        let records: String = names
            .iter()
            .map(|name| format!("{name} IN A {address}\n"))
            .collect();
        let bind =
            Bind::start(&[Zone::unsigned(ORIGIN, &records)]).unwrap_or_else(|e| panic!("{e}"));
        let acme = Acme2Certifier::start(&AcmeOptions {
            dns: bind.resolver(),
            validity_days,
        })
        .unwrap_or_else(|e| panic!("{e}"));
        Setup {
            acme,
            bind,
            address,
            names: names
                .iter()
                .map(|name| format!("{name}.{}", ORIGIN.trim_end_matches('.')))
                .collect(),
            store: tempfile::tempdir().unwrap(),
        }
    }

    fn config(&self, challenge: Challenge) -> Config {
        let mut config = Config::new(self.acme.directory_url());
        config.extra_roots_pem = Some(self.acme.ca_cert_path().to_owned());
        config.contact = vec!["mailto:postmaster@acme.test".into()];
        config.challenge = challenge;
        config
    }

    fn store(&self) -> &Path {
        self.store.path()
    }

    /// The peers' logs, for a failure's message.
    fn logs(&self) -> String {
        format!(
            "--- acme2certifier ---\n{}\n--- bind ---\n{}",
            self.acme.log_tail(),
            self.bind.log_tail()
        )
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn openssl(args: &[&str]) -> (bool, String) {
    let output = Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl runs");
    (
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

/// The chain verifies against the peer's CA with `openssl verify` (the leaf against the CA,
/// any intermediates sent after it as untrusted), and its leaf names `names`.
fn assert_chain_verifies(setup: &Setup, issued: &Issued) {
    let work = tempfile::tempdir().unwrap();
    let blocks: Vec<&str> = issued
        .chain_pem
        .split_inclusive("-----END CERTIFICATE-----")
        .filter(|block| block.contains("BEGIN CERTIFICATE"))
        .collect();
    assert!(!blocks.is_empty(), "{}", issued.chain_pem);
    let leaf = work.path().join("leaf.pem");
    std::fs::write(&leaf, format!("{}\n", blocks[0].trim())).unwrap();
    let ca = setup.acme.ca_cert_path().to_str().unwrap().to_owned();
    let leaf_path = leaf.to_str().unwrap().to_owned();
    let mut args = vec!["verify", "-CAfile", &ca];
    let rest = work.path().join("rest.pem");
    let rest_path = rest.to_str().unwrap().to_owned();
    if blocks.len() > 1 {
        std::fs::write(&rest, blocks[1..].concat()).unwrap();
        args.extend(["-untrusted", &rest_path]);
    }
    args.push(&leaf_path);
    let (ok, text) = openssl(&args);
    assert!(
        ok,
        "the chain does not verify against the peer's CA: {text}"
    );
    let (ok, text) = openssl(&[
        "x509",
        "-noout",
        "-ext",
        "subjectAltName",
        "-in",
        &leaf_path,
    ]);
    assert!(ok, "{text}");
    for name in &issued.names {
        assert!(
            text.contains(&format!("DNS:{name}")),
            "{name} missing: {text}"
        );
    }
    // The files installed are the ones returned.
    let installed = acme::load_certificate(setup.store()).unwrap().unwrap();
    assert_eq!(&installed, issued);
}

async fn obtain_or_panic(setup: &Setup, config: &Config, answers: &Arc<Answers>) -> Issued {
    let started = Instant::now();
    let issued = acme::obtain(config, setup.store(), &setup.names, answers.as_ref())
        .await
        .unwrap_or_else(|error| panic!("obtain: {error}\n{}", setup.logs()));
    eprintln!("obtain ({}) took {:?}", config.challenge, started.elapsed());
    assert!(answers.is_empty(), "challenge answers left published");
    issued
}

#[test]
fn http_01_issues_renews_with_the_same_key_and_schedules_a_short_certificate() {
    let setup = Setup::start(&["mail", "mta-sts"], 1);
    let runtime = runtime();
    runtime.block_on(async {
        let answers = Arc::new(Answers::default());
        serve_challenges(setup.address, answers.clone()).await;
        let mut config = setup.config(Challenge::Http01);
        config.renew_before = Some(Duration::from_secs(2 * 86_400));

        let first = obtain_or_panic(&setup, &config, &answers).await;
        assert_eq!(first.names, ["mail.acme.test", "mta-sts.acme.test"]);
        assert!(
            *answers.http01_served.lock().unwrap() >= 2,
            "HTTP-01 was not asked"
        );
        assert_chain_verifies(&setup, &first);
        let lifetime = first.not_after.duration_since(SystemTime::now()).unwrap();
        assert!(
            lifetime <= Duration::from_secs(86_400 + 3600),
            "{lifetime:?}"
        );

        // A second order: a new certificate, the same key (DANE 3 1 1 stays valid).
        let second = obtain_or_panic(&setup, &config, &answers).await;
        assert_eq!(second.key_pem, first.key_pem);
        assert_ne!(second.chain_pem, first.chain_pem);
        assert_chain_verifies(&setup, &second);

        // A 1-day certificate with renew_before = 2 days is due as soon as reissuing is
        // allowed; with the default window (a third of the lifetime) it is not.
        let state = acme::load_state(setup.store()).unwrap();
        let facts = state.certificate.clone().unwrap();
        assert_eq!(facts.not_after, second.not_after);
        let reissue_allowed = facts.issued_at + acme::REISSUE_INTERVAL_MIN;
        assert_eq!(
            acme::next_attempt(&config, &setup.names, &state, reissue_allowed),
            reissue_allowed
        );
        let default_window = setup.config(Challenge::Http01);
        let due = acme::next_attempt(&default_window, &setup.names, &state, reissue_allowed);
        assert!(
            due > reissue_allowed + Duration::from_secs(3 * 3600),
            "{due:?}"
        );
        assert!(due < facts.not_after);
        // Another name is due at once (subject only to now).
        let more = vec!["autoconfig.acme.test".to_owned(), setup.names[0].clone()];
        let now = SystemTime::now();
        assert_eq!(acme::next_attempt(&config, &more, &state, now), now);

        let status = acme::status(setup.store(), SystemTime::now()).unwrap();
        assert_eq!(status.names, setup.names);
        assert_eq!(status.days_left, Some(0));
        assert_eq!(status.last_error, None);
        assert_eq!(status.consecutive_failures, 0);
        assert!(status.next_attempt.is_some());

        // Rotation on request: a new key.
        config.rotate_key = true;
        let rotated = obtain_or_panic(&setup, &config, &answers).await;
        assert_ne!(rotated.key_pem, first.key_pem);
        assert_chain_verifies(&setup, &rotated);
    });
}

#[test]
fn tls_alpn_01_issues() {
    let setup = Setup::start(&["mail"], 2);
    let runtime = runtime();
    runtime.block_on(async {
        let answers = Arc::new(Answers::default());
        serve_challenges(setup.address, answers.clone()).await;
        let config = setup.config(Challenge::TlsAlpn01);
        let issued = obtain_or_panic(&setup, &config, &answers).await;
        assert_eq!(issued.names, ["mail.acme.test"]);
        assert!(
            *answers.tls_alpn01_served.lock().unwrap() >= 1,
            "TLS-ALPN-01 was not asked"
        );
        assert_eq!(*answers.http01_served.lock().unwrap(), 0);
        assert_chain_verifies(&setup, &issued);
    });
}

/// A challenge nobody answers: an error that says why, recorded with a backoff, no certificate
/// installed, the answers withdrawn.
#[test]
fn a_failed_validation_is_recorded_with_a_backoff() {
    let setup = Setup::start(&["mail"], 1);
    let runtime = runtime();
    runtime.block_on(async {
        // The listeners are not started: port 80 of the address refuses.
        let answers = Arc::new(Answers::default());
        let config = setup.config(Challenge::Http01);
        let started = Instant::now();
        let error = acme::obtain(&config, setup.store(), &setup.names, answers.as_ref())
            .await
            .unwrap_err();
        eprintln!("the failed obtain took {:?}: {error}", started.elapsed());
        // The challenge's own error, at once (not the end of the poll).
        assert!(
            matches!(&error, Error::Validation(reason) if reason.contains("mail.acme.test")),
            "{error}\n{}",
            setup.logs()
        );
        assert!(
            started.elapsed() < acme::ORDER_POLL_MAX,
            "{:?}",
            started.elapsed()
        );
        assert!(answers.is_empty());
        assert_eq!(acme::load_certificate(setup.store()).unwrap(), None);
        let state = acme::load_state(setup.store()).unwrap();
        assert_eq!(state.consecutive_failures, 1);
        assert_eq!(
            state.last_error.as_deref(),
            Some(error.to_string().as_str())
        );
        let last = state.last_attempt.unwrap();
        assert!(state.next_attempt.unwrap() >= last + acme::BACKOFF_FIRST);
        let status = acme::status(setup.store(), SystemTime::now()).unwrap();
        assert!(status.names.is_empty());
        assert_eq!(status.last_error, state.last_error);
    });
}

/// A second renewal on the same directory while one runs is refused, not interleaved.
#[test]
fn a_second_attempt_on_the_same_directory_is_busy() {
    let setup = Setup::start(&["mail"], 1);
    let runtime = runtime();
    runtime.block_on(async {
        let answers = Arc::new(Answers::default());
        serve_challenges(setup.address, answers.clone()).await;
        let config = setup.config(Challenge::Http01);
        let first = acme::obtain(&config, setup.store(), &setup.names, answers.as_ref());
        let second = async {
            // Once the first holds the directory.
            tokio::time::sleep(Duration::from_millis(50)).await;
            acme::obtain(&config, setup.store(), &setup.names, answers.as_ref()).await
        };
        let (first, second) = tokio::join!(first, second);
        first.unwrap_or_else(|error| panic!("{error}\n{}", setup.logs()));
        assert!(matches!(second, Err(Error::Busy { .. })), "{second:?}");
        // Busy is not an attempt.
        assert_eq!(
            acme::load_state(setup.store())
                .unwrap()
                .consecutive_failures,
            0
        );
    });
}
