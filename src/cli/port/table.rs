//! The peers' flags that ringperf reads no further than to say what they mean here: each is
//! either accepted with one note (it changes nothing that is sent: output, logging, worker
//! processes) or refused with what to use instead (it asks for a load ringperf does not send).
//! They are screened out of the command line before clap reads the rest, so every flag of
//! AIPerf's and GenAI-Perf's `profile` reference is known by name, and none is silently
//! dropped.

/// How many values a flag takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Arity {
    /// None: a switch.
    Flag,
    /// One value.
    One,
    /// One or more values, up to the next flag.
    List,
}

/// What ringperf does with it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Treat {
    /// Accepted; one note says why it changes nothing here.
    Note(&'static str),
    /// Refused with this line (what to use instead).
    Refuse(&'static str),
    /// Accepted (with the note) when every value is one of these; refused otherwise.
    Only(&'static [&'static str], &'static str, &'static str),
}

/// One entry: the flag's spellings, its arity and its treatment.
pub(super) struct Rare {
    pub names: &'static [&'static str],
    pub arity: Arity,
    pub treat: Treat,
}

use Arity::{Flag, List, One};
use Treat::{Note, Only, Refuse};

const fn r(names: &'static [&'static str], arity: Arity, treat: Treat) -> Rare {
    Rare {
        names,
        arity,
        treat,
    }
}

const OUTPUT: &str = "no effect: ringperf writes its own artifacts (profile_export_ringperf.json, \
    .csv, profile_export.jsonl, inputs.json, report.html) in --artifact-dir";
const SERVICE: &str = "no effect: ringperf runs its shards as threads of one process, sized \
    from the load and the host (--shards sets them)";
const LOGGING: &str = "no effect: ringperf says what it does on stderr";
const TRACE_LOADERS: &str = "no effect: it applies to AIPerf's baseten, weka and agentic trace \
    loaders, which ringperf does not read";
const SEARCH: &str = "ringperf's own search: --search max-concurrency|max-rate with --goodput \
    objectives, or a list on --concurrency / --request-rate (e.g. 1,2,4,8), or --sweep auto";
const EXPORTERS: &str = "no effect: ringperf exports to files only (JSON, CSV, JSONL, HTML); \
    upload them from --artifact-dir";

