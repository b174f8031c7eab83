//! Importing mail (`Store::import` and its parts): UIDVALIDITY and UIDs kept where they can
//! be, UIDNEXT raised, keyword limits reported, one sync round per batch, and a crash in the
//! middle of an import leaving a prefix of whole batches.

mod common;

use common::*;
use disk::SimDisk;
use proptest::prelude::*;
use store::{Flags, ImportedMessage, Mailstore, NewMessage, StoreConfig, StoreError};

fn imported(uid: Option<u32>, tag: u64, len: usize) -> ImportedMessage {
    ImportedMessage {
        uid,
        flags: Flags::SEEN,
        keywords: vec![],
        internal_date: 1_600_000_000 + tag as i64,
        content: body(tag, len),
    }
}

#[test]
fn uids_uidvalidity_and_uidnext_survive_reopen_and_checkpoint() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    let messages = vec![
        imported(Some(3), 1, 300),
        imported(Some(7), 2, 900),
        ImportedMessage {
            keywords: vec!["$Junk".into(), "NonJunk".into()],
            flags: Flags::ANSWERED | Flags::DELETED,
            ..imported(Some(20), 3, 100)
        },
    ];
    let report = store
        .import(
            "ann",
            "Archive/2020",
            Some(1_275_660_208),
            Some(25),
            messages,
        )
        .unwrap();
    assert!(report.target.created);
    assert!(report.target.uidvalidity_kept);
    let uids: Vec<u32> = report
        .outcomes
        .iter()
        .map(|o| o.as_ref().unwrap().uid)
        .collect();
    assert_eq!(uids, vec![3, 7, 20]);
    assert!(report.outcomes.iter().all(|o| o.as_ref().unwrap().uid_kept));
    assert_eq!(report.status.uidvalidity, 1_275_660_208);
    assert_eq!(report.status.uidnext, 25);
    // The parent was created too, with a UIDVALIDITY of the store's own.
    assert_eq!(
        store.list_folders("ann"),
        vec!["Archive".to_string(), "Archive/2020".to_string()]
    );
    assert_ne!(
        store.status("ann", "Archive").unwrap().uidvalidity,
        1_275_660_208
    );
    // New mail continues above the source's next UID.
    store.append("ann", "Archive/2020", message(9, 50)).unwrap();
    let check = |store: &store::Store| {
        let view = store.open_folder("ann", "Archive/2020").unwrap();
        let uids: Vec<u32> = view.messages.iter().map(|m| m.uid).collect();
        assert_eq!(uids, vec![3, 7, 20, 25]);
        assert_eq!(view.status.uidnext, 26);
        assert_eq!(view.status.uidvalidity, 1_275_660_208);
        assert_eq!(view.messages[2].flags, Flags::ANSWERED | Flags::DELETED);
        assert_eq!(
            view.messages[2].keywords,
            vec!["$Junk".to_string(), "NonJunk".to_string()]
        );
        assert_eq!(view.messages[1].internal_date, 1_600_000_002);
        assert_eq!(store.read("ann", "Archive/2020", 7).unwrap(), body(2, 900));
    };
    check(&store);
    drop(store);
    let store = open(&disk, small_config());
    check(&store);
    store.checkpoint().unwrap();
    drop(store);
    disk.crash(5, 0.0);
    let store = open(&disk, small_config());
    check(&store);
    assert_clean(&store);
}

#[test]
fn the_source_uidnext_survives_a_checkpoint_without_messages_above_it() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    let report = store
        .import(
            "ann",
            "INBOX",
            Some(77),
            Some(1000),
            vec![imported(Some(5), 1, 100)],
        )
        .unwrap();
    assert_eq!(report.status.uidnext, 1000);
    // Raising to a lower value changes nothing, and costs no record.
    let before = disk.stats();
    assert_eq!(
        store.raise_uidnext("ann", "INBOX", 10).unwrap().uidnext,
        1000
    );
    assert_eq!(disk.stats().syncs, before.syncs);
    assert!(store.raise_uidnext("ann", "INBOX", u32::MAX).is_err());
    let modseq = store.status("ann", "INBOX").unwrap().highest_modseq;
    drop(store);
    let store = open(&disk, small_config());
    let st = store.status("ann", "INBOX").unwrap();
    assert_eq!(
        (st.uidnext, st.uidvalidity, st.highest_modseq),
        (1000, 77, modseq)
    );
    store.checkpoint().unwrap();
    drop(store);
    let store = open(&disk, small_config());
    assert_eq!(store.status("ann", "INBOX").unwrap().uidnext, 1000);
    assert_eq!(
        store.append("ann", "INBOX", message(1, 10)).unwrap().uid,
        1000
    );
    assert_clean(&store);
}

