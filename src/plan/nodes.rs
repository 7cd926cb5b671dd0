//! One load split across many client hosts ("nodes"): which share of the global plan this
//! process runs, and the wall-clock instant every node starts at.
//!
//! Every node builds the same global plan from the same flags and seed, then keeps its share:
//! request `i` (warm-up included) belongs to node `i mod N`, so an open loop's single
//! schedule, a closed loop's request count and the dataset entries (entry `i mod entries`) are
//! split exactly, and the union over nodes is the single-node plan. Concurrency is split with
//! the remainders to the lowest indices. Multi-turn sessions run whole inside one request, so
//! they are split whole.

use serde::{Deserialize, Serialize};

/// The most nodes one load is split across.
pub const MAX_NODES: u64 = 4096;

/// This process's place among the nodes that share one load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nodes {
    /// This node, from 0.
    pub index: u64,
    /// How many nodes share the load.
    pub count: u64,
}

impl Default for Nodes {
    fn default() -> Self {
        Nodes { index: 0, count: 1 }
    }
}

impl Nodes {
    /// True when the load is split across more than one node.
    pub fn is_split(&self) -> bool {
        self.count > 1
    }

    /// This node's share of `total` (see [`share`]).
    pub fn share(&self, total: u64) -> u64 {
        share(total, self.count as usize, self.index as usize)
    }

    /// Where shard `shard` of this node's `shards` stands among every node's shards: it takes
    /// request ids `first + slot, first + slot + slots, …`.
    pub fn slot(&self, shard: usize, shards: usize) -> (usize, usize) {
        let count = self.count as usize;
        (self.index as usize + count * shard, count * shards)
    }
}

/// Share `index` of `total` split into `parts` shares that differ by at most one, the larger
/// ones on the lowest indices.
pub fn share(total: u64, parts: usize, index: usize) -> u64 {
    let parts = parts as u64;
    total / parts + u64::from((index as u64) < total % parts)
}

/// A node's place that cannot be one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NodesError {
    /// A job engine's variable that is not a whole number.
    #[error("{name}={value:?} is not a whole number")]
    Variable {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
    },
    /// `--node-index` alone.
    #[error("--node-index needs --node-count")]
    IndexWithoutCount,
    /// `--node-count` above 1 with no index from the flags or the environment.
    #[error(
        "--node-count {0} needs this node's --node-index (or JOB_COMPLETION_INDEX from a \
         Kubernetes Indexed Job, or SLURM_PROCID from srun)"
    )]
    NoIndex(u64),
    /// A count of 0 or above [`MAX_NODES`].
    #[error("--node-count {0}: must be from 1 to {MAX_NODES}")]
    Count(u64),
    /// An index at or above the count.
    #[error(
        "node index {index} is not below the node count {count}{}",
        from.map_or(String::new(), |f| format!(" (index from {f})"))
    )]
    Index {
        /// The index.
        index: u64,
        /// The count.
        count: u64,
        /// The variables that gave the index, when the environment did.
        from: Option<&'static str>,
    },
}

/// Where a node's place comes from: the flags, else the job engine's environment (a
/// Kubernetes Indexed Job's `JOB_COMPLETION_INDEX` with `--node-count`; Slurm's `SLURM_PROCID`
/// and `SLURM_NTASKS` under `srun`). `env` reads one variable. Returns the place and, when it
/// came from the environment, which variables said so.
pub fn resolve(
    count: Option<u64>,
    index: Option<u64>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Nodes, Option<&'static str>), NodesError> {
    let number = |name: &'static str| -> Result<Option<u64>, NodesError> {
        match env(name) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| NodesError::Variable { name, value: v }),
        }
    };
    let (nodes, from) = match (count, index) {
        (Some(count), Some(index)) => (Nodes { index, count }, None),
        (None, Some(_)) => return Err(NodesError::IndexWithoutCount),
        (Some(count), None) => {
            if let Some(index) = number("JOB_COMPLETION_INDEX")? {
                (Nodes { index, count }, Some("JOB_COMPLETION_INDEX"))
            } else if let Some(index) = number("SLURM_PROCID")? {
                (Nodes { index, count }, Some("SLURM_PROCID"))
            } else if count == 1 {
                (Nodes::default(), None)
            } else {
                return Err(NodesError::NoIndex(count));
            }
        }
        (None, None) => match (number("SLURM_PROCID")?, number("SLURM_NTASKS")?) {
            (Some(index), Some(count)) if count > 1 => (
                Nodes { index, count },
                Some("SLURM_PROCID and SLURM_NTASKS"),
            ),
            _ => (Nodes::default(), None),
        },
    };
    if !(1..=MAX_NODES).contains(&nodes.count) {
        return Err(NodesError::Count(nodes.count));
    }
    if nodes.index >= nodes.count {
        return Err(NodesError::Index {
            index: nodes.index,
            count: nodes.count,
            from,
        });
    }
    Ok((nodes, from))
}

/// A `--start-at` value that is neither an RFC 3339 time nor Unix seconds after 1970.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--start-at {0:?}: expected an RFC 3339 time (2026-12-01T15:00:00Z) or Unix seconds")]
pub struct StartAtError(pub String);

