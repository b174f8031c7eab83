//! A `file` workload: `read()` calls on one file through the local file system model (page
//! cache, read-ahead, copy), one call at a time as a `psync` reader issues them.

use des::{Latencies, Nanos, Scheduler};
use rand::RngExt;
use sim_models::Op;
use sim_models::Request;
use sim_models::localfs::{LocalFs, Step};

use crate::direct::{block_layer, local_fs};
use crate::error::SimError;
use crate::report::{Logged, Run};
use crate::scenario::{CacheState, Pattern, Scenario, Workload};

enum Ev {
    Io(Request),
    Call {
        call: u64,
        hit: bool,
    },
    /// The flusher's periodic wake-up.
    Tick,
}

fn apply(sim: &mut Scheduler<Ev>, step: Step) {
    for d in step.dispatches {
        sim.at(d.at, Ev::Io(d.req));
    }
    for c in step.done {
        sim.at(
            c.at,
            Ev::Call {
                call: c.call,
                hit: c.hit,
            },
        );
    }
}

pub(crate) fn run(
    s: &Scenario,
    w: &Workload,
    seed: u64,
    keep_log: bool,
) -> Result<(Run, Option<Vec<Logged>>), SimError> {
    let block = block_layer(s, seed, 1)?;
    let mut fs = local_fs(s, block);
    let size = w.file_bytes.unwrap_or(w.bytes);
    let file = fs
        .create(size)
        .map_err(|e| SimError::Scenario(format!("{}: {e}", w.name)))?;
    if w.cache == CacheState::Warm {
        fs.warm(file).map_err(SimError::Model)?;
    }
    let records = size / w.record_bytes;
    let total = w.bytes / w.record_bytes;
    let mut rng = des::stream(seed, 2);
    let mut offset_of = |i: u64| match w.pattern {
        Pattern::Sequential => (i % records) * w.record_bytes,
        Pattern::Random => rng.random_range(0..records) * w.record_bytes,
    };
    let mut sim: Scheduler<Ev> = Scheduler::new();
    let mut latencies = Latencies::new();
    let mut log = keep_log.then(Vec::new);
    let mut hits = 0u64;
    let mut started: Nanos = 0;
    let mut offset = offset_of(0);
    let call = |fs: &mut LocalFs, now: Nanos, n: u64, offset: u64| match w.op {
        Op::Read => fs.read(now, n, file, offset, w.record_bytes),
        Op::Write => fs.write(now, n, file, offset, w.record_bytes, w.sync),
    };
    let step = call(&mut fs, 0, 0, offset).map_err(SimError::Model)?;
    apply(&mut sim, step);
    sim.at(
        s.writeback.writeback_interval_ms * des::MILLISECOND,
        Ev::Tick,
    );
    let mut completed = 0u64;
    // The final fsync's call number, once issued.
    let fsync_call = total;
    let mut finished = false;
    let mut finish_at: Nanos = 0;
    while !finished && let Some(ev) = sim.pop() {
        let now = sim.now();
        match ev {
            Ev::Io(req) => {
                let step = fs.complete(now, &req).map_err(SimError::Model)?;
                apply(&mut sim, step);
            }
            Ev::Tick => {
                if !finished {
                    let (step, next) = fs.tick(now).map_err(SimError::Model)?;
                    apply(&mut sim, step);
                    sim.at(next, Ev::Tick);
                }
            }
            Ev::Call { call: n, .. } if n == fsync_call => {
                finished = true;
                finish_at = now;
            }
            Ev::Call { call: n, hit } => {
                let call_no = n;
                latencies.record(now - started);
                hits += u64::from(hit);
                if let Some(log) = log.as_mut() {
                    log.push(Logged {
                        id: call_no,
                        op: w.op,
                        start_ns: started,
                        end_ns: now,
                        layer: if hit { "page cache" } else { "device" },
                        offset_bytes: offset,
                        bytes: w.record_bytes,
                        hit,
                    });
                }
                completed += 1;
                if completed < total {
                    started = now;
                    offset = offset_of(completed);
                    let step = call(&mut fs, now, completed, offset).map_err(SimError::Model)?;
                    apply(&mut sim, step);
                } else if w.op == Op::Write && w.end_fsync {
                    let step = fs.fsync(now, fsync_call, file).map_err(SimError::Model)?;
                    apply(&mut sim, step);
                } else {
                    finished = true;
                    finish_at = now;
                }
            }
        }
    }
    if completed != total || !finished {
        return Err(SimError::Model(format!(
            "{}: {completed} of {total} calls completed",
            w.name
        )));
    }
    // The run ends when the last call (or the final fsync) returns; writeback still going
    // on after that is not part of it.
    let end = finish_at;
    Ok((
        Run::ended(
            &mut fs.block,
            end,
            total * w.record_bytes,
            total,
            latencies,
            hits as f64 / total as f64,
        ),
        log,
    ))
}
