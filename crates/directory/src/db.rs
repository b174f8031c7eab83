//! The SQL side: connecting, the migrator, the write transaction, and what every query shares
//! (the backend's differences, quotas' stored form, constraint errors, the clock of the time
//! columns). The reads live with what they build: the snapshot in `cache.rs`, the DKIM keys
//! in `dkim.rs`.
//!
//! **Why not `sqlx::migrate!`:** that macro lives behind sqlx's `macros` feature, which we leave
//! off (the query macros want `DATABASE_URL` or offline data at compile time). The migrations
//! are embedded with `include_str!` instead and run by [`migrate`]: the schema version is a row
//! of `meta`, and the whole upgrade is one transaction that starts with a write, so two
//! processes opening a new file at once take turns instead of both creating tables.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{Any, AnyPool, Executor, Transaction};

use crate::error::DirectoryError;

/// Which SQL backend a pool speaks; the few statements that differ branch on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// The backend of a pool, from its URL's scheme (`sqlite:` or `postgres[ql]:`).
    pub(crate) fn of(pool: &AnyPool) -> Backend {
        match pool.connect_options().database_url.scheme() {
            "postgres" | "postgresql" => Backend::Postgres,
            _ => Backend::Sqlite,
        }
    }

    /// An SQL expression for "now" in milliseconds since the Unix epoch, by the database's
    /// clock (`BIGINT`): leases are compared with the clock that wrote them.
    pub(crate) fn now_ms(self) -> &'static str {
        match self {
            Backend::Postgres => "(extract(epoch from clock_timestamp()) * 1000)::bigint",
            Backend::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
        }
    }
}

/// Now in Unix seconds by this host's clock: what the directory writes into `created_at`,
/// `last_login_at` and the other time columns (leases use the database's clock instead,
/// [`Backend::now_ms`]).
pub(crate) fn unix_now_s() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX)
}

/// The PostgreSQL channel every directory write notifies (`LISTEN mailstow_directory`).
pub(crate) const CHANNEL: &str = "mailstow_directory";

/// The key of the advisory lock `migrate` holds on PostgreSQL ("mailstow" in ASCII).
const MIGRATION_LOCK: i64 = 0x6d61_696c_7374_6f77;

/// The embedded migrations, oldest first: (version, SQLite SQL, PostgreSQL SQL). Versions are
/// 1, 2, 3, ...; a file is never edited once released, a change is a new file. Most are one
/// portable file for both backends; a migration that needs different DDL has a variant per
/// backend.
pub(crate) const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        include_str!("../migrations/0001_initial.sql"),
        include_str!("../migrations/0001_initial.sql"),
    ),
    (
        2,
        include_str!("../migrations/0002_subscriptions.sql"),
        include_str!("../migrations/0002_subscriptions.sql"),
    ),
    (
        3,
        include_str!("../migrations/0003_deletions_and_dkim.sql"),
        include_str!("../migrations/0003_deletions_and_dkim.sql"),
    ),
    (
        4,
        include_str!("../migrations/0004_user_life.sql"),
        include_str!("../migrations/0004_user_life.sql"),
    ),
    (
        5,
        include_str!("../migrations/0005_cluster.sqlite.sql"),
        include_str!("../migrations/0005_cluster.postgres.sql"),
    ),
    (
        6,
        include_str!("../migrations/0006_admins_and_logins.sql"),
        include_str!("../migrations/0006_admins_and_logins.sql"),
    ),
    (
        7,
        include_str!("../migrations/0007_special_use.sql"),
        include_str!("../migrations/0007_special_use.sql"),
    ),
    (
        8,
        include_str!("../migrations/0008_sieve.sql"),
        include_str!("../migrations/0008_sieve.sql"),
    ),
    (
        9,
        include_str!("../migrations/0009_node_managesieve.sql"),
        include_str!("../migrations/0009_node_managesieve.sql"),
    ),
    (
        10,
        include_str!("../migrations/0010_spam.sqlite.sql"),
        include_str!("../migrations/0010_spam.postgres.sql"),
    ),
    (
        11,
        include_str!("../migrations/0011_reports.sqlite.sql"),
        include_str!("../migrations/0011_reports.postgres.sql"),
    ),
    (
        12,
        include_str!("../migrations/0012_replication.sql"),
        include_str!("../migrations/0012_replication.sql"),
    ),
];

