//! Sender authentication: DKIM signing of outgoing mail, and SPF, DKIM and DMARC checks of
//! incoming mail, on the mail-auth crate (its verifiers and signer, aws-lc-rs crypto,
//! hickory DNS).
//!
//! Outgoing:
//! - `generate(Algorithm) -> GeneratedKey`: an Ed25519 (RFC 8463) or RSA 2048 key pair, the
//!   private key as PKCS#8 PEM, the public key as the DNS record's `p=` value;
//!   `dns_record(algorithm, p)` is the TXT record to publish at
//!   `<selector>._domainkey.<domain>` (RFC 6376 3.6.1).
//! - `Signer::new(domain, selector, algorithm, pem)`, then `signer.sign(message)`: the
//!   DKIM-Signature field to prepend (relaxed/relaxed, ed25519-sha256 or rsa-sha256).
//!
//! Incoming:
//! - `Checker::new(dns_servers, hostname)`, one per server (its resolver caches answers), then
//!   `checker.check(&CheckInput { ip, helo, mail_from, message }).await -> Verdict`: SPF for
//!   MAIL FROM (HELO for the null sender), each DKIM signature, DMARC from those, and the
//!   Authentication-Results field (RFC 8601) to prepend. `check` runs on tokio (time and I/O
//!   enabled), as hickory does. `Verdict::dmarc_rejects` says
//!   whether DMARC asks to refuse the message; `Verdict::authenticated_for(domain)` whether
//!   SPF or DKIM vouch for a domain (to refuse forged local senders).
//! - Before prepending our field, `strip_our_authentication_results(message, hostname)`
//!   removes any that claim to be ours (RFC 8601 5). `from_domain(message)` is the
//!   RFC5322.From domain.
//!
//! Bounds, since `check` runs on whatever the internet sends:
//! - At most `DKIM_SIGNATURES_MAX` signatures are verified, the first in header order:
//!   `check` truncates the parsed message's signature list (mail-auth's
//!   `AuthenticatedMessage::dkim_headers` is public) before verifying, so a message with
//!   1,000 signatures costs 5 lookups, not 1,000. Signatures listing more than
//!   `DKIM_SIGNED_FIELDS_MAX` fields are reported as `policy` without verification.
//! - A DNS query gets `DNS_TRIES` (2) tries of `DNS_TIMEOUT` (5 s) each, and the whole check
//!   ends after `CHECK_TIME_MAX` (12 s): whatever has not finished by then is temperror.
//! - SPF's limits (RFC 7208 4.6.4) are mail-auth's: 10 DNS-querying terms, 10 exchanges per
//!   `mx`, and 20 seconds. It does not apply the 2 void-lookup limit (a SHOULD);
//!   `CHECK_TIME_MAX` bounds what that costs.
//! - No input panics: malformed messages give none/neutral results (a property test feeds
//!   random bytes and mutations of signed messages).

mod cache;
mod check;
mod headers;
mod keys;
mod sign;
mod srs;

pub use cache::RECORD_CACHE_ENTRIES_MAX;
pub use check::{
    CHECK_TIME_MAX, CheckInput, Checker, DKIM_SIGNATURES_MAX, DKIM_SIGNED_FIELDS_MAX, DNS_TIMEOUT,
    DNS_TRIES, DkimOutcome, DkimResult, DmarcPolicy, DmarcResult, SpfResult, Verdict, resolver,
};
pub use headers::{from_domain, strip_our_authentication_results};
pub use keys::{Algorithm, GeneratedKey, dns_record, generate};
pub use sign::Signer;
pub use srs::{SRS_VALID_DAYS, Srs, SrsError};

/// Everything that can go wrong in this crate; `check` itself cannot fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unknown DKIM key algorithm {0:?} (expected ed25519 or rsa)")]
    UnknownAlgorithm(String),
    #[error("generating a key pair failed")]
    KeyGeneration,
    #[error("not a usable {0} private key: {1}")]
    Key(Algorithm, String),
    #[error("invalid DKIM domain {0:?}")]
    InvalidDomain(String),
    #[error("invalid DKIM selector {0:?}")]
    InvalidSelector(String),
    #[error("invalid hostname {0:?} for Authentication-Results")]
    InvalidHostname(String),
    #[error("DKIM signing failed: {0}")]
    Sign(String),
    #[error("setting up the DNS resolver failed: {0}")]
    Dns(String),
}
