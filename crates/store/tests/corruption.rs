//! Damage: flipped bits in message data, journal records (tail and middle) and the snapshot;
//! truncated journal and volume; garbage files. Open and fsck say what is wrong, keep the
//! rest, repair what can be repaired, and nothing panics.

mod common;

use std::sync::Arc;

use common::*;
use disk::{Disk, SimDisk};
use proptest::prelude::*;
use store::{Mailstore, Store, StoreConfig, StoreError};

const LOG1: &str = "index-00000001.log";

fn filled(disk: &SimDisk, config: StoreConfig, n: u64) -> Arc<Store> {
    let store = open(disk, config);
    for i in 1..=n {
        store.append("u", "INBOX", message(i, ONE_UNIT)).unwrap();
    }
    store
}

fn try_open(
    disk: &SimDisk,
    config: StoreConfig,
) -> Result<(Arc<Store>, store::OpenReport), StoreError> {
    Store::open(Arc::new(disk.clone()), &dir(), config)
}

fn file_bytes(disk: &SimDisk, name: &str) -> Vec<u8> {
    let f = disk.open(&path(name), false).unwrap();
    let mut v = vec![0u8; f.len().unwrap() as usize];
    f.read_exact_at(&mut v, 0).unwrap();
    v
}

#[test]
fn flipped_bit_in_message_data_is_found_and_repaired() {
    let disk = SimDisk::new();
    let store = filled(&disk, small_config(), 5);
    // UID 2 is the second unit after the 4096-byte volume header.
    disk.corrupt(&path("volume.dat"), 4096 + 512 + 300, b"X")
        .unwrap();
    let err = store.read("u", "INBOX", 2).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("UID 2"), "{err}");
    assert_eq!(store.read("u", "INBOX", 3).unwrap(), body(3, ONE_UNIT));
    let mut streamed = 0;
    let r = store.read_folder("u", "INBOX", &mut |_, _| {
        streamed += 1;
        Ok(())
    });
    assert!(matches!(r, Err(StoreError::Corrupt { .. })));
    let report = store.fsck(false, &mut |_, _| {}).unwrap();
    assert!(!report.is_clean());
    assert_eq!(report.findings.problems.len(), 1, "{report}");
    assert!(report.to_string().contains("u/INBOX UID 2"), "{report}");
    let report = store.fsck(true, &mut |_, _| {}).unwrap();
    assert_eq!(report.findings.repaired.len(), 1, "{report}");
    assert_clean(&store);
    let view = store.open_folder("u", "INBOX").unwrap();
    assert_eq!(
        view.messages.iter().map(|m| m.uid).collect::<Vec<_>>(),
        vec![1, 3, 4, 5]
    );
}

