//! How fast the core runs (`mailstow sim speed`): a closed queueing network of the shape the
//! storage models have, timed on the wall clock by the caller.

use crate::{Nanos, Scheduler, Station, exponential, stream};

/// What a speed run did.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeedReport {
    pub events: u64,
    /// Virtual time reached.
    pub virtual_ns: Nanos,
    /// Mean utilisation of the stations (a sanity check on the model: about
    /// `jobs / (jobs + stations - 1)` for this balanced network).
    pub mean_utilisation: f64,
}

#[derive(Clone, Copy)]
enum Event {
    /// A station finishes its current job.
    Done { station: u32 },
}

/// Runs `events` service completions of `jobs` jobs circulating over `stations` single-server
/// FIFO stations with exponential service (mean 10 µs), each job going next to a random
/// station. Every event pops the queue, draws two random numbers, updates two stations'
/// statistics and schedules up to two events: the per-event work of a storage model.
pub fn speed(events: u64, stations: u32, jobs: u32, seed: u64) -> SpeedReport {
    assert!(
        stations > 0 && jobs > 0,
        "a network needs stations and jobs"
    );
    const MEAN_SERVICE_NS: f64 = 10_000.0;
    let mut rng = stream(seed, 0);
    let mut sched: Scheduler<Event> = Scheduler::new();
    let mut st: Vec<Station> = (0..stations)
        .map(|i| Station::new(format!("s{i}"), 1))
        .collect();
    let place = |rng: &mut crate::Stream| -> u32 {
        use rand::RngExt;
        rng.random_range(0..stations)
    };
    // Start: every job joins a random station.
    for _ in 0..jobs {
        let s = place(&mut rng);
        let station = &mut st[s as usize];
        if station.idle_server() {
            station.start(0);
            let t = exponential(&mut rng, MEAN_SERVICE_NS) as Nanos;
            sched.at(t, Event::Done { station: s });
        } else {
            station.enqueue(0);
        }
    }
    while sched.events_run() < events {
        let Some(Event::Done { station }) = sched.pop() else {
            break;
        };
        let now = sched.now();
        let from = &mut st[station as usize];
        from.finish(now);
        if from.waiting() > 0 {
            from.dequeue(now);
            from.start(now);
            let t = exponential(&mut rng, MEAN_SERVICE_NS) as Nanos;
            sched.after(t, Event::Done { station });
        }
        let to_id = place(&mut rng);
        let to = &mut st[to_id as usize];
        if to.idle_server() {
            to.start(now);
            let t = exponential(&mut rng, MEAN_SERVICE_NS) as Nanos;
            sched.after(t, Event::Done { station: to_id });
        } else {
            to.enqueue(now);
        }
    }
    let now = sched.now();
    let mean_utilisation = st
        .iter_mut()
        .map(|s| s.report(now).utilisation)
        .sum::<f64>()
        / f64::from(stations);
    SpeedReport {
        events: sched.events_run(),
        virtual_ns: now,
        mean_utilisation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_is_deterministic_and_behaves_like_one() {
        let a = speed(200_000, 8, 8, 42);
        assert_eq!(a, speed(200_000, 8, 8, 42));
        assert_ne!(a.virtual_ns, speed(200_000, 8, 8, 43).virtual_ns);
        assert_eq!(a.events, 200_000);
        // A closed network of 8 jobs over 8 balanced stations: utilisation 8/15.
        assert!((a.mean_utilisation - 8.0 / 15.0).abs() < 0.02, "{a:?}");
        // Throughput by Little's law: completions per station per mean service time.
        let per_station_rate = a.events as f64 / 8.0 / a.virtual_ns as f64 * 10_000.0;
        assert!(
            (per_station_rate - a.mean_utilisation).abs() < 0.02,
            "{a:?}"
        );
    }
}
