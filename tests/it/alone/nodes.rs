//! One load on many nodes, merged: against what one process measures.

use crate::nodes::{ids, json, merge, nodes_and_single};
use crate::support;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The merged percentiles against the nodes' own per-request values, all together: the
/// value of rank ⌈q·n⌉ (the histogram's rule), to the histogram's 3 significant digits. This
/// holds however noisy the host: it checks the merge, not the runs.
fn assert_exact(merged: &Value, dirs: &[PathBuf]) {
    for m in [
        "time_to_first_token",
        "inter_token_latency",
        "request_latency",
    ] {
        let mut values: Vec<f64> = dirs
            .iter()
            .flat_map(|d| {
                let text = std::fs::read_to_string(d.join("profile_export.jsonl")).unwrap();
                text.lines()
                    .filter_map(|l| {
                        let v: Value = serde_json::from_str(l).unwrap();
                        (v["metadata"]["benchmark_phase"] == "profiling")
                            .then(|| v["metrics"][m]["value"].as_f64())
                            .flatten()
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        values.sort_by(f64::total_cmp);
        assert_eq!(
            merged[m]["count"].as_u64(),
            Some(values.len() as u64),
            "{m}"
        );
        for (p, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
            let rank = ((q * values.len() as f64).ceil() as usize).max(1);
            let (got, want) = (merged[m][p].as_f64().unwrap(), values[rank - 1]);
            assert!(
                support::rel(got, want) < 0.002,
                "{m} {p}: merged {got}, values {want}"
            );
        }
    }
}

/// The merged figures against the single process's: counts exact, TTFT, ITL and request
/// latency p50 within 1%, p99 within 1% or 3 ms. A p99 is a run's few slowest values, and
/// one scheduling delay on a loaded 2-core host shows there: the nodes' ITL p99 was once
/// 102.07 ms against the single process's 100.23 ms (the values themselves are checked
/// exactly by `assert_exact`).
fn assert_equal(merged: &Value, single: &Value, console: &str) {
    for k in ["request_count", "error_request_count"] {
        assert_eq!(merged[k]["avg"], single[k]["avg"], "{k}\n{console}");
    }
    for m in [
        "time_to_first_token",
        "inter_token_latency",
        "request_latency",
    ] {
        for p in ["p50", "p99"] {
            let (a, b) = (
                merged[m][p].as_f64().unwrap(),
                single[m][p].as_f64().unwrap(),
            );
            let slack = if p == "p99" { 3.0 } else { 0.0 };
            assert!(
                (a - b).abs() < (0.01 * b).max(slack),
                "{m} {p}: merged {a}, single {b}\n{console}"
            );
        }
    }
}

/// Merges the node folders into `root/merged` and checks it against the nodes' own values and
/// the single process's run in `root/single`; returns the console, the merged and the single
/// JSON.
fn merge_and_compare(dirs: &[PathBuf], root: &Path) -> (String, Value, Value) {
    let (code, console, merged) = merge(dirs, &root.join("merged"));
    assert_eq!(code, 0, "{console}");
    assert_exact(&merged, dirs);
    let single = json(&root.join("single/profile_export_ringperf.json"));
    assert_equal(&merged, &single, &console);
    // Every distribution the single process reports, the merge reports, over as many values.
    for (k, v) in single.as_object().unwrap() {
        if let Some(n) = v.get("count") {
            assert_eq!(&merged[k]["count"], n, "{k}");
        }
    }
    // The same requests, by id, as the single process sent.
    assert_eq!(
        ids(&root.join("merged/profile_export.jsonl")),
        ids(&root.join("single/profile_export.jsonl"))
    );
    (console, merged, single)
}

#[test]
fn four_nodes_merge_to_what_one_process_measures_closed_loop() {
    let _alone = support::alone();
    let s = support::sim("--ttft 1s --itl 100ms");
    let url = format!("http://{}", s.addr);
    let root = support::artifact_dir("nodes-closed");
    let flags = "--streaming --concurrency 8 --request-count 24 --output-tokens-mean 8 \
                 --output-tokens-mean-deterministic --synthetic-input-tokens-mean 64";
    let dirs = nodes_and_single(&url, flags, 4, &root);

    // Each node ran its share: 6 requests, 2 in flight, ids i mod 4.
    for (i, d) in dirs.iter().enumerate() {
        let node = json(&d.join("node.json"));
        assert_eq!(
            (node["node"]["index"].as_u64(), node["completed"].as_u64()),
            (Some(i as u64), Some(6))
        );
        assert!(ids(&d.join("profile_export.jsonl"))
            .iter()
            .all(|id| u64::from_str_radix(id, 16).unwrap() % 4 == i as u64));
    }
    let (console, merged, single) = merge_and_compare(&dirs, &root);
    // Throughput over the union window: four nodes of 2 streams are one load of 8.
    let tput = |d: &Value| d["request_throughput"]["avg"].as_f64().unwrap();
    assert!(
        support::rel(tput(&merged), tput(&single)) < 0.05,
        "{console}"
    );
    assert_eq!(merged["merge"]["nodes_merged"], 4);
    assert!(
        merged["merge"]["start_skew_ms"].as_f64().unwrap() < 100.0,
        "{console}"
    );
    // The merged verdict follows the nodes': all kept up, or the ones that did not are named.
    let limited: Vec<String> = merged["client_health"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["client_limited"] == true)
        .map(|n| n["index"].to_string())
        .collect();
    if limited.is_empty() {
        assert!(console.contains("kept up on all 4 nodes"), "{console}");
    } else {
        let said = format!(
            "may have limited this load on node(s) {}",
            limited.join(", ")
        );
        assert!(console.contains(&said), "{console}");
    }

    // Merging the same folders again gives the same bytes.
    let again = root.join("merged-again");
    merge(&dirs, &again);
    for f in [
        "profile_export_ringperf.json",
        "profile_export_ringperf.csv",
        "histograms.hlog",
    ] {
        assert_eq!(
            std::fs::read(root.join("merged").join(f)).unwrap(),
            std::fs::read(again.join(f)).unwrap(),
            "{f} differs"
        );
    }

    // The per-second timeline counts every request once.
    let timeline = merged["merge"]["timeline"].as_array().unwrap();
    let per_second: u64 = timeline
        .iter()
        .map(|r| r["requests"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(per_second, 24, "{timeline:?}");

    // Failures add up by kind, and a node that started late is warned about: the same runs,
    // with node 1 and node 2 each given a failed request and node 3 a start 50 ms late.
    let doctored: Vec<PathBuf> = (0..4).map(|i| root.join(format!("doctored_{i}"))).collect();
    let last_start = dirs
        .iter()
        .map(|d| {
            json(&d.join("node.json"))["clock"]["realtime_ns"]
                .as_u64()
                .unwrap()
        })
        .max()
        .unwrap();
    for (i, (from, to)) in dirs.iter().zip(&doctored).enumerate() {
        std::fs::create_dir_all(to).unwrap();
        for f in support::files_under(from)
            .iter()
            .filter(|f| f.parent() == Some(from.as_path()))
        {
            std::fs::copy(f, to.join(f.file_name().unwrap())).unwrap();
        }
        let mut node = json(&to.join("node.json"));
        if i == 1 || i == 2 {
            node["failed"] = 1.into();
            node["errors"] = serde_json::json!([{"code": 500, "kind": "http_500",
                                                 "message": "HTTP 500", "count": 1}]);
        }
        if i == 3 {
            node["clock"]["realtime_ns"] = (last_start + 50_000_000).into();
        }
        // Nodes 0 and 1 on one GPU host, 2 and 3 on another, each sampling its GPUs.
        node["host"] = format!("gpu-host-{}", i / 2).into();
        std::fs::write(to.join("node.json"), serde_json::to_vec(&node).unwrap()).unwrap();
        let profile = to.join("profile_export_ringperf.json");
        let mut doc = json(&profile);
        doc["gpu_telemetry"] = serde_json::json!({"totals": {"energy_j": 100.0 + i as f64,
                                                             "avg_power_w": 50.0}});
        std::fs::write(&profile, serde_json::to_vec(&doc).unwrap()).unwrap();
    }
    let (code, console, doc) = merge(&doctored, &root.join("merged-doctored"));
    assert_eq!(code, 0, "{console}");
    assert_eq!(doc["error_request_count"]["avg"], 2.0);
    assert_eq!(
        doc["error_summary"][0]["count"], 2,
        "{}",
        doc["error_summary"]
    );
    assert!(doc["error_adjusted"]["request_latency"].is_object());
    assert!(console.contains("node 3 started 5"), "{console}");
    // Each host's GPUs once: nodes 0 and 2.
    let gpu = &doc["gpu_telemetry"]["totals"];
    assert_eq!(
        (gpu["energy_j"].as_f64(), gpu["avg_power_w"].as_f64()),
        (Some(202.0), Some(100.0))
    );
    assert_eq!(
        gpu["joules_per_output_token"].as_f64(),
        Some(202.0 / (24.0 * 8.0))
    );

    // A node that is missing, and one whose folder holds no finished run, are named, and the
    // merge exits 4 with what it could merge.
    std::fs::create_dir_all(root.join("crashed")).unwrap();
    let partial = [dirs[0].clone(), dirs[1].clone(), root.join("crashed")];
    let (code, console, doc) = merge(&partial, &root.join("merged-partial"));
    assert_eq!(code, 4, "{console}");
    let incomplete = doc["merge"]["incomplete"].to_string();
    for named in ["crashed", "node 2 of 4", "node 3 of 4"] {
        assert!(incomplete.contains(named), "{named}: {incomplete}");
        assert!(console.contains(named), "{named}: {console}");
    }
    assert_eq!(doc["request_count"]["avg"], 12.0);
}

#[test]
fn four_nodes_merge_to_what_one_process_measures_open_loop() {
    let _alone = support::alone();
    let s = support::sim("--ttft 1s --itl 100ms");
    let url = format!("http://{}", s.addr);
    let root = support::artifact_dir("nodes-open");
    let flags = "--streaming --request-rate 30 --request-count 60 --random-seed 11 \
                 --output-tokens-mean 8 --output-tokens-mean-deterministic \
                 --synthetic-input-tokens-mean 64";
    let dirs = nodes_and_single(&url, flags, 4, &root);
    let (console, merged, single) = merge_and_compare(&dirs, &root);
    // The nodes' arrivals together are the single schedule: the same rate on the wall clock.
    let rate = |d: &Value| d["scheduled_request_rate"]["avg"].as_f64().unwrap();
    assert!(
        support::rel(rate(&merged), rate(&single)) < 0.01,
        "{console}"
    );
}
