//! `report.html`: one self-contained page per run, per point run several times, and per sweep
//! (inline SVG charts, inline CSS, one inline script, no network resource), built from the artifacts
//! alone, so that `ringperf report DIR` rebuilds it for any earlier run. The charts are also
//! written as SVG files in `plots/`.

use std::fmt::Write as _;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::plot::{escape, Chart, Series, Style};
use super::sweep::{self, read_json, Row};
use crate::plan::sweep::Axis;

/// The page's file name.
pub const REPORT_HTML: &str = "report.html";

/// At most this many buckets in a chart over time.
const TIME_BUCKETS: f64 = 120.0;

/// What a report needs of one request's line in `profile_export.jsonl`.
#[derive(Deserialize)]
struct Line {
    metadata: Meta,
    metrics: Metrics,
}

#[derive(Deserialize)]
struct Meta {
    benchmark_phase: String,
    outcome: String,
    start_ns: Option<u64>,
    end_ns: Option<u64>,
    /// A node's monotonic → wall-clock offset (a merge's requests come from many hosts).
    #[serde(default)]
    wall_offset_ns: i64,
    /// The server's span (`--server-traces`).
    #[serde(default)]
    server_phases: Option<ServerPhases>,
}

#[derive(Deserialize)]
struct ServerPhases {
    queue_ms: Option<f64>,
    prefill_ms: Option<f64>,
    ttft_ms: Option<f64>,
}

#[derive(Deserialize)]
struct Metrics {
    time_to_first_token: Option<Figure>,
    inter_token_latency: Option<Figure>,
    request_latency: Option<Figure>,
    output_sequence_length: Option<Figure>,
}

#[derive(Deserialize)]
struct Figure {
    value: f64,
}

/// The measured, successful requests of a run: start and end (s from the first start) and
/// their figures; and the failed ones' start and end, and the measured phase's length (the
/// last end of any outcome), which every chart over time spans.
#[derive(Default)]
struct Requests {
    start_s: Vec<f64>,
    end_s: Vec<f64>,
    /// Failed: start and end.
    failed: Vec<(f64, f64)>,
    /// Closed by the client on purpose (`--request-cancellation-rate`): start and end.
    cancelled: Vec<(f64, f64)>,
    span_s: f64,
    ttft: Vec<f64>,
    itl: Vec<f64>,
    e2e: Vec<f64>,
    osl: Vec<f64>,
    /// The server's queue and prefill times, and TTFT outside the server (NaN without a
    /// span).
    queue: Vec<f64>,
    prefill: Vec<f64>,
    outside: Vec<f64>,
}

fn read_requests(path: &Path) -> std::io::Result<Requests> {
    let mut r = Requests::default();
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut starts = Vec::new();
    let mut lines = Vec::new();
    let mut failed = Vec::new();
    let mut cancelled = Vec::new();
    for (n, line) in file.lines().enumerate() {
        let line = line?;
        let l: Line = serde_json::from_str(&line).map_err(|e| {
            std::io::Error::other(format!("{} line {}: {e}", path.display(), n + 1))
        })?;
        let m = &l.metadata;
        if m.benchmark_phase != "profiling" {
            continue;
        }
        // A connection refused sent nothing: it counts at its end.
        let (Some(s), Some(e)) = (m.start_ns.filter(|s| *s > 0).or(m.end_ns), m.end_ns) else {
            continue;
        };
        let wall = |t: u64| t.saturating_add_signed(m.wall_offset_ns);
        let (s, e) = (wall(s), wall(e));
        starts.push(s);
        match m.outcome.as_str() {
            "ok" => lines.push((s, e, l.metrics, l.metadata.server_phases)),
            "request_cancelled" => cancelled.push((s, e)),
            _ => failed.push((s, e)),
        }
    }
    let t0 = starts.iter().copied().min().unwrap_or(0);
    let secs = |t: u64| t.saturating_sub(t0) as f64 / 1e9;
    let spans = |v: Vec<(u64, u64)>| v.into_iter().map(|(s, e)| (secs(s), secs(e))).collect();
    (r.failed, r.cancelled) = (spans(failed), spans(cancelled));
    r.span_s = lines
        .iter()
        .map(|l| secs(l.1))
        .chain(r.failed.iter().chain(&r.cancelled).map(|f| f.1))
        .fold(0.0, f64::max);
    for (s, e, m, sp) in lines {
        r.start_s.push((s - t0) as f64 / 1e9);
        r.end_s.push(e.saturating_sub(t0) as f64 / 1e9);
        let v = |f: &Option<Figure>| f.as_ref().map_or(f64::NAN, |f| f.value);
        r.ttft.push(v(&m.time_to_first_token));
        r.itl.push(v(&m.inter_token_latency));
        r.e2e.push(v(&m.request_latency));
        r.osl.push(v(&m.output_sequence_length));
        let sp = sp.as_ref();
        let f = |x: Option<f64>| x.unwrap_or(f64::NAN);
        r.queue.push(f(sp.and_then(|p| p.queue_ms)));
        r.prefill.push(f(sp.and_then(|p| p.prefill_ms)));
        let server_ttft = f(sp.and_then(|p| p.ttft_ms));
        r.outside.push(v(&m.time_to_first_token) - server_ttft);
    }
    Ok(r)
}

/// The distribution of `values` as (value, percentile) points, 0.5 percentile apart.
fn cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Vec::new();
    }
    v.sort_by(f64::total_cmp);
    (0..=200)
        .map(|i| {
            let p = i as f64 / 2.0;
            (crate::stats::linear_percentile(&v, p), p)
        })
        .collect()
}

/// `values` at times `t` (s), in buckets: each bucket's p50 and p99.
/// Points of a chart line.
type Points = Vec<(f64, f64)>;

