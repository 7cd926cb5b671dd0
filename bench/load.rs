//! Load benchmark: ringperf against the simulator at 1,000 and 10,000 concurrent streams,
//! beside a raw-drain client (same driver, same connections, same request bytes; it reads and
//! discards) so the cost of measuring is visible as a ratio.
//!
//!     cargo bench --bench load -- [--streams 1000,10000] [--runs 3] [--driver auto|uring|epoll]
//!
//! The simulator runs in a child process pinned to CPU 0; the client runs one shard pinned to
//! CPU 1 (on a 2-core machine that is all there is). Printed per stream count: client CPU µs
//! per content event, client-added delay p50/p99 (simulator stamp → client read), RSS per
//! stream, for ringperf and for the raw drain, as medians over the runs.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use ringperf::cli::{Cli, Command as Sub};
use ringperf::clock::{now_ns, thread_cpu_ns};
use ringperf::runtime::Driver;

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
    stdout: BufReader<std::process::ChildStdout>,
    started_ns: u64,
}

impl SimChild {
    /// The simulator's CPU share since it started.
    fn cpu_share(mut self) -> f64 {
        let stdin = self.child.stdin.as_mut().unwrap();
        let _ = stdin.write_all(b"report\n");
        let _ = stdin.flush();
        let mut line = String::new();
        let _ = self.stdout.read_line(&mut line);
        let mut it = line
            .split_whitespace()
            .map(|v| v.parse::<u64>().unwrap_or(0));
        let (cpu, at) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
        cpu as f64 / at.saturating_sub(self.started_ns).max(1) as f64
    }
}

impl Drop for SimChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_sim(flags: &str) -> SimChild {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(SIM_ENV, flags)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start simulator child");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    SimChild {
        child,
        port: line.trim().parse().expect("simulator port"),
        stdout,
        started_ns: now_ns(),
    }
}

fn sim_child_main(flags: &str) {
    core_affinity::set_for_current(core_affinity::CoreId { id: 0 });
    let mut args = ringperf::cli::SimArgs::parse_inline(flags).unwrap();
    args.bind = "127.0.0.1:0".into();
    let h = ringperf::sim::start(&args).unwrap();
    println!("{}", h.addr.port());
    std::io::stdout().flush().unwrap();
    // Serve until the parent writes a line, then report this process's CPU time.
    let mut s = String::new();
    let _ = std::io::stdin().read_line(&mut s);
    println!("{} {}", process_cpu_ns(), now_ns());
}

fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec; CLOCK_PROCESS_CPUTIME_ID always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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

