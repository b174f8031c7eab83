//! The mail directory: domains, users (argon2id password hashes, quotas) and aliases in SQL,
//! with an in-memory [`Cache`] for the delivery path.
//!
//! # Brief overview
//!
//! [`Directory`] is the administrative and authentication handle over one SQLite file (WAL,
//! `synchronous=FULL`), cheap to clone and shared by a tokio server and the `mailstow` CLI.
//! Its writes are transactions that also bump a `generation` counter; its reads of
//! addresses go through [`Cache`], a snapshot of everything except password hashes that
//! answers [`Cache::resolve`] without I/O. The server runs [`Directory::spawn_refresher`],
//! which polls the generation (one one-row SELECT) and reloads the snapshot when another
//! process (the CLI) changed the directory. [`Directory::authenticate`] always asks the
//! database, so a new password works at once.
//!
//! Addresses: domains and the local parts of our own addresses are case-insensitive and
//! stored lowercase; subaddresses (`user+tag@dom`) reach `user@dom` unless `user+tag@dom`
//! itself exists. The syntax rules and limits are in `address.rs` ([`ADDRESS_BYTES_MAX`] and
//! friends), the resolution rules in `cache.rs` (see [`Resolution`]).
//!
//! # Schema and migrations
//!
//! Tables `domains`, `users`, `aliases` and `meta` (schema version and generation); the DDL
//! is `migrations/0001_initial.sql` and the files after it, embedded with `include_str!` and applied by a small
//! versioned migrator in `db.rs` (sqlx's `migrate!` needs the `macros` feature, which we
//! leave off).
//!
//! # PostgreSQL later
//!
//! The schema and every query are written to run unchanged on PostgreSQL: standard types
//! (`VARCHAR`, `TEXT`, `BIGINT`, timestamps as Unix seconds), `$1` placeholders (SQLite reads
//! them as numbered parameters), `ON CONFLICT ... DO NOTHING`, a partial unique index, no
//! `AUTOINCREMENT`, `PRAGMA` or SQLite functions, and constraint errors detected through
//! sqlx's portable `is_unique_violation`. What would change:
//!
//! - the pool type: `SqlitePool` becomes `PgPool` (or an enum of both behind `Directory`), and
//!   `db::connect` sets no pragmas (PostgreSQL commits durably by default);
//! - `db::load_snapshot` must run its reads in a `REPEATABLE READ` transaction to get the one
//!   snapshot that SQLite's WAL gives a deferred transaction;
//! - `db::migrate` should take `pg_advisory_xact_lock` first, because concurrent
//!   `CREATE TABLE IF NOT EXISTS` can race on PostgreSQL;
//! - the write path needs nothing: bumping the generation first locks that row, which
//!   serialises writers as SQLite's write lock does. The polling could become
//!   `LISTEN`/`NOTIFY`.

mod address;
mod admin;
mod cache;
mod db;
mod dkim;
mod error;
mod hasher;
mod logins;
mod password;
mod subscriptions;
mod verified;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use sqlx::SqlitePool;
use tokio::sync::Semaphore;

pub use address::{
    ADDRESS_BYTES_MAX, DOMAIN_BYTES_MAX, LABEL_BYTES_MAX, LOCAL_PART_BYTES_MAX,
    SUBADDRESS_SEPARATOR,
};
pub use argon2::Params as Argon2Params;
pub use cache::{Cache, ExpansionLimit, Resolution, Target};
pub use dkim::{DkimKey, SELECTOR_BYTES_MAX};
pub use error::DirectoryError;
pub use hasher::Priority;
pub use subscriptions::{SUBSCRIPTION_BYTES_MAX, SUBSCRIPTIONS_PER_USER_MAX};

use crate::address::{LocalCase, parse_address};
use crate::cache::ExpansionLimits;

/// Deepest alias nesting `Options::expansion_depth_max` may allow: the expansion recurses once
/// per level, and chains this long are configuration mistakes anyway.
pub const EXPANSION_DEPTH_CEILING: usize = 100;

