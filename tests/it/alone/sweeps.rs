//! Sweeps and repeated runs against the in-process simulator: a folder per point, the summary
//! read back from them, the knee where the simulator's batch fills, the search for the
//! highest concurrency within an SLO, Ctrl-C mid-sweep, the aggregate over repeated runs and
//! the comparison of sweeps.

use crate::support;
use ringperf::app::{sweep, SweepResult};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Runs `profile --sim=SIM FLAGS --artifact-dir DIR` in this process.
fn run_sweep(sim: &str, flags: &str, dir: &Path, stop: Arc<AtomicBool>) -> SweepResult {
    let sim = format!("--sim={sim}");
    let mut argv: Vec<&str> = vec![&sim];
    argv.extend(flags.split_whitespace());
    argv.extend(["--artifact-dir", dir.to_str().unwrap()]);
    sweep(&support::profile_args(&argv), stop, false).expect("the sweep runs")
}

fn csv_rows(path: &Path) -> Vec<csv::StringRecord> {
    let mut r = csv::Reader::from_path(path).unwrap();
    r.records().map(|x| x.unwrap()).collect()
}

/// A page that loads nothing: no script, stylesheet, image, frame or font from anywhere (its
/// one script is inline), and links only to pages beside it.
fn assert_self_contained(html: &str) {
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<script").count(), 1);
    assert!(html.contains("<script>"));
    for bad in [
        "<link",
        "<img",
        "<iframe",
        "src=",
        "url(",
        "@import",
        "href=\"http",
        "href=\"/",
    ] {
        assert!(!html.contains(bad), "{bad} in the page");
    }
}

