//! `mailstow sim validate` (docs/simulator.md 8): calibrate the simulator on this machine
//! from micro-runs (in-memory copies, an empty system call, direct I/O), run a matrix of
//! real buffered reads and writes, simulate the same matrix with the calibrated parameters,
//! and report each cell's error and the median errors.
//!
//! The calibration never uses the cells it is judged on: the copy cost comes from copies
//! between buffers in memory, the device from O_DIRECT runs; the cells are buffered
//! `read()`/`write()` runs through the kernel's page cache and file system.

mod calibrate;
mod cell;
mod error;
mod loopfs;
mod mailcells;
mod mailfscells;
mod matrix;
mod real;
mod stats;
mod validate;

pub use calibrate::Calibration;
pub use cell::Cell;
pub use error::ValidateError;
pub use mailcells::MailCellResult;
pub use mailfscells::{MailfsCalibration, MailfsCellResult};
pub use matrix::CellResult;
pub use validate::{Options, Report, validate};
