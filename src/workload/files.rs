//! Datasets from files: custom JSONL, ShareGPT, and mooncake traces.
//!
//! Files are read as streams (a line, or for ShareGPT one array element, at a time), so a
//! large file is never held whole; a malformed line is reported with its file and line
//! number. Mooncake traces become prompts built from 512-token blocks, one per hash id and
//! the same text wherever the same id appears, so that a server's prefix cache sees the
//! sharing it would see in production.

use std::io::{BufRead, BufReader};
use std::path::Path;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use super::{Prompt, PromptMaker, Tokenizer, WorkloadError};

/// Tokens per mooncake hash block.
pub const BLOCK_TOKENS: usize = 512;

/// Dataset file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatasetType {
    /// One JSON object per line: `text` (or `prompt`) or `messages`, optional `max_tokens` (or
    /// `output_tokens`), `timestamp` (ms).
    Jsonl,
    /// ShareGPT JSON: the first human turn is the prompt, the reply's length the output length.
    Sharegpt,
    /// Mooncake trace JSONL: `timestamp` (ms), `input_length`, `output_length`, `hash_ids`.
    Mooncake,
}

/// One dataset item.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// What to send.
    pub prompt: Prompt,
    /// Output length to ask for.
    pub max_tokens: Option<u32>,
    /// Send time from the start (ms), for `--fixed-schedule`.
    pub timestamp_ms: Option<f64>,
    /// The prompt's token count, when it is known without encoding it.
    pub tokens: Option<u32>,
}

fn err(path: &Path, line: usize, msg: impl std::fmt::Display) -> WorkloadError {
    WorkloadError::Dataset(format!("{}:{line}: {msg}", path.display()))
}

/// Guesses the format: `.json` is ShareGPT; JSONL whose first object has `hash_ids` or
/// `input_length` is a mooncake trace; other JSONL is custom.
pub fn detect(path: &Path) -> Result<DatasetType, WorkloadError> {
    if path.extension().is_some_and(|e| e == "json") {
        return Ok(DatasetType::Sharegpt);
    }
    let f = std::fs::File::open(path).map_err(|e| err(path, 0, e))?;
    for line in BufReader::new(f).lines().take(50) {
        let line = line.map_err(|e| err(path, 0, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let looks_mooncake = line.contains("\"hash_ids\"") || line.contains("\"input_length\"");
        return Ok(if looks_mooncake {
            DatasetType::Mooncake
        } else {
            DatasetType::Jsonl
        });
    }
    Err(err(path, 0, "the file is empty"))
}

fn open(path: &Path) -> Result<BufReader<std::fs::File>, WorkloadError> {
    std::fs::File::open(path)
        .map(|f| BufReader::with_capacity(1 << 20, f))
        .map_err(|e| err(path, 0, e))
}

/// The file's non-empty lines, parsed, with their 1-based numbers.
fn json_lines(
    path: &Path,
) -> Result<impl Iterator<Item = Result<(usize, Value), WorkloadError>> + '_, WorkloadError> {
    Ok(open(path)?
        .lines()
        .enumerate()
        .filter_map(move |(i, line)| {
            let n = i + 1;
            match line {
                Err(e) => Some(Err(err(path, n, e))),
                Ok(l) if l.trim().is_empty() => None,
                Ok(l) => Some(
                    serde_json::from_str(&l)
                        .map(|v| (n, v))
                        .map_err(|e| err(path, n, format!("invalid JSON: {e}"))),
                ),
            }
        }))
}

/// Refuses timestamps that go backwards.
struct Clock(f64);

impl Clock {
    fn check(&mut self, t: f64, path: &Path, n: usize) -> Result<(), WorkloadError> {
        if t < self.0 {
            return Err(err(
                path,
                n,
                format!("timestamp {t} goes backwards (previous {})", self.0),
            ));
        }
        self.0 = t;
        Ok(())
    }
}

/// Reads up to `limit` items of a custom JSONL file.
pub fn read_jsonl(path: &Path, limit: usize) -> Result<Vec<Item>, WorkloadError> {
    let mut out = Vec::new();
    let mut clock = Clock(f64::NEG_INFINITY);
    for line in json_lines(path)? {
        if out.len() >= limit {
            break;
        }
        let (n, v) = line?;
        // `prompt` and `output_tokens` are the names of `vllm bench serve`'s custom dataset.
        let text = v.get("text").or_else(|| v.get("prompt"));
        let prompt = if let Some(t) = text.and_then(Value::as_str) {
            Prompt::Text(t.to_string())
        } else if let Some(m) = v.get("messages").and_then(Value::as_array) {
            if m.is_empty() {
                return Err(err(path, n, "\"messages\" is empty"));
            }
            Prompt::Messages(m.clone())
        } else {
            return Err(err(
                path,
                n,
                "expected a \"text\" (or \"prompt\") string or a \"messages\" array",
            ));
        };
        let timestamp_ms = v.get("timestamp").and_then(Value::as_f64);
        if let Some(t) = timestamp_ms {
            clock.check(t, path, n)?;
        }
        out.push(Item {
            prompt,
            max_tokens: v
                .get("max_tokens")
                .or_else(|| v.get("output_length"))
                .or_else(|| v.get("output_tokens"))
                .and_then(Value::as_u64)
                .map(|x| x.min(u64::from(u32::MAX)) as u32),
            timestamp_ms,
            tokens: None,
        });
    }
    if out.is_empty() {
        return Err(err(path, 0, "no request in the file"));
    }
    Ok(out)
}

/// Reads up to `limit` ShareGPT conversations that start with a human turn.
pub fn read_sharegpt(
    path: &Path,
    limit: usize,
    tokenizer: &Tokenizer,
) -> Result<Vec<Item>, WorkloadError> {
    use serde::de::{Deserializer, SeqAccess, Visitor};

    #[derive(serde::Deserialize)]
    struct Turn {
        #[serde(default)]
        from: String,
        #[serde(default)]
        value: String,
    }
    #[derive(serde::Deserialize)]
    struct Conversation {
        #[serde(default)]
        conversations: Vec<Turn>,
    }
    struct Collect<'a> {
        limit: usize,
        tokenizer: &'a Tokenizer,
    }
    impl<'de> Visitor<'de> for Collect<'_> {
        type Value = Result<Vec<Item>, WorkloadError>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON array of conversations")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(c) = seq.next_element::<Conversation>()? {
                if out.len() >= self.limit {
                    // The rest is skipped without building it.
                    while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                    break;
                }
                let turns = &c.conversations;
                let Some(h) = turns
                    .iter()
                    .position(|t| t.from == "human" || t.from == "user")
                else {
                    continue;
                };
                let reply = turns[h + 1..]
                    .iter()
                    .find(|t| t.from == "gpt" || t.from == "assistant");
                let max_tokens = match reply {
                    Some(r) => match self.tokenizer.count(&r.value) {
                        Ok(n) => Some(n.max(1) as u32),
                        Err(e) => return Ok(Err(e)),
                    },
                    None => None,
                };
                out.push(Item {
                    prompt: Prompt::Text(turns[h].value.clone()),
                    max_tokens,
                    timestamp_ms: None,
                    tokens: None,
                });
            }
            Ok(Ok(out))
        }
    }
    let mut de = serde_json::Deserializer::from_reader(open(path)?);
    let collect = Collect { limit, tokenizer };
    let items = (&mut de)
        .deserialize_seq(collect)
        .map_err(|e| err(path, e.line(), format!("not ShareGPT JSON: {e}")))??;
    if items.is_empty() {
        return Err(err(path, 0, "no conversation has a human turn"));
    }
    Ok(items)
}

