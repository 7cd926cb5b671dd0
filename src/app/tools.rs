//! The commands that read or check rather than run a load: doctor, merge, compare,
//! analyze-trace, completions and man.

use std::path::{Path, PathBuf};

use super::{write_out, write_report, Fatal, MERGE_INCOMPLETE};
use crate::cli::{Cli, DoctorArgs};
use crate::report;

/// `ringperf doctor`: the host's checks for a planned run; a blocker is an error.
pub(super) fn doctor(a: &DoctorArgs) -> Result<(), Fatal> {
    let checks = crate::doctor::run(crate::doctor::Planned::one_process(a.concurrency, a.sim));
    crate::redact::print(&crate::doctor::render(&checks));
    let blockers = checks
        .iter()
        .filter(|c| c.level == crate::doctor::Level::Fail)
        .count();
    if blockers > 0 {
        return Err(Fatal::Refused(format!(
            "doctor: {blockers} blocker(s) for this run; the FAIL lines say how to fix them"
        )));
    }
    Ok(())
}

/// `ringperf merge`: one report from the nodes' folders. Returns the exit code: 0, or
/// [`MERGE_INCOMPLETE`] when a node is missing (what was merged is written still).
pub(super) fn merge(dirs: &[PathBuf], artifact_dir: &Path) -> Result<i32, Fatal> {
    let m = report::merge::merge(dirs, artifact_dir)?;
    crate::redact::print(&m.console);
    write_report(artifact_dir, true)?;
    crate::redact::say!("ringperf: merged artifacts in {}", artifact_dir.display());
    Ok(if m.incomplete.is_empty() {
        0
    } else {
        MERGE_INCOMPLETE
    })
}

/// `ringperf analyze-trace`: a trace file's prefix-sharing and length statistics.
pub(super) fn analyze_trace(
    input_file: &Path,
    block_size: u64,
    output_file: Option<&Path>,
) -> Result<(), Fatal> {
    let lines = crate::workload::files::read_trace(input_file)?;
    let a = report::trace_analysis::analyze(&lines, block_size);
    crate::redact::print(&report::trace_analysis::render(&a));
    if let Some(path) = output_file {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| Fatal::io(format!("creating {}", dir.display()), e))?;
        }
        let json = serde_json::to_vec_pretty(&a).expect("plain data");
        crate::artifact::write(path, &json)
            .map_err(|e| Fatal::io(format!("writing the analysis to {}", path.display()), e))?;
        crate::redact::say!("ringperf: analysis report saved to {}", path.display());
    }
    Ok(())
}

/// `ringperf compare`: runs side by side, as text and as a page.
pub(super) fn compare(
    dirs: &[PathBuf],
    labels: &[String],
    artifact_dir: &Path,
) -> Result<(), Fatal> {
    if !labels.is_empty() && labels.len() != dirs.len() {
        return Err(Fatal::Refused(format!(
            "--label was given {} times for {} folders: give one per folder, in their order",
            labels.len(),
            dirs.len()
        )));
    }
    let sources = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| report::compare::read(d, labels.get(i).map(String::as_str)))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| Fatal::io("reading the runs to compare", e))?;
    let c = report::compare::compare(sources);
    crate::redact::print(&c.render());
    c.write(artifact_dir).map_err(|e| {
        Fatal::io(
            format!("writing the comparison to {}", artifact_dir.display()),
            e,
        )
    })?;
    crate::redact::say!(
        "ringperf: wrote {}",
        artifact_dir.join(report::compare::HTML).display()
    );
    Ok(())
}

/// `ringperf completions SHELL`: the shell's completion script, on stdout.
pub(super) fn completions(shell: clap_complete::Shell) -> Result<(), Fatal> {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    // Into a buffer, then out: a reader that closes early (`| head`) ends the command
    // quietly instead of a write panicking on the broken pipe.
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "ringperf", &mut out);
    write_out(&out)
}

/// `ringperf man [SUBCOMMAND]`: the manual page, on stdout.
pub(super) fn man(subcommand: Option<&str>) -> Result<(), Fatal> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let cmd = match subcommand {
        None => cmd,
        Some(name) => cmd
            .find_subcommand(name)
            .cloned()
            .ok_or_else(|| Fatal::Refused(format!("man: no subcommand {name:?}")))?
            .name(format!("ringperf-{name}")),
    };
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut page)
        .map_err(|e| Fatal::io("rendering the manual page", e))?;
    write_out(&page)
}
