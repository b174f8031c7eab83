//! `mailstow backup DEST`, `mailstow backup verify DEST`, `mailstow restore SRC`
//! (docs/operations.md, Backups).
//!
//! A backup goes to a running server's admin socket (the server owns the engines; its
//! capture point pauses its own delivery rounds) and streams its progress back; with no
//! server, the CLI takes the data directory's lock and runs the same `admin::backup`.
//! `verify` reads only the backup. `restore` needs no server: it writes into an empty data
//! directory, after verifying the whole backup. Each prints what it does as lines on stderr
//! and one summary line on stdout.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use admin::backup::{self, Note};
use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};

use crate::config::Config;
use crate::paths::Paths;

/// Progress lines on stderr at most this often (steps and problems always).
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct BackupArgs {
    #[command(subcommand)]
    command: Option<BackupCommand>,
    /// Where the backup goes (made if missing); later runs into it copy only what changed.
    #[arg(required = true, value_name = "DEST")]
    dest: Option<PathBuf>,
}

#[derive(Subcommand)]
enum BackupCommand {
    /// Check a backup without restoring it: every file present, whole and readable.
    Verify {
        #[arg(value_name = "DEST")]
        dest: PathBuf,
    },
}

impl BackupArgs {
    /// `backup verify` reads the backup alone: it needs no data directory.
    pub(crate) fn is_verify(&self) -> bool {
        matches!(self.command, Some(BackupCommand::Verify { .. }))
    }
}

/// Prints notes as lines on stderr: `backup: <step>`, progress at most every second,
/// problems as warnings.
struct Reporter {
    verb: &'static str,
    last: Option<Instant>,
}

impl Reporter {
    fn new(verb: &'static str) -> Reporter {
        Reporter { verb, last: None }
    }

    fn note(&mut self, note: Note) {
        match note {
            Note::Step(text) => eprintln!("{}: {text}", self.verb),
            Note::Problem(text) => eprintln!("mailstow: warning: {text}"),
            Note::Progress {
                done,
                total,
                messages,
            } => {
                let due = self.last.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY);
                if due || done == total {
                    self.last = Some(Instant::now());
                    eprintln!("{}: {done}/{total} bytes, {messages} messages", self.verb);
                }
            }
        }
    }
}

pub(crate) fn backup(
    args: BackupArgs,
    paths: &Paths,
    config: &Config,
    config_file: Option<&Path>,
) -> Result<()> {
    match (args.command, args.dest) {
        (Some(BackupCommand::Verify { dest }), _) => verify(&dest),
        (None, Some(dest)) => take(&dest, paths, config, config_file),
        (None, None) => bail!("give the directory to back up into: mailstow backup DEST"),
    }
}

/// An absolute path on one line without tabs (the admin socket's request is one line).
fn request_path(path: &Path) -> Result<PathBuf> {
    let path = std::path::absolute(path).with_context(|| format!("{}", path.display()))?;
    if path.to_str().is_none_or(|p| p.contains(['\n', '\r', '\t'])) {
        bail!(
            "{}: the path must be UTF-8 on one line, without tabs",
            path.display()
        );
    }
    Ok(path)
}

/// The files a restore needs beside the engines: the configuration file, and the TLS
/// certificate and key (configured, or the self-signed pair the server made, if it did).
fn whole_files(
    paths: &Paths,
    config: &Config,
    config_file: Option<&Path>,
) -> Result<Vec<(String, PathBuf)>> {
    let mut files = Vec::new();
    if let Some(file) = config_file {
        files.push(("config".to_string(), request_path(file)?));
    }
    match (&config.server.tls_cert, &config.server.tls_key) {
        (Some(cert), Some(key)) => {
            files.push(("tls_cert".to_string(), request_path(cert)?));
            files.push(("tls_key".to_string(), request_path(key)?));
        }
        _ => {
            let tls = paths.data_dir.join("tls");
            for (name, file) in [
                ("tls_cert", "cert.pem"),
                ("tls_key", "key.pem"),
                ("tls_hostname", "hostname"),
            ] {
                let path = tls.join(file);
                if path.exists() {
                    files.push((name.to_string(), request_path(&path)?));
                }
            }
        }
    }
    // The ACME account, certificate and key (docs/certificates.md): restored, the server
    // serves the certificate at once and renews with the same account.
    let acme = paths.data_dir.join("acme");
    for (name, file) in [
        ("tls_acme_account", "account.json"),
        ("tls_acme_key", "key.pem"),
        ("tls_acme_cert", "cert.pem"),
        ("tls_acme_state", "state.json"),
    ] {
        let path = acme.join(file);
        if path.exists() {
            files.push((name.to_string(), request_path(&path)?));
        }
    }
    Ok(files)
}

