//! What real servers do that the report must say, each with a mock that answers as vLLM or
//! llama.cpp does: usage over several choices, a model name the server ignores, its prompt
//! cache, prompts it counts differently, connections it closes after each stream, and the
//! short advice for outputs that stopped early.

use crate::support::{self, artifact_dir, profile};

/// A streamed response of `words` one-token events naming `model`, whose usage says
/// `usage` output tokens, `prompt` prompt tokens and `cached` of them cached; `close` ends
/// the connection after it (with `Connection: close`).
fn stream(
    model: &str,
    words: usize,
    usage: usize,
    prompt: usize,
    cached: Option<usize>,
    close: bool,
) -> Vec<u8> {
    let mut events = String::new();
    for _ in 0..words {
        events.push_str(&format!(
            "data: {{\"model\":\"{model}\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" the\"}}}}]}}\n\n"
        ));
    }
    let details = cached.map_or(String::new(), |c| {
        format!(",\"prompt_tokens_details\":{{\"cached_tokens\":{c}}}")
    });
    events.push_str(&format!(
        "data: {{\"model\":\"{model}\",\"choices\":[],\"usage\":{{\"prompt_tokens\":{prompt},\"completion_tokens\":{usage}{details}}}}}\n\ndata: [DONE]\n\n"
    ));
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{}Content-Length: {}\r\n\r\n{events}",
        if close { "Connection: close\r\n" } else { "" },
        events.len()
    )
    .into_bytes()
}

fn run(name: &str, reply: Vec<u8>, close: bool, flags: &str) -> ringperf::app::ProfileResult {
    let server = support::fake_server(move |_, _| (reply.clone(), close));
    profile(
        &format!(
            "--url http://{} --no-preflight --streaming --request-count 16 {flags}",
            server.addr
        ),
        &artifact_dir(name),
    )
    .expect("the run completes")
}

fn warned<'a>(
    res: &'a ringperf::app::ProfileResult,
    what: &str,
) -> Option<&'a ringperf::warning::Warning> {
    res.report.warnings.iter().find(|w| w.contains(what))
}

#[test]
fn several_choices_are_judged_as_each_server_counts_them() {
    let _shared = support::shared();
    // vLLM: usage counts both choices of n = 2 (2 × 8 tokens): on target, nothing to say.
    let res = run(
        "real-n2-vllm",
        stream("m", 16, 16, 5, None, false),
        false,
        "-m m --output-tokens-mean 8 --extra-inputs n:2",
    );
    assert!(
        warned(&res, "off the requested max_tokens").is_none(),
        "{:?}",
        res.report.warnings
    );
    assert!(warned(&res, "counted the tokens of one").is_none());
    // llama.cpp: usage counts one choice: said, not taken for a server that stopped early.
    let res = run(
        "real-n2-llamacpp",
        stream("m", 8, 8, 5, None, false),
        false,
        "-m m --output-tokens-mean 8 --extra-inputs n:2",
    );
    let w = warned(&res, "counted the tokens of one").expect("said");
    assert!(
        w.starts_with("16 of 16 requests asked for n = 2 choices"),
        "{w}"
    );
    assert!(warned(&res, "off the requested max_tokens").is_none());
}

#[test]
fn outputs_that_stop_early_get_whole_advice() {
    let _shared = support::shared();
    let res = run(
        "real-short-outputs",
        stream("m", 4, 4, 5, None, false),
        false,
        "-m m --output-tokens-mean 64 --output-tokens-mean-deterministic",
    );
    let w = warned(&res, "off the requested max_tokens").expect("said");
    assert!(w.ends_with("may make it run to max_tokens"), "{w}");
}

#[test]
fn a_server_that_ignores_the_model_name_is_named_in_the_title() {
    let _shared = support::shared();
    // llama.cpp answers as its one model whatever -m says; no preflight to catch it first.
    let res = run(
        "real-model-name",
        stream("qwen3-0.6b-q8.gguf", 8, 8, 5, None, false),
        false,
        "-m Qwen/Qwen3-0.6B",
    );
    let w = warned(&res, "answered as model").expect("said");
    assert!(
        w.contains("\"qwen3-0.6b-q8.gguf\", not \"Qwen/Qwen3-0.6B\""),
        "{w}"
    );
    assert!(
        res.console
            .contains("LLM Metrics | qwen3-0.6b-q8.gguf (asked: Qwen/Qwen3-0.6B)"),
        "{}",
        res.console
    );
    // The same name: nothing to say.
    let res = run(
        "real-model-same",
        stream("m", 8, 8, 5, None, false),
        false,
        "-m m",
    );
    assert!(warned(&res, "answered as model").is_none());
}

#[test]
fn the_servers_prompt_cache_is_reported_and_its_cause_named() {
    let _shared = support::shared();
    // 61 of 100 prompt tokens cached, as llama.cpp reports in usage; the run sends its 4
    // distinct prompts 4 times each.
    let res = run(
        "real-prompt-cache",
        stream("m", 8, 8, 100, Some(61), false),
        false,
        "-m m --num-dataset-entries 4 --synthetic-input-tokens-mean 100",
    );
    assert_eq!(res.report.prompt_cache, Some((16 * 61, 1600)));
    assert!(res
        .console
        .contains("Server prompt cache: 976 of 1600 prompt tokens (61%)"));
    let w = warned(&res, "prefix-cache hit rate was 61%").expect("said");
    assert!(
        w.contains("this run sent its 4 distinct prompts 4.0 times each"),
        "{w}"
    );
}

#[test]
fn a_prompt_the_server_counts_otherwise_is_said() {
    let _shared = support::shared();
    // 100 tokens by ringperf's tokenizer, 80 by the server's: a tokenizer that is not the
    // model's.
    let res = run(
        "real-isl",
        stream("m", 8, 8, 80, None, false),
        false,
        "-m m --synthetic-input-tokens-mean 100",
    );
    let w = warned(&res, "prompt tokens per request").expect("said");
    assert!(w.contains("counted 80") && w.contains("counted 100"), "{w}");
    // A chat template's few tokens more are no mismatch.
    let res = run(
        "real-isl-template",
        stream("m", 8, 8, 109, None, false),
        false,
        "-m m --synthetic-input-tokens-mean 100",
    );
    assert!(warned(&res, "prompt tokens per request").is_none());
}

#[test]
fn connections_the_server_closes_after_each_stream_are_counted() {
    let _shared = support::shared();
    let res = run(
        "real-close",
        stream("m", 8, 8, 5, None, true),
        true,
        "-m m --concurrency 2",
    );
    assert_eq!(res.report.completed, 16);
    let w = warned(&res, "closed its connection after a response").expect("said");
    // The first request on each of the 2 places opened its connection anyway.
    assert!(w.contains("14 time(s) in 16 requests"), "{w}");
    let res = run(
        "real-keep",
        stream("m", 8, 8, 5, None, false),
        false,
        "-m m --concurrency 2",
    );
    assert!(warned(&res, "closed its connection").is_none());
}
