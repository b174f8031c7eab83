//! `mailstow sim`: the storage simulator (docs/simulator.md).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context as _;
use clap::Subcommand;

#[derive(Subcommand)]
pub(crate) enum SimCommand {
    /// Runs a scenario (docs/simulator.md 6) and writes results.json and results.csv (and
    /// with --log, requests.csv) into DIR; prints one line per workload.
    Run {
        scenario: PathBuf,
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Overrides the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Overrides the scenario's replications (confidence intervals need at least 2).
        #[arg(long)]
        replications: Option<u32>,
        /// Keeps every request of the first replication in requests.csv.
        #[arg(long)]
        log: bool,
        /// Prints what would run, runs nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Events per second of the simulation core on one core: a closed queueing network of
    /// the shape the storage models have. Last line: `events_per_second=<n>`.
    Speed {
        /// Events to run.
        #[arg(long, default_value_t = 10_000_000)]
        events: u64,
        /// Stations (components) in the network.
        #[arg(long, default_value_t = 64)]
        stations: u32,
        /// Requests circulating among them.
        #[arg(long, default_value_t = 256)]
        jobs: u32,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

pub(crate) fn run(command: SimCommand) -> anyhow::Result<()> {
    match command {
        SimCommand::Run {
            scenario,
            out,
            seed,
            replications,
            log,
            dry_run,
        } => {
            let text = std::fs::read_to_string(&scenario)
                .with_context(|| format!("reading {}", scenario.display()))?;
            let mut s = sim_run::Scenario::parse(&text)
                .with_context(|| format!("{}", scenario.display()))?;
            if let Some(seed) = seed {
                s.seed = seed;
            }
            if let Some(r) = replications {
                anyhow::ensure!(
                    (1..=sim_run::REPLICATIONS_MAX).contains(&r),
                    "--replications must be 1..={}",
                    sim_run::REPLICATIONS_MAX
                );
                s.replications = r;
            }
            println!(
                "scenario {}: {} workload(s), {} replication(s), seed {}",
                scenario.display(),
                s.workloads.len(),
                s.replications,
                s.seed
            );
            for w in &s.workloads {
                println!(
                    "  {}: {:?} {:?} {:?}, {} requests of {} bytes, queue depth {}",
                    w.name,
                    w.kind,
                    w.op,
                    w.pattern,
                    w.bytes / w.record_bytes,
                    w.record_bytes,
                    w.queue_depth
                );
            }
            if dry_run {
                return Ok(());
            }
            let started = Instant::now();
            let (results, logs) = crate::progress::with_progress("sim run", |progress| {
                sim_run::run(&s, log, progress)
            })?;
            sim_run::write_outputs(&out, &results, &logs)
                .with_context(|| format!("writing {}", out.display()))?;
            for r in &results {
                println!(
                    "workload={} mb_per_s={:.2} ci95={:.2} iops={:.1} latency_p99_us={:.1} bottleneck=\"{}\"",
                    r.name,
                    r.mb_per_s.mean,
                    r.mb_per_s.ci95,
                    r.iops.mean,
                    r.latency_p99_us.mean,
                    r.bottleneck
                );
            }
            println!(
                "results={} wall_seconds={:.3}",
                out.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
        SimCommand::Speed {
            events,
            stations,
            jobs,
            seed,
        } => {
            anyhow::ensure!(events > 0, "--events must be at least 1");
            anyhow::ensure!(
                stations > 0 && jobs > 0,
                "--stations and --jobs must be at least 1"
            );
            let started = Instant::now();
            let report = des::speed(events, stations, jobs, seed);
            let wall = started.elapsed().as_secs_f64();
            println!("events={}", report.events);
            println!("stations={stations} jobs={jobs} seed={seed}");
            println!("virtual_seconds={:.6}", report.virtual_ns as f64 / 1e9);
            println!("mean_utilisation={:.4}", report.mean_utilisation);
            println!("wall_seconds={wall:.3}");
            println!(
                "events_per_second={:.0}",
                report.events as f64 / wall.max(1e-9)
            );
            Ok(())
        }
    }
}
