//! Greylisting (RFC 6647) for the spam filter (docs/spam.md): one row per triplet the
//! filter asked about, shared by every node and every user. Not a directory change: nothing
//! here bumps the generation. Bounded by the caller's `greylist_entries_max`, checked against
//! the count `spam_greylist_count` keeps (written in the same transaction as the rows), so no
//! call counts the table; a new triplet also sheds a few expired rows.

use sqlx::AnyConnection;

use crate::spam::{check_key, excess, seconds};
use crate::{Directory, DirectoryError};

/// Longest greylisting triplet (`spam_greylist.triplet`): the caller's hash of it.
pub const GREYLIST_TRIPLET_BYTES_MAX: usize = 64;

/// How long a triplet that was refused and never retried after the delay is remembered
/// (docs/spam.md): after that it counts as new again.
pub const GREYLIST_RETRY_WINDOW_S: u64 = 24 * 60 * 60;

/// Expired rows one new triplet removes: the table sheds what expired without one call
/// doing unbounded work.
const GREYLIST_EXPIRED_PER_CALL_MAX: i64 = 64;

/// A greylisting verdict (RFC 6647 4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Greylisted {
    /// Let it through.
    Pass,
    /// Refuse it for now (`451 4.7.1`); a retry after this many seconds passes.
    Wait { retry_after_s: u64 },
}

impl Directory {
    /// Greylisting (RFC 6647 4.2) of one triplet, the caller's hash of (client network,
    /// sender, recipient), at `now` (Unix seconds), in one transaction:
    ///
    /// - new (or expired): recorded, `Wait` for `delay_s`;
    /// - seen less than `delay_s` ago: `Wait` for the rest of the delay;
    /// - seen at least `delay_s` ago: `Pass`, and marked passed;
    /// - passed before: `Pass` at once until `pass_ttl_s` after its last pass (each pass
    ///   renews it);
    /// - never retried: expires [`GREYLIST_RETRY_WINDOW_S`] after it was first seen.
    ///
    /// Past `entries_max` triplets, the ones nearest their expiry go first: the expired,
    /// then the oldest of those waiting (a passed one is kept `pass_ttl_s`, usually longer).
    pub async fn greylist(
        &self,
        triplet: &str,
        now: i64,
        delay_s: u64,
        pass_ttl_s: u64,
        entries_max: usize,
    ) -> Result<Greylisted, DirectoryError> {
        check_key("greylisting triplet", triplet, GREYLIST_TRIPLET_BYTES_MAX)?;
        let wait = Greylisted::Wait {
            retry_after_s: delay_s,
        };
        let pass_until = now.saturating_add(seconds(pass_ttl_s));
        let mut tx = self.inner.pool.begin().await?;
        // The insert first (a write: SQLite's write lock), so two arrivals of a new triplet
        // cannot both record it.
        if greylist_insert(&mut tx, triplet, now, entries_max).await? {
            tx.commit().await?;
            return Ok(wait);
        }
        let row: Option<(i64, i64, i64)> = sqlx::query_as(
            "SELECT first_seen_at, passed, expires_at FROM spam_greylist WHERE triplet = $1",
        )
        .bind(triplet)
        .fetch_optional(&mut *tx)
        .await?;
        let verdict = match row {
            // Pruned by another node since the insert found it: new again.
            None => {
                greylist_insert(&mut tx, triplet, now, entries_max).await?;
                wait
            }
            Some((_, _, expires_at)) if now >= expires_at => {
                sqlx::query(
                    "UPDATE spam_greylist SET first_seen_at = $2, passed = 0, expires_at = $3 \
                     WHERE triplet = $1",
                )
                .bind(triplet)
                .bind(now)
                .bind(now.saturating_add(seconds(GREYLIST_RETRY_WINDOW_S)))
                .execute(&mut *tx)
                .await?;
                wait
            }
            Some((first_seen_at, passed, _)) => {
                let waited = u64::try_from(now.saturating_sub(first_seen_at)).unwrap_or(0);
                if passed == 0 && waited < delay_s {
                    Greylisted::Wait {
                        retry_after_s: delay_s - waited,
                    }
                } else {
                    sqlx::query(
                        "UPDATE spam_greylist SET passed = 1, expires_at = $2 WHERE triplet = $1",
                    )
                    .bind(triplet)
                    .bind(pass_until)
                    .execute(&mut *tx)
                    .await?;
                    Greylisted::Pass
                }
            }
        };
        tx.commit().await?;
        Ok(verdict)
    }
}

/// Records a new triplet, if it is new; then sheds up to [`GREYLIST_EXPIRED_PER_CALL_MAX`]
/// expired rows and whatever passes `entries_max` (never the new row), keeping the count.
/// Returns whether the triplet was new.
async fn greylist_insert(
    conn: &mut AnyConnection,
    triplet: &str,
    now: i64,
    entries_max: usize,
) -> Result<bool, DirectoryError> {
    let inserted = sqlx::query(
        "INSERT INTO spam_greylist (triplet, first_seen_at, passed, expires_at) \
         VALUES ($1, $2, 0, $3) ON CONFLICT (triplet) DO NOTHING",
    )
    .bind(triplet)
    .bind(now)
    .bind(now.saturating_add(seconds(GREYLIST_RETRY_WINDOW_S)))
    .execute(&mut *conn)
    .await?;
    if inserted.rows_affected() == 0 {
        return Ok(false);
    }
    // Locks the count (PostgreSQL): new triplets take turns from here to the commit.
    let entries: i64 = sqlx::query_scalar(
        "UPDATE spam_greylist_count SET entries = entries + 1 RETURNING entries",
    )
    .fetch_one(&mut *conn)
    .await?;
    let expired = sqlx::query(
        "DELETE FROM spam_greylist WHERE triplet IN \
         (SELECT triplet FROM spam_greylist WHERE expires_at <= $1 \
          ORDER BY expires_at LIMIT $2)",
    )
    .bind(now)
    .bind(GREYLIST_EXPIRED_PER_CALL_MAX)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    let mut deleted = i64::try_from(expired).unwrap_or(i64::MAX);
    // The new row stays even under a bound of 0: a triplet that is never kept never passes.
    let excess = excess(entries - deleted, entries_max.max(1));
    if excess > 0 {
        let evicted = sqlx::query(
            "DELETE FROM spam_greylist WHERE triplet IN \
             (SELECT triplet FROM spam_greylist WHERE triplet <> $1 \
              ORDER BY expires_at, triplet LIMIT $2)",
        )
        .bind(triplet)
        .bind(excess)
        .execute(&mut *conn)
        .await?
        .rows_affected();
        deleted += i64::try_from(evicted).unwrap_or(i64::MAX);
    }
    if deleted > 0 {
        sqlx::query("UPDATE spam_greylist_count SET entries = entries - $1")
            .bind(deleted)
            .execute(&mut *conn)
            .await?;
    }
    Ok(true)
}