/// `--start-at`: an RFC 3339 instant (`2026-12-01T15:00:00Z`, `…T17:00:00.5+02:00`) or Unix
/// seconds (`1764601200`, `1764601200.25`), as nanoseconds since the Unix epoch.
pub fn parse_start_at(s: &str) -> Result<u64, StartAtError> {
    let bad = || StartAtError(s.into());
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        if !(secs.is_finite() && secs > 0.0 && secs < 1e11) {
            return Err(bad());
        }
        return Ok((secs * 1e9).round() as u64);
    }
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Result<i64, StartAtError> {
        let part = s.get(from..from + len).ok_or_else(bad)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        part.parse().map_err(|_| bad())
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return Err(bad());
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return Err(bad());
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, mi, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return Err(bad());
    }
    let mut i = 19;
    let mut frac_ns = 0i64;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = &s[start..i];
        if digits.is_empty() {
            return Err(bad());
        }
        let nine: String = digits
            .chars()
            .chain(std::iter::repeat('0'))
            .take(9)
            .collect();
        frac_ns = nine.parse().map_err(|_| bad())?;
    }
    let offset_s = match &s[i..] {
        "Z" | "z" => 0,
        z if z.len() == 6 && (z.starts_with('+') || z.starts_with('-')) && &z[3..4] == ":" => {
            let sign = if z.starts_with('-') { -1 } else { 1 };
            sign * (num(i + 1, 2)? * 3600 + num(i + 4, 2)? * 60)
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(y, mo, d);
    let unix = days * 86_400 + h * 3600 + mi * 60 + sec - offset_s;
    if unix <= 0 {
        return Err(bad());
    }
    Ok(unix as u64 * 1_000_000_000 + frac_ns as u64)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_place_comes_from_flags_then_the_job_engine() {
        let none = env(&[]);
        assert_eq!(
            resolve(Some(4), Some(2), &none).unwrap(),
            (Nodes { index: 2, count: 4 }, None)
        );
        assert_eq!(resolve(None, None, &none).unwrap().0, Nodes::default());
        let k8s = env(&[("JOB_COMPLETION_INDEX", "3")]);
        assert_eq!(
            resolve(Some(4), None, &k8s).unwrap(),
            (Nodes { index: 3, count: 4 }, Some("JOB_COMPLETION_INDEX"))
        );
        // An Indexed Job's index alone does not split a load: the count is a flag.
        assert_eq!(resolve(None, None, &k8s).unwrap().0, Nodes::default());
        let slurm = env(&[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "8")]);
        assert_eq!(
            resolve(None, None, &slurm).unwrap().0,
            Nodes { index: 1, count: 8 }
        );
        // The flags win over the environment.
        assert_eq!(
            resolve(Some(1), Some(0), &slurm).unwrap().0,
            Nodes::default()
        );
        let one_task = env(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1")]);
        assert_eq!(resolve(None, None, &one_task).unwrap().0, Nodes::default());
    }

    #[test]
    fn a_bad_place_is_named() {
        let none = env(&[]);
        assert_eq!(resolve(Some(4), None, &none), Err(NodesError::NoIndex(4)));
        assert_eq!(
            resolve(None, Some(1), &none),
            Err(NodesError::IndexWithoutCount)
        );
        let index = |index, count, from| Err(NodesError::Index { index, count, from });
        assert_eq!(resolve(Some(4), Some(4), &none), index(4, 4, None));
        assert_eq!(resolve(Some(0), Some(0), &none), Err(NodesError::Count(0)));
        let k8s = env(&[("JOB_COMPLETION_INDEX", "9")]);
        let e = resolve(Some(4), None, &k8s);
        assert_eq!(e, index(9, 4, Some("JOB_COMPLETION_INDEX")));
        assert_eq!(
            e.unwrap_err().to_string(),
            "node index 9 is not below the node count 4 (index from JOB_COMPLETION_INDEX)"
        );
        let junk = env(&[("JOB_COMPLETION_INDEX", "x")]);
        assert_eq!(
            resolve(Some(4), None, &junk),
            Err(NodesError::Variable {
                name: "JOB_COMPLETION_INDEX",
                value: "x".into()
            })
        );
    }

    #[test]
    fn shares_and_slots_partition_the_load() {
        let nodes = |i| Nodes { index: i, count: 4 };
        assert_eq!(
            (0..4).map(|i| nodes(i).share(10)).collect::<Vec<_>>(),
            [3, 3, 2, 2]
        );
        // Node i's shards, together, take exactly the ids that are i mod 4.
        let mut seen = Vec::new();
        for i in 0..4 {
            let shards = 1 + i as usize % 3;
            for s in 0..shards {
                let (slot, slots) = nodes(i).slot(s, shards);
                let mut ids: Vec<usize> = (slot..40).step_by(slots).collect();
                assert!(ids.iter().all(|id| *id as u64 % 4 == i));
                seen.append(&mut ids);
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..40).collect::<Vec<_>>());
    }

    #[test]
    fn start_times_parse_in_both_forms() {
        let t = 1_764_601_200 * 1_000_000_000u64; // 2025-12-01T15:00:00Z
        assert_eq!(parse_start_at("2025-12-01T15:00:00Z"), Ok(t));
        assert_eq!(parse_start_at("2025-12-01t15:00:00z"), Ok(t));
        assert_eq!(parse_start_at("2025-12-01 17:00:00+02:00"), Ok(t));
        assert_eq!(parse_start_at("2025-12-01T14:30:00-00:30"), Ok(t));
        assert_eq!(
            parse_start_at("2025-12-01T15:00:00.25Z"),
            Ok(t + 250_000_000)
        );
        assert_eq!(parse_start_at("1764601200"), Ok(t));
        assert_eq!(parse_start_at("1764601200.5"), Ok(t + 500_000_000));
        assert_eq!(
            parse_start_at("2000-02-29T00:00:00Z"),
            Ok(951_782_400_000_000_000)
        );
        for bad in [
            "",
            "tomorrow",
            "2025-13-01T15:00:00Z",
            "2025-12-01T15:00:00",
            "2025-12-01T15:00:00+0200",
            "2025-12-01T15:00:00.Z",
            "-5",
            "inf",
        ] {
            assert_eq!(parse_start_at(bad), Err(StartAtError(bad.into())), "{bad}");
        }
    }
}
