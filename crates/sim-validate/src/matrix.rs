//! The validation matrix: which runs are measured and simulated, and the simulation of one.

use serde::Serialize;
use sim_models::Op;
use sim_models::localfs::{JournalMode, WritebackParams};
use sim_models::readahead::ReadaheadParams;
use sim_models::sched::SchedulerParams;
use sim_run::{CacheState, DeviceSpec, MemoryParams, Pattern, Scenario, Workload, WorkloadKind};

use crate::cell::Cell;
use crate::{Calibration, ValidateError};

#[derive(Debug, Clone, Serialize)]
pub struct CellResult {
    pub name: String,
    pub sequential: bool,
    pub real_mb_s: f64,
    pub sim_mb_s: f64,
    /// |sim - real| / real.
    pub error: f64,
}

pub(crate) fn cells(quick: bool) -> Vec<Cell> {
    use Op::{Read, Write};
    use Pattern::{Random, Sequential};
    let f: u64 = if quick { 256 << 20 } else { 1 << 30 };
    let (k, m) = (1u64 << 10, 1u64 << 20);
    let mut v = vec![
        Cell::new("seq-read-cold-64k", Read, Sequential, 64 * k, f, f),
        Cell::new("seq-read-cold-1m", Read, Sequential, m, f, f),
        Cell::new("seq-read-warm-4k", Read, Sequential, 4 * k, f, f).warm(),
        Cell::new("seq-read-warm-64k", Read, Sequential, 64 * k, f, f).warm(),
        Cell::new("seq-read-warm-1m", Read, Sequential, m, f, f).warm(),
        Cell::new("seq-write-fsync-1m", Write, Sequential, m, f, f).fsync(),
        Cell::new("seq-write-osync-64k", Write, Sequential, 64 * k, 16 * m, f).osync(),
        Cell::new("rand-read-cold-4k", Read, Random, 4 * k, 8 * m, f),
        Cell::new("rand-read-warm-4k", Read, Random, 4 * k, 64 * m, f).warm(),
        Cell::new("rand-write-fsync-8k", Write, Random, 8 * k, 16 * m, f).fsync(),
        Cell::new("rand-write-osync-4k", Write, Random, 4 * k, 2 * m, f).osync(),
    ];
    if !quick {
        v.extend([
            Cell::new("seq-read-warm-128k", Read, Sequential, 128 * k, f, f).warm(),
            Cell::new("seq-read-warm-4m", Read, Sequential, 4 * m, f, f).warm(),
            Cell::new("seq-write-fsync-64k", Write, Sequential, 64 * k, f, f).fsync(),
            Cell::new("rand-read-cold-64k", Read, Random, 64 * k, 32 * m, f),
        ]);
    }
    v
}

/// Cells on a fresh ext4 mounted with `data=<mode>` on a loop device (256 MiB files).
pub(crate) fn ext4_cells(mode: JournalMode) -> Vec<Cell> {
    use Op::Write;
    use Pattern::{Random, Sequential};
    let (k, m) = (1u64 << 10, 1u64 << 20);
    let f = 256 * m;
    vec![
        Cell::new("seq-write-fsync-1m", Write, Sequential, m, f, f).fsync(),
        Cell::new("seq-write-osync-64k", Write, Sequential, 64 * k, 16 * m, f).osync(),
        Cell::new("rand-write-fsync-8k", Write, Random, 8 * k, 16 * m, f).fsync(),
    ]
    .into_iter()
    .map(|c| c.on_ext4(mode))
    .collect()
}

/// A sequential write of a file a quarter larger than the dirty limit, then `fsync`:
/// writers are throttled once a fifth (`dirty_ratio`) of the cache is dirty.
pub(crate) fn over_dirty_limit_cell(dirty_limit_bytes: u64) -> Cell {
    let m = 1u64 << 20;
    let f = (dirty_limit_bytes + dirty_limit_bytes / 4).div_ceil(m) * m;
    Cell::new(
        "seq-write-over-dirty-limit-1m",
        Op::Write,
        Pattern::Sequential,
        m,
        f,
        f,
    )
    .fsync()
}

/// A scenario of one workload on this machine: the calibrated device, CPU and memory, a
/// journal of `journal_bytes` in `journal` mode.
pub(crate) fn calibrated(
    cal: &Calibration,
    journal: JournalMode,
    journal_bytes: u64,
    workload: Workload,
) -> Scenario {
    Scenario {
        seed: 1,
        replications: 1,
        device: DeviceSpec::Ssd(cal.device.clone()),
        scheduler: SchedulerParams::default()
            .with_max_sectors(cal.max_request_bytes / sim_models::SECTOR_BYTES),
        memory: MemoryParams {
            page_cache_bytes: cal.page_cache_bytes,
        },
        readahead: ReadaheadParams {
            max_pages: cal.readahead_pages,
            min_pages: 1,
        },
        cpu: cal.cpu.clone(),
        writeback: WritebackParams {
            dirty_ratio: cal.dirty_ratio,
            dirty_background_ratio: cal.dirty_background_ratio.min(cal.dirty_ratio),
            timestamp_granularity_ns: cal.timestamp_granularity_ns,
            truncate_us: cal.truncate_us,
            truncate_us_per_mib: cal.truncate_us_per_mib,
            journal,
            journal_bytes,
            ..WritebackParams::default()
        },
        pvfs: Default::default(),
        mailfs: Default::default(),
        cluster: Default::default(),
        workloads: vec![workload],
        sweep: None,
    }
}

/// Runs a one-workload scenario.
pub(crate) fn run_one(s: &Scenario) -> Result<sim_run::WorkloadResult, ValidateError> {
    s.check().map_err(|e| ValidateError::Sim(e.to_string()))?;
    let (mut results, _) =
        sim_run::run(s, false, &mut |_, _| {}).map_err(|e| ValidateError::Sim(e.to_string()))?;
    results
        .pop()
        .ok_or_else(|| ValidateError::Sim("no result".into()))
}

/// The cell in the simulator with the calibrated parameters; returns MB/s.
pub(crate) fn simulate(cal: &Calibration, cell: &Cell) -> Result<f64, ValidateError> {
    let workload = Workload {
        op: cell.op,
        pattern: cell.pattern,
        record_bytes: cell.record,
        bytes: cell.bytes,
        file_bytes: Some(cell.file_bytes),
        cache: if cell.warm {
            CacheState::Warm
        } else {
            CacheState::Cold
        },
        sync: cell.sync,
        end_fsync: cell.end_fsync,
        ..Workload::new(&cell.name, WorkloadKind::File)
    };
    let s = calibrated(cal, cell.journal, cell.journal_bytes, workload);
    Ok(run_one(&s)?.mb_per_s.mean)
}
