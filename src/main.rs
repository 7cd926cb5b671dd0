//! The `ringperf` binary: parse, run, map errors to an exit code.
#![forbid(unsafe_code)]

use std::io::Write;

fn main() {
    ringperf::internals::clock::mark_process_start();
    ringperf::report::about::set_command_line(std::env::args_os());
    // Signals work from the first instant: Ctrl-C before the run begins stops it too.
    let stop = ringperf::internals::sys::interrupt_flag();
    let cli = match ringperf::cli::port::parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(ringperf::cli::port::ParseError::Clap(e)) => e.exit(),
        Err(ringperf::cli::port::ParseError::Refused(m)) => {
            let _ = writeln!(std::io::stderr(), "error: {m}");
            std::process::exit(2);
        }
    };
    match ringperf::app::run(cli, stop) {
        Ok(0) => {}
        Ok(code) => {
            let _ = std::io::stdout().flush();
            std::process::exit(code);
        }
        Err(e) => {
            let _ = std::io::stdout().flush();
            let _ = writeln!(std::io::stderr(), "error: {e}");
            std::process::exit(e.exit_code());
        }
    }
}
