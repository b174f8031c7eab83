//! IMAP subscriptions (RFC 9051 6.3.7, 6.3.8): a set of names per user; and the special-use
//! attributes a client gave folders it created (RFC 6154 3).
//!
//! Not directory changes in the cache's sense: no generation bump, so subscribing does not
//! make every server reload its alias cache.

use crate::{Directory, DirectoryError};

/// A subscribed name is at most this long (the store's folder names are shorter still).
pub const SUBSCRIPTION_BYTES_MAX: usize = 1024;
/// Names one user may subscribe.
pub const SUBSCRIPTIONS_PER_USER_MAX: i64 = 10_000;
/// Special-use attributes one user's folders may carry (RFC 6154 defines seven).
pub const SPECIAL_USES_PER_USER_MAX: i64 = 100;

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

    /// The special-use attributes `address`'s folders were given: (folder, attribute).
    pub async fn special_uses(
        &self,
        address: &str,
    ) -> Result<Vec<(String, String)>, DirectoryError> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT mailbox, attribute FROM special_use WHERE address = $1 \
             ORDER BY mailbox, attribute",
        )
        .bind(address)
        .fetch_all(&self.inner.pool)
        .await?;
        Ok(rows)
    }

    /// Gives `mailbox` exactly `attributes` (none: forgets it).
    pub async fn set_special_uses(
        &self,
        address: &str,
        mailbox: &str,
        attributes: &[String],
    ) -> Result<(), DirectoryError> {
        if mailbox.len() > SUBSCRIPTION_BYTES_MAX {
            return Err(DirectoryError::Limit(format!(
                "folder name longer than {SUBSCRIPTION_BYTES_MAX} bytes"
            )));
        }
        let mut tx = crate::db::begin_write(&self.inner.pool).await?;
        sqlx::query("DELETE FROM special_use WHERE address = $1 AND mailbox = $2")
            .bind(address)
            .bind(mailbox)
            .execute(&mut *tx)
            .await?;
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM special_use WHERE address = $1")
            .bind(address)
            .fetch_one(&mut *tx)
            .await?;
        if count + attributes.len() as i64 > SPECIAL_USES_PER_USER_MAX {
            return Err(DirectoryError::Limit(format!(
                "more than {SPECIAL_USES_PER_USER_MAX} special-use attributes"
            )));
        }
        for attribute in attributes {
            sqlx::query(
                "INSERT INTO special_use (address, mailbox, attribute) VALUES ($1, $2, $3) \
                 ON CONFLICT (address, mailbox, attribute) DO NOTHING",
            )
            .bind(address)
            .bind(mailbox)
            .bind(attribute)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A folder and its children were renamed: their attributes follow.
    pub async fn special_uses_renamed(
        &self,
        address: &str,
        from: &str,
        to: &str,
    ) -> Result<(), DirectoryError> {
        let rows = self.special_uses(address).await?;
        let mut tx = crate::db::begin_write(&self.inner.pool).await?;
        for (mailbox, attribute) in rows {
            let renamed = if mailbox == from {
                to.to_string()
            } else if let Some(rest) = mailbox.strip_prefix(from).and_then(|r| r.strip_prefix('/'))
            {
                format!("{to}/{rest}")
            } else {
                continue;
            };
            sqlx::query(
                "UPDATE special_use SET mailbox = $1 \
                 WHERE address = $2 AND mailbox = $3 AND attribute = $4",
            )
            .bind(&renamed)
            .bind(address)
            .bind(&mailbox)
            .bind(&attribute)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
