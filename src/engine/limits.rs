//! What bounds a phase of the run, decided from times given as arguments: the concurrency
//! cap (and its ramp), when to stop sending, and when to cut what is still in flight. The
//! shard's watcher asks [`Limits::due`] every few milliseconds with the clock's time; the
//! rules themselves are tested here with made-up times, without sleeping.

use crate::plan::sweep::{judge_step, StepVerdict};
use crate::plan::Load;

/// A linear ramp of the concurrency cap from 1 to the phase's cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ramp {
    /// When it starts (`CLOCK_MONOTONIC` ns).
    pub start_ns: u64,
    /// How long it lasts (ns).
    pub len_ns: u64,
    /// Tag requests sent meanwhile as ramp-up.
    pub tag: bool,
}

/// A staircase of this shard's cap: `caps[k]` from `start_ns + k × step_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stairs {
    /// When the first step starts.
    pub start_ns: u64,
    /// How long a step lasts.
    pub step_ns: u64,
    /// This shard's cap in each step (the first `len`).
    pub caps: [usize; crate::plan::load::MAX_STEPS],
    /// Steps.
    pub len: usize,
}

/// What bounds a phase's dispatching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Limits {
    /// Most requests in flight.
    pub cap: usize,
    /// Closed-loop ramp of `cap`.
    pub ramp: Option<Ramp>,
    /// Closed-loop staircase of `cap`.
    pub stairs: Option<Stairs>,
    /// Stop dispatching at this time.
    pub dispatch_deadline: Option<u64>,
    /// Cut what is in flight at this time.
    pub hard_deadline: Option<u64>,
    /// `--prefill-concurrency`: this shard's part of the cap on requests waiting for their
    /// first token.
    pub prefill: Option<PrefillCap>,
    /// User-centric timing: the phase's first request id and when it started; the first
    /// users' sessions are staggered from it.
    pub users_from: Option<(u64, u64)>,
}

/// A shard's part of the cap on requests between their send and their first token, ramped
/// from 1 (across shards) to the whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PrefillCap {
    /// The cap across shards.
    pub total: u64,
    /// This shard, of `shards`.
    pub index: usize,
    pub shards: usize,
    /// The ramp's start and length (ns; length 0: none).
    pub start_ns: u64,
    pub ramp_ns: u64,
}

/// What the watcher must do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Due {
    /// Send nothing more.
    pub stop_dispatch: bool,
    /// Cut every request in flight.
    pub cancel: bool,
}

impl Limits {
    /// No bound but the cap: warm-up, which ends by count.
    pub(super) fn capped(cap: usize) -> Limits {
        Limits {
            cap,
            ramp: None,
            stairs: None,
            dispatch_deadline: None,
            hard_deadline: None,
            prefill: None,
            users_from: None,
        }
    }

    /// The measured phase of a closed loop started at `t0`: with a duration, sending stops
    /// after the ramp and the duration, and what is in flight is cut a grace period later.
    pub(super) fn closed_loop(load: &Load, cap: usize, t0: u64) -> Limits {
        let ramp = (load.ramp_ns, !load.include_ramp);
        Limits::timed(cap, t0, ramp, load.duration_ns, Some(load.grace_ns))
    }

    /// A closed phase started at `t0` with a ramp (its length, and whether requests sent
    /// meanwhile are tagged): with a duration, sending stops after the ramp and the duration,
    /// and what is in flight is cut `grace` later (never, without one).
    fn timed(
        cap: usize,
        t0: u64,
        (ramp_ns, tag): (u64, bool),
        duration_ns: Option<u64>,
        grace_ns: Option<u64>,
    ) -> Limits {
        let dispatch = duration_ns.map(|d| t0 + ramp_ns + d);
        Limits {
            cap,
            ramp: (ramp_ns > 0).then_some(Ramp {
                start_ns: t0,
                len_ns: ramp_ns,
                tag,
            }),
            stairs: None,
            dispatch_deadline: dispatch,
            hard_deadline: dispatch.zip(grace_ns).map(|(d, g)| d + g),
            prefill: None,
            users_from: None,
        }
    }