fn take(dest: &Path, paths: &Paths, config: &Config, config_file: Option<&Path>) -> Result<()> {
    let dest = request_path(dest)?;
    let files = whole_files(paths, config, config_file)?;
    let mut reporter = Reporter::new("backup");
    let request = admin::Request::Backup {
        dest: dest.clone(),
        files: files.clone(),
    };
    let online = admin::request_streaming(&paths.data_dir, &request, &mut |line| {
        if let Some(note) = Note::parse(line) {
            reporter.note(note);
        }
    });
    let summary = match online {
        Some(answer) => answer.map_err(|message| anyhow::anyhow!("{message}"))?,
        None => offline(paths, config, &dest, files, &mut |n| reporter.note(n))?,
    };
    out!("backup: {summary}");
    Ok(())
}

/// The backup done here, on the engines opened under the data directory's lock.
fn offline(
    paths: &Paths,
    config: &Config,
    dest: &Path,
    files: Vec<(String, PathBuf)>,
    note: &mut dyn FnMut(Note),
) -> Result<String> {
    let _lock = crate::store_cmd::exclusive(paths, "backup")?;
    let disk: Arc<dyn disk::Disk> = Arc::new(disk::RealDisk);
    let (queue, _) = queue::Queue::open(disk, &paths.queue(), config.queue_config())
        .context("opening the queue")?;
    let store = crate::store_cmd::open(paths, config, false)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let location = paths.directory_location()?;
    let directory = runtime.block_on(directory::Directory::open_at(
        &location,
        directory::Options::default(),
    ))?;
    let copy = |path: &Path| -> Result<bool> { Ok(runtime.block_on(directory.copy_into(path))?) };
    let sources = backup::Sources {
        data_dir: &paths.data_dir,
        queue: &queue,
        store: &store,
        running: None,
        directory: &copy,
        files,
        cancel: None,
    };
    let summary = backup::take(&sources, dest, note)?;
    runtime.block_on(directory.close());
    queue.close()?;
    Ok(summary.to_string())
}

fn verify(dest: &Path) -> Result<()> {
    let mut reporter = Reporter::new("verify");
    let report = backup::verify(dest, &mut |n| reporter.note(n))?;
    out!("verify: {report}");
    if !report.is_clean() {
        bail!(
            "the backup at {} has {} problems (listed above); do not restore from it",
            dest.display(),
            report.problems.len()
        );
    }
    Ok(())
}

pub(crate) fn restore(src: &Path, paths: &Paths, config: &Config) -> Result<()> {
    backup::check_empty(&paths.data_dir)?;
    let mut reporter = Reporter::new("restore");
    let manifest = backup::Manifest::load(src)?
        .with_context(|| format!("no backup at {} (no {})", src.display(), backup::MANIFEST))?;
    reporter.note(Note::Step(format!(
        "verifying the backup (run {}) before writing anything",
        manifest.run
    )));
    let report = backup::verify(src, &mut |n| reporter.note(n))?;
    if !report.is_clean() {
        bail!(
            "the backup at {} has {} problems (listed above); nothing was restored",
            src.display(),
            report.problems.len()
        );
    }
    if paths.directory_url.is_some() {
        eprintln!(
            "mailstow: warning: [directory] url names a PostgreSQL directory: restore it with \
             pg_restore; a directory copy in the backup goes to {}",
            paths.directory().display()
        );
    }
    let disk: Arc<dyn disk::Disk> = Arc::new(disk::RealDisk);
    for dir in [paths.queue(), paths.store()] {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let _lock = server::DataDirLock::acquire(&paths.data_dir)?;
    let (queue, _) = queue::Queue::open(disk.clone(), &paths.queue(), config.queue_config())
        .context("creating the queue")?;
    let (store, _) = store::Store::open(disk, &paths.store(), config.store_config())
        .context("creating the store")?;
    let summary = backup::restore(src, &manifest, &paths.data_dir, &queue, &store, &mut |n| {
        reporter.note(n)
    })?;
    queue.close()?;
    drop(store);
    out!("restore: {summary}");
    Ok(())
}
