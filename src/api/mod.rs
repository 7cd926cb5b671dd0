//! The API shapes ringperf speaks, for the client and the simulator alike: one place per
//! endpoint kind (its path, its name, the request body it takes) and, in [`openai`], what its
//! responses and events say.
//!
//! Adding an endpoint kind means a variant here (with its path, name and body), its events
//! in [`openai`] if they differ, and its reply in the simulator; the command line lists the
//! kinds from [`Kind::ALL`].

pub mod openai;

use serde::Serialize;
use serde_json::{Map, Value};

/// An endpoint kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completions,
    /// `/v1/embeddings` (never streamed: request latency only).
    Embeddings,
    /// `/v1/responses`, the OpenAI Responses API (typed events such as
    /// `response.output_text.delta`).
    Responses,
    /// Anything else: a body from a template, the text found with a JSON pointer.
    Template,
    /// `/v1/ranking`, NVIDIA NIM's reranking: a query and passages (request latency only).
    #[serde(rename = "nim_rankings")]
    NimRankings,
    /// `/rerank`, Hugging Face TEI's reranking.
    #[serde(rename = "hf_tei_rankings")]
    TeiRankings,
    /// `/v1/rerank`, Cohere's reranking API as vLLM serves it.
    #[serde(rename = "cohere_rankings")]
    CohereRankings,
    /// `/v1/images/generations`, OpenAI's image generation API as SGLang serves it: a prompt
    /// in, images out (request latency and images per second).
    #[serde(rename = "image_generation")]
    ImageGeneration,
}

/// What a kind's successful answer must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Answer {
    /// Generated text (chat, completions, responses, templates).
    #[default]
    Text,
    /// A vector per input (embeddings): nothing is checked beyond the status.
    Vector,
    /// A list of scores (TEI's array, NIM's `rankings`, Cohere's `results`).
    Ranking,
    /// Images in a `data` list, counted as they arrive.
    Images,
}

impl Kind {
    /// Every kind, in the order the command line lists them.
    pub const ALL: [Kind; 9] = [
        Kind::Chat,
        Kind::Completions,
        Kind::Embeddings,
        Kind::Responses,
        Kind::Template,
        Kind::NimRankings,
        Kind::TeiRankings,
        Kind::CohereRankings,
        Kind::ImageGeneration,
    ];

    /// Its name on the command line, in artifacts and folder names.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Chat => "chat",
            Kind::Completions => "completions",
            Kind::Embeddings => "embeddings",
            Kind::Responses => "responses",
            Kind::Template => "template",
            Kind::NimRankings => "nim_rankings",
            Kind::TeiRankings => "hf_tei_rankings",
            Kind::CohereRankings => "cohere_rankings",
            Kind::ImageGeneration => "image_generation",
        }
    }

    /// A sentence for `--help`.
    pub fn about(self) -> &'static str {
        match self {
            Kind::Chat => "/v1/chat/completions",
            Kind::Completions => "/v1/completions",
            Kind::Embeddings => "/v1/embeddings (never streamed: request latency only)",
            Kind::Responses => "/v1/responses, the OpenAI Responses API (typed events)",
            Kind::Template => {
                "anything else: the body from --request-template, the text found with --response-text-pointer (needs --endpoint)"
            }
            Kind::NimRankings => "/v1/ranking, NVIDIA NIM's reranking (request latency only)",
            Kind::TeiRankings => "/rerank, Hugging Face TEI's reranking (request latency only)",
            Kind::CohereRankings => {
                "/v1/rerank, Cohere's reranking API as vLLM serves it (request latency only)"
            }
            Kind::ImageGeneration => {
                "/v1/images/generations (request latency and images per second; never streamed)"
            }
        }
    }

    /// Its path on an OpenAI-compatible server (none for a template: the user gives it).
    pub fn path(self) -> Option<&'static str> {
        match self {
            Kind::Chat => Some("/v1/chat/completions"),
            Kind::Completions => Some("/v1/completions"),
            Kind::Embeddings => Some("/v1/embeddings"),
            Kind::Responses => Some("/v1/responses"),
            Kind::Template => None,
            Kind::NimRankings => Some("/v1/ranking"),
            Kind::TeiRankings => Some("/rerank"),
            Kind::CohereRankings => Some("/v1/rerank"),
            Kind::ImageGeneration => Some("/v1/images/generations"),
        }
    }

    /// The kind served at `path`.
    pub fn at(path: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.path() == Some(path))
    }

    /// The `object` of its responses (`chat.completion`, …).
    pub fn object(self) -> &'static str {
        match self {
            Kind::Chat => "chat.completion",
            Kind::Completions => "text_completion",
            Kind::Embeddings => "list",
            Kind::Responses => "response",
            Kind::Template => "object",
            Kind::NimRankings
            | Kind::TeiRankings
            | Kind::CohereRankings
            | Kind::ImageGeneration => "list",
        }
    }

    /// The prefix of its response ids (`chatcmpl-…`), as OpenAI-compatible servers write them.
    pub fn id_prefix(self) -> &'static str {
        match self {
            Kind::Chat => "chatcmpl",
            Kind::Completions => "cmpl",
            Kind::Embeddings => "embd",
            Kind::Responses => "resp",
            Kind::Template => "gen",
            Kind::NimRankings | Kind::TeiRankings | Kind::CohereRankings => "rerank",
            Kind::ImageGeneration => "img",
        }
    }

    /// What its successful answers hold.
    pub fn answer(self) -> Answer {
        match self {
            Kind::Embeddings => Answer::Vector,
            Kind::NimRankings | Kind::TeiRankings | Kind::CohereRankings => Answer::Ranking,
            Kind::ImageGeneration => Answer::Images,
            Kind::Chat | Kind::Completions | Kind::Responses | Kind::Template => Answer::Text,
        }
    }

    /// Whether it answers with generated text; embeddings, rankings and image generation do
    /// not (request latency only, never streamed).
    pub fn generates(self) -> bool {
        self.answer() == Answer::Text
    }

    /// Whether it ranks passages against a query.
    pub fn ranks(self) -> bool {
        self.answer() == Answer::Ranking
    }

    /// Whether its responses can be streamed.
    pub fn streams(self) -> bool {
        self.generates()
    }
}

