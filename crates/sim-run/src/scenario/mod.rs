//! A scenario (docs/simulator.md 6): what the CLI parses from a scenario file (TOML), and
//! the checks it must pass ([`Scenario::validate`]). The models' sections (`[pvfs]`,
//! `[mailfs]`, `[cluster]`) and `[sweep]` are in the files beside this one, so the models
//! and the sweep runner use a scenario without the scenario using them.

pub(crate) mod cluster_params;
pub(crate) mod mailfs_params;
pub(crate) mod pvfs_params;
pub(crate) mod sweep_spec;

use serde::Deserialize;
use sim_models::Op;
use sim_models::device::{HddParams, SsdParams};
use sim_models::localfs::{CpuParams, WritebackParams};
use sim_models::readahead::ReadaheadParams;
use sim_models::sched::SchedulerParams;

use cluster_params::ClusterParams;
use mailfs_params::MailfsParams;
use pvfs_params::PvfsParams;
use sweep_spec::SweepSpec;

use crate::error::SimError;

/// Limits on what one scenario may ask for, so a typo cannot run for days.
pub const REPLICATIONS_MAX: u32 = 1_000;
pub const WORKLOADS_MAX: usize = 1_000;
pub const REQUESTS_PER_RUN_MAX: u64 = 100_000_000;
pub const QUEUE_DEPTH_MAX: u32 = 4_096;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "one")]
    pub seed: u64,
    #[serde(default = "one_u32")]
    pub replications: u32,
    pub device: DeviceSpec,
    #[serde(default)]
    pub scheduler: SchedulerParams,
    #[serde(default)]
    pub memory: MemoryParams,
    #[serde(default)]
    pub readahead: ReadaheadParams,
    #[serde(default)]
    pub cpu: CpuParams,
    #[serde(default)]
    pub writeback: WritebackParams,
    #[serde(default)]
    pub pvfs: PvfsParams,
    #[serde(default)]
    pub mailfs: MailfsParams,
    #[serde(default)]
    pub cluster: ClusterParams,
    #[serde(rename = "workload")]
    pub workloads: Vec<Workload>,
    /// Run every workload once per value of one parameter (`crate::sweep`).
    #[serde(default)]
    pub sweep: Option<SweepSpec>,
}

fn one() -> u64 {
    1
}
fn one_u32() -> u32 {
    1
}

/// Memory the page cache may use.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryParams {
    pub page_cache_bytes: u64,
}

