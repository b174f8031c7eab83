//! Outbound SMTP (RFC 5321) to a configured relay (smarthost), with STARTTLS (RFC 3207).
//!
//! One message, one connection: EHLO, STARTTLS when offered (or required), MAIL, one RCPT per
//! recipient, DATA, QUIT. Each recipient gets its own outcome, so a 550 for one recipient
//! bounces only that one. Transport failures and 4xx replies are temporary (the queue retries
//! with backoff); 5xx replies are permanent (a DSN goes to the sender).
//!
//! Where a message goes: the configured relay (smarthost), or else each recipient domain's
//! mail exchangers from DNS (RFC 5321 5.1: MX records by preference; none: the domain's own
//! address, the implicit MX; a null MX, RFC 7505: the domain takes no mail).
//!
//! Transport security towards exchangers: with a `transport_policy::Planner` ([`Mx::planner`])
//! each domain is planned once per delivery batch (its exchangers with their DNSSEC-validated
//! TLSA records, and its MTA-STS policy, cached by the planner), and each session gets the TLS
//! its exchanger requires: DANE (RFC 7672) or MTA-STS (RFC 8461) make TLS mandatory and the
//! certificate checked, and a session that cannot have that TLS fails temporarily: the
//! message is deferred, never sent in plaintext. Each session's TLS outcome goes to
//! [`TlsResults`] for TLS-RPT (RFC 8460).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::CertificateDer;
use transport_policy::{AppliedPolicy, DomainPlan, PolicyKind, Requirement, ResultType};

use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, BufReader,
};
use tokio::net::TcpStream;

/// How TLS is used towards the relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelayTls {
    /// Never (a relay on a trusted network or loopback).
    None,
    /// STARTTLS when the relay offers it, certificate not verified: Postfix's
    /// `smtp_tls_security_level = may`, opportunistic TLS (RFC 7435).
    May,
    /// STARTTLS required and the certificate verified against the Mozilla roots for the
    /// relay's host name.
    Verify,
}

impl RelayTls {
    /// The `[server] relay_tls` value.
    pub fn name(self) -> &'static str {
        match self {
            RelayTls::None => "none",
            RelayTls::May => "may",
            RelayTls::Verify => "verify",
        }
    }
}

/// The TLS of one session: the client configuration for STARTTLS (`None`: never), and
/// whether the session must not go on without it.
pub(crate) struct Tls {
    config: Option<Arc<rustls::ClientConfig>>,
    required: bool,
    /// The policy that asked for it (its name goes in a deferral); `None`: the relay's.
    policy: Option<PolicyKind>,
}

impl Tls {
    /// What `[server] relay_tls` asks of a session to the relay.
    fn for_relay(tls: RelayTls, clients: &Clients) -> Tls {
        let (config, required) = match tls {
            RelayTls::None => (None, false),
            RelayTls::May => (Some(clients.opportunistic.clone()), false),
            RelayTls::Verify => (Some(clients.verifying.clone()), true),
        };
        Tls {
            config,
            required,
            policy: None,
        }
    }
}

/// How far a session's TLS got.
#[derive(Debug, Default)]
pub(crate) enum TlsOutcome {
    /// The session ended before STARTTLS could be asked for (connection, greeting, EHLO).
    #[default]
    NotReached,
    /// No STARTTLS: the exchanger did not offer it, or the session was not to use it.
    Plaintext { offered: bool },
    /// STARTTLS was answered with this refusal.
    Refused(String),
    /// The handshake failed; the rustls error when there was one.
    Failed {
        error: Option<rustls::Error>,
        detail: String,
    },
    /// The handshake completed; the certificate chain the exchanger presented.
    Established(Vec<CertificateDer<'static>>),
}

/// Where each outbound session's TLS outcome goes, for TLS-RPT (RFC 8460) and telemetry.
pub trait TlsResults: Send + Sync {
    /// One session to `mx_host` at `ip` under `policy`: `result` is `None` for a successful
    /// TLS session, the RFC 8460 4.3 result type of a failed one otherwise. A session that
    /// never got to STARTTLS (connection refused) records nothing, and neither does a
    /// plaintext session under no policy: RFC 8460 counts TLS negotiations, and there was
    /// none. A host deferred before any connection (a bogus TLSA answer, RFC 7672 2.2) is
    /// recorded once at its first address, or at the unspecified address when it has none.
    fn record(
        &self,
        policy: &AppliedPolicy,
        mx_host: &str,
        ip: IpAddr,
        result: Option<ResultType>,
        detail: &str,
    );
}

/// Where remote mail goes.
#[derive(Clone, Debug)]
pub struct Relay {
    /// Host name (for TLS verification) or address.
    pub host: String,
    pub port: u16,
    pub tls: RelayTls,
    /// The address to connect to when it is already known (an MX host resolved through our
    /// own resolver); `None`: resolve `host` with the system's resolver.
    pub address: Option<std::net::IpAddr>,
}

impl Relay {
    /// How the mail log names it, as Postfix does: `host[address]:port`, or `host:port`.
    pub(crate) fn name(&self) -> String {
        match self.address {
            Some(ip) => format!("{}[{ip}]:{}", self.host, self.port),
            None => format!("{}:{}", self.host, self.port),
        }
    }
}

/// One recipient's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    Delivered,
    /// 4xx or a transport failure: try again later.
    Temporary(String),
    /// 5xx: bounce.
    Permanent(String),
}

