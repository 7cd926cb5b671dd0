//! One shard: a pinned thread with its own runtime, connections, buffers and records.
//!
//! The shard runs one dispatcher loop: it takes tickets from a [`Schedule`], waits for the
//! ticket's send time and for a free place under the concurrency cap, and spawns the request
//! on a connection from the shard's keep-alive pool. Nothing here is shared with other shards
//! except the read-only plan and a few progress counters.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use rustls::pki_types::ServerName;

use super::dispatch::{reuse, send_again, Cut, Dispatcher, Reuse, Servers, Step};
use super::limits::Limits;
use super::schedule::{Schedule, Ticket};
use super::turns::Turns;
use crate::clock::now_ns;
use crate::exchange::{Exchange, Scratch};
use crate::http::request::Template;
use crate::net::{Conn, FdSet};
use crate::plan::Plan;
use crate::record::{Outcome, Record};
use crate::stats::Dist;
use crate::sys::{prefetch, Prefetched};
use crate::timer::FineTimer;

/// A read buffer to start with: a streamed event or two.
const READ_BUF: usize = 2 * 1024;
/// What a read buffer may grow to, doubling after each read that filled it, so a backlog (a
/// large body, a shard that fell behind) is taken in a few large reads.
const READ_BUF_MAX: usize = 64 * 1024;
/// How often the watcher looks at the stop flag, the phase's deadlines and the requests'.
const WATCH_EVERY: Duration = Duration::from_millis(10);

/// Live counters a shard publishes for the progress line (one cache line each).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Progress {
    /// Measured requests finished.
    pub done: AtomicU64,
    /// Measured requests that failed.
    pub errors: AtomicU64,
    /// Requests in flight.
    pub in_flight: AtomicU64,
    /// The shard thread's kernel id, once it runs (0 before), for the starvation watch.
    pub tid: AtomicI32,
    /// Stop sending (the staircase found its knee); what is in flight finishes.
    pub finish: std::sync::atomic::AtomicBool,
    /// Σ latency and Σ latency² (seconds, as `f64` bits) of measured requests that
    /// succeeded, for the staircase's live judgement. Only the shard writes them.
    pub latency_sums: [AtomicU64; 2],
    /// Measured requests' TTFT so far (µs), for the live line.
    pub ttft_us: crate::stats::LiveBuckets,
    /// Measured requests' ITL so far (µs), for the live line.
    pub itl_us: crate::stats::LiveBuckets,
    /// Output tokens of measured requests that succeeded.
    pub output_tokens: AtomicU64,
    /// Measured requests by outcome other than `ok`, by [`Outcome::live_kind`].
    pub outcomes: [AtomicU64; crate::record::LIVE_KINDS.len()],
    /// When its first request was written (0 before): the live view says start-up is over.
    pub first_sent_ns: AtomicU64,
}

/// A connection with its buffers, reused across requests.
#[derive(Default)]
struct Slot {
    /// The server its connections go to.
    server: u16,
    conn: Option<Conn>,
    exchange: Exchange,
    /// The server ended this place's last connection after a whole response (it said
    /// `Connection: close`): the next request opens a new one, and says so.
    server_closed: bool,
}

/// What a shard measures while it runs: every request's record and the distributions of the
/// client's own timing.
#[derive(Default)]
pub(crate) struct Tally {
    /// Every request it sent.
    pub records: crate::record::RecordLog,
    /// Time from each read's arrival to its events being recorded (ns).
    pub record_lag: Dist,
    /// Content events of measured, successful requests.
    pub events: u64,
    /// Measured content events that came in one read with a later one, and so carry its
    /// arrival stamp.
    pub shared_events: u64,
    /// For reads of several content events (the one with a response's first token aside):
    /// the time since the previous read of the same response, the longest their older events
    /// can have waited unseen (ns).
    pub shared_wait: Dist,
}

/// A shard's buffers not in use, kept for the next request or read.
#[derive(Default)]
struct Spares {
    /// Emptied gap arrays of finished requests, for those that start (at most one per
    /// request in flight is ever needed).
    gaps: Vec<Vec<u64>>,
    /// Buffers requests are written into, taken for the send and given back after it: only
    /// sends under way hold one (a connection kept one each, as big as its largest prompt).
    writes: Vec<Vec<u8>>,
    /// Read buffers. A response holds one from a read until its bytes are all parsed; with
    /// kernel stamps the read takes it only once data has come, so the thousands of streams
    /// waiting for their next event hold none.
    reads: Vec<Vec<u8>>,
}

