//! The load: how many requests in flight or how many per second, for how long, with what
//! warm-up and ramp, and the service-level objectives that define goodput.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::PlanError;
use crate::arrival::{arrival_offsets, Arrival};
use crate::record::Record;

pub use super::nodes::Nodes;

/// The fewest measured requests when neither a count nor a duration is given (as AIPerf and
/// GenAI-Perf).
pub const DEFAULT_REQUEST_COUNT: u64 = 10;

/// Measured requests when neither a count nor a duration is given, as AIPerf and GenAI-Perf
/// decide it: twice the requests kept in flight, and at least [`DEFAULT_REQUEST_COUNT`]
/// (open loop: [`DEFAULT_REQUEST_COUNT`]).
pub fn default_request_count(concurrency: Option<u64>, open_loop: bool) -> u64 {
    match (open_loop, concurrency) {
        (false, Some(c)) => c.saturating_mul(2).max(DEFAULT_REQUEST_COUNT),
        _ => DEFAULT_REQUEST_COUNT,
    }
}

/// What the flags say about the load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadSpec {
    /// Requests in flight (closed loop), or the cap on them with a rate.
    pub concurrency: Option<u64>,
    /// Open loop: requests per second.
    pub request_rate: Option<f64>,
    /// How open-loop arrivals are spaced.
    pub arrival: Arrival,
    /// Gamma shape for `Arrival::Gamma`.
    pub burstiness: f64,
    /// Ramp-up length (ns).
    pub ramp_up_ns: Option<u64>,
    /// Count ramp-up requests in the metrics.
    pub include_ramp_up: bool,
    /// Goodput objectives.
    pub goodput: Vec<Slo>,
    /// Measured requests.
    pub request_count: Option<u64>,
    /// Measure for this long instead (ns).
    pub benchmark_duration_ns: Option<u64>,
    /// Time allowed after the duration for requests in flight (ns).
    pub grace_period_ns: u64,
    /// Requests sent before measuring.
    pub warmup_request_count: u64,
    /// This process's share of a load split across nodes.
    #[serde(default)]
    pub nodes: Nodes,
    /// The wall-clock instant every node starts at (Unix ns), with `--start-at`.
    #[serde(default)]
    pub start_at_unix_ns: Option<u64>,
    /// Requests the client closes on purpose (`--request-cancellation-rate`).
    #[serde(default)]
    pub cancellation: Option<Cancellation>,
    /// A cap on requests between their send and their first token (`--prefill-concurrency`).
    #[serde(default)]
    pub prefill: Option<Prefill>,
    /// A warm-up with a load of its own (AIPerf's `--warmup-*` flags); without it the
    /// warm-up is `warmup_request_count` requests at the run's own load.
    #[serde(default)]
    pub warmup_phase: Option<WarmupSpec>,
    /// AIPerf's user-centric timing: users coming back at a fixed gap.
    #[serde(default)]
    pub user_centric: Option<UserCentric>,
}

/// AIPerf's user-centric timing: `users` users, each sending its session's turns
/// `users / rate` seconds apart (or at once after a slower answer), so that the whole
/// sends `rate` requests a second; the users start staggered over one gap and at staggered
/// points of their sessions, as if the system had been running, and a user whose session
/// ends is replaced by a new one at its next turn's time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UserCentric {
    /// Requests per second across users.
    pub rate: f64,
    /// Users.
    pub users: u64,
}

impl UserCentric {
    /// The time between a user's turns (ns).
    pub fn gap_ns(&self) -> u64 {
        (self.users as f64 / self.rate * 1e9).round() as u64
    }
}

/// What AIPerf's `--warmup-*` flags ask of the warm-up; each left out is the measured
/// phase's.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct WarmupSpec {
    /// Stop sending after this long (the first of this and the count wins).
    pub duration_ns: Option<u64>,
    /// Requests (sessions) in flight, or the cap with a rate.
    pub concurrency: Option<u64>,
    /// Open loop: requests per second.
    pub request_rate: Option<f64>,
    /// How open-loop arrivals are spaced.
    pub arrival: Option<Arrival>,
    /// After the duration, how long to wait for what is in flight (default: until it ends).
    pub grace_ns: Option<u64>,
    /// Ramp of the concurrency (or the rate) from 1.
    pub ramp_ns: Option<u64>,
    /// Cap on requests waiting for their first token, and its ramp.
    pub prefill: Option<u64>,
    /// Ramp of that cap from 1.
    pub prefill_ramp_ns: Option<u64>,
}

