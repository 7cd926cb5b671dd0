//! The client verdict, calibrated both ways: clean runs (a burst, a short run, an open loop,
//! a staircase with a gate, a run with CPU hiccups shorter than the gap between tokens) are
//! never called limited or distorted, and never fail a gate; a starved shard always is. Each
//! against the simulator with its stamps (judged by them) and without (judged as against a
//! real server, from the client's own evidence).

use std::time::Duration;

use crate::support::{self, artifact_dir, profile, sim, Hogs};

/// Runs `flags` against a simulator made with `sim_flags`, with and without its stamps, and
/// returns each run's result.
fn both(name: &str, sim_flags: &str, flags: &str) -> Vec<ringperf::app::ProfileResult> {
    ["", " --no-stamps"]
        .iter()
        .map(|extra| {
            let s = sim(&format!("{sim_flags}{extra}"));
            let dir = artifact_dir(name);
            profile(&format!("--url http://{} {flags}", s.addr), &dir)
                .unwrap_or_else(|e| panic!("{name}{extra}: {e}"))
        })
        .collect()
}

fn assert_clean(name: &str, runs: &[ringperf::app::ProfileResult]) {
    for (res, stamps) in runs.iter().zip(["stamped", "unstamped"]) {
        let h = &res.report.health;
        assert!(
            !h.limited && h.distorted.is_none(),
            "{name}, {stamps}: {}\n{}",
            h.verdict,
            res.console
        );
        for g in &res.gates {
            assert_eq!(g.failure, None, "{name}, {stamps}: gate {}", g.name);
        }
        assert_eq!(res.report.failed, 0, "{name}, {stamps}");
    }
}

#[test]
fn clean_runs_are_never_called_limited() {
    let _alone = support::alone();
    let gate = "--fail-on error_rate>0.5";
    // Every request at once, none refilled (vLLM's default load).
    let runs = both(
        "verdict-burst",
        "--ttft 20ms --itl 10ms",
        &format!("--streaming --concurrency 64 --request-count 64 --output-tokens-mean 32 {gate}"),
    );
    assert_clean("burst", &runs);
    // A short run, one request at a time. (Tokens 10 ms apart in every clean case: a busy
    // VM's hiccups of a few ms then merge no events, as they would with tokens 2 ms apart.)
    let runs = both(
        "verdict-short",
        "--ttft 10ms --itl 10ms",
        &format!("--streaming --request-count 5 --output-tokens-mean 8 {gate}"),
    );
    assert_clean("short", &runs);
    // An open loop.
    let runs = both(
        "verdict-open",
        "--ttft 10ms --itl 10ms",
        "--streaming --request-rate 100 --request-count 150 --output-tokens-mean 16",
    );
    assert_clean("open loop", &runs);
    // A staircase with a gate: judged against no single concurrency.
    let runs = both(
        "verdict-stairs",
        "--ttft 10ms --itl 10ms --max-batch 8",
        &format!("--streaming --concurrency 4..16 --staircase 1s --output-tokens-mean 16 {gate}"),
    );
    assert_clean("staircase", &runs);
    assert!(runs.iter().all(|r| r.report.health.held.is_none()));
}

#[test]
fn hiccups_shorter_than_the_gap_between_tokens_are_not_called_limited() {
    let _alone = support::alone();
    // Every CPU busy 3 ms of every 40 ms, beside tokens 10 ms apart.
    let _hogs: Vec<Hogs> = ringperf::internals::cpus::usable_cpus()
        .into_iter()
        .map(|c| Hogs::pulsed(c, 1, Duration::from_millis(3), Duration::from_millis(40)))
        .collect();
    let runs = both(
        "verdict-hiccups",
        "--ttft 20ms --itl 10ms",
        "--streaming --concurrency 16 --request-count 64 --output-tokens-mean 24 \
         --fail-on error_rate>0.5",
    );
    assert_clean("hiccups", &runs);
}

