//! The spam filter's state (docs/spam.md, issue 38): each classifier's token and message
//! counts (a user's, or the site-wide one new users fall back to), the class each message
//! was trained as, and users' sender reputation; and the score thresholds per domain and
//! per user (their type, and the rows the cache reads, are in `spam_thresholds.rs`).
//! Greylisting is apart, in `greylist.rs`.
//!
//! Only the thresholds are directory changes: a write bumps the generation, and the cache
//! answers [`crate::Cache::spam_thresholds`] without I/O. The rest is not: training and
//! arriving mail write it far too often to reload every node's cache for. Each such call is
//! one transaction that bumps nothing. Its bounds are the caller's (`[spam]`'s `*_max`),
//! checked against the row counts `spam_owners` keeps (written in the same transaction as
//! the rows they count), so no call counts a table. A statement names at most
//! [`CHUNK_ROWS`] rows; a larger batch is several statements in the same transaction.
//!
//! A writing call first writes its owner's `spam_owners` row: on SQLite that takes the write
//! lock, on PostgreSQL that row's lock. So the calls for one owner take turns, on every node
//! of a cluster, and reading counts, adding to them and writing them back is safe.
//!
//! A user's rows hang off its `spam_owners` row: they go with the user (`ON DELETE
//! CASCADE`) and follow a rename (`Directory::finish_rename` moves the one `address`).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use sqlx::{Any, AnyConnection, AssertSqlSafe};

use crate::address::LocalCase;
use crate::arguments::{address_arg, domain_arg};
use crate::error::shown;
use crate::spam_thresholds::{SpamThresholds, load_thresholds};
use crate::{Directory, DirectoryError, db};

/// Longest digest of a trained message (`spam_trained.digest`).
pub const SPAM_DIGEST_BYTES_MAX: usize = 128;

/// Longest reputation key (`spam_reputation.reputation_key`): an address of 254 bytes with a
/// prefix naming its kind fits.
pub const REPUTATION_KEY_BYTES_MAX: usize = 320;

/// Most rows one statement names (its `IN` list or `VALUES`): at most four parameters a
/// row, about 2,000 a statement, well within SQLite's 32,766 and PostgreSQL's 65,535.
const CHUNK_ROWS: usize = 500;

/// The site-wide classifier's `spam_owners.id` (made by the migration).
const SITE_ID: i64 = 0;

/// Whose classifier: a user's, or the site-wide one (new users fall back to it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpamOwner<'a> {
    /// A user, by address (any case).
    User(&'a str),
    Site,
}

/// What a message was trained as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpamClass {
    Spam,
    Ham,
}

impl SpamClass {
    fn as_sql(self) -> &'static str {
        match self {
            SpamClass::Spam => "spam",
            SpamClass::Ham => "ham",
        }
    }

    fn from_sql(stored: &str) -> Result<SpamClass, DirectoryError> {
        match stored {
            "spam" => Ok(SpamClass::Spam),
            "ham" => Ok(SpamClass::Ham),
            other => Err(DirectoryError::Corrupt(format!(
                "spam_trained.class {}",
                shown(other)
            ))),
        }
    }
}

/// A classifier as stored: what the caller builds its model from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpamModelRows {
    pub spam_messages: u64,
    pub ham_messages: u64,
    /// (token hash, spam count, ham count), sorted by hash; never a count of 0/0.
    pub tokens: Vec<(u64, u32, u32)>,
}

/// A batch of training to apply at once (training many messages aggregates into one):
/// signed changes of the counts. A token may appear more than once; its changes add up.
#[derive(Clone, Debug, Default)]
pub struct SpamDelta {
    pub spam_messages: i64,
    pub ham_messages: i64,
    /// (token hash, spam change, ham change).
    pub tokens: Vec<(u64, i64, i64)>,
}

/// What one classifier holds (`mailstow spam stats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpamStats {
    pub spam_messages: u64,
    pub ham_messages: u64,
    /// Tokens with a count.
    pub tokens: u64,
    /// Messages whose class is remembered.
    pub trained: u64,
    /// Reputation keys with a count (a user's only).
    pub reputation: u64,
}

