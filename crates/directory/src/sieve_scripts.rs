//! Users' Sieve scripts (RFC 5228) as ManageSieve (RFC 5804) and `mailstow sieve` keep them:
//! named scripts per user, at most one active; the operator's global scripts (RFC 6609
//! `include :global`); and the tracking rows the rules write (vacation replies sent,
//! RFC 5230 4.2; message ids seen, RFC 7352).
//!
//! Scripts are directory changes: a write bumps the generation, so every node's cache (the
//! delivery path reads scripts from it, [`crate::Cache::sieve_active`]) picks it up. The
//! directory does not compile scripts: its callers check a script with the interpreter
//! before they store it. Tracking rows are not changes in that sense.

use crate::address::LocalCase;
use crate::arguments::address_arg;
use crate::error::shown;
use crate::{Directory, DirectoryError, db};

/// The longest script name, in bytes (RFC 5804 1.6 sets no bound; Pigeonhole's is 256
/// characters).
pub const SCRIPT_NAME_BYTES_MAX: usize = 256;

/// Tracking rows one user may hold; past it, the oldest are dropped first.
const TRACKING_ROWS_MAX: i64 = 10_000;

/// A script as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptInfo {
    pub name: String,
    pub active: bool,
    pub bytes: usize,
}

/// RFC 5804 1.6: a script name is a non-empty UTF-8 string without control characters
/// (0000-001F, 007F-009F), line or paragraph separators (2028, 2029).
pub fn check_script_name(name: &str) -> Result<(), DirectoryError> {
    let bad = |reason| {
        Err(DirectoryError::InvalidScriptName {
            name: shown(name),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > SCRIPT_NAME_BYTES_MAX {
        return bad("longer than 256 bytes");
    }
    if name
        .chars()
        .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}')
    {
        return bad("control characters are not allowed (RFC 5804 1.6)");
    }
    Ok(())
}

fn canonical(address: &str) -> Result<String, DirectoryError> {
    Ok(address_arg(address, LocalCase::Fold)?.joined())
}

impl Directory {
    /// `address`'s scripts, sorted by name.
    pub async fn sieve_list(&self, address: &str) -> Result<Vec<ScriptInfo>, DirectoryError> {
        let address = self.existing_user(address).await?;
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT name, active, CAST(LENGTH(source) AS BIGINT) FROM sieve_scripts \
             WHERE address = $1 \
             ORDER BY name",
        )
        .bind(&address)
        .fetch_all(&self.inner.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(name, active, bytes)| ScriptInfo {
                name,
                active: active != 0,
                bytes: usize::try_from(bytes).unwrap_or(0),
            })
            .collect())
    }

    /// One script's source.
    pub async fn sieve_get(&self, address: &str, name: &str) -> Result<String, DirectoryError> {
        let address = self.existing_user(address).await?;
        let source: Option<String> =
            sqlx::query_scalar("SELECT source FROM sieve_scripts WHERE address = $1 AND name = $2")
                .bind(&address)
                .bind(name)
                .fetch_optional(&self.inner.pool)
                .await?;
        source.ok_or_else(|| DirectoryError::NoSuchScript {
            address,
            name: shown(name),
        })
    }

    /// Whether one more script of `bytes` bytes named `name` would fit (RFC 5804 2.3
    /// HAVESPACE): `Err(Limit)` says which limit it would pass.
    pub async fn sieve_have_space(
        &self,
        address: &str,
        name: &str,
        bytes: usize,
    ) -> Result<(), DirectoryError> {
        let address = self.existing_user(address).await?;
        check_script_name(name)?;
        self.check_script_room(&address, name, bytes).await
    }

    async fn check_script_room(
        &self,
        address: &str,
        name: &str,
        bytes: usize,
    ) -> Result<(), DirectoryError> {
        let options = &self.inner.options;
        self.check_script_bytes(bytes)?;
        let names: Vec<String> =
            sqlx::query_scalar("SELECT name FROM sieve_scripts WHERE address = $1")
                .bind(address)
                .fetch_all(&self.inner.pool)
                .await?;
        if !names.iter().any(|n| n == name) && names.len() >= options.sieve_scripts_max {
            return Err(DirectoryError::Limit(format!(
                "{} scripts already, the most sieve_scripts_max allows",
                names.len()
            )));
        }
        Ok(())
    }

    /// `sieve_script_bytes_max`, for a user's script and a global one alike.
    fn check_script_bytes(&self, bytes: usize) -> Result<(), DirectoryError> {
        let max = self.inner.options.sieve_script_bytes_max;
        if bytes > max {
            return Err(DirectoryError::Limit(format!(
                "the script is {bytes} bytes, more than sieve_script_bytes_max ({max})"
            )));
        }
        Ok(())
    }

    /// Stores (creates or replaces) a script; an active one stays active. The caller has
    /// checked that it compiles.
    pub async fn sieve_put(
        &self,
        address: &str,
        name: &str,
        source: &str,
    ) -> Result<(), DirectoryError> {
        let address = self.existing_user(address).await?;
        check_script_name(name)?;
        self.check_script_room(&address, name, source.len()).await?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        sqlx::query(
            "INSERT INTO sieve_scripts (address, name, source, active, updated_at) \
             VALUES ($1, $2, $3, 0, $4) \
             ON CONFLICT (address, name) DO UPDATE SET source = $3, updated_at = $4",
        )
        .bind(&address)
        .bind(name)
        .bind(source)
        .bind(db::unix_now_s())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Makes `name` the active script (RFC 5804 2.8), or none when `None`.
    pub async fn sieve_activate(
        &self,
        address: &str,
        name: Option<&str>,
    ) -> Result<(), DirectoryError> {
        let address = self.existing_user(address).await?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        if let Some(name) = name {
            let found: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM sieve_scripts WHERE address = $1 AND name = $2",
            )
            .bind(&address)
            .bind(name)
            .fetch_one(&mut *tx)
            .await?;
            if found == 0 {
                return Err(DirectoryError::NoSuchScript {
                    address,
                    name: shown(name),
                });
            }
        }
        sqlx::query(
            "UPDATE sieve_scripts SET active = CASE WHEN name = $2 THEN 1 ELSE 0 END \
             WHERE address = $1",
        )
        .bind(&address)
        .bind(name.unwrap_or(""))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Deletes a script that is not active (RFC 5804 2.10).
    pub async fn sieve_delete(&self, address: &str, name: &str) -> Result<(), DirectoryError> {
        let address = self.existing_user(address).await?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let active: Option<i64> =
            sqlx::query_scalar("SELECT active FROM sieve_scripts WHERE address = $1 AND name = $2")
                .bind(&address)
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?;
        match active {
            None => {
                return Err(DirectoryError::NoSuchScript {
                    address,
                    name: shown(name),
                });
            }
            Some(a) if a != 0 => return Err(DirectoryError::ScriptActive(shown(name))),
            Some(_) => {}
        }
        sqlx::query("DELETE FROM sieve_scripts WHERE address = $1 AND name = $2")
            .bind(&address)
            .bind(name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Renames a script (RFC 5804 2.11.1); an active one stays active.
    pub async fn sieve_rename(
        &self,
        address: &str,
        from: &str,
        to: &str,
    ) -> Result<(), DirectoryError> {
        let address = self.existing_user(address).await?;
        check_script_name(to)?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let taken: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM sieve_scripts WHERE address = $1 AND name = $2",
        )
        .bind(&address)
        .bind(to)
        .fetch_one(&mut *tx)
        .await?;
        if taken != 0 {
            return Err(DirectoryError::ScriptExists {
                address,
                name: shown(to),
            });
        }
        let renamed = sqlx::query(
            "UPDATE sieve_scripts SET name = $3, updated_at = $4 WHERE address = $1 AND name = $2",
        )
        .bind(&address)
        .bind(from)
        .bind(to)
        .bind(db::unix_now_s())
        .execute(&mut *tx)
        .await?;
        if renamed.rows_affected() == 0 {
            return Err(DirectoryError::NoSuchScript {
                address,
                name: shown(from),
            });
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Stores (or with `None` removes) a global script, for `include :global`.
    pub async fn sieve_put_global(
        &self,
        name: &str,
        source: Option<&str>,
    ) -> Result<(), DirectoryError> {
        check_script_name(name)?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        match source {
            Some(source) => {
                self.check_script_bytes(source.len())?;
                sqlx::query(
                    "INSERT INTO sieve_global_scripts (name, source, updated_at) \
                     VALUES ($1, $2, $3) \
                     ON CONFLICT (name) DO UPDATE SET source = $2, updated_at = $3",
                )
                .bind(name)
                .bind(source)
                .bind(db::unix_now_s())
                .execute(&mut *tx)
                .await?;
            }
            None => {
                sqlx::query("DELETE FROM sieve_global_scripts WHERE name = $1")
                    .bind(name)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Whether `address` has a live tracking row `key` (a vacation reply sent, a message id
    /// seen): its expiry is after `now` (Unix seconds).
    pub async fn sieve_tracked(
        &self,
        address: &str,
        key: &str,
        now: i64,
    ) -> Result<bool, DirectoryError> {
        let found: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM sieve_tracking \
             WHERE address = $1 AND tracking_key = $2 AND expires_at > $3",
        )
        .bind(address)
        .bind(key)
        .bind(now)
        .fetch_one(&self.inner.pool)
        .await?;
        Ok(found != 0)
    }

    /// Records tracking row `key` until `expires_at` (Unix seconds); drops the user's expired
    /// rows, and the oldest past `TRACKING_ROWS_MAX`.
    pub async fn sieve_track(
        &self,
        address: &str,
        key: &str,
        expires_at: i64,
        now: i64,
    ) -> Result<(), DirectoryError> {
        let key: String = key.chars().take(128).collect();
        sqlx::query(
            "INSERT INTO sieve_tracking (address, tracking_key, expires_at) VALUES ($1, $2, $3) \
             ON CONFLICT (address, tracking_key) DO UPDATE SET expires_at = $3",
        )
        .bind(address)
        .bind(&key)
        .bind(expires_at)
        .execute(&self.inner.pool)
        .await?;
        sqlx::query("DELETE FROM sieve_tracking WHERE address = $1 AND expires_at <= $2")
            .bind(address)
            .bind(now)
            .execute(&self.inner.pool)
            .await?;
        let count: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM sieve_tracking WHERE address = $1")
                .bind(address)
                .fetch_one(&self.inner.pool)
                .await?;
        if count > TRACKING_ROWS_MAX {
            sqlx::query(
                "DELETE FROM sieve_tracking WHERE address = $1 AND tracking_key IN \
                 (SELECT tracking_key FROM sieve_tracking WHERE address = $1 \
                  ORDER BY expires_at LIMIT $2)",
            )
            .bind(address)
            .bind(count - TRACKING_ROWS_MAX)
            .execute(&self.inner.pool)
            .await?;
        }
        Ok(())
    }

    /// The canonical address of an existing user.
    async fn existing_user(&self, address: &str) -> Result<String, DirectoryError> {
        let address = canonical(address)?;
        let found: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users WHERE address = $1")
            .bind(&address)
            .fetch_one(&self.inner.pool)
            .await?;
        if found == 0 {
            return Err(DirectoryError::NoSuchUser(address));
        }
        Ok(address)
    }
}

impl Directory {
    /// The installation's secret `name` (64 hex digits), made on first use; every node
    /// reads the same one.
    pub async fn secret(&self, name: &str) -> Result<String, DirectoryError> {
        let fresh: String = {
            use rand::RngExt as _;
            let bytes: [u8; 32] = rand::rng().random();
            bytes.iter().map(|b| format!("{b:02x}")).collect()
        };
        sqlx::query(
            "INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(&fresh)
        .execute(&self.inner.pool)
        .await?;
        Ok(
            sqlx::query_scalar("SELECT value FROM secrets WHERE name = $1")
                .bind(name)
                .fetch_one(&self.inner.pool)
                .await?,
        )
    }
}
