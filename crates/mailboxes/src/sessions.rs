//! Who is logged in: every authenticated session of every protocol holds a [`Membership`] of
//! its user. Through it IMAP sessions in IDLE wake when the store commits a change to their
//! user's folders, the per-user IMAP session limit is kept, and deleting, renaming or moving
//! a user ends all of its sessions ([`Sessions::revoke`]) and waits until they are gone before
//! its mail is removed or moved.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

/// Which protocol a session speaks, for the per-protocol limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Imap,
    Pop3,
    Submission,
    /// A web browser following its mailbox (`/events`).
    Web,
    /// A ManageSieve client editing the user's Sieve scripts.
    ManageSieve,
}

/// Called with a user's name after its sessions were told of a change or a revocation, for
/// sessions that wait outside their tasks (the server's parking lot).
pub type Waker = Arc<dyn Fn(&str) + Send + Sync>;

/// Why a user's sessions are ended ([`Sessions::revoke`]): each protocol tells its client in
/// its own words, and only a move asks the client to come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The user was deleted or renamed: the account is gone.
    Removed,
    /// The mailbox is being moved to another node (docs/cluster.md, "Moving a user"): a
    /// reconnect a moment later reaches it (IMAP `BYE [UNAVAILABLE]`, RFC 5530 3).
    Moving,
}

/// Logged-in users: their sessions, a change counter IDLE waits on, and a revocation flag.
#[derive(Clone)]
pub struct Sessions(Arc<SessionsInner>);

struct SessionsInner {
    imap_sessions_max: usize,
    map: Mutex<HashMap<String, UserEntry>>,
    /// Wakes sessions parked in IDLE when their user's mail changes or the user is revoked.
    waker: Waker,
}

struct UserEntry {
    name: Arc<str>,
    imap_sessions: usize,
    sessions: usize,
    changed: watch::Sender<u64>,
    /// Set by `revoke`, with why: every session of the user ends, and none may start until
    /// the deletion or move is over (`Revocation` dropped).
    revoked: watch::Sender<Option<Ending>>,
    /// The number of sessions, for `revoke` to wait on.
    count: watch::Sender<usize>,
}

/// Why a login could not join its user's sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The user has `imap_sessions_per_user_max` IMAP sessions already.
    TooManySessions,
    /// The user is being deleted or renamed.
    Revoked,
}

/// One session's place among its user's sessions; leaves on drop.
pub struct Membership {
    sessions: Sessions,
    /// Shared with the user's entry: thousands of sessions of few users cost no copies.
    user: Arc<str>,
    protocol: Protocol,
    /// Bumped after every committed change to the user's folders.
    pub changes: watch::Receiver<u64>,
    /// Turns `Some` when the user is deleted, renamed or moved, saying which.
    pub revoked: watch::Receiver<Option<Ending>>,
}

impl Membership {
    /// The user this session is logged in as.
    pub fn user(&self) -> &str {
        &self.user
    }
}

/// A user being deleted: no session may join until this is dropped.
pub struct Revocation {
    sessions: Sessions,
    user: String,
}

impl Sessions {
    /// At most `imap_sessions_max` IMAP sessions per user; `waker` is told of every user
    /// whose sessions were signalled.
    pub fn new(imap_sessions_max: usize, waker: Waker) -> Sessions {
        Sessions(Arc::new(SessionsInner {
            imap_sessions_max,
            map: Mutex::new(HashMap::new()),
            waker,
        }))
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, UserEntry>> {
        self.0.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry<'a>(map: &'a mut HashMap<String, UserEntry>, user: &str) -> &'a mut UserEntry {
        map.entry(user.to_string()).or_insert_with(|| UserEntry {
            name: Arc::from(user),
            imap_sessions: 0,
            sessions: 0,
            changed: watch::channel(0).0,
            revoked: watch::channel(None).0,
            count: watch::channel(0).0,
        })
    }

    /// Called by the store after every committed change to `user`'s folders.
    pub fn changed(&self, user: &str) {
        if let Some(entry) = self.map().get(user) {
            entry.changed.send_modify(|n| *n = n.wrapping_add(1));
        }
        // After the signal, so a session on its way into the lot sees one or the other.
        (self.0.waker)(user);
    }

