//! Past saturation, the report tells the truth: each of the simulator's failure modes (a
//! server that stops answering, a 404 for every request, a 429 storm with Retry-After,
//! timeouts at saturation, every other request a 500, a few 500s) crossed with the run kinds
//! (one run, a sweep, repeats, `compare`). Each run must give its rates over the whole
//! measured phase (checked against its own records), a coded `requests_failed` warning with
//! the share, a server line, the right label, charts that count the failures, and the exit
//! code the docs give.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{self, ringperf};

/// One failure mode: the simulator's flags, the load's, and what the run must say.
struct Mode {
    name: &'static str,
    sim: &'static str,
    flags: &'static str,
    /// The label every run of it must carry (or a more serious one of the client's, on a
    /// host too busy for it: tests run side by side).
    label: &'static str,
    /// The server's state every run of it must show.
    state: &'static str,
    /// Nothing completes: exit 2, "nothing was measured".
    none_completes: bool,
}

const MODES: [Mode; 6] = [
    Mode {
        name: "stops",
        sim: "--stop-after 20 --ttft 5ms --itl 5ms",
        flags: "--concurrency 4 --benchmark-duration 2 --output-tokens-mean 8",
        label: "server_failing",
        state: "stopped",
        none_completes: false,
    },
    Mode {
        name: "not-found",
        sim: "--ttft 1ms --itl 1ms -m served-model",
        flags: "-m no-such-model --concurrency 4 --request-count 40 --output-tokens-mean 8",
        label: "server_failing",
        state: "failing",
        none_completes: true,
    },
    Mode {
        name: "rate-limited",
        sim: "--ttft 1ms --itl 1ms --fail-every 1 --fail-status 429 --retry-after 1",
        flags: "--concurrency 4 --request-count 40 --output-tokens-mean 8",
        label: "server_failing",
        state: "failing",
        none_completes: true,
    },
    Mode {
        name: "saturated",
        sim: "--max-batch 4 --ttft 5ms --itl 10ms",
        flags:
            "--concurrency 16 --request-count 48 --output-tokens-mean 20 --request-timeout 600ms",
        label: "server_failing",
        state: "failing",
        none_completes: false,
    },
    Mode {
        name: "every-other-500",
        sim: "--ttft 1ms --itl 1ms --fail-every 2",
        flags: "--concurrency 4 --request-count 40 --output-tokens-mean 8",
        label: "server_failing",
        state: "failing",
        none_completes: false,
    },
    Mode {
        name: "some-500s",
        sim: "--ttft 1ms --itl 1ms --fail-every 4",
        flags: "--concurrency 4 --request-count 40 --output-tokens-mean 8",
        label: "headroom",
        state: "erroring",
        none_completes: false,
    },
];

/// Runs `ringperf profile` on a simulator started in the same process, with the flags and
/// `extra`; gives the exit code and stdout and stderr together.
fn run(mode: &Mode, extra: &[&str], dir: &Path) -> (i32, String) {
    let out = ringperf()
        .arg("profile")
        .arg(format!("--sim={}", mode.sim))
        .args(["--streaming", "--no-preflight"])
        .args(mode.flags.split_whitespace())
        .args(extra)
        .args(["--artifact-dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{path:?}: {e}")))
        .unwrap()
}

/// Checks one run's artifacts in `dir` against what `mode` must show.
fn check_run(mode: &Mode, dir: &Path) {
    let doc = json(&dir.join("profile_export_ringperf.json"));
    let at = |p: &str| doc.pointer(p).and_then(Value::as_f64).unwrap_or(0.0);
    let (ok, failed) = (at("/request_count/avg"), at("/error_request_count/avg"));
    assert!(failed > 0.0, "{}: no failure in {dir:?}", mode.name);
    // The window, from the records: the first measured send (a refused connection's end) to
    // the last measured end, whatever the outcome.
    let jsonl = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    let (mut from, mut to, mut kept_failed) = (u64::MAX, 0u64, 0u64);
    for line in jsonl.lines() {
        let m = &serde_json::from_str::<Value>(line).unwrap()["metadata"];
        if m["benchmark_phase"] != "profiling" {
            continue;
        }
        let end = m["end_ns"].as_u64().unwrap();
        let start = m["start_ns"].as_u64().filter(|s| *s > 0).unwrap_or(end);
        from = from.min(start);
        to = to.max(end);
        kept_failed += u64::from(m["outcome"] != "ok");
    }
    assert_eq!(
        kept_failed as f64, failed,
        "{}: every failure is a record",
        mode.name
    );
    let window = (to - from) as f64 / 1e9;
    let rate = at("/request_throughput/avg");
    assert!(
        (rate - ok / window).abs() <= 0.01 * (ok / window) + 1e-9,
        "{}: request throughput {rate} against {ok} completed over the {window} s phase",
        mode.name
    );
    let warning = doc["client_health"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "requests_failed")
        .unwrap_or_else(|| panic!("{}: no requests_failed warning: {doc}", mode.name));
    let msg = warning["message"].as_str().unwrap();
    let share = format!("{:.1}%", 100.0 * failed / (ok + failed));
    assert!(msg.contains(&share), "{}: {msg} lacks {share}", mode.name);
    assert_eq!(
        doc["server_health"]["state"], mode.state,
        "{}: {}",
        mode.name, doc["server_health"]
    );
    assert_label(
        mode,
        doc["verdict"]["label"].as_str().unwrap(),
        &doc["verdict"],
    );
    assert_eq!(doc["verdict"]["server"], doc["server_health"]["line"]);
    // Failures are charted: per second over the phase, and on the timeline (a sweep point
    // that measured nothing has no page).
    if !dir.join("report.html").exists() {
        return;
    }
    let svg = std::fs::read_to_string(dir.join("plots/requests_over_time.svg")).unwrap();
    assert!(svg.contains("failed/s"), "{}", mode.name);
    let timeline = std::fs::read_to_string(dir.join("plots/timeline.svg")).unwrap();
    assert!(timeline.contains(">failed<"), "{}", mode.name);
}

