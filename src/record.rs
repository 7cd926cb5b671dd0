//! What ringperf keeps about each request.
//!
//! A failed request is data, not an error: its [`Outcome`] says what happened, is counted by
//! kind, and the request is excluded from latency distributions (as in GenAI-Perf and AIPerf).

use std::borrow::Cow;

use serde::Serialize;

/// Which part of the run a request belonged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Warm-up requests, excluded from every metric.
    Warmup,
    /// Sent while load was still ramping up (`--ramp-up`); excluded unless asked.
    RampUp,
    /// Measured requests.
    Profiling,
}

/// How a request ended. Bounded in size; every kind is counted separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A complete, successful response.
    Ok,
    /// The server answered with this non-2xx status.
    HttpStatus(u16),
    /// The server reported an error inside a 200 stream or body.
    ServerError,
    /// The connection could not be opened.
    ConnectFailed,
    /// Opening the connection took longer than `--connect-timeout`.
    ConnectTimeout,
    /// The TLS handshake failed.
    TlsFailed,
    /// The request took longer than `--request-timeout`.
    RequestTimeout,
    /// The connection was reset or failed mid-request.
    Reset,
    /// The server closed the connection before the response was complete.
    ClosedEarly,
    /// The response broke HTTP/1.1 framing.
    BadHttp,
    /// An event or body was not valid JSON.
    BadJson,
    /// The response head exceeded its cap (64 KiB).
    HeaderTooLarge,
    /// One server-sent event exceeded its cap (512 KiB): a line or an event that never ends.
    EventTooLarge,
    /// A whole (non-streamed) successful body exceeded its cap (4 MiB).
    BodyTooLarge,
    /// A successful response that carried no generated text (empty `choices`, an empty body,
    /// only tool calls): there is no first token to time, so it is not counted as `ok`.
    NoContent,
    /// Cut short by Ctrl-C or by the end of the grace period.
    Cancelled,
    /// Closed by the client on purpose, `--request-cancellation-delay` after it was sent
    /// (`--request-cancellation-rate`): counted apart, neither an error nor a success.
    RequestCancelled,
}

impl Outcome {
    /// A stable short name, used in artifacts and the console.
    pub fn name(&self) -> String {
        match self {
            Outcome::Ok => "ok".into(),
            Outcome::HttpStatus(s) => format!("http_{s}"),
            Outcome::ServerError => "server_error".into(),
            Outcome::ConnectFailed => "connect_failed".into(),
            Outcome::ConnectTimeout => "connect_timeout".into(),
            Outcome::TlsFailed => "tls_failed".into(),
            Outcome::RequestTimeout => "request_timeout".into(),
            Outcome::Reset => "connection_reset".into(),
            Outcome::ClosedEarly => "closed_early".into(),
            Outcome::BadHttp => "bad_http".into(),
            Outcome::BadJson => "bad_json".into(),
            Outcome::HeaderTooLarge => "header_too_large".into(),
            Outcome::EventTooLarge => "event_too_large".into(),
            Outcome::BodyTooLarge => "body_too_large".into(),
            Outcome::NoContent => "no_content".into(),
            Outcome::Cancelled => "cancelled".into(),
            Outcome::RequestCancelled => "request_cancelled".into(),
        }
    }

    /// Its place in [`LIVE_KINDS`] (HTTP statuses by class), for the live counters; `ok` has
    /// none.
    pub fn live_kind(&self) -> Option<usize> {
        Some(match self {
            Outcome::Ok => return None,
            Outcome::HttpStatus(s) if (400..500).contains(s) => 0,
            Outcome::HttpStatus(s) if (500..600).contains(s) => 1,
            Outcome::HttpStatus(_) => 2,
            Outcome::ServerError => 3,
            Outcome::ConnectFailed => 4,
            Outcome::ConnectTimeout => 5,
            Outcome::TlsFailed => 6,
            Outcome::RequestTimeout => 7,
            Outcome::Reset => 8,
            Outcome::ClosedEarly => 9,
            Outcome::BadHttp => 10,
            Outcome::BadJson => 11,
            Outcome::HeaderTooLarge => 12,
            Outcome::EventTooLarge => 13,
            Outcome::BodyTooLarge => 14,
            Outcome::NoContent => 15,
            Outcome::Cancelled => 16,
            Outcome::RequestCancelled => 17,
        })
    }

