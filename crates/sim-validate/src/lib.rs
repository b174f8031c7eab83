//! `mailstow sim validate` (docs/simulator.md 8): calibrate the simulator on this machine
//! from micro-runs (in-memory copies, an empty system call, direct I/O), run a matrix of
//! real buffered reads and writes, simulate the same matrix with the calibrated parameters,
//! and report each cell's error and the median errors.
//!
//! The calibration never uses the cells it is judged on: the copy cost comes from copies
//! between buffers in memory, the device from O_DIRECT runs; the cells are buffered
//! `read()`/`write()` runs through the kernel's page cache and file system.

mod calibrate;
mod matrix;
mod real;

use std::path::PathBuf;

pub use calibrate::Calibration;
pub use matrix::{Cell, CellResult};

#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("simulation: {0}")]
    Sim(String),
}

pub struct Options {
    /// Where the test files go (on the file system being measured).
    pub dir: PathBuf,
    /// Smaller files and fewer cells: within five minutes here.
    pub quick: bool,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub calibration: Calibration,
    pub cells: Vec<CellResult>,
    pub median_error_sequential: f64,
    pub median_error_random: f64,
}

fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Calibrates, measures and simulates; `progress` hears `(step, steps, what)`.
pub fn validate(
    opts: &Options,
    progress: &mut dyn FnMut(u64, u64, &str),
) -> Result<Report, ValidateError> {
    std::fs::create_dir_all(&opts.dir)
        .map_err(|e| ValidateError::Io(opts.dir.display().to_string(), e))?;
    let cells = matrix::cells(opts.quick);
    let steps = 1 + cells.len() as u64;
    progress(0, steps, "calibrating");
    let calibration = calibrate::calibrate(&opts.dir, opts.quick)?;
    let mut results = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        progress(1 + i as u64, steps, &cell.name);
        let real = real::measure(&opts.dir, cell, if opts.quick { 3 } else { 5 })?;
        let sim = matrix::simulate(&calibration, cell)?;
        results.push(CellResult {
            name: cell.name.clone(),
            sequential: cell.sequential(),
            real_mb_s: real,
            sim_mb_s: sim,
            error: (sim - real).abs() / real.max(1e-9),
        });
    }
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
        median_error_sequential: errors(true),
        median_error_random: errors(false),
        calibration,
        cells: results,
    })
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