/// The labels that may stand for `mode`'s: its own, or one of the client's that out-ranks
/// it (the client is judged on its own evidence, and a host running tests side by side may
/// starve it); never a failing server where the server did not fail most requests.
fn allowed(mode: &Mode) -> Vec<&'static str> {
    let mut ok = vec![mode.label, "distorted", "simulator_stalled"];
    if mode.label == "headroom" {
        ok.extend(["caveat", "limited"]);
    }
    ok
}

fn assert_label(mode: &Mode, got: &str, evidence: &Value) {
    assert!(
        allowed(mode).contains(&got),
        "{}: label {got}, not {}: {evidence}",
        mode.name,
        mode.label
    );
}

/// The folder of each run under a repeats root, in order.
fn repeat_runs(root: &Path) -> Vec<PathBuf> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(root.join("profile_runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    runs.sort();
    runs
}

/// One mode crossed with every run kind.
fn matrix(mode: &Mode) {
    // One run.
    let single = support::artifact_dir(&format!("failures-{}", mode.name));
    let (code, text) = run(mode, &[], &single);
    let want = if mode.none_completes { 2 } else { 0 };
    assert_eq!(code, want, "{}: {text}", mode.name);
    check_run(mode, &single);
    assert!(single.join("report.html").exists(), "{}: {text}", mode.name);
    assert!(text.contains("\nServer: "), "{}: {text}", mode.name);
    assert!(text.contains("[requests_failed]"), "{}: {text}", mode.name);
    if mode.none_completes {
        assert!(text.contains("nothing was measured"), "{text}");
    } else {
        // The last line of the console says the label, and the failures.
        let last = text.lines().rfind(|l| l.starts_with("Verdict: ")).unwrap();
        assert!(last.contains("measured requests failed"), "{last}");
        assert!(
            allowed(mode)
                .iter()
                .any(|l| last.starts_with(&format!("Verdict: {}", l.replace('_', " ")))),
            "{}: {last}",
            mode.name
        );
    }

    // A sweep: each point that measured anything says the same (a dead server's later points
    // measure nothing and are said so).
    let sweep = support::artifact_dir(&format!("failures-sweep-{}", mode.name));
    // The mode's concurrency and twice it, as two points.
    let words: Vec<&str> = mode.flags.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "--concurrency").unwrap();
    let c: u32 = words[at + 1].parse().unwrap();
    let rest: Vec<&str> = [&words[..at], &words[at + 2..]].concat();
    let sweep_mode = Mode {
        flags: Box::leak(rest.join(" ").into_boxed_str()),
        ..*mode
    };
    let points = format!("{c},{}", 2 * c);
    let (code, text) = run(&sweep_mode, &["--concurrency", &points], &sweep);
    assert_eq!(code, want, "{}: {text}", mode.name);
    check_run(mode, &sweep.join(format!("concurrency_{c}")));
    if !mode.none_completes {
        let summary = json(&sweep.join("sweep_summary.json"));
        let rows = summary["points"].as_array().unwrap();
        for r in rows {
            assert_label(mode, r["label"].as_str().unwrap(), r);
        }
        // A failing server's points are marked so, and left out of the knee.
        let failing = mode.label == "server_failing";
        assert!(
            rows.iter().all(|r| r["server_failing"] == failing),
            "{summary}"
        );
        if failing && rows.len() > 1 {
            assert!(
                text.contains("left out of the knee"),
                "{}: {text}",
                mode.name
            );
        }
    }

    // Repeats: every run says it.
    let repeats = support::artifact_dir(&format!("failures-repeats-{}", mode.name));
    let (code, text) = run(mode, &["--num-profile-runs", "2"], &repeats);
    assert_eq!(code, want, "{}: {text}", mode.name);
    let runs = repeat_runs(&repeats);
    assert_eq!(runs.len(), 2, "{runs:?}");
    for r in &runs {
        check_run(mode, r);
    }

    // `compare` against a healthy run: the sources' labels, and no change called significant
    // where the point cannot be trusted.
    if !mode.none_completes {
        let healthy = support::artifact_dir(&format!("failures-healthy-{}", mode.name));
        let clean = Mode {
            sim: "--ttft 1ms --itl 1ms",
            ..*mode
        };
        let (code, text) = run(&clean, &[], &healthy);
        assert_eq!(code, 0, "{text}");
        let cmp = support::artifact_dir(&format!("failures-compare-{}", mode.name));
        let out = ringperf()
            .arg("compare")
            .args([&healthy, &single])
            .arg("--artifact-dir")
            .arg(&cmp)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{said}");
        let doc = json(&cmp.join("compare.json"));
        for c in doc["comparisons"].as_array().unwrap() {
            let labels: Vec<&str> = (0..2).map(|i| c["labels"][i].as_str().unwrap()).collect();
            assert_label(mode, labels[1], c);
            for l in &labels {
                assert!(said.contains(&l.replace('_', " ")), "{said}");
            }
            let trusted = |l: &str| l == "headroom" || l == "caveat";
            if !trusted(labels[0]) || !trusted(labels[1]) {
                assert!(c["significant"][0].is_null(), "{c}");
            }
        }
    }
}

