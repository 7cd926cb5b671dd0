//! The engine: one thread per shard, each with its own monoio runtime.
//!
//! Shards meet only at the start (the plan and a start [`gate`]), at the end of warm-up (the
//! gate again, when there is a warm-up), and at the end (their reports, merged by
//! the report). Before the run, [`place`] decides how many shards and where from what
//! the host is doing ([`placement`]). While the run is live the main thread reads the shards'
//! progress counters and scheduler times, and moves a shard that is starved of CPU
//! ([`starvation`]).

mod dispatch;
mod feed;
mod gate;
mod limits;
pub mod placement;
mod reads;
mod schedule;
mod shard;
pub(crate) mod starvation;
mod turns;

use crate::warning::{Code, Warning};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use crate::sys::raise_nofile_limit;
pub use feed::FeedError;
pub use shard::Progress;

use crate::clock::{now_ns, thread_cpu_ns};
use crate::plan::Plan;
pub use crate::record::InFlightSample;
use crate::record::{Outcome, Phase, Record, RecordLog, TokenSource};
use crate::stats::Dist;
use gate::Gate;
use placement::{HostView, Pin, Placement};
use schedule::{share, ClosedLoop, OpenLoop, Schedule};
use starvation::{ShardWatch, Watch};

/// How long the host is watched before the run to find its quiet CPUs.
const HOST_SAMPLE: Duration = Duration::from_millis(100);
/// How often the progress line is redrawn.
const PROGRESS_EVERY_NS: u64 = 1_000_000_000;
/// File prompts to count after a run from which that is said (about a second's work).
const ANNOUNCE_COUNTING: usize = 1000;

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The I/O driver asked for cannot run here.
    #[error("--driver {0:?}: cannot start the runtime: {1}")]
    Driver(crate::runtime::Driver, std::io::Error),
    /// A shard thread could not be created.
    #[error("cannot start a shard thread: {0}")]
    Thread(std::io::Error),
}

