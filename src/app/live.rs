//! Live figures while a run runs, for people and programs outside it: each process serves its
//! shards' counters as Prometheus text (`--live-metrics`, and every worker of a split run), and
//! the parent of a split run reads its workers' pages and shows their sum. Off the hot path:
//! the page is made from the counters the progress line reads, on a thread of its own.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::engine::{Live, Progress, View};
use crate::stats::LiveBuckets;

/// What the page shows: the run's shards, once it runs.
#[derive(Default)]
struct Board {
    progress: Vec<Arc<Progress>>,
    /// (worker, workers) for a worker of a split run.
    worker: Option<(u64, u64)>,
}

/// A Prometheus page of this process's live figures, served at `/metrics`.
pub(super) struct Exporter {
    board: Arc<Mutex<Board>>,
    /// Where it listens.
    pub(super) addr: SocketAddr,
}

impl Exporter {
    /// Listens on `addr` (port 0: a free one) and serves until the process ends.
    pub(super) fn start(addr: SocketAddr, worker: Option<(u64, u64)>) -> std::io::Result<Exporter> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let board = Arc::new(Mutex::new(Board {
            progress: Vec::new(),
            worker,
        }));
        let b = board.clone();
        std::thread::Builder::new()
            .name("ringperf-live".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    let _ = answer(conn, &b);
                }
            })?;
        Ok(Exporter { board, addr })
    }

    /// `view`, with this page showing the run it is given.
    pub(super) fn tee<'a>(&'a self, view: &'a mut dyn View) -> Tee<'a> {
        Tee {
            board: &self.board,
            view,
        }
    }
}

/// A view that also hands the run's counters to the page.
pub(super) struct Tee<'a> {
    board: &'a Mutex<Board>,
    view: &'a mut dyn View,
}

impl View for Tee<'_> {
    fn tick(&mut self, live: &Live<'_>) {
        if let Ok(mut b) = self.board.lock() {
            if b.progress.len() != live.progress.len()
                || !b
                    .progress
                    .iter()
                    .zip(live.progress)
                    .all(|(a, b)| Arc::ptr_eq(a, b))
            {
                b.progress = live.progress.to_vec();
            }
        }
        self.view.tick(live);
    }

    fn end(&mut self) {
        self.view.end();
    }
}

/// Answers one request: `GET /metrics` (or `/`) with the page, anything else with 404.
fn answer(mut conn: TcpStream, board: &Mutex<Board>) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    // The request head, capped: nothing here needs more.
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let (status, body) = if line.starts_with(b"GET /metrics ") || line.starts_with(b"GET / ") {
        let page = match board.lock() {
            Ok(b) => page(&b.progress, b.worker),
            Err(_) => String::new(),
        };
        ("200 OK", page)
    } else {
        ("404 Not Found", "GET /metrics\n".to_string())
    };
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// The Prometheus text of `progress`' counters (summed over the shards).
pub(super) fn page(progress: &[Arc<Progress>], worker: Option<(u64, u64)>) -> String {
    use std::fmt::Write as _;
    use std::sync::atomic::Ordering::Relaxed;
    let sum = |f: fn(&Progress) -> u64| progress.iter().map(|p| f(p)).sum::<u64>();
    let mut s = String::with_capacity(24 * 1024);
    if let Some((i, n)) = worker {
        s.push_str("# HELP ringperf_worker This process's place among the workers of one run.\n");
        s.push_str("# TYPE ringperf_worker gauge\n");
        let _ = writeln!(s, "ringperf_worker{{index=\"{i}\",count=\"{n}\"}} 1");
    }
    let started = progress.iter().any(|p| p.first_sent_ns.load(Relaxed) > 0);
    for (name, kind, help, v) in [
        (
            "ringperf_running",
            "gauge",
            "1 once the first request was sent.",
            u64::from(started),
        ),
        (
            "ringperf_requests_finished_total",
            "counter",
            "Measured requests finished, whatever their outcome.",
            sum(|p| p.done.load(Relaxed)),
        ),
        (
            "ringperf_requests_failed_total",
            "counter",
            "Measured requests that failed.",
            sum(|p| p.errors.load(Relaxed)),
        ),
        (
            "ringperf_requests_in_flight",
            "gauge",
            "Requests in flight now.",
            sum(|p| p.in_flight.load(Relaxed)),
        ),
        (
            "ringperf_output_tokens_total",
            "counter",
            "Output tokens of measured requests that succeeded.",
            sum(|p| p.output_tokens.load(Relaxed)),
        ),
    ] {
        let _ = write!(
            s,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n"
        );
    }
    s.push_str("# HELP ringperf_outcomes_total Measured requests by outcome other than ok.\n");
    s.push_str("# TYPE ringperf_outcomes_total counter\n");
    for (k, kind) in crate::record::LIVE_KINDS.iter().enumerate() {
        let v: u64 = progress.iter().map(|p| p.outcomes[k].load(Relaxed)).sum();
        let _ = writeln!(s, "ringperf_outcomes_total{{outcome=\"{kind}\"}} {v}");
    }
    for (name, what, f) in [
        (
            "ringperf_time_to_first_token_seconds",
            "Time to first token of measured requests",
            (|p: &Progress| &p.ttft_us) as fn(&Progress) -> &LiveBuckets,
        ),
        (
            "ringperf_inter_token_latency_seconds",
            "Time between tokens of measured requests",
            |p: &Progress| &p.itl_us,
        ),
    ] {
        let counts = LiveBuckets::sum(progress.iter().map(|p| f(p)));
        let _ = write!(
            s,
            "# HELP {name} {what} (buckets 1/8 octave wide; the sum is estimated from the \
             buckets' middles).\n# TYPE {name} histogram\n"
        );
        let (mut total, mut sum_s) = (0u64, 0.0);
        for (i, c) in counts.iter().enumerate() {
            total += c;
            sum_s += *c as f64 * LiveBuckets::middle(i) / 1e6;
            // The buckets count µs; Prometheus's bounds are seconds.
            let le = LiveBuckets::upper(i) / 1e6;
            let _ = writeln!(s, "{name}_bucket{{le=\"{le:e}\"}} {total}");
        }
        let _ = writeln!(s, "{name}_bucket{{le=\"+Inf\"}} {total}");
        let _ = writeln!(s, "{name}_sum {sum_s}");
        let _ = writeln!(s, "{name}_count {total}");
    }
    s
}

