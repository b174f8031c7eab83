//! Real sockets: the policy fetcher against a local HTTPS server (tokio-rustls, a private CA
//! made with rcgen), and TLS handshakes through the DANE verifier against a tokio-rustls server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use transport_policy::{
    DaneVerifier, FetchError, Fetcher, Mode, POLICY_BYTES_MAX, PolicyKind, ResultType, Tlsa,
};

/// A CA and a certificate it issued for some names, with the leaf's key.
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
        .push(rcgen::DnType::CommonName, "transport-policy test CA");
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

fn server_config(pki: &Pki, with_ca: bool) -> Arc<rustls::ServerConfig> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let mut chain = vec![pki.leaf.clone()];
    if with_ca {
        chain.push(pki.ca.clone());
    }
    Arc::new(
        rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(chain, pki.key.clone_key())
            .unwrap(),
    )
}

const POLICY: &str = "version: STSv1\r\nmode: enforce\r\nmx: mx.good.test\r\nmx: *.mx.good.test\r\nmax_age: 86400\r\n";

/// An HTTPS server answering by the request's Host: a policy, the wrong media type, a
/// redirect, an oversized body, a chunked policy.
async fn https_server(config: Arc<rustls::ServerConfig>) -> SocketAddr {
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
                let request = String::from_utf8_lossy(&request).to_string();
                assert!(
                    request.starts_with("GET /.well-known/mta-sts.txt HTTP/1.1\r\n"),
                    "{request}"
                );
                let host = request
                    .lines()
                    .find_map(|l| l.strip_prefix("Host: "))
                    .unwrap_or("")
                    .to_string();
                let response: Vec<u8> = match host.as_str() {
                    "mta-sts.good.test" => format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{POLICY}",
                        POLICY.len()
                    )
                    .into_bytes(),
                    "mta-sts.chunked.test" => format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{POLICY}\r\n0\r\n\r\n",
                        POLICY.len()
                    )
                    .into_bytes(),
                    "mta-sts.html.test" => format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n{POLICY}",
                        POLICY.len()
                    )
                    .into_bytes(),
                    "mta-sts.redirect.test" => {
                        b"HTTP/1.1 301 Moved Permanently\r\nLocation: https://mta-sts.good.test/.well-known/mta-sts.txt\r\nContent-Length: 0\r\n\r\n".to_vec()
                    }
                    "mta-sts.big.test" => {
                        let mut body = POLICY.as_bytes().to_vec();
                        body.resize(POLICY_BYTES_MAX + 1000, b'#');
                        [b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n".as_slice(), &body].concat()
                    }
                    "mta-sts.slow.test" => {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        return;
                    }
                    _ => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
                };
                let _ = tls.write_all(&response).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    address
}

fn fetcher(extra: Option<&CertificateDer<'static>>, timeout: Duration) -> Fetcher {
    let mut roots =
        rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(cert) = extra {
        roots.add(cert.clone()).unwrap();
    }
    Fetcher::new(roots, timeout)
}

#[tokio::test]
async fn the_fetcher_takes_only_a_verified_text_plain_policy_without_redirects() {
    let names =
        ["good", "chunked", "html", "redirect", "big", "slow"].map(|d| format!("mta-sts.{d}.test"));
    let pki = pki(&names.iter().map(String::as_str).collect::<Vec<_>>());
    let address = https_server(server_config(&pki, false)).await;
    let fetcher = fetcher(Some(&pki.ca), Duration::from_secs(5));

    let policy = fetcher.fetch("good.test", address).await.unwrap();
    assert_eq!(policy.mode, Mode::Enforce);
    assert_eq!(policy.mx, ["mx.good.test", "*.mx.good.test"]);
    assert_eq!(policy.max_age, 86400);
    assert_eq!(policy.to_text(), POLICY);
    assert_eq!(fetcher.fetch("GOOD.test.", address).await.unwrap(), policy);
    assert_eq!(
        fetcher.fetch("chunked.test", address).await.unwrap(),
        policy
    );

    let error = fetcher.fetch("html.test", address).await.unwrap_err();
    assert!(matches!(error, FetchError::ContentType(_)), "{error}");
    assert_eq!(error.result_type(), ResultType::StsPolicyInvalid);

    let error = fetcher.fetch("redirect.test", address).await.unwrap_err();
    assert!(matches!(error, FetchError::Status(301)), "{error}");
    assert_eq!(error.result_type(), ResultType::StsPolicyFetchError);

    let error = fetcher.fetch("big.test", address).await.unwrap_err();
    assert!(matches!(error, FetchError::TooLong), "{error}");

    // The certificate does not name mta-sts.other.test.
    let error = fetcher.fetch("other.test", address).await.unwrap_err();
    assert!(matches!(error, FetchError::Certificate(_)), "{error}");
    assert_eq!(error.result_type(), ResultType::StsWebpkiInvalid);

    // The private CA not trusted: the Mozilla roots alone refuse it.
    let error = self::fetcher(None, Duration::from_secs(5))
        .fetch("good.test", address)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            FetchError::Certificate(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer
            ))
        ),
        "{error}"
    );

    let impatient = self::fetcher(Some(&pki.ca), Duration::from_millis(300));
    let error = impatient.fetch("slow.test", address).await.unwrap_err();
    assert!(matches!(error, FetchError::Timeout), "{error}");

    // Nobody listening.
    let closed = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let error = fetcher.fetch("good.test", closed).await.unwrap_err();
    assert!(matches!(error, FetchError::Connect(..)), "{error}");
}

