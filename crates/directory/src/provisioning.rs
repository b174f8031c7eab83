//! Provisioning: the directory's domains, users (passwords, quotas, the admin flag, renames,
//! deletions), aliases and DKIM keys, added, changed, listed and removed.
//!
//! Every change is one transaction opened by `db::begin_write` (which bumps the generation
//! and takes the write lock first), so the existence checks inside it are the truth the
//! write lands on, and the specific errors below ("no such domain", "already exists") never
//! race with another writer. Argon2 runs before the transaction, never while holding the lock.

use crate::address::{Address, LocalCase};
use crate::arguments::{address_arg, domain_arg, node_arg};
use crate::db::unix_now_s;
use crate::dkim::{DkimKey, check_selector, load_dkim_keys};
use crate::error::DirectoryError;
use crate::{Directory, UserInfo, db, password};

/// An alias source: one address, or a domain's catch-all (`@domain`).
enum Source {
    Address(Address),
    CatchAll(String),
}

impl Source {
    /// The stored form: `local@domain` or `@domain`.
    fn key(&self) -> String {
        match self {
            Source::Address(address) => address.joined(),
            Source::CatchAll(domain) => format!("@{domain}"),
        }
    }

    fn domain(&self) -> &str {
        match self {
            Source::Address(address) => &address.domain,
            Source::CatchAll(domain) => domain,
        }
    }
}

fn source_arg(source: &str) -> Result<Source, DirectoryError> {
    match source.strip_prefix('@') {
        Some(domain) => Ok(Source::CatchAll(domain_arg(domain)?)),
        None => Ok(Source::Address(address_arg(source, LocalCase::Fold)?)),
    }
}

/// Whether `count` (a `SELECT COUNT(*) ... WHERE key = $1`) finds a row for `key`.
async fn any<'e, E>(executor: E, count: &'static str, key: &str) -> Result<bool, DirectoryError>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let rows: i64 = sqlx::query_scalar(count)
        .bind(key)
        .fetch_one(executor)
        .await?;
    Ok(rows > 0)
}

async fn domain_exists<'e, E>(executor: E, domain: &str) -> Result<bool, DirectoryError>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    any(
        executor,
        "SELECT COUNT(*) FROM domains WHERE name = $1",
        domain,
    )
    .await
}

async fn being_deleted<'e, E>(executor: E, address: &str) -> Result<bool, DirectoryError>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    any(
        executor,
        "SELECT COUNT(*) FROM deleted_users WHERE address = $1",
        address,
    )
    .await
}

/// Whether a `user rename` from or to `address` has not finished.
async fn being_renamed<'e, E>(executor: E, address: &str) -> Result<bool, DirectoryError>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    any(
        executor,
        "SELECT COUNT(*) FROM renamed_users WHERE old_address = $1 OR new_address = $1",
        address,
    )
    .await
}

async fn user_exists<'e, E>(executor: E, address: &str) -> Result<bool, DirectoryError>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    any(
        executor,
        "SELECT COUNT(*) FROM users WHERE address = $1",
        address,
    )
    .await
}

/// `address, quota_bytes, quota_messages, last_login_at, node, epoch, admin` of `users`.
type UserRow = (
    String,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<String>,
    i64,
    i64,
);

/// The columns of a [`UserRow`].
const USER_COLUMNS: &str =
    "address, quota_bytes, quota_messages, last_login_at, node, epoch, admin";

fn user_info(
    (address, quota_bytes, quota_messages, last_login_at, node, epoch, admin): UserRow,
) -> Result<UserInfo, DirectoryError> {
    let quota_bytes = db::quota_from_sql(&address, quota_bytes)?;
    let quota_messages = db::quota_from_sql(&address, quota_messages)?;
    Ok(UserInfo {
        address,
        quota_bytes,
        quota_messages,
        last_login_at,
        node,
        epoch,
        admin: admin == 1,
    })
}