    /// An open loop started at `t0`: the schedule decides when sending stops; with a
    /// duration, what is in flight is cut a grace period after the ramp and the duration.
    pub(super) fn open_loop(load: &Load, cap: usize, t0: u64) -> Limits {
        Limits {
            cap,
            ramp: None,
            stairs: None,
            dispatch_deadline: None,
            hard_deadline: load
                .duration_ns
                .map(|d| t0 + d + load.ramp_ns + load.grace_ns),
            prefill: None,
            users_from: None,
        }
    }

    /// A warm-up phase of its own started at `t0`: sending stops after its ramp and duration,
    /// and what is in flight is cut a grace period later when one is given.
    pub(super) fn warm_up(w: &crate::plan::load::WarmPhase, cap: usize, t0: u64) -> Limits {
        Limits::timed(cap, t0, (w.ramp_ns, false), w.duration_ns, w.grace_ns)
    }

    /// A closed loop's staircase, for shard `index` of `n` (each step's cap split as
    /// concurrency is).
    pub(super) fn with_stairs(mut self, load: &Load, index: usize, n: usize) -> Limits {
        if let (Some(s), Some(r)) = (&load.steps, &self.dispatch_deadline) {
            let mut caps = [0; crate::plan::load::MAX_STEPS];
            for (c, total) in caps.iter_mut().zip(&s.caps) {
                *c = super::schedule::share(*total, n, index) as usize;
            }
            self.stairs = Some(Stairs {
                start_ns: r - s.step_ns * s.caps.len() as u64,
                step_ns: s.step_ns,
                caps,
                len: s.caps.len(),
            });
        }
        self
    }

    /// With `--prefill-concurrency`: shard `index` of `n`'s part of the cap, its ramp (when
    /// `ramp`) starting at `t0`.
    pub(super) fn with_prefill(
        mut self,
        prefill: Option<crate::plan::load::Prefill>,
        index: usize,
        n: usize,
        t0: u64,
        ramp: bool,
    ) -> Limits {
        self.prefill = prefill.map(|p| PrefillCap {
            total: p.cap,
            index,
            shards: n,
            start_ns: t0,
            ramp_ns: if ramp { p.ramp_ns } else { 0 },
        });
        self
    }

    /// With user-centric timing: the phase's first request id is `first`, and it started at
    /// `t0`.
    pub(super) fn with_users(mut self, load: &Load, first: u64, t0: u64) -> Limits {
        self.users_from = load.user_centric.map(|_| (first, t0));
        self
    }

    /// The most requests this shard may have between send and first token at `now`
    /// (`usize::MAX`: no cap).
    pub(super) fn prefill_cap_at(&self, now: u64) -> usize {
        let Some(p) = &self.prefill else {
            return usize::MAX;
        };
        let total = if now < p.start_ns + p.ramp_ns && p.total > 1 {
            let f = now.saturating_sub(p.start_ns) as f64 / p.ramp_ns as f64;
            1 + ((p.total - 1) as f64 * f) as u64
        } else {
            p.total
        };
        super::schedule::share(total, p.shards, p.index) as usize
    }

    /// True while the prefill cap still grows.
    pub(super) fn prefill_ramping(&self, now: u64) -> bool {
        self.prefill.is_some_and(|p| now < p.start_ns + p.ramp_ns)
    }

    /// The cap at time `now`.
    pub(super) fn cap_at(&self, now: u64) -> usize {
        if let Some(s) = &self.stairs {
            let k = (now.saturating_sub(s.start_ns) / s.step_ns) as usize;
            return s.caps[k.min(s.len - 1)];
        }
        match self.ramp {
            Some(r) if now < r.start_ns + r.len_ns && self.cap > 1 => {
                let f = now.saturating_sub(r.start_ns) as f64 / r.len_ns as f64;
                1 + ((self.cap - 1) as f64 * f) as usize
            }
            _ => self.cap,
        }
    }

    /// What is due at `now`; `interrupted` when the user pressed Ctrl-C.
    pub(super) fn due(&self, now: u64, interrupted: bool) -> Due {
        let hard = interrupted || self.hard_deadline.is_some_and(|d| now >= d);
        Due {
            stop_dispatch: hard || self.dispatch_deadline.is_some_and(|d| now >= d),
            cancel: hard,
        }
    }
}

