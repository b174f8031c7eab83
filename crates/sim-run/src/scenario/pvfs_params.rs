//! The `[pvfs]` section of a scenario: the parallel file system model's parameters
//! (`pvfs.rs`, dissertation chapter 6), their defaults and their checks.

use serde::Deserialize;
use sim_models::pagecache::PAGE_BYTES;

/// Most clients or servers in one run.
pub const NODES_MAX: u32 = 1_024;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PvfsParams {
    pub servers: u32,
    pub clients: u32,
    pub stripe_bytes: u64,
    /// Each node's link (payload bandwidth before headers).
    pub link_mb_s: f64,
    /// One way, between any two nodes.
    pub latency_us: f64,
    pub mtu_bytes: u64,
    /// TCP/IP and Ethernet headers per packet.
    pub header_bytes: u64,
    /// A small request or acknowledgement message.
    pub control_bytes: u64,
}

impl Default for PvfsParams {
    fn default() -> Self {
        // Gigabit Ethernet, MTU 1500, PVFS's 64 KiB stripe (6.3).
        PvfsParams {
            servers: 4,
            clients: 1,
            stripe_bytes: 64 << 10,
            link_mb_s: 125.0,
            latency_us: 50.0,
            mtu_bytes: 1500,
            header_bytes: 66,
            control_bytes: 128,
        }
    }
}

impl PvfsParams {
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.servers == 0
            || self.servers > NODES_MAX
            || self.clients == 0
            || self.clients > NODES_MAX
        {
            return Err(format!("pvfs: servers and clients must be 1..={NODES_MAX}"));
        }
        if self.stripe_bytes == 0 || !self.stripe_bytes.is_multiple_of(PAGE_BYTES) {
            return Err("pvfs: stripe_bytes must be a positive multiple of 4096".into());
        }
        sim_models::device::check_mb_s("pvfs: link_mb_s", self.link_mb_s)?;
        sim_models::device::check_us("pvfs: latency_us", self.latency_us)?;
        if self.mtu_bytes <= self.header_bytes {
            return Err("pvfs: mtu_bytes must exceed header_bytes".into());
        }
        Ok(())
    }
}
