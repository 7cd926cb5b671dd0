//! Starvation, detected while it happens.
//!
//! A shard that is runnable but not running (another thread holds its CPU) reads its sockets
//! late: events wait in the kernel, one read then carries the stamp of the newest of them, and
//! requests go out late. The kernel counts that wait per thread (`/proc/<pid>/task/<tid>/
//! schedstat`, second field). The engine's main thread samples it for every shard every
//! [`INTERVAL_NS`]; an interval in which a shard waited at least [`STARVED_WAIT_NS`] and
//! [`STARVED_SHARE`] of the interval is *starved*. Consecutive starved intervals make an
//! [`Episode`]. A starved shard is moved at once ([`super::placement::widen`]): from its one
//! CPU to the quiet CPUs, and, if it keeps waiting there, to any CPU, where the scheduler can
//! run it beside whatever out-ranks it.
//!
//! The watch is pure: it takes samples with their times and returns moves, so its rules are
//! tested with made-up samples and no clock.

use serde::Serialize;

use super::placement::{widen, Pin, Placement};
use crate::host::SchedStat;

/// How often the engine samples the shards' scheduler times.
pub(crate) const INTERVAL_NS: u64 = 10_000_000;
/// A shard that waited at least this long for a CPU in one interval…
pub(crate) const STARVED_WAIT_NS: u64 = 2_000_000;
/// …and at least this share of the interval, was starved in it.
pub(crate) const STARVED_SHARE: f64 = 0.2;
/// Starved intervals in a row, on the quiet CPUs already, before a shard may go anywhere.
const STARVED_BEFORE_ANYWHERE: u32 = 3;
/// Episodes kept per shard; later ones are merged into the last (bounded memory).
const MAX_EPISODES: usize = 4096;

/// A stretch of consecutive starved intervals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Episode {
    /// Start of its first interval (`CLOCK_MONOTONIC` ns).
    pub start_ns: u64,
    /// End of its last interval.
    pub end_ns: u64,
    /// Time the shard waited for a CPU in it (ns).
    pub wait_ns: u64,
}

/// A shard moved because it was starved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Move {
    /// When (`CLOCK_MONOTONIC` ns).
    pub at_ns: u64,
    /// Where it was.
    pub from: Pin,
    /// Where it may run now.
    pub to: Pin,
    /// Share of the last interval it spent waiting.
    pub wait_share: f64,
}

/// One shard under watch.
#[derive(Debug, Clone)]
pub struct ShardWatch {
    /// Where it may run now.
    pub pin: Pin,
    /// Its starved episodes.
    pub episodes: Vec<Episode>,
    /// Its moves.
    pub moves: Vec<Move>,
    last: Option<(u64, SchedStat)>,
    starved_in_a_row: u32,
}

/// Every shard under watch.
#[derive(Debug, Clone)]
pub(crate) struct Watch {
    /// Per shard, in shard order.
    pub shards: Vec<ShardWatch>,
    placement: Placement,
    allowed: Vec<usize>,
}

impl Watch {
    /// Watches shards placed by `placement` on a process that may use `allowed`.
    pub(crate) fn new(placement: &Placement, allowed: &[usize]) -> Watch {
        Watch {
            shards: placement
                .shards
                .iter()
                .map(|pin| ShardWatch {
                    pin: pin.clone(),
                    episodes: Vec::new(),
                    moves: Vec::new(),
                    last: None,
                    starved_in_a_row: 0,
                })
                .collect(),
            placement: placement.clone(),
            allowed: allowed.to_vec(),
        }
    }

    /// Takes shard `i`'s scheduler times read at `t_ns`. Returns the CPUs it should be moved
    /// to, when it was starved and can go somewhere wider.
    pub(crate) fn observe(&mut self, i: usize, t_ns: u64, now: SchedStat) -> Option<Vec<usize>> {
        let s = &mut self.shards[i];
        let prev = s.last.replace((t_ns, now));
        let (t0, before) = prev?;
        let dt = t_ns.checked_sub(t0).filter(|&d| d > 0)?;
        let waited = now.wait_ns.saturating_sub(before.wait_ns);
        let share = waited as f64 / dt as f64;
        if waited < STARVED_WAIT_NS || share < STARVED_SHARE {
            s.starved_in_a_row = 0;
            return None;
        }
        s.starved_in_a_row += 1;
        let full = s.episodes.len() >= MAX_EPISODES;
        match s.episodes.last_mut() {
            Some(e) if e.end_ns == t0 || full => {
                e.end_ns = t_ns;
                e.wait_ns += waited;
            }
            _ => s.episodes.push(Episode {
                start_ns: t0,
                end_ns: t_ns,
                wait_ns: waited,
            }),
        }
        // One starved interval moves a pinned shard to the quiet CPUs; going anywhere takes a
        // few in a row, so a passing burst does not undo the placement.
        let ready = match s.pin {
            Pin::Core(_) => true,
            _ => s.starved_in_a_row >= STARVED_BEFORE_ANYWHERE,
        };
        if !ready {
            return None;
        }
        let to = widen(&s.pin, &self.placement, &self.allowed)?;
        s.moves.push(Move {
            at_ns: t_ns,
            from: s.pin.clone(),
            to: to.clone(),
            wait_share: share,
        });
        s.pin = to.clone();
        s.starved_in_a_row = 0;
        Some(to.cpus(&self.allowed))
    }
}

