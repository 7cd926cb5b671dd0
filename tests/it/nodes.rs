//! One load split across nodes: four `ringperf profile --node-count 4` processes against one
//! simulator, started together with `--start-at`, then `ringperf merge`; the merged report
//! equals a single process running the whole load. Merging twice gives the same bytes; a
//! missing or failed node is named.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support;

fn ringperf() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ringperf"));
    c.env_remove("SLURM_PROCID")
        .env_remove("SLURM_NTASKS")
        .env_remove("JOB_COMPLETION_INDEX");
    c
}

fn run(c: &mut Command) -> (i32, String, String) {
    let out = c.output().unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(!e.contains("panicked"), "{e}");
    (out.status.code().unwrap_or(-1), o, e)
}

/// Runs `flags` as `n` node processes and as one process, all starting at the same instant
/// (the single process beside the nodes, so that both see the same host), each node into
/// `root/node_I` and the single process into `root/single`; returns the node folders.
pub(crate) fn nodes_and_single(url: &str, flags: &str, n: usize, root: &Path) -> Vec<PathBuf> {
    // Far enough ahead for every process to prepare first: five of them, each sending a
    // preflight request against a simulated TTFT of 1 s, were ready 2.2 to 2.4 s after they
    // started (a test build, 2 cores).
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        + 4.0;
    let start = |node: Option<usize>, dir: &Path| {
        let mut c = ringperf();
        c.args(["profile", "--no-progress", "--url", url])
            .args(flags.split_whitespace())
            .args(["--start-at", &format!("{at:.3}")])
            .args(["--artifact-dir", dir.to_str().unwrap()]);
        if let Some(i) = node {
            c.args([
                "--node-count",
                &n.to_string(),
                "--node-index",
                &i.to_string(),
            ]);
        }
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let dirs: Vec<PathBuf> = (0..n).map(|i| root.join(format!("node_{i}"))).collect();
    let mut children: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| start(Some(i), d))
        .collect();
    children.push(start(None, &root.join("single")));
    for c in children {
        let out = c.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
        assert!(out.status.success(), "a run failed: {err}");
    }
    dirs
}

pub(crate) fn merge(dirs: &[PathBuf], out: &Path) -> (i32, String, Value) {
    let mut c = ringperf();
    c.arg("merge")
        .args(dirs)
        .args(["--artifact-dir", out.to_str().unwrap()]);
    let (code, stdout, stderr) = run(&mut c);
    let doc = std::fs::read(out.join("profile_export_ringperf.json"))
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap_or_else(|_| panic!("no merged JSON: {stderr}"));
    (code, stdout, doc)
}

pub(crate) fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

pub(crate) fn ids(path: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["metadata"]["x_request_id"].as_str().unwrap().to_string()
        })
        .collect();
    ids.sort();
    ids
}

#[test]
fn splits_that_cannot_be_one_load_are_refused() {
    let _shared = support::shared();
    let root = support::artifact_dir("nodes-refused");
    let refused = |extra: &[&str]| {
        let mut c = ringperf();
        c.args(["profile", "--sim", "--no-progress", "--artifact-dir"])
            .arg(root.to_str().unwrap())
            .args(extra);
        let (code, _, err) = run(&mut c);
        assert_eq!(code, 2, "{extra:?}: {err}");
        err
    };
    for (flags, says) in [
        (
            "--node-count 4 --node-index 1 --concurrency 2",
            "leaves a node without load",
        ),
        ("--node-count 4", "--node-index"),
        (
            "--node-count 2 --node-index 0 --concurrency 2,4",
            "--start-at and --benchmark-duration",
        ),
        (
            "--node-count 2 --node-index 0 --concurrency 8..32 --staircase 1s",
            "--staircase",
        ),
        ("--start-at soon", "RFC 3339"),
    ] {
        let e = refused(&flags.split_whitespace().collect::<Vec<_>>());
        assert!(e.contains(says), "{flags}: {e}");
    }
}

#[test]
fn two_nodes_sweeping_keep_one_timetable_and_merge_point_by_point() {
    let _shared = support::shared();
    let s = support::sim("--ttft 20ms --itl 5ms");
    let url = format!("http://{}", s.addr);
    let root = support::artifact_dir("nodes-sweep");
    let flags = "--streaming --concurrency 2,4 --benchmark-duration 1s --grace-period 1s \
                 --output-tokens-mean 8 --synthetic-input-tokens-mean 32";
    let dirs = nodes_and_single(&url, flags, 2, &root);
    // Both nodes started each point on the timetable, not when their last point ended.
    let start = |d: &Path, p: &str| {
        json(&d.join(p).join("node.json"))["clock"]["realtime_ns"]
            .as_u64()
            .unwrap() as f64
            / 1e9
    };
    // The timetable puts them 7 s apart; back to back they would be about 2 s apart. A
    // point's stamp is taken once it is prepared, which a loaded 2-core CI host delayed by
    // 0.8 s once: the bound leaves room for that and still tells the two apart.
    let gap = start(&dirs[0], "concurrency_4") - start(&dirs[0], "concurrency_2");
    assert!((gap - 7.0).abs() < 1.5, "points {gap} s apart");
    assert!((start(&dirs[1], "concurrency_4") - start(&dirs[0], "concurrency_4")).abs() < 0.1);
    let out = root.join("merged");
    let mut c = ringperf();
    c.arg("merge")
        .args(&dirs)
        .args(["--artifact-dir", out.to_str().unwrap()]);
    let (code, console, err) = run(&mut c);
    assert_eq!(code, 0, "{err}");
    let summary = json(&out.join("sweep_summary.json"));
    let points = summary["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{summary}");
    for c in [2, 4] {
        let doc = json(&out.join(format!("concurrency_{c}/profile_export_ringperf.json")));
        assert_eq!(doc["merge"]["nodes_merged"], 2, "{console}");
        assert_eq!(doc["input_config"]["load"]["concurrency"], c);
    }
}
