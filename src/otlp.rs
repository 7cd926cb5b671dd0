//! The server's own account of each request, as OpenTelemetry spans over OTLP/HTTP.
//!
//! vLLM (`--otlp-traces-endpoint`) ends each request with an `llm_request` span whose
//! `gen_ai.latency.*` attributes give, in seconds, its time in the queue, in prefill, in
//! decode, in inference (prefill and decode), its own TTFT and its end-to-end time, and whose
//! `gen_ai.request.id` carries the `X-Request-ID` the client sent (behind the API's prefix,
//! `chatcmpl-…`). [`Receiver`] takes such exports (`POST /v1/traces`, protobuf or JSON,
//! plain or gzip) on a thread of its own, off the shards, and keeps one [`Span`] per request
//! id; [`encode`] writes them, for ringperf's simulator.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
use prost::Message;

/// vLLM's span attribute names (seconds, as doubles), in [`Phases`]' order.
pub(crate) const ATTRIBUTES: [&str; 6] = [
    "gen_ai.latency.time_in_queue",
    "gen_ai.latency.time_in_model_prefill",
    "gen_ai.latency.time_in_model_decode",
    "gen_ai.latency.time_in_model_inference",
    "gen_ai.latency.time_to_first_token",
    "gen_ai.latency.e2e",
];

/// The attribute that names the request.
pub(crate) const REQUEST_ID: &str = "gen_ai.request.id";

/// The span vLLM writes per request.
pub(crate) const SPAN_NAME: &str = "llm_request";

/// What a server said of one request (ns); `None` where its span did not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Phases {
    /// Waiting for the scheduler (vLLM: scheduled − queued).
    pub queue_ns: Option<u64>,
    /// From scheduled to the first token.
    pub prefill_ns: Option<u64>,
    /// From the first token to the last.
    pub decode_ns: Option<u64>,
    /// From scheduled to the last token (prefill and decode).
    pub inference_ns: Option<u64>,
    /// The server's own TTFT, from its arrival.
    pub ttft_ns: Option<u64>,
    /// The server's own end-to-end time, from its arrival.
    pub e2e_ns: Option<u64>,
}

impl Phases {
    /// The values in [`ATTRIBUTES`]' order.
    pub fn values(&self) -> [Option<u64>; 6] {
        [
            self.queue_ns,
            self.prefill_ns,
            self.decode_ns,
            self.inference_ns,
            self.ttft_ns,
            self.e2e_ns,
        ]
    }

    fn set(&mut self, i: usize, v: u64) {
        *[
            &mut self.queue_ns,
            &mut self.prefill_ns,
            &mut self.decode_ns,
            &mut self.inference_ns,
            &mut self.ttft_ns,
            &mut self.e2e_ns,
        ][i] = Some(v);
    }
}

/// One request's span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The request's number (its `X-Request-ID`).
    pub id: u64,
    /// When the span started (Unix ns).
    pub start_unix_ns: u64,
    /// What it says.
    pub phases: Phases,
}

/// The request number in a server's request id: the token of exactly 16 hexadecimal digits
/// (ringperf's `X-Request-ID`) between the API's prefix and any suffix the server adds
/// (`chatcmpl-00000000000000a3`, `cmpl-00000000000000a3-0`).
pub(crate) fn request_number(server_id: &str) -> Option<u64> {
    server_id
        .split(|c: char| !c.is_ascii_alphanumeric())
        .find(|t| t.len() == 16 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        .and_then(|t| u64::from_str_radix(t, 16).ok())
}

fn seconds_ns(v: &AnyValue) -> Option<u64> {
    let s = match v.value.as_ref()? {
        any_value::Value::DoubleValue(d) => *d,
        any_value::Value::IntValue(i) => *i as f64,
        any_value::Value::StringValue(s) => s.parse().ok()?,
        _ => return None,
    };
    (s.is_finite() && s >= 0.0).then(|| (s * 1e9).round() as u64)
}

/// What one export held.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Export {
    /// Spans that name a request ringperf sent.
    pub spans: Vec<Span>,
    /// Other spans (another name, or no ringperf request id).
    pub other: u64,
}