fn over_time(t: &[f64], values: &[f64]) -> (Points, Points) {
    let span = t.iter().copied().fold(0.0, f64::max);
    let width = (span / TIME_BUCKETS).max(1.0);
    let n = (span / width) as usize + 1;
    let mut buckets: Vec<Vec<f64>> = vec![Vec::new(); n];
    for (ti, v) in t.iter().zip(values) {
        if v.is_finite() {
            buckets[((ti / width) as usize).min(n - 1)].push(*v);
        }
    }
    let (mut p50, mut p99) = (Vec::new(), Vec::new());
    for (i, b) in buckets.iter_mut().enumerate() {
        if b.is_empty() {
            continue;
        }
        b.sort_by(f64::total_cmp);
        let mid = (i as f64 + 0.5) * width;
        p50.push((mid, crate::stats::linear_percentile(b, 50.0)));
        p99.push((mid, crate::stats::linear_percentile(b, 99.0)));
    }
    (p50, p99)
}

/// Output tokens (requests, where a weight is not a number) per second over the measured
/// phase `[0, span]`, by end time.
fn rate_over_time(end: &[f64], weight: &[f64], span: f64) -> Vec<(f64, f64)> {
    let width = (span / TIME_BUCKETS).max(1.0);
    let mut n = (span / width).ceil().max(1.0) as usize;
    // The last bucket ends with the phase: a stub of it (under half a bucket) joins the one
    // before, as a rate over a few milliseconds would say little and draw much.
    if n > 1 && span - (n - 1) as f64 * width < width / 2.0 {
        n -= 1;
    }
    let mut sums = vec![0.0; n];
    for (e, o) in end.iter().zip(weight) {
        sums[((e / width) as usize).min(n - 1)] += if o.is_finite() { *o } else { 1.0 };
    }
    // Each bucket's rate is over the time it covers (a run of 0.2 s made 0.2 s of tokens, not
    // a second's).
    sums.iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let from = i as f64 * width;
            let to = if i + 1 == n { span } else { from + width };
            (to > from).then(|| ((from + to) / 2.0, s / (to - from)))
        })
        .collect()
}

fn line(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series {
        name: name.into(),
        points,
        style: Style::Line,
        bars: Vec::new(),
    }
}

/// The requests a timeline draws at most (the first sent).
const TIMELINE_MAX: usize = 2000;

/// Every request as a row (`vllm bench serve --plot-timeline`): from its send to its first
/// token, then to its last, in send order.
fn timeline(r: &Requests) -> Chart {
    // Successes by index, then failures, then requests cancelled on purpose.
    let (ok, bad) = (r.start_s.len(), r.failed.len());
    let span = |i: usize| {
        if i < ok {
            (r.start_s[i], r.end_s[i])
        } else if i < ok + bad {
            r.failed[i - ok]
        } else {
            r.cancelled[i - ok - bad]
        }
    };
    let mut order: Vec<usize> = (0..ok + bad + r.cancelled.len()).collect();
    order.sort_by(|&a, &b| span(a).0.total_cmp(&span(b).0));
    let (mut wait, mut recv) = (Vec::new(), Vec::new());
    let (mut failed, mut cancelled) = (Vec::new(), Vec::new());
    for (row, &i) in order.iter().take(TIMELINE_MAX).enumerate() {
        let y = row as f64 + 1.0;
        if i >= ok {
            let (s, e) = span(i);
            let to = if i < ok + bad {
                &mut failed
            } else {
                &mut cancelled
            };
            to.extend([(s, y), (e, y)]);
            continue;
        }
        let (start, end) = span(i);
        let first = start + r.ttft[i] / 1e3;
        if first.is_finite() {
            wait.extend([(start, y), (first, y)]);
            recv.extend([(first, y), (end, y)]);
        } else {
            // Not streamed: one bar, send to answer.
            recv.extend([(start, y), (end, y)]);
        }
    }
    let seg = |name: &str, points| Series {
        style: Style::Segments,
        ..line(name, points)
    };
    Chart {
        title: if order.len() > TIMELINE_MAX {
            format!(
                "Every request: the first {TIMELINE_MAX} of {} sent",
                order.len()
            )
        } else {
            "Every request: send, first token, last token".into()
        },
        x_label: "s into the run".into(),
        y_label: "request, in send order".into(),
        series: [
            seg("to the first token", wait),
            seg("to the last token", recv),
            seg("failed", failed),
            seg("cancelled on purpose", cancelled),
        ]
        .into_iter()
        .enumerate()
        .filter(|(i, s)| *i < 2 || !s.points.is_empty())
        .map(|(_, s)| s)
        .collect(),
        zoom: true,
        x_span: Some((0.0, r.span_s)),
        ..Chart::default()
    }
}

