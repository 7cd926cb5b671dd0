//! Commands of GenAI-Perf, AIPerf and `vllm bench serve`, run as they are.
//!
//! Flags with the same meaning are aliases of ringperf's own (declared on them). The flags here
//! need more: a mapping onto ringperf's spec (`--num-prompts`, `--backend`, `--dataset-name`,
//! `--ignore-eos`…), or nothing to set, in which case they are accepted with a one-line note
//! that says why; a few ask for what ringperf does not do and are refused with the way to get
//! it. The README's porting table lists every one.

use clap::Args;

use crate::api::Kind;
use crate::plan::{PlanError, Spec};
use crate::units::parse_count;
use crate::workload::files::DatasetType;

/// Milliseconds as GenAI-Perf and AIPerf write them (a bare number), in ns.
fn parse_ms(s: &str) -> Result<u64, String> {
    let ms: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of milliseconds"))?;
    if !(0.0..=1e12).contains(&ms) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok((ms * 1e6) as u64)
}

/// The peers' flags that are not plain aliases (hidden from `--help`; see the README).
#[derive(Debug, Clone, Default, Args)]
pub struct PortArgs {
    // GenAI-Perf.
    /// GenAI-Perf: `openai` (the only kind ringperf speaks).
    #[arg(long, hide = true)]
    pub service_kind: Option<String>,
    /// GenAI-Perf: one measurement window of this many ms (when no request count is given).
    #[arg(short = 'p', long, hide = true, value_parser = parse_ms)]
    pub measurement_interval: Option<u64>,
    /// GenAI-Perf: perf_analyzer's stability criterion.
    #[arg(short = 's', long, hide = true)]
    pub stability_percentage: Option<f64>,
    /// GenAI-Perf: the export file's name.
    #[arg(long, hide = true)]
    pub profile_export_file: Option<String>,
    /// GenAI-Perf / AIPerf: more logging.
    #[arg(short = 'v', long, hide = true)]
    pub verbose: bool,
    /// GenAI-Perf: plots.
    #[arg(long, hide = true)]
    pub generate_plots: bool,
    /// GenAI-Perf / AIPerf: run the tokenizer's own Python code.
    #[arg(long, hide = true)]
    pub tokenizer_trust_remote_code: bool,
    /// GenAI-Perf: how requests pick among several models.
    #[arg(long, hide = true)]
    pub model_selection_strategy: Option<String>,
    /// GenAI-Perf: inputs per embeddings request.
    #[arg(short = 'b', long, alias = "batch-size", hide = true)]
    pub batch_size_text: Option<u32>,
    /// GenAI-Perf: checkpoints of `analyze`.
    #[arg(long, hide = true)]
    pub enable_checkpointing: bool,
    /// GenAI-Perf: perf_analyzer's thread count.
    #[arg(long, hide = true)]
    pub max_threads: Option<u32>,
    /// GenAI-Perf: arguments after `--`, for perf_analyzer.
    #[arg(last = true, hide = true)]
    pub passthrough: Vec<String>,

    // AIPerf.
    /// AIPerf: `none`, `simple` or `dashboard`.
    #[arg(long, alias = "ui", hide = true)]
    pub ui_type: Option<String>,
    /// AIPerf: a dataset it downloads (`sharegpt`).
    #[arg(long, hide = true)]
    pub public_dataset: Option<String>,
    /// AIPerf: how much it exports.
    #[arg(long, hide = true)]
    pub export_level: Option<String>,
    /// AIPerf: the export files' prefix.
    #[arg(long, hide = true)]
    pub profile_export_prefix: Option<String>,
    /// AIPerf: its worker processes.
    #[arg(long, hide = true)]
    pub workers_max: Option<usize>,
    /// AIPerf: its record processor processes.
    #[arg(long, hide = true)]
    pub record_processors: Option<usize>,
    /// AIPerf: pause between a session's turns, in ms.
    #[arg(long, hide = true, value_parser = parse_ms)]
    pub conversation_turn_delay_mean: Option<u64>,
    /// AIPerf: start a trace at its first timestamp.
    #[arg(long, hide = true)]
    pub fixed_schedule_auto_offset: bool,
    /// AIPerf: `false` sends the warm-up before every repeated run (--warmup-every-run).
    #[arg(long, hide = true, value_name = "BOOL")]
    pub profile_run_disable_warmup_after_first: Option<bool>,

