//! One rule for what reaches a person or a file.
//!
//! **Secrets.** Every credential ringperf is given (an API key, every header value given with
//! `-H`, the password in a URL, and the `Basic` token made from it) is [`install`]ed once, as
//! soon as the command line is read, with the forms a server may echo it in: JSON-escaped,
//! percent-encoded, base64 (standard and URL-safe, at each alignment). Secrets are cut out of
//! *outside text where it enters*, before it is kept: what a server says (its errors, pages,
//! model names, finish reasons, metrics pages, generated text) and the command line shown in
//! reports. [`scrub`] replaces any part of a secret that is 8 characters or longer (and a short
//! secret whole) with `<redacted>`: a key a server echoes without its `sk-` prefix, or cut, or
//! inside other text, is caught too. ringperf's own text (its keys, numbers and words) never
//! passes through it, so no secret of any length or character set can change a figure or
//! break a file's syntax: every encoder then writes clean values.
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
#[derive(Debug, Clone, Default)]
struct Secrets {
    /// Every 8-byte window of every secret of 8 bytes or more, as a little-endian word.
    grams: HashSet<u64>,
    /// A 65,536-bit filter over `grams`, so that text without a secret costs one load and one
    /// bit test per byte.
    filter: Vec<u64>,
    /// Secrets of 4 to 7 bytes, cut out whole.
    short: Vec<Vec<u8>>,
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
    /// Adds `secret` and each form a server may echo it in.
    fn add_with_forms(&mut self, secret: &str) {
        for form in forms(secret) {
            self.add(form.as_bytes());
        }
    }

    fn add(&mut self, secret: &[u8]) {
        if secret.len() < MIN_SECRET {
            return;
        }
        if self.filter.is_empty() {
            self.filter = vec![0; 1024];
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
        out
    }
}

/// `secret` and the forms a server may echo it in: JSON-escaped (a key with `"` or `\\`),
/// percent-encoded (in a URL or a form), and base64, standard and URL-safe, at each of the
/// three alignments it can take inside a longer encoding (the characters that depend on the
/// secret's bytes alone).
fn forms(secret: &str) -> Vec<String> {
    use base64::Engine;
    let mut out = vec![secret.to_string()];
    // A string always encodes, between its two quotes.
    let json = serde_json::to_string(secret).expect("a string encodes");
    out.push(json[1..json.len() - 1].to_string());
    let mut pct = String::new();
    for b in secret.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            pct.push(char::from(b));
        } else {
            pct.push_str(&format!("%{b:02X}"));
        }
    }
    out.push(pct);
    let n = secret.len();
    for shift in 0..3 {
        let mut bytes = vec![0u8; shift];
        bytes.extend_from_slice(secret.as_bytes());
        let enc = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&bytes);
        // Character i covers bits [6i, 6i + 6): those within the secret's bits alone.
        let first = (8 * shift).div_ceil(6);
        let end = (8 * (shift + n)) / 6;
        if first < end {
            let part = &enc[first..end];
            out.push(part.to_string());
            out.push(part.replace('+', "-").replace('/', "_"));
        }
    }
    out.sort();
    out.dedup();
    out
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
        next.add_with_forms(s.as_ref().trim());
    }
    if !next.is_empty() {
        *guard = Some(Arc::new(next));
    }
}

/// Whether a header of this name carries a credential (its value is hidden in
/// `input_config`).
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

/// The secrets in a header the user gave: its value (any header's: a tenant id, a routing
/// key), and the credential alone when the value names its scheme (`Bearer KEY`, `Basic
/// TOKEN`).
pub fn header_secrets(value: &str) -> Vec<String> {
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

/// Writes `text` to stdout (see [`console`]).
pub fn print(text: &str) {
    console(&mut std::io::stdout().lock(), text.as_bytes());
}

/// Writes `bytes` to the console (stdout or stderr) and flushes it. A write never stops or
/// kills a run: a reader gone (a closed terminal, `| head`) is a hang-up
/// ([`crate::sys::write_failed`]); any other failure drops what could not be written.
pub fn console(out: &mut dyn std::io::Write, bytes: &[u8]) {
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        crate::sys::write_failed(&e);
    }
}

/// Writes `text` on stderr as it is, without a newline: the live progress line's redraws.
pub fn draw(text: &str) {
    console(&mut std::io::stderr().lock(), text.as_bytes());
}

/// A line on stderr, in a log timed ([`say_line`]): every line ringperf writes to stderr.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::redact::say_line(&format!($($arg)*))
    };
}
pub(crate) use say;