/// Shard state, owned by the shard's thread.
pub(crate) struct Shard {
    pub index: u16,
    pub plan: Arc<Plan>,
    /// Each server's TLS name (https only), by server index.
    server_names: Vec<ServerName<'static>>,
    /// Boxed: a request's task holds a pointer, not the connection and its decoder state
    /// (the task stays small, and nothing is copied in and out at each request).
    #[allow(clippy::vec_box)]
    pool: RefCell<Vec<Vec<Box<Slot>>>>,
    /// Every dispatching decision (caps, due times, stops, the prefill line, back-off):
    /// the tasks here tell it what happened and do what it says.
    dispatch: RefCell<Dispatcher<Rc<PrefillTurn>>>,
    waker: RefCell<Option<Waker>>,
    /// Sessions pausing between turns, woken when sending stops (an entry whose pause ended
    /// is held by nothing else, and is dropped when the list is next compacted).
    sleepers: RefCell<Vec<Rc<Cell<Option<Waker>>>>>,
    finished: Cell<bool>,
    fds: RefCell<FdSet>,
    pub scratch: RefCell<Scratch>,
    /// What the shard measures, handed back whole at its end.
    pub tally: RefCell<Tally>,
    /// Buffers not in use, taken by what starts and given back when it is done.
    spares: RefCell<Spares>,
    pub timer: FineTimer,
    progress: Arc<Progress>,
    stop: Arc<AtomicBool>,
    watcher: RefCell<Option<monoio::task::JoinHandle<()>>>,
    /// A large file's requests, built ahead by a feeder thread.
    pub feed: Option<super::feed::EntryFeed>,
    /// Why the feeder could not give a request, when it could not (the shard then stops).
    pub feed_error: RefCell<Option<super::feed::EntryFeedError>>,
}