/// RFC 5321 4.5.3.2: the client's timeouts (initial 220: 5 min; MAIL, RCPT: 5 min; DATA
/// initiation 2 min; data block 3 min; after the final dot 10 min). One generous bound per
/// step keeps a stuck relay from holding a delivery thread for long.
const STEP_TIMEOUT: Duration = Duration::from_secs(300);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest reply line read from the relay (RFC 5321 4.5.3.1.5: 512 with CRLF); more is an
/// error, not an allocation.
const REPLY_LINE_BYTES_MAX: usize = 2048;
/// Most lines in one multi-line reply.
const REPLY_LINES_MAX: usize = 100;

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A reply: its code and its text lines joined.
struct Reply {
    code: u16,
    text: String,
    /// The reply as received, for parsers that need it (EHLO capabilities).
    raw: Vec<u8>,
}

impl Reply {
    fn line(&self) -> String {
        format!("{} {}", self.code, self.text)
    }
}

/// A failure before any recipient got its own answer: every recipient shares it.
struct Failed(Sent);

fn temporary(what: impl std::fmt::Display) -> Failed {
    Failed(Sent::Temporary(format!("451 4.4.0 relay: {what}")))
}

fn by_code(reply: &Reply) -> Sent {
    match reply.code {
        200..=299 => Sent::Delivered,
        500..=599 => Sent::Permanent(reply.line()),
        _ => Sent::Temporary(reply.line()),
    }
}

async fn read_reply(reader: &mut BufReader<Box<dyn Io>>) -> Result<Reply, Failed> {
    let mut text = Vec::new();
    let mut raw = Vec::new();
    for _ in 0..REPLY_LINES_MAX {
        let mut line = Vec::new();
        let read = tokio::time::timeout(STEP_TIMEOUT, async {
            let mut limited = (&mut *reader).take(REPLY_LINE_BYTES_MAX as u64);
            limited.read_until(b'\n', &mut line).await
        })
        .await
        .map_err(|_| temporary("timed out waiting for a reply"))?
        .map_err(temporary)?;
        if read == 0 || !line.ends_with(b"\n") {
            return Err(temporary("connection closed or reply line too long"));
        }
        raw.extend_from_slice(&line);
        let line = String::from_utf8_lossy(&line);
        let line = line.trim_end();
        let code: u16 = line
            .get(..3)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| temporary(format!("malformed reply {line:?}")))?;
        text.push(line.get(4..).unwrap_or("").to_string());
        // RFC 5321 4.2.1: "ddd-" continues, "ddd " (or a bare code) ends the reply.
        if line.as_bytes().get(3) != Some(&b'-') {
            return Ok(Reply {
                code,
                text: text.join(" / "),
                raw,
            });
        }
    }
    Err(temporary("reply has too many lines"))
}

async fn command(reader: &mut BufReader<Box<dyn Io>>, line: &str) -> Result<Reply, Failed> {
    tokio::time::timeout(STEP_TIMEOUT, async {
        let stream = reader.get_mut();
        stream.write_all(line.as_bytes()).await?;
        stream.flush().await
    })
    .await
    .map_err(|_| temporary("timed out sending"))?
    .map_err(temporary)?;
    read_reply(reader).await
}

/// RFC 5321 4.5.2: a line starting with "." gets one more; lines end with CRLF; the data ends
/// with CRLF "." CRLF.
fn dot_stuffed(content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + content.len() / 64 + 5);
    let mut at_line_start = true;
    for &byte in content {
        if at_line_start && byte == b'.' {
            out.push(b'.');
        }
        out.push(byte);
        at_line_start = byte == b'\n';
    }
    if !out.ends_with(b"\r\n") {
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b".\r\n");
    out
}

/// The TLS client configurations, built once.
pub struct Clients {
    verifying: Arc<rustls::ClientConfig>,
    opportunistic: Arc<rustls::ClientConfig>,
}

impl Default for Clients {
    fn default() -> Clients {
        Clients::new()
    }
}

impl Clients {
    /// A verifying client (Mozilla roots) and an opportunistic one (any certificate).
    pub fn new() -> Clients {
        // The process-wide crypto provider (aws-lc-rs), as the server's listeners install it:
        // rustls panics at the first handshake if none is installed and several are built in.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let roots =
            rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let verifying = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        // Any certificate, the handshake still checked: Postfix's `may`.
        let opportunistic = opportunistic_tls::client_config();
        Clients {
            verifying: Arc::new(verifying),
            opportunistic: Arc::new(opportunistic),
        }
    }
}

