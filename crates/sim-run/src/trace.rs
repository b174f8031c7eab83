//! Block traces to replay (docs/simulator.md 4): fio iolog (versions 2 and 3), blkparse
//! text, MSR Cambridge CSV and DiskSim ASCII, read into one form: (time, read or write,
//! offset, bytes). A line that is not what its format says is an error naming the line.

use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sim_models::Op;

use crate::error::SimError;

/// Longest line accepted in a trace.
pub const TRACE_LINE_BYTES_MAX: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// `fio version 2 iolog`: `file action [offset length]`; version 3 adds a leading
    /// time in ms.
    Fio,
    /// `blkparse` text: `maj,min cpu seq time pid action rwbs sector + sectors [proc]`;
    /// queue (`Q`) events, else issue (`D`) events.
    Blkparse,
    /// MSR Cambridge: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, time
    /// in 100 ns units.
    Msr,
    /// DiskSim ASCII: `time_ms devno blkno size_blocks flags` (flag bit 0: read), 512-byte
    /// blocks.
    Disksim,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRecord {
    /// Since the trace's first record (ns), when the format has times.
    pub time_ns: Option<u64>,
    pub op: Op,
    pub offset: u64,
    pub bytes: u64,
}

/// What a trace holds (the dry run's summary).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceSummary {
    pub records: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes: u64,
    pub span_seconds: Option<f64>,
    pub max_end_bytes: u64,
}

pub fn summarise(records: &[TraceRecord]) -> TraceSummary {
    let reads = records.iter().filter(|r| r.op == Op::Read).count() as u64;
    TraceSummary {
        records: records.len() as u64,
        reads,
        writes: records.len() as u64 - reads,
        bytes: records.iter().map(|r| r.bytes).sum(),
        span_seconds: records
            .last()
            .and_then(|r| r.time_ns)
            .map(|t| t as f64 / 1e9),
        max_end_bytes: records
            .iter()
            .map(|r| r.offset + r.bytes)
            .max()
            .unwrap_or(0),
    }
}

/// Reads at most `records_max` records of `path`.
pub fn read(
    path: &Path,
    format: TraceFormat,
    records_max: u64,
) -> Result<Vec<TraceRecord>, SimError> {
    let file = std::fs::File::open(path)
        .map_err(|e| SimError::Scenario(format!("{}: {e}", path.display())))?;
    parse(std::io::BufReader::new(file), format, records_max)
        .map_err(|e| SimError::Scenario(format!("{}: {e}", path.display())))
}

