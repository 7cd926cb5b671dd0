//! Before the run: is the server up, which models does it serve, does one request work?
//!
//! A run against a server that is down, or that serves another model, used to send every
//! request and only then print an empty table. Two checks stop it first, each with one line
//! that says what is wrong: `GET /v1/models` (also where the model comes from when `-m` is
//! not given), and one request of the run's own workload (as `vllm bench serve`'s initial test
//! run), read until its first token. Neither is measured.

use std::time::Duration;

use crate::api::Prompt;
use crate::blocking::{self, To};
use crate::clock::now_ns;
use crate::exchange::{Exchange, Scratch};
use crate::http::request::Template;
use crate::plan::{Plan, Target};
use crate::record::{Outcome, Phase, Record};

/// The `X-Request-ID` of the probe request (never one of the run's).
pub(crate) const PROBE_ID: u64 = u64::MAX;

/// The largest `/v1/models` answer read.
const MODELS_CAP: usize = 4 << 20;

fn to(target: &Target) -> To<'_> {
    To::of(&target.endpoint, target.tls.as_ref())
}

/// Why a preflight check failed, as one line for the user.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Nothing answers at the address.
    #[error("{url} is not answering ({why}): is the server up, and is --url right?")]
    Down {
        /// The target URL.
        url: String,
        /// The connection error.
        #[source]
        why: std::io::Error,
    },
    /// Connected, but the conversation failed below HTTP: TLS, a close, a timeout.
    #[error("{url}: {why}{hint}")]
    Transport {
        /// The target URL.
        url: String,
        /// What failed.
        #[source]
        why: blocking::Error,
        /// What to try, when the failure suggests it.
        hint: &'static str,
    },
    /// The server answered the model list with an error or something else than a list.
    #[error("GET {path}: {why}")]
    Models {
        /// The path asked.
        path: String,
        /// The HTTP status, when one came back.
        status: Option<u16>,
        /// What came back.
        #[source]
        why: ModelsWhy,
    },
    /// The probe request failed.
    #[error("the first request failed, so the run would measure nothing: {0}")]
    Probe(#[source] ProbeWhy),
}

