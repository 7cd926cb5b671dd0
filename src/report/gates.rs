//! `--fail-on` gates judged on the run's JSON, and a JUnit XML of them for CI systems.

use serde_json::Value;

use crate::plan::output::Gate;

/// One gate, judged.
#[derive(Debug, Clone)]
pub struct Judged {
    /// As written (or `client verdict`).
    pub name: String,
    /// The run's figure, when it has one.
    pub figure: Option<f64>,
    /// Why it failed, when it did.
    pub failure: Option<String>,
}

/// The figure a gate reads from the `profile_export_ringperf.json` document.
fn figure(doc: &Value, g: &Gate) -> Option<f64> {
    if g.metric == "error_rate" {
        let ok = doc["request_count"]["avg"].as_f64()?;
        let bad = doc["error_request_count"]["avg"].as_f64().unwrap_or(0.0);
        return Some(if ok + bad > 0.0 {
            bad / (ok + bad)
        } else {
            0.0
        });
    }
    doc.get(&g.metric)?.get(&g.stat)?.as_f64()
}

/// A `warning:CODE` gate: fails on the first warning of that code (of any, for `any`).
fn warned(doc: &Value, g: &Gate, code: &str) -> Judged {
    let warnings = doc
        .pointer("/client_health/warnings")
        .and_then(Value::as_array);
    let hits: Vec<&Value> = warnings
        .into_iter()
        .flatten()
        .filter(|w| code == "any" || w.get("code").and_then(Value::as_str) == Some(code))
        .collect();
    Judged {
        name: g.text.clone(),
        figure: Some(hits.len() as f64),
        failure: hits.first().map(|w| {
            format!(
                "{}: the run warned: {} [{}]",
                g.text,
                w.get("message").and_then(Value::as_str).unwrap_or(""),
                w.get("code").and_then(Value::as_str).unwrap_or("")
            )
        }),
    }
}

/// Judges every gate on `doc`, and the client verdict unless a client-limited run is allowed.
pub fn judge(
    gates: &[Gate],
    doc: &Value,
    client_limited: Option<&str>,
    allow_client_limited: bool,
) -> Vec<Judged> {
    let mut out: Vec<Judged> = gates
        .iter()
        .map(|g| {
            if let Some(code) = &g.warning {
                return warned(doc, g, code);
            }
            let f = figure(doc, g);
            let unit = if g.time { " ms" } else { "" };
            let failure = match f {
                None => Some(format!(
                    "{}: the run has no {}.{} (not measured)",
                    g.text, g.metric, g.stat
                )),
                Some(v) if g.cmp.holds(v, g.bound) => Some(format!(
                    "{}: {}.{} was {v:.4}{unit}",
                    g.text, g.metric, g.stat
                )),
                Some(_) => None,
            };
            Judged {
                name: g.text.clone(),
                figure: f,
                failure,
            }
        })
        .collect();
    if !gates.is_empty() && !allow_client_limited {
        out.push(Judged {
            name: "client verdict".into(),
            figure: None,
            failure: client_limited
                .map(|why| format!("{why} (--allow-client-limited accepts such a run)")),
        });
    }
    out
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A JUnit XML report: one test case per gate.
pub fn junit(judged: &[Judged]) -> String {
    let failures = judged.iter().filter(|j| j.failure.is_some()).count();
    let mut s = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"ringperf\" tests=\"{}\" failures=\"{failures}\">\n  <testsuite name=\"ringperf gates\" tests=\"{}\" failures=\"{failures}\">\n",
        judged.len(),
        judged.len()
    );
    for j in judged {
        s.push_str(&format!(
            "    <testcase classname=\"ringperf.gates\" name=\"{}\"",
            xml(&j.name)
        ));
        match &j.failure {
            Some(f) => s.push_str(&format!(
                ">\n      <failure message=\"{}\"/>\n    </testcase>\n",
                xml(f)
            )),
            None => s.push_str("/>\n"),
        }
    }
    s.push_str("  </testsuite>\n</testsuites>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gates_cross_hold_and_miss_and_the_junit_says_which() {
        let doc = json!({
            "time_to_first_token": {"unit": "ms", "p99": 620.0, "avg": 300.0},
            "request_count": {"avg": 99.0},
            "error_request_count": {"avg": 1.0},
        });
        let g = |s: &str| Gate::parse(s).unwrap();
        let gates = [
            g("ttft.p99>500ms"),
            g("ttft.avg>500ms"),
            g("error_rate>0.05"),
            g("itl.p99>50ms"),
        ];
        let j = judge(&gates, &doc, None, false);
        assert_eq!(j.len(), 5, "four gates and the client verdict");
        assert!(j[0].failure.as_deref().unwrap().contains("was 620.0000 ms"));
        assert!(j[1].failure.is_none());
        assert_eq!(j[2].figure, Some(0.01));
        assert!(j[2].failure.is_none());
        assert!(j[3].failure.as_deref().unwrap().contains("not measured"));
        assert!(j[4].failure.is_none());
        let limited = judge(&gates[1..2], &doc, Some("the client distorted"), false);
        assert!(limited[1].failure.is_some());
        assert_eq!(judge(&gates[1..2], &doc, Some("x"), true).len(), 1);
        let x = junit(&j);
        assert!(x.contains("tests=\"5\" failures=\"2\""), "{x}");
        assert!(x.contains("name=\"ttft.p99&gt;500ms\""), "{x}");
        assert!(
            x.contains(
                "<failure message=\"ttft.p99&gt;500ms: time_to_first_token.p99 was 620.0000 ms\"/>"
            ),
            "{x}"
        );
    }
}
