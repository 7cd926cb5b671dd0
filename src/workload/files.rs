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
    let mut r = open(path)?;
    let mut line = Vec::new();
    for n in 1..=50 {
        if !next_line(&mut r, &mut line, CAPS.line).map_err(|e| err(path, n, e))? {
            break;
        }
        if line.trim_ascii().is_empty() {
            continue;
        }
        let has = |key: &[u8]| memchr::memmem::find(&line, key).is_some();
        let looks_mooncake = has(b"\"hash_ids\"") || has(b"\"input_length\"");
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

/// What a run takes from a dataset file at most, checked as it is read: the longest line, and
/// the bytes of all the requests it keeps (its lines, or ShareGPT's prompts).
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Bytes in one line.
    pub line: usize,
    /// Bytes kept in all.
    pub kept: u64,
}

/// A line may hold a prompt at the token cap ([`super::MAX_PROMPT_TOKENS`], ~40 MB of text)
/// with room for its JSON; a run keeps as many bytes as the synthetic prompts' budget
/// ([`super::MAX_PLAN_TOKENS`] at ~4 bytes a token).
pub const CAPS: Caps = Caps {
    line: 128 << 20,
    kept: 4 * super::MAX_PLAN_TOKENS,
};

/// Bytes as a person reads them: whole MiB, MB, or bytes.
fn size(n: u64) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1_000_000 {
        format!("{:.1} MB", n as f64 / 1e6)
    } else {
        format!("{n} bytes")
    }
}

/// Reads the next line, without its end, into `buf`; `false` at the end of the file. A line
/// over `max` bytes is an error, found having read at most `max + 2` of them (room for a CRLF).
fn next_line(r: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> std::io::Result<bool> {
    buf.clear();
    if <&mut _ as std::io::Read>::take(r, max as u64 + 2).read_until(b'\n', buf)? == 0 {
        return Ok(false);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    if buf.len() > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "the line is longer than {}, the most one may be",
                size(max as u64)
            ),
        ));
    }
    Ok(true)
}

/// Counts the bytes a run keeps against [`Caps::kept`].
struct Kept {
    bytes: u64,
    cap: u64,
}

impl Kept {
    /// Counts `n` more bytes; what is wrong when they pass the cap.
    fn add(&mut self, n: usize) -> Result<(), String> {
        self.bytes += n as u64;
        if self.bytes > self.cap {
            return Err(format!(
                "the requests kept reach {} by here; a run holds at most {} of a file (lower \
                 --num-dataset-entries or cut the file)",
                size(self.bytes),
                size(self.cap)
            ));
        }
        Ok(())
    }
}