/// Watches a staircase run from the main thread and says when to stop: the first step whose
/// throughput (completions per second after its first quarter) stopped scaling by the
/// sweep's rule ([`judge_step`]). A step's interval is that of a closed loop's completion
/// count, whose places each complete a renewal process: relative half-width 1.96 × CV/√n,
/// with CV the coefficient of variation of the latencies of the n requests completed in
/// the window, and never under one completion (1/n).
pub(super) struct StairWatch {
    start_ns: u64,
    step_ns: u64,
    caps: Vec<u64>,
    /// The step now watched, and (time, completions, Σ latency, Σ latency²) a quarter into it.
    step: usize,
    mark: Option<(u64, u64, [f64; 2])>,
    /// Each finished step's completions per second, and its relative 95% half-width.
    rates: Vec<(f64, f64)>,
}

impl StairWatch {
    pub(super) fn new(start_ns: u64, steps: &crate::plan::load::Steps) -> StairWatch {
        StairWatch {
            start_ns,
            step_ns: steps.step_ns,
            caps: steps.caps.clone(),
            step: 0,
            mark: None,
            rates: Vec::new(),
        }
    }

    /// Called now and then with the completions so far and the Σ latency and Σ latency²
    /// (seconds) of those that succeeded; true once the knee is passed.
    pub(super) fn observe(&mut self, now: u64, done: u64, sums: [f64; 2]) -> bool {
        let into = now.saturating_sub(self.start_ns);
        let step = (into / self.step_ns) as usize;
        if step > self.step {
            if let Some((t, d, s)) = self.mark.take() {
                let n = done.saturating_sub(d);
                let rate = n as f64 * 1e9 / now.saturating_sub(t).max(1) as f64;
                self.rates
                    .push((rate, half_width(n, sums[0] - s[0], sums[1] - s[1])));
                let k = self.rates.len() - 1;
                if k >= 1 && k < self.caps.len() {
                    let ((ra, ha), (rb, hb)) = (self.rates[k - 1], self.rates[k]);
                    let load = self.caps[k] as f64 / self.caps[k - 1] as f64;
                    if judge_step(ra, Some(ha), rb, Some(hb), load)
                        .is_some_and(|g| g.verdict == StepVerdict::Stopped)
                    {
                        return true;
                    }
                }
            }
            self.step = step;
        }
        if self.mark.is_none() && into >= step as u64 * self.step_ns + self.step_ns / 4 {
            self.mark = Some((now, done, sums));
        }
        false
    }
}

/// The relative 95% half-width of a closed loop's completion count `n` whose latencies sum
/// to `sum` with squares summing to `sq`: 1.96 × CV / √n, at least 1/n.
fn half_width(n: u64, sum: f64, sq: f64) -> f64 {
    if n == 0 {
        return f64::INFINITY;
    }
    let n = n as f64;
    let mean = sum / n;
    let var = (sq / n - mean * mean).max(0.0);
    let cv = if mean > 0.0 { var.sqrt() / mean } else { 1.0 };
    (1.96 * cv / n.sqrt()).max(1.0 / n)
}

/// The fewest finished measured requests on which `--failed-request-threshold` is judged:
/// one early failure is no failing server.
pub(crate) const THRESHOLD_MIN_DONE: u64 = 10;

