//! The server's own `/metrics`, scraped on a thread of its own during the run.
//!
//! Each URL is scraped at the start, every interval, and once more at the end, with a plain
//! blocking HTTP/1.1 GET (rustls for https) decoded by the same sans-IO response parser as the
//! load itself. Known families (vLLM, SGLang, DCGM exporter) are summarised over the measured
//! window; the first and last pages are kept raw.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::blocking;
use crate::clock::now_ns;
use crate::endpoint::Endpoint;
use crate::gpu::window::Stat;
use crate::prom::{self, Exposition};

/// Gauges summarised over the window (avg and max).
pub const GAUGES: &[&str] = &[
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:token_usage",
    "sglang:cache_hit_rate",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_UTIL",
];

/// Counters reported as their rise over the window.
pub const COUNTERS: &[&str] = &[
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:num_preemptions_total",
    "vllm:request_success_total",
    "sglang:prompt_tokens_total",
    "sglang:generation_tokens_total",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
];

/// One scrape.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// When it completed (`CLOCK_MONOTONIC` ns).
    pub t_ns: u64,
    /// The page, parsed, or why not.
    pub page: Result<Exposition, String>,
    /// The raw text.
    pub raw: String,
}

/// A metrics URL, resolved.
#[derive(Debug, Clone)]
pub struct Target {
    /// As given (for reports).
    pub url: String,
    endpoint: Endpoint,
    path: String,
}

impl Target {
    /// Parses `URL`, or `auto` = the benchmarked server's `/metrics`.
    pub fn parse(spec: &str, server: &Endpoint) -> Result<Target, String> {
        if spec == "auto" {
            let url = format!(
                "{}://{}/metrics",
                if server.tls { "https" } else { "http" },
                server.authority()
            );
            return Ok(Target {
                url,
                endpoint: server.clone(),
                path: "/metrics".into(),
            });
        }
        let endpoint = Endpoint::parse(spec).map_err(|e| format!("--server-metrics-url {e}"))?;
        let path = if endpoint.prefix.is_empty() {
            "/metrics".to_string()
        } else {
            endpoint.prefix.clone()
        };
        Ok(Target {
            url: spec.to_string(),
            endpoint,
            path,
        })
    }
}

/// GETs a page (blocking, with a timeout).
pub fn fetch(
    t: &Target,
    tls: Option<&Arc<rustls::ClientConfig>>,
    timeout: Duration,
) -> Result<String, String> {
    if t.endpoint.tls && tls.is_none() {
        return Err("https metrics URL but no TLS configuration".into());
    }
    let to = blocking::To::of(&t.endpoint, tls);
    let request = blocking::request("GET", &t.path, &t.endpoint.authority(), &[], "text/plain");
    let page = blocking::fetch(&to, &request, timeout, PAGE_CAP).map_err(|e| e.to_string())?;
    if page.status != 200 {
        return Err(format!("HTTP {}", page.status));
    }
    String::from_utf8(page.body).map_err(|_| "the page is not UTF-8".to_string())
}

/// The largest metrics page read (a vLLM page with many LoRA adapters is a few MiB).
const PAGE_CAP: usize = 64 << 20;

/// Scrapes its targets on a thread until finished.
pub struct Scraper {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<(Vec<Vec<Scrape>>, u64)>>,
    targets: Vec<Target>,
}

impl Scraper {
    /// Starts scraping `targets` every `interval_ns`, pinned to `cpu` when given, and returns
    /// once the first round of pages is in (or its timeout passed).
    pub fn start(
        targets: Vec<Target>,
        tls: Option<Arc<rustls::ClientConfig>>,
        interval_ns: u64,
        cpu: Option<usize>,
    ) -> Scraper {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let ts = targets.clone();
        // The first round of scrapes is taken before the run sends anything, so that counter
        // rises cover everything the run did (and nothing before it is missed).
        let (first_done, first) = std::sync::mpsc::channel::<()>();
        let first_wait = Duration::from_nanos(interval_ns.clamp(10_000_000_000, 60_000_000_000));
        let thread = std::thread::Builder::new()
            .name("ringperf-metrics".into())
            .spawn(move || {
                if let Some(id) = cpu {
                    core_affinity::set_for_current(core_affinity::CoreId { id });
                }
                let cpu0 = crate::clock::thread_cpu_ns();
                let mut all: Vec<Vec<Scrape>> = ts.iter().map(|_| Vec::new()).collect();
                let timeout =
                    // A busy server answers /metrics late (llama.cpp took 4 s with 32 streams):
                    // a slow page delays the next scrape rather than failing.
                    Duration::from_nanos(interval_ns.clamp(10_000_000_000, 60_000_000_000));
                let mut next = now_ns();
                loop {
                    let last = flag.load(Ordering::Relaxed);
                    for (t, out) in ts.iter().zip(all.iter_mut()) {
                        let got = fetch(t, tls.as_ref(), timeout);
                        let t_ns = now_ns();
                        let (page, raw) = match got {
                            Ok(text) => (prom::parse(&text).map_err(|e| e.to_string()), text),
                            Err(e) => (Err(e), String::new()),
                        };
                        // Keep raw text only for the first page; the last is kept at the end.
                        if out.len() > 1 {
                            if let Some(prev) = out.last_mut() {
                                prev.raw = String::new();
                            }
                        }
                        out.push(Scrape { t_ns, page, raw });
                    }
                    let _ = first_done.send(());
                    if last {
                        break;
                    }
                    next += interval_ns;
                    while now_ns() < next && !flag.load(Ordering::Relaxed) {
                        std::thread::sleep(
                            Duration::from_millis(10).min(Duration::from_nanos(next - now_ns())),
                        );
                    }
                }
                (all, crate::clock::thread_cpu_ns() - cpu0)
            })
            .expect("spawn the metrics thread");
        // A server that does not answer within the scrape timeout is not waited for longer.
        let _ = first.recv_timeout(first_wait);
        Scraper {
            stop,
            thread: Some(thread),
            targets,
        }
    }

