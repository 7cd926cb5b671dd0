//! What to send next, and when: the only thing that differs between load modes.
//!
//! A shard's dispatcher asks its schedule for tickets and hands each to the one connection
//! driver. Closed loop gives tickets with no send time (the concurrency cap paces them); an
//! open-loop schedule gives each an intended send time. New load modes add a schedule here,
//! never a new driver loop.

use crate::record::Phase;

/// One request to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
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
pub trait Schedule {
    /// The next ticket, or `None` when this shard's share is done.
    fn next(&mut self) -> Option<Ticket>;
}

/// Closed loop: ids `first, first + step, …` below `end` (unbounded without one).
#[derive(Debug, Clone)]
pub struct ClosedLoop {
    next: u64,
    step: u64,
    end: Option<u64>,
    entries: u64,
    phase: Phase,
}

impl ClosedLoop {
    /// Shard `shard` of `shards` takes every `shards`-th id of `[first, end)`.
    pub fn new(
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

/// Splits `total` into `parts` shares that differ by at most one.
pub fn share(total: u64, parts: usize, index: usize) -> u64 {
    let parts = parts as u64;
    total / parts + u64::from((index as u64) < total % parts)
}

#[cfg(test)]
mod tests {
    use super::*;

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