/// Writes one line on stderr; where stderr is no terminal (a log: CI, `kubectl logs`,
/// `nohup`), it starts with its time, as a log line should. It is written as [`console`]
/// writes.
pub fn say_line(text: &str) {
    static LOGGED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
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
    }

    #[test]
    fn a_key_of_digits_alone_is_cut_too() {
        // Only outside text is scrubbed, never ringperf's own numbers: digits are no exception.
        install(["8675309112358"]);
        assert_eq!(
            scrub("tenant 8675309112358 denied"),
            "tenant <redacted> denied"
        );
        assert_eq!(scrub("id=5309112358"), "id=<redacted>");
    }

    #[test]
    fn a_short_secret_is_cut_whole() {
        install(["hunter2"]);
        assert_eq!(scrub("password hunter2 wrong"), "password <redacted> wrong");
        assert_eq!(scrub("hunter"), "hunter");
    }

    #[test]
    fn the_forms_a_server_echoes_a_key_in_are_cut() {
        use base64::Engine;
        let key = r#"qv"7\Lm/+x0=Zt8&w"#;
        install([key]);
        let json = serde_json::to_string(key).unwrap();
        assert!(!scrub(&json).contains("Lm/+x0"), "{}", scrub(&json));
        let pct = "qv%227%5CLm%2F%2Bx0%3DZt8%26w";
        assert_eq!(
            scrub(&format!("GET /?k={pct} 401")),
            "GET /?k=<redacted> 401"
        );
        // Base64 of the key alone, and inside a longer encoding at each alignment.
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let url64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE.encode(b);
        for prefix in ["", "u:", "us:", "use:"] {
            let raw = format!("{prefix}{key}");
            for enc in [b64(raw.as_bytes()), url64(raw.as_bytes())] {
                let out = scrub(&enc);
                let kept: usize = out.split(REDACTED).map(str::len).max().unwrap_or(0);
                assert!(kept <= 7, "{prefix:?}: {enc} -> {out}");
                // Alone, the key's encoding is cut from its first character.
                assert!(
                    !prefix.is_empty() || out.starts_with(REDACTED),
                    "{enc} -> {out}"
                );
            }
        }
    }

    #[test]
    fn each_occurrence_is_cut_and_the_text_between_kept() {
        install(["Tq4-secret-occurs-twice"]);
        assert_eq!(
            scrub("a Tq4-secret-occurs-twice b Tq4-secret-occurs-twice c"),
            "a <redacted> b <redacted> c"
        );
    }

    #[test]
    fn the_shortest_secret_taken_is_four_characters_and_each_short_one_counts() {
        install(["w7#q", "Yv2", "p9!kx"]);
        assert_eq!(
            scrub("[w7#q] [Yv2] [p9!kx]"),
            "[<redacted>] [Yv2] [<redacted>]"
        );
    }

    #[test]
    fn a_word_that_shares_a_secrets_filter_bit_is_not_cut() {
        let secret = "Filter-Bit-Secret-Zz";
        install([secret]);
        // A word of 8 bytes, not in the secret, that falls in the filter slot of one that is.
        let gram = u64::from_le_bytes(secret.as_bytes()[..8].try_into().unwrap());
        let twin = (0u64..)
            .map(|i| {
                let mut b = *b"aaaaaaaa";
                for (k, byte) in b.iter_mut().enumerate() {
                    *byte = b'a' + ((i >> (4 * k)) & 15) as u8;
                }
                u64::from_le_bytes(b)
            })
            .find(|w| *w != gram && slot(*w) == slot(gram))
            .unwrap();
        let word = String::from_utf8(twin.to_le_bytes().to_vec()).unwrap();
        assert_eq!(scrub(&format!("<{word}>")), format!("<{word}>"));
    }

    #[test]
    fn a_cut_that_falls_inside_a_character_takes_the_whole_character() {
        install(["€mnopqrs", "tuvwxyz€"]);
        // The match starts inside Ь (its second byte is €'s last), and ends inside ₭ (its
        // first two bytes are €'s).
        assert_eq!(scrub("Ьmnopqrs!"), "<redacted>!");
        assert_eq!(scrub("tuvwxyz₭!"), "<redacted>!");
    }

    #[test]
    fn every_header_value_is_a_secret_and_a_scheme_gives_its_credential() {
        assert_eq!(header_secrets(" Bearer abc "), ["Bearer abc", "abc"]);
        assert_eq!(header_secrets("tenant-42"), ["tenant-42"]);
        assert!(is_credential_header("X-Api-Key") && !is_credential_header("X-Tenant"));
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
