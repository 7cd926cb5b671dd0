//! Waiting for a server that comes up late: the wait is said, and ringperf's own start-up,
//! timed apart from it, is shorter.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::support::{self, artifact_dir};

#[test]
fn a_server_that_comes_up_late_is_waited_for() {
    let _alone = support::alone();
    let port = support::closed_port();
    let dir = artifact_dir("preflight-late");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringperf"))
        .args([
            "profile",
            "--url",
            &format!("http://127.0.0.1:{port}"),
            "--ready-check-timeout",
            "60s",
            "--request-count",
            "3",
            "--output-tokens-mean",
            "4",
            "--no-progress",
            "--artifact-dir",
            dir.to_str().unwrap(),
        ])
        .env_remove("OPENAI_API_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let waiting = support::wait_for_line(&mut lines, |l| {
        l.contains("waiting for").then(|| l.to_string())
    });
    assert!(waiting.contains("to come up"), "{waiting}");
    // The scenario, not a wait for readiness: the server comes up 3 s late.
    std::thread::sleep(std::time::Duration::from_secs(3));
    // Now the server starts, on the port the run waits for.
    let mut args = ringperf::cli::SimArgs::parse_inline("--ttft 1ms --itl 1ms").unwrap();
    args.bind = format!("127.0.0.1:{port}");
    let s = ringperf::sim::start(&args.config().unwrap()).expect("the port is free again");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "{}", rest.join("\n"));
    assert!(
        rest.iter().any(|l| l.contains("preflight:")),
        "{}",
        rest.join("\n")
    );
    assert_eq!(s.served().0, 4);
    // The wait is said, and it is not start-up: ringperf's own work took less than it.
    let seconds = |key: &str| -> f64 {
        let line = rest.iter().find(|l| l.contains(key)).expect(key);
        let at = line.find(key).unwrap() + key.len();
        line[at..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let waited = seconds("answered after ");
    let startup = seconds("start-up ");
    assert!(waited >= 3.0, "{}", rest.join("\n"));
    assert!(startup < waited - 1.0, "{}", rest.join("\n"));
}
