//! The verdict on a message arriving on the MX port, per recipient user (docs/spam.md 2):
//! the evidence gathered once for the message (tokens, GTUBE, blocklists, the checks, the
//! milters), scored against each user's classifier, reputation and thresholds.

use std::net::IpAddr;

use directory::SpamOwner;

use crate::Filter;
use crate::dnsbl::Listing;
use crate::keys::SenderKeys;

/// What is known of a message on arrival.
pub struct Arrival<'a> {
    pub client: IpAddr,
    pub mail_from: &'a str,
    /// The message as it will be queued (our trace fields included).
    pub message: &'a [u8],
    pub auth: spam::Auth,
    pub keys: SenderKeys,
    /// Points from the milters (a quarantine, their own scores).
    pub extra: Vec<spam::Reason>,
}

/// One recipient user's verdict.
#[derive(Clone, Debug)]
pub struct UserVerdict {
    pub user: String,
    pub score: spam::Score,
    pub action: spam::Action,
    pub thresholds: spam::Thresholds,
}

impl UserVerdict {
    /// The fields our verdict puts on this user's copy.
    pub fn fields(&self) -> String {
        spam::status_fields(&self.score, &self.thresholds, self.action)
    }
}

impl Filter {
    /// The blocklist listings of the client that refuse its mail at once (`reject = true`
    /// zones, docs/spam.md 2), within the lookups' bounded wait.
    pub async fn client_refused(&self, client: IpAddr) -> Option<Listing> {
        if !self.blocklists.has(crate::config::ZoneKind::Ip) {
            return None;
        }
        self.blocklists
            .check_refusing(client)
            .await
            .into_iter()
            .find(|l| l.reject)
    }

    /// Every recipient user's verdict on `arrival`. Greylisting is settled here: a
    /// `Greylist` action whose triplet has waited long enough becomes `Accept`.
    pub async fn judge(&self, arrival: &Arrival<'_>, users: &[String]) -> Vec<UserVerdict> {
        let config = &self.config;
        let message = arrival.message;
        let gtube = spam::gtube(message);
        let tokens = spam::tokenize(message, &config.token_limits());
        let mut domains: Vec<String> = Vec::new();
        if self.blocklists.has(crate::config::ZoneKind::Domain) {
            if let Some(from) = arrival
                .keys
                .address
                .as_deref()
                .and_then(|a| a.rsplit_once('@'))
            {
                domains.push(from.1.to_string());
            }
            for d in spam::link_domains(message, config.link_domains_max) {
                if !domains.contains(&d) {
                    domains.push(d);
                }
            }
        }
        let listings = self.blocklists.check(Some(arrival.client), &domains).await;
        let listed: Vec<spam::Reason> = listings
            .iter()
            .filter(|l| !l.reject)
            .map(|l| spam::Reason {
                name: format!("DNSBL_{}", l.zone),
                points: l.weight,
            })
            .collect();
        let site = self.states.get(SpamOwner::Site).await;
        let mut verdicts = Vec::with_capacity(users.len());
        for user in users {
            let state = self.states.get(SpamOwner::User(user)).await;
            let model = if state.model.is_mature(config.bayes_messages_min) {
                Some(&state.model)
            } else if site.model.is_mature(config.bayes_messages_min) {
                Some(&site.model)
            } else {
                None
            };
            let reputation = arrival.keys.reputation(&state.reputation);
            let first_time = reputation.first_time();
            let evidence = spam::Evidence {
                gtube,
                bayes: model.map(|m| m.probability(&tokens)),
                reputation,
                auth: arrival.auth.clone(),
                listed: listed.clone(),
                extra: arrival.extra.clone(),
            };
            let score = spam::score(&evidence, &config.weights);
            let thresholds = config.thresholds_for(&self.directory, user);
            let mut action = spam::action(score.points, &thresholds, first_time, config.greylist);
            if action == spam::Action::Greylist && self.greylist_passes(arrival, user).await {
                action = spam::Action::Accept;
            }
            verdicts.push(UserVerdict {
                user: user.clone(),
                score,
                action,
                thresholds,
            });
        }
        verdicts
    }

    /// RFC 6647 4.2: the triplet (client network, sender, recipient) has waited its delay.
    /// A directory that does not answer lets the message through: greylisting is a
    /// nuisance for spammers, not worth losing mail over.
    async fn greylist_passes(&self, arrival: &Arrival<'_>, user: &str) -> bool {
        let triplet = spam::digest(
            format!(
                "{}\0{}\0{}",
                spam::network_key(arrival.client),
                arrival.mail_from.to_ascii_lowercase(),
                user
            )
            .as_bytes(),
        );
        let now = crate::now_s();
        let asked = self.directory.greylist(
            &triplet,
            now,
            self.config.greylist_delay.as_secs(),
            self.config.greylist_pass_ttl.as_secs(),
            self.config.greylist_entries_max,
        );
        match tokio::time::timeout(std::time::Duration::from_secs(2), asked).await {
            Ok(Ok(directory::Greylisted::Pass)) => true,
            Ok(Ok(directory::Greylisted::Wait { .. })) => false,
            Ok(Err(e)) => {
                tracing::warn!(event = "greylist_error", error = %e);
                true
            }
            Err(_) => {
                tracing::warn!(
                    event = "greylist_error",
                    error = "the directory did not answer in time"
                );
                true
            }
        }
    }
}

/// The checks' verdict as the score reads it.
pub fn auth_of(verdict: &sender_auth::Verdict) -> spam::Auth {
    use sender_auth::{DkimResult, DmarcResult, SpfResult};
    spam::Auth {
        spf: match verdict.spf {
            SpfResult::Pass => spam::SpfResult::Pass,
            SpfResult::Fail => spam::SpfResult::Fail,
            SpfResult::SoftFail => spam::SpfResult::SoftFail,
            SpfResult::Neutral => spam::SpfResult::Neutral,
            SpfResult::None => spam::SpfResult::None,
            SpfResult::TempError => spam::SpfResult::TempError,
            SpfResult::PermError => spam::SpfResult::PermError,
        },
        dkim: if verdict.dkim.is_empty() {
            spam::DkimResult::None
        } else if verdict.dkim.iter().any(|d| d.result == DkimResult::Pass) {
            spam::DkimResult::Pass
        } else if verdict
            .dkim
            .iter()
            .any(|d| d.result == DkimResult::TempError)
        {
            spam::DkimResult::TempError
        } else {
            spam::DkimResult::Fail
        },
        dmarc: match verdict.dmarc {
            DmarcResult::Pass => spam::DmarcResult::Pass,
            DmarcResult::Fail => spam::DmarcResult::Fail,
            _ => spam::DmarcResult::None,
        },
    }
}
