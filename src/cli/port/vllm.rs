//! `vllm bench serve`: vLLM's flags, with vLLM's defaults, translated into ringperf's.
//!
//! What vLLM sends when a line leaves a flag out, and so what ringperf sends: 1,000 prompts
//! (`--num-prompts`) from its random dataset (1,024 input and 128 output tokens, `ignore_eos`
//! on), all at once (`--request-rate inf`, no `--max-concurrency`), to `/v1/completions` on
//! `127.0.0.1:8000`, streamed, with no temperature (the server's default), seed 0, after one probe request that waits up
//! to 600 s for the server. Long flags may be shortened as argparse allows (`--num-prompt`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{Dialect, Native, ParseError, Peer};

/// vLLM's `--random-mm-bucket-config`, a Python dict literal of `(height, width, frames):
/// probability` items.
fn parse_buckets(s: &str) -> Result<Vec<(u32, u32, u32, f64)>, String> {
    let body = s
        .trim()
        .strip_prefix('{')
        .and_then(|b| b.strip_suffix('}'))
        .ok_or("not a {…} dict")?;
    let mut out = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let open = rest.strip_prefix('(').ok_or("a key is not a (…) tuple")?;
        let (key, after) = open.split_once(')').ok_or("a tuple is not closed")?;
        let nums: Vec<u32> = key
            .split(',')
            .map(|n| n.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("({key}) holds something other than whole numbers"))?;
        let [h, w, f] = nums[..] else {
            return Err(format!("({key}) is not (height, width, frames)"));
        };
        let after = after
            .trim_start()
            .strip_prefix(':')
            .ok_or("a key has no value")?;
        let (value, next) = after.split_once(',').unwrap_or((after, ""));
        let p: f64 = value
            .trim()
            .parse()
            .map_err(|_| format!("{:?} is not a probability", value.trim()))?;
        if !(1..=crate::workload::media::MAX_SIDE).contains(&h)
            || !(1..=crate::workload::media::MAX_SIDE).contains(&w)
        {
            return Err(format!("({key}): sides must be from 1 to 8192"));
        }
        out.push((h, w, f, p));
        rest = next.trim();
    }
    Ok(out)
}

/// vLLM's `bench` group.
#[derive(Debug, Clone, Args)]
pub struct Bench {
    /// The benchmark.
    #[command(subcommand)]
    pub what: BenchWhat,
    /// Notes from reading the line (when it was given as `profile`).
    #[arg(skip)]
    pub notes: Vec<String>,
}

/// vLLM's benchmarks ringperf runs.
#[derive(Debug, Clone, Subcommand)]
pub enum BenchWhat {
    /// `vllm bench serve`: an online serving benchmark, as vLLM runs it.
    Serve(Box<Serve>),
}

/// vLLM's backends (`--backend`); the ones ringperf speaks map to an endpoint kind.
pub const BACKENDS: &[&str] = &[
    "vllm",
    "openai",
    "openai-chat",
    "openai-responses",
    "openai-audio",
    "openai-embeddings",
    "openai-embeddings-chat",
    "openai-embeddings-clip",
    "openai-embeddings-vlm2vec",
    "infinity-embeddings",
    "infinity-embeddings-clip",
    "vllm-pooling",
    "vllm-rerank",
    "sglang",
    "llama.cpp",
    "lmdeploy",
    "scalellm",
    "tgi",
    "tensorrt-llm",
    "deepspeed-mii",
];