/// Delivers `content` from `sender` to `recipients` through `relay`; one outcome per
/// recipient, in order.
pub(crate) async fn send(
    relay: &Relay,
    clients: &Clients,
    hostname: &str,
    sender: &str,
    recipients: &[String],
    content: &[u8],
) -> Vec<Sent> {
    let tls = Tls::for_relay(relay.tls, clients);
    let mut reached = TlsOutcome::NotReached;
    let session = session(
        relay,
        &tls,
        hostname,
        sender,
        recipients,
        content,
        &mut reached,
    );
    each(session.await, recipients.len())
}

/// One outcome per recipient: a failure before they got their own answers is everyone's.
fn each(session: Result<Vec<Sent>, Failed>, recipients: usize) -> Vec<Sent> {
    match session {
        Ok(outcomes) => outcomes,
        Err(Failed(shared)) => vec![shared; recipients],
    }
}

/// The name a deferral gives the policy that required TLS.
fn required_by(policy: Option<PolicyKind>) -> &'static str {
    match policy {
        Some(PolicyKind::Sts) => "MTA-STS (RFC 8461)",
        Some(PolicyKind::Tlsa) => "DANE (RFC 7672)",
        _ => "relay_tls = verify",
    }
}

/// One SMTP session; `reached` says how far its TLS got, whatever the result.
async fn session(
    relay: &Relay,
    tls: &Tls,
    hostname: &str,
    sender: &str,
    recipients: &[String],
    content: &[u8],
    reached: &mut TlsOutcome,
) -> Result<Vec<Sent>, Failed> {
    let connect = async {
        match relay.address {
            Some(ip) => TcpStream::connect((ip, relay.port)).await,
            None => TcpStream::connect((relay.host.as_str(), relay.port)).await,
        }
    };
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| {
            temporary(format!(
                "connecting to {}:{} timed out",
                relay.host, relay.port
            ))
        })?
        .map_err(|e| temporary(format!("connecting to {}:{}: {e}", relay.host, relay.port)))?;
    let _ = tcp.set_nodelay(true);
    let mut reader = BufReader::new(Box::new(tcp) as Box<dyn Io>);
    let greeting = read_reply(&mut reader).await?;
    if greeting.code != 220 {
        return Err(Failed(by_code(&greeting)));
    }
    let ehlo = format!("EHLO {hostname}\r\n");
    let mut hello = command(&mut reader, &ehlo).await?;
    if hello.code != 250 {
        return Err(Failed(by_code(&hello)));
    }
    // RFC 3207 4: STARTTLS among the EHLO keywords (smtp-proto parses the extension list).
    let offers_starttls = smtp_proto::EhloResponse::parse(&mut hello.raw.iter())
        .is_ok_and(|ehlo| ehlo.capabilities & smtp_proto::EXT_START_TLS != 0);
    // RFC 8461 5 and RFC 7672 2.2: where TLS is required, a session without it fails
    // (temporarily: the message waits); it never goes on in plaintext.
    let tls_failure = |what: String| {
        Failed(Sent::Temporary(format!(
            "451 4.7.5 {} requires TLS with {}: {what}",
            required_by(tls.policy),
            relay.host
        )))
    };
    match tls.config.as_ref().filter(|_| offers_starttls) {
        None => {
            *reached = TlsOutcome::Plaintext {
                offered: offers_starttls,
            };
            if tls.required {
                return Err(tls_failure(format!(
                    "no STARTTLS offered ({})",
                    ResultType::StarttlsNotSupported
                )));
            }
        }
        Some(config) => {
            let ready = command(&mut reader, "STARTTLS\r\n").await?;
            if ready.code != 220 {
                *reached = TlsOutcome::Refused(ready.line());
                if tls.required {
                    return Err(tls_failure(format!("STARTTLS refused: {}", ready.line())));
                }
                return Err(Failed(by_code(&ready)));
            }
            // RFC 3207 4.2: nothing the server sent before its 220 may be used after the
            // handshake; the buffer is empty here because the 220 ended the reply.
            let plain = reader.into_inner();
            let name = rustls_pki_types::ServerName::try_from(relay.host.clone())
                .map_err(|e| temporary(format!("relay name {}: {e}", relay.host)))?;
            let handshake = tokio::time::timeout(
                CONNECT_TIMEOUT,
                tokio_rustls::TlsConnector::from(config.clone()).connect(name, plain),
            )
            .await;
            let stream = match handshake {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    // tokio-rustls carries the rustls error inside the io::Error.
                    let error = e
                        .get_ref()
                        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                        .cloned();
                    let detail = format!("TLS handshake: {e}");
                    let failure = match (&error, tls.policy) {
                        (Some(error), Some(kind)) if tls.required => tls_failure(format!(
                            "handshake failed ({}): {e}",
                            ResultType::from_tls_error(error, kind)
                        )),
                        _ if tls.required => tls_failure(detail.clone()),
                        _ => temporary(&detail),
                    };
                    *reached = TlsOutcome::Failed { error, detail };
                    return Err(failure);
                }
                Err(_) => {
                    *reached = TlsOutcome::Failed {
                        error: None,
                        detail: "TLS handshake timed out".into(),
                    };
                    return Err(temporary("TLS handshake timed out"));
                }
            };
            *reached = TlsOutcome::Established(
                stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .map(|chain| chain.iter().map(|c| c.clone().into_owned()).collect())
                    .unwrap_or_default(),
            );
            reader = BufReader::new(Box::new(stream) as Box<dyn Io>);
            hello = command(&mut reader, &ehlo).await?;
            if hello.code != 250 {
                return Err(Failed(by_code(&hello)));
            }
        }
    }
    let mail = command(&mut reader, &format!("MAIL FROM:<{sender}>\r\n")).await?;
    if mail.code != 250 {
        return Err(Failed(by_code(&mail)));
    }
    let mut outcomes = Vec::with_capacity(recipients.len());
    for recipient in recipients {
        let rcpt = command(&mut reader, &format!("RCPT TO:<{recipient}>\r\n")).await?;
        outcomes.push(match rcpt.code {
            250 | 251 => None,
            _ => Some(by_code(&rcpt)),
        });
    }
    if outcomes.iter().all(Option::is_some) {
        let _ = command(&mut reader, "QUIT\r\n").await;
        return Ok(outcomes.into_iter().flatten().collect());
    }
    let data = command(&mut reader, "DATA\r\n").await?;
    if data.code != 354 {
        let shared = by_code(&data);
        return Ok(outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| shared.clone()))
            .collect());
    }
    tokio::time::timeout(STEP_TIMEOUT, async {
        let stream = reader.get_mut();
        stream.write_all(&dot_stuffed(content)).await?;
        stream.flush().await
    })
    .await
    .map_err(|_| temporary("timed out sending the message"))?
    .map_err(temporary)?;
    let done = read_reply(&mut reader).await?;
    let shared = by_code(&done);
    let _ = command(&mut reader, "QUIT\r\n").await;
    Ok(outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| shared.clone()))
        .collect())
}

