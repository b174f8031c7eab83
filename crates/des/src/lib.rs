//! The discrete-event core of the storage simulator (docs/simulator.md 2).
//!
//! Time is a virtual clock in nanoseconds. Events wait in one queue ordered by time and then
//! by the order they were scheduled, so two events at the same instant run first-in
//! first-out and a run is a pure function of its inputs and seed. Models own their state
//! and are driven by a loop that takes the next event and handles it; they report through
//! [`Station`] (utilisation and queue length of one component) and [`Latencies`].
//!
//! No I/O, no threads, no wall clock: the same scenario and seed give the same numbers on
//! any machine.

mod queue;
mod rng;
mod speed;
mod stats;

pub use queue::{Nanos, Scheduler};
pub use rng::{Stream, exponential, stream};
pub use speed::{SpeedReport, speed};
pub use stats::{Latencies, Station, StationReport};

/// Nanoseconds per unit, for readable constants.
pub const MICROSECOND: Nanos = 1_000;
pub const MILLISECOND: Nanos = 1_000_000;
pub const SECOND: Nanos = 1_000_000_000;
