//! Prompts, request bodies and the tokenizer, all prepared before the clock starts (but for
//! the token counts of a file's prompts, taken once the run has sent them, and a large
//! file's requests, built from its lines while the run goes on: [`Stream`]).
//!
//! Synthetic prompts are built as GenAI-Perf builds them: lines of real text (Shakespeare's
//! sonnets, public domain) drawn at random until the token count is reached, then cut to the
//! exact count with the run's tokenizer. Every draw comes from one seeded ChaCha8 generator,
//! so the same `--random-seed` gives byte-identical request bodies and `inputs.json`.
//!
//! The corpus is tokenized once; a prompt is token ids of whole lines and one cut line,
//! decoded to text. Its count is known without encoding it again where the tokenizer keeps
//! lines apart (checked once per tokenizer) and the cut line decodes and encodes back to the
//! same ids; otherwise the whole text is counted. Decoding and building the requests, the
//! costly part, run on every core, in an order fixed by the seed.

mod error;
pub mod files;
pub mod hub;
pub mod media;
pub mod parquet;
mod tokenizer;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value};

pub use crate::api::Prompt;
use crate::http::request::{Target, Template};
use crate::record::Record;
pub use error::{
    At, DatasetError, DatasetWhy, ExtraInputWhy, MediaBudget, MediaError, RequestError,
    TokenizerError, Uncounted, WorkloadError,
};
pub use tokenizer::Tokenizer;

const CORPUS: &str = include_str!("corpus.txt");

/// How requests are generated: the body's shape and the lengths and prompts to draw.
#[derive(Debug, Clone)]
pub struct Gen {
    /// The shape of every request body.
    pub body: crate::api::Body,
    /// Prompt length: mean and standard deviation in tokens.
    pub isl: (u32, u32),
    /// Requested output length (`max_tokens`): mean and standard deviation, if any.
    pub osl: Option<(u32, u32)>,
    /// Distinct prompts to make.
    pub entries: usize,
    /// Shared system-prompt-like prefixes: how many, and their length in tokens.
    pub prefixes: Option<(usize, u32)>,
    /// Seed for every random choice.
    pub seed: u64,
    /// Lengths drawn uniformly from [mean·(1−r), mean·(1+r)] instead of a normal distribution
    /// (vLLM's `--random-range-ratio`): the prompt's r and the output's.
    pub range_ratio: Option<(f64, f64)>,
    /// Inputs per request (embeddings batches; 1 otherwise).
    pub batch: usize,
    /// Images and audio in every chat request.
    pub media: media::MediaSpec,
    /// Queries and passages, for a ranking endpoint.
    pub rankings: Option<RankSpec>,
}

/// What each ranking request carries (AIPerf's `--rankings-*` flags): a query and passages,
/// each count and length drawn from a normal distribution (mean, standard deviation).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RankSpec {
    /// Passages per request (at least 1): `--rankings-passages-mean/-stddev`, or when not
    /// given, `--batch-size-text` passages (GenAI-Perf's rule; 1 by default, AIPerf's).
    pub passages: Option<(f64, f64)>,
    /// Tokens per passage.
    pub passage_tokens: (u32, u32),
    /// Tokens per query.
    pub query_tokens: (u32, u32),
}

/// The most passages one ranking request carries.
pub const MAX_PASSAGES: f64 = 10_000.0;

impl RankSpec {
    /// Passages per request with `batch` inputs a request asked (`--batch-size-text`).
    pub fn passages(&self, batch: usize) -> (f64, f64) {
        self.passages.unwrap_or((batch.max(1) as f64, 0.0))
    }

    /// The tokens `entries` requests take, about (means plus three standard deviations).
    pub fn tokens(&self, entries: u64, batch: usize) -> f64 {
        let hi = |(m, s): (f64, f64)| m + 3.0 * s;
        let f = |(m, s): (u32, u32)| (f64::from(m), f64::from(s));
        let per = hi(f(self.query_tokens))
            + hi(self.passages(batch)).min(MAX_PASSAGES) * hi(f(self.passage_tokens));
        per * entries as f64
    }
}

impl Gen {
    /// A prompt length: around the mean, uniform over the range ratio when one is set (as
    /// vLLM draws it), else normal; at least 1.
    pub fn draw_isl(&self, rng: &mut impl Rng) -> u32 {
        draw_len(rng, self.isl, self.range_ratio.map(|r| r.0))
    }

    /// An output length (`max_tokens`), drawn as [`Gen::draw_isl`] draws prompt lengths.
    pub fn draw_osl(&self, rng: &mut impl Rng) -> Option<u32> {
        Some(draw_len(rng, self.osl?, self.range_ratio.map(|r| r.1)))
    }
}

/// A length around `(mean, stddev)`: uniform over the range ratio `r` when it is above 0,
/// else normal; at least 1.
fn draw_len(rng: &mut impl Rng, (mean, std): (u32, u32), r: Option<f64>) -> u32 {
    match r.filter(|r| *r > 0.0) {
        Some(r) => {
            let (lo, hi) = uniform_range(mean, r);
            rng.random_range(lo..=hi)
        }
        None => sample_len(rng, mean, std),
    }
}

