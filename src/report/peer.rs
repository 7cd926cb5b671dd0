//! The peers' own result files, written beside ringperf's artifacts from the same records, so
//! that a user's scripts that read them keep working: `vllm bench serve`'s result JSON and
//! console block, its per-request timeline, and GenAI-Perf `analyze`'s summary CSV.
//!
//! Each figure follows the peer's definition, not ringperf's, where they differ: vLLM's "ITL"
//! is every gap between streamed chunks, pooled (ringperf's inter-chunk latency), its "TPOT"
//! is (latency − TTFT) / (output tokens − 1) per request (ringperf's ITL), and its duration
//! runs from the first request sent to the last answer received.

use serde_json::{json, Map, Value};

use super::Report;
use crate::record::Record;
use crate::stats::linear_percentile;

/// What `vllm bench serve` was asked to write.
#[derive(Debug, Clone)]
pub struct VllmResults {
    /// Write the result file (`--save-result`, `--append-result`).
    pub save: bool,
    /// Append to it.
    pub append: bool,
    /// With every request's figures (`--save-detailed`).
    pub detailed: bool,
    /// Its folder (`--result-dir`; default: the current folder).
    pub dir: Option<std::path::PathBuf>,
    /// Its name (`--result-filename`; default: vLLM's).
    pub filename: Option<String>,
    /// The results' label (default: the backend).
    pub label: String,
    /// The backend.
    pub backend: String,
    /// The model id, when given (else the model that ran).
    pub model_id: Option<String>,
    /// The tokenizer id, when given.
    pub tokenizer_id: Option<String>,
    /// `--num-prompts`.
    pub num_prompts: u64,
    /// `--request-rate` (infinity for inf).
    pub request_rate: f64,
    /// `--burstiness`.
    pub burstiness: f64,
    /// `--max-concurrency`.
    pub max_concurrency: Option<u64>,
    /// `--metadata` pairs.
    pub metadata: Vec<(String, String)>,
    /// Metrics that get percentiles (ttft, tpot, itl, e2el).
    pub percentile_metrics: Vec<String>,
    /// Which percentiles.
    pub percentiles: Vec<f64>,
    /// An embeddings run: latency only.
    pub pooling: bool,
}

/// A number as Python prints a float (`10.0`, `2.5`, `inf`).
fn py_float(x: f64) -> String {
    if x.is_infinite() {
        "inf".into()
    } else if x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

/// A percentile's name as vLLM writes it (`99`, `99.9`).
fn p_word(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as i64)
    } else {
        format!("{p}")
    }
}

/// mean, median, std (population) and the asked percentiles of `v` (seconds), in ms; all 0
/// for no values, as numpy gives vLLM for an empty list.
fn stats_ms(mut v: Vec<f64>, percentiles: &[f64]) -> (f64, f64, f64, Vec<(f64, f64)>) {
    if v.is_empty() {
        return (
            0.0,
            0.0,
            0.0,
            percentiles.iter().map(|p| (*p, 0.0)).collect(),
        );
    }
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    let ms = |x: f64| x * 1000.0;
    (
        ms(mean),
        ms(linear_percentile(&v, 50.0)),
        ms(std),
        percentiles
            .iter()
            .map(|p| (*p, ms(linear_percentile(&v, *p))))
            .collect(),
    )
}

/// The measured requests, in the order they were sent.
fn measured(r: &Report) -> Vec<&Record> {
    let mut v: Vec<&Record> = r.records.iter().filter(|x| x.is_measured_sent()).collect();
    v.sort_by_key(|x| (x.start_ns, x.id));
    v
}

