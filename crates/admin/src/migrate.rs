//! `mailstow mailbox import|export`: mail moved between a user's folders in the store and
//! the files other mail software keeps (docs/migration.md), on `mailbox-formats`.
//!
//! The one place that reads and writes those files: the running server calls it for a
//! request on its admin socket (`server::admin`), the CLI calls it when no server runs. The
//! caller resolves the user; this module never prints, it reports through a [`Note`]
//! callback and returns a [`Summary`], and writes one `event=import`/`event=export` log line.
//!
//! Import reads one folder at a time. A reader thread reads the files and prepares each
//! batch (`Store::prepare_import`: summaries and MIME structures, the CPU work) while the
//! calling thread commits the one before (`Store::commit_import`: one group commit, two
//! `fdatasync` calls, per batch of at most `batch_messages_max` messages and
//! `batch_bytes_max` bytes). At most one message is buffered beyond the two batches, and a
//! message above `message_bytes_max` is refused before it is read. Files are LF, the store
//! CRLF: import converts bare LF to CRLF, export CRLF back to LF.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use mailbox_formats::lines::{to_crlf, to_lf};
use mailbox_formats::maildir::{self, MaildirFolder, MaildirWriter, OutMessage};
use mailbox_formats::mbox::{self, MboxBase, MboxItem, MboxOut, MboxReader, MboxWriter, Quoting};
use mailbox_formats::mutf7;
mod export;
mod through_rules;

pub use export::export;

use store::{ImportBatch, ImportedMessage, Mailstore as _, Store};

/// Problems reported one by one; past this many only their count is.
pub const PROBLEMS_SHOWN_MAX: u64 = 100;

/// The two file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A Maildir++ tree (INBOX at the root, `.A.B` folders).
    Maildir,
    /// An mbox file (INBOX) or a directory of them (a folder tree).
    Mbox,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Maildir => "maildir",
            Format::Mbox => "mbox",
        }
    }

    pub fn parse(name: &str) -> Option<Format> {
        match name {
            "maildir" => Some(Format::Maildir),
            "mbox" => Some(Format::Mbox),
            _ => None,
        }
    }
}

/// What a running import or export tells its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// Bytes of the source read (import) or of the store read (export), of `total`.
    Progress {
        done: u64,
        total: u64,
        messages: u64,
    },
    /// A message or folder skipped, a keyword dropped, a file that did not parse.
    Problem(String),
}

/// A migration's note is a backup's without its steps: they share one wire form
/// (`backup::Note::line` and `parse`).
impl From<Note> for crate::backup::Note {
    fn from(note: Note) -> crate::backup::Note {
        match note {
            Note::Progress {
                done,
                total,
                messages,
            } => crate::backup::Note::Progress {
                done,
                total,
                messages,
            },
            Note::Problem(text) => crate::backup::Note::Problem(text),
        }
    }
}

/// What the server adds around an import while it runs.
#[derive(Default)]
pub struct Guards<'a> {
    /// The running server's road into the store: each batch commits through it under its
    /// gate held shared, so a user's deletion, which holds the gate exclusively, never
    /// interleaves with a batch. `None`: the offline CLI, alone with the store (it holds the
    /// data directory's lock).
    pub deposit: Option<&'a mailboxes::Deposit>,
    /// Asked under that lock before each batch: does the user still exist?
    pub user_exists: Option<&'a (dyn Fn() -> bool + Sync)>,
    /// Set when the client went away: stop after the current batch.
    pub cancel: Option<&'a AtomicBool>,
    /// Deliver what goes to INBOX through the user's Sieve rules (the deposit's), as new mail
    /// would be: filed, flagged, discarded or sent on; its UIDs are not kept. Only with a
    /// deposit that has rules (the running server).
    pub rules: bool,
}