/// The first request id of a warm-up phase of its own: its ids never meet the measured ones,
/// whose count a timed warm-up does not know in advance.
pub const WARM_IDS: u64 = 1 << 50;

/// A warm-up phase with a load of its own, ready.
#[derive(Debug, Clone)]
pub struct WarmPhase {
    /// Requests (sessions) in flight, or the cap on them with a rate (`u64::MAX`: none).
    pub concurrency: u64,
    /// Open loop: its send times, from its start.
    pub offsets: Option<Arc<Vec<u64>>>,
    /// Stop after this many requests.
    pub count: Option<u64>,
    /// Stop sending after this long.
    pub duration_ns: Option<u64>,
    /// Then cut what is in flight after this long (none: let it end).
    pub grace_ns: Option<u64>,
    /// Closed loop: ramp of the concurrency (ns; 0: none).
    pub ramp_ns: u64,
    /// The cap on requests waiting for their first token.
    pub prefill: Option<Prefill>,
}

/// AIPerf's request cancellation: this share of requests is closed by the client `delay_ns`
/// after it starts (unless it ended before).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cancellation {
    /// Share of requests chosen, in percent (0 to 100).
    pub percent: f64,
    /// How long after its start a chosen request is closed (ns).
    pub delay_ns: u64,
}

impl Cancellation {
    /// Whether request `id` is chosen: a fixed draw per request id and seed, so the same
    /// requests are chosen whatever shard sends them.
    pub fn chooses(&self, seed: u64, id: u64) -> bool {
        // SplitMix64's finaliser over the seed and the id: uniform, and the same everywhere.
        let mut z = seed ^ id.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 11) as f64 / (1u64 << 53) as f64) * 100.0 < self.percent
    }
}

/// AIPerf's prefill concurrency: at most `cap` requests between their send and their first
/// token (across shards), reached linearly from 1 over `ramp_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prefill {
    /// Requests waiting for their first token, at most.
    pub cap: u64,
    /// Ramp from 1 to `cap` over this long from the start (ns; 0: none).
    pub ramp_ns: u64,
}

/// The load, ready.
#[derive(Debug, Clone)]
pub struct Load {
    /// Requests in flight across shards (closed loop), or the cap on them (open loop;
    /// `u64::MAX` for none).
    pub concurrency: u64,
    /// Open loop: requests per second.
    pub rate: Option<f64>,
    /// Open loop: every send time of the run (offsets from the start, ns), fixed in advance.
    pub offsets: Option<Arc<Vec<u64>>>,
    /// Ramp-up length (ns; 0 = none).
    pub ramp_ns: u64,
    /// Count ramp-up requests in the metrics.
    pub include_ramp: bool,
    /// Goodput objectives.
    pub slos: Vec<Slo>,
    /// Measured requests, when stopping by count.
    pub request_count: Option<u64>,
    /// Measurement duration (ns), when stopping by time.
    pub duration_ns: Option<u64>,
    /// Grace period after the duration (ns).
    pub grace_ns: u64,
    /// Warm-up requests.
    pub warmup: u64,
    /// The work to size shards for: requests in flight (open loop: a second's arrivals).
    pub streams: u64,
    /// A staircase: the closed-loop cap steps through these, one step at a time.
    pub steps: Option<Steps>,
    /// This node's share of the load: `concurrency`, `request_count`, `warmup` and `offsets`
    /// are the whole load's, and each node sends only its own requests of it.
    pub nodes: Nodes,
    /// Requests the client closes on purpose, and the seed that chooses them.
    pub cancellation: Option<(Cancellation, u64)>,
    /// The cap on requests waiting for their first token (this node's share).
    pub prefill: Option<Prefill>,
    /// A warm-up phase with a load of its own (then `warmup` is 0).
    pub warm: Option<WarmPhase>,
    /// User-centric timing (then `concurrency` is the users).
    pub user_centric: Option<UserCentric>,
}

/// The most steps in one staircase.
pub const MAX_STEPS: usize = 16;

/// A closed loop whose concurrency rises in steps inside one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Steps {
    /// How long each step lasts (ns).
    pub step_ns: u64,
    /// Requests in flight in each step, across shards.
    pub caps: Vec<u64>,
}

