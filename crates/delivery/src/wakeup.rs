//! The signal that wakes delivery threads when the queue commits new mail (or an operator
//! retries a message, or a node that mail waited for is back).

use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Wakes delivery threads when the queue commits new mail.
#[derive(Default)]
pub struct Wakeup {
    pending: Mutex<bool>,
    signal: Condvar,
}

impl Wakeup {
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