/// The file's non-empty lines, parsed, with their 1-based numbers and lengths.
fn json_lines(
    path: &Path,
    max_line: usize,
) -> Result<impl Iterator<Item = Result<(usize, usize, Value), WorkloadError>> + '_, WorkloadError>
{
    let mut r = open(path)?;
    let mut line = Vec::new();
    let mut n = 0;
    Ok(std::iter::from_fn(move || loop {
        n += 1;
        match next_line(&mut r, &mut line, max_line) {
            Err(e) => return Some(Err(err(path, n, e))),
            Ok(false) => return None,
            Ok(true) if line.trim_ascii().is_empty() => continue,
            Ok(true) => {
                return Some(
                    serde_json::from_slice(&line)
                        .map(|v| (n, line.len(), v))
                        .map_err(|e| err(path, n, format!("invalid JSON: {e}"))),
                )
            }
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

/// Reads up to `limit` items of a custom JSONL file, within `caps`.
pub fn read_jsonl(path: &Path, limit: usize, caps: Caps) -> Result<Vec<Item>, WorkloadError> {
    let mut out = Vec::new();
    let mut clock = Clock(f64::NEG_INFINITY);
    let mut kept = Kept {
        bytes: 0,
        cap: caps.kept,
    };
    for line in json_lines(path, caps.line)? {
        if out.len() >= limit {
            break;
        }
        let (n, len, v) = line?;
        kept.add(len).map_err(|m| err(path, n, m))?;
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

/// Reads up to `limit` ShareGPT conversations that start with a human turn, keeping at most
/// `caps.kept` bytes of prompts. (The file is one JSON array, not lines: a conversation is
/// held whole while it is read.)
pub fn read_sharegpt(
    path: &Path,
    limit: usize,
    tokenizer: &Tokenizer,
    caps: Caps,
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
        kept: Kept,
        path: &'a Path,
    }
    impl<'de> Visitor<'de> for Collect<'_> {
        type Value = Result<Vec<Item>, WorkloadError>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON array of conversations")
        }
        fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            let mut i = 0;
            while let Some(c) = seq.next_element::<Conversation>()? {
                i += 1;
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
                if let Err(m) = self.kept.add(turns[h].value.len()) {
                    let at = format!("{}: conversation {i}", self.path.display());
                    return Ok(Err(WorkloadError::Dataset(format!("{at}: {m}"))));
                }
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
    let collect = Collect {
        limit,
        tokenizer,
        kept: Kept {
            bytes: 0,
            cap: caps.kept,
        },
        path,
    };
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
    for line in json_lines(path, CAPS.line)? {
        if out.len() >= limit {
            break;
        }
        let (n, _, v) = line?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("ringperf-files-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn sizes_read_as_a_person_reads_them() {
        assert_eq!(size(CAPS.line as u64), "128 MiB");
        assert_eq!(size(CAPS.kept), "400.0 MB");
        assert_eq!(size(1_048_577), "1.0 MB");
        assert_eq!(size(999_999), "999999 bytes");
    }

    #[test]
    fn lines_up_to_the_cap_are_read_and_a_longer_one_is_refused() {
        let text = "abcd\r\n\nabcde\nxy";
        let mut r = std::io::BufReader::new(text.as_bytes());
        let mut got = Vec::new();
        let mut line = Vec::new();
        while next_line(&mut r, &mut line, 5).unwrap() {
            got.push(String::from_utf8(line.clone()).unwrap());
        }
        assert_eq!(got, ["abcd", "", "abcde", "xy"]);
        let mut r = std::io::BufReader::new(text.as_bytes());
        assert!(next_line(&mut r, &mut line, 4).unwrap(), "4 bytes and CRLF");
        assert!(next_line(&mut r, &mut line, 4).unwrap());
        let e = next_line(&mut r, &mut line, 4).unwrap_err();
        assert!(e.to_string().contains("longer than 4 bytes"), "{e}");
        assert!(line.len() <= 6, "read past the cap: {}", line.len());
    }

    #[test]
    fn a_file_past_its_caps_is_refused_at_the_line_that_passes_them() {
        let line = r#"{"text": "0123456789"}"#; // 22 bytes
        let p = file("caps.jsonl", &format!("{line}\n\n{line}\n{line}\n"));
        let caps = |line, kept| Caps { line, kept };
        assert_eq!(read_jsonl(&p, 10, caps(22, 66)).unwrap().len(), 3);
        // The limit stops reading before the cap matters.
        assert_eq!(read_jsonl(&p, 2, caps(22, 44)).unwrap().len(), 2);
        let e = read_jsonl(&p, 10, caps(22, 65)).unwrap_err().to_string();
        assert!(
            e.contains("caps.jsonl:4: the requests kept reach 66 bytes"),
            "{e}"
        );
        let e = read_jsonl(&p, 10, caps(21, 66)).unwrap_err().to_string();
        assert!(
            e.contains("caps.jsonl:1: the line is longer than 21 bytes"),
            "{e}"
        );
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn sharegpt_prompts_past_the_cap_are_refused_with_the_conversation() {
        let c = |q: &str| format!(r#"{{"conversations": [{{"from": "human", "value": "{q}"}}]}}"#);
        let p = file(
            "caps.json",
            &format!("[{}, {}, {}]", c("abc"), c("de"), c("f")),
        );
        let tok = Tokenizer::embedded().unwrap();
        let caps = |kept| Caps {
            line: 1 << 20,
            kept,
        };
        assert_eq!(read_sharegpt(&p, 10, &tok, caps(6)).unwrap().len(), 3);
        let e = read_sharegpt(&p, 10, &tok, caps(5))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("caps.json: conversation 3: the requests kept reach 6 bytes"),
            "{e}"
        );
        std::fs::remove_file(p).unwrap();
    }
}
