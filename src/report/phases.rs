//! Where the time went: each request's TTFT and latency as the client measured them, split
//! by the server's own account of the request (its span, joined by the `X-Request-ID` the
//! client sent) into time in the server's queue, in prefill, in decode, the rest of the
//! server's time, and the time outside the server (network, HTTP, the client).

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use crate::otlp::{Phases, Received};
use crate::record::{Outcome, Phase, Record};
use crate::stats::Dist;

/// The percentiles whose request is shown part by part.
pub const AT: [f64; 3] = [50.0, 90.0, 99.0];

/// One request split (ns; a part can be negative where the server's clock and the client's
/// disagree, which the split shows rather than hides).
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// The request.
    pub id: u64,
    /// What the client measured.
    pub client_ns: u64,
    /// The parts, by [`TTFT_PARTS`] or [`LATENCY_PARTS`].
    pub parts: Vec<i64>,
}

/// The parts of TTFT.
pub const TTFT_PARTS: [&str; 4] = ["queue", "prefill", "server_other", "outside_server"];
/// The parts of the request latency.
pub const LATENCY_PARTS: [&str; 5] = [
    "queue",
    "prefill",
    "decode",
    "server_other",
    "outside_server",
];

/// The server's spans joined to a run's requests.
#[derive(Debug, Clone, Default)]
pub struct Traces {
    /// Where the spans were received (`http://ADDR`).
    pub endpoint: String,
    /// Each measured request's span, by request number.
    pub by_id: HashMap<u64, Phases>,
    /// Completed measured requests, and how many of them have a span.
    pub completed: u64,
    /// See `completed`.
    pub joined: u64,
    /// Exports taken and refused, and the first refusal.
    pub exports: u64,
    /// See `exports`.
    pub refused: u64,
    /// See `exports`.
    pub first_refusal: Option<String>,
    /// Spans of other kinds, spans naming no measured request of this run (warm-up, an
    /// earlier run, another client), second spans of a request, spans past the cap.
    pub other_spans: u64,
    /// See `other_spans`.
    pub unmatched: u64,
    /// See `other_spans`.
    pub duplicates: u64,
    /// See `other_spans`.
    pub over_cap: u64,
    /// How long the run waited for spans after its last response (ns).
    pub waited_ns: u64,
    /// TTFT split, requests in the order of their TTFT (completed, streamed, spanned).
    pub ttft: Vec<Split>,
    /// Request latency split, requests in the order of their latency.
    pub latency: Vec<Split>,
}

/// What a span's phase is, or 0 where it did not say.
fn or0(v: Option<u64>) -> i64 {
    v.map_or(0, |v| v as i64)
}

/// Joins `received` to `records`: measured requests with the span of their number.
pub fn join(endpoint: String, received: Received, records: &[Record], waited_ns: u64) -> Traces {
    let mut t = Traces {
        endpoint,
        exports: received.exports,
        refused: received.refused,
        first_refusal: received.first_refusal,
        other_spans: received.other_spans,
        duplicates: received.duplicates,
        over_cap: received.over_cap,
        waited_ns,
        ..Traces::default()
    };
    let mut spans = received.spans;
    for r in records
        .iter()
        .filter(|r| r.phase == Phase::Profiling && r.outcome == Outcome::Ok)
    {
        t.completed += 1;
        let Some(s) = spans.remove(&r.id) else {
            continue;
        };
        let p = s.phases;
        t.joined += 1;
        t.by_id.insert(r.id, p);
        let (queue, prefill, decode) = (or0(p.queue_ns), or0(p.prefill_ns), or0(p.decode_ns));
        if let (Some(client), Some(server)) = (r.ttft(), p.ttft_ns) {
            t.ttft.push(Split {
                id: r.id,
                client_ns: client,
                parts: vec![
                    queue,
                    prefill,
                    server as i64 - queue - prefill,
                    client as i64 - server as i64,
                ],
            });
        }
        if let Some(server) = p.e2e_ns {
            let client = r.latency();
            t.latency.push(Split {
                id: r.id,
                client_ns: client,
                parts: vec![
                    queue,
                    prefill,
                    decode,
                    server as i64 - queue - prefill - decode,
                    client as i64 - server as i64,
                ],
            });
        }
    }
    t.unmatched = spans.len() as u64;
    t.ttft.sort_by_key(|s| s.client_ns);
    t.latency.sort_by_key(|s| s.client_ns);
    t
}