/// The request spans of an export.
pub(crate) fn spans_of(req: &ExportTraceServiceRequest) -> Export {
    let mut out = Export::default();
    for s in req
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans)
    {
        let id = s
            .attributes
            .iter()
            .find(|kv| kv.key == REQUEST_ID)
            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(v) => request_number(v),
                _ => None,
            });
        let Some(id) = id.filter(|_| s.name == SPAN_NAME) else {
            out.other += 1;
            continue;
        };
        let mut phases = Phases::default();
        for kv in &s.attributes {
            if let Some(i) = ATTRIBUTES.iter().position(|a| *a == kv.key) {
                if let Some(v) = kv.value.as_ref().and_then(seconds_ns) {
                    phases.set(i, v);
                }
            }
        }
        out.spans.push(Span {
            id,
            start_unix_ns: s.start_time_unix_nano,
            phases,
        });
    }
    out
}

/// How an export's body is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `application/x-protobuf`.
    Protobuf,
    /// `application/json` (OTLP's JSON mapping).
    Json,
}

impl Encoding {
    /// The content type.
    pub fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }
}

/// A span to write: the server's request id, when it ran (Unix ns), and its phases.
#[derive(Debug, Clone)]
pub(crate) struct Out {
    /// The server's id for the request (vLLM's `chatcmpl-…`).
    pub request_id: String,
    /// Start (the request's arrival) and end (Unix ns).
    pub start_unix_ns: u64,
    /// See `start_unix_ns`.
    pub end_unix_ns: u64,
    /// What it says.
    pub phases: Phases,
    /// Prompt and output tokens.
    pub tokens: (u64, u64),
}

/// An export of `spans` as vLLM writes them, from service `service`.
pub(crate) fn encode(service: &str, spans: &[Out], enc: Encoding) -> Vec<u8> {
    let kv = |key: &str, v: any_value::Value| KeyValue {
        key: key.to_string(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    };
    let spans = spans
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut attributes = vec![
                kv(
                    REQUEST_ID,
                    any_value::Value::StringValue(s.request_id.clone()),
                ),
                kv(
                    "gen_ai.usage.prompt_tokens",
                    any_value::Value::IntValue(s.tokens.0 as i64),
                ),
                kv(
                    "gen_ai.usage.completion_tokens",
                    any_value::Value::IntValue(s.tokens.1 as i64),
                ),
            ];
            for (name, v) in ATTRIBUTES.iter().zip(s.phases.values()) {
                if let Some(v) = v {
                    attributes.push(kv(name, any_value::Value::DoubleValue(v as f64 / 1e9)));
                }
            }
            // Ids: unique within the export, which is all a receiver here needs.
            let n = (s.start_unix_ns ^ i as u64).to_be_bytes();
            opentelemetry_proto::tonic::trace::v1::Span {
                trace_id: [n, n].concat(),
                span_id: n.to_vec(),
                name: SPAN_NAME.to_string(),
                kind: 2, // SERVER
                start_time_unix_nano: s.start_unix_ns,
                end_time_unix_nano: s.end_unix_ns,
                attributes,
                ..Default::default()
            }
        })
        .collect();
    let req = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv(
                    "service.name",
                    any_value::Value::StringValue(service.to_string()),
                )],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "vllm.llm_engine".into(),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    match enc {
        Encoding::Protobuf => req.encode_to_vec(),
        Encoding::Json => serde_json::to_vec(&req).expect("an export serialises"),
    }
}