#[test]
fn uids_that_go_backwards_or_collide_are_reassigned() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    for i in 0..3 {
        store.append("bo", "INBOX", message(i, 100)).unwrap();
    }
    let before = store.status("bo", "INBOX").unwrap();
    let report = store
        .import(
            "bo",
            "INBOX",
            Some(42),
            Some(500),
            vec![
                imported(Some(2), 10, 100),  // collides with an existing UID
                imported(Some(10), 11, 100), // ascends: kept
                imported(Some(9), 12, 100),  // goes backwards
                imported(None, 13, 100),     // none given
                imported(Some(12), 14, 100), // collides with the one just assigned
                imported(Some(30), 15, 100),
            ],
        )
        .unwrap();
    // An existing folder keeps its own UIDVALIDITY, so the source's UIDNEXT means nothing.
    assert!(!report.target.created);
    assert!(!report.target.uidvalidity_kept);
    let got: Vec<(u32, bool)> = report
        .outcomes
        .iter()
        .map(|o| {
            let o = o.as_ref().unwrap();
            (o.uid, o.uid_kept)
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (4, false),
            (10, true),
            (11, false),
            (12, false),
            (13, false),
            (30, true)
        ]
    );
    assert_eq!(report.status.uidvalidity, before.uidvalidity);
    assert_eq!(report.status.uidnext, 31);
    assert_clean(&store);
}

#[test]
fn a_folder_keeps_128_keywords_and_the_rest_are_reported() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    // One message with 100 keywords, a second with 40 more, one with a bad keyword.
    let first: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
    let second: Vec<String> = (95..135).map(|i| format!("k{i}")).collect();
    let report = store
        .import(
            "cy",
            "Tags",
            None,
            None,
            vec![
                ImportedMessage {
                    keywords: first.clone(),
                    ..imported(None, 1, 100)
                },
                ImportedMessage {
                    keywords: second,
                    ..imported(None, 2, 100)
                },
                ImportedMessage {
                    keywords: vec!["bad(keyword".into(), "ok".into()],
                    ..imported(None, 3, 100)
                },
            ],
        )
        .unwrap();
    let outcomes: Vec<_> = report
        .outcomes
        .iter()
        .map(|o| o.as_ref().unwrap())
        .collect();
    assert!(outcomes[0].dropped_keywords.is_empty());
    // 100 + 28 new ones fit; k128..k134 do not.
    let dropped: Vec<&str> = outcomes[1]
        .dropped_keywords
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(
        dropped,
        (128..135).map(|i| format!("k{i}")).collect::<Vec<_>>()
    );
    assert!(outcomes[1].dropped_keywords[0].1.contains("128 keywords"));
    let dropped: Vec<&str> = outcomes[2]
        .dropped_keywords
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(dropped, vec!["bad(keyword", "ok"]);
    let view = store.open_folder("cy", "Tags").unwrap();
    assert_eq!(view.messages[0].keywords, first);
    assert_eq!(view.messages[1].keywords.len(), 33);
    assert!(view.messages[2].keywords.is_empty());
    assert_clean(&store);
}

#[test]
fn a_message_too_large_is_refused_alone() {
    let disk = SimDisk::new();
    let config = StoreConfig {
        message_bytes_max: 1000,
        ..small_config()
    };
    let store = open(&disk, config.clone());
    let report = store
        .import(
            "dee",
            "INBOX",
            None,
            None,
            vec![
                imported(Some(1), 1, 500),
                imported(Some(2), 2, 5000),
                imported(Some(3), 3, 500),
            ],
        )
        .unwrap();
    assert!(report.outcomes[0].is_ok());
    assert!(matches!(
        report.outcomes[1],
        Err(StoreError::TooLarge { .. })
    ));
    assert_eq!(report.outcomes[2].as_ref().unwrap().uid, 3);
    assert_eq!(store.uids("dee", "INBOX").unwrap(), vec![1, 3]);
}

