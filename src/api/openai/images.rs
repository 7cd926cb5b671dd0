//! An image-generation answer (`{"created": …, "data": [{"b64_json": "…"}, …]}`), counted as
//! its bytes arrive.
//!
//! One base64 image is megabytes, and a benchmark only needs how many came back and whether the
//! body had that shape; keeping every body whole would cost megabytes per stream in flight. So
//! [`ImageScan`] reads the body byte by byte, keeps none of it, and tracks only the structure:
//! strings (with their escapes), nesting, and the top-level keys. Each object in the top-level
//! `data` array is one image (`b64_json` or `url`, as OpenAI's API answers). Numbers and
//! literals are not checked: a body that is broken inside a value but balanced still counts
//! its images, which is the question asked of it.

/// Nesting deeper than this is refused (the answer is two levels deep).
const MAX_DEPTH: u32 = 64;
/// Top-level keys are kept up to this length to be compared (`data`, `error`).
const KEY_MAX: usize = 8;

/// What a finished body said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Images {
    /// Images in its `data` array (zero when the array is empty).
    Counted(u32),
    /// No `data` array; an `error` member was there.
    Error,
    /// Neither `data` nor `error`.
    NoData,
    /// Not a whole JSON object: why.
    Broken(&'static str),
}

/// The state of one body's scan; see the module's documentation.
#[derive(Debug, Default)]
pub struct ImageScan {
    /// Bit `d` is set when the container at depth `d + 1` is an object.
    objects: u64,
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// In an object, before a key.
    expect_key: bool,
    /// The top-level key being read (while `capturing`) or the last one read.
    key: [u8; KEY_MAX],
    key_len: usize,
    /// The top-level key is longer than `KEY_MAX`: none of those looked for.
    key_long: bool,
    capturing: bool,
    /// The value of the top-level `data` key is being read (from its colon to the next
    /// top-level key's).
    in_data: bool,
    saw_data: bool,
    saw_error: bool,
    images: u32,
    /// The top-level object closed.
    closed: bool,
    broken: Option<&'static str>,
}

impl ImageScan {
    /// Ready for a new body.
    pub fn reset(&mut self) {
        *self = ImageScan::default();
    }