    /// Scrapes once more, stops, and returns every scrape per target and the thread's CPU time.
    pub fn finish(mut self) -> (Vec<(Target, Vec<Scrape>)>, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let (all, cpu) = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        (self.targets.drain(..).zip(all).collect(), cpu)
    }
}

/// A known gauge over the window.
#[derive(Debug, Clone, Serialize)]
pub struct GaugeSummary {
    /// Over scrapes in the window (summed over label sets at each scrape).
    pub stat: Stat,
    /// Per label set (e.g. per GPU for DCGM), avg over the window.
    pub by_labels: BTreeMap<String, f64>,
}

/// What one metrics URL said about the window.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The URL.
    pub url: String,
    /// Successful scrapes.
    pub scrapes: usize,
    /// Successful scrapes inside the measured window (gauges come from these).
    pub scrapes_inside: usize,
    /// Failed scrapes and the first reason.
    pub errors: usize,
    /// The first error.
    pub first_error: Option<String>,
    /// Known gauges.
    pub gauges: BTreeMap<String, GaugeSummary>,
    /// Every counter's rise between the first and last page (known counters first).
    pub counter_deltas: BTreeMap<String, f64>,
    /// vLLM prefix-cache hit rate over the window, when both counters are there.
    pub prefix_cache_hit_rate: Option<f64>,
    /// The first page, raw.
    pub first_page: String,
    /// The last page, raw.
    pub last_page: String,
}

fn label_key(s: &prom::Sample) -> String {
    s.labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Summarises one target's scrapes over `[tx, ty]` (scrapes at the very start and end bound
/// the window, so the nearest pages outside it are used for counter deltas).
pub fn summarize(target: &Target, scrapes: &[Scrape], tx: u64, ty: u64) -> Summary {
    let ok: Vec<(u64, &Exposition)> = scrapes
        .iter()
        .filter_map(|s| s.page.as_ref().ok().map(|p| (s.t_ns, p)))
        .collect();
    let errors: Vec<&String> = scrapes
        .iter()
        .filter_map(|s| s.page.as_ref().err())
        .collect();
    let inside: Vec<&Exposition> = ok
        .iter()
        .filter(|(t, _)| *t >= tx && *t <= ty)
        .map(|(_, p)| *p)
        .collect();
    let mut gauges = BTreeMap::new();
    for &g in GAUGES {
        let totals: Vec<f64> = inside.iter().filter_map(|p| p.sum(g)).collect();
        let Some(stat) = Stat::of(totals) else {
            continue;
        };
        let mut by: BTreeMap<String, (f64, usize)> = BTreeMap::new();
        for p in &inside {
            for s in p.series(g) {
                let e = by.entry(label_key(s)).or_default();
                e.0 += s.value;
                e.1 += 1;
            }
        }
        gauges.insert(
            g.to_string(),
            GaugeSummary {
                stat,
                by_labels: by
                    .into_iter()
                    .map(|(k, (sum, n))| (k, sum / n as f64))
                    .collect(),
            },
        );
    }
    // Counter deltas between the last page at or before tx and the first at or after ty.
    let before = ok.iter().rev().find(|(t, _)| *t <= tx).or(ok.first());
    let after = ok.iter().find(|(t, _)| *t >= ty).or(ok.last());
    let mut counter_deltas = BTreeMap::new();
    if let (Some((_, a)), Some((_, b))) = (before, after) {
        let others: std::collections::BTreeSet<&str> = b
            .samples
            .iter()
            .filter(|s| b.kind(&s.name) == prom::Kind::Counter && s.name.ends_with("_total"))
            .map(|s| s.name.as_str())
            .collect();
        for n in COUNTERS.iter().copied().chain(others) {
            if let (Some(x), Some(y)) = (a.sum(n), b.sum(n)) {
                counter_deltas.insert(n.to_string(), y - x);
            }
        }
    }
    let prefix_cache_hit_rate = match (
        counter_deltas.get("vllm:prefix_cache_hits_total"),
        counter_deltas.get("vllm:prefix_cache_queries_total"),
    ) {
        (Some(h), Some(q)) if *q > 0.0 => Some(h / q),
        _ => None,
    };
    Summary {
        url: target.url.clone(),
        scrapes: ok.len(),
        scrapes_inside: inside.len(),
        errors: errors.len(),
        first_error: errors.first().map(|e| e.to_string()),
        gauges,
        counter_deltas,
        prefix_cache_hit_rate,
        first_page: scrapes.first().map(|s| s.raw.clone()).unwrap_or_default(),
        last_page: scrapes.last().map(|s| s.raw.clone()).unwrap_or_default(),
    }
}