/// Why one shard failed (its requests are lost, and the report says so).
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// Its runtime could not be built.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    /// Its timer, TLS name or another resource could not be set up.
    #[error("{0}")]
    Setup(#[from] std::io::Error),
    /// Another shard failed to start, so this one stopped at the start gate.
    #[error(transparent)]
    Gate(#[from] gate::Broken),
}

/// What one shard hands back.
#[derive(Debug)]
pub struct ShardReport {
    /// Shard number.
    pub index: usize,
    /// Where it was placed at the start.
    pub pin: Pin,
    /// Whether that placement took effect.
    pub pinned: bool,
    /// I/O driver that ran.
    pub driver: &'static str,
    /// Every request it sent.
    pub records: RecordLog,
    /// `seen − sent` of simulator-stamped events (ns).
    pub client_delay: Dist,
    /// Time from each read's arrival (kernel stamp, else read completion) to its events being recorded (ns).
    pub record_lag: Dist,
    /// Measured content events that came in one read with a later one (and carry its stamp).
    pub shared_events: u64,
    /// Reads of several content events: time since the previous read of the response (ns).
    pub shared_wait: Dist,
    /// Thread CPU time during the measured phase (ns).
    pub cpu_ns: u64,
    /// Wall time of the measured phase (ns).
    pub wall_ns: u64,
    /// Time it was runnable but waiting for a CPU during the measured phase (ns; `None` where
    /// the kernel keeps no scheduler statistics).
    pub wait_ns: Option<u64>,
    /// Start and end of its measured phase (`CLOCK_MONOTONIC` ns).
    pub measured: (u64, u64),
    /// Most requests in flight at once.
    pub peak_in_flight: usize,
    /// Content events received in the measured phase.
    pub events: u64,
    /// Requests of a streamed file it had to wait for, its feeder being behind.
    pub feed_stalls: u64,
    /// Why its feeder could not give a request (it then stopped sending).
    pub feed_error: Option<feed::EntryFeedError>,
    /// The model the server's responses named, when they named one.
    pub served_model: Option<String>,
}

/// Everything the shards measured.
#[derive(Debug)]
pub struct RunOutput {
    /// `--failed-request-threshold` stopped the run: why.
    pub threshold_crossed: Option<String>,
    /// Per-shard reports, in shard order.
    pub shards: Vec<ShardReport>,
    /// Shards that failed, with the reason (their requests are lost and said so).
    pub failures: Vec<Warning>,
    /// True when the run was stopped early by Ctrl-C.
    pub cancelled: bool,
    /// Where the shards were placed.
    pub placement: Placement,
    /// What the starvation watch saw, per shard.
    pub watch: Vec<ShardWatch>,
    /// Readings of the server's in-flight integral, when a probe was given.
    pub server_in_flight: Vec<InFlightSample>,
    /// What the main thread's watch (the starvation watch, the staircase and the live view)
    /// cost while the shards ran: (its CPU time, the time it watched), ns, as the kernel
    /// counts them.
    pub watch_cost: (u64, u64),
}

/// Reads a server's in-flight integral (the in-process simulator offers one).
pub type InFlightProbe = Box<dyn Fn() -> InFlightSample>;

/// Decides where the shards of `plan` run, from a short look at the host (skipped where the
/// flags leave nothing to decide).
pub fn place(plan: &Plan, reserved: &[usize]) -> Result<Placement, placement::Error> {
    let e = &plan.spec.engine;
    if e.kernel_timestamps {
        // Early, so that stamping is on when the first request goes out.
        crate::sys::keep_rx_timestamping_on();
    }
    let ask = placement::Ask {
        shards: e.shards,
        cpus: e.cpus.clone(),
        no_pin: e.no_pin,
        streams: plan.load.streams,
        reserved: reserved.to_vec(),
        // Each shard needs a place under every prefill cap (the warm-up's too).
        most: [
            plan.load.prefill,
            plan.load.warm.as_ref().and_then(|w| w.prefill),
        ]
        .into_iter()
        .flatten()
        .map(|p| p.cap.min(usize::MAX as u64) as usize)
        .min(),
    };
    let mut host = HostView {
        allowed: crate::cpus::usable_cpus(),
        busy: Vec::new(),
        server_local: crate::host::is_local(plan.target.endpoint.addr.ip()),
    };
    if !(ask.no_pin || ask.cpus.is_some() || host.allowed.len() < 2) {
        let before = crate::host::cpu_times();
        std::thread::sleep(HOST_SAMPLE);
        host.busy = crate::host::busy_shares(&before, &crate::host::cpu_times());
    }
    placement::place(&ask, &host)
}

/// What the main thread shows while the shards run: the progress line ([`LineView`]) or a
/// full-terminal view. It is called at every watch tick, off the shards.
pub trait View {
    /// The run as it stands: draw when it is time.
    fn tick(&mut self, live: &Live<'_>);
    /// The run is over (or cut short): take down what was drawn.
    fn end(&mut self);
}

/// The run as it stands at one watch tick.
pub struct Live<'a> {
    /// The plan being run.
    pub plan: &'a Plan,
    /// Each shard's live counters, in shard order.
    pub progress: &'a [Arc<Progress>],
    /// When the shards started (`CLOCK_MONOTONIC` ns).
    pub started_ns: u64,
    /// Now.
    pub now_ns: u64,
    /// Each shard's scheduler times read at this tick (ns running, ns waiting for a CPU);
    /// `None` before its thread runs or where the kernel keeps none.
    pub sched: &'a [Option<(u64, u64)>],
}

/// The progress line on stderr, redrawn every second when stderr is a terminal and the
/// plan asks for it.
pub struct LineView {
    show: bool,
    /// When stderr is no terminal: log a line this often (ns; 0: never), as JSON or not.
    log_every: u64,
    json: bool,
    drawn: u64,
    /// What the log reads: the run's counters, when it began and its length (a sweep's
    /// points each have their own), from its first tick to its end.
    seen: Option<(Vec<Arc<Progress>>, u64, Length)>,
    /// Start-up to say when the first request leaves: when it began, and from what.
    startup: Option<(u64, &'static str)>,
}

impl LineView {
    /// The line `plan` asks for: redrawn on a terminal, logged at `--progress-interval`
    /// elsewhere.
    pub fn new(plan: &Plan) -> LineView {
        let tty = crate::sys::is_tty(libc::STDERR_FILENO);
        LineView {
            show: plan.output.progress && tty,
            log_every: if tty {
                0
            } else {
                plan.output.progress_every_ns
            },
            json: plan.output.progress_json,
            drawn: 0,
            seen: None,
            startup: None,
        }
    }

    /// Says the start-up time (from `origin`, `from` naming it) as soon as the first request
    /// leaves.
    pub fn startup(&mut self, origin: u64, from: &'static str) {
        self.startup = Some((origin, from));
    }
}

impl View for LineView {
    fn tick(&mut self, live: &Live<'_>) {
        if let Some((origin, from)) = self.startup {
            let first = live
                .progress
                .iter()
                .map(|p| p.first_sent_ns.load(Ordering::Relaxed))
                .filter(|t| *t > 0)
                .min();
            if let Some(t) = first {
                self.startup = None;
                if self.show {
                    crate::redact::draw("\r\x1b[2K");
                }
                let s = t.saturating_sub(origin) as f64 / 1e9;
                crate::redact::say!(
                    "ringperf: start-up {s:.3} s ({from} to the first request sent)"
                );
            }
        }
        let since = live.now_ns - self.drawn.max(live.started_ns);
        if self.show && since >= PROGRESS_EVERY_NS {
            self.drawn = live.now_ns;
            print_progress(live.progress, live.plan, live.started_ns);
        } else if self.log_every > 0 {
            let (_, _, length) = self.seen.get_or_insert_with(|| {
                (
                    live.progress.to_vec(),
                    live.started_ns,
                    Length::of(live.plan),
                )
            });
            if since >= self.log_every {
                self.drawn = live.now_ns;
                let now = Snapshot::read(live.progress, *length, live.now_ns - live.started_ns);
                log(&now, self.json);
            }
        }
    }

    fn end(&mut self) {
        if self.show {
            crate::redact::draw("\r\x1b[2K");
        }
        if let Some((progress, started, length)) = self.seen.take() {
            let last = Snapshot::read(&progress, length, now_ns().saturating_sub(started));
            log(&last, self.json);
        }
    }
}

/// Runs the plan to completion (or until `stop` is set) with the shards where `placement`
/// puts them, shown by `view`, and returns what they saw. `probe`, when given, is read at
/// every watch tick.
pub fn run(
    plan: Arc<Plan>,
    placement: Placement,
    stop: Arc<AtomicBool>,
    probe: Option<InFlightProbe>,
    view: &mut dyn View,
) -> Result<RunOutput, Error> {
    raise_nofile_limit();
    // Fail early, with one message, when the asked-for driver cannot run here.
    let driver = plan.spec.engine.driver;
    crate::runtime::build(driver, plan.spec.engine.ring_entries.min(256))
        .map_err(|e| Error::Driver(driver, e))?;

    let allowed = crate::cpus::usable_cpus();
    // A first reading before any request leaves, so the window is covered from its start.
    let mut server_in_flight: Vec<InFlightSample> = probe.iter().map(|p| p()).collect();
    let n = placement.shards.len();
    let gate = Arc::new(Gate::new(n));
    // When the warm-up phase (of its own, at a rate) and the measured open loop start.
    let start = Arc::new([OnceLock::new(), OnceLock::new()]);
    let progress: Vec<Arc<Progress>> = (0..n).map(|_| Arc::new(Progress::default())).collect();
    let mut handles = Vec::with_capacity(n);
    // A streamed file's feeders, started from this thread so that none is pinned where its
    // shard is, and before any shard so that a failure leaves nothing running.
    let mut feeds = Vec::with_capacity(n);
    // An open loop's busiest second, shared by the shards (an upper bound on each one's).
    let busiest = match (&plan.workload.dataset.stream, &plan.load.offsets) {
        (Some(_), Some(offsets)) => Some(feed::busiest_second(offsets).div_ceil(n)),
        _ => None,
    };
    for i in 0..n {
        feeds.push(match &plan.workload.dataset.stream {
            Some(st) => {
                let at_once = busiest.unwrap_or_else(|| concurrency_share(&plan, i, n));
                let depth = feed::depth(at_once, st.average_bytes());
                let p = plan.clone();
                let build = move |entry| {
                    let stream = p.workload.dataset.stream.as_ref().expect("streamed");
                    // Boxed here, so that the shard's task stays narrow without allocating.
                    stream.entry(entry).map(Box::new)
                };
                let f = feed::Feed::start(i, sequence(&plan, i, n), depth, build);
                Some(f.map_err(Error::Thread)?)
            }
            None => None,
        });
    }
    for ((i, pin), feed) in placement.shards.iter().enumerate().zip(feeds) {
        let (plan, stop, gate, start) = (plan.clone(), stop.clone(), gate.clone(), start.clone());
        let progress = progress[i].clone();
        let cpus = pin.cpus(&allowed);
        let pin = pin.clone();
        let handle = std::thread::Builder::new()
            .name(format!("ringperf-shard-{i}"))
            .spawn(move || {
                let pinned = match pin {
                    Pin::Core(id) => core_affinity::set_for_current(core_affinity::CoreId { id }),
                    _ => crate::sys::set_affinity(0, &cpus).is_ok(),
                };
                let me = Placed {
                    index: i,
                    of: n,
                    pin,
                    pinned,
                };
                let r = shard_thread(me, plan, progress, stop, &gate, start, feed);
                if r.is_err() {
                    gate.break_it();
                }
                r
            })
            .map_err(Error::Thread)?;
        handles.push(handle);
    }

    // The main thread watches: scheduler times of every shard, the server's in-flight
    // integral, and the progress line.
    let mut watch = Watch::new(&placement, &allowed);
    let started = now_ns();
    let watch_cpu = thread_cpu_ns();
    let mut sched = vec![None; n];
    let mut warnings = Vec::new();
    let mut stairs = plan
        .load
        .steps
        .as_ref()
        .map(|s| limits::StairWatch::new(started, s));
    let mut threshold_crossed = None;
    while !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_nanos(starvation::INTERVAL_NS));
        let now = now_ns();
        for (i, p) in progress.iter().enumerate() {
            let tid = p.tid.load(Ordering::Relaxed);
            let Some(stat) = (tid > 0)
                .then(|| crate::host::thread_schedstat(tid))
                .flatten()
            else {
                continue;
            };
            sched[i] = Some((stat.run_ns, stat.wait_ns));
            if let Some(cpus) = watch.observe(i, now, stat) {
                if let Err(e) = crate::sys::set_affinity(tid, &cpus) {
                    warnings.push(Warning::new(
                        Code::ShardTrouble,
                        format!("shard {i} could not be moved off its CPU: {e}"),
                    ));
                }
            }
        }
        if let Some(p) = &probe {
            server_in_flight.push(p());
        }
        if let Some(w) = &mut stairs {
            let done = progress
                .iter()
                .map(|p| p.done.load(Ordering::Relaxed))
                .sum();
            let sum = |k: usize| {
                progress
                    .iter()
                    .map(|p| f64::from_bits(p.latency_sums[k].load(Ordering::Relaxed)))
                    .sum::<f64>()
            };
            if w.observe(now, done, [sum(0), sum(1)]) {
                // The knee is passed: stop sending; what is in flight finishes.
                progress
                    .iter()
                    .for_each(|p| p.finish.store(true, Ordering::Relaxed));
                stairs = None;
            }
        }
        if let (Some(t), None) = (plan.output.failed_request_threshold, &threshold_crossed) {
            let sum = |f: fn(&Progress) -> u64| progress.iter().map(|p| f(p)).sum::<u64>();
            let (done, errors) = (
                sum(|p| p.done.load(Ordering::Relaxed)),
                sum(|p| p.errors.load(Ordering::Relaxed)),
            );
            if let Some(why) = limits::failed_threshold(done, errors, t) {
                // Stop sending; what is in flight finishes and is measured.
                crate::redact::say!("ringperf: stopping: {why}");
                progress
                    .iter()
                    .for_each(|p| p.finish.store(true, Ordering::Relaxed));
                threshold_crossed = Some(why);
            }
        }
        view.tick(&Live {
            plan: &plan,
            progress: &progress,
            started_ns: started,
            now_ns: now,
            sched: &sched,
        });
    }
    view.end();
    let watch_cost = (
        thread_cpu_ns().saturating_sub(watch_cpu),
        now_ns().saturating_sub(started),
    );
    if let Some(p) = &probe {
        server_in_flight.push(p());
    }
    let mut shards = Vec::new();
    let mut failures = warnings;
    for (i, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(r)) => shards.push(r),
            Ok(Err(e)) => {
                failures.push(Warning::new(Code::ShardTrouble, format!("shard {i}: {e}")))
            }
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into());
                failures.push(Warning::new(
                    Code::ShardTrouble,
                    format!("shard {i} panicked: {msg}; its requests are lost"),
                ));
            }
        }
    }
    for s in &shards {
        if let Some(e) = &s.feed_error {
            failures.push(Warning::new(
                Code::ShardTrouble,
                format!("shard {}: stopped sending: {e}", s.index),
            ));
        }
        if s.feed_stalls > 0 {
            failures.push(Warning::new(
                Code::ClientLimited,
                format!(
                    "shard {}: {} request(s) waited to be built from the dataset file (its \
                     feeder fell behind; the client was the limit then)",
                    s.index, s.feed_stalls
                ),
            ));
        }
    }
    let cancelled = stop.load(Ordering::Relaxed);
    // After the run: the prompt tokens of the file lines it sent (about a millisecond each).
    let records = shards.iter_mut().flat_map(|s| s.records.iter_mut());
    let announce = |n: usize| {
        if n >= ANNOUNCE_COUNTING {
            crate::redact::say!(
                "ringperf: counting the prompt tokens of the {n} file prompts sent \
                 (Ctrl-C cuts this short)"
            );
        }
    };
    if let Err(e) =
        plan.workload
            .dataset
            .count_sent(records, &plan.workload.tokenizer, &stop, announce)
    {
        failures.push(Warning::new(Code::PromptsUncounted, e.to_string()));
    }
    Ok(RunOutput {
        shards,
        failures,
        cancelled,
        threshold_crossed,
        placement,
        watch: watch.shards,
        server_in_flight,
        watch_cost,
    })
}