/// AIPerf's and GenAI-Perf's `profile` flags that ringperf notes or refuses (AIPerf's current
/// CLI reference, and GenAI-Perf's flags that AIPerf dropped).
pub(super) const PROFILE: &[Rare] = &[
    // Endpoint.
    r(&["--wait-for-model-mode"], One, Note("ringperf's readiness check asks GET /v1/models, then sends one probe request (--ready-check-timeout)")),
    r(&["--wait-for-model-interval"], One, Note("ringperf checks once a second")),
    r(&["--reset-kv-cache-timeout-seconds"], One, Note("the reset waits --connect-timeout")),
    r(&["--reset-kv-cache-path"], One, Note("ringperf posts vLLM's /reset_prefix_cache, then SGLang's /flush_cache")),
    r(&["--server-profiler"], Flag, Note("no effect: ringperf does not start the server's profiler; POST /start_profile and /stop_profile around the run yourself")),
    r(&["--server-profiler-timeout-seconds", "--server-profiler-start-path", "--server-profiler-stop-path"], One, Note("no effect: ringperf does not start the server's profiler")),
    r(&["--transport", "--transport-type"], One, Only(&["http"], "ringperf speaks HTTP/1.1 (https with TLS)", "ringperf speaks HTTP/1.1 only")),
    r(&["--use-server-token-count"], Flag, Note("ringperf takes output tokens from the server's usage whenever the server reports it (and asks for it with stream_options.include_usage)")),
    r(&["--connection-reuse-strategy"], One, Only(&["pooled"], "ringperf keeps every connection alive across requests", "ringperf keeps connections alive and reuses them (pooled): a new connection per request or per session is not built in")),
    r(&["--download-video-content"], Flag, Note("no effect: video generation endpoints are not spoken")),
    r(&["--request-content-type"], One, Only(&["application/json"], "ringperf sends application/json", "ringperf sends application/json bodies only")),
    r(&["--session-header"], One, Note("no effect: ringperf sends no session affinity header")),
    r(&["--uuid-and-strip"], Flag, Note("no effect: ringperf sends no images")),
    // Tokenizer.
    r(&["--tokenizer-trust-remote-code", "--trust-remote-code"], Flag, Note("no effect: ringperf runs no Python; tokenizer.json is all it needs")),
    r(&["--apply-chat-template"], Flag, Refuse("ringperf counts prompt tokens as the text encodes, without the model's chat template (AIPerf's default)")),
    // Input.
    r(&["--hf-subset", "--hf-weka-dataset"], One, Refuse("ringperf downloads no dataset: download it and pass --input-file FILE (ShareGPT: --dataset-type sharegpt)")),
    r(&["--ignore-trace-delays"], Flag, Note("a trace's timestamps are replayed only with --fixed-schedule")),
    r(&["--use-think-time-only", "--allow-dataset-wrap", "--no-allow-dataset-wrap", "--open-loop-replay", "--no-open-loop-replay", "--open-loop-strict", "--omit-kv-hints", "--force-min-tokens", "--no-force-min-tokens"], Flag, Note(TRACE_LOADERS)),
    r(&["--max-context-length", "--trace-session-sample-ratio", "--inter-turn-delay-cap-seconds", "--max-idle-gap-cap-seconds", "--replay-speedup", "--trajectory-start-min-ratio", "--trajectory-start-max-ratio", "--trace-idle-gap-cap-seconds", "--system-idle-gap-cap-seconds", "--agentic-cache-warmup-duration", "--agentic-warmup-grace-period"], One, Note(TRACE_LOADERS)),
    r(&["--burst-phase-starts"], Flag, Note(TRACE_LOADERS)),
    r(&["--dataset-sampling-strategy"], One, Only(&["sequential"], "ringperf takes the entries in order, wrapping around", "ringperf takes the entries in order, wrapping around (sequential)")),
    r(&["-f", "--config"], One, Refuse("ringperf reads no YAML config: give the flags on the command line")),
    r(&["--prompt-corpus"], One, Note("ringperf's synthetic prompts are cut from its own corpus of plain English text")),
    r(&["--cache-bust"], One, Only(&["none"], "nothing is injected", "per-conversation cache-bust markers are not built in: use another --random-seed per run, or --reset-prefix-cache")),
    // Prefixes and lengths.
    r(&["--seq-dist", "--sequence-distribution"], One, Refuse("mixed (ISL, OSL) distributions are not built in: write the requests as JSONL (one line per request with its max_tokens) and pass --input-file")),
    // Audio, images, video.
    r(&["--video-batch-size", "--batch-size-video"], One, Note("no effect: ringperf sends no video")),
    r(&["--image-source", "--image-source-sampling", "--video-synth-type", "--video-format", "--video-codec", "--video-audio-codec", "--video-audio-depth", "--video-audio-sample-rate"], One, Note("no effect: ringperf makes its images from seeded noise and sends no video")),
    r(&["--audio-num-channels"], One, Note("no effect: ringperf sends no audio")),
    r(&["--video-duration", "--video-fps", "--video-width", "--video-height", "--video-audio-num-channels"], One, Note("no effect: ringperf sends no video")),
    r(&["--synthesis-speedup-ratio", "--synthesis-prefix-len-multiplier", "--synthesis-prompt-len-multiplier", "--synthesis-output-len-multiplier", "--synthesis-prefix-root-multiplier"], One, Only(&["1", "1.0"], "the trace is replayed as written", "trace synthesis is not built in: replay the trace as it is (--fixed-schedule)")),
    r(&["--synthesis-max-isl", "--synthesis-max-osl"], One, Refuse("trace synthesis is not built in: filter the trace's lines yourself")),
    // Load.
    r(&["--request-rate-series"], One, Refuse("a piecewise rate is not built in: run the rates as a sweep (--request-rate 10,20,40)")),
    r(&["--scenario"], One, Refuse("named scenarios are not built in: give their flags")),
    r(&["--unsafe-override"], Flag, Note("no scenario is locked")),
    // Output.
    r(&["--profile-export-prefix", "--profile-export-file", "--export-level", "--profile-export-level"], One, Note(OUTPUT)),
    r(&["--auto-plot", "--no-auto-plot", "--plot-required", "--export-outputs-json", "--generate-plots", "--export-http-trace", "--no-server-metrics", "--enable-checkpointing", "--no-sweep-table"], Flag, Note(OUTPUT)),
    r(&["--checkpoint-dir"], One, Note(OUTPUT)),
    r(&["--server-metrics-formats", "--stream", "--otel-resource-attributes", "--mlflow-tag", "--mlflow-artifact-glob", "--wandb-tag"], List, Note(EXPORTERS)),
    r(&["--otel-url", "--gen-ai-provider", "--mlflow-tracking-uri", "--mlflow-experiment", "--mlflow-run-name", "--mlflow-parent-run-id", "--wandb-project", "--wandb-entity", "--wandb-run-name"], One, Note(EXPORTERS)),
    r(&["--network-latency-automatic"], Flag, Note("no effect: ringperf stamps with the kernel's transmit and receive times; it subtracts no network estimate")),
    r(&["--network-latency-mean", "--network-latency-ping-interval"], One, Note("no effect: ringperf stamps with the kernel's transmit and receive times; it subtracts no network estimate")),
    // Repeated runs and searches.
    r(&["--set-consistent-seed", "--parameter-sweep-same-seed", "--no-parameter-sweep-same-seed", "--no-vary-seed-per-trial"], Flag, Note("every run of a command line uses the same --random-seed (0 unless given)")),
    r(&["--no-set-consistent-seed", "--vary-seed-per-trial"], Flag, Refuse("every run of a command line uses the same --random-seed: run each seed as a command of its own")),
    r(&["--convergence-metric", "--convergence-stat", "--convergence-threshold", "--convergence-mode"], One, Refuse("runs until convergence are not built in: --num-profile-runs N runs N times, and aggregate/ gives each figure's confidence interval")),
    r(&["--parameter-sweep-mode"], One, Note("a sweep runs each point's repeats together (independent)")),
    r(&["--sweep-type"], One, Note("one flag is swept at a time")),
    r(&["--search-space", "--search-sla", "--search-sla-tier", "--variant", "--sweep-variant"], List, Refuse(SEARCH)),
    r(&["--search-metric", "--search-stat", "--search-direction", "--search-max-iterations", "--search-initial-points", "--search-random-seed", "--search-planner", "--optuna-sampler", "--optuna-acquisition", "--optuna-terminator", "--search-percentile-pooling", "--bo-constraint-mode", "--search-recipe", "--ttft-sla-ms", "--isl-osl-pairs", "--itl-sla-ms", "--tpot-sla-ms", "--e2e-sla-ms", "--error-rate-sla", "--slo-attainment-fraction", "--search-style", "--degradation-threshold", "--degradation-metric-tag", "--degradation-stat", "--isl-min", "--isl-max", "--isl-steps", "--concurrency-min", "--concurrency-max", "--concurrency-steps", "--osl-min", "--osl-max", "--osl-steps"], One, Refuse(SEARCH)),
    // Accuracy.
    r(&["--accuracy-benchmark", "--accuracy-tasks", "--accuracy-n-shots", "--accuracy-grader", "--accuracy-system-prompt"], One, Refuse("accuracy benchmarks are not built in: ringperf measures speed")),
    r(&["--accuracy-enable-cot", "--accuracy-no-enable-cot", "--accuracy-verbose"], Flag, Refuse("accuracy benchmarks are not built in: ringperf measures speed")),
    // Service, workers, ZMQ.
    r(&["--log-level"], One, Note(LOGGING)),
    r(&["-vv", "--extra-verbose"], Flag, Note(LOGGING)),
    r(&["--record-processor-service-count", "--record-processors", "--workers-max", "--max-workers", "--max-threads", "--api-port", "--api-host", "--stats-interval", "--zmq-host", "--zmq-ipc-path"], One, Note(SERVICE)),
    r(&["--zmq-dual-bind"], Flag, Note(SERVICE)),
    // GenAI-Perf.
    r(&["--grpc-method"], One, Refuse("ringperf speaks HTTP, not gRPC: serve the model behind an OpenAI-compatible or Triton HTTP frontend")),
    r(&["--model-selection-strategy"], One, Note("one model per run: nothing to choose between")),
];

