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
    /// The device, as the simulator's SSD model (latency of single small requests,
    /// bandwidth with four large ones in flight).
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

/// Source of the copy runs: larger than the last-level cache, as the page cache is.
const SOURCE_BYTES: usize = 512 << 20;

/// ns per page of copying `size` bytes at a time out of `src`, stepping through it in
/// order (a sequential `read()` copying out of the page cache), over `total` bytes.
fn streaming_copy_ns_per_page(src: &[u8], size: usize, total: u64) -> f64 {
    let mut dst = vec![0u8; size];
    let rounds = (total / size as u64).max(2);
    let mut at = 0;
    let started = Instant::now();
    for _ in 0..rounds {
        if at + size > src.len() {
            at = 0;
        }
        dst.copy_from_slice(std::hint::black_box(&src[at..at + size]));
        std::hint::black_box(&mut dst);
        at += size;
    }
    started.elapsed().as_nanos() as f64 / (rounds as f64 * (size as f64 / 4096.0))
}

/// ns per 4 KiB copied from a random page of `src` (a random `read()`).
fn random_page_copy_ns(src: &[u8], copies: u32) -> f64 {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let pages = src.len() / 4096;
    let mut dst = [0u8; 4096];
    let picks: Vec<usize> = (0..copies)
        .map(|_| rng.random_range(0..pages) * 4096)
        .collect();
    let started = Instant::now();
    for &at in &picks {
        dst.copy_from_slice(std::hint::black_box(&src[at..at + 4096]));
        std::hint::black_box(&mut dst);
    }
    started.elapsed().as_nanos() as f64 / f64::from(copies)
}

/// Direct reads of `size` by `threads` threads at once over the file; returns MB/s.
fn direct_read_parallel(
    path: &Path,
    threads: u64,
    size: usize,
    bytes: u64,
) -> Result<f64, ValidateError> {
    let started = Instant::now();
    let results: Vec<Result<f64, ValidateError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| s.spawn(|| real::direct(path, Op::Read, true, size, bytes / threads)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(ValidateError::Sim("a calibration thread failed".into()))
                })
            })
            .collect()
    });
    for r in results {
        r?;
    }
    Ok(bytes as f64 / started.elapsed().as_secs_f64() / 1e6)
}

pub(crate) fn calibrate(dir: &Path, quick: bool) -> Result<Calibration, ValidateError> {
    let total: u64 = if quick { 256 << 20 } else { 1 << 30 };
    let src: Vec<u8> = (0..SOURCE_BYTES).map(|i| (i % 251) as u8).collect();
    // The least of three runs per size: interference only ever adds time.
    let copy_curve: Vec<(u64, f64)> = (12..=24)
        .map(|shift| {
            let t = (0..3)
                .map(|_| streaming_copy_ns_per_page(&src, 1 << shift, total / 3))
                .fold(f64::INFINITY, f64::min);
            (1u64 << shift, t)
        })
        .collect();
    let cached = {
        let mut small: Vec<f64> = copy_curve.iter().take(5).map(|&(_, t)| t).collect();
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
    let random_page = random_page_copy_ns(&src, if quick { 20_000 } else { 100_000 });
    drop(src);
    let file_bytes: u64 = if quick { 128 << 20 } else { 512 << 20 };
    let direct_file = real::prepare(dir, "calibrate.dat", file_bytes)?;
    // A one-byte read touches one page; two bytes across a page boundary touch two: the
    // difference is the per-page cost besides the copy, the rest the system call.
    let calls = if quick { 100_000 } else { 400_000 };
    let one_page = real::pread_ns(&direct_file, 0, 1, calls)?;
    let two_pages = real::pread_ns(&direct_file, 4095, 2, calls)?;
    let page_lookup = (two_pages - one_page).max(0.0);
    let syscall = (one_page - page_lookup).max(0.0);
    let seq_bytes = file_bytes;
    // Bandwidth with several large requests in flight (as read-ahead and writeback keep
    // them); latency from single 4 KiB requests. One warm-up pass first.
    real::direct(&direct_file, Op::Read, false, 4 << 20, seq_bytes)?;
    // The device's bandwidth: the best of a few depths and sizes (its capability, which
    // read-ahead's large windows reach).
    let mut read_mb_s: f64 = 0.0;
    for (threads, size) in [(1u64, 8usize << 20), (2, 8 << 20), (4, 4 << 20)] {
        read_mb_s = read_mb_s.max(direct_read_parallel(
            &direct_file,
            threads,
            size,
            seq_bytes,
        )?);
    }
    let write_s = real::direct(&direct_file, Op::Write, false, 4 << 20, seq_bytes)?;
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
        channels: 4,
    };
    let l2 = l2_bytes();
    Ok(Calibration {
        cpu: CpuParams {
            syscall_ns: syscall,
            knee_bytes,
            cached_ns_per_page: cached,
            memory_ns_per_page: memory,
            random_page_ns: (random_page - cached).max(0.0),
            page_lookup_ns: page_lookup,
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
