//! Command lines from the peers' current documentation, run as their users would run them:
//! the program's name replaced by `ringperf`, and only the server's URL, local paths and the
//! scale (request counts, durations, pauses) changed. Each runs against the simulator, and its
//! artifacts must show the load the peer itself would have sent: the request count, the
//! concurrency or the rate and arrival, streaming, and the endpoint. Lines that cannot run
//! here stop at once with one line that says why.
//!
//! Sources: GenAI-Perf (triton-inference-server/perf_analyzer, genai-perf/README.md and
//! genai-perf/docs/, December 2025), AIPerf (ai-dynamo/aiperf README.md and docs/tutorials/,
//! 2026), GuideLLM (vllm-project/guidellm: `guidellm benchmark` in README.md and docs/ at
//! v0.6.1, `guidellm run` in README.md and docs/ on main, August 2026), vLLM
//! (vllm-project/vllm docs/benchmarking/cli.md, September 2026).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{self, artifact_dir, sim};

/// Splits a command line as a shell would for these lines: spaces, single and double quotes,
/// and backslash-newline continuations.
fn shell_words(line: &str) -> Vec<String> {
    let line = line.replace("\\\n", " ");
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (c, quote) {
            ('\'' | '"', None) => {
                quote = Some(c);
                any = true;
            }
            (c, Some(q)) if c == q => quote = None,
            (c, None) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (c, _) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The peer's line as ringperf parses it (its program name replaced by `ringperf`).
fn parse(line: &str) -> Result<ringperf::cli::ProfileArgs, String> {
    let mut words = shell_words(line);
    words[0] = "ringperf".into();
    match ringperf::cli::port::parse(words.into_iter().map(Into::into)) {
        Ok(ringperf::cli::Cli {
            command: ringperf::cli::Command::Profile(p),
        }) => Ok(*p),
        Ok(_) => Err("not a benchmark".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// What a line's run wrote: the run's JSON (a sweep's summary rows instead), its requests,
/// its request bodies.
struct Ran {
    doc: Value,
    records: Vec<Value>,
    inputs: Value,
    dir: PathBuf,
}

/// Runs a line, with its artifacts in `dir` unless it names a folder of its own.
fn run(line: &str, name: &str) -> Ran {
    let mut p = parse(line).unwrap_or_else(|e| panic!("{line}\n{e}"));
    p.output.no_progress = true;
    if p.output.artifact_dir.is_none() {
        p.output.artifact_dir = Some(artifact_dir(name));
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = p.sweep_spec().unwrap_or_else(|e| panic!("{line}\n{e}"));
    if s.is_sweep || s.repeats.runs > 1 {
        let out = ringperf::app::sweep(&p, stop, false).unwrap_or_else(|e| panic!("{line}\n{e}"));
        let summary: Value = serde_json::from_slice(
            &std::fs::read(out.artifact_dir.join("sweep_summary.json")).unwrap(),
        )
        .unwrap();
        return Ran {
            doc: summary,
            records: Vec::new(),
            inputs: Value::Null,
            dir: out.artifact_dir,
        };
    }
    let r = ringperf::app::profile(&p, stop, false).unwrap_or_else(|e| panic!("{line}\n{e}"));
    let read = |f: &str| std::fs::read(r.artifact_dir.join(f)).unwrap();
    let records = String::from_utf8(read("profile_export.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    Ran {
        doc: serde_json::from_slice(&read("profile_export_ringperf.json")).unwrap(),
        records,
        inputs: serde_json::from_slice(&read("inputs.json")).unwrap(),
        dir: r.artifact_dir,
    }
}

/// The load a peer sends for a line.
#[derive(Debug, Clone, Copy)]
struct Want {
    /// Measured requests.
    count: u64,
    /// The cap on requests in flight (`None`: no cap).
    concurrency: Option<u64>,
    /// Open loop: the rate and the arrival pattern.
    rate: Option<(f64, &'static str)>,
    /// Streamed responses.
    streaming: bool,
    /// The request path.
    path: &'static str,
}

const fn closed(count: u64, concurrency: u64, streaming: bool, path: &'static str) -> Want {
    Want {
        count,
        concurrency: Some(concurrency),
        rate: None,
        streaming,
        path,
    }
}

/// Checks a run's artifacts against the load the peer sends.
fn check(line: &str, ran: &Ran, want: Want) {
    let ic = &ran.doc["input_config"];
    let res = &ic["resolved"];
    let got_count = ran.doc["request_count"]["avg"].as_f64().unwrap_or(0.0) as u64;
    assert_eq!(got_count, want.count, "{line}: measured requests");
    assert_eq!(
        res["concurrency"].as_u64(),
        want.concurrency,
        "{line}: the cap on requests in flight"
    );
    match want.rate {
        Some((rate, arrival)) => {
            assert_eq!(ic["load"]["request_rate"].as_f64(), Some(rate), "{line}");
            assert_eq!(ic["load"]["arrival"], arrival, "{line}");
        }
        None => assert!(ic["load"]["request_rate"].is_null(), "{line}: closed loop"),
    }
    assert_eq!(res["streaming"], want.streaming, "{line}: streaming");
    assert_eq!(res["path"], want.path, "{line}: the endpoint");
    let measured = ran
        .records
        .iter()
        .filter(|r| r["metadata"]["benchmark_phase"] == "profiling")
        .count();
    assert_eq!(measured as u64, want.count, "{line}: records");
}

/// The request bodies sent, in order.
fn bodies(ran: &Ran) -> Vec<&Value> {
    ran.inputs["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["payload"].as_array().unwrap())
        .collect()
}

/// The first measured request's start and the last's, in ns.
fn start_spread(ran: &Ran) -> u64 {
    let starts: Vec<u64> = ran
        .records
        .iter()
        .filter(|r| r["metadata"]["benchmark_phase"] == "profiling")
        .map(|r| r["metadata"]["start_ns"].as_u64().unwrap())
        .collect();
    starts.iter().max().unwrap() - starts.iter().min().unwrap()
}

/// The line fails at once with one line that names what it is about.
fn refused(line: &str, says: &str) {
    match parse(line).and_then(|p| p.spec_and_notes().map_err(|e| e.to_string())) {
        Ok(_) => panic!("{line}: ran"),
        Err(e) => {
            assert!(e.contains(says), "{line}: {e}");
            assert!(!e.trim().contains('\n'), "{line}: one line: {e}");
        }
    }
}

/// A folder for a test's data files.
fn data_dir(name: &str) -> PathBuf {
    let d = artifact_dir(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small ShareGPT file.
fn sharegpt(dir: &Path) -> PathBuf {
    let f = dir.join("ShareGPT_V3_unfiltered_cleaned_split.json");
    let convs: Vec<String> = (0..12)
        .map(|i| format!(r#"{{"id": "{i}", "conversations": [{{"from": "human", "value": "Tell me about the number {i} in a few words, please."}}, {{"from": "gpt", "value": "The number {i} is a number between others."}}]}}"#))
        .collect();
    std::fs::write(&f, format!("[{}]", convs.join(","))).unwrap();
    f
}

/// A JSONL file of `n` lines made by `line(i)`.
fn jsonl(dir: &Path, name: &str, n: usize, line: impl Fn(usize) -> String) -> PathBuf {
    let f = dir.join(name);
    std::fs::write(&f, (0..n).map(line).collect::<Vec<_>>().join("\n")).unwrap();
    f
}

/// The embedded tokenizer as a local model folder (a line's `--processor PATH`).
fn tokenizer_dir(dir: &Path) -> PathBuf {
    use std::io::Read;
    let d = dir.join("Qwen2.5-1.5B-Instruct");
    std::fs::create_dir_all(&d).unwrap();
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(
        &std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("src/workload/qwen3/tokenizer.json.gz"),
        )
        .unwrap()[..],
    )
    .read_to_end(&mut json)
    .unwrap();
    std::fs::write(d.join("tokenizer.json"), json).unwrap();
    d
}

#[test]
fn genai_perf_documented_lines_send_genai_perfs_load() {
    let _shared = support::shared();
    let sims: Vec<_> = [
        "gpt2",
        "HuggingFaceH4/zephyr-7b-beta",
        "intfloat/e5-mistral-7b-instruct",
        "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
    ]
    .iter()
    .map(|m| sim(&format!("-m {m} --ttft 1ms --itl 100us")))
    .collect();
    let url = |i: usize| format!("http://{}", sims[i].addr);
    let hostport = |i: usize| sims[i].addr.to_string();
    let data = data_dir("port-gp-data");
    let emb = jsonl(&data, "embeddings.jsonl", 6, |i| {
        format!(r#"{{"text": "What is the number {i}?"}}"#)
    });
    let triton = "/v2/models/gpt2/generate_stream";

    // README.md: the first profile (Triton, TRT-LLM backend; --url added).
    let line = format!(
        "genai-perf profile -m gpt2 --backend tensorrtllm --streaming --url {}",
        url(0)
    );
    let ran = run(&line, "port-gp-readme");
    check(&line, &ran, closed(10, 1, true, triton));
    let b = bodies(&ran);
    assert_eq!(
        (b[0]["max_tokens"].clone(), b[0]["stream"].clone()),
        (256.into(), true.into())
    );

    // README.md: with plots.
    let line = format!(
        "genai-perf profile -m gpt2 --backend tensorrtllm --streaming --concurrency 1 \
         --generate-plots --url {}",
        url(0)
    );
    check(
        &line,
        &run(&line, "port-gp-plots"),
        closed(10, 1, true, triton),
    );

    // docs/tutorial.md: TRT-LLM through Triton (50 + 10 cut to 8 + 2).
    let line = format!(
        "genai-perf profile \\
  -m gpt2 \\
  --backend tensorrtllm \\
  --synthetic-input-tokens-mean 200 \\
  --synthetic-input-tokens-stddev 0 \\
  --output-tokens-mean 100 \\
  --output-tokens-stddev 0 \\
  --output-tokens-mean-deterministic \\
  --streaming \\
  --request-count 8 \\
  --warmup-request-count 2 --url {}",
        url(0)
    );
    let ran = run(&line, "port-gp-trtllm");
    check(&line, &ran, closed(8, 1, true, triton));
    let b = bodies(&ran);
    assert_eq!(
        (b[0]["max_tokens"].clone(), b[0]["min_length"].clone()),
        (100.into(), 100.into())
    );

    // docs/tutorial.md: vLLM through Triton.
    let line = format!(
        "genai-perf profile -m gpt2 --backend vllm --synthetic-input-tokens-mean 200 \
         --synthetic-input-tokens-stddev 0 --output-tokens-mean 100 --output-tokens-stddev 0 \
         --output-tokens-mean-deterministic --streaming --request-count 8 \
         --warmup-request-count 2 --url {}",
        url(0)
    );
    let ran = run(&line, "port-gp-vllm");
    check(&line, &ran, closed(8, 1, true, triton));
    assert_eq!(
        bodies(&ran)[0]["sampling_parameters"],
        r#"{"max_tokens": "100", "min_tokens": "100"}"#
    );
    assert_eq!(ran.doc["output_sequence_length"]["avg"], 100.0);

    // docs/tutorial.md: an OpenAI chat server.
    let line = format!(
        "genai-perf profile -m HuggingFaceH4/zephyr-7b-beta --endpoint-type chat \
         --synthetic-input-tokens-mean 200 --synthetic-input-tokens-stddev 0 \
         --output-tokens-mean 100 --output-tokens-stddev 0 --streaming --request-count 8 \
         --warmup-request-count 2 --url {}",
        url(1)
    );
    check(
        &line,
        &run(&line, "port-gp-chat"),
        closed(8, 1, true, "/v1/chat/completions"),
    );

    // docs/tutorial.md: completions, not streamed.
    let line = format!(
        "genai-perf profile -m gpt2 --endpoint-type completions --synthetic-input-tokens-mean 200 \
         --synthetic-input-tokens-stddev 0 --output-tokens-mean 100 --output-tokens-stddev 0 \
         --request-count 8 --warmup-request-count 2 --url {}",
        url(0)
    );
    check(
        &line,
        &run(&line, "port-gp-completions"),
        closed(8, 1, false, "/v1/completions"),
    );

    // docs/embeddings.md: two inputs a request.
    let line = format!(
        "genai-perf profile -m intfloat/e5-mistral-7b-instruct --endpoint-type embeddings \
         --batch-size-text 2 --url {}",
        url(2)
    );
    let ran = run(&line, "port-gp-emb");
    check(&line, &ran, closed(10, 1, false, "/v1/embeddings"));
    assert_eq!(bodies(&ran)[0]["input"].as_array().map(Vec::len), Some(2));

    // docs/embeddings.md: an extra field.
    let line = format!(
        "genai-perf profile -m intfloat/e5-mistral-7b-instruct --endpoint-type embeddings \
         --extra-inputs user:sample_user --url {}",
        url(2)
    );
    let ran = run(&line, "port-gp-emb-extra");
    check(&line, &ran, closed(10, 1, false, "/v1/embeddings"));
    assert_eq!(bodies(&ran)[0]["user"], "sample_user");

    // docs/goodput.md: objectives with GenAI-Perf's names.
    let line = format!(
        "genai-perf profile -m HuggingFaceH4/zephyr-7b-beta --endpoint-type chat --streaming \
         --request-count 10 --goodput time_to_first_token:75 inter_token_latency:19.75 --url {}",
        url(1)
    );
    let ran = run(&line, "port-gp-goodput");
    check(&line, &ran, closed(10, 1, true, "/v1/chat/completions"));
    assert!(
        ran.doc["goodput"]["avg"].as_f64().is_some(),
        "{}",
        ran.doc["goodput"]
    );

    // docs/goodput.md: a file, a measurement window (1000 ms cut to 200: three of them).
    let line = format!(
        "genai-perf profile -m intfloat/e5-mistral-7b-instruct --endpoint-type embeddings \
         --batch-size-text 2 --input-file {} --measurement-interval 200 --goodput \
         request_latency:22.5 --url {}",
        emb.display(),
        url(2)
    );
    let p = parse(&line).unwrap();
    let (spec, _) = p.spec_and_notes().unwrap();
    assert_eq!(
        spec.load.benchmark_duration_ns,
        Some(600_000_000),
        "three windows"
    );
    assert_eq!(spec.load.request_count, None);
    let ran = run(&line, "port-gp-window");
    assert!(ran.doc["request_count"]["avg"].as_f64() > Some(5.0));

    // docs/multi_turn.md: sessions (10 cut to 4, pauses 1000 ms cut to 10).
    let line = format!(
        "genai-perf profile \\
  -m TinyLlama/TinyLlama-1.1B-Chat-v1.0 \\
  --endpoint-type chat \\
  --num-sessions 4 \\
  --session-concurrency 2 \\
  --session-turns-mean 2 \\
  --session-turns-stddev 0 \\
  --session-turn-delay-mean 10 \\
  --session-turn-delay-stddev 5 \\
  --synthetic-input-tokens-mean 50 \\
  --output-tokens-mean 50 \\
  --num-prefix-prompts 3 \\
  --prefix-prompt-length 15 --url {}",
        url(3)
    );
    let ran = run(&line, "port-gp-sessions");
    assert_eq!(
        ran.doc["request_count"]["avg"], 8.0,
        "4 sessions of 2 turns"
    );
    assert_eq!(ran.doc["input_config"]["resolved"]["concurrency"], 2);

    // docs/dynamo.md: a frontend on another port (scheme-less URL, as written).
    let line = format!(
        "genai-perf profile -m deepseek-ai/DeepSeek-R1-Distill-Llama-8B --endpoint-type chat \
         --synthetic-input-tokens-mean 128 --synthetic-input-tokens-stddev 0 \
         --output-tokens-mean 100 --output-tokens-stddev 0 --url {} --streaming \
         --request-count 10 --warmup-request-count 2",
        hostport(4)
    );
    check(
        &line,
        &run(&line, "port-gp-dynamo"),
        closed(10, 1, true, "/v1/chat/completions"),
    );

    // docs/gpu_telemetry.md: a metrics endpoint scraped (the simulator's).
    let line = format!(
        "genai-perf profile -m gpt2 --endpoint-type chat --server-metrics-urls {}/metrics \
         --verbose --url {}",
        url(0),
        url(0)
    );
    let ran = run(&line, "port-gp-metrics");
    check(&line, &ran, closed(10, 1, false, "/v1/chat/completions"));

    // docs/analyze.md: a concurrency sweep (1:256 cut to 1:4), Triton by default.
    let line = format!(
        "genai-perf analyze -m gpt2 --sweep-type concurrency --sweep-range 1:4 --url {}",
        url(0)
    );
    let ran = run(&line, "port-gp-analyze");
    let rows = ran.doc["points"].as_array().unwrap();
    let levels: Vec<f64> = rows
        .iter()
        .map(|r| r["concurrency"].as_f64().unwrap())
        .collect();
    assert_eq!(levels, vec![1.0, 2.0, 4.0]);
    let csv = std::fs::read_to_string(ran.dir.join("analyze_export_genai_perf.csv")).unwrap();
    assert!(
        csv.starts_with(
            "Config Name,Concurrency,ISL,Num Dataset Entries,p99 Time To First Token (ms)"
        ),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(csv.contains("gpt2_run_config_2,4,"), "{csv}");

    // docs/analyze.md: an input-length sweep.
    let line = format!(
        "genai-perf analyze -m gpt2 --sweep-type input_sequence_length --sweep-list 100,150 --url {}",
        url(0)
    );
    let ran = run(&line, "port-gp-analyze-isl");
    let isl: Vec<f64> = ran.doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["input_sequence_length"].as_f64().unwrap())
        .collect();
    assert_eq!(isl, vec![100.0, 150.0]);

    // docs/lora.md and docs/rankings.md: what ringperf does not send stops at once.
    refused(
        "genai-perf profile -m lora_adapter1 lora_adapter2 lora_adapter3 --tokenizer model_name",
        "one model per run",
    );
    refused(
        "genai-perf profile -m BAAI/bge-reranker-base --endpoint-type rankings --endpoint rerank \
         --input-file synthetic:queries,passages -u localhost:8080 --extra-inputs rankings:tei \
         --synthetic-input-tokens-mean 100 --batch-size-text 2",
        "--endpoint-type rankings",
    );
}

#[test]
fn aiperf_documented_lines_send_aiperfs_load() {
    let _shared = support::shared();
    let qwen = sim("-m Qwen/Qwen3-0.6B --ttft 1ms --itl 50us");
    let yours = sim("-m your-model --ttft 1ms --itl 50us");
    let url = format!("http://{}", qwen.addr);
    let bare = qwen.addr.to_string();
    let your = qwen_url(&yours);
    let chat = "/v1/chat/completions";

    // docs/tutorial.md (64 requests cut to 16).
    let line = format!(
        "aiperf profile \\
    --model Qwen/Qwen3-0.6B \\
    --endpoint-type chat \\
    --endpoint /v1/chat/completions \\
    --streaming \\
    --request-rate 32 \\
    --request-count 16 \\
    --url {bare}"
    );
    let ran = run(&line, "port-ai-tutorial");
    check(
        &line,
        &ran,
        Want {
            count: 16,
            concurrency: None,
            rate: Some((32.0, "poisson")),
            streaming: true,
            path: chat,
        },
    );

    // docs/tutorials/request-rate-concurrency.md: Poisson with a cap (500 cut to 30).
    let line = format!(
        "aiperf profile --model Qwen/Qwen3-0.6B --endpoint-type chat --endpoint /v1/chat/completions \
         --streaming --url {bare} --concurrency 100 --request-rate 200 --request-rate-mode poisson \
         --random-seed 42 --request-count 30 --synthetic-input-tokens-mean 500 --output-tokens-mean 200"
    );
    let ran = run(&line, "port-ai-rate-cap");
    check(
        &line,
        &ran,
        Want {
            count: 30,
            concurrency: Some(100),
            rate: Some((200.0, "poisson")),
            streaming: true,
            path: chat,
        },
    );
    // AIPerf asks chat with max_completion_tokens, unless --use-legacy-max-tokens.
    let b = bodies(&ran);
    assert_eq!(b[0]["max_completion_tokens"], 200, "{}", b[0]);
    assert!(b[0].get("max_tokens").is_none(), "{}", b[0]);
    let legacy = parse(&format!("{line} --use-legacy-max-tokens")).unwrap();
    assert!(
        legacy
            .spec_and_notes()
            .unwrap()
            .0
            .workload
            .legacy_max_tokens
    );

    // The same: constant arrivals (300 cut to 20).
    let line = format!(
        "aiperf profile --model Qwen/Qwen3-0.6B --endpoint-type chat --endpoint /v1/chat/completions \
         --streaming --url {bare} --concurrency 50 --request-rate 50 --request-rate-mode constant \
         --request-count 20 --synthetic-input-tokens-mean 800 --output-tokens-mean 400"
    );
    check(
        &line,
        &run(&line, "port-ai-constant"),
        Want {
            count: 20,
            concurrency: Some(50),
            rate: Some((50.0, "constant")),
            streaming: true,
            path: chat,
        },
    );

    // docs/tutorials/time-based-benchmarking.md (60 s cut to 1 s).
    let line = format!(
        "aiperf profile --model Qwen/Qwen3-0.6B --url {bare} --endpoint-type chat --streaming \
         --concurrency 10 --benchmark-duration 1"
    );
    let ran = run(&line, "port-ai-duration");
    assert_eq!(
        ran.doc["input_config"]["load"]["benchmark_duration_ns"],
        1_000_000_000u64
    );
    assert_eq!(ran.doc["input_config"]["resolved"]["concurrency"], 10);
    assert!(ran.doc["request_count"]["avg"].as_f64() > Some(10.0));

    // The same: a count and a duration, whichever comes first (1000 cut to 10).
    let line = format!(
        "aiperf profile --model your-model --url {your} --endpoint-type chat --streaming \
         --request-rate 20 --benchmark-duration 120 --request-count 10"
    );
    check(
        &line,
        &run(&line, "port-ai-first"),
        Want {
            count: 10,
            concurrency: None,
            rate: Some((20.0, "poisson")),
            streaming: true,
            path: chat,
        },
    );

    // docs/tutorials/arrival-patterns.md: constant, into a folder of its own (60 s cut to 1).
    let out = artifact_dir("port-ai-results-constant");
    let line = format!(
        "aiperf profile --model your-model --url {your} --endpoint-type chat --streaming \
         --request-rate 20 --arrival-pattern constant --benchmark-duration 1 --output-dir {}",
        out.display()
    );
    let ran = run(&line, "unused");
    assert_eq!(ran.dir, out);
    assert_eq!(ran.doc["input_config"]["load"]["arrival"], "constant");
    assert!(ran.doc["request_count"]["avg"].as_f64() >= Some(15.0));

    // The same: bursty gamma arrivals (120 s cut to 1).
    let line = format!(
        "aiperf profile --model your-model --url {your} --endpoint-type chat --streaming \
         --request-rate 20 --arrival-pattern gamma --arrival-smoothness 0.3 --benchmark-duration 1"
    );
    let ran = run(&line, "port-ai-gamma");
    assert_eq!(ran.doc["input_config"]["load"]["arrival"], "gamma");
    assert_eq!(ran.doc["input_config"]["load"]["burstiness"], 0.3);

    // docs/tutorials/multi-turn.md: fixed-length conversations (10 cut to 4).
    let line = format!(
        "aiperf profile --model Qwen/Qwen3-0.6B --endpoint-type chat --endpoint /v1/chat/completions \
         --streaming --url {bare} --conversation-num 4 --conversation-turn-mean 3 \
         --conversation-turn-stddev 0 --synthetic-input-tokens-mean 200 --output-tokens-mean 150 \
         --concurrency 2 --random-seed 42"
    );
    let ran = run(&line, "port-ai-turns");
    assert_eq!(
        ran.doc["request_count"]["avg"], 12.0,
        "4 conversations of 3 turns"
    );

    // The same: pauses between turns (15 cut to 3, 2000 ± 500 ms cut to 20 ± 5).
    let line = format!(
        "aiperf profile --model Qwen/Qwen3-0.6B --endpoint-type chat --endpoint /v1/chat/completions \
         --streaming --url {bare} --conversation-num 3 --conversation-turn-mean 4 \
         --conversation-turn-stddev 1 --conversation-turn-delay-mean 20 \
         --conversation-turn-delay-stddev 5 --synthetic-input-tokens-mean 180 \
         --output-tokens-mean 120 --concurrency 3 --random-seed 42"
    );
    let p = parse(&line).unwrap();
    let (spec, _) = p.spec_and_notes().unwrap();
    assert_eq!(
        (
            spec.workload.session_turn_delay_ns,
            spec.workload.session_turn_delay_stddev_ns
        ),
        (20_000_000, 5_000_000)
    );
    let ran = run(&line, "port-ai-pauses");
    assert!(ran.doc["request_count"]["avg"].as_f64() >= Some(6.0));

    // The same: conversations arriving at a rate (30 cut to 6).
    let line = format!(
        "aiperf profile --model Qwen/Qwen3-0.6B --endpoint-type chat --endpoint /v1/chat/completions \
         --streaming --url {bare} --conversation-num 6 --conversation-turn-mean 4 --request-rate 5 \
         --request-rate-mode poisson --synthetic-input-tokens-mean 200 --output-tokens-mean 150 \
         --random-seed 42"
    );
    let ran = run(&line, "port-ai-turn-rate");
    assert_eq!(
        ran.doc["request_count"]["avg"], 24.0,
        "6 conversations of 4 turns"
    );
    assert_eq!(ran.doc["input_config"]["load"]["request_rate"], 5.0);

    // AIPerf's docs write --url as the whole endpoint URL.
    let line = format!(
        "aiperf profile --model Qwen/Qwen3-0.6B --url {url}/v1/chat/completions --streaming \
         --request-count 4"
    );
    check(
        &line,
        &run(&line, "port-ai-full-url"),
        closed(4, 1, true, chat),
    );

    // README.md: the first benchmark (its hub tokenizer is given, so it is asked for).
    let p = parse(
        "aiperf profile --model \"granite4:350m\" --streaming --endpoint-type chat \
         --tokenizer ibm-granite/granite-4.0-micro --url http://localhost:11434",
    )
    .unwrap();
    let (spec, _) = p.spec_and_notes().unwrap();
    assert_eq!(
        spec.workload.tokenizer.as_deref(),
        Some("ibm-granite/granite-4.0-micro")
    );
    assert_eq!(
        spec.load.request_count, None,
        "AIPerf's default count is decided by the plan"
    );

    // What ringperf does not send stops at once.
    refused(
        "aiperf profile --model your-model --url localhost:8000 --public-dataset lmsys --num-sessions 50",
        "--public-dataset",
    );
    let p =
        parse("aiperf profile --model m --url localhost:8000 --public-dataset sharegpt").unwrap();
    let (spec, _) = p.spec_and_notes().unwrap();
    assert_eq!(
        spec.workload.input_file.unwrap().to_str().unwrap(),
        "hf://datasets/anon8231489123/ShareGPT_Vicuna_unfiltered/ShareGPT_V3_unfiltered_cleaned_split.json"
    );
    refused(
        "aiperf profile --model your-model --url localhost:8000 --request-rate-series 1,2",
        "--request-rate-series",
    );
    // AIPerf's warm-up of its own: 30 s before the 300 s measured, at the run's concurrency.
    let p = parse(
        "aiperf profile --model your-model --url localhost:8000 --concurrency 50 \
         --benchmark-duration 300 --warmup-duration 30",
    )
    .unwrap();
    let (spec, _) = p.spec_and_notes().unwrap();
    let w = spec.load.warmup_phase.expect("a warm-up phase");
    assert_eq!((w.duration_ns, w.concurrency), (Some(30_000_000_000), None));
    let load = ringperf::plan::Load::build(&spec.load, 0, None).unwrap();
    let warm = load.warm.expect("built");
    assert_eq!((warm.concurrency, warm.count), (50, None));
}

/// `http://` and the simulator's address.
fn qwen_url(s: &ringperf::sim::SimHandle) -> String {
    format!("http://{}", s.addr)
}

#[test]
fn vllm_documented_lines_send_vllms_load() {
    let _shared = support::shared();
    let sims: Vec<_> = [
        "NousResearch/Hermes-3-Llama-3.1-8B",
        "meta-llama/Llama-3.1-8B-Instruct",
        "meta-llama/Meta-Llama-3-8B-Instruct",
        "openai/gpt-oss-20b",
    ]
    .iter()
    .map(|m| {
        sim(&format!(
            "-m {m} --ttft 1ms --itl 50us --default-max-tokens 16"
        ))
    })
    .collect();
    let port = |i: usize| sims[i].addr.port();
    let data = data_dir("port-vllm-data");
    let share = sharegpt(&data);
    let custom = jsonl(&data, "data.jsonl", 10, |i| {
        format!(r#"{{"prompt": "What is the capital of country number {i}?"}}"#)
    });
    let questions = jsonl(&data, "question.jsonl", 6, |i| {
        format!(
            r#"{{"question_id": {i}, "category": "{}", "turns": ["Summarize item {i}.", "Again."]}}"#,
            if i % 2 == 0 {
                "summarization"
            } else {
                "writing"
            }
        )
    });
    let results = artifact_dir("port-vllm-results");

    // The ShareGPT example (the port added).
    let line = format!(
        "vllm bench serve \\
  --backend vllm \\
  --model NousResearch/Hermes-3-Llama-3.1-8B \\
  --endpoint /v1/completions \\
  --dataset-name sharegpt \\
  --dataset-path {} \\
  --num-prompts 10 --port {}",
        share.display(),
        port(0)
    );
    let ran = run(&line, "port-vllm-sharegpt");
    check(&line, &ran, closed(10, 10, true, "/v1/completions"));
    // With no rate and no cap, vLLM sends every request at once.
    assert!(
        start_spread(&ran) < 500_000_000,
        "{} ns",
        start_spread(&ran)
    );
    // Current vLLM sends no temperature unless given one: the server's default applies.
    assert!(
        bodies(&ran)[0].get("temperature").is_none(),
        "{}",
        bodies(&ran)[0]
    );

    // Results visualization: a timeline and the result file (100 cut to 10; --result-dir added).
    let line = format!(
        "vllm bench serve --backend vllm --model meta-llama/Llama-3.1-8B-Instruct --endpoint \
         /v1/completions --dataset-name sharegpt --dataset-path {} --num-prompts 10 --plot-timeline \
         --timeline-itl-thresholds 2,5 --plot-dataset-stats --save-result --port {} --result-dir {}",
        share.display(),
        port(1),
        results.display()
    );
    let ran = run(&line, "unused");
    check(&line, &ran, closed(10, 10, true, "/v1/completions"));
    assert!(ran.dir.join("timeline.html").is_file());
    let saved: Vec<PathBuf> = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("vllm-infqps-Llama-3.1-8B-Instruct-")
        })
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    let v: Value = serde_json::from_slice(&std::fs::read(&saved[0]).unwrap()).unwrap();
    assert_eq!(
        (v["completed"].clone(), v["num_prompts"].clone()),
        (10.into(), 10.into())
    );
    assert_eq!(v["request_rate"], "inf");
    assert!(v["p99_ttft_ms"].as_f64().is_some() && v["mean_tpot_ms"].as_f64().is_some());

    // The custom dataset (80 cut to 8; the port and the result folder changed).
    let log = artifact_dir("port-vllm-log");
    let line = format!(
        "vllm bench serve --port {} --save-result --save-detailed \\
  --backend vllm \\
  --model meta-llama/Llama-3.1-8B-Instruct \\
  --endpoint /v1/completions \\
  --dataset-name custom \\
  --dataset-path {} \\
  --skip-chat-template \\
  --num-prompts 8 \\
  --max-concurrency 1 \\
  --temperature=0.3 \\
  --top-p=0.75 \\
  --result-dir \"{}\"",
        port(1),
        custom.display(),
        log.display()
    );
    let ran = run(&line, "unused");
    check(&line, &ran, closed(8, 1, true, "/v1/completions"));
    let b = bodies(&ran);
    assert_eq!(
        (b[0]["temperature"].clone(), b[0]["max_tokens"].clone()),
        (0.3.into(), 256.into())
    );
    assert_eq!(ran.doc["output_sequence_length"]["avg"], 256.0);

    // Spec Bench, every line of the file.
    let line = format!(
        "vllm bench serve \\
    --model meta-llama/Meta-Llama-3-8B-Instruct \\
    --dataset-name spec_bench \\
    --dataset-path \"{}\" \\
    --num-prompts -1 --port {}",
        questions.display(),
        port(2)
    );
    check(
        &line,
        &run(&line, "port-vllm-spec"),
        closed(6, 6, true, "/v1/completions"),
    );

    // Spec Bench, one category.
    let line = format!(
        "vllm bench serve --model meta-llama/Meta-Llama-3-8B-Instruct --dataset-name spec_bench \
         --dataset-path \"{}\" --num-prompts -1 --spec-bench-category \"summarization\" --port {}",
        questions.display(),
        port(2)
    );
    let ran = run(&line, "port-vllm-spec-cat");
    check(&line, &ran, closed(3, 3, true, "/v1/completions"));
    assert!(bodies(&ran)
        .iter()
        .all(|b| b["prompt"].as_str().unwrap().starts_with("Summarize item")));

    // The Responses API (200 prompts cut to 10, 1024 output tokens to 32).
    let line = format!(
        "vllm bench serve --backend openai-responses --endpoint /v1/responses --model \
         openai/gpt-oss-20b --dataset-name random --random-input-len 1024 --random-output-len 32 \
         --num-prompts 10 --port {}",
        port(3)
    );
    let ran = run(&line, "port-vllm-responses");
    check(&line, &ran, closed(10, 10, true, "/v1/responses"));
    assert_eq!(
        bodies(&ran)[0]["ignore_eos"],
        true,
        "the random dataset ignores EOS"
    );
    assert_eq!(ran.doc["output_sequence_length"]["avg"], 32.0);

    // Sampling parameters.
    let line = format!(
        "vllm bench serve --backend vllm --model NousResearch/Hermes-3-Llama-3.1-8B --endpoint \
         /v1/completions --dataset-name sharegpt --dataset-path {} --top-k 10 --top-p 0.9 \
         --temperature 0.5 --num-prompts 10 --port {}",
        share.display(),
        port(0)
    );
    let ran = run(&line, "port-vllm-sampling");
    check(&line, &ran, closed(10, 10, true, "/v1/completions"));
    let b = bodies(&ran);
    assert_eq!(
        (b[0]["top_k"].clone(), b[0]["temperature"].clone()),
        (10.into(), 0.5.into())
    );

    // The load patterns' "maximum throughput" line: an unbounded rate under a cap, and the
    // serve script's own defaults (1,000 random prompts of 1,024 tokens, cut to 20 and 64).
    let line = format!(
        "vllm bench serve --model meta-llama/Llama-3.1-8B-Instruct --request-rate=inf \
         --max-concurrency=4 --num-prompts 20 --random-input-len 64 --port {}",
        port(1)
    );
    let ran = run(&line, "port-vllm-max");
    check(&line, &ran, closed(20, 4, true, "/v1/completions"));
    assert_eq!(
        ran.doc["output_sequence_length"]["avg"], 128.0,
        "vLLM's 128 output tokens"
    );

    // A rate with burstiness (Poisson at 1), and the chat backend.
    let line = format!(
        "vllm bench serve --backend openai-chat --endpoint /v1/chat/completions --model \
         meta-llama/Llama-3.1-8B-Instruct --request-rate 40 --burstiness 0.5 --num-prompts 20 \
         --random-input-len 64 --random-output-len 8 --port {}",
        port(1)
    );
    check(
        &line,
        &run(&line, "port-vllm-rate"),
        Want {
            count: 20,
            concurrency: None,
            rate: Some((40.0, "gamma")),
            streaming: true,
            path: "/v1/chat/completions",
        },
    );

    // Prefixes of long flags, as argparse takes them.
    let line = format!(
        "vllm bench serve --model meta-llama/Llama-3.1-8B-Instruct --num-prompt 12 \
         --random-input 64 --random-output 8 --port {}",
        port(1)
    );
    check(
        &line,
        &run(&line, "port-vllm-prefix"),
        closed(12, 12, true, "/v1/completions"),
    );

    // vLLM's random-mm: images as JPEG data URLs in the chat message, their sizes drawn from
    // the buckets (height, width, frames), their count from [floor(n(1-r)), min(limit,
    // ceil(n(1+r)))], ignore_eos on as for random.
    let line = format!(
        "vllm bench serve --backend openai-chat --model meta-llama/Llama-3.1-8B-Instruct \
         --endpoint /v1/chat/completions --dataset-name random-mm --num-prompts 12 \
         --max-concurrency 4 --random-input-len 64 --random-output-len 8 \
         --random-mm-base-items-per-request 2 --random-mm-num-mm-items-range-ratio 0.5 \
         --random-mm-limit-mm-per-prompt '{{\"image\": 3, \"video\": 0}}' \
         --random-mm-bucket-config '{{(224, 224, 1): 0.5, (96, 160, 1): 0.5, (224, 224, 16): 0.0}}' \
         --seed 42 --port {}",
        port(1)
    );
    let ran = run(&line, "port-vllm-random-mm");
    check(&line, &ran, closed(12, 4, true, "/v1/chat/completions"));
    let (mut counts, mut sizes) = (
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
    );
    for body in bodies(&ran) {
        assert_eq!(body["ignore_eos"], true);
        let parts = body["messages"][0]["content"].as_array().unwrap();
        let images: Vec<&str> = parts
            .iter()
            .filter(|p| p["type"] == "image_url")
            .map(|p| p["image_url"]["url"].as_str().unwrap())
            .collect();
        assert!(parts[0]["type"] == "text" && parts.len() == images.len() + 1);
        counts.insert(images.len());
        for url in images {
            use base64::Engine as _;
            let b64 = url.strip_prefix("data:image/jpeg;base64,").unwrap();
            let b = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap();
            // SOF0: FF C0, length, precision, then height and width.
            let at = b.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
            let hw = |i: usize| u16::from_be_bytes([b[at + i], b[at + i + 1]]);
            sizes.insert((hw(7), hw(5)));
        }
    }
    assert_eq!(counts, [1, 2, 3].into(), "one to three images a request");
    assert_eq!(sizes, [(160, 96), (224, 224)].into(), "width, height");
    refused(
        "vllm bench serve --model m --dataset-name random-mm --num-prompts 4",
        "--backend openai-chat",
    );
    refused(
        "vllm bench serve --backend openai-chat --endpoint /v1/chat/completions --model m \
         --dataset-name random-mm --random-mm-bucket-config '{(64, 64, 8): 1.0}'",
        "video",
    );

    // What needs the hub, or sends what ringperf does not, stops at once.
    refused(
        "vllm bench serve --backend openai-chat --model Qwen/Qwen2-VL-7B-Instruct --endpoint \
         /v1/chat/completions --dataset-name hf --dataset-path lmarena-ai/VisionArena-Chat \
         --hf-split train --num-prompts 1000",
        "images or videos",
    );
    refused(
        "vllm bench serve --model meta-llama/Meta-Llama-3-8B-Instruct --dataset-name hf \
         --dataset-path likaixin/InstructCoder --num-prompts 2048 --hf-output-len 100",
        "--hf-output-len",
    );
    refused(
        "vllm bench serve --model m --dataset-name hf --dataset-path someone/unknown",
        "--dataset-name custom",
    );
    refused(
        "vllm bench serve --model Qwen/Qwen2.5-VL-3B-Instruct --backend openai-chat --endpoint \
         /v1/chat/completions --dataset-name random-mm --random-mm-bucket-config \
         '{(2048, 2048, 1): 1.0}' --request-rate 4 --probe-request-rate 20",
        "--probe-request-rate",
    );
    // A vLLM line given to `profile` is read as vLLM's, with vLLM's defaults.
    let p = parse(&format!(
        "ringperf profile --model m --random-input-len 64 --num-prompts 30 --port {}",
        port(1)
    ))
    .unwrap();
    let (spec, _) = p.spec_and_notes().unwrap();
    assert_eq!(
        (spec.load.request_count, spec.load.concurrency),
        (Some(30), Some(30))
    );
    assert!(p
        .peer
        .notes
        .iter()
        .any(|n| n.contains("read as `vllm bench serve`")));
}

#[test]
fn guidellm_documented_lines_send_guidellms_load() {
    let _shared = support::shared();
    let s = sim("-m tweet-summary-0 --ttft 1ms --itl 50us");
    let url = format!("http://{}", s.addr);
    let data = data_dir("port-guide-data");
    let tok = tokenizer_dir(&data);
    let prompts = jsonl(&data, "dataset.json", 7, |i| {
        format!(r#"{{"prompt": "Write line {i} of a poem."}}"#)
    });
    let chat = "/v1/chat/completions";

    // README.md (0.6): a constant rate (20 s cut to 1).
    let line = format!(
        "guidellm benchmark \\
  --target {url} \\
  --profile constant \\
  --rate 10 \\
  --max-seconds 1 \\
  --data \"prompt_tokens=128,output_tokens=256\""
    );
    let ran = run(&line, "port-guide-constant");
    assert_eq!(ran.doc["input_config"]["load"]["arrival"], "constant");
    assert_eq!(ran.doc["input_config"]["load"]["request_rate"], 10.0);
    assert_eq!(ran.doc["input_config"]["resolved"]["streaming"], true);
    assert_eq!(ran.doc["input_config"]["resolved"]["path"], chat);
    assert!(ran.doc["request_count"]["avg"].as_f64() >= Some(7.0));

    // docs/getting-started/benchmark.md: a finite synthetic dataset (samples 1000 cut to 8).
    let line = format!(
        "guidellm benchmark --target \"{url}\" --data \"prompt_tokens=100,output_tokens=50,samples=8\" \
         --profile constant --rate 5"
    );
    check(
        &line,
        &run(&line, "port-guide-samples"),
        Want {
            count: 8,
            concurrency: None,
            rate: Some((5.0, "constant")),
            streaming: true,
            path: chat,
        },
    );

    // The same page: a file, sent once through.
    let line = format!(
        "guidellm benchmark --target \"{url}\" --data \"{}\" --profile constant --rate 5",
        prompts.display()
    );
    check(
        &line,
        &run(&line, "port-guide-file"),
        Want {
            count: 7,
            concurrency: None,
            rate: Some((5.0, "constant")),
            streaming: true,
            path: chat,
        },
    );

    // docs/guides/datasets.md: throughput (1000 requests cut to 20).
    let line = format!(
        "guidellm benchmark --target \"{url}\" --profile \"throughput\" --max-requests 20 --data \
         \"prompt_tokens=256,output_tokens=128\""
    );
    check(
        &line,
        &run(&line, "port-guide-tput"),
        closed(20, 512, true, chat),
    );

    // The same, with the data as JSON.
    let line = format!(
        "guidellm benchmark --target \"{url}\" --profile \"throughput\" --max-requests 20 --data \
         '{{\"prompt_tokens\": 256, \"output_tokens\": 128}}'"
    );
    check(
        &line,
        &run(&line, "port-guide-json"),
        closed(20, 512, true, chat),
    );

    // README.md: concurrent streams with a warm-up and a cool-down share (bounded to 40).
    let line = format!(
        "guidellm benchmark --target {url} --profile concurrent --rate 16 --warmup 0.1 --cooldown \
         0.1 --max-errors 5 --data \"prompt_tokens=256,output_tokens=128\" --detect-saturation \
         --max-requests 40"
    );
    let ran = run(&line, "port-guide-concurrent");
    check(&line, &ran, closed(36, 16, true, chat));
    assert_eq!(ran.doc["input_config"]["load"]["warmup_request_count"], 4);

    // docs/guides/multiturn.md: conversations of 3 turns, requests counted as turns (30 → 12).
    let line = format!(
        "guidellm benchmark run \\
  --target \"{url}\" \\
  --model \"tweet-summary-0\" \\
  --request-format /v1/chat/completions \\
  --profile concurrent \\
  --rate 2 \\
  --max-requests 12 \\
  --data \"prompt_tokens=200,output_tokens=100,turns=3\""
    );
    let ran = run(&line, "port-guide-turns");
    assert_eq!(
        ran.doc["request_count"]["avg"], 12.0,
        "4 conversations of 3 turns"
    );

    // docs/examples/practice_on_vllm_simulator.md: a sweep with a local processor (10 s cut).
    let line = format!(
        "guidellm benchmark \\
--target \"{url}/\" \\
--model \"tweet-summary-0\" \\
--processor \"{}\" \\
--profile sweep \\
--max-seconds 10 \\
--max-requests 4 \\
--data \"prompt_tokens=128,output_tokens=56\"",
        tok.display()
    );
    let ran = run(&line, "port-guide-sweep");
    let rows = ran.doc["points"].as_array().unwrap();
    assert!(
        rows.len() >= 3,
        "synchronous, throughput, then rates: {rows:?}"
    );
    let at = |c: f64| rows.iter().any(|r| r["concurrency"] == c);
    assert!(at(1.0) && at(512.0), "{rows:?}");
    assert!(rows.iter().any(|r| r["request_rate"].as_f64().is_some()));
    assert!(rows.iter().all(|r| r["request_count"] == 4.0), "{rows:?}");

    // The 0.7 CLI: README.md, a constant rate (20 s cut to 1).
    let line = format!(
        "guidellm run \\
  --backend kind=openai_http,target={url} \\
  --profile kind=constant,rate=10 \\
  --constraint kind=max_duration,seconds=1 \\
  --data kind=synthetic_text,prompt_tokens=128,output_tokens=256"
    );
    let ran = run(&line, "port-guide-run-constant");
    assert_eq!(ran.doc["input_config"]["load"]["arrival"], "constant");
    assert_eq!(ran.doc["input_config"]["load"]["request_rate"], 10.0);
    assert_eq!(
        ran.doc["input_config"]["load"]["benchmark_duration_ns"],
        1_000_000_000u64
    );

    // docs/examples/custom-jsonl-dataset.md: a file through 100 streams.
    let out = artifact_dir("port-guide-run-out");
    let line = format!(
        "guidellm run \\
  --backend kind=openai_http,target={url} \\
  --data '{{\"kind\":\"json_file\",\"path\":\"{}\",\"load_kwargs\":{{\"split\":\"train\"}}}}' \\
  --tokenizer '{{\"kind\":\"huggingface_auto\",\"model\":\"{}\"}}' \\
  --profile kind=concurrent,streams=100 \\
  --output kind=json,path={}/benchmarks.json",
        prompts.display(),
        tok.display(),
        out.display()
    );
    let ran = run(&line, "unused");
    assert_eq!(ran.dir, out);
    check(&line, &ran, closed(7, 100, true, chat));

    // The 0.7 practice line: two constraints (10 s, 10 requests: the requests first).
    let line = format!(
        "guidellm run \\
  --backend kind=openai_http,target={url}/,model=tweet-summary-0 \\
  --tokenizer kind=huggingface_auto,model={} \\
  --profile kind=concurrent,streams=2 \\
  --constraint kind=max_duration,seconds=10 \\
  --constraint kind=max_requests,count=10 \\
  --data kind=synthetic_text,prompt_tokens=128,output_tokens=56",
        tok.display()
    );
    check(
        &line,
        &run(&line, "port-guide-run-both"),
        closed(10, 2, true, chat),
    );

    // Lines that run until interrupted in GuideLLM run so here too: checked, not run.
    for line in [
        format!("guidellm benchmark --scenario chat --target {url}"),
        format!(
            "guidellm benchmark --target \"{url}/v1\" --model \"meta-llama/Meta-Llama-3.1-8B-Instruct\" \
             --data \"prompt_tokens=256,output_tokens=128\" --backend-kwargs '{{\"extras\": {{\"body\": \
             {{\"temperature\": 0.6, \"top_p\": 0.95, \"top_k\": 20}}}}}}'"
        ),
        format!("guidellm run --config chat --backend kind=openai_http,target={url}"),
    ] {
        let p = parse(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let (spec, _) = p.spec_and_notes().unwrap();
        assert!(spec.target.streaming && spec.target.url == url, "{line}");
        assert_eq!(spec.load.benchmark_duration_ns, Some(86_400_000_000_000), "{line}");
        assert!(p.peer.notes.iter().any(|n| n.contains("until interrupted")), "{line}");
    }
    // What ringperf cannot send stops at once.
    refused(
        &format!("guidellm run --backend kind=openai_http,target={url} --data kind=huggingface,source=garage-bAInd/Open-Platypus --profile kind=constant,rate=5"),
        "Hugging Face",
    );
    refused(
        "guidellm benchmark run --backend vllm_python --model \"Qwen/Qwen3-0.6B\" --data \
         \"prompt_tokens=256,output_tokens=128\" --max-seconds 20 --rate 3",
        "openai_http",
    );
    // 0.6's flags on 0.7's `run` (GuideLLM itself rejects them) point to the right spelling.
    refused(
        &format!("guidellm run --target {url} --rate-type concurrent --rate 4 --max-requests 8"),
        "--backend kind=openai_http,target=URL",
    );
}

#[test]
fn a_profile_line_chooses_its_dialect_from_its_flags() {
    let _shared = support::shared();
    // AIPerf's: its defaults (twice the concurrency and at least 10 requests).
    let p = parse("aiperf profile -m m --concurrency 8").unwrap();
    assert_eq!(p.peer.dialect, ringperf::cli::port::Dialect::Aiperf);
    // GenAI-Perf's by one of its own flags: Triton by default.
    let p = parse("genai-perf profile -m m -p 1000").unwrap();
    let (spec, notes) = p.spec_and_notes().unwrap();
    assert_eq!(spec.target.kind, ringperf::internals::api::Kind::Template);
    assert!(notes.iter().any(|n| n.contains("Triton")), "{notes:?}");
    // Chat asks for its length as each tool does: GenAI-Perf and GuideLLM with max_tokens,
    // AIPerf with max_completion_tokens.
    let legacy = |line: &str| {
        let p = parse(line).unwrap();
        p.spec_and_notes().unwrap().0.workload.legacy_max_tokens
    };
    assert!(legacy(
        "genai-perf profile -m m --endpoint-type chat --service-kind openai"
    ));
    assert!(!legacy("aiperf profile -m m --endpoint-type chat"));
    assert!(legacy("guidellm benchmark --target http://h:8000 --data prompt_tokens=8,output_tokens=4 --rate-type synchronous --max-requests 5"));
    // GuideLLM's flags under `profile` are read as GuideLLM's.
    let p = parse("ringperf profile --target http://h:8000 --max-requests 5 --data prompt_tokens=8,output_tokens=4 --profile synchronous").unwrap();
    assert_eq!(p.peer.dialect, ringperf::cli::port::Dialect::Guidellm);
    // A flag ringperf knows of no tool is clap's own error.
    assert!(parse("ringperf profile --no-such-flag").is_err());
}
