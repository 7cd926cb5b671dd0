//! The simulator's threads, connections and responses.

use std::io::Write;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use monoio::net::{ListenerOpts, TcpListener};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::batch::{Batch, Permit};
use super::WORDS;
use super::{Config, Error};
use crate::clock::now_ns;
use crate::net::{Conn, FdSet};
use crate::record::InFlightSample;
use crate::timer::FineTimer;

/// Largest request the simulator accepts.
const MAX_REQUEST: usize = 8 << 20;
/// Tokens may go out this long before their deadline, so that the tokens of many streams
/// that fall due together share one timer wake-up. Every event still carries the time it
/// was really written.
const TIMER_SLACK_NS: u64 = 100_000;

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
    tokens: AtomicU64,
    finished: AtomicU64,
    running: AtomicU64,
    waiting: AtomicU64,
    in_flight: std::sync::Mutex<InFlight>,
}

/// Requests received and not yet answered, and their integral over time, so a run can show
/// the load the server really saw.
#[derive(Default)]
struct InFlight {
    now: u64,
    since_ns: u64,
    integral: u128,
}

impl InFlight {
    fn advance(&mut self, t: u64) {
        let t = t.max(self.since_ns);
        self.integral += u128::from(self.now) * u128::from(t - self.since_ns);
        self.since_ns = t;
    }
}

/// Counts one request in flight for as long as it lives.
struct Busy<'a>(&'a std::sync::Mutex<InFlight>);

impl<'a> Busy<'a> {
    fn enter(m: &'a std::sync::Mutex<InFlight>) -> Busy<'a> {
        let mut f = m.lock().unwrap_or_else(|e| e.into_inner());
        f.advance(now_ns());
        f.now += 1;
        Busy(m)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        let mut f = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f.advance(now_ns());
        f.now -= 1;
    }
}

impl Counters {
    fn in_flight(&self) -> (u64, InFlightSample) {
        let mut f = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        let t = now_ns();
        f.advance(t);
        (
            f.now,
            InFlightSample {
                t_ns: t,
                integral: f.integral,
            },
        )
    }
}

/// Adds one to a gauge for as long as it lives.
struct Gauge<'a>(&'a AtomicU64);

