//! Offline consistency check of a queue directory (`mailstow queue fsck`).
//!
//! Reads everything recovery reads and more: every header, every slot chain, every record's
//! checksum and status bytes, and the uniqueness of message ids. With `repair`, it marks done
//! the records it cannot read (their slot's done flag, outside every checksum) and renames
//! unreadable segment files to `<name>.quarantined`; it rewrites nothing else. Run it only
//! while no `Queue` has the directory open.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use disk::{Disk, Findings};

use crate::error::QueueError;
use crate::format::{self, Kind};
use crate::recovery::{self, Loaded};
use crate::segment;

/// One problem found by [`check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsckProblem {
    /// The segment file concerned.
    pub file: String,
    pub what: String,
}

impl fmt::Display for FsckProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.what)
    }
}

/// What [`check`] found (and, with `repair`, did): counters, and the findings every engine's
/// check reports alike ([`disk::Findings`]: damage, notes on conditions recovery handles by
/// design such as a torn last batch or a message in two records, and repairs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckReport {
    pub segments: usize,
    pub records_checked: u64,
    /// Records that are not done (messages still in the queue, before duplicate resolution).
    pub live_records: u64,
    pub findings: Findings<FsckProblem>,
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
            "{}{} segments, {} records checked, {} live, {} problems, {} repaired: {}",
            self.findings,
            self.segments,
            self.records_checked,
            self.live_records,
            self.findings.problems.len(),
            self.findings.repaired.len(),
            if self.is_clean() {
                "clean"
            } else {
                "NOT clean"
            }
        )
    }
}

/// Records read per `pread` while checking.
const CHECK_CHUNK: u64 = 8 << 20;

