//! Loading the tokenizer: a file, a directory, a Hugging Face model id, or the embedded Qwen3.
//!
//! The default is the Qwen3 tokenizer compiled into the binary (gzip, 2 MB; see
//! `qwen3/NOTICE.md` for its source and licence). A model id is resolved in the local Hugging
//! Face cache (`$HF_HUB_CACHE`, `$HF_HOME/hub` or `~/.cache/huggingface/hub`); ringperf does not
//! download, so an id that is not cached gets an error saying how to fetch it.

use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::WorkloadError;

const EMBEDDED_QWEN3: &[u8] = include_bytes!("qwen3/tokenizer.json.gz");

/// A loaded tokenizer and where it came from.
pub struct Tokenizer {
    inner: Arc<tokenizers::Tokenizer>,
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
        // AIPerf's word for its zero-network tokenizer; ringperf's is the embedded Qwen3.
        let Some(spec) = spec.filter(|s| !matches!(*s, "builtin" | "embedded")) else {
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
            inner: Arc::new(inner),
            source: file.display().to_string(),
        })
    }

    /// The served model's own tokenizer, as the peers count with it: the embedded one for a
    /// Qwen3 model (the same vocabulary), else `model`'s from the local Hugging Face cache. A
    /// default is never downloaded (a firewalled hub would stall the start); when the cache
    /// lacks it, the embedded tokenizer counts and its source says why.
    pub fn of_model(model: &str, revision: Option<&str>) -> Tokenizer {
        Self::of_model_with(model, revision, &super::hub::Hub::from_env())
    }

    /// [`Tokenizer::of_model`] with the hub's settings given.
    pub fn of_model_with(model: &str, revision: Option<&str>, hub: &super::hub::Hub) -> Tokenizer {
        let fallback = |why: String| {
            let mut t = Self::embedded().expect("the embedded tokenizer loads");
            t.source = format!(
                "embedded Qwen3 tokenizer: {why}; give --tokenizer {model} to download it, or \
                     --tokenizer PATH"
            );
            t
        };
        if model.to_ascii_lowercase().contains("qwen3") {
            let mut t = Self::embedded().expect("the embedded tokenizer loads");
            t.source = format!("embedded Qwen3 tokenizer (the tokenizer of {model})");
            return t;
        }
        // A hub id may have no organisation (`gpt2`).
        let id_like = !model.is_empty()
            && model.split('/').count() <= 2
            && model
                .split('/')
                .all(|p| !p.is_empty() && !p.starts_with('.'));
        if !id_like {
            return fallback(format!("{model:?} names no Hugging Face model"));
        }
        match hub.cached(model, revision.unwrap_or("main"), "tokenizer.json") {
            Some(f) => match tokenizers::Tokenizer::from_file(&f) {
                Ok(inner) => Tokenizer {
                    inner: Arc::new(inner),
                    source: format!(
                        "{} ({model}'s own, from the Hugging Face cache)",
                        f.display()
                    ),
                },
                Err(e) => fallback(format!("{}: {e}", f.display())),
            },
            None => fallback(format!(
                "{model}'s tokenizer is not in the Hugging Face cache ({})",
                hub.cache.display()
            )),
        }
    }

    /// The embedded Qwen3 tokenizer. It is unpacked and parsed once per process (most of a
    /// second of CPU in a test build) and shared by every run the process makes: a program
    /// that profiles many times in one process, or the test suite, pays for it once.
    pub fn embedded() -> Result<Tokenizer, WorkloadError> {
        // A mutex rather than a race to fill a cell: threads that ask together wait for one
        // parse instead of each parsing.
        static PARSED: Mutex<Option<Arc<tokenizers::Tokenizer>>> = Mutex::new(None);
        let mut parsed = PARSED.lock().unwrap_or_else(|e| e.into_inner());
        let inner = match &*parsed {
            Some(t) => t.clone(),
            None => {
                let mut json = Vec::with_capacity(12 << 20);
                flate2::read::GzDecoder::new(EMBEDDED_QWEN3)
                    .read_to_end(&mut json)
                    .map_err(err)?;
                let t = Arc::new(tokenizers::Tokenizer::from_bytes(&json).map_err(err)?);
                *parsed = Some(t.clone());
                t
            }
        };
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
    fn the_embedded_tokenizer_is_parsed_once_and_shared() {
        let (a, b) = (
            Tokenizer::embedded().unwrap(),
            Tokenizer::embedded().unwrap(),
        );
        assert!(Arc::ptr_eq(&a.inner, &b.inner));
        assert_eq!(a.encode(" the of").unwrap(), b.encode(" the of").unwrap());
    }

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
    fn a_models_own_tokenizer_comes_from_the_cache_and_never_from_the_network() {
        let dir = std::env::temp_dir().join(format!("ringperf-hf-own-{}", std::process::id()));
        let commit = "89abcdef0123456789abcdef0123456789abcdef";
        let snap = dir.join("models--org--small/snapshots").join(commit);
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::create_dir_all(dir.join("models--org--small/refs")).unwrap();
        std::fs::write(dir.join("models--org--small/refs/main"), commit).unwrap();
        // A real tokenizer file: the embedded one, unpacked.
        let mut json = Vec::new();
        flate2::read::GzDecoder::new(EMBEDDED_QWEN3)
            .read_to_end(&mut json)
            .unwrap();
        std::fs::write(snap.join("tokenizer.json"), &json).unwrap();
        // Not offline, and a hub that cannot be reached: nothing may be asked of it.
        let hub = super::super::hub::Hub {
            offline: false,
            endpoint: "http://127.0.0.1:9".into(),
            cache: dir.clone(),
            ..super::super::hub::Hub::from_env()
        };
        let t = Tokenizer::of_model_with("org/small", None, &hub);
        assert!(t.source.contains("org/small's own"), "{}", t.source);
        let t = Tokenizer::of_model_with("org/absent", None, &hub);
        assert!(
            t.source
                .starts_with("embedded Qwen3 tokenizer: org/absent's tokenizer is not in"),
            "{}",
            t.source
        );
        assert_eq!(t.count("hello world").unwrap(), 2);
        let t = Tokenizer::of_model_with("Qwen/Qwen3-0.6B", None, &hub);
        assert!(t.source.contains("the tokenizer of Qwen/Qwen3-0.6B"));
        let t = Tokenizer::of_model_with("ringperf-sim", None, &hub);
        assert!(
            t.source.contains("not in the Hugging Face cache"),
            "{}",
            t.source
        );
        let t = Tokenizer::of_model_with("../x/y", None, &hub);
        assert!(
            t.source.contains("names no Hugging Face model"),
            "{}",
            t.source
        );
        assert!(Tokenizer::load_with(Some("builtin"), None, &hub)
            .unwrap()
            .source
            .starts_with("embedded Qwen3"));
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
