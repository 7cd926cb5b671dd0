//! Prompts, request bodies and the tokenizer, all prepared before the clock starts.
//!
//! Synthetic prompts are built as GenAI-Perf builds them: lines of real text (Shakespeare's
//! sonnets, public domain) drawn at random until the token count is reached, then cut to the
//! exact count with the run's tokenizer. Every draw comes from one seeded ChaCha8 generator,
//! so the same `--random-seed` gives byte-identical request bodies and `inputs.json`.

pub mod files;
pub mod tokenizer;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value};

use crate::cli::EndpointType;
use crate::http::request::{Target, Template};
pub use tokenizer::Tokenizer;

const CORPUS: &str = include_str!("corpus.txt");

/// Errors found while preparing the workload.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// An `--extra-inputs` value is not `key:value`.
    #[error("--extra-inputs {0:?}: {1}")]
    ExtraInput(String, String),
    /// The tokenizer could not be found or loaded.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// A dataset file is unreadable or malformed (the text names the file and line).
    #[error("--input-file {0}")]
    Dataset(String),
    /// The request template is unusable.
    #[error("--request-template {0}")]
    Template(String),
}

/// What every request body is built from.
#[derive(Debug, Clone)]
pub struct BodySpec {
    /// `model` field.
    pub model: String,
    /// Chat or completions.
    pub endpoint_type: EndpointType,
    /// `stream` field.
    pub streaming: bool,
    /// Send `stream_options.include_usage` with streamed requests.
    pub include_usage: bool,
    /// Prompt length: mean and standard deviation in tokens.
    pub isl: (u32, u32),
    /// Requested output length (`max_tokens`): mean and standard deviation, if any.
    pub osl: Option<(u32, u32)>,
    /// Also send `min_tokens` equal to `max_tokens`.
    pub osl_deterministic: bool,
    /// Extra body fields from `--extra-inputs`.
    pub extra: Map<String, Value>,
    /// `--endpoint-type template`: the body template.
    pub template: Option<String>,
    /// Distinct prompts to make.
    pub entries: usize,
    /// Shared system-prompt-like prefixes: how many, and their length in tokens.
    pub prefixes: Option<(usize, u32)>,
    /// Seed for every random choice.
    pub seed: u64,
}

/// Turns per session at most; a turn's request id is `session × MAX_TURNS + turn`.
pub const MAX_TURNS: u64 = 1024;

/// One user turn of a session, prepared in advance (the answers come from the server).
#[derive(Debug, Clone)]
pub struct Turn {
    /// The user's message.
    pub prompt: String,
    /// Its tokens.
    pub isl: u32,
    /// `max_tokens` for the answer.
    pub osl: Option<u32>,
}

/// A multi-turn session.
#[derive(Debug, Clone)]
pub struct Session {
    /// Its user turns, in order.
    pub turns: Vec<Turn>,
}

/// Multi-turn sessions and what building their requests at run time needs.
#[derive(Debug, Clone)]
pub struct Sessions {
    /// Body settings.
    pub spec: BodySpec,
    /// `Host` header value.
    pub host: String,
    /// Request path.
    pub path: String,
    /// Extra headers (with the API key): kept in memory only.
    pub headers: Vec<(String, String)>,
    /// The sessions that runs cycle through.
    pub list: Vec<Session>,
    /// Pause between an answer and the next turn (ns).
    pub delay_ns: u64,
}

