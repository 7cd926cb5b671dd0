//! Loading the tokenizer: a file, a directory, a Hugging Face model id, or the embedded Qwen3.
//!
//! The default is the Qwen3 tokenizer compiled into the binary (gzip, 2 MB; see
//! `qwen3/NOTICE.md` for its source and licence). A model id is resolved in the local Hugging
//! Face cache (`$HF_HUB_CACHE`, `$HF_HOME/hub` or `~/.cache/huggingface/hub`); ringperf does not
//! download, so an id that is not cached gets an error saying how to fetch it.

use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::{TokenizerError, WorkloadError};

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

/// A `tokenizer.json` read from `path` by [`parse`].
fn parse_file(path: &Path) -> tokenizers::Result<tokenizers::Tokenizer> {
    parse(&std::fs::read(path)?)
}

/// A `tokenizer.json`, parsed as the `tokenizers` crate parses it, faster where the model is
/// BPE (most LLMs'): see [`BpeFile`]. Any other file goes through the crate.
fn parse(json: &[u8]) -> tokenizers::Result<tokenizers::Tokenizer> {
    match serde_json::from_slice::<BpeFile>(json) {
        Ok(f) => f.build(),
        Err(_) => tokenizers::Tokenizer::from_bytes(json),
    }
}

/// A `tokenizer.json` whose model is BPE. The crate reads the `model` object three times
/// over (an untagged enum buffers it, a flattened tag copies it into a JSON value with
/// ordered maps, then the model is read from that). Here the BPE model reads itself in one
/// pass, and [`BpeFile::build`] puts the parts and the added tokens together as the crate's
/// own deserializer does. Qwen3's 151,643 tokens and 151,387 merges on 2 cores (medians of
/// 5): 0.19 s here against 0.43 s through the crate at opt-level 1, 0.32 s against 0.84 s in
/// the unoptimised test build.
#[derive(serde::Deserialize)]
struct BpeFile {
    version: String,
    truncation: Option<tokenizers::TruncationParams>,
    padding: Option<tokenizers::PaddingParams>,
    // Each with its `id`, which is not read: as in the crate, the tokens are added in order
    // after the model's vocabulary, and a token the vocabulary holds keeps its id there.
    #[serde(default)]
    added_tokens: Vec<tokenizers::AddedToken>,
    normalizer: Option<tokenizers::NormalizerWrapper>,
    pre_tokenizer: Option<tokenizers::PreTokenizerWrapper>,
    post_processor: Option<tokenizers::PostProcessorWrapper>,
    decoder: Option<tokenizers::DecoderWrapper>,
    model: tokenizers::models::bpe::BPE,
}

impl BpeFile {
    fn build(self) -> tokenizers::Result<tokenizers::Tokenizer> {
        if self.version != "1.0" {
            return Err(format!("Unknown tokenizer version '{}'", self.version).into());
        }
        use tokenizers::{DecoderWrapper, ModelWrapper, NormalizerWrapper};
        use tokenizers::{PostProcessorWrapper, PreTokenizerWrapper, TokenizerBuilder};
        type Builder = TokenizerBuilder<
            ModelWrapper,
            NormalizerWrapper,
            PreTokenizerWrapper,
            PostProcessorWrapper,
            DecoderWrapper,
        >;
        let mut t: tokenizers::Tokenizer = Builder::new()
            .with_model(self.model.into())
            .with_truncation(self.truncation)
            .with_padding(self.padding)
            .with_normalizer(self.normalizer)
            .with_pre_tokenizer(self.pre_tokenizer)
            .with_post_processor(self.post_processor)
            .with_decoder(self.decoder)
            .build()?
            .into();
        t.add_tokens(self.added_tokens)?;
        Ok(t)
    }
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
                return Err(TokenizerError::NoFileIn(path.to_path_buf()).into());
            }
            f
        } else if path.is_file() {
            path.to_path_buf()
        } else if looks_like_model_id(spec) {
            hub.file(spec, revision.unwrap_or("main"), "tokenizer.json")?
        } else {
            return Err(TokenizerError::NotFound(spec.to_string()).into());
        };
        let inner = parse_file(&file).map_err(|source| TokenizerError::Unreadable {
            file: file.clone(),
            source,
        })?;
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
            Some(f) => match parse_file(&f) {
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

    /// The embedded Qwen3 tokenizer. It is unpacked and parsed once per process (a third of
    /// a second of CPU in the test build) and shared by every run the process makes: a program
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
                    .map_err(|e| TokenizerError::Embedded(e.into()))?;
                let t = Arc::new(parse(&json).map_err(TokenizerError::Embedded)?);
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
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(TokenizerError::Encoding)?;
        Ok(enc.get_ids().to_vec())
    }

    /// Number of tokens in `text`.
    pub fn count(&self, text: &str) -> Result<usize, TokenizerError> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(TokenizerError::Encoding)?;
        Ok(enc.len())
    }

    /// Text of token ids.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        self.inner
            .decode(ids, false)
            .map_err(TokenizerError::Encoding)
    }
}

fn looks_like_model_id(s: &str) -> bool {
    let parts: Vec<&str> = s.split('/').collect();
    parts.len() == 2 && parts.iter().all(|p| !p.is_empty() && !p.starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn embedded_json() -> Vec<u8> {
        let mut json = Vec::new();
        flate2::read::GzDecoder::new(EMBEDDED_QWEN3)
            .read_to_end(&mut json)
            .unwrap();
        json
    }

    /// What the crate makes of `json` and what [`parse`] makes of it: the same tokenizer
    /// (written back to JSON byte for byte) that encodes `text` alike.
    fn assert_parsed_alike(json: &[u8], ours: &tokenizers::Tokenizer, text: &str) {
        let theirs = tokenizers::Tokenizer::from_bytes(json).unwrap();
        assert_eq!(
            ours.to_string(false).unwrap(),
            theirs.to_string(false).unwrap()
        );
        let ids = |t: &tokenizers::Tokenizer| t.encode(text, true).unwrap().get_ids().to_vec();
        assert_eq!(ids(ours), ids(&theirs));
    }

    #[test]
    fn a_bpe_file_is_read_in_one_pass_into_what_the_crate_reads() {
        let json = embedded_json();
        let ours = serde_json::from_slice::<BpeFile>(&json)
            .expect("Qwen3's file takes the one-pass path")
            .build()
            .unwrap();
        let text = format!(
            "<|im_start|>user\n{} héllo wörld 12345 \u{1F600}<|im_end|><|endoftext|>",
            &include_str!("corpus.txt")[..4000]
        );
        assert_parsed_alike(&json, &ours, &text);
        assert_eq!(ours.token_to_id("<|endoftext|>"), Some(151_643));
        assert_eq!(ours.get_vocab_size(true), 151_669);
    }

    #[test]
    fn other_models_and_bad_files_go_through_the_crate() {
        let json = br#"{"version": "1.0", "truncation": null, "padding": null,
            "added_tokens": [{"id": 2, "content": "[X]", "single_word": false, "lstrip": false,
                              "rstrip": false, "normalized": false, "special": true}],
            "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": null, "decoder": null,
            "model": {"type": "WordLevel", "vocab": {"a": 0, "[UNK]": 1}, "unk_token": "[UNK]"}}"#;
        assert!(serde_json::from_slice::<BpeFile>(json).is_err());
        assert_parsed_alike(json, &parse(json).unwrap(), "a b [X] a");
        let e = parse(b"{\"version\": \"1.0\", \"model\": 7}").unwrap_err();
        assert!(!e.to_string().is_empty());
    }

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
