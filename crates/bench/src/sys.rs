//! What the benchmarks read from the machine: page-cache control, I/O counters, identity.

use std::fs;
use std::process::Command;

use anyhow::{Context, Result};

/// Writes back dirty pages and empties the page cache, so the next read comes from the disk.
/// Needs root; the benchmarks report "cold" figures only when this succeeded.
pub fn drop_caches() -> Result<()> {
    sync();
    fs::write("/proc/sys/vm/drop_caches", "3\n")
        .context("dropping the page cache needs root (/proc/sys/vm/drop_caches)")
}

/// Writes back every dirty page on the machine and waits for it (`sync`), so a measurement
/// does not pay for writeback left by the step before it.
pub fn sync() {
    // sync(1) never fails in a way we could act on; a command keeps this crate free of unsafe.
    let _ = Command::new("sync").status();
}

/// Bytes this process has caused to be written to storage so far (`/proc/self/io`
/// `write_bytes`): counted when pages are dirtied, so it includes writes not yet flushed.
pub fn process_write_bytes() -> u64 {
    proc_io_field("write_bytes").unwrap_or(0)
}

fn proc_io_field(field: &str) -> Option<u64> {
    let text = fs::read_to_string("/proc/self/io").ok()?;
    text.lines().find_map(|line| {
        line.strip_prefix(field)?
            .strip_prefix(": ")?
            .trim()
            .parse()
            .ok()
    })
}

/// Bytes written to whole block devices (not partitions, loop or device-mapper), machine-wide,
/// from `/proc/diskstats`; the same rule as the peer harness's `disk_bytes`.
pub fn device_write_bytes() -> u64 {
    let Ok(text) = fs::read_to_string("/proc/diskstats") else {
        return 0;
    };
    let mut sectors = 0u64;
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(name), Some(written)) = (fields.get(2), fields.get(9)) else {
            continue;
        };
        let virtual_device =
            name.starts_with("loop") || name.starts_with("ram") || name.starts_with("dm-");
        // sda1, vda2 and nvme0n1p1 are partitions; nvme0n1 is a whole disk.
        let partition = if name.starts_with("nvme") {
            name.contains('p')
        } else {
            name.ends_with(|c: char| c.is_ascii_digit())
        };
        if virtual_device || partition {
            continue;
        }
        sectors += written.parse::<u64>().unwrap_or(0);
    }
    sectors * 512
}

/// One line naming the machine: CPU model, cores, memory, kernel, and the file system of `dir`.
pub fn machine(dir: &std::path::Path) -> String {
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown cpu".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mem_gib = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .next()?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
                .map(|kb| kb >> 20)
        })
        .unwrap_or(0);
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let fs_type = Command::new("df")
        .args(["--output=fstype"])
        .arg(dir)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().nth(1).map(str::to_string))
        .unwrap_or_else(|| "unknown".into());
    format!(
        "{cpu}, {cores} cores, {mem_gib} GiB, kernel {}, {fs_type}",
        kernel.trim()
    )
}

/// The git commit of the working tree the benchmark runs from, if any.
pub fn git_commit() -> String {
    Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}
