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
    let mut handles = Vec::with_capacity(usize::from(args.replicas));
    for i in 0..args.replicas {
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
