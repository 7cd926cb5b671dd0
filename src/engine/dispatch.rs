//! A shard's dispatching decisions, without I/O: how many requests are in flight against
//! the cap, when a closed loop's next request was due, whether sending has stopped, who holds
//! or waits for a place under the prefill cap, and how long to back off after a connection
//! failed to open. The shard's driver (monoio tasks, timers, sockets) tells it what happened
//! with the clock's time and does what it answers; the tests here step it through made-up
//! times, without sleeping.
//!
//! [`Limits`] holds the rules that depend on time alone (cap, ramp, staircase, deadlines);
//! this holds the state they are applied to.

use std::collections::VecDeque;

use super::limits::{Due, Limits};
use crate::plan::load::UserCentric;

/// The first wait after a connection failed to open, doubled at each failure in a row up to
/// [`BACKOFF_MAX_NS`].
const BACKOFF_FIRST_NS: u64 = 1_000_000;
const BACKOFF_MAX_NS: u64 = 500_000_000;

/// A request on its way, as the dispatcher placed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sent {
    /// When it was due (`CLOCK_MONOTONIC` ns), if anything made it due at a time.
    pub due: Option<u64>,
    /// With user-centric timing, which of the phase's first users it is (from 0).
    pub first_user: Option<u64>,
    /// Requests in flight now, this one included.
    pub in_flight: usize,
}

/// One shard's dispatching state. `T` is what the driver wakes when a request waiting for a
/// prefill place gets one.
pub(super) struct Dispatcher<T> {
    /// The phase's limits (none between phases).
    limits: Option<Limits>,
    in_flight: usize,
    peak: usize,
    /// Closed loop: when each request that freed a place under the cap ended, oldest first;
    /// the next request sent takes the oldest as the time it was due.
    freed: VecDeque<u64>,
    /// The cap still ramps or climbs stairs: a freed place's end is no request's due time.
    ramping: bool,
    stop_dispatch: bool,
    cancelled: bool,
    /// Requests between their send and their first token (`--prefill-concurrency`).
    prefilling: usize,
    /// Requests waiting for a place under the prefill cap, oldest first.
    prefill_line: VecDeque<T>,
    /// Connections that failed to open in a row (any success resets it).
    connect_failures: u32,
}

impl<T> Default for Dispatcher<T> {
    fn default() -> Self {
        Dispatcher {
            limits: None,
            in_flight: 0,
            peak: 0,
            freed: VecDeque::new(),
            ramping: false,
            stop_dispatch: false,
            cancelled: false,
            prefilling: 0,
            prefill_line: VecDeque::new(),
            connect_failures: 0,
        }
    }
}

impl<T> Dispatcher<T> {
    /// A phase begins under `limits`; `stopped` when the run was stopped already (a phase
    /// cut at its own deadline, a warm-up's grace period, does not stop the next one).
    pub(super) fn begin_phase(&mut self, limits: Limits, stopped: bool) {
        self.cancelled = stopped;
        self.stop_dispatch = stopped;
        self.limits = Some(limits);
        self.ramping = limits.ramp.is_some() || limits.stairs.is_some();
        self.freed.clear();
    }

    /// The phase ended (nothing is in flight).
    pub(super) fn end_phase(&mut self) {
        self.limits = None;
        self.ramping = false;
    }

