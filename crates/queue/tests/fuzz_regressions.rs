//! Inputs the fuzz targets found (fuzz/, docs/fuzzing.md), each kept as the smallest test that
//! failed before its fix.

use std::path::Path;
use std::sync::Arc;

use disk::{Disk, SimDisk};
use queue::{Envelope, Queue, QueueConfig, Recipient, RecipientStatus};

const DIR: &str = "/q";
const SEGMENT: &str = "/q/main-00000001.seg";

fn config() -> QueueConfig {
    QueueConfig {
        segment_bytes: 1 << 20,
        ..QueueConfig::default()
    }
}

fn envelope() -> Envelope {
    Envelope {
        sender: "a@example.org".into(),
        recipients: vec![Recipient {
            address: "b@example.org".into(),
            status: RecipientStatus::Pending,
            last_error: None,
        }],
        arrival_ms: 1,
    }
}

fn read(disk: &SimDisk, path: &str, offset: u64, len: usize) -> Vec<u8> {
    let file = disk.open(Path::new(path), false).unwrap();
    let mut bytes = vec![0u8; len];
    file.read_exact_at(&mut bytes, offset).unwrap();
    bytes
}

/// fuzz queue_record: a slot whose checksum is good but whose message id is u64::MAX made
/// recovery compute the next id with an overflowing `+ 1` (a panic with overflow checks on,
/// a wrap to id 0 without, and ids handed out again). Such a slot is now damage.
#[test]
fn slot_with_the_last_message_id_is_damage_not_an_overflow() {
    let disk = SimDisk::new();
    let (queue, _) = Queue::open(Arc::new(disk.clone()), Path::new(DIR), config()).unwrap();
    queue
        .enqueue(envelope(), b"Subject: x\r\n\r\nx\r\n".to_vec())
        .unwrap();
    queue.close().unwrap();
    // Slot 0 at 4096: id u64 at 0, CRC-32C at 60 chained from crc32c(generation) over
    // bytes 0..56 (docs/storage.md, Part 1). The generation is at 24 in the header.
    let header = read(&disk, SEGMENT, 0, 64);
    let generation = u64::from_le_bytes(header[24..32].try_into().unwrap());
    let mut slot = read(&disk, SEGMENT, 4096, 64);
    slot[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&generation.to_le_bytes()), &slot[..56]);
    slot[60..64].copy_from_slice(&crc.to_le_bytes());
    disk.corrupt(Path::new(SEGMENT), 4096, &slot).unwrap();

    let (queue, report) = Queue::open(Arc::new(disk.clone()), Path::new(DIR), config()).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("implausible message id")),
        "{report:?}"
    );
    let id = queue.enqueue(envelope(), b"y".to_vec()).unwrap();
    assert!(id > 0 && id < u64::MAX, "new id {id}");
    queue.close().unwrap();
}

/// The same bound for file names: `main-<u64::MAX>.seg` is not a segment of this queue.
#[test]
fn segment_named_past_every_sequence_number_is_ignored() {
    let disk = SimDisk::new();
    disk.create_dir_all(Path::new(DIR)).unwrap();
    let stray = format!("{DIR}/main-{}.seg", u64::MAX);
    let file = disk.open(Path::new(&stray), true).unwrap();
    file.write_all_at(b"stray", 0).unwrap();
    file.sync_data().unwrap();
    disk.sync_dir(Path::new(DIR)).unwrap();
    let (queue, report) = Queue::open(Arc::new(disk.clone()), Path::new(DIR), config()).unwrap();
    assert!(report.unreadable_segments.is_empty(), "{report:?}");
    queue.enqueue(envelope(), b"z".to_vec()).unwrap();
    queue.close().unwrap();
}
