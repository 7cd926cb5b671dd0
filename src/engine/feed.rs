//! A large file's requests, built on a thread of their own a little ahead of the shard that
//! sends them (see [`crate::workload::Stream`]): the shard takes each ready-made, and the
//! file is never held whole.
//!
//! The feeder walks the shard's own sequence of tickets (the same schedules, so the same
//! ids and entries in the same order) and keeps a bounded queue full. Before the run starts
//! the shard waits until the queue is full, so the first burst finds its requests built;
//! during the run a shard that finds the queue empty waits (in short timer steps) and counts
//! it: the client was then the limit, which the run's warnings say.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, TryRecvError, TrySendError};
use std::time::Duration;

use crate::clock::now_ns;

/// How long a shard waits between looks at an empty queue.
const STALL_STEP_NS: u64 = 50_000;
/// How often a wait for a full queue looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(10);
/// Bytes of built requests a queue holds at most.
const QUEUE_BYTES: u64 = 64 << 20;

/// One built request (its id, and it or why it could not be built).
type Built<T, E> = (u64, Result<T, E>);

/// Why the feeder gave no request: it could not build one (`E`, from the builder), or it is
/// out of step with the shard.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum FeedError<E> {
    /// The builder's error (the file could not be read again).
    #[error("{0}")]
    Build(#[source] E),
    /// It built another request than the one due.
    #[error("the request feeder built request {got} where {due} was due")]
    OutOfStep {
        /// The id it built.
        got: u64,
        /// The id due.
        due: u64,
    },
    /// It ended before the shard's last request.
    #[error("the request feeder ended early")]
    Ended,
}

/// A shard's feeder of a streamed file's requests, as the engine starts it.
pub(super) type EntryFeed = Feed<Box<crate::workload::Entry>, crate::workload::WorkloadError>;

/// Why an [`EntryFeed`] gave no request.
pub(super) type EntryFeedError = FeedError<crate::workload::WorkloadError>;

/// A shard's end of its feeder of `T`s (requests: [`crate::workload::Entry`]), built or
/// refused with an `E`.
pub(super) struct Feed<T, E> {
    rx: Option<Receiver<Built<T, E>>>,
    /// Nothing is sent on it: the feeder drops its end once the queue is full (or it is
    /// done), which wakes a wait on this one.
    full: Receiver<()>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Requests the shard had to wait for.
    pub stalls: Cell<u64>,
}

/// The most arrivals of a schedule (offsets in ns, in order) within any one second.
pub(super) fn busiest_second(offsets: &[u64]) -> usize {
    let mut from = 0;
    let mut most = 0;
    for (i, &t) in offsets.iter().enumerate() {
        while t.saturating_sub(offsets[from]) >= 1_000_000_000 {
            from += 1;
        }
        most = most.max(i + 1 - from);
    }
    most
}

/// Requests a queue holds: twice `at_once`, the most the shard may send in a burst (its share
/// of the concurrency, which a closed loop's first burst takes at once; an open loop's
/// busiest second), at least 256, within [`QUEUE_BYTES`].
pub(super) fn depth(at_once: usize, avg_request_bytes: u64) -> usize {
    let by_bytes = (QUEUE_BYTES / avg_request_bytes.max(1)).max(64) as usize;
    at_once.saturating_mul(2).clamp(256, 1 << 16).min(by_bytes)
}

impl<T: Send + 'static, E: Send + 'static> Feed<T, E> {
    /// Starts a feeder thread (`ringperf-feed-{shard}`) that builds `tickets`' entries in
    /// their order, `depth` ahead.
    pub(super) fn start(
        shard: usize,
        tickets: impl Iterator<Item = (u64, u32)> + Send + 'static,
        depth: usize,
        build: impl Fn(u32) -> Result<T, E> + Send + 'static,
    ) -> std::io::Result<Feed<T, E>> {
        let (tx, rx) = sync_channel::<Built<T, E>>(depth);
        let (not_full, full) = sync_channel::<()>(0);
        let thread = std::thread::Builder::new()
            .name(format!("ringperf-feed-{shard}"))
            .spawn(move || {
                let mut not_full = Some(not_full);
                for (id, entry) in tickets {
                    let built = (id, build(entry));
                    let failed = built.1.is_err();
                    let sent = match tx.try_send(built) {
                        Ok(()) => true,
                        Err(TrySendError::Full(built)) => {
                            drop(not_full.take());
                            tx.send(built).is_ok()
                        }
                        Err(TrySendError::Disconnected(_)) => false,
                    };
                    if !sent || failed {
                        break;
                    }
                }
            })?;
        Ok(Feed {
            rx: Some(rx),
            full,
            thread: Some(thread),
            stalls: Cell::new(0),
        })
    }

    /// Blocks until the queue is full (or the feeder is done), or `stop` is set (looked at
    /// every 10 ms: a signal handler sets it, and wakes nothing).
    pub(super) fn wait_full(&self, stop: &AtomicBool) {
        while let Err(RecvTimeoutError::Timeout) = self.full.recv_timeout(STOP_CHECK) {
            if stop.load(Ordering::Relaxed) {
                return;
            }
        }
    }

