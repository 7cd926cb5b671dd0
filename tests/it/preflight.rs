//! The checks before a run: the model list, one probe request, and a switch that leaves the
//! server nothing but the measured requests. Waiting for a server that comes up late is in
//! `alone::preflight`.

use crate::support::{self, artifact_dir, profile, sim};

fn input_config(dir: &std::path::Path) -> serde_json::Value {
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("profile_export_ringperf.json")).unwrap())
            .unwrap();
    doc["input_config"].clone()
}

#[test]
fn the_model_comes_from_the_server_when_m_is_not_given() {
    let _shared = support::shared();
    let s = sim("-m tiny-model --ttft 1ms --itl 1ms");
    let dir = artifact_dir("preflight-model");
    let res = profile(
        &format!(
            "--url http://{} --streaming --request-count 5 --output-tokens-mean 4",
            s.addr
        ),
        &dir,
    )
    .expect("runs with the listed model");
    assert_eq!(res.report.completed, 5, "{}", res.console);
    assert_eq!(input_config(&dir)["target"]["model"], "tiny-model");
    // Five measured requests and the probe before them.
    assert_eq!(s.served().0, 6);
}

#[test]
fn a_wrong_model_stops_before_the_run_with_the_models_served() {
    let _shared = support::shared();
    let s = sim("-m served-model");
    let dir = artifact_dir("preflight-wrong-model");
    let err = profile(
        &format!("--url http://{} -m other-model --request-count 50", s.addr),
        &dir,
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(
        err.contains("the first request failed")
            && err.contains("http_404")
            && err.contains("The model `other-model` does not exist")
            && err.contains("the server lists served-model"),
        "{err}"
    );
    // Nothing was run: no record, and the server saw at most the probe.
    assert!(!dir.join("profile_export.jsonl").exists());
    assert!(s.served().0 <= 1, "{:?}", s.served());
}

#[test]
fn no_preflight_leaves_the_server_only_the_measured_requests() {
    let _shared = support::shared();
    let s = sim("--ttft 1ms --itl 1ms");
    let dir = artifact_dir("preflight-off");
    let res = profile(
        &format!(
            "--url http://{} --no-preflight -m ringperf-sim --request-count 5 --output-tokens-mean 4",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    assert_eq!(res.report.completed, 5);
    assert_eq!(s.served().0, 5);
    // Without -m, the model must still come from somewhere: the list is asked even so.
    let res = profile(
        &format!(
            "--url http://{} --no-preflight --request-count 2 --output-tokens-mean 4",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    assert_eq!(res.report.completed, 2);
    assert_eq!(s.served().0, 7);
}

#[test]
fn a_server_that_answers_as_another_model_is_named() {
    let _shared = support::shared();
    // llama.cpp serves its one model whatever the request names.
    let reply = support::capture("llamacpp/chat-stream.http");
    let server = support::fake_server(move |_, _| (reply.clone(), false));
    let dir = artifact_dir("preflight-other-model");
    let res = profile(
        &format!(
            "--url http://{} -m nope --streaming --request-count 2",
            server.addr
        ),
        &dir,
    )
    .expect("it runs: the answers are real, only the name differs");
    assert_eq!(res.report.completed, 2);
    assert!(
        res.report
            .warnings
            .iter()
            .any(|w| w.contains("the server answered as model \"tiny-qwen3\", not \"nope\"")),
        "{:?}",
        res.report.warnings
    );
    // The same server named rightly: no word.
    let res = profile(
        &format!(
            "--url http://{} -m tiny-qwen3 --streaming --request-count 2",
            server.addr
        ),
        &dir,
    )
    .unwrap();
    assert!(
        !res.report
            .warnings
            .iter()
            .any(|w| w.contains("answered as model")),
        "{:?}",
        res.report.warnings
    );
}

#[test]
fn the_prefix_cache_is_reset_when_asked_and_a_warm_one_is_named() {
    let _shared = support::shared();
    let s = sim("--ttft 1ms --itl 1ms");
    // A vLLM-shaped /metrics page whose prefix cache answers 90 of every 100 queried tokens.
    let metrics = support::fake_server(|n, _| {
        let (q, h) = (100 * n, 90 * n);
        let page = format!(
            "# TYPE vllm:prefix_cache_queries_total counter\n\
             vllm:prefix_cache_queries_total{{engine=\"0\"}} {q}.0\n\
             # TYPE vllm:prefix_cache_hits_total counter\n\
             vllm:prefix_cache_hits_total{{engine=\"0\"}} {h}.0\n"
        );
        (
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{page}",
                page.len()
            )
            .into_bytes(),
            false,
        )
    });
    let dir = artifact_dir("preflight-prefix-cache");
    let res = profile(
        &format!(
            "--url http://{} --reset-prefix-cache --request-count 3 --output-tokens-mean 2 \
             --server-metrics-url http://{}/metrics",
            s.addr, metrics.addr
        ),
        &dir,
    )
    .unwrap();
    assert_eq!(s.prefix_cache_resets(), 1);
    let w = &res.report.warnings;
    assert!(!w.iter().any(|x| x.contains("did not empty")), "{w:?}");
    assert!(
        w.iter()
            .any(|x| x.contains("prefix-cache hit rate was 90%") && x.contains("--random-seed")),
        "{w:?}"
    );
}

/// vLLM names a model by its path when it has no `--served-model-name`: an id of hundreds of
/// characters. Without -m, ringperf sends it exactly as `/v1/models` gave it; only the console
/// shortens it.
#[test]
fn a_long_model_id_is_sent_byte_for_byte() {
    let _shared = support::shared();
    let id = format!(
        "/root/.cache/huggingface/hub/models--org--m/snapshots/{}/{}.Q4_K_M-v1.0",
        "0123456789abcdef".repeat(5),
        "x-y_z".repeat(30)
    );
    assert_eq!(id.len(), 297);
    let s = support::sim(&format!("-m {id} --ttft 1ms --itl 1ms"));
    let dir = support::artifact_dir("preflight-long-id");
    let res = support::profile(
        &format!(
            "--url http://{} --request-count 4 --output-tokens-mean 3",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    assert_eq!(
        (res.report.completed, res.report.failed),
        (4, 0),
        "{}",
        res.console
    );
    let inputs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("inputs.json")).unwrap()).unwrap();
    assert_eq!(inputs["data"][0]["payload"][0]["model"], id.as_str());
    assert!(!res.console.contains(&id), "shown whole: {}", res.console);
    assert!(res.console.contains(&id[..100]), "{}", res.console);
    assert!(
        !res.console.contains("answered as model"),
        "{}",
        res.console
    );
}
