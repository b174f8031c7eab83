//! `mailstow bench ...` (run as `mailstow-bench bench ...`): the storage benchmarks (see the
//! `bench` crate). Each prints `RESULT` lines on stdout and a header naming the machine and
//! the commit on stderr.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};

#[derive(Args)]
pub(crate) struct Scratch {
    /// Scratch directory on the disk under test (emptied per run).
    #[arg(long, default_value = "./mailstow-bench")]
    dir: PathBuf,
    /// Repetitions per figure (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

#[derive(Subcommand)]
pub(crate) enum BenchCommand {
    /// Durable enqueues/s, latency, fdatasyncs per message; with two baselines.
    Queue {
        #[command(flatten)]
        scratch: Scratch,
        #[arg(long, value_delimiter = ',', default_value = "1,8,32,128")]
        producers: Vec<usize>,
        #[arg(long, default_value_t = 8192)]
        message_bytes: usize,
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        #[arg(long, default_value_t = 64 << 20)]
        segment_bytes: u64,
        /// Deliver while ingesting (a consumer finishes or unlinks what was queued).
        #[arg(long)]
        deliver: bool,
    },
    /// The machine's group-commit ceiling: `queue` without the queue (no index, checksums or
    /// segments), with one or more commit rounds in flight.
    CommitCeiling {
        #[arg(long, default_value = "./mailstow-bench")]
        dir: PathBuf,
        #[arg(long, value_delimiter = ',', default_value = "32")]
        producers: Vec<usize>,
        #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
        in_flight: Vec<usize>,
        #[arg(long, default_value_t = 8192)]
        message_bytes: usize,
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
    },
    /// What replication costs the durable commit of APPEND and delivery: store appends on the
    /// plain disk against a disk mirrored to a replica over loopback (docs/replication.md),
    /// alternating in one run; messages/s and CPU per message, and their ratios.
    Replication {
        #[command(flatten)]
        scratch: Scratch,
        #[arg(long, value_delimiter = ',', default_value = "1,32")]
        appenders: Vec<usize>,
        #[arg(long, default_value_t = 8192)]
        message_bytes: usize,
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// The replica's copy on another file system (default: the owner's disk).
        #[arg(long)]
        replica_dir: Option<PathBuf>,
    },
    /// SMTP load against any server: sessions sending back to back, DATA latency p50/p99.
    Smtp {
        /// The server, e.g. 127.0.0.1:2525.
        #[arg(long)]
        address: std::net::SocketAddr,
        #[arg(long, value_delimiter = ',', default_value = "8,32")]
        connections: Vec<usize>,
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        #[arg(long, default_value_t = 8192)]
        message_bytes: usize,
        #[arg(long, default_value = "bench@example.org")]
        sender: String,
        /// Recipients, used round robin (comma-separated).
        #[arg(long, value_delimiter = ',', required = true)]
        recipients: Vec<String>,
        /// Printed in the RESULT lines.
        #[arg(long, default_value = "server")]
        label: String,
        /// DKIM-sign every message: `DOMAIN:SELECTOR:ALGORITHM:KEYFILE` (PKCS#8 PEM).
        #[arg(long, value_name = "DOMAIN:SELECTOR:ALGORITHM:KEYFILE")]
        dkim: Option<String>,
    },
    /// Reopen a queue holding many pending messages, warm and cold.
    Recovery {
        #[command(flatten)]
        scratch: Scratch,
        #[arg(long, default_value_t = 100_000)]
        messages: u64,
        #[arg(long, default_value_t = 8192)]
        message_bytes: usize,
        #[arg(long, default_value_t = 64 << 20)]
        segment_bytes: u64,
    },
    /// Thesis (a): folder open time for folders of 5 to 500 MB.
    StoreOpen {
        #[command(flatten)]
        scratch: Scratch,
        #[arg(long, value_delimiter = ',', default_value = "5,50,125,250,500")]
        sizes_mb: Vec<u64>,
    },
    /// Thesis (b): delete one message at 0 to 500 MB from the end of a folder.
    StoreDelete {
        #[command(flatten)]
        scratch: Scratch,
        #[arg(long, default_value_t = 500)]
        folder_mb: u64,
        #[arg(long, value_delimiter = ',', default_value = "0,100,200,300,400,499")]
        distances_mb: Vec<u64>,
    },
    /// Thesis (c): fragments with and without defragment-on-delete.
    StoreFrag {
        #[command(flatten)]
        scratch: Scratch,
        #[arg(long, default_value_t = 20)]
        folders: usize,
        #[arg(long, default_value_t = 80_000)]
        messages_per_folder: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Per-expunge defrag move budget in bytes (default: the store's).
        #[arg(long)]
        move_bytes_max: Option<u64>,
    },
}

fn header(dir: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    eprintln!("machine: {}", bench::sys::machine(dir));
    eprintln!("commit: {}", bench::sys::git_commit());
    Ok(())
}

pub(crate) fn run(command: BenchCommand) -> Result<()> {
    match command {
        BenchCommand::Queue {
            scratch,
            producers,
            message_bytes,
            seconds,
            segment_bytes,
            deliver,
        } => {
            header(&scratch.dir)?;
            bench::queue_ingest::run(&bench::queue_ingest::IngestOptions {
                dir: scratch.dir,
                producers,
                message_bytes,
                seconds,
                segment_bytes,
                runs: scratch.runs,
                deliver,
            })
        }
        BenchCommand::Replication {
            scratch,
            appenders,
            message_bytes,
            seconds,
            replica_dir,
        } => {
            header(&scratch.dir)?;
            bench::replication::run(&bench::replication::ReplicationOptions {
                dir: scratch.dir,
                replica_dir,
                appenders,
                message_bytes,
                seconds,
                runs: scratch.runs,
            })
        }
        BenchCommand::CommitCeiling {
            dir,
            producers,
            in_flight,
            message_bytes,
            seconds,
        } => {
            header(&dir)?;
            bench::commit_ceiling::run(&bench::commit_ceiling::CeilingOptions {
                dir,
                producers,
                in_flight,
                message_bytes,
                seconds,
            })
        }
        BenchCommand::Smtp {
            address,
            connections,
            seconds,
            message_bytes,
            sender,
            recipients,
            label,
            dkim,
        } => {
            let dkim = match dkim {
                Some(spec) => {
                    let mut parts = spec.splitn(4, ':');
                    let (Some(domain), Some(selector), Some(algorithm), Some(file)) =
                        (parts.next(), parts.next(), parts.next(), parts.next())
                    else {
                        anyhow::bail!("--dkim wants DOMAIN:SELECTOR:ALGORITHM:KEYFILE");
                    };
                    Some(bench::smtp_load::DkimKey {
                        domain: domain.to_string(),
                        selector: selector.to_string(),
                        algorithm: algorithm.to_string(),
                        private_key_pem: std::fs::read_to_string(file)
                            .with_context(|| format!("reading {file}"))?,
                    })
                }
                None => None,
            };
            bench::smtp_load::run(&bench::smtp_load::SmtpLoadOptions {
                address,
                connections,
                seconds,
                message_bytes,
                sender,
                recipients,
                label,
                dkim,
            })
        }
        BenchCommand::Recovery {
            scratch,
            messages,
            message_bytes,
            segment_bytes,
        } => {
            header(&scratch.dir)?;
            bench::queue_recovery::run(&bench::queue_recovery::RecoveryOptions {
                dir: scratch.dir,
                messages,
                message_bytes,
                segment_bytes,
                runs: scratch.runs,
            })
        }
        BenchCommand::StoreOpen { scratch, sizes_mb } => {
            header(&scratch.dir)?;
            bench::store_open::run(&bench::store_open::OpenOptions {
                dir: scratch.dir,
                sizes_mb,
                runs: scratch.runs,
            })
        }
        BenchCommand::StoreDelete {
            scratch,
            folder_mb,
            distances_mb,
        } => {
            header(&scratch.dir)?;
            bench::store_delete::run(&bench::store_delete::DeleteOptions {
                dir: scratch.dir,
                folder_mb,
                distances_mb,
                runs: scratch.runs,
            })
        }
        BenchCommand::StoreFrag {
            scratch,
            folders,
            messages_per_folder,
            seed,
            move_bytes_max,
        } => {
            header(&scratch.dir)?;
            bench::store_frag::run(&bench::store_frag::FragOptions {
                dir: scratch.dir,
                folders,
                messages_per_folder,
                seed,
                move_bytes_max,
            })
        }
    }
}