    /// The code AIPerf's `error_summary` would show.
    pub fn code(&self) -> u16 {
        match self {
            Outcome::Ok => 200,
            Outcome::HttpStatus(s) => *s,
            // "Client Closed Request", as AIPerf records its cancellations.
            Outcome::RequestCancelled => 499,
            _ => 0,
        }
    }
}

/// The outcomes other than `ok` as the live view counts them, by [`Outcome::live_kind`]: the
/// artifacts' names, with HTTP statuses by class.
pub const LIVE_KINDS: [&str; 18] = [
    "http_4xx",
    "http_5xx",
    "http_other",
    "server_error",
    "connect_failed",
    "connect_timeout",
    "tls_failed",
    "request_timeout",
    "connection_reset",
    "closed_early",
    "bad_http",
    "bad_json",
    "header_too_large",
    "event_too_large",
    "body_too_large",
    "no_content",
    "cancelled",
    "request_cancelled",
];

/// Where the output token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server's `usage.completion_tokens`.
    Usage,
    /// The response text re-tokenized with the run's tokenizer.
    Tokenizer,
}

/// What a request's start time is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StartSource {
    /// The kernel's transmit stamp of the request's last byte (`SO_TIMESTAMPING`).
    KernelTx,
    /// The clock read just before the request's bytes were handed to the kernel.
    Write,
}

/// The HTTP phases' names (k6's and AIPerf's), in [`Record::http_phases`]' order.
pub const HTTP_PHASES: [&str; 6] = [
    "http_req_connecting",
    "http_req_tls_handshaking",
    "http_req_sending",
    "http_req_waiting",
    "http_req_receiving",
    "http_req_duration",
];

