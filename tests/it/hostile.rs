//! The binary against hostile servers and hostile command lines: no secret in any output, no
//! line a server can forge, memory and disk bounded, a stopped run's exit code says so, and
//! every bad flag is one clear line before anything is prepared.

use crate::support::{self, fake_server, ringperf, signal, wait_for_line};

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Runs `ringperf profile ARGS --artifact-dir DIR`: (exit code, stdout and stderr, and every
/// artifact's text).
fn run(args: &[&str], dir: &std::path::Path) -> (i32, String, String) {
    let out = ringperf()
        .arg("profile")
        .args(args)
        .args(["--no-progress", "--artifact-dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let console = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!console.contains("panicked"), "{console}");
    let mut files = String::new();
    for f in support::files_under(dir) {
        files.push_str(&String::from_utf8_lossy(&std::fs::read(f).unwrap()));
    }
    (out.status.code().unwrap_or(-1), console, files)
}

/// The first part (8 characters or more) of any secret that `text` holds.
fn leak<'a>(text: &str, secrets: &[&'a str]) -> Option<&'a str> {
    secrets.iter().copied().find(|s| {
        let b = s.as_bytes();
        (0..=b.len().saturating_sub(8)).any(|i| text.contains(&s[i..i + 8.min(b.len())]))
    })
}

