//! `ringperf sim`: the simulator on its own, one or several replicas, until Ctrl-C.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::Fatal;
use crate::cli::SimArgs;

/// Serves `--replicas` simulators on consecutive ports (each its own free one from port 0),
/// says where, and stops them on Ctrl-C with what each served.
pub(super) fn serve(args: &SimArgs, stop: Arc<AtomicBool>) -> Result<(), Fatal> {
    let cfg = args.config()?;
    if args.replicas == 0 {
        return Err(Fatal::Refused("sim --replicas must be at least 1".into()));
    }
    let first: std::net::SocketAddr = cfg
        .bind
        .parse()
        .map_err(|_| Fatal::Refused(format!("sim --bind {:?}: expected IP:PORT", cfg.bind)))?;
    // One process per replica unless told otherwise, each with its own open-files limit; a
    // process started so serves its part (`mine`) of the replicas.
    let processes = u64::from(args.processes.unwrap_or(args.replicas));
    if processes == 0 || processes > u64::from(args.replicas) {
        return Err(Fatal::Refused(format!(
            "sim --processes must be from 1 to --replicas ({})",
            args.replicas
        )));
    }
    let part = super::workers::sim_part();
    if processes > 1 && part.is_none() {
        return super::workers::sim(processes, &stop);
    }
    let (index, count) = part.unwrap_or((0, 1));
    let share = |i| crate::plan::nodes::share(u64::from(args.replicas), count as usize, i) as u16;
    let first_replica: u16 = (0..index as usize).map(share).sum();
    let mine = first_replica..first_replica + share(index as usize);
    let mut handles = Vec::with_capacity(mine.len());
    for i in mine {
        // Port 0: a free port for each; else the ports after the first.
        let port = match first.port() {
            0 => 0,
            p => p.checked_add(i).ok_or_else(|| {
                Fatal::Refused(format!(
                    "sim --replicas {}: ports past 65535",
                    args.replicas
                ))
            })?,
        };
        let mut one = cfg.clone();
        one.bind = std::net::SocketAddr::new(first.ip(), port).to_string();
        handles.push(crate::sim::start(&one)?);
    }
    crate::sys::interrupt_gracefully();
    for handle in &handles {
        crate::redact::say!(
            "ringperf sim: serving model {:?} on {}://{} ({} driver, {} shard(s); ttft {}, itl {}); Ctrl-C stops",
            cfg.model,
            if cfg.tls.is_some() { "https" } else { "http" },
            handle.addr,
            handle.driver,
            cfg.shards,
            cfg.ttft,
            cfg.itl
        );
        // The chosen port on stdout alone, for scripts that start the simulator on port 0.
        crate::redact::print(&format!("{}\n", handle.addr.port()));
    }
    if part.is_some() {
        // Every port is out: the parent prints this part's now.
        crate::redact::print("ready\n");
    }
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for handle in handles {
        let (requests, events) = handle.served();
        let addr = handle.addr;
        handle.stop();
        crate::redact::say!("ringperf sim: {addr} served {requests} requests, {events} events");
    }
    Ok(())
}
