//! GuideLLM's command lines, with GuideLLM's defaults, translated into ringperf's: `guidellm
//! benchmark [run]` (0.3 to 0.6: `--target`, `--profile`/`--rate-type`, `--rate`,
//! `--max-seconds`…) and `guidellm run` (0.7 on: `--backend kind=openai_http,target=…`,
//! `--profile kind=…`, `--constraint kind=…`). Both fill one [`Guide`], translated once.
//!
//! GuideLLM's defaults, and so ringperf's here: the `sweep` profile (a synchronous run, a
//! throughput run, then 8 constant rates between the two), chat completions, streamed, seed
//! 42, the model's own tokenizer. Each strategy of a profile runs until its constraint
//! (`--max-seconds`, `--max-requests`) or its data (`samples=N`) ends it; with neither,
//! GuideLLM runs until interrupted, and so does ringperf (up to a day).

use std::path::PathBuf;

use clap::Args;
use serde_json::{Map, Value};

use super::{Dialect, Native, ParseError, Peer};

fn refused(m: impl Into<String>) -> ParseError {
    ParseError::Refused(m.into())
}

/// A GuideLLM scheduling profile.
#[derive(Debug, Clone, PartialEq)]
enum Profile {
    Synchronous,
    Throughput { max_concurrency: Option<u64> },
    Concurrent { streams: Vec<u64> },
    Constant { rates: Vec<f64> },
    Poisson { rates: Vec<f64> },
    Sweep { size: usize, poisson: bool },
}

/// What a GuideLLM command line asks for, from either of its CLIs.
#[derive(Debug, Default)]
struct Guide {
    target: Option<String>,
    model: Option<String>,
    request_format: Option<String>,
    api_key: Option<String>,
    stream: Option<bool>,
    body: Map<String, Value>,
    headers: Vec<String>,
    max_tokens: Option<u64>,
    processor: Option<String>,
    data: Vec<String>,
    samples: Option<u64>,
    profile: Option<Profile>,
    max_concurrency: Option<u64>,
    rampup_s: Option<f64>,
    max_seconds: Option<f64>,
    max_requests: Option<u64>,
    warmup: Option<f64>,
    cooldown: Option<f64>,
    seed: u64,
    output: Option<PathBuf>,
    no_progress: bool,
    sim: Option<String>,
    notes: Vec<(String, String)>,
    /// A data file, read once through when nothing else bounds a strategy.
    file: Option<PathBuf>,
    /// Turns per conversation (requests count turns; ringperf's count sessions).
    turns: u64,
}

/// GuideLLM's `benchmark [run]` (0.3 to 0.6).
#[derive(Debug, Clone, Args)]
pub struct Benchmark {
    /// A built-in scenario (chat, rag) or a scenario file.
    #[arg(long, short = 'c')]
    pub scenario: Option<String>,
    /// The server's URL.
    #[arg(long)]
    pub target: Option<String>,
    /// Synthetic data (`prompt_tokens=256,output_tokens=128`, or JSON) or a file.
    #[arg(long)]
    pub data: Vec<String>,
    /// synchronous, concurrent, throughput, constant, async, poisson, sweep [default: sweep].
    #[arg(long, alias = "rate-type")]
    pub profile: Option<String>,
    /// Rates, streams or the sweep's size, by profile (a comma list or repeated).
    #[arg(long, value_delimiter = ',')]
    pub rate: Vec<f64>,
    /// openai_http.
    #[arg(long, alias = "backend-type")]
    pub backend: Option<String>,
    /// JSON: api_key, extras.body, extras.headers, stream, max_tokens, verify, timeout.
    #[arg(long, alias = "backend-args")]
    pub backend_kwargs: Option<String>,
    /// The model (default: the first the server lists).
    #[arg(long)]
    pub model: Option<String>,
    /// /v1/chat/completions (default), /v1/completions, /v1/responses, or the aliases
    /// chat_completions, text_completions, embeddings.
    #[arg(long, alias = "request-type")]
    pub request_format: Option<String>,
    /// The tokenizer (default: the model's).
    #[arg(long)]
    pub processor: Option<String>,
    /// Tokenizer arguments.
    #[arg(long)]
    pub processor_args: Option<String>,
    /// Dataset arguments.
    #[arg(long)]
    pub data_args: Vec<String>,
    /// Samples to take from the data (-1: all).
    #[arg(long, allow_negative_numbers = true)]
    pub data_samples: Option<i64>,
    /// Column mapping.
    #[arg(long)]
    pub data_column_mapper: Option<String>,
    /// Dataset preprocessors.
    #[arg(long)]
    pub data_preprocessors: Vec<String>,
    /// Their arguments.
    #[arg(long)]
    pub data_preprocessors_kwargs: Option<String>,
    /// The finalizer.
    #[arg(long)]
    pub data_finalizer: Option<String>,
    /// The sampler (shuffle).
    #[arg(long)]
    pub data_sampler: Option<String>,
    /// Data-loading workers.
    #[arg(long)]
    pub data_num_workers: Option<u64>,
    /// Data-loader arguments.
    #[arg(long)]
    pub dataloader_kwargs: Option<String>,
    /// The seed [default: 42].
    #[arg(long, default_value_t = 42)]
    pub random_seed: u64,
    /// Where results go.
    #[arg(long)]
    pub output_dir: Option<PathBuf>,
    /// Output files or formats.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub outputs: Vec<String>,
    /// The results' path (a folder or a file).
    #[arg(long)]
    pub output_path: Option<PathBuf>,
    /// No console output.
    #[arg(long, alias = "disable-console-outputs")]
    pub disable_console: bool,
    /// No progress display.
    #[arg(long, alias = "disable-progress")]
    pub disable_console_interactive: bool,
    /// Warm-up: a fraction (below 1) or an amount (seconds or requests).
    #[arg(long, alias = "warmup-percent")]
    pub warmup: Option<f64>,
    /// Cool-down: a fraction (below 1) or an amount (seconds or requests).
    #[arg(long, alias = "cooldown-percent")]
    pub cooldown: Option<f64>,
    /// Seconds to ramp up.
    #[arg(long)]
    pub rampup: Option<f64>,
    /// Requests kept per status.
    #[arg(long, alias = "output-sampling")]
    pub sample_requests: Option<i64>,
    /// Each strategy's seconds.
    #[arg(long)]
    pub max_seconds: Option<f64>,
    /// Each strategy's requests.
    #[arg(long)]
    pub max_requests: Option<u64>,
    /// Errors before stopping.
    #[arg(long)]
    pub max_errors: Option<u64>,
    /// Error rate before stopping.
    #[arg(long)]
    pub max_error_rate: Option<f64>,
    /// Global error rate before stopping.
    #[arg(long)]
    pub max_global_error_rate: Option<f64>,
    /// Over-saturation detection settings.
    #[arg(long)]
    pub over_saturation: Option<String>,
    /// Over-saturation detection with its defaults.
    #[arg(long, alias = "default-over-saturation")]
    pub detect_saturation: bool,
    /// Extra fields for the outputs.
    #[arg(long)]
    pub output_extras: Option<String>,
    /// Request formatter arguments.
    #[arg(long)]
    pub request_formatter_kwargs: Option<String>,
    /// ringperf: start the built-in simulator and benchmark it (its flags as one string).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "",
          value_name = "SIM_FLAGS")]
    pub sim: Option<String>,
    /// Notes from reading the line (when it was given as `profile`).
    #[arg(skip)]
    pub notes: Vec<String>,
}

