//! The SQL side: connecting, the migrator, the write transaction and the cache's reads.
//!
//! **Why not `sqlx::migrate!`:** that macro lives behind sqlx's `macros` feature, which we leave
//! off (the query macros want `DATABASE_URL` or offline data at compile time). The migrations
//! are embedded with `include_str!` instead and run by [`migrate`]: the schema version is a row
//! of `meta`, and the whole upgrade is one transaction that starts with a write, so two
//! processes opening a new file at once take turns instead of both creating tables.

use std::path::Path;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};

use crate::cache::Snapshot;
use crate::dkim::DkimKey;
use crate::error::DirectoryError;

/// The embedded migrations, oldest first: (version, SQL). Versions are 1, 2, 3, ...; a file
/// is never edited once released, a change is a new file.
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../migrations/0001_initial.sql")),
    (2, include_str!("../migrations/0002_subscriptions.sql")),
    (3, include_str!("../migrations/0003_deletions_and_dkim.sql")),
    (4, include_str!("../migrations/0004_user_life.sql")),
];

/// The schema version this program writes.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// Opens (creating if needed) the SQLite file with the pragmas the directory relies on.
pub(crate) async fn connect(
    path: &Path,
    busy_timeout: Duration,
    connections_max: u32,
) -> Result<SqlitePool, sqlx::Error> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        // WAL: the server's readers (refresh, authenticate) never block on the CLI's writes.
        .journal_mode(SqliteJournalMode::Wal)
        // FULL: each commit is synced to the WAL before `add_user` returns. The directory is
        // small and rarely written; an added user must not vanish on power loss.
        .synchronous(SqliteSynchronous::Full)
        .foreign_keys(true)
        // Writers (server and CLI) take turns on SQLite's single write lock; wait, don't fail.
        .busy_timeout(busy_timeout);
    // Switching a fresh file to WAL takes an exclusive lock, and SQLite answers SQLITE_BUSY
    // at once (no busy handler) when another process is creating or migrating the same
    // file. Retry that, within the same busy timeout.
    let deadline = std::time::Instant::now() + busy_timeout;
    loop {
        let result = SqlitePoolOptions::new()
            .max_connections(connections_max)
            .connect_with(options.clone())
            .await;
        match result {
            Err(sqlx::Error::Database(e))
                if e.code().as_deref() == Some("5") && std::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            other => return other,
        }
    }
}