/// `vllm bench serve`'s flags (vLLM's names and defaults).
#[derive(Debug, Clone, Args)]
#[command(infer_long_args = true)]
pub struct Serve {
    /// The client backend: openai and vllm (completions), openai-chat, openai-responses,
    /// openai-embeddings.
    #[arg(long, default_value = "openai")]
    pub backend: String,
    /// The label of the results (default: the backend).
    #[arg(long)]
    pub label: Option<String>,
    /// The server's URL, when not --host and --port.
    #[arg(long)]
    pub base_url: Option<String>,
    /// The server's host.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The server's port.
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// The API path.
    #[arg(long, default_value = "/v1/completions")]
    pub endpoint: String,
    /// Headers, KEY=VALUE.
    #[arg(long, num_args = 0..)]
    pub header: Vec<String>,
    /// The most requests in flight (default: none).
    #[arg(long)]
    pub max_concurrency: Option<u64>,
    /// The model (default: the first the server lists).
    #[arg(long)]
    pub model: Option<String>,
    /// Input length for every dataset that takes one.
    #[arg(long)]
    pub input_len: Option<u32>,
    /// Output length for every dataset that takes one.
    #[arg(long)]
    pub output_len: Option<u32>,
    /// The tokenizer (default: the model's).
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// vLLM's tokenizer flavour.
    #[arg(long)]
    pub tokenizer_mode: Option<String>,
    /// Beam search.
    #[arg(long)]
    pub use_beam_search: bool,
    /// Log-probabilities per token.
    #[arg(long, allow_negative_numbers = true)]
    pub logprobs: Option<i64>,
    /// Requests per second (inf: all at once).
    #[arg(long, default_value = "inf")]
    pub request_rate: f64,
    /// Gamma shape of the arrivals (1: Poisson).
    #[arg(long, default_value_t = 1.0)]
    pub burstiness: f64,
    /// Run the model's own Python code.
    #[arg(long)]
    pub trust_remote_code: bool,
    /// No progress bar.
    #[arg(long)]
    pub disable_tqdm: bool,
    /// Warm-up requests.
    #[arg(long, default_value_t = 0)]
    pub num_warmups: u64,
    /// vLLM's profiler.
    #[arg(long)]
    pub profile: bool,
    /// Save the results as JSON.
    #[arg(long)]
    pub save_result: bool,
    /// With them, every request's figures.
    #[arg(long)]
    pub save_detailed: bool,
    /// Append the results to the file.
    #[arg(long)]
    pub append_result: bool,
    /// KEY=VALUE pairs saved with the results.
    #[arg(long, num_args = 0..)]
    pub metadata: Vec<String>,
    /// Where the results file goes.
    #[arg(long)]
    pub result_dir: Option<PathBuf>,
    /// The results file's name.
    #[arg(long)]
    pub result_filename: Option<String>,
    /// Ask the server to ignore the end of sequence.
    #[arg(long)]
    pub ignore_eos: bool,
    /// Metrics with percentiles (ttft, tpot, itl, e2el).
    #[arg(long)]
    pub percentile_metrics: Option<String>,
    /// Which percentiles.
    #[arg(long, default_value = "99")]
    pub metric_percentiles: String,
    /// Service-level objectives, KEY:VALUE in ms (ttft, tpot, e2el).
    #[arg(long, num_args = 1..)]
    pub goodput: Vec<String>,
    /// The prefix of request ids.
    #[arg(long)]
    pub request_id_prefix: Option<String>,
    /// Sampling: top-p.
    #[arg(long)]
    pub top_p: Option<f64>,
    /// Sampling: top-k.
    #[arg(long, allow_negative_numbers = true)]
    pub top_k: Option<i64>,
    /// Sampling: min-p.
    #[arg(long)]
    pub min_p: Option<f64>,
    /// Sampling: temperature (default: none sent, the server's own).
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Sampling: frequency penalty.
    #[arg(long, allow_negative_numbers = true)]
    pub frequency_penalty: Option<f64>,
    /// Sampling: presence penalty.
    #[arg(long, allow_negative_numbers = true)]
    pub presence_penalty: Option<f64>,
    /// Sampling: repetition penalty.
    #[arg(long)]
    pub repetition_penalty: Option<f64>,
    /// A prefix shared by every prompt (random dataset), in tokens.
    #[arg(long)]
    pub common_prefix_len: Option<u32>,
    /// The model name sent in requests (default: --model).
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// LoRA modules to spread requests over.
    #[arg(long, num_args = 1..)]
    pub lora_modules: Vec<String>,
    /// A rate that rises over the run (linear, exponential).
    #[arg(long)]
    pub ramp_up_strategy: Option<String>,
    /// Its first rate.
    #[arg(long)]
    pub ramp_up_start_rps: Option<u64>,
    /// Its last rate.
    #[arg(long)]
    pub ramp_up_end_rps: Option<u64>,
    /// Wait this many seconds for the server, with a probe request (0: no probe).
    #[arg(long, default_value_t = 0)]
    pub ready_check_timeout_sec: u64,
    /// Probe requests per second beside the load.
    #[arg(long, default_value_t = 0.0)]
    pub probe_request_rate: f64,
    /// How LoRA modules are given to requests.
    #[arg(long)]
    pub lora_assignment: Option<String>,
    /// Replay a trace's own timestamps.
    #[arg(long, overrides_with = "no_self_timed")]
    pub self_timed: bool,
    /// Do not replay a trace's own timestamps.
    #[arg(long)]
    pub no_self_timed: bool,
    /// Arguments for the tokenizer's chat template.
    #[arg(long)]
    pub chat_template_kwargs: Option<String>,
    /// No tokenizer.
    #[arg(long)]
    pub skip_tokenizer_init: bool,
    /// Do not verify the server's certificate.
    #[arg(long)]
    pub insecure: bool,
    /// Multimodal chat transformation.
    #[arg(long)]
    pub enable_multimodal_chat: bool,
    /// Send a custom dataset's media from the client.
    #[arg(long)]
    pub custom_ensure_client_side_data: bool,
    /// JSON fields added to every request body.
    #[arg(long)]
    pub extra_body: Option<String>,
    /// Draw every request on a timeline.
    #[arg(long)]
    pub plot_timeline: bool,
    /// ITL thresholds of the timeline's colours, ms (default 25,50).
    #[arg(long)]
    pub timeline_itl_thresholds: Option<String>,
    /// Plot the dataset's lengths.
    #[arg(long)]
    pub plot_dataset_stats: bool,

