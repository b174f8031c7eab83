//! The HTTPS client that talks to the ACME server.

use std::sync::Arc;

use bytes::Bytes;
use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use instant_acme::{BodyWrapper, HttpClient};
use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use crate::{Config, Error};

/// CA certificates read from `extra_roots_pem`: a private CA's root and intermediates.
const EXTRA_ROOTS_MAX: usize = 32;

/// An HTTPS-only client (RFC 8555 6.1) trusting the usual web roots plus the configured ones,
/// with aws-lc-rs as its crypto provider.
pub(crate) fn client(config: &Config) -> Result<Box<dyn HttpClient>, Error> {
    if !config.directory_url.starts_with("https://") {
        return Err(Error::Config(format!(
            "the directory URL {:?} is not https:// (RFC 8555 6.1)",
            config.directory_url
        )));
    }
    let mut roots = RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = &config.extra_roots_pem {
        let bad =
            |reason: String| Error::Config(format!("extra roots {}: {reason}", path.display()));
        let mut added = 0;
        for certificate in
            CertificateDer::pem_file_iter(path).map_err(|error| bad(error.to_string()))?
        {
            let certificate = certificate.map_err(|error| bad(error.to_string()))?;
            if added == EXTRA_ROOTS_MAX {
                return Err(bad(format!("more than {EXTRA_ROOTS_MAX} certificates")));
            }
            roots
                .add(certificate)
                .map_err(|error| bad(error.to_string()))?;
            added += 1;
        }
        if added == 0 {
            return Err(bad("no certificate in the file".into()));
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| Error::Config(format!("TLS: {error}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .enable_http2()
        .build();
    let client: Client<_, BodyWrapper<Bytes>> =
        Client::builder(TokioExecutor::new()).build(connector);
    Ok(Box::new(client))
}
