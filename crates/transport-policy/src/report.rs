//! What a TLS-RPT recorder (RFC 8460) needs from a session: the policy that applied and, for a
//! failure, its result type.

use rustls::CertificateError;

/// RFC 8460 4.3: the result types of a failed session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResultType {
    // RFC 8460 4.3.1: negotiation failures.
    StarttlsNotSupported,
    CertificateHostMismatch,
    CertificateExpired,
    CertificateNotTrusted,
    ValidationFailure,
    // RFC 8460 4.3.2.1: DANE.
    TlsaInvalid,
    DnssecInvalid,
    DaneRequired,
    // RFC 8460 4.3.2.2: MTA-STS.
    StsPolicyFetchError,
    StsPolicyInvalid,
    StsWebpkiInvalid,
}

impl ResultType {
    /// The report's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultType::StarttlsNotSupported => "starttls-not-supported",
            ResultType::CertificateHostMismatch => "certificate-host-mismatch",
            ResultType::CertificateExpired => "certificate-expired",
            ResultType::CertificateNotTrusted => "certificate-not-trusted",
            ResultType::ValidationFailure => "validation-failure",
            ResultType::TlsaInvalid => "tlsa-invalid",
            ResultType::DnssecInvalid => "dnssec-invalid",
            ResultType::DaneRequired => "dane-required",
            ResultType::StsPolicyFetchError => "sts-policy-fetch-error",
            ResultType::StsPolicyInvalid => "sts-policy-invalid",
            ResultType::StsWebpkiInvalid => "sts-webpki-invalid",
        }
    }

    /// The result type of a failed TLS handshake under a policy of `kind`.
    ///
    /// Under DANE, a certificate no TLSA record matched is `tlsa-invalid` (RFC 8460 4.3.2.1:
    /// "none of the records in the RRset were found to be valid"); a DANE-TA chain that fails
    /// says why (expired, wrong name). Other handshake errors are `validation-failure`.
    pub fn from_tls_error(error: &rustls::Error, kind: PolicyKind) -> ResultType {
        let rustls::Error::InvalidCertificate(certificate) = error else {
            return ResultType::ValidationFailure;
        };
        match certificate {
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => ResultType::CertificateExpired,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                ResultType::CertificateHostMismatch
            }
            CertificateError::ApplicationVerificationFailure if kind == PolicyKind::Tlsa => {
                ResultType::TlsaInvalid
            }
            CertificateError::UnknownIssuer
            | CertificateError::BadSignature
            | CertificateError::Revoked
            | CertificateError::InvalidPurpose
            | CertificateError::InvalidPurposeContext { .. } => ResultType::CertificateNotTrusted,
            _ => ResultType::ValidationFailure,
        }
    }
}

impl std::fmt::Display for ResultType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// RFC 8460 4.4 `policy-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolicyKind {
    Sts,
    Tlsa,
    NoPolicyFound,
}

impl PolicyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyKind::Sts => "sts",
            PolicyKind::Tlsa => "tlsa",
            PolicyKind::NoPolicyFound => "no-policy-found",
        }
    }
}

/// The policy a session ran under, as a TLS-RPT report names it (RFC 8460 4.4): a recorder
/// counts successes and failures per distinct value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AppliedPolicy {
    pub kind: PolicyKind,
    /// `policy-string`: the STS policy file's lines, or the TLSA records in presentation form.
    pub strings: Vec<String>,
    /// `policy-domain`: the recipient domain.
    pub domain: String,
    /// `mx-host`: the STS policy's `mx` patterns, or the exchanger the TLSA records are for.
    pub mx_host: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustls_errors_map_to_result_types() {
        let cert = |e| rustls::Error::InvalidCertificate(e);
        let sts = PolicyKind::Sts;
        assert_eq!(
            ResultType::from_tls_error(&cert(CertificateError::Expired), sts),
            ResultType::CertificateExpired
        );
        assert_eq!(
            ResultType::from_tls_error(&cert(CertificateError::NotValidForName), sts),
            ResultType::CertificateHostMismatch
        );
        assert_eq!(
            ResultType::from_tls_error(&cert(CertificateError::UnknownIssuer), sts),
            ResultType::CertificateNotTrusted
        );
        assert_eq!(
            ResultType::from_tls_error(
                &cert(CertificateError::ApplicationVerificationFailure),
                PolicyKind::Tlsa
            ),
            ResultType::TlsaInvalid
        );
        assert_eq!(
            ResultType::from_tls_error(
                &cert(CertificateError::ApplicationVerificationFailure),
                sts
            ),
            ResultType::ValidationFailure
        );
        assert_eq!(
            ResultType::from_tls_error(&rustls::Error::HandshakeNotComplete, sts),
            ResultType::ValidationFailure
        );
        assert_eq!(ResultType::DaneRequired.as_str(), "dane-required");
        assert_eq!(PolicyKind::NoPolicyFound.as_str(), "no-policy-found");
    }
}