impl Directory {
    /// Adds a domain (stored lowercase).
    pub async fn add_domain(&self, name: &str) -> Result<(), DirectoryError> {
        let name = domain_arg(name)?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let inserted = sqlx::query("INSERT INTO domains (name) VALUES ($1)")
            .bind(&name)
            .execute(&mut *tx)
            .await;
        match inserted {
            Err(e) if db::is_unique_violation(&e) => {
                return Err(DirectoryError::DomainExists(name));
            }
            other => other?,
        };
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Deletes a domain; refused while users or aliases (including its catch-all) exist in it.
    pub async fn del_domain(&self, name: &str) -> Result<(), DirectoryError> {
        let name = domain_arg(name)?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        if !domain_exists(&mut *tx, &name).await? {
            return Err(DirectoryError::NoSuchDomain(name));
        }
        let users: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users WHERE domain = $1")
            .bind(&name)
            .fetch_one(&mut *tx)
            .await?;
        let aliases: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM aliases WHERE domain = $1")
            .bind(&name)
            .fetch_one(&mut *tx)
            .await?;
        if users > 0 || aliases > 0 {
            return Err(DirectoryError::DomainNotEmpty {
                domain: name,
                users,
                aliases,
            });
        }
        // Its signing keys go with it.
        sqlx::query("DELETE FROM dkim_keys WHERE domain = $1")
            .bind(&name)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM domains WHERE name = $1")
            .bind(&name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// All domains, sorted.
    pub async fn list_domains(&self) -> Result<Vec<String>, DirectoryError> {
        let domains = sqlx::query_scalar("SELECT name FROM domains ORDER BY name")
            .fetch_all(&self.inner.pool)
            .await?;
        Ok(domains)
    }

    /// Adds a user with an argon2id hash of `password`. The domain must exist; the address is
    /// stored lowercase. The owner node is chosen as [`Directory::add_user_on`] does without
    /// a node.
    pub async fn add_user(&self, address: &str, password: &str) -> Result<(), DirectoryError> {
        self.add_user_on(address, password, None).await.map(drop)
    }

    /// [`Directory::add_user`] on the node `node`. Without one: when the directory has
    /// nodes, the one that owns the fewest users (ties by name), chosen in the same
    /// transaction; when it has none, no node (the single-node setup). An unknown node is an
    /// error. Returns the owner node.
    pub async fn add_user_on(
        &self,
        address: &str,
        password: &str,
        node: Option<&str>,
    ) -> Result<Option<String>, DirectoryError> {
        self.add_user_as(address, password, node, false).await
    }

    /// [`Directory::add_user_on`], an admin of the web view when `admin` (in the same
    /// transaction: never a moment when the user exists without the right asked for).
    pub async fn add_user_as(
        &self,
        address: &str,
        password: &str,
        node: Option<&str>,
        admin: bool,
    ) -> Result<Option<String>, DirectoryError> {
        let node = node.map(node_arg).transpose()?;
        let address = address_arg(address, LocalCase::Fold)?;
        password::check_new(
            password,
            self.inner.options.password_length_min,
            self.inner.options.password_bytes_max,
        )?;
        let domain = address.domain.clone();
        let address = address.joined();
        // Cheap early answers before paying for a hash; the transaction checks again.
        if !domain_exists(&self.inner.pool, &domain).await? {
            return Err(DirectoryError::NoSuchDomain(domain));
        }
        if user_exists(&self.inner.pool, &address).await? {
            return Err(DirectoryError::UserExists(address));
        }
        if being_deleted(&self.inner.pool, &address).await? {
            return Err(DirectoryError::UserBeingDeleted(address));
        }
        let hash = self.hash_password(password).await?;

        let mut tx = db::begin_write(&self.inner.pool).await?;
        if !domain_exists(&mut *tx, &domain).await? {
            return Err(DirectoryError::NoSuchDomain(domain));
        }
        // The old account's mail is still in the store: the new one must not inherit it.
        if being_deleted(&mut *tx, &address).await? {
            return Err(DirectoryError::UserBeingDeleted(address));
        }
        // Mail is being handed from or to this address (`rename_user`).
        if being_renamed(&mut *tx, &address).await? {
            return Err(DirectoryError::UserBeingRenamed(address));
        }
        let node = match node {
            Some(node) => {
                if !any(
                    &mut *tx,
                    "SELECT COUNT(*) FROM nodes WHERE name = $1",
                    &node,
                )
                .await?
                {
                    return Err(DirectoryError::NoSuchNode(node));
                }
                Some(node)
            }
            // The writers' lock (the generation row) makes the count and the insert one step.
            None => {
                sqlx::query_scalar(
                    "SELECT n.name FROM nodes n ORDER BY \
                     (SELECT COUNT(*) FROM users u WHERE u.node = n.name), n.name LIMIT 1",
                )
                .fetch_optional(&mut *tx)
                .await?
            }
        };
        // `created_seq`: this transaction's generation, which orders users added within
        // the same second.
        let inserted = sqlx::query(
            "INSERT INTO users (address, domain, password_hash, quota_bytes, created_at, node, \
             created_seq, admin) \
             VALUES ($1, $2, $3, NULL, $4, $5, (SELECT value FROM meta WHERE key = 'generation'), \
             $6)",
        )
        .bind(&address)
        .bind(&domain)
        .bind(&hash)
        .bind(unix_now_s())
        .bind(&node)
        .bind(i64::from(admin))
        .execute(&mut *tx)
        .await;
        match inserted {
            Err(e) if db::is_unique_violation(&e) => {
                return Err(DirectoryError::UserExists(address));
            }
            other => other?,
        };
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(node)
    }

    /// Replaces a user's password hash.
    pub async fn set_password(&self, address: &str, password: &str) -> Result<(), DirectoryError> {
        let address = address_arg(address, LocalCase::Fold)?.joined();
        password::check_new(
            password,
            self.inner.options.password_length_min,
            self.inner.options.password_bytes_max,
        )?;
        if !user_exists(&self.inner.pool, &address).await? {
            return Err(DirectoryError::NoSuchUser(address));
        }
        let hash = self.hash_password(password).await?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let updated = sqlx::query("UPDATE users SET password_hash = $1 WHERE address = $2")
            .bind(&hash)
            .bind(&address)
            .execute(&mut *tx)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(DirectoryError::NoSuchUser(address));
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Makes a user an admin of the web view, or no longer one (`mailstow user admin`).
    /// Returns whether the user was one before.
    pub async fn set_admin(&self, address: &str, admin: bool) -> Result<bool, DirectoryError> {
        let address = address_arg(address, LocalCase::Fold)?.joined();
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let before: Option<i64> = sqlx::query_scalar("SELECT admin FROM users WHERE address = $1")
            .bind(&address)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(before) = before else {
            return Err(DirectoryError::NoSuchUser(address));
        };
        sqlx::query("UPDATE users SET admin = $1 WHERE address = $2")
            .bind(i64::from(admin))
            .bind(&address)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(before == 1)
    }

    /// Deletes a user and records the address in `deleted_users`, in one transaction: the
    /// user can no longer log in or receive mail, and the address cannot be added again
    /// until whoever owns the store has removed the user's mail and called [`Directory::purged`].
    /// Aliases pointing at the address stay (they resolve to nothing, or to the catch-all,
    /// until removed or the user is added again). Returns the canonical address.
    pub async fn del_user(&self, address: &str) -> Result<String, DirectoryError> {
        let address = address_arg(address, LocalCase::Fold)?.joined();
        let mut tx = db::begin_write(&self.inner.pool).await?;
        if being_renamed(&mut *tx, &address).await? {
            return Err(DirectoryError::UserBeingRenamed(address));
        }
        let node: Option<Option<String>> =
            sqlx::query_scalar("SELECT node FROM users WHERE address = $1")
                .bind(&address)
                .fetch_optional(&mut *tx)
                .await?;
        let node = node.flatten();
        let deleted = sqlx::query("DELETE FROM users WHERE address = $1")
            .bind(&address)
            .execute(&mut *tx)
            .await?;
        if deleted.rows_affected() == 0 {
            return Err(DirectoryError::NoSuchUser(address));
        }
        // A user added again at this address must not see who logged in to this one.
        sqlx::query("DELETE FROM logins WHERE address = $1")
            .bind(&address)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO deleted_users (address, deleted_at, node) VALUES ($1, $2, $3) \
             ON CONFLICT (address) DO NOTHING",
        )
        .bind(&address)
        .bind(unix_now_s())
        .bind(&node)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(address)
    }

    /// Addresses deleted whose mail the store may still hold, oldest first.
    pub async fn pending_deletions(&self) -> Result<Vec<String>, DirectoryError> {
        let rows =
            sqlx::query_scalar("SELECT address FROM deleted_users ORDER BY deleted_at, address")
                .fetch_all(&self.inner.pool)
                .await?;
        Ok(rows)
    }

    /// [`Directory::pending_deletions`] whose mail is on the node `node` (or whose node is not
    /// recorded), oldest first: what that node must remove.
    pub async fn pending_deletions_on(&self, node: &str) -> Result<Vec<String>, DirectoryError> {
        let rows = sqlx::query_scalar(
            "SELECT address FROM deleted_users WHERE node = $1 OR node IS NULL \
             ORDER BY deleted_at, address",
        )
        .bind(node)
        .fetch_all(&self.inner.pool)
        .await?;
        Ok(rows)
    }

    /// The store no longer holds anything of the deleted user `address`: the address may be
    /// added again. Idempotent.
    pub async fn purged(&self, address: &str) -> Result<(), DirectoryError> {
        let mut tx = db::begin_write(&self.inner.pool).await?;
        sqlx::query("DELETE FROM deleted_users WHERE address = $1")
            .bind(address)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Users sorted by address, of one domain or of all.
    pub async fn list_users(&self, domain: Option<&str>) -> Result<Vec<UserInfo>, DirectoryError> {
        let rows: Vec<UserRow> = match domain {
            Some(domain) => {
                let domain = domain_arg(domain)?;
                if !domain_exists(&self.inner.pool, &domain).await? {
                    return Err(DirectoryError::NoSuchDomain(domain));
                }
                sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT {USER_COLUMNS} FROM users WHERE domain = $1 ORDER BY address"
                )))
                .bind(domain)
                .fetch_all(&self.inner.pool)
                .await?
            }
            None => {
                sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT {USER_COLUMNS} FROM users ORDER BY address"
                )))
                .fetch_all(&self.inner.pool)
                .await?
            }
        };
        rows.into_iter().map(user_info).collect()
    }

    /// One user, as [`Directory::list_users`] lists it; `None` when there is no such user.
    pub async fn user(&self, address: &str) -> Result<Option<UserInfo>, DirectoryError> {
        let address = address_arg(address, LocalCase::Fold)?.joined();
        let row: Option<UserRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {USER_COLUMNS} FROM users WHERE address = $1"
        )))
        .bind(&address)
        .fetch_optional(&self.inner.pool)
        .await?;
        row.map(user_info).transpose()
    }

    /// Sets a user's quota; `None` = unlimited.
    pub async fn set_quota(
        &self,
        address: &str,
        quota_bytes: Option<u64>,
    ) -> Result<(), DirectoryError> {
        let address = address_arg(address, LocalCase::Fold)?.joined();
        let quota = db::quota_to_sql(quota_bytes)?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let updated = sqlx::query("UPDATE users SET quota_bytes = $1 WHERE address = $2")
            .bind(quota)
            .bind(&address)
            .execute(&mut *tx)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(DirectoryError::NoSuchUser(address));
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Sets a user's message-count quota (RFC 9208 5.2, MESSAGE); `None` = unlimited.
    pub async fn set_message_quota(
        &self,
        address: &str,
        quota_messages: Option<u64>,
    ) -> Result<(), DirectoryError> {
        let address = address_arg(address, LocalCase::Fold)?.joined();
        let quota = quota_messages
            .map(|q| {
                i64::try_from(q)
                    .map_err(|_| DirectoryError::MessageQuotaTooLarge { quota_messages: q })
            })
            .transpose()?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let updated = sqlx::query("UPDATE users SET quota_messages = $1 WHERE address = $2")
            .bind(quota)
            .bind(&address)
            .execute(&mut *tx)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(DirectoryError::NoSuchUser(address));
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Adds `source -> destination`. `source` is an address in one of our domains, or
    /// `@domain` for the domain's catch-all (one per domain, one destination). `destination`
    /// is a local user, another alias (its source), or an address in a domain that is not
    /// ours (its local part kept as written); a local address that is neither is refused,
    /// since mail to the alias would be accepted and then bounce. One source may have up to
    /// `expansion_targets_max` destinations.
    pub async fn add_alias(&self, source: &str, destination: &str) -> Result<(), DirectoryError> {
        self.insert_alias(source, destination, true).await
    }

    /// [`Directory::add_alias`] without the destination check: the state a user deleted
    /// after its aliases leaves, which resolution must survive.
    #[cfg(test)]
    pub(crate) async fn add_alias_unchecked(
        &self,
        source: &str,
        destination: &str,
    ) -> Result<(), DirectoryError> {
        self.insert_alias(source, destination, false).await
    }

    async fn insert_alias(
        &self,
        source: &str,
        destination: &str,
        check_destination: bool,
    ) -> Result<(), DirectoryError> {
        let source = source_arg(source)?;
        let destination = address_arg(destination, LocalCase::Keep)?.joined();
        let key = source.key();
        let mut tx = db::begin_write(&self.inner.pool).await?;
        if !domain_exists(&mut *tx, source.domain()).await? {
            return Err(DirectoryError::NoSuchDomain(source.domain().to_owned()));
        }
        if let Some((local, domain)) = destination.rsplit_once('@')
            && check_destination
        {
            let domain = domain.to_ascii_lowercase();
            let folded = format!("{}@{domain}", local.to_ascii_lowercase());
            if domain_exists(&mut *tx, &domain).await?
                && !user_exists(&mut *tx, &folded).await?
                && !any(
                    &mut *tx,
                    "SELECT COUNT(*) FROM aliases WHERE source = $1",
                    &folded,
                )
                .await?
            {
                return Err(DirectoryError::NoSuchDestination(destination));
            }
        }
        let existing: Vec<String> =
            sqlx::query_scalar("SELECT destination FROM aliases WHERE source = $1")
                .bind(&key)
                .fetch_all(&mut *tx)
                .await?;
        if existing.contains(&destination) {
            return Err(DirectoryError::AliasExists {
                alias: key,
                destination,
            });
        }
        if let (Source::CatchAll(domain), Some(current)) = (&source, existing.first()) {
            return Err(DirectoryError::CatchAllExists {
                domain: domain.clone(),
                destination: current.clone(),
            });
        }
        if existing.len() >= self.inner.options.expansion_targets_max {
            return Err(DirectoryError::TooManyDestinations {
                alias: key,
                count: existing.len(),
            });
        }
        sqlx::query("INSERT INTO aliases (source, destination, domain) VALUES ($1, $2, $3)")
            .bind(&key)
            .bind(&destination)
            .bind(source.domain())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Deletes one destination of `source` (compared case-insensitively), or all of them
    /// when `destination` is `None`.
    pub async fn del_alias(
        &self,
        source: &str,
        destination: Option<&str>,
    ) -> Result<(), DirectoryError> {
        let key = source_arg(source)?.key();
        let destination = destination
            .map(|d| address_arg(d, LocalCase::Keep).map(|a| a.joined()))
            .transpose()?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let deleted = match &destination {
            Some(destination) => {
                sqlx::query(
                    "DELETE FROM aliases WHERE source = $1 AND LOWER(destination) = LOWER($2)",
                )
                .bind(&key)
                .bind(destination)
                .execute(&mut *tx)
                .await?
            }
            None => {
                sqlx::query("DELETE FROM aliases WHERE source = $1")
                    .bind(&key)
                    .execute(&mut *tx)
                    .await?
            }
        };
        if deleted.rows_affected() == 0 {
            return Err(DirectoryError::NoSuchAlias {
                alias: key,
                destination,
            });
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// All `(source, destination)` pairs, sorted.
    pub async fn list_aliases(&self) -> Result<Vec<(String, String)>, DirectoryError> {
        let aliases =
            sqlx::query_as("SELECT source, destination FROM aliases ORDER BY source, destination")
                .fetch_all(&self.inner.pool)
                .await?;
        Ok(aliases)
    }

    /// Starts renaming the user `old` to `new` (a new address in one of our domains, not a
    /// user, not being deleted): records the intent in `renamed_users` and returns both
    /// canonical addresses. Nothing else changes yet: whoever owns the store now gives
    /// `old`'s folders to `new` and then calls [`Directory::finish_rename`]; until then
    /// neither address can be added, deleted or renamed.
    pub async fn begin_rename(
        &self,
        old: &str,
        new: &str,
    ) -> Result<(String, String), DirectoryError> {
        let old = address_arg(old, LocalCase::Fold)?.joined();
        let new = address_arg(new, LocalCase::Fold)?;
        let domain = new.domain.clone();
        let new = new.joined();
        let mut tx = db::begin_write(&self.inner.pool).await?;
        if !user_exists(&mut *tx, &old).await? {
            return Err(DirectoryError::NoSuchUser(old));
        }
        if !domain_exists(&mut *tx, &domain).await? {
            return Err(DirectoryError::NoSuchDomain(domain));
        }
        if old == new || user_exists(&mut *tx, &new).await? {
            return Err(DirectoryError::UserExists(new));
        }
        if being_deleted(&mut *tx, &new).await? {
            return Err(DirectoryError::UserBeingDeleted(new));
        }
        for address in [&old, &new] {
            if being_renamed(&mut *tx, address).await? {
                return Err(DirectoryError::UserBeingRenamed(address.clone()));
            }
        }
        sqlx::query(
            "INSERT INTO renamed_users (old_address, new_address, renamed_at) VALUES ($1, $2, $3)",
        )
        .bind(&old)
        .bind(&new)
        .bind(unix_now_s())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok((old, new))
    }

    /// Finishes a rename [`Directory::begin_rename`] started, in one transaction: the user
    /// row (password, quotas, last login) and its subscriptions move to `new`, aliases whose
    /// destination is `old` now point at `new`, and the intent is forgotten. Idempotent: a
    /// rename already finished only forgets the intent.
    pub async fn finish_rename(&self, old: &str, new: &str) -> Result<(), DirectoryError> {
        let domain = address_arg(new, LocalCase::Fold)?.domain;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        if user_exists(&mut *tx, old).await? {
            // A new row and then the old one's removal: `subscriptions` references the
            // address, so the key cannot change in place.
            sqlx::query(
                "INSERT INTO users (address, domain, password_hash, quota_bytes, created_at, \
                 quota_messages, last_login_at, node, epoch, move_state, created_seq, admin) \
                 SELECT $1, $2, password_hash, quota_bytes, created_at, quota_messages, \
                 last_login_at, node, epoch, move_state, created_seq, admin FROM users \
                 WHERE address = $3",
            )
            .bind(new)
            .bind(&domain)
            .bind(old)
            .execute(&mut *tx)
            .await?;
            sqlx::query("UPDATE subscriptions SET address = $1 WHERE address = $2")
                .bind(new)
                .bind(old)
                .execute(&mut *tx)
                .await?;
            sqlx::query("UPDATE sieve_scripts SET address = $1 WHERE address = $2")
                .bind(new)
                .bind(old)
                .execute(&mut *tx)
                .await?;
            sqlx::query("UPDATE sieve_tracking SET address = $1 WHERE address = $2")
                .bind(new)
                .bind(old)
                .execute(&mut *tx)
                .await?;
            sqlx::query("UPDATE special_use SET address = $1 WHERE address = $2")
                .bind(new)
                .bind(old)
                .execute(&mut *tx)
                .await?;
            // The spam filter's rows hang off `spam_owners`: moving its address moves them.
            sqlx::query("UPDATE spam_owners SET address = $1 WHERE address = $2")
                .bind(new)
                .bind(old)
                .execute(&mut *tx)
                .await?;
            sqlx::query("UPDATE spam_user_thresholds SET address = $1 WHERE address = $2")
                .bind(new)
                .bind(old)
                .execute(&mut *tx)
                .await?;
            sqlx::query("UPDATE logins SET address = $1 WHERE address = $2")
                .bind(new)
                .bind(old)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM users WHERE address = $1")
                .bind(old)
                .execute(&mut *tx)
                .await?;
            // An alias that named both keeps one destination (the pair is its key).
            sqlx::query(
                "DELETE FROM aliases WHERE LOWER(destination) = $1 AND source IN \
                 (SELECT source FROM aliases WHERE LOWER(destination) = $2)",
            )
            .bind(old)
            .bind(new)
            .execute(&mut *tx)
            .await?;
            sqlx::query("UPDATE aliases SET destination = $1 WHERE LOWER(destination) = $2")
                .bind(new)
                .bind(old)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query("DELETE FROM renamed_users WHERE old_address = $1")
            .bind(old)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Forgets a rename [`Directory::begin_rename`] started whose mail could not move (the
    /// store refused and moved nothing): both addresses are free again, `old` unchanged.
    pub async fn abandon_rename(&self, old: &str) -> Result<(), DirectoryError> {
        let mut tx = db::begin_write(&self.inner.pool).await?;
        sqlx::query("DELETE FROM renamed_users WHERE old_address = $1")
            .bind(old)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Renames begun and not finished, `(old, new)`, oldest first.
    pub async fn pending_renames(&self) -> Result<Vec<(String, String)>, DirectoryError> {
        let rows = sqlx::query_as(
            "SELECT old_address, new_address FROM renamed_users ORDER BY renamed_at, old_address",
        )
        .fetch_all(&self.inner.pool)
        .await?;
        Ok(rows)
    }

    async fn hash_password(&self, password: &str) -> Result<String, DirectoryError> {
        let params = self.inner.options.argon2_params.clone();
        let password = password.to_owned();
        self.run_hasher(move || password::hash(&params, &password))
            .await
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
