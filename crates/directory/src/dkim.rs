//! DKIM signing keys (RFC 6376 3.1): stored per (domain, selector); the newest key of a
//! domain is the one that signs, and the cache carries it so signing never waits on SQL.
//!
//! The directory only stores keys: generating them and signing belong to `sender-auth`.
//! Adding and deleting them is provisioning, like the domains they sign for
//! (`provisioning.rs`); this file is what a key is and how the stored ones are read.

use crate::error::{DirectoryError, shown};

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
pub(crate) fn check_selector(selector: &str) -> Result<String, DirectoryError> {
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
