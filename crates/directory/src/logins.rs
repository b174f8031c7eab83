//! The last successful login of each user (`users.last_login_at`, for `mailstow user list`),
//! and the login history the web view's account page shows (`logins`: when and from where,
//! failed attempts included: the seed's logon info).
//!
//! A login must never wait for this: [`Directory::note_login`] decides in memory whether the
//! user's time is due to be written (at most once per [`LOGIN_WRITE_INTERVAL`]) and, if so,
//! hands the one-row UPDATE to a task. The write does not bump the generation, so the cache
//! does not reload for it. The memory is bounded: past [`USERS_REMEMBERED_MAX`] users, entries
//! older than the interval are swept, and if none is, the login is not recorded.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::{Directory, DirectoryError};

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

    fn parse(s: &str) -> Attempt {
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
type AttemptKey = (String, String, &'static str, Attempt);

/// Attempts counted since the last batch was written.
#[derive(Default)]
pub(crate) struct PendingAttempts {
    pending: Mutex<HashMap<AttemptKey, (u64, i64, i64)>>,
}

impl PendingAttempts {
    /// Counts an attempt; true when it started a new batch (the caller schedules the write).
    fn add(&self, key: AttemptKey, at: i64) -> bool {
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

    fn take(&self) -> HashMap<AttemptKey, (u64, i64, i64)> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The unwritten attempts of one user, as rows.
    fn of(&self, user: &str) -> Vec<LoginRecord> {
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
    fn due(&self, user: &str, now: Instant) -> bool {
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

impl Directory {
    /// Records that `user` (a canonical address, as [`Directory::authenticate`] returns it)
    /// just logged in. Returns at once: the write, when due, runs on a task of the current
    /// tokio runtime (none: nothing is recorded), and a failure is only logged.
    pub fn note_login(&self, user: &str) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !self.inner.last_logins.due(user, Instant::now()) {
            return;
        }
        let pool = self.inner.pool.clone();
        let user = user.to_string();
        let at = crate::db::unix_now_s();
        runtime.spawn(async move {
            let written = sqlx::query("UPDATE users SET last_login_at = $1 WHERE address = $2")
                .bind(at)
                .bind(&user)
                .execute(&pool)
                .await;
            if let Err(error) = written {
                tracing::warn!(%error, user, "recording the last login failed");
            }
        });
    }
}

impl Directory {
    /// Records a login attempt on the user `user` (a canonical address of an existing user:
    /// attempts on unknown names are not kept) from `client` by `protocol`. Returns at once:
    /// attempts are counted in memory and written in one transaction
    /// [`ATTEMPTS_FLUSH_DELAY`] after the first of a batch, on a task of the current tokio
    /// runtime (none: nothing is recorded). A write failure is only logged.
    pub fn note_attempt(
        &self,
        user: &str,
        client: IpAddr,
        protocol: &'static str,
        result: Attempt,
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let key = (user.to_string(), client.to_string(), protocol, result);
        if !self.inner.attempts.add(key, crate::db::unix_now_s()) {
            return;
        }
        let directory = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep(ATTEMPTS_FLUSH_DELAY).await;
            if let Err(error) = directory.write_attempts().await {
                tracing::warn!(%error, "recording login attempts failed");
            }
        });
    }

    /// Writes the counted attempts: one upsert per key, then each user's rows beyond
    /// [`LOGINS_KEPT_MAX`] removed. Attempts of a user deleted meanwhile are dropped.
    async fn write_attempts(&self) -> Result<(), DirectoryError> {
        let batch = self.inner.attempts.take();
        if batch.is_empty() {
            return Ok(());
        }
        let mut tx = self.inner.pool.begin().await?;
        let mut users: Vec<&str> = Vec::new();
        for ((user, client, protocol, result), (attempts, first_at, last_at)) in &batch {
            sqlx::query(
                "INSERT INTO logins (address, client, protocol, result, attempts, first_at, \
                 last_at) SELECT $1, $2, $3, $4, $5, $6, $7 \
                 WHERE EXISTS (SELECT 1 FROM users WHERE address = $1) \
                 ON CONFLICT (address, client, protocol, result) DO UPDATE SET \
                 attempts = logins.attempts + excluded.attempts, last_at = excluded.last_at",
            )
            .bind(user)
            .bind(client)
            .bind(*protocol)
            .bind(result.as_str())
            .bind(i64::try_from(*attempts).unwrap_or(i64::MAX))
            .bind(first_at)
            .bind(last_at)
            .execute(&mut *tx)
            .await?;
            if !users.contains(&user.as_str()) {
                users.push(user);
            }
        }
        for user in users {
            let rows: Vec<(String, String, String)> = sqlx::query_as(
                "SELECT client, protocol, result FROM logins WHERE address = $1 \
                 ORDER BY last_at DESC, client, protocol, result",
            )
            .bind(user)
            .fetch_all(&mut *tx)
            .await?;
            for (client, protocol, result) in rows.iter().skip(LOGINS_KEPT_MAX) {
                sqlx::query(
                    "DELETE FROM logins WHERE address = $1 AND client = $2 AND protocol = $3 \
                     AND result = $4",
                )
                .bind(user)
                .bind(client)
                .bind(protocol)
                .bind(result)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// A user's login history, the most recent first (at most [`LOGINS_KEPT_MAX`] rows):
    /// what is written, merged with the attempts this process has not written yet.
    pub async fn recent_logins(&self, user: &str) -> Result<Vec<LoginRecord>, DirectoryError> {
        let rows: Vec<(String, String, String, i64, i64, i64)> = sqlx::query_as(
            "SELECT client, protocol, result, attempts, first_at, last_at FROM logins \
             WHERE address = $1 ORDER BY last_at DESC, client, protocol, result",
        )
        .bind(user)
        .fetch_all(&self.inner.pool)
        .await?;
        let mut records: Vec<LoginRecord> = rows
            .into_iter()
            .map(
                |(client, protocol, result, attempts, first_at, last_at)| LoginRecord {
                    client,
                    protocol,
                    result: Attempt::parse(&result),
                    attempts: u64::try_from(attempts).unwrap_or(0),
                    first_at,
                    last_at,
                },
            )
            .collect();
        for unwritten in self.inner.attempts.of(user) {
            match records.iter_mut().find(|r| {
                r.client == unwritten.client
                    && r.protocol == unwritten.protocol
                    && r.result == unwritten.result
            }) {
                Some(r) => {
                    r.attempts += unwritten.attempts;
                    r.last_at = r.last_at.max(unwritten.last_at);
                }
                None => records.push(unwritten),
            }
        }
        records.sort_by_key(|r| std::cmp::Reverse(r.last_at));
        records.truncate(LOGINS_KEPT_MAX);
        Ok(records)
    }

    /// Writes the attempts counted so far now (tests, and a clean stop).
    pub async fn flush_attempts(&self) -> Result<(), DirectoryError> {
        self.write_attempts().await
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
