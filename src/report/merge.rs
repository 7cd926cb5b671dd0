//! `ringperf merge`: the runs of one load split across nodes (`--node-count`), reported as
//! one run. Distributions merge exactly from each node's HdrHistograms (percentiles to the
//! histograms' 3 significant digits; means and deviations exact from the moments), counters
//! add up, throughputs use the union of the measured windows on the wall clock, and the
//! per-request exports are concatenated. A node that is missing or failed is named, never
//! left out silently. A folder of sweep points merges point by point.

use crate::warning::{Code, Warning};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use serde_json::{json, Value};

use super::export::{self, Times};
use super::node::{self, NodeFile};
use super::{Beside, Report, Tally};
use crate::stats::{empty_histogram, Dist};

/// Start skew between nodes above which the merge warns (ns).
pub const SKEW_LIMIT_NS: u64 = 10_000_000;

/// Why a merge could not be made, or why a node's run could not be read (such a node is
/// named in the merged report as incomplete).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No folder was given.
    #[error("merge: give the node folders to merge")]
    NoFolders,
    /// A path given is no folder.
    #[error("{}: not a folder", .0.display())]
    NotAFolder(PathBuf),
    /// A file or folder could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// What was read.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The merged results could not be written.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// Where.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A node's folder holds no `node.json`: the node failed or did not finish.
    #[error("{}: no {}: the node failed or did not finish", .0.display(), node::NODE_JSON)]
    Unfinished(PathBuf),
    /// A `node.json` that does not parse.
    #[error("{}: {source}", path.display())]
    NodeFile {
        /// The file.
        path: PathBuf,
        /// Why it does not parse.
        source: serde_json::Error,
    },
    /// A `node.json` written by another version of ringperf.
    #[error("{}: schema {found:?}, this ringperf reads {:?}", dir.display(), node::SCHEMA)]
    Schema {
        /// The node's folder.
        dir: PathBuf,
        /// The schema it holds.
        found: String,
    },
    /// A histogram log that does not decode.
    #[error("{}: {why}", path.display())]
    Log {
        /// The log.
        path: PathBuf,
        /// What is wrong with it.
        why: LogWhy,
    },
    /// A metric whose histogram and moments count different values.
    #[error("{}: {tag}: the histogram holds another count than the moments", dir.display())]
    Moments {
        /// The node's folder.
        dir: PathBuf,
        /// The metric.
        tag: String,
    },
    /// No node's run could be read: each reason.
    #[error("nothing to merge: {}", reasons(.0))]
    Nothing(Vec<String>),
    /// Runs made as parts of loads split into different numbers of nodes.
    #[error("{} ran as one of {count} nodes, {} as one of {first_count}: these are not one load", dir.display(), first.display())]
    NodeCounts {
        /// The node that differs.
        dir: PathBuf,
        /// Its node count.
        count: u64,
        /// The first node.
        first: PathBuf,
        /// The first node's count.
        first_count: u64,
    },
    /// Two runs made as the same node.
    #[error("{} and {} are both node {index}", a.display(), b.display())]
    SameNode {
        /// One run.
        a: PathBuf,
        /// The other.
        b: PathBuf,
        /// Their node index.
        index: u64,
    },
    /// Runs made with other flags.
    #[error("{} ran other flags than {} (input_config differs beyond the node's place): these are not one load", dir.display(), first.display())]
    OtherFlags {
        /// The node that differs.
        dir: PathBuf,
        /// The first node.
        first: PathBuf,
    },
}

