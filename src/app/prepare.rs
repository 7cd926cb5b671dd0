//! What every run of a `profile` command line shares, set up once before its first request:
//! the simulator, the model, the prepared prompts, the checked host and artifact folder, and
//! each point's plan.

use super::{Fatal, Flags};
use crate::cli::SimArgs;
use crate::plan::sweep::{Point, SweepSpec};
use crate::plan::{Load, Plan, Spec};

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
        Fatal::Refused(format!(
            "--sim: {}",
            e.to_string().lines().next().unwrap_or("")
        ))
    })?;
    let mut cfg = args.config()?;
    cfg.bind = "127.0.0.1:0".into();
    // The simulator serves the run's model, unless --sim names another (to see a 404).
    if args.model == crate::sim::DEFAULT_MODEL {
        cfg.model = spec.target.model.clone();
    }
    if let (None, Some(r)) = (&cfg.otlp_traces, traces) {
        cfg.otlp_traces = Some((r.endpoint(), crate::otlp::Encoding::Protobuf));
    }
    let e = &spec.engine;
    if cfg.cpus.is_empty() && e.cpus.is_none() && !e.no_pin {
        cfg.cpus = quietest_cpus(cfg.shards);
    }
    let h = crate::sim::start(&cfg)?;
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
/// takes the first when `-m` named none. Returns the list (empty when it is unknown) and how
/// long the server took to come up (ns; 0 when it was up).
pub(super) fn choose_model(
    spec: &mut crate::plan::TargetSpec,
    preflight: bool,
    ready_ns: u64,
) -> Result<(Vec<String>, u64), Fatal> {
    use crate::preflight::{models, Failure};
    let asked = !spec.model.is_empty();
    if asked && !preflight {
        return Ok((Vec::new(), 0));
    }
    let target = crate::plan::Target::build(spec)?;
    let timeout = std::time::Duration::from_nanos(spec.connect_timeout_ns);
    let began = crate::clock::now_ns();
    let deadline = began.saturating_add(ready_ns);
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
    let waited = if said && got.is_ok() {
        let ns = crate::clock::now_ns() - began;
        crate::redact::say!(
            "ringperf: the server answered after {:.1} s of waiting (not counted as start-up)",
            ns as f64 / 1e9
        );
        ns
    } else {
        0
    };
    let list = match got {
        Ok(list) if !asked => {
            let Some(first) = list.first() else {
                return Err(Fatal::NoModel(target.endpoint.url()));
            };
            crate::redact::say!(
                "ringperf: model: {} (the first the server lists{}; -m chooses)",
                crate::redact::model_shown(first),
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
                let listed: Vec<String> =
                    list.iter().map(|m| crate::redact::model_shown(m)).collect();
                crate::redact::say!(
                    "ringperf: warning: the server lists {}, not {:?}; the probe request will tell",
                    listed.join(", "),
                    crate::redact::model_shown(&spec.model)
                );
            }
            Ok(list)
        }
        Err(e @ (Failure::Down { .. } | Failure::Transport { .. })) => Err(Fatal::Server {
            failure: Box::new(e),
            advice: String::new(),
        }),
        Err(e) if asked => {
            crate::redact::say!(
                "ringperf: note: {e}; going on with -m {}",
                crate::redact::model_shown(&spec.model)
            );
            Ok(Vec::new())
        }
        Err(e) => Err(Fatal::Server {
            failure: Box::new(e),
            advice: ": name the model with -m".into(),
        }),
    }?;
    Ok((list, waited))
}

/// Results that cannot be written are found out before the run, not after it.
pub(super) fn check_artifact_dir(dir: &std::path::Path) -> Result<MadeDir, Fatal> {
    let made: Vec<std::path::PathBuf> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .map(std::path::Path::to_path_buf)
        .collect();
    let made = MadeDir {
        _doomed: made.iter().map(|d| crate::sys::doomed(d)).collect(),
        dirs: made,
    };
    let probe = dir.join(".ringperf-write-check");
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&probe, b""))
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| {
            Fatal::io(
                format!(
                    "--artifact-dir {}: cannot write there, nothing was run",
                    dir.display()
                ),
                e,
            )
        })?;
    Ok(made)
}