    // The dataset.
    /// The seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Requests to send (-1: the whole dataset).
    #[arg(long, default_value_t = 1000, allow_negative_numbers = true)]
    pub num_prompts: i64,
    /// random, sharegpt, custom, prefix_repetition (others: refused).
    #[arg(long, default_value = "random")]
    pub dataset_name: String,
    /// Load the dataset without streaming.
    #[arg(long)]
    pub no_stream: bool,
    /// The dataset file.
    #[arg(long)]
    pub dataset_path: Option<PathBuf>,
    /// Do not repeat a dataset smaller than --num-prompts.
    #[arg(long)]
    pub no_oversample: bool,
    /// Send prompts without the model's chat template.
    #[arg(long)]
    pub skip_chat_template: bool,
    /// Keep the dataset's order.
    #[arg(long)]
    pub disable_shuffle: bool,
    /// Output length of the custom dataset's requests.
    #[arg(long, default_value_t = 256)]
    pub custom_output_len: u32,
    /// Output length of the ShareGPT dataset's requests (default: each reply's own).
    #[arg(long)]
    pub sharegpt_output_len: Option<u32>,
    /// Random dataset: input tokens.
    #[arg(long, default_value_t = 1024)]
    pub random_input_len: u32,
    /// Random dataset: output tokens.
    #[arg(long, default_value_t = 128)]
    pub random_output_len: u32,
    /// Random dataset: lengths from [len·(1−r), len·(1+r)] (or '{"input": r, "output": r}').
    #[arg(long, default_value = "0.0")]
    pub random_range_ratio: String,
    /// Random dataset: tokens of a prefix every prompt shares.
    #[arg(long, default_value_t = 0)]
    pub random_prefix_len: u32,
    /// Random dataset: inputs per embeddings request.
    #[arg(long, default_value_t = 1)]
    pub random_batch_size: u32,
    /// Prefix repetition: prefix tokens.
    #[arg(long, default_value_t = 256)]
    pub prefix_repetition_prefix_len: u32,
    /// Prefix repetition: suffix tokens.
    #[arg(long, default_value_t = 256)]
    pub prefix_repetition_suffix_len: u32,
    /// Prefix repetition: prefixes.
    #[arg(long, default_value_t = 10)]
    pub prefix_repetition_num_prefixes: usize,
    /// Prefix repetition: output tokens.
    #[arg(long, default_value_t = 128)]
    pub prefix_repetition_output_len: u32,
    /// Spec-Bench: output tokens.
    #[arg(long, default_value_t = 256)]
    pub spec_bench_output_len: u32,
    /// Spec-Bench: one category only.
    #[arg(long)]
    pub spec_bench_category: Option<String>,
    /// Sonnet dataset: input tokens.
    #[arg(long)]
    pub sonnet_input_len: Option<u32>,
    /// Sonnet dataset: output tokens.
    #[arg(long)]
    pub sonnet_output_len: Option<u32>,
    /// Sonnet dataset: prefix tokens.
    #[arg(long)]
    pub sonnet_prefix_len: Option<u32>,
    /// Timed traces: tokens per hash.
    #[arg(long)]
    pub timed_trace_chunk_hash_size: Option<u32>,
    /// Timed traces: seconds per timestamp unit.
    #[arg(long)]
    pub timed_trace_sec_multiplier: Option<f64>,
    /// Timed traces: the timestamp's key.
    #[arg(long)]
    pub timed_trace_label_timestamp: Option<String>,
    /// Timed traces: the input length's key.
    #[arg(long)]
    pub timed_trace_label_input_length: Option<String>,
    /// Timed traces: the output length's key.
    #[arg(long)]
    pub timed_trace_label_output_length: Option<String>,
    /// Timed traces: the hash ids' key.
    #[arg(long)]
    pub timed_trace_label_hash_ids: Option<String>,
    /// BlazEdit: least edit distance.
    #[arg(long)]
    pub blazedit_min_distance: Option<f64>,
    /// BlazEdit: most edit distance.
    #[arg(long)]
    pub blazedit_max_distance: Option<f64>,
    /// ASR: longest audio.
    #[arg(long)]
    pub asr_max_audio_len_sec: Option<f64>,
    /// ASR: shortest audio.
    #[arg(long)]
    pub asr_min_audio_len_sec: Option<f64>,
    /// Reranking: the model reranks natively.
    #[arg(long)]
    pub no_reranker: bool,
    /// Random multimodal: items per request.
    #[arg(long)]
    pub random_mm_base_items_per_request: Option<String>,
    /// Random multimodal: their range ratio.
    #[arg(long)]
    pub random_mm_num_mm_items_range_ratio: Option<String>,
    /// Random multimodal: limits per modality.
    #[arg(long)]
    pub random_mm_limit_mm_per_prompt: Option<String>,
    /// Random multimodal: item buckets.
    #[arg(long)]
    pub random_mm_bucket_config: Option<String>,
    /// BFCL: categories.
    #[arg(long)]
    pub bfcl_categories: Option<String>,
    /// SPEED-Bench: subset.
    #[arg(long)]
    pub speed_bench_dataset_subset: Option<String>,
    /// SPEED-Bench: output tokens.
    #[arg(long)]
    pub speed_bench_output_len: Option<u32>,
    /// SPEED-Bench: one category only.
    #[arg(long)]
    pub speed_bench_category: Option<String>,
    /// Hugging Face datasets: subset.
    #[arg(long)]
    pub hf_subset: Option<String>,
    /// Hugging Face datasets: split.
    #[arg(long)]
    pub hf_split: Option<String>,
    /// Hugging Face datasets: name.
    #[arg(long)]
    pub hf_name: Option<String>,
    /// Hugging Face datasets: output length.
    #[arg(long)]
    pub hf_output_len: Option<u32>,

    /// ringperf: start the built-in simulator and benchmark it (its flags as one string).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "",
          value_name = "SIM_FLAGS")]
    pub sim: Option<String>,
    /// ringperf: where ringperf's artifacts go (default: --result-dir, else artifacts/…).
    #[arg(long)]
    pub artifact_dir: Option<PathBuf>,
}

/// What `vllm bench serve` writes: its result JSON and its console summary.
pub use crate::report::peer::VllmResults as Results;

fn refused(m: impl Into<String>) -> ParseError {
    ParseError::Refused(m.into())
}

impl Bench {
    /// The native command line this one runs as.
    pub fn translate(self) -> Result<crate::cli::ProfileArgs, ParseError> {
        let BenchWhat::Serve(s) = self.what;
        let mut p = s.translate()?;
        let mut notes = self.notes;
        notes.append(&mut p.peer.notes);
        p.peer.notes = notes;
        Ok(p)
    }
}

