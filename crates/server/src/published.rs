//! What this server tells clients and other servers about itself (issue 39): the endpoints
//! the autoconfiguration documents name, and the MTA-STS policy (RFC 8461 3.2) it serves.

use crate::config::{MtaSts, ServerConfig};
use crate::service::Service;

/// The client-facing listeners in order of preference: implicit TLS first (RFC 8314 3.1),
/// IMAP before POP3, then submission; with the ports they are bound to (`bound`, which
/// differ from the configured ones only when those ask for any port).
pub(crate) fn endpoints(
    config: &ServerConfig,
    bound: &[(Service, std::net::SocketAddr)],
) -> Vec<autoconfig::Endpoint> {
    use autoconfig::{Protocol, Security};
    const ORDER: [(Service, Protocol, Security); 6] = [
        (Service::Imaps, Protocol::Imap, Security::Tls),
        (Service::Imap, Protocol::Imap, Security::StartTls),
        (Service::Pop3s, Protocol::Pop3, Security::Tls),
        (Service::Pop3, Protocol::Pop3, Security::StartTls),
        (Service::Submissions, Protocol::Submission, Security::Tls),
        (
            Service::Submission,
            Protocol::Submission,
            Security::StartTls,
        ),
    ];
    ORDER
        .iter()
        .filter_map(|(service, protocol, security)| {
            let (_, address) = bound.iter().find(|(s, _)| s == service)?;
            Some(autoconfig::Endpoint {
                protocol: *protocol,
                host: config.hostname.clone(),
                port: address.port(),
                security: *security,
            })
        })
        .collect()
}

/// The policy file we serve at `https://mta-sts.DOMAIN/.well-known/mta-sts.txt`: every
/// domain of ours has the same exchanger, this host.
pub(crate) fn mta_sts_policy(config: &ServerConfig) -> Option<String> {
    let MtaSts { mode, max_age } = config.mta_sts?;
    Some(
        transport_policy::Policy {
            mode,
            mx: vec![config.hostname.clone()],
            max_age: max_age.as_secs(),
        }
        .to_text(),
    )
}

/// Everything the web listeners publish.
pub(crate) fn published(
    config: &ServerConfig,
    bound: &[(Service, std::net::SocketAddr)],
) -> web::Published {
    web::Published {
        hostname: config.hostname.clone(),
        endpoints: endpoints(config, bound),
        mta_sts_policy: mta_sts_policy(config),
    }
}
