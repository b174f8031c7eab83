//! [`Lookup`] over hickory-resolver: name servers by address and port, or the system's.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolveHosts, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::{Name, RData, RecordType};

use crate::Error;
use crate::check::{Answer, Lookup};
use crate::records::Kind;

/// How long one query waits for a name server.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// How many times one query is sent at most (a lost UDP datagram costs one retry).
pub const QUERY_TRIES_MAX: usize = 2;

/// Asks DNS through hickory-resolver. Answers are cached for their TTL: make a new one for
/// each check, so a record just published is seen.
pub struct HickoryLookup {
    resolver: TokioResolver,
}

impl HickoryLookup {
    /// Asks `nameservers` (`ip:port`, over UDP, and TCP for answers too long for UDP: RFC
    /// 7766); empty: the system's, from /etc/resolv.conf. The hosts file is never read: the
    /// check is about what DNS publishes. Each query waits [`QUERY_TIMEOUT`].
    pub fn new(nameservers: &[SocketAddr]) -> Result<HickoryLookup, Error> {
        HickoryLookup::with_timeout(nameservers, QUERY_TIMEOUT)
    }

    /// As [`HickoryLookup::new`], each query waiting `timeout` (for each of
    /// [`QUERY_TRIES_MAX`] tries).
    pub fn with_timeout(
        nameservers: &[SocketAddr],
        timeout: Duration,
    ) -> Result<HickoryLookup, Error> {
        let mut builder = if nameservers.is_empty() {
            TokioResolver::builder_tokio().map_err(|err| Error::Dns(err.to_string()))?
        } else {
            let servers = nameservers
                .iter()
                .map(|server| {
                    let mut udp = ConnectionConfig::udp();
                    udp.port = server.port();
                    let mut tcp = ConnectionConfig::tcp();
                    tcp.port = server.port();
                    NameServerConfig::new(server.ip(), true, vec![udp, tcp])
                })
                .collect();
            TokioResolver::builder_with_config(
                ResolverConfig::from_name_servers(servers),
                TokioRuntimeProvider::default(),
            )
        };
        let options = builder.options_mut();
        options.timeout = timeout;
        // hickory's `attempts` counts the retries after the first try.
        options.attempts = QUERY_TRIES_MAX - 1;
        options.use_hosts_file = ResolveHosts::Never;
        let resolver = builder.build().map_err(|err| Error::Dns(err.to_string()))?;
        Ok(HickoryLookup { resolver })
    }

    /// Asks through a resolver configured elsewhere (the server's own).
    pub fn from_resolver(resolver: TokioResolver) -> HickoryLookup {
        HickoryLookup { resolver }
    }
}

impl Lookup for HickoryLookup {
    async fn query(&self, name: &str, kind: Kind) -> Answer {
        let record_type = match kind {
            Kind::Mx => RecordType::MX,
            Kind::Txt => RecordType::TXT,
            Kind::Srv => RecordType::SRV,
            Kind::Cname => RecordType::CNAME,
            Kind::Tlsa => RecordType::TLSA,
            Kind::A => RecordType::A,
            Kind::Aaaa => RecordType::AAAA,
        };
        let name = match Name::from_ascii(name) {
            Ok(name) => name,
            Err(err) => return Answer::Failed(format!("not a name: {err}")),
        };
        let lookup = match self.resolver.lookup(name, record_type).await {
            Ok(lookup) => lookup,
            Err(err) if err.is_nx_domain() || err.is_no_records_found() => {
                return Answer::NoRecords;
            }
            Err(err) => return Answer::Failed(err.to_string()),
        };
        let found: Vec<String> = lookup
            .answers()
            .iter()
            .filter(|record| record.record_type() == record_type)
            .filter_map(|record| presentation(&record.data))
            .collect();
        if found.is_empty() {
            Answer::NoRecords
        } else {
            Answer::Records(found)
        }
    }
}

/// The presentation form [`Lookup::query`] promises.
fn presentation(data: &RData) -> Option<String> {
    Some(match data {
        RData::MX(mx) => format!("{} {}", mx.preference, name(&mx.exchange)),
        RData::TXT(txt) => {
            // RFC 7208 3.3, RFC 6376 3.6.2.2: the strings are joined without separators.
            let bytes: Vec<u8> = txt
                .txt_data
                .iter()
                .flat_map(|s| s.iter().copied())
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        RData::SRV(srv) => format!(
            "{} {} {} {}",
            srv.priority,
            srv.weight,
            srv.port,
            name(&srv.target)
        ),
        RData::CNAME(cname) => name(&cname.0),
        RData::TLSA(tlsa) => {
            let mut value = format!(
                "{} {} {} ",
                u8::from(tlsa.cert_usage),
                u8::from(tlsa.selector),
                u8::from(tlsa.matching)
            );
            for byte in &tlsa.cert_data {
                let _ = write!(value, "{byte:02x}");
            }
            value
        }
        RData::A(a) => a.0.to_string(),
        RData::AAAA(aaaa) => aaaa.0.to_string(),
        _ => return None,
    })
}

/// A name lower case, with the root dot.
fn name(name: &Name) -> String {
    let text = name.to_ascii().to_ascii_lowercase();
    if text.ends_with('.') {
        text
    } else {
        format!("{text}.")
    }
}