/// The mail exchangers of a domain.
pub(crate) enum Exchangers {
    /// Hosts to try in order, each with its addresses.
    Hosts(Vec<(String, Vec<IpAddr>)>),
    /// RFC 7505: a null MX; the domain accepts no mail.
    NullMx,
    /// DNS could not answer now (temporary).
    Unavailable(String),
    /// The domain does not exist or has no address (permanent).
    NoSuchDomain,
}

/// RFC 5321 5.1: MX records sorted by preference, each host's A/AAAA records; without MX
/// records the domain itself is the exchanger (implicit MX).
pub(crate) async fn exchangers(
    resolver: &hickory_resolver::TokioResolver,
    domain: &str,
) -> Exchangers {
    use hickory_resolver::proto::rr::RData;
    let fqdn = format!("{}.", domain.trim_end_matches('.'));
    let mut hosts: Vec<(u16, String)> = match resolver.mx_lookup(fqdn.as_str()).await {
        Ok(lookup) => lookup
            .answers()
            .iter()
            .filter_map(|record| match &record.data {
                RData::MX(mx) => Some((mx.preference, mx.exchange.to_ascii())),
                _ => None,
            })
            .collect(),
        Err(e) if e.is_nx_domain() => return Exchangers::NoSuchDomain,
        Err(e) if e.is_no_records_found() => Vec::new(),
        Err(e) => return Exchangers::Unavailable(e.to_string()),
    };
    if hosts.len() == 1 && hosts[0].1 == "." {
        return Exchangers::NullMx;
    }
    if hosts.is_empty() {
        hosts.push((0, fqdn));
    }
    hosts.sort_by_key(|(preference, _)| *preference);
    let mut resolved = Vec::new();
    for (_, host) in hosts.into_iter().take(EXCHANGERS_MAX) {
        let addresses = addresses(resolver, &host).await;
        if !addresses.is_empty() {
            resolved.push((host.trim_end_matches('.').to_string(), addresses));
        }
    }
    if resolved.is_empty() {
        return Exchangers::NoSuchDomain;
    }
    Exchangers::Hosts(resolved)
}

/// A host's IPv4 then IPv6 addresses; none when neither lookup answered.
async fn addresses(resolver: &hickory_resolver::TokioResolver, host: &str) -> Vec<IpAddr> {
    use hickory_resolver::proto::rr::RData;
    let fqdn = format!("{}.", host.trim_end_matches('.'));
    let mut addresses = Vec::new();
    if let Ok(lookup) = resolver.ipv4_lookup(fqdn.as_str()).await {
        addresses.extend(lookup.answers().iter().filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            _ => None,
        }));
    }
    if let Ok(lookup) = resolver.ipv6_lookup(fqdn.as_str()).await {
        addresses.extend(lookup.answers().iter().filter_map(|r| match &r.data {
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        }));
    }
    addresses
}

