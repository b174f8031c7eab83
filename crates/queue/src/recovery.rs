//! Opening a queue: rebuilding the index from the segment files (Q6).
//!
//! Per segment: the header, then the slot chain read in large chunks. The last batch of the
//! segment of each kind that was active last (highest generation) has its records checked,
//! since only it can hold a torn batch. Status bytes are read only for records that are not
//! done and whose status hint says a status byte may be non-zero; everything else about a
//! record comes from its slot. Content is never read, except inside that last batch.
//!
//! Recovery writes only one thing itself: in the segments that were active last it zeroes
//! the slots of the current generation past the end of the chain (a dropped batch, a cut
//! tail), so they can never come back. What else it decides must be written (done flags for
//! the losing copy of a message found twice, or for a record whose recipients are all
//! resolved) becomes the writer's first round of marks, and unreadable files are left alone
//! for `check`.
//!
//! [`recover`] runs in phases, each ending by asserting what it established (docs/storage.md,
//! "Phases of queue recovery"): `load`, `cut_torn_tails`, `collect_live`, `read_statuses`,
//! `classify`, `build_index`, `assign_roles`.

use std::collections::hash_map::Entry as MapEntry;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use disk::{Disk, File};

use crate::error::QueueError;
use crate::format::{self, Header, Kind, Slot};
use crate::index::{Class, Entry, Index};
use crate::queue::{Core, State};
use crate::segment::{self, Scan, SegState, SegmentInfo};
use crate::writer::{Cursor, Mark, Writer, unlink_extra_free};
use crate::{QueueConfig, RecoveryReport};

/// Status-byte reads closer than this are merged into one `pread`.
const MERGE_GAP: u64 = 4096;

/// A segment file whose header is good.
pub(crate) struct Loaded {
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    pub(crate) file: Arc<dyn File>,
    pub(crate) header: Header,
    pub(crate) scan: Scan,
    /// The file is shorter than its header says.
    pub(crate) short: bool,
}

/// Reads the headers and slot chains of every segment in `dir`. Returns the readable ones,
/// the `"name: reason"` of the unreadable ones, and the highest sequence number named; a
/// segment of a newer format fails the whole load (`QueueError::NewerFormat`) before
/// anything is written.
pub(crate) fn load_segments(
    disk: &dyn Disk,
    dir: &Path,
) -> Result<(Vec<Loaded>, Vec<String>, u64), QueueError> {
    let names = disk.list(dir).map_err(|e| QueueError::io("list", dir, e))?;
    let mut loaded = Vec::new();
    let mut unreadable = Vec::new();
    let mut max_seq = 0;
    for name in names {
        let Some((kind, seq)) = format::parse_segment_name(&name) else {
            continue;
        };
        max_seq = max_seq.max(seq);
        let path = dir.join(&name);
        let file = disk
            .open(&path, false)
            .map_err(|e| QueueError::io("open segment", &path, e))?;
        let len = file
            .len()
            .map_err(|e| QueueError::io("stat segment", &path, e))?;
        let header = match segment::load_header(&*file, kind, seq) {
            Ok(Ok(h)) => h,
            Ok(Err(why)) => {
                let newer = segment::newer_format(&*file)
                    .map_err(|e| QueueError::io("read header of", &path, e))?;
                if let Some(found) = newer {
                    return Err(QueueError::NewerFormat {
                        path,
                        found,
                        supported: format::VERSION,
                    });
                }
                unreadable.push(format!("{name}: {why}"));
                continue;
            }
            Err(e) => return Err(QueueError::io("read header of", &path, e)),
        };
        let scan = segment::scan_slots(&*file, &header)
            .map_err(|e| QueueError::io("read slots of", &path, e))?;
        loaded.push(Loaded {
            name,
            path,
            file,
            header,
            scan,
            short: len < header.segment_bytes,
        });
    }
    Ok((loaded, unreadable, max_seq))
}

