//! Artifacts in AIPerf's names and layouts (`_ringperf` in place of `_aiperf`).

use std::io::Write;
use std::path::Path;

use serde_json::{json, Map, Value};

use super::console::{dist_rows, value_rows};
use super::Report;
use crate::clock::iso8601;
use crate::stats::PERCENTILES;

/// Schema version of `profile_export_ringperf.json`.
pub(crate) const SCHEMA_VERSION: &str = "1.0";

/// Start and end of the run, for the JSON export.
pub(crate) struct Times {
    /// Unix seconds at start.
    pub start: f64,
    /// Unix seconds at end.
    pub end: f64,
    /// From `startup_from` to the first request sent, in seconds.
    pub startup_s: Option<f64>,
    /// `process start`, or `profile call` where the binary's start was not marked (a test).
    pub startup_from: &'static str,
}

/// The `profile_export_ringperf.json` document.
/// A distribution in AIPerf's layout: `unit`, `avg`, `min`, `max`, `std`, the percentiles and
/// `count`, in `unit` (values divided by `scale`).
pub(crate) fn dist_json(d: &crate::stats::Dist, scale: f64, unit: &str) -> Value {
    let s = d.summary(scale);
    let mut m = Map::new();
    m.insert("unit".into(), json!(unit));
    m.insert("avg".into(), json!(s.avg));
    m.insert("min".into(), json!(s.min));
    m.insert("max".into(), json!(s.max));
    m.insert("std".into(), json!(s.std));
    for (i, (name, _)) in PERCENTILES.iter().enumerate() {
        m.insert((*name).into(), json!(s.percentiles[i]));
    }
    m.insert("count".into(), json!(s.count));
    Value::Object(m)
}

