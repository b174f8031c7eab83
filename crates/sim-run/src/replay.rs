//! A `trace` workload: a block trace replayed at the block layer, each request at its time
//! in the trace (open loop) or as fast as the device goes with `queue_depth` outstanding.

use std::collections::HashMap;

use des::{Latencies, Nanos, Scheduler};
use sim_models::{Request, SECTOR_BYTES};

use crate::direct::block_layer;
use crate::error::SimError;
use crate::report::{Logged, Run};
use crate::scenario::{Scenario, Timing, Workload};
use crate::trace::TraceRecord;

enum Ev {
    Submit(usize),
    Done(Request),
}

pub(crate) fn run(
    s: &Scenario,
    w: &Workload,
    seed: u64,
    keep_log: bool,
    records: &[TraceRecord],
) -> Result<(Run, Option<Vec<Logged>>), SimError> {
    if records.is_empty() {
        return Err(SimError::Scenario(format!(
            "{}: the trace has no reads or writes",
            w.name
        )));
    }
    let mut bl = block_layer(s, seed, 1)?;
    let capacity = bl.capacity_sectors() * SECTOR_BYTES;
    let end = records
        .iter()
        .map(|r| r.offset + r.bytes)
        .max()
        .unwrap_or(0);
    if end > capacity {
        return Err(SimError::Scenario(format!(
            "{}: the trace reaches byte {end}, past the device's {capacity}",
            w.name
        )));
    }
    let timed = w.timing == Timing::Trace && records.iter().all(|r| r.time_ns.is_some());
    let mut sim: Scheduler<Ev> = Scheduler::new();
    let mut outstanding: HashMap<u64, Nanos> = HashMap::new();
    let mut latencies = Latencies::new();
    let mut log = keep_log.then(Vec::new);
    let mut next = 0usize;
    if timed {
        for (i, r) in records.iter().enumerate() {
            sim.at(r.time_ns.unwrap_or(0), Ev::Submit(i));
        }
        next = records.len();
    } else {
        while next < records.len().min(w.queue_depth as usize) {
            sim.at(0, Ev::Submit(next));
            next += 1;
        }
    }
    let mut completed = 0usize;
    while let Some(ev) = sim.pop() {
        let now = sim.now();
        match ev {
            Ev::Submit(i) => {
                let r = &records[i];
                // Whole sectors: the block layer's unit.
                let sector = r.offset / SECTOR_BYTES;
                let sectors = (r.offset + r.bytes).div_ceil(SECTOR_BYTES) - sector;
                outstanding.insert(i as u64, now);
                let req = Request::new(i as u64, r.op, sector, sectors, now);
                for d in bl.submit(now, req).map_err(SimError::Model)? {
                    sim.at(d.at, Ev::Done(d.req));
                }
            }
            Ev::Done(req) => {
                for d in bl.complete(now, &req) {
                    sim.at(d.at, Ev::Done(d.req));
                }
                for id in &req.ids {
                    let start = outstanding
                        .remove(id)
                        .ok_or_else(|| SimError::Model(format!("request {id} completed twice")))?;
                    latencies.record(now - start);
                    completed += 1;
                    let r = &records[*id as usize];
                    if let Some(log) = log.as_mut() {
                        log.push(Logged {
                            id: *id,
                            op: r.op,
                            start_ns: start,
                            end_ns: now,
                            layer: "device",
                            offset_bytes: r.offset,
                            bytes: r.bytes,
                            hit: false,
                        });
                    }
                    if !timed && next < records.len() {
                        sim.at(now, Ev::Submit(next));
                        next += 1;
                    }
                }
            }
        }
    }
    if completed != records.len() {
        return Err(SimError::Model(format!(
            "{}: {completed} of {} requests completed",
            w.name,
            records.len()
        )));
    }
    let end = sim.now();
    Ok((
        Run::ended(
            &mut bl,
            end,
            records.iter().map(|r| r.bytes).sum(),
            records.len() as u64,
            latencies,
            0.0,
        ),
        log,
    ))
}
