//! Command-line interface: one definition per flag, doc comments as help text.
//!
//! Flag names follow GenAI-Perf and AIPerf so commands port over; aliases
//! cover the spellings of both. Flags only parse here: [`crate::plan`] validates them into a
//! run plan before any thread starts.

use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::api::Kind;
use crate::arrival::Arrival;
use crate::plan::{
    EngineSpec, LoadSpec, OutputSpec, PlanError, Secret, Spec, TargetSpec, WorkloadSpec,
};
use crate::runtime::Driver;
use crate::units::{parse_count, parse_duration_ns, TimeDist};
use crate::workload::files::DatasetType;

pub mod port;

/// `ValueEnum` for a plain enum of the core, so that clap stays in this module: its values,
/// each with its name on the command line and its help.
macro_rules! value_enum {
    ($t:ty { $($v:expr => $name:literal: $help:literal),+ $(,)? }) => {
        impl ValueEnum for $t {
            fn value_variants<'a>() -> &'a [Self] {
                &[$($v),+]
            }
            fn to_possible_value(&self) -> Option<PossibleValue> {
                [$(($v, $name, $help)),+]
                    .into_iter()
                    .find(|(v, _, _)| v == self)
                    .map(|(_, name, help)| PossibleValue::new(name).help(help))
            }
        }
    };
}

value_enum!(Arrival {
    Arrival::Constant => "constant": "Evenly spaced: every 1/rate",
    Arrival::Poisson => "poisson": "Exponential gaps (coefficient of variation 1)",
    Arrival::Gamma => "gamma": "Gamma gaps with shape --burstiness (1 = Poisson; larger is smoother)",
});

value_enum!(Driver {
    Driver::Auto => "auto": "io_uring where the kernel allows it, else epoll",
    Driver::Uring => "uring": "io_uring only; an error where it is refused",
    Driver::Epoll => "epoll": "epoll (monoio's legacy driver)",
});

value_enum!(DatasetType {
    DatasetType::Jsonl => "jsonl": "One JSON object per line: text (or prompt) or messages, optional max_tokens, timestamp (ms)",
    DatasetType::Sharegpt => "sharegpt": "ShareGPT JSON: the first human turn is the prompt, the reply's length the output length",
    DatasetType::Mooncake => "mooncake": "Mooncake trace JSONL: timestamp (ms), input_length, output_length, hash_ids",
    DatasetType::Parquet => "parquet": "Parquet, as the Hugging Face hub converts datasets: each row read as a jsonl line (or by vLLM's rule for the hub datasets it knows)",
});

/// AIPerf's names for the same formats (`--custom-dataset-type`).
fn parse_dataset_type(s: &str) -> Result<DatasetType, String> {
    match s {
        "single_turn" => Ok(DatasetType::Jsonl),
        "mooncake_trace" => Ok(DatasetType::Mooncake),
        _ => DatasetType::from_str(s, true).map_err(|_| {
            format!("{s:?}: expected jsonl (single_turn), sharegpt, mooncake (mooncake_trace) or parquet")
        }),
    }
}

impl ValueEnum for Kind {
    fn value_variants<'a>() -> &'a [Self] {
        &Kind::ALL
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()).help(self.about()))
    }
}

/// ringperf: measure OpenAI-compatible LLM servers with a client that is never the limit.
#[derive(Debug, Parser)]
#[command(name = "ringperf", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Benchmark a server (or, with --sim, the built-in simulator).
    Profile(Box<ProfileArgs>),
    /// Run the built-in OpenAI-compatible simulator.
    Sim(Box<SimArgs>),
    /// Check this host for a planned run: open files, ports, io_uring, CPU governor, busy
    /// CPUs and what keeps them busy, NVML, the clock source. Exits 2 on a blocker.
    Doctor(DoctorArgs),
    /// Rebuild report.html and plots/ from the artifacts of an earlier run, sweep or repeated
    /// runs (the folder given to --artifact-dir).
    Report {
        /// The artifact folder.
        dir: PathBuf,
    },
    /// Merge the runs of one load split across nodes (--node-count) into one report: the
    /// nodes' histograms added, counters summed, throughputs over the union of their windows,
    /// per-request exports concatenated, and a verdict over every node. Each folder is one
    /// node's --artifact-dir (a run's, or a sweep's: merged point by point). Exits 4 when a
    /// node is missing or failed (named in the report).
    Merge {
        /// The nodes' artifact folders.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Where the merged artifacts go.
        #[arg(long, value_name = "DIR")]
        artifact_dir: PathBuf,
    },
    /// Compare runs, repeated runs and sweeps side by side: the Pareto fronts of throughput
    /// against TTFT, ITL, latency and tokens per user over every folder's points, and each
    /// point the folders share figure by figure against the first (the baseline), with the
    /// change and whether it is significant. Writes compare.html, compare.csv and
    /// compare.json.
    Compare {
        /// The artifact folders (a run's, repeated runs' or a sweep's); the first is the
        /// baseline.
        #[arg(required = true, num_args = 2..)]
        dirs: Vec<PathBuf>,
        /// A folder's name in the comparison, once per folder in their order (default: the
        /// folder's own name).
        #[arg(long = "label", value_name = "LABEL")]
        labels: Vec<String>,
        /// Where the comparison's files go.
        #[arg(long, value_name = "DIR", default_value = "compare")]
        artifact_dir: PathBuf,
    },
    /// What a mooncake trace offers a prefix cache, before replaying it (AIPerf's
    /// `analyze-trace`): input, output, context and unique prompt lengths, unique prefixes,
    /// the prefix reuse ratio and each request's hit rate with a cache that never evicts.
    AnalyzeTrace {
        /// The trace (JSONL: `timestamp`, `input_length`, `output_length`, `hash_ids`).
        input_file: PathBuf,
        /// Tokens per hash id (AIPerf's default).
        #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        block_size: u64,
        /// Also write the analysis as JSON here (AIPerf's layout).
        #[arg(long, value_name = "PATH")]
        output_file: Option<PathBuf>,
    },
    /// `vllm bench serve`, with vLLM's flags and defaults (see docs/porting.md).
    Bench(Box<port::vllm::Bench>),
    /// GuideLLM's `benchmark [run]` (0.3 to 0.6), with its flags and defaults.
    Benchmark(Box<port::guidellm::Benchmark>),
    /// GuideLLM's `run` (0.7 and later: `--backend kind=openai_http,target=…`).
    Run(Box<port::guidellm::Run>),
    /// GenAI-Perf's `analyze`: a sweep over --sweep-type (concurrency, request_rate,
    /// input_sequence_length, num_dataset_entries, batch_size) and --sweep-range or
    /// --sweep-list, with `profile`'s flags; writes analyze_export_genai_perf.csv.
    Analyze(Box<AnalyzeArgs>),
    /// Print a shell completion script (e.g. `ringperf completions bash >
    /// /etc/bash_completion.d/ringperf`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print a manual page in roff (e.g. `ringperf man profile > ringperf-profile.1; man
    /// ./ringperf-profile.1`).
    Man {
        /// The subcommand whose page to print (default: ringperf's own).
        subcommand: Option<String>,
    },
}

/// Everything `ringperf profile` takes.
#[derive(Debug, Clone, Args)]
#[command(after_help = PLACEMENT_HELP)]
pub struct ProfileArgs {
    /// Target server.
    #[command(flatten, next_help_heading = "Target")]
    pub target: TargetArgs,
    /// Load shape.
    #[command(flatten, next_help_heading = "Load")]
    pub load: LoadArgs,
    /// Sweeps and repeats.
    #[command(flatten, next_help_heading = "Sweeps and repeats")]
    pub sweep: SweepArgs,
    /// Prompts and outputs.
    #[command(flatten, next_help_heading = "Workload")]
    pub workload: WorkloadArgs,
    /// Where results go.
    #[command(flatten, next_help_heading = "Output")]
    pub output: OutputArgs,
    /// The client engine.
    #[command(flatten, next_help_heading = "Engine")]
    pub engine: EngineArgs,
    /// GPU telemetry.
    #[command(flatten, next_help_heading = "Telemetry")]
    pub telemetry: TelemetryArgs,
    /// Flags of GenAI-Perf and AIPerf (hidden; see docs/porting.md).
    #[command(flatten)]
    pub port: port::PortArgs,
    /// What a peer's command line asked for beyond these flags (set by the translation).
    #[arg(skip)]
    pub peer: port::Peer,
    /// Start the built-in simulator in this process and benchmark it. Takes the simulator's
    /// own flags as one string, e.g. --sim="--ttft 50ms --itl 10ms".
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "",
          value_name = "SIM_FLAGS", help_heading = "Target")]
    pub sim: Option<String>,
}

/// GenAI-Perf's `analyze`: `profile`'s flags and the sweep.
#[derive(Debug, Clone, Args)]
pub struct AnalyzeArgs {
    /// Everything `profile` takes.
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// What to sweep: concurrency, request_rate, input_sequence_length, num_dataset_entries
    /// or batch_size [default: concurrency].
    #[arg(long, value_name = "TYPE")]
    pub sweep_type: Option<String>,
    /// MIN:MAX (powers of two between them) or MIN:MAX:STEP [default: 1:1024].
    #[arg(long, value_name = "RANGE")]
    pub sweep_range: Option<String>,
    /// The values, comma-separated.
    #[arg(long, value_name = "LIST")]
    pub sweep_list: Option<String>,
}