/// The schema version this program writes.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// Opens (creating if needed) the SQLite file with the pragmas the directory relies on.
pub(crate) async fn connect_sqlite(
    path: &Path,
    busy_timeout: Duration,
    connections_max: u32,
) -> Result<AnyPool, sqlx::Error> {
    sqlx::any::install_default_drivers();
    let path = std::path::absolute(path).map_err(sqlx::Error::Io)?;
    let url = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true);
    let url = sqlx::ConnectOptions::to_url_lossy(&url);
    let options = <AnyConnectOptions as sqlx::ConnectOptions>::from_url(&url)?;
    // The Any driver connects from a URL, which carries no pragmas: they are set on each new
    // connection instead.
    // WAL: the server's readers (refresh, authenticate) never block on the CLI's writes.
    // FULL: each commit is synced to the WAL before `add_user` returns. The directory is
    // small and rarely written; an added user must not vanish on power loss.
    // busy_timeout: writers (server and CLI) take turns on SQLite's single write lock; wait,
    // don't fail.
    let pragmas = format!(
        "PRAGMA busy_timeout = {}; PRAGMA foreign_keys = ON; PRAGMA journal_mode = WAL; \
         PRAGMA synchronous = FULL;",
        busy_timeout.as_millis()
    );
    // Switching a fresh file to WAL takes an exclusive lock, and SQLite answers SQLITE_BUSY
    // at once (no busy handler) when another process is creating or migrating the same
    // file. Retry that, within the same busy timeout.
    let deadline = std::time::Instant::now() + busy_timeout;
    loop {
        let pragmas = pragmas.clone();
        let result = AnyPoolOptions::new()
            .max_connections(connections_max)
            .after_connect(move |conn, _meta| {
                let pragmas = pragmas.clone();
                Box::pin(async move {
                    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(pragmas)))
                        .await?;
                    Ok(())
                })
            })
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

/// Connects to PostgreSQL at `url`. Connecting fails fast (`acquire_timeout`) so a database
/// that is down answers with an error instead of stalling a refresh or a CLI command.
pub(crate) async fn connect_postgres(
    url: &str,
    acquire_timeout: Duration,
    connections_max: u32,
) -> Result<AnyPool, sqlx::Error> {
    sqlx::any::install_default_drivers();
    let options: AnyConnectOptions = url.parse()?;
    AnyPoolOptions::new()
        .max_connections(connections_max)
        .acquire_timeout(acquire_timeout)
        .connect_with(options)
        .await
}

/// Brings the schema to [`SCHEMA_VERSION`]; refuses a database from a newer program.
pub(crate) async fn migrate(pool: &AnyPool) -> Result<(), DirectoryError> {
    let backend = Backend::of(pool);
    let create_meta = "CREATE TABLE IF NOT EXISTS meta (key VARCHAR(64) NOT NULL PRIMARY KEY, \
                       value BIGINT NOT NULL)";
    let mut tx;
    match backend {
        Backend::Sqlite => {
            // Outside the transaction and idempotent: a second process racing here waits on
            // the write lock, then finds the table.
            sqlx::query(create_meta).execute(pool).await?;
            tx = pool.begin().await?;
        }
        Backend::Postgres => {
            // Concurrent `CREATE TABLE IF NOT EXISTS` can fail on PostgreSQL (both see no
            // table, one insert into the catalog loses): every migrator takes turns on one
            // advisory lock, held until its transaction ends. DDL is transactional there.
            tx = pool.begin().await?;
            sqlx::query("SELECT 1 FROM pg_advisory_xact_lock($1)")
                .bind(MIGRATION_LOCK)
                .execute(&mut *tx)
                .await?;
            sqlx::query(create_meta).execute(&mut *tx).await?;
        }
    }
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
    for &(version, sqlite, postgres) in MIGRATIONS.iter().filter(|(v, _, _)| *v > found) {
        let sql = match backend {
            Backend::Sqlite => sqlite,
            Backend::Postgres => postgres,
        };
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
/// directory writers the same way, and `NOTIFY mailstow_directory` is queued in the same
/// transaction: PostgreSQL delivers it at commit, and drops it with a rollback. A failed
/// operation rolls back, bump included.
pub(crate) async fn begin_write(
    pool: &AnyPool,
) -> Result<Transaction<'static, Any>, DirectoryError> {
    let mut tx = pool.begin().await?;
    sqlx::query("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
        .execute(&mut *tx)
        .await?;
    if Backend::of(pool) == Backend::Postgres {
        sqlx::raw_sql("NOTIFY mailstow_directory")
            .execute(&mut *tx)
            .await?;
    }
    Ok(tx)
}

/// Starts a read-only transaction whose reads all see one snapshot: SQLite's WAL gives a
/// deferred transaction that from its first read; PostgreSQL needs `REPEATABLE READ`.
pub(crate) async fn begin_read(
    pool: &AnyPool,
) -> Result<Transaction<'static, Any>, DirectoryError> {
    let mut tx = pool.begin().await?;
    if Backend::of(pool) == Backend::Postgres {
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
    }
    Ok(tx)
}

/// The current generation: the cache's cheap "did anything change?" query.
pub(crate) async fn generation(pool: &AnyPool) -> Result<i64, DirectoryError> {
    let generation = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'generation'")
        .fetch_one(pool)
        .await?;
    Ok(generation)
}

/// Each node's name and whether its lease is in the future by the database's clock: the
/// cheap liveness poll (one small SELECT).
pub(crate) async fn node_states(pool: &AnyPool) -> Result<Vec<(String, bool)>, DirectoryError> {
    let now = Backend::of(pool).now_ms();
    let sql = format!(
        "SELECT name, CASE WHEN lease_until > {now} THEN 1 ELSE 0 END FROM nodes ORDER BY name"
    );
    let rows: Vec<(String, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(|(name, up)| (name, up != 0)).collect())
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
