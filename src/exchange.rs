//! One request's response, observed: HTTP framing → SSE events → OpenAI payloads → a record.
//!
//! [`Exchange`] is sans-IO like the layers it joins: the connection driver hands it each
//! read's bytes with the read's timestamp, and it writes what they mean into the request's
//! [`Record`]. Every event in one read gets that read's timestamp (events that arrived together
//! are seen together; their gap is recorded as zero).
//!
//! A *content event* is one that carries non-empty generated text or reasoning text; the role
//! chunk, empty-text chunks (vLLM's `ignore_eos` tail) and usage-only chunks are not.

use crate::api::openai::{self, ImageScan, Images};
use crate::api::Answer;
use crate::http::response::{Head, Parser, Part};
use crate::http::ProtocolError;
use crate::record::{Outcome, Phase, Record};
use crate::stats::Dist;

/// Bodies of non-streamed responses are kept up to this size: a larger successful body is
/// `body_too_large`; of an error body, the first bytes are enough for its message.
const BODY_LIMIT: usize = 4 << 20;
/// One request in this many keeps its text even with server usage, so the run can check the
/// tokenizer against the server's counts.
const TOKENIZER_CHECK_EVERY: u64 = 16;
/// Text buffers up to this size are kept for the next requests (a few thousand tokens).
const SPARE_TEXT_MAX: usize = 16 << 10;
/// Error texts in records are cut to this many bytes.
const ERROR_TEXT_LIMIT: usize = 512;

/// Per-shard scratch space shared by every exchange on the shard.
pub struct Scratch {
    /// simd-json's reusable memory.
    pub json: openai::Json,
    /// Where an event is copied when it must be decoded in a buffer of its own.
    pub(crate) doc: Vec<u8>,
    /// Distribution of `seen − sent` for simulator-stamped events of measured requests.
    pub client_delay: Dist,
    /// JSON pointers for non-OpenAI servers (`--endpoint-type template`).
    pub pointers: Option<openai::Pointers>,
    /// What a successful response must hold.
    pub answer: Answer,
    /// Emptied text buffers of finished requests that did not keep their text, for the next
    /// ones to fill without growing a new one token by token.
    pub(crate) spare_texts: Vec<String>,
    /// The model the server's responses name, read from the first events that name one.
    pub served_model: Option<String>,
    /// Events looked at for a model name so far (a server that names none is asked
    /// [`MODEL_TRIES`] times, then left alone).
    pub(crate) model_tries: u8,
}

/// Events scanned for the model a server names before giving up on one that names none.
const MODEL_TRIES: u8 = 8;

impl Scratch {
    /// Decodes a whole body, where it lies.
    fn decode<'a>(
        &mut self,
        json: &'a mut Vec<u8>,
    ) -> Result<openai::Payload<'a>, openai::DecodeError> {
        match &self.pointers {
            Some(p) => openai::decode_with(json, &mut self.json, p),
            None => openai::decode(json, &mut self.json),
        }
    }
}

/// Decodes an event's data, which stays as it is: the common event is read where it lies
/// (see [`openai::decode_from`]), any other from a copy in `doc`.
fn decode_event<'a>(
    data: &'a [u8],
    doc: &'a mut Vec<u8>,
    json: &mut openai::Json,
    pointers: Option<&openai::Pointers>,
) -> Result<openai::Payload<'a>, openai::DecodeError> {
    match pointers {
        None => openai::decode_from(data, doc, json),
        Some(p) => openai::decode_with(openai::copied(data, doc), json, p),
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            json: openai::Json::default(),
            doc: Vec::new(),
            client_delay: Dist::new(),
            pointers: None,
            answer: Answer::Text,
            spare_texts: Vec::new(),
            served_model: None,
            model_tries: 0,
        }
    }
}

/// Decoding state of one response.
#[derive(Default)]
pub struct Exchange {
    parser: Parser,
    framer: crate::sse::Framer,
    body: Vec<u8>,
    /// Image generation: the 2xx body's images, counted as it arrives instead of kept.
    images: ImageScan,
    streaming: bool,
    status: u16,
    keep_alive: bool,
    failure: Option<(Outcome, String)>,
    saw_bytes: bool,
    done: bool,
    /// The latest time fed: a response's times never go back.
    last_t: u64,
}

