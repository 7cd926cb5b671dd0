//! The workload: the tokenizer, and every request's bytes (synthetic prompts, a dataset file,
//! or multi-turn sessions), prepared before the clock starts.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::target::Target;
use super::PlanError;
use crate::api::{Body, Kind};
use crate::workload::files::{self, DatasetType};
use crate::workload::{
    Dataset, Gen, Sessions, Tokenizer, MAX_PLAN_TOKENS, MAX_PROMPT_TOKENS, MAX_TURNS,
};

/// What the flags say about the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSpec {
    /// `tokenizer.json`, a directory holding one, or a model id (default: embedded Qwen3).
    pub tokenizer: Option<String>,
    /// The hub revision of a model id's tokenizer (default `main`).
    pub tokenizer_revision: Option<String>,
    /// Without `tokenizer`: try the served model's own tokenizer (the local Hugging Face
    /// cache, else the hub) before the embedded one, as the peers count with the model's.
    #[serde(default)]
    pub tokenizer_from_model: bool,
    /// Without `tokenizer`: this model's tokenizer (from the cache), not the served one's.
    #[serde(default)]
    pub tokenizer_of: Option<String>,
    /// Mean prompt length in tokens.
    pub isl_mean: u32,
    /// Standard deviation of the prompt length.
    pub isl_stddev: u32,
    /// Mean output length requested (`max_tokens`).
    pub osl_mean: Option<u32>,
    /// Standard deviation of the requested output length.
    pub osl_stddev: u32,
    /// Prompt and output lengths drawn uniformly from [mean·(1−r), mean·(1+r)] (vLLM's
    /// `--random-range-ratio`) instead of from a normal distribution: the prompt's r and the
    /// output's.
    #[serde(default)]
    pub range_ratio: Option<(f64, f64)>,
    /// Also send `min_tokens` equal to `max_tokens`.
    pub osl_deterministic: bool,
    /// Chat asks for its output length with `max_tokens` (default: `max_completion_tokens`).
    #[serde(default)]
    pub legacy_max_tokens: bool,
    /// Extra request body fields.
    pub extra_inputs: Map<String, Value>,
    /// Seed for prompts and lengths (and open-loop arrivals).
    pub random_seed: u64,
    /// Distinct prompts to generate (or dataset lines to read).
    pub num_dataset_entries: u64,
    /// Inputs per request (embeddings batches; 1 otherwise).
    #[serde(default = "one")]
    pub batch_size: u32,
    /// Images and audio in every synthetic chat request.
    #[serde(default)]
    pub media: crate::workload::media::MediaSpec,
    /// Queries and passages, for a ranking endpoint.
    #[serde(default)]
    pub rankings: Option<crate::workload::RankSpec>,
    /// Leave out `stream_options.include_usage`.
    pub no_usage: bool,
    /// Prompts from a file instead of synthetic ones.
    pub input_file: Option<PathBuf>,
    /// Its format (default: guessed).
    pub dataset_type: Option<DatasetType>,
    /// Only the file's lines whose key holds this value (`category=writing`).
    #[serde(default)]
    pub dataset_filter: Option<(String, String)>,
    /// Replay the file's timestamps as send times.
    pub fixed_schedule: bool,
    /// With `fixed_schedule`: replay only the lines from this timestamp (ms), sent that long
    /// after the start (AIPerf's `--fixed-schedule-start-offset`).
    #[serde(default)]
    pub schedule_start_ms: Option<u64>,
    /// With `fixed_schedule`: replay only the lines up to this timestamp (ms).
    #[serde(default)]
    pub schedule_end_ms: Option<u64>,
    /// Tokens per hash id of a mooncake trace (default 512).
    #[serde(default)]
    pub isl_block_size: Option<u32>,
    /// A JSONL file or trace whose prompts come to more bytes than this is not held: its
    /// requests are built from its lines while the run goes on.
    #[serde(default = "default_stream_above")]
    pub stream_dataset_above: u64,
    /// Synthetic prompts start with one of this many shared prefixes.
    pub num_prefix_prompts: Option<usize>,
    /// Length of each shared prefix in tokens.
    pub prefix_prompt_length: u32,
    /// Multi-turn sessions: mean turns per session.
    pub session_turns_mean: Option<f64>,
    /// Standard deviation of the turns per session.
    pub session_turns_stddev: f64,
    /// Pause between an answer and the session's next turn (ns).
    pub session_turn_delay_ns: u64,
    /// Standard deviation of that pause (ns).
    #[serde(default)]
    pub session_turn_delay_stddev_ns: u64,
    /// Sessions: a system prompt of this many tokens, the same in every session (AIPerf's
    /// `--shared-system-prompt-length`).
    #[serde(default)]
    pub shared_system_prompt_tokens: Option<u32>,
    /// Sessions: a context of this many tokens of each session's own after it
    /// (`--user-context-prompt-length`).
    #[serde(default)]
    pub user_context_prompt_tokens: Option<u32>,
    /// Synthetic entries (or sessions) that the run can send at most, when known: no more are
    /// prepared (request `i` sends entry `i mod entries`, so the load is the same). `None`:
    /// all of `num_dataset_entries`.
    #[serde(skip)]
    pub sends_at_most: Option<u64>,
}

