//! The association data of a DANE-EE TLSA record.

use std::fmt::Write as _;

use crate::Error;

/// RFC 7672 3.1.1 (DANE-EE, usage 3) with selector 1 (SubjectPublicKeyInfo) and matching 1
/// (SHA-256), RFC 6698 2.1.2 and 2.1.3: the SHA-256 of the certificate's DER
/// SubjectPublicKeyInfo, in lower-case hexadecimal. Hashing the key rather than the whole
/// certificate keeps the record valid across renewals that keep the key. An error when
/// `cert_der` is not one whole X.509 certificate in DER.
pub fn tlsa_3_1_1(cert_der: &[u8]) -> Result<String, Error> {
    let (rest, cert) = x509_parser::parse_x509_certificate(cert_der)
        .map_err(|err| Error::Certificate(err.to_string()))?;
    if !rest.is_empty() {
        return Err(Error::Certificate(format!(
            "{} bytes after the certificate",
            rest.len()
        )));
    }
    let spki = cert.public_key().raw;
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, spki);
    let mut hex = String::with_capacity(64);
    for byte in digest.as_ref() {
        let _ = write!(hex, "{byte:02x}");
    }
    Ok(hex)
}
