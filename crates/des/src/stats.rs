//! What each component reports: utilisation, queue lengths, latency percentiles.

use hdrhistogram::Histogram;

use crate::Nanos;

/// One component seen as a queueing station: `servers` identical servers and a waiting
/// line. Time-weighted, so the figures are means over virtual time, not over events.
#[derive(Debug, Clone)]
pub struct Station {
    pub name: String,
    servers: u32,
    busy: u32,
    waiting: u64,
    waiting_max: u64,
    last: Nanos,
    /// Integral of busy servers over time (ns).
    busy_area: u128,
    /// Integral of the waiting line's length over time (ns).
    waiting_area: u128,
    completions: u64,
}

/// A station's figures over `[0, at]`.
#[derive(Debug, Clone, PartialEq)]
pub struct StationReport {
    pub name: String,
    /// Busy fraction of all servers (0..=1).
    pub utilisation: f64,
    pub mean_queue: f64,
    pub max_queue: u64,
    pub completions: u64,
}

impl Station {
    pub fn new(name: impl Into<String>, servers: u32) -> Station {
        assert!(servers > 0, "a station has at least one server");
        Station {
            name: name.into(),
            servers,
            busy: 0,
            waiting: 0,
            waiting_max: 0,
            last: 0,
            busy_area: 0,
            waiting_area: 0,
            completions: 0,
        }
    }

    fn advance(&mut self, now: Nanos) {
        debug_assert!(now >= self.last, "station time goes forward");
        let dt = u128::from(now.saturating_sub(self.last));
        self.busy_area += dt * u128::from(self.busy);
        self.waiting_area += dt * u128::from(self.waiting);
        self.last = self.last.max(now);
    }

    /// Whether a server is free.
    pub fn idle_server(&self) -> bool {
        self.busy < self.servers
    }

    pub fn busy_servers(&self) -> u32 {
        self.busy
    }

    pub fn waiting(&self) -> u64 {
        self.waiting
    }

    /// A request joins the waiting line.
    pub fn enqueue(&mut self, now: Nanos) {
        self.advance(now);
        self.waiting += 1;
        self.waiting_max = self.waiting_max.max(self.waiting);
    }

    /// A request leaves the waiting line (to be served, or dropped).
    pub fn dequeue(&mut self, now: Nanos) {
        self.advance(now);
        assert!(
            self.waiting > 0,
            "{}: dequeue from an empty line",
            self.name
        );
        self.waiting -= 1;
    }

    /// A server starts a request.
    pub fn start(&mut self, now: Nanos) {
        self.advance(now);
        assert!(self.busy < self.servers, "{}: no server free", self.name);
        self.busy += 1;
    }

    /// A server finishes a request.
    pub fn finish(&mut self, now: Nanos) {
        self.advance(now);
        assert!(self.busy > 0, "{}: finish with no server busy", self.name);
        self.busy -= 1;
        self.completions += 1;
    }

    pub fn report(&mut self, now: Nanos) -> StationReport {
        self.advance(now);
        let span = u128::from(self.last.max(1));
        StationReport {
            name: self.name.clone(),
            utilisation: self.busy_area as f64 / (span * u128::from(self.servers)) as f64,
            mean_queue: self.waiting_area as f64 / span as f64,
            max_queue: self.waiting_max,
            completions: self.completions,
        }
    }
}

/// Latencies in nanoseconds, kept to 3 significant digits from 1 ns to an hour.
#[derive(Debug, Clone)]
pub struct Latencies {
    histogram: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        Self::new()
    }
}

impl Latencies {
    const HIGHEST_NS: u64 = 3_600 * crate::SECOND;

    pub fn new() -> Latencies {
        Latencies {
            histogram: Histogram::new_with_bounds(1, Self::HIGHEST_NS, 3)
                .expect("valid histogram bounds"),
        }
    }

    pub fn record(&mut self, latency: Nanos) {
        self.histogram
            .saturating_record(latency.clamp(1, Self::HIGHEST_NS));
    }

    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    pub fn mean(&self) -> f64 {
        self.histogram.mean()
    }

    /// The latency at percentile `p` (0..=100).
    pub fn percentile(&self, p: f64) -> Nanos {
        self.histogram.value_at_percentile(p)
    }

    pub fn max(&self) -> Nanos {
        self.histogram.max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utilisation_and_queue_are_time_weighted() {
        let mut s = Station::new("disk", 1);
        // Busy 0..40, idle 40..100; one request waits 10..40.
        s.start(0);
        s.enqueue(10);
        s.finish(40);
        s.dequeue(40);
        let r = s.report(100);
        assert!((r.utilisation - 0.4).abs() < 1e-9, "{r:?}");
        assert!((r.mean_queue - 0.3).abs() < 1e-9, "{r:?}");
        assert_eq!((r.max_queue, r.completions), (1, 1));
        // Two servers, one busy all the time: half utilised.
        let mut two = Station::new("ssd", 2);
        two.start(0);
        assert!((two.report(50).utilisation - 0.5).abs() < 1e-9);
    }

    #[test]
    fn latency_percentiles() {
        let mut l = Latencies::new();
        for ns in 1..=1000u64 {
            l.record(ns * 1000);
        }
        assert_eq!(l.count(), 1000);
        let p50 = l.percentile(50.0) as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.01, "{p50}");
        assert!(l.percentile(99.0) >= 989_000);
        l.record(0);
        l.record(u64::MAX);
        assert_eq!(l.count(), 1002);
    }
}