/// What is wrong with a histogram log (the HdrHistogram crate's errors say what only in
/// their `Debug` form).
#[derive(Debug, thiserror::Error)]
pub enum LogWhy {
    /// Not the interval log format.
    #[error("not an HdrHistogram log ({0:?})")]
    NotLog(hdrhistogram::serialization::interval_log::LogIteratorError),
    /// A histogram that is not base64.
    #[error("a histogram is not base64: {0}")]
    NotBase64(#[source] base64::DecodeError),
    /// A histogram that does not decode.
    #[error("a histogram does not decode: {0:?}")]
    NotHistogram(hdrhistogram::serialization::DeserializeError),
}

/// Why nothing could be merged: each node's reason, or that no folder was given.
fn reasons(why: &[String]) -> String {
    if why.is_empty() {
        "no folder given".to_string()
    } else {
        why.join("; ")
    }
}

/// What a merge wrote.
#[derive(Debug)]
pub struct Merged {
    /// The console text (tables and node lines).
    pub console: String,
    /// Nodes missing or failed, one line each, over every point.
    pub incomplete: Vec<String>,
}

/// One node's run, read back.
struct NodeRun {
    dir: PathBuf,
    file: NodeFile,
    profile: Value,
    hists: BTreeMap<String, Histogram<u32>>,
    /// (Unix ns of the interval's start, tag, histogram).
    timeline: Vec<(u64, String, Histogram<u32>)>,
}

/// A log's histograms: (Unix ns of the interval's start, tag, histogram).
fn read_log(path: &Path) -> Result<Vec<(u64, String, Histogram<u32>)>, Error> {
    use base64::Engine;
    let bytes = std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |why| Error::Log {
        path: path.to_path_buf(),
        why,
    };
    let mut base = 0u64;
    let mut out = Vec::new();
    for entry in IntervalLogIterator::new(&bytes) {
        match entry.map_err(|e| bad(LogWhy::NotLog(e)))? {
            LogEntry::StartTime(t) => base = t.as_nanos() as u64,
            LogEntry::BaseTime(_) => {}
            LogEntry::Interval(h) => {
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(h.encoded_histogram())
                    .map_err(|e| bad(LogWhy::NotBase64(e)))?;
                let hist: Histogram<u32> = Deserializer::new()
                    .deserialize(&mut raw.as_slice())
                    .map_err(|e| bad(LogWhy::NotHistogram(e)))?;
                let tag = h.tag().map(|t| t.as_str().to_string()).unwrap_or_default();
                out.push((base + h.start_timestamp().as_nanos() as u64, tag, hist));
            }
        }
    }
    Ok(out)
}

fn read_node(dir: &Path) -> Result<NodeRun, Error> {
    let path = dir.join(node::NODE_JSON);
    let file: NodeFile = match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b).map_err(|source| Error::NodeFile { path, source })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::Unfinished(dir.to_path_buf()))
        }
        Err(source) => return Err(Error::Read { path, source }),
    };
    if file.schema != node::SCHEMA {
        return Err(Error::Schema {
            dir: dir.to_path_buf(),
            found: file.schema,
        });
    }
    let profile =
        super::sweep::read_json(&dir.join(super::sweep::PROFILE_JSON)).map_err(|source| {
            Error::Read {
                path: dir.to_path_buf(),
                source,
            }
        })?;
    let mut hists = BTreeMap::new();
    for (_, tag, h) in read_log(&dir.join(node::HISTOGRAMS))? {
        hists.insert(tag, h);
    }
    let timeline = read_log(&dir.join(node::TIMELINE))?;
    Ok(NodeRun {
        dir: dir.to_path_buf(),
        file,
        profile,
        hists,
        timeline,
    })
}

/// One node's tally, on the wall clock: its counters, and each metric's histogram rebuilt
/// with its exact moments.
fn node_tally(n: &NodeRun) -> Result<Tally, Error> {
    let mut t = Tally {
        tx_ns: n.file.tx_unix_ns,
        ty_ns: n.file.ty_unix_ns,
        counts: n.file.counts.clone(),
        ..Tally::default()
    };
    [t.shared.events, t.shared.of_events, t.shared.first_tokens] = n.file.shared_reads;
    for (tag, h) in &n.hists {
        let Some(m) = n.file.moments.get(tag) else {
            continue;
        };
        let d = Dist::from_parts(h, m).ok_or_else(|| Error::Moments {
            dir: n.dir.clone(),
            tag: tag.clone(),
        })?;
        match tag.as_str() {
            "client_added_delay" => t.client_delay = d,
            "arrival_to_record_delay" => t.record_lag = d,
            "shared_read_wait" => t.shared.wait = d,
            "prefill_wait" => t.prefill_wait = d,
            tag => {
                if let Some(name) = crate::record::HTTP_PHASES.iter().find(|p| **p == tag) {
                    t.http_trace.push((name, d));
                } else if let Some(slot) = t.metrics.by_tag(tag) {
                    *slot = d;
                }
            }
        }
    }
    Ok(t)
}

