//! Basic behaviour: enqueue, lease, finish, reopen, and every input limit.

use super::*;
use crate::{Outcome, QueueError};

#[test]
fn enqueue_lease_finish_reopen() {
    let sim = SimDisk::new();
    let (q, report) = open(&sim, small());
    assert_eq!(report.pending, 0);
    let a = q.enqueue(envelope(2, 1), content(1, 100)).unwrap();
    let b = q.enqueue(envelope(1, 2), content(2, 5000)).unwrap();
    assert!(b > a);
    let batch = q.next_batch(0, 10, 1 << 20).unwrap();
    assert_eq!(batch.len(), 2);
    assert_eq!(batch[0].id, a);
    assert_eq!(batch[0].envelope, envelope(2, 1));
    assert_eq!(batch[0].content, content(1, 100));
    assert_eq!(batch[0].pending, vec![0, 1]);
    assert!(!batch[0].deferred);
    assert!(
        q.next_batch(0, 10, 1 << 20).unwrap().is_empty(),
        "leased messages are not handed out twice"
    );
    q.finish(a, &[(0, Outcome::Delivered), (1, Outcome::Delivered)])
        .unwrap();
    q.release(b);
    assert_eq!(q.stats().pending_messages, 1);
    q.close().unwrap();

    sim.crash(7, 0.0);
    let (q, report) = open(&sim, small());
    assert_eq!(report.pending, 1);
    let batch = q.next_batch(0, 10, 1 << 20).unwrap();
    assert_eq!(batch.len(), 1);
    assert_eq!(batch[0].id, b);
    assert_eq!(batch[0].content, content(2, 5000));
    // Ids keep ascending after a restart.
    let c = q.enqueue(envelope(1, 3), content(3, 10)).unwrap();
    assert!(c > b);
}

#[test]
fn partial_delivery_survives_restart() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    let id = q.enqueue(envelope(3, 1), content(1, 100)).unwrap();
    q.next_batch(0, 10, 1 << 20).unwrap();
    q.finish(
        id,
        &[
            (0, Outcome::Delivered),
            (
                1,
                Outcome::Deferred {
                    retry_at_ms: 50,
                    reason: "451 try later".into(),
                },
            ),
            (2, Outcome::Delivered),
        ],
    )
    .unwrap();
    drop(q);
    sim.crash(1, 0.0);
    let (q, report) = open(&sim, small());
    assert_eq!((report.pending, report.deferred), (0, 1));
    assert!(q.next_batch(49, 10, 1 << 20).unwrap().is_empty());
    let m = q.next_batch(50, 10, 1 << 20).unwrap().pop().unwrap();
    assert_eq!(m.id, id);
    assert!(m.deferred);
    assert_eq!(m.attempts, 1);
    assert_eq!(m.pending, vec![1]);
    let st: Vec<_> = m.envelope.recipients.iter().map(|r| r.status).collect();
    assert_eq!(
        st,
        [
            RecipientStatus::Delivered,
            RecipientStatus::Pending,
            RecipientStatus::Delivered
        ]
    );
    assert_eq!(
        m.envelope.recipients[1].last_error.as_deref(),
        Some("451 try later")
    );
}

#[test]
fn finish_checks_its_outcomes() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    let id = q.enqueue(envelope(2, 1), content(1, 10)).unwrap();
    assert!(matches!(
        q.finish(id, &[(0, Outcome::Delivered), (1, Outcome::Delivered)]),
        Err(QueueError::NotLeased(_))
    ));
    q.next_batch(0, 10, 1 << 20).unwrap();
    assert!(matches!(
        q.finish(id, &[(0, Outcome::Delivered)]),
        Err(QueueError::InvalidInput(_))
    ));
    assert!(matches!(
        q.finish(id, &[(0, Outcome::Delivered), (0, Outcome::Delivered)]),
        Err(QueueError::InvalidInput(_))
    ));
    assert!(matches!(
        q.finish(id, &[(0, Outcome::Delivered), (5, Outcome::Delivered)]),
        Err(QueueError::InvalidInput(_))
    ));
    assert!(matches!(
        q.finish(999, &[]),
        Err(QueueError::UnknownMessage(999))
    ));
    q.finish(id, &[(1, Outcome::Delivered), (0, Outcome::Delivered)])
        .unwrap();
    assert!(matches!(
        q.finish(id, &[]),
        Err(QueueError::UnknownMessage(_))
    ));
}