/// An owner, checked: a user's canonical address, or the site.
enum OwnerKey {
    User(String),
    Site,
}

impl OwnerKey {
    fn of(owner: SpamOwner<'_>) -> Result<OwnerKey, DirectoryError> {
        Ok(match owner {
            SpamOwner::User(address) => OwnerKey::User(canonical(address)?),
            SpamOwner::Site => OwnerKey::Site,
        })
    }
}

fn canonical(address: &str) -> Result<String, DirectoryError> {
    Ok(address_arg(address, LocalCase::Fold)?.joined())
}

/// A `spam_owners` row.
#[derive(Debug)]
struct OwnerRow {
    id: i64,
    spam_messages: i64,
    ham_messages: i64,
    tokens: i64,
    trained: i64,
    reputation: i64,
}

const OWNER_COLUMNS: &str = "id, spam_messages, ham_messages, tokens, trained, reputation";

type OwnerColumns = (i64, i64, i64, i64, i64, i64);

impl From<OwnerColumns> for OwnerRow {
    fn from(columns: OwnerColumns) -> OwnerRow {
        let (id, spam_messages, ham_messages, tokens, trained, reputation) = columns;
        OwnerRow {
            id,
            spam_messages,
            ham_messages,
            tokens,
            trained,
            reputation,
        }
    }
}

/// The owner's row, if it has one (a user has none until trained).
async fn owner_row(
    conn: &mut AnyConnection,
    owner: &OwnerKey,
) -> Result<Option<OwnerRow>, DirectoryError> {
    let columns: Option<OwnerColumns> = match owner {
        OwnerKey::User(address) => {
            let sql = format!("SELECT {OWNER_COLUMNS} FROM spam_owners WHERE address = $1");
            sqlx::query_as(AssertSqlSafe(sql))
                .bind(address)
                .fetch_optional(&mut *conn)
                .await?
        }
        OwnerKey::Site => {
            let sql = format!("SELECT {OWNER_COLUMNS} FROM spam_owners WHERE id = $1");
            sqlx::query_as(AssertSqlSafe(sql))
                .bind(SITE_ID)
                .fetch_optional(&mut *conn)
                .await?
        }
    };
    Ok(columns.map(OwnerRow::from))
}

/// The owner's row, made for a user that has none, and locked for the rest of the
/// transaction (see the module documentation). Must be the transaction's first statement.
async fn lock_owner(
    conn: &mut AnyConnection,
    owner: &OwnerKey,
) -> Result<OwnerRow, DirectoryError> {
    let columns: Option<OwnerColumns> = match owner {
        OwnerKey::User(address) => {
            sqlx::query(
                "INSERT INTO spam_owners \
                 (address, spam_messages, ham_messages, tokens, trained, reputation) \
                 SELECT address, 0, 0, 0, 0, 0 FROM users WHERE address = $1 \
                 ON CONFLICT (address) DO NOTHING",
            )
            .bind(address)
            .execute(&mut *conn)
            .await?;
            let sql = format!(
                "UPDATE spam_owners SET tokens = tokens WHERE address = $1 \
                 RETURNING {OWNER_COLUMNS}"
            );
            sqlx::query_as(AssertSqlSafe(sql))
                .bind(address)
                .fetch_optional(&mut *conn)
                .await?
        }
        OwnerKey::Site => {
            let sql = format!(
                "UPDATE spam_owners SET tokens = tokens WHERE id = $1 RETURNING {OWNER_COLUMNS}"
            );
            sqlx::query_as(AssertSqlSafe(sql))
                .bind(SITE_ID)
                .fetch_optional(&mut *conn)
                .await?
        }
    };
    match (columns, owner) {
        (Some(columns), _) => Ok(OwnerRow::from(columns)),
        (None, OwnerKey::User(address)) => Err(DirectoryError::NoSuchUser(address.clone())),
        (None, OwnerKey::Site) => Err(DirectoryError::Corrupt(
            "the site-wide spam_owners row is missing".into(),
        )),
    }
}

