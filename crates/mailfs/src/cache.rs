//! Block caches (docs/mailfs.md 6): memory LRU, and a disk cache that survives remounts.
//!
//! Both are keyed by (file, block index, block version), and a block version never changes
//! content, so an entry can never be served for another version (M7). Disk entries are
//! sealed envelopes under the data key with the reserved RAID index [`LOCAL_RAID`], so a
//! damaged or planted cache file fails authentication and is refetched, not served.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use disk::Disk;
use mailfs_format::{Header, Kind, Sealing, open, seal};

use crate::locking::MutexExt;

/// The RAID index of cache copies: never an account's (accounts are 0..=254).
pub const LOCAL_RAID: u8 = 255;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId {
    pub file: u64,
    pub index: u64,
    pub version: u64,
}

impl BlockId {
    /// The cache entry of one stored block of `file`.
    pub fn of(file: u64, b: &crate::meta::BlockRef) -> BlockId {
        BlockId {
            file,
            index: b.index,
            version: b.version,
        }
    }
}

struct Lru {
    map: HashMap<BlockId, (Arc<Vec<u8>>, u64)>,
    order: BTreeMap<u64, BlockId>,
    tick: u64,
    bytes: u64,
}

/// Disk cache files written by a background thread, so a read never waits for the local
/// disk: a cold sequential read spent half its CPU time copying blocks into cache files.
/// Past this many bytes queued, new entries are dropped (a cache may forget).
const DISK_WRITES_QUEUED_BYTES_MAX: u64 = 64 << 20;
/// Blocks remembered as scanned once (then the memory starts over).
const SCANNED_MAX: usize = 65_536;

pub struct Cache {
    memory: Mutex<Lru>,
    memory_bytes_max: u64,
    disk: Arc<DiskCache>,
    /// To the disk writer thread; dropping the cache closes it and waits for the thread, so
    /// no cache file is written after the cache is gone (a remount, a test removing the
    /// directory).
    disk_writes: Mutex<Option<mpsc::Sender<DiskWrite>>>,
    disk_writer: Option<std::thread::JoinHandle<()>>,
    fsid: [u8; 16],
    sealing: Sealing,
    /// Blocks a scan fetched and did not put on disk: a second fetch puts them there.
    scanned: Mutex<std::collections::HashSet<BlockId>>,
}

/// A cache file to write: its path and its bytes.
/// A cache file: its path, the RAID index byte it starts with, then the envelope.
type DiskWrite = (PathBuf, u8, Vec<u8>);

struct DiskCache {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    /// The files on disk, oldest written first, with their sizes: what a trim removes
    /// first. Files found at mount come first, in name order (the trait gives no times).
    files: Mutex<Written>,
    bytes_max: u64,
    queued: AtomicU64,
}

#[derive(Default)]
struct Written {
    order: VecDeque<(PathBuf, u64)>,
    bytes: u64,
}