/// Direct delivery: the resolver that finds exchangers, and their SMTP port (25 on the
/// internet; another only on test networks).
pub struct Mx {
    pub resolver: hickory_resolver::TokioResolver,
    pub port: u16,
    /// MTA-STS and DANE for the sessions (RFC 8461, RFC 7672); `None`: opportunistic TLS
    /// to every exchanger, found through `resolver`.
    pub planner: Option<Arc<transport_policy::Planner>>,
    /// Where each session's TLS outcome goes (TLS-RPT, telemetry); `None`: nowhere.
    pub tls_results: Option<Arc<dyn TlsResults>>,
}

/// Exchangers tried per domain at most (RFC 5321 5.1 asks for at least two when there are).
const EXCHANGERS_MAX: usize = 5;

/// A recipient domain's plan, made by the first of a delivery batch's sessions to the domain
/// and shared by the others: one batch's many messages to a domain look it up once.
pub(crate) type SharedPlan = Arc<tokio::sync::OnceCell<Planned>>;

/// A domain's plan with what each exchanger needs: its requirement, the policy a TLS-RPT
/// report counts it under, and its TLS client configuration. Made once per batch, so the
/// batch's sessions to one exchanger share one configuration, and with it TLS session
/// resumption (a DANE configuration is built per exchanger, with its TLSA records).
pub(crate) struct Planned {
    plan: DomainPlan,
    hosts: Vec<PlannedHost>,
}

struct PlannedHost {
    name: String,
    requirement: Requirement,
    policy: AppliedPolicy,
    /// `None` for `Skip` and `Defer`: no session.
    config: Option<Arc<rustls::ClientConfig>>,
}

impl Planned {
    async fn new(planner: &transport_policy::Planner, domain: &str) -> Planned {
        let plan = planner.plan(domain).await;
        let hosts = match &plan.exchangers {
            transport_policy::Exchangers::Hosts(hosts) => hosts
                .iter()
                .map(|host| {
                    let requirement = planner.requirement(&plan, &host.name);
                    PlannedHost {
                        name: host.name.clone(),
                        policy: plan.applied_policy(&requirement),
                        config: planner.client_config(&requirement),
                        requirement,
                    }
                })
                .collect(),
            _ => Vec::new(),
        };
        Planned { plan, hosts }
    }
}

/// Delivers to a domain's exchangers in order: the next one is tried only while every
/// recipient still has a temporary failure (the host was unreachable or refused for now).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn send_mx(
    mx: &Mx,
    clients: &Clients,
    hostname: &str,
    domain: &str,
    plan: &SharedPlan,
    sender: &str,
    recipients: &[String],
    content: &[u8],
) -> (String, Vec<Sent>) {
    let message = Message {
        hostname,
        sender,
        recipients,
        content,
    };
    let all = |sent: Sent| vec![sent; recipients.len()];
    let hosts: Vec<(String, Vec<IpAddr>)> = match &mx.planner {
        Some(planner) => {
            let planned = plan.get_or_init(|| Planned::new(planner, domain)).await;
            return send_planned(mx, planner, planned, &message).await;
        }
        None => match exchangers(&mx.resolver, domain).await {
            Exchangers::Hosts(hosts) => hosts,
            Exchangers::NullMx => return ("none".into(), all(null_mx(domain))),
            Exchangers::NoSuchDomain => return ("none".into(), all(no_such_domain(domain))),
            Exchangers::Unavailable(why) => {
                return ("none".into(), all(dns_unavailable(domain, &why)));
            }
        },
    };
    let mut last = all(Sent::Temporary("451 4.4.1 no exchanger answered".into()));
    let mut tried = "none".to_string();
    let tls = Tls::for_relay(RelayTls::May, clients);
    for (host, addresses) in hosts {
        for address in addresses {
            let relay = Relay {
                host: host.clone(),
                port: mx.port,
                tls: RelayTls::May,
                address: Some(address),
            };
            tried = relay.name();
            let mut reached = TlsOutcome::NotReached;
            last = each(
                message.session(&relay, &tls, &mut reached).await,
                recipients.len(),
            );
            if !last.iter().all(|s| matches!(s, Sent::Temporary(_))) {
                return (tried, last);
            }
        }
    }
    (tried, last)
}

/// What one message's sessions to a domain carry.
struct Message<'a> {
    hostname: &'a str,
    sender: &'a str,
    recipients: &'a [String],
    content: &'a [u8],
}

impl Message<'_> {
    async fn session(
        &self,
        relay: &Relay,
        tls: &Tls,
        reached: &mut TlsOutcome,
    ) -> Result<Vec<Sent>, Failed> {
        session(
            relay,
            tls,
            self.hostname,
            self.sender,
            self.recipients,
            self.content,
            reached,
        )
        .await
    }
}