#[test]
fn a_concurrency_sweep_writes_a_folder_per_point_a_summary_and_finds_the_batch_knee() {
    let _alone = support::alone();
    let dir = support::artifact_dir("sweep-knee");
    // The simulator serves 8 streams at a time, each as fast as alone (no ITL growth with the
    // batch); more wait in its queue, so throughput stops growing after 8.
    let sim = "--ttft 5ms --itl 2ms --max-batch 8 --itl-growth 0";
    let flags = "--streaming --output-tokens-mean 16 --request-count 48 --concurrency 2,4,8,32";
    let r = run_sweep(sim, flags, &dir, Arc::new(AtomicBool::new(false)));
    assert_eq!((r.ran, r.kept, r.rows.len()), (4, 0, 4));
    for c in [2, 4, 8, 32] {
        let point = dir.join(format!("concurrency_{c}"));
        let doc: serde_json::Value = serde_json::from_slice(
            &std::fs::read(point.join("profile_export_ringperf.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(doc["input_config"]["load"]["concurrency"], c, "{c}");
        assert_eq!(doc["request_count"]["avg"], 48.0);
    }
    let rows = csv_rows(&dir.join("sweep_summary.csv"));
    let points: Vec<&str> = rows.iter().map(|r| &r[0]).collect();
    assert_eq!(
        points,
        [
            "concurrency_2",
            "concurrency_4",
            "concurrency_8",
            "concurrency_32"
        ]
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("sweep_summary.json")).unwrap()).unwrap();
    assert_eq!(summary["axis"], "concurrency");
    // The asked concurrency was held, and the knee is where the batch filled.
    for (row, c) in r.rows.iter().zip([2.0, 4.0, 8.0, 32.0]) {
        let held = row.get("in_flight_mean").unwrap();
        assert!((held - c).abs() / c < 0.1, "held {held} of {c}");
    }
    assert_eq!(summary["knee"]["at"], 8.0, "{summary}");
    let tput = |i: usize| r.rows[i].get("request_throughput").unwrap();
    assert!(tput(3) < tput(2) * 1.25, "{} vs {}", tput(3), tput(2));
    // Past the batch, requests queue: TTFT grows.
    let ttft = |i: usize| r.rows[i].get("ttft_p50_ms").unwrap();
    assert!(ttft(3) > ttft(2) * 2.0, "{} vs {}", ttft(3), ttft(2));

    // The report: one self-contained page, every chart inline, each point's page linked.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert_self_contained(&html);
    assert_eq!(
        html.matches("<svg").count(),
        6,
        "5 across points and the TTFT by point"
    );
    assert!(html.contains("knee at concurrency 8"));
    // Throughput carries each point's 95% interval as an error bar, and the knee is marked.
    let tput = std::fs::read_to_string(dir.join("plots/throughput_vs_load.svg")).unwrap();
    assert_eq!(tput.matches("<path d=\"M").count(), 4, "{tput}");
    assert!(tput.contains(">knee</text>"));
    for c in [2, 4, 8, 32] {
        assert!(html.contains(&format!("href=\"concurrency_{c}/report.html\"")));
        let page =
            std::fs::read_to_string(dir.join(format!("concurrency_{c}/report.html"))).unwrap();
        assert_self_contained(&page);
        // 8 charts, 5 of them over time with a zooming plot inside.
        assert_eq!(page.matches("<svg viewBox=").count(), 8);
        assert_eq!(page.matches("<svg class=\"plot\"").count(), 5);
        // The timeline draws every request: 48 bars to the first token.
        let tl = std::fs::read_to_string(dir.join(format!("concurrency_{c}/plots/timeline.svg")))
            .unwrap();
        let d = tl.split("<path d=\"").nth(1).unwrap();
        assert_eq!(d[..d.find('"').unwrap()].matches('M').count(), 48, "{tl}");
    }
    assert!(dir.join("plots/throughput_vs_load.svg").is_file());
    // `ringperf report DIR` rebuilds the same page from the artifacts alone.
    std::fs::remove_file(dir.join("report.html")).unwrap();
    std::fs::remove_dir_all(dir.join("plots")).unwrap();
    let cli = <ringperf::cli::Cli as clap::Parser>::try_parse_from([
        "ringperf",
        "report",
        dir.to_str().unwrap(),
    ])
    .unwrap();
    ringperf::app::run(cli, Arc::new(AtomicBool::new(false))).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("report.html")).unwrap(),
        html
    );

    // Resume: a point whose folder is gone is run again; the others are kept.
    std::fs::remove_dir_all(dir.join("concurrency_4")).unwrap();
    let again = run_sweep(
        sim,
        &format!("{flags} --resume"),
        &dir,
        Arc::new(AtomicBool::new(false)),
    );
    assert_eq!((again.ran, again.kept, again.rows.len()), (1, 3, 4));
    assert_eq!(csv_rows(&dir.join("sweep_summary.csv")).len(), 4);
    // What was kept reads the same as what was written (to the last bit a JSON float keeps).
    let (kept, first) = (&again.rows[2], &r.rows[2]);
    assert_eq!((kept.point, kept.runs), (first.point, first.runs));
    for (a, b) in kept.figures.iter().zip(&first.figures) {
        assert_eq!(a.is_some(), b.is_some());
        let (a, b) = (a.unwrap_or(0.0), b.unwrap_or(0.0));
        assert!((a - b).abs() <= 1e-12 * a.abs().max(1.0), "{a} vs {b}");
    }
}

