//! What the live dashboard costs at 10,000 streams, measured two ways.
//!
//!     cargo bench --bench dashboard [-- --streams N --seconds S --runs R]
//!
//! Each run is `ringperf profile` on CPU 1 against a simulator process on CPU 0 (tokens 50 ms
//! apart; a process of its own, so that each side has its own descriptors), on a
//! pseudo-terminal this bench holds and reads, once with `--ui dashboard` and once with
//! `--ui none`, alternately, R times each.
//! - The dashboard's own account: the CPU time of its thread spent in it (frames, samples,
//!   keys), which it prints when it gives the terminal back.
//! - Independently: the kernel's count of the CPU time of the main thread's watch (where the
//!   starvation watch and the view run) while the shards ran, from the run's JSON
//!   (`client_health.watch_thread`); the dashboard's cost is the difference of the medians of
//!   the two modes.
//!
//! Both are printed as a share of one core over the run's length.

use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

struct Run {
    /// The watch's CPU time and the time it watched (ms).
    watch_ms: (f64, f64),
    /// The dashboard's own account: (frames, CPU ms, share of one core in %).
    own: Option<(u64, f64, f64)>,
}

fn run(ui: &str, port: u16, streams: u64, seconds: u64) -> Run {
    let (mut master, slave) = ringperf::internals::sys::open_pty(120, 40).unwrap();
    let dir = std::env::temp_dir().join(format!("ringperf-bench-dashboard-{}", std::process::id()));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ringperf"))
        .args([
            "profile",
            "--url",
            &format!("http://127.0.0.1:{port}"),
            "-m",
            "ringperf-sim",
            "--cpus",
            "1",
            "--streaming",
            "--concurrency",
            &streams.to_string(),
            "--benchmark-duration",
            &seconds.to_string(),
            "--output-tokens-mean",
            "20",
            "--ui",
            ui,
            "--artifact-dir",
        ])
        .arg(&dir)
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 65536];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&all).to_string()
    });
    // A run past its bound is killed; its terminal then closes and the reads end.
    let (done, watch) = std::sync::mpsc::channel::<()>();
    let pid = child.id() as libc::pid_t;
    let limit = Duration::from_secs(seconds * 10 + 120);
    std::thread::spawn(move || {
        if watch.recv_timeout(limit) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            // SAFETY: kill() only sends a signal to the process this bench started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    // The reads end when the run's side of the terminal closes: when it has ended.
    let text = reader.join().unwrap();
    let status = child.wait().unwrap();
    let _ = done.send(());
    assert!(
        status.code().is_some(),
        "the run did not end within {limit:?}"
    );
    let doc: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("profile_export_ringperf.json")).expect("the run's JSON"),
    )
    .unwrap();
    let w = &doc["client_health"]["watch_thread"];
    let watch_ms = (
        w["cpu_ms"].as_f64().unwrap(),
        w["watched_ms"].as_f64().unwrap(),
    );
    let _ = std::fs::remove_dir_all(&dir);
    // "ringperf: dashboard: 41 frames over 10.2 s, 35.1 ms of CPU (0.34% of one core)"
    let own = text.lines().find_map(|l| {
        let rest = l.split("ringperf: dashboard: ").nth(1)?;
        let nums: Vec<f64> = rest
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter_map(|w| w.parse().ok())
            .collect();
        Some((nums[0] as u64, nums[2], nums[3]))
    });
    if ui == "dashboard" {
        assert!(own.is_some(), "the dashboard said nothing:\n{text}");
    }
    Run { watch_ms, own }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let streams = arg("--streams", 10_000);
    let seconds = arg("--seconds", 10);
    let runs = arg("--runs", 3);
    let mut sim = std::process::Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_ringperf")])
        .args([
            "sim",
            "--bind",
            "127.0.0.1:0",
            "--ttft",
            "50ms",
            "--itl",
            "50ms",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("taskset and the simulator");
    // The simulator's first line on stdout is its port.
    let mut line = Vec::new();
    let mut out = sim.stdout.take().unwrap();
    let mut byte = [0u8];
    while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let port: u16 = String::from_utf8(line)
        .unwrap()
        .trim()
        .parse()
        .expect("a port");
    let (mut with, mut without, mut own) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        // Each mode goes first every other time.
        let (d, n) = if i % 2 == 0 {
            let d = run("dashboard", port, streams, seconds);
            (d, run("none", port, streams, seconds))
        } else {
            let n = run("none", port, streams, seconds);
            (run("dashboard", port, streams, seconds), n)
        };
        let (frames, ms, share) = d.own.unwrap();
        let pct = |(cpu, wall): (f64, f64)| cpu / wall * 100.0;
        println!(
            "run {}: dashboard {frames} frames, its own account {ms:.1} ms ({share:.3}% of one \
             core); the watch thread {:.1} ms of {:.0} ms ({:.3}%) with it, {:.1} ms of {:.0} \
             ms ({:.3}%) without",
            i + 1,
            d.watch_ms.0,
            d.watch_ms.1,
            pct(d.watch_ms),
            n.watch_ms.0,
            n.watch_ms.1,
            pct(n.watch_ms),
        );
        with.push(pct(d.watch_ms));
        without.push(pct(n.watch_ms));
        own.push(share);
    }
    let _ = sim.kill();
    let _ = sim.wait();
    let (with, without) = (median(with), median(without));
    println!(
        "{streams} streams, {seconds} s, {runs} runs each: the dashboard's own account, median \
         {:.3}% of one core; the watch thread's, median {with:.3}% with it and {without:.3}% \
         without: the dashboard {:+.3}% of one core",
        median(own),
        with - without,
    );
}