pub fn parse(
    input: impl BufRead,
    format: TraceFormat,
    records_max: u64,
) -> Result<Vec<TraceRecord>, String> {
    let mut out: Vec<TraceRecord> = Vec::new();
    let mut first_time: Option<u64> = None;
    let mut fio_version = 0;
    for (n, line) in input.split(b'\n').enumerate() {
        let n = n + 1;
        let line = line.map_err(|e| format!("line {n}: {e}"))?;
        if line.len() > TRACE_LINE_BYTES_MAX {
            return Err(format!("line {n}: over {TRACE_LINE_BYTES_MAX} bytes"));
        }
        let line = String::from_utf8_lossy(&line);
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| format!("line {n}: {why}: {line:?}");
        let record = match format {
            TraceFormat::Disksim => {
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.len() < 5 {
                    return Err(bad("DiskSim lines have 5 fields"));
                }
                let ms: f64 = f[0].parse().map_err(|_| bad("time"))?;
                let block: u64 = f[2].parse().map_err(|_| bad("block"))?;
                let blocks: u64 = f[3].parse().map_err(|_| bad("size"))?;
                let flags: u64 = f[4].parse().map_err(|_| bad("flags"))?;
                Some(TraceRecord {
                    time_ns: Some(non_negative_ns(ms * 1e6).ok_or_else(|| bad("time"))?),
                    op: if flags & 1 == 1 { Op::Read } else { Op::Write },
                    offset: block * 512,
                    bytes: blocks * 512,
                })
            }
            TraceFormat::Msr => {
                let f: Vec<&str> = line.split(',').map(str::trim).collect();
                if f.len() < 6 {
                    return Err(bad("MSR lines have 7 fields"));
                }
                let ticks: u64 = f[0].parse().map_err(|_| bad("timestamp"))?;
                let op = match f[3].to_ascii_lowercase().as_str() {
                    "read" => Op::Read,
                    "write" => Op::Write,
                    _ => return Err(bad("type is Read or Write")),
                };
                Some(TraceRecord {
                    time_ns: Some(ticks.saturating_mul(100)),
                    op,
                    offset: f[4].parse().map_err(|_| bad("offset"))?,
                    bytes: f[5].parse().map_err(|_| bad("size"))?,
                })
            }
            TraceFormat::Blkparse => parse_blkparse(line).map_err(&bad)?,
            TraceFormat::Fio => {
                if let Some(v) = line.strip_prefix("fio version ") {
                    fio_version = match v.split_whitespace().next() {
                        Some("2") => 2,
                        Some("3") => 3,
                        _ => return Err(bad("only iolog versions 2 and 3")),
                    };
                    continue;
                }
                if fio_version == 0 {
                    return Err(bad("an fio iolog starts with `fio version 2 iolog`"));
                }
                parse_fio(line, fio_version).map_err(&bad)?
            }
        };
        let Some(mut r) = record else { continue };
        if r.bytes == 0 {
            continue;
        }
        if let Some(t) = r.time_ns {
            let base = *first_time.get_or_insert(t);
            r.time_ns = Some(t.saturating_sub(base));
        }
        if out.len() as u64 >= records_max {
            return Err(format!("more than {records_max} records"));
        }
        out.push(r);
    }
    // Replay goes in time order.
    if out.iter().all(|r| r.time_ns.is_some()) {
        out.sort_by_key(|r| r.time_ns);
    }
    Ok(out)
}

fn non_negative_ns(ns: f64) -> Option<u64> {
    (ns.is_finite() && ns >= 0.0).then_some(ns.round() as u64)
}

/// `maj,min cpu seq time pid action rwbs sector + sectors [proc]`: Q events (or D if the
/// trace has only issues), reads and writes.
fn parse_blkparse(line: &str) -> Result<Option<TraceRecord>, &'static str> {
    let f: Vec<&str> = line.split_whitespace().collect();
    // Summary lines and events without a sector range are skipped.
    if f.len() < 10 || !f[0].contains(',') || f[8] != "+" {
        return Ok(None);
    }
    if f[5] != "Q" && f[5] != "D" {
        return Ok(None);
    }
    let op = if f[6].contains('R') {
        Op::Read
    } else if f[6].contains('W') {
        Op::Write
    } else {
        return Ok(None);
    };
    let seconds: f64 = f[3].parse().map_err(|_| "time")?;
    let sector: u64 = f[7].parse().map_err(|_| "sector")?;
    let sectors: u64 = f[9].parse().map_err(|_| "sectors")?;
    Ok(Some(TraceRecord {
        time_ns: Some(non_negative_ns(seconds * 1e9).ok_or("time")?),
        op,
        offset: sector * 512,
        bytes: sectors * 512,
    }))
}