/// The live line: what runs, how far it is, and TTFT and ITL so far (from per-shard
/// counters that the shards bump once per finished request; read here, off the hot path).
fn print_progress(progress: &[Arc<Progress>], plan: &Plan, started: u64) {
    // A line longer than the terminal wraps, and the next redraw would clear only its end.
    let width = crate::sys::terminal_columns(libc::STDERR_FILENO).unwrap_or(80);
    let line = progress_line(
        progress,
        plan,
        now_ns().saturating_sub(started),
        width.saturating_sub(1),
    );
    crate::redact::draw(&format!("\r\x1b[2K{line}"));
}

/// How long a run is asked to be: this node's requests, or a duration.
#[derive(Debug, Clone, Copy)]
pub struct Length {
    /// This node's share of `--request-count`.
    pub requests: Option<u64>,
    /// `--benchmark-duration` (ns).
    pub duration_ns: Option<u64>,
}

impl Length {
    /// `plan`'s.
    pub fn of(plan: &Plan) -> Length {
        Length {
            requests: plan.load.request_count.map(|t| plan.load.nodes.share(t)),
            duration_ns: plan.load.duration_ns,
        }
    }
}

/// The shards' live counters at one moment, as the progress line and the progress log show
/// them.
pub struct Snapshot {
    /// Seconds since the run began.
    pub elapsed_s: f64,
    /// Measured requests finished, and of how many (a counted run).
    pub done: u64,
    /// See `done`.
    pub of: Option<u64>,
    /// Measured requests that failed.
    pub errors: u64,
    /// Requests in flight.
    pub in_flight: u64,
    /// Finished requests per second so far.
    pub rate: f64,
    /// Seconds left: a timed run's rest, or a counted run's at the rate so far.
    pub remaining_s: Option<f64>,
    /// TTFT and ITL p50 and p99 so far (ms).
    pub ttft_ms: Option<(f64, f64)>,
    /// See `ttft_ms`.
    pub itl_ms: Option<(f64, f64)>,
}

