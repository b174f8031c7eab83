//! Helpers shared by the store's integration tests.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use disk::SimDisk;
use store::{Flags, NewMessage, Store, StoreConfig};

pub fn dir() -> PathBuf {
    PathBuf::from("/data/store")
}

/// A configuration small enough for a simulated disk.
pub fn small_config() -> StoreConfig {
    StoreConfig {
        volume_grow_bytes: 64 << 10,
        journal_checkpoint_bytes: 64 << 10,
        reservation_bytes: 0,
        read_chunk_bytes_max: 64 << 10,
        ..StoreConfig::default()
    }
}

pub fn open(disk: &SimDisk, config: StoreConfig) -> Arc<Store> {
    let (store, _) = Store::open(Arc::new(disk.clone()), &dir(), config).expect("open");
    store
}

pub fn path(name: &str) -> PathBuf {
    dir().join(name)
}

/// A message whose content is `len` bytes, unique by `tag`.
pub fn message(tag: u64, len: usize) -> NewMessage {
    NewMessage {
        flags: Flags::EMPTY,
        keywords: vec![],
        internal_date: 1_700_000_000,
        content: body(tag, len),
    }
}

pub fn body(tag: u64, len: usize) -> Vec<u8> {
    let head = format!("Subject: message {tag}\r\nMessage-ID: <{tag}@test>\r\n\r\n");
    let mut v = head.into_bytes();
    let mut x = tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(b'a' + (x % 26) as u8);
    }
    v.truncate(len.max(1));
    v
}

/// Units a message of `len` content bytes occupies (header 32 + summary + content).
pub fn assert_clean(store: &Store) {
    let report = store.fsck(false, &mut |_, _| {}).expect("fsck");
    assert!(report.is_clean(), "fsck: {report}");
}

pub fn exists(disk: &SimDisk, name: &str) -> bool {
    use disk::Disk;
    disk.exists(&dir().join(Path::new(name)))
}

pub fn fragments(store: &Store, user: &str, folder: &str) -> u64 {
    store
        .stats()
        .folders
        .iter()
        .find(|f| f.user == user && f.folder == folder)
        .map(|f| f.fragments)
        .unwrap_or(0)
}

/// Content bytes that make a message of exactly one 512-byte unit (with its summary: the MIME
/// structure, about 300 bytes for these messages, and the preview of their text).
pub const ONE_UNIT: usize = 100;
/// Content bytes that make a message of exactly two units (its preview the full 256
/// characters).
pub const TWO_UNITS: usize = 400;