/// The lengths a range ratio `r` spans around `mean`: vLLM's floor(mean·(1−r)) to
/// ceil(mean·(1+r)), at least 1.
pub fn uniform_range(mean: u32, r: f64) -> (u32, u32) {
    let lo = (f64::from(mean) * (1.0 - r)).floor().max(1.0) as u32;
    let hi = (f64::from(mean) * (1.0 + r)).ceil().max(f64::from(lo)) as u32;
    (lo, hi)
}

/// Turns per session at most; a turn's request id is `session × MAX_TURNS + turn`.
pub const MAX_TURNS: u64 = 1024;

/// The longest prompt ringperf prepares, in tokens (longer than any model's context today).
pub const MAX_PROMPT_TOKENS: u64 = 10_000_000;

/// The most prompt tokens one run prepares in all (about 400 MB of text), checked before any
/// is built.
pub const MAX_PLAN_TOKENS: u64 = 100_000_000;

/// How long counting the prompts sent goes on after a stop (see [`Dataset::count_sent`]).
pub const COUNT_AFTER_STOP_NS: u64 = 1_000_000_000;

/// One user turn of a session, prepared in advance (the answers come from the server).
#[derive(Debug, Clone)]
pub struct Turn {
    /// The user's message.
    pub prompt: String,
    /// Its tokens.
    pub isl: u32,
    /// `max_tokens` for the answer.
    pub osl: Option<u32>,
    /// The pause between the previous answer and this turn (ns; 0 for the first turn).
    pub delay_ns: u64,
}

/// A multi-turn session.
#[derive(Debug, Clone)]
pub struct Session {
    /// Its user turns, in order.
    pub turns: Vec<Turn>,
    /// A system message before the first turn (AIPerf's shared system prompt, then the
    /// user's own context), and its tokens.
    pub system: Option<(String, u32)>,
}

/// Multi-turn sessions and what building their requests at run time needs.
#[derive(Debug, Clone)]
pub struct Sessions {
    /// The shape of every turn's body.
    pub body: crate::api::Body,
    /// The head every turn's request shares (headers with the API key: in memory only).
    pub head: Target,
    /// The sessions that runs cycle through.
    pub list: Vec<Session>,
}

impl Sessions {
    /// `inputs.json` for sessions (see [`write_inputs_json`]): one entry per session, a
    /// payload per turn with that turn's user message (the history and the answers are only
    /// known while the run goes on).
    pub fn write_inputs_json(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        write_inputs_json(
            w,
            self.list.iter().map(|s| {
                s.turns.iter().map(|t| {
                    let system = s
                        .system
                        .as_ref()
                        .map(|(text, _)| serde_json::json!({ "role": "system", "content": text }));
                    let user = serde_json::json!({ "role": "user", "content": t.prompt });
                    let messages = system.into_iter().chain([user]).collect();
                    self.body.render(&Prompt::Messages(messages), t.osl)
                })
            }),
        )
    }

    /// Makes `spec.entries` sessions of about `turns` (mean, std) turns each, with pauses of
    /// about `delay` (mean, std, in ns) before every turn but the first.
    /// `system` is (shared system prompt, per-session context) in tokens: the shared one is the
    /// same text in every session, the context each session's own.
    pub fn synthetic(
        spec: &Gen,
        tokenizer: &Tokenizer,
        turns: (f64, f64),
        delay: (f64, f64),
        system: (Option<u32>, Option<u32>),
    ) -> Result<Vec<Session>, WorkloadError> {
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x5e55);
        // Their own streams: asking for them changes no turn's prompt.
        let mut contexts = ChaCha8Rng::seed_from_u64(spec.seed ^ 0xc0de);
        // Pauses come from a stream of their own: asking for them changes no prompt.
        let mut pauses = ChaCha8Rng::seed_from_u64(spec.seed ^ 0xde1a);
        let mut pause = |first: bool| -> u64 {
            if first || delay.0 <= 0.0 && delay.1 <= 0.0 {
                return 0;
            }
            let ns = if delay.1 > 0.0 {
                use rand_distr::Distribution;
                rand_distr::Normal::new(delay.0, delay.1)
                    .expect("finite")
                    .sample(&mut pauses)
            } else {
                delay.0
            };
            ns.max(0.0).round() as u64
        };
        let maker = PromptMaker::new(tokenizer)?;
        let shared = match system.0 {
            Some(n) if n > 0 => maker.prompt(n as usize, &mut contexts)?,
            _ => String::new(),
        };
        let mut drafts = Vec::with_capacity(spec.entries);
        for _ in 0..spec.entries.max(1) {
            let system = match system.1 {
                Some(n) if n > 0 => {
                    let own = maker.prompt(n as usize, &mut contexts)?;
                    Some(if shared.is_empty() {
                        own
                    } else {
                        format!("{shared}\n\n{own}")
                    })
                }
                _ => (!shared.is_empty()).then(|| shared.clone()),
            };
            let system = match system {
                Some(text) => {
                    let n = tokenizer.count(&text)? as u32;
                    Some((text, n))
                }
                None => None,
            };
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
            // Every draw first, in the seed's order (cheap); the text of the turns of all
            // sessions is made afterwards on every core.
            let mut list = Vec::with_capacity(n);
            for k in 0..n {
                let want = spec.draw_isl(&mut rng);
                let draft = maker.draft(want as usize, &mut rng);
                let osl = spec.draw_osl(&mut rng);
                list.push((draft, osl, pause(k == 0)));
            }
            drafts.push((list, system));
        }
        let all: Vec<_> = drafts.iter().flat_map(|(list, _)| list).collect();
        // As a single prompt's text is made: whole lines of the corpus, and only the cut one
        // tokenized again to count.
        let mut turns = par_map(&all, |(draft, osl, delay_ns)| {
            let (prompt, isl) = maker.text(draft)?;
            Ok(Turn {
                prompt,
                isl,
                osl: *osl,
                delay_ns: *delay_ns,
            })
        })?
        .into_iter();
        Ok(drafts
            .into_iter()
            .map(|(list, system)| Session {
                turns: turns.by_ref().take(list.len()).collect(),
                system,
            })
            .collect())
    }
}

