//! A per-shard timer finer than the runtime's.
//!
//! monoio's timer wheel ticks in milliseconds (a 500 µs sleep takes about 1.5 ms), which is
//! too coarse for open-loop send schedules and for the simulator's token pacing. This timer
//! keeps a heap of absolute `CLOCK_MONOTONIC` deadlines and one `timerfd` armed at the
//! earliest of them. The runtime waits on the timerfd's readability like on any socket
//! (a poll operation under io_uring, epoll under the legacy driver), so waiting costs no
//! thread and no spinning; a wake-up is as precise as the kernel's hrtimer.
//!
//! Deadlines are absolute, so a late wake-up never shifts the deadlines after it.
//!
//! A timer may be given *slack*: a wake-up at one deadline also ends the sleeps due within
//! the slack after it (up to that long early), so deadlines that fall close together share
//! one wake-up. Each wake-up costs a few system
//! calls; the simulator, which paces every token of thousands of streams, uses slack to pay
//! them once per burst of tokens rather than once per token. The client's schedules use none:
//! a request never leaves before its time.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::clock::now_ns;

struct Entry {
    deadline: u64,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.deadline, self.seq) == (other.deadline, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.deadline, self.seq).cmp(&(other.deadline, other.seq))
    }
}

struct Inner {
    fd: RawFd,
    slack: u64,
    heap: RefCell<BinaryHeap<Reverse<Entry>>>,
    armed: Cell<u64>,
    seq: Cell<u64>,
    wakeups: Cell<u64>,
    closed: Cell<bool>,
    driver: RefCell<Option<monoio::task::JoinHandle<()>>>,
}

impl Inner {
    fn arm(&self, deadline: u64) {
        let deadline = deadline.max(1);
        crate::sys::timerfd_arm(self.fd, deadline);
        self.armed.set(deadline);
    }
}

/// Handle to the shard's fine timer. Cheap to clone; single-threaded by design.
#[derive(Clone)]
pub(crate) struct FineTimer {
    inner: Rc<Inner>,
}

impl FineTimer {
    /// Creates the timer and spawns its driver task on the current monoio runtime.
    pub(crate) fn start() -> std::io::Result<FineTimer> {
        FineTimer::with_slack(0)
    }

    /// Like [`FineTimer::start`], with sleeps that may end up to `slack_ns` early.
    pub(crate) fn with_slack(slack_ns: u64) -> std::io::Result<FineTimer> {
        // The wrapper is used for nothing but `readable()` and closing the descriptor.
        let std_sock = crate::sys::timerfd()?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&std_sock);
        let sock = monoio::net::udp::UdpSocket::from_std(std_sock)?;
        let inner = Rc::new(Inner {
            fd,
            slack: slack_ns,
            heap: RefCell::new(BinaryHeap::new()),
            armed: Cell::new(u64::MAX),
            seq: Cell::new(0),
            wakeups: Cell::new(0),
            closed: Cell::new(false),
            driver: RefCell::new(None),
        });
        let driver = monoio::spawn(drive(inner.clone(), sock));
        *inner.driver.borrow_mut() = Some(driver);
        Ok(FineTimer { inner })
    }

    /// Stops the driver task and closes the timerfd. monoio does not drop unfinished tasks
    /// with its runtime, so a shard closes its timer before its runtime ends.
    pub(crate) async fn close(&self) {
        self.inner.closed.set(true);
        self.inner.arm(1);
        let driver = self.inner.driver.borrow_mut().take();
        if let Some(d) = driver {
            d.await;
        }
    }

    /// Completes at `deadline` (absolute `clock::now_ns()` nanoseconds), at once if past.
    pub(crate) fn sleep_until(&self, deadline: u64) -> Sleep {
        Sleep {
            timer: self.clone(),
            deadline,
            registered: false,
        }
    }

    /// How many times the timerfd fired.
    #[cfg(test)]
    fn wakeups(&self) -> u64 {
        self.inner.wakeups.get()
    }
}

async fn drive(inner: Rc<Inner>, sock: monoio::net::udp::UdpSocket) {
    loop {
        if sock.readable(false).await.is_err() || inner.closed.get() {
            return;
        }
        crate::sys::timerfd_clear(inner.fd);
        inner.wakeups.set(inner.wakeups.get() + 1);
        inner.armed.set(u64::MAX);
        let until = now_ns() + inner.slack;
        loop {
            let mut heap = inner.heap.borrow_mut();
            let Some(e) = heap.peek() else { break };
            if e.0.deadline > until {
                inner.arm(e.0.deadline);
                break;
            }
            let w = heap.pop().expect("peeked").0.waker;
            drop(heap);
            w.wake();
        }
    }
}

