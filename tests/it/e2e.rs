//! End to end over loopback against the real simulator: non-streaming and completions
//! requests, and the live progress line. The timed runs are in `alone::e2e`.

use crate::support::{self, artifact_dir, profile, sim};

#[test]
fn non_streaming_and_completions_and_retokenized_osl() {
    let _shared = support::shared();
    let s = sim("--ttft 2ms --itl 1ms");
    let url = format!("http://{}", s.addr);
    let dir = artifact_dir("e2e-nonstream");
    let res = profile(&format!("--url {url} --endpoint-type completions --concurrency 4 --request-count 16 --output-tokens-mean 12"), &dir)
    .unwrap();
    assert_eq!(res.report.completed, 16);
    assert_eq!(
        res.report.metrics.ttft.count(),
        0,
        "no TTFT without streaming"
    );
    assert_eq!(res.report.output_tokens, 16 * 12);

    // Streaming without usage: OSL comes from re-tokenizing the text, and is still exact.
    let res = profile(&format!("--url {url} --streaming --no-usage --concurrency 4 --request-count 16 --output-tokens-mean 12"), &dir)
    .unwrap();
    assert_eq!(res.report.osl_from_tokenizer, 16);
    assert_eq!(res.report.output_tokens, 16 * 12);
}

#[test]
fn the_live_line_says_the_load_progress_and_ttft_and_itl_so_far() {
    let _shared = support::shared();
    use std::sync::{atomic::Ordering, Arc};
    let mut plan = support::profile_args(&["--concurrency", "8", "--request-count", "100"])
        .plan()
        .unwrap();
    plan.output.title = "concurrency 8 (point 2 of 3)".into();
    let shards: Vec<Arc<ringperf::internals::engine::Progress>> =
        (0..2).map(|_| Arc::new(Default::default())).collect();
    for (i, p) in shards.iter().enumerate() {
        p.done.store(25, Ordering::Relaxed);
        p.in_flight.store(4, Ordering::Relaxed);
        p.errors.store(i as u64, Ordering::Relaxed);
        // TTFT 20 ms on one shard, 40 ms on the other; ITL 5 ms.
        for _ in 0..25 {
            p.ttft_us.record(20_000 * (i as u64 + 1));
            p.itl_us.record(5_000);
        }
    }
    let line = ringperf::internals::engine::progress_line(&shards, &plan, 10_000_000_000, 200);
    for want in [
        "concurrency 8 (point 2 of 3) | ",
        "done 50/100",
        "in flight 8 (8 asked)",
        "errors 1",
        "5.0 req/s",
        "TTFT p50 20.",
        "p99 40.",
        "ITL p50 5.",
        "ETA 10s",
    ] {
        assert!(line.contains(want), "{want:?} not in {line:?}");
    }
    // An 80-column terminal: the count, the errors, TTFT and the ETA stay; the rest goes
    // before anything is cut.
    let line = ringperf::internals::engine::progress_line(&shards, &plan, 10_000_000_000, 79);
    assert!(line.chars().count() <= 79, "{line:?}");
    for want in [
        "done 50/100",
        "errors 1",
        "TTFT p50 20.",
        "p99 40.",
        "ETA 10s",
    ] {
        assert!(line.contains(want), "{want:?} not in {line:?}");
    }
    assert!(
        !line.contains("point 2 of 3") && !line.contains("ITL"),
        "{line:?}"
    );
}