/// One request, as measured. Times are `CLOCK_MONOTONIC` nanoseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// Global request number; its hex form is the `X-Request-ID` sent.
    pub id: u64,
    /// Shard that sent it.
    pub shard: u16,
    /// Warm-up or measured.
    pub phase: Phase,
    /// Dataset entry used.
    pub entry: u32,
    /// When the schedule wanted it sent (open-loop modes only).
    pub intended_ns: Option<u64>,
    /// When the client meant to send it: the intended time (open loop), or when the request
    /// whose place it took ended (closed loop; none while the concurrency cap first fills).
    pub due_ns: Option<u64>,
    /// When its bytes went to the kernel (see `start_source`).
    pub start_ns: u64,
    /// How `start_ns` was taken.
    pub start_source: StartSource,
    /// When the response ended (or the request failed).
    pub end_ns: u64,
    /// First content event.
    pub first_content_ns: Option<u64>,
    /// Second content event.
    pub second_content_ns: Option<u64>,
    /// First non-reasoning content event.
    pub first_output_ns: Option<u64>,
    /// Last content event.
    pub last_content_ns: Option<u64>,
    /// Gaps between consecutive content events (ns): the first [`GAPS_KEPT`] exactly.
    pub chunk_gaps_ns: Vec<u64>,
    /// The gaps past the first [`GAPS_KEPT`] (a response of a million tiny events), in a
    /// histogram of the distributions' layout: a response costs bounded memory whatever its
    /// shape.
    #[serde(skip)]
    pub chunk_gaps_more: Option<Box<hdrhistogram::Histogram<u32>>>,
    /// Input tokens as sent (tokenizer count; a file's prompts are counted after the run,
    /// and one left uncounted, by an error or a stop, stays `None`).
    pub isl: Option<u32>,
    /// Server-reported prompt tokens.
    pub server_isl: Option<u64>,
    /// Server-reported prompt tokens its prefix (prompt) cache served
    /// (`usage.prompt_tokens_details.cached_tokens`).
    pub server_cached: Option<u32>,
    /// Output tokens, once known.
    pub osl: Option<u64>,
    /// Where `osl` came from.
    pub osl_source: Option<TokenSource>,
    /// The tokenizer's count of the output, kept for a sample of requests that also had
    /// server usage, to check that `--tokenizer` matches the served model.
    pub tokenizer_osl: Option<u64>,
    /// Output tokens the request asked for (`max_tokens`), if any.
    pub requested_osl: Option<u32>,
    /// The server's `finish_reason` (see [`Record::set_finish_reason`]).
    pub finish_reason: Option<Cow<'static, str>>,
    /// How it ended.
    pub outcome: Outcome,
    /// Error text (server message or local reason).
    pub error: Option<String>,
    /// True if it ran on a fresh connection after a reused one turned out dead.
    pub reconnected: bool,
    /// True if it opened a new connection because the server had closed its place's last
    /// one after a whole response (`Connection: close`, as llama.cpp may).
    pub new_connection: bool,
    /// Multi-turn sessions: the session's number and this turn's index.
    pub session: Option<(u64, u32)>,
    /// ringperf's simulator only: when the request reached its kernel (its own stamp).
    pub sim_arrived_ns: Option<u64>,
    /// ringperf's simulator only: when it wrote the first content event.
    pub sim_first_sent_ns: Option<u64>,
    /// True when the request was in flight while its shard was starved of CPU.
    pub client_starved: bool,
    /// When the first content event came in one read with a later one, so carries that
    /// one's arrival stamp (the kernel keeps one stamp for bytes queued together): the most
    /// its TTFT can be overstated, from the arrival stamp of the read before (or the send)
    /// to this read's, as the first token arrived after the read before emptied the socket
    /// (ns; at least 1). 0 when it was read alone.
    pub first_token_shared_ns: u64,
    /// How long the request waited for a place under `--prefill-concurrency` before it was
    /// sent (ns; 0 without the cap): a wait of the client, not part of its TTFT.
    pub prefill_wait_ns: u64,
    /// Chosen by `--request-cancellation-rate`: the client closes it after the delay if it
    /// has not ended by then.
    pub to_cancel: bool,
    /// Holds a place under `--prefill-concurrency` until its first token.
    #[serde(skip)]
    pub holds_prefill: bool,
    /// The HTTP phases (k6's and AIPerf's `http_req_*`): opening its connection, TCP connect
    /// and TLS handshake (µs; 0 on a connection kept alive), handing the request to the
    /// kernel (ns), and the first response byte's arrival after `start_ns` (µs; 0 before
    /// any).
    pub connect_us: u32,
    /// See `connect_us`.
    pub tls_us: u32,
    /// See `connect_us`.
    pub sending_ns: u32,
    /// See `connect_us`.
    pub first_byte_us: u32,
    /// The server it went to (`--url` repeated: their index, in order).
    pub server: u16,
    /// Image generation: the images the answer held.
    pub images: u32,
    /// Response text kept for re-tokenizing when the server sent no usage; emptied after.
    #[serde(skip)]
    pub text: String,
    /// Keep `text` even when the server reports usage (a session needs the real answer).
    #[serde(skip)]
    pub keep_text: bool,
}

impl Record {
    /// A record for a request that has not been sent yet.
    pub fn new(id: u64, shard: u16, phase: Phase, entry: u32, isl: Option<u32>) -> Record {
        Record {
            id,
            shard,
            phase,
            entry,
            intended_ns: None,
            due_ns: None,
            start_ns: 0,
            start_source: StartSource::Write,
            end_ns: 0,
            first_content_ns: None,
            second_content_ns: None,
            first_output_ns: None,
            last_content_ns: None,
            chunk_gaps_ns: Vec::new(),
            chunk_gaps_more: None,
            isl,
            server_isl: None,
            server_cached: None,
            osl: None,
            osl_source: None,
            tokenizer_osl: None,
            requested_osl: None,
            finish_reason: None,
            outcome: Outcome::Ok,
            error: None,
            reconnected: false,
            new_connection: false,
            session: None,
            sim_arrived_ns: None,
            sim_first_sent_ns: None,
            client_starved: false,
            first_token_shared_ns: 0,
            prefill_wait_ns: 0,
            to_cancel: false,
            holds_prefill: false,
            connect_us: 0,
            tls_us: 0,
            sending_ns: 0,
            first_byte_us: 0,
            server: 0,
            images: 0,
            text: String::new(),
            keep_text: false,
        }
    }

