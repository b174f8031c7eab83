//! Recording logins and reading them back: [`Directory::note_login`] (the last login's
//! time), [`Directory::note_attempt`] (the history, written in batches),
//! [`Directory::recent_logins`] and [`Directory::flush_attempts`]. What they keep in memory
//! between writes, and why, is in `logins.rs`.

use std::net::IpAddr;
use std::time::Instant;

use crate::logins::{ATTEMPTS_FLUSH_DELAY, Attempt, LOGINS_KEPT_MAX, LoginRecord};
use crate::{Directory, DirectoryError};

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