/// What an import or export did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub format: Option<Format>,
    pub folders: u64,
    pub messages: u64,
    /// Message bytes as the store holds them (CRLF).
    pub bytes: u64,
    /// Import: messages that kept the UID their source gave them.
    pub uids_kept: u64,
    /// Import: folders that kept their source's UIDVALIDITY.
    pub uidvalidities_kept: u64,
    /// Messages not moved (unreadable, malformed, too large).
    pub skipped: u64,
    /// Problems reported (skipped messages and folders, dropped keywords, bad files).
    pub problems: u64,
    /// Import: the store's `fdatasync` calls (volume and journal) while it ran, its own and
    /// (on a running server) those of deliveries at the same time.
    pub syncs: u64,
    pub duration: Duration,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} folders, {} messages, {} bytes ({}), {} UIDs kept, {} UIDVALIDITYs kept, \
             {} skipped, {} problems, {} fdatasyncs, {:.3} s",
            self.folders,
            self.messages,
            self.bytes,
            self.format.map_or("-", Format::name),
            self.uids_kept,
            self.uidvalidities_kept,
            self.skipped,
            self.problems,
            self.syncs,
            self.duration.as_secs_f64()
        )
    }
}

/// Collects problems and forwards them (the first [`PROBLEMS_SHOWN_MAX`]).
struct Reporter<'a> {
    note: &'a mut dyn FnMut(Note),
    summary: Summary,
}

