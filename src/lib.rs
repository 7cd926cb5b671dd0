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
#![deny(unsafe_code)]
#![warn(unreachable_pub)]

pub mod api;
pub mod app;
pub mod arrival;
pub mod artifact;
mod blocking;
pub mod cli;
pub mod clock;
pub mod cpus;
pub mod doctor;
pub mod endpoint;
pub mod engine;
pub mod exchange;
pub mod gpu;
mod host;
pub mod http;
mod net;
pub mod otlp;
pub mod plan;
pub mod preflight;
pub mod prom;
pub mod record;
pub mod redact;
pub mod report;
pub mod runtime;
pub mod server_metrics;
pub mod sim;
pub mod sse;
pub mod stats;
#[allow(unsafe_code)]
pub mod sys;
pub mod telemetry;
mod timer;
mod tls;
pub mod ui;
pub mod units;
pub mod warning;
pub mod workload;