/// Writes `inputs.json` in GenAI-Perf's layout, `{"data": [{"payload": [body, …]}, …]}`, one
/// entry a line: the request bodies as sent, streamed (a large dataset's file is never held
/// whole). A body that is not JSON is written as `null`.
pub fn write_inputs_json<P: AsRef<[u8]>>(
    w: &mut dyn std::io::Write,
    entries: impl Iterator<Item = impl IntoIterator<Item = P>>,
) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut w = std::io::BufWriter::new(w);
    w.write_all(b"{\n  \"data\": [")?;
    for (i, payload) in entries.enumerate() {
        w.write_all(if i == 0 { b"\n    " } else { b",\n    " })?;
        w.write_all(b"{\"payload\": [")?;
        for (j, body) in payload.into_iter().enumerate() {
            let body = body.as_ref();
            if j > 0 {
                w.write_all(b", ")?;
            }
            let json = serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok();
            w.write_all(if json { body } else { b"null" })?;
        }
        w.write_all(b"]}")?;
    }
    w.write_all(b"\n  ]\n}\n")?;
    w.flush()
}

/// One prepared request: its bytes and what it asked for.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The complete HTTP request.
    pub template: Template,
    /// Prompt tokens as counted by the run's tokenizer: known when the entry is made
    /// (synthetic prompts, a trace's own lengths), or counted the first time it is asked for.
    isl: std::sync::OnceLock<u32>,
    /// A file's prompt, kept to be counted: a file's lines are counted once a run has sent
    /// them ([`Dataset::count_sent`]), not all before the first request.
    prompt: Option<Box<Prompt>>,
    /// `max_tokens` sent, if any.
    pub requested_osl: Option<u32>,
}

impl Entry {
    /// The prompt's tokens when they are known without counting.
    pub fn known_isl(&self) -> Option<u32> {
        self.isl.get().copied()
    }

    /// The prompt's tokens, counted now if need be (once: the count is kept).
    pub fn isl(&self, tokenizer: &Tokenizer) -> Result<u32, WorkloadError> {
        if let Some(n) = self.known_isl() {
            return Ok(n);
        }
        let n = match self.prompt.as_deref() {
            Some(p) => count_prompt(p, tokenizer)?,
            None => 0,
        };
        Ok(*self.isl.get_or_init(|| n))
    }
}

/// The tokens of a prompt: its text, or the content of every message.
fn count_prompt(p: &Prompt, tokenizer: &Tokenizer) -> Result<u32, WorkloadError> {
    Ok(match p {
        Prompt::Text(t) => tokenizer.count(t)? as u32,
        Prompt::Messages(m) => m
            .iter()
            .flat_map(|x| crate::api::content_texts(x.get("content")))
            .map(|c| tokenizer.count(c))
            .sum::<Result<usize, _>>()? as u32,
        Prompt::Batch(texts) => texts
            .iter()
            .map(|t| tokenizer.count(t))
            .sum::<Result<usize, _>>()? as u32,
    })
}

/// `items` in batches of `n` inputs each (embeddings' `--batch-size-text`): each batch is one
/// request whose prompt is the batch's texts, its tokens their sum. A last, short batch is
/// left out, so that every request carries `n` inputs.
fn batched(items: Vec<files::Item>, n: usize) -> Vec<files::Item> {
    if n <= 1 || items.len() < n {
        return items;
    }
    let mut out = Vec::with_capacity(items.len() / n);
    let mut it = items.into_iter();
    loop {
        let group: Vec<files::Item> = it.by_ref().take(n).collect();
        if group.len() < n {
            return out;
        }
        let tokens = group.iter().map(|i| i.tokens).sum::<Option<u32>>();
        out.push(files::Item {
            prompt: Prompt::Batch(group.into_iter().map(|i| i.prompt.text()).collect()),
            max_tokens: None,
            timestamp_ms: None,
            tokens,
        });
    }
}

/// All prepared requests of a run: held, or for a large file built while the run goes on.
#[derive(Debug)]
pub struct Dataset {
    /// The entries requests cycle through (none when streamed).
    pub entries: Vec<Entry>,
    /// A file too large to hold: its requests are built from their lines as they are sent.
    pub stream: Option<Stream>,
}

