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

/// Phase histograms (s), by the phase they time: the first family a page has is used.
pub const PHASES: &[(&str, &[&str])] = &[
    (
        "queue",
        &[
            "vllm:request_queue_time_seconds",
            "sglang:queue_time_seconds",
            "trtllm:request_queue_time_seconds",
        ],
    ),
    ("prefill", &["vllm:request_prefill_time_seconds"]),
    ("decode", &["vllm:request_decode_time_seconds"]),
    ("inference", &["vllm:request_inference_time_seconds"]),
    (
        "time_to_first_token",
        &[
            "vllm:time_to_first_token_seconds",
            "sglang:time_to_first_token_seconds",
            "trtllm:time_to_first_token_seconds",
        ],
    ),
    (
        "request_latency",
        &[
            "vllm:e2e_request_latency_seconds",
            "sglang:e2e_request_latency_seconds",
            "trtllm:e2e_request_latency_seconds",
        ],
    ),
    (
        "inter_token_latency",
        &[
            "vllm:inter_token_latency_seconds",
            "vllm:time_per_output_token_seconds",
            "sglang:inter_token_latency_seconds",
        ],
    ),
];

/// A histogram's rise over the window: what the requests of the window added to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistDelta {
    /// The family.
    pub family: String,
    /// Observations added.
    pub count: f64,
    /// Their sum (s).
    pub sum_s: f64,
    /// Cumulative counts added, by upper bound (s), ascending, `+Inf` last.
    pub buckets: Vec<(f64, f64)>,
}

impl HistDelta {
    /// The family's rise from page `a` to page `b`, summed over label sets (models,
    /// engines); `None` when `b` lacks it or nothing was observed.
    pub fn between(family: &str, a: &Exposition, b: &Exposition) -> Option<HistDelta> {
        let buckets = |p: &Exposition| {
            let mut by: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
            for s in p.series(&format!("{family}_bucket")) {
                let Some(le) = s.label("le").and_then(|v| match v {
                    "+Inf" => Some(f64::INFINITY),
                    v => v.parse::<f64>().ok(),
                }) else {
                    continue;
                };
                by.entry(le.to_bits()).or_insert((le, 0.0)).1 += s.value;
            }
            let mut v: Vec<(f64, f64)> = by.into_values().collect();
            v.sort_by(|x, y| x.0.total_cmp(&y.0));
            v
        };
        let after = buckets(b);
        if after.is_empty() {
            return None;
        }
        let before = buckets(a);
        let was = |le: f64| {
            before
                .iter()
                .find(|(l, _)| *l == le)
                .map_or(0.0, |(_, c)| *c)
        };
        let count =
            b.sum(&format!("{family}_count"))? - a.sum(&format!("{family}_count")).unwrap_or(0.0);
        let sum_s =
            b.sum(&format!("{family}_sum"))? - a.sum(&format!("{family}_sum")).unwrap_or(0.0);
        (count > 0.0).then(|| HistDelta {
            family: family.to_string(),
            count,
            sum_s,
            buckets: after.iter().map(|(le, c)| (*le, c - was(*le))).collect(),
        })
    }

    /// The mean (s).
    pub fn mean(&self) -> f64 {
        self.sum_s / self.count
    }

    /// The `q` quantile (0–1) as Prometheus's `histogram_quantile` estimates it: linear
    /// within the bucket it falls in (from 0 for the first), the last finite bound when it
    /// falls in `+Inf`.
    pub fn quantile(&self, q: f64) -> f64 {
        self.bucket(q).2
    }

    /// The bucket the `q` quantile falls in, `(lower bound, upper bound, estimate)` (s): the
    /// estimate is [`quantile`](Self::quantile)'s; all the histogram knows is that the value
    /// lies within the bounds. The first bucket's lower bound is 0; `+Inf`'s upper is infinite.
    pub fn bucket(&self, q: f64) -> (f64, f64, f64) {
        let total = self.buckets.last().map_or(0.0, |b| b.1);
        let rank = q * total;
        let mut lower = (0.0, 0.0);
        for &(le, c) in &self.buckets {
            if c >= rank {
                let estimate = if le.is_infinite() {
                    lower.0
                } else if c == lower.1 {
                    le
                } else {
                    lower.0 + (le - lower.0) * (rank - lower.1) / (c - lower.1)
                };
                return (lower.0, le, estimate);
            }
            lower = (le, c);
        }
        (lower.0, f64::INFINITY, lower.0)
    }
}

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

/// A `--server-metrics-url` that is not a URL ringperf can scrape.
#[derive(Debug, thiserror::Error)]
#[error("--server-metrics-url {0}")]
pub struct MetricsUrlError(pub crate::endpoint::UrlError);

/// A `--server-metrics-url`, read once from the command line: the benchmarked server's
/// `/metrics` (`auto`), or a URL of its own.
#[derive(Debug, Clone)]
pub enum Source {
    /// The benchmarked server's `/metrics`.
    Auto,
    /// A URL of its own.
    Url {
        /// As given (for reports).
        url: String,
        /// Where it is.
        endpoint: Endpoint,
    },
}

impl Source {
    /// Reads `URL`, or `auto`.
    pub fn parse(spec: &str) -> Result<Source, MetricsUrlError> {
        if spec == "auto" {
            return Ok(Source::Auto);
        }
        let endpoint = Endpoint::parse(spec).map_err(MetricsUrlError)?;
        Ok(Source::Url {
            url: spec.to_string(),
            endpoint,
        })
    }
}