/// Writes back the counts of a row [`lock_owner`] returned.
async fn store_owner(conn: &mut AnyConnection, row: &OwnerRow) -> Result<(), DirectoryError> {
    debug_assert!(row.tokens >= 0 && row.trained >= 0 && row.reputation >= 0);
    sqlx::query(
        "UPDATE spam_owners SET spam_messages = $2, ham_messages = $3, tokens = $4, \
         trained = $5, reputation = $6 WHERE id = $1",
    )
    .bind(row.id)
    .bind(row.spam_messages)
    .bind(row.ham_messages)
    .bind(row.tokens)
    .bind(row.trained)
    .bind(row.reputation)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Whether `key` can be stored in a column of `bytes_max` bytes.
fn fits(key: &str, bytes_max: usize) -> bool {
    !key.is_empty() && key.len() <= bytes_max
}

/// An empty `key` or one longer than `bytes_max` is refused.
pub(crate) fn check_key(
    what: &'static str,
    key: &str,
    bytes_max: usize,
) -> Result<(), DirectoryError> {
    if !fits(key, bytes_max) {
        return Err(DirectoryError::InvalidSpamKey {
            what,
            key: shown(key),
            bytes_max,
        });
    }
    Ok(())
}

/// A count plus a change, held within what a count may be (0 to `u32::MAX`).
fn count_add(stored: i64, change: i64) -> i64 {
    stored.saturating_add(change).clamp(0, i64::from(u32::MAX))
}

/// A stored count back to its type; the columns' checks and [`count_add`] keep it in range.
fn stored<T: TryFrom<i64>>(what: &str, value: i64) -> Result<T, DirectoryError> {
    T::try_from(value).map_err(|_| DirectoryError::Corrupt(format!("{what} is {value}")))
}

/// Seconds as the `BIGINT` arithmetic on timestamps takes them.
pub(crate) fn seconds(s: u64) -> i64 {
    i64::try_from(s).unwrap_or(i64::MAX)
}

/// `$2, $3, ...`: `count` parameters after the shared `$1`.
fn parameters(count: usize) -> String {
    let mut sql = String::new();
    for n in 2..count + 2 {
        let comma = if n > 2 { ", " } else { "" };
        let _ = write!(sql, "{comma}${n}");
    }
    sql
}

/// `($1, $2, $3), ($1, $4, $5), ...`: `rows` tuples of the shared `$1` and `width` more.
fn tuples(rows: usize, width: usize) -> String {
    let mut sql = String::new();
    let mut n = 2;
    for row in 0..rows {
        sql.push_str(if row > 0 { ", ($1" } else { "($1" });
        for _ in 0..width {
            let _ = write!(sql, ", ${n}");
            n += 1;
        }
        sql.push(')');
    }
    sql
}

/// What one chunk of signed changes does to the stored counts of its keys.
#[derive(Debug, Default, PartialEq, Eq)]
struct Merge<K> {
    /// Keys and their new counts, neither 0/0.
    writes: Vec<(K, i64, i64)>,
    /// Stored keys whose counts fell to 0/0.
    deletions: Vec<K>,
    /// The change in the number of stored keys.
    rows_added: i64,
}

fn merge<K: Clone + Eq + std::hash::Hash>(
    changes: &[(K, (i64, i64))],
    stored: &HashMap<K, (i64, i64)>,
) -> Merge<K> {
    let mut merge = Merge {
        writes: Vec::new(),
        deletions: Vec::new(),
        rows_added: 0,
    };
    for (key, (spam, ham)) in changes {
        let before = stored.get(key);
        let (spam_before, ham_before) = before.copied().unwrap_or((0, 0));
        let after = (count_add(spam_before, *spam), count_add(ham_before, *ham));
        match (before.is_some(), after == (0, 0)) {
            (true, true) => {
                merge.deletions.push(key.clone());
                merge.rows_added -= 1;
            }
            (false, true) => {}
            (existed, false) => {
                merge.writes.push((key.clone(), after.0, after.1));
                merge.rows_added += i64::from(!existed);
            }
        }
    }
    merge
}

/// Changes to one key, added up; keys sorted.
fn summed<K: Ord>(changes: impl IntoIterator<Item = (K, i64, i64)>) -> Vec<(K, (i64, i64))> {
    let mut sums: BTreeMap<K, (i64, i64)> = BTreeMap::new();
    for (key, spam, ham) in changes {
        let sum = sums.entry(key).or_default();
        *sum = (sum.0.saturating_add(spam), sum.1.saturating_add(ham));
    }
    sums.into_iter().collect()
}

/// A key column's type, as the counted tables store it.
trait Key:
    Clone
    + Eq
    + std::hash::Hash
    + Send
    + Sync
    + Unpin
    + 'static
    + sqlx::Type<Any>
    + for<'q> sqlx::Encode<'q, Any>
    + for<'r> sqlx::Decode<'r, Any>
{
}

impl Key for i64 {}
impl Key for String {}

/// The stored counts of `keys` of one owner in `table` (key column `column`).
async fn stored_counts<K: Key>(
    conn: &mut AnyConnection,
    table: &str,
    column: &str,
    owner: i64,
    keys: impl ExactSizeIterator<Item = &K>,
) -> Result<HashMap<K, (i64, i64)>, DirectoryError> {
    let sql = format!(
        "SELECT {column}, spam, ham FROM {table} WHERE owner = $1 AND {column} IN ({})",
        parameters(keys.len())
    );
    let mut query = sqlx::query_as::<_, (K, i64, i64)>(AssertSqlSafe(sql)).bind(owner);
    for key in keys {
        query = query.bind(key.clone());
    }
    let rows = query.fetch_all(&mut *conn).await?;
    Ok(rows
        .into_iter()
        .map(|(key, spam, ham)| (key, (spam, ham)))
        .collect())
}

/// Deletes `keys` of one owner from `table`.
async fn delete_keys<K: Key>(
    conn: &mut AnyConnection,
    table: &str,
    column: &str,
    owner: i64,
    keys: &[K],
) -> Result<(), DirectoryError> {
    if keys.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "DELETE FROM {table} WHERE owner = $1 AND {column} IN ({})",
        parameters(keys.len())
    );
    let mut query = sqlx::query(AssertSqlSafe(sql)).bind(owner);
    for key in keys {
        query = query.bind(key.clone());
    }
    query.execute(&mut *conn).await?;
    Ok(())
}

