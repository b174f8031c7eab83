//! The DNS records that say where reports go: `_smtp._tls` (RFC 8460 3), `_dmarc` (RFC 7489
//! 6.1) and the authorization of an external destination (RFC 7489 7.1).

use std::future::Future;

use hickory_resolver::proto::rr::RData;
use mail_auth::common::parse::TxtRecordParser;
use mail_auth::dmarc::Dmarc;
use mail_auth::mta_sts::{ReportUri, TlsRpt};

/// TXT records kept from one answer: more is no valid answer for any name asked here.
const TXT_RECORDS_MAX: usize = 16;

/// Why a lookup found nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DnsError {
    /// No such name or no TXT record there: the domain asks for nothing.
    NotFound,
    /// DNS could not answer now; try again later.
    Temporary(String),
}

/// A resolver of TXT records (hickory's in the server).
pub trait TxtResolver: Send + Sync {
    /// The TXT records at `name`, each one's strings joined (RFC 8460 3, RFC 7489 6.1).
    fn txt(&self, name: &str) -> impl Future<Output = Result<Vec<String>, DnsError>> + Send;
}

impl TxtResolver for hickory_resolver::TokioResolver {
    async fn txt(&self, name: &str) -> Result<Vec<String>, DnsError> {
        let fqdn = format!("{}.", name.trim_end_matches('.'));
        match self.txt_lookup(fqdn.as_str()).await {
            Ok(lookup) => Ok(lookup
                .answers()
                .iter()
                .filter_map(|record| match &record.data {
                    RData::TXT(txt) => Some(
                        txt.txt_data
                            .iter()
                            .map(|part| String::from_utf8_lossy(part))
                            .collect::<String>(),
                    ),
                    _ => None,
                })
                .take(TXT_RECORDS_MAX)
                .collect()),
            Err(e) if e.is_nx_domain() || e.is_no_records_found() => Err(DnsError::NotFound),
            Err(e) => Err(DnsError::Temporary(e.to_string())),
        }
    }
}

/// The one record of `records` that starts with `version` (case-insensitive, then `;`, space
/// or the end), if exactly one does: RFC 8460 3 and RFC 7489 6.6.3 discard the others, and
/// more than one is none.
fn the_record<'a>(records: &'a [String], version: &str) -> Option<&'a str> {
    let mut found = records.iter().filter(|record| {
        let record = record.trim_start();
        record.len() >= version.len()
            && record[..version.len()].eq_ignore_ascii_case(version)
            && record[version.len()..]
                .chars()
                .next()
                .is_none_or(|c| c == ';' || c.is_whitespace())
    });
    let first = found.next()?;
    found.next().is_none().then_some(first.as_str())
}

/// A `mailto:` destination and the largest report it takes (0: any).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Destination {
    pub address: String,
    pub size_max: usize,
}

/// RFC 8460 3: the `mailto:` URIs of the domain's `_smtp._tls` record; `https:` ones are
/// not supported (see the crate documentation).
pub(crate) async fn tlsrpt_destinations(
    resolver: &impl TxtResolver,
    domain: &str,
) -> Result<Vec<Destination>, DnsError> {
    let records = resolver.txt(&format!("_smtp._tls.{domain}")).await?;
    let Some(record) = the_record(&records, "v=TLSRPTv1") else {
        return Ok(Vec::new());
    };
    let Ok(parsed) = TlsRpt::parse(record.as_bytes()) else {
        return Ok(Vec::new());
    };
    Ok(parsed
        .rua
        .into_iter()
        .filter_map(|uri| match uri {
            ReportUri::Mail(address) => Some(Destination {
                address,
                size_max: 0,
            }),
            ReportUri::Http(_) => None,
        })
        .filter(|d| plausible_address(&d.address))
        .collect())
}

