//! Sweeps (`[sweep]` in a scenario): every workload run once per value of one parameter,
//! and the results as a line per workload (`sweep.csv`, `sweep.svg`): the dissertation's
//! iozone-style curves (block-size knee, dirty ratio, PVFS clients) and the seeds' (queue
//! sessions, deletion distance).

use serde::Deserialize;

use crate::error::SimError;
use crate::report::WorkloadResult;
use crate::scenario::Scenario;

/// Most values a sweep may take.
pub const SWEEP_VALUES_MAX: usize = 64;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// A workload field (set in every workload) or a scenario one: see `PARAMETERS`.
    pub parameter: String,
    pub values: Vec<f64>,
    /// What is plotted.
    #[serde(default)]
    pub metric: Metric,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    #[default]
    MbPerS,
    /// Requests (or messages) per second.
    Iops,
    /// The run's time, in ms.
    Ms,
}

impl Metric {
    /// Its name in a scenario and as `sweep.csv`'s column.
    fn name(self) -> &'static str {
        match self {
            Metric::MbPerS => "mb_per_s",
            Metric::Iops => "iops",
            Metric::Ms => "ms",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Metric::MbPerS => "MB/s",
            Metric::Iops => "per second",
            Metric::Ms => "ms",
        }
    }

    fn of(self, r: &WorkloadResult) -> (f64, f64) {
        match self {
            Metric::MbPerS => (r.mb_per_s.mean, r.mb_per_s.ci95),
            Metric::Iops => (r.iops.mean, r.iops.ci95),
            Metric::Ms => (r.seconds.mean * 1e3, r.seconds.ci95 * 1e3),
        }
    }
}

/// The parameters a sweep can vary.
pub const PARAMETERS: &[&str] = &[
    "record_bytes",
    "bytes",
    "file_bytes",
    "queue_depth",
    "messages",
    "message_bytes",
    "sessions",
    "distance",
    "message_cpu_ns",
    "memory.page_cache_bytes",
    "writeback.dirty_ratio",
    "writeback.dirty_background_ratio",
    "pvfs.servers",
    "pvfs.clients",
    "pvfs.stripe_bytes",
    "pvfs.link_mb_s",
    "pvfs.latency_us",
    "mailfs.accounts",
    "mailfs.connections",
    "mailfs.block_bytes",
    "mailfs.readahead_blocks",
    "mailfs.link_mb_s",
    "mailfs.account_mb_s",
    "mailfs.latency_us",
    "cluster.nodes",
    "cluster.node_cores",
    "cluster.directory_query_ns",
    "cluster.queries_per_message",
    "cluster.users_per_node",
    "cluster.login_interval_s",
    "cluster.link_mb_s",
];

/// `s` with the sweep's parameter set to `v`; the result is checked as a scenario file is.
pub fn apply(s: &Scenario, parameter: &str, v: f64) -> Result<Scenario, SimError> {
    let mut s = s.clone();
    s.sweep = None;
    let whole = |v: f64| -> Result<u64, SimError> {
        if v >= 0.0 && v.fract() == 0.0 && v <= u64::MAX as f64 {
            Ok(v as u64)
        } else {
            Err(SimError::Scenario(format!(
                "sweep: {parameter} takes whole numbers, not {v}"
            )))
        }
    };
    let small = |v: f64| -> Result<u32, SimError> {
        u32::try_from(whole(v)?)
            .map_err(|_| SimError::Scenario(format!("sweep: {parameter} {v} is too large")))
    };
    match parameter {
        "memory.page_cache_bytes" => s.memory.page_cache_bytes = whole(v)?,
        "writeback.dirty_ratio" => s.writeback.dirty_ratio = v,
        "writeback.dirty_background_ratio" => s.writeback.dirty_background_ratio = v,
        "pvfs.servers" => s.pvfs.servers = small(v)?,
        "pvfs.clients" => s.pvfs.clients = small(v)?,
        "pvfs.stripe_bytes" => s.pvfs.stripe_bytes = whole(v)?,
        "pvfs.link_mb_s" => s.pvfs.link_mb_s = v,
        "pvfs.latency_us" => s.pvfs.latency_us = v,
        "mailfs.accounts" => s.mailfs.accounts = small(v)?,
        "mailfs.connections" => s.mailfs.connections = small(v)?,
        "mailfs.block_bytes" => s.mailfs.block_bytes = whole(v)?,
        "mailfs.readahead_blocks" => s.mailfs.readahead_blocks = small(v)?,
        "mailfs.link_mb_s" => s.mailfs.link_mb_s = v,
        "mailfs.account_mb_s" => s.mailfs.account_mb_s = v,
        "mailfs.latency_us" => s.mailfs.latency_us = v,
        "cluster.nodes" => s.cluster.nodes = small(v)?,
        "cluster.node_cores" => s.cluster.node_cores = v,
        "cluster.directory_query_ns" => s.cluster.directory_query_ns = v,
        "cluster.queries_per_message" => s.cluster.queries_per_message = v,
        "cluster.users_per_node" => s.cluster.users_per_node = whole(v)?,
        "cluster.login_interval_s" => s.cluster.login_interval_s = v,
        "cluster.link_mb_s" => s.cluster.link_mb_s = v,
        _ => {
            for w in &mut s.workloads {
                match parameter {
                    "record_bytes" => w.record_bytes = whole(v)?,
                    "bytes" => w.bytes = whole(v)?,
                    "file_bytes" => w.file_bytes = Some(whole(v)?),
                    "queue_depth" => w.queue_depth = small(v)?,
                    "messages" => w.messages = whole(v)?,
                    "message_bytes" => w.message_bytes = whole(v)?,
                    "sessions" => w.sessions = small(v)?,
                    "distance" => w.distance = whole(v)?,
                    "message_cpu_ns" => w.message_cpu_ns = v,
                    _ => {
                        return Err(SimError::Scenario(format!(
                            "sweep: unknown parameter {parameter:?}; one of {}",
                            PARAMETERS.join(", ")
                        )));
                    }
                }
            }
        }
    }
    s.check()
        .map_err(|e| SimError::Scenario(format!("sweep: {parameter} = {v}: {e}")))?;
    Ok(s)
}

