//! The simulator's threads, connections and responses.

use std::io::Write;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::{ListenerOpts, TcpListener, TcpStream};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use super::batch::{Batch, Permit};
use super::WORDS;
use crate::cli::SimArgs;
use crate::clock::now_ns;
use crate::timer::FineTimer;

/// Largest request the simulator accepts.
const MAX_REQUEST: usize = 8 << 20;

/// A running simulator.
pub struct SimHandle {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// I/O driver its shards run.
    pub driver: &'static str,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    counters: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    events: AtomicU64,
}

impl SimHandle {
    /// Requests answered and events written so far.
    pub fn served(&self) -> (u64, u64) {
        (
            self.counters.requests.load(Ordering::Relaxed),
            self.counters.events.load(Ordering::Relaxed),
        )
    }

    /// Stops every shard and waits for them.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct Ctx {
    args: SimArgs,
    model_json: String,
    batch: Rc<Batch>,
    timer: FineTimer,
    rng: std::cell::RefCell<ChaCha8Rng>,
    counters: Arc<Counters>,
    next_id: std::cell::Cell<u64>,
    shard: usize,
}

/// Starts the simulator's shards and returns once all of them listen.
pub fn start(args: &SimArgs) -> anyhow::Result<SimHandle> {
    if args.shards == 0 {
        anyhow::bail!("sim --shards must be at least 1");
    }
    if !(0.0..=1.0).contains(&args.eos_probability) {
        anyhow::bail!("sim --eos-probability must be from 0 to 1");
    }
    if args.tokens_per_chunk == 0 {
        anyhow::bail!("sim --tokens-per-chunk must be at least 1");
    }
    let bind: SocketAddr = args
        .bind
        .parse()
        .map_err(|_| anyhow::anyhow!("sim --bind {:?}: expected IP:PORT, e.g. 127.0.0.1:8000", args.bind))?;
    crate::engine::raise_nofile_limit();
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let mut threads = Vec::new();
    let mut addr = bind;
    let mut driver = "";
    for shard in 0..args.shards {
        let (tx, rx) = mpsc::channel();
        let args = args.clone();
        let shard_stop = stop.clone();
        let counters = counters.clone();
        let t = std::thread::Builder::new()
            .name(format!("ringperf-sim-{shard}"))
            .spawn(move || shard_main(shard, args, addr, shard_stop, counters, tx))?;
        threads.push(t);
        match rx.recv() {
            Ok(Ok((a, d))) => {
                addr = a;
                driver = d;
            }
            Ok(Err(e)) => {
                stop.store(true, Ordering::Relaxed);
                anyhow::bail!("sim: cannot listen on {addr}: {e}");
            }
            Err(_) => anyhow::bail!("sim: shard {shard} failed to start"),
        }
    }
    Ok(SimHandle {
        addr,
        driver,
        stop,
        threads,
        counters,
    })
}

type Ready = mpsc::Sender<Result<(SocketAddr, &'static str), String>>;

fn shard_main(
    shard: usize,
    args: SimArgs,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    ready: Ready,
) {
    let (mut rt, driver) = match crate::runtime::build(args.driver, 4096) {
        Ok(r) => r,
        Err(e) => {
            let _ = ready.send(Err(e.to_string()));
            return;
        }
    };
    rt.block_on(async move {
        let opts = ListenerOpts::new().reuse_port(true).reuse_addr(true).backlog(65535);
        let listener = match TcpListener::bind_with_config(addr, &opts) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send(Err(e.to_string()));
                return;
            }
        };
        let timer = match FineTimer::start() {
            Ok(t) => t,
            Err(e) => {
                let _ = ready.send(Err(e.to_string()));
                return;
            }
        };
        let local = listener.local_addr().unwrap_or(addr);
        let per_shard_batch = if args.max_batch == 0 {
            0
        } else {
            crate::engine::schedule::share(u64::from(args.max_batch), args.shards, shard).max(1)
                as usize
        };
        let ctx = Rc::new(Ctx {
            model_json: serde_json::to_string(&args.model).expect("string"),
            batch: Batch::new(per_shard_batch),
            timer,
            rng: std::cell::RefCell::new(ChaCha8Rng::seed_from_u64(args.seed.wrapping_add(shard as u64))),
            counters,
            next_id: std::cell::Cell::new(0),
            shard,
            args,
        });
        let _ = ready.send(Ok((local, driver)));
        let accept = async {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let _ = stream.set_nodelay(true);
                        monoio::spawn(serve(ctx.clone(), stream));
                    }
                    Err(_) => monoio::time::sleep(Duration::from_millis(5)).await,
                }
            }
        };
        let watch = async {
            while !stop.load(Ordering::Relaxed) {
                monoio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        monoio::select! {
            _ = accept => {},
            _ = watch => {},
        }
    });
}

