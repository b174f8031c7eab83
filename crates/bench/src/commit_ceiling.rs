//! The commit ceiling: how many durable enqueues per second this machine allows a group commit
//! at all, with the queue's own work taken away.
//!
//! Producers are threads that each hand over one message and sleep until it is durable, as in
//! `queue_ingest`. One writer concatenates whatever is waiting and `pwrite`s it into a
//! zero-filled file; `fdatasync` runs on a sync thread, up to `in_flight` rounds at once,
//! acknowledged in order. No index, no checksum, no slots, no segment rollover: any real queue
//! on this machine is at or below this figure, so it bounds what a ratio against the
//! file-per-message baseline can reach.

use std::os::unix::fs::FileExt as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::result;

pub struct CeilingOptions {
    pub dir: PathBuf,
    pub producers: Vec<usize>,
    pub in_flight: Vec<usize>,
    pub message_bytes: usize,
    pub seconds: f64,
}

/// The file the rounds are written into, zero-filled so every write is a plain overwrite.
const FILE_BYTES: u64 = 256 << 20;

struct Waiting {
    messages: Vec<(Vec<u8>, Arc<Done>)>,
    rounds_in_flight: usize,
    stop: bool,
}

#[derive(Default)]
struct Done {
    durable: Mutex<bool>,
    wake: Condvar,
}

struct Shared {
    waiting: Mutex<Waiting>,
    wake: Condvar,
    /// Rounds acknowledged, in order.
    acked: Mutex<u64>,
    acked_wake: Condvar,
}

pub fn run(options: &CeilingOptions) -> Result<()> {
    std::fs::create_dir_all(&options.dir)?;
    let path = options.dir.join("ceiling.dat");
    {
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let zeros = vec![0u8; 1 << 20];
        for chunk in 0..FILE_BYTES >> 20 {
            file.write_all_at(&zeros, chunk << 20)?;
        }
        file.sync_all()?;
    }
    for &producers in &options.producers {
        for &in_flight in &options.in_flight {
            crate::sys::sync();
            let (messages, rounds, elapsed) = one_run(options, &path, producers, in_flight)?;
            let seconds = elapsed.as_secs_f64();
            result(
                "commit_ceiling",
                &[
                    ("producers", producers.to_string()),
                    ("in_flight", in_flight.to_string()),
                    ("msgs_per_s", format!("{:.0}", messages as f64 / seconds)),
                    ("rounds_per_s", format!("{:.0}", rounds as f64 / seconds)),
                    (
                        "msgs_per_round",
                        format!("{:.1}", messages as f64 / rounds.max(1) as f64),
                    ),
                ],
            );
        }
    }
    std::fs::remove_file(&path)?;
    Ok(())
}

fn one_run(
    options: &CeilingOptions,
    path: &std::path::Path,
    producers: usize,
    in_flight: usize,
) -> Result<(u64, u64, Duration)> {
    let in_flight = in_flight.max(1);
    let file = Arc::new(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?,
    );
    let shared = Arc::new(Shared {
        waiting: Mutex::new(Waiting {
            messages: Vec::new(),
            rounds_in_flight: 0,
            stop: false,
        }),
        wake: Condvar::new(),
        acked: Mutex::new(0),
        acked_wake: Condvar::new(),
    });
    let rounds = Arc::new(AtomicU64::new(0));
    let (to_sync, from_writer) = mpsc::channel::<(u64, Vec<Arc<Done>>)>();
    let from_writer = Arc::new(Mutex::new(from_writer));

    let mut syncers = Vec::new();
    for _ in 0..in_flight {
        let (file, shared, from_writer) = (file.clone(), shared.clone(), from_writer.clone());
        syncers.push(thread::spawn(move || -> std::io::Result<()> {
            loop {
                let next = from_writer.lock().map(|r| r.recv());
                let Ok(Ok((round, done))) = next else {
                    return Ok(());
                };
                file.sync_data()?;
                // In order: a round is reported only after every earlier one.
                let mut acked = lock(&shared.acked);
                while *acked + 1 != round {
                    acked = shared
                        .acked_wake
                        .wait(acked)
                        .unwrap_or_else(|p| p.into_inner());
                }
                *acked = round;
                shared.acked_wake.notify_all();
                drop(acked);
                for d in done {
                    *lock(&d.durable) = true;
                    d.wake.notify_one();
                }
                lock(&shared.waiting).rounds_in_flight -= 1;
                shared.wake.notify_all();
            }
        }));
    }

    let writer = {
        let (file, shared, rounds) = (file.clone(), shared.clone(), rounds.clone());
        thread::spawn(move || -> std::io::Result<()> {
            let (mut offset, mut round, mut buffer) = (0u64, 0u64, Vec::new());
            loop {
                let messages = {
                    let mut w = lock(&shared.waiting);
                    while !w.stop && (w.messages.is_empty() || w.rounds_in_flight >= in_flight) {
                        w = shared.wake.wait(w).unwrap_or_else(|p| p.into_inner());
                    }
                    if w.stop {
                        return Ok(());
                    }
                    w.rounds_in_flight += 1;
                    std::mem::take(&mut w.messages)
                };
                buffer.clear();
                let mut done = Vec::with_capacity(messages.len());
                for (message, d) in messages {
                    buffer.extend_from_slice(&message);
                    done.push(d);
                }
                if offset + buffer.len() as u64 > FILE_BYTES {
                    offset = 0;
                }
                file.write_all_at(&buffer, offset)?;
                offset += buffer.len() as u64;
                round += 1;
                rounds.fetch_add(1, Ordering::Relaxed);
                if to_sync.send((round, done)).is_err() {
                    return Ok(());
                }
            }
        })
    };

    let committed = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(options.seconds);
    let message = vec![b'x'; options.message_bytes];
    let producer_threads: Vec<_> = (0..producers)
        .map(|_| {
            let (shared, committed, message) = (shared.clone(), committed.clone(), message.clone());
            thread::spawn(move || {
                while Instant::now() < deadline {
                    let done = Arc::new(Done::default());
                    lock(&shared.waiting)
                        .messages
                        .push((message.clone(), done.clone()));
                    shared.wake.notify_all();
                    let mut durable = lock(&done.durable);
                    while !*durable {
                        durable = done.wake.wait(durable).unwrap_or_else(|p| p.into_inner());
                    }
                    committed.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for p in producer_threads {
        p.join().map_err(|_| anyhow::anyhow!("producer panicked"))?;
    }
    let elapsed = start.elapsed();
    lock(&shared.waiting).stop = true;
    shared.wake.notify_all();
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("writer panicked"))??;
    for s in syncers {
        s.join()
            .map_err(|_| anyhow::anyhow!("sync thread panicked"))??;
    }
    Ok((
        committed.load(Ordering::Relaxed),
        rounds.load(Ordering::Relaxed),
        elapsed,
    ))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
