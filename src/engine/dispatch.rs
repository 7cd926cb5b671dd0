//! A shard's dispatching decisions, without I/O: how many requests are in flight against
//! the cap, when a closed loop's next request was due, whether sending has stopped, who holds
//! or waits for a place under the prefill cap, which server a request goes to, when a request
//! is cut and what the cut makes of it, whether its connection is kept, how long to back off
//! after a connection failed to open, and when a burst of sends lets the runtime collect what
//! arrived. The shard's driver (monoio tasks, timers, sockets) tells it what happened
//! with the clock's time and does what it answers: its send loop asks [`Dispatcher::poll`]
//! what to do next (send, sleep until a time, yield, wait for a place, or stop). The tests
//! here step it through made-up times, without sleeping.
//!
//! [`Limits`] holds the rules that depend on time alone (cap, ramp, staircase, deadlines);
//! this holds the state they are applied to.

use std::collections::VecDeque;

use super::limits::{Due, Limits};
use super::schedule::{Schedule, Ticket};
use crate::plan::load::UserCentric;
use crate::plan::target::UrlStrategy;
use crate::record::Outcome;

/// The first wait after a connection failed to open, doubled at each failure in a row up to
/// [`BACKOFF_MAX_NS`].
const BACKOFF_FIRST_NS: u64 = 1_000_000;
const BACKOFF_MAX_NS: u64 = 500_000_000;
/// Requests sent in a row, none of them waiting for its time or a place, before the driver
/// lets the runtime reap completed I/O.
const DISPATCH_BATCH: usize = 256;

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

/// What the shard's send loop does next, as [`Dispatcher::poll`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Sleep until this time: the next request's intended send time.
    SleepUntil(u64),
    /// Let the runtime collect what arrived before sending more (a burst of sends).
    Yield,
    /// Wait until a place under the cap frees (or sending stops), then ask again.
    WaitForPlace,
    /// Send this request now; [`Dispatcher::on_sent`] once it is on its way.
    Send(Ticket),
    /// Nothing more to send in this phase.
    Done,
}

/// The next request, taken from the schedule and not yet sent.
#[derive(Debug, Clone, Copy)]
struct Next {
    ticket: Ticket,
    /// It waited for its intended time.
    waited: bool,
    /// It was counted in the burst of sends.
    counted: bool,
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
    /// Requests sent in a row, none of them waiting for its time or a place.
    in_a_row: usize,
    /// The next request, while it waits for its time or a place.
    next: Option<Next>,
    /// Where requests go.
    servers: Servers,
}

impl<T> Default for Dispatcher<T> {
    fn default() -> Self {
        Dispatcher::new(Servers::new(1, UrlStrategy::RoundRobin))
    }
}

