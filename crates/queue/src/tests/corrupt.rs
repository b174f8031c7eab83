//! Damaged input: bit flips in slots, records and headers, truncated segments, garbage files.
//! `open` reports and keeps the rest, `check` reports, `check(repair)` fixes what it can, and
//! nothing panics (including on random bytes).

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::format::{self, Kind, Slot};
use crate::{FsckReport, QueueError, check};

fn seg(n: u64) -> std::path::PathBuf {
    dir().join(format::segment_name(Kind::Main, n))
}

fn fill(sim: &SimDisk, n: u64, len: usize) -> Vec<u64> {
    let (q, _) = open(sim, small());
    let ids = (0..n)
        .map(|t| q.enqueue(envelope(2, t), content(t, len)).unwrap())
        .collect();
    q.close().unwrap();
    ids
}

fn fsck(sim: &SimDisk, repair: bool) -> FsckReport {
    let mut calls = 0;
    let r = check(Arc::new(sim.clone()), dir(), repair, &mut |done, total| {
        assert!(done <= total);
        calls += 1;
    })
    .unwrap();
    assert!(calls > 0);
    r
}

fn pending_ids(q: &Queue) -> BTreeSet<u64> {
    let out = q.next_batch(u64::MAX, usize::MAX, usize::MAX).unwrap();
    out.iter().for_each(|m| q.release(m.id));
    out.iter().map(|m| m.id).collect()
}

fn slot_at(sim: &SimDisk, index: u32) -> Slot {
    let f = sim.open(&seg(1), false).unwrap();
    let mut b = [0u8; 64];
    f.read_exact_at(&mut b, format::slot_offset(index)).unwrap();
    Slot::decode(&b)
}

#[test]
fn flipped_slot_loses_only_its_message() {
    let sim = SimDisk::new();
    let ids = fill(&sim, 10, 300);
    assert!(fsck(&sim, false).is_clean());
    sim.corrupt(&seg(1), format::slot_offset(3) + 10, &[0xFF])
        .unwrap();
    let (q, report) = open(&sim, small());
    assert!(
        report.problems.iter().any(|p| p.contains("slot 3")),
        "{report:?}"
    );
    let expect: BTreeSet<u64> = ids.iter().copied().filter(|&id| id != ids[3]).collect();
    assert_eq!(pending_ids(&q), expect);
    q.close().unwrap();
    let r = fsck(&sim, false);
    assert!(!r.is_clean());
    assert!(r.to_string().contains("slot 3"), "{r}");
    let r = fsck(&sim, true);
    assert!(!r.findings.repaired.is_empty(), "{r}");
    assert!(fsck(&sim, false).is_clean());
    let (q, report) = open(&sim, small());
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(pending_ids(&q), expect);
}

#[test]
fn flipped_record_is_quarantined() {
    let sim = SimDisk::new();
    let ids = fill(&sim, 10, 300);
    let s = slot_at(&sim, 4);
    sim.corrupt(&seg(1), u64::from(s.offset) + 100, b"XXXX")
        .unwrap();
    let (q, report) = open(&sim, small());
    assert_eq!(report.pending, 10, "recovery does not read content");
    let got = pending_ids(&q);
    assert_eq!(got.len(), 9);
    assert!(!got.contains(&ids[4]));
    let quarantined = q.quarantined();
    assert_eq!(quarantined.len(), 1);
    assert_eq!(quarantined[0].0, ids[4]);
    assert!(
        quarantined[0].1.contains("checksum"),
        "{}",
        quarantined[0].1
    );
    q.close().unwrap();
    let r = fsck(&sim, false);
    assert_eq!(r.findings.problems.len(), 1, "{r}");
    fsck(&sim, true);
    assert!(fsck(&sim, false).is_clean());
    let (q, report) = open(&sim, small());
    assert_eq!(report.pending, 9);
    assert_eq!(pending_ids(&q).len(), 9);
    assert!(q.quarantined().is_empty());
}

