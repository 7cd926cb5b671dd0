//! The simulator's threads, connections and routing: each shard accepts on the shared port,
//! reads requests (stamped with their kernel arrival time) and hands generation requests to
//! [`super::reply`].

use std::io::Write;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use monoio::net::{ListenerOpts, TcpListener};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::batch::Batch;
use super::counters::{metrics_page, Busy, Counters};
use super::reply::{embed, generate, read_gen, GenRequest};
use super::trace::{Exporter, SpanQueue};
use super::{Config, Error};
use crate::api::Kind;
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
    exporter: Option<Exporter>,
}

impl SimHandle {
    /// A probe of the requests in flight and their integral over time (for
    /// a run).
    pub fn in_flight_probe(&self) -> Box<dyn Fn() -> InFlightSample> {
        let c = self.counters.clone();
        Box::new(move || c.in_flight().1)
    }

    /// Requests answered and events written so far.
    /// `POST /reset_prefix_cache` calls served.
    pub fn prefix_cache_resets(&self) -> u64 {
        self.counters.prefix_cache_resets.load(Ordering::Relaxed)
    }

    /// Requests and events served.
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
        // Then the spans of everything served go out.
        if let Some(mut e) = self.exporter.take() {
            e.finish();
            let (dropped, failed) = (
                e.dropped.load(Ordering::Relaxed),
                e.failed.load(Ordering::Relaxed),
            );
            if dropped + failed > 0 {
                crate::redact::say!(
                    "ringperf sim: {dropped} span(s) dropped on a full queue, {failed} \
                     export(s) failed"
                );
            }
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

pub(super) struct Ctx {
    pub(super) args: Config,
    pub(super) tls: Option<Arc<rustls::ServerConfig>>,
    pub(super) conns: std::cell::RefCell<FdSet>,
    pub(super) model_json: String,
    pub(super) batch: Rc<Batch>,
    /// Places for requests prefilling (`--max-prefill`).
    pub(super) prefill: Rc<Batch>,
    pub(super) timer: FineTimer,
    pub(super) rng: std::cell::RefCell<ChaCha8Rng>,
    pub(super) counters: Arc<Counters>,
    pub(super) next_id: std::cell::Cell<u64>,
    pub(super) shard: usize,
    /// Where each request's span goes (`--otlp-traces-endpoint`).
    pub(super) spans: Option<SpanQueue>,
    /// Unix time − `CLOCK_MONOTONIC` (ns), for the spans' times.
    pub(super) unix_offset_ns: i64,
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
    if args.faults.fail_every > 0 && !(400..600).contains(&args.faults.fail_status) {
        return bad("sim --fail-status must be an error status, from 400 to 599");
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
    // The shards share the port with SO_REUSEPORT, which would also let this simulator share
    // it with another one, silently splitting the traffic: refuse a port that is served.
    if bind.port() != 0
        && std::net::TcpStream::connect_timeout(&bind, std::time::Duration::from_millis(200))
            .is_ok()
    {
        return Err(Error::Taken(bind));
    }
    crate::sys::raise_nofile_limit();
    // Requests are timed from their kernel arrival stamps: have stamping on before the first.
    crate::sys::keep_rx_timestamping_on();
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let exporter = match &args.otlp_traces {
        Some((url, enc)) => {
            crate::otlp::check_url(url)?;
            Some(Exporter::start(url.clone(), *enc)?)
        }
        None => None,
    };
    let mut threads = Vec::new();
    let mut addr = bind;
    let mut driver = "";
    for shard in 0..args.shards {
        let (tx, rx) = mpsc::channel();
        let args = args.clone();
        let tls = tls.clone();
        let shard_stop = stop.clone();
        let counters = counters.clone();
        let spans = exporter.as_ref().map(Exporter::queue);
        let cpu = (!cpus.is_empty()).then(|| cpus[shard % cpus.len()]);
        let t = std::thread::Builder::new()
            .name(format!("ringperf-sim-{shard}"))
            .spawn(move || {
                if let Some(id) = cpu {
                    core_affinity::set_for_current(core_affinity::CoreId { id });
                }
                shard_main(shard, args, tls, addr, shard_stop, (counters, spans), tx)
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
        exporter,
    })
}

type Ready = mpsc::Sender<Result<(SocketAddr, &'static str), std::io::Error>>;

fn shard_main(
    shard: usize,
    args: Config,
    tls: Option<Arc<rustls::ServerConfig>>,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    (counters, spans): (Arc<Counters>, Option<SpanQueue>),
    ready: Ready,
) {
    let (mut rt, driver) = match crate::runtime::build(args.driver, 4096) {
        Ok(r) => r,
        Err(e) => {
            let _ = ready.send(Err(e));
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
                let _ = ready.send(Err(e));
                return;
            }
        };
        let timer = match FineTimer::with_slack(TIMER_SLACK_NS) {
            Ok(t) => t,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let local = listener.local_addr().unwrap_or(addr);
        // Batch places split across shards, differing by at most one.
        let (b, n) = (args.max_batch as usize, args.shards);
        let split = |b: usize| {
            if b == 0 {
                0
            } else {
                (b / n + usize::from(shard < b % n)).max(1)
            }
        };
        let per_shard_batch = split(b);
        let ctx = Rc::new(Ctx {
            tls,
            conns: std::cell::RefCell::new(FdSet::default()),
            model_json: serde_json::to_string(&args.model).expect("string"),
            batch: Batch::new(per_shard_batch),
            prefill: Batch::new(split(args.max_prefill as usize)),
            timer,
            rng: std::cell::RefCell::new(ChaCha8Rng::seed_from_u64(
                args.seed.wrapping_add(shard as u64),
            )),
            counters,
            next_id: std::cell::Cell::new(0),
            shard,
            spans,
            unix_offset_ns: {
                let a = crate::clock::Anchor::now();
                a.realtime_ns as i64 - a.monotonic_ns as i64
            },
            args,
        });
        let _ = ready.send(Ok((local, driver)));
        let accept = async {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        monoio::spawn(serve(ctx.clone(), stream));
                    }
                    Err(e) => {
                        // Out of descriptors, most likely: clients wait in the kernel's queue
                        // until one frees. Say so once, and count every failure.
                        if ctx.counters.accept_failures.fetch_add(1, Ordering::Relaxed) == 0 {
                            crate::redact::say!(
                                "ringperf sim: cannot accept connections: {e}; clients wait \
                                 until a descriptor frees (open-files limit {}: raise it with \
                                 ulimit -n)",
                                crate::sys::raise_nofile_limit()
                            );
                        }
                        monoio::time::sleep(Duration::from_millis(5)).await
                    }
                }
            }
        };
        let watch = async {
            while !stop.load(Ordering::Relaxed) && !ctx.counters.dead.load(Ordering::Relaxed) {
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
    /// The client's `X-Request-ID` (at most 128 bytes kept).
    request_id: Option<String>,
}

/// Why a request cannot be read (the answer is a 400 with this text).
#[derive(Debug, thiserror::Error)]
enum BadRequest {
    /// Not an HTTP/1.x request head.
    #[error("{0}")]
    Head(#[source] httparse::Error),
    /// A `Content-Length` that is not a number.
    #[error("bad Content-Length")]
    ContentLength,
    /// A chunked body.
    #[error("chunked request bodies are not supported by the simulator")]
    Chunked,
    /// Over [`MAX_REQUEST`].
    #[error("request too large")]
    TooLarge,
}

fn parse_request(buf: &[u8]) -> Result<Option<Request>, BadRequest> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(BadRequest::Head(e)),
    };
    let mut length = 0usize;
    let mut close = req.version == Some(0);
    let mut request_id = None;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("x-request-id") {
            let v = String::from_utf8_lossy(&h.value[..h.value.len().min(128)]);
            request_id = Some(v.trim().to_string());
        } else if h.name.eq_ignore_ascii_case("content-length") {
            length = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or(BadRequest::ContentLength)?;
        } else if h.name.eq_ignore_ascii_case("connection") {
            let v = String::from_utf8_lossy(h.value).to_ascii_lowercase();
            close = v.contains("close") || (close && !v.contains("keep-alive"));
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(BadRequest::Chunked);
        }
    }
    if head + length > MAX_REQUEST {
        return Err(BadRequest::TooLarge);
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
        request_id,
    }))
}

async fn serve(ctx: Rc<Ctx>, tcp: monoio::net::TcpStream) {
    let slot = ctx.conns.borrow_mut().insert(u64::MAX);
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
                    let body = vllm_error(&e.to_string(), "BadRequestError", 400);
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
            let (res, b) = stream.recv_stamped(buf, Vec::new, || {}).await;
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

pub(super) async fn respond(
    stream: &mut Conn,
    out: &mut Vec<u8>,
    status: u16,
    content_type: &str,
    body: &[u8],
    close: bool,
) -> bool {
    respond_with(stream, out, status, content_type, body, close, "").await
}

/// [`respond`], with `extra` header lines (each ending in CRLF).
async fn respond_with(
    stream: &mut Conn,
    out: &mut Vec<u8>,
    status: u16,
    content_type: &str,
    body: &[u8],
    close: bool,
    extra: &str,
) -> bool {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Error",
    };
    out.clear();
    let _ = write!(
        out,
        "HTTP/1.1 {status} {reason}\r\nserver: ringperf-sim\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n{extra}{}\r\n",
        body.len(),
        if close { "connection: close\r\n" } else { "" }
    );
    out.extend_from_slice(body);
    let (res, o) = stream.send(std::mem::take(out)).await;
    *out = o;
    res.is_ok() && !close
}

/// The fault injected on the `n`-th generation request, if any (`--stop-after`,
/// `--fail-every`): whether the connection is kept after it.
async fn fault(
    ctx: &Rc<Ctx>,
    stream: &mut Conn,
    out: &mut Vec<u8>,
    n: u64,
    close: bool,
) -> Option<bool> {
    let f = ctx.args.faults;
    if f.stop_after > 0 && n > f.stop_after {
        // Dead: every shard stops listening, and this one cuts its connections now.
        ctx.counters.dead.store(true, Ordering::Relaxed);
        ctx.conns.borrow().shutdown_all();
        return Some(false);
    }
    if f.fail_every == 0 || !n.is_multiple_of(f.fail_every) {
        return None;
    }
    let kind = match f.fail_status {
        429 => "RateLimitError",
        s if s >= 500 => "InternalServerError",
        _ => "BadRequestError",
    };
    let body = vllm_error(
        "a fault the simulator injects on purpose (--fail-every)",
        kind,
        f.fail_status,
    );
    let extra = f
        .retry_after
        .map_or(String::new(), |s| format!("retry-after: {s}\r\n"));
    Some(
        respond_with(
            stream,
            out,
            f.fail_status,
            "application/json",
            body.as_bytes(),
            close,
            &extra,
        )
        .await,
    )
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
        ("POST", "/reset_prefix_cache") => {
            ctx.counters
                .prefix_cache_resets
                .fetch_add(1, Ordering::Relaxed);
            ctx.counters
                .prefixes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
            respond(stream, out, 200, json, b"", req.close).await
        }
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
        ("POST", _) if Kind::at(path).is_some() => {
            let api = Kind::at(path).expect("matched");
            let r: GenRequest<'_> = match serde_json::from_slice(body) {
                Ok(r) => r,
                Err(e) => {
                    let b = vllm_error(&format!("invalid JSON body: {e}"), "BadRequestError", 400);
                    return respond(stream, out, 400, json, b.as_bytes(), req.close).await;
                }
            };
            let model = r.model.as_deref().unwrap_or("");
            // TEI serves one model and names none in the body.
            if model != ctx.args.model && api != Kind::TeiRankings {
                let b = vllm_error(
                    &format!("The model `{model}` does not exist."),
                    "NotFoundError",
                    404,
                );
                return respond(stream, out, 404, json, b.as_bytes(), req.close).await;
            }
            let n = ctx.counters.requests.fetch_add(1, Ordering::Relaxed) + 1;
            if let Some(keep) = fault(ctx, stream, out, n, req.close).await {
                return keep;
            }
            let _busy = Busy::enter(&ctx.counters.in_flight, arrived);
            if api == Kind::Embeddings {
                return embed(ctx, stream, out, &r, req.close, arrived).await;
            }
            if api.ranks() {
                return super::reply::rank(ctx, stream, out, body, api, req.close, arrived).await;
            }
            if api == Kind::ImageGeneration {
                return super::reply::draw(ctx, stream, out, body, req.close, arrived).await;
            }
            let mut gen = read_gen(&r, api, ctx.args.default_max_tokens);
            gen.request_id = req.request_id.clone();
            generate(ctx, stream, out, gen, req.close, arrived).await
        }
        ("POST", p) if p.starts_with("/v2/models/") => {
            // Triton's generate extension: /v2/models/{model}[/versions/{v}]/generate[_stream].
            let rest = &p["/v2/models/".len()..];
            let (model, streamed) = match (
                rest.strip_suffix("/generate_stream"),
                rest.strip_suffix("/generate"),
            ) {
                (Some(m), _) => (m, true),
                (None, Some(m)) => (m, false),
                _ => {
                    let b = br#"{"error":"Not Found"}"#;
                    return respond(stream, out, 404, json, b, req.close).await;
                }
            };
            let model = model.split("/versions/").next().unwrap_or(model);
            if model != ctx.args.model {
                let b = format!(
                    r#"{{"error":"Request for unknown model: '{}' is not found"}}"#,
                    model.replace(['"', '\\'], "")
                );
                return respond(stream, out, 400, json, b.as_bytes(), req.close).await;
            }
            let mut gen =
                match super::reply::read_triton(body, streamed, ctx.args.default_max_tokens) {
                    Ok(g) => g,
                    Err(e) => {
                        let b = serde_json::json!({ "error": e.to_string() }).to_string();
                        return respond(stream, out, 400, json, b.as_bytes(), req.close).await;
                    }
                };
            ctx.counters.requests.fetch_add(1, Ordering::Relaxed);
            let _busy = Busy::enter(&ctx.counters.in_flight, arrived);
            gen.request_id = req.request_id.clone();
            generate(ctx, stream, out, gen, req.close, arrived).await
        }
        ("POST", "/generate" | "/generate_stream") => {
            // Hugging Face TGI's API: one model per server, none named in the body.
            let streamed = path == "/generate_stream";
            let mut gen = match super::reply::read_tgi(body, streamed, ctx.args.default_max_tokens)
            {
                Ok(g) => g,
                Err(e) => {
                    let b =
                        serde_json::json!({ "error": e.to_string(), "error_type": "validation" })
                            .to_string();
                    return respond(stream, out, 422, json, b.as_bytes(), req.close).await;
                }
            };
            ctx.counters.requests.fetch_add(1, Ordering::Relaxed);
            let _busy = Busy::enter(&ctx.counters.in_flight, arrived);
            gen.request_id = req.request_id.clone();
            generate(ctx, stream, out, gen, req.close, arrived).await
        }
        (_, p) if Kind::at(p).is_some() || matches!(p, "/v1/models" | "/health" | "/metrics") => {
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
