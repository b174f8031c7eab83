//! The thesis's behaviour: delete without moving data, the two-fragments rule on hand-built
//! layouts, and crashes during a defrag move.
//!
//! Layouts are built through the public API: with reservations off, the allocator places a
//! folder's message right after its last one when that space is free, else at the best-fit
//! free extent, so appending to folders A and B in turn gives A1 B1 A2 B2 … in the volume.

mod common;

use common::*;
use disk::SimDisk;
use store::{Mailstore, StoreConfig, StoreError};

fn config(defrag: bool) -> StoreConfig {
    StoreConfig {
        defrag_on_delete: defrag,
        ..small_config()
    }
}

/// A1 B1 A2 B2 … A<n> B<n>, with the given content sizes.
fn interleaved(store: &store::Store, n: u64, a_len: usize, b_len: usize) {
    store.create_folder("u", "A").unwrap();
    store.create_folder("u", "B").unwrap();
    for i in 1..=n {
        assert_eq!(
            store.append("u", "A", message(100 + i, a_len)).unwrap().uid,
            i as u32
        );
        assert_eq!(
            store.append("u", "B", message(200 + i, b_len)).unwrap().uid,
            i as u32
        );
    }
    assert_eq!(fragments(store, "u", "A"), n);
    assert_eq!(fragments(store, "u", "B"), n);
}

fn check_all(store: &store::Store, folder: &str, base: u64, len: usize, uids: &[u32]) {
    let view = store.open_folder("u", folder).unwrap();
    let have: Vec<u32> = view.messages.iter().map(|m| m.uid).collect();
    assert_eq!(have, uids);
    for &uid in uids {
        assert_eq!(
            store.read("u", folder, uid).unwrap(),
            body(base + uid as u64, len),
            "{folder} {uid}"
        );
    }
}

#[test]
fn delete_in_a_contiguous_folder_writes_no_message_data() {
    for defrag in [true, false] {
        let disk = SimDisk::new();
        let store = open(&disk, config(defrag));
        store.create_folder("u", "Big").unwrap();
        for i in 1..=200u64 {
            store.append("u", "Big", message(i, 1500)).unwrap();
        }
        assert_eq!(fragments(&store, "u", "Big"), 1);
        for uid in [100u32, 3, 177] {
            let before_disk = disk.stats();
            let before = store.stats();
            let r = store.expunge("u", "Big", &[uid]).unwrap();
            let after_disk = disk.stats();
            let after = store.stats();
            assert_eq!(r.expunged, 1);
            assert_eq!(
                r.moves, 0,
                "a contiguous folder has only one fragment after the hole"
            );
            assert_eq!(
                after.data_bytes_written, before.data_bytes_written,
                "no message byte written"
            );
            let written = after_disk.bytes_written - before_disk.bytes_written;
            assert!(
                written <= 64 << 10,
                "{written} bytes written for one delete"
            );
            assert!(
                written < 100,
                "one small journal record, got {written} bytes"
            );
            assert_eq!(after_disk.writes - before_disk.writes, 1);
            assert_eq!(after.journal_syncs - before.journal_syncs, 1);
            assert_eq!(after.data_syncs, before.data_syncs);
        }
        // Each hole split the one fragment.
        assert_eq!(fragments(&store, "u", "Big"), 4);
        let uids: Vec<u32> = (1..=200).filter(|u| ![100, 3, 177].contains(u)).collect();
        for &uid in &uids {
            assert_eq!(store.read("u", "Big", uid).unwrap(), body(uid as u64, 1500));
        }
        assert_clean(&store);
    }
}

