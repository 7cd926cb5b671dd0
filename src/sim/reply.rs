//! The simulator's replies to generation requests: what a request asked for, the output
//! length and pacing, and every event (or the whole body) of the answer, for each API kind.

use std::io::Write;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use rand::Rng;

use super::batch::Permit;
use super::counters::Gauge;
use super::server::{respond, Ctx};
use super::WORDS;
use crate::api::Kind;
use crate::clock::now_ns;
use crate::net::Conn;
use crate::otlp::{Out, Phases};

/// The shape of a generation's answer beyond the OpenAI ones.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Native {
    /// None: the OpenAI kind's.
    OpenAi,
    /// Triton's generate extension: `text_output` events, no usage, no `[DONE]`.
    Triton,
    /// Hugging Face TGI's `/generate` and `/generate_stream`: a `token` per event, the last
    /// with `details` (`generated_tokens`), no `[DONE]`; a whole answer's
    /// `generated_text`.
    Tgi,
}

/// What a generation request asked for.
pub(super) struct Gen {
    api: Kind,
    native: Native,
    stream: bool,
    usage: bool,
    max_tokens: u32,
    min_tokens: u32,
    ignore_eos: bool,
    prompt_tokens: u64,
    /// For the prefix cache: after each message (chat) or the whole prompt, the hash of the
    /// prompt so far and its length in characters.
    prefixes: Vec<(u64, usize)>,
    /// The client's `X-Request-ID`: the span's request id is the response's prefix and it,
    /// as vLLM's is.
    pub(super) request_id: Option<String>,
}

/// FNV-1a over `bytes`, continuing from `h`.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The running hash and length after each of `parts`.
fn prefixes<'a>(parts: impl Iterator<Item = &'a [u8]>) -> Vec<(u64, usize)> {
    let (mut h, mut len) = (0xcbf2_9ce4_8422_2325u64, 0usize);
    parts
        .map(|p| {
            // A separator, so that ["ab", "c"] and ["a", "bc"] differ.
            h = fnv(fnv(h, p), &[0xff]);
            len += p.len();
            (h, len)
        })
        .collect()
}

/// The fields of a generation request the simulator reads; everything else is skipped.
#[derive(serde::Deserialize)]
pub(super) struct GenRequest<'a> {
    #[serde(borrow, default)]
    pub(super) model: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    max_completion_tokens: Option<u64>,
    #[serde(default)]
    min_tokens: Option<u64>,
    #[serde(default)]
    ignore_eos: bool,
    #[serde(borrow, default)]
    messages: Option<Vec<MessageIn<'a>>>,
    #[serde(borrow, default)]
    prompt: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    input: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    max_output_tokens: Option<u64>,
}

#[derive(serde::Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

#[derive(serde::Deserialize)]
struct MessageIn<'a> {
    #[serde(borrow, default)]
    content: Option<&'a serde_json::value::RawValue>,
}

pub(super) fn read_gen(r: &GenRequest<'_>, api: Kind, default_max: u32) -> Gen {
    let clamp = |n: u64| n.min(u64::from(u32::MAX)) as u32;
    let parts: Vec<&[u8]> = match api {
        Kind::Chat => r
            .messages
            .iter()
            .flatten()
            .filter_map(|m| m.content.map(|c| c.get().as_bytes()))
            .collect(),
        Kind::Responses | Kind::Embeddings => {
            r.input.map(|p| p.get().as_bytes()).into_iter().collect()
        }
        // Rankings and images are answered before a generation is read.
        Kind::NimRankings | Kind::TeiRankings | Kind::CohereRankings | Kind::ImageGeneration => {
            Vec::new()
        }
        Kind::Completions | Kind::Template => {
            r.prompt.map(|p| p.get().as_bytes()).into_iter().collect()
        }
    };
    let prompt_chars: usize = parts.iter().map(|p| p.len()).sum();
    let max_tokens = r
        .max_tokens
        .or(r.max_completion_tokens)
        .or(r.max_output_tokens)
        .map_or(default_max, clamp)
        .max(1);
    Gen {
        api,
        native: Native::OpenAi,
        stream: r.stream,
        usage: r.stream_options.as_ref().is_some_and(|o| o.include_usage),
        max_tokens,
        min_tokens: r.min_tokens.map_or(0, clamp).min(max_tokens),
        ignore_eos: r.ignore_eos,
        // An estimate (about four characters a token); the simulator carries no tokenizer.
        prompt_tokens: prompt_chars.div_ceil(4) as u64,
        prefixes: prefixes(parts.into_iter()),
        request_id: None,
    }
}

