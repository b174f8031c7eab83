//! The SMTP shell's spam and malware decisions (docs/spam.md): the client at connect (a
//! blocklist that refuses it, the milters told of it), the recipients a milter changed, and
//! each recipient user's verdict after the data.

use std::sync::Arc;

use smtp::{Reply, Verdict};
use telemetry::shown;

use super::Smtp;
use crate::service::Service;
use crate::shell::Shell;

impl Smtp {
    /// The client connected (docs/spam.md 2, 4): a blocklist that refuses it at once, then
    /// the milters, told of the client; either may refuse the connection.
    pub(super) async fn connected(&mut self, shell: &Arc<Shell>) -> Verdict {
        let filter = self.parts.filter.clone();
        if self.service == Service::Smtp
            && let Some(listing) = filter.client_refused(self.ip).await
        {
            // RFC 5782 2.1: the zone's TXT record says why, when it has one.
            let why = listing.reason.map(|r| format!(": {r}")).unwrap_or_default();
            return Verdict::Reject(Reply::new(
                554,
                (5, 7, 1),
                format!(
                    "Service unavailable; client [{}] blocked using {}{why}",
                    self.ip, listing.zone
                ),
            ));
        }
        let configs: Vec<_> = filter
            .config()
            .milters
            .iter()
            .filter(|m| self.service == Service::Smtp || m.submission)
            .cloned()
            .collect();
        if configs.is_empty() || self.service == Service::Lmtp {
            return Verdict::Accept;
        }
        let info = filter::milter::ConnectInfo {
            client_ip: self.ip,
            client_port: self.port,
            client_name: format!("[{}]", self.ip),
            our_hostname: shell.config.hostname.clone(),
            daemon_name: self.service.name().to_string(),
        };
        let (milters, step) = filter::Milters::open(&configs, &info, shell.telemetry.clone()).await;
        self.milters = Some(milters);
        match verdict_of(step, &mut self.discarded) {
            // RFC 5321 3.1: a refused connection gets 554; a temporary one 421.
            Verdict::Reject(reply) if reply.code < 500 => {
                Verdict::Reject(Reply::new(421, (4, 7, 1), reply.text.clone()))
            }
            Verdict::Reject(reply) => {
                Verdict::Reject(Reply::new(554, (5, 7, 1), reply.text.clone()))
            }
            Verdict::Accept => Verdict::Accept,
        }
    }

    /// A milter added or deleted recipients at the end of the message: the queued
    /// recipients follow (an added address is resolved like a RCPT; an unknown one is
    /// dropped and logged).
    pub(super) fn recipients_changed(
        &self,
        shell: &Shell,
        envelope: &smtp::Envelope,
        targets: &[Vec<String>],
        mut recipients: Vec<String>,
        modifications: &[milter::Modification],
    ) -> Vec<String> {
        let cache = shell.directory.cache();
        for m in modifications {
            match m {
                milter::Modification::DeleteRecipient(address) => {
                    let address = address.trim_matches(['<', '>']);
                    for (i, rcpt) in envelope.recipients.iter().enumerate() {
                        if rcpt.eq_ignore_ascii_case(address)
                            && let Some(gone) = targets.get(i)
                        {
                            recipients.retain(|r| !gone.contains(r));
                        }
                    }
                    recipients.retain(|r| !r.eq_ignore_ascii_case(address));
                }
                milter::Modification::AddRecipient(address) => {
                    let address = address.trim_matches(['<', '>']).to_string();
                    match cache.resolve(&address) {
                        directory::Resolution::Local(found) => {
                            for target in found {
                                match target {
                                    directory::Target::User(u) | directory::Target::Remote(u) => {
                                        recipients.push(u)
                                    }
                                }
                            }
                        }
                        directory::Resolution::NotLocal => recipients.push(address),
                        directory::Resolution::UnknownUser => tracing::warn!(
                            event = "milter_recipient_unknown",
                            to = %shown(&address)
                        ),
                    }
                }
                _ => {}
            }
        }
        recipients.sort();
        recipients.dedup();
        recipients
    }

