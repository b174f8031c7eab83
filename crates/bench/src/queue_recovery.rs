//! Queue recovery: how long reopening takes when the queue holds many pending messages.
//!
//! The queue is filled once (many producers, so filling is quick), closed, then reopened
//! `runs` times with a warm page cache and `runs` times after dropping the page cache.

use std::path::PathBuf;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;
use rand::SeedableRng;

use crate::{mail, median, ms, result, sys};

pub struct RecoveryOptions {
    pub dir: PathBuf,
    pub messages: u64,
    pub message_bytes: usize,
    pub segment_bytes: u64,
    pub runs: usize,
}

pub fn run(options: &RecoveryOptions) -> Result<()> {
    let dir = options.dir.join("recovery-queue");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    let config = queue::QueueConfig {
        segment_bytes: options.segment_bytes,
        ..Default::default()
    };
    let disk: Arc<dyn disk::Disk> = Arc::new(disk::RealDisk);
    let fill_start = Instant::now();
    {
        let (q, _) = queue::Queue::open(disk.clone(), &dir, config.clone())?;
        let producers = 64u64;
        let mut handles = Vec::new();
        for p in 0..producers {
            let q = q.clone();
            let count = options.messages / producers + u64::from(p < options.messages % producers);
            let size = options.message_bytes;
            handles.push(thread::spawn(move || -> Result<()> {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(p);
                let content = mail::message(&mut rng, p, "rcpt@example.com", size);
                for _ in 0..count {
                    let envelope = mail::envelope("sender@example.org", "rcpt@example.com");
                    q.enqueue(envelope, content.clone())?;
                }
                Ok(())
            }));
        }
        for handle in handles {
            handle
                .join()
                .map_err(|_| anyhow::anyhow!("producer panicked"))??;
        }
        q.close()?;
    }
    eprintln!(
        "filled {} messages in {:.1} s",
        options.messages,
        fill_start.elapsed().as_secs_f64()
    );

    for cold in [false, true] {
        let mut times: Vec<Duration> = Vec::new();
        let mut pending = 0;
        if !cold {
            // One untimed open so the warm runs really are warm.
            let (q, _) = queue::Queue::open(disk.clone(), &dir, config.clone())?;
            q.close()?;
        }
        for _ in 0..options.runs {
            if cold {
                sys::drop_caches()?;
            }
            let start = Instant::now();
            let (q, report) = queue::Queue::open(disk.clone(), &dir, config.clone())?;
            times.push(start.elapsed());
            pending = report.pending;
            q.close()?;
        }
        let runs: Vec<String> = times.iter().map(|t| ms(*t)).collect();
        result(
            "queue_recovery",
            &[
                ("cache", if cold { "cold" } else { "warm" }.into()),
                ("pending", pending.to_string()),
                ("open_ms", ms(median(&mut times))),
                ("runs_ms", runs.join(",")),
            ],
        );
    }
    Ok(())
}