    /// Request `id`, built; `None` when `give_up` says to stop waiting for it. An error says
    /// why there is none (the file could not be read again, or the feeder is out of step).
    pub(super) async fn take(
        &self,
        id: u64,
        timer: &crate::timer::FineTimer,
        give_up: impl Fn() -> bool,
    ) -> Option<Result<T, FeedError<E>>> {
        let rx = self.rx.as_ref().expect("open until dropped");
        let mut waited = false;
        loop {
            match rx.try_recv() {
                Ok((got, built)) if got == id => return Some(built.map_err(FeedError::Build)),
                Ok((got, _)) => return Some(Err(FeedError::OutOfStep { got, due: id })),
                Err(TryRecvError::Disconnected) => return Some(Err(FeedError::Ended)),
                Err(TryRecvError::Empty) => {
                    if !waited {
                        waited = true;
                        self.stalls.set(self.stalls.get() + 1);
                    }
                    if give_up() {
                        return None;
                    }
                    timer.sleep_until(now_ns() + STALL_STEP_NS).await;
                }
            }
        }
    }
}

impl<T, E> Drop for Feed<T, E> {
    fn drop(&mut self) {
        // Closing the queue ends the feeder at its next request.
        drop(self.rx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timer::FineTimer;

    fn runtime() -> crate::runtime::Runtime {
        crate::runtime::build(crate::runtime::Driver::Auto, 64)
            .expect("runtime")
            .0
    }

    #[test]
    fn the_busiest_second_of_a_schedule() {
        assert_eq!(busiest_second(&[]), 0);
        assert_eq!(busiest_second(&[5]), 1);
        let s = 1_000_000_000;
        // A second is half-open: arrivals 0 and 1 s apart are in different ones.
        assert_eq!(busiest_second(&[0, s, 2 * s]), 1);
        assert_eq!(busiest_second(&[0, 1, s - 1, s, s + 1, 3 * s]), 3);
        assert_eq!(
            busiest_second(&[0, 10 * s, 10 * s, 10 * s, 10 * s + s / 2]),
            4
        );
    }

    #[test]
    fn a_queue_holds_twice_the_concurrency_within_its_bytes() {
        assert_eq!(depth(10, 1000), 256);
        assert_eq!(depth(1000, 1000), 2000);
        assert_eq!(depth(1000, 1 << 20), 64);
        assert_eq!(depth(1 << 20, 100), 1 << 16);
    }

    /// A full queue is waited for before the start and then taken without a wait; a feeder
    /// slower than the shard makes it wait, and a request waited for counts once.
    #[test]
    fn requests_come_in_order_and_one_waited_for_is_counted() {
        // Ids step by two (a shard's share); the sixth request is built only once the shard
        // has found the queue empty three times over (one wait, counted once).
        let tickets = (0..6u64).map(|k| (k * 2, k as u32 + 10));
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let feed = Feed::<_, ()>::start(0, tickets, 4, move |e| {
            if e == 15 {
                gate.recv().unwrap();
            }
            Ok(e * 100)
        })
        .unwrap();
        feed.wait_full(&AtomicBool::new(false));
        runtime().block_on(async {
            let timer = FineTimer::start().unwrap();
            let mut stalls = Vec::new();
            let looks = Cell::new(0);
            for k in 0..6u64 {
                let waiting = || {
                    if k == 5 {
                        looks.set(looks.get() + 1);
                        if looks.get() == 3 {
                            let _ = release.send(());
                        }
                    }
                    false
                };
                let got = feed.take(k * 2, &timer, waiting).await;
                assert_eq!(got, Some(Ok((k as u32 + 10) * 100)), "request {k}");
                stalls.push(feed.stalls.get());
            }
            assert_eq!(stalls[3], 0, "the first four were queued before the start");
            assert_eq!(
                stalls[5] - stalls[4],
                1,
                "the slow one was waited for: {stalls:?}"
            );
            // Past the end of its tickets the feeder has ended: said, not waited for.
            let end = feed.take(12, &timer, || false).await;
            assert_eq!(end, Some(Err(FeedError::Ended)));
            timer.close().await;
        });
    }

    /// A request out of step, or one that could not be built, is an error, and a stop ends
    /// a wait.
    #[test]
    fn a_feeder_out_of_step_a_build_error_and_a_stop_end_the_taking() {
        runtime().block_on(async {
            let timer = FineTimer::start().unwrap();
            let feed = Feed::<_, ()>::start(0, [(5, 0)].into_iter(), 4, |_| Ok(1)).unwrap();
            let got = feed.take(4, &timer, || false).await;
            assert_eq!(got, Some(Err(FeedError::OutOfStep { got: 5, due: 4 })));
            let feed = Feed::start(0, [(0, 0), (1, 1)].into_iter(), 4, |e| match e {
                0 => Err::<u32, _>("line 1: gone"),
                _ => Ok(e),
            })
            .unwrap();
            assert_eq!(
                feed.take(0, &timer, || false).await,
                Some(Err(FeedError::Build("line 1: gone")))
            );
            // A feeder held at its first request until the shard gave up on it.
            let held = std::sync::Arc::new(());
            let by_feeder = held.clone();
            let (release, gate) = std::sync::mpsc::channel::<()>();
            let never = Feed::<u32, ()>::start(0, std::iter::repeat((0, 0)), 4, move |_| {
                let _held = &by_feeder;
                let _ = gate.recv();
                Ok(0)
            })
            .unwrap();
            assert_eq!(never.take(0, &timer, || true).await, None);
            assert_eq!(never.stalls.get(), 1);
            // Dropping the feed ends its feeder thread before it returns.
            drop(release);
            drop(never);
            assert_eq!(
                std::sync::Arc::strong_count(&held),
                1,
                "the feeder still runs"
            );
            timer.close().await;
        });
    }
}
