//! DANE for SMTP (RFC 7672): TLSA records, how a certificate matches one, and the rustls
//! verifier that authenticates an exchanger by them.

use std::fmt::Write as _;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

/// Most TLSA records kept for one exchanger; more make the lookup a failure (a real RRset
/// holds a current and a next key, a few records).
pub const TLSA_RECORDS_MAX: usize = 32;
/// Longest certificate association data taken (a full certificate with matching type 0).
pub const TLSA_DATA_BYTES_MAX: usize = 8192;

/// RFC 6698 2.1.1 certificate usages that RFC 7672 3.1 lets SMTP use.
pub const USAGE_DANE_TA: u8 = 2;
pub const USAGE_DANE_EE: u8 = 3;

/// One TLSA record (RFC 6698 2.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tlsa {
    /// 0 PKIX-TA, 1 PKIX-EE, 2 DANE-TA, 3 DANE-EE.
    pub usage: u8,
    /// 0: the full certificate; 1: its SubjectPublicKeyInfo.
    pub selector: u8,
    /// 0: the selected bytes themselves; 1: their SHA-256; 2: their SHA-512.
    pub matching: u8,
    pub data: Vec<u8>,
}

impl Tlsa {
    /// RFC 7672 3.1.3: PKIX-TA(0) and PKIX-EE(1) are unusable for SMTP; so are unknown
    /// selectors and matching types, and a digest of the wrong length (RFC 7671 4).
    pub fn usable(&self) -> bool {
        (self.usage == USAGE_DANE_TA || self.usage == USAGE_DANE_EE)
            && self.selector <= 1
            && match self.matching {
                0 => !self.data.is_empty() && self.data.len() <= TLSA_DATA_BYTES_MAX,
                1 => self.data.len() == 32,
                2 => self.data.len() == 64,
                _ => false,
            }
    }

    /// The presentation form (`3 1 1 ABCD...`), as TLS-RPT's policy strings quote it.
    pub fn to_text(&self) -> String {
        let mut text = format!("{} {} {} ", self.usage, self.selector, self.matching);
        for byte in &self.data {
            let _ = write!(text, "{byte:02X}");
        }
        text
    }

    /// Does this record match this certificate? (Only the association: usage is the caller's.)
    pub fn matches(&self, cert: &CertificateDer<'_>) -> bool {
        let selected: Vec<u8> = match self.selector {
            0 => cert.as_ref().to_vec(),
            1 => match webpki::EndEntityCert::try_from(cert) {
                Ok(parsed) => parsed.subject_public_key_info().as_ref().to_vec(),
                Err(_) => return false,
            },
            _ => return false,
        };
        let digest = |algorithm| aws_lc_rs::digest::digest(algorithm, &selected);
        match self.matching {
            0 => selected == self.data,
            1 => digest(&aws_lc_rs::digest::SHA256).as_ref() == self.data.as_slice(),
            2 => digest(&aws_lc_rs::digest::SHA512).as_ref() == self.data.as_slice(),
            _ => false,
        }
    }

    /// A record for a certificate (for tests and for printing our own TLSA records).
    pub fn for_certificate(
        usage: u8,
        selector: u8,
        matching: u8,
        cert: &CertificateDer<'_>,
    ) -> Option<Tlsa> {
        let selected: Vec<u8> = match selector {
            0 => cert.as_ref().to_vec(),
            1 => webpki::EndEntityCert::try_from(cert)
                .ok()?
                .subject_public_key_info()
                .as_ref()
                .to_vec(),
            _ => return None,
        };
        let data = match matching {
            0 => selected,
            1 => aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &selected)
                .as_ref()
                .to_vec(),
            2 => aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA512, &selected)
                .as_ref()
                .to_vec(),
            _ => return None,
        };
        Some(Tlsa {
            usage,
            selector,
            matching,
            data,
        })
    }
}