/// Per kind, the position in `loaded` of the segment that was active last.
pub(crate) fn last_active(loaded: &[Loaded]) -> [Option<usize>; 2] {
    let mut active: [Option<usize>; 2] = [None, None];
    for (p, l) in loaded.iter().enumerate() {
        let k = l.header.kind.index();
        if active[k].is_none_or(|q| loaded[q].header.generation < l.header.generation) {
            active[k] = Some(p);
        }
    }
    active
}

/// A record that is not done, found in a chain.
struct Candidate {
    pos: usize,
    index: u32,
    slot: Slot,
    statuses: Option<Vec<u8>>,
}

/// Records that are not done, and what they say about the queue as a whole.
struct Live {
    candidates: Vec<Candidate>,
    /// Per position in `loaded`: valid slots that are not done, plus damaged slots that are
    /// not done (they may hide a live message, so their segment is kept).
    live: Vec<usize>,
    /// The highest message id any slot or id floor names: the next id is above it.
    max_id: u64,
    max_generation: u64,
}

/// What each candidate turned out to be.
#[derive(Default)]
struct Classified {
    /// Per message id, the candidate that stays live and its class.
    winners: HashMap<u64, (usize, Class)>,
    /// Done flags for the writer's first round: settled records and losing duplicates.
    lazy: Vec<Mark>,
    /// The segment of each mark in `lazy`.
    lazy_done: Vec<u64>,
    quarantined: BTreeMap<u64, String>,
    /// Candidates set aside as unreadable (a message id may count twice).
    quarantine_events: usize,
}

/// What recovery decided about the segment files.
struct Roles {
    segments: BTreeMap<u64, SegmentInfo>,
    free: [VecDeque<u64>; 2],
    cursors: [Option<Cursor>; 2],
}

/// Opens the queue in `dir`: the phases of docs/storage.md, "Phases of queue recovery".
pub(crate) fn recover(
    disk: Arc<dyn Disk>,
    dir: &Path,
    config: QueueConfig,
) -> Result<(Arc<Core>, Writer, RecoveryReport), QueueError> {
    let started = Instant::now();
    let mut report = RecoveryReport::default();
    let (mut loaded, max_seq) = load(&*disk, dir, &mut report)?;
    let active = last_active(&loaded);
    cut_torn_tails(&mut loaded, active, &mut report)?;
    let mut live = collect_live(&loaded);
    read_statuses(&loaded, &mut live.candidates)?;
    let classified = classify(&loaded, &live.candidates, &mut report);
    let Classified {
        winners,
        lazy,
        lazy_done,
        quarantined,
        ..
    } = classified;
    let index = build_index(&loaded, &live.candidates, winners, quarantined, &mut report);
    let roles = assign_roles(&*disk, &config, loaded, active, &live.live);

    let core = Arc::new(Core {
        disk,
        dir: dir.to_path_buf(),
        config,
        state: Mutex::new(State {
            requests: VecDeque::new(),
            shutdown: false,
            poisoned: None,
            index,
            segments: roles.segments,
            token: 0,
        }),
        wake: Condvar::new(),
        fdatasyncs: AtomicU64::new(0),
        records_committed: AtomicU64::new(0),
        batches_committed: AtomicU64::new(0),
        incoming: std::sync::atomic::AtomicUsize::new(0),
    });
    let writer = Writer {
        core: core.clone(),
        active: roles.cursors,
        free: roles.free,
        next_id: live.max_id + 1,
        max_generation: live.max_generation,
        next_seq: max_seq + 1,
        lazy,
        lazy_done,
        spare: None,
        ready: [VecDeque::new(), VecDeque::new()],
    };
    // Ids, generations and sequence numbers only grow from here.
    assert!(writer.active.iter().flatten().all(|c| {
        c.header.generation <= writer.max_generation
            && c.seq < writer.next_seq
            && c.header.id_floor <= writer.next_id
    }));
    assert_eq!(writer.lazy.len(), writer.lazy_done.len());
    report.elapsed = started.elapsed();
    Ok((core, writer, report))
}