/// The most bytes a run's prepared requests may take (their text, bodies and heads), checked
/// from the flags before any is made.
pub const MAX_PLAN_BYTES: u64 = 4 << 30;

/// Bytes a prepared request takes at the peak of preparing besides its prompt's tokens and its
/// head: the entry, the body's JSON, the draws (measured with the tokens' share below).
const ENTRY_BYTES: u64 = 600;

/// Bytes per prompt token at the peak of preparing: the text (4 to 5 bytes a token with the
/// common tokenizers) held twice while the bodies are made from it, and what the vectors
/// that hold them leave unused (measured: 13; `hostile::plans_estimate_their_memory`).
const BYTES_PER_TOKEN: u64 = 13;

/// Bytes a session's turn takes at the peak of preparing, and per prompt token: its draft's
/// token ids and its text (measured over 100 sessions of 1,024 turns: 319, 2,864 and 5,243
/// bytes a turn of 30, 300 and 550 tokens).
const TURN_BYTES: u64 = 40;
const TURN_BYTES_PER_TOKEN: u64 = 10;

/// The workload, ready.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Prepared requests.
    pub dataset: Arc<Dataset>,
    /// Multi-turn sessions, when asked for.
    pub sessions: Option<Arc<Sessions>>,
    /// The tokenizer (for re-tokenizing outputs after the run).
    pub tokenizer: Arc<Tokenizer>,
    /// A replayed file's send times (ns from its first line), for `--fixed-schedule`.
    pub trace: Option<Vec<u64>>,
}

/// A file's prompts held in memory at most (64 MiB); a larger file is streamed.
pub const STREAM_DATASET_ABOVE: u64 = 64 << 20;

fn one() -> u32 {
    1
}

fn default_stream_above() -> u64 {
    STREAM_DATASET_ABOVE
}

fn flag(m: impl Into<String>) -> PlanError {
    PlanError::Flag(m.into())
}

/// Where an `--input-file` on the Hugging Face hub starts: `hf://datasets/ORG/NAME/FILE`.
pub const HUB_DATASETS: &str = "hf://datasets/";

