//! Thesis experiment (a): the cost of opening a folder, for folders of 5 MB to 500 MB.
//!
//! The thesis's AUTHORIZATION state scanned the whole mail file; here opening reads the index
//! only. Each size gets its own folder filled with 2.5–10 KiB messages (the peer harness's
//! distribution); `status` (count, bytes: POP3 STAT) and `open_folder` (every UID, size and
//! flag: LIST and UIDL) are timed `runs` times each. The store's own reopen (loading the whole
//! index at start-up) is reported too, warm and cold.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use rand::SeedableRng;
use store::Mailstore as _;

use crate::{mail, median, ms, result, sys};

pub struct OpenOptions {
    pub dir: PathBuf,
    /// Folder sizes in MB (10^6 bytes).
    pub sizes_mb: Vec<u64>,
    pub runs: usize,
}

/// Fills `user`'s INBOX with thesis-sized messages until it holds `bytes`; returns the count.
pub fn fill(store: &store::Store, user: &str, bytes: u64, seed: u64) -> Result<u64> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut total = 0u64;
    let mut count = 0u64;
    while total < bytes {
        let mut batch = Vec::new();
        while total < bytes && batch.len() < 256 {
            let size = mail::thesis_size(&mut rng);
            let content = mail::message(&mut rng, count, user, size);
            total += content.len() as u64;
            count += 1;
            batch.push(mail::to_inbox(user, content));
        }
        for outcome in store.append_batch(batch) {
            outcome?;
        }
    }
    Ok(count)
}

pub fn open_store(dir: &Path, config: store::StoreConfig) -> Result<Arc<store::Store>> {
    std::fs::create_dir_all(dir)?;
    let (store, _) = store::Store::open(Arc::new(disk::RealDisk), dir, config)?;
    Ok(store)
}

pub fn run(options: &OpenOptions) -> Result<()> {
    let dir = options.dir.join("store-open");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let store = open_store(&dir, store::StoreConfig::default())?;
    for &size in &options.sizes_mb {
        let user = format!("open{size}mb@example.com");
        let start = Instant::now();
        let count = fill(&store, &user, size * 1_000_000, size)?;
        eprintln!(
            "filled {user}: {count} messages in {:.1} s",
            start.elapsed().as_secs_f64()
        );
    }
    for &size in &options.sizes_mb {
        let user = format!("open{size}mb@example.com");
        let mut status_times: Vec<Duration> = Vec::new();
        let mut open_times: Vec<Duration> = Vec::new();
        let mut messages = 0;
        let mut bytes = 0;
        for _ in 0..options.runs {
            let start = Instant::now();
            let status = store.status(&user, "INBOX")?;
            status_times.push(start.elapsed());
            let start = Instant::now();
            let view = store.open_folder(&user, "INBOX")?;
            open_times.push(start.elapsed());
            messages = view.messages.len();
            bytes = status.bytes;
        }
        result(
            "store_open",
            &[
                ("folder_mb", size.to_string()),
                ("msgs", messages.to_string()),
                ("bytes", bytes.to_string()),
                ("status_ms", ms(median(&mut status_times))),
                ("open_ms", ms(median(&mut open_times))),
            ],
        );
    }
    drop(store);
    for cold in [false, true] {
        let mut times: Vec<Duration> = Vec::new();
        for _ in 0..options.runs {
            if cold {
                sys::drop_caches()?;
            }
            let start = Instant::now();
            let store = open_store(&dir, store::StoreConfig::default())?;
            times.push(start.elapsed());
            drop(store);
        }
        result(
            "store_reopen",
            &[
                ("cache", if cold { "cold" } else { "warm" }.into()),
                ("folders", options.sizes_mb.len().to_string()),
                ("open_ms", ms(median(&mut times))),
            ],
        );
    }
    Ok(())
}