/// The charts of one run.
fn run_charts(r: &Requests) -> Vec<(&'static str, Chart)> {
    let dist = |title: &str, values: &[f64]| Chart {
        title: title.into(),
        x_label: "ms".into(),
        y_label: "percentile".into(),
        series: vec![line("requests", cdf(values))],
        ..Chart::default()
    };
    // Every chart over time spans the measured phase, failures included: where answers
    // stopped, the empty stretch shows it.
    let phase = Some((0.0, r.span_s));
    let time = |title: &str, values: &[f64]| {
        let (p50, p99) = over_time(&r.start_s, values);
        Chart {
            title: title.into(),
            x_label: "request start (s into the run)".into(),
            y_label: "ms".into(),
            series: vec![line("p50", p50), line("p99", p99)],
            zoom: true,
            x_span: phase,
            ..Chart::default()
        }
    };
    let mut charts = vec![
        (
            "ttft_cdf",
            dist("Time to first token: distribution", &r.ttft),
        ),
        ("itl_cdf", dist("Inter-token latency: distribution", &r.itl)),
        ("e2e_cdf", dist("Request latency: distribution", &r.e2e)),
        (
            "ttft_over_time",
            time("Time to first token over time", &r.ttft),
        ),
        (
            "itl_over_time",
            time("Inter-token latency over time", &r.itl),
        ),
        (
            "throughput_over_time",
            Chart {
                title: "Output throughput over time".into(),
                x_label: "s into the run".into(),
                y_label: "output tokens/s".into(),
                series: vec![line(
                    "completed",
                    rate_over_time(&r.end_s, &r.osl, r.span_s),
                )],
                zoom: true,
                x_span: phase,
                ..Chart::default()
            },
        ),
        (
            "requests_over_time",
            Chart {
                title: "Requests over time: completed and failed".into(),
                x_label: "s into the run".into(),
                y_label: "requests/s".into(),
                // Failures per second, where any failed.
                series: [r.end_s.clone(), r.failed.iter().map(|f| f.1).collect()]
                    .into_iter()
                    .zip(["completed/s", "failed/s"])
                    .filter(|(end, name)| *name == "completed/s" || !end.is_empty())
                    .map(|(end, name)| {
                        let per_request = vec![f64::NAN; end.len()];
                        line(name, rate_over_time(&end, &per_request, r.span_s))
                    })
                    .collect(),
                zoom: true,
                x_span: phase,
                ..Chart::default()
            },
        ),
    ];
    charts.push(("timeline", timeline(r)));
    if r.queue.iter().any(|v| v.is_finite()) {
        let p50 = |v: &[f64]| over_time(&r.start_s, v).0;
        charts.push((
            "ttft_split_over_time",
            Chart {
                title: "Where TTFT went over time (p50 per bucket, server's spans)".into(),
                x_label: "request start (s into the run)".into(),
                y_label: "ms".into(),
                series: vec![
                    line("TTFT (client)", p50(&r.ttft)),
                    line("queue", p50(&r.queue)),
                    line("prefill", p50(&r.prefill)),
                    line("outside the server", p50(&r.outside)),
                ],
                zoom: true,
                ..Chart::default()
            },
        ));
    }
    charts
}

/// The split of TTFT and request latency by the server's spans (`--server-traces`).
fn traces_html(doc: &Value) -> String {
    let Some(t) = doc.get("server_traces") else {
        return String::new();
    };
    let mut out = format!(
        "<h3>Where the time went (the server's spans: {} of {} completed requests joined by \
         X-Request-ID)</h3>",
        t["joined"], t["completed_requests"]
    );
    for (key, title, parts) in [
        (
            "time_to_first_token",
            "TTFT",
            &super::phases::TTFT_PARTS[..],
        ),
        (
            "request_latency",
            "Request latency",
            &super::phases::LATENCY_PARTS[..],
        ),
    ] {
        let Some(f) = t
            .get(key)
            .filter(|f| f.as_object().is_some_and(|m| !m.is_empty()))
        else {
            continue;
        };
        out.push_str(&format!("<table><tr><th>{title} (ms)</th><th>client</th>"));
        for p in parts {
            out.push_str(&format!("<th>{}</th>", p.replace('_', " ")));
        }
        out.push_str("<th>request</th></tr>");
        for row in ["mean", "p50", "p90", "p99"] {
            let Some(r) = f.get(row) else { continue };
            let label = if row == "mean" {
                "mean".to_string()
            } else {
                format!("{row} request")
            };
            out.push_str(&format!(
                "<tr><td>{label}</td><td>{}</td>",
                num(r["client_ms"].as_f64())
            ));
            for p in parts {
                out.push_str(&format!("<td>{}</td>", num(r[format!("{p}_ms")].as_f64())));
            }
            out.push_str(&format!(
                "<td><code>{}</code></td></tr>",
                escape(r["x_request_id"].as_str().unwrap_or(""))
            ));
        }
        out.push_str("</table>");
    }
    if t["without_span"].as_u64().unwrap_or(0) > 0 {
        out.push_str(&format!(
            "<p class=\"note\">{} request(s) have no span and are in no figure of this table.</p>",
            t["without_span"]
        ));
    }
    out
}