/// A parsed request: what the handler needs.
struct Request {
    method: String,
    path: String,
    close: bool,
    body_at: usize,
    len: usize,
}

fn parse_request(buf: &[u8]) -> Result<Option<Request>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let mut length = 0usize;
    let mut close = req.version == Some(0);
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            length = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or("bad Content-Length")?;
        } else if h.name.eq_ignore_ascii_case("connection") {
            let v = String::from_utf8_lossy(h.value).to_ascii_lowercase();
            close = v.contains("close") || (close && !v.contains("keep-alive"));
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err("chunked request bodies are not supported by the simulator".into());
        }
    }
    if head + length > MAX_REQUEST {
        return Err("request too large".into());
    }
    if buf.len() < head + length {
        return Ok(None);
    }
    Ok(Some(Request {
        method: req.method.unwrap_or("").to_string(),
        path: req.path.unwrap_or("").to_string(),
        close,
        body_at: head,
        len: head + length,
    }))
}

async fn serve(ctx: Rc<Ctx>, mut stream: TcpStream) {
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut out: Vec<u8> = Vec::with_capacity(1024);
    loop {
        let req = loop {
            match parse_request(&buf) {
                Ok(Some(r)) => break r,
                Ok(None) => {}
                Err(e) => {
                    let body = vllm_error(&e, "BadRequestError", 400);
                    let _ = respond(&mut stream, &mut out, 400, "application/json", body.as_bytes(), true).await;
                    return;
                }
            }
            if buf.capacity() - buf.len() < 4096 {
                buf.reserve(buf.capacity());
            }
            let len = buf.len();
            let cap = buf.capacity();
            let (res, slice) = stream.read(monoio::buf::IoBufMut::slice_mut(buf, len..cap)).await;
            buf = slice.into_inner();
            match res {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        };
        let keep = handle(&ctx, &mut stream, &mut out, &req, &mut buf[req.body_at..req.len]).await;
        buf.drain(..req.len);
        if !keep || req.close {
            return;
        }
    }
}

fn vllm_error(message: &str, kind: &str, code: u16) -> String {
    serde_json::json!({"object": "error", "message": message, "type": kind, "param": null, "code": code})
        .to_string()
}

async fn respond(
    stream: &mut TcpStream,
    out: &mut Vec<u8>,
    status: u16,
    content_type: &str,
    body: &[u8],
    close: bool,
) -> bool {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Error",
    };
    out.clear();
    let _ = write!(
        out,
        "HTTP/1.1 {status} {reason}\r\nserver: ringperf-sim\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n{}\r\n",
        body.len(),
        if close { "connection: close\r\n" } else { "" }
    );
    out.extend_from_slice(body);
    let (res, o) = stream.write_all(std::mem::take(out)).await;
    *out = o;
    res.is_ok() && !close
}

/// What a generation request asked for.
struct Gen {
    chat: bool,
    stream: bool,
    usage: bool,
    max_tokens: u32,
    min_tokens: u32,
    ignore_eos: bool,
    prompt_tokens: u64,
}

