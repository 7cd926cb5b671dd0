//! Human units on the command line: `30s`, `1.5ms`, `250us`, `10k`, `normal:10ms,2ms`.

use serde::Serialize;

/// Parses a duration into nanoseconds. A bare number is seconds (as in AIPerf's flags).
pub(crate) fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (try 30s, 1.5ms, 250us)"))?;
    let scale = match unit.trim() {
        "" | "s" | "sec" => 1e9,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        other => {
            return Err(format!(
                "unknown time unit {other:?} in {s:?} (ns, us, ms, s, m, h)"
            ))
        }
    };
    let ns = value * scale;
    if !(0.0..=1e18).contains(&ns) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(ns.round() as u64)
}

/// Parses a count with an optional `k`/`M` suffix (`10k` = 10000).
pub(crate) fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1_000.0),
        Some('M') => (&t[..t.len() - 1], 1_000_000.0),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a count (try 100, 10k, 1M)"))?;
    let n = v * mult;
    if !n.is_finite() || n < 0.0 || n.fract() != 0.0 {
        return Err(format!("{s:?} is not a whole non-negative count"));
    }
    Ok(n as u64)
}

/// A distribution of durations, for the simulator's timings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TimeDist {
    /// Always this many ns.
    Fixed {
        /// Value (ns).
        ns: u64,
    },
    /// Normal, truncated at zero.
    Normal {
        /// Mean (ns).
        mean: u64,
        /// Standard deviation (ns).
        std: u64,
    },
    /// Uniform on [lo, hi].
    Uniform {
        /// Lower bound (ns).
        lo: u64,
        /// Upper bound (ns).
        hi: u64,
    },
    /// Exponential with this mean.
    Exp {
        /// Mean (ns).
        mean: u64,
    },
}

fn human(ns: u64) -> String {
    if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

impl std::fmt::Display for TimeDist {
    /// The same syntax [`TimeDist::parse`] reads.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            TimeDist::Fixed { ns } => write!(f, "{}", human(ns)),
            TimeDist::Normal { mean, std } => write!(f, "normal:{},{}", human(mean), human(std)),
            TimeDist::Uniform { lo, hi } => write!(f, "uniform:{},{}", human(lo), human(hi)),
            TimeDist::Exp { mean } => write!(f, "exp:{}", human(mean)),
        }
    }
}

impl TimeDist {
    /// Parses `50ms`, `normal:10ms,2ms`, `uniform:5ms,15ms` or `exp:10ms`.
    pub fn parse(s: &str) -> Result<TimeDist, String> {
        let Some((kind, args)) = s.split_once(':') else {
            return Ok(TimeDist::Fixed {
                ns: parse_duration_ns(s)?,
            });
        };
        let parts: Vec<&str> = args.split(',').collect();
        let two = || -> Result<(u64, u64), String> {
            match parts.as_slice() {
                [a, b] => Ok((parse_duration_ns(a)?, parse_duration_ns(b)?)),
                _ => Err(format!("{kind} needs two values: {kind}:A,B")),
            }
        };
        match kind {
            "fixed" => Ok(TimeDist::Fixed {
                ns: parse_duration_ns(args)?,
            }),
            "normal" => two().map(|(mean, std)| TimeDist::Normal { mean, std }),
            "uniform" => {
                let (lo, hi) = two()?;
                if lo > hi {
                    return Err(format!(
                        "uniform:{args}: the low bound is above the high one"
                    ));
                }
                Ok(TimeDist::Uniform { lo, hi })
            }
            "exp" => Ok(TimeDist::Exp {
                mean: parse_duration_ns(args)?,
            }),
            other => Err(format!(
                "unknown distribution {other:?} (fixed, normal, uniform, exp)"
            )),
        }
    }

    /// The mean (ns).
    pub fn mean(&self) -> u64 {
        match *self {
            TimeDist::Fixed { ns } => ns,
            TimeDist::Normal { mean, .. } | TimeDist::Exp { mean } => mean,
            TimeDist::Uniform { lo, hi } => (lo + hi) / 2,
        }
    }

    /// Draws one value (ns).
    pub fn sample(&self, rng: &mut impl rand::Rng) -> u64 {
        use rand_distr::Distribution;
        match *self {
            TimeDist::Fixed { ns } => ns,
            TimeDist::Normal { mean, std } => {
                let d = rand_distr::Normal::new(mean as f64, std as f64).expect("finite");
                d.sample(rng).max(0.0) as u64
            }
            TimeDist::Uniform { lo, hi } => rng.random_range(lo..=hi),
            TimeDist::Exp { mean } => {
                let d = rand_distr::Exp::new(1.0).expect("rate 1");
                (d.sample(rng) * mean as f64) as u64
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("30s"), Ok(30_000_000_000));
        assert_eq!(parse_duration_ns("30"), Ok(30_000_000_000));
        assert_eq!(parse_duration_ns("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration_ns("250us"), Ok(250_000));
        assert_eq!(parse_duration_ns("2m"), Ok(120_000_000_000));
        assert_eq!(parse_duration_ns("7ns"), Ok(7));
        assert!(parse_duration_ns("fast").is_err());
        assert!(parse_duration_ns("5 parsecs")
            .unwrap_err()
            .contains("unknown time unit"));
        assert!(parse_duration_ns("-1s").is_err());
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("10k"), Ok(10_000));
        assert_eq!(parse_count("1M"), Ok(1_000_000));
        assert_eq!(parse_count("1.5k"), Ok(1_500));
        assert_eq!(parse_count("42"), Ok(42));
        assert!(parse_count("1.5").is_err());
        assert!(parse_count("lots").is_err());
    }

    #[test]
    fn distributions() {
        assert_eq!(
            TimeDist::parse("normal:10ms,2ms"),
            Ok(TimeDist::Normal {
                mean: 10_000_000,
                std: 2_000_000
            })
        );
        assert_eq!(
            TimeDist::parse("50ms"),
            Ok(TimeDist::Fixed { ns: 50_000_000 })
        );
        assert!(TimeDist::parse("uniform:5ms,1ms").is_err());
        assert!(TimeDist::parse("cauchy:1ms").is_err());
        for text in ["50ms", "normal:10ms,2ms", "uniform:250us,3ms", "exp:1s"] {
            assert_eq!(TimeDist::parse(text).unwrap().to_string(), text);
        }
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(1);
        let d = TimeDist::parse("uniform:1ms,3ms").unwrap();
        let mean: f64 = (0..20_000).map(|_| d.sample(&mut rng) as f64).sum::<f64>() / 20_000.0;
        assert!((mean - 2e6).abs() < 2e4, "{mean}");
        assert_eq!(d.mean(), 2_000_000);
    }
}
