//! Merging the shards and reporting what they measured, with the metric definitions of
//! GenAI-Perf and AIPerf.
//!
//! Run-level rates use the measured window: `Tx` = first measured request's start, `Ty` = the
//! end of the last measured request of any outcome (a success's last content event, a
//! failure's end), as AIPerf's benchmark duration. Failed requests are left out of every
//! distribution and counted by kind.

pub mod about;
pub mod compare;
pub mod console;
pub(crate) mod export;
pub mod gates;
mod goodput;
mod health;
pub mod html;
pub mod intervals;
/// Merging the runs of one load split across nodes.
pub mod merge;
mod metrics;
/// What each run writes for merging.
pub mod node;
pub mod peer;
pub mod phases;
pub mod plot;
pub mod server;
pub mod staircase;
pub mod sweep;
pub mod tally;
pub mod timeslices;
pub mod trace_analysis;
pub mod verdict;

pub use goodput::Goodput;
pub use health::{Distortion, Health, Held, MoveNote, SelfCheck, ShardHealth};
pub use metrics::Metrics;
pub use tally::{Beside, Counts, Tally};

use crate::warning::{Code, Warning};
use std::collections::BTreeMap;

use crate::engine::RunOutput;
use crate::record::{Outcome, Record, TokenSource};
use crate::stats::Dist;

/// One row of the error summary.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ErrorCount {
    /// HTTP status (0 when no response).
    pub code: u16,
    /// Kind of failure.
    pub kind: String,
    /// A representative message.
    pub message: String,
    /// How many requests failed this way.
    pub count: u64,
}