impl Exchange {
    /// Ready for a new response, keeping buffers.
    pub fn reset(&mut self) {
        self.parser = Parser::new();
        self.framer.reset();
        self.body.clear();
        self.images.reset();
        self.streaming = false;
        self.status = 0;
        self.keep_alive = false;
        self.failure = None;
        self.saw_bytes = false;
        self.done = false;
        self.last_t = 0;
    }

    /// `t`, or the latest time fed when `t` is older: a read's stamp can be older than the
    /// previous read's (the kernel stamps a read with its newest bytes; a read that got no
    /// stamp takes the time it was made), and a response's events never go back in time.
    fn monotonic(&mut self, t: u64) -> u64 {
        self.last_t = self.last_t.max(t);
        self.last_t
    }

    fn saw_head(&self) -> bool {
        self.parser.head().is_some()
    }

    /// True once any response byte arrived.
    pub fn saw_bytes(&self) -> bool {
        self.saw_bytes
    }

    /// True once the response is complete.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// True when the connection can carry the next request.
    pub fn keep_alive(&self) -> bool {
        self.done && self.keep_alive
    }

    /// Feeds one read's bytes, stamped `t`. Returns how many bytes were consumed (the rest,
    /// an incomplete head, must be fed again with what follows). A protocol error ends the
    /// exchange with [`Outcome::BadHttp`].
    pub fn feed(&mut self, bytes: &[u8], t: u64, rec: &mut Record, scratch: &mut Scratch) -> usize {
        let t = self.monotonic(t);
        if !bytes.is_empty() {
            self.saw_bytes = true;
        }
        let Exchange {
            parser,
            framer,
            body,
            images,
            streaming,
            status,
            keep_alive,
            failure,
            done,
            ..
        } = self;
        // Set when the rest of this response is of no use: it ends here, the connection closes.
        let mut cut: Option<(Outcome, String)> = None;
        let result = parser.feed(bytes, &mut |part| match part {
            Part::Head(_) | Part::Body(_) if cut.is_some() => {}
            Part::Head(head) => {
                on_head(head, status, keep_alive, streaming);
                if let Some(enc) = head
                    .encoding
                    .as_ref()
                    .filter(|_| (200..300).contains(status))
                {
                    cut = Some((
                        Outcome::BadHttp,
                        format!(
                            "the server compressed the response (Content-Encoding: {enc}) \
                             although ringperf asks for no encoding"
                        ),
                    ));
                }
            }
            Part::Body(data) => {
                if *streaming {
                    let fed = framer.feed(data, &mut |ev| {
                        on_event(ev.data, t, rec, scratch, failure);
                    });
                    if fed.is_err() {
                        cut = Some((
                            Outcome::EventTooLarge,
                            format!(
                                "one server-sent event grew past {} KiB; the stream was cut",
                                crate::sse::MAX_EVENT >> 10
                            ),
                        ));
                    }
                } else if scratch.answer == Answer::Images && (200..300).contains(status) {
                    images.feed(data);
                } else if body.len() + data.len() <= BODY_LIMIT {
                    body.extend_from_slice(data);
                } else if (200..300).contains(status) {
                    cut = Some((
                        Outcome::BodyTooLarge,
                        format!(
                            "the response body grew past {} KiB; it was cut",
                            BODY_LIMIT >> 10
                        ),
                    ));
                }
            }
            Part::End => *done = true,
        });
        if let Some((outcome, error)) = cut {
            self.end_with(outcome, error, t, rec);
            return bytes.len();
        }
        match result {
            Ok(used) => {
                if self.done {
                    self.finish(t, rec, scratch);
                    // Nothing may follow a response that was not asked for (no pipelining):
                    // bytes after it are garbage, and the next request must not inherit them.
                    if used < bytes.len() {
                        self.keep_alive = false;
                    }
                }
                used
            }
            Err(e) => {
                self.fail_protocol(e, t, rec);
                // A TLS record (handshake or alert) where an HTTP head should be.
                if !self.saw_head()
                    && bytes.len() >= 2
                    && matches!(bytes[0], 0x15 | 0x16)
                    && bytes[1] == 3
                {
                    if let Some(msg) = &mut rec.error {
                        msg.push_str(": the server answered with TLS; is it an https:// port?");
                    }
                }
                bytes.len()
            }
        }
    }

