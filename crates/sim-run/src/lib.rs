//! Scenarios for the storage simulator (docs/simulator.md 6): a scenario names a device, an
//! I/O scheduler and workloads; [`run`] drives each workload through the models, repeated
//! over seeds, and reports means with 95 % confidence intervals.
//!
//! Files: the CLI (`mailstow sim run`) reads and parses the scenario file; this crate reads
//! the trace files a scenario's trace workloads name ([`trace::read`]) and writes the result
//! files into the directory it is given ([`write_outputs`]).

pub mod cluster;
mod direct;
mod error;
mod file;
mod mail;
pub mod mailfs;
pub mod pvfs;
mod replay;
mod report;
mod scenario;
pub mod sweep;
pub mod trace;

pub use error::SimError;
pub use report::{Estimate, RequestLog, WorkloadResult, svg_chart, write_outputs};
pub use scenario::{
    CacheState, DeviceSpec, MailMode, MemoryParams, Pattern, QUEUE_DEPTH_MAX, REPLICATIONS_MAX,
    REQUESTS_PER_RUN_MAX, SESSIONS_MAX, Scenario, Timing, WORKLOADS_MAX, Workload, WorkloadKind,
};

/// Runs every workload of `scenario` `replications` times (seeds `seed`, `seed + 1`, ...);
/// `progress` hears `(runs done, runs in all)`. With `log`, the first replication's
/// requests are kept for the per-request log.
pub fn run(
    scenario: &Scenario,
    log: bool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Vec<WorkloadResult>, Vec<RequestLog>), SimError> {
    let replications = scenario.replications;
    let total = scenario.workloads.len() as u64 * u64::from(replications);
    let mut done = 0;
    let mut results = Vec::new();
    let mut logs = Vec::new();
    for w in &scenario.workloads {
        let records = match (&w.trace, w.format) {
            (Some(path), Some(format)) => trace::read(path, format, REQUESTS_PER_RUN_MAX)?,
            _ => Vec::new(),
        };
        let mut runs = Vec::new();
        for r in 0..replications {
            let seed = scenario.seed.wrapping_add(u64::from(r));
            let keep = log && r == 0;
            let (run, requests) = match w.kind {
                WorkloadKind::Direct => direct::run(scenario, w, seed, keep)?,
                WorkloadKind::File => file::run(scenario, w, seed, keep)?,
                WorkloadKind::Trace => replay::run(scenario, w, seed, keep, &records)?,
                WorkloadKind::Queue => (mail::queue(scenario, w, seed)?, None),
                WorkloadKind::Delete => (mail::delete(scenario, w, seed)?, None),
                WorkloadKind::Pvfs => (pvfs::run(scenario, w, seed)?, None),
                WorkloadKind::Mailfs => (mailfs::run(&scenario.mailfs, w)?, None),
                WorkloadKind::Cluster => (cluster::run(&scenario.cluster, w, seed)?, None),
            };
            runs.push(run);
            if let Some(requests) = requests {
                logs.push(RequestLog {
                    workload: w.name.clone(),
                    requests,
                });
            }
            done += 1;
            progress(done, total);
        }
        results.push(report::summarise(w, &runs));
    }
    Ok((results, logs))
}

#[cfg(test)]
mod tests;