impl AnalyzeArgs {
    /// The sweep as `profile` runs it, with GenAI-Perf's summary CSV.
    pub fn translate(self) -> Result<ProfileArgs, port::ParseError> {
        use crate::plan::sweep::Axis;
        let refused = |m: String| port::ParseError::Refused(m);
        let ty = self.sweep_type.as_deref().unwrap_or("concurrency");
        let axis = match ty {
            "concurrency" => Axis::Concurrency,
            "request_rate" => Axis::RequestRate,
            "input_sequence_length" => Axis::InputSequenceLength,
            "num_dataset_entries" => Axis::NumDatasetEntries,
            "batch_size" => Axis::BatchSize,
            other => {
                return Err(refused(format!(
                    "--sweep-type {other}: expected concurrency, request_rate, \
                         input_sequence_length, num_dataset_entries or batch_size"
                )))
            }
        };
        let values: Vec<f64> = match (&self.sweep_list, &self.sweep_range) {
            (Some(_), Some(_)) => {
                return Err(refused(
                    "give --sweep-range or --sweep-list, not both".into(),
                ))
            }
            (Some(list), None) => list
                .split(',')
                .map(|v| v.trim().parse::<f64>())
                .collect::<Result<_, _>>()
                .map_err(|_| refused(format!("--sweep-list {list}: expected numbers")))?,
            (None, range) => {
                let range = range.as_deref().unwrap_or("1:1024");
                let bad = || {
                    refused(format!(
                        "--sweep-range {range}: expected MIN:MAX or MIN:MAX:STEP"
                    ))
                };
                let parts: Vec<u64> = range
                    .split(':')
                    .map(|v| v.trim().parse::<u64>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| bad())?;
                match parts[..] {
                    [lo, hi] if lo >= 1 && hi > lo => {
                        if axis == Axis::Concurrency
                            && !(lo.is_power_of_two() && hi.is_power_of_two())
                        {
                            return Err(refused(format!(
                                "--sweep-range {range}: min/max values must be powers of 2 when \
                                     sweeping concurrency (as GenAI-Perf asks)"
                            )));
                        }
                        let mut v = Vec::new();
                        let mut x = lo;
                        while x <= hi {
                            v.push(x as f64);
                            x = x.saturating_mul(2);
                        }
                        v
                    }
                    [lo, hi, step] if lo >= 1 && hi > lo && step >= 1 => {
                        if axis == Axis::Concurrency {
                            return Err(refused(format!(
                                "--sweep-range {range}: step is not supported when sweeping \
                                     concurrency (as GenAI-Perf says)"
                            )));
                        }
                        (lo..=hi).step_by(step as usize).map(|x| x as f64).collect()
                    }
                    _ => return Err(bad()),
                }
            }
        };
        if values.is_empty() || values.iter().any(|v| v.is_nan() || *v <= 0.0) {
            return Err(refused("every sweep value must be above 0".into()));
        }
        let mut p = self.profile;
        let points = Points(values);
        match axis {
            Axis::Concurrency => p.load.concurrency = Some(points),
            Axis::RequestRate => p.load.request_rate = Some(points),
            _ => p.sweep.workload_axis = Some((axis, points.0)),
        }
        p.peer.genai_perf_analyze = true;
        p.peer.dialect = port::Dialect::GenaiPerf;
        p.port.genai_perf_line = true;
        Ok(p)
    }
}

/// The server and how to talk to it.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// Model name sent in every request (default: the first model the server lists at
    /// /v1/models; `ringperf-sim` with --sim).
    #[arg(short = 'm', long = "model", visible_alias = "model-names", num_args = 1..)]
    pub model: Vec<String>,
    /// Server URL: http(s)://host:port (a path prefix is kept) [default: http://localhost:8000].
    /// Repeat it for data-parallel replicas of one model without a load balancer: requests
    /// are spread over them by --url-strategy, and the report gives figures per server.
    #[arg(short = 'u', long, action = clap::ArgAction::Append)]
    pub url: Vec<String>,
    /// How requests are spread over several --url: round-robin (request i to server i mod N)
    /// or least-in-flight (to the server with the fewest of the shard's requests in flight).
    #[arg(long, value_enum, default_value = "round-robin")]
    pub url_strategy: crate::plan::target::UrlStrategy,
    /// Open connections from this source address (repeatable: connections take them in
    /// turn), so that one host holds more connections than the ~28,000 ephemeral ports of
    /// one address allow. The addresses must be this host's.
    #[arg(long, value_name = "IP")]
    pub local_address: Vec<std::net::IpAddr>,
    /// API shape: chat, completions, embeddings, responses, template, nim_rankings,
    /// hf_tei_rankings, cohere_rankings, image_generation, huggingface_generate (TGI);
    /// GenAI-Perf's kserve and generate speak Triton's generate extension [default: the kind
    /// --endpoint or --url names, else chat].
    #[arg(long, value_name = "KIND")]
    pub endpoint_type: Option<String>,
    /// Request path, overriding the endpoint type's default (e.g. /v1/chat/completions);
    /// `{model}` is replaced by the model name.
    #[arg(long, visible_alias = "custom-endpoint")]
    pub endpoint: Option<String>,
    /// With --endpoint-type template: a JSON body (a file, or the JSON itself) with
    /// `{{prompt}}`, `{{max_tokens}}` and `{{model}}`, each replaced by a JSON value
    /// (`"inputs": {{prompt}}`).
    #[arg(long, value_name = "FILE|JSON")]
    pub request_template: Option<String>,
    /// With --endpoint-type template: JSON pointer to the new text in each event (or in the
    /// whole body), e.g. `/token/text` for TGI, `/text_output` for Triton.
    #[arg(long, default_value = "/text")]
    pub response_text_pointer: String,
    /// With --endpoint-type template: JSON pointer to the output token count, when the server
    /// reports one (e.g. `/details/generated_tokens`).
    #[arg(long)]
    pub response_tokens_pointer: Option<String>,
    /// Ask for a streamed response (server-sent events); needed for TTFT and ITL.
    #[arg(long)]
    pub streaming: bool,
    /// API key, sent as `Authorization: Bearer …`. Never written to artifacts or logs.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Extra header, `Name: value` (repeatable). Values are never written to artifacts.
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// PEM file with CA certificates to trust for https:// (instead of the web PKI roots).
    #[arg(long)]
    pub ca_cert: Option<PathBuf>,
    /// Do not verify the server's certificate (https://).
    #[arg(long)]
    pub insecure: bool,
    /// Time allowed to open a connection (and finish TLS).
    #[arg(long, value_parser = parse_duration_ns, default_value = "10s", value_name = "DURATION")]
    pub connect_timeout: u64,
    /// Empty the server's prefix cache before the run (vLLM's POST /reset_prefix_cache, which
    /// vLLM serves with VLLM_SERVER_DEV_MODE=1; else SGLang's POST /flush_cache), so that a run
    /// does not find the prompts an earlier run with the same seed left cached.
    #[arg(long)]
    pub reset_prefix_cache: bool,
    /// Skip the checks before the run (GET /v1/models and one probe request, neither
    /// measured), for servers that must see nothing but the measured requests.
    #[arg(long)]
    pub no_preflight: bool,
    /// Wait this long for the server to come up (it refuses connections or answers 503)
    /// before the run, checking once a second (default: no wait).
    #[arg(long, value_parser = parse_duration_ns,
          default_value = "0s", value_name = "DURATION")]
    pub ready_check_timeout: u64,
    /// Time allowed for a whole request, from send to last byte.
    #[arg(long, visible_alias = "request-timeout-seconds", value_parser = parse_duration_ns,
          default_value = "600s", value_name = "DURATION")]
    pub request_timeout: u64,
}

/// How much load, for how long.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Requests kept in flight at all times (closed loop), across all shards; with
    /// --request-rate, a cap on requests in flight (default: closed loop at 1, no cap with a
    /// rate). A list or range sweeps: `1,4,16,64`, `1..1024x2` (doubling up to 1024),
    /// `8..64+8`; one run per point, each in its own folder.
    #[arg(long, value_parser = parse_count_points, value_name = "N[,N..]")]
    pub concurrency: Option<Points>,
    /// Open loop: send this many requests per second, on a schedule fixed in advance and
    /// measured from each request's intended send time (`inf`: no rate, closed loop). A list
    /// or range sweeps, as --concurrency: `10,20,40`, `5..50+5`.
    #[arg(long, value_name = "PER_SECOND", allow_negative_numbers = true,
          value_parser = parse_rate_points)]
    pub request_rate: Option<Points>,
    /// How open-loop arrivals are spaced [default: poisson; gamma when --burstiness is given].
    #[arg(long, visible_aliases = ["arrival-pattern", "request-rate-mode"], value_enum)]
    pub arrival: Option<Arrival>,
    /// Gamma shape (vLLM's --burstiness, AIPerf's --arrival-smoothness): 1 is Poisson, smaller
    /// is burstier, larger is smoother [default: 1].
    #[arg(long, visible_aliases = ["arrival-smoothness", "vllm-burstiness"])]
    pub burstiness: Option<f64>,
    /// Raise concurrency (or the rate) linearly from 1 to the target over this long; requests
    /// sent meanwhile are tagged `ramp_up` and left out of the metrics.
    #[arg(long, value_parser = parse_duration_ns, value_name = "DURATION")]
    pub ramp_up: Option<u64>,
    /// Count ramp-up requests in the metrics too.
    #[arg(long)]
    pub include_ramp_up: bool,
    /// Service-level objectives in ms, e.g. `ttft:200 itl:20 e2e:3000` (also as one quoted
    /// argument, and with AIPerf's and vLLM's names: time_to_first_token, inter_token_latency,
    /// tpot, request_latency, e2el): adds goodput.
    #[arg(long, num_args = 1.., value_name = "METRIC:MS")]
    pub goodput: Vec<String>,
    /// Measured requests to send (default: twice --concurrency and at least 10, as AIPerf
    /// and GenAI-Perf; 10 with a rate; none with a duration).
    #[arg(long, visible_alias = "num-requests", value_parser = parse_count)]
    pub request_count: Option<u64>,
    /// Measure for this long instead of a request count.
    #[arg(long, value_parser = parse_duration_ns, value_name = "DURATION")]
    pub benchmark_duration: Option<u64>,
    /// After --benchmark-duration, time allowed for requests in flight to finish.
    #[arg(long, visible_alias = "benchmark-grace-period", value_parser = parse_duration_ns,
          default_value = "30s", value_name = "DURATION")]
    pub grace_period: u64,
    /// Requests sent before measuring, excluded from every metric (with sessions: sessions,
    /// hence --num-warmup-sessions).
    #[arg(long, visible_aliases = ["num-warmup-requests", "num-warmup-sessions"],
          value_parser = parse_count, default_value = "0")]
    pub warmup_request_count: u64,
    /// Warm up for this long (with --warmup-request-count: whichever comes first). Any
    /// --warmup-* flag makes the warm-up a phase of its own, before the measured one, with
    /// its own load: each setting not given is the measured phase's.
    #[arg(long, value_parser = parse_duration_ns, value_name = "DURATION")]
    pub warmup_duration: Option<u64>,
    /// Requests in flight during the warm-up (a cap with a rate).
    #[arg(long, value_name = "N")]
    pub warmup_concurrency: Option<u64>,
    /// Requests per second during the warm-up.
    #[arg(long, value_name = "PER_SECOND")]
    pub warmup_request_rate: Option<f64>,
    /// How the warm-up's arrivals are spaced.
    #[arg(long, value_enum)]
    pub warmup_arrival_pattern: Option<Arrival>,
    /// After --warmup-duration, how long to wait for warm-up requests still in flight before
    /// they are cut (default: until they end).
    #[arg(long, value_parser = parse_duration_ns, value_name = "DURATION")]
    pub warmup_grace_period: Option<u64>,
    /// Raise the warm-up's concurrency (or rate) from 1 over this long.
    #[arg(long, visible_alias = "warmup-request-rate-ramp-duration",
          value_parser = parse_duration_ns, value_name = "DURATION")]
    pub warmup_concurrency_ramp_duration: Option<u64>,
    /// --prefill-concurrency during the warm-up.
    #[arg(long, value_name = "N")]
    pub warmup_prefill_concurrency: Option<u64>,
    /// --prefill-concurrency-ramp-duration during the warm-up.
    #[arg(long, value_parser = parse_duration_ns, value_name = "DURATION")]
    pub warmup_prefill_concurrency_ramp_duration: Option<u64>,
    /// Split this load across N client hosts ("nodes"), each running the same command: every
    /// node builds the whole plan from the same flags and seed and sends only request i where
    /// i mod N is its index (concurrency split, remainders to the lowest indices); `ringperf
    /// merge` then reports the whole. Under `srun` the count and index default to
    /// SLURM_NTASKS and SLURM_PROCID.
    #[arg(long, value_name = "N")]
    pub node_count: Option<u64>,
    /// This node's index, 0 to N-1 (default: JOB_COMPLETION_INDEX in a Kubernetes Indexed Job,
    /// SLURM_PROCID under srun).
    #[arg(long, value_name = "I")]
    pub node_index: Option<u64>,
    /// Start sending at this wall-clock instant (RFC 3339, e.g. 2026-12-01T15:00:00Z, or Unix
    /// seconds), after everything is prepared: nodes given the same instant start together.
    /// Times inside a run stay on each node's monotonic clock.
    #[arg(long, value_parser = crate::plan::nodes::parse_start_at, value_name = "TIME")]
    pub start_at: Option<u64>,
    /// Close this share of requests (percent, drawn per request from --random-seed) from the
    /// client side, --request-cancellation-delay after each starts, as users who give up do.
    /// Cancelled requests are counted apart (`request_cancelled`): neither errors nor in the
    /// metrics.
    #[arg(long, value_name = "PERCENT")]
    pub request_cancellation_rate: Option<f64>,
    /// How long after its start a request chosen by --request-cancellation-rate is closed
    /// (seconds, or with a unit; 0: before it is sent) [default: 0].
    #[arg(long, value_parser = parse_duration_ns, value_name = "DURATION")]
    pub request_cancellation_delay: Option<u64>,
    /// At most N requests between their send and their first token (streaming only), across
    /// shards: the others wait for a place before they are sent, and that wait is the client's
    /// (`prefill_wait` in the report), not part of their TTFT.
    #[arg(long, value_name = "N")]
    pub prefill_concurrency: Option<u64>,
    /// User-centric timing (AIPerf's, for KV-cache benchmarks): --num-users users, each
    /// sending its session's turns NUM_USERS / RATE seconds apart (at once after a slower
    /// answer), RATE requests a second in all; users start staggered, at staggered points of
    /// their sessions, and a user whose session ends is replaced. Needs --session-turns-mean.
    #[arg(long, value_name = "PER_SECOND")]
    pub user_centric_rate: Option<f64>,
    /// Users for --user-centric-rate.
    #[arg(long, value_name = "N")]
    pub num_users: Option<u64>,
    /// Raise --prefill-concurrency linearly from 1 over this long.
    #[arg(long, value_parser = parse_duration_ns, value_name = "DURATION")]
    pub prefill_concurrency_ramp_duration: Option<u64>,
}

