//! What the host is doing, read from `/proc`: per-CPU busy time, a thread's time running and
//! waiting to run; and whether an address is this host's.
//!
//! Each reader has a pure parser beside it, tested on literal text, so the decisions built on
//! them (shard placement, starvation) are tested without a live system.

use std::net::IpAddr;

/// Cumulative time one CPU spent busy and in all (clock ticks, from `/proc/stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CpuTime {
    /// Ticks busy with work that competes with the client: user, system, irq, softirq and
    /// steal. Work at a positive nice value (`nice`: a compiler in the background, say) is
    /// left out: the client out-ranks it, so a CPU it keeps busy is still free for a shard.
    pub busy: u64,
    /// All ticks.
    pub total: u64,
}

/// Parses the `cpuN` lines of `/proc/stat` into (CPU id, times).
pub(crate) fn parse_proc_stat(text: &str) -> Vec<(usize, CpuTime)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let Some(id) = f.next().and_then(|n| n.strip_prefix("cpu")) else {
            continue;
        };
        let Ok(id) = id.parse::<usize>() else {
            continue; // the "cpu" total line
        };
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        let v: Vec<u64> = f.take(8).filter_map(|x| x.parse().ok()).collect();
        if v.len() < 4 {
            continue;
        }
        let idle = v[3] + v.get(4).copied().unwrap_or(0);
        let total: u64 = v.iter().sum();
        out.push((
            id,
            CpuTime {
                busy: total - idle - v[1],
                total,
            },
        ));
    }
    out
}

/// Per-CPU times now (empty where `/proc/stat` cannot be read).
pub(crate) fn cpu_times() -> Vec<(usize, CpuTime)> {
    std::fs::read_to_string("/proc/stat")
        .map(|t| parse_proc_stat(&t))
        .unwrap_or_default()
}

/// Share of each CPU's time spent busy between two readings of [`cpu_times`].
pub(crate) fn busy_shares(
    before: &[(usize, CpuTime)],
    after: &[(usize, CpuTime)],
) -> Vec<(usize, f64)> {
    after
        .iter()
        .filter_map(|(id, b)| {
            let a = before.iter().find(|(i, _)| i == id)?.1;
            let total = b.total.checked_sub(a.total)?;
            let busy = b.busy.checked_sub(a.busy)?;
            Some((
                *id,
                if total == 0 {
                    0.0
                } else {
                    busy as f64 / total as f64
                },
            ))
        })
        .collect()
}

/// From a thread's `/proc/<pid>/task/<tid>/stat`: (user + system ticks, the CPU it last ran
/// on). The name field may hold spaces and parentheses: fields count from the last `)`.
pub(crate) fn parse_thread_stat(text: &str) -> Option<(u64, usize)> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // After the name: state is field 3, utime 14, stime 15, processor 39 (1-based overall).
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((ticks, f.get(36)?.parse().ok()?))
}

/// Every thread's (process name, ticks, last CPU), keyed by (pid, tid).
fn thread_ticks() -> std::collections::BTreeMap<(u32, u32), (String, u64, usize)> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let name = std::fs::read_to_string(p.path().join("comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some((ticks, cpu)) = std::fs::read_to_string(t.path().join("stat"))
                .ok()
                .and_then(|s| parse_thread_stat(&s))
            {
                out.insert((pid, tid), (name.clone(), ticks, cpu));
            }
        }
    }
    out
}

/// One CPU's busy share over a window, and the processes whose threads ran there.
#[derive(Debug, Clone)]
pub(crate) struct BusyCpu {
    /// The CPU.
    pub cpu: usize,
    /// Share of its time busy (0–1).
    pub share: f64,
    /// (process name, share of the CPU's time), busiest first.
    pub owners: Vec<(String, f64)>,
}

