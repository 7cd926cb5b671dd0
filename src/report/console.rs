//! The console table, in GenAI-Perf's layout, and the client-health lines under it.

use std::fmt::Write;

use super::metrics::PER_USER_SCALE;
use super::Report;
use crate::stats::Dist;

/// Rows with a distribution: label, the distribution, and the divisor to its unit.
pub(crate) fn dist_rows(r: &Report) -> Vec<(&'static str, &'static str, &Dist, f64)> {
    let m = &r.metrics;
    vec![
        (
            "time_to_first_token",
            "Time To First Token (ms)",
            &m.ttft,
            1e6,
        ),
        (
            "time_to_first_output_token",
            "Time To First Output Token (ms)",
            &m.ttfo,
            1e6,
        ),
        (
            "time_to_second_token",
            "Time To Second Token (ms)",
            &m.ttst,
            1e6,
        ),
        (
            "inter_token_latency",
            "Inter Token Latency (ms)",
            &m.itl,
            1e6,
        ),
        (
            "inter_chunk_latency",
            "Inter Chunk Latency (ms)",
            &m.icl,
            1e6,
        ),
        ("request_latency", "Request Latency (ms)", &m.latency, 1e6),
        (
            "output_sequence_length",
            "Output Sequence Length (tokens)",
            &m.osl,
            1.0,
        ),
        (
            "input_sequence_length",
            "Input Sequence Length (tokens)",
            &m.isl,
            1.0,
        ),
        (
            "output_token_throughput_per_user",
            "Output Token Throughput Per User (tokens/sec/user)",
            &m.per_user,
            PER_USER_SCALE,
        ),
        (
            "scheduled_time_to_first_token",
            "Scheduled Time To First Token (ms)",
            &m.sched_ttft,
            1e6,
        ),
        (
            "scheduled_request_latency",
            "Scheduled Request Latency (ms)",
            &m.sched_latency,
            1e6,
        ),
        (
            "dispatch_delay",
            "Dispatch Delay (ms)",
            &m.dispatch_delay,
            1e6,
        ),
        ("prefill_wait", "Prefill Wait (ms)", &r.prefill_wait, 1e6),
    ]
}

/// Single-value rows: label and value.
pub(crate) fn value_rows(r: &Report) -> Vec<(&'static str, &'static str, &'static str, f64)> {
    let mut rows = vec![
        (
            "output_token_throughput",
            "Output Token Throughput (tokens/sec)",
            "tokens/sec",
            r.output_tps(),
        ),
        (
            "input_token_throughput",
            "Input Token Throughput (tokens/sec)",
            "tokens/sec",
            r.input_tps(),
        ),
        (
            "total_token_throughput",
            "Total Token Throughput (tokens/sec)",
            "tokens/sec",
            r.output_tps() + r.input_tps(),
        ),
        (
            "request_throughput",
            "Request Throughput (requests/sec)",
            "requests/sec",
            r.request_tps(),
        ),
        (
            "request_count",
            "Request Count (requests)",
            "requests",
            r.completed as f64,
        ),
        (
            "error_request_count",
            "Error Request Count (requests)",
            "requests",
            r.failed as f64,
        ),
    ];
    if r.images > 0 {
        rows.push((
            "generated_image_throughput",
            "Generated Image Throughput (images/sec)",
            "images/sec",
            r.image_tps(),
        ));
        rows.push((
            "generated_image_count",
            "Generated Image Count (images)",
            "images",
            r.images as f64,
        ));
    }
    if r.request_cancelled > 0 {
        rows.push((
            "request_cancelled_count",
            "Cancelled Request Count (requests)",
            "requests",
            r.request_cancelled as f64,
        ));
    }
    if let Some(rate) = r.requested_rate {
        rows.push((
            "requested_request_rate",
            "Requested Rate (requests/sec)",
            "requests/sec",
            rate,
        ));
        rows.push((
            "scheduled_request_rate",
            "Scheduled Rate (requests/sec)",
            "requests/sec",
            r.scheduled_rate,
        ));
        rows.push((
            "achieved_request_rate",
            "Achieved Send Rate (requests/sec)",
            "requests/sec",
            r.achieved_rate,
        ));
    }
    if let Some(g) = &r.goodput {
        rows.push((
            "goodput",
            "Goodput (requests/sec)",
            "requests/sec",
            g.goodput,
        ));
        rows.push((
            "good_request_fraction",
            "Good Request Fraction",
            "ratio",
            g.good_fraction,
        ));
    }
    rows
}

