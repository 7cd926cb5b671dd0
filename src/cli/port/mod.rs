//! Command lines of GenAI-Perf, AIPerf, GuideLLM and `vllm bench serve`, run as those tools run
//! them: with their flags, and with their defaults for whatever a line leaves out.
//!
//! **The dialect.** The subcommand names it when it can: `bench serve` is vLLM's, `benchmark`
//! (and `benchmark run`) GuideLLM's, `run` GuideLLM 0.7's, `analyze` GenAI-Perf's. `profile` is
//! shared by AIPerf and GenAI-Perf, whose defaults agree on the load (concurrency 1, twice the
//! concurrency in requests and at least 10, no warm-up); a flag only GenAI-Perf has
//! (`--service-kind`, `--backend tensorrtllm|vllm`, `-p/--measurement-interval`,
//! `--session-concurrency`, arguments after `--`) reads the line as GenAI-Perf's. A `profile`
//! line that only another peer's parser accepts (`--random-input-len`, `--target`…) is read in
//! that peer's dialect, and a note says so.
//!
//! **The translation.** vLLM's and GuideLLM's lines are translated into ringperf's own flags,
//! the native command line is printed (`ringperf: runs as: ringperf profile …`), and it runs
//! through the same plan as any other. Flags that change nothing sent are accepted with one
//! note each; flags that ask for a load ringperf does not send stop the run before anything is
//! sent, with one `error:` line that says what to use instead ([`table`] lists those of
//! AIPerf's and GenAI-Perf's `profile`). `docs/porting.md` has the table, flag by flag.

pub mod guidellm;
mod table;
pub mod vllm;

use std::ffi::OsString;

use clap::{Args, Parser};

use super::{Cli, Command, ProfileArgs};
use crate::api::Kind;
use crate::plan::{PlanError, Spec};

/// The tool whose command line this is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// ringperf's own, which is AIPerf's `profile` (its flags and defaults).
    #[default]
    Aiperf,
    /// GenAI-Perf's `profile` and `analyze`.
    GenaiPerf,
    /// `vllm bench serve`.
    Vllm,
    /// GuideLLM's `benchmark` (0.3 to 0.6) and `run` (0.7 and later).
    Guidellm,
}

impl Dialect {
    /// The tool's name, as its users write it.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Aiperf => "AIPerf",
            Dialect::GenaiPerf => "GenAI-Perf",
            Dialect::Vllm => "vllm bench serve",
            Dialect::Guidellm => "GuideLLM",
        }
    }
}

/// What a peer's command line asks for beyond ringperf's own flags: the notes to print, and
/// the peer's own result files.
#[derive(Debug, Clone, Default)]
pub struct Peer {
    /// The dialect the line was read in.
    pub dialect: Dialect,
    /// One line each, printed before anything is prepared.
    pub notes: Vec<String>,
    /// The native command line a translated line runs as.
    pub native: Option<String>,
    /// vLLM's result file and console summary.
    pub vllm: Option<vllm::Results>,
    /// Draw every request on a timeline (vLLM's `--plot-timeline`), coloured by these ITL
    /// thresholds (ms).
    pub timeline: Option<(f64, f64)>,
    /// Write GenAI-Perf `analyze`'s summary (`analyze_export_genai_perf.csv`).
    pub genai_perf_analyze: bool,
}

/// Why a command line does not run.
#[derive(Debug)]
pub enum ParseError {
    /// clap's own message (help and version land here too).
    Clap(clap::Error),
    /// One line: what the line asks for that ringperf does not do, and what to use instead.
    Refused(String),
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::Clap(e) => write!(f, "{}", e.to_string().trim_end()),
            ParseError::Refused(m) => f.write_str(m),
        }
    }
}

impl From<clap::Error> for ParseError {
    fn from(e: clap::Error) -> ParseError {
        ParseError::Clap(e)
    }
}

impl From<PlanError> for ParseError {
    fn from(e: PlanError) -> ParseError {
        ParseError::Refused(e.to_string())
    }
}

