//! Server metrics and GPU telemetry: the Prometheus parser on real vLLM pages, window
//! summaries, and a profile run on this GPU-less machine that says so and completes.

use crate::support;

use ringperf::internals::prom::{self, Kind};
use ringperf::internals::server_metrics::{summarize, Scrape, Target};

fn page(name: &str) -> String {
    String::from_utf8(support::capture(&format!("vllm/{name}"))).unwrap()
}

#[test]
fn real_vllm_pages_parse_with_types_labels_and_histograms() {
    let _shared = support::shared();
    for name in [
        "metrics-idle.prom",
        "metrics-busy.prom",
        "metrics-after.prom",
    ] {
        let e = prom::parse(&page(name)).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert!(e.samples.len() > 100, "{name}");
        assert_eq!(e.kind("vllm:num_requests_running"), Kind::Gauge);
        assert_eq!(e.kind("vllm:generation_tokens_total"), Kind::Counter);
        assert_eq!(e.kind("vllm:request_prompt_tokens_bucket"), Kind::Histogram);
        let running = e.series("vllm:num_requests_running").next().unwrap();
        assert_eq!(running.label("model_name"), Some("tiny-qwen3"));
        // A histogram's +Inf bucket equals its count.
        let inf = e
            .series("vllm:request_prompt_tokens_bucket")
            .find(|s| s.label("le") == Some("+Inf"))
            .unwrap()
            .value;
        assert_eq!(Some(inf), e.sum("vllm:request_prompt_tokens_count"));
    }
    let busy = prom::parse(&page("metrics-busy.prom")).unwrap();
    assert_eq!(busy.sum("vllm:num_requests_running"), Some(4.0));
}

fn scrape(t_ns: u64, text: &str) -> Scrape {
    Scrape {
        t_ns,
        page: prom::parse(text).map_err(|e| e.to_string()),
        raw: text.to_string(),
    }
}

#[test]
fn window_summary_of_real_pages() {
    let _shared = support::shared();
    let server = ringperf::plan::Endpoint::parse("http://127.0.0.1:8000").unwrap();
    let target = Target::parse("auto", &server).unwrap();
    assert_eq!(target.url, "http://127.0.0.1:8000/metrics");
    let (idle, busy, after) = (
        page("metrics-idle.prom"),
        page("metrics-busy.prom"),
        page("metrics-after.prom"),
    );
    let scrapes = vec![
        scrape(0, &idle),
        scrape(1_000, &busy),
        scrape(2_000, &after),
    ];
    let s = summarize(&target, &scrapes, 500, 1_500);
    assert_eq!(s.scrapes, 3);
    assert_eq!(s.gauges["vllm:num_requests_running"].stat.max, 4.0);
    let gen = |t: &str| {
        prom::parse(t)
            .unwrap()
            .sum("vllm:generation_tokens_total")
            .unwrap()
    };
    let delta = s.counter_deltas["vllm:generation_tokens_total"];
    assert_eq!(delta, gen(&after) - gen(&idle));
    assert!(delta > 0.0);
    assert!(s.first_page.contains("vllm:num_requests_running"));
}

#[test]
fn dcgm_style_page_made_here() {
    let _shared = support::shared();
    let text = "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n\
                # TYPE DCGM_FI_DEV_POWER_USAGE gauge\n\
                DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-1\",modelName=\"NVIDIA H200 \\\"SXM\\\"\",Hostname=\"a\\\\b\"} 350.5\n\
                DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-2\",modelName=\"NVIDIA H200\",Hostname=\"a\"} 149.5\n\
                # TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n\
                DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\"} 1000000\n";
    let later = text.replace("1000000", "1350500");
    let e = prom::parse(text).unwrap();
    let s0 = e.series("DCGM_FI_DEV_POWER_USAGE").next().unwrap();
    assert_eq!(s0.label("modelName"), Some("NVIDIA H200 \"SXM\""));
    assert_eq!(s0.label("Hostname"), Some("a\\b"));
    let server = ringperf::plan::Endpoint::parse("http://127.0.0.1:9400").unwrap();
    let target = Target::parse("http://127.0.0.1:9400/metrics", &server).unwrap();
    let s = summarize(&target, &[scrape(0, text), scrape(10, &later)], 0, 10);
    assert_eq!(s.gauges["DCGM_FI_DEV_POWER_USAGE"].stat.avg, 500.0);
    assert_eq!(s.gauges["DCGM_FI_DEV_POWER_USAGE"].by_labels.len(), 2);
    assert_eq!(
        s.counter_deltas["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"],
        350_500.0
    );
}

