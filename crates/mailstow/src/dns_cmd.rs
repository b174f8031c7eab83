//! `mailstow dns DOMAIN` prints every DNS record a local domain must publish, as zone-file
//! lines; `mailstow dns check DOMAIN` asks DNS for them and reports each one. Both gather the
//! same facts from the configuration and the directory (the `dns-records` crate makes and
//! checks the records):
//!
//! - the host name, the client listeners' ports (SRV records) and whether SMTP listens, the
//!   MTA-STS mode and the name servers come from `[server]`, read as `serve` reads it;
//! - the domain's DKIM keys, every one stored (the newest signs; an older one stays
//!   published until the mail it signed has been delivered), from the directory;
//! - the host's public addresses from `--address`, else from the host name's A and AAAA
//!   records as the configured name servers answer; without any, SPF names `mx`;
//! - TLSA (DANE-EE, 3 1 1) from the certificate the server serves: ACME's once issued
//!   (`<data_dir>/acme/cert.pem`) or `[server] tls_cert`; none for the self-signed one (its
//!   key changes whenever it is regenerated);
//! - DMARC `p=quarantine` with reports to `dmarc-reports@DOMAIN`, TLS-RPT reports to
//!   `tls-reports@DOMAIN`: the two addresses where the server takes reports in.
//!
//! Standard output of `dns` is zone-file text only: records, blank lines and `;` comment
//! lines (anything we know about how the facts were found is a comment). `dns check` prints
//! `dns_records::render_findings`' report (one `VERDICT NAME TYPE` line per record, detail
//! lines indented by two spaces, a summary line last), the notes on standard error, and exits
//! 0 when every record is ok, 1 when any is missing, wrong or unavailable (or the check could
//! not run).

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use dns_records::{
    DkimKey, Dmarc, DmarcPolicy, Facts, HickoryLookup, Kind, LIST_LEN_MAX, Lookup, MtaSts,
    MtaStsMode, Record, Service, ServiceName, Tlsa,
};
use server::{ServerConfig, TlsSource};

use crate::config::Config;
use crate::directory_cmd::with_directory;
use crate::paths::Paths;

/// How many hexadecimal digits of the policy's SHA-256 make its MTA-STS id: 64 bits, so two
/// policies of ours never share an id by chance, and well within RFC 8461 3.1's 32
/// characters.
const MTA_STS_ID_HEX_DIGITS: usize = 16;

/// Our DMARC policy for a domain we set up (RFC 7489 6.3 `p=`). Quarantine rather than
/// reject: while an operator is still getting the records right (a DKIM key not yet
/// published, another host that also sends for the domain and is not in SPF), a mistake
/// sends our mail to receivers' spam folders instead of refusing it outright. Once `dns
/// check` is clean and the aggregate reports show our mail passing, raising it to reject is
/// the operator's step (`dns check` accepts any valid policy, with a note).
const DMARC_POLICY: DmarcPolicy = DmarcPolicy::Quarantine;

/// `mailstow dns DOMAIN` or `mailstow dns check DOMAIN`.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct DnsArgs {
    #[command(subcommand)]
    command: Option<DnsCommand>,
    /// The mail domain: one of ours (`mailstow domain add`).
    #[arg(required = true, value_name = "DOMAIN")]
    domain: Option<String>,
    #[command(flatten)]
    host: HostArgs,
}

#[derive(Subcommand)]
enum DnsCommand {
    /// Ask DNS (`[server] dns_servers`, else the system's resolvers) for every record and
    /// report each: `ok`, `missing`, `wrong` (with the expected value and what was found) or
    /// `unavailable`; exit status 0 when all are ok, 1 otherwise.
    Check {
        /// The mail domain: one of ours.
        #[arg(value_name = "DOMAIN")]
        domain: String,
        #[command(flatten)]
        host: HostArgs,
    },
}

/// The host's public addresses, which the configuration does not hold.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct HostArgs {
    /// A public address of this host (repeat for IPv4 and IPv6): published as the host
    /// name's A/AAAA records and listed in SPF. Default: the host name's addresses in DNS;
    /// none there: SPF authorizes the domain's MX.
    #[arg(long = "address", value_name = "IP")]
    pub(crate) addresses: Vec<IpAddr>,
}

