//! Results: what one replication measured ([`Run`], whichever model ran it), per workload
//! the mean over replications with a 95 % confidence interval, and the files `sim run`
//! writes.

use std::io::Write;
use std::path::Path;

use des::{Latencies, Nanos};
use serde::Serialize;
use sim_models::Op;
use sim_models::block::BlockLayer;

use crate::error::SimError;
use crate::scenario::{Pattern, Workload, WorkloadKind};

/// One replication's figures.
pub(crate) struct Run {
    pub seconds: f64,
    pub bytes: u64,
    pub requests: u64,
    pub latencies: Latencies,
    pub utilisation: f64,
    pub mean_queue: f64,
    pub merges: u64,
    /// Calls served without waiting for the device (page cache hits), of all calls.
    pub hit_ratio: f64,
    /// What limits the run, when the model knows better than the device's utilisation.
    pub bottleneck: Option<String>,
}

impl Run {
    /// A run that ended at `end` on `bl`: its device figures from the block layer.
    pub(crate) fn ended(
        bl: &mut BlockLayer,
        end: Nanos,
        bytes: u64,
        requests: u64,
        latencies: Latencies,
        hit_ratio: f64,
    ) -> Run {
        let report = bl.report(end);
        Run {
            seconds: end as f64 / 1e9,
            bytes,
            requests,
            latencies,
            utilisation: report.station.utilisation,
            mean_queue: report.station.mean_queue,
            merges: report.merges,
            hit_ratio,
            bottleneck: None,
        }
    }
}

/// A mean over replications and the half-width of its 95 % confidence interval (Student's
/// t; 0 with one replication).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    pub mean: f64,
    pub ci95: f64,
}

/// Two-sided 97.5 % quantiles of Student's t for 1..=30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