fn null_mx(domain: &str) -> Sent {
    Sent::Permanent(format!("556 5.1.10 {domain} accepts no mail (null MX)"))
}

fn no_such_domain(domain: &str) -> Sent {
    Sent::Permanent(format!("550 5.1.2 {domain}: no such domain or no address"))
}

fn dns_unavailable(domain: &str, why: &str) -> Sent {
    Sent::Temporary(format!("451 4.4.3 DNS for {domain}: {why}"))
}

fn all_temporary(sent: &[Sent]) -> bool {
    sent.iter().all(|s| matches!(s, Sent::Temporary(_)))
}

/// [`send_mx`] under a plan: each exchanger gets the TLS its requirement asks for (DANE
/// first, then MTA-STS, else opportunistic), and each session's TLS outcome is recorded.
async fn send_planned(
    mx: &Mx,
    planner: &transport_policy::Planner,
    planned: &Planned,
    message: &Message<'_>,
) -> (String, Vec<Sent>) {
    use transport_policy::Exchangers;
    let plan = &planned.plan;
    let domain = &plan.domain;
    let all = |sent: Sent| vec![sent; message.recipients.len()];
    match &plan.exchangers {
        Exchangers::Hosts(_) => {}
        Exchangers::NullMx => return ("none".into(), all(null_mx(domain))),
        Exchangers::NoSuchDomain => return ("none".into(), all(no_such_domain(domain))),
        Exchangers::Unavailable(why) => {
            return ("none".into(), all(dns_unavailable(domain, why)));
        }
    }
    let mut last: Option<Vec<Sent>> = None;
    let mut tried = "none".to_string();
    let mut skipped: Vec<String> = Vec::new();
    for host in &planned.hosts {
        let (requirement, policy) = (&host.requirement, &host.policy);
        if let Requirement::Skip { why } = requirement {
            // RFC 8461 4.1: under `enforce`, an exchanger the policy does not name is not used.
            skipped.push(why.clone());
            continue;
        }
        let addresses = addresses(&mx.resolver, &host.name).await;
        let Some(config) = host.config.clone() else {
            if let Requirement::Defer { why, result, .. } = requirement {
                // RFC 7672 2.2: a failed TLSA lookup in a signed zone: not this host, now.
                let ip = addresses
                    .first()
                    .copied()
                    .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
                record(mx, policy, &host.name, ip, Some(*result), why);
                tried = format!("{}:{}", host.name, mx.port);
                last = Some(all(Sent::Temporary(format!(
                    "451 4.7.5 {}: {why} ({result}), so DANE (RFC 7672) cannot be checked",
                    host.name
                ))));
            }
            continue;
        };
        let tls = Tls {
            config: Some(config),
            required: requirement.tls_required(),
            policy: Some(policy.kind),
        };
        for address in addresses {
            let relay = Relay {
                host: host.name.clone(),
                port: mx.port,
                tls: RelayTls::May,
                address: Some(address),
            };
            tried = relay.name();
            let mut reached = TlsOutcome::NotReached;
            let sent = each(
                message.session(&relay, &tls, &mut reached).await,
                message.recipients.len(),
            );
            if let Some((result, detail)) =
                session_result(planner, plan, requirement, policy.kind, &reached)
            {
                record(mx, policy, &host.name, address, result, &detail);
            }
            if !all_temporary(&sent) {
                return (tried, sent);
            }
            last = Some(sent);
        }
    }
    let last = match last {
        Some(last) => last,
        // RFC 8461 4.1 and 5: no exchanger the enforced policy allows; wait, never plaintext.
        None if !skipped.is_empty() => all(Sent::Temporary(format!(
            "451 4.7.5 MTA-STS (RFC 8461): no exchanger of {domain} is named by its policy: {}",
            skipped.join("; ")
        ))),
        None => all(no_such_domain(domain)),
    };
    (tried, last)
}