    /// The connection reached end of file.
    pub fn eof(&mut self, t: u64, rec: &mut Record, scratch: &mut Scratch) {
        if self.done {
            return;
        }
        let t = self.monotonic(t);
        let mut ended = false;
        match self.parser.eof(&mut |p| ended |= p == Part::End) {
            Ok(()) if ended => {
                self.done = true;
                self.finish(t, rec, scratch);
            }
            Ok(()) => {}
            Err(_) => {
                self.done = true;
                self.keep_alive = false;
                rec.end_ns = t;
                rec.outcome = Outcome::ClosedEarly;
                rec.error = Some(if self.saw_bytes {
                    "connection closed before the response ended".into()
                } else {
                    "connection closed before any response byte".into()
                });
            }
        }
    }

    fn fail_protocol(&mut self, e: ProtocolError, t: u64, rec: &mut Record) {
        let outcome = match e {
            ProtocolError::HeadTooLarge(_) => Outcome::HeaderTooLarge,
            _ => Outcome::BadHttp,
        };
        self.end_with(outcome, e.to_string(), t, rec);
    }

    /// Ends the exchange as failed; the connection is not reused.
    fn end_with(&mut self, outcome: Outcome, error: String, t: u64, rec: &mut Record) {
        self.done = true;
        self.keep_alive = false;
        rec.end_ns = t;
        rec.outcome = outcome;
        rec.error = Some(cut(&error));
    }

    fn finish(&mut self, t: u64, rec: &mut Record, scratch: &mut Scratch) {
        rec.end_ns = t;
        if self.framer.has_pending() && self.failure.is_none() {
            // The standard discards an event that is never terminated; count it, don't hide it.
            self.failure = Some((
                Outcome::BadHttp,
                "event stream ended inside an event".into(),
            ));
        }
        if !(200..300).contains(&self.status) {
            rec.outcome = Outcome::HttpStatus(self.status);
            rec.error = Some(error_text(&self.body));
            return;
        }
        if !self.streaming {
            self.finish_whole_body(t, rec, scratch);
        }
        if let Some((outcome, text)) = self.failure.take() {
            rec.outcome = outcome;
            rec.error = Some(text);
            return;
        }
        if scratch.answer == Answer::Text && rec.last_content_ns.is_none() {
            rec.outcome = Outcome::NoContent;
            rec.error = Some(match rec.osl {
                Some(n) if n > 0 => {
                    format!("the server counted {n} output tokens but sent no text")
                }
                _ => "a successful response with no generated text (no content or reasoning in \
                      any choice; tool calls are not timed)"
                    .into(),
            });
            return;
        }
        rec.outcome = Outcome::Ok;
        if rec.osl.is_some() && !rec.id.is_multiple_of(TOKENIZER_CHECK_EVERY) && !rec.keep_text {
            let mut text = std::mem::take(&mut rec.text);
            if text.capacity() <= SPARE_TEXT_MAX {
                text.clear();
                scratch.spare_texts.push(text);
            }
        }
    }

    fn finish_whole_body(&mut self, t: u64, rec: &mut Record, scratch: &mut Scratch) {
        match scratch.answer {
            Answer::Ranking => {
                self.failure = ranking_failure(&self.body);
                return;
            }
            Answer::Images => {
                self.failure = match self.images.finish() {
                    Images::Counted(n @ 1..) => {
                        rec.images = n;
                        None
                    }
                    Images::Counted(0) => Some((
                        Outcome::NoContent,
                        "an image generation answer with an empty \"data\" list".into(),
                    )),
                    Images::Error => Some((
                        Outcome::ServerError,
                        "an image generation answer with an \"error\" and no \"data\"".into(),
                    )),
                    Images::NoData => Some((
                        Outcome::NoContent,
                        "an image generation answer with no \"data\" list of images".into(),
                    )),
                    Images::Broken(why) => Some((
                        Outcome::BadJson,
                        format!("an image generation answer that is not whole JSON: {why}"),
                    )),
                };
                return;
            }
            Answer::Text | Answer::Vector => {}
        }
        match scratch.decode(&mut self.body) {
            Ok(p) => {
                if let Some(e) = p.error {
                    self.failure = Some((Outcome::ServerError, cut(&e)));
                    return;
                }
                rec.sim_arrived_ns = p.arrived_ns;
                if !p.content.is_empty() || !p.reasoning.is_empty() {
                    rec.last_content_ns = Some(t);
                    rec.text.push_str(&p.reasoning);
                    rec.text.push_str(&p.content);
                }
                if let Some(f) = p.finish_reason {
                    rec.set_finish_reason(f);
                }
                apply_usage(p.usage, rec);
            }
            Err(e) => self.failure = Some((Outcome::BadJson, cut(&e.to_string()))),
        }
    }
}

