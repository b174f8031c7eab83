//! Inputs the fuzz targets found (fuzz/, docs/fuzzing.md), each kept as the smallest test that
//! failed before its fix.

mod common;

use std::sync::Arc;

use common::*;
use disk::{Disk, SimDisk};
use store::{Mailstore, Store, StoreConfig};

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

/// fuzz store_journal: an Append record (checksum chain intact) naming an extent at unit
/// u64::MAX overflowed `start + units` at open, and one naming a unit far past the volume
/// had open grow the volume to it. Such a record is now damage: refused without salvage,
/// dropped with it.
#[test]
fn append_record_with_an_extent_out_of_range_is_damage() {
    for start in [u64::MAX, 1 << 55] {
        let disk = SimDisk::new();
        let store = open(&disk, small_config());
        store.append("u", "INBOX", message(1, ONE_UNIT)).unwrap();
        // The second append's record is the Append alone (the first also creates INBOX).
        store.append("u", "INBOX", message(2, ONE_UNIT)).unwrap();
        drop(store);
        let mut log = file_bytes(&disk, "index-00000001.log");
        // The last record is the Append: tag 5, folder u32, uid u32, start u64 (payload
        // bytes 9..17); its CRC chains on the previous record's.
        let records = records(&log);
        let (at, len) = *records.last().unwrap();
        assert_eq!(log[at + 8], 5, "the last record is the Append");
        log[at + 17..at + 25].copy_from_slice(&start.to_le_bytes());
        let (p, _) = records[records.len() - 2];
        let prev = u32::from_le_bytes(log[p + 4..p + 8].try_into().unwrap());
        let crc = crc32c::crc32c_append(prev, &log[at..at + 4]);
        let crc = crc32c::crc32c_append(crc, &log[at + 8..at + 8 + len]);
        log[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
        write_file(&disk, "index-00000001.log", &log);
        let err = Store::open(Arc::new(disk.clone()), &dir(), small_config())
            .err()
            .expect("a record naming no real extent does not open");
        assert!(err.to_string().contains("out of range"), "{err}");
        let (store, report) = Store::open(Arc::new(disk.clone()), &dir(), salvage()).unwrap();
        assert_eq!(store.uids("u", "INBOX").unwrap(), vec![1], "{report}");
        drop(store);
        // The salvaging open checkpointed: the damage is gone from disk.
        Store::open(Arc::new(disk), &dir(), small_config()).unwrap();
    }
}

/// fuzz store_journal: with salvage, a second header section (checksum intact) that is
/// refused still left its generation behind, because the fields were stored before they
/// were checked; the checkpoint at the end of the open then wrote a snapshot naming that
/// generation, and the store no longer opened. A refused header now changes nothing.
#[test]
fn refused_second_header_section_leaves_nothing_behind() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    store.append("u", "INBOX", message(1, ONE_UNIT)).unwrap();
    store.checkpoint().unwrap();
    drop(store);
    let snap = file_bytes(&disk, "index.snap");
    let len = u32::from_le_bytes(snap[9..13].try_into().unwrap()) as usize;
    let header_end = 17 + len;
    let mut bad = snap[8..header_end].to_vec();
    bad[17..25].copy_from_slice(&(1u64 << 63).to_le_bytes());
    let crc = crc32c::crc32c(&bad[..5 + len]);
    bad[5 + len..].copy_from_slice(&crc.to_le_bytes());
    let mut damaged = snap[..header_end].to_vec();
    damaged.extend_from_slice(&bad);
    damaged.extend_from_slice(&snap[header_end..]);
    write_file(&disk, "index.snap", &damaged);

    let (store, report) = Store::open(Arc::new(disk.clone()), &dir(), salvage()).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("past any real one")),
        "{report}"
    );
    store.checkpoint().unwrap();
    drop(store);
    let (store, _) = Store::open(Arc::new(disk), &dir(), small_config()).expect("reopens");
    assert_eq!(store.read("u", "INBOX", 1).unwrap(), body(1, ONE_UNIT));
}