/// `path` itself, or for a hub file ([`HUB_DATASETS`]`ORG/NAME[@REVISION]/FILE`, the
/// revision `main` unless given, URL-encoded as in `@refs%2Fconvert%2Fparquet`) its place in
/// the local Hugging Face cache, downloaded there the first time (`HF_ENDPOINT`, `HF_TOKEN`,
/// `HF_HUB_OFFLINE`), with the dataset's id (`ORG/NAME`).
fn hub_file(path: &std::path::Path) -> Result<(PathBuf, Option<String>), PlanError> {
    let Some(rest) = path.to_str().and_then(|p| p.strip_prefix(HUB_DATASETS)) else {
        return Ok((path.to_path_buf(), None));
    };
    let mut parts = rest.splitn(3, '/');
    let (Some(org), Some(name), Some(file)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(flag(format!(
            "--input-file {}: expected {HUB_DATASETS}ORG/NAME[@REVISION]/FILE",
            path.display()
        )));
    };
    let (name, revision) = match name.split_once('@') {
        Some((n, r)) => (n, r.replace("%2F", "/").replace("%2f", "/")),
        None => (name, "main".to_string()),
    };
    let id = format!("{org}/{name}");
    let file = crate::workload::hub::Hub::from_env()
        .dataset_file(&id, &revision, file)
        .map_err(|e| flag(format!("--input-file {}: {e}", path.display())))?;
    Ok((file, Some(id)))
}

/// What a workload will prepare, known from its flags alone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Synthetic entries (or sessions) to prepare.
    pub entries: u64,
    /// Turns per session, on average (1 without sessions).
    pub turns: f64,
    /// The bytes they will take, about.
    pub bytes: u64,
}

impl WorkloadSpec {
    /// Synthetic entries (or sessions) to prepare: no more than the run can send.
    pub fn prepared_entries(&self) -> u64 {
        self.num_dataset_entries
            .min(self.sends_at_most.unwrap_or(u64::MAX))
            .max(1)
    }

    /// The entries (or sessions) to prepare with requests of `head` and what they cost,
    /// refused past [`MAX_PLAN_BYTES`]; for a file, what its lines will hold is known only
    /// once read (they are capped as they are).
    pub fn budget(&self, head: &crate::http::request::Target) -> Result<Budget, PlanError> {
        let entries = self.prepared_entries();
        let head_bytes = (head.path.len()
            + head.host.len()
            + head
                .headers
                .iter()
                .map(|(n, v)| n.len() + v.len() + 4)
                .sum::<usize>()) as u64;
        let turns = self
            .session_turns_mean
            .unwrap_or(1.0)
            .clamp(1.0, MAX_TURNS as f64);
        if self.input_file.is_some() {
            return Ok(Budget {
                entries,
                turns,
                bytes: 0,
            });
        }
        let per_request = match self.session_turns_mean {
            // A session's turn holds its prompt's text once; its body is made as it is sent.
            Some(_) => TURN_BYTES + TURN_BYTES_PER_TOKEN * u64::from(self.isl_mean),
            None => {
                ENTRY_BYTES
                    + head_bytes
                    + BYTES_PER_TOKEN * u64::from(self.isl_mean) * u64::from(self.batch_size.max(1))
            }
        };
        let bytes = (entries as f64 * turns * per_request as f64) as u64
            + BYTES_PER_TOKEN
                * self.num_prefix_prompts.unwrap_or(0) as u64
                * u64::from(self.prefix_prompt_length);
        if bytes > MAX_PLAN_BYTES {
            let what = match self.session_turns_mean {
                Some(_) => format!("{entries} sessions × {turns:.0} turns"),
                None => format!("{entries} prompts"),
            };
            return Err(flag(format!(
                "this run would prepare about {:.1} GB of requests ({what} × about {} bytes); a \
                 run prepares at most {:.1} GB: lower --num-dataset-entries (requests cycle \
                 through the prompts) or the prompt length",
                bytes as f64 / 1e9,
                per_request,
                MAX_PLAN_BYTES as f64 / 1e9
            )));
        }
        Ok(Budget {
            entries,
            turns,
            bytes,
        })
    }
}

impl Workload {
    /// Loads the tokenizer and prepares every request for `target`.
    pub fn build(s: &WorkloadSpec, target: &Target) -> Result<Workload, PlanError> {
        Self::check(s)?;
        Self::prepare(s, target, s.budget(&target.head)?)
    }

