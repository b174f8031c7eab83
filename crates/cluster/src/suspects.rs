//! Nodes that did not answer a moment ago: not tried again for [`SUSPECT_FOR`] (unless their
//! lease shows them again), so every login or delivery batch does not wait for a stopped or
//! hung owner once more. The proxy of logins and the hand-over of mail keep one each: an owner
//! that refuses LMTP is not thereby unreachable for IMAP.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a node that did not answer is not tried again.
pub const SUSPECT_FOR: Duration = Duration::from_secs(5);

/// Nodes that did not answer, and until when they are not tried.
#[derive(Default)]
pub struct Suspects(Mutex<HashMap<String, Instant>>);

impl Suspects {
    /// `node` did not answer: skip it for [`SUSPECT_FOR`].
    pub fn suspect(&self, node: &str) {
        self.lock()
            .insert(node.to_string(), Instant::now() + SUSPECT_FOR);
    }

    /// Whether `node` failed to answer less than [`SUSPECT_FOR`] ago.
    pub fn is_suspect(&self, node: &str) -> bool {
        let mut suspects = self.lock();
        match suspects.get(node) {
            Some(until) if *until > Instant::now() => true,
            Some(_) => {
                suspects.remove(node);
                false
            }
            None => false,
        }
    }

    /// `node` is back (its lease renewed, or it answered a probe): try it again at once.
    pub fn clear(&self, node: &str) {
        self.lock().remove(node);
    }

    /// The nodes suspect now.
    pub fn nodes(&self) -> Vec<String> {
        let now = Instant::now();
        let mut suspects = self.lock();
        suspects.retain(|_, until| *until > now);
        suspects.keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        // The map is valid after any panic: entries are only inserted and removed whole.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suspect_is_skipped_until_cleared() {
        let suspects = Suspects::default();
        assert!(!suspects.is_suspect("n2"));
        suspects.suspect("n2");
        assert!(suspects.is_suspect("n2"));
        assert!(!suspects.is_suspect("n3"));
        assert_eq!(suspects.nodes(), vec!["n2".to_string()]);
        suspects.clear("n2");
        assert!(!suspects.is_suspect("n2"));
        assert!(suspects.nodes().is_empty());
    }
}
