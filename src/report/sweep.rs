//! Many runs, one answer: a sweep's summary (one row per load point, read back from each
//! point's `profile_export_ringperf.json`, so a resumed sweep and `ringperf report` read what
//! a fresh one wrote), the knee where more load stops buying throughput, and the statistics
//! over repeated runs of one point (mean, sample standard deviation, Student-t confidence
//! interval, as AIPerf's `--num-profile-runs` aggregate).

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::intervals::{self, CONFIDENCE};
use super::verdict::Label;
use crate::plan::sweep::{judge_step, Axis, Point, StepGain, StepVerdict, KNEE_MIN_SHARE};
use crate::stats::{positive_mean_interval, Interval};

/// The summary files, at the top of a sweep's artifact folder.
pub const SUMMARY_CSV: &str = "sweep_summary.csv";
/// See [`SUMMARY_CSV`].
pub const SUMMARY_JSON: &str = "sweep_summary.json";
/// A run's summary document.
pub const PROFILE_JSON: &str = "profile_export_ringperf.json";
/// The aggregate over repeated runs, in `<point>/aggregate/`.
pub const AGGREGATE_JSON: &str = "profile_export_ringperf_aggregate.json";
/// See [`AGGREGATE_JSON`].
pub const AGGREGATE_CSV: &str = "profile_export_ringperf_aggregate.csv";

/// The summary's figures: column name, and where it is in a run's JSON.
pub const FIGURES: &[(&str, &str)] = &[
    ("request_throughput", "/request_throughput/avg"),
    ("output_token_throughput", "/output_token_throughput/avg"),
    ("total_token_throughput", "/total_token_throughput/avg"),
    (
        "output_token_throughput_per_user_p50",
        "/output_token_throughput_per_user/p50",
    ),
    ("in_flight_mean", "/client_health/held_in_flight/mean"),
    ("ttft_avg_ms", "/time_to_first_token/avg"),
    ("ttft_p50_ms", "/time_to_first_token/p50"),
    ("ttft_p90_ms", "/time_to_first_token/p90"),
    ("ttft_p99_ms", "/time_to_first_token/p99"),
    ("itl_avg_ms", "/inter_token_latency/avg"),
    ("itl_p50_ms", "/inter_token_latency/p50"),
    ("itl_p99_ms", "/inter_token_latency/p99"),
    ("request_latency_p50_ms", "/request_latency/p50"),
    ("request_latency_p99_ms", "/request_latency/p99"),
    ("goodput", "/goodput/avg"),
    ("goodput_fraction", "/goodput_detail/good_fraction"),
    ("request_count", "/request_count/avg"),
    ("error_request_count", "/error_request_count/avg"),
    (
        "client_added_delay_p99_us",
        "/client_health/client_added_delay/p99",
    ),
    ("gpu_avg_power_w", "/gpu_telemetry/totals/avg_power_w"),
    (
        "joules_per_output_token",
        "/gpu_telemetry/totals/joules_per_output_token",
    ),
];

/// One load point of a sweep, summarized over its runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The point.
    pub point: Point,
    /// Runs summarized (each figure is their mean).
    pub runs: usize,
    /// [`FIGURES`], in order; `None` where no run has it.
    pub figures: Vec<Option<f64>>,
    /// The 95% interval of each of [`intervals::FIGURES`], in order: over the runs when
    /// there are several, else the run's own (see [`intervals`]).
    pub intervals: Vec<Option<Interval>>,
    /// A run of this point may have been limited by the client.
    pub client_limited: bool,
    /// ringperf's simulator stalled in a run of this point (it served slower than told).
    pub simulator_stalled: bool,
    /// The client verdict (of a limited run, when there is one).
    pub verdict: String,
    /// The point's one label: the most serious of its runs'.
    pub label: Label,
    /// What the server did in the run where it failed most (empty without failures).
    pub server: String,
    /// The server failed most requests, or stopped answering, in a run of this point.
    pub server_failing: bool,
    /// A run was cut short (Ctrl-C).
    pub cancelled: bool,
}

impl Row {
    /// The row of `point` from its runs' JSON documents (at least one).
    pub fn of(point: Point, docs: &[Value]) -> Row {
        let figures = FIGURES
            .iter()
            .map(|(_, at)| {
                let got: Vec<f64> = docs
                    .iter()
                    .filter_map(|d| d.pointer(at)?.as_f64())
                    .collect();
                (!got.is_empty()).then(|| got.iter().sum::<f64>() / got.len() as f64)
            })
            .collect();
        let limited = |d: &&Value| d.pointer("/client_health/limited") == Some(&json!(true));
        let verdict = docs
            .iter()
            .find(limited)
            .or(docs.last())
            .and_then(|d| d.pointer("/client_health/verdict")?.as_str())
            .unwrap_or("")
            .to_string();
        let label_of = |d: &Value| {
            d.pointer("/verdict/label")
                .and_then(Value::as_str)
                .and_then(Label::parse)
                // An artifact from before labels: what its client health says.
                .unwrap_or_else(|| {
                    let stalled = d
                        .pointer("/client_health/simulator_stalled")
                        .is_some_and(|v| !v.is_null());
                    match (stalled, limited(&d)) {
                        (true, _) => Label::SimulatorStalled,
                        (false, true) => Label::Limited,
                        _ => Label::Headroom,
                    }
                })
        };
        let worst = docs.iter().min_by_key(|d| label_of(d));
        let label = worst.map_or(Label::Headroom, label_of);
        // The server's line of the run where it failed most (none where it failed nothing).
        let failed = |d: &&Value| d.pointer("/server_health/failed").and_then(Value::as_u64);
        let server = docs
            .iter()
            .filter(|d| failed(d) > Some(0))
            .max_by_key(failed)
            .and_then(|d| d.pointer("/server_health/line")?.as_str())
            .unwrap_or("")
            .to_string();
        let intervals = intervals::FIGURES
            .iter()
            .map(|name| {
                if docs.len() < 2 {
                    return intervals::from_doc(docs.first()?, name);
                }
                let at = FIGURES.iter().find(|(n, _)| n == name)?.1;
                let got: Vec<f64> = docs
                    .iter()
                    .filter_map(|d| d.pointer(at)?.as_f64())
                    .collect();
                positive_mean_interval(&got, CONFIDENCE).map(|(i, _)| i)
            })
            .collect();
        Row {
            point,
            runs: docs.len(),
            figures,
            intervals,
            client_limited: docs.iter().any(|d| limited(&d)),
            simulator_stalled: docs.iter().any(|d| {
                d.pointer("/client_health/simulator_stalled")
                    .is_some_and(|v| !v.is_null())
            }),
            verdict,
            label,
            server,
            server_failing: docs.iter().any(|d| {
                matches!(
                    d.pointer("/server_health/state").and_then(Value::as_str),
                    Some("failing" | "stopped")
                )
            }),
            cancelled: docs
                .iter()
                .any(|d| d.get("was_cancelled") == Some(&json!(true))),
        }
    }

