//! The dashboard (`--ui dashboard`) as a user sees it: the binary runs on a pseudo-terminal
//! this test holds, and a terminal emulator (vt100) reads back each frame it draws.

use crate::support;
use std::process::Stdio;

#[test]
fn without_a_terminal_the_dashboard_says_so_and_the_run_goes_on() {
    let _shared = support::shared();
    let dir = support::artifact_dir("dashboard-no-tty");
    // AIPerf's spelling of the flag.
    let out = support::ringperf()
        .args([
            "profile",
            "--sim=--ttft 1ms --itl 1ms",
            "--streaming",
            "--request-count",
            "4",
            "--ui-type",
            "dashboard",
            "--artifact-dir",
        ])
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("--ui dashboard: stderr is not a terminal; no live view"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("\x1b[?1049h"),
        "took a screen that is not there"
    );
    assert!(dir.join("profile_export_ringperf.json").exists());
}
