//! The spam verdict's pure parts (docs/spam.md): no I/O, no clock, no threads; functions
//! and data that the `filter` crate drives.
//!
//! - `tokenize(message, limits)`: the sorted token hashes of a message (bounded text and
//!   token count), the input of a [`Model`].
//! - [`Model`]: a per-user (or site-wide) Bayes classifier, token counts per [`Class`];
//!   `probability` (Robinson's chi-square combining), `train`, `untrain`, `prune`.
//! - `score(evidence, weights)`: the [`Score`] of a message, named reasons with points, from
//!   GTUBE, the Bayes probability, the sender's [`Reputation`], SPF/DKIM/DMARC and blocklist
//!   hits; `action(points, thresholds, ...)` the [`Action`].
//! - The `X-Spam-*` fields: `status_fields`, `strip_status_fields`, `status_of`, and
//!   `spamtest` for Sieve (RFC 5235).
//! - RFC 5782 names: `ip_query`, `domain_query`, `listed`; the keys of a message:
//!   `link_domains`, `from_address`, `network_key`.
//! - Training: `training_class` of a move, `digest` of a message.
//! - With the `corpus` feature, `corpus::generate`: a seeded synthetic labelled corpus for
//!   tests and the quality example (`examples/quality.rs`).
//!
//! No input panics: everything that reads a message is property-tested on random bytes and
//! on mutations of real messages.

#[cfg(feature = "corpus")]
pub mod corpus;
mod dnsbl;
mod fields;
mod header;
mod html;
mod model;
mod score;
mod text;
mod tokens;
mod training;
mod url;

pub use dnsbl::{
    CodeRange, domain_query, from_address, ip_query, link_domains, listed, network_key,
};
pub use fields::{Status, spamtest, status_fields, status_of, strip_status_fields};
pub use model::{
    Class, Counts, DISCRIMINATORS_MAX, Model, PROBABILITY_STRENGTH_MIN, TokenCounts,
    UNKNOWN_WORD_PROBABILITY, UNKNOWN_WORD_STRENGTH,
};
pub use score::{
    Action, Auth, DkimResult, DmarcResult, Evidence, Gtube, Reason, Reputation, Score, SpfResult,
    Thresholds, Weights, action, gtube, score,
};
pub use tokens::{TokenLimits, token_hash, tokenize};
pub use training::{digest, training_class};