pub(crate) fn run(args: DnsArgs, paths: &Paths, config: &Config) -> Result<()> {
    let server =
        crate::serve_cmd::server_config(&crate::serve_cmd::ServeArgs::default(), paths, config)?;
    match args.command {
        None => {
            let domain = args
                .domain
                .context("give the domain: mailstow dns DOMAIN")?;
            let text = with_directory(paths, async |d| {
                zone_output(&d, &server, &domain, &args.host.addresses).await
            })?;
            out!("{}", text.trim_end());
            Ok(())
        }
        Some(DnsCommand::Check { domain, host }) => {
            let findings = with_directory(paths, async |d| {
                let expected = expected(&d, &server, &domain, &host.addresses).await?;
                for note in &expected.notes {
                    eprintln!("; {note}");
                }
                let lookup = HickoryLookup::new(&server.dns_servers)
                    .context("setting up the DNS resolver")?;
                let lookup = GivingUp::new(lookup);
                Ok(dns_records::check(&lookup, &expected.records).await)
            })?;
            out!("{}", dns_records::render_findings(&findings).trim_end());
            let bad = findings
                .iter()
                .filter(|f| f.verdict != dns_records::Verdict::Ok)
                .count();
            if bad > 0 {
                bail!(
                    "{bad} of {} records of {domain} are missing, wrong or unavailable",
                    findings.len()
                );
            }
            Ok(())
        }
    }
}

/// Failed queries in a row after which [`GivingUp`] stops asking.
const FAILURES_IN_A_ROW_MAX: usize = 2;

/// A lookup that stops asking once [`FAILURES_IN_A_ROW_MAX`] queries in a row have failed:
/// each query to a name server that does not answer waits out its time-outs (10 s with
/// hickory's tries), and checking a domain's twenty records against one would take minutes
/// to say the same thing twenty times. The records not asked are reported unavailable, as
/// the ones asked were.
struct GivingUp<L> {
    lookup: L,
    failures_in_a_row: std::sync::atomic::AtomicUsize,
}

impl<L: Lookup + Sync> GivingUp<L> {
    fn new(lookup: L) -> GivingUp<L> {
        GivingUp {
            lookup,
            failures_in_a_row: std::sync::atomic::AtomicUsize::new(0),
        }
    }
}

impl<L: Lookup + Sync> Lookup for GivingUp<L> {
    async fn query(&self, name: &str, kind: Kind) -> dns_records::Answer {
        use std::sync::atomic::Ordering::Relaxed;
        if self.failures_in_a_row.load(Relaxed) >= FAILURES_IN_A_ROW_MAX {
            return dns_records::Answer::Failed(format!(
                "not asked: the {FAILURES_IN_A_ROW_MAX} queries before failed"
            ));
        }
        let answer = self.lookup.query(name, kind).await;
        if matches!(answer, dns_records::Answer::Failed(_)) {
            self.failures_in_a_row.fetch_add(1, Relaxed);
        } else {
            self.failures_in_a_row.store(0, Relaxed);
        }
        answer
    }
}

/// What `mailstow dns DOMAIN` prints: a heading, the notes, then the records as zone-file
/// lines; every line that is not a record is a `;` comment (or blank).
pub(crate) async fn zone_output(
    d: &directory::Directory,
    server: &ServerConfig,
    domain: &str,
    addresses: &[IpAddr],
) -> Result<String> {
    let expected = expected(d, server, domain, addresses).await?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "; DNS records of {}, served by {} (mailstow dns)",
        expected.domain, server.hostname
    );
    for note in &expected.notes {
        let _ = writeln!(out, "; {note}");
    }
    out.push('\n');
    out.push_str(&dns_records::zone_text(&expected.records));
    Ok(out)
}

/// The records a domain must publish and what the operator should know about them.
pub(crate) struct Expected {
    /// Lower case, without the root dot.
    domain: String,
    records: Vec<Record>,
    /// One line each, without the `; `.
    notes: Vec<String>,
}

