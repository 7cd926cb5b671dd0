//! TTFT accuracy against an independent reference server: a small streaming server written
//! apart from ringperf (one thread, epoll and a timerfd, no ringperf code) that logs the
//! `CLOCK_MONOTONIC` time just before it writes each response's first token. The per-request
//! error of ringperf's TTFT is ringperf's first-token stamp minus that write time, for every
//! request, matched by `X-Request-ID`.
//!
//!     cargo bench --bench reference -- [--concurrency 1000] [--requests 3000] [--runs 10] \
//!         [--ttft 50ms] [--itl 10ms] [--osl 16] [--client-nice 5] [--background]
//!
//! The server runs at the default priority and the client (the release binary,
//! `target/release/ringperf`, built first) at `--client-nice` (5: the server out-ranks it, as
//! an inference server on a GPU host usually does); `--background` adds a CPU hog at nice 19
//! on every CPU. Printed per run: the error's p50, p99 and max, how many first tokens were
//! stamped one gap or more late (read together with the next token), and ringperf's verdict;
//! then the runs' p99s.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use clap::Parser;

const SERVER_ENV: &str = "RINGPERF_BENCH_REFERENCE_SERVER";

#[derive(Parser, Debug, Clone)]
struct Args {
    #[arg(long, default_value_t = 1000)]
    concurrency: u64,
    #[arg(long, default_value_t = 3000)]
    requests: u64,
    #[arg(long, default_value_t = 10)]
    runs: u32,
    /// First token after this long (ms).
    #[arg(long, default_value_t = 50)]
    ttft_ms: u64,
    /// Between tokens (ms).
    #[arg(long, default_value_t = 10)]
    itl_ms: u64,
    #[arg(long, default_value_t = 16)]
    osl: u64,
    /// The client's nice value (the server runs at 0).
    #[arg(long, default_value_t = 5)]
    client_nice: i32,
    /// A CPU hog at nice 19 on every CPU.
    #[arg(long)]
    background: bool,
    /// Flags for `ringperf profile`, added to the bench's own.
    #[arg(long, default_value = "")]
    client_flags: String,
    #[arg(long, hide = true)]
    bench: bool,
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The reference server: answers every POST with a stream of `max_tokens` tokens, the first
/// `ttft` after the request arrived and the rest `itl` apart, and logs each response's
/// first-token write time by request id. One thread, non-blocking sockets, `epoll` and a
/// `timerfd` for the next token due, so that it costs what an efficient server costs. Prints
/// its port, then, on a line `dump` on stdin, writes `id ns` lines and `end`.
fn server(ttft: u64, itl: u64) {
    use std::collections::{BinaryHeap, HashMap};
    use std::os::fd::AsRawFd;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).unwrap();
    println!("{}", listener.local_addr().unwrap().port());
    std::io::stdout().flush().unwrap();
    let log: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
    let l = log.clone();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            if line.unwrap_or_default().trim() == "dump" {
                let mut out = std::io::stdout().lock();
                for (id, t) in l.lock().unwrap().drain(..) {
                    writeln!(out, "{id} {t}").unwrap();
                }
                writeln!(out, "end").unwrap();
                out.flush().unwrap();
            }
        }
        std::process::exit(0);
    });
    struct Stream {
        id: String,
        next: u64,
        total: u64,
    }
    struct Conn {
        sock: TcpStream,
        buf: Vec<u8>,
        stream: Option<Stream>,
    }
    // SAFETY (all libc calls below): plain system calls on descriptors this function owns,
    // with valid pointers to local buffers.
    let ep = unsafe { libc::epoll_create1(0) };
    let tfd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK) };
    let add = |fd: i32, key: u64| {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: key,
        };
        unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) };
    };
    const LISTEN: u64 = u64::MAX;
    const TIMER: u64 = u64::MAX - 1;
    add(listener.as_raw_fd(), LISTEN);
    add(tfd, TIMER);
    let mut conns: HashMap<u64, Conn> = HashMap::new();
    let mut next_key = 0u64;
    // (due, key), earliest first.
    let mut due: BinaryHeap<std::cmp::Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut armed = 0u64;
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut chunk = [0u8; 8192];
    loop {
        // Arm the timer for the earliest token due.
        if let Some(std::cmp::Reverse((t, _))) = due.peek() {
            if *t != armed {
                armed = *t;
                let spec = libc::itimerspec {
                    it_interval: libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 0,
                    },
                    it_value: libc::timespec {
                        tv_sec: (t / 1_000_000_000) as i64,
                        tv_nsec: (t % 1_000_000_000) as i64,
                    },
                };
                unsafe {
                    libc::timerfd_settime(tfd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut())
                };
            }
        }
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, -1) };
        for ev in events.iter().take(n.max(0) as usize) {
            match ev.u64 {
                LISTEN => {
                    while let Ok((sock, _)) = listener.accept() {
                        sock.set_nodelay(true).ok();
                        sock.set_nonblocking(true).ok();
                        add(sock.as_raw_fd(), next_key);
                        conns.insert(
                            next_key,
                            Conn {
                                sock,
                                buf: Vec::new(),
                                stream: None,
                            },
                        );
                        next_key += 1;
                    }
                }
                TIMER => {
                    let mut x = [0u8; 8];
                    unsafe { libc::read(tfd, x.as_mut_ptr().cast(), 8) };
                    armed = 0;
                }
                key => {
                    let Some(c) = conns.get_mut(&key) else {
                        continue;
                    };
                    loop {
                        match c.sock.read(&mut chunk) {
                            Ok(0) => {
                                conns.remove(&key);
                                break;
                            }
                            Ok(k) => c.buf.extend_from_slice(&chunk[..k]),
                            Err(_) => break,
                        }
                    }
                    let Some(c) = conns.get_mut(&key) else {
                        continue;
                    };
                    // A whole request: the head and Content-Length bytes of body.
                    let Some(head_end) = c.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&c.buf[..head_end + 4]).to_ascii_lowercase();
                    let header = |name: &str| {
                        head.lines()
                            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
                    };
                    let length: usize = header("content-length:")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    if c.buf.len() < head_end + 4 + length {
                        continue;
                    }
                    let arrived = now_ns();
                    let body = String::from_utf8_lossy(&c.buf[head_end + 4..head_end + 4 + length])
                        .into_owned();
                    let total = body
                        .split("\"max_tokens\":")
                        .nth(1)
                        .and_then(|r| {
                            r.trim_start()
                                .split(|ch: char| !ch.is_ascii_digit())
                                .next()?
                                .parse::<u64>()
                                .ok()
                        })
                        .unwrap_or(16);
                    c.buf.drain(..head_end + 4 + length);
                    let _ = c.sock.write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
                    );
                    c.stream = Some(Stream {
                        id: header("x-request-id:").unwrap_or_default(),
                        next: 0,
                        total,
                    });
                    due.push(std::cmp::Reverse((arrived + ttft, key)));
                }
            }
        }
        // Every token now due.
        let now = now_ns();
        while let Some(&std::cmp::Reverse((t, key))) = due.peek() {
            if t > now {
                break;
            }
            due.pop();
            let Some(c) = conns.get_mut(&key) else {
                continue;
            };
            let Some(s) = c.stream.as_mut() else { continue };
            let k = s.next;
            let last = k + 1 == s.total;
            let mut data = format!(
                "data: {{\"id\":\"r\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{k} \"}},\"finish_reason\":{}}}]}}\n\n",
                if last { "\"length\"" } else { "null" }
            );
            if last {
                data.push_str(&format!(
                    "data: {{\"id\":\"r\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{{\"prompt_tokens\":8,\"completion_tokens\":{},\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n",
                    s.total,
                    s.total + 8
                ));
            }
            let mut out = format!("{:x}\r\n{data}\r\n", data.len());
            if last {
                out.push_str("0\r\n\r\n");
            }
            let wrote = now_ns();
            // Small writes to a loopback socket with room: taken whole (a short write would
            // break the stream, and the client then reports it).
            let _ = c.sock.write_all(out.as_bytes());
            if k == 0 {
                log.lock().unwrap().push((s.id.clone(), wrote));
            }
            s.next += 1;
            if last {
                c.stream = None;
            } else {
                due.push(std::cmp::Reverse((t + itl, key)));
            }
        }
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let r = p / 100.0 * (v.len() - 1) as f64;
    let (lo, hi) = (r.floor() as usize, r.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (r - lo as f64)
}