/// fuzz store_journal: two Append records (checksums intact) naming the same units opened
/// without complaint (the allocator only listed an overlap); expunging one then freed the
/// other's units too, and the allocator's accounting broke (the S5 debug assertion after the
/// commit of the defrag that followed). Shared units are now damage: refused without
/// salvage, the later message dropped with it.
#[test]
fn messages_sharing_units_are_damage() {
    let disk = SimDisk::new();
    let store = open(&disk, small_config());
    store.append("u", "INBOX", message(1, ONE_UNIT)).unwrap();
    store.append("u", "INBOX", message(2, ONE_UNIT)).unwrap();
    store.append("u", "INBOX", message(3, ONE_UNIT)).unwrap();
    drop(store);
    let mut log = file_bytes(&disk, "index-00000001.log");
    let mut pos = 4096usize;
    let mut records = Vec::new();
    loop {
        let len = u32::from_le_bytes(log[pos..pos + 4].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        records.push((pos, len));
        pos += 8 + len;
    }
    // UID 3's Append (the last record, tag 5, start u64 at payload 9..17) points at UID 2's
    // units; the chain from there on is recomputed.
    let (at, len) = records[records.len() - 1];
    let (before, before_len) = records[records.len() - 2];
    assert_eq!((log[at + 8], log[before + 8]), (5, 5));
    let start2 = log[before + 17..before + 25].to_vec();
    log[at + 17..at + 25].copy_from_slice(&start2);
    let prev = u32::from_le_bytes(log[before + 4..before + 8].try_into().unwrap());
    let crc = crc32c::crc32c_append(prev, &log[at..at + 4]);
    let crc = crc32c::crc32c_append(crc, &log[at + 8..at + 8 + len]);
    log[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
    assert!(before_len > 0);
    write_file(&disk, "index-00000001.log", &log);

    let err = Store::open(Arc::new(disk.clone()), &dir(), small_config())
        .err()
        .expect("messages sharing units do not open without salvage");
    assert!(err.to_string().contains("shares units"), "{err}");
    let (store, report) = Store::open(Arc::new(disk.clone()), &dir(), salvage()).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("UID 3 shares units")),
        "{report}"
    );
    assert_eq!(store.uids("u", "INBOX").unwrap(), vec![1, 2]);
    // What used to break the accounting: expunges, with the defrag after them.
    store.expunge("u", "INBOX", &[1]).unwrap();
    store.expunge("u", "INBOX", &[2]).unwrap();
    store.append("u", "INBOX", message(4, ONE_UNIT)).unwrap();
    assert_clean(&store);
    drop(store);
    let (store, _) = Store::open(Arc::new(disk), &dir(), small_config()).unwrap();
    assert_eq!(store.read("u", "INBOX", 4).unwrap(), body(4, ONE_UNIT));
}

/// The records of `index-00000001.log`: (offset, payload length), from 4096.
fn records(log: &[u8]) -> Vec<(usize, usize)> {
    let mut pos = 4096usize;
    let mut out = Vec::new();
    loop {
        let len = u32::from_le_bytes(log[pos..pos + 4].try_into().unwrap()) as usize;
        if len == 0 {
            return out;
        }
        out.push((pos, len));
        pos += 8 + len;
    }
}

/// Appends a record with `payload` to the chain of `index-00000001.log`.
fn append_record(disk: &SimDisk, payload: &[u8]) {
    let mut log = file_bytes(disk, "index-00000001.log");
    let (last, last_len) = *records(&log).last().unwrap();
    let prev = u32::from_le_bytes(log[last + 4..last + 8].try_into().unwrap());
    let len = (payload.len() as u32).to_le_bytes();
    let crc = crc32c::crc32c_append(crc32c::crc32c_append(prev, &len), payload);
    let at = last + 8 + last_len;
    log[at..at + 4].copy_from_slice(&len);
    log[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
    log[at + 8..at + 8 + payload.len()].copy_from_slice(payload);
    write_file(disk, "index-00000001.log", &log);
}

/// fuzz store_journal: a CreateFolder record (checksums intact) with folder id u32::MAX set
/// the next folder id to u32::MAX, and the next folder the store created overflowed
/// `next_id + 1` (a panic with overflow checks; a reused folder id without). A MODSEQ of
/// u64::MAX did the same to `highest_modseq + 1`. Both are now out of range, damage.
#[test]
fn folder_id_and_modseq_at_the_end_of_their_range_are_damage() {
    let create = |id: u32| {
        let mut p = vec![1u8];
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&7u32.to_le_bytes());
        p.extend_from_slice(&1u16.to_le_bytes());
        p.extend_from_slice(b"v");
        p.extend_from_slice(&5u16.to_le_bytes());
        p.extend_from_slice(b"INBOX");
        p
    };
    // Expunge (tag 7) in folder 1 with MODSEQ u64::MAX and no UIDs.
    let mut expunge = vec![7u8];
    expunge.extend_from_slice(&1u32.to_le_bytes());
    expunge.extend_from_slice(&u64::MAX.to_le_bytes());
    expunge.extend_from_slice(&0u32.to_le_bytes());
    for payload in [create(u32::MAX), expunge] {
        let disk = SimDisk::new();
        let store = open(&disk, small_config());
        store.append("u", "INBOX", message(1, ONE_UNIT)).unwrap();
        drop(store);
        append_record(&disk, &payload);
        let err = Store::open(Arc::new(disk.clone()), &dir(), small_config())
            .err()
            .expect("an id or MODSEQ out of range does not open without salvage");
        assert!(err.to_string().contains("out of range"), "{err}");
        let (store, _) = Store::open(Arc::new(disk.clone()), &dir(), salvage()).unwrap();
        store.append("w", "INBOX", message(2, ONE_UNIT)).unwrap();
        store.append("u", "INBOX", message(3, ONE_UNIT)).unwrap();
        drop(store);
        let (store, _) = Store::open(Arc::new(disk), &dir(), small_config()).unwrap();
        assert_eq!(store.read("w", "INBOX", 1).unwrap(), body(2, ONE_UNIT));
    }
}