/// Gathers the facts of `domain` (see the module documentation) and makes its records.
async fn expected(
    d: &directory::Directory,
    server: &ServerConfig,
    domain: &str,
    addresses: &[IpAddr],
) -> Result<Expected> {
    let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
    if !d.list_domains().await?.contains(&domain) {
        bail!("{domain} is not a local domain (`mailstow domain add {domain}` adds it)");
    }
    let mut notes = Vec::new();

    let mut dkim = Vec::new();
    for key in d
        .dkim_keys()
        .await?
        .into_iter()
        .filter(|k| k.domain == domain)
    {
        let algorithm: sender_auth::Algorithm = key
            .algorithm
            .parse()
            .with_context(|| format!("DKIM key {} of {domain}", key.selector))?;
        dkim.push(DkimKey {
            selector: key.selector.to_ascii_lowercase(),
            txt_value: sender_auth::dns_record(algorithm, &key.public_key),
        });
    }
    if dkim.is_empty() {
        notes.push(format!(
            "no DKIM key for {domain}: `mailstow dkim generate {domain}` makes one, and then \
             its record is listed here"
        ));
    }

    let addresses = if addresses.is_empty() {
        let (found, note) = host_addresses(&server.hostname, &server.dns_servers).await;
        notes.push(note);
        found
    } else {
        addresses.to_vec()
    };

    let mta_sts = server.mta_sts.map(|policy| {
        let text = mta_sts_policy_text(server, policy);
        MtaSts {
            id: mta_sts_id(&text),
            mode: match policy.mode {
                transport_policy::Mode::Enforce => MtaStsMode::Enforce,
                transport_policy::Mode::Testing => MtaStsMode::Testing,
                transport_policy::Mode::None => MtaStsMode::None,
            },
        }
    });
    if server.https.is_none() {
        let served = if mta_sts.is_some() {
            "the MTA-STS policy and the client autoconfiguration documents"
        } else {
            "the client autoconfiguration documents"
        };
        notes.push(format!(
            "{served} (the mta-sts., autoconfig. and autodiscover. names) are served by the \
             https listener, which is off ([server] https)"
        ));
    }

    let services = server
        .listeners
        .iter()
        .filter_map(|(service, address)| {
            let name = match service {
                server::Service::Submissions => ServiceName::Submissions,
                server::Service::Submission => ServiceName::Submission,
                server::Service::Imaps => ServiceName::Imaps,
                server::Service::Imap => ServiceName::Imap,
                server::Service::Pop3s => ServiceName::Pop3s,
                server::Service::Pop3 => ServiceName::Pop3,
                _ => return None,
            };
            Some(Service {
                name,
                port: address.port(),
            })
        })
        .collect();

    let smtp = server
        .listeners
        .iter()
        .any(|(service, _)| *service == server::Service::Smtp);
    let mut tlsa = Vec::new();
    if smtp {
        match served_certificate(server) {
            Served::File(path) => {
                let der = leaf_certificate(&path)?;
                tlsa.push(
                    Tlsa::dane_ee_spki_sha256(&der)
                        .with_context(|| format!("the certificate {}", path.display()))?,
                );
                notes.push(format!(
                    "TLSA: the key of {}; senders use it only when the host's zone is signed \
                     (DNSSEC, RFC 7672 2.2); print the records again after the key changes",
                    path.display()
                ));
            }
            Served::AcmePending(path) => notes.push(format!(
                "no TLSA record yet: ACME has not issued the certificate ({} is absent); \
                 print the records again once `mailstow serve` has obtained it",
                path.display()
            )),
            Served::SelfSigned => notes.push(
                "no TLSA record: the server uses its self-signed certificate, whose key \
                 changes whenever it is regenerated ([acme] or [server] tls_cert for DANE)"
                    .to_string(),
            ),
        }
    }

    let facts = Facts {
        domain: domain.clone(),
        hostname: server.hostname.clone(),
        addresses,
        dkim,
        mta_sts,
        tls_rpt_rua: Some(format!("mailto:tls-reports@{domain}")),
        dmarc: Dmarc {
            policy: DMARC_POLICY,
            rua: Some(format!("mailto:dmarc-reports@{domain}")),
        },
        services,
        tlsa,
        autoconfig: true,
    };
    let records = dns_records::records(&facts)
        .with_context(|| format!("the records of {domain} served by {}", server.hostname))?;
    Ok(Expected {
        domain,
        records,
        notes,
    })
}

/// The host name's addresses as the configured name servers answer, and a note saying so.
async fn host_addresses(hostname: &str, dns_servers: &[SocketAddr]) -> (Vec<IpAddr>, String) {
    let name = format!("{}.", hostname.trim_end_matches('.').to_ascii_lowercase());
    let lookup = match HickoryLookup::new(dns_servers) {
        Ok(lookup) => lookup,
        Err(err) => {
            let note = format!("no --address given and no resolver ({err}): SPF names mx");
            return (Vec::new(), note);
        }
    };
    let (v4, v6) = tokio::join!(
        lookup.query(&name, Kind::A),
        lookup.query(&name, Kind::Aaaa)
    );
    let mut found = Vec::new();
    let mut failures = Vec::new();
    for answer in [v4, v6] {
        match answer {
            dns_records::Answer::Records(values) => found.extend(
                values
                    .iter()
                    .filter_map(|value| value.parse::<IpAddr>().ok()),
            ),
            dns_records::Answer::NoRecords => {}
            dns_records::Answer::Failed(why) => failures.push(why),
        }
    }
    found.truncate(LIST_LEN_MAX);
    let note = match (found.is_empty(), failures.first()) {
        (false, _) => {
            format!("the host's addresses as DNS answers for {name} (--address gives them)")
        }
        (true, None) => format!(
            "no --address given and {name} has no addresses in DNS: SPF names mx; give \
             --address for A/AAAA records"
        ),
        (true, Some(why)) => format!(
            "no --address given and {name} could not be resolved ({why}): SPF names mx; \
             give --address for A/AAAA records"
        ),
    };
    (found, note)
}

