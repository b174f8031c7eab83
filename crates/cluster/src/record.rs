//! What an owner node remembers of the mail other nodes handed it, so that a message it
//! stored is not stored again when the origin retries (issue 20: "the owner deduplicates by
//! (origin node, queue id)").
//!
//! The origin keeps a recipient pending until the owner's `250` for it reaches its queue. If
//! the origin crashes (or the connection drops) after the owner's store commit and before
//! the origin's completion, the origin hands the message over again. The owner then finds
//! the key (origin node, origin queue id, recipient) here and answers `250` without storing.
//!
//! **Format** (`<data_dir>/cluster-delivered`): one line per stored copy,
//! `<unix seconds> <key as 32 hex digits>\n`, the key a BLAKE3 hash of the three fields.
//! Lines are written after the store's commit and before the `250`, and `fdatasync`ed at
//! most `SYNC_INTERVAL` later (by the next commit that finds the last sync that old, or by
//! the committer when it falls idle); a torn last line is ignored when the file is read back.
//!
//! **Crash rule:** store commit, then this record, then the reply. A crash between the first
//! two leaves a copy stored but not recorded: the origin's retry stores it a second time.
//! That window is the same one local delivery has between the store's commit and the
//! queue's completion (duplicates bounded by one batch, never a loss); recording first
//! would instead lose mail on a failed commit. The record is written (to the kernel) before
//! the reply, so a crash of either process, or of the origin's machine, still finds every
//! key; only a power loss of the owner's machine can lose the last `SYNC_INTERVAL` of keys,
//! and only a copy whose origin then hands it over again (its `250` had not arrived) is
//! stored twice. A sync per commit would close that window at a third of the owner's
//! fdatasyncs (measured in docs/benchmarks.md, "Cluster"); this trades it for a duplicate
//! bounded like local delivery's, never a loss.
//!
//! **I/O** goes through `disk::Disk`, like the queue's and the store's, so a simulated power
//! cut covers it (the tests below).
//!
//! **Bounds:** at most `entries_max` keys are kept (the oldest go first), and keys older
//! than the queue's lifetime are dropped, since no origin retries after that. The file is
//! rewritten with the live keys when it opens and whenever it has grown to twice them.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use disk::{Disk, File};

/// The file in the data directory.
const FILE_NAME: &str = "cluster-delivered";
/// One line: 10+ digits, space, 32 hex digits, LF.
const LINE_BYTES_MAX: usize = 64;
/// The largest file read back: a line per kept key, twice over before a rewrite, with room.
const FILE_BYTES_MAX: u64 = 1 << 30;
/// The longest a written record waits for its `fdatasync`.
pub const SYNC_INTERVAL: Duration = Duration::from_secs(1);

pub(crate) type Key = [u8; 16];

/// The keys of copies this node stored for other nodes.
pub struct Delivered {
    disk: Arc<dyn Disk>,
    path: PathBuf,
    retain: Duration,
    entries_max: usize,
    inner: Mutex<Inner>,
}

struct Inner {
    file: Arc<dyn File>,
    /// Where the next line goes: the end of the last whole line written.
    end: u64,
    /// Key -> when it was recorded (unix seconds).
    keys: HashMap<Key, u64>,
    /// Oldest first.
    order: VecDeque<(u64, Key)>,
    /// Lines in the file (live or not).
    lines: usize,
    /// Lines written since the last `fdatasync`.
    unsynced: bool,
    synced_at: Instant,
}

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