/// Phase 1: reads every header and slot chain (refusing a newer build's segment), removes
/// segments whose creation a crash interrupted (`*.seg.tmp`: they never held a record), and
/// reports what the scans found.
/// Returns the readable segments and the highest sequence number named.
fn load(
    disk: &dyn Disk,
    dir: &Path,
    report: &mut RecoveryReport,
) -> Result<(Vec<Loaded>, u64), QueueError> {
    disk.create_dir_all(dir)
        .map_err(|e| QueueError::io("create queue directory", dir, e))?;
    // Headers first: a directory with a newer build's segment is refused before anything in
    // it is removed.
    let (loaded, unreadable, max_seq) = load_segments(disk, dir)?;
    for name in disk.list(dir).map_err(|e| QueueError::io("list", dir, e))? {
        if format::is_temp_segment_name(&name) {
            let path = dir.join(&name);
            disk.remove(&path)
                .map_err(|e| QueueError::io("remove", &path, e))?;
        }
    }
    report.unreadable_segments = unreadable;
    report.segments = loaded.len();
    for l in &loaded {
        report.torn_tail_cut += l.scan.incomplete_dropped as u64;
        if let Some((i, why)) = &l.scan.bad_fields {
            report.problems.push(format!(
                "{}: slot {i}: {why}; the segment ends there",
                l.name
            ));
        }
        for &(index, done) in &l.scan.damaged {
            if done == 0 {
                report.problems.push(format!(
                    "{}: slot {index} is damaged (checksum mismatch); its message is skipped",
                    l.name
                ));
            }
        }
        if l.short {
            report.problems.push(format!(
                "{}: file is shorter than its segment size {}; it is never written again",
                l.name, l.header.segment_bytes
            ));
        }
    }
    // Q2: every chain ends with a batch-end flag (or is empty); names are unique.
    assert!(loaded.iter().all(|l| ends_with_batch(&l.scan)));
    assert!(loaded.iter().all(|l| l.header.seq <= max_seq));
    Ok((loaded, max_seq))
}

/// Whether a chain ends with a batch-end flag, or is empty (Q2).
fn ends_with_batch(scan: &Scan) -> bool {
    scan.chain
        .last()
        .is_none_or(|e| e.slot.flags & format::FLAG_BATCH_END != 0)
}

/// Phase 2: only the last active segment of each kind can end in a torn batch: its last
/// batch is checked and dropped whole if a record is torn. Then every slot of the current
/// generation past the end of its chain (a dropped batch, a cut tail) is zeroed and synced
/// before the queue writes anything: a cut must stay cut once another segment is active and
/// this one is no longer checked, and the chain must never be able to continue over a
/// damaged slot into stale slots (see `segment::scan_slots`).
fn cut_torn_tails(
    loaded: &mut [Loaded],
    active: [Option<usize>; 2],
    report: &mut RecoveryReport,
) -> Result<(), QueueError> {
    for pos in active.into_iter().flatten() {
        let l = &mut loaded[pos];
        let torn = segment::tail_check(&*l.file, &l.scan)
            .map_err(|e| QueueError::io("read records of", &l.path, e))?;
        if torn.is_some() {
            let range = l.scan.last_batch();
            report.torn_tail_cut += range.len() as u64;
            l.scan.chain.truncate(range.start);
            let end = l.scan.chain.last().map_or(0, |e| e.index);
            l.scan.damaged.retain(|&(i, _)| i < end);
        }
        let (next_slot, _, _) = l.scan.cursor(&l.header);
        clear_past_end(&*l.file, &l.header, next_slot)
            .map_err(|e| QueueError::io("clear stale slots of", &l.path, e))?;
        // Cut at a batch boundary, the chain still ends with a batch end (Q2), and no damaged
        // slot is left past it.
        let l = &loaded[pos];
        assert!(ends_with_batch(&l.scan));
        let end = l.scan.chain.last().map_or(0, |e| e.index);
        assert!(l.scan.damaged.iter().all(|&(i, _)| i < end));
    }
    Ok(())
}