/// GuideLLM's `run` (0.7 and later).
#[derive(Debug, Clone, Args)]
pub struct Run {
    /// A built-in scenario (chat, rag) or a config file.
    #[arg(long, short = 'c', alias = "scenario")]
    pub config: Option<String>,
    /// Labels, key=value.
    #[arg(long, short = 'l')]
    pub label: Vec<String>,
    /// `kind=openai_http,target=URL,model=…,request_format=…,api_key=…` (or JSON).
    #[arg(long)]
    pub backend: Option<String>,
    /// `kind=synthetic_text,prompt_tokens=…,output_tokens=…`, `kind=json_file,path=…` (or JSON).
    #[arg(long)]
    pub data: Vec<String>,
    /// `kind=pytorch,samples=N`.
    #[arg(long)]
    pub data_loader: Option<String>,
    /// Column mapping.
    #[arg(long)]
    pub data_column_mapper: Option<String>,
    /// Dataset preprocessors.
    #[arg(long)]
    pub data_preprocessor: Vec<String>,
    /// The finalizer.
    #[arg(long)]
    pub data_finalizer: Option<String>,
    /// `kind=sweep|synchronous|throughput|concurrent|constant|poisson,…` (or JSON).
    #[arg(long)]
    pub profile: Option<String>,
    /// `kind=max_duration,seconds=S`, `kind=max_requests,count=N`, … (repeatable).
    #[arg(long)]
    pub constraint: Vec<String>,
    /// `kind=static,value=N`.
    #[arg(long)]
    pub seed: Option<String>,
    /// `kind=json,path=…` (repeatable).
    #[arg(long)]
    pub output: Vec<String>,
    /// `kind=huggingface_auto,model=…`.
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// Metrics settings.
    #[arg(long)]
    pub metrics: Option<String>,
    /// `profile.rate 10,20,30` and the like (repeatable).
    #[arg(long, num_args = 2, value_names = ["KEY", "VALUES"])]
    pub r#override: Vec<String>,
    /// No console output.
    #[arg(long, alias = "disable-console-outputs")]
    pub disable_console: bool,
    /// No progress display.
    #[arg(long, alias = "disable-progress")]
    pub disable_console_interactive: bool,
    /// ringperf: start the built-in simulator and benchmark it (its flags as one string).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "",
          value_name = "SIM_FLAGS")]
    pub sim: Option<String>,
}

/// A GuideLLM option value: `kind=x,key=value,…` or JSON, as a JSON object. Dotted keys
/// (`extras.body.temperature=0.6`) nest; values are read as JSON where they parse.
fn spec(flag: &str, s: &str) -> Result<Map<String, Value>, ParseError> {
    let t = s.trim();
    if t.starts_with('{') {
        return match serde_json::from_str(t) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(refused(format!("{flag} {t}: not a JSON object"))),
        };
    }
    let mut out = Map::new();
    for pair in split_pairs(t) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(refused(format!(
                "{flag} {t}: expected key=value pairs (e.g. kind=synthetic_text,prompt_tokens=256)"
            )));
        };
        let value = serde_json::from_str(v.trim()).unwrap_or(Value::String(v.trim().into()));
        let mut keys: Vec<&str> = k.trim().split('.').collect();
        let last = keys.pop().unwrap_or_default();
        let mut m = &mut out;
        for key in keys {
            let slot = m
                .entry(key.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            m = slot.as_object_mut().expect("an object");
        }
        m.insert(last.to_string(), value);
    }
    Ok(out)
}

