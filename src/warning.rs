//! Warnings with stable codes: what a run says beside its figures, as a person reads it and as
//! a CI job tells one from another (`--fail-on warning:CODE`). The JSON carries each as
//! `{"code": …, "message": …}`; the console prints the code after the message.

use serde::{Deserialize, Serialize};

macro_rules! codes {
    ($($(#[doc = $doc:literal])+ $name:ident = $text:literal,)+) => {
        /// What a warning is about. A code's text never changes once published.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Code {
            $($(#[doc = $doc])+ $name,)+
        }

        impl Code {
            /// Every code, in the order documented.
            pub const ALL: &'static [Code] = &[$(Code::$name,)+];

            /// The code as written in the JSON and on `--fail-on`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$name => $text,)+
                }
            }
        }
    };
}

codes! {
    /// Measured requests failed: the share, the kinds and their shape in time.
    RequestsFailed = "requests_failed",
    /// The client may have limited the run (a shard's CPU, its refill turnaround).
    ClientLimited = "client_limited",
    /// The client distorted some timings (its reads waited without kernel stamps, or merged
    /// events beyond a figure's resolution).
    ClientDistorted = "client_distorted",
    /// The client kept up, with a caveat that moves no reported figure.
    ClientCaveat = "client_caveat",
    /// The built-in simulator fell behind its own schedule.
    SimulatorStalled = "simulator_stalled",
    /// A shard failed, or could not be moved off a busy CPU.
    ShardTrouble = "shard_trouble",
    /// Requests left later than scheduled.
    DispatchDelay = "dispatch_delay",
    /// The achieved send rate fell short of the schedule's.
    SendRateShort = "send_rate_short",
    /// Failures past each shard's per-second allowance were counted, not written one by one.
    FailuresOnlyCounted = "failures_only_counted",
    /// The server answered as another model than the one asked.
    ServedModelDiffers = "served_model_differs",
    /// Output lengths were off the requested `max_tokens`.
    OutputLengthOff = "output_length_off",
    /// The server's usage counted the tokens of one choice of several.
    UsageOfOneChoice = "usage_of_one_choice",
    /// The server closed its connection after responses.
    ServerClosedConnections = "server_closed_connections",
    /// The server's prompt token counts differ from the tokenizer's.
    PromptTokensDiffer = "prompt_tokens_differ",
    /// The tokenizer's output token counts differ from the server's.
    OutputTokensDiffer = "output_tokens_differ",
    /// Successful requests counted no output token.
    NoOutputTokens = "no_output_tokens",
    /// Streamed responses came in one chunk (no inter-token latency).
    OneChunkResponses = "one_chunk_responses",
    /// A goodput objective's metric was never measured.
    GoodputUnmeasured = "goodput_unmeasured",
    /// The server's prefix cache served most prompts.
    PrefixCacheHits = "prefix_cache_hits",
    /// `--reset-prefix-cache` did not empty the server's cache.
    PrefixCacheNotReset = "prefix_cache_not_reset",
    /// Prompt tokens of a file's requests were left uncounted (a stop cut the counting short).
    PromptsUncounted = "prompts_uncounted",
    /// A node of a merged run is missing, or started late.
    NodeMissingOrLate = "node_missing_or_late",
}

impl Code {
    /// The code of `text`, as written on `--fail-on warning:CODE`.
    pub fn parse(text: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|c| c.as_str() == text)
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One warning: its code and what it says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    /// What it is about.
    pub code: Code,
    /// What it says, for a person.
    pub message: String,
}

impl Warning {
    /// A warning of `code` saying `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Warning {
        Warning {
            code,
            message: message.into(),
        }
    }
}

/// A warning reads as its message.
impl std::ops::Deref for Warning {
    type Target = str;

    fn deref(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} [{}]", self.message, self.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_back_and_serialize_as_written() {
        for c in Code::ALL {
            assert_eq!(Code::parse(c.as_str()), Some(*c));
            assert_eq!(
                serde_json::to_value(c).unwrap(),
                serde_json::json!(c.as_str())
            );
        }
        assert_eq!(Code::parse("client-limited"), None);
        // Each code is documented where users read about gates.
        let doc = include_str!("../docs/running.md");
        for c in Code::ALL {
            assert!(doc.contains(&format!("`{c}`")), "docs/running.md lacks {c}");
        }
        let w = Warning::new(Code::ClientLimited, "shard 0 was at 97% CPU");
        assert_eq!(w.to_string(), "shard 0 was at 97% CPU [client_limited]");
        assert!(w.contains("97%"));
        assert_eq!(
            serde_json::to_value(&w).unwrap(),
            serde_json::json!({"code": "client_limited", "message": "shard 0 was at 97% CPU"})
        );
    }
}
