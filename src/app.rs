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
use crate::plan::{Plan, Spec};
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

/// The exit code of a run that crossed a `--fail-on` gate.
pub const GATES_CROSSED: i32 = 3;

/// What a finished profile run produced.
pub struct ProfileResult {
    /// The `--fail-on` gates, judged (empty without gates).
    pub gates: Vec<report::gates::Judged>,
    /// The merged report.
    pub report: Report,
    /// Where the artifacts were written.
    pub artifact_dir: std::path::PathBuf,
    /// The console text that was printed.
    pub console: String,
}

/// Runs a parsed command line. `stop` is set by Ctrl-C. Returns the exit code of a run that
/// measured: 0, or [`GATES_CROSSED`].
pub fn run(cli: Cli, stop: Arc<AtomicBool>) -> Result<i32, Fatal> {
    let done = match cli.command {
        Command::Profile(args) => {
            let r = profile(&args, stop, true)?;
            let crossed = r.gates.iter().any(|g| g.failure.is_some());
            return Ok(if crossed { GATES_CROSSED } else { 0 });
        }
        Command::Sim(args) => serve_sim(&args, stop),
        Command::Doctor(a) => {
            let checks = crate::doctor::run(crate::doctor::Planned {
                streams: a.concurrency,
                in_process_sim: a.sim,
            });
            let _ = std::io::stdout().write_all(crate::doctor::render(&checks).as_bytes());
            let blockers = checks
                .iter()
                .filter(|c| c.level == crate::doctor::Level::Fail)
                .count();
            if blockers > 0 {
                return Err(Fatal(format!(
                    "doctor: {blockers} blocker(s) for this run; the FAIL lines say how to fix them"
                )));
            }
            Ok(())
        }
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "ringperf", &mut std::io::stdout());
            Ok(())
        }
        Command::Man { subcommand } => {
            use clap::CommandFactory;
            let cmd = Cli::command();
            let cmd = match subcommand.as_deref() {
                None => cmd,
                Some(name) => cmd
                    .find_subcommand(name)
                    .cloned()
                    .ok_or_else(|| Fatal(format!("man: no subcommand {name:?}")))?
                    .name(format!("ringperf-{name}")),
            };
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut page)
                .map_err(Fatal::from)?;
            std::io::stdout().write_all(&page).map_err(Fatal::from)
        }
    };
    done.map(|()| 0)
}

