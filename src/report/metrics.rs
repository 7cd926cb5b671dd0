//! Per-request metrics folded into distributions (GenAI-Perf and AIPerf definitions).

use crate::record::Record;
use crate::stats::Dist;

/// Per-user throughput is kept in milli-tokens per second so it fits an integer histogram.
pub(super) const PER_USER_SCALE: f64 = 1000.0;

/// The distributions of the run's measured requests, built from their records after the run:
/// every value is kept, so percentiles are exact once [sealed](Metrics::seal).
#[derive(Debug, Clone)]
pub struct Metrics {
    /// Time to first token (ns).
    pub ttft: Dist,
    /// Time to first non-reasoning token (ns).
    pub ttfo: Dist,
    /// Time to second token (ns).
    pub ttst: Dist,
    /// Inter-token latency per request (ns).
    pub itl: Dist,
    /// Inter-chunk latency, every gap of every request (ns).
    pub icl: Dist,
    /// Request latency (ns).
    pub latency: Dist,
    /// Output tokens.
    pub osl: Dist,
    /// Input tokens.
    pub isl: Dist,
    /// Output token throughput per user (milli-tokens/s).
    pub per_user: Dist,
    /// Open loop: TTFT from the intended send time (ns).
    pub sched_ttft: Dist,
    /// Open loop: request latency from the intended send time (ns).
    pub sched_latency: Dist,
    /// Open loop: actual − intended send time (ns).
    pub dispatch_delay: Dist,
}

impl Default for Metrics {
    fn default() -> Self {
        let d = Dist::keeping_values;
        Metrics {
            ttft: d(),
            ttfo: d(),
            ttst: d(),
            itl: d(),
            icl: d(),
            latency: d(),
            osl: d(),
            isl: d(),
            per_user: d(),
            sched_ttft: d(),
            sched_latency: d(),
            dispatch_delay: d(),
        }
    }
}

impl Metrics {
    /// Every distribution with its export tag.
    pub(super) fn tagged_mut(&mut self) -> [(&'static str, &mut Dist); 12] {
        [
            ("time_to_first_token", &mut self.ttft),
            ("time_to_first_output_token", &mut self.ttfo),
            ("time_to_second_token", &mut self.ttst),
            ("inter_token_latency", &mut self.itl),
            ("inter_chunk_latency", &mut self.icl),
            ("request_latency", &mut self.latency),
            ("output_sequence_length", &mut self.osl),
            ("input_sequence_length", &mut self.isl),
            ("output_token_throughput_per_user", &mut self.per_user),
            ("scheduled_time_to_first_token", &mut self.sched_ttft),
            ("scheduled_request_latency", &mut self.sched_latency),
            ("dispatch_delay", &mut self.dispatch_delay),
        ]
    }

    /// Sorts every distribution's values: percentiles are exact from now on.
    pub fn seal(&mut self) {
        for (_, d) in self.tagged_mut() {
            d.seal();
        }
    }

    /// The distribution of a metric by its export tag (`time_to_first_token`, …).
    pub fn by_tag(&mut self, tag: &str) -> Option<&mut Dist> {
        self.tagged_mut()
            .into_iter()
            .find_map(|(t, d)| (t == tag).then_some(d))
    }

    /// Adds one successful measured request.
    pub fn add(&mut self, r: &Record) {
        if let Some(v) = r.ttft() {
            self.ttft.record(v);
        }
        if let Some(v) = r.ttfo() {
            self.ttfo.record(v);
        }
        if let Some(v) = r.ttst() {
            self.ttst.record(v);
        }
        if let Some(itl) = r.itl() {
            self.itl.record_f64(itl);
            if itl > 0.0 {
                self.per_user.record_f64(1e9 / itl * PER_USER_SCALE);
            }
        }
        for g in &r.chunk_gaps_ns {
            self.icl.record(*g);
        }
        if let Some(h) = &r.chunk_gaps_more {
            self.icl.add_histogram(h);
        }
        self.latency.record(r.latency());
        if let Some(o) = r.osl {
            self.osl.record(o);
        }
        if let Some(n) = r.isl {
            self.isl.record(u64::from(n));
        }
        if let Some(v) = r.scheduled_ttft() {
            self.sched_ttft.record(v);
        }
        if let Some(v) = r.scheduled_latency() {
            self.sched_latency.record(v);
        }
        if let Some(v) = r.dispatch_delay() {
            self.dispatch_delay.record(v);
        }
    }
}
