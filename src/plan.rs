//! The run plan: every flag checked, every address resolved, every request built, before any
//! shard thread starts. Shards receive it read-only.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::cli::{EndpointType, ProfileArgs};
use crate::http::request::Target;
use crate::runtime::Driver;
use crate::workload::{parse_extra_inputs, BodySpec, Dataset, Tokenizer, WorkloadError};

/// A flag or input that cannot be used. Shown as one line; the process exits with 2.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A flag's value is out of range or inconsistent with another.
    #[error("{0}")]
    Flag(String),
    /// The URL cannot be used.
    #[error("--url {0:?}: {1}")]
    Url(String, String),
    /// Preparing prompts or the tokenizer failed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// TLS settings are unusable.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
}

/// A parsed target URL.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Endpoint {
    /// `https://`.
    pub tls: bool,
    /// Host as written (used for `Host`, SNI and certificate checks).
    pub host: String,
    /// Port.
    pub port: u16,
    /// Address connected to (resolved once, IPv4 preferred).
    pub addr: SocketAddr,
    /// Path prefix from the URL (without a trailing slash).
    pub prefix: String,
}

impl Endpoint {
    /// Parses and resolves `http(s)://host[:port][/prefix]` (scheme optional: http).
    pub fn parse(url: &str) -> Result<Endpoint, PlanError> {
        let bad = |why: &str| PlanError::Url(url.to_string(), why.to_string());
        let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else if url.contains("://") {
            return Err(bad("only http:// and https:// are supported"));
        } else {
            (false, url)
        };
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        let (host, port) = if let Some(end) = authority.strip_prefix('[').and_then(|a| a.find(']'))
        {
            let host = &authority[..end + 2];
            let port = authority[end + 2..].strip_prefix(':');
            (host, port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| bad("the port is not a number from 1 to 65535"))?,
            None if tls => 443,
            None => 80,
        };
        if port == 0 {
            return Err(bad("port 0"));
        }
        let lookup = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = (lookup, port)
            .to_socket_addrs()
            .map_err(|e| bad(&format!("cannot resolve {lookup:?}: {e}")))?
            .collect();
        let addr = addrs
            .iter()
            .find(|a| a.is_ipv4())
            .or(addrs.first())
            .copied()
            .ok_or_else(|| bad("the host resolves to no address"))?;
        Ok(Endpoint {
            tls,
            host: host.to_string(),
            port,
            addr,
            prefix: prefix.to_string(),
        })
    }

    /// `Host` header value.
    pub fn authority(&self) -> String {
        let default = if self.tls { 443 } else { 80 };
        if self.port == default {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Everything a run needs, validated and immutable.
pub struct RunPlan {
    /// Where requests go.
    pub endpoint: Endpoint,
    /// Request path.
    pub path: String,
    /// Model name.
    pub model: String,
    /// Chat or completions.
    pub endpoint_type: EndpointType,
    /// Streamed responses.
    pub streaming: bool,
    /// TLS configuration for https.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Connect timeout (ns).
    pub connect_timeout_ns: u64,
    /// Request timeout (ns).
    pub request_timeout_ns: u64,
    /// Requests in flight, across shards (closed loop), or the cap on them (open loop;
    /// `u64::MAX` for none).
    pub concurrency: u64,
    /// Open loop: requests per second.
    pub rate: Option<f64>,
    /// Open loop: every send time of the run (offsets from the start, ns), fixed in advance.
    pub offsets: Option<Arc<Vec<u64>>>,
    /// Ramp-up length (ns; 0 = none).
    pub ramp_ns: u64,
    /// Count ramp-up requests in the metrics.
    pub include_ramp: bool,
    /// Service-level objectives for goodput.
    pub slos: Vec<crate::report::goodput::Slo>,
    /// JSON pointers for `--endpoint-type template`.
    pub pointers: Option<crate::openai::Pointers>,
    /// Multi-turn sessions, when asked for.
    pub sessions: Option<Arc<crate::workload::Sessions>>,
    /// Measured requests, when stopping by count.
    pub request_count: Option<u64>,
    /// Measurement duration (ns), when stopping by time.
    pub duration_ns: Option<u64>,
    /// Grace period after the duration (ns).
    pub grace_ns: u64,
    /// Warm-up requests.
    pub warmup: u64,
    /// What the flags ask of the shards' placement (decided at run time, from the host).
    pub placement: crate::engine::placement::Ask,
    /// I/O driver.
    pub driver: Driver,
    /// io_uring entries.
    pub ring_entries: u32,
    /// Stamp events with the kernel's receive time (plain http).
    pub kernel_timestamps: bool,
    /// Prepared requests.
    pub dataset: Arc<Dataset>,
    /// The tokenizer (for re-tokenizing outputs after the run).
    pub tokenizer: Arc<Tokenizer>,
    /// Artifact folder.
    pub artifact_dir: PathBuf,
    /// Show the live progress line.
    pub progress: bool,
    /// The configuration as written to artifacts (secrets removed).
    pub input_config: Value,
}

/// Parses `0,2-5` into CPU ids.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("--cpus {s:?}: {part:?} is not a CPU number or range like 2-5");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err(format!("--cpus {s:?} names no CPU"));
    }
    Ok(out)
}

/// The CPUs this process may run on.
pub fn usable_cpus() -> Vec<usize> {
    // Read before any thread is pinned: once pinned, the list shrinks to that core.
    core_affinity::get_core_ids()
        .map(|ids| ids.into_iter().map(|c| c.id).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
        })
}