/// The values of a load flag: one, or a sweep's points.
#[derive(Debug, Clone, PartialEq)]
pub struct Points(pub Vec<f64>);

impl Points {
    /// The first point (a flag without a list has only this one).
    pub fn first(&self) -> f64 {
        self.0[0]
    }
}

/// `--image-sizes`: width, height and weight of each size.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageSizes(pub Vec<(u32, u32, f64)>);

/// Parses `WxH:WEIGHT,…` (the weight may be left out: 1).
pub fn parse_image_sizes(s: &str) -> Result<ImageSizes, String> {
    let max = crate::workload::media::MAX_SIDE;
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim) {
        let (size, weight) = item.split_once(':').unwrap_or((item, "1"));
        let side = |v: &str| {
            v.trim()
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=max).contains(n))
        };
        let (w, h) = size
            .split_once(['x', 'X'])
            .and_then(|(w, h)| Some((side(w)?, side(h)?)))
            .ok_or(format!(
                "{item:?}: expected WIDTHxHEIGHT[:WEIGHT], each side from 1 to {max}"
            ))?;
        let weight: f64 = weight
            .trim()
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x >= 0.0)
            .ok_or(format!(
                "{item:?}: the weight must be a number of 0 or more"
            ))?;
        if weight > 0.0 {
            out.push((w, h, weight));
        }
    }
    if out.is_empty() {
        return Err("no size has a weight above 0".into());
    }
    Ok(ImageSizes(out))
}

/// vLLM's `--random-range-ratio`: one ratio, or a JSON object with `input` and `output`.
pub fn parse_range_ratio(s: &str) -> Result<(f64, f64), String> {
    let t = s.trim();
    if t.starts_with('{') {
        let v: serde_json::Value =
            serde_json::from_str(t).map_err(|e| format!("{t}: not JSON: {e}"))?;
        let get = |k: &str| v.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
        return Ok((get("input"), get("output")));
    }
    let r: f64 = t
        .parse()
        .map_err(|_| format!("{t:?}: expected a ratio, or {{\"input\": r, \"output\": r}}"))?;
    Ok((r, r))
}

fn parse_filter(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("{s:?}: expected KEY=VALUE, e.g. category=writing")),
    }
}

fn parse_count_points(s: &str) -> Result<Points, crate::plan::sweep::PointsError> {
    crate::plan::sweep::parse_points(s, true).map(Points)
}

fn parse_rate_points(s: &str) -> Result<Points, crate::plan::sweep::PointsError> {
    crate::plan::sweep::parse_points(s, false).map(Points)
}

/// Sweeps and repeated runs.
#[derive(Debug, Clone, Args)]
pub struct SweepArgs {
    /// Run every point this many times: each run in profile_runs/run_NNNN/, and the mean,
    /// standard deviation and confidence interval of every figure in aggregate/ (AIPerf's
    /// layout).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub num_profile_runs: u32,
    /// Confidence level of the intervals over repeated runs (Student's t).
    #[arg(long, default_value_t = 0.95)]
    pub confidence_level: f64,
    /// Pause between repeated runs of a point (AIPerf: --profile-run-cooldown-seconds).
    #[arg(long, visible_alias = "profile-run-cooldown-seconds", value_parser = parse_duration_ns,
          default_value = "0s", value_name = "DURATION")]
    pub run_cooldown: u64,
    /// Send the warm-up requests before every repeated run, not only the first of a point.
    #[arg(long)]
    pub warmup_every_run: bool,
    /// Pause between the points of a sweep (lets the server drain and cool down).
    #[arg(long, value_parser = parse_duration_ns, default_value = "0s", value_name = "DURATION")]
    pub sweep_pause: u64,
    /// Keep the points (and runs) that an earlier run of the same sweep into the same
    /// --artifact-dir completed; run only the rest.
    #[arg(long)]
    pub resume: bool,
    /// One run instead of a run per point: raise the concurrency through the --concurrency
    /// list (e.g. 8..256), this long per step; each step's first quarter is dropped as the
    /// transient, its steady throughput gets a batch-means confidence interval, and the run
    /// stops at the knee (staircase.json, and the table on the console).
    #[arg(long, value_parser = parse_duration_ns, value_name = "STEP")]
    pub staircase: Option<u64>,
    /// `auto`: find the server's capacity and sweep up to it: a serial run (concurrency 1), a
    /// saturated one (--concurrency, default 256, in flight), then --sweep-points − 2
    /// open-loop rates (--arrival) evenly spaced above the serial throughput up to the
    /// saturated one (as GuideLLM); stops early when the server is over-saturated (it falls
    /// behind the rate while TTFT grows), and says so.
    #[arg(long, value_enum, value_name = "MODE")]
    pub sweep: Option<SweepMode>,
    /// With --sweep auto: points in all, the serial and the saturated run included.
    #[arg(long, default_value_t = 10)]
    pub sweep_points: usize,
    /// Find the highest load whose goodput (--goodput objectives) reaches --slo-attainment:
    /// double from the lowest load of --search-range until one misses, then bisect. Each probe
    /// is a whole run, in its own folder, as a sweep's points.
    #[arg(long, value_enum, value_name = "GOAL")]
    pub search: Option<SearchGoal>,
    /// With --search: the share of requests that must meet every objective.
    #[arg(long, default_value_t = 0.95)]
    pub slo_attainment: f64,
    /// With --search: the loads to search between (default 1..1024).
    #[arg(long, value_name = "LO..HI")]
    pub search_range: Option<String>,
    /// With --search: stop when the highest load that passed and the lowest that missed are
    /// this close, relative to the first (concurrency: or 1 apart).
    #[arg(long, default_value_t = 0.05)]
    pub search_tolerance: f64,
    /// A sweep over a workload flag (GenAI-Perf's `analyze`): the axis and its values.
    #[arg(skip)]
    pub workload_axis: Option<(crate::plan::sweep::Axis, Vec<f64>)>,
}

/// How `--sweep` chooses its points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SweepMode {
    /// From the server's measured capacity (as GuideLLM's sweep).
    Auto,
}

/// What `--search` looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SearchGoal {
    /// The most requests in flight (closed loop).
    MaxConcurrency,
    /// The highest open-loop request rate.
    MaxRate,
}

