//! ringperf's integration tests, in one binary (it links the crate once): real sockets on
//! loopback, the real simulator, real captures, real TLS with certificates made at test time.
//!
//! By theme: `protocol` (real vLLM and llama.cpp captures at every byte split), `e2e` (the
//! simulator over loopback), `faults`, `cli` (the binary as a user runs it), `tls`,
//! `open_loop`, `datasets`, `endpoints`, `sessions`, `telemetry`, `placement` (placement and
//! starvation), `layers` (the import rule). Tests that assert timings hold
//! [`support::timing_lock`], so nothing else that asserts timings runs beside them on a 2-core
//! machine.

mod cli;
mod datasets;
mod e2e;
mod endpoints;
mod faults;
mod layers;
mod open_loop;
mod placement;
mod protocol;
mod sessions;
mod support;
mod telemetry;
mod tls;