pub(crate) fn profile_json(r: &Report, input_config: &Value, times: &Times) -> Value {
    let mut doc = Map::new();
    doc.insert("schema_version".into(), json!(SCHEMA_VERSION));
    for (tag, label, d, scale) in dist_rows(r) {
        if d.count() == 0 {
            continue;
        }
        let unit = label
            .rsplit_once('(')
            .map(|(_, u)| u.trim_end_matches(')'))
            .unwrap_or("");
        doc.insert(tag.into(), dist_json(d, scale, unit));
    }
    for (tag, d) in &r.http_trace {
        doc.insert((*tag).into(), dist_json(d, 1e6, "ms"));
    }
    if let Some(t) = &r.server_traces {
        for (tag, _, d) in t.dists() {
            if d.count() > 0 {
                doc.insert(tag.into(), dist_json(&d, 1e6, "ms"));
            }
        }
        doc.insert("server_traces".into(), t.to_json());
    }
    for (tag, _, unit, v) in value_rows(r) {
        doc.insert(tag.into(), json!({ "unit": unit, "avg": v }));
    }
    doc.insert(
        "percentile_method".into(),
        json!(if r.metrics.latency.is_exact() {
            "linear: interpolated between the exact per-request values (numpy's default, as \
             AIPerf); client-health figures come from HdrHistograms (3 significant digits)"
        } else {
            "hdr: HdrHistogram, 3 significant digits"
        }),
    );
    if let Some(a) = &r.about {
        doc.insert("about".into(), json!(a));
    }
    doc.insert("input_config".into(), input_config.clone());
    doc.insert("start_time".into(), json!(iso8601(times.start)));
    doc.insert(
        "startup_s".into(),
        json!({"seconds": times.startup_s, "from": times.startup_from}),
    );
    doc.insert("end_time".into(), json!(iso8601(times.end)));
    doc.insert("was_cancelled".into(), json!(r.cancelled));
    doc.insert(
        "interrupted_by".into(),
        json!(crate::sys::interrupted_by()
            .filter(|_| r.cancelled)
            .map(crate::sys::signal_name)),
    );
    doc.insert(
        "error_summary".into(),
        json!(r
            .errors
            .iter()
            .map(
                |e| json!({"code": e.code, "kind": e.kind, "message": e.message, "count": e.count})
            )
            .collect::<Vec<_>>()),
    );
    doc.insert(
        "output_sequence_length_source".into(),
        json!({ "server_usage": r.osl_from_usage, "tokenizer": r.osl_from_tokenizer }),
    );
    doc.insert("measured_window_s".into(), json!(r.window_ns as f64 / 1e9));
    if let Some((cached, prompt)) = r.prompt_cache {
        doc.insert(
            "server_prompt_cache".into(),
            json!({"cached_tokens": cached, "prompt_tokens": prompt,
                   "hit_rate": cached as f64 / prompt.max(1) as f64}),
        );
    }
    let ok: Vec<&crate::record::Record> = r.records.iter().filter(|x| x.is_measured_ok()).collect();
    doc.insert(
        "intervals".into(),
        super::intervals::within_run(
            &ok,
            match (r.requested_rate, r.health.self_check.asked) {
                (None, Some(c)) => super::intervals::Loop::Closed(c as usize),
                (None, None) => super::intervals::Loop::Closed(0),
                (Some(_), _) => super::intervals::Loop::Open,
            },
            [r.request_tps(), r.output_tps()],
        ),
    );
    doc.insert("ramp_up_request_count".into(), json!(r.ramp_up));
    if let Some(g) = &r.goodput {
        doc.insert("goodput_detail".into(), json!(g));
    }
    if !r.error_adjusted.is_empty() {
        let adj: Map<String, Value> = r
            .error_adjusted
            .iter()
            .map(|e| {
                let m: Map<String, Value> = e
                    .percentiles
                    .iter()
                    .map(|(k, v)| ((*k).to_string(), v.map_or(json!("inf"), |x| json!(x))))
                    .collect();
                (
                    e.metric.to_string(),
                    json!({"unit": "ms", "percentiles": m}),
                )
            })
            .collect();
        doc.insert("error_adjusted".into(), Value::Object(adj));
    }
    if let Some(t) = &r.telemetry {
        doc.insert(
            "gpu_telemetry".into(),
            json!({
                "unavailable": t.gpu_unavailable,
                "gpus": t.gpus,
                "totals": t.totals,
                "sampler_cpu_share": t.gpu_sampler_cpu_share,
            }),
        );
        let server: Vec<Value> = t
            .server_metrics
            .iter()
            .map(|s| {
                json!({"url": s.url, "scrapes": s.scrapes, "errors": s.errors,
                       "first_error": s.first_error, "gauges": s.gauges,
                       "counter_deltas": s.counter_deltas,
                       "prefix_cache_hit_rate": s.prefix_cache_hit_rate,
                       "phases": super::phases::metrics_json(s, r.client_means().0,
                                                             r.client_means().1)})
            })
            .collect();
        doc.insert("server_metrics".into(), json!(server));
    }
    if !r.servers.is_empty() {
        doc.insert("servers".into(), json!(r.servers));
    }
    if !r.ttft_by_turn.is_empty() {
        let turns: Vec<Value> = r
            .ttft_by_turn
            .iter()
            .map(|(t, d)| {
                let s = d.summary(1e6);
                json!({"turn": t, "unit": "ms", "count": s.count, "avg": s.avg,
                       "p50": s.at("p50"), "p90": s.at("p90"), "p99": s.at("p99")})
            })
            .collect();
        doc.insert("time_to_first_token_by_turn".into(), json!(turns));
    }
    doc.insert("warmup_request_count".into(), json!(r.warmup));
    if r.warmup > 0 {
        doc.insert(
            "warmup".into(),
            json!({"request_count": r.warmup, "error_request_count": r.warmup_failed,
                   "duration_s": r.warmup_ns as f64 / 1e9}),
        );
    }
    let delay = |d: &crate::stats::Dist| {
        if d.count() == 0 {
            return Value::Null;
        }
        let s = d.summary(1e3);
        json!({"unit": "us", "avg": s.avg, "p50": s.at("p50"), "p99": s.at("p99"),
               "p99_9": s.at("p99_9"), "max": s.max, "count": s.count})
    };
    let h = &r.health;
    let c = &h.self_check;
    // The run's one verdict, as the console's last lines say it: the label, and each side's
    // evidence.
    doc.insert(
        "verdict".into(),
        json!({
            "label": r.label,
            "client": h.verdict,
            "server": r.server.line,
        }),
    );
    doc.insert("server_health".into(), json!(r.server));
    doc.insert(
        "failed_request_threshold_crossed".into(),
        json!(r.threshold_crossed),
    );
    doc.insert("client_distorted".into(), json!(h.distorted.is_some()));
    doc.insert(
        "client_health".into(),
        json!({
            "driver": r.driver,
            "placement": h.placement_note(),
            "shards": h.shards,
            "held_in_flight": h.held,
            // This process's peak resident memory so far (an in-process simulator's too).
            "peak_rss_mb": crate::sys::peak_rss_bytes().map(|b| b as f64 / 1e6),
            // The main thread's watch (starvation watch, live view) while the shards ran.
            "watch_thread": h.watch_cost.map(|(cpu, wall)| json!({
                "cpu_ms": cpu as f64 / 1e6,
                "watched_ms": wall as f64 / 1e6,
                "share_of_a_core": cpu as f64 / wall.max(1) as f64,
            })),
            "simulator_self_check": (c.total.count() > 0).then(|| json!({
                "client_added_delay_per_request": delay(&c.total),
                "send_side": delay(&c.send),
                "receive_side": delay(&c.receive),
                "server_in_flight_mean": c.server_in_flight,
                "concurrency_asked": c.asked,
            })),
            "client_added_delay": delay(&r.client_delay),
            "arrival_to_record_delay": delay(&r.record_lag),
            "shared_reads": {
                "events_carrying_a_later_stamp": r.shared.events,
                "content_events": r.shared.of_events,
                "first_tokens_carrying_a_later_stamp": r.shared.first_tokens,
                "wait_since_previous_read": delay(&r.shared.wait),
                "note": "the kernel keeps one receive stamp for bytes that queue together (the \
                         newest's): events read together carry the newest one's arrival",
            },
            "distorted": h.distorted,
            "simulator_stalled": h.simulator_stalled,
            "limited": h.limited,
            "verdict": h.verdict,
            "warnings": r.warnings,
        }),
    );
    Value::Object(doc)
}

