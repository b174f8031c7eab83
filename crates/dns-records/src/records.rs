//! The records a mail domain publishes, made from its [`Facts`].

use std::fmt;
use std::net::IpAddr;

use crate::Error;
use crate::facts::{self, Facts, MtaStsMode, ServiceName};

/// One record to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The owner name: lower case, fully qualified, with the root dot (`_dmarc.example.org.`).
    pub name: String,
    pub kind: Kind,
    /// The data in presentation form (`10 mail.example.org.`), names with the root dot. A TXT
    /// value is its text itself, unquoted and whole; [`crate::zone_text`] quotes it and splits
    /// it into strings of at most 255 bytes.
    pub value: String,
    /// What it is for, in a few words (the zone text's comment).
    pub purpose: &'static str,
    /// What the record is, which decides how [`crate::check`] compares it with DNS.
    pub role: Role,
}

/// The record types we publish.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Mx,
    Txt,
    Srv,
    Cname,
    Tlsa,
    A,
    Aaaa,
}

impl Kind {
    /// The type's mnemonic (RFC 1035 3.2.2 and the RFCs that add types).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Mx => "MX",
            Kind::Txt => "TXT",
            Kind::Srv => "SRV",
            Kind::Cname => "CNAME",
            Kind::Tlsa => "TLSA",
            Kind::A => "A",
            Kind::Aaaa => "AAAA",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a record is for, as far as checking it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// The domain's MX: passes when our host is among the exchangers.
    Mx,
    /// The domain's SPF record, authorizing our host (lower case, with the root dot) and its
    /// addresses (empty: as the domain's MX).
    Spf {
        host: String,
        addresses: Vec<IpAddr>,
    },
    /// A DKIM key record: passes when its `p=` is ours.
    Dkim,
    /// The DMARC record: passes when there is exactly one and it parses.
    Dmarc,
    /// The MTA-STS TXT record: passes with our policy id.
    MtaSts,
    /// The TLS-RPT record: passes when its `rua` holds ours.
    TlsRpt,
    /// An SRV record: passes when one answer has our target and port.
    Srv,
    /// A name that must lead to our host: a CNAME to it, or the same addresses.
    Alias,
    /// A TLSA record: passes when one answer equals it.
    Tlsa,
    /// One of our host's addresses: passes when DNS answers it.
    Address,
}

/// Purposes, which also group the zone text's lines.
const PURPOSE_MX: &str = "Mail exchanger: where mail for the domain is delivered (RFC 5321 5.1)";
const PURPOSE_ADDRESS: &str = "The mail host's addresses";
const PURPOSE_SPF: &str = "SPF: the hosts that may send mail from the domain (RFC 7208)";
const PURPOSE_DKIM: &str =
    "DKIM public key: receivers verify our signatures with it (RFC 6376 3.6)";
const PURPOSE_DMARC: &str = "DMARC policy and where aggregate reports go (RFC 7489 6)";
const PURPOSE_MTA_STS: &str =
    "MTA-STS: senders must use TLS to us; the mta-sts name serves the policy (RFC 8461 3)";
const PURPOSE_MTA_STS_TESTING: &str =
    "MTA-STS in testing mode: senders report TLS failures but still deliver (RFC 8461 3)";
const PURPOSE_MTA_STS_NONE: &str = "MTA-STS withdrawn (mode none): keep these until senders' cached policies expire (RFC 8461 8.3)";
const PURPOSE_TLS_RPT: &str = "TLS-RPT: where senders report TLS failures (RFC 8460 3)";
const PURPOSE_SRV: &str =
    "Client services: mail clients find host and port here (RFC 6186, RFC 8314 for submissions)";
const PURPOSE_AUTOCONFIG: &str =
    "Client autoconfiguration: Thunderbird autoconfig and Microsoft Autodiscover";
const PURPOSE_TLSA: &str =
    "DANE: the key of our SMTP server, for senders that check it (RFC 7672 3.1)";

/// RFC 6186 3.4: a client compares priorities across the implicit-TLS and STARTTLS records
/// of one service; RFC 8314 prefers implicit TLS, so those get the lower number.
const SRV_PRIORITY_IMPLICIT_TLS: u16 = 0;
const SRV_PRIORITY_STARTTLS: u16 = 10;