/// vLLM's result JSON for this run, and its console block.
pub fn vllm(r: &Report, s: &VllmResults, model: &str, date: &str) -> (Value, String) {
    let recs = measured(r);
    let ok: Vec<&&Record> = recs.iter().filter(|x| x.is_measured_ok()).collect();
    let start = recs.iter().map(|x| x.start_ns).min().unwrap_or(0);
    let end = recs.iter().map(|x| x.end_ns).max().unwrap_or(start);
    let dur = (end.saturating_sub(start) as f64 / 1e9).max(1e-9);
    let secs = |ns: u64| ns as f64 / 1e9;
    let out_len = |x: &Record| x.osl.unwrap_or(0);
    let total_in: u64 = ok.iter().map(|x| u64::from(x.isl.unwrap_or(0))).sum();
    let total_out: u64 = ok.iter().map(|x| out_len(x)).sum();
    let ttfts: Vec<f64> = ok.iter().filter_map(|x| x.ttft()).map(secs).collect();
    let tpots: Vec<f64> = ok
        .iter()
        .filter(|x| out_len(x) > 1)
        .filter_map(|x| {
            let t = x.ttft()?;
            Some(secs(x.latency().saturating_sub(t)) / (out_len(x) - 1) as f64)
        })
        .collect();
    let itls: Vec<f64> = ok
        .iter()
        .flat_map(|x| x.chunk_gaps_ns.iter().copied().map(secs))
        .collect();
    let e2els: Vec<f64> = ok.iter().map(|x| secs(x.latency())).collect();
    // The busiest second: output tokens in it, and requests in flight during it.
    let seconds = (dur.ceil() as usize + 1).min(1 << 20);
    let mut tokens = vec![0.0f64; seconds];
    let mut inflight = vec![0u64; seconds];
    for x in &ok {
        let bucket = |ns: u64| (ns.saturating_sub(start) / 1_000_000_000) as usize;
        let Some(first) = x.first_content_ns else {
            continue;
        };
        // vLLM places each token at the first token's time plus the gaps that follow it.
        let mut t = first;
        if let Some(b) = tokens.get_mut(bucket(t)) {
            *b += 1.0;
        }
        for g in &x.chunk_gaps_ns {
            t += g;
            if let Some(b) = tokens.get_mut(bucket(t)) {
                *b += 1.0;
            }
        }
        let (from, to) = (bucket(x.start_ns), bucket(x.end_ns).min(seconds - 1));
        for n in inflight.iter_mut().take(to + 1).skip(from) {
            *n += 1;
        }
    }
    let good = r.goodput.as_ref().map(|g| g.good_requests as f64 / dur);

    let mut j = Map::new();
    j.insert("date".into(), json!(date));
    j.insert("endpoint_type".into(), json!(s.backend));
    j.insert("backend".into(), json!(s.backend));
    j.insert("label".into(), json!(s.label));
    j.insert(
        "model_id".into(),
        json!(s.model_id.clone().unwrap_or_else(|| model.to_string())),
    );
    j.insert(
        "tokenizer_id".into(),
        json!(s.tokenizer_id.clone().unwrap_or_else(|| model.to_string())),
    );
    j.insert("num_prompts".into(), json!(s.num_prompts));
    for (k, v) in &s.metadata {
        j.insert(k.clone(), json!(v));
    }
    j.insert(
        "request_rate".into(),
        if s.request_rate.is_finite() {
            json!(s.request_rate)
        } else {
            json!("inf")
        },
    );
    j.insert("burstiness".into(), json!(s.burstiness));
    j.insert("max_concurrency".into(), json!(s.max_concurrency));
    j.insert("duration".into(), json!(dur));
    j.insert("completed".into(), json!(ok.len()));
    j.insert("failed".into(), json!(recs.len() - ok.len()));
    j.insert("total_input_tokens".into(), json!(total_in));
    j.insert("request_throughput".into(), json!(ok.len() as f64 / dur));
    j.insert(
        "total_token_throughput".into(),
        json!((total_in + total_out) as f64 / dur),
    );
    if !s.pooling {
        j.insert("total_output_tokens".into(), json!(total_out));
        j.insert("request_goodput".into(), json!(good));
        j.insert("output_throughput".into(), json!(total_out as f64 / dur));
        j.insert(
            "max_output_tokens_per_s".into(),
            json!(tokens.iter().copied().fold(0.0, f64::max)),
        );
        j.insert(
            "max_concurrent_requests".into(),
            json!(inflight.iter().copied().max().unwrap_or(0)),
        );
    }
    if s.detailed {
        j.insert(
            "input_lens".into(),
            json!(recs.iter().map(|x| x.isl.unwrap_or(0)).collect::<Vec<_>>()),
        );
        j.insert(
            "output_lens".into(),
            json!(recs
                .iter()
                .map(|x| if x.is_measured_ok() { out_len(x) } else { 0 })
                .collect::<Vec<_>>()),
        );
        j.insert(
            "ttfts".into(),
            json!(recs
                .iter()
                .map(|x| x.ttft().map_or(0.0, secs))
                .collect::<Vec<_>>()),
        );
        j.insert(
            "itls".into(),
            json!(recs
                .iter()
                .map(|x| x
                    .chunk_gaps_ns
                    .iter()
                    .copied()
                    .map(secs)
                    .collect::<Vec<_>>())
                .collect::<Vec<_>>()),
        );
        j.insert(
            "generated_texts".into(),
            json!(recs
                .iter()
                .map(|x| crate::redact::scrub(&x.text))
                .collect::<Vec<_>>()),
        );
        j.insert(
            "errors".into(),
            json!(recs
                .iter()
                .map(|x| x.error.clone().unwrap_or_default())
                .collect::<Vec<_>>()),
        );
    }

    // The console block, in vLLM's words and layout.
    let mut c = String::new();
    let line = |c: &mut String, k: &str, v: String| c.push_str(&format!("{k:<40} {v:<10}\n"));
    c.push_str(&format!("{:=^50}\n", " Serving Benchmark Result "));
    line(&mut c, "Successful requests:", ok.len().to_string());
    line(
        &mut c,
        "Failed requests:",
        (recs.len() - ok.len()).to_string(),
    );
    if let Some(m) = s.max_concurrency {
        line(&mut c, "Maximum request concurrency:", m.to_string());
    }
    if s.request_rate.is_finite() {
        line(
            &mut c,
            "Request rate configured (RPS):",
            format!("{:.2}", s.request_rate),
        );
    }
    line(&mut c, "Benchmark duration (s):", format!("{dur:.2}"));
    line(&mut c, "Total input tokens:", total_in.to_string());
    if !s.pooling {
        line(&mut c, "Total generated tokens:", total_out.to_string());
    }
    line(
        &mut c,
        "Request throughput (req/s):",
        format!("{:.2}", ok.len() as f64 / dur),
    );
    if let Some(g) = good {
        line(&mut c, "Request goodput (req/s):", format!("{g:.2}"));
    }
    if !s.pooling {
        line(
            &mut c,
            "Output token throughput (tok/s):",
            format!("{:.2}", total_out as f64 / dur),
        );
        line(
            &mut c,
            "Peak output token throughput (tok/s):",
            format!("{:.2}", tokens.iter().copied().fold(0.0, f64::max)),
        );
        line(
            &mut c,
            "Peak concurrent requests:",
            format!("{:.2}", inflight.iter().copied().max().unwrap_or(0) as f64),
        );
    }
    line(
        &mut c,
        "Total token throughput (tok/s):",
        format!("{:.2}", (total_in + total_out) as f64 / dur),
    );
    let metrics: [(&str, &str, &str, Vec<f64>); 4] = [
        ("ttft", "TTFT", "Time to First Token", ttfts),
        (
            "tpot",
            "TPOT",
            "Time per Output Token (excl. 1st token)",
            tpots,
        ),
        ("itl", "ITL", "Inter-token Latency", itls),
        ("e2el", "E2EL", "End-to-end Latency", e2els),
    ];
    for (key, short, header, values) in metrics {
        if (s.pooling && key != "e2el") || !s.percentile_metrics.iter().any(|m| m == key) {
            continue;
        }
        let (mean, median, std, ps) = stats_ms(values, &s.percentiles);
        c.push_str(&format!("{header:-^50}\n"));
        line(&mut c, &format!("Mean {short} (ms):"), format!("{mean:.2}"));
        line(
            &mut c,
            &format!("Median {short} (ms):"),
            format!("{median:.2}"),
        );
        j.insert(format!("mean_{key}_ms"), json!(mean));
        j.insert(format!("median_{key}_ms"), json!(median));
        j.insert(format!("std_{key}_ms"), json!(std));
        for (p, v) in ps {
            let w = p_word(p);
            line(&mut c, &format!("P{w} {short} (ms):"), format!("{v:.2}"));
            j.insert(format!("p{w}_{key}_ms"), json!(v));
        }
    }
    c.push_str(&"=".repeat(50));
    c.push('\n');
    (Value::Object(j), c)
}