/// Prompts, outputs and the tokenizer.
#[derive(Debug, Clone, Args)]
pub struct WorkloadArgs {
    /// tokenizer.json file, a directory holding one, or a Hugging Face model id (from the
    /// local HF cache, else downloaded into it from HF_ENDPOINT with HF_TOKEN; HF_HUB_OFFLINE=1
    /// never downloads). Default: the embedded Qwen3 tokenizer.
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// Count with this model's own tokenizer when the Hugging Face cache holds it, else the
    /// embedded one (what the peers' translations use when the model sent has another name).
    #[arg(long, hide = true, value_name = "MODEL")]
    pub tokenizer_of: Option<String>,
    /// Revision (branch, tag or commit) of a model id's tokenizer on the hub [default: main].
    #[arg(long)]
    pub tokenizer_revision: Option<String>,
    /// Mean prompt length in tokens.
    #[arg(long, visible_aliases = ["isl", "prompt-input-tokens-mean"],
          default_value_t = 550)]
    pub synthetic_input_tokens_mean: u32,
    /// Standard deviation of the prompt length [default: 0].
    #[arg(long, visible_aliases = ["isl-stddev", "prompt-input-tokens-stddev"])]
    pub synthetic_input_tokens_stddev: Option<u32>,
    /// Mean output length requested (`max_tokens`); unset leaves it to the server.
    #[arg(long, visible_aliases = ["osl", "prompt-output-tokens-mean"])]
    pub output_tokens_mean: Option<u32>,
    /// Standard deviation of the requested output length [default: 0].
    #[arg(long, visible_aliases = ["osl-stddev", "prompt-output-tokens-stddev"])]
    pub output_tokens_stddev: Option<u32>,
    /// Draw prompt and output lengths uniformly from [mean·(1−r), mean·(1+r)], as vLLM's
    /// random dataset does, instead of from a normal distribution (0 ≤ r < 1); as vLLM, one
    /// ratio for both, or '{"input": 0.3, "output": 0.5}'.
    #[arg(long, value_name = "R", value_parser = parse_range_ratio)]
    pub random_range_ratio: Option<(f64, f64)>,
    /// Also set `min_tokens` to the requested length, so outputs are exactly that long.
    #[arg(long)]
    pub output_tokens_mean_deterministic: bool,
    /// Ask chat for its output length with `max_tokens` instead of `max_completion_tokens`
    /// (for servers that know only the older field).
    #[arg(long)]
    pub use_legacy_max_tokens: bool,
    /// Extra request body field, `key:value` with a JSON value (`ignore_eos:true`), or a JSON
    /// object of fields (`'{"top_k": 5}'`); repeatable.
    #[arg(long)]
    pub extra_inputs: Vec<String>,
    /// Seed for prompts and lengths: the same seed gives byte-identical inputs.json.
    #[arg(long, default_value_t = 0)]
    pub random_seed: u64,
    /// Distinct prompts to generate; requests cycle through them [default: 100].
    #[arg(long, visible_alias = "num-prompts", value_parser = parse_count)]
    pub num_dataset_entries: Option<u64>,
    /// Inputs per request for embeddings: each request sends this many distinct prompts
    /// as its `input` array (GenAI-Perf's and AIPerf's --batch-size-text).
    #[arg(short = 'b', long, visible_aliases = ["batch-size", "prompt-batch-size"],
          default_value_t = 1, value_name = "N")]
    pub batch_size_text: u32,
    /// Images in every synthetic chat request (AIPerf's flags): width and height in pixels,
    /// drawn per image from a normal distribution (both means above 0 to send images).
    #[arg(long, default_value_t = 0.0, value_name = "PX")]
    pub image_width_mean: f64,
    /// See --image-width-mean.
    #[arg(long, default_value_t = 0.0, value_name = "PX")]
    pub image_width_stddev: f64,
    /// See --image-width-mean.
    #[arg(long, default_value_t = 0.0, value_name = "PX")]
    pub image_height_mean: f64,
    /// See --image-width-mean.
    #[arg(long, default_value_t = 0.0, value_name = "PX")]
    pub image_height_stddev: f64,
    /// png, jpeg, or random (each image one or the other); sent as data: URLs.
    #[arg(long, value_enum, default_value = "png")]
    pub image_format: ImageFormatArg,
    /// Images per request.
    #[arg(
        long,
        visible_alias = "image-batch-size",
        default_value_t = 1,
        value_name = "N"
    )]
    pub batch_size_image: u32,
    /// Each request carries from --batch-size-image to this many images, drawn uniformly
    /// (vLLM's random-mm item count; the same as --batch-size-image when not given).
    #[arg(long, value_name = "N")]
    pub batch_size_image_max: Option<u32>,
    /// Image sizes to draw from by weight, instead of --image-width-mean and
    /// --image-height-mean: `WxH:WEIGHT,…` (vLLM's random-mm buckets), e.g.
    /// `256x256:0.5,1280x720:0.5`.
    #[arg(long, value_name = "WxH:WEIGHT,…", value_parser = parse_image_sizes)]
    pub image_sizes: Option<ImageSizes>,
    /// Audio in every synthetic chat request (AIPerf's flags): clip length in seconds, drawn
    /// per clip from a normal distribution (a mean above 0 to send audio), as WAV
    /// `input_audio` parts.
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    pub audio_length_mean: f64,
    /// See --audio-length-mean.
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    pub audio_length_stddev: f64,
    /// wav (mp3 is refused: ringperf encodes no MP3).
    #[arg(long, default_value = "wav", value_name = "FORMAT")]
    pub audio_format: String,
    /// Sample rates to draw from, in kHz.
    #[arg(long, num_args = 1.., value_delimiter = ',', default_value = "16", value_name = "KHZ")]
    pub audio_sample_rates: Vec<f64>,
    /// Bits per sample to draw from: 8, 16, 24 or 32.
    #[arg(long, num_args = 1.., value_delimiter = ',', default_value = "16", value_name = "BITS")]
    pub audio_depths: Vec<u16>,
    /// Channels: 1 or 2.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub audio_num_channels: u16,
    /// Audio clips per request.
    #[arg(
        long,
        visible_alias = "audio-batch-size",
        default_value_t = 1,
        value_name = "N"
    )]
    pub batch_size_audio: u32,
    /// Ranking endpoints (AIPerf's flags): passages per request, drawn per request from a
    /// normal distribution [default: 1].
    #[arg(long, value_name = "N")]
    pub rankings_passages_mean: Option<f64>,
    /// See --rankings-passages-mean [default: 0].
    #[arg(long, value_name = "N")]
    pub rankings_passages_stddev: Option<f64>,
    /// Tokens per passage [default: 550].
    #[arg(long, value_name = "TOKENS")]
    pub rankings_passages_prompt_token_mean: Option<u32>,
    /// See --rankings-passages-prompt-token-mean [default: 0].
    #[arg(long, value_name = "TOKENS")]
    pub rankings_passages_prompt_token_stddev: Option<u32>,
    /// Tokens per query [default: 550].
    #[arg(long, value_name = "TOKENS")]
    pub rankings_query_prompt_token_mean: Option<u32>,
    /// See --rankings-query-prompt-token-mean [default: 0].
    #[arg(long, value_name = "TOKENS")]
    pub rankings_query_prompt_token_stddev: Option<u32>,
    /// Do not send `stream_options.include_usage` (then output tokens are re-tokenized).
    #[arg(long)]
    pub no_usage: bool,
    /// Prompts from a file instead of synthetic ones (see --dataset-type).
    #[arg(long)]
    pub input_file: Option<PathBuf>,
    /// Format of --input-file: jsonl (AIPerf's single_turn), sharegpt, mooncake
    /// (mooncake_trace) or parquet (default: guessed: .json is ShareGPT, .parquet Parquet,
    /// JSONL with `hash_ids` or `input_length` a mooncake trace, other JSONL jsonl).
    #[arg(long, visible_alias = "custom-dataset-type", value_parser = parse_dataset_type)]
    pub dataset_type: Option<DatasetType>,
    /// Only the JSONL lines whose KEY holds VALUE, e.g. category=writing (a string, or a
    /// number as written).
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_filter)]
    pub dataset_filter: Option<(String, String)>,
    /// Replay the file's timestamps (ms) as send times (a trace's own schedule).
    #[arg(long)]
    pub fixed_schedule: bool,
    /// A JSONL file or trace whose prompts come to more than this many MiB is not held in
    /// memory: each request is built from its line shortly before it is sent, on threads of
    /// its own (0: always).
    #[arg(long, value_name = "MIB", default_value_t = crate::plan::workload::STREAM_DATASET_ABOVE >> 20)]
    pub stream_dataset_above: u64,
    /// Synthetic prompts start with one of this many shared prefixes (system prompts).
    #[arg(long, visible_alias = "prompt-prefix-pool-size")]
    pub num_prefix_prompts: Option<usize>,
    /// Length of each shared prefix in tokens.
    #[arg(long, visible_alias = "prompt-prefix-length", default_value_t = 100)]
    pub prefix_prompt_length: u32,
    /// Multi-turn sessions: mean turns per session (each turn sends the history with the
    /// real answers). --request-count and --concurrency then count sessions.
    #[arg(long, visible_alias = "conversation-turn-mean")]
    pub session_turns_mean: Option<f64>,
    /// Tokens per hash id of a mooncake trace (AIPerf's --isl-block-size; traces recorded
    /// with another KV block size say so) [default: 512].
    #[arg(long, visible_aliases = ["prompt-input-tokens-block-size", "synthetic-input-tokens-block-size"],
          value_name = "TOKENS")]
    pub isl_block_size: Option<u32>,
    /// Sessions: a system prompt of this many tokens, the same text in every session (a
    /// prefix a server's cache can share across users).
    #[arg(long, value_name = "TOKENS")]
    pub shared_system_prompt_length: Option<u32>,
    /// Sessions: after it, a context of this many tokens of each session's own (a prefix
    /// only that user's later turns share).
    #[arg(long, value_name = "TOKENS")]
    pub user_context_prompt_length: Option<u32>,
    /// Standard deviation of the turns per session.
    #[arg(
        long,
        visible_alias = "conversation-turn-stddev",
        default_value_t = 0.0
    )]
    pub session_turns_stddev: f64,
    /// Pause between an answer and the session's next turn (a user reading and typing)
    /// [default: 0s].
    #[arg(long, value_parser = parse_duration_ns, value_name = "DURATION")]
    pub session_turn_delay: Option<u64>,
}

/// AIPerf's `huggingface_generate`: Hugging Face TGI's `/generate_stream` (streamed) or
/// `/generate`, with `inputs` and `parameters` (`max_new_tokens`, `--extra-inputs`, `details`
/// for the token count), read with TGI's pointers. Returns the note that says so.
fn tgi(spec: &mut Spec) -> Result<String, PlanError> {
    use serde_json::{json, Value};
    if spec.target.request_template.is_some() {
        return Err(PlanError::Flag(
            "--endpoint-type huggingface_generate brings its own body: drop --request-template"
                .into(),
        ));
    }
    let mut parameters = std::mem::take(&mut spec.workload.extra_inputs);
    parameters.insert("details".into(), Value::Bool(true));
    parameters.insert("max_new_tokens".into(), json!("@@MAX@@"));
    let template = port::template_text(&json!({"inputs": "@@PROMPT@@", "parameters": parameters}));
    let streaming = spec.target.streaming;
    let path = if streaming {
        "/generate_stream"
    } else {
        "/generate"
    };
    let endpoint = spec
        .target
        .endpoint
        .get_or_insert_with(|| path.into())
        .clone();
    spec.target.request_template = Some(template);
    spec.target.response_text_pointer = if streaming {
        "/token/text"
    } else {
        "/generated_text"
    }
    .into();
    spec.target.response_tokens_pointer = Some("/details/generated_tokens".into());
    Ok(format!(
        "--endpoint-type huggingface_generate: Hugging Face TGI's API at {endpoint} (inputs, \
         parameters.max_new_tokens; the text at {}, the token count at \
         /details/generated_tokens)",
        spec.target.response_text_pointer
    ))
}

/// `--image-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImageFormatArg {
    /// PNG.
    Png,
    /// JPEG.
    Jpeg,
    /// Either, drawn per image.
    Random,
}

