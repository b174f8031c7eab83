//! The mail directory: domains, users (argon2id password hashes, quotas) and aliases in SQL,
//! with an in-memory [`Cache`] for the delivery path.
//!
//! # Brief overview
//!
//! [`Directory`] is the administrative and authentication handle over one SQL database, cheap
//! to clone and shared by a tokio server and the `mailstow` CLI. Where it lives is a
//! [`Location`]: an SQLite file (the single-node default; WAL, `synchronous=FULL`) or a
//! PostgreSQL database that every node of a cluster shares ([`Directory::open_at`];
//! [`Directory::open`] and [`Directory::open_with`] take an SQLite path). Its writes are
//! transactions that also bump a `generation` counter; its reads of addresses, owners,
//! nodes and password hashes go through [`Cache`], a snapshot of the whole directory that
//! answers without I/O. The server runs [`Directory::spawn_refresher`] to keep it current
//! (see "The cache's rules" below).
//!
//! Addresses: domains and the local parts of our own addresses are case-insensitive and
//! stored lowercase; subaddresses (`user+tag@dom`) reach `user@dom` unless `user+tag@dom`
//! itself exists. The syntax rules and limits are in `address.rs` ([`ADDRESS_BYTES_MAX`] and
//! friends), the resolution rules in `cache.rs` (see [`Resolution`]).
//!
//! # Two backends, one driver
//!
//! Both backends go through sqlx's `Any` driver (`AnyPool`): one copy of every query, the
//! backend chosen by the URL's scheme at run time. An enum of a `SqlitePool` and a `PgPool`
//! would have needed every query written twice (or generic over the database everywhere);
//! `Any` costs a conversion of each row and limits column types to the plain ones this
//! schema uses anyway (`BIGINT`, `VARCHAR`/`TEXT`). SQLite's pragmas are set on each new
//! connection (`db::connect_sqlite`), since a URL carries none. The schema and queries are
//! portable: standard types, timestamps as Unix seconds, `$1` placeholders (SQLite reads
//! them as numbered parameters), `ON CONFLICT ... DO NOTHING`, a partial unique index, no
//! `AUTOINCREMENT`, and constraint errors detected through sqlx's portable
//! `is_unique_violation`. What differs per backend is small and branches on `db::Backend`:
//!
//! - "now" in milliseconds by the database's clock (`db::Backend::now_ms`), for leases;
//! - `db::migrate` on PostgreSQL takes `pg_advisory_xact_lock` first (concurrent
//!   `CREATE TABLE IF NOT EXISTS` can race there) and creates `meta` inside its transaction;
//!   a migration that needs different DDL has a file per backend (`0005_cluster.*.sql`);
//! - the cache's `load_snapshot` (`cache.rs`) on PostgreSQL runs in a `REPEATABLE READ`
//!   transaction, for the one snapshot that SQLite's WAL gives any deferred transaction;
//! - `db::begin_write` on PostgreSQL also queues `NOTIFY mailstow_directory`, which
//!   PostgreSQL delivers at commit (and drops on rollback). Bumping the generation first
//!   locks that row, which serialises writers as SQLite's write lock does.
//!
//! # Schema and migrations
//!
//! The DDL is `migrations/0001_initial.sql` and the files after it, embedded with
//! `include_str!` and applied by a small versioned migrator in `db.rs` (sqlx's `migrate!`
//! needs the `macros` feature, which we leave off). Tables:
//!
//! - `meta` (key, value): `schema_version` and `generation`;
//! - `domains` (name); `aliases` (source, destination, domain); `dkim_keys`;
//!   `subscriptions`; `sieve_scripts`, `sieve_global_scripts` and `sieve_tracking` (mail
//!   rules, `sieve_scripts.rs`); `special_use` (attributes clients gave folders, RFC 6154 3);
//!   `deleted_users` and `renamed_users` (deletions and renames in progress);
//! - the spam filter's (migration 0010, docs/spam.md): `spam_owners` (one row per
//!   classifier: a user's, or the site-wide one, `id` 0; its message counts and the row
//!   counts of the three tables under it), `spam_tokens`, `spam_trained` and
//!   `spam_reputation`, `spam_domain_thresholds` and `spam_user_thresholds` (`spam.rs`,
//!   `spam_thresholds.rs`); `spam_greylist` and `spam_greylist_count` (`greylist.rs`).
//!   Only the thresholds are directory changes;
//! - `users`: address, domain, password_hash (argon2id PHC), quota_bytes, quota_messages,
//!   created_at, last_login_at, and for the cluster `node` (the owner node, NULL = the single
//!   node), `epoch` (BIGINT, starts at 1, +1 per finished move), `move_state` (NULL or
//!   `frozen:<target node>`), `created_seq` (the generation that added it: orders users
//!   added within one second), `admin` (0/1: may use the web view's admin pages);
//! - `logins`: each user's login history (client, protocol, result, attempts, first and
//!   last time), written in batches, the newest [`LOGINS_KEPT_MAX`] rows per user kept;
//! - `nodes`: name, lmtp, imap, pop3, web (nullable), `lease_until` (BIGINT milliseconds by
//!   the database's clock), created_at.
//!
//! # The cache's rules
//!
//! - The snapshot holds domains, users (quota, password hash, owner node, epoch, move
//!   state, admin), aliases, DKIM keys, Sieve scripts, spam thresholds and nodes
//!   (addresses); it is replaced whole, never patched.
//!   Every answer ([`Cache::resolve`], [`Cache::owner`], [`Cache::node`], the hashes
//!   [`Directory::authenticate`] checks) comes from it without I/O, so mail and logins go on
//!   while the database is down.
//! - Every write bumps the generation in its transaction, and the handle that wrote
//!   refreshes right after its commit (a caller sees its own write).
//! - SQLite: the refresher polls the generation every `period`; `authenticate` also checks
//!   it first (the file is local), so a password changed by the CLI works at once. The CLI
//!   also tells a running server "directory changed".
//! - PostgreSQL: the refresher `LISTEN`s on `mailstow_directory` on a connection of its own:
//!   each notification refreshes (milliseconds), each (re)connection of the listener reloads
//!   in full (notifications sent meanwhile are lost), and the generation is polled every
//!   [`BACKSTOP_PERIOD`] as a backstop.
//! - Node up/down: [`Directory::renew_lease`] (run by [`Directory::spawn_lease`]) sets
//!   `lease_until` = the database's now + ttl, without bumping the generation; the refresher
//!   polls the states every [`NODE_POLL_PERIOD`] with one small SELECT that compares the
//!   leases with the database's clock, and keeps them beside the snapshot
//!   ([`Cache::node_up`]).
//! - Database back after an outage: for one lease length from the first poll that answers,
//!   a node that was up stays up though its lease lapsed meanwhile (no lease could be
//!   renewed), and the node itself is never down in its own eyes ([`Cache::set_own_lease`]).
//! - Database unreachable: the snapshot and the node states stay as last read; background
//!   tasks log one warning, then at most one every 30 s, and one line when it answers again;
//!   writes fail with [`DirectoryError::Database`].