impl Reporter<'_> {
    fn problem(&mut self, text: String) {
        self.summary.problems += 1;
        if self.summary.problems <= PROBLEMS_SHOWN_MAX {
            (self.note)(Note::Problem(text));
        } else if self.summary.problems == PROBLEMS_SHOWN_MAX + 1 {
            (self.note)(Note::Problem(format!(
                "more than {PROBLEMS_SHOWN_MAX} problems: only counted from here on"
            )));
        }
    }
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn store_flags(f: mailbox_formats::Flags) -> store::Flags {
    [
        (f.seen, store::Flags::SEEN),
        (f.answered, store::Flags::ANSWERED),
        (f.flagged, store::Flags::FLAGGED),
        (f.deleted, store::Flags::DELETED),
        (f.draft, store::Flags::DRAFT),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .fold(store::Flags::EMPTY, |all, (_, flag)| all.union(flag))
}

fn file_flags(f: store::Flags) -> mailbox_formats::Flags {
    mailbox_formats::Flags {
        seen: f.contains(store::Flags::SEEN),
        answered: f.contains(store::Flags::ANSWERED),
        flagged: f.contains(store::Flags::FLAGGED),
        deleted: f.contains(store::Flags::DELETED),
        draft: f.contains(store::Flags::DRAFT),
    }
}

/// One folder of the source.
enum SourceFolder {
    Maildir(MaildirFolder),
    Mbox { path: Vec<String>, file: PathBuf },
}

impl SourceFolder {
    fn name(&self) -> String {
        let path = match self {
            SourceFolder::Maildir(f) => &f.path,
            SourceFolder::Mbox { path, .. } => path,
        };
        if path.is_empty() || (path.len() == 1 && path[0].eq_ignore_ascii_case("inbox")) {
            "INBOX".to_string()
        } else {
            path.join("/")
        }
    }

    fn bytes(&self) -> u64 {
        match self {
            SourceFolder::Maildir(f) => f.messages.iter().map(|m| m.size).sum(),
            SourceFolder::Mbox { file, .. } => std::fs::metadata(file).map_or(0, |m| m.len()),
        }
    }
}

/// Whether a file starts (after empty lines) with `From `: an mbox.
fn looks_like_mbox(file: &Path) -> std::io::Result<bool> {
    use std::io::Read as _;
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(file)?
        .take(4096)
        .read_to_end(&mut head)?;
    let start = head
        .iter()
        .position(|&b| b != b'\n' && b != b'\r')
        .unwrap_or(head.len());
    Ok(head[start..].starts_with(b"From ") || start == head.len())
}

/// What `source` is, its folders, and the files in it that are not mail (described).
fn scan_source(store: &Store, source: &Path) -> Result<(Format, Vec<SourceFolder>, Vec<String>)> {
    let meta = std::fs::metadata(source).with_context(|| format!("{}", source.display()))?;
    if meta.is_dir() && maildir::is_maildir(source) {
        let tree = maildir::scan_tree(source)
            .with_context(|| format!("reading the maildir {}", source.display()))?;
        return Ok((
            Format::Maildir,
            tree.into_iter().map(SourceFolder::Maildir).collect(),
            Vec::new(),
        ));
    }
    if meta.is_dir() {
        let files = mbox::scan_tree(source, store.config().folder_depth_max)
            .with_context(|| format!("reading the directory {}", source.display()))?;
        let mut folders = Vec::new();
        let mut skipped = Vec::new();
        for (path, file) in files {
            match looks_like_mbox(&file) {
                Ok(true) => folders.push(SourceFolder::Mbox { path, file }),
                Ok(false) => skipped.push(format!(
                    "{}: not an mbox file (no From_ line at its start), skipped",
                    file.display()
                )),
                Err(e) => skipped.push(format!("{}: {e}, skipped", file.display())),
            }
        }
        if folders.is_empty() {
            bail!(
                "{} is neither a maildir (no cur/ or new/) nor a directory of mbox files",
                source.display()
            );
        }
        return Ok((Format::Mbox, folders, skipped));
    }
    if !looks_like_mbox(source).with_context(|| format!("reading {}", source.display()))? {
        bail!(
            "{} is not an mbox file (it does not start with a From_ line)",
            source.display()
        );
    }
    Ok((
        Format::Mbox,
        vec![SourceFolder::Mbox {
            path: Vec::new(),
            file: source.to_path_buf(),
        }],
        Vec::new(),
    ))
}

/// One message read from the source, or why not.
enum Read {
    Message {
        message: ImportedMessage,
        source_bytes: u64,
    },
    Skipped {
        problem: String,
        source_bytes: u64,
    },
}

/// How many maildir files ahead of the one being read the kernel is asked to read
/// (`POSIX_FADV_WILLNEED`): one file at a time, a cold maildir is read at the disk's
/// latency; asked ahead, the disk gets many reads at once.
const FILES_AHEAD_MAX: usize = 256;

/// A folder's messages, read one at a time.
enum Messages {
    Maildir {
        files: Vec<maildir::MaildirMessage>,
        next: usize,
        /// Files up to here were advised.
        advised: usize,
    },
    Mbox {
        reader: Box<MboxReader<std::io::BufReader<std::fs::File>>>,
        file: PathBuf,
        first: Option<MboxItem>,
        at: u64,
        uids: bool,
    },
}

impl Messages {
    fn next(&mut self, message_bytes_max: usize) -> Option<Read> {
        match self {
            Messages::Maildir {
                files,
                next,
                advised,
            } => {
                while *advised < files.len() && *advised < *next + FILES_AHEAD_MAX {
                    if let Ok(f) = std::fs::File::open(&files[*advised].path) {
                        let _ = rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::WillNeed);
                    }
                    *advised += 1;
                }
                let m = std::mem::replace(
                    files.get_mut(*next)?,
                    maildir::MaildirMessage {
                        path: PathBuf::new(),
                        uid: None,
                        flags: mailbox_formats::Flags::default(),
                        keywords: Vec::new(),
                        mtime: 0,
                        size: 0,
                    },
                );
                *next += 1;
                if m.size > message_bytes_max as u64 {
                    return Some(Read::Skipped {
                        problem: format!(
                            "{}: {} bytes, above the limit of {message_bytes_max}",
                            m.path.display(),
                            m.size
                        ),
                        source_bytes: m.size,
                    });
                }
                Some(match std::fs::read(&m.path) {
                    Ok(bytes) => Read::Message {
                        message: ImportedMessage {
                            uid: m.uid,
                            flags: store_flags(m.flags),
                            keywords: m.keywords,
                            internal_date: m.mtime,
                            content: to_crlf(&bytes),
                        },
                        source_bytes: m.size,
                    },
                    Err(e) => Read::Skipped {
                        problem: format!("{}: {e}", m.path.display()),
                        source_bytes: m.size,
                    },
                })
            }
            Messages::Mbox {
                reader,
                file,
                first,
                at,
                uids,
            } => {
                let item = match first.take() {
                    Some(item) => item,
                    None => match reader.next_item() {
                        Ok(Some(item)) => item,
                        Ok(None) => return None,
                        Err(e) => {
                            let source_bytes = reader.offset() - *at;
                            *at = reader.offset();
                            // The rest of the file is not read: the reader is at an error.
                            let problem = format!("{}: {e}; the rest is skipped", file.display());
                            *self = Messages::Maildir {
                                files: Vec::new(),
                                next: 0,
                                advised: 0,
                            };
                            return Some(Read::Skipped {
                                problem,
                                source_bytes,
                            });
                        }
                    },
                };
                let source_bytes = reader.offset() - *at;
                *at = reader.offset();
                Some(match item {
                    MboxItem::TooLarge { offset, bytes } => Read::Skipped {
                        problem: format!(
                            "{}: the message at byte {offset}: {bytes} bytes, above the limit \
                             of {message_bytes_max}",
                            file.display()
                        ),
                        source_bytes,
                    },
                    MboxItem::Message(m) => Read::Message {
                        message: ImportedMessage {
                            uid: m.uid.filter(|_| *uids),
                            flags: store_flags(m.flags),
                            keywords: m.keywords,
                            internal_date: m.internal_date.unwrap_or_else(now_secs),
                            content: to_crlf(&m.content),
                        },
                        source_bytes,
                    },
                })
            }
        }
    }
}

