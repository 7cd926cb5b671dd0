//! One command over several processes of this host: `profile --processes N` splits its load
//! into worker processes and merges them into one report; a worker serves its live figures as
//! Prometheus text; `sim --replicas N` serves each replica from a process of its own.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;

use serde_json::Value;

use crate::nodes::json;
use crate::support;

/// `GET path` on `addr`: (status, body).
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = String::new();
    c.read_to_string(&mut all).unwrap();
    let status = all[9..12].parse().unwrap();
    let body = all.split_once("\r\n\r\n").unwrap().1.to_string();
    (status, body)
}

/// A sample's value on a Prometheus page.
fn sample(page: &str, name: &str) -> f64 {
    let e = ringperf::internals::prom::parse(page).unwrap();
    e.samples
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("{name} not on the page:\n{page}"))
        .value
}

#[test]
fn a_split_run_is_one_report_of_every_worker_request() {
    let _shared = support::shared();
    let sim = support::sim("--ttft 20ms --itl 5ms --default-max-tokens 8");
    let url = format!("http://{}", sim.addr);
    let dir = support::artifact_dir("split");
    let out = support::ringperf()
        .args(["profile", "--url", &url, "--streaming", "--processes", "3"])
        .args([
            "--concurrency",
            "6",
            "--request-count",
            "150",
            "--no-progress",
        ])
        .args(["--artifact-dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("runs in 3 worker processes"), "{err}");
    let doc = json(&dir.join("profile_export_ringperf.json"));
    assert_eq!(doc["request_count"]["avg"], 150.0, "{doc:#}");
    assert_eq!(doc["error_request_count"]["avg"], 0.0);
    assert_eq!(doc["merge"]["node_count"], 3);
    assert_eq!(doc["merge"]["nodes_merged"], 3);
    // The client's memory over the workers: each one's peak, and per stream held.
    let memory = &doc["client_health"]["memory"];
    let rss: f64 = (0..3)
        .map(|i| {
            doc["client_health"]["nodes"][i]["peak_rss_mb"]
                .as_f64()
                .unwrap()
        })
        .sum();
    assert!(rss > 3.0, "{memory}");
    assert_eq!(memory["peak_rss_mb_sum"].as_f64().unwrap(), rss);
    let held = memory["streams_held"].as_f64().unwrap();
    assert!(held > 4.0 && held <= 6.0, "{memory}");
    let kb = memory["kb_per_stream"].as_f64().unwrap();
    assert!((kb - rss * 1e3 / held).abs() < 1e-6, "{memory}");
    // Each worker wrote a run of its own, and its log.
    for i in 0..3 {
        let w = dir.join(format!("workers/worker-{i:03}"));
        assert!(w.join("node.json").is_file(), "{}", w.display());
        assert!(dir.join(format!("workers/worker-{i:03}.log")).is_file());
    }
    // Every request once, from the three workers.
    let lines = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    let mut ids: Vec<String> = lines
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["metadata"]["x_request_id"].to_string())
        .collect();
    assert_eq!(ids.len(), 150);
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 150);
    assert_eq!(
        sim.served().0,
        150 + 3,
        "150 measured and one probe per worker"
    );
    // The console table is the merged one.
    assert!(String::from_utf8_lossy(&out.stdout).contains("3 of 3 merged"));
}