/// The charts of `--slice-duration`'s figures: each slice's value at its middle.
fn slice_charts(ts: &Value) -> Vec<(&'static str, Chart)> {
    let slices = ts["timeslices"].as_array().cloned().unwrap_or_default();
    let at = |metric: &str, stat: &str| -> Vec<(f64, f64)> {
        slices
            .iter()
            .filter_map(|s| {
                let mid = (s["start_s"].as_f64()? + s["end_s"].as_f64()?) / 2.0;
                Some((mid, s[metric][stat].as_f64()?))
            })
            .collect()
    };
    let secs = ts["slice_duration_s"].as_f64().unwrap_or(0.0);
    let x_label = format!("s into the run (slices of {secs}s)");
    let latency = |title: &str, metric: &str| Chart {
        title: title.into(),
        x_label: x_label.clone(),
        y_label: "ms".into(),
        series: vec![
            line("p50", at(metric, "p50")),
            line("p99", at(metric, "p99")),
        ],
        ..Chart::default()
    };
    vec![
        (
            "ttft_per_slice",
            latency("Time to first token per time slice", "time_to_first_token"),
        ),
        (
            "itl_per_slice",
            latency("Inter-token latency per time slice", "inter_token_latency"),
        ),
        (
            "throughput_per_slice",
            Chart {
                title: "Output throughput per time slice".into(),
                x_label,
                y_label: "output tokens/s".into(),
                series: vec![line(
                    "sent in the slice",
                    at("output_token_throughput", "avg"),
                )],
                ..Chart::default()
            },
        ),
    ]
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;max-width:1500px;color:#222}\
table{border-collapse:collapse;margin:8px 0 16px}th,td{border:1px solid #ccc;padding:3px 8px;\
text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}\
.limited{background:#fde2e2}.charts{display:flex;flex-wrap:wrap;gap:8px}\
.charts svg{width:calc(50% - 8px);min-width:480px;height:auto}\
.note{color:#555}.warn{color:#9a3412}code{background:#f3f3f3;padding:0 3px}\
dl.about{display:grid;grid-template-columns:max-content auto;gap:2px 12px;margin:8px 0 16px}\
dl.about dt{font-weight:bold}dl.about dd{margin:0}.failing{background:#fde2e2}";

pub(super) fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>{STYLE}</style></head><body><h1>{t}</h1>\n{body}\n<script>{script}</script>\
         </body></html>\n",
        t = escape(title),
        script = super::plot::SCRIPT
    )
}

/// A figure as the pages show it.
pub(super) fn num(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => {
            if x.fract() == 0.0 && x.abs() < 1e15 {
                format!("{x:.0}")
            } else if x.abs() >= 100.0 {
                format!("{x:.1}")
            } else {
                format!("{x:.3}")
            }
        }
        _ => "–".into(),
    }
}

/// Writes the charts as `plots/NAME.svg` under `dir` and returns them inline.
fn charts_html(dir: &Path, charts: &[(&str, Chart)]) -> std::io::Result<String> {
    let plots = dir.join("plots");
    std::fs::create_dir_all(&plots)?;
    let mut out = String::from("<div class=\"charts\">");
    for (name, c) in charts {
        crate::artifact::write(&plots.join(format!("{name}.svg")), c.svg())?;
        out.push_str(&c.inline_svg());
    }
    out.push_str("</div>");
    Ok(out)
}

/// What was run, from a run's JSON: model, URL, endpoint, dates.
fn about(doc: &Value) -> String {
    let s = |p: &str| doc.pointer(p).and_then(Value::as_str).unwrap_or("?");
    format!(
        "<p class=\"note\">model <b>{}</b> at <code>{}</code> ({} endpoint{}); {} to {}</p>",
        escape(s("/input_config/target/model")),
        escape(s("/input_config/resolved/url")),
        escape(s("/input_config/target/kind")),
        if doc.pointer("/input_config/resolved/streaming") == Some(&Value::Bool(true)) {
            ", streaming"
        } else {
            ""
        },
        escape(s("/start_time")),
        escape(s("/end_time")),
    )
}

/// The headline table of one run's JSON.
fn headline(doc: &Value) -> String {
    let mut t = String::from(
        "<table><tr><th>metric</th><th>avg</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>",
    );
    for (tag, name) in [
        ("time_to_first_token", "Time to first token (ms)"),
        ("time_to_second_token", "Time to second token (ms)"),
        ("inter_token_latency", "Inter-token latency (ms)"),
        ("request_latency", "Request latency (ms)"),
        ("output_sequence_length", "Output sequence length (tokens)"),
        ("input_sequence_length", "Input sequence length (tokens)"),
    ] {
        if let Some(m) = doc.get(tag) {
            let f = |s: &str| num(m.get(s).and_then(Value::as_f64));
            let _ = write!(
                t,
                "<tr><td>{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                f("avg"),
                f("p50"),
                f("p90"),
                f("p99"),
                f("max")
            );
        }
    }
    for (tag, name) in [
        (
            "output_token_throughput",
            "Output token throughput (tokens/s)",
        ),
        (
            "total_token_throughput",
            "Total token throughput (tokens/s)",
        ),
        ("request_throughput", "Request throughput (requests/s)"),
        ("goodput", "Goodput (requests/s)"),
        ("request_count", "Requests"),
        ("error_request_count", "Failed requests"),
    ] {
        if let Some(v) = doc.pointer(&format!("/{tag}/avg")).and_then(Value::as_f64) {
            let _ = write!(
                t,
                "<tr><td>{name}</td><td>{}</td><td colspan=\"4\"></td></tr>",
                num(Some(v))
            );
        }
    }
    t.push_str("</table>");
    t
}

/// The GPUs over the measured window: each one's energy (and where it came from), power and
/// utilisation, then the energy per token and per request when every GPU covered the window.
fn gpus_html(doc: &Value) -> String {
    let Some(t) = doc.get("gpu_telemetry") else {
        return String::new();
    };
    let mut out = String::new();
    if let Some(why) = t.get("unavailable").and_then(Value::as_str) {
        let _ = write!(
            out,
            "<p class=\"note\">GPU telemetry unavailable: {}</p>",
            escape(why)
        );
    }
    let gpus = t.get("gpus").and_then(Value::as_array);
    if gpus.is_none_or(|g| g.is_empty()) {
        return out;
    }
    out.push_str(
        "<table><tr><th>GPU</th><th>energy (J)</th><th>from</th><th>power avg (W)</th>\
         <th>power max (W)</th><th>utilisation (%)</th><th>covered (s)</th></tr>",
    );
    for g in gpus.into_iter().flatten() {
        let v = |p: &str| g.pointer(p).and_then(Value::as_f64);
        let _ = write!(
            out,
            "<tr><td>{} {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td></tr>",
            v("/index").map_or(String::new(), |i| format!("{i:.0}")),
            escape(g.get("name").and_then(Value::as_str).unwrap_or("")),
            num(v("/energy_j")),
            escape(g.get("energy_source").and_then(Value::as_str).unwrap_or("")),
            num(v("/power_w/avg")),
            num(v("/power_w/max")),
            num(v("/gpu_util/avg")),
            num(v("/covered_s")),
            g.pointer("/dropped_out/1")
                .and_then(Value::as_str)
                .map(|e| format!(" (dropped out: {})", escape(e)))
                .unwrap_or_default()
        );
    }
    out.push_str("</table>");
    if let Some(tot) = t.get("totals").filter(|x| !x.is_null()) {
        let v = |k: &str| num(tot.get(k).and_then(Value::as_f64));
        let _ = write!(
            out,
            "<p>GPU energy {} J, {} J per output token, {} J per request, {} output tokens per J</p>",
            v("energy_j"),
            v("joules_per_output_token"),
            v("joules_per_request"),
            v("output_tokens_per_joule")
        );
    }
    out
}

/// The client's verdict and the run's warnings.
fn health(doc: &Value) -> String {
    let mut out = String::new();
    // The run's one label first, then each side's evidence.
    if let Some(label) = doc
        .pointer("/verdict/label")
        .and_then(Value::as_str)
        .and_then(super::verdict::Label::parse)
    {
        let _ = write!(
            out,
            "<p class=\"{}\"><b>Verdict: {}</b></p>",
            if label.trusted() { "note" } else { "warn" },
            escape(label.as_str())
        );
    }
    if let Some(s) = doc.pointer("/verdict/server").and_then(Value::as_str) {
        let failed = doc.pointer("/server_health/failed").and_then(Value::as_u64) > Some(0);
        let _ = write!(
            out,
            "<p class=\"{}\"><b>Server:</b> {}</p>",
            if failed { "warn" } else { "note" },
            escape(s)
        );
    }
    let limited = doc.pointer("/client_health/limited") == Some(&Value::Bool(true));
    if let Some(v) = doc
        .pointer("/client_health/verdict")
        .and_then(Value::as_str)
    {
        let _ = write!(
            out,
            "<p class=\"{}\"><b>Client:</b> {}</p>",
            if limited { "warn" } else { "note" },
            escape(v)
        );
    }
    if let Some(Value::Array(w)) = doc.pointer("/client_health/warnings") {
        for w in w {
            let text = |k: &str| w.get(k).and_then(Value::as_str).unwrap_or("");
            let _ = write!(
                out,
                "<p class=\"warn\">Warning: {} <code>{}</code></p>",
                escape(text("message")),
                escape(text("code"))
            );
        }
    }
    if let Some(Value::Array(errors)) = doc.get("error_summary") {
        for e in errors {
            let _ = write!(
                out,
                "<p class=\"warn\">Errors: {} × {} ({})</p>",
                e.get("count").and_then(Value::as_u64).unwrap_or(0),
                escape(e.get("kind").and_then(Value::as_str).unwrap_or("")),
                escape(e.get("message").and_then(Value::as_str).unwrap_or(""))
            );
        }
    }
    out
}

/// The steps of a staircase run, and where its knee is.
fn staircase_html(st: &Value) -> String {
    let mut t = String::from(
        "<h2>Staircase</h2><table><tr><th>concurrency</th><th>req/s</th><th>95% CI</th>\
         <th>out tok/s</th><th>TTFT p50</th><th>TTFT p99</th><th>ITL p99</th><th>goodput \
         fraction</th></tr>",
    );
    for s in st
        .get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let f = |k: &str| num(s.get(k).and_then(Value::as_f64));
        let ci = |i: usize| {
            num(s
                .pointer(&format!("/request_throughput_ci95/{i}"))
                .and_then(Value::as_f64))
        };
        let _ = write!(
            t,
            "<tr><td>{}</td><td>{}</td><td>{} to {}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            f("concurrency"),
            f("request_throughput"),
            ci(0),
            ci(1),
            f("output_token_throughput"),
            f("ttft_p50_ms"),
            f("ttft_p99_ms"),
            f("itl_p99_ms"),
            f("goodput_fraction")
        );
    }
    t.push_str("</table>");
    if let Some(k) = st.pointer("/knee/text").and_then(Value::as_str) {
        let _ = write!(t, "<p><b>{}</b></p>", escape(k));
    }
    if let Some(c) = st.get("highest_within_slo").and_then(Value::as_f64) {
        let _ = write!(
            t,
            "<p><b>The highest step within the objectives: concurrency {c}</b></p>"
        );
    }
    t
}