/// A flag of the table, and the command line without it.
#[derive(Debug)]
pub(super) struct Screened {
    /// What is left for clap.
    pub rest: Vec<String>,
    /// One note per flag accepted without effect.
    pub notes: Vec<String>,
}

/// Takes the table's flags out of `argv` (the words after the subcommand): notes for the
/// accepted ones, an error line for the first refused one. Words after `--`, and the flags in
/// `keep` (the subcommand's own), are left alone.
pub(super) fn screen(argv: &[String], table: &[Rare], keep: &[&str]) -> Result<Screened, String> {
    let mut rest = Vec::with_capacity(argv.len());
    let mut notes: Vec<String> = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let word = &argv[i];
        if word == "--" {
            rest.extend_from_slice(&argv[i..]);
            break;
        }
        let (name, inline) = match word.split_once('=') {
            Some((n, v)) if n.starts_with('-') => (n, Some(v.to_string())),
            _ => (word.as_str(), None),
        };
        let entry = table
            .iter()
            .find(|e| e.names.contains(&name))
            .filter(|_| !keep.contains(&name));
        let Some(entry) = entry else {
            rest.push(word.clone());
            i += 1;
            continue;
        };
        i += 1;
        let mut values = Vec::new();
        match (entry.arity, inline) {
            (Arity::Flag, Some(v)) => values.push(v),
            (Arity::Flag, None) => {}
            (_, Some(v)) => values.push(v),
            (Arity::One, None) => {
                let Some(v) = argv.get(i) else {
                    return Err(format!("{name} needs a value"));
                };
                values.push(v.clone());
                i += 1;
            }
            (Arity::List, None) => {
                while let Some(v) = argv.get(i).filter(|v| !is_flag(v)) {
                    values.push(v.clone());
                    i += 1;
                }
                if values.is_empty() {
                    return Err(format!("{name} needs a value"));
                }
            }
        }
        let note = |why: &str, notes: &mut Vec<String>| {
            let line = format!("{name}: {why}");
            if !notes.contains(&line) {
                notes.push(line);
            }
        };
        match entry.treat {
            Treat::Note(why) => note(why, &mut notes),
            Treat::Refuse(why) => return Err(format!("{name}: {why}")),
            Treat::Only(allowed, why, refused) => {
                if values.iter().all(|v| allowed.contains(&v.as_str())) {
                    note(why, &mut notes);
                } else {
                    return Err(format!("{name} {}: {refused}", values.join(" ")));
                }
            }
        }
    }
    Ok(Screened { rest, notes })
}

