//! What can go wrong while preparing a workload: one kind for each cause, with the cause kept
//! (`source()`) where another crate's error is behind it.

use std::path::PathBuf;

use serde_json::Value;

use super::files::{size, MAX_LINES, MAX_TRACE_HASH_IDS};
use super::hub;

/// Errors found while preparing the workload.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// An `--extra-inputs` value that is neither `key:value` nor a JSON object.
    #[error("--extra-inputs {item:?}: {why}")]
    ExtraInput {
        /// The value as given.
        item: String,
        /// What is wrong with it.
        #[source]
        why: ExtraInputWhy,
    },
    /// The tokenizer could not be found, loaded, or used.
    #[error("tokenizer: {0}")]
    Tokenizer(#[from] TokenizerError),
    /// The tokenizer's file is not in the cache and could not be downloaded.
    #[error("tokenizer: {0}")]
    TokenizerFile(#[from] Box<hub::Error>),
    /// A dataset file is unreadable or malformed: which file, where in it, and why.
    #[error("--input-file {0}")]
    Dataset(#[from] Box<DatasetError>),
    /// An image or audio clip could not be encoded.
    #[error("images and audio: {0}")]
    Media(#[from] MediaError),
    /// A plan without a request (a dataset without one is refused before).
    #[error("the plan holds no request")]
    NoRequest,
}

/// Why an `--extra-inputs` value is refused.
#[derive(Debug, thiserror::Error)]
pub enum ExtraInputWhy {
    /// It starts with `{` and is not a JSON object.
    #[error("not a JSON object: {0}")]
    NotObject(#[source] serde_json::Error),
    /// There is no `:` between a key and a value.
    #[error("expected key:value, e.g. ignore_eos:true")]
    NotKeyValue,
    /// Nothing before the `:`.
    #[error("the key is empty")]
    EmptyKey,
    /// The value looks like JSON (an object, list or string) and is not.
    #[error("the value is not valid JSON: {0}")]
    BadValue(#[source] serde_json::Error),
}

/// Why the tokenizer cannot be had or used.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// A folder was given without a `tokenizer.json` in it.
    #[error("{} has no tokenizer.json", .0.display())]
    NoFileIn(PathBuf),
    /// Neither a file, a folder, nor a model id.
    #[error("{0:?}: no such file or directory")]
    NotFound(String),
    /// The file cannot be read or parsed as a tokenizer.
    #[error("{}: {source}", .file.display())]
    Unreadable {
        /// The `tokenizer.json`.
        file: PathBuf,
        /// The reader's or the `tokenizers` crate's error.
        source: tokenizers::Error,
    },
    /// The tokenizer compiled into the binary cannot be unpacked or parsed.
    #[error("the embedded tokenizer: {0}")]
    Embedded(#[source] tokenizers::Error),
    /// A text cannot be encoded, or token ids decoded.
    #[error("{0}")]
    Encoding(#[source] tokenizers::Error),
}

/// A dataset file that a run cannot read as it reads one: which file, where, and why.
#[derive(Debug, thiserror::Error)]
#[error("{}{at}: {why}", .file.display())]
pub struct DatasetError {
    /// The file.
    pub file: PathBuf,
    /// Where in it.
    pub at: At,
    /// What is wrong there.
    #[source]
    pub why: DatasetWhy,
}

impl DatasetError {
    /// The error for `why` at `at` of `file`, as the workload's error.
    pub fn at(file: &std::path::Path, at: At, why: impl Into<DatasetWhy>) -> WorkloadError {
        WorkloadError::Dataset(Box::new(DatasetError {
            file: file.to_path_buf(),
            at,
            why: why.into(),
        }))
    }
}

/// A place in a dataset file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// The file as a whole.
    File,
    /// A line, counted from 1 (JSONL and traces).
    Line(usize),
    /// A conversation of a ShareGPT file, counted from 1.
    Conversation(usize),
    /// A row of a Parquet file, counted from 1.
    Row(usize),
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::File => Ok(()),
            At::Line(n) => write!(f, ":{n}"),
            At::Conversation(n) => write!(f, ": conversation {n}"),
            At::Row(n) => write!(f, ": row {n}"),
        }
    }
}

/// What is wrong with a dataset file where a [`DatasetError`] points.
#[derive(Debug, thiserror::Error)]
pub enum DatasetWhy {
    /// The system could not open or read it.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A line over the most one line may be (bytes).
    #[error("the line is longer than {}, the most one may be", size(*.0 as u64))]
    LineTooLong(usize),
    /// Nothing but blank lines.
    #[error("the file is empty")]
    Empty,
    /// A line that is not JSON.
    #[error("invalid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// A `.json` file that is not a ShareGPT array of conversations.
    #[error("not ShareGPT JSON: {0}")]
    NotShareGpt(#[source] serde_json::Error),
    /// A `.parquet` file the Parquet reader refuses.
    #[error("not a Parquet file ringperf can read: {0}")]
    NotParquet(#[source] parquet::errors::ParquetError),
    /// A Parquet row that cannot be read.
    #[error("{0}")]
    Parquet(#[source] parquet::errors::ParquetError),
    /// A line or row that makes no request ringperf can send.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// More request lines than a run reads.
    #[error(
        "a run reads at most {MAX_LINES} lines of a file (lower --num-dataset-entries or cut \
         the file)"
    )]
    TooManyLines,
    /// A trace with more hash ids than an analysis holds.
    #[error(
        "the trace holds more than {MAX_TRACE_HASH_IDS} hash ids, the most one analysis \
         reads (cut the file)"
    )]
    TooManyHashIds,
    /// The prompts kept so far pass the bytes a run holds of a file.
    #[error(
        "the requests kept reach {} by here; a run holds at most {} of a file (lower \
         --num-dataset-entries or cut the file)",
        size(*.bytes),
        size(*.cap)
    )]
    KeptTooMuch {
        /// Bytes kept, this conversation's included.
        bytes: u64,
        /// The most a run keeps.
        cap: u64,
    },
    /// A Parquet file's prompts kept pass the bytes a run holds.
    #[error(
        "the prompts kept pass {} MB by here (lower --num-dataset-entries)",
        .0 >> 20
    )]
    RowsTooLarge(u64),
    /// A timestamp below the one before it.
    #[error("timestamp {t} goes backwards (previous {previous})")]
    Backwards {
        /// This line's (ms).
        t: f64,
        /// The line's before (ms).
        previous: f64,
    },
    /// No request line has a timestamp in the window asked for.
    #[error("no request line with a timestamp from {from} to {to} ms")]
    NoneInWindow {
        /// The window's start (ms).
        from: f64,
        /// Its end (ms).
        to: f64,
    },
    /// No request line holds the value `--dataset-filter` asks for.
    #[error("no request line with {key} = {value:?}")]
    NoneFiltered {
        /// The key.
        key: String,
        /// The value wanted.
        value: String,
    },
    /// A trace without a request line.
    #[error("no request in the trace")]
    NoTraceRequest,
    /// A JSONL file without a request line.
    #[error("no request in the file")]
    NoRequest,
    /// A ShareGPT file without a human turn.
    #[error("no conversation has a human turn")]
    NoHumanTurn,
    /// A Parquet file without a row that makes a request.
    #[error("no row makes a request")]
    NoRow,
    /// A line read when the run started cannot be read again.
    #[error("cannot read the line again: {0}")]
    ReadAgain(#[source] std::io::Error),
    /// A line that is not what it was when the run started.
    #[error("the file changed while the run read it: {0}")]
    Changed(#[source] Box<DatasetWhy>),
}

/// Why one line (or row) makes no request ringperf can send.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A count that is not a whole number of at least 0.
    #[error("\"{key}\": {value} is not a whole number of at least 0")]
    NotCount {
        /// The field.
        key: &'static str,
        /// What it holds.
        value: Value,
    },
    /// A trace line without its time.
    #[error("missing \"timestamp\" (ms)")]
    NoTimestamp,
    /// A field a trace line needs.
    #[error("missing \"{0}\"")]
    Missing(&'static str),
    /// A trace line asks for a prompt over the cap on one.
    #[error(
        "input_length {0} is over the {cap}-token cap on one prompt",
        cap = super::MAX_PROMPT_TOKENS
    )]
    InputTooLong(u64),
    /// `hash_ids` holds something other than whole numbers.
    #[error("hash_ids must be non-negative integers")]
    HashIdsNotIntegers,
    /// `hash_ids` is not a list.
    #[error("hash_ids must be an array")]
    HashIdsNotArray,
    /// `messages` without a message.
    #[error("\"messages\" is empty")]
    NoMessages,
    /// Nothing to send.
    #[error(
        "expected a \"text\" (or \"prompt\") string, a \"messages\" array or a \"turns\" list"
    )]
    NoPrompt,
    /// Images or audio beside `messages`.
    #[error(
        "images and audio go with a \"text\" prompt; with \"messages\", put them in the \
         messages' content"
    )]
    MediaBesideMessages,
    /// An image or audio list with something other than strings.
    #[error("\"{0}\" must hold strings")]
    NotStrings(&'static str),
    /// An image or audio field that is neither a string nor a list.
    #[error("\"{0}\" must be a string or a list of strings")]
    NotStringOrList(&'static str),
    /// An image or audio file the line names cannot be read.
    #[error("{}: {source}", .path.display())]
    MediaFile {
        /// Where it was looked for.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// An image or audio file over the most one may be.
    #[error(
        "{}: {bytes} bytes, over the {} MiB one file may be",
        .path.display(),
        super::files::MEDIA_FILE_CAP >> 20
    )]
    MediaFileTooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
    /// An image file of a kind not sent.
    #[error("{0}: an image must be .png, .jpg, .webp or .gif")]
    NotImage(String),
    /// An audio file of a kind not sent.
    #[error("{0}: audio must be .wav or .mp3")]
    NotAudio(String),
    /// A text field a hub dataset's rows have.
    #[error("no {0:?} string")]
    NoText(&'static str),
    /// MT-Bench's row without its turns.
    #[error("no \"turns\" list of strings")]
    NoTurns,
    /// The tokenizer cannot count a text the row's rule counts.
    #[error("tokenizer: {0}")]
    Tokenizer(#[source] TokenizerError),
}

/// Why synthetic images or audio cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    /// The JPEG encoder refused an image.
    #[error("JPEG {width}x{height}: {source}")]
    Jpeg {
        /// Pixels across.
        width: u32,
        /// Pixels down.
        height: u32,
        /// The encoder's error.
        source: jpeg_encoder::EncodingError,
    },
    /// The PNG encoder refused an image.
    #[error("PNG {width}x{height}: {source}")]
    Png {
        /// Pixels across.
        width: u32,
        /// Pixels down.
        height: u32,
        /// The encoder's error.
        source: png::EncodingError,
    },
    /// The WAV writer refused a clip.
    #[error("WAV: {0}")]
    Wav(#[source] hound::Error),
}

/// Images and audio that would take more memory than a run prepares.
#[derive(Debug, thiserror::Error)]
#[error(
    "{entries} requests of about {:.1} MB of images and audio each take {:.1} GB, over the \
     {:.0} GB one run prepares: ask for fewer distinct prompts (--num-dataset-entries) or \
     smaller media",
    .each / 1e6,
    .each * *.entries as f64 / 1e9,
    super::media::MAX_BYTES / 1e9
)]
pub struct MediaBudget {
    /// Distinct requests asked for.
    pub entries: u64,
    /// Bytes each takes at most (three standard deviations over the means).
    pub each: f64,
}

