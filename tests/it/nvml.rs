//! GPU telemetry through the real NVML path without a GPU: a stand-in `libnvidia-ml` (C,
//! `tests/data/nvml_standin.c`) is built at test time and loaded through
//! `$RINGPERF_NVML_LIBRARY`; the real sampler reads it through nvml-wrapper during
//! `ringperf profile --sim`, and the figures in the JSON and the CSV must be what the stand-in
//! scripted, in NVML's units (milliwatts, millijoules) turned into watts and joules.

use crate::support;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The stand-in, compiled once per test process.
fn standin() -> &'static PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/nvml_standin.c");
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("libnvidia-ml-standin-{}.so", std::process::id()));
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .expect("a C compiler (cc)");
        assert!(status.success(), "the stand-in does not compile");
        out
    })
}

/// What a run against the stand-in scripted by `script` (STANDIN_* variables) reported:
/// exit code, console, the JSON, the CSV and the HTML report together.
fn run(script: &[(&str, &str)]) -> (i32, String, serde_json::Value, String) {
    let dir = support::artifact_dir("nvml");
    let mut cmd = support::ringperf();
    cmd.env(ringperf::internals::gpu::LIBRARY_ENV, standin())
        .args([
            "profile",
            "--sim=--ttft 5ms --itl 5ms",
            "--request-count",
            "160",
        ])
        .args([
            "--concurrency",
            "8",
            "--output-tokens-mean",
            "20",
            "--no-progress",
        ])
        .args(["--artifact-dir", dir.to_str().unwrap()]);
    for (k, v) in script {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let console = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!console.contains("panicked"), "{console}");
    let doc = serde_json::from_slice(
        &std::fs::read(dir.join("profile_export_ringperf.json")).unwrap_or_default(),
    )
    .unwrap_or(serde_json::Value::Null);
    let csv = std::fs::read_to_string(dir.join("profile_export_ringperf.csv")).unwrap_or_default()
        + &std::fs::read_to_string(dir.join("report.html")).unwrap_or_default();
    (out.status.code().unwrap_or(-1), console, doc, csv)
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn near(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}

#[test]
fn steady_power_gives_its_watts_and_the_counters_joules() {
    let _shared = support::shared();
    let (code, console, doc, csv) = run(&[("STANDIN_POWER_MW", "300000")]);
    assert_eq!(code, 0, "{console}");
    let g = &doc["gpu_telemetry"]["gpus"][0];
    assert_eq!(g["name"], "NVIDIA Stand-in H200");
    assert_eq!(f(&g["power_w"]["avg"]), 300.0, "300,000 mW is 300 W");
    assert_eq!(g["energy_source"], "energy_counter");
    // The counter rose 300 J a second over the seconds the samples cover.
    let (e, s) = (f(&g["energy_j"]), f(&g["covered_s"]));
    assert!(near(e, 300.0 * s, 0.01), "{e} J in {s} s");
    assert_eq!(f(&g["gpu_util"]["avg"]), 87.0);
    assert_eq!(f(&g["mem_used_gib"]["avg"]), 100.0);
    assert_eq!(f(&g["sm_clock_mhz"]["avg"]), 1980.0);
    let t = &doc["gpu_telemetry"]["totals"];
    assert_eq!(f(&t["energy_j"]), e);
    let requests = f(&doc["request_count"]["avg"]);
    assert!(near(f(&t["joules_per_request"]) * requests, e, 1e-9));
    assert!(near(
        f(&t["joules_per_output_token"]) * f(&t["output_tokens_per_joule"]),
        1.0,
        1e-9
    ));
    assert!(csv.contains("GPU Power Avg (W),300.0000"), "{csv}");
    assert!(csv.contains(&format!("GPU Energy (J),{e:.4}")), "{csv}");
    assert!(
        console.contains("(energy counter), power avg 300 W"),
        "{console}"
    );
}

#[test]
fn a_ramp_a_wrapped_counter_and_an_unsupported_counter_keep_the_joules() {
    let _shared = support::shared();
    // 200 W rising 100 W a second: the counter is the exact integral, the power samples its
    // line; the two agree.
    let (code, console, doc, _) = run(&[
        ("STANDIN_POWER_MW", "200000"),
        ("STANDIN_POWER_RAMP_MW_S", "100000"),
    ]);
    assert_eq!(code, 0, "{console}");
    let g = &doc["gpu_telemetry"]["gpus"][0];
    let (e, s, p) = (
        f(&g["energy_j"]),
        f(&g["covered_s"]),
        f(&g["power_w"]["avg"]),
    );
    assert!(
        f(&g["power_w"]["max"]) > f(&g["power_w"]["p50"]) + 10.0,
        "{g}"
    );
    assert!(near(e, p * s, 0.03), "{e} J, {p} W × {s} s");

    // The counter restarts from 0 half a second after the start: the segment that went
    // backwards is filled from the power readings.
    let (code, console, doc, _) = run(&[
        ("STANDIN_POWER_MW", "300000"),
        ("STANDIN_ENERGY_WRAP_MJ", "5000000"),
        ("STANDIN_ENERGY_START_MJ", "4850000"),
    ]);
    assert_eq!(code, 0, "{console}");
    let g = &doc["gpu_telemetry"]["gpus"][0];
    assert_eq!(g["energy_source"], "energy_counter_patched", "{g}");
    assert!(g["counter_resets"].as_u64().unwrap() >= 1, "{g}");
    let (e, s) = (f(&g["energy_j"]), f(&g["covered_s"]));
    assert!(near(e, 300.0 * s, 0.02), "{e} J in {s} s");

    // No energy counter on this GPU: the integral of power.
    let (code, console, doc, _) = run(&[
        ("STANDIN_POWER_MW", "300000"),
        ("STANDIN_ENERGY", "not_supported"),
    ]);
    assert_eq!(code, 0, "{console}");
    let g = &doc["gpu_telemetry"]["gpus"][0];
    assert_eq!(g["energy_source"], "power_integral", "{g}");
    let (e, s) = (f(&g["energy_j"]), f(&g["covered_s"]));
    assert!(near(e, 300.0 * s, 0.02), "{e} J in {s} s");
}

#[test]
fn a_lost_gpu_and_a_refused_driver_are_one_line_and_never_a_zero() {
    let _shared = support::shared();
    // The GPU falls off the bus 700 ms after the sampler starts: the figures cover what it
    // reported, and the drop-out is said.
    let (code, console, doc, _) = run(&[
        ("STANDIN_POWER_MW", "300000"),
        ("STANDIN_LOST_AFTER_MS", "700"),
    ]);
    assert_eq!(code, 0, "{console}");
    let g = &doc["gpu_telemetry"]["gpus"][0];
    let dropped = &g["dropped_out"];
    assert!(dropped.is_array(), "{g}");
    assert!(console.contains("dropped out"), "{console}");
    let (e, s) = (f(&g["energy_j"]), f(&g["covered_s"]));
    assert!(s > 0.0 && near(e, 300.0 * s, 0.02), "{e} J in {s} s");
    // Its joules cover part of the window: no energy per token is made of them.
    assert!(doc["gpu_telemetry"]["totals"].is_null(), "{doc}");
    assert!(!console.contains("J/output token"), "{console}");

    // The driver refuses: one line, the run goes on, and no GPU figure is written at all.
    for (init, says) in [
        ("no_permission", "permission"),
        ("driver_not_loaded", "driver"),
    ] {
        let (code, console, doc, csv) = run(&[("STANDIN_INIT", init)]);
        assert_eq!(code, 0, "{console}");
        let lines: Vec<&str> = console
            .lines()
            .filter(|l| l.contains("GPU telemetry unavailable"))
            .collect();
        assert_eq!(lines.len(), 1, "{console}");
        assert!(lines[0].to_lowercase().contains(says), "{}", lines[0]);
        let t = &doc["gpu_telemetry"];
        assert!(t["unavailable"].is_string(), "{t}");
        assert!(t["totals"].is_null(), "{t}");
        assert!(
            !csv.contains("GPU Energy") && !csv.contains("GPU energy"),
            "{csv}"
        );
        assert!(
            csv.contains("GPU telemetry unavailable"),
            "the report says why"
        );
        assert!(!console.contains("GPU energy"), "{console}");
    }
}
