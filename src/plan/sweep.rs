//! Sweeps and repeats: the load points one command line asks for (`--concurrency 1,4,16`,
//! `--request-rate 10..80x2`), and how often each is run (`--num-profile-runs`). Everything
//! but the swept flag is the same for every point; each point is a whole run of its own.

use serde::{Deserialize, Serialize};

use super::{PlanError, Spec};

/// The most points one sweep runs.
pub const MAX_POINTS: usize = 256;

/// The most runs of one point.
pub const MAX_RUNS: u32 = 100;

/// The load flag a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    /// `--concurrency`.
    Concurrency,
    /// `--request-rate`.
    RequestRate,
    /// `--synthetic-input-tokens-mean` (GenAI-Perf `analyze`'s input_sequence_length).
    InputSequenceLength,
    /// `--num-dataset-entries`.
    NumDatasetEntries,
    /// `--batch-size-text`.
    BatchSize,
}

impl Axis {
    /// The name in folders, files and JSON: `concurrency`, `request_rate`.
    pub fn name(self) -> &'static str {
        match self {
            Axis::Concurrency => "concurrency",
            Axis::RequestRate => "request_rate",
            Axis::InputSequenceLength => "input_sequence_length",
            Axis::NumDatasetEntries => "num_dataset_entries",
            Axis::BatchSize => "batch_size",
        }
    }

    /// The flag.
    pub fn flag(self) -> &'static str {
        match self {
            Axis::Concurrency => "--concurrency",
            Axis::RequestRate => "--request-rate",
            Axis::InputSequenceLength => "--synthetic-input-tokens-mean",
            Axis::NumDatasetEntries => "--num-dataset-entries",
            Axis::BatchSize => "--batch-size-text",
        }
    }

    /// Whether each point needs its own prompts (the axis is a workload flag).
    pub fn is_workload(self) -> bool {
        !matches!(self, Axis::Concurrency | Axis::RequestRate)
    }
}

/// One load point of a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The flag varied.
    pub axis: Axis,
    /// Its value at this point.
    pub value: f64,
}

impl Point {
    /// The point's folder name: `concurrency_16`, `request_rate_2.5`.
    pub fn name(&self) -> String {
        format!("{}_{}", self.axis.name(), self.value)
    }

    /// Sets the swept flag in `spec`.
    pub fn apply(&self, spec: &mut Spec) {
        let whole = self.value.round().max(1.0);
        match self.axis {
            Axis::Concurrency => spec.load.concurrency = Some(whole as u64),
            Axis::RequestRate => spec.load.request_rate = Some(self.value),
            Axis::InputSequenceLength => spec.workload.isl_mean = whole.min(u32::MAX as f64) as u32,
            Axis::NumDatasetEntries => spec.workload.num_dataset_entries = whole as u64,
            Axis::BatchSize => spec.workload.batch_size = whole.min(u32::MAX as f64) as u32,
        }
    }

    /// How the load reads in titles: `concurrency 16`, `request rate 2.5/s`.
    pub fn label(&self) -> String {
        match self.axis {
            Axis::Concurrency => format!("concurrency {}", self.value),
            Axis::RequestRate => format!("request rate {}/s", self.value),
            Axis::InputSequenceLength => format!("input length {} tokens", self.value),
            Axis::NumDatasetEntries => format!("{} dataset entries", self.value),
            Axis::BatchSize => format!("batches of {}", self.value),
        }
    }
}

/// Repeated runs of each point, and what is computed over them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repeats {
    /// Runs per point (AIPerf's `--num-profile-runs`).
    pub runs: u32,
    /// Confidence level of the intervals over runs.
    pub confidence: f64,
    /// Pause between runs of a point (ns).
    pub cooldown_ns: u64,
    /// Send the warm-up requests before every run, not only before a point's first.
    pub warmup_every_run: bool,
}

