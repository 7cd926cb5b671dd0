//! Multi-turn sessions: every turn carries the history with the server's real answers.

use crate::support;
use std::sync::{Arc, Mutex};

use crate::support::{artifact_dir, capture, fake_server, profile, sim};

#[test]
fn turns_carry_the_history_with_the_real_answers() {
    let _shared = support::shared();
    // A server that answers with vLLM's captured stream and keeps every request body.
    let bodies: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let seen = bodies.clone();
    let answer = capture("vllm/chat-stream.http");
    let server = fake_server(move |_, body| {
        seen.lock()
            .unwrap()
            .push(serde_json::from_slice(body).unwrap());
        (answer.clone(), false)
    });
    let dir = artifact_dir("sessions-history");
    let res = profile(
        &format!(
            "--url http://{} --no-preflight -m tiny-qwen3 --streaming --session-turns-mean 3 --concurrency 2 \
             --request-count 4 --synthetic-input-tokens-mean 20 --session-turn-delay 10ms",
            server.addr
        ),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!(
        (r.completed, r.failed),
        (12, 0),
        "4 sessions × 3 turns\n{}",
        res.console
    );
    let bodies = bodies.lock().unwrap();
    let turn3: Vec<&serde_json::Value> = bodies
        .iter()
        .filter(|b| b["messages"].as_array().unwrap().len() == 5)
        .collect();
    assert_eq!(turn3.len(), 4, "each session's third turn sends 5 messages");
    let text = serde_json::to_string(&turn3[0]["messages"][1]).unwrap();
    assert!(text.contains("\"role\":\"assistant\""));
    // The answer is the captured stream's text, decoded.
    assert!(text.contains("但不限于"), "{text}");
    // ISL grows by each answer's 16 tokens plus the next prompt.
    let mut by_session: std::collections::BTreeMap<u64, Vec<(u32, u32)>> = Default::default();
    for rec in &r.records {
        let (s, t) = rec.session.unwrap();
        by_session.entry(s).or_default().push((t, rec.isl.unwrap()));
    }
    for turns in by_session.values_mut() {
        turns.sort();
        assert!(
            turns[1].1 > turns[0].1 + 16 && turns[2].1 > turns[1].1 + 16,
            "{turns:?}"
        );
    }
    let inputs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("inputs.json")).unwrap()).unwrap();
    assert_eq!(inputs["data"][0]["payload"].as_array().unwrap().len(), 3);
}

#[test]
fn sessions_against_the_simulator() {
    let _shared = support::shared();
    let s = sim("--ttft 5ms --itl 2ms");
    let url = format!("http://{}", s.addr);
    let dir = artifact_dir("sessions-sim");
    let res = profile(
        &format!(
            "--url {url} --streaming --session-turns-mean 4 --session-turns-stddev 1 --concurrency 4 \
             --request-count 8 --output-tokens-mean 5"
        ),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!(r.failed, 0);
    assert!(r.completed >= 8 && r.completed <= 8 * 8, "{}", r.completed);
    let jsonl = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    assert!(jsonl.contains("\"session\":{\"session_id\""));
}

#[test]
fn sessions_start_on_an_open_loop_schedule_and_keep_their_turns() {
    let _shared = support::shared();
    let s = sim("--ttft 5ms --itl 2ms");
    let dir = artifact_dir("sessions-open-loop");
    let res = profile(
        &format!(
            "--url http://{} --streaming --request-rate 20 --arrival constant \
             --session-turns-mean 3 --request-count 8 --output-tokens-mean 4",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    assert_eq!(
        (res.report.completed, res.report.failed),
        (24, 0),
        "{}",
        res.console
    );
    let jsonl = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    let mut firsts: Vec<u64> = jsonl
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["metadata"].clone())
        .filter(|m| m["session"]["turn"] == 0)
        .map(|m| {
            m["intended_ns"]
                .as_u64()
                .expect("a session's start is scheduled")
        })
        .collect();
    firsts.sort();
    assert_eq!(firsts.len(), 8);
    // 20 sessions a second, evenly: one every 50 ms, whatever their turns take.
    assert!(
        firsts.windows(2).all(|w| w[1] - w[0] == 50_000_000),
        "{firsts:?}"
    );
}
