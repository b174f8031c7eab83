//! A `direct` workload: requests straight to the block layer (O_DIRECT), `queue_depth` of
//! them outstanding at a time.

use std::collections::HashMap;

use des::{Latencies, Nanos, Scheduler};
use rand::RngExt;
use sim_models::block::BlockLayer;
use sim_models::device::{Device, Hdd, Ssd};
use sim_models::{Request, SECTOR_BYTES};

use crate::error::SimError;
use crate::report::{Logged, Run};
use crate::scenario::{DeviceSpec, Pattern, Scenario, Workload};

/// The scenario's device behind its scheduler, with random stream `stream` of `seed`.
pub(crate) fn block_layer(s: &Scenario, seed: u64, stream: u64) -> Result<BlockLayer, SimError> {
    let sched = sim_models::sched::build(&s.scheduler).map_err(SimError::Model)?;
    Ok(BlockLayer::new(
        device(&s.device)?,
        sched,
        des::stream(seed, stream),
    ))
}

/// The scenario's local file system (page cache, read-ahead, CPU, writeback) over `block`.
pub(crate) fn local_fs(s: &Scenario, block: BlockLayer) -> sim_models::localfs::LocalFs {
    sim_models::localfs::LocalFs::with_writeback(
        sim_models::pagecache::PageCache::new(
            s.memory.page_cache_bytes / sim_models::pagecache::PAGE_BYTES,
        ),
        block,
        s.readahead.clone(),
        s.cpu.clone(),
        s.writeback.clone(),
    )
}

pub(crate) fn device(spec: &DeviceSpec) -> Result<Box<dyn Device>, SimError> {
    Ok(match spec {
        DeviceSpec::Hdd(p) => Box::new(Hdd::new(p.clone()).map_err(SimError::Model)?),
        DeviceSpec::Ssd(p) => Box::new(Ssd::new(p.clone()).map_err(SimError::Model)?),
    })
}

/// Makes the workload's requests, numbered in order.
struct Generator<'w> {
    w: &'w Workload,
    records: u64,
    sectors: u64,
    issued: u64,
    rng: des::Stream,
}

impl Generator<'_> {
    fn issue(
        &mut self,
        now: Nanos,
        sim: &mut Scheduler<Request>,
        bl: &mut BlockLayer,
        outstanding: &mut HashMap<u64, (Nanos, u64)>,
    ) -> Result<(), SimError> {
        let w = self.w;
        let record = match w.pattern {
            Pattern::Sequential => self.issued % self.records,
            Pattern::Random => self.rng.random_range(0..self.records),
        };
        let sector = (w.offset_bytes + record * w.record_bytes) / SECTOR_BYTES;
        let req = Request::new(self.issued, w.op, sector, self.sectors, now);
        outstanding.insert(self.issued, (now, sector));
        self.issued += 1;
        for d in bl.submit(now, req).map_err(SimError::Model)? {
            sim.at(d.at, d.req);
        }
        Ok(())
    }
}

pub(crate) fn run(
    s: &Scenario,
    w: &Workload,
    seed: u64,
    keep_log: bool,
) -> Result<(Run, Option<Vec<Logged>>), SimError> {
    let mut bl = block_layer(s, seed, 1)?;
    let capacity = bl.capacity_sectors() * SECTOR_BYTES;
    let region = w
        .region_bytes
        .unwrap_or(capacity.saturating_sub(w.offset_bytes));
    if w.offset_bytes.saturating_add(region) > capacity || region < w.record_bytes {
        return Err(SimError::Scenario(format!(
            "{}: offset_bytes + region_bytes must lie within the device ({capacity} bytes)",
            w.name
        )));
    }
    let records = region / w.record_bytes;
    let total = w.bytes / w.record_bytes;
    let sectors = w.record_bytes / SECTOR_BYTES;
    let mut sim: Scheduler<Request> = Scheduler::new();
    let mut outstanding: HashMap<u64, (Nanos, u64)> = HashMap::new();
    let mut latencies = Latencies::new();
    let mut log = keep_log.then(Vec::new);
    let mut requests = Generator {
        w,
        records,
        sectors,
        issued: 0,
        rng: des::stream(seed, 2),
    };
    for _ in 0..u64::from(w.queue_depth).min(total) {
        requests.issue(0, &mut sim, &mut bl, &mut outstanding)?;
    }
    let mut completed = 0u64;
    while let Some(done) = sim.pop() {
        let now = sim.now();
        for d in bl.complete(now, &done) {
            sim.at(d.at, d.req);
        }
        for id in &done.ids {
            let (start, sector) = outstanding
                .remove(id)
                .ok_or_else(|| SimError::Model(format!("request {id} completed twice")))?;
            latencies.record(now - start);
            completed += 1;
            if let Some(log) = log.as_mut() {
                log.push(Logged {
                    id: *id,
                    op: w.op,
                    start_ns: start,
                    end_ns: now,
                    layer: "device",
                    offset_bytes: sector * SECTOR_BYTES,
                    bytes: w.record_bytes,
                    hit: false,
                });
            }
            if requests.issued < total {
                requests.issue(now, &mut sim, &mut bl, &mut outstanding)?;
            }
        }
    }
    if completed != total || !outstanding.is_empty() {
        return Err(SimError::Model(format!(
            "{}: {completed} of {total} requests completed",
            w.name
        )));
    }
    let end = sim.now();
    Ok((
        Run::ended(&mut bl, end, total * w.record_bytes, total, latencies, 0.0),
        log,
    ))
}
