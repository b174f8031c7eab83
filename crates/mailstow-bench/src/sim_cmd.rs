//! `mailstow sim validate` (run as `mailstow-bench sim validate`): calibrates the simulator
//! on this machine, measures real reads and writes, simulates the same and prints each
//! cell's error (docs/simulator.md 8). The measuring lives in the `sim-validate` crate; this
//! file is its command line and report.

use std::path::PathBuf;
use std::time::Instant;

use clap::Subcommand;

#[derive(Subcommand)]
pub(crate) enum SimCommand {
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
}

pub(crate) fn run(command: SimCommand) -> anyhow::Result<()> {
    match command {
        SimCommand::Validate { quick, json, dir } => validate(quick, json, dir),
    }
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
        // The `mailstow` binary mounts the mail file system for its cells.
        mailstow: mailstow_binary(),
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

/// The `mailstow` binary that `sim validate` mounts the mail file system with: the one that
/// ran this binary (`MAILSTOW_BIN`), else `mailstow` next to this binary, else none (those
/// cells are then skipped, and the report says why).
fn mailstow_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MAILSTOW_BIN").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let me = std::env::current_exe().ok()?;
    let beside = me.parent()?.join("mailstow");
    beside.is_file().then_some(beside)
}