mod address;
mod arguments;
mod cache;
mod db;
mod dkim;
mod error;
mod greylist;
mod hasher;
mod login_recording;
mod logins;
mod nodes;
mod password;
mod provisioning;
mod reports;
mod sieve_scripts;
mod spam;
mod spam_thresholds;
mod subscriptions;
mod verified;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use sqlx::AnyPool;
use tokio::sync::Semaphore;

pub use address::{
    ADDRESS_BYTES_MAX, DOMAIN_BYTES_MAX, LABEL_BYTES_MAX, LOCAL_PART_BYTES_MAX,
    SUBADDRESS_SEPARATOR,
};
pub use argon2::Params as Argon2Params;
pub use arguments::NODE_NAME_BYTES_MAX;
pub use cache::{Cache, ExpansionLimit, NodeInfo, Owner, Resolution, Target, UserScripts};
pub use dkim::{DkimKey, SELECTOR_BYTES_MAX};
pub use error::DirectoryError;
pub use greylist::{GREYLIST_RETRY_WINDOW_S, GREYLIST_TRIPLET_BYTES_MAX, Greylisted};
pub use hasher::Priority;
pub use logins::{Attempt, LOGINS_KEPT_MAX, LoginRecord};
pub use reports::{
    Counted, DAY_S, DmarcDisposition, DmarcKey, DmarcPolicyPublished, POLICY_STRINGS_BYTES_MAX,
    REPORT_BYTES_MAX, REPORT_LIST_MAX, REPORT_NAME_BYTES_MAX, REPORT_ROWS_PER_DAY_MAX,
    REPORTS_KEPT_MAX, ReceivedReport, ReportDay, ReportKind, SentReport, TlsPolicyType,
    TlsSessionKey, day_of,
};
pub use sieve_scripts::{SCRIPT_NAME_BYTES_MAX, ScriptInfo, check_script_name};
pub use spam::{
    REPUTATION_KEY_BYTES_MAX, SPAM_DIGEST_BYTES_MAX, SpamClass, SpamDelta, SpamModelRows,
    SpamOwner, SpamStats,
};
pub use spam_thresholds::SpamThresholds;
pub use subscriptions::{
    SPECIAL_USES_PER_USER_MAX, SUBSCRIPTION_BYTES_MAX, SUBSCRIPTIONS_PER_USER_MAX,
};

