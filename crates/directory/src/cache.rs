//! The in-memory snapshot the delivery path asks: domains, users with quotas, password hashes
//! and owner nodes, aliases, DKIM keys, Sieve scripts, spam thresholds, the cluster's nodes
//! and their up states.
//!
//! **Invariant:** [`Cache::resolve`], [`Cache::is_local_domain`], [`Cache::quota`],
//! [`Cache::message_quota`], [`Cache::owner`], [`Cache::node`], [`Cache::nodes`],
//! [`Cache::node_up`] and [`Cache::spam_thresholds`] never do I/O (beyond a `tracing` event
//! when an expansion limit is hit) and never wait on anything but a short `RwLock` read to
//! clone an `Arc`.
//!
//! Freshness: every directory write bumps the `generation` row in the same transaction
//! (`db::begin_write`). [`Cache::refresh_if_changed`] reads that one row and reloads the
//! snapshot only when it differs from the loaded one, so writes from another process (the
//! `mailstow user add` CLI while the server runs) show up at the next refresh. The handle
//! that made a write refreshes right after its commit. On PostgreSQL the refresher is woken
//! by `NOTIFY` instead of polling (see the crate documentation). The nodes' up states are
//! polled apart ([`Cache::refresh_node_states`]) and never cause a reload.
//!
//! # Resolution rules
//!
//! For `local@domain` in one of our domains, the first rule that matches decides:
//!
//! 1. an alias whose source is exactly `local@domain`;
//! 2. a user `local@domain`;
//! 3. subaddressing (RFC 5233): if `local` is `base+detail`, an alias `base@domain`, then a
//!    user `base@domain` (the detail is dropped from the target);
//! 4. the domain's catch-all alias `@domain`;
//! 5. `postmaster@domain` (RFC 5321 4.5.1: every domain must take it, unconfigured): the
//!    configured postmaster address (`Options::postmaster`, itself resolved by these rules),
//!    else the domain's first user (the oldest); a bare `postmaster` (RCPT TO:<Postmaster>)
//!    is the same for the first domain, by name, that has a user;
//! 6. otherwise the address is unknown.
//!
//! So an alias shadows a user of the same address (a forward); `a@d -> a@d, x@remote` keeps a
//! copy, because an alias is never expanded inside its own expansion: the address falls
//! through to the next rule (here the user `a@d`). That also makes every cycle finite. An
//! alias met a second time elsewhere in the same expansion adds nothing (its targets are
//! already in). A destination in a local domain that matches no rule adds nothing; an address
//! whose expansion delivers nowhere is [`Resolution::UnknownUser`], never an accepted black
//! hole. Targets are deduplicated and keep the order of a depth-first walk over destinations
//! sorted by address.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, RwLock};

use sqlx::AnyPool;

use crate::address::{LocalCase, parse_address, subaddress_base};
use crate::db;
use crate::dkim::{self, DkimKey};
use crate::error::DirectoryError;
use crate::spam_thresholds::{self, SpamThresholds, ThresholdRows};

/// Where a message for one address goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A local mailbox, by canonical (lowercase) address.
    User(String),
    /// An address in a domain that is not ours; the server relays to it.
    Remote(String),
}

/// The answer to "where does mail for this address go?".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The address is in one of our domains and expands to these targets (at least one).
    Local(Vec<Target>),
    /// One of our domains, but no user, alias or catch-all takes it: `550 5.1.1`.
    UnknownUser,
    /// Not one of our domains: the server's relay rules decide.
    NotLocal,
}

/// Which expansion limit an address's aliases went past ([`Cache::try_resolve`]). A
/// configuration mistake, not the sender's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExpansionLimit {
    /// More distinct targets than `Options::expansion_targets_max`.
    #[error("alias expansion has more targets than expansion_targets_max")]
    Targets,
    /// Aliases nested deeper than `Options::expansion_depth_max`.
    #[error("alias expansion is nested deeper than expansion_depth_max")]
    Depth,
}

/// Limits on one expansion (copied from `Options`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExpansionLimits {
    pub(crate) targets_max: usize,
    pub(crate) depth_max: usize,
}