impl Snapshot {
    /// The counters of `progress` after `elapsed_ns` of a run of `plan`'s `length`.
    pub fn read(progress: &[Arc<Progress>], length: Length, elapsed_ns: u64) -> Snapshot {
        let sum = |f: fn(&Progress) -> u64| progress.iter().map(|p| f(p)).sum::<u64>();
        let done = sum(|p| p.done.load(Ordering::Relaxed));
        let elapsed_s = elapsed_ns as f64 / 1e9;
        let rate = done as f64 / elapsed_s.max(1e-9);
        let of = length.requests;
        let remaining_s = match (of, length.duration_ns) {
            (Some(t), _) => (rate > 0.0).then(|| t.saturating_sub(done) as f64 / rate),
            (None, Some(d)) => Some((d as f64 / 1e9 - elapsed_s).max(0.0)),
            _ => None,
        };
        let merged = |f: fn(&Progress) -> &crate::stats::LiveBuckets| {
            let all = crate::stats::LiveBuckets::sum(progress.iter().map(|p| f(p)));
            let q = |p| crate::stats::LiveBuckets::quantile(&all, p);
            Some((q(50.0)? / 1e3, q(99.0)? / 1e3))
        };
        Snapshot {
            elapsed_s,
            done,
            of,
            errors: sum(|p| p.errors.load(Ordering::Relaxed)),
            in_flight: sum(|p| p.in_flight.load(Ordering::Relaxed)),
            rate,
            remaining_s,
            ttft_ms: merged(|p| &p.ttft_us),
            itl_ms: merged(|p| &p.itl_us),
        }
    }

