//! Distributions: an HdrHistogram for percentiles plus exact moments.
//!
//! Each shard records into its own [`Dist`]s; the run merges them at the end. Percentiles come
//! from the histogram (3 significant digits: within 0.1%); count, min, max, mean and the
//! population standard deviation are exact, from integer sums, so merging shards changes
//! nothing.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Largest value a distribution holds: one hour in nanoseconds. Larger values are clamped.
pub const MAX_VALUE: u64 = 3_600_000_000_000;
const SIGFIG: u8 = 3;

/// The percentiles every distribution reports.
pub const PERCENTILES: [(&str, f64); 10] = [
    ("p1", 1.0),
    ("p5", 5.0),
    ("p10", 10.0),
    ("p25", 25.0),
    ("p50", 50.0),
    ("p75", 75.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p99_9", 99.9),
];

/// A mergeable distribution of non-negative integers (usually nanoseconds).
#[derive(Clone)]
pub struct Dist {
    hist: Histogram<u32>,
    count: u64,
    sum: u128,
    sum_sq: u128,
    min: u64,
    max: u64,
}

impl Default for Dist {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Dist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Dist(count={}, min={}, max={})",
            self.count, self.min, self.max
        )
    }
}

impl Dist {
    /// An empty distribution.
    pub fn new() -> Dist {
        Dist {
            hist: Histogram::new_with_bounds(1, MAX_VALUE, SIGFIG).expect("valid bounds"),
            count: 0,
            sum: 0,
            sum_sq: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Adds one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        let v = v.min(MAX_VALUE);
        // Values are clamped into range above, so this cannot fail.
        let _ = self.hist.record(v.max(1));
        self.count += 1;
        self.sum += v as u128;
        self.sum_sq += (v as u128) * (v as u128);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Dist) {
        // Identical layouts: adding cannot fail.
        let _ = self.hist.add(&other.hist);
        self.count += other.count;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The value at percentile `p` (0–100).
    pub fn percentile(&self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        self.hist
            .value_at_quantile(p / 100.0)
            .clamp(self.min, self.max)
    }

    /// Exact mean.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// Exact population standard deviation.
    pub fn std(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let n = self.count as u128;
        // n·Σx² − (Σx)² is exact in integers while it fits; otherwise fall back to floats.
        let var = match (n.checked_mul(self.sum_sq), self.sum.checked_mul(self.sum)) {
            (Some(a), Some(b)) => a.saturating_sub(b) as f64 / (n * n) as f64,
            _ => {
                let m = self.mean();
                (self.sum_sq as f64 / self.count as f64 - m * m).max(0.0)
            }
        };
        var.sqrt()
    }

    /// Summary statistics, values divided by `scale` (e.g. 1e6 for ns → ms).
    pub fn summary(&self, scale: f64) -> Summary {
        let s = |v: f64| v / scale;
        Summary {
            avg: s(self.mean()),
            min: s(if self.count == 0 { 0 } else { self.min } as f64),
            max: s(self.max as f64),
            std: s(self.std()),
            percentiles: PERCENTILES
                .iter()
                .map(|(_, p)| s(self.percentile(*p) as f64))
                .collect(),
            count: self.count,
        }
    }

    /// The histogram in HdrHistogram's V2 format, for merging across processes.
    pub fn serialize_v2(&self) -> Vec<u8> {
        use hdrhistogram::serialization::Serializer;
        let mut out = Vec::new();
        let _ = hdrhistogram::serialization::V2Serializer::new().serialize(&self.hist, &mut out);
        out
    }
}

/// Statistics of one distribution, in the unit it was scaled to.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Mean.
    pub avg: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
    /// Population standard deviation.
    pub std: f64,
    /// Values at [`PERCENTILES`], in order.
    #[serde(skip)]
    pub percentiles: Vec<f64>,
    /// Number of values.
    pub count: u64,
}

impl Summary {
    /// The value at a named percentile (`"p99"`).
    pub fn at(&self, name: &str) -> f64 {
        PERCENTILES
            .iter()
            .position(|(n, _)| *n == name)
            .map(|i| self.percentiles[i])
            .unwrap_or(f64::NAN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_moments_and_close_percentiles() {
        let mut d = Dist::new();
        for v in 1..=1000u64 {
            d.record(v * 1000);
        }
        assert_eq!(d.count(), 1000);
        assert!((d.mean() - 500_500.0).abs() < 1e-6);
        // Population std of 1..=1000 scaled by 1000.
        let expect = ((1000f64 * 1000.0 - 1.0) / 12.0).sqrt() * 1000.0;
        assert!((d.std() - expect).abs() < 1e-3, "{} vs {}", d.std(), expect);
        let p50 = d.percentile(50.0) as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.002, "{p50}");
        let s = d.summary(1e3);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 1000.0);
        assert!((s.at("p99") - 990.0).abs() < 2.0);
    }

    #[test]
    fn merged_shards_equal_one_histogram_of_all_values() {
        let values: Vec<u64> = (0..30_000u64).map(|i| (i * 7919) % 5_000_000 + 1).collect();
        let mut all = Dist::new();
        let mut shards = [Dist::new(), Dist::new(), Dist::new()];
        for (i, v) in values.iter().enumerate() {
            all.record(*v);
            shards[i % 3].record(*v);
        }
        let mut merged = Dist::new();
        for s in &shards {
            merged.merge(s);
        }
        assert_eq!(merged.serialize_v2(), all.serialize_v2());
        assert_eq!(merged.count(), all.count());
        assert_eq!(merged.mean(), all.mean());
        assert_eq!(merged.std(), all.std());
        for (_, p) in PERCENTILES {
            assert_eq!(merged.percentile(p), all.percentile(p));
        }
    }

    #[test]
    fn empty_and_out_of_range() {
        let d = Dist::new();
        assert_eq!(d.percentile(50.0), 0);
        assert_eq!(d.summary(1.0).min, 0.0);
        let mut d = Dist::new();
        d.record(u64::MAX);
        d.record(0);
        assert_eq!(d.count(), 2);
        assert_eq!(d.summary(1.0).max, MAX_VALUE as f64);
    }
}