/// Why the span receiver could not start, or an export could not be posted.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The endpoint is not `http://HOST:PORT[/PATH]`.
    #[error("--otlp-traces-endpoint {0:?}: expected http://HOST:PORT (OTLP over HTTP)")]
    Url(String),
    /// The receiver's address cannot be listened on.
    #[error("--server-traces: cannot listen on {addr}: {source}")]
    Listen {
        /// The address asked for.
        addr: String,
        /// The system's error.
        source: io::Error,
    },
    /// The receiver's thread could not start.
    #[error("--server-traces: {0}")]
    Thread(#[source] io::Error),
    /// The endpoint's host has no address.
    #[error("{authority}: {why}")]
    Resolve {
        /// `HOST:PORT`.
        authority: String,
        /// The resolver's answer.
        why: String,
    },
    /// The exchange with the collector failed.
    #[error(transparent)]
    Exchange(#[from] crate::blocking::Error),
    /// The collector answered with an error status.
    #[error("HTTP {status}: {body}")]
    Status {
        /// The status code.
        status: u16,
        /// Its body, as text.
        body: String,
    },
}

/// Why an export was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    /// Neither protobuf nor JSON.
    #[error("unsupported content type {0:?} (OTLP/HTTP sends application/x-protobuf or application/json)")]
    ContentType(String),
    /// A compression other than gzip.
    #[error("unsupported content encoding {0:?} (gzip or none)")]
    ContentEncoding(String),
    /// The body does not decode.
    #[error("{0}")]
    Body(String),
}

/// Decodes an export's body by its content type and encoding.
pub(crate) fn decode(
    body: &[u8],
    content_type: &str,
    content_encoding: Option<&str>,
) -> Result<ExportTraceServiceRequest, DecodeError> {
    let unzipped;
    let body = match content_encoding.map(|e| e.trim().to_ascii_lowercase()) {
        None => body,
        Some(e) if e.is_empty() || e == "identity" => body,
        Some(e) if e == "gzip" => {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(body)
                .take(MAX_BODY as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| DecodeError::Body(format!("gzip: {e}")))?;
            if out.len() > MAX_BODY {
                return Err(DecodeError::Body(format!(
                    "the export unpacks to more than {} MiB",
                    MAX_BODY >> 20
                )));
            }
            unzipped = out;
            &unzipped
        }
        Some(e) => return Err(DecodeError::ContentEncoding(e)),
    };
    let ty = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match ty.as_str() {
        "application/x-protobuf" | "application/protobuf" => {
            ExportTraceServiceRequest::decode(body).map_err(|e| DecodeError::Body(e.to_string()))
        }
        "application/json" => {
            serde_json::from_slice(body).map_err(|e| DecodeError::Body(format!("JSON: {e}")))
        }
        _ => Err(DecodeError::ContentType(ty)),
    }
}

/// The largest export body taken (OTLP collectors' usual limit is a few MiB).
pub(crate) const MAX_BODY: usize = 64 << 20;

/// The most request spans kept (a run's requests beyond that go without).
pub(crate) const MAX_SPANS: usize = 4_000_000;

/// The most connections served at once (a server's exporters keep one or a few).
const MAX_CONNECTIONS: usize = 64;

/// What the receiver took in.
#[derive(Debug, Default)]
pub struct Received {
    /// Request spans by request number (the first of each kept).
    pub spans: HashMap<u64, Span>,
    /// Exports decoded.
    pub exports: u64,
    /// Exports refused, and the first reason.
    pub refused: u64,
    /// See `refused`.
    pub first_refusal: Option<String>,
    /// Spans of other kinds (or of requests ringperf did not send).
    pub other_spans: u64,
    /// A second span for a request already spanned.
    pub duplicates: u64,
    /// Request spans left out past [`MAX_SPANS`].
    pub over_cap: u64,
}

impl Received {
    fn take(&mut self, e: Export) {
        self.exports += 1;
        self.other_spans += e.other;
        for s in e.spans {
            if self.spans.len() >= MAX_SPANS {
                self.over_cap += 1;
            } else if self.spans.insert(s.id, s).is_some() {
                self.duplicates += 1;
            }
        }
    }