    /// True when the point cannot stand for the server at its load: the simulator stalled,
    /// or the server failed most requests. The knee and the steps leave it out.
    pub fn left_out(&self) -> bool {
        self.simulator_stalled || self.server_failing
    }

    /// A figure by column name.
    pub fn get(&self, name: &str) -> Option<f64> {
        let i = FIGURES.iter().position(|(n, _)| *n == name)?;
        self.figures[i]
    }

    /// A figure's 95% interval by column name.
    pub fn interval(&self, name: &str) -> Option<Interval> {
        let i = intervals::FIGURES.iter().position(|n| *n == name)?;
        self.intervals[i]
    }

    /// How the row's intervals were made.
    pub fn interval_method(&self) -> &'static str {
        if self.runs >= 2 {
            "over the point's runs: Student's t on the logarithms of the runs' figures"
        } else {
            "within the run: see the run's intervals"
        }
    }

    /// The throughput the knee is judged on, with its interval: output tokens per second,
    /// or requests per second for an endpoint that makes no tokens.
    fn throughput(&self) -> Option<(f64, Option<Interval>)> {
        let name = if self.get("output_token_throughput").is_some_and(|t| t > 0.0) {
            "output_token_throughput"
        } else {
            "request_throughput"
        };
        Some((self.get(name)?, self.interval(name)))
    }

    /// The asked concurrency and request rate (one of them is this row's point).
    fn asked(&self) -> [Option<f64>; 2] {
        let v = Some(self.point.value);
        match self.point.axis {
            Axis::Concurrency => [v, None],
            Axis::RequestRate => [None, v],
            _ => [None, None],
        }
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("point".into(), json!(self.point.name()));
        let [c, r] = self.asked();
        m.insert("concurrency".into(), json!(c));
        m.insert("request_rate".into(), json!(r));
        if self.point.axis.is_workload() {
            m.insert(self.point.axis.name().into(), json!(self.point.value));
        }
        m.insert("runs".into(), json!(self.runs));
        for ((name, _), v) in FIGURES.iter().zip(&self.figures) {
            m.insert((*name).into(), json!(v));
        }
        for (name, i) in intervals::FIGURES.iter().zip(&self.intervals) {
            m.insert(format!("{name}_ci95"), json!(i.map(|i| [i.lo, i.hi])));
        }
        m.insert("interval_method".into(), json!(self.interval_method()));
        m.insert("client_limited".into(), json!(self.client_limited));
        m.insert("simulator_stalled".into(), json!(self.simulator_stalled));
        m.insert("verdict".into(), json!(self.verdict));
        m.insert("label".into(), json!(self.label));
        m.insert("server".into(), json!(self.server));
        m.insert("server_failing".into(), json!(self.server_failing));
        m.insert("was_cancelled".into(), json!(self.cancelled));
        Value::Object(m)
    }
}

/// Where more load stopped buying throughput.
#[derive(Debug, Clone, PartialEq)]
pub struct Knee {
    /// The last point that still scaled.
    pub at: Point,
    /// The next point up, which did not.
    pub next: Point,
    /// The share of the proportional throughput gain that the next step returned (1: it
    /// scaled perfectly; 0: no gain).
    pub efficiency: f64,
    /// The step's throughput gain, its 95% interval and the gain needed.
    pub step: StepGain,
    /// The step before, which scaled: the point it reached and its gain.
    pub before: Option<(Point, StepGain)>,
}

/// One step between consecutive points along the main axis, judged.
#[derive(Debug, Clone, Copy)]
struct Step {
    from: Point,
    to: Point,
    gain: StepGain,
    /// A point between `from` and `to` was left out (the simulator stalled there).
    over_stall: bool,
}

/// The axis most rows share (concurrency on a tie).
pub fn main_axis(rows: &[Row]) -> Option<Axis> {
    let rates = rows
        .iter()
        .filter(|r| r.point.axis == Axis::RequestRate)
        .count();
    (!rows.is_empty()).then_some(if rates * 2 > rows.len() {
        Axis::RequestRate
    } else {
        Axis::Concurrency
    })
}

