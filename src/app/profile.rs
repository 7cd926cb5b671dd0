//! `ringperf profile`: one measured run, from the plan to the artifacts and the gates.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::prepare::{prepare, Prepared};
use super::{write_report, Fatal, Flags};
use crate::cli::ProfileArgs;
use crate::clock::unix_time_secs;
use crate::plan::Plan;
use crate::report::{self, export, Report};

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

/// Judges the `--fail-on` gates on the run's JSON, says each on stderr, and writes
/// `gates.junit.xml`.
fn judge_gates(
    plan: &Plan,
    report: &Report,
    doc: &serde_json::Value,
    dir: &std::path::Path,
) -> Result<Vec<report::gates::Judged>, Fatal> {
    let out = &plan.spec.output;
    if out.gates.is_empty() && report.threshold_crossed.is_none() {
        return Ok(Vec::new());
    }
    let h = &report.health;
    let limited = h.limited.then_some(h.verdict.as_str());
    let mut judged = report::gates::judge(&out.gates, doc, limited, out.allow_client_limited);
    if let Some(why) = &report.threshold_crossed {
        judged.push(report::gates::Judged {
            name: "--failed-request-threshold".into(),
            figure: Some(report.failed as f64 / (report.completed + report.failed).max(1) as f64),
            failure: Some(format!("--failed-request-threshold: {why}")),
        });
    }
    for j in &judged {
        match &j.failure {
            Some(f) => crate::redact::say!("ringperf: gate FAILED: {f}"),
            None => crate::redact::say!("ringperf: gate passed: {}", j.name),
        }
    }
    crate::artifact::write(&dir.join("gates.junit.xml"), report::gates::junit(&judged)).map_err(
        |e| {
            Fatal::io(
                format!("writing {}", dir.join("gates.junit.xml").display()),
                e,
            )
        },
    )?;
    Ok(judged)
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
pub(super) struct Measured {
    pub(super) report: Report,
    pub(super) doc: serde_json::Value,
    pub(super) gates: Vec<report::gates::Judged>,
    pub(super) console: String,
}

/// Runs `plan` once: places the shards, samples telemetry, runs, reports, writes the
/// artifacts into the plan's folder and judges the gates. `startup` (for the process's first
/// run) is when start-up began. `title` names the load.
pub(super) fn measure(
    mut plan: Plan,
    p: &Prepared,
    stop: Arc<AtomicBool>,
    title: &str,
    startup: Option<(u64, &'static str)>,
    print: bool,
) -> Result<Measured, Fatal> {
    let placement = crate::engine::place(&plan, &p.reserved)?;
    crate::redact::say!("ringperf: shards: {}", placement.reason);
    plan.output.title = title.to_string();
    let plan = Arc::new(plan);
    let spare = placement.spare_cpu(&crate::cpus::usable_cpus());
    let telemetry = crate::telemetry::Telemetry::start(&p.telemetry, &plan, spare);
    // A worker starts when its parent says, once every worker is ready.
    let start_at = match &p.worker {
        Some(_) => match super::workers::Worker::ready(p.live.as_ref().map(|l| l.addr)) {
            Some(at) => Some(at),
            None => return Err(Fatal::Interrupted),
        },
        None => plan.spec.load.start_at_unix_ns,
    };
    let waited = start_at.map_or(0, |at| wait_until(at, &stop));
    if stop.load(Ordering::Relaxed) {
        return Err(Fatal::Interrupted);
    }
    let clock = crate::clock::Anchor::now();
    let start = unix_time_secs();
    let probe = p.sim.as_ref().map(|h| h.in_flight_probe());
    // Spans that came before this run (an earlier point's late ones) are not this run's.
    let stale = p.traces.as_ref().map_or(0, |r| r.take().spans.len() as u64);
    // Waiting for --start-at is no start-up work.
    let said_early = match startup {
        Some((started, from)) if print => p.ui.borrow_mut().startup(started + waited, from),
        _ => false,
    };
    let out = {
        let mut ui = p.ui.borrow_mut();
        let mut tee;
        let view: &mut dyn crate::engine::View = match &p.live {
            Some(l) => {
                tee = l.tee(&mut *ui);
                &mut tee
            }
            None => &mut *ui,
        };
        crate::engine::run(plan.clone(), placement, stop.clone(), probe, view)?
    };
    let end = unix_time_secs();
    let mut report = report::build(out, &report::Settings::of(&plan));
    report.about = Some(report::about::About::of(&plan, &report));
    if let Some(r) = &p.traces {
        report.server_traces = Some(server_traces(
            r,
            &report.records,
            p.traces_wait_ns,
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
        p.telemetry.gpu_price_eur_hour,
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
    let asked = crate::redact::model_shown(&plan.target.model);
    let model = match report
        .served_model
        .as_ref()
        .filter(|m| **m != plan.target.model)
    {
        Some(m) => format!("{} (asked: {asked})", crate::redact::model_shown(m)),
        None => asked,
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
        let s = first.saturating_sub(started + waited) as f64 / 1e9;
        if print && !said_early {
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
    .map_err(|e| Fatal::io(format!("writing artifacts to {}", dir.display()), e))?;
    report::node::write(&report, dir, plan.load.nodes, &clock, p.server_date.clone())
        .map_err(|e| Fatal::io(format!("writing artifacts to {}", dir.display()), e))?;
    if let Some(steps) = &plan.load.steps {
        let measured =
            report::staircase::steps(&report.records, report.tx_ns, steps, &plan.load.slos);
        let (json, text) = report::staircase::describe(&measured, steps.step_ns, p.slo_attainment);
        if print {
            crate::redact::print(&format!("Staircase:\n{text}"));
        }
        let mut j = serde_json::to_vec_pretty(&json).expect("plain data");
        j.push(b'\n');
        let path = dir.join(report::staircase::STAIRCASE_JSON);
        crate::artifact::write(&path, j)
            .map_err(|e| Fatal::io(format!("writing {}", path.display()), e))?;
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
pub(super) fn nothing_measured(plan: &Plan, report: &Report) -> Option<String> {
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
pub(super) fn load_title(plan: &Plan) -> String {
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
/// that asks for a sweep or repeated runs goes to [`super::sweep`].
pub fn profile(
    args: &ProfileArgs,
    stop: Arc<AtomicBool>,
    print: bool,
) -> Result<ProfileResult, Fatal> {
    let flags = Flags::of(args)?;
    if flags.several() {
        return Err(Fatal::Refused(
            "this command line asks for a sweep or repeated runs: run it with app::sweep".into(),
        ));
    }
    run(flags, stop, print)
}

/// [`profile`], from its resolved flags.
pub(super) fn run(
    flags: Flags,
    stop: Arc<AtomicBool>,
    print: bool,
) -> Result<ProfileResult, Fatal> {
    let p = prepare(flags)?;
    crate::sys::interrupt_gracefully();
    let plan = p.plan.clone();
    let title = load_title(&plan);
    let m = measure(plan.clone(), &p, stop, &title, Some(p.started), print)?;
    // The simulator stops here, before the report is written.
    let peer = p.peer.clone();
    drop(p);
    // The page too, when nothing completed: its charts show what failed, and when.
    write_report(&plan.output.artifact_dir, print)?;
    if let Some(why) = nothing_measured(&plan, &m.report) {
        return Err(Fatal::NothingMeasured(why));
    }
    peer_outputs(&peer, &plan, &m.report, print)?;
    Ok(ProfileResult {
        gates: m.gates,
        artifact_dir: plan.output.artifact_dir.clone(),
        report: m.report,
        console: m.console,
    })
}

/// What a peer's command line asked to be written too: vLLM's result file and console
/// block, and its per-request timeline.
fn peer_outputs(
    peer: &crate::cli::port::Peer,
    plan: &Plan,
    r: &Report,
    print: bool,
) -> Result<(), Fatal> {
    let dir = &plan.output.artifact_dir;
    let write = |path: &std::path::Path, bytes: &[u8], append: bool| {
        if append {
            crate::artifact::append_line(path, bytes)
        } else {
            crate::artifact::write(path, bytes)
        }
    };
    if let Some(v) = &peer.vllm {
        // vLLM's date stamp (UTC here), as its file names carry it.
        let iso = crate::clock::iso8601(unix_time_secs());
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
                .map_err(|e| Fatal::io(format!("--result-dir {}", folder.display()), e))?;
            let path = folder.join(report::peer::vllm_filename(v, &plan.target.model, &date));
            let text = serde_json::to_vec(&json).expect("plain data");
            write(&path, &text, v.append)
                .map_err(|e| Fatal::io(format!("writing {}", path.display()), e))?;
            crate::redact::say!("ringperf: vLLM's result file: {}", path.display());
        }
    }
    if let Some(t) = peer.timeline {
        let page = report::peer::timeline_html(r, t, &format!("{} timeline", plan.target.model));
        let path = dir.join("timeline.html");
        write(&path, page.as_bytes(), false)
            .map_err(|e| Fatal::io(format!("writing {}", path.display()), e))?;
        if print {
            crate::redact::say!("ringperf: timeline: {}", path.display());
        }
    }
    Ok(())
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
        crate::clock::iso8601(at as f64 / 1e9)
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
