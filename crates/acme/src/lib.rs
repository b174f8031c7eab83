//! Certificates by ACME (RFC 8555) for the mail server.
//!
//! [`obtain`] asks an ACME server (Let's Encrypt, or a private one) for one certificate covering
//! a list of DNS names, answering each authorization with HTTP-01 (RFC 8555 8.3) or
//! TLS-ALPN-01 (RFC 8737) through a [`Responder`] the server implements on its listeners, and
//! keeps the account, the certificate and its key in a directory (`<data_dir>/acme`).
//! [`next_attempt`] says when to try next (renewal before expiry, backoff after failures) and
//! [`status`] what the CLI shows. The server's wiring (the challenge routes, swapping the
//! certificate into its TLS listeners, `mailstow acme status|renew`) lives in the server.
//!
//! # The directory
//!
//! | file | what | mode |
//! | --- | --- | --- |
//! | `account.json` | the ACME account: its directory URL, contacts and instant-acme `AccountCredentials` (the account key) | 0600 |
//! | `key.pem` | the certificate's private key, PKCS#8 | 0600 |
//! | `cert.pem` | the certificate chain, leaf first | 0644 |
//! | `state.json` | names covered, validity, issue time, last attempt and error, failures, next attempt | 0644 |
//! | `lock` | held (`flock`) by the one renewal running on this directory | 0600 |
//!
//! Every file is written as `NAME.tmp`, fsynced, renamed over `NAME`, and the directory fsynced:
//! a crash leaves the old file or the new one, never a torn one.
//!
//! # Crash invariant of the certificate and its key
//!
//! `cert.pem` and `key.pem` must never be seen as a mismatched pair. A new pair is installed in
//! this order (`store::install_pair`):
//!
//! 1. the new key (only when it changes) is made durable as `key.pem.new`, then
//! 2. the new chain as `cert.pem.new` (each through its own `.tmp` and rename, so a `.new` file
//!    that exists is complete), the directory fsynced;
//! 3. `key.pem.new` is renamed over `key.pem`, then `cert.pem.new` over `cert.pem`, and the
//!    directory fsynced.
//!
//! So **`cert.pem.new` exists only when everything the swap needs is durable**. Recovery (run
//! before every read through this crate and before every renewal) rolls forward when
//! `cert.pem.new` exists (renames whatever of step 3 is left) and otherwise rolls back (deletes a
//! stray `key.pem.new` and `.tmp` files). [`load_certificate`] also checks that the leaf's public
//! key is the key's, and refuses a mismatched pair with an error. A reader that bypasses this
//! crate (a backup copying the directory) can see a mismatched pair only between the two renames
//! of step 3, and only when the key rotates.
//!
//! `state.json` is written after the pair; a crash between them leaves a state that names the
//! old certificate, which [`load_state`] corrects from `cert.pem` (the certificate on disk is the
//! truth for names and dates).
//!
//! # The key is kept across renewals
//!
//! By default a renewal signs its request with the key already in `key.pem`, so the public key
//! does not change and a published DANE record of the usual form `TLSA 3 1 1` (RFC 7671 5.1: the
//! SHA-256 of the leaf's SubjectPublicKeyInfo) stays valid across renewals. [`Config::rotate_key`]
//! makes each renewal use a new key: then publish the new key's TLSA record before the swap (or
//! publish two), or DANE senders defer mail to this server until the record changes.
//!
//! # Bounds
//!
//! One attempt takes at most [`OBTAIN_MAX`]; validation and issuance are each polled for at
//! most [`ORDER_POLL_MAX`]; at most [`NAMES_MAX`] names per certificate; the chain read back at
//! most [`CHAIN_BYTES_MAX`].
//!
//! # Known limits
//!
//! - A `Retry-After` is seen only when issuance polling outlasts it (instant-acme 0.8.5's
//!   `Error::Timeout`); on an error response (a `rateLimited` problem, RFC 8555 6.6) instant-acme
//!   drops the header, so the [`backoff`] alone spaces the attempts.
//! - Validation polling doubles its wait up to 8 s and does not read `Retry-After`.
//! - No DNS-01 (so no wildcards), no External Account Binding, no ACME Renewal Information.

mod certificate;
mod challenge;
mod http;
mod names;
mod obtain;
mod schedule;
mod store;

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

pub use challenge::{ACME_TLS_ALPN_PROTOCOL, Responder, tls_alpn01_certificate};
pub use names::NAMES_MAX;
pub use obtain::{CHAIN_BYTES_MAX, OBTAIN_MAX, ORDER_POLL_MAX, obtain};
pub use schedule::{
    BACKOFF_FIRST, BACKOFF_MAX, REISSUE_INTERVAL_MIN, RENEW_BEFORE_MAX, RETRY_AFTER_MAX, backoff,
    next_attempt, renewal_due,
};
pub use store::{CertificateFacts, State, Status, load_certificate, load_state, status};

