//! The stream end to end on loopback and real files: an owner's engines on a mirrored disk,
//! a replica applying it, and the replica's files opened by the engines' own recovery.

use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use disk::{Disk, RealDisk};

use super::*;

const KEY: [u8; 32] = [9; 32];

/// Records what the mirror told the directory.
#[derive(Default)]
struct Recorder {
    said: Mutex<Vec<Option<String>>>,
}

impl Registry for Arc<Recorder> {
    fn record(&self, _epoch: u64, replica: Option<&str>) -> Result<(), String> {
        self.said.lock().unwrap().push(replica.map(str::to_string));
        Ok(())
    }
}

impl Recorder {
    fn last(&self) -> Option<Option<String>> {
        self.said.lock().unwrap().last().cloned()
    }
}

struct Anyone;

impl Admission for Anyone {
    fn admit(&self, _node: &str, _epoch: u64) -> Result<(), String> {
        Ok(())
    }
}

fn replica(root: &Path) -> Receiver {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    Receiver::start(
        listener,
        ReceiverConfig::new(KEY, root.join("replicas")),
        Arc::new(RealDisk),
        Arc::new(Anyone),
    )
    .unwrap()
}

fn owner(root: &Path) -> (Mirror, Arc<dyn Disk>, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let mut config = MirrorConfig::new("n1", KEY, root);
    config.copy_bytes_per_s = 1 << 30;
    let (mirror, disk) =
        Mirror::new(config, Arc::new(RealDisk), Box::new(recorder.clone())).unwrap();
    (mirror, disk, recorder)
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn files_equal(a: &Path, b: &Path) {
    let read = |p: &Path| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    for entry in std::fs::read_dir(a).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if entry.file_type().unwrap().is_dir() {
            files_equal(&entry.path(), &b.join(&name));
        } else if name != "LOCK" {
            assert!(
                read(&entry.path()) == read(&b.join(&name)),
                "{} differs",
                entry.path().display()
            );
        }
    }
}

#[test]
fn a_store_on_a_mirrored_disk_is_on_the_replica_before_its_commit_returns() {
    let own = tempfile::tempdir().unwrap();
    let rep = tempfile::tempdir().unwrap();
    let receiver = replica(rep.path());
    let (mirror, disk, recorder) = owner(own.path());
    mirror.set_partner(Some(("n2", &receiver.local_addr().to_string())));
    wait_for("in sync", || mirror.status().recorded);
    assert_eq!(recorder.last(), Some(Some("n2".into())));

    // Real engine writes: files created, written, synced, renamed, removed.
    let dir = own.path().join("store");
    disk.create_dir_all(&dir).unwrap();
    disk.sync_dir(own.path()).unwrap();
    let f = disk.open(&dir.join("journal"), true).unwrap();
    f.allocate(1 << 16).unwrap();
    for i in 0..100u64 {
        f.write_all_at(format!("record {i}\n").as_bytes(), i * 16)
            .unwrap();
        f.sync_data().unwrap();
        // Synced here means synced there: the replica's file has it now.
        let there = std::fs::read(rep.path().join("replicas/n1/store/journal")).unwrap();
        let line = format!("record {i}\n");
        let at = (i * 16) as usize;
        assert_eq!(&there[at..at + line.len()], line.as_bytes());
    }
    let tmp = dir.join("snap.tmp");
    let s = disk.open(&tmp, true).unwrap();
    s.write_all_at(b"snapshot", 0).unwrap();
    s.sync_data().unwrap();
    disk.rename(&tmp, &dir.join("snap")).unwrap();
    disk.sync_dir(&dir).unwrap();
    assert_eq!(
        std::fs::read(rep.path().join("replicas/n1/store/snap")).unwrap(),
        b"snapshot"
    );
    assert!(!rep.path().join("replicas/n1/store/snap.tmp").exists());
    disk.remove(&dir.join("snap")).unwrap();
    disk.sync_dir(&dir).unwrap();
    assert!(!rep.path().join("replicas/n1/store/snap").exists());
    files_equal(own.path(), &rep.path().join("replicas/n1"));
    mirror.stop();
}

#[test]
fn files_written_before_the_partner_appears_arrive_by_a_full_copy() {
    let own = tempfile::tempdir().unwrap();
    let rep = tempfile::tempdir().unwrap();
    let (mirror, disk, recorder) = owner(own.path());
    let dir = own.path().join("queue");
    disk.create_dir_all(&dir).unwrap();
    let f = disk.open(&dir.join("segment-1"), true).unwrap();
    let data: Vec<u8> = (0..3 * COPY_CHUNK_BYTES + 17)
        .map(|i| (i % 251) as u8)
        .collect();
    f.write_all_at(&data, 0).unwrap();
    f.write_zeros(data.len() as u64, 2 * COPY_CHUNK_BYTES as u64)
        .unwrap();
    // Alone: a sync returns once the directory names no replica.
    f.sync_data().unwrap();
    assert_eq!(recorder.last(), Some(None));
    // A stale file on the replica that the owner does not have goes with the copy.
    std::fs::create_dir_all(rep.path().join("replicas/n1/queue")).unwrap();
    std::fs::write(rep.path().join("replicas/n1/queue/stale"), b"x").unwrap();
    let receiver = replica(rep.path());
    mirror.set_partner(Some(("n2", &receiver.local_addr().to_string())));
    wait_for("in sync", || mirror.status().recorded);
    files_equal(own.path(), &rep.path().join("replicas/n1"));
    assert!(!rep.path().join("replicas/n1/queue/stale").exists());
    mirror.stop();
}

