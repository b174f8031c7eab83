//! Sweeps (`[sweep]` in a scenario): every workload run once per value of one parameter,
//! and the results as a line per workload (`sweep.csv`, `sweep.svg`): the dissertation's
//! iozone-style curves (block-size knee, dirty ratio, PVFS clients) and the seeds' (queue
//! sessions, deletion distance).

use crate::error::SimError;
use crate::report::WorkloadResult;
use crate::scenario::Scenario;
use crate::scenario::sweep_spec::check_spec;
pub use crate::scenario::sweep_spec::{
    Metric, PARAMETERS, SWEEP_VALUES_MAX, SweepSpec, apply, check,
};

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