/// Writes `report.html` (and `plots/`) of the run in `dir`; returns the page's path.
pub fn write_run(dir: &Path) -> std::io::Result<PathBuf> {
    let doc = read_json(&dir.join(sweep::PROFILE_JSON))?;
    let reqs = read_requests(&dir.join("profile_export.jsonl"))?;
    let mut body = about(&doc);
    if let Some(a) = doc
        .get("about")
        .and_then(|a| serde_json::from_value::<super::about::About>(a.clone()).ok())
    {
        body.push_str(&a.html());
    }
    body.push_str(&health(&doc));
    body.push_str(&headline(&doc));
    body.push_str(&traces_html(&doc));
    body.push_str(&gpus_html(&doc));
    if let Ok(st) = read_json(&dir.join(super::staircase::STAIRCASE_JSON)) {
        body.push_str(&staircase_html(&st));
    }
    let mut charts = run_charts(&reqs);
    if let Ok(ts) = read_json(&dir.join("profile_export_ringperf_timeslices.json")) {
        charts.extend(slice_charts(&ts));
    }
    body.push_str(&charts_html(dir, &charts)?);
    // A sweep's point, or one run of a repeated point, is titled by its load and links back.
    let load = doc
        .pointer("/about/load/text")
        .and_then(Value::as_str)
        .map_or(String::new(), |l| format!(": {l}"));
    let up = [
        ("../", dir.parent()),
        ("../../", dir.parent().and_then(Path::parent)),
    ]
    .into_iter()
    .find(|(_, d)| d.is_some_and(|d| d.join(sweep::SUMMARY_JSON).is_file()))
    .map(|(rel, _)| rel);
    if let Some(rel) = up {
        body.insert_str(
            0,
            &format!("<p><a href=\"{rel}{REPORT_HTML}\">← back to the sweep</a></p>"),
        );
    }
    let path = dir.join(REPORT_HTML);
    crate::artifact::write(&path, page(&format!("ringperf run report{load}"), &body))?;
    Ok(path)
}