    /// One line of a log (stderr that is no terminal): every figure (the log's line gives
    /// it its time); or the same as one JSON object with its time (`json`).
    pub fn log_line(&self, json: bool) -> String {
        if json {
            let time = crate::clock::iso8601(crate::clock::unix_time_secs());
            return serde_json::json!({
                "time": time,
                "event": "progress",
                "elapsed_s": self.elapsed_s,
                "remaining_s": self.remaining_s,
                "done": self.done,
                "of": self.of,
                "in_flight": self.in_flight,
                "errors": self.errors,
                "requests_per_s": self.rate,
                "ttft_p50_ms": self.ttft_ms.map(|p| p.0),
                "ttft_p99_ms": self.ttft_ms.map(|p| p.1),
            })
            .to_string();
        }
        let ms = |v: Option<(f64, f64)>| {
            v.map_or("-".into(), |(a, b)| format!("p50 {a:.1} ms p99 {b:.1} ms"))
        };
        format!(
            "ringperf: progress {:.0} s{}: {} done{}, {} in flight, {} errors, {:.1} req/s, TTFT {}",
            self.elapsed_s,
            self.remaining_s
                .map_or(String::new(), |r| format!(", {r:.0} s left")),
            self.done,
            self.of.map_or(String::new(), |t| format!(" of {t}")),
            self.in_flight,
            self.errors,
            self.rate,
            ms(self.ttft_ms)
        )
    }
}

