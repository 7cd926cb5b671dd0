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

/// How open-loop arrivals are spaced.
#[derive(Debug, Clone, Copy, PartialEq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Evenly spaced: every 1/rate.
    Constant,
    /// Exponential gaps (coefficient of variation 1).
    Poisson,
    /// Gamma gaps with shape `--burstiness` (1 = Poisson; larger is smoother, CV 1/√shape).
    Gamma,
}

/// The whole run's send times, from one seed: offsets (ns) from the start, in order.
///
/// `ramp_ns` raises the rate linearly from `rate / ramp_steps` to `rate` over that time, by
/// stretching the unit-rate process's clock (its shape is kept).
pub fn arrival_offsets(
    rate: f64,
    arrival: Arrival,
    burstiness: f64,
    seed: u64,
    count: Option<u64>,
    until_ns: Option<u64>,
    ramp_ns: u64,
) -> Vec<u64> {
    use rand::SeedableRng;
    use rand_distr::Distribution;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_a771_7a15);
    let gamma =
        rand_distr::Gamma::new(burstiness.max(1e-3), 1.0 / burstiness.max(1e-3)).expect("positive");
    let exp = rand_distr::Exp1;
    let mut out = Vec::new();
    // `u` is time in units of mean gaps (a unit-rate process); `t` is real time.
    let mut u = 0.0f64;
    let ramp_units = ramp_ns as f64 / 1e9 * rate / 2.0; // arrivals during a linear ramp from 0
    loop {
        if count.is_some_and(|c| out.len() as u64 >= c) {
            break;
        }
        let gap: f64 = match arrival {
            Arrival::Constant => 1.0,
            Arrival::Poisson => exp.sample(&mut rng),
            Arrival::Gamma => gamma.sample(&mut rng),
        };
        // The first arrival is at zero for constant spacing, after one gap otherwise.
        if !(out.is_empty() && arrival == Arrival::Constant) {
            u += gap;
        }
        // Invert the cumulative intensity: ramp (quadratic), then linear.
        let t_s = if ramp_ns > 0 && u < ramp_units {
            (2.0 * u * (ramp_ns as f64 / 1e9) / rate).sqrt()
        } else {
            (u - ramp_units) / rate
                + if ramp_ns > 0 {
                    ramp_ns as f64 / 1e9
                } else {
                    0.0
                }
        };
        let t = (t_s * 1e9).round() as u64;
        if until_ns.is_some_and(|end| t >= end) {
            break;
        }
        out.push(t);
    }
    out
}

/// Open loop: the shard's share of a run-wide schedule of send times.
#[derive(Debug, Clone)]
pub struct OpenLoop {
    offsets: std::sync::Arc<Vec<u64>>,
    next: usize,
    step: usize,
    start_ns: u64,
    warmup: u64,
    entries: u64,
    ramp_end: u64,
}

impl OpenLoop {
    /// Shard `shard` of `shards` takes arrivals `shard, shard + shards, …`; the first
    /// `warmup` arrivals are warm-up, those before `ramp_end_ns` (offset) are ramp-up.
    /// Arrival `i` sends dataset entry `i mod entries` (a trace's own line, when replayed).
    pub fn new(
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
        }
    }
}

impl Schedule for OpenLoop {
    fn next(&mut self) -> Option<Ticket> {
        let offset = *self.offsets.get(self.next)?;
        let id = self.next as u64;
        self.next += self.step;
        let phase = if id < self.warmup {
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

/// Splits `total` into `parts` shares that differ by at most one.
pub fn share(total: u64, parts: usize, index: usize) -> u64 {
    let parts = parts as u64;
    total / parts + u64::from((index as u64) < total % parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps_mean_cv(arrival: Arrival, k: f64) -> (f64, f64) {
        let t = arrival_offsets(1000.0, arrival, k, 7, Some(100_001), None, 0);
        let gaps: Vec<f64> = t.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        (mean, var.sqrt() / mean)
    }

    #[test]
    fn arrival_processes_match_theory_over_1e5_draws() {
        // 1000 req/s: mean gap 1 ms.
        let (m, cv) = gaps_mean_cv(Arrival::Constant, 1.0);
        assert!(
            (m - 1e6).abs() / 1e6 < 0.01 && cv < 0.01,
            "constant {m} {cv}"
        );
        let (m, cv) = gaps_mean_cv(Arrival::Poisson, 1.0);
        assert!(
            (m - 1e6).abs() / 1e6 < 0.01 && (cv - 1.0).abs() < 0.01,
            "poisson {m} {cv}"
        );
        for k in [0.5, 2.0, 4.0] {
            let (m, cv) = gaps_mean_cv(Arrival::Gamma, k);
            let want = 1.0 / f64::sqrt(k);
            assert!((m - 1e6).abs() / 1e6 < 0.01, "gamma {k} mean {m}");
            assert!(
                (cv - want).abs() / want < 0.01,
                "gamma {k} cv {cv} want {want}"
            );
        }
    }

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
    fn ramp_up_starts_slow_and_reaches_the_rate() {
        let t = arrival_offsets(
            1000.0,
            Arrival::Constant,
            1.0,
            1,
            None,
            Some(3_000_000_000),
            1_000_000_000,
        );
        let in_ramp = t.iter().filter(|&&x| x < 1_000_000_000).count();
        let after = t.iter().filter(|&&x| x >= 1_000_000_000).count();
        // A linear ramp from 0 to 1000/s over 1 s sends about 500, then 1000/s for 2 s.
        assert!((in_ramp as f64 - 500.0).abs() < 5.0, "{in_ramp}");
        assert!((after as f64 - 2000.0).abs() < 5.0, "{after}");
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
