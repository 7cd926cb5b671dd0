//! A staircase run, step by step: each step's steady state (its first quarter dropped as the
//! transient), its throughput with a 95% interval (Little's law by batch means), its latencies and
//! goodput, and the knee, judged as a sweep's is, so that one run answers what a sweep of
//! runs would.

use serde_json::{json, Value};

use super::sweep::{self, Row};
use crate::plan::load::Steps;
use crate::plan::sweep::{Axis, Point};
use crate::plan::Slo;
use crate::record::Record;
use crate::stats::linear_percentile;

/// The file a staircase run writes beside its usual artifacts.
pub const STAIRCASE_JSON: &str = "staircase.json";

/// A step needs this many completions in its steady window to be judged.
const MIN_COMPLETIONS: usize = 10;

/// One step, measured.
#[derive(Debug, Clone)]
pub struct Step {
    /// Its row, as a sweep's point (the knee and the report read it), with its intervals.
    pub row: Row,
}

fn pct(mut v: Vec<f64>, p: f64) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| linear_percentile(&v, p))
}

/// The steps that ran long enough to judge, from the run's records; `t0` is when the first
/// step began.
pub fn steps(records: &[Record], t0: u64, steps: &Steps, slos: &[Slo]) -> Vec<Step> {
    let last_end = records.iter().map(|r| r.end_ns).max().unwrap_or(0);
    let mut out = Vec::new();
    for (k, cap) in steps.caps.iter().enumerate() {
        let (from, to) = (
            t0 + k as u64 * steps.step_ns + steps.step_ns / 4,
            t0 + (k as u64 + 1) * steps.step_ns,
        );
        if to > last_end {
            break;
        }
        let measured = records
            .iter()
            .filter(|r| r.phase == crate::record::Phase::Profiling);
        let ended: Vec<&Record> = measured
            .clone()
            .filter(|r| r.is_measured_ok() && (from..to).contains(&r.end_ns))
            .collect();
        if ended.len() < MIN_COMPLETIONS {
            break;
        }
        let started: Vec<&Record> = measured
            .filter(|r| (from..to).contains(&r.start_ns))
            .collect();
        let ok: Vec<&&Record> = started.iter().filter(|r| r.is_measured_ok()).collect();
        let secs = (to - from) as f64 / 1e9;
        let tokens: u64 = ended.iter().filter_map(|r| r.osl).sum();
        let (req_tput, tok_tput) = (ended.len() as f64 / secs, tokens as f64 / secs);
        // The step holds its cap: a closed loop, whose throughput interval comes from the
        // requests that ended in the window (Little's law by batch means).
        let intervals = super::intervals::within_run(
            &ended,
            super::intervals::Loop::Closed(0),
            [req_tput, tok_tput],
        );
        let ms = |f: fn(&Record) -> Option<f64>| ok.iter().filter_map(|r| f(r)).collect::<Vec<_>>();
        let ttft = ms(|r| r.ttft().map(|t| t as f64 / 1e6));
        let itl = ms(|r| r.itl().map(|t| t / 1e6));
        let e2e = ms(|r| Some(r.latency() as f64 / 1e6));
        let good = started
            .iter()
            .filter(|r| r.is_measured_ok() && slos.iter().all(|s| s.met(r)))
            .count();
        let state = step_state(&started);
        let doc = json!({
            "request_throughput": {"avg": req_tput},
            "output_token_throughput": {"avg": tok_tput},
            "intervals": intervals,
            "time_to_first_token": {"p50": pct(ttft.clone(), 50.0), "p99": pct(ttft, 99.0)},
            "inter_token_latency": {"p50": pct(itl.clone(), 50.0), "p99": pct(itl, 99.0)},
            "request_latency": {"p50": pct(e2e.clone(), 50.0), "p99": pct(e2e, 99.0)},
            "goodput_detail": (!slos.is_empty() && !started.is_empty())
                .then(|| json!({"good_fraction": good as f64 / started.len() as f64})),
            "request_count": {"avg": started.len()},
            "error_request_count": {"avg": started.len() - ok.len()},
            // A step the server mostly failed is no step of its curve: the knee leaves it out.
            "server_health": {"state": state},
        });
        let point = Point {
            axis: Axis::Concurrency,
            value: *cap as f64,
        };
        out.push(Step {
            row: Row::of(point, &[doc]),
        });
    }
    out
}

/// The server's state over a step's requests (those cut by the step's end or a stop are
/// the client's, and not judged): failing when half or more failed.
fn step_state(started: &[&Record]) -> super::server::State {
    use super::server::State;
    use crate::record::Outcome;
    let judged = started
        .iter()
        .filter(|r| !matches!(r.outcome, Outcome::Cancelled | Outcome::RequestCancelled));
    let (mut failed, mut all) = (0usize, 0usize);
    for r in judged {
        all += 1;
        failed += usize::from(r.outcome != Outcome::Ok);
    }
    match failed {
        0 => State::Answered,
        f if 2 * f >= all => State::Failing,
        _ => State::Erroring,
    }
}

