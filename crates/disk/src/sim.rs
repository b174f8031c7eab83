//! A simulated disk for crash tests.
//!
//! Every file has a live image (what reads see) and a durable image (what survives a power
//! cut). `sync_data` copies the file's dirty sectors to the durable image; names become
//! durable with `sync_dir`. [`SimDisk::crash`] throws the live state away and builds the
//! next live state from the durable one plus, for each dirty sector, a coin toss: kept or
//! lost. That covers lost writes (every sector lost), torn writes (some sectors of one write
//! kept) and reordered writes (a later write kept, an earlier one lost), at sector
//! granularity, which is the atomicity real disks give. After a crash every handle opened
//! before it fails, as a killed process's would.
//!
//! [`SimDisk::fail_after`] makes the N-th mutating call from now, and every call after it,
//! fail with an I/O error, so a test can stop the engine at an exact step.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{Disk, File, SECTOR_BYTES};

type FileId = u64;

#[derive(Default)]
struct SimFile {
    live: Vec<u8>,
    durable: Vec<u8>,
    /// Sectors written since the last sync, by index.
    dirty: BTreeSet<u64>,
    /// The length changed since the last sync.
    len_dirty: bool,
}

#[derive(Default)]
struct State {
    files: BTreeMap<FileId, SimFile>,
    live_names: BTreeMap<PathBuf, FileId>,
    durable_names: BTreeMap<PathBuf, FileId>,
    dirs: BTreeSet<PathBuf>,
    next_id: FileId,
    /// Bumped by every crash; handles from an older epoch fail.
    epoch: u64,
    /// Mutating calls left before every call fails; `None` = never.
    ops_left: Option<u64>,
    stats: SimStats,
    /// How long each `sync_data` takes (zero: at once).
    sync_latency: std::time::Duration,
    /// Bytes the files may hold together (their lengths, open-but-unlinked ones included);
    /// growing past it fails with `ENOSPC`. `None` = unlimited.
    capacity: Option<u64>,
}

/// Counters a test can read to check how the engine used the disk.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SimStats {
    pub writes: u64,
    pub bytes_written: u64,
    pub syncs: u64,
    pub dir_syncs: u64,
}

/// What a crash did, for test diagnostics.
#[derive(Debug, Default, Clone, Copy)]
pub struct CrashReport {
    pub dirty_sectors: u64,
    pub kept_sectors: u64,
    pub names_changed: u64,
}

/// A cloneable handle to one simulated disk; clones share the same state.
#[derive(Clone, Default)]
pub struct SimDisk {
    state: Arc<Mutex<State>>,
}