    /// Adds the gap before a content event: kept exactly up to [`GAPS_KEPT`], then in
    /// [`Record::chunk_gaps_more`].
    #[inline]
    pub fn push_gap(&mut self, g: u64) {
        if self.chunk_gaps_ns.len() < GAPS_KEPT {
            self.chunk_gaps_ns.push(g);
        } else {
            let h = self
                .chunk_gaps_more
                .get_or_insert_with(|| Box::new(crate::stats::empty_histogram()));
            let _ = h.record(g.min(crate::stats::MAX_VALUE));
        }
    }

    /// How many gaps between content events the response had.
    pub fn gap_count(&self) -> u64 {
        self.chunk_gaps_ns.len() as u64 + self.chunk_gaps_more.as_ref().map_or(0, |h| h.len())
    }

    /// How many of those gaps were zero (events read together).
    pub fn zero_gaps(&self) -> u64 {
        let exact = self.chunk_gaps_ns.iter().filter(|g| **g == 0).count() as u64;
        exact
            + self
                .chunk_gaps_more
                .as_ref()
                .map_or(0, |h| u64::from(h.count_at(0)))
    }

    /// Keeps the server's `finish_reason`; the usual ones without an allocation, which would
    /// outlive the request's buffers among them and so keep their memory from the next ones.
    pub fn set_finish_reason(&mut self, f: &str) {
        /// The most characters kept of a finish reason (an ellipsis marks a cut one).
        const FINISH_REASON_CAP: usize = 64;
        const KNOWN: [&str; 6] = [
            "stop",
            "length",
            "tool_calls",
            "content_filter",
            "abort",
            "eos_token",
        ];
        // Another is a server's text, kept short (a 400 KB value once cost 390 KB a request).
        self.finish_reason = Some(match KNOWN.iter().find(|k| **k == f) {
            Some(k) => Cow::Borrowed(k),
            None => Cow::Owned(crate::redact::server_text(f, FINISH_REASON_CAP)),
        });
    }

    /// When it was tried: its send, or, for a connection that could not be opened (nothing
    /// was sent), its end.
    pub fn tried_ns(&self) -> u64 {
        if self.start_ns > 0 {
            self.start_ns
        } else {
            self.end_ns
        }
    }

    /// True for a measured request that was sent (whatever came of it).
    pub fn is_measured_sent(&self) -> bool {
        self.phase == Phase::Profiling && self.start_ns > 0
    }

    /// True for a successful measured request.
    pub fn is_measured_ok(&self) -> bool {
        self.phase == Phase::Profiling && self.outcome == Outcome::Ok
    }

    /// Time to first token, from the actual send.
    pub fn ttft(&self) -> Option<u64> {
        self.first_content_ns
            .map(|t| t.saturating_sub(self.start_ns))
    }

    /// Time to first non-reasoning token.
    pub fn ttfo(&self) -> Option<u64> {
        self.first_output_ns
            .map(|t| t.saturating_sub(self.start_ns))
    }

    /// Time from the first to the second content event.
    pub fn ttst(&self) -> Option<u64> {
        Some(
            self.second_content_ns?
                .saturating_sub(self.first_content_ns?),
        )
    }

    /// Request latency: last content event (or end of a non-streamed response) − start.
    pub fn latency(&self) -> u64 {
        self.last_content_ns
            .unwrap_or(self.end_ns)
            .saturating_sub(self.start_ns)
    }

    /// Time to first token from the intended send time (open loop): what a user arriving
    /// on schedule waited, client lateness included (no coordinated omission).
    pub fn scheduled_ttft(&self) -> Option<u64> {
        Some(self.first_content_ns?.saturating_sub(self.intended_ns?))
    }

