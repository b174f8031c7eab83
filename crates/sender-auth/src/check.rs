//! SPF, DKIM and DMARC checks of incoming mail with mail-auth, within fixed bounds of time
//! and work, and the Authentication-Results header field that reports them (RFC 8601).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use mail_auth::common::headers::Header;
use mail_auth::dkim::{DkimError, Signature};
use mail_auth::dmarc::Policy;
use mail_auth::dmarc::verify::DmarcParameters;
use mail_auth::hickory_resolver::Resolver;
use mail_auth::hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig};
use mail_auth::hickory_resolver::net::runtime::TokioRuntimeProvider;
use mail_auth::spf::verify::SpfParameters;
use mail_auth::{AuthenticatedMessage, DkimOutput, MessageAuthenticator, SpfOutput};
use tokio::time::{Instant, timeout_at};

use crate::Error;
use crate::headers::from_domain;
use crate::sign::{is_dns_name, shown};

/// DKIM signatures verified per message, the first ones in header order (the newest, as each
/// signer prepends its own). The rest are ignored: each costs DNS lookups and a public-key
/// operation, and a message may carry thousands.
pub const DKIM_SIGNATURES_MAX: usize = 5;

/// Signed header fields (`h=` entries) accepted per signature. mail-auth matches them against
/// the header section in time quadratic in their number; real signers list fewer than 50.
/// A signature with more is not verified and reported as `policy` (RFC 8601 2.7.1).
pub const DKIM_SIGNED_FIELDS_MAX: usize = 100;

/// Time limit of one try of a DNS query: hickory 0.26 bounds a try, all name servers and UDP
/// retransmissions included, by it.
pub const DNS_TIMEOUT: Duration = Duration::from_secs(5);

/// Tries of a DNS query before it fails: a query to a dead name server gives up after
/// `DNS_TRIES * DNS_TIMEOUT` (10 s).
pub const DNS_TRIES: usize = 2;

/// Time limit of a whole `check`. SPF alone may make 10 lookups after the first (RFC 7208
/// 4.6.4), each DKIM signature one or two, and DMARC a tree walk of up to 8 (RFC 9989
/// 4.10), one after another; past this the checks still running give temperror. It is a
/// little over one failed query, so a dead name server costs a message 12 s.
pub const CHECK_TIME_MAX: Duration = Duration::from_secs(12);

/// Longest property value written into Authentication-Results: a path is at most 256 octets
/// (RFC 5321 4.5.3.1.3), a domain 253; anything longer comes from a hostile signature.
const PVALUE_CHARS_MAX: usize = 256;

/// RFC 8601 2.7.2 / RFC 7208 2.6: the result of an SPF check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpfResult {
    Pass,
    Fail,
    SoftFail,
    Neutral,
    None,
    TempError,
    PermError,
}

impl SpfResult {
    /// The result's name in Authentication-Results.
    pub fn name(self) -> &'static str {
        match self {
            SpfResult::Pass => "pass",
            SpfResult::Fail => "fail",
            SpfResult::SoftFail => "softfail",
            SpfResult::Neutral => "neutral",
            SpfResult::None => "none",
            SpfResult::TempError => "temperror",
            SpfResult::PermError => "permerror",
        }
    }
}

/// RFC 8601 2.7.1: the result of verifying one DKIM signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DkimResult {
    Pass,
    /// The signature or the body hash did not verify (RFC 6376 6.1.3).
    Fail,
    /// Malformed, expired, or otherwise not verifiable.
    Neutral,
    /// Not verified because it exceeds our bounds (`DKIM_SIGNED_FIELDS_MAX`).
    Policy,
    TempError,
    PermError,
}

impl DkimResult {
    pub fn name(self) -> &'static str {
        match self {
            DkimResult::Pass => "pass",
            DkimResult::Fail => "fail",
            DkimResult::Neutral => "neutral",
            DkimResult::Policy => "policy",
            DkimResult::TempError => "temperror",
            DkimResult::PermError => "permerror",
        }
    }
}

/// One DKIM signature's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DkimOutcome {
    /// The `d=` domain, lowercase; empty for a signature too malformed to parse.
    pub domain: String,
    /// The `s=` selector; empty for a signature too malformed to parse.
    pub selector: String,
    pub result: DkimResult,
    /// The first 8 base64 characters of `b=` (RFC 6008 4), telling signatures of one
    /// domain and selector apart.
    pub signature_prefix: String,
}

