//! One command over several processes of this host, when one process cannot hold its load
//! (every connection is an open file, and a process may open only so many): `profile` splits
//! its load into worker processes, one node of the node split each (`--node-count`), and
//! merges their results into one report; `sim --replicas` serves its replicas from processes
//! of their own. A child is this same binary with the same command line and one variable in
//! its environment naming its part; it runs in a process group of its own, so that a
//! terminal's Ctrl-C reaches the parent alone, which tells a worker to stop on its stdin (a
//! simulator part with SIGINT), and a parent that dies takes it along.

use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{write_report, Fatal, Flags};

/// The variable that makes a `profile` process a worker: its [`Worker`] as JSON.
pub(super) const WORKER_ENV: &str = "RINGPERF_WORKER";
/// The variable that makes a `sim` process serve part of the replicas: `INDEX/COUNT`.
pub(super) const SIM_PART_ENV: &str = "RINGPERF_SIM_PART";
/// Open files a process keeps for itself beside its connections.
pub(super) const RESERVED_FILES: u64 = 256;
/// The most worker processes one command starts.
pub(super) const MAX_PROCESSES: u64 = 256;

/// A worker's part of the load, as its parent gives it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(super) struct Worker {
    /// This worker, from 0.
    pub(super) index: u64,
    /// Workers in all.
    pub(super) count: u64,
    /// Where it writes its run.
    pub(super) dir: PathBuf,
    /// The model the parent chose (empty: as the flags say).
    pub(super) model: String,
}

impl Worker {
    /// This process's part, when it is a worker.
    pub(super) fn of_env() -> Result<Option<Worker>, Fatal> {
        match std::env::var(WORKER_ENV) {
            Err(_) => Ok(None),
            Ok(v) => serde_json::from_str(&v)
                .map(Some)
                .map_err(|e| Fatal::Refused(format!("{WORKER_ENV}: {e}"))),
        }
    }

    /// Says on stdout that the run is ready to start, with the address of its live figures,
    /// and waits for its parent's start time (Unix ns) on stdin. `None`: the parent is gone
    /// or said stop. From then on a `stop` line on stdin stops the run as Ctrl-C does, and
    /// so does the end of stdin (the parent is gone, or has read the last figures).
    pub(super) fn ready(live: Option<std::net::SocketAddr>) -> Option<u64> {
        let mut out = std::io::stdout().lock();
        let said = match live {
            Some(a) => writeln!(out, "ready {a}"),
            None => writeln!(out, "ready"),
        };
        said.and_then(|()| out.flush()).ok()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).ok()?;
        let at = line.trim().parse().ok()?;
        // A line, not a signal: a signal sent to every process of the command (pkill -f)
        // and passed on by the parent too would come twice, and a second ends at once.
        let stop = crate::sys::interrupt_flag();
        let reader = std::thread::spawn(move || {
            let mut line = String::new();
            while matches!(std::io::stdin().lock().read_line(&mut line), Ok(n) if n > 0) {
                if line.trim() == "stop" {
                    stop.store(true, Ordering::Relaxed);
                }
                line.clear();
            }
            stop.store(true, Ordering::Relaxed);
        });
        if let Ok(mut r) = STDIN_READER.lock() {
            *r = Some(reader);
        }
        Some(at)
    }

    /// Says on stdout that the run is written, and waits until the parent has read the last
    /// live figures (it closes stdin). A worker that never started (its run failed, or the
    /// parent stopped it first) ends at once: its parent reads the end of its output.
    pub(super) fn done() {
        let Some(reader) = STDIN_READER.lock().ok().and_then(|mut r| r.take()) else {
            return;
        };
        let mut out = std::io::stdout().lock();
        if writeln!(out, "done").and_then(|()| out.flush()).is_ok() {
            drop(out);
            // It ends at the end of stdin.
            let _ = reader.join();
        }
    }
}

/// The thread that reads a started worker's stdin for its stop, until the parent closes it.
static STDIN_READER: std::sync::Mutex<Option<std::thread::JoinHandle<()>>> =
    std::sync::Mutex::new(None);

/// This process's part of the simulator's replicas: (index, count), when it is one.
pub(super) fn sim_part() -> Option<(u64, u64)> {
    let v = std::env::var(SIM_PART_ENV).ok()?;
    let (i, n) = v.split_once('/')?;
    Some((i.parse().ok()?, n.parse().ok()?))
}

