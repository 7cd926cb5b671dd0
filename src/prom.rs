//! Prometheus text exposition format (version 0.0.4), parsed.
//!
//! Enough of the format for inference servers' `/metrics`: `# TYPE` and `# HELP` lines,
//! samples with labels (escaped `\\`, `\"` and `\n` in values), `+Inf`/`-Inf`/`NaN`, and an
//! optional timestamp. Histogram and summary series keep their `_bucket`/`_sum`/`_count`
//! names; [`Exposition::kind`] maps them back to their family.

use std::collections::HashMap;

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Monotonic counter.
    Counter,
    /// Gauge.
    Gauge,
    /// Histogram (`_bucket`, `_sum`, `_count`).
    Histogram,
    /// Summary.
    Summary,
    /// No `# TYPE` line.
    Untyped,
}

/// One sample line.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Sample {
    /// Series name.
    pub name: String,
    /// Labels in the order written.
    pub labels: Vec<(String, String)>,
    /// Value.
    pub value: f64,
}

impl Sample {
    /// A label's value.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed `/metrics` page.
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    /// Family types from `# TYPE`.
    pub types: HashMap<String, Kind>,
    /// Every sample, in order.
    pub samples: Vec<Sample>,
}

/// A line that is not valid exposition text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metrics line {line}: {why}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub why: Why,
}

/// What is wrong with a line of exposition text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Why {
    /// `# TYPE` without a name or a type.
    #[error("TYPE needs a name and a type")]
    TypeShape,
    /// `# TYPE name kind` with a kind that is not one.
    #[error("unknown type {0:?}")]
    Type(String),
    /// A sample without its value.
    #[error("a sample needs a value")]
    NoValue,
    /// A metric name with other than letters, digits, `_` and `:`.
    #[error("invalid metric name {0:?}")]
    Name(String),
    /// A value that is not a number.
    #[error("invalid value {0:?}")]
    Value(String),
    /// A timestamp that is not whole milliseconds.
    #[error("invalid timestamp {0:?}")]
    Timestamp(String),
    /// A label that is not `key="value"`.
    #[error("malformed label set")]
    Labels,
    /// A label value without its closing quote.
    #[error("unterminated label value")]
    Unterminated,
    /// A backslash before other than `n`, a backslash or `"`.
    #[error("invalid escape in label value")]
    Escape,
}

impl Exposition {
    /// The type of the family a series belongs to.
    pub fn kind(&self, series: &str) -> Kind {
        if let Some(k) = self.types.get(series) {
            return *k;
        }
        for suffix in ["_bucket", "_sum", "_count", "_total", "_created"] {
            if let Some(base) = series.strip_suffix(suffix) {
                if let Some(k) = self.types.get(base) {
                    return *k;
                }
            }
        }
        Kind::Untyped
    }

    /// Samples of one series.
    pub fn series<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == name)
    }

    /// Sum of one series over all label sets (None if absent).
    pub fn sum(&self, name: &str) -> Option<f64> {
        let mut it = self.series(name).peekable();
        it.peek()?;
        Some(it.map(|s| s.value).sum())
    }
}

/// Parses exposition text.
pub fn parse(text: &str) -> Result<Exposition, ParseError> {
    let mut out = Exposition::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let err = |why| ParseError { line: i + 1, why };
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let mut parts = rest.split_whitespace();
            if parts.next() == Some("TYPE") {
                let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                    return Err(err(Why::TypeShape));
                };
                let kind = match kind {
                    "counter" => Kind::Counter,
                    "gauge" => Kind::Gauge,
                    "histogram" => Kind::Histogram,
                    "summary" => Kind::Summary,
                    "untyped" | "unknown" => Kind::Untyped,
                    other => return Err(err(Why::Type(other.into()))),
                };
                out.types.insert(name.to_string(), kind);
            }
            continue;
        }
        out.samples.push(parse_sample(line).map_err(err)?);
    }
    Ok(out)
}