/// Phase 3: the records that are not done, the live count of every segment, and the highest
/// id and generation ever seen (dropped slots and id floors included).
fn collect_live(loaded: &[Loaded]) -> Live {
    let mut out = Live {
        candidates: Vec::new(),
        live: vec![0usize; loaded.len()],
        max_id: 0,
        max_generation: 0,
    };
    let mut damaged_live = 0;
    for (pos, l) in loaded.iter().enumerate() {
        out.max_id = out
            .max_id
            .max(l.header.id_floor.saturating_sub(1))
            .max(l.scan.max_id);
        out.max_generation = out.max_generation.max(l.header.generation);
        // A damaged slot that is not done may hide a live message: keep the segment.
        let damaged = l.scan.damaged.iter().filter(|d| d.1 == 0).count();
        out.live[pos] += damaged;
        damaged_live += damaged;
        for e in &l.scan.chain {
            if e.done == 0 {
                out.live[pos] += 1;
            }
            let slot = e.slot;
            out.max_id = out.max_id.max(slot.id);
            if slot.done == 0 {
                out.candidates.push(Candidate {
                    pos,
                    index: e.index,
                    slot,
                    statuses: None,
                });
            }
        }
    }
    // Every live slot is a candidate, or a damaged slot that keeps its segment.
    assert_eq!(
        out.live.iter().sum::<usize>(),
        out.candidates.len() + damaged_live
    );
    debug_assert!(out.candidates.iter().all(|c| c.slot.id <= out.max_id));
    out
}

/// Phase 4: classifies every candidate by its status bytes (ready, bounce, settled, or
/// unreadable) and resolves message ids found live twice.
fn classify(
    loaded: &[Loaded],
    candidates: &[Candidate],
    report: &mut RecoveryReport,
) -> Classified {
    let mut out = Classified {
        winners: HashMap::with_capacity(candidates.len()),
        ..Classified::default()
    };
    for (ci, c) in candidates.iter().enumerate() {
        let l = &loaded[c.pos];
        let Some(class) = class_of(c, l, report, &mut out) else {
            continue;
        };
        match out.winners.entry(c.slot.id) {
            MapEntry::Vacant(v) => {
                v.insert((ci, class));
            }
            MapEntry::Occupied(mut o) => {
                let other = &candidates[o.get().0];
                let ol = &loaded[other.pos];
                if ol.header.kind == Kind::Main && l.header.kind == Kind::Main {
                    report.problems.push(format!(
                        "message id {} appears in two main segments",
                        c.slot.id
                    ));
                }
                // The copy made last has the most attempts (every copy adds one).
                let rank = |c: &Candidate, l: &Loaded| {
                    (c.slot.attempts, l.header.kind, l.header.generation, c.index)
                };
                let loser = if rank(c, l) > rank(other, ol) {
                    o.insert((ci, class)).0
                } else {
                    ci
                };
                let lc = &candidates[loser];
                let lseq = loaded[lc.pos].header.seq;
                out.lazy.push(Mark::done(lseq, lc.index));
                out.lazy_done.push(lseq);
                report.duplicates_resolved += 1;
            }
        }
    }
    // Each candidate is exactly one of: the winner of its id, marked done (settled, or the
    // loser of a duplicate), or quarantined.
    assert_eq!(
        out.winners.len() + out.lazy.len() + out.quarantine_events,
        candidates.len()
    );
    assert_eq!(out.lazy.len(), out.lazy_done.len());
    out
}

