//! Parquet dataset files, the format the Hugging Face hub converts every dataset to (its
//! `refs/convert/parquet` revision): each row is read as a JSON object, then taken as a custom
//! JSONL line is, or, for the datasets `vllm bench serve` knows by name, as vLLM takes them.

use std::path::Path;

use parquet::file::reader::{FileReader, SerializedFileReader};
use serde_json::Value;

use super::files::{Caps, Item};
use super::tokenizer::Tokenizer;
use super::{At, DatasetError, DatasetWhy, RequestError, WorkloadError};
use crate::api::Prompt;

/// How a row becomes a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// As a custom JSONL line: `text`, `prompt`, `turns` or `messages`, and `max_tokens`,
    /// `output_length` or `output_tokens`.
    Fields,
    /// `likaixin/InstructCoder`: `"{input}\n\n{instruction} Just output the code, do not
    /// include any explanation."`, 200 output tokens.
    InstructCoder,
    /// `philschmid/mt-bench`: the first of `turns`, 256 output tokens.
    MtBench,
    /// AI-MO's sets: `problem`, the `solution`'s tokens as the output length.
    Aimo,
    /// `Aeala/ShareGPT_Vicuna_unfiltered`: the first of `conversations` as the prompt, the
    /// second's tokens as the output length.
    Conversation,
}

/// vLLM's checks on a pair of lengths it takes from a dataset: each at least 4 tokens, the
/// prompt at most `prompt_max`, both together at most `total_max`.
fn valid(prompt: usize, output: usize, prompt_max: usize, total_max: usize) -> bool {
    prompt >= 4 && output >= 4 && prompt <= prompt_max && prompt + output <= total_max
}

impl Rule {
    /// The rule `vllm bench serve --dataset-name hf` reads hub dataset `id` by: `Ok(None)` for
    /// one it does not know, `Err` for one ringperf cannot send (images, audio, video).
    pub fn of(id: &str) -> Result<Option<Rule>, &'static str> {
        Ok(Some(match id {
            "likaixin/InstructCoder" => Rule::InstructCoder,
            "philschmid/mt-bench" => Rule::MtBench,
            "AI-MO/aimo-validation-aime" | "AI-MO/NuminaMath-1.5" | "AI-MO/NuminaMath-CoT" => {
                Rule::Aimo
            }
            "Aeala/ShareGPT_Vicuna_unfiltered" => Rule::Conversation,
            "lmarena-ai/VisionArena-Chat"
            | "lmarena-ai/vision-arena-bench-v0.1"
            | "lmms-lab/LLaVA-OneVision-Data"
            | "yale-nlp/MMVU"
            | "Lin-Chen/MMStar" => {
                return Err(
                    "its requests carry the dataset's images or videos, which ringperf \
                            does not read from a dataset",
                )
            }
            "openslr/librispeech_asr"
            | "facebook/voxpopuli"
            | "LIUM/tedlium"
            | "edinburghcstr/ami"
            | "speechcolab/gigaspeech"
            | "kensho/spgispeech" => {
                return Err(
                    "its requests carry the dataset's audio for transcription, which \
                            ringperf does not send",
                )
            }
            _ => return Ok(None),
        }))
    }

    /// One row's request (files a row names are found from `base`), or `None` when vLLM
    /// would skip the row.
    fn item(
        self,
        v: Value,
        base: &Path,
        tokenizer: &Tokenizer,
    ) -> Result<Option<Item>, RequestError> {
        let text = |v: &Value, key: &'static str| -> Result<String, RequestError> {
            v.get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or(RequestError::NoText(key))
        };
        let count = |t: &str| tokenizer.count(t).map_err(RequestError::Tokenizer);
        let (prompt, max_tokens) = match self {
            Rule::Fields => {
                let (item, _) = super::files::jsonl_item(v, base, true)?;
                return Ok(Some(item));
            }
            Rule::InstructCoder => (
                format!(
                    "{}\n\n{} Just output the code, do not include any explanation.",
                    text(&v, "input")?,
                    text(&v, "instruction")?
                ),
                200,
            ),
            Rule::MtBench => {
                let first = v
                    .get("turns")
                    .and_then(|t| t.get(0))
                    .and_then(Value::as_str);
                (first.ok_or(RequestError::NoTurns)?.to_string(), 256)
            }
            Rule::Aimo | Rule::Conversation => {
                let (prompt, reply, limits) = if self == Rule::Aimo {
                    (text(&v, "problem")?, text(&v, "solution")?, (2048, 32_000))
                } else {
                    let turns = v.get("conversations").and_then(Value::as_array);
                    let Some([first, second, ..]) = turns.map(Vec::as_slice) else {
                        return Ok(None);
                    };
                    (text(first, "value")?, text(second, "value")?, (1024, 2048))
                };
                let out = count(&reply)?;
                if !valid(count(&prompt)?, out, limits.0, limits.1) {
                    return Ok(None);
                }
                (prompt, out)
            }
        };
        Ok(Some(Item {
            prompt: Prompt::Text(prompt),
            max_tokens: Some(max_tokens.min(u32::MAX as usize) as u32),
            timestamp_ms: None,
            tokens: None,
        }))
    }
}

