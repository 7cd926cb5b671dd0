//! GPU figures over exactly the measured window.
//!
//! Energy is the rise of NVML's total-energy counter between the window's start and end,
//! each interpolated between the samples around it. A segment where the counter went down
//! (a wrap, or a driver reload) or is missing is filled with the power integral over that
//! segment, and a GPU without the counter falls back to the power integral throughout; the
//! result says which. A GPU that stopped answering is covered up to its last sample, and the
//! result says so.

use serde::Serialize;

use super::{Sample, Series};

/// Where an energy figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EnergySource {
    /// The total-energy counter (best).
    EnergyCounter,
    /// The counter, with some segments (wrap, reset, gap) filled from the power integral.
    EnergyCounterPatched,
    /// The trapezoid integral of power readings.
    PowerIntegral,
    /// Not enough samples in the window.
    None,
}

impl EnergySource {
    /// As a person reads it.
    pub fn text(self) -> &'static str {
        match self {
            EnergySource::EnergyCounter => "energy counter",
            EnergySource::EnergyCounterPatched => "energy counter, reset patched from power",
            EnergySource::PowerIntegral => "integral of power",
            EnergySource::None => "too few samples",
        }
    }
}

/// Statistics of one reading over the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Stat {
    /// Mean.
    pub avg: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

impl Stat {
    /// Statistics of `values` (None when empty).
    pub fn of(mut values: Vec<f64>) -> Option<Stat> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(|a, b| a.total_cmp(b));
        let at = |p: f64| values[(((values.len() - 1) as f64) * p).round() as usize];
        Some(Stat {
            avg: values.iter().sum::<f64>() / values.len() as f64,
            p50: at(0.50),
            p99: at(0.99),
            max: values[values.len() - 1],
        })
    }
}

/// One GPU over the measured window.
#[derive(Debug, Clone, Serialize)]
pub struct GpuWindow {
    /// GPU index.
    pub index: u32,
    /// GPU name.
    pub name: String,
    /// Energy used in the window (J).
    pub energy_j: Option<f64>,
    /// How `energy_j` was obtained.
    pub energy_source: EnergySource,
    /// Counter segments that went backwards (wrap or reset) and were patched.
    pub counter_resets: u32,
    /// Power (W).
    pub power_w: Option<Stat>,
    /// GPU utilisation (%).
    pub gpu_util: Option<Stat>,
    /// Memory-bandwidth utilisation (%).
    pub mem_util: Option<Stat>,
    /// Memory used (GiB).
    pub mem_used_gib: Option<Stat>,
    /// SM clock (MHz).
    pub sm_clock_mhz: Option<Stat>,
    /// Temperature (°C).
    pub temp_c: Option<Stat>,
    /// Share of samples with any throttle reason set.
    pub throttled_fraction: Option<f64>,
    /// Samples inside the window.
    pub samples: usize,
    /// Seconds of the window the samples cover (less than the window if the GPU dropped out).
    pub covered_s: f64,
    /// Seconds into the window when the GPU stopped answering, and why.
    pub dropped_out: Option<(f64, String)>,
}

/// Linear interpolation of `f` at time `t` between samples `a` and `b`.
fn lerp(a: (u64, f64), b: (u64, f64), t: u64) -> f64 {
    if b.0 == a.0 {
        return a.1;
    }
    a.1 + (b.1 - a.1) * (t as f64 - a.0 as f64) / (b.0 as f64 - a.0 as f64)
}

/// Points `(t, value)` clipped to `[tx, ty]`, with interpolated end points.
fn clip(points: &[(u64, f64)], tx: u64, ty: u64) -> Vec<(u64, f64)> {
    let mut out = Vec::new();
    for w in points.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b.0 <= tx || a.0 >= ty {
            continue;
        }
        let start = if a.0 < tx { (tx, lerp(a, b, tx)) } else { a };
        let end = if b.0 > ty { (ty, lerp(a, b, ty)) } else { b };
        if out.last() != Some(&start) {
            out.push(start);
        }
        out.push(end);
    }
    out
}

/// Trapezoid integral of power (mW) over `[t0, t1]` in joules, from clipped power points.
fn power_integral(power: &[(u64, f64)], t0: u64, t1: u64) -> Option<f64> {
    let pts = clip(power, t0, t1);
    if pts.len() < 2 {
        return None;
    }
    Some(
        pts.windows(2)
            .map(|w| (w[0].1 + w[1].1) / 2.0 / 1e3 * (w[1].0 - w[0].0) as f64 / 1e9)
            .sum(),
    )
}