    /// Refuses what the flags ask for that cannot be, before anything is made.
    pub fn check(s: &WorkloadSpec) -> Result<(), PlanError> {
        if s.isl_mean == 0 {
            return Err(flag("--synthetic-input-tokens-mean must be at least 1"));
        }
        if s.osl_mean == Some(0) {
            return Err(flag("--output-tokens-mean must be at least 1"));
        }
        if s.osl_deterministic && s.osl_mean.is_none() {
            return Err(flag(
                "--output-tokens-mean-deterministic needs --output-tokens-mean",
            ));
        }
        if s.num_dataset_entries == 0 || s.num_dataset_entries > 10_000_000 {
            return Err(flag("--num-dataset-entries must be from 1 to 10M"));
        }
        if s.num_prefix_prompts == Some(0) || s.prefix_prompt_length == 0 {
            return Err(flag(
                "--num-prefix-prompts and --prefix-prompt-length must be at least 1",
            ));
        }
        let prefixes = s.num_prefix_prompts.unwrap_or(0) as u64;
        let planned = u64::from(s.isl_mean) * s.prepared_entries()
            + prefixes * u64::from(s.prefix_prompt_length);
        if let Some((ri, ro)) = s.range_ratio {
            for r in [ri, ro] {
                if !(0.0..1.0).contains(&r) {
                    return Err(flag(format!(
                        "--random-range-ratio {r}: expected a ratio from 0 to below 1"
                    )));
                }
            }
            if (ri > 0.0 && s.isl_stddev > 0) || (ro > 0.0 && s.osl_stddev > 0) {
                return Err(flag(
                    "--random-range-ratio draws lengths uniformly; a standard deviation \
                     (--synthetic-input-tokens-stddev, --output-tokens-stddev) asks for a normal \
                     distribution: give one or the other",
                ));
            }
        }
        let longest = match s.range_ratio {
            Some((r, _)) => u64::from(crate::workload::uniform_range(s.isl_mean, r).1),
            None => u64::from(s.isl_mean) + 4 * u64::from(s.isl_stddev),
        };
        if s.input_file.is_none()
            && longest.max(u64::from(s.prefix_prompt_length)) > MAX_PROMPT_TOKENS
        {
            return Err(flag(format!(
                "prompts of up to {} tokens asked for: the cap on one prompt is {MAX_PROMPT_TOKENS} \
                 (--synthetic-input-tokens-mean/-stddev, --prefix-prompt-length)",
                longest.max(u64::from(s.prefix_prompt_length))
            )));
        }
        if s.input_file.is_none() && planned > MAX_PLAN_TOKENS {
            return Err(flag(format!(
                "{planned} prompt tokens asked for (entries × mean length, plus prefixes): a run \
                 prepares at most {MAX_PLAN_TOKENS}; lower --num-dataset-entries or the lengths"
            )));
        }
        if (s.schedule_start_ms.is_some() || s.schedule_end_ms.is_some()) && !s.fixed_schedule {
            return Err(flag(
                "--fixed-schedule-start-offset/-end-offset choose a window of a replayed trace: \
                 add --fixed-schedule",
            ));
        }
        if s.isl_block_size == Some(0) {
            return Err(flag("--isl-block-size must be at least 1"));
        }
        if let (Some(a), Some(b)) = (s.schedule_start_ms, s.schedule_end_ms) {
            if a > b {
                return Err(flag(format!(
                    "--fixed-schedule-start-offset {a} is after --fixed-schedule-end-offset {b}"
                )));
            }
        }
        if (s.shared_system_prompt_tokens.is_some() || s.user_context_prompt_tokens.is_some())
            && s.session_turns_mean.is_none()
        {
            return Err(flag(
                "--shared-system-prompt-length and --user-context-prompt-length open each \
                 session's conversation: give --session-turns-mean (or --user-centric-rate)",
            ));
        }
        let context = u64::from(s.user_context_prompt_tokens.unwrap_or(0));
        if context.saturating_mul(s.num_dataset_entries) > MAX_PLAN_TOKENS {
            return Err(flag(format!(
                "--user-context-prompt-length {context} for {} sessions plans more than {} \
                 tokens of context: lower one of them (--num-dataset-entries)",
                s.num_dataset_entries, MAX_PLAN_TOKENS
            )));
        }
        if s.fixed_schedule && s.input_file.is_none() {
            return Err(flag(
                "--fixed-schedule replays an --input-file's timestamps: give one",
            ));
        }
        if s.batch_size == 0 || s.batch_size > 4096 {
            return Err(flag("--batch-size-text must be from 1 to 4096"));
        }
        if s.batch_size > 1 && s.input_file.is_some() && s.fixed_schedule {
            return Err(flag(
                "--batch-size-text with --fixed-schedule: a trace's line is one request",
            ));
        }
        if let Some(m) = s.session_turns_mean {
            if !(m >= 1.0 && m <= MAX_TURNS as f64) || s.session_turns_stddev < 0.0 {
                return Err(flag(
                    "--session-turns-mean must be from 1 to 1024, and -stddev not negative",
                ));
            }
            if s.input_file.is_some() {
                return Err(flag("multi-turn sessions are made of synthetic prompts: drop --fixed-schedule and --input-file"));
            }
        }
        if let Some(r) = &s.rankings {
            if s.input_file.is_some() || s.session_turns_mean.is_some() {
                return Err(flag(
                    "a ranking endpoint takes synthetic queries and passages (--rankings-*): \
                     drop --input-file and the session flags",
                ));
            }
            if s.batch_size > 1 && r.passages.is_some() {
                return Err(flag(format!(
                    "--batch-size-text {} with --rankings-passages-mean: both set the passages \
                     of a ranking request; give one",
                    s.batch_size
                )));
            }
            let tokens = r.tokens(s.num_dataset_entries, s.batch_size as usize);
            if tokens > MAX_PLAN_TOKENS as f64 {
                return Err(flag(format!(
                    "{} rankings of about {:.0} tokens each take {tokens:.0} tokens, over the \
                     {MAX_PLAN_TOKENS} one run prepares: ask for fewer passages or distinct \
                     prompts (--num-dataset-entries)",
                    s.num_dataset_entries,
                    tokens / s.num_dataset_entries.max(1) as f64
                )));
            }
        }
        if s.media.any() {
            if s.input_file.is_some() || s.session_turns_mean.is_some() {
                return Err(flag(
                    "images and audio (--image-*, --audio-*) go with synthetic single-turn \
                     prompts: drop --input-file and the session flags",
                ));
            }
            s.media.check_budget(s.num_dataset_entries)?;
        }
        Ok(())
    }