/// A candidate's class from its status bytes (read only if its hint was set): `None` if it
/// is quarantined (status bytes unreadable or impossible) or settled (its done flag is set
/// in the writer's first round).
fn class_of(
    c: &Candidate,
    l: &Loaded,
    report: &mut RecoveryReport,
    out: &mut Classified,
) -> Option<Class> {
    let n = usize::from(c.slot.recipients);
    let quarantine = |out: &mut Classified, why: String| {
        out.quarantined.insert(c.slot.id, why);
        out.quarantine_events += 1;
        None
    };
    match &c.statuses {
        None => Some(Class::Ready),
        Some(s) if s.len() < n => quarantine(
            out,
            format!("{}: status bytes lie past the end of the file", l.name),
        ),
        Some(s) if s.iter().any(|&b| b > format::STATUS_MOVED) => {
            report.problems.push(format!(
                "{}: message {}: impossible status byte",
                l.name, c.slot.id
            ));
            quarantine(out, format!("{}: impossible status byte", l.name))
        }
        Some(s) if s.contains(&format::STATUS_PENDING) => Some(Class::Ready),
        Some(s) if s.contains(&format::STATUS_FAILED) => Some(Class::Bounce),
        Some(_) => {
            // Every recipient resolved but the done flag was lost: set it now.
            out.lazy.push(Mark::done(l.header.seq, c.index));
            out.lazy_done.push(l.header.seq);
            None
        }
    }
}

/// Phase 5: the index, one entry per winning record (the MIN table).
fn build_index(
    loaded: &[Loaded],
    candidates: &[Candidate],
    winners: HashMap<u64, (usize, Class)>,
    quarantined: BTreeMap<u64, String>,
    report: &mut RecoveryReport,
) -> Index {
    let mut index = Index::default();
    let winners_count = winners.len();
    for (_, (ci, class)) in winners {
        let c = &candidates[ci];
        let l = &loaded[c.pos];
        index.insert(
            c.slot.id,
            Entry {
                seg: l.header.seq,
                slot_index: c.index,
                slot: c.slot,
                kind: l.header.kind,
                class,
                lease: None,
            },
        );
    }
    index.quarantined = quarantined;
    report.pending = index.pending_main;
    report.deferred = index.pending_deferred;
    report.bounces = index.bounce_count;
    // One live record per message id, counted in exactly one class; nothing leased yet.
    assert_eq!(index.len(), winners_count, "one live record per message id");
    assert_eq!(
        index.pending_main + index.pending_deferred + index.bounce_count,
        index.len()
    );
    assert_eq!(index.leased, 0);
    index
}

/// Phase 6: each segment's role: the last active of each kind continues where its chain
/// ends (unless the file is short), one without live slots is free, any other is sealed.
/// Free segments beyond `free_segments_max` per kind are unlinked (`unlink_extra_free`).
fn assign_roles(
    disk: &dyn Disk,
    config: &QueueConfig,
    loaded: Vec<Loaded>,
    active: [Option<usize>; 2],
    live: &[usize],
) -> Roles {
    let mut segments = BTreeMap::new();
    let mut free: [VecDeque<u64>; 2] = [VecDeque::new(), VecDeque::new()];
    let mut cursors: [Option<Cursor>; 2] = [None, None];
    let files = loaded.len();
    for (pos, l) in loaded.into_iter().enumerate() {
        let seq = l.header.seq;
        let k = l.header.kind.index();
        let state = if active[k] == Some(pos) && !l.short {
            let (next_slot, next_data, chain) = l.scan.cursor(&l.header);
            cursors[k] = Some(Cursor {
                seq,
                file: l.file.clone(),
                path: l.path.clone(),
                header: l.header,
                next_slot,
                next_data,
                chain,
            });
            SegState::Active
        } else if live[pos] == 0 {
            free[k].push_back(seq);
            SegState::Free
        } else {
            SegState::Sealed
        };
        let info = SegmentInfo {
            path: l.path,
            file: l.file,
            header: l.header,
            live: live[pos],
            state,
        };
        segments.insert(seq, info);
    }
    // Sequence numbers are queue-wide, so each file has its own entry; two files sharing one
    // (a main and a deferred segment copied in from elsewhere: damage the queue never makes)
    // would make one entry hide the other, and the checks on the table below would not hold.
    let one_entry_per_file = segments.len() == files;
    unlink_extra_free(disk, config, &mut free, &mut segments);
    // At most one active segment per kind, the one its cursor names, the cursor inside its
    // slot area; the free lists hold only free segments with no live slot (Q5).
    assert!(
        cursors
            .iter()
            .flatten()
            .all(|c| c.next_slot <= c.header.slot_count)
    );
    if one_entry_per_file {
        let actives = segments.values().filter(|s| s.state == SegState::Active);
        assert_eq!(actives.count(), cursors.iter().flatten().count());
        assert!(cursors.iter().flatten().all(|c| {
            segments
                .get(&c.seq)
                .is_some_and(|s| s.state == SegState::Active)
        }));
        assert!(free.iter().flatten().all(|seq| {
            segments
                .get(seq)
                .is_some_and(|s| s.state == SegState::Free && s.live == 0)
        }));
    }
    Roles {
        segments,
        free,
        cursors,
    }
}