/// One consistent read of the directory.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub(crate) generation: i64,
    pub(crate) domains: HashSet<String>,
    /// The users that may use the web view's admin pages.
    pub(crate) admins: HashSet<String>,
    /// address -> the user's row (quota, hash, owner).
    pub(crate) users: HashMap<String, UserRow>,
    /// address -> message-count quota, for the users that have one.
    pub(crate) message_quotas: HashMap<String, u64>,
    /// source (`local@dom` or `@dom`) -> destinations, sorted.
    pub(crate) aliases: HashMap<String, Vec<String>>,
    /// domain -> the key that signs its mail (the newest).
    pub(crate) dkim: HashMap<String, DkimKey>,
    /// domain -> its oldest user: who gets `postmaster@domain` by default.
    pub(crate) first_users: HashMap<String, String>,
    /// name -> the node's addresses (its up state is kept apart, see [`Cache::node_up`]).
    pub(crate) nodes: BTreeMap<String, NodeRow>,
    /// address -> the user's Sieve scripts, for users that have any.
    pub(crate) sieve: HashMap<String, Arc<UserScripts>>,
    /// name -> a global Sieve script's source (RFC 6609 `include :global`).
    pub(crate) sieve_global: HashMap<String, Arc<str>>,
    /// domain -> the spam thresholds set for it, for the domains that have any.
    pub(crate) spam_domains: ThresholdRows,
    /// address -> the spam thresholds set for the user, for the users that have any.
    pub(crate) spam_users: ThresholdRows,
}

/// What the snapshot keeps of one user.
#[derive(Debug)]
pub(crate) struct UserRow {
    /// `None` = unlimited.
    pub(crate) quota: Option<u64>,
    /// The argon2id PHC string: logins work from the cache while the database is down.
    pub(crate) password_hash: String,
    pub(crate) owner: Owner,
}

/// A node's addresses as stored.
#[derive(Clone, Debug)]
pub(crate) struct NodeRow {
    pub(crate) name: String,
    pub(crate) lmtp: String,
    pub(crate) imap: String,
    pub(crate) pop3: String,
    pub(crate) web: Option<String>,
    pub(crate) managesieve: Option<String>,
    pub(crate) replication: Option<String>,
    pub(crate) replica: Option<String>,
    pub(crate) epoch: u64,
    pub(crate) host: Option<String>,
    pub(crate) standby: Option<String>,
    pub(crate) draining: i64,
}

/// Which node holds a user's mailbox ([`Cache::owner`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The owner node; `None` = the single node (no cluster).
    pub node: Option<String>,
    /// Bumped by every finished move (starts at 1): a node can tell a stale owner.
    pub epoch: i64,
    /// A move is in progress (`Directory::begin_move`): the mailbox must not change.
    pub frozen: bool,
}

/// One node of the cluster ([`Cache::node`], `Directory::list_nodes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    pub name: String,
    /// `host:port` of its LMTP listener (mail handed over by the other nodes).
    pub lmtp: String,
    pub imap: String,
    pub pop3: String,
    pub web: Option<String>,
    /// `host:port` of its ManageSieve listener, when registered.
    pub managesieve: Option<String>,
    /// Its lease lay in the future by the database's clock at the last poll.
    pub up: bool,
    /// `host:port` of its replication listener (docs/replication.md), when it takes copies.
    pub replication: Option<String>,
    /// The node holding every change it acknowledged, if one does.
    pub replica: Option<String>,
    /// Bumped by every take-over of the node.
    pub epoch: u64,
    /// The node whose machine serves it now (`None`: its own).
    pub host: Option<String>,
    /// Where its own machine waits for its copy, after a take-over.
    pub standby: Option<String>,
    /// `mailstow node drain` asked it to hand itself to its partner.
    pub draining: bool,
    /// It gave its lease up to its partner (drained): taken over at once.
    pub released: bool,
}

/// The in-memory directory snapshot; see the module documentation.
pub struct Cache {
    pool: AnyPool,
    limits: ExpansionLimits,
    /// Where unconfigured `postmaster@` mail goes (`Options::postmaster`).
    postmaster: Option<String>,
    snapshot: RwLock<Arc<Snapshot>>,
    /// Serialises reloads, so a slow reload can never install an older snapshot over a newer
    /// one.
    reload: tokio::sync::Mutex<()>,
    /// node name -> up, from the last liveness poll ([`Cache::refresh_node_states`]); kept
    /// apart from the snapshot so lease renewals never cost a reload.
    up: RwLock<HashMap<String, bool>>,
    /// What the poll remembers between rounds (see [`Cache::refresh_node_states`]).
    poll: std::sync::Mutex<NodePoll>,
}