/// Logs `now`: a line with its time, or a JSON object (which holds its time).
fn log(now: &Snapshot, json: bool) {
    if json {
        crate::redact::draw(&(now.log_line(true) + "\n"));
    } else {
        crate::redact::say!("{}", now.log_line(false));
    }
}

/// The text of the live line after `elapsed_ns`, from the shards' counters, in at most
/// `width` characters: what does not fit is left out, least telling first (the title, ITL,
/// errors while there are none, the rate, requests in flight, TTFT, the ETA), never the count
/// done.
pub fn progress_line(
    progress: &[Arc<Progress>],
    plan: &Plan,
    elapsed_ns: u64,
    width: usize,
) -> String {
    let now = Snapshot::read(progress, Length::of(plan), elapsed_ns);
    let (done, errors, in_flight, rate) = (now.done, now.errors, now.in_flight, now.rate);
    let of = now.of.map_or(String::new(), |t| format!("/{t}"));
    let eta = now.remaining_s.map_or("?".into(), |r| format!("{r:.0}s"));
    let merged =
        |v: Option<(f64, f64)>| v.map_or("-".into(), |(a, b)| format!("p50 {a:.1} p99 {b:.1} ms"));
    let asked = match plan.load.rate {
        Some(r) => format!("{r}/s asked"),
        None if plan.load.concurrency != u64::MAX => format!("{} asked", plan.load.concurrency),
        None => String::new(),
    };
    // In the order shown, each with how readily it is left out (higher first).
    let parts = [
        (format!("done {done}{of}"), 0),
        (format!("in flight {in_flight} ({asked})"), 3),
        (format!("errors {errors}"), if errors > 0 { 1 } else { 5 }),
        (format!("{rate:.1} req/s"), 4),
        (format!("TTFT {}", merged(now.ttft_ms)), 2),
        (format!("ITL {}", merged(now.itl_ms)), 6),
        (format!("ETA {eta}"), 1),
    ];
    let mut title = (!plan.output.title.is_empty()).then(|| format!("{} | ", plan.output.title));
    let mut keep = [true; 7];
    let line = |title: &Option<String>, keep: &[bool; 7]| {
        let shown: Vec<&str> = parts
            .iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|((t, _), _)| t.as_str())
            .collect();
        format!(
            "[ringperf] {}{}",
            title.as_deref().unwrap_or(""),
            shown.join("  ")
        )
    };
    let fits = |l: &str| l.chars().count() <= width;
    if !fits(&line(&title, &keep)) {
        title = None;
    }
    for level in (1..=6).rev() {
        if fits(&line(&title, &keep)) {
            break;
        }
        for (k, (_, p)) in keep.iter_mut().zip(&parts) {
            if *p == level {
                *k = false;
            }
        }
    }
    line(&title, &keep).chars().take(width).collect()
}

/// The shard's own scheduler times (its waiting for a CPU), where the kernel keeps them.
fn own_schedstat() -> Option<crate::host::SchedStat> {
    crate::host::thread_schedstat(crate::sys::gettid())
}

/// A shard's place: its number of how many, and where it runs.
struct Placed {
    index: usize,
    of: usize,
    pin: Pin,
    pinned: bool,
}

/// Shard `index` of `n`'s open-loop schedule, from `t0`. Request ids are the whole load's:
/// a shard takes every `slots`-th from `slot`, and sends entry `id mod entries`.
fn open_loop(plan: &Plan, offsets: &Arc<Vec<u64>>, index: usize, n: usize, t0: u64) -> OpenLoop {
    let l = &plan.load;
    let (slot, slots) = l.nodes.slot(index, n);
    let ramp_end = if l.include_ramp { 0 } else { l.ramp_ns };
    let entries = plan.workload.dataset.len();
    OpenLoop::new(
        offsets.clone(),
        slot,
        slots,
        t0,
        l.warmup,
        entries,
        ramp_end,
    )
}

