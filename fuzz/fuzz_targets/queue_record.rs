//! The queue's on-disk decoding (docs/fuzzing.md): envelopes and records through
//! `queue::fuzzing`, and whole segment files through `queue::check` (fsck) and `Queue::open`
//! on a `SimDisk`.
//!
//! Input: a mode byte, then bytes.
//! - mode 0: an envelope; one that decodes must encode back to the same bytes.
//! - mode 1: a 64-byte slot and a record, checked the way a read checks them (with bit 2,
//!   the slot is first made to match the record, checksum included, so the envelope decoder
//!   behind the checksum is reached).
//! - mode 2: a segment header.
//! - mode 3: a segment file in compact form: flags, a 60-byte header, a slot count k, k
//!   64-byte slots, then the bytes of the record area. Flag bits ask the harness to repair
//!   the header (geometry and CRC, bit 0) and the slot chain (generations, offsets, lengths,
//!   record headers and both checksums, bit 1), as a mutator could not, so the recovery
//!   logic behind the checksums is reached; bit 2 cuts the file short, bit 3 opens the queue
//!   too and delivers, defers and fails what it hands out, bit 4 makes it a deferred
//!   segment. Never a panic; errors are fine.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use disk::{Disk, SimDisk};
use libfuzzer_sys::fuzz_target;
use queue::{Outcome, Queue, QueueConfig};

