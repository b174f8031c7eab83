//! What bounds one connection's claim on the server, shared by the sans-IO protocol crates and
//! the shell that drives them.
//!
//! - [`ByteBudget`]: message bytes held in memory by every connection together (SMTP `DATA`
//!   and `BDAT` content, IMAP literals). A session grows a [`Reservation`] before it buffers
//!   more; when the budget is spent it refuses the message with a temporary error instead of
//!   buffering it, so memory has a ceiling however many clients send at once.
//! - [`Deadline`]: how long the step a session is in may take in total, whatever trickles in.
//!   Sessions have no clock: they name the step and the time allowed, and the shell, which
//!   owns the clock, starts timing when a step first appears and calls the session back when
//!   the time is up.
//!
//! No I/O, no clock, no threads: atomics only.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bytes that every holder together may have reserved at once.
#[derive(Debug)]
pub struct ByteBudget {
    bytes_max: u64,
    reserved: AtomicU64,
    /// Reservations refused since start (for metrics and tests).
    refusals: AtomicU64,
}

impl ByteBudget {
    /// A budget of `bytes_max` bytes, shared through the `Arc`.
    pub fn new(bytes_max: u64) -> Arc<ByteBudget> {
        Arc::new(ByteBudget {
            bytes_max,
            reserved: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
        })
    }

    /// The configured ceiling.
    pub fn bytes_max(&self) -> u64 {
        self.bytes_max
    }

    /// Bytes reserved now.
    pub fn reserved(&self) -> u64 {
        self.reserved.load(Ordering::Relaxed)
    }

    /// Reservations refused since start.
    pub fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Relaxed)
    }

    /// An empty reservation, to be grown as bytes arrive.
    pub fn reservation(self: &Arc<Self>) -> Reservation {
        Reservation {
            budget: Arc::clone(self),
            bytes: 0,
        }
    }

    /// Takes `bytes` if they fit; never over-commits, even when many threads race.
    fn take(&self, bytes: u64) -> bool {
        let taken = self
            .reserved
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |reserved| {
                reserved
                    .checked_add(bytes)
                    .filter(|total| *total <= self.bytes_max)
            })
            .is_ok();
        if !taken {
            self.refusals.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    fn give_back(&self, bytes: u64) {
        let before = self.reserved.fetch_sub(bytes, Ordering::AcqRel);
        debug_assert!(before >= bytes, "budget released more than was reserved");
    }
}

/// One holder's share of a [`ByteBudget`]; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<ByteBudget>,
    bytes: u64,
}

impl Reservation {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Makes the reservation at least `bytes` large. False (and unchanged) when the budget
    /// cannot give the difference.
    pub fn grow_to(&mut self, bytes: u64) -> bool {
        let Some(more) = bytes.checked_sub(self.bytes).filter(|more| *more > 0) else {
            return true;
        };
        if !self.budget.take(more) {
            return false;
        }
        self.bytes = bytes;
        true
    }

    /// Gives everything back; the reservation can grow again later.
    pub fn release(&mut self) {
        if self.bytes > 0 {
            self.budget.give_back(self.bytes);
            self.bytes = 0;
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.release();
    }
}

/// The granularity sessions grow reservations in, so a message costs a few atomic operations,
/// not one per read.
pub const RESERVATION_STEP: u64 = 64 << 10;

/// Rounds `bytes` up to a multiple of [`RESERVATION_STEP`].
pub fn rounded_up(bytes: u64) -> u64 {
    bytes
        .div_ceil(RESERVATION_STEP)
        .saturating_mul(RESERVATION_STEP)
}

/// A bound on the total time of one step of a session (a command line, a literal, a message
/// transfer, the time before login, an IDLE), however the input trickles in.
///
/// The session returns the same `step` for as long as it is in the same step, and a new value
/// when a new one starts; the shell times from the moment it first sees a `step` and calls the
/// session's `deadline_passed` once `within` has gone by. `within` may grow while the step runs
/// (a transfer is allowed more time as more of it arrives, at a minimum rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    pub step: u64,
    pub within: Duration,
}

impl Deadline {
    /// Time allowed for a transfer of `bytes` so far: `base`, plus one second per
    /// `rate_min` bytes received (a client that keeps up the minimum rate always has time
    /// left; one that trickles slower runs out), capped at `cap`. `rate_min` 0 means no
    /// allowance beyond `base`.
    pub fn transfer(base: Duration, bytes: u64, rate_min: u64, cap: Duration) -> Duration {
        let extra = match rate_min {
            0 => Duration::ZERO,
            rate => Duration::from_secs(bytes / rate),
        };
        base.saturating_add(extra).min(cap)
    }
}

/// The deadlines a session has running, one per kind of step; each is timed on its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deadlines {
    /// A protocol state with a total time: the time before login, an IDLE.
    pub phase: Option<Deadline>,
    /// A message transfer: SMTP DATA or a BDAT transaction.
    pub transfer: Option<Deadline>,
    /// One request: a command line, with an IMAP command's literals.
    pub request: Option<Deadline>,
}

impl Deadlines {
    /// The three kinds in a fixed order, for a shell that keeps one clock per kind.
    pub fn kinds(&self) -> [Option<Deadline>; 3] {
        [self.phase, self.transfer, self.request]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_never_exceed_the_budget_and_come_back_on_drop() {
        let budget = ByteBudget::new(100);
        let mut a = budget.reservation();
        let mut b = budget.reservation();
        assert!(a.grow_to(60));
        assert!(!b.grow_to(41));
        assert_eq!(b.bytes(), 0);
        assert!(b.grow_to(40));
        assert_eq!(budget.reserved(), 100);
        assert!(a.grow_to(50), "shrinking requests are a no-op");
        assert_eq!(a.bytes(), 60);
        drop(a);
        assert_eq!(budget.reserved(), 40);
        b.release();
        assert_eq!(budget.reserved(), 0);
        assert!(b.grow_to(100));
        assert!(!b.grow_to(u64::MAX));
        assert_eq!(budget.refusals(), 2);
    }

    #[test]
    fn racing_threads_never_over_commit() {
        let budget = ByteBudget::new(1000);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let budget = budget.clone();
                std::thread::spawn(move || {
                    let mut held = Vec::new();
                    for _ in 0..1000 {
                        let mut r = budget.reservation();
                        if r.grow_to(7) {
                            assert!(budget.reserved() <= 1000);
                            held.push(r);
                        }
                        if held.len() > 10 {
                            held.clear();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(budget.reserved(), 0);
    }

    #[test]
    fn transfers_earn_time_at_the_minimum_rate_up_to_the_cap() {
        let base = Duration::from_secs(60);
        let cap = Duration::from_secs(3600);
        assert_eq!(Deadline::transfer(base, 0, 1024, cap), base);
        assert_eq!(
            Deadline::transfer(base, 10 * 1024, 1024, cap),
            Duration::from_secs(70)
        );
        assert_eq!(Deadline::transfer(base, u64::MAX, 1, cap), cap);
        assert_eq!(Deadline::transfer(base, 1 << 30, 0, cap), base);
        assert_eq!(rounded_up(1), RESERVATION_STEP);
        assert_eq!(rounded_up(0), 0);
        assert_eq!(rounded_up(u64::MAX), u64::MAX);
    }
}
