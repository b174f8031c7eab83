//! The one lock-poisoning policy of mailfs and its FUSE shell (docs/mailfs.md 5, "Locks"):
//! a poisoned lock is a panic, with one message, wherever it is met.
//!
//! A `Mutex` is poisoned when a thread panicked while holding it, that is, in the middle of
//! changing what it guards: the tree, an account's name index, a backlog, the journal's
//! counters, a writer's dirty blocks. Nothing says that state is whole any more. Taking the
//! guard out of the `PoisonError` and going on (the server's policy, right where the data
//! is valid after any panic) could write a directory or a superblock made from a
//! half-changed tree to every replica, which no later repair can tell from a good one.
//! Stopping instead is safe: whatever was acknowledged is already durable (M6: in the
//! accounts, a backlog or the journal), and the crash protocol (section 5) leaves every
//! file at its old or its new version, so the next mount repairs and goes on, as after a
//! power cut.
//!
//! So every lock and condition-variable wait in mailfs and mailfs-fuse goes through these
//! traits. The panic ends the thread that meets the poisoned lock (a FUSE worker, whose
//! request fuser then answers with EIO, or a background thread); every other thread that
//! takes the same lock meets the same panic, so nothing more is read from that state or
//! written from it.

use std::sync::{Condvar, Mutex, MutexGuard, WaitTimeoutResult};
use std::time::Duration;

/// Why the process stops: the one message of this policy.
const POISONED: &str = "mailfs: a lock is poisoned (a thread panicked while changing what \
it guards); stopping rather than using state that may be half-changed";

/// [`Mutex::lock`] under the policy above.
pub trait MutexExt<T: ?Sized> {
    /// The guard; panics if another thread panicked while holding the lock.
    fn lock_or_panic(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> MutexExt<T> for Mutex<T> {
    #[track_caller]
    fn lock_or_panic(&self) -> MutexGuard<'_, T> {
        match self.lock() {
            Ok(guard) => guard,
            Err(_) => poisoned(),
        }
    }
}

/// [`Condvar::wait`] and [`Condvar::wait_timeout`] under the policy above (a wait takes
/// the lock again before it returns, so it can find it poisoned too).
pub trait CondvarExt {
    fn wait_or_panic<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T>;
    fn wait_timeout_or_panic<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult);
}

impl CondvarExt for Condvar {
    #[track_caller]
    fn wait_or_panic<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        match self.wait(guard) {
            Ok(guard) => guard,
            Err(_) => poisoned(),
        }
    }

    #[track_caller]
    fn wait_timeout_or_panic<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        match self.wait_timeout(guard, timeout) {
            Ok(woken) => woken,
            Err(_) => poisoned(),
        }
    }
}

#[cold]
#[track_caller]
fn poisoned() -> ! {
    panic!("{POISONED}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_panics_with_the_policy_message() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _guard = m2.lock_or_panic();
            panic!("while holding the lock");
        })
        .join();
        assert!(m.is_poisoned());
        let err = std::panic::catch_unwind(|| *m.lock_or_panic()).unwrap_err();
        let message = err.downcast_ref::<String>().expect("a formatted message");
        assert_eq!(message, POISONED);
        // An unpoisoned lock and a wait that times out pass straight through.
        let fresh = Mutex::new(2);
        let (guard, woken) =
            Condvar::new().wait_timeout_or_panic(fresh.lock_or_panic(), Duration::from_millis(1));
        assert!(woken.timed_out());
        assert_eq!(*guard, 2);
    }
}