#[test]
fn delete_cost_does_not_depend_on_folder_size_or_position() {
    // Rule off: with 1999 already gone, the expunge below 1500 would (rightly) move the two
    // fragments 1500..1998 and 2000 into the freed run.
    let disk = SimDisk::new();
    let store = open(&disk, config(false));
    store.create_folder("u", "Big").unwrap();
    let reqs: Vec<store::AppendRequest> = (1..=2000u64)
        .map(|i| store::AppendRequest {
            user: "u".into(),
            folder: "Big".into(),
            message: message(i, 600),
        })
        .collect();
    assert!(store.append_batch(reqs).into_iter().all(|r| r.is_ok()));
    let mut costs = Vec::new();
    for uid in [1u32, 1000, 1999] {
        let before = disk.stats().bytes_written;
        store.expunge("u", "Big", &[uid]).unwrap();
        costs.push(disk.stats().bytes_written - before);
    }
    assert!(costs.iter().all(|&c| c == costs[0]), "{costs:?}");
    // POP3 style: everything below a UID is one record, however many messages.
    let before = disk.stats();
    let r = store.expunge_below("u", "Big", 1500).unwrap();
    assert_eq!(r.expunged, 1497);
    assert_eq!(disk.stats().writes - before.writes, 1);
    assert!(disk.stats().bytes_written - before.bytes_written < 100);
    let r = store.expunge_all("u", "Big").unwrap();
    assert_eq!(r.expunged, 500);
    assert_eq!(store.status("u", "Big").unwrap().messages, 0);
    assert_clean(&store);
}

#[test]
fn two_fragments_rule_fires_when_the_free_run_holds_two_following_fragments() {
    let disk = SimDisk::new();
    let store = open(&disk, config(true));
    interleaved(&store, 10, ONE_UNIT, ONE_UNIT);
    // Free B2 and B3: each hole is one unit between two A messages; B's following
    // fragments are one unit each, so the rule cannot fire for B.
    let r = store.expunge("u", "B", &[2]).unwrap();
    assert_eq!(r.moves, 0);
    let r = store.expunge("u", "B", &[3]).unwrap();
    assert_eq!(r.moves, 0);
    // Freeing A3 joins the two holes: R = [B2 A3 B3], three units. A's next fragments are
    // A4, A5, A6, … one unit each: three fit, so they move to R's start, right after A2.
    let before = store.stats();
    let r = store.expunge("u", "A", &[3]).unwrap();
    assert_eq!(r.moves, 3, "{r:?}");
    assert_eq!(r.bytes_moved, 3 * 512);
    assert!(r.defrag_error.is_none());
    let after = store.stats();
    assert_eq!(
        after.data_syncs - before.data_syncs,
        1,
        "one copy-sync round"
    );
    assert_eq!(
        after.journal_syncs - before.journal_syncs,
        2,
        "expunge + switch"
    );
    // A1 | A2 A4 A5 A6 | A7 | A8 | A9 | A10
    assert_eq!(fragments(&store, "u", "A"), 6);
    check_all(&store, "A", 100, ONE_UNIT, &[1, 2, 4, 5, 6, 7, 8, 9, 10]);
    check_all(&store, "B", 200, ONE_UNIT, &[1, 4, 5, 6, 7, 8, 9, 10]);
    assert_clean(&store);
    // The moves are durable.
    drop(store);
    disk.crash(7, 0.0);
    let store = open(&disk, config(true));
    assert_eq!(fragments(&store, "u", "A"), 6);
    check_all(&store, "A", 100, ONE_UNIT, &[1, 2, 4, 5, 6, 7, 8, 9, 10]);
    assert_clean(&store);
}