/// Starts this binary again with the same command line and `env` added; its stdout (and
/// stdin, when `input`) piped, its stderr to `stderr`.
fn spawn(env: (&str, String), input: bool, stderr: Stdio) -> std::io::Result<Child> {
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    cmd.args(std::env::args_os().skip(1))
        .env(env.0, env.1)
        .stdin(if input { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0);
    crate::sys::die_with_parent(&mut cmd);
    cmd.spawn()
}

/// The children's stdout lines, as they come: (child, line), `None` at its end.
fn lines(children: &mut [Child]) -> mpsc::Receiver<(usize, Option<String>)> {
    let (tx, rx) = mpsc::channel();
    for (i, c) in children.iter_mut().enumerate() {
        let out = c.stdout.take().expect("piped");
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                match line {
                    Ok(l) => {
                        if tx.send((i, Some(l))).is_err() {
                            return;
                        }
                    }
                    Err(_) => break,
                }
            }
            let _ = tx.send((i, None));
        });
    }
    rx
}

/// Tells every worker still running to stop, on its stdin: each finishes as on Ctrl-C.
fn tell_stop(children: &mut [Child]) {
    for c in children.iter_mut() {
        if let Some(stdin) = c.stdin.as_mut() {
            let _ = writeln!(stdin, "stop").and_then(|()| stdin.flush());
        }
    }
}

/// Sends SIGINT to every child still running: each finishes as on Ctrl-C.
fn interrupt(children: &mut [Child]) {
    for c in children.iter_mut() {
        if let Ok(None) = c.try_wait() {
            crate::sys::interrupt_process(c.id());
        }
    }
}

/// Waits for every child, passing a stop on to them once; returns their exit codes (a
/// child killed by a signal: 128 + it).
fn wait_all(
    children: &mut [Child],
    stop: &AtomicBool,
    pass_stop: fn(&mut [Child]),
    mut tick: impl FnMut(&mut [Child], &[Option<i32>]),
) -> Vec<i32> {
    let mut passed = false;
    let mut codes = vec![None; children.len()];
    loop {
        for (c, code) in children.iter_mut().zip(codes.iter_mut()) {
            if code.is_none() {
                if let Ok(Some(s)) = c.try_wait() {
                    use std::os::unix::process::ExitStatusExt;
                    *code = Some(s.code().unwrap_or(128 + s.signal().unwrap_or(0)));
                }
            }
        }
        if codes.iter().all(Option::is_some) {
            return codes.into_iter().map(|c| c.unwrap_or(0)).collect();
        }
        if stop.load(Ordering::Relaxed) && !passed {
            pass_stop(children);
            passed = true;
        }
        tick(children, &codes);
        // No call waits for the first of several children, or for a signal's flag: both are
        // looked at every 20 ms.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `sim --replicas N` from `processes` processes: each serves its share of the replicas
/// (consecutive ports), prints its ports, which come out here in replica order, and stops
/// when this process is stopped.
pub(super) fn sim(processes: u64, stop: &AtomicBool) -> Result<(), Fatal> {
    let mut children = Vec::new();
    for i in 0..processes {
        match spawn(
            (SIM_PART_ENV, format!("{i}/{processes}")),
            false,
            Stdio::inherit(),
        ) {
            Ok(c) => children.push(c),
            Err(e) => {
                interrupt(&mut children);
                return Err(Fatal::io("starting a simulator process", e));
            }
        }
    }
    crate::sys::interrupt_gracefully();
    let rx = lines(&mut children);
    // Each child's ports, in order: every line it prints before it serves is a port.
    let mut ports: Vec<Vec<String>> = vec![Vec::new(); children.len()];
    let mut ready = vec![false; children.len()];
    let mut shown = 0;
    let mut failed = None;
    while shown < children.len() && failed.is_none() && !stop.load(Ordering::Relaxed) {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok((i, Some(line))) if line == "ready" => ready[i] = true,
            Ok((i, Some(line))) => ports[i].push(line),
            Ok((i, None)) => failed = Some(i),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => failed = Some(shown),
        }
        while shown < children.len() && ready[shown] {
            for p in &ports[shown] {
                crate::redact::print(&format!("{p}\n"));
            }
            shown += 1;
        }
    }
    if let Some(i) = failed {
        interrupt(&mut children);
        wait_all(&mut children, &AtomicBool::new(false), interrupt, |_, _| {});
        return Err(Fatal::Refused(format!(
            "sim: simulator process {i} of {processes} ended before it served (its error is \
             above)"
        )));
    }
    let codes = wait_all(&mut children, stop, interrupt, |_, _| {});
    let stopped = stop.load(Ordering::Relaxed);
    match codes
        .iter()
        .position(|c| *c != 0 && !(stopped && *c >= 128))
    {
        Some(i) => Err(Fatal::Refused(format!(
            "sim: simulator process {i} of {processes} ended with exit code {}",
            codes[i]
        ))),
        None => Ok(()),
    }
}

/// How a `profile` load is split over processes.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Split {
    /// Worker processes.
    pub(super) processes: u64,
    /// Connections the load holds at most.
    pub(super) streams: u64,
    /// Open files one process may hold.
    pub(super) limit: u64,
    /// The load's name in the run's folder, as one process names it (`concurrency8`, …).
    pub(super) mode: String,
}