/// Parses a command line in whatever dialect it is written in; a peer's subcommand comes back
/// as `Command::Profile` with its [`Peer`] filled in.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Cli, ParseError> {
    let mut argv = Vec::new();
    for (i, a) in args.into_iter().enumerate() {
        argv.push(a.into_string().map_err(|a| {
            ParseError::Refused(format!(
                "argument {i} ({}) is not UTF-8",
                a.to_string_lossy()
            ))
        })?);
    }
    // GuideLLM's `benchmark` is a group whose default command is `run`.
    if argv.get(1).map(String::as_str) == Some("benchmark") {
        match argv.get(2).map(String::as_str) {
            Some("run") => {
                argv.remove(2);
            }
            Some("run-embeddings") => {
                argv[2] = "--request-type=embeddings".into();
            }
            Some("from-file") => {
                return Err(ParseError::Refused(
                    "benchmark from-file: ringperf rebuilds a report with `ringperf report DIR`"
                        .into(),
                ))
            }
            _ => {}
        }
    }
    // `guidellm run` (0.7) spells the target inside --backend; 0.6's flags belong to `benchmark`.
    if argv.get(1).map(String::as_str) == Some("run") {
        const OLD: [&str; 6] = [
            "--target",
            "--rate-type",
            "--rate",
            "--max-requests",
            "--max-seconds",
            "--output-path",
        ];
        if let Some(old) = argv[2..]
            .iter()
            .map(|a| a.split('=').next().unwrap_or(a))
            .find(|a| OLD.contains(a))
        {
            return Err(ParseError::Refused(format!(
                "run {old}: that is GuideLLM 0.6's flag, for `ringperf benchmark …` (as `guidellm \
                 benchmark`); GuideLLM 0.7's `run` takes --backend kind=openai_http,target=URL, \
                 --profile kind=…,rate=… and --constraint kind=max_requests,count=N"
            )));
        }
    }
    let cli = match argv.get(1).map(String::as_str) {
        Some(sub @ ("profile" | "analyze")) => {
            let sub = sub.to_string();
            shared_profile(&argv, &sub)?
        }
        _ => Cli::try_parse_from(&argv)?,
    };
    resolve(cli)
}

