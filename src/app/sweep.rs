//! A sweep: several loads (a list, a search or `--sweep auto`), each run
//! `--num-profile-runs` times, with the summary rewritten after every point.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::prepare::{prepare, Prepared};
use super::profile::{load_title, measure, nothing_measured};
use super::{write_report, Fatal, Flags};
use crate::cli::ProfileArgs;
use crate::plan::sweep::{Point, Search};
use crate::plan::{Load, Plan};
use crate::report;

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
        .map_err(|e| Fatal::io(format!("writing {}", path.display()), e))
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
    run(Flags::of(args)?, stop, print)
}

/// [`sweep`], from its resolved flags.
pub(super) fn run(flags: Flags, stop: Arc<AtomicBool>, print: bool) -> Result<SweepResult, Fatal> {
    let p = prepare(flags)?;
    let root = p.root.clone();
    crate::sys::interrupt_gracefully();
    let mut s = Sweeper {
        p: &p,
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
    if p.peer.genai_perf_analyze && !s.out.rows.is_empty() {
        analyze_csv(&p, &s.out.rows)?;
    }
    let out = s.out;
    let repeated = p.sweep.repeats.runs > 1;
    drop(p);
    if print && (out.rows.len() > 1 || repeated) {
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
        return Err(Fatal::NothingMeasured(format!(
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
                plan.load = Load::build(&plan.spec.load, plan.spec.workload.random_seed, None)?;
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
            Fatal::io(
                format!("writing the sweep summary to {}", self.p.root.display()),
                e,
            )
        })
    }
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
    write().map_err(|e| Fatal::io(format!("writing {}", dir.display()), e))
}
