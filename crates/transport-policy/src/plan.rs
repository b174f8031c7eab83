//! The decision: for a recipient domain, its exchangers with their DANE status and its MTA-STS
//! policy (`Planner::plan`), then for one exchanger what TLS the session must have
//! (`Planner::requirement`) and the rustls configuration that gives it
//! (`Planner::client_config`).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hickory_proto::rr::{RData, RecordType};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use crate::cache::{CachedPolicy, StsCache};
use crate::dane::{DaneVerifier, TLSA_RECORDS_MAX, Tlsa};
use crate::dns::Dns;
use crate::fetch::Fetcher;
use crate::report::{AppliedPolicy, PolicyKind, ResultType};
use crate::sts::{Mode, txt_policy_id};

/// Default for [`Config::policies_cached_max`]: recipient domains whose MTA-STS policy is
/// cached at most (a few hundred bytes each).
pub const POLICIES_CACHED_MAX: usize = 10_000;
/// Exchangers of one domain planned at most (delivery tries at most five, RFC 5321 5.1).
pub const MX_HOSTS_MAX: usize = 5;
/// Addresses of a policy host tried at most.
const POLICY_HOST_ADDRESSES_MAX: usize = 2;

/// What the operator chooses (`[delivery]` in the configuration file).
#[derive(Clone, Debug)]
pub struct Config {
    /// Fetch, cache and apply recipient domains' MTA-STS policies (RFC 8461). Default: on.
    pub mta_sts: bool,
    /// Authenticate exchangers by DNSSEC-validated TLSA records (RFC 7672). Default: on. It
    /// needs a validating resolver that sets the AD bit; through one that does not, nothing is
    /// secure and DANE never applies.
    pub dane: bool,
    /// Certificates trusted besides the Mozilla roots, for policy hosts and for exchangers
    /// under an MTA-STS policy (a private CA). Default: none.
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// Domains whose policy is cached at most. Default: [`POLICIES_CACHED_MAX`].
    pub policies_cached_max: usize,
    /// Bound on one policy fetch: connect, TLS handshake and response. Default: 20 s.
    pub fetch_timeout: Duration,
    /// Bound on one DNS query to one resolver. Default: 5 s.
    pub dns_timeout: Duration,
    /// The port whose TLSA records are looked up (`_25._tcp.HOST`). Default: 25.
    pub smtp_port: u16,
    /// The policy host's HTTPS port. Default: 443 (another only on test networks).
    pub https_port: u16,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mta_sts: true,
            dane: true,
            extra_roots: Vec::new(),
            policies_cached_max: POLICIES_CACHED_MAX,
            fetch_timeout: Duration::from_secs(20),
            dns_timeout: Duration::from_secs(5),
            smtp_port: 25,
            https_port: 443,
        }
    }
}

impl Config {
    /// Adds every certificate of a PEM file to [`Config::extra_roots`]; how many.
    pub fn add_pem_roots(&mut self, pem: &[u8]) -> Result<usize, Error> {
        use rustls_pki_types::pem::PemObject as _;
        let before = self.extra_roots.len();
        for cert in CertificateDer::pem_slice_iter(pem) {
            self.extra_roots
                .push(cert.map_err(|e| Error::Roots(e.to_string()))?);
        }
        Ok(self.extra_roots.len() - before)
    }
}

/// Why a planner could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("extra roots: {0}")]
    Roots(String),
}

/// A domain's exchangers (RFC 5321 5.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exchangers {
    /// By preference; at most [`MX_HOSTS_MAX`]. Without MX records, the domain itself.
    Hosts(Vec<MxHost>),
    /// RFC 7505: the domain takes no mail.
    NullMx,
    /// NXDOMAIN (permanent).
    NoSuchDomain,
    /// DNS failed now, including a bogus answer for a signed zone (temporary; RFC 7672 2.2
    /// defers).
    Unavailable(String),
}

