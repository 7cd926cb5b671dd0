//! Load benchmark: ringperf against the simulator at 1,000 and 10,000 concurrent streams,
//! beside a raw-drain client (same driver, same connections, same request bytes; it reads and
//! discards) so the cost of measuring is visible as a ratio.
//!
//!     cargo bench --bench load -- [--streams 1000,10000] [--runs 3] [--driver auto|uring|epoll] \
//!         [--client-flags "--no-kernel-timestamps"]
//!
//! The simulator runs in a child process pinned to CPU 0; the client runs one shard pinned to
//! CPU 1 (on a 2-core machine that is all there is). Printed per stream count: client CPU µs
//! per content event, client-added delay p50/p99 (simulator stamp → client read), RSS per
//! stream, for ringperf and for the raw drain, as medians over the runs; the two clients take
//! turns, and the ratio is the median of each pair's. The raw drain runs the shape of
//! ringperf's closed loop: one warm-up response per connection, then every stream sends at once.
//!
//!     cargo bench --bench load -- --colocated [--sim-nice -10] [--background] \
//!         [--streams 256,1000] [--itl 10ms] [--osl 64] [--client-flags "--shards 2 --cpus 0,1"]
//!
//! Co-located: the simulator in its own process, not pinned, at a better priority than the
//! client (as an inference server on a GPU host usually is), on the same CPUs as ringperf, which
//! runs at its defaults (its own placement). `--background` adds a CPU hog at nice 19 on every
//! CPU, as a compiler in the background. Printed per stream count: the per-request
//! client-added delay against the simulator's own stamps (send + receive side), the requests in
//! flight the simulator saw against the asked concurrency, the send lateness, client CPU per
//! event, and the verdict ringperf printed.

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use ringperf::cli::{Cli, Command as Sub};
use ringperf::internals::clock::{now_ns, thread_cpu_ns};
use ringperf::internals::runtime::Driver;

const SIM_ENV: &str = "RINGPERF_BENCH_SIM";
const CLIENT_ENV: &str = "RINGPERF_BENCH_CLIENT";
const OSL: u32 = 32;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Samples RSS every 20 ms until stopped; returns the peak.
fn rss_sampler(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut peak = 0;
        while !stop.load(Ordering::Relaxed) {
            peak = peak.max(rss_kib());
            std::thread::sleep(Duration::from_millis(20));
        }
        peak
    })
}

struct SimChild {
    child: Child,
    port: u16,
    io: Rc<RefCell<SimIo>>,
    started_ns: u64,
}

/// The simulator child's pipes: a line asked, a line answered.
struct SimIo {
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl SimIo {
    fn ask(&mut self, question: &str) -> Vec<u128> {
        let _ = writeln!(self.stdin, "{question}");
        let _ = self.stdin.flush();
        let mut line = String::new();
        let _ = self.stdout.read_line(&mut line);
        line.split_whitespace()
            .map(|v| v.parse().unwrap_or(0))
            .collect()
    }
}

impl SimChild {
    /// The simulator's CPU share since it started.
    fn cpu_share(self) -> f64 {
        let v = self.io.borrow_mut().ask("report");
        let (cpu, at) = (
            v.first().copied().unwrap_or(0),
            v.get(1).copied().unwrap_or(0),
        );
        cpu as f64 / (at as u64).saturating_sub(self.started_ns).max(1) as f64
    }

    /// A probe of the simulator's in-flight integral, over the pipe.
    fn probe(&self) -> ringperf::internals::engine::InFlightProbe {
        let io = self.io.clone();
        Box::new(move || {
            let v = io.borrow_mut().ask("inflight");
            ringperf::internals::engine::InFlightSample {
                t_ns: v.first().copied().unwrap_or(0) as u64,
                integral: v.get(1).copied().unwrap_or(0),
                // The simulator child's lateness is judged by the client run it serves.
                late_events: 0,
                worst_late_ns: 0,
            }
        })
    }
}

impl Drop for SimChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The simulator in a child process: pinned to CPU 0, or, with `nice`, not pinned and at
/// that priority.
fn spawn_sim(flags: &str, nice: Option<i32>) -> SimChild {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    if let Some(n) = nice {
        cmd.env(SIM_NICE_ENV, n.to_string());
    }
    let mut child = cmd
        .env(SIM_ENV, flags)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start simulator child");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let stdin = child.stdin.take().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    SimChild {
        child,
        port: line.trim().parse().expect("simulator port"),
        io: Rc::new(RefCell::new(SimIo { stdin, stdout })),
        started_ns: now_ns(),
    }
}