impl WorkloadArgs {
    /// The queries and passages of a ranking endpoint `kind` (AIPerf's defaults for what is
    /// left out), checked; the flags with another kind are refused.
    fn rankings(&self, kind: Kind) -> Result<Option<crate::workload::RankSpec>, PlanError> {
        let given = [self.rankings_passages_mean, self.rankings_passages_stddev]
            .iter()
            .any(Option::is_some)
            || [
                self.rankings_passages_prompt_token_mean,
                self.rankings_passages_prompt_token_stddev,
                self.rankings_query_prompt_token_mean,
                self.rankings_query_prompt_token_stddev,
            ]
            .iter()
            .any(Option::is_some);
        if !kind.ranks() {
            return if given {
                Err(PlanError::Flag(
                    "--rankings-*: these go with a ranking endpoint type (nim_rankings, \
                     hf_tei_rankings, cohere_rankings)"
                        .into(),
                ))
            } else {
                Ok(None)
            };
        }
        let passages = (
            self.rankings_passages_mean.unwrap_or(1.0),
            self.rankings_passages_stddev.unwrap_or(0.0),
        );
        let passages_given =
            self.rankings_passages_mean.is_some() || self.rankings_passages_stddev.is_some();
        if !(passages.0 >= 1.0 && passages.0 <= crate::workload::MAX_PASSAGES && passages.1 >= 0.0)
        {
            return Err(PlanError::Flag(format!(
                "--rankings-passages-mean {} / -stddev {}: expected a mean from 1 to {} and a \
                 standard deviation of 0 or more",
                passages.0,
                passages.1,
                crate::workload::MAX_PASSAGES
            )));
        }
        let tokens = |mean: Option<u32>, std: Option<u32>, name: &str| {
            let mean = mean.unwrap_or(550);
            if mean == 0 {
                return Err(PlanError::Flag(format!(
                    "--rankings-{name}-prompt-token-mean 0: expected at least 1"
                )));
            }
            Ok((mean, std.unwrap_or(0)))
        };
        Ok(Some(crate::workload::RankSpec {
            passages: passages_given.then_some(passages),
            passage_tokens: tokens(
                self.rankings_passages_prompt_token_mean,
                self.rankings_passages_prompt_token_stddev,
                "passages",
            )?,
            query_tokens: tokens(
                self.rankings_query_prompt_token_mean,
                self.rankings_query_prompt_token_stddev,
                "query",
            )?,
        }))
    }

    /// The images and audio asked for, checked.
    fn media(&self) -> Result<crate::workload::media::MediaSpec, PlanError> {
        use crate::workload::media::{AudioSpec, ImageFormat, ImageSpec, MediaSpec};
        let bad = PlanError::Flag;
        let dist = |name: &str, mean: f64, std: f64| {
            if !(mean.is_finite() && std.is_finite() && mean >= 0.0 && std >= 0.0) {
                return Err(bad(format!(
                    "--{name}-mean {mean} / --{name}-stddev {std}: expected numbers of 0 or more"
                )));
            }
            Ok((mean, std))
        };
        let width = dist(
            "image-width",
            self.image_width_mean,
            self.image_width_stddev,
        )?;
        let height = dist(
            "image-height",
            self.image_height_mean,
            self.image_height_stddev,
        )?;
        let sizes = self.image_sizes.clone().map(|s| s.0).unwrap_or_default();
        let most = self.batch_size_image_max.unwrap_or(self.batch_size_image);
        if most < self.batch_size_image {
            return Err(bad(format!(
                "--batch-size-image-max {most} is below --batch-size-image {}",
                self.batch_size_image
            )));
        }
        let given = (width.0 > 0.0, height.0 > 0.0);
        if !sizes.is_empty() && given != (false, false) {
            return Err(bad(
                "--image-sizes with --image-width-mean/--image-height-mean: both say how large \
                 the images are; give one"
                    .into(),
            ));
        }
        let images = match given {
            (false, false) if sizes.is_empty() => None,
            _ if most == 0 => None,
            (false, false) | (true, true) => Some(ImageSpec {
                width,
                height,
                sizes,
                format: match self.image_format {
                    ImageFormatArg::Png => ImageFormat::Png,
                    ImageFormatArg::Jpeg => ImageFormat::Jpeg,
                    ImageFormatArg::Random => ImageFormat::Random,
                },
                per_request: (self.batch_size_image, most),
            }),
            _ => {
                return Err(bad(
                    "--image-width-mean and --image-height-mean: give both above 0 to send \
                     images (or neither)"
                        .into(),
                ))
            }
        };
        let seconds = dist(
            "audio-length",
            self.audio_length_mean,
            self.audio_length_stddev,
        )?;
        let audio = if seconds.0 > 0.0 && self.batch_size_audio > 0 {
            match self.audio_format.to_ascii_lowercase().as_str() {
                "wav" => {}
                "mp3" => {
                    return Err(bad(
                        "--audio-format mp3: ringperf encodes no MP3 (no well-kept Rust \
                         encoder); use --audio-format wav"
                            .into(),
                    ))
                }
                other => {
                    return Err(bad(format!(
                        "--audio-format {other:?}: expected wav or mp3"
                    )))
                }
            }
            if let Some(d) = self
                .audio_depths
                .iter()
                .find(|d| ![8, 16, 24, 32].contains(*d))
            {
                return Err(bad(format!(
                    "--audio-depths {d}: expected 8, 16, 24 or 32 bits"
                )));
            }
            if let Some(r) = self
                .audio_sample_rates
                .iter()
                .find(|r| !(r.is_finite() && **r >= 1.0 && **r <= 384.0))
            {
                return Err(bad(format!(
                    "--audio-sample-rates {r}: expected kHz from 1 to 384"
                )));
            }
            if !(1..=2).contains(&self.audio_num_channels) {
                return Err(bad(format!(
                    "--audio-num-channels {}: expected 1 or 2",
                    self.audio_num_channels
                )));
            }
            Some(AudioSpec {
                seconds,
                sample_rates: self
                    .audio_sample_rates
                    .iter()
                    .map(|k| (k * 1000.0).round() as u32)
                    .collect(),
                depths: self.audio_depths.clone(),
                channels: self.audio_num_channels,
                per_request: self.batch_size_audio,
            })
        } else {
            None
        };
        Ok(MediaSpec { images, audio })
    }
}

/// The live view (`--ui`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UiKind {
    /// None.
    None,
    /// The progress line.
    Simple,
    /// The full-terminal dashboard.
    Dashboard,
}

/// A share from 0 to 1 (`0.05`).
fn parse_share(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        Ok(v) => Err(format!("{v} is not a share from 0 to 1 (0.05 for 5%)")),
        Err(_) => Err(format!("{s:?} is not a number from 0 to 1")),
    }
}

/// The progress log's form (`--progress-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProgressFormat {
    /// A line of text, starting with its time.
    Text,
    /// One JSON object a line.
    Json,
}

/// Artifacts and console.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Artifact folder (default: artifacts/<model>-openai-<endpoint>-concurrency<N>, or
    /// -request_rate<R> with a rate).
    #[arg(long, visible_aliases = ["artifact-directory", "output-artifact-dir", "output-dir"])]
    pub artifact_dir: Option<PathBuf>,
    /// Serve the run's live figures as Prometheus text at http://ADDR/metrics (IP:PORT; port
    /// 0 picks a free one, and the line saying where gives it); with several processes,
    /// process i serves on PORT + i.
    #[arg(long, value_name = "ADDR")]
    pub live_metrics: Option<std::net::SocketAddr>,
    /// No live progress line on stderr (it is off anyway when stderr is not a terminal).
    #[arg(long)]
    pub no_progress: bool,
    /// The live view on stderr while a run goes (AIPerf's --ui-type): `simple`, one progress
    /// line; `dashboard`, the whole terminal: throughput, TTFT and ITL over time, the shards'
    /// CPU and waits, errors by kind and a sweep's points so far (p pauses the view, q stops the
    /// run as Ctrl-C does); `none`. Either view is off when stderr is not a terminal.
    #[arg(long, visible_alias = "ui-type", value_enum, default_value_t = UiKind::Simple)]
    pub ui: UiKind,
    /// When stderr is not a terminal (CI, `kubectl logs`, nohup): log a timestamped progress
    /// line this often (elapsed and left, done, in flight, errors, req/s, TTFT p50 and p99),
    /// and one at the end. 0 or `--ui none`: none.
    #[arg(long, value_parser = parse_duration_ns, default_value = "10s", value_name = "DURATION")]
    pub progress_interval: u64,
    /// The progress log's lines: `text`, or `json` (one JSON object a line, for machines).
    #[arg(long, value_enum, default_value_t = ProgressFormat::Text)]
    pub progress_format: ProgressFormat,
    /// Fail the run (exit code 3) when a figure of its JSON crosses a bound:
    /// `METRIC[.STAT] (>|>=|<|<=) VALUE[unit]`, e.g. 'ttft.p99>500ms', 'error_rate>0.01',
    /// 'request_throughput<10' (repeatable); or when the run warns with a code: 'warning:CODE'
    /// (e.g. warning:served_model_differs; warning:any for every code). A run whose client
    /// verdict says the client limited it fails too. Writes gates.junit.xml beside the
    /// artifacts.
    #[arg(long, value_parser = crate::plan::output::Gate::parse, value_name = "GATE")]
    pub fail_on: Vec<crate::plan::output::Gate>,
    /// Stop the run when more than this share (0 to 1) of its finished measured requests
    /// failed, judged from the tenth on, write what was measured and exit with code 3
    /// (AIPerf's flag). Off by default: the run finishes whatever fails.
    #[arg(long, value_parser = parse_share, value_name = "SHARE")]
    pub failed_request_threshold: Option<f64>,
    /// With --fail-on: a run the client may have limited does not fail for that alone.
    #[arg(long)]
    pub allow_client_limited: bool,
    /// Also write every metric per time slice of this length (seconds, or with a unit), from
    /// the first measured send: profile_export_ringperf_timeslices.json and .csv (AIPerf's
    /// layouts), and a chart in report.html.
    #[arg(long, value_parser = parse_duration_ns, value_name = "DURATION")]
    pub slice_duration: Option<u64>,
    /// Print the HTTP phases of the requests (k6's and AIPerf's http_req_connecting,
    /// _tls_handshaking, _sending, _waiting, _receiving, _duration) under the table; the JSON
    /// and every request's line have them anyway.
    #[arg(long)]
    pub show_trace_timing: bool,
}

/// How shards are placed, shown under `ringperf profile --help`.
pub const PLACEMENT_HELP: &str = "\
Shard placement: before the run ringperf watches the host for 100 ms and uses the CPUs other
work leaves quiet (work at a positive nice value does not count). It starts one shard per
1,000 requests in flight, at most one per quiet CPU, and one fewer when the server runs on this
host, so that the server keeps a CPU. With the server on another host each shard is pinned to
its own quiet CPU; with the server on this host shards may move among the quiet CPUs, because
a pinned shard cannot escape a server that out-ranks it. During the run a shard that waits for
its CPU is moved to wider CPUs and reported; the requests it had in flight are marked. --shards,
--cpus and --no-pin override each part.

GenAI-Perf and AIPerf command lines run here as they are (their flags are accepted, mapped or
noted); `vllm bench serve ...` runs as `ringperf bench serve ...`, `guidellm benchmark ...` as
`ringperf benchmark ...` and `guidellm run ...` as `ringperf run ...`, each with its own
defaults. docs/porting.md lists every flag.";

