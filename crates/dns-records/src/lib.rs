//! Every DNS record a mail domain served by mailstow must publish, printed ready to paste
//! (`mailstow dns DOMAIN`), and checked against what DNS answers (`mailstow dns check
//! DOMAIN`).
//!
//! [`records`] makes the list from the domain's [`Facts`]: MX, the host's A/AAAA, SPF, DKIM,
//! DMARC, MTA-STS (TXT and the policy host), TLS-RPT, the RFC 6186 and RFC 8314 SRV records
//! (services we do not offer as "not available"), the autoconfig and autodiscover names, and
//! TLSA for DANE. [`zone_text`] prints them as zone-file lines; [`tlsa_3_1_1`] computes a
//! DANE-EE record's data from our certificate. Making and printing records is pure; checking
//! asks DNS through a [`Lookup`], which [`HickoryLookup`] implements over hickory-resolver.
//!
//! # How [`check`] compares
//!
//! - **MX**: ok when our host is among the domain's exchangers (other exchangers are fine).
//! - **SPF**: exactly one `v=spf1` TXT record at the domain (two are a permanent error,
//!   RFC 7208 4.5: wrong), and it authorizes our host: for each of our addresses (none known:
//!   our host as the domain's MX) its terms are tried in order and the first that matches
//!   decides; `mx` (the domain's), `a:HOST`, `ip4:`/`ip6:` and `all` are judged from the
//!   record. What needs more DNS (`include:`, `redirect=`, `a:`/`mx:` of another name,
//!   `exists:`, `ptr`) is not followed: when it could decide the result, the verdict is **ok
//!   with a note** naming it (a domain that delegates to a provider is a deliberate choice,
//!   and flagging it forever would teach operators to ignore the check); when a term we can
//!   judge fails us first, or nothing matches us, it is wrong.
//! - **DKIM**: exactly one TXT record at the selector, with our `p=` (whitespace ignored).
//! - **DMARC**: exactly one `v=DMARC1` record (RFC 7489 6.6.3) that parses (`v` first, `p=`
//!   none, quarantine or reject); a policy other than ours is ok, with a note.
//! - **MTA-STS**: exactly one `v=STSv1` record (RFC 8461 3.1) with our id; another id is
//!   wrong (senders take it for a changed policy). Its policy host is checked like the
//!   autoconfig names.
//! - **TLS-RPT**: exactly one `v=TLSRPTv1` record (RFC 8460 3) whose `rua` holds ours.
//! - **SRV**: one answer with our port and target (priority and weight are not compared);
//!   the "not available" form `0 0 0 .` likewise.
//! - **CNAME** (mta-sts, autoconfig, autodiscover): a CNAME to our host, or else the name's
//!   A/AAAA records equal our host's (ok, with a note).
//! - **TLSA**: one answer equal to ours (hexadecimal in either case).
//! - **A/AAAA**: the address is among the answers.
//!
//! A name without records of the type is **missing**; a lookup that fails (time-out,
//! SERVFAIL) is **unavailable**, never missing. Records are checked one after another, in
//! the order given.
//!
//! # What [`render_findings`] prints (a contract for scripts)
//!
//! One line per record, in the order given, `VERDICT NAME TYPE`, where VERDICT is `ok`,
//! `missing`, `wrong` or `unavailable` and NAME is fully qualified with its root dot. Under a
//! record that is not ok, `  expected: VALUE`; under a wrong one, one `  found: VALUE` per
//! answer kept (at most [`FOUND_MAX`]); under an unavailable one, `  error: WHY`; under any,
//! `  note: TEXT` when there is one. Detail lines start with two spaces; control characters
//! in values are escaped, so every line is one line. The last line is
//! `N records: A ok, B missing, C wrong, D unavailable`. These words and this layout stay
//! stable.

mod check;
mod facts;
mod hickory;
mod records;
mod spf;
mod tlsa;
mod zone;

pub use check::{Answer, FOUND_MAX, Finding, Lookup, Verdict, check, render_findings};
pub use facts::{
    DkimKey, Dmarc, DmarcPolicy, Facts, LIST_LEN_MAX, MtaSts, MtaStsMode, Service, ServiceName,
    TXT_VALUE_BYTES_MAX, Tlsa,
};
pub use hickory::{HickoryLookup, QUERY_TIMEOUT, QUERY_TRIES_MAX};
pub use records::{Kind, Record, Role, records};
pub use tlsa::tlsa_3_1_1;
pub use zone::{TXT_STRING_BYTES_MAX, zone_text};

/// What can go wrong making records or setting up a lookup.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A fact would not make a valid record.
    #[error("invalid {what}: {value}")]
    InvalidFact { what: &'static str, value: String },
    /// A list longer than [`LIST_LEN_MAX`].
    #[error("too many {what}: {len} (at most {LIST_LEN_MAX})")]
    TooMany { what: &'static str, len: usize },
    /// Not one whole X.509 certificate in DER.
    #[error("certificate: {0}")]
    Certificate(String),
    /// The resolver could not be set up.
    #[error("DNS resolver: {0}")]
    Dns(String),
}

#[cfg(test)]
mod tests;