/// fio iolog: `[time_ms] file action [offset length]`.
fn parse_fio(line: &str, version: u32) -> Result<Option<TraceRecord>, &'static str> {
    let mut f: Vec<&str> = line.split_whitespace().collect();
    let time_ns = if version == 3 {
        if f.is_empty() {
            return Err("no time");
        }
        let ms: u64 = f.remove(0).parse().map_err(|_| "time")?;
        Some(ms * 1_000_000)
    } else {
        None
    };
    if f.len() < 2 {
        return Err("file and action");
    }
    let op = match f[1] {
        "read" => Op::Read,
        "write" => Op::Write,
        // add, open, close, sync, datasync, trim, wait: nothing to replay at the block layer.
        _ => return Ok(None),
    };
    if f.len() < 4 {
        return Err("read and write have an offset and a length");
    }
    Ok(Some(TraceRecord {
        time_ns,
        op,
        offset: f[2].parse().map_err(|_| "offset")?,
        bytes: f[3].parse().map_err(|_| "length")?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str, format: TraceFormat) -> Result<Vec<TraceRecord>, String> {
        parse(text.as_bytes(), format, 1000)
    }

    #[test]
    fn disksim_msr_blkparse_and_fio_agree_on_the_same_requests() {
        let want = |t: Option<u64>| {
            vec![
                TraceRecord {
                    time_ns: t.map(|_| 0),
                    op: Op::Read,
                    offset: 4096,
                    bytes: 8192,
                },
                TraceRecord {
                    time_ns: t,
                    op: Op::Write,
                    offset: 1 << 20,
                    bytes: 4096,
                },
            ]
        };
        let disksim = "0.0 0 8 16 1\n2.5 0 2048 8 0\n";
        assert_eq!(
            p(disksim, TraceFormat::Disksim).unwrap(),
            want(Some(2_500_000))
        );
        let msr = "128166372003061629,src1,0,Read,4096,8192,1331\n128166372003086629,src1,0,Write,1048576,4096,900\n";
        assert_eq!(p(msr, TraceFormat::Msr).unwrap(), want(Some(2_500_000)));
        let blk = "  8,0    1        1     0.000000000  4162  Q   R 8 + 16 [fio]\n  8,0    1        2     0.000100000  4162  D   R 8 + 16 [fio]\n  8,0    1        3     0.002500000  4162  Q  WS 2048 + 8 [fio]\n  8,0    1        4     0.003000000  4162  C  WS 2048 + 8 [0]\nCPU1 (8,0):\n Reads Queued:  1,  8KiB\n";
        let got = p(blk, TraceFormat::Blkparse).unwrap();
        // Q events only... and the D of the first request too: both are kept, in time order.
        assert_eq!(got.len(), 3);
        assert_eq!(
            (got[0].op, got[0].offset, got[0].bytes),
            (Op::Read, 4096, 8192)
        );
        assert_eq!((got[2].op, got[2].time_ns), (Op::Write, Some(2_500_000)));
        let fio2 = "fio version 2 iolog\n/tmp/f add\n/tmp/f open\n/tmp/f read 4096 8192\n/tmp/f write 1048576 4096\n/tmp/f close\n";
        assert_eq!(p(fio2, TraceFormat::Fio).unwrap(), want(None));
        let fio3 = "fio version 3 iolog\n0 /tmp/f read 4096 8192\n3 /tmp/f write 1048576 4096\n";
        assert_eq!(p(fio3, TraceFormat::Fio).unwrap(), want(Some(3_000_000)));
        let s = summarise(&p(disksim, TraceFormat::Disksim).unwrap());
        assert_eq!((s.records, s.reads, s.writes, s.bytes), (2, 1, 1, 12288));
        assert_eq!(s.max_end_bytes, (1 << 20) + 4096);
    }

    #[test]
    fn bad_traces_name_the_line() {
        let e = p("0.0 0 8 16 1\n1.0 0 eight 16 1\n", TraceFormat::Disksim).unwrap_err();
        assert!(e.starts_with("line 2: block"), "{e}");
        let e = p("/tmp/f read 0 4096\n", TraceFormat::Fio).unwrap_err();
        assert!(e.contains("fio version 2 iolog"), "{e}");
        let e = p("1,h,0,Erase,0,4096,1\n", TraceFormat::Msr).unwrap_err();
        assert!(e.contains("Read or Write"), "{e}");
        let long = "x".repeat(TRACE_LINE_BYTES_MAX + 1);
        assert!(p(&long, TraceFormat::Disksim).unwrap_err().contains("over"));
        let many = "0.0 0 8 16 1\n".repeat(3);
        assert!(
            parse(many.as_bytes(), TraceFormat::Disksim, 2)
                .unwrap_err()
                .contains("more than 2")
        );
    }
}