    /// Prepares `budget`'s requests for `target` ([`Workload::check`] and the budget come
    /// first).
    pub(super) fn prepare(
        s: &WorkloadSpec,
        target: &Target,
        budget: Budget,
    ) -> Result<Workload, PlanError> {
        let revision = s.tokenizer_revision.as_deref();
        let tokenizer = Arc::new(match (&s.tokenizer, &s.tokenizer_of) {
            (None, Some(model)) => Tokenizer::of_model(model, revision),
            (None, None) if s.tokenizer_from_model && !target.model.is_empty() => {
                Tokenizer::of_model(&target.model, revision)
            }
            (t, _) => Tokenizer::load(t.as_deref(), revision)?,
        });
        if s.media.any() && target.kind != Kind::Chat {
            return Err(flag(
                "images and audio (--image-*, --audio-*) are sent in chat messages: use \
                 --endpoint-type chat",
            ));
        }
        let gen = Gen {
            body: Body {
                model: target.model.clone(),
                kind: target.kind,
                streaming: target.streaming,
                include_usage: !s.no_usage,
                min_tokens_too: s.osl_deterministic,
                legacy_max_tokens: s.legacy_max_tokens,
                extra: s.extra_inputs.clone(),
                template: target.template.clone(),
            },
            isl: (s.isl_mean, s.isl_stddev),
            osl: s.osl_mean.map(|m| (m, s.osl_stddev)),
            entries: budget.entries as usize,
            prefixes: s.num_prefix_prompts.map(|n| (n, s.prefix_prompt_length)),
            seed: s.random_seed,
            range_ratio: s.range_ratio,
            batch: s.batch_size.max(1) as usize,
            media: s.media.clone(),
            rankings: s.rankings.clone(),
        };
        let (input_file, hub_id) = match s.input_file.as_deref().map(hub_file).transpose()? {
            Some((file, id)) => (Some(file), id),
            None => (None, None),
        };
        let (dataset, trace) = match &input_file {
            None => (Dataset::synthetic(&gen, &target.head, &tokenizer)?, None),
            Some(path) => {
                let kind = match s.dataset_type {
                    Some(k) => k,
                    None => files::detect(path)?,
                };
                // A replayed trace sends every line; otherwise --num-dataset-entries bounds it.
                let limit = if s.fixed_schedule {
                    usize::MAX
                } else {
                    s.num_dataset_entries as usize
                };
                let no_timestamp = |n: usize, of: usize| {
                    flag(format!(
                        "--fixed-schedule: {n} of {of} lines of {} have no \"timestamp\"",
                        path.display()
                    ))
                };
                // From the window's start when one is given, else from the first line.
                let window = s.fixed_schedule.then(|| {
                    (
                        s.schedule_start_ms.map_or(f64::NEG_INFINITY, |t| t as f64),
                        s.schedule_end_ms.map_or(f64::INFINITY, |t| t as f64),
                    )
                });
                let trace = |ts: &[f64]| -> Vec<u64> {
                    let zero = s.schedule_start_ms.map_or(ts[0], |t| t as f64);
                    ts.iter()
                        .map(|t| ((t - zero) * 1e6).round() as u64)
                        .collect()
                };
                match kind {
                    DatasetType::Parquet => {
                        let rule = hub_id
                            .map(|id| crate::workload::parquet::Rule::of(&id))
                            .transpose()
                            .map_err(|why| flag(format!("--input-file {}: {why}", path.display())))?
                            .flatten()
                            .unwrap_or(crate::workload::parquet::Rule::Fields);
                        let items = crate::workload::parquet::read(
                            path,
                            rule,
                            limit,
                            &tokenizer,
                            files::CAPS,
                        )?;
                        if s.fixed_schedule {
                            return Err(no_timestamp(items.len(), items.len()));
                        }
                        (Dataset::from_items(&gen, &target.head, items)?, None)
                    }
                    DatasetType::Sharegpt => {
                        let items = files::read_sharegpt(path, limit, &tokenizer, files::CAPS)?;
                        if s.fixed_schedule {
                            return Err(no_timestamp(items.len(), items.len()));
                        }
                        (Dataset::from_items(&gen, &target.head, items)?, None)
                    }
                    _ => {
                        let index = files::Index::read(
                            path,
                            kind,
                            limit,
                            files::CAPS.line,
                            s.random_seed,
                            &files::Select {
                                filter: s.dataset_filter.as_ref(),
                                window_ms: window,
                                block_tokens: s.isl_block_size.map(|b| b as usize),
                            },
                        )?;
                        let (n, of) = (index.len() - index.timestamps.len(), index.len());
                        let trace = match s.fixed_schedule {
                            true if n > 0 => return Err(no_timestamp(n, of)),
                            true => Some(trace(&index.timestamps)),
                            false => None,
                        };
                        let dataset = Dataset::from_file(
                            &gen,
                            &target.head,
                            index,
                            tokenizer.clone(),
                            s.stream_dataset_above,
                        )?;
                        (dataset, trace)
                    }
                }
            }
        };
        let sessions = match s.session_turns_mean {
            None => None,
            Some(m) => {
                if target.kind != Kind::Chat {
                    return Err(flag("multi-turn sessions need --endpoint-type chat"));
                }
                let list = Sessions::synthetic(
                    &gen,
                    &tokenizer,
                    (m, s.session_turns_stddev),
                    (
                        s.session_turn_delay_ns as f64,
                        s.session_turn_delay_stddev_ns as f64,
                    ),
                    (s.shared_system_prompt_tokens, s.user_context_prompt_tokens),
                )?;
                Some(Arc::new(Sessions {
                    body: gen.body.clone(),
                    head: target.head.clone(),
                    list,
                }))
            }
        };
        Ok(Workload {
            dataset: Arc::new(dataset),
            sessions,
            tokenizer,
            trace,
        })
    }

