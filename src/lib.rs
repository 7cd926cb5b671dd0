//! ringperf: a thread-per-core load generator for OpenAI-compatible LLM inference servers.
//!
//! The crate is organised the way a request flows. [`plan`] turns flags into one validated,
//! immutable run plan; [`workload`] builds every request's bytes before the clock starts;
//! [`engine`] runs one pinned monoio runtime per shard, each driving its own connections and
//! recording into its own histograms; the sans-IO layers [`http`], [`sse`], [`openai`] and
//! [`exchange`] turn received bytes into measurements; [`report`] merges the shards and writes
//! what GenAI-Perf and AIPerf users expect. [`sim`] is the built-in server that proves the
//! client's own overhead.
#![deny(missing_docs)]

pub mod api;
pub mod app;
pub mod arrival;
pub mod cli;
pub mod clock;
pub mod cpus;
pub mod engine;
pub mod exchange;
pub mod gpu;
pub mod host;
pub mod http;
pub mod net;
pub mod plan;
pub mod prom;
pub mod record;
pub mod report;
pub mod runtime;
pub mod server_metrics;
pub mod sim;
pub mod sse;
pub mod stats;
pub mod sys;
pub mod telemetry;
pub mod timer;
pub mod tls;
pub mod units;
pub mod workload;