/// `--search`: the highest load whose goodput stays within the objectives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchSpec {
    /// The flag searched.
    pub axis: Axis,
    /// The lowest and highest load probed.
    pub lo: f64,
    /// See `lo`.
    pub hi: f64,
    /// Stop when the bracket is this narrow, relative to its lower end (concurrency: or 1).
    pub tolerance: f64,
    /// The share of requests that must meet every objective for a load to pass.
    pub attainment: f64,
}

/// A search in progress: doubling from the lowest load until one fails, then bisecting
/// between the highest that passed and the lowest that failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// What is searched.
    pub spec: SearchSpec,
    /// The highest load that passed so far.
    pub passed: Option<f64>,
    /// The lowest load that failed so far.
    pub failed: Option<f64>,
}

impl Search {
    /// A search not yet started.
    pub fn new(spec: SearchSpec) -> Search {
        Search {
            spec,
            passed: None,
            failed: None,
        }
    }

    /// The next load to probe; `None` when the search is over.
    pub fn next(&self) -> Option<f64> {
        let s = &self.spec;
        let whole = s.axis == Axis::Concurrency;
        match (self.passed, self.failed) {
            (None, None) => Some(s.lo),
            // The lowest load missed: nothing below it is probed.
            (None, Some(_)) => None,
            (Some(p), None) => (p < s.hi).then(|| {
                let up = (p * 2.0).min(s.hi);
                if whole {
                    up.round()
                } else {
                    round_sig(up, 12)
                }
            }),
            (Some(p), Some(f)) => {
                let narrow = if whole {
                    f - p <= (p * s.tolerance).floor().max(1.0)
                } else {
                    (f - p) / p <= s.tolerance
                };
                if narrow {
                    return None;
                }
                let mid = (p + f) / 2.0;
                Some(if whole {
                    mid.floor()
                } else {
                    round_sig(mid, 12)
                })
            }
        }
    }

    /// Records a probe's outcome.
    pub fn record(&mut self, value: f64, passed: bool) {
        if passed {
            self.passed = Some(self.passed.map_or(value, |p| p.max(value)));
        } else {
            self.failed = Some(self.failed.map_or(value, |f| f.min(value)));
        }
    }
}

/// What the flags say about sweeping and repeating.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSpec {
    /// The points, in the order given (one point without a list).
    pub points: Vec<Point>,
    /// True when a load flag was given a list or range (artifacts go to a folder per point).
    pub is_sweep: bool,
    /// Repeats per point.
    pub repeats: Repeats,
    /// Pause between points (ns).
    pub pause_ns: u64,
    /// Keep points whose artifacts are complete from an earlier run of the same sweep.
    pub resume: bool,
    /// Search for the highest load within the objectives instead of running `points`.
    pub search: Option<SearchSpec>,
    /// Choose the points from the server's capacity instead (`--sweep auto`).
    pub auto: Option<AutoSpec>,
    /// One run through the --concurrency list, this long (ns) per step (`--staircase`).
    pub staircase: Option<(Vec<u64>, u64)>,
}

/// `--sweep auto`: a serial run, a saturated one, then open-loop rates spaced between the two
/// throughputs they reached, stopping early once the server is over-saturated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoSpec {
    /// Points in all, the serial and the saturated run included.
    pub points: usize,
    /// Requests in flight in the saturated run.
    pub saturation: u64,
}

/// The open-loop rates an automatic sweep runs between the serial throughput `low` and the
/// saturated throughput `high` (requests/s): `n` evenly spaced above `low`, the last at `high`
/// A step up in load scales when its throughput gain is at least this share of the gain a
/// server that still scaled would give (the load ratio − 1): 10%, so that a doubling must
/// buy at least 10% more throughput. The sweep's knee and the staircase's live stop judge
/// by it alike ([`judge_step`]).
pub const KNEE_MIN_SHARE: f64 = 0.1;

/// What one step up in load did to throughput.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepVerdict {
    /// The gain's interval lies at or above the gain needed.
    Scaled,
    /// The gain's interval lies below it.
    Stopped,
    /// The interval straddles it: more measurement would tell.
    Undecided,
}

