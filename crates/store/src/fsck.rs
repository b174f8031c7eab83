//! fsck: checks the store against itself and, with repair, fixes what can be fixed.
//!
//! Checks, in phases (docs/storage.md, "Phases of store fsck"):
//! 1. `check_message_data`: every message: header (folder id, UID, lengths, CRC field) and
//!    data CRC vs the index, read in runs of adjacent extents (progress by bytes);
//! 2. `check_folders`: each folder: UIDs below UIDNEXT (S3), MODSEQs at most HIGHESTMODSEQ
//!    (S4), keywords defined, unseen and byte totals;
//! 3. `check_extents`: every extent lies inside the volume and no two overlap (S2);
//!    free-space accounting (S5): the allocator's free extents are exactly the volume minus
//!    indexed extents minus reservations, and the counters add up;
//! 4. `check_journal`: the current journal: its header and its records' checksum chain up to
//!    the tail;
//! 5. `check_snapshot`: `index.snap`, if present, parses cleanly.
//!
//! What fsck finds is never asserted: it reads what may be damaged, and reports it.
//!
//! Repair (6. `expunge_damaged`) expunges messages whose data is damaged (one journal record per
//! folder) and, if the journal or the snapshot is damaged, writes a fresh checkpoint from the
//! in-memory index.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use disk::Findings;
use mail_model::Mailstore;

use crate::StoreError;
use crate::alloc::Allocator;
use crate::commit::{Store, lock};
use crate::format::{MSG_HEADER_BYTES, UNIT};
use crate::index::{Entry, FolderCell};
use crate::journal::Op;
use crate::journal::{self, Journal, ScanEnd, decode_header, decode_ops};
use crate::read::verify;
use crate::snapshot::{self, SNAP_NAME};

/// What fsck found and did: counters, and the findings every engine's check reports alike
/// ([`disk::Findings`]; the store has no notes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsckReport {
    pub messages_checked: u64,
    pub bytes_checked: u64,
    /// One line per problem and per repair made.
    pub findings: Findings,
}

impl FsckReport {
    pub fn is_clean(&self) -> bool {
        self.findings.is_clean()
    }
}

impl fmt::Display for FsckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}fsck: {} messages ({} bytes) checked, {} problems, {} repaired{}",
            self.findings,
            self.messages_checked,
            self.bytes_checked,
            self.findings.problems.len(),
            self.findings.repaired.len(),
            if self.is_clean() { ": clean" } else { "" }
        )
    }
}

/// A message fsck found damaged: (position in the folder list, UID).
type Damaged = (usize, u32);

/// A message to check: (start unit, position of its folder in the folder list, UID, entry).
type Indexed = (u64, usize, u32, Entry);

