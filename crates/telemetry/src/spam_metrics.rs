//! The spam filter's metric families (registered once with the others); `spam.rs` moves
//! them with its events.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

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
pub(crate) struct ActionLabel {
    pub(crate) action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct FilterLabel {
    pub(crate) filter: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ClassLabel {
    pub(crate) class: &'static str,
}

pub(crate) struct SpamMetrics {
    pub(crate) verdicts: Family<ActionLabel, Counter>,
    pub(crate) milter_errors: Family<FilterLabel, Counter>,
    pub(crate) trained: Family<ClassLabel, Counter>,
    pub(crate) training_dropped: Counter,
    pub(crate) outbound_limited: Counter,
    pub(crate) outbound_refused: Counter,
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
