//! Real runs on this machine: plain `read()`/`write()` calls, one at a time, as fio's psync
//! engine makes them, and direct I/O for the device calibration.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rand::{RngExt, SeedableRng};
use sim_models::Op;
use sim_run::Pattern;

use crate::ValidateError;
use crate::cell::Cell;

const ALIGN: usize = 4096;

fn io(what: &Path) -> impl Fn(std::io::Error) -> ValidateError + '_ {
    move |e| ValidateError::Io(what.display().to_string(), e)
}

/// A buffer of `len` bytes aligned for O_DIRECT, without unsafe code: a larger vector,
/// used from its first aligned byte.
pub(crate) struct Aligned {
    buf: Vec<u8>,
    at: usize,
    len: usize,
}

impl Aligned {
    pub(crate) fn new(len: usize) -> Aligned {
        let buf: Vec<u8> = (0..len + ALIGN).map(|i| (i * 131 % 251) as u8).collect();
        let at = buf.as_ptr().align_offset(ALIGN);
        Aligned { buf, at, len }
    }

    pub(crate) fn get(&mut self) -> &mut [u8] {
        &mut self.buf[self.at..self.at + self.len]
    }
}

/// A test file of exactly `bytes` with data in it (written once, then reused).
pub(crate) fn prepare(dir: &Path, name: &str, bytes: u64) -> Result<PathBuf, ValidateError> {
    let path = dir.join(name);
    if std::fs::metadata(&path).is_ok_and(|m| m.len() == bytes) {
        return Ok(path);
    }
    let mut f = File::create(&path).map_err(io(&path))?;
    let chunk: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n]).map_err(io(&path))?;
        left -= n as u64;
    }
    f.sync_all().map_err(io(&path))?;
    Ok(path)
}

/// Drops the file's pages from the page cache (after writing back any dirty ones).
pub(crate) fn drop_cache(path: &Path) -> Result<(), ValidateError> {
    let f = File::open(path).map_err(io(path))?;
    f.sync_all().map_err(io(path))?;
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed)
        .map_err(|e| ValidateError::Io(path.display().to_string(), e.into()))
}

/// Caches the whole file the way a cold sequential read does: dropped, then read through
/// (read-ahead fills the cache in large folios; pages left by earlier small writes sit in
/// small ones, and a warm read over those costs a fifth more per call here).
pub(crate) fn warm(path: &Path) -> Result<(), ValidateError> {
    drop_cache(path)?;
    let mut f = File::open(path).map_err(io(path))?;
    let mut buf = vec![0u8; 1 << 20];
    while f.read(&mut buf).map_err(io(path))? > 0 {}
    Ok(())
}

/// Offsets of a run: sequential from the start (wrapping), or random records.
fn offsets(cell: &Cell) -> Vec<u64> {
    let records = (cell.file_bytes / cell.record).max(1);
    let n = cell.bytes / cell.record;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    (0..n)
        .map(|i| match cell.pattern {
            Pattern::Sequential => (i % records) * cell.record,
            Pattern::Random => rng.random_range(0..records) * cell.record,
        })
        .collect()
}

/// Runs `cell` for real `repeats` times; returns the median MB/s (the first cold read
/// after a file is written runs slower on this machine's virtual disk than the next).
pub(crate) fn measure(dir: &Path, cell: &Cell, repeats: u32) -> Result<f64, ValidateError> {
    let mut runs = Vec::new();
    for _ in 0..repeats.max(1) {
        runs.push(measure_once(dir, cell)?);
    }
    Ok(crate::stats::median(runs))
}

fn measure_once(dir: &Path, cell: &Cell) -> Result<f64, ValidateError> {
    let path = prepare(dir, "validate.dat", cell.file_bytes)?;
    let offsets = offsets(cell);
    let mut buf = vec![0x5au8; cell.record as usize];
    let seconds = match cell.op {
        Op::Read => {
            if cell.warm {
                warm(&path)?;
            } else {
                drop_cache(&path)?;
            }
            let f = File::open(&path).map_err(io(&path))?;
            let started = Instant::now();
            for &o in &offsets {
                f.read_exact_at(&mut buf, o).map_err(io(&path))?;
            }
            started.elapsed().as_secs_f64()
        }
        Op::Write => {
            drop_cache(&path)?;
            let mut options = OpenOptions::new();
            options.write(true);
            if cell.sync {
                options.custom_flags(libc::O_SYNC);
            }
            let f = options.open(&path).map_err(io(&path))?;
            let started = Instant::now();
            for &o in &offsets {
                f.write_all_at(&buf, o).map_err(io(&path))?;
            }
            if cell.end_fsync {
                f.sync_all().map_err(io(&path))?;
            }
            started.elapsed().as_secs_f64()
        }
    };
    Ok(cell.bytes as f64 / seconds.max(1e-9) / 1e6)
}

/// `path` opened for direct reads or writes.
fn open_direct(path: &Path, op: Op) -> Result<File, ValidateError> {
    let mut options = OpenOptions::new();
    options.custom_flags(libc::O_DIRECT);
    match op {
        Op::Read => options.read(true),
        Op::Write => options.write(true),
    };
    options.open(path).map_err(io(path))
}

