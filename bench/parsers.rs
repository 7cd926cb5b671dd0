//! Protocol layers in nanoseconds per event, over the real vLLM chat capture, and what the
//! live line costs (per finished request on a shard, and per redraw on the main thread).
//!
//!     cargo bench --bench parsers
//!
//! Each figure is the median of 15 runs of decoding the whole response many times.

use std::time::Instant;

use ringperf::internals::exchange::{Exchange, Scratch};
use ringperf::internals::http::chunked;
use ringperf::internals::sse::Framer;
use ringperf::record::{Phase, Record};

fn capture() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/captures/vllm/chat-stream.http"
    ))
    .unwrap()
}

fn median_ns_per(events: usize, mut f: impl FnMut()) -> f64 {
    let reps = 2_000;
    let mut runs: Vec<f64> = (0..15)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            t.elapsed().as_nanos() as f64 / (reps * events) as f64
        })
        .collect();
    runs.sort_by(|a, b| a.total_cmp(b));
    runs[runs.len() / 2]
}

fn main() {
    let raw = capture();
    let body_at = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let chunked_body = &raw[body_at..];
    let mut sse = Vec::new();
    chunked::Decoder::new()
        .decode(chunked_body, &mut |d| sse.extend_from_slice(d))
        .unwrap();
    let mut events: Vec<Vec<u8>> = Vec::new();
    Framer::new()
        .feed(&sse, &mut |e| events.push(e.data.to_vec()))
        .unwrap();
    let n = events.len();
    println!("vllm/chat-stream.http: {} bytes, {n} events", raw.len());

    let t = median_ns_per(n, || {
        let mut d = chunked::Decoder::new();
        let mut total = 0;
        d.decode(std::hint::black_box(chunked_body), &mut |x| {
            total += x.len()
        })
        .unwrap();
        std::hint::black_box(total);
    });
    println!("{:<40} {t:>8.1} ns/event", "chunked decoding");

    let mut framer = Framer::new();
    let t = median_ns_per(n, || {
        framer.reset();
        let mut k = 0;
        framer
            .feed(std::hint::black_box(&sse), &mut |_| k += 1)
            .unwrap();
        std::hint::black_box(k);
    });
    println!("{:<40} {t:>8.1} ns/event", "SSE framing");

    // As the response path decodes: the event where it lies, copied only when it must be.
    let mut bufs = ringperf::internals::api::openai::Json::default();
    let mut copy = Vec::new();
    let t = median_ns_per(n, || {
        for e in &events {
            if e.as_slice() != b"[DONE]" {
                let p = ringperf::internals::api::openai::decode_from(e, &mut copy, &mut bufs);
                std::hint::black_box(p.unwrap());
            }
        }
    });
    println!("{:<40} {t:>8.1} ns/event", "OpenAI event decoding");

    let mut ex = Exchange::default();
    let mut scratch = Scratch::default();
    let t = median_ns_per(n, || {
        ex.reset();
        let mut rec = Record::new(1, 0, Phase::Profiling, 0, Some(0));
        ex.feed(std::hint::black_box(&raw), 1, &mut rec, &mut scratch);
        std::hint::black_box(rec.osl);
    });
    println!("{:<40} {t:>8.1} ns/event", "whole response (head → record)");

    // The live line: two counters per finished request on the shard, and once a second a
    // merge of every shard's buckets into p50/p99 on the main thread.
    let live = ringperf::internals::stats::LiveBuckets::default();
    let mut v = 1u64;
    let per_request = median_ns_per(1, || {
        v = v.wrapping_mul(6364136223846793005).wrapping_add(1);
        live.record(std::hint::black_box(v >> 40));
        live.record(std::hint::black_box(v >> 44));
    });
    println!(
        "{:<40} {per_request:>8.1} ns/request",
        "live line: record TTFT and ITL"
    );
    let shards: Vec<ringperf::internals::stats::LiveBuckets> =
        (0..16).map(|_| Default::default()).collect();
    let t = std::time::Instant::now();
    let lines = 200;
    for _ in 0..lines {
        let mut all = vec![0u64; 256];
        for s in &shards {
            for (a, c) in all.iter_mut().zip(s.snapshot()) {
                *a += c;
            }
        }
        for p in [50.0, 99.0] {
            std::hint::black_box(ringperf::internals::stats::LiveBuckets::quantile(&all, p));
        }
    }
    // Two histograms (TTFT and ITL) per line.
    let per_line = 2.0 * t.elapsed().as_nanos() as f64 / lines as f64;
    println!(
        "{:<40} {:>8.1} µs/line",
        "live line: merge 16 shards",
        per_line / 1e3
    );
    // At 100,000 requests/s and a line a second: the share of one CPU.
    let share = (100_000.0 * per_request + per_line) / 1e9;
    println!(
        "{:<40} {:>8.3} % of one CPU",
        "live line at 100k requests/s",
        share * 100.0
    );
}
