//! Where the results go.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What the flags say about the output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputSpec {
    /// Artifact folder (default: `artifacts/<model>-openai-<endpoint>-<load>`).
    pub artifact_dir: Option<PathBuf>,
    /// Draw the live progress line (only when stderr is a terminal).
    pub progress: bool,
    /// `--ui dashboard`: the full-terminal view instead of the line.
    #[serde(default)]
    pub dashboard: bool,
    /// `--fail-on` gates.
    pub gates: Vec<Gate>,
    /// A client-limited run does not fail the gates.
    pub allow_client_limited: bool,
    /// `--slice-duration`: figures per time slice of this length (ns).
    #[serde(default)]
    pub slice_ns: Option<u64>,
    /// `--show-trace-timing`: print the HTTP phases under the table.
    #[serde(default)]
    pub show_trace_timing: bool,
    /// `--progress-interval`: how often a progress line is logged when stderr is no
    /// terminal (ns; 0: never).
    #[serde(default = "default_progress_every")]
    pub progress_every_ns: u64,
    /// `--progress-format json`: those lines as JSON objects.
    #[serde(default)]
    pub progress_json: bool,
    /// `--failed-request-threshold` (AIPerf's): stop the run when more than this share of
    /// its finished measured requests failed, and fail it (exit 3).
    #[serde(default)]
    pub failed_request_threshold: Option<f64>,
}

/// The progress log's interval when none is given: 10 s.
pub const DEFAULT_PROGRESS_EVERY_NS: u64 = 10_000_000_000;

fn default_progress_every() -> u64 {
    DEFAULT_PROGRESS_EVERY_NS
}

/// The most time slices one run writes (`--slice-duration`): a slice shorter than a timed run
/// / this is refused up front.
pub const MAX_SLICES: u64 = 10_000;

/// The output, decided.
#[derive(Debug, Clone)]
pub struct Output {
    /// Artifact folder.
    pub artifact_dir: PathBuf,
    /// Draw the live progress line.
    pub progress: bool,
    /// Draw the dashboard instead (when `progress`).
    pub dashboard: bool,
    /// Log a progress line this often when stderr is no terminal (ns; 0: never).
    pub progress_every_ns: u64,
    /// Log it as JSON.
    pub progress_json: bool,
    /// See [`OutputSpec::failed_request_threshold`].
    pub failed_request_threshold: Option<f64>,
    /// What the live line calls this run (a sweep's point and run).
    pub title: String,
}

impl Output {
    /// The artifact folder: as given, or named after the model, the endpoint and the load
    /// (`mode`, e.g. `concurrency8`).
    pub fn build(s: &OutputSpec, model: &str, endpoint: &str, mode: &str) -> Output {
        let artifact_dir = s.artifact_dir.clone().unwrap_or_else(|| {
            let model = model.replace(['/', '\\', ':'], "_");
            PathBuf::from("artifacts").join(format!("{model}-openai-{endpoint}-{mode}"))
        });
        Output {
            artifact_dir,
            progress: s.progress,
            dashboard: s.progress && s.dashboard,
            progress_every_ns: if s.progress { s.progress_every_ns } else { 0 },
            progress_json: s.progress_json,
            failed_request_threshold: s.failed_request_threshold,
            title: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_folder_names_model_endpoint_and_load() {
        let s = OutputSpec {
            artifact_dir: None,
            progress: true,
            dashboard: false,
            gates: Vec::new(),
            allow_client_limited: false,
            slice_ns: None,
            show_trace_timing: false,
            progress_every_ns: DEFAULT_PROGRESS_EVERY_NS,
            progress_json: false,
            failed_request_threshold: None,
        };
        let o = Output::build(&s, "Qwen/Qwen3-0.6B", "chat", "concurrency8");
        assert_eq!(
            o.artifact_dir,
            PathBuf::from("artifacts/Qwen_Qwen3-0.6B-openai-chat-concurrency8")
        );
        let given = OutputSpec {
            artifact_dir: Some("x".into()),
            progress: false,
            dashboard: false,
            gates: Vec::new(),
            allow_client_limited: false,
            slice_ns: None,
            show_trace_timing: false,
            progress_every_ns: DEFAULT_PROGRESS_EVERY_NS,
            progress_json: false,
            failed_request_threshold: None,
        };
        assert_eq!(
            Output::build(&given, "m", "chat", "c").artifact_dir,
            PathBuf::from("x")
        );
    }
}

/// A comparison in a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cmp {
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
}

impl Cmp {
    /// Whether `a cmp b` holds.
    pub fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
        }
    }
}