/// The liveness poll's memory: whether the database answered last time, and the grace that
/// follows its return.
#[derive(Default)]
struct NodePoll {
    /// The last poll failed: the database is unreachable (or was, until this poll).
    unreachable: bool,
    /// Until then, a node up before the database went away stays up whatever its lease
    /// says: nobody could renew a lease while the database was away.
    grace_until: Option<std::time::Instant>,
    /// This node's name and its lease's length ([`Cache::set_own_lease`]).
    own: Option<(String, std::time::Duration)>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let snapshot = self.snapshot();
        f.debug_struct("Cache")
            .field("generation", &snapshot.generation)
            .field("domains", &snapshot.domains.len())
            .field("users", &snapshot.users.len())
            .field("aliases", &snapshot.aliases.len())
            .finish()
    }
}

impl Cache {
    pub(crate) async fn load(
        pool: AnyPool,
        limits: ExpansionLimits,
        postmaster: Option<String>,
    ) -> Result<Cache, DirectoryError> {
        let snapshot = load_snapshot(&pool).await?;
        Ok(Cache {
            pool,
            limits,
            postmaster,
            snapshot: RwLock::new(Arc::new(snapshot)),
            reload: tokio::sync::Mutex::new(()),
            up: RwLock::new(HashMap::new()),
            poll: std::sync::Mutex::new(NodePoll::default()),
        })
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        // A poisoned lock only means a panic elsewhere while swapping an `Arc`; the value
        // inside is still a whole snapshot.
        let guard = self.snapshot.read().unwrap_or_else(|e| e.into_inner());
        Arc::clone(&guard)
    }

    /// The generation of the loaded snapshot (the `meta` row's value when it was read).
    pub fn generation(&self) -> i64 {
        self.snapshot().generation
    }

    /// Reloads the snapshot if the directory changed since it was read: one one-row SELECT
    /// when nothing changed. Returns whether a new snapshot was installed.
    pub async fn refresh_if_changed(&self) -> Result<bool, DirectoryError> {
        let _reload = self.reload.lock().await;
        let current = db::generation(&self.pool).await?;
        // `!=`, not `>`: a restored backup may carry an older generation.
        if current == self.generation() {
            return Ok(false);
        }
        let snapshot = Arc::new(load_snapshot(&self.pool).await?);
        *self.snapshot.write().unwrap_or_else(|e| e.into_inner()) = snapshot;
        Ok(true)
    }

    /// Reloads the snapshot whatever the generation says (after the database came back: a
    /// notification may have been missed).
    pub async fn reload(&self) -> Result<(), DirectoryError> {
        let _reload = self.reload.lock().await;
        let snapshot = Arc::new(load_snapshot(&self.pool).await?);
        *self.snapshot.write().unwrap_or_else(|e| e.into_inner()) = snapshot;
        Ok(())
    }

    /// Polls which nodes are up (one small SELECT comparing each lease with the database's
    /// clock) and keeps the answer for [`Cache::node_up`]. On failure the last known states
    /// stay.
    ///
    /// A lease cannot be renewed while the database is unreachable, so after an outage
    /// longer than a lease every lease has lapsed by the database's clock, live nodes' too,
    /// until each renews. A node's view therefore survives its own reconnect: for one lease
    /// length from the first poll that answers after a failed one, a node that was up stays
    /// up (one that was down stays down, and one that renewed is up); only after that does a
    /// lapsed lease mean down. This node itself ([`Cache::set_own_lease`]) is never down in
    /// its own eyes.
    pub async fn refresh_node_states(&self) -> Result<(), DirectoryError> {
        let polled = match db::node_states(&self.pool).await {
            Ok(polled) => polled,
            Err(e) => {
                self.poll().unreachable = true;
                return Err(e);
            }
        };
        let now = std::time::Instant::now();
        let mut poll = self.poll();
        if std::mem::take(&mut poll.unreachable)
            && let Some(lease) = poll.own.as_ref().map(|(_, lease)| *lease)
        {
            poll.grace_until = Some(now + lease);
            tracing::info!(
                event = "node_states_grace",
                seconds = lease.as_secs(),
                msg = "the directory answers again; nodes that were up stay up until they could renew"
            );
        }
        let in_grace = poll.grace_until.is_some_and(|until| now < until);
        let own = poll.own.as_ref().map(|(name, _)| name.as_str());
        let mut up = self.up.write().unwrap_or_else(|e| e.into_inner());
        let states = polled
            .into_iter()
            .map(|(name, leased)| {
                let kept = in_grace && up.get(&name) == Some(&true);
                let is_us = own == Some(name.as_str());
                let state = leased || kept || is_us;
                (name, state)
            })
            .collect();
        *up = states;
        Ok(())
    }

