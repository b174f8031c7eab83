//! Logged-in browser sessions: a random token in an HttpOnly, SameSite=Strict cookie, and a
//! second random token for the forms of that session (CSRF). Held in memory, bounded: at
//! most `sessions_max`, each ending after `idle` without a request and after `lifetime` in
//! any case.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::RngExt as _;

/// One browser's login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Session {
    pub(crate) user: String,
    pub(crate) csrf: String,
    started: Instant,
    seen: Instant,
}

pub(crate) struct Sessions {
    by_token: Mutex<HashMap<String, Session>>,
    max: usize,
    idle: Duration,
    lifetime: Duration,
}

/// 32 random bytes as hex: the cookie and the form token.
fn token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Sessions {
    pub(crate) fn new(max: usize, idle: Duration, lifetime: Duration) -> Sessions {
        Sessions {
            by_token: Mutex::new(HashMap::new()),
            max,
            idle,
            lifetime,
        }
    }

    fn live(&self, s: &Session, now: Instant) -> bool {
        now.duration_since(s.seen) < self.idle && now.duration_since(s.started) < self.lifetime
    }

    /// A new session for `user`: its cookie token, or `None` when `sessions_max` are live.
    /// The ended ones are dropped first, with their users, for the caller to log.
    pub(crate) fn start(&self, user: &str) -> (Option<(String, Session)>, Vec<String>) {
        let now = Instant::now();
        let mut map = self.by_token.lock().unwrap_or_else(|p| p.into_inner());
        let mut ended = Vec::new();
        if map.len() >= self.max {
            map.retain(|_, s| {
                let keep = self.live(s, now);
                if !keep {
                    ended.push(s.user.clone());
                }
                keep
            });
        }
        if map.len() >= self.max {
            return (None, ended);
        }
        let session = Session {
            user: user.to_string(),
            csrf: token(),
            started: now,
            seen: now,
        };
        let key = token();
        map.insert(key.clone(), session.clone());
        (Some((key, session)), ended)
    }

    /// The live session of a cookie token (its idle clock restarted); an ended one is
    /// removed and its user returned as `Err`.
    pub(crate) fn get(&self, key: &str) -> Result<Option<Session>, String> {
        let now = Instant::now();
        let mut map = self.by_token.lock().unwrap_or_else(|p| p.into_inner());
        let Some(s) = map.get_mut(key) else {
            return Ok(None);
        };
        if !self.live(s, now) {
            let user = s.user.clone();
            map.remove(key);
            return Err(user);
        }
        s.seen = now;
        Ok(Some(s.clone()))
    }

    /// Ends every session of `user` but the one of `keep`; how many.
    pub(crate) fn end_user(&self, user: &str, keep: &str) -> usize {
        let mut map = self.by_token.lock().unwrap_or_else(|p| p.into_inner());
        let before = map.len();
        map.retain(|key, s| s.user != user || key == keep);
        before - map.len()
    }

    pub(crate) fn end(&self, key: &str) -> Option<Session> {
        self.by_token
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_token
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

/// Compares two tokens in time independent of where they differ.
pub(crate) fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_bounded_and_end() {
        let sessions = Sessions::new(2, Duration::from_millis(50), Duration::from_secs(60));
        let (a, _) = sessions.start("a@x");
        let (b, _) = sessions.start("b@x");
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_ne!(a.0, b.0);
        assert_ne!(a.1.csrf, b.1.csrf);
        assert_eq!(a.0.len(), 64);
        assert!(sessions.start("c@x").0.is_none(), "at most two");
        assert_eq!(sessions.get(&a.0).unwrap().unwrap().user, "a@x");
        std::thread::sleep(Duration::from_millis(80));
        assert_eq!(sessions.get(&a.0), Err("a@x".to_string()), "idle too long");
        let (c, ended) = sessions.start("c@x");
        assert!(c.is_some() && ended.is_empty());
        // Full again (b ended but is still held): the ended ones make room.
        let (d, ended) = sessions.start("d@x");
        assert!(d.is_some());
        assert_eq!(ended, vec!["b@x".to_string()]);
        assert_eq!(sessions.len(), 2);
        assert!(sessions.get("nope").unwrap().is_none());
        assert!(same_token("abc", "abc") && !same_token("abc", "abd") && !same_token("ab", "abc"));
    }
}
