//! DKIM signing keys (RFC 6376 3.1): stored per (domain, selector); the newest key of a
//! domain is the one that signs, and the cache carries it so signing never waits on SQL.
//!
//! The directory only stores keys: generating them and signing belong to `sender-auth`.

use crate::arguments::domain_arg;
use crate::error::{DirectoryError, shown};
use crate::{Directory, db};

/// Longest selector accepted: one DNS label (RFC 6376 3.1: a selector is a sub-domain).
pub const SELECTOR_BYTES_MAX: usize = 63;

/// One stored key.
#[derive(Clone, PartialEq, Eq)]
pub struct DkimKey {
    /// Lowercase domain (one of ours).
    pub domain: String,
    pub selector: String,
    /// `ed25519` or `rsa`.
    pub algorithm: String,
    /// PKCS#8 PEM.
    pub private_key: String,
    /// The base64 `p=` value of the DNS record.
    pub public_key: String,
    /// Unix seconds.
    pub created_at: i64,
}

impl std::fmt::Debug for DkimKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DkimKey")
            .field("domain", &self.domain)
            .field("selector", &self.selector)
            .field("algorithm", &self.algorithm)
            .field("private_key", &format_args!("<redacted>"))
            .field("created_at", &self.created_at)
            .finish()
    }
}

/// Every DKIM key, by domain, newest first within a domain.
pub(crate) async fn load_dkim_keys<'e, E>(executor: E) -> Result<Vec<DkimKey>, DirectoryError>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    type Row = (String, String, String, String, String, i64);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT domain, selector, algorithm, private_key, public_key, created_at \
         FROM dkim_keys ORDER BY domain, created_at DESC, selector",
    )
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(domain, selector, algorithm, private_key, public_key, created_at)| DkimKey {
                domain,
                selector,
                algorithm,
                private_key,
                public_key,
                created_at,
            },
        )
        .collect())
}

/// A selector is one DNS label: letters, digits and hyphens, not at either end.
fn check_selector(selector: &str) -> Result<String, DirectoryError> {
    let lower = selector.to_ascii_lowercase();
    let valid = !lower.is_empty()
        && lower.len() <= SELECTOR_BYTES_MAX
        && lower
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !lower.starts_with('-')
        && !lower.ends_with('-');
    if valid {
        Ok(lower)
    } else {
        Err(DirectoryError::InvalidSelector(shown(selector)))
    }
}

impl Directory {
    /// Stores a key; the domain must be ours and the selector unused in it. It becomes the
    /// domain's signing key (the newest one signs).
    pub async fn add_dkim_key(&self, key: &DkimKey) -> Result<(), DirectoryError> {
        let domain = domain_arg(&key.domain)?;
        let selector = check_selector(&key.selector)?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let exists: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM domains WHERE name = $1")
            .bind(&domain)
            .fetch_one(&mut *tx)
            .await?;
        if exists == 0 {
            return Err(DirectoryError::NoSuchDomain(domain));
        }
        let inserted = sqlx::query(
            "INSERT INTO dkim_keys (domain, selector, algorithm, private_key, public_key, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&domain)
        .bind(&selector)
        .bind(&key.algorithm)
        .bind(&key.private_key)
        .bind(&key.public_key)
        .bind(key.created_at)
        .execute(&mut *tx)
        .await;
        match inserted {
            Err(e) if db::is_unique_violation(&e) => {
                return Err(DirectoryError::DkimKeyExists { domain, selector });
            }
            other => other?,
        };
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Every stored key, by domain, newest first within a domain.
    pub async fn dkim_keys(&self) -> Result<Vec<DkimKey>, DirectoryError> {
        load_dkim_keys(&self.inner.pool).await
    }

    /// Deletes one key.
    pub async fn del_dkim_key(&self, domain: &str, selector: &str) -> Result<(), DirectoryError> {
        let domain = domain.to_ascii_lowercase();
        let selector = check_selector(selector)?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let deleted = sqlx::query("DELETE FROM dkim_keys WHERE domain = $1 AND selector = $2")
            .bind(&domain)
            .bind(&selector)
            .execute(&mut *tx)
            .await?;
        if deleted.rows_affected() == 0 {
            return Err(DirectoryError::NoSuchDkimKey { domain, selector });
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }
}