/// RFC 7489 11.2: the result of the DMARC check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DmarcResult {
    Pass,
    Fail,
    /// No policy record, or no single RFC5322.From domain to look one up for.
    None,
    TempError,
    PermError,
}

impl DmarcResult {
    pub fn name(self) -> &'static str {
        match self {
            DmarcResult::Pass => "pass",
            DmarcResult::Fail => "fail",
            DmarcResult::None => "none",
            DmarcResult::TempError => "temperror",
            DmarcResult::PermError => "permerror",
        }
    }
}

/// The policy a DMARC record asks for (RFC 7489 6.3 `p=`, or `sp=`/`np=` for subdomains),
/// one level lower in test mode (`t=y`, RFC 9989 4.7), as mail-auth reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DmarcPolicy {
    None,
    Quarantine,
    Reject,
}

impl DmarcPolicy {
    pub fn name(self) -> &'static str {
        match self {
            DmarcPolicy::None => "none",
            DmarcPolicy::Quarantine => "quarantine",
            DmarcPolicy::Reject => "reject",
        }
    }
}

/// What the SMTP session knows about one incoming message.
#[derive(Clone, Copy, Debug)]
pub struct CheckInput<'a> {
    /// The client's address.
    pub ip: IpAddr,
    /// The EHLO/HELO argument.
    pub helo: &'a str,
    /// The MAIL FROM address without angle brackets; "" for the null sender.
    pub mail_from: &'a str,
    /// The message as received (RFC 5322, CRLF line ends), before we add any header field.
    pub message: &'a [u8],
}

/// The outcome of `Checker::check`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// SPF for the MAIL FROM identity, or for HELO when the sender is null (RFC 7208 2.4).
    pub spf: SpfResult,
    /// The domain SPF checked, lowercase.
    pub spf_domain: String,
    /// One per verified signature (at most `DKIM_SIGNATURES_MAX`), plus malformed ones.
    pub dkim: Vec<DkimOutcome>,
    pub dmarc: DmarcResult,
    /// The policy of the DMARC record that applied; `None` when there is none.
    pub dmarc_policy: DmarcPolicy,
    /// The RFC5322.From domain, lowercase (see `from_domain`).
    pub from_domain: Option<String>,
    /// `Authentication-Results: <hostname>; spf=...; dkim=...; dmarc=...` (RFC 8601), folded,
    /// ending in CRLF: the field to put at the top of the message.
    pub header: String,
}

impl Verdict {
    /// DMARC failed and the domain asks for rejection (RFC 7489 6.6.2, `p=reject`, or
    /// `sp=reject` for a subdomain): the message should be refused.
    pub fn dmarc_rejects(&self) -> bool {
        self.dmarc == DmarcResult::Fail && self.dmarc_policy == DmarcPolicy::Reject
    }

    /// Whether a check passed for `domain`: SPF with a checked domain equal to it, or a DKIM
    /// signature whose `d=` is `domain` or a parent of it (so a key of example.org
    /// vouches for mail.example.org, as relaxed DMARC alignment would, but without the
    /// organisational-domain lookup: `d=` must be a suffix on a label boundary).
    /// Case-insensitive; a trailing dot is ignored. Meant for refusing forged local senders.
    pub fn authenticated_for(&self, domain: &str) -> bool {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        if domain.is_empty() {
            return false;
        }
        let spf = self.spf == SpfResult::Pass && self.spf_domain.trim_end_matches('.') == domain;
        spf || self.dkim.iter().any(|outcome| {
            let d = outcome.domain.trim_end_matches('.');
            outcome.result == DkimResult::Pass
                && !d.is_empty()
                && (domain == d
                    || domain
                        .strip_suffix(d)
                        .is_some_and(|prefix| prefix.ends_with('.')))
        })
    }
}

/// Checks incoming mail. One per server: its resolver caches DNS answers (hickory's cache,
/// by TTL) for every message.
pub struct Checker {
    authenticator: MessageAuthenticator,
    hostname: String,
    /// Parsed records between messages (hickory caches the answers, not their parse).
    caches: crate::cache::Caches,
}

impl std::fmt::Debug for Checker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checker")
            .field("hostname", &self.hostname)
            .finish_non_exhaustive()
    }
}