/// How the ACME client is set up (`[acme]` in the server's configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The ACME server's directory (RFC 8555 7.1.1), e.g.
    /// `https://acme-v02.api.letsencrypt.org/directory`. Must be `https://`.
    pub directory_url: String,
    /// Contacts for the account (RFC 8555 7.3), `mailto:` URLs.
    pub contact: Vec<String>,
    /// A PEM file of CA certificates trusted for the ACME server's own HTTPS, besides the usual
    /// web roots: for a private ACME server.
    pub extra_roots_pem: Option<PathBuf>,
    /// The challenge answered for every name.
    pub challenge: Challenge,
    /// Renew when this much of the certificate's lifetime remains. `None`: when a third
    /// remains (Let's Encrypt's practice), at most [`RENEW_BEFORE_MAX`].
    pub renew_before: Option<Duration>,
    /// A new private key at each renewal instead of keeping the one in `key.pem` (see the crate
    /// doc: a published DANE `3 1 1` record must change with it).
    pub rotate_key: bool,
}

impl Config {
    /// A configuration with the defaults: HTTP-01, renewal at a third of the lifetime, the key
    /// kept, the usual web roots.
    pub fn new(directory_url: impl Into<String>) -> Self {
        Self {
            directory_url: directory_url.into(),
            contact: Vec::new(),
            extra_roots_pem: None,
            challenge: Challenge::Http01,
            renew_before: None,
            rotate_key: false,
        }
    }
}

/// The challenge type answered (RFC 8555 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Challenge {
    /// `http-01` (RFC 8555 8.3): the key authorization served at
    /// `http://NAME/.well-known/acme-challenge/TOKEN` on port 80.
    Http01,
    /// `tls-alpn-01` (RFC 8737): a self-signed certificate presented on port 443 to a client
    /// offering ALPN `acme-tls/1` with SNI = the name.
    TlsAlpn01,
}

impl fmt::Display for Challenge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Challenge::Http01 => "http-01",
            Challenge::TlsAlpn01 => "tls-alpn-01",
        })
    }
}

/// A certificate obtained (or loaded from the directory).
#[derive(Clone, PartialEq, Eq)]
pub struct Issued {
    /// The names the certificate covers (its subjectAltName DNS names, sorted).
    pub names: Vec<String>,
    /// The leaf's notAfter.
    pub not_after: SystemTime,
    /// The chain, leaf first, PEM.
    pub chain_pem: String,
    /// The leaf's private key, PKCS#8 PEM.
    pub key_pem: String,
}

impl fmt::Debug for Issued {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key stays out of logs.
        f.debug_struct("Issued")
            .field("names", &self.names)
            .field("not_after", &self.not_after)
            .field("chain_pem_bytes", &self.chain_pem.len())
            .finish_non_exhaustive()
    }
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration cannot work.
    #[error("acme configuration: {0}")]
    Config(String),
    /// A name cannot be put in a certificate by this client.
    #[error("name {name:?}: {reason}")]
    Name { name: String, reason: &'static str },
    /// A file of the directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file of the directory holds something this crate did not write (torn by something
    /// else, edited, or from another program).
    #[error("{}: {reason} (move the file away to start over)", path.display())]
    Corrupt { path: PathBuf, reason: String },
    /// The ACME server refused a request or could not be reached.
    #[error("ACME server: {0}")]
    Acme(#[from] instant_acme::Error),
    /// The ACME server did not offer the configured challenge for a name.
    #[error("the ACME server offers no {challenge} challenge for {name}")]
    ChallengeNotOffered { name: String, challenge: Challenge },
    /// Validation failed: the server could not verify a challenge, or an authorization or the
    /// order ended in a state other than valid.
    #[error("validation failed: {0}")]
    Validation(String),
    /// The certificate the server sent is unusable.
    #[error("certificate from the ACME server: {0}")]
    Certificate(String),
    /// Another renewal is running on the same directory.
    #[error("{}: another renewal is running", path.display())]
    Busy { path: PathBuf },
    /// The attempt took longer than [`OBTAIN_MAX`].
    #[error("the attempt took longer than {0:?}")]
    TimedOut(Duration),
}

impl Error {
    /// When the ACME server asked to be polled again (a `Retry-After`, RFC 8555 6.6 and
    /// 7.1.6), if it did.
    pub fn retry_after(&self) -> Option<SystemTime> {
        match self {
            Error::Acme(instant_acme::Error::Timeout(Some(at))) => {
                let wait = at.saturating_duration_since(std::time::Instant::now());
                SystemTime::now().checked_add(wait)
            }
            _ => None,
        }
    }
}
