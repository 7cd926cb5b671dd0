//! Where the time goes: the server's own account of each request, from its phase histograms
//! on `/metrics` and its OTLP spans joined by `X-Request-ID`, against the simulator, whose
//! timings are known.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::support;

pub(crate) fn run(argv: &[&str]) -> ringperf::app::ProfileResult {
    ringperf::app::profile(
        &support::profile_args(argv),
        Arc::new(AtomicBool::new(false)),
        false,
    )
    .expect("the run")
}

pub(crate) fn lines(dir: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("profile_export.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn spans_in_otlp_json_from_a_server_apart_are_joined_and_missing_ones_counted() {
    let _shared = support::shared();
    // A simulator of its own exports JSON to the port the run will listen on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let s = support::sim(&format!(
        "--ttft 5ms --itl 1ms --otlp-traces-endpoint http://127.0.0.1:{port} \
         --otlp-traces-protocol http/json"
    ));
    let url = format!("http://{}", s.addr);
    let addr = format!("127.0.0.1:{port}");
    let dir = support::artifact_dir("traces-json");
    let r = run(&[
        "--url",
        &url,
        "--model",
        "ringperf-sim",
        "--server-traces",
        &addr,
        "--streaming",
        "--concurrency",
        "4",
        "--request-count",
        "12",
        "--output-tokens-mean",
        "4",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ]);
    let t = r.report.server_traces.as_ref().unwrap();
    assert_eq!((t.completed, t.joined), (12, 12), "{}", r.console);
    assert!(t.exports > 0);

    // A server that sends no spans: the run waits its bounded time and counts every request
    // without one; none is a zero.
    let quiet = support::sim("--ttft 5ms --itl 1ms");
    let url = format!("http://{}", quiet.addr);
    let dir = support::artifact_dir("traces-none");
    let started = std::time::Instant::now();
    let r = run(&[
        "--url",
        &url,
        "--model",
        "ringperf-sim",
        "--server-traces",
        "127.0.0.1:0",
        "--server-traces-wait",
        "300ms",
        "--streaming",
        "--concurrency",
        "2",
        "--request-count",
        "4",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    let t = r.report.server_traces.as_ref().unwrap();
    assert_eq!((t.completed, t.joined, t.exports), (4, 0, 0));
    assert!(t.waited_ns >= 300_000_000, "{}", t.waited_ns);
    assert!(
        r.console.contains("4 request(s) have no span"),
        "{}",
        r.console
    );
    assert!(r.console.contains("no export reached"), "{}", r.console);
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("profile_export_ringperf.json")).unwrap())
            .unwrap();
    assert_eq!(doc["server_traces"]["without_span"], 4);
    assert!(doc.get("server_queue_time").is_none(), "no zeros: {doc}");
    for l in lines(&dir) {
        assert!(l["metadata"]["server_phases"].is_null(), "{l}");
    }
}
