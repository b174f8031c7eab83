//! Outbound hygiene (docs/spam.md 5): what our own users submit is scored too, so a stolen
//! password sends little spam before the account is slowed and the operator told.

use std::time::Duration;

use directory::SpamOwner;

use crate::Filter;
use crate::accounts::HOUR;

/// What to do with a submission.
#[derive(Clone, Debug, PartialEq)]
pub enum Outbound {
    Accept,
    /// Refused as spam (`550 5.7.1`).
    Refuse(spam::Score),
    /// The account is limited and used up its hour (`451 4.7.1`).
    Limited {
        retry_after: Duration,
    },
}

impl Filter {
    /// The verdict on a message `user` submits: scored with the site-wide model, GTUBE and
    /// the domain blocklists (the milters marked for submission run in the session).
    pub async fn judge_submission(&self, user: &str, message: &[u8]) -> Outbound {
        let config = &self.config;
        let limits = &config.outbound;
        // A limited account first: its hour's allowance.
        let waiting = self.outbound.with(user, |account, now| {
            account.limited_until?;
            if account.sent_while_limited.len() as u32 >= limits.limited_per_hour {
                let oldest = account.sent_while_limited.first().copied().unwrap_or(now);
                return Some(HOUR.saturating_sub(now.duration_since(oldest)));
            }
            None
        });
        if let Some(retry_after) = waiting {
            return Outbound::Limited { retry_after };
        }
        let tokens = spam::tokenize(message, &config.token_limits());
        let site = self.states.get(SpamOwner::Site).await;
        let mut domains = Vec::new();
        if self.blocklists.has(crate::config::ZoneKind::Domain) {
            domains = spam::link_domains(message, config.link_domains_max);
        }
        let listed = self
            .blocklists
            .check(None, &domains)
            .await
            .into_iter()
            .map(|l| spam::Reason {
                name: format!("DNSBL_{}", l.zone),
                points: l.weight,
            })
            .collect();
        let evidence = spam::Evidence {
            gtube: spam::gtube(message),
            bayes: site
                .model
                .is_mature(config.bayes_messages_min)
                .then(|| site.model.probability(&tokens)),
            // Our own user: no reputation, no sender checks.
            auth: spam::Auth {
                spf: spam::SpfResult::Pass,
                dkim: spam::DkimResult::Pass,
                dmarc: spam::DmarcResult::Pass,
            },
            listed,
            ..spam::Evidence::default()
        };
        let mut score = spam::score(&evidence, &config.weights);
        // The authentication points are not evidence about our own users' mail.
        score.reasons.retain(|r| {
            !r.name.starts_with("DMARC")
                && !r.name.starts_with("SPF")
                && !r.name.starts_with("DKIM")
        });
        score.points = score.reasons.iter().map(|r| r.points).sum();
        let thresholds = config.thresholds_for(&self.directory, user);
        let refused = score.points >= limits.reject_threshold;
        let flagged = score.points >= thresholds.junk;
        let newly_limited = self.outbound.with(user, |account, now| {
            if account.limited_until.is_some() && !refused {
                account.sent_while_limited.push(now);
            }
            if flagged {
                account.flagged.push(now);
                if account.limited_until.is_none()
                    && account.flagged.len() as u32 >= limits.flagged_max
                {
                    account.limited_until = Some(now + limits.limit_duration);
                    return true;
                }
            }
            false
        });
        if refused {
            self.telemetry
                .outbound_spam(user, "refused", score.points, &score.reasons_text());
        }
        if newly_limited {
            self.telemetry
                .outbound_spam(user, "limited", score.points, &score.reasons_text());
        }
        if refused {
            Outbound::Refuse(score)
        } else {
            Outbound::Accept
        }
    }

    /// Ends `user`'s outbound limit on this node. Whether it had one.
    pub fn release(&self, user: &str) -> bool {
        self.outbound.release(user)
    }

    /// The accounts limited on this node now.
    pub fn limited_accounts(&self) -> Vec<String> {
        self.outbound.limited()
    }
}