    /// This node's name and lease length (set by [`crate::Directory::spawn_lease`]): the
    /// poll never shows this node down, and gives the others a lease's grace after the
    /// database comes back ([`Cache::refresh_node_states`]).
    pub fn set_own_lease(&self, node: &str, lease: std::time::Duration) {
        self.poll().own = Some((node.to_string(), lease));
        if let Some(up) = self
            .up
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(node)
        {
            *up = true;
        }
    }

    fn poll(&self) -> std::sync::MutexGuard<'_, NodePoll> {
        // Every field is valid after any panic: each is replaced whole.
        self.poll.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The hash the snapshot holds for a canonical address.
    pub(crate) fn password_hash(&self, address: &str) -> Option<String> {
        self.snapshot()
            .users
            .get(address)
            .map(|user| user.password_hash.clone())
    }

    /// The Sieve scripts of the user with this canonical address (any case), when they have
    /// any. No I/O.
    pub fn sieve_scripts(&self, address: &str) -> Option<Arc<UserScripts>> {
        self.snapshot()
            .sieve
            .get(&address.to_ascii_lowercase())
            .cloned()
    }

    /// A global Sieve script's source. No I/O.
    pub fn sieve_global(&self, name: &str) -> Option<Arc<str>> {
        self.snapshot().sieve_global.get(name).cloned()
    }

    /// The spam score thresholds set for the user with this address (any case), each field
    /// falling back to its domain's; `None` where neither has one (`[spam]` decides). No
    /// I/O.
    pub fn spam_thresholds(&self, user: &str) -> SpamThresholds {
        let snapshot = self.snapshot();
        let user = user.to_ascii_lowercase();
        let domain = user.rsplit_once('@').map_or("", |(_, domain)| domain);
        let own = snapshot.spam_users.get(&user).copied().unwrap_or_default();
        let domain = snapshot.spam_domains.get(domain).copied();
        own.or(domain.unwrap_or_default())
    }

    /// The owner node, epoch and move state of the user with this canonical address (as in
    /// [`Target::User`]; any case); `None` when there is no such user. No I/O.
    pub fn owner(&self, address: &str) -> Option<Owner> {
        self.snapshot()
            .users
            .get(&address.to_ascii_lowercase())
            .map(|user| user.owner.clone())
    }

    /// Whether the node's lease was in the future at the last liveness poll; `false` for an
    /// unknown node or one not polled yet. No I/O.
    pub fn node_up(&self, name: &str) -> bool {
        self.up
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .copied()
            .unwrap_or(false)
    }

    /// One node, by name. No I/O.
    pub fn node(&self, name: &str) -> Option<NodeInfo> {
        let row = self.snapshot().nodes.get(name).cloned()?;
        Some(self.node_info(row))
    }

    /// Every node, sorted by name. No I/O.
    pub fn nodes(&self) -> Vec<NodeInfo> {
        let snapshot = self.snapshot();
        snapshot
            .nodes
            .values()
            .map(|row| self.node_info(row.clone()))
            .collect()
    }

    fn node_info(&self, row: NodeRow) -> NodeInfo {
        let up = self.node_up(&row.name);
        NodeInfo {
            name: row.name,
            lmtp: row.lmtp,
            imap: row.imap,
            pop3: row.pop3,
            web: row.web,
            managesieve: row.managesieve,
            up,
            replication: row.replication,
            replica: row.replica,
            epoch: row.epoch,
            host: row.host,
            standby: row.standby,
            draining: row.draining == 1,
            released: row.draining == 2,
        }
    }

    /// Whether `domain` (any case) is one of ours.
    pub fn is_local_domain(&self, domain: &str) -> bool {
        self.snapshot()
            .domains
            .contains(&domain.to_ascii_lowercase())
    }