/// Splits `a=1,b=[1,2],c=x` at the commas outside brackets.
fn split_pairs(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' | '{' => depth += 1,
            ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| v.as_str()?.trim().parse().ok())
}

fn nums(v: &Value) -> Option<Vec<f64>> {
    match v {
        Value::Array(a) => a.iter().map(num).collect(),
        Value::String(s) => s.split(',').map(|x| x.trim().parse().ok()).collect(),
        other => num(other).map(|x| vec![x]),
    }
}

fn profile_named(name: &str, rates: &[f64], m: &Map<String, Value>) -> Result<Profile, ParseError> {
    let whole = |v: &[f64], what: &str| -> Result<Vec<u64>, ParseError> {
        if v.is_empty() {
            return Err(refused(format!("profile {name} needs its {what}")));
        }
        v.iter()
            .map(|x| {
                (x.fract() == 0.0 && *x >= 1.0)
                    .then_some(*x as u64)
                    .ok_or_else(|| refused(format!("profile {name}: {x} is not a whole {what}")))
            })
            .collect()
    };
    let get = |k: &str| m.get(k).and_then(nums);
    Ok(match name {
        "synchronous" => Profile::Synchronous,
        "throughput" => Profile::Throughput {
            max_concurrency: match get("max_concurrency")
                .or_else(|| (!rates.is_empty()).then(|| rates.to_vec()))
            {
                Some(v) => whole(&v, "max concurrency")?.first().copied(),
                None => None,
            },
        },
        "concurrent" => Profile::Concurrent {
            streams: whole(&get("streams").unwrap_or_else(|| rates.to_vec()), "streams")?,
        },
        "constant" | "async" | "poisson" => {
            let r = get("rate").unwrap_or_else(|| rates.to_vec());
            if r.is_empty() || r.iter().any(|x| x.is_nan() || *x <= 0.0) {
                return Err(refused(format!(
                    "profile {name} needs positive rates (--rate R, or rate=R)"
                )));
            }
            if name == "poisson" {
                Profile::Poisson { rates: r }
            } else {
                Profile::Constant { rates: r }
            }
        }
        "sweep" => {
            let size = get("sweep_size")
                .or_else(|| (!rates.is_empty()).then(|| rates.to_vec()))
                .and_then(|v| v.first().copied())
                .unwrap_or(10.0);
            if !(size >= 2.0 && size.fract() == 0.0) {
                return Err(refused(format!(
                    "profile sweep: {size} strategies: expected a whole number from 2"
                )));
            }
            let poisson = m.get("strategy_type").and_then(Value::as_str) == Some("poisson");
            Profile::Sweep {
                size: size as usize,
                poisson,
            }
        }
        "replay" => {
            return Err(refused(
                "profile replay: GuideLLM's trace replay is not built in: write the trace as \
                 mooncake JSONL (timestamp in ms, input_length, output_length) and run `ringperf \
                 profile --input-file FILE --fixed-schedule`",
            ))
        }
        other => {
            return Err(refused(format!(
                "profile {other}: expected synchronous, concurrent, throughput, constant, async, \
                 poisson or sweep"
            )))
        }
    })
}

/// The backend settings from `--backend-kwargs` (0.6) or `--backend kind=…` (0.7).
fn backend_settings(g: &mut Guide, m: &Map<String, Value>, flag: &str) -> Result<(), ParseError> {
    for (k, v) in m {
        match k.as_str() {
            "kind" | "type" => match v.as_str() {
                Some("openai_http") => {}
                Some(other) => {
                    return Err(refused(format!(
                        "{flag}: backend {other}: ringperf speaks HTTP to a server \
                         (openai_http); start vLLM as a server and give its URL"
                    )))
                }
                None => {}
            },
            "target" => g.target = v.as_str().map(String::from),
            "model" => g.model = v.as_str().map(String::from),
            "request_format" | "request_type" => g.request_format = v.as_str().map(String::from),
            "api_key" => g.api_key = v.as_str().map(String::from),
            "stream" => g.stream = v.as_bool(),
            "max_tokens" | "max_completion_tokens" => g.max_tokens = v.as_u64(),
            "extras" => {
                if let Some(b) = v.get("body").and_then(Value::as_object) {
                    g.body.extend(b.clone());
                }
                if let Some(h) = v.get("headers").and_then(Value::as_object) {
                    for (name, value) in h {
                        let value = value.as_str().map_or(value.to_string(), String::from);
                        g.headers.push(format!("{name}: {value}"));
                    }
                }
            }
            "verify" => {
                if v.as_bool() != Some(true) {
                    g.notes.push((
                        format!("{flag} verify"),
                        "ringperf verifies https certificates (GuideLLM does not by default): \
                         --insecure turns that off"
                            .into(),
                    ));
                }
            }
            "http2" | "timeout" | "timeout_connect" | "follow_redirects" | "validate_backend"
            | "api_routes" => g.notes.push((
                format!("{flag} {k}"),
                "no effect: ringperf speaks HTTP/1.1 with its own timeouts \
                 (--request-timeout, --connect-timeout)"
                    .into(),
            )),
            other => {
                return Err(refused(format!(
                    "{flag}: {other}: not a setting ringperf knows (target, model, \
                     request_format, api_key, stream, max_tokens, extras)"
                )))
            }
        }
    }
    Ok(())
}