impl Load {
    /// This closed loop as a staircase through `caps`, `step_ns` each: it runs by time (every
    /// step in full, unless the knee stops it), and is sized for its highest step.
    pub fn staircase(&mut self, caps: Vec<u64>, step_ns: u64) -> Result<(), PlanError> {
        let flag = |m: String| Err(PlanError::Flag(m));
        if self.offsets.is_some() || self.ramp_ns > 0 || self.warmup > 0 || self.warm.is_some() {
            return flag(
                "--staircase raises a closed loop's concurrency in steps: drop --request-rate, \
                 --ramp-up and the warm-up (the first step warms the server)"
                    .into(),
            );
        }
        if !(2..=MAX_STEPS).contains(&caps.len()) || caps.windows(2).any(|w| w[0] >= w[1]) {
            return flag(format!(
                "--staircase: --concurrency needs 2 to {MAX_STEPS} rising steps, e.g. 8..256"
            ));
        }
        if step_ns < 1_000_000_000 {
            return flag("--staircase: each step lasts at least 1s".into());
        }
        self.concurrency = *caps.last().expect("steps");
        self.streams = self.concurrency;
        self.request_count = None;
        self.duration_ns = Some(step_ns * caps.len() as u64);
        self.steps = Some(Steps { step_ns, caps });
        Ok(())
    }
}

/// The warm-up phase `w` asks for, each setting not given taken from the measured phase's.
fn warm_phase(
    s: &LoadSpec,
    w: &WarmupSpec,
    concurrency: u64,
    seed: u64,
    trace_given: bool,
) -> Result<WarmPhase, PlanError> {
    let flag = |m: String| Err(PlanError::Flag(m));
    let count = Some(s.warmup_request_count).filter(|c| *c > 0);
    if count.is_none() && w.duration_ns.is_none() {
        return flag(
            "a warm-up of its own stops by --warmup-request-count (--num-warmup-sessions) or \
             --warmup-duration: give one"
                .into(),
        );
    }
    if trace_given {
        return flag(
            "--fixed-schedule replays the trace as written: its warm-up is \
             --warmup-request-count of its first lines, at the trace's times"
                .into(),
        );
    }
    if w.duration_ns == Some(0) {
        return flag("--warmup-duration must be longer than 0".into());
    }
    if w.grace_ns.is_some() && w.duration_ns.is_none() {
        return flag("--warmup-grace-period follows --warmup-duration: give it too".into());
    }
    if w.concurrency == Some(0) {
        return flag("--warmup-concurrency must be at least 1".into());
    }
    let rate = w.request_rate.or(s.request_rate);
    if let Some(r) = rate {
        if !(MIN_RATE..=MAX_REQUESTS as f64).contains(&r) {
            return flag(format!(
                "--warmup-request-rate {r:?}: must be from {MIN_RATE} to {MAX_REQUESTS} per second"
            ));
        }
    }
    let ramp_ns = w.ramp_ns.or(s.ramp_up_ns).unwrap_or(0);
    let cap = match (w.concurrency, rate) {
        (Some(c), _) => c,
        // A rate of its own is not capped by the measured phase's closed loop.
        (None, Some(_)) if w.request_rate.is_some() && s.request_rate.is_none() => u64::MAX,
        (None, _) => concurrency,
    };
    let prefill = match (w.prefill, s.prefill) {
        (Some(c), main) => Some(Prefill {
            cap: c,
            ramp_ns: w.prefill_ramp_ns.or(main.map(|p| p.ramp_ns)).unwrap_or(0),
        }),
        (None, main) => main.map(|p| Prefill {
            ramp_ns: w.prefill_ramp_ns.unwrap_or(p.ramp_ns),
            ..p
        }),
    };
    if let Some(p) = &prefill {
        if p.cap == 0 || (cap != u64::MAX && p.cap > cap) {
            return flag(format!(
                "--warmup-prefill-concurrency {}: from 1 to the warm-up's concurrency",
                p.cap
            ));
        }
    }
    let offsets = rate.map(|r| {
        Arc::new(arrival_offsets(
            r,
            w.arrival.unwrap_or(s.arrival),
            s.burstiness,
            seed ^ WARM_IDS,
            count,
            w.duration_ns.map(|d| d + ramp_ns),
            ramp_ns,
        ))
    });
    let nodes = s.nodes;
    Ok(WarmPhase {
        concurrency: if cap == u64::MAX {
            cap
        } else {
            nodes.share(cap)
        },
        offsets,
        count,
        duration_ns: w.duration_ns,
        grace_ns: w.grace_ns,
        ramp_ns: if rate.is_some() { 0 } else { ramp_ns },
        prefill: prefill.map(|p| Prefill {
            cap: nodes.share(p.cap),
            ..p
        }),
    })
}