/// Direct I/O of `bytes` in `record` requests (sequential or random over the file);
/// returns seconds.
pub(crate) fn direct(
    path: &Path,
    op: Op,
    random: bool,
    record: usize,
    bytes: u64,
) -> Result<f64, ValidateError> {
    let size = std::fs::metadata(path).map_err(io(path))?.len();
    let f = open_direct(path, op)?;
    let mut buf = Aligned::new(record);
    let records = (size / record as u64).max(1);
    let n = bytes / record as u64;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let started = Instant::now();
    for i in 0..n {
        let r = if random {
            rng.random_range(0..records)
        } else {
            i % records
        };
        let at = r * record as u64;
        match op {
            Op::Read => f.read_exact_at(buf.get(), at).map_err(io(path))?,
            Op::Write => f.write_all_at(buf.get(), at).map_err(io(path))?,
        }
    }
    if op == Op::Write {
        f.sync_data().map_err(io(path))?;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Where a run of direct requests goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Spread {
    /// Anywhere in the first `span` bytes of the file, each thread its own sequence.
    Random { span: u64 },
    /// Through the file in order `stride` bytes apart, the threads taking turns, as a
    /// writeback of scattered pages sorted by sector sends them.
    Sorted { stride: u64 },
}

/// 4 KiB direct requests by `threads` threads at once, `per_thread` each; returns the
/// requests per second.
pub(crate) fn direct_iops(
    path: &Path,
    op: Op,
    threads: u64,
    per_thread: u64,
    spread: Spread,
) -> Result<f64, ValidateError> {
    let size = std::fs::metadata(path).map_err(io(path))?.len();
    let next = std::sync::atomic::AtomicU64::new(0);
    let one_thread = |thread: u64| -> Result<(), ValidateError> {
        let f = open_direct(path, op)?;
        let mut buf = Aligned::new(4096);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1000 + thread);
        for _ in 0..per_thread {
            let at = match spread {
                Spread::Random { span } => {
                    rng.random_range(0..(span.min(size) / 4096).max(1)) * 4096
                }
                Spread::Sorted { stride } => {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    (i * stride.max(4096)) % (size - size % 4096).max(4096)
                }
            };
            match op {
                Op::Read => f.read_exact_at(buf.get(), at).map_err(io(path))?,
                Op::Write => f.write_all_at(buf.get(), at).map_err(io(path))?,
            }
        }
        Ok(())
    };
    let started = Instant::now();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let one_thread = &one_thread;
                s.spawn(move || one_thread(t))
            })
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .unwrap_or_else(|_| Err(ValidateError::Sim("a calibration thread failed".into())))
        })
    })?;
    Ok((threads * per_thread) as f64 / started.elapsed().as_secs_f64())
}

/// Seconds per direct 4 KiB random write followed by `fdatasync` (the device's cache
/// flush on top of the write), over `ops` writes.
pub(crate) fn direct_write_flush(path: &Path, ops: u64) -> Result<f64, ValidateError> {
    let size = std::fs::metadata(path).map_err(io(path))?.len();
    let f = open_direct(path, Op::Write)?;
    let mut buf = Aligned::new(4096);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(13);
    let started = Instant::now();
    for _ in 0..ops {
        let at = rng.random_range(0..size / 4096) * 4096;
        f.write_all_at(buf.get(), at).map_err(io(path))?;
        f.sync_data().map_err(io(path))?;
    }
    Ok(started.elapsed().as_secs_f64() / ops as f64)
}

/// Nanoseconds per `read()` of `record` bytes from a cached file: streaming through it in
/// order, or (`random`) from random record-aligned places, new ones each pass (a place
/// read again would find its page's metadata in the CPU's caches); the median of three
/// passes of `bytes` each, as the cells take the median of their runs.
pub(crate) fn cached_read_ns(
    path: &Path,
    record: usize,
    random: bool,
    bytes: u64,
) -> Result<f64, ValidateError> {
    let f = File::open(path).map_err(io(path))?;
    let size = f.metadata().map_err(io(path))?.len();
    let records = (size / record as u64).max(1);
    let calls = (bytes / record as u64).max(16);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
    let mut b = vec![0u8; record];
    let mut passes = Vec::new();
    for _ in 0..3 {
        let at: Vec<u64> = (0..calls)
            .map(|i| {
                if random {
                    rng.random_range(0..records) * record as u64
                } else {
                    (i % records) * record as u64
                }
            })
            .collect();
        let started = Instant::now();
        for &o in &at {
            f.read_exact_at(&mut b, o).map_err(io(path))?;
        }
        passes.push(started.elapsed().as_nanos() as f64 / calls as f64);
    }
    Ok(crate::stats::median(passes))
}

/// Nanoseconds per `pread` of `len` cached bytes at `at` (the least of three runs).
pub(crate) fn pread_ns(path: &Path, at: u64, len: usize, calls: u32) -> Result<f64, ValidateError> {
    let f = File::open(path).map_err(io(path))?;
    let mut b = vec![0u8; len];
    f.read_exact_at(&mut b, at).map_err(io(path))?;
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let started = Instant::now();
        for _ in 0..calls {
            f.read_exact_at(&mut b, at).map_err(io(path))?;
        }
        best = best.min(started.elapsed().as_nanos() as f64 / f64::from(calls));
    }
    Ok(best)
}