/// A step's throughput gain, judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepGain {
    /// tb / ta − 1.
    pub gain: f64,
    /// Its 95% interval, when both throughputs had one.
    pub interval: Option<(f64, f64)>,
    /// The gain that counts as scaling: [`KNEE_MIN_SHARE`] × (load ratio − 1).
    pub needed: f64,
    /// The verdict.
    pub verdict: StepVerdict,
}

/// Judges a step from throughput `ta` to `tb` for a load `load` times higher; `ha` and `hb`
/// are the throughputs' relative half-widths (95%), combined in quadrature for the ratio.
/// Without them the point estimates decide. `None` for a step that is not up, or from 0.
pub fn judge_step(
    ta: f64,
    ha: Option<f64>,
    tb: f64,
    hb: Option<f64>,
    load: f64,
) -> Option<StepGain> {
    if !(ta > 0.0 && load > 1.0 && tb.is_finite()) {
        return None;
    }
    let needed = KNEE_MIN_SHARE * (load - 1.0);
    let gain = tb / ta - 1.0;
    let interval = ha.zip(hb).map(|(ha, hb)| {
        let h = (ha * ha + hb * hb).sqrt() * (gain + 1.0);
        (gain - h, gain + h)
    });
    let (lo, hi) = interval.unwrap_or((gain, gain));
    let verdict = if lo >= needed {
        StepVerdict::Scaled
    } else if hi < needed {
        StepVerdict::Stopped
    } else {
        StepVerdict::Undecided
    };
    Some(StepGain {
        gain,
        interval,
        needed,
        verdict,
    })
}

/// (GuideLLM's sweep), to 3 significant digits.
pub fn auto_rates(low: f64, high: f64, n: usize) -> Vec<f64> {
    (1..=n)
        .map(|i| round_sig(low + (high - low) * i as f64 / n as f64, 3))
        .collect()
}

impl SweepSpec {
    /// Checks the sizes: points, runs, confidence.
    pub fn validate(&self) -> Result<(), PlanError> {
        let flag = |m: String| Err(PlanError::Flag(m));
        if self.points.len() > MAX_POINTS {
            return flag(format!(
                "{} load points; a sweep runs at most {MAX_POINTS}",
                self.points.len()
            ));
        }
        if !(1..=MAX_RUNS).contains(&self.repeats.runs) {
            return flag(format!(
                "--num-profile-runs {}: must be from 1 to {MAX_RUNS}",
                self.repeats.runs
            ));
        }
        if let Some(a) = &self.auto {
            if !(3..=MAX_POINTS).contains(&a.points) || a.saturation < 2 {
                return flag(format!(
                    "--sweep auto: --sweep-points {} must be from 3 to {MAX_POINTS} (the serial \
                     run, the saturated run and a rate between), and the saturated run's \
                     --concurrency at least 2",
                    a.points
                ));
            }
        }
        if let Some(s) = &self.search {
            if !(s.lo > 0.0 && s.lo < s.hi && s.hi.is_finite()) {
                return flag(format!(
                    "--search-range {}..{}: from a positive load up to a higher, finite one",
                    s.lo, s.hi
                ));
            }
            if !(s.attainment > 0.0 && s.attainment <= 1.0) {
                return flag(format!(
                    "--slo-attainment {}: a share of requests, above 0 and at most 1",
                    s.attainment
                ));
            }
            if !(s.tolerance > 0.0 && s.tolerance < 1.0) {
                return flag(format!(
                    "--search-tolerance {}: between 0 and 1, e.g. 0.05",
                    s.tolerance
                ));
            }
        }
        if !(self.repeats.confidence > 0.0 && self.repeats.confidence < 1.0) {
            return flag(format!(
                "--confidence-level {}: must be between 0 and 1, e.g. 0.95",
                self.repeats.confidence
            ));
        }
        Ok(())
    }
}

