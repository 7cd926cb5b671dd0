//! Every file ringperf writes goes through here: whole or not at all.
//!
//! A file is written under a hidden name beside its own (`.NAME.partial`), synced, then renamed:
//! a full disk, a size limit or a crash leaves no half-written file under the final name (an
//! earlier run's file of that name stays as it was), and the error names the file and why.
//! Secrets were cut out of what is written where it came in ([`crate::redact`]).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The hidden name a file is written under before it is renamed.
fn partial(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "artifact".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.partial"))
}

/// An error that names the file.
fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Writes `path` with what `fill` writes; the file appears only once all of it is on disk.
pub(crate) fn write_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = partial(path);
    // A second Ctrl-C, which ends the process at once, removes it too.
    let _doomed = crate::sys::doomed(&tmp);
    let done = (|| {
        let file = std::fs::File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 16, file);
        fill(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_data()
    })();
    match done {
        Ok(()) => std::fs::rename(&tmp, path).map_err(|e| named(path, e)),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(named(path, e))
        }
    }
}

/// Writes `bytes` to `path` (see [`write_with`]).
pub(crate) fn write(path: &Path, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    write_with(path, |w| w.write_all(bytes.as_ref()))
}

/// Appends `bytes` to `path` as a new line (vLLM's `--append-result`); the file is rewritten
/// whole with them, so that a failed append leaves the old file as it was.
pub(crate) fn append_line(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let old = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(named(path, e)),
    };
    write_with(path, |w| {
        w.write_all(&old)?;
        if !old.is_empty() {
            w.write_all(b"\n")?;
        }
        w.write_all(bytes)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_partial() {
        let dir = std::env::temp_dir().join(format!("ringperf-artifact-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.json");
        write(&path, "old\n").unwrap();
        let e = write_with(&path, |w| {
            w.write_all(&[b'x'; 100_000])?;
            Err(io::Error::new(io::ErrorKind::StorageFull, "disk full"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("a.json: disk full"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
        assert!(!partial(&path).exists());
        append_line(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n\nnew");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
