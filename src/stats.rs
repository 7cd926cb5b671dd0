//! Distributions: an HdrHistogram for percentiles plus exact moments, and where the values are
//! at hand, exact percentiles.
//!
//! Each shard records into its own [`Dist`]s; the run merges them at the end. Count, min, max,
//! mean and the population standard deviation are exact, from integer sums, so merging shards
//! changes nothing. Percentiles come from the histogram (3 significant digits: within 0.1%),
//! except in a distribution made with [`Dist::keeping_values`] and then [sealed](Dist::seal):
//! there they interpolate linearly between the exact values, as numpy's default method and so
//! AIPerf do (the per-request metrics of the report, built after the run from its records).

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
    /// Every value, when kept; sorted once sealed.
    values: Option<Vec<f64>>,
    sealed: bool,
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

/// An empty histogram of every distribution's layout (1 ns to [`MAX_VALUE`], 3 significant
/// digits): histograms of this layout add up.
pub fn empty_histogram() -> Histogram<u32> {
    Histogram::new_with_bounds(1, MAX_VALUE, SIGFIG).expect("valid bounds")
}

impl Dist {
    /// An empty distribution.
    pub fn new() -> Dist {
        Dist {
            hist: empty_histogram(),
            count: 0,
            sum: 0,
            sum_sq: 0,
            min: u64::MAX,
            max: 0,
            values: None,
            sealed: false,
        }
    }

    /// An empty distribution that also keeps every value, for exact percentiles once
    /// [sealed](Dist::seal). Not for the hot path: it grows with every value.
    pub fn keeping_values() -> Dist {
        Dist {
            values: Some(Vec::new()),
            ..Dist::new()
        }
    }