/// The whole run, merged.
pub struct Report {
    /// Distributions over measured, successful requests.
    pub metrics: Metrics,
    /// Client-added delay of simulator-stamped events (ns).
    pub client_delay: Dist,
    /// Time from each read's arrival (kernel stamp, else read completion) to its events being recorded (ns).
    pub record_lag: Dist,
    /// Reads that carried several content events: the older ones carry the newest one's
    /// arrival stamp (the kernel keeps one stamp for bytes queued together).
    pub shared: SharedReads,
    /// Measured window (ns): `ty_ns − tx_ns`.
    pub window_ns: u64,
    /// First measured request's start (`CLOCK_MONOTONIC` ns).
    pub tx_ns: u64,
    /// End of the last measured request, whatever its outcome (`CLOCK_MONOTONIC` ns).
    pub ty_ns: u64,
    /// Measured requests that succeeded.
    pub completed: u64,
    /// Measured requests that failed.
    pub failed: u64,
    /// Measured requests the client closed on purpose (`--request-cancellation-rate`):
    /// neither completed nor failed.
    pub request_cancelled: u64,
    /// With `--prefill-concurrency`: each measured request's wait for a place before it was
    /// sent (ns).
    pub prefill_wait: Dist,
    /// Sessions: TTFT of the completed measured requests by turn index (what a server's
    /// cache bought a conversation's later turns), turns in order.
    pub ttft_by_turn: Vec<(u32, Dist)>,
    /// The HTTP phases of the completed measured requests ([`Record::http_phases`]), by
    /// k6's and AIPerf's names (ns).
    pub http_trace: Vec<(&'static str, Dist)>,
    /// Print them under the table (`--show-trace-timing`).
    pub show_trace_timing: bool,
    /// With several `--url`s: each server's figures, in their order.
    pub servers: Vec<ServerFigures>,
    /// Warm-up requests sent.
    pub warmup: u64,
    /// Warm-up requests that failed, and the warm-up's span (first start to last end, ns).
    pub warmup_failed: u64,
    /// See `warmup_failed`.
    pub warmup_ns: u64,
    /// `--slice-duration` (ns): figures per slice are written too.
    pub slice_ns: Option<u64>,
    /// Σ output tokens of completed requests.
    pub output_tokens: u64,
    /// Σ input tokens of completed requests.
    pub input_tokens: u64,
    /// Σ images in the answers of completed requests (image generation).
    pub images: u64,
    /// Requests whose OSL came from server usage / the tokenizer.
    pub osl_from_usage: u64,
    /// Requests whose OSL was re-tokenized.
    pub osl_from_tokenizer: u64,
    /// Failures by kind.
    pub errors: Vec<ErrorCount>,
    /// Did the client keep up: per shard, against the simulator, the verdict.
    pub health: health::Health,
    /// What the server did: the share it failed, the kinds, their shape in time.
    pub server: server::ServerHealth,
    /// The one verdict of the run, from the client's and the server's.
    pub label: verdict::Label,
    /// What the run measured: the command line, the load, the workload, the target, the host
    /// (set by the command that ran it).
    pub about: Option<about::About>,
    /// `--failed-request-threshold` stopped the run: why.
    pub threshold_crossed: Option<String>,
    /// I/O driver that ran.
    pub driver: String,
    /// Warnings to print and export.
    pub warnings: Vec<Warning>,
    /// True when stopped early.
    pub cancelled: bool,
    /// Every request, for profile_export.jsonl.
    pub records: Vec<Record>,
    /// GPU and server telemetry over the window, when collected.
    pub telemetry: Option<crate::telemetry::TelemetryReport>,
    /// Open loop: the rate asked for.
    pub requested_rate: Option<f64>,
    /// Open loop: measured requests sent per second (first to last actual start).
    pub achieved_rate: f64,
    /// Open loop: the rate of the drawn schedule itself (first to last intended time), which a
    /// random process makes differ a little from the requested rate.
    pub scheduled_rate: f64,
    /// Ramp-up requests (left out of the metrics).
    pub ramp_up: u64,
    /// Goodput, with `--goodput`.
    pub goodput: Option<goodput::Goodput>,
    /// Error-adjusted percentiles (each failed request counted as +∞), as AIPerf reports.
    pub error_adjusted: Vec<ErrorAdjusted>,
    /// Which node this run was, when the load was split across nodes.
    pub node: Option<NodeMark>,
    /// The model the server's responses named, when they named one.
    pub served_model: Option<String>,
    /// Over completed measured requests whose usage said so: Σ prompt tokens the server's
    /// prompt cache served, and Σ prompt tokens the server counted.
    pub prompt_cache: Option<(u64, u64)>,
    /// With `--server-traces`: the server's spans, joined to the requests.
    pub server_traces: Option<phases::Traces>,
}

impl Report {
    /// The mean TTFT and request latency of the completed measured requests (ns), to set
    /// beside the server's own histograms: none when any failed on the server's side, as its
    /// histograms count those too (a timed-out request's long TTFT), and the difference would
    /// read as negative time outside the server.
    pub fn client_means(&self) -> (Option<f64>, Option<f64>) {
        let mean = |d: &Dist| (d.count() > 0 && self.server.failed == 0).then(|| d.mean());
        (mean(&self.metrics.ttft), mean(&self.metrics.latency))
    }
}

/// One server's share of a run with several `--url`s.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServerFigures {
    /// Its URL (without credentials).
    pub url: String,
    /// Its measured requests that succeeded.
    pub request_count: u64,
    /// Its measured requests that failed.
    pub error_request_count: u64,
    /// Its output tokens per second, over the run's measured window.
    pub output_token_throughput: f64,
    /// TTFT percentiles (ms).
    pub time_to_first_token_p50_ms: f64,
    /// See `time_to_first_token_p50_ms`.
    pub time_to_first_token_p99_ms: f64,
    /// Request latency percentiles (ms).
    pub request_latency_p50_ms: f64,
    /// See `request_latency_p50_ms`.
    pub request_latency_p99_ms: f64,
}