    /// Writes `inputs.json`: the request bodies, GenAI-Perf's layout.
    pub fn write_inputs_json(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        match &self.sessions {
            Some(s) => s.write_inputs_json(w),
            None => self.dataset.write_inputs_json(w),
        }
    }

    /// `inputs.json`, in memory.
    pub fn inputs_json(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_inputs_json(&mut out).expect("writing to memory");
        out
    }
}

#[cfg(test)]
pub(in crate::plan) mod tests {
    use super::*;
    use crate::plan::target::tests::spec;

    pub(in crate::plan) fn workload_spec() -> WorkloadSpec {
        WorkloadSpec {
            tokenizer: None,
            tokenizer_revision: None,
            tokenizer_from_model: false,
            tokenizer_of: None,
            isl_mean: 40,
            isl_stddev: 0,
            osl_mean: Some(7),
            osl_stddev: 0,
            range_ratio: None,
            batch_size: 1,
            media: Default::default(),
            rankings: None,
            osl_deterministic: false,
            legacy_max_tokens: false,
            extra_inputs: Map::new(),
            random_seed: 3,
            num_dataset_entries: 5,
            no_usage: false,
            input_file: None,
            dataset_type: None,
            dataset_filter: None,
            fixed_schedule: false,
            schedule_start_ms: None,
            schedule_end_ms: None,
            isl_block_size: None,
            stream_dataset_above: STREAM_DATASET_ABOVE,
            num_prefix_prompts: None,
            prefix_prompt_length: 100,
            session_turns_mean: None,
            session_turns_stddev: 0.0,
            session_turn_delay_ns: 0,
            session_turn_delay_stddev_ns: 0,
            shared_system_prompt_tokens: None,
            user_context_prompt_tokens: None,
            sends_at_most: None,
        }
    }

