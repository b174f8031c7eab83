//! Queue ingest: durable enqueues per second, latency and fdatasyncs per message, for our
//! group-committed queue and two baselines run on the same disk in the same process:
//!
//! - `file_per_message`: create a file, write the message, `fsync` it (Postfix's queue file:
//!   cleanup fsyncs every queue file before smtpd answers `250`);
//! - `shared_fsync`: append to one shared file and `fdatasync` after every message, under a lock
//!   (a log without group commit).

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use rand::SeedableRng;

use crate::{mail, result};

pub struct IngestOptions {
    /// Scratch directory on the disk under test; emptied before each run.
    pub dir: PathBuf,
    pub producers: Vec<usize>,
    pub message_bytes: usize,
    pub seconds: f64,
    pub segment_bytes: u64,
    /// Runs per (implementation, producers); the median by messages per second is reported.
    pub runs: usize,
    /// Deliver while ingesting, as an MTA does: `CONSUMERS` threads finish queued messages
    /// (mailstow: `next_batch` + `finish_many`, so segments are recycled) or reads and unlinks the
    /// files (file per message). The shared-fsync log has no per-message delivery and is
    /// skipped.
    pub deliver: bool,
}

/// What one implementation achieved with one producer count.
pub struct Ingest {
    pub messages: u64,
    /// Messages the consumer finished during the run (`--deliver` only).
    pub delivered: u64,
    pub elapsed: Duration,
    pub latency_us: Histogram<u64>,
    pub fdatasyncs: u64,
}

impl Ingest {
    pub fn per_second(&self) -> f64 {
        self.messages as f64 / self.elapsed.as_secs_f64()
    }
}

pub fn run(options: &IngestOptions) -> Result<()> {
    eprintln!(
        "queue ingest: {} byte messages, {} s per run, {} runs",
        options.message_bytes, options.seconds, options.runs
    );
    for &producers in &options.producers {
        let ours = median_of(options, || run_queue(options, producers))?;
        report("mailstow", producers, &ours, options.deliver);
        let files = median_of(options, || {
            run_baseline(options, producers, Baseline::FilePerMessage)
        })?;
        report("file_per_message", producers, &files, options.deliver);
        let mut ratios = vec![
            ("producers", producers.to_string()),
            (
                "vs_file_per_message",
                format!("{:.1}", ours.per_second() / files.per_second()),
            ),
        ];
        if !options.deliver {
            let shared = median_of(options, || {
                run_baseline(options, producers, Baseline::SharedFsync)
            })?;
            report("shared_fsync", producers, &shared, false);
            ratios.push((
                "vs_shared_fsync",
                format!("{:.1}", ours.per_second() / shared.per_second()),
            ));
        }
        let name = if options.deliver {
            "queue_ingest_deliver_ratio"
        } else {
            "queue_ingest_ratio"
        };
        result(name, &ratios);
        // This producer count's files go now, and their discards settle before the next.
        fs::remove_dir_all(&options.dir)?;
        fs::create_dir_all(&options.dir)?;
        crate::sys::sync();
        std::thread::sleep(Duration::from_secs(5));
    }
    Ok(())
}

/// The implementations `queue_ingest` compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Implementation {
    /// mailstow's queue: segments and group commit.
    Mailstow,
    /// Create, write and `fsync` a file per message.
    FilePerMessage,
    /// Append to one file and `fdatasync` after every message.
    SharedFsync,
}

/// One run of `implementation` with `producers` sessions (`options.runs` and `deliver`
/// aside): what `sim validate` predicts and then measures.
pub fn measure(
    options: &IngestOptions,
    producers: usize,
    implementation: Implementation,
) -> Result<Ingest> {
    match implementation {
        Implementation::Mailstow => run_queue(options, producers),
        Implementation::FilePerMessage => {
            run_baseline(options, producers, Baseline::FilePerMessage)
        }
        Implementation::SharedFsync => run_baseline(options, producers, Baseline::SharedFsync),
    }
}

/// Runs `one` `options.runs` times and keeps the run with the median rate; every run's rate
/// goes to stderr.
fn median_of(options: &IngestOptions, mut one: impl FnMut() -> Result<Ingest>) -> Result<Ingest> {
    let mut all = Vec::new();
    for _ in 0..options.runs.max(1) {
        // No writeback pending from the run before, so no implementation pays for another's
        // dirty pages. Nothing is deleted between runs either: on a file system mounted with
        // `discard` (this machine's), deleting a run's files makes the next run's journal
        // commits issue the discards (seen: file-per-message fell from ~20k to ~2k msgs/s).
        crate::sys::sync();
        all.push(one()?);
    }
    let rates: Vec<String> = all
        .iter()
        .map(|i| format!("{:.0}", i.per_second()))
        .collect();
    eprintln!("  runs msgs/s: {}", rates.join(","));
    all.sort_by(|a, b| a.per_second().total_cmp(&b.per_second()));
    let middle = all.len() / 2;
    Ok(all.swap_remove(middle))
}