fn num(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Renders the table and the health lines.
pub fn render(r: &Report, title: &str) -> String {
    let mut out = table(r, title);
    if let Some(a) = &r.about {
        out.push_str(&a.lines());
    }
    for (i, s) in r.servers.iter().enumerate() {
        let _ = writeln!(
            out,
            "server {i} {}: {} ok, {} failed, {:.1} tokens/s, TTFT p50 {:.2} ms p99 {:.2} ms",
            s.url,
            s.request_count,
            s.error_request_count,
            s.output_token_throughput,
            s.time_to_first_token_p50_ms,
            s.time_to_first_token_p99_ms
        );
    }
    if r.show_trace_timing && !r.http_trace.is_empty() {
        let _ = writeln!(
            out,
            "HTTP phases (ms)      avg       p50       p99       max"
        );
        for (tag, d) in &r.http_trace {
            let s = d.summary(1e6);
            let name = tag.trim_start_matches("http_req_");
            let _ = writeln!(
                out,
                "  {name:<16}{:>9.3} {:>9.3} {:>9.3} {:>9.3}",
                s.avg,
                s.at("p50"),
                s.at("p99"),
                s.max
            );
        }
    }
    if r.ttft_by_turn.len() > 1 {
        let turns: Vec<String> = r
            .ttft_by_turn
            .iter()
            .take(6)
            .map(|(t, d)| format!("{t}: {:.1}", d.summary(1e6).at("p50")))
            .collect();
        let more = if r.ttft_by_turn.len() > 6 { " …" } else { "" };
        let _ = writeln!(out, "TTFT p50 by turn (ms): {}{more}", turns.join("  "));
    }
    if r.warmup > 0 {
        let _ = writeln!(
            out,
            "Warm-up: {} requests over {:.1} s ({} failed), in no figure above",
            r.warmup,
            r.warmup_ns as f64 / 1e9,
            r.warmup_failed
        );
    }
    out.push_str(&health(r));
    out
}

/// Renders the table alone.
pub fn table(r: &Report, title: &str) -> String {
    // GenAI-Perf's columns, and the median people quote (AIPerf's table has it too).
    let cols = ["avg", "min", "max", "p99", "p90", "p75", "p50"];
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    for (_, label, d, scale) in dist_rows(r) {
        if d.count() == 0 {
            continue;
        }
        let s = d.summary(scale);
        rows.push((
            label.to_string(),
            vec![
                num(s.avg),
                num(s.min),
                num(s.max),
                num(s.at("p99")),
                num(s.at("p90")),
                num(s.at("p75")),
                num(s.at("p50")),
            ],
        ));
    }
    for (_, label, _, v) in value_rows(r) {
        let mut cells = vec![num(v)];
        cells.extend(std::iter::repeat_n("N/A".to_string(), cols.len() - 1));
        rows.push((label.to_string(), cells));
    }
    let w0 = rows
        .iter()
        .map(|r| r.0.chars().count())
        .max()
        .unwrap_or(9)
        .max(9);
    let wc: Vec<usize> = (0..cols.len())
        .map(|i| {
            rows.iter()
                .map(|r| r.1[i].len())
                .max()
                .unwrap_or(3)
                .max(cols[i].len())
        })
        .collect();
    let line = |l: char, m: char, r: char, h: char| {
        let mut s = String::new();
        s.push(l);
        s.extend(std::iter::repeat_n(h, w0 + 2));
        for w in &wc {
            s.push(m);
            s.extend(std::iter::repeat_n(h, w + 2));
        }
        s.push(r);
        s
    };
    let mut out = String::new();
    let width = w0 + 3 + wc.iter().map(|w| w + 3).sum::<usize>();
    let _ = writeln!(out, "{:^width$}", title);
    if let Some(d) = &r.health.distorted {
        // Next to the numbers, not only in a warning below them.
        let _ = writeln!(
            out,
            "CLIENT-DISTORTED: the client distorted these results (see Client health): {}",
            d.reasons.join("; ")
        );
    }
    let _ = writeln!(out, "{}", line('┏', '┳', '┓', '━'));
    let _ = write!(out, "┃ {:>w0$} ", "Statistic");
    for (c, w) in cols.iter().zip(&wc) {
        let _ = write!(out, "┃ {c:>w$} ");
    }
    let _ = writeln!(out, "┃");
    let _ = writeln!(out, "{}", line('┡', '╇', '┩', '━'));
    for (label, cells) in &rows {
        let _ = write!(out, "│ {label:>w0$} ");
        for (c, w) in cells.iter().zip(&wc) {
            let _ = write!(out, "│ {c:>w$} ");
        }
        let _ = writeln!(out, "│");
    }
    let _ = writeln!(out, "{}", line('└', '┴', '┘', '─'));
    if r.metrics.latency.is_exact() {
        let _ = writeln!(
            out,
            "Percentiles interpolate linearly between the exact values (numpy's default, as \
             AIPerf); ITL counts responses of 2 chunks or more."
        );
    }
    if let Some((cached, prompt)) = r.prompt_cache {
        let _ = writeln!(
            out,
            "Server prompt cache: {cached} of {prompt} prompt tokens ({:.0}%) were served from \
             it (usage.prompt_tokens_details.cached_tokens); their TTFT is lower than a cold \
             prompt's.",
            100.0 * cached as f64 / prompt.max(1) as f64
        );
    }
    out
}

/// The client-health block.
pub fn health(r: &Report) -> String {
    let h = &r.health;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Client health: {} driver, {} shard(s): {}; output tokens from {}",
        r.driver,
        h.shards.len(),
        h.placement.reason,
        match (r.osl_from_usage, r.osl_from_tokenizer) {
            (0, 0) if r.completed > 0 => "nothing (these answers carry no text)".to_string(),
            (0, 0) => "nothing (no completed request)".to_string(),
            (_, 0) => "server usage".to_string(),
            (0, _) => "re-tokenized text".to_string(),
            (u, t) => format!("server usage ({u}) and re-tokenized text ({t})"),
        }
    );
    for s in &h.shards {
        let _ = write!(
            out,
            "  shard {} ({}): CPU {:.1}%",
            s.shard,
            s.placed,
            s.cpu_utilization * 100.0
        );
        if let Some(w) = s.run_queue_wait {
            let _ = write!(out, "  waited for a CPU {:.1}%", w * 100.0);
        }
        let _ = write!(
            out,
            "  peak in flight {}  {:.0} events/s  {:.2} µs CPU/event",
            s.peak_in_flight, s.events_per_sec, s.cpu_us_per_event
        );
        if let Some(d) = s.dispatch_delay_p99_us {
            let _ = write!(out, "  sent p99 {d:.1} µs after due");
        }
        let _ = writeln!(
            out,
            "  arrival→record p99 {:.1} µs",
            s.arrival_to_record_p99_us
        );
        if s.starved_requests > 0 {
            let _ = writeln!(
                out,
                "    starved: waited {:.1} ms for a CPU (up to {:.1} ms at once) with {} measured request(s) in flight",
                s.starved_ms, s.worst_starved_ms, s.starved_requests
            );
        }
        for m in &s.moves {
            let _ = writeln!(
                out,
                "    moved from {} to {} at {:+.2} s (it waited {:.0}% of the interval before)",
                m.from,
                m.to,
                m.at_s,
                m.wait_share * 100.0
            );
        }
    }
    let sh = &r.shared;
    if sh.events > 0 {
        // A read carries one stamp, its newest bytes': say how many events took a later one's.
        let _ = write!(
            out,
            "  reads of several events: {} of {} content events ({:.1}%) carry a later event's arrival stamp; {} first token(s)",
            sh.events,
            sh.of_events,
            sh.events as f64 * 100.0 / sh.of_events.max(1) as f64,
            sh.first_tokens
        );
        if sh.wait.count() > 0 {
            let _ = write!(
                out,
                "; such reads came p50 {:.2} ms  p99 {:.2} ms after the previous read of their response (the most those events waited unseen)",
                sh.wait.percentile(50.0) as f64 / 1e6,
                sh.wait.percentile(99.0) as f64 / 1e6
            );
        }
        let _ = writeln!(out);
    }
    if let Some(held) = h.held {
        let _ = writeln!(
            out,
            "  held in flight: {:.1} of {} asked on average (between the first and the last measured send)",
            held.mean, held.asked
        );
    }
    let c = &h.self_check;
    if c.total.count() > 0 {
        let ms = |d: &Dist, p: f64| d.percentile(p) as f64 / 1e3;
        let _ = write!(
            out,
            "  against the simulator, per request: client-added delay p50 {:.1} µs  p99 {:.1} µs (send side p99 {:.1} µs, receive side p99 {:.1} µs)",
            ms(&c.total, 50.0),
            ms(&c.total, 99.0),
            ms(&c.send, 99.0),
            ms(&c.receive, 99.0)
        );
        match (c.server_in_flight, c.asked) {
            (Some(seen), Some(asked)) => {
                let _ = write!(out, "; it saw {seen:.1} of {asked} requests in flight");
            }
            (Some(seen), None) => {
                let _ = write!(out, "; it saw {seen:.1} requests in flight on average");
            }
            _ => {}
        }
        let _ = writeln!(out);
    }
    if r.client_delay.count() > 0 {
        let d = &r.client_delay;
        let _ = writeln!(
            out,
            "  simulator events, written → stamped: p50 {:.1} µs  p99 {:.1} µs  max {:.1} µs",
            d.percentile(50.0) as f64 / 1e3,
            d.percentile(99.0) as f64 / 1e3,
            d.summary(1e3).max
        );
    }
    if let Some(t) = &r.telemetry {
        out.push_str(&telemetry(t));
        let (ttft, latency) = r.client_means();
        for s in &t.server_metrics {
            if let Some(line) = super::phases::metrics_line(s, ttft, latency) {
                let _ = writeln!(out, "{line}");
            }
        }
    }
    if let Some(t) = &r.server_traces {
        out.push_str(&t.console());
    }
    for e in &r.errors {
        let _ = writeln!(out, "  errors: {} × {} ({})", e.count, e.kind, e.message);
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out.push_str(&verdict_lines(r));
    out
}

/// The last lines of a run's console: the client's verdict, the server's account and the
/// run's one label (which says what failed, when anything did).
pub fn verdict_lines(r: &Report) -> String {
    format!(
        "Client: {}\nServer: {}\n{}{}\n",
        r.health.verdict,
        r.server.line,
        r.threshold_crossed
            .as_ref()
            .map_or(String::new(), |t| format!("Stopped early: {t}\n")),
        super::verdict::line(r.label, &r.server)
    )
}

/// The GPU and server-metrics lines.
pub fn telemetry(t: &crate::telemetry::TelemetryReport) -> String {
    // "GPU telemetry unavailable" was said once, on stderr, when the run started.
    let mut out = String::new();
    for g in &t.gpus {
        // What the GPU did not report is said so, never printed as a zero.
        let power = g.power_w.map_or("power not reported".into(), |p| {
            format!(
                "power avg {:.0} W p50 {:.0} W p99 {:.0} W max {:.0} W",
                p.avg, p.p50, p.p99, p.max
            )
        });
        let _ = writeln!(
            out,
            "GPU {} ({}): {} J ({}), {power}{}{}",
            g.index,
            g.name,
            g.energy_j.map_or("?".into(), |e| format!("{e:.1}")),
            g.energy_source.text(),
            g.gpu_util
                .map(|u| format!(", util {:.0}%", u.avg))
                .unwrap_or_default(),
            g.dropped_out
                .as_ref()
                .map(|(s, e)| format!(
                    ", dropped out {s:.1} s into the window: {e} (its figures cover that part; no \
                     energy per token is given)"
                ))
                .unwrap_or_default()
        );
    }
    if let Some(tot) = &t.totals {
        let _ = writeln!(
            out,
            "GPU energy {:.1} J, {} J/output token, {} output tokens/J{}",
            tot.energy_j,
            tot.joules_per_output_token
                .map_or("?".into(), |v| format!("{v:.4}")),
            tot.output_tokens_per_joule
                .map_or("?".into(), |v| format!("{v:.2}")),
            tot.eur_per_million_output_tokens
                .map(|v| format!(", {v:.3} EUR per million output tokens"))
                .unwrap_or_default()
        );
    }
    for s in &t.server_metrics {
        let mut parts = Vec::new();
        for (name, g) in &s.gauges {
            parts.push(format!(
                "{name} avg {:.2} max {:.2}",
                g.stat.avg, g.stat.max
            ));
        }
        if s.gauges.is_empty() && s.scrapes > 0 && s.scrapes_inside == 0 {
            parts.push(
                "no scrape fell inside the measured window (it was shorter than \
                 --server-metrics-interval), so no gauge"
                    .into(),
            );
        }
        for name in crate::server_metrics::COUNTERS {
            if let Some(d) = s.counter_deltas.get(*name) {
                parts.push(format!("{name} +{d:.0}"));
            }
        }
        if let Some(h) = s.prefix_cache_hit_rate {
            parts.push(format!("prefix-cache hit rate {:.1}%", h * 100.0));
        }
        let _ = writeln!(
            out,
            "server metrics {} ({} scrapes{}): {}",
            s.url,
            s.scrapes,
            s.first_error
                .as_ref()
                .map(|e| format!(", {} failed: {e}", s.errors))
                .unwrap_or_default(),
            if parts.is_empty() {
                "no known family".to_string()
            } else {
                parts.join("; ")
            }
        );
    }
    out
}
