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

use std::sync::Arc;
use std::time::Duration;

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
    match session(relay, clients, hostname, sender, recipients, content).await {
        Ok(outcomes) => outcomes,
        Err(Failed(shared)) => vec![shared; recipients.len()],
    }
}

async fn session(
    relay: &Relay,
    clients: &Clients,
    hostname: &str,
    sender: &str,
    recipients: &[String],
    content: &[u8],
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
    let want_tls = match relay.tls {
        RelayTls::None => false,
        RelayTls::May => offers_starttls,
        RelayTls::Verify => {
            if !offers_starttls {
                return Err(temporary(
                    "relay does not offer STARTTLS, which is required",
                ));
            }
            true
        }
    };
    if want_tls {
        let ready = command(&mut reader, "STARTTLS\r\n").await?;
        if ready.code != 220 {
            return Err(Failed(by_code(&ready)));
        }
        // RFC 3207 4.2: nothing the relay sent before its 220 may be used after the
        // handshake; the buffer is empty here because the 220 ended the reply.
        let plain = reader.into_inner();
        let config = match relay.tls {
            RelayTls::Verify => clients.verifying.clone(),
            _ => clients.opportunistic.clone(),
        };
        let name = rustls_pki_types::ServerName::try_from(relay.host.clone())
            .map_err(|e| temporary(format!("relay name {}: {e}", relay.host)))?;
        let tls = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio_rustls::TlsConnector::from(config).connect(name, plain),
        )
        .await
        .map_err(|_| temporary("TLS handshake timed out"))?
        .map_err(|e| temporary(format!("TLS handshake: {e}")))?;
        reader = BufReader::new(Box::new(tls) as Box<dyn Io>);
        hello = command(&mut reader, &ehlo).await?;
        if hello.code != 250 {
            return Err(Failed(by_code(&hello)));
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
    Hosts(Vec<(String, Vec<std::net::IpAddr>)>),
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
        let mut addresses = Vec::new();
        if let Ok(lookup) = resolver.ipv4_lookup(host.as_str()).await {
            addresses.extend(lookup.answers().iter().filter_map(|r| match &r.data {
                RData::A(a) => Some(std::net::IpAddr::V4(a.0)),
                _ => None,
            }));
        }
        if let Ok(lookup) = resolver.ipv6_lookup(host.as_str()).await {
            addresses.extend(lookup.answers().iter().filter_map(|r| match &r.data {
                RData::AAAA(a) => Some(std::net::IpAddr::V6(a.0)),
                _ => None,
            }));
        }
        if !addresses.is_empty() {
            resolved.push((host.trim_end_matches('.').to_string(), addresses));
        }
    }
    if resolved.is_empty() {
        return Exchangers::NoSuchDomain;
    }
    Exchangers::Hosts(resolved)
}

/// Direct delivery: the resolver that finds exchangers, and their SMTP port (25 on the
/// internet; another only on test networks).
pub struct Mx {
    pub resolver: hickory_resolver::TokioResolver,
    pub port: u16,
}

/// Exchangers tried per domain at most (RFC 5321 5.1 asks for at least two when there are).
const EXCHANGERS_MAX: usize = 5;

/// Delivers to a domain's exchangers in order: the next one is tried only while every
/// recipient still has a temporary failure (the host was unreachable or refused for now).
pub(crate) async fn send_mx(
    mx: &Mx,
    clients: &Clients,
    hostname: &str,
    domain: &str,
    sender: &str,
    recipients: &[String],
    content: &[u8],
) -> (String, Vec<Sent>) {
    let hosts = match exchangers(&mx.resolver, domain).await {
        Exchangers::Hosts(hosts) => hosts,
        Exchangers::NullMx => {
            return (
                "none".into(),
                vec![
                    Sent::Permanent(format!("556 5.1.10 {domain} accepts no mail (null MX)"));
                    recipients.len()
                ],
            );
        }
        Exchangers::NoSuchDomain => {
            return (
                "none".into(),
                vec![
                    Sent::Permanent(format!("550 5.1.2 {domain}: no such domain or no address"));
                    recipients.len()
                ],
            );
        }
        Exchangers::Unavailable(why) => {
            return (
                "none".into(),
                vec![
                    Sent::Temporary(format!("451 4.4.3 DNS for {domain}: {why}"));
                    recipients.len()
                ],
            );
        }
    };
    let mut last =
        vec![Sent::Temporary("451 4.4.1 no exchanger answered".into()); recipients.len()];
    let mut tried = "none".to_string();
    for (host, addresses) in hosts {
        for address in addresses {
            let relay = Relay {
                host: host.clone(),
                port: mx.port,
                tls: RelayTls::May,
                address: Some(address),
            };
            tried = relay.name();
            last = send(&relay, clients, hostname, sender, recipients, content).await;
            if !last.iter().all(|s| matches!(s, Sent::Temporary(_))) {
                return (tried, last);
            }
        }
    }
    (tried, last)
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
