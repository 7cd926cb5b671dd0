//! `ringperf compare`: runs, repeated runs and sweeps side by side. Each folder becomes a
//! source of load points (a sweep's points, or one point for a run); the points of every
//! source together give the Pareto fronts of throughput against latency (a point is on a
//! front when no other point has at least its throughput and at most its latency, one of the
//! two strictly), and the points that two sources share are compared figure by figure
//! against the first source, the baseline.
//!
//! A change is called significant when the two figures lie further apart than their 95%
//! intervals allow: |b − a| > √(hₐ² + h_b²), where each h is the half-width of a figure's
//! interval on the side facing the other figure (a two-sided test at about 95% when the
//! intervals are close to normal), each widened by the histograms' resolution (0.1% of the
//! figure). Figures without an interval are compared without a call.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::html::num;
use super::plot::{escape, Chart, Series, Style};
use super::sweep::{self, Row};
use super::verdict::Label;
use crate::plan::sweep::{Axis, Point};
use crate::stats::Interval;

/// The artifacts `compare` writes.
pub const JSON: &str = "compare.json";
/// See [`JSON`].
pub const CSV: &str = "compare.csv";
/// See [`JSON`].
pub const HTML: &str = "compare.html";

/// One folder given to `compare`.
#[derive(Debug, Clone)]
pub struct Source {
    /// Its label (`--label`, else the folder's name).
    pub label: String,
    /// The folder.
    pub dir: PathBuf,
    /// `sweep`, `repeats` or `run`.
    pub kind: &'static str,
    /// Its load points, in load order.
    pub rows: Vec<Row>,
}

/// The figures compared, with their console names; the first is the throughput every front
/// is drawn against.
const COMPARED: &[(&str, &str)] = &[
    ("output_token_throughput", "Output tokens/s"),
    ("request_throughput", "Requests/s"),
    ("output_token_throughput_per_user_p50", "Tokens/s/user p50"),
    ("ttft_p50_ms", "TTFT p50 (ms)"),
    ("ttft_p99_ms", "TTFT p99 (ms)"),
    ("itl_p50_ms", "ITL p50 (ms)"),
    ("itl_p99_ms", "ITL p99 (ms)"),
    ("request_latency_p50_ms", "Latency p50 (ms)"),
    ("request_latency_p99_ms", "Latency p99 (ms)"),
    ("goodput", "Goodput (req/s)"),
    ("error_request_count", "Errors"),
    ("joules_per_output_token", "J/output token"),
];

/// The Pareto fronts: against output tokens per second, each figure and whether less of it
/// is better.
const FRONTS: &[(&str, &str, bool)] = &[
    ("ttft_p99_ms", "TTFT p99 (ms)", true),
    ("ttft_p50_ms", "TTFT p50 (ms)", true),
    ("itl_p50_ms", "ITL p50 (ms)", true),
    ("request_latency_p99_ms", "Latency p99 (ms)", true),
    (
        "output_token_throughput_per_user_p50",
        "Tokens/s/user p50",
        false,
    ),
];

/// What a folder holds, read as a source.
pub fn read(dir: &Path, label: Option<&str>) -> std::io::Result<Source> {
    let label = label.map(str::to_string).unwrap_or_else(|| {
        dir.file_name()
            .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into())
    });
    let (kind, rows) = if dir.join(sweep::SUMMARY_JSON).is_file() {
        ("sweep", sweep::read_sweep(dir)?)
    } else {
        let docs: Vec<Value> = sweep::read_runs(dir)?.into_iter().map(|(_, d)| d).collect();
        let Some(first) = docs.first() else {
            return Err(std::io::Error::other(format!(
                "{}: no ringperf run, repeated runs or sweep here (no {} or {})",
                dir.display(),
                sweep::SUMMARY_JSON,
                sweep::PROFILE_JSON
            )));
        };
        let kind = if docs.len() > 1 { "repeats" } else { "run" };
        (kind, vec![Row::of(point_of_run(first), &docs)])
    };
    if rows.is_empty() {
        return Err(std::io::Error::other(format!(
            "{}: a sweep with no finished point",
            dir.display()
        )));
    }
    Ok(Source {
        label,
        dir: dir.to_path_buf(),
        kind,
        rows,
    })
}

