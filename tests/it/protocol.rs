//! Real server captures (tests/data/captures, recorded from vLLM and llama.cpp) decoded whole
//! and at every byte split: the events, text, token counts and usage must not depend on how
//! the network cut the bytes. An independent oracle (serde_json over the raw `data:` lines)
//! says what the answer must be.

use crate::support;
use std::path::PathBuf;

use ringperf::internals::exchange::{Exchange, Scratch};
use ringperf::record::{Outcome, Phase, Record};

fn capture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/captures")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// What a decoded response came to, without timestamps.
#[derive(Debug, PartialEq)]
struct Seen {
    outcome: Outcome,
    content_events: usize,
    text: String,
    osl: Option<u64>,
    server_isl: Option<u64>,
    finish: Option<String>,
    done: bool,
    keep_alive: bool,
}

/// Feeds `pieces` in order, each stamped with its index, as the connection driver does
/// (unconsumed bytes are kept and fed again with the next piece); EOF at the end. Request 1:
/// not one whose text is kept for the tokenizer check when the server reports usage.
fn decode(pieces: &[&[u8]]) -> (Seen, Record) {
    decode_as(1, pieces)
}

/// [`decode`] as request `id`.
fn decode_as(id: u64, pieces: &[&[u8]]) -> (Seen, Record) {
    decode_on(&mut Scratch::default(), id, pieces)
}

/// [`decode_as`] with the shard's `scratch`, as kept from request to request.
fn decode_on(scratch: &mut Scratch, id: u64, pieces: &[&[u8]]) -> (Seen, Record) {
    let mut ex = Exchange::default();
    let mut rec = Record::new(id, 0, Phase::Profiling, 0, Some(0));
    let mut pending: Vec<u8> = Vec::new();
    for (i, p) in pieces.iter().enumerate() {
        if ex.is_done() {
            break;
        }
        pending.extend_from_slice(p);
        let used = ex.feed(&pending, i as u64 + 1, &mut rec, scratch);
        pending.drain(..used);
    }
    if !ex.is_done() {
        ex.eof(pieces.len() as u64 + 1, &mut rec, scratch);
    }
    let events = rec.chunk_gaps_ns.len() + usize::from(rec.first_content_ns.is_some());
    (
        Seen {
            outcome: rec.outcome,
            content_events: events,
            text: rec.text.clone(),
            osl: rec.osl,
            server_isl: rec.server_isl,
            finish: rec.finish_reason.as_deref().map(str::to_string),
            done: ex.is_done(),
            keep_alive: ex.keep_alive(),
        },
        rec,
    )
}

/// Independent count: every `data: {json}` line of the raw capture, parsed with serde_json.
fn oracle(raw: &[u8]) -> (usize, String, Option<u64>) {
    let text = String::from_utf8_lossy(raw);
    let (mut events, mut all, mut usage) = (0, String::new(), None);
    for line in text.lines() {
        let Some(json) = line.strip_prefix("data: ") else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
            continue;
        };
        let c = &v["choices"][0];
        let piece: String = [
            c["delta"]["reasoning_content"].as_str(),
            c["delta"]["content"].as_str(),
            c["text"].as_str(),
        ]
        .iter()
        .flatten()
        .copied()
        .collect();
        if !piece.is_empty() {
            events += 1;
            all.push_str(&piece);
        }
        if let Some(u) = v["usage"]["completion_tokens"].as_u64() {
            usage = Some(u);
        }
    }
    (events, all, usage)
}

