//! Recovery speed on the real disk (ignored: run with
//! `cargo test -p queue --release -- --ignored --nocapture recovery_speed`). The target is
//! reopening 100,000 pending 8 KiB messages in 100 ms or less with a warm page cache.

use std::sync::mpsc;
use std::time::Instant;

use super::*;

#[test]
#[ignore]
fn recovery_speed_100k_pending() {
    let tmp = tempfile::tempdir().unwrap();
    let disk: Arc<dyn Disk> = Arc::new(disk::RealDisk);
    let n = 100_000u64;
    let config = QueueConfig::default();
    {
        let (q, _) = Queue::open(disk.clone(), tmp.path(), config.clone()).unwrap();
        let started = Instant::now();
        let (tx, rx) = mpsc::channel();
        let body = content(1, 8192);
        for i in 0..n {
            let tx = tx.clone();
            q.enqueue_with(
                envelope(1, i),
                body.clone(),
                Box::new(move |r| tx.send(r.unwrap()).unwrap()),
            );
            if i % 4096 == 4095 {
                // Keep the request queue bounded.
                for _ in 0..4096 {
                    rx.recv().unwrap();
                }
            }
        }
        for _ in 0..(n % 4096) {
            rx.recv().unwrap();
        }
        let s = q.stats();
        println!(
            "enqueued {n} x 8 KiB in {:?}: {} fdatasyncs, {} rounds",
            started.elapsed(),
            s.fdatasyncs,
            s.batches_committed
        );
        // Touch a few so some slots carry status hints.
        let batch = q.next_batch(0, 1000, usize::MAX).unwrap();
        for m in batch {
            q.release(m.id);
        }
        q.close().unwrap();
    }
    for round in 0..3 {
        let started = Instant::now();
        let (q, report) = Queue::open(disk.clone(), tmp.path(), config.clone()).unwrap();
        let elapsed = started.elapsed();
        println!(
            "reopen {round}: {elapsed:?} (recovery {:?}), {} pending, {} segments",
            report.elapsed, report.pending, report.segments
        );
        assert_eq!(report.pending as u64, n);
        q.close().unwrap();
    }
}
