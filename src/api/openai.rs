//! The OpenAI-compatible wire format: what a streamed event or a whole response says.
//!
//! Decoding works in the event's own buffer (strings are borrowed, unescaped in place), so an
//! event costs no allocation. The common event (`choices`, `usage`) is read in one pass by a
//! small checking reader (`scan`); anything else goes to simd-json and its serde front end,
//! with per-shard reused scratch buffers. Only the first choice is kept, as every peer does.
//! Both chat (`delta.content`, `delta.reasoning_content` or `delta.reasoning`) and completions
//! (`text`) shapes decode through the same types; an `error` member may be an object or, as
//! vLLM's 401, a string.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;

mod images;
mod scan;

pub use images::{ImageScan, Images};

/// Token counts the server reported (chat and completions names; the Responses API's
/// `input_tokens`/`output_tokens` read into the same fields).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct Usage {
    /// `usage.prompt_tokens`.
    #[serde(default, alias = "input_tokens")]
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens`.
    #[serde(default, alias = "output_tokens")]
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens` (the Responses API's
    /// `input_tokens_details`): prompt tokens the server's prefix (prompt) cache served.
    #[serde(
        default,
        rename = "prompt_tokens_details",
        alias = "input_tokens_details",
        deserialize_with = "cached_tokens"
    )]
    pub cached_tokens: Option<u64>,
}

/// `prompt_tokens_details`: `null`, or an object whose `cached_tokens` is read.
fn cached_tokens<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    struct Details {
        #[serde(default)]
        cached_tokens: Option<u64>,
    }
    Ok(Option::<Details>::deserialize(d)?.and_then(|x| x.cached_tokens))
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

/// The `response` object of `response.completed` (and of a non-streamed response).
#[derive(Debug, Default, Deserialize)]
struct ResponseObject {
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<ErrorField>,
}

/// Text parts of a non-streamed Responses API `output`.
#[derive(Debug, Default, Deserialize)]
struct OutputItem<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<&'a str>,
    #[serde(borrow, default)]
    content: Vec<OutputPart<'a>>,
}

#[derive(Debug, Default, Deserialize)]
struct OutputPart<'a> {
    #[serde(borrow, default)]
    text: Option<&'a str>,
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
    /// Set by ringperf's simulator on a response's first event: when the request reached its
    /// kernel (`CLOCK_MONOTONIC` ns).
    #[serde(default)]
    x_ringperf_arrived_ns: Option<u64>,
    /// Responses API: the event type (`response.output_text.delta`, …).
    #[serde(borrow, default, rename = "type")]
    kind: Option<&'a str>,
    /// Responses API: the text of a delta event.
    #[serde(borrow, default)]
    delta: Option<&'a str>,
    /// Responses API: the response of `response.completed`/`response.failed`.
    #[serde(default)]
    response: Option<ResponseObject>,
    /// Responses API, not streamed: output items.
    #[serde(borrow, default)]
    output: Option<Vec<OutputItem<'a>>>,
    /// Responses API `error` events carry their message at the top level.
    #[serde(borrow, default)]
    message: Option<&'a str>,
}

/// What one event (or one whole non-streamed response) says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Payload<'a> {
    /// Generated answer text in this event (chat `content`, completions `text`).
    pub content: Cow<'a, str>,
    /// Generated reasoning text in this event.
    pub reasoning: Cow<'a, str>,
    /// `finish_reason`, when set.
    pub finish_reason: Option<&'a str>,
    /// `usage`, when present.
    pub usage: Option<Usage>,
    /// An error the server reported.
    pub error: Option<String>,
    /// The simulator's send stamp.
    pub sent_ns: Option<u64>,
    /// The simulator's stamp of the request's arrival.
    pub arrived_ns: Option<u64>,
}

/// Why an event could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("invalid JSON in response: {0}")]
pub struct DecodeError(String);

/// Decoding state kept from one document to the next: simd-json's buffers and tape (once they
/// have grown to the largest document, decoding allocates nothing), and the shape of the last
/// event read in full, for events that differ from it only in their values.
pub struct Json {
    buffers: simd_json::Buffers,
    tape: simd_json::Tape<'static>,
    shape: scan::Shape,
}

impl Default for Json {
    fn default() -> Json {
        Json {
            buffers: simd_json::Buffers::new(4096),
            tape: simd_json::Tape(Vec::new()),
            shape: scan::Shape::default(),
        }
    }
}