/// The load point a single run was asked for: its request rate (an open loop, with or without
/// a concurrency cap), else its concurrency, else one request at a time.
fn point_of_run(doc: &Value) -> Point {
    let at = |p: &str| doc.pointer(p).and_then(Value::as_f64);
    match (
        at("/input_config/load/concurrency"),
        at("/input_config/load/request_rate"),
    ) {
        (_, Some(r)) => Point {
            axis: Axis::RequestRate,
            value: r,
        },
        (Some(c), None) => Point {
            axis: Axis::Concurrency,
            value: c,
        },
        (None, None) => Point {
            axis: Axis::Concurrency,
            value: 1.0,
        },
    }
}

/// Which of `points` (x more is better; y less is better when `lower`) no other point
/// dominates. A point with a missing figure is on no front.
pub fn pareto(points: &[(Option<f64>, Option<f64>)], lower: bool) -> Vec<bool> {
    let finite = |p: &(Option<f64>, Option<f64>)| match *p {
        (Some(x), Some(y)) if x.is_finite() && y.is_finite() => {
            Some((x, if lower { y } else { -y }))
        }
        _ => None,
    };
    points
        .iter()
        .map(|p| {
            let Some((x, y)) = finite(p) else {
                return false;
            };
            !points
                .iter()
                .filter_map(finite)
                .any(|(ox, oy)| ox >= x && oy <= y && (ox > x || oy < y))
        })
        .collect()
}

/// Whether `b` differs from `a` by more than their intervals allow (see the module's
/// comment); `None` without both intervals.
pub fn significant(a: f64, ia: Option<Interval>, b: f64, ib: Option<Interval>) -> Option<bool> {
    let (ia, ib) = (ia?, ib?);
    let (ha, hb) = if b >= a {
        (ia.hi - a, b - ib.lo)
    } else {
        (a - ia.lo, ib.hi - b)
    };
    // A percentile is read from a histogram that holds 3 significant digits: two figures
    // closer than that resolution are not told apart, however narrow their intervals.
    let (ha, hb) = (
        ha.max(0.0) + a.abs() * RESOLUTION,
        hb.max(0.0) + b.abs() * RESOLUTION,
    );
    Some((b - a).abs() > (ha * ha + hb * hb).sqrt())
}

/// The relative resolution of a reported figure (histograms of 3 significant digits).
const RESOLUTION: f64 = 1e-3;

/// One figure of one shared point: the baseline's value and each other source's, with the
/// change and the call.
#[derive(Debug, Clone)]
pub struct Line {
    /// The point's name (`concurrency_16`).
    pub point: String,
    /// The figure (a sweep summary's column name).
    pub figure: &'static str,
    /// Each source's value and interval, in the sources' order (`None` where a source lacks
    /// the point or the figure).
    pub values: Vec<Option<(f64, Option<Interval>)>>,
    /// Each source's label of the point (`None` where it lacks the point).
    pub labels: Vec<Option<Label>>,
}

impl Line {
    /// Source `i`'s change against the baseline, in percent.
    pub fn change_pct(&self, i: usize) -> Option<f64> {
        let (a, _) = self.values[0]?;
        let (b, _) = self.values[i]?;
        (a != 0.0).then(|| (b - a) / a.abs() * 100.0)
    }

    /// Whether source `i`'s point can be trusted (see [`Label::trusted`]).
    pub fn trusted(&self, i: usize) -> bool {
        self.labels[i].is_some_and(Label::trusted)
    }

    /// Whether source `i`'s change against the baseline is significant; not judged (`None`)
    /// where either point's figures cannot be trusted (a distorting or limiting client, a
    /// stalled simulator, a failing server).
    pub fn significant(&self, i: usize) -> Option<bool> {
        if !self.trusted(0) || !self.trusted(i) {
            return None;
        }
        let (a, ia) = self.values[0]?;
        let (b, ib) = self.values[i]?;
        significant(a, ia, b, ib)
    }
}

/// A front: which points of which sources are on it.
#[derive(Debug, Clone)]
pub struct Front {
    /// The figure against throughput.
    pub figure: &'static str,
    /// Its title.
    pub title: &'static str,
    /// Less is better.
    pub lower: bool,
    /// (source, row) of each point on the front, by throughput.
    pub members: Vec<(usize, usize)>,
}

