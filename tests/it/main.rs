//! ringperf's integration tests, in one binary (it links the crate once): real sockets on
//! loopback, the real simulator, real captures, real TLS with certificates made at test time.
//!
//! By theme: `protocol` (real vLLM and llama.cpp captures at every byte split), `e2e` (the
//! simulator over loopback), `faults`, `cli` (the binary as a user runs it), `tls`,
//! `open_loop`, `datasets`, `endpoints`, `sessions`, `telemetry`, `sweeps` (sweeps, repeats,
//! the knee), `nodes` (one load on many nodes, merged), `browser` (the reports in headless
//! Chromium), `dashboard` (the live view on a pseudo-terminal), `layers` (the import rule).
//! The tests that assert timings or load the CPUs on purpose are in `alone`, by the same
//! themes (and `placement` and `verdicts`, placement, starvation and the verdicts on them).
//! Each test first takes [`support::alone`] or [`support::shared`], so that nothing runs
//! beside a test that asserts timings.

mod alone;
mod browser;
mod cli;
mod dashboard;
mod datasets;
mod e2e;
mod endpoints;
mod failures;
mod faults;
mod fuzz_smoke;
mod hostile;
mod hub;
mod layers;
mod metrics;
mod nodes;
mod nvml;
mod open_loop;
mod porting;
mod preflight;
mod protocol;
mod real_servers;
mod sessions;
mod support;
mod sweeps;
mod telemetry;
mod tls;
mod traces;
mod workers;
mod workloads;

/// Every test's first statement takes a guard, so that a new test cannot run beside one that
/// asserts timings by forgetting it: `alone` in the `alone` module, whose tests sort first,
/// and `shared` everywhere else (an `alone` test among them would hold up the test threads
/// behind it).
#[test]
fn every_test_takes_a_guard() {
    let _shared = support::shared();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let mut counts = [0, 0];
    for (dir, guard, kind) in [
        (root.clone(), "let _shared = support::shared();", 0),
        (root.join("alone"), "let _alone = support::alone();", 1),
    ] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                continue;
            }
            let src = std::fs::read_to_string(&path).unwrap();
            let mut lines = src.lines().enumerate();
            while let Some((n, line)) = lines.next() {
                if line.trim() != "#[test]" {
                    continue;
                }
                counts[kind] += 1;
                let body = lines
                    .by_ref()
                    .skip_while(|(_, l)| !l.trim_end().ends_with('{'))
                    .nth(1)
                    .map_or("", |(_, l)| l.trim());
                assert!(
                    body.starts_with(guard),
                    "{}:{}: the test's first statement must be `{guard}`, found {body:?}",
                    path.display(),
                    n + 1
                );
            }
        }
    }
    assert!(
        counts[0] > 50 && counts[1] > 10,
        "found only {counts:?} tests (shared, alone) under {}",
        root.display()
    );
}
