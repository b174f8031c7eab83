//! Transport security for outbound SMTP: which TLS a session to a recipient domain's exchanger
//! must have.
//!
//! - **MTA-STS** (RFC 8461): the `_mta-sts` TXT record's id, the policy fetched over HTTPS from
//!   `mta-sts.DOMAIN` (WebPKI, no redirects, bounded), cached per domain until `max_age` and
//!   kept in a file so a restart keeps enforcing; our own policy rendered (`Policy::to_text`).
//! - **DANE** (RFC 7672): MX, address and TLSA lookups with their DNSSEC status taken from the
//!   configured validating resolver's AD bit (`dns`), and a rustls verifier for DANE-EE and
//!   DANE-TA records (`DaneVerifier`).
//! - **The decision** (`Planner`): `plan(domain)` once per domain, then
//!   `requirement(plan, mx_host)` and `client_config(requirement)` per session. DANE takes
//!   precedence where it applies; an enforced STS policy skips exchangers it does not name and
//!   never falls back to plaintext; `testing` reports and delivers opportunistically.
//! - **Reports** (RFC 8460): `ResultType` for a failed session and `AppliedPolicy`, the
//!   policy a TLS-RPT recorder counts it under.
//!
//! Delivery's loop, in outline:
//! ```text
//! let plan = planner.plan(domain).await;            // Exchangers::Hosts(..) or a DNS outcome
//! for host in hosts {
//!     let requirement = planner.requirement(&plan, &host.name);
//!     let Some(config) = planner.client_config(&requirement) else { skip or defer; continue };
//!     // no STARTTLS offered and requirement.tls_required(): temporary failure, next host
//!     // handshake error e: ResultType::from_tls_error(&e, plan.applied_policy(&requirement).kind)
//!     // handshake done: planner.check_session(&requirement, peer_certificates) for testing
//! }
//! ```

mod cache;
mod dane;
mod dns;
mod fetch;
mod plan;
mod report;
mod sts;

pub use cache::{CACHE_FILE_NAME, CachedPolicy, StsCache};
pub use dane::{
    DaneVerifier, TLSA_DATA_BYTES_MAX, TLSA_RECORDS_MAX, Tlsa, USAGE_DANE_EE, USAGE_DANE_TA,
};
pub use fetch::{FetchError, Fetcher, RESPONSE_HEAD_BYTES_MAX};
pub use plan::{
    Config, DaneStatus, DomainPlan, Error, Exchangers, MX_HOSTS_MAX, MxHost, POLICIES_CACHED_MAX,
    Planner, Requirement,
};
pub use report::{AppliedPolicy, PolicyKind, ResultType};
pub use sts::{
    MAX_AGE_MAX, MX_PATTERNS_MAX, Mode, POLICY_BYTES_MAX, POLICY_ID_BYTES_MAX, Policy, PolicyError,
    TxtError, mx_matches, txt_policy_id,
};
