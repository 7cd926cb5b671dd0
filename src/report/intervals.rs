//! 95% intervals of a run's headline figures, from the run's own requests, so that a sweep
//! without repeats still says how far each point's figures can be trusted (and the knee can
//! tell a real gain from noise). Over repeated runs the sweep uses the runs instead.
//!
//! - Throughput of a closed loop: by Little's law (throughput = requests in flight / mean
//!   latency, and tokens likewise), the ratio Σ output tokens / Σ latency by batch means over
//!   the requests in send order after the first fill of the places (the start-up transient;
//!   [`ratio_interval`]), taken relative to the reported figure,
//!   and at least one completion wide.
//! - Throughput of an open loop: the completions counted as a Poisson count (±z·√N).
//! - Percentiles: order statistics at binomial ranks ([`percentile_interval`]): observed
//!   values, distribution-free, never outside the figure's domain.

use serde_json::{json, Map, Value};

use crate::record::Record;
use crate::stats::{percentile_interval, ratio_interval, t_critical, Interval};

/// The confidence of every interval ringperf writes.
pub const CONFIDENCE: f64 = 0.95;

/// The figures (the sweep summary's names) that carry an interval.
pub const FIGURES: &[&str] = &[
    "request_throughput",
    "output_token_throughput",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "request_latency_p50_ms",
    "request_latency_p99_ms",
];

fn entry(i: Interval, method: &str) -> Value {
    json!({"lo": i.lo, "hi": i.hi, "method": method})
}

/// `reported` scaled by `i` relative to `whole` (an interval of a quantity proportional to
/// the reported figure).
fn relative(reported: f64, i: Interval, whole: f64) -> Option<Interval> {
    (whole > 0.0 && reported.is_finite()).then(|| Interval {
        lo: reported * i.lo / whole,
        hi: reported * i.hi / whole,
    })
}

/// How a run's load was shaped, for its throughput interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loop {
    /// A closed loop that filled this many places at its start: those first requests, which
    /// all started together, are the start-up transient and are left out of the batches
    /// when 10 or more requests remain.
    Closed(usize),
    /// An open loop (a rate or a trace).
    Open,
}