/// Shard `index` of `n`'s closed-loop schedules: warm-up (when there is one), then measured.
fn closed_loop(plan: &Plan, index: usize, n: usize) -> (Option<ClosedLoop>, ClosedLoop) {
    let l = &plan.load;
    let (slot, slots) = l.nodes.slot(index, n);
    let entries = plan.workload.dataset.len();
    let warm = (l.warmup > 0)
        .then(|| ClosedLoop::new(0, Some(l.warmup), slot, slots, entries, Phase::Warmup));
    let end = l.request_count.map(|c| l.warmup + c);
    let measured = ClosedLoop::new(l.warmup, end, slot, slots, entries, Phase::Profiling);
    (warm, measured)
}

/// What shard `index` of `n` sends, in its order (request id, entry): its schedules, one
/// after the other, for a feeder to build them ahead.
fn sequence(plan: &Plan, index: usize, n: usize) -> impl Iterator<Item = (u64, u32)> + Send {
    let l = &plan.load;
    // A warm-up of its own comes first (the plan refuses one of no known length here).
    let warm: Option<Box<dyn Schedule + Send>> = l.warm.as_ref().map(|w| {
        let (slot, slots) = l.nodes.slot(index, n);
        let entries = plan.workload.dataset.len();
        let first = crate::plan::load::WARM_IDS;
        match &w.offsets {
            Some(o) => Box::new(
                OpenLoop::new(o.clone(), slot, slots, 0, u64::MAX, entries, 0).with_first_id(first),
            ) as Box<dyn Schedule + Send>,
            None => Box::new(ClosedLoop::new(
                first,
                w.count.map(|c| first + c),
                slot,
                slots,
                entries,
                Phase::Warmup,
            )),
        }
    });
    let phases: Vec<Box<dyn Schedule + Send>> = match &plan.load.offsets {
        Some(offsets) => vec![Box::new(open_loop(plan, offsets, index, n, 0))],
        None => {
            let (warm, measured) = closed_loop(plan, index, n);
            let warm = warm.map(|w| Box::new(w) as Box<dyn Schedule + Send>);
            warm.into_iter().chain([Box::new(measured) as _]).collect()
        }
    };
    warm.into_iter()
        .chain(phases)
        .flat_map(|mut s| std::iter::from_fn(move || s.next()).map(|t| (t.id, t.entry)))
}

/// Shard `index` of `n`'s share of the concurrency (`usize::MAX`: no cap).
fn concurrency_share(plan: &Plan, index: usize, n: usize) -> usize {
    let load = &plan.load;
    if load.concurrency == u64::MAX {
        usize::MAX
    } else {
        share(load.nodes.share(load.concurrency), n, index) as usize
    }
}