pub(crate) fn estimate(xs: &[f64]) -> Estimate {
    let n = xs.len();
    if n == 0 {
        return Estimate {
            mean: 0.0,
            ci95: 0.0,
        };
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return Estimate { mean, ci95: 0.0 };
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = T_975.get(n - 2).copied().unwrap_or(1.96);
    Estimate {
        mean,
        ci95: t * (var / n as f64).sqrt(),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkloadResult {
    pub name: String,
    pub kind: WorkloadKind,
    pub op: Op,
    pub pattern: Pattern,
    pub record_bytes: u64,
    pub queue_depth: u32,
    pub replications: usize,
    pub requests: u64,
    pub bytes: u64,
    pub seconds: Estimate,
    pub mb_per_s: Estimate,
    pub iops: Estimate,
    pub latency_mean_us: Estimate,
    pub latency_p50_us: Estimate,
    pub latency_p95_us: Estimate,
    pub latency_p99_us: Estimate,
    pub latency_max_us: Estimate,
    pub device_utilisation: Estimate,
    pub device_mean_queue: Estimate,
    pub merges: Estimate,
    /// Calls served from the page cache (file workloads).
    pub hit_ratio: Estimate,
    /// The component that limits the run.
    pub bottleneck: String,
}

pub(crate) fn summarise(w: &Workload, runs: &[Run]) -> WorkloadResult {
    let of = |f: &dyn Fn(&Run) -> f64| estimate(&runs.iter().map(f).collect::<Vec<_>>());
    let us = |ns: u64| ns as f64 / 1e3;
    let utilisation = of(&|r| r.utilisation);
    let bottleneck = if let Some(b) = runs.first().and_then(|r| r.bottleneck.clone()) {
        b
    } else if w.kind == WorkloadKind::File && utilisation.mean < 0.5 {
        format!(
            "the CPU: system calls and copies (device {:.0} % busy, {:.0} % of calls from the page cache)",
            utilisation.mean * 100.0,
            of(&|r| r.hit_ratio).mean * 100.0
        )
    } else if utilisation.mean >= 0.95 {
        format!(
            "device ({:.0} % busy; queue {:.1})",
            utilisation.mean * 100.0,
            of(&|r| r.mean_queue).mean
        )
    } else {
        format!(
            "the workload: queue depth {} keeps the device {:.0} % busy",
            w.queue_depth,
            utilisation.mean * 100.0
        )
    };
    WorkloadResult {
        name: w.name.clone(),
        kind: w.kind,
        op: w.op,
        pattern: w.pattern,
        record_bytes: w.record_bytes,
        queue_depth: w.queue_depth,
        replications: runs.len(),
        requests: runs.first().map_or(0, |r| r.requests),
        bytes: runs.first().map_or(0, |r| r.bytes),
        seconds: of(&|r| r.seconds),
        mb_per_s: of(&|r| r.bytes as f64 / r.seconds.max(1e-12) / 1e6),
        iops: of(&|r| r.requests as f64 / r.seconds.max(1e-12)),
        latency_mean_us: of(&|r| r.latencies.mean() / 1e3),
        latency_p50_us: of(&|r| us(r.latencies.percentile(50.0))),
        latency_p95_us: of(&|r| us(r.latencies.percentile(95.0))),
        latency_p99_us: of(&|r| us(r.latencies.percentile(99.0))),
        latency_max_us: of(&|r| us(r.latencies.max())),
        device_utilisation: utilisation,
        device_mean_queue: of(&|r| r.mean_queue),
        merges: of(&|r| r.merges as f64),
        hit_ratio: of(&|r| r.hit_ratio),
        bottleneck,
    }
}

/// One request in the per-request log.
#[derive(Debug, Clone, Serialize)]
pub struct Logged {
    pub id: u64,
    pub op: Op,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The layer that served it (`device` for direct I/O).
    pub layer: &'static str,
    pub offset_bytes: u64,
    pub bytes: u64,
    /// Served from a cache.
    pub hit: bool,
}

/// The first replication's requests of one workload.
#[derive(Debug, Clone)]
pub struct RequestLog {
    pub workload: String,
    pub requests: Vec<Logged>,
}

const CSV_HEADER: &str = "workload,kind,op,pattern,record_bytes,queue_depth,replications,requests,bytes,seconds,seconds_ci95,mb_per_s,mb_per_s_ci95,iops,iops_ci95,latency_mean_us,latency_p50_us,latency_p95_us,latency_p99_us,latency_max_us,device_utilisation,device_mean_queue,merges,hit_ratio,bottleneck";

fn lower<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

pub(crate) fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A bar per workload: MB/s with its 95 % interval as a whisker, in plain SVG (no fonts or
/// libraries to install; any browser shows it).
pub fn svg_chart(results: &[WorkloadResult]) -> String {
    const ROW: f64 = 28.0;
    const LABEL: f64 = 260.0;
    const WIDTH: f64 = 520.0;
    let max = results
        .iter()
        .map(|r| r.mb_per_s.mean + r.mb_per_s.ci95)
        .fold(0.0_f64, f64::max)
        .max(1e-9);
    let min = results
        .iter()
        .map(|r| r.mb_per_s.mean)
        .filter(|&v| v > 0.0)
        .fold(f64::INFINITY, f64::min);
    // Results spanning more than two decades get a log scale, so the small ones show.
    let log = min.is_finite() && max / min > 100.0;
    let floor = if log { (min / 2.0).log10() } else { 0.0 };
    let scale = |v: f64| -> f64 {
        if log {
            ((v.max(min / 2.0).log10() - floor) / (max.log10() - floor)) * WIDTH
        } else {
            v / max * WIDTH
        }
    };
    let height = ROW * results.len() as f64 + 50.0;
    let total = LABEL + WIDTH + 110.0;
    let title = if log {
        "MB/s, log scale (bars: mean; whiskers: 95 % interval)"
    } else {
        "MB/s (bars: mean; whiskers: 95 % interval)"
    };
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{total}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n<text x=\"{LABEL}\" y=\"16\">{title}</text>\n"
    );
    for (i, r) in results.iter().enumerate() {
        let y = 28.0 + ROW * i as f64;
        let w = scale(r.mb_per_s.mean);
        let lo = scale((r.mb_per_s.mean - r.mb_per_s.ci95).max(0.0));
        let hi = scale(r.mb_per_s.mean + r.mb_per_s.ci95);
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n<rect x=\"{LABEL}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"#4a7ab5\"/>\n<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>\n<text x=\"{:.1}\" y=\"{:.1}\">{:.1}</text>\n",
            LABEL - 8.0,
            y + 14.0,
            xml_escape(&r.name),
            y + 2.0,
            ROW - 8.0,
            LABEL + lo,
            LABEL + hi,
            y + 10.0,
            y + 10.0,
            LABEL + w.max(hi) + 6.0,
            y + 14.0,
            r.mb_per_s.mean
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

/// Writes `results.json`, `results.csv`, `results.svg` and, with logs, `requests.csv`
/// into `dir`.
pub fn write_outputs(
    dir: &Path,
    results: &[WorkloadResult],
    logs: &[RequestLog],
) -> Result<(), SimError> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(results).map_err(|e| SimError::Model(e.to_string()))?;
    std::fs::write(dir.join("results.json"), json + "\n")?;
    let mut csv = String::from(CSV_HEADER);
    csv.push('\n');
    for r in results {
        csv.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{:.6},{:.6},{:.3},{:.3},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.4},{:.3},{:.1},{:.4},\"{}\"\n",
            r.name,
            lower(&r.kind),
            lower(&r.op),
            lower(&r.pattern),
            r.record_bytes,
            r.queue_depth,
            r.replications,
            r.requests,
            r.bytes,
            r.seconds.mean,
            r.seconds.ci95,
            r.mb_per_s.mean,
            r.mb_per_s.ci95,
            r.iops.mean,
            r.iops.ci95,
            r.latency_mean_us.mean,
            r.latency_p50_us.mean,
            r.latency_p95_us.mean,
            r.latency_p99_us.mean,
            r.latency_max_us.mean,
            r.device_utilisation.mean,
            r.device_mean_queue.mean,
            r.merges.mean,
            r.hit_ratio.mean,
            r.bottleneck.replace('"', "'"),
        ));
    }
    std::fs::write(dir.join("results.csv"), csv)?;
    std::fs::write(dir.join("results.svg"), svg_chart(results))?;
    if !logs.is_empty() {
        let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("requests.csv"))?);
        writeln!(
            f,
            "workload,id,op,start_ns,end_ns,layer,offset_bytes,bytes,hit"
        )?;
        for l in logs {
            for q in &l.requests {
                writeln!(
                    f,
                    "{},{},{},{},{},{},{},{},{}",
                    l.workload,
                    q.id,
                    lower(&q.op),
                    q.start_ns,
                    q.end_ns,
                    q.layer,
                    q.offset_bytes,
                    q.bytes,
                    if q.hit { "hit" } else { "miss" }
                )?;
            }
        }
        f.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidence_intervals_follow_student() {
        let e = estimate(&[10.0, 12.0, 14.0]);
        assert!((e.mean - 12.0).abs() < 1e-12);
        // sd 2, n 3: t(2) 4.303 * 2 / sqrt(3)
        assert!((e.ci95 - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-9, "{e:?}");
        assert_eq!(estimate(&[5.0]).ci95, 0.0);
        let many: Vec<f64> = (0..100).map(|i| f64::from(i % 2)).collect();
        // Beyond 31 samples, the normal quantile: sd = sqrt(25 / 99).
        let want = 1.96 * (25.0f64 / 99.0).sqrt() / 10.0;
        assert!((estimate(&many).ci95 - want).abs() < 1e-9);
    }
}
