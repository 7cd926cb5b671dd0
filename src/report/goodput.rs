//! Goodput: requests that meet every service-level objective ([`crate::plan::Slo`]), per
//! second, and how often each objective was met.

use serde::{Deserialize, Serialize};

use crate::plan::Slo;
use crate::record::Record;

/// Goodput figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Goodput {
    /// The objectives.
    pub slos: Vec<Slo>,
    /// Requests meeting every objective.
    pub good_requests: u64,
    /// good / measured (failed requests count as not good).
    pub good_fraction: f64,
    /// Good requests per second over the measured window.
    pub goodput: f64,
    /// Per objective, the share of measured requests that met it.
    pub attainment: Vec<f64>,
    /// Measured requests (failed ones too).
    pub measured: u64,
    /// Per objective, the measured requests that met it.
    pub met: Vec<u64>,
}

impl Goodput {
    /// Goodput of `good` of `measured` requests, `met` per objective, over `window_ns`.
    pub(super) fn of(
        slos: &[Slo],
        good: u64,
        measured: u64,
        met: Vec<u64>,
        window_ns: u64,
    ) -> Goodput {
        let total = measured.max(1) as f64;
        Goodput {
            slos: slos.to_vec(),
            good_requests: good,
            good_fraction: good as f64 / total,
            goodput: if window_ns > 0 {
                good as f64 / (window_ns as f64 / 1e9)
            } else {
                0.0
            },
            attainment: met.iter().map(|m| *m as f64 / total).collect(),
            measured,
            met,
        }
    }
}

/// Goodput of the measured requests (`ok` successful, `failed` failed) over `window_ns`.
pub(super) fn compute<'a>(
    slos: &[Slo],
    ok: impl Iterator<Item = &'a Record>,
    failed: u64,
    window_ns: u64,
) -> Goodput {
    let mut good = 0u64;
    let mut n = 0u64;
    let mut met = vec![0u64; slos.len()];
    for r in ok {
        n += 1;
        let mut all = true;
        for (i, s) in slos.iter().enumerate() {
            if s.met(r) {
                met[i] += 1;
            } else {
                all = false;
            }
        }
        good += u64::from(all);
    }
    Goodput::of(slos, good, n + failed, met, window_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Phase;

    use crate::plan::parse_slo;

    #[test]
    fn goodput_counts_requests_meeting_every_objective() {
        let mk = |ttft_ms: u64, e2e_ms: u64| {
            let mut r = Record::new(0, 0, Phase::Profiling, 0, Some(1));
            r.start_ns = 0;
            r.first_content_ns = Some(ttft_ms * 1_000_000);
            r.last_content_ns = Some(e2e_ms * 1_000_000);
            r.osl = Some(11);
            r
        };
        let recs = [mk(100, 600), mk(300, 700), mk(150, 5000)];
        let slos = [
            parse_slo("ttft:200").unwrap(),
            parse_slo("e2e:3000").unwrap(),
        ];
        let g = compute(&slos, recs.iter(), 1, 2_000_000_000);
        assert_eq!(g.good_requests, 1);
        assert_eq!(g.good_fraction, 0.25);
        assert_eq!(g.goodput, 0.5);
        assert_eq!(g.attainment, vec![0.5, 0.5]);
    }
}