#[test]
fn flipped_bit_in_the_last_journal_record_is_a_torn_tail() {
    let disk = SimDisk::new();
    let store = filled(&disk, small_config(), 3);
    drop(store);
    let log = file_bytes(&disk, LOG1);
    // Find the end of the last record: records start at 4096, `len u32, crc u32, payload`.
    let mut pos = 4096usize;
    let mut last = pos;
    loop {
        let len = u32::from_le_bytes(log[pos..pos + 4].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        last = pos;
        pos += 8 + len;
    }
    disk.corrupt(&path(LOG1), (last + 10) as u64, &[log[last + 10] ^ 0x40])
        .unwrap();
    let (store, report) = try_open(&disk, small_config()).unwrap();
    assert!(report.torn_tail.is_some(), "{report}");
    assert_eq!(store.status("u", "INBOX").unwrap().messages, 2);
    assert_clean(&store);
    // New writes continue the chain over the cut record.
    store.append("u", "INBOX", message(9, 100)).unwrap();
    drop(store);
    let (store, report) = try_open(&disk, small_config()).unwrap();
    assert!(report.torn_tail.is_none(), "{report}");
    assert_eq!(store.read("u", "INBOX", 3).unwrap(), body(9, 100));
    assert_clean(&store);
}

#[test]
fn flipped_bit_in_a_middle_journal_record_refuses_open_and_salvage_keeps_the_prefix() {
    let disk = SimDisk::new();
    let store = filled(&disk, small_config(), 4);
    drop(store);
    let log = file_bytes(&disk, LOG1);
    let first_len = u32::from_le_bytes(log[4096..4100].try_into().unwrap()) as usize;
    let second = 4096 + 8 + first_len;
    disk.corrupt(&path(LOG1), (second + 12) as u64, &[log[second + 12] ^ 1])
        .unwrap();
    let err = try_open(&disk, small_config()).err().expect("must refuse");
    assert!(matches!(err, StoreError::Corrupt { .. }));
    assert!(err.to_string().contains("damaged"), "{err}");
    let (store, report) = try_open(
        &disk,
        StoreConfig {
            salvage: true,
            ..small_config()
        },
    )
    .unwrap();
    assert!(!report.problems.is_empty());
    // Record 1 appended UID 1 (and created INBOX); the rest is gone.
    assert_eq!(store.status("u", "INBOX").unwrap().messages, 1);
    assert_eq!(store.read("u", "INBOX", 1).unwrap(), body(1, ONE_UNIT));
    assert_clean(&store);
    drop(store);
    // The salvage wrote a clean checkpoint: a normal open works now.
    let (store, _) = try_open(&disk, small_config()).unwrap();
    assert_clean(&store);
}

#[test]
fn damaged_snapshot_refuses_open_salvage_keeps_the_rest_fsck_sees_it() {
    let disk = SimDisk::new();
    let store = filled(&disk, small_config(), 3);
    store.create_folder("u", "Other").unwrap();
    store.append("u", "Other", message(50, 700)).unwrap();
    store.checkpoint().unwrap();
    let snap = file_bytes(&disk, "index.snap");
    // Damage the last byte before the end section's CRC-covered bytes: the last message
    // section (folder "Other").
    let at = snap.len() - 40;
    disk.corrupt(&path("index.snap"), at as u64, &[snap[at] ^ 0xff])
        .unwrap();
    let report = store.fsck(false, &mut |_, _| {}).unwrap();
    assert!(
        report
            .findings
            .problems
            .iter()
            .any(|p| p.contains("index.snap")),
        "{report}"
    );
    drop(store);
    let err = try_open(&disk, small_config()).err().expect("must refuse");
    assert!(err.to_string().contains("index.snap"), "{err}");
    let (store, report) = try_open(
        &disk,
        StoreConfig {
            salvage: true,
            ..small_config()
        },
    )
    .unwrap();
    assert!(
        report.problems.iter().any(|p| p.contains("damaged")),
        "{report}"
    );
    assert_eq!(store.status("u", "INBOX").unwrap().messages, 3);
    assert_clean(&store);
    // fsck --repair rewrites a damaged snapshot from memory.
    let store2 = store.clone();
    store2.checkpoint().unwrap();
    let snap = file_bytes(&disk, "index.snap");
    disk.corrupt(&path("index.snap"), 20, &[snap[20] ^ 1])
        .unwrap();
    let report = store.fsck(true, &mut |_, _| {}).unwrap();
    assert!(!report.findings.repaired.is_empty(), "{report}");
    assert_clean(&store);
}

#[test]
fn truncated_journal_cuts_the_tail() {
    let disk = SimDisk::new();
    let store = filled(&disk, small_config(), 3);
    drop(store);
    let log = file_bytes(&disk, LOG1);
    let first_len = u32::from_le_bytes(log[4096..4100].try_into().unwrap()) as u64;
    disk.truncate(&path(LOG1), 4096 + 8 + first_len + 20)
        .unwrap();
    let (store, report) = try_open(&disk, small_config()).unwrap();
    assert!(report.torn_tail.is_some());
    assert_eq!(store.status("u", "INBOX").unwrap().messages, 1);
    store.append("u", "INBOX", message(7, 10)).unwrap();
    assert_clean(&store);
    // Truncated inside the header: an empty log, made again.
    drop(store);
    disk.truncate(&path(LOG1), 30).unwrap();
    let r = try_open(&disk, small_config());
    assert!(r.is_ok() || matches!(r, Err(StoreError::Corrupt { .. })));
}

#[test]
fn truncated_volume_is_reported_and_repaired() {
    let disk = SimDisk::new();
    let store = filled(&disk, small_config(), 6);
    drop(store);
    disk.truncate(&path("volume.dat"), 4096 + 3 * 512).unwrap();
    let (store, report) = try_open(&disk, small_config()).unwrap();
    assert!(
        report.problems.iter().any(|p| p.contains("extended")),
        "{report}"
    );
    assert_eq!(store.read("u", "INBOX", 3).unwrap(), body(3, ONE_UNIT));
    assert!(matches!(
        store.read("u", "INBOX", 4),
        Err(StoreError::Corrupt { .. })
    ));
    let report = store.fsck(false, &mut |_, _| {}).unwrap();
    assert_eq!(report.findings.problems.len(), 3, "{report}");
    store.fsck(true, &mut |_, _| {}).unwrap();
    assert_clean(&store);
    assert_eq!(store.status("u", "INBOX").unwrap().messages, 3);
}

#[test]
fn garbage_files() {
    let disk = SimDisk::new();
    let store = filled(&disk, small_config(), 2);
    drop(store);
    // An unknown file is ignored and mentioned.
    disk.open(&path("notes.txt"), true)
        .unwrap()
        .write_all_at(b"hello", 0)
        .unwrap();
    let (store, report) = try_open(&disk, small_config()).unwrap();
    assert!(report.problems.iter().any(|p| p.contains("notes.txt")));
    drop(store);
    // A garbage snapshot refuses the open with a clear error.
    disk.open(&path("index.snap"), true)
        .unwrap()
        .write_all_at(&[0xA5; 3000], 0)
        .unwrap();
    let err = try_open(&disk, small_config()).err().expect("must refuse");
    assert!(err.to_string().contains("index.snap"), "{err}");
    disk.remove(&path("index.snap")).unwrap();
    // A garbage volume header with an index: refused (salvage rebuilds it from the log).
    disk.corrupt(&path("volume.dat"), 0, &[0x5A; 64]).unwrap();
    let err = try_open(&disk, small_config()).err().expect("must refuse");
    assert!(err.to_string().contains("volume.dat"), "{err}");
    let (store, _) = try_open(
        &disk,
        StoreConfig {
            salvage: true,
            ..small_config()
        },
    )
    .unwrap();
    assert_eq!(store.read("u", "INBOX", 2).unwrap(), body(2, ONE_UNIT));
    assert_clean(&store);
}

#[test]
fn leftover_snapshot_tmp_is_removed() {
    let disk = SimDisk::new();
    let store = filled(&disk, small_config(), 2);
    drop(store);
    disk.open(&path("index.snap.tmp"), true)
        .unwrap()
        .write_all_at(b"torn", 0)
        .unwrap();
    let (store, report) = try_open(&disk, small_config()).unwrap();
    assert!(report.problems.iter().any(|p| p.contains("index.snap.tmp")));
    assert!(!exists(&disk, "index.snap.tmp"));
    assert_clean(&store);
}

/// Two names for one log generation (`index-1.log` beside `index-00000001.log`: a copy, never
/// made by the store) are damage: refused, and salvaged without a panic.
#[test]
fn two_names_for_one_log_generation_are_refused_or_salvaged() {
    let disk = SimDisk::new();
    let store = filled(&disk, small_config(), 2);
    drop(store);
    let log = disk.open(&path(LOG1), false).unwrap();
    let mut image = vec![0u8; log.len().unwrap() as usize];
    log.read_exact_at(&mut image, 0).unwrap();
    disk.open(&path("index-1.log"), true)
        .unwrap()
        .write_all_at(&image, 0)
        .unwrap();
    let err = try_open(&disk, small_config()).err().expect("must refuse");
    assert!(err.to_string().contains("generation"), "{err}");
    let salvage = StoreConfig {
        salvage: true,
        ..small_config()
    };
    let (store, report) = try_open(&disk, salvage).unwrap();
    assert!(
        report.problems.iter().any(|p| p.contains("salvaged")),
        "{report}"
    );
    assert_eq!(store.read("u", "INBOX", 2).unwrap(), body(2, ONE_UNIT));
    assert_clean(&store);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64), ..ProptestConfig::default() })]

    /// Random bytes after a valid journal header, or as a whole snapshot, never panic.
    #[test]
    fn random_journal_and_snapshot_bytes_never_panic(
        noise in proptest::collection::vec(any::<u8>(), 0..3000),
        keep_header in any::<bool>(),
        salvage in any::<bool>(),
        as_snapshot in any::<bool>(),
    ) {
        let disk = SimDisk::new();
        let store = filled(&disk, small_config(), 2);
        drop(store);
        let config = StoreConfig { salvage, ..small_config() };
        if as_snapshot {
            let mut bytes = if keep_header { b"MSTWSNAP".to_vec() } else { Vec::new() };
            bytes.extend_from_slice(&noise);
            disk.open(&path("index.snap"), true).unwrap().write_all_at(&bytes, 0).unwrap();
        } else {
            let start = if keep_header { 4096 } else { 0 };
            disk.corrupt(&path(LOG1), start, &noise).unwrap();
        }
        if let Ok((store, _)) = try_open(&disk, config) {
            let _ = store.fsck(true, &mut |_, _| {});
            let _ = store.open_folder("u", "INBOX");
            let _ = store.read_folder("u", "INBOX", &mut |_, _| Ok(()));
        }
    }
}