/// One line per node for the console and the JSON.
fn node_json(n: &NodeRun, first_start: u64) -> Value {
    let h = n
        .profile
        .get("client_health")
        .cloned()
        .unwrap_or(Value::Null);
    json!({
        "index": n.file.node.index,
        "dir": n.dir.display().to_string(),
        "host": n.file.host,
        "start_time": crate::clock::iso8601(n.file.clock.realtime_ns as f64 / 1e9),
        "start_skew_ms": (n.file.clock.realtime_ns - first_start) as f64 / 1e6,
        "server_date": n.file.server_date,
        "request_count": n.file.counts.completed,
        "error_request_count": n.file.counts.failed,
        "was_cancelled": n.file.counts.cancelled,
        "client_distorted": n.profile.get("client_distorted"),
        "client_limited": h.get("limited"),
        "verdict": h.get("verdict"),
        "shards": h.get("shards").map_or(0, |s| s.as_array().map_or(0, Vec::len)),
        "peak_rss_mb": h.get("peak_rss_mb"),
        "held_in_flight": h.pointer("/held_in_flight/mean"),
        "client_added_delay_p99_us": h.pointer("/client_added_delay/p99"),
        "cpu_us_per_event": h
            .get("shards")
            .and_then(Value::as_array)
            .and_then(|s| s.iter().filter_map(|s| s["cpu_us_per_event"].as_f64()).reduce(f64::max)),
        "gpu_totals": n.profile.pointer("/gpu_telemetry/totals"),
    })
}

/// The client's memory over every node: peak RSS added, and per stream held.
fn client_memory(nodes: &[Value]) -> Value {
    let sum = |k: &str| nodes.iter().filter_map(|n| n[k].as_f64()).sum::<f64>();
    let (rss, held) = (sum("peak_rss_mb"), sum("held_in_flight"));
    json!({
        "peak_rss_mb_sum": rss,
        "streams_held": held,
        "kb_per_stream": (held > 0.0).then(|| rss * 1e3 / held),
    })
}

/// The input configuration of the whole load as `n` ran it, without its own place.
fn whole_config(n: &NodeRun) -> Value {
    let mut c = n
        .profile
        .get("input_config")
        .cloned()
        .unwrap_or(Value::Null);
    if let Some(load) = c.get_mut("load").and_then(Value::as_object_mut) {
        load.remove("nodes");
    }
    c
}

/// Merges the node folders `dirs` (one run each) into `out`. Returns the console text and
/// the nodes that are missing or failed.
fn merge_run(dirs: &[PathBuf], out: &Path, title: &str) -> Result<Merged, Error> {
    let mut nodes = Vec::new();
    let mut incomplete = Vec::new();
    for d in dirs {
        match read_node(d) {
            Ok(n) => nodes.push(n),
            Err(why) => incomplete.push(why.to_string()),
        }
    }
    nodes.sort_by_key(|n| n.file.node.index);
    let Some(first) = nodes.first() else {
        return Err(Error::Nothing(incomplete));
    };
    let count = first.file.node.count;
    for n in &nodes {
        if n.file.node.count != count {
            return Err(Error::NodeCounts {
                dir: n.dir.clone(),
                count: n.file.node.count,
                first: first.dir.clone(),
                first_count: count,
            });
        }
    }
    for w in nodes.windows(2) {
        if w[0].file.node.index == w[1].file.node.index {
            return Err(Error::SameNode {
                a: w[0].dir.clone(),
                b: w[1].dir.clone(),
                index: w[0].file.node.index,
            });
        }
    }
    let config = whole_config(first);
    // What makes it one load: the server, the requests and the load; folders, engines and
    // resolved addresses may differ from node to node.
    let load_of = |c: &Value| ["target", "workload", "load"].map(|k| c.get(k).cloned());
    for n in &nodes[1..] {
        if load_of(&whole_config(n)) != load_of(&config) {
            return Err(Error::OtherFlags {
                dir: n.dir.clone(),
                first: first.dir.clone(),
            });
        }
    }
    let present: Vec<u64> = nodes.iter().map(|n| n.file.node.index).collect();
    for i in (0..count).filter(|i| !present.contains(i)) {
        incomplete.push(format!(
            "node {i} of {count}: no run of it was given or it failed"
        ));
    }
    // The first node's start: every node's skew and second are counted from it.
    let first_start = nodes
        .iter()
        .map(|n| n.file.clock.realtime_ns)
        .min()
        .unwrap_or(0);
    let report = build(&nodes, &incomplete, first_start)?;
    let times = Times {
        start: first_start as f64 / 1e9,
        end: nodes.iter().map(|n| n.file.ty_unix_ns).max().unwrap_or(0) as f64 / 1e9,
        startup_s: None,
        startup_from: "",
    };
    let mut doc = export::profile_json(&report, &config, &times);
    let node_list: Vec<Value> = nodes.iter().map(|n| node_json(n, first_start)).collect();
    let skew = nodes
        .iter()
        .map(|n| n.file.clock.realtime_ns - first_start)
        .max()
        .unwrap_or(0);
    doc["client_health"] = json!({
        "verdict": report.health.verdict,
        "distorted": report.health.distorted,
        "limited": report.health.limited,
        "warnings": report.warnings,
        "memory": client_memory(&node_list),
        "nodes": node_list,
    });
    if let Some(gpu) = merged_gpu(&nodes, report.output_tokens, report.completed) {
        doc["gpu_telemetry"] = gpu;
    }
    let (timeline_rows, timeline) = merge_timeline(&nodes, first_start);
    doc["merge"] = json!({
        "node_count": count,
        "nodes_merged": nodes.len(),
        "incomplete": incomplete,
        "start_skew_ms": skew as f64 / 1e6,
        "percentile_method": "hdr: the nodes' HdrHistograms added (3 significant digits); \
                              avg and std exact",
        "timeline": timeline_rows,
    });
    write_all(&report, &doc, &nodes, out, &timeline, first_start).map_err(|source| {
        Error::Write {
            path: out.to_path_buf(),
            source,
        }
    })?;

    let mut console = super::console::table(&report, title);
    console.push_str(&format!(
        "Nodes: {} of {count} merged; start skew {:.3} ms\n",
        nodes.len(),
        skew as f64 / 1e6
    ));
    for n in &node_list {
        console.push_str(&format!(
            "  node {} ({}): {} requests, {} errors, started +{:.3} ms: {}\n",
            n["index"],
            n["host"].as_str().unwrap_or(""),
            n["request_count"],
            n["error_request_count"],
            n["start_skew_ms"].as_f64().unwrap_or(0.0),
            n["verdict"].as_str().unwrap_or("no verdict")
        ));
    }
    for i in &incomplete {
        console.push_str(&format!("  MISSING: {i}\n"));
    }
    for w in &report.warnings {
        console.push_str(&format!("WARNING: {w}\n"));
    }
    console.push_str(&super::console::verdict_lines(&report));
    Ok(Merged {
        console,
        incomplete,
    })
}