/// `--fail-on 'ttft.p99>500ms'`: the run fails when a figure of its JSON crosses a bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    /// As written.
    pub text: String,
    /// The JSON's metric tag (`time_to_first_token`), or `error_rate`.
    pub metric: String,
    /// The statistic (`p99`, `avg`, …).
    pub stat: String,
    /// Fails when `figure cmp bound` holds.
    pub cmp: Cmp,
    /// The bound, in the metric's JSON unit (ms for times).
    pub bound: f64,
    /// The metric is a time (the bound took a time unit, or is in ms).
    pub time: bool,
    /// `warning:CODE`: fails when the run warns with this code (`any`: with any code); the
    /// figure fields are then unused.
    #[serde(default)]
    pub warning: Option<String>,
}

/// Short names people write, to the JSON's tags; and whether the metric is a time.
const METRICS: &[(&[&str], &str, bool)] = &[
    (
        &["ttft", "time_to_first_token"],
        "time_to_first_token",
        true,
    ),
    (
        &["ttfo", "time_to_first_output_token"],
        "time_to_first_output_token",
        true,
    ),
    (
        &["ttst", "time_to_second_token"],
        "time_to_second_token",
        true,
    ),
    (
        &["itl", "tpot", "inter_token_latency"],
        "inter_token_latency",
        true,
    ),
    (&["icl", "inter_chunk_latency"], "inter_chunk_latency", true),
    (
        &["e2e", "e2el", "latency", "request_latency"],
        "request_latency",
        true,
    ),
    (
        &["osl", "output_sequence_length"],
        "output_sequence_length",
        false,
    ),
    (
        &["isl", "input_sequence_length"],
        "input_sequence_length",
        false,
    ),
    (
        &["per_user", "output_token_throughput_per_user"],
        "output_token_throughput_per_user",
        false,
    ),
    (
        &["output_token_throughput", "throughput"],
        "output_token_throughput",
        false,
    ),
    (&["request_throughput"], "request_throughput", false),
    (&["goodput"], "goodput", false),
    (&["error_rate"], "error_rate", false),
    (
        &["error_request_count", "errors"],
        "error_request_count",
        false,
    ),
    (&["request_count"], "request_count", false),
];

/// A `--fail-on` gate that cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--fail-on {gate:?}: {why}")]
pub struct GateError {
    /// The gate as written.
    pub gate: String,
    /// What is wrong with it.
    pub why: GateWhy,
}

/// What is wrong with a gate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GateWhy {
    /// `warning:CODE` with a code ringperf does not have.
    #[error("unknown warning code {0:?} (any, {codes})", codes = warning_codes())]
    WarningCode(String),
    /// No comparison.
    #[error("expected METRIC[.STAT] > VALUE (or >=, <, <=)")]
    Shape,
    /// A metric no gate can bound.
    #[error("unknown metric {0:?} ({METRIC_NAMES})")]
    Metric(String),
    /// A statistic the summary does not have.
    #[error("unknown statistic {0:?} ({stats})", stats = STATS.join(", "))]
    Statistic(String),
    /// A bound that is not a number.
    #[error("{0:?} is not a number")]
    NotANumber(String),
    /// A unit that does not fit the metric (a time on a count, a percentage on a time).
    #[error("unit {unit:?} does not fit {metric}")]
    Unit {
        /// The unit as written.
        unit: String,
        /// The metric's name.
        metric: String,
    },
}

/// The statistics a gate can bound.
const STATS: [&str; 14] = [
    "avg", "min", "max", "std", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99",
    "p99_9",
];

