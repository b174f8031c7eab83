//! `mailstow backup verify`: every object a backup's manifest names is there, of its size,
//! with the BLAKE3 hash that is its name, and parses (every record whole; a pack's UIDs
//! ascending within its range; a state naming only UIDs its packs hold). Reads the backup
//! only.

use std::collections::BTreeSet;
use std::io::BufReader;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};

use super::objects::{hash_reader, path_of};
use super::records::{PACK_MAGIC, QUEUE_MAGIC, Records, STATE_MAGIC};
use super::{FolderEntry, Manifest, Note};

/// What `verify` found.
#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    pub run: u64,
    pub objects: u64,
    pub bytes: u64,
    pub folders: u64,
    pub messages: u64,
    pub queue_messages: u64,
    /// Every problem, one line each; empty: the backup is whole.
    pub problems: Vec<String>,
    pub duration: Duration,
}

impl VerifyReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

impl std::fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "run {}, {} objects ({} bytes), {} folders, {} messages, queue {} messages, \
             {:.3} s: ",
            self.run,
            self.objects,
            self.bytes,
            self.folders,
            self.messages,
            self.queue_messages,
            self.duration.as_secs_f64()
        )?;
        if self.problems.is_empty() {
            write!(f, "whole")
        } else {
            write!(f, "{} problems", self.problems.len())
        }
    }
}

/// Checks the backup at `dest`. `Err` only when there is no manifest to read; every other
/// problem is in the report (and noted as it is found).
pub fn verify(dest: &Path, note: &mut dyn FnMut(Note)) -> Result<VerifyReport> {
    let started = Instant::now();
    let manifest = Manifest::load(dest)?
        .ok_or_else(|| anyhow!("no backup at {} (no {})", dest.display(), super::MANIFEST))?;
    let mut report = VerifyReport {
        run: manifest.run,
        ..VerifyReport::default()
    };
    let total: u64 = manifest.objects.values().sum();
    note(Note::Step(format!(
        "checking {} objects ({total} bytes)",
        manifest.objects.len()
    )));
    let mut whole = BTreeSet::new();
    for (name, &size) in &manifest.objects {
        let path = path_of(dest, name);
        match check_object(&path, name, size) {
            Ok(()) => {
                whole.insert(name.clone());
            }
            Err(e) => problem(note, &mut report, format!("{}: {e}", path.display())),
        }
        report.objects += 1;
        report.bytes += size;
    }
    note(Note::Progress {
        done: report.bytes,
        total,
        messages: 0,
    });
    note(Note::Step("parsing the queue and the folders".into()));
    if whole.contains(&manifest.queue.object) {
        match parse_queue(dest, &manifest) {
            Ok(n) if n == manifest.queue.messages => report.queue_messages = n,
            Ok(n) => problem(
                note,
                &mut report,
                format!(
                    "queue: {n} messages, the manifest says {}",
                    manifest.queue.messages
                ),
            ),
            Err(e) => problem(note, &mut report, format!("queue: {e}")),
        }
    }
    for folder in &manifest.folders {
        match parse_folder(dest, &manifest, folder, &whole) {
            Ok(messages) => report.messages += messages,
            Err(e) => problem(
                note,
                &mut report,
                format!("{} {}: {e}", folder.user, folder.folder),
            ),
        }
        report.folders += 1;
    }
    report.duration = started.elapsed();
    Ok(report)
}

fn problem(note: &mut dyn FnMut(Note), report: &mut VerifyReport, text: String) {
    note(Note::Problem(text.clone()));
    report.problems.push(text);
}

fn check_object(path: &Path, name: &str, size: u64) -> Result<()> {
    let file = std::fs::File::open(path).map_err(|e| anyhow!("missing ({e})"))?;
    let len = file.metadata()?.len();
    if len != size {
        return Err(anyhow!(
            "{len} bytes, the manifest says {size} (cut short or grown)"
        ));
    }
    let (hash, _) = hash_reader(BufReader::new(file))?;
    if hash != name {
        return Err(anyhow!("damaged: its content's BLAKE3 hash is {hash}"));
    }
    Ok(())
}

fn open(
    dest: &Path,
    manifest: &Manifest,
    name: &str,
    magic: &[u8; 8],
) -> Result<Records<BufReader<std::fs::File>>> {
    let file = std::fs::File::open(path_of(dest, name))?;
    Records::open(BufReader::new(file), manifest.size(name), magic)
}

fn parse_queue(dest: &Path, manifest: &Manifest) -> Result<u64> {
    let mut records = open(dest, manifest, &manifest.queue.object, &QUEUE_MAGIC)?;
    let mut n = 0;
    while !records.at_end() {
        records.queued()?;
        n += 1;
    }
    Ok(n)
}

/// A folder's packs and state, when all of them are whole. Returns the state's messages.
fn parse_folder(
    dest: &Path,
    manifest: &Manifest,
    folder: &FolderEntry,
    whole: &BTreeSet<String>,
) -> Result<u64> {
    let mut uids = BTreeSet::new();
    let mut packs_whole = true;
    for pack in &folder.packs {
        if !whole.contains(&pack.object) {
            packs_whole = false;
            continue;
        }
        let mut records = open(dest, manifest, &pack.object, &PACK_MAGIC)?;
        let mut n = 0;
        while !records.at_end() {
            let m = records.packed()?;
            if m.uid < pack.from || m.uid >= pack.below || !uids.insert(m.uid) {
                return Err(anyhow!(
                    "pack {}: UID {} out of its range [{}, {}) or repeated",
                    pack.object,
                    m.uid,
                    pack.from,
                    pack.below
                ));
            }
            n += 1;
        }
        if n != pack.messages {
            return Err(anyhow!(
                "pack {}: {n} messages, the manifest says {}",
                pack.object,
                pack.messages
            ));
        }
    }
    if !whole.contains(&folder.state) {
        return Ok(0);
    }
    let mut records = open(dest, manifest, &folder.state, &STATE_MAGIC)?;
    let mut n = 0;
    let mut last = None;
    while !records.at_end() {
        let kept = records.kept()?;
        if last.is_some_and(|l| kept.uid <= l) || kept.uid >= folder.below {
            return Err(anyhow!("state: UID {} out of order or range", kept.uid));
        }
        if packs_whole && !uids.contains(&kept.uid) {
            return Err(anyhow!("state: UID {} is in no pack", kept.uid));
        }
        last = Some(kept.uid);
        n += 1;
    }
    if n != folder.messages {
        return Err(anyhow!(
            "state: {n} messages, the manifest says {}",
            folder.messages
        ));
    }
    Ok(n)
}
