//! The `[cluster]` section of a scenario: the cluster model's parameters (`cluster.rs`,
//! docs/simulator.md 8c), their defaults and their checks.

use serde::Deserialize;

pub const NODES_MAX: u32 = 1_024;

/// Copies of every queued message and mailbox write at most (`replicas`): each is one more
/// node's CPU, link and group commit on every message's path.
pub const REPLICAS_MAX: u32 = 8;

/// Closed-loop clients per entry node at most (`connections_per_node`).
pub const CONNECTIONS_PER_NODE_MAX: u32 = 100_000;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterParams {
    pub nodes: u32,
    /// Each node's CPU, in cores (a fraction: a cgroup's quota).
    pub node_cores: f64,
    /// CPU per message (core-ns) stored on the node that accepted it.
    pub local_ns: f64,
    /// CPU per handed-over message on the accepting node and on the owner.
    pub sender_ns: f64,
    pub owner_ns: f64,
    /// The share of messages for another node's user; negative: `(n - 1) / n` (uniform).
    pub remote_share: f64,
    pub message_bytes: u64,
    /// Bytes between the nodes per handed-over message (both ways).
    pub wire_bytes: u64,
    /// Each node's link, MB/s each way (full duplex); 0: no limit.
    pub link_mb_s: f64,
    pub latency_us: f64,
    pub directory_cores: u32,
    pub directory_query_ns: f64,
    pub queries_per_message: f64,
    pub node_queries_per_s: f64,
    pub users_per_node: u64,
    /// How often each user logs in (IMAP or POP3), seconds; 0: no logins.
    pub login_interval_s: f64,
    /// Offered messages per second, all nodes together; 0: search (the seed's method).
    pub rate_per_s: f64,
    /// One step's length (virtual seconds).
    pub seconds: f64,
    /// Copies of each queued message and each mailbox write, on this many nodes (1: no
    /// replication). Node i's partners are i+1 .. i+replicas-1 (mod nodes); a write is
    /// acknowledged once every partner has applied it and synced it.
    pub replicas: u32,
    /// CPU on a partner per replicated write applied (receiving it, its group commit's share).
    pub replica_ns: f64,
    /// CPU on the writing node per replicated write sent to one partner.
    pub replica_send_ns: f64,
    /// Bytes on the wire per replicated write to one partner (both ways summed).
    pub replica_wire_bytes: u64,
    /// Each node's own disk: one fdatasync (µs); 0: free.
    pub sync_us: f64,
    /// Each node's disk, MB/s of writes; 0: no limit.
    pub disk_mb_s: f64,
    /// fdatasyncs per store commit (data, then journal).
    pub store_syncs: u32,
    /// Closed loop: clients per entry node, each sending its next message when the last one
    /// was acknowledged (the `250`), for `seconds`; 0: the open-loop search (the seed's method).
    pub connections_per_node: u32,
    /// The load generator's CPU per message (core-ns); 0: free.
    pub generator_ns: f64,
    /// The load generator's own cores; 0: it runs on the nodes' CPU sets (its work charged to
    /// the entry node's CPU, as on a machine with fewer cores than nodes plus generator).
    pub generator_cores: f64,
}

impl Default for ClusterParams {
    fn default() -> Self {
        // Calibrated on the standard machine (docs/benchmarks.md, "Cluster (issue 20)"),
        // nodes of a quarter core as in `bench/run-cluster.sh`, a 100 Mbit/s network as
        // in the seed.
        ClusterParams {
            nodes: 3,
            node_cores: 0.25,
            local_ns: 200_000.0,
            sender_ns: 150_000.0,
            owner_ns: 150_000.0,
            remote_share: -1.0,
            message_bytes: 8192,
            wire_bytes: 8_700,
            link_mb_s: 12.5,
            latency_us: 50.0,
            directory_cores: 1,
            directory_query_ns: 50_000.0,
            queries_per_message: 0.0,
            node_queries_per_s: 1.5,
            users_per_node: 0,
            login_interval_s: 0.0,
            rate_per_s: 0.0,
            seconds: 10.0,
            replicas: 1,
            replica_ns: 100_000.0,
            replica_send_ns: 50_000.0,
            replica_wire_bytes: 8_700,
            sync_us: 0.0,
            disk_mb_s: 0.0,
            store_syncs: 2,
            connections_per_node: 0,
            generator_ns: 0.0,
            generator_cores: 0.0,
        }
    }
}