#[test]
fn the_knee_is_the_simulators_batch_limit_in_a_sweep_and_in_a_staircase() {
    let _alone = support::alone();
    // A batch limit B with ITL growing with the batch: throughput still rises to B, then
    // stays flat while requests queue. With 8 tokens a request, the last doubling gains 53%
    // to 61% at B = 32 with growth 1, and 29% to 38% at B = 16 with growth 3: short of what
    // the old rule asked (half the proportional gain), which puts that knee at 4, two steps
    // early.
    // A host busy enough to stall the simulator makes it serve slower than told; the sweep
    // marks such points and leaves them out of the knee. Then the knee is asked again (at
    // most three sweeps); if every sweep met a stall, the knee must still not be early.
    for (b, growth) in [(32u32, 1.0), (16, 3.0)] {
        let sim = format!("--ttft 5ms --itl 2ms --max-batch {b} --itl-growth {growth}");
        let list = [b / 4, b / 2, b, 2 * b, 4 * b]
            .map(|c| c.to_string())
            .join(",");
        let mut clean = None;
        for attempt in 1..=3 {
            let dir = support::artifact_dir(&format!("knee-{b}-{attempt}"));
            let r = run_sweep(
                &sim,
                &format!(
                    "--streaming --output-tokens-mean 8 --request-count 256 --concurrency {list}"
                ),
                &dir,
                Arc::new(AtomicBool::new(false)),
            );
            let summary: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.join("sweep_summary.json")).unwrap())
                    .unwrap();
            let at = summary["knee"]["at"].as_f64();
            assert!(
                at.is_none_or(|at| at >= f64::from(b)),
                "B={b}: an early knee: {summary}"
            );
            if r.rows.iter().all(|row| !row.simulator_stalled) {
                clean = Some((r, summary));
                break;
            }
            eprintln!("B={b}, sweep {attempt}: the simulator stalled: {summary}");
        }
        let Some((r, summary)) = clean else {
            eprintln!("B={b}: the simulator stalled in three sweeps: too busy a host to test more");
            continue;
        };
        assert_eq!(summary["knee"]["at"], f64::from(b), "B={b}: {summary}");
        // Every point has its throughput interval, inside the figure's domain.
        for row in &r.rows {
            let i = row
                .interval("output_token_throughput")
                .expect("an interval");
            let t = row.get("output_token_throughput").unwrap();
            assert!(0.0 < i.lo && i.lo <= t && t <= i.hi, "{i:?} {t}");
            let p = row.interval("ttft_p99_ms").expect("a TTFT interval");
            assert!(p.lo > 0.0 && p.lo <= p.hi);
        }
        // The staircase through the same loads, one run, finds the same knee.
        let dir = support::artifact_dir(&format!("knee-stairs-{b}"));
        let sim_flag = format!("--sim={sim}");
        let conc = format!("{}..{}", b / 4, 4 * b);
        let mut argv = vec![sim_flag.as_str()];
        argv.extend([
            "--streaming",
            "--output-tokens-mean",
            "8",
            "--concurrency",
            &conc,
        ]);
        argv.extend(["--staircase", "1s", "--artifact-dir", dir.to_str().unwrap()]);
        ringperf::app::profile(
            &support::profile_args(&argv),
            Arc::new(AtomicBool::new(false)),
            false,
        )
        .expect("the staircase runs");
        let st: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("staircase.json")).unwrap()).unwrap();
        assert_eq!(st["knee"]["at"], f64::from(b), "B={b}: {st}");
        assert_eq!(st["knee_rule"], summary["knee_rule"]);
    }
}

#[test]
fn ctrl_c_mid_sweep_keeps_the_points_measured() {
    let _alone = support::alone();
    let dir = support::artifact_dir("sweep-stop");
    let stop = Arc::new(AtomicBool::new(false));
    // Press "Ctrl-C" once the first point's results are on disk.
    let watcher = {
        let (stop, first) = (
            stop.clone(),
            dir.join("concurrency_1/profile_export_ringperf.json"),
        );
        std::thread::spawn(move || {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while !first.exists() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            stop.store(true, Ordering::Relaxed);
        })
    };
    let r = run_sweep(
        "--ttft 5ms --itl 5ms",
        "--streaming --output-tokens-mean 50 --concurrency 1,2,4,8 \
         --benchmark-duration 2s --sweep-pause 1s",
        &dir,
        stop,
    );
    watcher.join().unwrap();
    assert!(
        !r.rows.is_empty() && r.rows.len() < 4,
        "{} rows",
        r.rows.len()
    );
    let rows = csv_rows(&dir.join("sweep_summary.csv"));
    assert_eq!(rows.len(), r.rows.len());
    assert_eq!(&rows[0][0], "concurrency_1");
    assert!(!dir.join("concurrency_8").exists());
}