/// `--failed-request-threshold`: a sentence when `errors` of the `done` finished measured
/// requests are more than `threshold` (a share) of them, judged from
/// [`THRESHOLD_MIN_DONE`] requests on.
pub(crate) fn failed_threshold(done: u64, errors: u64, threshold: f64) -> Option<String> {
    (done >= THRESHOLD_MIN_DONE && errors as f64 > threshold * done as f64).then(|| {
        format!(
            "{errors} of {done} finished requests failed ({:.1}%), more than \
             --failed-request-threshold {threshold} allows",
            100.0 * errors as f64 / done as f64
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrival::Arrival;
    use crate::plan::LoadSpec;

    const S: u64 = 1_000_000_000;

    fn load(duration_s: Option<u64>, ramp_s: u64, grace_s: u64) -> Load {
        Load::build(
            &LoadSpec {
                concurrency: Some(8),
                request_rate: None,
                arrival: Arrival::Poisson,
                burstiness: 1.0,
                ramp_up_ns: (ramp_s > 0).then_some(ramp_s * S),
                include_ramp_up: false,
                goodput: Vec::new(),
                request_count: None,
                benchmark_duration_ns: duration_s.map(|d| d * S),
                grace_period_ns: grace_s * S,
                warmup_request_count: 0,
                nodes: Default::default(),
                start_at_unix_ns: None,
                cancellation: None,
                prefill: None,
                warmup_phase: None,
                user_centric: None,
            },
            0,
            None,
        )
        .unwrap()
    }

    #[test]
    fn a_duration_stops_sending_then_cuts_after_the_grace_period() {
        let t0 = 1000 * S;
        let l = Limits::closed_loop(&load(Some(10), 0, 30), 8, t0);
        let quiet = Due::default();
        assert_eq!(l.due(t0, false), quiet);
        assert_eq!(l.due(t0 + 10 * S - 1, false), quiet);
        let stop = Due {
            stop_dispatch: true,
            cancel: false,
        };
        assert_eq!(l.due(t0 + 10 * S, false), stop, "the duration is up");
        assert_eq!(
            l.due(t0 + 40 * S - 1, false),
            stop,
            "still in the grace period"
        );
        let cut = Due {
            stop_dispatch: true,
            cancel: true,
        };
        assert_eq!(l.due(t0 + 40 * S, false), cut, "the grace period is over");
        assert_eq!(l.due(t0, true), cut, "Ctrl-C cuts at once");
    }

    #[test]
    fn a_staircase_steps_the_cap_and_splits_each_step() {
        let mut l = load(Some(1), 0, 2);
        l.staircase(vec![4, 8, 16], 10 * S).unwrap();
        let t0 = 5 * S;
        let shard = |i| Limits::closed_loop(&l, 0, t0).with_stairs(&l, i, 3);
        // 4 = 2 + 1 + 1, 8 = 3 + 3 + 2, 16 = 6 + 5 + 5.
        for (i, want) in [[2, 3, 6], [1, 3, 5], [1, 2, 5]].into_iter().enumerate() {
            let s = shard(i);
            let got = [s.cap_at(t0), s.cap_at(t0 + 10 * S), s.cap_at(t0 + 25 * S)];
            assert_eq!(got, want, "shard {i}");
            assert_eq!(s.cap_at(t0 + 100 * S), want[2], "the last step holds");
        }
        assert_eq!(shard(0).dispatch_deadline, Some(t0 + 30 * S));
    }

    /// When the watch stops a staircase of 4 s steps through 8..64 whose steps complete
    /// `rate` requests per second.
    fn stair_stop(rate: [f64; 4]) -> (Option<u64>, StairWatch) {
        let steps = crate::plan::load::Steps {
            step_ns: 4 * S,
            caps: vec![8, 16, 32, 64],
        };
        let mut w = StairWatch::new(0, &steps);
        let mut done = 0.0;
        for ms in (0..16_000u64).step_by(10) {
            done += rate[(ms / 4000) as usize] / 100.0;
            // Latencies of 1 s ± 0.5 s (CV ½): Σ = n, Σ² = n · 1.25.
            let n = done.floor();
            if w.observe(ms * 1_000_000, n as u64, [n, 1.25 * n]) {
                return (Some(ms), w);
            }
        }
        (None, w)
    }

    #[test]
    fn the_stair_watch_stops_after_the_first_step_that_did_not_pay() {
        // 100, 200, then 205 completions/s: 2.5% more for twice the load, from about 600
        // completions a step with latencies of CV ½ (±4%): it stopped scaling, judged as
        // step 3 begins.
        let (stopped, w) = stair_stop([100.0, 200.0, 205.0, 206.0]);
        assert_eq!(stopped, Some(12_000));
        assert_eq!(w.rates.len(), 3);
        assert!((w.rates[1].0 - 200.0).abs() < 2.0, "{:?}", w.rates);
        assert!(
            (w.rates[1].1 - 1.96 * 0.5 / 600f64.sqrt()).abs() < 1e-3,
            "{:?}",
            w.rates
        );
        // 15% more (over the 10% a doubling must buy) from counts too small to tell it
        // from 10%: undecided, so it climbs on rather than stop early.
        assert_eq!(stair_stop([10.0, 20.0, 23.0, 24.0]).0, None);
        // The half-width: CV ½ over 100 completions, and never under one completion.
        assert!((half_width(100, 100.0, 125.0) - 0.098).abs() < 1e-9);
        assert_eq!(half_width(4, 4.0, 4.0), 0.25);
        assert_eq!(half_width(0, 0.0, 0.0), f64::INFINITY);
    }

    #[test]
    fn a_ramp_delays_the_deadlines_and_grows_the_cap() {
        let t0 = 5 * S;
        let l = Limits::closed_loop(&load(Some(10), 4, 2), 9, t0);
        assert_eq!(l.dispatch_deadline, Some(t0 + 14 * S));
        assert_eq!(l.hard_deadline, Some(t0 + 16 * S));
        assert_eq!(l.cap_at(t0), 1);
        assert_eq!(l.cap_at(t0 + 2 * S), 5, "half way: 1 + 8/2");
        assert_eq!(l.cap_at(t0 + 4 * S), 9);
        assert_eq!(l.cap_at(t0 + 100 * S), 9);
        assert!(l.ramp.unwrap().tag);
    }

    #[test]
    fn a_count_has_no_deadline_and_an_open_loop_only_a_hard_one() {
        let l = Limits::closed_loop(&load(None, 0, 30), 8, 0);
        assert_eq!((l.dispatch_deadline, l.hard_deadline), (None, None));
        assert_eq!(l.due(u64::MAX, false), Due::default());
        let o = Limits::open_loop(&load(Some(10), 0, 30), usize::MAX, S);
        assert_eq!((o.dispatch_deadline, o.hard_deadline), (None, Some(41 * S)));
        assert_eq!(Limits::capped(3).cap_at(0), 3);
    }

    #[test]
    fn the_prefill_cap_ramps_from_one_and_splits_across_shards() {
        let mut l = load(Some(10), 0, 2);
        assert_eq!(
            Limits::capped(4).prefill_cap_at(0),
            usize::MAX,
            "no cap asked"
        );
        l.prefill = Some(crate::plan::load::Prefill {
            cap: 9,
            ramp_ns: 4 * S,
        });
        let t0 = 5 * S;
        let at = |i: usize, ramp: bool, t: u64| {
            Limits::capped(9)
                .with_prefill(l.prefill, i, 2, t0, ramp)
                .prefill_cap_at(t)
        };
        // Across the two shards, 1 at the start, 5 half way, 9 at the end and after.
        assert_eq!((at(0, true, t0), at(1, true, t0)), (1, 0));
        assert_eq!((at(0, true, t0 + 2 * S), at(1, true, t0 + 2 * S)), (3, 2));
        assert_eq!((at(0, true, t0 + 4 * S), at(1, true, t0 + 4 * S)), (5, 4));
        assert_eq!(
            at(0, false, t0),
            5,
            "without the ramp (warm-up): the whole cap at once"
        );
        let ramped = Limits::capped(9).with_prefill(l.prefill, 0, 2, t0, true);
        assert!(ramped.prefill_ramping(t0 + S) && !ramped.prefill_ramping(t0 + 4 * S));
    }

    #[test]
    fn the_failed_request_threshold_is_a_share_judged_from_ten_requests_on() {
        assert_eq!(failed_threshold(9, 9, 0.1), None);
        assert_eq!(failed_threshold(10, 1, 0.1), None);
        let crossed = failed_threshold(10, 2, 0.1).unwrap();
        assert!(
            crossed.starts_with("2 of 10 finished requests failed (20.0%)"),
            "{crossed}"
        );
        assert_eq!(failed_threshold(100, 0, 0.0), None);
        assert!(failed_threshold(100, 1, 0.0).is_some());
    }
}
