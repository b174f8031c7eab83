//! Golden transcripts. Each test feeds client lines and compares the server's bytes exactly
//! (UIDVALIDITY is normalised to `V`, dates to what the messages carry). A test written with
//! [`transcript!`] runs twice: over the real store on a simulated disk, and over the
//! in-memory [`Mailstore`] of `memory.rs`, so the session depends on nothing but the trait's
//! contract.

/// A transcript test run on both backends: `<name>::real_store` and `<name>::in_memory`.
macro_rules! transcript {
    ($(#[doc = $doc:literal])* fn $name:ident() $body:block) => {
        $(#[doc = $doc])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[test]
            fn real_store() {
                crate::tests::on_backend(crate::tests::Kind::Real, || $body)
            }

            #[test]
            fn in_memory() {
                crate::tests::on_backend(crate::tests::Kind::Memory, || $body)
            }
        }
    };
}

mod catenate;
mod commands;
mod compliance;
mod fetch;
mod limits;
mod memory;
mod quota;
mod updates;

use std::cell::Cell;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use disk::SimDisk;
use mail_model::{Appended, NewMessage, StoreError};
use store::StoreConfig;

use crate::{AuthResult, Backend, Config, Event, Mailstore, Quotas, Session, Subscriptions};

/// Which [`Mailstore`] [`new_store`] gives on this test's thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Real,
    Memory,
}

thread_local! {
    static KIND: Cell<Kind> = const { Cell::new(Kind::Real) };
}

pub(crate) fn on_backend(kind: Kind, test: impl FnOnce()) {
    KIND.set(kind);
    test();
}

/// A store a transcript runs on, shared by its clients.
pub(crate) type Store = Arc<dyn Mailstore>;

/// What a test does to a store besides what sessions do: deliver mail.
pub(crate) trait Deliver {
    fn append(&self, user: &str, folder: &str, message: NewMessage)
    -> Result<Appended, StoreError>;
}

impl Deliver for dyn Mailstore {
    fn append(
        &self,
        user: &str,
        folder: &str,
        message: NewMessage,
    ) -> Result<Appended, StoreError> {
        let request = mail_model::AppendRequest {
            user: user.to_string(),
            folder: folder.to_string(),
            message,
        };
        self.append_batch(vec![request])
            .pop()
            .expect("one result per request")
    }
}

/// Subscriptions and special-use attributes, as the directory keeps them.
#[derive(Default)]
pub(crate) struct MemorySubscriptions(
    Mutex<BTreeSet<(String, String)>>,
    Mutex<BTreeSet<(String, String, String)>>,
);

impl crate::SpecialUses for MemorySubscriptions {
    fn list(&self, user: &str) -> Result<Vec<(String, String)>, String> {
        Ok(self
            .1
            .lock()
            .unwrap()
            .iter()
            .filter(|(u, _, _)| u == user)
            .map(|(_, m, a)| (m.clone(), a.clone()))
            .collect())
    }
    fn set(&self, user: &str, mailbox: &str, attributes: &[String]) -> Result<(), String> {
        let mut set = self.1.lock().unwrap();
        set.retain(|(u, m, _)| !(u == user && m == mailbox));
        for a in attributes {
            set.insert((user.to_string(), mailbox.to_string(), a.clone()));
        }
        Ok(())
    }
    fn renamed(&self, user: &str, from: &str, to: &str) -> Result<(), String> {
        let mut set = self.1.lock().unwrap();
        let moved: Vec<_> = set
            .iter()
            .filter(|(u, m, _)| u == user && (m == from || m.starts_with(&format!("{from}/"))))
            .cloned()
            .collect();
        for (u, m, a) in moved {
            set.remove(&(u.clone(), m.clone(), a.clone()));
            set.insert((u, format!("{to}{}", &m[from.len()..]), a));
        }
        Ok(())
    }
}

impl Subscriptions for MemorySubscriptions {
    fn list(&self, user: &str) -> Result<Vec<String>, String> {
        Ok(self
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|(u, _)| u == user)
            .map(|(_, m)| m.clone())
            .collect())
    }
    fn set(&self, user: &str, mailbox: &str, subscribed: bool) -> Result<(), String> {
        let mut set = self.0.lock().unwrap();
        if subscribed {
            set.insert((user.to_string(), mailbox.to_string()));
        } else {
            set.remove(&(user.to_string(), mailbox.to_string()));
        }
        Ok(())
    }
}

/// Each user's limits, as a test sets them.
#[derive(Default)]
pub(crate) struct MemoryQuotas(Mutex<std::collections::HashMap<String, mail_model::Quota>>);

impl MemoryQuotas {
    pub(crate) fn set(&self, user: &str, quota: mail_model::Quota) {
        self.0.lock().unwrap().insert(user.to_string(), quota);
    }
}

impl Quotas for MemoryQuotas {
    fn quota(&self, user: &str) -> mail_model::Quota {
        self.0
            .lock()
            .unwrap()
            .get(user)
            .copied()
            .unwrap_or_default()
    }
}

/// A new, empty store of the kind this test runs on.
pub(crate) fn new_store() -> Store {
    match KIND.get() {
        Kind::Real => real_store(StoreConfig::default()),
        Kind::Memory => Arc::new(memory::MemoryStore::default()),
    }
}

/// The real store on a simulated disk, with `config`'s limits (sized down for tests).
pub(crate) fn real_store(config: StoreConfig) -> Store {
    let config = StoreConfig {
        volume_grow_bytes: 256 << 10,
        journal_checkpoint_bytes: 256 << 10,
        reservation_bytes: 0,
        ..config
    };
    store::Store::open(Arc::new(SimDisk::new()), Path::new("/store"), config)
        .expect("open store")
        .0
}