/// What a session's TLS outcome records: `None` for nothing (see [`TlsResults::record`]),
/// else the result (`None`: success) and what went wrong.
fn session_result(
    planner: &transport_policy::Planner,
    plan: &DomainPlan,
    requirement: &Requirement,
    kind: PolicyKind,
    reached: &TlsOutcome,
) -> Option<(Option<ResultType>, String)> {
    let opportunistic = matches!(requirement, Requirement::Opportunistic);
    let (result, detail): (Option<ResultType>, String) = match reached {
        TlsOutcome::NotReached => return None,
        // RFC 8460 4.3.2.2: the policy could not be fetched; the session went on without one.
        _ if opportunistic && let Some((result, why)) = &plan.sts_failure => {
            (Some(*result), why.clone())
        }
        TlsOutcome::Plaintext { .. } if opportunistic => return None,
        TlsOutcome::Plaintext { offered } => (
            Some(ResultType::StarttlsNotSupported),
            if *offered {
                "STARTTLS offered but not used".into()
            } else {
                "STARTTLS not offered".into()
            },
        ),
        TlsOutcome::Refused(reply) => (
            Some(ResultType::StarttlsNotSupported),
            format!("STARTTLS refused: {reply}"),
        ),
        TlsOutcome::Failed { error, detail } => (
            Some(error.as_ref().map_or(ResultType::ValidationFailure, |e| {
                ResultType::from_tls_error(e, kind)
            })),
            detail.clone(),
        ),
        // `testing`: the handshake was opportunistic; what the policy says of the certificate
        // is reported, the mail goes anyway (RFC 8461 5).
        TlsOutcome::Established(chain)
            if matches!(requirement, Requirement::Verified { enforce: false, .. }) =>
        {
            match planner.check_session(requirement, Some(chain)) {
                Ok(()) => (None, String::new()),
                Err(result) => (
                    Some(result),
                    "the certificate does not meet the policy (mode testing: delivered)".into(),
                ),
            }
        }
        TlsOutcome::Established(_) => (None, String::new()),
    };
    Some((result, detail))
}