fn main() {
    if let Ok(v) = std::env::var(SERVER_ENV) {
        let (t, i) = v.split_once(',').expect("ttft,itl");
        server(t.parse().unwrap(), i.parse().unwrap());
        return;
    }
    let args = Args::parse();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let client = root.join("target/release/ringperf");
    assert!(
        client.is_file(),
        "build the client first: cargo build --release"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = if args.background {
        (0..std::thread::available_parallelism().map_or(2, |n| n.get()))
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    // SAFETY: setpriority on this thread only.
                    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for i in 0..100_000u64 {
                            x = x.wrapping_mul(31).wrapping_add(i);
                        }
                        std::hint::black_box(x);
                    }
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut p99s = Vec::new();
    println!(
        "reference server: TTFT {} ms, ITL {} ms, {} tokens; ringperf at nice {}, concurrency {}, {} requests{}",
        args.ttft_ms,
        args.itl_ms,
        args.osl,
        args.client_nice,
        args.concurrency,
        args.requests,
        if args.background { ", CPU hog at nice 19 on every CPU" } else { "" }
    );
    for run in 1..=args.runs {
        let mut srv = Command::new(std::env::current_exe().unwrap())
            .env(
                SERVER_ENV,
                format!("{},{}", args.ttft_ms * 1_000_000, args.itl_ms * 1_000_000),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the reference server starts");
        let mut out = BufReader::new(srv.stdout.take().unwrap());
        let mut port = String::new();
        out.read_line(&mut port).unwrap();
        let dir =
            std::env::temp_dir().join(format!("ringperf-reference-{}-{run}", std::process::id()));
        let status = Command::new("nice")
            .args(["-n", &args.client_nice.to_string()])
            .arg(&client)
            .args([
                "profile",
                "--url",
                &format!("http://127.0.0.1:{}", port.trim()),
                "--no-preflight",
                "-m",
                "reference",
                "--streaming",
                "--no-progress",
                "--concurrency",
                &args.concurrency.to_string(),
                "--request-count",
                &args.requests.to_string(),
                "--warmup-request-count",
                &args.concurrency.to_string(),
                "--output-tokens-mean",
                &args.osl.to_string(),
                "--synthetic-input-tokens-mean",
                "8",
                "--artifact-dir",
                dir.to_str().unwrap(),
            ])
            .args(args.client_flags.split_whitespace())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .expect("ringperf runs");
        let mut stdin = srv.stdin.take().unwrap();
        writeln!(stdin, "dump").unwrap();
        let mut truth = std::collections::HashMap::new();
        for line in out.by_ref().lines() {
            let line = line.unwrap();
            if line == "end" {
                break;
            }
            let (id, t) = line.split_once(' ').unwrap();
            truth.insert(id.to_string(), t.parse::<u64>().unwrap());
        }
        drop(stdin);
        let _ = srv.kill();
        let _ = srv.wait();
        let jsonl = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap_or_default();
        let (mut err_ms, mut late, mut shared) = (Vec::new(), 0, 0);
        for l in jsonl.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let m = &v["metadata"];
            if m["benchmark_phase"] != "profiling" {
                continue;
            }
            let (Some(id), Some(first)) =
                (m["x_request_id"].as_str(), m["first_content_ns"].as_u64())
            else {
                continue;
            };
            let Some(wrote) = truth.get(&id.to_ascii_lowercase()) else {
                continue;
            };
            let e = first.saturating_sub(*wrote) as f64 / 1e6;
            late += u64::from(e >= args.itl_ms as f64 * 0.5);
            shared += u64::from(m["first_token_shared_read"] == true);
            err_ms.push(e);
        }
        let doc: serde_json::Value = std::fs::read(dir.join("profile_export_ringperf.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let verdict = doc["client_health"]["verdict"].as_str().unwrap_or("-");
        let n = err_ms.len();
        let p99 = pct(&mut err_ms, 99.0);
        println!(
            "run {run}: {n} requests matched; TTFT error p50 {:.3} ms  p99 {p99:.3} ms  max {:.3} ms; \
             {late} first tokens stamped half a gap or more late, {shared} read with a later token; exit {}; verdict: {}",
            pct(&mut err_ms, 50.0),
            pct(&mut err_ms, 100.0),
            status.status.code().unwrap_or(-1),
            verdict.chars().take(160).collect::<String>()
        );
        p99s.push(p99);
        let _ = std::fs::remove_dir_all(&dir);
    }
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        let _ = h.join();
    }
    let within = p99s.iter().filter(|p| **p <= 1.0).count();
    println!(
        "p99 by run (ms): {:?}; within 1 ms: {within} of {}",
        p99s.iter()
            .map(|p| (p * 1000.0).round() / 1000.0)
            .collect::<Vec<_>>(),
        p99s.len()
    );
}
