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
use crate::plan::sweep::{Point, Search, SweepSpec};
use crate::plan::{Load, Plan, Spec};
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

/// The exit code of a merge that is missing a node (it still writes what it merged).
pub const MERGE_INCOMPLETE: i32 = 4;

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
    // A peer's subcommand parsed by clap alone is translated here.
    let cli = crate::cli::port::resolve(cli).map_err(Fatal::from)?;
    let done = match cli.command {
        Command::Bench(_) | Command::Benchmark(_) | Command::Run(_) | Command::Analyze(_) => {
            unreachable!("translated into profile")
        }
        Command::Profile(args) => {
            install_secrets(&args.target);
            let s = args.sweep_spec().map_err(Fatal::from)?;
            let crossed = if s.is_sweep || s.repeats.runs > 1 {
                sweep(&args, stop, true).map(|r| r.gates_crossed)
            } else {
                profile(&args, stop, true).map(|r| r.gates.iter().any(|g| g.failure.is_some()))
            };
            // A stopped run says so in its exit code (128 + the signal, as a shell does),
            // whatever it measured: a script or a CI job can tell it from a finished one.
            if let Some(sig) = crate::sys::interrupted_by() {
                let name = crate::sys::signal_name(sig);
                match crossed {
                    Ok(_) => crate::redact::say!(
                        "ringperf: interrupted by {name}: the artifacts hold what was measured \
                         until then"
                    ),
                    Err(e) => crate::redact::say!("ringperf: interrupted by {name}: {e}"),
                }
                return Ok(128 + sig);
            }
            return Ok(if crossed? { GATES_CROSSED } else { 0 });
        }
        Command::Sim(args) => serve_sim(&args, stop),
        Command::Doctor(a) => {
            let checks = crate::doctor::run(crate::doctor::Planned {
                streams: a.concurrency,
                in_process_sim: a.sim,
            });
            crate::redact::print(&crate::doctor::render(&checks));
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
        Command::Merge { dirs, artifact_dir } => {
            let m = report::merge::merge(&dirs, &artifact_dir).map_err(Fatal::from)?;
            crate::redact::print(&m.console);
            write_report(&artifact_dir, true)?;
            crate::redact::say!("ringperf: merged artifacts in {}", artifact_dir.display());
            return Ok(if m.incomplete.is_empty() {
                0
            } else {
                MERGE_INCOMPLETE
            });
        }
        Command::AnalyzeTrace {
            input_file,
            block_size,
            output_file,
        } => {
            let lines = crate::workload::files::read_trace(&input_file)
                .map_err(|e| Fatal(e.to_string()))?;
            let a = report::trace_analysis::analyze(&lines, block_size);
            crate::redact::print(&report::trace_analysis::render(&a));
            if let Some(path) = output_file {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| Fatal(format!("creating {}: {e}", dir.display())))?;
                }
                let json = serde_json::to_vec_pretty(&a).expect("plain data");
                crate::artifact::write(&path, &json).map_err(|e| {
                    Fatal(format!("writing the analysis to {}: {e}", path.display()))
                })?;
                crate::redact::say!("ringperf: analysis report saved to {}", path.display());
            }
            Ok(())
        }
        Command::Compare {
            dirs,
            labels,
            artifact_dir,
        } => {
            if !labels.is_empty() && labels.len() != dirs.len() {
                return Err(Fatal(format!(
                    "--label was given {} times for {} folders: give one per folder, in their order",
                    labels.len(),
                    dirs.len()
                )));
            }
            let sources = dirs
                .iter()
                .enumerate()
                .map(|(i, d)| report::compare::read(d, labels.get(i).map(String::as_str)))
                .collect::<std::io::Result<Vec<_>>>()
                .map_err(Fatal::from)?;
            let c = report::compare::compare(sources);
            print!("{}", c.render());
            c.write(&artifact_dir).map_err(Fatal::from)?;
            crate::redact::say!(
                "ringperf: wrote {}",
                artifact_dir.join(report::compare::HTML).display()
            );
            Ok(())
        }
        Command::Report { dir } => {
            let page = report::html::write(&dir).map_err(Fatal::from)?;
            crate::redact::say!("ringperf: wrote {}", page.display());
            Ok(())
        }
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            // Into a buffer, then out: a reader that closes early (`| head`) ends the
            // command quietly instead of a write panicking on the broken pipe.
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut cmd, "ringperf", &mut out);
            write_out(&out)
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
            write_out(&page)
        }
    };
    done.map(|()| 0)
}

/// Makes every secret on the command line (or in its environment) one that nothing ringperf
/// prints or writes can show, before anything can.
fn install_secrets(t: &crate::cli::TargetArgs) {
    crate::redact::install(crate::plan::target::secrets_of(
        t.api_key.as_deref(),
        t.url.first().map(String::as_str),
        t.headers.iter().map(String::as_str),
    ));
}

/// Writes `bytes` to stdout; a reader that stopped reading (`| head`) is no error.
fn write_out(bytes: &[u8]) -> Result<(), Fatal> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.map_err(Fatal::from),
    }
}