/// A folder this run made: removed again if the run ends without writing into it (refused,
/// or stopped before its first request), so that a refusal leaves nothing behind.
/// The folders made for the run, deepest first; a process ended at once (a second Ctrl-C)
/// removes them too while still empty.
pub(super) struct MadeDir {
    dirs: Vec<std::path::PathBuf>,
    _doomed: Vec<crate::sys::Doomed>,
}

impl Drop for MadeDir {
    fn drop(&mut self) {
        // The folder, then each parent made for it; only an empty folder can be removed, so
        // what a run wrote stays.
        for d in &self.dirs {
            if std::fs::remove_dir(d).is_err() {
                return;
            }
        }
    }
}

/// The host's blockers for this run, found before anything is sent: open files (every
/// connection is one, two with the in-process simulator, which holds the other end) and local
/// ports (each connection holds one).
fn check_host(plan: &Plan, in_process_sim: bool, host_streams: u64) -> Result<(), Fatal> {
    let t = &plan.target;
    let servers = distinct_servers(t);
    let p = crate::doctor::Planned {
        streams: plan.load.streams,
        in_process_sim,
        host_streams,
        paths: servers * (t.local_addresses.len() as u64).max(1),
    };
    for c in [
        crate::doctor::open_files(p, crate::sys::raise_nofile_limit()),
        crate::doctor::ephemeral_ports(p, crate::doctor::port_range()),
    ] {
        if c.level == crate::doctor::Level::Fail {
            return Err(Fatal::Refused(c.detail));
        }
    }
    Ok(())
}

/// The server addresses a plan's connections go to, counted once each.
fn distinct_servers(t: &crate::plan::Target) -> u64 {
    let mut addrs: Vec<_> = (0..t.servers()).map(|i| t.server(i).addr).collect();
    addrs.sort();
    addrs.dedup();
    addrs.len() as u64
}

/// Connections from every process of this host: a worker's siblings share its ports.
fn host_streams(plan: &Plan, worker: &Option<super::workers::Worker>) -> u64 {
    plan.load.streams * worker.as_ref().map_or(1, |w| w.count)
}