/// The device as read-ahead drives it, with no copy to user space: the file's pages
/// dropped, then one byte read from each page in order. Returns MB/s of the file.
pub(crate) fn readahead_mb_s(path: &Path) -> Result<f64, ValidateError> {
    drop_cache(path)?;
    let f = File::open(path).map_err(io(path))?;
    let size = f.metadata().map_err(io(path))?.len();
    let mut b = [0u8; 1];
    let started = Instant::now();
    for page in 0..size / 4096 {
        f.read_exact_at(&mut b, page * 4096).map_err(io(path))?;
    }
    Ok(size as f64 / started.elapsed().as_secs_f64() / 1e6)
}

/// Writes the file from its start, its pages dropped first, in `record`-byte calls over
/// `bytes` (at most the file); returns the open file, the calls made and their time in ns.
fn write_dropped(
    path: &Path,
    record: usize,
    bytes: u64,
) -> Result<(File, u64, f64), ValidateError> {
    drop_cache(path)?;
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io(path))?;
    let end = bytes.min(f.metadata().map_err(io(path))?.len());
    let buf = vec![0xa5u8; record];
    let (mut at, mut calls) = (0u64, 0u64);
    let started = Instant::now();
    while at < end {
        let n = (end - at).min(record as u64) as usize;
        f.write_all_at(&buf[..n], at).map_err(io(path))?;
        at += n as u64;
        calls += 1;
    }
    Ok((f, calls, started.elapsed().as_nanos() as f64))
}

/// The device as writeback drives it: the whole file dirtied in the page cache in 4 MiB
/// writes, then `fdatasync`. Returns (ns per page written into the cache, MB/s of the
/// `fdatasync`).
pub(crate) fn writeback(path: &Path) -> Result<(f64, f64), ValidateError> {
    let (f, _, ns) = write_dropped(path, 4 << 20, u64::MAX)?;
    let size = f.metadata().map_err(io(path))?.len();
    let started = Instant::now();
    f.sync_data().map_err(io(path))?;
    Ok((
        ns / (size / 4096).max(1) as f64,
        size as f64 / started.elapsed().as_secs_f64() / 1e6,
    ))
}

/// Nanoseconds per buffered `write()` of `record` bytes, in order from the start of the
/// file with its pages dropped (each call puts new pages in the cache), over `bytes`;
/// the written pages are then synced, untimed.
pub(crate) fn buffered_write_ns(
    path: &Path,
    record: usize,
    bytes: u64,
) -> Result<f64, ValidateError> {
    let (f, calls, ns) = write_dropped(path, record, bytes)?;
    f.sync_data().map_err(io(path))?;
    Ok(ns / calls.max(1) as f64)
}

/// What truncating costs its caller, in µs, from files freshly written, synced and reopened
/// (as an mbox is when a deletion rewrites it): the median first cut of 64 KiB after the
/// open, of the 64 KiB cuts after it, and of a 16 MiB cut. On a file system mounted with
/// online discard and without a journal the caller waits for the discard; here the first
/// cut after an open costs about twice the later ones.
pub(crate) fn truncate_us(dir: &Path, rounds: u32) -> Result<Truncates, ValidateError> {
    const SMALL: u64 = 64 << 10;
    const SMALL_CUTS: u64 = 8;
    const LARGE: u64 = 16 << 20;
    let mut first = Vec::new();
    let mut later = Vec::new();
    let mut large = Vec::new();
    let name = "truncate.dat";
    for _ in 0..rounds {
        let _ = std::fs::remove_file(dir.join(name));
        // One page stays, so the last cut frees blocks as every other truncate does.
        let path = prepare(dir, name, 4096 + LARGE + SMALL_CUTS * SMALL)?;
        let f = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(io(&path))?;
        let mut len = f.metadata().map_err(io(&path))?.len();
        let mut cut = |bytes: u64| -> Result<f64, ValidateError> {
            len -= bytes;
            let start = Instant::now();
            f.set_len(len).map_err(io(&path))?;
            Ok(start.elapsed().as_secs_f64() * 1e6)
        };
        first.push(cut(SMALL)?);
        for _ in 1..SMALL_CUTS {
            later.push(cut(SMALL)?);
        }
        large.push(cut(LARGE)?);
    }
    let _ = std::fs::remove_file(dir.join(name));
    let (first, later, large) = (
        crate::stats::median(first),
        crate::stats::median(later),
        crate::stats::median(large),
    );
    let us_per_mib = ((large - later) / ((LARGE - SMALL) as f64 / (1 << 20) as f64)).max(0.0);
    Ok(Truncates {
        us: (first - us_per_mib * (SMALL as f64 / (1 << 20) as f64)).max(0.0),
        us_per_mib,
    })
}

/// A truncate's cost to its caller: a fixed part, and a part per MiB freed.
pub(crate) struct Truncates {
    pub(crate) us: f64,
    pub(crate) us_per_mib: f64,
}
