//! The engine: one pinned thread per shard, each with its own monoio runtime.
//!
//! Shards meet only at the start (the plan), at the end of warm-up (a barrier, when there is
//! a warm-up), and at the end (their reports, merged by [`crate::report`]). While the run is
//! live the main thread only reads the shards' progress counters.

pub mod conn;
pub mod schedule;
mod shard;

use std::sync::OnceLock;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

pub use shard::Progress;

use crate::clock::{now_ns, thread_cpu_ns};
use crate::plan::RunPlan;
use crate::record::{Outcome, Phase, Record, TokenSource};
use crate::report::metrics::Metrics;
use crate::stats::Dist;
use schedule::{share, ClosedLoop, OpenLoop};

/// What one shard hands back.
#[derive(Debug)]
pub struct ShardReport {
    /// Shard number.
    pub index: usize,
    /// CPU it was pinned to.
    pub cpu: Option<usize>,
    /// Whether pinning succeeded.
    pub pinned: bool,
    /// I/O driver that ran.
    pub driver: &'static str,
    /// Every request it sent.
    pub records: Vec<Record>,
    /// Distributions of its measured, successful requests.
    pub metrics: Metrics,
    /// `seen − sent` of simulator-stamped events (ns).
    pub client_delay: Dist,
    /// Time from each read's arrival (kernel stamp, else read completion) to its events being recorded (ns).
    pub record_lag: Dist,
    /// Thread CPU time during the measured phase (ns).
    pub cpu_ns: u64,
    /// Wall time of the measured phase (ns).
    pub wall_ns: u64,
    /// Most requests in flight at once.
    pub peak_in_flight: usize,
    /// Content events received in the measured phase.
    pub events: u64,
}

/// Everything the shards measured.
#[derive(Debug)]
pub struct RunOutput {
    /// Per-shard reports, in shard order.
    pub shards: Vec<ShardReport>,
    /// Shards that failed, with the reason (their requests are lost and said so).
    pub failures: Vec<String>,
    /// True when the run was stopped early by Ctrl-C.
    pub cancelled: bool,
}

/// Raises the open-files soft limit to the hard limit; returns the new soft limit.
pub fn raise_nofile_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                return lim.rlim_max;
            }
        }
    }
    lim.rlim_cur
}

/// Runs the plan to completion (or until `stop` is set) and returns what the shards saw.
pub fn run(plan: Arc<RunPlan>, stop: Arc<AtomicBool>) -> anyhow::Result<RunOutput> {
    let nofile = raise_nofile_limit();
    let needed = plan.concurrency.saturating_add(64);
    if nofile > 0 && nofile < needed && plan.concurrency != u64::MAX {
        eprintln!(
            "warning: the open-files limit is {nofile} but concurrency {} needs about {needed}; see tuning/",
            plan.concurrency
        );
    }
    // Fail early, with one message, when the asked-for driver cannot run here.
    crate::runtime::build(plan.driver, plan.ring_entries.min(256)).map_err(|e| {
        anyhow::anyhow!("--driver {:?}: cannot start the runtime: {e}", plan.driver)
    })?;

    let n = plan.shards();
    let barrier = Arc::new(Barrier::new(n));
    let start = Arc::new(OnceLock::new());
    let progress: Vec<Arc<Progress>> = (0..n).map(|_| Arc::new(Progress::default())).collect();
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let plan = plan.clone();
        let stop = stop.clone();
        let barrier = barrier.clone();
        let progress = progress[i].clone();
        let start = start.clone();
        let handle = std::thread::Builder::new()
            .name(format!("ringperf-shard-{i}"))
            .spawn(move || shard_thread(i, plan, progress, stop, barrier, start))?;
        handles.push(handle);
    }
    let total = plan.request_count;
    let started = now_ns();
    let show = plan.progress && is_tty(libc::STDERR_FILENO);
    while !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(100));
        if show {
            print_progress(&progress, total, started, plan.duration_ns);
        }
    }
    if show {
        eprint!("\r\x1b[2K");
    }
    let mut shards = Vec::new();
    let mut failures = Vec::new();
    for (i, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(r)) => shards.push(r),
            Ok(Err(e)) => failures.push(format!("shard {i}: {e}")),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into());
                failures.push(format!("shard {i} panicked: {msg}; its requests are lost"));
            }
        }
    }
    Ok(RunOutput {
        shards,
        failures,
        cancelled: stop.load(Ordering::Relaxed),
    })
}

fn is_tty(fd: i32) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(fd) == 1 }
}

fn print_progress(
    progress: &[Arc<Progress>],
    total: Option<u64>,
    started: u64,
    duration: Option<u64>,
) {
    let done: u64 = progress
        .iter()
        .map(|p| p.done.load(Ordering::Relaxed))
        .sum();
    let errors: u64 = progress
        .iter()
        .map(|p| p.errors.load(Ordering::Relaxed))
        .sum();
    let in_flight: u64 = progress
        .iter()
        .map(|p| p.in_flight.load(Ordering::Relaxed))
        .sum();
    let secs = (now_ns() - started) as f64 / 1e9;
    let rate = done as f64 / secs.max(1e-9);
    let (of, eta) = match (total, duration) {
        (Some(t), _) => (
            format!("/{t}"),
            if rate > 0.0 {
                format!("{:.0}s", t.saturating_sub(done) as f64 / rate)
            } else {
                "?".into()
            },
        ),
        (None, Some(d)) => (
            String::new(),
            format!("{:.0}s", (d as f64 / 1e9 - secs).max(0.0)),
        ),
        _ => (String::new(), "?".into()),
    };
    eprint!(
        "\r\x1b[2K[ringperf] done {done}{of}  in flight {in_flight}  errors {errors}  {rate:.1} req/s  ETA {eta}"
    );
}

