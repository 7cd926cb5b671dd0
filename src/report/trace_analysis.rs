//! `ringperf analyze-trace`: what a mooncake trace offers a prefix cache, before it is
//! replayed (AIPerf's `analyze-trace`, with its definitions and its JSON's names).
//!
//! A trace line's `hash_ids` name its prompt's blocks of `--block-size` tokens: the same id
//! at the same place is the same text. From them:
//! - **unique prefixes**: the distinct leading runs of ids (`[a]`, `[a, b]`, …) over all
//!   lines, the nodes of the trace's prefix tree; the **prefix reuse ratio** is the share of
//!   all leading runs that more than one line has;
//! - a line's **context length**: its blocks whose (place, id) another line has too, in
//!   tokens (all of its input when every block is shared); its **unique prompt length** is the
//!   rest of its input;
//! - a line's **theoretical hit rate**: with a cache that never evicts, replayed in the
//!   trace's order, the share of its blocks before the first one no earlier line had (a
//!   prefix cache reuses only a leading run). Lines without `hash_ids` have no hit rate.
//!
//! Each is summarised by its mean, population standard deviation, minimum, quartiles
//! (interpolated linearly, numpy's default) and maximum.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde::Serialize;

use crate::workload::files::TraceLine;

/// A distribution, in AIPerf's names.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    /// Mean.
    pub mean: f64,
    /// Population standard deviation.
    pub std_dev: f64,
    /// Smallest.
    pub min: f64,
    /// 25th percentile.
    pub p25: f64,
    /// Median.
    pub median: f64,
    /// 75th percentile.
    pub p75: f64,
    /// Largest.
    pub max: f64,
}

impl Stats {
    fn of(values: &[f64]) -> Option<Stats> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        let at = |p| crate::stats::linear_percentile(&v, p);
        Some(Stats {
            mean,
            std_dev: var.sqrt(),
            min: v[0],
            p25: at(25.0),
            median: at(50.0),
            p75: at(75.0),
            max: v[v.len() - 1],
        })
    }
}

/// The analysis, in the layout of AIPerf's JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    /// Lines.
    pub total_requests: usize,
    /// Distinct leading runs of hash ids.
    pub unique_prefixes: usize,
    /// Mean theoretical hit rate (0–1).
    pub cache_hit_rate: f64,
    /// Input length range and mean.
    pub min_isl: u64,
    /// See `min_isl`.
    pub max_isl: u64,
    /// See `min_isl`.
    pub avg_isl: f64,
    /// Output length range and mean.
    pub min_osl: u64,
    /// See `min_osl`.
    pub max_osl: u64,
    /// See `min_osl`.
    pub avg_osl: f64,
    /// Share of leading runs that more than one line has (0–1).
    pub prefix_reuse_ratio: f64,
    /// Input lengths.
    pub isl_stats: Option<Stats>,
    /// Output lengths.
    pub osl_stats: Option<Stats>,
    /// Context lengths.
    pub context_length_stats: Option<Stats>,
    /// Unique prompt lengths.
    pub unique_prompt_length_stats: Option<Stats>,
    /// Theoretical hit rates.
    pub hit_rate_stats: Option<Stats>,
    /// Tokens per hash id.
    pub block_size: u64,
}

/// Analyses `lines` with blocks of `block_size` tokens.
pub fn analyze(lines: &[TraceLine], block_size: u64) -> Analysis {
    // The prefix tree: a node per distinct leading run, keyed by (parent node, id); how many
    // lines pass through each.
    let mut nodes: HashMap<(usize, u64), usize> = HashMap::new();
    let mut through: Vec<u64> = vec![0];
    // How many lines have each (place, id).
    let mut placed: HashMap<(usize, u64), u32> = HashMap::new();
    for l in lines {
        let mut node = 0;
        for (i, &id) in l.hash_ids.iter().enumerate() {
            let next = through.len();
            node = *nodes.entry((node, id)).or_insert(next);
            if node == next {
                through.push(0);
            }
            through[node] += 1;
            *placed.entry((i, id)).or_default() += 1;
        }
    }
    let runs: u64 = through[1..].iter().sum();
    let reused: u64 = through[1..].iter().filter(|&&c| c > 1).sum();

    let (mut context, mut unique, mut hits) = (Vec::new(), Vec::new(), Vec::new());
    let mut seen: HashSet<u64> = HashSet::new();
    for l in lines {
        let shared = l
            .hash_ids
            .iter()
            .enumerate()
            .filter(|&(i, &id)| placed[&(i, id)] > 1)
            .count() as u64;
        let ctx = if l.hash_ids.is_empty() {
            0
        } else if shared == l.hash_ids.len() as u64 {
            l.input
        } else {
            // A trace may say fewer input tokens than its shared blocks hold.
            (shared * block_size).min(l.input)
        };
        context.push(ctx as f64);
        unique.push((l.input - ctx) as f64);
        if !l.hash_ids.is_empty() {
            let first_new = l
                .hash_ids
                .iter()
                .position(|id| !seen.contains(id))
                .unwrap_or(l.hash_ids.len());
            hits.push(first_new as f64 / l.hash_ids.len() as f64);
            seen.extend(&l.hash_ids);
        }
    }
    let isl: Vec<f64> = lines.iter().map(|l| l.input as f64).collect();
    let osl: Vec<f64> = lines.iter().map(|l| l.output as f64).collect();
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    Analysis {
        total_requests: lines.len(),
        unique_prefixes: nodes.len(),
        cache_hit_rate: mean(&hits),
        min_isl: lines.iter().map(|l| l.input).min().unwrap_or(0),
        max_isl: lines.iter().map(|l| l.input).max().unwrap_or(0),
        avg_isl: mean(&isl),
        min_osl: lines.iter().map(|l| l.output).min().unwrap_or(0),
        max_osl: lines.iter().map(|l| l.output).max().unwrap_or(0),
        avg_osl: mean(&osl),
        prefix_reuse_ratio: if runs == 0 {
            0.0
        } else {
            reused as f64 / runs as f64
        },
        isl_stats: Stats::of(&isl),
        osl_stats: Stats::of(&osl),
        context_length_stats: Stats::of(&context),
        unique_prompt_length_stats: Stats::of(&unique),
        hit_rate_stats: Stats::of(&hits),
        block_size,
    }
}