/// `profile` or `analyze`: AIPerf's and GenAI-Perf's flags, the table's screened out; a line
/// only another peer's parser reads is read in that peer's dialect.
fn shared_profile(argv: &[String], sub: &str) -> Result<Cli, ParseError> {
    let words = &argv[2..];
    if sub == "profile" {
        if let Some(b) = vllm_backend(words) {
            return other_dialect(
                argv,
                "bench serve",
                &format!("--backend {b}"),
                Dialect::Vllm,
            );
        }
    }
    // `analyze` has a --sweep-type of its own (GenAI-Perf's), unlike AIPerf's grid or zip.
    let own: &[&str] = if sub == "analyze" {
        &["--sweep-type"]
    } else {
        &[]
    };
    let screened = table::screen(words, table::PROFILE, own).map_err(ParseError::Refused)?;
    let line: Vec<String> = argv[..2].iter().cloned().chain(screened.rest).collect();
    match Cli::try_parse_from(&line) {
        Ok(mut cli) => {
            match &mut cli.command {
                Command::Profile(p) => p.peer.notes.extend(screened.notes),
                Command::Analyze(a) => a.profile.peer.notes.extend(screened.notes),
                _ => {}
            }
            Ok(cli)
        }
        Err(e) if sub == "profile" && e.kind() == clap::error::ErrorKind::UnknownArgument => {
            let flag = match e.get(clap::error::ContextKind::InvalidArg) {
                Some(clap::error::ContextValue::String(s)) => s.clone(),
                _ => String::new(),
            };
            for (cmd, dialect) in [
                ("bench serve", Dialect::Vllm),
                ("benchmark", Dialect::Guidellm),
            ] {
                if let Ok(cli) = other_dialect(argv, cmd, &flag, dialect) {
                    return Ok(cli);
                }
            }
            Err(e.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Reads `ringperf profile WORDS` as `ringperf CMD WORDS`, with a note naming the flag that
/// decided it.
fn other_dialect(argv: &[String], cmd: &str, flag: &str, d: Dialect) -> Result<Cli, ParseError> {
    let line: Vec<String> = std::iter::once(argv[0].clone())
        .chain(cmd.split(' ').map(String::from))
        .chain(argv[2..].iter().cloned())
        .collect();
    let mut cli = Cli::try_parse_from(&line)?;
    let note = format!(
        "read as `{}` with {}'s defaults: {flag} is {}'s flag (run it as `ringperf {cmd} …`)",
        d.name(),
        d.name(),
        d.name()
    );
    match &mut cli.command {
        Command::Bench(b) => b.notes.push(note),
        Command::Benchmark(b) => b.notes.push(note),
        _ => {}
    }
    Ok(cli)
}

/// The value of `--backend` when it names one of vLLM's backends (GenAI-Perf's
/// `tensorrtllm` and `vllm` mean Triton's).
fn vllm_backend(words: &[String]) -> Option<String> {
    let mut it = words.iter();
    while let Some(w) = it.next() {
        let value = match w.strip_prefix("--backend") {
            Some("") => it.next().cloned(),
            Some(v) if v.starts_with('=') => Some(v[1..].to_string()),
            _ => continue,
        };
        return value.filter(|v| vllm::BACKENDS.contains(&v.as_str()) && v != "vllm");
    }
    None
}

/// A peer's subcommand, translated into `Command::Profile` (other commands are left alone).
pub fn resolve(mut cli: Cli) -> Result<Cli, ParseError> {
    cli.command = match cli.command {
        Command::Bench(b) => Command::Profile(Box::new(b.translate()?)),
        Command::Benchmark(b) => Command::Profile(Box::new(b.translate()?)),
        Command::Run(r) => Command::Profile(Box::new(r.translate()?)),
        Command::Analyze(a) => Command::Profile(Box::new(a.translate()?)),
        other => other,
    };
    Ok(cli)
}

/// ringperf's own flags, built up by a translation; parsed into [`ProfileArgs`] at the end.
#[derive(Debug, Default)]
pub struct Native {
    argv: Vec<String>,
    /// Notes for the user, one line each.
    pub notes: Vec<String>,
}

impl Native {
    /// Adds `--name value`.
    pub fn set(&mut self, name: &str, value: impl std::fmt::Display) -> &mut Native {
        self.argv.push(name.to_string());
        self.argv.push(value.to_string());
        self
    }

    /// Adds the switch `--name`.
    pub fn on(&mut self, name: &str) -> &mut Native {
        self.argv.push(name.to_string());
        self
    }

    /// Adds a note.
    pub fn note(&mut self, flag: &str, why: impl std::fmt::Display) {
        let line = format!("{flag}: {why}");
        if !self.notes.contains(&line) {
            self.notes.push(line);
        }
    }

    /// Whether `--name` was set.
    pub fn has(&self, name: &str) -> bool {
        self.argv.iter().any(|a| a == name)
    }

    /// The native command line, as a shell would take it.
    pub fn line(&self) -> String {
        std::iter::once("ringperf profile".to_string())
            .chain(self.argv.iter().map(|a| shell_quote(a)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Parses the native flags into `profile`'s arguments, with `peer` attached.
    pub fn finish(self, mut peer: Peer) -> Result<ProfileArgs, ParseError> {
        let line = self.line();
        let argv = ["ringperf", "profile"]
            .into_iter()
            .map(String::from)
            .chain(self.argv);
        let cli = Cli::try_parse_from(argv).map_err(|e| {
            ParseError::Refused(format!(
                "the translation `{line}` did not parse (a bug in ringperf; please report it): {}",
                e.to_string().lines().next().unwrap_or("")
            ))
        })?;
        let Command::Profile(mut p) = cli.command else {
            unreachable!("parsed as profile")
        };
        peer.notes.extend(self.notes);
        peer.native = Some(line);
        p.peer = peer;
        Ok(*p)
    }
}

/// The request lines of a JSONL file (those whose key holds the value, with a filter): what
/// vLLM's `--num-prompts -1` and a GuideLLM file without a bound send.
fn count_lines(path: &std::path::Path, filter: Option<(&str, &str)>) -> Result<u64, ParseError> {
    let refused = ParseError::Refused;
    use std::io::BufRead;
    let f = std::fs::File::open(path).map_err(|e| refused(format!("{}: {e}", path.display())))?;
    let mut n = 0u64;
    for line in std::io::BufReader::new(f).lines() {
        let line = line.map_err(|e| refused(format!("{}: {e}", path.display())))?;
        if line.trim().is_empty() {
            continue;
        }
        let keep = match filter {
            None => true,
            Some((k, want)) => serde_json::from_str::<serde_json::Value>(&line)
                .ok()
                .and_then(|v| v.get(k).and_then(|x| x.as_str().map(|s| s == want)))
                .unwrap_or(false),
        };
        n += u64::from(keep);
    }
    if n == 0 {
        return Err(refused(format!(
            "{}: no request line{}",
            path.display(),
            filter.map_or(String::new(), |(k, v)| format!(" with {k} {v}"))
        )));
    }
    Ok(n)
}

/// `s` quoted for a POSIX shell where it needs it.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@%+".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Milliseconds as GenAI-Perf and AIPerf write them (a bare number), in ns.
fn parse_ms(s: &str) -> Result<u64, String> {
    let ms: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of milliseconds"))?;
    if !(0.0..=1e12).contains(&ms) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok((ms * 1e6).round() as u64)
}

/// A boolean as AIPerf's `--flag true|false` writes it.
fn parse_bool(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("{s:?}: expected true or false")),
    }
}

/// AIPerf's and GenAI-Perf's `profile` flags that map onto ringperf's in a way more than an
/// alias can say (hidden from `--help`; see `docs/porting.md`).
#[derive(Debug, Clone, Default, Args)]
pub struct PortArgs {
    // GenAI-Perf.
    /// GenAI-Perf: `openai`, or `triton` (Triton's HTTP generate extension).
    #[arg(long, hide = true)]
    pub service_kind: Option<String>,
    /// GenAI-Perf: a measurement window of this many ms; perf_analyzer measures three of them.
    #[arg(short = 'p', long, hide = true, value_parser = parse_ms)]
    pub measurement_interval: Option<u64>,
    /// GenAI-Perf: perf_analyzer's stability criterion.
    #[arg(short = 's', long, hide = true)]
    pub stability_percentage: Option<f64>,
    /// GenAI-Perf: Triton's backend (`tensorrtllm` or `vllm`).
    #[arg(long, hide = true)]
    pub backend: Option<String>,
    /// GenAI-Perf / AIPerf: more logging.
    #[arg(short = 'v', long, hide = true)]
    pub verbose: bool,
    /// GenAI-Perf: sessions in flight.
    #[arg(long, hide = true)]
    pub session_concurrency: Option<u64>,
    /// GenAI-Perf: arguments after `--`, for perf_analyzer.
    #[arg(last = true, hide = true, allow_hyphen_values = true)]
    pub passthrough: Vec<String>,

    // AIPerf.
    /// AIPerf: a dataset it downloads (`sharegpt`).
    #[arg(long, hide = true)]
    pub public_dataset: Option<String>,
    /// AIPerf / GenAI-Perf: conversations (sessions) to run.
    #[arg(long, aliases = ["conversation-num", "num-conversations"], hide = true,
          value_parser = crate::units::parse_count)]
    pub num_sessions: Option<u64>,
    /// AIPerf / GenAI-Perf: pause between a session's turns, in ms.
    #[arg(long, alias = "session-turn-delay-mean", hide = true, value_parser = parse_ms)]
    pub conversation_turn_delay_mean: Option<u64>,
    /// AIPerf / GenAI-Perf: its standard deviation, in ms.
    #[arg(long, alias = "session-turn-delay-stddev", hide = true, value_parser = parse_ms)]
    pub conversation_turn_delay_stddev: Option<u64>,
    /// AIPerf / GenAI-Perf: a factor on those pauses.
    #[arg(long, alias = "session-delay-ratio", hide = true)]
    pub conversation_turn_delay_ratio: Option<f64>,
    /// AIPerf: start a trace at its first timestamp.
    #[arg(long, hide = true)]
    pub fixed_schedule_auto_offset: bool,
    /// AIPerf: replay a trace from this timestamp (ms).
    #[arg(long, hide = true)]
    pub fixed_schedule_start_offset: Option<u64>,
    /// AIPerf: replay a trace up to this timestamp (ms).
    #[arg(long, hide = true)]
    pub fixed_schedule_end_offset: Option<u64>,
    /// AIPerf: keep a trace's own load mode instead of its timestamps.
    #[arg(long, hide = true)]
    pub no_fixed_schedule: bool,
    /// AIPerf: `false` sends the warm-up before every repeated run (--warmup-every-run).
    #[arg(long, hide = true, value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub profile_run_disable_warmup_after_first: Option<bool>,
    /// AIPerf: the warm-up before every repeated run.
    #[arg(long, hide = true)]
    pub no_profile_run_disable_warmup_after_first: bool,
    /// AIPerf: wait this many seconds for the model to answer.
    #[arg(long, hide = true)]
    pub wait_for_model_timeout: Option<f64>,
    /// AIPerf: empty the server's prefix cache first.
    #[arg(long, hide = true)]
    pub reset_kv_cache: bool,
    /// AIPerf: raise the concurrency from 1 over this many seconds.
    #[arg(long, hide = true)]
    pub concurrency_ramp_duration: Option<f64>,
    /// AIPerf: raise the rate over this many seconds.
    #[arg(long, hide = true)]
    pub request_rate_ramp_duration: Option<f64>,
    /// AIPerf: pause between a sweep's points, in seconds.
    #[arg(long, hide = true)]
    pub parameter_sweep_cooldown_seconds: Option<f64>,
    /// The line is GenAI-Perf's whatever its flags (`analyze`).
    #[arg(skip)]
    pub genai_perf_line: bool,
}

/// AIPerf's `--public-dataset sharegpt`: the file it downloads, on the hub.
const SHAREGPT: &str = "hf://datasets/anon8231489123/ShareGPT_Vicuna_unfiltered/ShareGPT_V3_unfiltered_cleaned_split.json";

/// What the peers' flags mean for the run, beyond the spec.
#[derive(Debug, Default)]
pub struct Ported {
    /// One line per flag that was accepted without effect, or mapped in a way worth saying.
    pub notes: Vec<String>,
    /// Turn off the live progress line.
    pub no_progress: bool,
    /// The dialect the flags read as.
    pub dialect: Dialect,
    /// AIPerf's pause between a sweep's points (ns).
    pub sweep_pause_ns: Option<u64>,
}

/// The endpoint types of GenAI-Perf and AIPerf that are not OpenAI ones, and what to do.
pub fn foreign_endpoint_type(name: &str) -> Option<&'static str> {
    Some(match name {
        "multimodal" | "vision" => {
            "images and audio go in chat requests: use --endpoint-type chat with \
             --image-width-mean/--image-height-mean or --audio-length-mean"
        }
        "rankings" => {
            "GenAI-Perf's rankings: use AIPerf's nim_rankings, hf_tei_rankings or \
             cohere_rankings"
        }
        "image_retrieval" | "image_edit" | "video_generation" | "nvclip"
        | "nim_embeddings" | "chat_embeddings" | "solido_rag" | "messages" | "raw" => {
            "not spoken: ringperf speaks chat, completions, embeddings, responses, rankings, \
             image generation, TGI's and Triton's generate; for another JSON API use --endpoint-type template \
             with --request-template and --response-text-pointer"
        }
        "dynamic_grpc" | "tensorrtllm_engine" => {
            "ringperf speaks HTTP: serve the model behind an OpenAI-compatible or Triton HTTP \
             frontend"
        }
        _ => return None,
    })
}

/// A request template's text from a JSON body whose string values `"@@PROMPT@@"` and
/// `"@@MAX@@"` stand for the prompt and the output length (and `@@MAXSTR@@` inside a string
/// for a length written in one).
pub(crate) fn template_text(body: &serde_json::Value) -> String {
    body.to_string()
        .replace("\"@@PROMPT@@\"", "{{prompt}}")
        .replace("\"@@MAX@@\"", "{{max_tokens}}")
        .replace("@@MAXSTR@@", "{{max_tokens}}")
}

/// Triton's generate extension, as GenAI-Perf sends it to each backend: the body template and
/// the path. `osl` tells whether an output length is asked for; `min` whether it is also the
/// minimum; `extra` the `--extra-inputs`.
pub fn triton_template(
    backend: &str,
    osl: bool,
    min: bool,
    streaming: bool,
    extra: &serde_json::Map<String, serde_json::Value>,
) -> (String, String) {
    use serde_json::{json, Value};
    let mut body = serde_json::Map::new();
    body.insert("text_input".into(), json!("@@PROMPT@@"));
    match backend {
        "tensorrtllm" => {
            // GenAI-Perf asks TRT-LLM for 256 tokens when no length is given.
            body.insert(
                "max_tokens".into(),
                if osl { json!("@@MAX@@") } else { json!(256) },
            );
            if osl && min {
                body.insert("min_length".into(), json!("@@MAX@@"));
            }
            body.insert("exclude_input_in_output".into(), json!(true));
        }
        "vllm" => {
            body.insert("exclude_input_in_output".into(), json!(true));
            if osl {
                let sampling = if min {
                    r#"{"max_tokens": "@@MAXSTR@@", "min_tokens": "@@MAXSTR@@"}"#
                } else {
                    r#"{"max_tokens": "@@MAXSTR@@"}"#
                };
                body.insert("sampling_parameters".into(), json!(sampling));
            }
        }
        _ => {
            if osl {
                body.insert("max_tokens".into(), json!("@@MAX@@"));
            }
        }
    }
    if streaming {
        body.insert("stream".into(), Value::Bool(true));
    }
    for (k, v) in extra {
        body.insert(k.clone(), v.clone());
    }
    let text = template_text(&Value::Object(body));
    let path = if streaming {
        "/v2/models/{model}/generate_stream"
    } else {
        "/v2/models/{model}/generate"
    };
    (text, path.to_string())
}

impl PortArgs {
    /// Whether a flag only GenAI-Perf has was given: the line is GenAI-Perf's.
    pub fn genai_perf(&self, endpoint_type: Option<&str>) -> bool {
        self.genai_perf_line
            || self.service_kind.is_some()
            || self.measurement_interval.is_some()
            || self.stability_percentage.is_some()
            || matches!(self.backend.as_deref(), Some("tensorrtllm" | "vllm"))
            || self.session_concurrency.is_some()
            || !self.passthrough.is_empty()
            || matches!(endpoint_type, Some("kserve" | "generate"))
    }

    /// Applies these flags to `spec`. `given` tells which of ringperf's own flags the user
    /// set (a peer's flag never overrides one of them).
    pub fn apply(
        &self,
        spec: &mut Spec,
        given: &Given,
        endpoint_type: Option<&str>,
    ) -> Result<Ported, PlanError> {
        let refuse = |m: String| Err(PlanError::Flag(m));
        let mut out = Ported {
            dialect: if self.genai_perf(endpoint_type) {
                Dialect::GenaiPerf
            } else {
                Dialect::Aiperf
            },
            ..Ported::default()
        };
        // GenAI-Perf asks chat for its output length with max_tokens; AIPerf with
        // max_completion_tokens unless --use-legacy-max-tokens.
        if out.dialect == Dialect::GenaiPerf {
            spec.workload.legacy_max_tokens = true;
        }
        let mut note = |flag: &str, why: &str| out.notes.push(format!("{flag}: {why}"));

        // Triton: GenAI-Perf's default service kind when no OpenAI endpoint type is given.
        let triton = match (self.service_kind.as_deref(), endpoint_type) {
            (_, Some("generate")) => Some("generate"),
            (Some("triton"), None | Some("kserve")) | (None, Some("kserve")) => {
                Some(self.backend.as_deref().unwrap_or("tensorrtllm"))
            }
            (None, None) if matches!(self.backend.as_deref(), Some("tensorrtllm" | "vllm")) => {
                self.backend.as_deref()
            }
            (None, None) if out.dialect == Dialect::GenaiPerf => Some("tensorrtllm"),
            (Some("triton"), Some(other)) => {
                return refuse(format!(
                    "--service-kind triton with --endpoint-type {other}: Triton is spoken through \
                     its generate extension (--endpoint-type kserve or generate)"
                ))
            }
            (Some("openai") | None, _) => None,
            (Some(other), _) => {
                return refuse(format!(
                    "--service-kind {other}: ringperf speaks the OpenAI API and Triton's HTTP \
                     generate extension (--service-kind openai or triton)"
                ))
            }
        };
        if let Some(backend) = triton {
            if !matches!(backend, "tensorrtllm" | "vllm" | "generate") {
                return refuse(format!(
                    "--backend {backend}: GenAI-Perf's Triton backends are tensorrtllm and vllm"
                ));
            }
            let w = &spec.workload;
            let (template, path) = triton_template(
                backend,
                w.osl_mean.is_some(),
                w.osl_deterministic,
                spec.target.streaming,
                &w.extra_inputs,
            );
            spec.target.kind = Kind::Template;
            spec.target.request_template = Some(template);
            spec.target.response_text_pointer = "/text_output".into();
            if spec.target.endpoint.is_none() {
                spec.target.endpoint = Some(path);
            }
            spec.workload.extra_inputs.clear();
            spec.workload.osl_deterministic = false;
            let how = if backend == "generate" {
                "Triton's generate extension".to_string()
            } else {
                format!("Triton's generate extension with the {backend} backend's inputs")
            };
            note(
                "Triton",
                &format!(
                    "requests go to {} ({how}, over HTTP; GenAI-Perf's kserve speaks gRPC, by \
                     default on port 8001: give --url with Triton's HTTP port, 8000 by default)",
                    spec.target
                        .endpoint
                        .as_deref()
                        .unwrap_or_default()
                        .replace("{model}", &spec.target.model)
                ),
            );
        } else if let Some(b) = &self.backend {
            return refuse(format!(
                "--backend {b}: under `profile`, --backend is GenAI-Perf's Triton backend \
                 (tensorrtllm or vllm); vLLM's backends go with `ringperf bench serve`"
            ));
        }
        if let Some(ns) = self.measurement_interval {
            if spec.load.request_count.is_some() {
                return refuse(
                    "--measurement-interval and --request-count: give one (GenAI-Perf takes \
                     either)"
                        .into(),
                );
            }
            if spec.load.benchmark_duration_ns.is_none() {
                spec.load.benchmark_duration_ns = Some(ns.saturating_mul(3));
                note(
                    "--measurement-interval",
                    &format!(
                        "measures for three windows of {} ms, as perf_analyzer does at \
                         GenAI-Perf's stability criterion (--benchmark-duration {}s)",
                        ns as f64 / 1e6,
                        ns as f64 * 3.0 / 1e9
                    ),
                );
            }
        }
        if let Some(s) = self.stability_percentage {
            note(
                "--stability-percentage",
                &format!(
                    "ringperf measures one window (three measurement intervals) and records every \
                     request; perf_analyzer would repeat windows until three agree within {s}%"
                ),
            );
        }
        if self.verbose {
            note(
                "--verbose",
                "no effect: ringperf says what it does on stderr",
            );
        }
        if let Some(c) = self.session_concurrency {
            if !given.concurrency {
                spec.load.concurrency = Some(c);
            }
            spec.workload.session_turns_mean.get_or_insert(1.0);
        }
        // perf_analyzer's arguments: its headers are honoured, the rest noted.
        let mut ignored = Vec::new();
        let mut it = self.passthrough.iter();
        while let Some(a) = it.next() {
            let header = match a.as_str() {
                "-H" | "--header" => it.next().cloned(),
                a if a.starts_with("-H") && a.len() > 2 => Some(a[2..].to_string()),
                a if a.starts_with("--header=") => Some(a["--header=".len()..].to_string()),
                _ => None,
            };
            match header {
                Some(h) => spec.target.headers.push(crate::plan::Secret(h)),
                None => ignored.push(a.clone()),
            }
        }
        if !ignored.is_empty() {
            note(
                "-- (perf_analyzer arguments)",
                &format!(
                    "headers (-H) are sent; the rest tune perf_analyzer and mean nothing here: \
                     {}",
                    ignored.join(" ")
                ),
            );
        }

        // AIPerf.
        if let Some(d) = &self.public_dataset {
            if d != "sharegpt" {
                return refuse(format!(
                    "--public-dataset {d}: ringperf knows sharegpt; download another and pass \
                     --input-file FILE"
                ));
            }
            if spec.workload.input_file.is_some() {
                return refuse("--public-dataset and --input-file: give one".into());
            }
            spec.workload.input_file = Some(SHAREGPT.into());
            spec.workload.dataset_type = Some(crate::workload::files::DatasetType::Sharegpt);
            note(
                "--public-dataset sharegpt",
                &format!(
                    "--input-file {SHAREGPT} (from the Hugging Face hub into its local cache \
                     the first time, as AIPerf takes it)"
                ),
            );
        }
        if let Some(n) = self.num_sessions {
            // A conversation per entry; the run sends each once (turns included).
            if !given.num_dataset_entries {
                spec.workload.num_dataset_entries = n;
            }
            if spec.load.request_count.is_none() && spec.load.benchmark_duration_ns.is_none() {
                spec.load.request_count = Some(n);
            }
            if self.conversation_turn_delay_mean.is_some() || self.session_concurrency.is_some() {
                spec.workload.session_turns_mean.get_or_insert(1.0);
            }
        }
        let ratio = self.conversation_turn_delay_ratio.unwrap_or(1.0);
        if !(ratio >= 0.0 && ratio.is_finite()) {
            return refuse(format!(
                "--session-delay-ratio {ratio}: expected a factor of 0 or more"
            ));
        }
        if let Some(ns) = self.conversation_turn_delay_mean {
            if !given.session_turn_delay {
                spec.workload.session_turn_delay_ns = (ns as f64 * ratio).round() as u64;
            }
        }
        if let Some(ns) = self.conversation_turn_delay_stddev {
            spec.workload.session_turn_delay_stddev_ns = (ns as f64 * ratio).round() as u64;
        }
        if self.conversation_turn_delay_ratio.is_some()
            && self.conversation_turn_delay_mean.is_none()
        {
            spec.workload.session_turn_delay_ns =
                (spec.workload.session_turn_delay_ns as f64 * ratio).round() as u64;
        }
        if self.fixed_schedule_auto_offset {
            note(
                "--fixed-schedule-auto-offset",
                "a replay always starts at the trace's first timestamp",
            );
        }
        if self.fixed_schedule_auto_offset && self.fixed_schedule_start_offset.is_some() {
            return refuse(
                "--fixed-schedule-auto-offset and --fixed-schedule-start-offset: give one".into(),
            );
        }
        spec.workload.schedule_start_ms = self.fixed_schedule_start_offset;
        spec.workload.schedule_end_ms = self.fixed_schedule_end_offset;
        if self.no_fixed_schedule && spec.workload.fixed_schedule {
            return refuse("--fixed-schedule and --no-fixed-schedule: give one".into());
        }
        if let Some(s) = self.wait_for_model_timeout {
            if !(0.0..1e9).contains(&s) {
                return refuse(format!("--wait-for-model-timeout {s}: expected seconds"));
            }
            if !given.ready_check_timeout {
                spec_ready(spec, (s * 1e9) as u64);
            }
        }
        for (flag, secs) in [
            (
                "--concurrency-ramp-duration",
                self.concurrency_ramp_duration,
            ),
            (
                "--request-rate-ramp-duration",
                self.request_rate_ramp_duration,
            ),
        ] {
            let Some(s) = secs else { continue };
            if !(s > 0.0 && s < 1e9) {
                return refuse(format!("{flag} {s}: expected seconds above 0"));
            }
            spec.load.ramp_up_ns = Some((s * 1e9) as u64);
            spec.load.include_ramp_up = true;
            note(
                flag,
                "ramps from 1 to the target over that time (--ramp-up), and the ramp's \
                 requests are measured, as AIPerf measures them (--include-ramp-up)",
            );
        }
        if let Some(s) = self.parameter_sweep_cooldown_seconds {
            if !(0.0..1e9).contains(&s) {
                return refuse(format!(
                    "--parameter-sweep-cooldown-seconds {s}: expected seconds"
                ));
            }
            out.sweep_pause_ns = Some((s * 1e9) as u64);
        }
        if self.reset_kv_cache {
            out.notes
                .push("--reset-kv-cache: the server's prefix cache is emptied first".into());
        }
        Ok(out)
    }

    /// Whether a repeated run sends the warm-up again (AIPerf's default: only the first).
    pub fn warmup_every_run(&self) -> bool {
        self.no_profile_run_disable_warmup_after_first
            || self.profile_run_disable_warmup_after_first == Some(false)
    }
}

fn spec_ready(spec: &mut Spec, ns: u64) {
    spec.target.ready_check_timeout_ns = ns;
}

/// Which of ringperf's own flags with defaults the user gave (a peer's flag never overrides
/// one of them).
#[derive(Debug, Default, Clone, Copy)]
pub struct Given {
    /// `--url`.
    pub url: bool,
    /// `--num-dataset-entries`.
    pub num_dataset_entries: bool,
    /// `--session-turn-delay`.
    pub session_turn_delay: bool,
    /// `--concurrency`.
    pub concurrency: bool,
    /// `--ready-check-timeout`.
    pub ready_check_timeout: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quote_quotes_only_what_needs_it() {
        assert_eq!(shell_quote("--isl"), "--isl");
        assert_eq!(shell_quote("http://h:8/v1"), "http://h:8/v1");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote(r#"{"a":1}"#), r#"'{"a":1}'"#);
    }

    #[test]
    fn triton_bodies_follow_each_backend() {
        let none = serde_json::Map::new();
        let (t, p) = triton_template("tensorrtllm", false, false, true, &none);
        assert_eq!(p, "/v2/models/{model}/generate_stream");
        let filled = t.replace("{{prompt}}", "\"hi\"");
        let v: serde_json::Value = serde_json::from_str(&filled).unwrap();
        assert_eq!(v["max_tokens"], 256);
        assert_eq!(v["stream"], true);
        let (t, p) = triton_template("vllm", true, true, false, &none);
        assert_eq!(p, "/v2/models/{model}/generate");
        let filled = t
            .replace("{{prompt}}", "\"hi\"")
            .replace("{{max_tokens}}", "7");
        let v: serde_json::Value = serde_json::from_str(&filled).unwrap();
        assert_eq!(
            v["sampling_parameters"],
            r#"{"max_tokens": "7", "min_tokens": "7"}"#
        );
        assert!(v.get("stream").is_none());
        crate::api::check_template(&t).unwrap();
    }
}