/// The most requests one run plans: each keeps a record (a few hundred bytes) until the
/// report, and an open loop's send times are drawn before the start.
pub const MAX_REQUESTS: u64 = 10_000_000;

/// The lowest open-loop rate: one request every 1,000 s.
const MIN_RATE: f64 = 0.001;

/// How many requests the flags plan, warm-up included, counted before anything is allocated.
fn planned_requests(s: &LoadSpec) -> f64 {
    let mut warmup = s.warmup_request_count as f64;
    if let Some(w) = &s.warmup_phase {
        // A timed warm-up at a rate plans its arrivals too.
        if let (0, Some(d), Some(rate)) = (
            s.warmup_request_count,
            w.duration_ns,
            w.request_rate.or(s.request_rate),
        ) {
            warmup = rate * (d + w.ramp_ns.unwrap_or(0)) as f64 / 1e9;
        }
    }
    match (s.request_count, s.benchmark_duration_ns, s.request_rate) {
        (Some(n), _, _) => n as f64 + warmup,
        (None, Some(d), Some(rate)) => rate * (d + s.ramp_up_ns.unwrap_or(0)) as f64 / 1e9 + warmup,
        // Closed loop for a duration: as many as finish, one record each.
        (None, Some(_), None) => warmup,
        (None, None, rate) => {
            default_request_count(s.concurrency.or(Some(1)), rate.is_some()) as f64 + warmup
        }
    }
}

/// The most requests the flags can send, warm-up included, when that is known before the run
/// (`None` for a closed loop that runs for a duration: as many as finish).
pub fn request_bound(s: &LoadSpec) -> Option<u64> {
    let closed_for_a_time =
        s.request_count.is_none() && s.benchmark_duration_ns.is_some() && s.request_rate.is_none();
    (!closed_for_a_time).then(|| planned_requests(s).ceil() as u64)
}