/// What is wrong with a native (Triton, TGI) request's body.
#[derive(Debug, thiserror::Error)]
pub(super) enum BadBody {
    /// Not JSON.
    #[error("invalid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// Without the field that holds the prompt.
    #[error("{0} is missing")]
    Missing(&'static str),
}

/// A request to Triton's generate extension (`/v2/models/{model}/generate[_stream]`), as
/// GenAI-Perf sends it to each backend: `text_input`, and the length as `max_tokens` (TRT-LLM,
/// generic) or inside the `sampling_parameters` string (vLLM's backend); values may come as
/// one-element arrays. `Err` says what is wrong with the body.
pub(super) fn read_triton(body: &[u8], stream: bool, default_max: u32) -> Result<Gen, BadBody> {
    use serde_json::Value;
    let v: Value = serde_json::from_slice(body).map_err(BadBody::Json)?;
    let one = |k: &str| -> Option<Value> {
        match v.get(k)? {
            Value::Array(a) => a.first().cloned(),
            x => Some(x.clone()),
        }
    };
    let text = one("text_input")
        .and_then(|t| t.as_str().map(str::len))
        .ok_or(BadBody::Missing("text_input"))?;
    let as_u64 = |x: &Value| x.as_u64().or_else(|| x.as_str()?.trim().parse().ok());
    let sampling: Option<Value> = one("sampling_parameters")
        .and_then(|s| s.as_str().and_then(|s| serde_json::from_str(s).ok()));
    let max = one("max_tokens")
        .as_ref()
        .and_then(as_u64)
        .or_else(|| sampling.as_ref()?.get("max_tokens").and_then(as_u64))
        .map_or(default_max, |n| n.min(u64::from(u32::MAX)) as u32)
        .max(1);
    let min = one("min_length")
        .as_ref()
        .and_then(as_u64)
        .or_else(|| sampling.as_ref()?.get("min_tokens").and_then(as_u64))
        .map_or(0, |n| n.min(u64::from(max)) as u32);
    let wants_stream = one("stream").and_then(|s| s.as_bool()).unwrap_or(false);
    Ok(Gen {
        api: Kind::Template,
        native: Native::Triton,
        stream: stream || wants_stream,
        usage: false,
        max_tokens: max,
        min_tokens: min,
        ignore_eos: false,
        prompt_tokens: text.div_ceil(4) as u64,
        prefixes: Vec::new(),
        request_id: None,
    })
}

/// A request to TGI's `/generate` (`stream`: `/generate_stream`): `inputs`, and the length as
/// `parameters.max_new_tokens`. `Err` says what is wrong with the body.
pub(super) fn read_tgi(body: &[u8], stream: bool, default_max: u32) -> Result<Gen, BadBody> {
    use serde_json::Value;
    let v: Value = serde_json::from_slice(body).map_err(BadBody::Json)?;
    let text = v
        .get("inputs")
        .and_then(Value::as_str)
        .ok_or(BadBody::Missing("inputs"))?
        .len();
    let max = v
        .pointer("/parameters/max_new_tokens")
        .and_then(Value::as_u64)
        .map_or(default_max, |n| n.min(u64::from(u32::MAX)) as u32)
        .max(1);
    Ok(Gen {
        api: Kind::Template,
        native: Native::Tgi,
        stream: stream || v.get("stream").and_then(Value::as_bool).unwrap_or(false),
        usage: false,
        max_tokens: max,
        min_tokens: 0,
        ignore_eos: false,
        prompt_tokens: text.div_ceil(4) as u64,
        prefixes: Vec::new(),
        request_id: None,
    })
}

/// Output length: max_tokens, or earlier at a random EOS after min_tokens.
fn output_len(gen: &Gen, eos_p: f64, min_tokens_too: bool, rng: &mut impl Rng) -> u32 {
    if gen.ignore_eos || eos_p <= 0.0 {
        return gen.max_tokens;
    }
    let mut n = if min_tokens_too {
        gen.min_tokens.max(1)
    } else {
        1
    };
    while n < gen.max_tokens && !rng.random_bool(eos_p) {
        n += 1;
    }
    n
}

fn itl_now(ctx: &Ctx, base: u64) -> u64 {
    let cap = ctx.batch.cap();
    if cap == 0 {
        return base;
    }
    let load = ctx.batch.active() as f64 / cap as f64;
    (base as f64 * (1.0 + ctx.args.itl_growth * load)) as u64
}

pub(super) async fn generate(
    ctx: &Rc<Ctx>,
    stream: &mut Conn,
    out: &mut Vec<u8>,
    gen: Gen,
    close: bool,
    arrived: u64,
) -> bool {
    let (n_out, ttft, itl) = {
        let mut rng = ctx.rng.borrow_mut();
        let n = output_len(
            &gen,
            ctx.args.eos_probability,
            !ctx.args.ignore_min_tokens,
            &mut *rng,
        );
        (
            n,
            ctx.args.ttft.sample(&mut *rng),
            ctx.args.itl.sample(&mut *rng),
        )
    };
    // Prefill: every prompt token but those of the longest prefix cached before.
    let cached_chars = if ctx.args.prefix_cache {
        let mut seen = ctx
            .counters
            .prefixes
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let hit = gen
            .prefixes
            .iter()
            .rev()
            .find(|(h, _)| seen.contains(h))
            .map_or(0, |(_, len)| *len);
        if seen.len() > 1 << 20 {
            // A bound on memory: start again, as a full cache evicts.
            seen.clear();
        }
        seen.extend(gen.prefixes.iter().map(|(h, _)| *h));
        hit
    } else {
        0
    };
    let cached_tokens = (cached_chars / 4) as u64;
    let ttft =
        ttft + ctx.args.prefill_per_token_ns * gen.prompt_tokens.saturating_sub(cached_tokens);
    let id = ctx.next_id.get();
    ctx.next_id.set(id + 1);
    let id = format!("{}-{:x}-{id:x}", gen.api.id_prefix(), ctx.shard);
    let created = crate::clock::unix_time_secs() as u64;
    let finish = if n_out == gen.max_tokens {
        "length"
    } else {
        "stop"
    };
    let object = gen.api.object();
    // The first event (or the whole body) tells when the request reached the kernel, so the
    // client can check its own send stamps against it.
    let mut arrival = if ctx.args.stamps {
        format!(r#","x_ringperf_arrived_ns":{arrived}"#)
    } else {
        String::new()
    };

    if gen.stream {
        out.clear();
        let _ = write!(
            out,
            "HTTP/1.1 200 OK\r\nserver: ringperf-sim\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n{}\r\n",
            if close { "connection: close\r\n" } else { "" }
        );
        if gen.api == Kind::Responses {
            let ev = format!(
                r#"{{"type":"response.created","response":{{"id":"{id}","object":"response","created_at":{created},"status":"in_progress","model":{}}}{}}}"#,
                ctx.model_json,
                std::mem::take(&mut arrival)
            );
            push_named_event(out, "response.created", ev.as_bytes());
        }
        if gen.api == Kind::Chat {
            // vLLM's first chunk: the role, with empty content (not a content event).
            let ev = format!(
                r#"{{"id":"{id}","object":"chat.completion.chunk","created":{created},"model":{},"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},"finish_reason":null}}]{}}}"#,
                ctx.model_json,
                std::mem::take(&mut arrival)
            );
            push_event(out, ev.as_bytes());
        }
        // The head and the role chunk go out with the first token: one write instead of two,
        // which keeps the simulator's per-request cost low when many requests arrive at once.
    }
    let waiting = Gauge::up(&ctx.counters.waiting);
    let permit: Permit = ctx.batch.admit().await;
    // Then a place among the requests prefilling, until the first token.
    let mut prefilling = Some(ctx.prefill.admit().await);
    drop(waiting);
    let _running = Gauge::up(&ctx.counters.running);
    // A request that got its places at once starts at its arrival; a queued one when admitted.
    let queued = permit.queued || prefilling.as_ref().is_some_and(|p| p.queued);
    let start = if queued { now_ns() } else { arrived };
    let mut deadline = start + ttft;
    let tpc = ctx.args.tokens_per_chunk;
    let mut sent = 0u32;
    let mut text = String::new();
    let mut word = (id.len() + n_out as usize) % WORDS.len();
    // What every event of this response shares, formatted once: the part before the new
    // text, and the part right after it.
    let (prefix, after_text) = match gen.api {
        _ if gen.native == Native::Triton => (
            format!(
                r#"{{"model_name":{},"model_version":"1","text_output":""#,
                ctx.model_json
            ),
            r#"""#,
        ),
        _ if gen.native == Native::Tgi => (
            r#"{"index":0,"token":{"id":0,"text":""#.to_string(),
            r#"","logprob":0.0,"special":false},"generated_text":null,"details":"#,
        ),
        Kind::Chat => (
            format!(
                r#"{{"id":"{id}","object":"chat.completion.chunk","created":{created},"model":{},"choices":[{{"index":0,"delta":{{"content":""#,
                ctx.model_json
            ),
            r#""},"finish_reason":"#,
        ),
        Kind::Responses => (
            format!(
                r#"{{"type":"response.output_text.delta","item_id":"msg-{id}","output_index":0,"content_index":0,"delta":""#
            ),
            r#"""#,
        ),
        _ => (
            format!(
                r#"{{"id":"{id}","object":"{object}","created":{created},"model":{},"choices":[{{"index":0,"text":""#,
                ctx.model_json
            ),
            r#"","finish_reason":"#,
        ),
    };
    let mut ev: Vec<u8> = Vec::with_capacity(prefix.len() + 128);
    // When the first and the last token were made (the span's phases end there).
    let (mut first_ns, mut last_ns) = (None, start);
    while sent < n_out {
        let n = tpc.min(n_out - sent);
        ctx.timer.sleep_until(deadline).await;
        // The first token ends the prefill.
        drop(prefilling.take());
        // The clock is read for the first and the last event only, not for each.
        if first_ns.is_none() || sent + n == n_out {
            last_ns = now_ns();
            first_ns.get_or_insert(last_ns);
        }
        ctx.counters.written(deadline);
        ev.clear();
        ev.extend_from_slice(prefix.as_bytes());
        for _ in 0..n {
            let w = WORDS[word];
            if gen.stream {
                ev.extend_from_slice(w.as_bytes());
            } else {
                text.push_str(w);
            }
            word = (word + 1) % WORDS.len();
        }
        sent += n;
        ctx.counters
            .tokens
            .fetch_add(u64::from(n), Ordering::Relaxed);
        if gen.stream {
            ev.extend_from_slice(after_text.as_bytes());
            if gen.native == Native::Tgi {
                if sent == n_out {
                    let _ = write!(
                        ev,
                        r#"{{"finish_reason":"length","generated_tokens":{n_out}}}"#
                    );
                } else {
                    ev.extend_from_slice(b"null");
                }
                ev.extend_from_slice(std::mem::take(&mut arrival).as_bytes());
            } else if gen.native == Native::Triton {
                ev.extend_from_slice(std::mem::take(&mut arrival).as_bytes());
            } else if gen.api != Kind::Responses {
                if sent == n_out {
                    let _ = write!(ev, "\"{finish}\"");
                } else {
                    ev.extend_from_slice(b"null");
                }
                ev.extend_from_slice(b"}]");
                ev.extend_from_slice(std::mem::take(&mut arrival).as_bytes());
            }
            if ctx.args.stamps {
                let _ = write!(ev, r#","x_ringperf_sent_ns":{}}}"#, now_ns());
            } else {
                ev.push(b'}');
            }
            if gen.api == Kind::Responses {
                push_named_event(out, "response.output_text.delta", &ev);
            } else {
                push_event(out, &ev);
            }
            if !send(stream, out).await {
                return false;
            }
            out.clear();
            ctx.counters.events.fetch_add(1, Ordering::Relaxed);
        }
        if sent < n_out {
            deadline += itl_now(ctx, itl) * u64::from(tpc.min(n_out - sent));
        }
    }
    ctx.counters.finished.fetch_add(1, Ordering::Relaxed);
    // The request is finished with its last token, as vLLM's engine finishes it.
    Account {
        arrived,
        start,
        first_ns: first_ns.unwrap_or(last_ns),
        last_ns,
        tokens: (gen.prompt_tokens, u64::from(n_out)),
        id_prefix: gen.api.id_prefix(),
        request_id: gen.request_id.as_deref().unwrap_or(&id),
    }
    .close(ctx);
    let usage = if ctx.args.prefix_cache {
        format!(
            r#"{{"prompt_tokens":{},"completion_tokens":{n_out},"total_tokens":{},"prompt_tokens_details":{{"cached_tokens":{cached_tokens}}}}}"#,
            gen.prompt_tokens,
            gen.prompt_tokens + u64::from(n_out)
        )
    } else {
        format!(
            r#"{{"prompt_tokens":{},"completion_tokens":{n_out},"total_tokens":{}}}"#,
            gen.prompt_tokens,
            gen.prompt_tokens + u64::from(n_out)
        )
    };
    let responses_usage = format!(
        r#"{{"input_tokens":{},"output_tokens":{n_out},"total_tokens":{}}}"#,
        gen.prompt_tokens,
        gen.prompt_tokens + u64::from(n_out)
    );
    if gen.stream {
        if gen.native != Native::OpenAi {
            // Triton and TGI end the stream with the last event.
        } else if gen.api == Kind::Responses {
            let ev = format!(
                r#"{{"type":"response.completed","response":{{"id":"{id}","object":"response","created_at":{created},"status":"completed","model":{},"usage":{responses_usage}}}}}"#,
                ctx.model_json
            );
            push_named_event(out, "response.completed", ev.as_bytes());
        } else {
            if gen.usage {
                let ev = format!(
                    r#"{{"id":"{id}","object":"{object}{}","created":{created},"model":{},"choices":[],"usage":{usage}}}"#,
                    if gen.api == Kind::Chat { ".chunk" } else { "" },
                    ctx.model_json
                );
                push_event(out, ev.as_bytes());
            }
            push_event(out, b"[DONE]");
        }
        out.extend_from_slice(b"0\r\n\r\n");
        send(stream, out).await && !close
    } else {
        let b = match gen.api {
            _ if gen.native == Native::Triton => format!(
                r#"{{"model_name":{},"model_version":"1","text_output":"{text}"{arrival}}}"#,
                ctx.model_json
            ),
            _ if gen.native == Native::Tgi => format!(
                r#"{{"generated_text":"{text}","details":{{"finish_reason":"length","generated_tokens":{n_out}}}{arrival}}}"#
            ),
            Kind::Chat => format!(
                r#"{{"id":"{id}","object":"{object}","created":{created},"model":{},"choices":[{{"index":0,"message":{{"role":"assistant","content":"{text}"}},"finish_reason":"{finish}"}}],"usage":{usage}{arrival}}}"#,
                ctx.model_json
            ),
            Kind::Responses => format!(
                r#"{{"id":"{id}","object":"response","created_at":{created},"status":"completed","model":{},"output":[{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"{text}"}}]}}],"usage":{responses_usage}{arrival}}}"#,
                ctx.model_json
            ),
            _ => format!(
                r#"{{"id":"{id}","object":"{object}","created":{created},"model":{},"choices":[{{"index":0,"text":"{text}","finish_reason":"{finish}"}}],"usage":{usage}{arrival}}}"#,
                ctx.model_json
            ),
        };
        respond(stream, out, 200, "application/json", b.as_bytes(), close).await
    }
}

/// What the simulator tells of a request it generated for, as vLLM does: the times of its
/// arrival, its scheduling and its first and last token (`CLOCK_MONOTONIC` ns).
struct Account<'a> {
    arrived: u64,
    start: u64,
    first_ns: u64,
    last_ns: u64,
    tokens: (u64, u64),
    /// The span's request id is the response's prefix and the client's `X-Request-ID` (or
    /// the simulator's own id), as vLLM's is; written only when a span goes out.
    id_prefix: &'static str,
    request_id: &'a str,
}

impl Account<'_> {
    /// The request's phases into the histograms and, with `--otlp-traces-endpoint`, a span.
    fn close(self, ctx: &Ctx) {
        let end = self.last_ns;
        let phases = Phases {
            queue_ns: Some(self.start - self.arrived),
            prefill_ns: Some(self.first_ns.saturating_sub(self.start)),
            decode_ns: Some(self.last_ns - self.first_ns),
            inference_ns: Some(self.last_ns.saturating_sub(self.start)),
            ttft_ns: Some(self.first_ns.saturating_sub(self.arrived)),
            e2e_ns: Some(end - self.arrived),
        };
        ctx.counters.phases.record(&phases);
        if let Some(to) = &ctx.spans {
            let unix = |t: u64| (t as i64 + ctx.unix_offset_ns) as u64;
            super::trace::queue(
                to,
                Out {
                    request_id: format!("{}-{}", self.id_prefix, self.request_id),
                    start_unix_ns: unix(self.arrived),
                    end_unix_ns: unix(end),
                    phases,
                    tokens: self.tokens,
                },
            );
        }
    }
}

/// A request answered whole after one compute time (a TTFT draw), holding a place in the
/// batch meanwhile (embeddings, rankings).
async fn compute(ctx: &Rc<Ctx>, arrived: u64) {
    let ttft = ctx.args.ttft.sample(&mut *ctx.rng.borrow_mut());
    {
        let _waiting = Gauge::up(&ctx.counters.waiting);
        let permit = ctx.batch.admit().await;
        let start = if permit.queued { now_ns() } else { arrived };
        drop(_waiting);
        let _running = Gauge::up(&ctx.counters.running);
        ctx.timer.sleep_until(start + ttft).await;
        ctx.counters.written(start + ttft);
    }
    ctx.counters.finished.fetch_add(1, Ordering::Relaxed);
}

/// `/v1/embeddings`: a small fixed vector after the TTFT (the compute time).
pub(super) async fn embed(
    ctx: &Rc<Ctx>,
    stream: &mut Conn,
    out: &mut Vec<u8>,
    r: &GenRequest<'_>,
    close: bool,
    arrived: u64,
) -> bool {
    let tokens = r.input.map_or(0, |i| i.get().len()).div_ceil(4);
    compute(ctx, arrived).await;
    let b = format!(
        r#"{{"object":"list","data":[{{"object":"embedding","index":0,"embedding":[0.125,-0.25,0.5,0.0625,-0.5,0.25,0.375,-0.125]}}],"model":{},"usage":{{"prompt_tokens":{tokens},"total_tokens":{tokens}}}{}}}"#,
        ctx.model_json,
        if ctx.args.stamps {
            format!(r#","x_ringperf_arrived_ns":{arrived}"#)
        } else {
            String::new()
        }
    );
    respond(stream, out, 200, "application/json", b.as_bytes(), close).await
}

/// A ranking endpoint (`api`): a score per passage after the TTFT (the compute time), in the
/// shape of TEI's array, NIM's `rankings` or Cohere's `results`, best first.
pub(super) async fn rank(
    ctx: &Rc<Ctx>,
    stream: &mut Conn,
    out: &mut Vec<u8>,
    body: &[u8],
    api: Kind,
    close: bool,
    arrived: u64,
) -> bool {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let list = match api {
        Kind::NimRankings => "/passages",
        Kind::TeiRankings => "/texts",
        _ => "/documents",
    };
    let n = v
        .pointer(list)
        .and_then(serde_json::Value::as_array)
        .map_or(0, Vec::len);
    if v.get("query").is_none() || n == 0 {
        let b = serde_json::json!({
            "error": format!("a ranking needs a query and a non-empty {}", &list[1..])
        })
        .to_string();
        return respond(stream, out, 400, "application/json", b.as_bytes(), close).await;
    }
    compute(ctx, arrived).await;
    let score = |i: usize| 1.0 / (i as f64 + 1.0);
    let items: Vec<String> = (0..n)
        .map(|i| match api {
            Kind::NimRankings => format!(r#"{{"index":{i},"logit":{}}}"#, score(i)),
            Kind::TeiRankings => format!(r#"{{"index":{i},"score":{}}}"#, score(i)),
            _ => format!(r#"{{"index":{i},"relevance_score":{}}}"#, score(i)),
        })
        .collect();
    let items = items.join(",");
    let b = match api {
        Kind::NimRankings => format!(r#"{{"rankings":[{items}]}}"#),
        Kind::TeiRankings => format!("[{items}]"),
        _ => format!(
            r#"{{"id":"rerank-{arrived}","model":{},"results":[{items}]}}"#,
            ctx.model_json
        ),
    };
    respond(stream, out, 200, "application/json", b.as_bytes(), close).await
}

/// The one image the simulator draws: a 1 × 1 PNG, as base64.
const PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
/// Images asked in one request past this many are refused, as OpenAI's API does past 10.
const MAX_IMAGES: u64 = 10;

/// `/v1/images/generations`: `n` images (1 when not asked) after the TTFT (the compute time),
/// in OpenAI's shape, as base64 unless `response_format` asks for URLs.
pub(super) async fn draw(
    ctx: &Rc<Ctx>,
    stream: &mut Conn,
    out: &mut Vec<u8>,
    body: &[u8],
    close: bool,
    arrived: u64,
) -> bool {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let n = v.get("n").map_or(Some(1), serde_json::Value::as_u64);
    let prompt = v.get("prompt").and_then(serde_json::Value::as_str);
    let (Some(n @ 1..=MAX_IMAGES), Some(prompt)) = (n, prompt.filter(|p| !p.is_empty())) else {
        let b = serde_json::json!({ "error": {
            "message": format!("an image generation needs a non-empty prompt and n from 1 to {MAX_IMAGES}"),
            "type": "invalid_request_error",
        }})
        .to_string();
        return respond(stream, out, 400, "application/json", b.as_bytes(), close).await;
    };
    let url = v.get("response_format").and_then(serde_json::Value::as_str) == Some("url");
    compute(ctx, arrived).await;
    let item = if url {
        r#"{"url":"http://127.0.0.1/ringperf-sim.png"}"#.to_string()
    } else {
        format!(r#"{{"b64_json":"{PIXEL_PNG}"}}"#)
    };
    let items = vec![item; n as usize].join(",");
    let tokens = prompt.len().div_ceil(4);
    let b = format!(
        r#"{{"created":{},"data":[{items}],"usage":{{"input_tokens":{tokens},"output_tokens":0,"total_tokens":{tokens}}}}}"#,
        (arrived as i64 + ctx.unix_offset_ns) / 1_000_000_000
    );
    respond(stream, out, 200, "application/json", b.as_bytes(), close).await
}

/// Appends one named SSE event (`event:` then `data:`) as one HTTP chunk.
fn push_named_event(out: &mut Vec<u8>, name: &str, data: &[u8]) {
    let _ = write!(
        out,
        "{:x}\r\nevent: {name}\ndata: ",
        data.len() + name.len() + 16
    );
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n\r\n");
}

/// Appends one SSE event as one HTTP chunk.
fn push_event(out: &mut Vec<u8>, data: &[u8]) {
    let _ = write!(out, "{:x}\r\ndata: ", data.len() + 8);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n\r\n");
}

async fn send(stream: &mut Conn, out: &mut Vec<u8>) -> bool {
    let (res, o) = stream.send(std::mem::take(out)).await;
    *out = o;
    res.is_ok()
}
