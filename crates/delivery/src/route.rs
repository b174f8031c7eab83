//! The location query: who owns a recipient, answered from the directory's cache (no I/O):
//! this node's store, the node that owns the user (a cluster), held while its mailbox is
//! frozen, or outside; and the task that hands waiting copies over as soon as their owner
//! is back.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::peer::PeerPath;
use crate::wakeup::Wakeup;

/// Where a recipient's copy goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A mailbox in this node's store (the canonical user address).
    Local(String),
    /// Another domain: outbound SMTP.
    Remote,
    /// Was local once and is no longer (user deleted since the message was accepted).
    Unknown,
    /// A user of ours whose mailbox another node of the cluster owns: `user` (the canonical
    /// address) lives on `node` as of the directory's ownership `epoch`; the copy is handed
    /// to the node's LMTP listener at `lmtp` (`peer.rs`), or, while the node is not `up`,
    /// waits in the deferred queue on a short schedule.
    Peer {
        node: String,
        user: String,
        epoch: i64,
        lmtp: String,
        up: bool,
    },
    /// A user of ours whose mailbox must not change now (it is being moved between nodes):
    /// the copy waits in the deferred queue on the short schedule. The text says why.
    Held(String),
}

/// The location query: who owns this recipient. [`DirectoryRouter`] answers it from the
/// directory; a cluster answers [`Route::Peer`] for users another node owns. (A trait so
/// delivery's unit tests can route by name.)
pub trait Router: Send + Sync {
    fn route(&self, address: &str) -> Route;
}

/// Routes recipients with the directory cache (no I/O): a user of a local domain is local,
/// or, in a cluster, on the node that owns it.
pub struct DirectoryRouter {
    pub directory: directory::Directory,
    /// Our node's name, in a cluster.
    pub node: Option<String>,
    /// Which mailboxes are held (frozen for a move).
    pub gate: Arc<mailboxes::Gate>,
}

impl DirectoryRouter {
    /// Where a user of ours goes: here, held (its mailbox is frozen for a move), or the
    /// owner node.
    fn user(&self, user: String) -> Route {
        match self.owner(user) {
            // Asked under the shared mailbox lock (the delivery batch holds it from routing
            // to appending): a move's freeze takes it exclusively once after marking the user.
            Route::Local(user) if self.gate.held(&user) => {
                Route::Held(format!("the mailbox of {user} is being moved"))
            }
            route => route,
        }
    }

    fn owner(&self, user: String) -> Route {
        let Some(node) = &self.node else {
            return Route::Local(user);
        };
        let cache = self.directory.cache();
        let Some(owner) = cache.owner(&user) else {
            return Route::Local(user);
        };
        if owner.frozen {
            return Route::Held(format!("the mailbox of {user} is being moved"));
        }
        match owner.node {
            // See `cluster::Cluster::home`: in a cluster a user without a node is nowhere's.
            None => Route::Held(format!("{user} has no node in the cluster")),
            Some(owner_node) if owner_node != *node => {
                let (lmtp, up) = cache
                    .node(&owner_node)
                    .map_or((String::new(), false), |n| (n.lmtp, n.up));
                Route::Peer {
                    node: owner_node,
                    user,
                    epoch: owner.epoch,
                    lmtp,
                    up,
                }
            }
            _ => Route::Local(user),
        }
    }
}

impl Router for DirectoryRouter {
    fn route(&self, address: &str) -> Route {
        let cache = self.directory.cache();
        // Recipients were expanded through aliases at RCPT time: a user's mailbox is itself,
        // even if an alias of the same address exists (expanding again would follow it).
        if cache.is_user(address) {
            return self.user(address.to_ascii_lowercase());
        }
        // Anything else (a bounce's sender, say) is resolved like a recipient.
        match cache.resolve(address) {
            directory::Resolution::Local(targets) => match targets.into_iter().next() {
                Some(directory::Target::User(user)) => self.user(user),
                Some(directory::Target::Remote(_)) => Route::Remote,
                None => Route::Unknown,
            },
            directory::Resolution::UnknownUser => Route::Unknown,
            directory::Resolution::NotLocal => Route::Remote,
        }
    }
}