    /// Adds one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        let v = v.min(MAX_VALUE);
        self.record_moments(v);
        if let Some(values) = &mut self.values {
            values.push(v as f64);
            self.sealed = false;
        }
    }

    /// Adds one value that is not a whole number (a per-request ITL): the histogram and the
    /// moments get it rounded, the kept values as it is.
    pub fn record_f64(&mut self, v: f64) {
        let v = v.clamp(0.0, MAX_VALUE as f64);
        self.record_moments(v.round() as u64);
        if let Some(values) = &mut self.values {
            values.push(v);
            self.sealed = false;
        }
    }

    #[inline]
    fn record_moments(&mut self, v: u64) {
        // Values are clamped into range, so this cannot fail.
        let _ = self.hist.record(v.max(1));
        self.count += 1;
        self.sum += v as u128;
        self.sum_sq += (v as u128) * (v as u128);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Adds every value of `other` (its kept values too, when both keep them).
    pub fn merge(&mut self, other: &Dist) {
        // Identical layouts: adding cannot fail.
        let _ = self.hist.add(&other.hist);
        self.count += other.count;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        match (&mut self.values, &other.values) {
            (Some(mine), Some(theirs)) => {
                mine.extend_from_slice(theirs);
                self.sealed = false;
            }
            _ => self.values = None,
        }
    }

    /// Adds every value of `h`, a histogram of this layout ([`empty_histogram`]). Its values
    /// are known to the histogram's precision only: a distribution that kept its values
    /// stops keeping them, and its percentiles come from the histogram from now on.
    pub fn add_histogram(&mut self, h: &Histogram<u32>) {
        if h.is_empty() {
            return;
        }
        for v in h.iter_recorded() {
            let (value, n) = (v.value_iterated_to(), u64::from(v.count_at_value()));
            let _ = self.hist.record_n(value.max(1), v.count_at_value());
            self.count += n;
            self.sum += u128::from(value) * u128::from(n);
            self.sum_sq += u128::from(value) * u128::from(value) * u128::from(n);
        }
        self.min = self.min.min(h.min());
        self.max = self.max.max(h.max());
        self.values = None;
    }

    /// Sorts the kept values: from now on percentiles are exact.
    pub fn seal(&mut self) {
        if let Some(values) = self.values.as_mut().filter(|_| !self.sealed) {
            values.sort_unstable_by(f64::total_cmp);
            self.sealed = true;
        }
    }

    /// The sorted values, when this distribution keeps them and is sealed.
    pub fn sorted_values(&self) -> Option<&[f64]> {
        self.values.as_deref().filter(|_| self.sealed)
    }

    /// True when percentiles come from the exact values, not the histogram.
    pub fn is_exact(&self) -> bool {
        self.sorted_values().is_some()
    }

    /// The value at percentile `p` (0–100): interpolated linearly between the exact values
    /// when they are kept and sealed, else from the histogram.
    pub fn quantile(&self, p: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        match self.sorted_values() {
            Some(v) => linear_percentile(v, p),
            None => self.percentile(p) as f64,
        }
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The value at percentile `p` (0–100), as a whole number: [`Dist::quantile`] rounded.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        if let Some(v) = self.sorted_values() {
            return linear_percentile(v, p).round() as u64;
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
                .map(|(_, p)| s(self.quantile(*p)))
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

    /// The `p`-th percentile (0–100) of these values and `infinite` more of +∞, by numpy's
    /// `nearest` rank (see [`nearest_percentile_with_infinities`]); from the histogram where
    /// the values are not kept. `None` is +∞.
    pub fn nearest_with_infinities(&self, infinite: u64, p: f64) -> Option<f64> {
        if let Some(v) = self.sorted_values() {
            return nearest_percentile_with_infinities(v, infinite, p);
        }
        let n = self.count + infinite;
        if n == 0 {
            return None;
        }
        let rank = ((n - 1) as f64 * (p / 100.0).clamp(0.0, 1.0)).round_ties_even() as u64;
        let mut seen = 0;
        for v in self.hist.iter_recorded() {
            seen += v.count_since_last_iteration();
            if seen > rank {
                let at = self.hist.highest_equivalent(v.value_iterated_to());
                return Some(at.clamp(self.min, self.max) as f64);
            }
        }
        None
    }

    /// The histogram (values clamped to at least 1, as recorded).
    pub fn histogram(&self) -> &Histogram<u32> {
        &self.hist
    }

    /// The exact moments, which a histogram alone does not keep.
    pub fn moments(&self) -> Moments {
        Moments {
            count: self.count,
            sum: self.sum.to_string(),
            sum_sq: self.sum_sq.to_string(),
            min: self.min,
            max: self.max,
        }
    }

    /// A distribution rebuilt from another process's histogram and moments (no kept values:
    /// percentiles come from the histogram). `None` when they do not fit together.
    pub fn from_parts(hist: &Histogram<u32>, m: &Moments) -> Option<Dist> {
        let mut d = Dist::new();
        d.hist.add(hist).ok()?;
        (d.hist.len() == m.count).then_some(())?;
        d.count = m.count;
        d.sum = m.sum.parse().ok()?;
        d.sum_sq = m.sum_sq.parse().ok()?;
        d.min = m.min;
        d.max = m.max;
        Some(d)
    }
}

/// A distribution's count, exact sums (as decimal strings: they outgrow JSON's numbers) and
/// extremes, written beside its histogram so that a merge keeps exact means and deviations.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Moments {
    /// Values.
    pub count: u64,
    /// Σ values.
    pub sum: String,
    /// Σ values².
    pub sum_sq: String,
    /// Smallest value (`u64::MAX` when empty).
    pub min: u64,
    /// Largest value.
    pub max: u64,
}

/// The `p`-th percentile (0–100) of sorted values by linear interpolation between the two
/// closest ranks: numpy's default method (`linear`), which AIPerf uses.
pub fn linear_percentile(sorted: &[f64], p: f64) -> f64 {
    let Some(&last) = sorted.last() else {
        return 0.0;
    };
    let h = (sorted.len() - 1) as f64 * (p / 100.0).clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    match sorted.get(lo + 1) {
        Some(&next) => sorted[lo] + (h - lo as f64) * (next - sorted[lo]),
        None => last,
    }
}

/// The `p`-th percentile (0–100) of `sorted` together with `infinite` more values of +∞, by
/// numpy's `nearest` method (rank (n−1)·p rounded half to even): AIPerf's error-adjusted
/// percentiles, where each failed request counts as infinitely slow. `None` is +∞.
pub fn nearest_percentile_with_infinities(sorted: &[f64], infinite: u64, p: f64) -> Option<f64> {
    let n = sorted.len() as u64 + infinite;
    if n == 0 {
        return None;
    }
    let h = (n - 1) as f64 * (p / 100.0).clamp(0.0, 1.0);
    let rank = h.round_ties_even() as usize;
    sorted.get(rank).copied()
}

/// The two-sided critical value of Student's t distribution with `df` degrees of freedom at
/// `confidence` (e.g. 0.95): the `t` with P(|T| ≤ t) = confidence, as `scipy.stats.t.ppf(1 −
/// α/2, df)`. Found by bisection on the distribution function, which is the regularized
/// incomplete beta function (evaluated by its continued fraction).
pub fn t_critical(df: f64, confidence: f64) -> f64 {
    if !(df > 0.0 && confidence > 0.0 && confidence < 1.0) {
        return f64::NAN;
    }
    // P(|T| > t) = I_{df/(df+t²)}(df/2, 1/2).
    let tail = |t: f64| incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
    let alpha = 1.0 - confidence;
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while tail(hi) > alpha {
        hi *= 2.0;
        if hi > 1e12 {
            return f64::INFINITY;
        }
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if tail(mid) > alpha {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-12 * hi {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// The mean of `values` with its Student-t interval at `confidence`: the mean, the sample
/// standard deviation (n − 1), the standard error, and the critical t (n − 1 degrees of
/// freedom); the interval is mean ± t × se. `None` with fewer than 2 values.
pub struct TInterval {
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation.
    pub std: f64,
    /// Standard error of the mean.
    pub se: f64,
    /// Critical value of t.
    pub t: f64,
}

impl TInterval {
    /// The interval of `values` (at least 2) at `confidence`.
    pub fn of(values: &[f64], confidence: f64) -> Option<TInterval> {
        let n = values.len() as f64;
        if values.len() < 2 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n;
        let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        Some(TInterval {
            mean,
            std,
            se: std / n.sqrt(),
            t: t_critical(n - 1.0, confidence),
        })
    }

    /// The interval's ends.
    pub fn bounds(&self) -> (f64, f64) {
        (self.mean - self.t * self.se, self.mean + self.t * self.se)
    }
}

/// A 95%-style interval and how it was made, for the artifacts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

/// The distribution-free interval of the `p`-th percentile (0–100) from `sorted` values at
/// `confidence`: the order statistics x₍ₗ₎ and x₍ᵤ₎ whose ranks the binomial distribution
/// B(n, p/100) puts around the percentile's rank, so that P(x₍ₗ₎ ≤ q < x₍ᵤ₎) ≥ confidence
/// (exact for n ≤ 1,000, by the normal approximation above). The ends are observed values,
/// so the interval never leaves the figure's domain; where a small sample cannot bound a
/// side (p99 of 50 values), that end is the sample's extreme.
pub fn percentile_interval(sorted: &[f64], p: f64, confidence: f64) -> Option<Interval> {
    let n = sorted.len();
    if n < 2 || !(0.0..=100.0).contains(&p) {
        return None;
    }
    let q = p / 100.0;
    let tail = (1.0 - confidence) / 2.0;
    // Ranks (1-based) of the lower and upper order statistics.
    let (l, u) = if n <= 1000 {
        // P(B ≤ k) for k = 0..n, from the pmf built up term by term in logs.
        let (lq, lr) = (q.max(1e-300).ln(), (1.0 - q).max(1e-300).ln());
        let mut cdf = Vec::with_capacity(n + 1);
        let mut acc = 0.0;
        for k in 0..=n {
            let ln_pmf = ln_gamma(n as f64 + 1.0)
                - ln_gamma(k as f64 + 1.0)
                - ln_gamma((n - k) as f64 + 1.0)
                + k as f64 * lq
                + (n - k) as f64 * lr;
            acc += ln_pmf.exp();
            cdf.push(acc);
        }
        // l: the largest rank with P(B ≤ l − 1) ≤ tail; u: the smallest with
        // P(B ≤ u − 1) ≥ 1 − tail.
        let l = (1..=n)
            .take_while(|&k| cdf[k - 1] <= tail)
            .last()
            .unwrap_or(0);
        let u = (1..=n).find(|&k| cdf[k - 1] >= 1.0 - tail).unwrap_or(n + 1);
        (l, u)
    } else {
        let z = t_critical(1e9, confidence);
        let (m, sd) = (n as f64 * q, (n as f64 * q * (1.0 - q)).sqrt());
        (
            (m - z * sd).floor().max(0.0) as usize,
            ((m + z * sd).ceil() as usize + 1).min(n + 1),
        )
    };
    Some(Interval {
        lo: sorted[l.clamp(1, n) - 1],
        hi: sorted[u.clamp(1, n) - 1],
    })
}

/// The interval of the mean of `values`, all of which must be positive, at `confidence`:
/// Student's t on their logarithms, taken back (a geometric interval: never below zero, and
/// fitting the right skew of latencies and throughputs over a few runs). For values that
/// include zero or less, Student's t on the values with the low end clamped at zero. `None`
/// with fewer than 2 values.
pub fn positive_mean_interval(values: &[f64], confidence: f64) -> Option<(Interval, &'static str)> {
    if values.iter().all(|v| *v > 0.0) {
        let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
        let (lo, hi) = TInterval::of(&logs, confidence)?.bounds();
        Some((
            Interval {
                lo: lo.exp(),
                hi: hi.exp(),
            },
            "t on logarithms",
        ))
    } else {
        let (lo, hi) = TInterval::of(values, confidence)?.bounds();
        Some((
            Interval {
                lo: lo.max(0.0),
                hi,
            },
            "t, clamped at 0",
        ))
    }
}

/// The interval of the ratio Σ num / Σ den by batch means: the pairs, in their order (e.g.
/// by send time), cut into 2 to 10 consecutive batches of at least 5, each batch's own
/// ratio taken as one observation, Student's t over them, scaled to centre on the whole
/// ratio, the low end clamped at zero.
/// Consecutive batches soak up the correlation between neighbouring requests that a
/// per-request interval would ignore. `None` under 10 pairs or for a zero denominator.
pub fn ratio_interval(num: &[f64], den: &[f64], confidence: f64) -> Option<Interval> {
    let n = num.len().min(den.len());
    if n < 10 {
        return None;
    }
    let k = (n / 5).clamp(2, 10);
    let ratios: Option<Vec<f64>> = (0..k)
        .map(|b| {
            let (a, z) = (b * n / k, (b + 1) * n / k);
            let d: f64 = den[a..z].iter().sum();
            (d > 0.0).then(|| num[a..z].iter().sum::<f64>() / d)
        })
        .collect();
    let t = TInterval::of(&ratios?, confidence)?;
    // Centred on the whole ratio (the batches' mean weighs each batch alike).
    let whole = num[..n].iter().sum::<f64>() / den[..n].iter().sum::<f64>();
    let scale = if t.mean > 0.0 { whole / t.mean } else { 1.0 };
    let (lo, hi) = t.bounds();
    Some(Interval {
        lo: (lo * scale).max(0.0),
        hi: hi * scale,
    })
}

/// ln Γ(x) for x > 0 (Lanczos' approximation, g = 7, 9 terms; about 15 digits).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1−x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let mut a = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b), by its continued fraction (modified
/// Lentz), on the side where it converges fast.
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - incomplete_beta(b, a, 1.0 - x);
    }
    let tiny = 1e-300;
    let (mut c, mut d) = (1.0, 1.0 - (a + b) * x / (a + 1.0));
    if d.abs() < tiny {
        d = tiny;
    }
    d = 1.0 / d;
    let mut f = d;
    for m in 1..300 {
        let m = f64::from(m);
        for num in [
            m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + num * d;
            if d.abs() < tiny {
                d = tiny;
            }
            c = 1.0 + num / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            f *= c * d;
        }
        if (c * d - 1.0).abs() < 1e-15 {
            break;
        }
    }
    front * f / a
}

/// A histogram that one thread fills and another reads while it runs: counts in buckets 1/8
/// of an octave wide (±4.4%) from 1 to 2^32 units, each an atomic counter. For live figures
/// off the hot path (the progress line), never for results.
pub struct LiveBuckets {
    counts: Box<[std::sync::atomic::AtomicU64]>,
}

/// Buckets per octave in [`LiveBuckets`].
const LIVE_PER_OCTAVE: f64 = 8.0;
/// Buckets in [`LiveBuckets`]: 32 octaves.
const LIVE_BUCKETS: usize = 256;

impl Default for LiveBuckets {
    fn default() -> LiveBuckets {
        LiveBuckets {
            counts: (0..LIVE_BUCKETS)
                .map(|_| std::sync::atomic::AtomicU64::new(0))
                .collect(),
        }
    }
}

impl std::fmt::Debug for LiveBuckets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LiveBuckets({} values)",
            self.snapshot().iter().sum::<u64>()
        )
    }
}

