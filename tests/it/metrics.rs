//! What the summary says about the per-request values: percentiles by numpy's default method
//! on the exported values, ITL only where there is a second chunk, and a reason next to every
//! figure that would otherwise be a silent zero.

use crate::support::{self, artifact_dir, profile, sim};

/// numpy.percentile's default ("linear"), written out again here so that the test does not
/// share the code it checks: rank (n − 1)·p/100, interpolated between its neighbours.
fn numpy_linear(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = (v.len() - 1) as f64 * p / 100.0;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
}

#[test]
fn percentiles_are_numpys_linear_method_on_the_exported_values() {
    let _shared = support::shared();
    let s = sim("--ttft normal:20ms,6ms --itl normal:2ms,1ms");
    let dir = artifact_dir("metrics-numpy");
    let res = profile(
        &format!(
            "--url http://{} --streaming --concurrency 4 --request-count 41 \
             --output-tokens-mean 7 --output-tokens-stddev 3",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    assert_eq!(res.report.completed, 41);
    assert!(
        res.console.contains("interpolate linearly"),
        "{}",
        res.console
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("profile_export_ringperf.json")).unwrap())
            .unwrap();
    assert!(doc["percentile_method"]
        .as_str()
        .unwrap()
        .starts_with("linear"));
    // Start-up: from the call (in a test; the binary counts from its own start) to the first
    // request sent.
    assert_eq!(doc["startup_s"]["from"], "profile call");
    let startup = doc["startup_s"]["seconds"].as_f64().unwrap();
    assert!(startup > 0.0 && startup < 60.0, "{startup}");
    let mut values: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for line in std::fs::read_to_string(dir.join("profile_export.jsonl"))
        .unwrap()
        .lines()
    {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        if r["metadata"]["benchmark_phase"] != "profiling" {
            continue;
        }
        for (k, m) in r["metrics"].as_object().unwrap() {
            let v = values.entry(k.clone()).or_default();
            match &m["value"] {
                serde_json::Value::Array(a) => v.extend(a.iter().map(|x| x.as_f64().unwrap())),
                x => v.push(x.as_f64().unwrap()),
            }
        }
    }
    let mut checked = 0;
    for tag in [
        "time_to_first_token",
        "time_to_second_token",
        "inter_token_latency",
        "inter_chunk_latency",
        "request_latency",
        "output_sequence_length",
    ] {
        let v = &values[tag];
        for (name, p) in [
            ("p1", 1.0),
            ("p25", 25.0),
            ("p50", 50.0),
            ("p90", 90.0),
            ("p99", 99.0),
        ] {
            let want = numpy_linear(v, p);
            let got = doc[tag][name].as_f64().unwrap();
            assert!(
                (got - want).abs() <= want.abs() * 1e-3,
                "{tag} {name}: {got} vs numpy's {want}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 30);
}

#[test]
fn responses_in_one_chunk_have_no_itl_and_the_report_says_so() {
    let _shared = support::shared();
    // Eight tokens per event and eight asked for: every response is one content event.
    let s = sim("--ttft 2ms --itl 1ms --tokens-per-chunk 8");
    let dir = artifact_dir("metrics-one-chunk");
    let res = profile(
        &format!(
            "--url http://{} --streaming --request-count 6 --output-tokens-mean 8 \
             --output-tokens-mean-deterministic",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!(r.completed, 6);
    assert_eq!(r.metrics.ttft.count(), 6);
    assert_eq!(r.metrics.itl.count(), 0, "ITL would be 0, not a time");
    assert_eq!(r.metrics.per_user.count(), 0);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("6 of 6 streamed responses") && w.contains("one chunk")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn goodput_on_ttft_without_streaming_says_why_it_is_zero() {
    let _shared = support::shared();
    let s = sim("--ttft 1ms --itl 1ms");
    let dir = artifact_dir("metrics-goodput-nostream");
    let res = profile(
        &format!(
            "--url http://{} --request-count 4 --output-tokens-mean 4 --goodput ttft:1000",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!(r.goodput.as_ref().unwrap().goodput, 0.0);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("TTFT was never measured") && w.contains("--streaming")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn embeddings_ignore_an_output_length_and_say_so() {
    let _shared = support::shared();
    let s = sim("--ttft 1ms");
    let args = support::profile_args(&[
        "--url",
        &format!("http://{}", s.addr),
        "--endpoint-type",
        "embeddings",
        "--osl",
        "20",
        "--request-count",
        "5",
    ]);
    let (spec, notes) = args.spec_and_notes().unwrap();
    assert_eq!(spec.workload.osl_mean, None);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("embeddings generate no tokens")),
        "{notes:?}"
    );
    let dir = artifact_dir("metrics-embeddings");
    let res = profile(
        &format!(
            "--url http://{} --endpoint-type embeddings --osl 20 --request-count 5",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    assert_eq!(res.report.completed, 5);
    assert!(
        !res.report
            .warnings
            .iter()
            .any(|w| w.contains("max_tokens") || w.contains("output token")),
        "{:?}",
        res.report.warnings
    );
}

#[test]
fn text_with_a_usage_of_zero_tokens_is_not_a_silent_zero() {
    let _shared = support::shared();
    // Text arrives, and the server's usage says it made no tokens.
    let events = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" world\"}}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":0,",
        "\"total_tokens\":5}}\n\ndata: [DONE]\n\n"
    );
    let reply = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{events}",
        events.len()
    )
    .into_bytes();
    let server = support::fake_server(move |_, _| (reply.clone(), false));
    let dir = artifact_dir("metrics-zero-tokens");
    let res = profile(
        &format!(
            "--url http://{} --no-preflight -m m --streaming --request-count 3",
            server.addr
        ),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!((r.completed, r.output_tokens), (3, 0));
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("3 of 3 successful requests counted no output token")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn the_output_length_warning_gives_advice_that_fits_what_was_sent() {
    let _shared = support::shared();
    let dir = artifact_dir("metrics-osl-advice");
    let warning = |sim_flags: &str, flags: &str| {
        let s = sim(sim_flags);
        let res = profile(
            &format!(
                "--url http://{} --streaming --request-count 12 --output-tokens-mean 40 {flags}",
                s.addr
            ),
            &dir,
        )
        .unwrap();
        res.report
            .warnings
            .iter()
            .find(|w| w.contains("off the requested max_tokens"))
            .map(|w| w.message.clone())
            .unwrap_or_default()
    };
    let eos = "--ttft 1ms --itl 100us --eos-probability 0.2";
    // Nothing asked for exact lengths: the advice is to ask.
    let w = warning(eos, "");
    assert!(w.contains("use --output-tokens-mean-deterministic"), "{w}");
    // min_tokens asked for and honoured: exact lengths, no warning.
    assert_eq!(warning(eos, "--output-tokens-mean-deterministic"), "");
    // min_tokens asked for and ignored (llama.cpp): not the same advice again.
    let w = warning(
        &format!("{eos} --ignore-min-tokens"),
        "--output-tokens-mean-deterministic",
    );
    assert!(
        w.contains("did not honour it") && !w.contains("use --output-tokens-mean-deterministic"),
        "{w}"
    );
}

/// A streamed answer of `words` one-token words whose usage claims `usage` tokens.
fn answer(words: usize, usage: usize) -> Vec<u8> {
    let mut events = String::new();
    for _ in 0..words {
        events.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" the\"}}]}\n\n");
    }
    events.push_str(&format!(
        "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":5,\"completion_tokens\":{usage}}}}}\n\ndata: [DONE]\n\n"
    ));
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{events}",
        events.len()
    )
    .into_bytes()
}

#[test]
fn a_tokenizer_is_not_judged_on_a_few_short_outputs_or_on_several_choices() {
    let _shared = support::shared();
    let dir = artifact_dir("metrics-tokenizer-check");
    let mismatch = |words: usize, usage: usize, flags: &str| {
        let reply = answer(words, usage);
        let server = support::fake_server(move |_, _| (reply.clone(), false));
        let res = profile(
            &format!(
                "--url http://{} --no-preflight -m m --streaming --request-count 64 {flags}",
                server.addr
            ),
            &dir,
        )
        .unwrap();
        res.report
            .warnings
            .iter()
            .any(|w| w.contains("output tokens than the server reports"))
    };
    // Usage 25% above the text's tokens: with enough tokens sampled, the check fires; on
    // four-token outputs (one token off each) it has too little to judge; with n=2 usage
    // counts other text than the one choice read.
    assert!(mismatch(64, 80, ""));
    assert!(!mismatch(64, 64, ""), "the same count: no word");
    assert!(!mismatch(4, 5, ""));
    assert!(!mismatch(64, 80, "--extra-inputs n:2"));
}
