//! A backup run (docs/operations.md, Backups): the capture point, then the folders'
//! messages below their cuts, the directory and the files, then the manifest, last.
//!
//! Phases, each ending in what the next relies on:
//! 1. `prepare`: `DEST` locked, its previous manifest read (or `DEST` new or empty);
//! 2. `capture`: delivery rounds paused and the gate held exclusively; every folder's
//!    UIDVALIDITY and UIDNEXT (its cut) and the queue's live messages (the queue object)
//!    taken; released. Asserts that the cuts are sorted parents first;
//! 3. `copy_folders`: per folder, a pack of the messages from the previous run's cut to this
//!    one, and its state; earlier packs named again;
//! 4. `copy_files`: the directory copy, the configuration, the certificate and key;
//! 5. `commit`: folders synced, the manifest written atomically, then objects no manifest
//!    names removed.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use store::{FolderStatus, Mailstore as _, StoreError};

use super::objects::{Counts, Objects, write_atomically};
use super::records::{
    Kept, PACK_MAGIC, QUEUE_MAGIC, Queued, STATE_MAGIC, write_header, write_kept, write_packed,
    write_queued,
};
use super::{
    DestLock, FORMAT_NAME, FORMAT_VERSION, FileEntry, FolderEntry, MANIFEST, Manifest, Note,
    PackEntry, QueueEntry,
};

/// Progress is reported at least every this many message bytes.
const PROGRESS_BYTES: u64 = 4 << 20;

/// What a backup reads from.
pub struct Sources<'a> {
    /// The data directory backed up (recorded in the manifest; a restore puts files that
    /// were inside it back in the same place).
    pub data_dir: &'a Path,
    pub queue: &'a queue::Queue,
    pub store: &'a store::Store,
    /// The running server's delivery rounds and gate, held for the capture point. `None`:
    /// the offline CLI, alone with the engines under the data directory's lock.
    pub running: Option<(&'a delivery::Wakeup, &'a mailboxes::Gate)>,
    /// Writes a consistent copy of the directory to the path given (which must not exist);
    /// `false`: the directory is not a file we copy (PostgreSQL).
    pub directory: &'a (dyn Fn(&Path) -> Result<bool> + Sync),
    /// Files copied whole: their name in the manifest and where they are.
    pub files: Vec<(String, PathBuf)>,
    /// Set when the client went away: stop at the next message, leaving the previous
    /// backup as it was.
    pub cancel: Option<&'a AtomicBool>,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub run: u64,
    pub folders: u64,
    /// Messages the backup holds (every folder's state).
    pub messages: u64,
    /// Messages this run copied.
    pub new_messages: u64,
    pub queue_messages: u64,
    pub written: Counts,
    pub reused: Counts,
    /// Objects of earlier runs no longer needed, removed.
    pub removed: u64,
    /// How long deliveries waited for the capture point.
    pub paused: Duration,
    pub duration: Duration,
    pub not_included: Vec<String>,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "run {}, {} folders, {} messages ({} new), queue {} messages, {} objects written \
             ({} bytes), {} reused ({} bytes), {} removed, paused {:.3} s, {:.3} s",
            self.run,
            self.folders,
            self.messages,
            self.new_messages,
            self.queue_messages,
            self.written.objects,
            self.written.bytes,
            self.reused.objects,
            self.reused.bytes,
            self.removed,
            self.paused.as_secs_f64(),
            self.duration.as_secs_f64()
        )?;
        for n in &self.not_included {
            write!(f, "; not included: {n}")?;
        }
        Ok(())
    }
}

/// One folder at the capture point.
struct Cut {
    user: String,
    folder: String,
    status: FolderStatus,
}