fn record(
    mx: &Mx,
    policy: &AppliedPolicy,
    mx_host: &str,
    ip: IpAddr,
    result: Option<ResultType>,
    detail: &str,
) {
    if let Some(sink) = &mx.tls_results {
        sink.record(policy, mx_host, ip, result, detail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_stuffing_doubles_leading_dots_and_terminates() {
        assert_eq!(dot_stuffed(b"a\r\n.b\r\n"), b"a\r\n..b\r\n.\r\n".to_vec());
        assert_eq!(dot_stuffed(b".\r\nx"), b"..\r\nx\r\n.\r\n".to_vec());
        assert_eq!(dot_stuffed(b""), b"\r\n.\r\n".to_vec());
    }

    #[test]
    fn starttls_is_found_in_an_ehlo_reply() {
        let ehlo = b"250-relay.example\r\n250-PIPELINING\r\n250-STARTTLS\r\n250 8BITMIME\r\n";
        let parsed = smtp_proto::EhloResponse::parse(&mut ehlo.iter()).unwrap();
        assert_ne!(parsed.capabilities & smtp_proto::EXT_START_TLS, 0);
        let plain = b"250-relay.example\r\n250 8BITMIME\r\n";
        let parsed = smtp_proto::EhloResponse::parse(&mut plain.iter()).unwrap();
        assert_eq!(parsed.capabilities & smtp_proto::EXT_START_TLS, 0);
    }

    /// A scripted exchanger on loopback that offers no STARTTLS and accepts everything;
    /// the commands it received.
    async fn plaintext_exchanger() -> (std::net::SocketAddr, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let served = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (read, mut write) = stream.into_split();
            let mut lines = BufReader::new(read).lines();
            let mut seen = String::new();
            write.write_all(b"220 mx.example.org\r\n").await.unwrap();
            let mut in_data = false;
            while let Ok(Some(line)) = lines.next_line().await {
                seen.push_str(&line);
                seen.push('\n');
                let reply: &[u8] = if in_data {
                    if line != "." {
                        continue;
                    }
                    in_data = false;
                    b"250 queued\r\n"
                } else if line.starts_with("EHLO") {
                    b"250-mx.example.org\r\n250 8BITMIME\r\n"
                } else if line == "DATA" {
                    in_data = true;
                    b"354 go\r\n"
                } else if line == "QUIT" {
                    let _ = write.write_all(b"221 bye\r\n").await;
                    break;
                } else {
                    b"250 ok\r\n"
                };
                if write.write_all(reply).await.is_err() {
                    break;
                }
            }
            seen
        });
        (address, served)
    }

    fn relay_at(address: std::net::SocketAddr) -> Relay {
        Relay {
            host: "mx.example.org".into(),
            port: address.port(),
            tls: RelayTls::May,
            address: Some(address.ip()),
        }
    }

    #[tokio::test]
    async fn required_tls_without_starttls_defers_before_any_mail_is_sent() {
        let clients = Clients::new();
        let (address, served) = plaintext_exchanger().await;
        let tls = Tls {
            config: Some(clients.opportunistic.clone()),
            required: true,
            policy: Some(PolicyKind::Sts),
        };
        let mut reached = TlsOutcome::NotReached;
        let recipients = ["a@example.org".to_string()];
        let outcome = session(
            &relay_at(address),
            &tls,
            "mail.example.net",
            "s@example.net",
            &recipients,
            b"Subject: x\r\n\r\nsecret\r\n",
            &mut reached,
        )
        .await;
        let Err(Failed(Sent::Temporary(reply))) = outcome else {
            panic!("not a temporary failure");
        };
        assert!(
            reply.starts_with("451 4.7.5 MTA-STS") && reply.contains("starttls-not-supported"),
            "{reply}"
        );
        assert!(matches!(reached, TlsOutcome::Plaintext { offered: false }));
        // RFC 8461 5: nothing of the message went in plaintext.
        let seen = served.await.unwrap();
        assert!(
            !seen.contains("MAIL FROM") && !seen.contains("secret"),
            "{seen}"
        );

        // Without a policy the same exchanger gets the message in plaintext (RFC 7435).
        let (address, served) = plaintext_exchanger().await;
        let tls = Tls {
            required: false,
            policy: Some(PolicyKind::NoPolicyFound),
            ..tls
        };
        let mut reached = TlsOutcome::NotReached;
        let outcome = session(
            &relay_at(address),
            &tls,
            "mail.example.net",
            "s@example.net",
            &recipients,
            b"Subject: x\r\n\r\nsecret\r\n",
            &mut reached,
        )
        .await;
        assert_eq!(outcome.ok(), Some(vec![Sent::Delivered]));
        assert!(matches!(reached, TlsOutcome::Plaintext { offered: false }));
        assert!(served.await.unwrap().contains("secret"));
    }

    fn plan(sts: Option<transport_policy::Mode>) -> DomainPlan {
        DomainPlan {
            domain: "example.org".into(),
            exchangers: transport_policy::Exchangers::Hosts(Vec::new()),
            mx_secure: false,
            sts: sts.map(|mode| transport_policy::CachedPolicy {
                policy: transport_policy::Policy {
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

    #[test]
    fn session_outcomes_map_to_tls_rpt_results() {
        let planner =
            transport_policy::Planner::new(Vec::new(), None, transport_policy::Config::default())
                .unwrap();
        let none = plan(None);
        let opportunistic = Requirement::Opportunistic;
        let kind = PolicyKind::NoPolicyFound;
        let result = |plan: &DomainPlan, requirement: &Requirement, kind, reached| {
            session_result(&planner, plan, requirement, kind, &reached).map(|(r, _)| r)
        };
        // No policy: plaintext and unreached sessions are no TLS negotiation; TLS is success.
        assert_eq!(
            result(&none, &opportunistic, kind, TlsOutcome::NotReached),
            None
        );
        assert_eq!(
            result(
                &none,
                &opportunistic,
                kind,
                TlsOutcome::Plaintext { offered: false }
            ),
            None
        );
        assert_eq!(
            result(
                &none,
                &opportunistic,
                kind,
                TlsOutcome::Established(Vec::new())
            ),
            Some(None)
        );
        // A policy that could not be fetched is reported for the sessions that went on.
        let mut unfetched = plan(None);
        unfetched.sts_failure = Some((ResultType::StsPolicyFetchError, "refused".into()));
        assert_eq!(
            result(
                &unfetched,
                &opportunistic,
                PolicyKind::Sts,
                TlsOutcome::Established(Vec::new())
            ),
            Some(Some(ResultType::StsPolicyFetchError))
        );
        // Enforced: the handshake's own error decides.
        let enforce = plan(Some(transport_policy::Mode::Enforce));
        let verified = planner.requirement(&enforce, "mx.example.org");
        let mismatch = rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName);
        assert_eq!(
            result(
                &enforce,
                &verified,
                PolicyKind::Sts,
                TlsOutcome::Failed {
                    error: Some(mismatch),
                    detail: String::new()
                }
            ),
            Some(Some(ResultType::CertificateHostMismatch))
        );
        assert_eq!(
            result(
                &enforce,
                &verified,
                PolicyKind::Sts,
                TlsOutcome::Plaintext { offered: false }
            ),
            Some(Some(ResultType::StarttlsNotSupported))
        );
        assert_eq!(
            result(
                &enforce,
                &verified,
                PolicyKind::Sts,
                TlsOutcome::Refused("454 no".into())
            ),
            Some(Some(ResultType::StarttlsNotSupported))
        );
        // Testing: the opportunistic session's certificate is checked here; a self-signed one
        // for the right name is reported as untrusted (the mail went anyway).
        let testing = plan(Some(transport_policy::Mode::Testing));
        let requirement = planner.requirement(&testing, "mx.example.org");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["mx.example.org".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        assert_eq!(
            result(
                &testing,
                &requirement,
                PolicyKind::Sts,
                TlsOutcome::Established(vec![cert.der().clone()])
            ),
            Some(Some(ResultType::CertificateNotTrusted))
        );
    }

    #[test]
    fn reply_codes_map_to_outcomes() {
        let reply = |code| Reply {
            code,
            text: "x".into(),
            raw: Vec::new(),
        };
        assert_eq!(by_code(&reply(250)), Sent::Delivered);
        assert!(matches!(by_code(&reply(451)), Sent::Temporary(_)));
        assert!(matches!(by_code(&reply(550)), Sent::Permanent(_)));
        assert!(matches!(by_code(&reply(999)), Sent::Temporary(_)));
    }
}