impl Default for MemoryParams {
    fn default() -> Self {
        MemoryParams {
            page_cache_bytes: 1 << 30,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase", tag = "kind")]
pub enum DeviceSpec {
    Hdd(HddParams),
    Ssd(SsdParams),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    /// Reads or writes straight to the device (O_DIRECT): block layer, scheduler, device.
    Direct,
    /// `read()` or `write()` calls on one file through the page cache (read-ahead, dirty
    /// pages, writeback, the journal) and the copy to or from user space, one call at a
    /// time (psync).
    File,
    /// A block trace replayed at the block layer (`trace`, `format`, `timing`).
    Trace,
    /// Accepting mail durably (docs/simulator.md 5b): `sessions` writers deliver
    /// `messages` of `message_bytes`, `mode = "group-commit"` (the queue's preallocated
    /// segment, one write for every message waiting) or `"file-per-message"` (a file each:
    /// data, then a journal commit for the file and one for its directory).
    Queue,
    /// Deleting one message `distance` messages from the end of a mailbox of `messages`:
    /// `mode = "mbox"` (the tail behind it rewritten) or `"mailstow"` (a one-page mark).
    Delete,
    /// Each of `[pvfs] clients` reads or writes `bytes` of its own region of a file striped
    /// over `[pvfs] servers`, in `record_bytes` requests (docs/simulator.md 8).
    Pvfs,
    /// One program writes (create, write, fsync, close) or reads (a fresh mount) a file of
    /// `bytes` in `record_bytes` calls on the mail file system, striped over `[mailfs]
    /// accounts` (docs/simulator.md 8b).
    Mailfs,
    /// Mail offered to `[cluster] nodes` sharing one directory, at a constant rate raised
    /// until a backlog appears (docs/simulator.md 8c).
    Cluster,
}

/// How `queue` and `delete` workloads store mail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MailMode {
    GroupCommit,
    FilePerMessage,
    Mbox,
    Mailstow,
}

/// How a trace is replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Timing {
    /// Each request at its time in the trace (open loop), when the format has times.
    #[default]
    Trace,
    /// As fast as the device goes, `queue_depth` requests outstanding (closed loop).
    Fast,
}

/// The page cache at the start of a `file` workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheState {
    #[default]
    Cold,
    /// The file's pages already cached (as far as they fit).
    Warm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    #[default]
    Sequential,
    Random,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    pub kind: WorkloadKind,
    #[serde(default)]
    pub op: Op,
    #[serde(default)]
    pub pattern: Pattern,
    #[serde(default)]
    pub record_bytes: u64,
    /// Bytes moved in all.
    #[serde(default)]
    pub bytes: u64,
    #[serde(default = "one_u32")]
    pub queue_depth: u32,
    /// Where on the device: from `offset_bytes`, over `region_bytes` (default: the rest of
    /// the device).
    #[serde(default)]
    pub offset_bytes: u64,
    pub region_bytes: Option<u64>,
    /// `file` workloads: the file's size (default: `bytes`) and the cache at the start.
    pub file_bytes: Option<u64>,
    #[serde(default)]
    pub cache: CacheState,
    /// `file` writes: every write synchronous (O_SYNC), and an fsync at the end (as
    /// iozone -e and fio end_fsync; default on).
    #[serde(default)]
    pub sync: bool,
    #[serde(default = "yes")]
    pub end_fsync: bool,
    /// `trace` workloads: the file (relative to the scenario's directory), its format, and
    /// how it is timed.
    pub trace: Option<std::path::PathBuf>,
    pub format: Option<crate::trace::TraceFormat>,
    #[serde(default)]
    pub timing: Timing,
    /// `queue` and `delete` workloads.
    pub mode: Option<MailMode>,
    #[serde(default)]
    pub messages: u64,
    #[serde(default)]
    pub message_bytes: u64,
    #[serde(default = "one_u32")]
    pub sessions: u32,
    #[serde(default)]
    pub distance: u64,
    /// `queue` workloads: the implementation's CPU per message besides the device, and the
    /// cores a file per message's sessions share (docs/simulator.md 6b).
    #[serde(default)]
    pub message_cpu_ns: f64,
    #[serde(default = "one_u32")]
    pub cpus: u32,
}

impl Workload {
    /// A workload of `kind` with every other field at its default in a scenario file.
    pub fn new(name: &str, kind: WorkloadKind) -> Workload {
        Workload {
            name: name.to_string(),
            kind,
            op: Op::default(),
            pattern: Pattern::default(),
            record_bytes: 0,
            bytes: 0,
            queue_depth: 1,
            offset_bytes: 0,
            region_bytes: None,
            file_bytes: None,
            cache: CacheState::default(),
            sync: false,
            end_fsync: yes(),
            trace: None,
            format: None,
            timing: Timing::default(),
            mode: None,
            messages: 0,
            message_bytes: 0,
            sessions: 1,
            distance: 0,
            message_cpu_ns: 0.0,
            cpus: 1,
        }
    }
}

/// Most concurrent sessions of a `queue` workload.
pub const SESSIONS_MAX: u32 = 10_000;
/// Most any CPU cost may be (a second): a message's, or the local model's per call or page.
pub(crate) const CPU_NS_MAX: f64 = 1e9;
/// Most cores.
/// Longest writeback expiry or interval.
pub(crate) const INTERVAL_MS_MAX: u64 = 3_600_000;
pub(crate) const CPUS_MAX: u32 = 1_024;

fn yes() -> bool {
    true
}

