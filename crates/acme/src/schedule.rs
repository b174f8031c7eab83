//! When to try next: renewal before expiry, backoff after failures. Pure: the caller passes the
//! time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::Config;
use crate::names;
use crate::store::{CertificateFacts, State};

/// The most of a lifetime the default renewal window takes: Let's Encrypt renews a 90-day
/// certificate 30 days before it ends.
pub const RENEW_BEFORE_MAX: Duration = Duration::from_secs(30 * 86_400);

/// The wait after the first failed attempt; it doubles with each further failure.
pub const BACKOFF_FIRST: Duration = Duration::from_secs(60);

/// The longest wait between failed attempts.
pub const BACKOFF_MAX: Duration = Duration::from_secs(6 * 3600);

/// The longest a server's `Retry-After` is obeyed: a later one (a mistake, or hostile) would
/// let the certificate expire unattended.
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(24 * 3600);

/// The shortest time between two issuances of the same names: a certificate whose whole
/// lifetime is inside its renewal window (a 1-day certificate renewed 2 days before expiry)
/// would otherwise be reissued in a loop.
pub const REISSUE_INTERVAL_MIN: Duration = Duration::from_secs(3600);

/// When the certificate `facts` is due for renewal: `renew_before` before its end, or by
/// default when a third of its lifetime remains, at most [`RENEW_BEFORE_MAX`] before its end.
pub fn renewal_due(facts: &CertificateFacts, renew_before: Option<Duration>) -> SystemTime {
    let lifetime = facts
        .not_after
        .duration_since(facts.not_before)
        .unwrap_or(Duration::ZERO);
    let window = renew_before.unwrap_or_else(|| (lifetime / 3).min(RENEW_BEFORE_MAX));
    facts.not_after.checked_sub(window).unwrap_or(UNIX_EPOCH)
}

/// The wait after `consecutive_failures` failed attempts: none after none, then
/// [`BACKOFF_FIRST`] doubling up to [`BACKOFF_MAX`].
pub fn backoff(consecutive_failures: u32) -> Duration {
    let Some(doublings) = consecutive_failures.checked_sub(1) else {
        return Duration::ZERO;
    };
    let factor = 1u32.checked_shl(doublings.min(31)).unwrap_or(u32::MAX);
    BACKOFF_FIRST.saturating_mul(factor).min(BACKOFF_MAX)
}

