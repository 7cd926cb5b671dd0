//! Command lines of GenAI-Perf, AIPerf and `vllm bench serve`, modelled on the examples in
//! each tool's documentation (their flags and values as documented), with the tool's name
//! replaced by `ringperf profile`, run against the simulator. Where a line runs long
//! (thousands of requests, minutes), its counts are cut and the test says so;
//! `--tokenizer <hub id>` is left out (tests reach no network; `hub.rs` tests the download).

use ringperf::api::Kind;
use ringperf::plan::{SloMetric, Spec};

use crate::support::{self, artifact_dir, profile_args, sim};

/// The flags of `ringperf profile WORDS`, as given (no flag added).
fn args(words: &[&str]) -> ringperf::cli::ProfileArgs {
    use clap::Parser;
    let argv = ["ringperf", "profile"]
        .into_iter()
        .chain(words.iter().copied());
    match ringperf::cli::Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{words:?}: {e}")) {
        ringperf::cli::Cli {
            command: ringperf::cli::Command::Profile(p),
        } => *p,
        _ => unreachable!(),
    }
}

/// The spec and notes a command line gives (its words after `profile`; `URL` is replaced).
fn spec(line: &str, url: &str) -> (Spec, Vec<String>) {
    let line = line.replace("URL", url);
    let words = shell_words(&line);
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    args(&words)
        .spec_and_notes()
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// Runs a command line against `url` and returns the report.
fn run(line: &str, url: &str, name: &str) -> ringperf::app::ProfileResult {
    let line = line.replace("URL", url);
    let dir = artifact_dir(name);
    let mut words = shell_words(&line);
    if !words
        .iter()
        .any(|w| w == "--artifact-dir" || w == "--artifact-directory" || w == "--result-dir")
    {
        words.extend(["--artifact-dir".into(), dir.to_str().unwrap().into()]);
    }
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    ringperf::app::profile(
        &profile_args(&words),
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        false,
    )
    .unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// Splits a command line as a shell would for these lines: spaces, single and double quotes.
fn shell_words(line: &str) -> Vec<String> {
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

fn has_note(notes: &[String], flag: &str) -> bool {
    notes.iter().any(|n| n.starts_with(flag))
}

#[test]
fn genai_perf_commands_run_as_they_are() {
    let _shared = support::shared();
    let s = sim("-m gpt2 --ttft 1ms --itl 200us");
    let url = format!("http://{}", s.addr);

    // Its README's quick start (requests cut from 50 + 10 warm-up).
    let quick = "-m gpt2 --endpoint-type chat --synthetic-input-tokens-mean 200 \
        --synthetic-input-tokens-stddev 0 --output-tokens-mean 100 --output-tokens-stddev 0 \
        --streaming --request-count 50 --warmup-request-count 10 --url URL";
    let (sp, notes) = spec(quick, &url);
    assert_eq!(sp.target.kind, Kind::Chat);
    assert!(sp.target.streaming);
    assert_eq!(
        (sp.workload.isl_mean, sp.workload.osl_mean),
        (200, Some(100))
    );
    assert_eq!(
        (sp.load.request_count, sp.load.warmup_request_count),
        (Some(50), 10)
    );
    assert!(notes.is_empty(), "{notes:?}");
    let r = run(&quick.replace("50", "12"), &url, "port-gp-quick");
    assert_eq!((r.report.completed, r.report.warmup), (12, 10));

    // The LLM tutorial: a measurement window, a named export file, scheme-less URL.
    let tutorial = "-m gpt2 --service-kind openai --endpoint-type completions --url URL \
        --synthetic-input-tokens-mean 200 --output-tokens-mean 100 --concurrency 1 \
        --measurement-interval 4000 --profile-export-file my_profile_export.json";
    let bare = url.trim_start_matches("http://");
    let (sp, notes) = spec(tutorial, bare);
    assert_eq!(sp.target.kind, Kind::Completions);
    assert_eq!(sp.load.benchmark_duration_ns, Some(4_000_000_000));
    assert!(has_note(&notes, "--measurement-interval"), "{notes:?}");
    assert!(has_note(&notes, "--profile-export-file"), "{notes:?}");
    let r = run(
        &tutorial.replace("4000", "300").replace("100 ", "8 "),
        bare,
        "port-gp-tutorial",
    );
    assert!(r.report.completed >= 1, "{}", r.console);

    // Prompts, seed and GenAI-Perf's two --extra-inputs forms, verbose, perf_analyzer args.
    let extra = "-m gpt2 --service-kind openai --endpoint-type chat --streaming --url URL \
        --concurrency 4 --num-prompts 100 --random-seed 123 --extra-inputs max_tokens:16 \
        --extra-inputs ignore_eos:true --extra-inputs '{\"top_k\": 5}' -v -- --max-threads 256";
    let (sp, notes) = spec(extra, &url);
    let w = &sp.workload;
    assert_eq!((w.num_dataset_entries, w.random_seed), (100, 123));
    assert_eq!(w.extra_inputs["top_k"], 5);
    assert_eq!(w.extra_inputs["ignore_eos"], true);
    assert_eq!(w.extra_inputs["max_tokens"], 16);
    assert!(has_note(&notes, "--verbose") && has_note(&notes, "-- (perf_analyzer"));
    let r = run(&extra.replace("100", "8"), &url, "port-gp-extra");
    assert_eq!(r.report.completed, 8);
    let inputs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.artifact_dir.join("inputs.json")).unwrap())
            .unwrap();
    let body = &inputs["data"][0]["payload"][0];
    assert_eq!(body["top_k"], 5, "{body}");

    // Goodput with GenAI-Perf's metric names, a rate, an endpoint without its slash.
    let goodput = "-m gpt2 --endpoint-type completions --endpoint v1/completions --streaming \
        --url URL --request-rate 50 --request-count 10 --output-tokens-mean 8 \
        --goodput time_to_first_token:100 inter_token_latency:3.40";
    let (sp, _) = spec(goodput, &url);
    assert_eq!(sp.load.request_rate, Some(50.0));
    assert_eq!(sp.load.goodput.len(), 2);
    assert_eq!(sp.load.goodput[1].metric, SloMetric::Itl);
    let r = run(goodput, &url, "port-gp-goodput");
    assert_eq!(r.report.completed, 10);
    assert!(r.report.goodput.is_some());

    // Embeddings, batch size 1.
    let emb = "-m gpt2 --endpoint-type embeddings --batch-size-text 1 --url URL \
        --request-count 4 --synthetic-input-tokens-mean 32";
    let r = run(emb, &url, "port-gp-emb");
    assert_eq!(r.report.completed, 4);
}

#[test]
fn aiperf_commands_run_as_they_are() {
    let _shared = support::shared();
    let s = sim("-m Qwen/Qwen3-0.6B --ttft 1ms --itl 200us");
    let url = format!("http://{}", s.addr);

    // Its README's first profile.
    let first = "--model Qwen/Qwen3-0.6B --endpoint-type chat --endpoint /v1/chat/completions \
        --streaming --url URL --synthetic-input-tokens-mean 100 --output-tokens-mean 20 \
        --concurrency 10 --request-count 64 --num-warmup-requests 1 --ui-type simple";
    let (sp, notes) = spec(first, &url);
    assert_eq!(
        (sp.load.concurrency, sp.load.warmup_request_count),
        (Some(10), 1)
    );
    assert!(notes.is_empty(), "{notes:?}");
    let r = run(first, &url, "port-ai-first");
    assert_eq!(r.report.completed, 64);

    // Arrival patterns, a dashboard turned off, a goodput quoted as one argument.
    let rate = "-m Qwen/Qwen3-0.6B --url URL --endpoint-type chat --streaming \
        --request-rate 50 --arrival-pattern gamma --arrival-smoothness 2 --request-count 20 \
        --osl 8 --ui-type none --goodput 'request_latency:250 inter_token_latency:10'";
    let (sp, _) = spec(rate, &url);
    assert_eq!(sp.load.arrival, ringperf::arrival::Arrival::Gamma);
    assert_eq!(sp.load.burstiness, 2.0);
    assert!(!sp.output.progress);
    assert_eq!(sp.load.goodput.len(), 2);
    let r = run(rate, &url, "port-ai-rate");
    assert_eq!(r.report.completed, 20);

    // Trace replay with AIPerf's dataset type name.
    let dir = artifact_dir("port-ai-trace-files");
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.jsonl");
    let lines: Vec<String> = (0..6)
        .map(|i| {
            format!(
                r#"{{"timestamp": {}, "input_length": 40, "output_length": 4, "hash_ids": [{i}]}}"#,
                1000 + i * 20
            )
        })
        .collect();
    std::fs::write(&trace, lines.join("\n")).unwrap();
    let replay = format!(
        "-m Qwen/Qwen3-0.6B --url URL --endpoint-type chat --streaming --input-file {} \
         --custom-dataset-type mooncake_trace --fixed-schedule --fixed-schedule-auto-offset",
        trace.display()
    );
    let (sp, notes) = spec(&replay, &url);
    assert_eq!(
        sp.workload.dataset_type,
        Some(ringperf::workload::files::DatasetType::Mooncake)
    );
    assert!(has_note(&notes, "--fixed-schedule-auto-offset"));
    let r = run(&replay, &url, "port-ai-replay");
    assert_eq!(r.report.completed, 6);

    // Time-based, with AIPerf's short length flags and artifact directory (60 s cut to 1 s).
    let out = artifact_dir("port-ai-duration");
    let timed = format!(
        "-m Qwen/Qwen3-0.6B --url URL --endpoint-type chat --streaming --benchmark-duration 60 \
         --benchmark-grace-period 30 --concurrency 8 --isl 128 --osl 16 --artifact-directory {}",
        out.display()
    );
    let (sp, _) = spec(&timed, &url);
    assert_eq!(sp.load.benchmark_duration_ns, Some(60_000_000_000));
    assert_eq!(sp.output.artifact_dir.as_deref(), Some(out.as_path()));
    let r = run(&timed.replace("duration 60", "duration 1"), &url, "unused");
    assert!(r.report.completed > 8, "{}", r.console);
    assert!(out.join("profile_export_ringperf.json").exists());

    // Multi-turn conversations.
    let turns = "-m Qwen/Qwen3-0.6B --url URL --endpoint-type chat --streaming \
        --conversation-num 4 --conversation-turn-mean 3 --conversation-turn-delay-mean 5 \
        --concurrency 2 --request-count 4 --osl 4";
    let (sp, _) = spec(turns, &url);
    assert_eq!(sp.workload.session_turns_mean, Some(3.0));
    assert_eq!(sp.workload.session_turn_delay_ns, 5_000_000);
    assert_eq!(sp.workload.num_dataset_entries, 4);
    let r = run(turns, &url, "port-ai-turns");
    assert_eq!(r.report.completed, 12, "4 sessions of 3 turns");
}

#[test]
fn vllm_bench_serve_commands_run_as_they_are() {
    let _shared = support::shared();
    let s = sim("-m meta-llama/Llama-3.1-8B-Instruct --ttft 1ms --itl 200us");
    let url = format!("http://{}", s.addr);
    let (host, port) = s
        .addr
        .to_string()
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .unwrap();

    // Random prompts, an unbounded rate with a concurrency cap, ignore_eos, a seed (vLLM's
    // docs use 1024/128 tokens and 200 prompts).
    let random = "--backend vllm --model meta-llama/Llama-3.1-8B-Instruct --base-url URL \
        --dataset-name random --random-input-len 1024 --random-output-len 128 \
        --num-prompts 200 --request-rate inf --max-concurrency 16 --ignore-eos --seed 42";
    let (sp, notes) = spec(random, &url);
    assert_eq!(sp.target.kind, Kind::Completions, "vLLM's default backend");
    assert!(sp.target.streaming, "vLLM's backends stream");
    assert_eq!(sp.load.request_rate, None);
    assert_eq!(sp.load.concurrency, Some(16));
    assert_eq!(sp.load.request_count, Some(200));
    assert_eq!(sp.workload.num_dataset_entries, 200);
    assert_eq!(
        (sp.workload.isl_mean, sp.workload.osl_mean),
        (1024, Some(128))
    );
    assert_eq!(sp.workload.extra_inputs["ignore_eos"], true);
    assert_eq!(sp.workload.random_seed, 42);
    assert!(has_note(&notes, "--request-rate inf"), "{notes:?}");
    let r = run(
        &random
            .replace("1024", "64")
            .replace("128", "8")
            .replace("200", "20"),
        &url,
        "port-vllm-random",
    );
    assert_eq!(r.report.completed, 20);
    // An unbounded rate without a cap sends every request at once.
    let (sp, _) = spec(
        "--model m --base-url URL --num-prompts 30 --request-rate inf",
        &url,
    );
    assert_eq!(sp.load.concurrency, Some(30));

    // ShareGPT from --dataset-path, through --host/--port.
    let dir = artifact_dir("port-vllm-files");
    std::fs::create_dir_all(&dir).unwrap();
    let sharegpt = dir.join("ShareGPT_V3_unfiltered_cleaned_split.json");
    let convs: Vec<String> = (0..5)
        .map(|i| format!(r#"{{"id": "{i}", "conversations": [{{"from": "human", "value": "Tell me about the number {i} in a few words."}}, {{"from": "gpt", "value": "The number {i} is a number."}}]}}"#))
        .collect();
    std::fs::write(&sharegpt, format!("[{}]", convs.join(","))).unwrap();
    let share = format!(
        "--backend vllm --model meta-llama/Llama-3.1-8B-Instruct --host {host} --port {port} \
         --endpoint /v1/completions --dataset-name sharegpt --dataset-path {} --num-prompts 5",
        sharegpt.display()
    );
    let (sp, _) = spec(&share, &url);
    assert_eq!(sp.target.url, url);
    assert_eq!(
        sp.workload.dataset_type,
        Some(ringperf::workload::files::DatasetType::Sharegpt)
    );
    let r = run(&share, &url, "port-vllm-sharegpt");
    assert_eq!(r.report.completed, 5);

    // The chat backend, a rate with burstiness, percentiles and saving asked for.
    let out = artifact_dir("port-vllm-chat");
    let chat = format!(
        "--backend openai-chat --model meta-llama/Llama-3.1-8B-Instruct --base-url URL \
         --endpoint /v1/chat/completions --dataset-name random --random-input-len 32 \
         --random-output-len 8 --num-prompts 20 --request-rate 50 --burstiness 1.0 \
         --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 --save-result \
         --result-dir {}",
        out.display()
    );
    let (sp, notes) = spec(&chat, &url);
    assert_eq!(sp.target.kind, Kind::Chat);
    assert!(has_note(&notes, "--percentile-metrics") && has_note(&notes, "--save-result"));
    let r = run(&chat, &url, "unused");
    assert_eq!(r.report.completed, 20);
    assert!(out.join("profile_export.jsonl").exists());

    // vLLM's custom JSONL (`prompt`, `output_tokens`), goodput with vLLM's names, sampling.
    let custom = dir.join("prompts.jsonl");
    std::fs::write(
        &custom,
        (0..5)
            .map(|i| format!(r#"{{"prompt": "Count to {i}.", "output_tokens": 6}}"#))
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let own = format!(
        "--backend vllm --base-url URL --model meta-llama/Llama-3.1-8B-Instruct \
         --dataset-name custom --dataset-path {} --num-prompts 5 --goodput ttft:500 tpot:50 \
         --temperature 0 --top-p 0.9 --disable-tqdm",
        custom.display()
    );
    let (sp, _) = spec(&own, &url);
    assert_eq!(sp.load.goodput[1].metric, SloMetric::Itl, "tpot is ITL");
    assert_eq!(sp.workload.extra_inputs["temperature"], 0.0);
    assert!(!sp.output.progress);
    let r = run(&own, &url, "port-vllm-custom");
    assert_eq!(r.report.completed, 5);
    assert_eq!(r.report.output_tokens, 5 * 6);

    // A served name, a length range, a shared prefix, a ready check.
    let served = "--model meta-llama/Llama-3.1-8B --served-model-name \
        meta-llama/Llama-3.1-8B-Instruct --base-url URL --dataset-name random \
        --random-input-len 64 --random-output-len 8 --random-range-ratio 0.5 \
        --random-prefix-len 16 --num-prompts 8 --ready-check-timeout-sec 10";
    let (sp, notes) = spec(served, &url);
    assert_eq!(sp.target.model, "meta-llama/Llama-3.1-8B-Instruct");
    // Uniform over [32, 96]: standard deviation 64 · 0.5 / √3 ≈ 18.5.
    assert_eq!(sp.workload.isl_stddev, 18);
    assert_eq!(
        (
            sp.workload.num_prefix_prompts,
            sp.workload.prefix_prompt_length
        ),
        (Some(1), 16)
    );
    assert!(has_note(&notes, "--random-range-ratio"));
    let r = run(served, &url, "port-vllm-served");
    assert_eq!(r.report.completed, 8);
}

#[test]
fn what_ringperf_cannot_do_is_refused_with_the_way_to_get_it() {
    let _shared = support::shared();
    for (line, expect) in [
        ("--service-kind triton", "OpenAI-compatible frontend"),
        (
            "--public-dataset sharegpt",
            "pass --input-file FILE --dataset-type sharegpt",
        ),
        ("--backend tgi", "--endpoint-type template"),
        ("--dataset-name sonnet", "JSONL lines"),
        ("--dataset-name sharegpt", "needs --dataset-path"),
        ("--batch-size-text 4", "one input per request"),
        ("--random-range-ratio 1.5", "from 0 to below 1"),
        ("--ui-type fancy", "none, simple or dashboard"),
    ] {
        let words: Vec<&str> = line.split(' ').collect();
        let e = args(&words).spec_and_notes().err().map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.contains(expect)),
            "{line}: {e:?}"
        );
    }
}

#[test]
fn aiperf_multi_run_flags_set_the_repeats() {
    let _shared = support::shared();
    let s = args(&[
        "--num-profile-runs",
        "5",
        "--confidence-level",
        "0.99",
        "--profile-run-cooldown-seconds",
        "10",
        "--profile-run-disable-warmup-after-first",
        "false",
        "--concurrency",
        "10",
    ])
    .sweep_spec()
    .unwrap();
    assert_eq!(s.repeats.runs, 5);
    assert_eq!(s.repeats.confidence, 0.99);
    assert_eq!(s.repeats.cooldown_ns, 10_000_000_000);
    assert!(s.repeats.warmup_every_run);
    assert!(!s.is_sweep);
    // AIPerf's default: warm up before the first run only.
    let s = args(&["--num-profile-runs", "2"]).sweep_spec().unwrap();
    assert!(!s.repeats.warmup_every_run);
    // A comma list on a load flag is a sweep, one point each.
    let s = args(&["--concurrency", "8,16,32"]).sweep_spec().unwrap();
    assert!(s.is_sweep);
    assert_eq!(s.points.len(), 3);
}