/// Worker processes for `streams` connections when a process may open `limit` files, or
/// `pinned` when the flags say; `None` for one process (this one).
pub(super) fn processes_for(streams: u64, limit: u64, pinned: Option<u64>) -> Option<u64> {
    let n = match pinned {
        Some(n) => n,
        None if limit <= RESERVED_FILES => 1,
        None => streams.div_ceil(limit - RESERVED_FILES).max(1),
    };
    (n > 1).then_some(n)
}

/// Whether `flags` need more than this process: `None` when it runs the load itself (one
/// process is enough, or this process is a worker already).
pub(super) fn split_of(flags: &Flags) -> Result<Option<Split>, Fatal> {
    let pinned = flags.spec.engine.processes;
    if pinned == Some(0) || pinned.is_some_and(|n| n > MAX_PROCESSES) {
        return Err(Fatal::Refused(format!(
            "--processes must be from 1 to {MAX_PROCESSES}"
        )));
    }
    // A worker runs its part; the in-process simulator holds both ends of each connection,
    // and the host check says what that needs.
    if flags.worker.is_some() || (flags.sim.is_some() && pinned.is_none()) {
        return Ok(None);
    }
    let (checked, _) = crate::plan::Plan::check(&flags.spec)?;
    let l = &checked.load;
    // A trace's streams are known once it is read: its cap, if any, says how many at most.
    let (streams, mode) = if checked.workload.fixed_schedule {
        let streams = match (l.concurrency, pinned) {
            (Some(c), _) => c,
            (None, Some(_)) => 1,
            (None, None) => return Ok(None),
        };
        let mode = match l.request_rate {
            Some(r) => format!("request_rate{r}"),
            None => "trace".into(),
        };
        (streams, mode)
    } else {
        let load = crate::plan::Load::build(l, checked.workload.random_seed, None)?;
        (load.streams, load.mode())
    };
    let limit = crate::sys::raise_nofile_limit();
    let Some(processes) = processes_for(streams, limit, pinned) else {
        return Ok(None);
    };
    if processes > MAX_PROCESSES {
        return Err(Fatal::Refused(format!(
            "{streams} connections need about {} open files, {processes} processes of {limit} \
             each, more than the {MAX_PROCESSES} one command starts: raise the open-files \
             limit, ask for fewer in flight, or split the load over hosts (--node-count)",
            streams.saturating_add(RESERVED_FILES)
        )));
    }
    let why = |what: &str| {
        Err(Fatal::Refused(format!(
            "{what}: one process runs it, and this load needs {processes} (about {} open \
             files, {limit} per process): lower --concurrency, or raise the open-files limit",
            streams.saturating_add(RESERVED_FILES)
        )))
    };
    if flags.sim.is_some() {
        return why(
            "--sim (the simulator in this process holds the other end of each connection: \
             run `ringperf sim --replicas` beside the client instead)",
        );
    }
    if flags.several() {
        return why("a sweep or repeated runs");
    }
    if l.nodes.is_split() {
        return why("a node of --node-count");
    }
    if l.concurrency.is_some_and(|c| c < processes) {
        return Err(Fatal::Refused(format!(
            "--processes {processes} is more than --concurrency {}: each process needs at \
             least one request in flight",
            l.concurrency.unwrap_or(0)
        )));
    }
    Ok(Some(Split {
        processes,
        streams,
        limit,
        mode,
    }))
}