#[test]
fn repeated_runs_write_each_run_and_an_aggregate_with_confidence_intervals() {
    let _alone = support::alone();
    let dir = support::artifact_dir("repeats");
    let r = run_sweep(
        "--ttft 10ms --itl 2ms",
        "--streaming --output-tokens-mean 8 --concurrency 2 \
         --request-count 12 --warmup-request-count 2 --num-profile-runs 3 --confidence-level 0.9",
        &dir,
        Arc::new(AtomicBool::new(false)),
    );
    assert_eq!((r.ran, r.rows.len(), r.rows[0].runs), (3, 1, 3));
    let mut ttft_p50 = Vec::new();
    for (i, warmup) in [(1, 2), (2, 0), (3, 0)] {
        let doc: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.join(format!(
                "profile_runs/run_{i:04}/profile_export_ringperf.json"
            )))
            .unwrap(),
        )
        .unwrap();
        // The server is warm after the first run: warm-up requests go before it only.
        assert_eq!(doc["warmup_request_count"], warmup, "run {i}");
        ttft_p50.push(doc["time_to_first_token"]["p50"].as_f64().unwrap());
    }
    let agg: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("aggregate/profile_export_ringperf_aggregate.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(agg["metadata"]["num_successful_runs"], 3);
    assert_eq!(agg["metadata"]["confidence_level"], 0.9);
    let m = &agg["metrics"]["time_to_first_token_p50"];
    let mean = ttft_p50.iter().sum::<f64>() / 3.0;
    assert!((m["mean"].as_f64().unwrap() - mean).abs() < 1e-9);
    // t(0.95, 2 df) = 2.919986.
    assert!((m["t_critical"].as_f64().unwrap() - 2.919_986).abs() < 1e-5);
    let (lo, hi) = (
        m["ci_low"].as_f64().unwrap(),
        m["ci_high"].as_f64().unwrap(),
    );
    assert!(lo <= mean && mean <= hi && hi - lo < 5.0, "{lo}..{hi}");
    assert!(
        std::fs::read_to_string(dir.join("aggregate/profile_export_ringperf_aggregate.csv"))
            .unwrap()
            .contains("\ntime_to_first_token_p50,ms,")
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert_self_contained(&html);
    assert!(html.contains("Over 3 runs (90% confidence)"));
    for i in 1..=3 {
        assert!(dir
            .join(format!("profile_runs/run_{i:04}/report.html"))
            .is_file());
    }
}

#[test]
fn a_search_finds_the_highest_concurrency_within_the_slo_past_the_simulators_batch() {
    let _alone = support::alone();
    let dir = support::artifact_dir("search");
    // 64 streams generate at once; past that, requests wait in the simulator's queue for a
    // place, and their TTFT grows with the queue.
    let r = run_sweep(
        "--ttft 5ms --itl 2ms --max-batch 64 --itl-growth 0",
        "--streaming --output-tokens-mean 16 --request-count 200 --search max-concurrency \
         --search-range 16..256 --goodput ttft:20 --slo-attainment 0.95",
        &dir,
        Arc::new(AtomicBool::new(false)),
    );
    let s = r.search.expect("a search result");
    let (best, missed) = (s.passed.unwrap(), s.failed.unwrap());
    assert!((32.0..128.0).contains(&best), "best {best}");
    assert!(missed > best && missed - best <= (best * 0.05).floor().max(1.0));
    // Every probe is a point of the summary, in load order, and the verdict agrees with it.
    let loads: Vec<f64> = r.rows.iter().map(|r| r.point.value).collect();
    assert!(loads.windows(2).all(|w| w[0] < w[1]), "{loads:?}");
    assert_eq!(&loads[..3], [16.0, 32.0, 64.0]);
    for row in &r.rows {
        let good = row.get("goodput_fraction").unwrap();
        assert_eq!(
            good >= 0.95,
            row.point.value <= best,
            "{} {good}",
            row.point.value
        );
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("sweep_summary.json")).unwrap()).unwrap();
    assert_eq!(summary["search"]["highest_passed"], best);
    assert_eq!(summary["search"]["lowest_missed"], missed);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains(&format!("is {best} ({missed} missed)")));
    // The charts mark the point the search found.
    assert!(html.contains(">highest within the SLO</text>"), "{html}");

    // The staircase: one run, concurrency doubling every second, finds the same knee within a
    // step, and stops once a step stops paying instead of climbing to the top.
    let dir = support::artifact_dir("staircase");
    let started = std::time::Instant::now();
    let mut argv = vec!["--sim=--ttft 5ms --itl 2ms --max-batch 64 --itl-growth 0"];
    argv.extend(
        "--streaming --output-tokens-mean 16 --concurrency 16..1024 --staircase 1s \
         --goodput ttft:20 --artifact-dir"
            .split_whitespace(),
    );
    argv.push(dir.to_str().unwrap());
    let res = ringperf::app::profile(
        &support::profile_args(&argv),
        Arc::new(AtomicBool::new(false)),
        false,
    )
    .expect("the staircase runs");
    let st: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("staircase.json")).unwrap()).unwrap();
    let steps = st["steps"].as_array().unwrap();
    let caps: Vec<f64> = steps
        .iter()
        .map(|s| s["concurrency"].as_f64().unwrap())
        .collect();
    assert_eq!(&caps[..3], [16.0, 32.0, 64.0], "{st}");
    assert!(caps.len() < 7, "it climbed every step: {caps:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(7));
    let within = st["highest_within_slo"].as_f64().unwrap();
    assert!(
        within <= best && best < 2.0 * within,
        "staircase {within}, search {best}"
    );
    assert_eq!(st["knee"]["at"], 64.0, "{st}");
    for s in steps {
        let (lo, hi) = (
            s["request_throughput_ci95"][0].as_f64().unwrap(),
            s["request_throughput_ci95"][1].as_f64().unwrap(),
        );
        let mid = s["request_throughput"].as_f64().unwrap();
        assert!(lo <= mid * 1.001 && mid <= hi * 1.001, "{s}");
    }
    assert_eq!(res.report.errors.len(), 0);
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(page.contains("<h2>Staircase</h2>"));
}