/// What one request sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// Plain text (a user message for chat).
    Text(String),
    /// A whole chat history.
    Messages(Vec<Value>),
    /// Several inputs in one request (embeddings' `input` array, `--batch-size-text`).
    Batch(Vec<String>),
}

impl Prompt {
    /// The text, for endpoints that take one: a history's contents, in order.
    pub fn text(&self) -> String {
        match self {
            Prompt::Text(t) => t.clone(),
            Prompt::Messages(msgs) => msgs
                .iter()
                .flat_map(|x| content_texts(x.get("content")))
                .collect::<Vec<_>>()
                .join("\n"),
            Prompt::Batch(texts) => texts.join("\n"),
        }
    }
}

/// The texts of a message's `content`: the string, or the `text` of each text part of a list
/// of parts (images and audio carry none).
pub fn content_texts(content: Option<&Value>) -> Vec<&str> {
    match content {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    }
}

/// How every request body of a run is shaped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Body {
    /// `model` field.
    pub model: String,
    /// The endpoint kind.
    pub kind: Kind,
    /// `stream` field.
    pub streaming: bool,
    /// Send `stream_options.include_usage` with streamed requests.
    pub include_usage: bool,
    /// Also send `min_tokens` equal to `max_tokens`.
    pub min_tokens_too: bool,
    /// Chat asks for its output length with `max_tokens`, not `max_completion_tokens`
    /// (AIPerf's `--use-legacy-max-tokens`).
    #[serde(default)]
    pub legacy_max_tokens: bool,
    /// Extra body fields (`--extra-inputs`).
    pub extra: Map<String, Value>,
    /// A template's text (`Kind::Template`).
    #[serde(skip)]
    pub template: Option<String>,
}

