//! Torn tails: a batch whose `fdatasync` never happened, cut by a crash at sector
//! granularity. Recovery must drop it (or keep messages only whole), and new records written
//! over the cut must survive the next crash without resurrecting the dropped ones (the chain
//! case of `docs/storage.md`, "Chained checksums").

use std::collections::BTreeMap;
use std::sync::mpsc;

use super::*;
use crate::QueueError;
use crate::format::{self, Kind, Slot};

type Results = mpsc::Receiver<(u64, Result<u64, QueueError>)>;

/// Enqueues `tags` as one writer round whose `fdatasync` fails after the record and slot
/// writes (the writer is held in the previous ticket's callback while they queue up).
fn torn_batch(sim: &SimDisk, q: &Queue, tags: &[u64], len: usize) -> Results {
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    // A message whose callback holds the writer thread.
    q.enqueue_with(
        envelope(1, 1_000_000),
        content(1_000_000, 60),
        Box::new(move |r| {
            r.unwrap();
            started_tx.send(()).unwrap();
            gate_rx.recv().unwrap();
        }),
    );
    started_rx.recv().unwrap();
    let (tx, rx) = mpsc::channel();
    for &tag in tags {
        let tx = tx.clone();
        q.enqueue_with(
            envelope(1, tag),
            content(tag, len),
            Box::new(move |r| tx.send((tag, r)).unwrap()),
        );
    }
    // Records write and slots write succeed, the sync fails.
    sim.fail_after(2);
    gate_tx.send(()).unwrap();
    rx
}

fn all_messages(q: &Queue) -> BTreeMap<u64, crate::QueuedMessage> {
    let out: BTreeMap<u64, crate::QueuedMessage> = q
        .next_batch(u64::MAX, usize::MAX, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|m| (m.id, m))
        .collect();
    for id in out.keys() {
        q.release(*id);
    }
    out
}