    /// Reads the next bytes of the body.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.broken.is_some() {
                return;
            }
            if self.in_string {
                self.string_byte(b);
            } else {
                self.structural(b);
            }
        }
    }

    fn string_byte(&mut self, b: u8) {
        if self.escaped {
            self.escaped = false;
            // An escaped key is none of those looked for.
            self.key_long |= self.capturing;
        } else if b == b'\\' {
            self.escaped = true;
        } else if b == b'"' {
            self.in_string = false;
            self.capturing = false;
        } else if self.capturing {
            if self.key_len < KEY_MAX {
                self.key[self.key_len] = b;
                self.key_len += 1;
            } else {
                self.key_long = true;
            }
        }
    }

    fn structural(&mut self, b: u8) {
        if self.closed {
            if !b.is_ascii_whitespace() {
                self.broken = Some("bytes after the JSON object");
            }
            return;
        }
        if self.depth == 0 && !b.is_ascii_whitespace() && b != b'{' {
            self.broken = Some("not a JSON object");
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.capturing = true;
                    self.key_len = 0;
                    self.key_long = false;
                }
            }
            b'{' | b'[' => {
                if self.depth == MAX_DEPTH {
                    self.broken = Some("nested too deep");
                    return;
                }
                if b == b'{' && self.depth == 2 && self.in_data && !self.is_object() {
                    self.images = self.images.saturating_add(1);
                }
                let bit = 1u64 << self.depth;
                if b == b'{' {
                    self.objects |= bit;
                } else {
                    self.objects &= !bit;
                }
                self.depth += 1;
                self.expect_key = b == b'{';
            }
            b'}' | b']' => {
                if self.depth == 0 || self.is_object() != (b == b'}') {
                    self.broken = Some("unbalanced brackets");
                    return;
                }
                self.depth -= 1;
                self.expect_key = false;
                self.closed = self.depth == 0;
            }
            b':' => {
                if self.depth == 1 {
                    let key = &self.key[..self.key_len];
                    let known = !self.key_long;
                    self.in_data = known && key == b"data";
                    self.saw_data |= self.in_data;
                    self.saw_error |= known && key == b"error";
                }
                self.expect_key = false;
            }
            b',' => self.expect_key = self.is_object(),
            _ => {}
        }
    }

    fn is_object(&self) -> bool {
        self.depth > 0 && self.objects & (1u64 << (self.depth - 1)) != 0
    }

    /// What the whole body said, once it has ended.
    pub fn finish(&self) -> Images {
        if let Some(why) = self.broken {
            Images::Broken(why)
        } else if !self.closed {
            Images::Broken(if self.depth == 0 && !self.in_string {
                "an empty body"
            } else {
                "the body ended inside the JSON object"
            })
        } else if self.saw_data {
            Images::Counted(self.images)
        } else if self.saw_error {
            Images::Error
        } else {
            Images::NoData
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer as OpenAI's API documents it, with escapes in its strings and a usage object
    /// whose keys nest deeper than `data`'s.
    const ANSWER: &[u8] = br#"{
  "created": 1713833628,
  "data": [
    {"b64_json": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "revised_prompt": "a \"red\" fox {not json} [x]"},
    {"url": "https://example.invalid/img.png"}
  ],
  "usage": {"total_tokens": 100, "input_tokens_details": {"text_tokens": 10, "image_tokens": 40}},
  "size": "1024x1024"
}"#;

    fn scan(parts: &[&[u8]]) -> Images {
        let mut s = ImageScan::default();
        for p in parts {
            s.feed(p);
        }
        s.finish()
    }

    /// The count by a full JSON parser: objects in the top-level `data` array.
    fn parsed(body: &[u8]) -> Images {
        match serde_json::from_slice::<serde_json::Value>(body) {
            Ok(serde_json::Value::Object(m)) => match m.get("data") {
                Some(serde_json::Value::Array(a)) => {
                    Images::Counted(a.iter().filter(|v| v.is_object()).count() as u32)
                }
                Some(_) => Images::Counted(0),
                None if m.contains_key("error") => Images::Error,
                None => Images::NoData,
            },
            _ => Images::Broken("any"),
        }
    }

    #[test]
    fn an_answer_counts_its_images_at_every_split() {
        assert_eq!(scan(&[ANSWER]), Images::Counted(2));
        for at in 0..=ANSWER.len() {
            let (a, b) = ANSWER.split_at(at);
            assert_eq!(scan(&[a, b]), Images::Counted(2), "split at {at}");
        }
        // Byte by byte.
        let bytes: Vec<&[u8]> = ANSWER.chunks(1).collect();
        assert_eq!(scan(&bytes), Images::Counted(2));
    }

    #[test]
    fn bodies_without_images_say_why() {
        assert_eq!(scan(&[br#"{"data": []}"#]), Images::Counted(0));
        assert_eq!(
            scan(&[br#"{"error": {"message": "no", "data": [{}]}}"#]),
            Images::Error,
            "a data key inside the error is not the answer's"
        );
        assert_eq!(
            scan(&[br#"{"data": {"a": {}}}"#]),
            Images::Counted(0),
            "only an array's objects are images"
        );
        assert_eq!(scan(&[br#"{"images": [{}]}"#]), Images::NoData);
        assert_eq!(scan(&[br#"{"data\\": [{}]}"#]), Images::NoData);
        assert_eq!(
            scan(&[br#"{"data": [], "x": [{}], "y": {"data": [{}]}}"#]),
            Images::Counted(0)
        );
        assert_eq!(scan(&[br#"{"datadatadata": [{}]}"#]), Images::NoData);
        assert_eq!(scan(&[b""]), Images::Broken("an empty body"));
        assert_eq!(scan(&[b"[{}]"]), Images::Broken("not a JSON object"));
        assert_eq!(
            scan(&[br#"{"data": [{"b64_json": "abc"#]),
            Images::Broken("the body ended inside the JSON object")
        );
        assert_eq!(
            scan(&[br#"{"data": [{]}"#]),
            Images::Broken("unbalanced brackets")
        );
        assert_eq!(
            scan(&[br#"{"data": []} {}"#]),
            Images::Broken("bytes after the JSON object")
        );
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(70), "]".repeat(70));
        assert_eq!(scan(&[deep.as_bytes()]), Images::Broken("nested too deep"));
    }

    /// Against a full parser on generated documents: the same count for every valid one.
    #[test]
    fn it_counts_as_a_full_parser_does() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        fn value(next: &mut dyn FnMut(u64) -> u64, depth: u32) -> String {
            match if depth > 3 { next(3) } else { next(6) } {
                0 => "\"s\\\"}]{[\"".into(),
                1 => "12.5e3".into(),
                2 => "null".into(),
                3 => {
                    let n = next(4);
                    let items: Vec<String> = (0..n).map(|_| value(next, depth + 1)).collect();
                    format!("[{}]", items.join(","))
                }
                _ => {
                    let n = next(4);
                    let keys = ["data", "error", "b64_json", "url", "x\\\"y"];
                    let items: Vec<String> = (0..n)
                        .map(|i| {
                            let k = keys[next(keys.len() as u64) as usize];
                            format!("\"{k}{i}\" : {}", value(next, depth + 1))
                        })
                        .collect();
                    format!("{{ {} }}", items.join(", "))
                }
            }
        }
        for _ in 0..2000 {
            let n = next(4);
            let members: Vec<String> = (0..n)
                .map(|i| match next(3) {
                    0 => format!("\"data\": {}", value(&mut next, 1)),
                    1 => format!("\"error\": {}", value(&mut next, 1)),
                    _ => format!("\"k{i}\": {}", value(&mut next, 1)),
                })
                .collect();
            let doc = format!("{{{}}}", members.join(","));
            let want = parsed(doc.as_bytes());
            // A key given twice: serde keeps the last, the scan counts every data array's
            // images; such answers are not worth a rule.
            if doc.matches("\"data\":").count() > 1 || matches!(want, Images::Broken(_)) {
                continue;
            }
            let at = next(doc.len() as u64 + 1) as usize;
            let (a, b) = doc.as_bytes().split_at(at);
            assert_eq!(scan(&[a, b]), want, "{doc}");
        }
    }
}
