//! What the server's `/healthz` answers: `200 ok`, or `503` and one line naming the most
//! important reason the node is not fully serving.
//!
//! Each part of the node that can be unhealthy owns one [`Component`] and sets or clears its
//! reason ([`Health::set`], [`Health::clear`]); nothing else is stored, so a reason lasts
//! exactly as long as its part says so. [`Health::first_problem`] is the reason of the first
//! component in [`Component`]'s order (the most important first). The crate depends on
//! nothing, so the engines, the shell and the binary can all reach it.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

/// A part of the node with a reason to be unhealthy, most important first: what
/// `/healthz` says when several have one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    /// The node is starting or stopping.
    Lifecycle,
    /// The data directory's file system (full, read-only).
    Disk,
    /// The mail queue.
    Queue,
    /// The mailbox store.
    Store,
    /// The web view's listener.
    Web,
    /// The public HTTPS listener (`[server] https`).
    Https,
    /// The plain HTTP listener (`[server] http`: ACME challenges, redirects).
    Http,
    /// The metrics listener (which serves `/healthz` itself; reported where it is bound).
    Metrics,
}

impl Component {
    /// The component's name in logs.
    pub fn name(self) -> &'static str {
        match self {
            Component::Lifecycle => "lifecycle",
            Component::Disk => "disk",
            Component::Queue => "queue",
            Component::Store => "store",
            Component::Web => "web",
            Component::Https => "https",
            Component::Http => "http",
            Component::Metrics => "metrics",
        }
    }
}

/// The reasons set now, one per component at most.
#[derive(Debug, Default)]
pub struct Health {
    problems: Mutex<BTreeMap<Component, String>>,
}

/// The longest reason kept, in bytes: `/healthz` answers one short line.
pub const REASON_BYTES_MAX: usize = 256;

impl Health {
    /// A node that is starting: `503 starting` until [`Component::Lifecycle`] is cleared.
    pub fn starting() -> Health {
        let health = Health::default();
        health.set(Component::Lifecycle, "starting");
        health
    }

    /// Sets (or replaces) `component`'s reason. The reason is one line: control characters
    /// become spaces and it is cut to [`REASON_BYTES_MAX`].
    pub fn set(&self, component: Component, reason: impl Into<String>) {
        let reason = one_line(reason.into());
        self.lock().insert(component, reason);
    }

    /// Clears `component`'s reason, if it had one.
    pub fn clear(&self, component: Component) {
        self.lock().remove(&component);
    }

    /// The most important reason set now, with its component; `None` when healthy.
    pub fn first_problem(&self) -> Option<(Component, String)> {
        self.lock()
            .iter()
            .next()
            .map(|(component, reason)| (*component, reason.clone()))
    }

    /// Every reason set now, the most important first.
    pub fn problems(&self) -> Vec<(Component, String)> {
        self.lock()
            .iter()
            .map(|(component, reason)| (*component, reason.clone()))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Component, String>> {
        // A panic elsewhere while holding the lock left a whole map: keep using it.
        self.problems.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `reason` as one line of at most [`REASON_BYTES_MAX`] bytes.
fn one_line(reason: String) -> String {
    let mut line: String = reason
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if line.len() > REASON_BYTES_MAX {
        let mut end = REASON_BYTES_MAX;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line.truncate(end);
    }
    let line = line.trim();
    if line.is_empty() {
        "unhealthy".to_string()
    } else {
        line.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_important_reason_is_the_answer_until_cleared() {
        let health = Health::starting();
        assert_eq!(
            health.first_problem(),
            Some((Component::Lifecycle, "starting".to_string()))
        );
        health.set(Component::Web, "web listener not bound: in use");
        health.set(Component::Disk, "disk full");
        health.clear(Component::Lifecycle);
        assert_eq!(
            health.first_problem(),
            Some((Component::Disk, "disk full".to_string()))
        );
        health.clear(Component::Disk);
        assert_eq!(
            health.first_problem().map(|(_, reason)| reason).as_deref(),
            Some("web listener not bound: in use")
        );
        assert_eq!(health.problems().len(), 1);
        health.clear(Component::Web);
        health.clear(Component::Web);
        assert_eq!(health.first_problem(), None);
    }

    #[test]
    fn a_reason_is_one_short_line() {
        let health = Health::default();
        health.set(Component::Queue, "a\r\nb\tc");
        assert_eq!(health.first_problem().unwrap().1, "a  b c");
        health.set(Component::Queue, "é".repeat(REASON_BYTES_MAX));
        let reason = health.first_problem().unwrap().1;
        assert!(reason.len() <= REASON_BYTES_MAX && reason.starts_with('é'));
        health.set(Component::Queue, "\n");
        assert_eq!(health.first_problem().unwrap().1, "unhealthy");
    }
}