fn serve_sim(args: &SimArgs, stop: Arc<AtomicBool>) -> Result<(), Fatal> {
    let cfg = args.config().map_err(Fatal::from)?;
    if args.replicas == 0 {
        return Err(Fatal("sim --replicas must be at least 1".into()));
    }
    let first: std::net::SocketAddr = cfg
        .bind
        .parse()
        .map_err(|_| Fatal(format!("sim --bind {:?}: expected IP:PORT", cfg.bind)))?;
    let mut handles = Vec::with_capacity(usize::from(args.replicas));
    for i in 0..args.replicas {
        // Port 0: a free port for each; else the ports after the first.
        let port = match first.port() {
            0 => 0,
            p => p.checked_add(i).ok_or_else(|| {
                Fatal(format!(
                    "sim --replicas {}: ports past 65535",
                    args.replicas
                ))
            })?,
        };
        let mut one = cfg.clone();
        one.bind = std::net::SocketAddr::new(first.ip(), port).to_string();
        handles.push(crate::sim::start(&one).map_err(Fatal::from)?);
    }
    crate::sys::interrupt_gracefully();
    for handle in &handles {
        crate::redact::say!(
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
    }
    let _ = std::io::stdout().flush();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for handle in handles {
        let (requests, events) = handle.served();
        let addr = handle.addr;
        handle.stop();
        crate::redact::say!("ringperf sim: {addr} served {requests} requests, {events} events");
    }
    Ok(())
}

/// Why a server's prefix cache can have held this run's prompts, most likely first: the run
/// repeating its own prompts (fewer distinct prompts than requests), shared prefixes, or an
/// earlier run with the same seed; each with what to change.
fn prefix_cache_cause(plan: &Plan, requests: u64) -> String {
    let w = &plan.spec.workload;
    if w.input_file.is_none() && w.num_dataset_entries < requests {
        format!(
            "this run sent its {} distinct prompts {:.1} times each on average: raise \
             --num-dataset-entries to the request count for prompts the server has not seen",
            w.num_dataset_entries,
            requests as f64 / w.num_dataset_entries.max(1) as f64
        )
    } else if w.num_prefix_prompts.is_some() {
        "the prompts share the prefixes --num-prefix-prompts asked for".into()
    } else {
        "an earlier run with the same --random-seed, or the same file: a run that must start \
         cold needs another seed, --reset-prefix-cache, or a restarted server"
            .into()
    }
}

/// The `n` CPUs this process may use that other work kept least busy over 100 ms (ties to
/// the lower number), or none when there are not more than `n` (then nothing is pinned).
fn quietest_cpus(n: usize) -> Vec<usize> {
    let cpus = crate::cpus::usable_cpus();
    if cpus.len() <= n {
        return Vec::new();
    }
    let before = crate::host::cpu_times();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let shares = crate::host::busy_shares(&before, &crate::host::cpu_times());
    let busy = |c: usize| shares.iter().find(|(i, _)| *i == c).map_or(0.0, |s| s.1);
    let mut ranked = cpus;
    // Shares within 5 points of each other count as equally quiet.
    ranked.sort_by_key(|c| ((busy(*c) * 20.0) as u64, *c));
    ranked.truncate(n);
    ranked.sort_unstable();
    ranked
}

/// Starts `profile --sim`'s simulator and points `spec` at it. Unless told otherwise, the
/// simulator gets the quietest CPUs to itself; those are returned, for the shards to avoid.
/// With `--server-traces`, its spans go to `traces` unless its flags say where.
fn start_sim(
    flags: &str,
    spec: &mut Spec,
    traces: Option<&crate::otlp::Receiver>,
) -> Result<(crate::sim::SimHandle, Vec<usize>), Fatal> {
    let args = SimArgs::parse_inline(flags).map_err(|e| {
        Fatal(format!(
            "--sim: {}",
            e.to_string().lines().next().unwrap_or("")
        ))
    })?;
    let mut cfg = args.config().map_err(Fatal::from)?;
    cfg.bind = "127.0.0.1:0".into();
    cfg.model = spec.target.model.clone();
    if let (None, Some(r)) = (&cfg.otlp_traces, traces) {
        cfg.otlp_traces = Some((r.endpoint(), crate::otlp::Encoding::Protobuf));
    }
    let e = &spec.engine;
    if cfg.cpus.is_empty() && e.cpus.is_none() && !e.no_pin {
        cfg.cpus = quietest_cpus(cfg.shards);
    }
    let h = crate::sim::start(&cfg).map_err(Fatal::from)?;
    crate::redact::say!(
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
    let n = w.prepared_entries();
    match (&w.input_file, w.session_turns_mean) {
        (Some(f), _) => format!("the requests of {}", f.display()),
        (None, Some(t)) => format!(
            "{n} sessions of about {t:.0} turns, each turn's prompt about {} tokens",
            w.isl_mean
        ),
        (None, None) => format!("{n} prompts of about {} tokens", w.isl_mean),
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
                    crate::redact::say!(
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
            crate::redact::say!(
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
                crate::redact::say!(
                    "ringperf: warning: the server lists {}, not {:?}; the probe request will tell",
                    list.join(", "),
                    spec.model
                );
            }
            Ok(list)
        }
        Err(e @ (Failure::Down { .. } | Failure::Transport { .. })) => Err(Fatal(e.to_string())),
        Err(e) if asked => {
            crate::redact::say!("ringperf: note: {e}; going on with -m {}", spec.model);
            Ok(Vec::new())
        }
        Err(e) => Err(Fatal(format!("{e}: name the model with -m"))),
    }
}

/// Results that cannot be written are found out before the run, not after it.
fn check_artifact_dir(dir: &std::path::Path) -> Result<MadeDir, Fatal> {
    let made = MadeDir(
        dir.ancestors()
            .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
            .map(std::path::Path::to_path_buf)
            .collect(),
    );
    let probe = dir.join(".ringperf-write-check");
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&probe, b""))
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| {
            Fatal(format!(
                "--artifact-dir {}: cannot write there ({e}); nothing was run",
                dir.display()
            ))
        })?;
    Ok(made)
}

/// A folder this run made: removed again if the run ends without writing into it (refused,
/// or stopped before its first request), so that a refusal leaves nothing behind.
struct MadeDir(Vec<std::path::PathBuf>);

impl Drop for MadeDir {
    fn drop(&mut self) {
        // The folder, then each parent made for it; only an empty folder can be removed, so
        // what a run wrote stays.
        for d in &self.0 {
            if std::fs::remove_dir(d).is_err() {
                return;
            }
        }
    }
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
) -> Result<Vec<crate::warning::Warning>, Fatal> {
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
        crate::redact::say!(
            "ringperf: preflight: {} answered the first request in {:.1} ms (not measured)",
            plan.target.endpoint.url(),
            p.first_ns as f64 / 1e6
        );
        // A response naming another model is said by the report, from the run's own.
        let _ = p.served_model;
    }
    if plan.spec.target.reset_prefix_cache {
        match crate::preflight::reset_prefix_cache(&plan.target) {
            Ok(path) => crate::redact::say!("ringperf: prefix cache emptied (POST {path})"),
            Err(why) => warnings.push(crate::warning::Warning::new(
                crate::warning::Code::PrefixCacheNotReset,
                format!("--reset-prefix-cache: the server did not empty its cache ({why})"),
            )),
        }
    }
    for w in &warnings {
        crate::redact::say!("ringperf: warning: {w}");
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
            Some(f) => crate::redact::say!("ringperf: gate FAILED: {f}"),
            None => crate::redact::say!("ringperf: gate passed: {}", j.name),
        }
    }
    crate::artifact::write(&dir.join("gates.junit.xml"), report::gates::junit(&judged)).map_err(
        |e| {
            Fatal(format!(
                "writing {}: {e}",
                dir.join("gates.junit.xml").display()
            ))
        },
    )?;
    Ok(judged)
}