#[test]
fn a_batch_is_one_sync_round_and_one_record() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    store.import_folder("eve", "INBOX", Some(9)).unwrap();
    let messages: Vec<ImportedMessage> = (0..200).map(|i| imported(None, i, 700)).collect();
    let batch = store.prepare_import("eve", "INBOX", messages).unwrap();
    assert_eq!(batch.len(), 200);
    let before = disk.stats();
    let io = store.io_counters();
    let outcomes = store.commit_import(batch).unwrap();
    assert!(outcomes.iter().all(|o| o.is_ok()));
    assert_eq!(disk.stats().syncs - before.syncs, 2);
    let after = store.io_counters();
    assert_eq!(after.data_syncs - io.data_syncs, 1);
    assert_eq!(after.journal_syncs - io.journal_syncs, 1);
    assert_eq!(after.messages_appended - io.messages_appended, 200);
    // Store::import splits by the batch limits.
    let config = StoreConfig {
        batch_messages_max: 50,
        ..small_config()
    };
    let disk = SimDisk::new();
    let store = open(&disk, config);
    let messages: Vec<ImportedMessage> = (0..120).map(|i| imported(None, i, 700)).collect();
    let io = store.io_counters();
    store.import("eve", "INBOX", None, None, messages).unwrap();
    let after = store.io_counters();
    assert_eq!(after.batches - io.batches, 3);
    assert_eq!(after.data_syncs - io.data_syncs, 3);
}

#[test]
fn a_far_future_uidvalidity_is_not_kept() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    let t = store
        .import_folder("fay", "INBOX", Some(u32::MAX - 5))
        .unwrap();
    assert!(t.created && !t.uidvalidity_kept);
    assert!(t.status.uidvalidity < u32::MAX - 5);
    let t = store.import_folder("fay", "Zero", Some(0)).unwrap();
    assert!(t.created && !t.uidvalidity_kept);
    // An existing folder with the same UIDVALIDITY (a resumed import) counts as kept.
    let again = store
        .import_folder("fay", "INBOX", Some(t.status.uidvalidity))
        .unwrap();
    assert!(!again.created);
    let same = store
        .import_folder("fay", "Zero", Some(t.status.uidvalidity))
        .unwrap();
    assert!(same.uidvalidity_kept);
    assert!(matches!(
        store.import_folder("fay", "bad*name", None),
        Err(StoreError::InvalidName { .. })
    ));
}