impl Target {
    /// Where `source` is scraped when `server` is the benchmarked server.
    pub fn of(source: &Source, server: &Endpoint) -> Target {
        match source {
            Source::Auto => Target {
                url: format!(
                    "{}://{}/metrics",
                    if server.tls { "https" } else { "http" },
                    server.authority()
                ),
                endpoint: server.clone(),
                path: "/metrics".into(),
            },
            Source::Url { url, endpoint } => Target {
                url: url.clone(),
                endpoint: endpoint.clone(),
                path: if endpoint.prefix.is_empty() {
                    "/metrics".to_string()
                } else {
                    endpoint.prefix.clone()
                },
            },
        }
    }

    /// Parses `URL`, or `auto` = the benchmarked server's `/metrics`.
    pub fn parse(spec: &str, server: &Endpoint) -> Result<Target, MetricsUrlError> {
        Ok(Target::of(&Source::parse(spec)?, server))
    }
}

/// Why a metrics page was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    /// An https URL without a TLS configuration to reach it.
    #[error("https metrics URL but no TLS configuration")]
    NoTls,
    /// The exchange failed (connecting, TLS, reading, or the response's framing).
    #[error(transparent)]
    Get(#[from] blocking::Error),
    /// An answer other than 200.
    #[error("HTTP {0}")]
    Status(u16),
    /// A page that is not text.
    #[error("the page is not UTF-8")]
    NotUtf8,
}

/// GETs a page (blocking, with a timeout).
pub(crate) fn fetch(
    t: &Target,
    tls: Option<&Arc<rustls::ClientConfig>>,
    timeout: Duration,
) -> Result<String, FetchError> {
    if t.endpoint.tls && tls.is_none() {
        return Err(FetchError::NoTls);
    }
    let to = blocking::To::of(&t.endpoint, tls);
    let request = blocking::request("GET", &t.path, &t.endpoint.authority(), &[], "text/plain");
    let page = blocking::fetch(&to, &request, timeout, PAGE_CAP)?;
    if page.status != 200 {
        return Err(FetchError::Status(page.status));
    }
    let page = String::from_utf8(page.body).map_err(|_| FetchError::NotUtf8)?;
    // The page is kept and written: a server's text, scrubbed where it comes in.
    Ok(crate::redact::scrub(&page).into_owned())
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
                            Err(e) => (Err(e.to_string()), String::new()),
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
    /// The phase histograms' rises over the window, by phase ([`PHASES`]).
    pub phases: BTreeMap<String, HistDelta>,
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
    let mut phases = BTreeMap::new();
    if let (Some((_, a)), Some((_, b))) = (before, after) {
        for (phase, families) in PHASES {
            if let Some(d) = families.iter().find_map(|f| HistDelta::between(f, a, b)) {
                phases.insert(phase.to_string(), d);
            }
        }
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
        phases,
        first_page: scrapes.first().map(|s| s.raw.clone()).unwrap_or_default(),
        last_page: scrapes.last().map(|s| s.raw.clone()).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(buckets: &[(&str, f64)], count: f64, sum: f64) -> Exposition {
        let mut t = String::from("# TYPE vllm:request_queue_time_seconds histogram\n");
        for engine in ["0", "1"] {
            for (le, c) in buckets {
                t.push_str(&format!(
                    "vllm:request_queue_time_seconds_bucket{{engine=\"{engine}\",le=\"{le}\"}} {}\n",
                    c / 2.0
                ));
            }
            t.push_str(&format!(
                "vllm:request_queue_time_seconds_count{{engine=\"{engine}\"}} {}\n\
                 vllm:request_queue_time_seconds_sum{{engine=\"{engine}\"}} {}\n",
                count / 2.0,
                sum / 2.0
            ));
        }
        prom::parse(&t).unwrap()
    }

    #[test]
    fn a_phase_histogram_is_its_rise_over_the_window_summed_over_engines() {
        let a = page(&[("0.01", 10.0), ("0.1", 10.0), ("+Inf", 10.0)], 10.0, 0.05);
        // 100 more: 20 under 10 ms, 60 from 10 to 100 ms, 20 above.
        let b = page(
            &[("0.01", 30.0), ("0.1", 90.0), ("+Inf", 110.0)],
            110.0,
            5.05,
        );
        let d = HistDelta::between("vllm:request_queue_time_seconds", &a, &b).unwrap();
        assert_eq!((d.count, d.sum_s), (100.0, 5.0));
        assert_eq!(
            d.buckets,
            vec![(0.01, 20.0), (0.1, 80.0), (f64::INFINITY, 100.0)]
        );
        assert!((d.mean() - 0.05).abs() < 1e-12);
        // The median: rank 50, in the second bucket, 30 of its 60 in.
        assert!(
            (d.quantile(0.5) - 0.055).abs() < 1e-12,
            "{}",
            d.quantile(0.5)
        );
        assert!((d.quantile(0.1) - 0.005).abs() < 1e-12);
        assert_eq!(d.bucket(0.5).0..d.bucket(0.5).1, 0.01..0.1);
        assert_eq!(d.bucket(0.1).0, 0.0);
        // In +Inf: the last finite bound.
        assert_eq!(d.quantile(0.99), 0.1);
        assert_eq!(d.bucket(0.99).1, f64::INFINITY);
        // Nothing added, or no such family: none.
        assert_eq!(
            HistDelta::between("vllm:request_queue_time_seconds", &b, &b),
            None
        );
        assert_eq!(HistDelta::between("vllm:nothing", &a, &b), None);
    }
}
