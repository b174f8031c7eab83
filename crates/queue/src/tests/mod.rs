//! Tests of the queue, mostly on `disk::SimDisk`: format round trips, group commit, a
//! model-based crash test, torn tails, corruption, recycling, deferral, and limits.

mod basic;
mod corrupt;
mod deferred;
mod format_tests;
mod full_disk;
mod group_commit;
mod model;
mod operator;
mod perf;
mod recycle;
mod torn;

use std::path::Path;
use std::sync::Arc;

use disk::{Disk, SimDisk};

use crate::{Envelope, Queue, QueueConfig, Recipient, RecipientStatus, RecoveryReport};

pub(crate) const DIR: &str = "/q";

pub(crate) fn dir() -> &'static Path {
    Path::new(DIR)
}

/// 1 MiB segments, so tests roll over and recycle quickly.
pub(crate) fn small() -> QueueConfig {
    QueueConfig {
        segment_bytes: 1 << 20,
        ..QueueConfig::default()
    }
}

pub(crate) fn open(sim: &SimDisk, config: QueueConfig) -> (Queue, RecoveryReport) {
    let disk: Arc<dyn Disk> = Arc::new(sim.clone());
    Queue::open(disk, dir(), config).expect("open")
}

pub(crate) fn envelope(recipients: usize, tag: u64) -> Envelope {
    Envelope {
        sender: format!("sender{tag}@example.org"),
        recipients: (0..recipients)
            .map(|i| Recipient {
                address: format!("rcpt{i}-{tag}@example.net"),
                status: RecipientStatus::Pending,
                last_error: None,
            })
            .collect(),
        arrival_ms: 1_700_000_000_000 + tag,
    }
}

pub(crate) fn content(tag: u64, len: usize) -> Vec<u8> {
    let mut v = format!("Subject: message {tag}\r\n\r\n").into_bytes();
    let mut x = tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(b'a' + (x % 26) as u8);
    }
    v.truncate(len.max(1));
    v
}

/// Every segment file name in the queue directory.
pub(crate) fn segment_files(sim: &SimDisk) -> Vec<String> {
    sim.list(dir())
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".seg"))
        .collect()
}