#[test]
fn an_automatic_sweep_runs_serial_saturated_and_rates_between() {
    let _alone = support::alone();
    let dir = support::artifact_dir("auto-sweep");
    let r = run_sweep(
        "--ttft 5ms --itl 2ms --max-batch 16",
        "--streaming --output-tokens-mean 8 --request-count 120 --sweep auto --sweep-points 5 \
         --concurrency 32 --arrival constant",
        &dir,
        Arc::new(AtomicBool::new(false)),
    );
    let auto = r.auto.expect("the automatic sweep's findings");
    let a = &auto["auto"];
    let (low, high) = (
        a["serial_request_throughput"].as_f64().unwrap(),
        a["saturated_request_throughput"].as_f64().unwrap(),
    );
    // 16 streams at a time against 1: far more throughput when saturated.
    assert!(high > 4.0 * low, "{low} {high}");
    let rates: Vec<f64> = a["rates_run"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    // GuideLLM's spacing: three rates above the serial throughput, the last at the saturated
    // one; the sweep runs them in turn (the last may be left out when the one before already
    // over-saturated the server).
    let planned: Vec<f64> = a["rates_planned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(planned.len(), 3, "{auto}");
    assert!(support::rel(planned[2], high) < 0.01, "{planned:?} {high}");
    assert!(
        support::rel(planned[0] - low, (high - low) / 3.0) < 0.02,
        "{planned:?}"
    );
    assert!(rates.len() >= 2 && planned.starts_with(&rates), "{auto}");
    assert!(rates.windows(2).all(|w| w[0] < w[1]));
    for name in ["concurrency_1", "concurrency_32"]
        .into_iter()
        .map(String::from)
        .chain(rates.iter().map(|x| format!("request_rate_{x}")))
    {
        assert!(
            dir.join(&name)
                .join("profile_export_ringperf.json")
                .is_file(),
            "{name}"
        );
    }
    // The rates between run uncapped, each near its asked rate.
    for row in r
        .rows
        .iter()
        .filter(|r| r.point.value != 1.0 && r.point.value != 32.0)
    {
        let achieved = row.get("request_throughput").unwrap();
        assert!(
            achieved > 0.7 * row.point.value,
            "{achieved} of {}",
            row.point.value
        );
    }
    // In the order of the rate each reached: serial first, saturated last.
    assert_eq!(r.rows.first().unwrap().point.value, 1.0);
    assert_eq!(r.rows.last().unwrap().point.value, 32.0);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("sweep_summary.json")).unwrap()).unwrap();
    assert_eq!(summary["axis"], "mixed");
    assert_eq!(summary["points"].as_array().unwrap().len(), 2 + rates.len());
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("automatic sweep: serial"));
}