impl Load {
    /// Validates the spec and draws the send times. `trace` holds a replayed file's send
    /// times (ns from its first line), for `--fixed-schedule`.
    /// Builds the load; refuses contradictory flags and plans over [`MAX_REQUESTS`].
    pub fn build(s: &LoadSpec, seed: u64, trace: Option<Vec<u64>>) -> Result<Load, PlanError> {
        let trace_given = trace.is_some();
        // Warm-up requests at the run's own load, ahead of the measured ones (none when the
        // warm-up is a phase of its own).
        let inline_warmup = if s.warmup_phase.is_some() {
            0
        } else {
            s.warmup_request_count
        };
        let flag = |m: &str| Err(PlanError::Flag(m.to_string()));
        if s.concurrency == Some(0) {
            return flag("--concurrency must be at least 1");
        }
        if let Some(r) = s.request_rate {
            if !(MIN_RATE..=MAX_REQUESTS as f64).contains(&r) {
                return Err(PlanError::Flag(format!(
                    "--request-rate {r:?}: must be from {MIN_RATE} to {MAX_REQUESTS} requests per second"
                )));
            }
        }
        let planned = planned_requests(s);
        if planned > MAX_REQUESTS as f64 {
            return Err(PlanError::Flag(format!(
                "this load plans {planned:.3e} requests; a run holds at most {MAX_REQUESTS} \
                 (every request's record is kept until the end, and an open-loop schedule is \
                 drawn before the start): lower --request-count, or the rate or the duration"
            )));
        }
        if !(s.burstiness > 0.0 && s.burstiness.is_finite()) {
            return flag("--burstiness must be a positive number");
        }
        if s.request_count == Some(0) {
            return flag("--request-count must be at least 1");
        }
        if s.benchmark_duration_ns == Some(0) {
            return flag("--benchmark-duration must be longer than 0");
        }
        if trace.is_some() && s.request_rate.is_some() {
            return flag("give --fixed-schedule or --request-rate, not both");
        }
        if let Some(c) = &s.cancellation {
            if !(c.percent >= 0.0 && c.percent <= 100.0) {
                return Err(PlanError::Flag(format!(
                    "--request-cancellation-rate {}: a percentage from 0 to 100",
                    c.percent
                )));
            }
        }
        if let Some(p) = &s.prefill {
            if p.cap == 0 {
                return flag("--prefill-concurrency must be at least 1");
            }
            if let Some(c) = s.concurrency.filter(|c| p.cap > *c) {
                return Err(PlanError::Flag(format!(
                    "--prefill-concurrency {} is more than --concurrency {c}: requests waiting \
                     for their first token are requests in flight",
                    p.cap
                )));
            }
            if s.nodes.is_split() && p.cap < s.nodes.count {
                return Err(PlanError::Flag(format!(
                    "--prefill-concurrency {} split over --node-count {} leaves a node without \
                     a prefill place",
                    p.cap, s.nodes.count
                )));
            }
        }
        if let Some(u) = &s.user_centric {
            if !(u.rate >= MIN_RATE && u.rate <= MAX_REQUESTS as f64) || u.users == 0 {
                return Err(PlanError::Flag(format!(
                    "--user-centric-rate {} --num-users {}: a rate from {MIN_RATE} per second \
                     and at least one user",
                    u.rate, u.users
                )));
            }
            if s.request_rate.is_some() || trace.is_some() {
                return flag(
                    "--user-centric-rate sets the rate: drop --request-rate and --fixed-schedule",
                );
            }
            if let Some(c) = s.concurrency.filter(|c| *c < u.users) {
                return Err(PlanError::Flag(format!(
                    "--concurrency {c} is below --num-users {}: each user keeps one place",
                    u.users
                )));
            }
        }
        let open_loop = s.request_rate.is_some() || trace.is_some();
        let concurrency = match (s.concurrency, open_loop) {
            _ if s.user_centric.is_some() => s.user_centric.map_or(1, |u| u.users),
            (Some(c), _) => c,
            (None, true) => u64::MAX,
            (None, false) => 1,
        };
        // Both a count and a duration: whichever is reached first ends the run (as AIPerf).
        let request_count = match (s.request_count, s.benchmark_duration_ns) {
            (Some(c), _) => Some(c),
            (None, Some(_)) => None,
            (None, None) => Some(default_request_count(Some(concurrency), open_loop)),
        };
        let ramp_ns = s.ramp_up_ns.unwrap_or(0);
        let offsets = match (trace, s.request_rate) {
            (Some(mut t), _) => {
                if let Some(c) = s.request_count {
                    t.truncate((c + inline_warmup) as usize);
                }
                Some(Arc::new(t))
            }
            // Warm-up arrivals come first, then the ramp, then the measured load.
            (None, Some(rate)) => Some(Arc::new(arrival_offsets(
                rate,
                s.arrival,
                s.burstiness,
                seed,
                request_count.map(|c| c + inline_warmup),
                s.benchmark_duration_ns.map(|d| d + ramp_ns),
                ramp_ns,
            ))),
            (None, None) => None,
        };
        let streams = match (&offsets, s.request_rate) {
            (_, Some(rate)) => (rate.ceil() as u64).min(concurrency),
            (Some(t), None) => {
                let span_s = t.last().copied().unwrap_or(0) as f64 / 1e9;
                ((t.len() as f64 / span_s.max(1.0)).ceil() as u64).min(concurrency)
            }
            (None, None) => concurrency,
        };
        let nodes = s.nodes;
        if nodes.is_split() {
            let n = nodes.count;
            let few = |what: String| {
                Err(PlanError::Flag(format!(
                    "{what} split over --node-count {n} leaves a node without load: give each \
                     node at least one, or use fewer nodes"
                )))
            };
            if concurrency != u64::MAX && concurrency < n {
                return few(format!("--concurrency {concurrency}"));
            }
            if let Some(c) = request_count.filter(|c| *c < n) {
                return few(format!("--request-count {c}"));
            }
        }
        let warm = match &s.warmup_phase {
            None => None,
            Some(w) => Some(warm_phase(s, w, concurrency, seed, trace_given)?),
        };
        Ok(Load {
            concurrency,
            rate: s.request_rate,
            offsets,
            ramp_ns,
            include_ramp: s.include_ramp_up,
            slos: s.goodput.clone(),
            request_count,
            duration_ns: s.benchmark_duration_ns,
            grace_ns: s.grace_period_ns,
            warmup: inline_warmup,
            // Shards are sized for this node's share of the work.
            streams: streams.div_ceil(nodes.count),
            steps: None,
            nodes,
            cancellation: s
                .cancellation
                .filter(|c| c.percent > 0.0)
                .map(|c| (c, seed)),
            prefill: s.prefill.map(|p| Prefill {
                cap: nodes.share(p.cap),
                ..p
            }),
            warm,
            user_centric: s.user_centric,
        })
    }