    /// Whether a user (a mailbox, not an alias) has this address (any case).
    pub fn is_user(&self, address: &str) -> bool {
        self.snapshot()
            .users
            .contains_key(&address.to_ascii_lowercase())
    }

    /// Whether the user with this address (canonical, as a login returns it) is an admin of
    /// the web view: read at every admin request, so taking the right away takes effect at
    /// the next one, on every node.
    pub fn is_admin(&self, address: &str) -> bool {
        self.snapshot().admins.contains(address)
    }

    /// The key that signs mail from `domain` (any case), if it has one.
    pub fn dkim_key(&self, domain: &str) -> Option<DkimKey> {
        self.snapshot()
            .dkim
            .get(&domain.to_ascii_lowercase())
            .cloned()
    }

    /// The quota of the user with this address (any case): `None` when unlimited or when
    /// there is no such user (ask [`Cache::resolve`] to tell those apart).
    pub fn quota(&self, user: &str) -> Option<u64> {
        self.snapshot()
            .users
            .get(&user.to_ascii_lowercase())
            .and_then(|row| row.quota)
    }

    /// The message-count quota of the user with this address (any case): `None` when
    /// unlimited or when there is no such user.
    pub fn message_quota(&self, user: &str) -> Option<u64> {
        self.snapshot()
            .message_quotas
            .get(&user.to_ascii_lowercase())
            .copied()
    }

    /// Where mail for `address` goes, from the snapshot alone (see the module documentation
    /// for the rules). An address that fails the syntax check resolves as unknown in our
    /// domains and as not local elsewhere.
    ///
    /// An address whose aliases go past an expansion limit is logged and answered
    /// [`Resolution::UnknownUser`]: refused at RCPT time, so the sender hears of it and no
    /// recipient is silently dropped. [`Cache::try_resolve`] reports the limit instead, for a
    /// server that prefers a temporary failure (`451 4.3.0`) while an administrator fixes it.
    pub fn resolve(&self, address: &str) -> Resolution {
        self.try_resolve(address).unwrap_or_else(|limit| {
            tracing::warn!(event = "alias_limit", address = ?address, %limit, msg = "refusing a recipient");
            Resolution::UnknownUser
        })
    }

    /// [`Cache::resolve`], with an expansion limit reported as an error.
    pub fn try_resolve(&self, address: &str) -> Result<Resolution, ExpansionLimit> {
        let snapshot = self.snapshot();
        // RFC 5321 4.5.1: `RCPT TO:<Postmaster>` names this host's postmaster.
        let bare_postmaster;
        let address = if address.eq_ignore_ascii_case("postmaster") {
            let mut domains: Vec<&String> = snapshot.first_users.keys().collect();
            domains.sort();
            match domains.first() {
                Some(domain) => {
                    bare_postmaster = format!("postmaster@{domain}");
                    bare_postmaster.as_str()
                }
                None => return Ok(Resolution::NotLocal),
            }
        } else {
            address
        };
        let parsed = match parse_address(address, LocalCase::Fold) {
            Ok(parsed) => parsed,
            Err(_) => {
                let domain = address.rsplit_once('@').map_or("", |(_, d)| d);
                return Ok(if snapshot.domains.contains(&domain.to_ascii_lowercase()) {
                    Resolution::UnknownUser
                } else {
                    Resolution::NotLocal
                });
            }
        };
        if !snapshot.domains.contains(&parsed.domain) {
            return Ok(Resolution::NotLocal);
        }
        let mut expansion = Expansion {
            snapshot: &snapshot,
            limits: self.limits,
            postmaster: self.postmaster.as_deref(),
            postmaster_taken: false,
            path: Vec::new(),
            expanded: HashSet::new(),
            targets: Vec::new(),
            seen: HashSet::new(),
        };
        expansion.visit(&parsed.joined())?;
        if expansion.targets.is_empty() {
            Ok(Resolution::UnknownUser)
        } else {
            Ok(Resolution::Local(expansion.targets))
        }
    }
}

/// `address, quota_bytes, password_hash, node, epoch, move_state` as the snapshot reads them.
type SnapshotUser = (
    String,
    Option<i64>,
    String,
    Option<String>,
    i64,
    Option<String>,
);