/// Threads, cores and I/O driver.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Shard threads (default: one per 1,000 requests in flight, at most one per quiet CPU;
    /// never more than --concurrency).
    #[arg(long)]
    pub shards: Option<usize>,
    /// Pin shards to these CPUs, e.g. 0,2-5, in turn (default: decided from the host; a
    /// shard pinned here is reported, not moved, when it waits for its CPU).
    #[arg(long)]
    pub cpus: Option<String>,
    /// Do not pin or restrict shard threads: the scheduler places them.
    #[arg(long)]
    pub no_pin: bool,
    /// I/O driver.
    #[arg(long, value_enum, default_value_t = Driver::Auto)]
    pub driver: Driver,
    /// io_uring submission queue entries per shard.
    #[arg(long, default_value_t = 4096)]
    pub ring_entries: u32,
    /// Stamp events when the client read them, not when the kernel received them
    /// (`SO_TIMESTAMPNS`; on by default for plain http).
    #[arg(long)]
    pub no_kernel_timestamps: bool,
    /// Run the load in this many processes of this host, merged into one report (default:
    /// as many as the open-files limit needs, one connection being one file).
    #[arg(long)]
    pub processes: Option<u64>,
}

/// GPU telemetry flags.
#[derive(Debug, Clone, Args)]
pub struct TelemetryArgs {
    /// Do not sample GPUs through NVML.
    #[arg(long)]
    pub no_gpu_telemetry: bool,
    /// GPU sampling interval.
    #[arg(long, value_parser = parse_duration_ns, default_value = "100ms", value_name = "DURATION")]
    pub gpu_sample_interval: u64,
    /// GPUs to sample: `all` or indices like 0,2.
    #[arg(long, default_value = "all")]
    pub gpus: String,
    /// GPU price in EUR per hour (per GPU), for EUR per million output tokens.
    #[arg(long)]
    pub gpu_price_eur_hour: Option<f64>,
    /// Prometheus endpoint to scrape during the run (repeatable); `auto` is the target
    /// server's /metrics. A DCGM exporter URL brings GPU power from another host.
    #[arg(long, visible_aliases = ["gpu-telemetry", "server-metrics", "server-metrics-urls"],
          num_args = 1..)]
    pub server_metrics_url: Vec<String>,
    /// Scrape interval for --server-metrics-url.
    #[arg(long, value_parser = parse_duration_ns, default_value = "1s", value_name = "DURATION")]
    pub server_metrics_interval: u64,
    /// Receive the server's per-request spans over OTLP/HTTP on ADDR (default
    /// 127.0.0.1:4318) and join each to its request by the X-Request-ID sent: start vLLM
    /// with `--otlp-traces-endpoint http://ADDR` and
    /// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf`.
    #[arg(long, num_args = 0..=1, default_missing_value = "127.0.0.1:4318", value_name = "ADDR")]
    pub server_traces: Option<String>,
    /// After the last response, how long to wait for spans still to come (OpenTelemetry's
    /// batch exporter sends every 5 s by default).
    #[arg(long, value_parser = parse_duration_ns, default_value = "10s", value_name = "DURATION")]
    pub server_traces_wait: u64,
}

/// What `ringperf doctor` checks the host for.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// Requests the run will keep in flight.
    #[arg(long, value_parser = parse_count, default_value = "1")]
    pub concurrency: u64,
    /// The run will use the in-process simulator (`profile --sim`).
    #[arg(long)]
    pub sim: bool,
}

/// The built-in simulator's flags.
#[derive(Debug, Clone, Args)]
#[command(no_binary_name = true)]
pub struct SimArgs {
    /// Address to listen on (loopback by default). Port 0 picks a free port and prints it.
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub bind: String,
    /// Serve this many independent replicas (each its own batch, prefix cache and counters,
    /// as data-parallel servers of one model), on the --bind port and the ones after it (port
    /// 0: free ports); each port is printed. Benchmark them with --url repeated.
    #[arg(long, default_value_t = 1)]
    pub replicas: u16,
    /// Serve the replicas from this many processes, each with its own open-files limit
    /// (default: one per replica).
    #[arg(long)]
    pub processes: Option<u16>,
    /// Model name served; requests for another model get vLLM's 404 error.
    #[arg(short = 'm', long = "model", default_value = crate::sim::DEFAULT_MODEL)]
    pub model: String,
    /// Time to first token: a duration or a distribution (normal:50ms,5ms, uniform:a,b, exp:m).
    #[arg(long, value_parser = TimeDist::parse, default_value = "20ms")]
    pub ttft: TimeDist,
    /// Time between tokens at an empty batch, same syntax as --ttft.
    #[arg(long, value_parser = TimeDist::parse, default_value = "10ms")]
    pub itl: TimeDist,
    /// Tokens sent in each event.
    #[arg(long, default_value_t = 1)]
    pub tokens_per_chunk: u32,
    /// Streams generated at once; more requests queue (0 = unlimited).
    #[arg(long, default_value_t = 0)]
    pub max_batch: u32,
    /// How much ITL grows at a full batch: ITL × (1 + growth × active / max-batch).
    #[arg(long, default_value_t = 1.0)]
    pub itl_growth: f64,
    /// Requests prefilling at once (from admission to their first token); more wait for a
    /// place, and their TTFT grows (0 = unlimited).
    #[arg(long, default_value_t = 0)]
    pub max_prefill: u32,
    /// Prefill time per prompt token (about 4 characters), added to TTFT: long prompts
    /// answer later.
    #[arg(long, value_parser = parse_duration_ns, default_value = "0", value_name = "DURATION")]
    pub prefill_per_token: u64,
    /// Keep a prefix cache: only the prompt's tokens after the longest run of leading
    /// messages seen before are prefilled (and usage reports the others as cached tokens).
    /// POST /reset_prefix_cache empties it.
    #[arg(long)]
    pub prefix_cache: bool,
    /// Output length when a request sets no max_tokens.
    #[arg(long, default_value_t = 256)]
    pub default_max_tokens: u32,
    /// Chance per token, after min_tokens, of stopping early (EOS); 0 runs to max_tokens.
    #[arg(long, default_value_t = 0.0)]
    pub eos_probability: f64,
    /// A fault, as a server that dies: serve this many generation requests, and at the next
    /// stop listening and cut every connection (later connections are refused). 0: never.
    #[arg(long, default_value_t = 0, value_name = "N", help_heading = "Faults")]
    pub stop_after: u64,
    /// A fault: answer every N-th generation request with --fail-status instead (1: every
    /// request). 0: never.
    #[arg(long, default_value_t = 0, value_name = "N", help_heading = "Faults")]
    pub fail_every: u64,
    /// The HTTP status of --fail-every's answers (429 for a rate-limit storm, 503 for an
    /// overloaded server), with vLLM's error body.
    #[arg(
        long,
        default_value_t = 500,
        value_name = "STATUS",
        help_heading = "Faults"
    )]
    pub fail_status: u16,
    /// With --fail-every: the Retry-After header of those answers, in seconds.
    #[arg(long, value_name = "SECONDS", help_heading = "Faults")]
    pub retry_after: Option<u32>,
    /// Ignore requests' `min_tokens`, as llama.cpp does (with --eos-probability, outputs then
    /// end early even when min_tokens asked otherwise).
    #[arg(long)]
    pub ignore_min_tokens: bool,
    /// Send no ringperf stamps (x_ringperf_*) in the events, as a real server sends none: the
    /// client then judges its own health as it would against vLLM, from its own evidence.
    #[arg(long)]
    pub no_stamps: bool,
    /// Simulator threads.
    #[arg(long, default_value_t = 1)]
    pub shards: usize,
    /// CPUs to pin the simulator's threads to, e.g. 0 or 0-1 (default: not pinned).
    #[arg(long)]
    pub cpus: Option<String>,
    /// I/O driver. epoll by default: it writes each event when the event is stamped, where
    /// io_uring would hold the write until the next submission and so add the simulator's own
    /// batching to the client-added delay it reports.
    #[arg(long, value_enum, default_value_t = Driver::Epoll)]
    pub driver: Driver,
    /// Seed for the simulator's random timings.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Serve https with this PEM certificate chain (needs --tls-key).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Export one `llm_request` span per request, as vLLM's `--otlp-traces-endpoint` does,
    /// to this OTLP/HTTP endpoint (`http://HOST:PORT`; the path `/v1/traces` when none):
    /// its queue, prefill, decode and inference times, its TTFT and end-to-end time.
    #[arg(long, value_name = "URL")]
    pub otlp_traces_endpoint: Option<String>,
    /// How the spans are written: `http/protobuf` or `http/json` (OpenTelemetry's
    /// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL values).
    #[arg(long, default_value = "http/protobuf", value_parser = ["http/protobuf", "http/json"])]
    pub otlp_traces_protocol: String,
}

impl TelemetryArgs {
    /// The telemetry settings these flags ask for: `--gpus` and every `--server-metrics-url`
    /// are read here, once.
    pub fn config(&self) -> Result<crate::telemetry::Config, crate::telemetry::Error> {
        Ok(crate::telemetry::Config {
            gpu: !self.no_gpu_telemetry,
            gpu_sample_interval_ns: self.gpu_sample_interval,
            gpus: crate::gpu::parse_gpus(&self.gpus)?,
            gpu_price_eur_hour: self.gpu_price_eur_hour,
            server_metrics: self
                .server_metrics_url
                .iter()
                .map(|u| crate::server_metrics::Source::parse(u))
                .collect::<Result<_, _>>()?,
            server_metrics_interval_ns: self.server_metrics_interval,
        })
    }
}

impl ProfileArgs {
    /// The plain spec of the run these flags ask for (flags are only parsed here; the plan
    /// validates them).
    pub fn spec(&self) -> Result<Spec, crate::plan::PlanError> {
        self.spec_and_notes().map(|(spec, _)| spec)
    }

