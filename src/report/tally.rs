//! The mergeable part of a run: its distributions, counters and spans. A single run and a
//! sweep point fold their records into one [`Tally`]; `merge` reads one back from each node's
//! files and adds them up. Either way, [`Tally::into_report`] is the one place a [`Report`] is
//! built, and every figure derived from the counters (the window, the rates, goodput, the
//! error-adjusted percentiles) is derived there.

use serde::{Deserialize, Serialize};

use super::node::Span;
use super::{ErrorCount, Goodput, Health, Metrics, Report, SharedReads};
use crate::record::Record;
use crate::stats::Dist;
use crate::warning::Warning;

/// A run's counters: what adds up across shards and nodes. A node writes them to its
/// `node.json` (on the wall clock).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Counts {
    /// Measured requests that succeeded.
    pub completed: u64,
    /// Measured requests that failed.
    pub failed: u64,
    /// Measured requests the client closed on purpose.
    #[serde(default)]
    pub request_cancelled: u64,
    /// Warm-up requests.
    pub warmup: u64,
    /// Ramp-up requests.
    pub ramp_up: u64,
    /// Σ output tokens of completed requests.
    pub output_tokens: u64,
    /// Σ input tokens of completed requests.
    pub input_tokens: u64,
    /// Σ images in the answers of completed requests (image generation).
    #[serde(default)]
    pub images: u64,
    /// Completed requests whose output length the server reported.
    pub osl_from_usage: u64,
    /// Completed requests whose output was re-tokenized.
    pub osl_from_tokenizer: u64,
    /// Failures by kind.
    pub errors: Vec<ErrorCount>,
    /// Open loop: the rate asked for (the whole load's).
    pub requested_rate: Option<f64>,
    /// Measured requests sent: how many, first and last actual send.
    pub sent: Span,
    /// Their intended send times (open loop).
    pub intended: Span,
    /// Goodput counts, with objectives.
    pub goodput: Option<Goodput>,
    /// Stopped early.
    pub cancelled: bool,
}

impl Counts {
    /// The counters of `r`, a run's report, with its times placed by `clock` (its sends and
    /// intended sends from its records).
    pub fn of(r: &Report, clock: impl Fn(u64) -> u64) -> Counts {
        let measured = || r.records.iter().filter(|x| x.is_measured_sent());
        Counts {
            completed: r.completed,
            failed: r.failed,
            request_cancelled: r.request_cancelled,
            warmup: r.warmup,
            ramp_up: r.ramp_up,
            output_tokens: r.output_tokens,
            input_tokens: r.input_tokens,
            images: r.images,
            osl_from_usage: r.osl_from_usage,
            osl_from_tokenizer: r.osl_from_tokenizer,
            errors: r.errors.clone(),
            requested_rate: r.requested_rate,
            sent: Span::of(measured().map(|x| clock(x.start_ns))),
            intended: Span::of(measured().filter_map(|x| x.intended_ns.map(&clock))),
            goodput: r.goodput.clone(),
            cancelled: r.cancelled,
        }
    }

    /// Adds `o`'s counters to these.
    fn add(&mut self, o: Counts) {
        self.completed += o.completed;
        self.failed += o.failed;
        self.request_cancelled += o.request_cancelled;
        self.warmup += o.warmup;
        self.ramp_up += o.ramp_up;
        self.output_tokens += o.output_tokens;
        self.input_tokens += o.input_tokens;
        self.images += o.images;
        self.osl_from_usage += o.osl_from_usage;
        self.osl_from_tokenizer += o.osl_from_tokenizer;
        for e in o.errors {
            match self
                .errors
                .iter_mut()
                .find(|x| (x.code, &x.kind) == (e.code, &e.kind))
            {
                Some(x) => x.count += e.count,
                None => self.errors.push(e),
            }
        }
        self.errors
            .sort_by(|a, b| (a.code, &a.kind).cmp(&(b.code, &b.kind)));
        self.requested_rate = self.requested_rate.or(o.requested_rate);
        self.sent = self.sent.join(o.sent);
        self.intended = self.intended.join(o.intended);
        self.goodput = match (self.goodput.take(), o.goodput) {
            (Some(a), Some(b)) => Some(Goodput {
                good_requests: a.good_requests + b.good_requests,
                measured: a.measured + b.measured,
                met: a.met.iter().zip(&b.met).map(|(x, y)| x + y).collect(),
                ..a
            }),
            (a, b) => a.or(b),
        };
        self.cancelled |= o.cancelled;
    }
}