/// What building a large file's requests while the run goes on needs.
pub struct Stream {
    index: files::Index,
    /// A trace's block texts come from the corpus.
    maker: PromptMaker<std::sync::Arc<Tokenizer>>,
    body: crate::api::Body,
    head: Target,
    /// `max_tokens` of each line, drawn before the run as for a held file.
    osls: Vec<Option<u32>>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl Stream {
    /// About how many bytes a request's prompt comes to.
    pub fn average_bytes(&self) -> u64 {
        self.index.prompt_bytes / self.index.len().max(1) as u64
    }

    /// Line `i`'s prompt.
    pub fn prompt(&self, i: u32) -> Result<Prompt, WorkloadError> {
        Ok(self.index.item(i as usize, &self.maker)?.prompt)
    }

    /// Line `i`'s request body.
    fn body(&self, i: u32) -> Result<Vec<u8>, WorkloadError> {
        Ok(self.body.render(&self.prompt(i)?, self.osls[i as usize]))
    }

    /// Line `i`'s request (its prompt is counted after the run).
    pub fn entry(&self, i: u32) -> Result<Entry, WorkloadError> {
        Ok(Entry {
            template: Template::post_json(&self.head, &self.body(i)?),
            isl: std::sync::OnceLock::new(),
            prompt: None,
            requested_osl: self.osls[i as usize],
        })
    }
}

/// Parses `--extra-inputs key:value` flags; values are JSON where they parse as JSON
/// (`true`, `5`, `{"a":1}`), otherwise strings, as in GenAI-Perf. A flag that is a JSON
/// object (`{"top_k": 5, "ignore_eos": true}`) gives each of its fields.
pub fn parse_extra_inputs(items: &[String]) -> Result<Map<String, Value>, WorkloadError> {
    let mut map = Map::new();
    for item in items {
        let refuse = |why| WorkloadError::ExtraInput {
            item: item.clone(),
            why,
        };
        // GenAI-Perf's and AIPerf's other form: one JSON object of fields.
        if item.trim_start().starts_with('{') {
            let fields: Map<String, Value> =
                serde_json::from_str(item).map_err(|e| refuse(ExtraInputWhy::NotObject(e)))?;
            map.extend(fields);
            continue;
        }
        let Some((key, raw)) = item.split_once(':') else {
            return Err(refuse(ExtraInputWhy::NotKeyValue));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(refuse(ExtraInputWhy::EmptyKey));
        }
        let raw = raw.trim();
        let value = match serde_json::from_str::<Value>(raw) {
            Ok(v) => v,
            Err(e) if raw.starts_with(['{', '[', '"']) => {
                return Err(refuse(ExtraInputWhy::BadValue(e)))
            }
            Err(_) => Value::String(raw.to_string()),
        };
        map.insert(key.to_string(), value);
    }
    Ok(map)
}

/// Builds synthetic prompts from the corpus, cut to exact token counts, with a tokenizer
/// borrowed (`&Tokenizer`) or shared (`Arc<Tokenizer>`, to build a file's prompts while a
/// run goes on).
pub struct PromptMaker<T: std::ops::Deref<Target = Tokenizer>> {
    tokenizer: T,
    /// The corpus lines, each with its newline, and their ids.
    texts: Vec<String>,
    lines: Vec<Vec<u32>>,
    /// Encoding two corpus lines together gives the ids of each, one after the other, and a
    /// line's ids decode to the line: a prompt's whole lines need neither encoding nor decoding.
    lines_stay_apart: bool,
}

/// Token ids of a prompt: whole corpus lines, then one cut line.
pub struct Draft {
    /// The ids.
    pub ids: Vec<u32>,
    /// The whole lines, by index.
    whole: Vec<u32>,
    /// Where the cut line starts in `ids`.
    cut_at: usize,
}

impl<T: std::ops::Deref<Target = Tokenizer>> PromptMaker<T> {
    /// Tokenizes the corpus once, and checks on every pair of neighbouring lines whether the
    /// tokenizer keeps lines apart.
    pub fn new(tokenizer: T) -> Result<PromptMaker<T>, WorkloadError> {
        let text: Vec<String> = CORPUS
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| format!("{l}\n"))
            .collect();
        let lines = text
            .iter()
            .map(|l| tokenizer.encode(l))
            .collect::<Result<Vec<_>, _>>()?;
        let mut lines_stay_apart = true;
        for i in 0..text.len().saturating_sub(1) {
            let both = tokenizer.encode(&format!("{}{}", text[i], text[i + 1]))?;
            if both[..] != [&lines[i][..], &lines[i + 1][..]].concat()[..]
                || tokenizer.decode(&lines[i])? != text[i]
            {
                lines_stay_apart = false;
                break;
            }
        }
        Ok(PromptMaker {
            tokenizer,
            texts: text,
            lines,
            lines_stay_apart,
        })
    }

    /// Exactly `n` token ids of random corpus lines.
    pub fn tokens(&self, n: usize, rng: &mut impl Rng) -> Vec<u32> {
        self.draft(n, rng).ids
    }

    /// Exactly `n` token ids of random corpus lines, remembering where the cut line starts.
    pub fn draft(&self, n: usize, rng: &mut impl Rng) -> Draft {
        let mut ids = Vec::with_capacity(n + 32);
        let mut whole = Vec::new();
        let mut cut_at = 0;
        while ids.len() < n {
            cut_at = ids.len();
            let i = rng.random_range(0..self.lines.len());
            ids.extend_from_slice(&self.lines[i]);
            whole.push(i as u32);
        }
        // The last line drawn is the one cut (possibly at its very end).
        whole.pop();
        ids.truncate(n);
        Draft { ids, whole, cut_at }
    }