    /// The spec, and a note for each flag of another tool that was accepted without effect or
    /// mapped in a way worth saying.
    pub fn spec_and_notes(&self) -> Result<(Spec, Vec<String>), crate::plan::PlanError> {
        use crate::plan::PlanError;
        let (t, l, w, o, e) = (
            &self.target,
            &self.load,
            &self.workload,
            &self.output,
            &self.engine,
        );
        let mut notes = Vec::new();
        let cpus = match &e.cpus {
            Some(list) => Some(crate::cpus::parse_cpu_list(list)?),
            None => None,
        };
        let model =
            match t.model.as_slice() {
                [] => String::new(),
                [one] if one.trim().is_empty() => return Err(PlanError::Flag(
                    "-m '': a model name cannot be empty (leave -m out to take the first model \
                     the server lists)"
                        .into(),
                )),
                [one] if !one.contains(',') => one.clone(),
                several => {
                    return Err(PlanError::Flag(format!(
                        "-m {}: one model per run in ringperf (the peers spread requests over \
                         several, e.g. LoRA adapters); run each model as a command of its own",
                        several.join(" ")
                    )))
                }
            };
        // The endpoint type: one of ringperf's kinds, GenAI-Perf's Triton words, or another
        // tool's API that ringperf does not speak.
        let endpoint_type = t.endpoint_type.as_deref().map(str::trim);
        let asked_kind = match endpoint_type {
            None | Some("kserve" | "generate") => None,
            Some("huggingface_generate") => Some(Kind::Template),
            Some(name) => match Kind::ALL.into_iter().find(|k| k.name() == name) {
                Some(k) => Some(k),
                None => {
                    let why = port::foreign_endpoint_type(name).unwrap_or(
                        "expected chat, completions, embeddings, responses, template, \
                             nim_rankings, hf_tei_rankings, cohere_rankings, image_generation or \
                             huggingface_generate (or GenAI-Perf's kserve and generate, for \
                             Triton)",
                    );
                    return Err(PlanError::Flag(format!("--endpoint-type {name}: {why}")));
                }
            },
        };
        // AIPerf's docs give --url as the whole endpoint URL: the kind's path is the endpoint.
        let mut url = t
            .url
            .first()
            .cloned()
            .unwrap_or_else(|| "http://localhost:8000".into());
        let mut endpoint = t.endpoint.clone();
        if endpoint.is_none() {
            if let Some((base, path)) = split_endpoint_url(&url) {
                notes.push(format!(
                    "--url {url}: requests go to {path} on {base} (the URL names the endpoint)"
                ));
                url = base;
                endpoint = Some(path);
            }
        }
        let given = port::Given {
            url: !t.url.is_empty(),
            num_dataset_entries: w.num_dataset_entries.is_some(),
            session_turn_delay: w.session_turn_delay.is_some(),
            concurrency: l.concurrency.is_some(),
            ready_check_timeout: t.ready_check_timeout != 0,
        };
        // `--request-rate inf` is no rate: every request at once without a cap (as vLLM), else
        // a closed loop at the cap.
        let rate = l.request_rate.as_ref().map(Points::first);
        let unbounded = rate.is_some_and(|r| r == f64::INFINITY);
        let request_rate = rate.filter(|_| !unbounded);
        let concurrency = match (l.concurrency.as_ref().map(|c| c.first() as u64), unbounded) {
            (None, true) => Some(
                l.request_count
                    .unwrap_or(crate::plan::load::DEFAULT_REQUEST_COUNT),
            ),
            (c, _) => c,
        };
        let (nodes, from_env) =
            crate::plan::nodes::resolve(l.node_count, l.node_index, &|k| std::env::var(k).ok())?;
        // The kind: as asked, else what --endpoint names, else chat.
        let kind = asked_kind
            .or_else(|| {
                let path = endpoint.as_deref()?.trim_end_matches('/');
                Kind::ALL.into_iter().find(|k| {
                    k.path()
                        .is_some_and(|p| path.ends_with(p.trim_start_matches('/')))
                })
            })
            .unwrap_or(Kind::Chat);
        let mut spec = Spec {
            target: TargetSpec {
                model,
                url,
                kind,
                endpoint,
                request_template: t.request_template.clone(),
                response_text_pointer: t.response_text_pointer.clone(),
                response_tokens_pointer: t.response_tokens_pointer.clone(),
                streaming: t.streaming,
                api_key: t.api_key.clone().map(Secret),
                headers: t.headers.iter().cloned().map(Secret).collect(),
                ca_cert: t.ca_cert.clone(),
                insecure: t.insecure,
                connect_timeout_ns: t.connect_timeout,
                request_timeout_ns: t.request_timeout,
                ready_check_timeout_ns: t.ready_check_timeout,
                preflight: !t.no_preflight,
                reset_prefix_cache: t.reset_prefix_cache || self.port.reset_kv_cache,
                // The others as given (the first may have named the endpoint: they share it).
                more_urls: t
                    .url
                    .iter()
                    .skip(1)
                    .map(|u| split_endpoint_url(u).map_or_else(|| u.clone(), |(base, _)| base))
                    .collect(),
                url_strategy: t.url_strategy,
                local_addresses: t.local_address.clone(),
            },
            load: LoadSpec {
                concurrency,
                request_rate,
                // A smoothness without a pattern means gamma (vLLM and AIPerf alike).
                arrival: l.arrival.unwrap_or(match l.burstiness {
                    Some(b) if b != 1.0 => Arrival::Gamma,
                    _ => Arrival::Poisson,
                }),
                burstiness: l.burstiness.unwrap_or(1.0),
                ramp_up_ns: l.ramp_up,
                include_ramp_up: l.include_ramp_up,
                goodput: l
                    .goodput
                    .iter()
                    .flat_map(|g| g.split_whitespace())
                    .map(|g| {
                        crate::plan::parse_slo(g)
                            .map_err(|e| PlanError::Flag(format!("--goodput {e}")))
                    })
                    .collect::<Result<_, _>>()?,
                request_count: l.request_count,
                benchmark_duration_ns: l.benchmark_duration,
                grace_period_ns: l.grace_period,
                warmup_request_count: l.warmup_request_count,
                nodes,
                start_at_unix_ns: l.start_at,
                cancellation: match (l.request_cancellation_rate, l.request_cancellation_delay) {
                    (Some(percent), delay) => Some(crate::plan::load::Cancellation {
                        percent,
                        delay_ns: delay.unwrap_or(0),
                    }),
                    (None, Some(_)) => {
                        return Err(PlanError::Flag(
                            "--request-cancellation-delay needs --request-cancellation-rate".into(),
                        ))
                    }
                    (None, None) => None,
                },
                user_centric: match (l.user_centric_rate, l.num_users) {
                    (Some(rate), Some(users)) => {
                        Some(crate::plan::load::UserCentric { rate, users })
                    }
                    (None, None) => None,
                    _ => {
                        return Err(PlanError::Flag(
                            "--user-centric-rate and --num-users go together".into(),
                        ))
                    }
                },
                warmup_phase: {
                    let w = crate::plan::load::WarmupSpec {
                        duration_ns: l.warmup_duration,
                        concurrency: l.warmup_concurrency,
                        request_rate: l.warmup_request_rate,
                        arrival: l.warmup_arrival_pattern,
                        grace_ns: l.warmup_grace_period,
                        ramp_ns: l.warmup_concurrency_ramp_duration,
                        prefill: l.warmup_prefill_concurrency,
                        prefill_ramp_ns: l.warmup_prefill_concurrency_ramp_duration,
                    };
                    (w != crate::plan::load::WarmupSpec::default()).then_some(w)
                },
                prefill: match (l.prefill_concurrency, l.prefill_concurrency_ramp_duration) {
                    (Some(cap), ramp) => Some(crate::plan::load::Prefill {
                        cap,
                        ramp_ns: ramp.unwrap_or(0),
                    }),
                    (None, Some(_)) => {
                        return Err(PlanError::Flag(
                            "--prefill-concurrency-ramp-duration needs --prefill-concurrency"
                                .into(),
                        ))
                    }
                    (None, None) => None,
                },
            },
            workload: WorkloadSpec {
                tokenizer: w.tokenizer.clone(),
                tokenizer_revision: w.tokenizer_revision.clone(),
                tokenizer_from_model: w.tokenizer.is_none() && self.sim.is_none(),
                tokenizer_of: w.tokenizer_of.clone(),
                isl_mean: w.synthetic_input_tokens_mean,
                isl_stddev: w.synthetic_input_tokens_stddev.unwrap_or(0),
                osl_mean: w.output_tokens_mean,
                osl_stddev: w.output_tokens_stddev.unwrap_or(0),
                range_ratio: w.random_range_ratio,
                osl_deterministic: w.output_tokens_mean_deterministic,
                legacy_max_tokens: w.use_legacy_max_tokens,
                extra_inputs: crate::workload::parse_extra_inputs(&w.extra_inputs)?,
                random_seed: w.random_seed,
                num_dataset_entries: w.num_dataset_entries.unwrap_or(100),
                batch_size: w.batch_size_text,
                media: w.media()?,
                rankings: None,
                no_usage: w.no_usage,
                input_file: w.input_file.clone(),
                dataset_type: w.dataset_type,
                dataset_filter: w.dataset_filter.clone(),
                fixed_schedule: w.fixed_schedule,
                schedule_start_ms: None,
                schedule_end_ms: None,
                isl_block_size: w.isl_block_size,
                stream_dataset_above: w.stream_dataset_above.saturating_mul(1 << 20),
                num_prefix_prompts: w.num_prefix_prompts,
                prefix_prompt_length: w.prefix_prompt_length,
                session_turns_mean: w.session_turns_mean,
                session_turns_stddev: w.session_turns_stddev,
                session_turn_delay_ns: w.session_turn_delay.unwrap_or(0),
                session_turn_delay_stddev_ns: 0,
                shared_system_prompt_tokens: w.shared_system_prompt_length,
                user_context_prompt_tokens: w.user_context_prompt_length,
                sends_at_most: None,
            },
            output: OutputSpec {
                artifact_dir: o.artifact_dir.clone(),
                progress: !o.no_progress && o.ui != UiKind::None,
                dashboard: o.ui == UiKind::Dashboard,
                gates: o.fail_on.clone(),
                allow_client_limited: o.allow_client_limited,
                slice_ns: o.slice_duration,
                show_trace_timing: o.show_trace_timing,
                progress_every_ns: o.progress_interval,
                progress_json: o.progress_format == ProgressFormat::Json,
                failed_request_threshold: o.failed_request_threshold,
            },
            engine: EngineSpec {
                shards: e.shards,
                cpus,
                no_pin: e.no_pin,
                driver: e.driver,
                ring_entries: e.ring_entries,
                kernel_timestamps: !e.no_kernel_timestamps,
                processes: e.processes,
            },
        };
        if endpoint_type == Some("huggingface_generate") {
            notes.push(tgi(&mut spec)?);
        }
        let ported = self.port.apply(&mut spec, &given, endpoint_type)?;
        notes.extend(ported.notes);
        if !spec.target.kind.generates() && spec.workload.osl_mean.is_some() {
            notes.push(format!(
                "--output-tokens-mean: {} generate no tokens; no max_tokens is sent",
                spec.target.kind.name()
            ));
            spec.workload.osl_mean = None;
            spec.workload.osl_deterministic = false;
        }
        spec.workload.rankings = w.rankings(spec.target.kind)?;
        if spec.workload.batch_size > 1
            && spec.target.kind != Kind::Embeddings
            && !spec.target.kind.ranks()
        {
            return Err(PlanError::Flag(format!(
                "--batch-size-text {}: batches of inputs go to embeddings (--endpoint-type \
                     embeddings) and passages to rankings; other kinds take one prompt a request",
                spec.workload.batch_size
            )));
        }
        spec.output.progress &= !ported.no_progress;
        if unbounded {
            notes.push(format!(
                "--request-rate inf: no rate; {} requests kept in flight (closed loop)",
                spec.load.concurrency.unwrap_or(1)
            ));
        }
        if let Some(from) = from_env {
            notes.push(format!(
                "node {} of {} (index from {from}): this process sends its share of the load",
                nodes.index, nodes.count
            ));
        }
        Ok((spec, notes))
    }

