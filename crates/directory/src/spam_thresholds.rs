//! Spam score thresholds per domain and per user (`mailstow spam set`), overriding
//! `[spam]`'s: the type and the rows as read into the cache's snapshot. Directory changes,
//! written by `Directory::spam_thresholds_set` (`spam.rs`): every node's cache picks them
//! up, and the delivery path reads them from there ([`crate::Cache::spam_thresholds`]). A
//! domain's row goes with the domain, a user's with the user, and follows its rename.

use std::collections::HashMap;

use sqlx::AnyConnection;

use crate::error::DirectoryError;

/// Score thresholds overriding `[spam]`'s; `None` = not overridden here.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpamThresholds {
    pub junk: Option<f64>,
    pub reject: Option<f64>,
    pub greylist: Option<f64>,
}

impl SpamThresholds {
    /// Each of `self`'s fields, or `fallback`'s where `self` has none.
    pub fn or(self, fallback: SpamThresholds) -> SpamThresholds {
        SpamThresholds {
            junk: self.junk.or(fallback.junk),
            reject: self.reject.or(fallback.reject),
            greylist: self.greylist.or(fallback.greylist),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        *self == SpamThresholds::default()
    }

    pub(crate) fn check(&self) -> Result<(), DirectoryError> {
        for (name, value) in [
            ("junk", self.junk),
            ("reject", self.reject),
            ("greylist", self.greylist),
        ] {
            if let Some(value) = value
                && !value.is_finite()
            {
                return Err(DirectoryError::InvalidSpamThreshold { name, value });
            }
        }
        Ok(())
    }
}

/// Per-domain and per-user thresholds as stored: (domain -> row, address -> row). Read into
/// the cache's snapshot and by [`crate::Directory::spam_thresholds_list`].
pub(crate) async fn load_thresholds(
    conn: &mut AnyConnection,
) -> Result<(ThresholdRows, ThresholdRows), DirectoryError> {
    let mut tables = Vec::with_capacity(2);
    for sql in [
        "SELECT domain, junk, reject, greylist FROM spam_domain_thresholds",
        "SELECT address, junk, reject, greylist FROM spam_user_thresholds",
    ] {
        let rows: Vec<ThresholdColumns> = sqlx::query_as(sql).fetch_all(&mut *conn).await?;
        let rows: ThresholdRows = rows
            .into_iter()
            .map(|(target, junk, reject, greylist)| {
                let thresholds = SpamThresholds {
                    junk,
                    reject,
                    greylist,
                };
                (target, thresholds)
            })
            .collect();
        tables.push(rows);
    }
    let users = tables.pop().unwrap_or_default();
    let domains = tables.pop().unwrap_or_default();
    Ok((domains, users))
}

/// `domain` or `address`, `junk`, `reject`, `greylist` of a thresholds table.
type ThresholdColumns = (String, Option<f64>, Option<f64>, Option<f64>);

/// Thresholds rows by domain or by address.
pub(crate) type ThresholdRows = HashMap<String, SpamThresholds>;