/// Checks a sweep when its scenario is read: `check_spec`, and every value giving a valid
/// scenario.
pub fn check(s: &Scenario, sweep: &SweepSpec) -> Result<(), SimError> {
    check_spec(sweep)?;
    for &v in &sweep.values {
        apply(s, &sweep.parameter, v)?;
    }
    Ok(())
}

/// A known parameter and 1..=`SWEEP_VALUES_MAX` finite values.
fn check_spec(sweep: &SweepSpec) -> Result<(), SimError> {
    if !PARAMETERS.contains(&sweep.parameter.as_str()) {
        return Err(SimError::Scenario(format!(
            "sweep: unknown parameter {:?}; one of {}",
            sweep.parameter,
            PARAMETERS.join(", ")
        )));
    }
    if sweep.values.is_empty() || sweep.values.len() > SWEEP_VALUES_MAX {
        return Err(SimError::Scenario(format!(
            "sweep: 1..={SWEEP_VALUES_MAX} values"
        )));
    }
    for &v in &sweep.values {
        if !v.is_finite() {
            return Err(SimError::Scenario(format!("sweep: {v} is not a number")));
        }
    }
    Ok(())
}

/// A point of a sweep: a workload's result at one value.
#[derive(Debug, Clone)]
pub struct SweepPoint {
    pub workload: String,
    pub x: f64,
    pub result: WorkloadResult,
}