impl Delivered {
    /// Reads the file in `data_dir` (creating it), keeping keys younger than `retain`, at
    /// most `entries_max`, and rewrites it with those.
    pub fn open(
        disk: Arc<dyn Disk>,
        data_dir: &Path,
        retain: Duration,
        entries_max: usize,
    ) -> io::Result<Delivered> {
        let path = data_dir.join(FILE_NAME);
        let now = unix_now();
        let mut order = VecDeque::new();
        if disk.exists(&path) {
            let text = read_all(&*disk.open(&path, false)?)?;
            // A torn last line (no LF, or not a whole record) is simply not a key.
            for line in text.split(|&b| b == b'\n') {
                if let Some((at, key)) = parse(line)
                    && now.saturating_sub(at) <= retain.as_secs()
                {
                    order.push_back((at, key));
                }
            }
        }
        while order.len() > entries_max {
            order.pop_front();
        }
        let keys = order.iter().map(|&(at, key)| (key, at)).collect();
        let (file, end) = rewrite(&*disk, &path, &order)?;
        Ok(Delivered {
            disk,
            path,
            retain,
            entries_max: entries_max.max(1),
            inner: Mutex::new(Inner {
                file,
                end,
                lines: order.len(),
                keys,
                order,
                unsynced: false,
                synced_at: Instant::now(),
            }),
        })
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every critical section leaves `Inner` whole: a panic inside one cannot leave a
        // half-updated index (the file is appended to before the index changes).
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this copy was stored here already.
    pub fn contains(&self, key: &Key) -> bool {
        self.inner().keys.contains_key(key)
    }

    /// Records copies just committed to the store, before their `250` (synced within
    /// `SYNC_INTERVAL`: see the crash rule above).
    pub fn record(&self, keys: &[Key]) -> io::Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let now = unix_now();
        let mut inner = self.inner();
        let mut text = Vec::with_capacity(keys.len() * 48);
        for key in keys {
            text.extend_from_slice(format!("{now} {}\n", hex(key)).as_bytes());
        }
        inner.file.write_all_at(&text, inner.end)?;
        inner.end += text.len() as u64;
        inner.unsynced = true;
        if inner.synced_at.elapsed() >= SYNC_INTERVAL {
            sync(&mut inner)?;
        }
        inner.lines += keys.len();
        for key in keys {
            if inner.keys.insert(*key, now).is_none() {
                inner.order.push_back((now, *key));
            }
        }
        let retain = self.retain.as_secs();
        while let Some(&(at, key)) = inner.order.front() {
            if inner.order.len() <= self.entries_max && now.saturating_sub(at) <= retain {
                break;
            }
            inner.order.pop_front();
            if inner.keys.get(&key) == Some(&at) {
                inner.keys.remove(&key);
            }
        }
        assert_eq!(inner.keys.len(), inner.order.len(), "every kept key once");
        assert!(inner.order.len() <= self.entries_max);
        if inner.lines > 2 * inner.order.len().max(1024) {
            let (file, end) = rewrite(&*self.disk, &self.path, &inner.order)?;
            inner.file = file;
            inner.end = end;
            inner.lines = inner.order.len();
            inner.unsynced = false;
            inner.synced_at = Instant::now();
        }
        Ok(())
    }

    /// Whether written lines wait for their sync.
    pub fn unsynced(&self) -> bool {
        self.inner().unsynced
    }

    /// Syncs the lines written since the last sync, if any.
    pub fn sync(&self) -> io::Result<()> {
        let mut inner = self.inner();
        if inner.unsynced {
            sync(&mut inner)?;
        }
        Ok(())
    }
}

impl Drop for Delivered {
    fn drop(&mut self) {
        if let Err(e) = self.sync() {
            tracing::error!(event = "cluster_delivered_error", error = %e, msg = "the last keys were not synced");
        }
    }
}

fn sync(inner: &mut Inner) -> io::Result<()> {
    inner.file.sync_data()?;
    inner.unsynced = false;
    inner.synced_at = Instant::now();
    Ok(())
}

fn hex(key: &Key) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
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

/// The whole file (bounded: a file larger than any this module writes is refused).
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