    /// The name of the load in folder names: `concurrency8`, `request_rate10`, `trace`.
    pub fn mode(&self) -> String {
        match (self.rate, &self.offsets) {
            (Some(r), _) => format!("request_rate{r}"),
            (None, Some(_)) => "trace".into(),
            (None, None) => format!("concurrency{}", self.concurrency),
        }
    }

    /// The closed-loop concurrency this node holds steady, if any (not with a rate, a trace,
    /// a ramp or a staircase, whose cap changes step by step).
    pub fn steady_concurrency(&self) -> Option<u64> {
        (self.offsets.is_none() && self.ramp_ns == 0 && self.steps.is_none())
            .then_some(self.nodes.share(self.concurrency))
    }
}

/// One service-level objective.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// Which metric.
    pub metric: SloMetric,
    /// Upper bound (ms).
    pub max_ms: f64,
}

/// Metrics an SLO can bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SloMetric {
    /// Time to first token.
    Ttft,
    /// Inter-token latency.
    Itl,
    /// Request latency.
    E2e,
}

/// An SLO that is not `metric:milliseconds`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SloError {
    /// No `:` between the metric and its bound.
    #[error("{0:?}: expected metric:milliseconds, e.g. ttft:200")]
    Shape(String),
    /// A metric an SLO cannot bound.
    #[error("unknown SLO metric {0:?} (ttft, itl, e2e)")]
    Metric(String),
    /// A bound that is not a number.
    #[error("{slo:?}: {bound:?} is not a number of milliseconds")]
    NotANumber {
        /// The whole SLO.
        slo: String,
        /// Its bound as written.
        bound: String,
    },
    /// A bound that is not positive and finite.
    #[error("{0:?}: the bound must be a positive number of milliseconds")]
    NotPositive(String),
}

/// Parses `ttft:200` (vLLM's and GenAI-Perf's syntax, in milliseconds).
pub fn parse_slo(s: &str) -> Result<Slo, SloError> {
    let (name, v) = s.split_once(':').ok_or_else(|| SloError::Shape(s.into()))?;
    let metric = match name.trim() {
        "ttft" | "time_to_first_token" => SloMetric::Ttft,
        "itl" | "tpot" | "inter_token_latency" => SloMetric::Itl,
        "e2e" | "e2el" | "request_latency" => SloMetric::E2e,
        other => return Err(SloError::Metric(other.into())),
    };
    let max_ms: f64 = v.trim().parse().map_err(|_| SloError::NotANumber {
        slo: s.into(),
        bound: v.into(),
    })?;
    if !(max_ms > 0.0 && max_ms.is_finite()) {
        return Err(SloError::NotPositive(s.into()));
    }
    Ok(Slo { metric, max_ms })
}