fn http(status: &str, content_type: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A 200 event stream, chunked, a chunk for each of `parts` (whole `data:` lines).
fn event_stream<S: AsRef<str>>(parts: impl IntoIterator<Item = S>) -> Vec<u8> {
    let mut out =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    for part in parts {
        let part = part.as_ref();
        out.extend_from_slice(format!("{:x}\r\n{part}\r\n", part.len()).as_bytes());
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// An event stream whose first event is the error `message` (JSON-escaped), as vLLM sends
/// one mid-stream.
fn stream_error(message: &str) -> Vec<u8> {
    let event = format!(
        "data: {}\n\n",
        serde_json::json!({"error": {"message": message, "code": 400}})
    );
    event_stream([event.as_str(), "data: [DONE]\n\n"])
}

const KEY: &str = "sk-live-7Fh3kQ9zP2mX8vR4";
const HEADER_KEY: &str = "xk-91ab27cd55ef0042";
const PASSWORD: &str = "Pa55-w0rd-Zeta-913";

/// What a misconfigured proxy echoes: the credential it was given, whole, without its
/// prefix, cut, and inside other text.
fn echoes(request_head_secret: &str) -> String {
    let s = request_head_secret;
    format!(
        "denied: Authorization: Bearer {s}; key={}; prefix {}…; token{s}tail",
        &s[3..],
        &s[..12]
    )
}

#[test]
fn no_secret_a_server_echoes_reaches_the_console_or_a_file() {
    let _shared = support::shared();
    let secrets = [KEY, HEADER_KEY, PASSWORD];
    // 1. The preflight's model list answered 401 with the key echoed, in every form.
    let body = format!(
        r#"{{"error": {{"message": "{} {}"}}}}"#,
        echoes(KEY),
        echoes(HEADER_KEY)
    );
    let denied = http("401 Unauthorized", "application/json", &body);
    let server = fake_server(move |_, _| (denied.clone(), false));
    let url = format!("http://{}", server.addr);
    let dir = support::artifact_dir("hostile-preflight");
    let header = format!("X-Api-Key: {HEADER_KEY}");
    let (code, console, files) = run(
        &["--url", &url, "--api-key", KEY, "-H", &header, "-m", "m"],
        &dir,
    );
    assert_eq!(code, 2, "{console}");
    assert!(console.contains("HTTP 401"), "{console}");
    assert_eq!(leak(&console, &secrets), None, "{console}");
    assert_eq!(leak(&files, &secrets), None, "{files}");

    // 2. The URL's password, echoed with the Basic token made from it.
    let basic = ringperf::internals::endpoint::basic_token(&format!("admin:{PASSWORD}"));
    let body = format!(
        r#"{{"message": "bad credentials Basic {basic} for admin:{PASSWORD} ({PASSWORD})"}}"#
    );
    let denied = http("401 Unauthorized", "application/json", &body);
    let server = fake_server(move |_, _| (denied.clone(), false));
    let url = format!("http://admin:{PASSWORD}@{}", server.addr);
    let dir = support::artifact_dir("hostile-url");
    let (code, console, files) = run(&["--url", &url, "-m", "m", "--request-count", "3"], &dir);
    assert_eq!(code, 2, "{console}");
    let with_basic = [PASSWORD, basic.as_str()];
    assert_eq!(leak(&console, &with_basic), None, "{console}");
    assert_eq!(leak(&files, &with_basic), None, "{files}");

    // 3. No preflight: the run's own responses echo the key as HTTP errors and as errors
    // inside event streams; the run finishes and every artifact is clean.
    let ok = support::capture("vllm/chat-stream.http");
    let in_body = http(
        "403 Forbidden",
        "text/html",
        &format!(
            "<html><body><h1>403</h1><p>{}</p></body></html>",
            echoes(KEY)
        ),
    );
    let in_stream = stream_error(&echoes(HEADER_KEY));
    let server = fake_server(move |n, _| match n % 3 {
        0 => (ok.clone(), false),
        1 => (in_body.clone(), false),
        _ => (in_stream.clone(), false),
    });
    let url = format!("http://{}", server.addr);
    let dir = support::artifact_dir("hostile-run");
    let (code, console, files) = run(
        &[
            "--url",
            &url,
            "--no-preflight",
            "--api-key",
            KEY,
            "-H",
            &header,
            "-m",
            "m",
            "--streaming",
            "--request-count",
            "9",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{console}");
    assert!(
        console.contains("http_403") || console.contains("403"),
        "{console}"
    );
    assert!(files.contains("<redacted>"), "the errors were written");
    assert_eq!(leak(&console, &secrets), None, "{console}");
    assert_eq!(leak(&files, &secrets), None);
}

#[test]
fn a_server_cannot_forge_a_line_or_send_escapes_to_the_terminal() {
    let _shared = support::shared();
    let forged =
        "bad input\nerror: forged line\r\nVerdict: headroom\u{1b}[2J\u{1b}]0;title\u{7}\u{202e}";
    let stream = stream_error(forged);
    let page = http("500 Internal Server Error", "text/plain", forged);
    let server = fake_server(move |n, _| {
        if n % 2 == 0 {
            (stream.clone(), false)
        } else {
            (page.clone(), false)
        }
    });
    let url = format!("http://{}", server.addr);
    let dir = support::artifact_dir("hostile-forge");
    let (code, console, files) = run(
        &[
            "--url",
            &url,
            "--no-preflight",
            "-m",
            "m",
            "--streaming",
            "--request-count",
            "4",
        ],
        &dir,
    );
    // Every request failed: the run says so.
    assert_eq!(code, 2, "{console}");
    assert!(console.contains("bad input"), "{console}");
    for line in console.lines() {
        assert!(
            !line.starts_with("error: forged") && !line.starts_with("Verdict: headroom"),
            "a server's text made a line of its own: {line:?}"
        );
    }
    for bad in ['\u{1b}', '\u{7}', '\u{202e}'] {
        assert!(!console.contains(bad), "{bad:?} reached the console");
        assert!(!files.contains(bad), "{bad:?} reached an artifact");
    }
    assert!(
        console.contains("\\u{1b}[2J"),
        "escaped, still readable: {console}"
    );
}

/// The plan is checked in bytes and in requests (with every session's turns) before anything
/// is prepared, and only what the run can send is prepared.
#[test]
fn plans_are_bounded_before_anything_is_prepared() {
    let _shared = support::shared();
    let dir = support::artifact_dir("hostile-plan");
    // Ten million prompts asked for, two requests sent: two prompts prepared.
    let t = Instant::now();
    let (code, console, _) = run(
        &[
            "--sim=--ttft 1ms --itl 1ms",
            "--num-dataset-entries",
            "10000000",
            "--synthetic-input-tokens-mean",
            "10",
            "--request-count",
            "2",
            "--output-tokens-mean",
            "2",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{console}");
    assert!(console.contains("preparing 2 prompts"), "{console}");
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    let inputs = std::fs::metadata(dir.join("inputs.json")).unwrap().len();
    assert!(inputs < 10_000, "inputs.json is {inputs} bytes");

    // Over the byte budget, and sessions over the request budget: refused at once, with the
    // estimate, before the preparing line.
    for (args, says) in [
        (
            vec![
                "--num-dataset-entries",
                "10000000",
                "--request-count",
                "10000000",
                "--synthetic-input-tokens-mean",
                "10",
            ],
            "GB of requests",
        ),
        (
            vec![
                "--session-turns-mean",
                "1024",
                "--request-count",
                "10000000",
            ],
            "sessions of about 1024 turns",
        ),
        (
            vec![
                "--random-range-ratio",
                "0.5",
                "--synthetic-input-tokens-stddev",
                "10",
                "--synthetic-input-tokens-mean",
                "300000",
                "--num-dataset-entries",
                "300",
                "--request-count",
                "300",
            ],
            "give one or the other",
        ),
        (vec!["--gpus", "foo", "--request-count", "300"], "--gpus"),
        (
            vec!["--server-metrics-url", "ftp://x", "--request-count", "300"],
            "--server-metrics-url \"ftp://x\": only http:// and https://",
        ),
    ] {
        let t = Instant::now();
        let dir = support::artifact_dir("hostile-plan-refused");
        let mut all = vec!["--sim"];
        all.extend(args.iter());
        let (code, console, _) = run(&all, &dir);
        assert_eq!(code, 2, "{args:?}: {console}");
        assert!(console.contains(says), "{args:?}: {console}");
        assert!(!console.contains("preparing"), "{args:?}: {console}");
        assert!(t.elapsed() < Duration::from_secs(10), "{args:?}");
        assert!(
            !dir.exists(),
            "{args:?}: a refused run left {}",
            dir.display()
        );
    }
}

/// c=3,000 against a port that refuses: the failures are counted whole, the records kept one
/// by one stay within the per-second allowance.
#[test]
fn a_dead_server_at_high_concurrency_does_not_flood_the_records() {
    let _shared = support::shared();
    let port = support::closed_port();
    let dir = support::artifact_dir("hostile-dead");
    let url = format!("http://127.0.0.1:{port}");
    let (code, console, _) = run(
        &[
            "--url",
            &url,
            "--no-preflight",
            "-m",
            "m",
            "--concurrency",
            "3000",
            "--benchmark-duration",
            "3",
            "--shards",
            "1",
        ],
        &dir,
    );
    assert_eq!(code, 2, "{console}");
    let doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("profile_export_ringperf.json")).unwrap(),
    )
    .unwrap();
    let failed: u64 = doc["error_summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["count"].as_u64().unwrap())
        .sum();
    // The stated rate, counted in the file itself: at most 200 failures kept in any clock
    // second (one shard), whatever the host's load did to the run's length.
    let mut per_second = std::collections::BTreeMap::new();
    let text = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let end = v["metadata"]["end_ns"].as_u64().unwrap();
        *per_second.entry(end / 1_000_000_000).or_insert(0u64) += 1;
    }
    let lines: u64 = per_second.values().sum();
    let busiest = per_second.values().max().copied().unwrap_or(0);
    assert!(busiest <= 200, "{busiest} failures kept in one second");
    assert!(failed > lines, "{failed} failed, {lines} kept");
    assert!(
        console.contains("counted but not written one by one"),
        "{console}"
    );
}

/// A signal mid-run writes the artifacts, says "interrupted", and exits 128 + the signal:
/// 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP (a closed terminal).
#[test]
fn a_stopped_run_writes_its_artifacts_and_exits_with_the_signal() {
    let _shared = support::shared();
    let ok = support::capture("vllm/chat-stream.http");
    for (sig, code, name) in [
        ("INT", 130, "SIGINT"),
        ("TERM", 143, "SIGTERM"),
        ("HUP", 129, "SIGHUP"),
    ] {
        // The server says when the first request came (readiness), and answers each after
        // 20 ms, as a slow model would.
        let (came, first) = std::sync::mpsc::channel();
        let ok = ok.clone();
        let server = fake_server(move |_, _| {
            let _ = came.send(());
            std::thread::sleep(Duration::from_millis(20));
            (ok.clone(), false)
        });
        let dir = support::artifact_dir("hostile-signal");
        let child = ringperf()
            .args(["profile", "--url", &format!("http://{}", server.addr)])
            .args(["--no-preflight", "-m", "m", "--streaming"])
            .args(["--benchmark-duration", "60", "--no-progress"])
            .args(["--artifact-dir", dir.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        first
            .recv_timeout(Duration::from_secs(30))
            .expect("no request came");
        signal(&child, sig);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "SIG{sig}: {stderr}");
        assert!(
            stderr.contains(&format!("interrupted by {name}")),
            "{stderr}"
        );
        let doc: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("profile_export_ringperf.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(doc["was_cancelled"], true);
        assert_eq!(doc["interrupted_by"], name);
        assert!(dir.join("profile_export.jsonl").exists());
    }
}

/// Ctrl-C while waiting for `--start-at` ends the run at once with nothing sent, and leaves
/// no folder behind.
#[test]
fn a_signal_before_the_first_request_sends_nothing() {
    let _shared = support::shared();
    let server = fake_server(|_, _| (support::capture("vllm/chat-stream.http"), false));
    let dir = support::artifact_dir("hostile-start-at");
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 120;
    let mut child = ringperf()
        .args(["profile", "--url", &format!("http://{}", server.addr)])
        .args(["--no-preflight", "-m", "m", "--request-count", "5"])
        .args(["--start-at", &at.to_string(), "--no-progress"])
        .args(["--artifact-dir", dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    wait_for_line(&mut lines, |l| l.contains("waiting").then_some(()));
    signal(&child, "INT");
    let t = Instant::now();
    let status = child.wait().unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(status.code(), Some(130), "{rest:?}");
    assert!(
        rest.iter().any(|l| l.contains("nothing was sent")),
        "{rest:?}"
    );
    assert_eq!(server.requests.load(Ordering::Relaxed), 0);
    assert!(!dir.exists(), "an empty artifact folder was left");
}

/// A write that fails (here a file-size limit, as a full disk does) leaves no half-written
/// file under an artifact's name, and says which file and why.
#[test]
fn a_failed_write_leaves_no_cut_file() {
    let _shared = support::shared();
    use std::os::unix::process::CommandExt;
    let dir = support::artifact_dir("hostile-disk");
    let mut cmd = ringperf();
    cmd.args([
        "profile",
        "--sim=--ttft 1ms --itl 1ms",
        "--request-count",
        "300",
    ])
    .args(["--output-tokens-mean", "4", "--no-progress"])
    .args(["--artifact-dir", dir.to_str().unwrap()]);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 48 << 10,
                rlim_max: 48 << 10,
            };
            // SIGXFSZ keeps its default action (death): ringperf ignores it itself, so that
            // the write fails with EFBIG and the error can name the file.
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("profile_export.jsonl") && stderr.contains("too large"),
        "{stderr}"
    );
    let names: Vec<String> = support::files_under(&dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n == "profile_export.jsonl"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.ends_with(".partial")), "{names:?}");
}

/// Each small hole: a clear error, or the value honoured.
#[test]
fn small_holes_are_clear_errors_or_honoured() {
    let _shared = support::shared();
    let dir = support::artifact_dir("hostile-small");
    for (args, says) in [
        (vec!["--url", "http://127.0.0.1:1/v1?x=1"], "a query"),
        (vec!["--url", "http://127.0.0.1:1#frag"], "a fragment"),
        (vec!["--ring-entries", "0"], "--ring-entries 0"),
        (vec!["-m", ""], "-m '': a model name cannot be empty"),
    ] {
        let (code, console, _) = run(&args, &dir);
        assert_eq!(code, 2, "{args:?}: {console}");
        let line = console
            .lines()
            .find(|l| l.starts_with("error"))
            .unwrap_or_else(|| panic!("{args:?}: {console}"));
        assert!(line.contains(says), "{args:?}: {line}");
        assert_eq!(
            console.lines().filter(|l| l.starts_with("error")).count(),
            1
        );
    }

    // Files: a byte order mark is no error; a negative length is named as such.
    let file = dir.with_extension("bom.jsonl");
    std::fs::write(
        &file,
        "\u{feff}{\"text\": \"hello there\", \"max_tokens\": 3}\n{\"text\": \"again\"}\n",
    )
    .unwrap();
    let (code, console, _) = run(
        &[
            "--sim=--ttft 1ms --itl 1ms",
            "--input-file",
            file.to_str().unwrap(),
            "--request-count",
            "2",
        ],
        &support::artifact_dir("hostile-bom"),
    );
    assert_eq!(code, 0, "{console}");
    for (line, says) in [
        (
            r#"{"text": "hi", "max_tokens": -3}"#,
            "\"max_tokens\": -3 is not a whole number",
        ),
        (
            r#"{"timestamp": 0, "input_length": -5, "output_length": 2}"#,
            "\"input_length\": -5 is not a whole number",
        ),
    ] {
        std::fs::write(&file, format!("{line}\n")).unwrap();
        let (code, console, _) = run(
            &["--sim", "--input-file", file.to_str().unwrap()],
            &support::artifact_dir("hostile-neg"),
        );
        assert_eq!(code, 2, "{console}");
        assert!(
            console.contains(says) && console.contains(":1"),
            "{console}"
        );
    }
    std::fs::remove_file(&file).unwrap();

    // An inline template that does not open with '{' is read as the template, not as a file's
    // name, and its own fault is said.
    let (code, console, _) = run(
        &[
            "--sim",
            "--endpoint-type",
            "template",
            "--endpoint",
            "/v1/completions",
            "--request-template",
            "prompt={{prompt}}",
        ],
        &dir,
    );
    assert_eq!(code, 2, "{console}");
    assert!(console.contains("is not JSON once filled in"), "{console}");
    assert!(!console.contains("No such file"), "{console}");
}

/// Reads `master` until `seen` holds each of `marks` in turn (a readiness mark); panics after
/// 60 s.
fn read_until(master: &mut std::fs::File, seen: &mut Vec<u8>, marks: &[&[u8]]) {
    use std::io::Read;
    let end = Instant::now() + Duration::from_secs(60);
    let mut buf = [0u8; 65536];
    let found = |seen: &[u8]| {
        let mut at = 0;
        marks.iter().all(|m| {
            let hit = seen[at..].windows(m.len()).position(|w| w == *m);
            hit.map(|i| at += i + m.len()).is_some()
        })
    };
    while !found(seen) {
        assert!(Instant::now() < end, "no {marks:?} on the terminal");
        match master.read(&mut buf) {
            Ok(n) if n > 0 => seen.extend_from_slice(&buf[..n]),
            r => panic!(
                "the terminal closed: {r:?}: {}",
                String::from_utf8_lossy(seen)
            ),
        }
    }
}

/// The terminal closes under a run (an SSH session drops: the pty's master side is closed):
/// the run stops as on SIGHUP, writes every artifact, and exits 129 — with the live line,
/// with the dashboard, and in a sweep, where the point under way is kept too.
#[test]
fn a_closed_terminal_is_a_hang_up_that_keeps_the_run() {
    let _shared = support::shared();
    let sim = "--sim=--ttft 5ms --itl 5ms";
    for (ui, load, ready) in [
        ("simple", "4", &[&b"TTFT p50"[..]][..]),
        ("dashboard", "4", &[&b"\x1b[?1049h"[..]]),
        ("simple", "2,4", &[&b"point 2 of 2"[..], b"TTFT p50"]),
    ] {
        let (mut master, slave) = ringperf::internals::sys::open_pty(80, 24).unwrap();
        let dir = support::artifact_dir("hostile-pty");
        let child = ringperf()
            .args(["profile", sim, "--streaming", "--ui", ui])
            .args(["--concurrency", load, "--benchmark-duration", "4"])
            .args(["--output-tokens-mean", "8", "--artifact-dir"])
            .arg(&dir)
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .spawn()
            .unwrap();
        let mut seen = Vec::new();
        read_until(&mut master, &mut seen, ready);
        drop(master);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(129), "{ui} {load}");
        let points: Vec<std::path::PathBuf> = if load.contains(',') {
            vec![dir.join("concurrency_2"), dir.join("concurrency_4")]
        } else {
            vec![dir.clone()]
        };
        for (i, p) in points.iter().enumerate() {
            let doc: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(p.join("profile_export_ringperf.json"))
                    .unwrap_or_else(|e| panic!("{ui} {load}: {}: {e}", p.display())),
            )
            .unwrap();
            // Only the last point was under way when the terminal went.
            let cut = i + 1 == points.len();
            assert_eq!(doc["was_cancelled"], cut, "{ui} {load} {}", p.display());
            if cut {
                assert_eq!(doc["interrupted_by"], "SIGHUP");
            }
            assert!(p.join("profile_export.jsonl").exists());
            // The live line shows TTFT once requests finished; a sweep's first point ran whole.
            if ui == "simple" && (!cut || points.len() == 1) {
                let rate = doc["request_throughput"]["avg"].as_f64();
                assert!(rate.is_some_and(|r| r > 0.0), "{ui} {load}: {rate:?}");
            }
        }
        assert!(dir.join("report.html").exists(), "{ui} {load}");
        let names = support::files_under(&dir);
        assert!(
            !names
                .iter()
                .any(|n| n.to_string_lossy().ends_with(".partial")),
            "{names:?}"
        );
    }
}

/// `ringperf profile … 2>&1 | head -1`: the reader goes after one line; the process ends as
/// on SIGHUP (129), never with a panic.
#[test]
fn a_reader_that_goes_is_a_hang_up_not_a_panic() {
    let _shared = support::shared();
    let dir = support::artifact_dir("hostile-head");
    let mut child = ringperf()
        .args(["profile", "--sim=--ttft 5ms --itl 5ms", "--streaming"])
        .args(["--concurrency", "2", "--benchmark-duration", "30"])
        .args(["--progress-interval", "1", "--artifact-dir"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let t = Instant::now();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(129), "{first}");
    assert!(t.elapsed() < Duration::from_secs(20));
}

/// A second Ctrl-C ends the process at once, whatever it was doing: it leaves no hidden
/// half-written file and no empty folder.
#[test]
fn a_second_signal_leaves_no_partial_file_and_no_empty_folder() {
    let _shared = support::shared();
    for _ in 0..3 {
        let dir = support::artifact_dir("hostile-twice");
        let child = ringperf()
            .args(["profile", "--sim=--ttft 0ms --itl 0ms", "--streaming"])
            .args(["--concurrency", "64", "--benchmark-duration", "60"])
            .args([
                "--output-tokens-mean",
                "64",
                "--no-progress",
                "--artifact-dir",
            ])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = child;
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        wait_for_line(&mut lines, |l| l.contains("start-up").then_some(()));
        signal(&child, "INT");
        signal(&child, "INT");
        let status = child.wait().unwrap();
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        assert_eq!(status.code(), Some(130), "{rest:?}");
        let names = support::files_under(&dir);
        assert!(
            !names
                .iter()
                .any(|n| n.to_string_lossy().ends_with(".partial")),
            "{names:?}"
        );
        assert!(
            !dir.exists() || !names.is_empty(),
            "an empty folder was left"
        );
    }
}

/// Every file `dir` holds parses as what its name says: JSON, JSON lines, CSV, SVG (XML).
/// Returns how many were checked.
fn every_file_parses(dir: &std::path::Path, what: &str) -> usize {
    let mut checked = 0;
    for f in support::files_under(dir) {
        let name = f.to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
        if name.ends_with(".json") {
            serde_json::from_str::<serde_json::Value>(&text)
                .unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
        } else if name.ends_with(".jsonl") {
            for line in text.lines().filter(|l| !l.is_empty()) {
                serde_json::from_str::<serde_json::Value>(line)
                    .unwrap_or_else(|e| panic!("{what}: {name}: {e}: {line}"));
            }
        } else if name.ends_with(".csv") {
            let mut r = csv::ReaderBuilder::new()
                .flexible(true)
                .has_headers(false)
                .from_reader(text.as_bytes());
            for rec in r.records() {
                rec.unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
            }
        } else if name.ends_with(".svg") {
            roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
        } else {
            continue;
        }
        checked += 1;
    }
    checked
}

/// Keys that are words of every file's syntax (`null`, `true`, `none`, `model`), a key with
/// `"` and `\`, a 6-character key: echoed by the server in errors, each is cut out of the
/// values that hold it, and every JSON, JSONL, CSV and SVG file still parses.
#[test]
fn no_key_of_any_length_or_character_breaks_a_file() {
    let _shared = support::shared();
    let ok = support::capture("vllm/chat-stream.http");
    for key in ["null", "true", "none", "model", r#"a"b\c\"#, "k3y-6x"] {
        let message = format!("invalid key {key}: null true none model");
        let denied = http(
            "401 Unauthorized",
            "application/json",
            &serde_json::json!({"error": {"message": message, "code": 401}}).to_string(),
        );
        let ok = ok.clone();
        let server = fake_server(move |n, _| {
            if n % 3 == 2 {
                (denied.clone(), false)
            } else {
                (ok.clone(), false)
            }
        });
        let dir = support::artifact_dir("hostile-short-key");
        let url = format!("http://{}", server.addr);
        let (code, console, _) = run(
            &["--url", &url, "--no-preflight", "-m", "m", "--api-key", key]
                .into_iter()
                .chain(["--streaming", "--concurrency", "2", "--request-count", "12"])
                .collect::<Vec<_>>(),
            &dir,
        );
        assert_eq!(code, 0, "{key}: {console}");
        assert!(every_file_parses(&dir, key) >= 8, "{key}");
        let doc: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("profile_export_ringperf.json")).unwrap(),
        )
        .unwrap();
        // ringperf's own words and keys stay; the server's echo is cut.
        assert_eq!(doc["about"]["model"], "m", "{key}");
        let summary = doc["error_summary"].to_string();
        assert!(summary.contains("<redacted>"), "{key}: {summary}");
        assert!(
            !summary.contains(&format!("key {key}:")),
            "{key}: {summary}"
        );
    }
}

/// A server that echoes the key and a custom header's value in every form it might: plainly,
/// JSON-escaped, in pieces, base64- and URL-encoded, as the model it answers as and as a
/// finish reason: no form of either reaches the console or a file.
#[test]
fn no_form_of_a_key_a_server_echoes_is_written() {
    let _shared = support::shared();
    use base64::Engine;
    const KEY: &str = r#"sk-"q\Zt8/x+w=91LmNo"#;
    const TENANT: &str = "tenant-Qz81-blue";
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let pct = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    char::from(b).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    let forms = [
        KEY.to_string(),
        serde_json::to_string(KEY)
            .unwrap()
            .trim_matches('"')
            .to_string(),
        b64(KEY).trim_end_matches('=').to_string(),
        b64(&format!("Bearer {KEY}"))[12..24].to_string(),
        pct(KEY),
        TENANT.to_string(),
        b64(TENANT),
    ];
    let echo = format!(
        "key {KEY} again {} in base64 {} {} url {} tenant {TENANT} {}; halves {} | {}",
        serde_json::to_string(KEY).unwrap(),
        b64(KEY),
        b64(&format!("Bearer {KEY}")),
        pct(KEY),
        b64(TENANT),
        &KEY[..10],
        &KEY[10..]
    );
    let error_body = serde_json::json!({"error": {"message": echo}}).to_string();
    let page = http("403 Forbidden", "text/html", &format!("<p>{echo}</p>"));
    let json_error = http("401 Unauthorized", "application/json", &error_body);
    let in_stream = stream_error(&echo);
    // A stream that names the key as its model and ends with it as its finish reason.
    let named = event_stream(
        [
            serde_json::json!({"model": echo, "choices": [{"delta": {"content": "hi"}}]}),
            serde_json::json!({"model": echo, "choices": [{"delta": {"content": " there"},
                "finish_reason": echo}]}),
        ]
        .iter()
        .map(|e| format!("data: {e}\n\n"))
        .chain(["data: [DONE]\n\n".to_string()]),
    );
    let server = fake_server(move |n, _| {
        let r = [&named, &page, &json_error, &in_stream][n % 4];
        (r.clone(), false)
    });
    let dir = support::artifact_dir("hostile-forms");
    let url = format!("http://{}", server.addr);
    let header = format!("X-Tenant: {TENANT}");
    let (code, console, files) = run(
        &[
            "--url",
            &url,
            "--no-preflight",
            "-m",
            "m",
            "--api-key",
            KEY,
            "-H",
            &header,
        ]
        .into_iter()
        .chain(["--streaming", "--request-count", "16"])
        .collect::<Vec<_>>(),
        &dir,
    );
    assert_eq!(code, 0, "{console}");
    assert_eq!(server.requests.load(Ordering::Relaxed), 16);
    let forms: Vec<&str> = forms.iter().map(String::as_str).collect();
    assert_eq!(leak(&console, &forms), None, "{console}");
    assert_eq!(leak(&files, &forms), None);
    assert!(files.contains("<redacted>"), "the errors were written");
    assert!(every_file_parses(&dir, "forms") >= 8);
}

/// Runs `ringperf profile ARGS` to its end: (exit code, its peak RSS in MB as it reports it,
/// the JSONL's size in MB).
fn peak_rss(args: &[&str], dir: &std::path::Path) -> (i32, f64, f64) {
    let status = ringperf()
        .arg("profile")
        .args(args)
        .args(["--no-progress", "--artifact-dir", dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("profile_export_ringperf.json")).unwrap(),
    )
    .unwrap();
    let jsonl = std::fs::metadata(dir.join("profile_export.jsonl")).map_or(0, |m| m.len());
    (
        status.code().unwrap_or(-1),
        doc["client_health"]["peak_rss_mb"].as_f64().unwrap(),
        jsonl as f64 / 1e6,
    )
}

/// A streamed response of `events` one-character events, then usage, then `[DONE]`;
/// `finish` as the last event's finish reason.
fn tiny_events(events: usize, finish: &str) -> Vec<u8> {
    let one = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n";
    let last = format!(
        "data: {}\n\ndata: [DONE]\n\n",
        serde_json::json!({"choices": [{"delta": {}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 5, "completion_tokens": events}})
    );
    let blocks = (0..events.div_ceil(1000)).map(|b| one.repeat((events - b * 1000).min(1000)));
    event_stream(blocks.chain([last]))
}

/// What a response's shape costs the client, against the same run of small responses: 20
/// responses of 200,000 events each (their gaps past 8,192 kept in a histogram), and 20 with
/// a 400 KB finish reason (kept to 64 characters). The figures are printed for the record.
#[test]
fn memory_is_bounded_for_any_response_shape() {
    let _shared = support::shared();
    let load = [
        "--no-preflight",
        "-m",
        "m",
        "--streaming",
        "--concurrency",
        "4",
    ];
    let load = [&load[..], &["--request-count", "20"]].concat();
    let mut runs = Vec::new();
    for (name, events, finish) in [
        ("small", 10, "length".to_string()),
        ("200k events", 200_000, "length".to_string()),
        ("400 KB finish reason", 10, "f".repeat(400_000)),
    ] {
        let body = tiny_events(events, &finish);
        let server = fake_server(move |_, _| (body.clone(), false));
        let url = format!("http://{}", server.addr);
        let dir = support::artifact_dir("hostile-shape");
        let args = [&["--url", url.as_str()][..], &load].concat();
        let (code, rss, jsonl) = peak_rss(&args, &dir);
        assert_eq!(code, 0, "{name}");
        eprintln!("shape {name}: peak RSS {rss:.1} MB, JSONL {jsonl:.2} MB");
        runs.push((name, rss, jsonl));
    }
    let base = runs[0].1;
    for (name, rss, jsonl) in &runs[1..] {
        // Unbounded, 200k events cost about 5 MB a response (100 MB here) and a 400 KB finish
        // reason 0.4 MB a response in memory and in the JSONL.
        assert!(
            rss - base < 30.0,
            "{name}: {rss:.1} MB against {base:.1} MB"
        );
        assert!(*jsonl < 4.0, "{name}: JSONL {jsonl:.2} MB");
    }
}

/// The memory a plan says its prompts will take (`preparing … (about N MB of memory)`) is
/// within 20% of what they take: the run's peak RSS less that of the same run with one prompt.
#[test]
fn plans_estimate_their_memory_within_a_fifth() {
    let _shared = support::shared();
    let run = |entries: &str, isl: &str, turns: &str| -> (f64, f64) {
        let dir = support::artifact_dir("hostile-estimate");
        let sessions = ["--session-turns-mean", turns];
        let out = ringperf()
            .args(["profile", "--sim=--ttft 1ms --itl 1ms", "--no-progress"])
            .args([
                "--num-dataset-entries",
                entries,
                "--synthetic-input-tokens-mean",
                isl,
            ])
            .args(if turns == "1" { &[][..] } else { &sessions[..] })
            .args(["--benchmark-duration", "1", "--output-tokens-mean", "2"])
            .arg("--artifact-dir")
            .arg(&dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let said: f64 = stderr
            .split("(about ")
            .nth(1)
            .and_then(|s| s.split(" MB of memory)").next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no estimate in {stderr}"));
        let doc: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("profile_export_ringperf.json")).unwrap(),
        )
        .unwrap();
        (said, doc["client_health"]["peak_rss_mb"].as_f64().unwrap())
    };
    // Prompts, and sessions (a turn's text is held once, its body made as it is sent).
    let cases = [
        ("100000", "10", "1"),
        ("30000", "550", "1"),
        ("100", "300", "1024"),
    ];
    for (entries, isl, turns) in cases {
        let (_, base) = run("1", isl, "1");
        let (said, peak) = run(entries, isl, turns);
        let took = peak - base;
        let what = format!("{entries} × {turns} turns of {isl} tokens");
        eprintln!("{what}: said {said:.0} MB, took {took:.0} MB");
        assert!(
            (said - took).abs() <= 0.2 * took,
            "{what}: said {said:.0} MB, took {took:.0} MB"
        );
    }
}
