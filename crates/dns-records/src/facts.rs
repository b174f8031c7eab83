//! What the records are made from: the facts of one mail domain and the host that serves it,
//! and the checks that keep a bad fact from turning into a bad zone line.

use std::net::IpAddr;

use crate::Error;

/// The longest TXT value we print (all its strings together): far below the 65535-byte RDATA
/// limit, and roomy for the largest real one, a DKIM key for 4096-bit RSA (about 740 bytes).
pub const TXT_VALUE_BYTES_MAX: usize = 4096;

/// The most DKIM keys, TLSA records or addresses one domain's facts may carry: more is a
/// mistake in the caller, and each one becomes a record and a DNS query when checked.
pub const LIST_LEN_MAX: usize = 32;

/// RFC 1035 2.3.4: a name is at most 255 bytes on the wire, 253 in text without the root dot.
const NAME_BYTES_MAX: usize = 253;

/// RFC 1035 2.3.4: a label is at most 63 bytes.
const LABEL_BYTES_MAX: usize = 63;

/// RFC 8461 3.1: `sts-id = 1*32( ALPHA / DIGIT )`.
const MTA_STS_ID_BYTES_MAX: usize = 32;

/// The records of one mail domain are made from these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    /// The mail domain (`example.org`), with or without the root dot.
    pub domain: String,
    /// Our MX host name, also the host clients connect to (`mail.example.org`).
    pub hostname: String,
    /// The host's public addresses. Empty: no A/AAAA lines, and SPF authorizes `mx`.
    pub addresses: Vec<IpAddr>,
    /// The domain's DKIM keys, each published at `SELECTOR._domainkey.DOMAIN`.
    pub dkim: Vec<DkimKey>,
    /// MTA-STS (RFC 8461) when we serve a policy for the domain.
    pub mta_sts: Option<MtaSts>,
    /// Where TLS reports go (RFC 8460 3, `rua`), e.g. `mailto:tls-reports@example.org`.
    pub tls_rpt_rua: Option<String>,
    pub dmarc: Dmarc,
    /// The client services we offer; those of RFC 6186 we do not offer are published as
    /// "not available".
    pub services: Vec<Service>,
    /// DANE (RFC 7672) records for our SMTP port 25. Empty: DANE does not apply.
    pub tlsa: Vec<Tlsa>,
    /// Whether we serve Thunderbird autoconfig and Microsoft Autodiscover for the domain.
    pub autoconfig: bool,
}

/// One DKIM key as published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DkimKey {
    /// RFC 6376 3.1: one or more labels (`mail2026`, `a.b`).
    pub selector: String,
    /// The TXT value as it is given, e.g. `v=DKIM1; k=ed25519; p=...`.
    pub txt_value: String,
}

/// Our MTA-STS policy (RFC 8461).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MtaSts {
    /// The policy's id (RFC 8461 3.1: 1 to 32 letters and digits); a new id tells senders the
    /// policy changed.
    pub id: String,
    pub mode: MtaStsMode,
}

/// RFC 8461 5: what senders do with the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtaStsMode {
    Enforce,
    Testing,
    /// The policy is being withdrawn (RFC 8461 8.3): its TXT record stays, with a new id.
    None,
}

/// Our DMARC record (RFC 7489 6.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dmarc {
    pub policy: DmarcPolicy,
    /// Where aggregate reports go (`rua`), e.g. `mailto:dmarc-reports@example.org`.
    pub rua: Option<String>,
}

/// RFC 7489 6.3 `p=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmarcPolicy {
    None,
    Quarantine,
    Reject,
}

impl DmarcPolicy {
    /// The tag value.
    pub fn name(self) -> &'static str {
        match self {
            DmarcPolicy::None => "none",
            DmarcPolicy::Quarantine => "quarantine",
            DmarcPolicy::Reject => "reject",
        }
    }
}

/// A client service we offer and its port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Service {
    pub name: ServiceName,
    pub port: u16,
}

/// The client services RFC 6186 and RFC 8314 name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ServiceName {
    /// Message submission over implicit TLS (RFC 8314), usually port 465.
    Submissions,
    /// Message submission with STARTTLS (RFC 6409), usually port 587.
    Submission,
    /// IMAP over implicit TLS, usually port 993.
    Imaps,
    /// IMAP with STARTTLS, usually port 143.
    Imap,
    /// POP3 over implicit TLS, usually port 995.
    Pop3s,
    /// POP3 with STARTTLS, usually port 110.
    Pop3,
}

impl ServiceName {
    /// Every one, in the order the records are printed: implicit TLS before STARTTLS.
    pub const ALL: [ServiceName; 6] = [
        ServiceName::Submissions,
        ServiceName::Submission,
        ServiceName::Imaps,
        ServiceName::Imap,
        ServiceName::Pop3s,
        ServiceName::Pop3,
    ];