/// The `profile_export_ringperf.csv` text: distributions, then single values.
pub(crate) fn profile_csv(r: &Report) -> Result<Vec<u8>, csv::Error> {
    let mut w = csv::WriterBuilder::new()
        .flexible(true)
        .from_writer(Vec::new());
    w.write_record([
        "Metric", "avg", "min", "max", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99",
        "std",
    ])?;
    // The server's spans' figures (ms) after the client's.
    let traced: Vec<_> = r.server_traces.iter().flat_map(|t| t.dists()).collect();
    let rows = dist_rows(r)
        .into_iter()
        .map(|(_, label, d, scale)| (label, d, scale))
        .chain(traced.iter().map(|(_, label, d)| (*label, d, 1e6)));
    for (label, d, scale) in rows {
        if d.count() == 0 {
            continue;
        }
        let s = d.summary(scale);
        let mut row = vec![label.to_string()];
        row.extend([s.avg, s.min, s.max].iter().map(|v| format!("{v:.2}")));
        for p in ["p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99"] {
            row.push(format!("{:.2}", s.at(p)));
        }
        row.push(format!("{:.2}", s.std));
        w.write_record(&row)?;
    }
    // A blank line between the two tables, as GenAI-Perf writes (a record of one empty field
    // would come out as `""`).
    let mut first = w
        .into_inner()
        .map_err(|e| csv::Error::from(e.into_error()))?;
    first.push(b'\n');
    let mut w = csv::WriterBuilder::new().flexible(true).from_writer(first);
    w.write_record(["Metric", "Value"])?;
    for (_, label, _, v) in value_rows(r) {
        w.write_record([label.to_string(), format!("{v:.2}")])?;
    }
    if let Some(tot) = r.telemetry.as_ref().and_then(|t| t.totals.as_ref()) {
        let rows = [
            ("GPU Energy (J)", Some(tot.energy_j)),
            ("GPU Power Avg (W)", Some(tot.avg_power_w)),
            (
                "Energy Per Output Token (J/token)",
                tot.joules_per_output_token,
            ),
            (
                "Output Tokens Per Joule (tokens/J)",
                tot.output_tokens_per_joule,
            ),
            ("Energy Per Request (J/request)", tot.joules_per_request),
            (
                "EUR Per Million Output Tokens (EUR)",
                tot.eur_per_million_output_tokens,
            ),
        ];
        for (label, v) in rows {
            if let Some(v) = v {
                w.write_record([label.to_string(), format!("{v:.4}")])?;
            }
        }
    }
    w.into_inner().map_err(|e| e.into_error().into())
}