/// Each of `urls`' figures from the measured records (none with one server).
fn server_figures(urls: &[String], records: &[Record], window_ns: u64) -> Vec<ServerFigures> {
    if urls.len() < 2 {
        return Vec::new();
    }
    urls.iter()
        .enumerate()
        .map(|(i, url)| {
            let mine = || {
                records.iter().filter(move |r| {
                    r.phase == crate::record::Phase::Profiling && usize::from(r.server) == i
                })
            };
            let (mut ttft, mut e2e) = (Dist::keeping_values(), Dist::keeping_values());
            let mut tokens = 0;
            for r in mine().filter(|r| r.outcome == Outcome::Ok) {
                if let Some(t) = r.ttft() {
                    ttft.record(t);
                }
                e2e.record(r.latency());
                tokens += r.osl.unwrap_or(0);
            }
            ttft.seal();
            e2e.seal();
            let ms = |d: &Dist, p: f64| {
                if d.count() == 0 {
                    0.0
                } else {
                    d.percentile(p) as f64 / 1e6
                }
            };
            ServerFigures {
                url: url.clone(),
                request_count: e2e.count(),
                error_request_count: mine()
                    .filter(|r| !matches!(r.outcome, Outcome::Ok | Outcome::RequestCancelled))
                    .count() as u64,
                output_token_throughput: per_sec(tokens, window_ns),
                time_to_first_token_p50_ms: ms(&ttft, 50.0),
                time_to_first_token_p99_ms: ms(&ttft, 99.0),
                request_latency_p50_ms: ms(&e2e, 50.0),
                request_latency_p99_ms: ms(&e2e, 99.0),
            }
        })
        .collect()
}

/// Content events that shared a read's stamp with a later event.
#[derive(Debug, Clone, Default)]
pub struct SharedReads {
    /// Measured content events that came in one read with a later one.
    pub events: u64,
    /// Measured content events in all.
    pub of_events: u64,
    /// Successful measured responses whose first token came in one read with a later token.
    pub first_tokens: u64,
    /// Such reads (but those with a first token): the time since the previous read of the
    /// same response had emptied the socket, the longest their older events can have waited
    /// unseen (ns).
    pub wait: Dist,
}

/// A node's mark on each of its requests in `profile_export.jsonl`: its index, and what to
/// add to its monotonic stamps to place them on the wall clock (so that a merge's requests,
/// from many hosts' clocks, share one time axis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeMark {
    /// The node.
    pub index: u64,
    /// Wall-clock ns minus monotonic ns, read together at the run's start.
    pub wall_offset_ns: i64,
}

/// Percentiles of a latency metric with each failed request counted as infinitely slow.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ErrorAdjusted {
    /// Metric tag.
    pub metric: &'static str,
    /// (percentile name, value in ms or None for +∞).
    pub percentiles: Vec<(&'static str, Option<f64>)>,
}

/// TTFT, ITL and request latency adjusted for `failed` requests (none without failures).
fn error_adjusted_all(m: &Metrics, failed: u64) -> Vec<ErrorAdjusted> {
    if failed == 0 {
        return Vec::new();
    }
    vec![
        error_adjusted("time_to_first_token", &m.ttft, failed),
        error_adjusted("inter_token_latency", &m.itl, failed),
        error_adjusted("request_latency", &m.latency, failed),
    ]
}

/// The percentiles of `d`'s values together with one +∞ per failed request, by AIPerf's rule
/// for its `adj_*` figures (numpy's `nearest`).
fn error_adjusted(metric: &'static str, d: &Dist, failed: u64) -> ErrorAdjusted {
    ErrorAdjusted {
        metric,
        percentiles: crate::stats::PERCENTILES
            .iter()
            .map(|(name, p)| {
                let v = d.nearest_with_infinities(failed, *p);
                (*name, v.map(|ns| ns / 1e6))
            })
            .collect(),
    }
}

impl Report {
    /// Output token throughput (tokens/s).
    pub fn output_tps(&self) -> f64 {
        per_sec(self.output_tokens, self.window_ns)
    }
    /// Input token throughput (tokens/s).
    pub fn input_tps(&self) -> f64 {
        per_sec(self.input_tokens, self.window_ns)
    }
    /// Request throughput (requests/s).
    pub fn request_tps(&self) -> f64 {
        per_sec(self.completed, self.window_ns)
    }
    /// Generated images per second (image generation).
    pub fn image_tps(&self) -> f64 {
        per_sec(self.images, self.window_ns)
    }
}

fn per_sec(n: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        n as f64 / (ns as f64 / 1e9)
    }
}

