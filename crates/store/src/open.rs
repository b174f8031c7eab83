//! Opening a store (creation, recovery) and checkpoints.
//!
//! Recovery, in phases, each a method of `Opening` that ends by asserting what it established
//! (docs/storage.md, "Phases of store open"; the crash cases are in "Crash analysis (store)"):
//!
//! 0. `refuse_newer_formats`: a file whose format version is above this build's refuses the
//!    open before anything is read, removed, salvaged or written.
//! 1. `list_files`: `index.snap.tmp` is an interrupted checkpoint: removed.
//! 2. `read_volume_header`: `volume.dat`'s header gives the store id. A volume with a bad
//!    header and no index files is an interrupted creation and is made again.
//! 3. `load_snapshot`: `index.snap` (if any) is loaded; its generation G covers every log ≤ G,
//! 4. `remove_covered_logs`: and those logs are removed.
//! 5. `replay_journal`: the logs G+1, G+2, … are replayed in order through
//!    [`crate::index::apply`]. The last one may end in a torn record, which is cut (it was
//!    never acknowledged). Anything else broken — a damaged record followed by valid ones, a
//!    cut-short older log, a gap, a record that does not fit the index — refuses the open,
//!    unless `StoreConfig::salvage`, which keeps the valid prefix and checkpoints at once.
//! 6. `remove_discarded_logs`: logs past such damage are removed (salvage).
//! 7. `ready_journal`: everything past the last log's chain is zeroed and synced before
//!    anything is written (S8); a missing or never-written log is made.
//! 8. `drop_shared_extents`: two messages sharing units refuse the open (salvage: one is
//!    dropped).
//! 9. `build_allocator`: free space is derived: the volume minus every indexed extent.
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
use crate::cache::{SummaryCache, ViewCache};
use crate::commit::{CommitQueue, Counters, Store, Writer, lock};
use crate::config::StoreConfig;
use crate::error::IoContext;
use crate::format::{
    DATA_START_UNIT, FORMAT_VERSION, INDEX_FORMAT_VERSION, UNIT, VOLUME_HEADER_BYTES, VOLUME_MAGIC,
    VolumeHeader,
};
use crate::index::{Catalog, apply};
use crate::journal::{
    self, GENERATION_MAX, JOURNAL_HEADER_BYTES, Journal, ScanEnd, decode_header, decode_ops,
    log_name, parse_log_name,
};
use crate::recent::Recent;
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
    file.allocate(VOLUME_HEADER_BYTES + config.volume_step_bytes(0).next_multiple_of(UNIT))
        .ctx(what)?;
    file.write_all_at(&VolumeHeader { store_id }.encode(), 0)
        .ctx(what)?;
    file.sync_data().ctx(what)?;
    disk.sync_dir(dir).ctx(what)?;
    Ok(store_id)
}

/// The files of a store directory, as [`open`] found them.
struct StoreFiles {
    /// Generations of the logs present, ascending (two names for one generation would both
    /// be listed; replay then finds a generation missing).
    logs: Vec<u64>,
    has_snap: bool,
    has_volume: bool,
}

impl StoreFiles {
    fn has_index(&self) -> bool {
        self.has_snap || !self.logs.is_empty()
    }
}

/// What replaying the logs left for the next phases.
#[derive(Default)]
struct Replayed {
    /// The last log replayed: the writer continues it.
    journal: Option<Journal>,
    /// The last log was created but its header never became durable: make it again.
    recreate_gen: Option<u64>,
    /// Index into the logs of the first one to remove (damage ended the replay before it).
    discard_from: Option<usize>,
    /// Bytes past the last log's chain (a torn record, or what a write cut by a failure or a
    /// power cut left beyond it): (generation, chain end, end of the last non-zero byte).
    stale: Option<(u64, u64, u64)>,
}

/// How a log's header checked out.
enum LogHeader {
    Good,
    /// The last log, created but with nothing ever durable in it: made again.
    NeverWritten,
    /// Damage: the replay ends before this log (salvage), or the open was refused.
    Bad,
}