/// A TLS server that completes handshakes and answers one line, like an exchanger after
/// STARTTLS.
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

async fn handshake(address: SocketAddr, host: &str, records: &[Tlsa]) -> Result<(), rustls::Error> {
    let name = ServerName::try_from(host.to_string()).unwrap();
    let config = Arc::new(DaneVerifier::new(name.clone(), records).client_config());
    let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
    match tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
    {
        Ok(mut tls) => {
            let mut line = [0u8; 8];
            tls.read_exact(&mut line).await.unwrap();
            assert_eq!(&line, b"250 ok\r\n");
            Ok(())
        }
        Err(e) => Err(e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .cloned()
            .unwrap_or_else(|| rustls::Error::General(e.to_string()))),
    }
}

#[tokio::test]
async fn handshakes_through_the_dane_verifier() {
    let pki = pki(&["mx.dane.test"]);
    let stranger = self::pki(&["mx.dane.test"]);
    let address = tls_server(server_config(&pki, true)).await;

    // DANE-EE by key and by certificate.
    for (selector, matching) in [(1, 1), (0, 1), (1, 2), (0, 0)] {
        let record = Tlsa::for_certificate(3, selector, matching, &pki.leaf).unwrap();
        handshake(address, "mx.dane.test", &[record]).await.unwrap();
    }
    // DANE-EE ignores the name.
    let ee = Tlsa::for_certificate(3, 1, 1, &pki.leaf).unwrap();
    handshake(address, "elsewhere.test", &[ee]).await.unwrap();

    // Records for another key: no match, `tlsa-invalid`.
    let wrong = Tlsa::for_certificate(3, 1, 1, &stranger.leaf).unwrap();
    let error = handshake(address, "mx.dane.test", std::slice::from_ref(&wrong))
        .await
        .unwrap_err();
    assert_eq!(
        ResultType::from_tls_error(&error, PolicyKind::Tlsa),
        ResultType::TlsaInvalid
    );
    // One matching record among others is enough.
    let right = Tlsa::for_certificate(3, 1, 2, &pki.leaf).unwrap();
    handshake(address, "mx.dane.test", &[wrong, right])
        .await
        .unwrap();

    // DANE-TA: the CA the server presents.
    let ta = Tlsa::for_certificate(2, 0, 1, &pki.ca).unwrap();
    handshake(address, "mx.dane.test", std::slice::from_ref(&ta))
        .await
        .unwrap();
    let error = handshake(address, "other.dane.test", &[ta])
        .await
        .unwrap_err();
    assert_eq!(
        ResultType::from_tls_error(&error, PolicyKind::Tlsa),
        ResultType::CertificateHostMismatch
    );
    let foreign_ta = Tlsa::for_certificate(2, 1, 1, &stranger.ca).unwrap();
    let error = handshake(address, "mx.dane.test", &[foreign_ta])
        .await
        .unwrap_err();
    assert_eq!(
        ResultType::from_tls_error(&error, PolicyKind::Tlsa),
        ResultType::TlsaInvalid
    );

    // A PKIX-EE record that matches is unusable for SMTP (RFC 7672 3.1.3).
    let pkix = Tlsa::for_certificate(1, 1, 1, &pki.leaf).unwrap();
    assert!(handshake(address, "mx.dane.test", &[pkix]).await.is_err());
}
