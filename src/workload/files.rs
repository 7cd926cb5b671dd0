//! Datasets from files: custom JSONL, ShareGPT, and mooncake traces.
//!
//! Files are read as streams (a line, or for ShareGPT one array element, at a time); a
//! malformed line is reported with its file and line number. A JSONL file or trace is
//! [`Index`]ed: every line checked once and where it lies noted, so that its requests can be
//! built from their lines later, and a large one is never held whole. Mooncake traces become
//! prompts built from 512-token blocks, one per hash id and the same text wherever the same
//! id appears, so that a server's prefix cache sees the sharing it would see in production.

use std::io::{BufRead, BufReader};
use std::path::Path;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use super::{
    At, DatasetError, DatasetWhy, Prompt, PromptMaker, RequestError, Tokenizer, WorkloadError,
};

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
    /// Parquet (as the Hugging Face hub converts datasets): each row read as a JSONL line.
    Parquet,
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

fn err(path: &Path, at: At, why: impl Into<DatasetWhy>) -> WorkloadError {
    DatasetError::at(path, at, why)
}

/// Guesses the format: `.json` is ShareGPT, `.parquet` Parquet; JSONL whose first object has `hash_ids` or
/// `input_length` is a mooncake trace; other JSONL is custom.
pub fn detect(path: &Path) -> Result<DatasetType, WorkloadError> {
    if path.extension().is_some_and(|e| e == "json") {
        return Ok(DatasetType::Sharegpt);
    }
    if path.extension().is_some_and(|e| e == "parquet") {
        return Ok(DatasetType::Parquet);
    }
    let mut r = open(path)?;
    let mut line = Vec::new();
    for n in 1..=50 {
        if !next_line(&mut r, &mut line, CAPS.line, &mut 0)
            .map_err(|e| err(path, At::Line(n), e))?
        {
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
    Err(err(path, At::File, DatasetWhy::Empty))
}

fn open(path: &Path) -> Result<BufReader<std::fs::File>, WorkloadError> {
    std::fs::File::open(path)
        .map(|f| BufReader::with_capacity(1 << 20, f))
        .map_err(|e| err(path, At::File, e))
}

/// The UTF-8 byte order mark some editors put first in a file (RFC 8259 lets a reader ignore
/// it).
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// `path` opened past its byte order mark, if it has one; returns the bytes skipped.
fn open_text(path: &Path) -> Result<(BufReader<std::fs::File>, u64), WorkloadError> {
    use std::io::BufRead;
    let mut r = open(path)?;
    let bom = r
        .fill_buf()
        .map_err(|e| err(path, At::File, e))?
        .starts_with(BOM);
    if bom {
        r.consume(BOM.len());
    }
    Ok((r, if bom { BOM.len() as u64 } else { 0 }))
}

/// What a run takes from a dataset file at most, checked as it is read: the longest line, and
/// the bytes of all the prompts a ShareGPT file gives (a JSONL file or trace that large is
/// streamed, not held).
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Bytes in one line.
    pub line: usize,
    /// Bytes kept in all.
    pub kept: u64,
}

/// A line may hold a prompt at the token cap ([`super::MAX_PROMPT_TOKENS`], ~40 MB of text)
/// with room for its JSON; a run holds as many bytes of prompts as the synthetic prompts'
/// budget ([`super::MAX_PLAN_TOKENS`] at ~4 bytes a token).
pub const CAPS: Caps = Caps {
    line: 128 << 20,
    kept: 4 * super::MAX_PLAN_TOKENS,
};

/// Bytes as a person reads them: whole MiB, MB, or bytes.
pub(super) fn size(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1_000_000 {
        format!("{:.1} MB", n as f64 / 1e6)
    } else {
        format!("{n} bytes")
    }
}

/// Reads the next line, without its end, into `buf`, and moves `at` past it; `false` at the
/// end of the file. A line over `max` bytes is an error, found having read at most `max + 2`
/// of them (room for a CRLF).
fn next_line(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
    at: &mut u64,
) -> Result<bool, DatasetWhy> {
    buf.clear();
    let read = <&mut _ as std::io::Read>::take(r, max as u64 + 2).read_until(b'\n', buf)?;
    if read == 0 {
        return Ok(false);
    }
    *at += read as u64;
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    if buf.len() > max {
        return Err(DatasetWhy::LineTooLong(max));
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
    fn add(&mut self, n: usize) -> Result<(), DatasetWhy> {
        self.bytes += n as u64;
        if self.bytes > self.cap {
            return Err(DatasetWhy::KeptTooMuch {
                bytes: self.bytes,
                cap: self.cap,
            });
        }
        Ok(())
    }
}

/// Which of a file's lines a run takes, and how a trace's lines become prompts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Select<'a> {
    /// Only the lines whose key holds this value (`--dataset-filter`).
    pub filter: Option<&'a (String, String)>,
    /// Only the lines whose timestamp (ms) is in this closed range.
    pub window_ms: Option<(f64, f64)>,
    /// Tokens per hash id of a mooncake trace (`--isl-block-size`; default [`BLOCK_TOKENS`]).
    pub block_tokens: Option<usize>,
}

/// Refuses timestamps that go backwards.
struct Clock(f64);

impl Clock {
    fn check(&mut self, t: f64, path: &Path, n: usize) -> Result<(), WorkloadError> {
        if t < self.0 {
            let previous = self.0;
            return Err(err(
                path,
                At::Line(n),
                DatasetWhy::Backwards { t, previous },
            ));
        }
        self.0 = t;
        Ok(())
    }
}

/// Where a request line of a JSONL file or trace lies in it.
#[derive(Debug, Clone, Copy)]
struct Line {
    /// Byte offset.
    at: u64,
    /// Bytes, without the line end.
    len: u32,
    /// 1-based line number.
    n: u32,
}

/// The most request lines a run indexes (16 bytes each, with what the run keeps of them).
pub const MAX_LINES: usize = 20_000_000;

/// A JSONL file or mooncake trace read once, every request line checked and where it lies
/// noted: a request can then be built from its line at any time, all before the run for a
/// small file, or while the run goes on for a large one, which is then never held whole.
#[derive(Debug)]
pub struct Index {
    path: std::path::PathBuf,
    /// The file as read (the same one even if the path is replaced meanwhile).
    file: std::fs::File,
    kind: DatasetType,
    lines: Vec<Line>,
    /// Each line's own output length.
    pub max_tokens: Vec<Option<u32>>,
    /// The send times (ms) of the lines that have one.
    pub timestamps: Vec<f64>,
    /// About what the prompts come to in bytes (a trace's at four bytes a token).
    pub prompt_bytes: u64,
    /// Seed of a trace's block texts.
    seed: u64,
    /// Tokens per hash id of a trace.
    block: usize,
}

/// A mooncake trace line.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceLine {
    /// When it is sent (ms from the trace's start).
    pub timestamp: f64,
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Its prompt's blocks, one hash id each (the same id, the same block of text).
    pub hash_ids: Vec<u64>,
}