/// The metric names a gate's error lists (the short ones where a metric has several).
const METRIC_NAMES: &str = "ttft, ttfo, ttst, itl, icl, e2e, osl, isl, per_user, throughput, \
                            request_throughput, goodput, error_rate, errors, request_count";

fn warning_codes() -> String {
    let codes: Vec<&str> = crate::warning::Code::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    codes.join(", ")
}

impl Gate {
    /// Parses `metric[.stat] (>|>=|<|<=) value[unit]`: `ttft.p99>500ms`, `error_rate>0.01`,
    /// `request_throughput<10`.
    pub fn parse(s: &str) -> Result<Gate, GateError> {
        let bad = |why| GateError {
            gate: s.into(),
            why,
        };
        let t = s.replace(' ', "");
        if let Some(code) = t.strip_prefix("warning:") {
            if code != "any" && crate::warning::Code::parse(code).is_none() {
                return Err(bad(GateWhy::WarningCode(code.into())));
            }
            return Ok(Gate {
                text: s.to_string(),
                metric: String::new(),
                stat: String::new(),
                cmp: Cmp::Gt,
                bound: 0.0,
                time: false,
                warning: Some(code.to_string()),
            });
        }
        let (at, cmp, width) = [
            (">=", Cmp::Ge),
            ("<=", Cmp::Le),
            (">", Cmp::Gt),
            ("<", Cmp::Lt),
        ]
        .iter()
        .find_map(|(op, c)| t.find(op).map(|i| (i, *c, op.len())))
        .ok_or_else(|| bad(GateWhy::Shape))?;
        let (left, right) = (&t[..at], &t[at + width..]);
        let (name, stat) = left.split_once('.').unwrap_or((left, "avg"));
        let (_, metric, time) = METRICS
            .iter()
            .find(|(names, _, _)| names.contains(&name))
            .ok_or_else(|| bad(GateWhy::Metric(name.into())))?;
        if !STATS.contains(&stat) {
            return Err(bad(GateWhy::Statistic(stat.into())));
        }
        let split = right
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e'))
            .unwrap_or(right.len());
        let (num, unit) = right.split_at(split);
        let v: f64 = num
            .parse()
            .map_err(|_| bad(GateWhy::NotANumber(num.into())))?;
        let bound = match (unit, *time) {
            ("", _) => v,
            ("%", false) => v / 100.0,
            ("ns", true) => v / 1e6,
            ("us" | "µs", true) => v / 1e3,
            ("ms", true) => v,
            ("s", true) => v * 1e3,
            (u, _) => {
                return Err(bad(GateWhy::Unit {
                    unit: u.into(),
                    metric: metric.to_string(),
                }))
            }
        };
        Ok(Gate {
            text: s.to_string(),
            metric: metric.to_string(),
            stat: stat.to_string(),
            cmp,
            bound,
            time: *time,
            warning: None,
        })
    }
}

#[cfg(test)]
mod gate_tests {
    use super::*;

    #[test]
    fn gates_parse_with_units_and_short_names() {
        let g = Gate::parse("ttft.p99>500ms").unwrap();
        assert_eq!(
            (g.metric.as_str(), g.stat.as_str(), g.cmp, g.bound),
            ("time_to_first_token", "p99", Cmp::Gt, 500.0)
        );
        assert_eq!(Gate::parse("itl.p50 >= 2s").unwrap().bound, 2000.0);
        assert_eq!(Gate::parse("e2e.max>250us").unwrap().bound, 0.25);
        let g = Gate::parse("error_rate>1%").unwrap();
        assert_eq!(
            (g.metric.as_str(), g.stat.as_str(), g.bound),
            ("error_rate", "avg", 0.01)
        );
        assert_eq!(Gate::parse("request_throughput<10").unwrap().cmp, Cmp::Lt);
        for (bad, why) in [
            ("ttft>", "not a number"),
            ("speed.p99>1", "unknown metric"),
            ("ttft.p42>1", "unknown statistic"),
            ("ttft.p99=1", "expected METRIC"),
            ("error_rate>5ms", "does not fit"),
        ] {
            let e = Gate::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(Cmp::Ge.holds(1.0, 1.0) && !Cmp::Gt.holds(1.0, 1.0));
    }
}
