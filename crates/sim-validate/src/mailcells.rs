//! mailstow's storage models (docs/simulator.md 6b) predicted for this machine, then
//! measured: the queue's group commit and a file per message (`mailstow bench queue`'s
//! runs), mailstow's expunge (`mailstow bench store-delete`'s), and an mbox tail rewrite
//! made of plain calls.
//!
//! The models take the calibrated device and one figure each implementation gives itself:
//! its CPU per message, measured by running it on tmpfs, where the device costs nothing.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bench::queue_ingest::{self, Implementation, IngestOptions};
use serde::Serialize;
use sim_models::localfs::WritebackParams;
use sim_run::{MailMode, Workload, WorkloadKind, WorkloadResult};

use crate::matrix::{calibrated, run_one};
use crate::{Calibration, ValidateError};

/// Sessions, and the size of a message, as `mailstow bench queue` runs them by default.
const SESSIONS: usize = 32;
const MESSAGE_BYTES: usize = 8192;
/// What each implementation stores with a message besides its body: the envelope, and
/// the queue's record header.
const FILE_ENVELOPE_BYTES: u64 = 62;
const QUEUE_RECORD_OVERHEAD_BYTES: u64 = 128;
/// The mbox: messages of 64 KiB; one deleted 10 from the end and one 10 from the start.
const MBOX_MESSAGES: u64 = 2_000;
const MBOX_MESSAGE_BYTES: u64 = 64 << 10;
const MBOX_NEAR: u64 = 10;
const TMPFS_MAGIC: u64 = 0x0102_1994;

#[derive(Debug, Clone, Serialize)]
pub struct MailCellResult {
    pub name: String,
    /// `msg/s` or `ms`.
    pub unit: &'static str,
    pub real: f64,
    pub sim: f64,
    /// The error on the rate: |sim - real| / real for msg/s; for a time, the same on its
    /// inverse, |real - sim| / sim.
    pub error: f64,
}

impl MailCellResult {
    fn rate(name: &str, real: f64, sim: f64) -> MailCellResult {
        MailCellResult {
            name: name.into(),
            unit: "msg/s",
            real,
            sim,
            error: (sim - real).abs() / real.max(1e-9),
        }
    }

    fn time(name: &str, real: Duration, sim_seconds: f64) -> MailCellResult {
        let (real_ms, sim_ms) = (real.as_secs_f64() * 1e3, sim_seconds * 1e3);
        MailCellResult {
            name: name.into(),
            unit: "ms",
            real: real_ms,
            sim: sim_ms,
            error: (real_ms - sim_ms).abs() / sim_ms.max(1e-9),
        }
    }
}

/// The workload on this machine's calibrated device, journal and CPU.
fn predict(cal: &Calibration, workload: Workload) -> Result<WorkloadResult, ValidateError> {
    let journal_bytes = WritebackParams::default().journal_bytes;
    run_one(&calibrated(cal, cal.journal, journal_bytes, workload))
}

fn bench_err(what: &str) -> impl Fn(anyhow::Error) -> ValidateError + '_ {
    move |e| ValidateError::Io(what.into(), std::io::Error::other(format!("{e:#}")))
}

/// A tmpfs directory for the CPU runs, if this machine has one at /dev/shm.
fn tmpfs_dir() -> Option<PathBuf> {
    let shm = Path::new("/dev/shm");
    let st = rustix::fs::statfs(shm).ok()?;
    (st.f_type as u64 == TMPFS_MAGIC)
        .then(|| shm.join(format!("mailstow-validate-{}", std::process::id())))
}

fn ingest(
    dir: &Path,
    implementation: Implementation,
    seconds: f64,
) -> Result<queue_ingest::Ingest, ValidateError> {
    let options = IngestOptions {
        dir: dir.to_path_buf(),
        producers: vec![SESSIONS],
        message_bytes: MESSAGE_BYTES,
        seconds,
        segment_bytes: queue::QueueConfig::default().segment_bytes,
        runs: 1,
        deliver: false,
    };
    queue_ingest::measure(&options, SESSIONS, implementation).map_err(bench_err("queue bench"))
}

/// The queue cells: each implementation's CPU per message on tmpfs, then the model's
/// prediction on the calibrated device, then the median of `runs` real runs.
fn queue_cells(
    dir: &Path,
    cal: &Calibration,
    quick: bool,
    skipped: &mut Vec<String>,
) -> Result<Vec<MailCellResult>, ValidateError> {
    let Some(shm) = tmpfs_dir() else {
        skipped.push("queue cells: no tmpfs at /dev/shm to measure their CPU on".into());
        return Ok(Vec::new());
    };
    let (seconds, runs) = if quick { (1.0, 3) } else { (2.0, 5) };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let mut out = Vec::new();
    for (name, implementation, mode) in [
        (
            "queue-group-commit-32x8k",
            Implementation::Mailstow,
            MailMode::GroupCommit,
        ),
        (
            "queue-file-per-message-32x8k",
            Implementation::FilePerMessage,
            MailMode::FilePerMessage,
        ),
    ] {
        // The median of `runs` as the device's cells are: one tmpfs run's rate wanders by
        // half between minutes here, and the prediction moves with it.
        let mut per_message = Vec::new();
        for _ in 0..runs {
            let on_tmpfs = ingest(&shm, implementation, seconds);
            let _ = std::fs::remove_dir_all(&shm);
            let on_tmpfs = on_tmpfs?;
            per_message.push(on_tmpfs.elapsed.as_nanos() as f64 / on_tmpfs.messages.max(1) as f64);
        }
        // The committer spends it serially; a file per message's sessions share the cores.
        let per_message_ns = crate::stats::median(per_message);
        let (cpu_ns, model_cpus, overhead) = match mode {
            MailMode::GroupCommit => (per_message_ns, 1, QUEUE_RECORD_OVERHEAD_BYTES),
            _ => (per_message_ns * f64::from(cpus), cpus, FILE_ENVELOPE_BYTES),
        };
        let mut rates = Vec::new();
        let mut messages = 0;
        for _ in 0..runs {
            bench::sys::sync();
            let run = ingest(dir, implementation, seconds)?;
            messages = messages.max(run.messages);
            rates.push(run.per_second());
        }
        let workload = Workload {
            mode: Some(mode),
            messages: messages.clamp(1_000, 200_000),
            message_bytes: MESSAGE_BYTES as u64 + overhead,
            sessions: SESSIONS as u32,
            message_cpu_ns: cpu_ns,
            cpus: model_cpus,
            ..Workload::new(name, WorkloadKind::Queue)
        };
        let sim = predict(cal, workload)?.iops.mean;
        out.push(MailCellResult::rate(name, crate::stats::median(rates), sim));
    }
    Ok(out)
}

