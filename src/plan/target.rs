//! The target: which server, which endpoint, how to reach it and how long to wait.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{PlanError, Secret};
use crate::api::openai::Pointers;
use crate::api::Kind;
pub use crate::endpoint::Endpoint;
use crate::http::request::Target as Head;

/// What the flags say about the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetSpec {
    /// Model name sent in every request.
    pub model: String,
    /// `http(s)://host[:port][/prefix]` (scheme optional: http); written without its user
    /// information.
    #[serde(serialize_with = "url_shown")]
    pub url: String,
    /// The endpoint kind.
    pub kind: Kind,
    /// Request path, overriding the kind's own.
    pub endpoint: Option<String>,
    /// `Kind::Template`: the body template, inline (JSON text starting with `{`) or a file.
    pub request_template: Option<String>,
    /// `Kind::Template`: JSON pointer to each event's text.
    pub response_text_pointer: String,
    /// `Kind::Template`: JSON pointer to the output token count.
    pub response_tokens_pointer: Option<String>,
    /// Ask for streamed responses.
    pub streaming: bool,
    /// API key, sent as `Authorization: Bearer …`.
    pub api_key: Option<Secret>,
    /// Extra headers, `Name: value` as given.
    pub headers: Vec<Secret>,
    /// CA certificates to trust for https.
    pub ca_cert: Option<PathBuf>,
    /// Do not verify the server's certificate.
    pub insecure: bool,
    /// Time allowed to connect (ns).
    pub connect_timeout_ns: u64,
    /// Time allowed for a whole request (ns).
    pub request_timeout_ns: u64,
    /// Wait this long for the server to come up before the run (ns; 0: no wait).
    #[serde(default)]
    pub ready_check_timeout_ns: u64,
    /// Check the server before the run: the model list and one probe request.
    #[serde(default = "yes")]
    pub preflight: bool,
    /// Empty the server's prefix cache before the run.
    #[serde(default)]
    pub reset_prefix_cache: bool,
    /// More servers of the same model (`--url` repeated: data-parallel replicas without a
    /// load balancer), written without their user information.
    #[serde(default, serialize_with = "urls_shown")]
    pub more_urls: Vec<String>,
    /// How requests are spread over the servers.
    #[serde(default)]
    pub url_strategy: UrlStrategy,
    /// Source addresses to open connections from, in turn (none: the kernel's choice).
    #[serde(default)]
    pub local_addresses: Vec<std::net::IpAddr>,
}

/// How requests are spread over several `--url`s (AIPerf's `--url-strategy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum UrlStrategy {
    /// Request i goes to server i mod N.
    #[default]
    #[value(alias = "round_robin")]
    RoundRobin,
    /// Each request goes to the server with the fewest of this shard's requests in flight.
    #[value(alias = "least_in_flight")]
    LeastInFlight,
}

fn urls_shown<S: serde::Serializer>(urls: &[String], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(urls.iter().map(|u| crate::endpoint::shown(u)))
}

fn yes() -> bool {
    true
}

fn url_shown<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::endpoint::shown(url))
}

/// Every secret `s` holds: the API key, every header's value, the URL's password.
pub fn secrets(s: &TargetSpec) -> Vec<String> {
    secrets_of(
        s.api_key.as_ref().map(|k| k.0.as_str()),
        std::iter::once(s.url.as_str()),
        s.headers.iter().map(|h| h.0.as_str()),
    )
}

/// The secrets of an API key, a URL and `Name: value` headers (see [`crate::redact`]).
pub fn secrets_of<'a>(
    api_key: Option<&str>,
    urls: impl Iterator<Item = &'a str>,
    headers: impl Iterator<Item = &'a str>,
) -> Vec<String> {
    let mut out: Vec<String> = urls.flat_map(crate::endpoint::url_secrets).collect();
    out.extend(api_key.map(str::to_string));
    for h in headers {
        if let Some((_, value)) = h.split_once(':') {
            out.extend(crate::redact::header_secrets(value));
        }
    }
    out
}

