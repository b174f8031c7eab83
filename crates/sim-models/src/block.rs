//! The block layer: requests wait in the I/O scheduler, go to the device while it has room,
//! and come back as completions. The caller owns the event queue: `submit` and `complete`
//! return the requests that went to the device and when each will complete.

use des::{Latencies, Nanos, Station, StationReport, Stream};

use crate::device::Device;
use crate::sched::IoScheduler;
use crate::{Op, Request};

/// A request handed to the device, completing at `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatch {
    pub at: Nanos,
    pub req: Request,
}

pub struct BlockLayer {
    sched: Box<dyn IoScheduler>,
    device: Box<dyn Device>,
    rng: Stream,
    station: Station,
    latencies: [Latencies; 2],
    bytes: [u64; 2],
    requests: [u64; 2],
}

/// What the block layer did over a run.
#[derive(Debug, Clone)]
pub struct BlockReport {
    /// The device as a queueing station: utilisation of its servers (or of the path they
    /// share, when that is the busier), the scheduler's queue.
    pub station: StationReport,
    pub merges: u64,
    /// Requests and bytes completed, reads then writes (after merging).
    pub requests: [u64; 2],
    pub bytes: [u64; 2],
}

impl BlockLayer {
    pub fn new(device: Box<dyn Device>, sched: Box<dyn IoScheduler>, rng: Stream) -> BlockLayer {
        let station = Station::new("device", device.parallelism());
        BlockLayer {
            sched,
            device,
            rng,
            station,
            latencies: [Latencies::new(), Latencies::new()],
            bytes: [0; 2],
            requests: [0; 2],
        }
    }

    pub fn capacity_sectors(&self) -> u64 {
        self.device.capacity_sectors()
    }

    /// The largest request the queue takes: a submitter splits a longer run into pieces
    /// of this size, as the kernel splits a bio at `max_sectors_kb`.
    pub fn max_request_sectors(&self) -> u64 {
        self.sched.max_sectors().max(1)
    }

    /// Queues `req`; returns what went to the device now.
    pub fn submit(&mut self, now: Nanos, req: Request) -> Result<Vec<Dispatch>, String> {
        if (req.sectors == 0) != req.flush || req.end() > self.device.capacity_sectors() {
            return Err(format!(
                "request of {} sectors at {} is outside the device ({} sectors)",
                req.sectors,
                req.sector,
                self.device.capacity_sectors()
            ));
        }
        let before = self.sched.len();
        self.sched.add(now, req);
        if self.sched.len() > before {
            self.station.enqueue(now);
        }
        Ok(self.dispatch(now))
    }

    /// `req` (from a `Dispatch`) completed at `now`; returns what went to the device next.
    pub fn complete(&mut self, now: Nanos, req: &Request) -> Vec<Dispatch> {
        self.station.finish(now);
        let d = match req.op {
            Op::Read => 0,
            Op::Write => 1,
        };
        self.latencies[d].record(now - req.submitted);
        self.bytes[d] += req.bytes();
        self.requests[d] += 1;
        self.dispatch(now)
    }

    fn dispatch(&mut self, now: Nanos) -> Vec<Dispatch> {
        let mut out = Vec::new();
        while self.station.idle_server() {
            let Some(req) = self.sched.next(now) else {
                break;
            };
            self.station.dequeue(now);
            self.station.start(now);
            let at = self.device.start(now, &req, &mut self.rng);
            out.push(Dispatch { at, req });
        }
        out
    }

    /// Device-level latency (queueing and service) of reads or writes.
    pub fn latencies(&self, op: Op) -> &Latencies {
        &self.latencies[match op {
            Op::Read => 0,
            Op::Write => 1,
        }]
    }

