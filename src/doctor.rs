//! `ringperf doctor`: is this host ready for the run planned? Each check says pass, warn or
//! fail, with the fix; a failed check is a blocker (the run would not work, or would
//! measure the host rather than the server), and `profile` runs the blockers' checks itself.

use std::collections::BTreeMap;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// Fine.
    Pass,
    /// Works, but worth fixing.
    Warn,
    /// A blocker.
    Fail,
}

/// One check's result.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    /// What was checked.
    pub(crate) name: &'static str,
    /// How it came out.
    pub(crate) level: Level,
    /// What was found, and the fix when it is not a pass.
    pub(crate) detail: String,
}

fn check(name: &'static str, level: Level, detail: impl Into<String>) -> Check {
    Check {
        name,
        level,
        detail: detail.into(),
    }
}

/// The run the host is checked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Planned {
    /// Requests in flight (connections).
    pub(crate) streams: u64,
    /// The simulator runs in this process (it holds the other end of each connection).
    pub(crate) in_process_sim: bool,
    /// Connections from every process of this host (a split run's workers share its ports).
    pub(crate) host_streams: u64,
    /// Distinct (source address, server address) pairs they spread over: each pair has the
    /// whole ephemeral range.
    pub(crate) paths: u64,
}

impl Planned {
    /// `streams` connections from one process to one server address.
    pub(crate) fn one_process(streams: u64, in_process_sim: bool) -> Planned {
        Planned {
            streams,
            in_process_sim,
            host_streams: streams,
            paths: 1,
        }
    }
}

/// Open files: one per connection (two with the in-process simulator), and some to spare.
pub(crate) fn open_files(p: Planned, limit: u64) -> Check {
    let needed = p
        .streams
        .saturating_mul(if p.in_process_sim { 2 } else { 1 })
        .saturating_add(256);
    if limit == 0 || needed <= limit {
        check(
            "open files",
            Level::Pass,
            format!("{limit} allowed, about {needed} needed"),
        )
    } else {
        let sim_note = if p.in_process_sim {
            ", both ends of each connection with the in-process simulator,"
        } else {
            ""
        };
        check(
            "open files",
            Level::Fail,
            format!(
                "{} connections need about {needed} open files{sim_note} but this process may \
                 open {limit}: raise the limit (`ulimit -n {needed}` as root, or LimitNOFILE= \
                 in a systemd unit; see tuning/) or ask for fewer in flight",
                p.streams
            ),
        )
    }
}

/// Local ports: each connection holds one from the ephemeral range, per pair of source and
/// server addresses.
pub(crate) fn ephemeral_ports(p: Planned, range: Option<(u64, u64)>) -> Check {
    let Some((lo, hi)) = range else {
        return check(
            "ephemeral ports",
            Level::Pass,
            "range unknown (not Linux /proc)",
        );
    };
    let n = hi.saturating_sub(lo) + 1;
    let per_path = p.host_streams.div_ceil(p.paths.max(1));
    let over = if p.paths > 1 {
        format!(
            "{} connections over {} pairs of source and server addresses, {per_path} each",
            p.host_streams, p.paths
        )
    } else {
        format!("{} connections to one server address", p.host_streams)
    };
    let fix =
        format!("widen it: sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\" (now {lo}-{hi})");
    if per_path > 64_512 {
        check(
            "ephemeral ports",
            Level::Fail,
            format!(
                "{over} need more local ports than there are (at most 64,512 per pair): give \
                 more source addresses (--local-address) or servers, or more client hosts"
            ),
        )
    } else if per_path > n {
        check(
            "ephemeral ports",
            Level::Fail,
            format!("{n} local ports for {over}: {fix}, or give more source addresses (--local-address)"),
        )
    } else if per_path * 2 > n {
        check(
            "ephemeral ports",
            Level::Warn,
            format!(
                "{n} local ports for {over} leave little room for reconnects (closed ports \
                 wait in TIME_WAIT): {fix}"
            ),
        )
    } else {
        check(
            "ephemeral ports",
            Level::Pass,
            format!("{n} local ports ({lo}-{hi})"),
        )
    }
}

/// Source addresses for `host_streams` connections to `servers` distinct loopback server
/// addresses when the ephemeral `range` cannot hold them from one: 127.0.0.1, 127.0.0.2, …
/// (every address of 127.0.0.0/8 reaches a loopback server), enough for each pair of source
/// and server to use at most half the range. Empty when one source is enough.
pub(crate) fn loopback_sources(
    host_streams: u64,
    servers: u64,
    range: u64,
) -> Vec<std::net::IpAddr> {
    let per_server = host_streams.div_ceil(servers.max(1));
    let room = (range / 2).max(1);
    let k = per_server.div_ceil(room).min(250);
    if k <= 1 {
        return Vec::new();
    }
    (1..=k as u8)
        .map(|i| std::net::IpAddr::from([127, 0, 0, i]))
        .collect()
}