/// A load flag's value that is not a list of points.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PointsError {
    /// A point that must be a whole count is not one.
    #[error(transparent)]
    Count(#[from] crate::units::Error),
    /// A point that is not a number.
    #[error("{0:?} is not a number")]
    NotANumber(String),
    /// A point below zero.
    #[error("{0:?} is not a non-negative number")]
    Negative(String),
    /// More points than a sweep takes.
    #[error("{0:?}: more than {MAX_POINTS} points")]
    TooMany(String),
    /// Two commas with nothing between.
    #[error("{0:?}: an empty item in the list")]
    EmptyItem(String),
    /// A range that goes down or has no finite end.
    #[error("{0:?}: a range goes up, from A to a finite B")]
    Downward(String),
    /// A range's step that is not a number.
    #[error("{item:?}: {step:?} is not a step")]
    Step {
        /// The range.
        item: String,
        /// Its step as written.
        step: String,
    },
    /// A range by factor from 0 or by a factor of at most 1.
    #[error("{0:?}: a range by factor needs A > 0 and a factor above 1")]
    Factor(String),
    /// A range by steps that are not positive (or too small to end).
    #[error("{0:?}: the step must be positive")]
    NonPositiveStep(String),
}

/// Parses a load flag's value: a number, a comma list, or ranges `A..B` (doubling), `A..BxF`
/// (times F) and `A..B+S` (plus S), each up to B; items mix: `1,2,4..64x4`. `whole` asks for
/// whole numbers (geometric steps are rounded). Points are kept in the order given, without
/// repeats; at most [`MAX_POINTS`].
pub fn parse_points(s: &str, whole: bool) -> Result<Vec<f64>, PointsError> {
    let number = |t: &str| -> Result<f64, PointsError> {
        let t = t.trim();
        let v = if whole {
            crate::units::parse_count(t)? as f64
        } else {
            match t {
                "inf" | "infinity" | "Infinity" => f64::INFINITY,
                _ => t
                    .parse::<f64>()
                    .map_err(|_| PointsError::NotANumber(t.into()))?,
            }
        };
        if v.is_nan() || v < 0.0 {
            return Err(PointsError::Negative(t.into()));
        }
        Ok(v)
    };
    let mut out: Vec<f64> = Vec::new();
    let push = |v: f64, out: &mut Vec<f64>| -> Result<(), PointsError> {
        if !out.contains(&v) {
            if out.len() == MAX_POINTS {
                return Err(PointsError::TooMany(s.into()));
            }
            out.push(v);
        }
        Ok(())
    };
    for item in s.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(PointsError::EmptyItem(s.into()));
        }
        let Some((a, rest)) = item.split_once("..") else {
            push(number(item)?, &mut out)?;
            continue;
        };
        let (b, step) = match rest.find(['x', '+']) {
            Some(i) => (&rest[..i], Some((&rest[i..i + 1], &rest[i + 1..]))),
            None => (rest, None),
        };
        let (a, b) = (number(a)?, number(b)?);
        if !(a <= b && b.is_finite()) {
            return Err(PointsError::Downward(item.into()));
        }
        let (times, by) = match step {
            None => (true, 2.0),
            Some((op, f)) => (
                op == "x",
                f.trim().parse::<f64>().map_err(|_| PointsError::Step {
                    item: item.into(),
                    step: f.into(),
                })?,
            ),
        };
        if times && !(by > 1.0 && a > 0.0) {
            return Err(PointsError::Factor(item.into()));
        }
        if !(times || by > 0.0 && (b - a) / by < 1e6) {
            return Err(PointsError::NonPositiveStep(item.into()));
        }
        let mut v = a;
        while v <= b * (1.0 + 1e-9) {
            let x = if whole { v.round() } else { round_sig(v, 12) };
            push(x, &mut out)?;
            v = if times { v * by } else { v + by };
        }
    }
    Ok(out)
}

