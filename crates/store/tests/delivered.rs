//! The keys of handed-over copies (docs/storage.md, "Delivered keys"): journaled in the same
//! record as the copies, so a crash at any point leaves a copy and its key both or neither;
//! kept through a checkpoint and a reopen, within their bounds.

mod common;

use common::*;
use disk::SimDisk;
use store::{AppendRequest, DeliveredKey, Mailstore, StoreConfig};

fn key(i: u8) -> DeliveredKey {
    [i; 16]
}

fn copy(tag: u64) -> AppendRequest {
    AppendRequest {
        user: "alice".into(),
        folder: "INBOX".into(),
        message: message(tag, 700),
    }
}

/// The write of a keyed copy cut at every I/O, then a power cut keeping none, some or all
/// of the unsynced sectors: after the reopen the copy is there exactly when its key is, and
/// both are there whenever the append returned (the commit record was synced).
#[test]
fn a_crash_at_any_point_keeps_a_copy_and_its_key_together() {
    for fail_at in 0..12u64 {
        for keep in 0..3u64 {
            let disk = SimDisk::new();
            let store = open(&disk, small_config());
            store.append("alice", "INBOX", message(1, 300)).unwrap();
            disk.fail_after(fail_at);
            let stored = store.append_batch_delivered(vec![(copy(2), Some(key(2)))]);
            let acknowledged = matches!(stored.as_slice(), [Ok(_)]);
            std::mem::forget(store);
            disk.crash(fail_at * 3 + keep, keep as f64 / 2.0);
            let store = open(&disk, small_config());
            assert_clean(&store);
            let copies = store.uids("alice", "INBOX").unwrap().len() - 1;
            let known = store.already_delivered(&key(2));
            assert_eq!(
                copies == 1,
                known,
                "fail_at {fail_at} keep {keep}: {copies} copies, key known {known}"
            );
            if acknowledged {
                assert!(
                    known,
                    "fail_at {fail_at}: an acknowledged copy lost its key"
                );
            }
        }
    }
}

/// Keys of copies that stored nothing (`record_delivered`) survive a power cut right after
/// the call; every key survives a checkpoint (the snapshot's section) and a reopen; a copy
/// the store refused records no key; past `delivered_keys_max` the oldest go.
#[test]
fn keys_survive_checkpoints_and_reopens_within_their_bounds() {
    let config = StoreConfig {
        delivered_keys_max: 5000,
        ..small_config()
    };
    let disk = SimDisk::new();
    let store = open(&disk, config.clone());
    let refused = AppendRequest {
        folder: "No/Such".into(),
        ..copy(3)
    };
    let results = store.append_batch_delivered(vec![
        (copy(1), Some(key(1))),
        (refused, Some(key(3))),
        (copy(4), None),
    ]);
    assert!(results[0].is_ok() && results[1].is_err() && results[2].is_ok());
    store.record_delivered(&[key(2)]).unwrap();
    std::mem::forget(store);
    disk.crash(7, 0.0);
    let store = open(&disk, config.clone());
    assert!(store.already_delivered(&key(1)));
    assert!(store.already_delivered(&key(2)));
    assert!(
        !store.already_delivered(&key(3)),
        "a refused copy has no key"
    );
    // More keys than fit one snapshot section, then a checkpoint and a power cut.
    let many: Vec<DeliveredKey> = (0..4500u32)
        .map(|i| {
            let mut k = [0xAB; 16];
            k[..4].copy_from_slice(&i.to_le_bytes());
            k
        })
        .collect();
    store.record_delivered(&many).unwrap();
    store.checkpoint().unwrap();
    std::mem::forget(store);
    disk.crash(8, 0.0);
    let store = open(&disk, config.clone());
    assert!(many.iter().all(|k| store.already_delivered(k)));
    assert!(store.already_delivered(&key(1)) && store.already_delivered(&key(2)));
    drop(store);
    // Reopened with a smaller bound: the oldest keys go first.
    let small = StoreConfig {
        delivered_keys_max: 1000,
        ..config
    };
    let store = open(&disk, small);
    assert!(!store.already_delivered(&key(1)), "the oldest went");
    assert!(many[3500..].iter().all(|k| store.already_delivered(k)));
    assert!(!store.already_delivered(&many[0]));
    assert_clean(&store);
}