#[test]
fn a_starved_shard_is_always_called_distorted_with_or_without_the_simulators_stamps() {
    let _alone = support::alone();
    let cpus = ringperf::internals::cpus::usable_cpus();
    if cpus.len() < 2 {
        eprintln!("skipped: needs two CPUs, this process may use {cpus:?}");
        return;
    }
    let (shard_cpu, sim_cpu) = (cpus[0], cpus[1]);
    // Three busy threads share the shard's CPU: it runs a quarter of the time at best,
    // against tokens 2 ms apart.
    let _hogs = Hogs::on(shard_cpu, 3);
    let runs = both(
        "verdict-starved",
        &format!("--ttft 20ms --itl 2ms --cpus {sim_cpu}"),
        &format!(
            "--streaming --concurrency 8 --request-count 96 --output-tokens-mean 40 \
             --shards 1 --cpus {shard_cpu} --fail-on error_rate>0.5"
        ),
    );
    for (res, stamps) in runs.iter().zip(["stamped", "unstamped"]) {
        let h = &res.report.health;
        assert!(
            h.distorted.is_some() && h.limited,
            "{stamps}: {}\n{}",
            h.verdict,
            res.console
        );
        assert!(
            res.gates.iter().any(|g| g.failure.is_some()),
            "{stamps}: the client verdict fails the gates"
        );
    }
    // Without the simulator's stamps the evidence is the client's own: the events its late
    // reads merged, or the first tokens read with a later one, bounded.
    let v = &runs[1].report.health.verdict;
    assert!(
        v.contains("inter-chunk gaps") || v.contains("first token in one read"),
        "{v}"
    );
}

#[test]
fn the_simulator_takes_the_quietest_cpu_and_says_when_it_stalled() {
    let _alone = support::alone();
    let cpus = ringperf::internals::cpus::usable_cpus();
    if cpus.len() < 2 {
        eprintln!("skipped: needs two CPUs, this process may use {cpus:?}");
        return;
    }
    let (busy, quiet) = (cpus[0], cpus[1]);
    {
        // The first CPU is busy: the simulator goes to the other one, which the shards then
        // leave to it.
        let _hog = Hogs::on(busy, 1);
        let dir = artifact_dir("verdict-sim-place");
        let res = with_sim(
            "--ttft 5ms --itl 1ms",
            "--streaming --request-count 8 --output-tokens-mean 8",
            &dir,
        );
        let p = &res.report.health.placement;
        assert!(!p.candidates.contains(&quiet), "{p:?}");
    }
    // Three busy threads share the simulator's CPU: it writes its tokens late, and the run
    // says the simulator stalled, not that the client had headroom.
    let _hogs = Hogs::on(quiet, 3);
    let dir = artifact_dir("verdict-sim-stall");
    let res = with_sim(
        &format!("--ttft 5ms --itl 1ms --cpus {quiet}"),
        &format!(
            "--streaming --concurrency 8 --request-count 64 --output-tokens-mean 32 --cpus {busy}"
        ),
        &dir,
    );
    let h = &res.report.health;
    assert!(
        h.simulator_stalled.is_some() && h.limited,
        "{}",
        res.console
    );
    assert!(
        h.verdict.starts_with("the simulator stalled") || h.distorted.is_some(),
        "{}",
        h.verdict
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("profile_export_ringperf.json")).unwrap())
            .unwrap();
    assert!(doc["client_health"]["simulator_stalled"].is_string());
}

/// `profile --sim=SIM FLAGS` in this process.
fn with_sim(sim: &str, flags: &str, dir: &std::path::Path) -> ringperf::app::ProfileResult {
    let sim = format!("--sim={sim}");
    let mut argv = vec![sim.as_str()];
    argv.extend(flags.split_whitespace());
    argv.extend(["--artifact-dir", dir.to_str().unwrap()]);
    ringperf::app::profile(
        &support::profile_args(&argv),
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        false,
    )
    .expect("the run completes")
}
