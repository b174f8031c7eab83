//! Opportunistic TLS: a client that takes any certificate but still checks that the server
//! holds its key (the handshake's signatures). It protects against passive eavesdropping, not
//! against an active attacker, exactly like Postfix's `may` level. Used where a certificate
//! cannot be verified and TLS is still worth having: outbound SMTP to an exchanger or a relay
//! that does not ask for verification, the cluster's connections between nodes (whose
//! pre-authentication is bound to the TLS connection instead), and the IMAP client's
//! `accept_invalid_certs`.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

/// A client configuration that takes any certificate (see the crate's documentation).
pub fn client_config() -> rustls::ClientConfig {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    rustls::ClientConfig::builder()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate::new()))
        .with_no_client_auth()
}

/// Accepts any certificate; checks the handshake's signatures with the provider's algorithms.
#[derive(Debug)]
pub struct AnyCertificate(CryptoProvider);

impl AnyCertificate {
    pub fn new() -> AnyCertificate {
        AnyCertificate(rustls::crypto::aws_lc_rs::default_provider())
    }
}

impl Default for AnyCertificate {
    fn default() -> Self {
        AnyCertificate::new()
    }
}

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
