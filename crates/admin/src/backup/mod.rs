//! `mailstow backup`, `backup verify` and `restore` (docs/operations.md, Backups): a logical
//! copy of the queue's live messages, every folder of the store, the directory and the
//! files a server needs, taken while it runs, incremental on later runs.
//!
//! The one place that reads and writes backups: the running server calls it for a request
//! on its admin socket, the CLI calls it when no server runs. It never prints; it reports
//! through a [`Note`] callback and returns a summary.
//!
//! - [`take`]: a backup run, whose capture point pauses delivery rounds
//!   (`delivery::Wakeup::pause`) and holds the mailboxes' gate, so a message the queue
//!   acknowledged is in the backup exactly once (in the queue or in the store);
//! - [`verify`]: every object of a backup checked against its name and parsed;
//! - [`restore`]: a verified backup written into an empty data directory;
//! - `objects`: content-addressed, immutable files; `records`: their formats.

mod objects;
mod records;
mod restore;
mod take;
mod verify;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

pub use objects::Counts;
pub use restore::{RestoreSummary, check_empty, restore};
pub use take::{Sources, Summary, take};
pub use verify::{VerifyReport, verify};

/// The format of the objects and the manifest this program writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// The `format` field of every manifest.
pub const FORMAT_NAME: &str = "mailstow-backup";
/// The manifest's file name in a backup; written last.
pub const MANIFEST: &str = "manifest.json";
/// A manifest larger than this is refused (about 2,000 bytes a folder: far more folders than
/// a server holds).
const MANIFEST_BYTES_MAX: u64 = 1 << 30;

/// What a running backup, verify or restore tells its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// A phase starts.
    Step(String),
    /// Message bytes copied (or checked) so far, of `total`.
    Progress {
        done: u64,
        total: u64,
        messages: u64,
    },
    /// Something left out or found wrong.
    Problem(String),
}

impl Note {
    /// The line a server streams to the CLI (see `socket::stream_work`).
    pub fn line(&self) -> String {
        match self {
            Note::Step(text) => format!("step {}", crate::format::one_line(text)),
            Note::Progress {
                done,
                total,
                messages,
            } => format!("progress {done} {total} {messages}"),
            Note::Problem(text) => format!("problem {}", crate::format::one_line(text)),
        }
    }

    /// A streamed line back as a note.
    pub fn parse(line: &str) -> Option<Note> {
        if let Some(text) = line.strip_prefix("step ") {
            return Some(Note::Step(text.to_string()));
        }
        if let Some(text) = line.strip_prefix("problem ") {
            return Some(Note::Problem(text.to_string()));
        }
        let mut w = line.strip_prefix("progress ")?.split(' ');
        let mut n = || w.next().and_then(|x| x.parse::<u64>().ok());
        Some(Note::Progress {
            done: n()?,
            total: n()?,
            messages: n()?,
        })
    }
}

/// `manifest.json`: what a backup holds. Written last, atomically.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT_NAME`].
    pub format: String,
    /// [`FORMAT_VERSION`].
    pub version: u32,
    /// Runs into this backup so far, this one included.
    pub run: u64,
    /// When this run's capture point was taken (Unix seconds).
    pub captured_unix_s: u64,
    /// The data directory backed up.
    pub data_dir: PathBuf,
    /// The parts included (`queue`, `store`, `directory`, `config`, `tls`).
    pub included: Vec<String>,
    /// Parts left out, each with why.
    pub not_included: Vec<String>,
    /// The queue object and how many messages it holds.
    pub queue: QueueEntry,
    /// Every folder, sorted by user and name (a parent before its children).
    pub folders: Vec<FolderEntry>,
    /// Whole files: the directory copy, the configuration, the certificate and key.
    pub files: Vec<FileEntry>,
    /// Every object the backup needs, with its size.
    pub objects: std::collections::BTreeMap<String, u64>,
    /// What this run wrote, and what it named again without writing.
    pub written: Counts,
    pub reused: Counts,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueEntry {
    pub object: String,
    pub messages: u64,
}

/// One folder: its identity at the capture point, its messages' state and its packs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FolderEntry {
    pub user: String,
    pub folder: String,
    pub uidvalidity: u32,
    pub uidnext: u32,
    pub highest_modseq: u64,
    /// Messages with a UID below this are in the backup (the folder's UIDNEXT at the
    /// capture point); the next run adds those from here.
    pub below: u32,
    /// Messages the state lists.
    pub messages: u64,
    pub state: String,
    pub packs: Vec<PackEntry>,
}

/// Messages of one folder with UIDs in `[from, below)`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PackEntry {
    pub object: String,
    pub from: u32,
    pub below: u32,
    pub messages: u64,
}

/// A whole file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileEntry {
    /// `directory`, `config`, `tls_cert`, `tls_key`, `tls_hostname`, `tls_acme_account`,
    /// `tls_acme_key`, `tls_acme_cert`, `tls_acme_state`.
    pub name: String,
    /// Where it came from (absolute).
    pub source: PathBuf,
    pub object: String,
}

impl Manifest {
    /// Reads and checks the manifest of the backup at `dest`; `None` if it has none.
    pub fn load(dest: &Path) -> Result<Option<Manifest>> {
        let path = dest.join(MANIFEST);
        if !path.exists() {
            return Ok(None);
        }
        let bytes = objects::read_small(&path, MANIFEST_BYTES_MAX)?;
        let manifest: Manifest = serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not a backup manifest", path.display()))?;
        if manifest.format != FORMAT_NAME {
            bail!("{} is not a mailstow backup manifest", path.display());
        }
        if manifest.version != FORMAT_VERSION {
            bail!(
                "{} is backup format {}; this program reads format {FORMAT_VERSION}",
                path.display(),
                manifest.version
            );
        }
        let named = std::iter::once(&manifest.queue.object)
            .chain(manifest.files.iter().map(|f| &f.object))
            .chain(manifest.folders.iter().map(|f| &f.state))
            .chain(
                manifest
                    .folders
                    .iter()
                    .flat_map(|f| f.packs.iter().map(|p| &p.object)),
            );
        for name in named {
            if !manifest.objects.contains_key(name) {
                bail!("{}: object {name} is used but not listed", path.display());
            }
        }
        if let Some(bad) = manifest
            .objects
            .keys()
            .find(|n| !objects::is_object_name(n))
        {
            bail!("{}: '{bad}' is not an object name", path.display());
        }
        Ok(Some(manifest))
    }

    /// The size of object `name` (every name used is listed: checked by `load`).
    fn size(&self, name: &str) -> u64 {
        self.objects.get(name).copied().unwrap_or(0)
    }
}

/// Holds `DEST/lock` (`flock`) for a run, so two backups into one place never mix.
struct DestLock {
    _file: std::fs::File,
}

impl DestLock {
    fn acquire(dest: &Path) -> Result<DestLock> {
        let path = dest.join("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(DestLock { _file: file }),
            Err(rustix::io::Errno::WOULDBLOCK) => {
                bail!("another backup into {} is running", dest.display())
            }
            Err(e) => Err(e).with_context(|| format!("locking {}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests;
