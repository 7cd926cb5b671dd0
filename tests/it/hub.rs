//! `--tokenizer org/name` against a hub made here: the first run downloads into the Hugging
//! Face cache layout (following the hub's redirect to its file store), the second runs with
//! the hub gone; gated, missing and unreachable models and offline mode say what to do.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::support::{self, artifact_dir};

const COMMIT: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678";
const TOKEN: &str = "hf_test_token_that_must_not_leak_42";

/// A hub on loopback: `/org/tiny` redirects to its file store, `/org/gated` answers 401 and
/// anything else 404. Requests are logged as `path authorization`.
struct MockHub {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Drop for MockHub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

fn tokenizer_json() -> Vec<u8> {
    let gz = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/workload/qwen3/tokenizer.json.gz"),
    )
    .unwrap();
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// Where AIPerf's `--public-dataset sharegpt` lies on the hub.
const SHAREGPT_PATH: &str = "/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered/resolve/main/ShareGPT_V3_unfiltered_cleaned_split.json";

/// A ShareGPT file of three conversations.
fn sharegpt_json() -> Vec<u8> {
    let conv = |q: &str, a: &str| serde_json::json!({"id": q, "conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": a}]});
    serde_json::to_vec(&[
        conv("Why is the sky blue?", "Rayleigh scattering of sunlight."),
        conv("Name three primes.", "Two, three and five."),
        conv(
            "What is a monad?",
            "A monoid in the category of endofunctors.",
        ),
    ])
    .unwrap()
}

/// Where the hub's Parquet conversion of InstructCoder's train split starts.
const CODER_PATH: &str =
    "/datasets/likaixin/InstructCoder/resolve/refs%2Fconvert%2Fparquet/default/train/0000.parquet";

/// InstructCoder's columns, three rows, snappy-compressed as the hub converts them.
fn coder_parquet() -> Vec<u8> {
    use parquet::data_type::{ByteArray, ByteArrayType};
    let schema = parquet::schema::parser::parse_message_type(
        "message m { required binary instruction (UTF8); required binary input (UTF8); \
         required binary output (UTF8); }",
    )
    .unwrap();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .build();
    let mut out = Vec::new();
    let mut w = parquet::file::writer::SerializedFileWriter::new(
        &mut out,
        Arc::new(schema),
        Arc::new(props),
    )
    .unwrap();
    let mut group = w.next_row_group().unwrap();
    for col in [
        [
            "Add a docstring",
            "Rename x to count",
            "Use a list comprehension",
        ],
        [
            "def f(): pass",
            "x = 1",
            "out = []\nfor i in r: out.append(i)",
        ],
        ["…", "…", "…"],
    ] {
        let mut c = group.next_column().unwrap().unwrap();
        let values: Vec<ByteArray> = col.iter().map(|v| ByteArray::from(*v)).collect();
        c.typed::<ByteArrayType>()
            .write_batch(&values, None, None)
            .unwrap();
        c.close().unwrap();
    }
    group.close().unwrap();
    w.close().unwrap();
    out
}

fn mock_hub() -> MockHub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let (l, s) = (log.clone(), stop.clone());
    let file = Arc::new(tokenizer_json());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            if s.load(Ordering::Relaxed) {
                return;
            }
            let Ok(mut conn) = conn else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head).to_string();
            let path = head.split(' ').nth(1).unwrap_or("").to_string();
            let auth = head
                .lines()
                .find_map(|l| l.strip_prefix("Authorization: "))
                .unwrap_or("-")
                .to_string();
            l.lock().unwrap().push(format!("{path} {auth}"));
            let reply: Vec<u8> = if path == "/org/tiny/resolve/main/tokenizer.json" {
                format!(
                    "HTTP/1.1 302 Found\r\nLocation: /store/blob-1\r\nX-Repo-Commit: {COMMIT}\r\n\
                     X-Linked-Etag: \"sha256-of-the-file\"\r\nContent-Length: 0\r\n\r\n"
                )
                .into_bytes()
            } else if path == "/store/blob-1" {
                let mut r = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                    file.len()
                )
                .into_bytes();
                r.extend_from_slice(&file);
                r
            } else if path == SHAREGPT_PATH {
                let body = sharegpt_json();
                let mut r = format!(
                    "HTTP/1.1 200 OK\r\nX-Repo-Commit: {COMMIT}\r\nETag: \"sharegpt-etag\"\r\n\
                     Content-Length: {}\r\n\r\n",
                    body.len()
                )
                .into_bytes();
                r.extend_from_slice(&body);
                r
            } else if path == CODER_PATH {
                let body = coder_parquet();
                let mut r = format!(
                    "HTTP/1.1 200 OK\r\nX-Repo-Commit: {COMMIT}\r\nETag: \"coder-etag\"\r\n\
                     Content-Length: {}\r\n\r\n",
                    body.len()
                )
                .into_bytes();
                r.extend_from_slice(&body);
                r
            } else if path.starts_with("/org/gated/") {
                b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n".to_vec()
            } else {
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec()
            };
            let _ = conn.write_all(&reply);
        }
    });
    MockHub { addr, log, stop }
}