#[test]
fn a_server_that_stops_answering() {
    let _shared = support::shared();
    matrix(&MODES[0]);
}

#[test]
fn a_404_for_every_request() {
    let _shared = support::shared();
    matrix(&MODES[1]);
}

#[test]
fn a_429_storm_with_retry_after() {
    let _shared = support::shared();
    matrix(&MODES[2]);
}

#[test]
fn timeouts_at_saturation() {
    let _shared = support::shared();
    matrix(&MODES[3]);
}

#[test]
fn every_other_request_a_500() {
    let _shared = support::shared();
    matrix(&MODES[4]);
}

#[test]
fn a_few_500s_are_errors_not_a_failing_server() {
    let _shared = support::shared();
    matrix(&MODES[5]);
}

/// The must-show: a server that stops after 20 requests of an 8 s run at concurrency 4
/// reads its rate over the 8 s, not over the 0.16 s its answers took.
#[test]
fn a_server_that_dies_after_20_requests_reads_its_rate_over_the_run() {
    let _shared = support::shared();
    let dir = support::artifact_dir("failures-dies");
    let mode = Mode {
        name: "dies",
        sim: "--stop-after 20",
        flags: "--concurrency 4 --benchmark-duration 8 --output-tokens-mean 16",
        label: "server_failing",
        state: "stopped",
        none_completes: false,
    };
    let (code, text) = run(&mode, &[], &dir);
    assert_eq!(code, 0, "{text}");
    check_run(&mode, &dir);
    let doc = json(&dir.join("profile_export_ringperf.json"));
    let rate = doc["request_throughput"]["avg"].as_f64().unwrap();
    assert!(rate <= 3.5, "{rate} req/s");
    assert_eq!(
        doc["server_health"]["state"], "stopped",
        "{}",
        doc["server_health"]
    );
    assert!(text.contains("the server stopped answering"), "{text}");
}

/// AIPerf's `--failed-request-threshold`: the run stops once more than that share failed,
/// writes what it measured, and exits 3, saying why on its last lines.
#[test]
fn the_failed_request_threshold_stops_the_run_and_fails_it() {
    let _shared = support::shared();
    let dir = support::artifact_dir("failures-threshold");
    let mode = Mode {
        name: "threshold",
        sim: "--ttft 1ms --itl 1ms --fail-every 2",
        flags: "--concurrency 2 --request-count 2000 --output-tokens-mean 4",
        label: "server_failing",
        state: "failing",
        none_completes: false,
    };
    let (code, text) = run(&mode, &["--failed-request-threshold", "0.2"], &dir);
    assert_eq!(code, 3, "{text}");
    assert!(text.contains("Stopped early: "), "{text}");
    assert!(
        text.contains("gate FAILED: --failed-request-threshold"),
        "{text}"
    );
    let doc = json(&dir.join("profile_export_ringperf.json"));
    let done = doc["request_count"]["avg"].as_f64().unwrap()
        + doc["error_request_count"]["avg"].as_f64().unwrap();
    assert!(done < 2000.0, "it stopped early: {done}");
    assert!(doc["failed_request_threshold_crossed"].is_string(), "{doc}");
    let junit = std::fs::read_to_string(dir.join("gates.junit.xml")).unwrap();
    assert!(junit.contains("failed-request-threshold"), "{junit}");
    // A share is from 0 to 1.
    let out = ringperf()
        .args(["profile", "--failed-request-threshold", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a share from 0 to 1"));
}