/// Each CPU's busy share over `window`, with the processes whose threads ran there most.
pub(crate) fn busy_cpus_with_owners(window: std::time::Duration) -> Vec<BusyCpu> {
    let started = std::time::Instant::now();
    let (cpu0, threads0) = (cpu_times(), thread_ticks());
    std::thread::sleep(window);
    let (cpu1, threads1) = (cpu_times(), thread_ticks());
    // Clock ticks are 1/100 s on Linux (USER_HZ); the window as it was, not as asked.
    let window_ticks = started.elapsed().as_secs_f64() * 100.0;
    let mut by_cpu: std::collections::BTreeMap<usize, std::collections::BTreeMap<String, u64>> =
        Default::default();
    for (key, (name, ticks, cpu)) in &threads1 {
        let before = threads0.get(key).map_or(0, |t| t.1);
        let d = ticks.saturating_sub(before);
        if d > 0 {
            *by_cpu
                .entry(*cpu)
                .or_default()
                .entry(name.clone())
                .or_default() += d;
        }
    }
    busy_shares(&cpu0, &cpu1)
        .into_iter()
        .map(|(cpu, share)| {
            let mut who: Vec<(String, f64)> = by_cpu
                .remove(&cpu)
                .unwrap_or_default()
                .into_iter()
                // A thread counts on the CPU it ran on last, and ticks are coarse: no owner
                // is said to have used more of a CPU than the CPU was busy.
                .map(|(n, t)| (n, (t as f64 / window_ticks).min(share)))
                .collect();
            who.sort_by(|a, b| b.1.total_cmp(&a.1));
            BusyCpu {
                cpu,
                share,
                owners: who,
            }
        })
        .collect()
}

/// A thread's time on a CPU and time runnable but waiting for one (ns, cumulative).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SchedStat {
    /// Time spent running.
    pub run_ns: u64,
    /// Time spent on a run queue, ready but not running.
    pub wait_ns: u64,
}

/// Parses `/proc/<pid>/task/<tid>/schedstat` (`run_ns wait_ns timeslices`).
pub(crate) fn parse_schedstat(text: &str) -> Option<SchedStat> {
    let mut f = text.split_ascii_whitespace().map(|x| x.parse::<u64>().ok());
    Some(SchedStat {
        run_ns: f.next()??,
        wait_ns: f.next()??,
    })
}

/// Scheduler times of thread `tid` of this process (`None` where the kernel keeps none).
pub(crate) fn thread_schedstat(tid: i32) -> Option<SchedStat> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    parse_schedstat(&text)
}

/// True when `ip` is an address of this host (loopback, unspecified, or one of its
/// interfaces'): a server there shares this host's CPUs with the client. A UDP socket binds
/// only to a local address, so binding one answers without reading any table.
pub(crate) fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || std::net::UdpSocket::bind((ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_busy_shares() {
        let a = parse_proc_stat(
            "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0 0 0\nintr 1 2\n",
        );
        assert_eq!(a.len(), 2);
        assert_eq!(
            a[0],
            (
                0,
                CpuTime {
                    busy: 10,
                    total: 60
                }
            )
        );
        let b = parse_proc_stat("cpu0 35 0 5 50 0 0 0 0 0 0\ncpu1 6 0 5 58 1 0 0 0 0 0\n");
        let s = busy_shares(&a, &b);
        assert_eq!(s[0], (0, 1.0));
        assert_eq!(s[1].0, 1);
        assert!((s[1].1 - 0.1).abs() < 1e-9, "{s:?}");
        // Niced work (second column) leaves the CPU free for the client.
        let c = parse_proc_stat("cpu0 35 30 5 50 0 0 0 0 0 0\ncpu1 6 0 5 58 1 0 0 0 0 0\n");
        assert_eq!(busy_shares(&b, &c)[0], (0, 0.0));
    }

    #[test]
    fn thread_stat_fields() {
        // A name with a space and a parenthesis; utime 7, stime 3, last on CPU 5.
        let line = "1234 (vllm (worker) 0) R 1 1 1 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 8 0 \
                    500 1000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 5 0 0 0 0 0";
        assert_eq!(parse_thread_stat(line), Some((10, 5)));
        assert_eq!(parse_thread_stat("garbage"), None);
    }

    #[test]
    fn schedstat_fields() {
        assert_eq!(
            parse_schedstat("683634284 371446991 100\n"),
            Some(SchedStat {
                run_ns: 683_634_284,
                wait_ns: 371_446_991
            })
        );
        assert_eq!(parse_schedstat("garbage"), None);
        // The kernel adds a thread's run time at each switch: work, then sleep once.
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        std::thread::sleep(std::time::Duration::from_millis(1));
        let me = thread_schedstat(crate::sys::gettid()).expect("this kernel keeps schedstat");
        assert!(me.run_ns > 0, "{me:?}");
    }

    #[test]
    fn local_addresses() {
        assert!(is_local("127.0.0.1".parse().unwrap()));
        assert!(is_local("::1".parse().unwrap()));
        assert!(is_local("0.0.0.0".parse().unwrap()));
        // TEST-NET-3 (RFC 5737) is never assigned to a host.
        assert!(!is_local("203.0.113.7".parse().unwrap()));
    }
}