/// The synthetic data settings (`prompt_tokens=…`), or a file.
fn data_settings(g: &mut Guide) -> Result<Vec<(String, String)>, ParseError> {
    let mut native = Vec::new();
    let set =
        |native: &mut Vec<(String, String)>, k: &str, v: String| native.push((k.to_string(), v));
    let data = g.data.clone();
    match data.as_slice() {
        [] => {
            return Err(refused(
                "--data is needed: synthetic (prompt_tokens=256,output_tokens=128) or a file",
            ))
        }
        [one] => {
            let t = one.trim();
            let synthetic = t.starts_with('{') || (t.contains('=') && t.contains("prompt_tokens"));
            let kind_given = t.contains("kind=");
            let m = if synthetic || kind_given {
                Some(spec("--data", t)?)
            } else {
                None
            };
            match m {
                Some(m)
                    if m.contains_key("prompt_tokens")
                        || m.get("kind").and_then(Value::as_str) == Some("synthetic_text") =>
                {
                    let get = |k: &str| m.get(k).and_then(num);
                    let isl = get("prompt_tokens")
                        .ok_or_else(|| refused("--data: synthetic data needs prompt_tokens"))?;
                    set(
                        &mut native,
                        "--synthetic-input-tokens-mean",
                        format!("{}", isl as u64),
                    );
                    if let Some(sd) = get("prompt_tokens_stdev") {
                        set(
                            &mut native,
                            "--synthetic-input-tokens-stddev",
                            format!("{}", sd as u64),
                        );
                    }
                    if let Some(o) = get("output_tokens") {
                        set(&mut native, "--output-tokens-mean", format!("{}", o as u64));
                    }
                    if let Some(sd) = get("output_tokens_stdev") {
                        set(
                            &mut native,
                            "--output-tokens-stddev",
                            format!("{}", sd as u64),
                        );
                    }
                    if [
                        "prompt_tokens_min",
                        "prompt_tokens_max",
                        "output_tokens_min",
                        "output_tokens_max",
                    ]
                    .iter()
                    .any(|k| m.contains_key(*k))
                    {
                        g.notes.push((
                            "--data min/max".into(),
                            "lengths are drawn from the normal distribution without the \
                             bounds (GuideLLM cuts them there; at four standard deviations, \
                             as its scenarios set them, no draw differs in practice)"
                                .into(),
                        ));
                    }
                    if let Some(n) = get("samples") {
                        g.samples = Some(n as u64);
                        set(
                            &mut native,
                            "--num-dataset-entries",
                            format!("{}", n as u64),
                        );
                    }
                    if let Some(t) = get("turns").filter(|t| *t > 1.0) {
                        set(&mut native, "--session-turns-mean", format!("{t}"));
                        g.turns = t as u64;
                    }
                    if let Some(p) = get("prefix_tokens").filter(|p| *p > 0.0) {
                        let count = get("prefix_count").unwrap_or(1.0);
                        set(
                            &mut native,
                            "--num-prefix-prompts",
                            format!("{}", count as u64),
                        );
                        set(
                            &mut native,
                            "--prefix-prompt-length",
                            format!("{}", p as u64),
                        );
                    }
                    if m.contains_key("prefix_buckets") {
                        return Err(refused(
                            "--data prefix_buckets: weighted prefix buckets are not built in: \
                             use prefix_tokens and prefix_count (one bucket)",
                        ));
                    }
                }
                Some(m) => {
                    let kind = m.get("kind").and_then(Value::as_str).unwrap_or("");
                    let path = m.get("path").and_then(Value::as_str);
                    match (kind, path) {
                        ("json_file" | "jsonl_file", Some(p)) => {
                            native.extend(file_data(g, p)?);
                        }
                        ("huggingface", _) => {
                            return Err(refused(format!(
                                "--data {t}: downloading Hugging Face datasets is not built \
                                 in: save the prompts as JSONL ({{\"prompt\": …}} a line) and \
                                 give kind=json_file,path=FILE"
                            )))
                        }
                        _ => {
                            return Err(refused(format!(
                                "--data {t}: not built in: synthetic_text and JSONL files \
                                 (json_file) are"
                            )))
                        }
                    }
                }
                None => native.extend(file_data(g, t)?),
            }
        }
        _ => {
            return Err(refused(
                "several --data sources (turn by turn): not built in: multi-turn synthetic \
                 data is one --data with turns=N",
            ))
        }
    }
    Ok(native)
}

/// A data file: JSON lines (`.jsonl`, or `.json` written a line each) are read as ringperf's
/// jsonl (a `prompt`, `text` or `messages` per line).
fn file_data(g: &mut Guide, path: &str) -> Result<Vec<(String, String)>, ParseError> {
    let p = std::path::Path::new(path);
    let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
    if !p.exists() {
        return Err(refused(
            if matches!(ext, "jsonl" | "json" | "csv" | "txt" | "parquet") {
                format!("--data {path}: no such file")
            } else {
                format!(
                "--data {path}: no such file, and downloading Hugging Face datasets is not built \
                 in: save the prompts as JSONL ({{\"prompt\": …}} a line) and pass that file"
            )
            },
        ));
    }
    let lines = ext == "jsonl"
        || (ext == "json"
            && std::fs::read(p)
                .ok()
                .and_then(|b| b.iter().copied().find(|c| !c.is_ascii_whitespace()))
                == Some(b'{'));
    if !lines {
        return Err(refused(format!(
            "--data {path}: only JSON lines are read ({{\"prompt\": …}} a line); convert it"
        )));
    }
    g.file = Some(p.to_path_buf());
    Ok(vec![
        ("--input-file".into(), path.into()),
        ("--dataset-type".into(), "jsonl".into()),
    ])
}