use crate::address::{LocalCase, parse_address};
use crate::cache::ExpansionLimits;

/// Deepest alias nesting `Options::expansion_depth_max` may allow: the expansion recurses once
/// per level, and chains this long are configuration mistakes anyway.
pub const EXPANSION_DEPTH_CEILING: usize = 100;

/// Shortest refresher period: shorter would poll the database in a busy loop.
pub const REFRESH_PERIOD_MIN: Duration = Duration::from_millis(100);

/// How often a PostgreSQL refresher checks the generation even without a notification: a
/// backstop for a notification lost some way the listener did not notice.
pub const BACKSTOP_PERIOD: Duration = Duration::from_secs(10);

/// How often the refresher polls which nodes are up (one small SELECT).
pub const NODE_POLL_PERIOD: Duration = Duration::from_secs(1);

/// How long the PostgreSQL listener waits for a connection before trying again.
const LISTENER_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// The pause between two failed connections of the listener (after the timeout, if any).
const RECONNECT_PAUSE: Duration = Duration::from_millis(250);

/// Shortest interval between two warnings of the same background task while the database
/// stays unreachable.
const WARN_INTERVAL: Duration = Duration::from_secs(30);

/// Where the directory lives.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// An SQLite file (the single-node default), created if missing.
    Sqlite(PathBuf),
    /// A PostgreSQL database, by `postgres://` or `postgresql://` URL.
    Postgres(String),
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl std::fmt::Display for Location {
    /// The path, or the URL without its password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Sqlite(path) => write!(f, "{}", path.display()),
            Location::Postgres(url) => f.write_str(&redacted(url)),
        }
    }
}

impl Location {
    /// A `postgres://` or `postgresql://` URL as a PostgreSQL location; `sqlite://PATH` or
    /// `sqlite:PATH` as an SQLite file. Anything else is refused.
    pub fn parse(url: &str) -> Result<Location, DirectoryError> {
        let lower = url.get(..13).unwrap_or(url).to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            if url.parse::<sqlx::any::AnyConnectOptions>().is_err() {
                return Err(DirectoryError::InvalidLocation(error::shown(&redacted(
                    url,
                ))));
            }
            return Ok(Location::Postgres(url.to_owned()));
        }
        if let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            && !path.is_empty()
        {
            return Ok(Location::Sqlite(PathBuf::from(path)));
        }
        Err(DirectoryError::InvalidLocation(error::shown(&redacted(
            url,
        ))))
    }
}

/// A URL with its password replaced by `***` (for messages and logs).
fn redacted(url: &str) -> String {
    match url.parse::<sqlx::any::AnyConnectOptions>() {
        Ok(options) => {
            let mut url = options.database_url;
            if url.password().is_some() {
                let _ = url.set_password(Some("***"));
            }
            url.to_string()
        }
        Err(_) => "(unparsable url)".to_owned(),
    }
}

/// A background task's warnings while the database stays unreachable: the first at once,
/// then at most one per [`WARN_INTERVAL`]; one info line when it answers again.
#[derive(Default)]
struct Warnings {
    last: Option<Instant>,
    suppressed: u64,
}

impl Warnings {
    fn failed(&mut self, what: &'static str, error: &DirectoryError) {
        let now = Instant::now();
        match self.last {
            Some(last) if now.duration_since(last) < WARN_INTERVAL => self.suppressed += 1,
            _ => {
                tracing::warn!(event = "directory_error", task = what, %error, suppressed = self.suppressed, msg = "directory database unreachable; working from the cache");
                self.last = Some(now);
                self.suppressed = 0;
            }
        }
    }