fn serve_sim(args: &SimArgs, stop: Arc<AtomicBool>) -> Result<(), Fatal> {
    let cfg = args.config().map_err(Fatal::from)?;
    let handle = crate::sim::start(&cfg).map_err(Fatal::from)?;
    crate::sys::interrupt_gracefully();
    eprintln!(
        "ringperf sim: serving model {:?} on {}://{} ({} driver, {} shard(s); ttft {}, itl {}); Ctrl-C stops",
        cfg.model,
        if cfg.tls.is_some() { "https" } else { "http" },
        handle.addr,
        handle.driver,
        cfg.shards,
        cfg.ttft,
        cfg.itl
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

/// Starts `profile --sim`'s simulator and points `spec` at it. Unless told otherwise, the
/// simulator gets the first CPUs to itself; those are returned, for the shards to avoid.
fn start_sim(flags: &str, spec: &mut Spec) -> Result<(crate::sim::SimHandle, Vec<usize>), Fatal> {
    let args = SimArgs::parse_inline(flags).map_err(|e| {
        Fatal(format!(
            "--sim: {}",
            e.to_string().lines().next().unwrap_or("")
        ))
    })?;
    let mut cfg = args.config().map_err(Fatal::from)?;
    cfg.bind = "127.0.0.1:0".into();
    cfg.model = spec.target.model.clone();
    let cpus = crate::cpus::usable_cpus();
    let e = &spec.engine;
    if cfg.cpus.is_empty() && e.cpus.is_none() && !e.no_pin && cpus.len() > cfg.shards {
        cfg.cpus = cpus[..cfg.shards].to_vec();
    }
    let h = crate::sim::start(&cfg).map_err(Fatal::from)?;
    eprintln!(
        "ringperf: benchmarking the built-in simulator on http://{} (ttft {}, itl {}, max batch {}, CPUs {})",
        h.addr,
        cfg.ttft,
        cfg.itl,
        if cfg.max_batch == 0 {
            "unlimited".to_string()
        } else {
            cfg.max_batch.to_string()
        },
        if cfg.cpus.is_empty() {
            "any".to_string()
        } else {
            crate::cpus::cpu_list(&cfg.cpus)
        },
    );
    spec.target.url = format!("http://{}", h.addr);
    Ok((h, cfg.cpus))
}

fn preparing(w: &crate::plan::WorkloadSpec) -> String {
    match &w.input_file {
        Some(f) => format!("the requests of {}", f.display()),
        None => format!(
            "{} prompts of about {} tokens",
            w.num_dataset_entries, w.isl_mean
        ),
    }
}

/// Asks the server which models it serves (waiting up to `ready_ns` for it to come up) and
/// takes the first when `-m` named none. Returns the list (empty when it is unknown).
fn choose_model(
    spec: &mut crate::plan::TargetSpec,
    preflight: bool,
    ready_ns: u64,
) -> Result<Vec<String>, Fatal> {
    use crate::preflight::{models, Failure};
    let asked = !spec.model.is_empty();
    if asked && !preflight {
        return Ok(Vec::new());
    }
    let target = crate::plan::Target::build(spec).map_err(Fatal::from)?;
    let timeout = std::time::Duration::from_nanos(spec.connect_timeout_ns);
    let deadline = crate::clock::now_ns().saturating_add(ready_ns);
    let mut said = false;
    let got = loop {
        match models(&target, timeout) {
            // Down, or up but still loading (vLLM answers 503 then): wait when asked to.
            Err(
                e @ (Failure::Down { .. }
                | Failure::Models {
                    status: Some(503), ..
                }),
            ) if crate::clock::now_ns() < deadline => {
                if !said {
                    eprintln!(
                        "ringperf: waiting for {} to come up ({e})",
                        target.endpoint.url()
                    );
                    said = true;
                }
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            other => break other,
        }
    };
    match got {
        Ok(list) if !asked => {
            let Some(first) = list.first() else {
                return Err(Fatal(format!(
                    "{} lists no model at /v1/models: name one with -m",
                    target.endpoint.url()
                )));
            };
            eprintln!(
                "ringperf: model: {first} (the first the server lists{}; -m chooses)",
                if list.len() > 1 {
                    format!(" of {}", list.len())
                } else {
                    String::new()
                }
            );
            spec.model = first.clone();
            Ok(list)
        }
        Ok(list) => {
            if !list.is_empty() && !list.contains(&spec.model) {
                eprintln!(
                    "ringperf: warning: the server lists {}, not {:?}; the probe request will tell",
                    list.join(", "),
                    spec.model
                );
            }
            Ok(list)
        }
        Err(e @ (Failure::Down { .. } | Failure::Transport { .. })) => Err(Fatal(e.to_string())),
        Err(e) if asked => {
            eprintln!("ringperf: note: {e}; going on with -m {}", spec.model);
            Ok(Vec::new())
        }
        Err(e) => Err(Fatal(format!("{e}: name the model with -m"))),
    }
}

/// Results that cannot be written are found out before the run, not after it.
fn check_artifact_dir(dir: &std::path::Path) -> Result<(), Fatal> {
    let probe = dir.join(".ringperf-write-check");
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&probe, b""))
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| {
            Fatal(format!(
                "--artifact-dir {}: cannot write there ({e}); nothing was run",
                dir.display()
            ))
        })
}

/// The host's blockers for this run, found before anything is sent: open files (every
/// connection is one, two with the in-process simulator, which holds the other end) and local
/// ports (each connection holds one).
fn check_host(plan: &Plan, in_process_sim: bool) -> Result<(), Fatal> {
    let p = crate::doctor::Planned {
        streams: plan.load.streams,
        in_process_sim,
    };
    for c in [
        crate::doctor::open_files(p, crate::sys::raise_nofile_limit()),
        crate::doctor::ephemeral_ports(p, crate::doctor::port_range()),
    ] {
        if c.level == crate::doctor::Level::Fail {
            return Err(Fatal(c.detail));
        }
    }
    Ok(())
}

