//! Logins already verified, so a mail client that logs in every minute costs one argon2 run per
//! password change instead of one per login (Dovecot's auth cache does the same job).
//!
//! An entry holds the user's stored PHC string and a keyed BLAKE2b MAC of the password that
//! matched it. It answers only while the stored hash is unchanged, so a new password (or a
//! deleted user: no stored hash) invalidates it at once; the database is still asked on every
//! login. The MAC key is random per process and never leaves memory, so the cache holds
//! nothing an attacker could test guesses against offline without it. Wrong passwords are
//! never cached. Entries expire after `ttl`; at `entries_max` the oldest half is dropped.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use blake2::Blake2bMac512;
use blake2::digest::{KeyInit, Mac};

pub(crate) struct Verified {
    /// BLAKE2b's full key size, so the key needs no length check.
    key: [u8; 64],
    ttl: Duration,
    entries_max: usize,
    entries: Mutex<HashMap<String, Entry>>,
}

struct Entry {
    phc: String,
    mac: Vec<u8>,
    at: Instant,
}

impl Verified {
    pub(crate) fn new(ttl: Duration, entries_max: usize) -> Verified {
        Verified {
            key: std::array::from_fn(|_| rand::random()),
            ttl,
            entries_max,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn mac(&self, address: &str, password: &str) -> Blake2bMac512 {
        let mut mac = <Blake2bMac512 as KeyInit>::new(&self.key.into());
        // The address is part of the input, so two users' entries never compare equal.
        mac.update(address.as_bytes());
        mac.update(&[0]);
        mac.update(password.as_bytes());
        mac
    }

    /// Whether `password` is the one verified for `address` against this same stored hash.
    pub(crate) fn check(&self, address: &str, phc: &str, password: &str) -> bool {
        if self.entries_max == 0 {
            return false;
        }
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = entries.get(address) else {
            return false;
        };
        if entry.phc != phc || entry.at.elapsed() > self.ttl {
            return false;
        }
        // Constant-time comparison.
        self.mac(address, password).verify_slice(&entry.mac).is_ok()
    }

    /// Records a password argon2 just verified against `phc`.
    pub(crate) fn remember(&self, address: &str, phc: &str, password: &str) {
        if self.entries_max == 0 {
            return;
        }
        let mac = self.mac(address, password).finalize().into_bytes().to_vec();
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= self.entries_max && !entries.contains_key(address) {
            let mut by_age: Vec<(String, Instant)> =
                entries.iter().map(|(a, e)| (a.clone(), e.at)).collect();
            by_age.sort_by_key(|(_, at)| *at);
            for (old, _) in by_age.into_iter().take(self.entries_max.div_ceil(2)) {
                entries.remove(&old);
            }
        }
        entries.insert(
            address.to_string(),
            Entry {
                phc: phc.to_string(),
                mac,
                at: Instant::now(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_password_against_the_same_hash_matches() {
        let v = Verified::new(Duration::from_secs(60), 10);
        assert!(!v.check("a@x", "$h1", "pw"));
        v.remember("a@x", "$h1", "pw");
        assert!(v.check("a@x", "$h1", "pw"));
        assert!(!v.check("a@x", "$h1", "pw2"), "another password");
        assert!(!v.check("a@x", "$h2", "pw"), "the stored hash changed");
        assert!(!v.check("b@x", "$h1", "pw"), "another user");
    }

    #[test]
    fn entries_expire_and_stay_bounded() {
        let v = Verified::new(Duration::ZERO, 10);
        v.remember("a@x", "$h", "pw");
        std::thread::sleep(Duration::from_millis(2));
        assert!(!v.check("a@x", "$h", "pw"), "expired");

        let v = Verified::new(Duration::from_secs(60), 4);
        for n in 0..100 {
            v.remember(&format!("u{n}@x"), "$h", "pw");
            assert!(v.entries.lock().unwrap().len() <= 4);
        }
        assert!(v.check("u99@x", "$h", "pw"), "the newest entry is kept");

        let off = Verified::new(Duration::from_secs(60), 0);
        off.remember("a@x", "$h", "pw");
        assert!(
            !off.check("a@x", "$h", "pw"),
            "entries_max 0 disables the cache"
        );
    }
}