/// The whole comparison.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The sources, the first being the baseline.
    pub sources: Vec<Source>,
    /// Per shared point, per figure.
    pub lines: Vec<Line>,
    /// The Pareto fronts.
    pub fronts: Vec<Front>,
}

/// Compares `sources` (at least two, the first the baseline).
pub fn compare(sources: Vec<Source>) -> Comparison {
    let mut names: Vec<String> = Vec::new();
    for r in &sources[0].rows {
        let n = r.point.name();
        let shared = sources[1..]
            .iter()
            .any(|s| s.rows.iter().any(|o| o.point.name() == n));
        if shared && !names.contains(&n) {
            names.push(n);
        }
    }
    // Runs asked for different loads (two single runs, or sweeps over different points)
    // still compare: then each source's points are matched in load order.
    let by_order = names.is_empty();
    if by_order {
        let n = sources.iter().map(|s| s.rows.len()).min().unwrap_or(0);
        names = (0..n).map(|i| format!("point {}", i + 1)).collect();
    }
    let mut lines = Vec::new();
    for (k, name) in names.iter().enumerate() {
        let rows: Vec<Option<&Row>> = sources
            .iter()
            .map(|s| {
                if by_order {
                    s.rows.get(k)
                } else {
                    s.rows.iter().find(|r| &r.point.name() == name)
                }
            })
            .collect();
        let labels: Vec<Option<Label>> = rows.iter().map(|r| r.map(|r| r.label)).collect();
        for (figure, _) in COMPARED {
            let values: Vec<Option<(f64, Option<Interval>)>> = rows
                .iter()
                .map(|row| {
                    let row = (*row)?;
                    Some((row.get(figure)?, row.interval(figure)))
                })
                .collect();
            if values.iter().any(Option::is_some) {
                lines.push(Line {
                    point: name.clone(),
                    figure,
                    values,
                    labels: labels.clone(),
                });
            }
        }
    }
    // A point whose figures cannot be trusted is on no front.
    let all: Vec<(usize, usize)> = sources
        .iter()
        .enumerate()
        .flat_map(|(s, src)| {
            (0..src.rows.len())
                .filter(|&r| src.rows[r].label.trusted())
                .map(move |r| (s, r))
        })
        .collect();
    let fronts = FRONTS
        .iter()
        .map(|&(figure, title, lower)| {
            let xy: Vec<(Option<f64>, Option<f64>)> = all
                .iter()
                .map(|&(s, r)| {
                    let row = &sources[s].rows[r];
                    (row.get(COMPARED[0].0), row.get(figure))
                })
                .collect();
            let on = pareto(&xy, lower);
            let mut members: Vec<(usize, usize)> = all
                .iter()
                .zip(&on)
                .filter(|(_, on)| **on)
                .map(|(m, _)| *m)
                .collect();
            let x = |&(s, r): &(usize, usize)| sources[s].rows[r].get(COMPARED[0].0).unwrap_or(0.0);
            members.sort_by(|a, b| x(a).total_cmp(&x(b)));
            Front {
                figure,
                title,
                lower,
                members,
            }
        })
        .collect();
    Comparison {
        sources,
        lines,
        fronts,
    }
}

fn call(s: Option<bool>) -> &'static str {
    match s {
        Some(true) => "yes",
        Some(false) => "no",
        None => "n/a",
    }
}

fn title_of(figure: &str) -> &'static str {
    COMPARED
        .iter()
        .find(|(f, _)| *f == figure)
        .map_or("", |(_, t)| t)
}

impl Comparison {
    /// How many points of source `s` are on `front`.
    pub fn on_front(&self, front: &Front, s: usize) -> usize {
        front.members.iter().filter(|(m, _)| *m == s).count()
    }