/// Whether a word is a flag rather than a value (negative numbers are values).
pub(super) fn is_flag(word: &str) -> bool {
    word.starts_with('-') && word.len() > 1 && word[1..].parse::<f64>().is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn notes_take_their_values_and_refusals_stop_at_once() {
        let s = screen(
            &words("--isl 100 --log-level DEBUG --wandb-tag a b --zmq-dual-bind -m x"),
            PROFILE,
            &[],
        )
        .unwrap();
        assert_eq!(s.rest, words("--isl 100 -m x"));
        assert_eq!(s.notes.len(), 3, "{:?}", s.notes);
        assert!(s.notes[0].starts_with("--log-level: "));
        let e = screen(&words("--isl 100 --scenario x"), PROFILE, &[]).unwrap_err();
        assert!(e.starts_with("--scenario: "), "{e}");
        assert!(screen(&words("--log-level"), PROFILE, &[]).is_err());
    }

    #[test]
    fn allowed_values_pass_and_others_are_refused() {
        assert!(screen(&words("--cache-bust none"), PROFILE, &[]).is_ok());
        assert!(screen(&words("--cache-bust=system_prefix"), PROFILE, &[]).is_err());
        // A negative number is a value, not a flag.
        assert_eq!(
            screen(&words("--wandb-tag -1 --isl 5"), PROFILE, &[])
                .unwrap()
                .rest,
            words("--isl 5")
        );
    }

    #[test]
    fn words_after_a_double_dash_are_left_alone() {
        let s = screen(&words("--isl 5 -- --log-level x"), PROFILE, &[]).unwrap();
        assert_eq!(s.rest, words("--isl 5 -- --log-level x"));
        assert!(s.notes.is_empty());
        // A subcommand's own flag of the same name is its own.
        let s = screen(&words("--sweep-type isl"), PROFILE, &["--sweep-type"]).unwrap();
        assert_eq!(s.rest, words("--sweep-type isl"));
    }

    #[test]
    fn no_spelling_is_listed_twice() {
        let mut all: Vec<&str> = PROFILE
            .iter()
            .flat_map(|e| e.names.iter().copied())
            .collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
