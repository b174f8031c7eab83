//! `imap::Session` over a real `store::Store` on `disk::SimDisk` (docs/fuzzing.md).
//!
//! Input: a selector byte (bit 0 small limits and output chunks, bit 1 stay logged out), a
//! chunk-size byte, then client bytes. Flights separated by `\xff\xfe` alternate between two
//! sessions of the same user, so one sees the other's changes (EXISTS, EXPUNGE, FETCH
//! FLAGS). Both log in through the `Auth` event as a fresh user whose INBOX holds four
//! messages, under a quota small enough that APPEND, COPY and MOVE meet `NO [OVERQUOTA]`;
//! the user is deleted afterwards, so the one store of the process stays small.
//! Storage steps run at once, with the time fixed (`Event::Storage`, `Session::run`).
//! Checks: no panic, every reply ends a response (CRLF), nothing after Close, and the store
//! passes fsck after every input.
#![no_main]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use disk::SimDisk;
use imap::{AuthResult, Backend, Config, Event, Quotas, Session, Subscriptions};
use libfuzzer_sys::fuzz_target;
use mailstow_fuzz::{Split, assert_crlf_lines, flights};
use store::{AppendRequest, Mailstore, NewMessage, Store, StoreConfig};

/// A quota small enough that APPEND, COPY and MOVE reach it (`NO [OVERQUOTA]`).
struct SmallQuota;

impl Quotas for SmallQuota {
    fn quota(&self, _user: &str) -> store::Quota {
        store::Quota {
            bytes_max: Some(256 << 10),
            messages_max: Some(32),
        }
    }
}

#[derive(Default)]
struct MemorySubscriptions(Mutex<BTreeSet<(String, String)>>);

/// Special uses are accepted and forgotten: the session's side of CREATE (USE) is what is
/// fuzzed here.
struct NoSpecialUses;

impl imap::SpecialUses for NoSpecialUses {
    fn list(&self, _user: &str) -> Result<Vec<(String, String)>, String> {
        Ok(Vec::new())
    }
    fn set(&self, _user: &str, _mailbox: &str, _attributes: &[String]) -> Result<(), String> {
        Ok(())
    }
    fn renamed(&self, _user: &str, _from: &str, _to: &str) -> Result<(), String> {
        Ok(())
    }
}

impl Subscriptions for MemorySubscriptions {
    fn list(&self, user: &str) -> Result<Vec<String>, String> {
        let set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        Ok(set
            .iter()
            .filter(|(u, _)| u == user)
            .map(|(_, m)| m.clone())
            .collect())
    }
    fn set(&self, user: &str, mailbox: &str, subscribed: bool) -> Result<(), String> {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if subscribed {
            set.insert((user.to_string(), mailbox.to_string()));
        } else {
            set.remove(&(user.to_string(), mailbox.to_string()));
        }
        Ok(())
    }
}

struct World {
    store: Arc<Store>,
    subscriptions: MemorySubscriptions,
}

/// The time the sessions are given: fixed, so an input always does the same.
const NOW: i64 = 1_700_000_000;

/// One store per process: opening one per input would cost more than the session.
fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let config = StoreConfig {
            volume_grow_bytes: 256 << 10,
            journal_checkpoint_bytes: 256 << 10,
            reservation_bytes: 0,
            ..StoreConfig::default()
        };
        let store = Store::open(Arc::new(SimDisk::new()), Path::new("/store"), config)
            .expect("open the store")
            .0;
        World {
            store,
            subscriptions: MemorySubscriptions::default(),
        }
    })
}

const MESSAGES: [&[u8]; 4] = [
    b"From: Alice <alice@example.org>\r\nTo: bob@example.org\r\nSubject: one\r\nMessage-ID: <1@example.org>\r\nDate: Mon, 7 Feb 1994 21:52:25 -0800\r\n\r\nbody one\r\n",
    b"From: bob@example.org\r\nSubject: =?utf-8?q?caf=C3=A9?=\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\npart one\r\n--b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\nAAECAwQ=\r\n--b--\r\n",
    b"Subject: forwarded\r\nContent-Type: message/rfc822\r\n\r\nSubject: inner\r\nContent-Type: text/html\r\n\r\n<p>inner</p>\r\n",
    b"Subject: quoted\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nline=3D one=\r\n two\r\n",
];

