//! The store's index on disk (docs/fuzzing.md): journal records through
//! `store::fuzzing::reencode_ops`, and whole stores opened with `Store::open` on a `SimDisk`
//! whose `index.snap` and `index-*.log` come from the input.
//!
//! Input: a mode byte, then bytes.
//! - mode 0: one journal record payload; one that decodes must encode back unchanged.
//! - mode 1: flags (bit 0 open with salvage, bit 1 keep the input's checksums, bit 2 write
//!   no journal), then items `tag u8, len u16, payload`: an even tag is a journal record, an
//!   odd one a snapshot section (its first byte the section kind). The harness frames them
//!   as the store does (docs/storage.md, Part 2): magic, store id, generations and CRC
//!   chains, unless bit 1 asks to keep them broken. The volume is one written by the real
//!   store with three messages in u/INBOX. A store that opens is read everywhere, checked
//!   with fsck, changed, checkpointed, and must then open again without salvage.
#![no_main]

use std::path::Path;
use std::sync::{Arc, OnceLock};

use disk::{Disk, SimDisk};
use libfuzzer_sys::fuzz_target;
use mailstow_fuzz::CappedDisk;
use store::{FlagOp, Flags, Mailstore, NewMessage, Store, StoreConfig};

const DIR: &str = "/s";
const JOURNAL_HEADER_BYTES: usize = 4096;

fn config(salvage: bool) -> StoreConfig {
    StoreConfig {
        volume_grow_bytes: 64 << 10,
        journal_checkpoint_bytes: 16 << 10,
        reservation_bytes: 0,
        salvage,
        ..StoreConfig::default()
    }
}

/// A volume the real store wrote, and the ids a journal for it must carry.
struct Template {
    volume: Vec<u8>,
    store_id: u64,
    version: u32,
}

fn read_file(disk: &SimDisk, path: &Path) -> Vec<u8> {
    let file = disk.open(path, false).expect("open template file");
    let mut bytes = vec![0u8; file.len().expect("len") as usize];
    file.read_exact_at(&mut bytes, 0)
        .expect("read template file");
    bytes
}

/// The messages every template holds; fuzz/seeds writes the same ones, so the seed journals'
/// Append records point at real data.
const TEMPLATE_MESSAGES: [&[u8]; 3] = [
    b"From: a@example.org\r\nSubject: one\r\n\r\nbody one\r\n",
    b"Subject: two\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\n\r\npart\r\n--x--\r\n",
    b"Subject: three\r\n\r\n",
];

fn template() -> &'static Template {
    static TEMPLATE: OnceLock<Template> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let disk = SimDisk::new();
        let store = Store::open(Arc::new(disk.clone()), Path::new(DIR), config(false))
            .expect("create the template store")
            .0;
        for (i, content) in TEMPLATE_MESSAGES.iter().enumerate() {
            store
                .append(
                    "u",
                    "INBOX",
                    NewMessage {
                        content: content.to_vec(),
                        internal_date: 1_000_000 + i as i64,
                        ..NewMessage::default()
                    },
                )
                .expect("append to the template");
        }
        drop(store);
        let log = read_file(&disk, &Path::new(DIR).join("index-00000001.log"));
        Template {
            volume: read_file(&disk, &Path::new(DIR).join("volume.dat")),
            store_id: u64::from_le_bytes(log[16..24].try_into().expect("8 bytes")),
            version: u32::from_le_bytes(log[8..12].try_into().expect("4 bytes")),
        }
    })
}