fn report(implementation: &str, producers: usize, ingest: &Ingest, deliver: bool) {
    let implementation = if deliver {
        format!("{implementation}+deliver")
    } else {
        implementation.to_string()
    };
    result(
        "queue_ingest",
        &[
            ("impl", implementation),
            ("delivered", ingest.delivered.to_string()),
            ("producers", producers.to_string()),
            ("msgs", ingest.messages.to_string()),
            ("msgs_per_s", format!("{:.0}", ingest.per_second())),
            (
                "p50_us",
                ingest.latency_us.value_at_quantile(0.5).to_string(),
            ),
            (
                "p99_us",
                ingest.latency_us.value_at_quantile(0.99).to_string(),
            ),
            (
                "fdatasync_per_msg",
                format!(
                    "{:.4}",
                    ingest.fdatasyncs as f64 / ingest.messages.max(1) as f64
                ),
            ),
        ],
    );
}

/// A new, empty directory for one run: `<dir>/<name>-<n>`.
fn fresh_dir(dir: &Path, name: &str) -> Result<PathBuf> {
    static RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("{name}-{n}"));
    if path.exists() {
        fs::remove_dir_all(&path).with_context(|| format!("emptying {}", path.display()))?;
    }
    fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
    Ok(path)
}

/// Pre-built messages, so producers measure the queue and not message generation.
fn corpus(message_bytes: usize) -> Arc<Vec<Vec<u8>>> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    Arc::new(
        (0..64)
            .map(|i| mail::message(&mut rng, i, "rcpt@example.com", message_bytes))
            .collect(),
    )
}

/// Delivery threads per implementation with `--deliver` (an MTA delivers in parallel too).
const CONSUMERS: usize = 4;

/// One producer's operation: (thread index, serial, content).
type Operation = Arc<dyn Fn(usize, u64, &[u8]) -> Result<()> + Send + Sync>;

/// Runs `producers` threads calling `one(thread, serial, content)` until the deadline.
fn drive(
    producers: usize,
    seconds: f64,
    corpus: &Arc<Vec<Vec<u8>>>,
    one: Operation,
) -> Result<(u64, Duration, Histogram<u64>)> {
    let barrier = Arc::new(Barrier::new(producers + 1));
    let run_for = Duration::from_secs_f64(seconds);
    let mut handles = Vec::new();
    for thread_index in 0..producers {
        let barrier = barrier.clone();
        let corpus = corpus.clone();
        let one = one.clone();
        handles.push(thread::spawn(move || -> Result<(u64, Histogram<u64>)> {
            let mut histogram = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)?;
            barrier.wait();
            let start = Instant::now();
            let mut serial = 0u64;
            while start.elapsed() < run_for {
                let content = &corpus[(serial as usize + thread_index) % corpus.len()];
                let t0 = Instant::now();
                one(thread_index, serial, content)?;
                histogram.saturating_record(t0.elapsed().as_micros() as u64);
                serial += 1;
            }
            Ok((serial, histogram))
        }));
    }
    barrier.wait();
    let start = Instant::now();
    let mut total = 0;
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)?;
    for handle in handles {
        let (count, h) = handle
            .join()
            .map_err(|_| anyhow::anyhow!("producer panicked"))??;
        total += count;
        histogram.add(h)?;
    }
    Ok((total, start.elapsed(), histogram))
}