/// Shortest refresher period: shorter would poll the database in a busy loop.
pub const REFRESH_PERIOD_MIN: Duration = Duration::from_millis(100);

/// Tunables of a [`Directory`]. `Default` is for production.
#[derive(Clone, Debug)]
pub struct Options {
    /// argon2id cost of new hashes. Default: the argon2 crate's (m = 19 MiB, t = 2, p = 1, the
    /// OWASP recommendation). Tests use the minimum to stay fast. Existing hashes keep the
    /// parameters they were made with.
    pub argon2_params: Argon2Params,
    /// Most distinct targets one address may expand to (default 100): a bound on the work
    /// and fan-out one RCPT can cause. Also the most destinations one alias source may have.
    pub expansion_targets_max: usize,
    /// Deepest alias nesting (default 10): alias chains longer than this are mistakes.
    pub expansion_depth_max: usize,
    /// Longest password accepted (default 1024 bytes): no human password is longer, and it
    /// bounds what one AUTH attempt makes us hash.
    pub password_bytes_max: usize,
    /// Password verifications at once: the verifier threads (default: the number of CPUs).
    /// Each keeps its own argon2 memory (19 MiB with the default cost) for every job it runs;
    /// more threads than cores would only hold more memory while they wait for a CPU.
    pub hash_concurrency_max: usize,
    /// The most argon2 memory one verification may use (default 64 MiB). A stored hash that
    /// needs more is reported as corrupt instead of being computed: with the verifier
    /// threads, this bounds the memory logins can take at
    /// `hash_concurrency_max × hash_memory_bytes_max`.
    pub hash_memory_bytes_max: usize,
    /// Verifications waiting for a thread (default 64); past it a login is answered "try
    /// again later" at once.
    pub hash_queue_max: usize,
    /// How long a write waits for another writer (another process) to finish (default 5 s).
    pub busy_timeout: Duration,
    /// Most pooled SQLite connections (default 4): readers run in parallel under WAL, writes
    /// take turns anyway.
    pub connections_max: u32,
    /// Logins remembered as verified (default 100,000; 0 disables): a client that logs in
    /// again with the password that matched the same stored hash skips argon2 (see
    /// `verified.rs`).
    pub verified_logins_max: usize,
    /// How long a remembered login stays valid (default one hour).
    pub verified_login_ttl: Duration,
    /// Where `postmaster@` of a local domain goes when no user, alias or catch-all takes it
    /// (default `None`: the domain's oldest user). See the resolution rules in `cache`.
    pub postmaster: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            argon2_params: Argon2Params::default(),
            expansion_targets_max: 100,
            expansion_depth_max: 10,
            password_bytes_max: 1024,
            hash_concurrency_max: std::thread::available_parallelism().map_or(1, |n| n.get()),
            hash_memory_bytes_max: 64 << 20,
            hash_queue_max: 64,
            busy_timeout: Duration::from_secs(5),
            connections_max: 4,
            verified_logins_max: 100_000,
            verified_login_ttl: Duration::from_secs(3600),
            postmaster: None,
        }
    }
}

impl Options {
    /// Checks that every limit can be used.
    pub fn validate(&self) -> Result<(), DirectoryError> {
        let bad = |what: String| Err(DirectoryError::InvalidOptions(what));
        if self.expansion_targets_max == 0 {
            return bad("expansion_targets_max must be at least 1".into());
        }
        if self.expansion_depth_max == 0 || self.expansion_depth_max > EXPANSION_DEPTH_CEILING {
            return bad(format!(
                "expansion_depth_max must be between 1 and {EXPANSION_DEPTH_CEILING}"
            ));
        }
        if self.password_bytes_max == 0 {
            return bad("password_bytes_max must be at least 1".into());
        }
        if self.hash_concurrency_max == 0 {
            return bad("hash_concurrency_max must be at least 1".into());
        }
        if self.hash_queue_max == 0 {
            return bad("hash_queue_max must be at least 1".into());
        }
        let needed = self
            .argon2_params
            .block_count()
            .saturating_mul(argon2::Block::SIZE);
        if self.hash_memory_bytes_max < needed {
            return bad(format!(
                "hash_memory_bytes_max ({}) is below what argon2_params need ({needed})",
                self.hash_memory_bytes_max
            ));
        }
        if self.connections_max == 0 {
            return bad("connections_max must be at least 1".into());
        }
        Ok(())
    }
}