impl SimDisk {
    pub fn new() -> SimDisk {
        SimDisk::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves the state consistent (every method
        // mutates it in one place), so keep going rather than cascade the panic.
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// A power cut: unsynced sectors and unsynced names survive by a coin toss each, using
    /// `seed`. `keep_probability` 0.0 loses every unsynced write, 1.0 keeps them all (what a
    /// killed process with an intact page cache sees).
    pub fn crash(&self, seed: u64, keep_probability: f64) -> CrashReport {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut state = self.lock();
        let mut report = CrashReport::default();
        let state = &mut *state;
        for file in state.files.values_mut() {
            let mut image = file.durable.clone();
            if file.len_dirty && rng.random_bool(keep_probability) {
                image.resize(file.live.len(), 0);
            }
            for &sector in &file.dirty {
                report.dirty_sectors += 1;
                if !rng.random_bool(keep_probability) {
                    continue;
                }
                report.kept_sectors += 1;
                let start = (sector * SECTOR_BYTES) as usize;
                let end = (start + SECTOR_BYTES as usize).min(file.live.len());
                if start >= end {
                    continue;
                }
                if image.len() < end {
                    image.resize(end, 0);
                }
                image[start..end].copy_from_slice(&file.live[start..end]);
            }
            file.live = image.clone();
            file.durable = image;
            file.dirty.clear();
            file.len_dirty = false;
        }
        // Names: each path whose live and durable binding differ ends up with one of the two.
        let paths: BTreeSet<PathBuf> = state
            .live_names
            .keys()
            .chain(state.durable_names.keys())
            .cloned()
            .collect();
        let mut names = BTreeMap::new();
        for path in paths {
            let live = state.live_names.get(&path).copied();
            let durable = state.durable_names.get(&path).copied();
            let chosen = if live == durable {
                live
            } else {
                report.names_changed += 1;
                if rng.random_bool(keep_probability) {
                    live
                } else {
                    durable
                }
            };
            if let Some(id) = chosen {
                names.insert(path, id);
            }
        }
        state.live_names = names.clone();
        state.durable_names = names;
        let referenced: BTreeSet<FileId> = state.live_names.values().copied().collect();
        state.files.retain(|id, _| referenced.contains(id));
        state.epoch += 1;
        state.ops_left = None;
        report
    }

    /// The `count`-th mutating call from now (0 = the next one) and all later ones fail.
    /// Makes every `sync_data` from now take `latency`, as a real device's flush does: what
    /// group commit exists for, so a test of it does not depend on how threads happen to be
    /// scheduled.
    pub fn set_sync_latency(&self, latency: std::time::Duration) {
        self.lock().sync_latency = latency;
    }

    /// Limits the bytes all files may hold together: a write, `set_len` or `allocate` that
    /// would grow past it fails as a full file system does (`ErrorKind::StorageFull`), and
    /// changes nothing. `None` lifts the limit.
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.lock().capacity = bytes;
    }

    pub fn fail_after(&self, count: u64) {
        self.lock().ops_left = Some(count);
    }

    pub fn stats(&self) -> SimStats {
        self.lock().stats
    }

    /// Overwrites bytes of a file in both images, as a stray bit flip on the medium would.
    pub fn corrupt(&self, path: &Path, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let mut state = self.lock();
        let id = *state.live_names.get(path).ok_or_else(|| not_found(path))?;
        let file = state.files.get_mut(&id).ok_or_else(|| not_found(path))?;
        for image in [&mut file.live, &mut file.durable] {
            let end = offset as usize + bytes.len();
            if image.len() < end {
                image.resize(end, 0);
            }
            image[offset as usize..end].copy_from_slice(bytes);
        }
        Ok(())
    }

    /// Cuts a file short in both images.
    pub fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut state = self.lock();
        let id = *state.live_names.get(path).ok_or_else(|| not_found(path))?;
        let file = state.files.get_mut(&id).ok_or_else(|| not_found(path))?;
        file.live.truncate(len as usize);
        file.durable.truncate(len as usize);
        Ok(())
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

fn crashed() -> io::Error {
    io::Error::other("simulated disk: handle opened before a crash")
}

fn no_space() -> io::Error {
    io::Error::new(
        io::ErrorKind::StorageFull,
        "simulated disk: no space left on device",
    )
}

fn injected() -> io::Error {
    io::Error::other("simulated disk: injected I/O failure")
}

impl State {
    /// What every file holds together (live lengths).
    fn used_bytes(&self) -> u64 {
        self.files.values().map(|f| f.live.len() as u64).sum()
    }

    /// Fails with `ENOSPC` if file `id` growing to `new_len` would pass the capacity.
    fn room_for(&self, id: FileId, new_len: u64) -> io::Result<()> {
        let Some(cap) = self.capacity else {
            return Ok(());
        };
        let old = self.files.get(&id).map_or(0, |f| f.live.len() as u64);
        if new_len > old && self.used_bytes() - old + new_len > cap {
            return Err(no_space());
        }
        Ok(())
    }

    /// Counts one mutating call against the failure budget.
    fn spend(&mut self) -> io::Result<()> {
        match self.ops_left {
            None => Ok(()),
            Some(0) => Err(injected()),
            Some(n) => {
                self.ops_left = Some(n - 1);
                Ok(())
            }
        }
    }
}

impl Disk for SimDisk {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn File>> {
        let mut state = self.lock();
        let id = match state.live_names.get(path) {
            Some(&id) => id,
            None if create => {
                state.spend()?;
                let id = state.next_id;
                state.next_id += 1;
                state.files.insert(id, SimFile::default());
                state.live_names.insert(path.to_path_buf(), id);
                id
            }
            None => return Err(not_found(path)),
        };
        Ok(Arc::new(SimHandle {
            disk: self.clone(),
            id,
            epoch: state.epoch,
        }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut state = self.lock();
        let mut dir = Some(path);
        while let Some(d) = dir {
            state.dirs.insert(d.to_path_buf());
            dir = d.parent();
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let state = self.lock();
        Ok(state
            .live_names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    fn exists(&self, path: &Path) -> bool {
        let state = self.lock();
        state.live_names.contains_key(path) || state.dirs.contains(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.spend()?;
        let id = state
            .live_names
            .remove(from)
            .ok_or_else(|| not_found(from))?;
        state.live_names.insert(to.to_path_buf(), id);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.spend()?;
        state
            .live_names
            .remove(path)
            .ok_or_else(|| not_found(path))?;
        Ok(())
    }

    fn available_bytes(&self, _dir: &Path) -> io::Result<u64> {
        let state = self.lock();
        Ok(match state.capacity {
            None => u64::MAX,
            Some(cap) => cap.saturating_sub(state.used_bytes()),
        })
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.spend()?;
        state.stats.dir_syncs += 1;
        let state = &mut *state;
        state.durable_names.retain(|p, _| p.parent() != Some(dir));
        for (path, id) in &state.live_names {
            if path.parent() == Some(dir) {
                state.durable_names.insert(path.clone(), *id);
            }
        }
        Ok(())
    }
}

struct SimHandle {
    disk: SimDisk,
    id: FileId,
    epoch: u64,
}

impl SimHandle {
    /// Runs `f` on this handle's file, or fails if a crash happened since it was opened.
    fn with<T>(
        &self,
        mutating: bool,
        f: impl FnOnce(&mut SimFile, &mut SimStats) -> io::Result<T>,
    ) -> io::Result<T> {
        self.growing(mutating, 0, f)
    }

    /// [`SimHandle::with`] for a call that makes the file at least `new_len` long: refused
    /// with `ENOSPC`, before anything changes, past the disk's capacity.
    fn growing<T>(
        &self,
        mutating: bool,
        new_len: u64,
        f: impl FnOnce(&mut SimFile, &mut SimStats) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut state = self.disk.lock();
        if state.epoch != self.epoch {
            return Err(crashed());
        }
        if mutating {
            state.spend()?;
            state.room_for(self.id, new_len)?;
        }
        let state = &mut *state;
        // A file removed from every name still exists for open handles, as on POSIX.
        let file = state.files.entry(self.id).or_default();
        f(file, &mut state.stats)
    }
}

fn mark_dirty(file: &mut SimFile, start: u64, end: u64) {
    if start >= end {
        return;
    }
    for sector in start / SECTOR_BYTES..end.div_ceil(SECTOR_BYTES) {
        file.dirty.insert(sector);
    }
}

impl File for SimHandle {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.with(false, |file, _| {
            let len = file.live.len() as u64;
            if offset >= len {
                return Ok(0);
            }
            let n = buf.len().min((len - offset) as usize);
            buf[..n].copy_from_slice(&file.live[offset as usize..offset as usize + n]);
            Ok(n)
        })
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.growing(true, offset + buf.len() as u64, |file, stats| {
            let end = offset as usize + buf.len();
            if file.live.len() < end {
                file.live.resize(end, 0);
                file.len_dirty = true;
            }
            file.live[offset as usize..end].copy_from_slice(buf);
            mark_dirty(file, offset, end as u64);
            stats.writes += 1;
            stats.bytes_written += buf.len() as u64;
            Ok(())
        })
    }

    fn len(&self) -> io::Result<u64> {
        self.with(false, |file, _| Ok(file.live.len() as u64))
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.growing(true, len, |file, _| {
            let old = file.live.len() as u64;
            file.live.resize(len as usize, 0);
            file.len_dirty = true;
            // Bytes past the old end that are now zero must reach the durable image as zeros.
            mark_dirty(file, old.min(len), old.max(len));
            Ok(())
        })
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        self.growing(true, len, |file, _| {
            if (file.live.len() as u64) < len {
                let old = file.live.len() as u64;
                file.live.resize(len as usize, 0);
                file.len_dirty = true;
                mark_dirty(file, old, len);
            }
            Ok(())
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        let latency = self.disk.lock().sync_latency;
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        self.with(true, |file, stats| {
            stats.syncs += 1;
            file.durable.resize(file.live.len(), 0);
            for &sector in &file.dirty {
                let start = (sector * SECTOR_BYTES) as usize;
                let end = (start + SECTOR_BYTES as usize).min(file.live.len());
                if start < end {
                    file.durable[start..end].copy_from_slice(&file.live[start..end]);
                }
            }
            file.dirty.clear();
            file.len_dirty = false;
            Ok(())
        })
    }
}
