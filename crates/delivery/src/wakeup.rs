//! The signal that wakes delivery threads when the queue commits new mail (or an operator
//! retries a message, or a node that mail waited for is back), and the lock that lets a
//! backup pause them between rounds.

use std::sync::{Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

/// Wakes delivery threads when the queue commits new mail; pauses them for a backup.
#[derive(Default)]
pub struct Wakeup {
    pending: Mutex<bool>,
    signal: Condvar,
    /// Held shared by every delivery round, from its lease to its queue commit; exclusively
    /// by a backup's capture ([`Wakeup::pause`]).
    rounds: RwLock<()>,
}

/// Delivery rounds paused: none is in flight, none starts until this is dropped.
pub struct Paused<'a> {
    _guard: RwLockWriteGuard<'a, ()>,
}

impl Wakeup {
    /// Waits for every delivery round in flight to finish (its outcomes committed to the
    /// queue) and holds off new ones until the returned guard is dropped: between rounds a
    /// message is either delivered and marked, or neither (docs/operations.md, Backups).
    /// Blocks: call it on a thread that may.
    pub fn pause(&self) -> Paused<'_> {
        Paused {
            // Poisoned: a round panicked; the lock protects no data, only the order.
            _guard: self.rounds.write().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// Held by one delivery round from its lease to its queue commit.
    pub(crate) fn round(&self) -> RwLockReadGuard<'_, ()> {
        self.rounds.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn notify(&self) {
        *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.signal.notify_all();
    }

    pub(crate) fn wait(&self, timeout: Duration) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if !*pending {
            pending = self
                .signal
                .wait_timeout(pending, timeout)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        *pending = false;
    }
}
