//! A full file system is an ordinary condition for the store (docs/storage.md, "A full
//! disk"): a fresh store is small, an append that finds no room is refused before anything is
//! written, a checkpoint that finds no room leaves nothing behind and is tried again, and
//! opening and checking a store need little free space.

mod common;

use std::sync::Arc;

use common::*;
use disk::{Disk, SimDisk};
use store::{FlagOp, Flags, Mailstore, Store, StoreConfig};

/// Bytes the simulated disk's files hold.
fn used(disk: &SimDisk) -> u64 {
    disk.set_capacity(Some(u64::MAX / 2));
    let used = u64::MAX / 2 - disk.available_bytes(&dir()).unwrap();
    disk.set_capacity(None);
    used
}

fn names(disk: &SimDisk) -> Vec<String> {
    disk.list(&dir()).unwrap()
}

#[test]
fn a_fresh_store_takes_a_few_mebibytes_not_hundreds() {
    let disk = SimDisk::new();
    let store = open(&disk, StoreConfig::default());
    store.append("alice", "INBOX", message(1, 1000)).unwrap();
    drop(store);
    // A 1 MiB data area and a journal of 1 MiB and its slack (it was 256 + 64 MiB).
    assert!(used(&disk) <= 3 << 20, "{} bytes", used(&disk));
}

#[test]
fn a_full_disk_refuses_appends_cleanly_and_the_store_goes_on_when_space_comes_back() {
    let disk = SimDisk::new();
    let store = open(&disk, StoreConfig::default());
    disk.set_capacity(Some(used(&disk) + (6 << 20)));
    let mut acked = Vec::new();
    let refused = loop {
        match store.append("alice", "INBOX", message(acked.len() as u64, 20_000)) {
            Ok(a) => acked.push(a.uid),
            Err(e) => break e,
        }
    };
    assert!(refused.is_out_of_space(), "{refused}");
    assert!(acked.len() > 100, "{} stored", acked.len());
    // Not stopped: changes that need no new room still commit.
    store
        .set_flags(
            "alice",
            "INBOX",
            &acked[..10],
            FlagOp::Add,
            Flags::SEEN,
            &[],
        )
        .unwrap();
    assert_eq!(store.write_problem(), None);
    disk.set_capacity(None);
    acked.push(
        store
            .append("alice", "INBOX", message(99_999, 20_000))
            .unwrap()
            .uid,
    );
    assert_clean(&store);
    drop(store);
    disk.crash(3, 0.0);
    let store = open(&disk, StoreConfig::default());
    assert_eq!(
        store.status("alice", "INBOX").unwrap().messages,
        acked.len() as u64
    );
    assert_clean(&store);
}

#[test]
fn a_checkpoint_without_room_leaves_nothing_behind_and_succeeds_later() {
    let disk = SimDisk::new();
    let store = open(&disk, StoreConfig::default());
    for i in 0..200 {
        store.append("alice", "INBOX", message(i, 2_000)).unwrap();
    }
    let before = names(&disk);
    disk.set_capacity(Some(used(&disk) + 4096));
    let e = store.checkpoint().unwrap_err();
    assert!(e.is_out_of_space(), "{e}");
    // Not a problem of the store's own: a full disk is reported where it is seen (the
    // server's free-space reserve), and passes with it.
    assert_eq!(store.write_problem(), None);
    // No new log, no half-written snapshot.
    assert_eq!(names(&disk), before);
    disk.set_capacity(None);
    store.checkpoint().unwrap();
    assert_eq!(store.write_problem(), None);
    assert_clean(&store);
}

#[test]
fn opening_and_checking_a_store_need_little_free_space() {
    let disk = SimDisk::new();
    let store = open(&disk, StoreConfig::default());
    for i in 0..500 {
        store.append("alice", "INBOX", message(i, 10_000)).unwrap();
    }
    store.checkpoint().unwrap();
    drop(store);
    // Remove the journal the checkpoint made: open must make one, with ~256 KiB free.
    let logs: Vec<String> = names(&disk)
        .into_iter()
        .filter(|n| n.starts_with("index-"))
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    disk.remove(&dir().join(&logs[0])).unwrap();
    disk.set_capacity(Some(used(&disk) + (300 << 10)));
    let (store, _) = Store::open(Arc::new(disk.clone()), &dir(), StoreConfig::default())
        .expect("open with 300 KiB free");
    assert_eq!(store.status("alice", "INBOX").unwrap().messages, 500);
    assert_clean(&store);
}