/// The most hash ids [`read_trace`] holds (about 1 GB with what an analysis keeps of each:
/// the line, its node of the prefix tree, its place and the ids seen).
pub const MAX_TRACE_HASH_IDS: usize = 10_000_000;

/// Every line of a mooncake trace, checked as a run checks it (blank lines skipped); an error
/// names the file and the line.
pub fn read_trace(path: &Path) -> Result<Vec<TraceLine>, WorkloadError> {
    let (mut r, mut at) = open_text(path)?;
    let (mut buf, mut lines, mut n, mut ids) = (Vec::new(), Vec::new(), 0, 0);
    while next_line(&mut r, &mut buf, CAPS.line, &mut at)
        .map_err(|e| err(path, At::Line(n + 1), e))?
    {
        n += 1;
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let v: Value = serde_json::from_slice(&buf)
            .map_err(|e| err(path, At::Line(n), DatasetWhy::Json(e)))?;
        let t = trace_line(&v).map_err(|m| err(path, At::Line(n), m))?;
        ids += t.hash_ids.len();
        if ids > MAX_TRACE_HASH_IDS {
            return Err(err(path, At::Line(n), DatasetWhy::TooManyHashIds));
        }
        lines.push(t);
    }
    if lines.is_empty() {
        return Err(err(path, At::Line(n), DatasetWhy::NoTraceRequest));
    }
    Ok(lines)
}