    fn refuse(&mut self, why: String) {
        self.refused += 1;
        self.first_refusal.get_or_insert(why);
    }
}

/// What the receiver took in, and a signal for each export taken.
type Shared = (Mutex<Received>, Condvar);

/// An OTLP/HTTP trace receiver on its own thread.
pub(crate) struct Receiver {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    got: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    /// Listens on `addr` (`IP:PORT`).
    pub(crate) fn start(addr: &str) -> Result<Receiver, Error> {
        let listen = |source| Error::Listen {
            addr: addr.to_string(),
            source,
        };
        let listener = TcpListener::bind(addr).map_err(listen)?;
        let addr = listener.local_addr().map_err(listen)?;
        let stop = Arc::new(AtomicBool::new(false));
        let got = Arc::new((Mutex::new(Received::default()), Condvar::new()));
        let (flag, into) = (stop.clone(), got.clone());
        let thread = std::thread::Builder::new()
            .name("ringperf-traces".into())
            .spawn(move || accept(listener, flag, into))
            .map_err(Error::Thread)?;
        Ok(Receiver {
            addr,
            stop,
            got,
            thread: Some(thread),
        })
    }

    /// The endpoint to give the server (`--otlp-traces-endpoint`).
    pub(crate) fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Waits until every request in `want` has its span, `until` passes, or `stop` is set;
    /// returns how many of them have one.
    pub(crate) fn wait_for(&self, want: &[u64], until: Instant, stop: &AtomicBool) -> usize {
        let (lock, taken) = &*self.got;
        let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let have = want.iter().filter(|id| g.spans.contains_key(id)).count();
            let now = Instant::now();
            if have == want.len() || now >= until || stop.load(Ordering::Relaxed) {
                return have;
            }
            // Woken by each export taken; a signal's flag is looked at every 100 ms.
            let wait = until.duration_since(now).min(Duration::from_millis(100));
            g = taken
                .wait_timeout(g, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Takes what came in so far (the receiver goes on listening).
    pub(crate) fn take(&self) -> Received {
        std::mem::take(&mut *self.got.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // The accepting thread waits in accept(): a connection wakes it to see the flag. If
        // none can be made, the thread is left to end with the process.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        if TcpStream::connect_timeout(&wake, Duration::from_secs(1)).is_ok() {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}

fn accept(listener: TcpListener, stop: Arc<AtomicBool>, got: Arc<Shared>) {
    let open = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        // A failed accept, a connection past the cap, or a thread that cannot start: that
        // connection is closed at once.
        let Ok(conn) = conn else { continue };
        if open.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
            continue;
        }
        open.fetch_add(1, Ordering::Relaxed);
        let (stop, got, open) = (stop.clone(), got.clone(), open.clone());
        let _ = std::thread::Builder::new()
            .name("ringperf-traces-conn".into())
            .spawn(move || {
                serve(conn, &stop, &got);
                open.fetch_sub(1, Ordering::Relaxed);
            });
    }
}

/// The largest request head taken.
const MAX_HEAD: usize = 64 << 10;

/// One request's head, read.
struct Head {
    method: String,
    path: String,
    len: usize,
    chunked: bool,
    content_type: String,
    content_encoding: Option<String>,
    close: bool,
}

/// Why a request head cannot be read (the answer is a 400 with this text).
#[derive(Debug, thiserror::Error)]
enum BadHead {
    /// Over [`MAX_HEAD`] without its end.
    #[error("request head too large")]
    TooLarge,
    /// Not an HTTP/1.x request head.
    #[error("{0}")]
    Head(#[source] httparse::Error),
    /// A `Content-Length` that is not a number.
    #[error("bad Content-Length")]
    ContentLength,
}

fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, BadHead> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let n = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => return Err(BadHead::TooLarge),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(BadHead::Head(e)),
    };
    let mut head = Head {
        method: req.method.unwrap_or("").to_string(),
        path: req.path.unwrap_or("").to_string(),
        len: 0,
        chunked: false,
        content_type: String::new(),
        content_encoding: None,
        close: req.version == Some(0),
    };
    for h in req.headers.iter() {
        let v = String::from_utf8_lossy(h.value).trim().to_string();
        match h.name.to_ascii_lowercase().as_str() {
            "content-length" => head.len = v.parse().map_err(|_| BadHead::ContentLength)?,
            "transfer-encoding" => head.chunked = v.to_ascii_lowercase().contains("chunked"),
            "content-type" => head.content_type = v,
            "content-encoding" => head.content_encoding = Some(v),
            "connection" => head.close = v.to_ascii_lowercase().contains("close"),
            _ => {}
        }
    }
    Ok(Some((head, n)))
}

/// Answers a request that cannot be read and closes the connection.
fn bad_request(conn: &mut TcpStream, why: &str) {
    respond(conn, "400 Bad Request", "text/plain", why.as_bytes(), true);
}

fn respond(conn: &mut TcpStream, status: &str, ty: &str, body: &[u8], close: bool) -> bool {
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {ty}\r\ncontent-length: {}\r\n{}\r\n",
        body.len(),
        if close { "connection: close\r\n" } else { "" }
    );
    conn.write_all(head.as_bytes()).is_ok() && conn.write_all(body).is_ok() && !close
}

/// Serves one connection's exports until it closes, breaks the protocol, or `stop`.
fn serve(mut conn: TcpStream, stop: &AtomicBool, got: &Shared) {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf: Vec<u8> = Vec::with_capacity(64 << 10);
    let mut chunk = vec![0u8; 64 << 10];
    // Reads more into `buf`; false when the peer closed, the read failed or `stop`.
    let mut more = |conn: &mut TcpStream, buf: &mut Vec<u8>| loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        match conn.read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return true;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return false,
        }
    };
    loop {
        let (head, at) = loop {
            match parse_head(&buf) {
                Ok(Some(h)) => break h,
                Ok(None) => {
                    if !more(&mut conn, &mut buf) {
                        return;
                    }
                }
                Err(e) => return bad_request(&mut conn, &e.to_string()),
            }
        };
        buf.drain(..at);
        let body = if head.chunked {
            let mut body = Vec::new();
            let mut dec = crate::http::chunked::Decoder::new();
            loop {
                let used = match dec.decode(&buf, &mut |b: &[u8]| body.extend_from_slice(b)) {
                    Ok(n) => n,
                    Err(e) => return bad_request(&mut conn, &e.to_string()),
                };
                buf.drain(..used);
                if dec.is_done() {
                    break body;
                }
                if body.len() > MAX_BODY || !more(&mut conn, &mut buf) {
                    respond(&mut conn, "413 Payload Too Large", "text/plain", b"", true);
                    return;
                }
            }
        } else {
            if head.len > MAX_BODY {
                respond(&mut conn, "413 Payload Too Large", "text/plain", b"", true);
                return;
            }
            while buf.len() < head.len {
                if !more(&mut conn, &mut buf) {
                    return;
                }
            }
            buf.drain(..head.len).collect()
        };
        // OpenTelemetry's HTTP exporters post to an endpoint given them in code verbatim
        // (vLLM's `--otlp-traces-endpoint http://HOST:PORT` posts to `/`), and append
        // `/v1/traces` only to one from the environment: both paths are taken.
        let path = head.path.split('?').next();
        let keep = if head.method != "POST" || !matches!(path, Some("/v1/traces" | "/")) {
            respond(
                &mut conn,
                "404 Not Found",
                "text/plain",
                b"ringperf receives OTLP traces at POST /v1/traces (or /)",
                head.close,
            )
        } else {
            match decode(&body, &head.content_type, head.content_encoding.as_deref()) {
                Ok(req) => {
                    let e = spans_of(&req);
                    got.0.lock().unwrap_or_else(|e| e.into_inner()).take(e);
                    got.1.notify_all();
                    // An empty ExportTraceServiceResponse: all taken.
                    let json = head.content_type.contains("json");
                    let (ty, body): (&str, &[u8]) = if json {
                        ("application/json", b"{}")
                    } else {
                        ("application/x-protobuf", b"")
                    };
                    respond(&mut conn, "200 OK", ty, body, head.close)
                }
                Err(e) => {
                    let why = e.to_string();
                    let status = match e {
                        DecodeError::ContentType(_) => "415 Unsupported Media Type",
                        _ => "400 Bad Request",
                    };
                    got.0
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .refuse(why.clone());
                    respond(&mut conn, status, "text/plain", why.as_bytes(), head.close)
                }
            }
        };
        if !keep {
            return;
        }
    }
}