/// Reads the whole directory in one read transaction, so the generation and the rows belong
/// together. SQLite in WAL mode gives a deferred transaction one snapshot from its first read;
/// on PostgreSQL the transaction is `REPEATABLE READ` for the same.
async fn load_snapshot(pool: &AnyPool) -> Result<Snapshot, DirectoryError> {
    let mut tx = db::begin_read(pool).await?;
    let generation: i64 = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'generation'")
        .fetch_one(&mut *tx)
        .await?;
    let domains: Vec<String> = sqlx::query_scalar("SELECT name FROM domains")
        .fetch_all(&mut *tx)
        .await?;
    let users: Vec<SnapshotUser> = sqlx::query_as(
        "SELECT address, quota_bytes, password_hash, node, epoch, move_state FROM users \
         ORDER BY created_at, created_seq, address",
    )
    .fetch_all(&mut *tx)
    .await?;
    let aliases: Vec<(String, String)> =
        sqlx::query_as("SELECT source, destination FROM aliases ORDER BY source, destination")
            .fetch_all(&mut *tx)
            .await?;
    let keys = dkim::load_dkim_keys(&mut *tx).await?;
    let message_quotas: Vec<(String, i64)> = sqlx::query_as(
        "SELECT address, quota_messages FROM users WHERE quota_messages IS NOT NULL",
    )
    .fetch_all(&mut *tx)
    .await?;
    let admins: Vec<String> = sqlx::query_scalar("SELECT address FROM users WHERE admin = 1")
        .fetch_all(&mut *tx)
        .await?;
    type NodeColumns = (
        String,
        String,
        String,
        String,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
        i64,
        Option<String>,
        Option<String>,
        i64,
    );
    let nodes: Vec<NodeColumns> = sqlx::query_as(
        "SELECT name, lmtp, imap, pop3, web, managesieve, replication, replica, epoch, host, \
         standby, draining FROM nodes ORDER BY name",
    )
    .fetch_all(&mut *tx)
    .await?;
    let scripts: Vec<(String, String, String, i64)> = sqlx::query_as(
        "SELECT address, name, source, active FROM sieve_scripts ORDER BY address, name",
    )
    .fetch_all(&mut *tx)
    .await?;
    let global_scripts: Vec<(String, String)> =
        sqlx::query_as("SELECT name, source FROM sieve_global_scripts")
            .fetch_all(&mut *tx)
            .await?;
    let (spam_domains, spam_users) = spam_thresholds::load_thresholds(&mut tx).await?;
    tx.commit().await?;

    let mut snapshot = Snapshot {
        generation,
        spam_domains,
        spam_users,
        ..Snapshot::default()
    };
    snapshot.domains.extend(domains);
    snapshot.admins.extend(admins);
    for (address, quota, hash, node, epoch, move_state) in users {
        let quota = db::quota_from_sql(&address, quota)?;
        if let Some((_, domain)) = address.rsplit_once('@') {
            snapshot
                .first_users
                .entry(domain.to_string())
                .or_insert_with(|| address.clone());
        }
        snapshot.users.insert(
            address,
            UserRow {
                quota,
                password_hash: hash,
                owner: Owner {
                    node,
                    epoch,
                    frozen: move_state
                        .as_deref()
                        .is_some_and(|s| s.starts_with("frozen:")),
                },
            },
        );
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
        let quota = db::quota_from_sql(&address, Some(quota))?.unwrap_or(u64::MAX);
        snapshot.message_quotas.insert(address, quota);
    }
    let mut sieve: HashMap<String, UserScripts> = HashMap::new();
    for (address, name, source, active) in scripts {
        let user = sieve.entry(address).or_default();
        if active != 0 {
            user.active = Some(name.clone());
        }
        user.scripts.push((name, Arc::from(source)));
    }
    snapshot.sieve = sieve.into_iter().map(|(a, s)| (a, Arc::new(s))).collect();
    snapshot.sieve_global = global_scripts
        .into_iter()
        .map(|(name, source)| (name, Arc::from(source)))
        .collect();
    for (
        name,
        lmtp,
        imap,
        pop3,
        web,
        managesieve,
        replication,
        replica,
        epoch,
        host,
        standby,
        draining,
    ) in nodes
    {
        snapshot.nodes.insert(
            name.clone(),
            NodeRow {
                name,
                lmtp,
                imap,
                pop3,
                web,
                managesieve,
                replication,
                replica,
                epoch: u64::try_from(epoch).unwrap_or(1),
                host,
                standby,
                draining,
            },
        );
    }
    Ok(snapshot)
}