/// A count field of a line: absent (`None`), or a whole number of at least 0; anything else
/// is an error that says what it holds.
fn count(v: &Value, key: &'static str) -> Result<Option<u64>, RequestError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => x.as_u64().map(Some).ok_or_else(|| RequestError::NotCount {
            key,
            value: x.clone(),
        }),
    }
}

fn trace_line(v: &Value) -> Result<TraceLine, RequestError> {
    let needed = |k: &'static str| count(v, k)?.ok_or(RequestError::Missing(k));
    let timestamp = v
        .get("timestamp")
        .and_then(Value::as_f64)
        .ok_or(RequestError::NoTimestamp)?;
    let input = needed("input_length")?;
    if input > super::MAX_PROMPT_TOKENS {
        return Err(RequestError::InputTooLong(input));
    }
    let output = needed("output_length")?;
    let hash_ids = match v.get("hash_ids") {
        None => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_u64().ok_or(RequestError::HashIdsNotIntegers))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(RequestError::HashIdsNotArray),
    };
    Ok(TraceLine {
        timestamp,
        input,
        output,
        hash_ids,
    })
}

/// The folder a dataset file is in (where the files its lines name are looked for).
fn folder(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("."))
}

/// The largest image or audio file a JSONL line may name.
pub(super) const MEDIA_FILE_CAP: u64 = 32 << 20;

/// A JSONL line's images and audio (AIPerf's single-turn fields `image`/`images` and
/// `audio`/`audios`, each a string or a list) as chat content parts. A URL (`http(s)://`,
/// `data:`) and AIPerf's `FORMAT,BASE64` audio are sent as given; anything else is a file,
/// read and sent inline (found as given, else beside the JSONL file). Returns the parts and
/// the bytes files add inline. With `read` false a file is only checked (that it is there and
/// not too large), and its part left empty: for the first pass over a file, which counts.
fn media_parts(v: &Value, base: &Path, read: bool) -> Result<(Vec<Value>, u64), RequestError> {
    use base64::Engine as _;
    let list = |keys: [&'static str; 2]| -> Result<Vec<String>, RequestError> {
        let mut out = Vec::new();
        for k in keys {
            match v.get(k) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) => out.push(s.clone()),
                Some(Value::Array(a)) => {
                    for x in a {
                        let s = x.as_str().ok_or(RequestError::NotStrings(k))?;
                        out.push(s.to_string());
                    }
                }
                Some(_) => return Err(RequestError::NotStringOrList(k)),
            }
        }
        Ok(out)
    };
    let mut inlined = 0u64;
    let mut file = |name: &str| -> Result<(Vec<u8>, String), RequestError> {
        let given = Path::new(name);
        let path = if given.exists() || given.is_absolute() {
            given.to_path_buf()
        } else {
            base.join(given)
        };
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        let unreadable = |source| RequestError::MediaFile {
            path: path.clone(),
            source,
        };
        let size = std::fs::metadata(&path).map_err(unreadable)?.len();
        if size > MEDIA_FILE_CAP {
            return Err(RequestError::MediaFileTooLarge { path, bytes: size });
        }
        // Base64: four bytes for every three.
        inlined += size.div_ceil(3) * 4;
        let bytes = if read {
            std::fs::read(&path).map_err(unreadable)?
        } else {
            Vec::new()
        };
        Ok((bytes, ext))
    };
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let mut parts = Vec::new();
    for image in list(["image", "images"])? {
        let url = if ["http://", "https://", "data:"]
            .iter()
            .any(|p| image.starts_with(p))
        {
            image
        } else {
            let (bytes, ext) = file(&image)?;
            let mime = match ext.as_str() {
                "png" => "png",
                "jpg" | "jpeg" => "jpeg",
                "webp" => "webp",
                "gif" => "gif",
                _ => return Err(RequestError::NotImage(image)),
            };
            format!("data:image/{mime};base64,{}", b64(&bytes))
        };
        parts.push(serde_json::json!({"type": "image_url", "image_url": {"url": url}}));
    }
    for audio in list(["audio", "audios"])? {
        let inline = audio
            .split_once(',')
            .filter(|(f, _)| matches!(*f, "wav" | "mp3"));
        let (format, data) = match inline {
            Some((f, d)) => (f.to_string(), d.to_string()),
            None => {
                let (bytes, ext) = file(&audio)?;
                if !matches!(ext.as_str(), "wav" | "mp3") {
                    return Err(RequestError::NotAudio(audio));
                }
                (ext, b64(&bytes))
            }
        };
        parts.push(
            serde_json::json!({"type": "input_audio", "input_audio": {"data": data, "format": format}}),
        );
    }
    Ok((parts, inlined))
}