impl Shard {
    pub(super) fn new(
        index: u16,
        plan: Arc<Plan>,
        progress: Arc<Progress>,
        stop: Arc<AtomicBool>,
        feed: Option<super::feed::EntryFeed>,
    ) -> std::io::Result<Rc<Shard>> {
        let n = plan.target.servers();
        let server_names = match plan.target.tls {
            Some(_) => (0..n)
                .map(|i| {
                    crate::tls::server_name(&plan.target.server(i).host)
                        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
                })
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let pointers = plan.target.pointers.clone();
        let answer = plan.target.kind.answer();
        let (strategy, locals) = (plan.target.strategy, plan.target.local_addresses.len());
        let shard = Rc::new(Shard {
            index,
            plan,
            server_names,
            pool: RefCell::new((0..n).map(|_| Vec::new()).collect()),
            dispatch: RefCell::new(Dispatcher::new(
                Servers::new(n, strategy).with_local_addresses(locals, usize::from(index)),
            )),
            waker: RefCell::new(None),
            sleepers: RefCell::default(),
            finished: Cell::new(false),
            fds: RefCell::new(FdSet::default()),
            scratch: RefCell::new(Scratch {
                pointers: pointers.clone(),
                answer,
                ..Scratch::default()
            }),
            tally: RefCell::default(),
            spares: RefCell::default(),
            timer: FineTimer::start()?,
            progress,
            stop,
            watcher: RefCell::new(None),
            feed,
            feed_error: RefCell::new(None),
        });
        let watcher = monoio::spawn(watch(Rc::downgrade(&shard)));
        *shard.watcher.borrow_mut() = Some(watcher);
        Ok(shard)
    }

    fn wake(&self) {
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    /// True when request `fd_slot` must end now: a stop, or its deadline passed.
    fn cut(&self, fd_slot: usize) -> bool {
        self.cancelled() || self.fds.borrow().expired(fd_slot)
    }

    /// Sending has stopped.
    fn stopped(&self) -> bool {
        self.dispatch.borrow().stopped()
    }

    /// What is in flight is to be cut.
    fn cancelled(&self) -> bool {
        self.dispatch.borrow().cancelled()
    }

    /// The most requests ever in flight at once.
    pub(super) fn peak_in_flight(&self) -> usize {
        self.dispatch.borrow().peak()
    }

    /// Sending stopped: the dispatcher, the requests waiting for a prefill place and the
    /// sessions between turns look again (and find it so).
    fn on_stop(&self) {
        self.wake();
        self.grant_prefill();
        self.wake_sleepers();
    }

    /// Wakes the sessions pausing between turns (sending stopped: they send no more turns).
    fn wake_sleepers(&self) {
        for s in self.sleepers.borrow_mut().drain(..) {
            if let Some(w) = s.take() {
                w.wake();
            }
        }
    }

    /// Pauses until `t`; false when sending stopped first (the session then ends).
    async fn pause_until(&self, t: u64) -> bool {
        if self.stopped() {
            return false;
        }
        let sleep = std::pin::pin!(self.timer.sleep_until(t));
        UntilStop {
            shard: self,
            sleep,
            waker: None,
        }
        .await
    }

    /// Waits for a place under `--prefill-concurrency`, in line behind the requests that
    /// waited first. Returns how long it waited (ns), or `None` when sending has stopped
    /// meanwhile (the request is then not sent).
    async fn prefill_place(&self, rec: &mut Record) -> Option<u64> {
        if !self.dispatch.borrow().prefill_capped() {
            return Some(0);
        }
        let t = now_ns();
        if self.dispatch.borrow_mut().take_prefill(t) {
            rec.holds_prefill = true;
            return Some(0);
        }
        let turn = Rc::new(PrefillTurn::default());
        self.dispatch.borrow_mut().wait_prefill(turn.clone());
        Granted(&turn).await;
        rec.holds_prefill = true;
        if self.stopped() {
            self.prefill_done(rec);
            return None;
        }
        Some(now_ns() - t)
    }

    /// The source address of the next connection, in turn (none: the kernel's choice).
    fn local_address(&self) -> Option<std::net::IpAddr> {
        let k = self.dispatch.borrow_mut().next_local_address()?;
        Some(self.plan.target.local_addresses[k])
    }

    /// Gives back `rec`'s place under the prefill cap (its first token came, or it ended).
    fn prefill_done(&self, rec: &mut Record) {
        if std::mem::take(&mut rec.holds_prefill) {
            self.dispatch.borrow_mut().prefill_done();
            self.grant_prefill();
        }
    }

    /// Hands free places under the prefill cap to the requests in line, oldest first; every
    /// one of them once sending has stopped (they then give it back unsent).
    fn grant_prefill(&self) {
        let granted = self.dispatch.borrow_mut().grant_prefill(now_ns());
        for turn in granted {
            turn.granted.set(true);
            if let Some(w) = turn.waker.take() {
                w.wake();
            }
        }
    }

    /// Runs one phase: dispatches the schedule's tickets within `limits`, and returns when
    /// nothing is in flight.
    pub(super) async fn run_phase(self: &Rc<Self>, schedule: &mut dyn Schedule, limits: Limits) {
        // A phase cut at its own deadline (a warm-up's grace period) does not stop the next
        // one; a stop of the run (Ctrl-C) does.
        let stopped = self.stop.load(Ordering::Relaxed);
        self.dispatch.borrow_mut().begin_phase(limits, stopped);
        loop {
            let step = self.dispatch.borrow_mut().poll(now_ns(), schedule);
            let ticket = match step {
                Step::SleepUntil(at) => {
                    self.timer.sleep_until(at).await;
                    continue;
                }
                Step::Yield => {
                    self.timer.sleep_until(now_ns() + 1_000).await;
                    continue;
                }
                Step::WaitForPlace => {
                    WaitFor {
                        shard: self,
                        ready: |s: &Shard| s.dispatch.borrow().may_send(now_ns()),
                    }
                    .await;
                    continue;
                }
                Step::Done => break,
                Step::Send(ticket) => ticket,
            };
            // Taken when it is to be sent: a wait for the feeder is a wait of the send.
            let built = match &self.feed {
                None => None,
                Some(f) => match f.take(ticket.id, &self.timer, || self.stopped()).await {
                    None => break,
                    Some(Ok(entry)) => Some(entry),
                    Some(Err(e)) => {
                        *self.feed_error.borrow_mut() = Some(e);
                        break;
                    }
                },
            };
            let sent = self.dispatch.borrow_mut().on_sent(
                ticket.id,
                ticket.intended_ns,
                self.plan.load.user_centric,
            );
            self.progress
                .in_flight
                .store(sent.in_flight as u64, Ordering::Relaxed);
            if self.plan.workload.sessions.is_some() {
                monoio::spawn(Prefetched(session(
                    self.clone(),
                    ticket,
                    sent.due,
                    sent.first_user,
                )));
            } else {
                monoio::spawn(Prefetched(request(self.clone(), ticket, sent.due, built)));
            }
        }
        WaitFor {
            shard: self,
            ready: |s: &Shard| s.dispatch.borrow().in_flight() == 0,
        }
        .await;
        self.dispatch.borrow_mut().end_phase();
    }

    /// Closes every connection and ends the shard's helper tasks. monoio does not drop
    /// unfinished tasks with its runtime, so without this their sockets would stay open.
    pub(super) async fn close(&self) {
        self.finished.set(true);
        self.pool.borrow_mut().clear();
        let watcher = self.watcher.borrow_mut().take();
        if let Some(w) = watcher {
            w.await;
        }
        self.timer.close().await;
    }

    /// Gives back a place under the concurrency cap, freed by a request that ended at
    /// `end_ns`.
    fn release(&self, end_ns: u64) {
        let n = self.dispatch.borrow_mut().on_done(end_ns);
        self.progress.in_flight.store(n as u64, Ordering::Relaxed);
        self.wake();
    }

    /// Keeps a finished request's record.
    fn record(&self, rec: Record) {
        if rec.phase == crate::record::Phase::Profiling {
            self.progress.done.fetch_add(1, Ordering::Relaxed);
            if let Some(k) = rec.outcome.live_kind() {
                self.progress.outcomes[k].fetch_add(1, Ordering::Relaxed);
                // A request the client cancelled on purpose is no error.
                if rec.outcome != Outcome::RequestCancelled {
                    self.progress.errors.fetch_add(1, Ordering::Relaxed);
                }
            } else if let Some(first) = rec.first_content_ns {
                // A few counters per request, off the per-event path.
                let p = &self.progress;
                let secs = rec.latency() as f64 / 1e9;
                for (sum, add) in p.latency_sums.iter().zip([secs, secs * secs]) {
                    let v = f64::from_bits(sum.load(Ordering::Relaxed)) + add;
                    sum.store(v.to_bits(), Ordering::Relaxed);
                }
                p.ttft_us.record(first.saturating_sub(rec.start_ns) / 1000);
                let tokens = rec.osl.or(rec.tokenizer_osl).unwrap_or(0);
                p.output_tokens.fetch_add(tokens, Ordering::Relaxed);
                if let (Some(last), true) = (rec.last_content_ns, tokens >= 2) {
                    p.itl_us
                        .record(last.saturating_sub(first) / 1000 / (tokens - 1));
                }
            }
        }
        let mut tally = self.tally.borrow_mut();
        if rec.is_measured_ok() {
            tally.events += content_events(&rec) as u64;
        }
        let gaps = tally.records.push(rec);
        drop(tally);
        if gaps.capacity() > 0 {
            // (A request closed before it was sent took none: nothing to give back.)
            self.spares.borrow_mut().gaps.push(gaps);
        }
    }
}

/// A pause that ends at its time (true) or when sending stops (false).
struct UntilStop<'a, S> {
    shard: &'a Shard,
    sleep: Pin<&'a mut S>,
    waker: Option<Rc<Cell<Option<Waker>>>>,
}

impl<S: Future<Output = ()>> Future for UntilStop<'_, S> {
    type Output = bool;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        if self.shard.stopped() {
            return Poll::Ready(false);
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(true);
        }
        let w = Some(cx.waker().clone());
        match &self.waker {
            Some(cell) => cell.set(w),
            None => {
                let cell = Rc::new(Cell::new(w));
                let mut all = self.shard.sleepers.borrow_mut();
                if all.len() >= 64 && all.len() == all.capacity() {
                    // Drop the entries of pauses that ended before the list grows.
                    all.retain(|e| Rc::strong_count(e) > 1);
                }
                all.push(cell.clone());
                drop(all);
                self.waker = Some(cell);
            }
        }
        Poll::Pending
    }
}