    pub fn report(&mut self, now: Nanos) -> BlockReport {
        let mut station = self.station.report(now);
        // Busy as its busiest part: the channels, or the path they share.
        if now > 0 {
            let shared = self.device.shared_busy_ns() as f64 / now as f64;
            station.utilisation = station.utilisation.max(shared.min(1.0));
        }
        BlockReport {
            station,
            merges: self.sched.merges(),
            requests: self.requests,
            bytes: self.bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Hdd, HddParams, Ssd, SsdParams};
    use crate::sched::{SchedulerParams, build};
    use des::Scheduler;

    /// Submits everything at time 0 and runs to the end; returns (end time, completion
    /// order of request ids, report).
    fn run_all(mut bl: BlockLayer, reqs: Vec<Request>) -> (Nanos, Vec<u64>, BlockReport) {
        let mut sim: Scheduler<Request> = Scheduler::new();
        for r in reqs {
            for d in bl.submit(0, r).unwrap() {
                sim.at(d.at, d.req);
            }
        }
        let mut order = Vec::new();
        while let Some(done) = sim.pop() {
            order.extend_from_slice(&done.ids);
            for d in bl.complete(sim.now(), &done) {
                sim.at(d.at, d.req);
            }
        }
        let end = sim.now();
        (end, order, bl.report(end))
    }

    #[test]
    fn a_disk_serves_one_at_a_time_and_deadline_sorts_what_waits() {
        let hdd = || Box::new(Hdd::new(HddParams::default()).unwrap());
        let sectors = [9_000_000u64, 1_000, 5_000_000, 2_000_000, 7_000_000];
        let reqs = |_: ()| -> Vec<Request> {
            sectors
                .iter()
                .enumerate()
                .map(|(i, &s)| Request::new(i as u64, Op::Read, s * 100, 8, 0))
                .collect()
        };
        let noop = BlockLayer::new(
            hdd(),
            build(&SchedulerParams::Noop { max_sectors: 2048 }).unwrap(),
            des::stream(1, 1),
        );
        let (noop_end, noop_order, report) = run_all(noop, reqs(()));
        // The first goes to the device at once; the rest in arrival order.
        assert_eq!(noop_order, [0, 1, 2, 3, 4]);
        assert_eq!(report.requests, [5, 0]);
        assert!(report.station.utilisation > 0.99, "{report:?}");
        assert!(report.station.max_queue == 4);
        let deadline = BlockLayer::new(
            hdd(),
            build(&SchedulerParams::default()).unwrap(),
            des::stream(1, 1),
        );
        let (dl_end, dl_order, _) = run_all(deadline, reqs(()));
        // After the first: one sweep up from where it ended, then the lowest.
        assert_eq!(dl_order, [0, 1, 3, 2, 4]);
        assert!(
            dl_end < noop_end,
            "sorting shortens the seeks: {dl_end} vs {noop_end}"
        );
    }

    #[test]
    fn queued_neighbours_merge_into_one_device_request() {
        let bl = BlockLayer::new(
            Box::new(Hdd::new(HddParams::default()).unwrap()),
            build(&SchedulerParams::default()).unwrap(),
            des::stream(1, 1),
        );
        // 64 sequential 4 KiB writes submitted together: the first goes alone, the other 63
        // merge into one 252 KiB request.
        let reqs: Vec<Request> = (0..64)
            .map(|i| Request::new(i, Op::Write, i * 8, 8, 0))
            .collect();
        let (_, order, report) = run_all(bl, reqs);
        assert_eq!(order.len(), 64);
        assert_eq!(report.merges, 62);
        assert_eq!(report.requests, [0, 2]);
        assert_eq!(report.bytes[1], 64 * 4096);
    }

    #[test]
    fn an_ssd_works_on_several_requests_at_once() {
        let bl = BlockLayer::new(
            Box::new(Ssd::new(SsdParams::default()).unwrap()),
            build(&SchedulerParams::Noop { max_sectors: 2048 }).unwrap(),
            des::stream(1, 1),
        );
        let reqs: Vec<Request> = (0..16)
            .map(|i| Request::new(i, Op::Read, i * 1000, 8, 0))
            .collect();
        let (end, _, report) = run_all(bl, reqs);
        // Two rounds of 8 channels, each round a latency plus 8 transfers on the shared path.
        assert!(end < 2 * (80_000 + 8 * 7_877) + 10_000, "{end}");
        assert!(report.station.max_queue == 8);
    }

    #[test]
    fn requests_outside_the_device_are_refused() {
        let mut bl = BlockLayer::new(
            Box::new(Ssd::new(SsdParams::default()).unwrap()),
            build(&SchedulerParams::default()).unwrap(),
            des::stream(1, 1),
        );
        let cap = bl.capacity_sectors();
        assert!(
            bl.submit(0, Request::new(0, Op::Read, cap - 4, 8, 0))
                .is_err()
        );
        assert!(bl.submit(0, Request::new(0, Op::Read, 0, 0, 0)).is_err());
    }
}
