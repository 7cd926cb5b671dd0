//! AIPerf's workload controls against the simulator, each checked from the artifacts: time
//! slices from their files, warm-ups and user-centric sessions. The ramps, the prefill cap and
//! cancellation are in `alone::workloads`.

use serde_json::Value;

use crate::support::{self, artifact_dir, profile, sim};

/// Every line of `profile_export.jsonl` in `dir`, its metadata.
pub(crate) fn requests(dir: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("profile_export.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["metadata"].clone())
        .collect()
}

pub(crate) fn json(path: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn time_slices_cut_a_timed_run_by_send_time_in_aiperfs_layouts() {
    let _shared = support::shared();
    let s = sim("--ttft 10ms --itl 5ms");
    let dir = artifact_dir("slices");
    let res = profile(
        &format!(
            "--url http://{} --streaming --concurrency 4 --benchmark-duration 3 \
             --slice-duration 1 --output-tokens-mean 10",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    let doc = json(&dir.join("profile_export_ringperf_timeslices.json"));
    let slices = doc["timeslices"].as_array().unwrap();
    // Three whole seconds; sending stops at the watcher's next 10 ms tick after the duration,
    // so the last sends may open a short fourth slice.
    assert!(
        (3..=4).contains(&slices.len()),
        "a 3 s run in 1 s slices: {doc}"
    );
    let mut counted = 0.0;
    for (k, s) in slices.iter().enumerate() {
        assert_eq!(s["timeslice_index"], k);
        let n = s["request_count"]["avg"].as_f64().unwrap();
        let secs = s["end_s"].as_f64().unwrap() - s["start_s"].as_f64().unwrap();
        if k < 3 {
            // The last slice ends at the last send.
            assert!(secs > 0.9 && secs <= 1.0 + 1e-9, "slice {k} lasts {secs} s");
            assert!(n > 40.0, "4 streams of ~55 ms send about 72 a second: {n}");
            assert!(s["time_to_first_token"]["p50"].as_f64().unwrap() >= 10.0);
        } else {
            assert!(
                secs < 0.05,
                "the last slice holds only the final tick's sends: {secs} s"
            );
        }
        counted += n;
    }
    assert_eq!(
        counted, res.report.completed as f64,
        "every request in one slice"
    );
    let csv = std::fs::read_to_string(dir.join("profile_export_ringperf_timeslices.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("Timeslice,Metric,Unit,Stat,Value"));
    assert!(csv.contains("\n2,Time to First Token,ms,p99,"), "{csv}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Time to first token per time slice"));
}

#[test]
fn workload_flags_that_cannot_hold_are_refused_before_anything_is_sent() {
    let _shared = support::shared();
    let s = sim("");
    let url = format!("--url http://{}", s.addr);
    for (flags, says) in [
        ("--prefill-concurrency 2", "needs --streaming"),
        (
            "--streaming --concurrency 4 --prefill-concurrency 8",
            "more than --concurrency 4",
        ),
        (
            "--streaming --prefill-concurrency 1 --shards 2",
            "--shards 2 is more than",
        ),
        (
            "--request-cancellation-rate 150",
            "a percentage from 0 to 100",
        ),
        (
            "--request-cancellation-delay 1",
            "needs --request-cancellation-rate",
        ),
        (
            "--benchmark-duration 100 --slice-duration 1ms",
            "at most 10000 slices",
        ),
    ] {
        let dir = artifact_dir("refused-workload");
        let Err(err) = profile(&format!("{url} {flags}"), &dir) else {
            panic!("{flags}: ran");
        };
        assert!(err.to_string().contains(says), "{flags}: {err}");
        assert!(!dir.exists(), "{flags}: nothing written");
    }
}

#[test]
fn a_warm_up_of_its_own_runs_its_load_first_and_stays_out_of_the_figures() {
    let _shared = support::shared();
    let s = sim("--ttft 10ms --itl 5ms");
    // Closed loop: 2 in flight for 1 s, then 8 in flight for 50 requests.
    let dir = artifact_dir("warmup-closed");
    let res = profile(
        &format!(
            "--url http://{} --streaming --concurrency 8 --request-count 50 \
             --output-tokens-mean 10 --warmup-concurrency 2 --warmup-duration 1",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    let reqs = requests(&dir);
    let phase = |q: &Value| q["benchmark_phase"].as_str().unwrap().to_string();
    let warm: Vec<&Value> = reqs.iter().filter(|q| phase(q) == "warmup").collect();
    let measured: Vec<&Value> = reqs.iter().filter(|q| phase(q) == "profiling").collect();
    assert_eq!(measured.len(), 50);
    // ~55 ms each, 2 at a time, for 1 s.
    assert!(
        (15..=45).contains(&warm.len()),
        "{} warm-up requests",
        warm.len()
    );
    let in_flight = |qs: &[&Value]| {
        let mut edges: Vec<(u64, i32)> = qs
            .iter()
            .flat_map(|q| {
                [
                    (q["start_ns"].as_u64().unwrap(), 1),
                    (q["end_ns"].as_u64().unwrap(), -1),
                ]
            })
            .collect();
        edges.sort();
        let (mut now, mut most) = (0, 0);
        for (_, d) in edges {
            now += d;
            most = most.max(now);
        }
        most
    };
    assert_eq!(in_flight(&warm), 2, "the warm-up's own concurrency");
    assert_eq!(in_flight(&measured), 8);
    let warm_end = warm
        .iter()
        .map(|q| q["end_ns"].as_u64().unwrap())
        .max()
        .unwrap();
    let first = measured
        .iter()
        .map(|q| q["start_ns"].as_u64().unwrap())
        .min()
        .unwrap();
    assert!(
        warm_end < first,
        "the warm-up ends before the measured phase starts"
    );
    let doc = json(&dir.join("profile_export_ringperf.json"));
    assert_eq!(
        doc["request_latency"]["count"], 50,
        "no warm-up request in a figure"
    );
    assert_eq!(doc["warmup"]["request_count"], warm.len());
    assert!(res.console.contains("Warm-up: "), "{}", res.console);

    // Open loop: 10 warm-up requests at 20/s, evenly spaced, then the measured rate.
    let dir = artifact_dir("warmup-open");
    profile(
        &format!(
            "--url http://{} --streaming --request-rate 100 --request-count 40 \
             --output-tokens-mean 4 --warmup-request-rate 20 --warmup-request-count 10 \
             --warmup-arrival-pattern constant",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    let reqs = requests(&dir);
    let mut sent: Vec<u64> = reqs
        .iter()
        .filter(|q| phase(q) == "warmup")
        .map(|q| q["intended_ns"].as_u64().unwrap())
        .collect();
    sent.sort();
    assert_eq!(sent.len(), 10);
    assert!(
        sent.windows(2).all(|w| w[1] - w[0] == 50_000_000),
        "{sent:?}"
    );
    assert_eq!(reqs.iter().filter(|q| phase(q) == "profiling").count(), 40);

    // A grace period cuts slow warm-up requests (0.9 s each) so that measuring starts on
    // time, and the cut does not stop the measured phase.
    let slow = sim("--ttft 10ms --itl 100ms");
    let dir = artifact_dir("warmup-grace");
    let res = profile(
        &format!(
            "--url http://{} --streaming --concurrency 2 --request-count 2 \
             --output-tokens-mean 10 --warmup-concurrency 4 --warmup-duration 0.2 \
             --warmup-grace-period 0.1 --warmup-request-count 1000",
            slow.addr
        ),
        &dir,
    )
    .unwrap();
    let reqs = requests(&dir);
    let cut = reqs
        .iter()
        .filter(|q| phase(q) == "warmup" && q["outcome"] == "cancelled")
        .count();
    assert_eq!(
        cut, 4,
        "the 4 warm-up requests in flight at the end of the grace period"
    );
    assert_eq!((res.report.completed, res.report.failed), (2, 0));
}

#[test]
fn warm_up_flags_that_cannot_hold_are_refused() {
    let _shared = support::shared();
    let s = sim("");
    let url = format!("--url http://{}", s.addr);
    for (flags, says) in [
        (
            "--warmup-concurrency 2",
            "--warmup-request-count (--num-warmup-sessions) or --warmup-duration",
        ),
        (
            "--warmup-request-count 3 --warmup-grace-period 1",
            "give it too",
        ),
        ("--warmup-duration 1 --warmup-concurrency 0", "at least 1"),
        (
            "--warmup-duration 1 --warmup-request-rate 0",
            "--warmup-request-rate 0.0",
        ),
    ] {
        let dir = artifact_dir("refused-warmup");
        let Err(err) = profile(&format!("{url} {flags}"), &dir) else {
            panic!("{flags}: ran");
        };
        assert!(err.to_string().contains(says), "{flags}: {err}");
    }
}

/// TTFT p50 (ms) by turn index, from the run's JSON.
fn ttft_by_turn(dir: &std::path::Path) -> Vec<f64> {
    json(&dir.join("profile_export_ringperf.json"))["time_to_first_token_by_turn"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["p50"].as_f64().unwrap())
        .collect()
}

#[test]
fn user_centric_users_come_back_at_their_gap_and_a_prefix_cache_speeds_their_later_turns() {
    let _shared = support::shared();
    // Prefill costs 20 µs a prompt token; with the cache, only what follows the longest
    // prefix seen before.
    let cached = sim("--ttft 20ms --itl 2ms --prefill-per-token 20us --prefix-cache");
    let flags = "--streaming --user-centric-rate 20 --num-users 10 --session-turns-mean 4 \
                 --shared-system-prompt-length 500 --user-context-prompt-length 2000 \
                 --synthetic-input-tokens-mean 30 --output-tokens-mean 10 --benchmark-duration 3";
    let dir = artifact_dir("user-centric");
    let res = profile(&format!("--url http://{} {flags}", cached.addr), &dir).unwrap();
    assert_eq!(res.report.failed, 0, "{}", res.console);
    let turns = ttft_by_turn(&dir);
    assert!(turns.len() >= 3, "{turns:?}");
    // Turn 0 prefills ~2,500 tokens (~50 ms more); later turns only their new message.
    assert!(turns[0] > 60.0 && turns[1] < 30.0, "TTFT by turn {turns:?}");
    assert!(
        res.report.prompt_cache.is_some_and(|(c, _)| c > 0),
        "the server's usage reports cached tokens"
    );
    assert!(
        !res.console.contains("[prefix_cache_hits]"),
        "hits are what sessions measure"
    );

    // Each user's turns are its gap apart: 10 users / 20 per second = 500 ms.
    let reqs = requests(&dir);
    let mut by_user: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
    for q in &reqs {
        let s = q["session"]["session_id"].as_u64().unwrap();
        by_user
            .entry(s)
            .or_default()
            .push(q["start_ns"].as_u64().unwrap());
    }
    let mut gaps = Vec::new();
    for starts in by_user.values_mut() {
        starts.sort();
        gaps.extend(starts.windows(2).map(|w| (w[1] - w[0]) as f64 / 1e6));
    }
    assert!(gaps.len() > 20, "{gaps:?}");
    assert!(
        gaps.iter().all(|g| (499.0..540.0).contains(g)),
        "every user's turns 500 ms apart: {gaps:?}"
    );
    // Together the users send 20 a second, from the start (they start staggered).
    let mut starts: Vec<u64> = reqs
        .iter()
        .map(|q| q["start_ns"].as_u64().unwrap())
        .collect();
    starts.sort();
    let span = (starts[starts.len() - 1] - starts[0]) as f64 / 1e9;
    let rate = (starts.len() - 1) as f64 / span;
    assert!((18.0..22.0).contains(&rate), "{rate} requests/s");
    let first_second = starts
        .iter()
        .filter(|t| **t < starts[0] + 500_000_000)
        .count();
    assert!(
        (9..=11).contains(&first_second),
        "10 users in the first gap: {first_second}"
    );

    // The control: the same run without the cache; later turns carry more history, so they
    // are no faster.
    let plain = sim("--ttft 20ms --itl 2ms --prefill-per-token 20us");
    let dir = artifact_dir("user-centric-no-cache");
    profile(&format!("--url http://{} {flags}", plain.addr), &dir).unwrap();
    let turns = ttft_by_turn(&dir);
    assert!(turns[1] >= turns[0], "no cache, no gain: {turns:?}");
}

#[test]
fn user_centric_flags_that_cannot_hold_are_refused() {
    let _shared = support::shared();
    let s = sim("");
    let url = format!("--url http://{}", s.addr);
    for (flags, says) in [
        (
            "--user-centric-rate 2 --num-users 4",
            "give --session-turns-mean",
        ),
        ("--num-users 4 --session-turns-mean 2", "go together"),
        (
            "--user-centric-rate 2 --num-users 4 --session-turns-mean 2 --request-rate 3",
            "drop --request-rate",
        ),
        (
            "--user-centric-rate 2 --num-users 4 --session-turns-mean 2 --concurrency 2",
            "below --num-users 4",
        ),
        (
            "--shared-system-prompt-length 100",
            "give --session-turns-mean",
        ),
    ] {
        let dir = artifact_dir("refused-users");
        let Err(err) = profile(&format!("{url} {flags}"), &dir) else {
            panic!("{flags}: ran");
        };
        assert!(err.to_string().contains(says), "{flags}: {err}");
    }
}

#[test]
fn every_request_carries_its_http_phases_and_the_json_summarises_them() {
    let _shared = support::shared();
    let s = sim("--ttft 20ms --itl 5ms");
    let dir = artifact_dir("http-trace");
    let res = profile(
        &format!(
            "--url http://{} --streaming --concurrency 4 --request-count 40 \
             --output-tokens-mean 10 --show-trace-timing",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    let reqs = requests(&dir);
    let connected = reqs
        .iter()
        .filter(|q| q["http"]["http_req_connecting"].as_f64().unwrap() > 0.0)
        .count();
    assert_eq!(
        connected, 4,
        "4 connections opened, reused by the other 36 (zeros)"
    );
    for q in &reqs {
        let h = &q["http"];
        let ms = |k: &str| h[k].as_f64().unwrap();
        assert_eq!(ms("http_req_tls_handshaking"), 0.0, "plain http");
        // The simulator sends its head with the first token: waiting is the TTFT.
        assert!((19.5..30.0).contains(&ms("http_req_waiting")), "{h}");
        let sum = ms("http_req_sending") + ms("http_req_waiting") + ms("http_req_receiving");
        assert!((sum - ms("http_req_duration")).abs() < 1e-3, "{h}");
        // Its tokens are due 20 ms, then 9 × 5 ms, after the request arrived: a late first
        // token shortens the receiving, not the whole. Never early; late by what a loaded
        // host holds the simulator's timers (75.2 ms seen in CI-like runs), and short of the
        // 85 ms that counting the waiting twice would give.
        let answer = ms("http_req_waiting") + ms("http_req_receiving");
        assert!((64.5..84.0).contains(&answer), "{h}");
    }
    let doc = json(&dir.join("profile_export_ringperf.json"));
    assert_eq!(doc["http_req_waiting"]["count"], 40);
    assert!(res.console.contains("HTTP phases (ms)"), "{}", res.console);
}

#[test]
fn several_urls_share_the_load_by_their_strategy_and_each_gets_its_figures() {
    let _shared = support::shared();
    let fast = sim("--ttft 10ms --itl 2ms");
    let slow = sim("--ttft 60ms --itl 2ms");
    let urls = format!("--url http://{} --url http://{}", fast.addr, slow.addr);
    let run = |strategy: &str, name: &str| {
        let dir = artifact_dir(name);
        let res = profile(
            &format!(
                "{urls} --url-strategy {strategy} --streaming --concurrency 8 \
                 --request-count 200 --output-tokens-mean 10"
            ),
            &dir,
        )
        .unwrap();
        assert_eq!(res.report.failed, 0, "{}", res.console);
        let doc = json(&dir.join("profile_export_ringperf.json"));
        let servers = doc["servers"].as_array().unwrap().clone();
        assert_eq!(servers.len(), 2);
        // Each server's figures are its own: the simulators' TTFTs.
        let ttft = |i: usize| servers[i]["time_to_first_token_p50_ms"].as_f64().unwrap();
        assert!((9.5..12.0).contains(&ttft(0)) && (59.5..63.0).contains(&ttft(1)));
        // Every request says where it went.
        let reqs = requests(&dir);
        let to_slow = reqs.iter().filter(|q| q["server"] == 1).count();
        assert_eq!(
            to_slow as u64,
            servers[1]["request_count"].as_u64().unwrap()
        );
        (
            servers[0]["request_count"].as_u64().unwrap(),
            servers[1]["request_count"].as_u64().unwrap(),
        )
    };
    // AIPerf's spelling of the default.
    assert_eq!(
        run("round_robin", "urls-rr"),
        (100, 100),
        "request i to server i mod 2"
    );
    let (f, s) = run("least-in-flight", "urls-lif");
    assert_eq!(f + s, 200);
    assert!(
        f > 2 * s,
        "the faster server frees its places sooner: {f} against {s}"
    );

    let dir = artifact_dir("urls-refused");
    let Err(e) = profile(
        &format!("--url http://{} --url https://{}", fast.addr, slow.addr),
        &dir,
    ) else {
        panic!("ran");
    };
    assert!(e.to_string().contains("same scheme, path prefix"), "{e}");
}

#[test]
fn connections_are_opened_from_each_local_address_in_turn() {
    let _shared = support::shared();
    let answer = support::capture("vllm/chat-stream.http");
    let server = support::fake_server(move |_, _| (answer.clone(), false));
    let dir = artifact_dir("local-address");
    let res = profile(
        &format!(
            "--url http://{} --no-preflight -m tiny-qwen3 --streaming --concurrency 4 \
             --request-count 8 --local-address 127.0.0.2 --local-address 127.0.0.3",
            server.addr
        ),
        &dir,
    )
    .unwrap();
    assert_eq!(
        (res.report.completed, res.report.failed),
        (8, 0),
        "{}",
        res.console
    );
    let mut from: Vec<String> = server
        .peers
        .lock()
        .unwrap()
        .iter()
        .map(|a| a.ip().to_string())
        .collect();
    from.sort();
    assert_eq!(from, ["127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"]);

    let Err(e) = profile(
        &format!("--url http://{} --local-address ::1", server.addr),
        &artifact_dir("local-address-v6"),
    ) else {
        panic!("ran");
    };
    assert!(e.to_string().contains("reached over IPv4"), "{e}");
}

#[test]
fn the_simulators_prefill_limit_spaces_first_tokens_and_raises_ttft() {
    let _shared = support::shared();
    // 2 prefills of 20 ms at a time: first tokens come at most 2 in any 19 ms.
    let firsts = |sim_flags: &str, name: &str| {
        let s = sim(sim_flags);
        let dir = artifact_dir(name);
        profile(
            &format!(
                "--url http://{} --streaming --concurrency 8 --request-count 40 \
                 --output-tokens-mean 10",
                s.addr
            ),
            &dir,
        )
        .unwrap();
        let mut t: Vec<u64> = requests(&dir)
            .iter()
            .map(|q| q["sim_first_sent_ns"].as_u64().unwrap())
            .collect();
        t.sort();
        t.windows(3).map(|w| w[2] - w[0]).min().unwrap()
    };
    let limited = firsts(
        "--ttft 20ms --itl 5ms --max-prefill 2 --shards 1",
        "sim-prefill",
    );
    assert!(limited >= 19_000_000, "3 first tokens within {limited} ns");
    let free = firsts("--ttft 20ms --itl 5ms --shards 1", "sim-no-prefill-limit");
    assert!(
        free < 1_000_000,
        "without the limit 8 start together: {free} ns"
    );
}

#[test]
fn a_warm_up_prefill_cap_below_the_shards_still_warms_every_shard() {
    let _shared = support::shared();
    let s = sim("--ttft 5ms --itl 1ms");
    let dir = artifact_dir("warmup-prefill");
    // 2,000 in flight would take two shards; a warm-up cap of 1 place allows one.
    let res = profile(
        &format!(
            "--url http://{} --streaming --concurrency 2000 --request-count 2000 \
             --output-tokens-mean 2 --warmup-request-count 20 --warmup-concurrency 4 \
             --warmup-prefill-concurrency 1 --cpus 0,1",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    assert_eq!(
        (res.report.completed, res.report.warmup),
        (2000, 20),
        "{}",
        res.console
    );
    let doc = json(&dir.join("profile_export_ringperf.json"));
    assert_eq!(doc["client_health"]["shards"].as_array().unwrap().len(), 1);
}
