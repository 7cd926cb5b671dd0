//! The commands, as the binary runs them: parse, plan, run, report. One file per command:
//! [`profile`] (one run), [`sweep`] (several loads or repeats), `sim` (the simulator alone),
//! and `tools` (doctor, merge, compare, report, analyze-trace, completions, man). `prepare`
//! holds what every run of a command line shares, set up before its first request.
//!
//! Errors that stop a run before or without any measurement come back as [`Fatal`]: one clear
//! line for the user and exit code 2. A run that measured something always writes its
//! artifacts, even when requests failed or the user pressed Ctrl-C.

use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::cli::{Cli, Command, ProfileArgs};
use crate::plan::sweep::SweepSpec;
use crate::plan::Spec;

mod live;
mod prepare;
mod profile;
mod sim;
mod sweep;
mod tools;
mod workers;

pub use profile::{profile, ProfileResult};
pub use sweep::{search_text, sweep, SweepResult};

/// Why a command could not run, or measured nothing: one line for the user, with the cause
/// kept (`source()`) where another layer's error is behind it.
#[derive(Debug, thiserror::Error)]
pub enum Fatal {
    /// The command line asks for what cannot run, and says what to do instead.
    #[error("{0}")]
    Refused(String),
    /// The flags make no plan.
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    /// A dataset or trace file cannot be read.
    #[error(transparent)]
    Workload(#[from] crate::workload::WorkloadError),
    /// The in-process or stand-alone simulator cannot start.
    #[error(transparent)]
    Sim(#[from] crate::sim::Error),
    /// The shards cannot be placed as asked.
    #[error(transparent)]
    Placement(#[from] crate::engine::placement::Error),
    /// The engine cannot start.
    #[error(transparent)]
    Engine(#[from] crate::engine::Error),
    /// Telemetry cannot start.
    #[error(transparent)]
    Telemetry(#[from] crate::telemetry::Error),
    /// Runs that cannot be merged.
    #[error(transparent)]
    Merge(#[from] crate::report::merge::Error),
    /// The server cannot be used: down, no model list, the probe request failed; `advice`
    /// follows the failure's own line.
    #[error("{failure}{advice}")]
    Server {
        /// What the preflight found.
        #[source]
        failure: Box<crate::preflight::Failure>,
        /// What to do about it, when the command line suggests it (empty otherwise).
        advice: String,
    },
    /// The server lists no model, and none was named.
    #[error("{0} lists no model at /v1/models: name one with -m")]
    NoModel(String),
    /// One point of a sweep makes no plan.
    #[error("{point}: {source}")]
    Point {
        /// The point's label.
        point: String,
        /// Why.
        source: crate::plan::PlanError,
    },
    /// The span receiver cannot listen.
    #[error(transparent)]
    Traces(#[from] crate::otlp::Error),
    /// A file or folder could not be read or written: which, and why.
    #[error("{what}: {source}")]
    Io {
        /// What was being done (`writing PATH`).
        what: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// Every request failed, or the run stopped before the first completed.
    #[error("{0}")]
    NothingMeasured(String),
    /// Stopped before the first request was sent.
    #[error("interrupted before the first request: nothing was sent")]
    Interrupted,
}

impl Fatal {
    /// The process's exit code for this error: 2 for every kind, as documented (a run that
    /// measured and crossed a gate is 3, a merge missing a node 4, a stop 128 + the signal).
    pub fn exit_code(&self) -> i32 {
        match self {
            Fatal::Refused(_)
            | Fatal::Plan(_)
            | Fatal::Workload(_)
            | Fatal::Sim(_)
            | Fatal::Placement(_)
            | Fatal::Engine(_)
            | Fatal::Telemetry(_)
            | Fatal::Merge(_)
            | Fatal::Server { .. }
            | Fatal::NoModel(_)
            | Fatal::Point { .. }
            | Fatal::Traces(_)
            | Fatal::Io { .. }
            | Fatal::NothingMeasured(_)
            | Fatal::Interrupted => 2,
        }
    }

    /// A failed read or write of `what` (`writing PATH`).
    fn io(what: impl Into<String>, source: impl Into<std::io::Error>) -> Fatal {
        Fatal::Io {
            what: what.into(),
            source: source.into(),
        }
    }
}

/// The exit code of a run that crossed a `--fail-on` gate.
pub const GATES_CROSSED: i32 = 3;

/// The exit code of a merge that is missing a node (it still writes what it merged).
pub const MERGE_INCOMPLETE: i32 = 4;

/// A `profile` command line resolved once into plain values: every later step reads these,
/// never clap's flags again.
struct Flags {
    /// The run's spec, before the plan validates it.
    spec: Spec,
    /// One line each, for flags of another tool accepted without effect or mapped.
    notes: Vec<String>,
    /// The load points and repeats.
    sweep: SweepSpec,
    /// GPU and server-metrics telemetry.
    telemetry: crate::telemetry::Config,
    /// `--server-traces`' address, and how long to wait for late spans (ns).
    traces: Option<(String, u64)>,
    /// `--slo-attainment`, for the staircase's verdict.
    slo_attainment: f64,
    /// What a peer's command line asked for beyond the native flags.
    peer: crate::cli::port::Peer,
    /// `--sim`'s flags.
    sim: Option<String>,
    /// Where to serve the live figures (`--live-metrics`).
    live_metrics: Option<std::net::SocketAddr>,
    /// This process's part of a split run, when its parent started it as a worker.
    worker: Option<workers::Worker>,
}

impl Flags {
    fn of(args: &ProfileArgs) -> Result<Flags, Fatal> {
        let (spec, notes) = args.spec_and_notes()?;
        let t = &args.telemetry;
        Ok(Flags {
            spec,
            notes,
            sweep: args.sweep_spec()?,
            telemetry: t.config()?,
            traces: t
                .server_traces
                .clone()
                .map(|addr| (addr, t.server_traces_wait)),
            slo_attainment: args.sweep.slo_attainment,
            peer: args.peer.clone(),
            sim: args.sim.clone(),
            live_metrics: args.output.live_metrics,
            worker: workers::Worker::of_env()?,
        })
    }

    /// A sweep of several loads, or one load run several times.
    fn several(&self) -> bool {
        self.sweep.is_sweep || self.sweep.repeats.runs > 1
    }
}

/// Runs a parsed command line. `stop` is set by Ctrl-C. Returns the exit code of a run that
/// measured: 0, or [`GATES_CROSSED`].
pub fn run(cli: Cli, stop: Arc<AtomicBool>) -> Result<i32, Fatal> {
    // A peer's subcommand parsed by clap alone is translated here.
    let cli = crate::cli::port::resolve(cli).map_err(|e| Fatal::Refused(e.to_string()))?;
    let done = match cli.command {
        Command::Bench(_) | Command::Benchmark(_) | Command::Run(_) | Command::Analyze(_) => {
            unreachable!("translated into profile")
        }
        Command::Profile(args) => {
            install_secrets(&args.target);
            let flags = Flags::of(&args)?;
            let worker = flags.worker.is_some();
            // Whether any gate was crossed, and whether the load was cut short.
            let ran = if let Some(split) = workers::split_of(&flags)? {
                workers::profile(flags, split, &stop).map(|r| (r.gates_crossed, r.cancelled))
            } else if flags.several() {
                sweep::run(flags, stop, true)
                    .map(|r| (r.gates_crossed, r.rows.iter().any(|p| p.cancelled)))
            } else {
                profile::run(flags, stop, !worker).map(|r| {
                    let crossed = r.gates.iter().any(|g| g.failure.is_some());
                    (crossed, r.report.cancelled)
                })
            };
            if worker {
                workers::Worker::done();
            }
            // A stopped run says so in its exit code (128 + the signal, as a shell does),
            // whatever it measured: a script or a CI job can tell it from a finished one.
            if let Some(sig) = crate::sys::interrupted_by() {
                let name = crate::sys::signal_name(sig);
                match ran {
                    Ok((_, true)) => crate::redact::say!(
                        "ringperf: interrupted by {name}: the artifacts hold what was measured \
                         until then"
                    ),
                    Ok((_, false)) => crate::redact::say!(
                        "ringperf: {name} came after the load had finished: the artifacts hold \
                         every request (the warnings say what was cut short)"
                    ),
                    Err(e) => crate::redact::say!("ringperf: interrupted by {name}: {e}"),
                }
                return Ok(128 + sig);
            }
            return Ok(if ran?.0 { GATES_CROSSED } else { 0 });
        }
        Command::Sim(args) => sim::serve(&args, stop),
        Command::Doctor(a) => tools::doctor(&a),
        Command::Merge { dirs, artifact_dir } => return tools::merge(&dirs, &artifact_dir),
        Command::AnalyzeTrace {
            input_file,
            block_size,
            output_file,
        } => tools::analyze_trace(&input_file, block_size, output_file.as_deref()),
        Command::Compare {
            dirs,
            labels,
            artifact_dir,
        } => tools::compare(&dirs, &labels, &artifact_dir),
        Command::Report { dir } => {
            let page = crate::report::html::write(&dir).map_err(|e| {
                Fatal::io(format!("writing the HTML report in {}", dir.display()), e)
            })?;
            crate::redact::say!("ringperf: wrote {}", page.display());
            Ok(())
        }
        Command::Completions { shell } => tools::completions(shell),
        Command::Man { subcommand } => tools::man(subcommand.as_deref()),
    };
    done.map(|()| 0)
}

/// Makes every secret on the command line (or in its environment) one that nothing ringperf
/// prints or writes can show, before anything can.
fn install_secrets(t: &crate::cli::TargetArgs) {
    crate::redact::install(crate::plan::target::secrets_of(
        t.api_key.as_deref(),
        t.url.iter().map(String::as_str),
        t.headers.iter().map(String::as_str),
    ));
}

/// Writes `bytes` to stdout; a reader that stopped reading (`| head`) is no error.
fn write_out(bytes: &[u8]) -> Result<(), Fatal> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.map_err(|e| Fatal::io("writing to stdout", e)),
    }
}

/// Writes `report.html` and `plots/` for what `dir` holds.
fn write_report(dir: &std::path::Path, print: bool) -> Result<(), Fatal> {
    let page = crate::report::html::write(dir)
        .map_err(|e| Fatal::io(format!("writing the HTML report in {}", dir.display()), e))?;
    if print {
        crate::redact::say!("ringperf: report: {}", page.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fatal_error_is_one_line_that_keeps_its_cause() {
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e = Fatal::io("writing /x/profile.json", denied);
        assert_eq!(e.to_string(), "writing /x/profile.json: permission denied");
        let cause = std::error::Error::source(&e).expect("the cause");
        assert_eq!(
            cause.downcast_ref::<std::io::Error>().map(|c| c.kind()),
            Some(std::io::ErrorKind::PermissionDenied)
        );
        // Another layer's error keeps its type and its own words.
        let p: Fatal =
            crate::plan::PlanError::Flag("--concurrency must be at least 1".into()).into();
        assert!(matches!(p, Fatal::Plan(crate::plan::PlanError::Flag(_))));
        assert_eq!(p.to_string(), "--concurrency must be at least 1");
        assert_eq!(
            (e.exit_code(), p.exit_code(), Fatal::Interrupted.exit_code()),
            (2, 2, 2)
        );
    }
}