/// Total waiting time of `episodes` that falls inside `[from, to]`, and the longest single
/// episode's wait there (ns).
pub(crate) fn within(episodes: &[Episode], from: u64, to: u64) -> (u64, u64) {
    let mut total = 0;
    let mut worst = 0;
    for e in episodes
        .iter()
        .filter(|e| e.end_ns > from && e.start_ns < to)
    {
        // Scale an episode cut by the window's edges to the part inside it.
        let len = e.end_ns - e.start_ns;
        let inside = e.end_ns.min(to) - e.start_ns.max(from);
        let w = (e.wait_ns as u128 * inside as u128 / len.max(1) as u128) as u64;
        total += w;
        worst = worst.max(w);
    }
    (total, worst)
}

#[cfg(test)]
mod tests {
    use super::super::placement::{place, Ask, HostView, Mode};
    use super::*;

    const MS: u64 = 1_000_000;

    fn placement(local: bool, cpus: Option<Vec<usize>>) -> (Placement, Vec<usize>) {
        let host = HostView {
            allowed: vec![0, 1, 2],
            busy: vec![(0, 0.0), (1, 0.0), (2, 0.9)],
            server_local: local,
        };
        let ask = Ask {
            streams: 10,
            cpus,
            ..Ask::default()
        };
        (place(&ask, &host).unwrap(), host.allowed)
    }

    /// Feeds shard 0 a sample every 10 ms, each interval waiting `waits[k]` ms.
    fn feed(w: &mut Watch, start: u64, waits: &[u64]) -> Vec<Option<Vec<usize>>> {
        let mut stat = SchedStat::default();
        let mut out = vec![w.observe(0, start, stat)];
        for (k, ms) in waits.iter().enumerate() {
            stat.wait_ns += ms * MS;
            stat.run_ns += (10 - ms) * MS;
            out.push(w.observe(0, start + (k as u64 + 1) * 10 * MS, stat));
        }
        out
    }

    #[test]
    fn short_waits_are_not_starvation() {
        let (p, allowed) = placement(false, None);
        let mut w = Watch::new(&p, &allowed);
        let moves = feed(&mut w, 0, &[1, 0, 1, 1, 0]);
        assert!(moves.iter().all(Option::is_none));
        assert!(w.shards[0].episodes.is_empty());
    }

    #[test]
    fn a_starved_pinned_shard_moves_to_the_quiet_cpus_then_anywhere() {
        let (p, allowed) = placement(false, None);
        assert_eq!(p.mode, Mode::PerCore);
        assert_eq!(p.shards[0], Pin::Core(0));
        let mut w = Watch::new(&p, &allowed);
        let moves = feed(&mut w, 1000 * MS, &[0, 6, 8, 5, 9, 9, 1, 7]);
        // Interval 2 (the first starved one) moves it off CPU 0 at once…
        assert_eq!(moves[2], Some(vec![0, 1]));
        // …and three more starved intervals in a row send it anywhere.
        assert_eq!(moves[5], Some(vec![0, 1, 2]));
        assert_eq!(moves.iter().filter(|m| m.is_some()).count(), 2, "{moves:?}");
        let s = &w.shards[0];
        assert_eq!(s.pin, Pin::Free);
        assert_eq!(s.moves.len(), 2);
        assert_eq!(s.moves[0].from, Pin::Core(0));
        assert!((s.moves[0].wait_share - 0.6).abs() < 1e-9);
        // Two episodes: intervals 2–6 (37 ms of waiting) and interval 8.
        assert_eq!(
            s.episodes,
            vec![
                Episode {
                    start_ns: 1010 * MS,
                    end_ns: 1060 * MS,
                    wait_ns: 37 * MS
                },
                Episode {
                    start_ns: 1070 * MS,
                    end_ns: 1080 * MS,
                    wait_ns: 7 * MS
                }
            ]
        );
    }

    #[test]
    fn a_shard_the_user_pinned_is_reported_not_moved() {
        let (p, allowed) = placement(false, Some(vec![2]));
        let mut w = Watch::new(&p, &allowed);
        let moves = feed(&mut w, 0, &[9, 9, 9, 9]);
        assert!(moves.iter().all(Option::is_none));
        assert_eq!(w.shards[0].episodes.len(), 1);
        assert_eq!(w.shards[0].episodes[0].wait_ns, 36 * MS);
    }

    #[test]
    fn a_late_sample_is_judged_on_its_real_interval() {
        let (p, allowed) = placement(true, None);
        let mut w = Watch::new(&p, &allowed);
        w.observe(0, 0, SchedStat::default());
        // The main thread itself ran 100 ms late: 3 ms of waiting in 100 ms is 3%, not starved.
        let r = w.observe(
            0,
            100 * MS,
            SchedStat {
                run_ns: 97 * MS,
                wait_ns: 3 * MS,
            },
        );
        assert_eq!(r, None);
        assert!(w.shards[0].episodes.is_empty());
    }

    #[test]
    fn waiting_inside_a_window_is_prorated() {
        let e = [
            Episode {
                start_ns: 0,
                end_ns: 100,
                wait_ns: 50,
            },
            Episode {
                start_ns: 200,
                end_ns: 300,
                wait_ns: 80,
            },
        ];
        assert_eq!(within(&e, 50, 250), (25 + 40, 40));
        assert_eq!(within(&e, 400, 500), (0, 0));
    }
}
