//! Reading a certificate chain back: its leaf's names, dates and public key.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{KeyPair, PublicKeyData};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

/// Certificates in one chain: a leaf and its intermediates (Let's Encrypt sends 2, a long
/// cross-signed chain 4).
const CHAIN_CERTIFICATES_MAX: usize = 8;

/// What this crate needs to know of a chain's leaf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Leaf {
    /// subjectAltName DNS names, lowercased, sorted.
    pub(crate) names: Vec<String>,
    pub(crate) not_before: SystemTime,
    pub(crate) not_after: SystemTime,
    /// The DER SubjectPublicKeyInfo.
    pub(crate) public_key_info: Vec<u8>,
}

/// The chain's certificates in order (leaf first), from PEM.
pub(crate) fn parse_chain(chain_pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let mut chain = Vec::new();
    for certificate in CertificateDer::pem_slice_iter(chain_pem.as_bytes()) {
        if chain.len() == CHAIN_CERTIFICATES_MAX {
            return Err(format!(
                "more than {CHAIN_CERTIFICATES_MAX} certificates in the chain"
            ));
        }
        chain.push(certificate.map_err(|error| format!("PEM: {error}"))?);
    }
    if chain.is_empty() {
        return Err("no certificate in the PEM".into());
    }
    Ok(chain)
}

/// The leaf (first certificate) of a chain in PEM.
pub(crate) fn leaf(chain_pem: &str) -> Result<Leaf, String> {
    let chain = parse_chain(chain_pem)?;
    let (_, leaf) = X509Certificate::from_der(chain[0].as_ref())
        .map_err(|error| format!("the leaf certificate: {error}"))?;
    let validity = leaf.validity();
    let mut names = Vec::new();
    if let Some(extension) = leaf
        .subject_alternative_name()
        .map_err(|error| format!("the leaf's subjectAltName: {error}"))?
    {
        for name in &extension.value.general_names {
            if let GeneralName::DNSName(name) = name {
                names.push(name.to_ascii_lowercase());
            }
        }
    }
    names.sort();
    names.dedup();
    Ok(Leaf {
        names,
        not_before: from_unix(validity.not_before.timestamp()),
        not_after: from_unix(validity.not_after.timestamp()),
        public_key_info: leaf.public_key().raw.to_vec(),
    })
}

/// The DER SubjectPublicKeyInfo of a PEM private key, or why it cannot be read.
pub(crate) fn key_public_info(key_pem: &str) -> Result<Vec<u8>, String> {
    let key = KeyPair::from_pem(key_pem).map_err(|error| format!("the private key: {error}"))?;
    Ok(key.subject_public_key_info())
}

/// A certificate date (seconds since 1970, maybe before it) as a `SystemTime`.
fn from_unix(seconds: i64) -> SystemTime {
    // A date SystemTime cannot hold (only a hostile certificate has one) reads as 1970.
    let time = match u64::try_from(seconds) {
        Ok(after) => UNIX_EPOCH.checked_add(Duration::from_secs(after)),
        Err(_) => UNIX_EPOCH.checked_sub(Duration::from_secs(seconds.unsigned_abs())),
    };
    time.unwrap_or(UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, KeyPair};

    use super::*;

    #[test]
    fn the_leaf_is_read_and_matches_its_key() {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["b.example.org".into(), "A.example.org".into()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2030, 1, 2);
        params.not_after = rcgen::date_time_ymd(2030, 4, 2);
        let certificate = params.self_signed(&key).unwrap();
        let leaf = leaf(&certificate.pem()).unwrap();
        assert_eq!(leaf.names, ["a.example.org", "b.example.org"]);
        assert_eq!(
            leaf.not_before,
            UNIX_EPOCH + Duration::from_secs(1_893_542_400)
        );
        assert_eq!(
            leaf.not_after.duration_since(leaf.not_before).unwrap(),
            Duration::from_secs(90 * 86_400)
        );
        assert_eq!(
            leaf.public_key_info,
            key_public_info(&key.serialize_pem()).unwrap()
        );
        let other = KeyPair::generate().unwrap();
        assert_ne!(
            leaf.public_key_info,
            key_public_info(&other.serialize_pem()).unwrap()
        );
    }

    #[test]
    fn bad_pem_is_an_error() {
        assert!(leaf("").is_err());
        assert!(leaf("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").is_err());
        assert!(leaf("-----BEGIN CERTIFICATE-----\nnot base64").is_err());
        assert!(key_public_info("junk").is_err());
    }

    #[test]
    fn dates_before_1970_do_not_panic() {
        assert_eq!(from_unix(-86_400), UNIX_EPOCH - Duration::from_secs(86_400));
    }
}