/// Summarises one GPU's series over `[tx, ty]` (`CLOCK_MONOTONIC` ns).
pub fn summarize(series: &Series, tx: u64, ty: u64) -> GpuWindow {
    let samples: &[Sample] = &series.samples;
    let pick = |f: fn(&Sample) -> Option<f64>| -> Vec<(u64, f64)> {
        samples
            .iter()
            .filter_map(|s| f(s).map(|v| (s.t_ns, v)))
            .collect()
    };
    let power = pick(|s| s.power_mw.map(f64::from));
    let energy = pick(|s| s.energy_mj.map(|e| e as f64));

    let (energy_j, energy_source, counter_resets) = {
        let pts = clip(&energy, tx, ty);
        if pts.len() >= 2 {
            let mut joules = 0.0;
            let mut resets = 0;
            for w in pts.windows(2) {
                let d = w[1].1 - w[0].1;
                if d >= 0.0 {
                    joules += d / 1e3;
                } else {
                    resets += 1;
                    joules += power_integral(&power, w[0].0, w[1].0).unwrap_or(0.0);
                }
            }
            let src = if resets > 0 {
                EnergySource::EnergyCounterPatched
            } else {
                EnergySource::EnergyCounter
            };
            (Some(joules), src, resets)
        } else {
            match power_integral(&power, tx, ty) {
                Some(j) => (Some(j), EnergySource::PowerIntegral, 0),
                None => (None, EnergySource::None, 0),
            }
        }
    };

    let inside: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.t_ns >= tx && s.t_ns <= ty)
        .collect();
    let stat =
        |f: fn(&Sample) -> Option<f64>| Stat::of(inside.iter().filter_map(|s| f(s)).collect());
    let throttled: Vec<bool> = inside
        .iter()
        .filter_map(|s| s.throttle.map(|t| t != 0))
        .collect();
    let covered_end = samples.last().map_or(tx, |s| s.t_ns.min(ty));
    let covered_start = samples.first().map_or(ty, |s| s.t_ns.max(tx));
    GpuWindow {
        index: series.index,
        name: series.name.clone(),
        energy_j,
        energy_source,
        counter_resets,
        power_w: stat(|s| s.power_mw.map(|p| f64::from(p) / 1e3)),
        gpu_util: stat(|s| s.gpu_util.map(f64::from)),
        mem_util: stat(|s| s.mem_util.map(f64::from)),
        mem_used_gib: stat(|s| s.mem_used.map(|b| b as f64 / (1u64 << 30) as f64)),
        sm_clock_mhz: stat(|s| s.sm_clock_mhz.map(f64::from)),
        temp_c: stat(|s| s.temp_c.map(f64::from)),
        throttled_fraction: (!throttled.is_empty())
            .then(|| throttled.iter().filter(|&&t| t).count() as f64 / throttled.len() as f64),
        samples: inside.len(),
        covered_s: covered_end.saturating_sub(covered_start) as f64 / 1e9,
        dropped_out: series
            .dropped_out
            .as_ref()
            .filter(|(t, _)| *t < ty)
            .map(|(t, e)| (t.saturating_sub(tx) as f64 / 1e9, e.clone())),
    }
}

/// All GPUs together, and what their energy means per token.
#[derive(Debug, Clone, Serialize)]
pub struct GpuTotals {
    /// Σ energy over GPUs with an energy figure (J).
    pub energy_j: f64,
    /// Σ average power (W).
    pub avg_power_w: f64,
    /// Energy per output token (J).
    pub joules_per_output_token: Option<f64>,
    /// Output tokens per joule.
    pub output_tokens_per_joule: Option<f64>,
    /// Energy per completed request (J).
    pub joules_per_request: Option<f64>,
    /// EUR per million output tokens, from `--gpu-price-eur-hour`.
    pub eur_per_million_output_tokens: Option<f64>,
}

/// Totals over GPUs and the derived per-token figures. `price_eur_hour` is per GPU.
pub fn totals(
    gpus: &[GpuWindow],
    output_tokens: u64,
    requests: u64,
    output_tps: f64,
    price_eur_hour: Option<f64>,
) -> GpuTotals {
    GpuTotals::of(
        gpus.iter().filter_map(|g| g.energy_j).sum(),
        gpus.iter().filter_map(|g| g.power_w.map(|p| p.avg)).sum(),
        output_tokens,
        requests,
        price_eur_hour
            .filter(|_| output_tps > 0.0)
            .map(|p| p * gpus.len().max(1) as f64 / (output_tps * 3600.0) * 1e6),
    )
}

