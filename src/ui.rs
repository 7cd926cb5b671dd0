//! The live view of a run: the progress line (the default on a terminal) or the
//! full-terminal dashboard (`--ui dashboard`, AIPerf's `--ui-type dashboard`).
//!
//! Both are drawn by the engine's main thread at its watch ticks, off the shards, from the
//! counters the shards bump once per finished request. The dashboard takes the terminal's
//! alternate screen for the length of a run and gives it back after it, so that the console
//! report prints where it always does; a sweep's next point takes it again, with the points
//! measured so far.

use std::io::{BufWriter, Stderr};

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Chart, Dataset, GraphType, Paragraph, Row, Table};
use ratatui::{Frame, Terminal, TerminalOptions, Viewport};

use crate::engine::{LineView, Live, Progress, View};
use crate::plan::Plan;
use crate::record::LIVE_KINDS;
use crate::stats::LiveBuckets;

/// How often the dashboard redraws.
const DRAW_NS: u64 = 500_000_000;
/// How often it reads the keys typed.
const KEYS_NS: u64 = 50_000_000;
/// How often its charts take a point: rates and percentiles over the last interval.
const SAMPLE_NS: u64 = 1_000_000_000;
/// Points kept per chart (ten minutes; older ones scroll out).
const KEEP: usize = 600;

/// The view a run asks for.
pub(crate) enum Ui {
    /// The progress line (or nothing, when stderr is not a terminal or `--ui none`).
    Line(LineView),
    /// The full-terminal dashboard.
    Dashboard(Box<Dashboard>),
}

impl Ui {
    /// The view `plan` asks for: the dashboard only where stderr is a terminal (it says so
    /// otherwise).
    pub(crate) fn new(plan: &Plan) -> Ui {
        if plan.output.dashboard {
            if crate::sys::is_tty(libc::STDERR_FILENO) {
                return Ui::Dashboard(Box::default());
            }
            crate::redact::say!("ringperf: --ui dashboard: stderr is not a terminal; no live view");
        }
        Ui::Line(LineView::new(plan))
    }

    /// Says the start-up time when the first request leaves (from `origin`, named `from`);
    /// false where the view cannot (the dashboard holds the terminal): the run then says it
    /// after.
    pub(crate) fn startup(&mut self, origin: u64, from: &'static str) -> bool {
        match self {
            Ui::Line(l) => {
                l.startup(origin, from);
                true
            }
            Ui::Dashboard(_) => false,
        }
    }

    /// A sweep's points so far, for the dashboard's table.
    pub(crate) fn points(&mut self, rows: &[crate::report::sweep::Row]) {
        if let Ui::Dashboard(d) = self {
            d.points = rows.iter().map(PointRow::of).collect();
        }
    }
}

impl View for Ui {
    fn tick(&mut self, live: &Live<'_>) {
        match self {
            Ui::Line(l) => l.tick(live),
            Ui::Dashboard(d) => d.tick(live),
        }
    }

    fn end(&mut self) {
        match self {
            Ui::Line(l) => l.end(),
            Ui::Dashboard(d) => d.end(),
        }
    }
}

/// The terminal while the dashboard holds it.
struct Screen {
    /// Never dropped: ratatui's drop shows the cursor again and, when the terminal is gone,
    /// panics printing that it could not. [`Screen`]'s own drop gives the terminal back.
    term: std::mem::ManuallyDrop<Terminal<CrosstermBackend<BufWriter<Stderr>>>>,
    size: (u16, u16),
    /// Standard input's keys, when it is a terminal.
    keys: Option<crate::sys::Keys>,
}

