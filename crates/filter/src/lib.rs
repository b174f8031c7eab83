//! The spam and malware verdict of arriving mail, and training (docs/spam.md): the shell
//! asks a [`Filter`] about each client ([`Filter::client_refused`]), each message
//! ([`Filter::judge`], [`Filter::judge_submission`]) and runs the session's milters
//! ([`Milters`]); the IMAP and web shells report users' moves ([`Filter::filed`]), which a
//! background thread trains on. Pure parts (the classifier, the score) are the `spam`
//! crate's; the milter protocol is the `milter` crate's.

use std::sync::{Arc, OnceLock};

mod accounts;
pub mod chain;
pub mod config;
pub mod dnsbl;
mod jobs;
mod judge;
pub mod keys;
pub mod milter;
mod outbound;
pub mod rspamd;
mod state;
mod training;

pub use chain::{Ending, Milters, Refusal, Step};
pub use config::{Config, OutboundLimits, Zone, ZoneKind};
pub use jobs::Filed;
pub use judge::{Arrival, UserVerdict, auth_of};
pub use keys::SenderKeys;
pub use outbound::Outbound;
pub use training::Trained;

/// One node's spam filter.
pub struct Filter {
    pub(crate) config: Config,
    pub(crate) directory: directory::Directory,
    pub(crate) telemetry: Arc<telemetry::Telemetry>,
    /// Our host name: the authserv-id of the trace fields training reads.
    pub(crate) hostname: String,
    pub(crate) states: state::States,
    pub(crate) blocklists: Arc<dnsbl::Blocklists>,
    pub(crate) outbound: accounts::Accounts,
    pub(crate) store: OnceLock<Arc<dyn mail_model::Mailstore>>,
    pub(crate) trainer: OnceLock<jobs::Jobs>,
}

impl Filter {
    /// `resolver` answers the blocklist lookups (`None`: no zone is asked).
    pub fn new(
        config: Config,
        directory: directory::Directory,
        telemetry: Arc<telemetry::Telemetry>,
        hostname: &str,
        resolver: Option<hickory_resolver::TokioResolver>,
    ) -> Arc<Filter> {
        let blocklists = Arc::new(dnsbl::Blocklists::new(
            if config.dnsbl.is_empty() {
                None
            } else {
                resolver
            },
            config.dnsbl.clone(),
            config.dnsbl_timeout,
            config.dnsbl_cache_max,
        ));
        for milter in &config.milters {
            telemetry.milter_configured(&milter.name);
        }
        Arc::new(Filter {
            states: state::States::new(
                directory.clone(),
                config.models_cached_max,
                config.model_ttl,
            ),
            config,
            directory,
            telemetry,
            hostname: hostname.to_ascii_lowercase(),
            blocklists,
            outbound: accounts::Accounts::default(),
            store: OnceLock::new(),
            trainer: OnceLock::new(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether the built-in filter scores MX mail.
    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// The bytes `owner`'s classifier and reputation take in this node's memory (read now
    /// if not cached): what `spam stats` shows.
    pub async fn memory_bytes(&self, owner: directory::SpamOwner<'_>) -> usize {
        let state = self.states.get(owner).await;
        state.model.memory_bytes()
            + state
                .reputation
                .keys()
                .map(|k| k.capacity() + std::mem::size_of::<(String, spam::Counts)>())
                .sum::<usize>()
    }

    /// Owners whose state is in memory, and the bytes their models hold.
    pub fn footprint(&self) -> (usize, usize) {
        self.states.footprint()
    }
}

pub(crate) fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
