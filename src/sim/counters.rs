//! What the simulator counts: requests, events, tokens, its running and waiting gauges, and
//! the requests in flight integrated over time; and its `/metrics` page in vLLM's names.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::now_ns;
use crate::record::{InFlightSample, LATE_NS};

#[derive(Default)]
pub(super) struct Counters {
    pub(super) requests: AtomicU64,
    /// `--stop-after` was reached: the simulator stops listening, as a server that died.
    pub(super) dead: std::sync::atomic::AtomicBool,
    pub(super) events: AtomicU64,
    pub(super) tokens: AtomicU64,
    pub(super) finished: AtomicU64,
    pub(super) running: AtomicU64,
    pub(super) waiting: AtomicU64,
    /// Connections the kernel had ready that could not be accepted (out of descriptors).
    pub(super) accept_failures: AtomicU64,
    /// `POST /reset_prefix_cache` calls (vLLM's endpoint; they empty the prefix cache).
    pub(super) prefix_cache_resets: AtomicU64,
    /// With `--prefix-cache`: the prompt prefixes seen, by hash (see `reply::Gen::prefixes`),
    /// shared by the shards as one server's cache is.
    pub(super) prefixes: std::sync::Mutex<std::collections::HashSet<u64>>,
    /// Events (and non-streamed bodies) written more than [`LATE_NS`] after they were due.
    pub(super) late_events: AtomicU64,
    /// The most an event was late since the probe last read it (ns).
    pub(super) worst_late_ns: AtomicU64,
    pub(super) in_flight: std::sync::Mutex<InFlight>,
    /// Each request's phases, as vLLM's histograms.
    pub(super) phases: super::trace::PhaseHists,
}

/// Requests received and not yet answered, and their integral over time, so a run can show
/// the load the server really saw.
#[derive(Default)]
pub(super) struct InFlight {
    now: u64,
    since_ns: u64,
    integral: u128,
}

impl InFlight {
    fn advance(&mut self, t: u64) {
        let t = t.max(self.since_ns);
        self.integral += u128::from(self.now) * u128::from(t - self.since_ns);
        self.since_ns = t;
    }
}

/// Counts one request in flight for as long as it lives.
pub(super) struct Busy<'a>(&'a std::sync::Mutex<InFlight>);

impl<'a> Busy<'a> {
    /// A request in flight since `arrived_ns`, when its bytes reached the kernel (as a
    /// reference server stamps arrivals): the time it waited for the simulator to read it is
    /// the simulator's lateness, not the client's, and counts in the integral.
    pub(super) fn enter(m: &'a std::sync::Mutex<InFlight>, arrived_ns: u64) -> Busy<'a> {
        let mut f = m.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_ns();
        f.advance(now);
        f.now += 1;
        f.integral += u128::from(now.saturating_sub(arrived_ns));
        Busy(m)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        let mut f = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f.advance(now_ns());
        f.now -= 1;
    }
}

impl Counters {
    pub(super) fn in_flight(&self) -> (u64, InFlightSample) {
        let mut f = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        let t = now_ns();
        f.advance(t);
        (
            f.now,
            InFlightSample {
                t_ns: t,
                integral: f.integral,
                late_events: self.late_events.load(Ordering::Relaxed),
                worst_late_ns: self.worst_late_ns.swap(0, Ordering::Relaxed),
            },
        )
    }

    /// Notes that something due at `due_ns` is written now: the simulator's own lateness,
    /// which a host that starves it makes large (then it serves slower than it was told).
    pub(super) fn written(&self, due_ns: u64) {
        let late = now_ns().saturating_sub(due_ns);
        if late > LATE_NS {
            self.late_events.fetch_add(1, Ordering::Relaxed);
        }
        self.worst_late_ns.fetch_max(late, Ordering::Relaxed);
    }
}

/// Adds one to a gauge for as long as it lives.
pub(super) struct Gauge<'a>(&'a AtomicU64);

impl<'a> Gauge<'a> {
    pub(super) fn up(g: &'a AtomicU64) -> Gauge<'a> {
        g.fetch_add(1, Ordering::Relaxed);
        Gauge(g)
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The simulator's `/metrics`, in vLLM's names, so `--server-metrics-url auto` has
/// something real to read.
pub(super) fn metrics_page(model: &str, c: &Counters) -> String {
    let m = model
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    let g = |v: &AtomicU64| v.load(Ordering::Relaxed);
    let (in_flight, integral) = c.in_flight();
    let mut page = format!(
        "# HELP vllm:num_requests_running Requests generating now.\n# TYPE vllm:num_requests_running gauge\n\
         vllm:num_requests_running{{model_name=\"{m}\"}} {}\n\
         # HELP vllm:num_requests_waiting Requests queued for a batch place.\n# TYPE vllm:num_requests_waiting gauge\n\
         vllm:num_requests_waiting{{model_name=\"{m}\"}} {}\n\
         # HELP vllm:generation_tokens_total Tokens generated.\n# TYPE vllm:generation_tokens_total counter\n\
         vllm:generation_tokens_total{{model_name=\"{m}\"}} {}\n\
         # HELP vllm:request_success_total Requests finished.\n# TYPE vllm:request_success_total counter\n\
         vllm:request_success_total{{model_name=\"{m}\"}} {}\n\
         # HELP ringperf_sim_requests_in_flight Requests received and not yet answered.\n# TYPE ringperf_sim_requests_in_flight gauge\n\
         ringperf_sim_requests_in_flight {in_flight}\n\
         # HELP ringperf_sim_in_flight_seconds_total Requests in flight integrated over time; its rise over a window divided by the window is the mean in flight.\n# TYPE ringperf_sim_in_flight_seconds_total counter\n\
         ringperf_sim_in_flight_seconds_total {:.6}\n\
         # HELP ringperf_sim_accept_failures_total Connections that could not be accepted.\n# TYPE ringperf_sim_accept_failures_total counter\n\
         ringperf_sim_accept_failures_total {}\n",
        g(&c.running),
        g(&c.waiting),
        g(&c.tokens),
        g(&c.finished),
        integral.integral as f64 / 1e9,
        g(&c.accept_failures)
    );
    c.phases.render(&m, &mut page);
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_counts_from_its_arrival_until_it_is_answered() {
        let m = std::sync::Mutex::new(InFlight::default());
        let read = |m: &std::sync::Mutex<InFlight>| {
            let mut f = m.lock().unwrap();
            f.advance(now_ns());
            (f.now, f.integral)
        };
        let t0 = now_ns();
        let late = Busy::enter(&m, t0 - 2_000_000_000);
        let fresh = Busy::enter(&m, now_ns());
        assert_eq!(read(&m).0, 2);
        drop((late, fresh));
        let (now, integral) = read(&m);
        assert_eq!(now, 0);
        let spent = u128::from(now_ns() - t0);
        // 2 s before it was read, then both for as long as this test ran.
        assert!(integral >= 2_000_000_000, "{integral}");
        assert!(integral <= 2_000_000_000 + 2 * spent, "{integral} {spent}");
    }
}