impl Screen {
    /// Takes the terminal on stderr: its alternate screen, the cursor hidden, the keys.
    fn take() -> std::io::Result<Screen> {
        let size = crate::sys::terminal_size(libc::STDERR_FILENO).unwrap_or((80, 24));
        let mut out = BufWriter::new(std::io::stderr());
        execute!(out, terminal::EnterAlternateScreen, cursor::Hide)?;
        let term = Terminal::with_options(
            CrosstermBackend::new(out),
            TerminalOptions {
                viewport: Viewport::Fixed(Rect::new(0, 0, size.0, size.1)),
            },
        )?;
        Ok(Screen {
            term: std::mem::ManuallyDrop::new(term),
            size,
            keys: crate::sys::Keys::take(),
        })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(
            self.term.backend_mut(),
            cursor::Show,
            terminal::LeaveAlternateScreen
        );
    }
}

/// The shards' counters at one sample.
#[derive(Default)]
struct Counters {
    at_ns: u64,
    tokens: u64,
    ttft: Vec<u64>,
    itl: Vec<u64>,
    sched: Vec<Option<(u64, u64)>>,
}

impl Counters {
    fn read(live: &Live<'_>) -> Counters {
        let sum = |f: fn(&Progress) -> u64| live.progress.iter().map(|p| f(p)).sum();
        let merged =
            |f: fn(&Progress) -> &LiveBuckets| LiveBuckets::sum(live.progress.iter().map(|p| f(p)));
        Counters {
            at_ns: live.now_ns,
            tokens: sum(|p| p.output_tokens.load(std::sync::atomic::Ordering::Relaxed)),
            ttft: merged(|p| &p.ttft_us),
            itl: merged(|p| &p.itl_us),
            sched: live.sched.to_vec(),
        }
    }
}

/// One shard's share of the last interval.
#[derive(Default, Clone, Copy)]
struct ShardNow {
    /// On a CPU.
    cpu: f64,
    /// Runnable, waiting for a CPU.
    wait: f64,
}

/// A sweep's point measured so far.
struct PointRow {
    label: String,
    figures: [Option<f64>; 5],
    verdict: String,
}

/// The sweep figures the table shows, by name.
const POINT_FIGURES: [&str; 5] = [
    "request_throughput",
    "output_token_throughput",
    "ttft_p99_ms",
    "itl_p99_ms",
    "error_request_count",
];

impl PointRow {
    fn of(r: &crate::report::sweep::Row) -> PointRow {
        let figure = |name: &str| {
            crate::report::sweep::FIGURES
                .iter()
                .position(|(n, _)| *n == name)
                .and_then(|i| r.figures.get(i).copied().flatten())
        };
        PointRow {
            label: r.point.label(),
            figures: POINT_FIGURES.map(figure),
            verdict: r.verdict.clone(),
        }
    }
}

/// The charts' points: seconds since the start against the value.
#[derive(Default)]
struct Series {
    tokens: Vec<(f64, f64)>,
    ttft: [Vec<(f64, f64)>; 2],
    itl: [Vec<(f64, f64)>; 2],
}

impl Series {
    fn all(&mut self) -> [&mut Vec<(f64, f64)>; 5] {
        let [t50, t99] = &mut self.ttft;
        let [i50, i99] = &mut self.itl;
        [&mut self.tokens, t50, t99, i50, i99]
    }
}

/// What the dashboard cost its thread.
#[derive(Default)]
struct Cost {
    frames: u64,
    cpu_ns: u64,
    since_ns: u64,
}

/// The full-terminal live view.
#[derive(Default)]
pub(crate) struct Dashboard {
    screen: Option<Screen>,
    paused: bool,
    drawn_ns: u64,
    keys_ns: u64,
    last: Counters,
    series: Series,
    shards: Vec<ShardNow>,
    points: Vec<PointRow>,
    cost: Cost,
}