/// Records left without a prompt token count after a run (so out of the ISL figures).
#[derive(Debug, thiserror::Error)]
pub struct Uncounted {
    /// How many.
    pub uncounted: usize,
    /// The first error counting them; none when Ctrl-C cut the counting short.
    #[source]
    pub why: Option<WorkloadError>,
}

impl std::fmt::Display for Uncounted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.uncounted;
        write!(
            f,
            "{n} request(s) have no prompt token count (left out of ISL): "
        )?;
        match &self.why {
            Some(e) => write!(f, "{e}"),
            None => f.write_str("the counting of the prompts sent was stopped (Ctrl-C)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind says what the message it replaced said (only a whole file's place changed:
    /// it named a line 0).
    #[test]
    fn each_kind_reads_as_the_message_it_replaced() {
        let json = || serde_json::from_str::<Value>("{").unwrap_err();
        let eof = || std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        let dataset = [
            (
                DatasetWhy::LineTooLong(128 << 20),
                "the line is longer than 128 MiB, the most one may be".to_string(),
            ),
            (DatasetWhy::Empty, "the file is empty".into()),
            (
                DatasetWhy::Json(json()),
                format!("invalid JSON: {}", json()),
            ),
            (
                DatasetWhy::NotShareGpt(json()),
                format!("not ShareGPT JSON: {}", json()),
            ),
            (
                DatasetWhy::TooManyLines,
                "a run reads at most 20000000 lines of a file (lower --num-dataset-entries or \
                 cut the file)"
                    .into(),
            ),
            (
                DatasetWhy::TooManyHashIds,
                "the trace holds more than 10000000 hash ids, the most one analysis reads (cut \
                 the file)"
                    .into(),
            ),
            (
                DatasetWhy::KeptTooMuch {
                    bytes: 5 << 20,
                    cap: 4 << 20,
                },
                "the requests kept reach 5 MiB by here; a run holds at most 4 MiB of a file \
                 (lower --num-dataset-entries or cut the file)"
                    .into(),
            ),
            (
                DatasetWhy::RowsTooLarge(64 << 20),
                "the prompts kept pass 64 MB by here (lower --num-dataset-entries)".into(),
            ),
            (
                DatasetWhy::Backwards {
                    t: 1.0,
                    previous: 3.5,
                },
                "timestamp 1 goes backwards (previous 3.5)".into(),
            ),
            (
                DatasetWhy::NoneInWindow {
                    from: 500.0,
                    to: 800.0,
                },
                "no request line with a timestamp from 500 to 800 ms".into(),
            ),
            (
                DatasetWhy::NoneFiltered {
                    key: "lang".into(),
                    value: "en".into(),
                },
                "no request line with lang = \"en\"".into(),
            ),
            (DatasetWhy::NoTraceRequest, "no request in the trace".into()),
            (DatasetWhy::NoRequest, "no request in the file".into()),
            (
                DatasetWhy::NoHumanTurn,
                "no conversation has a human turn".into(),
            ),
            (DatasetWhy::NoRow, "no row makes a request".into()),
            (
                DatasetWhy::ReadAgain(eof()),
                format!("cannot read the line again: {}", eof()),
            ),
            (
                DatasetWhy::Changed(Box::new(RequestError::NoMessages.into())),
                "the file changed while the run read it: \"messages\" is empty".into(),
            ),
        ];
        for (why, want) in dataset {
            assert_eq!(why.to_string(), want);
        }
        let request = [
            (
                RequestError::NotCount {
                    key: "max_tokens",
                    value: Value::from(-1),
                },
                "\"max_tokens\": -1 is not a whole number of at least 0",
            ),
            (RequestError::NoTimestamp, "missing \"timestamp\" (ms)"),
            (
                RequestError::Missing("input_length"),
                "missing \"input_length\"",
            ),
            (
                RequestError::HashIdsNotIntegers,
                "hash_ids must be non-negative integers",
            ),
            (RequestError::HashIdsNotArray, "hash_ids must be an array"),
            (
                RequestError::NoPrompt,
                "expected a \"text\" (or \"prompt\") string, a \"messages\" array or a \
                 \"turns\" list",
            ),
            (
                RequestError::MediaBesideMessages,
                "images and audio go with a \"text\" prompt; with \"messages\", put them in \
                 the messages' content",
            ),
            (
                RequestError::NotStrings("image"),
                "\"image\" must hold strings",
            ),
            (
                RequestError::NotStringOrList("audio"),
                "\"audio\" must be a string or a list of strings",
            ),
            (
                RequestError::MediaFileTooLarge {
                    path: "/d/a.png".into(),
                    bytes: 40 << 20,
                },
                "/d/a.png: 41943040 bytes, over the 32 MiB one file may be",
            ),
            (
                RequestError::NotImage("a.bmp".into()),
                "a.bmp: an image must be .png, .jpg, .webp or .gif",
            ),
            (
                RequestError::NotAudio("a.ogg".into()),
                "a.ogg: audio must be .wav or .mp3",
            ),
            (RequestError::NoText("problem"), "no \"problem\" string"),
            (RequestError::NoTurns, "no \"turns\" list of strings"),
        ];
        for (why, want) in request {
            assert_eq!(why.to_string(), want);
        }
        let cap = super::super::MAX_PROMPT_TOKENS;
        assert_eq!(
            RequestError::InputTooLong(cap + 1).to_string(),
            format!(
                "input_length {} is over the {cap}-token cap on one prompt",
                cap + 1
            )
        );
    }

    #[test]
    fn a_dataset_error_names_the_file_and_the_place() {
        let at =
            |at| DatasetError::at(std::path::Path::new("/d/f"), at, DatasetWhy::Empty).to_string();
        assert_eq!(at(At::File), "--input-file /d/f: the file is empty");
        assert_eq!(at(At::Line(3)), "--input-file /d/f:3: the file is empty");
        assert_eq!(
            at(At::Conversation(2)),
            "--input-file /d/f: conversation 2: the file is empty"
        );
        assert_eq!(
            at(At::Row(7)),
            "--input-file /d/f: row 7: the file is empty"
        );
        let e = DatasetError::at(
            std::path::Path::new("/d/f"),
            At::Line(1),
            DatasetWhy::Json(serde_json::from_str::<Value>("{").unwrap_err()),
        );
        // The workload's error, the dataset's, what is wrong there, and serde_json's.
        let chain: Vec<&dyn std::error::Error> =
            std::iter::successors(Some(&e as &dyn std::error::Error), |e| e.source()).collect();
        assert_eq!(chain.len(), 4);
        assert!(chain[3].is::<serde_json::Error>());
    }

    #[test]
    fn uncounted_prompts_say_how_many_and_why() {
        let stopped = Uncounted {
            uncounted: 3,
            why: None,
        };
        assert_eq!(
            stopped.to_string(),
            "3 request(s) have no prompt token count (left out of ISL): the counting of the \
             prompts sent was stopped (Ctrl-C)"
        );
        let failed = Uncounted {
            uncounted: 1,
            why: Some(TokenizerError::NotFound("x".into()).into()),
        };
        assert_eq!(
            failed.to_string(),
            "1 request(s) have no prompt token count (left out of ISL): tokenizer: \"x\": no \
             such file or directory"
        );
    }
}