/// Up to `limit` requests from the rows of the Parquet file at `path`, by `rule`; the prompts
/// kept stay under `caps.kept` bytes.
pub fn read(
    path: &Path,
    rule: Rule,
    limit: usize,
    tokenizer: &Tokenizer,
    caps: Caps,
) -> Result<Vec<Item>, WorkloadError> {
    let fail = |at, why: DatasetWhy| DatasetError::at(path, at, why);
    let base = path.parent().unwrap_or(Path::new("."));
    let file = std::fs::File::open(path).map_err(|e| fail(At::File, e.into()))?;
    let reader =
        SerializedFileReader::new(file).map_err(|e| fail(At::File, DatasetWhy::NotParquet(e)))?;
    let rows = reader
        .get_row_iter(None)
        .map_err(|e| fail(At::File, DatasetWhy::Parquet(e)))?;
    let (mut out, mut kept) = (Vec::new(), 0u64);
    for (i, row) in rows.enumerate() {
        if out.len() >= limit {
            break;
        }
        let at = At::Row(i + 1);
        let row = row.map_err(|e| fail(at, DatasetWhy::Parquet(e)))?;
        let Some(item) = rule
            .item(row.to_json_value(), base, tokenizer)
            .map_err(|e| fail(at, e.into()))?
        else {
            continue;
        };
        kept += item.prompt.text().len() as u64;
        if kept > caps.kept {
            return Err(fail(at, DatasetWhy::RowsTooLarge(caps.kept)));
        }
        out.push(item);
    }
    if out.is_empty() {
        return Err(fail(At::File, DatasetWhy::NoRow));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::data_type::{ByteArray, ByteArrayType};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;
    use std::sync::Arc;

    /// A Parquet file of string columns, snappy-compressed as the hub writes them.
    pub(crate) fn write(path: &Path, columns: &[(&str, Vec<&str>)]) {
        let fields: String = columns
            .iter()
            .map(|(name, _)| format!("required binary {name} (UTF8);"))
            .collect();
        let schema = Arc::new(parse_message_type(&format!("message m {{ {fields} }}")).unwrap());
        let props = Arc::new(
            WriterProperties::builder()
                .set_compression(parquet::basic::Compression::SNAPPY)
                .build(),
        );
        let mut w =
            SerializedFileWriter::new(std::fs::File::create(path).unwrap(), schema, props).unwrap();
        let mut group = w.next_row_group().unwrap();
        for (_, values) in columns {
            let mut col = group.next_column().unwrap().unwrap();
            let values: Vec<ByteArray> = values.iter().map(|v| ByteArray::from(*v)).collect();
            col.typed::<ByteArrayType>()
                .write_batch(&values, None, None)
                .unwrap();
            col.close().unwrap();
        }
        group.close().unwrap();
        w.close().unwrap();
    }

    #[test]
    fn rows_become_requests_by_their_rule() {
        let dir = std::env::temp_dir().join(format!("ringperf-parquet-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = Tokenizer::load(None, None).unwrap();
        let coder = dir.join("coder.parquet");
        write(
            &coder,
            &[
                ("instruction", vec!["Add a docstring", "Rename x"]),
                ("input", vec!["def f(): pass", "x = 1"]),
                ("output", vec!["…", "…"]),
            ],
        );
        let items = read(
            &coder,
            Rule::InstructCoder,
            10,
            &t,
            super::super::files::CAPS,
        )
        .unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(
            items[1].prompt,
            Prompt::Text(
                "x = 1\n\nRename x Just output the code, do not include any explanation.".into()
            )
        );
        assert_eq!(items[0].max_tokens, Some(200));
        // A plain file reads as JSONL lines do; the limit holds.
        let plain = dir.join("plain.parquet");
        write(
            &plain,
            &[
                ("prompt", vec!["a", "b", "c"]),
                ("max_tokens", vec!["7", "8", "9"]),
            ],
        );
        let items = read(&plain, Rule::Fields, 2, &t, super::super::files::CAPS);
        let e = items
            .expect_err("a string max_tokens is refused")
            .to_string();
        assert!(
            e.contains("plain.parquet: row 1:") && e.contains("max_tokens"),
            "{e}"
        );
        write(&plain, &[("prompt", vec!["a", "b", "c"])]);
        let items = read(&plain, Rule::Fields, 2, &t, super::super::files::CAPS).unwrap();
        assert_eq!(
            items.iter().map(|i| i.prompt.text()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        // AIMO: the solution's tokens are the output length; pairs past vLLM's limits skipped.
        let aimo = dir.join("aimo.parquet");
        let long = "word ".repeat(3000);
        write(
            &aimo,
            &[
                ("problem", vec!["What is two plus two, exactly?", &long]),
                (
                    "solution",
                    vec!["It is four, as one counts it out.", "x y z w v"],
                ),
            ],
        );
        let items = read(&aimo, Rule::Aimo, 10, &t, super::super::files::CAPS).unwrap();
        assert_eq!(items.len(), 1, "the 3,000-token problem is past 2,048");
        let want = t.count("It is four, as one counts it out.").unwrap() as u32;
        assert_eq!(items[0].max_tokens, Some(want));
        assert!(read(
            &dir.join("absent.parquet"),
            Rule::Fields,
            1,
            &t,
            super::super::files::CAPS
        )
        .is_err());
        std::fs::write(dir.join("bad.parquet"), b"PAR1 not really").unwrap();
        let e = read(
            &dir.join("bad.parquet"),
            Rule::Fields,
            1,
            &t,
            super::super::files::CAPS,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("not a Parquet file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn vllms_dataset_ids_pick_their_rules() {
        assert_eq!(
            Rule::of("likaixin/InstructCoder"),
            Ok(Some(Rule::InstructCoder))
        );
        assert_eq!(Rule::of("AI-MO/NuminaMath-CoT"), Ok(Some(Rule::Aimo)));
        assert_eq!(Rule::of("someone/else"), Ok(None));
        assert!(Rule::of("lmarena-ai/VisionArena-Chat").is_err());
        assert!(valid(4, 4, 1024, 2048) && !valid(3, 4, 1024, 2048) && !valid(1025, 4, 1024, 4096));
        assert!(!valid(1000, 1049, 1024, 2048));
    }
}
