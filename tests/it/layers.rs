//! The import rule, checked on the source: every module of `src/` belongs to a layer, and
//! imports (any `crate::` path) only from its own layer or the layers below. Within the
//! running layer the engine, the simulator and telemetry stay apart (telemetry may use its
//! scraper). A backward import fails this test with the file and the offending module.

use crate::support;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// From the bottom: the layers, and whether modules of one layer may import each other.
const LAYERS: &[(&str, &[&str], bool)] = &[
    (
        "foundations",
        &[
            "sys", "clock", "units", "stats", "cpus", "host", "http", "sse", "prom", "tls",
            "timer", "runtime", "arrival", "redact", "artifact", "warning",
        ],
        true,
    ),
    (
        "what is sent and measured",
        &[
            "api", "record", "endpoint", "net", "blocking", "exchange", "workload", "gpu", "otlp",
        ],
        true,
    ),
    ("the plan", &["plan"], false),
    (
        "running: the engine, and beside it the simulator and telemetry",
        &[
            "engine",
            "sim",
            "telemetry",
            "server_metrics",
            "preflight",
            "doctor",
        ],
        false,
    ),
    ("the report", &["report"], false),
    ("the live view", &["ui"], false),
    ("the command line", &["cli"], false),
    ("the commands", &["app"], false),
];

/// Imports allowed inside a layer whose modules otherwise stay apart.
const WITHIN: &[(&str, &str)] = &[("telemetry", "server_metrics")];

fn layer_of(module: &str) -> Option<(usize, bool)> {
    LAYERS
        .iter()
        .position(|(_, mods, _)| mods.contains(&module))
        .map(|i| (i, LAYERS[i].2))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The crate modules a source text names (`crate::x`), comments included: a doc link that
/// points up the layers is a dependency in the reader's head too.
fn imports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        let boundary = i == 0 || !text.as_bytes()[i - 1].is_ascii_alphanumeric();
        let name: String = text[i + 7..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        if boundary && !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

/// Every backward import in the tree under `src`.
fn violations(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut bad = Vec::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        // The crate root, the binary and `internals` (which only declares modules of the layers,
        // public for the tests) import nothing of their own.
        if matches!(module.as_str(), "lib" | "main" | "internals") {
            continue;
        }
        let (layer, free) = layer_of(&module)
            .unwrap_or_else(|| panic!("{}: module {module} is in no layer", rel.display()));
        for m in imports(&std::fs::read_to_string(&f).unwrap()) {
            if m == module {
                continue;
            }
            let Some((l, _)) = layer_of(&m) else {
                bad.push(format!("{}: crate::{m} is in no layer", rel.display()));
                continue;
            };
            let sideways = l == layer && !free && !WITHIN.contains(&(module.as_str(), m.as_str()));
            if l > layer || sideways {
                bad.push(format!(
                    "{}: {module} ({}) imports crate::{m} ({})",
                    rel.display(),
                    LAYERS[layer].0,
                    LAYERS[l].0
                ));
            }
        }
    }
    bad
}

#[test]
fn imports_point_one_way() {
    let _shared = support::shared();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let bad = violations(&src);
    assert!(bad.is_empty(), "backward imports:\n{}", bad.join("\n"));
}

#[test]
fn a_backward_import_is_caught() {
    let _shared = support::shared();
    // A copy of two modules where the plan reaches up into the report, and the engine
    // sideways into the simulator.
    let dir = crate::support::artifact_dir("layers");
    std::fs::create_dir_all(dir.join("engine")).unwrap();
    std::fs::write(
        dir.join("plan.rs"),
        "use crate::report::Report;\nuse crate::record::Record;\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("engine/mod.rs"),
        "fn f() { crate::sim::start(); }\n",
    )
    .unwrap();
    let mut bad = violations(&dir);
    bad.sort();
    assert_eq!(
        bad,
        vec![
            "engine/mod.rs: engine (running: the engine, and beside it the simulator and telemetry) imports crate::sim (running: the engine, and beside it the simulator and telemetry)".to_string(),
            "plan.rs: plan (the plan) imports crate::report (the report)".to_string(),
        ]
    );
}