/// What runs against the server before the measured run: the probe request (with
/// `preflight`) and the prefix-cache reset (when asked). Returns the warnings for the report.
fn before_the_run(
    plan: &Plan,
    preflight: bool,
    listed: &[String],
    args: &ProfileArgs,
) -> Result<Vec<String>, Fatal> {
    let mut warnings = Vec::new();
    if preflight {
        let p = crate::preflight::probe(plan).map_err(|e| {
            let served = if listed.is_empty() || listed.contains(&plan.target.model) {
                String::new()
            } else {
                format!(
                    " (the server lists {}; -m names the model)",
                    listed.join(", ")
                )
            };
            Fatal(format!("{e}{served}"))
        })?;
        eprintln!(
            "ringperf: preflight: {} answered the first request in {:.1} ms (not measured)",
            plan.target.endpoint.url(),
            p.first_ns as f64 / 1e6
        );
        if let Some(m) = p.served_model.filter(|m| *m != plan.target.model) {
            warnings.push(format!(
                "the server answered as model {m:?}, not {:?}: it may ignore the model name \
                 (llama.cpp does), so these results are {m:?}'s",
                plan.target.model
            ));
        }
    }
    if args.target.reset_prefix_cache {
        match crate::preflight::reset_prefix_cache(&plan.target) {
            Ok(path) => eprintln!("ringperf: prefix cache emptied (POST {path})"),
            Err(why) => warnings.push(format!(
                "--reset-prefix-cache: the server did not empty its cache ({why})"
            )),
        }
    }
    for w in &warnings {
        eprintln!("ringperf: warning: {w}");
    }
    Ok(warnings)
}

/// Judges the `--fail-on` gates on the run's JSON, says each on stderr, and writes
/// `gates.junit.xml`.
fn judge_gates(
    plan: &Plan,
    report: &Report,
    doc: &serde_json::Value,
    dir: &std::path::Path,
) -> Result<Vec<report::gates::Judged>, Fatal> {
    let out = &plan.spec.output;
    if out.gates.is_empty() {
        return Ok(Vec::new());
    }
    let h = &report.health;
    let limited = h.limited.then_some(h.verdict.as_str());
    let judged = report::gates::judge(&out.gates, doc, limited, out.allow_client_limited);
    for j in &judged {
        match &j.failure {
            Some(f) => eprintln!("ringperf: gate FAILED: {f}"),
            None => eprintln!("ringperf: gate passed: {}", j.name),
        }
    }
    std::fs::write(dir.join("gates.junit.xml"), report::gates::junit(&judged)).map_err(|e| {
        Fatal(format!(
            "writing {}: {e}",
            dir.join("gates.junit.xml").display()
        ))
    })?;
    Ok(judged)
}