fn read_gen(v: &Value, chat: bool, default_max: u32) -> Gen {
    let num = |k: &str| v.get(k).and_then(Value::as_u64).map(|n| n.min(u64::from(u32::MAX)) as u32);
    let prompt_chars = if chat {
        v.get("messages")
            .and_then(Value::as_array)
            .map(|m| {
                m.iter()
                    .filter_map(|x| x.get("content").and_then(Value::as_str))
                    .map(str::len)
                    .sum::<usize>()
            })
            .unwrap_or(0)
    } else {
        v.get("prompt").and_then(Value::as_str).map_or(0, str::len)
    };
    let max_tokens = num("max_tokens")
        .or_else(|| num("max_completion_tokens"))
        .unwrap_or(default_max)
        .max(1);
    Gen {
        chat,
        stream: v.get("stream").and_then(Value::as_bool).unwrap_or(false),
        usage: v
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        max_tokens,
        min_tokens: num("min_tokens").unwrap_or(0).min(max_tokens),
        ignore_eos: v.get("ignore_eos").and_then(Value::as_bool).unwrap_or(false),
        // An estimate (about four characters a token); the simulator carries no tokenizer.
        prompt_tokens: prompt_chars.div_ceil(4) as u64,
    }
}

async fn handle(ctx: &Rc<Ctx>, stream: &mut TcpStream, out: &mut Vec<u8>, req: &Request, body: &mut [u8]) -> bool {
    let path = req.path.split('?').next().unwrap_or("");
    let json = "application/json";
    match (req.method.as_str(), path) {
        ("GET", "/health") => respond(stream, out, 200, json, b"{}", req.close).await,
        ("GET", "/v1/models") => {
            let b = format!(
                r#"{{"object":"list","data":[{{"id":{},"object":"model","created":0,"owned_by":"ringperf"}}]}}"#,
                ctx.model_json
            );
            respond(stream, out, 200, json, b.as_bytes(), req.close).await
        }
        ("POST", "/v1/chat/completions") | ("POST", "/v1/completions") => {
            let chat = path == "/v1/chat/completions";
            let v: Value = match serde_json::from_slice(body) {
                Ok(v) => v,
                Err(e) => {
                    let b = vllm_error(&format!("invalid JSON body: {e}"), "BadRequestError", 400);
                    return respond(stream, out, 400, json, b.as_bytes(), req.close).await;
                }
            };
            let model = v.get("model").and_then(Value::as_str).unwrap_or("");
            if model != ctx.args.model {
                let b = vllm_error(&format!("The model `{model}` does not exist."), "NotFoundError", 404);
                return respond(stream, out, 404, json, b.as_bytes(), req.close).await;
            }
            let gen = read_gen(&v, chat, ctx.args.default_max_tokens);
            ctx.counters.requests.fetch_add(1, Ordering::Relaxed);
            generate(ctx, stream, out, gen, req.close).await
        }
        (_, "/v1/chat/completions" | "/v1/completions" | "/v1/models" | "/health") => {
            respond(stream, out, 405, json, br#"{"detail":"Method Not Allowed"}"#, req.close).await
        }
        _ => respond(stream, out, 404, json, br#"{"detail":"Not Found"}"#, req.close).await,
    }
}

/// Output length: max_tokens, or earlier at a random EOS after min_tokens.
fn output_len(gen: &Gen, eos_p: f64, rng: &mut impl Rng) -> u32 {
    if gen.ignore_eos || eos_p <= 0.0 {
        return gen.max_tokens;
    }
    let mut n = gen.min_tokens.max(1);
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

async fn generate(ctx: &Rc<Ctx>, stream: &mut TcpStream, out: &mut Vec<u8>, gen: Gen, close: bool) -> bool {
    let (n_out, ttft, itl) = {
        let mut rng = ctx.rng.borrow_mut();
        let n = output_len(&gen, ctx.args.eos_probability, &mut *rng);
        (n, ctx.args.ttft.sample(&mut *rng), ctx.args.itl.sample(&mut *rng))
    };
    let id = ctx.next_id.get();
    ctx.next_id.set(id + 1);
    let id = format!("{}-{:x}-{id:x}", if gen.chat { "chatcmpl" } else { "cmpl" }, ctx.shard);
    let created = crate::clock::unix_time_secs() as u64;
    let finish = if n_out == gen.max_tokens { "length" } else { "stop" };
    let object = if gen.chat { "chat.completion" } else { "text_completion" };

    if gen.stream {
        out.clear();
        let _ = write!(
            out,
            "HTTP/1.1 200 OK\r\nserver: ringperf-sim\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n{}\r\n",
            if close { "connection: close\r\n" } else { "" }
        );
        if gen.chat {
            // vLLM's first chunk: the role, with empty content (not a content event).
            let ev = format!(
                r#"{{"id":"{id}","object":"chat.completion.chunk","created":{created},"model":{},"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},"finish_reason":null}}]}}"#,
                ctx.model_json
            );
            push_event(out, ev.as_bytes());
        }
        if !send(stream, out).await {
            return false;
        }
    }
    let _permit: Permit = ctx.batch.admit().await;
    let mut deadline = now_ns() + ttft;
    let tpc = ctx.args.tokens_per_chunk;
    let mut sent = 0u32;
    let mut text = String::new();
    let mut word = (id.len() + n_out as usize) % WORDS.len();
    while sent < n_out {
        let n = tpc.min(n_out - sent);
        let mut piece = String::with_capacity(n as usize * 5);
        for _ in 0..n {
            piece.push_str(WORDS[word]);
            word = (word + 1) % WORDS.len();
        }
        sent += n;
        ctx.timer.sleep_until(deadline).await;
        if gen.stream {
            let fin = if sent == n_out { format!("\"{finish}\"") } else { "null".into() };
            let choice = if gen.chat {
                format!(r#"{{"index":0,"delta":{{"content":"{piece}"}},"finish_reason":{fin}}}"#)
            } else {
                format!(r#"{{"index":0,"text":"{piece}","finish_reason":{fin}}}"#)
            };
            let ev = format!(
                r#"{{"id":"{id}","object":"{object}{}","created":{created},"model":{},"choices":[{choice}],"x_ringperf_sent_ns":{}}}"#,
                if gen.chat { ".chunk" } else { "" },
                ctx.model_json,
                now_ns()
            );
            out.clear();
            push_event(out, ev.as_bytes());
            if !send(stream, out).await {
                return false;
            }
            ctx.counters.events.fetch_add(1, Ordering::Relaxed);
        } else {
            text.push_str(&piece);
        }
        if sent < n_out {
            deadline += itl_now(ctx, itl) * u64::from(tpc.min(n_out - sent));
        }
    }
    let usage = format!(
        r#"{{"prompt_tokens":{},"completion_tokens":{n_out},"total_tokens":{}}}"#,
        gen.prompt_tokens,
        gen.prompt_tokens + u64::from(n_out)
    );
    if gen.stream {
        out.clear();
        if gen.usage {
            let ev = format!(
                r#"{{"id":"{id}","object":"{object}{}","created":{created},"model":{},"choices":[],"usage":{usage}}}"#,
                if gen.chat { ".chunk" } else { "" },
                ctx.model_json
            );
            push_event(out, ev.as_bytes());
        }
        push_event(out, b"[DONE]");
        out.extend_from_slice(b"0\r\n\r\n");
        send(stream, out).await && !close
    } else {
        let choice = if gen.chat {
            format!(r#"{{"index":0,"message":{{"role":"assistant","content":"{text}"}},"finish_reason":"{finish}"}}"#)
        } else {
            format!(r#"{{"index":0,"text":"{text}","finish_reason":"{finish}"}}"#)
        };
        let b = format!(
            r#"{{"id":"{id}","object":"{object}","created":{created},"model":{},"choices":[{choice}],"usage":{usage}}}"#,
            ctx.model_json
        );
        respond(stream, out, 200, "application/json", b.as_bytes(), close).await
    }
}

/// Appends one SSE event as one HTTP chunk.
fn push_event(out: &mut Vec<u8>, data: &[u8]) {
    let _ = write!(out, "{:x}\r\ndata: ", data.len() + 8);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n\r\n");
}

async fn send(stream: &mut TcpStream, out: &mut Vec<u8>) -> bool {
    let (res, o) = stream.write_all(std::mem::take(out)).await;
    *out = o;
    res.is_ok()
}