/// The folder of worker `i`'s run inside the run's folder.
pub(super) fn worker_dir(root: &Path, i: u64) -> PathBuf {
    root.join("workers").join(format!("worker-{i:03}"))
}

/// Worker `i`'s log, beside its folder.
fn worker_log(root: &Path, i: u64) -> PathBuf {
    worker_dir(root, i).with_extension("log")
}

/// What the parent of a split run reports.
pub(super) struct SplitRun {
    /// Some `--fail-on` gate was crossed.
    pub(super) gates_crossed: bool,
    /// The load was cut short.
    pub(super) cancelled: bool,
}

/// Runs the load of `flags` split over `split.processes` workers: starts them, gives them
/// one start time once every one is ready, shows their merged progress, passes a stop on,
/// and merges their runs into the run's folder as one report.
pub(super) fn profile(
    mut flags: Flags,
    split: Split,
    stop: &AtomicBool,
) -> Result<SplitRun, Fatal> {
    let n = split.processes;
    crate::redact::say!(
        "ringperf: {} connections at most, {} open files per process: the load runs in {n} \
         worker processes, merged into one report",
        split.streams,
        split.limit
    );
    // The model and the folder are decided once, here, so that every worker has the same.
    if flags.spec.target.model.is_empty() {
        let ready = flags.spec.target.ready_check_timeout_ns;
        super::prepare::choose_model(&mut flags.spec.target, false, ready)?;
    }
    let root = run_folder(&flags, &split.mode)?;
    let _made = super::prepare::check_artifact_dir(&root)?;
    let logs = root.join("workers");
    std::fs::create_dir_all(&logs)
        .map_err(|e| Fatal::io(format!("creating {}", logs.display()), e))?;
    let mut children = Vec::new();
    for index in 0..n {
        let w = Worker {
            index,
            count: n,
            dir: worker_dir(&root, index),
            model: flags.spec.target.model.clone(),
        };
        let log = worker_log(&root, index);
        let started = std::fs::File::create(&log).and_then(|f| {
            spawn(
                (WORKER_ENV, serde_json::to_string(&w).expect("plain")),
                true,
                f.into(),
            )
        });
        match started {
            Ok(c) => children.push(c),
            Err(e) => {
                tell_stop(&mut children);
                interrupt(&mut children);
                return Err(Fatal::io(format!("starting worker {index}"), e));
            }
        }
    }
    crate::sys::interrupt_gracefully();
    let rx = lines(&mut children);
    let mut live: Vec<Option<std::net::SocketAddr>> = vec![None; children.len()];
    let mut ready = 0;
    let mut failed = None;
    while ready < children.len() && failed.is_none() && !stop.load(Ordering::Relaxed) {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok((i, Some(line))) => {
                if let Some(rest) = line.strip_prefix("ready") {
                    live[i] = rest.trim().parse().ok();
                    ready += 1;
                }
            }
            Ok((i, None)) => failed = Some(i),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => failed = Some(0),
        }
    }
    if failed.is_some() || stop.load(Ordering::Relaxed) {
        // A worker still preparing ends at once on a signal; one waiting for its start reads
        // the stop.
        tell_stop(&mut children);
        interrupt(&mut children);
        wait_all(&mut children, &AtomicBool::new(false), tell_stop, |_, _| {});
        return Err(match failed {
            Some(i) => worker_failed(&root, i as u64),
            None => Fatal::Interrupted,
        });
    }
    // Every worker is ready: one start for all, a moment ahead.
    let at = (crate::clock::unix_time_secs() * 1e9) as u64 + 50_000_000;
    for c in &mut children {
        if let Some(stdin) = c.stdin.as_mut() {
            let _ = writeln!(stdin, "{at}").and_then(|()| stdin.flush());
        }
    }
    let mut view = super::live::Merged::new(&live, flags.spec.output.progress);
    // A worker that wrote its run says "done" and waits, serving its last figures, until
    // its stdin closes: once every worker has written or ended, the sum is read a last time.
    let mut done = vec![false; children.len()];
    let mut closed = false;
    let codes = wait_all(&mut children, stop, tell_stop, |children, codes| {
        while let Ok((i, line)) = rx.try_recv() {
            if line.as_deref() == Some("done") {
                done[i] = true;
            }
        }
        if !closed && done.iter().zip(codes).all(|(d, c)| *d || c.is_some()) {
            view.last = view.read();
            for c in children.iter_mut() {
                drop(c.stdin.take());
            }
            closed = true;
        }
        if !closed {
            view.tick();
        }
    });
    view.end();
    let dirs: Vec<PathBuf> = (0..n).map(|i| worker_dir(&root, i)).collect();
    let m = crate::report::merge::merge(&dirs, &root)?;
    crate::redact::print(&m.console);
    write_report(&root, true)?;
    for (i, c) in codes.iter().enumerate() {
        if *c != 0 && *c < 128 && *c != super::GATES_CROSSED {
            crate::redact::say!(
                "ringperf: worker {i} ended with exit code {c}: see {}",
                worker_log(&root, i as u64).display()
            );
        }
    }
    crate::redact::say!("ringperf: artifacts in {}", root.display());
    let doc: serde_json::Value = std::fs::read(root.join(crate::report::sweep::PROFILE_JSON))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    // The workers' live pages, read once all had written, against the merged report: two
    // counts of the same requests by different paths.
    let counted: f64 = [
        "request_count",
        "error_request_count",
        "request_cancelled_count",
    ]
    .iter()
    .filter_map(|k| doc[k]["avg"].as_f64())
    .sum();
    let live = &view.last;
    if live.read == children.len() && live.finished != counted {
        crate::redact::say!(
            "ringperf: warning: the workers' live figures counted {} finished requests, the \
             merged report {counted}",
            live.finished
        );
    }
    if !m.incomplete.is_empty() {
        return Err(Fatal::Refused(format!(
            "{} of {n} workers left no run: {}",
            m.incomplete.len(),
            m.incomplete.join("; ")
        )));
    }
    Ok(SplitRun {
        gates_crossed: codes.contains(&super::GATES_CROSSED),
        cancelled: doc["was_cancelled"].as_bool().unwrap_or(false),
    })
}