const HOG_ENV: &str = "RINGPERF_BENCH_HOG";

/// CPU hogs at nice 19, one per CPU, as a compiler in the background; they stop when the
/// parent closes their stdin (or after 20 minutes, whatever happens).
struct Background(Child);

impl Background {
    fn start() -> Background {
        let child = Command::new(std::env::current_exe().unwrap())
            .env(HOG_ENV, "1")
            .stdin(Stdio::piped())
            .spawn()
            .expect("start background load");
        Background(child)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn hog_child_main() {
    ringperf::internals::sys::set_nice(0, 19).expect("setpriority");
    let end = now_ns() + 20 * 60 * 1_000_000_000;
    let n = std::thread::available_parallelism().map_or(2, |n| n.get());
    for _ in 0..n {
        std::thread::spawn(move || {
            let mut x = 0u64;
            while now_ns() < end {
                for i in 0..100_000u64 {
                    x = x.wrapping_mul(31).wrapping_add(i);
                }
                std::hint::black_box(x);
            }
        });
    }
    // Until the parent goes away.
    let mut s = String::new();
    let _ = std::io::stdin().read_line(&mut s);
}

const SIM_NICE_ENV: &str = "RINGPERF_BENCH_SIM_NICE";

fn sim_child_main(flags: &str) {
    match std::env::var(SIM_NICE_ENV) {
        // Co-located: not pinned, at the given priority (threads inherit it).
        Ok(nice) => {
            ringperf::internals::sys::set_nice(0, nice.parse().expect("nice")).expect("setpriority")
        }
        Err(_) => {
            core_affinity::set_for_current(core_affinity::CoreId { id: 0 });
        }
    }
    let mut cfg = ringperf::cli::SimArgs::parse_inline(flags)
        .unwrap()
        .config()
        .unwrap();
    cfg.bind = "127.0.0.1:0".into();
    let h = ringperf::sim::start(&cfg).unwrap();
    let probe = h.in_flight_probe();
    println!("{}", h.addr.port());
    std::io::stdout().flush().unwrap();
    // Serve; answer `inflight` with the in-flight integral, and anything else with this
    // process's CPU time, then stop.
    let mut line = String::new();
    loop {
        line.clear();
        let _ = std::io::stdin().read_line(&mut line);
        if line.trim() == "inflight" {
            let s = probe();
            println!("{} {}", s.t_ns, s.integral);
            std::io::stdout().flush().unwrap();
            continue;
        }
        println!(
            "{} {}",
            ringperf::internals::sys::process_cpu_ns(),
            now_ns()
        );
        return;
    }
}

struct Figures {
    cpu_us_per_event: f64,
    delay_p50_us: f64,
    delay_p99_us: f64,
    rss_kib_per_stream: f64,
    events_per_sec: f64,
    cpu_share: f64,
    sim_cpu_share: f64,
}

impl Figures {
    fn line(&self) -> String {
        format!(
            "{} {} {} {} {} {} {}",
            self.cpu_us_per_event,
            self.delay_p50_us,
            self.delay_p99_us,
            self.rss_kib_per_stream,
            self.events_per_sec,
            self.cpu_share,
            self.sim_cpu_share
        )
    }
    fn parse(s: &str) -> Figures {
        let v: Vec<f64> = s
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(f64::NAN))
            .collect();
        Figures {
            cpu_us_per_event: v[0],
            delay_p50_us: v[1],
            delay_p99_us: v[2],
            rss_kib_per_stream: v[3],
            events_per_sec: v[4],
            cpu_share: v[5],
            sim_cpu_share: v[6],
        }
    }
}

/// Per-stream ITL that makes `streams` streams produce `rate` events per second in all.
fn itl_for(streams: usize, rate: u64) -> String {
    format!("{}us", streams as u64 * 1_000_000 / rate.max(1))
}

fn run_ringperf(streams: usize, rate: u64, driver: &str, secs: u64, flags: &str) -> Figures {
    let sim = spawn_sim(
        &format!("--ttft 5ms --itl {} --shards 1", itl_for(streams, rate)),
        None,
    );
    let load = closed_loop(streams, secs, OSL);
    let mut load: Vec<&str> = load.iter().map(String::as_str).collect();
    load.extend(flags.split_whitespace());
    let args = client_args(sim.port, driver, &load);
    // The plan (prompts, tokenizer) is built before the baseline, and the report after the
    // peak is taken: RSS per stream is the engine's alone, as the raw drain's is its loop's.
    // (The report's memory grows with the run's requests and events, not with its streams.)
    let plan = args.plan().unwrap();
    let base = rss_kib();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = rss_sampler(stop.clone());
    let (out, settings) = run_engine(plan, None);
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.join().unwrap();
    let r = ringperf::report::build(out, &settings);
    // Zeros from a run that measured nothing would read as figures.
    assert!(r.completed > 0, "ringperf measured nothing: {:?}", r.errors);
    let shard = &r.health.shards[0];
    Figures {
        cpu_us_per_event: shard.cpu_us_per_event,
        delay_p50_us: r.client_delay.percentile(50.0) as f64 / 1e3,
        delay_p99_us: r.client_delay.percentile(99.0) as f64 / 1e3,
        rss_kib_per_stream: peak.saturating_sub(base) as f64 / streams as f64,
        events_per_sec: shard.events_per_sec,
        cpu_share: shard.cpu_utilization,
        sim_cpu_share: sim.cpu_share(),
    }
}

/// Flags for a closed loop of `streams` requests in flight for `secs` after a warm-up round,
/// each asking for `osl` tokens.
fn closed_loop(streams: usize, secs: u64, osl: u32) -> Vec<String> {
    [
        "--concurrency",
        &streams.to_string(),
        "--warmup-request-count",
        &streams.to_string(),
        "--benchmark-duration",
        &format!("{secs}s"),
        "--output-tokens-mean",
        &osl.to_string(),
    ]
    .map(str::to_string)
    .to_vec()
}

/// Plans, places and runs a client in this process, as `ringperf profile` would.
fn run_client(
    args: &ringperf::cli::ProfileArgs,
    probe: Option<ringperf::internals::engine::InFlightProbe>,
) -> ringperf::report::Report {
    let (out, settings) = run_engine(args.plan().unwrap(), probe);
    ringperf::report::build(out, &settings)
}

/// Places and runs a planned client; the report is the caller's to build.
fn run_engine(
    plan: ringperf::plan::Plan,
    probe: Option<ringperf::internals::engine::InFlightProbe>,
) -> (
    ringperf::internals::engine::RunOutput,
    ringperf::report::Settings,
) {
    let placement = ringperf::internals::engine::place(&plan, &[]).unwrap();
    let settings = ringperf::report::Settings::of(&plan);
    let mut view = ringperf::internals::engine::LineView::new(&plan);
    let out = ringperf::internals::engine::run(
        Arc::new(plan),
        placement,
        Arc::new(AtomicBool::new(false)),
        probe,
        &mut view,
    )
    .unwrap();
    (out, settings)
}

/// `ringperf profile` flags for a streaming client of one shard on CPU 1, plus `load`.
fn client_args(port: u16, driver: &str, load: &[&str]) -> ringperf::cli::ProfileArgs {
    let mut argv = vec!["--shards", "1", "--cpus", "1", "--driver", driver];
    argv.extend_from_slice(load);
    profile_args(port, &argv)
}

/// `ringperf profile` flags for a streaming client of `port`, plus `more`; everything else
/// at its defaults.
fn profile_args(port: u16, more: &[&str]) -> ringperf::cli::ProfileArgs {
    let url = format!("http://127.0.0.1:{port}");
    let dir = std::env::temp_dir().join("ringperf-bench-load");
    let mut argv = vec![
        "ringperf",
        "profile",
        "--url",
        &url,
        // Planned here without the preflight that would ask the server: its model by name.
        "--model",
        "ringperf-sim",
        "--streaming",
        "--synthetic-input-tokens-mean",
        "16",
        "--num-dataset-entries",
        "16",
        "--no-progress",
        "--no-gpu-telemetry",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ];
    argv.extend_from_slice(more);
    let Sub::Profile(args) = Cli::try_parse_from(argv).unwrap().command else {
        unreachable!()
    };
    *args
}

/// Dispatch delay p50/p99 (µs), achieved/scheduled rate and the shard's CPU share of an
/// open-loop run.
fn dispatch_lateness(rate: u64, driver: &str, secs: u64) -> (f64, f64, f64, f64) {
    let sim = spawn_sim("--ttft 5ms --itl 2ms --shards 1", None);
    let (r, dur) = (rate.to_string(), format!("{secs}s"));
    let warm = (rate / 5).to_string();
    let args = client_args(
        sim.port,
        driver,
        &[
            "--request-rate",
            &r,
            "--benchmark-duration",
            &dur,
            "--warmup-request-count",
            &warm,
            "--output-tokens-mean",
            "4",
        ],
    );
    let r = run_client(&args, None);
    let d = &r.metrics.dispatch_delay;
    (
        d.percentile(50.0) as f64 / 1e3,
        d.percentile(99.0) as f64 / 1e3,
        r.achieved_rate / r.scheduled_rate.max(1e-9),
        r.health.shards[0].cpu_utilization,
    )
}

/// The raw drain: same connections and bytes; reads each response until the chunked body's
/// last chunk and throws it away. No parsing, no timestamps, no records.
fn run_raw(streams: usize, rate: u64, driver: Driver, secs: u64) -> Figures {
    let sim = spawn_sim(
        &format!("--ttft 5ms --itl {} --shards 1", itl_for(streams, rate)),
        None,
    );
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", sim.port).parse().unwrap();
    let body = format!(
        r#"{{"model":"ringperf-sim","messages":[{{"role":"user","content":"hello there"}}],"stream":true,"stream_options":{{"include_usage":true}},"max_tokens":{OSL}}}"#
    );
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nX-Request-ID: 0000000000000000\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes();
    let base = rss_kib();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = rss_sampler(stop.clone());
    let (cpu_ns, wall_ns, responses) = std::thread::spawn(move || {
        core_affinity::set_for_current(core_affinity::CoreId { id: 1 });
        let (mut rt, _) = ringperf::internals::runtime::build(driver, 4096).unwrap();
        rt.block_on(async move {
            let req = Rc::new(req);
            let warm = Rc::new(std::cell::Cell::new(0usize));
            let counted = Rc::new(std::cell::Cell::new(0u64));
            let start = Rc::new(StartLine::default());
            let end = Rc::new(std::cell::Cell::new(u64::MAX));
            let mut tasks = Vec::new();
            for _ in 0..streams {
                let (req, warm, counted, start, end) = (
                    req.clone(),
                    warm.clone(),
                    counted.clone(),
                    start.clone(),
                    end.clone(),
                );
                tasks.push(monoio::spawn(async move {
                    let mut s = monoio::net::TcpStream::connect_addr(addr).await.unwrap();
                    let mut wbuf = Vec::with_capacity(req.len());
                    let mut rbuf = Vec::with_capacity(16 * 1024);
                    let mut first = true;
                    while now_ns() < end.get() {
                        wbuf.clear();
                        wbuf.extend_from_slice(&req);
                        let (r, b) = s.write_all(wbuf).await;
                        wbuf = b;
                        r.unwrap();
                        loop {
                            rbuf.clear();
                            let (r, b) = s.read(rbuf).await;
                            rbuf = b;
                            if r.unwrap() == 0 {
                                return;
                            }
                            if rbuf.ends_with(b"0\r\n\r\n") {
                                break;
                            }
                        }
                        if first {
                            // As ringperf's closed loop: a warm-up response on every
                            // connection, then all streams start together, so both clients see
                            // the same traffic (events in step) and count only the responses to
                            // requests sent inside the measured window.
                            first = false;
                            warm.set(warm.get() + 1);
                            start.wait().await;
                        } else {
                            counted.set(counted.get() + 1);
                        }
                    }
                }));
            }
            while warm.get() < streams {
                monoio::time::sleep(Duration::from_millis(5)).await;
            }
            let (t0, c0) = (now_ns(), thread_cpu_ns());
            end.set(t0 + secs * 1_000_000_000);
            start.open();
            for t in tasks {
                t.await;
            }
            (thread_cpu_ns() - c0, now_ns() - t0, counted.get())
        })
    })
    .join()
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.join().unwrap();
    let events = responses * u64::from(OSL);
    Figures {
        cpu_us_per_event: cpu_ns as f64 / 1e3 / events.max(1) as f64,
        delay_p50_us: f64::NAN,
        delay_p99_us: f64::NAN,
        rss_kib_per_stream: peak.saturating_sub(base) as f64 / streams as f64,
        events_per_sec: events as f64 / (wall_ns as f64 / 1e9),
        cpu_share: cpu_ns as f64 / wall_ns as f64,
        sim_cpu_share: sim.cpu_share(),
    }
}

/// Where the raw drain's streams wait after their warm-up response until the measured window
/// opens.
#[derive(Default)]
struct StartLine {
    open: std::cell::Cell<bool>,
    waiting: RefCell<Vec<std::task::Waker>>,
}

impl StartLine {
    async fn wait(&self) {
        std::future::poll_fn(|cx| {
            if self.open.get() {
                return std::task::Poll::Ready(());
            }
            self.waiting.borrow_mut().push(cx.waker().clone());
            std::task::Poll::Pending
        })
        .await
    }