/// Takes a backup of `sources` into `dest` (made if missing): incremental over the backup
/// already there. A failure or a cancel leaves the previous backup as it was.
pub fn take(sources: &Sources<'_>, dest: &Path, note: &mut dyn FnMut(Note)) -> Result<Summary> {
    let started = Instant::now();
    let (_lock, previous) = prepare(dest)?;
    let mut objects = Objects::open(dest)?;
    note(Note::Step(format!(
        "capture point: pausing deliveries, reading the queue (run {})",
        previous.as_ref().map_or(1, |p| p.run + 1)
    )));
    let captured_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (cuts, queue, paused) = capture(sources, &mut objects, note)?;
    note(Note::Step(format!(
        "capture point taken: {} folders, {} queued messages, deliveries paused {:.3} s",
        cuts.len(),
        queue.messages,
        paused.as_secs_f64()
    )));
    let mut summary = Summary {
        run: previous.as_ref().map_or(1, |p| p.run + 1),
        queue_messages: queue.messages,
        paused,
        ..Summary::default()
    };
    let folders = copy_folders(
        sources,
        &cuts,
        previous.as_ref(),
        &mut objects,
        &mut summary,
        note,
    )?;
    let (files, included) = copy_files(sources, &mut objects, &mut summary, note)?;
    note(Note::Step("writing the manifest".into()));
    objects.sync_dirs()?;
    let manifest = Manifest {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        run: summary.run,
        captured_unix_s,
        data_dir: std::path::absolute(sources.data_dir).unwrap_or(sources.data_dir.into()),
        included,
        not_included: summary.not_included.clone(),
        queue,
        folders,
        files,
        objects: objects.named().clone(),
        written: objects.written,
        reused: objects.reused,
    };
    let bytes = serde_json::to_vec_pretty(&manifest)?;
    write_atomically(&dest.join(MANIFEST), &bytes)?;
    // Only now is the previous backup replaced: what it alone needed may go.
    summary.removed = objects.collect_garbage()?;
    summary.written = objects.written;
    summary.reused = objects.reused;
    summary.folders = manifest.folders.len() as u64;
    summary.duration = started.elapsed();
    tracing::info!(
        event = "backup",
        target = %dest.display(),
        run = summary.run,
        folders = summary.folders,
        messages = summary.messages,
        new_messages = summary.new_messages,
        queue_messages = summary.queue_messages,
        written_bytes = summary.written.bytes,
        reused_bytes = summary.reused.bytes,
        paused = summary.paused.as_secs_f64(),
        duration = summary.duration.as_secs_f64(),
    );
    Ok(summary)
}

/// `DEST` made and locked; its manifest, if it holds a backup. A `DEST` with other things
/// in it and no manifest is refused: a backup never mixes with unrelated files.
fn prepare(dest: &Path) -> Result<(DestLock, Option<Manifest>)> {
    std::fs::create_dir_all(dest).with_context(|| format!("creating {}", dest.display()))?;
    let lock = DestLock::acquire(dest)?;
    let previous = Manifest::load(dest)?;
    if previous.is_none() {
        let ours = ["lock", super::objects::OBJECTS_DIR, "manifest.json.tmp"];
        let others: Vec<String> = std::fs::read_dir(dest)
            .with_context(|| format!("{}", dest.display()))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !ours.contains(&n.as_str()))
            .collect();
        if !others.is_empty() {
            bail!(
                "{} holds no backup (no {MANIFEST}) but is not empty ({}): give a new or empty \
                 directory",
                dest.display(),
                others.join(", ")
            );
        }
    }
    Ok((lock, previous))
}

/// Phase 2: deliveries paused and the gate held while each folder's cut and the queue's
/// live messages are taken (docs/operations.md, "Consistency while the server runs").
fn capture(
    sources: &Sources<'_>,
    objects: &mut Objects,
    note: &mut dyn FnMut(Note),
) -> Result<(Vec<Cut>, QueueEntry, Duration)> {
    let pausing = Instant::now();
    // Rounds first, then the gate: the order a delivery round takes them in.
    let paused = sources.running.map(|(rounds, _)| rounds.pause());
    let exclusive = sources.running.map(|(_, gate)| gate.exclusive());
    let store = sources.store;
    let mut cuts = Vec::new();
    for user in store.list_users() {
        for folder in store.list_folders(&user) {
            match store.status(&user, &folder) {
                Ok(status) => cuts.push(Cut {
                    user: user.clone(),
                    folder,
                    status,
                }),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e).context(format!("{user} {folder}")),
            }
        }
    }
    cuts.sort_by(|a, b| (&a.user, &a.folder).cmp(&(&b.user, &b.folder)));
    let queue = copy_queue(sources.queue, objects, note)?;
    drop(exclusive);
    drop(paused);
    // A parent's name is a prefix of its children's, so sorted means parents first: the
    // order a restore creates them in, each with its own UIDVALIDITY.
    assert!(
        cuts.windows(2)
            .all(|w| (&w[0].user, &w[0].folder) < (&w[1].user, &w[1].folder)),
        "folders at the capture point are sorted and unique"
    );
    Ok((cuts, queue, pausing.elapsed()))
}

