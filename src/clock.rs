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

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for Unix seconds.
pub fn iso8601(unix: f64) -> String {
    let secs = unix.floor() as i64;
    let ms = ((unix - secs as f64) * 1000.0) as i64;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

/// Wall-clock time as seconds since the Unix epoch, for artifacts only (never for intervals).
pub fn unix_time_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The wall clock and the monotonic clock read together at a run's start: a monotonic stamp
/// `t` of this run happened at wall-clock `realtime_ns + (t − monotonic_ns)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Anchor {
    /// Unix ns.
    pub realtime_ns: u64,
    /// `CLOCK_MONOTONIC` ns.
    pub monotonic_ns: u64,
}

impl Anchor {
    /// Both clocks, now (the monotonic one read between two wall-clock reads, which are
    /// averaged).
    pub fn now() -> Anchor {
        let wall = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        };
        let a = wall();
        let monotonic_ns = now_ns();
        let b = wall();
        Anchor {
            realtime_ns: a / 2 + b / 2,
            monotonic_ns,
        }
    }

    /// The wall-clock time (Unix ns) of monotonic stamp `t`.
    pub fn wall(&self, t: u64) -> u64 {
        (self.realtime_ns as i128 + t as i128 - self.monotonic_ns as i128).max(0) as u64
    }
}

/// The server's `Date` header against this host's clock, read once before the run: evidence of
/// how far the node's clock is off (to the header's one-second resolution).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServerDate {
    /// The header as sent.
    pub date: String,
    /// The header's time minus this host's when the response came (s; ±1 s from rounding).
    pub server_minus_local_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_anchor_places_monotonic_stamps_on_the_wall_clock() {
        let a = Anchor {
            realtime_ns: 1_000_000,
            monotonic_ns: 100,
        };
        assert_eq!(
            (a.wall(150), a.wall(50), a.wall(0)),
            (1_000_050, 999_950, 999_900)
        );
        let now = Anchor::now();
        let later = now.wall(now_ns()) as f64 / 1e9;
        assert!((later - unix_time_secs()).abs() < 0.05, "{later}");
    }
    #[test]
    fn iso_dates() {
        assert_eq!(iso8601(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_795_994_442.25), "2026-11-29T23:20:42.250Z");
        assert_eq!(iso8601(951_782_400.0), "2000-02-29T00:00:00.000Z");
    }
}
