//! Calibration from micro-runs: copies between buffers in memory (the copy-cost curve and
//! its knee), a one-byte `pread` (the system call), and direct I/O (the device).

use std::path::Path;

use serde::Serialize;
use sim_models::Op;
use sim_models::device::SsdParams;
use sim_models::localfs::{CpuParams, JournalMode};

use crate::ValidateError;
use crate::real;

#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    pub cpu: CpuParams,
    /// Measured: (record size, ns per 4 KiB page copied) for `read()` of a cached file.
    pub copy_curve: Vec<(u64, f64)>,
    /// The CPU's L2 from sysfs, and where the dissertation says the knee is (L2 / 8).
    pub l2_bytes: u64,
    /// The last-level cache: where the copy's data goes once it no longer fits L2.
    pub llc_bytes: u64,
    pub expected_knee_bytes: u64,
    /// The device, as the simulator's SSD model (latency of single small requests,
    /// bandwidth with four large ones in flight).
    pub device: SsdParams,
    pub page_cache_bytes: u64,
    pub readahead_pages: u64,
    /// `max_sectors_kb`: read-ahead windows and writeback runs go out in pieces this big.
    pub max_request_bytes: u64,
    pub dirty_ratio: f64,
    pub dirty_background_ratio: f64,
    /// The journal of the file system calibrated on (ext4's `journal_task` says whether it
    /// has one; `ordered`, ext4's default, when it cannot be told).
    pub journal: JournalMode,
    /// The coarse clock's tick: a write changes a file's modification time (so dirties
    /// its inode and needs a journal commit to sync) at most once per tick.
    pub timestamp_granularity_ns: u64,
    /// A truncate's cost to its caller: fixed, and per MiB freed (`WritebackParams`).
    pub truncate_us: f64,
    pub truncate_us_per_mib: f64,
}

impl Calibration {
    /// The device's figures on one line, as `sim validate` prints them.
    pub fn device_summary(&self) -> String {
        let d = &self.device;
        format!(
            "read {:.0} MB/s ({:.0} one request) {:.0} us, write {:.0} MB/s ({:.0} one request) {:.0} us, {} channels, flush {:.0} us",
            d.read_mb_s,
            d.request_read_mb_s,
            d.read_latency_us,
            d.write_mb_s,
            d.request_write_mb_s,
            d.write_latency_us,
            d.channels,
            d.flush_latency_us
        ) + &if d.map_region_bytes > 0 {
            format!(
                ", map {} KiB regions, {} MiB cached, lookup {:.1} us",
                d.map_region_bytes >> 10,
                d.map_cache_bytes >> 20,
                d.map_miss_us
            )
        } else {
            ", no map".to_string()
        }
    }
}

fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The data caches of CPU 0 from sysfs: (level, bytes), in level order.
fn data_caches() -> Vec<(u32, u64)> {
    let mut caches: Vec<(u32, u64)> = (0..8)
        .filter_map(|i| {
            let base = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
            let read = |name: &str| std::fs::read_to_string(format!("{base}/{name}")).ok();
            if read("type")?.trim() == "Instruction" {
                return None;
            }
            let level: u32 = read("level")?.trim().parse().ok()?;
            let size = read("size")?;
            let s = size.trim();
            let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
            let n: u64 = n.parse().ok()?;
            let bytes = match unit {
                "K" => n << 10,
                "M" => n << 20,
                "G" => n << 30,
                _ => n,
            };
            Some((level, bytes))
        })
        .collect();
    caches.sort_unstable();
    caches
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

/// A queue setting (`queue/<name>`) of the block device holding `dir` (or of the whole
/// disk when `dir` is on a partition).
fn queue_setting(dir: &Path, name: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    ["queue", "../queue"]
        .iter()
        .find_map(|q| read_number(&format!("/sys/dev/block/{major}:{minor}/{q}/{name}")))
}

/// The read-ahead of the block device holding `dir`.
fn readahead_pages(dir: &Path) -> u64 {
    queue_setting(dir, "read_ahead_kb").map_or(32, |kb| (kb / 4).max(1))
}

/// The largest request the device's queue builds.
fn max_request_bytes(dir: &Path) -> u64 {
    queue_setting(dir, "max_sectors_kb").map_or(1 << 20, |kb| (kb << 10).max(4096))
}

/// Record sizes of the copy-cost curve: odd powers of two and 16 MiB, none a cell's
/// record size.
/// A one-page read is the first: it fixes the call's own cost.
const CURVE_SHIFTS: [u32; 9] = [12, 13, 15, 17, 19, 21, 23, 24, 25];

pub(crate) fn calibrate(dir: &Path, quick: bool) -> Result<Calibration, ValidateError> {
    // As large as the cells' file: the device's translation map is measured over the
    // spans the cells use.
    let file_bytes: u64 = if quick { 256 << 20 } else { 1 << 30 };
    let file = real::prepare(dir, "calibrate.dat", file_bytes)?;
    real::warm(&file)?;
    // The dissertation's copy cost (3.3, 4.5): `read()` of a cached file in records of
    // growing size, the time per page. The file is larger than this CPU's caches, as a
    // page cache is, and is not the cells' file.
    let pass = file_bytes.min(128 << 20);
    let seq_ns: Vec<(u64, f64)> = CURVE_SHIFTS
        .iter()
        .map(|&s| Ok((1u64 << s, real::cached_read_ns(&file, 1 << s, false, pass)?)))
        .collect::<Result<_, ValidateError>>()?;
    // A one-byte read touches one page; two bytes across a page boundary touch two: the
    // difference is the per-page cost besides the copy.
    let calls = if quick { 100_000 } else { 400_000 };
    let one_page = real::pread_ns(&file, 0, 1, calls)?;
    let two_pages = real::pread_ns(&file, 4095, 2, calls)?;
    let page_lookup = (two_pages - one_page).max(0.0);
    // The per-page cost of small records: the slope between 32 and 128 KiB; the call's
    // own cost: what a one-page read takes beyond one page.
    let pages = |bytes: u64| bytes as f64 / 4096.0;
    let (_, t_page) = seq_ns[0];
    let (r0, t0) = seq_ns[2];
    let (r1, t1) = seq_ns[3];
    let per_page = ((t1 - t0) / (pages(r1) - pages(r0))).max(0.0);
    let syscall = (t_page - per_page).max(0.0);
    let cached = (per_page - page_lookup).max(0.0);
    let copy_curve: Vec<(u64, f64)> = seq_ns
        .iter()
        .map(|&(r, t)| (r, ((t - syscall) / pages(r) - page_lookup).max(0.0)))
        .collect();
    // The knee (4.5's `S_threshold`): the change point of the per-page cost, the split
    // of the curve into a cheaper left and a dearer right that fits it best as a step.
    // A step under 5 % is no knee: the copy never leaves the cache's speed, and the knee
    // is the largest record measured.
    let (knee_bytes, memory) = knee(&copy_curve, cached);
    // The first page of a read that does not follow the last one: its page cache entry
    // and its data are in no CPU cache, its address in no TLB.
    let random_one = real::cached_read_ns(&file, 4096, true, pass / 4)?;
    let random_page = (random_one - t_page).max(0.0);
    // The device as read-ahead and writeback drive it (large folios, requests of up to
    // the queue's largest): O_DIRECT from a user buffer is cut at the queue's segment
    // limit into smaller requests, which this virtual disk serves more slowly. The
    // median of three: its bandwidth wanders.
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    let mut write_ns = Vec::new();
    for _ in 0..5 {
        let (ns, mb_s) = real::writeback(&file)?;
        write_ns.push(ns);
        writes.push(mb_s);
        reads.push(real::readahead_mb_s(&file)?);
    }
    let read_mb_s = crate::stats::median(reads);
    let write_mb_s = crate::stats::median(writes);
    // A page written into the cache costs its copy from a large buffer and more.
    let write_page = (crate::stats::median(write_ns) - page_lookup - memory).max(0.0);
    // A small write costs more than its page: what a one-page write into the dropped
    // file takes beyond the call, its page and its copy is the file system's per call.
    let small_writes = (0..3)
        .map(|_| real::buffered_write_ns(&file, 4096, pass / 4))
        .collect::<Result<Vec<f64>, _>>()?;
    let write_call =
        (crate::stats::median(small_writes) - syscall - page_lookup - cached - write_page).max(0.0);
    let ops: u64 = if quick { 2_000 } else { 10_000 };
    let rr = real::direct(&file, Op::Read, true, 4096, ops * 4096)? / ops as f64;
    let rw = real::direct(&file, Op::Write, true, 4096, ops * 4096)? / ops as f64;
    // One request's own transfer rate: single random direct requests of 128 KiB (no
    // cell's size) against 4 KiB ones. One large read alone is slower than its bytes
    // at the bandwidth (here 1 to 2 GB/s against 3): several in flight share it.
    let large = 128 << 10;
    let large_ops = ops / 8;
    let request_rate = |op: Op, small: f64| -> Result<f64, ValidateError> {
        let t = real::direct(&file, op, true, large, large_ops * large as u64)? / large_ops as f64;
        Ok(((large - 4096) as f64 / (t - small).max(1e-9) / 1e6).max(1.0))
    };
    let request_read_mb_s = request_rate(Op::Read, rr)?;
    let request_write_mb_s = request_rate(Op::Write, rw)?;
    // The translation map (the SSD model's doc): random writes from 32 threads (as deep
    // as an fsync's writeback of scattered pages) over growing spans of the file, and
    // sorted ones 512 KiB apart through all of it. The smallest span is within any map
    // cache: it is the device without lookups.
    let per_thread = ops / 4;
    let seconds_per_write = |spread: real::Spread| -> Result<f64, ValidateError> {
        Ok(1.0 / real::direct_iops(&file, Op::Write, 32, per_thread, spread)?)
    };
    let spans: Vec<(u64, f64)> = MAP_SPANS
        .iter()
        .filter(|&&span| span < file_bytes)
        .copied()
        .chain([file_bytes])
        .map(|span| Ok((span, seconds_per_write(real::Spread::Random { span })?)))
        .collect::<Result<_, ValidateError>>()?;
    let sorted = seconds_per_write(real::Spread::Sorted {
        stride: MAP_SORTED_STRIDE,
    })?;
    let map = fit_map(&spans, (MAP_SORTED_STRIDE, sorted));
    // How many requests the device serves at once: the small span's rate against the
    // latency of one without its lookups.
    let lookups = |span: u64| map.map_or(0.0, |m| m.lookups(span) * m.miss_s);
    let rr = (rr - lookups(file_bytes)).max(0.0);
    let rw = (rw - lookups(file_bytes)).max(0.0);
    let channels = (rw / spans[0].1).round().clamp(1.0, 64.0) as u32;
    let flush = (real::direct_write_flush(&file, ops / 4)? - rw - lookups(file_bytes)).max(0.0);
    let transfer = |mb_s: f64| 4096.0 / (mb_s * 1e6);
    let device = SsdParams {
        capacity_bytes: 1 << 40,
        read_latency_us: ((rr - transfer(request_read_mb_s.min(read_mb_s))) * 1e6).max(0.0),
        write_latency_us: ((rw - transfer(request_write_mb_s.min(write_mb_s))) * 1e6).max(0.0),
        flush_latency_us: flush * 1e6,
        read_mb_s,
        write_mb_s,
        channels,
        request_read_mb_s,
        request_write_mb_s,
        map_region_bytes: map.map_or(0, |m| m.region_bytes),
        map_cache_bytes: map.map_or(0, |m| m.cache_bytes),
        map_miss_us: map.map_or(0.0, |m| m.miss_s * 1e6),
    };
    // Freeing blocks: cuts of 64 KiB and 16 MiB off a file.
    let truncates = real::truncate_us(dir, if quick { 3 } else { 5 })?;
    let caches = data_caches();
    let l2 = caches
        .iter()
        .find(|&&(level, _)| level == 2)
        .map_or(1 << 20, |&(_, b)| b);
    let llc = caches.last().map_or(l2, |&(_, b)| b.max(l2));
    Ok(Calibration {
        cpu: CpuParams {
            syscall_ns: syscall,
            knee_bytes,
            cached_ns_per_page: cached,
            memory_ns_per_page: memory,
            random_page_ns: random_page,
            page_lookup_ns: page_lookup,
            write_page_ns: write_page,
            write_call_ns: write_call,
        },
        copy_curve,
        l2_bytes: l2,
        llc_bytes: llc,
        // A cached read copies a record from page-cache pages it has not touched before
        // into the same user buffer every call: the buffer stays in the CPU's cache while
        // it and the source both fit the last level, up to half of it (docs/simulator.md
        // 7 says why this replaces the dissertation's L2 / 8).
        expected_knee_bytes: llc / 2,
        device,
        page_cache_bytes: mem_available(),
        readahead_pages: readahead_pages(dir),
        max_request_bytes: max_request_bytes(dir),
        dirty_ratio: read_number("/proc/sys/vm/dirty_ratio").unwrap_or(20) as f64 / 100.0,
        dirty_background_ratio: read_number("/proc/sys/vm/dirty_background_ratio").unwrap_or(10)
            as f64
            / 100.0,
        timestamp_granularity_ns: coarse_clock_ns(),
        journal: journal_of(dir),
        truncate_us: truncates.us,
        truncate_us_per_mib: truncates.us_per_mib,
    })
}

/// Spans of the map's random runs besides the whole file: the first within any cache.
const MAP_SPANS: [u64; 4] = [8 << 20, 32 << 20, 128 << 20, 512 << 20];
const MAP_SORTED_STRIDE: u64 = 512 << 10;

/// A translation map fitted to runs of direct writes.
#[derive(Debug, Clone, Copy, PartialEq)]
struct MapFit {
    region_bytes: u64,
    cache_bytes: u64,
    miss_s: f64,
}

impl MapFit {
    /// Lookups per request of uniformly random ones over `span` bytes: an LRU cache
    /// holds `cache / span` of the regions they touch.
    fn lookups(&self, span: u64) -> f64 {
        (1.0 - self.cache_bytes as f64 / span.max(1) as f64).max(0.0)
    }
}

/// The map that explains `spans` (span, seconds per write at depth) best, the first span's
/// time taken as the device's without lookups: the cache size (a power of two) whose
/// least-squares lookup time leaves the least error; the region size from the sorted
/// run (stride, seconds per write): one lookup per region it crosses. None when the
/// times do not rise with the span.
fn fit_map(spans: &[(u64, f64)], sorted: (u64, f64)) -> Option<MapFit> {
    let &(smallest, base) = spans.first()?;
    let &(largest, _) = spans.last()?;
    let (cache_bytes, miss_s, _) = (smallest.max(2).ilog2()..largest.max(4).ilog2())
        .map(|shift| {
            let fit = MapFit {
                region_bytes: 4096,
                cache_bytes: 1 << shift,
                miss_s: 0.0,
            };
            let (num, den) = spans.iter().fold((0.0, 0.0), |(n, d), &(span, t)| {
                let m = fit.lookups(span);
                (n + (t - base) * m, d + m * m)
            });
            let miss = if den > 0.0 { num / den } else { 0.0 };
            let error: f64 = spans
                .iter()
                .map(|&(span, t)| (t - base - miss * fit.lookups(span)).powi(2))
                .sum();
            (fit.cache_bytes, miss, error)
        })
        .min_by(|a, b| a.2.total_cmp(&b.2))?;
    // Lookups that add under a twentieth to the widest span's writes are no map.
    let added = miss_s * (1.0 - cache_bytes as f64 / largest as f64);
    if added.is_nan() || added <= base / 20.0 {
        return None;
    }
    let (stride, t) = sorted;
    let per_write = ((t - base) / miss_s).clamp(0.0, 1.0);
    let region = if per_write > 0.0 {
        (stride as f64 / per_write).min(cache_bytes as f64) as u64
    } else {
        cache_bytes
    };
    let smallest_region = stride.max(4096);
    Some(MapFit {
        region_bytes: region
            .next_power_of_two()
            .clamp(smallest_region, cache_bytes.max(smallest_region)),
        cache_bytes,
        miss_s,
    })
}

/// Re-measures only what a page written into the cache costs, on another mount of the
/// same device (data=journal: each page journaled through a buffer head, the writer
/// waiting for log space; the model has no finer mechanism for it).
pub(crate) fn write_page_ns(dir: &Path, cal: &Calibration) -> Result<f64, ValidateError> {
    let file = real::prepare(dir, "calibrate.dat", 256 << 20)?;
    let mut ns = Vec::new();
    for _ in 0..3 {
        ns.push(real::writeback(&file)?.0);
    }
    let _ = std::fs::remove_file(&file);
    Ok((crate::stats::median(ns) - cal.cpu.page_lookup_ns - cal.cpu.memory_ns_per_page).max(0.0))
}

/// The best single step through the curve's per-page costs: (last size before it, the
/// cost after it); a step of less than 5 % is none.
fn knee(curve: &[(u64, f64)], cached: f64) -> (u64, f64) {
    let mean = |xs: &[(u64, f64)]| xs.iter().map(|&(_, t)| t).sum::<f64>() / xs.len() as f64;
    let sse = |xs: &[(u64, f64)]| {
        let m = mean(xs);
        xs.iter().map(|&(_, t)| (t - m) * (t - m)).sum::<f64>()
    };
    let best = (1..curve.len())
        .map(|i| (i, sse(&curve[..i]) + sse(&curve[i..])))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let largest = curve.last().map_or(4096, |&(s, _)| s);
    match best {
        Some((i, _)) if mean(&curve[i..]) > mean(&curve[..i]) * 1.05 => {
            (curve[i - 1].0, mean(&curve[i..]).max(cached))
        }
        _ => (largest, cached),
    }
}

/// Whether the ext4 holding `dir` has a journal: its block device's name from the file's
/// device number, then `/sys/fs/ext4/<name>/journal_task` (`<none>` without a journal).
fn journal_of(dir: &Path) -> JournalMode {
    let told = || -> Option<JournalMode> {
        let st = rustix::fs::stat(dir).ok()?;
        let (major, minor) = (rustix::fs::major(st.st_dev), rustix::fs::minor(st.st_dev));
        let link = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
        let name = link.file_name()?.to_str()?.to_string();
        let task = std::fs::read_to_string(format!("/sys/fs/ext4/{name}/journal_task")).ok()?;
        Some(if task.trim() == "<none>" {
            JournalMode::NoJournal
        } else {
            JournalMode::Ordered
        })
    };
    told().unwrap_or(JournalMode::Ordered)
}

/// The coarse clock's resolution: how often a file's modification time can change (the
/// kernel stamps writes from it), so how often an overwrite dirties the inode.
fn coarse_clock_ns() -> u64 {
    let t = rustix::time::clock_getres(rustix::time::ClockId::RealtimeCoarse);
    (t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u64 = 1 << 20;

    /// Seconds per write at depth of a device with `map`, 10 us without lookups.
    fn device(map: MapFit) -> (Vec<(u64, f64)>, (u64, f64)) {
        let base = 10e-6;
        let spans = [8 * M, 32 * M, 128 * M, 512 * M]
            .map(|span| (span, base + map.miss_s * map.lookups(span)))
            .to_vec();
        let stride = MAP_SORTED_STRIDE;
        let sorted = base + map.miss_s * stride as f64 / map.region_bytes as f64;
        (spans, (stride, sorted))
    }

    #[test]
    fn the_map_fitted_is_the_map_that_made_the_times() {
        for map in [
            MapFit {
                region_bytes: 2 * M,
                cache_bytes: 64 * M,
                miss_s: 16e-6,
            },
            MapFit {
                region_bytes: 8 * M,
                cache_bytes: 16 * M,
                miss_s: 4e-6,
            },
        ] {
            let (spans, sorted) = device(map);
            let fit = fit_map(&spans, sorted).unwrap();
            assert_eq!(fit.cache_bytes, map.cache_bytes);
            assert_eq!(fit.region_bytes, map.region_bytes);
            assert!((fit.miss_s - map.miss_s).abs() < 1e-9, "{fit:?}");
        }
    }

    #[test]
    fn times_that_do_not_rise_with_the_span_are_no_map() {
        let flat: Vec<(u64, f64)> = [8 * M, 32 * M, 128 * M, 512 * M]
            .map(|s| (s, 10e-6))
            .to_vec();
        assert_eq!(fit_map(&flat, (MAP_SORTED_STRIDE, 10e-6)), None);
        // Noise that falls: no map either.
        let falling = vec![(8 * M, 10e-6), (32 * M, 9.8e-6), (512 * M, 9.5e-6)];
        assert_eq!(fit_map(&falling, (MAP_SORTED_STRIDE, 10e-6)), None);
        assert_eq!(fit_map(&[], (MAP_SORTED_STRIDE, 10e-6)), None);
    }

    #[test]
    fn a_sorted_run_as_slow_as_a_random_one_gives_the_smallest_region() {
        let map = MapFit {
            region_bytes: 2 * M,
            cache_bytes: 64 * M,
            miss_s: 16e-6,
        };
        let (spans, _) = device(map);
        let fit = fit_map(&spans, (MAP_SORTED_STRIDE, 1e-3)).unwrap();
        assert_eq!(fit.region_bytes, MAP_SORTED_STRIDE);
        let fit = fit_map(&spans, (MAP_SORTED_STRIDE, 0.0)).unwrap();
        assert_eq!(fit.region_bytes, 64 * M);
    }
}