#[test]
fn the_rule_cascades_into_the_space_its_own_move_freed() {
    let disk = SimDisk::new();
    let store = open(&disk, config(true));
    interleaved(&store, 10, ONE_UNIT, ONE_UNIT);
    // B2..B9 go: one-unit holes between A messages, none of which can take two B fragments.
    let r = store.expunge("u", "B", &[2, 3, 4, 5, 6, 7, 8, 9]).unwrap();
    assert_eq!(r.moves, 0);
    // Units: A1 B1 A2 _ A3 _ A4 _ A5 _ A6 _ A7 _ A8 _ A9 _ A10 B10. Freeing A3 makes R = 3
    // units; A4 A5 A6 move there, right after A2. Their old places and the holes around them
    // are a 6-unit run with A7..A10 behind it: the rule applies again and all four move,
    // landing right after A6.
    let r = store.expunge("u", "A", &[3]).unwrap();
    assert_eq!(r.moves, 7, "{r:?}");
    assert_eq!(
        fragments(&store, "u", "A"),
        2,
        "A1 | A2 A4 A5 A6 A7 A8 A9 A10"
    );
    check_all(&store, "A", 100, ONE_UNIT, &[1, 2, 4, 5, 6, 7, 8, 9, 10]);
    check_all(&store, "B", 200, ONE_UNIT, &[1, 10]);
    assert_clean(&store);
    drop(store);
    disk.crash(11, 0.0);
    let store = open(&disk, config(true));
    assert_eq!(fragments(&store, "u", "A"), 2);
    check_all(&store, "A", 100, ONE_UNIT, &[1, 2, 4, 5, 6, 7, 8, 9, 10]);
    assert_clean(&store);
}

#[test]
fn two_fragments_rule_does_not_fire_for_one_fragment_or_when_off() {
    // R holds only one following fragment: nothing moves.
    let disk = SimDisk::new();
    let store = open(&disk, config(true));
    interleaved(&store, 10, ONE_UNIT, ONE_UNIT);
    let before = store.stats();
    let r = store.expunge("u", "A", &[3]).unwrap();
    assert_eq!(r.moves, 0);
    assert_eq!(store.stats().data_bytes_written, before.data_bytes_written);
    assert_eq!(fragments(&store, "u", "A"), 9);

    // The same layout as the firing case, with the rule off.
    let disk = SimDisk::new();
    let store = open(&disk, config(false));
    interleaved(&store, 10, ONE_UNIT, ONE_UNIT);
    store.expunge("u", "B", &[2, 3]).unwrap();
    let r = store.expunge("u", "A", &[3]).unwrap();
    assert_eq!(r.moves, 0);
    assert_eq!(fragments(&store, "u", "A"), 9);
    assert_clean(&store);
}

#[test]
fn two_fragments_rule_respects_the_move_budget() {
    let disk = SimDisk::new();
    let store = open(
        &disk,
        StoreConfig {
            defrag_move_bytes_max: 2 * 512,
            ..config(true)
        },
    );
    interleaved(&store, 10, ONE_UNIT, ONE_UNIT);
    store.expunge("u", "B", &[2, 3]).unwrap();
    let r = store.expunge("u", "A", &[3]).unwrap();
    // Three would fit in R, the budget allows two.
    assert_eq!(r.moves, 2);
    assert_eq!(fragments(&store, "u", "A"), 7);
    check_all(&store, "A", 100, ONE_UNIT, &[1, 2, 4, 5, 6, 7, 8, 9, 10]);

    // A budget below two fragments: nothing.
    let disk = SimDisk::new();
    let store = open(
        &disk,
        StoreConfig {
            defrag_move_bytes_max: 512,
            ..config(true)
        },
    );
    interleaved(&store, 10, ONE_UNIT, ONE_UNIT);
    store.expunge("u", "B", &[2, 3]).unwrap();
    assert_eq!(store.expunge("u", "A", &[3]).unwrap().moves, 0);
    assert_clean(&store);
}

#[test]
fn store_wide_defrag_joins_fragments() {
    let disk = SimDisk::new();
    let store = open(&disk, config(false));
    // A1 BB A2 BB …: after B is gone, every A fragment is followed by a two-unit hole.
    interleaved(&store, 12, ONE_UNIT, TWO_UNITS);
    store.expunge_all("u", "B").unwrap();
    assert_eq!(fragments(&store, "u", "A"), 12);
    let mut calls = Vec::new();
    let r = store
        .defrag(&mut |done, total| calls.push((done, total)))
        .unwrap();
    assert_eq!(r.fragments_before, 12);
    assert!(r.fragments_after < r.fragments_before);
    assert_eq!(fragments(&store, "u", "A"), 1, "{r:?}");
    assert!(r.messages_moved > 0 && r.rounds > 0);
    assert_eq!(calls.last(), Some(&(2, 2)));
    check_all(&store, "A", 100, ONE_UNIT, &(1..=12).collect::<Vec<_>>());
    assert_clean(&store);
    drop(store);
    disk.crash(3, 0.0);
    let store = open(&disk, config(false));
    assert_eq!(fragments(&store, "u", "A"), 1);
    check_all(&store, "A", 100, ONE_UNIT, &(1..=12).collect::<Vec<_>>());
    assert_clean(&store);
}

