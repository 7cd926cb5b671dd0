//! What a run measured, said with its figures: the command line as typed (secrets cut out),
//! the load as resolved, the workload asked and measured, the goodput objectives, the server
//! and model, ringperf's version and the client host. A number past saturation means nothing
//! without the load it was measured at; the console, the JSON (`about`) and the HTML head
//! all say it.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::Report;
use crate::plan::Plan;

/// The command line as typed, set once by the binary (a library caller has none).
static COMMAND_LINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Keeps the process's command line (`std::env::args_os`), each word quoted as a shell
/// would need it, for every report to name.
pub fn set_command_line(args: impl IntoIterator<Item = std::ffi::OsString>) {
    let words: Vec<String> = args
        .into_iter()
        .map(|a| {
            let a = a.to_string_lossy().into_owned();
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+%".contains(c));
            if plain {
                a
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect();
    let _ = COMMAND_LINE.set(words.join(" "));
}

/// The load as resolved.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Load {
    /// In words: `concurrency 64`, `request rate 20/s (poisson)`, `trace replay`, ….
    pub text: String,
    /// Closed loop: the requests kept in flight.
    pub concurrency: Option<u64>,
    /// Open loop: requests per second, and how they arrive.
    pub request_rate: Option<f64>,
    /// See `request_rate`.
    pub arrival: Option<String>,
    /// How long sending lasts (s), or how many requests are sent.
    pub duration_s: Option<f64>,
    /// See `duration_s`.
    pub request_count: Option<u64>,
    /// Warm-up requests before the measured phase.
    pub warmup_request_count: u64,
    /// Ramp-up (s).
    pub ramp_up_s: Option<f64>,
}

/// The workload, asked and measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Workload {
    /// Prompt tokens asked (mean, stddev), for synthetic prompts.
    pub isl_asked: Option<(u32, u32)>,
    /// Output tokens asked (mean, stddev).
    pub osl_asked: Option<(u32, u32)>,
    /// Mean prompt and output tokens of the completed requests.
    pub isl_measured: Option<f64>,
    /// See `isl_measured`.
    pub osl_measured: Option<f64>,
    /// Where the prompts came from.
    pub dataset: String,
    /// The tokenizer that counted them.
    pub tokenizer: String,
}

/// The client host.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Host {
    /// Its CPU model (`/proc/cpuinfo`).
    pub cpu_model: Option<String>,
    /// CPUs this process may use.
    pub cpus: usize,
    /// The first CPU's frequency governor.
    pub governor: Option<String>,
    /// The kernel release.
    pub kernel: Option<String>,
}