fn shard_thread(
    index: usize,
    plan: Arc<RunPlan>,
    progress: Arc<Progress>,
    stop: Arc<AtomicBool>,
    barrier: Arc<Barrier>,
    start: Arc<OnceLock<u64>>,
) -> anyhow::Result<ShardReport> {
    let cpu = plan.shard_cpus[index];
    let pinned = cpu.is_some_and(|id| core_affinity::set_for_current(core_affinity::CoreId { id }));
    let built = crate::runtime::build(plan.driver, plan.ring_entries);
    let (mut rt, driver) = match built {
        Ok(b) => b,
        Err(e) => {
            if plan.warmup > 0 || plan.offsets.is_some() {
                barrier.wait();
            }
            anyhow::bail!("cannot start the runtime: {e}");
        }
    };
    let n = plan.shards();
    let conc = if plan.concurrency == u64::MAX {
        usize::MAX
    } else {
        share(plan.concurrency, n, index) as usize
    };
    let entries = plan.dataset.entries.len();
    let warmup = plan.warmup;
    let p2 = plan.clone();
    let outcome = rt.block_on(async move {
        let shard = shard::Shard::new(index as u16, p2.clone(), progress, stop)?;
        let (t0, cpu0) = match &p2.offsets {
            Some(offsets) => {
                // Open loop: one schedule for the whole run; every shard starts at the same
                // instant, and warm-up and ramp-up requests are tagged, not separated.
                barrier.wait();
                let t0 = *start.get_or_init(|| now_ns() + 20_000_000);
                let cpu0 = thread_cpu_ns();
                let ramp_end = if p2.include_ramp { 0 } else { p2.ramp_ns };
                let mut s = OpenLoop::new(offsets.clone(), index, n, t0, warmup, entries, ramp_end);
                let hard = p2.duration_ns.map(|d| t0 + d + p2.ramp_ns + p2.grace_ns);
                let limits = shard::Limits {
                    cap: conc,
                    ramp: None,
                    dispatch_deadline: None,
                    hard_deadline: hard,
                };
                shard.run_phase(&mut s, limits).await;
                (t0, cpu0)
            }
            None => {
                if warmup > 0 {
                    let mut s = ClosedLoop::new(0, Some(warmup), index, n, entries, Phase::Warmup);
                    let limits = shard::Limits {
                        cap: conc,
                        ramp: None,
                        dispatch_deadline: None,
                        hard_deadline: None,
                    };
                    shard.run_phase(&mut s, limits).await;
                    barrier.wait();
                }
                let t0 = now_ns();
                let cpu0 = thread_cpu_ns();
                let end = p2.request_count.map(|c| warmup + c);
                let mut s = ClosedLoop::new(warmup, end, index, n, entries, Phase::Profiling);
                let dispatch_until = p2.duration_ns.map(|d| t0 + p2.ramp_ns + d);
                let ramp = (p2.ramp_ns > 0).then_some(shard::Ramp {
                    start_ns: t0,
                    len_ns: p2.ramp_ns,
                    tag: !p2.include_ramp,
                });
                let limits = shard::Limits {
                    cap: conc,
                    ramp,
                    dispatch_deadline: dispatch_until,
                    hard_deadline: dispatch_until.map(|d| d + p2.grace_ns),
                };
                shard.run_phase(&mut s, limits).await;
                (t0, cpu0)
            }
        };
        let cpu_ns = thread_cpu_ns() - cpu0;
        let wall_ns = now_ns() - t0;
        shard.close().await;
        let records = std::mem::take(&mut *shard.records.borrow_mut());
        let scratch = std::mem::take(&mut *shard.scratch.borrow_mut());
        let record_lag = std::mem::take(&mut *shard.record_lag.borrow_mut());
        Ok::<_, std::io::Error>((
            records,
            scratch.client_delay,
            record_lag,
            cpu_ns,
            wall_ns,
            shard.peak_in_flight.get(),
        ))
    });
    let (mut records, client_delay, record_lag, cpu_ns, wall_ns, peak) = outcome?;
    drop(rt);
    // After the measured window: count output tokens the server did not report.
    retokenize(&mut records, &plan);
    let mut metrics = Metrics::default();
    let mut events = 0u64;
    for r in records.iter().filter(|r| r.is_measured_ok()) {
        metrics.add(r);
        events += r.chunk_gaps_ns.len() as u64 + u64::from(r.first_content_ns.is_some());
    }
    Ok(ShardReport {
        index,
        cpu,
        pinned,
        driver,
        records,
        metrics,
        client_delay,
        record_lag,
        cpu_ns,
        wall_ns,
        peak_in_flight: peak,
        events,
    })
}

/// Fills in `osl` from the response text for successful requests without server usage.
pub fn retokenize(records: &mut [Record], plan: &RunPlan) {
    for r in records.iter_mut() {
        if r.outcome == Outcome::Ok && r.osl.is_some() && !r.text.is_empty() {
            r.tokenizer_osl = plan.tokenizer.count(&r.text).ok().map(|n| n as u64);
        }
        if r.outcome == Outcome::Ok && r.osl.is_none() {
            let n = if r.text.is_empty() {
                0
            } else {
                plan.tokenizer.count(&r.text).unwrap_or(0) as u64
            };
            r.osl = Some(n);
            r.osl_source = Some(TokenSource::Tokenizer);
        }
        r.text = String::new();
    }
}