/// Applies one chunk of token changes; returns the change in the owner's token count.
async fn apply_tokens(
    conn: &mut AnyConnection,
    owner: i64,
    changes: &[(i64, (i64, i64))],
) -> Result<i64, DirectoryError> {
    debug_assert!(changes.len() <= CHUNK_ROWS);
    let keys = changes.iter().map(|(token, _)| token);
    let stored = stored_counts(conn, "spam_tokens", "token", owner, keys).await?;
    let merge = merge(changes, &stored);
    if !merge.writes.is_empty() {
        let sql = format!(
            "INSERT INTO spam_tokens (owner, token, spam, ham) VALUES {} \
             ON CONFLICT (owner, token) DO UPDATE SET spam = excluded.spam, ham = excluded.ham",
            tuples(merge.writes.len(), 3)
        );
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(owner);
        for (token, spam, ham) in &merge.writes {
            query = query.bind(*token).bind(*spam).bind(*ham);
        }
        query.execute(&mut *conn).await?;
    }
    delete_keys(conn, "spam_tokens", "token", owner, &merge.deletions).await?;
    Ok(merge.rows_added)
}

/// Applies one chunk of reputation changes; returns the change in the owner's key count.
async fn apply_reputation(
    conn: &mut AnyConnection,
    owner: i64,
    changes: &[(String, (i64, i64))],
    now: i64,
) -> Result<i64, DirectoryError> {
    debug_assert!(changes.len() <= CHUNK_ROWS);
    let keys = changes.iter().map(|(key, _)| key);
    let stored = stored_counts(conn, "spam_reputation", "reputation_key", owner, keys).await?;
    let merge = merge(changes, &stored);
    if !merge.writes.is_empty() {
        let sql = format!(
            "INSERT INTO spam_reputation (owner, reputation_key, spam, ham, seen_at) VALUES {} \
             ON CONFLICT (owner, reputation_key) DO UPDATE SET spam = excluded.spam, \
             ham = excluded.ham, seen_at = excluded.seen_at",
            tuples(merge.writes.len(), 4)
        );
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(owner);
        for (key, spam, ham) in &merge.writes {
            query = query.bind(key.as_str()).bind(*spam).bind(*ham).bind(now);
        }
        query.execute(&mut *conn).await?;
    }
    let table = "spam_reputation";
    delete_keys(conn, table, "reputation_key", owner, &merge.deletions).await?;
    Ok(merge.rows_added)
}