    /// The text of a draft, and how many tokens that text encodes to.
    pub fn text(&self, d: &Draft) -> Result<(String, u32), WorkloadError> {
        let tail = &d.ids[d.cut_at..];
        if self.lines_stay_apart {
            let cut = self.tokenizer.decode(tail)?;
            let mut text = String::with_capacity(d.ids.len() * 5);
            for i in &d.whole {
                text.push_str(&self.texts[*i as usize]);
            }
            text.push_str(&cut);
            if self.tokenizer.encode(&cut)? == tail {
                return Ok((text, d.ids.len() as u32));
            }
            let n = self.tokenizer.count(&text)?;
            return Ok((text, n as u32));
        }
        let text = self.tokenizer.decode(&d.ids)?;
        let n = self.tokenizer.count(&text)?;
        Ok((text, n as u32))
    }

    /// A prompt of exactly `n` tokens (as token ids), decoded to text.
    pub fn prompt(&self, n: usize, rng: &mut impl Rng) -> Result<String, WorkloadError> {
        Ok(self.tokenizer.decode(&self.tokens(n, rng))?)
    }
}

/// `f` over `items` on every core, results in the items' order; the first error wins.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> Result<R, WorkloadError> + Sync,
) -> Result<Vec<R>, WorkloadError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = items.len().div_ceil(threads).max(64);
    if items.len() <= chunk {
        return items.iter().map(&f).collect();
    }
    let f = &f;
    std::thread::scope(|s| {
        let parts: Vec<_> = items
            .chunks(chunk)
            .map(|part| s.spawn(move || part.iter().map(f).collect::<Result<Vec<R>, _>>()))
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for p in parts {
            out.extend(p.join().expect("a preparing thread panicked")?);
        }
        Ok(out)
    })
}

fn sample_len(rng: &mut impl Rng, mean: u32, std: u32) -> u32 {
    if std == 0 {
        return mean.max(1);
    }
    use rand_distr::Distribution;
    let d = rand_distr::Normal::new(mean as f64, std as f64).expect("finite");
    d.sample(rng).round().max(1.0) as u32
}

/// Each request's `max_tokens`: the file's own, else drawn from `--output-tokens-*` (in the
/// requests' order, from the seed).
fn draw_osls(spec: &Gen, own: impl Iterator<Item = Option<u32>>) -> Vec<Option<u32>> {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x0051);
    own.map(|m| m.or_else(|| spec.draw_osl(&mut rng))).collect()
}