fn journal_header(template: &Template, generation: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(JOURNAL_HEADER_BYTES);
    h.extend_from_slice(b"MSTWSJNL");
    h.extend_from_slice(&template.version.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h.extend_from_slice(&template.store_id.to_le_bytes());
    h.extend_from_slice(&generation.to_le_bytes());
    h.resize(60, 0);
    let crc = crc32c::crc32c(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    h.resize(JOURNAL_HEADER_BYTES, 0);
    h
}

/// The first link of a journal's CRC chain (crates/store/src/journal.rs `chain_seed`).
fn chain_seed(store_id: u64, generation: u64) -> u32 {
    let mut b = Vec::with_capacity(24);
    b.extend_from_slice(b"mailstow");
    b.extend_from_slice(&store_id.to_le_bytes());
    b.extend_from_slice(&generation.to_le_bytes());
    crc32c::crc32c(&b)
}

struct Files {
    snapshot: Option<Vec<u8>>,
    journal: Option<(u64, Vec<u8>)>,
}

fn build(template: &Template, flags: u8, mut items: &[u8]) -> Files {
    let keep_broken = flags & 2 != 0;
    let mut sections: Vec<Vec<u8>> = Vec::new();
    let mut records: Vec<&[u8]> = Vec::new();
    while let [tag, a, b, rest @ ..] = items {
        let len = usize::from(u16::from_le_bytes([*a, *b])).min(rest.len());
        let (payload, rest) = rest.split_at(len);
        items = rest;
        if tag & 1 == 0 {
            records.push(payload);
        } else if let Some((&kind, body)) = payload.split_first() {
            let mut body = body.to_vec();
            if kind == 1 && body.len() >= 12 && !keep_broken {
                // The header section names the version and the store.
                body[..4].copy_from_slice(&template.version.to_le_bytes());
                body[4..12].copy_from_slice(&template.store_id.to_le_bytes());
            }
            let mut section = vec![kind];
            section.extend_from_slice(&(body.len() as u32).to_le_bytes());
            section.extend_from_slice(&body);
            let crc = crc32c::crc32c(&section);
            section.extend_from_slice(&(if keep_broken { !crc } else { crc }).to_le_bytes());
            sections.push(section);
        }
    }
    // The snapshot's generation (header section, bytes 12..20) decides the journal's.
    let mut snap_generation = 0u64;
    let snapshot = (!sections.is_empty()).then(|| {
        let mut image = b"MSTWSNAP".to_vec();
        for section in &sections {
            if section[0] == 1 && section.len() >= 5 + 20 {
                snap_generation = u64::from_le_bytes(section[17..25].try_into().expect("8 bytes"));
            }
            image.extend_from_slice(section);
        }
        image
    });
    let journal = (flags & 4 == 0).then(|| {
        let generation = snap_generation.wrapping_add(1) % 100_000_000;
        let mut image = journal_header(template, generation);
        let mut prev = chain_seed(template.store_id, generation);
        for payload in records {
            let len = (payload.len() as u32).to_le_bytes();
            let crc = crc32c::crc32c_append(crc32c::crc32c_append(prev, &len), payload);
            image.extend_from_slice(&len);
            image.extend_from_slice(&(if keep_broken { crc ^ 1 } else { crc }).to_le_bytes());
            image.extend_from_slice(payload);
            prev = crc;
        }
        (generation, image)
    });
    Files { snapshot, journal }
}

fn write(disk: &SimDisk, name: &str, bytes: &[u8]) {
    let file = disk.open(&Path::new(DIR).join(name), true).expect("create");
    file.write_all_at(bytes, 0).expect("write");
    file.sync_data().expect("sync");
}

/// Reads everything the index names, then changes the store a little.
fn exercise(store: &Store) {
    for user in store.list_users() {
        for folder in store.list_folders(&user) {
            let _ = store.status(&user, &folder);
            let _ = store.open_folder(&user, &folder);
            let _ = store.changes_since(&user, &folder, 0);
            for uid in store.uids(&user, &folder).unwrap_or_default() {
                let _ = store.read(&user, &folder, uid);
                let _ = store.summary(&user, &folder, uid);
            }
        }
    }
    let _ = store.fsck(false, &mut |_, _| {});
    let message = NewMessage {
        content: b"Subject: new\r\n\r\nnew\r\n".to_vec(),
        internal_date: 2_000_000,
        ..NewMessage::default()
    };
    let _ = store.append("u", "INBOX", message);
    if let Some(&uid) = store.uids("u", "INBOX").unwrap_or_default().first() {
        let _ = store.set_flags("u", "INBOX", &[uid], FlagOp::Add, Flags::SEEN, &[]);
        let _ = store.expunge("u", "INBOX", &[uid]);
    }
    let _ = store.create_folder("u", "Archive");
    let _ = store.rename_folder("u", "Archive", "Old");
    let _ = store.checkpoint();
}

fuzz_target!(|data: &[u8]| {
    let [mode, bytes @ ..] = data else {
        return;
    };
    if mode & 1 == 0 || mailstow_fuzz::decoders_only() {
        if let Some(again) = store::fuzzing::reencode_ops(bytes) {
            assert_eq!(again, bytes, "a record that decodes encodes differently");
        }
        return;
    }
    let [flags, items @ ..] = bytes else {
        return;
    };
    let template = template();
    let files = build(template, *flags, items);
    let disk = SimDisk::new();
    disk.create_dir_all(Path::new(DIR)).expect("mkdir");
    write(&disk, "volume.dat", &template.volume);
    if let Some(snapshot) = &files.snapshot {
        write(&disk, "index.snap", snapshot);
    }
    if let Some((generation, journal)) = &files.journal {
        write(&disk, &format!("index-{generation:08}.log"), journal);
    }
    disk.sync_dir(Path::new(DIR)).expect("sync dir");
    let salvage = flags & 1 != 0;
    let capped = |disk: &SimDisk| -> Arc<dyn Disk> {
        Arc::new(CappedDisk {
            inner: disk.clone(),
            bytes_max: 64 << 20,
        })
    };
    let Ok((store, _report)) = Store::open(capped(&disk), Path::new(DIR), config(salvage)) else {
        return;
    };
    exercise(&store);
    drop(store);
    // What the store wrote itself must open without salvage.
    if let Err(e) = Store::open(capped(&disk), Path::new(DIR), config(false)) {
        panic!("a store this process wrote does not open again: {e}");
    }
});