#[test]
fn crash_at_every_step_of_a_defrag_move() {
    // The firing layout; then the expunge of A3 (record, sync, copy ×3, sync, switch, sync)
    // fails at each mutating step in turn, the power goes, and the store must come back
    // with every other message intact and A3 either present or gone.
    for step in 0..12u64 {
        for (seed, keep) in [(1u64, 0.0), (2, 0.5), (3, 1.0)] {
            let disk = SimDisk::new();
            let store = open(&disk, config(true));
            interleaved(&store, 10, ONE_UNIT, ONE_UNIT);
            store.expunge("u", "B", &[2, 3]).unwrap();
            disk.fail_after(step);
            let outcome = store.expunge("u", "A", &[3]);
            drop(store);
            disk.crash(seed * 100 + step, keep);
            let store = open(&disk, config(true));
            let view = store.open_folder("u", "A").unwrap();
            let uids: Vec<u32> = view.messages.iter().map(|m| m.uid).collect();
            let gone = !uids.contains(&3);
            if outcome.is_ok() {
                assert!(gone, "step {step}: acknowledged expunge came back");
            }
            let expect: Vec<u32> = (1..=10).filter(|&u| u != 3 || !gone).collect();
            check_all(&store, "A", 100, ONE_UNIT, &expect);
            check_all(&store, "B", 200, ONE_UNIT, &[1, 4, 5, 6, 7, 8, 9, 10]);
            assert_clean(&store);
            // The store keeps working after recovery.
            store.append("u", "A", message(999, ONE_UNIT)).unwrap();
            assert_clean(&store);
        }
    }
}

#[test]
fn reservations_keep_interleaved_deliveries_contiguous() {
    let disk = SimDisk::new();
    let store = open(
        &disk,
        StoreConfig {
            reservation_bytes: 64 * 512,
            volume_grow_bytes: 1 << 20,
            ..config(true)
        },
    );
    for i in 0..60u64 {
        for f in ["INBOX", "INBOX"] {
            let _ = f;
        }
        store.append("a", "INBOX", message(i, ONE_UNIT)).unwrap();
        store
            .append("b", "INBOX", message(1000 + i, ONE_UNIT))
            .unwrap();
        store
            .append("c", "INBOX", message(2000 + i, ONE_UNIT))
            .unwrap();
    }
    // 64 units reserved per folder: 60 one-unit messages fit in one run each.
    for user in ["a", "b", "c"] {
        assert_eq!(fragments(&store, user, "INBOX"), 1, "{user}");
    }
    assert!(store.stats().reserved_bytes > 0);
    assert_clean(&store);
    // Reservations are not persistent: after reopen their space is free again.
    drop(store);
    let store = open(
        &disk,
        StoreConfig {
            reservation_bytes: 64 * 512,
            ..config(true)
        },
    );
    assert_eq!(store.stats().reserved_bytes, 0);
    assert_clean(&store);
}

#[test]
fn expunged_message_reads_as_gone() {
    let disk = SimDisk::new();
    let store = open(&disk, config(true));
    interleaved(&store, 3, ONE_UNIT, ONE_UNIT);
    store.expunge("u", "A", &[2]).unwrap();
    assert!(matches!(
        store.read("u", "A", 2),
        Err(StoreError::NoSuchMessage { .. })
    ));
    assert!(matches!(
        store.read_range("u", "A", 2, 0, 10),
        Err(StoreError::NoSuchMessage { .. })
    ));
    assert!(matches!(
        store.summary("u", "A", 2),
        Err(StoreError::NoSuchMessage { .. })
    ));
}