impl<T> Dispatcher<T> {
    /// A dispatcher sending to `servers`, before its first phase.
    pub(super) fn new(servers: Servers) -> Self {
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
            in_a_row: 0,
            next: None,
            servers,
        }
    }

    /// A phase begins under `limits`; `stopped` when the run was stopped already (a phase
    /// cut at its own deadline, a warm-up's grace period, does not stop the next one).
    pub(super) fn begin_phase(&mut self, limits: Limits, stopped: bool) {
        self.cancelled = stopped;
        self.stop_dispatch = stopped;
        self.limits = Some(limits);
        self.ramping = limits.ramp.is_some() || limits.stairs.is_some();
        self.freed.clear();
        self.in_a_row = 0;
        self.next = None;
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

    /// What the send loop does next at `now`, taking the next ticket from `schedule` when
    /// none waits: send a request when its intended time has come (open loop), the burst
    /// allows it and there is a place under the cap; else sleep until its time, yield, or
    /// wait for a place, and ask again. A request sent during the ramp is tagged as ramp-up.
    /// Once sending stops, the waiting request is dropped and the phase is done.
    pub(super) fn poll(&mut self, now: u64, schedule: &mut dyn Schedule) -> Step {
        if self.stop_dispatch {
            self.next = None;
            return Step::Done;
        }
        let mut next = match self.next.take() {
            Some(n) => n,
            None => match schedule.next() {
                Some(ticket) => Next {
                    ticket,
                    waited: false,
                    counted: false,
                },
                None => return Step::Done,
            },
        };
        if let Some(at) = next.ticket.intended_ns.filter(|at| *at > now) {
            next.waited = true;
            self.next = Some(next);
            return Step::SleepUntil(at);
        }
        if !next.counted {
            next.counted = true;
            if self.burst(now, next.waited) {
                self.next = Some(next);
                return Step::Yield;
            }
        }
        if !self.may_send(now) {
            self.next = Some(next);
            return Step::WaitForPlace;
        }
        if self.ramp_tag(now) {
            next.ticket.phase = crate::record::Phase::RampUp;
        }
        Step::Send(next.ticket)
    }

    /// The next request is about to go at `now`, after it `waited` for its time: true when
    /// the driver is to let the runtime collect what arrived first. Many requests due at
    /// once (a batch of responses ended together) are sent [`DISPATCH_BATCH`] at a time, so
    /// that reads do not wait behind the whole burst of sends; a wait for a request's time
    /// or for a place under the cap starts the count again.
    fn burst(&mut self, now: u64, waited: bool) -> bool {
        if waited || self.full(now) {
            self.in_a_row = 0;
        }
        self.in_a_row += 1;
        if self.in_a_row > DISPATCH_BATCH {
            self.in_a_row = 0;
            return true;
        }
        false
    }

    /// Whether a request sent at `now` goes out during the ramp and is tagged as ramp-up;
    /// after the ramp, freed places are due times again.
    fn ramp_tag(&mut self, now: u64) -> bool {
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

    /// The server request `id` (a turn of `session`, if it is one) goes to, now counted as in
    /// flight there until [`server_done`](Self::server_done).
    pub(super) fn pick_server(&mut self, id: u64, session: Option<u64>) -> usize {
        self.servers.pick(id, session)
    }

    /// A request to `server` ended.
    pub(super) fn server_done(&mut self, server: usize) {
        self.servers.load[server] -= 1;
    }

    /// Which of the source addresses (`--local-address`) the next connection opens from,
    /// in turn; none when there are none (the kernel's choice).
    pub(super) fn next_local_address(&mut self) -> Option<usize> {
        let n = self.servers.local_addresses;
        if n == 0 {
            return None;
        }
        let k = self.servers.opened;
        self.servers.opened += 1;
        Some(k % n)
    }
}

/// What becomes of a request's connection once its exchange is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reuse {
    /// Kept open for the place's next request.
    Keep,
    /// Closed, as the server said it would be after a whole response (`Connection: close`):
    /// the next request opens a new one and says so.
    ServerClosed,
    /// Closed: the request failed, or was cut (a connection the watcher shut down is spent
    /// even under a response that was whole).
    Spent,
}

/// What becomes of a connection after a request that ended with `outcome`, on a connection
/// the server means to keep open (`keep_alive`) or not, `cut` by the watcher or not.
pub(super) fn reuse(outcome: Outcome, keep_alive: bool, cut: bool) -> Reuse {
    match (outcome == Outcome::Ok && !cut, keep_alive) {
        (true, true) => Reuse::Keep,
        (true, false) => Reuse::ServerClosed,
        (false, _) => Reuse::Spent,
    }
}

/// Whether a request whose connection failed before any byte of its response came back is
/// sent again on a fresh connection: once (on its first `attempt`, 0), only when that
/// connection had served a request before (`reused`: the server may have closed it while it
/// sat idle), and not once the request was cut.
pub(super) fn send_again(reused: bool, attempt: u32, saw_bytes: bool, cut: bool) -> bool {
    reused && attempt == 0 && !saw_bytes && !cut
}

/// Which of several servers each request goes to (`--url-strategy`), how many of the shard's
/// requests each has in flight, and which source address each new connection opens from.
#[derive(Debug)]
pub(super) struct Servers {
    strategy: UrlStrategy,
    /// Requests in flight to each server.
    load: Vec<usize>,
    /// Source addresses to take in turn (`--local-address`).
    local_addresses: usize,
    /// Connections opened, plus the shard's index: shards start at different addresses.
    opened: usize,
}

