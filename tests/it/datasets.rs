//! Datasets from files, made here by the tests: custom JSONL, ShareGPT, mooncake traces
//! (replayed on their own schedule, with prefix blocks shared by hash id), shared prefixes.

use crate::support;

use std::path::PathBuf;

use ringperf::plan::Plan;

pub(crate) fn write(name: &str, text: &str) -> PathBuf {
    let dir = support::artifact_dir(&format!("dataset-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn bodies(plan: &Plan) -> Vec<serde_json::Value> {
    plan.workload
        .dataset
        .entries
        .iter()
        .map(|e| serde_json::from_slice(e.template.body()).unwrap())
        .collect()
}

fn plan(flags: &[&str]) -> Result<Plan, String> {
    let mut all = vec!["--url", "127.0.0.1:9"];
    all.extend_from_slice(flags);
    support::profile_args(&all)
        .plan()
        .map_err(|e| e.to_string())
}

#[test]
fn custom_jsonl_text_messages_and_max_tokens() {
    let _shared = support::shared();
    let f = write(
        "custom.jsonl",
        "{\"text\": \"Hello there\", \"max_tokens\": 7}\n\n\
         {\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]}\n",
    );
    let p = plan(&[
        "--input-file",
        f.to_str().unwrap(),
        "--output-tokens-mean",
        "30",
    ])
    .unwrap();
    let b = bodies(&p);
    assert_eq!(b.len(), 2);
    assert_eq!(b[0]["messages"][0]["content"], "Hello there");
    assert_eq!(b[0]["max_completion_tokens"], 7);
    assert_eq!(b[1]["messages"][0]["role"], "system");
    assert_eq!(
        b[1]["max_completion_tokens"], 30,
        "the flag fills in what the line does not say"
    );
    let tok = ringperf::internals::workload::Tokenizer::embedded().unwrap();
    let want = tok.count("Be brief.").unwrap() + tok.count("Hi").unwrap();
    assert_eq!(
        p.workload.dataset.entries[1]
            .isl(&p.workload.tokenizer)
            .unwrap() as usize,
        want,
        "tokens of every message"
    );
}

#[test]
fn a_files_prompts_are_counted_after_the_run() {
    let _shared = support::shared();
    let texts = [
        "Shall I compare thee to a summer's day?",
        "Thou art more lovely and more temperate:",
        "Rough winds do shake the darling buds of May, and summer's lease hath all too short a date;",
    ];
    let lines: Vec<String> = texts
        .iter()
        .map(|t| serde_json::json!({ "text": t }).to_string())
        .collect();
    let f = write("counted.jsonl", &(lines.join("\n") + "\n"));
    let p = plan(&["--input-file", f.to_str().unwrap()]).unwrap();
    // Nothing is counted before the run: that cost a 100,000-line file a minute.
    assert!(p
        .workload
        .dataset
        .entries
        .iter()
        .all(|e| e.known_isl().is_none()));
    let s = support::sim("--ttft 1ms --itl 1ms");
    let dir = support::artifact_dir("dataset-counted-run");
    let res = support::profile(
        &format!(
            "--url http://{} -m ringperf-sim --input-file {} --num-dataset-entries 3 \
             --request-count 7 --output-tokens-mean 2",
            s.addr,
            f.display()
        ),
        &dir,
    )
    .unwrap();
    let tok = ringperf::internals::workload::Tokenizer::embedded().unwrap();
    let want: Vec<u32> = texts.iter().map(|t| tok.count(t).unwrap() as u32).collect();
    assert!(want[0] != want[2], "{want:?}");
    let recs = &res.report.records;
    assert_eq!(recs.len(), 7);
    for r in recs {
        assert_eq!(r.isl, Some(want[r.entry as usize]), "entry {}", r.entry);
    }
    let sent: u64 = [0, 1, 2, 0, 1, 2, 0]
        .iter()
        .map(|&i| u64::from(want[i]))
        .sum();
    assert_eq!(res.report.input_tokens, sent, "{}", res.console);
}

#[test]
fn malformed_lines_are_reported_with_their_line_number() {
    let _shared = support::shared();
    let f = write("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": \n");
    let e = plan(&["--input-file", f.to_str().unwrap()]).expect_err("refused");
    assert!(e.contains("bad.jsonl:2: invalid JSON"), "{e}");
    let f = write(
        "nofield.jsonl",
        "{\"text\": \"ok\"}\n{\"prompt_text\": \"x\"}\n",
    );
    let e = plan(&["--input-file", f.to_str().unwrap()]).expect_err("refused");
    assert!(e.contains("nofield.jsonl:2: expected a \"text\""), "{e}");
    // A trace line asking for a billion-token prompt is refused before it is built.
    let f = write(
        "huge.jsonl",
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n\
         {\"timestamp\": 1, \"input_length\": 1000000000, \"output_length\": 1}\n",
    );
    let t = std::time::Instant::now();
    let e = plan(&["--input-file", f.to_str().unwrap()]).expect_err("refused");
    assert!(
        e.contains("huge.jsonl:2: input_length 1000000000 is over"),
        "{e}"
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn sharegpt_first_human_turn_and_reply_length() {
    let _shared = support::shared();
    let f = write(
        "sg.json",
        r#"[
          {"id": "a", "conversations": [{"from": "gpt", "value": "orphan"}]},
          {"id": "b", "conversations": [{"from": "human", "value": "What is a sonnet?"},
                                       {"from": "gpt", "value": "A poem of fourteen lines."}]},
          {"id": "c", "conversations": [{"from": "human", "value": "Second"}]}
        ]"#,
    );
    let p = plan(&["--input-file", f.to_str().unwrap()]).unwrap();
    let b = bodies(&p);
    assert_eq!(b.len(), 2, "the entry without a human turn is skipped");
    assert_eq!(b[0]["messages"][0]["content"], "What is a sonnet?");
    let reply_tokens = ringperf::internals::workload::Tokenizer::embedded()
        .unwrap()
        .count("A poem of fourteen lines.")
        .unwrap();
    assert_eq!(b[0]["max_completion_tokens"], reply_tokens as u64);
    let f = write(
        "sg-none.json",
        r#"[{"conversations": [{"from": "gpt", "value": "x"}]}]"#,
    );
    let e = plan(&["--input-file", f.to_str().unwrap()]).expect_err("refused");
    assert!(e.contains("no conversation has a human turn"), "{e}");
}

pub(crate) fn trace() -> String {
    // Requests 0 and 2 share their first block (hash 1), 0 and 1 share nothing but block 9.
    [
        r#"{"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]}"#,
        r#"{"timestamp": 10, "input_length": 600, "output_length": 5, "hash_ids": [9, 10]}"#,
        r#"{"timestamp": 25, "input_length": 700, "output_length": 5, "hash_ids": [1, 4]}"#,
        r#"{"timestamp": 25, "input_length": 300, "output_length": 5, "hash_ids": [1]}"#,
    ]
    .join("\n")
}

#[test]
fn mooncake_prompts_share_blocks_by_hash_id() {
    let _shared = support::shared();
    let f = write("trace.jsonl", &trace());
    let p = plan(&["--input-file", f.to_str().unwrap(), "--fixed-schedule"]).unwrap();
    let tok = ringperf::internals::workload::Tokenizer::embedded().unwrap();
    let prompts: Vec<String> = bodies(&p)
        .iter()
        .map(|b| b["messages"][0]["content"].as_str().unwrap().to_string())
        .collect();
    let ids: Vec<Vec<u32>> = prompts.iter().map(|t| tok.encode(t).unwrap()).collect();
    // Same first hash id: the same first 512-token block (allow the tokenizer a few tokens
    // of merging at the block edge).
    let common = |a: &[u32], b: &[u32]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
    assert!(
        common(&ids[0], &ids[2]) >= 500,
        "{}",
        common(&ids[0], &ids[2])
    );
    assert!(common(&ids[0], &ids[2]) < 1000, "the second blocks differ");
    assert!(common(&ids[0], &ids[3]) >= 290);
    assert!(
        common(&ids[0], &ids[1]) < 10,
        "different hash ids, different text"
    );
    for (i, want) in [1100, 600, 700, 300].into_iter().enumerate() {
        let got = p.workload.dataset.entries[i]
            .isl(&p.workload.tokenizer)
            .unwrap() as i64;
        assert!(
            (got - want).abs() <= 8,
            "entry {i}: {got} tokens for {want}"
        );
    }
    assert_eq!(
        p.load.offsets.as_deref(),
        Some(&vec![0, 10_000_000, 25_000_000, 25_000_000])
    );
    assert_eq!(p.load.concurrency, u64::MAX, "a replay is open loop");
}

#[test]
fn trace_timestamps_going_backwards_are_refused() {
    let _shared = support::shared();
    let f = write(
        "back.jsonl",
        "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 1}\n{\"timestamp\": 3, \"input_length\": 10, \"output_length\": 1}\n",
    );
    let e = plan(&["--input-file", f.to_str().unwrap(), "--fixed-schedule"]).expect_err("refused");
    assert!(
        e.contains("back.jsonl:2: timestamp 3 goes backwards"),
        "{e}"
    );
}

#[test]
fn shared_prefixes_start_every_prompt() {
    let _shared = support::shared();
    let p = plan(&[
        "--num-prefix-prompts",
        "3",
        "--prefix-prompt-length",
        "50",
        "--num-dataset-entries",
        "30",
        "--synthetic-input-tokens-mean",
        "20",
    ])
    .unwrap();
    let prompts: Vec<String> = bodies(&p)
        .iter()
        .map(|b| b["messages"][0]["content"].as_str().unwrap().to_string())
        .collect();
    let mut heads: Vec<&str> = prompts
        .iter()
        .map(|t| t.split('\n').next().unwrap())
        .collect();
    heads.sort();
    heads.dedup();
    // The prefixes are whole corpus lines cut at 50 tokens: at most 3 distinct openings.
    assert!(heads.len() <= 3 && !heads.is_empty(), "{heads:?}");
    let tok = ringperf::internals::workload::Tokenizer::embedded().unwrap();
    let isl = tok.count(&prompts[0]).unwrap();
    assert!((65..=75).contains(&isl), "prefix 50 + newline + 20: {isl}");
}

/// What a run sent, request by request: (id, entry, prompt tokens, output tokens asked and
/// answered), the report's warnings, `inputs.json`, and whether the plan streamed the file.
type Sent = (
    Vec<(u64, u32, Option<u32>, Option<u32>, Option<u64>)>,
    Vec<String>,
    String,
    bool,
);

pub(crate) fn sent(flags: &str, name: &str) -> Sent {
    let dir = support::artifact_dir(name);
    let res = support::profile(flags, &dir).unwrap();
    let mut recs: Vec<_> = res
        .report
        .records
        .iter()
        .map(|r| (r.id, r.entry, r.isl, r.requested_osl, r.osl))
        .collect();
    recs.sort_unstable();
    let json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(res.artifact_dir.join("profile_export_ringperf.json")).unwrap(),
    )
    .unwrap();
    let streamed = json["input_config"]["resolved"]["dataset_streamed"]
        .as_bool()
        .unwrap();
    let inputs = std::fs::read_to_string(res.artifact_dir.join("inputs.json")).unwrap();
    let warnings = res
        .report
        .warnings
        .iter()
        .map(|w| w.message.clone())
        .collect();
    (recs, warnings, inputs, streamed)
}

#[test]
fn analyze_trace_reports_a_traces_prefix_sharing_in_aiperfs_layout() {
    let _shared = support::shared();
    let f = write("analyze.jsonl", &trace());
    let out_file = f.with_file_name("analysis").join("report.json");
    let out = support::ringperf()
        .args(["analyze-trace"])
        .arg(&f)
        .args(["--block-size", "256", "--output-file"])
        .arg(&out_file)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("Total requests:     4"), "{stdout}");
    assert!(stdout.contains("Theoretical Hit Rates"), "{stdout}");
    let a: serde_json::Value = serde_json::from_slice(&std::fs::read(&out_file).unwrap()).unwrap();
    // Leading runs [1] [1,2] [1,2,3] [9] [9,10] [1,4]: six; [1] is on three lines, so 3 of
    // the 8 runs the lines have are reused.
    assert_eq!(a["unique_prefixes"], 6);
    assert!(
        (a["prefix_reuse_ratio"].as_f64().unwrap() - 3.0 / 8.0).abs() < 1e-12,
        "{a}"
    );
    // Hit rates in order: 0, 0, 1/2 (1 seen, 4 new), 1 (1 seen).
    assert!(
        (a["cache_hit_rate"].as_f64().unwrap() - 1.5 / 4.0).abs() < 1e-12,
        "{a}"
    );
    // Context: (place 0, id 1) is on three lines: 256 tokens for lines 0 and 2, all 300 of
    // line 3; nothing of line 1.
    let ctx = &a["context_length_stats"];
    assert_eq!(ctx["max"], 300.0);
    assert!((ctx["mean"].as_f64().unwrap() - (256.0 + 0.0 + 256.0 + 300.0) / 4.0).abs() < 1e-9);
    assert_eq!(a["isl_stats"]["median"], 650.0);
    assert_eq!(
        (a["min_isl"].clone(), a["max_osl"].clone()),
        (300.into(), 5.into())
    );

    // A bad line is named with its file and line number, and nothing is written.
    let bad = write(
        "analyze-bad.jsonl",
        &format!("{}\n{{\"timestamp\": 1}}\n", trace()),
    );
    let out = support::ringperf()
        .args(["analyze-trace"])
        .arg(&bad)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr.contains("analyze-bad.jsonl:5: missing \"input_length\""),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn jsonl_lines_carry_their_images_and_audio_as_chat_parts() {
    let _shared = support::shared();
    use base64::Engine as _;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let f = write(
        "media.jsonl",
        &[
            r#"{"text": "Describe the picture.", "image": "pic.png"}"#,
            r#"{"text": "Compare them.", "images": ["https://example.com/a.jpg", "data:image/png;base64,AAAA"]}"#,
            r#"{"text": "Transcribe.", "audio": "wav,UklGRg=="}"#,
            r#"{"text": "And this one.", "audio": "clip.wav", "max_tokens": 7}"#,
        ]
        .join("\n"),
    );
    // The files the lines name, beside the JSONL file.
    let mut png = Vec::new();
    {
        let mut e = png::Encoder::new(&mut png, 3, 2);
        e.set_color(png::ColorType::Rgb);
        e.write_header()
            .unwrap()
            .write_image_data(&[7u8; 18])
            .unwrap();
    }
    std::fs::write(f.with_file_name("pic.png"), &png).unwrap();
    let wav = b"RIFF....WAVEfmt fake".to_vec();
    std::fs::write(f.with_file_name("clip.wav"), &wav).unwrap();

    let p = plan(&["--input-file", f.to_str().unwrap()]).unwrap();
    let bodies = bodies(&p);
    let content = |i: usize| {
        bodies[i]["messages"][0]["content"]
            .as_array()
            .unwrap()
            .clone()
    };
    let c = content(0);
    assert_eq!(
        c[0],
        serde_json::json!({"type": "text", "text": "Describe the picture."})
    );
    assert_eq!(
        c[1]["image_url"]["url"],
        format!("data:image/png;base64,{}", b64(&png))
    );
    let c = content(1);
    assert_eq!(c[1]["image_url"]["url"], "https://example.com/a.jpg");
    assert_eq!(c[2]["image_url"]["url"], "data:image/png;base64,AAAA");
    assert_eq!(
        content(2)[1],
        serde_json::json!({"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}})
    );
    assert_eq!(content(3)[1]["input_audio"]["data"], b64(&wav));
    assert_eq!(bodies[3]["max_completion_tokens"], 7);
    // ISL counts the text parts alone.
    let tok = &p.workload.tokenizer;
    for (i, text) in ["Describe the picture.", "Compare them."]
        .into_iter()
        .enumerate()
    {
        assert_eq!(
            p.workload.dataset.entries[i].isl(tok).unwrap() as usize,
            tok.count(text).unwrap(),
            "line {i}"
        );
    }

    // A file that is not there, or not an image, is named with its line.
    for (line, says) in [
        (r#"{"text": "x", "image": "missing.png"}"#, "missing.png"),
        (
            r#"{"text": "x", "image": "clip.wav"}"#,
            "an image must be .png",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "x"}], "audio": "wav,AA"}"#,
            "put them in the messages",
        ),
    ] {
        let bad = f.with_file_name("bad.jsonl");
        std::fs::write(&bad, format!("{{\"text\": \"fine\"}}\n{line}\n")).unwrap();
        let e = plan(&["--input-file", bad.to_str().unwrap()]).unwrap_err();
        assert!(e.contains("bad.jsonl:2: ") && e.contains(says), "{e}");
    }
}
