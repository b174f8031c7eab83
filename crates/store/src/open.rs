//! Opening a store (creation, recovery) and checkpoints.
//!
//! Recovery, in order (docs/storage.md, "Crash analysis (store)"):
//!
//! 1. `index.snap.tmp` is an interrupted checkpoint: removed.
//! 2. `volume.dat`'s header gives the store id. A volume with a bad header and no index
//!    files is an interrupted creation and is made again.
//! 3. `index.snap` (if any) is loaded; its generation G covers every log ≤ G, and those logs
//!    are removed.
//! 4. The logs G+1, G+2, … are replayed in order through [`crate::index::apply`]. The last one
//!    may end in a torn record, which is cut (it was never acknowledged): everything past its
//!    chain is zeroed and synced before anything is written (S8). Anything else
//!    broken — a damaged record followed by valid ones, a cut-short older log, a gap, a record
//!    that does not fit the index — refuses the open, unless `StoreConfig::salvage`, which
//!    keeps the valid prefix and checkpoints at once.
//! 5. Free space is derived: the volume minus every indexed extent.
//!
//! The cost is one sequential read of the snapshot and of the logs since it; message data is
//! never read.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Instant;

use disk::{Disk, File};

use crate::OpenReport;
use crate::StoreError;
use crate::alloc::Allocator;
use crate::commit::{CommitQueue, Counters, Inner, Writer};
use crate::config::StoreConfig;
use crate::error::IoContext;
use crate::format::{DATA_START_UNIT, UNIT, VOLUME_HEADER_BYTES, VolumeHeader};
use crate::index::{Catalog, apply};
use crate::journal::{self, Journal, ScanEnd, decode_header, decode_ops, log_name, parse_log_name};
use crate::snapshot::{self, SNAP_NAME, SNAP_TMP_NAME};

pub(crate) const VOLUME_NAME: &str = "volume.dat";

fn read_all(file: &dyn File, what: &str) -> Result<Vec<u8>, StoreError> {
    let len = file.len().ctx(|| format!("reading {what}"))?;
    let len =
        usize::try_from(len).map_err(|_| StoreError::corrupt(format!("{what} is too large")))?;
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        let n = file
            .read_at(&mut buf[done..], done as u64)
            .ctx(|| format!("reading {what}"))?;
        if n == 0 {
            buf.truncate(done);
            break;
        }
        done += n;
    }
    Ok(buf)
}

/// The index of the last non-zero byte. Past a log's chain is usually tens of MiB of zeros,
/// read at every open: blocks are OR-reduced (which vectorises) and only the last non-zero
/// block is searched byte by byte.
fn last_nonzero(bytes: &[u8]) -> Option<usize> {
    const BLOCK_BYTES: usize = 4096;
    let blocks = bytes.len().div_ceil(BLOCK_BYTES);
    (0..blocks).rev().find_map(|b| {
        let block = &bytes[b * BLOCK_BYTES..bytes.len().min((b + 1) * BLOCK_BYTES)];
        if block.iter().fold(0u8, |acc, &x| acc | x) == 0 {
            return None;
        }
        block
            .iter()
            .rposition(|&x| x != 0)
            .map(|i| b * BLOCK_BYTES + i)
    })
}

fn random_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish() | 1
}

/// Makes a new, empty volume.
fn create_volume(disk: &dyn Disk, dir: &Path, config: &StoreConfig) -> Result<u64, StoreError> {
    let path = dir.join(VOLUME_NAME);
    let what = || format!("creating {}", path.display());
    let store_id = random_id();
    let file = disk.open(&path, true).ctx(what)?;
    file.set_len(0).ctx(what)?;
    file.allocate(VOLUME_HEADER_BYTES + config.volume_grow_bytes.next_multiple_of(UNIT))
        .ctx(what)?;
    file.write_all_at(&VolumeHeader { store_id }.encode(), 0)
        .ctx(what)?;
    file.sync_data().ctx(what)?;
    disk.sync_dir(dir).ctx(what)?;
    Ok(store_id)
}