    fn succeeded(&mut self, what: &'static str) {
        if self.last.take().is_some() {
            tracing::info!(
                event = "directory_ok",
                task = what,
                msg = "directory database reachable again"
            );
            self.suppressed = 0;
        }
    }
}

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
    /// Shortest new password, in characters (default 1: any; the server and the CLI use
    /// [`PASSWORD_LENGTH_MIN_DEFAULT`] unless configured). Every way a password is set
    /// (`add_user*`, `set_password`) checks it; logins are not affected, so a password set
    /// before a higher minimum keeps working until it is changed.
    pub password_length_min: usize,
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
    /// On PostgreSQL also how long a query waits for a connection (a database that is down
    /// fails a write after this long).
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
    /// Sieve scripts one user may keep (default 16; `sieve_scripts_max`).
    pub sieve_scripts_max: usize,
    /// Longest Sieve script, in bytes (default 64 KiB; `sieve_script_bytes_max`).
    pub sieve_script_bytes_max: usize,
}

/// The shortest new password the server and the CLI accept unless `[server]
/// password_length_min` says otherwise: 8 characters, NIST SP 800-63B's floor for passwords a
/// user chooses.
pub const PASSWORD_LENGTH_MIN_DEFAULT: usize = 8;

impl Default for Options {
    fn default() -> Self {
        Options {
            argon2_params: Argon2Params::default(),
            expansion_targets_max: 100,
            expansion_depth_max: 10,
            password_bytes_max: 1024,
            password_length_min: 1,
            hash_concurrency_max: std::thread::available_parallelism().map_or(1, |n| n.get()),
            hash_memory_bytes_max: 64 << 20,
            hash_queue_max: 64,
            busy_timeout: Duration::from_secs(5),
            connections_max: 4,
            verified_logins_max: 100_000,
            verified_login_ttl: Duration::from_secs(3600),
            postmaster: None,
            sieve_scripts_max: 16,
            sieve_script_bytes_max: 64 * 1024,
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
        if self.password_length_min == 0 || self.password_length_min > self.password_bytes_max {
            return bad("password_length_min must be between 1 and password_bytes_max".into());
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
    /// The node holding the mailbox; `None` = the single node (no cluster).
    pub node: Option<String>,
    /// Bumped by every finished move (starts at 1).
    pub epoch: i64,
    /// May use the web view's admin pages.
    pub admin: bool,
}

/// The directory handle; see the crate documentation. Cloning shares the pool and the cache.
#[derive(Clone)]
pub struct Directory {
    inner: Arc<Inner>,
}

struct Inner {
    pool: AnyPool,
    location: Location,
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
    attempts: logins::PendingAttempts,
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
        Directory::open_at(&Location::Sqlite(path.to_owned()), options).await
    }

    /// Opens the directory at `location` (an SQLite file, created if missing, or a
    /// PostgreSQL database) and brings its schema up to date.
    pub async fn open_at(
        location: &Location,
        options: Options,
    ) -> Result<Directory, DirectoryError> {
        options.validate()?;
        let pool = match location {
            Location::Sqlite(path) => {
                db::connect_sqlite(path, options.busy_timeout, options.connections_max)
                    .await
                    .map_err(|source| DirectoryError::Open {
                        path: path.to_owned(),
                        source,
                    })?
            }
            Location::Postgres(url) => {
                db::connect_postgres(url, options.busy_timeout, options.connections_max)
                    .await
                    .map_err(|source| DirectoryError::Connect {
                        url: redacted(url),
                        source,
                    })?
            }
        };
        db::migrate(&pool).await?;
        let limits = ExpansionLimits {
            targets_max: options.expansion_targets_max,
            depth_max: options.expansion_depth_max,
        };
        let cache = Cache::load(pool.clone(), limits, options.postmaster.clone()).await?;
        cache.refresh_node_states().await?;
        Ok(Directory {
            inner: Arc::new(Inner {
                pool,
                location: location.clone(),
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
                attempts: logins::PendingAttempts::default(),
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

    /// Where this directory lives.
    pub fn location(&self) -> &Location {
        &self.inner.location
    }

    /// Writes a consistent copy of an SQLite directory (DKIM keys included) to `target`, a
    /// file that must not exist: `VACUUM INTO`, one read transaction, so writers may go on.
    /// The copy is not synced; the caller syncs it. Returns `false`, writing nothing, for a
    /// PostgreSQL directory, whose tool is `pg_dump` (docs/operations.md, Backups).
    pub async fn copy_into(&self, target: &Path) -> Result<bool, DirectoryError> {
        if !matches!(self.inner.location, Location::Sqlite(_)) {
            return Ok(false);
        }
        let target = target
            .to_str()
            .ok_or_else(|| DirectoryError::Corrupt(format!("{} is not UTF-8", target.display())))?;
        sqlx::query("VACUUM INTO $1")
            .bind(target.to_string())
            .execute(&self.inner.pool)
            .await?;
        Ok(true)
    }

    /// Starts the task that keeps [`Directory::cache`] current. It ends by itself once every
    /// clone of this `Directory` is dropped; abort the handle to stop it sooner. Needs a tokio
    /// runtime.
    ///
    /// On SQLite it calls [`Cache::refresh_if_changed`] every `period` (at least
    /// [`REFRESH_PERIOD_MIN`]). On PostgreSQL it listens on the `mailstow_directory` channel:
    /// each notification refreshes (a change reaches every node within milliseconds), every
    /// (re)connection of the listener reloads in full (notifications sent while it was away
    /// are lost), and the generation is still checked every [`BACKSTOP_PERIOD`] (`period` is
    /// not used). Both poll the nodes' up states every [`NODE_POLL_PERIOD`]. While the
    /// database is unreachable the cache keeps its last snapshot and states, and the task
    /// logs a warning at most every 30 s.
    pub fn spawn_refresher(&self, period: Duration) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        match &self.inner.location {
            Location::Sqlite(_) => {
                tokio::spawn(poll_refresher(weak, period.max(REFRESH_PERIOD_MIN)))
            }
            Location::Postgres(url) => tokio::spawn(listen_refresher(weak, url.clone())),
        }
    }

    /// Sets `node`'s lease to the database's clock plus `ttl`: the node counts as up until
    /// then. Bumps no generation and notifies nobody (renewals are frequent and change
    /// nothing the snapshot holds).
    pub async fn renew_lease(&self, node: &str, ttl: Duration) -> Result<(), DirectoryError> {
        let ttl = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2);
        let now = db::Backend::of(&self.inner.pool).now_ms();
        let sql = format!("UPDATE nodes SET lease_until = {now} + $1 WHERE name = $2");
        let updated = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(ttl)
            .bind(node)
            .execute(&self.inner.pool)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(DirectoryError::NoSuchNode(error::shown(node)));
        }
        Ok(())
    }

    /// Starts a task that calls [`Directory::renew_lease`] every `period` (at least
    /// [`REFRESH_PERIOD_MIN`]), logging failures (at most one warning every 30 s) and going
    /// on. Ends once every clone of this `Directory` is dropped. The cache learns this node's
    /// name and `ttl` ([`Cache::set_own_lease`]).
    pub fn spawn_lease(
        &self,
        node: &str,
        period: Duration,
        ttl: Duration,
    ) -> tokio::task::JoinHandle<()> {
        self.inner.cache.set_own_lease(node, ttl);
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let node = node.to_owned();
        let period = period.max(REFRESH_PERIOD_MIN);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut warnings = Warnings::default();
            loop {
                interval.tick().await;
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                let directory = Directory { inner };
                match directory.renew_lease(&node, ttl).await {
                    Ok(()) => warnings.succeeded("lease"),
                    Err(error) => warnings.failed("lease", &error),
                }
            }
        })
    }

    /// Checks `username` (a full address, any case) and `password`. Returns the canonical
    /// address on success and `None` for a wrong password, an unknown user or a malformed
    /// name. The hash comes from the cache's snapshot, so logins work while the database is
    /// down (see the crate documentation for how a new password reaches it); argon2 runs on
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
        // On SQLite the file is local and never "down": check the generation first, so a
        // change made by another process (the CLI) applies at once. On PostgreSQL the
        // listener brings changes within milliseconds, and a login must not wait on a
        // database that may be unreachable.
        if matches!(self.inner.location, Location::Sqlite(_)) {
            self.refresh_after_write().await;
        }
        let stored = self.inner.cache.password_hash(&address);
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

/// The SQLite refresher: the generation every `period`, the nodes every
/// [`NODE_POLL_PERIOD`].
async fn poll_refresher(weak: Weak<Inner>, period: Duration) {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut warnings = Warnings::default();
    let mut nodes_polled: Option<Instant> = None;
    loop {
        interval.tick().await;
        let Some(inner) = weak.upgrade() else {
            return;
        };
        let mut result = inner.cache.refresh_if_changed().await.map(drop);
        if result.is_ok() && nodes_polled.is_none_or(|at| at.elapsed() >= NODE_POLL_PERIOD) {
            nodes_polled = Some(Instant::now());
            result = inner.cache.refresh_node_states().await;
        }
        match result {
            Ok(()) => warnings.succeeded("refresh"),
            Err(error) => warnings.failed("refresh", &error),
        }
    }
}

/// The PostgreSQL refresher; see [`Directory::spawn_refresher`]. Two loops in one task: the
/// listener and the node poll, neither cancelling the other's waits.
async fn listen_refresher(weak: Weak<Inner>, url: String) {
    tokio::select! {
        () = listen_loop(weak.clone(), url) => {}
        () = node_poll_loop(weak) => {}
    }
}

/// Polls the nodes' up states every [`NODE_POLL_PERIOD`].
async fn node_poll_loop(weak: Weak<Inner>) {
    let mut tick = tokio::time::interval(NODE_POLL_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut warnings = Warnings::default();
    loop {
        tick.tick().await;
        let Some(inner) = weak.upgrade() else {
            return;
        };
        match inner.cache.refresh_node_states().await {
            Ok(()) => warnings.succeeded("nodes"),
            Err(error) => warnings.failed("nodes", &error),
        }
    }
}

/// `LISTEN mailstow_directory` on a connection of its own: a refresh per notification, a full
/// reload per (re)connection, the generation every [`BACKSTOP_PERIOD`].
async fn listen_loop(weak: Weak<Inner>, url: String) {
    use sqlx::postgres::{PgListener, PgPoolOptions};
    // A short connection timeout: while the database is down each attempt waits this long,
    // so a restarted database is found again within about a second.
    let listener_pool = match PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(LISTENER_CONNECT_TIMEOUT)
        .connect_lazy(&url)
    {
        Ok(pool) => pool,
        Err(error) => {
            tracing::error!(event = "directory_error", error = %DirectoryError::from(error), msg = "cannot listen for directory changes; the cache will not refresh");
            return;
        }
    };
    let mut listener: Option<PgListener> = None;
    let mut warnings = Warnings::default();
    let mut backstop = tokio::time::interval(BACKSTOP_PERIOD);
    backstop.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    backstop.reset();
    loop {
        if weak.strong_count() == 0 {
            return;
        }
        let Some(active) = listener.as_mut() else {
            let connected = async {
                let mut new = PgListener::connect_with(&listener_pool).await?;
                // A lost connection is reported (`Ok(None)`) instead of being re-made
                // inside `try_recv`: this loop reconnects and reloads.
                new.eager_reconnect(false);
                new.listen(db::CHANNEL).await?;
                Ok::<_, sqlx::Error>(new)
            }
            .await;
            match connected {
                Ok(new) => {
                    // Notifications sent while no one listened are lost: reload in full.
                    let Some(inner) = weak.upgrade() else {
                        return;
                    };
                    match inner.cache.reload().await {
                        Ok(()) => {
                            warnings.succeeded("refresh");
                            listener = Some(new);
                        }
                        Err(error) => {
                            warnings.failed("refresh", &error);
                            tokio::time::sleep(RECONNECT_PAUSE).await;
                        }
                    }
                }
                Err(error) => {
                    warnings.failed("refresh", &DirectoryError::from(error));
                    tokio::time::sleep(RECONNECT_PAUSE).await;
                }
            }
            continue;
        };
        let notified = tokio::select! {
            received = active.try_recv() => Some(received),
            _ = backstop.tick() => None,
        };
        let Some(inner) = weak.upgrade() else {
            return;
        };
        match notified {
            Some(Ok(Some(_))) | None => match inner.cache.refresh_if_changed().await {
                Ok(_) => warnings.succeeded("refresh"),
                Err(error) => warnings.failed("refresh", &error),
            },
            // The connection was lost; the next turn reconnects and reloads.
            Some(Ok(None)) => listener = None,
            Some(Err(error)) => {
                warnings.failed("refresh", &DirectoryError::from(error));
                listener = None;
            }
        }
    }
}