/// Each step up the load along the main axis (points where the simulator stalled left out),
/// judged: its throughput gain against
/// [`KNEE_MIN_SHARE`] of the proportional gain, with the gain's 95% interval from the two
/// points' intervals (their relative half-widths in quadrature). Without intervals the
/// point estimates decide. A step over a left-out point cannot place the knee (it may lie
/// at the point left out), so a stop there is undecided.
fn steps(rows: &[Row]) -> Vec<Step> {
    let Some(along) = main_axis(rows) else {
        return Vec::new();
    };
    let stalled: Vec<f64> = rows
        .iter()
        .filter(|r| r.point.axis == along && r.left_out())
        .map(|r| r.point.value)
        .collect();
    let mut sorted: Vec<&Row> = rows
        .iter()
        .filter(|r| r.point.axis == along && r.throughput().is_some() && !r.left_out())
        .collect();
    sorted.sort_by(|a, b| a.point.value.total_cmp(&b.point.value));
    let half =
        |t: f64, i: Option<Interval>| i.filter(|_| t > 0.0).map(|i| (i.hi - i.lo) / (2.0 * t));
    sorted
        .windows(2)
        .filter_map(|w| {
            let (a, b) = (w[0], w[1]);
            let ((ta, ia), (tb, ib)) = (a.throughput()?, b.throughput()?);
            let mut gain = judge_step(
                ta,
                half(ta, ia),
                tb,
                half(tb, ib),
                b.point.value / a.point.value,
            )?;
            let over_stall = stalled
                .iter()
                .any(|&v| a.point.value < v && v < b.point.value);
            if over_stall && gain.verdict == StepVerdict::Stopped {
                gain.verdict = StepVerdict::Undecided;
            }
            Some(Step {
                from: a.point,
                to: b.point,
                gain,
                over_stall,
            })
        })
        .collect()
}

/// The knee: going up the load, the first step whose throughput gain falls short of
/// [`KNEE_MIN_SHARE`] of the proportional gain beyond the points' 95% intervals; a step
/// whose interval straddles that line decides nothing (see [`undecided`]). `None` when no
/// step stopped. An automatic sweep mixes axes (a serial and a saturated closed loop,
/// rates between): the knee is judged along the axis most of its points share.
pub fn knee(rows: &[Row]) -> Option<Knee> {
    let steps = steps(rows);
    let k = steps
        .iter()
        .position(|s| s.gain.verdict == StepVerdict::Stopped)?;
    let s = steps[k];
    let load = s.to.value / s.from.value;
    Some(Knee {
        at: s.from,
        next: s.to,
        efficiency: s.gain.gain / (load - 1.0),
        step: s.gain,
        before: k
            .checked_sub(1)
            .map(|p| steps[p])
            .filter(|p| p.gain.verdict == StepVerdict::Scaled)
            .map(|p| (p.to, p.gain)),
    })
}

/// Steps before the knee (or all of them, without one) whose gain's interval straddles the
/// line: a sentence saying which and what would decide them.
pub fn undecided(rows: &[Row]) -> Option<String> {
    let steps = steps(rows);
    let until = steps
        .iter()
        .position(|s| s.gain.verdict == StepVerdict::Stopped)
        .unwrap_or(steps.len());
    let open: Vec<String> = steps[..until]
        .iter()
        .filter(|s| s.gain.verdict == StepVerdict::Undecided)
        .map(|s| {
            format!(
                "{} → {} ({}{})",
                s.from.value,
                s.to.value,
                gain_text(s.gain.gain, s.gain.interval),
                if s.over_stall {
                    "; over a point left out (the simulator stalled or the server failed), so \
                     the knee may lie there"
                } else {
                    ""
                }
            )
        })
        .collect();
    (!open.is_empty()).then(|| {
        format!(
            "undecided step(s): {}: their throughput gain's 95% interval straddles the {:.0}% of \
             the proportional gain that counts as scaling; repeats (--num-profile-runs 3) or \
             longer runs would decide",
            open.join(", "),
            KNEE_MIN_SHARE * 100.0
        )
    })
}

fn gain_text(gain: f64, interval: Option<(f64, f64)>) -> String {
    match interval {
        Some((lo, hi)) => format!(
            "{:+.1}%, 95% interval {:+.1}% to {:+.1}%",
            gain * 100.0,
            lo * 100.0,
            hi * 100.0
        ),
        None => format!("{:+.1}%, no interval", gain * 100.0),
    }
}

/// The knee's rule, in words, for the artifacts.
pub const KNEE_RULE: &str = "the knee is the last point before the first step up in load whose \
    throughput gain falls short of 10% of the load step's proportional gain (a doubling must buy \
    10% more) beyond its 95% interval (the two points' relative half-widths in quadrature); a \
    step whose interval straddles that line is undecided and does not place the knee";

impl Knee {
    /// The knee in the summaries' JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "at": self.at.value,
            "next": self.next.value,
            "efficiency": self.efficiency,
            "gain": self.step.gain,
            "gain_ci95": self.step.interval.map(|(lo, hi)| [lo, hi]),
            "needed": self.step.needed,
            "text": self.describe(),
        })
    }

    /// One line for the console and the report: the rule and the numbers that decided.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "knee at {}: the step to {} gained {} in throughput, short of the {:.0}% that \
             counts as scaling ({:.0}% of the load step's proportional gain)",
            self.at.label(),
            self.next.value,
            gain_text(self.step.gain, self.step.interval),
            self.step.needed * 100.0,
            KNEE_MIN_SHARE * 100.0
        );
        if let Some((p, g)) = self.before {
            s.push_str(&format!(
                "; the step to {} had gained {}",
                p.value,
                gain_text(g.gain, g.interval)
            ));
        }
        s
    }
}

/// Whether an open-loop point is past what the server can take, judged against the serial
/// run: it fell behind the asked rate (achieved under 90% of it: throughput went flat) while
/// requests queued (TTFT p50, or request latency without TTFT, over twice the serial run's).
/// Says which signals decided, with their figures.
pub fn over_saturated(serial: &Row, row: &Row) -> Option<String> {
    let asked = row.point.value;
    let achieved = row.get("request_throughput")?;
    let (name, base, now) = match (serial.get("ttft_p50_ms"), row.get("ttft_p50_ms")) {
        (Some(a), Some(b)) => ("TTFT p50", a, b),
        _ => (
            "request latency p50",
            serial.get("request_latency_p50_ms")?,
            row.get("request_latency_p50_ms")?,
        ),
    };
    (row.point.axis == Axis::RequestRate && achieved < 0.9 * asked && now > 2.0 * base).then(|| {
        format!(
            "stopped at {}: the server kept up with {achieved:.3} of {asked} requests/s asked \
             (throughput flat) while {name} grew from {base:.1} ms to {now:.1} ms (requests \
             queue): it is over-saturated",
            row.point.label()
        )
    })
}