/// The console report: the counts, then a table of the distributions.
pub fn render(a: &Analysis) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Trace Analysis Report (blocks of {} tokens)",
        a.block_size
    );
    let _ = writeln!(out, "Total requests:     {}", a.total_requests);
    let _ = writeln!(out, "Unique prefixes:    {}", a.unique_prefixes);
    let _ = writeln!(out, "Prefix reuse ratio: {:.4}", a.prefix_reuse_ratio);
    let _ = writeln!(
        out,
        "Cache hit rate:     {:.4} (mean theoretical hit rate: a cache that never evicts)",
        a.cache_hit_rate
    );
    let _ = writeln!(out);
    let head = ["Mean", "Std Dev", "Min", "P25", "Median", "P75", "Max"];
    let _ = write!(out, "{:>22}", "Metric");
    for h in head {
        let _ = write!(out, " {h:>12}");
    }
    let _ = writeln!(out);
    for (name, s) in [
        ("Input Length", &a.isl_stats),
        ("Context Length", &a.context_length_stats),
        ("Unique Prompt Length", &a.unique_prompt_length_stats),
        ("Output Length", &a.osl_stats),
        ("Theoretical Hit Rates", &a.hit_rate_stats),
    ] {
        let _ = write!(out, "{name:>22}");
        match s {
            Some(s) => {
                for v in [s.mean, s.std_dev, s.min, s.p25, s.median, s.p75, s.max] {
                    let _ = write!(out, " {v:>12.2}");
                }
            }
            None => {
                for _ in head {
                    let _ = write!(out, " {:>12}", "N/A");
                }
            }
        }
        let _ = writeln!(out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(input: u64, output: u64, ids: &[u64]) -> TraceLine {
        TraceLine {
            timestamp: 0.0,
            input,
            output,
            hash_ids: ids.to_vec(),
        }
    }

    #[test]
    fn shared_blocks_make_context_and_hits_in_the_traces_order() {
        let lines = [
            line(1100, 10, &[1, 2, 3]),
            line(1200, 20, &[1, 2, 4]),
            line(1000, 30, &[1, 2, 3]),
            line(300, 40, &[]),
        ];
        let a = analyze(&lines, 512);
        assert_eq!(a.total_requests, 4);
        // [1], [1,2], [1,2,3], [1,2,4].
        assert_eq!(a.unique_prefixes, 4);
        // Leading runs: 3 + 3 + 3 = 9; those on more than one line: [1] ×3, [1,2] ×3,
        // [1,2,3] ×2.
        assert!((a.prefix_reuse_ratio - 8.0 / 9.0).abs() < 1e-12);
        // Hit rates: 0 (nothing seen), 2/3 (4 is new), 1 (all seen).
        let h = a.hit_rate_stats.as_ref().unwrap();
        assert!((a.cache_hit_rate - (0.0 + 2.0 / 3.0 + 1.0) / 3.0).abs() < 1e-12);
        assert_eq!((h.min, h.max), (0.0, 1.0));
        // Context: lines 1 and 3 share every block (all their input); line 2 shares two
        // blocks (1,024 tokens); the line without ids none.
        let c = a.context_length_stats.as_ref().unwrap();
        assert_eq!((c.min, c.max), (0.0, 1100.0));
        assert!((c.mean - (1100.0 + 1024.0 + 1000.0) / 4.0).abs() < 1e-9);
        let u = a.unique_prompt_length_stats.as_ref().unwrap();
        assert!((u.mean - (0.0 + 176.0 + 0.0 + 300.0) / 4.0).abs() < 1e-9);
        assert_eq!(
            (a.min_isl, a.max_isl, a.min_osl, a.max_osl),
            (300, 1200, 10, 40)
        );
        let o = a.osl_stats.as_ref().unwrap();
        // numpy: percentile([10, 20, 30, 40], 25) = 17.5; std 11.18.
        assert_eq!((o.p25, o.median, o.p75), (17.5, 25.0, 32.5));
        assert!((o.std_dev - 125f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn a_trace_without_hash_ids_has_no_hit_rates_and_no_context() {
        let a = analyze(&[line(10, 1, &[]), line(20, 2, &[])], 512);
        assert_eq!((a.unique_prefixes, a.cache_hit_rate), (0, 0.0));
        assert!(a.hit_rate_stats.is_none());
        assert_eq!(a.context_length_stats.unwrap().max, 0.0);
        assert!(render(&analyze(&[line(10, 1, &[])], 512)).contains("N/A"));
    }
}