/// A DNS resolver asking `dns_servers` (`ip:port`, over UDP and TCP; empty: the system's,
/// from /etc/resolv.conf), each query `tries` times at most, `timeout` each. Shared by the
/// checks and by direct delivery's MX lookups.
pub fn resolver(
    dns_servers: &[SocketAddr],
    timeout: Duration,
    tries: usize,
) -> Result<mail_auth::hickory_resolver::TokioResolver, Error> {
    let mut builder = if dns_servers.is_empty() {
        Resolver::builder_tokio().map_err(|err| Error::Dns(err.to_string()))?
    } else {
        let servers = dns_servers
            .iter()
            .map(|server| {
                let mut udp = ConnectionConfig::udp();
                udp.port = server.port();
                // RFC 7766: answers too long for UDP come back truncated; TCP gets them.
                let mut tcp = ConnectionConfig::tcp();
                tcp.port = server.port();
                NameServerConfig::new(server.ip(), true, vec![udp, tcp])
            })
            .collect();
        Resolver::builder_with_config(
            ResolverConfig::from_name_servers(servers),
            TokioRuntimeProvider::default(),
        )
    };
    builder.options_mut().timeout = timeout;
    // hickory's `attempts` counts the retries after the first try (its RetryDnsHandle).
    builder.options_mut().attempts = tries.saturating_sub(1);
    builder.build().map_err(|err| Error::Dns(err.to_string()))
}

impl Checker {
    /// `dns_servers`: `ip:port` name servers to ask, over UDP and TCP (empty: the system's,
    /// from /etc/resolv.conf). `hostname` is our authserv-id (RFC 8601 2.5), a DNS name.
    pub fn new(dns_servers: &[SocketAddr], hostname: &str) -> Result<Checker, Error> {
        if !is_dns_name(hostname) {
            return Err(Error::InvalidHostname(shown(hostname)));
        }
        let resolver = resolver(dns_servers, DNS_TIMEOUT, DNS_TRIES)?;
        Ok(Checker {
            authenticator: MessageAuthenticator(resolver),
            hostname: hostname.trim_end_matches('.').to_ascii_lowercase(),
            caches: crate::cache::Caches::default(),
        })
    }

    /// Our authserv-id.
    pub fn hostname(&self) -> &str {
        &self.hostname
    }

    /// Checks SPF and DKIM (concurrently), then DMARC from their results, all within
    /// `CHECK_TIME_MAX`. Never fails: DNS trouble gives temperror, a malformed message
    /// none/neutral results.
    pub async fn check(&self, input: &CheckInput<'_>) -> Verdict {
        let deadline = Instant::now() + CHECK_TIME_MAX;
        let mut parsed = AuthenticatedMessage::parse(input.message);
        let refused = parsed.as_mut().map(bound_signatures).unwrap_or_default();

        let spf_identity = if input.mail_from.is_empty() {
            SpfParameters::verify_ehlo(input.ip, input.helo, &self.hostname)
        } else {
            SpfParameters::verify_mail_from(input.ip, input.helo, &self.hostname, input.mail_from)
        };
        let spf = timeout_at(
            deadline,
            self.authenticator
                .verify_spf(self.caches.parameters(spf_identity)),
        );
        let dkim = async {
            match &parsed {
                Some(message) => timeout_at(
                    deadline,
                    self.authenticator
                        .verify_dkim(self.caches.parameters(message)),
                )
                .await
                .ok(),
                None => Some(Vec::new()),
            }
        };
        let (spf, dkim) = tokio::join!(spf, dkim);
        let spf = spf.unwrap_or_else(|_| {
            SpfOutput::new(spf_domain(input).to_string())
                .with_result(mail_auth::SpfResult::TempError)
        });

        let (dmarc, dmarc_policy, dmarc_domain) = match (&parsed, &dkim) {
            (None, _) => (DmarcResult::None, DmarcPolicy::None, String::new()),
            (Some(message), Some(dkim)) => {
                let dmarc = timeout_at(
                    deadline,
                    self.authenticator
                        .verify_dmarc(self.caches.parameters(DmarcParameters {
                            message,
                            dkim_output: dkim,
                            dkim2_output: None,
                            // RFC 7489 3.1.2: the domain SPF checked (HELO for the null sender,
                            // RFC 7208 2.4).
                            rfc5321_mail_from_domain: spf.domain(),
                            spf_output: &spf,
                        })),
                )
                .await;
                match dmarc {
                    Ok(output) => (
                        dmarc_result(&output.result()),
                        dmarc_policy(output.policy()),
                        output.domain().to_lowercase(),
                    ),
                    Err(_) => timed_out_dmarc(message),
                }
            }
            // DKIM ran out of time, so there is none left for DMARC either.
            (Some(message), None) => timed_out_dmarc(message),
        };

        let mut outcomes: Vec<DkimOutcome> = match (&dkim, &parsed) {
            (Some(outputs), _) => outputs.iter().map(dkim_outcome).collect(),
            (None, Some(message)) => message
                .dkim_headers
                .iter()
                .map(|header| outcome(Some(&header.header), DkimResult::TempError))
                .collect(),
            (None, None) => Vec::new(),
        };
        outcomes.extend(refused);

        let mut verdict = Verdict {
            spf: spf_result(spf.result()),
            spf_domain: spf.domain().trim_end_matches('.').to_lowercase(),
            dkim: outcomes,
            dmarc,
            dmarc_policy,
            from_domain: from_domain(input.message),
            header: String::new(),
        };
        verdict.header = authentication_results(&self.hostname, input, &verdict, &dmarc_domain);
        verdict
    }
}