/// What the report needs from the plan.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Open-loop rate.
    pub rate: Option<f64>,
    /// Goodput objectives.
    pub slos: Vec<crate::plan::Slo>,
    /// Closed loop: the concurrency asked for.
    pub concurrency: Option<u64>,
    /// Events were stamped with the kernel's receive time (plain http, not turned off).
    pub kernel_stamps: bool,
    /// Responses were asked for as streams.
    pub streaming: bool,
    /// The responses carry output tokens (every kind but embeddings).
    pub has_output: bool,
    /// `--endpoint-type template`: the pointer to each event's text.
    pub text_pointer: Option<String>,
    /// `min_tokens` was sent equal to `max_tokens` (`--output-tokens-mean-deterministic`).
    pub min_tokens_sent: bool,
    /// `ignore_eos: true` was sent.
    pub ignore_eos_sent: bool,
    /// Choices asked per request (`n`): usage then counts more text than one choice.
    pub choices: u64,
    /// The model asked for.
    pub model: String,
    /// `--prefill-concurrency` was given.
    pub prefill: bool,
    /// `--slice-duration` (ns).
    pub slice_ns: Option<u64>,
    /// `--show-trace-timing`.
    pub show_trace_timing: bool,
    /// The servers' URLs, in order (several with `--url` repeated).
    pub servers: Vec<String>,
}

impl Settings {
    /// What `plan` says about reporting.
    pub fn of(plan: &crate::plan::Plan) -> Settings {
        Settings {
            model: plan.target.model.clone(),
            rate: plan.load.rate,
            slos: plan.load.slos.clone(),
            // The concurrency a closed loop holds steady at the server (not in sessions, whose
            // places also hold the pauses between turns, nor under a prefill cap, whose
            // places also hold the waits for it).
            concurrency: plan
                .load
                .steady_concurrency()
                .filter(|_| plan.workload.sessions.is_none() && plan.load.prefill.is_none()),
            kernel_stamps: plan.spec.engine.kernel_timestamps && plan.target.tls.is_none(),
            streaming: plan.target.streaming,
            has_output: plan.target.kind.generates(),
            text_pointer: plan.target.pointers.as_ref().map(|p| p.text.clone()),
            min_tokens_sent: plan.spec.workload.osl_deterministic,
            ignore_eos_sent: plan.spec.workload.extra_inputs.get("ignore_eos")
                == Some(&serde_json::Value::Bool(true)),
            choices: plan
                .spec
                .workload
                .extra_inputs
                .get("n")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(1),
            prefill: plan.load.prefill.is_some(),
            slice_ns: plan.spec.output.slice_ns,
            show_trace_timing: plan.spec.output.show_trace_timing,
            servers: (0..plan.target.servers())
                .map(|i| plan.target.server(i).url())
                .collect(),
        }
    }
}