    /// The console text: each shared point's figures side by side, then the fronts.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for (i, s) in self.sources.iter().enumerate() {
            let _ = writeln!(
                out,
                "{} {:<16} {} ({}, {} point{})",
                if i == 0 { "baseline" } else { "        " },
                s.label,
                s.dir.display(),
                s.kind,
                s.rows.len(),
                if s.rows.len() == 1 { "" } else { "s" }
            );
        }
        let width = self
            .sources
            .iter()
            .map(|s| s.label.chars().count())
            .max()
            .unwrap_or(0)
            .max(10);
        let mut point = "";
        for l in &self.lines {
            if l.point != point {
                point = &l.point;
                let _ = write!(out, "\n{:<20}", l.point);
                for s in &self.sources {
                    let _ = write!(out, " {:>width$}", s.label);
                }
                for s in &self.sources[1..] {
                    let _ = write!(out, " {:>width$}", format!("Δ {}", s.label));
                }
                out.push('\n');
                let _ = write!(out, "{:<20}", "verdict");
                for l in &l.labels {
                    let _ = write!(out, " {:>width$}", l.map_or("–", Label::as_str));
                }
                out.push('\n');
            }
            let _ = write!(out, "{:<20}", title_of(l.figure));
            for v in &l.values {
                let _ = write!(out, " {:>width$}", num(v.map(|v| v.0)));
            }
            for i in 1..self.sources.len() {
                let change = match (l.change_pct(i), l.significant(i)) {
                    (Some(c), Some(true)) => format!("{c:+.1}%*"),
                    (Some(c), _) => format!("{c:+.1}%"),
                    (None, _) => "–".into(),
                };
                let _ = write!(out, " {change:>width$}");
            }
            out.push('\n');
        }
        out.push_str(
            "\n* significant: further apart than the two figures' 95% intervals allow (not \
             judged where a point's verdict is other than headroom or caveat)\n\
             \nPareto front against output tokens/s (points on it, per source):\n",
        );
        for f in &self.fronts {
            let _ = write!(out, "  {:<20}", f.title);
            let per: Vec<String> = (self.sources.iter().enumerate())
                .map(|(i, s)| format!("{}: {}", s.label, self.on_front(f, i)))
                .collect();
            let _ = write!(out, " {}", per.join(", "));
            out.push('\n');
        }
        out
    }

    /// `compare.json`: the sources, every compared figure, the fronts.
    pub fn to_json(&self) -> Value {
        let point = |s: usize, r: usize| {
            let row = &self.sources[s].rows[r];
            json!({
                "source": self.sources[s].label,
                "point": row.point.name(),
                "output_token_throughput": row.get(COMPARED[0].0),
            })
        };
        json!({
            "baseline": self.sources[0].label,
            "sources": self.sources.iter().map(|s| json!({
                "label": s.label,
                "dir": s.dir.display().to_string(),
                "kind": s.kind,
                "points": s.rows.iter().map(|r| {
                    let mut m = serde_json::Map::new();
                    m.insert("point".into(), json!(r.point.name()));
                    for (f, _) in COMPARED {
                        m.insert((*f).into(), json!(r.get(f)));
                    }
                    m.insert("client_limited".into(), json!(r.client_limited));
                    m.insert("label".into(), json!(r.label));
                    m.insert("was_cancelled".into(), json!(r.cancelled));
                    Value::Object(m)
                }).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "comparisons": self.lines.iter().map(|l| json!({
                "point": l.point,
                "figure": l.figure,
                "values": l.values.iter().map(|v| v.map(|v| v.0)).collect::<Vec<_>>(),
                "ci95": l.values.iter().map(|v| v.and_then(|v| v.1).map(|i| [i.lo, i.hi])).collect::<Vec<_>>(),
                "change_pct": (1..self.sources.len()).map(|i| l.change_pct(i)).collect::<Vec<_>>(),
                "significant": (1..self.sources.len()).map(|i| l.significant(i)).collect::<Vec<_>>(),
                "labels": l.labels,
            })).collect::<Vec<_>>(),
            "pareto_fronts": self.fronts.iter().map(|f| json!({
                "x": COMPARED[0].0,
                "y": f.figure,
                "y_lower_is_better": f.lower,
                "points": f.members.iter().map(|&(s, r)| point(s, r)).collect::<Vec<_>>(),
                "points_per_source": (0..self.sources.len()).map(|i| self.on_front(f, i)).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }

    /// `compare.csv`: one line per source, point and figure (a tidy table).
    pub fn to_csv(&self) -> Result<Vec<u8>, csv::Error> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([
            "point",
            "figure",
            "source",
            "value",
            "ci95_low",
            "ci95_high",
            "change_vs_baseline_pct",
            "significant",
        ])?;
        for l in &self.lines {
            for (i, s) in self.sources.iter().enumerate() {
                let Some((v, iv)) = l.values[i] else {
                    continue;
                };
                let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
                w.write_record([
                    l.point.clone(),
                    l.figure.to_string(),
                    s.label.clone(),
                    v.to_string(),
                    opt(iv.map(|i| i.lo)),
                    opt(iv.map(|i| i.hi)),
                    if i == 0 {
                        String::new()
                    } else {
                        opt(l.change_pct(i))
                    },
                    if i == 0 {
                        String::new()
                    } else {
                        call(l.significant(i)).into()
                    },
                ])?;
            }
        }
        w.into_inner().map_err(|e| e.into_error().into())
    }

    /// The charts: each front's figure against throughput, every source's points in load
    /// order, and the front itself.
    pub fn charts(&self) -> Vec<(String, Chart)> {
        self.fronts
            .iter()
            .map(|f| {
                let mut series: Vec<Series> = self
                    .sources
                    .iter()
                    .map(|s| Series {
                        name: s.label.clone(),
                        points: s
                            .rows
                            .iter()
                            .map(|r| {
                                (
                                    r.get(COMPARED[0].0).unwrap_or(f64::NAN),
                                    r.get(f.figure).unwrap_or(f64::NAN),
                                )
                            })
                            .collect(),
                        bars: s
                            .rows
                            .iter()
                            .filter_map(|r| {
                                let i = r.interval(f.figure)?;
                                Some((r.get(COMPARED[0].0)?, i.lo, i.hi))
                            })
                            .collect(),
                        style: if s.rows.len() > 1 {
                            Style::Line
                        } else {
                            Style::Points
                        },
                    })
                    .collect();
                series.push(Series {
                    name: "Pareto front".into(),
                    points: f
                        .members
                        .iter()
                        .map(|&(s, r)| {
                            let row = &self.sources[s].rows[r];
                            (
                                row.get(COMPARED[0].0).unwrap_or(f64::NAN),
                                row.get(f.figure).unwrap_or(f64::NAN),
                            )
                        })
                        .collect(),
                    style: Style::Band,
                    bars: Vec::new(),
                });
                (
                    format!("pareto_{}", f.figure),
                    Chart {
                        title: format!("{} against output tokens/s", f.title),
                        x_label: "output tokens/s".into(),
                        y_label: f.title.into(),
                        series,
                        ..Chart::default()
                    },
                )
            })
            .collect()
    }

    /// The page: the sources, the fronts' charts, the table.
    pub fn html(&self) -> String {
        let mut body = String::from(
            "<table><tr><th>source</th><th>folder</th><th>kind</th><th>points</th></tr>",
        );
        for (i, s) in self.sources.iter().enumerate() {
            body.push_str(&format!(
                "<tr><td>{}{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                escape(&s.label),
                if i == 0 { " (baseline)" } else { "" },
                escape(&s.dir.display().to_string()),
                s.kind,
                s.rows.len()
            ));
        }
        body.push_str("</table>\n<h2>Pareto fronts</h2>\n<table><tr><th>figure</th>");
        for s in &self.sources {
            body.push_str(&format!("<th>{} points on it</th>", escape(&s.label)));
        }
        body.push_str("</tr>");
        for f in &self.fronts {
            body.push_str(&format!("<tr><td>{}</td>", escape(f.title)));
            for i in 0..self.sources.len() {
                body.push_str(&format!("<td>{}</td>", self.on_front(f, i)));
            }
            body.push_str("</tr>");
        }
        body.push_str("</table>\n<div class=\"charts\">");
        for (_, c) in self.charts() {
            body.push_str(&c.inline_svg());
        }
        body.push_str("</div>\n<h2>Figures side by side</h2>\n<p class=\"note\">Change against the baseline; <b>*</b>: significant (the figures lie further apart than their 95% intervals allow; not judged where a point's verdict is other than headroom or caveat).</p>\n<table><tr><th>point</th><th>figure</th>");
        for s in &self.sources {
            body.push_str(&format!("<th>{}</th>", escape(&s.label)));
        }
        for s in &self.sources[1..] {
            body.push_str(&format!("<th>Δ {}</th>", escape(&s.label)));
        }
        body.push_str("</tr>");
        let mut point = "";
        for l in &self.lines {
            if l.point != point {
                point = &l.point;
                body.push_str(&format!("<tr><td>{}</td><td>verdict</td>", escape(point)));
                for label in &l.labels {
                    body.push_str(&format!("<td>{}</td>", label.map_or("–", Label::as_str)));
                }
                body.push_str(&"<td></td>".repeat(self.sources.len() - 1));
                body.push_str("</tr>");
            }
            body.push_str(&format!(
                "<tr><td>{}</td><td>{}</td>",
                escape(&l.point),
                escape(title_of(l.figure))
            ));
            for v in &l.values {
                body.push_str(&format!("<td>{}</td>", num(v.map(|v| v.0))));
            }
            for i in 1..self.sources.len() {
                body.push_str(&format!(
                    "<td>{}{}</td>",
                    l.change_pct(i).map_or("–".into(), |c| format!("{c:+.1}%")),
                    if l.significant(i) == Some(true) {
                        " *"
                    } else {
                        ""
                    }
                ));
            }
            body.push_str("</tr>");
        }
        body.push_str("</table>");
        super::html::page("ringperf comparison", &body)
    }

    /// Writes `compare.json`, `compare.csv`, `compare.html` and `plots/pareto_*.svg` into
    /// `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir.join("plots"))?;
        crate::artifact::write(
            &dir.join(JSON),
            serde_json::to_vec_pretty(&self.to_json()).map_err(std::io::Error::other)?,
        )?;
        crate::artifact::write(
            &dir.join(CSV),
            self.to_csv().map_err(std::io::Error::other)?,
        )?;
        for (name, c) in self.charts() {
            crate::artifact::write(&dir.join("plots").join(format!("{name}.svg")), c.svg())?;
        }
        crate::artifact::write(&dir.join(HTML), self.html())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_on_the_front_unless_another_is_as_good_in_both_and_better_in_one() {
        let p = |x: f64, y: f64| (Some(x), Some(y));
        // (100, 10) is dominated by (120, 10); (50, 5) and (120, 10) and (200, 40) trade off.
        let pts = [
            p(100.0, 10.0),
            p(120.0, 10.0),
            p(50.0, 5.0),
            p(200.0, 40.0),
            (None, Some(1.0)),
        ];
        assert_eq!(pareto(&pts, true), [false, true, true, true, false]);
        // Higher is better: (200, 40) is at least as good as every other point in both.
        assert_eq!(pareto(&pts, false), [false, false, false, true, false]);
        // Two equal points are both on the front.
        assert_eq!(pareto(&[p(1.0, 1.0), p(1.0, 1.0)], true), [true, true]);
    }

    #[test]
    fn a_change_is_significant_only_beyond_both_intervals() {
        let i = |lo: f64, hi: f64| Some(Interval { lo, hi });
        // Half-widths 3 and 4 facing each other: 5 apart is the edge.
        assert_eq!(
            significant(10.0, i(7.0, 13.0), 15.1, i(11.1, 19.1)),
            Some(true)
        );
        assert_eq!(
            significant(10.0, i(7.0, 13.0), 14.9, i(10.9, 18.9)),
            Some(false)
        );
        // The side facing the other figure counts: a wide upper side of b does not matter
        // when b is above a.
        assert_eq!(
            significant(10.0, i(9.0, 11.0), 12.0, i(11.5, 100.0)),
            Some(true)
        );
        assert_eq!(
            significant(12.0, i(5.0, 12.5), 10.0, i(9.0, 11.0)),
            Some(false)
        );
        assert_eq!(significant(10.0, None, 20.0, i(19.0, 21.0)), None);
        // Zero-width intervals (a percentile of many equal values) do not make a difference
        // below the histograms' resolution significant.
        assert_eq!(
            significant(4.013, i(4.013, 4.013), 4.012, i(4.012, 4.012)),
            Some(false)
        );
        assert_eq!(
            significant(4.013, i(4.013, 4.013), 4.1, i(4.1, 4.1)),
            Some(true)
        );
    }
}