/// Authenticates an exchanger by its usable TLSA records (RFC 7672 3.1):
/// - DANE-EE (3): the leaf certificate or its key matches; neither its names nor its dates are
///   checked (RFC 7672 3.1.1).
/// - DANE-TA (2): a certificate the server presented after its leaf matches, and the leaf
///   chains to it as the only trust anchor, valid now, for the exchanger's name (RFC 7672
///   3.1.2, 3.2.2; path building and the name check are rustls' WebPKI verifier). A trust
///   anchor published only as a key (2 1 x) must therefore be in the presented chain, which
///   RFC 7672 3.1.2 asks servers to do.
///
/// The handshake's signatures are still checked with the leaf's key.
#[derive(Debug)]
pub struct DaneVerifier {
    /// The TLSA base domain: the exchanger's name (RFC 7672 3.2.2's reference identifier).
    host: ServerName<'static>,
    records: Vec<Tlsa>,
    provider: Arc<CryptoProvider>,
}

impl DaneVerifier {
    /// Unusable records are dropped here.
    pub fn new(host: ServerName<'static>, records: &[Tlsa]) -> DaneVerifier {
        DaneVerifier {
            host,
            records: records.iter().filter(|r| r.usable()).cloned().collect(),
            provider: Arc::new(rustls::crypto::aws_lc_rs::default_provider()),
        }
    }

    /// A client configuration with this verifier.
    pub fn client_config(self) -> rustls::ClientConfig {
        let provider = self.provider.clone();
        match rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
        {
            Ok(builder) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(self))
                .with_no_client_auth(),
            // aws-lc-rs supports the default versions; this arm is never taken.
            Err(_) => rustls::ClientConfig::builder()
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(self))
                .with_no_client_auth(),
        }
    }

    fn verify_by_anchor(
        &self,
        anchor: &CertificateDer<'_>,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(anchor.clone().into_owned())
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
        let verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
                .build()
                .map_err(|e| rustls::Error::General(e.to_string()))?;
        verifier.verify_server_cert(end_entity, intermediates, &self.host, ocsp_response, now)
    }
}