impl Cache {
    pub fn new(
        disk: Arc<dyn Disk>,
        dir: PathBuf,
        memory_bytes_max: u64,
        disk_bytes_max: u64,
        fsid: [u8; 16],
        sealing: Sealing,
    ) -> Cache {
        let _ = disk.create_dir_all(&dir);
        let mut files = Written::default();
        for name in disk.list(&dir).unwrap_or_default() {
            let path = dir.join(&name);
            if name.ends_with(crate::durable::TMP_SUFFIX) {
                let _ = disk.remove(&path);
                continue;
            }
            let len = crate::durable::file_len(&*disk, &path);
            files.bytes += len;
            files.order.push_back((path, len));
        }
        let disk = Arc::new(DiskCache {
            disk,
            dir,
            files: Mutex::new(files),
            bytes_max: disk_bytes_max,
            queued: AtomicU64::new(0),
        });
        let (tx, rx) = mpsc::channel::<DiskWrite>();
        let writer = disk.clone();
        let disk_writer = std::thread::spawn(move || {
            // Filling the cache is background work: on a busy machine it yields to the
            // fetches and to everything else, and its queue overflows (entries dropped)
            // rather than slowing a read. Best effort: a failure leaves the normal priority.
            let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 19);
            for (path, raid, envelope) in rx {
                writer.store(&path, raid, &envelope);
                writer
                    .queued
                    .fetch_sub(1 + envelope.len() as u64, Ordering::SeqCst);
            }
        });
        Cache {
            memory: Mutex::new(Lru {
                map: HashMap::new(),
                order: BTreeMap::new(),
                tick: 0,
                bytes: 0,
            }),
            memory_bytes_max,
            disk,
            disk_writes: Mutex::new(Some(tx)),
            disk_writer: Some(disk_writer),
            fsid,
            sealing,
            scanned: Mutex::new(Default::default()),
        }
    }

    /// Whether a scan fetched `id` before; remembers it otherwise (ARC's ghost list, in
    /// its simplest form: the second fetch of a block is what admits it to the disk).
    pub fn scanned_before(&self, id: BlockId) -> bool {
        let mut scanned = self.scanned.lock_or_panic();
        if scanned.len() >= SCANNED_MAX && !scanned.contains(&id) {
            scanned.clear();
        }
        !scanned.insert(id)
    }

    /// The key disk entries are sealed and opened with (known only once the superblock
    /// is read; nothing is cached before).
    pub fn set_sealing(&mut self, sealing: Sealing) {
        self.sealing = sealing;
    }

    fn header(&self, id: BlockId) -> Header {
        Header {
            kind: Kind::Block,
            flags: 0,
            fsid: self.fsid,
            object: id.file,
            index: id.index,
            version: id.version,
            raid_index: LOCAL_RAID,
        }
    }

    fn path(&self, id: BlockId) -> PathBuf {
        self.disk
            .dir
            .join(format!("{:012x}.{}.{}", id.file, id.index, id.version))
    }

    pub fn get(&self, id: BlockId) -> Option<Arc<Vec<u8>>> {
        {
            let mut lru = self.memory.lock_or_panic();
            lru.tick += 1;
            let tick = lru.tick;
            if let Some((data, old)) = lru.map.get_mut(&id) {
                let data = data.clone();
                let old = std::mem::replace(old, tick);
                lru.order.remove(&old);
                lru.order.insert(tick, id);
                return Some(data);
            }
        }
        let file = crate::durable::read_file(&*self.disk.disk, &self.path(id)).ok()?;
        let (&raid, sealed) = file.split_first()?;
        let header = Header {
            raid_index: raid,
            ..self.header(id)
        };
        match open(&self.sealing, &header, sealed) {
            Ok(plain) => {
                let data = Arc::new(plain);
                self.put_memory(id, data.clone());
                Some(data)
            }
            Err(_) => {
                // Torn by a crash (cache files are not synced) or damaged: refetched.
                let _ = self.disk.disk.remove(&self.path(id));
                None
            }
        }
    }

    /// Is the block in memory (no disk read, no decryption)?
    pub fn in_memory(&self, id: BlockId) -> bool {
        self.memory.lock_or_panic().map.contains_key(&id)
    }

    /// Whether there is a disk cache at all (`disk_bytes` above 0).
    pub fn has_disk(&self) -> bool {
        self.disk.bytes_max > 0
    }

    /// Whether the disk cache has a file for `id` (not checked until it is read).
    pub fn on_disk(&self, id: BlockId) -> bool {
        self.disk.bytes_max > 0 && self.disk.disk.exists(&self.path(id))
    }

    pub fn put_memory_only(&self, id: BlockId, data: Arc<Vec<u8>>) {
        self.put_memory(id, data);
    }

    /// Keeps a block in memory and, `to_disk`, on disk the envelope exactly as an account
    /// holds it (sealed for `raid`), so caching costs no second encryption.
    pub fn put_sealed(
        &self,
        id: BlockId,
        raid: u8,
        envelope: Vec<u8>,
        data: Arc<Vec<u8>>,
        to_disk: bool,
    ) {
        if to_disk {
            self.put_disk_sealed(id, raid, envelope);
        }
        self.put_memory(id, data);
    }

    /// The disk half of [`Cache::put_sealed`], for a block memory already holds.
    pub fn put_disk_sealed(&self, id: BlockId, raid: u8, envelope: Vec<u8>) {
        if self.disk.bytes_max > 0 {
            self.put_disk(id, raid, envelope);
        }
    }

    /// Seals a copy for the disk cache under the reserved local RAID index (tests, and
    /// blocks that never had an account envelope).
    pub fn put(&self, id: BlockId, data: Arc<Vec<u8>>, to_disk: bool) {
        if to_disk
            && self.disk.bytes_max > 0
            && let Ok(sealed) = seal(&self.sealing, &self.header(id), rand::random(), &data)
        {
            self.put_disk(id, LOCAL_RAID, sealed);
        }
        self.put_memory(id, data);
    }

    fn put_memory(&self, id: BlockId, data: Arc<Vec<u8>>) {
        let mut lru = self.memory.lock_or_panic();
        lru.tick += 1;
        let tick = lru.tick;
        let len = data.len() as u64;
        if let Some((old_data, old)) = lru.map.insert(id, (data, tick)) {
            lru.order.remove(&old);
            lru.bytes -= old_data.len() as u64;
        }
        lru.order.insert(tick, id);
        lru.bytes += len;
        while lru.bytes > self.memory_bytes_max {
            let Some((_, victim)) = lru.order.pop_first() else {
                break;
            };
            if let Some((d, _)) = lru.map.remove(&victim) {
                lru.bytes -= d.len() as u64;
            }
        }
    }

    /// Queues a disk cache file for the writer thread (dropped when too much is queued).
    fn put_disk(&self, id: BlockId, raid: u8, sealed: Vec<u8>) {
        let path = self.path(id);
        if self.disk.disk.exists(&path) {
            return;
        }
        let len = 1 + sealed.len() as u64;
        if self.disk.queued.fetch_add(len, Ordering::SeqCst) + len > DISK_WRITES_QUEUED_BYTES_MAX {
            self.disk.queued.fetch_sub(len, Ordering::SeqCst);
            return;
        }
        let sent = match self.disk_writes.lock_or_panic().as_ref() {
            Some(tx) => tx.send((path, raid, sealed)).is_ok(),
            None => false,
        };
        if !sent {
            self.disk.queued.fetch_sub(len, Ordering::SeqCst);
        }
    }

    /// Waits until the queued disk cache files are written (tests).
    #[cfg(test)]
    pub fn settle_disk(&self) {
        while self.disk.queued.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    pub fn memory_bytes(&self) -> u64 {
        self.memory.lock_or_panic().bytes
    }

    pub fn disk_bytes(&self) -> u64 {
        self.disk.files.lock_or_panic().bytes
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        // At most DISK_WRITES_QUEUED_BYTES_MAX is left to write.
        self.disk_writes.lock_or_panic().take();
        if let Some(t) = self.disk_writer.take() {
            let _ = t.join();
        }
    }
}