/// How many rows of a count `kept` to delete so that `max` remain; 0 within it.
pub(crate) fn excess(kept: i64, max: usize) -> i64 {
    kept.saturating_sub(i64::try_from(max).unwrap_or(i64::MAX))
        .max(0)
}

impl Directory {
    /// The owner's classifier as stored: its message counts and every token's (one query
    /// for the tokens, in one read transaction with the counts). A user never trained (or
    /// no such user) has the empty one.
    pub async fn spam_model(&self, owner: SpamOwner<'_>) -> Result<SpamModelRows, DirectoryError> {
        let owner = OwnerKey::of(owner)?;
        let mut tx = db::begin_read(&self.inner.pool).await?;
        let Some(row) = owner_row(&mut tx, &owner).await? else {
            return Ok(SpamModelRows::default());
        };
        let rows: Vec<(i64, i64, i64)> =
            sqlx::query_as("SELECT token, spam, ham FROM spam_tokens WHERE owner = $1")
                .bind(row.id)
                .fetch_all(&mut *tx)
                .await?;
        tx.commit().await?;
        let mut tokens = Vec::with_capacity(rows.len());
        for (token, spam, ham) in rows {
            // The hash's 64 bits, stored as a signed BIGINT.
            let token = token as u64;
            tokens.push((token, stored("spam", spam)?, stored("ham", ham)?));
        }
        tokens.sort_unstable_by_key(|&(token, _, _)| token);
        Ok(SpamModelRows {
            spam_messages: stored("spam_messages", row.spam_messages)?,
            ham_messages: stored("ham_messages", row.ham_messages)?,
            tokens,
        })
    }

    /// Applies a batch of training in one transaction: adds the changes to the message and
    /// token counts (each held at 0 or more, a token at 0/0 deleted). When the owner then
    /// holds more than `tokens_max` tokens, the ones seen least (spam + ham smallest) are
    /// deleted down to 90% of `tokens_max`, and returned so the caller's cache can drop them.
    pub async fn spam_apply(
        &self,
        owner: SpamOwner<'_>,
        delta: &SpamDelta,
        tokens_max: usize,
    ) -> Result<Vec<u64>, DirectoryError> {
        let owner = OwnerKey::of(owner)?;
        // The hash's 64 bits, stored as a signed BIGINT.
        let changes = summed(delta.tokens.iter().map(|&(t, s, h)| (t as i64, s, h)));
        let mut tx = self.inner.pool.begin().await?;
        let mut row = lock_owner(&mut tx, &owner).await?;
        row.spam_messages = row.spam_messages.saturating_add(delta.spam_messages).max(0);
        row.ham_messages = row.ham_messages.saturating_add(delta.ham_messages).max(0);
        for chunk in changes.chunks(CHUNK_ROWS) {
            row.tokens += apply_tokens(&mut tx, row.id, chunk).await?;
        }
        let keep = tokens_max - tokens_max.div_ceil(10);
        let mut pruned = Vec::new();
        if row.tokens > i64::try_from(tokens_max).unwrap_or(i64::MAX) {
            let doomed: Vec<i64> = sqlx::query_scalar(
                "DELETE FROM spam_tokens WHERE owner = $1 AND token IN \
                 (SELECT token FROM spam_tokens WHERE owner = $1 \
                  ORDER BY spam + ham, token LIMIT $2) \
                 RETURNING token",
            )
            .bind(row.id)
            .bind(excess(row.tokens, keep))
            .fetch_all(&mut *tx)
            .await?;
            row.tokens -= i64::try_from(doomed.len()).unwrap_or(i64::MAX);
            pruned = doomed.into_iter().map(|token| token as u64).collect();
        }
        store_owner(&mut tx, &row).await?;
        tx.commit().await?;
        Ok(pruned)
    }