/// What a batch holds: messages prepared for the store's import, or (INBOX with the user's
/// rules asked for) the messages as read, each to be delivered through the rules.
enum Batch {
    Import(ImportBatch),
    ThroughRules(Vec<ImportedMessage>),
}

impl Batch {
    fn is_empty(&self) -> bool {
        match self {
            Batch::Import(batch) => batch.is_empty(),
            Batch::ThroughRules(messages) => messages.is_empty(),
        }
    }
}

/// A batch prepared by the reader thread.
struct Prepared {
    batch: Batch,
    /// Each message's size in the store, in batch order.
    sizes: Vec<u64>,
    /// Messages the reader skipped, described.
    skipped: Vec<String>,
    source_bytes: u64,
}

/// Imports the maildir tree, mbox file or directory of mbox files at `source` into `user`'s
/// folders (created as needed). The user must exist: the caller checks.
pub fn import(
    store: &Store,
    user: &str,
    source: &Path,
    guards: &Guards<'_>,
    note: &mut dyn FnMut(Note),
) -> Result<Summary> {
    let started = Instant::now();
    let syncs = |c: store::IoCounters| c.data_syncs + c.journal_syncs;
    let syncs_before = syncs(store.io_counters());
    let (format, folders, not_mail) = scan_source(store, source)?;
    let mut r = Reporter {
        note,
        summary: Summary {
            format: Some(format),
            ..Summary::default()
        },
    };
    for problem in not_mail {
        r.problem(problem);
    }
    let total: u64 = folders.iter().map(SourceFolder::bytes).sum();
    let mut done = 0u64;
    let result = (|| -> Result<()> {
        for folder in folders {
            import_folder(store, user, folder, guards, &mut r, &mut done, total)?;
        }
        Ok(())
    })();
    r.summary.duration = started.elapsed();
    r.summary.syncs = syncs(store.io_counters()) - syncs_before;
    let s = &r.summary;
    tracing::info!(
        event = "import",
        user,
        source = %source.display(),
        format = format.name(),
        folders = s.folders,
        messages = s.messages,
        bytes = s.bytes,
        uids_kept = s.uids_kept,
        skipped = s.skipped,
        problems = s.problems,
        fdatasyncs = s.syncs,
        duration = %format!("{:.3}", s.duration.as_secs_f64()),
        result = if result.is_ok() { "ok" } else { "failed" }
    );
    result.map(|()| r.summary)
}

