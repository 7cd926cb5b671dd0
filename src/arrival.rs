//! Open-loop arrival processes: the whole run's send times, drawn in advance from one seed,
//! so the same seed gives the same schedule, and the schedule can be split across shards (or
//! hosts) without changing it.

/// How open-loop arrivals are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
pub(crate) fn arrival_offsets(
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
}