fn run_ringperf(streams: usize, rate: u64, driver: &str, secs: u64) -> Figures {
    let sim = spawn_sim(&format!(
        "--ttft 5ms --itl {} --shards 1",
        itl_for(streams, rate)
    ));
    let n = streams.to_string();
    let dur = format!("{secs}s");
    let osl = OSL.to_string();
    let args = client_args(
        sim.port,
        driver,
        &[
            "--concurrency",
            &n,
            "--warmup-request-count",
            &n,
            "--benchmark-duration",
            &dur,
            "--output-tokens-mean",
            &osl,
        ],
    );
    let plan = Arc::new(ringperf::plan::RunPlan::build(&args).unwrap());
    let base = rss_kib();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = rss_sampler(stop.clone());
    let out = ringperf::engine::run(plan, Arc::new(AtomicBool::new(false))).unwrap();
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.join().unwrap();
    let r = ringperf::report::build(out, &Default::default());
    let shard = &r.shards[0];
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

/// `ringperf profile` flags for a streaming client of one shard on CPU 1, plus `load`.
fn client_args(port: u16, driver: &str, load: &[&str]) -> ringperf::cli::ProfileArgs {
    let url = format!("http://127.0.0.1:{port}");
    let dir = std::env::temp_dir().join("ringperf-bench-load");
    let mut argv = vec![
        "ringperf",
        "profile",
        "--url",
        &url,
        "--streaming",
        "--synthetic-input-tokens-mean",
        "16",
        "--num-dataset-entries",
        "16",
        "--shards",
        "1",
        "--cpus",
        "1",
        "--driver",
        driver,
        "--no-progress",
        "--no-gpu-telemetry",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ];
    argv.extend_from_slice(load);
    let Sub::Profile(args) = Cli::try_parse_from(argv).unwrap().command else {
        unreachable!()
    };
    *args
}

/// Dispatch delay p50/p99 (µs) and achieved/scheduled rate of an open-loop run.
fn dispatch_lateness(rate: u64, driver: &str, secs: u64) -> (f64, f64, f64) {
    let sim = spawn_sim("--ttft 5ms --itl 2ms --shards 1");
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
    let plan = Arc::new(ringperf::plan::RunPlan::build(&args).unwrap());
    let settings = ringperf::report::Settings {
        rate: plan.rate,
        slos: Vec::new(),
    };
    let out = ringperf::engine::run(plan, Arc::new(AtomicBool::new(false))).unwrap();
    let r = ringperf::report::build(out, &settings);
    let d = &r.metrics.dispatch_delay;
    (
        d.percentile(50.0) as f64 / 1e3,
        d.percentile(99.0) as f64 / 1e3,
        r.achieved_rate / r.scheduled_rate.max(1e-9),
    )
}

/// The raw drain: same connections and bytes; reads each response until the chunked body's
/// last chunk and throws it away. No parsing, no timestamps, no records.
fn run_raw(streams: usize, rate: u64, driver: Driver, secs: u64) -> Figures {
    let sim = spawn_sim(&format!(
        "--ttft 5ms --itl {} --shards 1",
        itl_for(streams, rate)
    ));
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
        let (mut rt, _) = ringperf::runtime::build(driver, 4096).unwrap();
        rt.block_on(async move {
            let req = Rc::new(req);
            let warm = Rc::new(std::cell::Cell::new(0usize));
            let counted = Rc::new(std::cell::Cell::new(0u64));
            let measuring = Rc::new(std::cell::Cell::new(false));
            let end = Rc::new(std::cell::Cell::new(u64::MAX));
            let mut tasks = Vec::new();
            for _ in 0..streams {
                let (req, warm, counted, measuring, end) = (
                    req.clone(),
                    warm.clone(),
                    counted.clone(),
                    measuring.clone(),
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
                            first = false;
                            warm.set(warm.get() + 1);
                        } else if measuring.get() {
                            counted.set(counted.get() + 1);
                        }
                    }
                }));
            }
            while warm.get() < streams {
                monoio::time::sleep(Duration::from_millis(5)).await;
            }
            let (t0, c0) = (now_ns(), thread_cpu_ns());
            measuring.set(true);
            end.set(t0 + secs * 1_000_000_000);
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
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() {
    if let Ok(flags) = std::env::var(SIM_ENV) {
        sim_child_main(&flags);
        return;
    }
    let opts = Opts::parse();
    ringperf::engine::raise_nofile_limit();
    let driver = match opts.driver {
        Driver::Auto => "auto",
        Driver::Uring => "uring",
        Driver::Epoll => "epoll",
    };
    if let Ok(which) = std::env::var(CLIENT_ENV) {
        // A measurement in a fresh process, so that RSS is this client's alone.
        let n = opts.streams[0];
        let f = if which == "ringperf" {
            run_ringperf(n, opts.rate, driver, opts.secs)
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
            let runs: Vec<(f64, f64, f64)> = (0..opts.runs)
                .map(|_| dispatch_lateness(rate, driver, opts.secs))
                .collect();
            let m = |f: fn(&(f64, f64, f64)) -> f64| median(runs.iter().map(f).collect());
            println!(
                "{rate:>6} req/s: dispatch delay p50 {:>6.1} µs  p99 {:>7.1} µs  (target p99 ≤ 200 µs); achieved {:.1}% of the schedule",
                m(|x| x.0),
                m(|x| x.1),
                m(|x| x.2) * 100.0
            );
        }
        return;
    }
    println!("load benchmark: simulator on CPU 0, client (1 shard) on CPU 1, driver {driver}, {} run(s) of {} s, OSL {OSL}, {} events/s in all", opts.runs, opts.secs, opts.rate);
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
        let mut rows = Vec::new();
        for (name, which) in [("ringperf", "ringperf"), ("raw drain", "raw")] {
            let runs: Vec<Figures> = (0..opts.runs).map(|_| measure(which, n)).collect();
            let m = |g: fn(&Figures) -> f64| median(runs.iter().map(g).collect());
            let row = (
                m(|f| f.cpu_us_per_event),
                m(|f| f.delay_p50_us),
                m(|f| f.delay_p99_us),
                m(|f| f.rss_kib_per_stream),
                m(|f| f.events_per_sec),
                m(|f| f.cpu_share),
                m(|f| f.sim_cpu_share),
            );
            println!(
                "{n:>8} {name:>10} | {:>12.2} {:>8.0}µs {:>8.0}µs {:>12.1} {:>10.0} {:>8.0}% {:>8.0}%",
                row.0, row.1, row.2, row.3, row.4, row.5 * 100.0, row.6 * 100.0
            );
            rows.push(row);
        }
        println!(
            "{n:>8} {:>10} | {:>12.2}   (target ≤ 1.30; delay p99 target ≤ {} ms; RSS target ≤ 16 KiB/stream)",
            "ratio",
            rows[0].0 / rows[1].0,
            if n <= 1000 { 1 } else { 5 }
        );
    }
}
