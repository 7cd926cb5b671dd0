//! Per-request metrics folded into distributions (GenAI-Perf and AIPerf definitions), per shard
//! then merged.

use crate::record::Record;
use crate::stats::Dist;

/// Per-user throughput is kept in milli-tokens per second so it fits an integer histogram.
pub(super) const PER_USER_SCALE: f64 = 1000.0;

/// The distributions of one shard (or, merged, of the run).
#[derive(Debug, Clone, Default)]
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

impl Metrics {
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
            self.itl.record(itl.round() as u64);
            if itl > 0.0 {
                self.per_user
                    .record((1e9 / itl * PER_USER_SCALE).round() as u64);
            }
        }
        for g in &r.chunk_gaps_ns {
            self.icl.record(*g);
        }
        self.latency.record(r.latency());
        if let Some(o) = r.osl {
            self.osl.record(o);
        }
        self.isl.record(u64::from(r.isl));
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

    /// Adds every value of `other`.
    pub fn merge(&mut self, o: &Metrics) {
        self.ttft.merge(&o.ttft);
        self.ttfo.merge(&o.ttfo);
        self.ttst.merge(&o.ttst);
        self.itl.merge(&o.itl);
        self.icl.merge(&o.icl);
        self.latency.merge(&o.latency);
        self.osl.merge(&o.osl);
        self.isl.merge(&o.isl);
        self.per_user.merge(&o.per_user);
        self.sched_ttft.merge(&o.sched_ttft);
        self.sched_latency.merge(&o.sched_latency);
        self.dispatch_delay.merge(&o.dispatch_delay);
    }
}