#[test]
fn bad_header_makes_a_segment_unreadable_and_keeps_the_rest() {
    let sim = SimDisk::new();
    // ~2.5 segments of messages.
    let ids = fill(&sim, 60, 40_000);
    let files = segment_files(&sim);
    assert!(files.len() >= 3, "{files:?}");
    let first_len_before = sim.open(&seg(1), false).unwrap().len().unwrap();
    sim.corrupt(&seg(1), 20, &[0x55]).unwrap();
    let (q, report) = open(&sim, small());
    assert_eq!(report.unreadable_segments.len(), 1, "{report:?}");
    assert!(
        report.unreadable_segments[0].starts_with("main-00000001.seg: header checksum"),
        "{report:?}"
    );
    let got = pending_ids(&q);
    assert!(!got.is_empty() && got.len() < ids.len());
    // Still usable; the unreadable file is never written to.
    let new = q.enqueue(envelope(1, 999), content(999, 100)).unwrap();
    assert!(new > *ids.last().unwrap());
    q.close().unwrap();
    assert_eq!(
        sim.open(&seg(1), false).unwrap().len().unwrap(),
        first_len_before
    );
    let r = fsck(&sim, false);
    assert!(
        r.to_string().contains("main-00000001.seg: unreadable"),
        "{r}"
    );
    let r = fsck(&sim, true);
    assert!(
        r.findings
            .repaired
            .iter()
            .any(|x| x.contains("quarantined")),
        "{r}"
    );
    assert!(sim.exists(&dir().join("main-00000001.seg.quarantined")));
    assert!(fsck(&sim, false).is_clean());
    let (_, report) = open(&sim, small());
    assert!(report.unreadable_segments.is_empty());
}

#[test]
fn truncated_segment_reports_and_keeps_the_rest() {
    let sim = SimDisk::new();
    let ids = fill(&sim, 10, 3000);
    let s = slot_at(&sim, 6);
    sim.truncate(&seg(1), u64::from(s.offset) + 10).unwrap();
    let (q, report) = open(&sim, small());
    assert!(
        report.problems.iter().any(|p| p.contains("shorter")),
        "{report:?}"
    );
    let got = pending_ids(&q);
    assert_eq!(got, ids[..6].iter().copied().collect());
    // The records past the cut: the last one (the last batch of the active segment) looks
    // like a torn tail and is cut at open, the others are quarantined when read.
    assert_eq!(report.torn_tail_cut, 1);
    assert_eq!(q.quarantined().len(), 3);
    // Writes go to a new segment.
    q.enqueue(envelope(1, 50), content(50, 10)).unwrap();
    q.close().unwrap();
    let r = fsck(&sim, false);
    assert_eq!(r.findings.problems.len(), 3, "{r}");
    fsck(&sim, true);
    assert!(fsck(&sim, false).is_clean());
}

#[test]
fn garbage_file_named_like_a_segment() {
    let sim = SimDisk::new();
    let ids = fill(&sim, 5, 100);
    let f = sim.open(&dir().join("main-00000099.seg"), true).unwrap();
    f.write_all_at(&content(1, 10_000), 0).unwrap();
    f.sync_data().unwrap();
    sim.sync_dir(dir()).unwrap();
    let f = sim
        .open(&dir().join("deferred-00000007.seg"), true)
        .unwrap();
    f.write_all_at(b"tiny", 0).unwrap();
    let (q, report) = open(&sim, small());
    assert_eq!(report.unreadable_segments.len(), 2, "{report:?}");
    assert!(
        report
            .unreadable_segments
            .iter()
            .any(|u| u.contains("shorter than a segment header"))
    );
    assert_eq!(pending_ids(&q), ids.iter().copied().collect());
    // Fill past the first segment: the new one must not reuse the garbage file's number.
    for t in 0..40 {
        q.enqueue(envelope(1, t), content(t, 40_000)).unwrap();
    }
    q.close().unwrap();
    assert!(
        segment_files(&sim).iter().any(|n| n == "main-00000100.seg"),
        "{:?}",
        segment_files(&sim)
    );
    let r = fsck(&sim, false);
    assert_eq!(r.findings.problems.len(), 2, "{r}");
}

#[test]
fn bad_status_byte_is_reported() {
    let sim = SimDisk::new();
    fill(&sim, 3, 100);
    let s = slot_at(&sim, 1);
    sim.corrupt(
        &seg(1),
        u64::from(s.offset) + format::RECORD_HEADER_BYTES as u64,
        &[9],
    )
    .unwrap();
    sim.corrupt(
        &seg(1),
        format::slot_offset(1) + format::S_HINT as u64,
        &[1],
    )
    .unwrap();
    let (q, report) = open(&sim, small());
    assert_eq!(report.problems.len(), 1, "{report:?}");
    assert_eq!(pending_ids(&q).len(), 2);
    q.close().unwrap();
    assert!(!fsck(&sim, false).is_clean());
}

fn valid_image() -> Vec<u8> {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    for t in 0..6 {
        q.enqueue(envelope(2, t), content(t, 200)).unwrap();
    }
    for (k, m) in q
        .next_batch(0, 10, usize::MAX)
        .unwrap()
        .into_iter()
        .enumerate()
    {
        if k % 2 == 0 {
            q.finish(
                m.id,
                &[
                    (0, crate::Outcome::Delivered),
                    (
                        1,
                        crate::Outcome::Failed {
                            reason: "no".into(),
                        },
                    ),
                ],
            )
            .unwrap();
        } else {
            q.release(m.id);
        }
    }
    q.close().unwrap();
    let f = sim.open(&seg(1), false).unwrap();
    let mut b = vec![0u8; 64 << 10];
    f.read_exact_at(&mut b, 0).unwrap();
    b
}

