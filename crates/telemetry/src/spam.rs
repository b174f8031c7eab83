//! The spam filter's events (docs/spam.md): one `event=spam` line per scored recipient,
//! milter failures, training, outbound hygiene; and their metrics.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::{ActionLabel, Telemetry, shown};

/// The `action` values of `event=spam` lines and of `mailstow_spam_verdicts_total`: the
/// built-in filter's actions and what a milter may decide.
pub const SPAM_ACTIONS: [&str; 7] = [
    "accept",
    "greylist",
    "junk",
    "reject",
    "tempfail",
    "discard",
    "quarantine",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FilterLabel {
    filter: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabel {
    class: &'static str,
}

pub(crate) struct SpamMetrics {
    verdicts: Family<ActionLabel, Counter>,
    milter_errors: Family<FilterLabel, Counter>,
    trained: Family<ClassLabel, Counter>,
    training_dropped: Counter,
    outbound_limited: Counter,
    outbound_refused: Counter,
}

impl SpamMetrics {
    pub(crate) fn register(registry: &mut Registry) -> SpamMetrics {
        let metrics = SpamMetrics {
            verdicts: Family::default(),
            milter_errors: Family::default(),
            trained: Family::default(),
            training_dropped: Counter::default(),
            outbound_limited: Counter::default(),
            outbound_refused: Counter::default(),
        };
        registry.register(
            "mailstow_spam_verdicts",
            "Spam verdicts on arriving mail, per recipient user, by action",
            metrics.verdicts.clone(),
        );
        registry.register(
            "mailstow_milter_errors",
            "Milter calls that failed or timed out (the filter's default action applied), by filter",
            metrics.milter_errors.clone(),
        );
        registry.register(
            "mailstow_spam_trained",
            "Messages the classifier was trained on, by class",
            metrics.trained.clone(),
        );
        registry.register(
            "mailstow_spam_training_dropped",
            "Training jobs dropped because the trainer's queue was full",
            metrics.training_dropped.clone(),
        );
        registry.register(
            "mailstow_spam_outbound_limited",
            "Accounts limited for sending spam",
            metrics.outbound_limited.clone(),
        );
        registry.register(
            "mailstow_spam_outbound_refused",
            "Submitted messages refused as spam",
            metrics.outbound_refused.clone(),
        );
        for action in SPAM_ACTIONS {
            let _ = metrics.verdicts.get_or_create(&ActionLabel { action });
        }
        for class in ["spam", "ham"] {
            let _ = metrics.trained.get_or_create(&ClassLabel { class });
        }
        metrics
    }
}

/// One recipient's verdict.
pub struct SpamVerdict<'a> {
    pub proto: &'static str,
    /// The session's id (its Received id).
    pub session: &'a str,
    pub user: &'a str,
    pub from: &'a str,
    pub client: std::net::IpAddr,
    pub score: f64,
    pub action: &'static str,
    /// `NAME=points,...`.
    pub reasons: &'a str,
}

impl Telemetry {
    /// `event=spam`: the verdict on one recipient user's copy.
    pub fn spam(&self, v: &SpamVerdict<'_>) {
        self.spam
            .verdicts
            .get_or_create(&ActionLabel { action: v.action })
            .inc();
        tracing::info!(
            event = "spam",
            proto = v.proto,
            session = %shown(v.session),
            user = %shown(v.user),
            from = %format!("<{}>", shown(v.from)),
            client = %v.client,
            score = %format!("{:.1}", v.score),
            action = v.action,
            reasons = %shown(v.reasons)
        );
    }

    /// A milter did not answer in time, could not be reached or broke the protocol: its
    /// default action applied (`default`).
    pub fn milter_error(&self, filter: &str, step: &str, error: &str, default: &'static str) {
        self.spam
            .milter_errors
            .get_or_create(&FilterLabel {
                filter: filter.to_string(),
            })
            .inc();
        tracing::warn!(
            event = "milter_error",
            filter = %shown(filter),
            step,
            error = %shown(error),
            applied = default
        );
    }

    /// Messages trained for `user` (`site` for the site-wide model), and how many were
    /// already trained as that class.
    pub fn spam_trained(
        &self,
        user: &str,
        class: &'static str,
        trained: u64,
        skipped: u64,
        source: &str,
    ) {
        self.spam
            .trained
            .get_or_create(&ClassLabel { class })
            .inc_by(trained);
        tracing::info!(
            event = "spam_trained",
            user = %shown(user),
            class,
            messages = trained,
            already = skipped,
            source
        );
    }

    pub fn spam_training_dropped(&self, user: &str) {
        self.spam.training_dropped.inc();
        tracing::warn!(event = "spam_training_dropped", user = %shown(user));
    }

    /// A user's submission scored as spam: `refused`, or the account `limited`.
    pub fn outbound_spam(&self, user: &str, action: &'static str, score: f64, reasons: &str) {
        match action {
            "limited" => self.spam.outbound_limited.inc(),
            _ => self.spam.outbound_refused.inc(),
        };
        tracing::warn!(
            event = "outbound_spam",
            user = %shown(user),
            action,
            score = %format!("{score:.1}"),
            reasons = %shown(reasons)
        );
    }
}
