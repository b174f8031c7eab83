//! Thesis experiment (b): deleting one message at 0 to `folder_mb` MB from the end of a folder.
//!
//! For each distance, `runs` different messages near that distance are expunged one by one
//! (each expunge is durable when it returns, like a POP3 QUIT). Reported per distance: the
//! median time, the bytes the store wrote (its own counters: data moved + journal), the bytes
//! the process dirtied (`/proc/self/io`), and the bytes the block device wrote across the
//! expunge plus a `sync` (machine-wide, so an upper bound).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use store::Mailstore as _;

use crate::store_open::{fill, open_store};
use crate::{median, ms, result, sys};

pub struct DeleteOptions {
    pub dir: PathBuf,
    pub folder_mb: u64,
    /// Distances from the end, in MB.
    pub distances_mb: Vec<u64>,
    pub runs: usize,
}

/// One distance's expunges: median time and the bytes written, by three counts.
pub struct Deleted {
    pub distance_mb: u64,
    pub time: Duration,
    pub store_bytes: u64,
    pub max_store_bytes: u64,
    pub process_write_bytes: u64,
    pub device_write_bytes: u64,
}

/// Fills a folder of `folder_mb` and expunges at each distance; returns the messages in the
/// folder and each distance's figures.
pub fn measure(options: &DeleteOptions) -> Result<(u64, Vec<Deleted>)> {
    let dir = options.dir.join("store-delete");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let store = open_store(&dir, store::StoreConfig::default())?;
    let user = "delete@example.com";
    let count = fill(&store, user, options.folder_mb * 1_000_000, 7)?;
    let mut out = Vec::new();
    for &distance_mb in &options.distances_mb {
        let mut times: Vec<Duration> = Vec::new();
        let mut store_bytes = Vec::new();
        let mut process_bytes = Vec::new();
        let mut device_bytes = Vec::new();
        for run in 0..options.runs.max(1) {
            let view = store.open_folder(user, "INBOX")?;
            // Walk from the end until `distance` bytes lie behind the candidate.
            let target = distance_mb * 1_000_000;
            let mut behind = 0u64;
            let mut index = view.messages.len();
            while index > 0 && behind < target {
                index -= 1;
                behind += view.messages[index].size;
            }
            let index = index
                .saturating_sub(run)
                .min(view.messages.len().saturating_sub(1));
            let uid = view.messages[index].uid;
            let before = store.io_counters();
            let process_before = sys::process_write_bytes();
            let device_before = sys::device_write_bytes();
            let start = Instant::now();
            store.expunge(user, "INBOX", &[uid])?;
            times.push(start.elapsed());
            let after = store.io_counters();
            process_bytes.push(sys::process_write_bytes() - process_before);
            crate::sys::sync();
            device_bytes.push(sys::device_write_bytes() - device_before);
            store_bytes.push(
                (after.data_bytes_written + after.journal_bytes_written)
                    - (before.data_bytes_written + before.journal_bytes_written),
            );
        }
        store_bytes.sort();
        process_bytes.sort();
        device_bytes.sort();
        out.push(Deleted {
            distance_mb,
            time: median(&mut times),
            store_bytes: store_bytes[store_bytes.len() / 2],
            max_store_bytes: store_bytes.last().copied().unwrap_or(0),
            process_write_bytes: process_bytes[process_bytes.len() / 2],
            device_write_bytes: device_bytes[device_bytes.len() / 2],
        });
    }
    Ok((count, out))
}

pub fn run(options: &DeleteOptions) -> Result<()> {
    let (count, deleted) = measure(options)?;
    eprintln!("filled {count} messages");
    for d in deleted {
        result(
            "store_delete",
            &[
                ("folder_msgs", count.to_string()),
                ("distance_mb", d.distance_mb.to_string()),
                ("time_ms", ms(d.time)),
                ("store_bytes", d.store_bytes.to_string()),
                ("process_write_bytes", d.process_write_bytes.to_string()),
                ("device_write_bytes", d.device_write_bytes.to_string()),
                ("max_store_bytes", d.max_store_bytes.to_string()),
            ],
        );
    }
    Ok(())
}