/// `ringperf profile --sim --tokenizer MODEL …` with the hub's environment; (exit code,
/// stdout and stderr together).
fn run(model: &str, endpoint: &str, cache: &Path, extra_env: &[(&str, &str)]) -> (i32, String) {
    let flags = [
        "--tokenizer",
        model,
        "--request-count",
        "2",
        "--output-tokens-mean",
        "2",
    ];
    let (code, text, _) = run_with(&flags, endpoint, cache, extra_env);
    (code, text)
}

/// `ringperf profile --sim FLAGS…` with the hub's environment; (exit code, stdout and stderr
/// together, the artifact folder).
fn run_with(
    flags: &[&str],
    endpoint: &str,
    cache: &Path,
    extra_env: &[(&str, &str)],
) -> (i32, String, std::path::PathBuf) {
    let dir = artifact_dir("hub-run");
    let mut c = Command::new(env!("CARGO_BIN_EXE_ringperf"));
    // A vLLM line (it names a --backend) turns its progress bar off in vLLM's words.
    let quiet = if flags.contains(&"--backend") {
        "--disable-tqdm"
    } else {
        "--no-progress"
    };
    // A fast simulator: vLLM's line asks for 200 tokens a request, 2 s at the default pace.
    c.args(["profile", "--sim=--ttft 5ms --itl 1ms"])
        .args(flags)
        .args([quiet, "--artifact-dir"])
        .arg(&dir)
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("HF_HOME")
        .env("HF_ENDPOINT", endpoint)
        .env("HF_HUB_CACHE", cache)
        .env("HF_TOKEN", TOKEN);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    // The token reaches no output and no artifact.
    assert!(!text.contains(TOKEN), "{text}");
    for f in support::files_under(&dir) {
        let body = std::fs::read(&f).unwrap();
        assert!(!String::from_utf8_lossy(&body).contains(TOKEN), "{f:?}",);
    }
    (out.status.code().unwrap_or(-1), text, dir)
}

#[test]
fn a_hub_tokenizer_is_downloaded_once_into_the_shared_cache() {
    let _shared = support::shared();
    let cache = artifact_dir("hub-cache");
    let hub = mock_hub();
    let endpoint = format!("http://{}", hub.addr);
    let (code, out) = run("org/tiny", &endpoint, &cache, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("downloading tokenizer.json of org/tiny"),
        "{out}"
    );
    // The layout Python tools share: refs, a snapshot linking to a blob named by its hash.
    let repo = cache.join("models--org--tiny");
    assert_eq!(
        std::fs::read_to_string(repo.join("refs/main")).unwrap(),
        COMMIT
    );
    let snap = repo.join("snapshots").join(COMMIT).join("tokenizer.json");
    assert_eq!(
        std::fs::read_link(&snap).unwrap(),
        Path::new("../../blobs/sha256-of-the-file")
    );
    assert_eq!(std::fs::read(&snap).unwrap(), tokenizer_json());
    assert!(out.contains(snap.to_str().unwrap()), "{out}");
    // The token went to the hub with the first request.
    let log = hub.log.lock().unwrap().clone();
    assert_eq!(
        log[0],
        format!("/org/tiny/resolve/main/tokenizer.json Bearer {TOKEN}")
    );
    assert_eq!(log.len(), 2, "{log:?}");

    // The second run needs no hub.
    drop(hub);
    let (code, out) = run("org/tiny", &endpoint, &cache, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("downloading"), "{out}");
}

#[test]
fn gated_missing_unreachable_and_offline_models_say_what_to_do() {
    let _shared = support::shared();
    let cache = artifact_dir("hub-cache-errors");
    let hub = mock_hub();
    let endpoint = format!("http://{}", hub.addr);
    type Env<'a> = &'a [(&'a str, &'a str)];
    let cases: [(&str, &str, Env, &str); 4] = [
        (
            "org/gated",
            &endpoint,
            &[],
            "gated or private; set HF_TOKEN",
        ),
        ("org/nothing", &endpoint, &[], "is the model id right?"),
        (
            "org/tiny",
            "http://127.0.0.1:9",
            &[],
            "cannot reach http://127.0.0.1:9",
        ),
        (
            "org/tiny",
            &endpoint,
            &[("HF_HUB_OFFLINE", "1")],
            "HF_HUB_OFFLINE is set",
        ),
    ];
    for (model, at, env, expect) in cases {
        let (code, out) = run(model, at, &cache, env);
        assert_eq!(code, 2, "{model}: {out}");
        let line = out.lines().find(|l| l.starts_with("error:")).unwrap_or("");
        assert!(
            line.contains(expect),
            "{model}: {line:?} lacks {expect:?}\n{out}"
        );
    }
    assert!(
        !cache.join("models--org--tiny").exists(),
        "nothing was cached"
    );
}

