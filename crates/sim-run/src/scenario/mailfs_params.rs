//! The `[mailfs]` section of a scenario: the mail file system model's parameters
//! (`mailfs.rs`, docs/simulator.md 8b), their defaults and their checks.

use serde::Deserialize;

pub const ACCOUNTS_MAX: u32 = 255;
pub const CONNECTIONS_MAX: u32 = 64;
pub const CORES_MAX: u32 = 1_024;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MailfsParams {
    /// Stripe width: accounts, one per replication group.
    pub accounts: u32,
    pub connections: u32,
    pub block_bytes: u64,
    pub readahead_blocks: u32,
    /// The servers run on the client's `client_cores` (loopback); false: on
    /// `server_cores` of their own.
    pub shared_cores: bool,
    pub client_cores: u32,
    pub server_cores: u32,
    /// The client's link, each way, MB/s; 0: no limit (loopback).
    pub link_mb_s: f64,
    /// Each account's own bandwidth, each way, MB/s (a provider's limit, the path to
    /// it); 0: no limit.
    pub account_mb_s: f64,
    /// One way, client to server.
    pub latency_us: f64,
    /// Bytes on the wire per byte stored: base64 in lines of 76 characters and CRLF.
    pub wire_ratio: f64,
    /// A directory message's envelope.
    pub metadata_bytes: u64,
    /// The serial path of each call, per byte written and read: the program's system
    /// call and the mount's handling of its FUSE request (copies, the file's lock).
    pub program_write_ns_per_byte: f64,
    pub program_read_ns_per_byte: f64,
    /// Sessions already logged in per account when the file is opened (a fresh mount has
    /// one, from reading the account's names); the others log in on first use.
    pub sessions_open: u32,
    /// The server's CPU to take a new session (accept, LOGIN, SELECT: Dovecot starts a
    /// process for it), and the round trips it needs.
    pub connect_ns: f64,
    pub connect_round_trips: u32,
    /// Once per file before its first byte: open or create, lookups, attributes (FUSE
    /// round trips and the engine's bookkeeping; the create's directory messages are
    /// modelled as messages).
    pub file_write_ns: f64,
    pub file_read_ns: f64,
    /// The mount's CPU per message and per byte of a block written (copy in, hash, seal,
    /// encode, send) and read (receive, decode, open, hash, reply).
    pub client_write_message_ns: f64,
    pub client_write_ns_per_byte: f64,
    pub client_read_message_ns: f64,
    pub client_read_ns_per_byte: f64,
    /// The mount's CPU per directory message beyond a block's (encoding the directory,
    /// the engine's bookkeeping).
    pub client_metadata_ns: f64,
    /// The server's CPU per APPEND and FETCH command, and per wire byte of each.
    pub server_append_ns: f64,
    pub server_append_ns_per_byte: f64,
    pub server_fetch_ns: f64,
    pub server_fetch_ns_per_byte: f64,
}

impl Default for MailfsParams {
    fn default() -> Self {
        // Four accounts of two connections and 1 MiB blocks (the mount's defaults but the
        // accounts), costs of the order measured on loopback Dovecot (docs/simulator.md 9).
        MailfsParams {
            accounts: 4,
            connections: 2,
            block_bytes: 1 << 20,
            readahead_blocks: 8,
            shared_cores: true,
            client_cores: 2,
            server_cores: 2,
            link_mb_s: 0.0,
            account_mb_s: 0.0,
            latency_us: 20.0,
            wire_ratio: 78.0 / 57.0,
            metadata_bytes: 2048,
            program_write_ns_per_byte: 0.5,
            program_read_ns_per_byte: 0.3,
            file_write_ns: 200_000.0,
            file_read_ns: 200_000.0,
            sessions_open: 1,
            connect_ns: 2_000_000.0,
            connect_round_trips: 4,
            client_write_message_ns: 50_000.0,
            client_write_ns_per_byte: 1.0,
            client_read_message_ns: 50_000.0,
            client_read_ns_per_byte: 1.0,
            client_metadata_ns: 100_000.0,
            server_append_ns: 300_000.0,
            server_append_ns_per_byte: 1.5,
            server_fetch_ns: 100_000.0,
            server_fetch_ns_per_byte: 1.0,
        }
    }
}

impl MailfsParams {
    pub(crate) fn check(&self) -> Result<(), String> {
        let counts = [
            ("accounts", self.accounts, ACCOUNTS_MAX),
            ("connections", self.connections, CONNECTIONS_MAX),
            ("client_cores", self.client_cores, CORES_MAX),
            ("server_cores", self.server_cores, CORES_MAX),
        ];
        for (name, v, max) in counts {
            if v == 0 || v > max {
                return Err(format!("mailfs: {name} must be 1..={max}"));
            }
        }
        if !self.block_bytes.is_power_of_two() || !(4096..=16 << 20).contains(&self.block_bytes) {
            return Err("mailfs: block_bytes must be a power of two, 4 KiB to 16 MiB".into());
        }
        let costs = [
            self.link_mb_s,
            self.account_mb_s,
            self.latency_us,
            self.program_write_ns_per_byte,
            self.program_read_ns_per_byte,
            self.file_write_ns,
            self.file_read_ns,
            self.connect_ns,
            self.client_write_message_ns,
            self.client_write_ns_per_byte,
            self.client_read_message_ns,
            self.client_read_ns_per_byte,
            self.client_metadata_ns,
            self.server_append_ns,
            self.server_append_ns_per_byte,
            self.server_fetch_ns,
            self.server_fetch_ns_per_byte,
        ];
        // Each is ns, ns per byte, us or MB/s: a minute's worth in ns bounds them all so
        // the virtual clock cannot overflow; rates must also move something.
        use sim_models::device::{DEVICE_MB_S_MIN, DEVICE_TIME_US_MAX};
        let cost_max = DEVICE_TIME_US_MAX * 1e3;
        if costs.iter().any(|c| !(0.0..=cost_max).contains(c))
            || [self.link_mb_s, self.account_mb_s]
                .iter()
                .any(|&r| r != 0.0 && r < DEVICE_MB_S_MIN)
        {
            return Err(format!(
                "mailfs: costs, latency and links must be 0 to {cost_max}, links 0 (unlimited) or at least {DEVICE_MB_S_MIN} MB/s"
            ));
        }
        if !self.wire_ratio.is_finite() || self.wire_ratio < 1.0 {
            return Err("mailfs: wire_ratio must be at least 1".into());
        }
        Ok(())
    }
}
