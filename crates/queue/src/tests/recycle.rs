//! Segment recycling: delivered-out segments are reused, not created forever (Q5).

use std::collections::BTreeSet;

use super::*;
use crate::Outcome;

fn deliver_all(q: &Queue) -> usize {
    let mut n = 0;
    loop {
        let batch = q.next_batch(0, 64, 4 << 20).unwrap();
        if batch.is_empty() {
            return n;
        }
        for m in batch {
            let outcomes: Vec<_> = m.pending.iter().map(|&i| (i, Outcome::Delivered)).collect();
            q.finish(m.id, &outcomes).unwrap();
            n += 1;
        }
    }
}

#[test]
fn delivered_segments_are_reused() {
    let sim = SimDisk::new();
    let config = QueueConfig {
        free_segments_max: 2,
        ..small()
    };
    let (q, _) = open(&sim, config.clone());
    let mut names = BTreeSet::new();
    let mut max_files = 0;
    // 12 rounds of ~1.5 segments each: 18 segments' worth of mail through the queue.
    for round in 0..12u64 {
        for t in 0..40 {
            q.enqueue(envelope(1, round * 100 + t), content(t, 38_000))
                .unwrap();
        }
        assert_eq!(deliver_all(&q), 40);
        let files = segment_files(&sim);
        max_files = max_files.max(files.len());
        names.extend(files);
        let stats = q.stats();
        assert_eq!(stats.pending_messages, 0);
        assert!(stats.free_segments <= 2, "{stats:?}");
    }
    assert!(
        max_files <= 4,
        "at most active + 2 free + 1 sealed-in-flight, saw {max_files}"
    );
    assert!(
        names.len() <= 5,
        "segment files are reused, not created forever: {names:?}"
    );
    // The reused segments still recover correctly.
    let ids: Vec<u64> = (0..30)
        .map(|t| q.enqueue(envelope(1, t), content(t, 38_000)).unwrap())
        .collect();
    drop(q);
    sim.crash(5, 0.0);
    let (q, report) = open(&sim, config);
    assert_eq!(report.pending, 30);
    assert!(
        report.problems.is_empty() && report.unreadable_segments.is_empty(),
        "{report:?}"
    );
    let got: Vec<u64> = q
        .next_batch(0, usize::MAX, usize::MAX)
        .unwrap()
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(got, ids);
    let r = crate::check(Arc::new(sim.clone()), dir(), false, &mut |_, _| {}).unwrap();
    assert!(r.is_clean(), "{r}");
}

#[test]
fn ids_stay_unique_when_every_segment_is_recycled() {
    let sim = SimDisk::new();
    let config = QueueConfig {
        free_segments_max: 0,
        ..small()
    };
    let mut last = 0;
    for round in 0..4 {
        let (q, _) = open(&sim, config.clone());
        for t in 0..60 {
            let id = q.enqueue(envelope(1, t), content(t, 30_000)).unwrap();
            assert!(id > last, "round {round}: id {id} after {last}");
            last = id;
        }
        deliver_all(&q);
        drop(q);
        sim.crash(round, 0.5);
    }
}

#[test]
fn a_growing_queue_uses_zero_filled_spares_and_a_crash_discards_one() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    let mut ids = Vec::new();
    // About four segments of mail, nothing delivered: the queue grows, so each new main
    // segment after the first comes from a spare prepared ahead of need.
    for t in 0..100u64 {
        ids.push(q.enqueue(envelope(1, t), content(t, 38_000)).unwrap());
    }
    let names = sim.list(dir()).unwrap();
    let segments = names.iter().filter(|n| n.ends_with(".seg")).count();
    let spares = names.iter().filter(|n| n.ends_with(".seg.tmp")).count();
    assert!(segments >= 4, "{names:?}");
    assert!(spares <= 1, "at most one spare at a time: {names:?}");
    // A spare is zero-filled to its full size before it is used.
    let stats = q.stats();
    assert!(stats.fdatasyncs >= segments as u64);
    drop(q);
    sim.crash(5, 0.5);
    let (q, report) = open(&sim, small());
    assert!(
        !sim.list(dir()).unwrap().iter().any(|n| n.ends_with(".tmp")),
        "recovery removes a spare that was never used"
    );
    assert_eq!(report.pending, ids.len());
    let batch = q.next_batch(0, usize::MAX, usize::MAX).unwrap();
    assert_eq!(batch.iter().map(|m| m.id).collect::<Vec<_>>(), ids);
}
