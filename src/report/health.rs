//! Client health: proof that the client was not the limit, or the reason it was.
//!
//! Three kinds of evidence, each measured, none assumed:
//! - **per shard**: CPU share, time spent runnable but waiting for a CPU (the kernel's
//!   scheduler statistics), starved intervals and what the engine did about them, the
//!   send side (dispatch delay: from when a request was due to when its bytes left), and the
//!   receive side (arrival→record lag);
//! - **against ringperf's simulator**, per request: the simulator echoes when each request
//!   reached its kernel and stamps every event it writes, so the error the client added to a
//!   TTFT is split into its send side (client start → simulator arrival) and its receive
//!   side (simulator write → client stamp); and the simulator's own count of requests in
//!   flight shows whether the server saw the load that was asked;
//! - **per request**: a request in flight while its shard was starved is marked
//!   `client_starved` in `profile_export.jsonl`.
//!
//! When the evidence shows the client distorted the numbers, the report says so next to them
//! ([`Distortion`]), not only in a warning.

use crate::warning::{Code, Warning};
use serde::Serialize;

use crate::engine::placement::{Mode, Pin, Placement};
use crate::engine::starvation::{self, ShardWatch};
use crate::engine::{InFlightSample, ShardReport};
use crate::record::{Outcome, Phase, Record};
use crate::stats::Dist;

/// Busiest shard above this CPU share means the client may have limited the load.
const CPU_LIMIT: f64 = 0.90;
/// Per-request client-added delay (simulator self-check) p99 above this distorts results.
const DELAY_LIMIT_NS: u64 = 1_000_000;
/// Open loop: dispatch delay p99 above this, requests left late.
pub(super) const DISPATCH_LIMIT_NS: u64 = 1_000_000;
/// A shard that records events this long after they arrived has fallen behind.
const LAG_LIMIT_NS: u64 = 10_000_000;
/// Starvation distorts the percentiles when more than this share of measured requests were
/// in flight while their shard was starved, the shard spent more than this share of the
/// measured time starved, and its longest starved stretch was long enough to merge events
/// (see [`merge_window_ns`]).
const STARVED_SHARE_LIMIT: f64 = 0.01;
/// The server (the simulator), and the client's own count, must hold at least this share of
/// the asked concurrency.
const IN_FLIGHT_MIN: f64 = 0.95;
/// First tokens read together with a later token in more than this share of responses make
/// the verdict say so (never "headroom").
const SHARED_FIRST_MAX: f64 = 0.01;
/// Inter-chunk gaps the client's late reads merged (zero gaps in requests in flight while
/// their shard was starved), above this share of all gaps, can move the reported p99.
const MERGED_GAPS_MAX: f64 = 0.01;

/// The resolution of a reported latency figure (ms): what the console shows (0.01 ms) or
/// what three significant digits hold, whichever is coarser. A distortion that cannot move
/// a figure by more than this is a note, not a failed gate.
pub(super) fn resolution_ms(value_ms: f64) -> f64 {
    (value_ms.abs() * 1e-3).max(0.01)
}

