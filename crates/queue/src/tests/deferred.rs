//! Deferral and bounces: retry timing, permanent failures, and the crash between a deferred
//! copy becoming durable and the original's moved marks.

use super::*;
use crate::{Outcome, QueueError};

fn lease_one(q: &Queue, now: u64) -> crate::QueuedMessage {
    let mut b = q.next_batch(now, 1, usize::MAX).unwrap();
    assert_eq!(b.len(), 1);
    b.pop().unwrap()
}

#[test]
fn deferred_waits_for_its_retry_time() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    let id = q.enqueue(envelope(2, 1), content(1, 100)).unwrap();
    let other = q.enqueue(envelope(1, 2), content(2, 100)).unwrap();
    let m = lease_one(&q, 0);
    q.finish(
        m.id,
        &[
            (
                0,
                Outcome::Deferred {
                    retry_at_ms: 1000,
                    reason: "451 greylisted".into(),
                },
            ),
            (
                1,
                Outcome::Deferred {
                    retry_at_ms: 500,
                    reason: "421 busy".into(),
                },
            ),
        ],
    )
    .unwrap();
    assert_eq!(q.stats().deferred_messages, 1);
    // The main queue comes first; the deferred one is not due before 500.
    assert_eq!(lease_one(&q, 499).id, other);
    assert!(q.next_batch(499, 10, usize::MAX).unwrap().is_empty());
    let m = lease_one(&q, 500);
    assert_eq!((m.id, m.deferred, m.attempts), (id, true, 1));
    assert_eq!(
        m.envelope.recipients[0].last_error.as_deref(),
        Some("451 greylisted")
    );
    // Deferred again: attempts count up, and it survives a crash in the deferred queue.
    q.finish(
        m.id,
        &[
            (0, Outcome::Delivered),
            (
                1,
                Outcome::Deferred {
                    retry_at_ms: 900,
                    reason: "x".into(),
                },
            ),
        ],
    )
    .unwrap();
    drop(q);
    sim.crash(1, 0.0);
    let (q, report) = open(&sim, small());
    assert_eq!((report.pending, report.deferred), (1, 1));
    assert!(
        q.next_batch(899, 10, usize::MAX)
            .unwrap()
            .iter()
            .all(|m| m.id == other)
    );
    let m = lease_one(&q, 900);
    assert_eq!((m.id, m.attempts, m.pending.clone()), (id, 2, vec![1]));
    assert_eq!(
        m.envelope.recipients[0].status,
        crate::RecipientStatus::Delivered
    );
    q.finish(m.id, &[(1, Outcome::Delivered)]).unwrap();
    assert_eq!(q.stats().deferred_messages, 0);
}

#[test]
fn failures_become_bounces() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    let id = q.enqueue(envelope(3, 1), content(1, 100)).unwrap();
    let m = lease_one(&q, 0);
    q.finish(
        m.id,
        &[
            (
                0,
                Outcome::Failed {
                    reason: "550 no such user".into(),
                },
            ),
            (1, Outcome::Delivered),
            (
                2,
                Outcome::Deferred {
                    retry_at_ms: 10,
                    reason: "451".into(),
                },
            ),
        ],
    )
    .unwrap();
    // Recipient 2 is still pending, so it is not a bounce yet.
    assert!(q.take_bounces(10).unwrap().is_empty());
    let m = lease_one(&q, 10);
    assert_eq!(m.pending, vec![2]);
    q.finish(
        m.id,
        &[(
            2,
            Outcome::Failed {
                reason: "552 mailbox full".into(),
            },
        )],
    )
    .unwrap();
    assert_eq!(q.stats().bounces, 1);
    drop(q);
    sim.crash(2, 0.0);
    let (q, report) = open(&sim, small());
    assert_eq!(report.bounces, 1);
    assert!(q.next_batch(u64::MAX, 10, usize::MAX).unwrap().is_empty());
    let b = q.take_bounces(10).unwrap();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].id, id);
    assert_eq!(
        b[0].pending,
        vec![0, 2],
        "bounces list their failed recipients"
    );
    assert_eq!(
        b[0].envelope.recipients[0].last_error.as_deref(),
        Some("550 no such user")
    );
    assert_eq!(
        b[0].envelope.recipients[2].last_error.as_deref(),
        Some("552 mailbox full")
    );
    assert!(
        q.take_bounces(10).unwrap().is_empty(),
        "a leased bounce is not handed out twice"
    );
    assert!(matches!(
        q.finish(id, &[]),
        Err(QueueError::InvalidInput(_))
    ));
    q.finish_bounce(id).unwrap();
    assert!(matches!(
        q.finish_bounce(id),
        Err(QueueError::UnknownMessage(_))
    ));
    drop(q);
    sim.crash(3, 0.0);
    let (q, report) = open(&sim, small());
    assert_eq!(report.bounces, 0);
    assert!(q.take_bounces(10).unwrap().is_empty());
}