impl Guide {
    /// The native command line.
    fn translate(mut self, notes: Vec<String>) -> Result<crate::cli::ProfileArgs, ParseError> {
        let mut n = Native {
            notes,
            ..Native::default()
        };
        // The API.
        let format = self.request_format.clone();
        let kind = match format.as_deref().map(|f| f.trim_end_matches('/')) {
            None | Some("/v1/chat/completions" | "chat_completions") => "chat",
            Some("/v1/completions" | "text_completions") => "completions",
            Some("/v1/responses" | "responses") => "responses",
            Some("/v1/embeddings" | "embeddings") => "embeddings",
            Some(other) => {
                return Err(refused(format!(
                    "request format {other}: ringperf speaks /v1/chat/completions, \
                     /v1/completions, /v1/responses and /v1/embeddings"
                )))
            }
        };
        n.set("--endpoint-type", kind);
        if kind != "embeddings" && self.stream != Some(false) {
            n.on("--streaming");
        }
        match (&self.sim, &self.target) {
            (Some(flags), _) => {
                n.on(&if flags.is_empty() {
                    "--sim".to_string()
                } else {
                    format!("--sim={flags}")
                });
            }
            (None, Some(t)) => {
                // GuideLLM appends the API's path to the target, without a trailing /v1.
                let t = t.trim_end_matches('/');
                n.set("--url", t.strip_suffix("/v1").unwrap_or(t));
            }
            (None, None) => {
                return Err(refused(
                    "the target is needed: --target http://HOST:PORT (0.7: --backend \
                     kind=openai_http,target=http://HOST:PORT)",
                ))
            }
        }
        if let Some(m) = &self.model {
            n.set("-m", m);
        }
        if let Some(p) = &self.processor {
            n.set("--tokenizer", p);
        }
        if let Some(k) = &self.api_key {
            n.set("--api-key", k);
        }
        for h in &self.headers {
            n.set("-H", h);
        }
        n.set("--random-seed", self.seed);
        // GuideLLM's chat bodies ask with max_tokens, as ringperf did before.
        n.on("--use-legacy-max-tokens");
        // The data.
        for (k, v) in data_settings(&mut self)? {
            n.set(&k, v);
        }
        if let Some(t) = self.max_tokens {
            n.set("--output-tokens-mean", t);
        }
        if !self.body.is_empty() {
            n.set(
                "--extra-inputs",
                Value::Object(self.body.clone()).to_string(),
            );
        }
        // The load, per strategy.
        let profile = self.profile.clone().unwrap_or(Profile::Sweep {
            size: 10,
            poisson: false,
        });
        let cap = self.max_concurrency;
        let list = |v: &[f64]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let open = match &profile {
            Profile::Synchronous => {
                n.set("--concurrency", 1);
                false
            }
            Profile::Throughput { max_concurrency } => {
                // Unlimited in GuideLLM is its 512 workers' worth.
                n.set("--concurrency", max_concurrency.or(cap).unwrap_or(512));
                false
            }
            Profile::Concurrent { streams } => {
                n.set(
                    "--concurrency",
                    streams
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                );
                false
            }
            Profile::Constant { rates } | Profile::Poisson { rates } => {
                n.set("--request-rate", list(rates));
                n.set(
                    "--arrival",
                    if matches!(profile, Profile::Poisson { .. }) {
                        "poisson"
                    } else {
                        "constant"
                    },
                );
                if let Some(c) = cap {
                    n.set("--concurrency", c);
                }
                true
            }
            Profile::Sweep { size, poisson } => {
                n.set("--sweep", "auto")
                    .set("--sweep-points", size)
                    .set("--concurrency", cap.unwrap_or(512))
                    .set("--arrival", if *poisson { "poisson" } else { "constant" });
                n.note(
                    "profile sweep",
                    format!(
                        "a synchronous run, a throughput run ({} in flight), then {} {} rates \
                         between their throughputs (as GuideLLM); ringperf also stops early \
                         when the server falls behind a rate",
                        cap.unwrap_or(512),
                        size - 2,
                        if *poisson { "Poisson" } else { "constant" }
                    ),
                );
                true
            }
        };
        if let Some(r) = self.rampup_s.filter(|r| *r > 0.0) {
            n.set("--ramp-up", format!("{r}s")).on("--include-ramp-up");
        }
        // What ends each strategy.
        // A data file runs out: its lines bound a strategy that nothing else bounds.
        let samples = match (&self.file, self.samples) {
            (_, Some(s)) => Some(s),
            (Some(f), None) => Some(super::count_lines(f, None)?),
            (None, None) => None,
        };
        // GuideLLM counts requests, ringperf sessions when a conversation has several turns.
        let per_session = self.turns.max(1);
        let max_requests = self.max_requests.map(|r| r.div_ceil(per_session));
        let count = match (max_requests, self.max_seconds, samples) {
            (Some(r), Some(s), _) => {
                // Whichever comes first ends each strategy.
                n.set("--benchmark-duration", format!("{s}s"));
                n.set("--grace-period", "0s");
                Some(r)
            }
            (Some(r), None, _) => Some(r),
            (None, Some(s), _) => {
                n.set("--benchmark-duration", format!("{s}s"));
                // GuideLLM stops the strategy at its time; requests in flight are cancelled.
                n.set("--grace-period", "0s");
                None
            }
            (None, None, Some(samples)) => Some(samples.div_ceil(per_session)),
            (None, None, None) => {
                // GuideLLM runs until interrupted; so does ringperf, up to a day.
                let rate_max = match &profile {
                    Profile::Constant { rates } | Profile::Poisson { rates } => {
                        rates.iter().copied().fold(0.0, f64::max)
                    }
                    _ => 0.0,
                };
                let secs = if open && rate_max > 0.0 {
                    (5e6 / rate_max).min(86_400.0).floor().max(1.0)
                } else {
                    86_400.0
                };
                n.set("--benchmark-duration", format!("{secs}s"));
                n.set("--grace-period", "0s");
                n.note(
                    "no --max-seconds, --max-requests or samples",
                    format!(
                        "GuideLLM runs this until interrupted; ringperf too (Ctrl-C writes what \
                         was measured), for {} at most",
                        if secs >= 86_400.0 {
                            "a day".to_string()
                        } else {
                            format!("{secs} s")
                        }
                    ),
                );
                None
            }
        };
        // Warm-up and cool-down: a fraction of each strategy's requests, or a number of them.
        let fraction_of = |v: f64, of: u64| -> u64 {
            if v < 1.0 {
                (v * of as f64).round() as u64
            } else {
                v as u64
            }
        };
        match count {
            Some(c) => {
                let warm = self.warmup.map_or(0, |w| fraction_of(w, c));
                let cool = self.cooldown.map_or(0, |w| fraction_of(w, c));
                if warm + cool >= c {
                    return Err(refused(format!(
                        "warm-up ({warm}) and cool-down ({cool}) leave none of the {c} requests \
                         to measure"
                    )));
                }
                if warm > 0 {
                    n.set("--warmup-request-count", warm);
                }
                n.set("--request-count", c - warm);
                if cool > 0 {
                    n.note(
                        "--cooldown",
                        format!(
                            "the last {cool} requests are measured too (GuideLLM leaves them out)"
                        ),
                    );
                }
            }
            None => {
                for (flag, v) in [("--warmup", self.warmup), ("--cooldown", self.cooldown)] {
                    if v.is_some_and(|v| v > 0.0) {
                        n.note(
                            flag,
                            "by time it is not built in: requests in that part of each strategy \
                             are measured too (a warm-up by count is: --max-requests)",
                        );
                    }
                }
            }
        }
        if let Some(dir) = &self.output {
            n.set("--artifact-dir", dir.display());
        }
        if self.no_progress {
            n.on("--no-progress");
        }
        for (flag, why) in std::mem::take(&mut self.notes) {
            n.note(&flag, why);
        }
        n.finish(Peer {
            dialect: Dialect::Guidellm,
            ..Peer::default()
        })
    }
}

