//! Where the results go.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What the flags say about the output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputSpec {
    /// Artifact folder (default: `artifacts/<model>-openai-<endpoint>-<load>`).
    pub artifact_dir: Option<PathBuf>,
    /// Draw the live progress line (only when stderr is a terminal).
    pub progress: bool,
}

/// The output, decided.
#[derive(Debug, Clone)]
pub struct Output {
    /// Artifact folder.
    pub artifact_dir: PathBuf,
    /// Draw the live progress line.
    pub progress: bool,
}

impl Output {
    /// The artifact folder: as given, or named after the model, the endpoint and the load
    /// (`mode`, e.g. `concurrency8`).
    pub fn build(s: &OutputSpec, model: &str, endpoint: &str, mode: &str) -> Output {
        let artifact_dir = s.artifact_dir.clone().unwrap_or_else(|| {
            let model = model.replace(['/', '\\', ':'], "_");
            PathBuf::from("artifacts").join(format!("{model}-openai-{endpoint}-{mode}"))
        });
        Output {
            artifact_dir,
            progress: s.progress,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_folder_names_model_endpoint_and_load() {
        let s = OutputSpec {
            artifact_dir: None,
            progress: true,
        };
        let o = Output::build(&s, "Qwen/Qwen3-0.6B", "chat", "concurrency8");
        assert_eq!(
            o.artifact_dir,
            PathBuf::from("artifacts/Qwen_Qwen3-0.6B-openai-chat-concurrency8")
        );
        let given = OutputSpec {
            artifact_dir: Some("x".into()),
            progress: false,
        };
        assert_eq!(
            Output::build(&given, "m", "chat", "c").artifact_dir,
            PathBuf::from("x")
        );
    }
}