/// A custom JSONL line's request, and the bytes the files it names add; those files are found
/// from `base` (its folder), and read only with `read` (see [`media_parts`]).
pub(super) fn jsonl_item(
    mut v: Value,
    base: &Path,
    read: bool,
) -> Result<(Item, u64), RequestError> {
    // `prompt` and `output_tokens` are the names of `vllm bench serve`'s custom dataset.
    // `turns` (a list of user turns: the first is sent) is SpecBench's and MT-Bench's.
    let text = v
        .get("text")
        .or_else(|| v.get("prompt"))
        .or_else(|| v.get("turns").and_then(|t| t.get(0)));
    let prompt = if let Some(t) = text.and_then(Value::as_str) {
        Prompt::Text(t.to_string())
    } else if let Some(m) = v.get_mut("messages").and_then(Value::as_array_mut) {
        if m.is_empty() {
            return Err(RequestError::NoMessages);
        }
        Prompt::Messages(std::mem::take(m))
    } else {
        return Err(RequestError::NoPrompt);
    };
    let (parts, inlined) = media_parts(&v, base, read)?;
    let prompt = match prompt {
        _ if parts.is_empty() => prompt,
        Prompt::Text(t) => Prompt::Messages(vec![super::media::message(&t, parts)]),
        _ => return Err(RequestError::MediaBesideMessages),
    };
    let mut max_tokens = None;
    for key in ["max_tokens", "output_length", "output_tokens"] {
        if let Some(n) = count(&v, key)? {
            max_tokens = Some(n.min(u64::from(u32::MAX)) as u32);
            break;
        }
    }
    let item = Item {
        prompt,
        max_tokens,
        timestamp_ms: v.get("timestamp").and_then(Value::as_f64),
        tokens: None,
    };
    Ok((item, inlined))
}

impl Index {
    /// Reads up to `limit` request lines of a JSONL file or trace (`kind`), each at most
    /// `max_line` bytes, checking every one; with `filter` (key, value), only the lines whose
    /// `key` holds `value`.
    pub fn read(
        path: &Path,
        kind: DatasetType,
        limit: usize,
        max_line: usize,
        seed: u64,
        select: &Select,
    ) -> Result<Index, WorkloadError> {
        let filter = select.filter;
        assert!(
            !matches!(kind, DatasetType::Sharegpt | DatasetType::Parquet),
            "ShareGPT and Parquet are not line by line"
        );
        let (mut r, skipped) = open_text(path)?;
        let file = r
            .get_ref()
            .try_clone()
            .map_err(|e| err(path, At::File, e))?;
        let mut index = Index {
            path: path.to_path_buf(),
            file,
            kind,
            lines: Vec::new(),
            max_tokens: Vec::new(),
            timestamps: Vec::new(),
            prompt_bytes: 0,
            seed,
            block: select.block_tokens.unwrap_or(BLOCK_TOKENS).max(1),
        };
        let mut clock = Clock(f64::NEG_INFINITY);
        let mut buf = Vec::new();
        let (mut at, mut n) = (skipped, 0usize);
        while index.lines.len() < limit {
            n += 1;
            let start = at;
            let read = next_line(&mut r, &mut buf, max_line, &mut at)
                .map_err(|e| err(path, At::Line(n), e))?;
            if !read {
                break;
            }
            if buf.trim_ascii().is_empty() {
                continue;
            }
            if index.lines.len() == MAX_LINES {
                return Err(err(path, At::Line(n), DatasetWhy::TooManyLines));
            }
            let v: Value = serde_json::from_slice(&buf)
                .map_err(|e| err(path, At::Line(n), DatasetWhy::Json(e)))?;
            if let Some((key, want)) = filter {
                let holds = match v.get(key) {
                    Some(Value::String(s)) => s == want,
                    // A number or a boolean, as written: parse the wanted text as JSON.
                    Some(other) => serde_json::from_str::<Value>(want).is_ok_and(|w| w == *other),
                    None => false,
                };
                if !holds {
                    continue;
                }
            }
            let (timestamp, max_tokens, bytes) = match kind {
                DatasetType::Mooncake => {
                    let t = trace_line(&v).map_err(|m| err(path, At::Line(n), m))?;
                    let out = t.output.clamp(1, u64::from(u32::MAX)) as u32;
                    (Some(t.timestamp), Some(out), 4 * t.input)
                }
                _ => {
                    // Images and audio in files count with the line.
                    let (item, media) = jsonl_item(v, folder(path), false)
                        .map_err(|m| err(path, At::Line(n), m))?;
                    (item.timestamp_ms, item.max_tokens, buf.len() as u64 + media)
                }
            };
            if let Some(t) = timestamp {
                clock.check(t, path, n)?;
                if let Some((from, to)) = select.window_ms {
                    if t > to {
                        // Timestamps only rise: nothing after this line is in the window.
                        break;
                    }
                    if t < from {
                        continue;
                    }
                }
                index.timestamps.push(t);
            }
            index.max_tokens.push(max_tokens);
            index.prompt_bytes += bytes;
            index.lines.push(Line {
                at: start,
                len: buf.len() as u32,
                n: n as u32,
            });
        }
        if index.lines.is_empty() {
            let why = match (kind, filter, select.window_ms) {
                (_, _, Some((from, to))) => DatasetWhy::NoneInWindow { from, to },
                (_, Some((key, value)), None) => DatasetWhy::NoneFiltered {
                    key: key.clone(),
                    value: value.clone(),
                },
                (DatasetType::Mooncake, None, None) => DatasetWhy::NoTraceRequest,
                _ => DatasetWhy::NoRequest,
            };
            return Err(err(path, At::File, why));
        }
        Ok(index)
    }

