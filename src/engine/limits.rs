//! What bounds a phase of the run, decided from times given as arguments: the concurrency
//! cap (and its ramp), when to stop sending, and when to cut what is still in flight. The
//! shard's watcher asks [`Limits::due`] every few milliseconds with the clock's time; the
//! rules themselves are tested here with made-up times, without sleeping.

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

/// What bounds a phase's dispatching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Limits {
    /// Most requests in flight.
    pub cap: usize,
    /// Closed-loop ramp of `cap`.
    pub ramp: Option<Ramp>,
    /// Stop dispatching at this time.
    pub dispatch_deadline: Option<u64>,
    /// Cut what is in flight at this time.
    pub hard_deadline: Option<u64>,
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
            dispatch_deadline: None,
            hard_deadline: None,
        }
    }

    /// The measured phase of a closed loop started at `t0`: with a duration, sending stops
    /// after the ramp and the duration, and what is in flight is cut a grace period later.
    pub(super) fn closed_loop(load: &Load, cap: usize, t0: u64) -> Limits {
        let dispatch = load.duration_ns.map(|d| t0 + load.ramp_ns + d);
        Limits {
            cap,
            ramp: (load.ramp_ns > 0).then_some(Ramp {
                start_ns: t0,
                len_ns: load.ramp_ns,
                tag: !load.include_ramp,
            }),
            dispatch_deadline: dispatch,
            hard_deadline: dispatch.map(|d| d + load.grace_ns),
        }
    }

    /// An open loop started at `t0`: the schedule decides when sending stops; with a
    /// duration, what is in flight is cut a grace period after the ramp and the duration.
    pub(super) fn open_loop(load: &Load, cap: usize, t0: u64) -> Limits {
        Limits {
            cap,
            ramp: None,
            dispatch_deadline: None,
            hard_deadline: load
                .duration_ns
                .map(|d| t0 + d + load.ramp_ns + load.grace_ns),
        }
    }

    /// The cap at time `now`.
    pub(super) fn cap_at(&self, now: u64) -> usize {
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
}
