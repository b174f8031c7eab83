//! A validation run: calibrate, measure, simulate, and the report with its errors.

use std::path::PathBuf;

use crate::calibrate::{self, Calibration};
use crate::cell::Cell;
use crate::error::ValidateError;
use crate::loopfs;
use crate::mailcells::{self, MailCellResult};
use crate::mailfscells::{self, MailfsCalibration, MailfsCellResult};
use crate::matrix::{self, CellResult};
use crate::real;
use crate::stats::median;
use sim_models::localfs::JournalMode;

pub struct Options {
    /// Where the test files go (on the file system being measured).
    pub dir: PathBuf,
    /// Smaller files and fewer cells: within five minutes here.
    pub quick: bool,
    /// The `mailstow` binary, to mount the mail file system for its cells (None: skipped).
    pub mailstow: Option<PathBuf>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub calibration: Calibration,
    /// The loop device's own calibration (on the ordered mount), then the data=journal
    /// mount's (the same but for the cost of a page written).
    pub ext4_calibrations: Vec<Calibration>,
    pub cells: Vec<CellResult>,
    /// mailstow's storage models predicted, then measured (docs/simulator.md 6b).
    pub mailstow_cells: Vec<MailCellResult>,
    /// The mail file system's striping model, calibrated on loopback Dovecot, predicted,
    /// then measured (docs/simulator.md 8b).
    pub mailfs_calibration: Option<MailfsCalibration>,
    pub mailfs_cells: Vec<MailfsCellResult>,
    /// Cells this machine or this mode could not run, with why.
    pub skipped: Vec<String>,
    pub median_error_mailstow: f64,
    pub median_error_mailfs: f64,
    pub median_error_sequential: f64,
    pub median_error_random: f64,
}

/// Calibrates, measures and simulates; `progress` hears `(step, steps, what)`.
pub fn validate(
    opts: &Options,
    progress: &mut dyn FnMut(u64, u64, &str),
) -> Result<Report, ValidateError> {
    std::fs::create_dir_all(&opts.dir)
        .map_err(|e| ValidateError::Io(opts.dir.display().to_string(), e))?;
    let repeats = if opts.quick { 3 } else { 5 };
    let cells = matrix::cells(opts.quick);
    let modes = [JournalMode::Ordered, JournalMode::Data];
    let ext4_per_mode = matrix::ext4_cells(JournalMode::Ordered).len() as u64;
    let steps = 1 + cells.len() as u64 + modes.len() as u64 * (1 + ext4_per_mode) + 3;
    let mut step = 0;
    let mut tick = |what: &str| {
        progress(step, steps, what);
        step += 1;
    };
    tick("calibrating");
    let calibration = calibrate::calibrate(&opts.dir, opts.quick)?;
    // The disk's cells run on the file system `dir` is on, journaled or not.
    let cells: Vec<Cell> = cells
        .into_iter()
        .map(|c| c.on_journal(calibration.journal))
        .collect();
    let mut results = Vec::new();
    let mut skipped = Vec::new();
    for cell in &cells {
        tick(&cell.name);
        results.push(run_cell(&opts.dir, &calibration, cell, repeats)?);
    }
    // A file larger than the dirty limit: several GB here, so only in the full run.
    let dirty_limit = (calibration.page_cache_bytes as f64 * calibration.dirty_ratio) as u64;
    let cell = matrix::over_dirty_limit_cell(dirty_limit).on_journal(calibration.journal);
    tick(&cell.name);
    if opts.quick {
        skipped.push(format!(
            "{}: not with --quick ({} MiB)",
            cell.name,
            cell.file_bytes >> 20
        ));
    } else if free_bytes(&opts.dir) < cell.file_bytes * 2 {
        skipped.push(format!(
            "{}: needs {} MiB free",
            cell.name,
            (cell.file_bytes * 2) >> 20
        ));
    } else {
        results.push(run_cell(&opts.dir, &calibration, &cell, 1)?);
        let _ = std::fs::remove_file(opts.dir.join("validate.dat"));
    }
    // ext4 in ordered and data=journal mode on a loop device, calibrated on it (the loop
    // over a file is another device than the disk).
    let mut ext4 = Vec::new();
    for mode in modes {
        tick(&format!("ext4 {mode:?}"));
        let cells = matrix::ext4_cells(mode);
        if free_bytes(&opts.dir) < 2 << 30 {
            for c in &cells {
                skipped.push(format!("{}: needs 2 GiB free for the image", c.name));
            }
            continue;
        }
        let mount = match loopfs::LoopMount::new(&opts.dir, mode, 1 << 30)? {
            Ok(m) => m,
            Err(reason) => {
                for c in &cells {
                    skipped.push(format!("{}: {reason}", c.name));
                }
                continue;
            }
        };
        // The device is calibrated on the ordered mount: data=journal turns O_DIRECT
        // into buffered I/O, and the loop device under it is the same.
        if ext4.is_empty() {
            ext4.push(calibrate::calibrate(&mount.dir, true)?);
        }
        let mut cal = ext4[0].clone();
        if mode == JournalMode::Data {
            cal.cpu.write_page_ns = calibrate::write_page_ns(&mount.dir, &cal)?;
            ext4.push(cal.clone());
        }
        for cell in &cells {
            tick(&cell.name);
            results.push(run_cell(&mount.dir, &cal, cell, repeats)?);
        }
    }
    tick("mailstow storage");
    let mailstow_cells = mailcells::cells(&opts.dir, &calibration, opts.quick, &mut skipped)?;
    tick("mail file system");
    let (mailfs_calibration, mailfs_cells) = mailfscells::cells(
        opts.mailstow.as_deref(),
        &opts.dir,
        opts.quick,
        &mut skipped,
    )?;
    progress(steps, steps, "done");
    let errors = |seq: bool| {
        median(
            results
                .iter()
                .filter(|r| r.sequential == seq)
                .map(|r| r.error)
                .collect(),
        )
    };
    Ok(Report {
        median_error_mailstow: median(mailstow_cells.iter().map(|c| c.error).collect()),
        mailstow_cells,
        median_error_mailfs: median(mailfs_cells.iter().map(|c| c.error).collect()),
        mailfs_calibration,
        mailfs_cells,
        median_error_sequential: errors(true),
        median_error_random: errors(false),
        calibration,
        ext4_calibrations: ext4,
        cells: results,
        skipped,
    })
}

fn run_cell(
    dir: &std::path::Path,
    cal: &Calibration,
    cell: &Cell,
    repeats: u32,
) -> Result<CellResult, ValidateError> {
    let real = real::measure(dir, cell, repeats)?;
    let sim = matrix::simulate(cal, cell)?;
    Ok(CellResult {
        name: cell.name.clone(),
        sequential: cell.sequential(),
        real_mb_s: real,
        sim_mb_s: sim,
        error: (sim - real).abs() / real.max(1e-9),
    })
}

fn free_bytes(dir: &std::path::Path) -> u64 {
    rustix::fs::statvfs(dir).map_or(0, |s| s.f_bavail * s.f_frsize)
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(super::median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(super::median(vec![]).is_nan());
    }
}