/// Worker `i` ended before it was ready: the last lines of its log say why.
fn worker_failed(root: &Path, i: u64) -> Fatal {
    let log = worker_log(root, i);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let why = text
        .lines()
        .rev()
        .find(|l| l.starts_with("error: "))
        .map(|l| l.trim_start_matches("error: ").to_string())
        .unwrap_or_else(|| format!("see {}", log.display()));
    Fatal::Refused(format!("worker {i} ended before the run began: {why}"))
}

/// The run's folder, as one process would name it.
fn run_folder(flags: &Flags, mode: &str) -> Result<PathBuf, Fatal> {
    let s = &flags.spec;
    let target = crate::plan::Target::build(&s.target)?;
    Ok(crate::plan::Output::build(&s.output, &target.model, target.kind.name(), mode).artifact_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_follow_the_open_files_limit() {
        // 100,000 connections where a process may open 20,000 files: 6 processes.
        assert_eq!(processes_for(100_000, 20_000, None), Some(6));
        assert_eq!(processes_for(19_000, 20_000, None), None);
        // A process holds its limit less the files it keeps for itself.
        assert_eq!(processes_for(19_744, 20_000, None), None);
        assert_eq!(processes_for(19_745, 20_000, None), Some(2));
        assert_eq!(processes_for(10, 20_000, Some(3)), Some(3));
        assert_eq!(processes_for(100_000, 20_000, Some(1)), None);
        assert_eq!(processes_for(100_000, 0, None), None);
    }

    #[test]
    fn a_worker_reads_back_as_written() {
        let w = Worker {
            index: 2,
            count: 6,
            dir: "a b/workers/worker-002".into(),
            model: "m \"x\"".into(),
        };
        let back: Worker = serde_json::from_str(&serde_json::to_string(&w).unwrap()).unwrap();
        assert_eq!(back, w);
    }
}
