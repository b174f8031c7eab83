//! `mailstow restore`: a verified backup written into an empty data directory
//! (docs/operations.md, Backups, Restore): the directory's copy, each folder with its
//! UIDVALIDITY, UIDs, flags, keywords, internal dates and MODSEQs, the queue's messages
//! with each recipient's status, and the files.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use store::ImportedMessage;

use super::objects::{path_of, sync_dir};
use super::records::{Kept, PACK_MAGIC, QUEUE_MAGIC, Records, STATE_MAGIC};
use super::{FileEntry, FolderEntry, Manifest, Note};

/// Queue messages submitted before waiting for their commits.
const ENQUEUE_BATCH: usize = 256;

/// What a restore did.
#[derive(Debug, Clone, Default)]
pub struct RestoreSummary {
    pub folders: u64,
    pub messages: u64,
    pub bytes: u64,
    /// Messages that kept their UID, folders that kept their UIDVALIDITY.
    pub uids_kept: u64,
    pub uidvalidities_kept: u64,
    pub queue_messages: u64,
    /// Each file written back: its name and where.
    pub files: Vec<(String, PathBuf)>,
    pub problems: u64,
    pub duration: Duration,
}

impl std::fmt::Display for RestoreSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} folders ({} kept their UIDVALIDITY), {} messages ({} bytes, {} kept their \
             UID), queue {} messages, {} files, {} problems, {:.3} s",
            self.folders,
            self.uidvalidities_kept,
            self.messages,
            self.bytes,
            self.uids_kept,
            self.queue_messages,
            self.files.len(),
            self.problems,
            self.duration.as_secs_f64()
        )
    }
}

/// Refuses a data directory that exists and holds anything: a restore never mixes with
/// what is there.
pub fn check_empty(data_dir: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(data_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("{}", data_dir.display())),
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    names.sort();
    let count = names.len();
    names.truncate(5);
    bail!(
        "restore needs an empty data directory: {} holds {count} entries ({}{}); give \
         --data-dir a new or empty directory",
        data_dir.display(),
        names.join(", "),
        if count > 5 { ", ..." } else { "" }
    )
}

/// Writes the backup at `src` (its `manifest`, already verified) into `data_dir`, whose
/// queue and store the caller opened empty under the data directory's lock.
pub fn restore(
    src: &Path,
    manifest: &Manifest,
    data_dir: &Path,
    queue: &queue::Queue,
    store: &store::Store,
    note: &mut dyn FnMut(Note),
) -> Result<RestoreSummary> {
    let started = Instant::now();
    let mut summary = RestoreSummary::default();
    for file in &manifest.files {
        let target = restore_file(src, manifest, data_dir, file)?;
        note(Note::Step(format!(
            "{}: {} restored to {}",
            file.name,
            file.source.display(),
            target.display()
        )));
        summary.files.push((file.name.clone(), target));
    }
    let total: u64 = manifest
        .folders
        .iter()
        .flat_map(|f| f.packs.iter().map(|p| manifest.size(&p.object)))
        .sum();
    note(Note::Step(format!(
        "restoring {} folders ({total} bytes of packs)",
        manifest.folders.len()
    )));
    let mut done = 0;
    for folder in &manifest.folders {
        restore_folder(src, manifest, folder, store, &mut summary, note)?;
        done += folder
            .packs
            .iter()
            .map(|p| manifest.size(&p.object))
            .sum::<u64>();
        note(Note::Progress {
            done,
            total,
            messages: summary.messages,
        });
    }
    note(Note::Step(format!(
        "restoring the queue ({} messages)",
        manifest.queue.messages
    )));
    summary.queue_messages = restore_queue(src, manifest, queue, note)?;
    summary.duration = started.elapsed();
    Ok(summary)
}

/// A file back where it was when that was inside the data directory, else under
/// `<data_dir>/restored/` for the operator to move.
fn restore_file(
    src: &Path,
    manifest: &Manifest,
    data_dir: &Path,
    file: &FileEntry,
) -> Result<PathBuf> {
    let inside = file
        .source
        .strip_prefix(&manifest.data_dir)
        .ok()
        .filter(|rest| {
            rest.components()
                .all(|c| matches!(c, std::path::Component::Normal(_)))
        });
    let target = match inside {
        // The directory's copy is the data directory's, wherever it came from.
        _ if file.name == "directory" => data_dir.join("directory.db"),
        Some(rest) => data_dir.join(rest),
        None => {
            let base = file
                .source
                .file_name()
                .map_or_else(|| file.name.clone(), |n| n.to_string_lossy().into_owned());
            data_dir
                .join("restored")
                .join(format!("{}-{base}", file.name))
        }
    };
    let dir = target.parent().unwrap_or(data_dir);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut input = std::fs::File::open(path_of(src, &file.object))
        .with_context(|| format!("reading object {}", file.object))?;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut output = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&target)
        .with_context(|| format!("creating {}", target.display()))?;
    std::io::copy(&mut input, &mut output)
        .and_then(|_| output.sync_all())
        .with_context(|| format!("writing {}", target.display()))?;
    sync_dir(dir)?;
    Ok(target)
}