    /// The class the owner trained the message with this digest as, if it did (and the
    /// record is still kept).
    pub async fn spam_trained(
        &self,
        owner: SpamOwner<'_>,
        digest: &str,
    ) -> Result<Option<SpamClass>, DirectoryError> {
        let owner = OwnerKey::of(owner)?;
        let mut tx = db::begin_read(&self.inner.pool).await?;
        let Some(row) = owner_row(&mut tx, &owner).await? else {
            return Ok(None);
        };
        let class: Option<String> =
            sqlx::query_scalar("SELECT class FROM spam_trained WHERE owner = $1 AND digest = $2")
                .bind(row.id)
                .bind(digest)
                .fetch_optional(&mut *tx)
                .await?;
        tx.commit().await?;
        class.as_deref().map(SpamClass::from_sql).transpose()
    }

    /// Records that the owner trained the message with this digest as `class` at `now` (Unix
    /// seconds). Past `records_max` records of the owner, the oldest go.
    pub async fn spam_set_trained(
        &self,
        owner: SpamOwner<'_>,
        digest: &str,
        class: SpamClass,
        now: i64,
        records_max: usize,
    ) -> Result<(), DirectoryError> {
        let owner = OwnerKey::of(owner)?;
        check_key("trained digest", digest, SPAM_DIGEST_BYTES_MAX)?;
        let mut tx = self.inner.pool.begin().await?;
        let mut row = lock_owner(&mut tx, &owner).await?;
        let known: Option<String> =
            sqlx::query_scalar("SELECT class FROM spam_trained WHERE owner = $1 AND digest = $2")
                .bind(row.id)
                .bind(digest)
                .fetch_optional(&mut *tx)
                .await?;
        sqlx::query(
            "INSERT INTO spam_trained (owner, digest, class, trained_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (owner, digest) DO UPDATE SET class = $3, trained_at = $4",
        )
        .bind(row.id)
        .bind(digest)
        .bind(class.as_sql())
        .bind(now)
        .execute(&mut *tx)
        .await?;
        row.trained += i64::from(known.is_none());
        let excess = excess(row.trained, records_max);
        if excess > 0 {
            let deleted = sqlx::query(
                "DELETE FROM spam_trained WHERE owner = $1 AND digest IN \
                 (SELECT digest FROM spam_trained WHERE owner = $1 \
                  ORDER BY trained_at, digest LIMIT $2)",
            )
            .bind(row.id)
            .bind(excess)
            .execute(&mut *tx)
            .await?;
            row.trained -= i64::try_from(deleted.rows_affected()).unwrap_or(i64::MAX);
        }
        store_owner(&mut tx, &row).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The user's reputation counts (key, spam, ham) of those of `keys` it has, in the order
    /// of `keys`. A key that cannot be stored (empty, too long) is never present.
    pub async fn spam_reputation(
        &self,
        user: &str,
        keys: &[String],
    ) -> Result<Vec<(String, u32, u32)>, DirectoryError> {
        let address = canonical(user)?;
        let mut wanted: Vec<&String> = keys
            .iter()
            .filter(|key| fits(key, REPUTATION_KEY_BYTES_MAX))
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut found: HashMap<String, (i64, i64)> = HashMap::new();
        // One statement per chunk, each on its own: the keys' rows are independent.
        for chunk in wanted.chunks(CHUNK_ROWS) {
            let sql = format!(
                "SELECT r.reputation_key, r.spam, r.ham FROM spam_reputation r \
                 JOIN spam_owners o ON o.id = r.owner \
                 WHERE o.address = $1 AND r.reputation_key IN ({})",
                parameters(chunk.len())
            );
            let mut query =
                sqlx::query_as::<_, (String, i64, i64)>(AssertSqlSafe(sql)).bind(&address);
            for key in chunk {
                query = query.bind(key.as_str());
            }
            for (key, spam, ham) in query.fetch_all(&self.inner.pool).await? {
                found.insert(key, (spam, ham));
            }
        }
        let mut answer = Vec::with_capacity(found.len());
        for key in keys {
            if let Some((spam, ham)) = found.remove(key) {
                answer.push((key.clone(), stored("spam", spam)?, stored("ham", ham)?));
            }
        }
        Ok(answer)
    }

    /// Every reputation row of the user (at most the `rows_max` its writers keep): what a
    /// node caches to score the user's mail without a query per message.
    pub async fn spam_reputation_all(
        &self,
        user: &str,
    ) -> Result<Vec<(String, u32, u32)>, DirectoryError> {
        let address = canonical(user)?;
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT r.reputation_key, r.spam, r.ham FROM spam_reputation r \
             JOIN spam_owners o ON o.id = r.owner WHERE o.address = $1",
        )
        .bind(&address)
        .fetch_all(&self.inner.pool)
        .await?;
        rows.into_iter()
            .map(|(key, spam, ham)| Ok((key, stored("spam", spam)?, stored("ham", ham)?)))
            .collect()
    }