/// Runs `profile`: starts the in-process simulator when asked, plans, places, runs, reports
/// and writes the artifacts. `print` sends the table to stdout.
pub fn profile(
    args: &ProfileArgs,
    stop: Arc<AtomicBool>,
    print: bool,
) -> Result<ProfileResult, Fatal> {
    let (startup_from, started) = match crate::clock::process_start_ns() {
        Some(t) => ("process start", t),
        None => ("profile call", crate::clock::now_ns()),
    };
    let (mut spec, notes) = args.spec_and_notes().map_err(Fatal::from)?;
    for n in notes {
        eprintln!("ringperf: note: {n}");
    }
    if args.sim.is_some() && spec.target.model.is_empty() {
        spec.target.model = "ringperf-sim".into();
    }
    let (sim, reserved) = match &args.sim {
        Some(flags) => {
            let (h, cpus) = start_sim(flags, &mut spec)?;
            (Some(h), cpus)
        }
        None => (None, Vec::new()),
    };
    let preflight = sim.is_none() && !args.target.no_preflight;
    let listed = if sim.is_some() {
        Vec::new()
    } else {
        choose_model(&mut spec.target, preflight, args.target.ready_check_timeout)?
    };
    eprintln!("ringperf: preparing {}", preparing(&spec.workload));
    let plan = Plan::build(spec).map_err(Fatal::from)?;
    eprintln!("ringperf: tokenizer: {}", plan.workload.tokenizer.source);
    check_artifact_dir(&plan.output.artifact_dir)?;
    check_host(&plan, sim.is_some())?;
    let preflight_warnings = before_the_run(&plan, preflight, &listed, args)?;
    let placement = crate::engine::place(&plan, &reserved).map_err(Fatal::from)?;
    eprintln!("ringperf: shards: {}", placement.reason);
    let plan = Arc::new(plan);
    let spare = placement.spare_cpu(&crate::cpus::usable_cpus());
    let telemetry_cfg = args.telemetry.config();
    let telemetry =
        crate::telemetry::Telemetry::start(&telemetry_cfg, &plan, spare).map_err(Fatal::from)?;
    let start = unix_time_secs();
    let probe = sim.as_ref().map(|h| h.in_flight_probe());
    crate::sys::interrupt_gracefully();
    let out = crate::engine::run(plan.clone(), placement, stop, probe).map_err(Fatal::from)?;
    let end = unix_time_secs();
    let mut report = report::build(out, &report::Settings::of(&plan));
    report.warnings.splice(0..0, preflight_warnings);
    report.telemetry = Some(telemetry.finish(
        report.tx_ns,
        report.ty_ns,
        report.output_tokens,
        report.completed,
        report.output_tps(),
        telemetry_cfg.gpu_price_eur_hour,
    ));
    drop(sim);
    for s in report.telemetry.iter().flat_map(|t| &t.server_metrics) {
        if let Some(h) = s.prefix_cache_hit_rate.filter(|h| *h > 0.5) {
            report.warnings.push(format!(
                "the server's prefix-cache hit rate was {:.0}%: it had seen most of these \
                 prompts before (shared prefixes, or an earlier run with the same \
                 --random-seed); TTFT is lower than for new prompts. A run that must start cold \
                 needs another seed, --reset-prefix-cache, or a restarted server",
                h * 100.0
            ));
        }
    }
    let load = match (plan.load.rate, &plan.load.offsets) {
        (Some(r), _) => format!("request rate {r}/s"),
        (None, Some(_)) => "trace replay".to_string(),
        (None, None) => format!("concurrency {}", plan.load.concurrency),
    };
    let title = format!("ringperf | LLM Metrics | {} | {load}", plan.target.model);
    let console = report::console::render(&report, &title);
    if print {
        let _ = std::io::stdout().write_all(console.as_bytes());
    }
    let dir = &plan.output.artifact_dir;
    let first_send = report
        .records
        .iter()
        .map(|r| r.start_ns)
        .filter(|t| *t > 0)
        .min();
    let startup_s = first_send.map(|t| t.saturating_sub(started) as f64 / 1e9);
    if let (Some(s), true) = (startup_s, print) {
        eprintln!("ringperf: start-up {s:.3} s ({startup_from} to the first request sent)");
    }
    let times = export::Times {
        start,
        end,
        startup_s,
        startup_from,
    };
    let doc = export::write_all(
        &report,
        dir,
        &plan.input_config(),
        &plan.workload.inputs_json(),
        &times,
    )
    .map_err(|e| Fatal(format!("writing artifacts to {}: {e}", dir.display())))?;
    let gates = judge_gates(&plan, &report, &doc, dir)?;
    if print {
        eprintln!("ringperf: artifacts in {}", dir.display());
    }
    if report.completed == 0 {
        let why = report
            .errors
            .first()
            .map(|e| format!("{} ({}): {}", e.kind, e.count, e.message))
            .unwrap_or_else(|| "no request completed".into());
        // A TLS server closes a plain-text connection without a word.
        let hint = if plan.target.tls.is_none() && why.contains("before any response byte") {
            "; if the server speaks TLS, use https://"
        } else {
            ""
        };
        return Err(Fatal(format!(
            "nothing was measured: every request failed: {why}{hint}"
        )));
    }
    Ok(ProfileResult {
        gates,
        artifact_dir: dir.clone(),
        report,
        console,
    })
}
