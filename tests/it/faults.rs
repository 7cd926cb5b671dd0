//! Server faults: the run finishes, counts each fault by kind, writes its results, and never
//! hangs or panics.

use crate::support;
use std::time::{Duration, Instant};

use crate::support::{artifact_dir, capture, fake_server, profile, sim};

/// The run's errors as (kind, count), in the report's order.
fn kinds(r: &ringperf::report::Report) -> Vec<(&str, u64)> {
    r.errors
        .iter()
        .map(|e| (e.kind.as_str(), e.count))
        .collect()
}

#[test]
fn llamacpp_closing_after_every_stream_is_a_reconnect_not_an_error() {
    let _shared = support::shared();
    // llama.cpp advertises keep-alive but closes after each streamed response.
    let body = capture("llamacpp/chat-stream.http");
    let server = fake_server(move |_, _| (body.clone(), true));
    let url = format!("http://{}", server.addr);
    let dir = artifact_dir("faults-llamacpp");
    let res = profile(
        &format!(
            "--url {url} --no-preflight -m tiny-qwen3 --streaming --concurrency 2 --request-count 20 --shards 1"
        ),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!((r.completed, r.failed), (20, 0), "{}", res.console);
    assert_eq!(r.output_tokens, 20 * 16);
    // Each reused connection turned out dead and was replaced; none of that is a server error.
    assert!(r.records.iter().filter(|x| x.reconnected).count() >= 15);
    assert_eq!(
        server.requests.load(std::sync::atomic::Ordering::Relaxed),
        20
    );
}

#[test]
fn http_errors_and_cut_streams_are_counted_by_kind_and_the_run_completes() {
    let _shared = support::shared();
    let ok = capture("vllm/chat-stream.http");
    let err500 = capture("llamacpp/error-bad-json.http");
    let cut = ok[..ok.len() / 2].to_vec();
    let server = fake_server(move |n, _| match n % 5 {
        1 => (err500.clone(), true),
        3 => (cut.clone(), true),
        _ => (ok.clone(), false),
    });
    let url = format!("http://{}", server.addr);
    let dir = artifact_dir("faults-mixed");
    let res = profile(
        &format!("--url {url} --no-preflight -m m --streaming --concurrency 1 --request-count 20"),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!(r.completed + r.failed, 20);
    assert_eq!(r.failed, 8, "{}", res.console);
    let kinds = kinds(r);
    assert_eq!(kinds, vec![("http_500", 4), ("closed_early", 4)]);
    assert!(r.errors[0].message.contains("parse error"));
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("profile_export_ringperf.json")).unwrap())
            .unwrap();
    assert_eq!(doc["error_request_count"]["avg"], 8.0);
    assert_eq!(doc["error_summary"][0]["code"], 500);
    assert_eq!(doc["error_summary"][0]["count"], 4);
    // Failed requests stay out of latency distributions.
    assert_eq!(r.metrics.latency.count(), 12);
}

#[test]
fn a_silent_server_hits_the_request_timeout_without_hanging() {
    let _shared = support::shared();
    let server = fake_server(|_, _| {
        std::thread::sleep(Duration::from_secs(3));
        (Vec::new(), true)
    });
    let url = format!("http://{}", server.addr);
    let dir = artifact_dir("faults-timeout");
    let t = Instant::now();
    let err = profile(
        &format!(
            "--url {url} --no-preflight -m m --streaming --concurrency 2 --request-count 2 --request-timeout 300ms"
        ),
        &dir,
    )
    .err()
    .expect("nothing measured");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t.elapsed()
    );
    assert!(err.to_string().contains("request_timeout"), "{err}");
    // Even then the artifacts are written.
    assert!(dir.join("profile_export.jsonl").exists());
}

