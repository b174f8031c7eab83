//! `mailstow sim`: the storage simulator (docs/simulator.md).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use clap::Subcommand;

#[derive(Subcommand)]
pub(crate) enum SimCommand {
    /// Runs a scenario (docs/simulator.md 4) and writes results.json, results.csv and
    /// results.svg (with --log, requests.csv too) into DIR; prints one line per workload.
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
    /// Calibrates the simulator on this machine, measures real buffered reads and writes,
    /// simulates the same, and prints each cell's error. Last lines:
    /// `median_error_sequential=<fraction>` and `median_error_random=<fraction>`.
    ///
    /// Run by the separate `mailstow-bench` binary (`mailstow sim validate --help` lists
    /// its options: --quick, --json, --dir DIR).
    #[command(disable_help_flag = true)]
    Validate {
        /// Passed unchanged to `mailstow-bench sim validate`.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<std::ffi::OsString>,
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
        SimCommand::Validate { args } => {
            Err(crate::bench_binary::exec(&["sim", "validate"], &args))
        }
        SimCommand::Run {
            scenario,
            out,
            seed,
            replications,
            log,
            dry_run,
        } => {
            let mut s =
                load_scenario(&scenario).with_context(|| format!("{}", scenario.display()))?;
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
            out!(
                "scenario {}: {} workload(s), {} replication(s), seed {}",
                scenario.display(),
                s.workloads.len(),
                s.replications,
                s.seed
            );
            for w in &s.workloads {
                if let (Some(path), Some(format)) = (&w.trace, w.format) {
                    // The dry-run summary of a trace: what it holds, before anything runs.
                    let records =
                        sim_run::trace::read(path, format, sim_run::REQUESTS_PER_RUN_MAX)?;
                    let t = sim_run::trace::summarise(&records);
                    out!(
                        "  {}: trace {} ({format:?}): {} requests ({} reads, {} writes), {} bytes, span {}, up to byte {}, timing {:?}",
                        w.name,
                        path.display(),
                        t.records,
                        t.reads,
                        t.writes,
                        t.bytes,
                        t.span_seconds
                            .map_or("untimed".to_string(), |s| format!("{s:.3} s")),
                        t.max_end_bytes,
                        w.timing
                    );
                    continue;
                }
                out!(
                    "  {}: {:?} {:?} {:?}, {} requests of {} bytes, queue depth {}",
                    w.name,
                    w.kind,
                    w.op,
                    w.pattern,
                    w.bytes / w.record_bytes.max(1),
                    w.record_bytes,
                    w.queue_depth
                );
            }
            if let Some(sweep) = &s.sweep {
                out!("  sweep: {} over {:?}", sweep.parameter, sweep.values);
            }
            if dry_run {
                return Ok(());
            }
            let started = Instant::now();
            if let Some(sweep) = s.sweep.clone() {
                anyhow::ensure!(!log, "--log is for runs without a [sweep]");
                let points = crate::progress::with_progress("sim run", |progress| {
                    sim_run::sweep::run(&s, &sweep, progress)
                })?;
                let results: Vec<sim_run::WorkloadResult> = points
                    .iter()
                    .map(|p| {
                        let mut r = p.result.clone();
                        r.name = format!("{}@{}", p.workload, p.x);
                        r
                    })
                    .collect();
                sim_run::write_outputs(&out, &results, &[])
                    .with_context(|| format!("writing {}", out.display()))?;
                let title = scenario
                    .file_stem()
                    .map_or("sweep".into(), |n| n.to_string_lossy().to_string());
                std::fs::write(out.join("sweep.csv"), sim_run::sweep::csv(&sweep, &points))?;
                std::fs::write(
                    out.join("sweep.svg"),
                    sim_run::sweep::svg(&title, &sweep, &points),
                )?;
                for p in &points {
                    out!(
                        "workload={} {}={} mb_per_s={:.2} iops={:.1} ms={:.3}",
                        p.workload,
                        sweep.parameter,
                        p.x,
                        p.result.mb_per_s.mean,
                        p.result.iops.mean,
                        p.result.seconds.mean * 1e3
                    );
                }
                out!(
                    "results={} wall_seconds={:.3}",
                    out.display(),
                    started.elapsed().as_secs_f64()
                );
                return Ok(());
            }
            let (results, logs) = crate::progress::with_progress("sim run", |progress| {
                sim_run::run(&s, log, progress)
            })?;
            sim_run::write_outputs(&out, &results, &logs)
                .with_context(|| format!("writing {}", out.display()))?;
            for r in &results {
                out!(
                    "workload={} mb_per_s={:.2} ci95={:.2} iops={:.1} latency_p99_us={:.1} bottleneck=\"{}\"",
                    r.name,
                    r.mb_per_s.mean,
                    r.mb_per_s.ci95,
                    r.iops.mean,
                    r.latency_p99_us.mean,
                    r.bottleneck
                );
            }
            out!(
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
            out!("events={}", report.events);
            out!("stations={stations} jobs={jobs} seed={seed}");
            out!("virtual_seconds={:.6}", report.virtual_ns as f64 / 1e9);
            out!("mean_utilisation={:.4}", report.mean_utilisation);
            out!("wall_seconds={wall:.3}");
            out!(
                "events_per_second={:.0}",
                report.events as f64 / wall.max(1e-9)
            );
            Ok(())
        }
    }
}

/// Reads, parses and validates a scenario file ([`sim_run::Scenario::validate`]); the
/// paths of its trace files are taken relative to its directory.
fn load_scenario(path: &Path) -> Result<sim_run::Scenario, sim_run::SimError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| sim_run::SimError::Scenario(format!("{}: {e}", path.display())))?;
    let mut s: sim_run::Scenario =
        toml::from_str(&text).map_err(|e| sim_run::SimError::Scenario(e.to_string()))?;
    s.validate()?;
    let dir = path.parent().unwrap_or(Path::new("."));
    for w in &mut s.workloads {
        if let Some(t) = w.trace.as_mut()
            && t.is_relative()
        {
            *t = dir.join(&*t);
        }
    }
    Ok(s)
}
