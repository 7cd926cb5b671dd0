//! Figures per time slice (`--slice-duration`), in AIPerf's layout: the time from the first
//! measured send to the last cut into slices of equal length (the last one may be shorter),
//! each request counted in the slice where it was sent, every metric computed over that
//! slice's requests alone.

use serde_json::{json, Map, Value};

use super::metrics::{Metrics, PER_USER_SCALE};
use super::Report;
use crate::record::{Outcome, Phase};
use crate::stats::{Dist, PERCENTILES};

use crate::plan::output::MAX_SLICES;

/// One slice's requests and figures.
pub struct Slice {
    /// Its number, from 0.
    pub index: u64,
    /// Its start, in seconds from the first measured send.
    pub start_s: f64,
    /// Its end (the last slice's: the end of the measured window).
    pub end_s: f64,
    /// Distributions over its successful requests.
    pub metrics: Metrics,
    /// Its requests that succeeded.
    pub completed: u64,
    /// Its requests that failed.
    pub failed: u64,
    /// Its requests the client closed on purpose.
    pub cancelled: u64,
    /// Σ output tokens of its successful requests.
    pub output_tokens: u64,
}

impl Slice {
    fn seconds(&self) -> f64 {
        (self.end_s - self.start_s).max(1e-9)
    }
    /// The distributions shown per slice: (tag, AIPerf's name, unit, values, divisor).
    fn dists(&self) -> [(&'static str, &'static str, &'static str, &Dist, f64); 6] {
        let m = &self.metrics;
        [
            (
                "time_to_first_token",
                "Time to First Token",
                "ms",
                &m.ttft,
                1e6,
            ),
            (
                "inter_token_latency",
                "Inter Token Latency",
                "ms",
                &m.itl,
                1e6,
            ),
            ("request_latency", "Request Latency", "ms", &m.latency, 1e6),
            (
                "output_sequence_length",
                "Output Sequence Length",
                "tokens",
                &m.osl,
                1.0,
            ),
            (
                "input_sequence_length",
                "Input Sequence Length",
                "tokens",
                &m.isl,
                1.0,
            ),
            (
                "output_token_throughput_per_user",
                "Output Token Throughput Per User",
                "tokens/sec/user",
                &m.per_user,
                PER_USER_SCALE,
            ),
        ]
    }
    /// The single figures: (tag, name, unit, value).
    fn values(&self) -> [(&'static str, &'static str, &'static str, f64); 5] {
        [
            (
                "request_throughput",
                "Request Throughput",
                "requests/sec",
                self.completed as f64 / self.seconds(),
            ),
            (
                "output_token_throughput",
                "Output Token Throughput",
                "tokens/sec",
                self.output_tokens as f64 / self.seconds(),
            ),
            (
                "request_count",
                "Request Count",
                "requests",
                self.completed as f64,
            ),
            (
                "error_request_count",
                "Error Request Count",
                "requests",
                self.failed as f64,
            ),
            (
                "request_cancelled_count",
                "Cancelled Request Count",
                "requests",
                self.cancelled as f64,
            ),
        ]
    }
}

/// Cuts `r`'s measured requests into slices of `slice_ns`.
pub fn slices(r: &Report, slice_ns: u64) -> Vec<Slice> {
    let slice_ns = slice_ns.max(1);
    let sent = || {
        r.records
            .iter()
            .filter(|x| x.phase == Phase::Profiling && x.start_ns > 0)
    };
    // From the first measured send to the last: the slices that requests were sent in.
    let tx = sent().map(|x| x.start_ns).min().unwrap_or(0);
    let span = sent().map(|x| x.start_ns - tx).max().unwrap_or(0) + 1;
    let count = span.div_ceil(slice_ns).clamp(1, MAX_SLICES);
    let mut out: Vec<Slice> = (0..count)
        .map(|k| Slice {
            index: k,
            start_s: (k * slice_ns) as f64 / 1e9,
            end_s: ((k + 1) * slice_ns).min(span.max(k * slice_ns)) as f64 / 1e9,
            metrics: Metrics::default(),
            completed: 0,
            failed: 0,
            cancelled: 0,
            output_tokens: 0,
        })
        .collect();
    for rec in sent() {
        let k = (rec.start_ns.saturating_sub(tx) / slice_ns).min(count - 1) as usize;
        let s = &mut out[k];
        match rec.outcome {
            Outcome::Ok => {
                s.completed += 1;
                s.output_tokens += rec.osl.unwrap_or(0);
                s.metrics.add(rec);
            }
            Outcome::RequestCancelled => s.cancelled += 1,
            _ => s.failed += 1,
        }
    }
    for s in &mut out {
        s.metrics.seal();
    }
    out
}

fn two(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// `profile_export_ringperf_timeslices.json`: `{"timeslices": [{"timeslice_index": k,
/// "<metric>": {"unit", "avg", "min", "max", "pNN"…}, …}], "slice_duration_s", "input_config"}`.
pub fn json(slices: &[Slice], slice_ns: u64, input_config: &Value) -> Value {
    let list: Vec<Value> = slices
        .iter()
        .map(|s| {
            let mut m = Map::new();
            m.insert("timeslice_index".into(), json!(s.index));
            m.insert("start_s".into(), json!(s.start_s));
            m.insert("end_s".into(), json!(s.end_s));
            for (tag, _, unit, d, scale) in s.dists() {
                if d.count() > 0 {
                    m.insert(tag.into(), super::export::dist_json(d, scale, unit));
                }
            }
            for (tag, _, unit, v) in s.values() {
                m.insert(tag.into(), json!({"unit": unit, "avg": v}));
            }
            Value::Object(m)
        })
        .collect();
    json!({
        "timeslices": list,
        "slice_duration_s": slice_ns as f64 / 1e9,
        "input_config": input_config,
    })
}

/// `profile_export_ringperf_timeslices.csv`, AIPerf's long layout:
/// `Timeslice,Metric,Unit,Stat,Value`, values to 2 decimals.
pub fn csv(slices: &[Slice]) -> Result<Vec<u8>, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(["Timeslice", "Metric", "Unit", "Stat", "Value"])?;
    for s in slices {
        let k = s.index.to_string();
        for (_, name, unit, d, scale) in s.dists() {
            if d.count() == 0 {
                continue;
            }
            let sum = d.summary(scale);
            let mut stats = vec![("avg", sum.avg), ("min", sum.min), ("max", sum.max)];
            for (name, v) in PERCENTILES.iter().zip(&sum.percentiles) {
                if ["p50", "p90", "p95", "p99"].contains(&name.0) {
                    stats.push((name.0, *v));
                }
            }
            for (stat, v) in stats {
                w.write_record([k.as_str(), name, unit, stat, &format!("{:.2}", two(v))])?;
            }
        }
        for (_, name, unit, v) in s.values() {
            w.write_record([k.as_str(), name, unit, "avg", &format!("{:.2}", two(v))])?;
        }
    }
    w.into_inner().map_err(|e| e.into_error().into())
}
