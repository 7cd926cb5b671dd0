//! Endpoints beyond chat and completions: embeddings and the Responses API against the
//! simulator, and a template for anything else (a TGI-shaped server made here).

use crate::support;

use crate::support::{artifact_dir, fake_server, profile, sim};

#[test]
fn responses_api_streamed_and_whole() {
    let _shared = support::shared();
    let s = sim("--ttft 20ms --itl 20ms");
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
    // the time is never early, and late by less than a token (the second is due at 40 ms).
    // A loaded 2-core CI host held the simulator's timer 5.6 ms once, so the gap is wide.
    assert!((19e6..40e6).contains(&ttft), "{ttft}");
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
    // The simulator holds each request 15 ms: the latency is that, plus what the busy host
    // (other tests run beside this one) adds on top.
    assert!((14.5e6..19e6).contains(&lat), "{lat}");
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

/// The bytes of a `data:` URL or a base64 string, and its media type.
fn decoded(s: &str) -> (String, Vec<u8>) {
    use base64::Engine as _;
    let (head, data) = s.split_once(";base64,").unwrap_or(("", s));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    (head.to_string(), bytes)
}

/// An encoded image's (width, height): PNG's header, or JPEG's start-of-frame.
fn image_size(mime: &str, b: &[u8]) -> (u32, u32) {
    let be16 = |i: usize| u32::from(u16::from_be_bytes([b[i], b[i + 1]]));
    let be32 = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    match mime {
        "data:image/png" => {
            assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
            (be32(16), be32(20))
        }
        "data:image/jpeg" => {
            assert_eq!(&b[..2], [0xFF, 0xD8]);
            let at = b.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
            (be16(at + 7), be16(at + 5))
        }
        other => panic!("not an image: {other}"),
    }
}

#[test]
fn chat_requests_carry_the_images_and_audio_asked_for() {
    let _shared = support::shared();
    let s = sim("--ttft 2ms --itl 1ms");
    let dir = artifact_dir("media");
    let res = profile(
        &format!(
            "--url http://{} --streaming --concurrency 2 --request-count 8 \
             --num-dataset-entries 8 --output-tokens-mean 4 --image-width-mean 64 \
             --image-height-mean 48 --image-format random --batch-size-image 2 \
             --audio-length-mean 0.25 --audio-sample-rates 8,16 --audio-depths 8,24",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!((r.completed, r.failed), (8, 0), "{}", res.console);
    let inputs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("inputs.json")).unwrap()).unwrap();
    let (mut pngs, mut jpegs, mut rates) = (0, 0, std::collections::BTreeSet::new());
    for entry in inputs["data"].as_array().unwrap() {
        let body = &entry["payload"][0];
        let content = body["messages"][0]["content"].as_array().unwrap();
        assert_eq!(content.len(), 4, "text, 2 images, 1 clip: {content:?}");
        assert_eq!(content[0]["type"], "text");
        assert!(content[0]["text"].as_str().unwrap().len() > 100);
        for part in &content[1..3] {
            assert_eq!(part["type"], "image_url");
            let (mime, bytes) = decoded(part["image_url"]["url"].as_str().unwrap());
            assert_eq!(image_size(&mime, &bytes), (64, 48), "{mime}");
            match mime.as_str() {
                "data:image/png" => pngs += 1,
                _ => jpegs += 1,
            }
        }
        assert_eq!(content[3]["type"], "input_audio");
        assert_eq!(content[3]["input_audio"]["format"], "wav");
        let (_, wav) = decoded(content[3]["input_audio"]["data"].as_str().unwrap());
        assert_eq!(&wav[..4], b"RIFF");
        let le32 = |i: usize| u32::from_le_bytes([wav[i], wav[i + 1], wav[i + 2], wav[i + 3]]);
        let (rate, bits) = (le32(24), u16::from_le_bytes([wav[34], wav[35]]));
        assert!(
            [8000, 16000].contains(&rate) && [8, 24].contains(&bits),
            "{rate} {bits}"
        );
        // The data chunk (after a longer format chunk above 16 bits): a quarter of a second.
        let data = wav.windows(4).position(|w| w == b"data").unwrap();
        assert_eq!(
            le32(data + 4),
            rate / 4 * u32::from(bits / 8),
            "{rate} Hz {bits} bits"
        );
        rates.insert(rate);
    }
    assert_eq!(pngs + jpegs, 16);
    assert!(
        pngs > 0 && jpegs > 0,
        "random formats: {pngs} PNG, {jpegs} JPEG"
    );
    assert_eq!(rates.len(), 2, "both rates drawn in 8 clips: {rates:?}");

    // What cannot be sent is refused before anything is: one line each.
    let url = format!("http://{}", s.addr);
    for (flags, says) in [
        ("--image-width-mean 64", "give both above 0"),
        ("--audio-length-mean 1 --audio-format mp3", "encodes no MP3"),
        (
            "--audio-length-mean 1 --audio-depths 12",
            "expected 8, 16, 24 or 32",
        ),
        (
            "--endpoint-type completions --image-width-mean 8 --image-height-mean 8",
            "use --endpoint-type chat",
        ),
        (
            "--image-width-mean 4000 --image-height-mean 4000 --num-dataset-entries 200",
            "over the 4 GB one run prepares",
        ),
    ] {
        let e = match profile(&format!("--url {url} --request-count 2 {flags}"), &dir) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{flags}: accepted"),
        };
        assert!(e.contains(says), "{flags}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}

#[test]
fn aiperfs_huggingface_generate_speaks_tgi_streamed_and_whole() {
    let _shared = support::shared();
    let s = sim("--ttft 5ms --itl 2ms");
    for streamed in [true, false] {
        let dir = artifact_dir(&format!("ep-tgi-{streamed}"));
        let res = profile(
            &format!(
                "--url http://{} --endpoint-type huggingface_generate {} --request-count 6 \
                 --output-tokens-mean 8 --extra-inputs temperature:0.5",
                s.addr,
                if streamed { "--streaming" } else { "" }
            ),
            &dir,
        )
        .unwrap();
        let r = &res.report;
        assert_eq!((r.completed, r.failed), (6, 0), "{}", res.console);
        // The count from TGI's details, the text from its tokens (or its generated_text).
        assert_eq!(r.output_tokens, 48, "{}", res.console);
        assert_eq!(r.metrics.ttft.count(), if streamed { 6 } else { 0 });
        let inputs: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("inputs.json")).unwrap()).unwrap();
        let body = &inputs["data"][0]["payload"][0];
        assert!(body["inputs"].as_str().unwrap().len() > 100, "{body}");
        assert_eq!(
            body["parameters"],
            serde_json::json!({"max_new_tokens": 8, "temperature": 0.5, "details": true})
        );
    }
}

#[test]
fn aiperfs_ranking_endpoints_send_a_query_and_its_passages() {
    let _shared = support::shared();
    let s = sim("--ttft 3ms --itl 1ms");
    for (kind, passages_at) in [
        ("nim_rankings", "passages"),
        ("hf_tei_rankings", "texts"),
        ("cohere_rankings", "documents"),
    ] {
        let dir = artifact_dir(&format!("ep-{kind}"));
        let res = profile(
            &format!(
                "--url http://{} --endpoint-type {kind} --concurrency 2 --request-count 6 \
                 --num-dataset-entries 6 --rankings-passages-mean 3 \
                 --rankings-passages-prompt-token-mean 32 --rankings-query-prompt-token-mean 16",
                s.addr
            ),
            &dir,
        )
        .unwrap();
        let r = &res.report;
        assert_eq!((r.completed, r.failed), (6, 0), "{kind}: {}", res.console);
        assert_eq!(r.metrics.ttft.count(), 0, "{kind}: no tokens to time");
        let doc: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.join("profile_export_ringperf.json")).unwrap(),
        )
        .unwrap();
        assert!(
            doc["request_latency"]["avg"].as_f64().unwrap() >= 3.0,
            "{kind}"
        );
        // ISL: the query's 16 tokens and three passages of 32.
        let isl = doc["input_sequence_length"]["avg"].as_f64().unwrap();
        assert!((100.0..=125.0).contains(&isl), "{kind}: ISL {isl}");
        let inputs: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("inputs.json")).unwrap()).unwrap();
        for entry in inputs["data"].as_array().unwrap() {
            let body = &entry["payload"][0];
            let passages = body[passages_at].as_array().unwrap();
            assert_eq!(passages.len(), 3, "{kind}: {body}");
            let (query, first) = match kind {
                "nim_rankings" => (&body["query"]["text"], &passages[0]["text"]),
                _ => (&body["query"], &passages[0]),
            };
            let (q, p) = (query.as_str().unwrap(), first.as_str().unwrap());
            assert!(!q.is_empty() && q.len() < p.len(), "{kind}: {q:?} {p:?}");
            assert_eq!(
                body.get("model").is_some(),
                kind != "hf_tei_rankings",
                "{kind}: TEI takes no model"
            );
        }
    }
    // GenAI-Perf's --batch-size-text sets the passages when --rankings-passages-mean does not.
    let dir = artifact_dir("ep-rank-batch");
    let res = profile(
        &format!(
            "--url http://{} --endpoint-type cohere_rankings --batch-size-text 4 \
             --request-count 2 --rankings-passages-prompt-token-mean 8",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    assert_eq!(res.report.completed, 2, "{}", res.console);
    let inputs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("inputs.json")).unwrap()).unwrap();
    for entry in inputs["data"].as_array().unwrap() {
        assert_eq!(
            entry["payload"][0]["documents"].as_array().unwrap().len(),
            4
        );
    }
    let e = profile(
        &format!(
            "--url http://{} --endpoint-type cohere_rankings --batch-size-text 4 \
             --rankings-passages-mean 2 --request-count 1",
            s.addr
        ),
        &artifact_dir("ep-rank-both"),
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(e.contains("give one") && e.lines().count() == 1, "{e}");
    // The rankings flags go with a ranking endpoint.
    let e = profile(
        &format!(
            "--url http://{} --rankings-passages-mean 3 --request-count 1",
            s.addr
        ),
        &artifact_dir("ep-rank-refused"),
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(e.contains("--rankings-*") && e.lines().count() == 1, "{e}");
}

#[test]
fn aiperfs_image_generation_sends_a_prompt_and_counts_the_images() {
    let _shared = support::shared();
    let s = sim("--ttft 20ms");
    let dir = artifact_dir("ep-image-generation");
    let res = profile(
        &format!(
            "--url http://{} --endpoint-type image_generation --concurrency 2 --request-count 6 \
             --synthetic-input-tokens-mean 40 --extra-inputs n:3 --extra-inputs size:512x512",
            s.addr
        ),
        &dir,
    )
    .unwrap();
    let r = &res.report;
    assert_eq!((r.completed, r.failed), (6, 0), "{}", res.console);
    assert_eq!(r.images, 18, "three images an answer");
    assert_eq!(r.metrics.ttft.count() + r.metrics.osl.count(), 0);
    assert!(
        res.console.contains("Image Generation Metrics"),
        "{}",
        res.console
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("profile_export_ringperf.json")).unwrap())
            .unwrap();
    assert!(doc["request_latency"]["avg"].as_f64().unwrap() >= 20.0);
    // Images per second: three times the requests per second, over the same window.
    let ips = doc["generated_image_throughput"]["avg"].as_f64().unwrap();
    let rps = doc["request_throughput"]["avg"].as_f64().unwrap();
    assert!((ips / rps - 3.0).abs() < 1e-9 && rps > 10.0, "{ips} {rps}");
    assert_eq!(doc["generated_image_count"]["avg"], 18.0);
    let csv = std::fs::read_to_string(dir.join("profile_export_ringperf.csv")).unwrap();
    assert!(
        csv.contains("Generated Image Throughput (images/sec)"),
        "{csv}"
    );
    let inputs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("inputs.json")).unwrap()).unwrap();
    let body = &inputs["data"][0]["payload"][0];
    assert_eq!(
        (&body["n"], &body["size"], &body["response_format"]),
        (&3.into(), &"512x512".into(), &"b64_json".into()),
        "{body}"
    );
    assert!(body["prompt"].as_str().unwrap().len() > 60 && body.get("stream").is_none());
    let lines = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    for line in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["metrics"]["generated_images"]["value"], 3, "{line}");
    }
    // Streamed partial images are not read: refused in one line, nothing sent.
    let e = profile(
        &format!(
            "--url http://{} --endpoint-type image_generation --streaming --request-count 1",
            s.addr
        ),
        &artifact_dir("ep-image-streaming"),
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(e.contains("--streaming") && e.lines().count() == 1, "{e}");
}