    /// Adds signed (key, spam, ham) changes to the user's reputation counts in one
    /// transaction: each count held at 0 or more, a key at 0/0 deleted, every key written
    /// marked seen at `now` (Unix seconds). Past `rows_max` keys, the least recently seen go.
    pub async fn spam_reputation_add(
        &self,
        user: &str,
        entries: &[(String, i64, i64)],
        now: i64,
        rows_max: usize,
    ) -> Result<(), DirectoryError> {
        let owner = OwnerKey::User(canonical(user)?);
        for (key, _, _) in entries {
            check_key("reputation key", key, REPUTATION_KEY_BYTES_MAX)?;
        }
        let changes = summed(entries.iter().map(|(k, s, h)| (k.as_str(), *s, *h)));
        let changes: Vec<(String, (i64, i64))> = changes
            .into_iter()
            .map(|(key, sums)| (key.to_owned(), sums))
            .collect();
        let mut tx = self.inner.pool.begin().await?;
        let mut row = lock_owner(&mut tx, &owner).await?;
        for chunk in changes.chunks(CHUNK_ROWS) {
            row.reputation += apply_reputation(&mut tx, row.id, chunk, now).await?;
        }
        let excess = excess(row.reputation, rows_max);
        if excess > 0 {
            let deleted = sqlx::query(
                "DELETE FROM spam_reputation WHERE owner = $1 AND reputation_key IN \
                 (SELECT reputation_key FROM spam_reputation WHERE owner = $1 \
                  ORDER BY seen_at, reputation_key LIMIT $2)",
            )
            .bind(row.id)
            .bind(excess)
            .execute(&mut *tx)
            .await?;
            row.reputation -= i64::try_from(deleted.rows_affected()).unwrap_or(i64::MAX);
        }
        store_owner(&mut tx, &row).await?;
        tx.commit().await?;
        Ok(())
    }

