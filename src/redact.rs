//! One rule for what reaches a person or a file.
//!
//! **Secrets.** Every credential ringperf is given (an API key, the value of a credential header,
//! the password in a URL, and the `Basic` token made from it) is [`install`]ed once, as soon as
//! the command line is read. [`scrub`] then replaces any part of any of them that is 8
//! characters or longer (and a short one whole) with `<redacted>`, wherever it appears: a key
//! a server echoes without its `sk-` prefix, or cut, or inside other text, is caught too. The
//! console, the log lines and every artifact pass through it. A match of digits alone is left
//! as it is: it is one of ringperf's own numbers, not a secret's echo.
//!
//! **Server text.** What a server says (an error message, an error page, the model name it
//! answers as) is data: [`server_text`] makes it one line with every control character
//! escaped (a newline cannot forge a line, an ANSI escape cannot clear the screen), scrubbed,
//! and capped in length.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, RwLock};

/// What a secret becomes.
pub const REDACTED: &str = "<redacted>";

/// The shortest part of a secret that is cut out wherever it appears; a secret shorter than
/// this is cut out only whole.
pub const MIN_PART: usize = 8;

/// The shortest secret taken at all: shorter values are not secrets anyone relies on, and would
/// cut common words out of everything.
const MIN_SECRET: usize = 4;

/// The secrets given to this process.
#[derive(Debug, Clone)]
struct Secrets {
    /// Every 8-byte window of every secret of 8 bytes or more, as a little-endian word.
    grams: HashSet<u64>,
    /// A 65,536-bit filter over `grams`, so that text without a secret costs one load and one
    /// bit test per byte.
    filter: Vec<u64>,
    /// Secrets of 4 to 7 bytes, cut out whole.
    short: Vec<Vec<u8>>,
    /// Bytes that occur in some secret: text can be cut at any other byte without splitting one.
    in_secret: [bool; 256],
}

impl Default for Secrets {
    fn default() -> Self {
        Secrets {
            grams: HashSet::new(),
            filter: Vec::new(),
            short: Vec::new(),
            in_secret: [false; 256],
        }
    }
}

/// Adds `[a, b)` to ranges kept in order, merging overlaps.
fn push_range(out: &mut Vec<(usize, usize)>, a: usize, b: usize) {
    match out.last_mut() {
        Some(last) if a <= last.1 => last.1 = last.1.max(b),
        _ => out.push((a, b)),
    }
}

fn slot(w: u64) -> usize {
    (w.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48) as usize
}

impl Secrets {
    fn add(&mut self, secret: &[u8]) {
        if secret.len() < MIN_SECRET {
            return;
        }
        if self.filter.is_empty() {
            self.filter = vec![0; 1024];
        }
        for b in secret {
            self.in_secret[usize::from(*b)] = true;
        }
        if secret.len() < MIN_PART {
            if !self.short.iter().any(|s| s == secret) {
                self.short.push(secret.to_vec());
            }
            return;
        }
        for w in secret.windows(MIN_PART) {
            let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            let s = slot(w);
            self.filter[s / 64] |= 1 << (s % 64);
            self.grams.insert(w);
        }
    }

    fn is_empty(&self) -> bool {
        self.grams.is_empty() && self.short.is_empty()
    }

    /// The byte ranges of `text` to cut, merged and in order.
    fn ranges(&self, text: &[u8]) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        if !self.grams.is_empty() && text.len() >= MIN_PART {
            for i in 0..=text.len() - MIN_PART {
                let w = u64::from_le_bytes(text[i..i + MIN_PART].try_into().expect("8 bytes"));
                let s = slot(w);
                if self.filter[s / 64] & (1 << (s % 64)) != 0 && self.grams.contains(&w) {
                    push_range(&mut out, i, i + MIN_PART);
                }
            }
        }
        if !self.short.is_empty() {
            let mut extra = Vec::new();
            for s in &self.short {
                extra.extend(memchr::memmem::find_iter(text, s).map(|i| (i, i + s.len())));
            }
            if !extra.is_empty() {
                extra.append(&mut out);
                extra.sort_unstable();
                for (a, b) in extra {
                    push_range(&mut out, a, b);
                }
            }
        }
        // A match made of digits alone is a number of ringperf's own (a time stamp, a count)
        // that happens to hold a run of a secret's digits: cutting it would change a figure
        // and break the JSON around it. A secret's digits next to any other of its characters
        // are still cut, so only a secret's run of 15 or more digits can keep its middle.
        out.retain(|&(a, b)| !text[a..b].iter().all(|c| c.is_ascii_digit() || *c == b'.'));
        out
    }
}