/// What the model list's answer was instead of a list.
#[derive(Debug, thiserror::Error)]
pub enum ModelsWhy {
    /// The response broke HTTP/1.1 or its cap.
    #[error("{0}")]
    Exchange(#[source] blocking::Error),
    /// An error status, with the start of the body (made safe to print).
    #[error("HTTP {status} {text}")]
    Status {
        /// The status.
        status: u16,
        /// The body's start.
        text: String,
    },
    /// A body that is not OpenAI's model list.
    #[error("not an OpenAI model list ({0})")]
    NotList(#[source] serde_json::Error),
}

/// Why the probe request measured nothing.
#[derive(Debug, thiserror::Error)]
pub enum ProbeWhy {
    /// Its request could not be built.
    #[error("{0}")]
    Workload(#[source] crate::workload::WorkloadError),
    /// The response broke HTTP/1.1 or its cap.
    #[error("{0}")]
    Exchange(#[source] blocking::Error),
    /// The response came, and was not a success with content.
    #[error("{outcome}: {why}{hint}")]
    Answer {
        /// The outcome's name (`http_404`, `no_content`, ...).
        outcome: String,
        /// The error the response carried, or that it had no content.
        why: String,
        /// What to try, when the outcome suggests it.
        hint: String,
    },
}

/// A failed exchange as a failure: connection and transport failures are the target's
/// whatever was asked; the rest is `other`'s.
fn classify(
    target: &Target,
    e: blocking::Error,
    other: impl FnOnce(blocking::Error) -> Failure,
) -> Failure {
    use blocking::Error as E;
    let url = target.endpoint.url();
    match e {
        E::Connect(why) => Failure::Down { url, why },
        E::Http(_) | E::TooLarge(_) => other(e),
        E::Tls(_) | E::Io { .. } | E::TimedOut { .. } | E::Closed | E::Truncated(_) => {
            // A TLS server closes a plain-text connection without a word.
            let hint = if target.tls.is_none() && e.closed_early() {
                "; if the server speaks TLS, use https://"
            } else {
                ""
            };
            Failure::Transport { url, why: e, hint }
        }
    }
}

/// The models the server lists at `GET <prefix>/v1/models` (OpenAI's list: `data[].id`).
pub(crate) fn models(target: &Target, timeout: Duration) -> Result<Vec<String>, Failure> {
    let path = models_path(target);
    let fail = |status: Option<u16>, why| Failure::Models {
        path: path.clone(),
        status,
        why,
    };
    let page = models_page(target, timeout)
        .map_err(|e| classify(target, e, |e| fail(None, ModelsWhy::Exchange(e))))?;
    let (status, body) = (page.status, page.body);
    if status != 200 {
        let text = crate::redact::server_bytes(&body, 200);
        return Err(fail(Some(status), ModelsWhy::Status { status, text }));
    }
    parse_models(&body).map_err(|e| fail(Some(status), ModelsWhy::NotList(e)))
}

fn models_path(target: &Target) -> String {
    format!("{}/v1/models", target.endpoint.prefix)
}

/// `GET <prefix>/v1/models`, whole.
fn models_page(target: &Target, timeout: Duration) -> Result<blocking::Fetched, blocking::Error> {
    let request = blocking::request(
        "GET",
        &models_path(target),
        &target.endpoint.authority(),
        &target.head.headers,
        "application/json",
    );
    blocking::fetch(&to(target), &request, timeout, MODELS_CAP)
}

/// The server's `Date` header on `GET <prefix>/v1/models`, against this host's clock when the
/// response came: how far a node's clock is off, to the header's second. `None` when the
/// server sends none or cannot be reached.
pub(crate) fn server_date(target: &Target) -> Option<crate::clock::ServerDate> {
    let page = models_page(target, Duration::from_secs(5)).ok()?;
    let local = crate::clock::unix_time_secs();
    let date = page.header("date")?.to_string();
    Some(crate::clock::ServerDate {
        server_minus_local_s: http_date(&date).map(|t| t as f64 - local),
        date,
    })
}

/// An IMF-fixdate (`Tue, 01 Dec 2026 15:40:57 GMT`, RFC 9110 §5.6.7) as Unix seconds.
pub(crate) fn http_date(s: &str) -> Option<i64> {
    let mut it = s.split_whitespace().skip(1);
    let (d, mon, y, hms, zone) = (it.next()?, it.next()?, it.next()?, it.next()?, it.next()?);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let m = MONTHS.iter().position(|x| *x == mon)? as i64 + 1;
    let mut t = hms.split(':').map(|x| x.parse::<i64>().ok());
    let (h, mi, sec) = (t.next()??, t.next()??, t.next()??);
    if zone != "GMT" {
        return None;
    }
    let days = crate::plan::nodes::days_from_civil(y.parse().ok()?, m, d.parse().ok()?);
    Some(days * 86_400 + h * 3600 + mi * 60 + sec)
}

/// `{"object": "list", "data": [{"id": "…"}, …]}` → the ids.
pub(crate) fn parse_models(body: &[u8]) -> Result<Vec<String>, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct List {
        data: Vec<Model>,
    }
    #[derive(serde::Deserialize)]
    struct Model {
        id: String,
    }
    let list: List = serde_json::from_slice(body)?;
    // Each id is sent back byte for byte (vLLM names a model by its path when it is given no
    // --served-model-name, hundreds of characters long); only where it is shown is it made
    // safe and short ([`crate::redact::model_shown`]).
    Ok(list.data.into_iter().map(|m| m.id).collect())
}

/// Empties the server's prefix cache before the run: vLLM's `POST /reset_prefix_cache`, else
/// SGLang's `POST /flush_cache`. Returns the path that answered 2xx, or why none did.
pub(crate) fn reset_prefix_cache(target: &Target) -> Result<String, NotReset> {
    let mut tried = Vec::new();
    for path in ["/reset_prefix_cache", "/flush_cache"] {
        let path = format!("{}{path}", target.endpoint.prefix);
        let request = blocking::request(
            "POST",
            &path,
            &target.endpoint.authority(),
            &target.head.headers,
            "*/*",
        );
        let timeout = Duration::from_nanos(target.connect_timeout_ns.max(10_000_000_000));
        match blocking::fetch(&to(target), &request, timeout, 1 << 20) {
            Ok(r) if (200..300).contains(&r.status) => return Ok(path),
            Ok(r) => tried.push((path, ResetWhy::Status(r.status))),
            Err(e) => tried.push((path, ResetWhy::Exchange(e))),
        }
    }
    Err(NotReset(tried))
}

/// Each path asked to empty the prefix cache, and what came instead of a success.
#[derive(Debug)]
pub(crate) struct NotReset(Vec<(String, ResetWhy)>);

/// What a path asked to empty the prefix cache gave instead of a success.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResetWhy {
    /// A status other than 2xx.
    #[error("HTTP {0}")]
    Status(u16),
    /// The exchange failed.
    #[error("{0}")]
    Exchange(#[source] blocking::Error),
}

impl std::fmt::Display for NotReset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (path, why)) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}{path}: {why}")?;
        }
        Ok(())
    }
}

