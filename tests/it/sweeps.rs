//! Sweep flags that cannot work, refused before anything runs. The sweeps themselves are in
//! `alone::sweeps`.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::support;

#[test]
fn sweep_flags_that_cannot_work_are_refused_before_anything_runs() {
    let _shared = support::shared();
    for (flags, says) in [
        (
            "--concurrency 1,2 --request-rate 5,10",
            "a sweep varies one flag",
        ),
        ("--request-rate 5,inf", "positive, finite"),
        ("--concurrency 1..4096+1", "more than 256"),
        ("--concurrency 4 --num-profile-runs 0", "from 1 to 100"),
        (
            "--concurrency 4 --num-profile-runs 2 --confidence-level 95",
            "between 0 and 1",
        ),
        ("--search max-concurrency", "give them"),
        (
            "--search max-rate --goodput ttft:5 --request-rate 1,2",
            "give no list",
        ),
        (
            "--search max-concurrency --goodput ttft:5 --search-range 9..3",
            "from a positive load",
        ),
        (
            "--search max-concurrency --goodput ttft:5 --search-range x",
            "give LO..HI",
        ),
        (
            "--search max-concurrency --goodput ttft:5 --slo-attainment 2",
            "at most 1",
        ),
    ] {
        let argv: Vec<&str> = flags.split_whitespace().collect();
        let e = match <ringperf::cli::Cli as clap::Parser>::try_parse_from(
            ["ringperf", "profile"]
                .into_iter()
                .chain(argv.iter().copied()),
        ) {
            Err(e) => e.to_string(),
            Ok(_) => support::profile_args(&argv)
                .sweep_spec()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default(),
        };
        assert!(e.contains(says), "{flags}: {e}");
    }
    let dir = support::artifact_dir("resume-alone");
    let e = ringperf::app::profile(
        &support::profile_args(&["--sim", "--resume", "--artifact-dir", dir.to_str().unwrap()]),
        Arc::new(AtomicBool::new(false)),
        false,
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("--resume continues a sweep"), "{e}");
}