impl<'a> Gauge<'a> {
    fn up(g: &'a AtomicU64) -> Gauge<'a> {
        g.fetch_add(1, Ordering::Relaxed);
        Gauge(g)
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The simulator's `/metrics`, in vLLM's names, so `--server-metrics-url auto` has
/// something real to read.
fn metrics_page(model: &str, c: &Counters) -> String {
    let m = model
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    let g = |v: &AtomicU64| v.load(Ordering::Relaxed);
    let (in_flight, integral) = c.in_flight();
    format!(
        "# HELP vllm:num_requests_running Requests generating now.\n# TYPE vllm:num_requests_running gauge\n\
         vllm:num_requests_running{{model_name=\"{m}\"}} {}\n\
         # HELP vllm:num_requests_waiting Requests queued for a batch place.\n# TYPE vllm:num_requests_waiting gauge\n\
         vllm:num_requests_waiting{{model_name=\"{m}\"}} {}\n\
         # HELP vllm:generation_tokens_total Tokens generated.\n# TYPE vllm:generation_tokens_total counter\n\
         vllm:generation_tokens_total{{model_name=\"{m}\"}} {}\n\
         # HELP vllm:request_success_total Requests finished.\n# TYPE vllm:request_success_total counter\n\
         vllm:request_success_total{{model_name=\"{m}\"}} {}\n\
         # HELP ringperf_sim_requests_in_flight Requests received and not yet answered.\n# TYPE ringperf_sim_requests_in_flight gauge\n\
         ringperf_sim_requests_in_flight {in_flight}\n\
         # HELP ringperf_sim_in_flight_seconds_total Requests in flight integrated over time; its rise over a window divided by the window is the mean in flight.\n# TYPE ringperf_sim_in_flight_seconds_total counter\n\
         ringperf_sim_in_flight_seconds_total {:.6}\n",
        g(&c.running),
        g(&c.waiting),
        g(&c.tokens),
        g(&c.finished),
        integral.integral as f64 / 1e9
    )
}

impl SimHandle {
    /// A probe of the requests in flight and their integral over time (for
    /// a run).
    pub fn in_flight_probe(&self) -> Box<dyn Fn() -> InFlightSample> {
        let c = self.counters.clone();
        Box::new(move || c.in_flight().1)
    }

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
    args: Config,
    tls: Option<Arc<rustls::ServerConfig>>,
    conns: std::cell::RefCell<FdSet>,
    model_json: String,
    batch: Rc<Batch>,
    timer: FineTimer,
    rng: std::cell::RefCell<ChaCha8Rng>,
    counters: Arc<Counters>,
    next_id: std::cell::Cell<u64>,
    shard: usize,
}

/// Starts the simulator's shards and returns once all of them listen.
pub fn start(args: &Config) -> Result<SimHandle, Error> {
    let bad = |m: &str| Err(Error::Flag(m.to_string()));
    if args.shards == 0 {
        return bad("sim --shards must be at least 1");
    }
    if !(0.0..=1.0).contains(&args.eos_probability) {
        return bad("sim --eos-probability must be from 0 to 1");
    }
    if args.tokens_per_chunk == 0 {
        return bad("sim --tokens-per-chunk must be at least 1");
    }
    let tls = match &args.tls {
        Some((cert, key)) => Some(crate::tls::server_config(cert, key)?),
        None => None,
    };
    let cpus = args.cpus.clone();
    let bind: SocketAddr = args.bind.parse().map_err(|_| {
        Error::Flag(format!(
            "sim --bind {:?}: expected IP:PORT, e.g. 127.0.0.1:8000",
            args.bind
        ))
    })?;
    crate::sys::raise_nofile_limit();
    // Requests are timed from their kernel arrival stamps: have stamping on before the first.
    crate::sys::keep_rx_timestamping_on();
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let mut threads = Vec::new();
    let mut addr = bind;
    let mut driver = "";
    for shard in 0..args.shards {
        let (tx, rx) = mpsc::channel();
        let args = args.clone();
        let tls = tls.clone();
        let shard_stop = stop.clone();
        let counters = counters.clone();
        let cpu = (!cpus.is_empty()).then(|| cpus[shard % cpus.len()]);
        let t = std::thread::Builder::new()
            .name(format!("ringperf-sim-{shard}"))
            .spawn(move || {
                if let Some(id) = cpu {
                    core_affinity::set_for_current(core_affinity::CoreId { id });
                }
                shard_main(shard, args, tls, addr, shard_stop, counters, tx)
            })?;
        threads.push(t);
        match rx.recv() {
            Ok(Ok((a, d))) => {
                addr = a;
                driver = d;
            }
            Ok(Err(e)) => {
                stop.store(true, Ordering::Relaxed);
                return Err(Error::Listen(addr, e));
            }
            Err(_) => return Err(Error::Start(shard)),
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
    args: Config,
    tls: Option<Arc<rustls::ServerConfig>>,
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
        let opts = ListenerOpts::new()
            .reuse_port(true)
            .reuse_addr(true)
            .backlog(65535);
        let listener = match TcpListener::bind_with_config(addr, &opts) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send(Err(e.to_string()));
                return;
            }
        };
        let timer = match FineTimer::with_slack(TIMER_SLACK_NS) {
            Ok(t) => t,
            Err(e) => {
                let _ = ready.send(Err(e.to_string()));
                return;
            }
        };
        let local = listener.local_addr().unwrap_or(addr);
        // Batch places split across shards, differing by at most one.
        let (b, n) = (args.max_batch as usize, args.shards);
        let per_shard_batch = if b == 0 {
            0
        } else {
            (b / n + usize::from(shard < b % n)).max(1)
        };
        let ctx = Rc::new(Ctx {
            tls,
            conns: std::cell::RefCell::new(FdSet::default()),
            model_json: serde_json::to_string(&args.model).expect("string"),
            batch: Batch::new(per_shard_batch),
            timer,
            rng: std::cell::RefCell::new(ChaCha8Rng::seed_from_u64(
                args.seed.wrapping_add(shard as u64),
            )),
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
        // monoio does not drop unfinished tasks with its runtime: cut every connection so
        // their tasks end and their sockets close, then let them run out.
        ctx.conns.borrow().shutdown_all();
        monoio::time::sleep(Duration::from_millis(20)).await;
        ctx.timer.close().await;
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

async fn serve(ctx: Rc<Ctx>, tcp: monoio::net::TcpStream) {
    let slot = ctx.conns.borrow_mut().insert();
    ctx.conns
        .borrow_mut()
        .set(slot, std::os::fd::AsRawFd::as_raw_fd(&tcp));
    if let Ok(mut conn) = Conn::accept(tcp, ctx.tls.as_ref()).await {
        conn.enable_rx_timestamps();
        serve_conn(&ctx, &mut conn).await;
    }
    ctx.conns.borrow_mut().remove(slot);
}

async fn serve_conn(ctx: &Rc<Ctx>, stream: &mut Conn) {
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    // When the request's last bytes reached the kernel: the simulator's time zero.
    let mut arrived = now_ns();
    let mut out: Vec<u8> = Vec::with_capacity(1024);
    loop {
        let req = loop {
            match parse_request(&buf) {
                Ok(Some(r)) => break r,
                Ok(None) => {}
                Err(e) => {
                    let body = vllm_error(&e, "BadRequestError", 400);
                    let _ = respond(
                        stream,
                        &mut out,
                        400,
                        "application/json",
                        body.as_bytes(),
                        true,
                    )
                    .await;
                    return;
                }
            }
            let (res, b) = stream.recv_stamped(buf).await;
            buf = b;
            match res {
                Ok((0, _)) | Err(_) => return,
                Ok((_, stamp)) => arrived = stamp.unwrap_or_else(now_ns),
            }
        };
        let keep = handle(
            ctx,
            stream,
            &mut out,
            &req,
            &mut buf[req.body_at..req.len],
            arrived,
        )
        .await;
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
    stream: &mut Conn,
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
    let (res, o) = stream.send(std::mem::take(out)).await;
    *out = o;
    res.is_ok() && !close
}

/// What a generation request asked for.
/// Which API shape a generation request used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Chat,
    Completions,
    Responses,
}

struct Gen {
    api: Api,
    stream: bool,
    usage: bool,
    max_tokens: u32,
    min_tokens: u32,
    ignore_eos: bool,
    prompt_tokens: u64,
}

/// The fields of a generation request the simulator reads; everything else is skipped.
#[derive(serde::Deserialize)]
struct GenRequest<'a> {
    #[serde(borrow, default)]
    model: Option<std::borrow::Cow<'a, str>>,
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

fn read_gen(r: &GenRequest<'_>, api: Api, default_max: u32) -> Gen {
    let clamp = |n: u64| n.min(u64::from(u32::MAX)) as u32;
    let prompt_chars = match api {
        Api::Chat => r
            .messages
            .iter()
            .flatten()
            .filter_map(|m| m.content.map(|c| c.get().len()))
            .sum::<usize>(),
        Api::Completions => r.prompt.map_or(0, |p| p.get().len()),
        Api::Responses => r.input.map_or(0, |p| p.get().len()),
    };
    let max_tokens = r
        .max_tokens
        .or(r.max_completion_tokens)
        .or(r.max_output_tokens)
        .map_or(default_max, clamp)
        .max(1);
    Gen {
        api,
        stream: r.stream,
        usage: r.stream_options.as_ref().is_some_and(|o| o.include_usage),
        max_tokens,
        min_tokens: r.min_tokens.map_or(0, clamp).min(max_tokens),
        ignore_eos: r.ignore_eos,
        // An estimate (about four characters a token); the simulator carries no tokenizer.
        prompt_tokens: prompt_chars.div_ceil(4) as u64,
    }
}

async fn handle(
    ctx: &Rc<Ctx>,
    stream: &mut Conn,
    out: &mut Vec<u8>,
    req: &Request,
    body: &mut [u8],
    arrived: u64,
) -> bool {
    let path = req.path.split('?').next().unwrap_or("");
    let json = "application/json";
    match (req.method.as_str(), path) {
        ("GET", "/health") => respond(stream, out, 200, json, b"{}", req.close).await,
        ("GET", "/metrics") => {
            let page = metrics_page(&ctx.args.model, &ctx.counters);
            respond(
                stream,
                out,
                200,
                "text/plain; version=0.0.4",
                page.as_bytes(),
                req.close,
            )
            .await
        }
        ("GET", "/v1/models") => {
            let b = format!(
                r#"{{"object":"list","data":[{{"id":{},"object":"model","created":0,"owned_by":"ringperf"}}]}}"#,
                ctx.model_json
            );
            respond(stream, out, 200, json, b.as_bytes(), req.close).await
        }
        (
            "POST",
            "/v1/chat/completions" | "/v1/completions" | "/v1/responses" | "/v1/embeddings",
        ) => {
            let api = match path {
                "/v1/chat/completions" => Api::Chat,
                "/v1/completions" => Api::Completions,
                _ => Api::Responses,
            };
            let r: GenRequest<'_> = match serde_json::from_slice(body) {
                Ok(r) => r,
                Err(e) => {
                    let b = vllm_error(&format!("invalid JSON body: {e}"), "BadRequestError", 400);
                    return respond(stream, out, 400, json, b.as_bytes(), req.close).await;
                }
            };
            let model = r.model.as_deref().unwrap_or("");
            if model != ctx.args.model {
                let b = vllm_error(
                    &format!("The model `{model}` does not exist."),
                    "NotFoundError",
                    404,
                );
                return respond(stream, out, 404, json, b.as_bytes(), req.close).await;
            }
            ctx.counters.requests.fetch_add(1, Ordering::Relaxed);
            let _busy = Busy::enter(&ctx.counters.in_flight);
            if path == "/v1/embeddings" {
                return embed(ctx, stream, out, &r, req.close, arrived).await;
            }
            let gen = read_gen(&r, api, ctx.args.default_max_tokens);
            generate(ctx, stream, out, gen, req.close, arrived).await
        }
        (
            _,
            "/v1/chat/completions"
            | "/v1/completions"
            | "/v1/responses"
            | "/v1/embeddings"
            | "/v1/models"
            | "/health"
            | "/metrics",
        ) => {
            respond(
                stream,
                out,
                405,
                json,
                br#"{"detail":"Method Not Allowed"}"#,
                req.close,
            )
            .await
        }
        _ => {
            respond(
                stream,
                out,
                404,
                json,
                br#"{"detail":"Not Found"}"#,
                req.close,
            )
            .await
        }
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

async fn generate(
    ctx: &Rc<Ctx>,
    stream: &mut Conn,
    out: &mut Vec<u8>,
    gen: Gen,
    close: bool,
    arrived: u64,
) -> bool {
    let (n_out, ttft, itl) = {
        let mut rng = ctx.rng.borrow_mut();
        let n = output_len(&gen, ctx.args.eos_probability, &mut *rng);
        (
            n,
            ctx.args.ttft.sample(&mut *rng),
            ctx.args.itl.sample(&mut *rng),
        )
    };
    let id = ctx.next_id.get();
    ctx.next_id.set(id + 1);
    let id = format!(
        "{}-{:x}-{id:x}",
        match gen.api {
            Api::Chat => "chatcmpl",
            Api::Completions => "cmpl",
            Api::Responses => "resp",
        },
        ctx.shard
    );
    let created = crate::clock::unix_time_secs() as u64;
    let finish = if n_out == gen.max_tokens {
        "length"
    } else {
        "stop"
    };
    let object = match gen.api {
        Api::Chat => "chat.completion",
        Api::Completions => "text_completion",
        Api::Responses => "response",
    };
    // The first event (or the whole body) tells when the request reached the kernel, so the
    // client can check its own send stamps against it.
    let mut arrival = format!(r#","x_ringperf_arrived_ns":{arrived}"#);

    if gen.stream {
        out.clear();
        let _ = write!(
            out,
            "HTTP/1.1 200 OK\r\nserver: ringperf-sim\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n{}\r\n",
            if close { "connection: close\r\n" } else { "" }
        );
        if gen.api == Api::Responses {
            let ev = format!(
                r#"{{"type":"response.created","response":{{"id":"{id}","object":"response","created_at":{created},"status":"in_progress","model":{}}}{}}}"#,
                ctx.model_json,
                std::mem::take(&mut arrival)
            );
            push_named_event(out, "response.created", ev.as_bytes());
        }
        if gen.api == Api::Chat {
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
    drop(waiting);
    let _running = Gauge::up(&ctx.counters.running);
    // A request that got its place at once starts at its arrival; a queued one when admitted.
    let start = if permit.queued { now_ns() } else { arrived };
    let mut deadline = start + ttft;
    let tpc = ctx.args.tokens_per_chunk;
    let mut sent = 0u32;
    let mut text = String::new();
    let mut word = (id.len() + n_out as usize) % WORDS.len();
    // What every event of this response shares, formatted once: the part before the new
    // text, and the part right after it.
    let (prefix, after_text) = match gen.api {
        Api::Chat => (
            format!(
                r#"{{"id":"{id}","object":"chat.completion.chunk","created":{created},"model":{},"choices":[{{"index":0,"delta":{{"content":""#,
                ctx.model_json
            ),
            r#""},"finish_reason":"#,
        ),
        Api::Completions => (
            format!(
                r#"{{"id":"{id}","object":"text_completion","created":{created},"model":{},"choices":[{{"index":0,"text":""#,
                ctx.model_json
            ),
            r#"","finish_reason":"#,
        ),
        Api::Responses => (
            format!(
                r#"{{"type":"response.output_text.delta","item_id":"msg-{id}","output_index":0,"content_index":0,"delta":""#
            ),
            r#"""#,
        ),
    };
    let mut ev: Vec<u8> = Vec::with_capacity(prefix.len() + 128);
    while sent < n_out {
        let n = tpc.min(n_out - sent);
        ctx.timer.sleep_until(deadline).await;
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
            if gen.api != Api::Responses {
                if sent == n_out {
                    let _ = write!(ev, "\"{finish}\"");
                } else {
                    ev.extend_from_slice(b"null");
                }
                ev.extend_from_slice(b"}]");
                ev.extend_from_slice(std::mem::take(&mut arrival).as_bytes());
            }
            let _ = write!(ev, r#","x_ringperf_sent_ns":{}}}"#, now_ns());
            if gen.api == Api::Responses {
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
    let usage = format!(
        r#"{{"prompt_tokens":{},"completion_tokens":{n_out},"total_tokens":{}}}"#,
        gen.prompt_tokens,
        gen.prompt_tokens + u64::from(n_out)
    );
    let responses_usage = format!(
        r#"{{"input_tokens":{},"output_tokens":{n_out},"total_tokens":{}}}"#,
        gen.prompt_tokens,
        gen.prompt_tokens + u64::from(n_out)
    );
    if gen.stream {
        if gen.api == Api::Responses {
            let ev = format!(
                r#"{{"type":"response.completed","response":{{"id":"{id}","object":"response","created_at":{created},"status":"completed","model":{},"usage":{responses_usage}}}}}"#,
                ctx.model_json
            );
            push_named_event(out, "response.completed", ev.as_bytes());
        } else {
            if gen.usage {
                let ev = format!(
                    r#"{{"id":"{id}","object":"{object}{}","created":{created},"model":{},"choices":[],"usage":{usage}}}"#,
                    if gen.api == Api::Chat { ".chunk" } else { "" },
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
            Api::Chat => format!(
                r#"{{"id":"{id}","object":"{object}","created":{created},"model":{},"choices":[{{"index":0,"message":{{"role":"assistant","content":"{text}"}},"finish_reason":"{finish}"}}],"usage":{usage}{arrival}}}"#,
                ctx.model_json
            ),
            Api::Completions => format!(
                r#"{{"id":"{id}","object":"{object}","created":{created},"model":{},"choices":[{{"index":0,"text":"{text}","finish_reason":"{finish}"}}],"usage":{usage}{arrival}}}"#,
                ctx.model_json
            ),
            Api::Responses => format!(
                r#"{{"id":"{id}","object":"response","created_at":{created},"status":"completed","model":{},"output":[{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"{text}"}}]}}],"usage":{responses_usage}{arrival}}}"#,
                ctx.model_json
            ),
        };
        respond(stream, out, 200, "application/json", b.as_bytes(), close).await
    }
}

/// `/v1/embeddings`: a small fixed vector after the TTFT (the compute time).
async fn embed(
    ctx: &Rc<Ctx>,
    stream: &mut Conn,
    out: &mut Vec<u8>,
    r: &GenRequest<'_>,
    close: bool,
    arrived: u64,
) -> bool {
    let ttft = ctx.args.ttft.sample(&mut *ctx.rng.borrow_mut());
    let tokens = r.input.map_or(0, |i| i.get().len()).div_ceil(4);
    {
        let _waiting = Gauge::up(&ctx.counters.waiting);
        let permit = ctx.batch.admit().await;
        let start = if permit.queued { now_ns() } else { arrived };
        drop(_waiting);
        let _running = Gauge::up(&ctx.counters.running);
        ctx.timer.sleep_until(start + ttft).await;
    }
    ctx.counters.finished.fetch_add(1, Ordering::Relaxed);
    let b = format!(
        r#"{{"object":"list","data":[{{"object":"embedding","index":0,"embedding":[0.125,-0.25,0.5,0.0625,-0.5,0.25,0.375,-0.125]}}],"model":{},"usage":{{"prompt_tokens":{tokens},"total_tokens":{tokens}}},"x_ringperf_arrived_ns":{arrived}}}"#,
        ctx.model_json
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
