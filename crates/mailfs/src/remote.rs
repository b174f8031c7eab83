//! One account as the engine sees it: a folder of named messages with envelope bodies.
//!
//! The engine talks to accounts only through [`Remote`], so the crash protocol, placement
//! and failover are tested against an in-memory account that can be stopped and tampered
//! with; [`crate::imap_remote::ImapRemote`] is the real one.

use thiserror::Error;

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum RemoteError {
    /// The account does not answer (connection refused or lost, timeout): fail over.
    #[error("account unavailable: {0}")]
    Unavailable(String),
    /// The server answered but refused (NO/BAD, over quota): not a reason to fail over.
    #[error("server refused: {0}")]
    Refused(String),
}

pub trait Remote: Send + Sync {
    /// Who this is, for logs and CLI output (never the password).
    fn describe(&self) -> String;
    /// Creates the folder if it does not exist.
    fn prepare(&self) -> Result<(), RemoteError>;
    /// Appends one message per `(name, envelope)`; returns each UID when the server says it.
    fn append(&self, batch: &[(String, &[u8])]) -> Result<Vec<Option<u32>>, RemoteError>;
    /// The envelope of `uid`, or None if there is no such message.
    fn fetch(&self, uid: u32) -> Result<Option<Vec<u8>>, RemoteError>;
    /// Bytes `start..start + len` of the envelope of `uid` (fewer at its end), or None if
    /// there is no such message. By default the whole envelope, cut here; an IMAP account
    /// asks for the range alone (partial FETCH, RFC 3501 6.4.5 `<origin.length>`).
    fn fetch_range(
        &self,
        uid: u32,
        start: usize,
        len: usize,
    ) -> Result<Option<Vec<u8>>, RemoteError> {
        Ok(self.fetch(uid)?.map(|e| {
            let from = start.min(e.len());
            e[from..(from + len).min(e.len())].to_vec()
        }))
    }
    /// Every message's name: (uid, name). Foreign messages come back with their own names.
    fn list(&self) -> Result<Vec<(u32, String)>, RemoteError>;
    /// UIDs whose name contains `name` (a SEARCH, for messages another mount wrote).
    fn find(&self, name: &str) -> Result<Vec<u32>, RemoteError>;
    /// Removes exactly these UIDs (UID EXPUNGE; never a bare EXPUNGE, M4).
    fn expunge(&self, uids: &[u32]) -> Result<(), RemoteError>;
    /// (used, limit) bytes when the server reports a quota.
    fn quota(&self) -> Result<Option<(u64, u64)>, RemoteError>;
    /// A keepalive (NOOP) that fails when the account is gone.
    fn ping(&self) -> Result<(), RemoteError>;
}

#[cfg(test)]
pub(crate) mod mem {
    //! An in-memory account for the engine's unit tests: it can be stopped and tampered with.

    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

    use super::{Remote, RemoteError};
    use crate::locking::MutexExt;

    #[derive(Default)]
    pub(crate) struct MemRemote {
        pub(crate) messages: Mutex<BTreeMap<u32, (String, Vec<u8>)>>,
        next_uid: AtomicU32,
        pub(crate) stopped: AtomicBool,
        pub(crate) name: String,
        /// Appends accepted before the account "dies" (a crash point for tests); negative
        /// means unlimited.
        pub(crate) appends_left: std::sync::atomic::AtomicI64,
        /// Each APPEND takes this long (widens race windows in tests).
        pub(crate) append_delay_us: std::sync::atomic::AtomicU64,
        /// APPEND commands taken (a MULTIAPPEND counts once).
        pub(crate) append_commands: std::sync::atomic::AtomicU64,
        /// Each FETCH takes this long (a slow or hung member, for hedged reads).
        pub(crate) fetch_delay_us: std::sync::atomic::AtomicU64,
    }

    impl MemRemote {
        pub(crate) fn new(name: &str) -> MemRemote {
            MemRemote {
                next_uid: AtomicU32::new(1),
                name: name.into(),
                appends_left: std::sync::atomic::AtomicI64::new(-1),
                ..Default::default()
            }
        }

        fn alive(&self) -> Result<(), RemoteError> {
            if self.stopped.load(Ordering::SeqCst) {
                Err(RemoteError::Unavailable(format!("{} stopped", self.name)))
            } else {
                Ok(())
            }
        }

        /// A third party's APPEND.
        pub(crate) fn inject(&self, name: &str, body: Vec<u8>) -> u32 {
            let uid = self.next_uid.fetch_add(1, Ordering::SeqCst);
            self.messages
                .lock_or_panic()
                .insert(uid, (name.to_string(), body));
            uid
        }
    }

    impl Remote for MemRemote {
        fn describe(&self) -> String {
            self.name.clone()
        }
        fn prepare(&self) -> Result<(), RemoteError> {
            self.alive()
        }
        fn append(&self, batch: &[(String, &[u8])]) -> Result<Vec<Option<u32>>, RemoteError> {
            self.alive()?;
            let left = self.appends_left.load(Ordering::SeqCst);
            if left == 0 {
                self.stopped.store(true, Ordering::SeqCst);
                return Err(RemoteError::Unavailable(format!("{} crashed", self.name)));
            }
            if left > 0 {
                self.appends_left.fetch_sub(1, Ordering::SeqCst);
            }
            self.append_commands.fetch_add(1, Ordering::SeqCst);
            let delay = self.append_delay_us.load(Ordering::SeqCst);
            if delay > 0 {
                std::thread::sleep(std::time::Duration::from_micros(delay));
            }
            Ok(batch
                .iter()
                .map(|(n, b)| Some(self.inject(n, b.to_vec())))
                .collect())
        }
        fn fetch(&self, uid: u32) -> Result<Option<Vec<u8>>, RemoteError> {
            self.alive()?;
            let delay = self.fetch_delay_us.load(Ordering::SeqCst);
            if delay > 0 {
                std::thread::sleep(std::time::Duration::from_micros(delay));
            }
            Ok(self
                .messages
                .lock_or_panic()
                .get(&uid)
                .map(|(_, b)| b.clone()))
        }
        fn list(&self) -> Result<Vec<(u32, String)>, RemoteError> {
            self.alive()?;
            Ok(self
                .messages
                .lock_or_panic()
                .iter()
                .map(|(u, (n, _))| (*u, n.clone()))
                .collect())
        }
        fn find(&self, name: &str) -> Result<Vec<u32>, RemoteError> {
            self.alive()?;
            Ok(self
                .messages
                .lock_or_panic()
                .iter()
                .filter(|(_, (n, _))| n.contains(name))
                .map(|(u, _)| *u)
                .collect())
        }
        fn expunge(&self, uids: &[u32]) -> Result<(), RemoteError> {
            self.alive()?;
            let mut m = self.messages.lock_or_panic();
            for u in uids {
                m.remove(u);
            }
            Ok(())
        }
        fn quota(&self) -> Result<Option<(u64, u64)>, RemoteError> {
            self.alive()?;
            let used = self
                .messages
                .lock_or_panic()
                .values()
                .map(|(_, b)| b.len() as u64)
                .sum();
            Ok(Some((used, 1 << 40)))
        }
        fn ping(&self) -> Result<(), RemoteError> {
            self.alive()
        }
    }
}