impl Sessions {
    /// The request target for turn requests.
    pub fn target(&self) -> Target<'_> {
        Target {
            host: &self.host,
            path: &self.path,
            headers: &self.headers,
            streaming: self.spec.streaming,
        }
    }

    /// `inputs.json` for sessions: one entry per session, a payload per turn with that turn's
    /// user message (the history and the answers are only known while the run goes on).
    pub fn inputs_json(&self) -> Vec<u8> {
        let data: Vec<Value> = self
            .list
            .iter()
            .map(|s| {
                let payload: Vec<Value> = s
                    .turns
                    .iter()
                    .map(|t| {
                        let user = serde_json::json!([{ "role": "user", "content": t.prompt }]);
                        let body = request_body(
                            &self.spec,
                            &files::Prompt::Messages(user.as_array().cloned().unwrap_or_default()),
                            t.osl,
                        );
                        serde_json::from_slice(&body).unwrap_or(Value::Null)
                    })
                    .collect();
                serde_json::json!({ "payload": payload })
            })
            .collect();
        let mut out =
            serde_json::to_vec_pretty(&serde_json::json!({ "data": data })).expect("serializable");
        out.push(b'\n');
        out
    }

    /// Makes `spec.entries` sessions of about `turns` (mean, std) turns each.
    pub fn synthetic(
        spec: &BodySpec,
        tokenizer: &Tokenizer,
        turns: (f64, f64),
    ) -> Result<Vec<Session>, WorkloadError> {
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x5e55);
        let maker = PromptMaker::new(tokenizer)?;
        let mut out = Vec::with_capacity(spec.entries);
        for _ in 0..spec.entries.max(1) {
            let n = if turns.1 > 0.0 {
                use rand_distr::Distribution;
                rand_distr::Normal::new(turns.0, turns.1)
                    .expect("finite")
                    .sample(&mut rng)
                    .round()
            } else {
                turns.0.round()
            }
            .clamp(1.0, MAX_TURNS as f64) as usize;
            let mut list = Vec::with_capacity(n);
            for _ in 0..n {
                let want = sample_len(&mut rng, spec.isl.0, spec.isl.1);
                let prompt = maker.prompt(want as usize, &mut rng)?;
                let isl = tokenizer.count(&prompt)? as u32;
                let osl = spec.osl.map(|(m, s)| sample_len(&mut rng, m, s));
                list.push(Turn { prompt, isl, osl });
            }
            out.push(Session { turns: list });
        }
        Ok(out)
    }
}

/// One prepared request: its bytes and what it asked for.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The complete HTTP request.
    pub template: Template,
    /// Prompt tokens as counted by the run's tokenizer.
    pub isl: u32,
    /// `max_tokens` sent, if any.
    pub requested_osl: Option<u32>,
}

/// All prepared requests of a run.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// The entries requests cycle through.
    pub entries: Vec<Entry>,
}

/// Parses `--extra-inputs key:value` flags; values are JSON where they parse as JSON
/// (`true`, `5`, `{"a":1}`), otherwise strings, as in GenAI-Perf.
pub fn parse_extra_inputs(items: &[String]) -> Result<Map<String, Value>, WorkloadError> {
    let mut map = Map::new();
    for item in items {
        let Some((key, raw)) = item.split_once(':') else {
            return Err(WorkloadError::ExtraInput(
                item.clone(),
                "expected key:value, e.g. ignore_eos:true".into(),
            ));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(WorkloadError::ExtraInput(
                item.clone(),
                "the key is empty".into(),
            ));
        }
        let raw = raw.trim();
        let value = match serde_json::from_str::<Value>(raw) {
            Ok(v) => v,
            Err(e) if raw.starts_with(['{', '[', '"']) => {
                return Err(WorkloadError::ExtraInput(
                    item.clone(),
                    format!("the value is not valid JSON: {e}"),
                ))
            }
            Err(_) => Value::String(raw.to_string()),
        };
        map.insert(key.to_string(), value);
    }
    Ok(map)
}

/// Builds synthetic prompts from the corpus, cut to exact token counts.
pub struct PromptMaker<'t> {
    tokenizer: &'t Tokenizer,
    lines: Vec<Vec<u32>>,
}

