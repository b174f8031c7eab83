//! `mailstow store stats|fsck|defrag`.
//!
//! `stats` and `fsck` (without `--repair`) go to a running server through its admin socket,
//! which owns the store while it runs; with no server they open the store here. `fsck
//! --repair` and `defrag` need the store to themselves and refuse while a server runs.

use std::sync::Arc;

use anyhow::{Result, bail};
use clap::Subcommand;

use crate::config::Config;
use crate::paths::Paths;
use crate::progress::with_progress;

#[derive(Subcommand)]
pub(crate) enum StoreCommand {
    /// Per folder: messages, bytes, fragments; and the volume's used and free space.
    Stats,
    /// Check checksums, the index against the data, and free-space accounting.
    Fsck {
        /// Repair what can be repaired (corrupt messages are expunged and listed).
        #[arg(long)]
        repair: bool,
    },
    /// Apply the defragmentation rule at every fragment boundary of every folder.
    Defrag,
}

/// Opens the store; with `salvage`, a damaged journal or snapshot is cut back to its valid part
/// (and reported) instead of refusing to open.
pub(crate) fn open(paths: &Paths, config: &Config, salvage: bool) -> Result<Arc<store::Store>> {
    let dir = paths.store();
    if !dir.is_dir() {
        bail!("no mailbox store at {} (wrong --data-dir?)", dir.display());
    }
    let mut store_config = config.store_config();
    store_config.salvage = salvage;
    let (store, report) = store::Store::open(Arc::new(disk::RealDisk), &dir, store_config)
        .map_err(|e| {
            if e.is_out_of_space() {
                // Nothing is damaged: the hint is about room, not repair.
                anyhow::Error::from(e).context(format!(
                    "cannot open the store: the file system holding {} is full; free at \
                     least 1 MiB (opening needs a journal's first 260 KiB) and try again",
                    dir.display()
                ))
            } else if salvage {
                anyhow::Error::from(e)
            } else {
                anyhow::Error::from(e).context("cannot open the store; `mailstow store fsck --repair` salvages what is readable")
            }
        })?;
    if !report.problems.is_empty() {
        eprintln!("{report}");
    }
    Ok(store)
}

pub(crate) fn run(command: StoreCommand, paths: &Paths, config: &Config) -> Result<()> {
    let request = match command {
        StoreCommand::Stats => Some(admin::Request::StoreStats),
        StoreCommand::Fsck { repair: false } => Some(admin::Request::StoreCheck),
        _ => None,
    };
    if let Some(request) = &request
        && let Some(answer) = admin::request(&paths.data_dir, request)
    {
        let output = answer.map_err(|message| anyhow::anyhow!("{message}"))?;
        let text = String::from_utf8_lossy(&output);
        out!("{}", text.trim_end());
        if *request == admin::Request::StoreCheck && !text.trim_end().ends_with(": clean") {
            bail!("the store has problems; stop the server and run `mailstow store fsck --repair`");
        }
        return Ok(());
    }
    let salvage = matches!(command, StoreCommand::Fsck { repair: true });
    let what = match command {
        StoreCommand::Fsck { repair: true } => "store fsck --repair",
        StoreCommand::Defrag => "store defrag",
        _ => "this command",
    };
    let _lock = exclusive(paths, what)?;
    let store = open(paths, config, salvage)?;
    match command {
        StoreCommand::Stats => {
            out!(
                "{}",
                admin::format::format_store_stats(&store.stats()).trim_end()
            )
        }
        StoreCommand::Fsck { repair } => {
            let report = with_progress("fsck", |progress| store.fsck(repair, progress))?;
            out!("{report}");
            if !report.is_clean() && !repair {
                bail!("the store has problems; run `mailstow store fsck --repair`");
            }
        }
        StoreCommand::Defrag => {
            let report = with_progress("defrag", |progress| store.defrag(progress))?;
            out!("{report}");
        }
    }
    Ok(())
}

/// The data directory's lock, for a command that opens the engines itself; while a server
/// holds it, says which command must wait for the server to stop.
pub(crate) fn exclusive(paths: &Paths, what: &str) -> Result<Option<server::DataDirLock>> {
    server::DataDirLock::acquire(&paths.data_dir).map_err(|e| {
        anyhow::anyhow!(
            "{what} needs the engines to itself and a server holds them; stop it first ({e:#})"
        )
    })
}
