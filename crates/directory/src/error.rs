//! The directory's error type: one variant per kind of failure, each a clear one-line message
//! (the CLI prints it as is).

use std::path::PathBuf;

/// Everything a directory operation can fail with. Bad input and bad rows are errors, never
/// panics.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// The database file could not be opened or created.
    #[error("open directory {}: {source}", path.display())]
    Open { path: PathBuf, source: sqlx::Error },
    /// The PostgreSQL directory could not be reached; `url` is shown without its password.
    #[error("connect to directory {url}: {source}")]
    Connect { url: String, source: sqlx::Error },
    /// A directory location (`[directory] url`) that is neither a path nor a PostgreSQL URL.
    #[error("invalid directory location {0}: use postgres://... or postgresql://...")]
    InvalidLocation(String),
    /// A query failed (I/O, lock timeout, constraint the code did not expect).
    #[error("directory database: {0}")]
    Database(#[from] sqlx::Error),
    /// The database was migrated by a newer program; this one must not write to it.
    #[error(
        "the directory was migrated by a newer mailstow (schema version {found}); this build \
         reads up to schema version {supported}: run the newer mailstow, or restore the backup \
         taken before the upgrade (docs/operations.md)"
    )]
    SchemaTooNew { found: i64, supported: i64 },
    /// A row holds something the code never writes (negative quota, unparsable hash, ...).
    #[error("corrupt directory data: {0}")]
    Corrupt(String),
    /// `Options` cannot be used.
    #[error("invalid directory options: {0}")]
    InvalidOptions(String),
    /// A domain name failed the syntax check.
    #[error("invalid domain {name}: {reason}")]
    InvalidDomain { name: String, reason: &'static str },
    /// An address failed the syntax check.
    #[error("invalid address {address}: {reason}")]
    InvalidAddress {
        address: String,
        reason: &'static str,
    },
    #[error("domain {0} already exists")]
    DomainExists(String),
    #[error("no such domain {0}")]
    NoSuchDomain(String),
    /// `del_domain` while users or aliases still live in the domain.
    #[error("domain {domain} still has {users} user(s) and {aliases} alias(es); delete them first")]
    DomainNotEmpty {
        domain: String,
        users: i64,
        aliases: i64,
    },
    #[error("user {0} already exists")]
    UserExists(String),
    #[error("no such user {0}")]
    NoSuchUser(String),
    /// The address was deleted and the store still holds its mail; `user add` of it waits
    /// until the mail is gone (a running server removes it at once, an offline `user del`
    /// before it returns).
    #[error("user {0} was deleted and its mail is still being removed; try again shortly")]
    UserBeingDeleted(String),
    /// A `user rename` from or to the address has not finished (its mail is being handed
    /// over; a crash in the middle is finished at the server's next start or by the next
    /// offline `user rename`).
    #[error("user {0} is being renamed; try again shortly")]
    UserBeingRenamed(String),
    #[error("alias {alias} -> {destination} already exists")]
    AliasExists { alias: String, destination: String },
    /// `add_alias` to an address of one of our domains that is neither a user nor an alias:
    /// mail to the alias would be accepted and then bounce.
    #[error("{0} is in a local domain but is neither a user nor an alias; add the user first")]
    NoSuchDestination(String),
    /// `del_alias` matched nothing; `alias` is the source; `destination` is `None` when all
    /// were asked for.
    #[error("no such alias {alias}{}", destination.as_ref().map(|d| format!(" -> {d}")).unwrap_or_default())]
    NoSuchAlias {
        alias: String,
        destination: Option<String>,
    },
    /// A domain has at most one catch-all, with one destination.
    #[error(
        "domain {domain} already has a catch-all (@{domain} -> {destination}); delete it first"
    )]
    CatchAllExists { domain: String, destination: String },
    /// One alias source may not have more destinations than an expansion may produce.
    #[error("alias {alias} already has {count} destinations (expansion_targets_max)")]
    TooManyDestinations { alias: String, count: usize },
    /// A DKIM selector is one DNS label.
    #[error("invalid DKIM selector {0}: use letters, digits and inner hyphens, at most 63")]
    InvalidSelector(String),
    #[error("DKIM key {selector}._domainkey.{domain} already exists")]
    DkimKeyExists { domain: String, selector: String },
    #[error("no DKIM key {selector}._domainkey.{domain}")]
    NoSuchDkimKey { domain: String, selector: String },
    #[error("invalid password: {0}")]
    InvalidPassword(String),
    /// Quotas are stored as signed 64-bit integers (portable `BIGINT`).
    #[error("quota {quota_bytes} bytes is too large (max {})", i64::MAX)]
    QuotaTooLarge { quota_bytes: u64 },
    #[error("quota {quota_messages} messages is too large (max {})", i64::MAX)]
    MessageQuotaTooLarge { quota_messages: u64 },
    /// A node name failed the syntax check.
    #[error("invalid node name {name}: {reason}")]
    InvalidNode { name: String, reason: &'static str },
    #[error("node {0} already exists")]
    NodeExists(String),
    #[error("no such node {0}")]
    NoSuchNode(String),
    /// `remove_node` while users live on it.
    #[error("node {node} still owns {users} user(s); move them first")]
    NodeOwnsUsers { node: String, users: i64 },
    /// `begin_move` of a user already moving, or any other change a move forbids.
    #[error("user {0} is being moved; finish or abort the move first")]
    UserMoving(String),
    /// `finish_move` of a user that is not moving to that node.
    #[error("user {address} is not being moved to {node}")]
    NotMoving { address: String, node: String },
    /// argon2 refused to hash (parameters, internal error).
    #[error("password hashing failed: {0}")]
    Hash(String),
    /// No Sieve script of this name (RFC 5804 `NONEXISTENT`).
    #[error("no Sieve script {name} for {address}")]
    NoSuchScript { address: String, name: String },
    /// A Sieve script of this name exists already (RFC 5804 `ALREADYEXISTS`).
    #[error("a Sieve script {name} exists already for {address}")]
    ScriptExists { address: String, name: String },
    /// The active script cannot be deleted (RFC 5804 `ACTIVE`).
    #[error("Sieve script {0} is active; deactivate it first")]
    ScriptActive(String),
    /// A script name RFC 5804 1.6 does not allow.
    #[error("bad Sieve script name {name}: {reason}")]
    InvalidScriptName { name: String, reason: &'static str },
    /// A key the spam filter made (a trained message's digest, a reputation key, a
    /// greylisting triplet) that is empty or longer than its column.
    #[error("invalid {what} {key}: empty, or longer than {bytes_max} bytes")]
    InvalidSpamKey {
        what: &'static str,
        key: String,
        bytes_max: usize,
    },
    /// A field of a report counter or a received report (RFC 8460, RFC 7489 7.2) that is
    /// longer than its column, holds a control character, or is not one of its values.
    #[error("invalid report {what} {value}: {reason}")]
    InvalidReportField {
        what: &'static str,
        value: String,
        reason: &'static str,
    },
    /// A spam score threshold that is not a finite number.
    #[error("invalid spam threshold {name} = {value}: use a finite number")]
    InvalidSpamThreshold { name: &'static str, value: f64 },
    /// A per-user limit (subscriptions, Sieve scripts) was reached.
    #[error("limit reached: {0}")]
    Limit(String),
    /// Too many password verifications are waiting (`Options::hash_queue_max`): a
    /// temporary condition, answered as "try again later".
    #[error("too many logins being checked; try again later")]
    Busy,
    /// A blocking task (argon2) panicked or was cancelled.
    #[error("password task failed: {0}")]
    Task(String),
}

/// Longest piece of caller input repeated in an error message: an error stays one readable
/// line even for a megabyte of garbage.
const SHOWN_CHARS_MAX: usize = 80;

/// Caller input as shown in an error: quoted and escaped (control characters stay on one line)
/// and cut at [`SHOWN_CHARS_MAX`] characters.
pub(crate) fn shown(input: &str) -> String {
    match input.char_indices().nth(SHOWN_CHARS_MAX) {
        None => format!("{input:?}"),
        Some((cut, _)) => format!("{:?}...", &input[..cut]),
    }
}