fn config(selector: u8) -> Config {
    let mut config = Config {
        hostname: "imap.example".into(),
        plaintext_auth: true,
        ..Config::default()
    };
    if selector & 1 != 0 {
        config.line_bytes_max = 200;
        config.literal_bytes_max = 300;
        config.command_bytes_max = 600;
        config.nesting_depth_max = 6;
        config.errors_max = 5;
        config.append_messages_max = 3;
        config.output_chunk_bytes = 128;
        config.prelogin_line_bytes_max = 100;
        config.prelogin_literal_bytes_max = 30;
    }
    config
}

struct Client {
    session: Session,
    closed: bool,
}

impl Client {
    /// Polls until the session needs input; the password `secret` logs in as `user`. Like
    /// the server, it tells an idling session of changes (the other session may have made
    /// some).
    fn run(&mut self, world: &World, user: &str) {
        let backend = Backend {
            store: &*world.store,
            subscriptions: &world.subscriptions,
            special_uses: &NoSpecialUses,
            quotas: &SmallQuota,
            filing: &imap::NoFiling,
        };
        self.session.mail_changed();
        let mut polls = 0u32;
        while let Some(event) = self.session.poll() {
            polls += 1;
            assert!(polls < 1_000_000, "poll never returns None");
            assert!(!self.closed, "event after Close: {event:?}");
            match event {
                Event::Reply(bytes) => assert_crlf_end(&bytes),
                Event::Storage => self.session.run(&backend, NOW),
                Event::Auth { password, .. } => {
                    let result = match password.as_str() {
                        "secret" => AuthResult::Success {
                            user: user.to_string(),
                        },
                        "busy" => AuthResult::TooManySessions,
                        "down" => AuthResult::Temporary("directory\r\nunavailable".into()),
                        _ => AuthResult::BadCredentials,
                    };
                    self.session.auth_result(result);
                }
                Event::StartTls => self.session.tls_started(),
                // The session never sees the bytes compressed: grant it, and go on feeding.
                Event::Compress => self.session.compress_result(true),
                Event::Deflate => {}
                Event::Close => self.closed = true,
            }
        }
    }
}

/// A reply ends with a whole response; literals inside may hold any bytes.
fn assert_crlf_end(bytes: &[u8]) {
    assert!(!bytes.is_empty(), "an empty reply");
    assert!(
        bytes.ends_with(b"\r\n"),
        "a reply that does not end a response: {:?}",
        String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(200)..])
    );
    // The first line of a reply is a response or continuation line.
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    assert_crlf_lines(
        "IMAP first line",
        &bytes[..(first.len() + 1).min(bytes.len())],
    );
}

fuzz_target!(|data: &[u8]| {
    let [selector, chunk, input @ ..] = data else {
        return;
    };
    static USERS: AtomicU64 = AtomicU64::new(0);
    let n = USERS.fetch_add(1, Ordering::Relaxed);
    let user = format!("u{n}");
    let world = world();
    let requests = MESSAGES
        .iter()
        .enumerate()
        .map(|(i, content)| AppendRequest {
            user: user.clone(),
            folder: "INBOX".into(),
            message: NewMessage {
                content: content.to_vec(),
                internal_date: 760_690_345 + i as i64,
                ..NewMessage::default()
            },
        })
        .collect();
    for result in world.store.append_batch(requests) {
        result.expect("append");
    }

    let config = Arc::new(config(*selector));
    let mut clients: Vec<Client> = (0..2)
        .map(|_| Client {
            session: Session::new(config.clone(), false),
            closed: false,
        })
        .collect();
    for client in &mut clients {
        client.run(world, &user);
        if selector & 2 == 0 {
            client.session.feed(b"l LOGIN fuzz secret\r\n");
            client.run(world, &user);
        }
    }
    let split = Split::Chunks(usize::from(*chunk) + 1);
    for (i, flight) in flights(input).into_iter().enumerate() {
        let client = &mut clients[i % 2];
        for piece in split.pieces(flight) {
            if client.closed {
                break;
            }
            client.session.feed(piece);
            client.run(world, &user);
        }
        // The other session hears of the changes (in IDLE at once, else with its next
        // command).
        clients[(i + 1) % 2].run(world, &user);
    }
    for client in &mut clients {
        if client.closed {
            client.session.feed(b"x NOOP\r\n");
            assert!(client.session.poll().is_none(), "an event after Close");
        }
    }
    drop(clients);
    world.store.delete_user(&user).expect("delete the user");
    world
        .subscriptions
        .0
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|(u, _)| *u != user);
    // With every user deleted the store is nearly empty, so checking all of it is cheap, and
    // a problem is always this input's.
    let report = world.store.fsck(false, &mut |_, _| {}).expect("fsck");
    assert!(report.is_clean(), "fsck after input {n}: {report}");
});