pub(crate) fn open(
    disk: Arc<dyn Disk>,
    dir: &Path,
    config: StoreConfig,
) -> Result<(Inner, OpenReport), StoreError> {
    let t0 = Instant::now();
    config.validate()?;
    let salvage = config.salvage;
    let mut report = OpenReport::default();
    disk.create_dir_all(dir)
        .ctx(|| format!("creating {}", dir.display()))?;
    let names = disk
        .list(dir)
        .ctx(|| format!("listing {}", dir.display()))?;
    let mut logs: Vec<u64> = names.iter().filter_map(|n| parse_log_name(n)).collect();
    logs.sort_unstable();
    let has_snap = names.iter().any(|n| n == SNAP_NAME);
    let has_volume = names.iter().any(|n| n == VOLUME_NAME);
    for name in &names {
        if name == SNAP_TMP_NAME {
            disk.remove(&dir.join(name))
                .ctx(|| format!("removing {name}"))?;
            report
                .problems
                .push(format!("removed {name} left by an interrupted checkpoint"));
        } else if name != SNAP_NAME && name != VOLUME_NAME && parse_log_name(name).is_none() {
            report.problems.push(format!("ignored unknown file {name}"));
        }
    }
    let has_index = has_snap || !logs.is_empty();

    // The volume and the store id.
    if !has_volume && has_index {
        return Err(StoreError::corrupt(format!(
            "{VOLUME_NAME} is missing but the index exists"
        )));
    }
    let vol_path = dir.join(VOLUME_NAME);
    let mut store_id = None;
    if has_volume {
        let volume = disk
            .open(&vol_path, false)
            .ctx(|| format!("opening {}", vol_path.display()))?;
        let mut hdr = vec![0u8; 64];
        let got = volume
            .read_at(&mut hdr, 0)
            .ctx(|| format!("reading {}", vol_path.display()))?;
        match VolumeHeader::decode(&hdr[..got]) {
            Ok(h) => store_id = Some(h.store_id),
            Err(e) if !has_index => {
                report.problems.push(format!(
                    "{VOLUME_NAME}: {} with no index: created again",
                    e.0
                ));
            }
            Err(e) if salvage => {
                // The id is also in the first log's header; rebuild the volume header from it.
                let id = logs.first().and_then(|g| {
                    let f = disk.open(&dir.join(log_name(*g)), false).ok()?;
                    let mut b = [0u8; 64];
                    f.read_exact_at(&mut b, 0).ok()?;
                    let id = u64::from_le_bytes(b[16..24].try_into().ok()?);
                    decode_header(&b, id).ok().map(|_| id)
                });
                let Some(id) = id else {
                    return Err(StoreError::corrupt(format!(
                        "{VOLUME_NAME}: {}; store id unrecoverable",
                        e.0
                    )));
                };
                volume
                    .write_all_at(&VolumeHeader { store_id: id }.encode(), 0)
                    .ctx(|| "rewriting volume header".into())?;
                volume
                    .sync_data()
                    .ctx(|| "rewriting volume header".into())?;
                report
                    .problems
                    .push(format!("{VOLUME_NAME}: {}; header rewritten", e.0));
                store_id = Some(id);
            }
            Err(e) => return Err(StoreError::corrupt(format!("{VOLUME_NAME}: {}", e.0))),
        }
    }
    let store_id = match store_id {
        Some(id) => id,
        None => {
            report.created = true;
            create_volume(&*disk, dir, &config)?
        }
    };
    let volume = disk
        .open(&vol_path, false)
        .ctx(|| format!("opening {}", vol_path.display()))?;

    // The snapshot.
    let catalog = RwLock::new(Catalog::new());
    let mut snap_gen = 0;
    let mut salvaged_snapshot = false;
    if has_snap {
        let file = disk
            .open(&dir.join(SNAP_NAME), false)
            .ctx(|| format!("opening {SNAP_NAME}"))?;
        let image = read_all(&*file, SNAP_NAME)?;
        let loaded = snapshot::read(&image, store_id, salvage)?;
        snap_gen = loaded.generation;
        report.snapshot_gen = loaded.generation;
        report.snapshot_messages = loaded.messages;
        // Salvaged damage is put right by the checkpoint at the end of open.
        salvaged_snapshot = !loaded.problems.is_empty();
        report.problems.extend(loaded.problems);
        let mut cat = catalog.write().unwrap_or_else(|p| p.into_inner());
        for f in loaded.folders {
            if cat.folders.contains_key(&f.id) || cat.lookup(&f.user, &f.name).is_some() {
                let what = format!(
                    "{SNAP_NAME}: folder {} ({}/{}) appears twice",
                    f.id, f.user, f.name
                );
                if !salvage {
                    return Err(StoreError::corrupt(what));
                }
                report.problems.push(what);
                continue;
            }
            cat.insert_folder(f);
        }
        cat.next_folder_id = cat.next_folder_id.max(loaded.next_folder_id);
        cat.last_uidvalidity = cat.last_uidvalidity.max(loaded.last_uidvalidity);
    }

    // Logs the snapshot covers are leftovers of a checkpoint interrupted after its rename.
    let mut removed_any = false;
    for &g in logs.iter().filter(|&&g| g <= snap_gen) {
        disk.remove(&dir.join(log_name(g)))
            .ctx(|| format!("removing {}", log_name(g)))?;
        removed_any = true;
    }
    logs.retain(|&g| g > snap_gen);

    // Replay.
    let mut journal: Option<Journal> = None;
    let mut salvaged = salvaged_snapshot;
    let mut discard_from = None;
    let mut recreate_gen = None;
    // Bytes past the last log's chain (a torn record, or what a write cut by a failure or a
    // power cut left beyond it): (generation, chain end, end of the last non-zero byte).
    let mut stale = None;
    for (expected, (i, &generation)) in (snap_gen + 1..).zip(logs.iter().enumerate()) {
        let last = i + 1 == logs.len();
        let stop = |what: String, report: &mut OpenReport| -> Result<(), StoreError> {
            if salvage {
                report
                    .problems
                    .push(format!("{what}; later records discarded"));
                Ok(())
            } else {
                Err(StoreError::corrupt(format!(
                    "{what}; open with salvage to keep what precedes it"
                )))
            }
        };
        if generation != expected {
            stop(
                format!("journal generation {expected} is missing (found {generation})"),
                &mut report,
            )?;
            discard_from = Some(i);
            salvaged = true;
            break;
        }
        let path = dir.join(log_name(generation));
        let file = disk
            .open(&path, false)
            .ctx(|| format!("opening {}", path.display()))?;
        let image = read_all(&*file, &log_name(generation))?;
        match decode_header(&image, store_id) {
            Ok(g) if g == generation => {}
            other => {
                let why = match other {
                    Ok(g) => format!("header names generation {g}"),
                    Err(e) => e.0,
                };
                let empty = image.iter().skip(64).all(|&b| b == 0);
                if last && empty {
                    // Created but its header never became durable: nothing was ever in it.
                    report.torn_tail = Some(format!(
                        "{}: {why}; an interrupted creation, made again",
                        log_name(generation)
                    ));
                    journal = None;
                    recreate_gen = Some(generation);
                    break;
                }
                stop(format!("{}: {why}", log_name(generation)), &mut report)?;
                discard_from = Some(i);
                salvaged = true;
                break;
            }
        }
        let seed = journal::chain_seed(store_id, generation);
        let mut bad_op = None;
        let mut skipped_op = false;
        let scan = journal::scan(&image, seed, |offset, payload| {
            if bad_op.is_some() {
                return Ok(());
            }
            let ops = match decode_ops(payload) {
                Ok(ops) => ops,
                Err(e) => {
                    bad_op = Some(format!(
                        "{} record at {offset}: {}",
                        log_name(generation),
                        e.0
                    ));
                    return Ok(());
                }
            };
            let mut freed = Vec::new();
            for op in &ops {
                if let Err(msg) = apply(&catalog, op, &mut freed) {
                    let what = format!(
                        "{} record at {offset} does not fit the index: {msg}",
                        log_name(generation)
                    );
                    if !salvage {
                        return Err(StoreError::corrupt(what));
                    }
                    report.problems.push(what);
                    skipped_op = true;
                }
            }
            report.journal_records_replayed += 1;
            Ok(())
        })?;
        // A skipped operation is damage salvaged like any other: the checkpoint at the end
        // of the open takes it off the disk, or every later open would need salvage again.
        if skipped_op {
            salvaged = true;
        }
        if let Some(what) = bad_op {
            stop(what, &mut report)?;
            salvaged = true;
        }
        let mut cut_here = false;
        match &scan.stop {
            ScanEnd::Clean => {}
            ScanEnd::Torn { offset, reason } if last => {
                report.torn_tail = Some(format!(
                    "{} record at {offset}: {reason}",
                    log_name(generation)
                ));
            }
            ScanEnd::Torn { offset, reason } => {
                stop(
                    format!(
                        "{} ends early at {offset} ({reason}) but a later log exists",
                        log_name(generation)
                    ),
                    &mut report,
                )?;
                cut_here = true;
            }
            ScanEnd::Damaged { offset, reason } => {
                stop(
                    format!(
                        "{} record at {offset} is damaged ({reason}) and valid records follow it",
                        log_name(generation)
                    ),
                    &mut report,
                )?;
                cut_here = true;
            }
        }
        if last {
            let end = usize::try_from(scan.end)
                .unwrap_or(image.len())
                .min(image.len());
            if let Some(nonzero) = last_nonzero(&image[end..]) {
                stale = Some((generation, scan.end, scan.end + nonzero as u64 + 1));
            }
        }
        let len = file.len().ctx(|| format!("reading {}", path.display()))?;
        journal = Some(Journal {
            file,
            path,
            generation,
            tail: scan.end,
            last_crc: scan.last_crc,
            len,
            records: scan.records,
        });
        if cut_here {
            salvaged = true;
            discard_from = Some(i + 1);
            break;
        }
    }
    if let Some(from) = discard_from {
        for &g in &logs[from..] {
            disk.remove(&dir.join(log_name(g)))
                .ctx(|| format!("removing {}", log_name(g)))?;
            removed_any = true;
        }
    }
    if removed_any {
        disk.sync_dir(dir)
            .ctx(|| format!("syncing {}", dir.display()))?;
    }
    let prealloc = Journal::prealloc_bytes(config.journal_checkpoint_bytes);
    let mut journal = match journal {
        Some(j) => j,
        None => {
            let generation = recreate_gen.unwrap_or(snap_gen + 1);
            Journal::create(&*disk, dir, store_id, generation, prealloc)?
        }
    };
    if let Some((generation, from, to)) = stale
        && generation == journal.generation
    {
        // S8: everything past the chain's end is zeroed for good before anything else is
        // written. Otherwise a later record shorter than the bytes it lands on leaves the
        // rest beyond the new end, or a torn record's header reads as a zero length over its
        // surviving payload; once a checkpoint cut short has made a later log, this log then
        // "ends early" (damage) instead of ending cleanly (docs/storage.md, crash analysis).
        debug_assert_eq!(
            from, journal.tail,
            "records are appended where the chain ends"
        );
        let what = || format!("zeroing past the end of {}", journal.path.display());
        journal.file.write_zeros(from, to - from).ctx(what)?;
        journal.file.sync_data().ctx(what)?;
    }
    if journal.len < prealloc {
        // A journal cut short (or made with a smaller setting): give it its room back, so
        // appends never change its length. Synced with the next record.
        journal
            .file
            .allocate(prealloc)
            .ctx(|| format!("extending {}", journal.path.display()))?;
        journal.len = prealloc;
    }
    report.journal_gen = journal.generation;

    // Free space: the volume minus every indexed extent.
    let mut used = Vec::new();
    let mut max_end = DATA_START_UNIT;
    {
        let cat = catalog.read().unwrap_or_else(|p| p.into_inner());
        // Two messages sharing units is damage (a record that passed its checksum but names
        // the wrong place): freeing one would free the other's data too, and the allocator
        // would count those units twice (found by fuzzing, docs/fuzzing.md). Without salvage
        // the store refuses to open; with it, the message that starts later is dropped.
        let mut extents = Vec::new();
        for cell in cat.folders.values() {
            let f = cell.read();
            extents.extend(
                f.messages
                    .iter()
                    .map(|(&uid, e)| (e.start, e.end(), f.id, uid)),
            );
        }
        extents.sort_unstable();
        let mut covered = DATA_START_UNIT;
        for (start, end, folder, uid) in extents {
            if start >= covered {
                covered = end;
                continue;
            }
            let Some(cell) = cat.folders.get(&folder) else {
                continue;
            };
            let mut f = cell.write();
            let what = format!(
                "{}/{} UID {uid} shares units [{start}, {}) with another message",
                f.user,
                f.name,
                end.min(covered)
            );
            if !salvage {
                return Err(StoreError::corrupt(format!(
                    "index: {what}; open with salvage to drop it"
                )));
            }
            f.remove(uid, &mut Vec::new());
            report.problems.push(format!("index: {what}; dropped"));
            salvaged = true;
        }
        report.folders = cat.folders.len() as u64;
        for cell in cat.folders.values() {
            let f = cell.read();
            report.messages += f.messages.len() as u64;
            for e in f.messages.values() {
                used.push((e.start, e.units()));
                max_end = max_end.max(e.end());
            }
        }
    }
    let vol_len = volume
        .len()
        .ctx(|| format!("reading {}", vol_path.display()))?;
    let mut end = (vol_len / UNIT).max(DATA_START_UNIT);
    if max_end > end {
        report.problems.push(format!(
            "{VOLUME_NAME} is {vol_len} bytes but the index names data up to byte {}; it was extended (the messages past its end read as damaged)",
            max_end * UNIT
        ));
        volume
            .allocate(max_end * UNIT)
            .ctx(|| format!("extending {}", vol_path.display()))?;
        volume
            .sync_data()
            .ctx(|| format!("extending {}", vol_path.display()))?;
        end = max_end;
    }
    let (alloc, problems) = Allocator::build(
        DATA_START_UNIT,
        end,
        used,
        config.reservation_bytes / UNIT,
        config.reservations_max,
    );
    report
        .problems
        .extend(problems.into_iter().map(|p| format!("index: {p}")));

    let inner = Inner {
        disk,
        dir: dir.to_path_buf(),
        config,
        store_id,
        volume,
        catalog,
        writer: Mutex::new(Writer {
            journal,
            alloc,
            failed: None,
        }),
        queue: Mutex::new(CommitQueue::default()),
        queue_cv: Condvar::new(),
        incoming: std::sync::atomic::AtomicUsize::new(0),
        counters: Counters::default(),
        observer: std::sync::RwLock::new(None),
        recent: crate::recent::Recent::default(),
    };
    // Nothing stored before this open is `\Recent` (recent.rs).
    for (&id, cell) in &inner
        .catalog
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .folders
    {
        inner.recent.start_at(id, cell.read().uidnext);
    }
    if salvaged {
        // Put the salvaged state on disk whole, so the damaged files are gone.
        inner.checkpoint()?;
        report
            .problems
            .push("salvaged: checkpoint written, damaged journal removed".into());
        report.journal_gen = crate::commit::lock(&inner.writer).journal.generation;
    }
    report.elapsed = t0.elapsed();
    Ok((inner, report))
}

