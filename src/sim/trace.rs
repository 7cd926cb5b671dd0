//! The simulator's own account of each request, as vLLM gives it: the phase histograms on
//! `/metrics` (`vllm:request_queue_time_seconds` …) and, with `--otlp-traces-endpoint`, one
//! `llm_request` span per request exported over OTLP/HTTP by a thread of its own.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::otlp::{self, Encoding, Out, Phases};

/// Bucket bounds (s) of every phase histogram: vLLM's TTFT buckets, fine enough for the
/// simulator's millisecond timings (the sums are exact, so the means are too).
const BOUNDS_S: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];

/// vLLM's histogram names and help, in [`Phases`]' order.
pub(super) const FAMILIES: [(&str, &str); 6] = [
    (
        "vllm:request_queue_time_seconds",
        "Time spent in the waiting queue.",
    ),
    (
        "vllm:request_prefill_time_seconds",
        "Time from scheduled to the first token.",
    ),
    (
        "vllm:request_decode_time_seconds",
        "Time from the first token to the last.",
    ),
    (
        "vllm:request_inference_time_seconds",
        "Time from scheduled to the last token.",
    ),
    (
        "vllm:time_to_first_token_seconds",
        "Time from arrival to the first token.",
    ),
    (
        "vllm:e2e_request_latency_seconds",
        "Time from arrival to the end of the response.",
    ),
];

/// One histogram, shared by the shards.
#[derive(Default)]
pub(super) struct Hist {
    /// Per bucket, not cumulative; the last is +Inf.
    buckets: [AtomicU64; BOUNDS_S.len() + 1],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Hist {
    fn record(&self, ns: u64) {
        let s = ns as f64 / 1e9;
        let i = BOUNDS_S
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(BOUNDS_S.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    fn render(&self, name: &str, help: &str, model: &str, out: &mut String) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += b.load(Ordering::Relaxed);
            let le = BOUNDS_S
                .get(i)
                .map_or("+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{le}\",model_name=\"{model}\"}} {cumulative}"
            );
        }
        let _ = writeln!(
            out,
            "{name}_sum{{model_name=\"{model}\"}} {}\n{name}_count{{model_name=\"{model}\"}} {}",
            self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
            self.count.load(Ordering::Relaxed)
        );
    }
}

/// The six phase histograms.
#[derive(Default)]
pub(super) struct PhaseHists([Hist; 6]);

impl PhaseHists {
    pub(super) fn record(&self, p: &Phases) {
        for (h, v) in self.0.iter().zip(p.values()) {
            if let Some(v) = v {
                h.record(v);
            }
        }
    }

    pub(super) fn render(&self, model: &str, out: &mut String) {
        for (h, (name, help)) in self.0.iter().zip(FAMILIES) {
            h.render(name, help, model, out);
        }
    }
}

/// Spans waiting to go out at most (as the OpenTelemetry SDK's batch processor, more are
/// dropped and counted).
const QUEUE: usize = 65_536;
/// Spans per export at most.
const BATCH: usize = 512;
/// The longest a span waits for its export (the SDK's default is 5 s; the simulator's
/// spans go sooner so that a short run's are in when it ends).
const DELAY: Duration = Duration::from_millis(100);

/// What goes to the exporter: a span, or the word to send what came before and stop.
pub(super) enum Msg {
    Span(Out),
    Finish,
}

/// The span exporter: its queue, and its thread.
pub(super) struct Exporter {
    queue: SyncSender<Msg>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Spans dropped on a full queue, and exports that failed.
    pub(super) dropped: Arc<AtomicU64>,
    /// See `dropped`.
    pub(super) failed: Arc<AtomicU64>,
}

impl Exporter {
    /// Starts exporting to `url` in `enc`.
    pub(super) fn start(url: String, enc: Encoding) -> std::io::Result<Exporter> {
        let (queue, rx) = sync_channel(QUEUE);
        let failed = Arc::new(AtomicU64::new(0));
        let fails = failed.clone();
        let thread = std::thread::Builder::new()
            .name("ringperf-sim-spans".into())
            .spawn(move || export(&url, enc, &rx, &fails))?;
        Ok(Exporter {
            queue,
            thread: Some(thread),
            dropped: Arc::new(AtomicU64::new(0)),
            failed,
        })
    }

