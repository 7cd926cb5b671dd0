//! The run plan: what was asked, and what was prepared from it before any thread starts.
//!
//! The [`Spec`] is what the user asked, in plain types (the command line builds it from the
//! flags; nothing here knows about the flag parser): serializable, so it is written to the
//! artifacts as `input_config` (secrets redacted), and re-runnable. [`Plan::build`] turns each part of it
//! into a ready part, in order: the [`target`] (address resolved, TLS set up, the request head
//! fixed), the [`workload`] (tokenizer loaded, every request's bytes built), the [`load`]
//! (send times drawn), the [`output`] (artifact folder). Each part validates its own flags and
//! is tested on its own. Shards receive the plan read-only.

pub mod load;
pub mod nodes;
pub mod output;
pub mod sweep;
pub mod target;
pub mod workload;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

pub use load::{parse_slo, Load, LoadSpec, Slo, SloError, SloMetric};
pub use output::{Output, OutputSpec};
pub use target::{Endpoint, Target, TargetSpec};
pub use workload::{Workload, WorkloadSpec};

use crate::runtime::Driver;
use crate::workload::WorkloadError;

/// A flag or input that cannot be used. Shown as one line; the process exits with 2.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A flag's value is out of range or inconsistent with another.
    #[error("{0}")]
    Flag(String),
    /// The URL cannot be used.
    #[error("--url {0}")]
    Url(crate::endpoint::UrlError),
    /// `--cpus` is not a CPU list.
    #[error(transparent)]
    Cpus(#[from] crate::cpus::ListError),
    /// The request template cannot be sent.
    #[error("--request-template {name}: {source}")]
    Template {
        /// The file, or `(inline)`.
        name: String,
        /// What is wrong with it.
        source: crate::api::TemplateError,
    },
    /// This node's place in a load split across nodes cannot be one.
    #[error(transparent)]
    Nodes(#[from] nodes::NodesError),
    /// Preparing prompts or the tokenizer failed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The images and audio asked for take more memory than a run prepares.
    #[error(transparent)]
    MediaBudget(#[from] crate::workload::MediaBudget),
    /// TLS settings are unusable.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
}

/// A value that must never reach an artifact or a log: an API key, a header line. It
/// serializes as `<redacted>` and prints as `<redacted>`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // A header keeps its name, which is no secret and tells what was sent.
        match self.0.split_once(':') {
            Some((name, _)) if !name.contains(' ') => {
                s.serialize_str(&format!("{}: <redacted>", name.trim()))
            }
            _ => s.serialize_str("<redacted>"),
        }
    }
}

/// What the flags say about the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineSpec {
    /// Shard threads (default: decided from the work and the host).
    pub shards: Option<usize>,
    /// CPUs to pin shards to.
    pub cpus: Option<Vec<usize>>,
    /// Do not pin or restrict shards.
    pub no_pin: bool,
    /// I/O driver.
    pub driver: Driver,
    /// io_uring submission queue entries per shard.
    pub ring_entries: u32,
    /// Stamp events with the kernel's receive time (plain http).
    pub kernel_timestamps: bool,
    /// Processes to run the load in (default: as the open-files limit needs).
    #[serde(default)]
    pub processes: Option<u64>,
}

/// Everything the user asked for a run, in plain types.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// The server and the endpoint.
    pub target: TargetSpec,
    /// How much load, for how long.
    pub load: LoadSpec,
    /// Prompts, outputs and the tokenizer.
    pub workload: WorkloadSpec,
    /// Where results go.
    pub output: OutputSpec,
    /// Threads, CPUs and I/O.
    pub engine: EngineSpec,
}

/// A run, ready to go: the spec, and each part prepared from it.
#[derive(Debug, Clone)]
pub struct Plan {
    /// What was asked.
    pub spec: Spec,
    /// The server, ready.
    pub target: Target,
    /// The requests, ready.
    pub workload: Workload,
    /// The load, with its send times drawn.
    pub load: Load,
    /// Where results go.
    pub output: Output,
}

/// io_uring's largest submission queue.
const MAX_RING_ENTRIES: u32 = 32_768;

impl Plan {
    /// Every check the flags allow before anything is made, so that a conflict or a plan over
    /// a budget is said at once, not after minutes of preparing prompts: the engine's flags,
    /// the target's, the workload's, the load's, and what they plan together (requests, with
    /// every session's turns counted; bytes). Returns the spec as it will be prepared, and
    /// the memory its requests are expected to take at the peak of preparing them (bytes; 0
    /// for a file's, known only once read).
    pub fn check(spec: &Spec) -> Result<(Spec, u64), PlanError> {
        Plan::checked(spec, true).map(|c| (c.0, c.2.bytes))
    }