/// A run's distributions and counters, before any figure is derived from them.
#[derive(Default)]
pub struct Tally {
    /// Distributions over measured, successful requests.
    pub metrics: Metrics,
    /// Client-added delay of simulator-stamped events (ns).
    pub client_delay: Dist,
    /// Time from each read's arrival to its events being recorded (ns).
    pub record_lag: Dist,
    /// Content events that shared a read's stamp with a later one.
    pub shared: SharedReads,
    /// With `--prefill-concurrency`: each measured request's wait for a place (ns).
    pub prefill_wait: Dist,
    /// The HTTP phases of the completed measured requests, in [`crate::record::HTTP_PHASES`]'
    /// order (ns).
    pub http_trace: Vec<(&'static str, Dist)>,
    /// First measured request's start and the end of the last measured request, whatever
    /// its outcome, on the tally's clock (the run's monotonic clock; the wall clock in a
    /// merge). Both 0 when nothing was sent.
    pub tx_ns: u64,
    /// See `tx_ns`.
    pub ty_ns: u64,
    /// The counters.
    pub counts: Counts,
}

/// What a report holds beyond its tally: what only a run on this host knows (every record,
/// its shards' health), or what a merge says of its nodes.
pub struct Beside {
    /// Did the client keep up.
    pub health: Health,
    /// What the server did, from the records (none in a merge: then it is judged from the
    /// counts alone).
    pub server: Option<super::server::ServerHealth>,
    /// Warnings to print and export.
    pub warnings: Vec<Warning>,
    /// Every request, for `profile_export.jsonl` (none in a merge).
    pub records: Vec<Record>,
    /// The I/O driver that ran.
    pub driver: String,
    /// See [`Report::served_model`].
    pub served_model: Option<String>,
    /// See [`Report::prompt_cache`].
    pub prompt_cache: Option<(u64, u64)>,
    /// See [`Report::ttft_by_turn`].
    pub ttft_by_turn: Vec<(u32, Dist)>,
    /// See [`Report::servers`].
    pub servers: Vec<super::ServerFigures>,
    /// See [`Report::slice_ns`].
    pub slice_ns: Option<u64>,
    /// See [`Report::show_trace_timing`].
    pub show_trace_timing: bool,
    /// See [`Report::warmup_failed`].
    pub warmup_failed: u64,
    /// See [`Report::warmup_ns`].
    pub warmup_ns: u64,
}

impl Beside {
    /// Nothing beside the tally but a verdict and warnings (a merge).
    pub fn only(health: Health, warnings: Vec<Warning>) -> Beside {
        Beside {
            health,
            server: None,
            warnings,
            records: Vec::new(),
            driver: String::new(),
            served_model: None,
            prompt_cache: None,
            ttft_by_turn: Vec::new(),
            servers: Vec::new(),
            slice_ns: None,
            show_trace_timing: false,
            warmup_failed: 0,
            warmup_ns: 0,
        }
    }
}

impl Tally {
    /// Adds `o` to this tally: distributions merge exactly, counters add up, the measured
    /// window becomes the union of both (a tally that sent nothing has none).
    pub fn merge(&mut self, mut o: Tally) {
        for (tag, d) in o.metrics.tagged_mut() {
            if let Some(mine) = self.metrics.by_tag(tag) {
                mine.merge(d);
            }
        }
        self.client_delay.merge(&o.client_delay);
        self.record_lag.merge(&o.record_lag);
        self.shared.events += o.shared.events;
        self.shared.of_events += o.shared.of_events;
        self.shared.first_tokens += o.shared.first_tokens;
        self.shared.wait.merge(&o.shared.wait);
        self.prefill_wait.merge(&o.prefill_wait);
        for (name, d) in o.http_trace {
            match self.http_trace.iter_mut().find(|(n, _)| *n == name) {
                Some((_, mine)) => mine.merge(&d),
                None => self.http_trace.push((name, d)),
            }
        }
        self.http_trace
            .sort_by_key(|(n, _)| crate::record::HTTP_PHASES.iter().position(|p| p == n));
        if o.ty_ns > 0 {
            (self.tx_ns, self.ty_ns) = if self.ty_ns > 0 {
                (self.tx_ns.min(o.tx_ns), self.ty_ns.max(o.ty_ns))
            } else {
                (o.tx_ns, o.ty_ns)
            };
        }
        self.counts.add(o.counts);
    }