impl Body {
    /// The JSON body of one request for `prompt`, asking for `osl` output tokens.
    pub fn render(&self, prompt: &Prompt, osl: Option<u32>) -> Vec<u8> {
        let mut m = Map::new();
        m.insert("model".into(), Value::String(self.model.clone()));
        match (self.kind, prompt) {
            (k @ (Kind::NimRankings | Kind::TeiRankings | Kind::CohereRankings), p) => {
                // A ranking's prompt is its query, then its passages.
                let (query, passages) = match p {
                    Prompt::Batch(t) if !t.is_empty() => (t[0].clone(), t[1..].to_vec()),
                    p => (p.text(), Vec::new()),
                };
                match k {
                    Kind::NimRankings => {
                        m.insert("query".into(), serde_json::json!({ "text": query }));
                        let all = passages.iter().map(|t| serde_json::json!({ "text": t }));
                        m.insert("passages".into(), Value::Array(all.collect()));
                    }
                    Kind::TeiRankings => {
                        // TEI serves one model and takes none in the body.
                        m.remove("model");
                        m.insert("query".into(), Value::String(query));
                        m.insert("texts".into(), serde_json::json!(passages));
                    }
                    _ => {
                        m.insert("query".into(), Value::String(query));
                        m.insert("documents".into(), serde_json::json!(passages));
                    }
                }
            }
            (Kind::Template, _) => {
                let t = self.template.as_deref().unwrap_or("{}");
                return fill_template(t, &prompt.text(), osl, &self.model);
            }
            (Kind::Embeddings, Prompt::Batch(texts)) => {
                let all = texts.iter().map(|t| Value::String(t.clone())).collect();
                m.insert("input".into(), Value::Array(all));
            }
            (Kind::Embeddings, _) => {
                m.insert("input".into(), Value::String(prompt.text()));
            }
            (Kind::ImageGeneration, p) => {
                // AIPerf's body: one image, as base64 (SGLang answers nothing else);
                // --extra-inputs overrides both (n:4, size:512x512, quality:standard).
                m.insert("prompt".into(), Value::String(p.text()));
                m.insert("response_format".into(), Value::from("b64_json"));
                m.insert("n".into(), Value::from(1));
            }
            (Kind::Responses, p) => {
                let input = match p {
                    Prompt::Messages(msgs) => Value::Array(msgs.clone()),
                    p => Value::String(p.text()),
                };
                m.insert("input".into(), input);
                m.insert("stream".into(), Value::Bool(self.streaming));
                if let Some(n) = osl {
                    m.insert("max_output_tokens".into(), Value::from(n));
                }
            }
            (Kind::Chat | Kind::Completions, p) => {
                match (self.kind, p) {
                    (Kind::Chat, Prompt::Text(t)) => {
                        m.insert(
                            "messages".into(),
                            serde_json::json!([{ "role": "user", "content": t }]),
                        );
                    }
                    (Kind::Chat, Prompt::Messages(msgs)) => {
                        m.insert("messages".into(), Value::Array(msgs.clone()));
                    }
                    (_, p) => {
                        m.insert("prompt".into(), Value::String(p.text()));
                    }
                }
                m.insert("stream".into(), Value::Bool(self.streaming));
                if self.streaming && self.include_usage {
                    m.insert(
                        "stream_options".into(),
                        serde_json::json!({ "include_usage": true }),
                    );
                }
                if let Some(n) = osl {
                    // Chat's field for it is max_completion_tokens, as AIPerf and vLLM send.
                    let key = if self.kind == Kind::Chat && !self.legacy_max_tokens {
                        "max_completion_tokens"
                    } else {
                        "max_tokens"
                    };
                    m.insert(key.into(), Value::from(n));
                    if self.min_tokens_too {
                        m.insert("min_tokens".into(), Value::from(n));
                    }
                }
            }
        }
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        serde_json::to_vec(&Value::Object(m)).expect("serializable")
    }
}

fn fill_template(template: &str, prompt: &str, osl: Option<u32>, model: &str) -> Vec<u8> {
    let q = |s: &str| serde_json::to_string(s).expect("string");
    template
        .replace("{{prompt}}", &q(prompt))
        .replace("{{model}}", &q(model))
        .replace(
            "{{max_tokens}}",
            &osl.map_or("null".to_string(), |n| n.to_string()),
        )
        .into_bytes()
}

/// A request template that cannot be sent.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// No place for the prompt: every request would be the same.
    #[error("has no {{{{prompt}}}} placeholder: ringperf would send the same body every time")]
    NoPrompt,
    /// Not JSON once its placeholders are filled in.
    #[error("is not JSON once filled in: {0}")]
    NotJson(#[source] serde_json::Error),
}