/// A built-in scenario's data and profile (GuideLLM's `chat` and `rag`).
fn scenario(name: &str) -> Result<(&'static str, &'static str), ParseError> {
    match name {
        "chat" => Ok((
            "sweep",
            "prompt_tokens=512,prompt_tokens_stdev=128,prompt_tokens_min=1,prompt_tokens_max=1024,output_tokens=256,output_tokens_stdev=64,output_tokens_min=1,output_tokens_max=1024",
        )),
        "rag" => Ok((
            "sweep",
            "prompt_tokens=4096,prompt_tokens_stdev=512,prompt_tokens_min=2048,prompt_tokens_max=6144,output_tokens=512,output_tokens_stdev=128,output_tokens_min=1,output_tokens_max=1024",
        )),
        other => Err(refused(format!(
            "scenario {other}: ringperf knows GuideLLM's built-in chat and rag; a scenario file \
             is not read: give its settings as flags"
        ))),
    }
}

/// Where the outputs go: a folder, or a file's folder.
fn output_folder(p: &std::path::Path) -> PathBuf {
    if p.extension().is_some() {
        p.parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), PathBuf::from)
    } else {
        p.to_path_buf()
    }
}

const OUTPUTS: &str = "ringperf writes its own artifacts there (AIPerf's layout: \
    profile_export_ringperf.json and .csv, profile_export.jsonl, report.html), not GuideLLM's \
    benchmarks.json";

