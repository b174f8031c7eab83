//! The keys of copies other nodes handed over and this store keeps (docs/storage.md,
//! "Delivered keys"): journaled in the same record as the copies (`Op::Delivered`, written
//! by `commit.rs`), kept in memory within two bounds (here), written into every snapshot,
//! and asked by [`crate::Store::already_delivered`] before a retried hand-over is stored
//! again.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One handed-over copy's key: 16 bytes of a hash of (origin message, recipient), made by the
/// cluster (`cluster::record`).
pub type DeliveredKey = [u8; 16];

/// The keys kept, oldest first, within `max` and `retain`.
#[derive(Debug)]
pub(crate) struct DeliveredKeys {
    /// Key -> when it was recorded (unix seconds).
    keys: HashMap<DeliveredKey, u64>,
    /// Oldest first; a key recorded again is found at its latest time only.
    order: VecDeque<(u64, DeliveredKey)>,
    max: usize,
    retain: Duration,
}

impl Default for DeliveredKeys {
    fn default() -> Self {
        let config = crate::StoreConfig::default();
        DeliveredKeys::new(config.delivered_keys_max, config.delivered_keys_retain)
    }
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl DeliveredKeys {
    pub(crate) fn new(max: usize, retain: Duration) -> DeliveredKeys {
        DeliveredKeys {
            keys: HashMap::new(),
            order: VecDeque::new(),
            max: max.max(1),
            retain,
        }
    }

    pub(crate) fn contains(&self, key: &DeliveredKey) -> bool {
        self.keys.contains_key(key)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Keys recorded at `at`, then the oldest dropped past `max` and those older than
    /// `retain` by this host's clock. Replay and the live writer both come here (index
    /// apply's `delivered` phase).
    pub(crate) fn insert(&mut self, at: u64, keys: &[DeliveredKey]) {
        let now = unix_now();
        let retain = self.retain.as_secs();
        if now.saturating_sub(at) > retain {
            // Recorded longer ago than any origin retries (a replay of an old record).
            return;
        }
        for key in keys {
            if self.keys.insert(*key, at).is_none() {
                self.order.push_back((at, *key));
            } else {
                // Recorded again (a second record of the same copy): keep one entry, at its
                // latest time, so `keys` and `order` stay one to one.
                self.order.retain(|(_, k)| k != key);
                self.order.push_back((at, *key));
            }
        }
        while let Some(&(at, key)) = self.order.front() {
            if self.order.len() <= self.max && now.saturating_sub(at) <= retain {
                break;
            }
            self.order.pop_front();
            self.keys.remove(&key);
        }
        assert_eq!(self.keys.len(), self.order.len(), "every kept key once");
        assert!(self.order.len() <= self.max, "at most delivered_keys_max");
        assert!(
            keys.last()
                .is_none_or(|k| self.keys.contains_key(k) || now.saturating_sub(at) > retain),
            "the newest key is kept"
        );
    }

    /// Every key with its time, oldest first (the snapshot's order).
    pub(crate) fn entries(&self) -> impl Iterator<Item = &(u64, DeliveredKey)> {
        self.order.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u8) -> DeliveredKey {
        [i; 16]
    }

    #[test]
    fn the_oldest_go_past_the_limit_and_old_ones_past_their_time() {
        let mut keys = DeliveredKeys::new(3, Duration::from_secs(3600));
        let now = unix_now();
        keys.insert(now, &[key(1), key(2)]);
        keys.insert(now, &[key(3), key(4)]);
        assert!(!keys.contains(&key(1)));
        assert!((2..=4).all(|i| keys.contains(&key(i))));
        // Recorded again: one entry, not two.
        keys.insert(now, &[key(3)]);
        assert_eq!(keys.len(), 3);
        keys.insert(now - 7200, &[key(5)]);
        assert!(!keys.contains(&key(5)), "older than retain");
        assert_eq!(keys.entries().count(), keys.len());
    }
}
