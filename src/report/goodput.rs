//! Goodput (REFERENCE §1): requests that meet every service-level objective, per second, and
//! how often each objective was met. SLO syntax as vLLM and GenAI-Perf: `ttft:200 itl:20
//! e2e:3000`, in milliseconds.

use serde::Serialize;

use crate::record::Record;

/// One objective.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Slo {
    /// Which metric.
    pub metric: SloMetric,
    /// Upper bound (ms).
    pub max_ms: f64,
}

/// Metrics an SLO can bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SloMetric {
    /// Time to first token.
    Ttft,
    /// Inter-token latency.
    Itl,
    /// Request latency.
    E2e,
}

/// Parses `ttft:200`.
pub fn parse_slo(s: &str) -> Result<Slo, String> {
    let (name, v) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?}: expected metric:milliseconds, e.g. ttft:200"))?;
    let metric = match name.trim() {
        "ttft" | "time_to_first_token" => SloMetric::Ttft,
        "itl" | "tpot" | "inter_token_latency" => SloMetric::Itl,
        "e2e" | "e2el" | "request_latency" => SloMetric::E2e,
        other => return Err(format!("unknown SLO metric {other:?} (ttft, itl, e2e)")),
    };
    let max_ms: f64 = v
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: {v:?} is not a number of milliseconds"))?;
    if !(max_ms > 0.0 && max_ms.is_finite()) {
        return Err(format!(
            "{s:?}: the bound must be a positive number of milliseconds"
        ));
    }
    Ok(Slo { metric, max_ms })
}

impl Slo {
    /// Whether a successful request met this objective (a missing value does not).
    pub fn met(&self, r: &Record) -> bool {
        let ns = match self.metric {
            SloMetric::Ttft => r.ttft().map(|v| v as f64),
            SloMetric::Itl => r.itl(),
            SloMetric::E2e => Some(r.latency() as f64),
        };
        ns.is_some_and(|v| v <= self.max_ms * 1e6)
    }
}

/// Goodput figures.
#[derive(Debug, Clone, Serialize)]
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
}

/// Goodput of the measured requests (`ok` successful, `failed` failed) over `window_ns`.
pub fn compute<'a>(
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
    let total = (n + failed).max(1) as f64;
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Phase;

    #[test]
    fn slos_parse_and_apply() {
        assert_eq!(
            parse_slo("ttft:200").unwrap(),
            Slo {
                metric: SloMetric::Ttft,
                max_ms: 200.0
            }
        );
        assert!(parse_slo("ttft").is_err());
        assert!(parse_slo("speed:1")
            .unwrap_err()
            .contains("unknown SLO metric"));
        assert!(parse_slo("e2e:-5").is_err());
        let mk = |ttft_ms: u64, e2e_ms: u64| {
            let mut r = Record::new(0, 0, Phase::Profiling, 0, 1);
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
        // ITL of mk(100, 600) with 11 tokens: 50 ms.
        assert!(parse_slo("itl:50").unwrap().met(&recs[0]));
        assert!(!parse_slo("itl:49").unwrap().met(&recs[0]));
    }
}