impl Benchmark {
    /// Translates the line into ringperf's flags, with GuideLLM's defaults.
    pub fn translate(self) -> Result<crate::cli::ProfileArgs, ParseError> {
        let mut g = Guide {
            target: self.target.clone(),
            model: self.model.clone(),
            request_format: self.request_format.clone(),
            processor: self.processor.clone(),
            data: self.data.clone(),
            seed: self.random_seed,
            max_seconds: self.max_seconds,
            max_requests: self.max_requests,
            warmup: self.warmup,
            cooldown: self.cooldown,
            rampup_s: self.rampup,
            sim: self.sim.clone(),
            no_progress: self.disable_console_interactive || self.disable_console,
            ..Guide::default()
        };
        let mut profile = self.profile.clone();
        if let Some(s) = &self.scenario {
            let (p, data) = scenario(s)?;
            profile.get_or_insert_with(|| p.to_string());
            if g.data.is_empty() {
                g.data.push(data.to_string());
            }
        }
        if let Some(b) = self.backend.as_deref().filter(|b| *b != "openai_http") {
            return Err(refused(format!(
                "--backend {b}: ringperf speaks HTTP to a server (openai_http); start vLLM as a \
                 server and give --target"
            )));
        }
        if let Some(kw) = &self.backend_kwargs {
            let m = spec("--backend-kwargs", kw)?;
            backend_settings(&mut g, &m, "--backend-kwargs")?;
        }
        g.profile = Some(profile_named(
            profile.as_deref().unwrap_or("sweep"),
            &self.rate,
            &Map::new(),
        )?);
        if let Some(s) = self.data_samples.filter(|s| *s > 0) {
            g.samples = Some(s as u64);
        }
        if let Some(m) = self.data_column_mapper.as_deref() {
            let plain = serde_json::from_str::<Map<String, Value>>(m).is_ok_and(|m| {
                m.get("text_column")
                    .and_then(Value::as_str)
                    .is_some_and(|c| matches!(c, "prompt" | "text"))
                    && m.len() == 1
            });
            if !plain {
                return Err(refused(format!(
                    "--data-column-mapper {m}: column mapping is not built in: ringperf reads \
                     each JSONL line's prompt, text or messages"
                )));
            }
        }
        match (&self.output_path, &self.output_dir) {
            (Some(p), _) => g.output = Some(output_folder(p)),
            (None, Some(d)) => g.output = Some(d.clone()),
            (None, None) => {}
        }
        let mut notes = self.notes.clone();
        let mut note = |flag: &str, why: &str| notes.push(format!("{flag}: {why}"));
        if self.output_path.is_some() || self.output_dir.is_some() || !self.outputs.is_empty() {
            note("--output-path/--output-dir/--outputs", OUTPUTS);
        }
        for (given, flag, why) in [
            (self.processor_args.is_some(), "--processor-args", "no effect: the tokenizer is tokenizer.json"),
            (!self.data_args.is_empty(), "--data-args", "no effect: no dataset is downloaded"),
            (!self.data_preprocessors.is_empty() || self.data_preprocessors_kwargs.is_some(), "--data-preprocessors", "no effect: prompts are sent as generated or read"),
            (self.data_finalizer.is_some(), "--data-finalizer", "no effect: prompts are sent as generated or read"),
            (self.data_sampler.is_some(), "--data-sampler", "the entries are taken in order, wrapping around"),
            (self.data_num_workers.is_some() || self.dataloader_kwargs.is_some(), "--data-num-workers/--dataloader-kwargs", "no effect: ringperf prepares prompts on every core"),
            (self.sample_requests.is_some(), "--sample-requests", "no effect: every request's record is kept"),
            (self.max_errors.is_some() || self.max_error_rate.is_some() || self.max_global_error_rate.is_some(), "--max-errors/--max-error-rate", "ringperf finishes each strategy whatever fails and counts every failure by kind (--fail-on error_rate>X fails the run afterwards)"),
            (self.detect_saturation || self.over_saturation.is_some(), "--detect-saturation/--over-saturation", "no effect on a fixed profile; a sweep stops when the server falls behind a rate"),
            (self.output_extras.is_some(), "--output-extras", "no effect on ringperf's artifacts"),
            (self.request_formatter_kwargs.is_some(), "--request-formatter-kwargs", "not built in: give body fields with --backend-kwargs '{\"extras\": {\"body\": {...}}}'"),
        ] {
            if given {
                note(flag, why);
            }
        }
        g.translate(notes)
    }
}