/// Fetches `http://addr/metrics`, quickly or not at all.
pub(super) fn scrape(addr: SocketAddr) -> Option<crate::prom::Exposition> {
    let to = crate::blocking::To { addr, tls: None };
    let request = crate::blocking::request("GET", "/metrics", &addr.to_string(), &[], "text/plain");
    let page = crate::blocking::fetch(&to, &request, Duration::from_secs(2), 4 << 20).ok()?;
    if page.status != 200 {
        return None;
    }
    crate::prom::parse(std::str::from_utf8(&page.body).ok()?).ok()
}

/// The workers' pages added up: what the parent of a split run shows.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Sum {
    /// Workers whose page was read.
    pub(super) read: usize,
    pub(super) finished: f64,
    pub(super) failed: f64,
    pub(super) in_flight: f64,
    pub(super) output_tokens: f64,
    /// TTFT bucket counts (cumulative, by bound), added.
    pub(super) ttft: Vec<(f64, f64)>,
}

impl Sum {
    /// Adds one worker's page.
    pub(super) fn add(&mut self, e: &crate::prom::Exposition) {
        self.read += 1;
        let get = |n: &str| {
            e.samples
                .iter()
                .find(|s| s.name == n)
                .map_or(0.0, |s| s.value)
        };
        self.finished += get("ringperf_requests_finished_total");
        self.failed += get("ringperf_requests_failed_total");
        self.in_flight += get("ringperf_requests_in_flight");
        self.output_tokens += get("ringperf_output_tokens_total");
        let buckets = e
            .samples
            .iter()
            .filter(|s| s.name == "ringperf_time_to_first_token_seconds_bucket")
            .filter_map(|s| Some((s.label("le")?.parse::<f64>().ok()?, s.value)));
        for (k, (le, v)) in buckets.enumerate() {
            match self.ttft.get_mut(k) {
                Some(b) if b.0 == le => b.1 += v,
                Some(_) => {}
                None => self.ttft.push((le, v)),
            }
        }
    }

    /// TTFT's `p`-th percentile (0–100), in ms: the bound of the bucket it falls in.
    pub(super) fn ttft_ms(&self, p: f64) -> Option<f64> {
        let total = self.ttft.last()?.1;
        if total <= 0.0 {
            return None;
        }
        let rank = (p / 100.0 * total).ceil().max(1.0);
        self.ttft
            .iter()
            .find(|(_, c)| *c >= rank)
            .map(|(le, _)| le * 1e3)
    }
}

/// The parent's live line for a split run: its workers' pages, added, every second.
pub(super) struct Merged {
    workers: Vec<Option<SocketAddr>>,
    show: bool,
    tty: bool,
    last_ns: u64,
    started_ns: u64,
    /// The last sum read, for the closing line.
    pub(super) last: Sum,
}