impl LiveBuckets {
    /// Counts `v` (values below 1 count as 1).
    pub fn record(&self, v: u64) {
        let i = ((v.max(1) as f64).log2() * LIVE_PER_OCTAVE) as usize;
        self.counts[i.min(LIVE_BUCKETS - 1)].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The counts as they stand.
    pub fn snapshot(&self) -> Vec<u64> {
        self.counts
            .iter()
            .map(|c| c.load(std::sync::atomic::Ordering::Relaxed))
            .collect()
    }

    /// The counts of several, added bucket by bucket (the shards' into the run's).
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a LiveBuckets>) -> Vec<u64> {
        let mut sum = vec![0u64; LIVE_BUCKETS];
        for b in all {
            for (s, c) in sum.iter_mut().zip(b.snapshot()) {
                *s += c;
            }
        }
        sum
    }

    /// The upper bound of bucket `i` (its values are below it).
    pub fn upper(i: usize) -> f64 {
        2f64.powf((i as f64 + 1.0) / LIVE_PER_OCTAVE)
    }

    /// The middle of bucket `i`, as [`LiveBuckets::quantile`] reports it.
    pub fn middle(i: usize) -> f64 {
        2f64.powf((i as f64 + 0.5) / LIVE_PER_OCTAVE)
    }