impl Serve {
    /// vLLM's random-mm images as ringperf's flags, with vLLM's defaults and checks: the sizes
    /// (`WxH:weight,…`) and the fewest and most images a request carries.
    fn random_mm(&self) -> Result<(String, u32, u32), ParseError> {
        let base: u32 = match &self.random_mm_base_items_per_request {
            None => 1,
            Some(v) => v.trim().parse().map_err(|_| {
                refused(format!(
                    "--random-mm-base-items-per-request {v}: expected a whole number"
                ))
            })?,
        };
        let ratio: f64 = match &self.random_mm_num_mm_items_range_ratio {
            None => 0.0,
            Some(v) => v
                .trim()
                .parse()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| {
                    refused(format!(
                        "--random-mm-num-mm-items-range-ratio {v}: must be in [0, 1]"
                    ))
                })?,
        };
        let limits: serde_json::Map<String, serde_json::Value> =
            match &self.random_mm_limit_mm_per_prompt {
                None => serde_json::json!({"image": 255, "video": 1})
                    .as_object()
                    .cloned()
                    .expect("an object"),
                Some(v) => serde_json::from_str(v).map_err(|e| {
                    refused(format!(
                        "--random-mm-limit-mm-per-prompt {v}: expected a JSON object such as \
                         '{{\"image\": 3}}' ({e})"
                    ))
                })?,
            };
        let buckets = match &self.random_mm_bucket_config {
            None => vec![
                (256, 256, 1, 0.5),
                (720, 1280, 1, 0.5),
                (720, 1280, 16, 0.0),
            ],
            Some(v) => parse_buckets(v).map_err(|e| {
                refused(format!(
                    "--random-mm-bucket-config {v}: {e}: expected '{{(HEIGHT, WIDTH, FRAMES): \
                     PROBABILITY, …}}'"
                ))
            })?,
        };
        if buckets.iter().any(|b| b.3 < 0.0) {
            return Err(refused(
                "--random-mm-bucket-config: bucket probabilities must not be negative",
            ));
        }
        let live: Vec<_> = buckets.into_iter().filter(|b| b.3 > 0.0).collect();
        if live.is_empty() {
            return Err(refused(
                "--random-mm-bucket-config: no bucket has a probability above 0",
            ));
        }
        if live.iter().any(|b| b.2 != 1) {
            return Err(refused(
                "--random-mm-bucket-config: a bucket with more than 1 frame is a video, and \
                 ringperf makes images only: give those buckets probability 0",
            ));
        }
        let Some(limit) = limits.get("image").and_then(serde_json::Value::as_u64) else {
            return Err(refused(
                "--random-mm-limit-mm-per-prompt: no limit for \"image\" (vLLM stops here too)",
            ));
        };
        // vLLM's count: uniform on [floor(n(1 - r)), min(limit, ceil(n(1 + r)))].
        let most = (f64::from(base) * (1.0 + ratio)).ceil().min(limit as f64) as u32;
        let few = (f64::from(base) * (1.0 - ratio)).floor().max(0.0) as u32;
        if few > most {
            return Err(refused(format!(
                "random-mm: the fewest images a request carries ({few}) is above the most \
                 ({most}): raise --random-mm-limit-mm-per-prompt's image limit"
            )));
        }
        let sizes: Vec<String> = live
            .iter()
            .map(|(h, w, _, p)| format!("{w}x{h}:{p}"))
            .collect();
        Ok((sizes.join(","), few, most))
    }

    /// Translates the line into ringperf's flags, with vLLM's defaults.
    pub fn translate(&self) -> Result<crate::cli::ProfileArgs, ParseError> {
        let mut n = Native::default();
        // The API: the backend's kind, at --endpoint.
        let (kind, pooling) = match self.backend.as_str() {
            "openai" | "vllm" | "sglang" | "llama.cpp" | "lmdeploy" | "scalellm" | "tgi"
            | "tensorrt-llm" | "deepspeed-mii" => ("completions", false),
            "openai-chat" => ("chat", false),
            "openai-responses" => ("responses", false),
            "openai-embeddings" => ("embeddings", true),
            other if BACKENDS.contains(&other) => {
                return Err(refused(format!(
                    "--backend {other}: not spoken: ringperf speaks openai/vllm (completions), \
                     openai-chat, openai-responses and openai-embeddings"
                )))
            }
            other => {
                return Err(refused(format!(
                    "--backend {other}: not one of vLLM's backends (openai, vllm, openai-chat, \
                     openai-responses, openai-embeddings, …)"
                )))
            }
        };
        let path = self.endpoint.trim_end_matches('/');
        let fits = match kind {
            "chat" => path.ends_with("chat/completions"),
            "completions" => path.ends_with("completions") && !path.ends_with("chat/completions"),
            "responses" => path.ends_with("responses"),
            _ => path.ends_with("embeddings"),
        };
        if !fits {
            return Err(refused(format!(
                "--backend {} posts to {kind} endpoints, and --endpoint {} is not one (vLLM \
                 stops here too): give --endpoint {}",
                self.backend,
                self.endpoint,
                match kind {
                    "chat" => "/v1/chat/completions",
                    "completions" => "/v1/completions",
                    "responses" => "/v1/responses",
                    _ => "/v1/embeddings",
                }
            )));
        }
        n.set("--endpoint-type", kind)
            .set("--endpoint", &self.endpoint);
        if !pooling {
            n.on("--streaming");
        }
        // Where.
        match (&self.sim, &self.base_url) {
            (Some(flags), _) => {
                if flags.is_empty() {
                    n.on("--sim");
                } else {
                    n.on(&format!("--sim={flags}"));
                }
            }
            (None, Some(u)) => {
                n.set("--url", u);
            }
            (None, None) => {
                let host = if self.host.contains(':') && !self.host.starts_with('[') {
                    format!("[{}]", self.host)
                } else {
                    self.host.clone()
                };
                n.set("--url", format!("http://{host}:{}", self.port));
            }
        }
        for h in &self.header {
            let Some((k, v)) = h.split_once('=') else {
                return Err(refused(format!(
                    "--header {h}: vLLM's headers are KEY=VALUE"
                )));
            };
            n.set("-H", format!("{}: {}", k.trim(), v.trim()));
        }
        // The model: the name sent, and the tokenizer (the model's own, as vLLM's).
        let sent = self.served_model_name.as_ref().or(self.model.as_ref());
        if let Some(m) = sent {
            n.set("-m", m);
        }
        match (&self.tokenizer, &self.model) {
            (Some(t), _) => {
                n.set("--tokenizer", t);
            }
            (None, Some(m)) if self.served_model_name.is_some() => {
                n.set("--tokenizer-of", m);
            }
            _ => {}
        }
        // vLLM sends no probe request unless asked to wait for the server.
        if self.ready_check_timeout_sec == 0 {
            n.on("--no-preflight");
        } else {
            n.set(
                "--ready-check-timeout",
                format!("{}s", self.ready_check_timeout_sec),
            );
        }
        if self.insecure {
            n.on("--insecure");
        }
        if self.probe_request_rate > 0.0 {
            return Err(refused(format!(
                "--probe-request-rate {}: probe requests beside the load are not built in: run \
                     the probe as a second ringperf command against the same server at the same time",
                self.probe_request_rate
            )));
        }

        // The load: --num-prompts requests (-1: every line of the file, counted now).
        let file_backed = matches!(self.dataset_name.as_str(), "custom" | "spec_bench");
        let count = match self.num_prompts {
            n if n <= 0 && file_backed => {
                let path = self.dataset_path.as_ref().ok_or_else(|| {
                    refused(format!(
                        "--dataset-name {} needs --dataset-path FILE",
                        self.dataset_name
                    ))
                })?;
                let filter = self
                    .spec_bench_category
                    .as_ref()
                    .map(|c| ("category", c.as_str()));
                super::count_lines(path, filter)?
            }
            n if n >= 1 => n as u64,
            other => {
                return Err(refused(format!(
                    "--num-prompts {other}: expected 1 or more (-1: every line of a custom or \
                     spec_bench file)"
                )))
            }
        };
        n.set("--request-count", count);
        let rate = self.request_rate;
        if rate.is_nan() || rate <= 0.0 {
            return Err(refused(format!(
                "--request-rate {rate}: expected a positive rate or inf"
            )));
        }
        if self.burstiness.is_nan() || self.burstiness <= 0.0 {
            return Err(refused(format!(
                "--burstiness {}: vLLM asks for a positive burstiness",
                self.burstiness
            )));
        }
        match (rate.is_finite(), self.max_concurrency) {
            (false, Some(c)) => {
                n.set("--concurrency", c);
            }
            (false, None) => {
                n.set("--concurrency", count);
                n.note(
                    "load",
                    format!(
                        "every one of the {count} requests is sent at once, as vLLM sends them \
                         with no --request-rate and no --max-concurrency"
                    ),
                );
            }
            (true, cap) => {
                n.set("--request-rate", rate);
                if let Some(c) = cap {
                    n.set("--concurrency", c);
                }
                if self.burstiness == 1.0 {
                    n.set("--arrival", "poisson");
                } else {
                    n.set("--arrival", "gamma")
                        .set("--burstiness", self.burstiness);
                }
            }
        }
        if self.num_warmups > 0 {
            n.set("--warmup-request-count", self.num_warmups);
        }
        if !self.goodput.is_empty() {
            n.on("--goodput");
            n.argv.extend(self.goodput.iter().cloned());
        }
        if let Some(s) = &self.ramp_up_strategy {
            return Err(refused(format!(
                "--ramp-up-strategy {s}: a rate that rises request by request is not built in: \
                 ringperf ramps over time (--ramp-up DURATION, from 1/s to --request-rate), or \
                 run the rates as a sweep (--request-rate 1,2,4,8)"
            )));
        }
        if !self.lora_modules.is_empty() {
            return Err(refused(
                "--lora-modules: one model per run in ringperf: run each adapter (-m NAME) as a \
                 command of its own",
            ));
        }

        // The request bodies.
        let mut extra = serde_json::Map::new();
        if !pooling {
            // vLLM sends a temperature only when given one (it used to send 0): the server's
            // default applies, and vLLM says so.
            if self.temperature.is_none() {
                n.note(
                    "--temperature",
                    "no temperature is sent, as vLLM sends none without --temperature: the \
                     server's default applies (--temperature 0 for greedy decoding, vLLM's \
                     default before)"
                        .to_string(),
                );
            }
            for (k, v) in [
                ("temperature", self.temperature.map(serde_json::Value::from)),
                ("top_p", self.top_p.map(serde_json::Value::from)),
                ("top_k", self.top_k.map(serde_json::Value::from)),
                ("min_p", self.min_p.map(serde_json::Value::from)),
                (
                    "frequency_penalty",
                    self.frequency_penalty.map(serde_json::Value::from),
                ),
                (
                    "presence_penalty",
                    self.presence_penalty.map(serde_json::Value::from),
                ),
                (
                    "repetition_penalty",
                    self.repetition_penalty.map(serde_json::Value::from),
                ),
                ("logprobs", self.logprobs.map(serde_json::Value::from)),
            ] {
                if let Some(v) = v {
                    extra.insert(k.into(), v);
                }
            }
        }
        if let Some(body) = &self.extra_body {
            let v: serde_json::Value = serde_json::from_str(body)
                .map_err(|e| refused(format!("--extra-body: not JSON: {e}")))?;
            let serde_json::Value::Object(m) = v else {
                return Err(refused("--extra-body: expected a JSON object"));
            };
            extra.extend(m);
        }

        // The dataset.
        let random = matches!(self.dataset_name.as_str(), "random" | "random-mm");
        let ignore_eos = self.ignore_eos || (random && !pooling);
        if ignore_eos {
            extra.insert("ignore_eos".into(), true.into());
        }
        if self.dataset_path.is_some() && random {
            return Err(refused(
                "Cannot use 'random' dataset with --dataset-path: give --dataset-name (sharegpt, \
                 custom) for the file (vLLM stops here too)",
            ));
        }
        match self.dataset_name.as_str() {
            name @ ("random" | "random-mm") => {
                let isl = self.input_len.unwrap_or(self.random_input_len);
                let osl = self.output_len.unwrap_or(self.random_output_len);
                n.set("--synthetic-input-tokens-mean", isl);
                if !pooling {
                    n.set("--output-tokens-mean", osl);
                }
                let (ri, ro) = crate::cli::parse_range_ratio(&self.random_range_ratio)
                    .map_err(|e| refused(format!("--random-range-ratio {e}")))?;
                if ri > 0.0 || ro > 0.0 {
                    n.set(
                        "--random-range-ratio",
                        if ri == ro {
                            ri.to_string()
                        } else {
                            serde_json::json!({"input": ri, "output": ro}).to_string()
                        },
                    );
                }
                let prefix = self.common_prefix_len.unwrap_or(self.random_prefix_len);
                if prefix > 0 {
                    n.set("--num-prefix-prompts", 1)
                        .set("--prefix-prompt-length", prefix);
                }
                n.set("--num-dataset-entries", count);
                if self.random_batch_size > 1 {
                    n.set("--batch-size-text", self.random_batch_size);
                }
                if name == "random-mm" {
                    if kind != "chat" {
                        return Err(refused(
                            "--dataset-name random-mm sends its images in chat messages: give \
                             --backend openai-chat --endpoint /v1/chat/completions",
                        ));
                    }
                    let (sizes, few, most) = self.random_mm()?;
                    n.set("--image-sizes", sizes)
                        .set("--image-format", "jpeg")
                        .set("--batch-size-image", few)
                        .set("--batch-size-image-max", most);
                }
            }
            "prefix_repetition" => {
                let prefixes = self.prefix_repetition_num_prefixes.max(1);
                n.set(
                    "--synthetic-input-tokens-mean",
                    self.prefix_repetition_suffix_len,
                )
                .set(
                    "--output-tokens-mean",
                    self.output_len.unwrap_or(self.prefix_repetition_output_len),
                )
                .set("--num-prefix-prompts", prefixes)
                .set("--prefix-prompt-length", self.prefix_repetition_prefix_len);
                n.set("--num-dataset-entries", count);
                n.note(
                    "--dataset-name prefix_repetition",
                    format!(
                        "{prefixes} shared prefixes of {} tokens, each prompt's drawn at random \
                         (vLLM gives each prefix an equal share of the prompts)",
                        self.prefix_repetition_prefix_len
                    ),
                );
            }
            "spec_bench" => {
                let Some(path) = &self.dataset_path else {
                    return Err(refused(
                        "--dataset-name spec_bench needs --dataset-path FILE",
                    ));
                };
                n.set("--input-file", path.display())
                    .set("--dataset-type", "jsonl")
                    .set(
                        "--output-tokens-mean",
                        self.output_len.unwrap_or(self.spec_bench_output_len),
                    );
                if let Some(c) = &self.spec_bench_category {
                    n.set("--dataset-filter", format!("category={c}"));
                }
                n.set("--num-dataset-entries", count);
                if !self.skip_chat_template {
                    n.note(
                        "--dataset-name spec_bench",
                        "each question's first turn is sent as written (as with \
                         --skip-chat-template); vLLM would wrap it in the model's chat template \
                         first, a few tokens more",
                    );
                }
            }
            name @ ("sharegpt" | "custom") => {
                let Some(path) = &self.dataset_path else {
                    return Err(refused(format!(
                        "--dataset-name {name} needs --dataset-path FILE"
                    )));
                };
                n.set("--input-file", path.display()).set(
                    "--dataset-type",
                    if name == "sharegpt" {
                        "sharegpt"
                    } else {
                        "jsonl"
                    },
                );
                n.set("--num-dataset-entries", count);
                if name == "custom" {
                    n.set(
                        "--output-tokens-mean",
                        self.output_len.unwrap_or(self.custom_output_len),
                    );
                    if !self.skip_chat_template && kind != "chat" {
                        n.note(
                            "--dataset-name custom",
                            "each prompt is sent as written (as with --skip-chat-template); vLLM \
                             would wrap it in the model's chat template first, a few tokens more",
                        );
                    }
                } else if let Some(osl) = self.output_len.or(self.sharegpt_output_len) {
                    n.set("--output-tokens-mean", osl);
                    n.note(
                        "--sharegpt-output-len",
                        "asked of every request without a length of its own; ShareGPT's \
                         replies keep their own lengths",
                    );
                }
                if !self.disable_shuffle {
                    n.note(
                        "order",
                        "the file's prompts are sent in the file's order (vLLM shuffles them \
                         with --seed first; the same prompts either way)",
                    );
                }
                if self.no_oversample {
                    n.note(
                        "--no-oversample",
                        "a file with fewer entries than --num-prompts is cycled through (as \
                         vLLM does without the flag)",
                    );
                }
            }
            "hf" => {
                let Some(id) = self.dataset_path.as_ref().and_then(|p| p.to_str()) else {
                    return Err(refused("--dataset-name hf needs --dataset-path ORG/NAME"));
                };
                let rule = crate::workload::parquet::Rule::of(id)
                    .map_err(|why| refused(format!("--dataset-path {id}: {why}")))?;
                if rule.is_none() || self.hf_name.is_some() {
                    return Err(refused(format!(
                        "--dataset-path {id}: not one of the hub datasets ringperf reads as vLLM \
                         does (likaixin/InstructCoder, philschmid/mt-bench, AI-MO's, \
                         Aeala/ShareGPT_Vicuna_unfiltered): save its prompts as JSONL and pass \
                         --dataset-name custom --dataset-path FILE"
                    )));
                }
                if self.output_len.or(self.hf_output_len).is_some() {
                    return Err(refused(
                        "--hf-output-len/--output-len with --dataset-name hf: each request \
                         keeps the dataset's own output length in ringperf; drop the flag",
                    ));
                }
                // The hub's own Parquet conversion of the dataset: its first file.
                n.set(
                    "--input-file",
                    format!(
                        "hf://datasets/{id}@refs%2Fconvert%2Fparquet/{}/{}/0000.parquet",
                        self.hf_subset.as_deref().unwrap_or("default"),
                        self.hf_split.as_deref().unwrap_or("train")
                    ),
                )
                .set("--dataset-type", "parquet")
                .set("--num-dataset-entries", count);
                n.note(
                    "--dataset-name hf",
                    "rows are read from the first file of the hub's Parquet conversion, in its \
                     order (vLLM streams and shuffles them with --seed); prompts are sent as \
                     written, without the model's chat template",
                );
            }
            name @ ("custom_image" | "custom_audio") => {
                return Err(refused(format!(
                    "--dataset-name {name}: images and audio are not sent yet: ringperf sends \
                     text (--dataset-name random or custom)"
                )))
            }
            "random-rerank" => {
                return Err(refused(
                    "--dataset-name random-rerank: reranking endpoints are not spoken",
                ))
            }
            "speed_bench" => {
                return Err(refused(
                    "--dataset-name speed_bench: SPEED-Bench's files are not read: save its \
                     prompts as JSONL ({\"prompt\": …} a line) and pass --dataset-name custom \
                     --dataset-path FILE",
                ))
            }
            "timed_trace" => {
                return Err(refused(
                    "--dataset-name timed_trace: replay it as a mooncake trace: `ringperf \
                     profile --input-file FILE --fixed-schedule` (timestamps in ms, 512-token \
                     hash blocks)",
                ))
            }
            other => {
                return Err(refused(format!(
                    "--dataset-name {other}: not built in (random, prefix_repetition, sharegpt, \
                     custom and spec_bench are): save its prompts as JSONL ({{\"prompt\": …}} a \
                     line) and pass --dataset-name custom --dataset-path FILE"
                )))
            }
        }
        n.set("--random-seed", self.seed);
        if !extra.is_empty() {
            n.set(
                "--extra-inputs",
                serde_json::Value::Object(extra).to_string(),
            );
        }
        if self.disable_tqdm {
            n.on("--no-progress");
        }
        match (&self.artifact_dir, &self.result_dir) {
            (Some(d), _) | (None, Some(d)) => {
                n.set("--artifact-dir", d.display());
            }
            (None, None) => {}
        }

        // Flags with nothing to change in what is sent.
        for (given, flag, why) in [
            (
                self.trust_remote_code,
                "--trust-remote-code",
                "no effect: ringperf runs no Python",
            ),
            (
                self.tokenizer_mode.is_some(),
                "--tokenizer-mode",
                "no effect: the tokenizer is tokenizer.json",
            ),
            (
                self.use_beam_search,
                "--use-beam-search",
                "no effect: vLLM's client sends nothing for it either",
            ),
            (
                self.profile,
                "--profile",
                "no effect: ringperf does not start vLLM's profiler; POST /start_profile and \
                 /stop_profile around the run yourself",
            ),
            (
                self.request_id_prefix.is_some(),
                "--request-id-prefix",
                "no effect: each request's X-Request-ID is its number in hexadecimal",
            ),
            (
                self.plot_dataset_stats,
                "--plot-dataset-stats",
                "no effect: the report's charts show the lengths sent",
            ),
            (
                self.no_stream,
                "--no-stream",
                "no effect: files are read line by line",
            ),
            (
                self.chat_template_kwargs.is_some(),
                "--chat-template-kwargs",
                "no effect: ringperf applies no chat template; prompts are sent as written",
            ),
            (
                self.skip_tokenizer_init,
                "--skip-tokenizer-init",
                "no effect: the tokenizer counts tokens on the client only",
            ),
            (
                self.lora_assignment.is_some(),
                "--lora-assignment",
                "no effect without --lora-modules",
            ),
            (
                self.self_timed || self.no_self_timed,
                "--self-timed",
                "no effect: only timed traces carry timestamps",
            ),
            (
                self.enable_multimodal_chat || self.custom_ensure_client_side_data,
                "--enable-multimodal-chat",
                "no effect: images go in the chat message's content parts either way",
            ),
            (
                self.skip_chat_template && self.dataset_name != "custom",
                "--skip-chat-template",
                "prompts are always sent as written",
            ),
        ] {
            if given {
                n.note(flag, why);
            }
        }
        for (name, given) in [
            ("--hf-subset", self.hf_subset.is_some()),
            ("--hf-split", self.hf_split.is_some()),
            ("--hf-name", self.hf_name.is_some()),
            ("--hf-output-len", self.hf_output_len.is_some()),
        ] {
            if given && self.dataset_name != "hf" {
                n.note(name, "no effect: no Hugging Face dataset is read");
            }
        }

        // What vLLM writes.
        let timeline = if self.plot_timeline {
            let (a, b) = match &self.timeline_itl_thresholds {
                Some(t) => {
                    let v: Vec<f64> = t
                        .split(',')
                        .map(|x| x.trim().parse::<f64>())
                        .collect::<Result<_, _>>()
                        .map_err(|_| {
                            refused(format!(
                                "--timeline-itl-thresholds {t}: expected two numbers of ms, e.g. 25,50"
                            ))
                        })?;
                    match v[..] {
                        [a, b] if a > 0.0 && b > a => (a, b),
                        _ => {
                            return Err(refused(format!(
                                "--timeline-itl-thresholds {t}: expected two rising numbers of ms"
                            )))
                        }
                    }
                }
                None => (25.0, 50.0),
            };
            Some((a, b))
        } else {
            None
        };
        let metrics: Vec<String> = self
            .percentile_metrics
            .clone()
            .unwrap_or_else(|| if pooling { "e2el" } else { "ttft,tpot,itl" }.into())
            .split(',')
            .map(|m| m.trim().to_string())
            .collect();
        if let Some(bad) = metrics
            .iter()
            .find(|m| !matches!(m.as_str(), "ttft" | "tpot" | "itl" | "e2el"))
        {
            return Err(refused(format!(
                "--percentile-metrics: {bad:?} is not one of ttft, tpot, itl, e2el"
            )));
        }
        let percentiles: Vec<f64> = self
            .metric_percentiles
            .split(',')
            .map(|p| p.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .ok()
            .filter(|v: &Vec<f64>| v.iter().all(|p| (0.0..=100.0).contains(p)))
            .ok_or_else(|| {
                refused(format!(
                    "--metric-percentiles {}: expected percentiles from 0 to 100, e.g. 50,99",
                    self.metric_percentiles
                ))
            })?;
        let mut metadata = Vec::new();
        for m in &self.metadata {
            let (k, v) = m
                .split_once('=')
                .ok_or_else(|| refused(format!("--metadata {m}: vLLM's metadata is KEY=VALUE")))?;
            metadata.push((k.trim().to_string(), v.trim().to_string()));
        }
        let results = Results {
            save: self.save_result || self.append_result,
            append: self.append_result,
            detailed: self.save_detailed,
            dir: self.result_dir.clone(),
            filename: self.result_filename.clone(),
            label: self.label.clone().unwrap_or_else(|| self.backend.clone()),
            backend: self.backend.clone(),
            model_id: self.model.clone(),
            tokenizer_id: self.tokenizer.clone().or_else(|| self.model.clone()),
            num_prompts: count,
            request_rate: rate,
            burstiness: self.burstiness,
            max_concurrency: self.max_concurrency,
            metadata,
            percentile_metrics: metrics,
            percentiles,
            pooling,
        };
        n.finish(Peer {
            dialect: Dialect::Vllm,
            vllm: Some(results),
            timeline,
            ..Peer::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn serve(line: &str) -> Result<crate::cli::ProfileArgs, ParseError> {
        let argv = ["ringperf", "bench", "serve"]
            .into_iter()
            .map(String::from)
            .chain(line.split_whitespace().map(String::from));
        let cli = Cli::try_parse_from(argv).map_err(ParseError::Clap)?;
        let Command::Bench(b) = cli.command else {
            panic!("not bench")
        };
        b.translate()
    }

    #[test]
    fn the_defaults_are_vllms() {
        let p = serve("").unwrap();
        let line = p.peer.native.clone().unwrap();
        for want in [
            "--endpoint-type completions",
            "--endpoint /v1/completions",
            "--streaming",
            "--url http://127.0.0.1:8000",
            "--request-count 1000",
            "--concurrency 1000",
            "--synthetic-input-tokens-mean 1024",
            "--output-tokens-mean 128",
            "--num-dataset-entries 1000",
            "--random-seed 0",
            "--no-preflight",
        ] {
            assert!(line.contains(want), "{want} missing from {line}");
        }
        let (spec, _) = p.spec_and_notes().unwrap();
        assert!(spec.workload.extra_inputs.get("temperature").is_none());
        assert!(p
            .peer
            .notes
            .iter()
            .any(|n| n.contains("no temperature is sent")));
        assert_eq!(spec.workload.extra_inputs["ignore_eos"], true);
        assert!(p.peer.notes.iter().any(|n| n.contains("at once")));
    }

    #[test]
    fn a_rate_a_cap_and_prefixes_of_long_flags() {
        let p = serve(
            "--backend openai-chat --endpoint /v1/chat/completions --request-rate 5 \
             --max-concurrency 8 --burstiness 0.5 --num-prompt 40 --random-input 100",
        )
        .unwrap();
        let (spec, _) = p.spec_and_notes().unwrap();
        assert_eq!(spec.target.kind, crate::api::Kind::Chat);
        assert_eq!(spec.load.request_rate, Some(5.0));
        assert_eq!(spec.load.concurrency, Some(8));
        assert_eq!(spec.load.arrival, crate::arrival::Arrival::Gamma);
        assert_eq!(spec.load.burstiness, 0.5);
        assert_eq!(spec.load.request_count, Some(40));
        assert_eq!(spec.workload.isl_mean, 100);
    }

    #[test]
    fn what_vllm_would_refuse_or_ringperf_cannot_send_stops_with_one_line() {
        for (line, says) in [
            ("--backend openai-chat", "--endpoint"),
            ("--dataset-path x.json", "Cannot use 'random'"),
            (
                "--dataset-name hf --dataset-path org/x",
                "--dataset-name custom",
            ),
            ("--dataset-name sonnet", "not built in"),
            ("--ramp-up-strategy linear", "--ramp-up"),
            ("--lora-modules a b", "one model per run"),
            ("--backend openai-audio", "not spoken"),
            ("--percentile-metrics ttft,foo", "foo"),
        ] {
            match serve(line) {
                Err(ParseError::Refused(m)) => {
                    assert!(m.contains(says), "{line}: {m}");
                    assert!(!m.contains('\n'), "{line}: one line: {m}");
                }
                other => panic!("{line}: {:?}", other.map(|p| p.peer.native)),
            }
        }
    }
}
