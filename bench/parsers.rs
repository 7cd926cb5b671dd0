//! Protocol layers in nanoseconds per event, over the real vLLM chat capture.
//!
//!     cargo bench --bench parsers
//!
//! Each figure is the median of 15 runs of decoding the whole response many times.

use std::time::Instant;

use ringperf::exchange::{Exchange, Scratch};
use ringperf::http::chunked;
use ringperf::record::{Phase, Record};
use ringperf::sse::Framer;

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

    let mut bufs = simd_json::Buffers::new(4096);
    let mut scratch_events = events.clone();
    let t = median_ns_per(n, || {
        for (e, src) in scratch_events.iter_mut().zip(&events) {
            e.copy_from_slice(src);
            if e.as_slice() != b"[DONE]" {
                std::hint::black_box(ringperf::api::openai::decode(e, &mut bufs).unwrap());
            }
        }
    });
    println!(
        "{:<40} {t:>8.1} ns/event",
        "OpenAI event decoding (simd-json)"
    );

    let mut ex = Exchange::default();
    let mut scratch = Scratch::default();
    let t = median_ns_per(n, || {
        ex.reset();
        let mut rec = Record::new(1, 0, Phase::Profiling, 0, 0);
        ex.feed(std::hint::black_box(&raw), 1, &mut rec, &mut scratch);
        std::hint::black_box(rec.osl);
    });
    println!("{:<40} {t:>8.1} ns/event", "whole response (head → record)");
}