    /// A queue for one shard.
    pub(super) fn queue(&self) -> SpanQueue {
        (self.queue.clone(), self.dropped.clone())
    }

    /// Sends what is queued and stops.
    pub(super) fn finish(&mut self) {
        // Behind every span queued before it (waiting for room in a full queue).
        let _ = self.queue.send(Msg::Finish);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A shard's way to the exporter: its queue, and the count of spans dropped on a full one.
pub(super) type SpanQueue = (SyncSender<Msg>, Arc<AtomicU64>);

/// Queues a span; a full queue drops it (counted).
pub(super) fn queue(to: &SpanQueue, span: Out) {
    if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
        to.0.try_send(Msg::Span(span))
    {
        to.1.fetch_add(1, Ordering::Relaxed);
    }
}

fn export(url: &str, enc: Encoding, rx: &Receiver<Msg>, failed: &AtomicU64) {
    let mut batch: Vec<Out> = Vec::with_capacity(BATCH);
    let mut warned = false;
    let mut send = |batch: &mut Vec<Out>| {
        if batch.is_empty() {
            return;
        }
        let body = otlp::encode("ringperf-sim", batch, enc);
        if let Err(e) = otlp::post(url, &body, enc, Duration::from_secs(10)) {
            failed.fetch_add(1, Ordering::Relaxed);
            if !std::mem::replace(&mut warned, true) {
                crate::redact::say!(
                    "ringperf sim: cannot export spans to {url}: {e} (counting failures)"
                );
            }
        }
        batch.clear();
    };
    // A batch's first span waits for as long as it takes to come; the batch goes out when it
    // is full or DELAY after its first span, and what is left at the finish goes last.
    while let Ok(Msg::Span(first)) = rx.recv() {
        batch.push(first);
        let due = Instant::now() + DELAY;
        while batch.len() < BATCH {
            match rx.recv_timeout(due.saturating_duration_since(Instant::now())) {
                Ok(Msg::Span(s)) => batch.push(s),
                Ok(Msg::Finish) | Err(RecvTimeoutError::Disconnected) => {
                    send(&mut batch);
                    return;
                }
                Err(RecvTimeoutError::Timeout) => break,
            }
        }
        send(&mut batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_renders_cumulative_buckets_and_an_exact_sum() {
        let h = PhaseHists::default();
        let p = |q: u64| Phases {
            queue_ns: Some(q),
            ..Default::default()
        };
        for q in [500_000, 3_000_000, 3_000_000, 30_000_000_000_000] {
            h.record(&p(q));
        }
        let mut page = String::new();
        h.render("m", &mut page);
        let e = crate::prom::parse(&page).unwrap();
        let name = "vllm:request_queue_time_seconds";
        assert_eq!(
            e.kind(&format!("{name}_bucket")),
            crate::prom::Kind::Histogram
        );
        let bucket = |le: &str| {
            e.series(&format!("{name}_bucket"))
                .find(|s| s.label("le") == Some(le))
                .unwrap()
                .value
        };
        assert_eq!(bucket("0.001"), 1.0);
        assert_eq!(bucket("0.005"), 3.0);
        assert_eq!(bucket("2560"), 3.0);
        assert_eq!(bucket("+Inf"), 4.0);
        assert_eq!(e.sum(&format!("{name}_count")), Some(4.0));
        assert_eq!(e.sum(&format!("{name}_sum")), Some(30_000.006_5));
        // A family with nothing recorded has zeros, not nothing.
        assert_eq!(e.sum("vllm:e2e_request_latency_seconds_count"), Some(0.0));
    }
}