impl Traces {
    /// The request at percentile `p` (nearest rank) of `splits`.
    pub fn at(splits: &[Split], p: f64) -> Option<&Split> {
        let n = splits.len();
        (n > 0).then(|| &splits[((p / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1])
    }

    /// The mean of each part (and of the client's figure) over `splits` (ns).
    pub fn mean(splits: &[Split]) -> Option<(f64, Vec<f64>)> {
        let n = splits.len() as f64;
        let first = splits.first()?;
        let mut parts = vec![0.0; first.parts.len()];
        let mut client = 0.0;
        for s in splits {
            client += s.client_ns as f64 / n;
            for (m, v) in parts.iter_mut().zip(&s.parts) {
                *m += *v as f64 / n;
            }
        }
        Some((client, parts))
    }

    /// Each part's distribution over the requests (ns; parts below 0 count as 0), by the
    /// names the JSON and CSV give them.
    pub fn dists(&self) -> Vec<(&'static str, &'static str, Dist)> {
        let dist = |values: &mut dyn Iterator<Item = u64>| {
            let mut d = Dist::keeping_values();
            values.for_each(|v| d.record(v));
            d.seal();
            d
        };
        let of =
            |splits: &[Split], i: usize| dist(&mut splits.iter().map(|s| s.parts[i].max(0) as u64));
        let server = |f: fn(&Phases) -> Option<u64>| dist(&mut self.by_id.values().filter_map(f));
        vec![
            (
                "server_queue_time",
                "Server Queue Time (ms)",
                server(|p| p.queue_ns),
            ),
            (
                "server_prefill_time",
                "Server Prefill Time (ms)",
                server(|p| p.prefill_ns),
            ),
            (
                "server_decode_time",
                "Server Decode Time (ms)",
                server(|p| p.decode_ns),
            ),
            (
                "server_time_to_first_token",
                "Server Time To First Token (ms)",
                server(|p| p.ttft_ns),
            ),
            (
                "server_request_latency",
                "Server Request Latency (ms)",
                server(|p| p.e2e_ns),
            ),
            (
                "outside_server_time_to_first_token",
                "Outside Server Time To First Token (ms)",
                of(&self.ttft, 3),
            ),
            (
                "outside_server_request_latency",
                "Outside Server Request Latency (ms)",
                of(&self.latency, 4),
            ),
        ]
    }

    /// The JSON: counts, and per figure its mean split and the split of the requests at
    /// [`AT`].
    pub fn to_json(&self) -> Value {
        let split = |names: &[&str], client: f64, parts: &[f64], id: Option<u64>| {
            let mut m = Map::new();
            m.insert("client_ms".into(), json!(client / 1e6));
            for (n, v) in names.iter().zip(parts) {
                m.insert(format!("{n}_ms"), json!(v / 1e6));
            }
            if let Some(id) = id {
                m.insert(
                    "x_request_id".into(),
                    json!(crate::http::request::format_id(id)),
                );
            }
            Value::Object(m)
        };
        let figure = |splits: &[Split], names: &[&str]| {
            let mut m = Map::new();
            if let Some((c, parts)) = Self::mean(splits) {
                m.insert("mean".into(), split(names, c, &parts, None));
            }
            for p in AT {
                if let Some(s) = Self::at(splits, p) {
                    let parts: Vec<f64> = s.parts.iter().map(|v| *v as f64).collect();
                    m.insert(
                        format!("p{p:.0}"),
                        split(names, s.client_ns as f64, &parts, Some(s.id)),
                    );
                }
            }
            Value::Object(m)
        };
        json!({
            "endpoint": self.endpoint,
            "completed_requests": self.completed,
            "joined": self.joined,
            "without_span": self.completed - self.joined,
            "exports": self.exports,
            "refused_exports": self.refused,
            "first_refusal": self.first_refusal,
            "other_spans": self.other_spans,
            "unmatched_spans": self.unmatched,
            "duplicate_spans": self.duplicates,
            "spans_over_cap": self.over_cap,
            "waited_s": self.waited_ns as f64 / 1e9,
            "time_to_first_token": figure(&self.ttft, &TTFT_PARTS),
            "request_latency": figure(&self.latency, &LATENCY_PARTS),
        })
    }

    /// The console's lines.
    pub fn console(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Where the time went, by the server's spans ({} of {} completed requests joined by \
             X-Request-ID{}; srv other: the server's time outside queue, prefill and decode; \
             outside: the network and the client):",
            self.joined,
            self.completed,
            if self.refused > 0 {
                format!(
                    "; {} export(s) refused: {}",
                    self.refused,
                    self.first_refusal.as_deref().unwrap_or("")
                )
            } else {
                String::new()
            }
        );
        let table = |out: &mut String, title: &str, splits: &[Split], names: &[&str]| {
            if splits.is_empty() {
                return;
            }
            let _ = write!(out, "  {title:<16}{:>9}", "client");
            for n in names {
                let short = match *n {
                    "server_other" => "srv other",
                    "outside_server" => "outside",
                    n => n,
                };
                let _ = write!(out, "{short:>10}");
            }
            out.push('\n');
            let mut row = |label: String, client: f64, parts: &[f64]| {
                let _ = write!(out, "    {label:<14}{:>9.2}", client / 1e6);
                for v in parts {
                    let _ = write!(out, "{:>10.2}", v / 1e6);
                }
                out.push('\n');
            };
            if let Some((c, parts)) = Self::mean(splits) {
                row("mean".into(), c, &parts);
            }
            for p in AT {
                if let Some(s) = Self::at(splits, p) {
                    let parts: Vec<f64> = s.parts.iter().map(|v| *v as f64).collect();
                    row(format!("p{p:.0} request"), s.client_ns as f64, &parts);
                }
            }
        };
        table(&mut out, "TTFT (ms)", &self.ttft, &TTFT_PARTS);
        table(&mut out, "Latency (ms)", &self.latency, &LATENCY_PARTS);
        if self.completed > self.joined {
            let _ = writeln!(
                out,
                "  {} request(s) have no span (not counted as zero){}",
                self.completed - self.joined,
                if self.exports == 0 {
                    format!(
                        ": no export reached {}; start the server with \
                         --otlp-traces-endpoint {} and \
                         OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf",
                        self.endpoint, self.endpoint
                    )
                } else {
                    String::new()
                }
            );
        }
        out
    }
}