/// Decodes one JSON document (an event's data or a whole body) where it lies: string escapes
/// are rewritten in place (and simd-json's padding appended when it reads the document), so
/// the bytes are spent afterwards.
pub fn decode<'a>(json: &'a mut Vec<u8>, j: &mut Json) -> Result<Payload<'a>, DecodeError> {
    if let Some(e) = scan::read(json) {
        return Ok(scan::payload(json, e));
    }
    decode_general(json, j)
}

/// Decodes one JSON document that may not be changed: the common event, whose kept strings
/// hold no escapes, is read where it lies; any other is first copied into `copy` and decoded
/// there as by [`decode`].
pub fn decode_from<'a>(
    json: &'a [u8],
    copy: &'a mut Vec<u8>,
    j: &mut Json,
) -> Result<Payload<'a>, DecodeError> {
    let event = j.shape.read(json);
    if let Some(e) = event.filter(|e| !e.escaped()) {
        return Ok(scan::borrowed(json, e));
    }
    let copy = copied(json, copy);
    match event {
        Some(e) => Ok(scan::payload(copy, e)),
        None => decode_general(copy, j),
    }
}

/// `json` copied into `copy`, with room for simd-json's padding.
pub(crate) fn copied<'a>(json: &[u8], copy: &'a mut Vec<u8>) -> &'a mut Vec<u8> {
    copy.clear();
    copy.reserve(json.len() + simd_json::INPUT_PADDING);
    copy.extend_from_slice(json);
    copy
}

/// [`decode`] for what the one-pass reader declines: simd-json, then serde. Public as the
/// reference that the fuzz targets hold the fast paths to.
#[doc(hidden)]
pub fn decode_general<'a>(json: &'a mut Vec<u8>, j: &mut Json) -> Result<Payload<'a>, DecodeError> {
    let len = json.len();
    json.resize(len + simd_json::INPUT_PADDING, b' ');
    let json: &'a mut [u8] = json;
    let mut tape = std::mem::replace(&mut j.tape, simd_json::Tape(Vec::new())).reset();
    let filled = simd_json::fill_tape_padded(json, len, &mut j.buffers, &mut tape);
    let mut de = simd_json::Deserializer::from_tape(tape);
    let wire = filled.and_then(|()| Wire::deserialize(&mut de));
    j.tape = de.into_tape().reset();
    let wire = wire.map_err(|e| DecodeError(e.to_string()))?;
    let choice = wire.choices.0.unwrap_or_default();
    let msg = choice.delta.or(choice.message).unwrap_or_default();
    let mut p = Payload {
        content: Cow::Borrowed(msg.content.or(choice.text).unwrap_or("")),
        reasoning: Cow::Borrowed(msg.reasoning_content.or(msg.reasoning).unwrap_or("")),
        finish_reason: choice.finish_reason,
        usage: wire.usage,
        error: wire
            .error
            .map(|e| e.0)
            .or_else(|| wire.detail.map(|d| d.to_string())),
        sent_ns: wire.x_ringperf_sent_ns,
        arrived_ns: wire.x_ringperf_arrived_ns,
    };
    // The Responses API: typed events, or a whole response with `output` items.
    match wire.kind {
        Some("response.output_text.delta") => p.content = Cow::Borrowed(wire.delta.unwrap_or("")),
        Some("response.reasoning_text.delta" | "response.reasoning_summary_text.delta") => {
            p.reasoning = Cow::Borrowed(wire.delta.unwrap_or(""))
        }
        Some("response.completed" | "response.incomplete") => {
            if let Some(r) = wire.response {
                p.usage = r.usage.or(p.usage);
                p.finish_reason = Some(if wire.kind == Some("response.completed") {
                    "completed"
                } else {
                    "incomplete"
                });
            }
        }
        Some("response.failed") => {
            let e = wire.response.and_then(|r| r.error).map(|e| e.0);
            p.error = Some(e.unwrap_or_else(|| "response.failed".into()));
        }
        Some("error") => p.error = Some(wire.message.unwrap_or("error event").to_string()),
        _ => {}
    }
    for item in wire.output.iter().flatten() {
        let text = item.content.iter().find_map(|c| c.text).unwrap_or("");
        match item.kind {
            Some("reasoning") if p.reasoning.is_empty() => p.reasoning = Cow::Borrowed(text),
            Some("message") if p.content.is_empty() => p.content = Cow::Borrowed(text),
            _ => {}
        }
    }
    Ok(p)
}

/// JSON pointers (RFC 6901) to the generated text and, optionally, the output token count,
/// for servers outside the OpenAI shapes (`--endpoint-type template`: TGI, Triton, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pointers {
    /// Where each event's (or the whole body's) new text is, e.g. `/token/text`.
    pub text: String,
    /// Where the output token count is, e.g. `/details/generated_tokens`.
    pub tokens: Option<String>,
}

