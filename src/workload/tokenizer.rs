//! Loading the tokenizer: a file, a directory, a Hugging Face model id, or the embedded Qwen3.
//!
//! The default is the Qwen3 tokenizer compiled into the binary (gzip, 2 MB; see
//! `qwen3/NOTICE.md` for its source and licence). A model id is resolved in the local Hugging
//! Face cache (`$HF_HUB_CACHE`, `$HF_HOME/hub` or `~/.cache/huggingface/hub`); ringperf does not
//! download, so an id that is not cached gets an error saying how to fetch it.

use std::io::Read;
use std::path::Path;

use super::WorkloadError;

const EMBEDDED_QWEN3: &[u8] = include_bytes!("qwen3/tokenizer.json.gz");

/// A loaded tokenizer and where it came from.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// Human description of the source, printed once at start.
    pub source: String,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokenizer({})", self.source)
    }
}

fn err(e: impl std::fmt::Display) -> WorkloadError {
    WorkloadError::Tokenizer(e.to_string())
}

impl Tokenizer {
    /// Loads from `spec` (a path, a directory or a model id: from the Hugging Face cache, or
    /// downloaded into it, at `revision`), or the embedded default.
    pub fn load(spec: Option<&str>, revision: Option<&str>) -> Result<Tokenizer, WorkloadError> {
        Self::load_with(spec, revision, &super::hub::Hub::from_env())
    }

    /// [`Tokenizer::load`] with the hub's settings given.
    pub fn load_with(
        spec: Option<&str>,
        revision: Option<&str>,
        hub: &super::hub::Hub,
    ) -> Result<Tokenizer, WorkloadError> {
        let Some(spec) = spec else {
            return Self::embedded();
        };
        let path = Path::new(spec);
        let file = if path.is_dir() {
            let f = path.join("tokenizer.json");
            if !f.is_file() {
                return Err(err(format!("{} has no tokenizer.json", path.display())));
            }
            f
        } else if path.is_file() {
            path.to_path_buf()
        } else if looks_like_model_id(spec) {
            hub.file(spec, revision.unwrap_or("main"), "tokenizer.json")?
        } else {
            return Err(err(format!("{spec:?}: no such file or directory")));
        };
        let inner = tokenizers::Tokenizer::from_file(&file)
            .map_err(|e| err(format!("{}: {e}", file.display())))?;
        Ok(Tokenizer {
            inner,
            source: file.display().to_string(),
        })
    }

    /// The embedded Qwen3 tokenizer.
    pub fn embedded() -> Result<Tokenizer, WorkloadError> {
        let mut json = Vec::with_capacity(12 << 20);
        flate2::read::GzDecoder::new(EMBEDDED_QWEN3)
            .read_to_end(&mut json)
            .map_err(err)?;
        let inner = tokenizers::Tokenizer::from_bytes(&json).map_err(err)?;
        Ok(Tokenizer {
            inner,
            source: "embedded Qwen3 tokenizer (Apache-2.0, Qwen team); pass --tokenizer to \
                     match your model"
                .into(),
        })
    }

    /// Token ids of `text` (no special tokens added).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, WorkloadError> {
        let enc = self.inner.encode(text, false).map_err(err)?;
        Ok(enc.get_ids().to_vec())
    }

    /// Number of tokens in `text`.
    pub fn count(&self, text: &str) -> Result<usize, WorkloadError> {
        Ok(self.inner.encode(text, false).map_err(err)?.len())
    }

    /// Text of token ids.
    pub fn decode(&self, ids: &[u32]) -> Result<String, WorkloadError> {
        self.inner.decode(ids, false).map_err(err)
    }
}

fn looks_like_model_id(s: &str) -> bool {
    let parts: Vec<&str> = s.split('/').collect();
    parts.len() == 2 && parts.iter().all(|p| !p.is_empty() && !p.starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids_and_cache_lookup() {
        assert!(looks_like_model_id("Qwen/Qwen3-0.6B"));
        assert!(!looks_like_model_id("tokenizer.json"));
        assert!(!looks_like_model_id("./a/b"));
        let dir = std::env::temp_dir().join(format!("ringperf-hf-{}", std::process::id()));
        let commit = "0123456789abcdef0123456789abcdef01234567";
        let snap = dir.join("models--org--m/snapshots").join(commit);
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::create_dir_all(dir.join("models--org--m/refs")).unwrap();
        std::fs::write(dir.join("models--org--m/refs/main"), format!("{commit}\n")).unwrap();
        std::fs::write(snap.join("tokenizer.json"), "{}").unwrap();
        let hub = super::super::hub::Hub {
            offline: true,
            cache: dir.clone(),
            ..super::super::hub::Hub::from_env()
        };
        let want = Some(snap.join("tokenizer.json"));
        assert_eq!(hub.cached("org/m", "main", "tokenizer.json"), want);
        assert_eq!(hub.cached("org/m", commit, "tokenizer.json"), want);
        assert_eq!(hub.cached("org/m", "v2", "tokenizer.json"), None);
        assert_eq!(hub.cached("org/other", "main", "tokenizer.json"), None);
        let e = Tokenizer::load_with(Some("org/other"), None, &hub)
            .unwrap_err()
            .to_string();
        assert!(e.contains("HF_HUB_OFFLINE is set"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn missing_file_is_a_clear_error() {
        let e = Tokenizer::load(Some("/nonexistent/tok.json"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no such file"), "{e}");
    }
}