impl<'t> PromptMaker<'t> {
    /// Tokenizes the corpus once.
    pub fn new(tokenizer: &'t Tokenizer) -> Result<PromptMaker<'t>, WorkloadError> {
        let lines = CORPUS
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| tokenizer.encode(&format!("{l}\n")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PromptMaker { tokenizer, lines })
    }

    /// Exactly `n` token ids of random corpus lines.
    pub fn tokens(&self, n: usize, rng: &mut impl Rng) -> Vec<u32> {
        let mut ids = Vec::with_capacity(n + 32);
        while ids.len() < n {
            let line = &self.lines[rng.random_range(0..self.lines.len())];
            ids.extend_from_slice(line);
        }
        ids.truncate(n);
        ids
    }

    /// A prompt of exactly `n` tokens (as token ids), decoded to text.
    pub fn prompt(&self, n: usize, rng: &mut impl Rng) -> Result<String, WorkloadError> {
        self.tokenizer.decode(&self.tokens(n, rng))
    }
}

fn sample_len(rng: &mut impl Rng, mean: u32, std: u32) -> u32 {
    if std == 0 {
        return mean.max(1);
    }
    use rand_distr::Distribution;
    let d = rand_distr::Normal::new(mean as f64, std as f64).expect("finite");
    d.sample(rng).round().max(1.0) as u32
}

impl Dataset {
    /// Prepares `spec.entries` requests for `target`.
    pub fn synthetic(
        spec: &BodySpec,
        target: &Target<'_>,
        tokenizer: &Tokenizer,
    ) -> Result<Dataset, WorkloadError> {
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
        let maker = PromptMaker::new(tokenizer)?;
        let prefixes = match spec.prefixes {
            Some((n, len)) => (0..n)
                .map(|_| maker.prompt(len as usize, &mut rng))
                .collect::<Result<Vec<_>, _>>()?,
            None => Vec::new(),
        };
        let mut items = Vec::with_capacity(spec.entries);
        for _ in 0..spec.entries.max(1) {
            let want = sample_len(&mut rng, spec.isl.0, spec.isl.1);
            let mut prompt = maker.prompt(want as usize, &mut rng)?;
            if !prefixes.is_empty() {
                prompt = format!(
                    "{}\n{prompt}",
                    prefixes[rng.random_range(0..prefixes.len())]
                );
            }
            let osl = spec.osl.map(|(m, s)| sample_len(&mut rng, m, s));
            items.push(files::Item {
                prompt: files::Prompt::Text(prompt),
                max_tokens: osl,
                timestamp_ms: None,
            });
        }
        Dataset::from_items(spec, target, tokenizer, &items)
    }

    /// Prepares one request per item; an item's own `max_tokens` wins over `--output-tokens-*`.
    pub fn from_items(
        spec: &BodySpec,
        target: &Target<'_>,
        tokenizer: &Tokenizer,
        items: &[files::Item],
    ) -> Result<Dataset, WorkloadError> {
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x0051);
        let mut entries = Vec::with_capacity(items.len());
        for item in items {
            let osl = item
                .max_tokens
                .or_else(|| spec.osl.map(|(m, s)| sample_len(&mut rng, m, s)));
            let isl = match &item.prompt {
                files::Prompt::Text(t) => tokenizer.count(t)?,
                files::Prompt::Messages(m) => m
                    .iter()
                    .filter_map(|x| x.get("content").and_then(Value::as_str))
                    .map(|c| tokenizer.count(c))
                    .sum::<Result<usize, _>>()?,
            } as u32;
            let body = request_body(spec, &item.prompt, osl);
            entries.push(Entry {
                template: Template::post_json(target, &body),
                isl,
                requested_osl: osl,
            });
        }
        Ok(Dataset { entries })
    }

    /// `inputs.json` in GenAI-Perf's layout: `{"data": [{"payload": [body]}, …]}`.
    pub fn inputs_json(&self) -> Vec<u8> {
        let data: Vec<Value> = self
            .entries
            .iter()
            .map(|e| {
                let body: Value = serde_json::from_slice(e.template.body()).unwrap_or(Value::Null);
                serde_json::json!({ "payload": [body] })
            })
            .collect();
        let mut out =
            serde_json::to_vec_pretty(&serde_json::json!({ "data": data })).expect("serializable");
        out.push(b'\n');
        out
    }
}