/// One exchanger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MxHost {
    /// Lowercase, without the final dot.
    pub name: String,
    pub preference: u16,
    pub dane: DaneStatus,
}

/// What DNSSEC says about an exchanger's TLSA records (RFC 7672 2.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DaneStatus {
    /// DANE is off, or the MX RRset, the host's addresses or its TLSA answer are not
    /// DNSSEC-validated (RFC 7672 2.2.1): no DANE.
    Insecure,
    /// Validated: the host has no TLSA records. No DANE.
    NoRecords,
    /// Validated TLSA records, these the usable ones (DANE-TA, DANE-EE).
    Usable(Vec<Tlsa>),
    /// Validated TLSA records, none usable: TLS is still required, without authentication
    /// (RFC 7672 2.2, Postfix's `encrypt`).
    Unusable(Vec<Tlsa>),
    /// The lookup failed for a signed zone (bogus, SERVFAIL): this host cannot be used now.
    Failed(String),
}

/// Everything known about a recipient domain before its sessions.
#[derive(Clone, Debug)]
pub struct DomainPlan {
    /// Lowercase, without the final dot.
    pub domain: String,
    pub exchangers: Exchangers,
    /// The MX RRset (or its absence) was DNSSEC-validated.
    pub mx_secure: bool,
    /// The MTA-STS policy in force (fresh, or cached and unexpired), any mode.
    pub sts: Option<CachedPolicy>,
    /// The policy could not be fetched or was invalid (TLS-RPT reports it under `sts`).
    pub sts_failure: Option<(ResultType, String)>,
}

impl DomainPlan {
    fn host(&self, mx_host: &str) -> Option<&MxHost> {
        let wanted = mx_host.trim_end_matches('.');
        match &self.exchangers {
            Exchangers::Hosts(hosts) => hosts.iter().find(|h| h.name.eq_ignore_ascii_case(wanted)),
            _ => None,
        }
    }

    /// The STS policy that applies (`enforce` or `testing`; `none` is none).
    fn sts_in_force(&self) -> Option<&CachedPolicy> {
        self.sts.as_ref().filter(|c| c.policy.mode != Mode::None)
    }

    /// The policy a session under `requirement` runs under, for TLS-RPT (RFC 8460 4.4).
    pub fn applied_policy(&self, requirement: &Requirement) -> AppliedPolicy {
        let tlsa = |host: &str, records: &[Tlsa]| AppliedPolicy {
            kind: PolicyKind::Tlsa,
            strings: records.iter().map(Tlsa::to_text).collect(),
            domain: self.domain.clone(),
            mx_host: vec![host.to_string()],
        };
        let sts = |cached: Option<&CachedPolicy>| AppliedPolicy {
            kind: PolicyKind::Sts,
            strings: cached
                .map(|c| c.policy.to_text().lines().map(str::to_string).collect())
                .unwrap_or_default(),
            domain: self.domain.clone(),
            mx_host: cached.map(|c| c.policy.mx.clone()).unwrap_or_default(),
        };
        match requirement {
            Requirement::Dane { host, records } | Requirement::Encrypted { host, records } => {
                tlsa(host, records)
            }
            Requirement::Defer {
                host,
                result: ResultType::DnssecInvalid,
                ..
            } => tlsa(host, &[]),
            Requirement::Verified { .. } | Requirement::Skip { .. } | Requirement::Defer { .. } => {
                sts(self.sts_in_force())
            }
            Requirement::Opportunistic if self.sts_failure.is_some() => sts(None),
            Requirement::Opportunistic => AppliedPolicy {
                kind: PolicyKind::NoPolicyFound,
                strings: Vec::new(),
                domain: self.domain.clone(),
                mx_host: Vec::new(),
            },
        }
    }
}

