//! The commands, as the binary runs them: parse, plan, run, report.
//!
//! Errors that stop a run before or without any measurement come back as [`Fatal`]: one clear
//! line for the user and exit code 2. A run that measured something always writes its
//! artifacts, even when requests failed or the user pressed Ctrl-C.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::cli::{Cli, Command, ProfileArgs, SimArgs};
use crate::clock::unix_time_secs;
use crate::plan::RunPlan;
use crate::report::{self, export, Report};

/// A run that could not measure anything, with the reason.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Fatal(pub String);

impl Fatal {
    fn from(e: impl std::fmt::Display) -> Fatal {
        Fatal(e.to_string())
    }
}

/// What a finished profile run produced.
pub struct ProfileResult {
    /// The merged report.
    pub report: Report,
    /// Where the artifacts were written.
    pub artifact_dir: std::path::PathBuf,
    /// The console text that was printed.
    pub console: String,
}

/// Runs a parsed command line. `stop` is set by Ctrl-C.
pub fn run(cli: Cli, stop: Arc<AtomicBool>) -> Result<(), Fatal> {
    match cli.command {
        Command::Profile(args) => profile(&args, stop, true).map(|_| ()),
        Command::Sim(args) => serve_sim(&args, stop),
    }
}

fn serve_sim(args: &SimArgs, stop: Arc<AtomicBool>) -> Result<(), Fatal> {
    let handle = crate::sim::start(args).map_err(Fatal::from)?;
    eprintln!(
        "ringperf sim: serving model {:?} on http://{} ({} driver, {} shard(s); ttft {}, itl {}); Ctrl-C stops",
        args.model, handle.addr, handle.driver, args.shards, args.ttft, args.itl
    );
    // The chosen port on stdout alone, for scripts that start the simulator on port 0.
    let _ = writeln!(std::io::stdout(), "{}", handle.addr.port());
    let _ = std::io::stdout().flush();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (requests, events) = handle.served();
    handle.stop();
    eprintln!("ringperf sim: served {requests} requests, {events} events");
    Ok(())
}

/// Runs `profile`: starts the in-process simulator when asked, plans, runs, reports and writes
/// the artifacts. `print` sends the table to stdout.
pub fn profile(
    args: &ProfileArgs,
    stop: Arc<AtomicBool>,
    print: bool,
) -> Result<ProfileResult, Fatal> {
    let mut args = args.clone();
    let mut sim_cpus = Vec::new();
    let sim = match &args.sim {
        Some(flags) => {
            let mut sim_args = SimArgs::parse_inline(flags).map_err(|e| {
                Fatal(format!(
                    "--sim: {}",
                    e.to_string().lines().next().unwrap_or("")
                ))
            })?;
            sim_args.bind = "127.0.0.1:0".into();
            sim_args.model = args.target.model.clone();
            // Same host, same cores: unless told otherwise, the simulator gets the first CPUs
            // to itself and the client's shards are placed on the others.
            let cpus = crate::plan::usable_cpus();
            if sim_args.cpus.is_none()
                && args.engine.cpus.is_none()
                && !args.engine.no_pin
                && cpus.len() > sim_args.shards
            {
                sim_cpus = cpus[..sim_args.shards].to_vec();
                sim_args.cpus = Some(crate::engine::placement::cpu_list(&sim_cpus));
            }
            let h = crate::sim::start(&sim_args).map_err(Fatal::from)?;
            eprintln!(
                "ringperf: benchmarking the built-in simulator on http://{} (ttft {}, itl {}, max batch {}, CPUs {})",
                h.addr,
                sim_args.ttft,
                sim_args.itl,
                if sim_args.max_batch == 0 {
                    "unlimited".to_string()
                } else {
                    sim_args.max_batch.to_string()
                },
                sim_args.cpus.as_deref().unwrap_or("any"),
            );
            args.target.url = format!("http://{}", h.addr);
            Some(h)
        }
        None => None,
    };
    let mut plan = RunPlan::build(&args).map_err(Fatal::from)?;
    plan.placement.reserved = sim_cpus;
    eprintln!("ringperf: tokenizer: {}", plan.tokenizer.source);
    let placement = crate::engine::place(&plan).map_err(Fatal)?;
    eprintln!("ringperf: shards: {}", placement.reason);
    let plan = Arc::new(plan);
    let telemetry =
        crate::telemetry::Telemetry::start(&args.telemetry, &plan, &placement).map_err(Fatal)?;
    let start = unix_time_secs();
    let probe = sim.as_ref().map(|h| h.in_flight_probe());
    let out = crate::engine::run(plan.clone(), placement, stop, probe).map_err(Fatal::from)?;
    let end = unix_time_secs();
    let settings = report::Settings {
        rate: plan.rate,
        slos: plan.slos.clone(),
        // The concurrency a closed loop holds steady (not while ramping, not in sessions,
        // whose places also hold the pauses between turns).
        concurrency: (plan.offsets.is_none() && plan.ramp_ns == 0 && plan.sessions.is_none())
            .then_some(plan.concurrency),
        kernel_stamps: plan.kernel_timestamps && plan.tls.is_none(),
    };
    let mut report = report::build(out, &settings);
    report.telemetry = Some(telemetry.finish(
        report.tx_ns,
        report.ty_ns,
        report.output_tokens,
        report.completed,
        report.output_tps(),
        args.telemetry.gpu_price_eur_hour,
    ));
    drop(sim);
    let title = match (plan.rate, &plan.offsets, plan.concurrency) {
        (Some(r), _, _) => format!(
            "ringperf | LLM Metrics | {} | request rate {r}/s",
            plan.model
        ),
        (None, Some(_), _) => format!("ringperf | LLM Metrics | {} | trace replay", plan.model),
        (None, None, c) => format!("ringperf | LLM Metrics | {} | concurrency {c}", plan.model),
    };
    let console = report::console::render(&report, &title);
    if print {
        let _ = std::io::stdout().write_all(console.as_bytes());
    }
    let times = export::Times { start, end };
    export::write_all(
        &report,
        &plan.artifact_dir,
        &plan.input_config,
        &match &plan.sessions {
            Some(s) => s.inputs_json(),
            None => plan.dataset.inputs_json(),
        },
        &times,
    )
    .map_err(|e| {
        Fatal(format!(
            "writing artifacts to {}: {e}",
            plan.artifact_dir.display()
        ))
    })?;
    if print {
        eprintln!("ringperf: artifacts in {}", plan.artifact_dir.display());
    }
    if report.completed == 0 {
        let why = report
            .errors
            .first()
            .map(|e| format!("{} ({}): {}", e.kind, e.count, e.message))
            .unwrap_or_else(|| "no request completed".into());
        return Err(Fatal(format!(
            "nothing was measured: every request failed: {why}"
        )));
    }
    Ok(ProfileResult {
        artifact_dir: plan.artifact_dir.clone(),
        report,
        console,
    })
}