/// A user as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    /// Canonical (lowercase) address.
    pub address: String,
    /// `None` = unlimited.
    pub quota_bytes: Option<u64>,
    /// `None` = unlimited.
    pub quota_messages: Option<u64>,
    /// Unix seconds of the last successful login (any protocol; recorded at most once a
    /// minute, see [`Directory::note_login`]); `None` = never since it was recorded.
    pub last_login_at: Option<i64>,
}

/// The directory handle; see the crate documentation. Cloning shares the pool and the cache.
#[derive(Clone)]
pub struct Directory {
    inner: Arc<Inner>,
}

struct Inner {
    pool: SqlitePool,
    cache: Cache,
    options: Options,
    /// New hashes (adding users, changing passwords): argon2 on the blocking pool, a few at
    /// a time. Administrative, never reachable by a client.
    hashers: Semaphore,
    /// Verifications: the bounded pool of `hasher.rs`.
    verifiers: hasher::Hashers,
    /// A hash of a fixed password, made with the configured parameters on first use, so an
    /// unknown user costs the same verification as a known one.
    dummy_hash: OnceLock<String>,
    verified: verified::Verified,
    last_logins: logins::LastLogins,
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory")
            .field("cache", &self.inner.cache)
            .finish_non_exhaustive()
    }
}

impl Directory {
    /// Opens the directory at `path` with production [`Options`], creating the file and
    /// bringing its schema up to date.
    pub async fn open(path: &Path) -> Result<Directory, DirectoryError> {
        Directory::open_with(path, Options::default()).await
    }

    /// [`Directory::open`] with explicit options.
    pub async fn open_with(path: &Path, options: Options) -> Result<Directory, DirectoryError> {
        options.validate()?;
        let pool = db::connect(path, options.busy_timeout, options.connections_max)
            .await
            .map_err(|source| DirectoryError::Open {
                path: path.to_owned(),
                source,
            })?;
        db::migrate(&pool).await?;
        let limits = ExpansionLimits {
            targets_max: options.expansion_targets_max,
            depth_max: options.expansion_depth_max,
        };
        let cache = Cache::load(pool.clone(), limits, options.postmaster.clone()).await?;
        Ok(Directory {
            inner: Arc::new(Inner {
                pool,
                cache,
                hashers: Semaphore::new(options.hash_concurrency_max),
                verifiers: hasher::Hashers::start(
                    options.hash_concurrency_max,
                    options.hash_memory_bytes_max,
                    options.hash_queue_max,
                )?,
                verified: verified::Verified::new(
                    options.verified_login_ttl,
                    options.verified_logins_max,
                ),
                options,
                dummy_hash: OnceLock::new(),
                last_logins: logins::LastLogins::default(),
            }),
        })
    }

    /// Closes the pool; later calls on any clone fail. Dropping the last clone does the same
    /// without waiting.
    pub async fn close(&self) {
        self.inner.pool.close().await;
    }

    /// The in-memory snapshot for the delivery path.
    pub fn cache(&self) -> &Cache {
        &self.inner.cache
    }

