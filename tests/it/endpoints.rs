//! Endpoints beyond chat and completions: embeddings and the Responses API against the
//! simulator, and a template for anything else (a TGI-shaped server made here).

use crate::support;

use crate::support::{artifact_dir, fake_server, profile, sim};

#[test]
fn responses_api_streamed_and_whole() {
    let _shared = support::shared();
    let s = sim("--ttft 20ms --itl 4ms");
    let url = format!("http://{}", s.addr);
    let dir = artifact_dir("ep-responses");
    let res = profile(
        &format!("--url {url} --endpoint-type responses --streaming --concurrency 4 --request-count 12 --output-tokens-mean 10"),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!((r.completed, r.failed), (12, 0), "{}", res.console);
    assert_eq!(r.output_tokens, 120);
    assert_eq!(
        r.osl_from_usage, 12,
        "output_tokens from response.completed"
    );
    assert_eq!(r.metrics.icl.count(), 12 * 9);
    let ttft = r.metrics.ttft.percentile(50.0) as f64;
    // The counts above pin which event is the first token (a later one would leave 8 gaps);
    // the time is never early, and late by less than a token (the second is due at 24 ms)
    // unless the host held the simulator's timer (a loaded CI host showed 22 ms).
    assert!((19e6..24e6).contains(&ttft), "{ttft}");
    let inputs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("inputs.json")).unwrap()).unwrap();
    let body = &inputs["data"][0]["payload"][0];
    assert!(
        body["max_output_tokens"] == 10 && body["input"].is_string(),
        "{body}"
    );

    let res = profile(
        &format!("--url {url} --endpoint-type responses --concurrency 2 --request-count 4 --output-tokens-mean 6"),
        &dir,
    )
    .unwrap();
    assert_eq!(res.report.completed, 4);
    assert_eq!(res.report.output_tokens, 24);
}

#[test]
fn embeddings_measure_request_latency() {
    let _shared = support::shared();
    let s = sim("--ttft 15ms");
    let url = format!("http://{}", s.addr);
    let dir = artifact_dir("ep-embeddings");
    let res = profile(
        &format!("--url {url} --endpoint-type embeddings --streaming --concurrency 4 --request-count 16 --synthetic-input-tokens-mean 64"),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!(r.completed, 16, "{}", res.console);
    assert_eq!(r.metrics.ttft.count(), 0);
    let lat = r.metrics.latency.percentile(50.0) as f64;
    assert!(support::rel(lat, 15e6) < 0.1, "{lat}");
    let inputs = std::fs::read_to_string(dir.join("inputs.json")).unwrap();
    assert!(
        !inputs.contains("\"stream\""),
        "embeddings are never streamed"
    );
}

/// A TGI-shaped `/generate_stream`: `data: {"token": {"text": …}, "details": …}` events.
fn tgi_stream() -> Vec<u8> {
    let mut body = String::new();
    for i in 0..5 {
        let details = if i == 4 {
            r#"{"finish_reason":"length","generated_tokens":5}"#
        } else {
            "null"
        };
        body.push_str(&format!(
            "data:{{\"index\":{i},\"token\":{{\"id\":{i},\"text\":\" w{i}\",\"special\":false}},\"generated_text\":null,\"details\":{details}}}\n\n"
        ));
    }
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[test]
fn template_endpoint_for_a_tgi_shaped_server() {
    let _shared = support::shared();
    let server = fake_server(|_, _| (tgi_stream(), false));
    let dir = artifact_dir("ep-template");
    std::fs::create_dir_all(&dir).unwrap();
    let template = dir.join("tgi.json");
    std::fs::write(
        &template,
        r#"{"inputs": {{prompt}}, "parameters": {"max_new_tokens": {{max_tokens}}, "details": true}}"#,
    )
    .unwrap();
    let res = profile(
        &format!(
            "--url http://{} -m tgi --endpoint-type template --endpoint /generate_stream --streaming \
             --request-template {} --response-text-pointer /token/text \
             --response-tokens-pointer /details/generated_tokens --request-count 6 --output-tokens-mean 5",
            server.addr,
            template.display()
        ),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!((r.completed, r.failed), (6, 0), "{}", res.console);
    assert_eq!(r.output_tokens, 30);
    assert_eq!(r.metrics.ttft.count(), 6);
    let inputs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("inputs.json")).unwrap()).unwrap();
    let body = &inputs["data"][0]["payload"][0];
    assert_eq!(body["parameters"]["max_new_tokens"], 5);
    assert!(body["inputs"].as_str().unwrap().len() > 100);

    // A text pointer that matches nothing: stopped before the run, the pointer named, not a
    // run of zero-token "successes".
    let e = profile(
        &format!(
            "--url http://{} -m tgi --endpoint-type template --endpoint /generate_stream --streaming \
             --request-template {} --response-text-pointer /token/txt --request-count 6",
            server.addr,
            template.display()
        ),
        &dir,
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(
        e.contains("no_content") && e.contains("--response-text-pointer /token/txt"),
        "{e}"
    );
}

#[test]
fn template_without_a_prompt_placeholder_is_refused() {
    let _shared = support::shared();
    let dir = artifact_dir("ep-template-bad");
    std::fs::create_dir_all(&dir).unwrap();
    let template = dir.join("bad.json");
    std::fs::write(&template, r#"{"inputs": "always the same"}"#).unwrap();
    let args = support::profile_args(&[
        "--url",
        "127.0.0.1:9",
        "--endpoint-type",
        "template",
        "--endpoint",
        "/generate",
        "--request-template",
        template.to_str().unwrap(),
    ]);
    let e = args.plan().expect_err("refused").to_string();
    assert!(e.contains("has no {{prompt}} placeholder"), "{e}");
}
