//! The simulator's capacity model: at most `cap` streams generate at once, the rest queue in
//! arrival order.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};

#[derive(Default)]
struct Grant {
    granted: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

/// A shard's batch: active streams and the queue waiting for a place.
pub(super) struct Batch {
    active: Cell<usize>,
    cap: usize,
    queue: RefCell<VecDeque<Rc<Grant>>>,
}

/// A place in the batch, given back when dropped.
pub(super) struct Permit {
    batch: Rc<Batch>,
    /// True if the request had to wait in the queue for it.
    pub queued: bool,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.batch.release();
    }
}

impl Batch {
    /// A batch of `cap` places (0: unlimited).
    pub(super) fn new(cap: usize) -> Rc<Batch> {
        Rc::new(Batch {
            active: Cell::new(0),
            cap,
            queue: RefCell::new(VecDeque::new()),
        })
    }

    /// Streams generating now.
    pub(super) fn active(&self) -> usize {
        self.active.get()
    }

    /// Places in the batch (0: unlimited).
    pub(super) fn cap(&self) -> usize {
        self.cap
    }

    /// Waits for a place.
    pub(super) async fn admit(self: &Rc<Self>) -> Permit {
        if self.cap == 0 || self.active.get() < self.cap {
            self.active.set(self.active.get() + 1);
            return Permit {
                batch: self.clone(),
                queued: false,
            };
        }
        let grant = Rc::new(Grant::default());
        self.queue.borrow_mut().push_back(grant.clone());
        poll_fn(|cx| {
            if grant.granted.get() {
                Poll::Ready(())
            } else {
                *grant.waker.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await;
        Permit {
            batch: self.clone(),
            queued: true,
        }
    }

    fn release(&self) {
        loop {
            let next = self.queue.borrow_mut().pop_front();
            match next {
                // A waiter that went away (client disconnected) holds the only other count.
                Some(g) if Rc::strong_count(&g) == 1 => continue,
                Some(g) => {
                    g.granted.set(true);
                    if let Some(w) = g.waker.borrow_mut().take() {
                        w.wake();
                    }
                    return;
                }
                None => {
                    self.active.set(self.active.get() - 1);
                    return;
                }
            }
        }
    }
}