    /// The load points and repeats these flags ask for: one point unless --concurrency or
    /// --request-rate has a list or range.
    pub fn sweep_spec(&self) -> Result<crate::plan::sweep::SweepSpec, crate::plan::PlanError> {
        use crate::plan::sweep::{Axis, Point, Repeats, SweepSpec};
        let flag = |m: String| Err(crate::plan::PlanError::Flag(m));
        let (l, a) = (&self.load, &self.sweep);
        let workload = a
            .workload_axis
            .as_ref()
            .map(|(axis, v)| (*axis, Points(v.clone())));
        let mut lists: Vec<(Axis, &Points)> = [
            (Axis::Concurrency, l.concurrency.as_ref()),
            (Axis::RequestRate, l.request_rate.as_ref()),
        ]
        .into_iter()
        .filter_map(|(axis, p)| Some((axis, p?)))
        .filter(|(_, p)| p.0.len() > 1)
        .collect();
        // A workload sweep is a sweep even at one point (GenAI-Perf's analyze).
        if let Some((axis, p)) = &workload {
            lists.push((*axis, p));
        }
        if lists.len() > 1 {
            return flag(
                "--concurrency and --request-rate both have lists: a sweep varies one flag".into(),
            );
        }
        let points = match lists.first() {
            Some((axis, p)) => {
                if p.0.contains(&f64::INFINITY) || p.0.contains(&0.0) {
                    return flag(format!(
                        "{}: every point of a sweep is a positive, finite number",
                        axis.flag()
                    ));
                }
                if self.workload.fixed_schedule {
                    return flag(format!(
                        "{}: a sweep with --fixed-schedule: a trace sets its own schedule",
                        axis.flag()
                    ));
                }
                p.0.iter()
                    .map(|&value| Point { axis: *axis, value })
                    .collect()
            }
            // No list: the one point is the flags as given.
            None => match (l.request_rate.as_ref(), l.concurrency.as_ref()) {
                (Some(r), _) if r.first().is_finite() => vec![Point {
                    axis: Axis::RequestRate,
                    value: r.first(),
                }],
                (_, c) => vec![Point {
                    axis: Axis::Concurrency,
                    value: c.map_or(1.0, Points::first),
                }],
            },
        };
        let search = match a.search {
            None => None,
            Some(goal) => {
                if !lists.is_empty() {
                    return flag("--search chooses the loads itself: give no list".into());
                }
                if l.goodput.is_empty() {
                    return flag(
                        "--search looks for the highest load within the --goodput objectives \
                         (e.g. --goodput ttft:500 itl:50): give them"
                            .into(),
                    );
                }
                let axis = match goal {
                    SearchGoal::MaxConcurrency => Axis::Concurrency,
                    SearchGoal::MaxRate => Axis::RequestRate,
                };
                let (lo, hi) = match &a.search_range {
                    None => (1.0, 1024.0),
                    Some(r) => {
                        let bad = || {
                            crate::plan::PlanError::Flag(format!(
                                "--search-range {r:?}: give LO..HI, e.g. 1..512"
                            ))
                        };
                        let (lo, hi) = r.split_once("..").ok_or_else(bad)?;
                        (
                            lo.trim().parse().map_err(|_| bad())?,
                            hi.trim().parse().map_err(|_| bad())?,
                        )
                    }
                };
                Some(crate::plan::sweep::SearchSpec {
                    axis,
                    lo,
                    hi,
                    tolerance: a.search_tolerance,
                    attainment: a.slo_attainment,
                })
            }
        };
        let auto = match a.sweep {
            None => None,
            Some(SweepMode::Auto) => {
                if !lists.is_empty() || search.is_some() || l.request_rate.is_some() {
                    return flag(
                        "--sweep auto chooses the loads itself: give no --request-rate, list or \
                         --search"
                            .into(),
                    );
                }
                Some(crate::plan::sweep::AutoSpec {
                    points: a.sweep_points,
                    saturation: l.concurrency.as_ref().map_or(256, |c| c.first() as u64),
                })
            }
        };
        let staircase = match (a.staircase, lists.first()) {
            (None, _) => None,
            (Some(step), Some((Axis::Concurrency, p))) if search.is_none() && auto.is_none() => {
                Some((p.0.iter().map(|v| *v as u64).collect(), step))
            }
            (Some(_), _) => {
                return flag(
                    "--staircase steps through a --concurrency list (e.g. --concurrency 8..256), \
                     without --search or --sweep"
                        .into(),
                )
            }
        };
        let (lists, points) = match &staircase {
            Some(_) => (Vec::new(), points[..1].to_vec()),
            None => (lists, points),
        };
        let points = match (&search, &auto) {
            (Some(s), _) => vec![Point {
                axis: s.axis,
                value: s.lo,
            }],
            (None, Some(_)) => vec![Point {
                axis: Axis::Concurrency,
                value: 1.0,
            }],
            (None, None) => points,
        };
        let spec = SweepSpec {
            is_sweep: !lists.is_empty() || search.is_some() || auto.is_some(),
            search,
            auto,
            staircase,
            points,
            repeats: Repeats {
                runs: a.num_profile_runs,
                confidence: a.confidence_level,
                cooldown_ns: a.run_cooldown,
                warmup_every_run: a.warmup_every_run || self.port.warmup_every_run(),
            },
            pause_ns: match self.port.parameter_sweep_cooldown_seconds {
                Some(s) if a.sweep_pause == 0 && s > 0.0 && s < 1e9 => (s * 1e9) as u64,
                _ => a.sweep_pause,
            },
            resume: a.resume,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// The plan these flags ask for, validated and prepared.
    pub fn plan(&self) -> Result<crate::plan::Plan, crate::plan::PlanError> {
        crate::plan::Plan::build(self.spec()?)
    }
}

/// `http://h:8000/v1/chat/completions` as the server and the endpoint it names:
/// (`http://h:8000`, `/v1/chat/completions`). `None` when the URL's path names no endpoint kind.
fn split_endpoint_url(url: &str) -> Option<(String, String)> {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let slash = after_scheme + url[after_scheme..].find('/')?;
    let path = url[slash..].split(['?', '#']).next()?.trim_end_matches('/');
    let kind = Kind::ALL
        .into_iter()
        .find(|k| k.path().is_some_and(|p| path.ends_with(p)))?;
    let p = kind.path()?;
    let prefix = &path[..path.len() - p.len()];
    Some((format!("{}{prefix}", &url[..slash]), p.to_string()))
}

impl SimArgs {
    /// The simulator's settings these flags ask for.
    pub fn config(&self) -> Result<crate::sim::Config, crate::sim::Error> {
        let cpus = match &self.cpus {
            Some(list) => crate::cpus::parse_cpu_list(list)
                .map_err(|e| crate::sim::Error::Flag(format!("sim {e}")))?,
            None => Vec::new(),
        };
        Ok(crate::sim::Config {
            bind: self.bind.clone(),
            model: self.model.clone(),
            ttft: self.ttft,
            itl: self.itl,
            tokens_per_chunk: self.tokens_per_chunk,
            max_batch: self.max_batch,
            itl_growth: self.itl_growth,
            prefill_per_token_ns: self.prefill_per_token,
            max_prefill: self.max_prefill,
            prefix_cache: self.prefix_cache,
            default_max_tokens: self.default_max_tokens,
            eos_probability: self.eos_probability,
            faults: crate::sim::Faults {
                stop_after: self.stop_after,
                fail_every: self.fail_every,
                fail_status: self.fail_status,
                retry_after: self.retry_after,
            },
            ignore_min_tokens: self.ignore_min_tokens,
            stamps: !self.no_stamps,
            shards: self.shards,
            cpus,
            driver: self.driver,
            seed: self.seed,
            tls: self.tls_cert.clone().zip(self.tls_key.clone()),
            otlp_traces: self.otlp_traces_endpoint.clone().map(|url| {
                let enc = if self.otlp_traces_protocol == "http/json" {
                    crate::otlp::Encoding::Json
                } else {
                    crate::otlp::Encoding::Protobuf
                };
                (url, enc)
            }),
        })
    }

    /// Parses the string given to `profile --sim=…`.
    pub fn parse_inline(s: &str) -> Result<SimArgs, clap::Error> {
        use clap::FromArgMatches;
        let cmd =
            <SimArgs as clap::Args>::augment_args(clap::Command::new("sim").no_binary_name(true));
        let matches = cmd.try_get_matches_from(s.split_whitespace())?;
        SimArgs::from_arg_matches(&matches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_are_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn genai_perf_style_command_parses() {
        let cli = Cli::try_parse_from([
            "ringperf",
            "profile",
            "-m",
            "Qwen/Qwen3-8B",
            "--url",
            "http://127.0.0.1:9000",
            "--endpoint-type",
            "completions",
            "--streaming",
            "--concurrency",
            "10k",
            "--synthetic-input-tokens-mean",
            "128",
            "--output-tokens-mean",
            "64",
            "--extra-inputs",
            "ignore_eos:true",
            "--request-count",
            "1k",
            "--benchmark-grace-period",
            "5s",
            "-H",
            "X-A: b",
        ])
        .unwrap();
        let Command::Profile(p) = cli.command else {
            panic!("not profile")
        };
        assert_eq!(p.load.concurrency, Some(Points(vec![10_000.0])));
        assert_eq!(p.load.request_count, Some(1000));
        assert_eq!(p.load.grace_period, 5_000_000_000);
        assert_eq!(p.target.endpoint_type.as_deref(), Some("completions"));
        assert_eq!(p.workload.extra_inputs, vec!["ignore_eos:true"]);
        assert!(p.sim.is_none());
    }

    #[test]
    fn a_url_that_names_its_endpoint_is_split() {
        assert_eq!(
            split_endpoint_url("http://h:8000/v1/chat/completions"),
            Some(("http://h:8000".into(), "/v1/chat/completions".into()))
        );
        assert_eq!(
            split_endpoint_url("https://h/proxy/v1/completions/"),
            Some(("https://h/proxy".into(), "/v1/completions".into()))
        );
        assert_eq!(split_endpoint_url("http://h:8000"), None);
        assert_eq!(split_endpoint_url("http://h:8000/v1"), None);
        assert_eq!(
            split_endpoint_url("localhost:8000/v1/embeddings")
                .unwrap()
                .1,
            "/v1/embeddings"
        );
    }

    #[test]
    fn inline_sim_flags() {
        let s = SimArgs::parse_inline("--ttft 50ms --itl normal:10ms,1ms --max-batch 8").unwrap();
        assert_eq!(s.ttft, TimeDist::Fixed { ns: 50_000_000 });
        assert_eq!(s.max_batch, 8);
        assert!(SimArgs::parse_inline("--bogus").is_err());
        let cli = Cli::try_parse_from(["ringperf", "profile", "--sim=--ttft 5ms"]).unwrap();
        let Command::Profile(p) = cli.command else {
            panic!()
        };
        assert_eq!(p.sim.as_deref(), Some("--ttft 5ms"));
        let cli =
            Cli::try_parse_from(["ringperf", "profile", "--sim", "--concurrency", "2"]).unwrap();
        let Command::Profile(p) = cli.command else {
            panic!()
        };
        assert_eq!(p.sim.as_deref(), Some(""));
        assert_eq!(p.load.concurrency, Some(Points(vec![2.0])));
    }
}