/// GPU energy and power of the nodes that sampled GPUs, added over distinct hosts (nodes on
/// one host sampled the same GPUs), each over its own node's measured window; per-token
/// figures over the whole load's tokens. `None` when no node sampled a GPU.
fn merged_gpu(nodes: &[NodeRun], output_tokens: u64, requests: u64) -> Option<Value> {
    let mut hosts = std::collections::BTreeSet::new();
    let (mut energy_j, mut power_w) = (0.0, 0.0);
    for n in nodes {
        let Some(t) = n
            .profile
            .pointer("/gpu_telemetry/totals")
            .filter(|t| t.is_object())
        else {
            continue;
        };
        if hosts.insert(n.file.host.clone()) {
            energy_j += t["energy_j"].as_f64().unwrap_or(0.0);
            power_w += t["avg_power_w"].as_f64().unwrap_or(0.0);
        }
    }
    if hosts.is_empty() {
        return None;
    }
    let totals =
        crate::gpu::window::GpuTotals::of(energy_j, power_w, output_tokens, requests, None);
    Some(json!({
        "hosts": hosts,
        "totals": totals,
        "method": "each host's GPUs once (the first node on it), over that node's window",
    }))
}

/// The whole load's report: the nodes' tallies added up.
fn build(nodes: &[NodeRun], incomplete: &[String], first_start: u64) -> Result<Report, Error> {
    let mut tally = Tally::default();
    for n in nodes {
        tally.merge(node_tally(n)?);
    }
    let mut warnings: Vec<Warning> = incomplete
        .iter()
        .map(|i| {
            Warning::new(
                Code::NodeMissingOrLate,
                format!("incomplete: {i}; the figures cover the other nodes only"),
            )
        })
        .collect();
    for f in nodes.iter().map(|n| &n.file) {
        let skew = f.clock.realtime_ns - first_start;
        if skew > SKEW_LIMIT_NS {
            warnings.push(Warning::new(
                Code::NodeMissingOrLate,
                format!(
                    "node {} started {:.1} ms after the first: its load did not overlap the \
                     others' in full (synchronize the clocks, e.g. with chrony, and give every \
                     node the same --start-at)",
                    f.node.index,
                    skew as f64 / 1e6
                ),
            ));
        }
    }
    let mut distorted = Vec::new();
    let mut limited = Vec::new();
    for n in nodes {
        let i = n.file.node.index;
        // The node's own lines, named by it.
        let lines = |pointer: &str| {
            n.profile
                .pointer(pointer)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(move |line| format!("node {i}: {line}"))
        };
        // The node's warnings, each with its code, named by the node.
        let theirs = n
            .profile
            .pointer("/client_health/warnings")
            .and_then(|w| serde_json::from_value::<Vec<Warning>>(w.clone()).ok())
            .unwrap_or_default();
        warnings.extend(theirs.into_iter().map(|w| Warning {
            message: format!("node {i}: {}", w.message),
            ..w
        }));
        distorted.extend(lines("/client_health/distorted/reasons"));
        if n.profile.pointer("/client_health/limited") == Some(&Value::Bool(true)) {
            limited.push(i);
        }
    }
    let verdict = match (limited.is_empty(), incomplete.is_empty()) {
        (true, true) => format!(
            "the client kept up on all {} nodes: these figures are the server's",
            nodes.len()
        ),
        (true, false) => format!(
            "the client kept up on the {} nodes merged, but the load is incomplete: {}",
            nodes.len(),
            incomplete.join("; ")
        ),
        (false, _) => format!(
            "the client may have limited this load on node(s) {}: read their verdicts below",
            limited
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let health = super::Health::merged(
        verdict,
        (!distorted.is_empty()).then_some(super::Distortion { reasons: distorted }),
        !limited.is_empty(),
    );
    Ok(tally.into_report(Beside::only(health, warnings)))
}

/// Per-second histograms: (second from the first node's start, tag) → histogram.
type Seconds = BTreeMap<(u64, String), Histogram<u32>>;

/// The nodes' per-second histograms added on the wall clock (each node's seconds placed by
/// its start), as JSON rows and as histograms for `timeline.hlog`.
fn merge_timeline(nodes: &[NodeRun], first_start: u64) -> (Vec<Value>, Seconds) {
    let mut merged = Seconds::new();
    for n in nodes {
        for (at, tag, h) in &n.timeline {
            // The nearest whole second from the first node's start.
            let sec = (at.saturating_sub(first_start) + 500_000_000) / 1_000_000_000;
            let slot = merged
                .entry((sec, tag.clone()))
                .or_insert_with(empty_histogram);
            let _ = slot.add(h);
        }
    }
    let mut rows: BTreeMap<u64, serde_json::Map<String, Value>> = BTreeMap::new();
    for ((sec, tag), h) in &merged {
        let row = rows.entry(*sec).or_default();
        row.insert("t_s".into(), json!(sec));
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1e6;
        match tag.as_str() {
            "request_latency" => {
                row.insert("requests".into(), json!(h.len()));
                row.insert("request_latency_p50_ms".into(), json!(ms(0.5)));
                row.insert("request_latency_p99_ms".into(), json!(ms(0.99)));
            }
            "time_to_first_token" => {
                row.insert("ttft_p50_ms".into(), json!(ms(0.5)));
                row.insert("ttft_p99_ms".into(), json!(ms(0.99)));
            }
            "inter_token_latency" => {
                row.insert("itl_p50_ms".into(), json!(ms(0.5)));
                row.insert("itl_p99_ms".into(), json!(ms(0.99)));
            }
            _ => {}
        }
    }
    (rows.into_values().map(Value::Object).collect(), merged)
}

/// Writes the merged artifacts: the JSON and CSV exports, every node's requests in one
/// `profile_export.jsonl` (node order), node 0's `inputs.json`, and the merged logs.
fn write_all(
    report: &Report,
    doc: &Value,
    nodes: &[NodeRun],
    out: &Path,
    timeline: &Seconds,
    first_start: u64,
) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let mut j = serde_json::to_vec_pretty(doc)?;
    j.push(b'\n');
    crate::artifact::write(&out.join(super::sweep::PROFILE_JSON), j)?;
    let csv = export::profile_csv(report).map_err(std::io::Error::other)?;
    crate::artifact::write(&out.join("profile_export_ringperf.csv"), csv)?;
    crate::artifact::write_with(&out.join("profile_export.jsonl"), |jsonl| {
        for n in nodes {
            match std::fs::File::open(n.dir.join("profile_export.jsonl")) {
                Ok(mut f) => {
                    std::io::copy(&mut f, jsonl)?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })?;
    if let Ok(inputs) = std::fs::read(nodes[0].dir.join("inputs.json")) {
        crate::artifact::write(&out.join("inputs.json"), inputs)?;
    }
    node::write_histograms(report, out, report.tx_ns)?;
    node::write_log(
        &out.join(node::TIMELINE),
        first_start,
        "ringperf merge: per second from the first node's start, every node's requests that \
         ended in it",
        |put| {
            for ((sec, tag), h) in timeline {
                put(*sec as f64, 1.0, tag, h)?;
            }
            Ok(())
        },
    )
}

/// Whether `dir` holds one run (its `node.json`), else the point folders of a sweep.
fn is_run(dir: &Path) -> bool {
    dir.join(node::NODE_JSON).exists() || dir.join(super::sweep::PROFILE_JSON).exists()
}

/// Merges `dirs` (one folder per node: each a run's, or each a sweep's) into `out`.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Merged, Error> {
    if dirs.is_empty() {
        return Err(Error::NoFolders);
    }
    // Folders of sweeps merge point by point: every point folder any node wrote.
    let mut points = std::collections::BTreeSet::new();
    for d in dirs {
        // A folder a node never wrote is that node's failure, named in the report; a path
        // that is no folder at all is a mistake in the command.
        if d.exists() && !d.is_dir() {
            return Err(Error::NotAFolder(d.clone()));
        }
        if !d.is_dir() || is_run(d) {
            continue;
        }
        let unreadable = |source| Error::Read {
            path: d.clone(),
            source,
        };
        for e in std::fs::read_dir(d).map_err(unreadable)? {
            let name = e
                .map_err(unreadable)?
                .file_name()
                .to_string_lossy()
                .into_owned();
            if super::sweep::point_of_dir(&name).is_some() {
                points.insert(name);
            }
        }
    }
    if points.is_empty() {
        return merge_run(dirs, out, "ringperf | merged");
    }
    let mut console = String::new();
    let mut incomplete = Vec::new();
    for p in &points {
        let node_dirs: Vec<PathBuf> = dirs.iter().map(|d| d.join(p)).collect();
        let m = merge_run(
            &node_dirs,
            &out.join(p),
            &format!("ringperf | merged | {p}"),
        )?;
        console.push_str(&m.console);
        incomplete.extend(m.incomplete.into_iter().map(|i| format!("{p}: {i}")));
    }
    let rows = super::sweep::read_sweep(out).map_err(|source| Error::Read {
        path: out.to_path_buf(),
        source,
    })?;
    super::sweep::write_summary(out, &rows, None).map_err(|source| Error::Write {
        path: out.join(super::sweep::SUMMARY_CSV),
        source,
    })?;
    console.push_str(&super::sweep::render(&rows));
    Ok(Merged {
        console,
        incomplete,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_logs_read_back_what_was_written() {
        let dir = std::env::temp_dir().join(format!("ringperf-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.hlog");
        let (mut a, mut b) = (empty_histogram(), empty_histogram());
        for v in 1..=100u64 {
            a.record(v * 1_000).unwrap();
            b.record(v * 7_000_000).unwrap();
        }
        let start = 1_796_139_657_250_000_000;
        node::write_log(&path, start, "a test", |put| {
            put(0.0, 1.0, "time_to_first_token", &a)?;
            put(3.0, 1.0, "request_latency", &b)
        })
        .unwrap();
        let back = read_log(&path).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(
            (back[0].0, back[0].1.as_str()),
            (start, "time_to_first_token")
        );
        assert_eq!(
            (back[1].0, back[1].1.as_str()),
            (start + 3_000_000_000, "request_latency")
        );
        assert_eq!((back[0].2.clone(), back[1].2.clone()), (a, b));
        // Each kind of bad log, named with its file.
        let why = |text: &str| {
            std::fs::write(&path, text).unwrap();
            match read_log(&path).unwrap_err() {
                Error::Log { path: p, why } if p == path => why,
                e => panic!("{e:?}"),
            }
        };
        let e = why("Tag=x,0.0,1.0,2.0,not base64!\n");
        assert!(matches!(e, LogWhy::NotBase64(_)), "{e:?}");
        let e = why("Tag=x,0.0,1.0,2.0,AAAA\n");
        assert!(matches!(e, LogWhy::NotHistogram(_)), "{e:?}");
        let e = why("not a log line\n");
        assert!(matches!(e, LogWhy::NotLog(_)), "{e:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
