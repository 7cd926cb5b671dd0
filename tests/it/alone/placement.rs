//! Placement and starvation end to end: a shard deliberately starved of CPU is reported as
//! such, with the requests it distorted; a busy CPU is left out of the placement; and the
//! simulator's self-check measures both sides of every request.

use crate::support;

use crate::support::{artifact_dir, profile, sim, Hogs};

fn two_cpus() -> Option<Vec<usize>> {
    let cpus = ringperf::internals::cpus::usable_cpus();
    if cpus.len() < 2 {
        eprintln!("skipped: needs two CPUs, this process may use {cpus:?}");
        return None;
    }
    Some(cpus)
}

#[test]
fn a_starved_shard_is_reported_with_the_requests_it_distorted() {
    let _alone = support::alone();
    let Some(cpus) = two_cpus() else { return };
    let (shard_cpu, sim_cpu) = (cpus[0], cpus[1]);
    let s = sim(&format!("--ttft 20ms --itl 2ms --cpus {sim_cpu}"));
    // Three busy threads share the shard's CPU: it runs a quarter of the time at best.
    let _hogs = Hogs::on(shard_cpu, 3);
    let dir = artifact_dir("starved");
    let res = profile(
        &format!(
            "--url http://{} --streaming --concurrency 8 --request-count 120 --output-tokens-mean 40 --synthetic-input-tokens-mean 32 --num-dataset-entries 8 --shards 1 --cpus {shard_cpu}",
            s.addr
        ),
        &dir,
    )
    .expect("the run completes");
    let r = &res.report;
    assert_eq!(r.completed, 120, "{}", res.console);
    let h = &r.health;
    let shard = &h.shards[0];
    assert_eq!(shard.cpu, Some(shard_cpu));
    assert!(
        shard.run_queue_wait.unwrap() > 0.05,
        "waited {:?}\n{}",
        shard.run_queue_wait,
        res.console
    );
    assert!(shard.starved_requests > 12, "{}", res.console);
    assert!(
        shard.moves.is_empty(),
        "--cpus pins it: reported, not moved"
    );
    assert!(h.distorted.is_some(), "{}", res.console);
    assert!(
        h.verdict
            .starts_with("the client distorted these results: shard 0 (CPU"),
        "{}",
        h.verdict
    );
    assert!(
        h.verdict.contains("pinned there by --cpus"),
        "{}",
        h.verdict
    );
    // Next to the numbers, in the JSON, and per request.
    let table = res.console.find('┏').unwrap();
    assert!(
        res.console[..table].contains("CLIENT-DISTORTED"),
        "{}",
        res.console
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("profile_export_ringperf.json")).unwrap())
            .unwrap();
    assert_eq!(doc["client_distorted"], true);
    assert!(doc["client_health"]["distorted"]["reasons"][0]
        .as_str()
        .unwrap()
        .contains("waited for a CPU"));
    let starved = std::fs::read_to_string(dir.join("profile_export.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| l.contains(r#""client_starved":true"#))
        .count() as u64;
    assert_eq!(starved, shard.starved_requests);
}

/// Plans a run against `url` and places its shards, without sending anything.
fn placement_for(url: &str) -> ringperf::internals::engine::placement::Placement {
    let args = support::profile_args(&[
        "--url",
        url,
        "--concurrency",
        "4",
        "--synthetic-input-tokens-mean",
        "8",
        "--num-dataset-entries",
        "1",
    ]);
    let plan = args.plan().expect("plan");
    ringperf::internals::engine::place(&plan, &[]).expect("placement")
}

#[test]
fn the_placement_leaves_a_busy_cpu_out() {
    let _alone = support::alone();
    let Some(cpus) = two_cpus() else { return };
    let _hogs = Hogs::on(cpus[0], 1);
    // A server on another host (TEST-NET-3, RFC 5737: nothing is sent there, placing only
    // looks at this host): one shard, pinned to the quiet CPU.
    let p = placement_for("http://203.0.113.7:8000");
    assert_eq!(
        p.mode,
        ringperf::internals::engine::placement::Mode::PerCore,
        "{p:?}"
    );
    assert!(!p.quiet.contains(&cpus[0]), "{p:?}");
    assert_eq!(p.shards.len(), 1);
    assert_ne!(p.shards[0].core(), Some(cpus[0]), "{p:?}");
    // A server on this host: the shard may move (it is not pinned next to the server), and
    // the busy CPU is still not a quiet one.
    let s = sim("--ttft 5ms --itl 5ms");
    let p = placement_for(&format!("http://{}", s.addr));
    assert_eq!(
        p.mode,
        ringperf::internals::engine::placement::Mode::Shared,
        "{p:?}"
    );
    assert!(!p.quiet.contains(&cpus[0]), "{p:?}");
    assert_eq!(p.shards[0].core(), None, "{p:?}");
}

#[test]
fn the_simulator_self_check_measures_both_sides_of_every_request() {
    let _alone = support::alone();
    let dir = artifact_dir("self-check");
    let res = profile(
        "--sim --streaming --concurrency 16 --warmup-request-count 16 --request-count 96 --output-tokens-mean 16 --synthetic-input-tokens-mean 32 --num-dataset-entries 16",
        &dir,
    )
    .expect("the run completes");
    let r = &res.report;
    let c = &r.health.self_check;
    assert_eq!(c.total.count(), 96, "{}", res.console);
    assert_eq!(c.send.count(), 96);
    // Generous bounds for a loaded 2-core CI machine; the load bench reports the real figures.
    assert!(c.total.percentile(50.0) < 2_000_000, "{}", res.console);
    let seen = c
        .server_in_flight
        .expect("the in-process simulator is probed");
    assert!((12.0..=16.5).contains(&seen), "{seen}\n{}", res.console);
    assert_eq!(c.asked, Some(16));
    let held = r.health.held.expect("closed loop");
    assert!((12.0..=16.0).contains(&held.mean), "{held:?}");
    // Each measured request's start is the kernel's transmit stamp, before the simulator's
    // arrival stamp.
    for rec in r.records.iter().filter(|x| x.is_measured_ok()) {
        assert_eq!(
            rec.start_source,
            ringperf::record::StartSource::KernelTx,
            "{rec:?}"
        );
        let arrived = rec.sim_arrived_ns.expect("echoed by the simulator");
        assert!(arrived + 50_000 >= rec.start_ns, "{rec:?}");
        assert!(rec.dispatch_delay().is_some() || rec.due_ns.is_none());
    }
    let jsonl = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    assert!(jsonl.contains(r#""start_source":"kernel_tx""#));
}

#[test]
fn without_kernel_stamps_every_event_is_read_and_timed_when_read() {
    let _alone = support::alone();
    let dir = artifact_dir("no-stamps");
    let res = profile(
        "--sim --streaming --no-kernel-timestamps --concurrency 8 --request-count 48 --output-tokens-mean 12 --output-tokens-stddev 0 --synthetic-input-tokens-mean 32 --num-dataset-entries 8",
        &dir,
    )
    .expect("the run completes");
    let r = &res.report;
    assert_eq!(r.completed, 48, "{}", res.console);
    for rec in r.records.iter().filter(|x| x.is_measured_ok()) {
        assert_eq!(
            rec.start_source,
            ringperf::record::StartSource::Write,
            "{rec:?}"
        );
        assert_eq!(rec.osl, Some(12), "{rec:?}");
        // Every content event was read: the first, then one gap per later event.
        assert_eq!(rec.chunk_gaps_ns.len(), 11, "{rec:?}");
        let first = rec.first_content_ns.expect("a first token");
        assert!(first > rec.start_ns, "{rec:?}");
        assert!(rec.last_content_ns.expect("a last token") >= first);
    }
}