/// The policy text the server serves at `https://mta-sts.DOMAIN/.well-known/mta-sts.txt`:
/// exactly what `server`'s `published::mta_sts_policy` makes, every domain with this host
/// as its one exchanger.
fn mta_sts_policy_text(server: &ServerConfig, policy: server::MtaSts) -> String {
    transport_policy::Policy {
        mode: policy.mode,
        mx: vec![server.hostname.clone()],
        max_age: policy.max_age.as_secs(),
    }
    .to_text()
}

/// The MTA-STS policy id (RFC 8461 3.1) of the policy `text` we serve: the first
/// [`MTA_STS_ID_HEX_DIGITS`] hexadecimal digits of its SHA-256. Senders fetch the policy
/// again when the id changes, so it must change whenever the policy does and had better not
/// change otherwise; derived from the text, it does exactly that, with nothing stored and the
/// same on every node of a cluster, and the server need not know it.
pub(crate) fn mta_sts_id(text: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, text.as_bytes());
    let mut id = String::with_capacity(MTA_STS_ID_HEX_DIGITS);
    for byte in digest.as_ref() {
        let _ = write!(id, "{byte:02x}");
    }
    id.truncate(MTA_STS_ID_HEX_DIGITS);
    id
}

/// Which certificate the server serves on its SMTP port, as far as TLSA goes.
enum Served {
    /// A certificate senders can verify, whose key stays across renewals: ACME's (the key
    /// is kept unless `[acme] rotate_key`) or `[server] tls_cert`.
    File(PathBuf),
    /// ACME's, not issued yet (until then the server serves its self-signed one).
    AcmePending(PathBuf),
    /// The self-signed one.
    SelfSigned,
}

/// The certificate `server` serves (its `TlsSource`).
fn served_certificate(server: &ServerConfig) -> Served {
    match &server.tls {
        TlsSource::Acme { dir, .. } => {
            let path = dir.join("cert.pem");
            if path.is_file() {
                Served::File(path)
            } else {
                Served::AcmePending(path)
            }
        }
        TlsSource::Files { cert, .. } => Served::File(cert.clone()),
        TlsSource::SelfSigned { .. } => Served::SelfSigned,
    }
}

/// The first certificate of a PEM chain (the leaf), in DER.
fn leaf_certificate(path: &Path) -> Result<Vec<u8>> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let first = CertificateDer::pem_slice_iter(&pem)
        .next()
        .with_context(|| format!("{} holds no certificate", path.display()))?
        .map_err(|err| anyhow::anyhow!("{}: {err}", path.display()))?;
    Ok(first.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers from a list, failing for names not in it, and counts the queries.
    struct Table {
        names: Vec<&'static str>,
        asked: std::sync::atomic::AtomicUsize,
    }

    impl Lookup for Table {
        async fn query(&self, name: &str, _kind: Kind) -> dns_records::Answer {
            self.asked
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if self.names.contains(&name) {
                dns_records::Answer::NoRecords
            } else {
                dns_records::Answer::Failed("request timed out".into())
            }
        }
    }

    /// Two failures in a row stop the asking; one failure between answers does not.
    #[test]
    fn giving_up_after_failures_in_a_row() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let lookup = GivingUp::new(Table {
            names: vec!["a.", "c."],
            asked: Default::default(),
        });
        let answers: Vec<_> = ["a.", "b.", "c.", "d.", "e.", "c."]
            .iter()
            .map(|name| runtime.block_on(lookup.query(name, Kind::Txt)))
            .collect();
        assert_eq!(
            lookup
                .lookup
                .asked
                .load(std::sync::atomic::Ordering::Relaxed),
            5
        );
        assert_eq!(answers[2], dns_records::Answer::NoRecords);
        assert_eq!(
            answers[5],
            dns_records::Answer::Failed("not asked: the 2 queries before failed".into())
        );
    }

    /// The id is 16 lower-case hexadecimal digits (RFC 8461 3.1 allows letters and digits,
    /// at most 32) and changes with the policy.
    #[test]
    fn the_mta_sts_id_follows_the_policy_text() {
        let enforce = "version: STSv1\nmode: enforce\nmx: mail.example.org\nmax_age: 604800\n";
        let testing = enforce.replace("enforce", "testing");
        let id = mta_sts_id(enforce);
        assert_eq!(id.len(), 16);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(id, mta_sts_id(enforce));
        assert_ne!(id, mta_sts_id(&testing));
        // SHA-256("abc") begins ba7816bf8f01cfea (FIPS 180-2 appendix B.1).
        assert_eq!(mta_sts_id("abc"), "ba7816bf8f01cfea");
    }
}