/// Keeps the first `DKIM_SIGNATURES_MAX` signatures (and as many malformed ones) of a parsed
/// message, and takes out those listing more than `DKIM_SIGNED_FIELDS_MAX` fields; returns
/// the latter's outcomes. mail-auth verifies exactly the `dkim_headers` it is given, so this
/// bounds its DNS lookups and public-key operations; the body hashes it computed while
/// parsing are at most one per canonicalisation and hash pair (it refuses `l=`).
fn bound_signatures(message: &mut AuthenticatedMessage<'_>) -> Vec<DkimOutcome> {
    message.dkim_headers.truncate(DKIM_SIGNATURES_MAX);
    message.errors.truncate(DKIM_SIGNATURES_MAX);
    let (kept, refused): (Vec<Header<'_, Signature>>, Vec<_>) =
        std::mem::take(&mut message.dkim_headers)
            .into_iter()
            .partition(|header| header.header.h.len() <= DKIM_SIGNED_FIELDS_MAX);
    message.dkim_headers = kept;
    refused
        .iter()
        .map(|header| outcome(Some(&header.header), DkimResult::Policy))
        .collect()
}

fn timed_out_dmarc(message: &AuthenticatedMessage<'_>) -> (DmarcResult, DmarcPolicy, String) {
    let domain = message
        .from()
        .rsplit_once('@')
        .map(|(_, domain)| domain.to_lowercase())
        .unwrap_or_default();
    let result = if domain.is_empty() {
        DmarcResult::None
    } else {
        DmarcResult::TempError
    };
    (result, DmarcPolicy::None, domain)
}

/// The domain SPF checks: MAIL FROM's, or HELO for the null sender (RFC 7208 2.4) or a
/// MAIL FROM without a domain (as mail-auth does).
fn spf_domain<'a>(input: &CheckInput<'a>) -> &'a str {
    input
        .mail_from
        .rsplit_once('@')
        .map_or(input.helo, |(_, domain)| domain)
}

fn spf_result(result: mail_auth::SpfResult) -> SpfResult {
    match result {
        mail_auth::SpfResult::Pass => SpfResult::Pass,
        mail_auth::SpfResult::Fail => SpfResult::Fail,
        mail_auth::SpfResult::SoftFail => SpfResult::SoftFail,
        mail_auth::SpfResult::Neutral => SpfResult::Neutral,
        mail_auth::SpfResult::TempError => SpfResult::TempError,
        mail_auth::SpfResult::PermError => SpfResult::PermError,
        mail_auth::SpfResult::None => SpfResult::None,
    }
}

fn dkim_outcome(output: &DkimOutput<'_>) -> DkimOutcome {
    let result = match output.result() {
        mail_auth::DkimResult::Pass => DkimResult::Pass,
        // RFC 6376 6.1.3: a body hash that does not match fails the signature; mail-auth
        // calls it neutral.
        mail_auth::DkimResult::Neutral(mail_auth::Error::Dkim(DkimError::FailedBodyHashMatch))
        | mail_auth::DkimResult::Fail(_) => DkimResult::Fail,
        mail_auth::DkimResult::Neutral(_) | mail_auth::DkimResult::None => DkimResult::Neutral,
        mail_auth::DkimResult::TempError(_) => DkimResult::TempError,
        mail_auth::DkimResult::PermError(_) => DkimResult::PermError,
    };
    outcome(output.signature(), result)
}

fn outcome(signature: Option<&Signature>, result: DkimResult) -> DkimOutcome {
    DkimOutcome {
        domain: signature.map(|s| s.d.to_lowercase()).unwrap_or_default(),
        selector: signature.map(|s| s.s.clone()).unwrap_or_default(),
        result,
        signature_prefix: signature
            .and_then(|s| s.b.get(..6))
            .map(|prefix| STANDARD.encode(prefix))
            .unwrap_or_default(),
    }
}