/// Delivering the last pending recipient of a record with an earlier permanent failure turns
/// the record itself into a bounce (no copy needed).
#[test]
fn delivering_the_rest_leaves_a_bounce() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    let id = q.enqueue(envelope(2, 1), content(1, 100)).unwrap();
    lease_one(&q, 0);
    q.finish(
        id,
        &[
            (
                0,
                Outcome::Deferred {
                    retry_at_ms: 1,
                    reason: "451".into(),
                },
            ),
            (
                1,
                Outcome::Failed {
                    reason: "550".into(),
                },
            ),
        ],
    )
    .unwrap();
    let m = lease_one(&q, 1);
    assert_eq!(m.pending, vec![0]);
    q.finish(id, &[(0, Outcome::Delivered)]).unwrap();
    assert_eq!(q.stats().bounces, 1);
    drop(q);
    sim.crash(4, 0.0);
    let (q, report) = open(&sim, small());
    assert_eq!(report.bounces, 1);
    let b = q.take_bounces(10).unwrap();
    assert_eq!((b[0].id, b[0].pending.clone()), (id, vec![1]));
    assert_eq!(
        b[0].envelope.recipients[0].status,
        crate::RecipientStatus::Delivered
    );
}

/// The deferred copy is durable but the original's moved marks and done flag are not: both
/// records are pending after the crash. Recovery keeps the copy (more attempts), marks the
/// original done, and the message is handed out exactly once.
#[test]
fn double_copy_after_crash_is_deduplicated() {
    let mut seen_duplicate = false;
    for fail_at in 0..16 {
        let sim = SimDisk::new();
        let (q, _) = open(&sim, small());
        let id = q.enqueue(envelope(2, 1), content(1, 3000)).unwrap();
        let m = lease_one(&q, 0);
        sim.fail_after(fail_at);
        let r = q.finish(
            m.id,
            &[
                (0, Outcome::Delivered),
                (
                    1,
                    Outcome::Deferred {
                        retry_at_ms: 5,
                        reason: "451".into(),
                    },
                ),
            ],
        );
        sim.crash(fail_at, 1.0);
        drop(q);
        let (q, report) = open(&sim, small());
        if report.duplicates_resolved > 0 {
            seen_duplicate = true;
        }
        let all = q.next_batch(u64::MAX, 10, usize::MAX).unwrap();
        assert_eq!(all.len(), 1, "fail_at {fail_at}: {all:?}");
        let m = &all[0];
        assert_eq!(m.id, id);
        assert_eq!(m.content, content(1, 3000));
        if r.is_ok() {
            // Acknowledged: recipient 0 delivered, 1 pending in the deferred copy.
            assert!(m.deferred);
            assert_eq!(m.pending, vec![1]);
        } else {
            assert!(m.pending == vec![1] || m.pending == vec![0, 1], "{m:?}");
        }
        q.release(id);
        // After the duplicate is resolved, a second crash does not bring the original back.
        drop(q);
        sim.crash(99, 0.0);
        let (q, report) = open(&sim, small());
        assert_eq!(
            report.duplicates_resolved, 0,
            "fail_at {fail_at}: the done mark was made durable"
        );
        assert_eq!(q.next_batch(u64::MAX, 10, usize::MAX).unwrap().len(), 1);
    }
    assert!(seen_duplicate, "no failure point left both copies");
}