/// The target, ready: resolved, TLS set up, the parts of every request's head fixed.
#[derive(Debug, Clone)]
pub struct Target {
    /// Where requests go (the first server, with several).
    pub endpoint: Endpoint,
    /// The other servers (`--url` repeated); every request's head names the first's host.
    pub others: Vec<Endpoint>,
    /// How requests are spread over the servers.
    pub strategy: UrlStrategy,
    /// Source addresses connections are opened from, in turn (none: the kernel's choice).
    pub local_addresses: Vec<std::net::IpAddr>,
    /// Model name.
    pub model: String,
    /// The endpoint kind.
    pub kind: Kind,
    /// Streamed responses (never for embeddings).
    pub streaming: bool,
    /// The request head every request shares: host, path, headers (the API key included).
    pub head: Head,
    /// TLS client configuration for https.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// JSON pointers for `Kind::Template`.
    pub pointers: Option<Pointers>,
    /// The template's text, for `Kind::Template`.
    pub template: Option<String>,
    /// Connect timeout (ns).
    pub connect_timeout_ns: u64,
    /// Request timeout (ns).
    pub request_timeout_ns: u64,
}

/// Splits `Name: value` and checks it is a valid HTTP header.
fn header(h: &str) -> Result<(String, String), PlanError> {
    let Some((name, value)) = h.split_once(':') else {
        // Only the first word: the rest may be a secret.
        return Err(PlanError::Flag(format!(
            "--header {:?}…: expected 'Name: value'",
            h.split([':', ' ']).next().unwrap_or("")
        )));
    };
    let name = name.trim();
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_!#$%&'*+.^`|~".contains(&b));
    if !valid || value.contains(['\r', '\n']) {
        return Err(PlanError::Flag(format!(
            "--header {name:?}: not a valid HTTP header"
        )));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

impl Target {
    /// Server `i`: 0 is the first `--url`.
    pub fn server(&self, i: usize) -> &Endpoint {
        match i {
            0 => &self.endpoint,
            _ => &self.others[i - 1],
        }
    }

    /// How many servers.
    pub fn servers(&self) -> usize {
        1 + self.others.len()
    }

    /// Validates the spec, resolves the address, reads the template and sets up TLS.
    pub fn build(s: &TargetSpec) -> Result<Target, PlanError> {
        if s.connect_timeout_ns == 0 || s.request_timeout_ns == 0 {
            return Err(PlanError::Flag("timeouts must be longer than 0".into()));
        }
        crate::redact::install(secrets(s));
        let endpoint = Endpoint::parse(&s.url).map_err(PlanError::Url)?;
        let mut others = Vec::with_capacity(s.more_urls.len());
        for u in &s.more_urls {
            let e = Endpoint::parse(u).map_err(PlanError::Url)?;
            if (e.tls, &e.prefix, &e.user_info)
                != (endpoint.tls, &endpoint.prefix, &endpoint.user_info)
            {
                return Err(PlanError::Flag(format!(
                    "--url {}: every --url of a run takes the same scheme, path prefix and \
                     credentials as the first ({}); only the host and port may differ",
                    crate::endpoint::shown(u),
                    crate::endpoint::shown(&s.url)
                )));
            }
            if e.tls {
                crate::tls::server_name(&e.host)?;
            }
            others.push(e);
        }
        if others.len() >= usize::from(u16::MAX) {
            return Err(PlanError::Flag("too many --url".into()));
        }
        for e in std::iter::once(&endpoint).chain(&others) {
            if let Some(a) = s
                .local_addresses
                .iter()
                .find(|a| a.is_ipv4() != e.addr.is_ipv4())
            {
                return Err(PlanError::Flag(format!(
                    "--local-address {a}: {} is reached over IPv{}; give source addresses of \
                     that family",
                    e.addr,
                    if e.addr.is_ipv4() { 4 } else { 6 }
                )));
            }
        }
        let mut headers = Vec::new();
        if let Some(key) = s.api_key.as_ref().filter(|k| !k.0.is_empty()) {
            headers.push(("Authorization".to_string(), format!("Bearer {}", key.0)));
        }
        if let Some(info) = &endpoint.user_info {
            if !headers.is_empty() {
                return Err(PlanError::Flag(
                    "the URL's user:password@ and --api-key (or OPENAI_API_KEY) both set the \
                     Authorization header: give one"
                        .into(),
                ));
            }
            let token = crate::endpoint::basic_token(info);
            headers.push(("Authorization".to_string(), format!("Basic {token}")));
        }
        for h in &s.headers {
            let (name, value) = header(&h.0)?;
            if ["host", "content-length", "transfer-encoding"]
                .iter()
                .any(|n| name.eq_ignore_ascii_case(n))
            {
                return Err(PlanError::Flag(format!(
                    "--header {name:?}: ringperf sets it for every request itself"
                )));
            }
            if name.eq_ignore_ascii_case("authorization")
                && headers
                    .iter()
                    .any(|(n, _)| n.eq_ignore_ascii_case("authorization"))
            {
                return Err(PlanError::Flag(
                    "the Authorization header is set twice (--api-key, OPENAI_API_KEY or the \
                     URL's user:password@, and --header): give one"
                        .into(),
                ));
            }
            headers.push((name, value));
        }
        let tls = if endpoint.tls {
            crate::tls::server_name(&endpoint.host)?;
            Some(crate::tls::client_config(s.ca_cert.as_deref(), s.insecure)?)
        } else {
            None
        };
        if let Some(c) = s
            .endpoint
            .iter()
            .flat_map(|e| e.chars())
            .find(|c| !c.is_ascii_graphic())
        {
            return Err(PlanError::Flag(format!(
                "--endpoint holds {c:?}: percent-encode it (spaces as %20)"
            )));
        }
        // GenAI-Perf writes Triton's paths with the model in them: /v2/models/{MODEL_NAME}/generate.
        let given = s.endpoint.as_ref().map(|e| {
            e.replace("{MODEL_NAME}", &s.model)
                .replace("{model}", &s.model)
        });
        let path = match (&given, s.kind.path()) {
            (Some(p), _) if p.starts_with('/') => format!("{}{p}", endpoint.prefix),
            (Some(p), _) => format!("{}/{p}", endpoint.prefix),
            (None, Some(p)) => format!("{}{p}", endpoint.prefix),
            (None, None) => {
                return Err(PlanError::Flag(
                    "--endpoint-type template needs --endpoint PATH".into(),
                ))
            }
        };
        let template =
            match (&s.request_template, s.kind) {
                (Some(given), Kind::Template) => {
                    // JSON itself, or a file's name: a text that opens like JSON, or holds a
                    // placeholder and names no file, is the template.
                    let head = given.trim_start();
                    let inline = head.starts_with(['{', '['])
                        || (given.contains("{{") && !std::path::Path::new(given).exists());
                    let text = if inline {
                        given.clone()
                    } else {
                        std::fs::read_to_string(given).map_err(|e| {
                            PlanError::Flag(format!(
                                "--request-template {given}: {e} (give a file, or the JSON itself)"
                            ))
                        })?
                    };
                    let name = if inline { "(inline)" } else { given.as_str() };
                    crate::api::check_template(&text).map_err(|source| PlanError::Template {
                        name: name.into(),
                        source,
                    })?;
                    Some(text)
                }
                (None, Kind::Template) => return Err(PlanError::Flag(
                    "--endpoint-type template needs --request-template FILE (or the JSON itself)"
                        .into(),
                )),
                (Some(_), _) => {
                    return Err(PlanError::Flag(
                        "--request-template goes with --endpoint-type template".into(),
                    ))
                }
                (None, _) => None,
            };
        let pointers = (s.kind == Kind::Template).then(|| Pointers {
            text: s.response_text_pointer.clone(),
            tokens: s.response_tokens_pointer.clone(),
        });
        for p in pointers
            .iter()
            .flat_map(|p| std::iter::once(&p.text).chain(p.tokens.as_ref()))
        {
            if !(p.is_empty() || p.starts_with('/')) {
                return Err(PlanError::Flag(format!(
                    "{p:?} is not a JSON pointer (they start with /)"
                )));
            }
        }
        if s.streaming && s.kind == Kind::ImageGeneration {
            return Err(PlanError::Flag(
                "--streaming with image_generation: streamed partial images are not read; \
                 drop --streaming (images then come whole, as SGLang serves them)"
                    .into(),
            ));
        }
        let streaming = s.streaming && s.kind.streams();
        Ok(Target {
            head: Head {
                host: endpoint.authority(),
                path,
                headers,
                streaming,
            },
            endpoint,
            others,
            strategy: s.url_strategy,
            local_addresses: s.local_addresses.clone(),
            model: s.model.clone(),
            kind: s.kind,
            streaming,
            tls,
            pointers,
            template,
            connect_timeout_ns: s.connect_timeout_ns,
            request_timeout_ns: s.request_timeout_ns,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn spec(url: &str) -> TargetSpec {
        TargetSpec {
            model: "m".into(),
            url: url.into(),
            kind: Kind::Chat,
            endpoint: None,
            request_template: None,
            response_text_pointer: "/text".into(),
            response_tokens_pointer: None,
            streaming: true,
            api_key: None,
            headers: Vec::new(),
            ca_cert: None,
            more_urls: Vec::new(),
            url_strategy: UrlStrategy::RoundRobin,
            local_addresses: Vec::new(),
            insecure: false,
            connect_timeout_ns: 1,
            request_timeout_ns: 1,
            ready_check_timeout_ns: 0,
            preflight: true,
            reset_prefix_cache: false,
        }
    }

    #[test]
    fn paths_headers_and_the_key() {
        let mut s = spec("http://127.0.0.1:9/base");
        s.api_key = Some(Secret("sk-1".into()));
        s.headers = vec![Secret("X-A: b ".into())];
        let t = Target::build(&s).unwrap();
        assert_eq!(t.head.path, "/base/v1/chat/completions");
        assert_eq!(
            t.head.headers,
            vec![
                ("Authorization".to_string(), "Bearer sk-1".to_string()),
                ("X-A".to_string(), "b".to_string())
            ]
        );
        s.endpoint = Some("custom".into());
        assert_eq!(Target::build(&s).unwrap().head.path, "/base/custom");
        s.kind = Kind::Embeddings;
        assert!(
            !Target::build(&s).unwrap().streaming,
            "embeddings never stream"
        );
        for bad in ["Authorization Bearer sk-2", "X A: b", "X-A: b\r\nEvil: 1"] {
            s.headers = vec![Secret(bad.into())];
            let e = Target::build(&s).unwrap_err().to_string();
            assert!(e.starts_with("--header"), "{e}");
            assert!(!e.contains("Evil: 1") && !e.contains("sk-2"), "{e}");
        }
        for bad in ["Host: x", "content-length: 5", "Transfer-Encoding: chunked"] {
            s.headers = vec![Secret(bad.into())];
            let e = Target::build(&s).unwrap_err().to_string();
            assert!(e.contains("sets it for every request itself"), "{e}");
        }
        s.headers = vec![Secret("Authorization: Bearer sk-3".into())];
        let e = Target::build(&s).unwrap_err().to_string();
        assert!(e.contains("give one") && !e.contains("sk-"), "{e}");
        s.api_key = None;
        s.headers = vec![
            Secret("X-Other: 1".into()),
            Secret("Authorization: Bearer sk-3".into()),
        ];
        assert!(Target::build(&s).is_ok(), "-H Authorization alone is fine");
        s.headers.clear();
        s.endpoint = Some("/v1/chat completions".into());
        assert!(Target::build(&s)
            .unwrap_err()
            .to_string()
            .contains("--endpoint holds"));
        s.endpoint = None;
        s.kind = Kind::Template;
        s.endpoint = None;
        assert!(Target::build(&s)
            .unwrap_err()
            .to_string()
            .contains("--endpoint PATH"));
        s.endpoint = Some("/generate".into());
        assert!(Target::build(&s)
            .unwrap_err()
            .to_string()
            .contains("--request-template FILE"));
        s.connect_timeout_ns = 0;
        assert!(Target::build(&s).is_err());
    }
}