    /// Request lines.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether there is none (never, once read).
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Line `i`'s request, read back from the file; a trace's prompt is built from `maker`'s
    /// corpus.
    pub fn item<T: std::ops::Deref<Target = Tokenizer>>(
        &self,
        i: usize,
        maker: &PromptMaker<T>,
    ) -> Result<Item, WorkloadError> {
        use std::os::unix::fs::FileExt;
        let line = self.lines[i];
        let n = line.n as usize;
        let mut buf = vec![0; line.len as usize];
        let at = At::Line(n);
        self.file
            .read_exact_at(&mut buf, line.at)
            .map_err(|e| err(&self.path, at, DatasetWhy::ReadAgain(e)))?;
        let changed = |why: DatasetWhy| err(&self.path, at, DatasetWhy::Changed(Box::new(why)));
        let v: Value = serde_json::from_slice(&buf).map_err(|e| changed(DatasetWhy::Json(e)))?;
        match self.kind {
            DatasetType::Mooncake => {
                let t = trace_line(&v).map_err(|e| changed(e.into()))?;
                Ok(Item {
                    prompt: Prompt::Text(trace_prompt(&t, n, (self.seed, self.block), maker)?),
                    max_tokens: self.max_tokens[i],
                    timestamp_ms: Some(t.timestamp),
                    tokens: None,
                })
            }
            _ => jsonl_item(v, folder(&self.path), true)
                .map(|(item, _)| item)
                .map_err(|e| changed(e.into())),
        }
    }
}