/// Merges the shards' reports.
pub fn build(mut out: RunOutput, settings: &Settings) -> Report {
    let mut metrics = Metrics::default();
    let mut client_delay = Dist::new();
    let mut record_lag = Dist::new();
    let mut shared = SharedReads::default();
    // One array of the exact size: a doubling one would leave its old copies' pages behind.
    let mut records = Vec::with_capacity(out.shards.iter().map(|s| s.records.len()).sum());
    let mut driver = String::new();
    let served_model = out.shards.iter().find_map(|s| s.served_model.clone());
    // Failures past each shard's per-second allowance: counted, not kept one by one.
    let mut unrecorded: BTreeMap<Outcome, crate::record::Unrecorded> = BTreeMap::new();
    for s in &mut out.shards {
        for ((phase, outcome), u) in std::mem::take(&mut s.records.unrecorded) {
            if phase != crate::record::Phase::Profiling {
                continue;
            }
            unrecorded
                .entry(outcome)
                .or_insert_with(|| crate::record::Unrecorded::new(u.error.clone()))
                .add(u.count, u.first_start_ns, u.last_end_ns);
        }
    }
    for s in &mut out.shards {
        client_delay.merge(&s.client_delay);
        record_lag.merge(&s.record_lag);
        shared.events += s.shared_events;
        shared.of_events += s.events;
        shared.wait.merge(&s.shared_wait);
        driver = s.driver.to_string();
        std::mem::take(&mut s.records).move_into(&mut records);
    }
    let starved = health::mark_starved(&mut records, &out.watch);
    records.sort_by_key(|r| r.id);
    for r in &mut records {
        if let Some(e) = &mut r.error {
            if let std::borrow::Cow::Owned(clean) = crate::redact::scrub(e) {
                *e = clean;
            }
        }
    }
    let mut by_turn: BTreeMap<u32, Dist> = BTreeMap::new();
    let mut http_trace: Vec<(&'static str, Dist)> = Vec::new();
    for r in records.iter().filter(|r| r.is_measured_ok()) {
        metrics.add(r);
        if let Some(phases) = r.http_phases() {
            if http_trace.is_empty() {
                http_trace = phases
                    .map(|(tag, _)| (tag, Dist::keeping_values()))
                    .to_vec();
            }
            for ((_, d), (_, v)) in http_trace.iter_mut().zip(phases) {
                d.record(v);
            }
        }
        if let (Some((_, turn)), Some(ttft)) = (r.session, r.ttft()) {
            by_turn
                .entry(turn)
                .or_insert_with(Dist::keeping_values)
                .record(ttft);
        }
    }
    for (_, d) in &mut http_trace {
        d.seal();
    }
    let ttft_by_turn: Vec<(u32, Dist)> = by_turn
        .into_iter()
        .map(|(t, mut d)| {
            d.seal();
            (t, d)
        })
        .collect();
    metrics.seal();

    let measured = records
        .iter()
        .filter(|r| r.phase == crate::record::Phase::Profiling);
    let mut tx = u64::MAX;
    let mut ty = 0u64;
    let (mut completed, mut failed, mut out_tok, mut in_tok) = (0u64, 0u64, 0u64, 0u64);
    let mut images = 0u64;
    let (mut from_usage, mut from_tok) = (0u64, 0u64);
    let mut errors: BTreeMap<Outcome, (String, u64)> = BTreeMap::new();
    let (mut osl_off, mut with_request, mut one_choice) = (0u64, 0u64, 0u64);
    let mut osl_off_recounted = 0u64;
    let mut sampled = 0u64;
    let (mut client_sum, mut server_sum) = (0u64, 0u64);
    let (mut no_tokens, mut one_chunk) = (0u64, 0u64);
    let (mut cache_hits, mut cache_prompt) = (0u64, 0u64);
    // Requests that opened a connection because the server had closed (or dropped) the one
    // their place used.
    let mut reopened = 0u64;
    // Σ prompt tokens as sent (the tokenizer's count) and as the server counted them, over
    // requests that have both.
    let (mut isl_sent, mut isl_server, mut isl_both) = (0u64, 0u64, 0u64);
    let only_counted: u64 = unrecorded.values().map(|u| u.count).sum();
    // The measured phase runs from its first send to the end of its last request, whatever
    // each one's outcome (AIPerf's benchmark duration): a server that stops answering makes
    // the run longer, never its rates higher.
    let mut widen = |start: u64, end: u64| {
        if start > 0 {
            tx = tx.min(start);
        }
        ty = ty.max(end);
    };
    for (o, u) in &unrecorded {
        widen(u.first_start_ns, u.last_end_ns);
        failed += u.count;
        let e = errors.entry(*o).or_insert_with(|| {
            let text = u.error.as_deref().unwrap_or_default();
            (crate::redact::scrub(text).into_owned(), 0)
        });
        e.1 += u.count;
    }
    let mut request_cancelled = 0u64;
    let mut prefill_wait = Dist::new();
    for r in measured {
        if settings.prefill && r.start_ns > 0 {
            prefill_wait.record(r.prefill_wait_ns);
        }
        // A successful response's end is its last content event (REFERENCE's Ty); a
        // failure's, when it failed.
        let end = match r.outcome {
            Outcome::Ok => r.last_content_ns.unwrap_or(r.end_ns),
            _ => r.end_ns,
        };
        widen(r.tried_ns(), end);
        if r.outcome == Outcome::RequestCancelled {
            request_cancelled += 1;
            continue;
        }
        if r.outcome != Outcome::Ok {
            failed += 1;
            let e = errors
                .entry(r.outcome)
                .or_insert_with(|| (r.error.clone().unwrap_or_default(), 0));
            e.1 += 1;
            continue;
        }
        completed += 1;
        reopened += u64::from(r.reconnected || r.new_connection);
        let osl = r.osl.unwrap_or(0);
        out_tok += osl;
        no_tokens += u64::from(osl == 0);
        one_chunk += u64::from(osl >= 2 && r.second_content_ns.is_none());
        shared.first_tokens += u64::from(r.first_token_shared_read());
        in_tok += u64::from(r.isl.unwrap_or(0));
        images += u64::from(r.images);
        if let (Some(c), Some(p)) = (r.server_cached, r.server_isl) {
            (cache_hits, cache_prompt) = (cache_hits + u64::from(c), cache_prompt + p);
        }
        // (ringperf's simulator estimates prompt tokens from characters; it does not tokenize.)
        if let (Some(a), Some(b), None) = (r.isl, r.server_isl, r.sim_arrived_ns) {
            (isl_sent, isl_server, isl_both) =
                (isl_sent + u64::from(a), isl_server + b, isl_both + 1);
        }
        match r.osl_source {
            Some(TokenSource::Usage) => from_usage += 1,
            Some(TokenSource::Tokenizer) => from_tok += 1,
            None => {}
        }
        if let Some(req) = r.requested_osl {
            with_request += 1;
            let near = |want: f64| (osl as f64 - want).abs() <= (want * 0.05).min(50.0);
            // With n choices the usage of every choice is max_tokens each (vLLM counts them
            // all); a server that counts one (llama.cpp) is said apart.
            let choices = settings.choices.max(1) as f64;
            let usage = r.osl_source == Some(TokenSource::Usage);
            if choices > 1.0 && usage && near(f64::from(req)) {
                one_choice += 1;
            } else if !near(f64::from(req) * choices) {
                osl_off += 1;
                osl_off_recounted += u64::from(r.osl_source == Some(TokenSource::Tokenizer));
            }
        }
        if let Some(c) = r.tokenizer_osl {
            sampled += 1;
            client_sum += c;
            server_sum += osl;
        }
    }
    let window_ns = ty.saturating_sub(tx);
    let tx = tx.min(ty);
    let warm = || {
        records
            .iter()
            .filter(|r| r.phase == crate::record::Phase::Warmup)
    };
    let warmup = warm().count() as u64;
    let warmup_failed = warm().filter(|r| r.outcome != Outcome::Ok).count() as u64;
    let warmup_ns = warm().map(|r| r.end_ns).max().unwrap_or(0).saturating_sub(
        warm()
            .map(|r| r.start_ns)
            .filter(|t| *t > 0)
            .min()
            .unwrap_or(0),
    );

    let mut warnings = Vec::new();
    if only_counted > 0 {
        warnings.push(Warning::new(
            Code::FailuresOnlyCounted,
            format!(
            "{only_counted} failed requests were counted but not written one by one (each shard \
             keeps at most {} failures a second in profile_export.jsonl): their kinds and counts \
             are in the errors",
            crate::record::FAILED_RECORDS_PER_SECOND
        ),
        ));
    }
    if let Some(m) = served_model.as_ref().filter(|m| **m != settings.model) {
        let m = crate::redact::model_shown(m);
        warnings.push(Warning::new(
            Code::ServedModelDiffers,
            format!(
                "the server answered as model {m:?}, not {:?}: it ignores the model name asked \
             (llama.cpp serves its one model whatever the name), so these results are {m:?}'s",
                crate::redact::model_shown(&settings.model)
            ),
        ));
    }
    if osl_off > 0 {
        let advice = if osl_off_recounted == osl_off {
            // Only the tokenizer's count of the text is known: it may be the count that is off.
            "these lengths are the response text re-counted with the tokenizer (no server \
             usage): a tokenizer that differs from the model's miscounts, even when the server \
             made exactly what was asked"
                .to_string()
        } else {
            match (settings.min_tokens_sent, settings.ignore_eos_sent) {
                (false, false) => "use --output-tokens-mean-deterministic or --extra-inputs \
                                   ignore_eos:true for exact lengths"
                    .into(),
                (true, false) => "min_tokens was sent and the server did not honour it \
                                  (llama.cpp ignores it): --extra-inputs ignore_eos:true may \
                                  make it run to max_tokens"
                    .into(),
                (_, true) => "the server stopped early although min_tokens or ignore_eos \
                              asked it not to: it ignores them"
                    .into(),
            }
        };
        warnings.push(Warning::new(
            Code::OutputLengthOff,
            format!(
                "{osl_off} of {with_request} requests got an output length more than min(5%, 50) \
             tokens off the requested max_tokens{}: {advice}",
                if settings.choices > 1 {
                    format!(" × n = {}", settings.choices)
                } else {
                    String::new()
                }
            ),
        ));
    }
    if reopened > 0 {
        warnings.push(Warning::new(
            Code::ServerClosedConnections,
            format!(
                "the server closed its connection after a response {reopened} time(s) in \
             {completed} requests (llama.cpp closes after each stream), so the next request on \
             that place opened a new connection first: TTFT counts from the send and holds, \
             but those sends went out later (see the dispatch delay) and the server took a \
             new connection each time"
            ),
        ));
    }
    if one_choice > 0 {
        warnings.push(Warning::new(
            Code::UsageOfOneChoice,
            format!(
            "{one_choice} of {with_request} requests asked for n = {} choices and the server's \
             usage counted the tokens of one (llama.cpp does; vLLM counts every choice): output \
             lengths and token throughput here count one choice per request",
            settings.choices
        ),
        ));
    }
    // The prompt as the server counted it: a chat template adds a few tokens, a tokenizer
    // that is not the model's miscounts by a share of them.
    if isl_both >= 4 {
        let (sent, server) = (
            isl_sent as f64 / isl_both as f64,
            isl_server as f64 / isl_both as f64,
        );
        if (server - sent).abs() > (0.1 * sent).max(16.0) {
            warnings.push(Warning::new(
                Code::PromptTokensDiffer,
                format!(
                    "the server counted {server:.0} prompt tokens per request on average where \
                 ringperf's tokenizer counted {sent:.0}: --tokenizer probably does not match \
                 the served model, so input lengths (ISL) are not what they say"
                ),
            ));
        }
    }
    // One request's short output is no evidence: judge the tokenizer on enough tokens, and
    // not where usage counts a different amount of text than the choices sent (n > 1).
    if server_sum >= 256 && sampled >= 4 && settings.choices == 1 {
        let diff = (client_sum as f64 - server_sum as f64).abs() / server_sum as f64;
        if diff > 0.10 {
            warnings.push(Warning::new(Code::OutputTokensDiffer, format!(
                "the tokenizer counts {:.0}% {} output tokens than the server reports: --tokenizer probably does not match the served model",
                diff * 100.0,
                if client_sum > server_sum { "more" } else { "fewer" }
            )));
        }
    }
    if settings.has_output && no_tokens > 0 {
        let hint = match &settings.text_pointer {
            Some(p) => format!(
                ": does --response-text-pointer {p} (or --response-tokens-pointer) point at \
                 what the server sends?"
            ),
            None => String::new(),
        };
        warnings.push(Warning::new(
            Code::NoOutputTokens,
            format!(
                "{no_tokens} of {completed} successful requests counted no output token, so they \
             add 0 to output throughput{hint}"
            ),
        ));
    }
    if settings.streaming && one_chunk > 0 {
        warnings.push(Warning::new(
            Code::OneChunkResponses,
            format!(
                "{one_chunk} of {completed} streamed responses of 2 tokens or more came in one \
             chunk: they have no ITL and are left out of ITL and per-user throughput"
            ),
        ));
    }
    for slo in &settings.slos {
        let (name, seen) = match slo.metric {
            crate::plan::SloMetric::Ttft => ("TTFT", metrics.ttft.count()),
            crate::plan::SloMetric::Itl => ("ITL", metrics.itl.count()),
            crate::plan::SloMetric::E2e => continue,
        };
        if completed > 0 && seen == 0 {
            let why = if settings.streaming {
                "no response had one"
            } else {
                "it is only measured on streamed responses (--streaming)"
            };
            warnings.push(Warning::new(
                Code::GoodputUnmeasured,
                format!(
                    "goodput: no request met the {name} objective because {name} was never \
                 measured: {why}"
                ),
            ));
        }
    }
    for f in &out.failures {
        warnings.push(f.clone());
    }
    let ramp_up = records
        .iter()
        .filter(|r| r.phase == crate::record::Phase::RampUp)
        .count() as u64;
    let measured_sent = || records.iter().filter(|r| r.is_measured_sent());
    let sent = node::Span::of(measured_sent().map(|r| r.start_ns));
    let intended = node::Span::of(measured_sent().filter_map(|r| r.intended_ns));
    let (achieved_rate, scheduled_rate) = (sent.rate(), intended.rate());
    if metrics.dispatch_delay.count() > 0 {
        let p99 = metrics.dispatch_delay.percentile(99.0);
        if p99 > health::DISPATCH_LIMIT_NS && scheduled_rate > 0.0 {
            warnings.push(Warning::new(Code::DispatchDelay, format!(
                "dispatch delay p99 was {:.2} ms: requests left late, so latencies measured from the actual send hide part of what users would wait (see the Scheduled rows)",
                p99 as f64 / 1e6
            )));
        }
        if achieved_rate > 0.0 && achieved_rate < scheduled_rate * 0.98 {
            warnings.push(Warning::new(Code::SendRateShort, format!(
                "achieved send rate {achieved_rate:.1}/s is {:.1}% short of the schedule's {scheduled_rate:.1}/s",
                (1.0 - achieved_rate / scheduled_rate) * 100.0
            )));
        }
    }
    let goodput = (!settings.slos.is_empty()).then(|| {
        goodput::compute(
            &settings.slos,
            records.iter().filter(|r| r.is_measured_ok()),
            failed,
            window_ns,
        )
    });
    let mut health = health::assess(
        &health::Inputs {
            shards: &out.shards,
            starved: &starved,
            watch: &out.watch,
            placement: &out.placement,
            records: &records,
            event_delay: &client_delay,
            lag: &record_lag,
            dispatch: &metrics.dispatch_delay,
            server_in_flight: &out.server_in_flight,
            asked: settings.concurrency,
            kernel_stamps: settings.kernel_stamps,
            chunk_gaps: &metrics.icl,
            watch_cost: out.watch_cost,
        },
        &mut warnings,
    );
    // Every warning that speaks of the client feeds its verdict: a feeder or a shard that
    // held sending back limited the load; requests sent late or short of the rate are a
    // caveat beside the figures measured from the actual sends.
    // (The engine's warnings alone: the assessment's own limits are in its verdict already.)
    let said = |from: &[Warning], codes: &[Code]| -> Vec<String> {
        from.iter()
            .filter(|w| codes.contains(&w.code))
            .map(|w| w.message.clone())
            .collect()
    };
    health.take_in(
        &said(&out.failures, &[Code::ShardTrouble, Code::ClientLimited]),
        &said(&warnings, &[Code::DispatchDelay, Code::SendRateShort]),
    );
    let tally = Tally {
        metrics,
        client_delay,
        record_lag,
        shared,
        prefill_wait,
        http_trace,
        tx_ns: tx,
        ty_ns: ty,
        counts: Counts {
            completed,
            failed,
            request_cancelled,
            warmup,
            ramp_up,
            output_tokens: out_tok,
            input_tokens: in_tok,
            images,
            osl_from_usage: from_usage,
            osl_from_tokenizer: from_tok,
            errors: errors
                .into_iter()
                .map(|(o, (message, count))| ErrorCount {
                    code: o.code(),
                    kind: o.name(),
                    message,
                    count,
                })
                .collect(),
            requested_rate: settings.rate,
            sent,
            intended,
            goodput,
            cancelled: out.cancelled,
        },
    };
    let server = server::assess(&records, &tally.counts.errors, completed, tx, ty);
    let threshold_crossed = out.threshold_crossed.take();
    let mut report = tally.into_report(Beside {
        health,
        server: Some(server),
        warnings,
        servers: server_figures(&settings.servers, &records, window_ns),
        records,
        driver,
        served_model,
        prompt_cache: (cache_prompt > 0).then_some((cache_hits, cache_prompt)),
        ttft_by_turn,
        slice_ns: settings.slice_ns,
        show_trace_timing: settings.show_trace_timing,
        warmup_failed,
        warmup_ns,
    });
    report.threshold_crossed = threshold_crossed;
    report
}
