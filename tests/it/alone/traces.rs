//! The server's phases of every request, timed by the simulator.

use crate::support;
use crate::traces::{lines, run};

#[test]
fn every_requests_server_phases_are_the_simulators_timings() {
    let _alone = support::alone();
    // 8 streams over 4 batch places: half of the requests wait in the queue for a place
    // (about one request's time, 20 + 9 × 4 ms), then prefill 20 ms and decode 9 tokens
    // 4 ms apart, as told.
    let dir = support::artifact_dir("traces-sim");
    let r = run(&[
        "--sim=--ttft 20ms --itl 4ms --max-batch 4 --itl-growth 0",
        "--server-traces",
        "127.0.0.1:0",
        "--server-metrics-url",
        "auto",
        "--streaming",
        "--concurrency",
        "8",
        "--request-count",
        "32",
        "--output-tokens-mean",
        "10",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(r.report.completed, 32, "{}", r.console);
    let t = r.report.server_traces.as_ref().expect("traces");
    assert_eq!(
        (t.completed, t.joined, t.refused),
        (32, 32, 0),
        "{}",
        r.console
    );
    let ms = 1_000_000i64;
    // Each request's phases are the simulator's timings, give or take what a loaded host
    // can do to one event: the simulator's timer may wake up to 0.1 ms early, and a host may
    // freeze it for up to 10 ms (past that, ringperf calls it a stall). The median request
    // keeps to the timings within 1 ms, whatever one request met.
    let prefill_ms = 19.8..30.0;
    let median = |mut v: Vec<i64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let mut queued = 0;
    for s in &t.ttft {
        let [queue, prefill, other, outside] = s.parts[..] else {
            panic!("{s:?}")
        };
        // Prefill is the TTFT told; the server's TTFT is its queue and prefill, nothing
        // else; the client saw the first token after the server wrote it.
        assert!(prefill_ms.contains(&(prefill as f64 / 1e6)), "{s:?}");
        assert_eq!(other, 0, "{s:?}");
        assert!((0..5 * ms).contains(&outside), "{s:?}");
        if queue > 10 * ms {
            queued += 1;
        }
    }
    assert!(queued >= 8, "{queued} of 32 queued");
    let prefill = median(t.ttft.iter().map(|s| s.parts[1]).collect());
    assert!(
        (20 * ms - ms / 5..21 * ms).contains(&prefill),
        "median prefill {prefill} ns"
    );
    for s in &t.latency {
        // The simulator's tokens keep to deadlines counted from the request's start: a first
        // token late (a loaded host) shortens decode by as much, and prefill and decode
        // together stay 20 + 9 × 4 ms, unless a later token met the freeze.
        let (prefill, decode) = (s.parts[1], s.parts[2]);
        assert!(
            (56 * ms - ms / 5..66 * ms).contains(&(prefill + decode)),
            "{s:?}"
        );
        assert!((26 * ms..46 * ms).contains(&decode), "{s:?}");
        assert!(s.parts[4] >= 0, "{s:?}");
    }
    let decode = median(t.latency.iter().map(|s| s.parts[2]).collect());
    assert!(
        (35 * ms..37 * ms).contains(&decode),
        "median decode {decode} ns"
    );
    // The console, the JSON, the CSV and each request's line say it.
    assert!(r.console.contains("Where the time went"), "{}", r.console);
    assert!(r.console.contains("p99 request"), "{}", r.console);
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("profile_export_ringperf.json")).unwrap())
            .unwrap();
    let tr = &doc["server_traces"];
    assert_eq!(tr["joined"], 32);
    let p99 = &tr["time_to_first_token"]["p99"];
    assert!(p99["queue_ms"].as_f64().unwrap() > 10.0, "{p99}");
    assert!((doc["server_prefill_time"]["p50"].as_f64().unwrap() - 20.0).abs() < 2.0);
    let csv = std::fs::read_to_string(dir.join("profile_export_ringperf.csv")).unwrap();
    assert!(csv.contains("Server Queue Time (ms),"), "{csv}");
    for l in lines(&dir) {
        let p = &l["metadata"]["server_phases"];
        let prefill = p["prefill_ms"].as_f64().expect("a span per request");
        assert!(prefill_ms.contains(&prefill), "{l}");
    }
    // The phase histograms on /metrics: what the 32 requests added, beside the client's.
    let phases = &doc["server_metrics"][0]["phases"];
    assert_eq!(phases["prefill"]["count"], 32.0, "{phases}");
    assert!((phases["prefill"]["mean_ms"].as_f64().unwrap() - 20.0).abs() < 2.0);
    let ttft = &phases["time_to_first_token"];
    let outside = ttft["outside_server_mean_ms"].as_f64().unwrap();
    assert!((0.0..5.0).contains(&outside), "{ttft}");
    assert!(r.console.contains("server phases from"), "{}", r.console);
    // The report shows the split.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Where the time went"));
    assert!(html.contains("Where TTFT went over time"));
}