fn ms(ns: u64) -> Value {
    json!({ "value": ns as f64 / 1e6, "unit": "ms" })
}

/// Writes `profile_export.jsonl`: one line per request, metadata and metric values.
pub(crate) fn write_records(r: &Report, path: &Path) -> std::io::Result<()> {
    crate::artifact::write_with(path, |w| records_into(r, w))
}

fn records_into(r: &Report, mut w: &mut dyn Write) -> std::io::Result<()> {
    for rec in &r.records {
        let mut metrics = Map::new();
        if rec.outcome == crate::record::Outcome::Ok {
            if let Some(v) = rec.ttft() {
                metrics.insert("time_to_first_token".into(), ms(v));
            }
            if let Some(v) = rec.ttfo() {
                metrics.insert("time_to_first_output_token".into(), ms(v));
            }
            if let Some(v) = rec.ttst() {
                metrics.insert("time_to_second_token".into(), ms(v));
            }
            metrics.insert("request_latency".into(), ms(rec.latency()));
            if let Some(v) = rec.itl() {
                metrics.insert(
                    "inter_token_latency".into(),
                    json!({"value": v / 1e6, "unit": "ms"}),
                );
            }
            if !rec.chunk_gaps_ns.is_empty() {
                let gaps: Vec<f64> = rec.chunk_gaps_ns.iter().map(|g| *g as f64 / 1e6).collect();
                metrics.insert(
                    "inter_chunk_latency".into(),
                    json!({"value": gaps, "unit": "ms"}),
                );
            }
            if let Some(h) = &rec.chunk_gaps_more {
                // Gaps past the first GAPS_KEPT: in the figures, not listed one by one.
                metrics.insert(
                    "inter_chunk_latency_not_listed".into(),
                    json!({"value": h.len(), "unit": "gaps"}),
                );
            }
            if let Some(o) = rec.osl {
                metrics.insert(
                    "output_sequence_length".into(),
                    json!({"value": o, "unit": "tokens"}),
                );
            }
            if rec.images > 0 {
                metrics.insert(
                    "generated_images".into(),
                    json!({"value": rec.images, "unit": "images"}),
                );
            }
        }
        if let Some(n) = rec.isl {
            metrics.insert(
                "input_sequence_length".into(),
                json!({"value": n, "unit": "tokens"}),
            );
        }
        let mut line = json!({
            "metadata": {
                "x_request_id": crate::http::request::format_id(rec.id),
                "shard": rec.shard,
                "benchmark_phase": rec.phase,
                "dataset_entry": rec.entry,
                "intended_ns": rec.intended_ns,
                "due_ns": rec.due_ns,
                "start_ns": rec.start_ns,
                "start_source": rec.start_source,
                "end_ns": rec.end_ns,
                "first_content_ns": rec.first_content_ns,
                "last_content_ns": rec.last_content_ns,
                "outcome": rec.outcome.name(),
                "error": rec.error,
                "finish_reason": rec.finish_reason,
                "output_sequence_length_source": rec.osl_source,
                "server_input_sequence_length": rec.server_isl,
                "requested_output_sequence_length": rec.requested_osl,
                "reconnected": rec.reconnected,
                "new_connection": rec.new_connection,
                "client_starved": rec.client_starved,
                "first_token_shared_read": rec.first_token_shared_read(),
                "first_token_overstated_at_most_ms": rec.first_token_shared_read()
                    .then(|| rec.first_token_shared_ns as f64 / 1e6),
                "sim_arrived_ns": rec.sim_arrived_ns,
                "sim_first_sent_ns": rec.sim_first_sent_ns,
                "session": rec.session.map(|(s, t)| json!({"session_id": s, "turn": t})),
                "chosen_to_cancel": rec.to_cancel,
                "server": rec.server,
                "http": rec.http_phases().map(|p| {
                    p.iter()
                        .map(|(k, v)| ((*k).to_string(), json!(*v as f64 / 1e6)))
                        .collect::<Map<String, Value>>()
                }),
                "prefill_wait_ms": rec.prefill_wait_ns as f64 / 1e6,
                "server_phases": r.server_traces.as_ref().map(|t| {
                    t.by_id.get(&rec.id).map(|p| {
                        let ms = |v: Option<u64>| v.map(|v| v as f64 / 1e6);
                        json!({"queue_ms": ms(p.queue_ns), "prefill_ms": ms(p.prefill_ns),
                               "decode_ms": ms(p.decode_ns),
                               "inference_ms": ms(p.inference_ns),
                               "ttft_ms": ms(p.ttft_ns), "e2e_ms": ms(p.e2e_ns)})
                    })
                }),
            },
            "metrics": metrics,
        });
        if let Some(n) = r.node {
            line["metadata"]["node"] = json!(n.index);
            line["metadata"]["wall_offset_ns"] = json!(n.wall_offset_ns);
        }
        serde_json::to_writer(&mut w, &line)?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// Writes every artifact into `dir`; returns the `profile_export_ringperf.json` document.
pub(crate) fn write_all(
    r: &Report,
    dir: &Path,
    input_config: &Value,
    inputs_json: &dyn Fn(&mut dyn Write) -> std::io::Result<()>,
    times: &Times,
) -> std::io::Result<Value> {
    std::fs::create_dir_all(dir)?;
    // A folder used before keeps no file of an earlier run that this one does not write.
    for f in [
        "gpu_telemetry_export.jsonl",
        "server_metrics_export.json",
        "profile_export_ringperf_timeslices.json",
        "profile_export_ringperf_timeslices.csv",
    ] {
        match std::fs::remove_file(dir.join(f)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    let doc = profile_json(r, input_config, times);
    let mut j = serde_json::to_vec_pretty(&doc)?;
    j.push(b'\n');
    crate::artifact::write(&dir.join("profile_export_ringperf.json"), j)?;
    let csv = profile_csv(r).map_err(std::io::Error::other)?;
    crate::artifact::write(&dir.join("profile_export_ringperf.csv"), csv)?;
    write_records(r, &dir.join("profile_export.jsonl"))?;
    crate::artifact::write_with(&dir.join("inputs.json"), inputs_json)?;
    if let Some(ns) = r.slice_ns {
        let slices = super::timeslices::slices(r, ns);
        let mut j = serde_json::to_vec_pretty(&super::timeslices::json(&slices, ns, input_config))?;
        j.push(b'\n');
        crate::artifact::write(&dir.join("profile_export_ringperf_timeslices.json"), j)?;
        let csv = super::timeslices::csv(&slices).map_err(std::io::Error::other)?;
        crate::artifact::write(&dir.join("profile_export_ringperf_timeslices.csv"), csv)?;
    }
    if let Some(t) = &r.telemetry {
        if !t.series.is_empty() {
            crate::artifact::write_with(&dir.join("gpu_telemetry_export.jsonl"), |mut w| {
                for s in &t.series {
                    for x in &s.samples {
                        let line = json!({"gpu": s.index, "name": s.name, "sample": x});
                        serde_json::to_writer(&mut w, &line)?;
                        w.write_all(b"\n")?;
                    }
                }
                Ok(())
            })?;
        }
        if !t.server_metrics.is_empty() {
            let mut j = serde_json::to_vec_pretty(&t.server_metrics)?;
            j.push(b'\n');
            crate::artifact::write(&dir.join("server_metrics_export.json"), j)?;
        }
    }
    Ok(doc)
}