/// The `intervals` object of a run's JSON: `ok` are its measured, completed requests;
/// `shape` how the load was run; `throughput` the reported request and output-token
/// throughputs.
pub fn within_run(ok: &[&Record], shape: Loop, throughput: [f64; 2]) -> Value {
    let mut m = Map::new();
    m.insert("confidence".into(), json!(CONFIDENCE));
    let mut by_start: Vec<&Record> = ok.to_vec();
    by_start.sort_by_key(|r| r.start_ns);
    let closed = matches!(shape, Loop::Closed(_));
    let steady = match shape {
        Loop::Closed(fill) if by_start.len() >= fill + 10 => &by_start[fill..],
        _ => &by_start[..],
    };
    let latency: Vec<f64> = steady.iter().map(|r| r.latency() as f64).collect();
    let tokens: Vec<f64> = steady.iter().map(|r| r.osl.unwrap_or(0) as f64).collect();
    let ones = vec![1.0; steady.len()];
    for (name, num, reported) in [
        ("request_throughput", &ones, throughput[0]),
        ("output_token_throughput", &tokens, throughput[1]),
    ] {
        let got = if closed {
            let whole = num.iter().sum::<f64>() / latency.iter().sum::<f64>();
            // A count of N completions resolves the figure to 1/N at best (where a run's
            // requests all took the same time, batch means alone would say exactly).
            let step = 1.0 / by_start.len().max(1) as f64;
            ratio_interval(num, &latency, CONFIDENCE)
                .and_then(|i| relative(reported, i, whole))
                .map(|i| {
                    let i = Interval {
                        lo: i.lo.min(reported * (1.0 - step)),
                        hi: i.hi.max(reported * (1.0 + step)),
                    };
                    entry(
                        i,
                        "batch means of Little's law (requests or tokens / latency) over the \
                         requests after the first fill, at least one completion wide",
                    )
                })
        } else {
            let n = by_start.len() as f64;
            (n >= 2.0 && reported > 0.0).then(|| {
                let h = t_critical(1e9, CONFIDENCE) / n.sqrt();
                entry(
                    Interval {
                        lo: reported * (1.0 - h).max(0.0),
                        hi: reported * (1.0 + h),
                    },
                    "Poisson count of completions",
                )
            })
        };
        if let Some(v) = got {
            m.insert(name.into(), v);
        }
    }
    let ms = |f: &dyn Fn(&Record) -> Option<f64>| {
        let mut v: Vec<f64> = ok.iter().filter_map(|r| f(r)).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let ttft = ms(&|r| r.ttft().map(|t| t as f64 / 1e6));
    let itl = ms(&|r| r.itl().map(|t| t / 1e6));
    let e2e = ms(&|r| Some(r.latency() as f64 / 1e6));
    for (name, values, p) in [
        ("ttft_p50_ms", &ttft, 50.0),
        ("ttft_p99_ms", &ttft, 99.0),
        ("itl_p50_ms", &itl, 50.0),
        ("itl_p99_ms", &itl, 99.0),
        ("request_latency_p50_ms", &e2e, 50.0),
        ("request_latency_p99_ms", &e2e, 99.0),
    ] {
        if let Some(i) = percentile_interval(values, p, CONFIDENCE) {
            m.insert(name.into(), entry(i, "order statistics at binomial ranks"));
        }
    }
    Value::Object(m)
}

/// A figure's interval from a run's JSON document.
pub fn from_doc(doc: &Value, figure: &str) -> Option<Interval> {
    let e = doc.get("intervals")?.get(figure)?;
    Some(Interval {
        lo: e.get("lo")?.as_f64()?,
        hi: e.get("hi")?.as_f64()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Phase;

    fn rec(id: u64, start: u64, latency: u64, osl: u64) -> Record {
        let mut r = Record::new(id, 0, Phase::Profiling, 0, Some(1));
        r.start_ns = start;
        r.end_ns = start + latency;
        r.first_content_ns = Some(start + latency / 4);
        r.last_content_ns = Some(r.end_ns);
        r.osl = Some(osl);
        r
    }

    #[test]
    fn a_closed_loop_of_equal_requests_has_a_tight_throughput_interval() {
        let recs: Vec<Record> = (0..40)
            .map(|i| rec(i, i * 10, 1_000_000_000, 100))
            .collect();
        let ok: Vec<&Record> = recs.iter().collect();
        let v = within_run(&ok, Loop::Closed(0), [8.0, 800.0]);
        let i = from_doc(&json!({"intervals": v}), "output_token_throughput").unwrap();
        // As wide as one completion of 40.
        assert!(
            (i.lo - 780.0).abs() < 1e-6 && (i.hi - 820.0).abs() < 1e-6,
            "{i:?}"
        );
        let p = from_doc(&json!({"intervals": v}), "ttft_p99_ms").unwrap();
        assert_eq!((p.lo, p.hi), (250.0, 250.0));
    }

    #[test]
    fn an_open_loop_counts_its_completions() {
        let recs: Vec<Record> = (0..100).map(|i| rec(i, i * 10, 1_000_000, 10)).collect();
        let ok: Vec<&Record> = recs.iter().collect();
        let v = json!({"intervals": within_run(&ok, Loop::Open, [10.0, 100.0])});
        let i = from_doc(&v, "request_throughput").unwrap();
        // ±1.96/√100.
        assert!(
            (i.lo - 8.04).abs() < 0.01 && (i.hi - 11.96).abs() < 0.01,
            "{i:?}"
        );
    }

    #[test]
    fn latencies_that_vary_widen_the_throughput_interval_without_leaving_zero() {
        let recs: Vec<Record> = (0..40)
            .map(|i| {
                rec(
                    i,
                    i * 10,
                    if i % 7 == 0 {
                        9_000_000_000
                    } else {
                        100_000_000
                    },
                    10,
                )
            })
            .collect();
        let ok: Vec<&Record> = recs.iter().collect();
        let v = json!({"intervals": within_run(&ok, Loop::Closed(4), [5.0, 50.0])});
        let i = from_doc(&v, "request_throughput").unwrap();
        assert!(i.lo >= 0.0 && i.lo < 5.0 && i.hi > 5.0, "{i:?}");
    }
}