fn restore_folder(
    src: &Path,
    manifest: &Manifest,
    folder: &FolderEntry,
    store: &store::Store,
    summary: &mut RestoreSummary,
    note: &mut dyn FnMut(Note),
) -> Result<()> {
    let (user, name) = (folder.user.as_str(), folder.folder.as_str());
    let target = store
        .import_folder(user, name, Some(folder.uidvalidity))
        .with_context(|| format!("creating {user} {name}"))?;
    summary.folders += 1;
    if target.uidvalidity_kept {
        summary.uidvalidities_kept += 1;
    } else {
        summary.problems += 1;
        note(Note::Problem(format!(
            "{user} {name}: UIDVALIDITY {} not kept (now {}): its clients resynchronise",
            folder.uidvalidity, target.status.uidvalidity
        )));
    }
    let mut state: BTreeMap<u32, Kept> = BTreeMap::new();
    let mut records = open(src, manifest, &folder.state, &STATE_MAGIC)?;
    while !records.at_end() {
        let kept = records.kept()?;
        state.insert(kept.uid, kept);
    }
    let config = store.config();
    let mut batch: Vec<ImportedMessage> = Vec::new();
    let mut bytes = 0usize;
    let mut all_kept = true;
    for pack in &folder.packs {
        let mut records = open(src, manifest, &pack.object, &PACK_MAGIC)?;
        while !records.at_end() {
            let m = records.packed()?;
            // Expunged since the pack was written: the state no longer lists it.
            let Some(kept) = state.get(&m.uid) else {
                continue;
            };
            if !batch.is_empty()
                && (batch.len() >= config.batch_messages_max
                    || bytes + m.content.len() > config.batch_bytes_max)
            {
                all_kept &= commit(store, user, name, &mut batch, summary, note)?;
                bytes = 0;
            }
            bytes += m.content.len();
            batch.push(ImportedMessage {
                uid: Some(m.uid),
                flags: store::Flags::from_bits_truncate(kept.flags),
                keywords: kept.keywords.clone(),
                internal_date: m.internal_date,
                content: m.content,
            });
        }
    }
    all_kept &= commit(store, user, name, &mut batch, summary, note)?;
    if !target.uidvalidity_kept {
        return Ok(());
    }
    store
        .raise_uidnext(user, name, folder.uidnext)
        .with_context(|| format!("{user} {name}: UIDNEXT"))?;
    // MODSEQs as the clients knew them (only when every UID is the backup's).
    let entries: Vec<(u32, u64)> = state.values().map(|k| (k.uid, k.modseq)).collect();
    if all_kept && let Err(e) = store.restore_modseqs(user, name, entries, folder.highest_modseq) {
        summary.problems += 1;
        note(Note::Problem(format!(
            "{user} {name}: MODSEQs not restored: {e}"
        )));
    }
    Ok(())
}

/// Commits one import batch; false if a message did not keep its UID.
fn commit(
    store: &store::Store,
    user: &str,
    folder: &str,
    batch: &mut Vec<ImportedMessage>,
    summary: &mut RestoreSummary,
    note: &mut dyn FnMut(Note),
) -> Result<bool> {
    if batch.is_empty() {
        return Ok(true);
    }
    let sizes: Vec<u64> = batch.iter().map(|m| m.content.len() as u64).collect();
    let prepared = store.prepare_import(user, folder, std::mem::take(batch))?;
    let outcomes = store
        .commit_import(prepared)
        .with_context(|| format!("importing into {user} {folder}"))?;
    let mut all_kept = true;
    for (outcome, size) in outcomes.into_iter().zip(sizes) {
        match outcome {
            Ok(o) => {
                summary.messages += 1;
                summary.bytes += size;
                if o.uid_kept {
                    summary.uids_kept += 1;
                } else {
                    all_kept = false;
                }
            }
            Err(e) => {
                all_kept = false;
                summary.problems += 1;
                note(Note::Problem(format!(
                    "{user} {folder}: a message refused: {e}"
                )));
            }
        }
    }
    Ok(all_kept)
}

/// Enqueues the backup's queue messages again: new ids, each recipient's status kept
/// (delivered recipients are not delivered again), except a bounce's (see below).
fn restore_queue(
    src: &Path,
    manifest: &Manifest,
    queue: &queue::Queue,
    note: &mut dyn FnMut(Note),
) -> Result<u64> {
    let mut records = open(src, manifest, &manifest.queue.object, &QUEUE_MAGIC)?;
    let mut restored = 0;
    while !records.at_end() {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut submitted = 0;
        while submitted < ENQUEUE_BATCH && !records.at_end() {
            let mut q = records.queued()?;
            let pending = |r: &queue::Recipient| r.status == queue::RecipientStatus::Pending;
            if !q.envelope.recipients.iter().any(pending) {
                // A bounce waiting for its DSN: the queue takes no new message without a
                // recipient to deliver, so its failed recipients are tried once more, fail
                // again, and bounce then.
                for r in &mut q.envelope.recipients {
                    if r.status == queue::RecipientStatus::Failed {
                        r.status = queue::RecipientStatus::Pending;
                    }
                }
                note(Note::Problem(format!(
                    "queue message {} was a bounce waiting to be sent: restored with its \
                     failed recipients pending (they are tried once more, then bounce)",
                    q.id
                )));
            }
            let tx = tx.clone();
            let id = q.id;
            queue.enqueue_with(
                q.envelope,
                q.content,
                Box::new(move |r| {
                    let _ = tx.send((id, r));
                }),
            );
            submitted += 1;
        }
        drop(tx);
        for (id, result) in rx {
            result.with_context(|| format!("enqueueing message {id} of the backup"))?;
            restored += 1;
        }
    }
    Ok(restored)
}

fn open(
    src: &Path,
    manifest: &Manifest,
    name: &str,
    magic: &[u8; 8],
) -> Result<Records<BufReader<std::fs::File>>> {
    let path = path_of(src, name);
    let file = std::fs::File::open(&path).with_context(|| format!("reading {}", path.display()))?;
    Records::open(BufReader::new(file), manifest.size(name), magic)
        .with_context(|| format!("{}", path.display()))
}