#[test]
fn profile_without_a_gpu_says_so_and_scrapes_the_simulator() {
    let _shared = support::shared();
    let s = support::sim("--ttft 5ms --itl 5ms --max-batch 4");
    let url = format!("http://{}", s.addr);
    let dir = support::artifact_dir("telemetry-run");
    let res = support::profile(
        &format!(
            "--url {url} --streaming --concurrency 8 --request-count 40 --output-tokens-mean 20 \
             --server-metrics-url auto --server-metrics-interval 50ms"
        ),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!(r.completed, 40);
    let t = r.telemetry.as_ref().unwrap();
    // This machine has no NVIDIA driver; on one that has, GPUs are reported instead.
    assert!(t.gpu_unavailable.is_some() || !t.gpus.is_empty());
    if let Some(why) = &t.gpu_unavailable {
        assert!(!why.is_empty());
    }
    let m = &t.server_metrics[0];
    assert!(m.scrapes >= 3, "{} scrapes", m.scrapes);
    assert_eq!(m.errors, 0, "{:?}", m.first_error);
    let running = &m.gauges["vllm:num_requests_running"];
    assert!(running.stat.max <= 4.0 && running.stat.max >= 1.0);
    assert!(
        m.gauges["vllm:num_requests_waiting"].stat.max >= 1.0,
        "8 streams, batch of 4"
    );
    assert_eq!(m.counter_deltas["vllm:generation_tokens_total"], 800.0);
    let exported: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("server_metrics_export.json")).unwrap())
            .unwrap();
    assert!(exported[0]["last_page"]
        .as_str()
        .unwrap()
        .contains("vllm:request_success_total"));
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("profile_export_ringperf.json")).unwrap())
            .unwrap();
    assert!(doc["gpu_telemetry"].is_object());
    assert_eq!(
        doc["gpu_telemetry"]["unavailable"].is_string(),
        t.gpu_unavailable.is_some()
    );
    assert!(res.console.contains("server metrics http://"));
    // The same folder again, without scraping: the earlier run's scrapes do not stay behind.
    // (Short answers: at the simulator's default length the two took 5 s.)
    support::profile(
        &format!("--url {url} --request-count 2 --output-tokens-mean 4"),
        &dir,
    )
    .unwrap();
    assert!(!dir.join("server_metrics_export.json").exists());
}

#[test]
fn the_first_metrics_page_is_in_before_the_scraper_returns() {
    let _shared = support::shared();
    // A /metrics page that takes 300 ms to come: starting the scraper waits for it, so that
    // the run's first request comes after the first page.
    let page = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n".to_string();
    let server = crate::support::fake_server(move |_, _| {
        std::thread::sleep(std::time::Duration::from_millis(300));
        (
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{page}",
                page.len()
            )
            .into_bytes(),
            false,
        )
    });
    let endpoint =
        ringperf::internals::endpoint::Endpoint::parse(&format!("http://{}", server.addr)).unwrap();
    let target = ringperf::internals::server_metrics::Target::parse(
        &format!("http://{}/metrics", server.addr),
        &endpoint,
    )
    .unwrap();
    let started = std::time::Instant::now();
    let s = ringperf::internals::server_metrics::Scraper::start(
        vec![target],
        None,
        1_000_000_000,
        None,
    );
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    assert_eq!(
        server.requests.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    let _ = s.finish();
}
