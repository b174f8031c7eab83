//! The planner against a real validating resolver (test_peers::Bind: BIND 9 authoritative for
//! the test zones, some DNSSEC-signed, and a validating resolver in front): DANE from a signed
//! zone's TLSA records through to a TLS handshake, no DANE from an unsigned zone, a bogus zone
//! deferred, and an MTA-STS policy fetched from a local HTTPS server, cached in a file,
//! enforced after a restart, refetched when its id changes and kept when a refetch fails.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use test_peers::{Bind, Zone};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use transport_policy::{
    CACHE_FILE_NAME, Config, DaneStatus, Exchangers, Mode, Planner, PolicyKind, Requirement,
    ResultType, Tlsa,
};

struct Pki {
    ca: CertificateDer<'static>,
    leaf: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
}

fn pki(names: &[&str]) -> Pki {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "transport-policy bind CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
    Pki {
        ca: ca.der().clone(),
        leaf: leaf.der().clone(),
        key: PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
    }
}

fn server_config(pki: &Pki) -> Arc<rustls::ServerConfig> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    Arc::new(
        rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![pki.leaf.clone(), pki.ca.clone()], pki.key.clone_key())
            .unwrap(),
    )
}

/// A TLS server that writes one line after the handshake, like an exchanger after STARTTLS.
async fn tls_server(config: Arc<rustls::ServerConfig>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    let _ = tls.write_all(b"250 ok\r\n").await;
                    let _ = tls.shutdown().await;
                }
            });
        }
    });
    address
}

/// An HTTPS policy host serving whatever response is current.
async fn policy_server(
    config: Arc<rustls::ServerConfig>,
    response: Arc<Mutex<Vec<u8>>>,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let response = response.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut request = Vec::new();
                let mut buffer = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                let bytes = response.lock().unwrap().clone();
                let _ = tls.write_all(&bytes).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    address
}

