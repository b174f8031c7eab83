//! The gate and the deposit on a simulated disk: what each origin logs, what a held mailbox
//! gets, and that a removal's exclusive hold waits for every writer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use store::{AppendRequest, Mailstore as _, NewMessage, StoreConfig};

use crate::{Copy, Deposit, Deposited, Gate, Origin};

/// Every event as one line.
#[derive(Default)]
struct Recorded(Mutex<Vec<String>>);

impl Recorded {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }

    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl telemetry::DeliveryEvents for Recorded {
    fn delivered_local(&self, id: u64, to: &str, folder: &str, uid: u32, _: Duration) {
        self.push(format!("delivered {id} {to} {folder} {uid}"));
    }
    fn delivered_handed_over(&self, origin: &str, to: &str, folder: &str, uid: u32, _: Duration) {
        self.push(format!("delivered {origin} {to} {folder} {uid}"));
    }
    fn delivered_remote(&self, id: u64, to: &str, relay: &str, _: Duration) {
        self.push(format!("delivered {id} {to} {relay}"));
    }
    fn deferred(&self, id: u64, to: &str, relay: &str, reply: &str, _: u64) {
        self.push(format!("deferred {id} {to} {relay} {reply}"));
    }
    fn bounced(&self, id: u64, to: &str, relay: &str, reply: &str) {
        self.push(format!("bounced {id} {to} {relay} {reply}"));
    }
    fn dsn(&self, id: u64, to: &str, uid: Option<u32>) {
        self.push(format!("dsn {id} {to} {uid:?}"));
    }
    fn dsn_queued(&self, id: u64, to: &str, dsn_id: u64) {
        self.push(format!("dsn {id} {to} queued {dsn_id}"));
    }
    fn dsn_deferred(&self, id: u64, to: &str, error: &store::StoreError) {
        self.push(format!("dsn_deferred {id} {to} {error}"));
    }
    fn queue_error(&self, id: u64, error: &queue::QueueError) {
        self.push(format!("queue_error {id} {error}"));
    }
    fn stopped(&self, error: &queue::QueueError) {
        self.push(format!("stopped {error}"));
    }
    fn paused_for_space(&self, paused: bool, why: &str) {
        self.push(format!("paused {paused} {why}"));
    }
    fn sieve_action(
        &self,
        copy: telemetry::SieveCopy<'_>,
        user: &str,
        action: &'static str,
        target: &str,
    ) {
        self.push(format!("sieve {copy:?} {user} {action} {target}"));
    }
    fn sieve_error(&self, copy: telemetry::SieveCopy<'_>, user: &str, error: &str) {
        self.push(format!("sieve_error {copy:?} {user} {error}"));
    }
}

fn store() -> Arc<store::Store> {
    let (store, _) = store::Store::open(
        Arc::new(disk::SimDisk::new()),
        std::path::Path::new("/store"),
        StoreConfig {
            volume_grow_bytes: 256 << 10,
            journal_checkpoint_bytes: 256 << 10,
            reservation_bytes: 0,
            ..StoreConfig::default()
        },
    )
    .unwrap();
    store
}

fn copy(user: &str, folder: &str, origin: Origin) -> Copy {
    Copy {
        append: AppendRequest {
            user: user.into(),
            folder: folder.into(),
            message: NewMessage {
                content: b"Subject: hi\r\n\r\nbody\r\n".to_vec(),
                ..NewMessage::default()
            },
        },
        origin,
        rules: None,
    }
}