/// When to attempt next for a certificate covering `names`, never before `now`:
///
/// - at once when there is no certificate or it covers other names than `names`;
/// - otherwise when it is due for renewal ([`renewal_due`] with `config.renew_before`), but not
///   sooner than [`REISSUE_INTERVAL_MIN`] after it was issued;
/// - and after a failure, not before the [`backoff`] has passed since the last attempt, nor
///   before the server's `Retry-After` (RFC 8555 6.6: a client that is rate limited must wait;
///   obeyed up to [`RETRY_AFTER_MAX`] after the attempt).
pub fn next_attempt(
    config: &Config,
    names: &[String],
    state: &State,
    now: SystemTime,
) -> SystemTime {
    let wanted = names::normalize(names).ok();
    let due = match &state.certificate {
        Some(facts) if Some(&facts.names) == wanted.as_ref() => {
            let earliest = facts
                .issued_at
                .checked_add(REISSUE_INTERVAL_MIN)
                .unwrap_or(facts.issued_at);
            renewal_due(facts, config.renew_before).max(earliest)
        }
        // No certificate, or other names (invalid names too: the attempt reports them).
        _ => now,
    };
    let mut not_before = now;
    if state.consecutive_failures > 0
        && let Some(last) = state.last_attempt
    {
        let after_backoff = last
            .checked_add(backoff(state.consecutive_failures))
            .unwrap_or(last);
        not_before = not_before.max(after_backoff);
        if let Some(retry_after) = state.retry_after {
            let obeyed_max = last.checked_add(RETRY_AFTER_MAX).unwrap_or(last);
            not_before = not_before.max(retry_after.min(obeyed_max));
        }
    }
    due.max(not_before)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);
    const HOUR: Duration = Duration::from_secs(3600);

    fn at(day: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_900_000_000) + DAY * day as u32
    }

    fn names() -> Vec<String> {
        vec!["mail.example.org".into(), "mta-sts.example.org".into()]
    }

    fn issued(lifetime_days: u32) -> State {
        State {
            certificate: Some(CertificateFacts {
                names: names(),
                not_before: at(0),
                not_after: at(0) + DAY * lifetime_days,
                issued_at: at(0),
            }),
            last_attempt: Some(at(0)),
            ..State::default()
        }
    }

    fn config() -> Config {
        Config::new("https://acme.example/directory")
    }

    #[test]
    fn a_90_day_certificate_renews_with_30_days_left() {
        let state = issued(90);
        assert_eq!(next_attempt(&config(), &names(), &state, at(1)), at(60));
        // Once due, at once.
        assert_eq!(next_attempt(&config(), &names(), &state, at(75)), at(75));
        // An expired certificate too.
        assert_eq!(next_attempt(&config(), &names(), &state, at(95)), at(95));
    }

    #[test]
    fn the_default_window_is_a_third_of_the_lifetime_up_to_30_days() {
        assert_eq!(next_attempt(&config(), &names(), &issued(6), at(1)), at(4));
        assert_eq!(
            next_attempt(&config(), &names(), &issued(365), at(1)),
            at(335)
        );
    }

    #[test]
    fn renew_before_sets_the_window() {
        let mut config = config();
        config.renew_before = Some(10 * DAY);
        assert_eq!(next_attempt(&config, &names(), &issued(90), at(1)), at(80));
    }

    #[test]
    fn a_certificate_shorter_than_its_window_is_due_but_not_reissued_in_a_loop() {
        let mut config = config();
        config.renew_before = Some(2 * DAY);
        let state = issued(1);
        let just_issued = at(0) + Duration::from_secs(5);
        assert_eq!(
            next_attempt(&config, &names(), &state, just_issued),
            at(0) + REISSUE_INTERVAL_MIN
        );
        let later = at(0) + 2 * HOUR;
        assert_eq!(next_attempt(&config, &names(), &state, later), later);
    }

    #[test]
    fn no_certificate_or_other_names_is_at_once() {
        let now = at(3);
        assert_eq!(
            next_attempt(&config(), &names(), &State::default(), now),
            now
        );
        let more = vec![
            "autoconfig.example.org".to_owned(),
            "mail.example.org".into(),
        ];
        assert_eq!(next_attempt(&config(), &more, &issued(90), now), now);
        // Same names, other spelling and order: the same certificate.
        let respelled = vec!["MTA-STS.example.org.".to_owned(), "mail.example.org".into()];
        assert_eq!(
            next_attempt(&config(), &respelled, &issued(90), now),
            at(60)
        );
    }

    #[test]
    fn backoff_doubles_from_a_minute_to_six_hours() {
        assert_eq!(backoff(0), Duration::ZERO);
        assert_eq!(backoff(1), Duration::from_secs(60));
        assert_eq!(backoff(2), Duration::from_secs(120));
        assert_eq!(backoff(3), Duration::from_secs(240));
        assert_eq!(backoff(9), Duration::from_secs(60 * 256));
        assert_eq!(backoff(10), BACKOFF_MAX);
        assert_eq!(backoff(40), BACKOFF_MAX);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }

    #[test]
    fn after_failures_the_backoff_holds_even_when_due() {
        let failed_at = at(2);
        let state = State {
            last_attempt: Some(failed_at),
            consecutive_failures: 3,
            last_error: Some("connection refused".into()),
            ..State::default()
        };
        // No certificate: due at once, but not before 4 minutes after the failure.
        let now = failed_at + Duration::from_secs(10);
        assert_eq!(
            next_attempt(&config(), &names(), &state, now),
            failed_at + Duration::from_secs(240)
        );
        let later = failed_at + HOUR;
        assert_eq!(next_attempt(&config(), &names(), &state, later), later);
    }

    #[test]
    fn a_failed_early_renewal_waits_for_the_renewal_time_not_the_backoff() {
        let mut state = issued(90);
        state.last_attempt = Some(at(5));
        state.consecutive_failures = 1;
        assert_eq!(next_attempt(&config(), &names(), &state, at(5)), at(60));
    }

    #[test]
    fn retry_after_is_obeyed_up_to_a_day() {
        let failed_at = at(2);
        let mut state = State {
            last_attempt: Some(failed_at),
            consecutive_failures: 1,
            retry_after: Some(failed_at + 3 * HOUR),
            ..State::default()
        };
        assert_eq!(
            next_attempt(&config(), &names(), &state, failed_at),
            failed_at + 3 * HOUR
        );
        state.retry_after = Some(failed_at + 30 * DAY);
        assert_eq!(
            next_attempt(&config(), &names(), &state, failed_at),
            failed_at + RETRY_AFTER_MAX
        );
        // Shorter than the backoff: the backoff holds.
        state.retry_after = Some(failed_at + Duration::from_secs(1));
        assert_eq!(
            next_attempt(&config(), &names(), &state, failed_at),
            failed_at + BACKOFF_FIRST
        );
    }

    #[test]
    fn a_certificate_with_dates_reversed_is_due_at_once() {
        let mut state = issued(90);
        let facts = state.certificate.as_mut().unwrap();
        std::mem::swap(&mut facts.not_before, &mut facts.not_after);
        facts.issued_at = at(0);
        let now = at(1);
        assert_eq!(next_attempt(&config(), &names(), &state, now), now);
    }
}
