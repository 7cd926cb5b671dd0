//! Where the shards run: how many, and on which CPUs.
//!
//! A shard pinned to one CPU cannot leave it. On a host whose CPUs the server shares (a GPU
//! host: API server, tokenizer and scheduler threads, often at a better priority than the
//! client), a pinned shard gets whatever the server leaves of its CPU, and its events wait in
//! the socket while the clock runs. So the placement is decided from what the host is doing,
//! not from the CPU count:
//!
//! - **How many.** One shard per [`STREAMS_PER_SHARD`] streams (requests in flight), never more
//!   than the quiet CPUs, and, when the server runs on the same CPUs, one fewer, so the server
//!   keeps a CPU of its own. A shard per CPU is rarely needed: one shard drives thousands of
//!   streams.
//! - **Which CPUs.** *Quiet* CPUs are those that other work kept less than [`QUIET_BUSY`] busy
//!   while ringperf sampled the host before the run; the quietest come first. CPUs given to the
//!   in-process simulator are left out.
//! - **Pinned or not.** With the server elsewhere (another host, or the in-process simulator on
//!   its own CPUs), each shard is pinned to its own quiet CPU: thread-per-core. With the server
//!   on this host and on the same CPUs, shards are restricted to the quiet CPUs but not pinned
//!   to one, so the scheduler can move a shard away from the server.
//!
//! `--shards`, `--cpus` and `--no-pin` override each part. While the run goes on,
//! [`super::starvation`] watches every shard and widens the CPUs of one that waits for a CPU.

use serde::Serialize;

pub use crate::cpus::cpu_list;

/// Streams (requests in flight) one shard is sized for.
pub const STREAMS_PER_SHARD: u64 = 1000;
/// A CPU that other work kept at least this busy before the run is not used for shards.
pub const QUIET_BUSY: f64 = 0.25;

/// Where one shard may run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pin {
    /// Pinned to this CPU.
    Core(usize),
    /// Any of these CPUs; the scheduler chooses.
    Set(Vec<usize>),
    /// Any CPU the process may use.
    Free,
}

impl Pin {
    /// The CPU list this pin stands for, given the CPUs the process may use.
    pub fn cpus(&self, allowed: &[usize]) -> Vec<usize> {
        match self {
            Pin::Core(c) => vec![*c],
            Pin::Set(s) => s.clone(),
            Pin::Free => allowed.to_vec(),
        }
    }

    /// The one CPU of a pinned shard.
    pub fn core(&self) -> Option<usize> {
        match self {
            Pin::Core(c) => Some(*c),
            _ => None,
        }
    }
}

impl std::fmt::Display for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pin::Core(c) => write!(f, "CPU {c}"),
            Pin::Set(s) => write!(f, "CPUs {}", cpu_list(s)),
            Pin::Free => f.write_str("any CPU"),
        }
    }
}

/// What the host looked like before the run.
#[derive(Debug, Clone, Default)]
pub struct HostView {
    /// CPUs this process may use.
    pub allowed: Vec<usize>,
    /// Share of each CPU that other work kept busy while ringperf sampled (CPUs not listed:
    /// unknown, taken as idle).
    pub busy: Vec<(usize, f64)>,
    /// The target server's address is one of this host's.
    pub server_local: bool,
}

impl HostView {
    fn busy_of(&self, cpu: usize) -> f64 {
        self.busy
            .iter()
            .find(|(c, _)| *c == cpu)
            .map_or(0.0, |(_, b)| *b)
    }
}

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    /// `--shards`.
    pub shards: Option<usize>,
    /// `--cpus`.
    pub cpus: Option<Vec<usize>>,
    /// `--no-pin`.
    pub no_pin: bool,
    /// Requests in flight the run will hold (the work to size for).
    pub streams: u64,
    /// CPUs given to the in-process simulator.
    pub reserved: Vec<usize>,
    /// No more shards than this, whatever the work (`--prefill-concurrency` gives each shard
    /// at least one of its places).
    pub most: Option<usize>,
}

/// How the placement was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// One quiet CPU per shard, pinned.
    PerCore,
    /// The server shares this host's CPUs: shards may move among the quiet CPUs.
    Shared,
    /// `--cpus`: pinned where the user said.
    Explicit,
    /// `--no-pin`.
    Unpinned,
}

/// The decision.
#[derive(Debug, Clone, Serialize)]
pub struct Placement {
    /// Where each shard runs.
    pub shards: Vec<Pin>,
    /// How it was chosen.
    pub mode: Mode,
    /// The quiet CPUs, quietest first.
    pub quiet: Vec<usize>,
    /// Every CPU shards may use (all but the in-process simulator's), quietest first.
    pub candidates: Vec<usize>,
    /// Why, in a sentence for the report.
    pub reason: String,
}

/// A placement the flags ask for that cannot be.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// `--shards 0`.
    #[error("--shards must be at least 1")]
    NoShards,
    /// `--cpus` names a CPU outside the process's affinity.
    #[error("--cpus: CPU {cpu} is not one this process may use ({allowed})")]
    CpuNotAllowed {
        /// The CPU asked for.
        cpu: usize,
        /// The CPUs the process may use.
        allowed: String,
    },
}

