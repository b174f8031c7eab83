//! Operator commands: list, show, retry, remove, and removal across crashes.

use super::*;
use crate::{MessageClass, Outcome, QueueError};

fn lease_one(q: &Queue, now: u64) -> crate::QueuedMessage {
    let mut b = q.next_batch(now, 1, usize::MAX).unwrap();
    assert_eq!(b.len(), 1);
    b.pop().unwrap()
}

fn deferred(reason: &str) -> Outcome {
    Outcome::Deferred {
        retry_at_ms: 1_000_000,
        reason: reason.into(),
    }
}

/// One pending message, one deferred (one recipient delivered), one bounce; returns their ids.
fn three_classes(q: &Queue) -> (u64, u64, u64) {
    let d = q.enqueue(envelope(2, 1), content(1, 300)).unwrap();
    let b = q.enqueue(envelope(1, 2), content(2, 200)).unwrap();
    let m = lease_one(q, 0);
    assert_eq!(m.id, d);
    q.finish(
        d,
        &[(0, Outcome::Delivered), (1, deferred("451 try later"))],
    )
    .unwrap();
    let m = lease_one(q, 0);
    assert_eq!(m.id, b);
    q.finish(
        b,
        &[(
            0,
            Outcome::Failed {
                reason: "550 no such user".into(),
            },
        )],
    )
    .unwrap();
    let p = q.enqueue(envelope(1, 3), content(3, 100)).unwrap();
    (p, d, b)
}

#[test]
fn list_shows_each_class_with_statuses() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    let (p, d, b) = three_classes(&q);
    let list = q.list().unwrap();
    let ids: Vec<u64> = list.iter().map(|e| e.id).collect();
    assert_eq!(ids, vec![d, b, p], "sorted by id");
    let by = |id| list.iter().find(|e| e.id == id).unwrap();

    let e = by(p);
    assert_eq!(
        (e.class, e.deferred, e.attempts, e.size),
        (MessageClass::Pending, false, 0, 100)
    );
    assert_eq!(e.envelope, envelope(1, 3));
    assert!(!e.leased && e.damage.is_none());

    let e = by(d);
    assert_eq!(
        (e.class, e.deferred, e.attempts),
        (MessageClass::Deferred, true, 1)
    );
    assert_eq!(e.next_attempt_ms, 1_000_000);
    let r = &e.envelope.recipients;
    assert_eq!(r[0].status, RecipientStatus::Delivered);
    assert_eq!(r[1].status, RecipientStatus::Pending);
    assert_eq!(r[1].last_error.as_deref(), Some("451 try later"));

    let e = by(b);
    assert_eq!(e.class, MessageClass::Bounce);
    assert_eq!(e.envelope.recipients[0].status, RecipientStatus::Failed);

    // A leased message is listed, marked leased.
    let m = lease_one(&q, 0);
    assert_eq!(m.id, p);
    assert!(q.list().unwrap().iter().find(|e| e.id == p).unwrap().leased);
    q.release(p);

    let shown = q.show(d).unwrap();
    assert_eq!(shown.content, content(1, 300));
    assert_eq!(shown.entry, *by(d));
    assert!(matches!(q.show(999), Err(QueueError::UnknownMessage(999))));
}

#[test]
fn retry_makes_a_deferred_message_due_until_restart() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    let (p, d, b) = three_classes(&q);
    assert_eq!(lease_one(&q, 10).id, p);
    assert!(q.next_batch(10, 10, usize::MAX).unwrap().is_empty());
    q.retry(d).unwrap();
    assert_eq!(q.list().unwrap()[0].next_attempt_ms, 0);
    assert_eq!(lease_one(&q, 10).id, d);
    q.release(d);
    assert!(matches!(q.retry(b), Err(QueueError::InvalidInput(_))));
    assert!(matches!(
        q.retry(12345),
        Err(QueueError::UnknownMessage(12345))
    ));
    q.retry(p).unwrap();
    // Not durable: after a restart the stored retry time applies again.
    q.retry(d).unwrap();
    drop(q);
    let (q, _) = open(&sim, small());
    let batch = q.next_batch(10, 10, usize::MAX).unwrap();
    assert_eq!(batch.iter().map(|m| m.id).collect::<Vec<_>>(), vec![p]);
}

#[test]
fn remove_is_durable_and_refuses_leased_and_unknown() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    let (p, d, b) = three_classes(&q);
    let keep = q.enqueue(envelope(1, 4), content(4, 100)).unwrap();
    q.remove(d).unwrap();
    q.remove(b).unwrap();
    assert!(matches!(q.remove(d), Err(QueueError::UnknownMessage(_))));
    assert!(matches!(
        q.remove(777),
        Err(QueueError::UnknownMessage(777))
    ));
    assert_eq!(lease_one(&q, 0).id, p);
    assert!(matches!(q.remove(p), Err(QueueError::Leased(_))));
    q.release(p);
    q.remove(p).unwrap();
    let s = q.stats();
    assert_eq!(
        (s.pending_messages, s.deferred_messages, s.bounces),
        (1, 0, 0)
    );
    assert!(q.take_bounces(10).unwrap().is_empty());
    drop(q);
    // Everything `remove` returned for was synced: a power cut that loses every unsynced
    // write changes nothing.
    sim.crash(7, 0.0);
    let (q, report) = open(&sim, small());
    assert_eq!((report.pending, report.deferred, report.bounces), (1, 0, 0));
    assert_eq!(
        q.list().unwrap().iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![keep]
    );
}

#[test]
fn remove_interrupted_by_a_crash_is_all_or_nothing() {
    let (mut kept, mut gone) = (0, 0);
    for fail_after in 0..4 {
        for keep_p in [0.0, 0.5, 1.0] {
            let sim = SimDisk::new();
            let (q, _) = open(&sim, small());
            let (p, d, _) = three_classes(&q);
            sim.fail_after(fail_after);
            let removed = q.remove(d).is_ok();
            drop(q);
            sim.crash(fail_after * 10 + (keep_p * 2.0) as u64, keep_p);
            let (q, _) = open(&sim, small());
            let list = q.list().unwrap();
            assert!(list.iter().all(|e| e.damage.is_none()));
            assert!(list.iter().any(|e| e.id == p), "other mail untouched");
            match list.iter().find(|e| e.id == d) {
                Some(e) => {
                    assert!(!removed, "removed, yet back after the crash");
                    // Still there whole: the same recipients, the same content.
                    assert_eq!(e.envelope.recipients.len(), 2);
                    assert_eq!(q.show(d).unwrap().content, content(1, 300));
                    kept += 1;
                }
                None => gone += 1,
            }
        }
    }
    assert!(
        kept > 0 && gone > 0,
        "both outcomes exercised: {kept} kept, {gone} gone"
    );
}