    /// Request latency from the intended send time (open loop).
    pub fn scheduled_latency(&self) -> Option<u64> {
        let end = self.last_content_ns.unwrap_or(self.end_ns);
        Some(end.saturating_sub(self.intended_ns?))
    }

    /// The HTTP phases, k6's and AIPerf's names with their values (ns): connecting and TLS
    /// handshaking (0 on a kept-alive connection), sending, waiting (the last request byte to
    /// the first response byte) and receiving (the first response byte to the last), and
    /// their duration (sending + waiting + receiving). `None` before a response byte came.
    pub fn http_phases(&self) -> Option<[(&'static str, u64); HTTP_PHASES.len()]> {
        if self.first_byte_us == 0 {
            return None;
        }
        let first_byte = self.start_ns + u64::from(self.first_byte_us) * 1000;
        let sending = u64::from(self.sending_ns);
        // A write stamp is taken before the bytes go: the send is inside the wait.
        let sent = match self.start_source {
            StartSource::Write => self.start_ns + sending,
            StartSource::KernelTx => self.start_ns,
        };
        let waiting = first_byte.saturating_sub(sent);
        let receiving = self.end_ns.saturating_sub(first_byte);
        let values = [
            u64::from(self.connect_us) * 1000,
            u64::from(self.tls_us) * 1000,
            sending,
            waiting,
            receiving,
            sending + waiting + receiving,
        ];
        Some(std::array::from_fn(|i| (HTTP_PHASES[i], values[i])))
    }

    /// How late the client sent the request: start − when it meant to send it, less the
    /// wait for a place under `--prefill-concurrency` (a wait that was asked for).
    pub fn dispatch_delay(&self) -> Option<u64> {
        Some(
            self.start_ns
                .saturating_sub(self.due_ns?.saturating_add(self.prefill_wait_ns)),
        )
    }

    /// The first content event came in one read with a later one (see
    /// [`Record::first_token_shared_ns`]).
    pub fn first_token_shared_read(&self) -> bool {
        self.first_token_shared_ns > 0
    }

    /// ringperf's simulator only: the error the client added to this request's TTFT, as
    /// (send side, receive side): from the client's start to the simulator's arrival stamp,
    /// and from the simulator's send stamp of the first content event to the client's.
    pub fn client_added(&self) -> Option<(u64, u64)> {
        let send = self.sim_arrived_ns?.saturating_sub(self.start_ns);
        let recv = self
            .first_content_ns?
            .saturating_sub(self.sim_first_sent_ns?);
        Some((send, recv))
    }

    /// Inter-token latency, (e2e − TTFT) / (OSL − 1), in ns; needs OSL ≥ 2 and a TTFT.
    pub fn itl(&self) -> Option<f64> {
        let osl = self.osl?;
        // Tokens that all came in one chunk have no time between them (GenAI-Perf leaves such
        // a request out of ITL rather than counting it as 0).
        if osl < 2 || self.second_content_ns.is_none() {
            return None;
        }
        let ttft = self.ttft()?;
        Some((self.latency() - ttft) as f64 / (osl - 1) as f64)
    }
}

/// Records per block of a [`RecordLog`] (about 350 KiB).
const LOG_BLOCK: usize = 1024;
/// Words per block of a [`RecordLog`]'s gap store (256 KiB).
const GAP_BLOCK: usize = 64 * 1024;
/// A gap-store word that says the value is in the two words after it (high, then low): gaps
/// of 4.3 s or more, which a stalled stream can have.
const WIDE: u32 = u32::MAX;

/// A shard's finished requests, kept in fixed-size blocks, with their inter-chunk gaps moved
/// into blocks of their own until [`RecordLog::move_into`]. A single growing array would be
/// copied at each doubling and leave the old copy's pages behind in the allocator, and each
/// record's own small gap array, allocated among the short-lived buffers of requests in flight,
/// would pin their pages: together they about doubled the memory the records took. Gaps are
/// stored as 32-bit words (nanoseconds; wider values escaped), half the size of the record's
/// array: with tokens in chunks of one, gaps are most of what a long run keeps.
#[derive(Debug, Default)]
pub struct RecordLog {
    blocks: Vec<Vec<Record>>,
    /// Each record's gap count, then its gaps, in the records' order (see [`push_value`]).
    gaps: Vec<Vec<u32>>,
    /// Failed requests kept one by one so far, by the clock second they ended in (a record
    /// can come a while after it ended: its place's back-off comes first).
    failed_per_second: std::collections::BTreeMap<u64, u32>,
    /// Failed requests only counted, by phase and outcome (see [`FAILED_RECORDS_PER_SECOND`]).
    pub unrecorded: std::collections::BTreeMap<(Phase, Outcome), Unrecorded>,
}

/// A shard keeps at most this many failed requests one by one in each second; past it,
/// failures are counted by kind (with the first one's message) and not kept each as a record:
/// a dead server at a concurrency of thousands fails thousands of times a second, and would
/// otherwise grow the records and `profile_export.jsonl` by megabytes a second (here at most
/// about 0.2 MB a second a shard).
pub const FAILED_RECORDS_PER_SECOND: u32 = 200;

/// Failed requests counted but not kept one by one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unrecorded {
    /// How many.
    pub count: u64,
    /// The first one's error.
    pub error: Option<String>,
    /// The earliest send among them (a connection that could not be opened: its end).
    pub first_start_ns: u64,
    /// The latest end among them.
    pub last_end_ns: u64,
}

