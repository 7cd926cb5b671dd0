//! The gate the shards pass together: at the start of an open-loop run and at the end of
//! warm-up. Unlike `std::sync::Barrier` it can be broken: a shard that cannot start breaks
//! it, and every shard waiting there (or arriving later) stops instead of waiting forever.

use std::sync::{Condvar, Mutex};

/// Another shard broke the gate.
#[derive(Debug, thiserror::Error)]
#[error("another shard failed to start")]
pub struct Broken;

#[derive(Default)]
struct State {
    waiting: usize,
    round: u64,
    broken: bool,
}

/// A reusable, breakable barrier for `n` shards.
pub(super) struct Gate {
    state: Mutex<State>,
    cv: Condvar,
    n: usize,
}

impl Gate {
    /// A gate for `n` shards.
    pub(super) fn new(n: usize) -> Gate {
        Gate {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            n,
        }
    }

    /// Waits until all `n` shards have come, or the gate is broken.
    pub(super) fn pass(&self) -> Result<(), Broken> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.broken {
            return Err(Broken);
        }
        let round = st.round;
        st.waiting += 1;
        if st.waiting == self.n {
            st.waiting = 0;
            st.round += 1;
            self.cv.notify_all();
            return Ok(());
        }
        while st.round == round && !st.broken {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        if st.round == round {
            Err(Broken)
        } else {
            Ok(())
        }
    }

    /// Breaks the gate: every `pass`, now and later, fails.
    pub(super) fn break_it(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).broken = true;
        self.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn all_pass_together_and_again() {
        let g = Arc::new(Gate::new(3));
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let g = g.clone();
                std::thread::spawn(move || g.pass().is_ok() && g.pass().is_ok())
            })
            .collect();
        assert!(hs.into_iter().all(|h| h.join().unwrap()));
    }

    #[test]
    fn a_broken_gate_releases_the_waiting_and_refuses_the_late() {
        let g = Arc::new(Gate::new(3));
        let waiting: Vec<_> = (0..2)
            .map(|_| {
                let g = g.clone();
                std::thread::spawn(move || g.pass())
            })
            .collect();
        // The third shard fails to start: without the break, the two would wait forever.
        g.break_it();
        for h in waiting {
            assert!(h.join().unwrap().is_err());
        }
        assert!(g.pass().is_err());
    }
}