impl Dashboard {
    fn tick(&mut self, live: &Live<'_>) {
        // Once stopped (Ctrl-C, q), the terminal is given back at once: the run's last words
        // print on it, and a second Ctrl-C, which ends the process there and then, leaves it
        // as it was.
        if crate::sys::interrupted_by().is_some() {
            self.end();
            return;
        }
        let due = |at: u64, every: u64| live.now_ns.saturating_sub(at) >= every;
        let work = self.screen.is_none()
            || due(self.keys_ns, KEYS_NS)
            || due(self.last.at_ns, SAMPLE_NS)
            || (!self.paused && due(self.drawn_ns, DRAW_NS));
        if !work {
            // Nothing to do at this tick: not even the CPU clock is read.
            return;
        }
        let cpu0 = crate::clock::thread_cpu_ns();
        let mut redraw = false;
        if self.screen.is_none() {
            match Screen::take() {
                Ok(s) => self.screen = Some(s),
                Err(e) => {
                    crate::sys::write_failed(&e);
                    return;
                }
            }
            self.last = Counters::read(live);
            self.series = Series::default();
            self.shards = vec![ShardNow::default(); live.progress.len()];
            self.cost = Cost {
                since_ns: live.now_ns,
                ..Cost::default()
            };
            redraw = true;
        }
        let keys = due(self.keys_ns, KEYS_NS)
            .then(|| self.screen.as_ref().and_then(|s| s.keys.as_ref()))
            .flatten();
        if due(self.keys_ns, KEYS_NS) {
            self.keys_ns = live.now_ns;
        }
        for k in keys.map(|k| k.read()).unwrap_or_default() {
            match k {
                b'p' | b'P' | b' ' => {
                    self.paused = !self.paused;
                    redraw = true;
                }
                // Quitting is Ctrl-C: the run stops and what was measured is written.
                b'q' | b'Q' => crate::sys::interrupt(),
                _ => {}
            }
        }
        if due(self.last.at_ns, SAMPLE_NS) {
            self.sample(live);
        }
        if redraw || (due(self.drawn_ns, DRAW_NS) && !self.paused) {
            self.draw(live);
            self.drawn_ns = live.now_ns;
        }
        self.cost.cpu_ns += crate::clock::thread_cpu_ns().saturating_sub(cpu0);
    }

    /// Takes a point of each chart and the shards' shares of the interval since the last.
    fn sample(&mut self, live: &Live<'_>) {
        let now = Counters::read(live);
        let last = std::mem::replace(&mut self.last, now);
        let now = &self.last;
        let dt = now.at_ns.saturating_sub(last.at_ns).max(1) as f64;
        let x = now.at_ns.saturating_sub(live.started_ns) as f64 / 1e9;
        let per_s = |a: u64, b: u64| a.saturating_sub(b) as f64 * 1e9 / dt;
        self.series.tokens.push((x, per_s(now.tokens, last.tokens)));
        for (out, (a, b)) in [
            (&mut self.series.ttft, (&now.ttft, &last.ttft)),
            (&mut self.series.itl, (&now.itl, &last.itl)),
        ] {
            let new: Vec<u64> = a.iter().zip(b).map(|(a, b)| a.saturating_sub(*b)).collect();
            for (series, p) in out.iter_mut().zip([50.0, 99.0]) {
                if let Some(us) = LiveBuckets::quantile(&new, p) {
                    series.push((x, us / 1e3));
                }
            }
        }
        for s in self.series.all() {
            if s.len() > KEEP {
                s.drain(..s.len() - KEEP);
            }
        }
        for (i, shard) in self.shards.iter_mut().enumerate() {
            if let (Some(Some(a)), Some(Some(b))) = (now.sched.get(i), last.sched.get(i)) {
                shard.cpu = a.0.saturating_sub(b.0) as f64 / dt;
                shard.wait = a.1.saturating_sub(b.1) as f64 / dt;
            }
        }
    }

    fn draw(&mut self, live: &Live<'_>) {
        let Some(screen) = self.screen.as_mut() else {
            return;
        };
        if let Some(size) = crate::sys::terminal_size(libc::STDERR_FILENO) {
            if size != screen.size {
                screen.size = size;
                let _ = screen.term.resize(Rect::new(0, 0, size.0, size.1));
                let _ = screen.term.clear();
            }
        }
        let keys = screen.keys.is_some();
        let mut screen = self.screen.take().expect("held");
        let drawn = screen.term.draw(|f| self.render(f, live, keys));
        self.cost.frames += 1;
        match drawn {
            Ok(_) => self.screen = Some(screen),
            // The view ends; a terminal that went away also stops the run, as SIGHUP does.
            Err(e) => crate::sys::write_failed(&e),
        }
    }

