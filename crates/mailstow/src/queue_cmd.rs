//! `mailstow queue stats|fsck`.

use std::sync::Arc;

use anyhow::{Result, bail};
use clap::Subcommand;

use crate::Paths;
use crate::config::Config;
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
}

pub(crate) fn run(command: QueueCommand, paths: &Paths, config: &Config) -> Result<()> {
    let dir = paths.queue();
    if !dir.is_dir() {
        bail!("no mail queue at {} (wrong --data-dir?)", dir.display());
    }
    let disk: Arc<dyn disk::Disk> = Arc::new(disk::RealDisk);
    match command {
        QueueCommand::Stats => {
            let (queue, report) = queue::Queue::open(disk, &dir, config.queue_config())?;
            let s = queue.stats();
            println!(
                "segments: {} main, {} deferred, {} free",
                s.main_segments, s.deferred_segments, s.free_segments
            );
            println!(
                "messages: {} pending, {} deferred, {} bounces, {} quarantined",
                s.pending_messages, s.deferred_messages, s.bounces, s.quarantined
            );
            println!("bytes in use: {}", s.bytes_used);
            println!(
                "recovered in {:.1} ms",
                report.elapsed.as_secs_f64() * 1000.0
            );
            queue.close()?;
        }
        QueueCommand::Fsck { repair } => {
            let report = with_progress("fsck", |progress| {
                queue::check(disk, &dir, repair, progress)
            })?;
            println!("{report}");
            if !report.is_clean() && !repair {
                bail!("the queue has problems; run `mailstow queue fsck --repair`");
            }
        }
    }
    Ok(())
}