/// The queue object: every message with a recipient still to deliver or to bounce, with its
/// envelope and content, read record by record.
fn copy_queue(
    queue: &queue::Queue,
    objects: &mut Objects,
    note: &mut dyn FnMut(Note),
) -> Result<QueueEntry> {
    let entries = queue.list().context("listing the queue")?;
    let mut out = objects.create()?;
    write_header(&mut out, &QUEUE_MAGIC)?;
    let mut messages = 0;
    for entry in entries {
        if let Some(damage) = &entry.damage {
            note(Note::Problem(format!(
                "queue message {}: unreadable ({damage}); left out (`mailstow queue fsck`)",
                entry.id
            )));
            continue;
        }
        let live = entry.envelope.recipients.iter().any(|r| {
            matches!(
                r.status,
                queue::RecipientStatus::Pending | queue::RecipientStatus::Failed
            )
        });
        if !live {
            continue;
        }
        let detail = match queue.show(entry.id) {
            Ok(detail) => detail,
            // Removed by an operator since the list (nothing else removes while deliveries
            // are paused).
            Err(queue::QueueError::UnknownMessage(_)) => continue,
            Err(e) => return Err(e).context(format!("reading queue message {}", entry.id)),
        };
        write_queued(
            &mut out,
            &Queued {
                id: entry.id,
                attempts: detail.entry.attempts,
                envelope: detail.entry.envelope,
                content: detail.content,
            },
        )?;
        messages += 1;
    }
    Ok(QueueEntry {
        object: objects.finish(out)?,
        messages,
    })
}

/// Phase 3: every folder's new messages and state.
fn copy_folders(
    sources: &Sources<'_>,
    cuts: &[Cut],
    previous: Option<&Manifest>,
    objects: &mut Objects,
    summary: &mut Summary,
    note: &mut dyn FnMut(Note),
) -> Result<Vec<FolderEntry>> {
    let store = sources.store;
    let earlier = |cut: &Cut| -> Option<&FolderEntry> {
        previous?.folders.iter().find(|p| {
            p.user == cut.user
                && p.folder == cut.folder
                && p.uidvalidity == cut.status.uidvalidity
                && p.below <= cut.status.uidnext
        })
    };
    // What is to copy, for the progress lines: from the index only.
    let mut total = 0u64;
    for cut in cuts {
        let from = earlier(cut).map_or(0, |p| p.below);
        if let Ok(view) = store.open_folder(&cut.user, &cut.folder) {
            total += view
                .messages
                .iter()
                .filter(|m| m.uid >= from && m.uid < cut.status.uidnext)
                .map(|m| m.size)
                .sum::<u64>();
        }
    }
    note(Note::Step(format!(
        "copying messages: {} folders, {total} new bytes",
        cuts.len()
    )));
    let mut progress = Progress {
        done: 0,
        total,
        messages: 0,
        reported: 0,
    };
    note(progress.note());
    let mut folders = Vec::with_capacity(cuts.len());
    for cut in cuts {
        let prior = earlier(cut);
        if let Some(entry) =
            copy_folder(sources, cut, prior, previous, objects, &mut progress, note)?
        {
            summary.messages += entry.messages;
            folders.push(entry);
        }
    }
    summary.new_messages = progress.messages;
    note(progress.note());
    Ok(folders)
}

struct Progress {
    done: u64,
    total: u64,
    messages: u64,
    reported: u64,
}

impl Progress {
    fn note(&mut self) -> Note {
        self.reported = self.done;
        Note::Progress {
            done: self.done,
            total: self.total,
            messages: self.messages,
        }
    }
}