/// Decides the shards' placement. Pure: the host view is measured by the caller.
pub fn place(ask: &Ask, host: &HostView) -> Result<Placement, Error> {
    if ask.shards == Some(0) {
        return Err(Error::NoShards);
    }
    let allowed = &host.allowed;
    if let Some(cpus) = &ask.cpus {
        if let Some(&cpu) = cpus.iter().find(|c| !allowed.contains(c)) {
            return Err(Error::CpuNotAllowed {
                cpu,
                allowed: cpu_list(allowed),
            });
        }
    }
    let mut candidates: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|c| !ask.reserved.contains(c))
        .collect();
    if candidates.is_empty() {
        candidates = allowed.clone();
    }
    candidates.sort_by(|a, b| host.busy_of(*a).total_cmp(&host.busy_of(*b)).then(a.cmp(b)));
    let mut quiet: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|c| host.busy_of(*c) < QUIET_BUSY)
        .collect();
    if quiet.is_empty() {
        // Every CPU is busy: use the least busy one or ones.
        quiet = candidates[..1].to_vec();
    }
    // The server shares the client's CPUs when it runs here and not on CPUs of its own.
    let shared = host.server_local && ask.reserved.is_empty();
    let room = match &ask.cpus {
        Some(list) => list.len(),
        None if shared && quiet.len() > 1 => quiet.len() - 1,
        None => quiet.len(),
    };
    let by_work = ask.streams.div_ceil(STREAMS_PER_SHARD).max(1);
    let n = match ask.shards {
        Some(n) => n,
        None => (by_work.min(room as u64) as usize).max(1),
    }
    .min(ask.streams.max(1).min(usize::MAX as u64) as usize)
    .min(ask.most.unwrap_or(usize::MAX).max(1));
    let (mode, shards, reason) = if ask.no_pin {
        (
            Mode::Unpinned,
            vec![Pin::Free; n],
            "not pinned (--no-pin)".to_string(),
        )
    } else if let Some(list) = &ask.cpus {
        (
            Mode::Explicit,
            (0..n).map(|i| Pin::Core(list[i % list.len()])).collect(),
            format!("pinned to --cpus {}", cpu_list(list)),
        )
    } else if shared {
        // Never a single CPU: the server, idle while the host was sampled, may take it.
        let set = if quiet.len() == allowed.len() {
            Pin::Free
        } else if quiet.len() >= 2 {
            Pin::Set(quiet.clone())
        } else if candidates.len() == allowed.len() {
            Pin::Free
        } else {
            Pin::Set(candidates.clone())
        };
        (
            Mode::Shared,
            vec![set.clone(); n],
            format!(
                "the server's address is this host's, so it shares these CPUs: {n} shard(s) may move among {set} (a pinned shard could not escape a server that out-ranks it)"
            ),
        )
    } else {
        (
            Mode::PerCore,
            (0..n).map(|i| Pin::Core(quiet[i % quiet.len()])).collect(),
            format!(
                "{n} shard(s) pinned to the quietest CPU(s) {}",
                cpu_list(&quiet[..n.min(quiet.len())])
            ),
        )
    };
    Ok(Placement {
        shards,
        mode,
        quiet,
        candidates,
        reason,
    })
}

impl Placement {
    /// A CPU no shard may run on, for helper threads (telemetry); none when shards may use
    /// every CPU.
    pub fn spare_cpu(&self, allowed: &[usize]) -> Option<usize> {
        let used: Vec<usize> = self.shards.iter().flat_map(|p| p.cpus(allowed)).collect();
        allowed.iter().rev().copied().find(|c| !used.contains(c))
    }
}