fn with_head(head: &str, body: &[u8]) -> Vec<u8> {
    let mut v = head.as_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

/// Whole, at every single split, and one byte at a time: all the same. The splits share one
/// scratch, as a shard's responses do (making a new one for each split, its histogram above
/// all, took a fifth of the time).
fn check_every_split(raw: &[u8]) -> Seen {
    let (whole, _) = decode(&[raw]);
    let mut scratch = Scratch::default();
    for cut in 0..=raw.len() {
        let (split, _) = decode_on(&mut scratch, 1, &[&raw[..cut], &raw[cut..]]);
        assert_eq!(split, whole, "differs when cut at byte {cut}");
    }
    let bytes: Vec<&[u8]> = raw.chunks(1).collect();
    let (one_by_one, rec) = decode(&bytes);
    assert_eq!(one_by_one, whole, "differs when fed one byte at a time");
    // One byte per read: every content event is in its own read, so no gap is zero.
    assert!(rec.chunk_gaps_ns.iter().all(|g| *g > 0));
    whole
}

fn streamed(name: &str, osl: u64, isl: Option<u64>, keep_alive: bool) {
    let raw = capture(name);
    let seen = check_every_split(&raw);
    let (events, text, usage) = oracle(&raw);
    assert_eq!(seen.outcome, Outcome::Ok, "{name}");
    assert!(seen.done);
    assert_eq!(seen.content_events, events, "{name}: content events");
    assert!(events > 0);
    assert_eq!(seen.osl, Some(osl), "{name}");
    assert_eq!(usage, Some(osl));
    assert_eq!(seen.server_isl, isl, "{name}");
    assert!(seen.finish.is_some(), "{name}: finish_reason");
    assert_eq!(seen.keep_alive, keep_alive, "{name}");
    // Text is kept only for the tokenizer cross-check sample: not for request 1, whose
    // length the server reported; in full for request 0, which is sampled.
    assert_eq!(seen.text, "", "{name}");
    assert_eq!(decode_as(0, &[&raw]).0.text, text, "{name}");
}

/// A shard's scratch (the JSON parser's memory, the text buffers of finished requests) serves
/// one response after another: nothing of one reaches the next, whatever the order.
#[test]
fn one_scratch_serves_many_responses_and_carries_nothing_over() {
    let _shared = support::shared();
    let names = [
        "vllm/chat-stream.http",
        "llamacpp/completions-stream.http",
        "vllm/completions-stream.http",
        "llamacpp/chat-stream.http",
    ];
    let mut scratch = Scratch::default();
    for round in 0..2 {
        for name in names {
            let raw = capture(name);
            // Request 1's text is dropped (the server counted its tokens), request 16's kept
            // for the tokenizer check: it must be this response's text alone.
            for id in [1, 16, 1] {
                let bytes: Vec<&[u8]> = raw.chunks(7 + round).collect();
                let (shared, _) = decode_on(&mut scratch, id, &bytes);
                assert_eq!(shared, decode_as(id, &[&raw]).0, "{name}, request {id}");
            }
            assert_eq!(decode_on(&mut scratch, 16, &[&raw]).0.text, oracle(&raw).1);
        }
    }
}

#[test]
fn a_read_stamped_before_the_previous_one_gives_a_zero_gap_not_a_wrap() {
    let _shared = support::shared();
    let raw = capture("vllm/chat-stream.http");
    // Every byte its own read, stamped 1,000 ns earlier than the one before.
    let mut ex = Exchange::default();
    let mut scratch = Scratch::default();
    let mut rec = Record::new(1, 0, Phase::Profiling, 0, Some(0));
    let mut pending = Vec::new();
    for (i, b) in raw.iter().enumerate() {
        pending.push(*b);
        let t = 10_000_000 - 1_000 * i as u64;
        let used = ex.feed(&pending, t, &mut rec, &mut scratch);
        pending.drain(..used);
    }
    assert_eq!(rec.outcome, ringperf::record::Outcome::Ok);
    assert_eq!(rec.osl, Some(16));
    assert!(!rec.chunk_gaps_ns.is_empty());
    assert!(
        rec.chunk_gaps_ns.iter().all(|g| *g == 0),
        "{:?}",
        rec.chunk_gaps_ns
    );
    assert!(rec.last_content_ns >= rec.first_content_ns);
}

#[test]
fn vllm_chat_stream() {
    let _shared = support::shared();
    streamed("vllm/chat-stream.http", 16, Some(9), true);
}

#[test]
fn vllm_completions_stream() {
    let _shared = support::shared();
    streamed("vllm/completions-stream.http", 16, Some(1), true);
}

#[test]
fn llamacpp_chat_stream_role_and_token_share_a_chunk() {
    let _shared = support::shared();
    streamed("llamacpp/chat-stream.http", 16, Some(9), true);
}

#[test]
fn llamacpp_completions_stream_usage_in_final_chunk() {
    let _shared = support::shared();
    streamed("llamacpp/completions-stream.http", 16, Some(1), true);
}

#[test]
fn llamacpp_keepalive_pings_are_comments_not_events() {
    let _shared = support::shared();
    let body = capture("llamacpp/completions-stream-with-sse-ping.chunked");
    let raw = with_head(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
        &body,
    );
    let seen = check_every_split(&raw);
    let (events, _, usage) = oracle(&body);
    assert_eq!(seen.outcome, Outcome::Ok);
    assert_eq!(seen.content_events, events);
    assert_eq!(seen.osl, usage);
    // The pings are really there, and were skipped as comments.
    assert!(String::from_utf8_lossy(&body)
        .lines()
        .any(|l| l.starts_with(':')));
}

#[test]
fn vllm_ignore_eos_role_and_usage_chunks_are_not_content() {
    let _shared = support::shared();
    let body = capture("vllm/chat-stream-ignore-eos-64.sse");
    // A de-chunked body: framed by connection close.
    let raw = with_head(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n",
        &body,
    );
    let seen = check_every_split(&raw);
    let (events, _, usage) = oracle(&body);
    assert_eq!(usage, Some(64));
    assert_eq!(seen.osl, Some(64));
    assert_eq!(seen.content_events, events);
    let data_lines = String::from_utf8_lossy(&body)
        .lines()
        .filter(|l| l.starts_with("data: {"))
        .count();
    // 66 JSON events: the role chunk (empty content), 64 tokens, the usage-only chunk.
    assert_eq!((data_lines, events), (66, 64));
    assert!(!seen.keep_alive, "read-until-close body");
}

fn whole_body(name: &str) -> Seen {
    let raw = capture(name);
    check_every_split(&raw)
}

#[test]
fn non_streamed_responses() {
    let _shared = support::shared();
    for name in [
        "vllm/chat-nonstream.http",
        "vllm/completions-nonstream.http",
        "llamacpp/chat-nonstream.http",
    ] {
        let seen = whole_body(name);
        assert_eq!(seen.outcome, Outcome::Ok, "{name}");
        assert!(seen.osl.is_some(), "{name}: usage");
        assert_eq!(seen.content_events, 0, "{name}: no TTFT without streaming");
    }
}

#[test]
fn error_responses_keep_status_and_server_message() {
    let _shared = support::shared();
    let cases = [
        ("vllm/error-401.http", 401, "Unauthorized"),
        ("vllm/error-bad-model.http", 404, "does not exist"),
        ("vllm/error-bad-json.http", 400, ""),
        ("llamacpp/error-bad-json.http", 500, "parse error"),
    ];
    for (name, status, text) in cases {
        let raw = capture(name);
        let seen = check_every_split(&raw);
        assert_eq!(seen.outcome, Outcome::HttpStatus(status), "{name}");
        let (_, rec) = decode(&[&raw]);
        assert!(
            rec.error.as_deref().unwrap_or("").contains(text),
            "{name}: {:?}",
            rec.error
        );
    }
    // llama.cpp closes after its 500: the connection is not reused.
    assert!(!whole_body("llamacpp/error-bad-json.http").keep_alive);
}

#[test]
fn truncated_stream_is_closed_early_not_ok() {
    let _shared = support::shared();
    let raw = capture("vllm/chat-stream.http");
    for cut in [raw.len() / 3, raw.len() / 2, raw.len() - 10] {
        let (seen, rec) = decode(&[&raw[..cut]]);
        assert_eq!(seen.outcome, Outcome::ClosedEarly, "cut {cut}");
        assert!(rec.error.is_some());
    }
}

#[test]
fn stream_error_event_is_counted_as_server_error() {
    let _shared = support::shared();
    let body = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n\
                data: {\"error\":{\"message\":\"out of memory\",\"code\":500}}\n\n\
                data: [DONE]\n\n";
    let raw = with_head(
        &format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n",
            body.len()
        ),
        body.as_bytes(),
    );
    let seen = check_every_split(&raw);
    assert_eq!(seen.outcome, Outcome::ServerError);
}

#[test]
fn garbage_after_a_response_closes_the_connection_and_blames_no_one() {
    let _shared = support::shared();
    let mut raw = capture("vllm/chat-stream.http");
    let whole = decode(&[&raw]).0;
    assert!(whole.keep_alive && whole.outcome == Outcome::Ok);
    raw.extend_from_slice(b"HTTP/1.1 200 OK\r\nX: unasked\r\n\r\n");
    let (seen, _) = decode(&[&raw]);
    assert_eq!(seen.outcome, Outcome::Ok, "the response itself was fine");
    assert!(
        !seen.keep_alive,
        "what follows it must not reach the next request"
    );
}

#[test]
fn compressed_and_html_error_responses_say_what_happened_in_one_line() {
    let _shared = support::shared();
    let gz = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\n\x1f\x8b\x08\x00";
    let (seen, rec) = decode(&[gz]);
    assert_eq!(seen.outcome, Outcome::BadHttp);
    let e = rec.error.unwrap();
    assert!(e.contains("Content-Encoding: gzip"), "{e}");
    assert!(!seen.keep_alive);
    let html = "<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n<center><h1>503</h1></center>\r\n</body>\r\n</html>\r\n";
    let raw = format!(
        "HTTP/1.1 503 Service Temporarily Unavailable\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n{html}",
        html.len()
    );
    let (seen, rec) = decode(&[raw.as_bytes()]);
    assert_eq!(seen.outcome, Outcome::HttpStatus(503));
    let e = rec.error.unwrap();
    assert!(!e.contains('\n') && !e.contains('\r'), "{e:?}");
    assert!(e.starts_with("<html> <head><title>503 Service"), "{e:?}");
}
