//! `mailstow queue stats|fsck|list|show|retry|remove`.
//!
//! `stats`, `list`, `show`, `retry` and `remove` go to a running server through its admin
//! socket (the server owns the queue while it runs); with no server there, they open the
//! queue directly. Both paths print the text `server::admin` formats. `fsck` needs the queue
//! to itself: it refuses while the server runs.

use std::io::Write as _;
use std::sync::Arc;

use admin::Request;
use anyhow::{Result, bail};
use clap::Subcommand;

use crate::config::Config;
use crate::paths::Paths;
use crate::progress::with_progress;

#[derive(Subcommand)]
pub(crate) enum QueueCommand {
    /// Segments, pending, deferred and bounced messages, bytes in use.
    Stats,
    /// Check segment headers, slot chains and every record's checksum (offline).
    Fsck {
        /// Mark unreadable records done so delivery skips them; rewrites nothing else.
        #[arg(long)]
        repair: bool,
    },
    /// Every queued message, one line each: id, class, arrival, size, attempts, sender,
    /// recipients with their status; then a count.
    List,
    /// One message: its envelope as `key: value` lines, a blank line, its content.
    Show { id: queue::MessageId },
    /// Make a deferred message due now (until a restart, when its stored retry time applies).
    Retry { id: queue::MessageId },
    /// Remove a message without delivering or bouncing it (durable when it returns).
    Remove { id: queue::MessageId },
}

pub(crate) fn run(command: QueueCommand, paths: &Paths, config: &Config) -> Result<()> {
    let dir = paths.queue();
    if !dir.is_dir() {
        bail!("no mail queue at {} (wrong --data-dir?)", dir.display());
    }
    let disk: Arc<dyn disk::Disk> = Arc::new(disk::RealDisk);
    match command {
        QueueCommand::Stats => operator(&Request::QueueStats, disk, paths, config)?,
        QueueCommand::Fsck { repair } => {
            let _lock = crate::store_cmd::exclusive(paths, "queue fsck")?;
            let report = with_progress("fsck", |progress| {
                queue::check(disk, &dir, repair, progress)
            })?;
            out!("{report}");
            if !report.is_clean() && !repair {
                bail!("the queue has problems; run `mailstow queue fsck --repair`");
            }
        }
        QueueCommand::List => operator(&Request::List, disk, paths, config)?,
        QueueCommand::Show { id } => operator(&Request::Show(id), disk, paths, config)?,
        QueueCommand::Retry { id } => operator(&Request::Retry(id), disk, paths, config)?,
        QueueCommand::Remove { id } => operator(&Request::Remove(id), disk, paths, config)?,
    }
    Ok(())
}

/// An operator command: through the running server's admin socket if one answers, else on
/// the queue opened here (and closed again before printing).
fn operator(
    request: &Request,
    disk: Arc<dyn disk::Disk>,
    paths: &Paths,
    config: &Config,
) -> Result<()> {
    let output = match admin::request(&paths.data_dir, request) {
        Some(Ok(output)) => output,
        Some(Err(message)) => bail!("{message}"),
        None => {
            let _lock = crate::store_cmd::exclusive(paths, "this command")?;
            let (queue, _) = queue::Queue::open(disk, &paths.queue(), config.queue_config())?;
            let result = admin::execute(&queue, request);
            queue.close()?;
            result?
        }
    };
    std::io::stdout().write_all(&output)?;
    Ok(())
}