/// Against loopback servers, with no --local-address, spreads connections over as many
/// sources of 127.0.0.0/8 as the ephemeral range needs.
fn spread_sources(plan: &mut Plan, host_streams: u64) {
    let t = &plan.target;
    let loopback = (0..t.servers())
        .all(|i| matches!(t.server(i).addr.ip(), std::net::IpAddr::V4(ip) if ip.is_loopback()));
    if !loopback || !t.local_addresses.is_empty() {
        return;
    }
    let Some((lo, hi)) = crate::doctor::port_range() else {
        return;
    };
    let sources = crate::doctor::loopback_sources(host_streams, distinct_servers(t), hi - lo + 1);
    if !sources.is_empty() {
        crate::redact::say!(
            "ringperf: up to {host_streams} connections to loopback: opened from {} source addresses \
             (127.0.0.1 to {}), as the ephemeral ports need",
            sources.len(),
            sources[sources.len() - 1]
        );
        plan.target.local_addresses = sources;
    }
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
            let advice = if listed.is_empty() || listed.contains(&plan.target.model) {
                String::new()
            } else {
                format!(
                    " (the server lists {}; -m names the model)",
                    listed.join(", ")
                )
            };
            Fatal::Server {
                failure: Box::new(e),
                advice,
            }
        })?;
        crate::redact::say!(
            "ringperf: preflight: one probe request before the run, not measured (--no-preflight \
             sends none): {} answered it in {:.1} ms",
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

/// What every run of one command line shares: the simulator, the prepared prompts, the
/// CPUs kept for the simulator, and what the preflight found.
pub(super) struct Prepared {
    /// The first point's plan (every point shares its prompts and target).
    pub(super) plan: Plan,
    /// The load points and repeats.
    pub(super) sweep: SweepSpec,
    /// Where the artifacts go: a sweep's folder, or the run's.
    pub(super) root: std::path::PathBuf,
    /// The load flags as given, before a sweep's first point was set in `plan`.
    pub(super) load: crate::plan::LoadSpec,
    pub(super) sim: Option<crate::sim::SimHandle>,
    /// `--server-traces`' receiver.
    pub(super) traces: Option<crate::otlp::Receiver>,
    pub(super) reserved: Vec<usize>,
    pub(super) warnings: Vec<crate::warning::Warning>,
    /// When start-up began, and from what.
    pub(super) started: (u64, &'static str),
    /// On several nodes, the server's `Date` against this host's clock.
    pub(super) server_date: Option<crate::clock::ServerDate>,
    /// The live view, kept from run to run (a sweep's dashboard shows its points so far).
    pub(super) ui: std::cell::RefCell<crate::ui::Ui>,
    /// GPU and server-metrics telemetry.
    pub(super) telemetry: crate::telemetry::Config,
    /// How long to wait for the server's late spans (ns).
    pub(super) traces_wait_ns: u64,
    /// `--slo-attainment`, for the staircase's verdict.
    pub(super) slo_attainment: f64,
    /// What a peer's command line asked to be written too.
    pub(super) peer: crate::cli::port::Peer,
    /// This process's part of a split run, when it is a worker.
    pub(super) worker: Option<super::workers::Worker>,
    /// The live figures' page (`--live-metrics`, and every worker's).
    pub(super) live: Option<super::live::Exporter>,
    /// The artifact folder, if this run made it.
    _made: MadeDir,
}

/// Parses, starts the simulator, finds the model, prepares the prompts and checks the host
/// and the server: everything before the first measured request.
pub(super) fn prepare(flags: Flags) -> Result<Prepared, Fatal> {
    let mut started = match crate::clock::process_start_ns() {
        Some(t) => (t, "process start"),
        None => (crate::clock::now_ns(), "profile call"),
    };
    let Flags {
        mut spec,
        notes,
        sweep,
        telemetry,
        traces,
        slo_attainment,
        peer,
        sim,
        live_metrics,
        worker,
    } = flags;
    if let Some(w) = &worker {
        spec.load.nodes = crate::plan::nodes::Nodes {
            index: w.index,
            count: w.count,
        };
        spec.output.artifact_dir = Some(w.dir.clone());
        if spec.target.model.is_empty() {
            spec.target.model = w.model.clone();
        }
    }
    // A worker serves its live figures for its parent: where asked (port + its index), or on
    // a free loopback port.
    let live_at = match (&worker, live_metrics) {
        (Some(w), Some(a)) if a.port() != 0 => Some(std::net::SocketAddr::new(
            a.ip(),
            u16::try_from(u64::from(a.port()) + w.index).map_err(|_| {
                Fatal::Refused(format!(
                    "--live-metrics {a}: worker {} has no port",
                    w.index
                ))
            })?,
        )),
        (Some(_), Some(a)) => Some(a),
        (Some(_), None) => Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
        (None, a) => a,
    };
    let live = match live_at {
        Some(a) => {
            let e = super::live::Exporter::start(a, worker.as_ref().map(|w| (w.index, w.count)))
                .map_err(|e| Fatal::io(format!("--live-metrics {a}"), e))?;
            crate::redact::say!("ringperf: live figures at http://{}/metrics", e.addr);
            Some(e)
        }
        None => None,
    };
    if sweep.is_sweep {
        // Each point sends its own count: every prompt is prepared.
        spec.workload.sends_at_most = Some(u64::MAX);
    }
    // Everything the flags say is checked before anything is started, asked or prepared.
    let (checked, plan_bytes) = crate::plan::Plan::check(&spec)?;
    if sweep.resume && !sweep.is_sweep && sweep.repeats.runs == 1 {
        return Err(Fatal::Refused(
            "--resume continues a sweep (a list on --concurrency or --request-rate) or \
             repeated runs (--num-profile-runs)"
                .into(),
        ));
    }
    if let Some(line) = &peer.native {
        crate::redact::say!(
            "ringperf: {} command line, runs as: {line}",
            peer.dialect.name()
        );
    }
    for n in peer.notes.iter().chain(&notes) {
        crate::redact::say!("ringperf: note: {n}");
    }
    if sim.is_some() && spec.target.model.is_empty() {
        spec.target.model = "ringperf-sim".into();
    }
    // The span receiver listens before anything is sent (the simulator's spans included).
    let (traces, traces_wait_ns) = match &traces {
        Some((addr, wait)) => {
            let r = crate::otlp::Receiver::start(addr)?;
            crate::redact::say!(
                "ringperf: server traces: receiving OTLP/HTTP spans on {}/v1/traces (start vLLM \
                 with --otlp-traces-endpoint {} and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=\
                 http/protobuf)",
                r.endpoint(),
                r.endpoint()
            );
            (Some(r), *wait)
        }
        None => (None, 0),
    };
    let (sim, reserved) = match &sim {
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
        let (listed, waited) = choose_model(&mut spec.target, preflight, ready)?;
        // Start-up is ringperf's own work: the wait for the server is not.
        started.0 += waited;
        listed
    };
    crate::redact::say!(
        "ringperf: preparing {}{}",
        preparing(&checked.workload),
        match plan_bytes {
            0 => String::new(),
            b => format!(" (about {:.0} MB of memory)", b as f64 / 1e6),
        }
    );
    // Without a list the flags stand as given; a sweep's plan starts at its first point.
    let load = spec.load.clone();
    if sweep.is_sweep {
        sweep.points[0].apply(&mut spec);
    }
    let mut plan = Plan::build(spec)?;
    let on_host = host_streams(&plan, &worker);
    spread_sources(&mut plan, on_host);
    if let Some((caps, step)) = &sweep.staircase {
        plan.load.staircase(caps.clone(), *step)?;
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
        telemetry,
        traces_wait_ns,
        slo_attainment,
        peer,
        worker,
        live,
        _made: made,
    };
    // Every point is planned and checked before the first is run.
    for p in prepared.points()? {
        check_host(
            &p.1,
            prepared.sim.is_some(),
            host_streams(&p.1, &prepared.worker),
        )?;
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
        return Err(Fatal::Refused(format!(
            "{flag} decides each next load from what was measured, which one node of {} cannot \
             judge alone: sweep a list of loads instead (--concurrency 8,16,32)",
            plan.load.nodes.count
        )));
    }
    let several = sweep.is_sweep || sweep.repeats.runs > 1;
    let l = &plan.spec.load;
    if several && (l.start_at_unix_ns.is_none() || l.benchmark_duration_ns.is_none()) {
        return Err(Fatal::Refused(
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
    pub(super) fn timetable(&self, k: usize) -> Option<u64> {
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
    pub(super) fn points(&self) -> Result<Vec<(Point, Plan)>, Fatal> {
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
    pub(super) fn point_plan(&self, p: &Point) -> Result<Plan, Fatal> {
        let mut plan = self.plan.clone();
        plan.spec.load = self.load.clone();
        p.apply(&mut plan.spec);
        if self.sweep.auto.is_some() && p.axis == crate::plan::sweep::Axis::RequestRate {
            // --concurrency is the saturated run's; the rates between run uncapped.
            plan.spec.load.concurrency = None;
        }
        let refused = |source| Fatal::Point {
            point: p.label(),
            source,
        };
        if p.axis.is_workload() {
            // Each point has prompts of its own.
            plan = Plan::build(plan.spec.clone()).map_err(refused)?;
        } else {
            plan.load = Load::build(&plan.spec.load, plan.spec.workload.random_seed, None)
                .map_err(refused)?;
        }
        plan.output.artifact_dir = self.root.join(p.name());
        Ok(plan)
    }
}