/// A server's phase histograms in [`crate::server_metrics::PHASES`]' order.
fn in_order(
    s: &crate::server_metrics::Summary,
) -> impl Iterator<Item = (&'static str, &crate::server_metrics::HistDelta)> {
    crate::server_metrics::PHASES
        .iter()
        .filter_map(|(name, _)| s.phases.get(*name).map(|d| (*name, d)))
}

/// The console line of a server's phase histograms, beside the client's means (ns).
pub fn metrics_line(
    s: &crate::server_metrics::Summary,
    client_ttft_mean_ns: Option<f64>,
    client_latency_mean_ns: Option<f64>,
) -> Option<String> {
    if s.phases.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    for (name, d) in in_order(s) {
        let mut p = format!(
            "{} mean {:.2} p50 {} p99 {}",
            name.replace('_', " "),
            d.mean() * 1e3,
            bucketed(d.bucket(0.5)),
            bucketed(d.bucket(0.99))
        );
        let client = match name {
            "time_to_first_token" => client_ttft_mean_ns,
            "request_latency" => client_latency_mean_ns,
            _ => None,
        };
        if let Some(c) = client {
            let _ = write!(
                p,
                " (client {:.2}: {:.2} outside the server)",
                c / 1e6,
                c / 1e6 - d.mean() * 1e3
            );
        }
        parts.push(p);
    }
    Some(format!(
        "server phases from {} (its histograms' rise over the run, ms; percentiles as the \
         bucket they fall in): {}",
        s.url,
        parts.join("; ")
    ))
}