    /// The `p`-th percentile (0–100) of summed snapshots: the middle of the bucket it falls
    /// in; `None` when empty.
    pub fn quantile(counts: &[u64], p: f64) -> Option<f64> {
        let n: u64 = counts.iter().sum();
        if n == 0 {
            return None;
        }
        let rank = ((p / 100.0).clamp(0.0, 1.0) * n as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        let i = counts.iter().position(|c| {
            seen += c;
            seen >= rank
        })?;
        Some(LiveBuckets::middle(i))
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
    fn percentile_intervals_are_order_statistics_at_binomial_ranks() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        // The median of 100: ranks 40 and 61 (P(40 ≤ B(100, ½) ≤ 60) = 0.965).
        assert_eq!(
            percentile_interval(&v, 50.0, 0.95),
            Some(Interval { lo: 40.0, hi: 61.0 })
        );
        // p99 of 50 values: rank 48 below; no rank bounds it above, so the maximum.
        assert_eq!(
            percentile_interval(&v[..50], 99.0, 0.95),
            Some(Interval { lo: 48.0, hi: 50.0 })
        );
        // Past 1,000 values the normal approximation gives the same ranks, near enough.
        let big: Vec<f64> = (1..=2000).map(f64::from).collect();
        let i = percentile_interval(&big, 50.0, 0.95).unwrap();
        assert!(
            (956.0..=957.0).contains(&i.lo) && (1044.0..=1046.0).contains(&i.hi),
            "{i:?}"
        );
        assert_eq!(percentile_interval(&v[..1], 50.0, 0.95), None);
    }

    #[test]
    fn intervals_of_positive_figures_stay_positive() {
        // Three runs whose p99 spread widely: a plain t interval goes below zero here.
        let runs = [2.0, 40.0, 90.0];
        let (lo, _) = TInterval::of(&runs, 0.95).unwrap().bounds();
        assert!(lo < 0.0);
        let (i, how) = positive_mean_interval(&runs, 0.95).unwrap();
        assert!(i.lo > 0.0 && i.lo < 2.0 && i.hi > 90.0, "{i:?}");
        assert_eq!(how, "t on logarithms");
        let (i, how) = positive_mean_interval(&[0.0, 1.0, 2.0], 0.95).unwrap();
        assert_eq!((i.lo, how), (0.0, "t, clamped at 0"));
    }

    #[test]
    fn a_ratio_interval_comes_from_batch_means() {
        // Every request 2 tokens in 4 s: the ratio is exactly ½.
        let (num, den) = (vec![2.0; 40], vec![4.0; 40]);
        assert_eq!(
            ratio_interval(&num, &den, 0.95),
            Some(Interval { lo: 0.5, hi: 0.5 })
        );
        // Alternating halves of the run: ½ then 1; the interval holds the whole ratio.
        let den: Vec<f64> = (0..40).map(|i| if i < 20 { 4.0 } else { 2.0 }).collect();
        let i = ratio_interval(&num, &den, 0.95).unwrap();
        let whole = 80.0 / den.iter().sum::<f64>();
        assert!(i.lo < whole && whole < i.hi && i.lo >= 0.0, "{i:?}");
        assert_eq!(ratio_interval(&num[..9], &den[..9], 0.95), None);
    }

    #[test]
    fn a_distribution_rebuilt_from_its_parts_keeps_moments_and_percentiles() {
        let (mut a, mut b, mut all) = (Dist::new(), Dist::new(), Dist::keeping_values());
        for v in 1..=1000u64 {
            let v = 50_000_000 + v * 10_007;
            (if v % 3 == 0 { &mut a } else { &mut b }).record(v);
            all.record(v);
        }
        all.seal();
        let mut merged = Dist::from_parts(a.histogram(), &a.moments()).unwrap();
        merged.merge(&Dist::from_parts(b.histogram(), &b.moments()).unwrap());
        assert_eq!(merged.count(), 1000);
        assert_eq!((merged.mean(), merged.std()), (all.mean(), all.std()));
        assert_eq!(merged.summary(1.0).min, all.summary(1.0).min);
        assert_eq!(merged.summary(1.0).max, all.summary(1.0).max);
        for p in [1.0, 50.0, 90.0, 99.0, 99.9] {
            // From the histogram: within its 3 significant digits of the exact value.
            assert!(rel(merged.quantile(p), all.quantile(p)) < 0.002, "p{p}");
            let (h, e) = (
                merged.nearest_with_infinities(50, p),
                all.nearest_with_infinities(50, p),
            );
            match (h, e) {
                (Some(h), Some(e)) => assert!(rel(h, e) < 0.001, "p{p}: {h} {e}"),
                (h, e) => assert_eq!(h.is_some(), e.is_some(), "p{p}"),
            }
        }
        // p99 of 1000 values and 50 failures is a failure: +∞.
        assert_eq!(merged.nearest_with_infinities(50, 99.0), None);
        // Where the histogram is exact (below 2048), the same rank as the kept values.
        let (mut small, mut kept) = (Dist::new(), Dist::keeping_values());
        for v in (1..=1000u64).rev() {
            small.record(v * 2);
            kept.record(v * 2);
        }
        kept.seal();
        for p in [0.0, 1.0, 33.3, 50.0, 90.0, 95.0, 99.0, 100.0] {
            assert_eq!(
                small.nearest_with_infinities(37, p),
                kept.nearest_with_infinities(37, p),
                "p{p}"
            );
        }
        let mut bad = a.moments();
        bad.count += 1;
        assert!(Dist::from_parts(a.histogram(), &bad).is_none());
        bad = a.moments();
        bad.sum = "x".into();
        assert!(Dist::from_parts(a.histogram(), &bad).is_none());
    }

    fn rel(a: f64, b: f64) -> f64 {
        (a - b).abs() / b.abs().max(1e-12)
    }

    #[test]
    fn live_buckets_read_within_their_width() {
        let b = LiveBuckets::default();
        for v in 1..=10_000u64 {
            b.record(v * 100);
        }
        b.record(0);
        b.record(u64::MAX);
        let c = b.snapshot();
        assert_eq!(c.iter().sum::<u64>(), 10_002);
        let near = |got: f64, want: f64| (got / want - 1.0).abs() < 0.045;
        let p50 = LiveBuckets::quantile(&c, 50.0).unwrap();
        let p99 = LiveBuckets::quantile(&c, 99.0).unwrap();
        assert!(near(p50, 500_000.0), "{p50}");
        assert!(near(p99, 990_000.0), "{p99}");
        assert_eq!(LiveBuckets::quantile(&vec![0; 256], 50.0), None);
    }

    #[test]
    fn student_t_critical_values_match_the_tables() {
        // Two-sided, from published t tables (and scipy.stats.t.ppf).
        for (df, conf, want) in [
            (1.0, 0.95, 12.706_204_7),
            (2.0, 0.95, 4.302_652_7),
            (4.0, 0.95, 2.776_445_1),
            (9.0, 0.95, 2.262_157_2),
            (4.0, 0.99, 4.604_094_9),
            (30.0, 0.95, 2.042_272_5),
            (4.0, 0.90, 2.131_846_8),
            (1000.0, 0.95, 1.962_339_1),
        ] {
            let got = t_critical(df, conf);
            assert!(
                (got - want).abs() < 1e-5,
                "df {df} conf {conf}: {got} != {want}"
            );
        }
        assert!(t_critical(0.0, 0.95).is_nan());
        assert!(t_critical(3.0, 1.0).is_nan());
    }

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

    /// numpy.percentile(x, p) with methods "linear" (the default) and "nearest": the expected
    /// values were computed with numpy 2.4 for these inputs.
    #[test]
    fn exact_percentiles_match_numpy() {
        let mut d = Dist::keeping_values();
        for v in [15u64, 20, 35, 40, 50] {
            d.record(v);
        }
        d.seal();
        assert!(d.is_exact());
        // np.percentile([15, 20, 35, 40, 50], [1, 25, 40, 50, 99]) = [15.2, 20, 29, 35, 49.6]
        for (p, want) in [
            (1.0, 15.2),
            (25.0, 20.0),
            (40.0, 29.0),
            (50.0, 35.0),
            (99.0, 49.6),
        ] {
            assert!(
                (d.quantile(p) - want).abs() < 1e-9,
                "p{p}: {}",
                d.quantile(p)
            );
        }
        assert_eq!(d.percentile(99.0), 50);
        let s = d.summary(1.0);
        assert!((s.at("p1") - 15.2).abs() < 1e-9);
        // Fractions are kept: ITL values are not whole nanoseconds.
        let mut f = Dist::keeping_values();
        f.record_f64(1.5);
        f.record_f64(2.25);
        f.seal();
        assert!((f.quantile(50.0) - 1.875).abs() < 1e-12);
        // Recording again unseals: percentiles fall back to the histogram until sealed.
        f.record(3);
        assert!(!f.is_exact());
        // np.percentile([1, 2, 3, inf, inf], p, method="nearest"): p50 → 3, p75 → inf;
        // p62.5 → rank 2.5 → 2 (half to even) → 3.
        let v = [1.0, 2.0, 3.0];
        assert_eq!(nearest_percentile_with_infinities(&v, 2, 50.0), Some(3.0));
        assert_eq!(nearest_percentile_with_infinities(&v, 2, 62.5), Some(3.0));
        assert_eq!(nearest_percentile_with_infinities(&v, 2, 75.0), None);
        assert_eq!(nearest_percentile_with_infinities(&v, 0, 99.0), Some(3.0));
        assert_eq!(linear_percentile(&[], 50.0), 0.0);
        // Merging kept values keeps them; merging with a histogram-only one drops them.
        let mut a = Dist::keeping_values();
        a.record(1);
        let mut b = Dist::keeping_values();
        b.record(3);
        a.merge(&b);
        a.seal();
        assert_eq!(a.quantile(50.0), 2.0);
        a.merge(&Dist::new());
        a.seal();
        assert!(!a.is_exact());
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