/// What the phases of [`open`] share: where and how to open, and what they found so far.
struct Opening<'a> {
    disk: &'a dyn Disk,
    dir: &'a Path,
    config: &'a StoreConfig,
    report: OpenReport,
    /// Damage was skipped (salvage): the state is put on disk whole by a checkpoint at the
    /// end of the open.
    salvaged: bool,
    /// Size of `index.snap` (0 without one): the journal is sized after it.
    snapshot_bytes: u64,
}

impl Store {
    /// Opens (or creates) the store in `dir`: reads the snapshot, replays the journal, cuts
    /// a torn tail, derives free space; the phases of docs/storage.md, "Phases of store
    /// open", in order.
    pub fn open(
        disk: Arc<dyn Disk>,
        dir: &Path,
        config: StoreConfig,
    ) -> Result<(Arc<Store>, OpenReport), StoreError> {
        let t0 = Instant::now();
        config.validate()?;
        let mut o = Opening {
            disk: &*disk,
            dir,
            config: &config,
            report: OpenReport::default(),
            salvaged: false,
            snapshot_bytes: 0,
        };
        o.refuse_newer_formats()?;
        let mut files = o.list_files()?;
        let (store_id, volume) = o.read_volume_header(&files)?;
        let catalog = RwLock::new(Catalog::new());
        write_catalog_delivered(&catalog, &config);
        let snap_gen = o.load_snapshot(&files, store_id, &catalog)?;
        let removed_any = o.remove_covered_logs(&mut files.logs, snap_gen)?;
        let mut replayed = o.replay_journal(&files.logs, snap_gen, store_id, &catalog)?;
        o.remove_discarded_logs(&files.logs, &replayed, removed_any)?;
        let journal = o.ready_journal(&mut replayed, snap_gen, store_id)?;
        o.drop_shared_extents(&catalog)?;
        let alloc = o.build_allocator(&*volume, &catalog)?;
        let Opening {
            mut report,
            salvaged,
            snapshot_bytes,
            ..
        } = o;

        let store = Store {
            summaries: SummaryCache::new(config.summary_cache_bytes_max),
            views: ViewCache::new(config.view_cache_bytes_max),
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
                snapshot_bytes,
                checkpoint_problem: None,
                checkpoint_retry_at: None,
            }),
            queue: Mutex::new(CommitQueue::default()),
            queue_cv: Condvar::new(),
            counters: Counters::default(),
            observer: std::sync::RwLock::new(None),
            recent: Recent::default(),
        };
        // Nothing stored before this open is `\Recent` (recent.rs).
        for (&id, cell) in &store.catalog().folders {
            store.recent.start_at(id, cell.read().uidnext);
        }
        if salvaged {
            // Put the salvaged state on disk whole, so the damaged files are gone.
            store.checkpoint()?;
            report
                .problems
                .push("salvaged: checkpoint written, damaged journal removed".into());
            report.journal_gen = lock(&store.writer).journal.generation;
        } else if lock(&store.writer).journal.version < INDEX_FORMAT_VERSION {
            // Index format 1 (docs/storage.md, "Index format 2"): a checkpoint gives the
            // store a log and a snapshot of this build's format, so nothing of format 2 is
            // ever written into a log an older build would misread. Failing (a full disk),
            // the store opens all the same and journals no `Delivered` op until a
            // checkpoint succeeds.
            let mut w = lock(&store.writer);
            match store.checkpoint_noting(&mut w) {
                Ok(()) => report.journal_gen = w.journal.generation,
                Err(e) => report.problems.push(format!(
                    "index format 1 kept for now: checkpoint failed: {e}"
                )),
            }
        }
        // Generations only grow: the writer's log is past every log the snapshot covers.
        assert!(report.journal_gen > snap_gen);
        report.elapsed = t0.elapsed();
        Ok((Arc::new(store), report))
    }
}