/// The `staircase.json` document, and the lines the console shows.
pub fn describe(steps: &[Step], step_ns: u64, attainment: f64) -> (Value, String) {
    let rows: Vec<Row> = steps.iter().map(|s| s.row.clone()).collect();
    let knee = sweep::knee(&rows);
    let within = rows
        .iter()
        .filter(|r| r.get("goodput_fraction").is_some_and(|g| g >= attainment))
        .map(|r| r.point.value)
        .fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))));
    let mut text = sweep::render(&rows);
    for s in steps {
        let ci = s.row.interval("request_throughput");
        text.push_str(&format!(
            "  {}: steady request throughput {:.2}/s, 95% interval {}{}\n",
            s.row.point.label(),
            s.row.get("request_throughput").unwrap_or(0.0),
            ci.map_or("- (under 10 requests)".into(), |i| format!(
                "{:.2} to {:.2} (Little's law, batch means)",
                i.lo, i.hi
            )),
            if s.row.server_failing {
                "; the server failed half its requests or more: left out of the knee"
            } else {
                ""
            }
        ));
    }
    let has_slos = rows.iter().any(|r| r.get("goodput_fraction").is_some());
    if has_slos {
        text.push_str(&match within {
            Some(c) => format!(
                "the highest step with at least {:.0}% of requests within every objective: \
                 concurrency {c}\n",
                attainment * 100.0
            ),
            None => format!(
                "no step kept {:.0}% of requests within every objective\n",
                attainment * 100.0
            ),
        });
    }
    let doc = json!({
        "step_s": step_ns as f64 / 1e9,
        "transient_dropped": "the first quarter of every step",
        "steps": steps.iter().map(|s| json!({
            "concurrency": s.row.point.value,
            "request_throughput": s.row.get("request_throughput"),
            "request_throughput_ci95": s.row.interval("request_throughput").map(|i| [i.lo, i.hi]),
            "output_token_throughput_ci95": s.row.interval("output_token_throughput").map(|i| [i.lo, i.hi]),
            "output_token_throughput": s.row.get("output_token_throughput"),
            "ttft_p50_ms": s.row.get("ttft_p50_ms"),
            "ttft_p99_ms": s.row.get("ttft_p99_ms"),
            "itl_p50_ms": s.row.get("itl_p50_ms"),
            "itl_p99_ms": s.row.get("itl_p99_ms"),
            "request_latency_p99_ms": s.row.get("request_latency_p99_ms"),
            "goodput_fraction": s.row.get("goodput_fraction"),
            "requests": s.row.get("request_count"),
            "server_failing": s.row.server_failing,
        })).collect::<Vec<_>>(),
        "knee": knee.as_ref().map(sweep::Knee::to_json),
        "knee_rule": sweep::KNEE_RULE,
        "undecided": sweep::undecided(&rows),
        "highest_within_slo": within,
        "slo_attainment": has_slos.then_some(attainment),
    });
    (doc, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Outcome, Phase};

    /// Requests of 10 ms, back to back on `lanes` lanes through `[from, to)` ms, failed when
    /// `fail` says so.
    fn lane_records(lanes: u64, from: u64, to: u64, fail: impl Fn(u64) -> bool) -> Vec<Record> {
        let ms = 1_000_000;
        let mut out = Vec::new();
        for lane in 0..lanes {
            for t in (from..to).step_by(10) {
                let id = lane * 100_000 + t;
                let mut r = Record::new(id, 0, Phase::Profiling, 0, Some(10));
                (r.start_ns, r.end_ns) = (t * ms, (t + 10) * ms);
                if fail(id) {
                    r.outcome = Outcome::HttpStatus(500);
                } else {
                    r.outcome = Outcome::Ok;
                    r.first_content_ns = Some(t * ms + ms);
                    r.osl = Some(10);
                }
                out.push(r);
            }
        }
        out
    }

    #[test]
    fn a_step_the_server_mostly_failed_is_marked_and_left_out_of_the_knee() {
        // Steps of 1 s at 2, 4 and 8 in flight; the last fails three requests in four.
        let mut records = lane_records(2, 0, 1000, |_| false);
        records.extend(lane_records(4, 1000, 2000, |_| false));
        records.extend(lane_records(8, 2000, 3000, |id| id % 4 != 0));
        let plan = Steps {
            step_ns: 1_000_000_000,
            caps: vec![2, 4, 8],
        };
        let s = steps(&records, 0, &plan, &[]);
        assert_eq!(s.len(), 3);
        let failing: Vec<bool> = s.iter().map(|s| s.row.server_failing).collect();
        assert_eq!(failing, [false, false, true]);
        let (doc, text) = describe(&s, plan.step_ns, 0.9);
        assert_eq!(doc["steps"][2]["server_failing"], true);
        assert!(text.contains("left out of the knee"), "{text}");
    }
}
