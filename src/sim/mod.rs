//! `ringperf sim`: a built-in OpenAI-compatible server with known timings.
//!
//! It serves `/v1/chat/completions` and `/v1/completions` (streamed or not, with `usage` when
//! asked), `/v1/models` and `/health`, with the timings given on the command line: time to
//! first token, time between tokens, tokens per event, and a capacity model where at most
//! `--max-batch` streams generate at once, the rest queue, and ITL grows with the batch.
//! Like the client it is thread-per-core on monoio, and it paces tokens with the fine timer
//! against absolute deadlines, so its timings are the truth the client is checked against.
//!
//! Every event carries `x_ringperf_sent_ns`, the `CLOCK_MONOTONIC` time just before it was
//! written; the client subtracts it from the time it read the event to report the delay the
//! client side (kernel included) added.

mod batch;
mod server;

pub use server::{start, SimHandle};

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