// The layout of docs/storage.md, Part 1 (crates/queue/src/format.rs).
const SEGMENT_BYTES: u64 = 1 << 20;
const HEADER_BYTES: usize = 4096;
const HEADER_USED: usize = 60;
const SLOT_BYTES: usize = 64;
const SLOT_COUNT: u32 = (SEGMENT_BYTES / 2048) as u32;
const DATA_OFFSET: usize = 36_864;
const RECORD_HEADER_BYTES: usize = 20;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn put(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

fn pad8(n: usize) -> usize {
    n.next_multiple_of(8)
}

/// The record CRC: header, then envelope and content (the status bytes are outside it).
fn record_crc(record: &[u8], n: usize, env: usize, content: usize) -> u32 {
    let crc = crc32c::crc32c(&record[..RECORD_HEADER_BYTES]);
    let from = RECORD_HEADER_BYTES + n;
    crc32c::crc32c_append(crc, &record[from..from + env + content])
}

fn envelope(bytes: &[u8]) {
    if let Some(again) = queue::fuzzing::reencode_envelope(bytes) {
        assert_eq!(again, bytes, "an envelope that decodes encodes differently");
    }
}

fn record(fix: bool, bytes: &[u8]) {
    if bytes.len() < SLOT_BYTES {
        return;
    }
    let (slot, record) = bytes.split_at(SLOT_BYTES);
    let mut slot: [u8; 64] = slot.try_into().expect("64 bytes");
    if fix && record.len() >= RECORD_HEADER_BYTES {
        let n = usize::from(u16_at(record, 8));
        let env = u32_at(record, 12) as usize;
        let content = u32_at(record, 16) as usize;
        if RECORD_HEADER_BYTES + n + env + content <= record.len() {
            put(&mut slot, 0, &record[..8]);
            put(&mut slot, 12, &(record.len() as u32).to_le_bytes());
            put(&mut slot, 16, &(env as u32).to_le_bytes());
            put(&mut slot, 20, &(content as u32).to_le_bytes());
            put(&mut slot, 24, &(n as u16).to_le_bytes());
            put(
                &mut slot,
                44,
                &record_crc(record, n, env, content).to_le_bytes(),
            );
        }
    }
    queue::fuzzing::check_record(&slot, record);
}

/// Builds the segment file image of mode 3; returns it, its name and whether to open.
fn segment(bytes: &[u8]) -> Option<(Vec<u8>, String, u8)> {
    let (&flags, rest) = bytes.split_first()?;
    if rest.len() < HEADER_USED + 1 {
        return None;
    }
    let (header, rest) = rest.split_at(HEADER_USED);
    let (&k, rest) = rest.split_first()?;
    let k = usize::from(k).min(rest.len() / SLOT_BYTES);
    let (slots, data) = rest.split_at(k * SLOT_BYTES);
    let mut image = vec![0u8; DATA_OFFSET + data.len().min(SEGMENT_BYTES as usize - DATA_OFFSET)];
    image[..HEADER_USED].copy_from_slice(header);
    let end = image.len();
    image[DATA_OFFSET..end].copy_from_slice(&data[..end - DATA_OFFSET]);
    for (i, slot) in slots.chunks(SLOT_BYTES).enumerate() {
        let at = HEADER_BYTES + i * SLOT_BYTES;
        image[at..at + SLOT_BYTES].copy_from_slice(slot);
    }
    let deferred = flags & 0x10 != 0;
    if flags & 1 != 0 {
        put(&mut image, 0, b"MSTWQSEG");
        put(&mut image, 8, &1u32.to_le_bytes());
        put(
            &mut image,
            12,
            &(if deferred { 2u32 } else { 1 }).to_le_bytes(),
        );
        let seq = u64_at(&image, 16) % 100_000_000;
        put(&mut image, 16, &seq.to_le_bytes());
        put(&mut image, 32, &SEGMENT_BYTES.to_le_bytes());
        put(&mut image, 40, &SLOT_COUNT.to_le_bytes());
        put(&mut image, 44, &(DATA_OFFSET as u32).to_le_bytes());
        let crc = crc32c::crc32c(&image[..56]);
        put(&mut image, 56, &crc.to_le_bytes());
    }
    if flags & 2 != 0 {
        let generation = u64_at(&image, 24);
        let mut prev = crc32c::crc32c(&generation.to_le_bytes());
        let mut offset = DATA_OFFSET;
        for i in 0..k {
            let at = HEADER_BYTES + i * SLOT_BYTES;
            let mut slot: [u8; 64] = image[at..at + SLOT_BYTES].try_into().expect("64 bytes");
            put(&mut slot, 49, &generation.to_le_bytes()[..7]);
            let n = usize::from(u16_at(&slot, 24) % 64);
            let env = u32_at(&slot, 16) as usize % 2048;
            let content = u32_at(&slot, 20) as usize % 8192;
            let len = pad8(RECORD_HEADER_BYTES + n + env + content);
            if offset + len > SEGMENT_BYTES as usize {
                break;
            }
            put(&mut slot, 8, &(offset as u32).to_le_bytes());
            put(&mut slot, 12, &(len as u32).to_le_bytes());
            put(&mut slot, 16, &(env as u32).to_le_bytes());
            put(&mut slot, 20, &(content as u32).to_le_bytes());
            put(&mut slot, 24, &(n as u16).to_le_bytes());
            if image.len() < offset + len {
                image.resize(offset + len, 0);
            }
            let record = &mut image[offset..offset + len];
            put(record, 0, &slot[..8]);
            put(record, 8, &(n as u16).to_le_bytes());
            put(record, 10, &[0, 0]);
            put(record, 12, &(env as u32).to_le_bytes());
            put(record, 16, &(content as u32).to_le_bytes());
            put(
                &mut slot,
                44,
                &record_crc(record, n, env, content).to_le_bytes(),
            );
            let crc = crc32c::crc32c_append(prev, &slot[..56]);
            put(&mut slot, 60, &crc.to_le_bytes());
            prev = crc;
            image[at..at + SLOT_BYTES].copy_from_slice(&slot);
            offset += len;
        }
    }
    let kind = if u32_at(&image, 12) == 2 {
        "deferred"
    } else {
        "main"
    };
    let name = format!("{kind}-{:08}.seg", u64_at(&image, 16) % 100_000_000);
    Some((image, name, flags))
}

fn queue_dir(bytes: &[u8]) {
    let Some((image, name, flags)) = segment(bytes) else {
        return;
    };
    let disk = SimDisk::new();
    let dir = Path::new("/q");
    disk.create_dir_all(dir).expect("mkdir");
    let file = disk.open(&dir.join(&name), true).expect("create segment");
    file.write_all_at(&image, 0).expect("write segment");
    if flags & 4 == 0 {
        file.set_len(SEGMENT_BYTES).expect("extend segment");
    }
    file.sync_data().expect("sync segment");
    disk.sync_dir(dir).expect("sync dir");
    let disk: Arc<dyn Disk> = Arc::new(disk);
    let _ = queue::check(disk.clone(), dir, false, &mut |_, _| {});
    if flags & 8 == 0 {
        return;
    }
    let config = QueueConfig {
        segment_bytes: SEGMENT_BYTES,
        commit_wait_max: std::time::Duration::ZERO,
        ..QueueConfig::default()
    };
    let Ok((queue, _report)) = Queue::open(disk.clone(), dir, config) else {
        return;
    };
    let _ = queue.list();
    let mut turn = 0u64;
    for _ in 0..3 {
        let Ok(batch) = queue.next_batch(u64::MAX / 2, 16, 1 << 20) else {
            break;
        };
        if batch.is_empty() {
            break;
        }
        for message in batch {
            let _ = queue.show(message.id);
            let outcomes: Vec<(usize, Outcome)> = message
                .pending
                .iter()
                .map(|&i| {
                    turn += 1;
                    let outcome = match turn % 3 {
                        0 => Outcome::Delivered,
                        1 => Outcome::Deferred {
                            retry_at_ms: 0,
                            reason: "try again".into(),
                        },
                        _ => Outcome::Failed {
                            reason: "no such user".into(),
                        },
                    };
                    (i, outcome)
                })
                .collect();
            let _ = queue.finish(message.id, &outcomes);
        }
    }
    if let Ok(bounces) = queue.take_bounces(16) {
        for bounce in bounces {
            let _ = queue.finish_bounce(bounce.id);
        }
    }
    let _ = queue.close();
    // What the queue wrote must open again cleanly.
    let config = QueueConfig {
        segment_bytes: SEGMENT_BYTES,
        ..QueueConfig::default()
    };
    let (queue, _) =
        Queue::open(disk, dir, config).expect("a queue this process closed opens again");
    let _ = queue.close();
}

fuzz_target!(|data: &[u8]| {
    let [mode, bytes @ ..] = data else {
        return;
    };
    let modes = if mailstow_fuzz::decoders_only() { 3 } else { 4 };
    match mode % modes {
        0 => envelope(bytes),
        1 => record(mode & 4 != 0, bytes),
        2 => {
            queue::fuzzing::decode_header(bytes);
        }
        _ => queue_dir(bytes),
    }
});
