//! `ringperf sim`: a built-in OpenAI-compatible server with known timings.
//!
//! It serves `/v1/chat/completions` and `/v1/completions` (streamed or not, with `usage` when
//! asked), `/v1/models` and `/health`, with the timings given on the command line: time to
//! first token, time between tokens, tokens per event, and a capacity model where at most
//! `--max-batch` streams generate at once, the rest queue, and ITL grows with the batch;
//! with `--prefill-per-token` each prompt token adds to TTFT, and with `--prefix-cache` only
//! the tokens after the longest prefix seen before do (whole messages, as a cache of blocks
//! would serve a shared system prompt and a conversation's history).
//! Like the client it is thread-per-core on monoio, and it paces tokens with the fine timer
//! against absolute deadlines, so its timings are the truth the client is checked against.
//!
//! Every event carries `x_ringperf_sent_ns`, the `CLOCK_MONOTONIC` time just before it was
//! written, and a response's first event `x_ringperf_arrived_ns`, when the request reached the
//! kernel; the client subtracts them from its own stamps to report the delay it added on both
//! sides of every request. Like vLLM it tells each request's queue, prefill and decode
//! times: as histograms on `/metrics` and, with `--otlp-traces-endpoint`, as one span per
//! request keyed by the `X-Request-ID` it was sent. The simulator sits beside the engine: it shares the connections,
//! the API shapes and the fine timer with the client, and nothing else.

mod batch;
mod counters;
mod reply;
mod server;
mod trace;

use std::net::SocketAddr;
use std::path::PathBuf;

pub use server::{start, SimHandle};

use crate::runtime::Driver;
use crate::units::TimeDist;

/// The simulator's settings (the command line builds them from `ringperf sim` flags).
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on, `IP:PORT` (port 0 picks a free one).
    pub bind: String,
    /// Model name served; requests for another get vLLM's 404.
    pub model: String,
    /// Time to first token.
    pub ttft: TimeDist,
    /// Time between tokens at an empty batch.
    pub itl: TimeDist,
    /// Tokens sent in each event.
    pub tokens_per_chunk: u32,
    /// Streams generated at once; more queue (0: unlimited).
    pub max_batch: u32,
    /// How much ITL grows at a full batch: ITL × (1 + growth × active / max batch).
    pub itl_growth: f64,
    /// Requests prefilling at once (between admission and their first token); more wait for
    /// a place (0: unlimited).
    pub max_prefill: u32,
    /// Prefill time per prompt token not served from the prefix cache, added to TTFT.
    pub prefill_per_token_ns: u64,
    /// Keep a prefix cache: a prompt whose leading messages (or whole prompt) were seen before
    /// prefills only the rest, and its usage reports the cached tokens.
    pub prefix_cache: bool,
    /// Output length when a request sets no `max_tokens`.
    pub default_max_tokens: u32,
    /// Chance per token, after `min_tokens`, of stopping early.
    pub eos_probability: f64,
    /// Faults to inject, as a failing server would.
    pub faults: Faults,
    /// Ignore `min_tokens` (llama.cpp's behaviour).
    pub ignore_min_tokens: bool,
    /// Stamp the events (`x_ringperf_arrived_ns`, `x_ringperf_sent_ns`); off, it answers as
    /// a real server, with nothing but the payload.
    pub stamps: bool,
    /// Threads.
    pub shards: usize,
    /// CPUs to pin the threads to (empty: not pinned).
    pub cpus: Vec<usize>,
    /// I/O driver.
    pub driver: Driver,
    /// Seed for the random timings.
    pub seed: u64,
    /// Serve https with this PEM certificate chain and key.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Export each request's span to this OTLP/HTTP endpoint, so encoded.
    pub otlp_traces: Option<(String, crate::otlp::Encoding)>,
}

/// The model the simulator serves unless told another.
pub const DEFAULT_MODEL: &str = "ringperf-sim";

/// The faults the simulator injects on purpose (none by default): a server that dies, or
/// that answers some requests with an error status.
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    /// Serve this many generation requests, then stop listening and cut every connection
    /// at the next (0: never).
    pub stop_after: u64,
    /// Answer every this-many-th generation request with `fail_status` (0: never).
    pub fail_every: u64,
    /// The status of those answers.
    pub fail_status: u16,
    /// Their `Retry-After` header (seconds).
    pub retry_after: Option<u32>,
}

/// Why the simulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting is out of range.
    #[error("{0}")]
    Flag(String),
    /// The TLS files are unusable.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The address cannot be listened on.
    #[error("sim: cannot listen on {0}: {1}")]
    Listen(SocketAddr, #[source] std::io::Error),
    /// Something else serves the port asked for.
    #[error("sim: cannot listen on {0}: something already listens there")]
    Taken(SocketAddr),
    /// The span exporter's URL cannot be used.
    #[error(transparent)]
    Traces(#[from] crate::otlp::Error),
    /// A thread could not start.
    #[error("sim: shard {0} failed to start")]
    Start(usize),
    /// The operating system refused a thread or a descriptor.
    #[error("sim: {0}")]
    Io(#[from] std::io::Error),
}

/// Words that are each exactly one token in common BPE vocabularies (Qwen3 included), so the
/// re-tokenized output length equals the number of tokens the simulator generated.
pub const WORDS: [&str; 16] = [
    " the", " of", " and", " to", " in", " is", " that", " for", " it", " as", " with", " was",
    " on", " be", " by", " at",
];

#[cfg(test)]
mod tests {
    #[test]
    fn every_word_is_one_qwen3_token() {
        let tok = crate::workload::Tokenizer::embedded().unwrap();
        for w in super::WORDS {
            assert_eq!(tok.count(w).unwrap(), 1, "{w:?}");
        }
        let text: String = super::WORDS.iter().cycle().take(100).copied().collect();
        assert_eq!(tok.count(&text).unwrap(), 100);
    }
}
