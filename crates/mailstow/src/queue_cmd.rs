//! `mailstow queue stats|fsck`.

use std::sync::Arc;

use anyhow::{Result, bail};
use clap::Subcommand;
use indicatif::{ProgressBar, ProgressStyle};

use crate::Paths;
use crate::config::Config;

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

/// A progress bar on stderr; invisible when stderr is not a terminal.
pub(crate) fn progress_bar(label: &str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    if let Ok(style) =
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} {elapsed_precise} eta {eta}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(label.to_string());
    bar
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
            let bar = progress_bar("fsck");
            let report = queue::check(disk, &dir, repair, &mut |done, total| {
                bar.set_length(total);
                bar.set_position(done);
            })?;
            bar.finish_and_clear();
            println!("{report}");
            if !report.is_clean() && !repair {
                bail!("the queue has problems; run `mailstow queue fsck --repair`");
            }
        }
    }
    Ok(())
}
