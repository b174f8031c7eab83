//! The `[sweep]` section of a scenario: the parameter a sweep varies, its values and what is
//! plotted, and its checks (every value must give a valid scenario). Running a sweep and
//! drawing its results is `sweep.rs`'s.

use serde::Deserialize;

use super::Scenario;
use crate::error::SimError;

/// Most values a sweep may take.
pub const SWEEP_VALUES_MAX: usize = 64;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// A workload field (set in every workload) or a scenario one: see `PARAMETERS`.
    pub parameter: String,
    pub values: Vec<f64>,
    /// What is plotted.
    #[serde(default)]
    pub metric: Metric,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    #[default]
    MbPerS,
    /// Requests (or messages) per second.
    Iops,
    /// The run's time, in ms.
    Ms,
}

/// The parameters a sweep can vary.
pub const PARAMETERS: &[&str] = &[
    "record_bytes",
    "bytes",
    "file_bytes",
    "queue_depth",
    "messages",
    "message_bytes",
    "sessions",
    "distance",
    "message_cpu_ns",
    "memory.page_cache_bytes",
    "writeback.dirty_ratio",
    "writeback.dirty_background_ratio",
    "pvfs.servers",
    "pvfs.clients",
    "pvfs.stripe_bytes",
    "pvfs.link_mb_s",
    "pvfs.latency_us",
    "mailfs.accounts",
    "mailfs.connections",
    "mailfs.block_bytes",
    "mailfs.readahead_blocks",
    "mailfs.link_mb_s",
    "mailfs.account_mb_s",
    "mailfs.latency_us",
    "cluster.nodes",
    "cluster.node_cores",
    "cluster.directory_query_ns",
    "cluster.queries_per_message",
    "cluster.users_per_node",
    "cluster.login_interval_s",
    "cluster.link_mb_s",
    "cluster.replicas",
    "cluster.sync_us",
    "cluster.connections_per_node",
];

/// `s` with the sweep's parameter set to `v`; the result is checked as a scenario file is.
pub fn apply(s: &Scenario, parameter: &str, v: f64) -> Result<Scenario, SimError> {
    let mut s = s.clone();
    s.sweep = None;
    let whole = |v: f64| -> Result<u64, SimError> {
        if v >= 0.0 && v.fract() == 0.0 && v <= u64::MAX as f64 {
            Ok(v as u64)
        } else {
            Err(SimError::Scenario(format!(
                "sweep: {parameter} takes whole numbers, not {v}"
            )))
        }
    };
    let small = |v: f64| -> Result<u32, SimError> {
        u32::try_from(whole(v)?)
            .map_err(|_| SimError::Scenario(format!("sweep: {parameter} {v} is too large")))
    };
    match parameter {
        "memory.page_cache_bytes" => s.memory.page_cache_bytes = whole(v)?,
        "writeback.dirty_ratio" => s.writeback.dirty_ratio = v,
        "writeback.dirty_background_ratio" => s.writeback.dirty_background_ratio = v,
        "pvfs.servers" => s.pvfs.servers = small(v)?,
        "pvfs.clients" => s.pvfs.clients = small(v)?,
        "pvfs.stripe_bytes" => s.pvfs.stripe_bytes = whole(v)?,
        "pvfs.link_mb_s" => s.pvfs.link_mb_s = v,
        "pvfs.latency_us" => s.pvfs.latency_us = v,
        "mailfs.accounts" => s.mailfs.accounts = small(v)?,
        "mailfs.connections" => s.mailfs.connections = small(v)?,
        "mailfs.block_bytes" => s.mailfs.block_bytes = whole(v)?,
        "mailfs.readahead_blocks" => s.mailfs.readahead_blocks = small(v)?,
        "mailfs.link_mb_s" => s.mailfs.link_mb_s = v,
        "mailfs.account_mb_s" => s.mailfs.account_mb_s = v,
        "mailfs.latency_us" => s.mailfs.latency_us = v,
        "cluster.nodes" => s.cluster.nodes = small(v)?,
        "cluster.node_cores" => s.cluster.node_cores = v,
        "cluster.directory_query_ns" => s.cluster.directory_query_ns = v,
        "cluster.queries_per_message" => s.cluster.queries_per_message = v,
        "cluster.users_per_node" => s.cluster.users_per_node = whole(v)?,
        "cluster.login_interval_s" => s.cluster.login_interval_s = v,
        "cluster.link_mb_s" => s.cluster.link_mb_s = v,
        "cluster.replicas" => s.cluster.replicas = small(v)?,
        "cluster.sync_us" => s.cluster.sync_us = v,
        "cluster.connections_per_node" => s.cluster.connections_per_node = small(v)?,
        _ => {
            for w in &mut s.workloads {
                match parameter {
                    "record_bytes" => w.record_bytes = whole(v)?,
                    "bytes" => w.bytes = whole(v)?,
                    "file_bytes" => w.file_bytes = Some(whole(v)?),
                    "queue_depth" => w.queue_depth = small(v)?,
                    "messages" => w.messages = whole(v)?,
                    "message_bytes" => w.message_bytes = whole(v)?,
                    "sessions" => w.sessions = small(v)?,
                    "distance" => w.distance = whole(v)?,
                    "message_cpu_ns" => w.message_cpu_ns = v,
                    _ => {
                        return Err(SimError::Scenario(format!(
                            "sweep: unknown parameter {parameter:?}; one of {}",
                            PARAMETERS.join(", ")
                        )));
                    }
                }
            }
        }
    }
    s.check()
        .map_err(|e| SimError::Scenario(format!("sweep: {parameter} = {v}: {e}")))?;
    Ok(s)
}

/// Checks a sweep when its scenario is read: `check_spec`, and every value giving a valid
/// scenario.
pub fn check(s: &Scenario, sweep: &SweepSpec) -> Result<(), SimError> {
    check_spec(sweep)?;
    for &v in &sweep.values {
        apply(s, &sweep.parameter, v)?;
    }
    Ok(())
}

/// A known parameter and 1..=`SWEEP_VALUES_MAX` finite values.
pub(crate) fn check_spec(sweep: &SweepSpec) -> Result<(), SimError> {
    if !PARAMETERS.contains(&sweep.parameter.as_str()) {
        return Err(SimError::Scenario(format!(
            "sweep: unknown parameter {:?}; one of {}",
            sweep.parameter,
            PARAMETERS.join(", ")
        )));
    }
    if sweep.values.is_empty() || sweep.values.len() > SWEEP_VALUES_MAX {
        return Err(SimError::Scenario(format!(
            "sweep: 1..={SWEEP_VALUES_MAX} values"
        )));
    }
    for &v in &sweep.values {
        if !v.is_finite() {
            return Err(SimError::Scenario(format!("sweep: {v} is not a number")));
        }
    }
    Ok(())
}
