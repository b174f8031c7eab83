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
use crate::writer::{Cursor, Mark, Writer};
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
/// the `"name: reason"` of the unreadable ones, and the highest sequence number named.
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

pub(crate) fn recover(
    disk: Arc<dyn Disk>,
    dir: &Path,
    config: QueueConfig,
) -> Result<(Arc<Core>, Writer, RecoveryReport), QueueError> {
    let started = Instant::now();
    disk.create_dir_all(dir)
        .map_err(|e| QueueError::io("create queue directory", dir, e))?;
    let mut report = RecoveryReport::default();
    // Segments whose creation a crash interrupted: they never held a record.
    for name in disk.list(dir).map_err(|e| QueueError::io("list", dir, e))? {
        if format::is_temp_segment_name(&name) {
            let path = dir.join(&name);
            disk.remove(&path)
                .map_err(|e| QueueError::io("remove", &path, e))?;
        }
    }
    let (mut loaded, unreadable, max_seq) = load_segments(&*disk, dir)?;
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

    // Only the last active segment of each kind can end in a torn batch. Then every slot of
    // the current generation past the end of its chain (a dropped batch, a cut tail) is
    // zeroed and synced before the queue writes anything: a cut must stay cut once another
    // segment is active and this one is no longer checked, and the chain must never be able
    // to continue over a damaged slot into stale slots (see `segment::scan_slots`).
    let active = last_active(&loaded);
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
    }

    // Live records and the highest id ever seen.
    let mut max_id = 0u64;
    let mut max_generation = 0u64;
    let mut candidates = Vec::new();
    let mut live = vec![0usize; loaded.len()];
    for (pos, l) in loaded.iter().enumerate() {
        max_id = max_id
            .max(l.header.id_floor.saturating_sub(1))
            .max(l.scan.max_id);
        max_generation = max_generation.max(l.header.generation);
        // A damaged slot that is not done may hide a live message: keep the segment.
        live[pos] += l.scan.damaged.iter().filter(|d| d.1 == 0).count();
        for e in &l.scan.chain {
            if e.done == 0 {
                live[pos] += 1;
            }
            let slot = e.slot;
            max_id = max_id.max(slot.id);
            if slot.done == 0 {
                candidates.push(Candidate {
                    pos,
                    index: e.index,
                    slot,
                    statuses: None,
                });
            }
        }
    }

    read_statuses(&loaded, &mut candidates)?;

    // Classify and resolve duplicates.
    let mut lazy = Vec::new();
    let mut lazy_done = Vec::new();
    let mut quarantined = BTreeMap::new();
    // Per message id, the candidate that stays live and its class.
    let mut winners: HashMap<u64, (usize, Class)> = HashMap::with_capacity(candidates.len());
    for (ci, c) in candidates.iter().enumerate() {
        let l = &loaded[c.pos];
        let n = usize::from(c.slot.recipients);
        let class = match &c.statuses {
            None => Some(Class::Ready),
            Some(s) if s.len() < n => {
                quarantined.insert(
                    c.slot.id,
                    format!("{}: status bytes lie past the end of the file", l.name),
                );
                None
            }
            Some(s) if s.iter().any(|&b| b > format::STATUS_MOVED) => {
                report.problems.push(format!(
                    "{}: message {}: impossible status byte",
                    l.name, c.slot.id
                ));
                quarantined.insert(c.slot.id, format!("{}: impossible status byte", l.name));
                None
            }
            Some(s) if s.contains(&format::STATUS_PENDING) => Some(Class::Ready),
            Some(s) if s.contains(&format::STATUS_FAILED) => Some(Class::Bounce),
            Some(_) => {
                // Every recipient resolved but the done flag was lost: set it now.
                lazy.push(Mark::done(l.header.seq, c.index));
                lazy_done.push(l.header.seq);
                None
            }
        };
        let Some(class) = class else {
            continue;
        };
        match winners.entry(c.slot.id) {
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
                lazy.push(Mark::done(lseq, lc.index));
                lazy_done.push(lseq);
                report.duplicates_resolved += 1;
            }
        }
    }

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
    debug_assert_eq!(index.len(), winners_count, "one live record per message id");
    index.quarantined = quarantined;
    report.pending = index.pending_main;
    report.deferred = index.pending_deferred;
    report.bounces = index.bounce_count;

    // Segment roles.
    let mut segments = BTreeMap::new();
    let mut free: [VecDeque<u64>; 2] = [VecDeque::new(), VecDeque::new()];
    let mut cursors: [Option<Cursor>; 2] = [None, None];
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
        segments.insert(
            seq,
            SegmentInfo {
                path: l.path,
                file: l.file,
                header: l.header,
                live: live[pos],
                state,
            },
        );
    }
    // Unlink free segments beyond the limit (they hold nothing).
    for list in &mut free {
        while list.len() > config.free_segments_max {
            let Some(seq) = list.pop_front() else { break };
            if let Some(info) = segments.get(&seq)
                && disk.remove(&info.path).is_ok()
            {
                segments.remove(&seq);
            }
        }
    }

    let core = Arc::new(Core {
        disk,
        dir: dir.to_path_buf(),
        config,
        state: Mutex::new(State {
            requests: VecDeque::new(),
            shutdown: false,
            poisoned: None,
            index,
            segments,
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
        active: cursors,
        free,
        next_id: max_id + 1,
        max_generation,
        next_seq: max_seq + 1,
        lazy,
        lazy_done,
        spare: None,
    };
    report.elapsed = started.elapsed();
    Ok((core, writer, report))
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
    Ok(())
}