/// One folder: a pack of the messages from `prior`'s cut (or the first UID) up to this cut,
/// and the state of every message below the cut. `None`: deleted since the capture point.
fn copy_folder(
    sources: &Sources<'_>,
    cut: &Cut,
    prior: Option<&FolderEntry>,
    previous: Option<&Manifest>,
    objects: &mut Objects,
    progress: &mut Progress,
    note: &mut dyn FnMut(Note),
) -> Result<Option<FolderEntry>> {
    let store = sources.store;
    let (user, folder) = (cut.user.as_str(), cut.folder.as_str());
    let below = cut.status.uidnext;
    let from = prior.map_or(0, |p| p.below);
    let view = match store.open_folder(user, folder) {
        Ok(view) if view.status.uidvalidity == cut.status.uidvalidity => Some(view),
        // Deleted and made again since: its messages are not the ones of the cut.
        Ok(_) => None,
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e).context(format!("{user} {folder}")),
    };
    let Some(view) = view else {
        note(Note::Problem(format!(
            "{user} {folder}: deleted since the capture point; left out"
        )));
        return Ok(None);
    };
    let mut packs = Vec::new();
    if let Some(prior) = prior {
        for pack in &prior.packs {
            let size = previous.map_or(0, |p| p.size(&pack.object));
            objects.keep(&pack.object, size)?;
            packs.push(pack.clone());
        }
    }
    // Messages expunged between the capture point and their read: not in the pack, so not
    // in the state either.
    let mut gone = BTreeSet::new();
    let fresh: Vec<&store::MessageInfo> = view
        .messages
        .iter()
        .filter(|m| m.uid >= from && m.uid < below)
        .collect();
    if !fresh.is_empty() {
        let mut out = objects.create()?;
        write_header(&mut out, &PACK_MAGIC)?;
        let mut packed = 0;
        for m in fresh {
            if sources.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                bail!("cancelled; the previous backup is unchanged");
            }
            match store.read(user, folder, m.uid) {
                Ok(content) => {
                    write_packed(&mut out, m.uid, m.internal_date, &content)?;
                    packed += 1;
                    progress.messages += 1;
                    progress.done += content.len() as u64;
                    if progress.done - progress.reported >= PROGRESS_BYTES {
                        note(progress.note());
                    }
                }
                Err(StoreError::NoSuchMessage { .. }) => {
                    gone.insert(m.uid);
                }
                Err(e) => return Err(e).context(format!("reading {user} {folder} UID {}", m.uid)),
            }
        }
        packs.push(PackEntry {
            object: objects.finish(out)?,
            from,
            below,
            messages: packed,
        });
    }
    let mut out = objects.create()?;
    write_header(&mut out, &STATE_MAGIC)?;
    let mut messages = 0;
    for m in view
        .messages
        .iter()
        .filter(|m| m.uid < below && !gone.contains(&m.uid))
    {
        write_kept(
            &mut out,
            &Kept {
                uid: m.uid,
                flags: m.flags.bits(),
                modseq: m.modseq,
                keywords: m.keywords.clone(),
            },
        )?;
        messages += 1;
    }
    out.flush()?;
    Ok(Some(FolderEntry {
        user: user.into(),
        folder: folder.into(),
        uidvalidity: view.status.uidvalidity,
        uidnext: view.status.uidnext.max(below),
        highest_modseq: view.status.highest_modseq,
        below,
        messages,
        state: objects.finish(out)?,
        packs,
    }))
}

/// Phase 4: the directory's copy and the whole files. Returns them and the parts included.
fn copy_files(
    sources: &Sources<'_>,
    objects: &mut Objects,
    summary: &mut Summary,
    note: &mut dyn FnMut(Note),
) -> Result<(Vec<FileEntry>, Vec<String>)> {
    let data_dir = std::path::absolute(sources.data_dir).unwrap_or(sources.data_dir.into());
    let mut included = vec!["queue".to_string(), "store".to_string()];
    let mut files = Vec::new();
    note(Note::Step("copying the directory".into()));
    let tmp = objects.tmp_path("directory.db");
    if (sources.directory)(&tmp).context("copying the directory")? {
        // VACUUM INTO does not sync what it wrote.
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .with_context(|| format!("syncing {}", tmp.display()))?;
        files.push(FileEntry {
            name: "directory".into(),
            source: data_dir.join("directory.db"),
            object: objects.adopt(&tmp)?,
        });
        included.push("directory".into());
    } else {
        summary
            .not_included
            .push("directory (PostgreSQL: back it up with pg_dump)".into());
    }
    for (name, path) in &sources.files {
        if !path.exists() {
            note(Note::Problem(format!(
                "{name}: {} does not exist; left out",
                path.display()
            )));
            summary
                .not_included
                .push(format!("{name} ({} does not exist)", path.display()));
            continue;
        }
        note(Note::Step(format!("copying {name} ({})", path.display())));
        files.push(FileEntry {
            name: name.clone(),
            source: std::path::absolute(path).unwrap_or(path.clone()),
            object: objects.copy_file(path)?,
        });
        let part = if name.starts_with("tls") {
            "tls"
        } else {
            name.as_str()
        };
        if !included.iter().any(|i| i == part) {
            included.push(part.to_string());
        }
    }
    Ok((files, included))
}
