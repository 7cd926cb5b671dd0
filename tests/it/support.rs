//! Helpers shared by the integration tests: the simulator, the CLI, small fake servers.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use ringperf::cli::{Cli, Command, ProfileArgs, SimArgs};

/// Starts the simulator on a free loopback port with the given flags.
pub fn sim(flags: &str) -> ringperf::sim::SimHandle {
    let mut args = SimArgs::parse_inline(flags).expect("sim flags");
    args.bind = "127.0.0.1:0".into();
    ringperf::sim::start(&args.config().expect("sim config")).expect("sim starts")
}

/// Parses `ringperf profile …` flags.
pub fn profile_args(flags: &[&str]) -> ProfileArgs {
    let mut argv = vec!["ringperf", "profile", "--no-progress"];
    argv.extend_from_slice(flags);
    match Cli::try_parse_from(argv).expect("flags parse").command {
        Command::Profile(p) => *p,
        _ => unreachable!(),
    }
}

/// A fresh artifact folder under the target directory, its own for every call: a helper that
/// several tests call at once (they run in parallel) never gets a folder another one is using.
pub fn artifact_dir(name: &str) -> std::path::PathBuf {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, Ordering::Relaxed);
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Every file under `dir`, at any depth (artifacts include `plots/`).
pub fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Runs `ringperf profile FLAGS --artifact-dir DIR` in this process (flags split on spaces).
pub fn profile(
    flags: &str,
    dir: &std::path::Path,
) -> Result<ringperf::app::ProfileResult, ringperf::app::Fatal> {
    let mut argv: Vec<&str> = flags.split_whitespace().collect();
    let dir = dir.to_str().expect("utf-8 path");
    argv.extend(["--artifact-dir", dir]);
    ringperf::app::profile(
        &profile_args(&argv),
        Arc::new(AtomicBool::new(false)),
        false,
    )
}

/// A blocking fake server on loopback: `respond(request_number, request_body)` gives the
/// bytes to send and whether to close afterwards. Serves until dropped.
pub struct FakeServer {
    pub addr: SocketAddr,
    pub requests: Arc<AtomicUsize>,
    /// Where each connection it accepted came from.
    pub peers: Arc<std::sync::Mutex<Vec<SocketAddr>>>,
    stop: Arc<AtomicBool>,
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

pub fn fake_server<F>(respond: F) -> FakeServer
where
    F: Fn(usize, &[u8]) -> (Vec<u8>, bool) + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let respond = Arc::new(respond);
    let peers: Arc<std::sync::Mutex<Vec<SocketAddr>>> = Arc::default();
    let (r, s, p) = (requests.clone(), stop.clone(), peers.clone());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            if s.load(Ordering::Relaxed) {
                return;
            }
            let Ok(mut conn) = conn else { continue };
            if let Ok(a) = conn.peer_addr() {
                p.lock().unwrap().push(a);
            }
            let (r, respond) = (r.clone(), respond.clone());
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                while let Some(body) = read_request(&mut conn, &mut buf) {
                    let n = r.fetch_add(1, Ordering::Relaxed);
                    let (bytes, close) = respond(n, &body);
                    if conn.write_all(&bytes).is_err() || close {
                        return;
                    }
                }
            });
        }
    });
    FakeServer {
        addr,
        requests,
        peers,
        stop,
    }
}

/// Reads one request (head, then Content-Length bytes) from `conn`, keeping what follows in
/// `buf` for the next call; `None` when the connection ends first. Returns the body.
pub fn read_request(conn: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut tmp = [0u8; 4096];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse::<usize>().unwrap());
            if buf.len() >= i + 4 + len {
                return Some(buf.drain(..i + 4 + len).skip(i + 4).collect());
            }
        }
        match conn.read(&mut tmp) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
}

/// A capture from tests/data/captures.
pub fn capture(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/captures")
            .join(name),
    )
    .unwrap()
}

/// Relative difference.
pub fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b
}

/// Tests on a 2-core machine disturb each other's timings. Every test takes one of two guards
/// first: [`alone`] where it asserts a timing or burns CPU on purpose (nothing else runs beside
/// it), [`shared`] otherwise (any number of these run together). `every_test_takes_a_guard`
/// checks that none forgets.
static GUARD: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Runs the test with nothing else beside it.
pub fn alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    GUARD.write().unwrap_or_else(|e| e.into_inner())
}

/// Runs the test beside other `shared` tests, never beside an `alone` one.
pub fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    GUARD.read().unwrap_or_else(|e| e.into_inner())
}

/// A child's stderr, line by line.
pub type StderrLines = std::io::Lines<std::io::BufReader<std::process::ChildStderr>>;

/// Reads `lines` until `f` finds what it looks for in one, and returns that (a test waits for
/// a line, never for a fixed time). Panics when stderr ends first.
pub fn wait_for_line<T>(lines: &mut StderrLines, mut f: impl FnMut(&str) -> Option<T>) -> T {
    for line in lines.map_while(Result::ok) {
        if let Some(found) = f(&line) {
            return found;
        }
    }
    panic!("stderr ended before the line awaited");
}

/// Busy threads pinned to `cpu` until dropped (bounded to a minute whatever happens): each
/// busy `on` out of every `period` (all the time when they are equal).
pub struct Hogs {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Hogs {
    /// `n` threads busy all the time on `cpu`.
    pub fn on(cpu: usize, n: usize) -> Hogs {
        Hogs::pulsed(cpu, n, Duration::from_millis(1), Duration::from_millis(1))
    }

    /// `n` threads on `cpu`, each busy for `on` of every `period`, asleep the rest.
    pub fn pulsed(cpu: usize, n: usize, on: Duration, period: Duration) -> Hogs {
        let stop = Arc::new(AtomicBool::new(false));
        let (on, period) = (on.as_nanos() as u64, period.as_nanos() as u64);
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    ringperf::internals::sys::set_affinity(0, &[cpu]).expect("pin the hog");
                    let now = ringperf::internals::clock::now_ns;
                    let end = now() + 60_000_000_000;
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) && now() < end {
                        let busy_until = now() + on;
                        while now() < busy_until {
                            for i in 0..1_000u64 {
                                x = x.wrapping_mul(31).wrapping_add(i);
                            }
                            std::hint::black_box(x);
                        }
                        if period > on {
                            std::thread::sleep(Duration::from_nanos(period - on));
                        }
                    }
                })
            })
            .collect();
        Hogs { stop, threads }
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Sends the signal `name` (`INT`, `TERM`, `HUP`) to a child process.
pub fn signal(child: &std::process::Child, name: &str) {
    assert!(std::process::Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap()
        .success());
}

/// A loopback port that nothing listens on (bound, then let go).
pub fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The `ringperf` binary, with no API key from this environment and the Hugging Face hub kept
/// offline (tests reach loopback only).
pub fn ringperf() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_ringperf"));
    c.env_remove("OPENAI_API_KEY").env("HF_HUB_OFFLINE", "1");
    c
}
