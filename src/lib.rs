//! ringperf: a thread-per-core load generator for OpenAI-compatible LLM inference servers.
//!
//! The crate is organised the way a request flows: [`cli`] turns flags into a plain
//! [`plan::Spec`]; [`plan`] validates it and prepares every request before the clock starts;
//! the engine places its shards from what the host is doing and runs one monoio runtime per
//! shard, each driving its own connections; the sans-IO layers (HTTP, the event stream, the
//! API payloads, the exchange) turn received bytes into [`record`]s; [`report`] merges them
//! and writes what GenAI-Perf and AIPerf users expect. [`sim`] is the built-in server, beside
//! the engine, that proves the client's own overhead; [`app`] runs each command. Imports point
//! one way; see the *Code layout* in `docs/design.md`.
//!
//! The API is those modules and [`warning`]. The layers beneath them are public only in
//! [`internals`], for ringperf's own integration tests and benches.
#![deny(missing_docs)]
// No unsafe code in the crate root; none at all (forbid: no inner allow can lift it) in every
// module but `sys`, which wraps the system calls the standard library lacks.
#![deny(unsafe_code)]
#![warn(unreachable_pub)]

#[forbid(unsafe_code)]
pub mod app;
#[forbid(unsafe_code)]
mod arrival;
#[forbid(unsafe_code)]
mod artifact;
#[forbid(unsafe_code)]
mod blocking;
#[forbid(unsafe_code)]
pub mod cli;
#[forbid(unsafe_code)]
mod doctor;
#[forbid(unsafe_code)]
mod host;
#[forbid(unsafe_code)]
mod net;
#[forbid(unsafe_code)]
mod otlp;
#[forbid(unsafe_code)]
pub mod plan;
#[forbid(unsafe_code)]
mod preflight;
#[forbid(unsafe_code)]
pub mod record;
#[forbid(unsafe_code)]
pub mod report;
#[forbid(unsafe_code)]
pub mod sim;
#[forbid(unsafe_code)]
mod telemetry;
#[forbid(unsafe_code)]
mod timer;
#[forbid(unsafe_code)]
mod tls;
#[forbid(unsafe_code)]
mod ui;
#[forbid(unsafe_code)]
mod units;
#[forbid(unsafe_code)]
pub mod warning;

pub mod internals;

pub(crate) use internals::{
    api, clock, cpus, endpoint, engine, exchange, gpu, http, prom, redact, runtime, server_metrics,
    sse, stats, sys, workload,
};