/// mailstow's expunge near and far from the end of a folder.
fn mailstow_delete_cells(
    dir: &Path,
    cal: &Calibration,
    quick: bool,
) -> Result<Vec<MailCellResult>, ValidateError> {
    let folder_mb = if quick { 64 } else { 256 };
    let options = bench::store_delete::DeleteOptions {
        dir: dir.to_path_buf(),
        folder_mb,
        distances_mb: vec![0, folder_mb - 1],
        runs: 5,
    };
    let (count, deleted) = bench::store_delete::measure(&options).map_err(bench_err("store"))?;
    let _ = std::fs::remove_dir_all(dir.join("store-delete"));
    let message_bytes = (folder_mb * 1_000_000 / count.max(1)).max(1);
    let mut out = Vec::new();
    for (d, label) in deleted.iter().zip(["near-end", "far-from-end"]) {
        let distance = (d.distance_mb * 1_000_000 / message_bytes).min(count.saturating_sub(1));
        let name = format!("delete-mailstow-{label}");
        let workload = Workload {
            mode: Some(MailMode::Mailstow),
            messages: count.max(1),
            message_bytes,
            distance,
            ..Workload::new(&name, WorkloadKind::Delete)
        };
        let sim = predict(cal, workload)?.seconds.mean;
        out.push(MailCellResult::time(&name, d.time, sim));
    }
    Ok(out)
}

/// One mbox deletion for real: a cold mbox of `messages`, the message `distance` from the
/// end removed by moving the tail up (1 MiB reads and writes), truncating and `fsync`.
fn mbox_delete_once(dir: &Path, messages: u64, distance: u64) -> Result<Duration, ValidateError> {
    let size = MBOX_MESSAGE_BYTES;
    let len = messages * size;
    let path = crate::real::prepare(dir, "mbox.dat", len)?;
    crate::real::drop_cache(&path)?;
    let io = |e: std::io::Error| ValidateError::Io(path.display().to_string(), e);
    let f: File = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(io)?;
    let victim = (messages - 1 - distance) * size;
    let mut buf = vec![0u8; 1 << 20];
    let start = Instant::now();
    let mut from = victim + size;
    while from < len {
        let n = ((len - from) as usize).min(buf.len());
        f.read_exact_at(&mut buf[..n], from).map_err(io)?;
        f.write_all_at(&buf[..n], from - size).map_err(io)?;
        from += n as u64;
    }
    f.set_len(len - size).map_err(io)?;
    f.sync_all().map_err(io)?;
    Ok(start.elapsed())
}

fn mbox_delete_cells(
    dir: &Path,
    cal: &Calibration,
    runs: usize,
) -> Result<Vec<MailCellResult>, ValidateError> {
    let mut out = Vec::new();
    for (distance, label) in [
        (MBOX_NEAR, "near-end"),
        (MBOX_MESSAGES - MBOX_NEAR, "far-from-end"),
    ] {
        let mut times = Vec::new();
        for _ in 0..runs {
            // `prepare` writes the mbox afresh: the last run made it a message shorter.
            times.push(mbox_delete_once(dir, MBOX_MESSAGES, distance)?);
        }
        times.sort();
        let name = format!("delete-mbox-{label}");
        let workload = Workload {
            mode: Some(MailMode::Mbox),
            messages: MBOX_MESSAGES,
            message_bytes: MBOX_MESSAGE_BYTES,
            distance,
            ..Workload::new(&name, WorkloadKind::Delete)
        };
        let sim = predict(cal, workload)?.seconds.mean;
        out.push(MailCellResult::time(&name, times[times.len() / 2], sim));
    }
    let _ = std::fs::remove_file(dir.join("mbox.dat"));
    Ok(out)
}

/// Every mailstow cell; cells this machine cannot run go to `skipped` with why.
pub(crate) fn cells(
    dir: &Path,
    cal: &Calibration,
    quick: bool,
    skipped: &mut Vec<String>,
) -> Result<Vec<MailCellResult>, ValidateError> {
    let work = dir.join("mail");
    std::fs::create_dir_all(&work).map_err(|e| ValidateError::Io(work.display().to_string(), e))?;
    let mut out = queue_cells(&work, cal, quick, skipped)?;
    out.extend(mailstow_delete_cells(&work, cal, quick)?);
    out.extend(mbox_delete_cells(&work, cal, if quick { 3 } else { 5 })?);
    let _ = std::fs::remove_dir_all(&work);
    Ok(out)
}