    /// One frame: the status, the charts, the shards, the outcomes, the sweep's points.
    fn render(&self, f: &mut Frame<'_>, live: &Live<'_>, keys: bool) {
        let area = f.area();
        let points_h = if self.points.is_empty() {
            0
        } else {
            (self.points.len() as u16 + 3).min(area.height / 4).max(4)
        };
        let [head, status, body, points, foot] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Min(6),
            Constraint::Length(points_h),
            Constraint::Length(1),
        ])
        .areas(area);
        let bold = Style::default().add_modifier(Modifier::BOLD);
        let title = if live.plan.output.title.is_empty() {
            "ringperf".to_string()
        } else {
            format!("ringperf · {}", live.plan.output.title)
        };
        f.render_widget(Paragraph::new(Span::styled(title, bold)), head);
        let elapsed = live.now_ns.saturating_sub(live.started_ns);
        let line =
            crate::engine::progress_line(live.progress, live.plan, elapsed, status.width as usize);
        let line = line.trim_start_matches("[ringperf] ").to_string();
        f.render_widget(Paragraph::new(line), status);

        let [top, bottom] =
            Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(body);
        let [thr, ttft] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(top);
        // The tables take what their columns need (24 each); the ITL chart the rest.
        let [itl, shards, outcomes] = Layout::horizontal([
            Constraint::Min(30),
            Constraint::Length(24),
            Constraint::Length(24),
        ])
        .areas(bottom);
        let s = &self.series;
        f.render_widget(
            chart(
                "Output tokens/s",
                &[("tokens/s", &s.tokens, Color::Green)],
                true,
            ),
            thr,
        );
        f.render_widget(
            chart(
                "TTFT (ms)",
                &[
                    ("p50", &s.ttft[0], Color::Cyan),
                    ("p99", &s.ttft[1], Color::Magenta),
                ],
                false,
            ),
            ttft,
        );
        f.render_widget(
            chart(
                "ITL (ms)",
                &[
                    ("p50", &s.itl[0], Color::Cyan),
                    ("p99", &s.itl[1], Color::Magenta),
                ],
                false,
            ),
            itl,
        );
        f.render_widget(self.shard_table(live), shards);
        f.render_widget(outcome_table(live.progress), outcomes);
        if points_h > 0 {
            f.render_widget(self.point_table(), points);
        }
        let mut help = vec![Span::raw(if keys {
            " p pause view · q quit (as Ctrl-C: what was measured is written)"
        } else {
            " Ctrl-C stops the run (what was measured is written)"
        })];
        if self.paused {
            help.push(Span::styled("  [PAUSED]", bold.fg(Color::Yellow)));
        }
        f.render_widget(Paragraph::new(Line::from(help)), foot);
    }

    fn shard_table(&self, live: &Live<'_>) -> Table<'static> {
        let rows = self.shards.iter().enumerate().map(|(i, s)| {
            let in_flight = live.progress[i]
                .in_flight
                .load(std::sync::atomic::Ordering::Relaxed);
            Row::new(vec![
                i.to_string(),
                format!("{:.0}%", s.cpu * 100.0),
                format!("{:.0}%", s.wait * 100.0),
                in_flight.to_string(),
            ])
        });
        Table::new(
            rows,
            [
                Constraint::Length(3),
                Constraint::Length(4),
                Constraint::Length(4),
                Constraint::Min(7),
            ],
        )
        .header(header(&["#", "CPU", "wait", "streams"]))
        .block(Block::bordered().title("Shards"))
    }

    fn point_table(&self) -> Table<'static> {
        let rows = self.points.iter().map(|p| {
            let mut cells = vec![p.label.clone()];
            cells.extend(p.figures.iter().map(|v| match v {
                Some(v) => num(*v),
                None => "-".into(),
            }));
            // The verdict's answer, without its reasons.
            cells.push(p.verdict.split(':').next().unwrap_or("").to_string());
            Row::new(cells)
        });
        Table::new(
            rows,
            [
                Constraint::Length(18),
                Constraint::Length(7),
                Constraint::Length(9),
                Constraint::Length(8),
                Constraint::Length(7),
                Constraint::Length(6),
                Constraint::Min(8),
            ],
        )
        .header(header(&[
            "point",
            "req/s",
            "out tok/s",
            "TTFT p99",
            "ITL p99",
            "errors",
            "client",
        ]))
        .block(Block::bordered().title("Sweep: points so far"))
    }

    fn end(&mut self) {
        if self.screen.take().is_none() {
            return;
        }
        let secs = self.drawn_ns.saturating_sub(self.cost.since_ns) as f64 / 1e9;
        crate::redact::say!(
            "ringperf: dashboard: {} frames over {:.1} s, {:.1} ms of CPU ({:.2}% of one core)",
            self.cost.frames,
            secs,
            self.cost.cpu_ns as f64 / 1e6,
            self.cost.cpu_ns as f64 / 1e7 / secs.max(1e-9)
        );
    }
}