    // vllm bench serve.
    /// vllm: the client backend (`openai`, `vllm`, `openai-chat`, `openai-embeddings`…).
    #[arg(long, hide = true)]
    pub backend: Option<String>,
    /// vllm: the server's host (with --port, when no --base-url).
    #[arg(long, hide = true)]
    pub host: Option<String>,
    /// vllm: the server's port.
    #[arg(long, hide = true)]
    pub port: Option<u16>,
    /// vllm: requests to send (each a distinct prompt); GenAI-Perf: distinct prompts.
    #[arg(long, hide = true, value_parser = parse_count)]
    pub num_prompts: Option<u64>,
    /// vllm: `random`, `sharegpt` or `custom` (with --dataset-path).
    #[arg(long, hide = true)]
    pub dataset_name: Option<String>,
    /// vllm: lengths drawn from [len·(1−r), len·(1+r)].
    #[arg(long, hide = true)]
    pub random_range_ratio: Option<f64>,
    /// vllm: tokens of one prefix every prompt starts with.
    #[arg(long, hide = true)]
    pub random_prefix_len: Option<u32>,
    /// vllm: ask the server to ignore the end of sequence (`ignore_eos: true`).
    #[arg(long, hide = true)]
    pub ignore_eos: bool,
    /// vllm: sampling temperature.
    #[arg(long, hide = true, allow_negative_numbers = true)]
    pub temperature: Option<f64>,
    /// vllm: nucleus sampling.
    #[arg(long, hide = true)]
    pub top_p: Option<f64>,
    /// vllm: top-k sampling.
    #[arg(long, hide = true, allow_negative_numbers = true)]
    pub top_k: Option<i64>,
    /// vllm: min-p sampling.
    #[arg(long, hide = true)]
    pub min_p: Option<f64>,
    /// vllm: the model name the server answers to (sent in each request).
    #[arg(long, hide = true)]
    pub served_model_name: Option<String>,
    /// vllm: write results.
    #[arg(long, hide = true)]
    pub save_result: bool,
    /// vllm: the results file's name.
    #[arg(long, hide = true)]
    pub result_filename: Option<String>,
    /// vllm: key=value pairs stored with the results.
    #[arg(long, hide = true, num_args = 1..)]
    pub metadata: Vec<String>,
    /// vllm: which metrics get percentiles.
    #[arg(long, hide = true)]
    pub percentile_metrics: Option<String>,
    /// vllm: which percentiles.
    #[arg(long, hide = true)]
    pub metric_percentiles: Option<String>,
    /// vllm: no progress bar.
    #[arg(long, hide = true)]
    pub disable_tqdm: bool,
    /// vllm: run the model's own Python code.
    #[arg(long, hide = true)]
    pub trust_remote_code: bool,
    /// vllm: tokenizer flavour.
    #[arg(long, hide = true)]
    pub tokenizer_mode: Option<String>,
    /// vllm: prefix of request ids.
    #[arg(long, hide = true)]
    pub request_id_prefix: Option<String>,
    /// vllm: a label for the results.
    #[arg(long, hide = true)]
    pub label: Option<String>,
}

fn refuse(m: String) -> PlanError {
    PlanError::Flag(m)
}

/// What the peers' flags the user gave mean for the run.
pub struct Ported {
    /// One line per flag that was accepted without effect, or mapped in a way worth saying.
    pub notes: Vec<String>,
    /// vllm's `--backend` streams; it sets `--streaming`.
    pub streaming: bool,
    /// The endpoint kind a `--backend` implies.
    pub kind: Option<Kind>,
    /// Turn off the live progress line.
    pub no_progress: bool,
}