#[test]
fn imports_and_deliveries_interleave() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    store.import_folder("gus", "INBOX", Some(100)).unwrap();
    let batch = store
        .prepare_import(
            "gus",
            "INBOX",
            vec![imported(Some(10), 1, 100), imported(Some(11), 2, 100)],
        )
        .unwrap();
    // A delivery commits between prepare and commit: the import's UIDs still ascend past it.
    assert_eq!(
        store.append("gus", "INBOX", message(3, 100)).unwrap().uid,
        1
    );
    let out = store.commit_import(batch).unwrap();
    assert_eq!(out[0].as_ref().unwrap().uid, 10);
    let batch = store
        .prepare_import("gus", "INBOX", vec![imported(Some(12), 4, 100)])
        .unwrap();
    assert_eq!(
        store.append("gus", "INBOX", message(5, 100)).unwrap().uid,
        12
    );
    let out = store.commit_import(batch).unwrap();
    assert_eq!(out[0].as_ref().unwrap().uid, 13);
    assert!(!out[0].as_ref().unwrap().uid_kept);
    // A folder deleted under a prepared batch fails the whole call.
    store.create_folder("gus", "Gone").unwrap();
    let batch = store
        .prepare_import("gus", "Gone", vec![imported(None, 6, 100)])
        .unwrap();
    store.delete_folder("gus", "Gone").unwrap();
    assert!(matches!(
        store.commit_import(batch),
        Err(StoreError::NoSuchFolder { .. })
    ));
    assert_clean(&store);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// An import of several batches cut by an I/O failure at any point and a power cut
    /// leaves every batch whole or absent, and the batches present are a prefix; a second
    /// run of the same import then finishes it with the same UIDs.
    #[test]
    fn a_crash_leaves_a_prefix_of_whole_batches(
        batches in proptest::collection::vec(1usize..6, 1..6),
        fail_at in 0u64..30,
        seed in any::<u64>(),
        keep in 0u8..3,
    ) {
        let disk = SimDisk::new();
        let store = open(&disk, small_config());
        store.append("hal", "INBOX", message(999, 100)).unwrap();
        let mut uid = 10;
        let mut tag = 0;
        let mut all: Vec<Vec<(u32, u64, usize)>> = Vec::new();
        for &n in &batches {
            let mut b = Vec::new();
            for _ in 0..n {
                b.push((uid, tag, 200 + (tag as usize * 97) % 1500));
                uid += 2;
                tag += 1;
            }
            all.push(b);
        }
        let run = |store: &store::Store| -> Result<(), StoreError> {
            store.import_folder("hal", "Old/Mail", Some(4242))?;
            for b in &all {
                let msgs = b.iter().map(|&(u, t, len)| imported(Some(u), t, len)).collect();
                let batch = store.prepare_import("hal", "Old/Mail", msgs)?;
                for o in store.commit_import(batch)? {
                    o?;
                }
            }
            store.raise_uidnext("hal", "Old/Mail", uid + 100)?;
            Ok(())
        };
        disk.fail_after(fail_at);
        let finished = run(&store).is_ok();
        drop(store);
        disk.crash(seed, keep as f64 / 2.0);
        let store = open(&disk, small_config());
        assert_clean(&store);
        // The delivery before the import always survives.
        prop_assert_eq!(store.uids("hal", "INBOX").unwrap(), vec![1]);
        let present = store.uids("hal", "Old/Mail").unwrap_or_default();
        let mut expected: Vec<u32> = Vec::new();
        let mut matched = present.is_empty();
        for b in &all {
            expected.extend(b.iter().map(|&(u, _, _)| u));
            if present == expected {
                matched = true;
            }
        }
        prop_assert!(matched, "not a prefix of whole batches: {:?}", present);
        if finished {
            prop_assert_eq!(&present, &expected);
        }
        for b in &all {
            for &(u, t, len) in b {
                if present.contains(&u) {
                    prop_assert_eq!(store.read("hal", "Old/Mail", u).unwrap(), body(t, len));
                }
            }
        }
        // Resuming: the same import again skips nothing by itself (the driver skips UIDs
        // below UIDNEXT), but UIDs already present are reassigned, never duplicated.
        let st = store.status("hal", "Old/Mail");
        if let Ok(st) = st {
            prop_assert_eq!(st.uidvalidity, 4242);
            for b in &all {
                let rest: Vec<ImportedMessage> = b
                    .iter()
                    .filter(|&&(u, _, _)| u >= st.uidnext)
                    .map(|&(u, t, len)| imported(Some(u), t, len))
                    .collect();
                if rest.is_empty() {
                    continue;
                }
                let batch = store.prepare_import("hal", "Old/Mail", rest).unwrap();
                for o in store.commit_import(batch).unwrap() {
                    prop_assert!(o.unwrap().uid_kept);
                }
            }
            prop_assert_eq!(store.uids("hal", "Old/Mail").unwrap(), expected);
        }
    }
}

#[test]
fn appending_after_an_import_never_reuses_a_uid() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    store
        .import(
            "ivy",
            "INBOX",
            Some(5),
            Some(50),
            vec![imported(Some(40), 1, 10)],
        )
        .unwrap();
    let a = store
        .append(
            "ivy",
            "INBOX",
            NewMessage {
                content: body(2, 10),
                ..NewMessage::default()
            },
        )
        .unwrap();
    assert_eq!((a.uid, a.uidvalidity), (50, 5));
}