/// Puts `bytes` in place of `main-00000001.seg`, then opens, reads everything, and checks.
fn survive(bytes: &[u8]) {
    let sim = SimDisk::new();
    sim.create_dir_all(dir()).unwrap();
    let f = sim.open(&seg(1), true).unwrap();
    f.write_all_at(bytes, 0).unwrap();
    if let Ok((q, _)) = Queue::open(Arc::new(sim.clone()), dir(), small()) {
        if let Ok(batch) = q.next_batch(u64::MAX, usize::MAX, usize::MAX) {
            for m in batch {
                let outcomes: Vec<_> = m
                    .pending
                    .iter()
                    .map(|&i| (i, crate::Outcome::Delivered))
                    .collect();
                let _ = q.finish(m.id, &outcomes);
            }
        }
        if let Ok(b) = q.take_bounces(100) {
            for m in b {
                let _ = q.finish_bounce(m.id);
            }
        }
        let _ = q.enqueue(envelope(1, 1), content(1, 100));
        let _ = q.close();
    }
    let _ = check(Arc::new(sim.clone()), dir(), false, &mut |_, _| {});
    let _ = check(Arc::new(sim), dir(), true, &mut |_, _| {});
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64), ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..9000)) {
        survive(&bytes);
    }

    #[test]
    fn mutated_segments_never_panic(
        edits in proptest::collection::vec((0usize..(64 << 10), any::<u8>()), 1..40),
        header_ok in any::<bool>(),
    ) {
        let mut image = valid_image_cached();
        for (at, v) in edits {
            let at = if header_ok { at.max(64) } else { at };
            image[at] ^= v | 1;
        }
        survive(&image);
    }
}

fn valid_image_cached() -> Vec<u8> {
    static IMAGE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    IMAGE.get_or_init(valid_image).clone()
}

/// Two segment files under one sequence number (a main and a deferred segment copied in from
/// elsewhere): damage the queue never makes, since sequence numbers are queue-wide. Recovery's
/// checks of its segment table must not take it for a bug of its own and panic.
#[test]
fn segments_sharing_a_sequence_number_do_not_panic_open() {
    let sim = SimDisk::new();
    fill(&sim, 3, 300);
    let header = format::Header::new(Kind::Deferred, 1, 100, 1 << 20, 1);
    let path = dir().join(format::segment_name(Kind::Deferred, 1));
    let f = sim.open(&path, true).unwrap();
    f.allocate(1 << 20).unwrap();
    f.write_all_at(&header.encode(), 0).unwrap();
    f.sync_data().unwrap();
    sim.sync_dir(dir()).unwrap();
    let (q, _) = open(&sim, small());
    let _ = q.enqueue(envelope(1, 9), content(9, 100));
    let _ = q.close();
}

/// Every file in the queue directory with its bytes, in name order.
fn queue_files(sim: &SimDisk) -> Vec<(String, Vec<u8>)> {
    let mut names = sim.list(dir()).unwrap();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let f = sim.open(&dir().join(&name), false).unwrap();
            let mut v = vec![0u8; f.len().unwrap() as usize];
            f.read_exact_at(&mut v, 0).unwrap();
            (name, v)
        })
        .collect()
}

#[test]
fn a_segment_of_a_newer_format_refuses_open_and_check_and_is_left_alone() {
    let sim = SimDisk::new();
    fill(&sim, 3, 300);
    // A newer build's header: our magic, version 2, and (as far as this build can tell) a
    // wrong checksum.
    sim.corrupt(&seg(1), 8, &2u32.to_le_bytes()).unwrap();
    // An interrupted creation's leftover stays too: nothing is removed before the refusal.
    let tmp = dir().join("main-00000009.seg.tmp");
    sim.open(&tmp, true)
        .unwrap()
        .write_all_at(&[0; 512], 0)
        .unwrap();
    let before = queue_files(&sim);
    let disk: Arc<dyn Disk> = Arc::new(sim.clone());
    let opened = Queue::open(disk.clone(), dir(), small());
    let Err(err) = opened else {
        panic!("a newer segment opened");
    };
    assert!(
        matches!(&err, QueueError::NewerFormat { path, found: 2, supported: 1 } if *path == seg(1)),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("written by a newer mailstow (format 2); this build reads up to format 1"),
        "{err}"
    );
    for repair in [false, true] {
        let err = check(disk.clone(), dir(), repair, &mut |_, _| {}).unwrap_err();
        assert!(matches!(err, QueueError::NewerFormat { .. }), "{err:?}");
    }
    assert!(queue_files(&sim) == before, "the queue directory changed");
}
