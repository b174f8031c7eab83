//! `mailstow store stats|fsck|defrag`.

use std::sync::Arc;

use anyhow::{Result, bail};
use clap::Subcommand;

use crate::Paths;
use crate::config::Config;
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
fn open(paths: &Paths, config: &Config, salvage: bool) -> Result<store::Store> {
    let dir = paths.store();
    if !dir.is_dir() {
        bail!("no mailbox store at {} (wrong --data-dir?)", dir.display());
    }
    let mut store_config = config.store_config();
    store_config.salvage = salvage;
    let (store, report) = store::Store::open(Arc::new(disk::RealDisk), &dir, store_config)
        .map_err(|e| {
            if salvage {
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
    let salvage = matches!(command, StoreCommand::Fsck { repair: true });
    let _lock = server::DataDirLock::acquire(&paths.data_dir)?;
    let store = open(paths, config, salvage)?;
    match command {
        StoreCommand::Stats => print_stats(&store)?,
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

fn print_stats(store: &store::Store) -> Result<()> {
    let stats = store.stats();
    out!(
        "{:<32} {:<24} {:>10} {:>14} {:>10}",
        "user",
        "folder",
        "messages",
        "bytes",
        "fragments"
    );
    for folder in &stats.folders {
        out!(
            "{:<32} {:<24} {:>10} {:>14} {:>10}",
            folder.user,
            folder.folder,
            folder.messages,
            folder.bytes,
            folder.fragments
        );
    }
    out!(
        "volume: {} bytes, used {}, free {} in {} extents, reserved {}",
        stats.volume_bytes,
        stats.used_bytes,
        stats.free_bytes,
        stats.free_extents,
        stats.reserved_bytes
    );
    Ok(())
}
