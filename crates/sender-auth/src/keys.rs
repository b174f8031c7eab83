//! DKIM key pairs: generation, PEM, and the DNS record that publishes the public half.

use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der, PublicKeyX509Der};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair, RsaKeyPair};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::Error;

/// A DKIM signing algorithm, by its key type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// ed25519-sha256 (RFC 8463).
    Ed25519,
    /// rsa-sha256 (RFC 6376 3.3.1, RFC 8301).
    Rsa,
}

impl Algorithm {
    /// The key type as in the DNS record's `k=` tag and in configuration: `ed25519` or `rsa`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ed25519 => "ed25519",
            Algorithm::Rsa => "rsa",
        }
    }
}

impl std::str::FromStr for Algorithm {
    type Err = Error;

    fn from_str(name: &str) -> Result<Algorithm, Error> {
        if name.eq_ignore_ascii_case("ed25519") {
            Ok(Algorithm::Ed25519)
        } else if name.eq_ignore_ascii_case("rsa") {
            Ok(Algorithm::Rsa)
        } else {
            Err(Error::UnknownAlgorithm(name.chars().take(32).collect()))
        }
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A new key pair, ready to store and to publish.
#[derive(Clone, PartialEq, Eq)]
pub struct GeneratedKey {
    pub algorithm: Algorithm,
    /// PKCS#8 v1 PEM ("PRIVATE KEY"), the form `openssl genpkey` writes and `Signer::new` reads.
    pub private_key_pem: String,
    /// The base64 `p=` value of the DNS record.
    pub public_key_b64: String,
}

impl std::fmt::Debug for GeneratedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratedKey")
            .field("algorithm", &self.algorithm)
            .field("private_key_pem", &format_args!("<redacted>"))
            .field("public_key_b64", &self.public_key_b64)
            .finish()
    }
}

/// Bits of a generated RSA key: RFC 8301 3.2 says signers SHOULD use at least 2048, and 2048
/// keeps the DNS record within one UDP answer for most resolvers.
const RSA_KEY_SIZE: KeySize = KeySize::Rsa2048;

/// Generates a key pair: Ed25519 (RFC 8463) or RSA 2048.
pub fn generate(algorithm: Algorithm) -> Result<GeneratedKey, Error> {
    let (pkcs8, public_key) = match algorithm {
        Algorithm::Ed25519 => {
            // v1 (no public key inside) is what OpenSSL writes and reads.
            let pkcs8 = Ed25519KeyPair::generate_pkcs8v1(&SystemRandom::new())
                .map_err(|_| Error::KeyGeneration)?;
            let pair =
                Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).map_err(|_| Error::KeyGeneration)?;
            // RFC 8463 4.2: p= is the bare 32-byte public key, not a SubjectPublicKeyInfo.
            let public_key = pair.public_key().as_ref().to_vec();
            (pkcs8.as_ref().to_vec(), public_key)
        }
        Algorithm::Rsa => {
            let pair = RsaKeyPair::generate(RSA_KEY_SIZE).map_err(|_| Error::KeyGeneration)?;
            let pkcs8: Pkcs8V1Der<'static> = pair.as_der().map_err(|_| Error::KeyGeneration)?;
            // RFC 6376 3.6.1: for k=rsa, p= is a DER SubjectPublicKeyInfo, as OpenSSL writes.
            let spki: PublicKeyX509Der<'static> = pair
                .public_key()
                .as_der()
                .map_err(|_| Error::KeyGeneration)?;
            (pkcs8.as_ref().to_vec(), spki.as_ref().to_vec())
        }
    };
    Ok(GeneratedKey {
        algorithm,
        private_key_pem: pem("PRIVATE KEY", &pkcs8),
        public_key_b64: STANDARD.encode(public_key),
    })
}

/// The TXT record to publish at `<selector>._domainkey.<domain>` (RFC 6376 3.6.1, 3.6.2.1).
pub fn dns_record(algorithm: Algorithm, public_key_b64: &str) -> String {
    format!("v=DKIM1; k={}; p={public_key_b64}", algorithm.name())
}

/// RFC 7468 2: base64 lines of 64 characters between the labels.
fn pem(label: &str, der: &[u8]) -> String {
    let encoded = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    let mut rest = encoded.as_str();
    while !rest.is_empty() {
        let (line, tail) = rest.split_at(rest.len().min(64));
        out.push_str(line);
        out.push('\n');
        rest = tail;
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_names_round_trip() {
        for algorithm in [Algorithm::Ed25519, Algorithm::Rsa] {
            assert_eq!(algorithm.name().parse::<Algorithm>().ok(), Some(algorithm));
        }
        assert_eq!("RSA".parse::<Algorithm>().ok(), Some(Algorithm::Rsa));
        assert!("dsa".parse::<Algorithm>().is_err());
    }

    #[test]
    fn generated_keys_have_the_expected_shapes() -> Result<(), Error> {
        let ed = generate(Algorithm::Ed25519)?;
        assert!(
            ed.private_key_pem
                .starts_with("-----BEGIN PRIVATE KEY-----\n")
        );
        assert!(ed.private_key_pem.ends_with("-----END PRIVATE KEY-----\n"));
        assert_eq!(
            STANDARD
                .decode(&ed.public_key_b64)
                .map(|key| key.len())
                .ok(),
            Some(32)
        );
        let rsa = generate(Algorithm::Rsa)?;
        assert!(rsa.private_key_pem.lines().all(|line| line.len() <= 64));
        // A 2048-bit SubjectPublicKeyInfo is 294 bytes.
        assert_eq!(
            STANDARD
                .decode(&rsa.public_key_b64)
                .map(|key| key.len())
                .ok(),
            Some(294)
        );
        assert_eq!(
            dns_record(Algorithm::Ed25519, "AAAA"),
            "v=DKIM1; k=ed25519; p=AAAA"
        );
        assert!(!format!("{rsa:?}").contains("PRIVATE"));
        Ok(())
    }
}