/// What first tokens read together with a later token can have done to TTFT.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct FirstTokens {
    /// Completed measured responses, and those whose first token shared a read.
    pub completed: u64,
    /// See `completed`.
    pub shared: u64,
    /// The largest per-request bound on the overstatement (ms).
    pub worst_ms: f64,
    /// How far TTFT p50, p90 and p99 can be overstated (ms): each figure as reported minus
    /// the same figure with every shared first token moved as early as it can have come.
    pub moved_ms: [(&'static str, f64, f64); 3],
}

impl FirstTokens {
    /// Whether a reported TTFT figure can have moved by more than its resolution.
    fn beyond_resolution(&self) -> bool {
        self.moved_ms
            .iter()
            .any(|(_, value, moved)| *moved > resolution_ms(*value))
    }

    fn describe(&self) -> String {
        format!(
            "{} of {} responses ({:.1}%) got their first token in one read with a later token, \
             so their TTFT carries the later token's arrival: each is overstated by at most \
             the time since the read before it (up to {:.2} ms); TTFT {} can be overstated by \
             at most that",
            self.shared,
            self.completed,
            100.0 * self.shared as f64 / self.completed.max(1) as f64,
            self.worst_ms,
            self.moved_ms
                .iter()
                .map(|(p, v, m)| format!("{p} {m:.2} ms (of {v:.2})"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// The effect of shared first-token reads on TTFT, from the records: `None` when no
/// completed response's first token shared a read.
pub(super) fn first_tokens(records: &[Record]) -> Option<FirstTokens> {
    let ok: Vec<&Record> = records.iter().filter(|r| r.is_measured_ok()).collect();
    let shared = ok.iter().filter(|r| r.first_token_shared_read()).count() as u64;
    if shared == 0 {
        return None;
    }
    let mut reported: Vec<f64> = ok
        .iter()
        .filter_map(|r| r.ttft())
        .map(|t| t as f64 / 1e6)
        .collect();
    let mut earliest: Vec<f64> = ok
        .iter()
        .filter_map(|r| Some(r.ttft()?.saturating_sub(r.first_token_shared_ns) as f64 / 1e6))
        .collect();
    reported.sort_by(f64::total_cmp);
    earliest.sort_by(f64::total_cmp);
    let at = |v: &[f64], p: f64| crate::stats::linear_percentile(v, p);
    let moved =
        |name: &'static str, p: f64| (name, at(&reported, p), at(&reported, p) - at(&earliest, p));
    Some(FirstTokens {
        completed: ok.len() as u64,
        shared,
        worst_ms: ok
            .iter()
            .map(|r| r.first_token_shared_ns)
            .max()
            .unwrap_or(0) as f64
            / 1e6,
        moved_ms: [moved("p50", 50.0), moved("p90", 90.0), moved("p99", 99.0)],
    })
}

/// Inter-chunk gaps of measured requests that the client's lateness can have merged: zero
/// gaps of requests in flight while their shard was starved. (A zero gap elsewhere is a
/// server sending events together.) Returns (merged, all).
fn merged_gaps(records: &[Record]) -> (u64, u64) {
    records
        .iter()
        .filter(|r| r.is_measured_ok())
        .fold((0, 0), |(m, n), r| {
            let zeros = if r.client_starved { r.zero_gaps() } else { 0 };
            (m + zeros, n + r.gap_count())
        })
}

/// A shard moved off its CPU, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct MoveNote {
    /// Seconds after the shard's measured phase began (negative: during warm-up).
    pub at_s: f64,
    /// Where it was.
    pub from: String,
    /// Where it went.
    pub to: String,
    /// Share of the interval before the move it spent waiting for a CPU.
    pub wait_share: f64,
}

/// Client health of one shard.
#[derive(Debug, Clone, Serialize)]
pub struct ShardHealth {
    /// Shard number.
    pub shard: usize,
    /// Where it was placed (`CPU 3`, `CPUs 0-3`, `any CPU`).
    pub placed: String,
    /// The CPU it was pinned to, if pinned to one.
    pub cpu: Option<usize>,
    /// Thread CPU time / wall time over the measured phase.
    pub cpu_utilization: f64,
    /// Share of the measured phase it spent runnable but waiting for a CPU.
    pub run_queue_wait: Option<f64>,
    /// Waiting inside starved intervals during the measured phase (ms).
    pub starved_ms: f64,
    /// The longest starved stretch's waiting (ms).
    pub worst_starved_ms: f64,
    /// Measured requests in flight while it was starved.
    pub starved_requests: u64,
    /// Moves the engine made because it was starved.
    pub moves: Vec<MoveNote>,
    /// Most requests in flight at once.
    pub peak_in_flight: usize,
    /// Content events per second received.
    pub events_per_sec: f64,
    /// Client CPU per content event (µs).
    pub cpu_us_per_event: f64,
    /// p99 of the time from a read's arrival (kernel stamp) to its events being recorded (µs).
    pub arrival_to_record_p99_us: f64,
    /// p99 of its requests' dispatch delay (µs), the send side.
    pub dispatch_delay_p99_us: Option<f64>,
}

/// The self-check against ringperf's simulator, per request.
#[derive(Debug, Clone, Default)]
pub struct SelfCheck {
    /// Client start → simulator's kernel arrival stamp (ns).
    pub send: Dist,
    /// Simulator's write of the first content event → the client's stamp of it (ns).
    pub receive: Dist,
    /// Their sum: the error the client added to the request's TTFT (ns).
    pub total: Dist,
    /// Requests in flight the simulator saw, on average, while the client held its load.
    pub server_in_flight: Option<f64>,
    /// Requests in flight asked for (closed loop).
    pub asked: Option<u64>,
}

/// Closed loop: the requests the client itself had in flight, on average, from the first
/// measured send to the last, against the concurrency asked. The gap is the time places
/// under the cap stood empty between a response's end and the next send.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Held {
    /// Mean requests in flight.
    pub mean: f64,
    /// Asked for.
    pub asked: u64,
}

/// The client provably distorted the results.
#[derive(Debug, Clone, Serialize)]
pub struct Distortion {
    /// What shows it, one sentence each.
    pub reasons: Vec<String>,
}

/// The whole assessment.
#[derive(Debug, Clone)]
pub struct Health {
    /// Per shard.
    pub shards: Vec<ShardHealth>,
    /// The placement.
    pub placement: Placement,
    /// Against the simulator, when it was the server.
    pub self_check: SelfCheck,
    /// Closed loop: the concurrency the client held.
    pub held: Option<Held>,
    /// Set when the results are distorted by the client.
    pub distorted: Option<Distortion>,
    /// ringperf's simulator, when it served late: what it said of its own lateness.
    pub simulator_stalled: Option<String>,
    /// The client distorted the results or may have limited the load (the verdict says how).
    pub limited: bool,
    /// The client kept up with a caveat that moves no reported figure (the verdict says it).
    pub caveat: bool,
    /// One line: did the client keep up, and if not, why and what to do.
    pub verdict: String,
    /// The main thread's watch while the shards ran: (CPU time, time watched), ns.
    pub watch_cost: Option<(u64, u64)>,
}

fn per_sec(n: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        n as f64 / (ns as f64 / 1e9)
    }
}

/// Marks each record that was in flight while its shard was starved; returns how many
/// measured ones were, per shard.
pub(super) fn mark_starved(records: &mut [Record], watch: &[ShardWatch]) -> Vec<u64> {
    let mut counts = vec![0u64; watch.len()];
    for r in records.iter_mut() {
        let Some(w) = watch.get(usize::from(r.shard)) else {
            continue;
        };
        let (from, to) = (r.start_ns, r.end_ns.max(r.start_ns));
        // Episodes are in time order: find the first that ends after the request starts.
        let i = w.episodes.partition_point(|e| e.end_ns <= from);
        r.client_starved = w.episodes.get(i).is_some_and(|e| e.start_ns < to);
        if r.client_starved && r.phase == Phase::Profiling {
            counts[usize::from(r.shard)] += 1;
        }
    }
    counts
}

/// Mean requests in flight over `[from, to]` from a probe's integral readings, between the
/// first and the last reading inside the window; `None` when they span less than half of it.
///
/// Readings outside the window are never used: interpolating the integral between a reading
/// before the window and one inside it would spread the ramp's edges (fewer in flight) over
/// the window, and a run shorter than the probe's period would read as a client that held too
/// few in flight.
pub(super) fn mean_in_flight(samples: &[InFlightSample], from: u64, to: u64) -> Option<f64> {
    let lo = samples.partition_point(|s| s.t_ns < from);
    let hi = samples.partition_point(|s| s.t_ns <= to);
    let (a, b) = (samples.get(lo)?, samples.get(hi.checked_sub(1)?)?);
    let span = b.t_ns.checked_sub(a.t_ns).filter(|&d| d > 0)?;
    if span.saturating_mul(2) < to.saturating_sub(from) {
        return None;
    }
    Some(b.integral.saturating_sub(a.integral) as f64 / span as f64)
}

/// What the report needs to judge the client.
pub(super) struct Inputs<'a> {
    /// The shards' reports (records already marked).
    pub shards: &'a [ShardReport],
    /// Starved requests per shard, from [`mark_starved`].
    pub starved: &'a [u64],
    /// The starvation watch.
    pub watch: &'a [ShardWatch],
    /// The placement.
    pub placement: &'a Placement,
    /// All records.
    pub records: &'a [Record],
    /// Simulator-stamped event delays (ns).
    pub event_delay: &'a Dist,
    /// Arrival→record lag (ns).
    pub lag: &'a Dist,
    /// Dispatch delay of measured requests (ns).
    pub dispatch: &'a Dist,
    /// The server's in-flight integral readings.
    pub server_in_flight: &'a [InFlightSample],
    /// Concurrency asked (closed loop without sessions).
    pub asked: Option<u64>,
    /// Events were stamped with the kernel's receive time.
    pub kernel_stamps: bool,
    /// Inter-chunk gaps of measured requests (ns).
    pub chunk_gaps: &'a Dist,
    /// The main thread's watch: (CPU time, time watched), ns.
    pub watch_cost: (u64, u64),
}

/// How long a shard must wait to distort a timing. With kernel receive stamps, a read that
/// comes late still carries the time its bytes arrived; only events of one stream that
/// arrive during the wait are read together and take the newest one's stamp, so the wait
/// must reach the typical gap between a stream's events (the median inter-chunk latency).
/// Without kernel stamps every late read is a late stamp: 1 ms.
pub(super) fn merge_window_ns(kernel_stamps: bool, chunk_gaps: &Dist) -> u64 {
    if kernel_stamps && chunk_gaps.count() > 0 {
        chunk_gaps.percentile(50.0).max(DELAY_LIMIT_NS)
    } else {
        DELAY_LIMIT_NS
    }
}

/// The stretch in which a closed loop of `asked` places should hold every one of them:
/// from the send that filled the last place to the last measured send (after it, places
/// drain as the count runs out). None when no place was ever refilled: a burst of `asked`
/// requests or fewer has nothing to hold.
fn hold_window(records: &[Record], asked: u64) -> Option<(u64, u64)> {
    let mut starts: Vec<u64> = records
        .iter()
        .filter(|r| r.is_measured_sent())
        .map(|r| r.start_ns)
        .collect();
    let filled = usize::try_from(asked).ok()?.checked_sub(1)?;
    if starts.len() <= filled + 1 {
        return None;
    }
    starts.sort_unstable();
    let (from, to) = (starts[filled], *starts.last()?);
    (to > from).then_some((from, to))
}

/// The [`hold_window`] when it is long enough to judge a count of requests in flight over
/// it: at least half a median request. A refill sooner after the last place filled follows
/// a request that ended early, and over so short a stretch its one turnaround would weigh
/// as a lost place.
fn judged_window(records: &[Record], asked: u64) -> Option<(u64, u64)> {
    let (from, to) = hold_window(records, asked)?;
    let mut lengths: Vec<u64> = records
        .iter()
        .filter(|r| r.is_measured_sent())
        .map(|r| r.end_ns.saturating_sub(r.start_ns))
        .collect();
    let mid = lengths.len() / 2;
    let median = *lengths.select_nth_unstable(mid).1;
    (2 * (to - from) >= median).then_some((from, to))
}

/// The share of its places' time a closed loop lost between a response's end and the next
/// send on that place (the client's own turnaround): Σ dispatch delay / Σ (dispatch delay +
/// latency) over the measured requests that refilled a place. Free of any window, so a
/// short run is judged as a long one. None without refills.
fn turnaround_share(records: &[Record]) -> Option<f64> {
    // Over the requests the server answered: a place refilled after a failure measures how
    // fast the server failed (a 404 takes microseconds), not how fast the client refills.
    let (lost, busy) = records
        .iter()
        .filter(|r| r.is_measured_ok())
        .filter_map(|r| Some((r.dispatch_delay()?, r.end_ns.saturating_sub(r.start_ns))))
        .fold((0u128, 0u128), |(l, b), (d, len)| {
            (l + u128::from(d), b + u128::from(d) + u128::from(len))
        });
    (busy > 0).then(|| lost as f64 / busy as f64)
}

/// Mean requests in flight, by the client's own records, over the [`hold_window`].
fn held(records: &[Record], asked: u64) -> Option<Held> {
    let (from, to) = hold_window(records, asked)?;
    let busy: u128 = records
        .iter()
        .filter(|r| r.is_measured_sent())
        .map(|r| {
            let end = r.end_ns.max(r.start_ns).min(to);
            u128::from(end.saturating_sub(r.start_ns.max(from)))
        })
        .sum();
    Some(Held {
        mean: busy as f64 / (to - from) as f64,
        asked,
    })
}

/// ringperf's simulator's own account of its lateness over the measured window (from the
/// first measured send to the last response's end): a sentence when it stalled, i.e. froze
/// for 10 ms or five typical gaps between a stream's events (`gap_ns`), whichever is
/// longer, or wrote more than 10% of the run's events more than 1 ms late. Then it served
/// slower than it was told, and the run measured a slower server. (A few events a
/// millisecond or two late are a busy host's timer jitter, which moves no figure.)
fn simulator_stall(samples: &[InFlightSample], records: &[Record], gap_ns: u64) -> Option<String> {
    let measured = || records.iter().filter(|r| r.is_measured_sent());
    let from = measured().map(|r| r.start_ns).min()?;
    let to = measured().map(|r| r.end_ns).max()?;
    let before = samples.iter().rev().find(|s| s.t_ns <= from)?;
    let after = samples.iter().find(|s| s.t_ns >= to).or(samples.last())?;
    let late = after.late_events.saturating_sub(before.late_events);
    let worst = samples
        .iter()
        .filter(|s| s.t_ns > from && s.t_ns <= after.t_ns)
        .map(|s| s.worst_late_ns)
        .max()
        .unwrap_or(0);
    let events: u64 = measured()
        .map(|r| r.gap_count() + u64::from(r.first_content_ns.is_some()))
        .sum();
    let freeze = (10 * crate::record::LATE_NS).max(5 * gap_ns);
    (worst >= freeze || late as f64 > 0.1 * events.max(1) as f64).then(|| {
        format!(
            "the simulator stalled: it wrote {late} event(s) more than 1 ms after they were due \
             (the worst {:.1} ms late), so it served slower than it was told and this run \
             measured a slower server; not the client's doing: give the simulator a CPU of its \
             own (--sim=\"--cpus N\") or run it on a quieter host",
            worst as f64 / 1e6
        )
    })
}

/// Judges the client from the evidence; warnings go to `warnings`.
pub(super) fn assess(i: &Inputs<'_>, warnings: &mut Vec<Warning>) -> Health {
    let shards: Vec<ShardHealth> = i
        .shards
        .iter()
        .map(|s| shard_health(s, i.watch.get(s.index), i.starved, i.records))
        .collect();
    let self_check = self_check(i);
    let measured = i
        .records
        .iter()
        .filter(|r| r.phase == Phase::Profiling)
        .count() as u64;
    let merge = merge_window_ns(i.kernel_stamps, i.chunk_gaps);
    // Against the simulator every event's delay is measured: that, not the shard's waiting,
    // decides whether the receive side was distorted.
    let measured_directly =
        i.event_delay.count() > 0 && i.event_delay.percentile(99.0) <= DELAY_LIMIT_NS;

    let mut distorted = Vec::new();
    let mut limits = Vec::new();
    let mut caveats = Vec::new();
    // What the client's late reads did to the figures, from the records themselves.
    let first =
        first_tokens(i.records).filter(|f| f.shared as f64 > SHARED_FIRST_MAX * f.completed as f64);
    let (merged, gaps) = merged_gaps(i.records);
    let merged_many = merged as f64 > MERGED_GAPS_MAX * gaps.max(1) as f64;
    // Against the simulator, its own stamps measure every first token's error directly.
    let first_measured = self_check.receive.count() > 0;
    for (s, r) in shards
        .iter()
        .zip(i.shards)
        .filter(|(s, _)| s.starved_requests > 0)
    {
        let what = format!(
            "shard {} ({}) waited for a CPU {:.1} ms in starved stretches (up to {:.1} ms at once) while {} measured request(s) were in flight on it",
            s.shard, s.placed, s.starved_ms, s.worst_starved_ms, s.starved_requests
        );
        let fix = starvation_fix(s, i.placement);
        let many = s.starved_requests as f64 > STARVED_SHARE_LIMIT * measured.max(1) as f64;
        let long = s.starved_ms * 1e6 > STARVED_SHARE_LIMIT * r.wall_ns as f64;
        let merging = s.worst_starved_ms * 1e6 >= merge as f64;
        if !(many && long && merging) {
            continue;
        }
        if measured_directly {
            // The simulator's stamps say what the wait did to every event: trust them, and
            // say the caveat in the verdict too, not only in a warning.
            caveats.push(format!(
                "{what}; against the simulator's stamps no event was late by more than {:.2} ms (p99), so the timings held; {fix}",
                i.event_delay.percentile(99.0) as f64 / 1e6
            ));
        } else if !i.kernel_stamps {
            // Without the kernel's stamps every late read is a late stamp.
            distorted.push(format!(
                "{what}, and events are stamped when read (no kernel stamps): their times moved by up to the wait; {fix}"
            ));
        } else if merged_many {
            distorted.push(format!(
                "{what}, long enough for a stream's events ({:.1} ms apart) to be read together: {merged} of {gaps} inter-chunk gaps ({:.1}%) were merged in requests it had in flight, enough to move the reported inter-chunk latency p99; {fix}",
                merge as f64 / 1e6,
                100.0 * merged as f64 / gaps.max(1) as f64
            ));
        } else {
            // Kernel stamps kept every event's arrival but those read together; too few
            // were to move a reported figure (first tokens are judged below).
            caveats.push(format!(
                "{what}; the kernel's stamps kept the arrival of every event read alone, and the {merged} of {gaps} gaps read together cannot move the reported percentiles; {fix}"
            ));
        }
    }
    if let Some(f) = first.as_ref().filter(|_| !first_measured) {
        if f.beyond_resolution() {
            distorted.push(f.describe());
        } else {
            caveats.push(format!("{}, within the figures' resolution", f.describe()));
        }
    }
    if i.event_delay.count() > 0 && i.event_delay.percentile(99.0) > DELAY_LIMIT_NS {
        distorted.push(format!(
            "simulator events were stamped up to {:.2} ms (p99) after they were written: events that waited in the socket took the stamp of a later one",
            i.event_delay.percentile(99.0) as f64 / 1e6
        ));
    }
    if self_check.total.count() > 0 && self_check.total.percentile(99.0) > DELAY_LIMIT_NS {
        distorted.push(format!(
            "against the simulator's own stamps the client added p99 {:.2} ms to TTFT (send side p99 {:.2} ms, receive side p99 {:.2} ms)",
            self_check.total.percentile(99.0) as f64 / 1e6,
            self_check.send.percentile(99.0) as f64 / 1e6,
            self_check.receive.percentile(99.0) as f64 / 1e6
        ));
    }
    // Requests that failed fast (a refused connection, an error status) leave their places
    // empty at the server: that is the server's doing, not the client's, so the count is
    // judged only where none failed.
    let failures = i.records.iter().any(|r| {
        r.phase == Phase::Profiling && !matches!(r.outcome, Outcome::Ok | Outcome::RequestCancelled)
    });
    if let (Some(seen), Some(asked), false) =
        (self_check.server_in_flight, self_check.asked, failures)
    {
        if seen < IN_FLIGHT_MIN * asked as f64 {
            distorted.push(format!(
                "the simulator saw {seen:.1} requests in flight on average, not the {asked} asked"
            ));
        }
    }

    let busiest = shards
        .iter()
        .max_by(|a, b| a.cpu_utilization.total_cmp(&b.cpu_utilization));
    if let Some(b) = busiest.filter(|b| b.cpu_utilization > CPU_LIMIT) {
        limits.push(format!(
            "shard {} was at {:.0}% CPU: add shards (--shards {}) or CPUs",
            b.shard,
            b.cpu_utilization * 100.0,
            shards.len() + 1
        ));
    }
    let held = i.asked.and_then(|a| held(i.records, a));
    let lost = i.asked.and(turnaround_share(i.records));
    if let Some(l) = lost.filter(|l| *l > 1.0 - IN_FLIGHT_MIN) {
        limits.push(format!(
            "places stood empty {:.1}% of the time between a response's end and the next send on them{}: requests went out up to {:.2} ms (p99) after a place freed",
            l * 100.0,
            held.map_or(String::new(), |h| format!(" (it held {:.1} of the {} asked in flight on average)", h.mean, h.asked)),
            i.dispatch.percentile(99.0) as f64 / 1e6
        ));
    }
    if i.lag.count() > 0 && i.lag.percentile(99.0) > LAG_LIMIT_NS {
        let lag = format!(
            "reads waited up to {:.1} ms (p99) for the client",
            i.lag.percentile(99.0) as f64 / 1e6
        );
        if i.kernel_stamps {
            // The stamps carry each read's arrival: what the wait can have done is what
            // it merged, judged above.
            caveats.push(format!(
                "{lag}; the kernel's stamps kept each read's arrival time, and the events that arrived together in the wait are judged above"
            ));
        } else {
            distorted.push(format!(
                "{lag}, and events are stamped when read (no kernel stamps): their times moved by up to the wait"
            ));
        }
    }

    let cpu = busiest.map_or(0.0, |b| b.cpu_utilization * 100.0);
    for c in &caveats {
        warnings.push(Warning::new(Code::ClientCaveat, c.clone()));
    }
    let gap = if i.chunk_gaps.count() > 0 {
        i.chunk_gaps.percentile(50.0)
    } else {
        0
    };
    let stalled = simulator_stall(i.server_in_flight, i.records, gap);
    let verdict = if !distorted.is_empty() {
        let msg = format!(
            "the client distorted these results: {}",
            distorted.join("; ")
        );
        warnings.push(Warning::new(Code::ClientDistorted, msg.clone()));
        msg
    } else if let Some(s) = &stalled {
        warnings.push(Warning::new(Code::SimulatorStalled, s.clone()));
        s.clone()
    } else if !limits.is_empty() {
        let msg = format!(
            "the client may have limited this run: {}",
            limits.join("; ")
        );
        warnings.push(Warning::new(Code::ClientLimited, msg.clone()));
        msg
    } else if !caveats.is_empty() {
        format!(
            "the client kept up, with a caveat (no reported figure moved beyond its resolution): {}",
            caveats.join("; ")
        )
    } else {
        let mut v = format!("the client had headroom: busiest shard {cpu:.0}% CPU");
        let wait = shards
            .iter()
            .filter_map(|s| s.run_queue_wait)
            .fold(None, |m: Option<f64>, w| Some(m.map_or(w, |m| m.max(w))));
        if let Some(w) = wait {
            v.push_str(&format!(", waited for a CPU {:.1}% of the time", w * 100.0));
        }
        if self_check.total.count() > 0 {
            v.push_str(&format!(
                "; client-added delay per request p99 {:.3} ms",
                self_check.total.percentile(99.0) as f64 / 1e6
            ));
        }
        v
    };
    Health {
        shards,
        placement: i.placement.clone(),
        self_check,
        held,
        limited: !distorted.is_empty() || !limits.is_empty() || stalled.is_some(),
        caveat: !caveats.is_empty(),
        distorted: (!distorted.is_empty()).then_some(Distortion { reasons: distorted }),
        simulator_stalled: stalled,
        verdict,
        watch_cost: Some(i.watch_cost),
    }
}

fn starvation_fix(s: &ShardHealth, placement: &Placement) -> String {
    if let Some(m) = s.moves.first() {
        return format!(
            "ringperf moved it from {} to {} {:.2} s into the measurement; other processes (the server, if it runs here) out-rank the client there: leave the client CPUs the server does not use, or run the server at the client's priority",
            m.from, m.to, m.at_s
        );
    }
    match placement.mode {
        Mode::Explicit => "it is pinned there by --cpus: choose CPUs the server does not use, or drop --cpus and let ringperf place it".to_string(),
        Mode::Unpinned | Mode::Shared | Mode::PerCore => "no CPU of this host was free for it: give the client CPUs of its own (pin the server elsewhere, e.g. with taskset), or run the client on another host".to_string(),
    }
}

fn shard_health(
    s: &ShardReport,
    watch: Option<&ShardWatch>,
    starved: &[u64],
    records: &[Record],
) -> ShardHealth {
    let (t0, t1) = s.measured;
    let (starved_ns, worst_ns) = watch.map_or((0, 0), |w| starvation::within(&w.episodes, t0, t1));
    let mut dispatch = Dist::new();
    for r in records
        .iter()
        .filter(|r| usize::from(r.shard) == s.index && r.phase == Phase::Profiling)
    {
        if let Some(d) = r.dispatch_delay() {
            dispatch.record(d);
        }
    }
    ShardHealth {
        shard: s.index,
        placed: s.pin.to_string(),
        cpu: s.pin.core().filter(|_| s.pinned),
        cpu_utilization: if s.wall_ns > 0 {
            s.cpu_ns as f64 / s.wall_ns as f64
        } else {
            0.0
        },
        run_queue_wait: s
            .wait_ns
            .filter(|_| s.wall_ns > 0)
            .map(|w| w as f64 / s.wall_ns as f64),
        starved_ms: starved_ns as f64 / 1e6,
        worst_starved_ms: worst_ns as f64 / 1e6,
        starved_requests: starved.get(s.index).copied().unwrap_or(0),
        moves: watch
            .map(|w| {
                w.moves
                    .iter()
                    .map(|m| MoveNote {
                        at_s: (m.at_ns as f64 - t0 as f64) / 1e9,
                        from: m.from.to_string(),
                        to: m.to.to_string(),
                        wait_share: m.wait_share,
                    })
                    .collect()
            })
            .unwrap_or_default(),
        peak_in_flight: s.peak_in_flight,
        events_per_sec: per_sec(s.events, s.wall_ns),
        cpu_us_per_event: if s.events > 0 {
            s.cpu_ns as f64 / 1e3 / s.events as f64
        } else {
            0.0
        },
        arrival_to_record_p99_us: s.record_lag.percentile(99.0) as f64 / 1e3,
        dispatch_delay_p99_us: (dispatch.count() > 0)
            .then(|| dispatch.percentile(99.0) as f64 / 1e3),
    }
}

fn self_check(i: &Inputs<'_>) -> SelfCheck {
    let mut c = SelfCheck {
        asked: i.asked,
        ..SelfCheck::default()
    };
    let measured = || i.records.iter().filter(|r| r.is_measured_ok());
    for (send, recv) in measured().filter_map(Record::client_added) {
        c.send.record(send);
        c.receive.record(recv);
        c.total.record(send + recv);
    }
    // A closed loop is judged over its hold window; an open loop's figure (not judged) is
    // over its sends.
    let window = match i.asked {
        Some(a) => judged_window(i.records, a),
        None => {
            let starts = measured().map(|r| r.start_ns);
            Some(starts.fold((u64::MAX, 0), |(a, b), t| (a.min(t), b.max(t))))
        }
    };
    c.server_in_flight = window.and_then(|(from, to)| mean_in_flight(i.server_in_flight, from, to));
    c
}

/// The placement, for the JSON.
#[derive(Serialize)]
pub struct PlacementNote<'a> {
    /// How it was chosen.
    pub mode: Mode,
    /// Why, in a sentence.
    pub reason: &'a str,
    /// Where each shard started.
    pub shards: &'a [Pin],
    /// The quiet CPUs.
    pub quiet_cpus: &'a [usize],
}

impl Health {
    /// Takes in what other parts of the run said of the client: `limits` (it held the load
    /// back) and `caveats` (it sent late); the verdict says them, unless it already says the
    /// client distorted the figures or the simulator stalled.
    pub(super) fn take_in(&mut self, limits: &[String], caveats: &[String]) {
        if self.distorted.is_some() || self.simulator_stalled.is_some() {
            return;
        }
        if !limits.is_empty() {
            self.verdict = if self.limited {
                format!("{}; {}", self.verdict, limits.join("; "))
            } else {
                format!(
                    "the client may have limited this run: {}",
                    limits.join("; ")
                )
            };
            self.limited = true;
        } else if !caveats.is_empty() && !self.limited {
            self.verdict = if self.caveat {
                format!("{}; {}", self.verdict, caveats.join("; "))
            } else {
                format!("the client kept up, with a caveat: {}", caveats.join("; "))
            };
            self.caveat = true;
        }
    }

    /// The assessment of a merged load: its verdict over every node (each node's own
    /// shards and placement are in its own report).
    pub fn merged(verdict: String, distorted: Option<Distortion>, limited: bool) -> Health {
        Health {
            shards: Vec::new(),
            placement: Placement {
                shards: Vec::new(),
                mode: crate::engine::placement::Mode::Unpinned,
                quiet: Vec::new(),
                candidates: Vec::new(),
                reason: "merged from several nodes: see each node's".into(),
            },
            self_check: SelfCheck::default(),
            held: None,
            simulator_stalled: None,
            distorted,
            limited,
            caveat: false,
            verdict,
            watch_cost: None,
        }
    }

    /// The placement as exported.
    pub fn placement_note(&self) -> PlacementNote<'_> {
        PlacementNote {
            mode: self.placement.mode,
            reason: &self.placement.reason,
            shards: &self.placement.shards,
            quiet_cpus: &self.placement.quiet,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::starvation::Episode;

    fn rec(id: u64, shard: u16, start: u64, end: u64) -> Record {
        let mut r = Record::new(id, shard, Phase::Profiling, 0, Some(1));
        r.start_ns = start;
        r.end_ns = end;
        r
    }

    fn watch(episodes: Vec<Episode>) -> ShardWatch {
        let placement = crate::engine::placement::place(
            &crate::engine::placement::Ask {
                streams: 1,
                ..Default::default()
            },
            &crate::engine::placement::HostView {
                allowed: vec![0, 1],
                ..Default::default()
            },
        )
        .unwrap();
        let mut w = crate::engine::starvation::Watch::new(&placement, &[0, 1]).shards[0].clone();
        w.episodes = episodes;
        w
    }

    #[test]
    fn requests_overlapping_a_starved_stretch_are_marked() {
        let w = watch(vec![
            Episode {
                start_ns: 100,
                end_ns: 200,
                wait_ns: 50,
            },
            Episode {
                start_ns: 500,
                end_ns: 600,
                wait_ns: 50,
            },
        ]);
        let mut recs = vec![
            rec(0, 0, 0, 99),    // before
            rec(1, 0, 150, 160), // inside
            rec(2, 0, 190, 300), // overlaps the end
            rec(3, 0, 210, 490), // between
            rec(4, 0, 0, 1000),  // spans both
            rec(5, 1, 150, 160), // another shard, not watched here
        ];
        recs[3].phase = Phase::Warmup;
        let counts = mark_starved(&mut recs, std::slice::from_ref(&w));
        let marked: Vec<bool> = recs.iter().map(|r| r.client_starved).collect();
        assert_eq!(marked, vec![false, true, true, false, true, false]);
        assert_eq!(counts, vec![3]);
    }

    #[test]
    fn held_concurrency_counts_the_gaps_between_a_response_and_the_next_send() {
        // Two places, from t=1000 to t=1100: place A busy throughout, place B busy 1000–1040,
        // idle 1040–1060, busy again from 1060 (the last start is the window's end).
        let recs = vec![
            rec(0, 0, 1000, 1100),
            rec(1, 0, 1000, 1040),
            rec(2, 0, 1060, 1100),
            rec(3, 0, 1100, 1150),
        ];
        let h = held(&recs, 2).unwrap();
        // The window starts at the second send (1000: both places full) and ends at 1100.
        assert!((h.mean - 1.8).abs() < 1e-9, "{h:?}");
        assert_eq!(h.asked, 2);
        assert!(held(&recs[..1], 1).is_none(), "one send makes no window");
    }

    #[test]
    fn a_burst_or_a_window_shorter_than_a_request_is_not_judged() {
        // Four requests at once into four places, or fewer: nothing is refilled.
        let burst: Vec<Record> = (0..4)
            .map(|i| rec(i, 0, 1000 + i, 5000 + 100 * i))
            .collect();
        assert_eq!(hold_window(&burst, 4), None);
        assert_eq!(hold_window(&burst, 8), None);
        // A fifth request refills the first place to free: judged from the fourth send.
        let mut refilled = burst.clone();
        refilled.push(rec(4, 0, 5010, 9000));
        refilled[4].due_ns = Some(5000);
        assert_eq!(hold_window(&refilled, 4), Some((1003, 5010)));
        let h = held(&refilled, 4).unwrap();
        // Place 0 stood empty 5000–5010 of 4007 ns: 4 − 10/4007.
        assert!((h.mean - (4.0 - 10.0 / 4007.0)).abs() < 1e-9, "{h:?}");
        // The turnaround: 10 ns lost of the refill's 10 + 3990.
        assert_eq!(turnaround_share(&refilled), Some(10.0 / 4000.0));
        assert_eq!(turnaround_share(&burst), None);
        // A refill right after the last place filled, before any place could cycle once:
        // the stretch is shorter than half a median request, too short to judge a count
        // of requests in flight over it (the turnaround itself is still judged).
        let mut early = burst.clone();
        early.push(rec(4, 0, 1010, 1020));
        early[4].due_ns = Some(1009);
        assert_eq!(judged_window(&early, 4), None);
        assert_eq!(hold_window(&early, 4), Some((1003, 1010)));
        assert_eq!(turnaround_share(&early), Some(1.0 / 11.0));
    }

    #[test]
    fn first_tokens_read_with_a_later_one_bound_what_ttft_can_have_moved() {
        // 100 responses of TTFT 50, 51 … 149 ms; the first token of the `shared` slowest came
        // with the next, 10 ms after the read before: each can be 10 ms early.
        let recs = |shared: u64| -> Vec<Record> {
            (0..100)
                .map(|i| {
                    let mut r = rec(i, 0, 0, 300_000_000);
                    r.first_content_ns = Some((50 + i) * 1_000_000);
                    r.last_content_ns = Some(300_000_000);
                    if i >= 100 - shared {
                        r.first_token_shared_ns = 10_000_000;
                    }
                    r
                })
                .collect()
        };
        assert_eq!(first_tokens(&recs(0)), None);
        let f = first_tokens(&recs(5)).unwrap();
        assert_eq!((f.shared, f.completed, f.worst_ms), (5, 100, 10.0));
        // p50 cannot move; p99 (148.01 ms) can drop to 143.01 ms, the sixth-slowest's place.
        let [(_, p50, m50), _, (_, p99, m99)] = f.moved_ms;
        assert!((p50 - 99.5).abs() < 1e-9 && m50.abs() < 1e-9, "{f:?}");
        assert!(
            (p99 - 148.01).abs() < 1e-9 && (m99 - 5.0).abs() < 1e-9,
            "{f:?}"
        );
        assert!(f.beyond_resolution());
        assert!(f
            .describe()
            .starts_with("5 of 100 responses (5.0%) got their first token in one read"));
        // One, 1 µs early at most: nothing a table shows can move.
        let mut one = recs(0);
        one[99].first_token_shared_ns = 1000;
        assert!(!first_tokens(&one).unwrap().beyond_resolution());
    }

    #[test]
    fn the_resolution_of_a_figure_is_what_the_table_shows_or_three_digits() {
        assert_eq!(resolution_ms(1.0), 0.01);
        assert_eq!(resolution_ms(1000.0), 1.0);
    }

    #[test]
    fn mean_in_flight_reads_only_inside_the_window() {
        // Readings every 0.5 s: none in flight for 0.5 s (the ramp), then 10, then 20.
        let at = |t_ms: u64, integral_ms: u64| InFlightSample {
            t_ns: t_ms * 1_000_000,
            integral: u128::from(integral_ms) * 1_000_000,
            late_events: 0,
            worst_late_ns: 0,
        };
        let s = [
            at(0, 0),
            at(500, 0),
            at(1000, 5000),
            at(1500, 10_000),
            at(2000, 20_000),
        ];
        // From 0.5 s to 1.5 s: 10 in flight; the ramp before it is not spread over it.
        let m = mean_in_flight(&s, 400_000_000, 1_600_000_000).unwrap();
        assert!((m - 10.0).abs() < 1e-9, "{m}");
        let m = mean_in_flight(&s, 500_000_000, 2_000_000_000).unwrap();
        assert!((m - 40.0 / 3.0).abs() < 1e-9, "{m}");
        // A window the readings cover less than half of is not judged.
        assert_eq!(mean_in_flight(&s, 900_000_000, 3_000_000_000), None);
        assert_eq!(mean_in_flight(&s, 1_100_000_000, 1_400_000_000), None);
        assert_eq!(mean_in_flight(&[], 0, 1), None);
    }

    #[test]
    fn what_other_parts_say_of_the_client_feeds_the_verdict() {
        let mut h = Health::merged("the client had headroom".into(), None, false);
        h.take_in(&[], &["dispatch delay p99 was 3.00 ms".into()]);
        assert!(h.caveat && !h.limited);
        assert_eq!(
            h.verdict,
            "the client kept up, with a caveat: dispatch delay p99 was 3.00 ms"
        );
        h.take_in(&["shard 0: stopped sending".into()], &[]);
        assert!(h.limited);
        assert_eq!(
            h.verdict,
            "the client may have limited this run: shard 0: stopped sending"
        );
        // A verdict of distortion stands as it is.
        let mut d = Health::merged(
            "the client distorted".into(),
            Some(Distortion {
                reasons: vec!["x".into()],
            }),
            true,
        );
        d.take_in(&["y".into()], &["z".into()]);
        assert_eq!(d.verdict, "the client distorted");
    }
}
