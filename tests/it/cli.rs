//! The binary as a user runs it: bad input gets one clear line and exit code 2; Ctrl-C writes
//! what was measured; `ringperf sim` serves on the port it prints.

use crate::support::{self, ringperf, signal, wait_for_line};

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `ringperf profile ARGS` and returns (exit code, stderr).
fn fails(args: &[&str]) -> (i32, String) {
    let dir = support::artifact_dir("cli");
    let out = ringperf()
        .arg("profile")
        .args(args)
        .args(["--artifact-dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code().unwrap_or(-1), stderr)
}

fn error_line(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.starts_with("error"))
        .unwrap_or_else(|| panic!("no error line in {stderr:?}"))
}

#[test]
fn bad_input_is_one_clear_line_and_exit_2() {
    let _shared = support::shared();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = format!("http://127.0.0.1:{closed}");
    let s = support::sim("");
    let sim_url = format!("http://{}", s.addr);
    let files = support::artifact_dir("cli-files");
    std::fs::create_dir_all(&files).unwrap();
    let back = files.join("back.jsonl");
    std::fs::write(
        &back,
        "{\"timestamp\": 9, \"input_length\": 4, \"output_length\": 1}\n{\"timestamp\": 1, \"input_length\": 4, \"output_length\": 1}\n",
    )
    .unwrap();
    let sharegpt = files.join("nohuman.json");
    std::fs::write(
        &sharegpt,
        r#"[{"conversations": [{"from": "gpt", "value": "hi"}]}]"#,
    )
    .unwrap();
    let template = files.join("noprompt.json");
    std::fs::write(&template, r#"{"inputs": "fixed"}"#).unwrap();
    let (back, sharegpt) = (back.to_str().unwrap(), sharegpt.to_str().unwrap());
    let template = template.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--no-such-flag"],
            "unexpected argument '--no-such-flag'",
        ),
        (
            vec!["--url", "ftp://x"],
            "only http:// and https:// are supported",
        ),
        (
            vec!["--url", "http://127.0.0.1:notaport"],
            "port is not a number",
        ),
        (
            vec!["--url", &refused, "--request-count", "2"],
            "Connection refused",
        ),
        (
            vec!["--url", &sim_url, "-m", "gpt-nope", "--request-count", "2"],
            "The model `gpt-nope` does not exist",
        ),
        (
            vec!["--extra-inputs", "ignore_eos"],
            "--extra-inputs \"ignore_eos\": expected key:value",
        ),
        (
            vec!["--tokenizer", "/no/such/tokenizer.json"],
            "no such file or directory",
        ),
        (
            vec!["--concurrency", "0"],
            "--concurrency must be at least 1",
        ),
        (vec!["--concurrency", "lots"], "is not a count"),
        (vec!["--request-timeout", "5 parsecs"], "unknown time unit"),
        (
            vec!["--request-rate", "10", "--arrival", "weibull"],
            "invalid value 'weibull' for '--arrival",
        ),
        (
            vec!["--request-rate", "-5"],
            "'--request-rate <PER_SECOND>': \"-5\" is not a non-negative number",
        ),
        (
            vec!["--request-rate", "0.0001"],
            "--request-rate 0.0001: must be from 0.001",
        ),
        // More than any Linux allows (fs.nr_open is at most 2^30 / 1,048,576 by default).
        (
            vec!["--sim", "--concurrency", "5000000", "--request-count", "10"],
            "5000000 connections need about 10000256 open files",
        ),
        (
            vec!["--request-count", "20000000"],
            "a run holds at most 10000000",
        ),
        (
            vec!["--input-file", back, "--fixed-schedule"],
            "back.jsonl:2: timestamp 1 goes backwards",
        ),
        (
            vec!["--input-file", sharegpt],
            "no conversation has a human turn",
        ),
        (vec!["--goodput", "speed:3"], "unknown SLO metric"),
        (
            vec![
                "--endpoint-type",
                "template",
                "--endpoint",
                "/generate",
                "--request-template",
                template,
            ],
            "has no {{prompt}} placeholder",
        ),
    ];
    for (mut args, expect) in cases {
        // Bad input meets a server that is up: the preflight would stop a run at a server
        // that is down before it prepares anything (only the cases that name one do not).
        if !args.iter().any(|a| *a == "--url" || *a == "--sim") {
            args.extend(["--url", &sim_url]);
        }
        let (code, stderr) = fails(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        let line = error_line(&stderr);
        assert!(
            line.contains(expect),
            "{args:?}: expected {expect:?} in {line:?}"
        );
    }
    // Results that could not be written are refused before the run, not after it.
    let server = support::sim("");
    let out = ringperf()
        .args(["profile", "--url", &format!("http://{}", server.addr)])
        .args([
            "--request-count",
            "1",
            "--artifact-dir",
            "/proc/ringperf-no",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        error_line(&stderr).contains("--artifact-dir /proc/ringperf-no: cannot write there"),
        "{stderr}"
    );
    assert_eq!(server.served().0, 0, "nothing was sent");
}

#[test]
fn ctrl_c_stops_the_run_and_writes_what_was_measured() {
    let _shared = support::shared();
    let dir = support::artifact_dir("cli-ctrlc");
    let mut child = ringperf()
        .args([
            "profile",
            "--sim=--ttft 5ms --itl 5ms",
            "--streaming",
            "--concurrency",
            "4",
        ])
        .args([
            "--benchmark-duration",
            "60s",
            "--output-tokens-mean",
            "20",
            "--no-progress",
        ])
        .args(["--artifact-dir", dir.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ready when the simulator inside the run has answered a dozen requests: read its
    // address from stderr, then its /metrics.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut stderr = String::new();
    let port = wait_for_line(&mut lines, |line| {
        stderr.push_str(line);
        stderr.push('\n');
        let rest = line.split("http://127.0.0.1:").nth(1)?;
        Some(
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .to_string(),
        )
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while served(&port) < 12 {
        assert!(Instant::now() < deadline, "no progress:\n{stderr}");
        std::thread::sleep(Duration::from_millis(20));
    }
    interrupt(&child);
    let t = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "did not stop promptly"
    );
    stderr.extend(lines.map_while(Result::ok).map(|l| l + "\n"));
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("profile_export_ringperf.json")).unwrap())
            .unwrap();
    assert_eq!(doc["was_cancelled"], true);
    assert!(doc["request_count"]["avg"].as_f64().unwrap() > 10.0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Time To First Token (ms)"), "{stdout}");
}

/// A file's prompts are counted after the run; for a large file that takes a while, which the
/// run says, and Ctrl-C then cuts it short: the results are written within about a second,
/// the requests left uncounted have no input length (not a zero that would drag the mean
/// down), and a warning says how many.
#[test]
fn ctrl_c_while_a_large_files_prompts_are_counted_cuts_the_counting_short() {
    let _shared = support::shared();
    let dir = support::artifact_dir("cli-counting");
    // 6,000 prompts of 2,000 words: about 12 million tokens, seconds of counting.
    const WORDS: [&str; 16] = [
        "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
        "on", "not",
    ];
    let (lines, words) = (6000usize, 2000usize);
    let file = dir.with_extension("jsonl");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
    for i in 0..lines {
        let text: Vec<&str> = (0..words).map(|k| WORDS[(i * 7 + k * k) % 16]).collect();
        writeln!(w, r#"{{"text": "{}"}}"#, text.join(" ")).unwrap();
    }
    w.flush().unwrap();
    let n = lines.to_string();
    let mut child = ringperf()
        .args(["profile", "--sim=--ttft 1ms --itl 1ms", "--streaming"])
        .args(["--input-file", file.to_str().unwrap()])
        .args(["--num-dataset-entries", &n, "--request-count", &n])
        .args(["--concurrency", "64", "--output-tokens-mean", "2"])
        .args(["--no-progress", "--artifact-dir", dir.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines_err = BufReader::new(child.stderr.take().unwrap()).lines();
    wait_for_line(&mut lines_err, |l| {
        l.contains(&format!(
            "counting the prompt tokens of the {n} file prompts sent"
        ))
        .then_some(())
    });
    interrupt(&child);
    let t = Instant::now();
    let out = child.wait_with_output().unwrap();
    let waited = t.elapsed();
    // Warnings come with the summary, on stdout.
    let mut rest: Vec<String> = lines_err.map_while(Result::ok).collect();
    rest.extend(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from),
    );
    // Stopped by Ctrl-C: 130, as a shell reports it, with what was measured written.
    assert_eq!(out.status.code(), Some(130), "{rest:?}");
    // The warning below proves the cut (most requests uncounted); the bound only catches a
    // stop that waits for the whole count, with room for 8 tests sharing 2 cores (5.7 s seen).
    assert!(
        waited < Duration::from_secs(20),
        "took {waited:?}: {rest:?}"
    );
    let warning = rest
        .iter()
        .find(|l| l.contains("the counting of the prompts sent was stopped (Ctrl-C)"))
        .unwrap_or_else(|| panic!("no warning of the counting cut short: {rest:?}"));
    let uncounted: usize = warning
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap();
    let export = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    let without: Vec<&str> = export
        .lines()
        .filter(|l| !l.contains("\"input_sequence_length\""))
        .collect();
    assert!(uncounted > 0 && uncounted < lines, "{warning}");
    assert_eq!(without.len(), uncounted, "{warning}");
    assert_eq!(export.lines().count(), lines);
    std::fs::remove_file(file).unwrap();
}

/// Ctrl-C for a child process.
fn interrupt(child: &std::process::Child) {
    signal(child, "INT");
}

#[test]
fn a_signal_while_the_run_is_prepared_ends_it_at_once() {
    let _shared = support::shared();
    let dir = support::artifact_dir("cli-planning");
    for sig in ["TERM", "INT"] {
        // 150 prompts of 300,000 tokens take minutes to prepare.
        let mut child = ringperf()
            .args([
                "profile",
                "--sim",
                "--synthetic-input-tokens-mean",
                "300000",
            ])
            .args(["--num-dataset-entries", "150", "--request-count", "150"])
            .args(["--artifact-dir", dir.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        wait_for_line(&mut lines, |l| {
            l.contains("ringperf: preparing 150 prompts").then_some(())
        });
        signal(&child, sig);
        let t = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if t.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                panic!("SIG{sig} ignored while preparing the run");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let code = if sig == "TERM" { 143 } else { 130 };
        assert_eq!(status.code(), Some(code), "SIG{sig}: {rest:?}");
        assert!(
            rest.iter()
                .any(|l| l.contains("interrupted before anything was measured")),
            "{rest:?}"
        );
    }
}

/// Requests the simulator on `port` has finished, from its /metrics (0 when it does not
/// answer yet).
fn served(port: &str) -> u64 {
    let Ok(mut s) = std::net::TcpStream::connect(format!("127.0.0.1:{port}")) else {
        return 0;
    };
    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut page = String::new();
    let _ = s.read_to_string(&mut page);
    page.lines()
        .find(|l| l.starts_with("vllm:request_success_total"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// Kills the child when the test ends, passed or not.
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `ringperf sim` on free ports with 1 ms timings and `extra` flags, and the ports it printed
/// (one a line, one per replica).
fn sim_process(extra: &[&str]) -> (Reap, Vec<u16>) {
    let child = ringperf()
        .args([
            "sim",
            "--bind",
            "127.0.0.1:0",
            "--ttft",
            "1ms",
            "--itl",
            "1ms",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut sim = Reap(child);
    let replicas = extra
        .iter()
        .position(|a| *a == "--replicas")
        .map_or(1, |i| extra[i + 1].parse().unwrap());
    let mut out = BufReader::new(sim.0.stdout.take().unwrap());
    let ports = (0..replicas)
        .map(|_| {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            line.trim().parse::<u16>().expect("a port a line on stdout")
        })
        .collect();
    (sim, ports)
}

#[test]
fn sim_prints_its_port_and_serves_a_profile_run() {
    let _shared = support::shared();
    let (mut sim, ports) = sim_process(&[]);
    let port = ports[0];
    let dir = support::artifact_dir("cli-sim");
    let out = ringperf()
        .args([
            "profile",
            "--url",
            &format!("127.0.0.1:{port}"),
            "--streaming",
            "--request-count",
            "5",
        ])
        .args([
            "--output-tokens-mean",
            "4",
            "--artifact-dir",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let row = stdout
        .lines()
        .find(|l| l.contains("Request Count (requests)"))
        .unwrap();
    assert_eq!(row.split('│').nth(2).map(str::trim), Some("5.00"), "{row}");
    interrupt(&sim.0);
    assert!(sim.0.wait().unwrap().success());
}

#[test]
fn secrets_never_reach_artifacts_or_output() {
    let _shared = support::shared();
    let dir = support::artifact_dir("cli-secrets");
    let out = ringperf()
        .args([
            "profile",
            "--sim",
            "--request-count",
            "3",
            "--output-tokens-mean",
            "8",
            "--streaming",
            "-H",
            "X-Api-Token: hunter2",
        ])
        .args(["--artifact-dir", dir.to_str().unwrap()])
        .env("OPENAI_API_KEY", "sk-very-secret")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut all =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    for f in support::files_under(&dir) {
        all.push_str(&std::fs::read_to_string(f).unwrap());
    }
    assert!(!all.contains("sk-very-secret") && !all.contains("hunter2"));
    // Without an NVIDIA driver the run says so in one line and completes; with one, it
    // reports the GPUs.
    assert!(
        all.contains("GPU telemetry unavailable: ") || all.contains("GPU 0 ("),
        "{all}"
    );
    assert!(all.contains("<redacted>"));
}

#[test]
fn a_simulator_out_of_descriptors_says_so() {
    let _shared = support::shared();
    let exe = env!("CARGO_BIN_EXE_ringperf");
    let mut sim = Command::new("sh")
        .args([
            "-c",
            &format!("ulimit -n 64 && exec {exe} sim --bind 127.0.0.1:0 --shards 1"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    BufReader::new(sim.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let addr = format!("127.0.0.1:{}", port.trim());
    // More connections than the simulator has descriptors left; the kernel queues them.
    let _held: Vec<_> = (0..100)
        .map_while(|_| std::net::TcpStream::connect(&addr).ok())
        .collect();
    let stderr = sim.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("cannot accept connections") {
                let _ = tx.send(line);
            }
        }
    });
    let found = rx.recv_timeout(Duration::from_secs(20));
    let _ = sim.kill();
    let _ = sim.wait();
    let line = found.expect("no word from the simulator within 20 s");
    assert!(line.contains("ulimit -n"), "{line}");
}

#[test]
fn completions_and_manual_pages_come_from_the_flags() {
    let _shared = support::shared();
    let out = ringperf().args(["completions", "bash"]).output().unwrap();
    assert!(out.status.success());
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(script.contains("_ringperf()"), "{script}");
    assert!(script.contains("--request-rate") && script.contains("--max-concurrency"));
    let out = ringperf().args(["man", "profile"]).output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains(".TH ringperf-profile 1"), "{page}");
    assert!(page.contains("\\-\\-request\\-rate"), "{page}");
    let (code, stderr) = {
        let out = ringperf().args(["man", "nope"]).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(code, Some(2));
    assert!(stderr.contains("no subcommand \"nope\""), "{stderr}");
}

#[test]
fn fail_on_gates_exit_3_when_crossed_0_when_held_and_write_junit() {
    let _shared = support::shared();
    let run = |gates: &[&str], name: &str| {
        let dir = support::artifact_dir(name);
        let mut c = ringperf();
        c.args([
            "profile",
            "--sim=--ttft 20ms --itl 1ms",
            "--streaming",
            "--request-count",
            "8",
            "--output-tokens-mean",
            "4",
            "--no-progress",
            "--allow-client-limited",
            "--artifact-dir",
            dir.to_str().unwrap(),
        ]);
        for g in gates {
            c.args(["--fail-on", g]);
        }
        let out = c.output().unwrap();
        let junit = std::fs::read_to_string(dir.join("gates.junit.xml")).unwrap_or_default();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            junit,
        )
    };
    // TTFT is 20 ms: a 5 ms bound is crossed, a 5 s one holds.
    let (code, stderr, junit) = run(&["ttft.p99>5ms", "error_rate>0.01"], "gates-crossed");
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("gate FAILED: ttft.p99>5ms"), "{stderr}");
    assert!(stderr.contains("gate passed: error_rate>0.01"), "{stderr}");
    assert!(junit.contains("tests=\"2\" failures=\"1\""), "{junit}");
    let (code, stderr, junit) = run(&["ttft.p99>5s", "error_rate>0.01"], "gates-held");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(junit.contains("failures=\"0\""), "{junit}");
    // A gate that cannot be read is refused before the run.
    let out = ringperf()
        .args(["profile", "--sim", "--fail-on", "ttft.p42>1ms"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown statistic"));
}

#[test]
fn a_reader_that_stops_early_ends_completions_and_man_pages_quietly() {
    let _shared = support::shared();
    for args in [&["completions", "bash"][..], &["man"][..]] {
        let mut child = ringperf()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read a little, then close the pipe, as `| head -1` does.
        let mut first = [0u8; 16];
        child.stdout.take().unwrap().read_exact(&mut first).unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    }
}

/// Warnings carry stable codes: in the JSON, on the console, and as gates
/// (`--fail-on warning:CODE` fails the run with exit code 3; an unknown code is refused with
/// the list).
#[test]
fn a_warning_code_is_a_gate() {
    let _shared = support::shared();
    // The capture names its own model, not the one asked: served_model_differs.
    let ok = support::capture("vllm/chat-stream.http");
    let server = support::fake_server(move |_, _| (ok.clone(), false));
    let url = format!("http://{}", server.addr);
    let dir = support::artifact_dir("cli-warning-gate");
    let out = ringperf()
        .args(["profile", "--url", &url, "--no-preflight", "-m", "asked"])
        .args(["--streaming", "--request-count", "3", "--no-progress"])
        .args(["--fail-on", "warning:served_model_differs"])
        .args(["--fail-on", "warning:failures_only_counted"])
        .args(["--artifact-dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("gate FAILED: warning:served_model_differs: the run warned: the server answered as model"),
        "{stderr}"
    );
    assert!(
        stderr.contains("gate passed: warning:failures_only_counted"),
        "{stderr}"
    );
    assert!(stdout.contains("[served_model_differs]"), "{stdout}");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("profile_export_ringperf.json")).unwrap())
            .unwrap();
    let codes: Vec<&str> = doc["client_health"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"served_model_differs"), "{codes:?}");
    let junit = std::fs::read_to_string(dir.join("gates.junit.xml")).unwrap();
    assert!(junit.contains("warning:served_model_differs"), "{junit}");

    let (code, stderr) = fails(&["--sim", "--fail-on", "warning:served-model"]);
    assert_eq!(code, 2, "{stderr}");
    let line = error_line(&stderr);
    assert!(
        line.contains("unknown warning code") && line.contains("served_model_differs"),
        "{line}"
    );
}

#[test]
fn sim_replicas_serve_on_ports_of_their_own_for_several_urls() {
    let _shared = support::shared();
    let (_sim, ports) = sim_process(&["--replicas", "2"]);
    assert_eq!(ports.len(), 2);
    assert_ne!(ports[0], ports[1]);
    let dir = support::artifact_dir("cli-sim-replicas");
    let run = ringperf()
        .args(["profile", "--url", &format!("127.0.0.1:{}", ports[0])])
        .args(["--url", &format!("127.0.0.1:{}", ports[1])])
        .args([
            "--streaming",
            "--request-count",
            "10",
            "--output-tokens-mean",
            "4",
        ])
        .args(["--artifact-dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("profile_export_ringperf.json")).unwrap())
            .unwrap();
    let counts: Vec<u64> = doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["request_count"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [5, 5], "each replica served its half");
}

/// Stderr that is no terminal (a CI log, `kubectl logs`): a timestamped progress line at the
/// interval asked for while the run goes, and one at its end; every lifecycle line carries its
/// time; the page names the command line and the load.
#[test]
fn a_log_gets_timestamped_progress_while_the_run_goes() {
    let _shared = support::shared();
    let dir = support::artifact_dir("cli-progress-log");
    let started = std::time::Instant::now();
    let mut child = ringperf()
        .args(["profile", "--sim=--ttft 5ms --itl 5ms", "--streaming"])
        .args(["--concurrency", "4", "--benchmark-duration", "4"])
        .args(["--output-tokens-mean", "8", "--progress-interval", "1s"])
        .args(["--artifact-dir", dir.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stderr.take().unwrap()).lines();
    // Each line, with when it was read.
    let seen: Vec<(f64, String)> = lines
        .map_while(Result::ok)
        .map(|l| (started.elapsed().as_secs_f64(), l))
        .collect();
    let status = child.wait().unwrap();
    let all: Vec<&str> = seen.iter().map(|(_, l)| l.as_str()).collect();
    assert!(status.success(), "{all:#?}");
    // Every line starts with its time: 2026-12-07T12:10:02.975Z.
    for l in &all {
        let time = l.split(' ').next().unwrap();
        assert!(
            time.len() == 24 && time.ends_with('Z') && time.as_bytes()[10] == b'T',
            "{l}"
        );
    }
    let progress: Vec<f64> = seen
        .iter()
        .filter(|(_, l)| l.contains(" ringperf: progress "))
        .map(|(t, _)| *t)
        .collect();
    // 4 s at one a second, and the closing one; read while the run went, a second apart.
    assert!(progress.len() >= 4, "{all:#?}");
    for w in progress.windows(2).take(3) {
        assert!(w[1] - w[0] < 2.5, "{progress:?}");
    }
    let last = all
        .iter()
        .rfind(|l| l.contains(" ringperf: progress "))
        .unwrap();
    assert!(
        last.contains(" done, 0 in flight, 0 errors") && last.contains("TTFT p50 "),
        "{last}"
    );
    // The start-up line comes when the first request leaves, before any progress.
    let startup = all
        .iter()
        .position(|l| l.contains("ringperf: start-up "))
        .unwrap();
    let first = all
        .iter()
        .position(|l| l.contains("ringperf: progress "))
        .unwrap();
    assert!(startup < first, "{all:#?}");
    // The page says what was run, and at what load.
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(page.contains("<dt>Command line</dt>"), "no command line");
    assert!(page.contains("--benchmark-duration 4"), "no command line");
    assert!(
        page.contains("<dt>Load</dt><dd>concurrency 4 for 4 s</dd>"),
        "no load"
    );
    // As JSON lines, for machines: each a whole object with its time.
    let out = ringperf()
        .args(["profile", "--sim=--ttft 1ms --itl 1ms", "--streaming"])
        .args(["--concurrency", "2", "--request-count", "20"])
        .args(["--progress-format", "json", "--artifact-dir"])
        .arg(dir.join("json"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json: Vec<serde_json::Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let end = json.last().unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(end["event"], "progress");
    assert_eq!(
        (end["done"].as_u64(), end["of"].as_u64()),
        (Some(20), Some(20))
    );
    assert!(end["time"].as_str().unwrap().ends_with('Z'));
}