impl Scenario {
    /// Parses a scenario from TOML text and validates it: for this crate's tests (the CLI
    /// parses scenario files itself, then calls [`Scenario::validate`]).
    #[cfg(test)]
    pub(crate) fn parse(text: &str) -> Result<Scenario, SimError> {
        let s: Scenario = toml::from_str(text).map_err(|e| SimError::Scenario(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// Everything a scenario read from a file must pass: [`Scenario::check`] and, with a
    /// `[sweep]`, a valid scenario at every swept value.
    pub fn validate(&self) -> Result<(), SimError> {
        self.check()?;
        if let Some(sweep) = &self.sweep {
            sweep_spec::check(self, sweep)?;
        }
        Ok(())
    }

    /// Checks a scenario built in code, its `[sweep]` aside (see [`Scenario::validate`]).
    pub fn check(&self) -> Result<(), SimError> {
        let bad = |m: String| Err(SimError::Scenario(m));
        if self.replications == 0 || self.replications > REPLICATIONS_MAX {
            return bad(format!("replications must be 1..={REPLICATIONS_MAX}"));
        }
        if self.memory.page_cache_bytes < 16 * 4096 {
            return bad("memory.page_cache_bytes must be at least 64 KiB".into());
        }
        let wb = &self.writeback;
        if !(0.0 < wb.dirty_background_ratio
            && wb.dirty_background_ratio <= wb.dirty_ratio
            && wb.dirty_ratio <= 1.0)
        {
            return bad("writeback: 0 < dirty_background_ratio <= dirty_ratio <= 1".into());
        }
        if wb.journal_bytes < 1 << 20 || wb.flush_pages == 0 || wb.writeback_interval_ms == 0 {
            return bad(
                "writeback: journal_bytes at least 1 MiB, flush_pages and writeback_interval_ms at least 1"
                    .into(),
            );
        }
        // Times that, multiplied out to ns and added up over a run, must not overflow the
        // virtual clock.
        if [
            wb.dirty_expire_ms,
            wb.writeback_interval_ms,
            wb.commit_interval_ms,
        ]
        .iter()
        .any(|&ms| ms > INTERVAL_MS_MAX)
            || wb.timestamp_granularity_ns > INTERVAL_MS_MAX * 1_000_000
        {
            return bad(format!(
                "writeback: expiry, intervals and timestamp granularity must be at most {INTERVAL_MS_MAX} ms (an hour)"
            ));
        }
        for (name, us) in [
            ("writeback.truncate_us", wb.truncate_us),
            ("writeback.truncate_us_per_mib", wb.truncate_us_per_mib),
        ] {
            sim_models::device::check_us(name, us).map_err(SimError::Scenario)?;
        }
        let cpu = &self.cpu;
        if [
            cpu.syscall_ns,
            cpu.cached_ns_per_page,
            cpu.memory_ns_per_page,
            cpu.random_page_ns,
            cpu.page_lookup_ns,
            cpu.write_page_ns,
            cpu.write_call_ns,
        ]
        .iter()
        .any(|ns| !(0.0..=CPU_NS_MAX).contains(ns))
        {
            return bad(format!(
                "cpu: every cost must be 0..={CPU_NS_MAX} ns (a second)"
            ));
        }
        if self.workloads.is_empty() || self.workloads.len() > WORKLOADS_MAX {
            return bad(format!("a scenario has 1..={WORKLOADS_MAX} workloads"));
        }
        let mut names = std::collections::HashSet::new();
        for w in &self.workloads {
            let name = &w.name;
            if name.is_empty() || !names.insert(name.clone()) {
                return bad(format!(
                    "workload names must be unique and non-empty: {name:?}"
                ));
            }
            if w.queue_depth == 0 || w.queue_depth > QUEUE_DEPTH_MAX {
                return bad(format!("{name}: queue_depth must be 1..={QUEUE_DEPTH_MAX}"));
            }
            if matches!(w.kind, WorkloadKind::Queue | WorkloadKind::Delete) {
                let mode = w.mode;
                let ok_mode = match w.kind {
                    WorkloadKind::Queue => {
                        matches!(mode, Some(MailMode::GroupCommit | MailMode::FilePerMessage))
                    }
                    _ => matches!(mode, Some(MailMode::Mbox | MailMode::Mailstow)),
                };
                if !ok_mode {
                    return bad(format!(
                        "{name}: queue workloads have mode group-commit or file-per-message, delete workloads mbox or mailstow"
                    ));
                }
                if w.messages == 0 || w.messages > REQUESTS_PER_RUN_MAX {
                    return bad(format!(
                        "{name}: messages must be 1..={REQUESTS_PER_RUN_MAX}"
                    ));
                }
                if w.message_bytes == 0 || w.message_bytes > 1 << 30 {
                    return bad(format!("{name}: message_bytes must be 1..=1 GiB"));
                }
                if w.sessions == 0 || w.sessions > SESSIONS_MAX {
                    return bad(format!("{name}: sessions must be 1..={SESSIONS_MAX}"));
                }
                if !(0.0..=CPU_NS_MAX).contains(&w.message_cpu_ns) {
                    return bad(format!("{name}: message_cpu_ns must be 0..={CPU_NS_MAX}"));
                }
                if w.cpus == 0 || w.cpus > CPUS_MAX {
                    return bad(format!("{name}: cpus must be 1..={CPUS_MAX}"));
                }
                if w.kind == WorkloadKind::Delete && w.distance >= w.messages {
                    return bad(format!("{name}: distance must be below messages"));
                }
                continue;
            }
            if w.kind == WorkloadKind::Cluster {
                self.cluster.check().map_err(SimError::Scenario)?;
                continue;
            }
            if w.kind == WorkloadKind::Trace {
                if w.trace.is_none() || w.format.is_none() {
                    return bad(format!(
                        "{name}: a trace workload names `trace` and `format`"
                    ));
                }
                continue;
            }
            if w.trace.is_some() || w.format.is_some() {
                return bad(format!(
                    "{name}: `trace` and `format` are for trace workloads"
                ));
            }
            if w.record_bytes == 0 || w.record_bytes % sim_models::SECTOR_BYTES != 0 {
                return bad(format!(
                    "{name}: record_bytes must be a positive multiple of 512"
                ));
            }
            if w.bytes < w.record_bytes {
                return bad(format!("{name}: bytes must be at least one record"));
            }
            if w.bytes / w.record_bytes > REQUESTS_PER_RUN_MAX {
                return bad(format!(
                    "{name}: more than {REQUESTS_PER_RUN_MAX} requests in one run"
                ));
            }
            if w.offset_bytes % sim_models::SECTOR_BYTES != 0 {
                return bad(format!("{name}: offset_bytes must be a multiple of 512"));
            }
            if w.region_bytes.is_some_and(|r| r < w.record_bytes) {
                return bad(format!("{name}: region_bytes must hold a record"));
            }
            if w.kind == WorkloadKind::Pvfs {
                self.pvfs.check().map_err(SimError::Scenario)?;
                if w.record_bytes % 4096 != 0 || w.bytes % w.record_bytes != 0 {
                    return bad(format!(
                        "{name}: pvfs requests are whole pages, and bytes a whole number of them"
                    ));
                }
            }
            if w.kind == WorkloadKind::Mailfs {
                self.mailfs.check().map_err(SimError::Scenario)?;
            }
            if w.kind == WorkloadKind::File {
                if w.record_bytes % 4096 != 0 && w.op == sim_models::Op::Write {
                    return bad(format!(
                        "{name}: file writes are whole pages: record_bytes a multiple of 4096"
                    ));
                }
                if w.queue_depth != 1 {
                    return bad(format!("{name}: file workloads issue one call at a time"));
                }
                if w.file_bytes.is_some_and(|f| f < w.record_bytes) {
                    return bad(format!("{name}: file_bytes must hold a record"));
                }
            }
        }
        Ok(())
    }
}