/// The `sweep_summary.json` document; `extra` (an object) adds how the points were chosen:
/// where a `--search` or an automatic sweep ended.
pub fn summary_json(rows: &[Row], extra: Option<Value>) -> Value {
    let mut axes: Vec<&str> = rows.iter().map(|r| r.point.axis.name()).collect();
    axes.dedup();
    let mut doc = json!({
        "schema_version": 1,
        "axis": match axes.as_slice() {
            [one] => *one,
            [] => "none",
            _ => "mixed",
        },
        "points": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
        "knee": knee(rows).map(|k| k.to_json()),
        "knee_rule": KNEE_RULE,
        "undecided": undecided(rows),
        "interval_confidence": CONFIDENCE,
    });
    if let (Some(Value::Object(extra)), Value::Object(d)) = (extra, &mut doc) {
        d.extend(extra);
    }
    doc
}

/// The `sweep_summary.csv` text.
pub fn summary_csv(rows: &[Row]) -> Result<Vec<u8>, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut head = vec!["point", "concurrency", "request_rate", "runs"];
    head.extend(FIGURES.iter().map(|(n, _)| *n));
    let ci_heads: Vec<String> = intervals::FIGURES
        .iter()
        .flat_map(|n| [format!("{n}_ci95_lo"), format!("{n}_ci95_hi")])
        .collect();
    head.extend(ci_heads.iter().map(String::as_str));
    head.extend([
        "interval_method",
        "client_limited",
        "simulator_stalled",
        "verdict",
        "label",
        "server",
        "was_cancelled",
    ]);
    w.write_record(&head)?;
    for r in rows {
        let mut line = vec![r.point.name()];
        line.extend(
            r.asked()
                .map(|v| v.map_or(String::new(), |v| v.to_string())),
        );
        line.push(r.runs.to_string());
        line.extend(
            r.figures
                .iter()
                .map(|f| f.map_or(String::new(), |v| v.to_string())),
        );
        for i in &r.intervals {
            line.extend(match i {
                Some(i) => [i.lo.to_string(), i.hi.to_string()],
                None => [String::new(), String::new()],
            });
        }
        line.extend([
            r.interval_method().to_string(),
            r.client_limited.to_string(),
            r.simulator_stalled.to_string(),
            r.verdict.clone(),
            r.label.as_str().to_string(),
            r.server.clone(),
            r.cancelled.to_string(),
        ]);
        w.write_record(&line)?;
    }
    w.into_inner().map_err(|e| e.into_error().into())
}

/// Writes `sweep_summary.csv` and `sweep_summary.json` into `dir`.
pub fn write_summary(dir: &Path, rows: &[Row], extra: Option<Value>) -> std::io::Result<()> {
    let csv = summary_csv(rows).map_err(std::io::Error::other)?;
    crate::artifact::write(&dir.join(SUMMARY_CSV), csv)?;
    let mut j = serde_json::to_vec_pretty(&summary_json(rows, extra))?;
    j.push(b'\n');
    crate::artifact::write(&dir.join(SUMMARY_JSON), j)
}

/// The figures the summary tables show (console and report), with their headers.
pub const TABLE: &[(&str, &str)] = &[
    ("req/s", "request_throughput"),
    ("out tok/s", "output_token_throughput"),
    ("in flight", "in_flight_mean"),
    ("TTFT p50", "ttft_p50_ms"),
    ("TTFT p99", "ttft_p99_ms"),
    ("ITL p50", "itl_p50_ms"),
    ("ITL p99", "itl_p99_ms"),
    ("e2e p99", "request_latency_p99_ms"),
    ("goodput", "goodput"),
];

/// The summary as a console table.
pub fn render(rows: &[Row]) -> String {
    let mut out = String::new();
    let cell = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
    let mut head = vec!["point"];
    head.extend(TABLE.iter().map(|(h, _)| *h));
    head.extend(["errors", "verdict"]);
    let mut lines: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for r in rows {
        let mut line = vec![r.point.label()];
        line.extend(TABLE.iter().map(|(_, f)| cell(r.get(f))));
        line.push(error_cell(r));
        let label = if r.label.trusted() {
            r.label.as_str().to_string()
        } else {
            r.label.as_str().to_uppercase()
        };
        line.push(if r.cancelled {
            format!("{label}, cancelled")
        } else {
            label
        });
        lines.push(line);
    }
    let widths: Vec<usize> = (0..head.len())
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for (i, l) in lines.iter().enumerate() {
        for (c, v) in l.iter().enumerate() {
            let pad = widths[c] - v.chars().count();
            if c == 0 {
                out.push_str(v);
                out.push_str(&" ".repeat(pad));
            } else {
                out.push_str("  ");
                out.push_str(&" ".repeat(pad));
                out.push_str(v);
            }
        }
        out.push('\n');
        if i == 0 {
            out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1)));
            out.push('\n');
        }
    }
    out.push_str("(ms for latencies; each row the mean of its runs)\n");
    // A point run several times: each figure's mean with its 95% interval over the runs.
    for r in rows.iter().filter(|r| r.runs >= 2) {
        let figures: Vec<String> = intervals::FIGURES
            .iter()
            .filter_map(|name| {
                let (v, i) = (r.get(name)?, r.interval(name)?);
                Some(format!("{name} {v:.2} [{:.2}, {:.2}]", i.lo, i.hi))
            })
            .collect();
        if !figures.is_empty() {
            out.push_str(&format!(
                "{} over {} runs, mean [95% interval]: {}\n",
                r.point.label(),
                r.runs,
                figures.join(", ")
            ));
        }
    }
    if let Some(k) = knee(rows) {
        out.push_str(&format!("{}\n", k.describe()));
    }
    if let Some(u) = undecided(rows) {
        out.push_str(&format!("{u}\n"));
    }
    let stalled: Vec<String> = rows
        .iter()
        .filter(|r| r.simulator_stalled)
        .map(|r| r.point.label())
        .collect();
    if !stalled.is_empty() {
        out.push_str(&format!(
            "the simulator stalled at {}: those points measured a slower server and are left \
             out of the knee\n",
            stalled.join(", ")
        ));
    }
    if let Some(rise) = failure_rise(rows) {
        out.push_str(&format!("{rise}\n"));
    }
    for r in rows.iter().filter(|r| !r.server.is_empty()) {
        let left = if r.server_failing {
            ": left out of the knee"
        } else {
            ""
        };
        out.push_str(&format!(
            "server at {}: {}{left}\n",
            r.point.label(),
            r.server
        ));
    }
    out
}