/// The JSON body of one request.
fn prompt_text(prompt: &files::Prompt) -> String {
    match prompt {
        files::Prompt::Text(t) => t.clone(),
        // An endpoint that takes one text gets the messages' contents, in order.
        files::Prompt::Messages(msgs) => msgs
            .iter()
            .filter_map(|x| x.get("content").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// Checks a request template: it needs `{{prompt}}`, and must be JSON once filled in.
pub fn check_template(template: &str) -> Result<(), String> {
    if !template.contains("{{prompt}}") {
        return Err(
            "has no {{prompt}} placeholder: ringperf would send the same body every time".into(),
        );
    }
    let filled = fill_template(template, "x", Some(1), "m");
    serde_json::from_slice::<Value>(&filled)
        .map(|_| ())
        .map_err(|e| format!("is not JSON once filled in: {e}"))
}

fn fill_template(template: &str, prompt: &str, osl: Option<u32>, model: &str) -> Vec<u8> {
    let q = |s: &str| serde_json::to_string(s).expect("string");
    template
        .replace("{{prompt}}", &q(prompt))
        .replace("{{model}}", &q(model))
        .replace(
            "{{max_tokens}}",
            &osl.map_or("null".to_string(), |n| n.to_string()),
        )
        .into_bytes()
}

/// The JSON body of one request.
pub fn request_body(spec: &BodySpec, prompt: &files::Prompt, osl: Option<u32>) -> Vec<u8> {
    use files::Prompt;
    let mut m = Map::new();
    m.insert("model".into(), Value::String(spec.model.clone()));
    match spec.endpoint_type {
        EndpointType::Template => {
            let t = spec.template.as_deref().unwrap_or("{}");
            return fill_template(t, &prompt_text(prompt), osl, &spec.model);
        }
        EndpointType::Embeddings => {
            m.insert("input".into(), Value::String(prompt_text(prompt)));
            for (k, v) in &spec.extra {
                m.insert(k.clone(), v.clone());
            }
            return serde_json::to_vec(&Value::Object(m)).expect("serializable");
        }
        EndpointType::Responses => {
            let input = match prompt {
                Prompt::Text(t) => Value::String(t.clone()),
                Prompt::Messages(msgs) => Value::Array(msgs.clone()),
            };
            m.insert("input".into(), input);
            m.insert("stream".into(), Value::Bool(spec.streaming));
            if let Some(n) = osl {
                m.insert("max_output_tokens".into(), Value::from(n));
            }
            for (k, v) in &spec.extra {
                m.insert(k.clone(), v.clone());
            }
            return serde_json::to_vec(&Value::Object(m)).expect("serializable");
        }
        EndpointType::Chat | EndpointType::Completions => {}
    }
    match (spec.endpoint_type, prompt) {
        (EndpointType::Chat, Prompt::Text(t)) => {
            m.insert(
                "messages".into(),
                serde_json::json!([{ "role": "user", "content": t }]),
            );
        }
        (EndpointType::Chat, Prompt::Messages(msgs)) => {
            m.insert("messages".into(), Value::Array(msgs.clone()));
        }
        (_, p) => {
            m.insert("prompt".into(), Value::String(prompt_text(p)));
        }
    }
    m.insert("stream".into(), Value::Bool(spec.streaming));
    if spec.streaming && spec.include_usage {
        m.insert(
            "stream_options".into(),
            serde_json::json!({ "include_usage": true }),
        );
    }
    if let Some(n) = osl {
        m.insert("max_tokens".into(), Value::from(n));
        if spec.osl_deterministic {
            m.insert("min_tokens".into(), Value::from(n));
        }
    }
    for (k, v) in &spec.extra {
        m.insert(k.clone(), v.clone());
    }
    serde_json::to_vec(&Value::Object(m)).expect("serializable")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_inputs_parse_like_genai_perf() {
        let m = parse_extra_inputs(&[
            "ignore_eos:true".into(),
            "temperature:0.5".into(),
            "stop:END".into(),
            "logit_bias:{\"1\": 2}".into(),
        ])
        .unwrap();
        assert_eq!(m["ignore_eos"], Value::Bool(true));
        assert_eq!(m["temperature"], serde_json::json!(0.5));
        assert_eq!(m["stop"], Value::String("END".into()));
        assert_eq!(m["logit_bias"]["1"], serde_json::json!(2));
        let e = parse_extra_inputs(&["ignore_eos".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected key:value"), "{e}");
        assert!(parse_extra_inputs(&[":x".into()]).is_err());
        assert!(parse_extra_inputs(&["a:{oops".into()]).is_err());
    }
}
