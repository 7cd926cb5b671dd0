//! A stream still going at the request timeout, cut there: the cut's time is checked.

use crate::support::{self, artifact_dir, profile, sim};
use std::time::{Duration, Instant};

#[test]
fn a_stream_still_going_at_the_request_timeout_is_cut_there() {
    let _alone = support::alone();
    // 100 tokens 40 ms apart: 4 s of events, each one well inside the timeout, the whole
    // stream far past it. The short requests end well before it.
    let s = sim("--ttft 5ms --itl 40ms");
    let dir = artifact_dir("faults-timeout-stream");
    let t = Instant::now();
    let res = profile(
        &format!(
            "--url http://{} --no-preflight -m ringperf-sim --streaming --concurrency 4 --request-count 8 \
             --output-tokens-mean 100 --request-timeout 600ms --shards 1",
            s.addr
        ),
        &dir,
    );
    let err = res.err().expect("every request timed out").to_string();
    assert!(err.contains("request_timeout (8)"), "{err}");
    // Two rounds of 600 ms, not two of 4 s (the rest is start-up: with other tests beside
    // it on 2 cores, it once took 3.27 s in all).
    assert!(
        t.elapsed() < Duration::from_secs(6),
        "took {:?}",
        t.elapsed()
    );
    let lines = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    let mut n = 0;
    for line in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let m = &v["metadata"];
        assert_eq!(m["outcome"], "request_timeout", "{line}");
        // Cut by the watcher: at the deadline, within its tick and some scheduling slack. The
        // deadline runs from when the shard took the request up, after it fell due and before
        // it opened its connection and the kernel's send stamp (a loaded host put 0.26 ms
        // between the two on a kept-alive connection); the first requests, sent at the start,
        // have no due time: for them, their connection's opening and 1 ms before the stamp.
        let ns = |k: &str| m[k].as_u64();
        let (end, start) = (ns("end_ns").unwrap(), ns("start_ns").unwrap());
        let opening_ms = m["http"]["http_req_connecting"]
            .as_f64()
            .expect("a response began");
        let opening = (opening_ms * 1e6) as u64;
        let taken_up = ns("due_ns").unwrap_or(start - opening - 1_000_000);
        let (from_due, from_send) = (
            end.saturating_sub(taken_up) as f64 / 1e6,
            (end - start) as f64 / 1e6,
        );
        assert!(
            from_due >= 600.0 && from_send < 800.0,
            "{from_due} ms, {from_send} ms: {line}"
        );
        // It had been streaming: the cut came mid-stream, not before the first token.
        assert!(m["first_content_ns"].as_u64().is_some(), "{line}");
        n += 1;
    }
    assert_eq!(n, 8);
}