/// Checks an OTLP/HTTP endpoint URL (`http://HOST:PORT[/PATH]`).
pub(crate) fn check_url(url: &str) -> Result<(), Error> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| Error::Url(url.into()))?;
    let authority = rest.split('/').next().unwrap_or("");
    match authority.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => Ok(()),
        _ => Err(Error::Url(url.into())),
    }
}

/// Posts one export to `url` (`http://HOST:PORT[/PATH]`, the path `/v1/traces` when none is
/// given),
/// blocking, with `timeout`: the simulator's exporter.
pub(crate) fn post(url: &str, body: &[u8], enc: Encoding, timeout: Duration) -> Result<(), Error> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| Error::Url(url.into()))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/v1/traces"),
    };
    let resolve = |why: String| Error::Resolve {
        authority: authority.into(),
        why,
    };
    let addr = std::net::ToSocketAddrs::to_socket_addrs(authority)
        .map_err(|e| resolve(e.to_string()))?
        .next()
        .ok_or_else(|| resolve("no address".into()))?;
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        enc.content_type(),
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    let to = crate::blocking::To { addr, tls: None };
    let answer = crate::blocking::fetch(&to, &request, timeout, 64 << 10)?;
    if answer.status == 200 {
        Ok(())
    } else {
        Err(Error::Status {
            status: answer.status,
            body: crate::redact::server_bytes(&answer.body, 300),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(id: u64, queue: Option<u64>) -> Out {
        Out {
            request_id: format!("chatcmpl-{id:016x}"),
            start_unix_ns: 1_700_000_000_000_000_000 + id,
            end_unix_ns: 1_700_000_000_100_000_000,
            phases: Phases {
                queue_ns: queue,
                prefill_ns: Some(20_000_000),
                decode_ns: Some(36_000_000),
                inference_ns: Some(56_000_000),
                ttft_ns: Some(20_500_000),
                e2e_ns: Some(57_000_000),
            },
            tokens: (100, 10),
        }
    }

    #[test]
    fn the_request_number_is_the_sixteen_digit_token() {
        assert_eq!(request_number("chatcmpl-00000000000000a3"), Some(0xa3));
        assert_eq!(request_number("cmpl-00000000000000a3-0"), Some(0xa3));
        assert_eq!(request_number("00000000000000a3"), Some(0xa3));
        // A UUID's groups are 8, 4, 4, 4 and 12 digits: none of them is an id.
        assert_eq!(
            request_number("chatcmpl-3f2a9c1e-0b7d-4e21-9a5c-1d2e3f4a5b6c"),
            None
        );
        assert_eq!(request_number("chatcmpl-00000000000000a"), None);
        assert_eq!(request_number("chatcmpl-00000000000000a3f"), None);
    }

    #[test]
    fn an_export_round_trips_in_protobuf_json_and_gzip() {
        let spans = [out(7, Some(3_000_000)), out(8, None)];
        for enc in [Encoding::Protobuf, Encoding::Json] {
            let body = encode("sim", &spans, enc);
            let req = decode(&body, enc.content_type(), None).unwrap();
            let e = spans_of(&req);
            assert_eq!(e.other, 0);
            assert_eq!(e.spans.len(), 2);
            assert_eq!(e.spans[0].id, 7);
            assert_eq!(e.spans[0].start_unix_ns, spans[0].start_unix_ns);
            assert_eq!(e.spans[0].phases, spans[0].phases);
            assert_eq!(e.spans[1].phases.queue_ns, None);
            // The same, gzipped.
            let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(&body).unwrap();
            let zipped = z.finish().unwrap();
            let again = decode(&zipped, enc.content_type(), Some("gzip")).unwrap();
            assert_eq!(spans_of(&again), e);
        }
        let json = String::from_utf8(encode("sim", &spans, Encoding::Json)).unwrap();
        // OTLP's JSON mapping: camelCase names, 64-bit integers as strings, hex ids.
        assert!(json.contains("\"resourceSpans\""), "{json}");
        assert!(
            json.contains("\"startTimeUnixNano\":\"1700000000000000007\""),
            "{json}"
        );
    }

    #[test]
    fn other_spans_and_bad_bodies_are_told_apart() {
        let mut body = encode("sim", &[out(1, None)], Encoding::Protobuf);
        let mut req = decode(&body, "application/x-protobuf", None).unwrap();
        let span = &mut req.resource_spans[0].scope_spans[0].spans[0];
        span.name = "http_request".into();
        assert_eq!(spans_of(&req).other, 1);
        assert!(matches!(
            decode(&body, "text/plain", None),
            Err(DecodeError::ContentType(_))
        ));
        assert!(matches!(
            decode(&body, "application/x-protobuf", Some("br")),
            Err(DecodeError::ContentEncoding(_))
        ));
        body.truncate(body.len() / 2);
        assert!(matches!(
            decode(&body, "application/x-protobuf", None),
            Err(DecodeError::Body(_))
        ));
        assert!(matches!(
            decode(b"{\"resourceSpans\": 3}", "application/json", None),
            Err(DecodeError::Body(_))
        ));
    }

    #[test]
    fn the_receiver_takes_exports_over_http_and_refuses_what_it_cannot_read() {
        let r = Receiver::start("127.0.0.1:0").unwrap();
        let url = format!("{}/v1/traces", r.endpoint());
        let t = Duration::from_secs(5);
        let body = encode("sim", &[out(1, None), out(2, Some(5))], Encoding::Protobuf);
        post(&url, &body, Encoding::Protobuf, t).unwrap();
        let json = encode("sim", &[out(3, None)], Encoding::Json);
        post(&r.endpoint(), &json, Encoding::Json, t).unwrap();
        // vLLM's exporter, given http://HOST:PORT, posts to `/` (taken: `post` sends the
        // given path); any other path is refused.
        let at_root = encode("sim", &[out(4, None)], Encoding::Protobuf);
        post(
            &format!("{}/", r.endpoint()),
            &at_root,
            Encoding::Protobuf,
            t,
        )
        .unwrap();
        let err = post(
            &format!("{}/v1/logs", r.endpoint()),
            &at_root,
            Encoding::Protobuf,
            t,
        )
        .unwrap_err();
        assert!(matches!(err, Error::Status { status: 404, .. }), "{err}");
        // A body that is not an export: refused with 400, counted.
        let err = post(&url, b"\xff\xff\xff", Encoding::Protobuf, t).unwrap_err();
        assert!(matches!(err, Error::Status { status: 400, .. }), "{err}");
        let stop = AtomicBool::new(false);
        let until = Instant::now() + t;
        assert_eq!(r.wait_for(&[1, 2, 3, 4], until, &stop), 4);
        let got = r.take();
        assert_eq!((got.exports, got.refused, got.duplicates), (3, 1, 0));
        assert_eq!(got.spans[&2].phases.queue_ns, Some(5));
        assert!(got.first_refusal.is_some());
        // A wait for a span that never comes ends at its deadline.
        let until = Instant::now() + Duration::from_millis(50);
        assert_eq!(r.wait_for(&[9], until, &stop), 0);
    }
}