impl ClusterParams {
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.nodes == 0 || self.nodes > NODES_MAX {
            return Err(format!("cluster: nodes must be 1..={NODES_MAX}"));
        }
        if !(0.001..=1024.0).contains(&self.node_cores) {
            return Err("cluster: node_cores must be 0.001..=1024".into());
        }
        if self.directory_cores == 0 || self.directory_cores > 1024 {
            return Err("cluster: directory_cores must be 1..=1024".into());
        }
        for (name, ns) in [
            ("local_ns", self.local_ns),
            ("sender_ns", self.sender_ns),
            ("owner_ns", self.owner_ns),
            ("directory_query_ns", self.directory_query_ns),
            ("replica_ns", self.replica_ns),
            ("replica_send_ns", self.replica_send_ns),
            ("generator_ns", self.generator_ns),
        ] {
            if !(0.0..=1e9).contains(&ns) {
                return Err(format!("cluster: {name} must be 0..=1e9 ns (a second)"));
            }
        }
        if self.remote_share > 1.0 {
            return Err("cluster: remote_share must be at most 1 (negative: uniform)".into());
        }
        if !(0.0..=1e4).contains(&self.queries_per_message)
            || !(0.0..=1e6).contains(&self.node_queries_per_s)
        {
            return Err("cluster: queries_per_message and node_queries_per_s out of range".into());
        }
        if self.link_mb_s != 0.0 {
            sim_models::device::check_mb_s("cluster: link_mb_s", self.link_mb_s)?;
        }
        sim_models::device::check_us("cluster: latency_us", self.latency_us)?;
        if self.message_bytes == 0 || self.message_bytes > 1 << 30 || self.wire_bytes > 1 << 31 {
            return Err(
                "cluster: message_bytes must be 1..=1 GiB, wire_bytes at most 2 GiB".into(),
            );
        }
        if self.users_per_node > 100_000_000 || !(0.0..=1e7).contains(&self.login_interval_s) {
            return Err("cluster: users_per_node or login_interval_s out of range".into());
        }
        if self.replicas == 0 || self.replicas > REPLICAS_MAX.min(self.nodes) {
            return Err(format!(
                "cluster: replicas must be 1..={} (at most {REPLICAS_MAX}, and at most nodes)",
                REPLICAS_MAX.min(self.nodes)
            ));
        }
        if self.replica_wire_bytes > 1 << 31 {
            return Err("cluster: replica_wire_bytes at most 2 GiB".into());
        }
        sim_models::device::check_us("cluster: sync_us", self.sync_us)?;
        if self.disk_mb_s != 0.0 {
            sim_models::device::check_mb_s("cluster: disk_mb_s", self.disk_mb_s)?;
        }
        if self.store_syncs > 16 {
            return Err("cluster: store_syncs must be 0..=16".into());
        }
        if self.connections_per_node > CONNECTIONS_PER_NODE_MAX {
            return Err(format!(
                "cluster: connections_per_node must be 0..={CONNECTIONS_PER_NODE_MAX}"
            ));
        }
        if self.generator_cores != 0.0 && !(0.001..=1024.0).contains(&self.generator_cores) {
            return Err("cluster: generator_cores must be 0 or 0.001..=1024".into());
        }
        if !(0.0..=1e8).contains(&self.rate_per_s) || !(0.01..=3600.0).contains(&self.seconds) {
            return Err("cluster: rate_per_s must be 0..=1e8, seconds 0.01..=3600".into());
        }
        Ok(())
    }
}
