//! The last successful login of each user (`users.last_login_at`, for `mailstow user list`),
//! and the login history the web view's account page shows (`logins`: when and from where,
//! failed attempts included: the seed's logon info).
//!
//! A login must never wait for this: [`Directory::note_login`] decides in memory whether the
//! user's time is due to be written (at most once per [`LOGIN_WRITE_INTERVAL`]) and, if so,
//! hands the one-row UPDATE to a task. The write does not bump the generation, so the cache
//! does not reload for it. The memory is bounded: past [`USERS_REMEMBERED_MAX`] users, entries
//! older than the interval are swept, and if none is, the login is not recorded.
//!
//! This file holds the records and what is kept in memory until written; the directory's
//! calls that record and read logins are in `login_recording.rs`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Attempts are written this long after the first one of a batch: a client that logs in
/// many times a second costs one row update per batch.
pub(crate) const ATTEMPTS_FLUSH_DELAY: Duration = Duration::from_secs(1);

/// Distinct (user, client, protocol, result) keys waiting for a batch; past it, attempts are
/// not recorded until the batch is written (a flood from many addresses must not grow memory).
pub(crate) const ATTEMPTS_PENDING_MAX: usize = 10_000;

/// Rows kept per user, the most recent (by last attempt).
pub const LOGINS_KEPT_MAX: usize = 20;

/// What became of a login attempt, as the history keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Attempt {
    /// The password was right.
    Ok,
    /// A wrong password for this user.
    Failed,
    /// Refused by the throttle before the password was checked.
    Throttled,
}

impl Attempt {
    pub fn as_str(self) -> &'static str {
        match self {
            Attempt::Ok => "ok",
            Attempt::Failed => "failed",
            Attempt::Throttled => "throttled",
        }
    }

    pub(crate) fn parse(s: &str) -> Attempt {
        match s {
            "ok" => Attempt::Ok,
            "throttled" => Attempt::Throttled,
            _ => Attempt::Failed,
        }
    }
}

/// One row of a user's login history: attempts of one result, from one address, by one
/// protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginRecord {
    pub client: String,
    pub protocol: String,
    pub result: Attempt,
    pub attempts: u64,
    /// Unix seconds.
    pub first_at: i64,
    pub last_at: i64,
}

/// (user, client, protocol, result).
pub(crate) type AttemptKey = (String, String, &'static str, Attempt);

/// Attempts counted since the last batch was written.
#[derive(Default)]
pub(crate) struct PendingAttempts {
    pending: Mutex<HashMap<AttemptKey, (u64, i64, i64)>>,
}

impl PendingAttempts {
    /// Counts an attempt; true when it started a new batch (the caller schedules the write).
    pub(crate) fn add(&self, key: AttemptKey, at: i64) -> bool {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let first = pending.is_empty();
        if let Some((attempts, _, last)) = pending.get_mut(&key) {
            *attempts += 1;
            *last = at;
        } else if pending.len() < ATTEMPTS_PENDING_MAX {
            pending.insert(key, (1, at, at));
        }
        first
    }

    pub(crate) fn take(&self) -> HashMap<AttemptKey, (u64, i64, i64)> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The unwritten attempts of one user, as rows.
    pub(crate) fn of(&self, user: &str) -> Vec<LoginRecord> {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending
            .iter()
            .filter(|((u, ..), _)| u == user)
            .map(
                |((_, client, protocol, result), &(attempts, first_at, last_at))| LoginRecord {
                    client: client.clone(),
                    protocol: (*protocol).to_string(),
                    result: *result,
                    attempts,
                    first_at,
                    last_at,
                },
            )
            .collect()
    }
}

/// A user's last login is written at most this often: a client that reconnects every few
/// seconds costs one write a minute.
pub(crate) const LOGIN_WRITE_INTERVAL: Duration = Duration::from_secs(60);

/// Users whose last write time is remembered.
const USERS_REMEMBERED_MAX: usize = 100_000;

/// When each user's last login was last written.
#[derive(Default)]
pub(crate) struct LastLogins {
    written: Mutex<HashMap<String, Instant>>,
}

impl LastLogins {
    /// Whether a login of `user` at `now` should be written; if so, it counts as written.
    pub(crate) fn due(&self, user: &str, now: Instant) -> bool {
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = written.get(user)
            && now.duration_since(*at) < LOGIN_WRITE_INTERVAL
        {
            return false;
        }
        if written.len() >= USERS_REMEMBERED_MAX && !written.contains_key(user) {
            written.retain(|_, at| now.duration_since(*at) < LOGIN_WRITE_INTERVAL);
            if written.len() >= USERS_REMEMBERED_MAX {
                return false;
            }
        }
        written.insert(user.to_string(), now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_attempts_are_bounded_and_merged() {
        let pending = PendingAttempts::default();
        let key = |i: usize| {
            (
                "u@x".to_string(),
                format!("10.0.{}.{}", i / 256, i % 256),
                "imap",
                Attempt::Failed,
            )
        };
        assert!(pending.add(key(0), 5), "the first starts a batch");
        assert!(!pending.add(key(0), 7));
        for i in 1..ATTEMPTS_PENDING_MAX + 100 {
            pending.add(key(i), 9);
        }
        let rows = pending.of("u@x");
        assert_eq!(rows.len(), ATTEMPTS_PENDING_MAX);
        let first = rows.iter().find(|r| r.client == "10.0.0.0").unwrap();
        assert_eq!((first.attempts, first.first_at, first.last_at), (2, 5, 7));
        assert_eq!(pending.take().len(), ATTEMPTS_PENDING_MAX);
        assert!(pending.add(key(0), 10), "after a write, a new batch");
    }

    #[test]
    fn a_user_is_written_at_most_once_per_interval() {
        let logins = LastLogins::default();
        let start = Instant::now();
        assert!(logins.due("a@x", start));
        assert!(!logins.due("a@x", start + Duration::from_secs(59)));
        assert!(logins.due("b@x", start + Duration::from_secs(1)));
        assert!(logins.due("a@x", start + LOGIN_WRITE_INTERVAL));
    }

    #[test]
    fn memory_is_bounded() {
        let logins = LastLogins::default();
        let start = Instant::now();
        for i in 0..USERS_REMEMBERED_MAX {
            assert!(logins.due(&format!("u{i}@x"), start));
        }
        // Full of recent writes: a new user is not recorded.
        assert!(!logins.due("new@x", start + Duration::from_secs(1)));
        // Once they are old, they are swept.
        assert!(logins.due("new@x", start + LOGIN_WRITE_INTERVAL));
        assert_eq!(
            logins.written.lock().unwrap().len(),
            1,
            "the old entries went"
        );
    }
}