/// vLLM's result file name: `{label}-{rate}qps[-concurrency{c}]-{model}-{date}.json`.
pub fn vllm_filename(s: &VllmResults, model: &str, date: &str) -> String {
    if let Some(f) = &s.filename {
        return f.clone();
    }
    let base = s
        .model_id
        .as_deref()
        .unwrap_or(model)
        .rsplit('/')
        .next()
        .unwrap_or(model);
    let cap = s
        .max_concurrency
        .map_or(String::new(), |c| format!("-concurrency{c}"));
    format!(
        "{}-{}qps{cap}-{base}-{date}.json",
        s.label,
        py_float(s.request_rate)
    )
}

/// A self-contained page drawing every measured request on a timeline: a grey bar from its
/// send to its first token, then a bar to its last byte coloured by its ITL against the two
/// thresholds (ms: green under the first, amber to the second, red above). At most
/// `TIMELINE_MAX` requests are drawn (the first sent).
pub fn timeline_html(r: &Report, thresholds: (f64, f64), title: &str) -> String {
    let recs: Vec<&Record> = measured(r).into_iter().take(TIMELINE_MAX).collect();
    let start = recs.iter().map(|x| x.start_ns).min().unwrap_or(0);
    let end = recs
        .iter()
        .map(|x| x.end_ns)
        .max()
        .unwrap_or(start)
        .max(start + 1);
    let (w, row, left) = (1000.0, 4.0, 60.0);
    let x = |ns: u64| left + (ns.saturating_sub(start) as f64 / (end - start) as f64) * (w - left);
    let h = recs.len() as f64 * row + 40.0;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">"#
    );
    for (i, rec) in recs.iter().enumerate() {
        let y = 20.0 + i as f64 * row;
        let first = rec.first_content_ns.unwrap_or(rec.end_ns);
        let itl_ms = rec.itl().map(|v| v / 1e6);
        let colour = match (rec.is_measured_ok(), itl_ms) {
            (false, _) => "#000000",
            (true, None) => "#4c78a8",
            (true, Some(v)) if v < thresholds.0 => "#2ca02c",
            (true, Some(v)) if v < thresholds.1 => "#ff9f1c",
            (true, Some(_)) => "#d62728",
        };
        svg.push_str(&format!(
            r##"<rect x="{:.2}" y="{y:.1}" width="{:.2}" height="{:.1}" fill="#bbbbbb"><title>request {}: TTFT {:.2} ms</title></rect><rect x="{:.2}" y="{y:.1}" width="{:.2}" height="{:.1}" fill="{colour}"><title>request {}: {:.2} ms in all, ITL {}</title></rect>"##,
            x(rec.start_ns),
            (x(first) - x(rec.start_ns)).max(0.5),
            row - 1.0,
            rec.id,
            first.saturating_sub(rec.start_ns) as f64 / 1e6,
            x(first),
            (x(rec.end_ns) - x(first)).max(0.5),
            row - 1.0,
            rec.id,
            rec.latency() as f64 / 1e6,
            itl_ms.map_or("n/a".into(), |v| format!("{v:.2} ms")),
        ));
    }
    svg.push_str(&format!(
        r#"<text x="{left}" y="{:.0}">0 s</text><text x="{:.0}" y="{:.0}" text-anchor="end">{:.3} s</text></svg>"#,
        h - 6.0,
        w,
        h - 6.0,
        (end - start) as f64 / 1e9
    ));
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t}</title></head><body>\
         <h1>{t}</h1><p>Each row is one request: grey from its send to its first token, then \
         coloured to its last byte by its inter-token latency (green under {a} ms, amber under \
         {b} ms, red above; black: failed). {n} requests{more}.</p>{svg}</body></html>\n",
        t = html_escape(title),
        a = thresholds.0,
        b = thresholds.1,
        n = recs.len(),
        more = if measured(r).len() > TIMELINE_MAX {
            format!(" (the first {TIMELINE_MAX} sent)")
        } else {
            String::new()
        },
    )
}