/// What is wrong with a ranking's whole body, if anything: it must hold a list of scores (TEI's
/// array, NIM's `rankings`, Cohere's `results`).
fn ranking_failure(body: &[u8]) -> Option<(Outcome, String)> {
    let v: serde_json::Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Some((Outcome::BadJson, cut(&e.to_string()))),
    };
    if let Some(e) = v.get("error") {
        return Some((Outcome::ServerError, cut(&e.to_string())));
    }
    let list = v
        .as_array()
        .or_else(|| v.get("rankings").and_then(|r| r.as_array()))
        .or_else(|| v.get("results").and_then(|r| r.as_array()));
    match list {
        Some(_) => None,
        None => Some((
            Outcome::NoContent,
            "a ranking answer with no list of scores (an array, \"rankings\" or \"results\")"
                .into(),
        )),
    }
}

fn on_head(head: &Head, status: &mut u16, keep_alive: &mut bool, streaming: &mut bool) {
    *status = head.status;
    *keep_alive = head.keep_alive;
    *streaming = head.event_stream && (200..300).contains(&head.status);
}

fn on_event(
    data: &[u8],
    t: u64,
    rec: &mut Record,
    scratch: &mut Scratch,
    failure: &mut Option<(Outcome, String)>,
) {
    if data == b"[DONE]" {
        return;
    }
    if scratch.served_model.is_none() && scratch.model_tries < MODEL_TRIES {
        scratch.model_tries += 1;
        scratch.served_model = openai::named_model(data);
    }
    let Scratch {
        json,
        doc,
        pointers,
        client_delay,
        spare_texts,
        ..
    } = scratch;
    let p = match decode_event(data, doc, json, pointers.as_ref()) {
        Ok(p) => p,
        Err(e) => {
            failure.get_or_insert((Outcome::BadJson, cut(&e.to_string())));
            return;
        }
    };
    if let (Some(sent), Phase::Profiling) = (p.sent_ns, rec.phase) {
        client_delay.record(t.saturating_sub(sent));
    }
    if p.arrived_ns.is_some() {
        rec.sim_arrived_ns = p.arrived_ns;
    }
    if let Some(e) = p.error {
        failure.get_or_insert((Outcome::ServerError, cut(&e)));
    }
    if !p.content.is_empty() || !p.reasoning.is_empty() {
        match rec.last_content_ns {
            None => {
                rec.first_content_ns = Some(t);
                rec.sim_first_sent_ns = p.sent_ns;
            }
            Some(last) => {
                if rec.second_content_ns.is_none() {
                    rec.second_content_ns = Some(t);
                }
                rec.push_gap(t - last);
            }
        }
        if !p.content.is_empty() && rec.first_output_ns.is_none() {
            rec.first_output_ns = Some(t);
        }
        rec.last_content_ns = Some(t);
        if rec.text.capacity() == 0 {
            rec.text = spare_texts.pop().unwrap_or_default();
        }
        rec.text.push_str(&p.reasoning);
        rec.text.push_str(&p.content);
    }
    if let Some(f) = p.finish_reason {
        rec.set_finish_reason(f);
    }
    apply_usage(p.usage, rec);
}

fn apply_usage(usage: Option<openai::Usage>, rec: &mut Record) {
    if let Some(u) = usage {
        if let Some(c) = u.completion_tokens {
            rec.osl = Some(c);
            rec.osl_source = Some(crate::record::TokenSource::Usage);
        }
        if u.prompt_tokens.is_some() {
            rec.server_isl = u.prompt_tokens;
        }
        if let Some(c) = u.cached_tokens {
            rec.server_cached = Some(u32::try_from(c).unwrap_or(u32::MAX));
        }
    }
}

/// A server's error text as it is kept: one line of safe text.
fn cut(s: &str) -> String {
    crate::redact::server_text(s, ERROR_TEXT_LIMIT)
}

/// An error body as one line of safe text (an HTML error page has many); from a JSON error,
/// its message (vLLM's `message`, OpenAI's and llama.cpp's `error.message`).
fn error_text(body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
        let m = v
            .get("message")
            .or_else(|| v.get("error").and_then(|e| e.get("message")))
            .and_then(|m| m.as_str());
        if let Some(m) = m.filter(|m| !m.trim().is_empty()) {
            return cut(m);
        }
    }
    let s = crate::redact::server_bytes(body, ERROR_TEXT_LIMIT);
    if s.is_empty() {
        "(empty body)".into()
    } else {
        s
    }
}