static SECRETS: RwLock<Option<Arc<Secrets>>> = RwLock::new(None);

fn current() -> Option<Arc<Secrets>> {
    SECRETS.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Adds `secrets` to those cut out of everything this process prints or writes (from now on;
/// secrets are never taken back, so that runs in one process cannot un-redact each other's).
pub fn install<I, S>(secrets: I)
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut guard = SECRETS.write().unwrap_or_else(|e| e.into_inner());
    let mut next = guard.as_deref().cloned().unwrap_or_default();
    for s in secrets {
        next.add(s.as_ref().trim().as_bytes());
    }
    if !next.is_empty() {
        *guard = Some(Arc::new(next));
    }
}

/// Whether a header of this name carries a credential.
pub fn is_credential_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "auth",
        "key",
        "token",
        "secret",
        "cookie",
        "password",
        "credential",
        "session",
        "signature",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// The secrets in a header: for a credential header, its value, and the credential alone when
/// the value names its scheme (`Bearer KEY`, `Basic TOKEN`); nothing for another header.
pub fn header_secrets(name: &str, value: &str) -> Vec<String> {
    if !is_credential_header(name) {
        return Vec::new();
    }
    let value = value.trim();
    let mut out = vec![value.to_string()];
    if let Some((_, cred)) = value.split_once(' ') {
        out.push(cred.trim().to_string());
    }
    out
}

/// `text` with every part of a secret cut out (see the module's rule).
pub fn scrub(text: &str) -> Cow<'_, str> {
    let Some(s) = current() else {
        return Cow::Borrowed(text);
    };
    let ranges = s.ranges(text.as_bytes());
    if ranges.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (mut a, mut b) in ranges {
        // A secret with bytes beyond ASCII can end inside a character: cut the whole of it.
        while !text.is_char_boundary(a) {
            a -= 1;
        }
        while !text.is_char_boundary(b) {
            b += 1;
        }
        if a < at {
            a = at;
        }
        out.push_str(&text[at..a]);
        if a < b {
            out.push_str(REDACTED);
        }
        at = at.max(b);
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// [`scrub`] over bytes that need not be text.
pub fn scrub_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    match current() {
        Some(s) => cut_out(&s, bytes),
        None => Cow::Borrowed(bytes),
    }
}

/// `bytes` with `secrets`' ranges in it replaced.
fn cut_out<'a>(secrets: &Secrets, bytes: &'a [u8]) -> Cow<'a, [u8]> {
    let ranges = secrets.ranges(bytes);
    if ranges.is_empty() {
        return Cow::Borrowed(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    for (a, b) in ranges {
        out.extend_from_slice(&bytes[at..a]);
        out.extend_from_slice(REDACTED.as_bytes());
        at = b;
    }
    out.extend_from_slice(&bytes[at..]);
    Cow::Owned(out)
}

/// A writer that scrubs what goes through it, with the secrets installed when it was made. It
/// gathers what it is given and scrubs it in batches, each cut after a byte that no secret
/// contains (so a secret is never split between two batches); without secrets it passes
/// everything straight on.
pub struct ScrubWriter<W: std::io::Write> {
    inner: W,
    secrets: Option<Arc<Secrets>>,
    held: Vec<u8>,
}

/// What is gathered before a batch is scrubbed.
const BATCH: usize = 64 << 10;

/// Held back at most: past this, text with no byte outside every secret is scrubbed as it is.
const HELD_CAP: usize = 1 << 20;

impl<W: std::io::Write> ScrubWriter<W> {
    /// Scrubs into `inner`.
    pub fn new(inner: W) -> Self {
        ScrubWriter {
            inner,
            secrets: current(),
            held: Vec::new(),
        }
    }

    /// Scrubs and writes the first `upto` bytes held.
    fn emit(&mut self, upto: usize) -> std::io::Result<()> {
        if let Some(s) = &self.secrets {
            self.inner.write_all(&cut_out(s, &self.held[..upto]))?;
        }
        self.held.drain(..upto);
        Ok(())
    }

    /// Flushes and hands back the inner writer.
    pub fn into_inner(mut self) -> std::io::Result<W> {
        std::io::Write::flush(&mut self)?;
        Ok(self.inner)
    }
}

impl<W: std::io::Write> std::io::Write for ScrubWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let Some(s) = &self.secrets else {
            return self.inner.write(buf);
        };
        self.held.extend_from_slice(buf);
        if self.held.len() < BATCH {
            return Ok(buf.len());
        }
        let cut = self
            .held
            .iter()
            .rposition(|b| !s.in_secret[usize::from(*b)])
            .map(|i| i + 1);
        match cut {
            Some(c) => self.emit(c)?,
            None if self.held.len() > HELD_CAP => self.emit(self.held.len())?,
            None => {}
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.held.is_empty() {
            self.emit(self.held.len())?;
        }
        self.inner.flush()
    }
}

