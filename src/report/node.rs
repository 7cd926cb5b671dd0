//! What each run writes so that runs on many hosts merge into one exact report: its
//! histograms in HdrHistogram's V2 encoding, inside the standard HdrHistogram interval-log
//! format (`histograms.hlog`: one histogram per metric over the measured window;
//! `timeline.hlog`: per-second histograms of the requests that ended in each second), and
//! `node.json`: the counters, the exact moments and the clock evidence that place the run on
//! the wall clock. Any HdrHistogram log reader opens the logs.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::console::dist_rows;
use super::{Counts, Report};
use crate::clock::{Anchor, ServerDate};
use crate::plan::nodes::Nodes;
use crate::stats::{empty_histogram, Moments, MAX_VALUE};

/// The counters and clock evidence of one run.
pub const NODE_JSON: &str = "node.json";
/// Every metric's histogram over the measured window.
pub const HISTOGRAMS: &str = "histograms.hlog";
/// Per-second histograms.
pub const TIMELINE: &str = "timeline.hlog";
/// `node.json`'s schema.
pub const SCHEMA: &str = "ringperf-node/1";

/// The metrics of the per-second timeline.
pub const TIMELINE_TAGS: [&str; 4] = [
    "time_to_first_token",
    "inter_token_latency",
    "request_latency",
    "output_sequence_length",
];

/// What a run writes to `node.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeFile {
    /// [`SCHEMA`].
    pub schema: String,
    /// This run's share of the load.
    pub node: Nodes,
    /// The host it ran on.
    pub host: String,
    /// Clocks at the run's start.
    pub clock: Anchor,
    /// The server's `Date`, when it sent one.
    pub server_date: Option<ServerDate>,
    /// Measured window on the wall clock (Unix ns): first measured send, last content event.
    pub tx_unix_ns: u64,
    /// See `tx_unix_ns`.
    pub ty_unix_ns: u64,
    /// The counters (sent and intended times on the wall clock).
    #[serde(flatten)]
    pub counts: Counts,
    /// Content events carrying a later event's stamp, content events, and first tokens among
    /// them ([`super::SharedReads`]).
    #[serde(default)]
    pub shared_reads: [u64; 3],
    /// Each metric's exact moments, by tag.
    pub moments: BTreeMap<String, Moments>,
}

/// How many times, and the first and last (Unix ns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// Times.
    pub count: u64,
    /// Earliest.
    pub first: u64,
    /// Latest.
    pub last: u64,
}

impl Span {
    /// How many `times`, and the first and last of them.
    pub(crate) fn of(times: impl Iterator<Item = u64>) -> Span {
        let mut s = Span {
            count: 0,
            first: u64::MAX,
            last: 0,
        };
        for t in times {
            s.count += 1;
            s.first = s.first.min(t);
            s.last = s.last.max(t);
        }
        s
    }

    /// Both spans as one; an empty span (no times) adds nothing.
    pub fn join(self, o: Span) -> Span {
        match (self.count, o.count) {
            (0, _) => return o,
            (_, 0) => return self,
            _ => {}
        }
        Span {
            count: self.count + o.count,
            first: self.first.min(o.first),
            last: self.last.max(o.last),
        }
    }

    /// `(count − 1) / (last − first)` per second: the rate of these times (0 for fewer than 2).
    pub fn rate(&self) -> f64 {
        if self.count < 2 || self.last <= self.first {
            return 0.0;
        }
        (self.count - 1) as f64 / ((self.last - self.first) as f64 / 1e9)
    }
}

/// This host's name, for the merged report's node list.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The metrics written to `histograms.hlog`: the report's distributions and the client's
/// own delays, by tag.
fn tagged(r: &Report) -> Vec<(&'static str, &crate::stats::Dist)> {
    let mut all: Vec<_> = dist_rows(r)
        .into_iter()
        .map(|(t, _, d, _)| (t, d))
        .collect();
    all.extend(r.http_trace.iter().map(|(t, d)| (*t, d)));
    all.push(("client_added_delay", &r.client_delay));
    all.push(("arrival_to_record_delay", &r.record_lag));
    all.push(("shared_read_wait", &r.shared.wait));
    all
}

fn log_error(e: impl std::fmt::Debug) -> std::io::Error {
    std::io::Error::other(format!("{e:?}"))
}

/// One histogram into an interval log: start and length (s from the log's start), tag.
pub(crate) type Put<'p> = dyn FnMut(f64, f64, &str, &Histogram<u32>) -> std::io::Result<()> + 'p;