/// Checks the queue in `dir`. `progress(done, total)` is called with record bytes checked.
pub fn check(
    disk: Arc<dyn Disk>,
    dir: &Path,
    repair: bool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<FsckReport, QueueError> {
    let mut report = FsckReport::default();
    let (mut loaded, unreadable, _) = recovery::load_segments(&*disk, dir)?;
    report.segments = loaded.len() + unreadable.len();
    let mut renamed = false;
    for u in unreadable {
        let name = u.split(':').next().unwrap_or_default().to_string();
        report.findings.problems.push(FsckProblem {
            file: name.clone(),
            what: format!("unreadable: {}", &u[name.len() + 1..].trim()),
        });
        if repair {
            let from = dir.join(&name);
            let to = dir.join(format!("{name}.quarantined"));
            disk.rename(&from, &to)
                .map_err(|e| QueueError::io("rename", &from, e))?;
            report
                .findings
                .repaired
                .push(format!("{name}: renamed to {name}.quarantined"));
            renamed = true;
        }
    }
    if renamed {
        disk.sync_dir(dir)
            .map_err(|e| QueueError::io("sync directory", dir, e))?;
    }

    // The torn last batch of the segments active last is not damage: drop it from the check.
    for pos in recovery::last_active(&loaded).into_iter().flatten() {
        let l = &mut loaded[pos];
        let torn = segment::tail_check(&*l.file, &l.scan)
            .map_err(|e| QueueError::io("read records of", &l.path, e))?;
        if let Some((_, why)) = torn {
            let range = l.scan.last_batch();
            report.findings.notes.push(format!(
                "{}: the last batch ({} records) is torn ({why}): never acknowledged, recovery drops it",
                l.name,
                range.len()
            ));
            l.scan.chain.truncate(range.start);
        }
    }

    let total: u64 = loaded
        .iter()
        .flat_map(|l| l.scan.chain.iter().map(|e| u64::from(e.slot.len)))
        .sum();
    let mut checked = 0u64;
    progress(0, total);
    let mut main_ids: HashMap<u64, String> = HashMap::new();
    let mut live_ids: HashMap<u64, Vec<String>> = HashMap::new();
    for l in &loaded {
        let mut marks: Vec<u32> = Vec::new();
        if l.scan.incomplete_dropped > 0 {
            report.findings.notes.push(format!(
                "{}: {} slots of an incomplete last batch (never acknowledged) are ignored",
                l.name, l.scan.incomplete_dropped
            ));
        }
        if let Some((i, why)) = &l.scan.bad_fields {
            report.findings.problems.push(FsckProblem {
                file: l.name.clone(),
                what: format!("slot {i}: {why}; everything after it is ignored"),
            });
        }
        for &(index, done) in &l.scan.damaged {
            if done == 0 {
                report.findings.problems.push(FsckProblem {
                    file: l.name.clone(),
                    what: format!(
                        "slot {index}: checksum mismatch (damaged slot); its message is lost"
                    ),
                });
                marks.push(index);
            } else {
                report.findings.notes.push(format!(
                    "{}: slot {index} is damaged but marked done",
                    l.name
                ));
            }
        }
        check_records(l, &mut report, &mut marks, &mut checked, total, progress)?;
        for e in &l.scan.chain {
            let s = e.slot;
            if l.header.kind == Kind::Main
                && let Some(other) = main_ids.insert(s.id, l.name.clone())
            {
                report.findings.problems.push(FsckProblem {
                    file: l.name.clone(),
                    what: format!("message id {} is also used in {other}", s.id),
                });
            }
            if s.done == 0 && !marks.contains(&e.index) {
                report.live_records += 1;
                live_ids.entry(s.id).or_default().push(l.name.clone());
            }
        }
        if repair && !marks.is_empty() {
            for &index in &marks {
                let at = format::slot_offset(index) + format::S_DONE as u64;
                l.file
                    .write_all_at(&[1], at)
                    .map_err(|e| QueueError::io("mark done in", &l.path, e))?;
                report
                    .findings
                    .repaired
                    .push(format!("{}: slot {index} marked done", l.name));
            }
            l.file
                .sync_data()
                .map_err(|e| QueueError::io("fdatasync", &l.path, e))?;
        }
    }
    let dups: BTreeMap<u64, Vec<String>> =
        live_ids.into_iter().filter(|(_, v)| v.len() > 1).collect();
    for (id, files) in dups {
        report.findings.notes.push(format!(
            "message {id} is live in {} records ({}): an interrupted deferral, open keeps the newer",
            files.len(),
            files.join(", ")
        ));
    }
    Ok(report)
}

/// Verifies every record of one segment, reading runs of up to [`CHECK_CHUNK`] bytes.
fn check_records(
    l: &Loaded,
    report: &mut FsckReport,
    marks: &mut Vec<u32>,
    checked: &mut u64,
    total: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(), QueueError> {
    let slots: Vec<(u32, format::Slot)> = l.scan.chain.iter().map(|e| (e.index, e.slot)).collect();
    let mut i = 0;
    while i < slots.len() {
        let start = u64::from(slots[i].1.offset);
        let mut j = i + 1;
        while j < slots.len()
            && u64::from(slots[j].1.offset) + u64::from(slots[j].1.len) - start <= CHECK_CHUNK
            && slots[j].1.offset == slots[j - 1].1.offset + slots[j - 1].1.len
        {
            j += 1;
        }
        let end = u64::from(slots[j - 1].1.offset) + u64::from(slots[j - 1].1.len);
        let mut buf = vec![0u8; (end - start) as usize];
        let n = segment::read_upto(&*l.file, &mut buf, start)
            .map_err(|e| QueueError::io("read records of", &l.path, e))?;
        for &(index, slot) in &slots[i..j] {
            let a = (u64::from(slot.offset) - start) as usize;
            let b = a + slot.len as usize;
            let result = if b > n {
                Err("record lies past the end of the file".to_string())
            } else {
                segment::verify_record(&buf[a..b], &slot)
            };
            report.records_checked += 1;
            *checked += u64::from(slot.len);
            if let Err(why) = result {
                if slot.done == 0 {
                    report.findings.problems.push(FsckProblem {
                        file: l.name.clone(),
                        what: format!("slot {index}, message {}: {why}", slot.id),
                    });
                    marks.push(index);
                } else {
                    report.findings.notes.push(format!(
                        "{}: finished message {} is damaged ({why}); harmless",
                        l.name, slot.id
                    ));
                }
            }
        }
        progress(*checked, total);
        i = j;
    }
    Ok(())
}
