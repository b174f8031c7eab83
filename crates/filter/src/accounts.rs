//! What outbound hygiene remembers per account (docs/spam.md 5): flagged submissions in the
//! last hour, and a limit with what was sent under it. In memory, per node.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub(crate) const HOUR: Duration = Duration::from_secs(3600);

/// Per account: flagged submissions in the last hour, and its limit if it has one.
#[derive(Default)]
pub(crate) struct Accounts {
    inner: Mutex<HashMap<String, Account>>,
}

#[derive(Default)]
pub(crate) struct Account {
    pub(crate) flagged: Vec<Instant>,
    pub(crate) limited_until: Option<Instant>,
    pub(crate) sent_while_limited: Vec<Instant>,
}

/// Accounts tracked at most: a flood of distinct users cannot grow the map without bound.
const ACCOUNTS_MAX: usize = 100_000;

impl Accounts {
    pub(crate) fn with<T>(&self, user: &str, f: impl FnOnce(&mut Account, Instant) -> T) -> T {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if map.len() >= ACCOUNTS_MAX && !map.contains_key(user) {
            map.retain(|_, a| a.limited_until.is_some_and(|u| u > now));
        }
        let account = map.entry(user.to_string()).or_default();
        account.flagged.retain(|t| now.duration_since(*t) < HOUR);
        account
            .sent_while_limited
            .retain(|t| now.duration_since(*t) < HOUR);
        if account.limited_until.is_some_and(|u| u <= now) {
            account.limited_until = None;
        }
        f(account, now)
    }

    /// Ends `user`'s limit (`mailstow spam release`). Whether it had one.
    pub(crate) fn release(&self, user: &str) -> bool {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(user)
            .is_some_and(|a| a.limited_until.is_some_and(|u| u > Instant::now()))
    }

    pub(crate) fn limited(&self) -> Vec<String> {
        let map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        map.iter()
            .filter(|(_, a)| a.limited_until.is_some_and(|u| u > now))
            .map(|(u, _)| u.clone())
            .collect()
    }
}
