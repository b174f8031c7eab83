//! DKIM signing (RFC 6376 5) with mail-auth's signer.

use mail_auth::common::crypto::{
    Algorithm as SignatureAlgorithm, DkimKey, Ed25519Key, RsaKey, Sha256, SigningKey,
};
use mail_auth::common::headers::{HeaderWriter, Writable};
use mail_auth::dkim::{Canonicalization, DkimSigner};
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject;

use crate::headers::has_field;
use crate::{Algorithm, Error};

/// The header fields signed when present (RFC 6376 5.4.1's recommendation, less the
/// Resent-* and List-* fields, which forwarders add). From is always signed, present or not
/// (RFC 6376 5.4: it MUST be).
const SIGNED_FIELDS: [&str; 12] = [
    "From",
    "To",
    "Cc",
    "Subject",
    "Date",
    "Message-ID",
    "Reply-To",
    "In-Reply-To",
    "References",
    "MIME-Version",
    "Content-Type",
    "Content-Transfer-Encoding",
];

/// Signs outgoing mail of one domain with one key.
pub struct Signer {
    key: DkimKey,
    domain: String,
    selector: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("domain", &self.domain)
            .field("selector", &self.selector)
            .field("algorithm", &self.algorithm())
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// A signer for `domain` (the `d=` tag) with the key published at
    /// `<selector>._domainkey.<domain>`. The key is PEM: PKCS#8 ("PRIVATE KEY") for both
    /// algorithms, or PKCS#1 ("RSA PRIVATE KEY") for RSA.
    pub fn new(
        domain: &str,
        selector: &str,
        algorithm: Algorithm,
        private_key_pem: &str,
    ) -> Result<Signer, Error> {
        if !is_dns_name(domain) {
            return Err(Error::InvalidDomain(shown(domain)));
        }
        // RFC 6376 3.1: a selector is one or more labels under _domainkey.
        if !is_dns_name(selector) {
            return Err(Error::InvalidSelector(shown(selector)));
        }
        let der = PrivateKeyDer::from_pem_slice(private_key_pem.as_bytes())
            .map_err(|err| Error::Key(algorithm, err.to_string()))?;
        let key = match (algorithm, der) {
            (Algorithm::Ed25519, PrivateKeyDer::Pkcs8(pkcs8)) => DkimKey::Ed25519(
                Ed25519Key::from_pkcs8_der(pkcs8.secret_pkcs8_der())
                    .map_err(|err| Error::Key(algorithm, err.to_string()))?,
            ),
            (Algorithm::Rsa, der @ (PrivateKeyDer::Pkcs8(_) | PrivateKeyDer::Pkcs1(_))) => {
                DkimKey::Rsa(
                    RsaKey::<Sha256>::from_key_der(der)
                        .map_err(|err| Error::Key(algorithm, err.to_string()))?,
                )
            }
            (_, _) => return Err(Error::Key(algorithm, "unsupported key format".into())),
        };
        Ok(Signer {
            key,
            domain: domain.to_ascii_lowercase(),
            selector: selector.to_ascii_lowercase(),
        })
    }

    pub fn algorithm(&self) -> Algorithm {
        match self.key {
            DkimKey::Ed25519(_) => Algorithm::Ed25519,
            DkimKey::Rsa(_) => Algorithm::Rsa,
        }
    }

    pub fn domain(&self) -> &str {
        &self.domain
    }

    pub fn selector(&self) -> &str {
        &self.selector
    }

    /// The DKIM-Signature header field (name, value, folded, ending in CRLF) to put at the top
    /// of `message` (RFC 5322 bytes, CRLF line ends): relaxed/relaxed canonicalisation
    /// (RFC 6376 3.4), ed25519-sha256 (RFC 8463) or rsa-sha256, over the whole body (no `l=`)
    /// and those of `SIGNED_FIELDS` that the message has (each instance of them).
    pub fn sign(&self, message: &[u8]) -> Result<String, Error> {
        // Signing an absent field would also forbid adding it later (RFC 6376 5.4.2), which
        // breaks mail that a list or forwarder gives a Reply-To or Cc; From is the exception.
        let fields: Vec<&str> = SIGNED_FIELDS
            .iter()
            .copied()
            .filter(|name| *name == "From" || has_field(message, name))
            .collect();
        let signature = DkimSigner::from_key(KeyRef(&self.key))
            .domain(self.domain.as_str())
            .selector(self.selector.as_str())
            .headers(fields)
            .header_canonicalization(Canonicalization::Relaxed)
            .body_canonicalization(Canonicalization::Relaxed)
            .sign(message)
            .map_err(|err| Error::Sign(err.to_string()))?;
        Ok(signature.to_header())
    }
}

/// mail-auth's signer owns its key; this lends it one per message, so the field list can
/// follow the message while the parsed key stays in the `Signer`.
struct KeyRef<'a>(&'a DkimKey);

impl SigningKey for KeyRef<'_> {
    type Hasher = Sha256;

    fn sign(&self, input: impl Writable) -> mail_auth::Result<Vec<u8>> {
        self.0.sign(input)
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        self.0.algorithm()
    }
}

/// Letters, digits, hyphens and dots, in labels of 1 to 63 bytes (RFC 1035 2.3.1), with the
/// underscore DNS allows in practice; nothing that could break out of a tag value.
pub(crate) fn is_dns_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// A bounded, printable rendering of rejected input for an error message.
pub(crate) fn shown(input: &str) -> String {
    input
        .chars()
        .take(64)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate;

    const MESSAGE: &[u8] = b"From: Alice <alice@example.org>\r\nTo: bob@example.net\r\n\
        Subject: hello\r\n\r\nHi Bob.\r\n";

    #[test]
    fn signs_only_the_present_fields_and_always_from() -> Result<(), Error> {
        let key = generate(Algorithm::Ed25519)?;
        let signer = Signer::new(
            "Example.org",
            "s1",
            Algorithm::Ed25519,
            &key.private_key_pem,
        )?;
        let header = signer.sign(MESSAGE)?;
        assert!(header.starts_with(
            "DKIM-Signature: v=1; a=ed25519-sha256; s=s1; d=example.org; c=relaxed/relaxed;"
        ));
        assert!(header.ends_with(";\r\n"));
        let unfolded = header.replace("\r\n\t", " ");
        assert!(unfolded.contains("h=Subject:To:From;"), "{unfolded}");
        let no_from = signer.sign(b"Subject: x\r\n\r\nbody\r\n")?;
        assert!(no_from.replace("\r\n\t", " ").contains("h=Subject:From;"));
        Ok(())
    }

    #[test]
    fn rejects_bad_names_and_mismatched_keys() -> Result<(), Error> {
        let ed = generate(Algorithm::Ed25519)?;
        for (domain, selector) in [
            ("exa mple.org", "s"),
            ("example.org", "s;x=1"),
            ("", "s"),
            ("example.org", ""),
        ] {
            assert!(
                Signer::new(domain, selector, Algorithm::Ed25519, &ed.private_key_pem).is_err()
            );
        }
        assert!(matches!(
            Signer::new("example.org", "s", Algorithm::Rsa, &ed.private_key_pem),
            Err(Error::Key(Algorithm::Rsa, _))
        ));
        assert!(Signer::new("example.org", "s", Algorithm::Ed25519, "garbage").is_err());
        Ok(())
    }
}
