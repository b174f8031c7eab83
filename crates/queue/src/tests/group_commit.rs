//! Group commit: concurrent producers share `fdatasync` calls, and ids stay unique.

use std::collections::BTreeSet;
use std::sync::mpsc;

use super::*;

#[test]
fn concurrent_enqueues_share_syncs() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    // A flush that takes as long as a fast SSD's: producers that arrive during one share the
    // next, however the threads are scheduled (without it, on a loaded machine, each could
    // find the writer idle).
    sim.set_sync_latency(std::time::Duration::from_millis(1));
    let syncs_before = sim.stats().syncs;
    let threads = 32;
    let per_thread = 25;
    let ids: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let q = q.clone();
                s.spawn(move || {
                    (0..per_thread)
                        .map(|i| {
                            let tag = (t * 1000 + i) as u64;
                            q.enqueue(envelope(1, tag), content(tag, 2000)).unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let messages = threads * per_thread;
    let unique: BTreeSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), messages, "ids are unique");
    let syncs = sim.stats().syncs - syncs_before;
    let stats = q.stats();
    assert_eq!(stats.records_committed, messages as u64);
    assert!(syncs <= stats.fdatasyncs, "every sync is counted");
    assert!(
        syncs * 2 < messages as u64,
        "{syncs} syncs for {messages} messages: group commit is not batching"
    );
    // Everything is there, in id order.
    let batch = q.next_batch(0, usize::MAX, usize::MAX).unwrap();
    assert_eq!(
        batch.iter().map(|m| m.id).collect::<Vec<_>>(),
        unique.into_iter().collect::<Vec<_>>()
    );
}

#[test]
fn non_blocking_enqueues_batch_up() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    let (tx, rx) = mpsc::channel();
    let n = 500;
    for i in 0..n {
        let tx = tx.clone();
        q.enqueue_with(
            envelope(1, i),
            content(i, 500),
            Box::new(move |r| tx.send(r.unwrap()).unwrap()),
        );
    }
    let ids: BTreeSet<u64> = (0..n).map(|_| rx.recv().unwrap()).collect();
    assert_eq!(ids.len(), n as usize);
    let stats = q.stats();
    assert!(
        stats.batches_committed < n / 4,
        "{} rounds for {n} messages",
        stats.batches_committed
    );
    assert!(stats.fdatasyncs < n / 4);
}

#[test]
fn batch_limits_split_rounds() {
    let sim = SimDisk::new();
    let config = QueueConfig {
        batch_records_max: 4,
        ..small()
    };
    let (q, _) = open(&sim, config);
    let (tx, rx) = mpsc::channel();
    for i in 0..40 {
        let tx = tx.clone();
        q.enqueue_with(
            envelope(1, i),
            content(i, 100),
            Box::new(move |r| tx.send(r.unwrap()).unwrap()),
        );
    }
    for _ in 0..40 {
        rx.recv().unwrap();
    }
    assert!(q.stats().batches_committed >= 10);
}

#[test]
fn finish_many_shares_one_round_and_fails_bad_items_alone() {
    use crate::Outcome;
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    let ids: Vec<u64> = (0..50u64)
        .map(|t| q.enqueue(envelope(1, t), content(t, 3000)).unwrap())
        .collect();
    let batch = q.next_batch(0, usize::MAX, usize::MAX).unwrap();
    assert_eq!(batch.len(), ids.len());
    let mut items: Vec<(u64, Vec<(usize, Outcome)>)> = batch
        .iter()
        .map(|m| {
            (
                m.id,
                m.pending.iter().map(|&i| (i, Outcome::Delivered)).collect(),
            )
        })
        .collect();
    items.insert(10, (9_999_999, vec![(0, Outcome::Delivered)]));
    let syncs_before = sim.stats().syncs;
    let results = q.finish_many(&items);
    assert_eq!(results.len(), items.len());
    for (k, r) in results.iter().enumerate() {
        assert_eq!(r.is_err(), k == 10, "item {k}: {r:?}");
    }
    let syncs = sim.stats().syncs - syncs_before;
    assert!(syncs <= 3, "{syncs} syncs for 50 finishes: not one round");
    assert_eq!(q.stats().pending_messages, 0);
    // Durable: a power cut that drops every unsynced write brings none of them back.
    drop(q);
    sim.crash(3, 0.0);
    let (_, report) = open(&sim, small());
    assert_eq!(report.pending, 0);
}

/// An announced producer that never submits only delays commits by `commit_wait_max`; it never
/// blocks them, and dropping its guard ends the wait.
#[test]
fn an_announced_producer_that_never_comes_does_not_block_commits() {
    let sim = SimDisk::new();
    let mut config = small();
    config.commit_wait_max = std::time::Duration::from_millis(20);
    let (q, _) = open(&sim, config);
    let stuck = q.incoming();
    for tag in 0..3 {
        q.enqueue(envelope(1, tag), content(tag, 100)).unwrap();
    }
    drop(stuck);
    q.enqueue(envelope(1, 9), content(9, 100)).unwrap();
    assert_eq!(q.stats().records_committed, 4);
}

/// Producers that announce first are taken in the same round as the one already waiting: the
/// writer holds the round until every announced producer has submitted.
#[test]
fn announced_producers_share_one_round() {
    let sim = SimDisk::new();
    let mut config = small();
    // Long enough that the test never depends on timing: the round waits for the announced
    // producers, who submit well within it.
    config.commit_wait_max = std::time::Duration::from_secs(10);
    let (q, _) = open(&sim, config);
    let batches_before = q.stats().batches_committed;
    let announced: Vec<_> = (0..4).map(|_| q.incoming()).collect();
    let (tx, rx) = mpsc::channel();
    for (tag, guard) in announced.into_iter().enumerate() {
        let tx = tx.clone();
        q.enqueue_with(
            envelope(1, tag as u64),
            content(tag as u64, 100),
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        drop(guard);
    }
    for _ in 0..4 {
        rx.recv().unwrap().unwrap();
    }
    assert_eq!(q.stats().batches_committed - batches_before, 1);
}