/// How often the return task looks at the nodes' leases and starts probes.
const RETURN_TICK: Duration = Duration::from_millis(250);
/// The prober tries an unreachable owner at most this often (one connection per owner, not
/// one per waiting copy).
pub const PROBE_PERIOD: Duration = Duration::from_millis(500);
/// A probe (connect and the LMTP greeting) that takes longer has failed: the next one starts
/// afresh rather than wait for the kernel's retransmission of a dropped SYN.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Hands copies that waited for a node to the delivery threads as soon as the node is back,
/// instead of at their next attempt: when its lease is renewed again (it was down), or, for
/// an owner up by its lease that a hand-over or a proxied login could not reach (a
/// partition between the nodes), as soon as a probe reaches it. One prober per such owner
/// connects to its LMTP listener every [`PROBE_PERIOD`] and waits [`PROBE_TIMEOUT`] for its
/// greeting; the first that answers wakes the owner's waiting copies, clears delivery's and
/// (with `logins`) the login proxy's suspicion of it, and is logged `node_reachable`.
pub async fn wake_on_return(
    directory: directory::Directory,
    queue: Arc<queue::Queue>,
    wakeup: Arc<Wakeup>,
    peers: Arc<PeerPath>,
    logins: Option<Arc<cluster::Cluster>>,
) {
    let mut up: HashMap<String, bool> = HashMap::new();
    // Node -> when its probe started; present while one runs.
    let mut probing: HashMap<String, Instant> = HashMap::new();
    let mut last_probe: HashMap<String, Instant> = HashMap::new();
    let (answered_tx, mut answered) = tokio::sync::mpsc::unbounded_channel::<(String, bool)>();
    let mut tick = tokio::time::interval(RETURN_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let retry = |ids: Vec<queue::MessageId>| {
        for id in ids {
            // Already delivered or removed meanwhile: nothing to do.
            let _ = queue.retry(id);
        }
        wakeup.notify();
    };
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            Some((node, reached)) = answered.recv() => {
                probing.remove(&node);
                if reached {
                    let ids = peers.reached(&node);
                    if let Some(cluster) = &logins {
                        cluster.reached(&node);
                    }
                    tracing::info!(event = "node_reachable", node = %node, waiting = ids.len());
                    retry(ids);
                }
                continue;
            }
        }
        let cache = directory.cache();
        for node in cache.nodes() {
            let was = up.insert(node.name.clone(), node.up);
            if node.up && was == Some(false) {
                let ids = peers.take_waiting(&node.name);
                tracing::info!(event = "node_up", node = %node.name, waiting = ids.len());
                retry(ids);
            } else if !node.up && was == Some(true) {
                tracing::warn!(event = "node_down", node = %node.name);
            }
        }
        let mut unreachable = peers.unreachable_nodes();
        if let Some(cluster) = &logins {
            unreachable.extend(cluster.suspected());
        }
        let now = Instant::now();
        for name in unreachable {
            // A node down by its lease waits for the lease instead (above).
            let Some(node) = cache.node(&name).filter(|n| n.up) else {
                continue;
            };
            if probing.contains_key(&name)
                || last_probe
                    .get(&name)
                    .is_some_and(|at| now.duration_since(*at) < PROBE_PERIOD)
            {
                continue;
            }
            probing.insert(name.clone(), now);
            last_probe.insert(name.clone(), now);
            let answered_tx = answered_tx.clone();
            tokio::spawn(async move {
                let reached = tokio::time::timeout(PROBE_TIMEOUT, probe(&node.lmtp))
                    .await
                    .is_ok_and(|greeted| greeted);
                let _ = answered_tx.send((name, reached));
            });
        }
    }
}

/// One probe of an owner's LMTP listener: connect, read its `220` greeting (RFC 5321 4.2:
/// a one-line greeting here; a node that accepts connections but does not answer, stopped
/// or hung, has not answered), say `QUIT`.
async fn probe(lmtp: &str) -> bool {
    use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
    let Ok(stream) = tokio::net::TcpStream::connect(lmtp).await else {
        return false;
    };
    let mut reader = tokio::io::BufReader::new(stream);
    let mut greeting = String::new();
    // The greeting is short; a longer line is no mailstow node's.
    let read = (&mut reader).take(512).read_line(&mut greeting).await;
    if !matches!(read, Ok(n) if n > 0) || !greeting.starts_with("220") {
        return false;
    }
    let _ = reader.get_mut().write_all(b"QUIT\r\n").await;
    true
}