/// Writes `report.html` of a point run several times (each run gets its own page too).
pub fn write_repeats(dir: &Path) -> std::io::Result<PathBuf> {
    let runs = sweep::read_runs(dir)?;
    let agg = read_json(&dir.join("aggregate").join(sweep::AGGREGATE_JSON))?;
    let mut body = String::new();
    if let Some((_, first)) = runs.first() {
        body.push_str(&about(first));
    }
    let _ = write!(
        body,
        "<h2>Over {} runs ({}% confidence)</h2><table><tr><th>figure</th><th>mean</th><th>std</th>\
         <th>cv</th><th>ci low</th><th>ci high</th><th>unit</th></tr>",
        runs.len(),
        agg.pointer("/metadata/confidence_level")
            .and_then(Value::as_f64)
            .unwrap_or(0.95)
            * 100.0
    );
    for key in [
        "time_to_first_token_avg",
        "time_to_first_token_p50",
        "time_to_first_token_p99",
        "inter_token_latency_avg",
        "inter_token_latency_p99",
        "request_latency_p50",
        "request_latency_p99",
        "output_token_throughput_avg",
        "request_throughput_avg",
    ] {
        if let Some(m) = agg.pointer(&format!("/metrics/{key}")) {
            let f = |s: &str| num(m.get(s).and_then(Value::as_f64));
            let _ = write!(
                body,
                "<tr><td>{key}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                f("mean"),
                f("std"),
                f("cv"),
                f("ci_low"),
                f("ci_high"),
                escape(m.get("unit").and_then(Value::as_str).unwrap_or(""))
            );
        }
    }
    body.push_str("</table><h2>Runs</h2><ul>");
    let mut ttft = Vec::new();
    for (label, _) in &runs {
        let run_dir = dir.join("profile_runs").join(label);
        write_run(&run_dir)?;
        let _ = write!(
            body,
            "<li><a href=\"profile_runs/{l}/report.html\">{l}</a></li>",
            l = escape(label)
        );
        let r = read_requests(&run_dir.join("profile_export.jsonl"))?;
        ttft.push(line(label, cdf(&r.ttft)));
    }
    body.push_str("</ul>");
    let chart = Chart {
        title: "Time to first token by run: distribution".into(),
        x_label: "ms".into(),
        y_label: "percentile".into(),
        series: ttft,
        ..Chart::default()
    };
    body.push_str(&charts_html(dir, &[("ttft_cdf_by_run", chart)])?);
    let path = dir.join(REPORT_HTML);
    crate::artifact::write(&path, page("ringperf report: repeated runs", &body))?;
    Ok(path)
}