/// One alias expansion in progress.
struct Expansion<'s> {
    snapshot: &'s Snapshot,
    limits: ExpansionLimits,
    postmaster: Option<&'s str>,
    /// Rule 5 applies once per expansion: a configured postmaster that is itself an
    /// unknown `postmaster@` cannot loop.
    postmaster_taken: bool,
    /// Alias sources being expanded, outermost first (the recursion stack).
    path: Vec<&'s str>,
    /// Alias sources whose expansion finished; meeting one again adds nothing.
    expanded: HashSet<&'s str>,
    targets: Vec<Target>,
    /// The same targets, for deduplication.
    seen: HashSet<Target>,
}

/// A lookup rule, in priority order (see the module documentation).
enum Rule {
    Alias(String),
    User(String),
}

impl<'s> Expansion<'s> {
    /// Adds the targets of one address (as stored: the domain lowercase, a remote local part
    /// as written). Recursion depth is bounded by `depth_max` (at most
    /// `EXPANSION_DEPTH_CEILING`).
    fn visit(&mut self, address: &str) -> Result<(), ExpansionLimit> {
        // Stored addresses were checked when written; anything else is skipped, not trusted.
        let Ok(parsed) = parse_address(address, LocalCase::Keep) else {
            return Ok(());
        };
        if !self.snapshot.domains.contains(&parsed.domain) {
            return self.push(Target::Remote(parsed.joined()));
        }
        let local = parsed.local.to_ascii_lowercase();
        let domain = parsed.domain;
        let mut rules = vec![
            Rule::Alias(format!("{local}@{domain}")),
            Rule::User(format!("{local}@{domain}")),
        ];
        if let Some(base) = subaddress_base(&local) {
            rules.push(Rule::Alias(format!("{base}@{domain}")));
            rules.push(Rule::User(format!("{base}@{domain}")));
        }
        rules.push(Rule::Alias(format!("@{domain}")));

        for rule in rules {
            match rule {
                Rule::User(key) => {
                    if self.snapshot.users.contains_key(&key) {
                        return self.push(Target::User(key));
                    }
                }
                Rule::Alias(key) => {
                    let Some((source, destinations)) = self.snapshot.aliases.get_key_value(&key)
                    else {
                        continue;
                    };
                    if self.path.contains(&source.as_str()) {
                        continue; // Inside its own expansion: fall through to the next rule.
                    }
                    if self.expanded.contains(source.as_str()) {
                        return Ok(());
                    }
                    return self.expand(source, destinations);
                }
            }
        }
        // Rule 5: RFC 5321 4.5.1.
        if local == "postmaster" && !self.postmaster_taken {
            self.postmaster_taken = true;
            if let Some(configured) = self.postmaster {
                return self.visit(configured);
            }
            if let Some(first) = self.snapshot.first_users.get(&domain) {
                return self.push(Target::User(first.clone()));
            }
        }
        Ok(())
    }

    fn expand(
        &mut self,
        source: &'s str,
        destinations: &'s [String],
    ) -> Result<(), ExpansionLimit> {
        if self.path.len() >= self.limits.depth_max {
            return Err(ExpansionLimit::Depth);
        }
        self.path.push(source);
        for destination in destinations {
            self.visit(destination)?;
        }
        self.path.pop();
        self.expanded.insert(source);
        Ok(())
    }

    fn push(&mut self, target: Target) -> Result<(), ExpansionLimit> {
        if self.seen.contains(&target) {
            return Ok(());
        }
        if self.targets.len() >= self.limits.targets_max {
            return Err(ExpansionLimit::Targets);
        }
        self.seen.insert(target.clone());
        self.targets.push(target);
        Ok(())
    }
}

/// A user's scripts as the cache holds them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserScripts {
    /// The active script's name.
    pub active: Option<String>,
    /// (name, source), sorted by name.
    pub scripts: Vec<(String, std::sync::Arc<str>)>,
}

impl UserScripts {
    pub fn get(&self, name: &str) -> Option<&std::sync::Arc<str>> {
        self.scripts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, source)| source)
    }
}
