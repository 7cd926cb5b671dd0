//! GPU sampling and server-metrics scraping around a run, off the shards' cores.

use serde::Serialize;

use crate::gpu::window::{self, GpuTotals, GpuWindow};
use crate::gpu::{self, Sampler, Series};
use crate::plan::Plan;
use crate::server_metrics::{self, Scraper, Source, Summary, Target};

/// What to sample (the command line builds it from the telemetry flags).
#[derive(Debug, Clone)]
pub struct Config {
    /// Sample GPUs through NVML.
    pub gpu: bool,
    /// GPU sampling interval (ns).
    pub gpu_sample_interval_ns: u64,
    /// GPUs to sample by index (`--gpus 0,2`); none: all of them.
    pub gpus: Option<Vec<u32>>,
    /// GPU price in EUR per hour (per GPU).
    pub gpu_price_eur_hour: Option<f64>,
    /// Prometheus endpoints to scrape.
    pub server_metrics: Vec<Source>,
    /// Scrape interval (ns).
    pub server_metrics_interval_ns: u64,
}

/// Telemetry flags that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--gpus` is not `all` or a list of indices.
    #[error(transparent)]
    Gpus(#[from] crate::gpu::GpusError),
    /// A `--server-metrics-url` cannot be used.
    #[error(transparent)]
    ServerMetricsUrl(#[from] crate::server_metrics::MetricsUrlError),
}

/// Telemetry threads while the run is live.
pub(crate) struct Telemetry {
    gpu: Option<Sampler>,
    gpu_unavailable: Option<String>,
    scraper: Option<Scraper>,
    started_ns: u64,
}

/// What telemetry saw, over the measured window.
#[derive(Debug, Serialize)]
pub struct TelemetryReport {
    /// Why there are no GPU figures, if there are none.
    pub gpu_unavailable: Option<String>,
    /// Per-GPU figures.
    pub gpus: Vec<GpuWindow>,
    /// Totals and per-token figures.
    pub totals: Option<GpuTotals>,
    /// Every GPU sample (for gpu_telemetry_export.jsonl).
    #[serde(skip)]
    pub series: Vec<Series>,
    /// Server-metrics summaries.
    pub server_metrics: Vec<Summary>,
    /// CPU the sampler thread used, as a share of one core.
    pub gpu_sampler_cpu_share: Option<f64>,
    /// CPU the scraper thread used, as a share of one core.
    pub scraper_cpu_share: Option<f64>,
}

impl Telemetry {
    /// Starts what `cfg` asks for around `plan`, its threads on `cpu` when given. A missing
    /// GPU or driver is a note, not an error.
    pub(crate) fn start(cfg: &Config, plan: &Plan, cpu: Option<usize>) -> Telemetry {
        let (gpu, gpu_unavailable) = if !cfg.gpu {
            (None, Some("turned off (--no-gpu-telemetry)".to_string()))
        } else {
            match gpu::Nvml::open().and_then(|n| {
                Sampler::start(
                    Box::new(n),
                    cfg.gpus.as_deref(),
                    cfg.gpu_sample_interval_ns,
                    cpu,
                )
            }) {
                Ok(s) => (Some(s), None),
                Err(e) => {
                    // Once per command: a sweep's points would each say it again.
                    static SAID: std::sync::atomic::AtomicBool =
                        std::sync::atomic::AtomicBool::new(false);
                    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                        crate::redact::say!(
                            "ringperf: GPU telemetry unavailable: {e}; GPU power and energy \
                             are not measured"
                        );
                    }
                    (None, Some(e.to_string()))
                }
            }
        };
        let targets: Vec<Target> = cfg
            .server_metrics
            .iter()
            .map(|s| Target::of(s, &plan.target.endpoint))
            .collect();
        let scraper = (!targets.is_empty()).then(|| {
            let tls = plan
                .target
                .tls
                .clone()
                .or_else(|| crate::tls::client_config(None, false).ok());
            Scraper::start(targets, tls, cfg.server_metrics_interval_ns, cpu)
        });
        Telemetry {
            gpu,
            gpu_unavailable,
            scraper,
            started_ns: crate::clock::now_ns(),
        }
    }

    /// Stops the threads and summarises the window `[tx, ty]`.
    pub(crate) fn finish(
        self,
        tx: u64,
        ty: u64,
        output_tokens: u64,
        requests: u64,
        output_tps: f64,
        price_eur_hour: Option<f64>,
    ) -> TelemetryReport {
        let wall = crate::clock::now_ns()
            .saturating_sub(self.started_ns)
            .max(1) as f64;
        let (series, gpu_cpu) = match self.gpu {
            Some(s) => {
                let (series, cpu) = s.finish();
                (series, Some(cpu as f64 / wall))
            }
            None => (Vec::new(), None),
        };
        let gpus: Vec<GpuWindow> = series
            .iter()
            .map(|s| window::summarize(s, tx, ty))
            .collect();
        // Totals need every GPU over the whole window: a GPU that dropped out covers part of
        // it, and its joules set against all the window's tokens would understate the energy
        // per token (its own figures, with what they cover, stay in `gpus`).
        let whole = gpus.iter().all(|g| g.dropped_out.is_none());
        let totals = (!gpus.is_empty() && whole)
            .then(|| window::totals(&gpus, output_tokens, requests, output_tps, price_eur_hour));
        let (server_metrics, scraper_cpu) = match self.scraper {
            Some(s) => {
                let (all, cpu) = s.finish();
                (
                    all.iter()
                        .map(|(t, scrapes)| server_metrics::summarize(t, scrapes, tx, ty))
                        .collect(),
                    Some(cpu as f64 / wall),
                )
            }
            None => (Vec::new(), None),
        };
        TelemetryReport {
            gpu_unavailable: self.gpu_unavailable,
            gpus,
            totals,
            series,
            server_metrics,
            gpu_sampler_cpu_share: gpu_cpu,
            scraper_cpu_share: scraper_cpu,
        }
    }
}