/// io_uring: the design's driver; epoll works where it is refused.
pub(crate) fn io_uring(disabled_sysctl: Option<u64>, ring: Result<(), String>) -> Check {
    match (disabled_sysctl, ring) {
        (_, Ok(())) => check("io_uring", Level::Pass, "a ring was set up"),
        (Some(2), Err(_)) => check(
            "io_uring",
            Level::Warn,
            "disabled (kernel.io_uring_disabled=2): shards run epoll; set it to 0 for io_uring",
        ),
        (_, Err(e)) => check(
            "io_uring",
            Level::Warn,
            format!(
                "refused ({e}): shards run epoll (a container's seccomp profile often refuses it)"
            ),
        ),
    }
}

/// CPU frequency governors: `powersave` slows the client's reaction to each event.
pub(crate) fn governor(governors: &BTreeMap<String, Vec<usize>>) -> Check {
    if governors.is_empty() {
        return check(
            "CPU governor",
            Level::Pass,
            "no cpufreq (a VM, or fixed frequency)",
        );
    }
    let list: Vec<String> = governors
        .iter()
        .map(|(g, cpus)| format!("{g} on CPUs {}", crate::cpus::cpu_list(cpus)))
        .collect();
    if governors.contains_key("powersave") {
        check(
            "CPU governor",
            Level::Warn,
            format!(
                "{}: set `performance` (cpupower frequency-set -g performance) so that idle \
                 shards wake at full speed",
                list.join(", ")
            ),
        )
    } else {
        check("CPU governor", Level::Pass, list.join(", "))
    }
}

/// The clock every timestamp comes from: `tsc` (or a hypervisor's) is cheap to read.
pub(crate) fn clock_source(source: Option<&str>) -> Check {
    match source {
        Some(s @ ("tsc" | "kvm-clock" | "hyperv_clocksource_tsc_page" | "arch_sys_counter")) => {
            check("clock source", Level::Pass, s.to_string())
        }
        Some(s) => check(
            "clock source",
            Level::Warn,
            format!(
                "{s}: each clock read may cost microseconds; prefer tsc (clocksource=tsc on \
                 the kernel command line, where the CPU's TSC is stable)"
            ),
        ),
        None => check("clock source", Level::Pass, "unknown"),
    }
}

/// GPUs for power and energy.
pub(crate) fn nvml(gpus: Result<usize, crate::gpu::Error>) -> Check {
    match gpus {
        Ok(n) => check("NVML", Level::Pass, format!("{n} GPU(s) visible")),
        Err(e) => check(
            "NVML",
            Level::Warn,
            format!(
                "unavailable ({e}): no GPU power or energy; install the NVIDIA driver here, or \
                 scrape a DCGM exporter with --server-metrics-url"
            ),
        ),
    }
}

/// CPUs other work keeps busy, with the processes that ran there most.
pub(crate) fn busy_cpus(busy: &[crate::host::BusyCpu]) -> Check {
    let hot: Vec<String> = busy
        .iter()
        .filter(|b| b.share >= 0.5)
        .map(|b| {
            let (cpu, share) = (b.cpu, b.share);
            let who: Vec<String> = b
                .owners
                .iter()
                .take(3)
                .map(|(name, s)| format!("{name} {:.0}%", s * 100.0))
                .collect();
            format!("CPU {cpu} {:.0}% busy ({})", share * 100.0, who.join(", "))
        })
        .collect();
    if hot.is_empty() {
        check("busy CPUs", Level::Pass, "no CPU is over half busy")
    } else {
        check(
            "busy CPUs",
            Level::Warn,
            format!(
                "{}: ringperf keeps its shards off busy CPUs (see docs/metrics.md, Placement); \
                 with the server on this host, leave it its CPUs",
                hot.join("; ")
            ),
        )
    }
}

/// The ephemeral port range, from `/proc`.
pub(crate) fn port_range() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = s.split_whitespace().filter_map(|x| x.parse::<u64>().ok());
    Some((it.next()?, it.next()?))
}

/// Every check, on this host, for the run planned.
pub(crate) fn run(p: Planned) -> Vec<Check> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let range = port_range();
    let ring = crate::runtime::build(crate::runtime::Driver::Uring, 8)
        .map(|_| ())
        .map_err(|e| e.to_string());
    let mut governors: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for cpu in crate::cpus::usable_cpus() {
        if let Some(g) = read(&format!(
            "/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
        )) {
            governors.entry(g.trim().to_string()).or_default().push(cpu);
        }
    }
    let source = read("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    vec![
        open_files(p, crate::sys::raise_nofile_limit()),
        ephemeral_ports(p, range),
        io_uring(
            read("/proc/sys/kernel/io_uring_disabled").and_then(|s| s.trim().parse().ok()),
            ring,
        ),
        governor(&governors),
        clock_source(source.as_deref().map(str::trim)),
        nvml(crate::gpu::Nvml::open().and_then(|mut n| {
            use crate::gpu::Source;
            n.gpus().map(|g| g.len())
        })),
        busy_cpus(&crate::host::busy_cpus_with_owners(
            std::time::Duration::from_millis(300),
        )),
    ]
}