impl Inner {
    /// A checkpoint now, under the writer lock.
    pub(crate) fn checkpoint(&self) -> Result<(), StoreError> {
        let mut w = self.writer()?;
        let r = self.checkpoint_locked(&mut w);
        if let Err(e) = &r {
            w.failed = Some(format!("checkpoint failed: {e}"));
        }
        r
    }

    /// New log generation+1 (durable), snapshot of generation (durable under its name), old logs removed.
    /// A crash anywhere leaves files recovery handles (docs/storage.md crash table).
    pub(crate) fn checkpoint_locked(&self, w: &mut Writer) -> Result<(), StoreError> {
        let old = w.journal.generation;
        let prealloc = Journal::prealloc_bytes(self.config.journal_checkpoint_bytes);
        w.journal = Journal::create(&*self.disk, &self.dir, self.store_id, old + 1, prealloc)?;
        snapshot::write(&*self.disk, &self.dir, &self.catalog, self.store_id, old)?;
        let names = self
            .disk
            .list(&self.dir)
            .ctx(|| format!("listing {}", self.dir.display()))?;
        for name in names {
            if parse_log_name(&name).is_some_and(|g| g <= old) {
                self.disk
                    .remove(&self.dir.join(&name))
                    .ctx(|| format!("removing {name}"))?;
            }
        }
        self.disk
            .sync_dir(&self.dir)
            .ctx(|| format!("syncing {}", self.dir.display()))?;
        self.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::last_nonzero;

    #[test]
    fn last_nonzero_finds_the_last_set_byte_across_block_edges() {
        assert_eq!(last_nonzero(&[]), None);
        assert_eq!(last_nonzero(&[0; 10_000]), None);
        for at in [0, 1, 4095, 4096, 8191, 9_999] {
            let mut bytes = vec![0u8; 10_000];
            bytes[at] = 7;
            if at > 0 {
                bytes[0] = 1;
            }
            assert_eq!(last_nonzero(&bytes), Some(at), "at {at}");
        }
    }
}