/// What every run of one command line shares: the simulator, the prepared prompts, the
/// CPUs kept for the simulator, and what the preflight found.
struct Prepared {
    /// The first point's plan (every point shares its prompts and target).
    plan: Plan,
    /// The load points and repeats.
    sweep: SweepSpec,
    /// Where the artifacts go: a sweep's folder, or the run's.
    root: std::path::PathBuf,
    /// The load flags as given, before a sweep's first point was set in `plan`.
    load: crate::plan::LoadSpec,
    sim: Option<crate::sim::SimHandle>,
    /// `--server-traces`' receiver.
    traces: Option<crate::otlp::Receiver>,
    reserved: Vec<usize>,
    warnings: Vec<crate::warning::Warning>,
    /// When start-up began, and from what.
    started: (u64, &'static str),
    /// On several nodes, the server's `Date` against this host's clock.
    server_date: Option<crate::clock::ServerDate>,
    /// The live view, kept from run to run (a sweep's dashboard shows its points so far).
    ui: std::cell::RefCell<crate::ui::Ui>,
    /// The artifact folder, if this run made it.
    _made: MadeDir,
}

/// Parses, starts the simulator, finds the model, prepares the prompts and checks the host
/// and the server: everything before the first measured request.
fn prepare(args: &ProfileArgs) -> Result<Prepared, Fatal> {
    let started = match crate::clock::process_start_ns() {
        Some(t) => (t, "process start"),
        None => (crate::clock::now_ns(), "profile call"),
    };
    let (mut spec, notes) = args.spec_and_notes().map_err(Fatal::from)?;
    let sweep = args.sweep_spec().map_err(Fatal::from)?;
    if sweep.is_sweep {
        // Each point sends its own count: every prompt is prepared.
        spec.workload.sends_at_most = Some(u64::MAX);
    }
    // Everything the flags say is checked before anything is started, asked or prepared.
    let checked = crate::plan::Plan::check(&spec).map_err(Fatal::from)?;
    crate::gpu::parse_gpus(&args.telemetry.config().gpus)
        .map_err(|e| Fatal(format!("--gpus: {e}")))?;
    if sweep.resume && !sweep.is_sweep && sweep.repeats.runs == 1 {
        return Err(Fatal(
            "--resume continues a sweep (a list on --concurrency or --request-rate) or \
             repeated runs (--num-profile-runs)"
                .into(),
        ));
    }
    if let Some(line) = &args.peer.native {
        crate::redact::say!(
            "ringperf: {} command line, runs as: {line}",
            args.peer.dialect.name()
        );
    }
    for n in args.peer.notes.iter().chain(&notes) {
        crate::redact::say!("ringperf: note: {n}");
    }
    if args.sim.is_some() && spec.target.model.is_empty() {
        spec.target.model = "ringperf-sim".into();
    }
    // The span receiver listens before anything is sent (the simulator's spans included).
    let traces = match &args.telemetry.server_traces {
        Some(addr) => {
            let r = crate::otlp::Receiver::start(addr).map_err(Fatal)?;
            crate::redact::say!(
                "ringperf: server traces: receiving OTLP/HTTP spans on {}/v1/traces (start vLLM \
                 with --otlp-traces-endpoint {} and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=\
                 http/protobuf)",
                r.endpoint(),
                r.endpoint()
            );
            Some(r)
        }
        None => None,
    };
    let (sim, reserved) = match &args.sim {
        Some(flags) => {
            let (h, cpus) = start_sim(flags, &mut spec, traces.as_ref())?;
            (Some(h), cpus)
        }
        None => (None, Vec::new()),
    };
    let preflight = sim.is_none() && spec.target.preflight;
    let listed = if sim.is_some() {
        Vec::new()
    } else {
        let ready = spec.target.ready_check_timeout_ns;
        choose_model(&mut spec.target, preflight, ready)?
    };
    crate::redact::say!("ringperf: preparing {}", preparing(&checked.workload));
    // Without a list the flags stand as given; a sweep's plan starts at its first point.
    let load = spec.load.clone();
    if sweep.is_sweep {
        sweep.points[0].apply(&mut spec);
    }
    let mut plan = Plan::build(spec).map_err(Fatal::from)?;
    if let Some((caps, step)) = &sweep.staircase {
        plan.load
            .staircase(caps.clone(), *step)
            .map_err(Fatal::from)?;
    }
    crate::redact::say!("ringperf: tokenizer: {}", plan.workload.tokenizer.source);
    let root = if sweep.is_sweep {
        sweep_dir(&plan, sweep.points[0].axis)
    } else {
        plan.output.artifact_dir.clone()
    };
    let made = check_artifact_dir(&root)?;
    let nodes = plan.load.nodes;
    if nodes.is_split() {
        check_split(&sweep, &plan)?;
    }
    let server_date = (nodes.is_split() && sim.is_none())
        .then(|| crate::preflight::server_date(&plan.target))
        .flatten();
    let prepared = Prepared {
        ui: std::cell::RefCell::new(crate::ui::Ui::new(&plan)),
        server_date,
        warnings: Vec::new(),
        root,
        load,
        plan,
        sweep,
        sim,
        traces,
        reserved,
        started,
        _made: made,
    };
    // Every point is planned and checked before the first is run.
    for p in prepared.points()? {
        check_host(&p.1, prepared.sim.is_some())?;
    }
    let warnings = before_the_run(&prepared.plan, preflight, &listed)?;
    Ok(Prepared {
        warnings,
        ..prepared
    })
}

/// What a load split across nodes cannot do: decide its next load from what this node alone
/// measured, or run several loads without a common timetable.
fn check_split(sweep: &SweepSpec, plan: &Plan) -> Result<(), Fatal> {
    let adaptive = if sweep.staircase.is_some() {
        Some("--staircase")
    } else if sweep.search.is_some() {
        Some("--search")
    } else if sweep.auto.is_some() {
        Some("--sweep auto")
    } else {
        None
    };
    if let Some(flag) = adaptive {
        return Err(Fatal(format!(
            "{flag} decides each next load from what was measured, which one node of {} cannot \
             judge alone: sweep a list of loads instead (--concurrency 8,16,32)",
            plan.load.nodes.count
        )));
    }
    let several = sweep.is_sweep || sweep.repeats.runs > 1;
    let l = &plan.spec.load;
    if several && (l.start_at_unix_ns.is_none() || l.benchmark_duration_ns.is_none()) {
        return Err(Fatal(
            "a sweep or repeated runs on several nodes run on a common timetable: give \
             --start-at and --benchmark-duration (run k starts at --start-at + k × (ramp-up + \
             duration + grace period + pause + 5 s))"
                .into(),
        ));
    }
    Ok(())
}

impl Prepared {
    /// On several nodes, when run `k` (from 0) of a sweep or repeated runs starts: every node
    /// keeps the same timetable from `--start-at`.
    fn timetable(&self, k: usize) -> Option<u64> {
        let l = &self.plan.spec.load;
        let at = l.start_at_unix_ns?;
        if !self.plan.load.nodes.is_split() {
            return (k == 0).then_some(at);
        }
        let rest = self.sweep.pause_ns.max(self.sweep.repeats.cooldown_ns);
        let slot = l.ramp_up_ns.unwrap_or(0)
            + l.benchmark_duration_ns.unwrap_or(0)
            + l.grace_period_ns
            + rest
            + 5_000_000_000;
        Some(at + k as u64 * slot)
    }
}

/// A sweep's folder: as given, or named after the model, the endpoint and the swept flag.
fn sweep_dir(plan: &Plan, axis: crate::plan::sweep::Axis) -> std::path::PathBuf {
    let given = plan.spec.output.artifact_dir.clone();
    given.unwrap_or_else(|| {
        crate::plan::Output::build(
            &plan.spec.output,
            &plan.target.model,
            plan.target.kind.name(),
            &format!("{}_sweep", axis.name()),
        )
        .artifact_dir
    })
}

impl Prepared {
    /// Each point's plan, its folder under `root` (the plan itself without a sweep).
    fn points(&self) -> Result<Vec<(Point, Plan)>, Fatal> {
        if !self.sweep.is_sweep {
            return Ok(vec![(self.sweep.points[0], self.plan.clone())]);
        }
        let mut points: Vec<Point> = self.sweep.points.clone();
        // A search's highest load, and an automatic sweep's saturated run, are planned and
        // checked up front too.
        if let Some(s) = &self.sweep.search {
            points.push(Point {
                axis: s.axis,
                value: s.hi,
            });
        }
        if let Some(a) = &self.sweep.auto {
            points.push(Point {
                axis: crate::plan::sweep::Axis::Concurrency,
                value: a.saturation as f64,
            });
        }
        points
            .iter()
            .map(|p| Ok((*p, self.point_plan(p)?)))
            .collect()
    }