impl DiskCache {
    fn store(&self, path: &std::path::Path, raid: u8, envelope: &[u8]) {
        if self.disk.exists(path) {
            return;
        }
        let tmp = path.with_extension("tmp");
        // The disk cache is a cache: unsynced (a torn file fails authentication and is
        // refetched), and a failed write only costs a refetch later.
        let written = crate::durable::write_unsynced(&*self.disk, &tmp, &[&[raid], envelope]);
        if written.is_ok() && self.disk.rename(&tmp, path).is_ok() {
            let mut files = self.files.lock_or_panic();
            let len = 1 + envelope.len() as u64;
            files.bytes += len;
            files.order.push_back((path.to_path_buf(), len));
            if files.bytes > self.bytes_max {
                self.trim(&mut files, self.bytes_max * 9 / 10);
            }
        }
    }

    /// Removes the oldest written files until the disk cache is under `target`.
    fn trim(&self, files: &mut Written, target: u64) {
        while files.bytes > target {
            let Some((path, len)) = files.order.pop_front() else {
                files.bytes = 0;
                break;
            };
            // Gone already (a damaged file `get` removed) or removed now: either way its
            // bytes are no longer used.
            let _ = self.disk.remove(&path);
            files.bytes = files.bytes.saturating_sub(len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn lru_evicts_and_disk_survives_and_rejects_tampering() {
        let dir = tempfile::tempdir().unwrap();
        let id = |i| BlockId {
            file: 9,
            index: i,
            version: 1,
        };
        let c = Cache::new(
            Arc::new(disk::RealDisk),
            dir.path().to_path_buf(),
            250,
            1 << 20,
            [1; 16],
            Sealing::Aead([2; 32]),
        );
        for i in 0..4 {
            c.put(id(i), Arc::new(vec![i as u8; 100]), true);
        }
        c.settle_disk();
        assert!(c.memory_bytes() <= 250);
        // Evicted from memory, still on disk.
        assert_eq!(c.get(id(0)).unwrap()[0], 0);
        // A new cache over the same directory (a remount) serves it.
        let c2 = Cache::new(
            Arc::new(disk::RealDisk),
            dir.path().to_path_buf(),
            250,
            1 << 20,
            [1; 16],
            Sealing::Aead([2; 32]),
        );
        assert_eq!(c2.get(id(3)).unwrap().as_slice(), &[3u8; 100][..]);
        // Another version is another entry (M7).
        assert!(
            c2.get(BlockId {
                version: 2,
                ..id(3)
            })
            .is_none()
        );
        // A damaged file is not served.
        let p = c2.path(id(2));
        let mut bytes = fs::read(&p).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&p, bytes).unwrap();
        assert!(c2.get(id(2)).is_none());
    }
}