#[test]
fn limits_are_enforced() {
    let sim = SimDisk::new();
    let config = QueueConfig {
        message_bytes_max: 1000,
        recipients_max: 3,
        address_bytes_max: 20,
        ..small()
    };
    let (q, _) = open(&sim, config);
    let too_large = |r: Result<u64, QueueError>, what: &str| match r {
        Err(QueueError::TooLarge { what: w, .. }) => assert!(w.contains(what), "{w}"),
        other => panic!("expected TooLarge({what}), got {other:?}"),
    };
    too_large(q.enqueue(envelope(1, 1), vec![b'x'; 1001]), "message");
    q.enqueue(envelope(1, 1), vec![b'x'; 1000]).unwrap();
    too_large(q.enqueue(envelope(4, 1), vec![b'x'; 10]), "recipient list");
    let mut e = envelope(1, 1);
    e.recipients[0].address = "a".repeat(21);
    too_large(q.enqueue(e.clone(), vec![1]), "recipient address");
    e.recipients[0].address = "a".repeat(20);
    q.enqueue(e.clone(), vec![1]).unwrap();
    e.sender = "s".repeat(21);
    too_large(q.enqueue(e.clone(), vec![1]), "sender address");
    e.sender = String::new();
    q.enqueue(e.clone(), vec![1]).unwrap();
    e.recipients[0].last_error = Some("e".repeat(crate::format::REASON_BYTES_MAX + 1));
    too_large(q.enqueue(e, vec![1]), "last_error");
    let mut e = envelope(1, 1);
    e.recipients.clear();
    assert!(matches!(
        q.enqueue(e, vec![1]),
        Err(QueueError::InvalidInput(_))
    ));
    let mut e = envelope(1, 1);
    e.recipients[0].address.clear();
    assert!(matches!(
        q.enqueue(e, vec![1]),
        Err(QueueError::InvalidInput(_))
    ));
    let mut e = envelope(1, 1);
    e.recipients[0].status = RecipientStatus::Delivered;
    assert!(matches!(
        q.enqueue(e, vec![1]),
        Err(QueueError::InvalidInput(_))
    ));
}

#[test]
fn a_message_must_fit_a_segment() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small()); // message_bytes_max 64 MiB > 1 MiB segment
    match q.enqueue(envelope(1, 1), vec![b'x'; 1 << 20]) {
        Err(QueueError::TooLarge { what, .. }) => assert!(what.contains("segment"), "{what}"),
        other => panic!("{other:?}"),
    }
    let id = q.enqueue(envelope(1, 1), vec![b'x'; 900_000]).unwrap();
    assert_eq!(q.next_batch(0, 1, 1).unwrap()[0].id, id);
}

#[test]
fn bad_configs_are_rejected() {
    let sim = SimDisk::new();
    let disk: Arc<dyn Disk> = Arc::new(sim);
    for config in [
        QueueConfig {
            segment_bytes: 1 << 19,
            ..QueueConfig::default()
        },
        QueueConfig {
            segment_bytes: (1 << 20) + 1,
            ..QueueConfig::default()
        },
        QueueConfig {
            segment_bytes: 8 << 30,
            ..QueueConfig::default()
        },
        QueueConfig {
            recipients_max: 0,
            ..QueueConfig::default()
        },
        QueueConfig {
            batch_records_max: 0,
            ..QueueConfig::default()
        },
    ] {
        assert!(matches!(
            Queue::open(disk.clone(), dir(), config),
            Err(QueueError::InvalidConfig(_))
        ));
    }
}

#[test]
fn closed_queue_refuses_work() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    let q2 = q.clone();
    q.close().unwrap();
    assert!(matches!(
        q2.enqueue(envelope(1, 1), vec![1]),
        Err(QueueError::Closed)
    ));
    assert!(matches!(q2.next_batch(0, 1, 1), Err(QueueError::Closed)));
}