#[test]
fn compare_puts_the_sweep_with_the_larger_batch_on_the_pareto_front() {
    let _alone = support::alone();
    let root = support::artifact_dir("compare");
    let flags = "--streaming --output-tokens-mean 16 --request-count 48 --concurrency 2,16";
    // The same server model but for its batch limit: at concurrency 16 the small batch
    // queues three quarters of the streams.
    let (small, large) = (root.join("batch4"), root.join("batch16"));
    let stop = || Arc::new(AtomicBool::new(false));
    run_sweep(
        "--ttft 5ms --itl 5ms --max-batch 4 --itl-growth 0",
        flags,
        &small,
        stop(),
    );
    run_sweep(
        "--ttft 5ms --itl 5ms --max-batch 16 --itl-growth 0",
        flags,
        &large,
        stop(),
    );

    let out_dir = root.join("out");
    let out = support::ringperf()
        .arg("compare")
        .args([&small, &large])
        .args(["--label", "max-batch 4", "--label", "max-batch 16"])
        .arg("--artifact-dir")
        .arg(&out_dir)
        .output()
        .unwrap();
    let console = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{console}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(console.contains("baseline max-batch 4"), "{console}");

    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("compare.json")).unwrap()).unwrap();
    let front = doc["pareto_fronts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["y"] == "ttft_p99_ms")
        .unwrap();
    let on = |source: &str, point: &str| {
        front["points"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["source"] == source && p["point"] == point)
    };
    assert!(on("max-batch 16", "concurrency_16"), "{front}");
    assert!(!on("max-batch 4", "concurrency_16"), "{front}");
    let top = front["points"].as_array().unwrap().last().unwrap();
    assert_eq!(top["source"], "max-batch 16", "{front}");

    // At concurrency 16 the larger batch makes about four times the tokens: a significant
    // change, and TTFT p99 falls.
    let line = |figure: &str| {
        doc["comparisons"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["point"] == "concurrency_16" && l["figure"] == figure)
            .unwrap()
            .clone()
    };
    let tput = line("output_token_throughput");
    assert!(tput["change_pct"][0].as_f64().unwrap() > 100.0, "{tput}");
    assert_eq!(tput["significant"][0], true, "{tput}");
    let ttft = line("ttft_p99_ms");
    assert!(ttft["change_pct"][0].as_f64().unwrap() < -30.0, "{ttft}");

    let csv = csv_rows(&out_dir.join("compare.csv"));
    assert!(csv
        .iter()
        .any(|r| &r[0] == "concurrency_2" && &r[1] == "ttft_p50_ms" && &r[2] == "max-batch 16"));
    let html = std::fs::read_to_string(out_dir.join("compare.html")).unwrap();
    assert_self_contained(&html);
    assert!(html.contains("TTFT p99 (ms) against output tokens/s"));
    assert!(out_dir.join("plots/pareto_ttft_p99_ms.svg").is_file());

    // One clear line for what cannot be compared.
    let bad = support::ringperf()
        .arg("compare")
        .args([&small, &large])
        .args(["--label", "only one", "--artifact-dir"])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--label was given 1 times for 2 folders")
    );
    let empty = root.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let bad = support::ringperf()
        .arg("compare")
        .arg(&small)
        .arg(&empty)
        .arg("--artifact-dir")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no ringperf run"));
}
