//! A full file system is an ordinary condition (docs/storage.md, "A full disk"): requests that
//! need a new segment are refused with `NoSpace` before anything is written, everything else
//! goes on, and the queue takes new mail again as soon as there is room, with no reopen.

use super::*;
use crate::{Outcome, QueueError};

fn file_bytes(sim: &SimDisk, suffix: &str) -> u64 {
    sim.list(dir())
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(suffix))
        .map(|n| sim.open(&dir().join(n), false).unwrap().len().unwrap())
        .sum()
}

/// Enqueues 20 KiB messages until the disk refuses one; returns the ids acknowledged.
fn fill(q: &Queue, from_tag: u64) -> (Vec<u64>, QueueError) {
    let mut ids = Vec::new();
    for tag in from_tag.. {
        match q.enqueue(envelope(1, tag), content(tag, 20_000)) {
            Ok(id) => ids.push(id),
            Err(e) => return (ids, e),
        }
    }
    unreachable!()
}

#[test]
fn a_full_disk_refuses_new_mail_and_the_queue_goes_on_when_space_comes_back() {
    let sim = SimDisk::new();
    sim.set_capacity(Some(6 << 20));
    let (q, _) = open(&sim, QueueConfig::default());
    let (mut acked, e) = fill(&q, 0);
    assert!(e.is_out_of_space(), "{e}");
    assert!(acked.len() > 100, "{} accepted", acked.len());
    // Refused again, still without poisoning anything: marks need no room.
    assert!(
        q.enqueue(envelope(1, 9_999), content(9_999, 20_000))
            .unwrap_err()
            .is_out_of_space()
    );
    let m = q.next_batch(0, 1, usize::MAX).unwrap().pop().unwrap();
    q.finish(m.id, &[(0, Outcome::Delivered)]).unwrap();
    acked.retain(|&id| id != m.id);
    // No half-made segment is left behind.
    assert_eq!(file_bytes(&sim, ".tmp"), 0);
    // Space comes back: the same queue takes mail again.
    sim.set_capacity(None);
    acked.push(
        q.enqueue(envelope(1, 10_000), content(10_000, 20_000))
            .unwrap(),
    );
    drop(q);
    // Every acknowledged message survives a power cut, once.
    sim.crash(7, 0.0);
    let (q, _) = open(&sim, QueueConfig::default());
    let mut found: Vec<u64> = q
        .next_batch(0, usize::MAX, usize::MAX)
        .unwrap()
        .iter()
        .map(|m| m.id)
        .collect();
    found.sort_unstable();
    acked.sort_unstable();
    assert_eq!(found, acked);
}

#[test]
fn a_deferral_without_room_keeps_the_message_where_it_was() {
    let sim = SimDisk::new();
    sim.set_capacity(Some(4 << 20));
    let (q, _) = open(&sim, QueueConfig::default());
    let (acked, _) = fill(&q, 0);
    let m = q.next_batch(0, 1, usize::MAX).unwrap().pop().unwrap();
    let deferred = Outcome::Deferred {
        retry_at_ms: 1_000,
        reason: "451 try later".into(),
    };
    let e = q.finish(m.id, &[(0, deferred.clone())]).unwrap_err();
    assert!(e.is_out_of_space(), "{e}");
    // Still in the main queue; handed out again once released.
    q.release(m.id);
    let again = q.next_batch(0, 1, usize::MAX).unwrap().pop().unwrap();
    assert_eq!(again.id, m.id);
    sim.set_capacity(None);
    q.finish(again.id, &[(0, deferred)]).unwrap();
    assert_eq!(q.stats().deferred_messages, 1);
    assert_eq!(q.stats().pending_messages, acked.len() - 1);
}

#[test]
fn segments_start_small_and_double_while_the_queue_grows() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, QueueConfig::default());
    q.enqueue(envelope(1, 0), content(0, 1_000)).unwrap();
    // One 1 MiB main segment (and at most a 1 MiB spare being made), not 64 MiB.
    assert_eq!(file_bytes(&sim, ".seg"), 1 << 20);
    assert!(file_bytes(&sim, ".tmp") <= 1 << 20);
    for tag in 1..1_000 {
        q.enqueue(envelope(1, tag), content(tag, 20_000)).unwrap();
    }
    // About 20 MB of mail: segments of 1, 1, 2, 4, 8 and 16 MiB at most, each at least as
    // large as the ones before it together.
    let mut sizes: Vec<u64> = sim
        .list(dir())
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".seg"))
        .map(|n| sim.open(&dir().join(n), false).unwrap().len().unwrap())
        .collect();
    sizes.sort_unstable();
    assert!(sizes.len() >= 5, "{sizes:?}");
    assert!(*sizes.last().unwrap() <= 16 << 20, "{sizes:?}");
    let used: u64 = sizes.iter().sum();
    assert!(used < 2 * 20_000 * 1_000 + (2 << 20), "{sizes:?}");
}

#[test]
fn a_record_larger_than_the_growth_step_gets_a_segment_that_holds_it() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, QueueConfig::default());
    let big = content(1, 5 << 20);
    let id = q.enqueue(envelope(1, 1), big.clone()).unwrap();
    let m = q.next_batch(0, 1, usize::MAX).unwrap().pop().unwrap();
    assert_eq!((m.id, m.content.len()), (id, big.len()));
}
