//! The last successful login of each user (`users.last_login_at`), for `mailstow user list`.
//!
//! A login must never wait for this: [`Directory::note_login`] decides in memory whether the
//! user's time is due to be written (at most once per [`LOGIN_WRITE_INTERVAL`]) and, if so,
//! hands the one-row UPDATE to a task. The write does not bump the generation, so the cache
//! does not reload for it. The memory is bounded: past [`USERS_REMEMBERED_MAX`] users, entries
//! older than the interval are swept, and if none is, the login is not recorded.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::Directory;

/// A user's last login is written at most this often: a client that reconnects every few
/// seconds costs one write a minute.
pub(crate) const LOGIN_WRITE_INTERVAL: Duration = Duration::from_secs(60);

/// Users whose last write time is remembered.
const USERS_REMEMBERED_MAX: usize = 100_000;

/// When each user's last login was last written.
#[derive(Default)]
pub(crate) struct LastLogins {
    written: Mutex<HashMap<String, Instant>>,
}

impl LastLogins {
    /// Whether a login of `user` at `now` should be written; if so, it counts as written.
    fn due(&self, user: &str, now: Instant) -> bool {
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = written.get(user)
            && now.duration_since(*at) < LOGIN_WRITE_INTERVAL
        {
            return false;
        }
        if written.len() >= USERS_REMEMBERED_MAX && !written.contains_key(user) {
            written.retain(|_, at| now.duration_since(*at) < LOGIN_WRITE_INTERVAL);
            if written.len() >= USERS_REMEMBERED_MAX {
                return false;
            }
        }
        written.insert(user.to_string(), now);
        true
    }
}

impl Directory {
    /// Records that `user` (a canonical address, as [`Directory::authenticate`] returns it)
    /// just logged in. Returns at once: the write, when due, runs on a task of the current
    /// tokio runtime (none: nothing is recorded), and a failure is only logged.
    pub fn note_login(&self, user: &str) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !self.inner.last_logins.due(user, Instant::now()) {
            return;
        }
        let pool = self.inner.pool.clone();
        let user = user.to_string();
        let at = crate::admin::unix_now_s();
        runtime.spawn(async move {
            let written = sqlx::query("UPDATE users SET last_login_at = $1 WHERE address = $2")
                .bind(at)
                .bind(&user)
                .execute(&pool)
                .await;
            if let Err(error) = written {
                tracing::warn!(%error, user, "recording the last login failed");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_is_written_at_most_once_per_interval() {
        let logins = LastLogins::default();
        let start = Instant::now();
        assert!(logins.due("a@x", start));
        assert!(!logins.due("a@x", start + Duration::from_secs(59)));
        assert!(logins.due("b@x", start + Duration::from_secs(1)));
        assert!(logins.due("a@x", start + LOGIN_WRITE_INTERVAL));
    }

    #[test]
    fn memory_is_bounded() {
        let logins = LastLogins::default();
        let start = Instant::now();
        for i in 0..USERS_REMEMBERED_MAX {
            assert!(logins.due(&format!("u{i}@x"), start));
        }
        // Full of recent writes: a new user is not recorded.
        assert!(!logins.due("new@x", start + Duration::from_secs(1)));
        // Once they are old, they are swept.
        assert!(logins.due("new@x", start + LOGIN_WRITE_INTERVAL));
        assert_eq!(
            logins.written.lock().unwrap().len(),
            1,
            "the old entries went"
        );
    }
}