/// How the failed share grew along the sweep, from its first point to its last, when it
/// grew by 20 points or more: "failures rose from 0% at concurrency 4 to 98% at concurrency
/// 64".
pub fn failure_rise(rows: &[Row]) -> Option<String> {
    let share = |r: &Row| {
        let (e, n) = (r.get("error_request_count")?, r.get("request_count")?);
        Some(e / (e + n).max(1.0))
    };
    let (first, last) = (rows.first()?, rows.last()?);
    let (a, b) = (share(first)?, share(last)?);
    (b - a >= 0.2).then(|| {
        format!(
            "failures rose from {:.0}% at {} to {:.0}% at {}",
            a * 100.0,
            first.point.label(),
            b * 100.0,
            last.point.label()
        )
    })
}

/// A point's failed requests, with their share when any failed: `768 (98%)`.
pub fn error_cell(r: &Row) -> String {
    let (Some(e), Some(n)) = (r.get("error_request_count"), r.get("request_count")) else {
        return "-".into();
    };
    if e > 0.0 {
        format!("{e:.0} ({:.0}%)", 100.0 * e / (e + n).max(1.0))
    } else {
        "0".into()
    }
}

/// The statistics of one figure over repeated runs.
fn over_runs(values: &[f64], confidence: f64) -> Map<String, Value> {
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut m = Map::new();
    m.insert("mean".into(), json!(mean));
    m.insert("min".into(), json!(min));
    m.insert("max".into(), json!(max));
    if let Some(i) = crate::stats::TInterval::of(values, confidence) {
        // Every figure here is a time, a rate or a count: none can be negative, so the
        // interval is taken on the logarithms (or clamped at 0 where a run gave 0).
        let (ci, method) = positive_mean_interval(values, confidence).expect("2 values or more");
        let (low, high) = (ci.lo, ci.hi);
        m.insert("std".into(), json!(i.std));
        m.insert(
            "cv".into(),
            json!((mean != 0.0).then(|| i.std / mean.abs())),
        );
        m.insert("se".into(), json!(i.se));
        m.insert("ci_low".into(), json!(low));
        m.insert("ci_high".into(), json!(high));
        m.insert("t_critical".into(), json!(i.t));
        m.insert("ci_method".into(), json!(method));
    }
    m
}

/// The statistics a run's JSON holds for each metric.
const STATS: &[&str] = &[
    "avg", "min", "max", "std", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99",
];

/// The aggregate document over the repeated runs of one point: for every metric and
/// statistic of the runs' JSON (`time_to_first_token_p99`, `request_throughput_avg`…), its
/// mean, min, max and, with 2 runs or more, sample standard deviation, coefficient of
/// variation, standard error and Student-t confidence interval. `failed` names runs that
/// measured nothing, with why.
pub fn aggregate(
    labels: &[String],
    docs: &[Value],
    confidence: f64,
    failed: &[(String, String)],
) -> Value {
    let mut metrics = Map::new();
    if let Some(Value::Object(first)) = docs.first() {
        for (tag, v) in first {
            let Some(unit) = v.get("unit").and_then(Value::as_str) else {
                continue;
            };
            for stat in STATS {
                let got: Vec<f64> = docs
                    .iter()
                    .filter_map(|d| d.get(tag)?.get(*stat)?.as_f64())
                    .collect();
                if got.len() != docs.len() {
                    continue;
                }
                let mut m = over_runs(&got, confidence);
                m.insert("unit".into(), json!(unit));
                metrics.insert(format!("{tag}_{stat}"), Value::Object(m));
            }
        }
    }
    json!({
        "metadata": {
            "aggregation_type": "confidence",
            "num_profile_runs": labels.len() + failed.len(),
            "num_successful_runs": labels.len(),
            "confidence_level": confidence,
            "run_labels": labels,
            "failed_runs": failed.iter().map(|(l, e)| json!({"label": l, "error": e}))
                .collect::<Vec<_>>(),
        },
        "metrics": metrics,
    })
}

/// The aggregate as CSV: one row per figure.
pub fn aggregate_csv(agg: &Value) -> Result<Vec<u8>, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let cols = [
        "mean",
        "std",
        "min",
        "max",
        "cv",
        "se",
        "ci_low",
        "ci_high",
        "t_critical",
        "ci_method",
    ];
    let mut head = vec!["Metric", "unit"];
    head.extend(cols);
    w.write_record(&head)?;
    if let Some(Value::Object(m)) = agg.get("metrics") {
        for (name, s) in m {
            let mut line = vec![
                name.clone(),
                s.get("unit")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            ];
            line.extend(cols.iter().map(|c| match s.get(*c) {
                Some(Value::String(t)) => t.clone(),
                Some(v) => v.as_f64().map_or(String::new(), |v| v.to_string()),
                None => String::new(),
            }));
            w.write_record(&line)?;
        }
    }
    w.into_inner().map_err(|e| e.into_error().into())
}