/// Reads up to `limit` mooncake trace lines and builds their prompts from hash blocks.
pub fn read_mooncake(
    path: &Path,
    limit: usize,
    tokenizer: &Tokenizer,
    seed: u64,
) -> Result<Vec<Item>, WorkloadError> {
    let maker = PromptMaker::new(tokenizer)?;
    let mut blocks: std::collections::HashMap<u64, Vec<u32>> = std::collections::HashMap::new();
    let mut out = Vec::new();
    let mut clock = Clock(f64::NEG_INFINITY);
    let mut planned = 0u64;
    for line in json_lines(path)? {
        if out.len() >= limit {
            break;
        }
        let (n, v) = line?;
        let num = |k: &str| v.get(k).and_then(Value::as_u64);
        let ts = v
            .get("timestamp")
            .and_then(Value::as_f64)
            .ok_or_else(|| err(path, n, "missing \"timestamp\" (ms)"))?;
        clock.check(ts, path, n)?;
        let input = num("input_length").ok_or_else(|| err(path, n, "missing \"input_length\""))?;
        if input > super::MAX_PROMPT_TOKENS {
            return Err(err(
                path,
                n,
                format!(
                    "input_length {input} is over the {}-token cap on one prompt",
                    super::MAX_PROMPT_TOKENS
                ),
            ));
        }
        planned += input;
        if planned > super::MAX_PLAN_TOKENS {
            return Err(err(
                path,
                n,
                format!(
                    "the trace's prompts reach {planned} tokens by this line; a run prepares at \
                     most {} (lower --num-dataset-entries or cut the trace)",
                    super::MAX_PLAN_TOKENS
                ),
            ));
        }
        let input = input as usize;
        let output =
            num("output_length").ok_or_else(|| err(path, n, "missing \"output_length\""))?;
        let ids: Vec<u64> = match v.get("hash_ids") {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| {
                    x.as_u64()
                        .ok_or_else(|| err(path, n, "hash_ids must be non-negative integers"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(err(path, n, "hash_ids must be an array")),
        };
        // Blocks for each hash id, then a request-unique tail if the ids do not cover the length.
        let mut tokens = Vec::with_capacity(input);
        for &h in &ids {
            if tokens.len() >= input {
                break;
            }
            let block = match blocks.get(&h) {
                Some(b) => b,
                None => {
                    let mut rng =
                        ChaCha8Rng::seed_from_u64(seed ^ h.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    let b = maker.tokens(BLOCK_TOKENS, &mut rng);
                    blocks.entry(h).or_insert(b)
                }
            };
            tokens.extend_from_slice(block);
        }
        if tokens.len() < input {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ ((n as u64) << 32) ^ 0x7a11);
            let rest = maker.tokens(input - tokens.len(), &mut rng);
            tokens.extend_from_slice(&rest);
        }
        tokens.truncate(input.max(1));
        out.push(Item {
            prompt: Prompt::Text(tokenizer.decode(&tokens)?),
            max_tokens: Some(output.clamp(1, u64::from(u32::MAX)) as u32),
            timestamp_ms: Some(ts),
            tokens: None,
        });
    }
    if out.is_empty() {
        return Err(err(path, 0, "no request in the trace"));
    }
    Ok(out)
}