/// Checks a request template: it needs `{{prompt}}`, and must be JSON once filled in.
pub fn check_template(template: &str) -> Result<(), TemplateError> {
    if !template.contains("{{prompt}}") {
        return Err(TemplateError::NoPrompt);
    }
    let filled = fill_template(template, "x", Some(1), "m");
    serde_json::from_slice::<Value>(&filled)
        .map(|_| ())
        .map_err(TemplateError::NotJson)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(kind: Kind, streaming: bool) -> Body {
        Body {
            model: "m".into(),
            kind,
            streaming,
            include_usage: true,
            min_tokens_too: true,
            legacy_max_tokens: false,
            extra: [("ignore_eos".to_string(), Value::Bool(true))]
                .into_iter()
                .collect(),
            template: Some(r#"{"inputs": {{prompt}}, "n": {{max_tokens}}}"#.into()),
        }
    }

    fn json(b: &Body, p: &Prompt) -> Value {
        serde_json::from_slice(&b.render(p, Some(7))).unwrap()
    }

    #[test]
    fn each_kind_renders_its_own_body() {
        let hi = Prompt::Text("hi".into());
        let chat = json(&body(Kind::Chat, true), &hi);
        assert_eq!(chat["messages"][0]["content"], "hi");
        assert_eq!(chat["stream_options"]["include_usage"], true);
        // Chat asks with max_completion_tokens (AIPerf's and vLLM's field), or with
        // max_tokens where the server knows only that one.
        assert_eq!(
            (
                chat["max_completion_tokens"].clone(),
                chat["min_tokens"].clone()
            ),
            (7.into(), 7.into())
        );
        assert!(chat.get("max_tokens").is_none());
        let legacy = Body {
            legacy_max_tokens: true,
            ..body(Kind::Chat, true)
        };
        let old = json(&legacy, &hi);
        assert_eq!(
            (old["max_tokens"].clone(), old.get("max_completion_tokens")),
            (7.into(), None)
        );
        // Completions have one field only.
        let text = json(&body(Kind::Completions, true), &hi);
        assert_eq!(text["max_tokens"], 7);
        assert_eq!(chat["ignore_eos"], true);
        let c = json(&body(Kind::Completions, false), &hi);
        assert_eq!(c["prompt"], "hi");
        assert!(c.get("stream_options").is_none(), "only when streaming");
        let e = json(&body(Kind::Embeddings, false), &hi);
        assert_eq!(
            (e["input"].clone(), e.get("max_tokens")),
            ("hi".into(), None)
        );
        let r = json(&body(Kind::Responses, true), &hi);
        assert_eq!(
            (r["input"].clone(), r["max_output_tokens"].clone()),
            ("hi".into(), 7.into())
        );
        let t = json(&body(Kind::Template, true), &hi);
        assert_eq!(t, serde_json::json!({"inputs": "hi", "n": 7}));
        let batch = Prompt::Batch(vec!["a".into(), "b".into()]);
        assert_eq!(
            json(&body(Kind::Embeddings, false), &batch)["input"],
            serde_json::json!(["a", "b"])
        );
        let img = json(&body(Kind::ImageGeneration, false), &hi);
        assert_eq!(
            img,
            serde_json::json!({"model": "m", "prompt": "hi", "response_format": "b64_json",
                "n": 1, "ignore_eos": true})
        );
        let history = Prompt::Messages(vec![serde_json::json!({"role": "user", "content": "a"})]);
        assert_eq!(
            json(&body(Kind::Chat, true), &history)["messages"][0]["content"],
            "a"
        );
        assert_eq!(
            json(&body(Kind::Completions, true), &history)["prompt"],
            "a"
        );
    }

    #[test]
    fn kinds_and_paths() {
        for k in Kind::ALL {
            if let Some(p) = k.path() {
                assert_eq!(Kind::at(p), Some(k));
            }
        }
        assert_eq!(Kind::at("/v1/other"), None);
        assert!(!Kind::Embeddings.streams());
        let no_prompt = check_template("{}").unwrap_err();
        assert!(matches!(no_prompt, TemplateError::NoPrompt));
        assert_eq!(
            no_prompt.to_string(),
            "has no {{prompt}} placeholder: ringperf would send the same body every time"
        );
        assert!(matches!(
            check_template(r#"{"a": {{prompt}}"#),
            Err(TemplateError::NotJson(_))
        ));
        assert!(check_template(r#"{"a": {{prompt}}}"#).is_ok());
    }
}
