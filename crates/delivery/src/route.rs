//! The location query: who owns a recipient, answered from the directory's cache (no I/O):
//! this node's store, the node that owns the user (a cluster), held while its mailbox is
//! frozen, or outside; and the task that hands waiting copies over as soon as their owner
//! is back.

use std::sync::Arc;
use std::time::Duration;

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

/// Hands copies that waited for a node to the delivery threads as soon as the node is up
/// again (its lease renewed), instead of at their next attempt.
pub async fn wake_on_return(
    directory: directory::Directory,
    queue: Arc<queue::Queue>,
    wakeup: Arc<Wakeup>,
    peers: Arc<PeerPath>,
) {
    let mut up: std::collections::HashMap<String, bool> = std::collections::HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tick.tick().await;
        for node in directory.cache().nodes() {
            let was = up.insert(node.name.clone(), node.up);
            if node.up && was == Some(false) {
                let ids = peers.take_waiting(&node.name);
                tracing::info!(event = "node_up", node = %node.name, waiting = ids.len());
                for id in ids {
                    // Already delivered or removed meanwhile: nothing to do.
                    let _ = queue.retry(id);
                }
                wakeup.notify();
            } else if !node.up && was == Some(true) {
                tracing::warn!(event = "node_down", node = %node.name);
            }
        }
    }
}