fn shard_thread(
    me: Placed,
    plan: Arc<Plan>,
    progress: Arc<Progress>,
    stop: Arc<AtomicBool>,
    gate: &Gate,
    start: Arc<[OnceLock<u64>; 2]>,
    feed: Option<feed::EntryFeed>,
) -> Result<ShardReport, ShardError> {
    progress.tid.store(crate::sys::gettid(), Ordering::Relaxed);
    let (mut rt, driver) =
        crate::runtime::build(plan.spec.engine.driver, plan.spec.engine.ring_entries)
            .map_err(ShardError::Runtime)?;
    let (index, n) = (me.index, me.of);
    let conc = concurrency_share(&plan, index, n);
    if let Some(f) = &feed {
        // The first burst finds its requests built.
        f.wait_full(&stop);
    }
    let p2 = plan.clone();
    let outcome = rt.block_on(async move {
        let shard = shard::Shard::new(index as u16, p2.clone(), progress, stop, feed)?;
        let l = &p2.load;
        if let Some(w) = &l.warm {
            // A warm-up of its own: every shard starts it together, and the measured phase
            // starts after it at the gate.
            gate.pass()?;
            let (slot, slots) = l.nodes.slot(index, n);
            let entries = p2.workload.dataset.len();
            let cap = if w.concurrency == u64::MAX {
                usize::MAX
            } else {
                share(w.concurrency, n, index) as usize
            };
            match &w.offsets {
                Some(offsets) => {
                    let t0 = *start[0].get_or_init(|| now_ns() + 20_000_000);
                    let mut s =
                        OpenLoop::new(offsets.clone(), slot, slots, t0, u64::MAX, entries, 0)
                            .with_first_id(crate::plan::load::WARM_IDS);
                    let limits = limits::Limits::warm_up(w, cap, t0)
                        .with_prefill(w.prefill, index, n, t0, true);
                    shard.run_phase(&mut s, limits).await;
                }
                None => {
                    let first = crate::plan::load::WARM_IDS;
                    let end = w.count.map(|c| first + c);
                    let mut s = ClosedLoop::new(first, end, slot, slots, entries, Phase::Warmup);
                    let t0 = now_ns();
                    let limits = limits::Limits::warm_up(w, cap, t0)
                        .with_prefill(w.prefill, index, n, t0, true);
                    shard.run_phase(&mut s, limits).await;
                }
            }
        }
        let (t0, cpu0, wait0) = match &l.offsets {
            Some(offsets) => {
                // Open loop: one schedule for the whole run; every shard starts at the same
                // instant, and warm-up and ramp-up requests are tagged, not separated.
                gate.pass()?;
                let t0 = *start[1].get_or_init(|| now_ns() + 20_000_000);
                let (cpu0, wait0) = (thread_cpu_ns(), own_schedstat());
                let mut s = open_loop(&p2, offsets, index, n, t0);
                let limits = limits::Limits::open_loop(l, conc, t0)
                    .with_prefill(l.prefill, index, n, t0, true);
                shard.run_phase(&mut s, limits).await;
                (t0, cpu0, wait0)
            }
            None => {
                let (warm, mut s) = closed_loop(&p2, index, n);
                let warm_phase = warm.is_some();
                if let Some(mut w) = warm {
                    let limits = limits::Limits::capped(conc).with_prefill(
                        l.prefill,
                        index,
                        n,
                        now_ns(),
                        false,
                    );
                    shard.run_phase(&mut w, limits).await;
                }
                if warm_phase || l.warm.is_some() {
                    gate.pass()?;
                }
                let t0 = now_ns();
                let (cpu0, wait0) = (thread_cpu_ns(), own_schedstat());
                shard
                    .run_phase(
                        &mut s,
                        limits::Limits::closed_loop(l, conc, t0)
                            .with_stairs(l, index, n)
                            .with_users(l, l.warmup, t0)
                            .with_prefill(l.prefill, index, n, t0, true),
                    )
                    .await;
                (t0, cpu0, wait0)
            }
        };
        let cpu_ns = thread_cpu_ns() - cpu0;
        let t1 = now_ns();
        let wait_ns = wait0
            .zip(own_schedstat())
            .map(|(a, b)| b.wait_ns.saturating_sub(a.wait_ns));
        shard.close().await;
        let tally = std::mem::take(&mut *shard.tally.borrow_mut());
        let scratch = std::mem::take(&mut *shard.scratch.borrow_mut());
        let feed_error = shard.feed_error.borrow_mut().take();
        Ok::<_, ShardError>(ShardReport {
            index,
            pin: me.pin,
            pinned: me.pinned,
            driver,
            records: tally.records,
            client_delay: scratch.client_delay,
            record_lag: tally.record_lag,
            shared_events: tally.shared_events,
            shared_wait: tally.shared_wait,
            cpu_ns,
            wall_ns: t1 - t0,
            wait_ns,
            measured: (t0, t1),
            peak_in_flight: shard.peak_in_flight(),
            events: tally.events,
            feed_stalls: shard.feed.as_ref().map_or(0, |f| f.stalls.get()),
            feed_error,
            served_model: scratch.served_model,
        })
    });
    drop(rt);
    let mut report = outcome?;
    // After the measured window: count output tokens the server did not report.
    retokenize(report.records.iter_mut(), &plan);
    Ok(report)
}

/// Fills in `osl` from the response text for successful requests without server usage (of
/// kinds that generate text: an embedding, a ranking or an image has no output length).
pub fn retokenize<'a>(records: impl Iterator<Item = &'a mut Record>, plan: &Plan) {
    if !plan.target.kind.generates() {
        return;
    }
    for r in records {
        if r.outcome == Outcome::Ok && r.osl.is_some() && !r.text.is_empty() {
            r.tokenizer_osl = plan
                .workload
                .tokenizer
                .count(&r.text)
                .ok()
                .map(|n| n as u64);
        }
        if r.outcome == Outcome::Ok && r.osl.is_none() {
            let n = if r.text.is_empty() {
                0
            } else {
                plan.workload.tokenizer.count(&r.text).unwrap_or(0) as u64
            };
            r.osl = Some(n);
            r.osl_source = Some(TokenSource::Tokenizer);
        }
        r.text = String::new();
    }
}
