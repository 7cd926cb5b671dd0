//! The binary as a user runs it, with a CPU kept busy on purpose.

use crate::support::{self, ringperf};

#[test]
fn doctor_names_a_busy_cpu_and_what_keeps_it_busy_and_fails_on_a_blocker() {
    let _alone = support::alone();
    let quiet = ringperf()
        .args(["doctor", "--concurrency", "100"])
        .output()
        .unwrap();
    assert!(quiet.status.success());
    let text = String::from_utf8_lossy(&quiet.stdout).into_owned();
    for name in [
        "open files",
        "ephemeral ports",
        "io_uring",
        "clock source",
        "NVML",
    ] {
        assert!(text.contains(name), "{name}: {text}");
    }
    // A thread of this process spins on the first CPU it may use until the doctor is done.
    let cpu = ringperf::internals::cpus::usable_cpus()[0];
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spin = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            ringperf::internals::sys::set_affinity(ringperf::internals::sys::gettid(), &[cpu])
                .unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    let busy = ringperf()
        .args(["doctor", "--concurrency", "100"])
        .output()
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spin.join().unwrap();
    let text = String::from_utf8_lossy(&busy.stdout).into_owned();
    let me: String = std::fs::read_to_string("/proc/self/comm")
        .unwrap()
        .trim()
        .to_string();
    let line = text.lines().find(|l| l.contains("busy CPUs")).unwrap_or("");
    assert!(
        line.starts_with("WARN") && line.contains(&format!("CPU {cpu} ")) && line.contains(&me),
        "{line:?} should name CPU {cpu} and {me:?}\n{text}"
    );
    // More connections than one address has ports: a blocker, exit 2.
    let out = ringperf()
        .args(["doctor", "--concurrency", "100000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("FAIL  ephemeral ports"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("blocker"));
}
