//! What telemetry costs: the GPU sampler's and the metrics scraper's CPU at a 100 ms
//! interval, and the client-added delay of a run with telemetry on versus off.
//!
//!     cargo bench --bench telemetry -- [--runs 3] [--secs 5]
//!
//! Without a GPU the sampler reads the scripted source (`gpu::fake`, 8 GPUs), so its figure
//! is the sampler's own cost without NVML's; on a GPU host, bench/gpu-check.sh measures NVML.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use ringperf::cli::{Cli, Command};
use ringperf::internals::gpu::fake::{Fake, FakeGpu};
use ringperf::internals::gpu::Sampler;

#[derive(Parser)]
struct Opts {
    /// Runs per figure (medians are printed).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 5)]
    secs: u64,
    #[arg(long, hide = true)]
    bench: bool,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn sampler_share(secs: u64) -> f64 {
    let gpus = Fake((0..8).map(|_| FakeGpu::steady(300.0)).collect());
    let s = Sampler::start(Box::new(gpus), None, 100_000_000, None).unwrap();
    std::thread::sleep(Duration::from_secs(secs));
    let (_, cpu) = s.finish();
    cpu as f64 / (secs as f64 * 1e9)
}

fn scraper_share(secs: u64, sim: &ringperf::sim::SimHandle) -> f64 {
    let server = ringperf::plan::Endpoint::parse(&format!("http://{}", sim.addr)).unwrap();
    let t = ringperf::internals::server_metrics::Target::parse("auto", &server).unwrap();
    let s = ringperf::internals::server_metrics::Scraper::start(vec![t], None, 100_000_000, None);
    std::thread::sleep(Duration::from_secs(secs));
    let (scrapes, cpu) = s.finish();
    assert!(scrapes[0].1.iter().all(|x| x.page.is_ok()));
    cpu as f64 / (secs as f64 * 1e9)
}

/// Client-added delay p50/p99 (µs) of a run, with or without telemetry threads beside it.
fn delay(secs: u64, sim: &ringperf::sim::SimHandle, telemetry: bool) -> (f64, f64) {
    let url = format!("http://{}", sim.addr);
    let dur = format!("{secs}s");
    let dir = std::env::temp_dir().join("ringperf-bench-telemetry");
    let mut argv = vec![
        "ringperf",
        "profile",
        "--url",
        &url,
        "--streaming",
        "--concurrency",
        "256",
        "--benchmark-duration",
        &dur,
        "--output-tokens-mean",
        "64",
        "--synthetic-input-tokens-mean",
        "32",
        "--num-dataset-entries",
        "16",
        "--no-progress",
        "--no-gpu-telemetry",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ];
    if telemetry {
        argv.extend([
            "--server-metrics-url",
            "auto",
            "--server-metrics-interval",
            "100ms",
        ]);
    }
    let Command::Profile(args) = Cli::try_parse_from(argv).unwrap().command else {
        unreachable!()
    };
    // The fake GPU sampler runs beside the shards exactly as the NVML one would.
    let gpus = telemetry.then(|| {
        let fake = Fake((0..8).map(|_| FakeGpu::steady(300.0)).collect());
        Sampler::start(Box::new(fake), None, 100_000_000, None).unwrap()
    });
    let res = ringperf::app::profile(&args, Arc::new(AtomicBool::new(false)), false).unwrap();
    drop(gpus.map(Sampler::finish));
    let d = &res.report.client_delay;
    (
        d.percentile(50.0) as f64 / 1e3,
        d.percentile(99.0) as f64 / 1e3,
    )
}

fn main() {
    let opts = Opts::parse();
    let mut cfg = ringperf::cli::SimArgs::parse_inline("--ttft 10ms --itl 20ms")
        .unwrap()
        .config()
        .unwrap();
    cfg.bind = "127.0.0.1:0".into();
    let sim = ringperf::sim::start(&cfg).unwrap();
    let runs = opts.runs;
    let s = median((0..runs).map(|_| sampler_share(opts.secs)).collect());
    println!(
        "GPU sampler, 8 scripted GPUs, 100 ms: {:.3}% of a core (target ≤ 1%)",
        s * 100.0
    );
    let s = median((0..runs).map(|_| scraper_share(opts.secs, &sim)).collect());
    println!(
        "metrics scraper, simulator /metrics, 100 ms: {:.3}% of a core (target ≤ 1%)",
        s * 100.0
    );
    let off: Vec<(f64, f64)> = (0..runs).map(|_| delay(opts.secs, &sim, false)).collect();
    let on: Vec<(f64, f64)> = (0..runs).map(|_| delay(opts.secs, &sim, true)).collect();
    let m = |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| median(v.iter().map(f).collect());
    println!(
        "client-added delay, 256 streams: telemetry off p50 {:.1} µs p99 {:.1} µs; on p50 {:.1} µs p99 {:.1} µs",
        m(&off, |x| x.0),
        m(&off, |x| x.1),
        m(&on, |x| x.0),
        m(&on, |x| x.1)
    );
}