#[test]
fn io_failure_poisons_until_reopen() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    let a = q.enqueue(envelope(1, 1), content(1, 10)).unwrap();
    sim.fail_after(0);
    assert!(matches!(
        q.enqueue(envelope(1, 2), content(2, 10)),
        Err(QueueError::Io { .. })
    ));
    assert!(matches!(
        q.enqueue(envelope(1, 3), content(3, 10)),
        Err(QueueError::Poisoned(_))
    ));
    assert!(q.close().is_err());
    sim.crash(3, 0.5);
    let (q, report) = open(&sim, small());
    assert_eq!(report.pending, 1);
    assert_eq!(q.next_batch(0, 10, 1 << 20).unwrap()[0].id, a);
}

#[test]
fn queue_is_send_sync_and_clone() {
    fn check<T: Send + Sync + Clone + 'static>() {}
    check::<Queue>();
}

#[test]
fn stats_count_segments_and_work() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    for t in 0..30 {
        q.enqueue(envelope(1, t), content(t, 40_000)).unwrap();
    }
    let s = q.stats();
    assert!(s.main_segments >= 2, "{s:?}");
    assert_eq!(s.pending_messages, 30);
    assert_eq!(s.records_committed, 30);
    assert!(s.fdatasyncs >= s.batches_committed);
    assert!(s.bytes_used >= 30 * 40_000);
    let m = q.next_batch(0, 1, 1).unwrap().pop().unwrap();
    assert_eq!(q.stats().leased, 1);
    q.finish(
        m.id,
        &[(
            0,
            Outcome::Failed {
                reason: "550".into(),
            },
        )],
    )
    .unwrap();
    let s = q.stats();
    assert_eq!(
        (s.pending_messages, s.bounces, s.deferred_segments, s.leased),
        (29, 1, 1, 0)
    );
}

#[test]
fn last_clone_dropped_in_a_callback() {
    let sim = SimDisk::new();
    let (q, _) = open(&sim, small());
    let (tx, rx) = std::sync::mpsc::channel();
    let q2 = q.clone();
    drop(q);
    let inner = q2.clone();
    q2.enqueue_with(
        envelope(1, 1),
        content(1, 10),
        Box::new(move |r| {
            drop(inner);
            tx.send(r.is_ok()).unwrap();
        }),
    );
    drop(q2);
    assert!(rx.recv().unwrap());
}

#[test]
fn a_large_content_written_from_its_own_buffer_reads_back_between_small_ones() {
    // The writer writes a content of at least 1 MiB from the producer's buffer, not through
    // its batch buffer: the records around it, its padding and the slots must still line up.
    let sim = SimDisk::new();
    let config = QueueConfig {
        segment_bytes: 8 << 20,
        ..QueueConfig::default()
    };
    let (q, _) = open(&sim, config.clone());
    let sizes = [100, (1 << 20) + 3, 5000, (2 << 20) + 1, 7];
    // Announced, so the writer takes them in one round if they arrive in time.
    let incoming = q.incoming();
    let (tx, rx) = std::sync::mpsc::channel();
    for (tag, &len) in sizes.iter().enumerate() {
        let tx = tx.clone();
        q.enqueue_with(
            envelope(1, tag as u64),
            content(tag as u64, len),
            Box::new(move |r| tx.send((tag, r.unwrap())).unwrap()),
        );
    }
    drop(incoming);
    let mut ids: Vec<(usize, u64)> = (0..sizes.len()).map(|_| rx.recv().unwrap()).collect();
    ids.sort_unstable();
    q.close().unwrap();

    sim.crash(11, 0.0);
    let (q, report) = open(&sim, config);
    assert_eq!(report.pending, sizes.len());
    let batch = q.next_batch(0, 10, 64 << 20).unwrap();
    assert_eq!(batch.len(), sizes.len());
    for ((tag, id), message) in ids.iter().zip(&batch) {
        assert_eq!(message.id, *id);
        assert_eq!(message.envelope, envelope(1, *tag as u64));
        assert!(
            message.content == content(*tag as u64, sizes[*tag]),
            "content of message {tag} differs"
        );
    }
}