/// The TLS one session to one exchanger must have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// STARTTLS when offered, any certificate; plaintext otherwise (RFC 7435; no policy, an
    /// STS policy in mode `none`).
    Opportunistic,
    /// TLS required, the certificate not authenticated: validated TLSA records exist but none
    /// is usable (RFC 7672 2.2).
    Encrypted { host: String, records: Vec<Tlsa> },
    /// MTA-STS (RFC 8461 4.2): the certificate verified by WebPKI for `server_name`.
    /// `enforce`: without STARTTLS or with a bad certificate the session fails and delivery
    /// defers, never plaintext (RFC 8461 5). Otherwise (`testing`) the session is
    /// opportunistic and [`Planner::check_session`] says what to report; `listed` tells
    /// whether the policy names this exchanger.
    Verified {
        server_name: String,
        enforce: bool,
        listed: bool,
    },
    /// DANE (RFC 7672 3): TLS required, the certificate authenticated by these usable records.
    Dane { host: String, records: Vec<Tlsa> },
    /// Do not use this exchanger: an enforced STS policy does not name it (RFC 8461 4.1).
    Skip { why: String },
    /// Do not deliver through this exchanger now (RFC 7672 2.2: a failed TLSA lookup for a
    /// signed zone); try again later.
    Defer {
        host: String,
        why: String,
        result: ResultType,
    },
}

impl Requirement {
    /// Whether the session must not go on without TLS.
    pub fn tls_required(&self) -> bool {
        matches!(
            self,
            Requirement::Encrypted { .. }
                | Requirement::Dane { .. }
                | Requirement::Verified { enforce: true, .. }
        )
    }
}

/// Plans outbound sessions: owns the DNS client, the policy fetcher and cache, and the TLS
/// client configurations.
pub struct Planner {
    config: Config,
    dns: Dns,
    fetcher: Fetcher,
    cache: Arc<StsCache>,
    opportunistic: Arc<rustls::ClientConfig>,
    verifying: Arc<rustls::ClientConfig>,
    webpki: Arc<WebPkiServerVerifier>,
}