#[test]
fn a_replica_that_went_away_is_caught_up_and_syncs_do_not_wait_for_it_meanwhile() {
    let own = tempfile::tempdir().unwrap();
    let rep = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let start = |listener| {
        Receiver::start(
            listener,
            ReceiverConfig::new(KEY, rep.path().join("replicas")),
            Arc::new(RealDisk),
            Arc::new(Anyone),
        )
        .unwrap()
    };
    let receiver = start(listener);
    let (mirror, disk, recorder) = owner(own.path());
    mirror.set_partner(Some(("n2", &address.to_string())));
    wait_for("in sync", || mirror.status().recorded);
    let f = disk
        .open(&own.path().join("cluster-delivered"), true)
        .unwrap();
    f.write_all_at(b"one\n", 0).unwrap();
    f.sync_data().unwrap();
    receiver.stop();
    drop(receiver);
    // The partner is gone: a sync costs at most the ack wait once, then the directory
    // names nobody and later syncs go on alone.
    let t = Instant::now();
    f.write_all_at(b"two\n", 4).unwrap();
    f.sync_data().unwrap();
    assert!(t.elapsed() < REPLICA_ACK_WAIT_MAX + Duration::from_secs(5));
    assert_eq!(recorder.last(), Some(None));
    assert!(!mirror.status().recorded);
    let t = Instant::now();
    for i in 0..20u64 {
        f.write_all_at(b"more\n", 8 + i * 5).unwrap();
        f.sync_data().unwrap();
    }
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // Back on the same address: resumed or copied, then in sync and named again.
    let listener = loop {
        match TcpListener::bind(address) {
            Ok(l) => break l,
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let _receiver = start(listener);
    wait_for("in sync again", || mirror.status().recorded);
    assert_eq!(recorder.last(), Some(Some("n2".into())));
    files_equal(own.path(), &rep.path().join("replicas/n1"));
    mirror.stop();
}

#[test]
fn a_lapsed_lease_holds_every_sync_and_a_take_over_fails_every_change() {
    let own = tempfile::tempdir().unwrap();
    let (mirror, disk, _) = owner(own.path());
    let f = disk
        .open(&own.path().join("cluster-delivered"), true)
        .unwrap();
    f.sync_data().unwrap();
    mirror.set_lapsed(Some("lease expired"));
    // A sync waits while the lease is lapsed, and returns once it is renewed.
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let waiting = {
        let f = f.clone();
        std::thread::spawn(move || {
            f.write_all_at(b"x", 0).unwrap();
            f.sync_data().unwrap();
            done_tx.send(()).unwrap();
        })
    };
    assert!(
        done_rx.recv_timeout(Duration::from_millis(1500)).is_err(),
        "acknowledged without a lease"
    );
    mirror.set_lapsed(None);
    done_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the sync went on after the renewal");
    waiting.join().unwrap();
    // Taken over: every change fails, for good.
    mirror.set_taken_over("n2 took n1 over at epoch 2");
    let e = f.write_all_at(b"y", 1).unwrap_err();
    assert!(e.to_string().contains("fenced"), "{e}");
    assert!(f.sync_data().is_err());
    mirror.set_lapsed(None);
    assert!(f.write_all_at(b"y", 1).is_err());
    assert_eq!(
        std::fs::read(own.path().join("cluster-delivered")).unwrap(),
        b"x"
    );
    mirror.stop();
}

#[test]
fn a_stream_with_a_wrong_key_or_a_stale_epoch_is_refused() {
    let own = tempfile::tempdir().unwrap();
    let rep = tempfile::tempdir().unwrap();
    let receiver = replica(rep.path());
    // Wrong key.
    let recorder = Arc::new(Recorder::default());
    let (mirror, disk) = Mirror::new(
        MirrorConfig::new("n1", [1; 32], own.path()),
        Arc::new(RealDisk),
        Box::new(recorder.clone()),
    )
    .unwrap();
    mirror.set_partner(Some(("n2", &receiver.local_addr().to_string())));
    let f = disk
        .open(&own.path().join("cluster-delivered"), true)
        .unwrap();
    f.write_all_at(b"x", 0).unwrap();
    f.sync_data().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(!mirror.status().recorded);
    assert!(!rep.path().join("replicas/n1/cluster-delivered").exists());
    mirror.stop();
    // Epoch 5 accepted, then epoch 4 refused.
    let (mirror, _disk, _) = owner(own.path());
    mirror.set_epoch(5);
    mirror.set_partner(Some(("n2", &receiver.local_addr().to_string())));
    wait_for("in sync at epoch 5", || mirror.status().recorded);
    mirror.stop();
    let (old, _disk, _) = owner(own.path());
    old.set_epoch(4);
    old.set_partner(Some(("n2", &receiver.local_addr().to_string())));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!old.status().recorded);
    old.stop();
}