/// RFC 7489 7.2: the `rua` of the domain's `_dmarc` record, each outside the domain verified
/// as RFC 7489 7.1 asks.
pub(crate) async fn dmarc_destinations(
    resolver: &impl TxtResolver,
    domain: &str,
) -> Result<Vec<Destination>, DnsError> {
    let records = resolver.txt(&format!("_dmarc.{domain}")).await?;
    let Some(record) = the_record(&records, "v=DMARC1") else {
        return Ok(Vec::new());
    };
    let Ok(parsed) = Dmarc::parse(record.as_bytes()) else {
        return Ok(Vec::new());
    };
    let mut destinations = Vec::new();
    for uri in parsed.rua {
        if !plausible_address(&uri.uri) {
            continue;
        }
        let Some((_, rua_domain)) = uri.uri.rsplit_once('@') else {
            continue;
        };
        if !related(domain, rua_domain) && !external_allowed(resolver, domain, rua_domain).await? {
            continue;
        }
        destinations.push(Destination {
            address: uri.uri,
            size_max: uri.max_size,
        });
    }
    Ok(destinations)
}

/// RFC 7489 7.1: a destination in another organization takes reports about `domain` only if
/// it says so with a `v=DMARC1` record at `DOMAIN._report._dmarc.RUADOMAIN`.
async fn external_allowed(
    resolver: &impl TxtResolver,
    domain: &str,
    rua_domain: &str,
) -> Result<bool, DnsError> {
    match resolver
        .txt(&format!("{domain}._report._dmarc.{rua_domain}"))
        .await
    {
        Ok(records) => Ok(records
            .iter()
            .any(|r| the_record(std::slice::from_ref(r), "v=DMARC1").is_some())),
        Err(DnsError::NotFound) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether two domains are of one organization as far as we can tell without the Public
/// Suffix List: the same, or one under the other. A destination that is neither is verified
/// (RFC 7489 7.1); without the list, some destinations of the same organization (a sibling
/// domain) are verified too, which costs them only a record.
fn related(domain: &str, other: &str) -> bool {
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    let other = other.trim_end_matches('.').to_ascii_lowercase();
    let under = |a: &str, b: &str| a.strip_suffix(b).is_some_and(|rest| rest.ends_with('.'));
    domain == other || under(&domain, &other) || under(&other, &domain)
}

/// An address we can put in To: one `@`, nothing mail-builder would have to quote.
fn plausible_address(address: &str) -> bool {
    address.len() <= 254
        && address.matches('@').count() == 1
        && !address.starts_with('@')
        && !address.ends_with('@')
        && !address
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "<>,;\"()[]\\".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_record_of_the_version_counts() {
        let records = |r: &[&str]| r.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let one = records(&["other", "v=TLSRPTv1; rua=mailto:a@b.example"]);
        assert_eq!(
            the_record(&one, "v=TLSRPTv1"),
            Some("v=TLSRPTv1; rua=mailto:a@b.example")
        );
        let two = records(&["v=TLSRPTv1; rua=mailto:a@b", "v=tlsrptv1;rua=mailto:c@d"]);
        assert_eq!(the_record(&two, "v=TLSRPTv1"), None);
        assert_eq!(the_record(&records(&["v=TLSRPTv10"]), "v=TLSRPTv1"), None);
        assert_eq!(
            the_record(&records(&["v=DMARC1"]), "v=DMARC1"),
            Some("v=DMARC1")
        );
    }

    #[test]
    fn related_domains_are_the_same_or_one_under_the_other() {
        assert!(related("example.com", "EXAMPLE.com."));
        assert!(related("mail.example.com", "example.com"));
        assert!(related("example.com", "reports.example.com"));
        assert!(!related("example.com", "badexample.com"));
        assert!(!related("example.com", "example.net"));
    }

    #[test]
    fn addresses_that_cannot_be_put_in_to_are_skipped() {
        assert!(plausible_address("dmarc+x@example.com"));
        assert!(!plausible_address("a@b@c"));
        assert!(!plausible_address("a <b>@c"));
        assert!(!plausible_address("@c"));
        assert!(!plausible_address("a\r\nBcc: x@y"));
    }
}