/// Writes `order` to a new file, syncs it and renames it over `path` (then syncs the
/// directory); returns the file and its length. A crash leaves the old file or the new one.
fn rewrite(
    disk: &dyn Disk,
    path: &Path,
    order: &VecDeque<(u64, Key)>,
) -> io::Result<(Arc<dyn File>, u64)> {
    let tmp = path.with_extension("tmp");
    if disk.exists(&tmp) {
        disk.remove(&tmp)?;
    }
    let file = disk.open(&tmp, true)?;
    file.set_len(0)?;
    let mut text = Vec::with_capacity(order.len() * 48);
    for (at, key) in order {
        text.extend_from_slice(format!("{at} {}\n", hex(key)).as_bytes());
    }
    file.write_all_at(&text, 0)?;
    file.sync_data()?;
    disk.rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        disk.sync_dir(dir)?;
    }
    let file = disk.open(path, false)?;
    assert_eq!(
        file.len()?,
        text.len() as u64,
        "the rewritten record's length"
    );
    Ok((file, text.len() as u64))
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn real() -> Arc<dyn Disk> {
        Arc::new(disk::RealDisk)
    }

    #[test]
    fn keys_survive_a_reopen_and_torn_lines_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let week = Duration::from_secs(7 * 86_400);
        let delivered = Delivered::open(real(), dir.path(), week, 100).unwrap();
        let a = key("n1:7", "a@example.org");
        let b = key("n1:7", "b@example.org");
        assert_ne!(a, b);
        assert_ne!(a, key("n2:7", "a@example.org"));
        assert_eq!(a, key("n1:7", "A@example.org"));
        delivered.record(&[a]).unwrap();
        assert!(delivered.contains(&a));
        assert!(!delivered.contains(&b));
        drop(delivered);
        // A torn line after the last whole one.
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(FILE_NAME))
            .unwrap();
        file.write_all(b"17000000 00ff").unwrap();
        drop(file);
        let delivered = Delivered::open(real(), dir.path(), week, 100).unwrap();
        assert!(delivered.contains(&a));
        assert!(!delivered.contains(&b));
    }

    #[test]
    fn the_oldest_keys_go_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let delivered =
            Delivered::open(real(), dir.path(), Duration::from_secs(86_400), 3).unwrap();
        let keys: Vec<Key> = (0..5).map(|i| key(&format!("n1:{i}"), "a@x")).collect();
        for key in &keys {
            delivered.record(std::slice::from_ref(key)).unwrap();
        }
        assert!(!delivered.contains(&keys[0]));
        assert!(!delivered.contains(&keys[1]));
        assert!(keys[2..].iter().all(|k| delivered.contains(k)));
        drop(delivered);
        let delivered =
            Delivered::open(real(), dir.path(), Duration::from_secs(86_400), 3).unwrap();
        assert!(keys[2..].iter().all(|k| delivered.contains(k)));
        assert!(!delivered.contains(&keys[1]));
    }

    /// Power cuts that keep none, some or all of the unsynced sectors, right after a reopen
    /// (which rewrites the record) and a run of records: every key recorded and synced before
    /// the cut is found after it; keys written but not yet synced may be lost, never read as
    /// another key.
    #[test]
    fn synced_keys_survive_a_power_cut() {
        let dir = Path::new("/node");
        let week = Duration::from_secs(7 * 86_400);
        for seed in 0..24u64 {
            let sim = Arc::new(disk::SimDisk::new());
            sim.create_dir_all(dir).unwrap();
            let disk: Arc<dyn Disk> = sim.clone();
            let keys: Vec<Key> = (0..120)
                .map(|i| key(&format!("n2:{seed}.{i}"), "u@x"))
                .collect();
            // Durable: recorded, then synced as the record is dropped.
            let delivered = Delivered::open(disk.clone(), dir, week, 1000).unwrap();
            delivered.record(&keys[..40]).unwrap();
            drop(delivered);
            // Reopened (the record rewritten), more keys, a sync part way, then the cut.
            let delivered = Delivered::open(disk.clone(), dir, week, 1000).unwrap();
            let synced_upto = 40 + 5 + (seed as usize % 50);
            for (i, key) in keys.iter().enumerate().skip(40) {
                delivered.record(std::slice::from_ref(key)).unwrap();
                if i + 1 == synced_upto {
                    delivered.sync().unwrap();
                }
            }
            // The process dies with the machine: no last sync.
            std::mem::forget(delivered);
            sim.crash(seed, [0.0, 0.5, 1.0][seed as usize % 3]);
            let reopened = Delivered::open(disk, dir, week, 1000).unwrap();
            for (i, key) in keys[..synced_upto].iter().enumerate() {
                assert!(
                    reopened.contains(key),
                    "seed {seed}: synced key {i} was lost"
                );
            }
            let known: Vec<Key> = reopened.inner().keys.keys().copied().collect();
            assert!(
                known.iter().all(|k| keys.contains(k)),
                "seed {seed}: a key that was never recorded"
            );
        }
    }
}