/// A percentile read from a histogram, in ms, as what the histogram knows: the bucket it
/// lies in (`1500–2000`), `≤BOUND` in the first, `≥BOUND` in `+Inf`. Prometheus's linear
/// estimate within a bucket (in the JSON) can be far off: vLLM's first queue bucket ends at
/// 300 ms, so a queue of a few ms reads 150 there, and a p99 in its 2.5–5 s latency bucket
/// can read 4.9 s when no request took 3.
fn bucketed((lo, hi, _): (f64, f64, f64)) -> String {
    let ms = |s: f64| {
        let t = format!("{:.3}", s * 1e3);
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    match (lo == 0.0, hi.is_finite()) {
        (_, false) => format!("≥{}", ms(lo)),
        (true, true) => format!("≤{}", ms(hi)),
        (false, true) => format!("{}–{}", ms(lo), ms(hi)),
    }
}

/// The JSON of a server's phase histograms beside the client's means (ns).
pub fn metrics_json(
    s: &crate::server_metrics::Summary,
    client_ttft_mean_ns: Option<f64>,
    client_latency_mean_ns: Option<f64>,
) -> Value {
    // `+Inf` as null: JSON has no infinity.
    let bounds =
        |(lo, hi, _): (f64, f64, f64)| json!([lo * 1e3, hi.is_finite().then_some(hi * 1e3)]);
    let mut m = Map::new();
    for (name, d) in in_order(s) {
        let mut v = json!({
            "family": d.family,
            "count": d.count,
            "mean_ms": d.mean() * 1e3,
            "p50_ms": d.quantile(0.5) * 1e3,
            "p90_ms": d.quantile(0.9) * 1e3,
            "p99_ms": d.quantile(0.99) * 1e3,
            // Where each estimate's bucket lies: the value is known to be within it.
            "p50_bucket_ms": bounds(d.bucket(0.5)),
            "p90_bucket_ms": bounds(d.bucket(0.9)),
            "p99_bucket_ms": bounds(d.bucket(0.99)),
        });
        let client = match name {
            "time_to_first_token" => client_ttft_mean_ns,
            "request_latency" => client_latency_mean_ns,
            _ => None,
        };
        if let Some(c) = client {
            v["client_mean_ms"] = json!(c / 1e6);
            v["outside_server_mean_ms"] = json!(c / 1e6 - d.mean() * 1e3);
        }
        m.insert(name.to_string(), v);
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::Span;

    fn record(id: u64, ttft_ms: u64, e2e_ms: u64) -> Record {
        let mut r = Record::new(id, 0, Phase::Profiling, 0, None);
        r.start_ns = 1_000_000_000;
        r.first_content_ns = Some(1_000_000_000 + ttft_ms * 1_000_000);
        r.end_ns = 1_000_000_000 + e2e_ms * 1_000_000;
        r.outcome = Outcome::Ok;
        r
    }

    fn span(id: u64, queue_ms: u64) -> Span {
        let ms = |v: u64| Some(v * 1_000_000);
        Span {
            id,
            start_unix_ns: 0,
            phases: Phases {
                queue_ns: ms(queue_ms),
                prefill_ns: ms(20),
                decode_ns: ms(36),
                inference_ns: ms(56),
                ttft_ns: ms(queue_ms + 21),
                e2e_ns: ms(queue_ms + 57),
            },
        }
    }

    #[test]
    fn a_histogram_percentile_says_what_its_bucket_knows() {
        // All in vLLM's first queue bucket (0, 300 ms]: a bound, not Prometheus's 150.
        assert_eq!(bucketed((0.0, 0.3, 0.15)), "≤300");
        assert_eq!(bucketed((2.5, 5.0, 4.9)), "2500–5000");
        assert_eq!(bucketed((0.0025, 0.005, 0.004)), "2.5–5");
        assert_eq!(bucketed((7680.0, f64::INFINITY, 7680.0)), "≥7680000");
    }

    #[test]
    fn each_request_is_split_by_its_own_span_and_the_missing_are_counted() {
        let records: Vec<Record> = (0..10).map(|i| record(i, 25 + i, 62 + i)).collect();
        let mut received = Received::default();
        for i in 0..9 {
            received.spans.insert(i, span(i, i));
        }
        // A span of no request of this run.
        received.spans.insert(77, span(77, 0));
        let t = join("http://x".into(), received, &records, 0);
        assert_eq!((t.completed, t.joined, t.unmatched), (10, 9, 1));
        // Request 3: TTFT 28 = queue 3 + prefill 20 + 1 in the server + 4 outside.
        let s = t.ttft.iter().find(|s| s.id == 3).unwrap();
        assert_eq!(s.client_ns, 28_000_000);
        assert_eq!(s.parts, vec![3_000_000, 20_000_000, 1_000_000, 4_000_000]);
        // Latency 65 = 3 + 20 + 36 + 1 + 5 outside.
        let s = t.latency.iter().find(|s| s.id == 3).unwrap();
        assert_eq!(
            s.parts,
            vec![3_000_000, 20_000_000, 36_000_000, 1_000_000, 5_000_000]
        );
        // The request at p50 of 9: the 5th by TTFT, request 4; at p99 the last, 8.
        assert_eq!(Traces::at(&t.ttft, 50.0).unwrap().id, 4);
        assert_eq!(Traces::at(&t.ttft, 99.0).unwrap().id, 8);
        let (client, parts) = Traces::mean(&t.ttft).unwrap();
        assert!((client - 29e6).abs() < 1.0 && (parts[0] - 4e6).abs() < 1.0);
        let j = t.to_json();
        assert_eq!(j["without_span"], 1);
        assert_eq!(j["time_to_first_token"]["p50"]["queue_ms"], 4.0);
        assert_eq!(
            j["time_to_first_token"]["p50"]["x_request_id"],
            "0000000000000004"
        );
        assert_eq!(j["request_latency"]["p99"]["decode_ms"], 36.0);
        let c = t.console();
        assert!(c.contains("9 of 10 completed requests joined"), "{c}");
        assert!(c.contains("1 request(s) have no span"), "{c}");
        let d = t.dists();
        assert_eq!(d[0].0, "server_queue_time");
        assert_eq!(d[0].2.count(), 9);
        assert_eq!(d[5].2.percentile(50.0), 4_000_000);
    }
}