fn dmarc_result(result: &mail_auth::DmarcResult) -> DmarcResult {
    match result {
        mail_auth::DmarcResult::Pass => DmarcResult::Pass,
        mail_auth::DmarcResult::Fail(_) => DmarcResult::Fail,
        mail_auth::DmarcResult::TempError(_) => DmarcResult::TempError,
        mail_auth::DmarcResult::PermError(_) => DmarcResult::PermError,
        mail_auth::DmarcResult::None => DmarcResult::None,
    }
}

fn dmarc_policy(policy: Policy) -> DmarcPolicy {
    match policy {
        Policy::Reject => DmarcPolicy::Reject,
        Policy::Quarantine => DmarcPolicy::Quarantine,
        Policy::None | Policy::Unspecified => DmarcPolicy::None,
    }
}

/// Line length to fold at (RFC 5322 2.1.1: lines SHOULD be at most 78 characters).
const LINE_CHARS_MAX: usize = 78;

/// The Authentication-Results field (RFC 8601 2.2): one resinfo per line, each folded at its
/// spaces where a line would pass 78 characters.
fn authentication_results(
    hostname: &str,
    input: &CheckInput<'_>,
    verdict: &Verdict,
    dmarc_domain: &str,
) -> String {
    let mut resinfos: Vec<Vec<String>> = Vec::new();
    // RFC 8601 2.7.2: smtp.mailfrom, or smtp.helo when HELO was the identity checked.
    resinfos.push(if input.mail_from.is_empty() {
        vec![
            format!("spf={}", verdict.spf.name()),
            format!("smtp.helo={}", pvalue(input.helo)),
        ]
    } else {
        vec![
            format!("spf={}", verdict.spf.name()),
            format!("smtp.mailfrom={}", pvalue(input.mail_from)),
        ]
    });
    if verdict.dkim.is_empty() {
        resinfos.push(vec!["dkim=none".into()]);
    }
    for outcome in &verdict.dkim {
        // RFC 8601 2.7.1: header.d and header.s; RFC 6008: header.b.
        let mut tokens = vec![format!("dkim={}", outcome.result.name())];
        if !outcome.domain.is_empty() {
            tokens.push(format!("header.d={}", pvalue(&outcome.domain)));
        }
        if !outcome.selector.is_empty() {
            tokens.push(format!("header.s={}", pvalue(&outcome.selector)));
        }
        if !outcome.signature_prefix.is_empty() {
            tokens.push(format!("header.b={}", pvalue(&outcome.signature_prefix)));
        }
        resinfos.push(tokens);
    }
    // RFC 7489 11.2: dmarc with header.from.
    let mut dmarc = vec![format!("dmarc={}", verdict.dmarc.name())];
    if !dmarc_domain.is_empty() {
        dmarc.push(format!("header.from={}", pvalue(dmarc_domain)));
    }
    if matches!(verdict.dmarc, DmarcResult::Pass | DmarcResult::Fail) {
        dmarc.push(format!("policy.dmarc={}", verdict.dmarc_policy.name()));
    }
    resinfos.push(dmarc);

    let mut header = format!("Authentication-Results: {hostname}");
    let mut line = header.len();
    for tokens in resinfos {
        header.push(';');
        for (i, token) in tokens.iter().enumerate() {
            if i == 0 || line + 1 + token.len() > LINE_CHARS_MAX {
                header.push_str("\r\n\t");
                line = 1;
            } else {
                header.push(' ');
                line += 1;
            }
            header.push_str(token);
            line += token.len();
        }
    }
    header.push_str("\r\n");
    header
}

