//! Who may change a user's mailbox now.
//!
//! Every writer of new mail (the [`crate::Deposit`]: delivery batches, hand-overs, the web
//! view's copies, imports) holds the gate **shared** from deciding where a copy goes to
//! appending it. Whoever removes, renames or freezes a user's mail takes it **exclusively**
//! once, after the directory (or the frozen set) already says so: every writer that decided
//! before has finished, and every later one sees the change. So a copy routed to a user
//! before its deletion cannot land after it, and a frozen mailbox (a move between nodes)
//! stays exactly as it was copied. A backup holds it exclusively for its capture point, so
//! no writer is between a decision and its append while the folders' cuts are taken.
//!
//! A mailbox is **held** while it must not change: frozen here for a move, frozen in the
//! directory, or owned by another node of the cluster. Outside a cluster nothing is held.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The mailbox lock, and the users whose mailboxes are held.
pub struct Gate {
    lock: RwLock<()>,
    /// This node's name in a cluster and the directory every node shares; `None`: a single
    /// node, where nothing is held.
    cluster: Option<(String, directory::Directory)>,
    /// Users frozen here for a move, before (and while) the directory says so.
    frozen: Mutex<HashSet<String>>,
}

/// The gate held shared: new mail may be written. Not `Send`: held by one thread, from the
/// decision to the append.
pub struct Shared<'a> {
    pub(crate) gate: &'a Gate,
    _guard: RwLockReadGuard<'a, ()>,
}

/// The gate held exclusively: no new mail is being written anywhere.
pub struct Exclusive<'a> {
    _guard: RwLockWriteGuard<'a, ()>,
}

impl Gate {
    /// A single node's gate: nothing is ever held.
    pub fn single() -> Gate {
        Gate::new(None)
    }

    /// The gate of cluster node `node`, whose directory says who owns each mailbox.
    pub fn cluster(node: String, directory: directory::Directory) -> Gate {
        Gate::new(Some((node, directory)))
    }

    fn new(cluster: Option<(String, directory::Directory)>) -> Gate {
        Gate {
            lock: RwLock::new(()),
            cluster,
            frozen: Mutex::new(HashSet::new()),
        }
    }

    /// This node in a cluster.
    pub fn node(&self) -> Option<&str> {
        self.cluster.as_ref().map(|(node, _)| node.as_str())
    }

    /// Holds the gate shared (blocks while a removal or a freeze holds it exclusively).
    pub fn shared(&self) -> Shared<'_> {
        Shared {
            gate: self,
            // Poisoned: a writer panicked between a decision and its append; the lock
            // protects no data, only the order, which the panic did not break.
            _guard: self.lock.read().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// Holds the gate exclusively: waits for every writer that holds it shared. Call it
    /// on a thread that may block (`spawn_blocking`).
    pub fn exclusive(&self) -> Exclusive<'_> {
        Exclusive {
            _guard: self.lock.write().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// True if `user`'s mailbox here must not change now: frozen for a move (here, or in the
    /// directory), or owned by another node. Always false outside a cluster.
    pub fn held(&self, user: &str) -> bool {
        let Some((me, directory)) = &self.cluster else {
            return false;
        };
        if self.frozen().contains(user) {
            return true;
        }
        match directory.cache().owner(user) {
            Some(owner) => owner.frozen || owner.node.as_ref().is_some_and(|n| n != me),
            None => false,
        }
    }

    /// Freezes `user` here (a move's first step on the old owner); the caller then ends the
    /// user's sessions and takes the gate exclusively once.
    pub fn freeze(&self, user: &str) {
        self.frozen().insert(user.to_string());
    }

    /// Ends the freeze of `user` (its move finished or failed).
    pub fn thaw(&self, user: &str) {
        self.frozen().remove(user);
    }

    /// The users frozen here now.
    pub fn frozen_users(&self) -> Vec<String> {
        self.frozen().iter().cloned().collect()
    }

    fn frozen(&self) -> MutexGuard<'_, HashSet<String>> {
        self.frozen.lock().unwrap_or_else(|p| p.into_inner())
    }
}