#[test]
fn aiperfs_public_sharegpt_is_downloaded_once_then_read_offline_from_the_cache() {
    let _shared = support::shared();
    let cache = artifact_dir("hub-dataset-cache");
    let hub = mock_hub();
    let endpoint = format!("http://{}", hub.addr);
    let flags = ["--public-dataset", "sharegpt", "--request-count", "3"];
    let run = |env: &[(&str, &str)]| {
        let (code, text, dir) = run_with(&flags, &endpoint, &cache, env);
        let inputs = std::fs::read_to_string(dir.join("inputs.json")).unwrap_or_default();
        (code, text, inputs)
    };
    let (code, out, inputs) = run(&[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("downloading ShareGPT_V3_unfiltered_cleaned_split.json"),
        "{out}"
    );
    // The first human turns are the prompts.
    for q in [
        "Why is the sky blue?",
        "Name three primes.",
        "What is a monad?",
    ] {
        assert!(inputs.contains(q), "{q} not sent: {inputs}");
    }
    // In the cache's dataset layout, by commit and ETag.
    let repo = cache.join("datasets--anon8231489123--ShareGPT_Vicuna_unfiltered");
    let snap = repo
        .join("snapshots")
        .join(COMMIT)
        .join("ShareGPT_V3_unfiltered_cleaned_split.json");
    assert_eq!(std::fs::read(&snap).unwrap(), sharegpt_json());
    assert!(repo.join("blobs/sharegpt-etag").is_file());
    assert_eq!(hub.log.lock().unwrap().len(), 1);

    // Offline, with the hub gone: from the cache.
    drop(hub);
    let (code, out, inputs) = run(&[("HF_HUB_OFFLINE", "1")]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("downloading"), "{out}");
    assert!(inputs.contains("What is a monad?"));

    // Offline with an empty cache: one line that says what to do.
    let empty = artifact_dir("hub-dataset-empty");
    let (code, out, _) = run_with(&flags, &endpoint, &empty, &[("HF_HUB_OFFLINE", "1")]);
    assert_ne!(code, 0);
    let line = out
        .lines()
        .find(|l| l.starts_with("error"))
        .unwrap_or_default();
    assert!(
        line.contains("HF_HUB_OFFLINE is set") && line.contains("--input-file"),
        "{out}"
    );
}

#[test]
fn vllms_hub_datasets_read_the_hubs_parquet_once_then_offline() {
    let _shared = support::shared();
    let cache = artifact_dir("hub-parquet-cache");
    let hub = mock_hub();
    let endpoint = format!("http://{}", hub.addr);
    // vLLM's documented line, against the simulator.
    let flags = [
        "--backend",
        "openai-chat",
        "--endpoint",
        "/v1/chat/completions",
        "--dataset-name",
        "hf",
        "--dataset-path",
        "likaixin/InstructCoder",
        "--num-prompts",
        "3",
    ];
    let run = |env: &[(&str, &str)]| {
        let (code, text, dir) = run_with(&flags, &endpoint, &cache, env);
        let inputs = std::fs::read_to_string(dir.join("inputs.json")).unwrap_or_default();
        (code, text, inputs)
    };
    let (code, out, inputs) = run(&[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("downloading default/train/0000.parquet"),
        "{out}"
    );
    let inputs: serde_json::Value = serde_json::from_str(&inputs).unwrap();
    let bodies: Vec<&serde_json::Value> = inputs["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["payload"][0])
        .collect();
    assert_eq!(bodies.len(), 3);
    // vLLM's prompt for the dataset, and its 200 output tokens.
    assert_eq!(
        bodies[1]["messages"][0]["content"],
        "x = 1\n\nRename x to count Just output the code, do not include any explanation."
    );
    // vLLM's chat backend asks with max_completion_tokens.
    assert!(
        bodies.iter().all(|b| b["max_completion_tokens"] == 200),
        "{bodies:?}"
    );
    let repo = cache.join("datasets--likaixin--InstructCoder");
    assert!(repo.join("refs/refs/convert/parquet").is_file());
    assert!(repo.join("blobs/coder-etag").is_file());
    assert_eq!(hub.log.lock().unwrap().len(), 1);
    // Offline, with the hub gone: from the cache.
    drop(hub);
    let (code, out, inputs) = run(&[("HF_HUB_OFFLINE", "1")]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("downloading") && inputs.contains("Use a list comprehension"));
}