fn flag(msg: impl Into<String>) -> PlanError {
    PlanError::Flag(msg.into())
}

impl RunPlan {
    /// Validates the flags and prepares every request.
    pub fn build(args: &ProfileArgs) -> Result<RunPlan, PlanError> {
        let t = &args.target;
        let l = &args.load;
        let w = &args.workload;
        if l.concurrency == Some(0) {
            return Err(flag("--concurrency must be at least 1"));
        }
        if let Some(r) = l.request_rate {
            if !(r > 0.0 && r.is_finite()) {
                return Err(flag(format!(
                    "--request-rate {r}: must be a positive number of requests per second"
                )));
            }
        }
        if !(l.burstiness > 0.0 && l.burstiness.is_finite()) {
            return Err(flag("--burstiness must be a positive number"));
        }
        let open_loop = l.request_rate.is_some() || w.fixed_schedule;
        let concurrency = match (l.concurrency, open_loop) {
            (Some(c), _) => c,
            (None, true) => u64::MAX,
            (None, false) => 1,
        };
        if l.request_count == Some(0) {
            return Err(flag("--request-count must be at least 1"));
        }
        if l.benchmark_duration == Some(0) {
            return Err(flag("--benchmark-duration must be longer than 0"));
        }
        if l.request_count.is_some() && l.benchmark_duration.is_some() {
            return Err(flag(
                "give --request-count or --benchmark-duration, not both",
            ));
        }
        if w.synthetic_input_tokens_mean == 0 {
            return Err(flag("--synthetic-input-tokens-mean must be at least 1"));
        }
        if w.output_tokens_mean == Some(0) {
            return Err(flag("--output-tokens-mean must be at least 1"));
        }
        if w.output_tokens_mean_deterministic && w.output_tokens_mean.is_none() {
            return Err(flag(
                "--output-tokens-mean-deterministic needs --output-tokens-mean",
            ));
        }
        if w.num_dataset_entries == 0 || w.num_dataset_entries > 10_000_000 {
            return Err(flag("--num-dataset-entries must be from 1 to 10M"));
        }
        if t.connect_timeout == 0 || t.request_timeout == 0 {
            return Err(flag("timeouts must be longer than 0"));
        }
        let endpoint = Endpoint::parse(&t.url)?;
        // Embeddings are never streamed.
        let streaming = t.streaming && t.endpoint_type != EndpointType::Embeddings;
        let mut headers = Vec::new();
        if let Some(key) = t.api_key.as_deref().filter(|k| !k.is_empty()) {
            headers.push(("Authorization".to_string(), format!("Bearer {key}")));
        }
        for h in &t.headers {
            let Some((name, value)) = h.split_once(':') else {
                return Err(flag(format!("--header {h:?}: expected 'Name: value'")));
            };
            let name = name.trim();
            let valid = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_!#$%&'*+.^`|~".contains(&b));
            if !valid || value.contains(['\r', '\n']) {
                return Err(flag(format!("--header {name:?}: not a valid HTTP header")));
            }
            headers.push((name.to_string(), value.trim().to_string()));
        }
        let tls = if endpoint.tls {
            crate::tls::server_name(&endpoint.host)?;
            Some(crate::tls::client_config(t.ca_cert.as_deref(), t.insecure)?)
        } else {
            None
        };
        let path = match &t.endpoint {
            Some(p) if p.starts_with('/') => format!("{}{p}", endpoint.prefix),
            Some(p) => format!("{}/{p}", endpoint.prefix),
            None => format!(
                "{}{}",
                endpoint.prefix,
                match t.endpoint_type {
                    EndpointType::Chat => "/v1/chat/completions",
                    EndpointType::Completions => "/v1/completions",
                    EndpointType::Embeddings => "/v1/embeddings",
                    EndpointType::Responses => "/v1/responses",
                    EndpointType::Template => {
                        return Err(flag("--endpoint-type template needs --endpoint PATH"));
                    }
                }
            ),
        };

        // Shards: the flags only ask; the engine decides from the host (engine::place).
        let cpus = match &args.engine.cpus {
            Some(list) => Some(parse_cpu_list(list).map_err(PlanError::Flag)?),
            None => None,
        };
        if args.engine.shards == Some(0) {
            return Err(flag("--shards must be at least 1"));
        }

        let extra = parse_extra_inputs(&w.extra_inputs)?;
        let template = match (&t.request_template, t.endpoint_type) {
            (Some(path), EndpointType::Template) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| WorkloadError::Template(format!("{}: {e}", path.display())))?;
                crate::workload::check_template(&text)
                    .map_err(|e| WorkloadError::Template(format!("{}: {e}", path.display())))?;
                Some(text)
            }
            (None, EndpointType::Template) => {
                return Err(flag(
                    "--endpoint-type template needs --request-template FILE",
                ))
            }
            (Some(_), _) => {
                return Err(flag(
                    "--request-template goes with --endpoint-type template",
                ))
            }
            (None, _) => None,
        };
        let pointers =
            (t.endpoint_type == EndpointType::Template).then(|| crate::openai::Pointers {
                text: t.response_text_pointer.clone(),
                tokens: t.response_tokens_pointer.clone(),
            });
        for p in pointers
            .iter()
            .flat_map(|p| std::iter::once(&p.text).chain(p.tokens.as_ref()))
        {
            if !(p.is_empty() || p.starts_with('/')) {
                return Err(flag(format!(
                    "{p:?} is not a JSON pointer (they start with /)"
                )));
            }
        }
        let tokenizer = Tokenizer::load(w.tokenizer.as_deref())?;
        let spec = BodySpec {
            model: t.model.clone(),
            endpoint_type: t.endpoint_type,
            streaming,
            include_usage: !w.no_usage,
            isl: (
                w.synthetic_input_tokens_mean,
                w.synthetic_input_tokens_stddev,
            ),
            osl: w.output_tokens_mean.map(|m| (m, w.output_tokens_stddev)),
            osl_deterministic: w.output_tokens_mean_deterministic,
            extra,
            template,
            entries: w.num_dataset_entries as usize,
            prefixes: w.num_prefix_prompts.map(|n| (n, w.prefix_prompt_length)),
            seed: w.random_seed,
        };
        if w.num_prefix_prompts == Some(0) || w.prefix_prompt_length == 0 {
            return Err(flag(
                "--num-prefix-prompts and --prefix-prompt-length must be at least 1",
            ));
        }
        if w.fixed_schedule && w.input_file.is_none() {
            return Err(flag(
                "--fixed-schedule replays an --input-file's timestamps: give one",
            ));
        }
        if w.fixed_schedule && l.request_rate.is_some() {
            return Err(flag("give --fixed-schedule or --request-rate, not both"));
        }
        let authority = endpoint.authority();
        let target = Target {
            host: &authority,
            path: &path,
            headers: &headers,
            streaming,
        };
        let (dataset, file_times) = match &w.input_file {
            None => (Dataset::synthetic(&spec, &target, &tokenizer)?, None),
            Some(path) => {
                use crate::workload::files::{self, DatasetType};
                let kind = match w.dataset_type {
                    Some(k) => k,
                    None => files::detect(path)?,
                };
                // A replayed trace sends every line; otherwise --num-dataset-entries bounds it.
                let limit = if w.fixed_schedule {
                    usize::MAX
                } else {
                    w.num_dataset_entries as usize
                };
                let items = match kind {
                    DatasetType::Jsonl => files::read_jsonl(path, limit)?,
                    DatasetType::Sharegpt => files::read_sharegpt(path, limit, &tokenizer)?,
                    DatasetType::Mooncake => {
                        files::read_mooncake(path, limit, &tokenizer, w.random_seed)?
                    }
                };
                let times = if w.fixed_schedule {
                    let ts: Vec<f64> = items.iter().filter_map(|i| i.timestamp_ms).collect();
                    if ts.len() != items.len() {
                        return Err(flag(format!(
                            "--fixed-schedule: {} of {} lines of {} have no \"timestamp\"",
                            items.len() - ts.len(),
                            items.len(),
                            path.display()
                        )));
                    }
                    let first = ts[0];
                    Some(
                        ts.iter()
                            .map(|t| ((t - first) * 1e6).round() as u64)
                            .collect::<Vec<u64>>(),
                    )
                } else {
                    None
                };
                (
                    Dataset::from_items(&spec, &target, &tokenizer, &items)?,
                    times,
                )
            }
        };

        let sessions = match w.session_turns_mean {
            None => None,
            Some(m) => {
                if !(m >= 1.0 && m <= crate::workload::MAX_TURNS as f64)
                    || w.session_turns_stddev < 0.0
                {
                    return Err(flag(
                        "--session-turns-mean must be from 1 to 1024, and -stddev not negative",
                    ));
                }
                if t.endpoint_type != EndpointType::Chat {
                    return Err(flag("multi-turn sessions need --endpoint-type chat"));
                }
                if open_loop || w.input_file.is_some() {
                    return Err(flag("multi-turn sessions are closed loop with synthetic prompts: drop --request-rate, --fixed-schedule and --input-file"));
                }
                let list = crate::workload::Sessions::synthetic(
                    &spec,
                    &tokenizer,
                    (m, w.session_turns_stddev),
                )?;
                Some(Arc::new(crate::workload::Sessions {
                    spec: spec.clone(),
                    host: authority.clone(),
                    path: path.clone(),
                    headers: headers.clone(),
                    list,
                    delay_ns: w.session_turn_delay,
                }))
            }
        };
        let request_count = match l.benchmark_duration {
            Some(_) => None,
            None => Some(l.request_count.unwrap_or(10)),
        };
        let ramp_ns = l.ramp_up.unwrap_or(0);
        let offsets = file_times.map(|mut t| {
            if let Some(c) = request_count.filter(|_| l.request_count.is_some()) {
                t.truncate((c + l.warmup_request_count) as usize);
            }
            Arc::new(t)
        });
        let offsets = offsets.or_else(|| {
            l.request_rate.map(|rate| {
                // Warm-up arrivals come first, then the ramp, then the measured load.
                let count = request_count.map(|c| c + l.warmup_request_count);
                let until = l.benchmark_duration.map(|d| d + ramp_ns);
                Arc::new(crate::engine::schedule::arrival_offsets(
                    rate,
                    l.arrival,
                    l.burstiness,
                    w.random_seed,
                    count,
                    until,
                    ramp_ns,
                ))
            })
        });
        // The work to size shards for: requests in flight (open loop: a second's arrivals).
        let streams = match (&offsets, l.request_rate) {
            (_, Some(rate)) => (rate.ceil() as u64).min(concurrency),
            (Some(t), None) => {
                let span_s = t.last().copied().unwrap_or(0) as f64 / 1e9;
                ((t.len() as f64 / span_s.max(1.0)).ceil() as u64).min(concurrency)
            }
            (None, None) => concurrency,
        };
        let placement = crate::engine::placement::Ask {
            shards: args.engine.shards,
            cpus,
            no_pin: args.engine.no_pin,
            streams,
            reserved: Vec::new(),
        };
        let artifact_dir = args.output.artifact_dir.clone().unwrap_or_else(|| {
            let model = t.model.replace(['/', '\\', ':'], "_");
            let et = match t.endpoint_type {
                EndpointType::Chat => "chat",
                EndpointType::Completions => "completions",
                EndpointType::Embeddings => "embeddings",
                EndpointType::Responses => "responses",
                EndpointType::Template => "template",
            };
            let mode = match l.request_rate {
                Some(r) => format!("request_rate{r}"),
                None => format!("concurrency{concurrency}"),
            };
            PathBuf::from("artifacts").join(format!("{model}-openai-{et}-{mode}"))
        });
        let input_config = json!({
            "model": t.model,
            "url": format!("{}://{}{}", if endpoint.tls { "https" } else { "http" }, authority, endpoint.prefix),
            "endpoint": path,
            "endpoint_type": t.endpoint_type,
            "streaming": t.streaming,
            "api_key": t.api_key.as_ref().map(|_| "<redacted>"),
            "headers": headers.iter().map(|(n, _)| format!("{n}: <redacted>")).collect::<Vec<_>>(),
            "concurrency": l.concurrency.or((l.request_rate.is_none()).then_some(1)),
            "request_rate": l.request_rate,
            "arrival": l.request_rate.map(|_| l.arrival),
            "burstiness": l.burstiness,
            "ramp_up_s": l.ramp_up.map(|d| d as f64 / 1e9),
            "goodput": l.goodput,
            "request_count": request_count,
            "benchmark_duration_s": l.benchmark_duration.map(|d| d as f64 / 1e9),
            "grace_period_s": l.grace_period as f64 / 1e9,
            "warmup_request_count": l.warmup_request_count,
            "synthetic_input_tokens_mean": w.synthetic_input_tokens_mean,
            "synthetic_input_tokens_stddev": w.synthetic_input_tokens_stddev,
            "output_tokens_mean": w.output_tokens_mean,
            "output_tokens_stddev": w.output_tokens_stddev,
            "output_tokens_mean_deterministic": w.output_tokens_mean_deterministic,
            "extra_inputs": spec.extra,
            "random_seed": w.random_seed,
            "num_dataset_entries": w.num_dataset_entries,
            "input_file": w.input_file,
            "dataset_type": w.dataset_type,
            "fixed_schedule": w.fixed_schedule,
            "num_prefix_prompts": w.num_prefix_prompts,
            "prefix_prompt_length": w.num_prefix_prompts.map(|_| w.prefix_prompt_length),
            "session_turns_mean": w.session_turns_mean,
            "session_turns_stddev": w.session_turns_mean.map(|_| w.session_turns_stddev),
            "session_turn_delay_s": w.session_turns_mean.map(|_| w.session_turn_delay as f64 / 1e9),
            "tokenizer": tokenizer.source,
            "shards": args.engine.shards,
            "cpus": args.engine.cpus,
            "no_pin": args.engine.no_pin,
            "driver": args.engine.driver,
            "connect_timeout_s": t.connect_timeout as f64 / 1e9,
            "request_timeout_s": t.request_timeout as f64 / 1e9,
        });
        Ok(RunPlan {
            endpoint,
            path,
            model: t.model.clone(),
            endpoint_type: t.endpoint_type,
            streaming,
            tls,
            connect_timeout_ns: t.connect_timeout,
            request_timeout_ns: t.request_timeout,
            concurrency,
            rate: l.request_rate,
            offsets,
            ramp_ns,
            include_ramp: l.include_ramp_up,
            slos: l.goodput.clone(),
            pointers,
            sessions,
            request_count,
            duration_ns: l.benchmark_duration,
            grace_ns: l.grace_period,
            warmup: l.warmup_request_count,
            placement,
            driver: args.engine.driver,
            ring_entries: args.engine.ring_entries,
            kernel_timestamps: !args.engine.no_kernel_timestamps,
            dataset: Arc::new(dataset),
            tokenizer: Arc::new(tokenizer),
            artifact_dir,
            progress: !args.output.no_progress,
            input_config,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let e = Endpoint::parse("http://127.0.0.1:9000/prefix/").unwrap();
        assert!(!e.tls);
        assert_eq!(e.port, 9000);
        assert_eq!(e.prefix, "/prefix");
        assert_eq!(e.authority(), "127.0.0.1:9000");
        let e = Endpoint::parse("localhost:8000").unwrap();
        assert!(e.addr.ip().is_loopback());
        let e = Endpoint::parse("https://127.0.0.1").unwrap();
        assert_eq!(
            (e.tls, e.port, e.authority().as_str()),
            (true, 443, "127.0.0.1")
        );
        let e = Endpoint::parse("http://[::1]:8080").unwrap();
        assert_eq!(e.host, "[::1]");
        assert!(e.addr.is_ipv6());
        for bad in [
            "ftp://x",
            "http://",
            "http://h:notaport",
            "http://h:70000",
            "http://:80",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0,2-4").unwrap(), vec![0, 2, 3, 4]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("").is_err());
    }
}