/// A property value (RFC 8601 2.2 pvalue): a token (RFC 2045 5.1) or a mailbox-like
/// `local-part@domain` as they are, anything else as a quoted-string without control
/// characters, so that no input can end the field or inject a resinfo.
fn pvalue(value: &str) -> String {
    let value: String = value.chars().take(PVALUE_CHARS_MAX).collect();
    let is_token_char = |c: char| c.is_ascii_graphic() && !"()<>@,;:\\\"/[]?=".contains(c);
    let is_atext = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c);
    let is_domain_char = |c: char| c.is_ascii_alphanumeric() || "-._".contains(c);
    let token = !value.is_empty() && value.chars().all(is_token_char);
    let mailbox = value.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty()
            && local.chars().all(is_atext)
            && !domain.is_empty()
            && domain.chars().all(is_domain_char)
    });
    if token || mailbox {
        return value;
    }
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('"');
    for c in value.chars().filter(|c| !c.is_control()) {
        if c == '"' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pvalues_are_tokens_mailboxes_or_quoted() {
        assert_eq!(pvalue("example.org"), "example.org");
        assert_eq!(pvalue("a.b+c@example.org"), "a.b+c@example.org");
        assert_eq!(pvalue("ab/cd+ef"), "\"ab/cd+ef\"");
        assert_eq!(pvalue("x; dkim=pass"), "\"x; dkim=pass\"");
        assert_eq!(pvalue("a\r\nb\"c\\"), "\"ab\\\"c\\\\\"");
        assert_eq!(pvalue(""), "\"\"");
        assert_eq!(pvalue(&"x".repeat(1000)).len(), PVALUE_CHARS_MAX);
    }

    fn verdict(spf: SpfResult, spf_domain: &str, dkim: &[(&str, DkimResult)]) -> Verdict {
        Verdict {
            spf,
            spf_domain: spf_domain.into(),
            dkim: dkim
                .iter()
                .map(|(domain, result)| DkimOutcome {
                    domain: (*domain).into(),
                    selector: "s".into(),
                    result: *result,
                    signature_prefix: "AAAAAAAA".into(),
                })
                .collect(),
            dmarc: DmarcResult::None,
            dmarc_policy: DmarcPolicy::None,
            from_domain: None,
            header: String::new(),
        }
    }

    #[test]
    fn authenticated_for_takes_spf_exactly_and_dkim_from_parents() {
        let spf = verdict(SpfResult::Pass, "example.org", &[]);
        assert!(spf.authenticated_for("Example.ORG."));
        assert!(!spf.authenticated_for("mail.example.org"));
        let softfail = verdict(SpfResult::SoftFail, "example.org", &[]);
        assert!(!softfail.authenticated_for("example.org"));

        let dkim = verdict(
            SpfResult::Fail,
            "other.net",
            &[
                ("example.org", DkimResult::Pass),
                ("bad.net", DkimResult::Fail),
            ],
        );
        assert!(dkim.authenticated_for("example.org"));
        assert!(dkim.authenticated_for("mail.example.org"));
        assert!(!dkim.authenticated_for("badexample.org"));
        assert!(!dkim.authenticated_for("org"));
        assert!(!dkim.authenticated_for("bad.net"));
        assert!(!dkim.authenticated_for(""));
    }

    #[test]
    fn dmarc_rejects_only_failures_under_reject() {
        let mut v = verdict(SpfResult::Fail, "x", &[]);
        v.dmarc = DmarcResult::Fail;
        v.dmarc_policy = DmarcPolicy::Reject;
        assert!(v.dmarc_rejects());
        v.dmarc_policy = DmarcPolicy::Quarantine;
        assert!(!v.dmarc_rejects());
        v.dmarc = DmarcResult::TempError;
        v.dmarc_policy = DmarcPolicy::Reject;
        assert!(!v.dmarc_rejects());
    }

    #[test]
    fn the_header_is_folded_and_parsable() {
        let mut v = verdict(
            SpfResult::Pass,
            "example.org",
            &[("example.org", DkimResult::Pass), ("", DkimResult::Neutral)],
        );
        v.dmarc = DmarcResult::Pass;
        v.dmarc_policy = DmarcPolicy::Reject;
        let input = CheckInput {
            ip: IpAddr::from([192, 0, 2, 1]),
            helo: "mail.example.org",
            mail_from: "a-rather-long-local-part@a-long-subdomain.of.example.org",
            message: b"",
        };
        let header = authentication_results("mx.example.net", &input, &v, "example.org");
        assert_eq!(
            header,
            "Authentication-Results: mx.example.net;\r\n\
             \tspf=pass\r\n\
             \tsmtp.mailfrom=a-rather-long-local-part@a-long-subdomain.of.example.org;\r\n\
             \tdkim=pass header.d=example.org header.s=s header.b=AAAAAAAA;\r\n\
             \tdkim=neutral header.s=s header.b=AAAAAAAA;\r\n\
             \tdmarc=pass header.from=example.org policy.dmarc=reject\r\n"
        );
        assert!(
            header
                .split("\r\n")
                .all(|line| line.len() <= LINE_CHARS_MAX)
        );
    }
}