impl ServerCertVerifier for DaneVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // RFC 7672 3.1.1: DANE-EE, the leaf alone.
        let ee = self.records.iter().filter(|r| r.usage == USAGE_DANE_EE);
        if ee.clone().any(|record| record.matches(end_entity)) {
            return Ok(ServerCertVerified::assertion());
        }
        // RFC 7672 3.1.2: DANE-TA, a presented issuer as the trust anchor.
        let mut chain_error = None;
        for anchor in intermediates {
            let ta = self.records.iter().filter(|r| r.usage == USAGE_DANE_TA);
            if !ta.clone().any(|record| record.matches(anchor)) {
                continue;
            }
            match self.verify_by_anchor(anchor, end_entity, intermediates, ocsp_response, now) {
                Ok(verified) => return Ok(verified),
                Err(e) => chain_error = Some(e),
            }
        }
        // A matching anchor whose chain failed says why (expired, wrong name); otherwise no
        // record matched (TLS-RPT `tlsa-invalid`).
        Err(chain_error.unwrap_or(rustls::Error::InvalidCertificate(
            CertificateError::ApplicationVerificationFailure,
        )))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Pki {
        ca: CertificateDer<'static>,
        leaf: CertificateDer<'static>,
        other_leaf: CertificateDer<'static>,
    }

    fn pki(name: &str) -> Pki {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test CA");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .signed_by(&leaf_key, &issuer)
            .unwrap();
        let other_key = rcgen::KeyPair::generate().unwrap();
        let other_leaf = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&other_key)
            .unwrap();
        Pki {
            ca: ca.der().clone(),
            leaf: leaf.der().clone(),
            other_leaf: other_leaf.der().clone(),
        }
    }

    fn verify(
        records: &[Tlsa],
        host: &str,
        leaf: &CertificateDer<'_>,
        chain: &[CertificateDer<'_>],
    ) -> Result<(), rustls::Error> {
        let name = ServerName::try_from(host.to_string()).unwrap();
        DaneVerifier::new(name.clone(), records)
            .verify_server_cert(leaf, chain, &name, &[], UnixTime::now())
            .map(|_| ())
    }

    #[test]
    fn dane_ee_matches_the_leaf_by_certificate_or_key() {
        let pki = pki("mx.example.test");
        for selector in [0, 1] {
            for matching in [0, 1, 2] {
                let record = Tlsa::for_certificate(3, selector, matching, &pki.leaf).unwrap();
                assert!(record.usable());
                assert!(record.matches(&pki.leaf), "3 {selector} {matching}");
                assert!(!record.matches(&pki.other_leaf), "3 {selector} {matching}");
                // No name check for DANE-EE (RFC 7672 3.1.1).
                assert!(
                    verify(
                        std::slice::from_ref(&record),
                        "other.example.test",
                        &pki.leaf,
                        &[]
                    )
                    .is_ok()
                );
                assert_eq!(
                    verify(&[record], "mx.example.test", &pki.other_leaf, &[]),
                    Err(rustls::Error::InvalidCertificate(
                        CertificateError::ApplicationVerificationFailure
                    ))
                );
            }
        }
    }

    #[test]
    fn dane_ta_needs_the_anchor_in_the_chain_and_the_right_name() {
        let pki = pki("mx.example.test");
        for selector in [0, 1] {
            for matching in [1, 2] {
                let record = Tlsa::for_certificate(2, selector, matching, &pki.ca).unwrap();
                let records = [record];
                assert!(
                    verify(
                        &records,
                        "mx.example.test",
                        &pki.leaf,
                        std::slice::from_ref(&pki.ca)
                    )
                    .is_ok()
                );
                // The anchor not presented: nothing to match.
                assert!(verify(&records, "mx.example.test", &pki.leaf, &[]).is_err());
                // The leaf not issued by the anchor.
                assert!(
                    verify(
                        &records,
                        "mx.example.test",
                        &pki.other_leaf,
                        std::slice::from_ref(&pki.ca)
                    )
                    .is_err()
                );
                // RFC 7672 3.1.2: the name is checked under DANE-TA.
                assert!(matches!(
                    verify(
                        &records,
                        "other.example.test",
                        &pki.leaf,
                        std::slice::from_ref(&pki.ca)
                    ),
                    Err(rustls::Error::InvalidCertificate(
                        CertificateError::NotValidForName
                            | CertificateError::NotValidForNameContext { .. }
                    ))
                ));
            }
        }
        // A DANE-TA record for the leaf itself is not an anchor for it.
        let leaf_as_ta = Tlsa::for_certificate(2, 1, 1, &pki.leaf).unwrap();
        assert!(verify(&[leaf_as_ta], "mx.example.test", &pki.leaf, &[]).is_err());
    }

    #[test]
    fn pkix_usages_and_malformed_records_are_unusable() {
        let pki = pki("mx.example.test");
        let mut record = Tlsa::for_certificate(3, 1, 1, &pki.leaf).unwrap();
        assert_eq!(record.to_text().split(' ').count(), 4);
        assert!(record.to_text().starts_with("3 1 1 "));
        for usage in [0, 1, 4] {
            record.usage = usage;
            assert!(!record.usable());
            // Dropped by the verifier: a PKIX-EE record that matches does not authenticate.
            assert!(
                verify(
                    std::slice::from_ref(&record),
                    "mx.example.test",
                    &pki.leaf,
                    &[]
                )
                .is_err()
            );
        }
        let truncated = Tlsa {
            usage: 3,
            selector: 1,
            matching: 1,
            data: vec![0; 31],
        };
        assert!(!truncated.usable());
        let unknown = Tlsa {
            usage: 3,
            selector: 2,
            matching: 1,
            data: vec![0; 32],
        };
        assert!(!unknown.usable());
        assert!(!unknown.matches(&pki.leaf));
        // Garbage instead of a certificate never matches by key.
        let key = Tlsa::for_certificate(3, 1, 1, &pki.leaf).unwrap();
        assert!(!key.matches(&CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x00])));
    }
}