fn parse_sample(line: &str) -> Result<Sample, Why> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .ok_or(Why::NoValue)?;
    let name = &line[..name_end];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    {
        return Err(Why::Name(name.into()));
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, used) = parse_labels(after)?;
        labels = parsed;
        rest = &after[used..];
    }
    let mut fields = rest.split_whitespace();
    let value = fields.next().ok_or(Why::NoValue)?;
    let value = match value {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().map_err(|_| Why::Value(v.into()))?,
    };
    if let Some(ts) = fields.next() {
        ts.parse::<i64>().map_err(|_| Why::Timestamp(ts.into()))?;
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Parses `k="v",…}`; returns the labels and the bytes used, the closing brace included.
fn parse_labels(s: &str) -> Result<(Vec<(String, String)>, usize), Why> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut labels = Vec::new();
    loop {
        while i < b.len() && (b[i] == b' ' || b[i] == b',') {
            i += 1;
        }
        if i < b.len() && b[i] == b'}' {
            return Ok((labels, i + 1));
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        let key = &s[start..i];
        if key.is_empty() || i + 1 >= b.len() || b[i] != b'=' || b[i + 1] != b'"' {
            return Err(Why::Labels);
        }
        i += 2;
        let mut value = String::new();
        loop {
            let Some(&c) = b.get(i) else {
                return Err(Why::Unterminated);
            };
            match c {
                b'"' => {
                    i += 1;
                    break;
                }
                b'\\' => {
                    match b.get(i + 1) {
                        Some(b'n') => value.push('\n'),
                        Some(b'\\') => value.push('\\'),
                        Some(b'"') => value.push('"'),
                        _ => return Err(Why::Escape),
                    }
                    i += 2;
                }
                _ => {
                    let ch = s[i..].chars().next().expect("in bounds");
                    value.push(ch);
                    i += ch.len_utf8();
                }
            }
        }
        labels.push((key.to_string(), value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_escapes_specials_and_timestamps() {
        let text = "# HELP x A thing\n# TYPE x gauge\n\
                    x{a=\"1\",b=\"q\\\"u\\\\o\\nte\"} 2.5\n\
                    y_bucket{le=\"+Inf\"} 7 1700000000000\n\
                    z NaN\nw -Inf\n";
        let e = parse(text).unwrap();
        assert_eq!(e.samples.len(), 4);
        assert_eq!(e.samples[0].label("b"), Some("q\"u\\o\nte"));
        assert_eq!(e.samples[0].value, 2.5);
        assert_eq!(e.kind("x"), Kind::Gauge);
        assert_eq!(e.samples[1].label("le"), Some("+Inf"));
        assert!(e.samples[2].value.is_nan());
        assert_eq!(e.samples[3].value, f64::NEG_INFINITY);
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("ok 1\nbad{a=\"1\" 2\n").unwrap_err();
        assert_eq!((e.line, e.why), (2, Why::Labels));
        let why = |text: &str| parse(text).unwrap_err().why;
        assert_eq!(why("x notanumber"), Why::Value("notanumber".into()));
        assert_eq!(why("x 1 soon"), Why::Timestamp("soon".into()));
        assert_eq!(why("x-y 1"), Why::Name("x-y".into()));
        assert_eq!(why("x"), Why::NoValue);
        assert_eq!(why("x{a=1} 2"), Why::Labels);
        assert_eq!(why("x{a=\"1} 2"), Why::Unterminated);
        assert_eq!(why("x{a=\"\\t\"} 2"), Why::Escape);
        assert_eq!(why("# TYPE x"), Why::TypeShape);
        assert_eq!(why("# TYPE x bogus"), Why::Type("bogus".into()));
        assert_eq!(
            parse("\n# TYPE x bogus").unwrap_err().to_string(),
            r#"metrics line 2: unknown type "bogus""#
        );
    }
}