#[test]
fn a_dead_server_gets_backoff_and_every_failure_is_counted() {
    let _shared = support::shared();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = artifact_dir("faults-backoff");
    let t = Instant::now();
    let err = profile(
        &format!(
            "--url http://127.0.0.1:{port} --no-preflight -m m --concurrency 4 --benchmark-duration 1s \
             --grace-period 1s"
        ),
        &dir,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    // "connect_failed (N): …": without backoff a refused port fails thousands of times a
    // second; with it each of the 4 places waits 1, 2, 4 … 500 ms.
    let n: u64 = err
        .split("connect_failed (")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{err}"));
    assert!((4..=100).contains(&n), "{n} failures in 1 s: {err}");
    let lines = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    assert_eq!(
        lines.lines().count() as u64,
        n,
        "every failure is in the export"
    );
}

#[test]
fn refused_connection_and_unknown_model_are_clear_errors() {
    let _shared = support::shared();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = artifact_dir("faults-refused");
    let url = format!("http://127.0.0.1:{port}");
    let err = profile(&format!("--url {url} --request-count 3"), &dir)
        .err()
        .unwrap()
        .to_string();
    // Found before the run: one line, no table, nothing sent.
    assert!(
        err.contains("is not answering") && err.contains("refused"),
        "{err}"
    );
    assert!(!dir.join("profile_export.jsonl").exists());

    let s = sim("");
    let url = format!("http://{}", s.addr);
    let err = profile(
        &format!("--url {url} -m no-such-model --request-count 3"),
        &dir,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("http_404") && err.contains("does not exist"),
        "{err}"
    );
}

#[test]
fn oversized_heads_events_and_bodies_are_cut_at_their_caps() {
    let _shared = support::shared();
    let ok = capture("vllm/chat-stream.http");
    let stream_of = |body: &[u8], ctype: &str| {
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    };
    // A `data:` line of 3 MiB, an event of 3 MiB in 1 KiB lines, a 70 KiB head, a 5 MiB body.
    let long_line = stream_of(
        &[b"data: ".as_slice(), &vec![b'x'; 3 << 20], b"\n\n"].concat(),
        "text/event-stream",
    );
    let many_lines = stream_of(
        &[b"data: ", &[b'y'; 1024][..], b"\n"]
            .concat()
            .repeat(3 << 10),
        "text/event-stream",
    );
    let mut big_head = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Pad: ".to_vec();
    big_head.extend(std::iter::repeat_n(b'h', 70 << 10));
    big_head.extend_from_slice(b"\r\n\r\n");
    let big_body = stream_of(&vec![b' '; 5 << 20], "application/json");
    let server = fake_server(move |n, _| match n % 5 {
        1 => (long_line.clone(), false),
        2 => (many_lines.clone(), false),
        3 => (big_head.clone(), false),
        4 => (big_body.clone(), false),
        _ => (ok.clone(), false),
    });
    let url = format!("http://{}", server.addr);
    let dir = artifact_dir("faults-caps");
    let t = Instant::now();
    let res = profile(
        &format!(
            "--url {url} --no-preflight -m m --streaming --concurrency 1 --request-count 10 --request-timeout 30s"
        ),
        &dir,
    )
    .unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t.elapsed()
    );
    let r = &res.report;
    let mut kinds = kinds(r);
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        vec![
            ("body_too_large", 2),
            ("event_too_large", 4),
            ("header_too_large", 2)
        ],
        "{}",
        res.console
    );
    assert_eq!(r.completed, 2);
    let msg = &r
        .errors
        .iter()
        .find(|e| e.kind == "event_too_large")
        .unwrap()
        .message;
    assert!(msg.contains("512 KiB"), "{msg}");
}