impl PortArgs {
    /// Applies these flags to `spec`. `given` tells which of ringperf's own flags the user
    /// set (a peer's flag never overrides one of them).
    pub fn apply(&self, spec: &mut Spec, given: &Given) -> Result<Ported, PlanError> {
        let mut notes = Vec::new();
        let mut note = |flag: &str, why: &str| notes.push(format!("{flag}: {why}"));
        let mut out = Ported {
            notes: Vec::new(),
            streaming: false,
            kind: None,
            no_progress: false,
        };
        // GenAI-Perf.
        match self.service_kind.as_deref() {
            None | Some("openai") => {}
            Some(other) => {
                return Err(refuse(format!(
                    "--service-kind {other}: ringperf speaks the OpenAI API; serve the model \
                     behind an OpenAI-compatible frontend (vLLM, SGLang, trtllm-serve, Triton's \
                     OpenAI frontend) and use --endpoint-type chat or completions"
                )))
            }
        }
        if let Some(ns) = self.measurement_interval {
            if spec.load.request_count.is_none() && spec.load.benchmark_duration_ns.is_none() {
                spec.load.benchmark_duration_ns = Some(ns);
                note(
                    "--measurement-interval",
                    "measures one window of that length (--benchmark-duration); perf_analyzer's \
                     repeated windows are not needed: every request is recorded",
                );
            } else {
                note(
                    "--measurement-interval",
                    "no effect: the run is bounded by --request-count or --benchmark-duration",
                );
            }
        }
        if self.stability_percentage.is_some() {
            note(
                "--stability-percentage",
                "no effect: ringperf measures one window and records every request",
            );
        }
        if self.profile_export_file.is_some() || self.profile_export_prefix.is_some() {
            note(
                "--profile-export-file/--profile-export-prefix",
                "no effect: the files keep AIPerf's names (profile_export_ringperf.json, .csv, \
                 profile_export.jsonl) in --artifact-dir",
            );
        }
        if self.verbose {
            note(
                "--verbose",
                "no effect: ringperf always says what it does on stderr",
            );
        }
        if self.generate_plots {
            note("--generate-plots", "no effect: ringperf draws no plots yet");
        }
        if self.tokenizer_trust_remote_code || self.trust_remote_code {
            note(
                "--trust-remote-code",
                "no effect: ringperf runs no Python; tokenizer.json is all it needs",
            );
        }
        if self.model_selection_strategy.is_some() {
            note("--model-selection-strategy", "no effect: one model per run");
        }
        match self.batch_size_text {
            None | Some(1) => {}
            Some(n) => {
                return Err(refuse(format!(
                    "--batch-size-text {n}: ringperf sends one input per request"
                )))
            }
        }
        if self.enable_checkpointing {
            note(
                "--enable-checkpointing",
                "no effect: there is no `analyze` sweep to resume",
            );
        }
        if self.max_threads.is_some()
            || self.workers_max.is_some()
            || self.record_processors.is_some()
        {
            note(
                "--max-threads/--workers-max/--record-processors",
                "no effect: ringperf sizes its shard threads from the load and the host \
                 (--shards sets them)",
            );
        }
        if !self.passthrough.is_empty() {
            note(
                "-- (perf_analyzer arguments)",
                &format!("ignored: {}", self.passthrough.join(" ")),
            );
        }

        // AIPerf.
        match self.ui_type.as_deref() {
            None | Some("simple") | Some("dashboard") => {}
            Some("none") => out.no_progress = true,
            Some(other) => {
                return Err(refuse(format!(
                    "--ui-type {other:?}: expected none, simple or dashboard"
                )))
            }
        }
        if let Some(d) = &self.public_dataset {
            return Err(refuse(format!(
                "--public-dataset {d}: ringperf downloads no dataset; download it (ShareGPT: \
                 ShareGPT_V3_unfiltered_cleaned_split.json) and pass --input-file FILE \
                 --dataset-type sharegpt"
            )));
        }
        if self.export_level.is_some() {
            note(
                "--export-level",
                "no effect: ringperf writes the summary and every request's record",
            );
        }
        if let Some(ns) = self.conversation_turn_delay_mean {
            if !given.session_turn_delay {
                spec.workload.session_turn_delay_ns = ns;
            }
        }
        if self.fixed_schedule_auto_offset {
            note(
                "--fixed-schedule-auto-offset",
                "no effect: a replay always starts at the trace's first timestamp",
            );
        }

        // vllm bench serve.
        if let Some(b) = &self.backend {
            let kind = match b.as_str() {
                "openai" | "vllm" | "sglang" | "llama.cpp" | "lmdeploy" | "scalellm" => {
                    Kind::Completions
                }
                "openai-chat" | "vllm-chat" => Kind::Chat,
                "openai-embeddings" | "vllm-embeddings" => Kind::Embeddings,
                other => {
                    return Err(refuse(format!(
                        "--backend {other}: ringperf speaks the OpenAI API (backends openai, \
                         vllm, sglang, llama.cpp, lmdeploy, scalellm, openai-chat, \
                         openai-embeddings); for another API use --endpoint-type template"
                    )))
                }
            };
            out.kind = Some(kind);
            // vllm's backends always stream.
            out.streaming = kind != Kind::Embeddings;
        }
        if self.host.is_some() || self.port.is_some() {
            if given.url {
                note(
                    "--host/--port",
                    "no effect: --url (or --base-url) names the server",
                );
            } else {
                let host = self.host.as_deref().unwrap_or("127.0.0.1");
                let host = if host.contains(':') && !host.starts_with('[') {
                    format!("[{host}]")
                } else {
                    host.to_string()
                };
                spec.target.url = format!("http://{host}:{}", self.port.unwrap_or(8000));
            }
        }
        if let Some(n) = self.num_prompts {
            if !given.num_dataset_entries {
                spec.workload.num_dataset_entries = n;
            }
            if spec.load.request_count.is_none() && spec.load.benchmark_duration_ns.is_none() {
                spec.load.request_count = Some(n);
            }
        }
        match self.dataset_name.as_deref() {
            None | Some("random") => {}
            Some(name @ ("sharegpt" | "custom")) => {
                if spec.workload.input_file.is_none() {
                    return Err(refuse(format!(
                        "--dataset-name {name} needs --dataset-path FILE"
                    )));
                }
                spec.workload
                    .dataset_type
                    .get_or_insert(if name == "sharegpt" {
                        DatasetType::Sharegpt
                    } else {
                        DatasetType::Jsonl
                    });
            }
            Some(other) => {
                return Err(refuse(format!(
                    "--dataset-name {other}: not built in (random, sharegpt and custom are); \
                     write its prompts as JSONL lines {{\"prompt\": …}} and pass --input-file"
                )))
            }
        }
        if let Some(r) = self.random_range_ratio {
            if !(0.0..1.0).contains(&r) {
                return Err(refuse(format!(
                    "--random-range-ratio {r}: expected a ratio from 0 to below 1"
                )));
            }
            // A uniform draw over [len·(1−r), len·(1+r)] has standard deviation len·r/√3.
            let sd = |len: u32| (f64::from(len) * r / 3f64.sqrt()).round() as u32;
            let w = &mut spec.workload;
            if !given.isl_stddev {
                w.isl_stddev = sd(w.isl_mean);
            }
            if !given.osl_stddev {
                w.osl_stddev = w.osl_mean.map_or(0, sd);
            }
            note(
                "--random-range-ratio",
                "lengths are drawn from a normal distribution with the uniform range's mean \
                 and standard deviation (len·r/√3)",
            );
        }
        if let Some(n) = self.random_prefix_len.filter(|n| *n > 0) {
            spec.workload.num_prefix_prompts.get_or_insert(1);
            spec.workload.prefix_prompt_length = n;
        }
        let extra = &mut spec.workload.extra_inputs;
        if self.ignore_eos {
            extra.entry("ignore_eos").or_insert(true.into());
        }
        for (key, v) in [
            ("temperature", self.temperature.map(serde_json::Value::from)),
            ("top_p", self.top_p.map(serde_json::Value::from)),
            ("top_k", self.top_k.map(serde_json::Value::from)),
            ("min_p", self.min_p.map(serde_json::Value::from)),
        ] {
            if let Some(v) = v {
                extra.entry(key).or_insert(v);
            }
        }
        if let Some(name) = &self.served_model_name {
            spec.target.model = name.clone();
        }
        if self.save_result || self.result_filename.is_some() {
            note(
                "--save-result/--result-filename",
                "results are always written to --artifact-dir (--result-dir)",
            );
        }
        if !self.metadata.is_empty() || self.label.is_some() {
            note("--metadata/--label", "no effect");
        }
        if self.percentile_metrics.is_some() || self.metric_percentiles.is_some() {
            note(
                "--percentile-metrics/--metric-percentiles",
                "no effect: every metric gets p1 to p99.9",
            );
        }
        if self.disable_tqdm {
            out.no_progress = true;
        }
        if self.tokenizer_mode.is_some() {
            note(
                "--tokenizer-mode",
                "no effect: the tokenizer is tokenizer.json",
            );
        }
        if self.request_id_prefix.is_some() {
            note(
                "--request-id-prefix",
                "no effect: each request's X-Request-ID is its number in hexadecimal",
            );
        }
        out.notes = notes;
        Ok(out)
    }
}

/// Which of ringperf's own flags with defaults the user gave (a peer's flag never overrides
/// one of them).
#[derive(Debug, Default, Clone, Copy)]
pub struct Given {
    /// `--url`.
    pub url: bool,
    /// `--num-dataset-entries`.
    pub num_dataset_entries: bool,
    /// `--synthetic-input-tokens-stddev`.
    pub isl_stddev: bool,
    /// `--output-tokens-stddev`.
    pub osl_stddev: bool,
    /// `--session-turn-delay`.
    pub session_turn_delay: bool,
}