/// Future returned by [`FineTimer::sleep_until`].
pub(crate) struct Sleep {
    timer: FineTimer,
    deadline: u64,
    registered: bool,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let inner = &self.timer.inner;
        if now_ns() + inner.slack >= self.deadline {
            return Poll::Ready(());
        }
        if !self.registered {
            let seq = inner.seq.get();
            inner.seq.set(seq + 1);
            inner.heap.borrow_mut().push(Reverse(Entry {
                deadline: self.deadline,
                seq,
                waker: cx.waker().clone(),
            }));
            if self.deadline < inner.armed.get() {
                inner.arm(self.deadline);
            }
            self.registered = true;
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> crate::runtime::Runtime {
        crate::runtime::build(crate::runtime::Driver::Auto, 256)
            .expect("runtime")
            .0
    }

    /// One round: five sleeps with deadlines out of order, 150 µs apart, starting 2 ms ahead
    /// (so that all are waiting before the first is due). Returns the order they woke in and
    /// their median lateness.
    async fn five_sleeps(timer: &FineTimer) -> (Vec<u64>, u64) {
        let start = now_ns() + 2_000_000;
        let order = Rc::new(RefCell::new(Vec::new()));
        let mut handles = Vec::new();
        for k in [5u64, 1, 3, 2, 4] {
            let t = timer.clone();
            let order = order.clone();
            handles.push(monoio::spawn(async move {
                let deadline = start + k * 150_000;
                t.sleep_until(deadline).await;
                let late = now_ns() - deadline;
                order.borrow_mut().push(k);
                late
            }));
        }
        let mut lates = Vec::new();
        for h in handles {
            lates.push(h.await);
        }
        lates.sort();
        let order = order.borrow().clone();
        (order, lates[2])
    }

    #[test]
    fn wakes_at_sub_millisecond_deadlines_in_order() {
        runtime().block_on(async {
            let timer = FineTimer::start().unwrap();
            // A timer that wakes out of order or late does so every round; a host that
            // descheduled the test's thread (other tests share 2 cores) spoils one round.
            // The bound is generous; the benchmark reports the real figures.
            let mut rounds = Vec::new();
            for _ in 0..3 {
                let (order, median_late) = five_sleeps(&timer).await;
                if order == [1, 2, 3, 4, 5] && median_late < 5_000_000 {
                    return;
                }
                rounds.push((order, median_late));
            }
            panic!("three rounds out of order or late (order, median lateness ns): {rounds:?}");
        });
    }

    #[test]
    fn past_deadline_is_ready_at_once_and_close_ends_the_driver() {
        runtime().block_on(async {
            let timer = FineTimer::start().unwrap();
            timer.sleep_until(0).await;
            assert_eq!(timer.wakeups(), 0);
            timer.close().await;
            assert!(timer.inner.driver.borrow().is_none());
        });
    }

    #[test]
    fn slack_shares_one_wake_up_between_close_deadlines() {
        runtime().block_on(async {
            let timer = FineTimer::with_slack(1_000_000).unwrap();
            let start = now_ns() + 20_000_000;
            let mut handles = Vec::new();
            // Ten deadlines 50 µs apart: within one millisecond of slack, one wake-up.
            for k in 0..10u64 {
                let t = timer.clone();
                handles.push(monoio::spawn(async move {
                    t.sleep_until(start + k * 50_000).await;
                    now_ns()
                }));
            }
            for h in handles {
                let woke = h.await;
                assert!(woke + 1_000_000 >= start, "woke more than the slack early");
            }
            assert_eq!(timer.wakeups(), 1);
        });
    }

    #[test]
    fn works_on_the_epoll_driver() {
        let (mut rt, _) = crate::runtime::build(crate::runtime::Driver::Epoll, 256).unwrap();
        rt.block_on(async {
            let timer = FineTimer::start().unwrap();
            let deadline = now_ns() + 300_000;
            timer.sleep_until(deadline).await;
            assert!(now_ns() >= deadline);
            assert!(timer.wakeups() >= 1);
        });
    }
}