impl Unrecorded {
    /// None yet, the first one's error being `error`.
    pub fn new(error: Option<String>) -> Unrecorded {
        Unrecorded {
            count: 0,
            error,
            first_start_ns: 0,
            last_end_ns: 0,
        }
    }

    /// Counts `count` more, the earliest sent at `first_start_ns` (0: none known) and the
    /// last ended at `last_end_ns`.
    pub fn add(&mut self, count: u64, first_start_ns: u64, last_end_ns: u64) {
        self.count += count;
        if first_start_ns > 0 {
            self.first_start_ns = match self.first_start_ns {
                0 => first_start_ns,
                t => t.min(first_start_ns),
            };
        }
        self.last_end_ns = self.last_end_ns.max(last_end_ns);
    }
}

/// Appends `items` to `blocks`, opening a block of `cap` whenever the last one is full.
fn append<T>(blocks: &mut Vec<Vec<T>>, cap: usize, items: impl IntoIterator<Item = T>) {
    for v in items {
        match blocks.last_mut() {
            Some(b) if b.len() < cap => b.push(v),
            _ => {
                let mut b = Vec::with_capacity(cap);
                b.push(v);
                blocks.push(b);
            }
        }
    }
}

/// Appends `v` to a gap store: one word, or [`WIDE`] and two words when it does not fit below
/// it.
fn push_value(store: &mut Vec<Vec<u32>>, v: u64) {
    if v < u64::from(WIDE) {
        append(store, GAP_BLOCK, [v as u32]);
    } else {
        append(store, GAP_BLOCK, [WIDE, (v >> 32) as u32, v as u32]);
    }
}

/// Gaps a record keeps exactly (8 bytes each while the response runs, about 4 in the log);
/// past them, a histogram (see [`Record::chunk_gaps_more`]).
pub const GAPS_KEPT: usize = 8192;

/// The next value of a gap store as [`push_value`] wrote it.
fn next_value(w: &mut impl Iterator<Item = u32>) -> Option<u64> {
    match w.next()? {
        WIDE => Some(u64::from(w.next()?) << 32 | u64::from(w.next()?)),
        v => Some(u64::from(v)),
    }
}

impl RecordLog {
    /// Keeps `rec`, and gives back its gap array emptied, for the next request to fill.
    pub fn push(&mut self, mut rec: Record) -> Vec<u64> {
        let mut gaps = std::mem::take(&mut rec.chunk_gaps_ns);
        // Requests closed on purpose are as many as the load makes: kept like successes.
        let failure = !matches!(rec.outcome, Outcome::Ok | Outcome::RequestCancelled);
        if failure && !self.keeps_failure(rec.end_ns) {
            let (tried, end) = (rec.tried_ns(), rec.end_ns);
            self.unrecorded
                .entry((rec.phase, rec.outcome))
                .or_insert_with(|| Unrecorded::new(rec.error.take()))
                .add(1, tried, end);
            gaps.clear();
            return gaps;
        }
        push_value(&mut self.gaps, gaps.len() as u64);
        for g in gaps.drain(..) {
            push_value(&mut self.gaps, g);
        }
        append(&mut self.blocks, LOG_BLOCK, [rec]);
        gaps
    }