    /// [`Plan::check`], with the target it built and the workload's budget.
    fn checked(
        spec: &Spec,
        with_load: bool,
    ) -> Result<(Spec, Target, workload::Budget), PlanError> {
        if spec.engine.shards == Some(0) {
            return Err(PlanError::Flag("--shards must be at least 1".into()));
        }
        if !(1..=MAX_RING_ENTRIES).contains(&spec.engine.ring_entries) {
            return Err(PlanError::Flag(format!(
                "--ring-entries {}: must be from 1 to {MAX_RING_ENTRIES}",
                spec.engine.ring_entries
            )));
        }
        let target = Target::build(&spec.target)?;
        if spec.load.user_centric.is_some() && spec.workload.session_turns_mean.is_none() {
            return Err(PlanError::Flag(
                "--user-centric-rate runs users' multi-turn sessions: give --session-turns-mean"
                    .into(),
            ));
        }
        let warm_prefill = spec.load.warmup_phase.and_then(|w| w.prefill);
        if let Some(p) = spec
            .load
            .prefill
            .map(|p| p.cap)
            .into_iter()
            .chain(warm_prefill)
            .min()
        {
            if let Some(n) = spec.engine.shards.filter(|n| *n as u64 > p) {
                return Err(PlanError::Flag(format!(
                    "--shards {n} is more than the prefill cap {p}: each shard needs at least \
                     one prefill place"
                )));
            }
        }
        if spec.load.prefill.is_some() && !target.streaming {
            return Err(PlanError::Flag(
                "--prefill-concurrency needs --streaming: a place is given back at the first \
                 token, which only a stream shows"
                    .into(),
            ));
        }
        if let Some(slice) = spec.output.slice_ns {
            let run = spec.load.benchmark_duration_ns.unwrap_or(0);
            let most = output::MAX_SLICES;
            if slice == 0 || run / slice > most {
                return Err(PlanError::Flag(format!(
                    "--slice-duration {:.3}s: give a length above 0 that cuts the run into at \
                     most {most} slices",
                    slice as f64 / 1e9
                )));
            }
        }
        Workload::check(&spec.workload)?;
        if with_load && !spec.workload.fixed_schedule {
            Load::build(&spec.load, spec.workload.random_seed, None)?;
        }
        let mut spec = spec.clone();
        if spec.workload.input_file.is_none() && spec.workload.sends_at_most.is_none() {
            spec.workload.sends_at_most = load::request_bound(&spec.load);
        }
        let budget = spec.workload.budget(&target.head)?;
        if spec.workload.session_turns_mean.is_some() {
            if let Some(sessions) = load::request_bound(&spec.load) {
                let requests = sessions as f64 * budget.turns;
                if requests > load::MAX_REQUESTS as f64 {
                    return Err(PlanError::Flag(format!(
                        "this load plans {sessions} sessions of about {:.0} turns, {requests:.3e} \
                         requests; a run holds at most {}: lower --request-count or \
                         --session-turns-mean",
                        budget.turns,
                        load::MAX_REQUESTS
                    )));
                }
            }
        }
        Ok((spec, target, budget))
    }

    /// Validates the spec and prepares every part.
    pub fn build(spec: Spec) -> Result<Plan, PlanError> {
        // The load is built below: its checks need not run twice.
        let (spec, target, budget) = Plan::checked(&spec, false)?;
        let mut workload = Workload::prepare(&spec.workload, &target, budget)?;
        let load = Load::build(&spec.load, spec.workload.random_seed, workload.trace.take())?;
        if let Some(w) = &load.warm {
            if workload.dataset.stream.is_some() && w.offsets.is_none() && w.count.is_none() {
                return Err(PlanError::Flag(
                    "a file this large is streamed from disk, its requests built ahead in the \
                     order they are sent: a closed-loop warm-up needs --warmup-request-count \
                     with --warmup-duration"
                        .into(),
                ));
            }
        }
        // Sessions start at a rate (each then runs its turns), or in a closed loop; a trace's
        // lines are single requests.
        if workload.sessions.is_some() && load.offsets.is_some() && load.rate.is_none() {
            return Err(PlanError::Flag("multi-turn sessions are made of synthetic prompts: drop --fixed-schedule and --input-file".into()));
        }
        let output = Output::build(
            &spec.output,
            &target.model,
            target.kind.name(),
            &load.mode(),
        );
        Ok(Plan {
            spec,
            target,
            workload,
            load,
            output,
        })
    }

    /// The configuration as written to the artifacts: the spec (secrets redacted), with what
    /// it resolved to.
    pub fn input_config(&self) -> Value {
        let mut v = serde_json::to_value(&self.spec).expect("the spec serializes");
        v["resolved"] = serde_json::json!({
            "url": self.target.endpoint.url(),
            "address": self.target.endpoint.addr.to_string(),
            "path": self.target.head.path,
            "streaming": self.target.streaming,
            "tokenizer": self.workload.tokenizer.source,
            "concurrency": (self.load.concurrency != u64::MAX).then_some(self.load.concurrency),
            "request_count": self.load.request_count,
            "prompts": self.workload.dataset.len(),
            "dataset_streamed": self.workload.dataset.stream.is_some(),
        });
        v
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A spec with every part at its tests' defaults.
    pub(crate) fn spec() -> Spec {
        Spec {
            target: target::tests::spec("http://127.0.0.1:9"),
            load: load::tests::spec(),
            workload: workload::tests::workload_spec(),
            output: OutputSpec {
                artifact_dir: None,
                progress: false,
                dashboard: false,
                gates: Vec::new(),
                allow_client_limited: false,
                slice_ns: None,
                show_trace_timing: false,
                progress_every_ns: output::DEFAULT_PROGRESS_EVERY_NS,
                progress_json: false,
                failed_request_threshold: None,
            },
            engine: EngineSpec {
                shards: None,
                cpus: None,
                no_pin: false,
                driver: crate::runtime::Driver::Auto,
                ring_entries: 256,
                kernel_timestamps: true,
                processes: None,
            },
        }
    }

    #[test]
    fn secrets_serialize_redacted_and_keep_header_names() {
        let j = |s: &str| serde_json::to_string(&Secret(s.into())).unwrap();
        assert_eq!(j("sk-123"), r#""<redacted>""#);
        assert_eq!(j("X-Api-Key: sk-123"), r#""X-Api-Key: <redacted>""#);
        assert_eq!(j("Authorization Bearer sk-123"), r#""<redacted>""#);
        assert_eq!(format!("{:?}", Secret("sk-1".into())), "<redacted>");
        let back: Secret = serde_json::from_str(r#""sk-9""#).unwrap();
        assert_eq!(back.0, "sk-9");
    }
}
