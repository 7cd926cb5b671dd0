use crate::support;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::process::Stdio;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The screen as the emulator holds it, fed by a thread that reads the terminal.
struct Screen {
    parser: Arc<Mutex<vt100::Parser>>,
    /// A message per read (`false` once the terminal is closed).
    reads: mpsc::Receiver<bool>,
    /// Every byte the program wrote, in order.
    raw: Arc<Mutex<Vec<u8>>>,
}

impl Screen {
    fn watch(mut master: std::fs::File, cols: u16, rows: u16) -> Screen {
        let parser = Arc::new(Mutex::new(vt100::Parser::new(
            rows.try_into().unwrap(),
            cols.try_into().unwrap(),
            0,
        )));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let (tx, reads) = mpsc::channel();
        let (p, r) = (parser.clone(), raw.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            loop {
                match master.read(&mut buf) {
                    Ok(n) if n > 0 => {
                        p.lock().unwrap().process(&buf[..n]);
                        r.lock().unwrap().extend_from_slice(&buf[..n]);
                        if tx.send(true).is_err() {
                            return;
                        }
                    }
                    // EIO once the program's side is closed.
                    _ => {
                        let _ = tx.send(false);
                        return;
                    }
                }
            }
        });
        Screen { parser, reads, raw }
    }

    fn text(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }

    /// Waits (at most `limit`) until the screen satisfies `ok`; panics with the screen if not.
    fn until(&self, what: &str, limit: Duration, ok: impl Fn(&vt100::Screen) -> bool) {
        let end = Instant::now() + limit;
        loop {
            if ok(self.parser.lock().unwrap().screen()) {
                return;
            }
            let left = end.saturating_duration_since(Instant::now());
            match self.reads.recv_timeout(left) {
                Ok(true) => {}
                _ => panic!("no {what} within {limit:?}; the screen:\n{}", self.text()),
            }
        }
    }
}

/// Charts whose lines are drawn: braille cells other than the blank one.
fn drawn_cells(s: &vt100::Screen) -> usize {
    s.contents()
        .chars()
        .filter(|c| ('\u{2801}'..='\u{28ff}').contains(c))
        .count()
}

#[test]
fn the_dashboard_draws_the_run_pauses_and_quits_as_ctrl_c() {
    let _alone = support::alone();
    let (cols, rows) = (80, 24);
    let (master, slave) = ringperf::internals::sys::open_pty(cols, rows).unwrap();
    let typing = master.try_clone().unwrap();
    let dir = support::artifact_dir("dashboard");
    // Two points, each long enough to be watched: the second shows the first in its table.
    let mut child = support::ringperf()
        .args([
            "profile",
            "--sim=--ttft 5ms --itl 5ms",
            "--streaming",
            "--concurrency",
            "2,4",
            "--benchmark-duration",
            "3",
            "--output-tokens-mean",
            "20",
            "--ui",
            "dashboard",
            "--artifact-dir",
        ])
        .arg(&dir)
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let screen = Screen::watch(master, cols, rows);
    let limit = Duration::from_secs(30);

    // The first point's dashboard: every panel, the status, lines in the charts.
    screen.until("dashboard with drawn charts", limit, |s| {
        let t = s.contents();
        s.alternate_screen()
            && t.contains("Output tokens/s")
            && t.contains("TTFT (ms)")
            && t.contains("ITL (ms)")
            && t.contains("Shards")
            && t.contains("Errors")
            && drawn_cells(s) > 20
    });
    let first = screen.text();
    if std::env::var_os("RINGPERF_SHOW_FRAMES").is_some() {
        eprintln!("{first}");
    }
    assert!(first.contains("concurrency 2"), "{first}");
    assert!(first.contains("done "), "the status line: {first}");
    assert!(first.contains("p pause view"), "the keys: {first}");
    assert!(first.contains("none"), "no errors in a clean run: {first}");
    for line in first.lines() {
        assert!(line.chars().count() <= cols as usize, "{line}");
    }

    // The second point: its table holds the first point's figures.
    screen.until("the points so far", limit, |s| {
        let t = s.contents();
        s.alternate_screen() && t.contains("Sweep: points so far") && t.contains("concurrency 4")
    });
    let table = screen.text();
    let row = table
        .lines()
        .find(|l| l.contains("concurrency 2") && !l.contains("ringperf"))
        .unwrap_or_else(|| panic!("no row for the first point:\n{table}"));
    let rate: f64 = row
        .split("concurrency 2")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no req/s in {row:?}"));
    // Two streams of 5 ms + 19 × 5 ms: about 20 requests a second.
    assert!((5.0..40.0).contains(&rate), "{row}");

    // p pauses the view: it says so and draws nothing more until p again.
    typing.try_clone().unwrap().write_all(b"p").unwrap();
    screen.until("the paused mark", limit, |s| {
        s.contents().contains("[PAUSED]")
    });
    let paused_at = screen.raw.lock().unwrap().len();
    let frozen = screen.text();
    // Two redraws' time: a running view would have drawn in it.
    let _ = screen.reads.recv_timeout(Duration::from_millis(1000));
    assert_eq!(
        screen.raw.lock().unwrap().len(),
        paused_at,
        "drew while paused"
    );
    assert_eq!(screen.text(), frozen);
    typing.try_clone().unwrap().write_all(b"p").unwrap();
    screen.until("the view running again", limit, |s| {
        !s.contents().contains("[PAUSED]")
    });

    // q stops the run as Ctrl-C does: exit code 130, the terminal given back, what was
    // measured written.
    typing.try_clone().unwrap().write_all(b"q").unwrap();
    let end = Instant::now() + limit;
    // The program's side of the terminal closes when it ends.
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match screen.reads.recv_timeout(left) {
            Ok(true) => {}
            Ok(false) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("still running after q"),
        }
    }
    let status = child.wait().unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert_eq!(status.code(), Some(130), "stdout:\n{stdout}");
    screen.until("the terminal given back", limit, |s| !s.alternate_screen());
    let said = String::from_utf8_lossy(&screen.raw.lock().unwrap()).to_string();
    assert!(said.contains("interrupted by SIGINT"), "{said}");
    assert!(said.contains("ringperf: dashboard: "), "{said}");
    // The cursor shown again and the keys echoed again (the terminal as it was).
    assert!(said.contains("\x1b[?25h"), "cursor left hidden");
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: tcgetattr fills a termios we own, from the terminal we hold.
    assert_eq!(unsafe { libc::tcgetattr(typing.as_raw_fd(), &mut t) }, 0);
    assert_ne!(t.c_lflag & libc::ECHO, 0, "echo left off");
    assert_ne!(t.c_lflag & libc::ICANON, 0, "line editing left off");
    let second = dir.join("concurrency_4/profile_export_ringperf.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&second).unwrap()).unwrap();
    assert!(doc["request_count"]["avg"].as_f64().unwrap() > 0.0, "{doc}");
    assert!(dir
        .join("concurrency_2/profile_export_ringperf.json")
        .exists());
}
