//! Inputs the fuzz targets found (fuzz/, docs/fuzzing.md), each kept as the smallest test that
//! failed before its fix.

mod common;

use std::sync::Arc;

use common::*;
use disk::{Disk, SimDisk};
use store::{Store, StoreConfig};

fn file_bytes(disk: &SimDisk, name: &str) -> Vec<u8> {
    let f = disk.open(&path(name), false).unwrap();
    let mut v = vec![0u8; f.len().unwrap() as usize];
    f.read_exact_at(&mut v, 0).unwrap();
    v
}

fn write_file(disk: &SimDisk, name: &str, bytes: &[u8]) {
    let f = disk.open(&path(name), true).unwrap();
    f.set_len(0).unwrap();
    f.write_all_at(bytes, 0).unwrap();
    f.sync_data().unwrap();
    disk.sync_dir(&dir()).unwrap();
}

fn salvage() -> StoreConfig {
    StoreConfig {
        salvage: true,
        ..small_config()
    }
}

/// fuzz store_journal: a snapshot whose header section (checksum intact) names generation
/// u64::MAX made open compute the next log's generation with an overflowing `+ 1` (a panic
/// with overflow checks on, a wrap to generation 0 without). Now the snapshot is refused.
#[test]
fn snapshot_naming_the_last_generation_is_refused_not_overflowed() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    store.append("u", "INBOX", message(1, ONE_UNIT)).unwrap();
    store.checkpoint().unwrap();
    drop(store);
    let mut snap = file_bytes(&disk, "index.snap");
    // Magic (8), then the header section: kind u8, len u32, payload (version u32, store id
    // u64, generation u64, ...), CRC-32C of kind, len and payload.
    assert_eq!(snap[8], 1, "the header section comes first");
    let len = u32::from_le_bytes(snap[9..13].try_into().unwrap()) as usize;
    snap[25..33].copy_from_slice(&u64::MAX.to_le_bytes());
    let crc = crc32c::crc32c(&snap[8..13 + len]);
    snap[13 + len..17 + len].copy_from_slice(&crc.to_le_bytes());
    write_file(&disk, "index.snap", &snap);
    for config in [small_config(), salvage()] {
        let err = Store::open(Arc::new(disk.clone()), &dir(), config)
            .err()
            .expect("a snapshot past every generation does not open");
        assert!(err.to_string().contains("index.snap"), "{err}");
    }
}

/// The same bound for log names: a stray `index-<u64::MAX>.log` is not a journal.
#[test]
fn log_named_past_every_generation_is_ignored() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    store.append("u", "INBOX", message(1, ONE_UNIT)).unwrap();
    drop(store);
    write_file(&disk, &format!("index-{}.log", u64::MAX), b"stray");
    let (store, report) = Store::open(Arc::new(disk.clone()), &dir(), small_config()).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("ignored unknown file")),
        "{report}"
    );
    assert_eq!(store.read("u", "INBOX", 1).unwrap(), body(1, ONE_UNIT));
}
