//! What the operator sets in `[spam]` (docs/spam.md, docs/limits.md "Spam"), as the filter
//! uses it. The CLI parses the file; this is the typed result.

use std::sync::Arc;
use std::time::Duration;

use crate::milter::MilterConfig;

/// One DNS blocklist or allowlist zone (RFC 5782).
#[derive(Clone, Debug, PartialEq)]
pub struct Zone {
    /// The zone queried, e.g. `zen.spamhaus.org`.
    pub zone: String,
    /// What is looked up in it.
    pub kind: ZoneKind,
    /// The answers that mean "listed" (empty: any 127/8 answer but 127.0.0.1).
    pub codes: Vec<spam::CodeRange>,
    /// Points a listing adds to the score (negative for an allowlist).
    pub weight: f64,
    /// A listing of the client refuses the mail at MAIL FROM, naming the zone, instead of
    /// adding points (only for `ZoneKind::Ip`).
    pub reject: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneKind {
    /// The client's IP address (RFC 5782 2.1, 2.4).
    Ip,
    /// The From domain and the domains of links in the text (RFC 5782 2.3).
    Domain,
}

/// The outbound hygiene of docs/spam.md 5.
#[derive(Clone, Debug, PartialEq)]
pub struct OutboundLimits {
    /// Submissions scoring this much are refused.
    pub reject_threshold: f64,
    /// Flagged submissions (at least the junk threshold) within an hour that limit the
    /// account.
    pub flagged_max: u32,
    /// Messages an hour a limited account may send.
    pub limited_per_hour: u32,
    /// How long a limit lasts.
    pub limit_duration: Duration,
}

impl Default for OutboundLimits {
    fn default() -> OutboundLimits {
        OutboundLimits {
            reject_threshold: 12.0,
            flagged_max: 3,
            limited_per_hour: 10,
            limit_duration: Duration::from_secs(24 * 3600),
        }
    }
}

/// The `[spam]` section.
#[derive(Clone, Debug)]
pub struct Config {
    /// The built-in filter scores mail on the MX port (default true). Milters run either way.
    pub enabled: bool,
    pub thresholds: spam::Thresholds,
    pub weights: spam::Weights,
    /// Temporary failure for first-time senders scoring at least the greylist threshold
    /// (RFC 6647; default false).
    pub greylist: bool,
    /// How long a new triplet waits before its retry passes (default 5 minutes).
    pub greylist_delay: Duration,
    /// How long a passed triplet keeps passing after its last pass (default 35 days).
    pub greylist_pass_ttl: Duration,
    pub greylist_entries_max: usize,
    /// Trained messages of each class a model needs before its verdicts count.
    pub bayes_messages_min: u32,
    pub bayes_tokens_max: usize,
    pub trained_records_max: usize,
    pub reputation_rows_max: usize,
    /// Users whose model and reputation are kept in memory.
    pub models_cached_max: usize,
    /// How long a cached model is used before it is read again (another node may have
    /// trained it).
    pub model_ttl: Duration,
    pub tokenize_bytes_max: usize,
    pub tokens_per_message_max: usize,
    pub dnsbl: Vec<Zone>,
    /// The wait for all blocklist answers of one message, together.
    pub dnsbl_timeout: Duration,
    pub dnsbl_cache_max: usize,
    pub link_domains_max: usize,
    pub milters: Vec<Arc<MilterConfig>>,
    /// rspamd's controller (`host:port`): training goes there too.
    pub rspamd_controller: Option<String>,
    pub rspamd_password: Option<String>,
    pub training_queue_max: usize,
    pub outbound: OutboundLimits,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            enabled: true,
            thresholds: spam::Thresholds::default(),
            weights: spam::Weights::default(),
            greylist: false,
            greylist_delay: Duration::from_secs(300),
            greylist_pass_ttl: Duration::from_secs(35 * 24 * 3600),
            greylist_entries_max: 100_000,
            bayes_messages_min: 10,
            bayes_tokens_max: 100_000,
            trained_records_max: 50_000,
            reputation_rows_max: 10_000,
            models_cached_max: 1_000,
            model_ttl: Duration::from_secs(60),
            tokenize_bytes_max: 256 * 1024,
            tokens_per_message_max: 2_000,
            dnsbl: Vec::new(),
            dnsbl_timeout: Duration::from_millis(1_500),
            dnsbl_cache_max: 10_000,
            link_domains_max: 10,
            milters: Vec::new(),
            rspamd_controller: None,
            rspamd_password: None,
            training_queue_max: 1_000,
            outbound: OutboundLimits::default(),
        }
    }
}

impl Config {
    pub(crate) fn token_limits(&self) -> spam::TokenLimits {
        spam::TokenLimits {
            text_bytes_max: self.tokenize_bytes_max,
            tokens_max: self.tokens_per_message_max,
        }
    }

    /// The thresholds for `user`: the directory's per-user and per-domain rows over ours.
    pub(crate) fn thresholds_for(
        &self,
        directory: &directory::Directory,
        user: &str,
    ) -> spam::Thresholds {
        let set = directory.cache().spam_thresholds(user);
        spam::Thresholds {
            junk: set.junk.unwrap_or(self.thresholds.junk),
            reject: set.reject.unwrap_or(self.thresholds.reject),
            greylist: set.greylist.unwrap_or(self.thresholds.greylist),
        }
    }
}
