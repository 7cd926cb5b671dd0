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
use std::sync::mpsc::{sync_channel, Receiver, TryRecvError, TrySendError};
use std::sync::Arc;

use crate::clock::now_ns;
use crate::plan::Plan;
use crate::workload::Entry;

/// How long a shard waits between looks at an empty queue.
const STALL_STEP_NS: u64 = 50_000;
/// Bytes of built requests a queue holds at most.
const QUEUE_BYTES: u64 = 64 << 20;

/// One built request, or why it could not be built.
type Built = (u64, Result<Entry, String>);

/// A shard's end of its feeder.
pub(super) struct Feed {
    rx: Option<Receiver<Built>>,
    ready: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Requests the shard had to wait for.
    pub stalls: Cell<u64>,
}

/// Requests a queue holds: twice the shard's share of the concurrency (a closed loop's first
/// burst takes that many at once), at least 256, within [`QUEUE_BYTES`].
pub(super) fn depth(concurrency: usize, avg_request_bytes: u64) -> usize {
    let by_bytes = (QUEUE_BYTES / avg_request_bytes.max(1)).max(64) as usize;
    concurrency
        .saturating_mul(2)
        .clamp(256, 1 << 16)
        .min(by_bytes)
}

impl Feed {
    /// Starts a feeder thread (`ringperf-feed-{shard}`) that builds `tickets`' entries in
    /// their order, `depth` ahead.
    pub(super) fn start(
        plan: Arc<Plan>,
        shard: usize,
        tickets: impl Iterator<Item = (u64, u32)> + Send + 'static,
        depth: usize,
    ) -> std::io::Result<Feed> {
        let (tx, rx) = sync_channel::<Built>(depth);
        let ready = Arc::new(AtomicBool::new(false));
        let filled = ready.clone();
        let thread = std::thread::Builder::new()
            .name(format!("ringperf-feed-{shard}"))
            .spawn(move || {
                let stream = plan
                    .workload
                    .dataset
                    .stream
                    .as_ref()
                    .expect("a streamed file");
                for (id, entry) in tickets {
                    let built = (id, stream.entry(entry).map_err(|e| e.to_string()));
                    let failed = built.1.is_err();
                    let sent = match tx.try_send(built) {
                        Ok(()) => true,
                        Err(TrySendError::Full(built)) => {
                            filled.store(true, Ordering::Release);
                            tx.send(built).is_ok()
                        }
                        Err(TrySendError::Disconnected(_)) => false,
                    };
                    if !sent || failed {
                        break;
                    }
                }
                filled.store(true, Ordering::Release);
            })?;
        Ok(Feed {
            rx: Some(rx),
            ready,
            thread: Some(thread),
            stalls: Cell::new(0),
        })
    }

    /// Blocks until the queue is full (or the feeder is done), or `stop` is set.
    pub(super) fn wait_full(&self, stop: &AtomicBool) {
        while !self.ready.load(Ordering::Acquire) && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    /// Request `id`, built; `None` when `give_up` says to stop waiting for it. An error says
    /// why there is none (the file could not be read again, or the feeder is out of step).
    pub(super) async fn take(
        &self,
        id: u64,
        timer: &crate::timer::FineTimer,
        give_up: impl Fn() -> bool,
    ) -> Option<Result<Entry, String>> {
        let rx = self.rx.as_ref().expect("open until dropped");
        let mut waited = false;
        loop {
            match rx.try_recv() {
                Ok((got, built)) if got == id => return Some(built),
                Ok((got, _)) => {
                    return Some(Err(format!(
                        "the request feeder built request {got} where {id} was due"
                    )))
                }
                Err(TryRecvError::Disconnected) => {
                    return Some(Err("the request feeder ended early".into()))
                }
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

impl Drop for Feed {
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
    #[test]
    fn a_queue_holds_twice_the_concurrency_within_its_bytes() {
        assert_eq!(super::depth(10, 1000), 256);
        assert_eq!(super::depth(1000, 1000), 2000);
        assert_eq!(super::depth(1000, 1 << 20), 64);
        assert_eq!(super::depth(1 << 20, 100), 1 << 16);
    }
}