    /// docs/spam.md 2: every local recipient user's verdict, logged; the copies to queue,
    /// grouped by the fields they carry (the users of each); or the refusal of the whole
    /// message (every user's verdict is reject: 550; every one greylist or reject: 451).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn spam_verdicts(
        &self,
        shell: &Shell,
        envelope: &smtp::Envelope,
        recipients: &[String],
        message: &[u8],
        checks: Option<&sender_auth::Verdict>,
        quarantine: Option<&str>,
        session: &str,
    ) -> Result<Vec<(String, Vec<String>)>, Reply> {
        let filter = &self.parts.filter;
        let cache = shell.directory.cache();
        let users: Vec<String> = recipients
            .iter()
            .filter(|r| cache.is_user(r))
            .cloned()
            .collect();
        let others: Vec<String> = recipients
            .iter()
            .filter(|r| !cache.is_user(r))
            .cloned()
            .collect();
        let mut extra = Vec::new();
        if let Some(reason) = quarantine {
            extra.push(spam::Reason {
                name: format!("MILTER_QUARANTINE({})", shown(reason)),
                points: 0.0,
            });
        }
        let arrival = filter::Arrival {
            client: self.ip,
            mail_from: &envelope.from,
            message,
            auth: checks.map(filter::auth_of).unwrap_or_default(),
            keys: filter::keys::at_arrival(message, self.ip, checks),
            extra,
        };
        let mut verdicts = if filter.enabled() {
            filter.judge(&arrival, &users).await
        } else {
            users
                .iter()
                .map(|u| filter::UserVerdict {
                    user: u.clone(),
                    score: spam::Score::default(),
                    action: spam::Action::Accept,
                    thresholds: filter.config().thresholds,
                })
                .collect()
        };
        if quarantine.is_some() {
            for v in &mut verdicts {
                if v.action != spam::Action::Reject {
                    v.action = spam::Action::Junk;
                }
            }
        }
        let all = |f: &dyn Fn(spam::Action) -> bool| {
            others.is_empty() && !verdicts.is_empty() && verdicts.iter().all(|v| f(v.action))
        };
        let refuse_all = all(&|a| a == spam::Action::Reject);
        let greylist_all =
            !refuse_all && all(&|a| matches!(a, spam::Action::Reject | spam::Action::Greylist));
        for v in &mut verdicts {
            // SMTP has one reply after the data: unless every copy is refused, a refused
            // copy goes to Junk and a greylisted one through.
            if !refuse_all && !greylist_all {
                match v.action {
                    spam::Action::Reject => v.action = spam::Action::Junk,
                    spam::Action::Greylist => v.action = spam::Action::Accept,
                    _ => {}
                }
            }
            shell.telemetry.spam(&telemetry::SpamVerdict {
                proto: self.service.name(),
                session,
                user: &v.user,
                from: &envelope.from,
                client: self.ip,
                score: v.score.points,
                action: v.action.name(),
                reasons: &v.score.reasons_text(),
            });
        }
        if refuse_all {
            let top = verdicts
                .iter()
                .max_by(|a, b| a.score.points.total_cmp(&b.score.points))
                .map(|v| (v.score.points, v.score.reasons_text()))
                .unwrap_or_default();
            let reasons: String = top.1.chars().take(200).collect();
            return Err(Reply::new(
                550,
                (5, 7, 1),
                format!("message refused as spam (score {:.1}: {reasons})", top.0),
            ));
        }
        if greylist_all {
            // RFC 6647 4.2: a temporary failure the sender's retry passes.
            let minutes = filter.config().greylist_delay.as_secs().div_ceil(60).max(1);
            return Err(Reply::new(
                451,
                (4, 7, 1),
                format!("greylisted, please try again in {minutes} minutes"),
            ));
        }
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for v in &verdicts {
            let fields = v.fields();
            match groups.iter_mut().find(|(f, _)| *f == fields) {
                Some((_, members)) => members.push(v.user.clone()),
                None => groups.push((fields, vec![v.user.clone()])),
            }
        }
        if !others.is_empty() {
            match groups.first_mut() {
                Some((_, members)) => members.extend(others),
                None => groups.push((String::new(), others)),
            }
        }
        Ok(groups)
    }
}

/// What a milter step means for the session: a refusal, or accept (a discard is accepted,
/// and remembered so that the message is dropped).
pub(super) fn verdict_of(step: filter::Step, discarded: &mut Option<String>) -> Verdict {
    match step {
        filter::Step::Continue => Verdict::Accept,
        filter::Step::Discard => {
            discarded.get_or_insert_with(|| "milter".to_string());
            Verdict::Accept
        }
        filter::Step::Reject(r) | filter::Step::TempFail(r) => {
            Verdict::Reject(Reply::new(r.code, r.enhanced, r.text))
        }
    }
}
