//! Thesis experiment (c): fragmentation under interleaved deliveries and random deletions,
//! with the defragment-on-delete rule on and off.
//!
//! Build: `folders` folders receive `messages_per_folder` thesis-sized messages each, delivered
//! interleaved (each batch of 64 goes to random folders, as an MTA's deliveries do). Churn: half
//! of every folder is deleted at random, in POP3-session-sized expunges of 1 to 20 messages,
//! with one new delivery to a random folder for every four deletions (the thesis deleted 40,000
//! of 80,000 messages). Both modes replay the same seeded sequence on a fresh store, so the only
//! difference is the rule. Reported per mode: fragments per folder, bytes the rule moved, the
//! churn time, and the time to read one whole folder with a cold page cache.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use store::Mailstore as _;

use crate::store_open::open_store;
use crate::{mail, ms, result, sys};

pub struct FragOptions {
    pub dir: PathBuf,
    pub folders: usize,
    pub messages_per_folder: usize,
    pub seed: u64,
    /// The store's per-expunge move budget (`defrag_move_bytes_max`); `None` = the default.
    pub move_bytes_max: Option<u64>,
}

fn user(folder: usize) -> String {
    format!("frag{folder:02}@example.com")
}

pub fn run(options: &FragOptions) -> Result<()> {
    for defrag in [false, true] {
        run_mode(options, defrag)?;
    }
    Ok(())
}

fn deliver(
    store: &store::Store,
    rng: &mut impl rand::Rng,
    serial: &mut u64,
    targets: &[usize],
) -> Result<()> {
    let mut batch = Vec::with_capacity(targets.len());
    for &folder in targets {
        let user = user(folder);
        let size = mail::thesis_size(rng);
        let content = mail::message(rng, *serial, &user, size);
        *serial += 1;
        batch.push(mail::to_inbox(&user, content));
    }
    for outcome in store.append_batch(batch) {
        outcome?;
    }
    Ok(())
}

fn fragments(store: &store::Store) -> BTreeMap<String, (u64, u64)> {
    store
        .stats()
        .folders
        .iter()
        .map(|f| (f.user.clone(), (f.fragments, f.messages)))
        .collect()
}

fn run_mode(options: &FragOptions, defrag: bool) -> Result<()> {
    let mode = if defrag { "on" } else { "off" };
    let dir = options.dir.join(format!("store-frag-{mode}"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let mut config = store::StoreConfig {
        defrag_on_delete: defrag,
        ..Default::default()
    };
    if let Some(bytes) = options.move_bytes_max {
        config.defrag_move_bytes_max = bytes;
    }
    let move_bytes_max = config.defrag_move_bytes_max;
    let store = open_store(&dir, config)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(options.seed);
    let mut serial = 0u64;

    // Build: interleaved deliveries.
    let start = Instant::now();
    let mut remaining: Vec<usize> = vec![options.messages_per_folder; options.folders];
    let mut left = options.messages_per_folder * options.folders;
    while left > 0 {
        let mut targets = Vec::with_capacity(64);
        while targets.len() < 64 && left > 0 {
            let folder = rng.random_range(0..options.folders);
            if remaining[folder] > 0 {
                remaining[folder] -= 1;
                left -= 1;
                targets.push(folder);
            }
        }
        deliver(&store, &mut rng, &mut serial, &targets)?;
    }
    let built = fragments(&store);
    let built_total: u64 = built.values().map(|(f, _)| f).sum();
    eprintln!(
        "defrag {mode}: built in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    result(
        "store_frag_built",
        &[
            ("defrag", mode.into()),
            ("folders", options.folders.to_string()),
            ("msgs_per_folder", options.messages_per_folder.to_string()),
            ("fragments_total", built_total.to_string()),
            ("build_s", format!("{:.1}", start.elapsed().as_secs_f64())),
        ],
    );

    // Churn: each folder loses half its messages, in sessions, interleaved with deliveries.
    let mut doomed: Vec<(usize, u32)> = Vec::new();
    for folder in 0..options.folders {
        let view = store.open_folder(&user(folder), "INBOX")?;
        let mut uids: Vec<u32> = view.messages.iter().map(|m| m.uid).collect();
        uids.shuffle(&mut rng);
        uids.truncate(uids.len() / 2);
        doomed.extend(uids.into_iter().map(|uid| (folder, uid)));
    }
    doomed.shuffle(&mut rng);
    let start = Instant::now();
    let mut moved_bytes = 0u64;
    let mut moves = 0u64;
    let mut deleted = 0u64;
    let mut next = 0;
    while next < doomed.len() {
        // One session: one folder, 1..=20 of its doomed messages.
        let folder = doomed[next].0;
        let want = rng.random_range(1..=20usize);
        let mut uids = Vec::with_capacity(want);
        let mut scan = next;
        while scan < doomed.len() && uids.len() < want {
            if doomed[scan].0 == folder {
                uids.push(doomed[scan].1);
                doomed.swap(scan, next + uids.len() - 1);
            }
            scan += 1;
            if scan - next > 2_000 {
                break;
            }
        }
        next += uids.len();
        let report = store.expunge(&user(folder), "INBOX", &uids)?;
        deleted += report.expunged;
        moved_bytes += report.bytes_moved;
        moves += report.moves;
        let new_deliveries = uids.len() / 4 + usize::from(rng.random_range(0..4) < uids.len() % 4);
        let targets: Vec<usize> = (0..new_deliveries)
            .map(|_| rng.random_range(0..options.folders))
            .collect();
        if !targets.is_empty() {
            deliver(&store, &mut rng, &mut serial, &targets)?;
        }
    }
    let churn = start.elapsed();
    let after = fragments(&store);
    let total: u64 = after.values().map(|(f, _)| f).sum();
    let messages: u64 = after.values().map(|(_, m)| m).sum();
    let max = after.values().map(|(f, _)| *f).max().unwrap_or(0);
    let stats = store.stats();

    // Cold read of the first folder.
    let reader = user(0);
    sys::drop_caches()?;
    let start = Instant::now();
    let mut bytes = 0u64;
    store.read_folder(&reader, "INBOX", &mut |_, content| {
        bytes += content.len() as u64;
        Ok(())
    })?;
    let cold_read: Duration = start.elapsed();
    result(
        "store_frag",
        &[
            ("defrag", mode.into()),
            ("move_bytes_max", move_bytes_max.to_string()),
            ("deleted", deleted.to_string()),
            ("msgs_after", messages.to_string()),
            ("fragments_total", total.to_string()),
            (
                "fragments_per_folder",
                format!("{:.0}", total as f64 / after.len().max(1) as f64),
            ),
            ("fragments_max", max.to_string()),
            ("free_extents", stats.free_extents.to_string()),
            ("moves", moves.to_string()),
            ("moved_mb", format!("{:.1}", moved_bytes as f64 / 1e6)),
            ("churn_s", format!("{:.1}", churn.as_secs_f64())),
            ("cold_read_folder_ms", ms(cold_read)),
            (
                "cold_read_mb_per_s",
                format!("{:.0}", bytes as f64 / 1e6 / cold_read.as_secs_f64()),
            ),
        ],
    );
    Ok(())
}