fn header(names: &[&'static str]) -> Row<'static> {
    Row::new(names.to_vec()).style(Style::default().add_modifier(Modifier::BOLD))
}

/// The measured requests whose outcome is not `ok`, by kind.
fn outcome_table(progress: &[std::sync::Arc<Progress>]) -> Table<'static> {
    let rows: Vec<Row> = LIVE_KINDS
        .iter()
        .enumerate()
        .filter_map(|(k, name)| {
            let n: u64 = progress
                .iter()
                .map(|p| p.outcomes[k].load(std::sync::atomic::Ordering::Relaxed))
                .sum();
            (n > 0).then(|| Row::new(vec![name.to_string(), n.to_string()]))
        })
        .collect();
    let rows = if rows.is_empty() {
        vec![Row::new(vec!["none".to_string(), String::new()])]
    } else {
        rows
    };
    Table::new(rows, [Constraint::Min(14), Constraint::Length(7)])
        .header(header(&["not ok", "count"]))
        .block(Block::bordered().title("Errors"))
}

/// A chart's series: its name, its points (seconds, value) and its colour.
type Set<'a> = (&'a str, &'a [(f64, f64)], Color);

/// A chart of series over time, its y axis from 0 (or the lowest value) to the highest.
fn chart<'a>(title: &'a str, sets: &[Set<'a>], zero: bool) -> Chart<'a> {
    let points = || sets.iter().flat_map(|(_, d, _)| d.iter());
    let (x0, x1) = points().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (y0, y1) = points().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let (x0, x1) = if x0 > x1 {
        (0.0, 1.0)
    } else {
        (x0, x1.max(x0 + 1.0))
    };
    let y0 = if zero || y0 > y1 { 0.0 } else { y0 * 0.9 };
    let y1 = if y1 < y0 {
        1.0
    } else {
        (y1 * 1.1).max(y0 + 1e-3)
    };
    let label = num;
    let datasets = sets
        .iter()
        .map(|(name, data, color)| {
            Dataset::default()
                .name(*name)
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(Style::default().fg(*color))
                .data(data)
        })
        .collect();
    Chart::new(datasets)
        .block(Block::bordered().title(title))
        .hidden_legend_constraints((Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)))
        .legend_position((sets.len() > 1).then_some(ratatui::widgets::LegendPosition::TopRight))
        .x_axis(
            Axis::default()
                .bounds([x0, x1])
                .labels([format!("{x0:.0}s"), format!("{x1:.0}s")]),
        )
        .y_axis(Axis::default().bounds([y0, y1]).labels([
            label(y0),
            label((y0 + y1) / 2.0),
            label(y1),
        ]))
}

/// A figure in about three significant digits.
fn num(v: f64) -> String {
    match v.abs() {
        _ if v.fract() == 0.0 => format!("{v:.0}"),
        a if a >= 100.0 => format!("{v:.0}"),
        a if a >= 10.0 => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}
