//! The real engines on a mirrored disk: the replica's copy, opened by the engines' own
//! recovery while the owner still runs, holds every acknowledged change with the same UIDs,
//! UIDVALIDITY, MODSEQs, flags and queue ids (docs/replication.md, R1).

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use disk::{Disk, RealDisk};
use replication::{Admission, Mirror, MirrorConfig, Receiver, ReceiverConfig, Registry};
use store::{FlagOp, Flags, Mailstore, NewMessage, Store, StoreConfig};

struct Directory;

impl Registry for Directory {
    fn record(&self, _epoch: u64, _replica: Option<&str>) -> Result<(), String> {
        Ok(())
    }
}

struct Anyone;

impl Admission for Anyone {
    fn admit(&self, _node: &str, _epoch: u64) -> Result<(), String> {
        Ok(())
    }
}

fn message(i: usize) -> NewMessage {
    NewMessage {
        flags: Flags::EMPTY,
        keywords: vec![],
        internal_date: 1_700_000_000 + i as i64,
        content: format!(
            "From: a@example.org\r\nSubject: message {i}\r\n\r\n{}\r\n",
            "body ".repeat(i % 300)
        )
        .into_bytes(),
    }
}

fn folders(store: &Store, user: &str) -> Vec<String> {
    store.list_folders(user)
}

/// Everything a client could see of a user, content included.
fn view(store: &Store, user: &str) -> Vec<String> {
    let mut out = Vec::new();
    for folder in folders(store, user) {
        let (status, messages) = store.shared_view(user, &folder).unwrap();
        out.push(format!("{folder} {status:?}"));
        for m in messages.iter() {
            let content = store.read(user, &folder, m.uid).unwrap();
            out.push(format!(
                "{folder} {} {:?} {:?} {} {}",
                m.uid,
                m.flags,
                m.keywords,
                m.modseq,
                blake3::hash(&content)
            ));
        }
    }
    out
}

#[test]
fn the_replica_opens_as_the_same_store_and_queue() {
    let own = tempfile::tempdir().unwrap();
    let rep = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(
        TcpListener::bind("127.0.0.1:0").unwrap(),
        ReceiverConfig::new([3; 32], rep.path().join("replicas")),
        Arc::new(RealDisk),
        Arc::new(Anyone),
    )
    .unwrap();
    let mut config = MirrorConfig::new("n1", [3; 32], own.path());
    config.copy_bytes_per_s = 1 << 30;
    let (mirror, disk) = Mirror::new(config, Arc::new(RealDisk), Box::new(Directory)).unwrap();
    // Some of the store exists before the partner does: the full copy carries it.
    let store_dir = own.path().join("store");
    let queue_dir = own.path().join("queue");
    std::fs::create_dir_all(&store_dir).unwrap();
    std::fs::create_dir_all(&queue_dir).unwrap();
    let (store, _) = Store::open(disk.clone(), &store_dir, StoreConfig::default()).unwrap();
    for i in 0..20 {
        store.append("alice", "INBOX", message(i)).unwrap();
    }
    mirror.set_partner(Some(("n2", &receiver.local_addr().to_string())));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !mirror.status().recorded {
        assert!(
            Instant::now() < deadline,
            "never in sync: {:?}",
            mirror.status()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // In sync: every change from here on is on the replica when it returns.
    let (queue, _) =
        queue::Queue::open(disk.clone(), &queue_dir, queue::QueueConfig::default()).unwrap();
    let mut queued = Vec::new();
    for i in 0..50 {
        let envelope = queue::Envelope {
            sender: "a@example.org".into(),
            recipients: vec![queue::Recipient {
                address: format!("r{i}@example.net"),
                status: queue::RecipientStatus::Pending,
                last_error: None,
            }],
            arrival_ms: 1_700_000_000_000,
        };
        queued.push(queue.enqueue(envelope, message(i).content).unwrap());
    }
    store.create_folder("alice", "Archive").unwrap();
    for i in 20..300 {
        let user = ["alice", "bob", "carol"][i % 3];
        store.append(user, "INBOX", message(i)).unwrap();
        if i % 7 == 0 {
            store.append("alice", "Archive", message(i)).unwrap();
        }
    }
    store
        .set_flags(
            "alice",
            "INBOX",
            &[2, 3, 5, 8],
            FlagOp::Add,
            Flags::SEEN,
            &["$Work".into()],
        )
        .unwrap();
    store.expunge("bob", "INBOX", &[1, 2, 3, 50]).unwrap();
    store.rename_folder("alice", "Archive", "Old").unwrap();
    store.checkpoint().unwrap();
    for i in 300..340 {
        store.append("carol", "INBOX", message(i)).unwrap();
    }
    store.expunge("carol", "INBOX", &[4, 5]).unwrap();

    // The replica's copy, opened while the owner runs: a crash image at least as new as
    // the last acknowledged change.
    let copy = rep.path().join("replicas/n1");
    let (replica_store, report) = Store::open(
        Arc::new(RealDisk) as Arc<dyn Disk>,
        &copy.join("store"),
        StoreConfig::default(),
    )
    .unwrap();
    assert!(report.problems.is_empty(), "{report}");
    for user in ["alice", "bob", "carol"] {
        assert_eq!(view(&replica_store, user), view(&store, user), "{user}");
    }
    let (replica_queue, _) = queue::Queue::open(
        Arc::new(RealDisk) as Arc<dyn Disk>,
        &copy.join("queue"),
        queue::QueueConfig::default(),
    )
    .unwrap();
    let ids = |q: &queue::Queue| {
        let mut ids: Vec<_> = q.list().unwrap().into_iter().map(|e| e.id).collect();
        ids.sort();
        ids
    };
    // Byte for byte, not only as the queue reads it.
    let a = std::fs::read(queue_dir.join("main-00000001.seg")).unwrap();
    let b = std::fs::read(copy.join("queue/main-00000001.seg")).unwrap();
    let first = a.iter().zip(&b).position(|(x, y)| x != y);
    assert_eq!(first, None, "segments differ from byte {first:?}");
    assert_eq!(ids(&replica_queue), ids(&queue));
    assert_eq!(ids(&queue).len(), queued.len());
    replica_queue.close().unwrap();
    mirror.stop();
}
