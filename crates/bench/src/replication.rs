//! What replication costs the commit path that IMAP APPEND and delivery take (issue 40,
//! docs/replication.md): appenders commit messages into a store, each waiting until its
//! message is durable, on the plain disk ("off") and on a disk mirrored to a replica over
//! loopback TCP in the same process ("on", every sync waiting for the replica's); alternating,
//! on the same file system, in the same run. CPU is the whole process's, so the replica's
//! work counts too.

use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use store::{Flags, NewMessage, Store, StoreConfig};

use crate::result;

pub struct ReplicationOptions {
    pub dir: std::path::PathBuf,
    /// Where the replica's copy goes (default: under `dir`, the same disk as the owner's: on
    /// one machine both copies then share its flushes).
    pub replica_dir: Option<std::path::PathBuf>,
    pub appenders: Vec<usize>,
    pub message_bytes: usize,
    pub seconds: f64,
    pub runs: usize,
}

struct Nobody;

impl replication::Registry for Nobody {
    fn record(&self, _epoch: u64, _replica: Option<&str>) -> Result<(), String> {
        Ok(())
    }
}

struct Anyone;

impl replication::Admission for Anyone {
    fn admit(&self, _node: &str, _epoch: u64) -> Result<(), String> {
        Ok(())
    }
}

/// This process's user + system CPU time.
fn cpu() -> Duration {
    // /proc/self/stat fields 14 and 15: utime and stime in clock ticks (100 Hz on Linux).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After the ")" the state is field 3, so utime (14) is index 11, stime (15) index 12.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

struct Measured {
    msgs_per_s: f64,
    cpu_us_per_msg: f64,
}

fn one(dir: &Path, replicated: bool, appenders: usize, o: &ReplicationOptions) -> Result<Measured> {
    let _ = std::fs::remove_dir_all(dir);
    let own = dir.join("owner");
    std::fs::create_dir_all(own.join("store"))?;
    let mut parts = None;
    let disk: Arc<dyn disk::Disk> = if replicated {
        let receiver = replication::Receiver::start(
            TcpListener::bind("127.0.0.1:0")?,
            replication::ReceiverConfig::new(
                [7; 32],
                o.replica_dir
                    .as_ref()
                    .map_or_else(|| dir.join("replica"), |r| r.join("replica")),
            ),
            Arc::new(disk::RealDisk),
            Arc::new(Anyone),
        )?;
        let mut config = replication::MirrorConfig::new("bench", [7; 32], &own);
        config.copy_bytes_per_s = 1 << 30;
        let (mirror, disk) =
            replication::Mirror::new(config, Arc::new(disk::RealDisk), Box::new(Nobody))?;
        mirror.set_partner(Some(("replica", &receiver.local_addr().to_string())));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !mirror.status().recorded {
            anyhow::ensure!(Instant::now() < deadline, "the replica never caught up");
            std::thread::sleep(Duration::from_millis(10));
        }
        parts = Some((mirror, receiver));
        disk
    } else {
        Arc::new(disk::RealDisk)
    };
    let (store, _) = Store::open(disk, &own.join("store"), StoreConfig::default())
        .context("opening the store")?;
    let content = {
        let mut c = b"From: a@example.org\r\nSubject: bench\r\n\r\n".to_vec();
        c.resize(o.message_bytes.max(c.len()), b'x');
        c
    };
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let cpu_before = cpu();
    let started = Instant::now();
    let threads: Vec<_> = (0..appenders)
        .map(|t| {
            let (store, stop, done, content) =
                (store.clone(), stop.clone(), done.clone(), content.clone());
            std::thread::spawn(move || {
                let user = format!("u{}", t % 64);
                while !stop.load(Ordering::Relaxed) {
                    let message = NewMessage {
                        flags: Flags::EMPTY,
                        keywords: vec![],
                        internal_date: 1_700_000_000,
                        content: content.clone(),
                    };
                    if store.append(&user, "INBOX", message).is_ok() {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(o.seconds));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let elapsed = started.elapsed();
    let cpu_used = cpu().saturating_sub(cpu_before);
    let messages = done.load(Ordering::Relaxed).max(1);
    if let Some((mirror, receiver)) = parts {
        mirror.stop();
        receiver.stop();
    }
    let _ = std::fs::remove_dir_all(dir);
    if let Some(r) = &o.replica_dir {
        let _ = std::fs::remove_dir_all(r.join("replica"));
    }
    Ok(Measured {
        msgs_per_s: messages as f64 / elapsed.as_secs_f64(),
        cpu_us_per_msg: cpu_used.as_secs_f64() * 1e6 / messages as f64,
    })
}

fn replica_label(o: &ReplicationOptions) -> String {
    o.replica_dir
        .as_ref()
        .map_or_else(|| "same_disk".into(), |r| r.display().to_string())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

pub fn run(o: &ReplicationOptions) -> Result<()> {
    std::fs::create_dir_all(&o.dir)?;
    for &appenders in &o.appenders {
        let (mut off, mut on, mut ratios, mut cpu_ratios) = (vec![], vec![], vec![], vec![]);
        for run in 0..o.runs.max(1) {
            // Alternate the order so neither mode always runs on a warmer machine.
            let order = if run % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            let mut pair = [None, None];
            for replicated in order {
                let m = one(&o.dir.join("replication"), replicated, appenders, o)?;
                result(
                    "replication_append",
                    &[
                        ("replication", if replicated { "on" } else { "off" }.into()),
                        ("appenders", appenders.to_string()),
                        ("replica_dir", replica_label(o)),
                        ("msgs_per_s", format!("{:.0}", m.msgs_per_s)),
                        ("cpu_us_per_msg", format!("{:.0}", m.cpu_us_per_msg)),
                    ],
                );
                pair[usize::from(replicated)] = Some(m);
            }
            let (a, b) = (pair[0].take().unwrap(), pair[1].take().unwrap());
            ratios.push(b.msgs_per_s / a.msgs_per_s);
            cpu_ratios.push(b.cpu_us_per_msg / a.cpu_us_per_msg);
            off.push(a.msgs_per_s);
            on.push(b.msgs_per_s);
        }
        let range = |v: &[f64]| {
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
            format!("{lo:.2}-{hi:.2}")
        };
        result(
            "replication_append_ratio",
            &[
                ("appenders", appenders.to_string()),
                ("replica_dir", replica_label(o)),
                ("off_msgs_per_s", format!("{:.0}", median(off))),
                ("on_msgs_per_s", format!("{:.0}", median(on))),
                ("on_over_off", format!("{:.2}", median(ratios.clone()))),
                ("on_over_off_range", range(&ratios)),
                (
                    "cpu_on_over_off",
                    format!("{:.2}", median(cpu_ratios.clone())),
                ),
                ("cpu_range", range(&cpu_ratios)),
            ],
        );
    }
    Ok(())
}