/// Every record the domain in `facts` must publish, grouped by purpose: MX, the host's
/// addresses, SPF, DKIM, DMARC, MTA-STS, TLS-RPT, the client services, autoconfiguration,
/// TLSA. An error when a fact could not make a valid record (a name that is not a host name,
/// a selector, id or report address that would break its record).
///
/// SPF ends in `~all` (softfail), not `-all`: the DMARC policy is what asks receivers to
/// refuse, and it judges DKIM as well, so mail forwarded with its signature intact still
/// passes; a receiver that refused on an SPF `-all` alone would refuse it before DMARC is
/// evaluated (RFC 7489 10.1). With the host's addresses known, SPF lists them (`ip4:`,
/// `ip6:`), which costs receivers no DNS lookup (RFC 7208 4.6.4); without, it names `mx`.
pub fn records(facts: &Facts) -> Result<Vec<Record>, Error> {
    let domain = facts::fqdn("domain", &facts.domain)?;
    let host = facts::fqdn("host name", &facts.hostname)?;
    facts::list_len("addresses", facts.addresses.len())?;
    facts::list_len("DKIM keys", facts.dkim.len())?;
    facts::list_len("TLSA records", facts.tlsa.len())?;
    let mut out = Vec::new();
    let mut push = |name: String, kind, value: String, purpose, role| {
        out.push(Record {
            name,
            kind,
            value,
            purpose,
            role,
        })
    };

    // RFC 5321 5.1; one MX, so its preference is arbitrary.
    push(
        domain.clone(),
        Kind::Mx,
        format!("10 {host}"),
        PURPOSE_MX,
        Role::Mx,
    );
    for address in &facts.addresses {
        let kind = match address {
            IpAddr::V4(_) => Kind::A,
            IpAddr::V6(_) => Kind::Aaaa,
        };
        push(
            host.clone(),
            kind,
            address.to_string(),
            PURPOSE_ADDRESS,
            Role::Address,
        );
    }

    push(
        domain.clone(),
        Kind::Txt,
        spf_value(&facts.addresses),
        PURPOSE_SPF,
        Role::Spf {
            host: host.clone(),
            addresses: facts.addresses.clone(),
        },
    );

    for key in &facts.dkim {
        // RFC 6376 3.6.2.1: the key lives at SELECTOR._domainkey.DOMAIN.
        let name = facts::fqdn(
            "DKIM selector",
            &format!("{}._domainkey.{domain}", key.selector),
        )?;
        facts::txt_value("DKIM record", &key.txt_value)?;
        push(
            name,
            Kind::Txt,
            key.txt_value.clone(),
            PURPOSE_DKIM,
            Role::Dkim,
        );
    }

    // RFC 7489 6.3: v first, then p.
    let mut dmarc = format!("v=DMARC1; p={}", facts.dmarc.policy.name());
    if let Some(rua) = &facts.dmarc.rua {
        facts::report_uri("DMARC rua", rua)?;
        dmarc.push_str(&format!("; rua={rua}"));
    }
    push(
        format!("_dmarc.{domain}"),
        Kind::Txt,
        dmarc,
        PURPOSE_DMARC,
        Role::Dmarc,
    );

    if let Some(mta_sts) = &facts.mta_sts {
        facts::mta_sts_id(&mta_sts.id)?;
        let purpose = match mta_sts.mode {
            MtaStsMode::Enforce => PURPOSE_MTA_STS,
            MtaStsMode::Testing => PURPOSE_MTA_STS_TESTING,
            MtaStsMode::None => PURPOSE_MTA_STS_NONE,
        };
        // RFC 8461 3.1: the TXT record at _mta-sts.DOMAIN says a policy exists and its id.
        let value = format!("v=STSv1; id={}", mta_sts.id);
        push(
            format!("_mta-sts.{domain}"),
            Kind::Txt,
            value,
            purpose,
            Role::MtaSts,
        );
        // RFC 8461 3.2: the policy is fetched from https://mta-sts.DOMAIN/.well-known/...
        let policy_host = format!("mta-sts.{domain}");
        if policy_host != host {
            push(policy_host, Kind::Cname, host.clone(), purpose, Role::Alias);
        }
    }

    if let Some(rua) = &facts.tls_rpt_rua {
        facts::report_uri("TLS-RPT rua", rua)?;
        // RFC 8460 3: the record at _smtp._tls.DOMAIN.
        let value = format!("v=TLSRPTv1; rua={rua}");
        push(
            format!("_smtp._tls.{domain}"),
            Kind::Txt,
            value,
            PURPOSE_TLS_RPT,
            Role::TlsRpt,
        );
    }

    for name in ServiceName::ALL {
        let offered: Vec<_> = facts.services.iter().filter(|s| s.name == name).collect();
        let value = match offered.as_slice() {
            [] => "0 0 0 .".to_string(), // RFC 6186 4: target "." says "not available".
            [service] if service.port != 0 => {
                let priority = if name.implicit_tls() {
                    SRV_PRIORITY_IMPLICIT_TLS
                } else {
                    SRV_PRIORITY_STARTTLS
                };
                format!("{priority} 1 {} {host}", service.port)
            }
            _ => {
                return Err(Error::InvalidFact {
                    what: "service (listed twice or on port 0)",
                    value: name.label().to_string(),
                });
            }
        };
        let owner = format!("_{}._tcp.{domain}", name.label());
        push(owner, Kind::Srv, value, PURPOSE_SRV, Role::Srv);
    }

    if facts.autoconfig {
        for label in ["autoconfig", "autodiscover"] {
            let alias = format!("{label}.{domain}");
            if alias != host {
                push(
                    alias,
                    Kind::Cname,
                    host.clone(),
                    PURPOSE_AUTOCONFIG,
                    Role::Alias,
                );
            }
        }
        // Autodiscover's SRV form, which Outlook tries when autodiscover.DOMAIN fails.
        let value = format!("0 0 443 {host}");
        let owner = format!("_autodiscover._tcp.{domain}");
        push(owner, Kind::Srv, value, PURPOSE_AUTOCONFIG, Role::Srv);
    }

    for tlsa in &facts.tlsa {
        let data = facts::tlsa_data(&tlsa.data_hex)?;
        // RFC 7672 2.2.3: the TLSA records of an MX host are at _25._tcp.HOST.
        let value = format!("{} {} {} {data}", tlsa.usage, tlsa.selector, tlsa.matching);
        push(
            format!("_25._tcp.{host}"),
            Kind::Tlsa,
            value,
            PURPOSE_TLSA,
            Role::Tlsa,
        );
    }
    Ok(out)
}

/// The SPF record authorizing our host (RFC 7208 5.6, 5.4).
fn spf_value(addresses: &[IpAddr]) -> String {
    if addresses.is_empty() {
        return "v=spf1 mx ~all".to_string();
    }
    let mut value = "v=spf1".to_string();
    for address in addresses {
        match address {
            IpAddr::V4(v4) => value.push_str(&format!(" ip4:{v4}")),
            IpAddr::V6(v6) => value.push_str(&format!(" ip6:{v6}")),
        }
    }
    value.push_str(" ~all");
    value
}