pub(crate) fn test_config() -> Config {
    Config {
        hostname: "test.example".into(),
        plaintext_auth: true,
        ..Config::default()
    }
}

/// A client connection: a session, the shared store, and what came out.
pub(crate) struct Client {
    pub(crate) session: Session,
    pub(crate) store: Store,
    pub(crate) subs: Arc<MemorySubscriptions>,
    pub(crate) quotas: Arc<MemoryQuotas>,
    pub(crate) closed: bool,
    pub(crate) starttls: bool,
    pub(crate) compressed: bool,
    /// The shell's answer to COMPRESS: refused (too many compressed connections).
    pub(crate) compress_refused: bool,
    /// The time this shell passes to `Session::run`; the clock's when `None`.
    pub(crate) now: Option<i64>,
    /// `Event::Storage` steps run so far.
    pub(crate) storage_steps: usize,
}

impl Client {
    pub(crate) fn new(store: &Store, config: Config) -> Client {
        Client {
            session: Session::new(Arc::new(config), false),
            store: store.clone(),
            subs: Arc::new(MemorySubscriptions::default()),
            quotas: Arc::new(MemoryQuotas::default()),
            closed: false,
            starttls: false,
            compressed: false,
            compress_refused: false,
            now: None,
            storage_steps: 0,
        }
    }

    /// Runs the session until it needs input; the password `secret` logs in as the user
    /// named. Like the server, this shell tells an idling session of changes to its mail:
    /// any other client's may have made one.
    pub(crate) fn run(&mut self) -> String {
        let mut out = Vec::new();
        self.session.mail_changed();
        while let Some(event) = self.session.poll() {
            match event {
                Event::Reply(bytes) => out.extend_from_slice(&bytes),
                Event::Storage => {
                    let backend = Backend {
                        store: &*self.store,
                        subscriptions: &*self.subs,
                        special_uses: &*self.subs,
                        quotas: &*self.quotas,
                        filing: &crate::NoFiling,
                    };
                    self.storage_steps += 1;
                    self.session
                        .run(&backend, self.now.unwrap_or_else(unix_now));
                }
                Event::Auth {
                    username, password, ..
                } => {
                    let result = match password.as_str() {
                        "secret" => AuthResult::Success { user: username },
                        "busy" => AuthResult::TooManySessions,
                        "down" => AuthResult::Temporary("directory\r\nunavailable".into()),
                        _ => AuthResult::BadCredentials,
                    };
                    self.session.auth_result(result);
                }
                Event::StartTls => {
                    self.starttls = true;
                    self.session.tls_started();
                }
                Event::Compress => self.session.compress_result(!self.compress_refused),
                Event::Deflate => self.compressed = true,
                Event::Close => self.closed = true,
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Hibernates the session and wakes it again, as the shell's parking lot does; false
    /// (and the session untouched) when it may not hibernate.
    pub(crate) fn hibernate_and_wake(&mut self) -> bool {
        let placeholder = Session::new(Arc::new(test_config()), false);
        match std::mem::replace(&mut self.session, placeholder).hibernate() {
            Ok(hibernated) => {
                self.session = hibernated.wake();
                true
            }
            Err(session) => {
                self.session = session;
                false
            }
        }
    }

    /// Sends `input` whole and returns the output, with UIDVALIDITY values replaced by `V`.
    pub(crate) fn send(&mut self, input: &str) -> String {
        self.send_bytes(input.as_bytes())
    }

    pub(crate) fn send_bytes(&mut self, input: &[u8]) -> String {
        self.session.feed(input);
        normalise(&self.run())
    }

    /// Sends `input` one byte at a time.
    pub(crate) fn send_bytewise(&mut self, input: &str) -> String {
        let mut out = String::new();
        for b in input.as_bytes() {
            self.session.feed(std::slice::from_ref(b));
            out.push_str(&self.run());
        }
        normalise(&out)
    }

    pub(crate) fn greeting(&mut self) -> String {
        normalise(&self.run())
    }

    /// Greeted and logged in as `user`, INBOX selected if `select`.
    pub(crate) fn login(store: &Store, user: &str) -> Client {
        let mut c = Client::new(store, test_config());
        c.greeting();
        let out = c.send(&format!("l LOGIN {user} secret\r\n"));
        assert!(out.contains("l OK"), "{out}");
        c
    }
}

/// The time a shell passes to `Session::run`.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Replaces the number after `UIDVALIDITY ` (and in APPENDUID/COPYUID) with `V`.
pub(crate) fn normalise(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let keys = ["UIDVALIDITY ", "APPENDUID ", "COPYUID "];
    loop {
        let next = keys
            .iter()
            .filter_map(|k| rest.find(k).map(|i| (i, k.len())))
            .min();
        let Some((i, len)) = next else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..i + len]);
        rest = &rest[i + len..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            out.push('V');
        }
        rest = &rest[digits..];
    }
}

pub(crate) fn message(subject: &str, body: &str) -> NewMessage {
    NewMessage {
        content: format!(
            "From: Alice <alice@example.org>\r\nTo: bob@example.org\r\nSubject: {subject}\r\nMessage-ID: <{subject}@example.org>\r\nDate: Mon, 7 Feb 1994 21:52:25 -0800\r\n\r\n{body}"
        )
        .into_bytes(),
        internal_date: 760_690_345,
        ..NewMessage::default()
    }
}

/// Delivers `n` messages to the user's INBOX the way delivery does.
pub(crate) fn deliver(store: &Store, user: &str, n: usize) {
    for i in 1..=n {
        store
            .append(
                user,
                "INBOX",
                message(&format!("m{i}"), &format!("body {i}\r\n")),
            )
            .unwrap();
    }
}
