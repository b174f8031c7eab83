//! Answering challenges: what the server implements ([`Responder`]) and the TLS-ALPN-01
//! certificate (RFC 8737 3).

use rcgen::{CertificateParams, CustomExtension, DistinguishedName, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::Error;

/// The ALPN protocol of TLS-ALPN-01 (RFC 8737 6.2): a TLS listener that sees it offered must
/// present the challenge certificate for the SNI name, and nothing else.
pub const ACME_TLS_ALPN_PROTOCOL: &[u8] = b"acme-tls/1";

/// How the server publishes challenge answers on its listeners. Calls are quick and
/// infallible: the server keeps the answers in memory until cleared.
pub trait Responder: Send + Sync {
    /// HTTP-01 (RFC 8555 8.3): answer `GET /.well-known/acme-challenge/{token}` on port 80,
    /// whatever the Host, with status 200 and `key_authorization` as the body
    /// (`application/octet-stream`).
    fn put_http01(&self, token: &str, key_authorization: &str);

    /// TLS-ALPN-01 (RFC 8737 3): to a TLS client on port 443 that offers only the ALPN protocol
    /// [`ACME_TLS_ALPN_PROTOCOL`] with SNI `name`, present `certificate` (signed with `key`),
    /// negotiate `acme-tls/1`, and close after the handshake.
    fn put_tls_alpn01(
        &self,
        name: &str,
        certificate: CertificateDer<'static>,
        key: PrivateKeyDer<'static>,
    );

    /// Stop answering the HTTP-01 challenge for `token`.
    fn clear_http01(&self, token: &str);

    /// Stop answering the TLS-ALPN-01 challenge for `name`.
    fn clear_tls_alpn01(&self, name: &str);
}

/// The self-signed certificate that answers a TLS-ALPN-01 challenge for `name` (RFC 8737 3):
/// its only subjectAltName is `name`, and its critical `acmeIdentifier` extension
/// (1.3.6.1.5.5.7.1.31) holds the SHA-256 of `key_authorization`. The key is a new P-256 key,
/// PKCS#8.
pub fn tls_alpn01_certificate(
    name: &str,
    key_authorization: &str,
) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), Error> {
    let digest =
        aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key_authorization.as_bytes());
    let mut params = CertificateParams::new(vec![name.to_owned()]).map_err(|error| {
        Error::Certificate(format!("challenge certificate for {name}: {error}"))
    })?;
    params.distinguished_name = DistinguishedName::new();
    // RFC 8737 3: "The acmeIdentifier extension MUST be marked critical"; rcgen marks it so.
    params.custom_extensions = vec![CustomExtension::new_acme_identifier(digest.as_ref())];
    let key = KeyPair::generate()
        .map_err(|error| Error::Certificate(format!("challenge key: {error}")))?;
    let certificate = params.self_signed(&key).map_err(|error| {
        Error::Certificate(format!("challenge certificate for {name}: {error}"))
    })?;
    Ok((
        certificate.der().clone(),
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    ))
}

/// The answers published for one attempt, withdrawn when it is dropped: on success, on every
/// error, and when the attempt's future is dropped (timed out or cancelled).
pub(crate) struct Published<'a> {
    responder: &'a dyn Responder,
    http01_tokens: Vec<String>,
    tls_alpn01_names: Vec<String>,
}

impl<'a> Published<'a> {
    pub(crate) fn new(responder: &'a dyn Responder) -> Self {
        Self {
            responder,
            http01_tokens: Vec::new(),
            tls_alpn01_names: Vec::new(),
        }
    }

    pub(crate) fn http01(&mut self, token: &str, key_authorization: &str) {
        // Recorded first: a responder that panics after storing the answer is still cleared.
        self.http01_tokens.push(token.to_owned());
        self.responder.put_http01(token, key_authorization);
    }

    pub(crate) fn tls_alpn01(&mut self, name: &str, key_authorization: &str) -> Result<(), Error> {
        let (certificate, key) = tls_alpn01_certificate(name, key_authorization)?;
        self.tls_alpn01_names.push(name.to_owned());
        self.responder.put_tls_alpn01(name, certificate, key);
        Ok(())
    }
}

