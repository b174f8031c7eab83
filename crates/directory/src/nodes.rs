//! The cluster's nodes and the moves of users between them.
//!
//! Node rows change through `db::begin_write` like every other directory change (generation
//! bump, and on PostgreSQL a notification), except the lease, which
//! [`Directory::renew_lease`] writes alone.

use crate::address::LocalCase;
use crate::arguments::{address_arg, node_arg};
use crate::cache::NodeInfo;
use crate::db::unix_now_s;
use crate::error::{DirectoryError, shown};
use crate::{Directory, db};

/// A node's address (`host:port`): not empty, at most 255 bytes, no whitespace or control
/// characters.
fn endpoint_arg(node: &str, what: &'static str, value: &str) -> Result<String, DirectoryError> {
    if value.is_empty()
        || value.len() > 255
        || value.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(DirectoryError::InvalidNode {
            name: shown(node),
            reason: match what {
                "lmtp" => "the lmtp address must be host:port",
                "imap" => "the imap address must be host:port",
                "pop3" => "the pop3 address must be host:port",
                "managesieve" => "the managesieve address must be host:port",
                "replication" => "the replication address must be host:port",
                _ => "the web address must be host:port",
            },
        });
    }
    Ok(value.to_owned())
}

/// A node's new epoch is its users' too: a hand-over routed with the old one (`XEPOCH`, by a
/// node whose cache has not seen the take-over) is refused as a stale route wherever it lands
/// and retried by the new route (docs/replication.md, "Failover").
async fn bump_user_epochs(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    node: &str,
) -> Result<(), DirectoryError> {
    sqlx::query("UPDATE users SET epoch = epoch + 1 WHERE node = $1")
        .bind(node)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

impl Directory {
    /// Adds a node with its addresses (`host:port` each; `web` and `managesieve` optional).
    /// Its lease starts expired: it is down until it renews ([`Directory::renew_lease`]).
    pub async fn add_node(
        &self,
        name: &str,
        lmtp: &str,
        imap: &str,
        pop3: &str,
        web: Option<&str>,
        managesieve: Option<&str>,
    ) -> Result<(), DirectoryError> {
        let name = node_arg(name)?;
        let lmtp = endpoint_arg(&name, "lmtp", lmtp)?;
        let imap = endpoint_arg(&name, "imap", imap)?;
        let pop3 = endpoint_arg(&name, "pop3", pop3)?;
        let web = web.map(|w| endpoint_arg(&name, "web", w)).transpose()?;
        let managesieve = managesieve
            .map(|m| endpoint_arg(&name, "managesieve", m))
            .transpose()?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let inserted = sqlx::query(
            "INSERT INTO nodes (name, lmtp, imap, pop3, web, managesieve, lease_until, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6, 0, $7)",
        )
        .bind(&name)
        .bind(&lmtp)
        .bind(&imap)
        .bind(&pop3)
        .bind(&web)
        .bind(&managesieve)
        .bind(unix_now_s())
        .execute(&mut *tx)
        .await;
        match inserted {
            Err(e) if db::is_unique_violation(&e) => return Err(DirectoryError::NodeExists(name)),
            other => other?,
        };
        // The first node of a cluster made from a single server takes every existing user:
        // their mail is in its store. (A user without a node in a cluster belongs nowhere.)
        let nodes: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM nodes")
            .fetch_one(&mut *tx)
            .await?;
        if nodes == 1 {
            sqlx::query("UPDATE users SET node = $1 WHERE node IS NULL")
                .bind(&name)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        self.refresh_node_states_after_write().await;
        Ok(())
    }

    /// Removes a node; refused ([`DirectoryError::NodeOwnsUsers`]) while users live on it
    /// or are being moved to it.
    pub async fn remove_node(&self, name: &str) -> Result<(), DirectoryError> {
        let name = node_arg(name)?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let users: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM users WHERE node = $1 OR move_state = $2 OR move_state = $3",
        )
        .bind(&name)
        .bind(format!("frozen:{name}"))
        .bind(format!("requested:{name}"))
        .fetch_one(&mut *tx)
        .await?;
        if users > 0 {
            return Err(DirectoryError::NodeOwnsUsers { node: name, users });
        }
        let deleted = sqlx::query("DELETE FROM nodes WHERE name = $1")
            .bind(&name)
            .execute(&mut *tx)
            .await?;
        if deleted.rows_affected() == 0 {
            return Err(DirectoryError::NoSuchNode(name));
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        self.refresh_node_states_after_write().await;
        Ok(())
    }

    /// Every node, sorted by name, with the number of users it owns. `up` is computed now
    /// by the database's clock (not from the cache).
    pub async fn list_nodes(&self) -> Result<Vec<(NodeInfo, u64)>, DirectoryError> {
        type Row = (
            String,
            String,
            String,
            String,
            Option<String>,
            Option<String>,
            i64,
            i64,
            Option<String>,
            Option<String>,
            i64,
            Option<String>,
            Option<String>,
            i64,
        );
        let now = db::Backend::of(&self.inner.pool).now_ms();
        let sql = format!(
            "SELECT n.name, n.lmtp, n.imap, n.pop3, n.web, n.managesieve, \
             CASE WHEN n.lease_until > {now} THEN 1 ELSE 0 END, \
             (SELECT COUNT(*) FROM users u WHERE u.node = n.name), \
             n.replication, n.replica, n.epoch, n.host, n.standby, n.draining \
             FROM nodes n ORDER BY n.name"
        );
        let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_all(&self.inner.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(
                |(
                    name,
                    lmtp,
                    imap,
                    pop3,
                    web,
                    managesieve,
                    up,
                    users,
                    replication,
                    replica,
                    epoch,
                    host,
                    standby,
                    draining,
                )| {
                    (
                        NodeInfo {
                            name,
                            lmtp,
                            imap,
                            pop3,
                            web,
                            managesieve,
                            up: up != 0,
                            replication,
                            replica,
                            epoch: u64::try_from(epoch).unwrap_or(1),
                            host,
                            standby,
                            draining: draining == 1,
                            released: draining == 2,
                        },
                        u64::try_from(users).unwrap_or(0),
                    )
                },
            )
            .collect())
    }

    /// Registers (or with `None` removes) the address of `node`'s replication listener.
    pub async fn set_node_replication(
        &self,
        node: &str,
        address: Option<&str>,
    ) -> Result<(), DirectoryError> {
        self.set_replication_endpoint(node, "replication", address)
            .await
    }

    /// Records which node holds every change `node` acknowledged (`None`: none does), while
    /// its epoch is `epoch`; the node itself writes it (docs/replication.md R2), and every
    /// node's cache follows. Refused once another epoch began (a take-over).
    pub async fn set_replica(
        &self,
        node: &str,
        epoch: u64,
        replica: Option<&str>,
    ) -> Result<(), DirectoryError> {
        let node = node_arg(node)?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let updated = sqlx::query("UPDATE nodes SET replica = $1 WHERE name = $2 AND epoch = $3")
            .bind(replica)
            .bind(&node)
            .bind(i64::try_from(epoch).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(DirectoryError::NoSuchNode(format!(
                "{node} at epoch {epoch} (taken over since)"
            )));
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    async fn update_node(
        &self,
        node: &str,
        column: &'static str,
        value: Option<String>,
    ) -> Result<(), DirectoryError> {
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let sql = format!("UPDATE nodes SET {column} = $1 WHERE name = $2");
        let updated = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(value)
            .bind(node)
            .execute(&mut *tx)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(DirectoryError::NoSuchNode(shown(node)));
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Renews `node`'s lease only while its epoch is still `epoch` (docs/replication.md,
    /// "Failover"): `Ok(false)` when another machine took the node over.
    pub async fn renew_lease_at(
        &self,
        node: &str,
        epoch: u64,
        ttl: std::time::Duration,
    ) -> Result<bool, DirectoryError> {
        let ttl = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2);
        let now = db::Backend::of(&self.inner.pool).now_ms();
        // `draining < 2`: a node that gave its lease up (`release`) cannot take it back.
        let sql = format!(
            "UPDATE nodes SET lease_until = {now} + $1 \
             WHERE name = $2 AND epoch = $3 AND draining < 2"
        );
        let updated = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(ttl)
            .bind(node)
            .bind(i64::try_from(epoch).unwrap_or(i64::MAX))
            .execute(&self.inner.pool)
            .await?;
        Ok(updated.rows_affected() == 1)
    }

    /// `by` takes `node` over (docs/replication.md, "Failover"), in one statement that holds
    /// only if `by` is the replica the directory names, the epoch is still `seen`, and the
    /// lease has lapsed by the database's clock. Returns the new epoch, or `None` when any of
    /// that does not hold (someone else acted first, or the owner came back).
    pub async fn take_over(
        &self,
        node: &str,
        by: &str,
        seen: u64,
        ttl: std::time::Duration,
    ) -> Result<Option<u64>, DirectoryError> {
        let ttl = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2);
        let now = db::Backend::of(&self.inner.pool).now_ms();
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let sql = format!(
            "UPDATE nodes SET epoch = epoch + 1, host = $1, replica = NULL, draining = 0, \
             lease_until = {now} + $2 \
             WHERE name = $3 AND epoch = $4 AND replica = $1 AND lease_until < {now}"
        );
        let updated = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(by)
            .bind(ttl)
            .bind(node)
            .bind(i64::try_from(seen).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await?;
        if updated.rows_affected() != 1 {
            return Ok(None);
        }
        bump_user_epochs(&mut tx, node).await?;
        tx.commit().await?;
        self.refresh_after_write().await;
        self.refresh_node_states_after_write().await;
        Ok(Some(seen + 1))
    }

    /// Where `node`'s own machine waits for its copy (`None`: it does not).
    pub async fn set_standby(
        &self,
        node: &str,
        address: Option<&str>,
    ) -> Result<(), DirectoryError> {
        self.set_replication_endpoint(node, "standby", address)
            .await
    }

    /// Sets `column` (a replication listener's address) of `node`, checked as an endpoint.
    async fn set_replication_endpoint(
        &self,
        node: &str,
        column: &'static str,
        address: Option<&str>,
    ) -> Result<(), DirectoryError> {
        let node = node_arg(node)?;
        let address = address
            .map(|a| endpoint_arg(&node, "replication", a))
            .transpose()?;
        self.update_node(&node, column, address).await
    }

    /// `mailstow node drain`: asks `node` to hand itself to its partner (`false`: no longer).
    pub async fn set_draining(&self, node: &str, draining: bool) -> Result<(), DirectoryError> {
        let node = node_arg(node)?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let updated = sqlx::query("UPDATE nodes SET draining = $1 WHERE name = $2")
            .bind(i64::from(draining))
            .bind(&node)
            .execute(&mut *tx)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(DirectoryError::NoSuchNode(node));
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// The machine serving `node` after a take-over gives it back to its own machine (whose
    /// standby holds every change): a new epoch, no host, no replica, no lease until its own
    /// machine renews one. `false` when the epoch moved on meanwhile.
    pub async fn hand_back(&self, node: &str, epoch: u64) -> Result<bool, DirectoryError> {
        self.end_epoch(
            node,
            epoch,
            "epoch = epoch + 1, host = NULL, replica = NULL, standby = NULL, lease_until = 0",
        )
        .await
    }

    /// A draining node gives up its lease at `epoch` (its partner, holding every change,
    /// takes it over at once). `false` when the epoch moved on meanwhile.
    pub async fn release(&self, node: &str, epoch: u64) -> Result<bool, DirectoryError> {
        // 2: released; no renewal of this epoch goes through any more (one in flight
        // cannot give the lease back to the node that just gave it up).
        self.end_epoch(node, epoch, "lease_until = 0, draining = 2")
            .await
    }

    async fn end_epoch(
        &self,
        node: &str,
        epoch: u64,
        set: &'static str,
    ) -> Result<bool, DirectoryError> {
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let sql = format!("UPDATE nodes SET {set} WHERE name = $1 AND epoch = $2");
        let updated = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(node)
            .bind(i64::try_from(epoch).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await?;
        if updated.rows_affected() != 1 {
            return Ok(false);
        }
        if set.contains("epoch = epoch + 1") {
            bump_user_epochs(&mut tx, node).await?;
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        self.refresh_node_states_after_write().await;
        Ok(true)
    }

    /// The addresses the other nodes reach `node` at (a node served on another machine after
    /// a take-over registers the ones it bound there).
    pub async fn set_node_addresses(
        &self,
        node: &str,
        lmtp: &str,
        imap: &str,
        pop3: &str,
        web: Option<&str>,
        managesieve: Option<&str>,
    ) -> Result<(), DirectoryError> {
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let updated = sqlx::query(
            "UPDATE nodes SET lmtp = $1, imap = $2, pop3 = $3, web = $4, managesieve = $5 \
             WHERE name = $6",
        )
        .bind(lmtp)
        .bind(imap)
        .bind(pop3)
        .bind(web)
        .bind(managesieve)
        .bind(node)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() == 0 {
            return Err(DirectoryError::NoSuchNode(shown(node)));
        }
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(())
    }

    /// Reports how long the oldest change not yet on `node`'s replica has waited (no
    /// generation bump: it changes all the time, and only `node list` reads it).
    pub async fn set_replica_lag(&self, node: &str, lag_ms: u64) -> Result<(), DirectoryError> {
        sqlx::query("UPDATE nodes SET replica_lag_ms = $1 WHERE name = $2")
            .bind(i64::try_from(lag_ms).unwrap_or(i64::MAX))
            .bind(node)
            .execute(&self.inner.pool)
            .await?;
        Ok(())
    }

    /// `node list`'s replica lag of every node (milliseconds), where reported.
    pub async fn replica_lags(&self) -> Result<Vec<(String, Option<u64>)>, DirectoryError> {
        let rows: Vec<(String, Option<i64>)> =
            sqlx::query_as("SELECT name, replica_lag_ms FROM nodes ORDER BY name")
                .fetch_all(&self.inner.pool)
                .await?;
        Ok(rows
            .into_iter()
            .map(|(n, l)| (n, l.and_then(|l| u64::try_from(l).ok())))
            .collect())
    }

    /// Starts moving a user to `to_node`: sets its move state to `frozen:<to_node>` (the
    /// mailbox must not change until [`Directory::finish_move`] or
    /// [`Directory::abort_move`]). Returns the canonical address. Refused for an unknown
    /// user or node, a user already on `to_node`, or one already moving.
    pub async fn begin_move(&self, address: &str, to_node: &str) -> Result<String, DirectoryError> {
        let address = address_arg(address, LocalCase::Fold)?.joined();
        let to_node = node_arg(to_node)?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let user: Option<(Option<String>, Option<String>)> =
            sqlx::query_as("SELECT node, move_state FROM users WHERE address = $1")
                .bind(&address)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((node, move_state)) = user else {
            return Err(DirectoryError::NoSuchUser(address));
        };
        // Free, or requested for this very node (`user move` asked the target to do it).
        if move_state
            .as_deref()
            .is_some_and(|s| s != format!("requested:{to_node}"))
        {
            return Err(DirectoryError::UserMoving(address));
        }
        let exists: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM nodes WHERE name = $1")
            .bind(&to_node)
            .fetch_one(&mut *tx)
            .await?;
        if exists == 0 {
            return Err(DirectoryError::NoSuchNode(to_node));
        }
        if node.as_deref() == Some(to_node.as_str()) {
            return Err(DirectoryError::NotMoving {
                address,
                node: format!("{to_node} (it is already there)"),
            });
        }
        sqlx::query("UPDATE users SET move_state = $1 WHERE address = $2")
            .bind(format!("frozen:{to_node}"))
            .bind(&address)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(address)
    }

    /// Finishes a move [`Directory::begin_move`] started, in one transaction: the user's
    /// node becomes `to_node`, its epoch goes up by one and its move state is cleared.
    /// Returns the new epoch. Refused unless the user is frozen for exactly `to_node`.
    pub async fn finish_move(&self, address: &str, to_node: &str) -> Result<i64, DirectoryError> {
        let address = address_arg(address, LocalCase::Fold)?.joined();
        let to_node = node_arg(to_node)?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let updated = sqlx::query(
            "UPDATE users SET node = $1, epoch = epoch + 1, move_state = NULL \
             WHERE address = $2 AND move_state = $3",
        )
        .bind(&to_node)
        .bind(&address)
        .bind(format!("frozen:{to_node}"))
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() == 0 {
            return Err(DirectoryError::NotMoving {
                address,
                node: to_node,
            });
        }
        let epoch: i64 = sqlx::query_scalar("SELECT epoch FROM users WHERE address = $1")
            .bind(&address)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(epoch)
    }

    /// Abandons a move: clears the user's move state, node and epoch unchanged. Idempotent
    /// for a user not moving; an unknown user is an error.
    pub async fn abort_move(&self, address: &str) -> Result<(), DirectoryError> {
        let address = address_arg(address, LocalCase::Fold)?.joined();
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let updated = sqlx::query("UPDATE users SET move_state = NULL WHERE address = $1")
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

    /// Asks `to_node` to move the user there (`user move`): sets its move state to
    /// `requested:<to_node>`; the target node sees it in the directory and does the move
    /// (`server::moves`). Returns the canonical address and the user's node and epoch now.
    /// Refused like [`Directory::begin_move`]; a failed move's state (`failed:...`) is
    /// replaced.
    pub async fn request_move(
        &self,
        address: &str,
        to_node: &str,
    ) -> Result<(String, Option<String>, i64), DirectoryError> {
        let address = address_arg(address, LocalCase::Fold)?.joined();
        let to_node = node_arg(to_node)?;
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let user: Option<(Option<String>, i64, Option<String>)> =
            sqlx::query_as("SELECT node, epoch, move_state FROM users WHERE address = $1")
                .bind(&address)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((node, epoch, move_state)) = user else {
            return Err(DirectoryError::NoSuchUser(address));
        };
        if move_state
            .as_deref()
            .is_some_and(|s| !s.starts_with("failed:"))
        {
            return Err(DirectoryError::UserMoving(address));
        }
        let exists: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM nodes WHERE name = $1")
            .bind(&to_node)
            .fetch_one(&mut *tx)
            .await?;
        if exists == 0 {
            return Err(DirectoryError::NoSuchNode(to_node));
        }
        if node.is_none() || node.as_deref() == Some(to_node.as_str()) {
            return Err(DirectoryError::NotMoving {
                address,
                node: match node {
                    Some(_) => format!("{to_node} (it is already there)"),
                    None => format!("{to_node} (the user has no node yet)"),
                },
            });
        }
        sqlx::query("UPDATE users SET move_state = $1 WHERE address = $2")
            .bind(format!("requested:{to_node}"))
            .bind(&address)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok((address, node, epoch))
    }

    /// A user's node, epoch and move state, read from the database (not the cache).
    pub async fn move_status(
        &self,
        address: &str,
    ) -> Result<(Option<String>, i64, Option<String>), DirectoryError> {
        let address = address_arg(address, LocalCase::Fold)?.joined();
        let row: Option<(Option<String>, i64, Option<String>)> =
            sqlx::query_as("SELECT node, epoch, move_state FROM users WHERE address = $1")
                .bind(&address)
                .fetch_optional(&self.inner.pool)
                .await?;
        row.ok_or(DirectoryError::NoSuchUser(address))
    }

    /// The users being moved to `node` (requested or frozen), with their move state.
    pub async fn moves_to(&self, node: &str) -> Result<Vec<(String, String)>, DirectoryError> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT address, move_state FROM users WHERE move_state = $1 OR move_state = $2 \
             ORDER BY address",
        )
        .bind(format!("requested:{node}"))
        .bind(format!("frozen:{node}"))
        .fetch_all(&self.inner.pool)
        .await?;
        Ok(rows)
    }

    /// Sets a move's state from `requested:<to>`/`frozen:<to>` to `state` (`requested:<to>`
    /// to restart one, `failed:<to>:<why>` to end one that failed, so `user move` can show
    /// why). False if the user is not moving to `to_node` (any more).
    pub async fn set_move_state(
        &self,
        address: &str,
        to_node: &str,
        state: &str,
    ) -> Result<bool, DirectoryError> {
        let address = address_arg(address, LocalCase::Fold)?.joined();
        let mut tx = db::begin_write(&self.inner.pool).await?;
        let updated = sqlx::query(
            "UPDATE users SET move_state = $1 WHERE address = $2 \
             AND (move_state = $3 OR move_state = $4)",
        )
        .bind(state)
        .bind(&address)
        .bind(format!("requested:{to_node}"))
        .bind(format!("frozen:{to_node}"))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.refresh_after_write().await;
        Ok(updated.rows_affected() > 0)
    }

    /// After adding or removing a node: poll the up states so the cache knows the node.
    async fn refresh_node_states_after_write(&self) {
        if let Err(error) = self.inner.cache.refresh_node_states().await {
            tracing::warn!(event = "directory_error", %error, msg = "node state poll after a write failed");
        }
    }
}