impl GpuTotals {
    /// Totals of `energy_j` and `avg_power_w` (summed over GPUs), with the per-token and
    /// per-request figures they give.
    pub fn of(
        energy_j: f64,
        avg_power_w: f64,
        output_tokens: u64,
        requests: u64,
        eur_per_million_output_tokens: Option<f64>,
    ) -> GpuTotals {
        let per = |n: u64| (n > 0 && energy_j > 0.0).then(|| energy_j / n as f64);
        GpuTotals {
            energy_j,
            avg_power_w,
            joules_per_output_token: per(output_tokens),
            output_tokens_per_joule: (energy_j > 0.0 && output_tokens > 0)
                .then(|| output_tokens as f64 / energy_j),
            joules_per_request: per(requests),
            eur_per_million_output_tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// A GPU at `watts`, sampled every 100 ms from t = 0 to `until_s`, counter from `start_mj`.
    fn steady(watts: f64, until_s: f64, start_mj: u64) -> Series {
        let n = (until_s * 10.0) as u64;
        Series {
            index: 0,
            name: "test".into(),
            samples: (0..=n)
                .map(|i| {
                    let t = i * S / 10;
                    Sample {
                        t_ns: t,
                        power_mw: Some((watts * 1e3) as u32),
                        energy_mj: Some(start_mj + (watts * t as f64 / 1e6) as u64),
                        gpu_util: Some(90),
                        throttle: Some(if i % 2 == 0 { 0 } else { 4 }),
                        ..Sample::default()
                    }
                })
                .collect(),
            dropped_out: None,
        }
    }

    #[test]
    fn counter_delta_over_an_unaligned_window() {
        // 300 W for a window of 2.35 s that starts and ends between samples.
        let g = summarize(
            &steady(300.0, 5.0, 1_000_000),
            S / 4 + S / 20,
            2 * S + 6 * S / 10,
        );
        assert_eq!(g.energy_source, EnergySource::EnergyCounter);
        assert!(
            (g.energy_j.unwrap() - 300.0 * 2.3).abs() < 0.01,
            "{:?}",
            g.energy_j
        );
        let p = g.power_w.unwrap();
        assert_eq!((p.avg, p.p50, p.p99, p.max), (300.0, 300.0, 300.0, 300.0));
        assert!((g.throttled_fraction.unwrap() - 0.5).abs() < 0.1);
        assert_eq!(g.samples, 24, "0.3 s to 2.6 s inclusive");
    }

    #[test]
    fn wrap_around_is_patched_from_power() {
        let mut s = steady(200.0, 3.0, 0);
        // The counter wraps at 300 J: later readings restart from zero.
        for x in &mut s.samples {
            x.energy_mj = x.energy_mj.map(|e| e % 300_000);
        }
        let g = summarize(&s, 0, 3 * S);
        assert_eq!(g.energy_source, EnergySource::EnergyCounterPatched);
        assert_eq!(g.counter_resets, 2, "wraps at 1.5 s and 3.0 s");
        assert!(
            (g.energy_j.unwrap() - 600.0).abs() < 0.5,
            "{:?}",
            g.energy_j
        );
    }

    #[test]
    fn missing_samples_are_bridged() {
        let mut s = steady(250.0, 4.0, 0);
        // Lose a second of samples in the middle.
        s.samples.retain(|x| !(S..2 * S).contains(&x.t_ns));
        let g = summarize(&s, S / 2, 3 * S + S / 2);
        assert!(
            (g.energy_j.unwrap() - 750.0).abs() < 0.5,
            "{:?}",
            g.energy_j
        );
    }

    #[test]
    fn gpu_that_disappears_is_covered_to_its_last_sample() {
        let mut s = steady(100.0, 2.0, 0);
        s.dropped_out = Some((2 * S + S / 20, "GPU is lost".into()));
        let g = summarize(&s, 0, 4 * S);
        assert!((g.energy_j.unwrap() - 200.0).abs() < 0.5);
        assert!((g.covered_s - 2.0).abs() < 1e-9);
        assert_eq!(g.dropped_out.as_ref().unwrap().1, "GPU is lost");
    }

    #[test]
    fn power_integral_fallback_without_counter() {
        let mut s = steady(400.0, 2.0, 0);
        for x in &mut s.samples {
            x.energy_mj = None;
        }
        let g = summarize(&s, S / 10, S + S / 10);
        assert_eq!(g.energy_source, EnergySource::PowerIntegral);
        assert!((g.energy_j.unwrap() - 400.0).abs() < 0.01);
        // And with nothing in the window at all:
        let g = summarize(&s, 10 * S, 11 * S);
        assert_eq!((g.energy_j, g.energy_source), (None, EnergySource::None));
    }

    #[test]
    fn derived_per_token_figures() {
        let g = summarize(&steady(300.0, 10.0, 0), 0, 10 * S);
        let t = totals(&[g], 30_000, 100, 3000.0, Some(3.6));
        assert!((t.energy_j - 3000.0).abs() < 0.01);
        assert!((t.joules_per_output_token.unwrap() - 0.1).abs() < 1e-6);
        assert!((t.output_tokens_per_joule.unwrap() - 10.0).abs() < 1e-6);
        assert!((t.joules_per_request.unwrap() - 30.0).abs() < 1e-6);
        // 3.6 EUR/h at 3000 tokens/s: 3.6 / (3000 × 3600) × 1e6 = 0.333… EUR per million.
        assert!((t.eur_per_million_output_tokens.unwrap() - 1.0 / 3.0).abs() < 1e-9);
    }
}
