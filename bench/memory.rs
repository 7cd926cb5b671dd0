//! Memory against hostile servers: the client's peak RSS while 64 streams each receive a
//! `data:` line of 200 MB that never ends, against the same run served well.
//!
//!     cargo bench --bench memory -- [--concurrency 64] [--line-mb 200]
//!
//! The runs go through ringperf in this process against servers on loopback in this process
//! (a thread per connection); a sampler reads this process's RSS every 5 ms. The good server
//! is run twice and the second run is the baseline (the first loads the tokenizer). Printed:
//! the peak RSS of the baseline and of the hostile run, the difference, and how the requests
//! ended. Every buffer the
//! network fills has a cap (512 KiB per event), so the difference must stay within
//! 1 MiB per stream.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;

/// Megabytes of the endless line (`--line-mb`).
static LINE_MB: AtomicU64 = AtomicU64::new(200);

/// A loopback server that answers every request with `respond(stream, line_mb)`.
fn serve(respond: fn(&mut std::net::TcpStream, u64)) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let line_mb = LINE_MB.load(Ordering::Relaxed);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let mut seen = Vec::new();
                loop {
                    // One request: a head, then its Content-Length body.
                    let n = match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    seen.extend_from_slice(&buf[..n]);
                    let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap_or(0));
                    if seen.len() < end + 4 + len {
                        continue;
                    }
                    seen.drain(..end + 4 + len);
                    respond(&mut conn, line_mb);
                }
            });
        }
    });
    addr
}

fn well(conn: &mut std::net::TcpStream, _: u64) {
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n\
                data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n\n\
                data: [DONE]\n\n";
    let _ = write!(
        conn,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
}

fn endless(conn: &mut std::net::TcpStream, line_mb: u64) {
    let _ = conn.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n6\r\ndata: \r\n",
    );
    // One chunk for every connection, so the server's own memory stays out of the figure.
    static CHUNK: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let chunk = CHUNK.get_or_init(|| {
        let mut c = b"10000\r\n".to_vec();
        c.resize(c.len() + 65536, b'x');
        c.extend_from_slice(b"\r\n");
        c
    });
    for _ in 0..line_mb * 16 {
        if conn.write_all(chunk).is_err() {
            return; // the client cut the stream, as it should
        }
    }
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Runs one profile against `addr` and returns (peak RSS KiB, outcome counts).
fn run(addr: std::net::SocketAddr, concurrency: u64, peak: &AtomicU64) -> (u64, String) {
    peak.store(rss_kib(), Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ringperf-bench-memory-{}", std::process::id()));
    let argv = format!(
        "ringperf profile --no-progress --no-gpu-telemetry --url http://{addr} --streaming \
         --concurrency {concurrency} --request-count {concurrency} --request-timeout 120s \
         --num-dataset-entries 16 --shards 1 --artifact-dir {}",
        dir.display()
    );
    let cli = ringperf::cli::Cli::parse_from(argv.split_whitespace());
    let ringperf::cli::Command::Profile(args) = cli.command else {
        unreachable!()
    };
    let res = ringperf::app::profile(&args, Arc::new(AtomicBool::new(false)), false);
    let _ = std::fs::remove_dir_all(&dir);
    let outcome = match res {
        Ok(r) => format!(
            "{} ok, {}",
            r.report.completed,
            r.report
                .errors
                .iter()
                .map(|e| format!("{} {}", e.count, e.kind))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Err(e) => format!("{e}"),
    };
    (peak.load(Ordering::Relaxed), outcome)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut concurrency = 64u64;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--concurrency" => concurrency = args.next().unwrap().parse().unwrap(),
            "--line-mb" => LINE_MB.store(args.next().unwrap().parse().unwrap(), Ordering::Relaxed),
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    let peak = Arc::new(AtomicU64::new(0));
    let p = peak.clone();
    std::thread::spawn(move || loop {
        p.fetch_max(rss_kib(), Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(5));
    });
    // The first run loads what every run loads (the tokenizer above all) and leaves the
    // allocator holding it: the baseline is the second run against the good server.
    let good = serve(well);
    run(good, concurrency, &peak);
    let (base, base_outcome) = run(good, concurrency, &peak);
    let (hostile, hostile_outcome) = run(serve(endless), concurrency, &peak);
    println!("concurrency {concurrency}, peak RSS of the client process:");
    println!(
        "  served well:            {:>8.1} MiB  ({base_outcome})",
        base as f64 / 1024.0
    );
    println!(
        "  endless data: line:     {:>8.1} MiB  ({hostile_outcome})",
        hostile as f64 / 1024.0
    );
    println!(
        "  difference:             {:>8.1} MiB",
        (hostile as f64 - base as f64) / 1024.0
    );
}
