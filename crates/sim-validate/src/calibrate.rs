//! Calibration from micro-runs: copies between buffers in memory (the copy-cost curve and
//! its knee), a one-byte `pread` (the system call), and direct I/O (the device).

use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use sim_models::Op;
use sim_models::device::SsdParams;
use sim_models::localfs::CpuParams;

use crate::ValidateError;
use crate::real;

#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    pub cpu: CpuParams,
    /// Measured: (copy size, ns per 4 KiB page) for in-memory copies.
    pub copy_curve: Vec<(u64, f64)>,
    /// The CPU's L2 from sysfs, and where the dissertation says the knee is (L2 / 8).
    pub l2_bytes: u64,
    pub expected_knee_bytes: u64,
    /// The device, as the simulator's SSD model (latency, bandwidth, one channel).
    pub device: SsdParams,
    pub page_cache_bytes: u64,
    pub readahead_pages: u64,
    pub dirty_ratio: f64,
    pub dirty_background_ratio: f64,
}

fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn l2_bytes() -> u64 {
    for i in 0..8 {
        let base = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let level = std::fs::read_to_string(format!("{base}/level")).unwrap_or_default();
        if level.trim() == "2"
            && let Ok(size) = std::fs::read_to_string(format!("{base}/size"))
        {
            let s = size.trim();
            let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
            let n: u64 = n.parse().unwrap_or(0);
            return match unit {
                "K" => n << 10,
                "M" => n << 20,
                _ => n,
            };
        }
    }
    1 << 20
}

fn mem_available() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(1 << 30, |kb| kb << 10)
}

/// The read-ahead of the block device holding `dir`.
fn readahead_pages(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(dir) else {
        return 32;
    };
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    for rel in ["queue/read_ahead_kb", "../queue/read_ahead_kb"] {
        if let Some(kb) = read_number(&format!("/sys/dev/block/{major}:{minor}/{rel}")) {
            return (kb / 4).max(1);
        }
    }
    32
}

/// ns per page of copying `size` bytes between two buffers, over `total` bytes.
fn copy_ns_per_page(size: usize, total: u64) -> f64 {
    let src: Vec<u8> = (0..size).map(|i| (i % 253) as u8).collect();
    let mut dst = vec![0u8; size];
    let rounds = (total / size as u64).max(2);
    dst.copy_from_slice(&src);
    let started = Instant::now();
    for _ in 0..rounds {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    }
    let ns = started.elapsed().as_nanos() as f64;
    ns / (rounds as f64 * (size as f64 / 4096.0))
}

pub(crate) fn calibrate(dir: &Path, quick: bool) -> Result<Calibration, ValidateError> {
    let total: u64 = if quick { 256 << 20 } else { 1 << 30 };
    let copy_curve: Vec<(u64, f64)> = (12..=25)
        .map(|shift| (1u64 << shift, copy_ns_per_page(1 << shift, total)))
        .collect();
    let cached = {
        let mut small: Vec<f64> = copy_curve.iter().take(4).map(|&(_, t)| t).collect();
        small.sort_by(f64::total_cmp);
        small[small.len() / 2]
    };
    // The knee: the largest size still within a quarter of the small copies' cost.
    let knee_bytes = copy_curve
        .iter()
        .take_while(|&&(_, t)| t <= cached * 1.25)
        .last()
        .map_or(4096, |&(s, _)| s);
    let memory = copy_curve.last().map_or(cached, |&(_, t)| t);
    let file_bytes: u64 = if quick { 128 << 20 } else { 512 << 20 };
    let direct_file = real::prepare(dir, "calibrate.dat", file_bytes)?;
    let syscall = real::syscall_ns(&direct_file, if quick { 100_000 } else { 400_000 })?;
    let seq_bytes = file_bytes;
    let read_s = real::direct(&direct_file, Op::Read, false, 1 << 20, seq_bytes)?;
    let write_s = real::direct(&direct_file, Op::Write, false, 1 << 20, seq_bytes)?;
    let read_mb_s = seq_bytes as f64 / read_s / 1e6;
    let write_mb_s = seq_bytes as f64 / write_s / 1e6;
    let ops: u64 = if quick { 2_000 } else { 10_000 };
    let rr = real::direct(&direct_file, Op::Read, true, 4096, ops * 4096)? / ops as f64;
    let rw = real::direct(&direct_file, Op::Write, true, 4096, ops * 4096)? / ops as f64;
    let transfer = |mb_s: f64| 4096.0 / (mb_s * 1e6);
    let device = SsdParams {
        capacity_bytes: 1 << 40,
        read_latency_us: ((rr - transfer(read_mb_s)) * 1e6).max(0.0),
        write_latency_us: ((rw - transfer(write_mb_s)) * 1e6).max(0.0),
        read_mb_s,
        write_mb_s,
        channels: 1,
    };
    let l2 = l2_bytes();
    Ok(Calibration {
        cpu: CpuParams {
            syscall_ns: syscall,
            knee_bytes,
            cached_ns_per_page: cached,
            memory_ns_per_page: memory,
        },
        copy_curve,
        l2_bytes: l2,
        expected_knee_bytes: l2 / 8,
        device,
        page_cache_bytes: mem_available(),
        readahead_pages: readahead_pages(dir),
        dirty_ratio: read_number("/proc/sys/vm/dirty_ratio").unwrap_or(20) as f64 / 100.0,
        dirty_background_ratio: read_number("/proc/sys/vm/dirty_background_ratio").unwrap_or(10)
            as f64
            / 100.0,
    })
}
