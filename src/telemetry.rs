//! GPU sampling and server-metrics scraping around a run, off the shards' cores.

use serde::Serialize;

use crate::cli::TelemetryArgs;
use crate::engine::placement::{Pin, Placement};
use crate::gpu::window::{self, GpuTotals, GpuWindow};
use crate::gpu::{self, Sampler, Series};
use crate::plan::RunPlan;
use crate::server_metrics::{self, Scraper, Summary, Target};

/// Telemetry threads while the run is live.
pub struct Telemetry {
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

/// A CPU no shard is pinned to, for the telemetry threads (none: let the OS place them, as
/// when shards may move among all CPUs).
fn spare_cpu(placement: &Placement) -> Option<usize> {
    let mut used = Vec::new();
    for p in &placement.shards {
        match p {
            Pin::Core(c) => used.push(*c),
            Pin::Set(s) => used.extend(s),
            Pin::Free => return None,
        }
    }
    crate::plan::usable_cpus()
        .into_iter()
        .rev()
        .find(|id| !used.contains(id))
}

impl Telemetry {
    /// Starts what the flags ask for. A missing GPU or driver is a note, not an error.
    pub fn start(
        args: &TelemetryArgs,
        plan: &RunPlan,
        placement: &Placement,
    ) -> Result<Telemetry, String> {
        let cpu = spare_cpu(placement);
        let (gpu, gpu_unavailable) = if args.no_gpu_telemetry {
            (None, Some("turned off (--no-gpu-telemetry)".to_string()))
        } else {
            let want = gpu::parse_gpus(&args.gpus)?;
            match gpu::Nvml::open().and_then(|n| {
                Sampler::start(Box::new(n), want.as_deref(), args.gpu_sample_interval, cpu)
            }) {
                Ok(s) => (Some(s), None),
                Err(e) => {
                    eprintln!("GPU telemetry unavailable: {e}");
                    (None, Some(e))
                }
            }
        };
        let targets = args
            .server_metrics_url
            .iter()
            .map(|u| Target::parse(u, &plan.endpoint))
            .collect::<Result<Vec<_>, _>>()?;
        let scraper = (!targets.is_empty()).then(|| {
            let tls = plan
                .tls
                .clone()
                .or_else(|| crate::tls::client_config(None, false).ok());
            Scraper::start(targets, tls, args.server_metrics_interval, cpu)
        });
        Ok(Telemetry {
            gpu,
            gpu_unavailable,
            scraper,
            started_ns: crate::clock::now_ns(),
        })
    }

    /// Stops the threads and summarises the window `[tx, ty]`.
    pub fn finish(
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
        let totals = (!gpus.is_empty())
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