#[test]
fn what_runs_in_one_process_is_refused_more() {
    let _shared = support::shared();
    for (flags, says) in [
        (
            "--processes 2 --sim",
            "--sim (the simulator in this process",
        ),
        ("-u U --processes 0", "--processes must be from 1 to 256"),
        (
            "-u U --processes 4 --concurrency 2",
            "--processes 4 is more than --concurrency 2",
        ),
        (
            "-u U --processes 2 --concurrency 2,4",
            "a sweep or repeated runs: one process runs it",
        ),
    ] {
        let out = support::ringperf()
            .args(["profile", "-m", "m"])
            .args(
                flags
                    .split_whitespace()
                    .map(|f| if f == "U" { "http://127.0.0.1:9" } else { f }),
            )
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags}: {err}");
        assert!(err.contains(says), "{flags}: {err}");
        assert_eq!(err.lines().count(), 1, "{flags}: {err}");
    }
    // A worker that fails before the run (its server is down) ends the command at once, with
    // the worker's own error.
    let mut child = support::ringperf()
        .args([
            "profile",
            "-m",
            "m",
            "-u",
            "http://127.0.0.1:9",
            "--processes",
            "2",
        ])
        .args(["--concurrency", "4", "--artifact-dir"])
        .arg(support::artifact_dir("split-down"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: a worker that waited for a parent that waits for it would hang here.
    let began = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if began.elapsed().as_secs() > 60 {
            let _ = child.kill();
            panic!("a split run whose workers failed did not end");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_default();
    assert!(
        line.contains("ended before the run began") && line.contains("is not answering"),
        "{err}"
    );
}

#[test]
fn a_worker_serves_its_live_figures_and_they_match_its_report() {
    let _shared = support::shared();
    let sim = support::sim("--ttft 20ms --itl 5ms --default-max-tokens 8");
    let url = format!("http://{}", sim.addr);
    let dir = support::artifact_dir("worker");
    let worker = serde_json::json!({"index": 0, "count": 1, "dir": dir, "model": ""});
    let mut child = support::ringperf()
        .args([
            "profile",
            "--url",
            &url,
            "--streaming",
            "--concurrency",
            "4",
        ])
        .args(["--request-count", "120", "--no-progress"])
        .env("RINGPERF_WORKER", worker.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = out.next().unwrap().unwrap();
    let addr = ready.strip_prefix("ready ").expect(&ready).to_string();
    // Before the start: a page, nothing sent.
    let (status, page) = get(&addr, "/metrics");
    assert_eq!(status, 200);
    assert_eq!(sample(&page, "ringperf_running"), 0.0);
    assert_eq!(get(&addr, "/other").0, 404);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{now}").unwrap();
    assert_eq!(out.next().unwrap().unwrap(), "done");
    // The run is written; the page still serves its last figures until stdin closes.
    let (_, page) = get(&addr, "/metrics");
    let doc = json(&dir.join("profile_export_ringperf.json"));
    let count = doc["request_count"]["avg"].as_f64().unwrap();
    assert_eq!(count, 120.0);
    assert_eq!(sample(&page, "ringperf_requests_finished_total"), count);
    assert_eq!(sample(&page, "ringperf_requests_failed_total"), 0.0);
    assert_eq!(sample(&page, "ringperf_requests_in_flight"), 0.0);
    assert_eq!(sample(&page, "ringperf_running"), 1.0);
    assert_eq!(
        sample(&page, "ringperf_output_tokens_total"),
        doc["output_sequence_length"]["avg"].as_f64().unwrap() * count
    );
    assert_eq!(
        sample(&page, "ringperf_time_to_first_token_seconds_count"),
        count
    );
    // The histogram's middle is the report's TTFT p50 within a bucket (1/8 octave).
    let p50_ms = doc["time_to_first_token"]["p50"].as_f64().unwrap();
    let e = ringperf::internals::prom::parse(&page).unwrap();
    let le_of_median = e
        .samples
        .iter()
        .filter(|s| s.name == "ringperf_time_to_first_token_seconds_bucket")
        .find(|s| s.value >= count / 2.0)
        .and_then(|s| s.label("le")?.parse::<f64>().ok())
        .unwrap();
    assert!(
        le_of_median * 1e3 >= p50_ms && le_of_median * 1e3 <= p50_ms * 2f64.powf(1.0 / 8.0) * 1.01,
        "bucket bound {le_of_median} s, p50 {p50_ms} ms"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
    drop(sim);
}

/// Pids of `pid`'s children.
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

#[test]
fn a_signal_to_a_split_run_keeps_what_every_worker_measured() {
    let _shared = support::shared();
    let sim = support::sim("--ttft 20ms --itl 5ms --default-max-tokens 8");
    let url = format!("http://{}", sim.addr);
    // To the parent alone (a terminal's Ctrl-C), and to every process of the command at once
    // (pkill -f): the workers hear it twice, and must still write their runs.
    for to_all in [false, true] {
        let dir = support::artifact_dir("split-signal");
        let child = support::ringperf()
            .args(["profile", "--url", &url, "--streaming", "--processes", "2"])
            .args([
                "--concurrency",
                "4",
                "--benchmark-duration",
                "60",
                "--no-progress",
            ])
            .args(["--artifact-dir", dir.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Ready when each worker's live page counts a finished request.
        let finished = |i: u32| {
            let log = std::fs::read_to_string(dir.join(format!("workers/worker-{i:03}.log")));
            let addr = log.ok().and_then(|l| {
                let at = l.find("live figures at http://")? + "live figures at http://".len();
                Some(l[at..].split('/').next()?.to_string())
            });
            addr.is_some_and(|a| {
                sample(&get(&a, "/metrics").1, "ringperf_requests_finished_total") > 0.0
            })
        };
        let began = std::time::Instant::now();
        while !(finished(0) && finished(1)) {
            assert!(began.elapsed().as_secs() < 60, "the workers never started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let workers = children_of(child.id());
        assert_eq!(workers.len(), 2, "{workers:?}");
        support::signal(&child, "INT");
        if to_all {
            for w in workers {
                assert!(std::process::Command::new("kill")
                    .args(["-INT", &w.to_string()])
                    .status()
                    .unwrap()
                    .success());
            }
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{err}");
        let doc = json(&dir.join("profile_export_ringperf.json"));
        assert_eq!(doc["was_cancelled"], true, "{to_all}");
        assert_eq!(doc["merge"]["nodes_merged"], 2, "{to_all}: {err}");
        assert!(doc["request_count"]["avg"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn sim_replicas_run_in_processes_of_their_own_and_stop_together() {
    let _shared = support::shared();
    let mut child = support::ringperf()
        .args(["sim", "--bind", "127.0.0.1:0", "--replicas", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let ports: Vec<u16> = (0..3)
        .map(|_| out.next().unwrap().unwrap().parse().unwrap())
        .collect();
    for p in &ports {
        let (status, body) = get(&format!("127.0.0.1:{p}"), "/v1/models");
        assert_eq!(status, 200, "{body}");
    }
    // Three children, one per replica.
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id())).unwrap();
    assert_eq!(children.split_whitespace().count(), 3, "{children:?}");
    support::signal(&child, "INT");
    assert!(child.wait().unwrap().success());
    for p in &ports {
        assert!(
            TcpStream::connect(("127.0.0.1", *p)).is_err(),
            "port {p} still served"
        );
    }
}