    /// What the owner's classifier holds (from its counts row: no table is counted).
    pub async fn spam_stats(&self, owner: SpamOwner<'_>) -> Result<SpamStats, DirectoryError> {
        let owner = OwnerKey::of(owner)?;
        let mut conn = self.inner.pool.acquire().await?;
        let Some(row) = owner_row(&mut conn, &owner).await? else {
            return Ok(SpamStats::default());
        };
        Ok(SpamStats {
            spam_messages: stored("spam_messages", row.spam_messages)?,
            ham_messages: stored("ham_messages", row.ham_messages)?,
            tokens: stored("tokens", row.tokens)?,
            trained: stored("trained", row.trained)?,
            reputation: stored("reputation", row.reputation)?,
        })
    }

    /// Sets the thresholds of `target`, a domain or (with an `@`) a user address, that
    /// override `[spam]`'s; all `None` removes them. A directory change: every node's cache
    /// sees it ([`crate::Cache::spam_thresholds`]).
    pub async fn spam_thresholds_set(
        &self,
        target: &str,
        thresholds: SpamThresholds,
    ) -> Result<(), DirectoryError> {
        thresholds.check()?;
        let user = target.contains('@');
        let (target, table, column, exists) = if user {
            let sql = "SELECT COUNT(*) FROM users WHERE address = $1";
            (
                address_arg(target, LocalCase::Fold)?.joined(),
                "spam_user_thresholds",
                "address",
                sql,
            )
        } else {
            let sql = "SELECT COUNT(*) FROM domains WHERE name = $1";
            (domain_arg(target)?, "spam_domain_thresholds", "domain", sql)
        };
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let found: i64 = sqlx::query_scalar(exists)
            .bind(&target)
            .fetch_one(&mut *tx)
            .await?;
        if found == 0 {
            return Err(if user {
                DirectoryError::NoSuchUser(target)
            } else {
                DirectoryError::NoSuchDomain(target)
            });
        }
        if thresholds.is_empty() {
            let sql = format!("DELETE FROM {table} WHERE {column} = $1");
            sqlx::query(AssertSqlSafe(sql))
                .bind(&target)
                .execute(&mut *tx)
                .await?;
        } else {
            let sql = format!(
                "INSERT INTO {table} ({column}, junk, reject, greylist) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT ({column}) DO UPDATE SET junk = $2, reject = $3, greylist = $4"
            );
            sqlx::query(AssertSqlSafe(sql))
                .bind(&target)
                .bind(thresholds.junk)
                .bind(thresholds.reject)
                .bind(thresholds.greylist)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Every domain's and user's thresholds, sorted by domain or address.
    pub async fn spam_thresholds_list(
        &self,
    ) -> Result<Vec<(String, SpamThresholds)>, DirectoryError> {
        let mut tx = db::begin_read(&self.inner.pool).await?;
        let (domains, users) = load_thresholds(&mut tx).await?;
        tx.commit().await?;
        let mut all: Vec<(String, SpamThresholds)> = domains.into_iter().chain(users).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merge_clamps_counts_and_deletes_rows_at_zero() {
        let stored: HashMap<i64, (i64, i64)> = [(1, (2, 0)), (2, (1, 1)), (3, (0, 5))].into();
        let changes = [
            (1, (-5, 0)),
            (2, (-1, 0)),
            (3, (0, 0)),
            (4, (0, -3)),
            (5, (i64::MAX, 1)),
        ];
        assert_eq!(
            merge(&changes, &stored),
            Merge {
                writes: vec![(2, 0, 1), (3, 0, 5), (5, i64::from(u32::MAX), 1)],
                deletions: vec![1],
                rows_added: 0,
            }
        );
    }

    #[test]
    fn placeholders_number_the_parameters_after_the_shared_first() {
        assert_eq!(parameters(3), "$2, $3, $4");
        assert_eq!(tuples(2, 3), "($1, $2, $3, $4), ($1, $5, $6, $7)");
    }

    #[test]
    fn changes_to_one_key_add_up() {
        assert_eq!(
            summed([(7u64, 1, 0), (3, 0, 1), (7, 2, -1)]),
            vec![(3, (0, 1)), (7, (3, -1))]
        );
    }
}