/// What the probe request showed.
#[derive(Debug)]
pub(crate) struct Probe {
    /// Send to the first token (or to the whole response when not streamed), in ns.
    pub(crate) first_ns: u64,
    /// The model the response names (`"model": …`), when it names one.
    pub(crate) served_model: Option<String>,
}

/// Sends the run's first request and reads it until its first token (streamed) or its end.
pub(crate) fn probe(plan: &Plan) -> Result<Probe, Failure> {
    let target = &plan.target;
    let (template, isl) = match &plan.workload.sessions {
        Some(s) => {
            let turn = &s.list[0].turns[0];
            let history = Prompt::Messages(vec![
                serde_json::json!({"role": "user", "content": turn.prompt}),
            ]);
            (
                Template::post_json(&s.head, &s.body.render(&history, turn.osl)),
                turn.isl,
            )
        }
        None => plan
            .workload
            .dataset
            .first(&plan.workload.tokenizer)
            .map_err(|e| Failure::Probe(ProbeWhy::Workload(e)))?,
    };
    let mut request = Vec::new();
    template.write_into(&mut request, PROBE_ID);
    let mut scratch = Scratch {
        pointers: target.pointers.clone(),
        answer: target.kind.answer(),
        ..Scratch::default()
    };
    let mut rec = Record::new(PROBE_ID, 0, Phase::Warmup, 0, Some(isl));
    rec.keep_text = true;
    let mut ex = Exchange::default();
    let mut pending = Vec::new();
    // The first bytes, for the model the response names.
    let mut raw = Vec::new();
    let timeout = Duration::from_nanos(target.request_timeout_ns.min(120_000_000_000));
    let start = now_ns();
    rec.start_ns = start;
    blocking::exchange(&to(target), &request, timeout, |bytes| {
        let t = now_ns();
        if bytes.is_empty() {
            ex.eof(t, &mut rec, &mut scratch);
            return Ok(true);
        }
        if raw.len() < 64 << 10 {
            raw.extend_from_slice(bytes);
        }
        pending.extend_from_slice(bytes);
        let used = ex.feed(&pending, t, &mut rec, &mut scratch);
        pending.drain(..used);
        Ok(ex.is_done() || rec.first_content_ns.is_some())
    })
    .map_err(|e| classify(target, e, |e| Failure::Probe(ProbeWhy::Exchange(e))))?;
    if rec.outcome != Outcome::Ok || !(ex.is_done() || rec.first_content_ns.is_some()) {
        let why = rec
            .error
            .clone()
            .unwrap_or_else(|| "the response ended without content".into());
        let hint = match (&target.pointers, rec.outcome) {
            (Some(p), Outcome::NoContent) => format!(
                "; does --response-text-pointer {} point at the text the server sends?",
                p.text
            ),
            // A 404 that does not blame the model: the path is not served.
            (_, Outcome::HttpStatus(404)) if !why.to_ascii_lowercase().contains("model") => {
                not_served(&target.head.path)
            }
            _ => String::new(),
        };
        return Err(Failure::Probe(ProbeWhy::Answer {
            outcome: rec.outcome.name(),
            why,
            hint,
        }));
    }
    Ok(Probe {
        first_ns: rec
            .first_content_ns
            .unwrap_or(rec.end_ns)
            .saturating_sub(start),
        served_model: crate::api::openai::named_model(&raw),
    })
}

/// Why a path answered 404, and how to ask for the right one.
fn not_served(path: &str) -> String {
    format!(
        "; the server serves no {path}: give --url the server's base URL (http://host:port, no \
         API path) and the API with --endpoint-type (chat, completions, embeddings, responses) \
         or --endpoint PATH"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_404_names_the_path_and_the_fix() {
        let h = not_served("/v1/chat/completions/v1/chat/completions");
        assert!(
            h.contains("serves no /v1/chat/completions/v1/chat/completions"),
            "{h}"
        );
        assert!(
            h.contains("--endpoint-type") && h.contains("base URL"),
            "{h}"
        );
    }

    #[test]
    fn http_dates_read_as_unix_seconds() {
        assert_eq!(
            http_date("Tue, 01 Dec 2026 15:40:57 GMT"),
            Some(1_796_139_657)
        );
        assert_eq!(
            http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        for bad in [
            "",
            "Tue, 01 Foo 2026 15:40:57 GMT",
            "Tue, 01 Dec 2026 15:40 GMT",
            "Tue, 01 Dec 2026 15:40:57 CET",
        ] {
            assert_eq!(http_date(bad), None, "{bad}");
        }
    }
}