fn run_queue(options: &IngestOptions, producers: usize) -> Result<Ingest> {
    let dir = fresh_dir(&options.dir, "queue")?;
    let config = queue::QueueConfig {
        segment_bytes: options.segment_bytes,
        ..Default::default()
    };
    let (q, _) = queue::Queue::open(Arc::new(disk::RealDisk), &dir, config)?;
    let syncs_before = q.stats().fdatasyncs;
    let corpus = corpus(options.message_bytes);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let consumers: Vec<_> = (0..if options.deliver { CONSUMERS } else { 0 })
        .map(|_| {
            let q = q.clone();
            let stop = stop.clone();
            thread::spawn(move || -> Result<u64> {
                let mut delivered = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let batch = q.next_batch(u64::MAX, 256, 8 << 20)?;
                    if batch.is_empty() {
                        thread::sleep(Duration::from_micros(200));
                    }
                    let items: Vec<_> = batch
                        .iter()
                        .map(|m| {
                            let outcomes =
                                m.pending.iter().map(|&i| (i, queue::Outcome::Delivered));
                            (m.id, outcomes.collect())
                        })
                        .collect();
                    for result in q.finish_many(&items) {
                        result?;
                        delivered += 1;
                    }
                }
                Ok(delivered)
            })
        })
        .collect();
    let producer_queue = q.clone();
    let (messages, elapsed, latency_us) = drive(
        producers,
        options.seconds,
        &corpus,
        Arc::new(move |_, _, content: &[u8]| {
            let envelope = mail::envelope("sender@example.org", "rcpt@example.com");
            producer_queue.enqueue(envelope, content.to_vec())?;
            Ok(())
        }),
    )?;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut delivered = 0;
    for handle in consumers {
        delivered += handle
            .join()
            .map_err(|_| anyhow::anyhow!("consumer panicked"))??;
    }
    let fdatasyncs = q.stats().fdatasyncs - syncs_before;
    q.close()?;
    Ok(Ingest {
        messages,
        delivered,
        elapsed,
        latency_us,
        fdatasyncs,
    })
}

#[derive(Clone, Copy)]
enum Baseline {
    FilePerMessage,
    SharedFsync,
}

fn run_baseline(options: &IngestOptions, producers: usize, baseline: Baseline) -> Result<Ingest> {
    let corpus = corpus(options.message_bytes);
    let delivered = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut consumers: Vec<thread::JoinHandle<Result<()>>> = Vec::new();
    let envelope = b"MAIL FROM:<sender@example.org>\r\nRCPT TO:<rcpt@example.com>\r\n".to_vec();
    let one: Operation = match baseline {
        Baseline::FilePerMessage => {
            let dir = fresh_dir(&options.dir, "files")?;
            let (sender, receiver) = std::sync::mpsc::channel::<PathBuf>();
            if options.deliver {
                // The delivery agents: read a queue file, then remove it (qmgr + local).
                let receiver = Arc::new(Mutex::new(receiver));
                for _ in 0..CONSUMERS {
                    let delivered = delivered.clone();
                    let receiver = receiver.clone();
                    consumers.push(thread::spawn(move || -> Result<()> {
                        loop {
                            let next = match receiver.lock() {
                                Ok(r) => r.recv(),
                                Err(_) => return Ok(()),
                            };
                            let Ok(path) = next else { return Ok(()) };
                            let _ = fs::read(&path)?;
                            fs::remove_file(&path)?;
                            delivered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }));
                }
            }
            let sender = Mutex::new(sender);
            let deliver = options.deliver;
            Arc::new(move |thread_index, serial, content: &[u8]| {
                let path = dir.join(format!("{thread_index}-{serial}"));
                let mut file = fs::File::create(&path)?;
                file.write_all(&envelope)?;
                file.write_all(content)?;
                file.sync_all()?;
                if deliver {
                    let sender = sender
                        .lock()
                        .map_err(|_| anyhow::anyhow!("lock poisoned"))?;
                    let _ = sender.send(path);
                }
                Ok(())
            })
        }
        Baseline::SharedFsync => {
            let dir = fresh_dir(&options.dir, "shared")?;
            let file = fs::File::create(dir.join("log"))?;
            let log = Arc::new(Mutex::new((file, 0u64)));
            Arc::new(move |_, _, content: &[u8]| {
                let mut guard = log.lock().map_err(|_| anyhow::anyhow!("lock poisoned"))?;
                let (file, offset) = &mut *guard;
                file.write_all_at(&envelope, *offset)?;
                file.write_all_at(content, *offset + envelope.len() as u64)?;
                *offset += (envelope.len() + content.len()) as u64;
                file.sync_data()?;
                Ok(())
            })
        }
    };
    let (messages, elapsed, latency_us) = drive(producers, options.seconds, &corpus, one)?;
    // `drive` dropped the last clone of the operation, and with it the sender: the consumers
    // finish what is left and stop. Only what it did within the run counts.
    let delivered_in_run = delivered.load(std::sync::atomic::Ordering::Relaxed);
    for handle in consumers {
        handle
            .join()
            .map_err(|_| anyhow::anyhow!("consumer panicked"))??;
    }
    Ok(Ingest {
        messages,
        delivered: delivered_in_run,
        elapsed,
        latency_us,
        fdatasyncs: messages,
    })
}