/// Brings the schema to [`SCHEMA_VERSION`]; refuses a database from a newer program.
pub(crate) async fn migrate(pool: &SqlitePool) -> Result<(), DirectoryError> {
    // Outside the transaction and idempotent: a second process racing here waits on the
    // write lock, then finds the table.
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS meta (key VARCHAR(64) NOT NULL PRIMARY KEY, \
         value BIGINT NOT NULL)",
    )
    .execute(pool)
    .await?;
    let mut tx = pool.begin().await?;
    // A write first: it takes the write lock, so the version read below cannot go stale
    // before commit.
    sqlx::query(
        "INSERT INTO meta (key, value) VALUES ('schema_version', 0) ON CONFLICT (key) DO NOTHING",
    )
    .execute(&mut *tx)
    .await?;
    let found: i64 = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'schema_version'")
        .fetch_one(&mut *tx)
        .await?;
    if found > SCHEMA_VERSION {
        return Err(DirectoryError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        sqlx::raw_sql(sql).execute(&mut *tx).await?;
        sqlx::query("UPDATE meta SET value = $1 WHERE key = 'schema_version'")
            .bind(version)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Starts a transaction for a directory change and bumps the generation in it.
///
/// The bump is the first statement on purpose. On SQLite it takes the write lock at once, so
/// every check that follows sees the state the write will land on, and a concurrent writer
/// waits on `busy_timeout` instead of failing when a read transaction tries to upgrade
/// (`SQLITE_BUSY_SNAPSHOT`). On PostgreSQL it locks the `generation` row, which serialises
/// directory writers the same way. A failed operation rolls back, bump included.
pub(crate) async fn begin_write(
    pool: &SqlitePool,
) -> Result<Transaction<'static, Sqlite>, DirectoryError> {
    let mut tx = pool.begin().await?;
    sqlx::query("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
        .execute(&mut *tx)
        .await?;
    Ok(tx)
}

/// The current generation: the cache's cheap "did anything change?" query.
pub(crate) async fn generation(pool: &SqlitePool) -> Result<i64, DirectoryError> {
    let generation = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'generation'")
        .fetch_one(pool)
        .await?;
    Ok(generation)
}

/// Reads the whole directory (minus password hashes) in one read transaction, so the
/// generation and the rows belong together. SQLite in WAL mode gives a deferred transaction
/// one snapshot from its first read; PostgreSQL would need `REPEATABLE READ` for the same.
pub(crate) async fn load_snapshot(pool: &SqlitePool) -> Result<Snapshot, DirectoryError> {
    let mut tx = pool.begin().await?;
    let generation: i64 = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'generation'")
        .fetch_one(&mut *tx)
        .await?;
    let domains: Vec<String> = sqlx::query_scalar("SELECT name FROM domains")
        .fetch_all(&mut *tx)
        .await?;
    let users: Vec<(String, Option<i64>)> =
        sqlx::query_as("SELECT address, quota_bytes FROM users ORDER BY rowid")
            .fetch_all(&mut *tx)
            .await?;
    let aliases: Vec<(String, String)> =
        sqlx::query_as("SELECT source, destination FROM aliases ORDER BY source, destination")
            .fetch_all(&mut *tx)
            .await?;
    let keys = load_dkim_keys(&mut *tx).await?;
    let message_quotas: Vec<(String, i64)> = sqlx::query_as(
        "SELECT address, quota_messages FROM users WHERE quota_messages IS NOT NULL",
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;

    let mut snapshot = Snapshot {
        generation,
        ..Snapshot::default()
    };
    snapshot.domains.extend(domains);
    for (address, quota) in users {
        let quota = quota_from_sql(&address, quota)?;
        if let Some((_, domain)) = address.rsplit_once('@') {
            snapshot
                .first_users
                .entry(domain.to_string())
                .or_insert_with(|| address.clone());
        }
        snapshot.users.insert(address, quota);
    }
    // Newest first within a domain: the first one seen signs.
    for key in keys {
        snapshot.dkim.entry(key.domain.clone()).or_insert(key);
    }
    for (source, destination) in aliases {
        snapshot
            .aliases
            .entry(source)
            .or_default()
            .push(destination);
    }
    for (address, quota) in message_quotas {
        let quota = quota_from_sql(&address, Some(quota))?.unwrap_or(u64::MAX);
        snapshot.message_quotas.insert(address, quota);
    }
    Ok(snapshot)
}

/// Every DKIM key, by domain, newest first within a domain.
pub(crate) async fn load_dkim_keys<'e, E>(executor: E) -> Result<Vec<DkimKey>, DirectoryError>
where
    E: sqlx::Executor<'e, Database = Sqlite>,
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

/// A quota as stored (`BIGINT`, NULL = unlimited) back to bytes.
pub(crate) fn quota_from_sql(
    address: &str,
    quota: Option<i64>,
) -> Result<Option<u64>, DirectoryError> {
    quota
        .map(|q| {
            u64::try_from(q)
                .map_err(|_| DirectoryError::Corrupt(format!("user {address} has quota {q}")))
        })
        .transpose()
}

/// A quota in bytes to its stored form.
pub(crate) fn quota_to_sql(quota_bytes: Option<u64>) -> Result<Option<i64>, DirectoryError> {
    quota_bytes
        .map(|q| i64::try_from(q).map_err(|_| DirectoryError::QuotaTooLarge { quota_bytes: q }))
        .transpose()
}

/// Whether a query failed on a unique or primary-key constraint (portable: sqlx maps each
/// backend's code).
pub(crate) fn is_unique_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(e) if e.is_unique_violation())
}