#[test]
fn raised_modseq_survives_reopen_and_checkpoint_and_later_changes_ascend_past_it() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    let target = store.import_folder("moe", "INBOX", Some(4242)).unwrap();
    assert!(target.created && target.uidvalidity_kept);
    assert_eq!(
        store
            .raise_modseq("moe", "INBOX", 5000)
            .unwrap()
            .highest_modseq,
        5000
    );
    // Lower or equal: nothing changes, no record.
    let before = disk.stats();
    assert_eq!(
        store
            .raise_modseq("moe", "INBOX", 17)
            .unwrap()
            .highest_modseq,
        5000
    );
    assert_eq!(
        store
            .raise_modseq("moe", "INBOX", 5000)
            .unwrap()
            .highest_modseq,
        5000
    );
    assert_eq!(disk.stats().syncs, before.syncs);
    assert!(store.raise_modseq("moe", "INBOX", u64::MAX).is_err());
    assert!(store.raise_modseq("moe", "Nope", 9).is_err());
    let batch = store
        .prepare_import("moe", "INBOX", vec![imported(Some(9), 1, 100)])
        .unwrap();
    let outcome = store.commit_import(batch).unwrap().remove(0).unwrap();
    assert!(outcome.uid_kept);
    assert_eq!(outcome.modseq, 5001);
    drop(store);
    let store = open(&disk, small_config());
    assert_eq!(store.status("moe", "INBOX").unwrap().highest_modseq, 5001);
    let modseq = store
        .set_flags(
            "moe",
            "INBOX",
            &[9],
            store::FlagOp::Add,
            Flags::FLAGGED,
            &[],
        )
        .unwrap();
    assert_eq!(modseq, 5002);
    store.checkpoint().unwrap();
    drop(store);
    let store = open(&disk, small_config());
    let view = store.open_folder("moe", "INBOX").unwrap();
    assert_eq!(view.status.highest_modseq, 5002);
    assert_eq!(view.messages[0].modseq, 5002);
    assert_clean(&store);
}

/// A moved folder keeps its source's MODSEQs exactly (S4's one exception): restored after
/// import, they survive a reopen (journal replay) and a checkpoint (snapshot), and the next
/// change ascends past the restored HIGHESTMODSEQ. Bad requests write nothing.
#[test]
fn restored_modseqs_survive_reopen_and_checkpoint() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    store.import_folder("moe", "INBOX", Some(4242)).unwrap();
    let batch = store
        .prepare_import(
            "moe",
            "INBOX",
            vec![
                imported(Some(3), 1, 100),
                imported(Some(7), 2, 100),
                imported(Some(8), 3, 100),
            ],
        )
        .unwrap();
    assert!(
        store
            .commit_import(batch)
            .unwrap()
            .iter()
            .all(|o| o.is_ok())
    );
    // The source's MODSEQs, not in UID order, and a HIGHESTMODSEQ of an expunged change.
    let before = disk.stats();
    for (entries, highest) in [
        (vec![(3, 12), (7, 0)], 20u64),
        (vec![(3, 21)], 20),
        (vec![(4, 5)], 20),
        (vec![(3, 12)], 2),
    ] {
        assert!(
            matches!(
                store.restore_modseqs("moe", "INBOX", entries.clone(), highest),
                Err(StoreError::Invalid(_))
            ),
            "{entries:?} {highest}"
        );
    }
    assert_eq!(disk.stats().syncs, before.syncs, "a refusal writes nothing");
    let status = store
        .restore_modseqs("moe", "INBOX", vec![(3, 12), (7, 2), (8, 5)], 20)
        .unwrap();
    assert_eq!(status.highest_modseq, 20);
    let modseqs = |store: &store::Store| -> Vec<(u32, u64)> {
        let view = store.open_folder("moe", "INBOX").unwrap();
        view.messages.iter().map(|m| (m.uid, m.modseq)).collect()
    };
    assert_eq!(modseqs(&store), vec![(3, 12), (7, 2), (8, 5)]);
    drop(store);
    let store = open(&disk, small_config());
    assert_eq!(modseqs(&store), vec![(3, 12), (7, 2), (8, 5)]);
    assert_eq!(store.status("moe", "INBOX").unwrap().highest_modseq, 20);
    store.checkpoint().unwrap();
    drop(store);
    let store = open(&disk, small_config());
    assert_eq!(modseqs(&store), vec![(3, 12), (7, 2), (8, 5)]);
    let modseq = store
        .set_flags("moe", "INBOX", &[7], store::FlagOp::Add, Flags::SEEN, &[])
        .unwrap();
    assert_eq!(modseq, 21);
    assert_clean(&store);
}
