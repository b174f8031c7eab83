//! The spam filter's events (docs/spam.md): one `event=spam` line per scored recipient,
//! milter failures, training, outbound hygiene; and their metrics.

use crate::spam_metrics::{ActionLabel, ClassLabel, FilterLabel};
use crate::{Telemetry, shown};

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

    /// A milter the configuration names: its error series exists from the start, at 0.
    pub fn milter_configured(&self, filter: &str) {
        let _ = self.spam.milter_errors.get_or_create(&FilterLabel {
            filter: filter.to_string(),
        });
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