/// The charts across a sweep's points.
fn sweep_charts(
    axis: Axis,
    rows: &[Row],
    knee: Option<&sweep::Knee>,
    found: Option<&Row>,
) -> Vec<(&'static str, Chart)> {
    // A sweep of one flag is drawn against it; an automatic sweep's mixed points against the
    // request rate they achieved.
    let mixed = rows.iter().any(|r| r.point.axis != axis);
    let load = |r: &Row| {
        if mixed {
            r.get("request_throughput").unwrap_or(f64::NAN)
        } else {
            r.point.value
        }
    };
    let pts = |x: &dyn Fn(&Row) -> Option<f64>, y: &str| -> Vec<(f64, f64)> {
        rows.iter()
            .filter_map(|r| Some((x(r)?, r.get(y)?)))
            .collect()
    };
    let by_load = |y: &str| pts(&|r| Some(load(r)), y);
    let by_tput = |y: &str| pts(&|r| r.get("output_token_throughput"), y);
    let (x_label, log_x) = match axis {
        _ if mixed => ("requests/s achieved", false),
        Axis::Concurrency => (
            "concurrency (requests in flight)",
            rows.iter().map(load).fold(0.0, f64::max)
                >= 4.0 * rows.iter().map(load).fold(f64::MAX, f64::min),
        ),
        Axis::RequestRate => ("request rate asked (requests/s)", false),
        other => (other.flag().trim_start_matches("--"), false),
    };
    // The knee and a search's result, at their points' x.
    let marked = |x: &dyn Fn(&Row) -> Option<f64>| -> Vec<(f64, String)> {
        let knee = knee.and_then(|k| rows.iter().find(|r| r.point == k.at));
        // A point left out of the knee is marked on every chart, with its label.
        let left_out = rows
            .iter()
            .filter(|r| r.left_out())
            .map(|r| (Some(r), r.label.as_str()));
        [(knee, "knee"), (found, "highest within the SLO")]
            .into_iter()
            .chain(left_out)
            .filter_map(|(r, label)| Some((x(r?)?, label.to_string())))
            .collect()
    };
    let mark_load = marked(&|r| Some(load(r)));
    let mark_tput = marked(&|r| r.get("output_token_throughput"));
    // A figure's 95% intervals as error bars, against the load or the throughput.
    let bars = |x: &dyn Fn(&Row) -> Option<f64>, y: &str| -> Vec<(f64, f64, f64)> {
        rows.iter()
            .filter_map(|r| {
                let i = r.interval(y)?;
                Some((x(r)?, i.lo, i.hi))
            })
            .collect()
    };
    let with_bars = |mut s: Series, y: &str| {
        s.bars = bars(&|r| Some(load(r)), y);
        s
    };
    let with_bars_by_tput = |mut s: Series, y: &str| {
        s.bars = bars(&|r| r.get("output_token_throughput"), y);
        s
    };
    let vs_load = |title: &str, y_label: &str, series: Vec<Series>| Chart {
        title: title.into(),
        x_label: x_label.into(),
        y_label: y_label.into(),
        series,
        log_x,
        marks: mark_load.clone(),
        zoom: false,
        x_span: None,
    };
    let mut charts = vec![
        (
            "throughput_vs_load",
            if rows
                .iter()
                .any(|r| r.get("output_token_throughput") > Some(0.0))
            {
                vs_load(
                    "Output token throughput",
                    "output tokens/s",
                    vec![with_bars(
                        line("output tokens/s", by_load("output_token_throughput")),
                        "output_token_throughput",
                    )],
                )
            } else {
                vs_load(
                    "Request throughput",
                    "requests/s",
                    vec![with_bars(
                        line("requests/s", by_load("request_throughput")),
                        "request_throughput",
                    )],
                )
            },
        ),
        (
            "ttft_vs_throughput",
            Chart {
                title: "Time to first token against throughput".into(),
                x_label: "output tokens/s".into(),
                y_label: "ms".into(),
                series: vec![
                    with_bars_by_tput(line("TTFT p50", by_tput("ttft_p50_ms")), "ttft_p50_ms"),
                    with_bars_by_tput(line("TTFT p99", by_tput("ttft_p99_ms")), "ttft_p99_ms"),
                ],
                log_x: false,
                marks: mark_tput,
                zoom: false,
                x_span: None,
            },
        ),
        (
            "itl_vs_load",
            vs_load(
                "Inter-token latency",
                "ms",
                vec![
                    with_bars(line("ITL p50", by_load("itl_p50_ms")), "itl_p50_ms"),
                    with_bars(line("ITL p99", by_load("itl_p99_ms")), "itl_p99_ms"),
                ],
            ),
        ),
        (
            "latency_vs_load",
            vs_load(
                "Request latency",
                "ms",
                vec![
                    with_bars(
                        line("p50", by_load("request_latency_p50_ms")),
                        "request_latency_p50_ms",
                    ),
                    with_bars(
                        line("p99", by_load("request_latency_p99_ms")),
                        "request_latency_p99_ms",
                    ),
                ],
            ),
        ),
        (
            "pareto",
            Chart {
                title: "Tokens/s per user against tokens/s".into(),
                x_label: "output tokens/s (all users)".into(),
                y_label: "output tokens/s per user (p50)".into(),
                series: {
                    // The points, unjoined (past saturation throughput can fall back, and a
                    // line in load order would zig-zag), and the front they make as a band.
                    let pts = by_tput("output_token_throughput_per_user_p50");
                    let xy: Vec<_> = pts.iter().map(|&(x, y)| (Some(x), Some(y))).collect();
                    let on = super::compare::pareto(&xy, false);
                    let mut front: Vec<(f64, f64)> = pts
                        .iter()
                        .zip(on)
                        .filter(|(_, on)| *on)
                        .map(|(p, _)| *p)
                        .collect();
                    front.sort_by(|a, b| a.0.total_cmp(&b.0));
                    vec![
                        Series {
                            style: Style::Points,
                            ..line("points", pts)
                        },
                        Series {
                            style: Style::Band,
                            ..line("Pareto front", front)
                        },
                    ]
                },
                ..Chart::default()
            },
        ),
    ];
    if rows
        .iter()
        .any(|r| r.get("joules_per_output_token").is_some())
    {
        charts.push((
            "energy_vs_load",
            vs_load(
                "GPU energy per output token",
                "J/token",
                vec![line(
                    "J per output token",
                    by_load("joules_per_output_token"),
                )],
            ),
        ));
        charts.push((
            "power_vs_load",
            vs_load(
                "GPU power",
                "W",
                vec![line("average power", by_load("gpu_avg_power_w"))],
            ),
        ));
    }
    charts
}