/// The most requests a timeline draws.
pub const TIMELINE_MAX: usize = 20_000;

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// GenAI-Perf `analyze`'s summary, `analyze_export_genai_perf.csv`: a row per point with its
/// p99 latencies and throughputs, then a table of GPU figures when there are any. `points`
/// holds each point's settings (concurrency, input length, dataset entries) and its
/// `profile_export_ringperf.json`.
pub fn genai_perf_analyze_csv(model: &str, points: &[(u64, u64, u64, Value)]) -> String {
    let get = |d: &Value, tag: &str, stat: &str| {
        d.pointer(&format!("/{tag}/{stat}")).and_then(Value::as_f64)
    };
    let f = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.2}"));
    let name = model.rsplit('/').next().unwrap_or(model);
    let mut out = String::from(
        "Config Name,Concurrency,ISL,Num Dataset Entries,p99 Time To First Token (ms),p99 Inter \
         Token Latency (ms),p99 Request Latency (ms),p99 Output Sequence Length (tokens),Avg. \
         Output Token Throughput (tokens/sec),Request Throughput (requests/sec)\n",
    );
    for (i, (concurrency, isl, entries, d)) in points.iter().enumerate() {
        let isl = get(d, "input_sequence_length", "avg").map_or(*isl, |v| v.round() as u64);
        out.push_str(&format!(
            "{name}_run_config_{i},{concurrency},{isl},{entries},{},{},{},{},{},{}\n",
            f(get(d, "time_to_first_token", "p99")),
            f(get(d, "inter_token_latency", "p99")),
            f(get(d, "request_latency", "p99")),
            f(get(d, "output_sequence_length", "p99")),
            f(get(d, "output_token_throughput", "avg")),
            f(get(d, "request_throughput", "avg")),
        ));
    }
    let gpus: Vec<(usize, &Value)> = points
        .iter()
        .enumerate()
        .flat_map(|(i, p)| {
            p.3.pointer("/gpu_telemetry/gpus")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(move |g| (i, g))
        })
        .collect();
    if !gpus.is_empty() {
        out.push_str(
            "Config Name,GPU,p99 GPU Power Usage (W),GPU Energy Consumption (J),Avg. GPU \
             Utilization (%)\n",
        );
        for (i, g) in gpus {
            let idx = g.get("index").and_then(Value::as_u64).unwrap_or(0);
            out.push_str(&format!(
                "{name}_run_config_{i},gpu{idx},{},{},{}\n",
                f(g.pointer("/power_w/p99").and_then(Value::as_f64)),
                f(g.get("energy_j").and_then(Value::as_f64)),
                f(g.pointer("/gpu_util/avg").and_then(Value::as_f64)),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_numbers_and_percentile_names() {
        assert_eq!(py_float(f64::INFINITY), "inf");
        assert_eq!(py_float(10.0), "10.0");
        assert_eq!(py_float(2.5), "2.5");
        assert_eq!(p_word(99.0), "99");
        assert_eq!(p_word(99.9), "99.9");
    }

    #[test]
    fn stats_are_numpys() {
        // numpy: mean 2.5, median 2.5, std 1.118…, p99 3.97 (×1000 for ms).
        let (mean, median, std, ps) = stats_ms(vec![4.0, 1.0, 3.0, 2.0], &[99.0]);
        assert!((mean - 2500.0).abs() < 1e-9);
        assert!((median - 2500.0).abs() < 1e-9);
        assert!((std - 1_118.033_988_749_895).abs() < 1e-6);
        assert!((ps[0].1 - 3970.0).abs() < 1e-6);
        let (m, _, _, ps) = stats_ms(Vec::new(), &[50.0]);
        assert_eq!((m, ps[0].1), (0.0, 0.0));
    }

    #[test]
    fn the_file_name_is_vllms() {
        let s = VllmResults {
            save: true,
            append: false,
            detailed: false,
            dir: None,
            filename: None,
            label: "vllm".into(),
            backend: "vllm".into(),
            model_id: Some("org/Model-8B".into()),
            tokenizer_id: None,
            num_prompts: 10,
            request_rate: f64::INFINITY,
            burstiness: 1.0,
            max_concurrency: Some(4),
            metadata: Vec::new(),
            percentile_metrics: vec!["ttft".into()],
            percentiles: vec![99.0],
            pooling: false,
        };
        assert_eq!(
            vllm_filename(&s, "x", "20261203-101500"),
            "vllm-infqps-concurrency4-Model-8B-20261203-101500.json"
        );
    }
}