/// Answers of every shape an image server can give: a 6 MiB image (past the cap on kept
/// bodies: it is counted as it arrives, not kept), an empty list, an error, a cut body.
#[test]
fn image_answers_are_counted_as_they_arrive_and_bad_ones_fail_by_kind() {
    let _shared = support::shared();
    let big = format!(
        r#"{{"created":1,"data":[{{"b64_json":"{}","revised_prompt":"a \"fox\" ]}}"}}]}}"#,
        "QUJD".repeat(6 << 18)
    );
    let server = fake_server(move |n, _| {
        // Whether or not a first request checks the server, the first measured one succeeds.
        let body = match n % 5 {
            0 | 1 => big.clone(),
            2 => r#"{"created":1,"data":[]}"#.to_string(),
            3 => r#"{"error":{"message":"out of memory","type":"server_error"}}"#.to_string(),
            _ => r#"{"created":1,"data":[{"b64_json":"QUJD"}"#.to_string(),
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        ([head.into_bytes(), body.into_bytes()].concat(), false)
    });
    let res = profile(
        &format!(
            "--url http://{} --endpoint-type image_generation -m m \
             --concurrency 1 --request-count 10",
            server.addr
        ),
        &artifact_dir("ep-image-answers"),
    )
    .unwrap();
    let r = &res.report;
    assert_eq!(
        (r.completed, r.failed, r.images),
        (4, 6, 4),
        "{}",
        res.console
    );
    let by_kind: std::collections::BTreeMap<&str, u64> = r
        .errors
        .iter()
        .map(|e| (e.kind.as_str(), e.count))
        .collect();
    assert_eq!(
        by_kind,
        [("bad_json", 2), ("no_content", 2), ("server_error", 2)].into(),
        "{}",
        res.console
    );
}