impl Store {
    /// Checks every message against the index (header and CRC), extent overlaps and bounds,
    /// free-space accounting (S5) and the journal chain. With `repair`, expunges messages
    /// whose data is damaged. `progress(bytes_done, bytes_total)`.
    ///
    /// fsck in phases (docs/storage.md, "Phases of store fsck"): message data without any
    /// lock held across I/O; then the structure under the writer lock, so index and allocator
    /// hold still; then the snapshot on disk; then, with `repair`, the repairs.
    pub fn fsck(
        &self,
        repair: bool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<FsckReport, StoreError> {
        let mut report = FsckReport::default();
        let cells: Vec<Arc<FolderCell>> = self.catalog().folders.values().cloned().collect();
        let damaged = self.check_message_data(&cells, &mut report, progress);
        let journal_damaged = {
            let w = lock(&self.writer);
            let extents = check_folders(&cells, &mut report);
            check_extents(&extents, &w.alloc, &mut report);
            self.check_journal(&w.journal, &mut report)
        };
        let snap_damaged = self.check_snapshot(&mut report);
        if repair {
            self.expunge_damaged(&cells, &damaged, &mut report)?;
            if journal_damaged || snap_damaged {
                self.checkpoint()?;
                report
                    .findings
                    .repaired
                    .push("wrote a fresh checkpoint (new snapshot and journal)".into());
            }
        }
        Ok(report)
    }

    /// Phase 1: every message's header and data CRC against the index, in volume order,
    /// reading runs of adjacent extents of at most `read_chunk_bytes_max` with one read each.
    /// Returns the damaged messages, each also a problem of the report.
    fn check_message_data(
        &self,
        cells: &[Arc<FolderCell>],
        report: &mut FsckReport,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Vec<Damaged> {
        let mut all: Vec<Indexed> = Vec::new();
        for (ci, cell) in cells.iter().enumerate() {
            for (&uid, e) in cell.read().messages.iter() {
                all.push((e.start, ci, uid, *e));
            }
        }
        all.sort_unstable_by_key(|x| x.0);
        let total: u64 = all.iter().map(|x| x.3.units() * UNIT).sum();
        let chunk = self.config.read_chunk_bytes_max as u64;
        let mut damaged: Vec<Damaged> = Vec::new();
        let mut k = 0;
        let mut done = 0u64;
        while k < all.len() {
            let start = all[k].3.start;
            let mut end = all[k].3.end();
            let mut j = k + 1;
            while j < all.len() && all[j].3.start == end && (all[j].3.end() - start) * UNIT <= chunk
            {
                end = all[j].3.end();
                j += 1;
            }
            self.verify_run(cells, &all[k..j], report, &mut damaged);
            done += (end - start) * UNIT;
            progress(done.min(total), total);
            k = j;
        }
        // Every message checked once; each damaged one reported once.
        assert_eq!(report.messages_checked, all.len() as u64);
        assert_eq!(report.findings.problems.len(), damaged.len());
        damaged
    }

    /// Reads one run of adjacent messages and checks each; a message that fails is read again
    /// the reader's way, which tells expunged or moved since (not damage) from damaged.
    fn verify_run(
        &self,
        cells: &[Arc<FolderCell>],
        run: &[Indexed],
        report: &mut FsckReport,
        damaged: &mut Vec<Damaged>,
    ) {
        let (Some(first), Some(last)) = (run.first(), run.last()) else {
            return;
        };
        let start = first.3.start;
        let mut buf = vec![0u8; ((last.3.end() - start) * UNIT) as usize];
        let read_ok = self.volume.read_exact_at(&mut buf, start * UNIT).is_ok();
        for &(_, ci, uid, e) in run {
            let off = ((e.start - start) * UNIT) as usize;
            let rec = MSG_HEADER_BYTES + e.summary_len as usize + e.content_len as usize;
            report.messages_checked += 1;
            report.bytes_checked += rec as u64;
            let cell = &cells[ci];
            if read_ok && verify(&buf[off..off + rec], cell.id, uid, &e, true).is_ok() {
                continue;
            }
            let reason = match self.verify_one(cell, uid) {
                Ok(()) => continue,
                Err(e) if e.is_not_found() => continue,
                Err(e) => e.to_string(),
            };
            let f = cell.read();
            report
                .findings
                .problems
                .push(format!("{}/{} UID {uid}: {reason}", f.user, f.name));
            damaged.push((ci, uid));
        }
    }

    /// Phase 4: the current journal's header and its records' checksum chain, up to the
    /// writer's tail, every record decodable. Returns whether it is damaged.
    fn check_journal(&self, j: &Journal, report: &mut FsckReport) -> bool {
        let chain = journal_chain(j, self.store_id);
        if let Err(e) = &chain {
            report
                .findings
                .problems
                .push(format!("journal {}: {e}", j.path.display()));
        }
        chain.is_err()
    }

    /// Phase 5: `index.snap`, if present, parses cleanly. Returns whether it is damaged.
    fn check_snapshot(&self, report: &mut FsckReport) -> bool {
        let snap_path = self.dir.join(SNAP_NAME);
        if !self.disk.exists(&snap_path) {
            return false;
        }
        let checked = self
            .disk
            .open(&snap_path, false)
            .map_err(|e| StoreError::io(SNAP_NAME, e))
            .and_then(|f| {
                let len = f.len().map_err(|e| StoreError::io(SNAP_NAME, e))?;
                let mut image = vec![0u8; len as usize];
                f.read_exact_at(&mut image, 0)
                    .map_err(|e| StoreError::io(SNAP_NAME, e))?;
                snapshot::read(&image, self.store_id, false).map(|_| ())
            });
        if let Err(e) = &checked {
            report.findings.problems.push(e.to_string());
        }
        checked.is_err()
    }

    /// Phase 6 (repair): expunges the damaged messages still there, one journal record per
    /// folder.
    fn expunge_damaged(
        &self,
        cells: &[Arc<FolderCell>],
        damaged: &[Damaged],
        report: &mut FsckReport,
    ) -> Result<(), StoreError> {
        let mut by_folder: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
        for &(ci, uid) in damaged {
            by_folder.entry(ci).or_default().push(uid);
        }
        let repaired_before = report.findings.repaired.len();
        for (ci, uids) in &by_folder {
            let cell = &cells[*ci];
            let mut w = self.writer()?;
            let (op, line) = {
                let f = cell.read();
                let present: Vec<u32> = uids
                    .iter()
                    .copied()
                    .filter(|u| f.messages.contains_key(u))
                    .collect();
                if present.is_empty() || f.deleted {
                    continue;
                }
                let line = format!("{}/{}: expunged damaged UIDs {present:?}", f.user, f.name);
                let op = Op::Expunge {
                    folder: f.id,
                    modseq: f.highest_modseq + 1,
                    uids: present,
                };
                (op, line)
            };
            self.commit(&mut w, std::slice::from_ref(&op))?;
            report.findings.repaired.push(line);
        }
        // At most one expunge per folder with damage.
        assert!(report.findings.repaired.len() - repaired_before <= by_folder.len());
        Ok(())
    }

    fn verify_one(&self, cell: &FolderCell, uid: u32) -> Result<(), StoreError> {
        let f = cell.read();
        let (user, name) = (f.user.clone(), f.name.clone());
        drop(f);
        self.read(&user, &name, uid).map(|_| ())
    }
}

/// Phase 2: each folder against itself: UIDs below UIDNEXT (S3), MODSEQs at most
/// HIGHESTMODSEQ (S4), keywords defined, unseen and byte totals. Returns every message's
/// extent `(start, units, name)`, sorted by start, for phase 3.
fn check_folders(cells: &[Arc<FolderCell>], report: &mut FsckReport) -> Vec<(u64, u64, String)> {
    let mut extents: Vec<(u64, u64, String)> = Vec::new();
    let mut indexed = 0usize;
    for cell in cells {
        let f = cell.read();
        if f.deleted {
            continue;
        }
        indexed += f.messages.len();
        let problems = &mut report.findings.problems;
        let mut bytes = 0u64;
        for (&uid, e) in &f.messages {
            extents.push((
                e.start,
                e.units(),
                format!("{}/{} UID {uid}", f.user, f.name),
            ));
            bytes += e.content_len as u64;
            if uid >= f.uidnext {
                problems.push(format!(
                    "{}/{} UID {uid} is not below UIDNEXT {}",
                    f.user, f.name, f.uidnext
                ));
            }
            if e.modseq > f.highest_modseq {
                problems.push(format!(
                    "{}/{} UID {uid} MODSEQ {} above HIGHESTMODSEQ",
                    f.user, f.name, e.modseq
                ));
            }
            if !e.keywords.fits(f.keywords.len()) {
                problems.push(format!(
                    "{}/{} UID {uid} names an undefined keyword",
                    f.user, f.name
                ));
            }
        }
        let unseen = f.messages.values().filter(|e| !e.seen()).count() as u64;
        if unseen != f.unseen {
            problems.push(format!(
                "{}/{}: unseen count {} but {unseen} messages are unseen",
                f.user, f.name, f.unseen
            ));
        }
        if bytes != f.bytes {
            problems.push(format!(
                "{}/{}: byte total {} but messages sum to {bytes}",
                f.user, f.name, f.bytes
            ));
        }
    }
    extents.sort_unstable_by_key(|x| x.0);
    assert_eq!(
        extents.len(),
        indexed,
        "one extent per message of a live folder"
    );
    debug_assert!(extents.is_sorted_by_key(|x| x.0));
    extents
}

/// Phase 3: every extent inside the volume and no two overlapping (S2); the allocator's free
/// extents exactly the volume minus indexed extents minus reservations, and its counters
/// adding up (S5).
fn check_extents(extents: &[(u64, u64, String)], alloc: &Allocator, report: &mut FsckReport) {
    let problems = &mut report.findings.problems;
    let (base, end) = (alloc.base(), alloc.end());
    let mut occupied: Vec<(u64, u64)> = Vec::new();
    let mut used = 0u64;
    let mut prev: Option<(u64, &str)> = None;
    for (s, u, name) in extents {
        if *s < base || s + u > end {
            problems.push(format!(
                "{name}: extent [{s}, {}) lies outside the volume [{base}, {end})",
                s + u
            ));
        }
        if let Some((pend, pname)) = prev
            && *s < pend
        {
            problems.push(format!("{name} overlaps {pname}"));
        }
        if prev.is_none_or(|(pend, _)| s + u > pend) {
            prev = Some((s + u, name));
        }
        used += u;
        occupied.push((*s, *u));
    }
    for (_, s, l) in alloc.reservations() {
        occupied.push((s, l));
    }
    let expected = complement(base, end, occupied);
    let actual: Vec<(u64, u64)> = alloc.free_extents().collect();
    if actual != expected {
        problems.push(format!(
            "free space: allocator has {} extents ({} units), the index implies {} ({} units)",
            actual.len(),
            actual.iter().map(|x| x.1).sum::<u64>(),
            expected.len(),
            expected.iter().map(|x| x.1).sum::<u64>()
        ));
    }
    if used != alloc.used_units() {
        problems.push(format!(
            "free space: allocator counts {} used units, the index names {used}",
            alloc.used_units()
        ));
    }
    if let Err(e) = alloc.check_accounting() {
        problems.push(format!("free space (S5): {e}"));
    }
    // The expected free list is what an allocator holds: ascending, apart, inside the volume.
    debug_assert!(expected.windows(2).all(|p| p[0].0 + p[0].1 < p[1].0));
    debug_assert!(
        expected
            .iter()
            .all(|&(s, l)| s >= base && l > 0 && s + l <= end)
    );
}

/// The free extents `[base, end)` minus `occupied` implies: what the allocator must hold.
fn complement(base: u64, end: u64, mut occupied: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    occupied.sort_unstable();
    let mut expected = Vec::new();
    let mut cursor = base;
    for (s, l) in occupied {
        if s > cursor {
            expected.push((cursor, s - cursor));
        }
        cursor = cursor.max(s + l);
    }
    if cursor < end {
        expected.push((cursor, end - cursor));
    }
    expected
}

/// Reads the current journal up to the writer's tail and checks its header and chain.
fn journal_chain(j: &Journal, store_id: u64) -> Result<(), String> {
    let mut image = vec![0u8; (j.tail + 8).min(j.len) as usize];
    j.file
        .read_exact_at(&mut image, 0)
        .map_err(|e| format!("cannot read: {e}"))?;
    match decode_header(&image, store_id) {
        Err(e) => return Err(e.0),
        Ok(g) if g != j.generation => return Err(format!("header names generation {g}")),
        Ok(_) => {}
    }
    let image = &image[..j.tail as usize];
    let mut undecodable = None;
    let seed = journal::chain_seed(store_id, j.generation);
    let scan = journal::scan(image, seed, |off, p| {
        if undecodable.is_none() && decode_ops(p).is_err() {
            undecodable = Some(off);
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    if scan.stop != ScanEnd::Clean || scan.end != j.tail || scan.last_crc != j.last_crc {
        return Err(format!(
            "chain breaks at offset {} of {} ({:?})",
            scan.end, j.tail, scan.stop
        ));
    }
    match undecodable {
        Some(off) => Err(format!("record at {off} does not decode")),
        None => Ok(()),
    }
}