fn tag_of(m: &crate::QueuedMessage) -> u64 {
    let text = String::from_utf8_lossy(&m.content[..60.min(m.content.len())]).into_owned();
    text.trim_start_matches("Subject: message ")
        .split('\r')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn torn_tail_is_cut_and_later_writes_survive() {
    let mut cuts = 0;
    for seed in 0..60u64 {
        let sim = SimDisk::new();
        let (q, _) = open(&sim, small());
        let mut acked = BTreeMap::new();
        for tag in 0..5 {
            acked.insert(q.enqueue(envelope(1, tag), content(tag, 700)).unwrap(), tag);
        }
        let rx = torn_batch(&sim, &q, &(100..112).collect::<Vec<_>>(), 900);
        for _ in 0..12 {
            let (tag, r) = rx.recv().unwrap();
            assert!(r.is_err(), "message {tag} acked although its sync failed");
        }
        sim.crash(seed, 0.5);
        drop(q);
        let (q, report) = open(&sim, small());
        cuts += report.torn_tail_cut;
        let found = all_messages(&q);
        // Acknowledged ones are all there; unacknowledged ones only whole.
        for (id, tag) in &acked {
            assert_eq!(tag_of(&found[id]), *tag);
        }
        for m in found.values() {
            let tag = tag_of(m);
            let len = if (100..1_000_000).contains(&tag) {
                900
            } else if tag == 1_000_000 {
                60
            } else {
                700
            };
            assert_eq!(
                m.content,
                content(tag, len),
                "seed {seed}: message {tag} came back damaged"
            );
            assert_eq!(m.envelope, envelope(1, tag));
        }
        // New writes over the cut survive a second crash, and nothing dropped comes back.
        let before: Vec<u64> = found.keys().copied().collect();
        let mut new_ids = Vec::new();
        for tag in 200..206 {
            new_ids.push(q.enqueue(envelope(1, tag), content(tag, 900)).unwrap());
        }
        sim.crash(seed + 1000, 0.5);
        drop(q);
        let (q, _) = open(&sim, small());
        let after = all_messages(&q);
        let expected: Vec<u64> = before.iter().chain(&new_ids).copied().collect();
        assert_eq!(
            after.keys().copied().collect::<Vec<_>>(),
            expected,
            "seed {seed}"
        );
        for m in after.values() {
            let tag = tag_of(m);
            if (200..206).contains(&tag) {
                assert_eq!(m.content, content(tag, 900));
            }
        }
        let report = crate::check(Arc::new(sim.clone()), dir(), false, &mut |_, _| {}).unwrap();
        assert!(report.is_clean(), "seed {seed}: {report}");
    }
    assert!(cuts > 0, "no seed produced a torn tail");
}

fn read_slot(sim: &SimDisk, name: &str, index: u32) -> [u8; 64] {
    let f = sim.open(&dir().join(name), false).unwrap();
    let mut b = [0u8; 64];
    f.read_exact_at(&mut b, format::slot_offset(index)).unwrap();
    b
}

/// The exact scenario the chained checksums exist for: in a torn batch slot k is lost but
/// slot k+1 survives with its record; recovery ends the chain at k; a new record k' of the
/// same length is written at k and synced, so it ends exactly where the old k+1 begins. After
/// the next crash, old k+1 would be a perfectly valid slot under a per-slot CRC. With the
/// chain it does not continue k', so it stays dead.
#[test]
fn chain_case_does_not_resurrect_a_dropped_record() {
    let name = format::segment_name(Kind::Main, 1);
    let mut reproduced = false;
    for seed in 0..2000u64 {
        let sim = SimDisk::new();
        let (q, _) = open(&sim, small());
        // Slots 0..=6 acked; slot 7 is the gate message (also acked, synced): sector 0 holds
        // slots 0..=7. The torn batch starts at slot 8 = sector 1: put k at slot 15 (end of
        // sector 1) and k+1 at slot 16 (start of sector 2).
        for tag in 0..7 {
            q.enqueue(envelope(1, tag), content(tag, 600)).unwrap();
        }
        let rx = torn_batch(&sim, &q, &(100..110).collect::<Vec<_>>(), 600);
        for _ in 0..10 {
            assert!(rx.recv().unwrap().1.is_err());
        }
        sim.crash(seed, 0.5);
        drop(q);
        let k = 15;
        let lost_k = Slot::decode(&read_slot(&sim, &name, k)).id == 0;
        let old_next = read_slot(&sim, &name, k + 1);
        let next = Slot::decode(&old_next);
        if !lost_k || next.id == 0 {
            continue;
        }
        // Slot k+1 survived. Is its record whole too (so a per-slot CRC would accept it)?
        let f = sim.open(&dir().join(&name), false).unwrap();
        let mut rec = vec![0u8; next.len as usize];
        f.read_exact_at(&mut rec, u64::from(next.offset)).unwrap();
        if format::check_record(&rec, &next).is_err() {
            continue;
        }
        let (q, _) = open(&sim, small());
        let present = all_messages(&q);
        assert!(!present.contains_key(&next.id));
        // The torn batch is dropped whole (slot k is missing, so its batch-end flag is too):
        // the chain ends at slot 8. Refill slots 8..k with records of the same size as the
        // torn ones (same tag width, same content length), then write k' at slot k: it ends
        // exactly where old k+1 begins.
        for tag in 110..117 {
            q.enqueue(envelope(1, tag), content(tag, 600)).unwrap();
        }
        let kprime = q.enqueue(envelope(1, 117), content(117, 600)).unwrap();
        let s = Slot::decode(&read_slot(&sim, &name, k));
        assert_eq!(s.id, kprime);
        assert_eq!(
            s.offset + s.len,
            next.offset,
            "k' must end where old k+1 begins"
        );
        sim.crash(seed + 7, 1.0);
        drop(q);
        // Recovery zeroed the stale slots past the chain end (a second defence); put old k+1
        // back, intact, right after k', as a stale slot that survived would be...
        sim.corrupt(&dir().join(&name), format::slot_offset(k + 1), &old_next)
            .unwrap();
        assert_eq!(read_slot(&sim, &name, k + 1), old_next);
        let (q, _) = open(&sim, small());
        let after = all_messages(&q);
        // ...and yet it is not recovered.
        assert!(after.contains_key(&kprime));
        assert!(
            !after.contains_key(&next.id),
            "a dropped, never-acknowledged record came back"
        );
        reproduced = true;
        break;
    }
    assert!(reproduced, "no seed reproduced the chain case");
}