    /// The report: the tally's figures (the window, the rates, goodput over the window, the
    /// error-adjusted percentiles) with what lies `beside` it.
    pub fn into_report(mut self, beside: Beside) -> Report {
        self.metrics.seal();
        let window_ns = self.ty_ns.saturating_sub(self.tx_ns);
        let c = self.counts;
        let error_adjusted = super::error_adjusted_all(&self.metrics, c.failed);
        let server = beside.server.unwrap_or_else(|| {
            super::server::assess(&[], &c.errors, c.completed, self.tx_ns, self.ty_ns)
        });
        let mut warnings = beside.warnings;
        if server.failed > 0 {
            // First among the warnings: past saturation it is what a reader needs first.
            warnings.insert(
                0,
                Warning::new(crate::warning::Code::RequestsFailed, server.line.clone()),
            );
        }
        let label = super::verdict::Label::of(&beside.health, &server);
        Report {
            client_delay: self.client_delay,
            record_lag: self.record_lag,
            shared: self.shared,
            window_ns,
            tx_ns: self.tx_ns,
            ty_ns: self.ty_ns,
            completed: c.completed,
            failed: c.failed,
            request_cancelled: c.request_cancelled,
            prefill_wait: self.prefill_wait,
            ttft_by_turn: beside.ttft_by_turn,
            http_trace: self.http_trace,
            show_trace_timing: beside.show_trace_timing,
            servers: beside.servers,
            slice_ns: beside.slice_ns,
            warmup: c.warmup,
            warmup_failed: beside.warmup_failed,
            warmup_ns: beside.warmup_ns,
            output_tokens: c.output_tokens,
            input_tokens: c.input_tokens,
            images: c.images,
            osl_from_usage: c.osl_from_usage,
            osl_from_tokenizer: c.osl_from_tokenizer,
            errors: c.errors,
            health: beside.health,
            server,
            label,
            about: None,
            threshold_crossed: None,
            driver: beside.driver,
            warnings,
            cancelled: c.cancelled,
            records: beside.records,
            telemetry: None,
            requested_rate: c.requested_rate,
            achieved_rate: c.sent.rate(),
            scheduled_rate: c.intended.rate(),
            ramp_up: c.ramp_up,
            goodput: c
                .goodput
                .map(|g| Goodput::of(&g.slos, g.good_requests, g.measured, g.met, window_ns)),
            error_adjusted,
            node: None,
            served_model: beside.served_model,
            prompt_cache: beside.prompt_cache,
            server_traces: None,
            metrics: self.metrics,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Slo, SloMetric};

    fn span(count: u64, first: u64, last: u64) -> Span {
        Span { count, first, last }
    }

    #[test]
    fn spans_join_and_give_the_rate_of_their_times() {
        let j = span(11, 0, 1_000_000_000).join(span(10, 500_000_000, 2_000_000_000));
        assert_eq!((j.count, j.first, j.last), (21, 0, 2_000_000_000));
        assert_eq!(j.rate(), 10.0);
        assert_eq!(Span::default().rate(), 0.0);
        // An empty span (all zero) adds nothing, on either side.
        let a = span(3, 5_000, 9_000);
        assert_eq!(Span::default().join(a), a);
        assert_eq!(a.join(Span::default()), a);
    }

    fn error(code: u16, kind: &str, count: u64) -> ErrorCount {
        ErrorCount {
            code,
            kind: kind.into(),
            message: format!("{kind} {count}"),
            count,
        }
    }

    /// A tally of `ttfts` (ns) completed between `tx` and `ty`, `failed` of them failed.
    fn tally(ttfts: &[u64], tx: u64, ty: u64, failed: u64, errors: Vec<ErrorCount>) -> Tally {
        let mut t = Tally {
            tx_ns: tx,
            ty_ns: ty,
            ..Tally::default()
        };
        for v in ttfts {
            t.metrics.ttft.record(*v);
        }
        t.counts = Counts {
            completed: ttfts.len() as u64,
            failed,
            output_tokens: 10 * ttfts.len() as u64,
            errors,
            sent: span(ttfts.len() as u64 + failed, tx, ty),
            goodput: Some(Goodput::of(
                &[Slo {
                    metric: SloMetric::Ttft,
                    max_ms: 1.0,
                }],
                ttfts.iter().filter(|v| **v <= 1_000_000).count() as u64,
                ttfts.len() as u64 + failed,
                vec![ttfts.iter().filter(|v| **v <= 1_000_000).count() as u64],
                ty - tx,
            )),
            ..Counts::default()
        };
        t
    }

    fn quiet() -> Health {
        Health::merged("ok".into(), None, false)
    }

    #[test]
    fn merged_tallies_report_as_one_tally_of_everything() {
        let s = 1_000_000_000;
        let mut a = tally(
            &[500_000, 2_000_000],
            10 * s,
            12 * s,
            1,
            vec![error(500, "http", 1)],
        );
        a.merge(tally(
            &[900_000, 700_000, 3_000_000],
            11 * s,
            14 * s,
            2,
            vec![error(429, "http", 1), error(500, "http", 1)],
        ));
        // A node that sent nothing has no window and must not widen it.
        a.merge(tally(&[], 0, 0, 0, Vec::new()));
        let r = a.into_report(Beside::only(quiet(), Vec::new()));
        let all = tally(
            &[500_000, 2_000_000, 900_000, 700_000, 3_000_000],
            10 * s,
            14 * s,
            3,
            vec![error(429, "http", 1), error(500, "http", 2)],
        )
        .into_report(Beside::only(quiet(), Vec::new()));
        assert_eq!((r.tx_ns, r.ty_ns, r.window_ns), (10 * s, 14 * s, 4 * s));
        assert_eq!((r.completed, r.failed, r.output_tokens), (5, 3, 50));
        assert_eq!(r.metrics.ttft.count(), 5);
        assert_eq!(r.metrics.ttft.percentile(100.0), 3_000_000);
        assert_eq!(r.metrics.ttft.mean(), all.metrics.ttft.mean());
        let kinds: Vec<_> = r.errors.iter().map(|e| (e.code, e.count)).collect();
        assert_eq!(kinds, [(429, 1), (500, 2)]);
        // Derived over the merged window, not either node's.
        assert_eq!(r.request_tps(), 5.0 / 4.0);
        assert_eq!(r.achieved_rate, all.achieved_rate);
        let (g, ga) = (r.goodput.unwrap(), all.goodput.unwrap());
        assert_eq!((g.good_requests, g.measured, g.met), (3, 8, vec![3]));
        assert_eq!(g.goodput, 3.0 / 4.0);
        assert_eq!(g.goodput, ga.goodput);
        // Every failure counts as +∞ in the error-adjusted percentiles of the merge.
        let (adj, adj_all) = (&r.error_adjusted[0], &all.error_adjusted[0]);
        assert_eq!(adj.metric, "time_to_first_token");
        assert_eq!(adj.percentiles, adj_all.percentiles);
        assert_eq!(adj.percentiles.last().unwrap().1, None);
    }

    /// Counts with every counter set, each to a value of its own (`base` apart).
    fn every_counter(base: u64) -> Counts {
        Counts {
            completed: base + 1,
            failed: base + 2,
            request_cancelled: base + 3,
            warmup: base + 4,
            ramp_up: base + 5,
            output_tokens: base + 6,
            input_tokens: base + 7,
            images: base + 8,
            osl_from_usage: base + 9,
            osl_from_tokenizer: base + 10,
            errors: vec![error(500, "http", base + 11)],
            requested_rate: None,
            sent: span(base + 12, base + 100, base + 200),
            intended: span(base + 13, base + 90, base + 210),
            goodput: None,
            cancelled: false,
        }
    }

    #[test]
    fn every_counter_adds_up() {
        let mut a = every_counter(0);
        a.requested_rate = Some(4.0);
        let mut b = every_counter(1000);
        b.errors.push(error(0, "connect_failed", 7));
        b.cancelled = true;
        a.add(b);
        let sums = [
            a.completed,
            a.failed,
            a.request_cancelled,
            a.warmup,
            a.ramp_up,
            a.output_tokens,
            a.input_tokens,
            a.images,
            a.osl_from_usage,
            a.osl_from_tokenizer,
        ];
        assert_eq!(
            sums,
            [1002, 1004, 1006, 1008, 1010, 1012, 1014, 1016, 1018, 1020]
        );
        // Errors of one kind add up; kinds stay apart, in order of code.
        let errors: Vec<_> = a.errors.iter().map(|e| (e.code, e.count)).collect();
        assert_eq!(errors, [(0, 7), (500, 1022)]);
        assert_eq!(a.requested_rate, Some(4.0));
        assert_eq!(a.sent, span(1024, 100, 1200));
        assert_eq!(a.intended, span(1026, 90, 1210));
        assert!(a.cancelled);
        // Either side's rate and stop, whichever has one.
        let mut c = every_counter(0);
        let mut d = every_counter(0);
        d.requested_rate = Some(2.5);
        c.add(d);
        assert_eq!((c.requested_rate, c.cancelled), (Some(2.5), false));
    }

    #[test]
    fn counts_read_every_counter_of_a_report_and_its_sends() {
        let s = 1_000_000_000;
        let mut r = tally(&[500_000], s, 3 * s, 0, Vec::new())
            .into_report(Beside::only(quiet(), Vec::new()));
        let want = every_counter(0);
        (r.completed, r.failed, r.request_cancelled) = (1, 2, 3);
        (r.warmup, r.ramp_up, r.output_tokens, r.input_tokens) = (4, 5, 6, 7);
        (r.images, r.osl_from_usage, r.osl_from_tokenizer) = (8, 9, 10);
        r.errors = want.errors.clone();
        r.requested_rate = Some(3.0);
        r.cancelled = true;
        let rec = |id, phase, start_ns, intended| {
            let mut x = Record::new(id, 0, phase, 0, None);
            (x.start_ns, x.intended_ns) = (start_ns, intended);
            x
        };
        use crate::record::Phase;
        r.records = vec![
            rec(0, Phase::Warmup, 10, Some(5)),
            rec(1, Phase::Profiling, 2 * s, Some(2 * s - 7)),
            rec(2, Phase::Profiling, 3 * s, None),
            // Never sent: no start.
            rec(3, Phase::Profiling, 0, Some(4 * s)),
        ];
        // The clock places monotonic times on the wall clock.
        let c = Counts::of(&r, |t| t + 100);
        let got = [
            c.completed,
            c.failed,
            c.request_cancelled,
            c.warmup,
            c.ramp_up,
            c.output_tokens,
            c.input_tokens,
            c.images,
            c.osl_from_usage,
            c.osl_from_tokenizer,
        ];
        assert_eq!(got, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(c.errors.len(), 1);
        assert_eq!((c.requested_rate, c.cancelled), (Some(3.0), true));
        assert_eq!(c.sent, span(2, 2 * s + 100, 3 * s + 100));
        assert_eq!(c.intended, span(1, 2 * s + 93, 2 * s + 93));
        assert!(c.goodput.is_some());
    }

    #[test]
    fn a_merge_keeps_every_distribution_and_shared_read() {
        let s = 1_000_000_000;
        let with = |v: u64| {
            let mut t = tally(&[v], s, 2 * s, 0, Vec::new());
            t.client_delay.record(v);
            t.record_lag.record(v);
            t.prefill_wait.record(v);
            t.shared.wait.record(v);
            (t.shared.events, t.shared.of_events, t.shared.first_tokens) = (1, 3, 5);
            let mut d = Dist::default();
            d.record(v);
            t.http_trace = vec![(crate::record::HTTP_PHASES[1], d)];
            t
        };
        let mut a = with(1_000);
        a.merge(with(3_000));
        for d in [
            &a.client_delay,
            &a.record_lag,
            &a.prefill_wait,
            &a.shared.wait,
        ] {
            assert_eq!((d.count(), d.percentile(100.0)), (2, 3_000));
        }
        assert_eq!(
            (a.shared.events, a.shared.of_events, a.shared.first_tokens),
            (2, 6, 10)
        );
        assert_eq!(a.http_trace.len(), 1);
        assert_eq!(a.http_trace[0].1.count(), 2);
        // A phase only the other side had joins, in the phases' order.
        let mut b = with(2_000);
        let mut d = Dist::default();
        d.record(5);
        b.http_trace.insert(0, (crate::record::HTTP_PHASES[0], d));
        a.merge(b);
        let names: Vec<_> = a.http_trace.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, &crate::record::HTTP_PHASES[..2]);
        assert_eq!(a.http_trace[1].1.count(), 3);
    }

    #[test]
    fn a_tally_that_sent_nothing_takes_the_window_of_what_it_merges() {
        let s = 1_000_000_000;
        let mut empty = tally(&[], 0, 0, 0, Vec::new());
        empty.merge(tally(&[500_000], 10 * s, 12 * s, 0, Vec::new()));
        assert_eq!((empty.tx_ns, empty.ty_ns), (10 * s, 12 * s));
    }

    #[test]
    fn failed_requests_lead_the_warnings_and_only_then() {
        let s = 1_000_000_000;
        let failing = tally(&[500_000], s, 2 * s, 1, vec![error(500, "http", 1)])
            .into_report(Beside::only(quiet(), Vec::new()));
        assert_eq!(
            failing.warnings.first().map(|w| w.code),
            Some(crate::warning::Code::RequestsFailed)
        );
        let fine = tally(&[500_000], s, 2 * s, 0, Vec::new())
            .into_report(Beside::only(quiet(), Vec::new()));
        assert!(fine.warnings.is_empty(), "{:?}", fine.warnings);
    }

    #[test]
    fn a_node_whose_every_request_failed_still_widens_the_window() {
        let s = 1_000_000_000;
        let mut a = tally(&[500_000], 10 * s, 12 * s, 0, Vec::new());
        a.merge(tally(
            &[],
            11 * s,
            16 * s,
            4,
            vec![error(0, "connect_failed", 4)],
        ));
        let r = a.into_report(Beside::only(quiet(), Vec::new()));
        assert_eq!((r.tx_ns, r.window_ns), (10 * s, 6 * s));
        assert_eq!((r.completed, r.failed), (1, 4));
        assert_eq!(r.request_tps(), 1.0 / 6.0);
    }
}