/// Writes an interval log starting at Unix ns `start_unix_ns`; `fill` puts its histograms.
pub(crate) fn write_log(
    path: &Path,
    start_unix_ns: u64,
    comment: &str,
    fill: impl FnOnce(&mut Put<'_>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut out = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    let mut w = IntervalLogWriterBuilder::new()
        .add_comment(comment)
        .with_start_time(UNIX_EPOCH + Duration::from_nanos(start_unix_ns))
        .begin_log_with(&mut out, &mut serializer)?;
    fill(&mut |at, len, tag, h| {
        w.write_histogram(
            h,
            Duration::from_secs_f64(at.max(0.0)),
            Duration::from_secs_f64(len.max(0.0)),
            Tag::new(tag),
        )
        .map_err(log_error)
    })?;
    drop(w);
    crate::artifact::write(path, out)
}

/// Writes `node.json`, `histograms.hlog` and `timeline.hlog` for `r` into `dir`. `clock` was
/// read at the run's start.
pub(crate) fn write(
    r: &Report,
    dir: &Path,
    nodes: Nodes,
    clock: &Anchor,
    server_date: Option<ServerDate>,
) -> std::io::Result<()> {
    let tagged = tagged(r);
    let file = NodeFile {
        schema: SCHEMA.into(),
        node: nodes,
        host: host_name(),
        clock: *clock,
        server_date,
        tx_unix_ns: clock.wall(r.tx_ns),
        ty_unix_ns: clock.wall(r.ty_ns),
        counts: Counts::of(r, |t| clock.wall(t)),
        shared_reads: [r.shared.events, r.shared.of_events, r.shared.first_tokens],
        moments: tagged
            .iter()
            .filter(|(_, d)| d.count() > 0)
            .map(|(t, d)| (t.to_string(), d.moments()))
            .collect(),
    };
    let mut j = serde_json::to_vec_pretty(&file)?;
    j.push(b'\n');
    crate::artifact::write(&dir.join(NODE_JSON), j)?;

    write_histograms(r, dir, file.tx_unix_ns)?;
    write_timeline(r, dir, clock)
}

/// `histograms.hlog`: every metric of `r` over its measured window, which starts at Unix ns
/// `tx_unix_ns`.
pub(crate) fn write_histograms(r: &Report, dir: &Path, tx_unix_ns: u64) -> std::io::Result<()> {
    let window_s = r.window_ns as f64 / 1e9;
    write_log(
        &dir.join(HISTOGRAMS),
        tx_unix_ns,
        "ringperf: each metric over the measured window (ns; tokens; milli-tokens/s per user)",
        |put| {
            for (tag, d) in tagged(r).iter().filter(|(_, d)| d.count() > 0) {
                put(0.0, window_s, tag, d.histogram())?;
            }
            Ok(())
        },
    )
}

/// `timeline.hlog`: for each second from the run's start, histograms of the measured
/// requests that ended in it. Built one second at a time, so its memory does not grow with
/// the run's length.
fn write_timeline(r: &Report, dir: &Path, clock: &Anchor) -> std::io::Result<()> {
    let start = clock.monotonic_ns;
    let mut ends: Vec<(u64, usize)> = r
        .records
        .iter()
        .enumerate()
        .filter(|(_, x)| x.is_measured_ok())
        .map(|(i, x)| (x.end_ns.saturating_sub(start) / 1_000_000_000, i))
        .collect();
    ends.sort_unstable();
    let mut hists: Vec<Histogram<u32>> = TIMELINE_TAGS.iter().map(|_| empty_histogram()).collect();
    write_log(
        &dir.join(TIMELINE),
        clock.realtime_ns,
        "ringperf: per second from the run's start, the measured requests that ended in it",
        |put| {
            let mut i = 0;
            while i < ends.len() {
                let sec = ends[i].0;
                while i < ends.len() && ends[i].0 == sec {
                    let x = &r.records[ends[i].1];
                    let values = [
                        x.ttft(),
                        x.itl().map(|v| v.round() as u64),
                        Some(x.latency()),
                        x.osl,
                    ];
                    for (h, v) in hists.iter_mut().zip(values) {
                        if let Some(v) = v {
                            let _ = h.record(v.clamp(1, MAX_VALUE));
                        }
                    }
                    i += 1;
                }
                // Written (compressed) now, and the histograms reused for the next second.
                for (tag, h) in TIMELINE_TAGS.iter().zip(&mut hists) {
                    if !h.is_empty() {
                        put(sec as f64, 1.0, tag, h)?;
                        h.reset();
                    }
                }
            }
            Ok(())
        },
    )
}
