//! The one clock every timestamp comes from.
//!
//! ringperf stamps events with `CLOCK_MONOTONIC` read as integer nanoseconds. The built-in
//! simulator stamps what it sends with the same clock, so on one host `seen - sent` is the
//! delay the client (and the loopback path) added. Integer nanoseconds never pass through a
//! float, so no stamp is rounded (a failure mode of Python peers).

pub use crate::sys::thread_cpu_ns;

/// Nanoseconds on `CLOCK_MONOTONIC`.
#[inline]
pub fn now_ns() -> u64 {
    crate::sys::monotonic_ns()
}

static PROCESS_START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// Marks now as the process's start (the binary's first line); later marks change nothing.
pub fn mark_process_start() {
    PROCESS_START.get_or_init(now_ns);
}

/// When [`mark_process_start`] was first called, if it was.
pub fn process_start_ns() -> Option<u64> {
    PROCESS_START.get().copied()
}

/// Wall-clock time as seconds since the Unix epoch, for artifacts only (never for intervals).
pub fn unix_time_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