/// A trace line's prompt: a block of `block` tokens (512 unless the trace says otherwise) per
/// hash id (the same text wherever the same id appears), then a text of its own (seeded by
/// its line number `n`) for what the ids do not cover, cut to `input_length` tokens.
fn trace_prompt<T: std::ops::Deref<Target = Tokenizer>>(
    t: &TraceLine,
    n: usize,
    (seed, block): (u64, usize),
    maker: &PromptMaker<T>,
) -> Result<String, WorkloadError> {
    let input = t.input as usize;
    let mut tokens = Vec::with_capacity(input);
    for &h in &t.hash_ids {
        if tokens.len() >= input {
            break;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ h.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        tokens.extend_from_slice(&maker.tokens(block, &mut rng));
    }
    if tokens.len() < input {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ ((n as u64) << 32) ^ 0x7a11);
        let rest = maker.tokens(input - tokens.len(), &mut rng);
        tokens.extend_from_slice(&rest);
    }
    tokens.truncate(input.max(1));
    Ok(maker.tokenizer.decode(&tokens)?)
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
                        Err(e) => return Ok(Err(e.into())),
                    },
                    None => None,
                };
                if let Err(why) = self.kept.add(turns[h].value.len()) {
                    return Ok(Err(err(self.path, At::Conversation(i), why)));
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
    let mut de = serde_json::Deserializer::from_reader(open_text(path)?.0);
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
        .map_err(|e| err(path, At::Line(e.line()), DatasetWhy::NotShareGpt(e)))??;
    if items.is_empty() {
        return Err(err(path, At::File, DatasetWhy::NoHumanTurn));
    }
    Ok(items)
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
        let mut at = 0;
        let mut starts = vec![0];
        while next_line(&mut r, &mut line, 5, &mut at).unwrap() {
            got.push(String::from_utf8(line.clone()).unwrap());
            starts.push(at);
        }
        assert_eq!(got, ["abcd", "", "abcde", "xy"]);
        assert_eq!(starts, [0, 6, 7, 13, 15], "where each line starts");
        let mut r = std::io::BufReader::new(text.as_bytes());
        assert!(
            next_line(&mut r, &mut line, 4, &mut at).unwrap(),
            "4 bytes and CRLF"
        );
        assert!(next_line(&mut r, &mut line, 4, &mut at).unwrap());
        let e = next_line(&mut r, &mut line, 4, &mut at).unwrap_err();
        assert!(e.to_string().contains("longer than 4 bytes"), "{e}");
        assert!(line.len() <= 6, "read past the cap: {}", line.len());
        let mut r = std::io::BufReader::new("abcdefghijklmnop\n".as_bytes());
        assert!(next_line(&mut r, &mut line, 4, &mut at).is_err());
        assert_eq!(line.len(), 6, "the cap and room for a CRLF, no more");
    }

    /// Every request line is found where it is (CRLF ends, blank lines, a last line without
    /// an end), read back the same, and the limit and the line cap are kept.
    #[test]
    fn an_index_reads_each_line_back_and_keeps_its_caps() {
        let lines = [
            r#"{"text": "first", "max_tokens": 3, "timestamp": 5}"#,
            r#"{"messages": [{"role": "user", "content": "second"}], "timestamp": 7}"#,
            r#"{"prompt": "third é"}"#,
        ];
        let p = file(
            "index.jsonl",
            &format!("{}\r\n\n  \n{}\n{}", lines[0], lines[1], lines[2]),
        );
        let tok = Tokenizer::embedded().unwrap();
        let maker = PromptMaker::new(&tok).unwrap();
        let index =
            Index::read(&p, DatasetType::Jsonl, 10, 1 << 20, 1, &Select::default()).unwrap();
        assert_eq!(index.len(), 3);
        assert_eq!(index.timestamps, [5.0, 7.0]);
        assert_eq!(index.max_tokens, [Some(3), None, None]);
        let want: Vec<u64> = lines.iter().map(|l| l.len() as u64).collect();
        assert_eq!(index.prompt_bytes, want.iter().sum::<u64>());
        for (i, l) in lines.iter().enumerate() {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(
                index.item(i, &maker).unwrap(),
                jsonl_item(v, Path::new("."), true).unwrap().0,
                "line {i}"
            );
        }
        assert_eq!(
            Index::read(&p, DatasetType::Jsonl, 2, 1 << 20, 1, &Select::default())
                .unwrap()
                .len(),
            2
        );
        let e = Index::read(&p, DatasetType::Jsonl, 10, 60, 1, &Select::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("index.jsonl:4: the line is longer than 60 bytes"),
            "{e}"
        );
        // A line changed after it was read is refused when it is read again.
        std::fs::write(&p, "x".repeat(200)).unwrap();
        let e = index.item(0, &maker).unwrap_err().to_string();
        assert!(
            e.contains("index.jsonl:1: the file changed while the run read it"),
            "{e}"
        );
        std::fs::remove_file(p).unwrap();
    }

    /// A trace's index keeps its send times and output lengths and reckons its prompts at four
    /// bytes a token; a line read back gets a 512-token block per hash id, the same text
    /// wherever the id appears, and a text of its own for what the ids do not cover.
    #[test]
    fn a_traces_prompts_share_blocks_by_hash_id_and_have_their_own_tails() {
        let p = file(
            "trace.jsonl",
            &[
                r#"{"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]}"#,
                r#"{"timestamp": 10, "input_length": 600, "output_length": 0, "hash_ids": [9]}"#,
                r#"{"timestamp": 25, "input_length": 700, "output_length": 7, "hash_ids": [1, 4]}"#,
                r#"{"timestamp": 25, "input_length": 300, "output_length": 5}"#,
                r#"{"timestamp": 30, "input_length": 300, "output_length": 5}"#,
            ]
            .join("\n"),
        );
        let tok = Tokenizer::embedded().unwrap();
        let maker = PromptMaker::new(&tok).unwrap();
        let index = Index::read(
            &p,
            DatasetType::Mooncake,
            10,
            1 << 20,
            3,
            &Select::default(),
        )
        .unwrap();
        assert_eq!(index.timestamps, [0.0, 10.0, 25.0, 25.0, 30.0]);
        assert_eq!(
            index.max_tokens,
            [5, 1, 7, 5, 5].map(Some),
            "at least one token"
        );
        assert_eq!(index.prompt_bytes, 4 * (1100 + 600 + 700 + 300 + 300));
        let ids: Vec<Vec<u32>> = (0..5)
            .map(|i| {
                let item = index.item(i, &maker).unwrap();
                assert_eq!(item.timestamp_ms, Some(index.timestamps[i]));
                assert_eq!(item.max_tokens, index.max_tokens[i]);
                tok.encode(&item.prompt.text()).unwrap()
            })
            .collect();
        for (i, want) in [1100, 600, 700, 300, 300].into_iter().enumerate() {
            let got = ids[i].len() as i64;
            assert!((got - want).abs() <= 8, "line {i}: {got} tokens for {want}");
        }
        let common = |a: &[u32], b: &[u32]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let shared = common(&ids[0], &ids[2]);
        assert!(
            (500..1000).contains(&shared),
            "hash 1 shared, 2 and 4 not: {shared}"
        );
        assert!(
            common(&ids[0], &ids[1]) < 10,
            "different hash ids, different text"
        );
        assert!(
            common(&ids[3], &ids[4]) < 10,
            "lines without ids have their own text"
        );
        // Blocks of 64 tokens (--isl-block-size 64): lines 0 and 2 share hash 1's 64 tokens
        // only.
        let small = Index::read(
            &p,
            DatasetType::Mooncake,
            10,
            1 << 20,
            3,
            &Select {
                block_tokens: Some(64),
                ..Select::default()
            },
        )
        .unwrap();
        let text = |i| {
            tok.encode(&small.item(i, &maker).unwrap().prompt.text())
                .unwrap()
        };
        let shared = common(&text(0), &text(2));
        assert!(
            (50..100).contains(&shared),
            "one 64-token block shared: {shared}"
        );
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_trace_line_is_refused_for_what_it_lacks_or_asks_too_much() {
        let max = crate::workload::MAX_PROMPT_TOKENS;
        let line = |input: u64| serde_json::json!({"timestamp": 0, "input_length": input, "output_length": 1});
        assert_eq!(trace_line(&line(max)).unwrap().input, max);
        let e = trace_line(&line(max + 1)).unwrap_err();
        assert!(
            matches!(e, RequestError::InputTooLong(n) if n == max + 1),
            "{e:?}"
        );
        let e = trace_line(&serde_json::json!({"input_length": 1})).unwrap_err();
        assert!(matches!(e, RequestError::NoTimestamp), "{e:?}");
        let e = trace_line(&serde_json::json!({"timestamp": 0, "input_length": 1})).unwrap_err();
        assert!(matches!(e, RequestError::Missing("output_length")), "{e:?}");
        let bad = serde_json::json!({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [-1]});
        let e = trace_line(&bad).unwrap_err();
        assert!(matches!(e, RequestError::HashIdsNotIntegers), "{e:?}");
        let bad = serde_json::json!({"timestamp": 0, "input_length": "1", "output_length": 1});
        let e = trace_line(&bad).unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"input_length\": \"1\" is not a whole number of at least 0"
        );
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