/// Writes `text` to stdout, scrubbed (see [`console`]).
pub fn print(text: &str) {
    console(&mut std::io::stdout().lock(), scrub(text).as_bytes());
}

/// Writes `bytes` to the console (stdout or stderr) and flushes it. A write never stops or
/// kills a run: a reader gone (a closed terminal, `| head`) is a hang-up
/// ([`crate::sys::hang_up`]); any other failure drops what could not be written.
pub fn console(out: &mut dyn std::io::Write, bytes: &[u8]) {
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        if crate::sys::is_hang_up(&e) {
            crate::sys::hang_up();
        }
    }
}

/// Writes `text` on stderr as it is, without a newline: the live progress line's redraws.
pub fn draw(text: &str) {
    console(&mut std::io::stderr().lock(), text.as_bytes());
}

/// A line on stderr, scrubbed and, in a log, timed ([`say_line`]): every line ringperf writes
/// to stderr.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::redact::say_line(&format!($($arg)*))
    };
}
pub(crate) use say;

/// Writes one line on stderr, scrubbed; where stderr is no terminal (a log: CI, `kubectl
/// logs`, `nohup`), it starts with its time, as a log line should. It is written as
/// [`console`] writes.
pub fn say_line(text: &str) {
    static LOGGED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let text = scrub(text);
    let line = if *LOGGED.get_or_init(|| !crate::sys::is_tty(libc::STDERR_FILENO)) {
        let time = crate::clock::iso8601(crate::clock::unix_time_secs());
        format!("{time} {text}\n")
    } else {
        format!("{text}\n")
    };
    console(&mut std::io::stderr().lock(), line.as_bytes());
}

/// How long a server's text may be where it is shown, in characters.
pub const SERVER_TEXT_CAP: usize = 300;