    #[test]
    fn synthetic_prompts_are_exact_and_seeded() {
        let target = Target::build(&spec("http://127.0.0.1:9")).unwrap();
        let w = Workload::build(&workload_spec(), &target).unwrap();
        assert_eq!(w.dataset.entries.len(), 5);
        assert!(w.trace.is_none() && w.sessions.is_none());
        for e in &w.dataset.entries {
            assert_eq!((e.known_isl(), e.requested_osl), (Some(40), Some(7)));
        }
        let again = Workload::build(&workload_spec(), &target).unwrap();
        assert_eq!(
            w.inputs_json(),
            again.inputs_json(),
            "same seed, same inputs"
        );
        let mut other = workload_spec();
        other.random_seed = 4;
        let other = Workload::build(&other, &target).unwrap();
        assert_ne!(w.inputs_json(), other.inputs_json(), "the seed is used");
    }

    #[test]
    fn a_replayed_file_keeps_its_timestamps_from_the_first_line() {
        let dir = std::env::temp_dir().join(format!("ringperf-wl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("trace.jsonl");
        std::fs::write(
            &f,
            "{\"timestamp\": 1000, \"text\": \"a b\"}\n{\"timestamp\": 1002.5, \"text\": \"c\"}\n",
        )
        .unwrap();
        let target = Target::build(&spec("http://127.0.0.1:9")).unwrap();
        let mut s = workload_spec();
        s.input_file = Some(f.clone());
        s.fixed_schedule = true;
        let w = Workload::build(&s, &target).unwrap();
        assert_eq!(w.trace, Some(vec![0, 2_500_000]));
        assert_eq!(w.dataset.entries.len(), 2);
        std::fs::write(
            &f,
            "{\"timestamp\": 1, \"text\": \"a\"}\n{\"text\": \"b\"}\n",
        )
        .unwrap();
        let e = Workload::build(&s, &target).unwrap_err().to_string();
        assert!(e.contains("1 of 2 lines") && e.contains("timestamp"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_window_of_a_trace_replays_its_lines_from_the_windows_start() {
        let dir = std::env::temp_dir().join(format!("ringperf-wl-win-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("trace.jsonl");
        let lines: String = [0, 100, 250, 400, 900]
            .iter()
            .map(|t| format!("{{\"timestamp\": {t}, \"text\": \"t{t}\"}}\n"))
            .collect();
        std::fs::write(&f, lines).unwrap();
        let target = Target::build(&spec("http://127.0.0.1:9")).unwrap();
        let mut s = workload_spec();
        s.input_file = Some(f.clone());
        s.fixed_schedule = true;
        s.schedule_start_ms = Some(200);
        s.schedule_end_ms = Some(400);
        let w = Workload::build(&s, &target).unwrap();
        // The lines at 250 and 400 ms, sent 50 and 200 ms after the start (AIPerf's offsets).
        assert_eq!(w.trace, Some(vec![50_000_000, 200_000_000]));
        assert_eq!(w.dataset.entries.len(), 2);
        s.schedule_start_ms = Some(500);
        s.schedule_end_ms = Some(800);
        let e = Workload::build(&s, &target).unwrap_err().to_string();
        assert!(
            e.contains("no request line with a timestamp from 500 to 800"),
            "{e}"
        );
        s.fixed_schedule = false;
        let e = Workload::build(&s, &target).unwrap_err().to_string();
        assert!(e.contains("add --fixed-schedule"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn contradictory_flags_are_named() {
        let target = Target::build(&spec("http://127.0.0.1:9")).unwrap();
        type Change = fn(&mut WorkloadSpec);
        let cases: [(Change, &str); 7] = [
            (|s| s.isl_mean = 0, "--synthetic-input-tokens-mean"),
            (
                |s| {
                    s.osl_mean = None;
                    s.osl_deterministic = true
                },
                "--output-tokens-mean-deterministic",
            ),
            (|s| s.num_dataset_entries = 0, "--num-dataset-entries"),
            (|s| s.fixed_schedule = true, "--fixed-schedule"),
            (|s| s.session_turns_mean = Some(0.5), "--session-turns-mean"),
            (
                |s| s.prefix_prompt_length = 100_000_000,
                "--prefix-prompt-length",
            ),
            (
                |s| {
                    s.isl_mean = 1_000_000;
                    s.num_dataset_entries = 101
                },
                "prepares at most 100000000",
            ),
        ];
        for (change, flag) in cases {
            let mut s = workload_spec();
            change(&mut s);
            let e = Workload::build(&s, &target).unwrap_err().to_string();
            assert!(e.contains(flag), "{flag}: {e}");
        }
        let mut s = workload_spec();
        s.session_turns_mean = Some(2.0);
        let mut t = spec("http://127.0.0.1:9");
        t.kind = Kind::Completions;
        let e = Workload::build(&s, &Target::build(&t).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--endpoint-type chat"), "{e}");
    }
}
