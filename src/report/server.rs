//! What a run says of the server: the share of the measured requests it failed, of which
//! kinds, and how the failures lay in time. Past saturation this is most of what a user
//! needs to read, and it is never the client's verdict: the client is judged on its own
//! evidence (`health`), the server here, and a point's one label takes both.

use serde::{Deserialize, Serialize};

use super::ErrorCount;
use crate::record::{Outcome, Phase, Record};

/// The server's state over the measured phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// It answered every measured request.
    Answered,
    /// It failed some of them, fewer than half.
    Erroring,
    /// It failed half of them or more.
    Failing,
    /// From some moment on it failed every request, on connections it refused, reset or
    /// closed: it stopped answering.
    Stopped,
}

/// The server's account of the measured phase.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerHealth {
    /// Its state.
    pub state: State,
    /// Measured requests that failed on the server's side (a stop's cut requests are the
    /// client's, and not counted).
    pub failed: u64,
    /// Measured requests judged: those that succeeded and those that failed so.
    pub judged: u64,
    /// `failed` / `judged` (0 when nothing was judged).
    pub share: f64,
    /// From this many seconds into the measured phase on, every request failed (none when a
    /// success came last, or fewer than three failed after it).
    pub all_failed_from_s: Option<f64>,
    /// The failed share of the requests that ended in the first and in the second half of
    /// the measured phase.
    pub halves: Option<(f64, f64)>,
    /// What it says, one line.
    pub line: String,
}

impl ServerHealth {
    /// True when at least half the judged requests failed, or the server stopped answering:
    /// such a point is no healthy point of a sweep, a knee or a front.
    pub fn failing(&self) -> bool {
        matches!(self.state, State::Failing | State::Stopped)
    }

    /// The state a merge or an old artifact holds nothing else for.
    pub fn unknown() -> ServerHealth {
        ServerHealth {
            state: State::Answered,
            failed: 0,
            judged: 0,
            share: 0.0,
            all_failed_from_s: None,
            halves: None,
            line: String::new(),
        }
    }
}

/// Kinds of failure that say the server was not there to answer.
fn gone(kind: &str) -> bool {
    matches!(
        kind,
        "connect_failed" | "connect_timeout" | "connection_reset" | "closed_early"
    )
}

/// What a failure of `kind` says of the server, in a few words.
fn meaning(kind: &str) -> &'static str {
    match kind {
        "connect_failed" => "connections refused: nothing listens there",
        "connect_timeout" => "connections not accepted in time",
        "connection_reset" | "closed_early" => "connections cut mid-request",
        "request_timeout" => {
            "no whole answer within --request-timeout: the server is saturated at this load"
        }
        "http_429" => "rate-limited (429)",
        "http_404" => "not found (404): check the model (-m) and the endpoint",
        k if k.starts_with("http_5") => "the server's own errors (5xx)",
        k if k.starts_with("http_4") => "refused as a bad request (4xx)",
        _ => "answers that were not whole",
    }
}