/// A request's place in line for the prefill cap.
#[derive(Default)]
struct PrefillTurn {
    granted: Cell<bool>,
    waker: Cell<Option<Waker>>,
}

/// Waits until a [`PrefillTurn`] is granted (the place is then the request's).
struct Granted<'a>(&'a PrefillTurn);

impl Future for Granted<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.granted.get() {
            Poll::Ready(())
        } else {
            self.0.waker.set(Some(cx.waker().clone()));
            Poll::Pending
        }
    }
}

/// Waits until `ready(shard)` holds; re-checked whenever the shard wakes its dispatcher.
struct WaitFor<'a, F> {
    shard: &'a Shard,
    ready: F,
}

impl<F: Fn(&Shard) -> bool + Unpin> Future for WaitFor<'_, F> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if (self.ready)(self.shard) {
            Poll::Ready(())
        } else {
            *self.shard.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

/// Watches the global stop flag and the phase deadlines.
async fn watch(shard: std::rc::Weak<Shard>) {
    loop {
        monoio::time::sleep(WATCH_EVERY).await;
        let Some(shard) = shard.upgrade() else { return };
        if shard.finished.get() {
            return;
        }
        let interrupted = shard.stop.load(Ordering::Relaxed);
        let finish = shard.progress.finish.load(Ordering::Relaxed);
        let now = now_ns();
        let due = shard
            .dispatch
            .borrow_mut()
            .on_tick(now, interrupted, finish);
        if due.cancel {
            // Every tick: a connection that opened since the last one is cut too.
            shard.fds.borrow().shutdown_all();
        }
        shard.fds.borrow_mut().expire(now);
        if due.cancel || due.stop_dispatch {
            shard.on_stop();
        }
        let (ramping, prefill_ramping) = {
            let d = shard.dispatch.borrow();
            (d.ramping(), d.prefill_ramping(now))
        };
        if prefill_ramping {
            // The prefill cap grows with time: let waiting requests take the new places.
            shard.grant_prefill();
        }
        if ramping {
            // The concurrency cap grows with time: let the dispatcher look again.
            shard.wake();
        }
    }
}

/// Sends `ticket`'s request: `built` by the feeder (a streamed file), or the plan's entry.
async fn request(
    shard: Rc<Shard>,
    ticket: Ticket,
    due: Option<u64>,
    built: Option<Box<crate::workload::Entry>>,
) {
    let plan = shard.plan.clone();
    let entry = match &built {
        Some(e) => e,
        None => &plan.workload.dataset.entries[ticket.entry as usize],
    };
    let mut rec = Record::new(
        ticket.id,
        shard.index,
        ticket.phase,
        ticket.entry,
        // A file's prompt is counted after the run (`Dataset::count_sent`).
        entry.known_isl(),
    );
    rec.intended_ns = ticket.intended_ns;
    rec.due_ns = due;
    rec.requested_osl = entry.requested_osl;
    if exchange_once(&shard, &entry.template, &mut rec).await {
        let end = rec.end_ns;
        shard.record(rec);
        shard.release(end);
    } else {
        shard.release(now_ns());
    }
}

/// A multi-turn session: each turn sends the whole history, the real answers included, and
/// waits `--session-turn-delay` after the previous answer. Occupies one place under the
/// concurrency cap for the whole session.
///
/// With user-centric timing the session is a user's, `first_user` when it is one of the
/// run's first users. [`Turns`] says when each turn goes and when the place is freed.
async fn session(shard: Rc<Shard>, ticket: Ticket, due: Option<u64>, first_user: Option<u64>) {
    use crate::api::Prompt;
    let plan = shard.plan.clone();
    let sessions = plan.workload.sessions.as_ref().expect("session mode");
    let s = &sessions.list[ticket.entry as usize % sessions.list.len()];
    let users = plan.load.user_centric;
    let mut history = Prompt::Messages(Vec::new());
    let mut context_tokens = 0u32;
    if let (Some((text, tokens)), Prompt::Messages(h)) = (&s.system, &mut history) {
        h.push(serde_json::json!({"role": "system", "content": text}));
        context_tokens = *tokens;
    }
    let skip = Turns::first_turn(first_user, users, s.turns.len());
    let mut clock = Turns::new(users, due, now_ns());
    if let Some(at) = clock.start_at() {
        if !shard.pause_until(at).await {
            clock.unsent(now_ns());
            shard.release(clock.release_at());
            return;
        }
    }
    for (k, turn) in s.turns.iter().enumerate().skip(skip) {
        if k > skip && (!shard.pause_until(clock.next_at(turn.delay_ns)).await || shard.cancelled())
        {
            break;
        }
        if let Prompt::Messages(h) = &mut history {
            h.push(serde_json::json!({"role": "user", "content": turn.prompt}));
        }
        let body = sessions.body.render(&history, turn.osl);
        let template = crate::http::request::Template::post_json(&sessions.head, &body);
        let isl = context_tokens + turn.isl;
        let mut rec = Record::new(
            ticket.id * crate::workload::MAX_TURNS + k as u64,
            shard.index,
            ticket.phase,
            ticket.entry,
            Some(isl),
        );
        rec.requested_osl = turn.osl;
        if k == skip {
            // Open loop: the session's start was scheduled.
            rec.intended_ns = ticket.intended_ns;
        }
        rec.session = Some((ticket.id, (k - skip) as u32));
        rec.keep_text = true;
        rec.due_ns = clock.due();
        if !exchange_once(&shard, &template, &mut rec).await {
            clock.unsent(now_ns());
            break;
        }
        let next_delay = s.turns.get(k + 1).map(|t| t.delay_ns);
        clock.on_turn(rec.start_ns, rec.end_ns, next_delay);
        let ok = rec.outcome == Outcome::Ok;
        context_tokens = isl + rec.osl.unwrap_or(0) as u32;
        // The record keeps the text only when its tokens still have to be counted.
        let answer = if rec.osl.is_some() {
            std::mem::take(&mut rec.text)
        } else {
            rec.text.clone()
        };
        shard.record(rec);
        if !ok {
            break;
        }
        if let Prompt::Messages(h) = &mut history {
            h.push(serde_json::json!({"role": "assistant", "content": answer}));
        }
    }
    shard.release(clock.release_at());
}

/// Sends `template` as request `rec` on a pooled connection, within the request timeout (and,
/// for a request chosen for cancellation, closes it after the cancellation delay). Returns
/// false when it was not sent because sending stopped while it waited for a prefill place.
async fn exchange_once(shard: &Rc<Shard>, template: &Template, rec: &mut Record) -> bool {
    let plan = &shard.plan;
    let Some(wait) = shard.prefill_place(rec).await else {
        return false;
    };
    rec.prefill_wait_ns = wait;
    let cancel_after = plan
        .load
        .cancellation
        .filter(|(c, seed)| c.chooses(*seed, rec.id))
        .map(|(c, _)| c.delay_ns);
    rec.to_cancel = cancel_after.is_some();
    if cancel_after == Some(0) {
        // Closed before it could be sent (AIPerf's delay 0).
        rec.start_ns = now_ns();
        rec.end_ns = rec.start_ns;
        rec.outcome = Outcome::RequestCancelled;
        rec.error = Some("closed by the client before it was sent (cancellation delay 0)".into());
        shard.prefill_done(rec);
        return true;
    }
    let server = shard
        .dispatch
        .borrow_mut()
        .pick_server(rec.id, rec.session.map(|(s, _)| s));
    rec.server = server as u16;
    let mut slot = shard.pool.borrow_mut()[server].pop().unwrap_or_else(|| {
        Box::new(Slot {
            server: server as u16,
            ..Slot::default()
        })
    });
    // A finished request's array, grown if need be to the tokens asked for, instead of an
    // allocation per request and repeated growth while tokens stream in.
    rec.chunk_gaps_ns = shard.spares.borrow_mut().gaps.pop().unwrap_or_default();
    rec.chunk_gaps_ns
        .reserve_exact(rec.requested_osl.map_or(0, |n| n as usize));
    let cut = Cut::new(now_ns(), plan.target.request_timeout_ns, cancel_after);
    let fd_slot = shard.fds.borrow_mut().insert(cut.at());
    drive(shard, &mut slot, template, rec, fd_slot, cut.at()).await;
    shard.prefill_done(rec);
    let expired = shard.fds.borrow_mut().remove(fd_slot);
    if let Some((outcome, why)) = cut.judge(rec.outcome, rec.end_ns, expired, shard.cancelled()) {
        rec.outcome = outcome;
        rec.error = Some(why);
    }
    match reuse(rec.outcome, slot.exchange.keep_alive(), expired) {
        Reuse::Keep => {}
        Reuse::ServerClosed => (slot.conn, slot.server_closed) = (None, true),
        Reuse::Spent => (slot.conn, slot.server_closed) = (None, false),
    }
    shard.dispatch.borrow_mut().server_done(server);
    shard.pool.borrow_mut()[server].push(slot);
    if matches!(
        rec.outcome,
        Outcome::ConnectFailed | Outcome::ConnectTimeout | Outcome::TlsFailed
    ) {
        // Boxed: rare, and its timer would widen every request's task.
        Box::pin(back_off(shard)).await;
    }
    true
}

/// Content events a response has recorded so far.
fn content_events(rec: &Record) -> usize {
    usize::from(rec.first_content_ns.is_some()) + rec.gap_count() as usize
}

/// Holds the request's place for a while after its connection failed to open, so that a dead
/// server is not hammered thousands of times a second (each failure is still counted). Cut
/// short by a stop or the end of dispatch.
async fn back_off(shard: &Shard) {
    let wait = shard.dispatch.borrow_mut().connect_failed();
    let until = now_ns() + wait;
    while !shard.stopped() {
        let left = until.saturating_sub(now_ns());
        if left == 0 {
            break;
        }
        monoio::time::sleep(Duration::from_nanos(left.min(20_000_000))).await;
    }
}

/// Opens `slot`'s connection, within the request's `deadline` too (the watcher cannot cut a
/// socket before it is known); false, with `rec` ended, when it could not.
async fn connect(shard: &Shard, slot: &mut Slot, rec: &mut Record, deadline: u64) -> bool {
    let plan = &shard.plan;
    let server = usize::from(slot.server);
    let tls = plan.target.tls.as_ref().zip(shard.server_names.get(server));
    let left = deadline.saturating_sub(now_ns());
    let limit = Duration::from_nanos(plan.target.connect_timeout_ns.min(left));
    let addr = plan.target.server(server).addr;
    match monoio::time::timeout(limit, Conn::open(addr, shard.local_address(), tls)).await {
        Ok(Ok(mut c)) => {
            shard.dispatch.borrow_mut().connected();
            (rec.connect_us, rec.tls_us) = c.opening_us;
            rec.new_connection |= std::mem::take(&mut slot.server_closed);
            if plan.spec.engine.kernel_timestamps {
                c.enable_rx_timestamps();
                c.enable_tx_timestamps();
            }
            slot.conn = Some(c);
            true
        }
        Ok(Err(e)) => {
            rec.outcome = e.outcome;
            rec.error = Some(e.message);
            rec.end_ns = now_ns();
            false
        }
        Err(_) => {
            rec.outcome = Outcome::ConnectTimeout;
            rec.error = Some(format!("connect to {addr} timed out"));
            rec.end_ns = now_ns();
            false
        }
    }
}

/// Writes `rec`'s request on `conn` and stamps its start: the write's, until the kernel's
/// transmit stamp replaces it (see [`first_bytes`]).
async fn send(
    shard: &Shard,
    conn: &mut Conn,
    template: &Template,
    rec: &mut Record,
) -> std::io::Result<u64> {
    let mut wbuf = shard.spares.borrow_mut().writes.pop().unwrap_or_default();
    template.write_into(&mut wbuf, rec.id);
    let before = now_ns();
    let (res, wbuf) = conn.send(wbuf).await;
    rec.sending_ns = (now_ns() - before).min(u64::from(u32::MAX)) as u32;
    shard.spares.borrow_mut().writes.push(wbuf);
    rec.start_ns = res.as_ref().map_or_else(|_| now_ns(), |t| *t);
    rec.start_source = crate::record::StartSource::Write;
    if shard.progress.first_sent_ns.load(Ordering::Relaxed) == 0 {
        shard
            .progress
            .first_sent_ns
            .store(rec.start_ns, Ordering::Relaxed);
    }
    res
}

/// The response's first bytes were read, stamped `t`: the kernel's transmit stamp, queued
/// before any reply could arrive, becomes the request's start when there is one, and the
/// time to the first bytes is kept (at least 1 µs: 0 means none yet).
#[inline]
fn first_bytes(conn: &mut Conn, rec: &mut Record, t: u64) {
    if let Some(tx) = conn.tx_stamp() {
        rec.start_ns = tx;
        rec.start_source = crate::record::StartSource::KernelTx;
    }
    let us = t.saturating_sub(rec.start_ns) / 1000;
    rec.first_byte_us = us.clamp(1, u64::from(u32::MAX)) as u32;
}

/// Keeps what a read's first `used` bytes left (part of an event) for the next read, grows
/// a buffer the read filled (up to [`READ_BUF_MAX`]), and gives an emptied one back.
#[inline]
fn keep_rest(shard: &Shard, rbuf: &mut Vec<u8>, used: usize, filled: bool) {
    if used == rbuf.len() {
        rbuf.clear();
    } else {
        rbuf.drain(..used);
    }
    if filled && rbuf.capacity() < READ_BUF_MAX {
        rbuf.reserve_exact(rbuf.capacity());
    }
    if rbuf.is_empty() {
        shard.spares.borrow_mut().reads.push(std::mem::take(rbuf));
    }
}

/// Tallies a measured read stamped `t` (and whether it `filled` the buffer) that gave
/// `events` content events (`had_first`: after the first token): how long it waited for the
/// shard, and through `groups` the events that share its stamp with other reads.
#[inline]
fn tally_read(
    shard: &Shard,
    groups: &mut super::reads::ReadGroups,
    rec: &mut Record,
    t: u64,
    filled: bool,
    events: usize,
    had_first: bool,
) {
    let now = now_ns();
    let mut tally = shard.tally.borrow_mut();
    tally.record_lag.record(now - t);
    let shared = groups.on_read(t, now, filled, events, had_first, rec.start_ns);
    if shared.events > 0 {
        tally.shared_events += shared.events;
        if let Some(ns) = shared.first_token_ns {
            rec.first_token_shared_ns = ns;
        }
        if let Some(w) = shared.wait_ns {
            tally.shared_wait.record(w);
        }
    }
}

/// Sends one request and reads its response, retrying once on a fresh connection when a
/// reused keep-alive connection turns out to be dead before any response byte (llama.cpp
/// closes after every stream while advertising keep-alive).
async fn drive(
    shard: &Shard,
    slot: &mut Slot,
    template: &Template,
    rec: &mut Record,
    fd_slot: usize,
    deadline: u64,
) {
    for attempt in 0..2 {
        if shard.cut(fd_slot) {
            // Cancelled or timed out: the caller says which.
            rec.outcome = Outcome::Cancelled;
            rec.end_ns = now_ns();
            return;
        }
        // Boxed, timer and all: opening (TLS handshake included) is rare on kept-alive
        // connections, and inline its state would widen every request's task.
        if slot.conn.is_none() && !Box::pin(connect(shard, slot, rec, deadline)).await {
            return;
        }
        // Where the connection and its decoder live, for the prefetch before each read.
        let slot_at: *const Slot = &*slot;
        let conn = slot.conn.as_mut().expect("connected above");
        if conn.used && attempt == 0 && conn.spoiled() {
            // Bytes the server sent after its previous response (or its close): they belong
            // to no request, so this one goes on a fresh connection.
            slot.conn = None;
            rec.reconnected = true;
            continue;
        }
        shard.fds.borrow_mut().set(fd_slot, conn.fd());
        let reused = conn.used;
        conn.used = true;

        let mut want_tx = true;
        if let Err(e) = send(shard, conn, template, rec).await {
            // Nothing came back yet; a cut is seen at the top of the loop.
            if send_again(reused, attempt, false, false) {
                slot.conn = None;
                rec.reconnected = true;
                continue;
            }
            rec.outcome = Outcome::Reset;
            rec.error = Some(format!("sending the request: {e}"));
            rec.end_ns = now_ns();
            return;
        }

        slot.exchange.reset();
        let mut rbuf = Vec::new();
        let fresh = || {
            let b = shard.spares.borrow_mut().reads.pop();
            b.unwrap_or_else(|| Vec::with_capacity(READ_BUF))
        };
        let measured = rec.phase == crate::record::Phase::Profiling;
        let mut groups = super::reads::ReadGroups::default();
        let retry = loop {
            // While the kernel copies the bytes in, bring in what their processing touches
            // outside this task: the connection and decoder, the ends of the gap array and of
            // the kept text.
            let warm = || {
                prefetch(slot_at, std::mem::size_of::<Slot>());
                let (gaps, text) = (&rec.chunk_gaps_ns, &rec.text);
                prefetch(gaps.as_ptr().wrapping_add(gaps.len()), 8);
                prefetch(text.as_ptr().wrapping_add(text.len()), 8);
            };
            let (res, buf) = conn.recv_stamped(rbuf, fresh, warm).await;
            rbuf = buf;
            let filled = rbuf.len() == rbuf.capacity();
            // The kernel's receive time when stamps are on (the kernel starts stamping a moment
            // after the first socket asks), else now: every event in this read gets it, and its
            // lag behind now is the shard's own delay.
            let (res, t) = match res {
                Ok((n, stamp)) => (Ok(n), stamp.unwrap_or_else(now_ns)),
                Err(e) => (Err(e), now_ns()),
            };
            match res {
                Ok(n) if n > 0 => {
                    if want_tx {
                        want_tx = false;
                        first_bytes(conn, rec, t);
                    }
                    let (events_before, had_first) =
                        (content_events(rec), rec.first_content_ns.is_some());
                    let used = slot
                        .exchange
                        .feed(&rbuf, t, rec, &mut shard.scratch.borrow_mut());
                    if rec.holds_prefill && rec.first_content_ns.is_some() {
                        shard.prefill_done(rec);
                    }
                    keep_rest(shard, &mut rbuf, used, filled);
                    if measured {
                        let events = content_events(rec).saturating_sub(events_before);
                        tally_read(shard, &mut groups, rec, t, filled, events, had_first);
                    }
                    if slot.exchange.is_done() {
                        break false;
                    }
                }
                // The connection closed (`Ok(0)`) or failed.
                end => {
                    let saw_bytes = slot.exchange.saw_bytes();
                    if send_again(reused, attempt, saw_bytes, shard.cut(fd_slot)) {
                        break true;
                    }
                    if let Err(e) = end {
                        rec.outcome = Outcome::Reset;
                        rec.error = Some(format!("reading the response: {e}"));
                        rec.end_ns = t;
                    } else {
                        slot.exchange.eof(t, rec, &mut shard.scratch.borrow_mut());
                    }
                    break false;
                }
            }
        };
        if rbuf.capacity() > 0 {
            rbuf.clear();
            shard.spares.borrow_mut().reads.push(rbuf);
        }
        if retry {
            slot.conn = None;
            rec.reconnected = true;
            rec.first_content_ns = None;
            continue;
        }
        return;
    }
}