    /// Starts a task that calls [`Cache::refresh_if_changed`] every `period` (at least
    /// [`REFRESH_PERIOD_MIN`]), logging failures. It ends by itself once every clone of this
    /// `Directory` is dropped; abort the handle to stop it sooner. Needs a tokio runtime.
    pub fn spawn_refresher(&self, period: Duration) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let period = period.max(REFRESH_PERIOD_MIN);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                if let Err(error) = inner.cache.refresh_if_changed().await {
                    tracing::warn!(event = "directory_error", %error, msg = "cache refresh failed; retrying");
                }
            }
        })
    }

    /// Checks `username` (a full address, any case) and `password`. Returns the canonical
    /// address on success and `None` for a wrong password, an unknown user or a malformed
    /// name. The database is asked every time (a new password works at once); argon2 runs on
    /// the blocking pool, except for a password already verified against the same stored hash
    /// (`Options::verified_logins_max`). An unknown user is verified against a dummy hash with the same
    /// parameters, so the time taken does not tell whether the user exists (hashes made
    /// with other parameters still take their own time). A subaddress does not log in.
    pub async fn authenticate(
        &self,
        username: &str,
        password: &str,
    ) -> Result<Option<String>, DirectoryError> {
        self.authenticate_with(username, password, Priority::Normal)
            .await
    }

    /// [`Directory::authenticate`], waiting for a verifier thread in the queue `priority`
    /// names (see [`Priority`]).
    pub async fn authenticate_with(
        &self,
        username: &str,
        password: &str,
        priority: Priority,
    ) -> Result<Option<String>, DirectoryError> {
        // These answers depend only on the input, never on who exists.
        if password.is_empty() || password.len() > self.inner.options.password_bytes_max {
            return Ok(None);
        }
        let Ok(address) = parse_address(username, LocalCase::Fold) else {
            return Ok(None);
        };
        let address = address.joined();
        let stored: Option<String> =
            sqlx::query_scalar("SELECT password_hash FROM users WHERE address = $1")
                .bind(&address)
                .fetch_optional(&self.inner.pool)
                .await?;
        if let Some(phc) = &stored
            && self.inner.verified.check(&address, phc, password)
        {
            return Ok(Some(address));
        }
        let matched = match stored {
            Some(phc) => {
                let ok = self
                    .inner
                    .verifiers
                    .verify(phc.clone(), password.to_owned(), priority)
                    .await?;
                if ok {
                    self.inner.verified.remember(&address, &phc, password);
                }
                ok
            }
            None => {
                let dummy = self.dummy_hash().await?;
                self.inner
                    .verifiers
                    .verify(dummy, password.to_owned(), priority)
                    .await?;
                false
            }
        };
        Ok(matched.then_some(address))
    }

    /// A hash of a fixed password made with the configured parameters, made once.
    async fn dummy_hash(&self) -> Result<String, DirectoryError> {
        if let Some(hash) = self.inner.dummy_hash.get() {
            return Ok(hash.clone());
        }
        let params = self.inner.options.argon2_params.clone();
        let hash = self
            .run_hasher(move || password::hash(&params, "mailstow dummy password"))
            .await?;
        // Two racing first calls both hash; either result will do.
        Ok(self.inner.dummy_hash.get_or_init(|| hash).clone())
    }

    /// Runs an argon2 job on the blocking pool, at most `hash_concurrency_max` at once.
    async fn run_hasher<T, F>(&self, job: F) -> Result<T, DirectoryError>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T, DirectoryError> + Send + 'static,
    {
        // The semaphore is never closed, so acquiring only fails if that changes.
        let _permit = self
            .inner
            .hashers
            .acquire()
            .await
            .map_err(|e| DirectoryError::Task(e.to_string()))?;
        tokio::task::spawn_blocking(job)
            .await
            .map_err(|e| DirectoryError::Task(e.to_string()))?
    }

    /// After a commit: bring this handle's cache up to date so the caller sees its own write.
    /// The write stands either way; a failed refresh is logged and the refresher retries.
    async fn refresh_after_write(&self) {
        if let Err(error) = self.inner.cache.refresh_if_changed().await {
            tracing::warn!(event = "directory_error", %error, msg = "cache refresh after a write failed");
        }
    }
}