impl Servers {
    /// `n` servers (at least one), chosen by `strategy`.
    pub(super) fn new(n: usize, strategy: UrlStrategy) -> Servers {
        Servers {
            strategy,
            load: vec![0; n.max(1)],
            local_addresses: 0,
            opened: 0,
        }
    }

    /// Connections open from `count` source addresses in turn, shard `shard` starting at the
    /// one of its index.
    pub(super) fn with_local_addresses(mut self, count: usize, shard: usize) -> Servers {
        (self.local_addresses, self.opened) = (count, shard);
        self
    }

    /// Round-robin by request, a session's turns by session (they stay on one server, whose
    /// cache holds their history); or the server with the fewest in flight, the first of them
    /// on a tie. The one chosen counts the request as in flight.
    fn pick(&mut self, id: u64, session: Option<u64>) -> usize {
        let n = self.load.len();
        let i = match self.strategy {
            UrlStrategy::RoundRobin => (session.unwrap_or(id) % n as u64) as usize,
            UrlStrategy::LeastInFlight => (0..n).min_by_key(|i| self.load[*i]).unwrap_or(0),
        };
        self.load[i] += 1;
        i
    }
}

/// When a request is cut (its `--request-timeout`, or its `--request-cancellation-delay` when
/// it has one), and what a cut or a stop makes of how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cut {
    deadline: u64,
    cancel_at: u64,
    timeout_ns: u64,
    cancel_after: Option<u64>,
}

impl Cut {
    /// A request that starts at `start`, with `timeout_ns` to complete and, when it is one
    /// of those cancelled, closed `cancel_after` ns after its start.
    pub(super) fn new(start: u64, timeout_ns: u64, cancel_after: Option<u64>) -> Cut {
        Cut {
            deadline: start.saturating_add(timeout_ns),
            cancel_at: cancel_after.map_or(u64::MAX, |d| start.saturating_add(d)),
            timeout_ns,
            cancel_after,
        }
    }

    /// When the watcher cuts its connection.
    pub(super) fn at(&self) -> u64 {
        self.deadline.min(self.cancel_at)
    }