    fn open(&self) {
        self.open.set(true);
        for w in self.waiting.take() {
            w.wake();
        }
    }
}

/// One co-located run's figures.
struct Colocated {
    event_p99_us: f64,
    held: f64,
    client_cpu: f64,
    sim_cpu: f64,
    total_p50_us: f64,
    total_p99_us: f64,
    send_p99_us: f64,
    recv_p99_us: f64,
    in_flight: f64,
    sent_late_p99_us: f64,
    cpu_us_per_event: f64,
    starved_requests: u64,
    verdict: String,
}

fn colocated(streams: usize, opts: &Opts) -> Colocated {
    let sim = spawn_sim(
        &format!("--ttft {} --itl {} --shards 1", opts.ttft, opts.itl),
        Some(opts.sim_nice),
    );
    let load = closed_loop(streams, opts.secs, opts.osl);
    let mut more: Vec<&str> = load.iter().map(String::as_str).collect();
    more.extend(opts.client_flags.split_whitespace());
    let r = run_client(&profile_args(sim.port, &more), Some(sim.probe()));
    let sim_cpu = sim.cpu_share();
    let us = |d: &ringperf::internals::stats::Dist, p: f64| d.percentile(p) as f64 / 1e3;
    let c = &r.health.self_check;
    let (cpu, events) = r.health.shards.iter().fold((0.0, 0.0), |(c, e), s| {
        let ev = s.events_per_sec * r.window_ns as f64 / 1e9;
        (c + s.cpu_us_per_event * ev, e + ev)
    });
    Colocated {
        event_p99_us: us(&r.client_delay, 99.0),
        held: r.health.held.map_or(f64::NAN, |h| h.mean / streams as f64),
        client_cpu: r.health.shards.iter().map(|s| s.cpu_utilization).sum(),
        sim_cpu,
        total_p50_us: us(&c.total, 50.0),
        total_p99_us: us(&c.total, 99.0),
        send_p99_us: us(&c.send, 99.0),
        recv_p99_us: us(&c.receive, 99.0),
        in_flight: c.server_in_flight.unwrap_or(f64::NAN) / streams as f64,
        sent_late_p99_us: us(&r.metrics.dispatch_delay, 99.0),
        cpu_us_per_event: cpu / events.max(1.0),
        starved_requests: r.health.shards.iter().map(|s| s.starved_requests).sum(),
        verdict: r.health.verdict.clone(),
    }
}

fn print_colocated(opts: &Opts) {
    let _hog = opts.background.then(Background::start);
    println!(
        "co-located: simulator (one thread, not pinned, nice {}) and ringperf at its defaults{} on the same CPUs{}; TTFT {}, ITL {}, {} tokens one per event; {} run(s) of {} s after a warm-up round; medians",
        opts.sim_nice,
        if opts.client_flags.is_empty() { String::new() } else { format!(" plus {}", opts.client_flags) },
        if opts.background { ", a CPU hog at nice 19 on every CPU" } else { "" },
        opts.ttft, opts.itl, opts.osl, opts.runs, opts.secs
    );
    println!(
        "{:>7} | {:>23} {:>10} {:>10} {:>10} | {:>13} {:>6} | {:>13} | {:>10} {:>6} {:>6} | {:>7}",
        "streams",
        "added/request p50, p99",
        "send p99",
        "recv p99",
        "event p99",
        "sim in flight",
        "held",
        "sent late p99",
        "CPU µs/ev",
        "client",
        "sim",
        "starved"
    );
    for &n in &opts.streams {
        let mut runs: Vec<Colocated> = (0..opts.runs).map(|_| colocated(n, opts)).collect();
        let m = |g: fn(&Colocated) -> f64| median(runs.iter().map(g).collect());
        println!(
            "{n:>7} | {:>10.0} µs {:>8.0} µs {:>7.0} µs {:>7.0} µs {:>7.0} µs | {:>12.1}% {:>5.1}% | {:>10.0} µs | {:>10.2} {:>5.0}% {:>5.0}% | {:>7.0}",
            m(|c| c.total_p50_us),
            m(|c| c.total_p99_us),
            m(|c| c.send_p99_us),
            m(|c| c.recv_p99_us),
            m(|c| c.event_p99_us),
            m(|c| c.in_flight) * 100.0,
            m(|c| c.held) * 100.0,
            m(|c| c.sent_late_p99_us),
            m(|c| c.cpu_us_per_event),
            m(|c| c.client_cpu) * 100.0,
            m(|c| c.sim_cpu) * 100.0,
            m(|c| c.starved_requests as f64),
        );
        runs.sort_by(|a, b| a.total_p99_us.total_cmp(&b.total_p99_us));
        for (k, r) in runs.iter().enumerate() {
            println!("{:>7}   verdict (run {}, by p99): {}", "", k + 1, r.verdict);
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[derive(Parser)]
struct Opts {
    /// Stream counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    streams: Vec<usize>,
    /// Runs per figure (the median is printed).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Content events per second from all streams together (sets the simulator's ITL).
    #[arg(long, default_value_t = 50_000)]
    rate: u64,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 5)]
    secs: u64,
    /// Open-loop dispatch lateness at these rates (requests/s) instead of the stream table.
    #[arg(long, value_delimiter = ',')]
    dispatch: Vec<u64>,
    /// I/O driver for both clients.
    #[arg(long, value_enum, default_value_t = Driver::Auto)]
    driver: Driver,
    /// Co-located mode: the simulator in its own process on the client's CPUs (see above).
    #[arg(long)]
    colocated: bool,
    /// Co-located: the simulator's nice value (-10: it out-ranks the client).
    #[arg(long, default_value_t = -10, allow_negative_numbers = true)]
    sim_nice: i32,
    /// Co-located: also a CPU hog at nice 19 on every CPU.
    #[arg(long)]
    background: bool,
    /// Co-located: the simulator's time to first token.
    #[arg(long, default_value = "50ms")]
    ttft: String,
    /// Co-located: the simulator's time between tokens.
    #[arg(long, default_value = "10ms")]
    itl: String,
    /// Co-located: tokens per response.
    #[arg(long, default_value_t = 64)]
    osl: u32,
    /// Extra `ringperf profile` flags: co-located, e.g. "--shards 2 --cpus 0,1"; load, e.g.
    /// "--no-kernel-timestamps" (the load bench keeps its one shard on CPU 1).
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    client_flags: String,
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() {
    if let Ok(flags) = std::env::var(SIM_ENV) {
        sim_child_main(&flags);
        return;
    }
    if std::env::var_os(HOG_ENV).is_some() {
        hog_child_main();
        return;
    }
    let opts = Opts::parse();
    ringperf::internals::engine::raise_nofile_limit();
    if opts.colocated {
        print_colocated(&opts);
        return;
    }
    let driver = match opts.driver {
        Driver::Auto => "auto",
        Driver::Uring => "uring",
        Driver::Epoll => "epoll",
    };
    if let Ok(which) = std::env::var(CLIENT_ENV) {
        // A measurement in a fresh process, so that RSS is this client's alone.
        let n = opts.streams[0];
        let f = if which == "ringperf" {
            run_ringperf(n, opts.rate, driver, opts.secs, &opts.client_flags)
        } else {
            run_raw(n, opts.rate, opts.driver, opts.secs)
        };
        println!("{}", f.line());
        return;
    }
    let measure = |which: &str, n: usize| -> Figures {
        let out = Command::new(std::env::current_exe().unwrap())
            .env(CLIENT_ENV, which)
            .args([
                "--streams",
                &n.to_string(),
                "--rate",
                &opts.rate.to_string(),
            ])
            .args(["--secs", &opts.secs.to_string(), "--driver", driver])
            .args(["--client-flags", &opts.client_flags])
            .output()
            .expect("client child");
        Figures::parse(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .last()
                .unwrap_or(""),
        )
    };
    if !opts.dispatch.is_empty() {
        println!("dispatch lateness: Poisson arrivals, simulator on CPU 0, client (1 shard) on CPU 1, driver {driver}, {} s, median of {} runs", opts.secs, opts.runs);
        for &rate in &opts.dispatch {
            let runs: Vec<_> = (0..opts.runs)
                .map(|_| dispatch_lateness(rate, driver, opts.secs))
                .collect();
            let m = |f: fn(&(f64, f64, f64, f64)) -> f64| median(runs.iter().map(f).collect());
            println!(
                "{rate:>6} req/s: dispatch delay p50 {:>6.1} µs  p99 {:>7.1} µs  (target p99 ≤ 200 µs); achieved {:.1}% of the schedule; shard CPU {:.0}% (target < 60%)",
                m(|x| x.0),
                m(|x| x.1),
                m(|x| x.2) * 100.0,
                m(|x| x.3) * 100.0
            );
        }
        return;
    }
    println!("load benchmark: simulator on CPU 0, client (1 shard) on CPU 1, driver {driver}, {} run(s) of {} s, OSL {OSL}, {} events/s in all{}", opts.runs, opts.secs, opts.rate,
        if opts.client_flags.is_empty() { String::new() } else { format!("; ringperf plus {}", opts.client_flags) });
    println!(
        "{:>8} {:>10} | {:>12} {:>10} {:>10} {:>12} {:>10} {:>9} {:>9}",
        "streams",
        "client",
        "CPU µs/event",
        "delay p50",
        "delay p99",
        "RSS KiB/strm",
        "events/s",
        "CPU",
        "sim CPU"
    );
    for &n in &opts.streams {
        // The two clients take turns, run by run, so that a noisy stretch of the host falls on
        // both: the ratio is the median of each pair's.
        let pairs: Vec<(Figures, Figures)> = (0..opts.runs)
            .map(|_| (measure("ringperf", n), measure("raw", n)))
            .collect();
        let ours: Vec<&Figures> = pairs.iter().map(|p| &p.0).collect();
        let raw: Vec<&Figures> = pairs.iter().map(|p| &p.1).collect();
        for (name, runs) in [("ringperf", ours), ("raw drain", raw)] {
            let m = |g: fn(&Figures) -> f64| median(runs.iter().map(|f| g(f)).collect());
            println!(
                "{n:>8} {name:>10} | {:>12.2} {:>8.0}µs {:>8.0}µs {:>12.1} {:>10.0} {:>8.0}% {:>8.0}%",
                m(|f| f.cpu_us_per_event),
                m(|f| f.delay_p50_us),
                m(|f| f.delay_p99_us),
                m(|f| f.rss_kib_per_stream),
                m(|f| f.events_per_sec),
                m(|f| f.cpu_share) * 100.0,
                m(|f| f.sim_cpu_share) * 100.0
            );
        }
        let ratios: Vec<f64> = pairs
            .iter()
            .map(|(r, raw)| r.cpu_us_per_event / raw.cpu_us_per_event)
            .collect();
        println!(
            "{n:>8} {:>10} | {:>12.2}   median of the runs' ratios {:.2?} (target ≤ 1.30; delay p99 target ≤ {} ms; RSS target ≤ 16 KiB/stream)",
            "ratio",
            median(ratios.clone()),
            ratios,
            if n <= 1000 { 1 } else { 5 }
        );
    }
}