/// A JSON artifact, read back; an error names the file.
pub fn read_json(path: &Path) -> std::io::Result<Value> {
    serde_json::from_slice(&std::fs::read(path)?)
        .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))
}

/// The runs of one point's folder: `profile_runs/run_*/` when repeated, else the folder
/// itself. Returns each run's label and JSON document, in run order; runs without a
/// complete document are left out.
pub fn read_runs(point_dir: &Path) -> std::io::Result<Vec<(String, Value)>> {
    let runs_dir = point_dir.join("profile_runs");
    let mut dirs: Vec<(String, PathBuf)> = if runs_dir.is_dir() {
        let mut v = Vec::new();
        for e in std::fs::read_dir(&runs_dir)? {
            let e = e?;
            v.push((e.file_name().to_string_lossy().into_owned(), e.path()));
        }
        v.sort();
        v
    } else {
        vec![("run_0001".into(), point_dir.to_path_buf())]
    };
    dirs.retain(|(_, d)| d.join(PROFILE_JSON).is_file());
    dirs.into_iter()
        .map(|(label, d)| Ok((label, read_json(&d.join(PROFILE_JSON))?)))
        .collect()
}

/// The point a sweep folder is named after (`concurrency_16`, `request_rate_2.5`).
pub fn point_of_dir(name: &str) -> Option<Point> {
    [
        Axis::Concurrency,
        Axis::RequestRate,
        Axis::InputSequenceLength,
        Axis::NumDatasetEntries,
        Axis::BatchSize,
    ]
    .into_iter()
    .find_map(|axis| {
        let v: f64 = name
            .strip_prefix(axis.name())?
            .strip_prefix('_')?
            .parse()
            .ok()?;
        Some(Point { axis, value: v })
    })
}

/// The rows of a sweep folder, from each point's own artifacts, in load order.
pub fn read_sweep(dir: &Path) -> std::io::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let Some(point) = point_of_dir(&e.file_name().to_string_lossy()) else {
            continue;
        };
        let runs = read_runs(&e.path())?;
        if !runs.is_empty() {
            let docs: Vec<Value> = runs.into_iter().map(|(_, d)| d).collect();
            rows.push(Row::of(point, &docs));
        }
    }
    sort(&mut rows);
    Ok(rows)
}