/// Where a shard that waits for its CPU may go next: from one CPU to the quiet ones, from
/// those to every CPU shards may use (never the in-process simulator's). `None` when it
/// cannot widen (it may already go anywhere it may, or the user placed it).
pub fn widen(pin: &Pin, placement: &Placement, allowed: &[usize]) -> Option<Pin> {
    if matches!(placement.mode, Mode::Explicit | Mode::Unpinned) {
        return None;
    }
    let all = if placement.candidates.len() == allowed.len() {
        Pin::Free
    } else {
        Pin::Set(placement.candidates.clone())
    };
    let width = |p: &Pin| p.cpus(allowed).len();
    [Pin::Set(placement.quiet.clone()), all]
        .into_iter()
        .find(|next| width(next) > width(pin))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(busy: &[f64], local: bool) -> HostView {
        HostView {
            allowed: (0..busy.len()).collect(),
            busy: busy.iter().copied().enumerate().collect(),
            server_local: local,
        }
    }

    fn ask(streams: u64) -> Ask {
        Ask {
            streams,
            ..Ask::default()
        }
    }

    #[test]
    fn a_remote_server_gets_one_pinned_shard_per_quiet_cpu_sized_to_the_work() {
        let h = host(&[0.9, 0.0, 0.1, 0.05], false);
        let p = place(&ask(256), &h).unwrap();
        assert_eq!(p.mode, Mode::PerCore);
        assert_eq!(p.shards, vec![Pin::Core(1)], "one shard, on the idlest CPU");
        assert_eq!(p.quiet, vec![1, 3, 2]);
        let p = place(&ask(2500), &h).unwrap();
        assert_eq!(p.shards, vec![Pin::Core(1), Pin::Core(3), Pin::Core(2)]);
        let p = place(&ask(100_000), &h).unwrap();
        assert_eq!(p.shards.len(), 3, "never more shards than quiet CPUs");
        assert!(!p.shards.contains(&Pin::Core(0)), "the busy CPU is avoided");
    }

    #[test]
    fn a_local_server_leaves_a_cpu_and_shards_may_move() {
        let h = host(&[0.0, 0.0], true);
        let p = place(&ask(10_000), &h).unwrap();
        assert_eq!(p.mode, Mode::Shared);
        assert_eq!(p.shards, vec![Pin::Free], "2 CPUs: one shard, movable");
        let h = host(&[0.0, 0.0, 0.0, 0.6], true);
        let p = place(&ask(10_000), &h).unwrap();
        assert_eq!(p.shards, vec![Pin::Set(vec![0, 1, 2]); 2]);
        assert!(p.reason.contains("address is this host's"), "{}", p.reason);
        // One quiet CPU is no place to confine a shard next to a local server: it may go
        // anywhere.
        let h = host(&[0.0, 0.7], true);
        let p = place(&ask(100), &h).unwrap();
        assert_eq!(p.shards, vec![Pin::Free]);
    }

    #[test]
    fn the_in_process_simulator_keeps_its_cpus() {
        let h = host(&[0.0, 0.0, 0.0], true);
        let a = Ask {
            reserved: vec![0],
            ..ask(5000)
        };
        let p = place(&a, &h).unwrap();
        assert_eq!(p.mode, Mode::PerCore, "the server runs on CPUs of its own");
        assert_eq!(p.shards, vec![Pin::Core(1), Pin::Core(2)]);
    }

    #[test]
    fn overrides_win() {
        let h = host(&[0.0, 0.0, 0.0, 0.0], true);
        let a = Ask {
            shards: Some(3),
            cpus: Some(vec![2, 3]),
            ..ask(10)
        };
        let p = place(&a, &h).unwrap();
        assert_eq!(p.mode, Mode::Explicit);
        assert_eq!(p.shards, vec![Pin::Core(2), Pin::Core(3), Pin::Core(2)]);
        let a = Ask {
            no_pin: true,
            shards: Some(2),
            ..ask(10)
        };
        assert_eq!(place(&a, &h).unwrap().shards, vec![Pin::Free; 2]);
        // Never more shards than requests in flight.
        let a = Ask {
            shards: Some(8),
            ..ask(3)
        };
        assert_eq!(place(&a, &h).unwrap().shards.len(), 3);
        assert!(place(
            &Ask {
                cpus: Some(vec![9]),
                ..ask(1)
            },
            &h
        )
        .unwrap_err()
        .to_string()
        .contains("CPU 9 is not one this process may use (0-3)"));
        assert!(place(
            &Ask {
                shards: Some(0),
                ..ask(1)
            },
            &h
        )
        .is_err());
    }

    #[test]
    fn all_cpus_busy_still_places_on_the_least_busy() {
        let h = host(&[0.8, 0.5, 0.9], false);
        let p = place(&ask(5000), &h).unwrap();
        assert_eq!(p.shards, vec![Pin::Core(1)]);
    }

    #[test]
    fn widening_goes_core_then_quiet_set_then_anywhere() {
        let h = host(&[0.0, 0.0, 0.9], false);
        let p = place(&ask(10), &h).unwrap();
        let allowed = [0, 1, 2];
        let step1 = widen(&p.shards[0], &p, &allowed).unwrap();
        assert_eq!(step1, Pin::Set(vec![0, 1]));
        let step2 = widen(&step1, &p, &allowed).unwrap();
        assert_eq!(step2, Pin::Free);
        assert_eq!(widen(&step2, &p, &allowed), None);
        let explicit = place(
            &Ask {
                cpus: Some(vec![0]),
                ..ask(1)
            },
            &h,
        )
        .unwrap();
        assert_eq!(widen(&explicit.shards[0], &explicit, &allowed), None);
        // Never onto the in-process simulator's CPU.
        let h = host(&[0.0, 0.0, 0.0], false);
        let sim = place(
            &Ask {
                reserved: vec![0],
                ..ask(10)
            },
            &h,
        )
        .unwrap();
        assert_eq!(sim.shards[0], Pin::Core(1));
        let step1 = widen(&sim.shards[0], &sim, &allowed).unwrap();
        assert_eq!(step1, Pin::Set(vec![1, 2]));
        assert_eq!(widen(&step1, &sim, &allowed), None);
        let h = host(&[0.0, 0.0], false);
        let alone = place(
            &Ask {
                reserved: vec![0],
                ..ask(10)
            },
            &h,
        )
        .unwrap();
        assert_eq!(
            widen(&alone.shards[0], &alone, &[0, 1]),
            None,
            "nowhere to go"
        );
    }
}