#[test]
fn successful_responses_without_text_are_not_ok() {
    let _shared = support::shared();
    let ok = capture("vllm/chat-stream.http");
    let sse = |events: &str| {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{events}",
            events.len()
        )
        .into_bytes()
    };
    let no_choices = sse(
        "data: {\"id\":\"a\",\"object\":\"chat.completion.chunk\",\"choices\":[]}\n\ndata: [DONE]\n\n",
    );
    let tool_calls = sse(concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,",
        "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\ndata: [DONE]\n\n"
    ));
    let whole = r#"{"choices":[{"index":0,"message":{"content":""}}],"object":"chat.completion"}"#;
    let empty_whole = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{whole}",
        whole.len()
    )
    .into_bytes();
    let server = fake_server(move |n, _| match n % 4 {
        1 => (no_choices.clone(), false),
        2 => (tool_calls.clone(), false),
        3 => (empty_whole.clone(), false),
        _ => (ok.clone(), false),
    });
    let url = format!("http://{}", server.addr);
    let dir = artifact_dir("faults-no-content");
    let res = profile(
        &format!("--url {url} --no-preflight -m m --streaming --concurrency 1 --request-count 8"),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!((r.completed, r.failed), (2, 6), "{}", res.console);
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    assert_eq!(
        (r.errors[0].kind.as_str(), r.errors[0].count),
        ("no_content", 6)
    );
    // The empty ones do not drag the output length down.
    assert_eq!(r.output_tokens, 2 * 16);
}

#[test]
fn a_server_that_echoes_the_key_does_not_get_it_into_the_artifacts() {
    let _shared = support::shared();
    let ok = capture("vllm/chat-stream.http");
    // As a misconfigured proxy does: the error names the credential it was given.
    let body = r#"{"error":{"message":"key sk-echoed-secret-42 (Bearer sk-echoed-secret-42) is not allowed"}}"#;
    let denied = format!(
        "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes();
    let server = fake_server(move |n, _| match n % 2 {
        1 => (denied.clone(), false),
        _ => (ok.clone(), false),
    });
    let url = format!("http://{}", server.addr);
    let dir = artifact_dir("faults-echo");
    let res = profile(
        &format!(
            "--url {url} --no-preflight -m m --streaming --request-count 4 --api-key sk-echoed-secret-42 \
             -H X-Trace:abcdefgh123"
        ),
        &dir,
    )
    .unwrap();
    assert_eq!(res.report.errors[0].kind, "http_401");
    assert!(
        res.report.errors[0]
            .message
            .contains("key <redacted> (Bearer <redacted>)"),
        "{}",
        res.report.errors[0].message
    );
    let mut all = res.console.clone();
    for f in support::files_under(&dir) {
        all.push_str(&std::fs::read_to_string(f).unwrap());
    }
    assert!(
        !all.contains("sk-echoed-secret-42"),
        "the key reached the artifacts"
    );
}

#[test]
fn a_simulator_refuses_a_port_that_is_already_served() {
    let _shared = support::shared();
    let first = sim("");
    let mut args = ringperf::cli::SimArgs::parse_inline("").unwrap();
    args.bind = first.addr.to_string();
    match ringperf::sim::start(&args.config().unwrap()) {
        Ok(_) => panic!("a second simulator shared {}", first.addr),
        Err(e) => assert!(e.to_string().contains("already listens"), "{e}"),
    }
}

#[test]
fn garbage_sent_after_a_response_spoils_the_connection_not_the_next_request() {
    let _shared = support::shared();
    use std::io::Write;
    let ok = capture("vllm/chat-stream.http");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Answers each request, then, 20 ms later, sends bytes nobody asked for.
    std::thread::spawn(move || {
        for conn in listener.incoming().take(16) {
            let Ok(mut conn) = conn else { return };
            let ok = ok.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                while support::read_request(&mut conn, &mut buf).is_some() {
                    if conn.write_all(&ok).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                    let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nX-Stray: yes\r\n\r\n");
                }
            });
        }
    });
    let dir = artifact_dir("faults-stray");
    // 100 ms between sends: the stray bytes are always in before the next request leaves.
    let res = profile(
        &format!(
            "--url http://{addr} --no-preflight -m m --streaming --request-rate 10 --arrival constant \
             --request-count 5 --request-timeout 3s"
        ),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!((r.completed, r.failed), (5, 0), "{}", res.console);
    assert!(r.records.iter().filter(|x| x.reconnected).count() >= 3);
}