    /// What a request that ended at `end_ns` as `outcome` counts as, when not that: closed on
    /// purpose (its cancellation came first and it was not whole), timed out (not whole at
    /// its deadline), or cut short by a stop (`stopped`; any failure but a cancellation).
    /// `cut` says the watcher cut its connection. A response that was whole stays so.
    pub(super) fn judge(
        &self,
        outcome: Outcome,
        end_ns: u64,
        cut: bool,
        stopped: bool,
    ) -> Option<(Outcome, String)> {
        let failed = outcome != Outcome::Ok;
        let mut judged =
            if (cut || end_ns >= self.cancel_at) && self.cancel_at < self.deadline && failed {
                Some((
                    Outcome::RequestCancelled,
                    format!(
                    "closed by the client {:.3}s after it started (--request-cancellation-delay)",
                    self.cancel_after.unwrap_or(0) as f64 / 1e9
                ),
                ))
            } else if (cut || end_ns >= self.deadline) && failed {
                Some((
                    Outcome::RequestTimeout,
                    format!(
                        "no complete response within {:.1}s",
                        self.timeout_ns as f64 / 1e9
                    ),
                ))
            } else {
                None
            };
        let now = judged.as_ref().map_or(outcome, |(o, _)| *o);
        if stopped && !matches!(now, Outcome::Ok | Outcome::RequestCancelled) {
            judged = Some((
                Outcome::Cancelled,
                "cut short by a stop (Ctrl-C or the end of the grace period)".into(),
            ));
        }
        judged
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
        // No prefill cap asked: requests take no prefill place.
        assert!(!d.prefill_capped());
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

    /// Polls at `now` and, when the answer is a send, tells the dispatcher it went.
    fn step(d: &mut Dispatcher<()>, now: u64, schedule: &mut dyn Schedule) -> Step {
        let step = d.poll(now, schedule);
        if let Step::Send(t) = step {
            d.on_sent(t.id, t.intended_ns, None);
        }
        step
    }

    fn sent_id(step: Step) -> Option<u64> {
        match step {
            Step::Send(t) => Some(t.id),
            _ => None,
        }
    }

    #[test]
    fn an_open_loop_phase_sleeps_to_each_requests_time_and_sends_it_then() {
        use super::super::schedule::OpenLoop;
        let offsets = std::sync::Arc::new(vec![0, 10 * MS, 10 * MS, 25 * MS]);
        let mut open = OpenLoop::new(offsets, 0, 1, 100 * MS, 0, 1, 0);
        let mut d = Dispatcher::<()>::default();
        d.begin_phase(Limits::capped(8), false);
        assert_eq!(sent_id(step(&mut d, 100 * MS, &mut open)), Some(0));
        assert_eq!(
            step(&mut d, 101 * MS, &mut open),
            Step::SleepUntil(110 * MS)
        );
        // Woken early: the same request, the same time.
        assert_eq!(
            step(&mut d, 109 * MS, &mut open),
            Step::SleepUntil(110 * MS)
        );
        assert_eq!(sent_id(step(&mut d, 110 * MS, &mut open)), Some(1));
        // Two requests due at once go one after the other, without sleeping.
        assert_eq!(sent_id(step(&mut d, 110 * MS, &mut open)), Some(2));
        assert_eq!(
            step(&mut d, 111 * MS, &mut open),
            Step::SleepUntil(125 * MS)
        );
        // A request that is late goes at once, still due at its time.
        match step(&mut d, 140 * MS, &mut open) {
            Step::Send(t) => assert_eq!((t.id, t.intended_ns), (3, Some(125 * MS))),
            other => panic!("{other:?}"),
        }
        assert_eq!(step(&mut d, 141 * MS, &mut open), Step::Done);
    }

    #[test]
    fn a_closed_loop_phase_waits_for_a_place_and_a_freed_one_sends_the_next() {
        use super::super::schedule::ClosedLoop;
        let mut closed = ClosedLoop::new(0, Some(4), 0, 1, 1, crate::record::Phase::Profiling);
        let mut d = Dispatcher::<()>::default();
        d.begin_phase(Limits::capped(2), false);
        assert_eq!(sent_id(step(&mut d, MS, &mut closed)), Some(0));
        assert_eq!(sent_id(step(&mut d, MS, &mut closed)), Some(1));
        assert_eq!(step(&mut d, MS, &mut closed), Step::WaitForPlace);
        assert_eq!(step(&mut d, 2 * MS, &mut closed), Step::WaitForPlace);
        d.on_done(3 * MS);
        assert_eq!(sent_id(step(&mut d, 3 * MS, &mut closed)), Some(2));
        d.on_done(4 * MS);
        assert_eq!(sent_id(step(&mut d, 4 * MS, &mut closed)), Some(3));
        assert_eq!(
            step(&mut d, 5 * MS, &mut closed),
            Step::Done,
            "the count is done"
        );
    }

    #[test]
    fn a_stop_drops_the_waiting_request_and_ends_the_phase() {
        use super::super::schedule::OpenLoop;
        let offsets = std::sync::Arc::new(vec![0, 50 * MS]);
        let mut open = OpenLoop::new(offsets.clone(), 0, 1, 0, 0, 1, 0);
        let mut d = Dispatcher::<()>::default();
        d.begin_phase(limits(8), false);
        assert_eq!(sent_id(step(&mut d, 0, &mut open)), Some(0));
        assert_eq!(step(&mut d, MS, &mut open), Step::SleepUntil(50 * MS));
        d.on_tick(2 * MS, true, false);
        assert_eq!(step(&mut d, 50 * MS, &mut open), Step::Done);
        // A request waiting for a place is dropped when a new phase begins: the new phase
        // sends its own schedule's first (id 0), not the old one's waiting request (id 1).
        d.on_done(3 * MS);
        let mut open = OpenLoop::new(offsets.clone(), 0, 1, 0, 0, 1, 0);
        d.begin_phase(Limits::capped(1), false);
        assert_eq!(sent_id(step(&mut d, 0, &mut open)), Some(0));
        assert_eq!(step(&mut d, 60 * MS, &mut open), Step::WaitForPlace);
        d.on_done(61 * MS);
        let mut open = OpenLoop::new(offsets, 0, 1, 0, 0, 1, 0);
        d.begin_phase(Limits::capped(1), false);
        assert_eq!(sent_id(step(&mut d, 62 * MS, &mut open)), Some(0));
    }

    #[test]
    fn polling_tags_the_ramps_sends_and_yields_after_each_batch_of_sends_in_a_row() {
        use super::super::schedule::ClosedLoop;
        let n = DISPATCH_BATCH;
        let phase = crate::record::Phase::Profiling;
        let mut closed = ClosedLoop::new(0, None, 0, 1, 1, phase);
        let ramp = Ramp {
            start_ns: 0,
            len_ns: 10 * MS,
            tag: true,
        };
        let mut d = Dispatcher::<()>::default();
        d.begin_phase(
            Limits {
                ramp: Some(ramp),
                ..Limits::capped(10 * n)
            },
            false,
        );
        let mut yields = Vec::new();
        let mut phases = Vec::new();
        let sends = 2 * (n + 1);
        for k in 1..=sends {
            // All but the last go during the ramp (its cap is then over 2,000).
            let now = if k < sends { 9 * MS } else { 20 * MS };
            let mut s = step(&mut d, now, &mut closed);
            if s == Step::Yield {
                yields.push(k);
                s = step(&mut d, now, &mut closed);
            }
            match s {
                Step::Send(t) => phases.push(t.phase),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            yields,
            [n + 1, sends],
            "each batch's next send lets the runtime in"
        );
        let ramped = &phases[..sends - 1];
        assert!(ramped.iter().all(|p| *p == crate::record::Phase::RampUp));
        assert_eq!(
            phases[sends - 1],
            phase,
            "after the ramp, sends are measured"
        );
        // A wait for a request's time starts the count again.
        use super::super::schedule::OpenLoop;
        let mut offsets = vec![0; n];
        offsets.push(MS);
        let mut open = OpenLoop::new(std::sync::Arc::new(offsets), 0, 1, 0, 0, 1, 0);
        d.begin_phase(Limits::capped(10 * n), false);
        for _ in 0..n {
            assert!(matches!(step(&mut d, 0, &mut open), Step::Send(_)));
        }
        assert_eq!(step(&mut d, 0, &mut open), Step::SleepUntil(MS));
        assert!(matches!(step(&mut d, MS, &mut open), Step::Send(_)));
    }

    /// Which of `waits.len()` sends, in a row, let the runtime in first (from 1).
    fn bursts(d: &mut Dispatcher<()>, waits: impl IntoIterator<Item = bool>) -> Vec<usize> {
        let mut yields = Vec::new();
        for (k, waited) in waits.into_iter().enumerate() {
            if d.burst(MS, waited) {
                yields.push(k + 1);
            }
            d.on_sent(0, None, None);
        }
        yields
    }

    #[test]
    fn a_burst_of_sends_lets_the_runtime_in_after_each_batch_and_a_wait_starts_over() {
        let n = DISPATCH_BATCH;
        let mut d = Dispatcher::<()>::default();
        d.begin_phase(Limits::capped(10 * n), false);
        let yields = bursts(&mut d, std::iter::repeat_n(false, 3 * (n + 1)));
        assert_eq!(yields, [n + 1, 2 * (n + 1), 3 * (n + 1)]);
        // A wait for the request's time starts the count again, and so does a new phase.
        let mut d = Dispatcher::<()>::default();
        d.begin_phase(Limits::capped(10 * n), false);
        let none: Vec<usize> = Vec::new();
        let waits = (0..2 * n).map(|k| k == n);
        assert_eq!(bursts(&mut d, waits), none);
        d.begin_phase(Limits::capped(10 * n), false);
        assert_eq!(bursts(&mut d, std::iter::repeat_n(false, n)), none);
        // Under a full cap each request waited for a place: no burst.
        let mut d = Dispatcher::<()>::default();
        d.begin_phase(Limits::capped(1), false);
        assert_eq!(bursts(&mut d, std::iter::repeat_n(false, 3 * n)), none);
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

    #[test]
    fn round_robin_spreads_requests_and_keeps_a_sessions_turns_on_one_server() {
        let mut d = Dispatcher::<()>::new(Servers::new(3, UrlStrategy::RoundRobin));
        let by_id: Vec<usize> = (0..6).map(|id| d.pick_server(id, None)).collect();
        assert_eq!(by_id, [0, 1, 2, 0, 1, 2]);
        // Turns 7, 8 and 9 of session 4 go where the session goes, whatever their ids.
        let turns: Vec<usize> = (7..10).map(|id| d.pick_server(id, Some(4))).collect();
        assert_eq!(turns, [1, 1, 1]);
        let mut one = Dispatcher::<()>::new(Servers::new(1, UrlStrategy::LeastInFlight));
        assert_eq!(one.pick_server(5, Some(2)), 0);
    }

    #[test]
    fn least_in_flight_goes_to_the_server_with_the_fewest_and_counts_ends() {
        let mut d = Dispatcher::<()>::new(Servers::new(3, UrlStrategy::LeastInFlight));
        // Ties go to the first: 0, 1, 2, then 0 again.
        let first: Vec<usize> = (0..4).map(|id| d.pick_server(id, None)).collect();
        assert_eq!(first, [0, 1, 2, 0]);
        // Server 2's request ends, then 1's: each is then the one with the fewest.
        d.server_done(2);
        assert_eq!(d.pick_server(4, None), 2);
        d.server_done(1);
        assert_eq!(d.pick_server(5, None), 1);
        // 0 holds 2, 1 and 2 one each: the next goes to 1, then 2.
        assert_eq!(d.pick_server(6, None), 1);
        assert_eq!(d.pick_server(7, None), 2);
    }

    #[test]
    fn a_request_is_cut_at_its_timeout_or_its_cancellation_whichever_comes_first() {
        let timeout = Cut::new(10 * MS, 100 * MS, None);
        assert_eq!(timeout.at(), 110 * MS);
        let cancelled = Cut::new(10 * MS, 100 * MS, Some(30 * MS));
        assert_eq!(cancelled.at(), 40 * MS);
        let late = Cut::new(10 * MS, 100 * MS, Some(500 * MS));
        assert_eq!(late.at(), 110 * MS);
        // No timeout in practice: nothing wraps.
        assert_eq!(Cut::new(10 * MS, u64::MAX, None).at(), u64::MAX);
    }

    #[test]
    fn a_cut_makes_a_failure_a_timeout_or_a_cancellation_and_leaves_a_whole_response() {
        let read = Outcome::ServerError;
        let timeout = Cut::new(0, 100 * MS, None);
        // Whole, even after its deadline or cut: stays so.
        assert_eq!(timeout.judge(Outcome::Ok, 150 * MS, true, false), None);
        // Failed before its deadline, not cut: its own failure.
        assert_eq!(timeout.judge(read, 50 * MS, false, false), None);
        // Cut by the watcher (its end stamped a moment before the deadline, or after), or
        // failed past its deadline: a timeout.
        for (end, cut) in [(99 * MS, true), (120 * MS, false)] {
            let (o, why) = timeout.judge(read, end, cut, false).unwrap();
            assert_eq!(o, Outcome::RequestTimeout);
            assert_eq!(why, "no complete response within 0.1s");
        }
        // A cancellation before the deadline: closed on purpose, said with its delay.
        let cancel = Cut::new(0, 100 * MS, Some(30 * MS));
        let (o, why) = cancel.judge(read, 29 * MS, true, false).unwrap();
        assert_eq!(o, Outcome::RequestCancelled);
        assert_eq!(
            why,
            "closed by the client 0.030s after it started (--request-cancellation-delay)"
        );
        assert_eq!(cancel.judge(Outcome::Ok, 35 * MS, true, false), None);
        assert_eq!(cancel.judge(read, 20 * MS, false, false), None);
        // A cancellation due after the deadline never comes: the deadline's timeout does.
        let late = Cut::new(0, 100 * MS, Some(200 * MS));
        let (o, _) = late.judge(read, 100 * MS, true, false).unwrap();
        assert_eq!(o, Outcome::RequestTimeout);
        // Both due at once: the deadline's timeout, as when the cancellation is later.
        let tie = Cut::new(0, 100 * MS, Some(100 * MS));
        let (o, _) = tie.judge(read, 100 * MS, true, false).unwrap();
        assert_eq!(o, Outcome::RequestTimeout);
    }

    #[test]
    fn a_stop_makes_any_failure_but_a_cancellation_cut_short() {
        let cut = Cut::new(0, 100 * MS, Some(30 * MS));
        let stopped = |o, end, expired| cut.judge(o, end, expired, true).map(|(o, _)| o);
        assert_eq!(
            stopped(Outcome::ServerError, 10 * MS, false),
            Some(Outcome::Cancelled)
        );
        assert_eq!(
            stopped(Outcome::HttpStatus(500), 10 * MS, false),
            Some(Outcome::Cancelled)
        );
        // Timed out, then stopped: cut short by the stop.
        let timeout = Cut::new(0, 10 * MS, None);
        assert_eq!(
            timeout.judge(Outcome::ServerError, 20 * MS, true, true),
            Some((
                Outcome::Cancelled,
                "cut short by a stop (Ctrl-C or the end of the grace period)".into()
            ))
        );
        // Closed on purpose, or whole: the stop changes nothing.
        assert_eq!(
            stopped(Outcome::ServerError, 30 * MS, true),
            Some(Outcome::RequestCancelled)
        );
        assert_eq!(stopped(Outcome::Ok, 10 * MS, false), None);
    }

    #[test]
    fn connections_take_the_source_addresses_in_turn_from_the_shards_own() {
        let mut none = Dispatcher::<()>::default();
        assert_eq!(none.next_local_address(), None);
        let servers =
            |shard| Servers::new(1, UrlStrategy::RoundRobin).with_local_addresses(3, shard);
        let mut first = Dispatcher::<()>::new(servers(0));
        let mut fifth = Dispatcher::<()>::new(servers(4));
        let turns = |d: &mut Dispatcher<()>| -> Vec<_> {
            (0..4).map(|_| d.next_local_address().unwrap()).collect()
        };
        assert_eq!(turns(&mut first), [0, 1, 2, 0]);
        assert_eq!(turns(&mut fifth), [1, 2, 0, 1]);
    }

    #[test]
    fn a_connection_is_kept_only_after_a_whole_response_the_server_would_keep_it_for() {
        assert_eq!(reuse(Outcome::Ok, true, false), Reuse::Keep);
        assert_eq!(reuse(Outcome::Ok, false, false), Reuse::ServerClosed);
        assert_eq!(
            reuse(Outcome::Ok, true, true),
            Reuse::Spent,
            "cut at the end"
        );
        assert_eq!(reuse(Outcome::Ok, false, true), Reuse::Spent);
        for failed in [
            Outcome::Reset,
            Outcome::RequestTimeout,
            Outcome::HttpStatus(429),
        ] {
            assert_eq!(reuse(failed, true, false), Reuse::Spent, "{failed:?}");
            assert_eq!(reuse(failed, false, false), Reuse::Spent, "{failed:?}");
        }
    }

    #[test]
    fn a_request_is_sent_again_once_only_after_a_reused_connection_gave_nothing() {
        // A kept-alive connection the server closed while it sat idle: once more, fresh.
        assert!(send_again(true, 0, false, false));
        // Not twice, not on a fresh connection, not after the response began, not once cut.
        assert!(!send_again(true, 1, false, false));
        assert!(!send_again(false, 0, false, false));
        assert!(!send_again(true, 0, true, false));
        assert!(!send_again(true, 0, false, true));
    }
}