impl Planner {
    /// `resolvers`: validating resolvers whose AD bit is trusted (a local one, RFC 7672 1.3);
    /// `cache_dir`: where the MTA-STS policy cache is kept (`None`: memory only). Trust for
    /// policy hosts and STS exchangers: the Mozilla roots and `config.extra_roots`.
    pub fn new(
        resolvers: Vec<SocketAddr>,
        cache_dir: Option<&Path>,
        config: Config,
    ) -> Result<Planner, Error> {
        let mut roots =
            rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for cert in &config.extra_roots {
            roots
                .add(cert.clone())
                .map_err(|e| Error::Roots(e.to_string()))?;
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let webpki =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots.clone()), provider.clone())
                .build()
                .map_err(|e| Error::Roots(e.to_string()))?;
        let verifying = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Roots(e.to_string()))?
            .with_webpki_verifier(webpki.clone())
            .with_no_client_auth();
        Ok(Planner {
            dns: Dns::new(resolvers, config.dns_timeout),
            fetcher: Fetcher::new(roots, config.fetch_timeout),
            cache: Arc::new(StsCache::open(cache_dir, config.policies_cached_max)),
            opportunistic: Arc::new(opportunistic_tls::client_config()),
            verifying: Arc::new(verifying),
            webpki,
            config,
        })
    }

    /// The MTA-STS policy cache (what `mailstow` shows and what tests inspect).
    pub fn cache(&self) -> &StsCache {
        &self.cache
    }

    /// Looks up what a domain's sessions need: its exchangers with their DANE status, and its
    /// MTA-STS policy.
    pub async fn plan(&self, domain: &str) -> DomainPlan {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        let ((exchangers, mx_secure), (sts, sts_failure)) =
            tokio::join!(self.exchangers(&domain), self.sts(&domain));
        DomainPlan {
            domain,
            exchangers,
            mx_secure,
            sts,
            sts_failure,
        }
    }

    /// What a session to `mx_host` (one of the plan's exchangers) must have.
    ///
    /// DANE takes precedence where it applies (RFC 8461 2); then an STS policy in `enforce`
    /// or `testing`; otherwise opportunistic TLS.
    pub fn requirement(&self, plan: &DomainPlan, mx_host: &str) -> Requirement {
        let host = mx_host.trim_end_matches('.').to_ascii_lowercase();
        if self.config.dane {
            match plan.host(&host).map(|h| &h.dane) {
                Some(DaneStatus::Failed(why)) => {
                    return Requirement::Defer {
                        host,
                        why: why.clone(),
                        result: ResultType::DnssecInvalid,
                    };
                }
                Some(DaneStatus::Usable(records)) => {
                    return Requirement::Dane {
                        host,
                        records: records.clone(),
                    };
                }
                Some(DaneStatus::Unusable(records)) => {
                    return Requirement::Encrypted {
                        host,
                        records: records.clone(),
                    };
                }
                _ => {}
            }
        }
        match plan.sts_in_force() {
            Some(cached) => {
                let listed = cached.policy.allows(&host);
                if cached.policy.mode == Mode::Enforce && !listed {
                    return Requirement::Skip {
                        why: format!("{host} is not an mx of {}'s MTA-STS policy", plan.domain),
                    };
                }
                Requirement::Verified {
                    server_name: host,
                    enforce: cached.policy.mode == Mode::Enforce,
                    listed,
                }
            }
            None => Requirement::Opportunistic,
        }
    }

    /// The client configuration for a session under `requirement`; `None` for `Skip` and
    /// `Defer`, which have no session.
    pub fn client_config(&self, requirement: &Requirement) -> Option<Arc<rustls::ClientConfig>> {
        match requirement {
            Requirement::Opportunistic
            | Requirement::Encrypted { .. }
            | Requirement::Verified { enforce: false, .. } => Some(self.opportunistic.clone()),
            Requirement::Verified { enforce: true, .. } => Some(self.verifying.clone()),
            Requirement::Dane { host, records } => {
                let name = ServerName::try_from(host.clone()).ok()?;
                Some(Arc::new(DaneVerifier::new(name, records).client_config()))
            }
            Requirement::Skip { .. } | Requirement::Defer { .. } => None,
        }
    }

    /// After a session's TLS handshake (or without one: `None`), whether it met the policy;
    /// the failure's TLS-RPT result type otherwise. Meant for `testing` policies, whose
    /// handshake is opportunistic; for the others the handshake itself already decided
    /// (map its error with [`ResultType::from_tls_error`]).
    pub fn check_session(
        &self,
        requirement: &Requirement,
        peer_certificates: Option<&[CertificateDer<'_>]>,
    ) -> Result<(), ResultType> {
        let tls_needed = !matches!(requirement, Requirement::Opportunistic);
        let certs = match peer_certificates {
            Some(certs) if !certs.is_empty() => certs,
            _ if tls_needed => return Err(ResultType::StarttlsNotSupported),
            _ => return Ok(()),
        };
        let now = UnixTime::now();
        let (end_entity, intermediates) = (&certs[0], &certs[1..]);
        match requirement {
            Requirement::Opportunistic | Requirement::Encrypted { .. } => Ok(()),
            Requirement::Verified { listed: false, .. } => Err(ResultType::ValidationFailure),
            Requirement::Verified { server_name, .. } => {
                let name = ServerName::try_from(server_name.clone())
                    .map_err(|_| ResultType::CertificateHostMismatch)?;
                self.webpki
                    .verify_server_cert(end_entity, intermediates, &name, &[], now)
                    .map(|_| ())
                    .map_err(|e| ResultType::from_tls_error(&e, PolicyKind::Sts))
            }
            Requirement::Dane { host, records } => {
                let name =
                    ServerName::try_from(host.clone()).map_err(|_| ResultType::TlsaInvalid)?;
                DaneVerifier::new(name.clone(), records)
                    .verify_server_cert(end_entity, intermediates, &name, &[], now)
                    .map(|_| ())
                    .map_err(|e| ResultType::from_tls_error(&e, PolicyKind::Tlsa))
            }
            Requirement::Skip { .. } => Err(ResultType::ValidationFailure),
            Requirement::Defer { result, .. } => Err(*result),
        }
    }

    /// RFC 5321 5.1 and RFC 7672 2.2: the MX RRset with its DNSSEC status, and for each host of
    /// a validated RRset its TLSA records.
    async fn exchangers(&self, domain: &str) -> (Exchangers, bool) {
        let answer = match self.dns.query(domain, RecordType::MX).await {
            Ok(answer) if answer.nxdomain() => return (Exchangers::NoSuchDomain, answer.authentic),
            Ok(answer) => answer,
            Err(e) => return (Exchangers::Unavailable(e.to_string()), false),
        };
        let secure = answer.authentic;
        let mut hosts: Vec<(u16, String)> = answer
            .records
            .iter()
            .filter_map(|data| match data {
                RData::MX(mx) => Some((
                    mx.preference,
                    mx.exchange
                        .to_ascii()
                        .trim_end_matches('.')
                        .to_ascii_lowercase(),
                )),
                _ => None,
            })
            .collect();
        // RFC 7505: a single MX with the root as exchanger.
        if hosts.len() == 1 && hosts[0].1.is_empty() {
            return (Exchangers::NullMx, secure);
        }
        hosts.retain(|(_, name)| !name.is_empty());
        // RFC 5321 5.1: no MX records, the domain itself (its denial validated or not).
        if hosts.is_empty() {
            hosts.push((0, domain.to_string()));
        }
        hosts.sort_by_key(|(preference, _)| *preference);
        hosts.truncate(MX_HOSTS_MAX);
        let dane_applies = self.config.dane && secure;
        let mut planned = Vec::with_capacity(hosts.len());
        for (preference, name) in hosts {
            let dane = if dane_applies {
                self.dane_status(&name).await
            } else {
                DaneStatus::Insecure
            };
            planned.push(MxHost {
                name,
                preference,
                dane,
            });
        }
        (Exchangers::Hosts(planned), secure)
    }

    /// RFC 7672 2.2: TLSA records count only when the host's address records are validated
    /// too; a failed lookup for a signed zone makes the host unusable now.
    async fn dane_status(&self, host: &str) -> DaneStatus {
        let mut addresses_secure = None;
        for kind in [RecordType::A, RecordType::AAAA] {
            match self.dns.query(host, kind).await {
                Ok(answer) if !answer.records.is_empty() => {
                    addresses_secure = Some(answer.authentic);
                    break;
                }
                Ok(_) => {}
                Err(e) => return DaneStatus::Failed(format!("address of {host}: {e}")),
            }
        }
        if addresses_secure != Some(true) {
            return DaneStatus::Insecure;
        }
        let name = format!("_{}._tcp.{host}", self.config.smtp_port);
        let answer = match self.dns.query(&name, RecordType::TLSA).await {
            Ok(answer) => answer,
            Err(e) => return DaneStatus::Failed(format!("TLSA of {host}: {e}")),
        };
        if !answer.authentic {
            return DaneStatus::Insecure;
        }
        if answer.records.len() > TLSA_RECORDS_MAX {
            return DaneStatus::Failed(format!(
                "{host} has more than {TLSA_RECORDS_MAX} TLSA records"
            ));
        }
        let records: Vec<Tlsa> = answer
            .records
            .iter()
            .filter_map(|data| match data {
                RData::TLSA(tlsa) => Some(Tlsa {
                    usage: u8::from(tlsa.cert_usage),
                    selector: u8::from(tlsa.selector),
                    matching: u8::from(tlsa.matching),
                    data: tlsa.cert_data.clone(),
                }),
                _ => None,
            })
            .collect();
        if records.is_empty() {
            return DaneStatus::NoRecords;
        }
        let usable: Vec<Tlsa> = records.iter().filter(|r| r.usable()).cloned().collect();
        if usable.is_empty() {
            DaneStatus::Unusable(records)
        } else {
            DaneStatus::Usable(usable)
        }
    }

    /// RFC 8461 3 and 5.1: the policy in force for `domain` and, when a fetch failed, why.
    async fn sts(&self, domain: &str) -> (Option<CachedPolicy>, Option<(ResultType, String)>) {
        if !self.config.mta_sts {
            return (None, None);
        }
        let now = unix_now();
        let cached = self.cache.get(domain, now);
        let txt = self
            .dns
            .query(&format!("_mta-sts.{domain}"), RecordType::TXT)
            .await;
        let records: Vec<Vec<u8>> = match &txt {
            Ok(answer) => answer
                .records
                .iter()
                .filter_map(|data| match data {
                    // RFC 8461 3.1: a record's strings are joined.
                    RData::TXT(txt) => Some(txt.txt_data.concat()),
                    _ => None,
                })
                .collect(),
            // The TXT record could not be read now: the cached policy, if any, stays in force.
            Err(_) => return (cached, None),
        };
        let id = match txt_policy_id(&records) {
            Ok(id) => id,
            // RFC 8461 5.1: without a valid TXT record a cached policy is still used.
            Err(_) => return (cached, None),
        };
        if let Some(cached) = &cached
            && cached.id == id
        {
            return (Some(cached.clone()), None);
        }
        // RFC 8461 3.3 and 5.1: a new id (or nothing cached): fetch; a failure keeps the
        // cached policy while it is unexpired.
        match self.fetch(domain).await {
            Ok(policy) => {
                let fresh = CachedPolicy {
                    policy,
                    id,
                    fetched: now,
                };
                self.cache.put(domain, fresh.clone());
                let cache = self.cache.clone();
                let saved = tokio::task::spawn_blocking(move || cache.save()).await;
                if let Ok(Err(e)) = saved {
                    tracing::warn!(error = %e, "MTA-STS policy cache not saved");
                }
                (Some(fresh), None)
            }
            Err((result, why)) => (cached, Some((result, why))),
        }
    }

    async fn fetch(&self, domain: &str) -> Result<crate::sts::Policy, (ResultType, String)> {
        let host = format!("mta-sts.{domain}");
        let mut addresses = Vec::new();
        for kind in [RecordType::A, RecordType::AAAA] {
            if let Ok(answer) = self.dns.query(&host, kind).await {
                addresses.extend(answer.records.iter().filter_map(RData::ip_addr));
            }
        }
        let mut last = (
            ResultType::StsPolicyFetchError,
            format!("{host}: no address"),
        );
        for address in addresses.into_iter().take(POLICY_HOST_ADDRESSES_MAX) {
            match self
                .fetcher
                .fetch(domain, SocketAddr::new(address, self.config.https_port))
                .await
            {
                Ok(policy) => return Ok(policy),
                Err(e) => last = (e.result_type(), format!("{host}: {e}")),
            }
        }
        Err(last)
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sts::Policy;

    fn planner(config: Config) -> Planner {
        Planner::new(Vec::new(), None, config).unwrap()
    }

    fn plan(sts: Option<Mode>, dane: DaneStatus) -> DomainPlan {
        DomainPlan {
            domain: "example.org".into(),
            exchangers: Exchangers::Hosts(vec![MxHost {
                name: "mx.example.org".into(),
                preference: 10,
                dane,
            }]),
            mx_secure: true,
            sts: sts.map(|mode| CachedPolicy {
                policy: Policy {
                    mode,
                    mx: vec!["mx.example.org".into()],
                    max_age: 86400,
                },
                id: "1".into(),
                fetched: 0,
            }),
            sts_failure: None,
        }
    }

    fn ee() -> Tlsa {
        Tlsa {
            usage: 3,
            selector: 1,
            matching: 1,
            data: vec![7; 32],
        }
    }

    #[test]
    fn dane_comes_first_then_sts_then_opportunistic() {
        let planner = planner(Config::default());
        let dane = plan(Some(Mode::Enforce), DaneStatus::Usable(vec![ee()]));
        let requirement = planner.requirement(&dane, "MX.example.org.");
        assert_eq!(
            requirement,
            Requirement::Dane {
                host: "mx.example.org".into(),
                records: vec![ee()]
            }
        );
        assert!(requirement.tls_required());
        assert_eq!(dane.applied_policy(&requirement).kind, PolicyKind::Tlsa);
        assert!(planner.client_config(&requirement).is_some());

        let enforced = plan(Some(Mode::Enforce), DaneStatus::Insecure);
        let requirement = planner.requirement(&enforced, "mx.example.org");
        assert_eq!(
            requirement,
            Requirement::Verified {
                server_name: "mx.example.org".into(),
                enforce: true,
                listed: true
            }
        );
        assert!(requirement.tls_required());
        let applied = enforced.applied_policy(&requirement);
        assert_eq!(applied.kind, PolicyKind::Sts);
        assert_eq!(applied.strings[0], "version: STSv1");
        assert_eq!(applied.mx_host, ["mx.example.org"]);
        assert!(matches!(
            planner.requirement(&enforced, "other.example.net"),
            Requirement::Skip { .. }
        ));
        assert_eq!(
            planner.check_session(&requirement, None),
            Err(ResultType::StarttlsNotSupported)
        );

        let testing = plan(Some(Mode::Testing), DaneStatus::NoRecords);
        let requirement = planner.requirement(&testing, "other.example.net");
        assert_eq!(
            requirement,
            Requirement::Verified {
                server_name: "other.example.net".into(),
                enforce: false,
                listed: false
            }
        );
        assert!(!requirement.tls_required());

        let withdrawn = plan(Some(Mode::None), DaneStatus::Insecure);
        let requirement = planner.requirement(&withdrawn, "mx.example.org");
        assert_eq!(requirement, Requirement::Opportunistic);
        assert_eq!(
            withdrawn.applied_policy(&requirement).kind,
            PolicyKind::NoPolicyFound
        );
        assert_eq!(planner.check_session(&requirement, None), Ok(()));
    }

    #[test]
    fn a_failed_tlsa_lookup_defers_and_unusable_records_still_need_tls() {
        let planner = planner(Config::default());
        let failed = plan(None, DaneStatus::Failed("SERVFAIL".into()));
        let requirement = planner.requirement(&failed, "mx.example.org");
        assert!(matches!(
            requirement,
            Requirement::Defer {
                result: ResultType::DnssecInvalid,
                ..
            }
        ));
        assert!(planner.client_config(&requirement).is_none());
        assert_eq!(failed.applied_policy(&requirement).kind, PolicyKind::Tlsa);

        let pkix = Tlsa { usage: 1, ..ee() };
        let unusable = plan(None, DaneStatus::Unusable(vec![pkix]));
        let requirement = planner.requirement(&unusable, "mx.example.org");
        assert!(matches!(requirement, Requirement::Encrypted { .. }));
        assert!(requirement.tls_required());

        // DANE off: the records are not looked at.
        let off = Planner::new(
            Vec::new(),
            None,
            Config {
                dane: false,
                ..Config::default()
            },
        )
        .unwrap();
        let dane = plan(None, DaneStatus::Usable(vec![ee()]));
        assert_eq!(
            off.requirement(&dane, "mx.example.org"),
            Requirement::Opportunistic
        );
    }

    #[test]
    fn pem_roots_are_read() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["ca.test".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let mut config = Config::default();
        let pem = format!("{}{}", cert.pem(), cert.pem());
        assert_eq!(config.add_pem_roots(pem.as_bytes()).unwrap(), 2);
        assert_eq!(config.add_pem_roots(b"no pem here").unwrap(), 0);
        assert!(Planner::new(Vec::new(), None, config).is_ok());
    }
}
