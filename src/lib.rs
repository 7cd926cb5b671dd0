//! ringperf: a thread-per-core load generator for OpenAI-compatible LLM inference servers.
//!
//! The crate is organised the way a request flows: [`cli`] turns flags into a plain
//! [`plan::Spec`]; [`plan`] validates it and prepares every request before the clock starts;
//! [`engine`] places its shards from what the host is doing and runs one monoio runtime per
//! shard, each driving its own connections; the sans-IO layers [`http`], [`sse`],
//! [`api::openai`] and [`exchange`] turn received bytes into [`record`]s; [`report`] merges
//! them and writes what GenAI-Perf and AIPerf users expect. [`sim`] is the built-in server,
//! beside the engine, that proves the client's own overhead. Imports point one way; see the
//! *Code layout* in `docs/design.md`.
#![deny(missing_docs)]
// No unsafe code in the crate root; none at all (forbid: no inner allow can lift it) in every
// module but `sys`, which wraps the system calls the standard library lacks.
#![deny(unsafe_code)]
#![warn(unreachable_pub)]

#[forbid(unsafe_code)]
pub mod api;
#[forbid(unsafe_code)]
pub mod app;
#[forbid(unsafe_code)]
pub mod arrival;
#[forbid(unsafe_code)]
pub mod artifact;
#[forbid(unsafe_code)]
mod blocking;
#[forbid(unsafe_code)]
pub mod cli;
#[forbid(unsafe_code)]
pub mod clock;
#[forbid(unsafe_code)]
pub mod cpus;
#[forbid(unsafe_code)]
mod doctor;
#[forbid(unsafe_code)]
pub mod endpoint;
#[forbid(unsafe_code)]
pub mod engine;
#[forbid(unsafe_code)]
pub mod exchange;
#[forbid(unsafe_code)]
pub mod gpu;
#[forbid(unsafe_code)]
mod host;
#[forbid(unsafe_code)]
pub mod http;
#[forbid(unsafe_code)]
mod net;
#[forbid(unsafe_code)]
pub mod otlp;
#[forbid(unsafe_code)]
pub mod plan;
#[forbid(unsafe_code)]
mod preflight;
#[forbid(unsafe_code)]
pub mod prom;
#[forbid(unsafe_code)]
pub mod record;
#[forbid(unsafe_code)]
pub mod redact;
#[forbid(unsafe_code)]
pub mod report;
#[forbid(unsafe_code)]
pub mod runtime;
#[forbid(unsafe_code)]
pub mod server_metrics;
#[forbid(unsafe_code)]
pub mod sim;
#[forbid(unsafe_code)]
pub mod sse;
#[forbid(unsafe_code)]
pub mod stats;
#[allow(unsafe_code)]
pub mod sys;
#[forbid(unsafe_code)]
pub mod telemetry;
#[forbid(unsafe_code)]
mod timer;
#[forbid(unsafe_code)]
mod tls;
#[forbid(unsafe_code)]
mod ui;
#[forbid(unsafe_code)]
pub mod units;
#[forbid(unsafe_code)]
pub mod warning;
#[forbid(unsafe_code)]
pub mod workload;