/// Puts rows in load order: by the swept flag's value, or, when an automatic sweep mixes
/// closed-loop and open-loop points, by the request rate each achieved.
pub fn sort(rows: &mut [Row]) {
    let mixed = rows.windows(2).any(|w| w[0].point.axis != w[1].point.axis);
    let key = |r: &Row| {
        if mixed {
            r.get("request_throughput").unwrap_or(0.0)
        } else {
            r.point.value
        }
    };
    rows.sort_by(|a, b| key(a).total_cmp(&key(b)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(tput: f64, ttft_p99: f64, limited: bool) -> Value {
        json!({
            "output_token_throughput": {"unit": "tokens/sec", "avg": tput},
            "request_throughput": {"unit": "requests/sec", "avg": tput / 100.0},
            "time_to_first_token": {"unit": "ms", "avg": ttft_p99 / 2.0, "p50": ttft_p99 / 2.0,
                                    "p99": ttft_p99, "min": 1.0, "max": ttft_p99},
            "error_request_count": {"unit": "requests", "avg": 0.0},
            "was_cancelled": false,
            "client_health": {"limited": limited, "verdict": if limited { "limited" } else { "ok" },
                              "held_in_flight": {"asked": 4, "mean": 3.9}},
        })
    }

    fn point(v: f64) -> Point {
        Point {
            axis: Axis::Concurrency,
            value: v,
        }
    }

    #[test]
    fn a_row_is_the_mean_of_its_runs_and_limited_if_any_run_was() {
        let r = Row::of(
            point(8.0),
            &[doc(100.0, 10.0, false), doc(300.0, 30.0, true)],
        );
        assert_eq!(r.runs, 2);
        assert_eq!(r.get("output_token_throughput"), Some(200.0));
        assert_eq!(r.get("ttft_p99_ms"), Some(20.0));
        assert_eq!(r.get("in_flight_mean"), Some(3.9));
        assert_eq!(r.get("itl_p99_ms"), None);
        assert!(r.client_limited);
        assert_eq!(r.verdict, "limited");
        let csv = String::from_utf8(summary_csv(std::slice::from_ref(&r)).unwrap()).unwrap();
        let mut lines = csv.lines();
        assert!(lines
            .next()
            .unwrap()
            .starts_with("point,concurrency,request_rate,runs,request_throughput,"));
        assert!(lines
            .next()
            .unwrap()
            .starts_with("concurrency_8,8,,2,2,200,"));
        let j = summary_json(&[r], Some(json!({"search": {"text": "x"}})));
        assert_eq!(j["search"]["text"], "x");
        assert_eq!(j["axis"], "concurrency");
        assert_eq!(j["points"][0]["request_rate"], Value::Null);
        assert_eq!(j["points"][0]["concurrency"], json!(8.0));
        assert_eq!(j["points"][0]["itl_p99_ms"], Value::Null);
    }

    #[test]
    fn a_point_whose_server_failed_is_labelled_left_out_of_the_knee_and_the_rise_said() {
        // Scales to 32; at 64 most requests time out and the few answers read as a stop.
        let failing = |mut d: Value, failed: f64, ok: f64| {
            d["error_request_count"]["avg"] = json!(failed);
            d["request_count"] = json!({"avg": ok});
            d["verdict"] = json!({"label": "server_failing"});
            d["server_health"] =
                json!({"state": "failing", "failed": failed as u64, "line": "failing: 98%"});
            d
        };
        let healthy = |d: Value| {
            let mut d = d;
            d["request_count"] = json!({"avg": 100.0});
            d
        };
        let rows: Vec<Row> = [(8.0, 80.0), (16.0, 160.0), (32.0, 320.0)]
            .into_iter()
            .map(|(c, t)| Row::of(point(c), &[healthy(doc(t, 1.0, false))]))
            .chain([Row::of(
                point(64.0),
                &[failing(doc(20.0, 1.0, false), 98.0, 2.0)],
            )])
            .collect();
        let last = &rows[3];
        assert_eq!(last.label, Label::ServerFailing);
        assert!(last.server_failing && last.left_out());
        assert_eq!(last.server, "failing: 98%");
        assert_eq!(rows[0].label, Label::Headroom);
        // Its throughput fell to a sixteenth: taken as a point, it would be the knee.
        assert!(knee(&rows).is_none(), "{:?}", knee(&rows));
        assert_eq!(
            failure_rise(&rows).as_deref(),
            Some("failures rose from 0% at concurrency 8 to 98% at concurrency 64")
        );
        let table = render(&rows);
        assert!(table.contains("SERVER FAILING"), "{table}");
        assert!(table.contains("98 (98%)"), "{table}");
        assert!(
            table.contains("server at concurrency 64: failing: 98%: left out of the knee"),
            "{table}"
        );
        assert_eq!(
            summary_json(&rows, None)["points"][3]["label"],
            "server_failing"
        );
    }

    /// A run's document whose output-token throughput has the interval `tput · (1 ± half)`.
    fn doc_ci(tput: f64, half: f64) -> Value {
        let mut d = doc(tput, 1.0, false);
        d["intervals"] = json!({"output_token_throughput":
            {"lo": tput * (1.0 - half), "hi": tput * (1.0 + half), "method": "test"}});
        d
    }

    #[test]
    fn the_knee_is_where_a_load_step_stops_paying() {
        // Scales linearly to 32, then flattens: 64 gets +6.5% for twice the load.
        let rows: Vec<Row> = [
            (8.0, 80.0),
            (16.0, 160.0),
            (32.0, 310.0),
            (64.0, 330.0),
            (4.0, 40.0),
        ]
        .into_iter()
        .map(|(c, t)| Row::of(point(c), &[doc(t, 1.0, false)]))
        .collect();
        let k = knee(&rows).unwrap();
        assert_eq!((k.at.value, k.next.value), (32.0, 64.0));
        assert!(
            (k.efficiency - 20.0 / 310.0).abs() < 1e-9,
            "{}",
            k.efficiency
        );
        assert!((k.step.needed - 0.1).abs() < 1e-12);
        let text = k.describe();
        assert!(
            text.contains("knee at concurrency 32") && text.contains("+6.5%, no interval"),
            "{text}"
        );
        assert!(text.contains("the step to 32 had gained +93.8%"), "{text}");
        // Every step scales: no knee.
        assert_eq!(knee(&rows[..3]), None);
        assert_eq!(knee(&rows[..1]), None);
        // A gain of exactly the share needed still scales.
        let at_line: Vec<Row> = [(32.0, 300.0), (64.0, 330.0)]
            .into_iter()
            .map(|(c, t)| Row::of(point(c), &[doc(t, 1.0, false)]))
            .collect();
        assert_eq!(knee(&at_line), None);
    }

    #[test]
    fn a_step_inside_the_noise_does_not_place_the_knee() {
        // 16 → 32 gains 48% (the simulator's curve at a batch of 32 with its ITL growth):
        // with intervals of ±5% it scaled, and 32 → 64 (+1%) stopped: the knee is 32.
        let rows = |half: f64| -> Vec<Row> {
            [(8.0, 100.0), (16.0, 180.0), (32.0, 266.0), (64.0, 269.0)]
                .into_iter()
                .map(|(c, t)| Row::of(point(c), &[doc_ci(t, half)]))
                .collect()
        };
        let k = knee(&rows(0.05)).unwrap();
        assert_eq!(k.at.value, 32.0);
        let (lo, hi) = k.step.interval.unwrap();
        assert!(lo < 0.0 && hi < 0.1, "{lo} {hi}");
        assert_eq!(undecided(&rows(0.05)), None);
        // With ±30% the last steps straddle the line: no knee, and it says which steps.
        assert_eq!(knee(&rows(0.3)), None);
        let u = undecided(&rows(0.3)).unwrap();
        assert!(
            u.contains("32 → 64") && u.contains("--num-profile-runs"),
            "{u}"
        );
        // The summary says the rule and carries each point's interval.
        let j = summary_json(&rows(0.05), None);
        assert_eq!(j["knee"]["at"], json!(32.0));
        assert!(j["knee_rule"].as_str().unwrap().contains("10%"));
        assert_eq!(
            j["points"][0]["output_token_throughput_ci95"],
            json!([95.0, 105.0])
        );
        let csv = String::from_utf8(summary_csv(&rows(0.05)).unwrap()).unwrap();
        assert!(csv
            .lines()
            .next()
            .unwrap()
            .contains(",output_token_throughput_ci95_lo,output_token_throughput_ci95_hi,"));
    }

    #[test]
    fn a_stop_over_a_stalled_point_does_not_place_the_knee() {
        // The knee is at 16; the simulator stalled there, so 8 → 32 (+29% for four times the
        // load, short of the 30% needed) would put it at 8, a step early.
        let mut rows: Vec<Row> = [(4.0, 1091.0), (8.0, 1578.0), (16.0, 2018.0), (32.0, 2035.0)]
            .into_iter()
            .map(|(c, t)| Row::of(point(c), &[doc_ci(t, 0.005)]))
            .collect();
        assert_eq!(knee(&rows).unwrap().at.value, 16.0);
        rows[2].simulator_stalled = true;
        assert_eq!(knee(&rows), None);
        let u = undecided(&rows).unwrap();
        assert!(
            u.contains("8 → 32") && u.contains("simulator stalled"),
            "{u}"
        );
        // A step over a stalled point that scaled still scales; the stop after it decides.
        rows.push(Row::of(point(64.0), &[doc_ci(2040.0, 0.005)]));
        rows[3] = Row::of(point(32.0), &[doc_ci(2500.0, 0.005)]);
        assert_eq!(knee(&rows).unwrap().at.value, 32.0);
    }

    #[test]
    fn repeats_give_the_row_an_interval_over_its_runs_that_stays_positive() {
        let r = Row::of(
            point(8.0),
            &[
                doc(2.0, 1.0, false),
                doc(40.0, 1.0, false),
                doc(90.0, 1.0, false),
            ],
        );
        let i = r.interval("output_token_throughput").unwrap();
        assert!(i.lo > 0.0 && i.hi > 90.0, "{i:?}");
        assert!(r.interval_method().starts_with("over the point's runs"));
    }

    #[test]
    fn over_saturation_needs_both_a_flat_throughput_and_a_growing_queue() {
        let serial = Row::of(point(1.0), &[doc(100.0, 10.0, false)]);
        let at = |rate: f64, achieved: f64, ttft: f64| {
            let mut d = doc(achieved * 100.0, ttft * 2.0, false);
            d["time_to_first_token"]["p50"] = json!(ttft);
            let p = Point {
                axis: Axis::RequestRate,
                value: rate,
            };
            over_saturated(&serial, &Row::of(p, &[d]))
        };
        // The serial run's TTFT p50 is 5 ms.
        let why = at(50.0, 30.0, 40.0).expect("over-saturated");
        assert!(why.contains("30.000 of 50 requests/s") && why.contains("from 5.0 ms to 40.0 ms"));
        assert_eq!(at(50.0, 46.0, 40.0), None, "kept up");
        assert_eq!(at(50.0, 30.0, 9.0), None, "no queue");
        assert_eq!(over_saturated(&serial, &serial), None, "closed loop");
    }

    #[test]
    fn the_aggregate_has_t_intervals_over_runs() {
        let docs: Vec<Value> = [150.0, 152.0, 148.0, 155.0, 151.0]
            .into_iter()
            .map(|t| doc(1000.0, t, false))
            .collect();
        let labels: Vec<String> = (1..=5).map(|i| format!("run_{i:04}")).collect();
        let a = aggregate(&labels, &docs, 0.95, &[]);
        let m = &a["metrics"]["time_to_first_token_p99"];
        assert_eq!(m["mean"], json!(151.2));
        assert_eq!(m["unit"], json!("ms"));
        // numpy: std(ddof=1) = 2.588435821108957; t(0.975, 4) = 2.7764451051977987.
        let std = m["std"].as_f64().unwrap();
        assert!((std - 2.588_435_821_108_957).abs() < 1e-12);
        // The interval is t on the logarithms, taken back (numpy on np.log of the values:
        // mean 5.0184866, std(ddof=1) 0.0170786).
        let logs: Vec<f64> = [150.0f64, 152.0, 148.0, 155.0, 151.0]
            .iter()
            .map(|v| v.ln())
            .collect();
        let lm = logs.iter().sum::<f64>() / 5.0;
        let ls = (logs.iter().map(|l| (l - lm).powi(2)).sum::<f64>() / 4.0).sqrt();
        assert!(
            (lm - 5.018_486_6).abs() < 1e-6 && (ls - 0.017_078_6).abs() < 1e-6,
            "{lm} {ls}"
        );
        let half = 2.776_445_105_197_798_7 * ls / 5f64.sqrt();
        assert!((m["ci_low"].as_f64().unwrap() - (lm - half).exp()).abs() < 1e-9);
        assert!((m["ci_high"].as_f64().unwrap() - (lm + half).exp()).abs() < 1e-9);
        assert_eq!(m["ci_method"], json!("t on logarithms"));
        assert_eq!(a["metadata"]["num_successful_runs"], json!(5));
        // A figure that does not vary has no coefficient of variation issue and zero width.
        let t = &a["metrics"]["output_token_throughput_avg"];
        assert_eq!(t["std"], json!(0.0));
        assert_eq!(t["ci_low"], t["ci_high"]);
        let csv = String::from_utf8(aggregate_csv(&a).unwrap()).unwrap();
        assert!(csv.starts_with(
            "Metric,unit,mean,std,min,max,cv,se,ci_low,ci_high,t_critical,ci_method\n"
        ));
        assert!(csv.contains("\ntime_to_first_token_p99,ms,151.2,"));
        // One run: no spread to speak of.
        let one = aggregate(
            &labels[..1],
            &docs[..1],
            0.95,
            &[("run_0002".into(), "down".into())],
        );
        assert_eq!(
            one["metrics"]["time_to_first_token_p99"]["std"],
            Value::Null
        );
        assert_eq!(one["metadata"]["num_profile_runs"], json!(2));
    }

    #[test]
    fn folders_name_their_points() {
        assert_eq!(point_of_dir("concurrency_16"), Some(point(16.0)));
        assert_eq!(
            point_of_dir("request_rate_2.5"),
            Some(Point {
                axis: Axis::RequestRate,
                value: 2.5
            })
        );
        assert_eq!(point_of_dir("aggregate"), None);
        assert_eq!(point_of_dir("concurrency_x"), None);
    }
}