impl Slo {
    /// Whether a successful request met this objective (a missing value does not).
    pub fn met(&self, r: &Record) -> bool {
        let ns = match self.metric {
            SloMetric::Ttft => r.ttft().map(|v| v as f64),
            SloMetric::Itl => r.itl(),
            SloMetric::E2e => Some(r.latency() as f64),
        };
        ns.is_some_and(|v| v <= self.max_ms * 1e6)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::record::Phase;

    /// A closed loop with every flag at its default (shared with the sweep's tests).
    pub(in crate::plan) fn spec() -> LoadSpec {
        LoadSpec {
            concurrency: None,
            request_rate: None,
            arrival: Arrival::Poisson,
            burstiness: 1.0,
            ramp_up_ns: None,
            include_ramp_up: false,
            goodput: Vec::new(),
            request_count: None,
            benchmark_duration_ns: None,
            grace_period_ns: 30_000_000_000,
            warmup_request_count: 0,
            nodes: Nodes::default(),
            start_at_unix_ns: None,
            cancellation: None,
            prefill: None,
            warmup_phase: None,
            user_centric: None,
        }
    }

    #[test]
    fn cancellation_chooses_about_its_share_the_same_ids_for_a_seed_and_others_for_another() {
        let c = |percent| Cancellation {
            percent,
            delay_ns: 0,
        };
        let chosen = |c: Cancellation, seed| -> Vec<u64> {
            (0..20_000).filter(|id| c.chooses(seed, *id)).collect()
        };
        let quarter = chosen(c(25.0), 7);
        let share = quarter.len() as f64 / 20_000.0;
        assert!((0.24..0.26).contains(&share), "{share}");
        // Ids spread evenly: each half of the run has about half of them.
        let early = quarter.iter().filter(|id| **id < 10_000).count() as f64;
        assert!(
            (0.47..0.53).contains(&(early / quarter.len() as f64)),
            "{early}"
        );
        assert_eq!(
            chosen(c(25.0), 7),
            quarter,
            "the same seed chooses the same ids"
        );
        let other = chosen(c(25.0), 8);
        let both = other
            .iter()
            .filter(|id| quarter.binary_search(id).is_ok())
            .count();
        assert!(
            both < other.len() / 2,
            "another seed chooses others: {both} in common"
        );
        assert!(chosen(c(0.0), 7).is_empty());
        assert_eq!(chosen(c(100.0), 7).len(), 20_000);
    }

    #[test]
    fn closed_loop_defaults_and_counts() {
        let l = Load::build(&spec(), 0, None).unwrap();
        assert_eq!(
            (l.concurrency, l.request_count, l.streams),
            (1, Some(DEFAULT_REQUEST_COUNT), 1)
        );
        assert_eq!(l.mode(), "concurrency1");
        assert_eq!(l.steady_concurrency(), Some(1));
        let l = Load::build(
            &LoadSpec {
                concurrency: Some(2500),
                benchmark_duration_ns: Some(1),
                ..spec()
            },
            0,
            None,
        )
        .unwrap();
        assert_eq!((l.request_count, l.streams), (None, 2500));
    }

    #[test]
    fn an_unset_count_is_twice_the_concurrency_and_at_least_ten() {
        let count = |concurrency, request_rate| {
            Load::build(
                &LoadSpec {
                    concurrency,
                    request_rate,
                    ..spec()
                },
                0,
                None,
            )
            .unwrap()
            .request_count
        };
        assert_eq!(count(Some(4), None), Some(10));
        assert_eq!(count(Some(5), None), Some(10));
        assert_eq!(count(Some(6), None), Some(12));
        assert_eq!(count(Some(64), None), Some(128));
        // With a rate the cap is no measure of the load: AIPerf's 10.
        assert_eq!(count(Some(64), Some(5.0)), Some(10));
        // A concurrency whose default count passes the cap is refused up front.
        let huge = LoadSpec {
            concurrency: Some(MAX_REQUESTS),
            ..spec()
        };
        assert!(Load::build(&huge, 0, None).is_err());
    }

    #[test]
    fn open_loop_draws_its_schedule_from_the_seed() {
        let s = LoadSpec {
            request_rate: Some(100.0),
            request_count: Some(50),
            warmup_request_count: 5,
            ..spec()
        };
        let a = Load::build(&s, 7, None).unwrap();
        assert_eq!(
            a.offsets.as_ref().unwrap().len(),
            55,
            "warm-up arrivals first"
        );
        assert_eq!(a.offsets, Load::build(&s, 7, None).unwrap().offsets);
        assert_ne!(a.offsets, Load::build(&s, 8, None).unwrap().offsets);
        assert_eq!((a.concurrency, a.streams), (u64::MAX, 100));
        assert_eq!(a.mode(), "request_rate100");
        assert_eq!(a.steady_concurrency(), None);
        // A replayed trace keeps its own times, cut to the count.
        let t = Load::build(
            &LoadSpec {
                request_count: Some(2),
                ..spec()
            },
            0,
            Some(vec![0, 10, 20, 30]),
        )
        .unwrap();
        assert_eq!(t.offsets.unwrap().as_slice(), &[0, 10]);
    }

    #[test]
    fn plans_over_the_budget_are_refused_before_anything_is_drawn() {
        let too_many = [
            LoadSpec {
                request_count: Some(MAX_REQUESTS + 1),
                ..spec()
            },
            LoadSpec {
                request_count: Some(u64::MAX),
                request_rate: Some(10.0),
                ..spec()
            },
            LoadSpec {
                request_count: None,
                benchmark_duration_ns: Some(100_000_000_000),
                request_rate: Some(1e6),
                ..spec()
            },
            LoadSpec {
                request_count: Some(MAX_REQUESTS),
                warmup_request_count: 1,
                ..spec()
            },
        ];
        for s in too_many {
            let e = Load::build(&s, 1, None).unwrap_err().to_string();
            assert!(e.contains("plans") && e.contains("10000000"), "{e}");
        }
        for rate in [1e-300, 1e9] {
            let s = LoadSpec {
                request_rate: Some(rate),
                ..spec()
            };
            let e = Load::build(&s, 1, None).unwrap_err().to_string();
            assert!(e.contains("--request-rate") && e.len() < 200, "{e}");
        }
        let ok = LoadSpec {
            request_count: Some(MAX_REQUESTS),
            ..spec()
        };
        assert!(
            Load::build(&ok, 1, None).is_ok(),
            "closed loop draws nothing"
        );
    }

    #[test]
    fn bad_loads_say_which_flag() {
        let cases = [
            (
                LoadSpec {
                    concurrency: Some(0),
                    ..spec()
                },
                "--concurrency",
            ),
            (
                LoadSpec {
                    request_rate: Some(-1.0),
                    ..spec()
                },
                "--request-rate",
            ),
            (
                LoadSpec {
                    request_rate: Some(f64::NAN),
                    ..spec()
                },
                "--request-rate",
            ),
            (
                LoadSpec {
                    burstiness: 0.0,
                    ..spec()
                },
                "--burstiness",
            ),
            (
                LoadSpec {
                    request_count: Some(0),
                    ..spec()
                },
                "--request-count",
            ),
        ];
        for (s, want) in cases {
            let e = Load::build(&s, 0, None).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        // A count and a duration together: both bound the run.
        let l = Load::build(
            &LoadSpec {
                request_count: Some(7),
                benchmark_duration_ns: Some(1_000_000_000),
                ..spec()
            },
            0,
            None,
        )
        .unwrap();
        assert_eq!(
            (l.request_count, l.duration_ns),
            (Some(7), Some(1_000_000_000))
        );
        let both = LoadSpec {
            request_rate: Some(1.0),
            ..spec()
        };
        assert!(Load::build(&both, 0, Some(vec![0])).is_err());
    }

    #[test]
    fn slos_parse_and_apply() {
        assert_eq!(
            parse_slo("ttft:200").unwrap(),
            Slo {
                metric: SloMetric::Ttft,
                max_ms: 200.0
            }
        );
        assert_eq!(parse_slo("ttft"), Err(SloError::Shape("ttft".into())));
        assert_eq!(parse_slo("speed:1"), Err(SloError::Metric("speed".into())));
        assert_eq!(
            parse_slo("itl:fast"),
            Err(SloError::NotANumber {
                slo: "itl:fast".into(),
                bound: "fast".into()
            })
        );
        assert_eq!(
            parse_slo("e2e:-5"),
            Err(SloError::NotPositive("e2e:-5".into()))
        );
        let mut r = Record::new(0, 0, Phase::Profiling, 0, Some(1));
        r.start_ns = 0;
        r.first_content_ns = Some(100_000_000);
        r.last_content_ns = Some(600_000_000);
        r.osl = Some(11);
        // Eleven tokens in one chunk: no ITL, so an ITL objective is not met (it would be
        // with ITL counted as 0).
        assert!(!parse_slo("itl:50").unwrap().met(&r));
        r.second_content_ns = Some(150_000_000);
        // ITL: (600 − 100) / 10 = 50 ms.
        assert!(parse_slo("itl:50").unwrap().met(&r));
        assert!(!parse_slo("itl:49").unwrap().met(&r));
        assert!(parse_slo("ttft:100").unwrap().met(&r));
        assert!(!parse_slo("e2e:599").unwrap().met(&r));
    }
}
