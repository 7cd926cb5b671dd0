//! Human units on the command line: `30s`, `1.5ms`, `250us`, `10k`, `normal:10ms,2ms`.

use serde::Serialize;

/// A value on the command line that is not the unit it should be. Each names the text it read,
/// as clap prints it under the flag.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// Not a number followed by a time unit.
    #[error("{0:?} is not a duration (try 30s, 1.5ms, 250us)")]
    NotADuration(String),
    /// A number with a unit that is not one of time.
    #[error("unknown time unit {unit:?} in {text:?} (ns, us, ms, s, m, h)")]
    TimeUnit {
        /// The unit as written.
        unit: String,
        /// The whole value.
        text: String,
    },
    /// A duration below zero or above 10^18 ns.
    #[error("{0:?} is out of range")]
    OutOfRange(String),
    /// Not a number with an optional `k` or `M`.
    #[error("{0:?} is not a count (try 100, 10k, 1M)")]
    NotACount(String),
    /// A count that is negative or has a fraction.
    #[error("{0:?} is not a whole non-negative count")]
    NotWhole(String),
    /// A distribution with other than its two values.
    #[error("{kind} needs two values: {kind}:A,B")]
    TwoValues {
        /// The distribution's name.
        kind: String,
    },
    /// `uniform:A,B` with A above B.
    #[error("uniform:{0}: the low bound is above the high one")]
    Bounds(String),
    /// A distribution's name that is not one.
    #[error("unknown distribution {0:?} (fixed, normal, uniform, exp)")]
    Distribution(String),
}

/// Parses a duration into nanoseconds. A bare number is seconds (as in AIPerf's flags).
pub(crate) fn parse_duration_ns(s: &str) -> Result<u64, Error> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| Error::NotADuration(s.into()))?;
    let scale = match unit.trim() {
        "" | "s" | "sec" => 1e9,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        other => {
            return Err(Error::TimeUnit {
                unit: other.into(),
                text: s.into(),
            })
        }
    };
    let ns = value * scale;
    if !(0.0..=1e18).contains(&ns) {
        return Err(Error::OutOfRange(s.into()));
    }
    Ok(ns.round() as u64)
}

/// Parses a count with an optional `k`/`M` suffix (`10k` = 10000).
pub(crate) fn parse_count(s: &str) -> Result<u64, Error> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1_000.0),
        Some('M') => (&t[..t.len() - 1], 1_000_000.0),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| Error::NotACount(s.into()))?;
    let n = v * mult;
    if !n.is_finite() || n < 0.0 || n.fract() != 0.0 {
        return Err(Error::NotWhole(s.into()));
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
    pub fn parse(s: &str) -> Result<TimeDist, Error> {
        let Some((kind, args)) = s.split_once(':') else {
            return Ok(TimeDist::Fixed {
                ns: parse_duration_ns(s)?,
            });
        };
        let parts: Vec<&str> = args.split(',').collect();
        let two = || -> Result<(u64, u64), Error> {
            match parts.as_slice() {
                [a, b] => Ok((parse_duration_ns(a)?, parse_duration_ns(b)?)),
                _ => Err(Error::TwoValues { kind: kind.into() }),
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
                    return Err(Error::Bounds(args.into()));
                }
                Ok(TimeDist::Uniform { lo, hi })
            }
            "exp" => Ok(TimeDist::Exp {
                mean: parse_duration_ns(args)?,
            }),
            other => Err(Error::Distribution(other.into())),
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
        assert_eq!(
            parse_duration_ns("fast"),
            Err(Error::NotADuration("fast".into()))
        );
        assert_eq!(
            parse_duration_ns("5 parsecs").unwrap_err().to_string(),
            r#"unknown time unit "parsecs" in "5 parsecs" (ns, us, ms, s, m, h)"#
        );
        assert_eq!(
            parse_duration_ns("-1s"),
            Err(Error::NotADuration("-1s".into()))
        );
        assert_eq!(
            parse_duration_ns("1e30s"),
            Err(Error::TimeUnit {
                unit: "e30s".into(),
                text: "1e30s".into()
            })
        );
        assert_eq!(
            parse_duration_ns("99999999999h"),
            Err(Error::OutOfRange("99999999999h".into()))
        );
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("10k"), Ok(10_000));
        assert_eq!(parse_count("1M"), Ok(1_000_000));
        assert_eq!(parse_count("1.5k"), Ok(1_500));
        assert_eq!(parse_count("42"), Ok(42));
        assert_eq!(parse_count("1.5"), Err(Error::NotWhole("1.5".into())));
        assert_eq!(parse_count("lots"), Err(Error::NotACount("lots".into())));
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
        assert_eq!(
            TimeDist::parse("uniform:5ms,1ms"),
            Err(Error::Bounds("5ms,1ms".into()))
        );
        assert_eq!(
            TimeDist::parse("normal:5ms"),
            Err(Error::TwoValues {
                kind: "normal".into()
            })
        );
        assert_eq!(
            TimeDist::parse("cauchy:1ms"),
            Err(Error::Distribution("cauchy".into()))
        );
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