/// Runs every workload at every value; `progress` hears (done, total) over all runs.
pub fn run(
    s: &Scenario,
    sweep: &SweepSpec,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Vec<SweepPoint>, SimError> {
    // Each value is checked as it is applied.
    check_spec(sweep)?;
    let per_value = s.workloads.len() as u64 * u64::from(s.replications);
    let total = per_value * sweep.values.len() as u64;
    let mut points = Vec::new();
    for (i, &v) in sweep.values.iter().enumerate() {
        let one = apply(s, &sweep.parameter, v)?;
        let base = i as u64 * per_value;
        let (results, _) = crate::run(&one, false, &mut |done, _| progress(base + done, total))?;
        for r in results {
            points.push(SweepPoint {
                workload: r.name.clone(),
                x: v,
                result: r,
            });
        }
    }
    Ok(points)
}

fn fmt_x(parameter: &str, v: f64) -> String {
    if parameter.ends_with("_bytes") && v >= 1024.0 {
        let (n, unit) = if v >= (1u64 << 30) as f64 {
            (v / (1u64 << 30) as f64, "G")
        } else if v >= (1u64 << 20) as f64 {
            (v / (1u64 << 20) as f64, "M")
        } else {
            (v / 1024.0, "K")
        };
        format!("{}{unit}", trim(n))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `sweep.csv`: a row per workload and value.
pub fn csv(sweep: &SweepSpec, points: &[SweepPoint]) -> String {
    let mut out = format!(
        "workload,{},{},ci95\n",
        sweep.parameter,
        sweep.metric.name()
    );
    for p in points {
        let (mean, ci) = sweep.metric.of(&p.result);
        out.push_str(&format!("{},{},{mean:.4},{ci:.4}\n", p.workload, trim(p.x)));
    }
    out
}

/// A line per workload over the sweep's values, in plain SVG. The x axis is logarithmic
/// when the values span a decade or more, the y axis when the results span two.
pub fn svg(title: &str, sweep: &SweepSpec, points: &[SweepPoint]) -> String {
    const W: f64 = 560.0;
    const H: f64 = 300.0;
    const LEFT: f64 = 80.0;
    const TOP: f64 = 40.0;
    const COLOURS: [&str; 6] = [
        "#4a7ab5", "#c0504d", "#6a9e3f", "#8064a2", "#d0892b", "#3a9aa8",
    ];
    let mut names: Vec<&str> = Vec::new();
    for p in points {
        if !names.contains(&p.workload.as_str()) {
            names.push(&p.workload);
        }
    }
    let xs: Vec<f64> = sweep.values.clone();
    let (xmin, xmax) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let ys: Vec<f64> = points
        .iter()
        .map(|p| sweep.metric.of(&p.result).0)
        .collect();
    let ymax = ys.iter().copied().fold(0.0_f64, f64::max).max(1e-9);
    let ymin_pos = ys
        .iter()
        .copied()
        .filter(|&y| y > 0.0)
        .fold(f64::INFINITY, f64::min);
    let xlog = xmin > 0.0 && xmax / xmin >= 10.0;
    let ylog = ymin_pos.is_finite() && ymax / ymin_pos > 100.0;
    let sx = |x: f64| -> f64 {
        let f = if xmax <= xmin {
            0.5
        } else if xlog {
            (x.ln() - xmin.ln()) / (xmax.ln() - xmin.ln())
        } else {
            (x - xmin) / (xmax - xmin)
        };
        LEFT + f * W
    };
    let ylo = if ylog { ymin_pos / 2.0 } else { 0.0 };
    let sy = |y: f64| -> f64 {
        let f = if ylog {
            (y.max(ylo).ln() - ylo.ln()) / (ymax.ln() - ylo.ln())
        } else {
            y / ymax
        };
        TOP + H - f * H
    };
    let legend_h = 18.0 * names.len() as f64;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n<text x=\"{LEFT}\" y=\"20\">{}</text>\n",
        LEFT + W + 40.0,
        TOP + H + 60.0 + legend_h,
        crate::report::xml_escape(&format!(
            "{title}: {}{} against {}{}",
            sweep.metric.label(),
            if ylog { " (log)" } else { "" },
            sweep.parameter,
            if xlog { " (log)" } else { "" }
        ))
    );
    svg.push_str(&format!(
        "<line x1=\"{LEFT}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{}\" stroke=\"black\"/>\n",
        TOP + H,
        LEFT + W,
        TOP + H,
        TOP + H
    ));
    for &x in &xs {
        svg.push_str(&format!(
            "<line x1=\"{0:.1}\" y1=\"{1}\" x2=\"{0:.1}\" y2=\"{2}\" stroke=\"black\"/>\n<text x=\"{0:.1}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
            sx(x),
            TOP + H,
            TOP + H + 5.0,
            TOP + H + 18.0,
            fmt_x(&sweep.parameter, x)
        ));
    }
    for i in 0..=4 {
        let y = if ylog {
            (ylo.ln() + (ymax.ln() - ylo.ln()) * f64::from(i) / 4.0).exp()
        } else {
            ymax * f64::from(i) / 4.0
        };
        svg.push_str(&format!(
            "<text x=\"{0:.1}\" y=\"{1:.1}\" text-anchor=\"end\">{2}</text>\n<line x1=\"{LEFT}\" y1=\"{1:.1}\" x2=\"{3:.1}\" y2=\"{1:.1}\" stroke=\"#ddd\"/>\n",
            LEFT - 6.0,
            sy(y),
            trim((y * 10.0).round() / 10.0),
            LEFT + W,
        ));
    }
    for (i, name) in names.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let line: Vec<String> = points
            .iter()
            .filter(|p| p.workload == *name)
            .map(|p| format!("{:.1},{:.1}", sx(p.x), sy(sweep.metric.of(&p.result).0)))
            .collect();
        svg.push_str(&format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"/>\n",
            line.join(" ")
        ));
        for pt in &line {
            let (x, y) = pt.split_once(',').unwrap_or(("0", "0"));
            svg.push_str(&format!(
                "<circle cx=\"{x}\" cy=\"{y}\" r=\"3\" fill=\"{colour}\"/>\n"
            ));
        }
        let ly = TOP + H + 40.0 + 18.0 * i as f64;
        svg.push_str(&format!(
            "<line x1=\"{LEFT}\" y1=\"{0:.1}\" x2=\"{1:.1}\" y2=\"{0:.1}\" stroke=\"{colour}\" stroke-width=\"2\"/>\n<text x=\"{2:.1}\" y=\"{3:.1}\">{4}</text>\n",
            ly,
            LEFT + 24.0,
            LEFT + 30.0,
            ly + 4.0,
            crate::report::xml_escape(name)
        ));
    }
    svg.push_str("</svg>\n");
    svg
}
