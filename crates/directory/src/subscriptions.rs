//! IMAP subscriptions (RFC 9051 6.3.7, 6.3.8): a set of names per user.
//!
//! Not a directory change in the cache's sense: no generation bump, so subscribing does not
//! make every server reload its alias cache.

use crate::{Directory, DirectoryError};

/// A subscribed name is at most this long (the store's folder names are shorter still).
pub const SUBSCRIPTION_BYTES_MAX: usize = 1024;
/// Names one user may subscribe.
pub const SUBSCRIPTIONS_PER_USER_MAX: i64 = 10_000;

impl Directory {
    /// The names `address` subscribed, sorted.
    pub async fn subscriptions(&self, address: &str) -> Result<Vec<String>, DirectoryError> {
        Ok(sqlx::query_scalar(
            "SELECT mailbox FROM subscriptions WHERE address = $1 ORDER BY mailbox",
        )
        .bind(address)
        .fetch_all(&self.inner.pool)
        .await?)
    }

    /// Subscribes or unsubscribes a name; both are idempotent.
    pub async fn set_subscribed(
        &self,
        address: &str,
        mailbox: &str,
        subscribed: bool,
    ) -> Result<(), DirectoryError> {
        if mailbox.len() > SUBSCRIPTION_BYTES_MAX {
            return Err(DirectoryError::Limit(format!(
                "subscription name longer than {SUBSCRIPTION_BYTES_MAX} bytes"
            )));
        }
        if subscribed {
            let count: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM subscriptions WHERE address = $1")
                    .bind(address)
                    .fetch_one(&self.inner.pool)
                    .await?;
            if count >= SUBSCRIPTIONS_PER_USER_MAX {
                return Err(DirectoryError::Limit(format!(
                    "more than {SUBSCRIPTIONS_PER_USER_MAX} subscriptions"
                )));
            }
            sqlx::query(
                "INSERT INTO subscriptions (address, mailbox) VALUES ($1, $2) \
                 ON CONFLICT (address, mailbox) DO NOTHING",
            )
            .bind(address)
            .bind(mailbox)
            .execute(&self.inner.pool)
            .await?;
        } else {
            sqlx::query("DELETE FROM subscriptions WHERE address = $1 AND mailbox = $2")
                .bind(address)
                .bind(mailbox)
                .execute(&self.inner.pool)
                .await?;
        }
        Ok(())
    }
}
