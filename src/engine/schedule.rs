//! What to send next, and when: the only thing that differs between load modes.
//!
//! A shard's dispatcher asks its schedule for tickets and hands each to the one connection
//! driver. Closed loop gives tickets with no send time (the concurrency cap paces them); an
//! open-loop schedule gives each an intended send time. New load modes add a schedule here,
//! never a new driver loop.

use crate::record::Phase;

/// One request to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ticket {
    /// Global request number.
    pub id: u64,
    /// Dataset entry to send.
    pub entry: u32,
    /// Warm-up or measured.
    pub phase: Phase,
    /// When it should be sent (`None`: as soon as the concurrency cap allows).
    pub intended_ns: Option<u64>,
}

/// A source of tickets for one shard.
pub(super) trait Schedule {
    /// The next ticket, or `None` when this shard's share is done.
    fn next(&mut self) -> Option<Ticket>;
}

/// Closed loop: ids `first, first + step, …` below `end` (unbounded without one).
#[derive(Debug, Clone)]
pub(super) struct ClosedLoop {
    next: u64,
    step: u64,
    end: Option<u64>,
    entries: u64,
    phase: Phase,
}

impl ClosedLoop {
    /// Shard `shard` of `shards` takes every `shards`-th id of `[first, end)`.
    pub(super) fn new(
        first: u64,
        end: Option<u64>,
        shard: usize,
        shards: usize,
        entries: usize,
        phase: Phase,
    ) -> ClosedLoop {
        ClosedLoop {
            next: first + shard as u64,
            step: shards as u64,
            end,
            entries: entries.max(1) as u64,
            phase,
        }
    }
}

impl Schedule for ClosedLoop {
    fn next(&mut self) -> Option<Ticket> {
        if self.end.is_some_and(|e| self.next >= e) {
            return None;
        }
        let id = self.next;
        self.next += self.step;
        Some(Ticket {
            id,
            entry: (id % self.entries) as u32,
            phase: self.phase,
            intended_ns: None,
        })
    }
}

/// Open loop: the shard's share of a run-wide schedule of send times.
#[derive(Debug, Clone)]
pub(super) struct OpenLoop {
    offsets: std::sync::Arc<Vec<u64>>,
    next: usize,
    step: usize,
    start_ns: u64,
    warmup: u64,
    entries: u64,
    ramp_end: u64,
    /// Arrival `i`'s request id is `first_id + i`.
    first_id: u64,
}

impl OpenLoop {
    /// Shard `shard` of `shards` takes arrivals `shard, shard + shards, …`; the first
    /// `warmup` arrivals are warm-up, those before `ramp_end_ns` (offset) are ramp-up.
    /// Arrival `i` sends dataset entry `i mod entries` (a trace's own line, when replayed).
    pub(super) fn new(
        offsets: std::sync::Arc<Vec<u64>>,
        shard: usize,
        shards: usize,
        start_ns: u64,
        warmup: u64,
        entries: usize,
        ramp_end_ns: u64,
    ) -> OpenLoop {
        OpenLoop {
            offsets,
            next: shard,
            step: shards,
            start_ns,
            warmup,
            entries: entries.max(1) as u64,
            ramp_end: ramp_end_ns,
            first_id: 0,
        }
    }

    /// The same schedule with request ids from `first` (a warm-up phase of its own).
    pub(super) fn with_first_id(mut self, first: u64) -> OpenLoop {
        self.first_id = first;
        self
    }
}

impl Schedule for OpenLoop {
    fn next(&mut self) -> Option<Ticket> {
        let offset = *self.offsets.get(self.next)?;
        let k = self.next as u64;
        let id = self.first_id + k;
        self.next += self.step;
        let phase = if k < self.warmup {
            Phase::Warmup
        } else if offset < self.ramp_end {
            Phase::RampUp
        } else {
            Phase::Profiling
        };
        Some(Ticket {
            id,
            entry: (id % self.entries) as u32,
            phase,
            intended_ns: Some(self.start_ns + offset),
        })
    }
}

/// Shards split a node's load as nodes split the whole.
pub(super) use crate::plan::nodes::share;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrival::{arrival_offsets, Arrival};

    #[test]
    fn same_seed_same_schedule_and_shards_sum_to_it() {
        let a = arrival_offsets(
            500.0,
            Arrival::Poisson,
            1.0,
            42,
            None,
            Some(2_000_000_000),
            0,
        );
        let b = arrival_offsets(
            500.0,
            Arrival::Poisson,
            1.0,
            42,
            None,
            Some(2_000_000_000),
            0,
        );
        assert_eq!(a, b);
        assert!((a.len() as f64 - 1000.0).abs() < 100.0, "{}", a.len());
        assert_ne!(
            a,
            arrival_offsets(
                500.0,
                Arrival::Poisson,
                1.0,
                43,
                None,
                Some(2_000_000_000),
                0
            )
        );
        let offsets = std::sync::Arc::new(a.clone());
        let mut all = Vec::new();
        for shard in 0..3 {
            let mut s = OpenLoop::new(offsets.clone(), shard, 3, 0, 0, 10, 0);
            while let Some(t) = s.next() {
                all.push((t.id, t.intended_ns.unwrap()));
            }
        }
        all.sort();
        assert_eq!(all.iter().map(|x| x.1).collect::<Vec<_>>(), a);
    }

    #[test]
    fn nodes_keep_every_nth_arrival_and_together_make_the_single_schedule() {
        let a = arrival_offsets(300.0, Arrival::Poisson, 1.0, 7, Some(500), None, 0);
        let offsets = std::sync::Arc::new(a.clone());
        let mut all = Vec::new();
        for index in 0..4 {
            let node = crate::plan::nodes::Nodes { index, count: 4 };
            let shards = 1 + index as usize % 2;
            for shard in 0..shards {
                let (slot, slots) = node.slot(shard, shards);
                let mut s = OpenLoop::new(offsets.clone(), slot, slots, 0, 20, 10, 0);
                while let Some(t) = s.next() {
                    assert_eq!(t.id % 4, index);
                    assert_eq!(t.phase == Phase::Warmup, t.id < 20);
                    all.push((t.id, t.intended_ns.unwrap()));
                }
            }
        }
        all.sort();
        assert_eq!(
            all.iter().map(|x| x.0).collect::<Vec<_>>(),
            (0..500).collect::<Vec<_>>()
        );
        assert_eq!(all.iter().map(|x| x.1).collect::<Vec<_>>(), a);
    }

    #[test]
    fn shards_partition_the_ids_exactly() {
        let mut seen = Vec::new();
        for shard in 0..3 {
            let mut s = ClosedLoop::new(5, Some(105), shard, 3, 7, Phase::Profiling);
            while let Some(t) = s.next() {
                assert_eq!(t.entry as u64, t.id % 7);
                seen.push(t.id);
            }
        }
        seen.sort();
        assert_eq!(seen, (5..105).collect::<Vec<_>>());
        assert_eq!(
            (0..3).map(|i| share(100, 3, i)).collect::<Vec<_>>(),
            vec![34, 33, 33]
        );
        assert_eq!((0..4).map(|i| share(2, 4, i)).sum::<u64>(), 2);
    }
}