/// The report: a line per check, worst first within a stable order.
pub(crate) fn render(checks: &[Check]) -> String {
    let mut out = String::new();
    for c in checks {
        let tag = match c.level {
            Level::Pass => "pass",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        };
        out.push_str(&format!("{tag}  {:<16} {}\n", c.name, c.detail));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Planned = Planned {
        streams: 1000,
        in_process_sim: true,
        host_streams: 1000,
        paths: 1,
    };

    #[test]
    fn each_check_passes_warns_and_fails_where_it_should() {
        assert_eq!(open_files(P, 4096).level, Level::Pass);
        let f = open_files(P, 1024);
        assert_eq!(f.level, Level::Fail);
        assert!(f.detail.contains("ulimit -n 2256"), "{}", f.detail);
        assert_eq!(ephemeral_ports(P, Some((32768, 60999))).level, Level::Pass);
        assert_eq!(ephemeral_ports(P, Some((60000, 61500))).level, Level::Warn);
        let f = ephemeral_ports(P, Some((60000, 60500)));
        assert_eq!(f.level, Level::Fail);
        assert!(f.detail.contains("ip_local_port_range"), "{}", f.detail);
        assert_eq!(io_uring(Some(0), Ok(())).level, Level::Pass);
        assert!(io_uring(Some(2), Err("EPERM".into()))
            .detail
            .contains("io_uring_disabled"));
        let mut g = BTreeMap::new();
        g.insert("powersave".to_string(), vec![0, 1]);
        assert_eq!(governor(&g).level, Level::Warn);
        assert_eq!(governor(&BTreeMap::new()).level, Level::Pass);
        assert_eq!(clock_source(Some("tsc")).level, Level::Pass);
        assert_eq!(clock_source(Some("hpet")).level, Level::Warn);
        assert_eq!(nvml(Err(crate::gpu::Error::NoGpu)).level, Level::Warn);
        let cpu = |cpu, share, owners| crate::host::BusyCpu { cpu, share, owners };
        let busy = busy_cpus(&[cpu(1, 0.97, vec![("vllm".into(), 0.9)])]);
        assert_eq!(busy.level, Level::Warn);
        assert!(
            busy.detail.contains("CPU 1 97% busy (vllm 90%)"),
            "{}",
            busy.detail
        );
        assert_eq!(busy_cpus(&[cpu(0, 0.1, vec![])]).level, Level::Pass);
        let text = render(&[f, busy]);
        assert!(text.starts_with("FAIL  ephemeral ports"), "{text}");
    }

    #[test]
    fn ports_are_counted_per_pair_of_source_and_server() {
        let range = Some((32768, 60999));
        // 100,000 connections from this host's processes: too many for one pair, enough
        // over 12 (6 servers, 2 sources), 8,334 each.
        let p = |host_streams, paths| Planned {
            host_streams,
            paths,
            ..P
        };
        let one = ephemeral_ports(p(100_000, 1), range);
        assert_eq!(one.level, Level::Fail);
        assert!(one.detail.contains("--local-address"), "{}", one.detail);
        assert_eq!(ephemeral_ports(p(100_000, 12), range).level, Level::Pass);
        // 16,667 per pair: more than half the range.
        let six = ephemeral_ports(p(100_000, 6), range);
        assert_eq!(six.level, Level::Warn);
        assert!(six.detail.contains("6 pairs"), "{}", six.detail);
        assert_eq!(ephemeral_ports(p(100_000, 3), range).level, Level::Fail);
    }

    #[test]
    fn loopback_connections_spread_over_enough_sources() {
        let range = 28_232;
        assert!(loopback_sources(14_116, 1, range).is_empty());
        let two = loopback_sources(14_117, 1, range);
        assert_eq!(
            two,
            ["127.0.0.1", "127.0.0.2"].map(|a| a.parse::<std::net::IpAddr>().unwrap())
        );
        // Per server: 100,000 over six servers is 16,667 each, two sources.
        assert_eq!(loopback_sources(100_000, 6, range).len(), 2);
        assert_eq!(loopback_sources(100_000, 1, range).len(), 8);
        // At most 250 sources, whatever the load.
        assert_eq!(loopback_sources(u64::MAX / 2, 1, range).len(), 250);
    }
}