impl Merged {
    /// A line for `workers`' pages; shown when `show` (the run's `--ui`), redrawn on a
    /// terminal, else logged every ten seconds.
    pub(super) fn new(workers: &[Option<SocketAddr>], show: bool) -> Merged {
        let now = crate::clock::now_ns();
        Merged {
            workers: workers.to_vec(),
            show,
            tty: crate::sys::is_tty(libc::STDERR_FILENO),
            last_ns: now,
            started_ns: now,
            last: Sum::default(),
        }
    }

    /// Reads every page and adds them.
    pub(super) fn read(&mut self) -> Sum {
        let mut sum = Sum::default();
        for e in self.workers.iter().flatten().filter_map(|a| scrape(*a)) {
            sum.add(&e);
        }
        sum
    }

    /// Called often: reads and shows the sum when it is time.
    pub(super) fn tick(&mut self) {
        let now = crate::clock::now_ns();
        let every = if self.tty {
            1_000_000_000
        } else {
            10_000_000_000
        };
        if !self.show || now - self.last_ns < every {
            return;
        }
        self.last_ns = now;
        self.last = self.read();
        let s = &self.last;
        let secs = (now - self.started_ns) as f64 / 1e9;
        let ttft = match (s.ttft_ms(50.0), s.ttft_ms(99.0)) {
            (Some(a), Some(b)) => format!("TTFT p50 {a:.0} p99 {b:.0} ms"),
            _ => "TTFT -".into(),
        };
        let line = format!(
            "[ringperf] {} of {} workers  done {}  in flight {}  errors {}  {:.1} req/s  {ttft}",
            s.read,
            self.workers.len(),
            s.finished,
            s.in_flight,
            s.failed,
            s.finished / secs.max(1e-9),
        );
        if self.tty {
            crate::redact::draw(&format!("\r\x1b[2K{line}"));
        } else {
            crate::redact::say!("{line}");
        }
    }

    /// The run is over: ends the line drawn on a terminal.
    pub(super) fn end(&mut self) {
        if self.show && self.tty {
            crate::redact::draw("\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn a_page_reads_back_and_adds_up_over_workers() {
        let shards: Vec<Arc<Progress>> = (0..2).map(|_| Arc::new(Progress::default())).collect();
        shards[0].done.store(7, Relaxed);
        shards[1].done.store(5, Relaxed);
        shards[1].errors.store(2, Relaxed);
        shards[0].in_flight.store(3, Relaxed);
        shards[1].output_tokens.store(40, Relaxed);
        shards[0].outcomes[1].store(2, Relaxed);
        // TTFT 10 ms (x9) and 100 ms (x1).
        for _ in 0..9 {
            shards[0].ttft_us.record(10_000);
        }
        shards[1].ttft_us.record(100_000);
        let text = page(&shards, Some((1, 4)));
        let e = crate::prom::parse(&text).unwrap();
        let get = |n: &str| e.samples.iter().find(|s| s.name == n).unwrap().value;
        assert_eq!(get("ringperf_requests_finished_total"), 12.0);
        assert_eq!(get("ringperf_requests_failed_total"), 2.0);
        assert_eq!(get("ringperf_time_to_first_token_seconds_count"), 10.0);
        let sum = get("ringperf_time_to_first_token_seconds_sum");
        assert!((sum - 0.19).abs() < 0.19 * 0.05, "{sum}");
        let http5 = e
            .samples
            .iter()
            .find(|s| s.name == "ringperf_outcomes_total" && s.label("outcome") == Some("http_5xx"))
            .unwrap();
        assert_eq!(http5.value, 2.0);
        assert_eq!(
            e.kind("ringperf_time_to_first_token_seconds_bucket"),
            crate::prom::Kind::Histogram
        );
        // Two workers with this page: twice everything, the same percentiles.
        let mut s = Sum::default();
        s.add(&e);
        s.add(&e);
        assert_eq!(
            (s.read, s.finished, s.failed, s.in_flight, s.output_tokens),
            (2, 24.0, 4.0, 6.0, 80.0)
        );
        let p50 = s.ttft_ms(50.0).unwrap();
        assert!((10.0..10.0 * 2f64.powf(1.0 / 8.0)).contains(&p50), "{p50}");
        let p99 = s.ttft_ms(99.0).unwrap();
        assert!(
            (100.0..100.0 * 2f64.powf(1.0 / 8.0)).contains(&p99),
            "{p99}"
        );
        assert_eq!(Sum::default().ttft_ms(50.0), None);
    }
}
