//! What an owner node remembers of the mail other nodes handed it, so that a message it
//! stored is not stored again when the origin retries (issue 20: "the owner deduplicates by
//! (origin node, queue id)").
//!
//! The origin keeps a recipient pending until the owner's `250` for it reaches its queue. If
//! the origin crashes (or the connection drops) after the owner's store commit and before
//! the origin's completion, the origin hands the message over again. The owner then finds
//! the copy's [`key`] (origin node, origin queue id, recipient) in its store and answers
//! `250` without storing.
//!
//! **Where the keys live:** in the store, in the same journal record as the copies
//! (`Store::append_batch_delivered`, docs/storage.md "Delivered keys"), so a copy and its
//! key are durable together: no crash can leave a stored copy without its key (issue 40
//! found one with the separate file written after the store's commit that kept them
//! before). The store keeps them within `[cluster] delivered_max` and the queue's lifetime.
//!
//! **The old file** (`<data_dir>/cluster-delivered`, one `<unix seconds> <32 hex digits>`
//! line per key, a torn last line ignored) is read once by [`migrate`] when a node starts:
//! its keys go into the store in one record, then the file is removed. A crash between the
//! two reads it again at the next start and records the same keys twice, which is harmless.

use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use disk::{Disk, File};

/// The old file in the data directory.
const FILE_NAME: &str = "cluster-delivered";
/// One line: 10+ digits, space, 32 hex digits, LF.
const LINE_BYTES_MAX: usize = 64;
/// The largest old file read: a line per kept key, twice over before a rewrite, with room.
const FILE_BYTES_MAX: u64 = 1 << 30;

pub(crate) type Key = store::DeliveredKey;

/// The key of one handed-over copy.
pub(crate) fn key(origin: &str, recipient: &str) -> Key {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&(origin.len() as u64).to_le_bytes());
    hasher.update(origin.as_bytes());
    hasher.update(recipient.to_ascii_lowercase().as_bytes());
    let mut key = [0u8; 16];
    key.copy_from_slice(&hasher.finalize().as_bytes()[..16]);
    key
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Moves the keys of `<data_dir>/cluster-delivered` (younger than `retain`) into `store`,
/// then removes the file; nothing to do without one. Returns how many keys moved.
pub fn migrate(
    disk: &dyn Disk,
    data_dir: &Path,
    store: &store::Store,
    retain: Duration,
) -> io::Result<usize> {
    let path = data_dir.join(FILE_NAME);
    let tmp = path.with_extension("tmp");
    if !disk.exists(&path) {
        if disk.exists(&tmp) {
            disk.remove(&tmp)?;
        }
        return Ok(0);
    }
    let text = read_all(&*disk.open(&path, false)?)?;
    let now = unix_now();
    let keys: Vec<Key> = text
        .split(|&b| b == b'\n')
        // A torn last line (no LF, or not a whole record) is simply not a key.
        .filter_map(parse)
        .filter(|(at, _)| now.saturating_sub(*at) <= retain.as_secs())
        .map(|(_, key)| key)
        .collect();
    store
        .record_delivered(&keys)
        .map_err(|e| io::Error::other(format!("recording {FILE_NAME}'s keys: {e}")))?;
    for file in [&path, &tmp] {
        if disk.exists(file) {
            disk.remove(file)?;
        }
    }
    if let Some(dir) = path.parent() {
        disk.sync_dir(dir)?;
    }
    Ok(keys.len())
}

fn parse(line: &[u8]) -> Option<(u64, Key)> {
    if line.len() > LINE_BYTES_MAX {
        return None;
    }
    let text = std::str::from_utf8(line).ok()?;
    let (at, hex) = text.split_once(' ')?;
    if hex.len() != 32 {
        return None;
    }
    let mut key = [0u8; 16];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some((at.parse().ok()?, key))
}

/// The whole file (bounded: a file larger than any the old record wrote is refused).
fn read_all(file: &dyn File) -> io::Result<Vec<u8>> {
    let len = file.len()?;
    if len > FILE_BYTES_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{FILE_NAME} is {len} bytes, more than it can hold"),
        ));
    }
    let mut text = vec![0u8; len as usize];
    file.read_exact_at(&mut text, 0)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn hex(key: &Key) -> String {
        key.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn keys_differ_by_origin_and_recipient_not_by_case() {
        let a = key("n1:7", "a@example.org");
        assert_ne!(a, key("n1:7", "b@example.org"));
        assert_ne!(a, key("n2:7", "a@example.org"));
        assert_eq!(a, key("n1:7", "A@example.org"));
    }

    /// The old file's young keys move into the store (they survive a power cut right
    /// after), old ones and a torn line do not, and the file is gone.
    #[test]
    fn the_old_file_moves_into_the_store_once() {
        let sim = Arc::new(disk::SimDisk::new());
        let dir = Path::new("/node");
        sim.create_dir_all(dir).unwrap();
        let disk: Arc<dyn Disk> = sim.clone();
        let (young, old) = (key("n1:1", "a@x"), key("n1:2", "a@x"));
        let now = unix_now();
        let text = format!(
            "{now} {}\n{} {}\n{now} 00ff",
            hex(&young),
            now - 10 * 86_400,
            hex(&old)
        );
        let file = disk.open(&dir.join(FILE_NAME), true).unwrap();
        file.write_all_at(text.as_bytes(), 0).unwrap();
        file.sync_data().unwrap();
        disk.sync_dir(dir).unwrap();
        let open = |disk: &Arc<dyn Disk>| {
            store::Store::open(
                disk.clone(),
                &dir.join("store"),
                store::StoreConfig::default(),
            )
            .unwrap()
            .0
        };
        let store = open(&disk);
        let week = Duration::from_secs(7 * 86_400);
        assert_eq!(migrate(&*disk, dir, &store, week).unwrap(), 1);
        assert!(!disk.exists(&dir.join(FILE_NAME)));
        std::mem::forget(store);
        sim.crash(1, 0.0);
        let store = open(&disk);
        assert!(store.already_delivered(&young));
        assert!(!store.already_delivered(&old));
        assert!(!disk.exists(&dir.join(FILE_NAME)), "removed for good");
        assert_eq!(migrate(&*disk, dir, &store, week).unwrap(), 0);
    }
}