fn import_folder(
    store: &Store,
    user: &str,
    folder: SourceFolder,
    guards: &Guards<'_>,
    r: &mut Reporter<'_>,
    done: &mut u64,
    total: u64,
) -> Result<()> {
    let name = folder.name();
    let folder_bytes = folder.bytes();
    let config = store.config().clone();
    // The source's UIDVALIDITY and next UID, and the messages to read.
    let (uidvalidity, uidnext, messages, problems) = match folder {
        SourceFolder::Maildir(f) => (
            f.uidvalidity,
            f.uidnext,
            Messages::Maildir {
                files: f.messages,
                next: 0,
                advised: 0,
            },
            f.problems,
        ),
        SourceFolder::Mbox { file, .. } => {
            let opened = std::fs::File::open(&file);
            let mut reader = match opened {
                Ok(f) => Box::new(MboxReader::new(
                    std::io::BufReader::with_capacity(256 << 10, f),
                    Quoting::Mboxrd,
                    config.message_bytes_max,
                )),
                Err(e) => {
                    r.problem(format!("{}: {e}; folder {name} skipped", file.display()));
                    *done += folder_bytes;
                    return Ok(());
                }
            };
            // mboxrd unquoting is right for mboxrd and for mboxo files without `>>From `
            // lines (docs/migration.md); the first message tells the folder's UIDVALIDITY.
            let first = match reader.next_item() {
                Ok(first) => first,
                Err(e) => {
                    r.problem(format!("{}: {e}; folder {name} skipped", file.display()));
                    *done += folder_bytes;
                    return Ok(());
                }
            };
            let base = reader.base().cloned();
            let at = 0;
            (
                base.as_ref().map(|b| b.uidvalidity),
                base.as_ref().map(|b| b.uidnext),
                Messages::Mbox {
                    reader,
                    file,
                    first,
                    at,
                    uids: base.is_some(),
                },
                Vec::new(),
            )
        }
    };
    for p in problems {
        r.problem(format!("{name}: {p}"));
    }
    let target = match store.import_folder(user, &name, uidvalidity) {
        Ok(target) => target,
        Err(e) => {
            r.problem(format!("folder {name} skipped: {e}"));
            *done += folder_bytes;
            return Ok(());
        }
    };
    r.summary.folders += 1;
    if target.uidvalidity_kept {
        r.summary.uidvalidities_kept += 1;
    } else if let Some(v) = uidvalidity {
        r.problem(format!(
            "{name}: UIDVALIDITY {v} not kept (the folder has {}): UIDs are new",
            target.status.uidvalidity
        ));
    }
    let keep_uids = target.uidvalidity_kept;
    let through_rules = guards.rules
        && name == "INBOX"
        && guards
            .deposit
            .is_some_and(|d| d.rules().is_some_and(|r| r.active(user)));
    let folder_name = name.as_str();
    std::thread::scope(|scope| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Prepared>>(1);
        let reader = scope.spawn(move || {
            let target = (store, user, folder_name);
            read_batches(
                target,
                messages,
                keep_uids && !through_rules,
                through_rules,
                &config,
                &tx,
            );
        });
        let mut result = Ok(());
        for prepared in rx.iter() {
            if guards.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                result = Err(anyhow::anyhow!(
                    "cancelled after {} messages",
                    r.summary.messages
                ));
                break;
            }
            if let Err(e) = commit_batch(store, (user, &name), prepared, guards, r, done, total) {
                result = Err(e);
                break;
            }
        }
        // Dropping the receiver stops the reader at its next batch.
        drop(rx);
        reader
            .join()
            .map_err(|_| anyhow::anyhow!("the reader thread panicked"))?;
        result
    })?;
    if let Some(uidnext) = uidnext.filter(|_| keep_uids) {
        store
            .raise_uidnext(user, &name, uidnext)
            .with_context(|| format!("raising UIDNEXT of {name}"))?;
    }
    Ok(())
}

/// The reader thread: cuts the folder's messages into batches within the store's batch
/// limits, prepares each (`Store::prepare_import`) and sends it, until the messages end or
/// the receiver is gone.
fn read_batches(
    (store, user, folder): (&Store, &str, &str),
    mut messages: Messages,
    keep_uids: bool,
    through_rules: bool,
    config: &store::StoreConfig,
    tx: &std::sync::mpsc::SyncSender<Result<Prepared>>,
) {
    let max = config.message_bytes_max;
    let mut pending: Option<Read> = None;
    loop {
        let mut batch: Vec<ImportedMessage> = Vec::new();
        let mut skipped = Vec::new();
        let mut batch_bytes = 0usize;
        let mut source_bytes = 0u64;
        while let Some(read) = pending.take().or_else(|| messages.next(max)) {
            let (mut message, n) = match read {
                Read::Skipped {
                    problem,
                    source_bytes: n,
                } => {
                    skipped.push(problem);
                    source_bytes += n;
                    continue;
                }
                Read::Message {
                    message,
                    source_bytes: n,
                } => (message, n),
            };
            let len = message.content.len();
            if !batch.is_empty()
                && (batch.len() >= config.batch_messages_max
                    || batch_bytes + len > config.batch_bytes_max)
            {
                pending = Some(Read::Message {
                    message,
                    source_bytes: n,
                });
                break;
            }
            if !keep_uids {
                message.uid = None;
            }
            batch_bytes += len;
            source_bytes += n;
            batch.push(message);
        }
        if batch.is_empty() && skipped.is_empty() {
            return;
        }
        let sizes = batch.iter().map(|m| m.content.len() as u64).collect();
        let prepared = if through_rules {
            Ok(Prepared {
                batch: Batch::ThroughRules(batch),
                sizes,
                skipped,
                source_bytes,
            })
        } else {
            store
                .prepare_import(user, folder, batch)
                .map(|batch| Prepared {
                    batch: Batch::Import(batch),
                    sizes,
                    skipped,
                    source_bytes,
                })
                .map_err(anyhow::Error::from)
        };
        if tx.send(prepared).is_err() {
            return;
        }
    }
}