fn policy_response(mode: &str) -> Vec<u8> {
    let body = format!("version: STSv1\r\nmode: {mode}\r\nmx: mx.sts.test\r\nmax_age: 86400\r\n");
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn handshake(
    planner: &Planner,
    requirement: &Requirement,
    host: &str,
    address: SocketAddr,
) -> Result<(), rustls::Error> {
    let config = planner.client_config(requirement).expect("a session");
    let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
    let name = ServerName::try_from(host.to_string()).unwrap();
    match tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
    {
        Ok(mut tls) => {
            let mut line = [0u8; 8];
            tls.read_exact(&mut line).await.unwrap();
            Ok(())
        }
        Err(e) => Err(e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .cloned()
            .unwrap_or_else(|| rustls::Error::General(e.to_string()))),
    }
}

fn dane_zone(good: &Tlsa, bad: &Tlsa) -> String {
    format!(
        "@ IN MX 10 mx\n@ IN MX 20 wrong\n@ IN MX 30 plain\n@ IN MX 40 pkix\n\
         mx IN A 127.0.0.1\nwrong IN A 127.0.0.1\nplain IN A 127.0.0.1\npkix IN A 127.0.0.1\n\
         _25._tcp.mx IN TLSA 3 1 1 {}\n\
         _25._tcp.wrong IN TLSA 3 1 1 {}\n\
         _25._tcp.pkix IN TLSA 1 1 1 {}\n",
        hex(&good.data),
        hex(&bad.data),
        hex(&good.data)
    )
}

fn sts_zone(id: Option<&str>) -> String {
    let mut records = String::from(
        "@ IN MX 10 mx\n@ IN MX 20 other\nmx IN A 127.0.0.1\nother IN A 127.0.0.1\nmta-sts IN A 127.0.0.1\n",
    );
    if let Some(id) = id {
        records.push_str(&format!("_mta-sts IN TXT \"v=STSv1; id={id}\"\n"));
    }
    // Other TXT records beside it, together longer than the 1232 bytes a UDP answer may
    // carry: the answer comes truncated and the client asks again over TCP.
    for n in 0..6 {
        records.push_str(&format!(
            "_mta-sts IN TXT \"filler-{n}-{}\"\n",
            "x".repeat(240)
        ));
    }
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_against_a_validating_resolver() {
    let pki = pki(&["mx.dane.test", "mta-sts.sts.test", "mx.sts.test"]);
    let stranger = self::pki(&["wrong.dane.test"]);
    let good = Tlsa::for_certificate(3, 1, 1, &pki.leaf).unwrap();
    let bad = Tlsa::for_certificate(3, 1, 1, &stranger.leaf).unwrap();
    let unsigned_tlsa = format!(
        "@ IN MX 10 mx\nmx IN A 127.0.0.1\n_25._tcp.mx IN TLSA 3 1 1 {}\n",
        hex(&good.data)
    );
    let mut bind = tokio::task::block_in_place(|| {
        Bind::start(&[
            Zone::signed("dane.test.", &dane_zone(&good, &bad)),
            Zone::unsigned("insecure.test.", &unsigned_tlsa),
            Zone::unsigned("sts.test.", &sts_zone(Some("1"))),
        ])
    })
    .expect("BIND starts (apt-get install bind9 bind9-utils bind9-dnsutils)");

    let response = Arc::new(Mutex::new(policy_response("enforce")));
    let https = policy_server(server_config(&pki), response.clone()).await;
    let exchanger = tls_server(server_config(&pki)).await;
    let cache_dir = tempfile::tempdir().unwrap();
    let config = || Config {
        extra_roots: vec![pki.ca.clone()],
        https_port: https.port(),
        ..Config::default()
    };
    let planner = Planner::new(vec![bind.resolver()], Some(cache_dir.path()), config()).unwrap();

    // A signed zone: the MX RRset and the TLSA records are validated.
    let plan = planner.plan("dane.test").await;
    assert!(plan.mx_secure, "{}", bind.log_tail());
    let Exchangers::Hosts(hosts) = &plan.exchangers else {
        panic!("{:?}", plan.exchangers)
    };
    let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mx.dane.test",
            "wrong.dane.test",
            "plain.dane.test",
            "pkix.dane.test"
        ]
    );
    assert_eq!(hosts[0].dane, DaneStatus::Usable(vec![good.clone()]));
    assert_eq!(hosts[2].dane, DaneStatus::NoRecords);
    assert!(matches!(hosts[3].dane, DaneStatus::Unusable(_)));
    assert!(plan.sts.is_none());

    let requirement = planner.requirement(&plan, "mx.dane.test");
    assert_eq!(
        requirement,
        Requirement::Dane {
            host: "mx.dane.test".into(),
            records: vec![good.clone()]
        }
    );
    let applied = plan.applied_policy(&requirement);
    assert_eq!(applied.kind, PolicyKind::Tlsa);
    assert_eq!(applied.strings, [good.to_text()]);
    handshake(&planner, &requirement, "mx.dane.test", exchanger)
        .await
        .unwrap();

    // The same server under records for another key: the handshake fails, `tlsa-invalid`.
    let requirement = planner.requirement(&plan, "wrong.dane.test");
    assert!(matches!(requirement, Requirement::Dane { .. }));
    let error = handshake(&planner, &requirement, "wrong.dane.test", exchanger)
        .await
        .unwrap_err();
    assert_eq!(
        ResultType::from_tls_error(&error, PolicyKind::Tlsa),
        ResultType::TlsaInvalid
    );

    assert_eq!(
        planner.requirement(&plan, "plain.dane.test"),
        Requirement::Opportunistic
    );
    let requirement = planner.requirement(&plan, "pkix.dane.test");
    assert!(matches!(requirement, Requirement::Encrypted { .. }));
    handshake(&planner, &requirement, "pkix.dane.test", exchanger)
        .await
        .unwrap();

    // An unsigned zone: its TLSA record is not trusted, no DANE.
    let plan = planner.plan("insecure.test").await;
    assert!(!plan.mx_secure);
    let Exchangers::Hosts(hosts) = &plan.exchangers else {
        panic!("{:?}", plan.exchangers)
    };
    assert_eq!(hosts[0].dane, DaneStatus::Insecure);
    assert_eq!(
        planner.requirement(&plan, "mx.insecure.test"),
        Requirement::Opportunistic
    );

    // A name nobody serves: the authoritative server refuses, no answer now.
    let plan = planner.plan("nowhere.example").await;
    assert!(matches!(
        plan.exchangers,
        Exchangers::Unavailable(_) | Exchangers::NoSuchDomain
    ));

    // MTA-STS: the policy fetched and enforced.
    let plan = planner.plan("sts.test").await;
    let cached = plan.sts.clone().expect("a policy");
    assert_eq!(
        (cached.policy.mode, cached.id.as_str()),
        (Mode::Enforce, "1")
    );
    assert!(plan.sts_failure.is_none());
    let requirement = planner.requirement(&plan, "mx.sts.test");
    assert_eq!(
        requirement,
        Requirement::Verified {
            server_name: "mx.sts.test".into(),
            enforce: true,
            listed: true
        }
    );
    handshake(&planner, &requirement, "mx.sts.test", exchanger)
        .await
        .unwrap();
    assert!(matches!(
        planner.requirement(&plan, "other.sts.test"),
        Requirement::Skip { .. }
    ));
    assert!(cache_dir.path().join(CACHE_FILE_NAME).is_file());

    // A restart with the TXT record gone: the cached policy is still enforced (RFC 8461 5.1).
    tokio::task::block_in_place(|| bind.update(&Zone::unsigned("sts.test.", &sts_zone(None))))
        .unwrap();
    *response.lock().unwrap() = b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n".to_vec();
    drop(planner);
    let planner = Planner::new(vec![bind.resolver()], Some(cache_dir.path()), config()).unwrap();
    let plan = planner.plan("sts.test").await;
    assert_eq!(
        plan.sts.as_ref().map(|c| c.policy.mode),
        Some(Mode::Enforce)
    );
    assert!(matches!(
        planner.requirement(&plan, "other.sts.test"),
        Requirement::Skip { .. }
    ));

    // A new id: refetched.
    *response.lock().unwrap() = policy_response("testing");
    tokio::task::block_in_place(|| bind.update(&Zone::unsigned("sts.test.", &sts_zone(Some("2")))))
        .unwrap();
    let plan = planner.plan("sts.test").await;
    let cached = plan.sts.clone().expect("a policy");
    assert_eq!(
        (cached.policy.mode, cached.id.as_str()),
        (Mode::Testing, "2")
    );
    let requirement = planner.requirement(&plan, "other.sts.test");
    assert_eq!(
        requirement,
        Requirement::Verified {
            server_name: "other.sts.test".into(),
            enforce: false,
            listed: false
        }
    );
    assert_eq!(
        planner.check_session(&requirement, Some(std::slice::from_ref(&pki.leaf))),
        Err(ResultType::ValidationFailure)
    );
    let listed = planner.requirement(&plan, "mx.sts.test");
    assert_eq!(
        planner.check_session(&listed, Some(&[pki.leaf.clone(), pki.ca.clone()])),
        Ok(())
    );
    assert_eq!(
        planner.check_session(&listed, None),
        Err(ResultType::StarttlsNotSupported)
    );

    // Another id whose fetch fails: the cached policy stays, the failure is reported.
    *response.lock().unwrap() =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 0\r\n\r\n".to_vec();
    tokio::task::block_in_place(|| bind.update(&Zone::unsigned("sts.test.", &sts_zone(Some("3")))))
        .unwrap();
    let plan = planner.plan("sts.test").await;
    assert_eq!(plan.sts.as_ref().map(|c| c.id.as_str()), Some("2"));
    assert_eq!(
        plan.sts_failure.as_ref().map(|f| f.0),
        Some(ResultType::StsPolicyInvalid)
    );

    // The signed zone turns bogus (its signatures gone under the resolver's anchor): defer.
    tokio::task::block_in_place(|| {
        bind.update(&Zone::unsigned("dane.test.", &dane_zone(&good, &bad)))
    })
    .unwrap();
    let plan = planner.plan("dane.test").await;
    assert!(
        matches!(plan.exchangers, Exchangers::Unavailable(_)),
        "{:?}",
        plan.exchangers
    );
}