/// `v` to `digits` significant digits (12 makes `0.1 + 0.2` print as `0.3`).
fn round_sig(v: f64, digits: i32) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_scales_stops_or_is_undecided_by_its_interval() {
        // Twice the load for 48% more: scaled, whatever the noise of ±5% each.
        let g = judge_step(100.0, Some(0.05), 148.0, Some(0.05), 2.0).unwrap();
        assert_eq!(g.verdict, StepVerdict::Scaled);
        assert!((g.needed - 0.1).abs() < 1e-12);
        // 1% more: stopped with ±5% (the gain's interval tops out near 8%)...
        let g = judge_step(100.0, Some(0.05), 101.0, Some(0.05), 2.0).unwrap();
        assert_eq!(g.verdict, StepVerdict::Stopped);
        let (lo, hi) = g.interval.unwrap();
        assert!((hi - lo - 2.0 * 1.01 * 0.05 * 2f64.sqrt()).abs() < 1e-9);
        // ...undecided with ±10%, and stopped on point estimates alone.
        let g = judge_step(100.0, Some(0.1), 101.0, Some(0.1), 2.0).unwrap();
        assert_eq!(g.verdict, StepVerdict::Undecided);
        assert_eq!(
            judge_step(100.0, None, 101.0, None, 2.0).unwrap().verdict,
            StepVerdict::Stopped
        );
        // A fourfold step needs 30%.
        assert!((judge_step(100.0, None, 125.0, None, 4.0).unwrap().needed - 0.3).abs() < 1e-12);
        assert_eq!(
            judge_step(100.0, None, 125.0, None, 4.0).unwrap().verdict,
            StepVerdict::Stopped
        );
        assert_eq!(judge_step(0.0, None, 1.0, None, 2.0), None);
        assert_eq!(judge_step(1.0, None, 1.0, None, 1.0), None);
    }

    #[test]
    fn lists_and_ranges() {
        assert_eq!(parse_points("16", true).unwrap(), [16.0]);
        assert_eq!(parse_points("1,4,16", true).unwrap(), [1.0, 4.0, 16.0]);
        assert_eq!(
            parse_points("1..1024x2", true).unwrap(),
            [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0]
        );
        assert_eq!(parse_points("1..8", true).unwrap(), [1.0, 2.0, 4.0, 8.0]);
        assert_eq!(
            parse_points("1..100x4", true).unwrap(),
            [1.0, 4.0, 16.0, 64.0]
        );
        assert_eq!(
            parse_points("10..50+10", false).unwrap(),
            [10.0, 20.0, 30.0, 40.0, 50.0]
        );
        assert_eq!(
            parse_points("0.1..0.5+0.1", false).unwrap(),
            [0.1, 0.2, 0.3, 0.4, 0.5]
        );
        // Rounded geometric steps never repeat a point; items mix and keep their order.
        assert_eq!(
            parse_points("1..4x1.5", true).unwrap(),
            [1.0, 2.0, 3.0] // 1, 1.5→2, 2.25→2 (dropped), 3.375→3
        );
        assert_eq!(
            parse_points("64,1,2..8", true).unwrap(),
            [64.0, 1.0, 2.0, 4.0, 8.0]
        );
        assert_eq!(parse_points("2k,10k", true).unwrap(), [2000.0, 10000.0]);
        assert_eq!(parse_points("inf", false).unwrap(), [f64::INFINITY]);
    }

    #[test]
    fn bad_lists_say_what_is_wrong() {
        for (s, whole, says) in [
            ("1,,4", true, "empty item"),
            ("8..1", true, "goes up"),
            ("1..8x1", true, "factor above 1"),
            ("0..8x2", true, "A > 0"),
            ("1..8+0", true, "positive"),
            ("1..8y2", true, "not a"),
            ("1.5", true, "whole"),
            ("-2", false, "non-negative"),
            ("1..1000000+1", true, "more than 256"),
            ("1..1e300+1e-300", false, "positive"),
            ("abc", false, "not a number"),
        ] {
            let e = parse_points(s, whole).unwrap_err().to_string();
            assert!(e.contains(says), "{s}: {e}");
        }
    }

    fn search(axis: Axis, knee: f64) -> (Vec<f64>, Search) {
        let mut s = Search::new(SearchSpec {
            axis,
            lo: 1.0,
            hi: 1024.0,
            tolerance: 0.05,
            attainment: 0.95,
        });
        let mut probed = Vec::new();
        while let Some(v) = s.next() {
            assert!(probed.len() < 40, "{probed:?}");
            probed.push(v);
            s.record(v, v <= knee);
        }
        (probed, s)
    }

    #[test]
    fn a_search_doubles_then_bisects_to_the_knee() {
        let (probed, s) = search(Axis::Concurrency, 77.0);
        assert_eq!(
            probed,
            [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 96.0, 80.0, 72.0, 76.0, 78.0]
        );
        // 76 passed, 78 missed: 2 apart, within 5% of 76.
        assert_eq!((s.passed, s.failed), (Some(76.0), Some(78.0)));
        let (_, s) = search(Axis::Concurrency, 9.0);
        assert_eq!((s.passed, s.failed), (Some(9.0), Some(10.0)));
        // Within 5% of a large load is enough.
        let (probed, s) = search(Axis::Concurrency, 700.0);
        let (p, f) = (s.passed.unwrap(), s.failed.unwrap());
        assert!(
            p <= 700.0 && f > 700.0 && f - p <= (p * 0.05).floor(),
            "{p} {f}"
        );
        assert!(probed.len() < 20);
        // Every load passes: up to the top of the range, and no further.
        let (probed, s) = search(Axis::Concurrency, 5000.0);
        assert_eq!(probed.last(), Some(&1024.0));
        assert_eq!((s.passed, s.failed), (Some(1024.0), None));
        // The lowest load misses: one probe.
        let (probed, s) = search(Axis::Concurrency, 0.5);
        assert_eq!((probed, s.passed), (vec![1.0], None));
        // A rate brackets within 5% too.
        let (_, s) = search(Axis::RequestRate, 37.3);
        let (p, f) = (s.passed.unwrap(), s.failed.unwrap());
        assert!(p <= 37.3 && f > 37.3 && (f - p) / p <= 0.05, "{p} {f}");
    }

    #[test]
    fn automatic_rates_are_spaced_evenly_between_the_two_throughputs() {
        // GuideLLM's: numpy.linspace(low, high, n + 1)[1:], the last at the saturated rate.
        assert_eq!(auto_rates(2.0, 12.0, 4), [4.5, 7.0, 9.5, 12.0]);
        assert_eq!(auto_rates(1.234, 100.0, 1), [100.0]);
        assert_eq!(auto_rates(0.31, 0.97, 2), [0.64, 0.97]);
    }

    #[test]
    fn points_name_their_folder_and_set_their_flag() {
        let p = Point {
            axis: Axis::RequestRate,
            value: 2.5,
        };
        assert_eq!(p.name(), "request_rate_2.5");
        assert_eq!(p.label(), "request rate 2.5/s");
        let c = Point {
            axis: Axis::Concurrency,
            value: 16.0,
        };
        assert_eq!(c.name(), "concurrency_16");
        let mut spec = crate::plan::tests::spec();
        c.apply(&mut spec);
        assert_eq!(spec.load.concurrency, Some(16));
        p.apply(&mut spec);
        assert_eq!(spec.load.request_rate, Some(2.5));
        let isl = Point {
            axis: Axis::InputSequenceLength,
            value: 200.0,
        };
        isl.apply(&mut spec);
        assert_eq!(spec.workload.isl_mean, 200);
        assert_eq!(isl.name(), "input_sequence_length_200");
        assert!(isl.axis.is_workload() && !c.axis.is_workload());
    }
}
