//! The layers beneath the API, public so that ringperf's own integration tests and benches
//! can drive them (the protocol decoders at every byte split, the engine, the clock, the
//! system calls). Not an API: anything here may change in any release. Inside the crate they
//! are used by their short paths (`crate::http`, …).

#[forbid(unsafe_code)]
#[path = "api/mod.rs"]
pub mod api;

#[forbid(unsafe_code)]
#[path = "clock.rs"]
pub mod clock;

#[forbid(unsafe_code)]
#[path = "cpus.rs"]
pub mod cpus;

#[forbid(unsafe_code)]
#[path = "endpoint.rs"]
pub mod endpoint;

#[forbid(unsafe_code)]
#[path = "engine/mod.rs"]
pub mod engine;

#[forbid(unsafe_code)]
#[path = "exchange.rs"]
pub mod exchange;

#[forbid(unsafe_code)]
#[path = "gpu/mod.rs"]
pub mod gpu;

#[forbid(unsafe_code)]
#[path = "http/mod.rs"]
pub mod http;

#[forbid(unsafe_code)]
#[path = "prom.rs"]
pub mod prom;

#[forbid(unsafe_code)]
#[path = "redact.rs"]
pub mod redact;

#[forbid(unsafe_code)]
#[path = "runtime.rs"]
pub mod runtime;

#[forbid(unsafe_code)]
#[path = "server_metrics.rs"]
pub mod server_metrics;

#[forbid(unsafe_code)]
#[path = "sse.rs"]
pub mod sse;

#[forbid(unsafe_code)]
#[path = "stats.rs"]
pub mod stats;

#[allow(unsafe_code)]
#[path = "sys.rs"]
pub mod sys;

#[forbid(unsafe_code)]
#[path = "workload/mod.rs"]
pub mod workload;
