//! Readers on other threads while appends, expunges and defrag moves run: they see only
//! committed messages, never garbage; a message expunged under them reads as gone.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use common::*;
use disk::SimDisk;
use store::{AppendRequest, Mailstore, Store, StoreConfig, StoreError};

/// Content is `body(tag, len)` with the tag in the Subject line: parse it and regenerate.
fn check_content(content: &[u8]) {
    let text = String::from_utf8_lossy(&content[..content.len().min(64)]);
    let tag: u64 = text
        .strip_prefix("Subject: message ")
        .and_then(|r| r.split('\r').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("garbage content: {text:?}"));
    assert_eq!(
        content,
        body(tag, content.len()).as_slice(),
        "content of tag {tag} damaged"
    );
}

#[test]
fn readers_see_only_committed_intact_messages() {
    let disk = SimDisk::new();
    let config = StoreConfig {
        reservation_bytes: 4096,
        defrag_move_bytes_max: 1 << 20,
        ..small_config()
    };
    let store = open(&disk, config);
    for f in ["A", "B"] {
        store.create_folder("u", f).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    // Two appenders (group commit from two threads), interleaving A and B.
    for t in 0..2u64 {
        let store = store.clone();
        handles.push(thread::spawn(move || {
            for i in 0..400u64 {
                let tag = t * 100_000 + i;
                let folder = if i % 2 == 0 { "A" } else { "B" };
                let len = 200 + (tag as usize * 37) % 2500;
                store.append("u", folder, message(tag, len)).unwrap();
            }
        }));
    }
    // An expunger with defrag on: deletes old messages of A, which moves fragments.
    {
        let store = store.clone();
        let stop = stop.clone();
        handles.push(thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let view = store.open_folder("u", "A").unwrap();
                let victims: Vec<u32> = view
                    .messages
                    .iter()
                    .map(|m| m.uid)
                    .filter(|u| u % 3 == n % 3)
                    .take(3)
                    .collect();
                store.expunge("u", "A", &victims).unwrap();
                if n % 10 == 0 {
                    store.defrag(&mut |_, _| {}).unwrap();
                }
                n += 1;
                thread::yield_now();
            }
        }));
    }
    // Readers: whole folders streamed and messages one by one.
    let mut readers = Vec::new();
    for r in 0..2 {
        let store = store.clone();
        let stop = stop.clone();
        readers.push(thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for folder in ["A", "B"] {
                    if r == 0 {
                        let mut last = 0;
                        store
                            .read_folder("u", folder, &mut |uid, content| {
                                assert!(uid > last, "UIDs ascend");
                                last = uid;
                                check_content(content);
                                reads += 1;
                                Ok(())
                            })
                            .unwrap();
                    } else {
                        let view = store.open_folder("u", folder).unwrap();
                        for m in view.messages.iter().rev().take(40) {
                            match store.read("u", folder, m.uid) {
                                Ok(content) => {
                                    assert_eq!(content.len() as u64, m.size);
                                    check_content(&content);
                                    reads += 1;
                                }
                                Err(StoreError::NoSuchMessage { .. }) => {}
                                Err(e) => panic!("reader saw {e}"),
                            }
                            match store.read_range("u", folder, m.uid, 5, 10) {
                                Ok(part) => assert_eq!(part.len(), 10),
                                Err(StoreError::NoSuchMessage { .. }) => {}
                                Err(e) => panic!("range reader saw {e}"),
                            }
                        }
                    }
                }
            }
            reads
        }));
    }
    for h in handles.drain(..2) {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    let reads: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(reads > 0);
    assert_clean(&store);
    assert_eq!(store.status("u", "B").unwrap().messages, 400);
    let s = store.stats();
    eprintln!(
        "reads {reads}, moved {}, batches {}",
        s.defrag_messages_moved, s.batches
    );
}

#[test]
fn group_commit_batches_callers_from_many_threads() {
    let disk = SimDisk::new();
    let store: Arc<Store> = open(&disk, small_config());
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let store = store.clone();
            thread::spawn(move || {
                for i in 0..40u64 {
                    let reqs = vec![AppendRequest {
                        user: format!("user{t}"),
                        folder: "INBOX".into(),
                        message: message(t * 1000 + i, 300),
                    }];
                    let r = store.append_batch(reqs);
                    r.into_iter().for_each(|r| {
                        r.unwrap();
                    });
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = store.stats();
    assert_eq!(stats.messages_appended, 320);
    assert!(stats.batches <= 320);
    // Every batch is exactly one volume sync and one journal sync.
    assert_eq!(stats.data_syncs, stats.batches);
    for t in 0..8u64 {
        let user = format!("user{t}");
        let view = store.open_folder(&user, "INBOX").unwrap();
        assert_eq!(view.messages.len(), 40);
        // One thread's appends keep their order.
        for (i, m) in view.messages.iter().enumerate() {
            assert_eq!(
                store.read(&user, "INBOX", m.uid).unwrap(),
                body(t * 1000 + i as u64, 300)
            );
        }
    }
    assert_clean(&store);
}