    /// Requests in flight now, and the most there ever were.
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight
    }

    pub(super) fn peak(&self) -> usize {
        self.peak
    }

    /// Nothing more is to be sent.
    pub(super) fn stopped(&self) -> bool {
        self.stop_dispatch
    }

    /// Everything in flight is to be cut.
    pub(super) fn cancelled(&self) -> bool {
        self.cancelled
    }

    /// True when the cap is reached at `now` (or no phase runs).
    pub(super) fn full(&self, now: u64) -> bool {
        self.in_flight >= self.limits.map_or(0, |l| l.cap_at(now))
    }

    /// True when the next request may go at `now`: under the cap, or sending stopped (the
    /// dispatcher then looks no further).
    pub(super) fn may_send(&self, now: u64) -> bool {
        !self.full(now) || self.stop_dispatch
    }

    /// Whether a request sent at `now` goes out during the ramp and is tagged as ramp-up;
    /// after the ramp, freed places are due times again.
    pub(super) fn ramp_tag(&mut self, now: u64) -> bool {
        let Some(r) = self.limits.and_then(|l| l.ramp) else {
            return false;
        };
        if now < r.start_ns + r.len_ns {
            r.tag
        } else {
            self.ramping = false;
            false
        }
    }

    /// Request `id` is on its way. It was due at its `intended` time (open loop); with
    /// user-centric timing (`users`), the phase's first users start one user's share of the
    /// gap apart; else (closed loop) when the request whose place it takes ended, and at no
    /// time while the cap first fills or ramps.
    pub(super) fn on_sent(
        &mut self,
        id: u64,
        intended: Option<u64>,
        users: Option<UserCentric>,
    ) -> Sent {
        let user = match (self.limits.and_then(|l| l.users_from), users) {
            (Some((first, t0)), Some(u)) => id
                .checked_sub(first)
                .filter(|g| *g < u.users)
                .map(|g| (g, t0 + (g as f64 * 1e9 / u.rate) as u64)),
            _ => None,
        };
        let due = intended.or(user.map(|(_, at)| at)).or_else(|| {
            let freed = self.freed.pop_front();
            freed.filter(|_| !self.ramping)
        });
        self.in_flight += 1;
        self.peak = self.peak.max(self.in_flight);
        Sent {
            due,
            first_user: user.map(|(g, _)| g),
            in_flight: self.in_flight,
        }
    }

    /// A request that ended at `end_ns` gave back its place; returns how many are in flight.
    pub(super) fn on_done(&mut self, end_ns: u64) -> usize {
        let cap = self.limits.map_or(0, |l| l.cap);
        // Open loop never takes from it: keep it no longer than the cap.
        if self.freed.len() >= cap.clamp(1, 1 << 20) {
            self.freed.pop_front();
        }
        self.freed.push_back(end_ns);
        self.in_flight -= 1;
        self.in_flight
    }

    /// What the phase's deadlines and the user's stop say at `now`: sets the flags, and
    /// returns what changed for the driver to act on (cut the connections, wake the waiting).
    pub(super) fn on_tick(&mut self, now: u64, interrupted: bool, finish: bool) -> Due {
        let due = match self.limits {
            Some(l) => l.due(now, interrupted),
            None => Due {
                stop_dispatch: interrupted,
                cancel: interrupted,
            },
        };
        if due.cancel {
            self.cancel();
        }
        let stop = (due.stop_dispatch || finish) && !self.stop_dispatch;
        self.stop_dispatch |= stop;
        Due {
            stop_dispatch: stop,
            cancel: due.cancel,
        }
    }

    /// Stop sending and cut everything in flight.
    pub(super) fn cancel(&mut self) {
        self.stop_dispatch = true;
        self.cancelled = true;
    }

    /// True while the cap grows with time (the driver looks again at each tick).
    pub(super) fn ramping(&self) -> bool {
        self.ramping
    }

    /// True while the prefill cap grows with time.
    pub(super) fn prefill_ramping(&self, now: u64) -> bool {
        self.limits.is_some_and(|l| l.prefill_ramping(now))
    }

    /// True when the phase caps requests waiting for their first token.
    pub(super) fn prefill_capped(&self) -> bool {
        self.limits.is_some_and(|l| l.prefill.is_some())
    }

    /// A request takes a place under the prefill cap at `now` if none waits before it and
    /// the cap allows (true); else it must [`wait_prefill`](Self::wait_prefill).
    pub(super) fn take_prefill(&mut self, now: u64) -> bool {
        let cap = self.limits.map_or(usize::MAX, |l| l.prefill_cap_at(now));
        let free = self.prefill_line.is_empty() && self.prefilling < cap;
        self.prefilling += usize::from(free);
        free
    }

    /// A request joins the line for a prefill place, as `waiter`, which
    /// [`grant_prefill`](Self::grant_prefill) hands back when a place is its.
    pub(super) fn wait_prefill(&mut self, waiter: T) {
        self.prefill_line.push_back(waiter);
    }

    /// A request gave back its prefill place (its first token came, or it ended).
    pub(super) fn prefill_done(&mut self) {
        self.prefilling -= 1;
    }

    /// Hands the free places under the prefill cap at `now` to the requests in line, oldest
    /// first (to every one of them once sending has stopped: they give it back unsent), and
    /// returns those to wake.
    pub(super) fn grant_prefill(&mut self, now: u64) -> Vec<T> {
        let cap = self.limits.map_or(usize::MAX, |l| l.prefill_cap_at(now));
        let mut granted = Vec::new();
        while self.prefilling < cap || self.stop_dispatch {
            let Some(w) = self.prefill_line.pop_front() else {
                break;
            };
            self.prefilling += 1;
            granted.push(w);
        }
        granted
    }

    /// A connection failed to open: how long the request holds its place before it gives
    /// up (ns), doubling with each failure in a row, so that a dead server is not hammered
    /// thousands of times a second.
    pub(super) fn connect_failed(&mut self) -> u64 {
        self.connect_failures += 1;
        (BACKOFF_FIRST_NS << (self.connect_failures - 1).min(20)).min(BACKOFF_MAX_NS)
    }

    /// A connection opened: the back-off starts over.
    pub(super) fn connected(&mut self) {
        self.connect_failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::super::limits::{PrefillCap, Ramp, Stairs};
    use super::*;

    const MS: u64 = 1_000_000;

    fn limits(cap: usize) -> Limits {
        Limits {
            dispatch_deadline: Some(1_000 * MS),
            hard_deadline: Some(1_500 * MS),
            ..Limits::capped(cap)
        }
    }

    /// A closed loop's send: when it was due, and how many are then in flight.
    fn closed(d: &mut Dispatcher<()>) -> (Option<u64>, usize) {
        let s = d.on_sent(0, None, None);
        (s.due, s.in_flight)
    }

    /// A phase of one shard whose prefill cap is `total`, ramped from 1 over `ramp_ns`.
    fn prefill_capped(total: u64, ramp_ns: u64) -> Limits {
        let prefill = PrefillCap {
            total,
            index: 0,
            shards: 1,
            start_ns: 0,
            ramp_ns,
        };
        Limits {
            prefill: Some(prefill),
            ..limits(8)
        }
    }

    #[test]
    fn a_closed_loop_keeps_its_cap_and_each_send_is_due_when_a_place_freed() {
        let mut d = Dispatcher::<()>::default();
        d.begin_phase(limits(2), false);
        // The cap fills: nothing is due while it does.
        assert!(d.may_send(0));
        assert_eq!(closed(&mut d), (None, 1));
        assert_eq!(closed(&mut d), (None, 2));
        assert!(d.full(MS) && !d.may_send(MS));
        // A request ends at 30 ms: the next is due then, whenever it goes.
        assert_eq!(d.on_done(30 * MS), 1);
        assert!(d.may_send(31 * MS));
        assert_eq!(closed(&mut d), (Some(30 * MS), 2));
        // Two end; the sends that follow are due at their ends, oldest first.
        d.on_done(40 * MS);
        d.on_done(41 * MS);
        assert_eq!(closed(&mut d), (Some(40 * MS), 1));
        assert_eq!(closed(&mut d), (Some(41 * MS), 2));
        assert_eq!(closed(&mut d), (None, 3));
        // The peak stays the most there ever were.
        for t in 50..53 {
            d.on_done(t * MS);
        }
        assert_eq!(closed(&mut d).1, 1);
        assert_eq!(d.peak(), 3);
    }

    #[test]
    fn freed_places_are_kept_no_longer_than_the_cap() {
        // An open loop's sends never take them: only the last `cap` ends are kept.
        let mut d = Dispatcher::<()>::default();
        d.begin_phase(limits(2), false);
        for t in 1..=5 {
            assert_eq!(d.on_sent(t, Some(t * MS), None).due, Some(t * MS));
        }
        for t in 1..=5 {
            d.on_done(t * MS);
        }
        assert_eq!(closed(&mut d).0, Some(4 * MS));
        assert_eq!(closed(&mut d).0, Some(5 * MS));
        assert_eq!(closed(&mut d).0, None);
        // A new phase starts with none.
        d.on_done(9 * MS);
        d.begin_phase(limits(2), false);
        assert_eq!(closed(&mut d).0, None);
    }

    #[test]
    fn the_first_users_start_a_users_share_of_the_gap_apart() {
        let mut d = Dispatcher::<()>::default();
        let t0 = 1_000 * MS;
        d.begin_phase(
            Limits {
                users_from: Some((100, t0)),
                ..limits(8)
            },
            false,
        );
        // 4 users at 10 requests/s: a user's turn every 400 ms, the first users 100 ms apart.
        let users = Some(UserCentric {
            rate: 10.0,
            users: 4,
        });
        let first = d.on_sent(100, None, users);
        assert_eq!((first.due, first.first_user), (Some(t0), Some(0)));
        let third = d.on_sent(102, None, users);
        assert_eq!(
            (third.due, third.first_user),
            (Some(t0 + 200 * MS), Some(2))
        );
        // Past the first users, and before the phase's first request: no stagger.
        assert_eq!(d.on_sent(104, None, users).first_user, None);
        assert_eq!(d.on_sent(99, None, users).first_user, None);
        // A time the schedule gave wins.
        let timed = d.on_sent(101, Some(5 * MS), users);
        assert_eq!((timed.due, timed.first_user), (Some(5 * MS), Some(1)));
        // Without user-centric timing, none of this.
        assert_eq!(d.on_sent(101, None, None).first_user, None);
    }

    #[test]
    fn a_ramp_grows_the_cap_tags_its_sends_and_makes_no_due_times_until_it_ends() {
        let mut d = Dispatcher::<()>::default();
        let ramp = Ramp {
            start_ns: 0,
            len_ns: 100 * MS,
            tag: true,
        };
        d.begin_phase(
            Limits {
                ramp: Some(ramp),
                ..limits(5)
            },
            false,
        );
        assert!(d.ramping());
        // At 0 the cap is 1; at 50 ms, 3.
        closed(&mut d);
        assert!(!d.may_send(0));
        assert!(d.may_send(50 * MS));
        assert!(d.ramp_tag(50 * MS));
        closed(&mut d);
        d.on_done(60 * MS);
        // Freed during the ramp: no due time.
        assert_eq!(closed(&mut d).0, None);
        // After it: not tagged, and freed places are due times again.
        assert!(!d.ramp_tag(100 * MS));
        assert!(!d.ramping());
        d.on_done(110 * MS);
        assert_eq!(closed(&mut d).0, Some(110 * MS));
        // Between phases nothing may be sent.
        d.end_phase();
        assert!(d.full(0) && !d.ramping());
    }

    #[test]
    fn a_staircase_climbs_the_cap_step_by_step() {
        let mut caps = [0; crate::plan::load::MAX_STEPS];
        caps[..3].copy_from_slice(&[1, 2, 4]);
        let mut d = Dispatcher::<()>::default();
        let stairs = Stairs {
            start_ns: 0,
            step_ns: 10 * MS,
            caps,
            len: 3,
        };
        d.begin_phase(
            Limits {
                stairs: Some(stairs),
                ..limits(4)
            },
            false,
        );
        assert!(d.ramping());
        let sent_by = |d: &mut Dispatcher<()>, t: u64| {
            while d.may_send(t) {
                closed(d);
            }
            d.in_flight()
        };
        assert_eq!(sent_by(&mut d, 0), 1);
        assert_eq!(sent_by(&mut d, 10 * MS), 2);
        assert_eq!(sent_by(&mut d, 25 * MS), 4);
        // The last step holds.
        assert_eq!(sent_by(&mut d, 500 * MS), 4);
    }

    #[test]
    fn deadlines_stop_sending_then_cut_and_say_so_once() {
        let mut d = Dispatcher::<()>::default();
        d.begin_phase(limits(4), false);
        assert_eq!(d.on_tick(999 * MS, false, false), Due::default());
        let at_deadline = d.on_tick(1_000 * MS, false, false);
        assert!(at_deadline.stop_dispatch && !at_deadline.cancel);
        assert!(d.stopped() && !d.cancelled());
        // Said once; sending stays stopped, and a stopped dispatcher lets the loop see it.
        assert_eq!(d.on_tick(1_200 * MS, false, false), Due::default());
        for _ in 0..4 {
            closed(&mut d);
        }
        assert!(d.may_send(1_200 * MS));
        // The grace period ends: everything in flight is cut, at every tick.
        assert!(d.on_tick(1_500 * MS, false, false).cancel);
        assert!(d.cancelled());
        assert!(d.on_tick(1_510 * MS, false, false).cancel);
    }

    #[test]
    fn ctrl_c_and_a_finished_count_stop_at_once_and_a_new_phase_starts_clear() {
        let mut d = Dispatcher::<()>::default();
        d.begin_phase(limits(4), false);
        let due = d.on_tick(MS, true, false);
        assert!(due.cancel && d.stopped() && d.cancelled());
        // A phase after a stop of the run starts stopped; after its own deadline, clear.
        d.begin_phase(limits(4), true);
        assert!(d.stopped() && d.cancelled());
        d.begin_phase(limits(4), false);
        assert!(!d.stopped() && !d.cancelled());
        // The run's count reached: stop sending, cut nothing.
        let due = d.on_tick(MS, false, true);
        assert!(due.stop_dispatch && !due.cancel && !d.cancelled());
        // Between phases only a stop of the run counts.
        d.end_phase();
        assert_eq!(d.on_tick(5_000 * MS, false, false), Due::default());
    }

    #[test]
    fn the_prefill_line_is_served_oldest_first_under_its_cap_and_emptied_by_a_stop() {
        let mut d = Dispatcher::<u32>::default();
        d.begin_phase(prefill_capped(2, 0), false);
        assert!(d.prefill_capped() && !d.prefill_ramping(0));
        let ask = |d: &mut Dispatcher<u32>, now: u64, who: u32| {
            let taken = d.take_prefill(now);
            if !taken {
                d.wait_prefill(who);
            }
            taken
        };
        assert!(ask(&mut d, 0, 1));
        assert!(ask(&mut d, 0, 2));
        // Full: the next wait in line, and nothing is granted until a place is given back.
        assert!(!ask(&mut d, 0, 3));
        assert!(!ask(&mut d, 0, 4));
        assert_eq!(d.grant_prefill(MS), Vec::<u32>::new());
        d.prefill_done();
        assert_eq!(d.grant_prefill(MS), vec![3]);
        // One waits: a newcomer goes behind it even when a place is free.
        d.prefill_done();
        assert!(!ask(&mut d, MS, 5));
        assert_eq!(d.grant_prefill(MS), vec![4]);
        // Sending stops: every one in line gets a place, to give it back unsent.
        d.cancel();
        assert_eq!(d.grant_prefill(2 * MS), vec![5]);
    }

    #[test]
    fn a_ramped_prefill_cap_lets_more_in_as_it_grows() {
        let mut d = Dispatcher::<u32>::default();
        d.begin_phase(prefill_capped(3, 100 * MS), false);
        assert!(d.take_prefill(0));
        assert!(!d.take_prefill(0));
        d.wait_prefill(2);
        d.wait_prefill(3);
        assert!(d.prefill_ramping(10 * MS));
        // At 50 ms the cap is 2, at 100 ms 3: one more each time, without any given back.
        assert_eq!(d.grant_prefill(50 * MS), vec![2]);
        assert_eq!(d.grant_prefill(100 * MS), vec![3]);
        assert!(!d.prefill_ramping(100 * MS));
    }

    #[test]
    fn connect_failures_back_off_doubling_to_half_a_second_and_a_success_resets_it() {
        let mut d = Dispatcher::<()>::default();
        let waits: Vec<u64> = (0..12).map(|_| d.connect_failed()).collect();
        assert_eq!(&waits[..4], &[MS, 2 * MS, 4 * MS, 8 * MS]);
        assert_eq!(waits[9], 500 * MS);
        assert!(waits.iter().all(|w| *w <= 500 * MS));
        d.connected();
        assert_eq!(d.connect_failed(), MS);
    }
}