impl Run {
    /// Translates the line into ringperf's flags, with GuideLLM's defaults.
    pub fn translate(self) -> Result<crate::cli::ProfileArgs, ParseError> {
        let mut g = Guide {
            data: Vec::new(),
            seed: 42,
            sim: self.sim.clone(),
            no_progress: self.disable_console_interactive || self.disable_console,
            ..Guide::default()
        };
        let mut notes = Vec::new();
        let mut profile_name = "sweep".to_string();
        let mut profile_map = Map::new();
        if let Some(c) = &self.config {
            let (p, data) = scenario(c)?;
            profile_name = p.to_string();
            g.data.push(data.to_string());
        }
        if let Some(b) = &self.backend {
            let m = spec("--backend", b)?;
            backend_settings(&mut g, &m, "--backend")?;
        }
        if !self.data.is_empty() {
            g.data = self.data.clone();
        }
        if let Some(l) = &self.data_loader {
            let m = spec("--data-loader", l)?;
            if let Some(s) = m.get("samples").and_then(num).filter(|s| *s > 0.0) {
                g.samples = Some(s as u64);
            }
        }
        if let Some(p) = &self.profile {
            let m = spec("--profile", p)?;
            if let Some(k) = m.get("kind").and_then(Value::as_str) {
                profile_name = k.to_string();
            }
            if let Some(c) = m.get("max_concurrency").and_then(num) {
                g.max_concurrency = Some(c as u64);
            }
            if let Some(r) = m.get("rampup_duration").and_then(num) {
                g.rampup_s = Some(r);
            }
            g.warmup = m.get("warmup").and_then(num);
            g.cooldown = m.get("cooldown").and_then(num);
            profile_map = m;
        }
        // --override profile.rate 10,20,30: a list on the profile's main setting.
        let mut it = self.r#override.chunks(2);
        for pair in it.by_ref() {
            let [key, values] = pair else { break };
            match key.as_str() {
                "profile.rate" | "profile.streams" | "profile.sweep_size" => {
                    let k = key.trim_start_matches("profile.");
                    let v = nums(&Value::String(values.clone())).ok_or_else(|| {
                        refused(format!("--override {key} {values}: expected numbers"))
                    })?;
                    profile_map.insert(k.into(), Value::from(v));
                }
                other => {
                    return Err(refused(format!(
                        "--override {other}: per-strategy settings are not built in: every \
                         point of a ringperf sweep runs with the same bounds"
                    )))
                }
            }
        }
        g.profile = Some(profile_named(&profile_name, &[], &profile_map)?);
        for c in &self.constraint {
            let m = spec("--constraint", c)?;
            match m.get("kind").and_then(Value::as_str) {
                Some("max_duration") => g.max_seconds = m.get("seconds").and_then(num),
                Some("max_requests") => {
                    g.max_requests = m.get("count").and_then(num).map(|c| c as u64)
                }
                Some("max_errors" | "max_error_rate" | "max_global_error_rate") => notes.push(
                    "--constraint max_errors: ringperf finishes each strategy whatever fails and \
                     counts every failure by kind (--fail-on error_rate>X fails the run \
                     afterwards)"
                        .to_string(),
                ),
                Some("over_saturation") => notes.push(
                    "--constraint over_saturation: no effect on a fixed profile; a sweep stops \
                     when the server falls behind a rate"
                        .to_string(),
                ),
                other => {
                    return Err(refused(format!(
                        "--constraint {}: expected max_duration, max_requests, max_errors, \
                         max_error_rate or over_saturation",
                        other.unwrap_or("(no kind)")
                    )))
                }
            }
        }
        if let Some(s) = &self.seed {
            let m = spec("--seed", s)?;
            g.seed = m
                .get("value")
                .and_then(Value::as_u64)
                .ok_or_else(|| refused(format!("--seed {s}: expected kind=static,value=N")))?;
        }
        if let Some(t) = &self.tokenizer {
            let m = spec("--tokenizer", t)?;
            g.processor = m.get("model").and_then(Value::as_str).map(String::from);
        }
        if let Some(first) = self.output.first() {
            let m = spec("--output", first)?;
            if let Some(p) = m.get("path").and_then(Value::as_str) {
                g.output = Some(output_folder(std::path::Path::new(p)));
            }
            notes.push(format!("--output: {OUTPUTS}"));
        }
        if self.data_column_mapper.is_some() {
            return Err(refused(
                "--data-column-mapper: column mapping is not built in: ringperf reads each JSONL \
                 line's prompt, text or messages",
            ));
        }
        for (given, flag, why) in [
            (
                !self.label.is_empty(),
                "--label",
                "no effect on ringperf's artifacts",
            ),
            (
                !self.data_preprocessor.is_empty(),
                "--data-preprocessor",
                "no effect: prompts are sent as generated or read",
            ),
            (
                self.data_finalizer.is_some(),
                "--data-finalizer",
                "no effect: prompts are sent as generated or read",
            ),
            (
                self.metrics.is_some(),
                "--metrics",
                "no effect: every request's record is kept",
            ),
        ] {
            if given {
                notes.push(format!("{flag}: {why}"));
            }
        }
        g.translate(notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_read_as_guidellm_writes_them() {
        let m = spec(
            "--data",
            "kind=synthetic_text,prompt_tokens=256,output_tokens=128",
        )
        .unwrap();
        assert_eq!(m["kind"], "synthetic_text");
        assert_eq!(m["prompt_tokens"], 256);
        let m = spec(
            "--backend",
            "kind=openai_http,target=http://h:8000,extras.body.temperature=0.6",
        )
        .unwrap();
        assert_eq!(m["target"], "http://h:8000");
        assert_eq!(m["extras"]["body"]["temperature"], 0.6);
        let m = spec("--profile", r#"{"kind":"constant","rate":[16,32]}"#).unwrap();
        assert_eq!(nums(&m["rate"]), Some(vec![16.0, 32.0]));
        let m = spec("--profile", "kind=concurrent,streams=[16,32]").unwrap();
        assert_eq!(nums(&m["streams"]), Some(vec![16.0, 32.0]));
        assert!(spec("--data", "nonsense").is_err());
    }

    #[test]
    fn profiles_take_their_main_setting_from_rate() {
        let none = Map::new();
        assert_eq!(
            profile_named("concurrent", &[16.0], &none).unwrap(),
            Profile::Concurrent { streams: vec![16] }
        );
        assert_eq!(
            profile_named("sweep", &[], &none).unwrap(),
            Profile::Sweep {
                size: 10,
                poisson: false
            }
        );
        assert!(profile_named("constant", &[], &none).is_err());
        assert!(profile_named("concurrent", &[1.5], &none).is_err());
        assert!(profile_named("replay", &[], &none).is_err());
    }

    #[test]
    fn outputs_go_to_a_folder() {
        assert_eq!(output_folder("results.json".as_ref()), PathBuf::from("."));
        assert_eq!(output_folder("a/b.json".as_ref()), PathBuf::from("a"));
        assert_eq!(
            output_folder("results/".as_ref()),
            PathBuf::from("results/")
        );
    }
}
