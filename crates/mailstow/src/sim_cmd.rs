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
    Validate {
        /// Smaller files and fewer cells (within five minutes here).
        #[arg(long)]
        quick: bool,
        /// The report as JSON (before the two last lines).
        #[arg(long)]
        json: bool,
        /// Where the test files go (default: a new directory under the system's temp
        /// directory, removed afterwards).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
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
        SimCommand::Validate { quick, json, dir } => validate(quick, json, dir),
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

fn validate(quick: bool, json: bool, dir: Option<PathBuf>) -> anyhow::Result<()> {
    let (dir, remove) = match dir {
        Some(d) => (d, false),
        None => (
            std::env::temp_dir().join(format!("mailstow-validate-{}", std::process::id())),
            true,
        ),
    };
    let opts = sim_validate::Options {
        dir: dir.clone(),
        quick,
        // This binary mounts the mail file system for its cells.
        mailstow: std::env::current_exe().ok(),
    };
    let started = Instant::now();
    let report = crate::progress::with_progress("sim validate", |progress| {
        sim_validate::validate(&opts, &mut |done, total, _| progress(done, total))
    });
    if remove {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let report = report?;
    if json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let c = &report.calibration;
        let curve: Vec<String> = c
            .copy_curve
            .iter()
            .map(|(size, ns)| format!("{}K:{ns:.0}", size >> 10))
            .collect();
        out!("copy_curve_ns_per_page {}", curve.join(" "));
        out!(
            "calibration: call {:.0} ns, page lookup {:.0} ns, copy {:.0} ns/page cached, {:.0} ns/page from memory, knee {} KiB, random page +{:.0} ns, written page +{:.0} ns, write call +{:.0} ns; device {}; page cache {} MiB, read-ahead {} pages, dirty {:.0} %/{:.0} %, clock tick {} us, journal {}, truncate {:.0} us + {:.0} us/MiB",
            c.cpu.syscall_ns,
            c.cpu.page_lookup_ns,
            c.cpu.cached_ns_per_page,
            c.cpu.memory_ns_per_page,
            c.cpu.knee_bytes >> 10,
            c.cpu.random_page_ns,
            c.cpu.write_page_ns,
            c.cpu.write_call_ns,
            c.device_summary(),
            c.page_cache_bytes >> 20,
            c.readahead_pages,
            c.dirty_background_ratio * 100.0,
            c.dirty_ratio * 100.0,
            c.timestamp_granularity_ns / 1000,
            serde_json::to_value(c.journal)?.as_str().unwrap_or("?"),
            c.truncate_us,
            c.truncate_us_per_mib
        );
        for r in &report.cells {
            out!(
                "cell={} kind={} real_mb_s={:.1} sim_mb_s={:.1} error={:.3}",
                r.name,
                if r.sequential { "sequential" } else { "random" },
                r.real_mb_s,
                r.sim_mb_s,
                r.error
            );
        }
        for m in &report.mailstow_cells {
            out!(
                "mailstow_cell={} unit={} real={:.2} sim={:.2} error={:.3}",
                m.name,
                m.unit,
                m.real,
                m.sim,
                m.error
            );
        }
        if let Some(m) = &report.mailfs_calibration {
            out!(
                "mailfs calibration: latency {:.1} us; server APPEND {:.0} us + {:.2} ns per wire byte, FETCH {:.0} us + {:.2} ns; mount write {:.0} us per block + {:.2} ns per byte, read {:.0} us + {:.2} ns; serial path {:.2} ns per byte written, {:.2} read; per file {:.0} us written, {:.0} read, {:.0} us per directory message; a session's login {:.0} us; {} cores shared",
                m.latency_us,
                m.server_append_ns / 1e3,
                m.server_append_ns_per_byte,
                m.server_fetch_ns / 1e3,
                m.server_fetch_ns_per_byte,
                m.client_write_message_ns / 1e3,
                m.client_write_ns_per_byte,
                m.client_read_message_ns / 1e3,
                m.client_read_ns_per_byte,
                m.program_write_ns_per_byte,
                m.program_read_ns_per_byte,
                m.file_write_ns / 1e3,
                m.file_read_ns / 1e3,
                m.client_metadata_ns / 1e3,
                m.connect_ns / 1e3,
                m.cores
            );
        }
        for m in &report.mailfs_cells {
            out!(
                "mailfs_cell={} real_ms={:.2} sim_ms={:.2} error={:.3}",
                m.name,
                m.real_ms,
                m.sim_ms,
                m.error
            );
        }
        for c in &report.ext4_calibrations {
            out!(
                "ext4 loop device: {}, written page +{:.0} ns",
                c.device_summary(),
                c.cpu.write_page_ns
            );
        }
        for s in &report.skipped {
            out!("skipped {s}");
        }
        out!(
            "copy_knee_bytes={} expected_knee_bytes={} l2_bytes={} llc_bytes={} wall_seconds={:.1}",
            c.cpu.knee_bytes,
            c.expected_knee_bytes,
            c.l2_bytes,
            c.llc_bytes,
            started.elapsed().as_secs_f64()
        );
    }
    out!("median_error_mailstow={:.4}", report.median_error_mailstow);
    out!("median_error_mailfs={:.4}", report.median_error_mailfs);
    out!(
        "median_error_sequential={:.4}",
        report.median_error_sequential
    );
    out!("median_error_random={:.4}", report.median_error_random);
    Ok(())
}
