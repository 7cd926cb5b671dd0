//! The one clock every timestamp comes from.
//!
//! ringperf stamps events with `CLOCK_MONOTONIC` read as integer nanoseconds. The built-in
//! simulator stamps what it sends with the same clock, so on one host `seen - sent` is the
//! delay the client (and the loopback path) added. Integer nanoseconds never pass through a
//! float, so no stamp is rounded (a failure mode of Python peers, see REFERENCE §7).

/// Nanoseconds on `CLOCK_MONOTONIC` (the vDSO makes this a few tens of nanoseconds).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds of CPU time the calling thread has used (user + system).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: as above; CLOCK_THREAD_CPUTIME_ID is per-thread and always present on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall-clock time as seconds since the Unix epoch, for artifacts only (never for intervals).
pub fn unix_time_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_nanosecond_grained() {
        let a = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = now_ns();
        assert!(
            b - a >= 2_000_000,
            "slept 2 ms but clock moved {} ns",
            b - a
        );
        assert!(b - a < 1_000_000_000);
    }

    #[test]
    fn thread_cpu_time_grows_with_work() {
        let a = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_ns() > a);
    }
}