    /// The SRV service label without its underscore (`submissions`).
    pub fn label(self) -> &'static str {
        match self {
            ServiceName::Submissions => "submissions",
            ServiceName::Submission => "submission",
            ServiceName::Imaps => "imaps",
            ServiceName::Imap => "imap",
            ServiceName::Pop3s => "pop3s",
            ServiceName::Pop3 => "pop3",
        }
    }

    /// The service a label names (`imaps`), if any.
    pub fn from_label(label: &str) -> Option<ServiceName> {
        ServiceName::ALL
            .into_iter()
            .find(|name| name.label().eq_ignore_ascii_case(label))
    }

    /// Whether the connection starts with TLS (RFC 8314) rather than upgrading with STARTTLS.
    pub fn implicit_tls(self) -> bool {
        matches!(
            self,
            ServiceName::Submissions | ServiceName::Imaps | ServiceName::Pop3s
        )
    }
}

/// One TLSA record (RFC 6698 2.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tlsa {
    /// Certificate usage: 3 is DANE-EE, the one RFC 7672 3.1.1 recommends.
    pub usage: u8,
    /// 0: the whole certificate; 1: its SubjectPublicKeyInfo.
    pub selector: u8,
    /// 0: the data itself; 1: its SHA-256; 2: its SHA-512.
    pub matching: u8,
    /// The association data in hexadecimal (either case).
    pub data_hex: String,
}

impl Tlsa {
    /// The record for usage 3, selector 1, matching 1 (RFC 7672 3.1.1) of a certificate in DER.
    pub fn dane_ee_spki_sha256(cert_der: &[u8]) -> Result<Tlsa, Error> {
        Ok(Tlsa {
            usage: 3,
            selector: 1,
            matching: 1,
            data_hex: crate::tlsa::tlsa_3_1_1(cert_der)?,
        })
    }
}

/// `name` in the form every record uses: lower case, with the root dot. An error when it is
/// not a host name (letters, digits, hyphens, and underscores for service labels).
pub(crate) fn fqdn(what: &'static str, name: &str) -> Result<String, Error> {
    let bare = name.strip_suffix('.').unwrap_or(name);
    let valid = !bare.is_empty()
        && bare.len() <= NAME_BYTES_MAX
        && bare.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= LABEL_BYTES_MAX
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if !valid {
        return Err(Error::InvalidFact {
            what,
            value: shown(name),
        });
    }
    Ok(format!("{}.", bare.to_ascii_lowercase()))
}

/// A TXT value we print: bounded, and one line (control characters would be escaped in the
/// zone but are never what an operator meant).
pub(crate) fn txt_value(what: &'static str, value: &str) -> Result<(), Error> {
    if value.is_empty()
        || value.len() > TXT_VALUE_BYTES_MAX
        || value.chars().any(|c| c.is_control())
    {
        return Err(Error::InvalidFact {
            what,
            value: shown(value),
        });
    }
    Ok(())
}

/// A report address list (`rua`): URIs separated by commas, with nothing that would end the
/// tag (`;`) or the record.
pub(crate) fn report_uri(what: &'static str, value: &str) -> Result<(), Error> {
    let valid = !value.is_empty()
        && value.len() <= TXT_VALUE_BYTES_MAX
        && value.bytes().all(|b| b.is_ascii_graphic() && b != b';')
        && value.split(',').all(|uri| uri.contains(':'));
    if !valid {
        return Err(Error::InvalidFact {
            what,
            value: shown(value),
        });
    }
    Ok(())
}

/// RFC 8461 3.1: `sts-id = 1*32( ALPHA / DIGIT )`.
pub(crate) fn mta_sts_id(value: &str) -> Result<(), Error> {
    if value.is_empty()
        || value.len() > MTA_STS_ID_BYTES_MAX
        || !value.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return Err(Error::InvalidFact {
            what: "MTA-STS id",
            value: shown(value),
        });
    }
    Ok(())
}

/// The association data of a TLSA record, checked and in lower case.
pub(crate) fn tlsa_data(value: &str) -> Result<String, Error> {
    let valid = !value.is_empty()
        && value.len().is_multiple_of(2)
        && value.len() <= TXT_VALUE_BYTES_MAX
        && value.bytes().all(|b| b.is_ascii_hexdigit());
    if !valid {
        return Err(Error::InvalidFact {
            what: "TLSA data",
            value: shown(value),
        });
    }
    Ok(value.to_ascii_lowercase())
}

/// At most [`LIST_LEN_MAX`] items.
pub(crate) fn list_len(what: &'static str, len: usize) -> Result<(), Error> {
    if len > LIST_LEN_MAX {
        return Err(Error::TooMany { what, len });
    }
    Ok(())
}

/// A value as an error message shows it: its first 64 characters, escaped.
pub(crate) fn shown(value: &str) -> String {
    /// How much of a bad value an error message repeats.
    const SHOWN_CHARS_MAX: usize = 64;
    let mut out: String = value
        .chars()
        .take(SHOWN_CHARS_MAX)
        .flat_map(char::escape_debug)
        .collect();
    if value.chars().count() > SHOWN_CHARS_MAX {
        out.push_str("...");
    }
    out
}