    /// A session of `user` logged in with `protocol`.
    pub fn enter(&self, user: &str, protocol: Protocol) -> Result<Membership, Refused> {
        let mut map = self.map();
        let entry = Sessions::entry(&mut map, user);
        if entry.revoked.borrow().is_some() {
            return Err(Refused::Revoked);
        }
        if protocol == Protocol::Imap {
            if entry.imap_sessions >= self.0.imap_sessions_max {
                return Err(Refused::TooManySessions);
            }
            entry.imap_sessions += 1;
        }
        entry.sessions += 1;
        entry.count.send_replace(entry.sessions);
        Ok(Membership {
            sessions: self.clone(),
            user: entry.name.clone(),
            protocol,
            changes: entry.changed.subscribe(),
            revoked: entry.revoked.subscribe(),
        })
    }

    /// Ends every session of `user` (each tells its client `why` and closes) and refuses new
    /// ones until the returned `Revocation` is dropped. Waits up to `wait` for the sessions to
    /// be gone; false if some were still there.
    pub async fn revoke(&self, user: &str, why: Ending, wait: Duration) -> (Revocation, bool) {
        let mut count = {
            let mut map = self.map();
            let entry = Sessions::entry(&mut map, user);
            entry.revoked.send_replace(Some(why));
            entry.count.subscribe()
        };
        (self.0.waker)(user);
        let revocation = Revocation {
            sessions: self.clone(),
            user: user.to_string(),
        };
        let gone = tokio::time::timeout(wait, count.wait_for(|n| *n == 0))
            .await
            .is_ok_and(|r| r.is_ok());
        (revocation, gone)
    }

    /// Sessions of `user` now, all protocols.
    pub fn sessions(&self, user: &str) -> usize {
        self.map().get(user).map_or(0, |e| e.sessions)
    }

    fn forget_if_unused(map: &mut HashMap<String, UserEntry>, user: &str) {
        if let Some(entry) = map.get(user)
            && entry.sessions == 0
            && entry.revoked.borrow().is_none()
        {
            map.remove(user);
        }
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        let mut map = self.sessions.map();
        if let Some(entry) = map.get_mut(&*self.user) {
            if self.protocol == Protocol::Imap {
                entry.imap_sessions = entry.imap_sessions.saturating_sub(1);
            }
            entry.sessions = entry.sessions.saturating_sub(1);
            entry.count.send_replace(entry.sessions);
        }
        Sessions::forget_if_unused(&mut map, &self.user);
    }
}

impl Drop for Revocation {
    fn drop(&mut self) {
        let mut map = self.sessions.map();
        if let Some(entry) = map.get_mut(&self.user) {
            entry.revoked.send_replace(None);
        }
        Sessions::forget_if_unused(&mut map, &self.user);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn imap_sessions_are_limited_and_revocation_waits_for_every_session() {
        let users = Sessions::new(2, Arc::new(|_: &str| {}));
        let a = users.enter("u", Protocol::Imap).unwrap();
        let _b = users.enter("u", Protocol::Imap).unwrap();
        assert_eq!(
            users.enter("u", Protocol::Imap).err(),
            Some(Refused::TooManySessions)
        );
        let pop = users.enter("u", Protocol::Pop3).unwrap();
        assert_eq!(users.sessions("u"), 3);

        let mut revoked = a.revoked.clone();
        let users2 = users.clone();
        let revoking = tokio::spawn(async move {
            let (revocation, gone) = users2
                .revoke("u", Ending::Moving, Duration::from_secs(5))
                .await;
            (revocation, gone)
        });
        revoked.wait_for(|r| r.is_some()).await.unwrap();
        assert_eq!(
            *revoked.borrow(),
            Some(Ending::Moving),
            "the session is told why"
        );
        assert_eq!(
            users.enter("u", Protocol::Submission).err(),
            Some(Refused::Revoked)
        );
        drop(a);
        drop(pop);
        assert!(!revoking.is_finished() || users.sessions("u") == 0);
        drop(_b);
        let (revocation, gone) = revoking.await.unwrap();
        assert!(gone);
        assert!(users.enter("u", Protocol::Imap).is_err());
        drop(revocation);
        assert!(users.enter("u", Protocol::Imap).is_ok());
    }

    #[tokio::test]
    async fn revocation_gives_up_waiting_after_its_time() {
        let users = Sessions::new(2, Arc::new(|_: &str| {}));
        let _held = users.enter("u", Protocol::Imap).unwrap();
        let (_revocation, gone) = users
            .revoke("u", Ending::Removed, Duration::from_millis(50))
            .await;
        assert!(!gone);
    }
}