    /// The plan of one point of a sweep: the first point's, with its load, in its folder.
    fn point_plan(&self, p: &Point) -> Result<Plan, Fatal> {
        let mut plan = self.plan.clone();
        plan.spec.load = self.load.clone();
        p.apply(&mut plan.spec);
        if self.sweep.auto.is_some() && p.axis == crate::plan::sweep::Axis::RequestRate {
            // --concurrency is the saturated run's; the rates between run uncapped.
            plan.spec.load.concurrency = None;
        }
        if p.axis.is_workload() {
            // Each point has prompts of its own.
            plan =
                Plan::build(plan.spec.clone()).map_err(|e| Fatal(format!("{}: {e}", p.label())))?;
        } else {
            plan.load = Load::build(&plan.spec.load, plan.spec.workload.random_seed, None)
                .map_err(|e| Fatal(format!("{}: {e}", p.label())))?;
        }
        plan.output.artifact_dir = self.root.join(p.name());
        Ok(plan)
    }
}

/// Waits (at most `wait_ns`, less on Ctrl-C) for the spans of the run's completed measured
/// requests, then joins what came.
fn server_traces(
    r: &crate::otlp::Receiver,
    records: &[crate::record::Record],
    wait_ns: u64,
    stop: &AtomicBool,
    stale: u64,
) -> report::phases::Traces {
    let want: Vec<u64> = records
        .iter()
        .filter(|r| {
            r.phase == crate::record::Phase::Profiling && r.outcome == crate::record::Outcome::Ok
        })
        .map(|r| r.id)
        .collect();
    let t0 = std::time::Instant::now();
    let quick =
        t0 + std::time::Duration::from_millis(500).min(std::time::Duration::from_nanos(wait_ns));
    let have = r.wait_for(&want, quick, stop);
    if have < want.len() && !stop.load(Ordering::Relaxed) {
        crate::redact::say!(
            "ringperf: waiting up to {:.0} s for the server's spans ({have} of {} in)",
            wait_ns as f64 / 1e9,
            want.len()
        );
        r.wait_for(&want, t0 + std::time::Duration::from_nanos(wait_ns), stop);
    }
    let mut t = report::phases::join(
        r.endpoint(),
        r.take(),
        records,
        t0.elapsed().as_nanos() as u64,
    );
    t.unmatched += stale;
    t
}

/// One measured run, reported and written.
struct Measured {
    report: Report,
    doc: serde_json::Value,
    gates: Vec<report::gates::Judged>,
    console: String,
}

/// Runs `plan` once: places the shards, samples telemetry, runs, reports, writes the
/// artifacts into the plan's folder and judges the gates. `startup` (for the process's first
/// run) is when start-up began. `title` names the load.
fn measure(
    mut plan: Plan,
    p: &Prepared,
    args: &ProfileArgs,
    stop: Arc<AtomicBool>,
    title: &str,
    startup: Option<(u64, &'static str)>,
    print: bool,
) -> Result<Measured, Fatal> {
    let placement = crate::engine::place(&plan, &p.reserved).map_err(Fatal::from)?;
    crate::redact::say!("ringperf: shards: {}", placement.reason);
    plan.output.title = title.to_string();
    let plan = Arc::new(plan);
    let spare = placement.spare_cpu(&crate::cpus::usable_cpus());
    let telemetry_cfg = args.telemetry.config();
    let telemetry =
        crate::telemetry::Telemetry::start(&telemetry_cfg, &plan, spare).map_err(Fatal::from)?;
    let waited = plan
        .spec
        .load
        .start_at_unix_ns
        .map_or(0, |at| wait_until(at, &stop));
    if stop.load(Ordering::Relaxed) {
        return Err(Fatal(
            "interrupted before the first request: nothing was sent".into(),
        ));
    }
    let clock = crate::clock::Anchor::now();
    let start = unix_time_secs();
    let probe = p.sim.as_ref().map(|h| h.in_flight_probe());
    // Spans that came before this run (an earlier point's late ones) are not this run's.
    let stale = p.traces.as_ref().map_or(0, |r| r.take().spans.len() as u64);
    let out = crate::engine::run(
        plan.clone(),
        placement,
        stop.clone(),
        probe,
        &mut *p.ui.borrow_mut(),
    )
    .map_err(Fatal::from)?;
    let end = unix_time_secs();
    let mut report = report::build(out, &report::Settings::of(&plan));
    if let Some(r) = &p.traces {
        report.server_traces = Some(server_traces(
            r,
            &report.records,
            args.telemetry.server_traces_wait,
            &stop,
            stale,
        ));
    }
    if plan.load.nodes.is_split() {
        report.node = Some(report::NodeMark {
            index: plan.load.nodes.index,
            wall_offset_ns: clock.realtime_ns as i64 - clock.monotonic_ns as i64,
        });
    }
    report.warnings.splice(0..0, p.warnings.iter().cloned());
    report.telemetry = Some(telemetry.finish(
        report.tx_ns,
        report.ty_ns,
        report.output_tokens,
        report.completed,
        report.output_tps(),
        telemetry_cfg.gpu_price_eur_hour,
    ));
    let why_cached = prefix_cache_cause(&plan, report.completed + report.failed + report.warmup);
    // The server's own counts: its /metrics, else the prompt tokens its responses say its
    // cache served.
    let hit_rate = report
        .telemetry
        .iter()
        .flat_map(|t| &t.server_metrics)
        .find_map(|s| s.prefix_cache_hit_rate)
        .or(report
            .prompt_cache
            .map(|(cached, prompt)| cached as f64 / prompt.max(1) as f64));
    // Sessions send their history again at every turn: hits are what they measure.
    let sessions = plan.workload.sessions.is_some();
    if let Some(h) = hit_rate.filter(|h| *h > 0.5 && !sessions) {
        report.warnings.push(crate::warning::Warning::new(
            crate::warning::Code::PrefixCacheHits,
            format!(
                "the server's prefix-cache hit rate was {:.0}%: it had seen most of these prompts \
             before ({why_cached}); TTFT is lower than for new prompts",
                h * 100.0
            ),
        ));
    }
    let model = match report
        .served_model
        .as_ref()
        .filter(|m| **m != plan.target.model)
    {
        Some(m) => format!("{m} (asked: {})", plan.target.model),
        None => plan.target.model.clone(),
    };
    let what = match plan.target.kind.answer() {
        crate::api::Answer::Images => "Image Generation Metrics",
        _ => "LLM Metrics",
    };
    let title = format!("ringperf | {what} | {model} | {title}");
    let console = report::console::render(&report, &title);
    if print {
        crate::redact::print(&console);
    }
    let dir = &plan.output.artifact_dir;
    let startup_s = startup.and_then(|(started, from)| {
        let first = report
            .records
            .iter()
            .map(|r| r.start_ns)
            .filter(|t| *t > 0)
            .min()?;
        // Waiting for --start-at is no start-up work.
        let s = first.saturating_sub(started + waited) as f64 / 1e9;
        if print {
            crate::redact::say!("ringperf: start-up {s:.3} s ({from} to the first request sent)");
        }
        Some(s)
    });
    let times = export::Times {
        start,
        end,
        startup_s,
        startup_from: startup.map_or("", |s| s.1),
    };
    let doc = export::write_all(
        &report,
        dir,
        &plan.input_config(),
        &|w| plan.workload.write_inputs_json(w),
        &times,
    )
    .map_err(|e| Fatal(format!("writing artifacts to {}: {e}", dir.display())))?;
    report::node::write(&report, dir, plan.load.nodes, &clock, p.server_date.clone())
        .map_err(|e| Fatal(format!("writing artifacts to {}: {e}", dir.display())))?;
    if let Some(steps) = &plan.load.steps {
        let measured =
            report::staircase::steps(&report.records, report.tx_ns, steps, &plan.load.slos);
        let (json, text) =
            report::staircase::describe(&measured, steps.step_ns, args.sweep.slo_attainment);
        if print {
            crate::redact::print(&format!("Staircase:\n{text}"));
        }
        let mut j = serde_json::to_vec_pretty(&json).map_err(Fatal::from)?;
        j.push(b'\n');
        crate::artifact::write(&dir.join(report::staircase::STAIRCASE_JSON), j)
            .map_err(|e| Fatal(format!("writing {}: {e}", dir.display())))?;
    }
    let gates = judge_gates(&plan, &report, &doc, dir)?;
    if print {
        crate::redact::say!("ringperf: artifacts in {}", dir.display());
    }
    Ok(Measured {
        report,
        doc,
        gates,
        console,
    })
}

/// Why a run measured nothing, or `None` when a request completed.
fn nothing_measured(plan: &Plan, report: &Report) -> Option<String> {
    if report.completed > 0 {
        return None;
    }
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
    Some(format!(
        "nothing was measured: every request failed: {why}{hint}"
    ))
}

/// The title of a run: its load.
fn load_title(plan: &Plan) -> String {
    if let Some(s) = &plan.load.steps {
        return format!(
            "staircase: concurrency {} for {} s each",
            s.caps
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            s.step_ns as f64 / 1e9
        );
    }
    match (plan.load.rate, &plan.load.offsets) {
        (Some(r), _) => format!("request rate {r}/s"),
        (None, Some(_)) => "trace replay".to_string(),
        (None, None) => format!("concurrency {}", plan.load.concurrency),
    }
}

/// Runs `profile` for one run: starts the in-process simulator when asked, plans, places,
/// runs, reports and writes the artifacts. `print` sends the table to stdout. A command line
/// that asks for a sweep or repeated runs goes to [`sweep`].
pub fn profile(
    args: &ProfileArgs,
    stop: Arc<AtomicBool>,
    print: bool,
) -> Result<ProfileResult, Fatal> {
    let s = args.sweep_spec().map_err(Fatal::from)?;
    if s.is_sweep || s.repeats.runs > 1 {
        return Err(Fatal(
            "this command line asks for a sweep or repeated runs: run it with app::sweep".into(),
        ));
    }
    let p = prepare(args)?;
    crate::sys::interrupt_gracefully();
    let plan = p.plan.clone();
    let title = load_title(&plan);
    let m = measure(plan.clone(), &p, args, stop, &title, Some(p.started), print)?;
    drop(p);
    if let Some(why) = nothing_measured(&plan, &m.report) {
        return Err(Fatal(why));
    }
    write_report(&plan.output.artifact_dir, print)?;
    peer_outputs(args, &plan, &m.report, print)?;
    Ok(ProfileResult {
        gates: m.gates,
        artifact_dir: plan.output.artifact_dir.clone(),
        report: m.report,
        console: m.console,
    })
}

/// What a peer's command line asked to be written too: vLLM's result file and console
/// block, and its per-request timeline.
fn peer_outputs(args: &ProfileArgs, plan: &Plan, r: &Report, print: bool) -> Result<(), Fatal> {
    let dir = &plan.output.artifact_dir;
    let write = |path: &std::path::Path, bytes: &[u8], append: bool| {
        if append {
            crate::artifact::append_line(path, bytes)
        } else {
            crate::artifact::write(path, bytes)
        }
    };
    if let Some(v) = &args.peer.vllm {
        // vLLM's date stamp (UTC here), as its file names carry it.
        let iso = export::iso8601(unix_time_secs());
        let date: String = iso[..19]
            .chars()
            .filter(|c| c.is_ascii_digit() || *c == 'T')
            .map(|c| if c == 'T' { '-' } else { c })
            .collect();
        let (json, console) = report::peer::vllm(r, v, &plan.target.model, &date);
        if print {
            crate::redact::print(&console);
        }
        if v.save {
            let folder = v.dir.clone().unwrap_or_else(|| ".".into());
            std::fs::create_dir_all(&folder)
                .map_err(|e| Fatal(format!("--result-dir {}: {e}", folder.display())))?;
            let path = folder.join(report::peer::vllm_filename(v, &plan.target.model, &date));
            let text = serde_json::to_vec(&json).map_err(Fatal::from)?;
            write(&path, &text, v.append)
                .map_err(|e| Fatal(format!("writing {}: {e}", path.display())))?;
            crate::redact::say!("ringperf: vLLM's result file: {}", path.display());
        }
    }
    if let Some(t) = args.peer.timeline {
        let page = report::peer::timeline_html(r, t, &format!("{} timeline", plan.target.model));
        let path = dir.join("timeline.html");
        write(&path, page.as_bytes(), false)
            .map_err(|e| Fatal(format!("writing {}: {e}", path.display())))?;
        if print {
            crate::redact::say!("ringperf: timeline: {}", path.display());
        }
    }
    Ok(())
}

/// GenAI-Perf `analyze`'s summary of a sweep, `analyze_export_genai_perf.csv`, in the sweep's
/// folder.
fn analyze_csv(p: &Prepared, rows: &[report::sweep::Row]) -> Result<(), Fatal> {
    let mut points = Vec::new();
    for row in rows {
        let mut spec = p.plan.spec.clone();
        spec.load = p.load.clone();
        row.point.apply(&mut spec);
        let dir = p.root.join(row.point.name());
        let doc = [
            dir.join(report::sweep::PROFILE_JSON),
            dir.join("profile_runs/run_0001")
                .join(report::sweep::PROFILE_JSON),
        ]
        .iter()
        .find_map(|f| report::sweep::read_json(f).ok())
        .unwrap_or(serde_json::Value::Null);
        points.push((
            spec.load.concurrency.unwrap_or(1),
            u64::from(spec.workload.isl_mean),
            spec.workload.num_dataset_entries,
            doc,
        ));
    }
    let csv = report::peer::genai_perf_analyze_csv(&p.plan.target.model, &points);
    let path = p.root.join("analyze_export_genai_perf.csv");
    crate::artifact::write(&path, csv)
        .map_err(|e| Fatal(format!("writing {}: {e}", path.display())))
}

/// What a sweep (or a point run several times) produced.
pub struct SweepResult {
    /// One row per point, in the order run.
    pub rows: Vec<report::sweep::Row>,
    /// The sweep's folder (the point's, for repeats of one point).
    pub artifact_dir: std::path::PathBuf,
    /// Runs measured now.
    pub ran: usize,
    /// Runs kept from an earlier run of the same sweep (`--resume`).
    pub kept: usize,
    /// A `--fail-on` gate was crossed in some run.
    pub gates_crossed: bool,
    /// Runs that measured nothing, with why.
    pub failed: Vec<String>,
    /// Where a `--search` ended.
    pub search: Option<Search>,
    /// What an automatic sweep measured and decided (`{"auto": {...}}`).
    pub auto: Option<serde_json::Value>,
}

/// The completed JSON document in `dir`, if an earlier run left one (for `--resume`).
fn completed_run(dir: &std::path::Path) -> Option<serde_json::Value> {
    let doc = report::sweep::read_json(&dir.join(report::sweep::PROFILE_JSON)).ok()?;
    let done = doc.get("was_cancelled") == Some(&serde_json::Value::Bool(false))
        && doc.pointer("/request_count/avg").and_then(|v| v.as_f64()) > Some(0.0);
    done.then_some(doc)
}

/// Waits for the wall-clock instant `at` (Unix ns; `--start-at`), or less when Ctrl-C stops
/// the run; says how long it waits, or how late the instant had passed. Returns the
/// monotonic ns waited.
fn wait_until(at: u64, stop: &AtomicBool) -> u64 {
    let now = (unix_time_secs() * 1e9) as u64;
    if now > at {
        crate::redact::say!(
            "ringperf: --start-at passed {:.3} s ago: starting now (the merge reports the skew)",
            (now - at) as f64 / 1e9
        );
        return 0;
    }
    let began = crate::clock::now_ns();
    crate::redact::say!(
        "ringperf: waiting {:.3} s for --start-at {}",
        (at - now) as f64 / 1e9,
        export::iso8601(at as f64 / 1e9)
    );
    // Coarse sleeps, then a short spin, so that nodes start within microseconds of the
    // instant on synchronized clocks.
    loop {
        let left = at.saturating_sub((unix_time_secs() * 1e9) as u64);
        if left == 0 || stop.load(Ordering::Relaxed) {
            return crate::clock::now_ns() - began;
        }
        if left > 2_000_000 {
            std::thread::sleep(std::time::Duration::from_nanos(
                (left - 1_000_000).min(20_000_000),
            ));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Sleeps `ns`, or less when Ctrl-C stops the run.
fn pause(ns: u64, stop: &AtomicBool) {
    let until = crate::clock::now_ns().saturating_add(ns);
    while !stop.load(Ordering::Relaxed) && crate::clock::now_ns() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Runs every point of a sweep, each `--num-profile-runs` times (or, with `--search`, the
/// points the search chooses): the simulator and the prompts are prepared once, each run
/// writes its usual artifacts in its own folder, repeated runs get `aggregate/` with
/// confidence intervals, and a sweep gets `sweep_summary.csv`, `sweep_summary.json`,
/// `report.html` and the console summary. The summary is rewritten after every point, so
/// that what was measured survives a crash or Ctrl-C.
pub fn sweep(args: &ProfileArgs, stop: Arc<AtomicBool>, print: bool) -> Result<SweepResult, Fatal> {
    let p = prepare(args)?;
    let root = p.root.clone();
    crate::sys::interrupt_gracefully();
    let mut s = Sweeper {
        p: &p,
        args,
        stop: stop.clone(),
        startup: Some(p.started),
        print,
        out: SweepResult {
            rows: Vec::new(),
            artifact_dir: root.clone(),
            ran: 0,
            kept: 0,
            gates_crossed: false,
            failed: Vec::new(),
            search: None,
            auto: None,
        },
    };
    match &p.sweep.search {
        None if p.sweep.auto.is_some() => auto_sweep(&mut s)?,
        None => {
            let points = p.points()?;
            for (i, (point, plan)) in points.iter().enumerate() {
                if i > 0 {
                    pause(p.sweep.pause_ns, &stop);
                }
                s.point(
                    *point,
                    plan,
                    &format!("point {} of {}", i + 1, points.len()),
                )?;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
        }
        Some(spec) => {
            let mut search = Search::new(spec.clone());
            while let Some(value) = search.next() {
                if s.out.ran + s.out.kept > 0 {
                    pause(p.sweep.pause_ns, &stop);
                }
                let point = Point {
                    axis: spec.axis,
                    value,
                };
                let plan = p.point_plan(&point)?;
                let row = s.point(
                    point,
                    &plan,
                    &format!("search probe {}", s.out.rows.len() + 1),
                )?;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let good = row
                    .as_ref()
                    .and_then(|r| r.get("goodput_fraction"))
                    .unwrap_or(0.0);
                let passed = good >= spec.attainment;
                crate::redact::say!(
                    "ringperf: search: {}: {:.1}% of requests met every objective ({} {:.1}%)",
                    point.label(),
                    good * 100.0,
                    if passed {
                        "pass, at least"
                    } else {
                        "miss, under"
                    },
                    spec.attainment * 100.0
                );
                search.record(value, passed);
                s.out.search = Some(search.clone());
                s.summary()?;
            }
        }
    }
    if stop.load(Ordering::Relaxed) {
        crate::redact::say!("ringperf: stopped; what was measured so far is written");
    }
    if args.peer.genai_perf_analyze && !s.out.rows.is_empty() {
        analyze_csv(&p, &s.out.rows)?;
    }
    let out = s.out;
    drop(p);
    if print && (out.rows.len() > 1 || args.sweep.num_profile_runs > 1) {
        crate::redact::print(&report::sweep::render(&out.rows));
    }
    let said = out.search.as_ref().map(search_text).or_else(|| {
        let a = out.auto.as_ref()?;
        Some(a.pointer("/auto/text")?.as_str()?.to_string())
    });
    if let (Some(text), true) = (said, print) {
        crate::redact::print(&format!("{text}\n"));
    }
    if out.rows.is_empty() {
        return Err(Fatal(format!(
            "nothing was measured: {}",
            out.failed
                .first()
                .map_or("stopped before the first run", String::as_str)
        )));
    }
    write_report(&root, print)?;
    if print {
        crate::redact::say!("ringperf: artifacts in {}", root.display());
    }
    Ok(out)
}

/// `--sweep auto`: the serial run, the saturated run, then the rates between them, until the
/// server is over-saturated.
fn auto_sweep(s: &mut Sweeper) -> Result<(), Fatal> {
    use crate::plan::sweep::Axis;
    let (p, stop) = (s.p, s.stop.clone());
    let spec = p.sweep.auto.clone().expect("an automatic sweep");
    let probe = |s: &mut Sweeper, point: Point, which: &str| {
        if s.out.ran + s.out.kept > 0 {
            pause(p.sweep.pause_ns, &stop);
        }
        let plan = p.point_plan(&point)?;
        s.point(point, &plan, which)
    };
    let one = Point {
        axis: Axis::Concurrency,
        value: 1.0,
    };
    let serial = probe(s, one, "serial: the lowest load")?;
    let saturated = match &serial {
        Some(_) if !stop.load(Ordering::Relaxed) => probe(
            s,
            Point {
                axis: Axis::Concurrency,
                value: spec.saturation as f64,
            },
            "saturated: the highest load",
        )?,
        _ => None,
    };
    let (Some(serial), Some(saturated)) = (serial, saturated) else {
        return Ok(());
    };
    let tput = |r: &report::sweep::Row| r.get("request_throughput").unwrap_or(0.0);
    let (low, high) = (tput(&serial), tput(&saturated));
    let rates = crate::plan::sweep::auto_rates(low, high, spec.points - 2);
    let mut stopped = None;
    if high <= low * 1.05 {
        stopped = Some(format!(
            "no rates between: {} requests in flight reached {high:.3} requests/s, no more than \
             one at a time ({low:.3}/s); the server does not serve requests in parallel",
            spec.saturation
        ));
    }
    let mut done = Vec::new();
    for (i, rate) in rates.iter().enumerate() {
        if stopped.is_some() || stop.load(Ordering::Relaxed) {
            break;
        }
        let point = Point {
            axis: Axis::RequestRate,
            value: *rate,
        };
        let which = format!("rate {} of {} between", i + 1, rates.len());
        let Some(row) = probe(s, point, &which)? else {
            continue;
        };
        done.push(*rate);
        stopped = report::sweep::over_saturated(&serial, &row);
    }
    let text = format!(
        "automatic sweep: serial {low:.3} requests/s, saturated ({} in flight) {high:.3} \
         requests/s; rates run: {}{}",
        spec.saturation,
        if done.is_empty() {
            "none".to_string()
        } else {
            done.iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        },
        stopped
            .as_deref()
            .map_or(String::new(), |w| format!("; {w}"))
    );
    crate::redact::say!("ringperf: {text}");
    s.out.auto = Some(serde_json::json!({"auto": {
        "serial_request_throughput": low,
        "saturated_request_throughput": high,
        "saturation_concurrency": spec.saturation,
        "rates_planned": rates,
        "rates_run": done,
        "stopped": stopped,
        "text": text,
    }}));
    s.summary()
}

/// What a search found, in a sentence.
pub fn search_text(s: &Search) -> String {
    let what = match s.spec.axis {
        crate::plan::sweep::Axis::RequestRate => "request rate",
        _ => "concurrency",
    };
    let share = format!("{:.0}%", s.spec.attainment * 100.0);
    match (s.passed, s.failed) {
        (Some(p), Some(f)) => format!(
            "search: the highest {what} with at least {share} of requests within every objective \
             is {p} ({f} missed)"
        ),
        (Some(p), None) => format!(
            "search: every {what} probed up to {p}, the top of --search-range, kept {share} of \
             requests within every objective: the knee is higher"
        ),
        (None, Some(f)) => format!(
            "search: even the lowest {what}, {f}, missed {share} of requests within every \
             objective"
        ),
        (None, None) => "search: nothing was probed".into(),
    }
}

/// Runs the points of a sweep or a search, and keeps what they measured.
struct Sweeper<'a> {
    p: &'a Prepared,
    args: &'a ProfileArgs,
    stop: Arc<AtomicBool>,
    startup: Option<(u64, &'static str)>,
    print: bool,
    out: SweepResult,
}

impl Sweeper<'_> {
    /// Runs one point `--num-profile-runs` times into its folder (keeping runs an earlier
    /// sweep completed, with `--resume`), writes its aggregate and the sweep summary. Returns
    /// its row, or `None` when no run of it measured anything.
    fn point(
        &mut self,
        point: Point,
        plan: &Plan,
        which: &str,
    ) -> Result<Option<report::sweep::Row>, Fatal> {
        let (p, stop) = (self.p, self.stop.clone());
        let runs = p.sweep.repeats.runs;
        let point_dir = plan.output.artifact_dir.clone();
        let (mut labels, mut docs, mut failed) = (Vec::new(), Vec::new(), Vec::new());
        for run in 1..=runs {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let label = format!("run_{run:04}");
            let mut plan = plan.clone();
            if runs > 1 {
                plan.output.artifact_dir = point_dir.join("profile_runs").join(&label);
            }
            let dir = plan.output.artifact_dir.clone();
            if let Some(doc) = p.sweep.resume.then(|| completed_run(&dir)).flatten() {
                crate::redact::say!("ringperf: resume: kept {}", dir.display());
                self.out.kept += 1;
                labels.push(label);
                docs.push(doc);
                continue;
            }
            if run > 1 {
                pause(p.sweep.repeats.cooldown_ns, &stop);
            }
            // The server is warm after a point's first run (AIPerf's default too).
            let trace = plan.load.rate.is_none() && plan.load.offsets.is_some();
            if run > 1 && plan.load.warmup > 0 && !p.sweep.repeats.warmup_every_run && !trace {
                plan.spec.load.warmup_request_count = 0;
                plan.load = Load::build(&plan.spec.load, plan.spec.workload.random_seed, None)
                    .map_err(Fatal::from)?;
            }
            // Without a timetable only the first run waits for --start-at.
            plan.spec.load.start_at_unix_ns = p.timetable(self.out.ran + self.out.kept);
            let mut title = load_title(&plan);
            if p.sweep.is_sweep {
                title.push_str(&format!(" ({which})"));
            }
            if runs > 1 {
                title.push_str(&format!(" run {run} of {runs}"));
            }
            crate::redact::say!("ringperf: {title}");
            let m = measure(
                plan.clone(),
                p,
                self.args,
                stop.clone(),
                &title,
                self.startup.take(),
                self.print,
            )?;
            self.out.ran += 1;
            self.out.gates_crossed |= m.gates.iter().any(|g| g.failure.is_some());
            match nothing_measured(&plan, &m.report) {
                Some(why) => {
                    crate::redact::say!("ringperf: {}: {why}", dir.display());
                    self.out.failed.push(format!("{}: {why}", dir.display()));
                    failed.push((label, why));
                }
                None => {
                    labels.push(label);
                    docs.push(m.doc);
                }
            }
            if m.report.cancelled {
                break;
            }
        }
        if runs > 1 && !docs.is_empty() {
            write_aggregate(
                &point_dir,
                &labels,
                &docs,
                p.sweep.repeats.confidence,
                &failed,
            )?;
        }
        let row = (!docs.is_empty()).then(|| report::sweep::Row::of(point, &docs));
        if let Some(r) = &row {
            // In load order, as `ringperf report` reads them back (a search probes out of order).
            self.out.rows.push(r.clone());
            report::sweep::sort(&mut self.out.rows);
            p.ui.borrow_mut().points(&self.out.rows);
        }
        if p.sweep.is_sweep {
            self.summary()?;
        }
        Ok(row)
    }

    /// Writes the sweep summary as it stands.
    fn summary(&self) -> Result<(), Fatal> {
        let search = self.out.search.as_ref().map(|s| {
            serde_json::json!({"search": {
                "axis": s.spec.axis.name(),
                "slo_attainment": s.spec.attainment,
                "range": [s.spec.lo, s.spec.hi],
                "tolerance": s.spec.tolerance,
                "highest_passed": s.passed,
                "lowest_missed": s.failed,
                "text": search_text(s),
            }})
        });
        let extra = search.or_else(|| self.out.auto.clone());
        report::sweep::write_summary(&self.p.root, &self.out.rows, extra).map_err(|e| {
            Fatal(format!(
                "writing the sweep summary to {}: {e}",
                self.p.root.display()
            ))
        })
    }
}

/// Writes `report.html` and `plots/` for what `dir` holds.
fn write_report(dir: &std::path::Path, print: bool) -> Result<(), Fatal> {
    let page = report::html::write(dir)
        .map_err(|e| Fatal(format!("writing the HTML report in {}: {e}", dir.display())))?;
    if print {
        crate::redact::say!("ringperf: report: {}", page.display());
    }
    Ok(())
}

/// Writes `aggregate/` of a point run several times.
fn write_aggregate(
    point_dir: &std::path::Path,
    labels: &[String],
    docs: &[serde_json::Value],
    confidence: f64,
    failed: &[(String, String)],
) -> Result<(), Fatal> {
    let dir = point_dir.join("aggregate");
    let agg = report::sweep::aggregate(labels, docs, confidence, failed);
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(&dir)?;
        let mut j = serde_json::to_vec_pretty(&agg)?;
        j.push(b'\n');
        crate::artifact::write(&dir.join(report::sweep::AGGREGATE_JSON), j)?;
        let csv = report::sweep::aggregate_csv(&agg).map_err(std::io::Error::other)?;
        crate::artifact::write(&dir.join(report::sweep::AGGREGATE_CSV), csv)
    };
    write().map_err(|e| Fatal(format!("writing {}: {e}", dir.display())))
}