fn commit_batch(
    store: &Store,
    (user, name): (&str, &str),
    prepared: Result<Prepared>,
    guards: &Guards<'_>,
    r: &mut Reporter<'_>,
    done: &mut u64,
    total: u64,
) -> Result<()> {
    let prepared = prepared?;
    for p in prepared.skipped {
        r.summary.skipped += 1;
        r.problem(p);
    }
    let outcomes = if prepared.batch.is_empty() {
        Vec::new()
    } else {
        let shared = guards.deposit.map(|d| d.gate().shared());
        if guards.user_exists.is_some_and(|exists| !exists()) {
            bail!("the user was deleted during the import");
        }
        match (prepared.batch, guards.deposit, &shared) {
            (Batch::ThroughRules(messages), Some(deposit), Some(shared)) => {
                through_rules::deliver(deposit, shared, user, messages)
            }
            (Batch::Import(batch), Some(deposit), Some(shared)) => deposit
                .import(shared, batch)
                .with_context(|| format!("importing into {name}"))?,
            (Batch::Import(batch), _, _) => store
                .commit_import(batch)
                .with_context(|| format!("importing into {name}"))?,
            (Batch::ThroughRules(_), _, _) => bail!("the rules need the running server"),
        }
    };
    for (i, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Ok(o) => {
                r.summary.messages += 1;
                r.summary.bytes += prepared.sizes.get(i).copied().unwrap_or(0);
                r.summary.uids_kept += u64::from(o.uid_kept);
                for (keyword, why) in o.dropped_keywords {
                    r.problem(format!(
                        "{name}: UID {}: keyword {keyword:?} left off: {why}",
                        o.uid
                    ));
                }
            }
            Err(e) => {
                r.summary.skipped += 1;
                r.problem(format!("{name}: message {} of a batch skipped: {e}", i + 1));
            }
        }
    }
    *done += prepared.source_bytes;
    (r.note)(Note::Progress {
        done: (*done).min(total),
        total,
        messages: r.summary.messages,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::export::{maildir_levels, mbox_file};
    use super::*;

    #[test]
    fn flags_map_both_ways() {
        let f = mailbox_formats::Flags {
            seen: true,
            answered: false,
            flagged: true,
            deleted: false,
            draft: true,
        };
        assert_eq!(file_flags(store_flags(f)), f);
        assert_eq!(
            file_flags(store::Flags::EMPTY),
            mailbox_formats::Flags::default()
        );
    }

    /// A maildir with a uidlist, a subfolder, a keyword and a message over the size limit:
    /// imported with its UIDs, UIDVALIDITY and UIDNEXT, exported in both formats unchanged.
    #[test]
    fn maildir_round_trips_through_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let config = store::StoreConfig {
            message_bytes_max: 200,
            ..store::StoreConfig::default()
        };
        let (store, _) = Store::open(
            std::sync::Arc::new(disk::RealDisk),
            &dir.path().join("store"),
            config,
        )
        .unwrap();
        let src = dir.path().join("src");
        let writer = MaildirWriter::create(&src).unwrap();
        let seen = mailbox_formats::Flags {
            seen: true,
            ..Default::default()
        };
        let junk = vec!["$Junk".to_string()];
        let big = [b"Subject: big\n\n".as_slice(), &[b'x'; 300]].concat();
        let inbox: [(u32, &[u8], &[String]); 3] = [
            (3, b"Subject: a\n\nFrom me\n", &junk),
            (7, b"Subject: b\n\nbody b\n", &[]),
            (8, &big, &[]),
        ];
        let mut folder = writer.folder(&[], 12_345).unwrap();
        for (uid, content, keywords) in inbox {
            let m = OutMessage {
                uid,
                flags: seen,
                keywords,
                internal_date: 1_600_000_000 + i64::from(uid),
                content,
            };
            folder.write(&m).unwrap();
        }
        folder.finish(10).unwrap();
        let path = vec!["Work".to_string(), "Old".to_string()];
        let mut sub = writer.folder(&path, 777).unwrap();
        let m = OutMessage {
            uid: 1,
            flags: mailbox_formats::Flags::default(),
            keywords: &[],
            internal_date: 5,
            content: b"Subject: c\n\nc\n",
        };
        sub.write(&m).unwrap();
        sub.finish(2).unwrap();

        let mut problems = Vec::new();
        let summary = import(&store, "u@x.test", &src, &Guards::default(), &mut |n| {
            if let Note::Problem(p) = n {
                problems.push(p)
            }
        })
        .unwrap();
        assert_eq!(
            (summary.folders, summary.messages, summary.skipped),
            (2, 3, 1)
        );
        assert_eq!((summary.uids_kept, summary.uidvalidities_kept), (3, 2));
        // Per folder: its creation, one batch (volume and journal), at most one UIDNEXT record.
        assert!((4..=8).contains(&summary.syncs), "{summary}");
        assert!(
            problems[0].contains("above the limit of 200"),
            "{problems:?}"
        );
        let status = store.status("u@x.test", "INBOX").unwrap();
        assert_eq!((status.uidvalidity, status.uidnext), (12_345, 10));
        assert_eq!(store.uids("u@x.test", "Work/Old").unwrap(), vec![1]);

        let out = dir.path().join("out");
        let exported = export(
            &store,
            "u@x.test",
            &out,
            Format::Maildir,
            &Guards::default(),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(exported.messages, 3);
        let tree = maildir::scan_tree(&out).unwrap();
        let inbox_out = &tree[0];
        assert_eq!(
            (inbox_out.uidvalidity, inbox_out.uidnext),
            (Some(12_345), Some(10))
        );
        for (m, (uid, content, keywords)) in inbox_out.messages.iter().zip(&inbox[..2]) {
            assert_eq!(m.uid, Some(*uid));
            assert_eq!(std::fs::read(&m.path).unwrap(), *content);
            assert_eq!(m.keywords, *keywords);
            assert!(m.flags.seen);
            assert_eq!(m.mtime, 1_600_000_000 + i64::from(*uid));
        }
        // The parent the import created is exported too, empty.
        let paths: Vec<&Vec<String>> = tree.iter().map(|f| &f.path).collect();
        assert_eq!(paths, [&Vec::new(), &vec!["Work".to_string()], &path]);

        let out = dir.path().join("out-mbox");
        export(
            &store,
            "u@x.test",
            &out,
            Format::Mbox,
            &Guards::default(),
            &mut |_| {},
        )
        .unwrap();
        let file = std::fs::File::open(out.join("INBOX")).unwrap();
        let mut reader = MboxReader::new(std::io::BufReader::new(file), Quoting::Mboxrd, 1000);
        for (uid, content, keywords) in &inbox[..2] {
            let Some(MboxItem::Message(m)) = reader.next_item().unwrap() else {
                panic!("missing message")
            };
            assert_eq!((m.uid, m.content.as_slice()), (Some(*uid), *content));
            assert_eq!((m.keywords.as_slice(), m.flags), (*keywords, seen));
        }
        assert_eq!(reader.base().unwrap().uidvalidity, 12_345);
        assert!(out.join("Work.sbd").join("Old").is_file());
        // Into an existing, non-empty directory: refused.
        assert!(
            export(
                &store,
                "u@x.test",
                &out,
                Format::Mbox,
                &Guards::default(),
                &mut |_| {}
            )
            .is_err()
        );
    }

    #[test]
    fn export_paths() {
        let root = Path::new("/x");
        assert_eq!(mbox_file(root, "INBOX"), Path::new("/x/INBOX"));
        assert_eq!(mbox_file(root, "A/B/C"), Path::new("/x/A.sbd/B.sbd/C"));
        assert_eq!(mbox_file(root, "Entwürfe"), Path::new("/x/Entw&APw-rfe"));
        assert!(maildir_levels("inbox").is_empty());
        assert_eq!(maildir_levels("A/B"), vec!["A", "B"]);
    }
}