impl Opening<'_> {
    /// Damage that ends the replay: with salvage it is reported and what precedes it kept;
    /// without, the open is refused.
    fn stop(&mut self, what: String) -> Result<(), StoreError> {
        if self.config.salvage {
            self.report
                .problems
                .push(format!("{what}; later records discarded"));
            Ok(())
        } else {
            Err(StoreError::corrupt(format!(
                "{what}; open with salvage to keep what precedes it"
            )))
        }
    }

    /// Phase 0: reads the format version of `volume.dat`, of every `index-*.log` and of
    /// `index.snap` (each behind its magic number) and refuses the open if one is above
    /// [`FORMAT_VERSION`] (the volume) or [`INDEX_FORMAT_VERSION`] (logs, snapshot): a newer build wrote it, and salvage or a checkpoint here would
    /// destroy what that build relies on. Only the magic and the version are read, so a
    /// damaged file is left to the phases that judge damage. Post: nothing was written.
    fn refuse_newer_formats(&mut self) -> Result<(), StoreError> {
        let (disk, dir) = (self.disk, self.dir);
        let names = match disk.list(dir) {
            Ok(names) => names,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::io(format!("listing {}", dir.display()), e)),
        };
        for name in names {
            // Where the version sits: after the magic, in the header (volume, log), or
            // in the first section's payload (snapshot: kind u8, length u32, then version).
            let (magic, at, supported): (&[u8], u64, u32) = if name == VOLUME_NAME {
                (&VOLUME_MAGIC, 8, FORMAT_VERSION)
            } else if parse_log_name(&name).is_some() {
                (&journal::JOURNAL_MAGIC, 8, INDEX_FORMAT_VERSION)
            } else if name == SNAP_NAME {
                (&snapshot::SNAP_MAGIC, 13, INDEX_FORMAT_VERSION)
            } else {
                continue;
            };
            let path = dir.join(&name);
            let file = disk
                .open(&path, false)
                .ctx(|| format!("opening {}", path.display()))?;
            let mut head = [0u8; 17];
            let mut done = 0;
            while done < head.len() {
                match file.read_at(&mut head[done..], done as u64) {
                    Ok(0) => break,
                    Ok(n) => done += n,
                    Err(e) => return Err(StoreError::io(format!("reading {}", path.display()), e)),
                }
            }
            let at = at as usize;
            if done < at + 4 || head[..8] != *magic || (name == SNAP_NAME && head[8] != 1) {
                continue;
            }
            let found = u32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
            if found > supported {
                return Err(StoreError::NewerFormat {
                    file: path.display().to_string(),
                    found,
                    supported,
                });
            }
        }
        Ok(())
    }

    /// Phase 1: lists the directory, removes `index.snap.tmp` (an interrupted checkpoint) and
    /// notes files that are not the store's.
    fn list_files(&mut self) -> Result<StoreFiles, StoreError> {
        let (disk, dir) = (self.disk, self.dir);
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
                self.report
                    .problems
                    .push(format!("removed {name} left by an interrupted checkpoint"));
            } else if name != SNAP_NAME && name != VOLUME_NAME && parse_log_name(name).is_none() {
                self.report
                    .problems
                    .push(format!("ignored unknown file {name}"));
            }
        }
        assert!(logs.is_sorted(), "logs are replayed in generation order");
        assert!(logs.last().is_none_or(|&g| g <= GENERATION_MAX));
        Ok(StoreFiles {
            logs,
            has_snap,
            has_volume,
        })
    }

    /// Phase 2: the store id from `volume.dat`'s header. A volume with a bad header and no
    /// index is an interrupted creation, made again; with salvage, a bad header is rebuilt
    /// from the first log's. Returns the id and the volume, open.
    fn read_volume_header(
        &mut self,
        files: &StoreFiles,
    ) -> Result<(u64, Arc<dyn File>), StoreError> {
        if !files.has_volume && files.has_index() {
            return Err(StoreError::corrupt(format!(
                "{VOLUME_NAME} is missing but the index exists"
            )));
        }
        let vol_path = self.dir.join(VOLUME_NAME);
        let mut store_id = None;
        if files.has_volume {
            let volume = self
                .disk
                .open(&vol_path, false)
                .ctx(|| format!("opening {}", vol_path.display()))?;
            let mut hdr = vec![0u8; 64];
            let got = volume
                .read_at(&mut hdr, 0)
                .ctx(|| format!("reading {}", vol_path.display()))?;
            store_id = match VolumeHeader::decode(&hdr[..got]) {
                Ok(h) => Some(h.store_id),
                Err(e) if !files.has_index() => {
                    self.report.problems.push(format!(
                        "{VOLUME_NAME}: {} with no index: created again",
                        e.0
                    ));
                    None
                }
                Err(e) if self.config.salvage => {
                    Some(self.rewrite_volume_header(&*volume, &files.logs, &e.0)?)
                }
                Err(e) => return Err(StoreError::corrupt(format!("{VOLUME_NAME}: {}", e.0))),
            };
        }
        let store_id = match store_id {
            Some(id) => id,
            None => {
                self.report.created = true;
                create_volume(self.disk, self.dir, self.config)?
            }
        };
        let volume = self
            .disk
            .open(&vol_path, false)
            .ctx(|| format!("opening {}", vol_path.display()))?;
        // A volume is made only where no index exists, so no index loses the store it names.
        assert!(!(self.report.created && files.has_index()));
        Ok((store_id, volume))
    }

    /// Salvage of a volume header that does not check out: the store id is also in the first
    /// log's header, which checks itself.
    fn rewrite_volume_header(
        &mut self,
        volume: &dyn File,
        logs: &[u64],
        why: &str,
    ) -> Result<u64, StoreError> {
        let id = logs.first().and_then(|g| {
            let f = self.disk.open(&self.dir.join(log_name(*g)), false).ok()?;
            let mut b = [0u8; 64];
            f.read_exact_at(&mut b, 0).ok()?;
            let id = u64::from_le_bytes(b[16..24].try_into().ok()?);
            decode_header(&b, id).ok().map(|_| id)
        });
        let Some(id) = id else {
            return Err(StoreError::corrupt(format!(
                "{VOLUME_NAME}: {why}; store id unrecoverable"
            )));
        };
        volume
            .write_all_at(&VolumeHeader { store_id: id }.encode(), 0)
            .ctx(|| "rewriting volume header".into())?;
        volume
            .sync_data()
            .ctx(|| "rewriting volume header".into())?;
        self.report
            .problems
            .push(format!("{VOLUME_NAME}: {why}; header rewritten"));
        Ok(id)
    }

    /// Phase 3: `index.snap`, if any, into the catalog. Returns its generation G (0 without
    /// one): it covers every log <= G.
    fn load_snapshot(
        &mut self,
        files: &StoreFiles,
        store_id: u64,
        catalog: &RwLock<Catalog>,
    ) -> Result<u64, StoreError> {
        if !files.has_snap {
            return Ok(0);
        }
        let file = self
            .disk
            .open(&self.dir.join(SNAP_NAME), false)
            .ctx(|| format!("opening {SNAP_NAME}"))?;
        let image = read_all(&*file, SNAP_NAME)?;
        self.snapshot_bytes = image.len() as u64;
        let loaded = snapshot::read(&image, store_id, self.config.salvage)?;
        self.report.snapshot_gen = loaded.generation;
        self.report.snapshot_messages = loaded.messages;
        // Salvaged damage is put right by the checkpoint at the end of open.
        self.salvaged = !loaded.problems.is_empty();
        self.report.problems.extend(loaded.problems);
        let mut cat = catalog.write().unwrap_or_else(|p| p.into_inner());
        for f in loaded.folders {
            if cat.folders.contains_key(&f.id) || cat.lookup(&f.user, &f.name).is_some() {
                let what = format!(
                    "{SNAP_NAME}: folder {} ({}/{}) appears twice",
                    f.id, f.user, f.name
                );
                if !self.config.salvage {
                    return Err(StoreError::corrupt(what));
                }
                self.report.problems.push(what);
                continue;
            }
            cat.insert_folder(f);
        }
        for (at, key) in &loaded.delivered {
            cat.delivered.insert(*at, std::slice::from_ref(key));
        }
        cat.next_folder_id = cat.next_folder_id.max(loaded.next_folder_id);
        cat.last_uidvalidity = cat.last_uidvalidity.max(loaded.last_uidvalidity);
        assert!(
            loaded.generation <= GENERATION_MAX,
            "the snapshot reader bounds it"
        );
        // One folder per id and per name; ids below the next one given.
        debug_assert_eq!(
            cat.folders.len(),
            cat.users.values().map(|names| names.len()).sum::<usize>()
        );
        debug_assert!(cat.folders.keys().all(|&id| id < cat.next_folder_id));
        Ok(loaded.generation)
    }

    /// Phase 4: logs the snapshot covers are leftovers of a checkpoint interrupted after its
    /// rename: removed (the directory is synced with the next phase's removals).
    fn remove_covered_logs(
        &mut self,
        logs: &mut Vec<u64>,
        snap_gen: u64,
    ) -> Result<bool, StoreError> {
        let mut removed_any = false;
        for &g in logs.iter().filter(|&&g| g <= snap_gen) {
            self.disk
                .remove(&self.dir.join(log_name(g)))
                .ctx(|| format!("removing {}", log_name(g)))?;
            removed_any = true;
        }
        logs.retain(|&g| g > snap_gen);
        assert!(logs.first().is_none_or(|&g| g > snap_gen));
        Ok(removed_any)
    }

    /// Phase 5: replays the logs after the snapshot in order through [`apply`], until the end
    /// or the first damage (which refuses the open, unless salvage).
    fn replay_journal(
        &mut self,
        logs: &[u64],
        snap_gen: u64,
        store_id: u64,
        catalog: &RwLock<Catalog>,
    ) -> Result<Replayed, StoreError> {
        let mut out = Replayed::default();
        for (expected, (i, &generation)) in (snap_gen + 1..).zip(logs.iter().enumerate()) {
            let last = i + 1 == logs.len();
            if generation != expected {
                self.stop(format!(
                    "journal generation {expected} is missing (found {generation})"
                ))?;
                out.discard_from = Some(i);
                self.salvaged = true;
                break;
            }
            let path = self.dir.join(log_name(generation));
            let file = self
                .disk
                .open(&path, false)
                .ctx(|| format!("opening {}", path.display()))?;
            let image = read_all(&*file, &log_name(generation))?;
            match self.check_log_header(&image, store_id, generation, last)? {
                LogHeader::Good => {}
                LogHeader::NeverWritten => {
                    out.journal = None;
                    out.recreate_gen = Some(generation);
                    break;
                }
                LogHeader::Bad => {
                    out.discard_from = Some(i);
                    break;
                }
            }
            let scan = self.replay_log(&image, store_id, generation, catalog)?;
            let cut_here = self.judge_log_end(&scan.stop, generation, last)?;
            if last {
                out.stale = stale_bytes(&image, scan.end).map(|(from, to)| (generation, from, to));
            }
            let len = file.len().ctx(|| format!("reading {}", path.display()))?;
            out.journal = Some(Journal {
                file,
                path,
                generation,
                tail: scan.end,
                last_crc: scan.last_crc,
                len,
                records: scan.records,
                version: journal::header_version(&image),
            });
            if cut_here {
                self.salvaged = true;
                out.discard_from = Some(i + 1);
                break;
            }
        }
        // The log kept is past the snapshot; stale bytes are only ever behind its chain.
        let kept = out.journal.as_ref();
        assert!(kept.is_none_or(|j| j.generation > snap_gen && j.tail >= JOURNAL_HEADER_BYTES));
        assert!(out.recreate_gen.is_none() || kept.is_none());
        assert!(out.discard_from.is_none_or(|from| from <= logs.len()));
        assert!(out.stale.is_none_or(|(generation, from, to)| {
            from < to && kept.is_some_and(|j| j.generation == generation && j.tail == from)
        }));
        Ok(out)
    }

    /// Whether a log's header names this store and generation. A bad header on an empty last
    /// log is a creation cut short, made again; anywhere else it is damage.
    fn check_log_header(
        &mut self,
        image: &[u8],
        store_id: u64,
        generation: u64,
        last: bool,
    ) -> Result<LogHeader, StoreError> {
        let why = match decode_header(image, store_id) {
            Ok(g) if g == generation => return Ok(LogHeader::Good),
            Ok(g) => format!("header names generation {g}"),
            Err(e) => e.0,
        };
        let empty = image.iter().skip(64).all(|&b| b == 0);
        if last && empty {
            // Created but its header never became durable: nothing was ever in it.
            self.report.torn_tail = Some(format!(
                "{}: {why}; an interrupted creation, made again",
                log_name(generation)
            ));
            return Ok(LogHeader::NeverWritten);
        }
        self.stop(format!("{}: {why}", log_name(generation)))?;
        self.salvaged = true;
        Ok(LogHeader::Bad)
    }

    /// Applies every record of one log's chain to the catalog, in order. A record that does
    /// not decode ends the replay of the log's records; one that does not fit the index
    /// refuses the open (with salvage: is skipped). Returns where the chain ended.
    fn replay_log(
        &mut self,
        image: &[u8],
        store_id: u64,
        generation: u64,
        catalog: &RwLock<Catalog>,
    ) -> Result<journal::Scan, StoreError> {
        let salvage = self.config.salvage;
        let report = &mut self.report;
        let replayed_before = report.journal_records_replayed;
        let mut bad_op = None;
        let mut skipped_op = false;
        let seed = journal::chain_seed(store_id, generation);
        let scan = journal::scan(image, seed, |offset, payload| {
            if bad_op.is_some() {
                return Ok(());
            }
            let ops = match decode_ops(payload) {
                Ok(ops) => ops,
                Err(e) => {
                    let name = log_name(generation);
                    bad_op = Some(format!("{name} record at {offset}: {}", e.0));
                    return Ok(());
                }
            };
            let mut freed = Vec::new();
            for op in &ops {
                if let Err(msg) = apply(catalog, op, &mut freed) {
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
            self.salvaged = true;
        }
        if let Some(what) = bad_op {
            self.stop(what)?;
            self.salvaged = true;
        }
        let replayed = self.report.journal_records_replayed - replayed_before;
        assert!(
            replayed <= scan.records,
            "only records of the chain are replayed"
        );
        assert!(scan.end >= JOURNAL_HEADER_BYTES);
        Ok(scan)
    }

    /// How a log's chain ended: a torn record at the end of the last log is the one write
    /// that was interrupted (never acknowledged) and is cut; a torn record in an older log,
    /// or damage followed by valid records, ends the replay. Returns whether it ended here.
    fn judge_log_end(
        &mut self,
        stop: &ScanEnd,
        generation: u64,
        last: bool,
    ) -> Result<bool, StoreError> {
        let cut_here = match stop {
            ScanEnd::Clean => false,
            ScanEnd::Torn { offset, reason } if last => {
                self.report.torn_tail = Some(format!(
                    "{} record at {offset}: {reason}",
                    log_name(generation)
                ));
                false
            }
            ScanEnd::Torn { offset, reason } => {
                self.stop(format!(
                    "{} ends early at {offset} ({reason}) but a later log exists",
                    log_name(generation)
                ))?;
                true
            }
            ScanEnd::Damaged { offset, reason } => {
                self.stop(format!(
                    "{} record at {offset} is damaged ({reason}) and valid records follow it",
                    log_name(generation)
                ))?;
                true
            }
        };
        // Only the last log may end torn; a clean end never stops the replay.
        assert!(last || self.report.torn_tail.is_none());
        assert!(!(cut_here && *stop == ScanEnd::Clean));
        Ok(cut_here)
    }

    /// Phase 6: removes the logs damage cut off (salvage), and syncs the directory if this or
    /// phase 4 removed any.
    fn remove_discarded_logs(
        &mut self,
        logs: &[u64],
        replayed: &Replayed,
        mut removed_any: bool,
    ) -> Result<(), StoreError> {
        let discarded = replayed.discard_from.map_or(&[][..], |from| &logs[from..]);
        for &g in discarded {
            self.disk
                .remove(&self.dir.join(log_name(g)))
                .ctx(|| format!("removing {}", log_name(g)))?;
            removed_any = true;
        }
        if removed_any {
            self.disk
                .sync_dir(self.dir)
                .ctx(|| format!("syncing {}", self.dir.display()))?;
        }
        // Logs are sorted, so every log removed comes at or after the one the writer continues
        // (at: a second name for its generation, damage the store never makes).
        assert!(
            replayed
                .journal
                .as_ref()
                .is_none_or(|j| { discarded.iter().all(|&g| g >= j.generation) })
        );
        Ok(())
    }

    /// Phase 7: the log the writer appends to: the last one replayed, or a new one. Past its
    /// chain it holds only zeros (S8), and it has its preallocated room.
    fn ready_journal(
        &mut self,
        replayed: &mut Replayed,
        snap_gen: u64,
        store_id: u64,
    ) -> Result<Journal, StoreError> {
        let prealloc =
            Journal::prealloc_bytes(self.config.checkpoint_after_bytes(self.snapshot_bytes));
        let mut journal = match replayed.journal.take() {
            Some(j) => j,
            None => {
                let generation = replayed.recreate_gen.unwrap_or(snap_gen + 1);
                Journal::create_fitting(self.disk, self.dir, store_id, generation, prealloc)?
            }
        };
        if let Some((generation, from, to)) = replayed.stale
            && generation == journal.generation
        {
            // S8: everything past the chain's end is zeroed for good before anything else is
            // written. Otherwise a later record shorter than the bytes it lands on leaves the
            // rest beyond the new end, or a torn record's header reads as a zero length over
            // its surviving payload; once a checkpoint cut short has made a later log, this
            // log then "ends early" (damage) instead of ending cleanly (docs/storage.md,
            // crash analysis).
            assert_eq!(
                from, journal.tail,
                "records are appended where the chain ends"
            );
            let what = || format!("zeroing past the end of {}", journal.path.display());
            journal.file.write_zeros(from, to - from).ctx(what)?;
            journal.file.sync_data().ctx(what)?;
        }
        if journal.len < prealloc {
            // A journal cut short (or made with a smaller setting): give it its room back, so
            // appends rarely change its length. Synced with the next record. On a full disk
            // it opens as it is: appends make their room one by one (`Journal::make_room`).
            match journal.file.allocate(prealloc) {
                Ok(()) => journal.len = prealloc,
                Err(e) if disk::is_out_of_space(&e) => {}
                Err(e) => {
                    return Err(StoreError::io(
                        format!("extending {}", journal.path.display()),
                        e,
                    ));
                }
            }
        }
        self.report.journal_gen = journal.generation;
        assert!(journal.generation > snap_gen, "generations only grow");
        assert!(journal.tail <= journal.len);
        Ok(journal)
    }

    /// Phase 8: two messages sharing units is damage (a record that passed its checksum but
    /// names the wrong place): freeing one would free the other's data too, and the allocator
    /// would count those units twice (found by fuzzing, docs/fuzzing.md). Without salvage the
    /// store refuses to open; with it, the message that starts later is dropped.
    fn drop_shared_extents(&mut self, catalog: &RwLock<Catalog>) -> Result<(), StoreError> {
        let cat = catalog.read().unwrap_or_else(|p| p.into_inner());
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
            if !self.config.salvage {
                return Err(StoreError::corrupt(format!(
                    "index: {what}; open with salvage to drop it"
                )));
            }
            f.remove(uid, &mut Vec::new());
            self.report.problems.push(format!("index: {what}; dropped"));
            self.salvaged = true;
        }
        debug_assert!(no_shared_units(&cat), "S2: no two indexed messages overlap");
        Ok(())
    }

    /// Phase 9: free space is the volume minus every indexed extent (S5). A volume shorter
    /// than the index says is extended, so every extent lies inside it (S2).
    fn build_allocator(
        &mut self,
        volume: &dyn File,
        catalog: &RwLock<Catalog>,
    ) -> Result<Allocator, StoreError> {
        let mut used = Vec::new();
        let mut max_end = DATA_START_UNIT;
        {
            let cat = catalog.read().unwrap_or_else(|p| p.into_inner());
            self.report.folders = cat.folders.len() as u64;
            for cell in cat.folders.values() {
                let f = cell.read();
                self.report.messages += f.messages.len() as u64;
                for e in f.messages.values() {
                    used.push((e.start, e.units()));
                    max_end = max_end.max(e.end());
                }
            }
        }
        let vol_path = self.dir.join(VOLUME_NAME);
        let vol_len = volume
            .len()
            .ctx(|| format!("reading {}", vol_path.display()))?;
        let mut end = (vol_len / UNIT).max(DATA_START_UNIT);
        if max_end > end {
            self.report.problems.push(format!(
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
            self.config.reservation_bytes / UNIT,
            self.config.reservations_max,
        );
        self.report
            .problems
            .extend(problems.into_iter().map(|p| format!("index: {p}")));
        assert!(
            alloc.end() >= max_end,
            "S2: every indexed extent lies inside the volume"
        );
        assert_eq!(alloc.check_accounting(), Ok(()), "S5");
        Ok(alloc)
    }
}

/// Where the bytes past a log's chain end that are not zero: `(chain end, end of the last
/// non-zero byte)`, or `None` if there are none.
fn stale_bytes(image: &[u8], chain_end: u64) -> Option<(u64, u64)> {
    let end = usize::try_from(chain_end)
        .unwrap_or(image.len())
        .min(image.len());
    last_nonzero(&image[end..]).map(|nonzero| (chain_end, chain_end + nonzero as u64 + 1))
}

/// S2's first half over the whole catalog: no two indexed messages share a unit.
fn no_shared_units(cat: &Catalog) -> bool {
    let mut extents: Vec<(u64, u64)> = Vec::new();
    for cell in cat.folders.values() {
        extents.extend(cell.read().messages.values().map(|e| (e.start, e.end())));
    }
    extents.sort_unstable();
    extents.windows(2).all(|pair| pair[0].1 <= pair[1].0)
}

impl Store {
    /// Writes a checkpoint now, under the writer lock (normally automatic once the journal
    /// passes `journal_checkpoint_bytes`).
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        let mut w = self.writer()?;
        self.checkpoint_noting(&mut w)
    }

    /// New log generation+1 (durable), snapshot of generation (durable under its name), old logs removed.
    /// A crash anywhere leaves files recovery handles (docs/storage.md crash table).
    pub(crate) fn checkpoint_locked(&self, w: &mut Writer) -> Result<(), StoreError> {
        let old = w.journal.generation;
        let prealloc =
            Journal::prealloc_bytes(self.config.checkpoint_after_bytes(w.snapshot_bytes));
        w.journal =
            Journal::create_fitting(&*self.disk, &self.dir, self.store_id, old + 1, prealloc)?;
        match snapshot::write(&*self.disk, &self.dir, &self.catalog, self.store_id, old) {
            Ok(bytes) => w.snapshot_bytes = bytes,
            Err(e) => {
                // As a crash here would: the new log continues the old ones, the old snapshot
                // stays. Only the half-written snapshot's room is given back.
                let _ = self.disk.remove(&self.dir.join(SNAP_TMP_NAME));
                return Err(e);
            }
        }
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

/// The bounds of the delivered keys come from the configuration (docs/storage.md,
/// "Delivered keys"), before the snapshot and the journal add any.
fn write_catalog_delivered(catalog: &RwLock<Catalog>, config: &StoreConfig) {
    catalog.write().unwrap_or_else(|p| p.into_inner()).delivered =
        crate::delivered::DeliveredKeys::new(
            config.delivered_keys_max,
            config.delivered_keys_retain,
        );
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