/// Zeroes (and syncs) every slot of the segment's current generation from `next_slot` on.
fn clear_past_end(file: &dyn File, header: &Header, next_slot: u32) -> std::io::Result<()> {
    let start = format::slot_offset(next_slot);
    let end = format::slot_offset(header.slot_count);
    if start >= end {
        return Ok(());
    }
    let mut area = vec![0u8; (end - start) as usize];
    let n = segment::read_upto(file, &mut area, start)?;
    let generation = header.generation & format::SLOT_GENERATION_MASK;
    let last = area[..n - n % format::SLOT_BYTES as usize]
        .chunks_exact(format::SLOT_BYTES as usize)
        .rposition(|b| Slot::decode(b).generation == generation);
    if let Some(last) = last {
        let len = (last + 1) * format::SLOT_BYTES as usize;
        file.write_all_at(&vec![0u8; len], start)?;
        file.sync_data()?;
    }
    Ok(())
}

/// Reads the status bytes of every candidate whose hint says they may be non-zero, merging
/// reads of records that lie close together. A candidate without a hint has all status bytes
/// at their initial value 0 (a hint is written with, or before the sync of, any non-zero
/// status byte; a lost hint only makes a lost status write look lost, which is allowed).
fn read_statuses(loaded: &[Loaded], candidates: &mut [Candidate]) -> Result<(), QueueError> {
    let hinted: Vec<usize> = (0..candidates.len())
        .filter(|&i| candidates[i].slot.hint != 0)
        .collect();
    let mut i = 0;
    while i < hinted.len() {
        let first = &candidates[hinted[i]];
        let pos = first.pos;
        let start = u64::from(first.slot.offset) + format::RECORD_HEADER_BYTES as u64;
        let mut end = start + u64::from(first.slot.recipients);
        let mut j = i + 1;
        while j < hinted.len() {
            let c = &candidates[hinted[j]];
            let s = u64::from(c.slot.offset) + format::RECORD_HEADER_BYTES as u64;
            if c.pos != pos
                || s < end
                || s - end > MERGE_GAP
                || s + u64::from(c.slot.recipients) - start > 1 << 20
            {
                break;
            }
            end = s + u64::from(c.slot.recipients);
            j += 1;
        }
        let l = &loaded[pos];
        let mut buf = vec![0u8; (end - start) as usize];
        let n = segment::read_upto(&*l.file, &mut buf, start)
            .map_err(|e| QueueError::io("read status bytes of", &l.path, e))?;
        for &ci in &hinted[i..j] {
            let c = &mut candidates[ci];
            let a =
                (u64::from(c.slot.offset) + format::RECORD_HEADER_BYTES as u64 - start) as usize;
            let b = (a + usize::from(c.slot.recipients)).min(n.max(a));
            c.statuses = Some(buf[a..b].to_vec());
        }
        i = j;
    }
    // Exactly the hinted candidates have their status bytes (fewer only at the file's end).
    debug_assert!(candidates.iter().all(|c| {
        (c.slot.hint != 0) == c.statuses.is_some()
            && c.statuses
                .as_ref()
                .is_none_or(|s| s.len() <= usize::from(c.slot.recipients))
    }));
    Ok(())
}
