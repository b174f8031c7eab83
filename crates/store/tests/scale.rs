//! A manual scale check on the real disk (ignored by default):
//! `cargo test -p store --release --test scale -- --ignored --nocapture`.
//! Builds folders with interleaved appends, reopens, deletes half at random with the
//! defrag rule on, and prints timings, fragments and bytes written per delete.

use std::sync::Arc;
use std::time::Instant;

use store::{AppendRequest, Flags, Mailstore, NewMessage, Store, StoreConfig};

#[test]
#[ignore]
fn scale() {
    let folders: usize = std::env::var("SCALE_FOLDERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let per: usize = std::env::var("SCALE_PER_FOLDER")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let (store, _) = Store::open(Arc::new(disk::RealDisk), &dir, StoreConfig::default()).unwrap();
    let t = Instant::now();
    let mut x = 12345u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..per / 50 {
        let mut batch = Vec::new();
        for f in 0..folders {
            for _ in 0..50 {
                let len = 2560 + (rnd() % 7680) as usize;
                batch.push(AppendRequest {
                    user: "bench".into(),
                    folder: format!("INBOX/f{f}").replace("INBOX/f0", "INBOX"),
                    message: NewMessage {
                        flags: Flags::EMPTY,
                        keywords: vec![],
                        internal_date: 0,
                        content: vec![b'x'; len],
                    },
                });
            }
        }
        if round == 0 {
            for f in 1..folders {
                let _ = store.create_folder("bench", &format!("INBOX/f{f}"));
            }
        }
        for r in store.append_batch(batch) {
            r.unwrap();
        }
    }
    let s = store.stats();
    println!(
        "append {} msgs: {:.1}s, volume {} MiB",
        s.messages_appended,
        t.elapsed().as_secs_f64(),
        s.volume_bytes >> 20
    );
    drop(store);
    let t = Instant::now();
    let (store, report) =
        Store::open(Arc::new(disk::RealDisk), &dir, StoreConfig::default()).unwrap();
    println!("reopen: {:.2}s ({report})", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let v = store.open_folder("bench", "INBOX").unwrap();
    println!(
        "open_folder of {} messages: {:?}",
        v.messages.len(),
        t.elapsed()
    );
    let before = store.stats();
    let t = Instant::now();
    let mut deletes = 0u64;
    for f in 0..folders {
        let name = if f == 0 {
            "INBOX".to_string()
        } else {
            format!("INBOX/f{f}")
        };
        let view = store.open_folder("bench", &name).unwrap();
        let mut uids: Vec<u32> = view.messages.iter().map(|m| m.uid).collect();
        for i in (1..uids.len()).rev() {
            uids.swap(i, (rnd() % (i as u64 + 1)) as usize);
        }
        for uid in &uids[..uids.len() / 2] {
            store.expunge("bench", &name, &[*uid]).unwrap();
            deletes += 1;
        }
    }
    let after = store.stats();
    let frags: u64 = after.folders.iter().map(|f| f.fragments).sum();
    println!(
        "{deletes} deletes: {:.1}s; journal bytes/delete {:.0}, data bytes moved {} MiB, fragments {frags}",
        t.elapsed().as_secs_f64(),
        (after.journal_bytes_written - before.journal_bytes_written) as f64 / deletes as f64,
        (after.data_bytes_written - before.data_bytes_written) >> 20
    );
    let t = Instant::now();
    let r = store.fsck(false, &mut |_, _| {}).unwrap();
    println!(
        "fsck {:.1}s: {}",
        t.elapsed().as_secs_f64(),
        r.to_string().lines().last().unwrap_or("")
    );
    assert!(r.is_clean());
}