impl Dataset {
    /// Prepares `spec.entries` requests for `target`.
    pub fn synthetic(
        spec: &Gen,
        target: &Target,
        tokenizer: &Tokenizer,
    ) -> Result<Dataset, WorkloadError> {
        if let Some(r) = &spec.rankings {
            return Dataset::rankings(spec, r, target, tokenizer);
        }
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
        let maker = PromptMaker::new(tokenizer)?;
        let prefixes = match spec.prefixes {
            Some((n, len)) => (0..n)
                .map(|_| maker.prompt(len as usize, &mut rng))
                .collect::<Result<Vec<_>, _>>()?,
            None => Vec::new(),
        };
        // Every draw first, in the seed's order (cheap); then the costly text on every core.
        // A batch of inputs takes that many prompts per entry.
        let prompts = spec.entries.max(1) * spec.batch.max(1);
        let drafts: Vec<(Draft, Option<usize>, Option<u32>)> = (0..prompts)
            .map(|_| {
                let want = spec.draw_isl(&mut rng);
                let draft = maker.draft(want as usize, &mut rng);
                let prefix = (!prefixes.is_empty()).then(|| rng.random_range(0..prefixes.len()));
                let osl = spec.draw_osl(&mut rng);
                (draft, prefix, osl)
            })
            .collect();
        // Each request's images and audio, drawn after the text in a stream of their own (a
        // run without them draws the same prompts).
        let mut media_rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x004D_4544_4941);
        let media: Vec<Vec<media::Draw>> = drafts
            .iter()
            .map(|_| spec.media.draw(&mut media_rng))
            .collect();
        let work: Vec<_> = drafts.iter().zip(&media).collect();
        let items = par_map(&work, |((draft, prefix, osl), media)| {
            let (text, count) = maker.text(draft)?;
            let (prompt, tokens) = match prefix {
                // Where the prefix meets the prompt the tokenizer may merge: count it all.
                Some(i) => {
                    let p = format!("{}\n{text}", prefixes[*i]);
                    let n = tokenizer.count(&p)? as u32;
                    (p, n)
                }
                None => (text, count),
            };
            let prompt = if media.is_empty() {
                Prompt::Text(prompt)
            } else {
                let parts = media.iter().map(media::Draw::part);
                let parts = parts.collect::<Result<Vec<_>, _>>()?;
                Prompt::Messages(vec![media::message(&prompt, parts)])
            };
            Ok(files::Item {
                prompt,
                max_tokens: *osl,
                timestamp_ms: None,
                tokens: Some(tokens),
            })
        })?;
        Dataset::from_items(spec, target, items)
    }

    /// Prepares `spec.entries` ranking requests: each a query and its passages, drawn in the
    /// seed's order, their text made on every core.
    fn rankings(
        spec: &Gen,
        r: &RankSpec,
        target: &Target,
        tokenizer: &Tokenizer,
    ) -> Result<Dataset, WorkloadError> {
        use rand_distr::Distribution;
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
        let maker = PromptMaker::new(tokenizer)?;
        let drafts: Vec<Vec<Draft>> = (0..spec.entries.max(1))
            .map(|_| {
                let n = match r.passages(spec.batch) {
                    (m, s) if s > 0.0 => rand_distr::Normal::new(m, s)
                        .expect("finite")
                        .sample(&mut rng),
                    (m, _) => m,
                };
                let n = n.round().clamp(1.0, MAX_PASSAGES) as usize;
                let (q, p) = (r.query_tokens, r.passage_tokens);
                let mut d = vec![maker.draft(sample_len(&mut rng, q.0, q.1) as usize, &mut rng)];
                for _ in 0..n {
                    d.push(maker.draft(sample_len(&mut rng, p.0, p.1) as usize, &mut rng));
                }
                d
            })
            .collect();
        let items = par_map(&drafts, |drafts| {
            let mut texts = Vec::with_capacity(drafts.len());
            let mut tokens = 0;
            for d in drafts {
                let (text, count) = maker.text(d)?;
                texts.push(text);
                tokens += count;
            }
            Ok(files::Item {
                prompt: Prompt::Batch(texts),
                max_tokens: None,
                timestamp_ms: None,
                tokens: Some(tokens),
            })
        })?;
        // The passages are the request's own batch: one item, one request.
        let one = Gen {
            batch: 1,
            ..spec.clone()
        };
        Dataset::from_items(&one, target, items)
    }

    /// Prepares one request per item; an item's own `max_tokens` wins over `--output-tokens-*`.
    pub fn from_items(
        spec: &Gen,
        target: &Target,
        items: Vec<files::Item>,
    ) -> Result<Dataset, WorkloadError> {
        let items = batched(items, spec.batch);
        let osls = draw_osls(spec, items.iter().map(|i| i.max_tokens));
        let work: Vec<(&files::Item, Option<u32>)> = items.iter().zip(osls).collect();
        let mut entries = par_map(&work, |(item, osl)| {
            let body = spec.body.render(&item.prompt, *osl);
            Ok(Entry {
                template: Template::post_json(target, &body),
                isl: item
                    .tokens
                    .map(std::sync::OnceLock::from)
                    .unwrap_or_default(),
                prompt: None,
                requested_osl: *osl,
            })
        })?;
        // Counting a prompt costs about a millisecond: a file's are counted once sent.
        for (e, item) in entries.iter_mut().zip(items) {
            if e.known_isl().is_none() {
                e.prompt = Some(Box::new(item.prompt));
            }
        }
        Ok(Dataset {
            entries,
            stream: None,
        })
    }

    /// Prepares the requests of an indexed file: all of them now (on every core) when its
    /// prompts come to at most `hold_up_to` bytes (and [`files::CAPS`]), or else each as the
    /// run sends it ([`Dataset::stream`]). Both draw the same lengths and build the same bytes.
    pub fn from_file(
        spec: &Gen,
        target: &Target,
        index: files::Index,
        tokenizer: std::sync::Arc<Tokenizer>,
        hold_up_to: u64,
    ) -> Result<Dataset, WorkloadError> {
        let maker = PromptMaker::new(tokenizer)?;
        // What a held file may come to is capped whatever the flag says.
        if index.prompt_bytes <= hold_up_to.min(files::CAPS.kept) {
            let lines: Vec<usize> = (0..index.len()).collect();
            let items = par_map(&lines, |&i| index.item(i, &maker))?;
            return Dataset::from_items(spec, target, items);
        }
        let osls = draw_osls(spec, index.max_tokens.iter().copied());
        Ok(Dataset {
            entries: Vec::new(),
            stream: Some(Stream {
                index,
                maker,
                body: spec.body.clone(),
                head: target.clone(),
                osls,
            }),
        })
    }

    /// Requests to cycle through.
    pub fn len(&self) -> usize {
        match &self.stream {
            Some(s) => s.index.len(),
            None => self.entries.len(),
        }
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first request and its prompt's tokens (counted now: a tokenizer that cannot count
    /// a file's text is found before the run, not after it).
    pub fn first(&self, tokenizer: &Tokenizer) -> Result<(Template, u32), WorkloadError> {
        match (&self.stream, self.entries.first()) {
            (Some(s), _) => Ok((
                s.entry(0)?.template,
                count_prompt(&s.prompt(0)?, tokenizer)?,
            )),
            (None, Some(e)) => Ok((e.template.clone(), e.isl(tokenizer)?)),
            (None, None) => Err(WorkloadError::NoRequest),
        }
    }

    /// Fills in the prompt tokens of `records` sent without a count (a file's lines),
    /// counting each entry once, on every core; `announce` is first told how many entries
    /// that is. A prompt the tokenizer cannot count is left without a count, and the error is
    /// returned with how many records it left so. Once `stop` is set (Ctrl-C), counting goes
    /// on for [`COUNT_AFTER_STOP_NS`] at most, and the entries not counted by then stay so,
    /// which is said: a small file is still counted, a large one does not hold the results.
    pub fn count_sent<'a>(
        &self,
        records: impl Iterator<Item = &'a mut Record>,
        tokenizer: &Tokenizer,
        stop: &std::sync::atomic::AtomicBool,
        announce: impl FnOnce(usize),
    ) -> Result<(), Uncounted> {
        let mut records: Vec<&mut Record> = records
            .filter(|r| r.isl.is_none() && (r.entry as usize) < self.len())
            .collect();
        let mut todo: Vec<u32> = records.iter().map(|r| r.entry).collect();
        todo.sort_unstable();
        todo.dedup();
        announce(todo.len());
        let stopped_at = std::sync::OnceLock::new();
        let counts = par_map(&todo, |&i| {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                let now = crate::clock::now_ns();
                // Another thread may have read the clock later and set the mark first.
                if now.saturating_sub(*stopped_at.get_or_init(|| now)) > COUNT_AFTER_STOP_NS {
                    return Ok(None);
                }
            }
            Ok(Some(match &self.stream {
                Some(s) => s.prompt(i).and_then(|p| count_prompt(&p, tokenizer)),
                None => self.entries[i as usize].isl(tokenizer),
            }))
        })
        .expect("errors are kept, not returned");
        let mut uncounted = 0;
        for r in &mut records {
            let at = todo
                .binary_search(&r.entry)
                .expect("every entry is in the list");
            r.isl = counts[at].as_ref().and_then(|c| c.as_ref().ok()).copied();
            uncounted += usize::from(r.isl.is_none());
        }
        let why = counts.into_iter().flatten().find_map(Result::err);
        if why.is_none() && uncounted == 0 {
            return Ok(());
        }
        Err(Uncounted { uncounted, why })
    }

    /// Writes `inputs.json` (see [`write_inputs_json`]): a payload per entry. A large file's
    /// bodies are built again, a few thousand at a time on every core; a line that cannot be
    /// read again (the file changed during the run) is written as `null`, and said on stderr.
    pub fn write_inputs_json(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        let Some(s) = &self.stream else {
            return write_inputs_json(w, self.entries.iter().map(|e| [e.template.body()]));
        };
        let lines: Vec<u32> = (0..self.len() as u32).collect();
        let (mut failed, mut first) = (0usize, None);
        let bodies = lines.chunks(4096).flat_map(|chunk| {
            let built = par_map(chunk, |&i| Ok(s.body(i))).expect("errors are kept");
            built
                .into_iter()
                .map(|b| {
                    b.unwrap_or_else(|e| {
                        failed += 1;
                        first.get_or_insert(e);
                        Vec::new()
                    })
                })
                .collect::<Vec<_>>()
        });
        write_inputs_json(w, bodies.map(|b| [b]))?;
        if let Some(e) = first {
            crate::redact::say!(
                "ringperf: inputs.json: {failed} request body(ies) written as null: {e}"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The count a prompt is given without encoding it is the count of encoding it, for every
    /// length drawn (the exact-count guarantee), and the fast path is the one taken.
    #[test]
    fn prompt_counts_equal_the_tokenizers_count_of_the_text() {
        let tok = Tokenizer::embedded().unwrap();
        let maker = PromptMaker::new(&tok).unwrap();
        assert!(
            maker.lines_stay_apart,
            "the embedded tokenizer keeps lines apart"
        );
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut fast = 0;
        for n in (1..=1200).step_by(7) {
            let d = maker.draft(n, &mut rng);
            assert_eq!(d.ids.len(), n);
            let (text, count) = maker.text(&d).unwrap();
            assert_eq!(
                count as usize,
                tok.count(&text).unwrap(),
                "{n} tokens: {text:?}"
            );
            fast += usize::from(count as usize == n);
        }
        assert!(fast > 150, "{fast} of 172 prompts counted without encoding");
        // A tokenizer that did not keep lines apart would be counted in full, not trusted.
        let slow = PromptMaker {
            lines_stay_apart: false,
            ..PromptMaker::new(&tok).unwrap()
        };
        let d = slow.draft(50, &mut rng);
        let (text, count) = slow.text(&d).unwrap();
        assert_eq!(count as usize, tok.count(&text).unwrap());
    }

    #[test]
    fn inputs_json_holds_every_body_and_null_for_one_that_is_not_json() {
        let write = |entries: Vec<Vec<&[u8]>>| {
            let mut out = Vec::new();
            write_inputs_json(&mut out, entries.into_iter()).unwrap();
            serde_json::from_slice::<Value>(&out).unwrap()
        };
        let v = write(vec![
            vec![br#"{"a":1}"#],
            vec![br#"{"b":[2]}"#, b"not json"],
        ]);
        assert_eq!(
            v,
            serde_json::json!({"data": [{"payload": [{"a": 1}]}, {"payload": [{"b": [2]}, null]}]})
        );
        assert_eq!(write(vec![]), serde_json::json!({"data": []}));
    }

    /// After a stop, a small file's prompts are still counted (the stop allows a second of
    /// counting), each distinct entry once, and what is counted is said first.
    #[test]
    fn a_files_prompts_are_counted_after_the_run_even_after_a_stop() {
        use crate::api::{Body, Kind};
        let tok = Tokenizer::embedded().unwrap();
        let spec = Gen {
            body: Body {
                model: "m".into(),
                kind: Kind::Completions,
                streaming: false,
                include_usage: false,
                min_tokens_too: false,
                legacy_max_tokens: false,
                extra: Map::new(),
                template: None,
            },
            isl: (1, 0),
            osl: None,
            entries: 2,
            prefixes: None,
            seed: 1,
            range_ratio: None,
            batch: 1,
            media: Default::default(),
            rankings: None,
        };
        let target = Target {
            host: "127.0.0.1:1".into(),
            path: "/v1/completions".into(),
            headers: Vec::new(),
            streaming: false,
        };
        let texts = [
            "one two three",
            "The quick brown fox jumps over the lazy dog.",
        ];
        let items = texts
            .iter()
            .map(|t| files::Item {
                prompt: Prompt::Text(t.to_string()),
                max_tokens: None,
                timestamp_ms: None,
                tokens: None,
            })
            .collect();
        let d = Dataset::from_items(&spec, &target, items).unwrap();
        let mut records: Vec<Record> = [0, 1, 1]
            .iter()
            .map(|&e| Record::new(0, 0, crate::record::Phase::Profiling, e, None))
            .collect();
        let stop = std::sync::atomic::AtomicBool::new(true);
        let mut announced = None;
        d.count_sent(records.iter_mut(), &tok, &stop, |n| announced = Some(n))
            .unwrap();
        assert_eq!(announced, Some(2), "two distinct entries");
        let want: Vec<Option<u32>> = [0, 1, 1]
            .iter()
            .map(|&i| Some(tok.count(texts[i]).unwrap() as u32))
            .collect();
        assert_eq!(records.iter().map(|r| r.isl).collect::<Vec<_>>(), want);
    }

    /// A streamed file builds the same bodies as the held one; a line lost from the file
    /// after it was indexed is an error when its request is built, and `null` in
    /// `inputs.json`, which is still written whole.
    #[test]
    fn a_streamed_file_builds_what_a_held_one_holds_and_survives_a_cut_file() {
        use crate::api::{Body, Kind};
        let tok = std::sync::Arc::new(Tokenizer::embedded().unwrap());
        let spec = Gen {
            body: Body {
                model: "m".into(),
                kind: Kind::Chat,
                streaming: true,
                include_usage: true,
                min_tokens_too: false,
                legacy_max_tokens: false,
                extra: Map::new(),
                template: None,
            },
            isl: (1, 0),
            osl: Some((9, 3)),
            entries: 3,
            prefixes: None,
            seed: 4,
            range_ratio: None,
            batch: 1,
            media: Default::default(),
            rankings: None,
        };
        let target = Target {
            host: "127.0.0.1:1".into(),
            path: "/v1/chat/completions".into(),
            headers: Vec::new(),
            streaming: true,
        };
        let path =
            std::env::temp_dir().join(format!("ringperf-stream-{}.jsonl", std::process::id()));
        let lines = [
            "{\"text\": \"one\"}",
            "{\"text\": \"two\", \"max_tokens\": 2}",
            "{\"text\": \"three\"}",
        ];
        std::fs::write(&path, lines.join("\n")).unwrap();
        let read = || {
            files::Index::read(
                &path,
                files::DatasetType::Jsonl,
                10,
                1 << 20,
                4,
                &files::Select::default(),
            )
            .unwrap()
        };
        let held = Dataset::from_file(&spec, &target, read(), tok.clone(), u64::MAX).unwrap();
        let streamed = Dataset::from_file(&spec, &target, read(), tok.clone(), 0).unwrap();
        assert!(held.stream.is_none() && streamed.stream.is_some());
        let inputs = |d: &Dataset| {
            let mut out = Vec::new();
            d.write_inputs_json(&mut out).unwrap();
            serde_json::from_slice::<Value>(&out).unwrap()
        };
        assert_eq!(inputs(&held), inputs(&streamed));
        let s = streamed.stream.as_ref().unwrap();
        for (i, e) in held.entries.iter().enumerate() {
            let built = s.entry(i as u32).unwrap();
            assert_eq!(built.template.body(), e.template.body(), "line {i}");
            assert_eq!(built.requested_osl, e.requested_osl);
        }
        // The last line cut off: its request is an error, its payload null.
        std::fs::write(&path, lines[..2].join("\n")).unwrap();
        let e = s.entry(2).unwrap_err().to_string();
        assert!(e.contains(":3: cannot read the line again"), "{e}");
        let v = inputs(&streamed);
        assert_eq!(v["data"].as_array().unwrap().len(), 3);
        assert_eq!(v["data"][2]["payload"][0], Value::Null);
        assert_eq!(v["data"][1], inputs(&held)["data"][1]);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn par_map_keeps_the_order_and_the_first_error() {
        let items: Vec<u32> = (0..1000).collect();
        let out = par_map(&items, |x| Ok(x * 2)).unwrap();
        assert_eq!(out, (0..1000).map(|x| x * 2).collect::<Vec<_>>());
        let e = par_map(&items, |x| {
            if *x >= 700 {
                Err(WorkloadError::ExtraInput {
                    item: x.to_string(),
                    why: ExtraInputWhy::EmptyKey,
                })
            } else {
                Ok(*x)
            }
        })
        .unwrap_err();
        assert!(e.to_string().contains("\"700\""), "{e}");
    }

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
        // The JSON-object form gives each field, not one named `{"top_k"`.
        let m = parse_extra_inputs(&[r#"{"top_k": 5, "ignore_eos": true}"#.into()]).unwrap();
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m["top_k"], serde_json::json!(5));
        assert_eq!(m["ignore_eos"], Value::Bool(true));
        let e = parse_extra_inputs(&["{\"top_k\": ".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a JSON object"), "{e}");
    }
}
