//! fsck: checks the store against itself and, with repair, fixes what can be fixed.
//!
//! Checks:
//! - every message: header (folder id, UID, lengths, CRC field) and data CRC vs the index,
//!   read in runs of adjacent extents (progress by bytes);
//! - every extent lies inside the volume and no two overlap (S2);
//! - free-space accounting (S5): the allocator's free extents are exactly the volume minus
//!   indexed extents minus reservations, and the counters add up;
//! - each folder: UIDs below UIDNEXT (S3), MODSEQs at most HIGHESTMODSEQ (S4), byte totals;
//! - the current journal: its header and its records' checksum chain up to the tail;
//! - `index.snap`, if present, parses cleanly.
//!
//! Repair expunges messages whose data is damaged (one journal record per folder) and, if
//! the journal or the snapshot is damaged, writes a fresh checkpoint from the in-memory index.

use std::fmt;
use std::sync::Arc;

use disk::Findings;

use crate::StoreError;
use crate::commit::{Inner, lock};
use crate::format::{MSG_HEADER_BYTES, UNIT};
use crate::index::{Entry, FolderCell};
use crate::journal::Op;
use crate::journal::{self, JOURNAL_HEADER_BYTES, ScanEnd, decode_header, decode_ops};
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

impl Inner {
    pub(crate) fn fsck(
        &self,
        repair: bool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<FsckReport, StoreError> {
        let mut report = FsckReport::default();
        let cells: Vec<Arc<FolderCell>> = self.catalog().folders.values().cloned().collect();

        // 1. Message data, in volume order, without holding any lock across I/O.
        let mut all: Vec<(u64, usize, u32, Entry)> = Vec::new();
        for (ci, cell) in cells.iter().enumerate() {
            for (&uid, e) in cell.read().messages.iter() {
                all.push((e.start, ci, uid, *e));
            }
        }
        all.sort_unstable_by_key(|x| x.0);
        let total: u64 = all.iter().map(|x| x.3.units() * UNIT).sum();
        let chunk = self.config.read_chunk_bytes_max as u64;
        let mut damaged: Vec<(usize, u32, String)> = Vec::new();
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
            let mut buf = vec![0u8; ((end - start) * UNIT) as usize];
            let read_ok = self.volume.read_exact_at(&mut buf, start * UNIT).is_ok();
            for &(_, ci, uid, e) in &all[k..j] {
                let off = ((e.start - start) * UNIT) as usize;
                let rec = MSG_HEADER_BYTES + e.summary_len as usize + e.content_len as usize;
                report.messages_checked += 1;
                report.bytes_checked += rec as u64;
                let cell = &cells[ci];
                if read_ok && verify(&buf[off..off + rec], cell.id, uid, &e, true).is_ok() {
                    continue;
                }
                // Changed since we looked? Re-read it the reader's way, which tells apart
                // expunged, moved and damaged.
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
                damaged.push((ci, uid, reason));
            }
            done += (end - start) * UNIT;
            progress(done.min(total), total);
            k = j;
        }

        // 2. Structure, under the writer lock so index and allocator hold still.
        let journal_damaged;
        {
            let w = lock(&self.writer);
            let mut extents: Vec<(u64, u64, String)> = Vec::new();
            for cell in &cells {
                let f = cell.read();
                if f.deleted {
                    continue;
                }
                let mut bytes = 0u64;
                for (&uid, e) in &f.messages {
                    extents.push((
                        e.start,
                        e.units(),
                        format!("{}/{} UID {uid}", f.user, f.name),
                    ));
                    bytes += e.content_len as u64;
                    if uid >= f.uidnext {
                        report.findings.problems.push(format!(
                            "{}/{} UID {uid} is not below UIDNEXT {}",
                            f.user, f.name, f.uidnext
                        ));
                    }
                    if e.modseq > f.highest_modseq {
                        report.findings.problems.push(format!(
                            "{}/{} UID {uid} MODSEQ {} above HIGHESTMODSEQ",
                            f.user, f.name, e.modseq
                        ));
                    }
                    if !e.keywords.fits(f.keywords.len()) {
                        report.findings.problems.push(format!(
                            "{}/{} UID {uid} names an undefined keyword",
                            f.user, f.name
                        ));
                    }
                }
                let unseen = f.messages.values().filter(|e| !e.seen()).count() as u64;
                if unseen != f.unseen {
                    report.findings.problems.push(format!(
                        "{}/{}: unseen count {} but {unseen} messages are unseen",
                        f.user, f.name, f.unseen
                    ));
                }
                if bytes != f.bytes {
                    report.findings.problems.push(format!(
                        "{}/{}: byte total {} but messages sum to {bytes}",
                        f.user, f.name, f.bytes
                    ));
                }
            }
            extents.sort_unstable_by_key(|x| x.0);
            let (base, end) = (w.alloc.base(), w.alloc.end());
            let mut occupied: Vec<(u64, u64)> = Vec::new();
            let mut used = 0u64;
            let mut prev: Option<(u64, &str)> = None;
            for (s, u, name) in &extents {
                if *s < base || s + u > end {
                    report.findings.problems.push(format!(
                        "{name}: extent [{s}, {}) lies outside the volume [{base}, {end})",
                        s + u
                    ));
                }
                if let Some((pend, pname)) = prev
                    && *s < pend
                {
                    report
                        .findings
                        .problems
                        .push(format!("{name} overlaps {pname}"));
                }
                if prev.is_none_or(|(pend, _)| s + u > pend) {
                    prev = Some((s + u, name));
                }
                used += u;
                occupied.push((*s, *u));
            }
            for (_, s, l) in w.alloc.reservations() {
                occupied.push((s, l));
            }
            occupied.sort_unstable();
            // The expected free list: the complement of indexed extents and reservations.
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
            let actual: Vec<(u64, u64)> = w.alloc.free_extents().collect();
            if actual != expected {
                report.findings.problems.push(format!(
                    "free space: allocator has {} extents ({} units), the index implies {} ({} units)",
                    actual.len(),
                    actual.iter().map(|x| x.1).sum::<u64>(),
                    expected.len(),
                    expected.iter().map(|x| x.1).sum::<u64>()
                ));
            }
            if used != w.alloc.used_units() {
                report.findings.problems.push(format!(
                    "free space: allocator counts {} used units, the index names {used}",
                    w.alloc.used_units()
                ));
            }
            if let Err(e) = w.alloc.check_accounting() {
                report
                    .findings
                    .problems
                    .push(format!("free space (S5): {e}"));
            }

            // The current journal's chain.
            let j = &w.journal;
            let mut image = vec![0u8; (j.tail + 8).min(j.len) as usize];
            let chain = match j.file.read_exact_at(&mut image, 0) {
                Err(e) => Err(format!("cannot read: {e}")),
                Ok(()) => match decode_header(&image, self.store_id) {
                    Err(e) => Err(e.0),
                    Ok(g) if g != j.generation => Err(format!("header names generation {g}")),
                    Ok(_) => {
                        let image = &image[..j.tail as usize];
                        let mut undecodable = None;
                        match journal::scan(
                            image,
                            journal::chain_seed(self.store_id, j.generation),
                            |off, p| {
                                if undecodable.is_none() && decode_ops(p).is_err() {
                                    undecodable = Some(off);
                                }
                                Ok(())
                            },
                        ) {
                            Err(e) => Err(e.to_string()),
                            Ok(s)
                                if s.stop != ScanEnd::Clean
                                    || s.end != j.tail
                                    || s.last_crc != j.last_crc =>
                            {
                                Err(format!(
                                    "chain breaks at offset {} of {} ({:?})",
                                    s.end, j.tail, s.stop
                                ))
                            }
                            Ok(_) => match undecodable {
                                Some(off) => Err(format!("record at {off} does not decode")),
                                None => Ok(()),
                            },
                        }
                    }
                },
            };
            journal_damaged = chain.is_err();
            if let Err(e) = chain {
                report
                    .findings
                    .problems
                    .push(format!("journal {}: {e}", j.path.display()));
            }
            let _ = JOURNAL_HEADER_BYTES;
        }

        // The snapshot on disk.
        let snap_path = self.dir.join(SNAP_NAME);
        let mut snap_damaged = false;
        if self.disk.exists(&snap_path) {
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
            if let Err(e) = checked {
                snap_damaged = true;
                report.findings.problems.push(e.to_string());
            }
        }

        // 3. Repair.
        if repair {
            let mut by_folder: std::collections::BTreeMap<usize, Vec<u32>> = Default::default();
            for (ci, uid, _) in &damaged {
                by_folder.entry(*ci).or_default().push(*uid);
            }
            for (ci, uids) in by_folder {
                let cell = &cells[ci];
                let mut w = self.writer()?;
                let op = {
                    let f = cell.read();
                    let present: Vec<u32> = uids
                        .iter()
                        .copied()
                        .filter(|u| f.messages.contains_key(u))
                        .collect();
                    if present.is_empty() || f.deleted {
                        continue;
                    }
                    Op::Expunge {
                        folder: f.id,
                        modseq: f.highest_modseq + 1,
                        uids: present,
                    }
                };
                let Op::Expunge {
                    uids: ref present, ..
                } = op
                else {
                    continue;
                };
                let line = {
                    let f = cell.read();
                    format!("{}/{}: expunged damaged UIDs {present:?}", f.user, f.name)
                };
                self.commit(&mut w, std::slice::from_ref(&op))?;
                report.findings.repaired.push(line);
            }
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

    fn verify_one(&self, cell: &FolderCell, uid: u32) -> Result<(), StoreError> {
        let f = cell.read();
        let (user, name) = (f.user.clone(), f.name.clone());
        drop(f);
        self.read(&user, &name, uid).map(|_| ())
    }
}