/// A server's text made safe to show: scrubbed, runs of white space made one space, every other
/// control character (and the invisible ones that reorder or hide text) escaped, at most
/// `cap` characters (an ellipsis says where it was cut).
pub fn server_text(raw: &str, cap: usize) -> String {
    let raw = scrub(raw);
    let mut out = String::with_capacity(raw.len().min(cap * 2));
    let mut shown = 0usize;
    let mut space = false;
    for c in raw.trim().chars() {
        if shown >= cap {
            out.push('…');
            break;
        }
        if c == ' ' || c == '\n' || c == '\t' || c == '\r' {
            if !space {
                out.push(' ');
                shown += 1;
            }
            space = true;
            continue;
        }
        space = false;
        let hidden = matches!(c, '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}');
        if c.is_control() || hidden {
            use std::fmt::Write;
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
        shown += 1;
    }
    out
}

/// How a model's id is shown: as [`server_text`], at most 120 characters. What is sent and
/// written in the JSON is the id itself.
pub fn model_shown(id: &str) -> String {
    server_text(id, 120)
}

/// [`server_text`] of bytes that need not be UTF-8.
pub fn server_bytes(raw: &[u8], cap: usize) -> String {
    server_text(&String::from_utf8_lossy(raw), cap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    // The secrets are process-wide: every test here installs its own, distinct from the others'.

    #[test]
    fn any_part_of_eight_or_more_is_cut_anywhere() {
        install(["sk-test-0123456789abcdefXYZ"]);
        assert_eq!(
            scrub("401: bad key sk-test-0123456789abcdefXYZ."),
            "401: bad key <redacted>."
        );
        // Without its prefix, cut short, inside other text.
        assert_eq!(scrub("key=test-0123456789ab!"), "key=<redacted>!");
        assert_eq!(scrub("x456789abcdefXYZy"), "x<redacted>y");
        // Seven characters of it are not enough to be told from chance.
        assert_eq!(scrub("0123456 and def"), "0123456 and def");
        assert_eq!(scrub_bytes(b"[23456789a]").as_ref(), b"[<redacted>]");
    }

    #[test]
    fn numbers_that_hold_a_secrets_digits_are_left_whole() {
        install(["tk-live-0123456789ab"]);
        let line = r#"{"start_ns":1795001234567890,"error":"bad key tk-live-0123456789ab"}"#;
        assert_eq!(
            scrub(line),
            r#"{"start_ns":1795001234567890,"error":"bad key <redacted>"}"#
        );
        assert_eq!(scrub("live-012345"), "<redacted>");
    }

    #[test]
    fn a_short_secret_is_cut_whole() {
        install(["hunter2"]);
        assert_eq!(scrub("password hunter2 wrong"), "password <redacted> wrong");
        assert_eq!(scrub("hunter"), "hunter");
    }

    #[test]
    fn the_writer_never_lets_a_secret_through_a_split() {
        install(["Zq9Zq9Zq9-secret-Zq9"]);
        let text = b"{\"error\": \"Zq9Zq9Zq9-secret-Zq9\"}\n".repeat(3);
        for split in 0..text.len() {
            let mut w = ScrubWriter::new(Vec::new());
            w.write_all(&text[..split]).unwrap();
            w.write_all(&text[split..]).unwrap();
            let out = String::from_utf8(w.into_inner().unwrap()).unwrap();
            assert!(!out.contains("secret"), "split {split}: {out}");
            assert_eq!(out.matches(REDACTED).count(), 3, "split {split}");
        }
    }

    #[test]
    fn batches_never_split_a_secret() {
        install(["Zq9Zq9Zq9-secret-Zq9"]);
        let text = b"{\"error\": \"Zq9Zq9Zq9-secret-Zq9\"}\n".repeat(5000);
        for split in [1, BATCH - 7, BATCH + 3, text.len() - 5] {
            let mut w = ScrubWriter::new(Vec::new());
            for piece in [&text[..split], &text[split..]] {
                for chunk in piece.chunks(1000) {
                    w.write_all(chunk).unwrap();
                }
            }
            let out = String::from_utf8(w.into_inner().unwrap()).unwrap();
            assert!(!out.contains("secret"), "split {split}");
            assert_eq!(out.matches(REDACTED).count(), 5000, "split {split}");
        }
    }

    #[test]
    fn credential_headers_and_their_schemes() {
        assert_eq!(
            header_secrets("Authorization", "Bearer abc"),
            ["Bearer abc", "abc"]
        );
        assert_eq!(header_secrets("X-Api-Key", "k1"), ["k1"]);
        assert!(header_secrets("Content-Type", "application/json").is_empty());
    }

    #[test]
    fn server_text_is_one_escaped_capped_line() {
        assert_eq!(
            server_text("bad\nerror: forged\r\n\x1b[2Jgone\u{202e}", 100),
            "bad error: forged \\u{1b}[2Jgone\\u{202e}"
        );
        assert_eq!(server_text("  a  \t b ", 100), "a b");
        assert_eq!(server_text("ééééé", 3), "ééé…");
        assert_eq!(server_bytes(b"\xff\x07ok", 100), "\u{fffd}\\u{7}ok");
    }
}