    /// Whether a failure that ended at `t` is kept one by one (see
    /// [`FAILED_RECORDS_PER_SECOND`]).
    fn keeps_failure(&mut self, t: u64) -> bool {
        let second = t / 1_000_000_000;
        let n = self.failed_per_second.entry(second).or_insert(0);
        *n += 1;
        let kept = *n <= FAILED_RECORDS_PER_SECOND;
        // Records come at most a few seconds after they end: older seconds are done with.
        if self.failed_per_second.len() > 64 {
            self.failed_per_second = self.failed_per_second.split_off(&second.saturating_sub(16));
        }
        kept
    }

    /// Records kept.
    pub fn len(&self) -> usize {
        self.blocks.iter().map(Vec::len).sum()
    }

    /// True when none is kept.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The records as kept, without their gaps (which come back with [`RecordLog::move_into`]).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Record> {
        self.blocks.iter_mut().flatten()
    }

    /// Appends the records, in the order kept and with their gaps back, to `all` (reserve
    /// room first: every copy costs the records' size again); each block is freed as soon as
    /// it is used up.
    pub fn move_into(self, all: &mut Vec<Record>) {
        debug_assert!(
            self.unrecorded.is_empty(),
            "take the unrecorded failures first"
        );
        let mut w = self.gaps.into_iter().flatten();
        for mut rec in self.blocks.into_iter().flatten() {
            let n = next_value(&mut w).unwrap_or(0) as usize;
            rec.chunk_gaps_ns = Vec::with_capacity(n);
            rec.chunk_gaps_ns
                .extend(std::iter::from_fn(|| next_value(&mut w)).take(n));
            all.push(rec);
        }
    }
}

/// One reading of a server's requests in flight: by `t_ns`, `integral` request·nanoseconds
/// had accumulated; its rise over a window divided by the window's length is the mean number
/// of requests in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlightSample {
    /// `CLOCK_MONOTONIC` ns.
    pub t_ns: u64,
    /// Σ requests in flight × time (request·ns).
    pub integral: u128,
    /// The server's own lateness, where it knows it (ringperf's simulator): events written
    /// more than [`LATE_NS`] after they were due, so far.
    pub late_events: u64,
    /// The most an event was written after it was due since the previous sample (ns).
    pub worst_late_ns: u64,
}

