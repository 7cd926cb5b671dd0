//! The `ringperf` binary: parse, run, map errors to an exit code.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use clap::Parser;

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

extern "C" fn on_sigint(_: libc::c_int) {
    if let Some(s) = STOP.get() {
        s.store(true, Ordering::Relaxed);
    }
    // A second Ctrl-C ends the process at once.
    // SAFETY: signal() is async-signal-safe.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
}

fn main() {
    let cli = ringperf::cli::Cli::parse();
    let stop = STOP
        .get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone();
    // SAFETY: installing a handler that only touches an atomic and calls signal().
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_sigint as *const () as libc::sighandler_t);
    }
    if let Err(e) = ringperf::app::run(cli, stop) {
        let _ = std::io::stdout().flush();
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}
