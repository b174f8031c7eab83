//! Recording logins and reading them back: [`Directory::note_login`] (the last login's
//! time), [`Directory::note_attempt`] (the history, written in batches),
//! [`Directory::recent_logins`] and [`Directory::flush_attempts`]. What they keep in memory
//! between writes, and why, is in `logins.rs`.

use std::net::IpAddr;
use std::time::Instant;

use crate::db::Backend;
use crate::logins::{ATTEMPTS_FLUSH_DELAY, Attempt, AttemptKey, LOGINS_KEPT_MAX, LoginRecord};
use crate::{Directory, DirectoryError};

/// A transaction PostgreSQL ended to break a lock cycle or a serialization conflict
/// (SQLSTATE 40P01 `deadlock_detected`, 40001 `serialization_failure`): running it again
/// may succeed.
fn is_lock_conflict(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|code| code == "40P01" || code == "40001")
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
    ///
    /// Several nodes write batches that share keys (a user logging in through each of
    /// them), so the batch takes its locks in one order every writer follows: user by user
    /// in address order, each user's row in `users` first (PostgreSQL: `FOR NO KEY UPDATE`,
    /// so writers of one user's history take turns; SQLite has one writer at a time), then
    /// its keys in order, then the trim, which deletes only rows the batch holds already. A
    /// batch refused anyway with a deadlock or a serialization failure (SQLSTATE 40P01,
    /// 40001: a lock order this one does not know, as a user deleted at that moment) is
    /// written again once rather than lost.
    async fn write_attempts(&self) -> Result<(), DirectoryError> {
        let batch = self.inner.attempts.take();
        if batch.is_empty() {
            return Ok(());
        }
        let mut rows: Vec<_> = batch.into_iter().collect();
        rows.sort_unstable_by(|((u1, c1, p1, r1), _), ((u2, c2, p2, r2), _)| {
            (u1, c1, p1, r1.as_str()).cmp(&(u2, c2, p2, r2.as_str()))
        });
        match self.write_attempt_rows(&rows).await {
            Err(DirectoryError::Database(e)) if is_lock_conflict(&e) => {
                tracing::info!(
                    event = "login_history_retry",
                    error = %e,
                    rows = rows.len(),
                    msg = "written again"
                );
                self.write_attempt_rows(&rows).await
            }
            written => written,
        }
    }

    /// One transaction writing `rows`, sorted by key (see [`Directory::write_attempts`]).
    async fn write_attempt_rows(
        &self,
        rows: &[(AttemptKey, (u64, i64, i64))],
    ) -> Result<(), DirectoryError> {
        let postgres = Backend::of(&self.inner.pool) == Backend::Postgres;
        let mut tx = self.inner.pool.begin().await?;
        for user_rows in rows.chunk_by(|((a, ..), _), ((b, ..), _)| a == b) {
            let user = user_rows[0].0.0.as_str();
            if postgres {
                sqlx::query("SELECT 1 FROM users WHERE address = $1 FOR NO KEY UPDATE")
                    .bind(user)
                    .fetch_optional(&mut *tx)
                    .await?;
            }
            for ((_, client, protocol, result), (attempts, first_at, last_at)) in user_rows {
                sqlx::query(
                    "INSERT INTO logins (address, client, protocol, result, attempts, \
                     first_at, last_at) SELECT $1, $2, $3, $4, $5, $6, $7 \
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
            }
            let kept: Vec<(String, String, String)> = sqlx::query_as(
                "SELECT client, protocol, result FROM logins WHERE address = $1 \
                 ORDER BY last_at DESC, client, protocol, result",
            )
            .bind(user)
            .fetch_all(&mut *tx)
            .await?;
            for (client, protocol, result) in kept.iter().skip(LOGINS_KEPT_MAX) {
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