/// An event the simulator writes more than this after it was due is late (its timer may
/// leave up to 0.1 ms early or late by design).
pub const LATE_NS: u64 = 1_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_past_the_allowance_of_their_second_are_counted_not_kept() {
        let mut log = RecordLog::default();
        // 600 failures ending in two seconds, pushed out of order (as back-offs delay them).
        for i in 0..600u64 {
            let mut r = Record::new(i, 0, Phase::Profiling, 0, None);
            r.outcome = Outcome::ConnectFailed;
            r.error = Some("refused".into());
            r.end_ns = (1 + i % 2) * 1_000_000_000 + i;
            r.start_ns = r.end_ns - 100;
            log.push(r);
        }
        let mut ok = Record::new(600, 0, Phase::Profiling, 0, None);
        ok.end_ns = 1_000_000_000;
        log.push(ok);
        assert_eq!(log.len(), 2 * FAILED_RECORDS_PER_SECOND as usize + 1);
        let u = &log.unrecorded[&(Phase::Profiling, Outcome::ConnectFailed)];
        assert_eq!(u.count, 600 - 2 * u64::from(FAILED_RECORDS_PER_SECOND));
        assert_eq!(u.error.as_deref(), Some("refused"));
        // Their span stays known, for the run's window: the first counted send (failure 400,
        // the 201st of its second) and the last end (failure 599).
        assert_eq!(
            (u.first_start_ns, u.last_end_ns),
            (1_000_000_300, 2_000_000_599)
        );
    }

    #[test]
    fn gaps_past_the_kept_ones_are_counted_in_a_histogram() {
        let mut r = Record::new(1, 0, Phase::Profiling, 0, None);
        let n = GAPS_KEPT as u64 + 1000;
        for i in 0..n {
            r.push_gap(if i % 2 == 0 { 0 } else { 1_000 + i });
        }
        assert_eq!(r.chunk_gaps_ns.len(), GAPS_KEPT);
        assert!(r.chunk_gaps_ns.capacity() < 2 * GAPS_KEPT);
        assert_eq!(r.gap_count(), n);
        assert_eq!(r.zero_gaps(), n / 2);
        let mut d = crate::stats::Dist::keeping_values();
        for g in &r.chunk_gaps_ns {
            d.record(*g);
        }
        d.add_histogram(r.chunk_gaps_more.as_ref().unwrap());
        d.seal();
        // Every gap is in the figures, those of the histogram to its precision.
        assert_eq!(d.count(), n);
        assert_eq!(d.percentile(100.0), 1_000 + n - 1);
        assert!(!d.is_exact());
    }

    #[test]
    fn derived_metrics_follow_genai_perf() {
        let mut r = Record::new(1, 0, Phase::Profiling, 0, Some(10));
        r.start_ns = 1_000;
        r.first_content_ns = Some(51_000);
        r.second_content_ns = Some(61_000);
        r.last_content_ns = Some(141_000);
        r.osl = Some(10);
        assert_eq!(r.ttft(), Some(50_000));
        assert_eq!(r.ttst(), Some(10_000));
        assert_eq!(r.latency(), 140_000);
        assert_eq!(r.itl(), Some(10_000.0));
        r.osl = Some(1);
        assert_eq!(r.itl(), None);
        assert_eq!(Outcome::HttpStatus(404).name(), "http_404");
        assert_eq!(Outcome::HttpStatus(404).code(), 404);
        r.set_finish_reason("length");
        assert!(matches!(r.finish_reason, Some(Cow::Borrowed("length"))));
        r.set_finish_reason("my_reason");
        assert_eq!(r.finish_reason.as_deref(), Some("my_reason"));
    }

    #[test]
    fn a_record_log_gives_back_every_record_and_its_gaps_in_order() {
        let mut log = RecordLog::default();
        assert!(log.is_empty());
        // Enough records and gaps to cross blocks of both, one record's gaps straddling two.
        let n = 2 * LOG_BLOCK + 3;
        // Some gaps too wide for one word, at the edge and far past it.
        let gaps_of = |id: u64| {
            (0..id % 97)
                .map(move |k| match k % 31 {
                    7 => u64::from(WIDE) - 1 + id % 3,
                    13 => u64::MAX - id,
                    _ => id * 1_000 + k,
                })
                .collect::<Vec<_>>()
        };
        for id in 0..n as u64 {
            let mut r = Record::new(id, 0, Phase::Profiling, 0, Some(1));
            r.chunk_gaps_ns = gaps_of(id);
            let back = log.push(r);
            assert!(back.is_empty());
            assert_eq!(back.capacity(), gaps_of(id).capacity());
        }
        assert_eq!(log.len(), n);
        assert_eq!(log.blocks.len(), 3);
        assert!(log.gaps.len() >= 2);
        assert!(log.iter_mut().map(|r| r.id).eq(0..n as u64));
        let mut all = vec![Record::new(u64::MAX, 0, Phase::Warmup, 0, Some(1))];
        log.move_into(&mut all);
        assert_eq!(all.remove(0).id, u64::MAX);
        for (id, r) in all.iter().enumerate() {
            assert_eq!(r.id, id as u64);
            assert_eq!(r.chunk_gaps_ns, gaps_of(id as u64), "record {id}");
            assert_eq!(r.chunk_gaps_ns.capacity(), r.chunk_gaps_ns.len());
        }
    }
}