/// Writes `report.html` of a sweep (and each point's own page); returns its path.
pub fn write_sweep(root: &Path) -> std::io::Result<PathBuf> {
    let rows = sweep::read_sweep(root)?;
    let Some(axis) = rows.first().map(|r| r.point.axis) else {
        return Err(std::io::Error::other(format!(
            "{}: no completed point of a sweep here",
            root.display()
        )));
    };
    let knee = sweep::knee(&rows);
    let mut body = String::new();
    let mut ttft = Vec::new();
    let mut first_doc = None;
    let mut table = String::from("<table><tr><th>load</th><th>runs</th>");
    for (h, _) in sweep::TABLE {
        let _ = write!(table, "<th>{h}</th>");
    }
    table.push_str("<th>errors</th><th>client</th></tr>");
    for r in &rows {
        let name = r.point.name();
        let dir = root.join(&name);
        let (page, run_dir) = if dir.join("profile_runs").is_dir() {
            let run = sweep::read_runs(&dir)?
                .first()
                .map(|(l, _)| dir.join("profile_runs").join(l))
                .unwrap_or_else(|| dir.clone());
            (write_repeats(&dir)?, run)
        } else {
            (write_run(&dir)?, dir.clone())
        };
        if first_doc.is_none() {
            first_doc = Some(read_json(&run_dir.join(sweep::PROFILE_JSON))?);
        }
        let reqs = read_requests(&run_dir.join("profile_export.jsonl"))?;
        ttft.push(line(&r.point.label(), cdf(&reqs.ttft)));
        let rel = page
            .strip_prefix(root)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let _ = write!(
            table,
            "<tr{}><td><a href=\"{}\">{}</a></td><td>{}</td>",
            match r.label {
                _ if r.server_failing => " class=\"failing\"",
                l if !l.trusted() => " class=\"limited\"",
                _ => "",
            },
            escape(&rel),
            escape(&r.point.label()),
            r.runs,
        );
        for (_, f) in sweep::TABLE {
            let _ = write!(table, "<td>{}</td>", num(r.get(f)));
        }
        // The label in the cell, the evidence one click away.
        let evidence = [r.verdict.as_str(), r.server.as_str()]
            .iter()
            .filter(|t| !t.is_empty())
            .map(|t| escape(t))
            .collect::<Vec<_>>()
            .join("<br>");
        let _ = write!(
            table,
            "<td>{}</td><td><details><summary>{}{}</summary>{evidence}</details></td></tr>",
            escape(&sweep::error_cell(r)),
            escape(r.label.as_str()),
            if r.cancelled { ", cancelled" } else { "" },
        );
    }
    table.push_str("</table>");
    if let Some(d) = &first_doc {
        body.push_str(&about(d));
    }
    let summary = read_json(&root.join(sweep::SUMMARY_JSON)).ok();
    for at in ["/search/text", "/auto/text"] {
        if let Some(t) = summary.as_ref().and_then(|s| s.pointer(at)?.as_str()) {
            let _ = write!(body, "<p><b>{}</b></p>", escape(t));
        }
    }
    body.push_str("<h2>Points</h2>");
    body.push_str(&table);
    body.push_str("<p class=\"note\">Latencies in ms; a row is the mean of its runs. ");
    match &knee {
        Some(k) => {
            let _ = write!(body, "<b>{}</b>.", escape(&k.describe()));
        }
        None => body.push_str("No knee: no step up in load stopped raising throughput."),
    }
    if let Some(u) = sweep::undecided(&rows) {
        let _ = write!(body, " {}.", escape(&u));
    }
    let _ = write!(body, " Rule: {}.", escape(sweep::KNEE_RULE));
    if rows.iter().any(|r| r.simulator_stalled) {
        body.push_str(
            " <b>The simulator stalled in a point marked so: that point measured a slower \
             server than the one configured.</b>",
        );
    }
    if let Some(rise) = sweep::failure_rise(&rows) {
        let _ = write!(body, " <b>{}.</b>", escape(&rise));
    }
    for r in rows.iter().filter(|r| !r.server.is_empty()) {
        let _ = write!(
            body,
            " <b>Server at {}: {}.</b>",
            escape(&r.point.label()),
            escape(&r.server)
        );
    }
    body.push_str("</p><h2>Charts</h2>");
    // A search's result: the highest load that met the SLO.
    let found = summary.as_ref().and_then(|s| {
        let (axis, at) = (
            s.pointer("/search/axis")?,
            s.pointer("/search/highest_passed")?,
        );
        let (axis, at) = (axis.as_str()?, at.as_f64()?);
        rows.iter()
            .find(|r| r.point.axis.name() == axis && r.point.value == at)
    });
    let mut charts = sweep_charts(axis, &rows, knee.as_ref(), found);
    charts.push((
        "ttft_cdf_by_point",
        Chart {
            title: "Time to first token by point: distribution".into(),
            x_label: "ms".into(),
            y_label: "percentile".into(),
            series: ttft,
            ..Chart::default()
        },
    ));
    body.push_str(&charts_html(root, &charts)?);
    let path = root.join(REPORT_HTML);
    crate::artifact::write(&path, page("ringperf sweep report", &body))?;
    Ok(path)
}

/// Writes the report that fits what `dir` holds: a sweep's, repeated runs', or one run's.
pub fn write(dir: &Path) -> std::io::Result<PathBuf> {
    if dir.join(sweep::SUMMARY_JSON).is_file() {
        write_sweep(dir)
    } else if dir.join("aggregate").join(sweep::AGGREGATE_JSON).is_file() {
        write_repeats(dir)
    } else if dir.join(sweep::PROFILE_JSON).is_file() {
        write_run(dir)
    } else {
        Err(std::io::Error::other(format!(
            "{}: no ringperf artifacts here (no {}, {} or {})",
            dir.display(),
            sweep::SUMMARY_JSON,
            sweep::AGGREGATE_JSON,
            sweep::PROFILE_JSON
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_distribution_has_201_points_from_min_to_max() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        let c = cdf(&v);
        assert_eq!(c.len(), 201);
        assert_eq!(c[0], (1.0, 0.0));
        assert_eq!(c[200], (1000.0, 100.0));
        assert_eq!(c[100], (500.5, 50.0));
        assert!(cdf(&[f64::NAN]).is_empty());
    }

    #[test]
    fn figures_over_time_go_into_buckets_of_at_least_a_second() {
        let t = [0.1, 0.2, 0.9, 1.5, 2.5];
        let v = [1.0, 3.0, 2.0, 10.0, f64::NAN];
        let (p50, p99) = over_time(&t, &v);
        assert_eq!(p50, [(0.5, 2.0), (1.5, 10.0)]);
        assert_eq!(p99[0].1, 2.98);
        // 3 requests of 10 tokens end in the first second: 30 tokens/s; the last bucket
        // covers 1 s to the phase's end at 1.6 s, where 1 request ended: 1/0.6 a second.
        let got = rate_over_time(&[0.1, 0.5, 0.9, 1.2], &[10.0, 10.0, 10.0, f64::NAN], 1.6);
        assert_eq!(got[0], (0.5, 30.0));
        assert!(
            (got[1].0 - 1.3).abs() < 1e-9 && (got[1].1 - 1.0 / 0.6).abs() < 1e-9,
            "{got:?}"
        );
        // A stub of a last bucket (0.2 s) joins the one before: 4 requests' 31 tokens over
        // 1.2 s, not 1 request over 0.2 s drawn as 5 a second.
        let got = rate_over_time(&[0.1, 0.5, 0.9, 1.2], &[10.0, 10.0, 10.0, 1.0], 1.2);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!((got[0].1 - 31.0 / 1.2).abs() < 1e-9, "{got:?}");
        // A run shorter than a bucket: its whole rate.
        assert_eq!(
            rate_over_time(&[0.1, 0.2], &[10.0, 10.0], 0.2),
            [(0.1, 100.0)]
        );
        // The phase runs on after the last success (a server that stopped answering): the
        // chart spans it, with the empty seconds at 0.
        let got = rate_over_time(&[0.1, 0.2], &[10.0, 10.0], 8.0);
        assert_eq!(got.len(), 8);
        assert_eq!(got[7], (7.5, 0.0));
    }
}