#[test]
fn each_stored_copy_is_logged_by_its_origin_and_deliveries_are_counted() {
    let store = store();
    store.create_folder("a@x.test", "Sent").unwrap();
    let events = Arc::new(Recorded::default());
    let delivered = Arc::new(AtomicU64::new(0));
    let deposit = Deposit::new(
        store.clone(),
        Arc::new(Gate::single()),
        events.clone(),
        delivered.clone(),
    );
    let gate = deposit.gate().clone();
    let shared = gate.shared();
    let outcomes = deposit.deposit(
        &shared,
        vec![
            copy(
                "a@x.test",
                "INBOX",
                Origin::Queued {
                    queue_id: 7,
                    delay: Duration::ZERO,
                },
            ),
            copy(
                "a@x.test",
                "INBOX",
                Origin::HandedOver {
                    origin: "n2:9.1".into(),
                    key: Some([9; 16]),
                },
            ),
            copy("a@x.test", "INBOX", Origin::Notification { queue_id: 8 }),
            copy("a@x.test", "Sent", Origin::Own),
            // Refused by the store: no line, no count.
            copy("a@x.test", "NoSuchFolder", Origin::Own),
        ],
    );
    assert!(
        matches!(
            outcomes.as_slice(),
            [
                Deposited::Stored(_),
                Deposited::Stored(_),
                Deposited::Stored(_),
                Deposited::Stored(_),
                Deposited::Failed(_)
            ]
        ),
        "{outcomes:?}"
    );
    assert_eq!(
        events.lines(),
        [
            "delivered 7 a@x.test INBOX 1",
            "delivered n2:9.1 a@x.test INBOX 2",
            "dsn 8 a@x.test Some(3)",
        ]
    );
    assert_eq!(delivered.load(Ordering::Relaxed), 2);
    assert_eq!(store.status("a@x.test", "INBOX").unwrap().messages, 3);
    assert_eq!(store.status("a@x.test", "Sent").unwrap().messages, 1);
    // The handed-over copy's key went into the store with it.
    assert!(store.already_delivered(&[9; 16]));
    assert!(!store.already_delivered(&[8; 16]));
}

#[test]
fn a_frozen_mailbox_gets_nothing_until_it_thaws() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let directory = runtime
        .block_on(directory::Directory::open_at(
            &directory::Location::Sqlite(dir.path().join("directory.db")),
            directory::Options::default(),
        ))
        .unwrap();
    let store = store();
    let events = Arc::new(Recorded::default());
    let gate = Arc::new(Gate::cluster("n1".into(), directory));
    let deposit = Deposit::new(
        store.clone(),
        gate.clone(),
        events.clone(),
        Arc::new(AtomicU64::new(0)),
    );
    let queued = || {
        copy(
            "a@x.test",
            "INBOX",
            Origin::Queued {
                queue_id: 1,
                delay: Duration::ZERO,
            },
        )
    };
    gate.freeze("a@x.test");
    assert!(gate.held("a@x.test"));
    assert!(!gate.held("b@x.test"));
    let outcome = deposit.deposit(&gate.shared(), vec![queued()]);
    assert!(
        matches!(outcome.as_slice(), [Deposited::Held]),
        "{outcome:?}"
    );
    assert!(store.list_folders("a@x.test").is_empty());
    assert!(events.lines().is_empty());
    gate.thaw("a@x.test");
    let outcome = deposit.deposit(&gate.shared(), vec![queued()]);
    assert!(
        matches!(outcome.as_slice(), [Deposited::Stored(_)]),
        "{outcome:?}"
    );
    // A single node holds nothing.
    let single = Gate::single();
    single.freeze("a@x.test");
    assert!(!single.held("a@x.test"));
}

#[test]
fn the_exclusive_hold_waits_for_every_writer() {
    let gate = Arc::new(Gate::single());
    let shared = gate.shared();
    let taken = Arc::new(AtomicU64::new(0));
    let remover = {
        let (gate, taken) = (gate.clone(), taken.clone());
        std::thread::spawn(move || {
            let _exclusive = gate.exclusive();
            taken.store(1, Ordering::SeqCst);
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        taken.load(Ordering::SeqCst),
        0,
        "taken while a writer held it"
    );
    drop(shared);
    remover.join().unwrap();
    assert_eq!(taken.load(Ordering::SeqCst), 1);
}

#[test]
#[should_panic(expected = "another gate")]
fn a_deposit_under_a_foreign_gate_is_a_bug() {
    let deposit = Deposit::new(
        store(),
        Arc::new(Gate::single()),
        Arc::new(Recorded::default()),
        Arc::new(AtomicU64::new(0)),
    );
    let other = Gate::single();
    deposit.deposit(&other.shared(), Vec::new());
}
