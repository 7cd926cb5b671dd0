//! Events read together and their stamps.

use crate::support::{self, artifact_dir, profile, sim};

#[test]
fn events_read_together_carry_one_stamp_and_the_report_says_so() {
    let _alone = support::alone();
    // A server that writes each whole stream at once: every response's events are queued
    // together (taken in one read, or in reads that each fill the buffer), so they all carry
    // the stamp of its newest bytes.
    let body = support::capture("vllm/chat-stream.http");
    let server = support::fake_server(move |_, _| (body.clone(), false));
    let url = format!("http://{}", server.addr);
    let dir = artifact_dir("shared-reads-burst");
    let res = profile(
        &format!(
            "--url {url} --no-preflight -m tiny-qwen3 --streaming --concurrency 2 \
             --request-count 10 --shards 1"
        ),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!(r.completed, 10, "{}", res.console);
    let s = &r.shared;
    assert_eq!(s.first_tokens, 10, "{}", res.console);
    // Per response, every content event but the last carries a later one's stamp.
    assert!(s.of_events > 10);
    assert_eq!(s.events, s.of_events - 10, "{}", res.console);
    // Without the simulator's stamps nothing tells the client's lateness from a server
    // that sends together: TTFT may be overstated by the bound, and the verdict says so.
    let v = &r.health.verdict;
    assert!(
        v.contains("10 of 10 responses (100.0%) got their first token in one read")
            && v.contains("TTFT p50"),
        "{v}"
    );
    assert!(r.health.distorted.is_some() && r.health.limited);
    let jsonl_first = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    assert_eq!(
        jsonl_first
            .matches("\"first_token_overstated_at_most_ms\":")
            .count()
            - jsonl_first
                .matches("\"first_token_overstated_at_most_ms\":null")
                .count(),
        10
    );
    assert!(res.console.contains("carry a later event's arrival stamp"));
    let jsonl = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    assert_eq!(
        jsonl.matches("\"first_token_shared_read\":true").count(),
        10
    );

    // The simulator paces its tokens 20 ms apart: one event per read, nothing to say.
    let s = sim("--ttft 20ms --itl 20ms");
    let url = format!("http://{}", s.addr);
    let res = profile(
        &format!(
            "--url {url} --streaming --concurrency 2 --request-count 10 --output-tokens-mean 8 \
             --shards 1"
        ),
        &artifact_dir("shared-reads-paced"),
    )
    .unwrap();
    let r = &res.report;
    assert_eq!(
        (r.completed, r.shared.first_tokens),
        (10, 0),
        "{}",
        res.console
    );
    assert_eq!(r.shared.of_events, 80);
    assert!(r.shared.events <= 2, "{}", res.console);
    assert!(!r
        .warnings
        .iter()
        .any(|w| w.contains("first token in one read")));
    assert!(!r.health.verdict.contains("first token in one read"));
}