fn lookup<'v, 'a>(
    mut v: &'v simd_json::BorrowedValue<'a>,
    pointer: &str,
) -> Option<&'v simd_json::BorrowedValue<'a>> {
    for raw in pointer.split('/').skip(1) {
        let key = raw.replace("~1", "/").replace("~0", "~");
        v = match v {
            simd_json::BorrowedValue::Object(o) => o.get(key.as_str())?,
            simd_json::BorrowedValue::Array(a) => a.get(key.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(v)
}

/// Decodes one document through `pointers`; an `error` member is reported as a server error.
pub fn decode_with<'a>(
    json: &'a mut [u8],
    j: &mut Json,
    pointers: &Pointers,
) -> Result<Payload<'a>, DecodeError> {
    use simd_json::prelude::*;
    let v = simd_json::to_borrowed_value_with_buffers(json, &mut j.buffers)
        .map_err(|e| DecodeError(e.to_string()))?;
    let text = lookup(&v, &pointers.text)
        .and_then(|t| t.as_str())
        .unwrap_or("");
    let tokens = pointers
        .tokens
        .as_deref()
        .and_then(|p| lookup(&v, p))
        .and_then(|t| t.as_u64());
    let error = v.get("error").map(|e| match e.as_str() {
        Some(s) => s.to_string(),
        None => e
            .get("message")
            .and_then(|m| m.as_str())
            .map_or_else(|| e.encode(), str::to_string),
    });
    Ok(Payload {
        content: Cow::Owned(text.to_string()),
        reasoning: Cow::Borrowed(""),
        finish_reason: None,
        usage: tokens.map(|t| Usage {
            completion_tokens: Some(t),
            ..Usage::default()
        }),
        error,
        sent_ns: v.get("x_ringperf_sent_ns").and_then(|x| x.as_u64()),
        arrived_ns: v.get("x_ringperf_arrived_ns").and_then(|x| x.as_u64()),
    })
}

/// The longest model name kept from a response, in bytes.
const MODEL_CAP: usize = 1024;

/// The first `"model": "…"` value in a response's (or an event's) bytes: the model the
/// server says answered, whatever was asked. Off the hot path: a shard asks its first events.
pub fn named_model(raw: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(raw);
    let at = text.find("\"model\"")? + "\"model\"".len();
    let rest = text[at..].trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let end = rest.find('"')?;
    // Kept as named, to be told from the id asked (shown through `redact::model_shown`);
    // a name longer than any model's path is cut.
    let mut end = end.min(MODEL_CAP);
    while !rest.is_char_boundary(end) {
        end -= 1;
    }
    Some(crate::redact::scrub(&rest[..end]).into_owned()).filter(|m| !m.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_a_response_names() {
        let chunk =
            b"HTTP/1.1 200 OK\r\n\r\ndata: {\"id\":\"x\",\"model\":\"tiny-qwen3\",\"choices\":[]}";
        assert_eq!(named_model(chunk).as_deref(), Some("tiny-qwen3"));
        assert_eq!(
            named_model(br#"{"object": "chat.completion", "model" : "a/b"}"#).as_deref(),
            Some("a/b")
        );
        assert_eq!(named_model(br#"{"model": ""}"#), None);
        assert_eq!(named_model(br#"{"choices": []}"#), None);
    }

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
        let mut bufs = Json::default();
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
                completion_tokens: Some(16),
                cached_tokens: None,
            })
        );
    }

    #[test]
    fn cached_prompt_tokens_are_read_from_the_usage_details() {
        for (doc, want) in [
            (
                r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":16,"prompt_tokens_details":{"cached_tokens":8}}}"#,
                Some(8),
            ),
            (
                r#"{"choices":[],"usage":{"input_tokens":9,"output_tokens":1,"input_tokens_details":{"cached_tokens":0}}}"#,
                Some(0),
            ),
            (
                r#"{"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens_details":null}}"#,
                None,
            ),
            (
                r#"{"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens_details":{"audio_tokens":2}}}"#,
                None,
            ),
        ] {
            let (_, _, _, u, _) = dec(doc);
            assert_eq!(u.unwrap().cached_tokens, want, "{doc}");
        }
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
    fn responses_api_events_and_whole_response() {
        let (c, _, _, _, _) = dec(
            r#"{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"Hel","sequence_number":4}"#,
        );
        assert_eq!(c, "Hel");
        let (_, r, _, _, _) = dec(r#"{"type":"response.reasoning_text.delta","delta":"think"}"#);
        assert_eq!(r, "think");
        let (c, _, f, u, _) = dec(
            r#"{"type":"response.completed","response":{"id":"r","status":"completed","usage":{"input_tokens":9,"output_tokens":16,"total_tokens":25}}}"#,
        );
        assert_eq!(c, "");
        assert_eq!(f.as_deref(), Some("completed"));
        assert_eq!(
            u,
            Some(Usage {
                prompt_tokens: Some(9),
                completion_tokens: Some(16),
                cached_tokens: None,
            })
        );
        let (_, _, _, _, e) = dec(r#"{"type":"error","code":"server_error","message":"boom"}"#);
        assert_eq!(e.as_deref(), Some("boom"));
        let (_, _, _, _, e) =
            dec(r#"{"type":"response.failed","response":{"error":{"code":"x","message":"bad"}}}"#);
        assert_eq!(e.as_deref(), Some("bad"));
        let (c, r, _, u, _) = dec(
            r#"{"id":"r","object":"response","output":[{"type":"reasoning","content":[{"type":"reasoning_text","text":"hmm"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi there"}]}],"usage":{"input_tokens":3,"output_tokens":2}}"#,
        );
        assert_eq!((c.as_str(), r.as_str()), ("Hi there", "hmm"));
        assert_eq!(u.unwrap().completion_tokens, Some(2));
    }

    #[test]
    fn json_pointers_for_tgi_and_triton_shapes() {
        let ptr = Pointers {
            text: "/token/text".into(),
            tokens: Some("/details/generated_tokens".into()),
        };
        let mut b = br#"{"index":1,"token":{"id":5,"text":" world","logprob":-0.1,"special":false},"generated_text":null,"details":null}"#.to_vec();
        let mut bufs = Json::default();
        let p = decode_with(&mut b, &mut bufs, &ptr).unwrap();
        assert_eq!(p.content, " world");
        assert_eq!(p.usage, None);
        let mut b = br#"{"token":{"text":"!"},"generated_text":"Hello world!","details":{"finish_reason":"length","generated_tokens":3}}"#.to_vec();
        let p = decode_with(&mut b, &mut bufs, &ptr).unwrap();
        assert_eq!(p.usage.unwrap().completion_tokens, Some(3));
        let ptr = Pointers {
            text: "/text_output".into(),
            tokens: None,
        };
        let mut b = br#"{"model_name":"m","text_output":"a~b"}"#.to_vec();
        assert_eq!(decode_with(&mut b, &mut bufs, &ptr).unwrap().content, "a~b");
        let mut b = br#"{"error":"Input validation error"}"#.to_vec();
        assert_eq!(
            decode_with(&mut b, &mut bufs, &ptr)
                .unwrap()
                .error
                .as_deref(),
            Some("Input validation error")
        );
    }

    /// One [`Json`] decodes document after document, large and small, after a failure too,
    /// exactly as a fresh one does.
    #[test]
    fn reused_json_memory_decodes_each_document_as_a_fresh_one_would() {
        let long = "x\\n\\u00e9\\ud83d\\ude00".repeat(2000);
        let docs = [
            format!(r#"{{"choices":[{{"delta":{{"content":"{long}"}},"finish_reason":null}}]}}"#),
            r#"{"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":3}}"#.into(),
            r#"{"choices":[{"delta":{"content":"#.into(),
            r#"{"choices":[{"text":"b\"c","finish_reason":"stop"}]}"#.into(),
        ];
        let run = |d: &String, j: &mut Json| {
            let mut b = d.clone().into_bytes();
            decode(&mut b, j)
                .map(|p| {
                    let finish = p.finish_reason.map(str::to_string);
                    (p.content.into_owned(), finish, p.usage)
                })
                .map_err(|e| e.to_string())
        };
        let fresh = |d: &String| run(d, &mut Json::default());
        let mut j = Json::default();
        for d in docs.iter().chain(docs.iter().rev()) {
            assert_eq!(run(d, &mut j), fresh(d), "{}", &d[..d.len().min(60)]);
        }
        assert_eq!(fresh(&docs[0]).unwrap().0, "x\né😀".repeat(2000));
        assert!(fresh(&docs[2]).is_err());
    }

    #[test]
    fn bad_json_is_an_error() {
        let mut b = b"{\"choices\": [".to_vec();
        let mut bufs = Json::default();
        assert!(decode(&mut b, &mut bufs).is_err());
    }
}
