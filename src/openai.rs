//! The OpenAI-compatible wire format: what a streamed event or a whole response says.
//!
//! Decoding uses simd-json's serde front end on the event's own buffer (strings are borrowed,
//! unescaped in place) with per-shard reused scratch buffers, so an event costs no allocation.
//! Only the first choice is kept, as every peer does. Both chat (`delta.content`,
//! `delta.reasoning_content` or `delta.reasoning`) and completions (`text`) shapes decode
//! through the same types; an `error` member may be an object or, as vLLM's 401, a string.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;

/// Token counts the server reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct Usage {
    /// `usage.prompt_tokens`.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens`.
    #[serde(default)]
    pub completion_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    content: Option<&'a str>,
    #[serde(borrow, default)]
    reasoning_content: Option<&'a str>,
    #[serde(borrow, default)]
    reasoning: Option<&'a str>,
}

#[derive(Debug, Default, Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<Message<'a>>,
    #[serde(borrow, default)]
    message: Option<Message<'a>>,
    #[serde(borrow, default)]
    text: Option<&'a str>,
    #[serde(borrow, default)]
    finish_reason: Option<&'a str>,
}

/// `choices`, keeping only the first element without allocating a vector.
#[derive(Debug, Default)]
struct FirstChoice<'a>(Option<Choice<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for FirstChoice<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = FirstChoice<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of choices")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let first = seq.next_element::<Choice<'a>>()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(FirstChoice(first))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(FirstChoice(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// An `error` member: an object with a message, or a bare string.
#[derive(Debug)]
struct ErrorField(String);

impl<'de> Deserialize<'de> for ErrorField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        let text = match &v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Object(m) => match m.get("message") {
                Some(serde_json::Value::String(s)) => s.clone(),
                _ => v.to_string(),
            },
            other => other.to_string(),
        };
        Ok(ErrorField(text))
    }
}

#[derive(Debug, Default, Deserialize)]
struct Wire<'a> {
    #[serde(borrow, default)]
    choices: FirstChoice<'a>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<ErrorField>,
    /// FastAPI-style errors (`{"detail": ...}`), as some servers send.
    #[serde(default)]
    detail: Option<serde_json::Value>,
    /// Set by ringperf's simulator: when the event was written (`CLOCK_MONOTONIC` ns).
    #[serde(default)]
    x_ringperf_sent_ns: Option<u64>,
}

/// What one event (or one whole non-streamed response) says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Payload<'a> {
    /// Generated answer text in this event (chat `content`, completions `text`).
    pub content: &'a str,
    /// Generated reasoning text in this event.
    pub reasoning: &'a str,
    /// `finish_reason`, when set.
    pub finish_reason: Option<&'a str>,
    /// `usage`, when present.
    pub usage: Option<Usage>,
    /// An error the server reported.
    pub error: Option<String>,
    /// The simulator's send stamp.
    pub sent_ns: Option<u64>,
}

/// Why an event could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("invalid JSON in response: {0}")]
pub struct DecodeError(String);

/// Decodes one JSON document (an event's data or a whole body) in place.
pub fn decode<'a>(
    json: &'a mut [u8],
    buffers: &mut simd_json::Buffers,
) -> Result<Payload<'a>, DecodeError> {
    let wire: Wire<'a> = simd_json::serde::from_slice_with_buffers(json, buffers)
        .map_err(|e| DecodeError(e.to_string()))?;
    let choice = wire.choices.0.unwrap_or_default();
    let msg = choice.delta.or(choice.message).unwrap_or_default();
    let error = wire
        .error
        .map(|e| e.0)
        .or_else(|| wire.detail.map(|d| d.to_string()));
    Ok(Payload {
        content: msg.content.or(choice.text).unwrap_or(""),
        reasoning: msg.reasoning_content.or(msg.reasoning).unwrap_or(""),
        finish_reason: choice.finish_reason,
        usage: wire.usage,
        error,
        sent_ns: wire.x_ringperf_sent_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(
        s: &str,
    ) -> (
        String,
        String,
        Option<String>,
        Option<Usage>,
        Option<String>,
    ) {
        let mut b = s.as_bytes().to_vec();
        let mut bufs = simd_json::Buffers::new(256);
        let p = decode(&mut b, &mut bufs).unwrap();
        (
            p.content.to_string(),
            p.reasoning.to_string(),
            p.finish_reason.map(str::to_string),
            p.usage,
            p.error,
        )
    }

    #[test]
    fn chat_delta_with_escapes_and_reasoning() {
        let (c, r, f, u, e) = dec(
            r#"{"choices":[{"index":0,"delta":{"content":"a\"b\n\u00e9","reasoning_content":"hm"},"finish_reason":null},{"index":1,"delta":{"content":"ignored"}}]}"#,
        );
        assert_eq!(c, "a\"b\né");
        assert_eq!(r, "hm");
        assert_eq!((f, u, e), (None, None, None));
        let (_, r, _, _, _) = dec(r#"{"choices":[{"delta":{"reasoning":"new field"}}]}"#);
        assert_eq!(r, "new field");
    }

    #[test]
    fn completions_text_usage_and_finish() {
        let (c, _, f, u, _) = dec(
            r#"{"choices":[{"text":"x","finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":16,"total_tokens":19}}"#,
        );
        assert_eq!(c, "x");
        assert_eq!(f.as_deref(), Some("length"));
        assert_eq!(
            u,
            Some(Usage {
                prompt_tokens: Some(3),
                completion_tokens: Some(16)
            })
        );
    }

    #[test]
    fn usage_only_chunk_and_null_content() {
        let (c, _, _, u, _) =
            dec(r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#);
        assert_eq!(c, "");
        assert!(u.is_some());
        let (c, _, _, _, _) = dec(r#"{"choices":[{"delta":{"role":"assistant","content":null}}]}"#);
        assert_eq!(c, "");
    }

    #[test]
    fn error_shapes() {
        assert_eq!(
            dec(r#"{"error":"Unauthorized"}"#).4.as_deref(),
            Some("Unauthorized")
        );
        assert_eq!(
            dec(r#"{"error":{"code":500,"message":"boom","type":"server_error"}}"#)
                .4
                .as_deref(),
            Some("boom")
        );
        assert_eq!(
            dec(r#"{"object":"error","message":"m","type":"NotFoundError","code":404}"#).4,
            None
        );
        assert!(dec(r#"{"detail":"Not Found"}"#).4.is_some());
    }

    #[test]
    fn bad_json_is_an_error() {
        let mut b = b"{\"choices\": [".to_vec();
        let mut bufs = simd_json::Buffers::new(16);
        assert!(decode(&mut b, &mut bufs).is_err());
    }
}