impl Host {
    /// This host, from `/proc` and `/sys`.
    pub fn here() -> Host {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        Host {
            cpu_model: read("/proc/cpuinfo").and_then(|c| {
                c.lines()
                    .find_map(|l| l.strip_prefix("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            }),
            cpus: crate::cpus::usable_cpus().len(),
            governor: read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
            kernel: read("/proc/sys/kernel/osrelease"),
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct About {
    /// The command line as typed, secrets cut out (none when ringperf ran as a library).
    pub command_line: Option<String>,
    /// ringperf's version.
    pub ringperf_version: String,
    /// The load.
    pub load: Load,
    /// The workload.
    pub workload: Workload,
    /// The goodput objectives, as given (`ttft:200`).
    pub goodput_objectives: Vec<String>,
    /// The servers' URLs.
    pub servers: Vec<String>,
    /// The model asked, and the one the server named when it differs.
    pub model: String,
    /// See `model`.
    pub served_model: Option<String>,
    /// The client host.
    pub host: Host,
}

impl About {
    /// What `plan`'s run, reported as `r`, measured.
    pub fn of(plan: &Plan, r: &Report) -> About {
        let l = &plan.load;
        let spec = &plan.spec.load;
        let w = &plan.spec.workload;
        let mean = |sum: u64| (r.completed > 0).then(|| sum as f64 / r.completed as f64);
        let arrival = l.rate.map(|_| format!("{:?}", spec.arrival).to_lowercase());
        let text = match (&l.steps, l.rate, &l.offsets) {
            (Some(s), _, _) => format!("staircase of concurrency {:?}", s.caps),
            (None, Some(rate), _) => format!(
                "request rate {rate}/s ({}){}",
                arrival.as_deref().unwrap_or(""),
                if l.concurrency != u64::MAX {
                    format!(", at most {} in flight", l.concurrency)
                } else {
                    String::new()
                }
            ),
            (None, None, Some(_)) => "trace replay".into(),
            (None, None, None) => format!("concurrency {}", l.concurrency),
        };
        About {
            command_line: COMMAND_LINE
                .get()
                .map(|c| crate::redact::scrub(c).into_owned()),
            ringperf_version: env!("CARGO_PKG_VERSION").into(),
            load: Load {
                text,
                concurrency: (l.rate.is_none() && l.concurrency != u64::MAX)
                    .then_some(l.concurrency),
                request_rate: l.rate,
                arrival,
                duration_s: l.duration_ns.map(|d| d as f64 / 1e9),
                request_count: l.request_count,
                warmup_request_count: l.warmup,
                ramp_up_s: (l.ramp_ns > 0).then(|| l.ramp_ns as f64 / 1e9),
            },
            workload: Workload {
                isl_asked: w.input_file.is_none().then_some((w.isl_mean, w.isl_stddev)),
                osl_asked: w.osl_mean.map(|m| (m, w.osl_stddev)),
                isl_measured: mean(r.input_tokens),
                osl_measured: mean(r.output_tokens),
                dataset: match &w.input_file {
                    Some(f) => f.display().to_string(),
                    None => "synthetic prompts".into(),
                },
                tokenizer: plan.workload.tokenizer.source.clone(),
            },
            goodput_objectives: l
                .slos
                .iter()
                .map(|s| format!("{:?}:{}", s.metric, s.max_ms).to_lowercase())
                .collect(),
            servers: (0..plan.target.servers())
                .map(|i| plan.target.server(i).url())
                .collect(),
            model: plan.target.model.clone(),
            served_model: r.served_model.clone().filter(|m| *m != plan.target.model),
            host: Host::here(),
        }
    }

    /// The load in words: `concurrency 4 for 8 s after 10 warm-up requests`.
    fn load_text(&self) -> String {
        let length = match (self.load.duration_s, self.load.request_count) {
            (Some(d), _) => format!(" for {d} s"),
            (None, Some(n)) => format!(", {n} requests"),
            (None, None) => ", every prompt once".into(),
        };
        let warmup = match self.load.warmup_request_count {
            0 => String::new(),
            n => format!(" after {n} warm-up requests"),
        };
        format!("{}{length}{warmup}", self.load.text)
    }

    /// The workload in words: lengths asked and measured, and the prompts' source.
    fn workload_text(&self) -> String {
        let pair = |asked: Option<(u32, u32)>, measured: Option<f64>| {
            let m = measured.map_or("none".to_string(), |m| format!("{m:.0}"));
            match asked {
                Some((a, 0)) => format!("{a} asked, {m} measured"),
                Some((a, s)) => format!("{a}±{s} asked, {m} measured"),
                None => format!("{m} measured"),
            }
        };
        format!(
            "ISL {}; OSL {}; {}",
            pair(self.workload.isl_asked, self.workload.isl_measured),
            pair(self.workload.osl_asked, self.workload.osl_measured),
            self.workload.dataset
        )
    }

    /// The servers and the model.
    fn target_text(&self) -> String {
        format!(
            "{} model {}{}",
            self.servers.join(", "),
            crate::redact::model_shown(&self.model),
            self.served_model.as_ref().map_or(String::new(), |m| {
                format!(" (served as {})", crate::redact::model_shown(m))
            })
        )
    }

    /// ringperf and the host it ran on.
    fn client_text(&self) -> String {
        let h = &self.host;
        let mut parts = vec![format!("{} CPU(s)", h.cpus)];
        if let Some(g) = &h.governor {
            parts.push(format!("governor {g}"));
        }
        if let Some(k) = &h.kernel {
            parts.push(format!("Linux {k}"));
        }
        format!(
            "ringperf {} on {} ({})",
            self.ringperf_version,
            h.cpu_model.as_deref().unwrap_or("an unknown CPU"),
            parts.join(", ")
        )
    }

    /// The console's lines.
    pub fn lines(&self) -> String {
        let mut out = format!("Load: {}; {}\n", self.load_text(), self.workload_text());
        if !self.goodput_objectives.is_empty() {
            let _ = writeln!(
                out,
                "Goodput objectives: {}",
                self.goodput_objectives.join(" ")
            );
        }
        let _ = writeln!(
            out,
            "Target: {}; {}",
            self.target_text(),
            self.client_text()
        );
        out
    }

    /// The HTML page's head: the same, as a definition list.
    pub fn html(&self) -> String {
        let e = super::plot::escape;
        let mut rows = Vec::new();
        if let Some(c) = &self.command_line {
            rows.push(("Command line", format!("<code>{}</code>", e(c))));
        }
        rows.push(("Load", e(&self.load_text())));
        rows.push(("Workload", e(&self.workload_text())));
        if !self.goodput_objectives.is_empty() {
            rows.push(("Goodput objectives", e(&self.goodput_objectives.join(" "))));
        }
        rows.push(("Target", e(&self.target_text())));
        rows.push(("Client", e(&self.client_text())));
        let mut out = String::from("<dl class=\"about\">");
        for (k, v) in rows {
            let _ = write!(out, "<dt>{k}</dt><dd>{v}</dd>");
        }
        out.push_str("</dl>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_name_the_load_the_workload_the_target_and_the_host() {
        let a = About {
            command_line: Some("ringperf profile --concurrency 4".into()),
            ringperf_version: "0.1.0".into(),
            load: Load {
                text: "concurrency 4".into(),
                concurrency: Some(4),
                duration_s: Some(8.0),
                warmup_request_count: 10,
                ..Load::default()
            },
            workload: Workload {
                isl_asked: Some((550, 0)),
                osl_asked: Some((16, 2)),
                isl_measured: Some(550.0),
                osl_measured: Some(15.6),
                dataset: "synthetic prompts".into(),
                tokenizer: "embedded".into(),
            },
            goodput_objectives: vec!["ttft:200".into()],
            servers: vec!["http://127.0.0.1:8000/v1/chat/completions".into()],
            model: "m".into(),
            served_model: None,
            host: Host {
                cpu_model: Some("Some CPU".into()),
                cpus: 2,
                governor: None,
                kernel: Some("6.18".into()),
            },
        };
        let text = a.lines();
        assert!(
            text.starts_with(
                "Load: concurrency 4 for 8 s after 10 warm-up requests; ISL 550 asked, 550 \
                 measured; OSL 16±2 asked, 16 measured; synthetic prompts\n"
            ),
            "{text}"
        );
        assert!(text.contains("Goodput objectives: ttft:200\n"), "{text}");
        assert!(
            text.contains("ringperf 0.1.0 on Some CPU (2 CPU(s), Linux 6.18)"),
            "{text}"
        );
        let html = a.html();
        assert!(
            html.contains("<code>ringperf profile --concurrency 4</code>"),
            "{html}"
        );
        assert!(
            html.contains("<dt>Load</dt><dd>concurrency 4 for 8 s after 10 warm-up requests</dd>"),
            "{html}"
        );
    }

    #[test]
    fn the_command_line_quotes_what_a_shell_would_split() {
        let line: Vec<std::ffi::OsString> = ["ringperf", "--sim=--ttft 5ms", "it's"]
            .iter()
            .map(Into::into)
            .collect();
        set_command_line(line);
        assert_eq!(
            COMMAND_LINE.get().map(String::as_str),
            Some(r#"ringperf '--sim=--ttft 5ms' 'it'\''s'"#)
        );
    }
}