/// The server's account, from the measured `records` (those kept one by one), the `errors`
/// by kind (those only counted included), the requests `completed` and the measured phase
/// `tx`..`ty`.
pub fn assess(
    records: &[Record],
    errors: &[ErrorCount],
    completed: u64,
    tx: u64,
    ty: u64,
) -> ServerHealth {
    let server_errors: Vec<&ErrorCount> = errors.iter().filter(|e| e.kind != "cancelled").collect();
    let failed: u64 = server_errors.iter().map(|e| e.count).sum();
    let judged = completed + failed;
    let share = if judged == 0 {
        0.0
    } else {
        failed as f64 / judged as f64
    };
    let judged_records = || {
        // A connection refused sent nothing, but was tried: it counts, at its end.
        records.iter().filter(|r| {
            r.phase == Phase::Profiling
                && r.end_ns > 0
                && !matches!(r.outcome, Outcome::Cancelled | Outcome::RequestCancelled)
        })
    };
    let last_ok = judged_records()
        .filter(|r| r.outcome == Outcome::Ok)
        .map(|r| r.end_ns)
        .max();
    let after = judged_records()
        .filter(|r| last_ok.is_none_or(|t| r.end_ns > t))
        .count();
    let recorded_failed = judged_records()
        .filter(|r| r.outcome != Outcome::Ok)
        .count();
    let seconds = |t: u64| t.saturating_sub(tx) as f64 / 1e9;
    // Every request failed from the last answer on: said when at least three did, they are
    // most of the failures, and they fill a tenth of the phase or more (a few last requests
    // timing out at the end of a long run are no stop).
    let all_failed_from_s = match last_ok {
        None if failed > 0 => Some(0.0),
        Some(t)
            if after >= 3
                && 2 * after >= recorded_failed
                && 10 * ty.saturating_sub(t) >= ty.saturating_sub(tx) =>
        {
            Some(seconds(t))
        }
        _ => None,
    };
    let halves = if ty > tx && failed > 0 {
        let mid = tx + (ty - tx) / 2;
        let half = |first: bool| {
            let (mut n, mut bad) = (0u64, 0u64);
            for r in judged_records().filter(|r| (r.end_ns <= mid) == first) {
                n += 1;
                bad += u64::from(r.outcome != Outcome::Ok);
            }
            (n > 0).then(|| bad as f64 / n as f64)
        };
        half(true).zip(half(false))
    } else {
        None
    };
    let kinds_gone = server_errors.iter().all(|e| gone(&e.kind));
    let state = match (failed, all_failed_from_s) {
        (0, _) => State::Answered,
        (_, Some(_)) if kinds_gone => State::Stopped,
        (_, Some(_)) => State::Failing,
        _ if 2 * failed >= judged => State::Failing,
        _ => State::Erroring,
    };
    let mut kinds: Vec<&&ErrorCount> = server_errors.iter().collect();
    kinds.sort_by_key(|e| std::cmp::Reverse(e.count));
    let listed: Vec<String> = kinds
        .iter()
        .take(3)
        .map(|e| format!("{} × {}", e.kind, e.count))
        .collect();
    let more = kinds.len().saturating_sub(3);
    let kinds_text = if more > 0 {
        format!("{} and {more} more kind(s)", listed.join(", "))
    } else {
        listed.join(", ")
    };
    let what = match state {
        State::Stopped => "the server stopped answering (connections refused, reset or closed)",
        _ => kinds.first().map_or("", |e| meaning(&e.kind)),
    };
    let counted = format!(
        "{failed} of {judged} measured requests failed ({:.1}%): {kinds_text}",
        share * 100.0
    );
    let line = match state {
        State::Answered => format!("answered all {completed} measured requests"),
        _ => {
            let shape = match (all_failed_from_s, halves) {
                (Some(_), _) if completed == 0 => "every request failed".to_string(),
                (Some(t), _) => format!("from {t:.2} s on, every request failed"),
                (None, Some((a, b))) if b - a >= 0.2 => format!(
                    "failures rose from {:.0}% in the first half of the run to {:.0}% in the \
                     second",
                    a * 100.0,
                    b * 100.0
                ),
                _ => "failures spread over the run".to_string(),
            };
            let head = match state {
                State::Stopped => "stopped answering",
                State::Failing => "failing",
                _ => "errors",
            };
            format!("{head}: {counted}; {shape}: {what}")
        }
    };
    ServerHealth {
        state,
        failed,
        judged,
        share,
        all_failed_from_s,
        halves,
        line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn rec(id: u64, start_ms: u64, end_ms: u64, outcome: Outcome) -> Record {
        let mut r = Record::new(id, 0, Phase::Profiling, 0, None);
        (r.start_ns, r.end_ns, r.outcome) =
            (S + start_ms * 1_000_000, S + end_ms * 1_000_000, outcome);
        r
    }

    fn count(kind: &str, n: u64) -> ErrorCount {
        ErrorCount {
            code: 0,
            kind: kind.into(),
            message: String::new(),
            count: n,
        }
    }

    #[test]
    fn a_server_that_stops_answering_is_stopped_from_its_last_answer_on() {
        // 20 answers in the first 160 ms, then 73 refused connections over 8 s.
        let mut records: Vec<Record> = (0..20)
            .map(|i| rec(i, i * 8, i * 8 + 8, Outcome::Ok))
            .collect();
        records.extend(
            (20..93).map(|i| rec(i, 160 + i * 100, 160 + i * 100 + 1, Outcome::ConnectFailed)),
        );
        let errors = [count("connect_failed", 73)];
        let s = assess(&records, &errors, 20, S, S + 9_461 * 1_000_000);
        assert_eq!(s.state, State::Stopped);
        assert!(s.failing());
        assert_eq!((s.failed, s.judged), (73, 93));
        assert_eq!(s.all_failed_from_s, Some(0.16));
        assert!(
            s.line.starts_with("stopped answering: 73 of 93"),
            "{}",
            s.line
        );
        assert!(
            s.line.contains("from 0.16 s on, every request failed"),
            "{}",
            s.line
        );
        assert!(
            s.line.contains("the server stopped answering"),
            "{}",
            s.line
        );
    }

    #[test]
    fn every_request_failing_with_a_status_is_failing_not_stopped() {
        let records: Vec<Record> = (0..10)
            .map(|i| rec(i, i, i + 1, Outcome::HttpStatus(404)))
            .collect();
        let s = assess(&records, &[count("http_404", 10)], 0, S, S + 11_000_000);
        assert_eq!(s.state, State::Failing);
        assert_eq!(s.all_failed_from_s, Some(0.0));
        assert!(
            s.line.contains("every request failed: not found (404)"),
            "{}",
            s.line
        );
    }

    #[test]
    fn some_failures_are_errors_and_a_rise_is_said_with_its_halves() {
        // Every fourth request a 500, spread over the run.
        let records: Vec<Record> = (0..40)
            .map(|i| {
                rec(
                    i,
                    i * 10,
                    i * 10 + 5,
                    if i % 4 == 0 {
                        Outcome::HttpStatus(500)
                    } else {
                        Outcome::Ok
                    },
                )
            })
            .collect();
        let s = assess(&records, &[count("http_500", 10)], 30, S, S + 395_000_000);
        assert_eq!(s.state, State::Erroring);
        assert!(!s.failing());
        assert!(
            s.line.contains("failures spread over the run"),
            "{}",
            s.line
        );
        // Timeouts that grow with the load: none in the first half, most in the second.
        let records: Vec<Record> = (0..40)
            .map(|i| {
                rec(
                    i,
                    i * 10,
                    i * 10 + 5,
                    if i >= 20 && i % 5 != 0 {
                        Outcome::RequestTimeout
                    } else {
                        Outcome::Ok
                    },
                )
            })
            .collect();
        let s = assess(
            &records,
            &[count("request_timeout", 16)],
            24,
            S,
            S + 395_000_000,
        );
        assert_eq!(s.state, State::Erroring);
        assert_eq!(s.halves, Some((0.0, 0.8)));
        assert!(
            s.line
                .contains("rose from 0% in the first half of the run to 80%"),
            "{}",
            s.line
        );
        assert!(s.line.contains("saturated"), "{}", s.line);
    }

    #[test]
    fn a_few_failures_at_the_end_of_a_long_run_are_no_stop() {
        // 100 answers over 10 s, then 3 timeouts in its last 50 ms.
        let mut records: Vec<Record> = (0..100)
            .map(|i| rec(i, i * 100, i * 100 + 50, Outcome::Ok))
            .collect();
        records.extend((100..103).map(|i| rec(i, 9_900, 9_990, Outcome::RequestTimeout)));
        let s = assess(
            &records,
            &[count("request_timeout", 3)],
            100,
            S,
            S + 9_990 * 1_000_000,
        );
        assert_eq!((s.state, s.all_failed_from_s), (State::Erroring, None));
    }

    #[test]
    fn a_stops_cut_requests_are_not_the_servers_failures() {
        let records: Vec<Record> = (0..10)
            .map(|i| {
                rec(
                    i,
                    i,
                    i + 1,
                    if i < 8 {
                        Outcome::Ok
                    } else {
                        Outcome::Cancelled
                    },
                )
            })
            .collect();
        let s = assess(&records, &[count("cancelled", 2)], 8, S, S + 11_000_000);
        assert_eq!((s.state, s.failed, s.judged), (State::Answered, 0, 8));
        assert_eq!(s.line, "answered all 8 measured requests");
    }
}