impl Drop for Published<'_> {
    fn drop(&mut self) {
        for token in &self.http01_tokens {
            self.responder.clear_http01(token);
        }
        for name in &self.tls_alpn01_names {
            self.responder.clear_tls_alpn01(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use x509_parser::prelude::*;

    use super::*;

    /// The OID of `acmeIdentifier` (RFC 8737 6.1): id-pe 31.
    const ACME_IDENTIFIER_OID: &str = "1.3.6.1.5.5.7.1.31";

    #[test]
    fn tls_alpn01_certificate_has_the_name_and_a_critical_digest() {
        let key_authorization = "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA.9jg46WB3rR_AHD-EBXdN7cBkH1WOu0tA3M9fm21mqTI";
        let (certificate, key) =
            tls_alpn01_certificate("mail.example.org", key_authorization).unwrap();
        assert!(matches!(key, PrivateKeyDer::Pkcs8(_)));
        let (rest, parsed) = X509Certificate::from_der(certificate.as_ref()).unwrap();
        assert!(rest.is_empty());

        let names: Vec<String> = parsed
            .subject_alternative_name()
            .unwrap()
            .unwrap()
            .value
            .general_names
            .iter()
            .map(|name| match name {
                GeneralName::DNSName(name) => name.to_string(),
                other => panic!("unexpected SAN {other:?}"),
            })
            .collect();
        assert_eq!(names, ["mail.example.org"]);

        let extension = parsed
            .extensions()
            .iter()
            .find(|extension| extension.oid.to_id_string() == ACME_IDENTIFIER_OID)
            .expect("acmeIdentifier extension");
        assert!(extension.critical);
        // RFC 8737 3: Authorization ::= OCTET STRING (SIZE (32)), DER: 04 20 <digest>.
        let digest =
            aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key_authorization.as_bytes());
        let mut expected = vec![0x04, 0x20];
        expected.extend_from_slice(digest.as_ref());
        assert_eq!(extension.value, expected.as_slice());

        // Self-signed: issuer = subject and the signature verifies with its own key.
        assert_eq!(parsed.issuer(), parsed.subject());
        let spki = parsed.public_key();
        let signed = aws_lc_rs::signature::UnparsedPublicKey::new(
            &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1,
            spki.subject_public_key.data.as_ref(),
        );
        signed
            .verify(
                parsed.tbs_certificate.as_ref(),
                parsed.signature_value.data.as_ref(),
            )
            .unwrap();
    }

    #[test]
    fn a_different_key_authorization_gives_a_different_digest() {
        let (a, _) = tls_alpn01_certificate("mail.example.org", "token-a.thumb").unwrap();
        let (b, _) = tls_alpn01_certificate("mail.example.org", "token-b.thumb").unwrap();
        let digest_of = |der: &CertificateDer<'_>| {
            let (_, parsed) = X509Certificate::from_der(der.as_ref()).unwrap();
            parsed
                .extensions()
                .iter()
                .find(|extension| extension.oid.to_id_string() == ACME_IDENTIFIER_OID)
                .unwrap()
                .value
                .to_vec()
        };
        assert_ne!(digest_of(&a), digest_of(&b));
    }

    #[derive(Default)]
    struct Recorder {
        events: Mutex<Vec<String>>,
    }

    impl Responder for Recorder {
        fn put_http01(&self, token: &str, key_authorization: &str) {
            self.events
                .lock()
                .unwrap()
                .push(format!("put http {token} {key_authorization}"));
        }
        fn put_tls_alpn01(
            &self,
            name: &str,
            _: CertificateDer<'static>,
            _: PrivateKeyDer<'static>,
        ) {
            self.events.lock().unwrap().push(format!("put alpn {name}"));
        }
        fn clear_http01(&self, token: &str) {
            self.events
                .lock()
                .unwrap()
                .push(format!("clear http {token}"));
        }
        fn clear_tls_alpn01(&self, name: &str) {
            self.events
                .lock()
                .unwrap()
                .push(format!("clear alpn {name}"));
        }
    }

    #[test]
    fn published_answers_are_cleared_when_dropped() {
        let recorder = Recorder::default();
        {
            let mut published = Published::new(&recorder);
            published.http01("t1", "t1.thumb");
            published.tls_alpn01("a.example.org", "t2.thumb").unwrap();
        }
        assert_eq!(
            *recorder.events.lock().unwrap(),
            [
                "put http t1 t1.thumb",
                "put alpn a.example.org",
                "clear http t1",
                "clear alpn a.example.org"
            ]
        );
    }
}
