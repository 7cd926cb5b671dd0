//! The common event read straight off its bytes: chat or completions `choices`, `usage` and the
//! simulator's stamps, in one pass with no tape and no per-field machinery.
//!
//! A streamed event is a couple of hundred bytes, and a general parser's fixed cost per
//! document (simd-json's structural index, then its tape) is most of what decoding one costs.
//! This reader checks the whole document against the JSON grammar (RFC 8259) as it goes and
//! accepts it only when it is sure of the answer. Anything else makes it decline (`None`), and
//! the general path decides, errors included: an `error` or `detail` member, a Responses API
//! shape, a member of an unexpected type, a member given twice, a key with escapes, a number
//! with an exponent or more than 19 digits, a lone surrogate, a control character in a
//! string, nesting deeper than [`MAX_DEPTH`], bytes that are not UTF-8. So an accepted
//! document gets exactly what the general path would give it.
//!
//! Reading is two steps. [`read`] only looks: it finds where the kept strings lie. Once the
//! document is accepted, [`borrowed`] takes those strings where they lie when none holds an
//! escape, which needs no write to the document, and [`payload`] unescapes them in place
//! otherwise; a declined document is left untouched for the general path.
//!
//! A stream's events mostly differ only in their values (the text, the ids, the stamps), so a
//! [`Shape`] keeps the last document read in full with its string and number values marked,
//! and an event whose bytes match it outside those values is read by checking only the values
//! ([`Shape::read`]): same bytes around, same grammar and keys, same answer.

use std::borrow::Cow;

use super::{Payload, Usage};

/// Nesting deeper than this is declined.
const MAX_DEPTH: u32 = 32;

/// Where a kept string's text lies (between its quotes), and whether it holds escapes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    start: usize,
    end: usize,
    escaped: bool,
}

/// A `delta` or `message` object.
#[derive(Debug, Default, Clone, Copy)]
struct Message {
    content: Option<Span>,
    reasoning_content: Option<Span>,
    reasoning: Option<Span>,
}

/// What an accepted event says, its strings as spans.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Event {
    content: Option<Span>,
    reasoning: Option<Span>,
    finish_reason: Option<Span>,
    usage: Option<Usage>,
    sent_ns: Option<u64>,
    arrived_ns: Option<u64>,
}

/// Reads `doc`, or declines it (`None`).
pub(super) fn read(doc: &[u8]) -> Option<Event> {
    traced(doc, None)
}

/// [`read`], and where `doc`'s string and number values lie, appended to `trace` when given
/// (the numbers the event keeps with their roles; strings' roles are found from the event's
/// spans).
fn traced(doc: &[u8], trace: Option<&mut Vec<Hole>>) -> Option<Event> {
    let mut r = Reader {
        b: doc,
        at: 0,
        trace,
    };
    let mut e = Event::default();
    let mut choice = Choice::default();
    let mut seen = 0;
    r.object(0, |r, key| match key {
        b"choices" => set(&mut seen, 0, &mut choice, r.first_choice()),
        b"usage" => set(&mut seen, 1, &mut e.usage, r.usage()),
        b"x_ringperf_sent_ns" => set(&mut seen, 2, &mut e.sent_ns, r.count(Role::SentNs)),
        b"x_ringperf_arrived_ns" => set(&mut seen, 3, &mut e.arrived_ns, r.count(Role::ArrivedNs)),
        // Errors and the Responses API's shapes: the general path.
        b"error" | b"detail" | b"type" | b"delta" | b"response" | b"output" | b"message" => None,
        _ => r.skip(1),
    })?;
    r.ws();
    if r.at != doc.len() {
        return None;
    }
    // The first choice's `delta` if it has one, else its `message`.
    let m = choice.delta.or(choice.message).unwrap_or_default();
    e.content = m.content.or(choice.text);
    e.reasoning = m.reasoning_content.or(m.reasoning);
    e.finish_reason = choice.finish_reason;
    Some(e)
}

/// What a value of a learned document is to the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Other,
    Content,
    Reasoning,
    FinishReason,
    PromptTokens,
    CompletionTokens,
    CachedTokens,
    SentNs,
    ArrivedNs,
}

/// A string (from its opening quote) or number value of a learned document.
#[derive(Debug, Clone, Copy)]
struct Hole {
    start: usize,
    end: usize,
    number: bool,
    /// A string with escapes.
    escaped: bool,
    role: Role,
}

/// Documents larger than this are not learned (events are a few hundred bytes).
const LEARN_MAX: usize = 4096;
/// Documents in a row that do not match the learned one before the next is learned instead.
const RELEARN_AFTER: u32 = 8;

/// The last document [`read`] took in full, its values marked, to read documents of the same
/// shape by their values alone.
#[derive(Debug, Default)]
pub(super) struct Shape {
    doc: Vec<u8>,
    holes: Vec<Hole>,
    /// Where a document being learned is traced.
    spare: Vec<Hole>,
    /// The document had a `usage` object.
    usage: bool,
    misses: u32,
}

impl Shape {
    /// [`read`]'s answer for `doc`: by its values alone when it matches the learned document
    /// outside them; else in full, learning `doc` when nothing is learned yet or the last
    /// [`RELEARN_AFTER`] documents did not match.
    pub(super) fn read(&mut self, doc: &[u8]) -> Option<Event> {
        if let Some(e) = self.matched(doc) {
            self.misses = 0;
            return Some(e);
        }
        self.misses = self.misses.saturating_add(1);
        if !(self.doc.is_empty() || self.misses >= RELEARN_AFTER) || doc.len() > LEARN_MAX {
            return read(doc);
        }
        // Traced into the spare list, so that learning allocates nothing once it has grown.
        self.spare.clear();
        let e = traced(doc, Some(&mut self.spare))?;
        for h in self.spare.iter_mut().filter(|h| !h.number) {
            let at = Some(h.start + 1);
            let span = |s: Option<Span>| s.map(|s| s.start) == at;
            h.role = if span(e.content) {
                Role::Content
            } else if span(e.reasoning) {
                Role::Reasoning
            } else if span(e.finish_reason) {
                Role::FinishReason
            } else {
                Role::Other
            };
        }
        self.doc.clear();
        self.doc.extend_from_slice(doc);
        std::mem::swap(&mut self.holes, &mut self.spare);
        (self.usage, self.misses) = (e.usage.is_some(), 0);
        Some(e)
    }

    /// The event of `doc` if it is the learned document with other values (each checked as
    /// [`read`] checks it).
    fn matched(&self, doc: &[u8]) -> Option<Event> {
        if self.doc.is_empty() {
            return None;
        }
        let mut e = Event {
            usage: self.usage.then(Usage::default),
            ..Event::default()
        };
        let mut r = Reader {
            b: doc,
            at: 0,
            trace: None,
        };
        let mut from = 0;
        for h in &self.holes {
            let same = &self.doc[from..h.start];
            if doc.get(r.at..r.at + same.len())? != same {
                return None;
            }
            r.at += same.len();
            from = h.end;
            if !h.number {
                let learned = &self.doc[h.start..h.end];
                let s = if doc.get(r.at..r.at + learned.len()) == Some(learned) {
                    // The learned string itself, up to its closing quote: checked then.
                    let start = r.at + 1;
                    r.at += learned.len();
                    Some(Span {
                        start,
                        end: r.at - 1,
                        escaped: h.escaped,
                    })
                } else {
                    Some(r.string()?)
                };
                match h.role {
                    Role::Content => e.content = s,
                    Role::Reasoning => e.reasoning = s,
                    Role::FinishReason => e.finish_reason = s,
                    _ => {}
                }
                continue;
            }
            let n = r.number()?;
            match h.role {
                Role::PromptTokens => e.usage.as_mut()?.prompt_tokens = Some(n?),
                Role::CompletionTokens => e.usage.as_mut()?.completion_tokens = Some(n?),
                Role::CachedTokens => e.usage.as_mut()?.cached_tokens = Some(n?),
                Role::SentNs => e.sent_ns = Some(n?),
                Role::ArrivedNs => e.arrived_ns = Some(n?),
                _ => {}
            }
        }
        (doc.get(r.at..)? == &self.doc[from..]).then_some(e)
    }
}

impl Event {
    /// True if a kept string holds escapes (so it must be rewritten to be read).
    pub(super) fn escaped(&self) -> bool {
        [self.content, self.reasoning, self.finish_reason]
            .iter()
            .flatten()
            .any(|s| s.escaped)
    }

    /// The payload, given the kept strings' texts.
    fn into_payload(self, [content, reasoning, finish_reason]: [Option<&str>; 3]) -> Payload<'_> {
        Payload {
            content: Cow::Borrowed(content.unwrap_or("")),
            reasoning: Cow::Borrowed(reasoning.unwrap_or("")),
            finish_reason,
            usage: self.usage,
            error: None,
            sent_ns: self.sent_ns,
            arrived_ns: self.arrived_ns,
        }
    }
}

/// The payload of an event [`read`] accepted from `doc` whose kept strings hold no escapes
/// ([`Event::escaped`]): they are borrowed where they lie.
pub(super) fn borrowed(doc: &[u8], e: Event) -> Payload<'_> {
    debug_assert!(!e.escaped());
    // Valid: the document was.
    let text = |s: Option<Span>| s.and_then(|s| std::str::from_utf8(&doc[s.start..s.end]).ok());
    e.into_payload([text(e.content), text(e.reasoning), text(e.finish_reason)])
}

/// The payload of an event [`read`] accepted from `doc`: its kept strings are unescaped in
/// place and borrowed.
pub(super) fn payload<'a>(doc: &'a mut [u8], e: Event) -> Payload<'a> {
    let mut spans = [(e.content, 0), (e.reasoning, 1), (e.finish_reason, 2)];
    spans.sort_unstable_by_key(|(s, _)| s.map_or(0, |s| s.start));
    let mut texts: [Option<&'a str>; 3] = [None; 3];
    let (mut rest, mut at) = (doc, 0);
    for (span, i) in spans {
        let Some(s) = span else { continue };
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(s.start - at);
        let (text, tail) = tail.split_at_mut(s.end - s.start);
        (rest, at) = (tail, s.end);
        let len = if s.escaped {
            unescape(text)
        } else {
            text.len()
        };
        let text: &'a [u8] = text;
        let text = &text[..len];
        // Valid: the document was, and unescaping writes whole characters.
        texts[i] = std::str::from_utf8(text).ok();
    }
    e.into_payload(texts)
}

/// The first of `choices`.
#[derive(Debug, Default, Clone, Copy)]
struct Choice {
    delta: Option<Message>,
    message: Option<Message>,
    text: Option<Span>,
    finish_reason: Option<Span>,
}

/// Sets field `i` to `value`: declines a value of the wrong type (`None`) and a field given
/// twice (the general path calls that an error).
fn set<T>(seen: &mut u32, i: u32, field: &mut T, value: Option<T>) -> Option<()> {
    let bit = 1 << i;
    if *seen & bit != 0 {
        return None;
    }
    *seen |= bit;
    *field = value?;
    Some(())
}

struct Reader<'a, 't> {
    b: &'a [u8],
    at: usize,
    /// Where the values read so far lie, when asked for.
    trace: Option<&'t mut Vec<Hole>>,
}

impl Reader<'_, '_> {
    /// Notes the value read from `start` (see [`traced`]).
    fn hole(&mut self, start: usize, number: bool, escaped: bool, role: Role) {
        if let Some(t) = &mut self.trace {
            t.push(Hole {
                start,
                end: self.at,
                number,
                escaped,
                role,
            });
        }
    }

    /// A string value: [`Reader::string`], its place noted.
    fn string_value(&mut self) -> Option<Span> {
        let start = self.at;
        let s = self.string()?;
        self.hole(start, false, s.escaped, Role::Other);
        Some(s)
    }

    /// A number value: [`Reader::number`], its place noted with `role`.
    fn number_value(&mut self, role: Role) -> Option<Option<u64>> {
        let start = self.at;
        let n = self.number()?;
        self.hole(start, true, false, role);
        Some(n)
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// Whitespace, then `c`.
    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.at += 1)
    }

    /// `null` (`None`), or what `read` makes of the value.
    fn or_null<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        self.ws();
        if self.word(b"null").is_some() {
            return Some(None);
        }
        read(self).map(Some)
    }

    /// Whitespace, then the `open` bracket; true when `close` follows at once (and is read).
    fn open(&mut self, depth: u32, open: u8, close: u8) -> Option<bool> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(open)?;
        self.ws();
        let empty = self.peek()? == close;
        self.at += usize::from(empty);
        Some(empty)
    }

    /// Whitespace, then a comma (true: more follows) or the `close` bracket (false).
    fn more(&mut self, close: u8) -> Option<bool> {
        self.ws();
        let c = self.peek()?;
        self.at += 1;
        match c {
            b',' => Some(true),
            c if c == close => Some(false),
            _ => None,
        }
    }

    /// An object: `member(reader, key)` reads each member's value (after its colon) and
    /// returns `None` to decline. Keys with escapes are declined.
    fn object(
        &mut self,
        depth: u32,
        mut member: impl FnMut(&mut Self, &[u8]) -> Option<()>,
    ) -> Option<()> {
        let mut more = !self.open(depth, b'{', b'}')?;
        while more {
            self.ws();
            let key = self.string()?;
            if key.escaped {
                return None;
            }
            self.eat(b':')?;
            let b = self.b;
            member(self, &b[key.start..key.end])?;
            more = self.more(b'}')?;
        }
        Some(())
    }

    /// An array: `element(reader, index)` reads each element and returns `None` to decline.
    fn array(
        &mut self,
        depth: u32,
        mut element: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<()> {
        let (mut more, mut i) = (!self.open(depth, b'[', b']')?, 0);
        while more {
            element(self, i)?;
            (more, i) = (self.more(b']')?, i + 1);
        }
        Some(())
    }

    /// Any value, checked and passed over; `depth` is the nesting it sits at.
    fn skip(&mut self, depth: u32) -> Option<()> {
        self.ws();
        match self.peek()? {
            b'{' => self.object(depth, |r, _| r.skip(depth + 1)),
            b'[' => self.array(depth, |r, _| r.skip(depth + 1)),
            b'"' => self.string_value().map(drop),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            _ => self.number_value(Role::Other).map(drop),
        }
    }

    fn word(&mut self, w: &[u8]) -> Option<()> {
        self.b
            .get(self.at..)?
            .starts_with(w)
            .then(|| self.at += w.len())
    }

    /// A string (the reader at its opening quote), checked: UTF-8, valid escapes, no control
    /// characters, surrogates only in pairs. Outside strings the grammar admits only ASCII, so
    /// this is where a document's UTF-8 is checked.
    fn string(&mut self) -> Option<Span> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.at + 1;
        let mut at = start;
        let (mut escaped, mut wide) = (false, false);
        loop {
            at = plain(self.b, at);
            match *self.b.get(at)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    at += match *self.b.get(at + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => 2,
                        b'u' => match hex4(self.b, at + 2)? {
                            0xD800..=0xDBFF => {
                                let low = self.b.get(at + 6..at + 8)? == b"\\u";
                                (low && matches!(hex4(self.b, at + 8)?, 0xDC00..=0xDFFF))
                                    .then_some(12)?
                            }
                            0xDC00..=0xDFFF => return None,
                            _ => 6,
                        },
                        _ => return None,
                    };
                }
                0..=0x1f => return None,
                0x80.. => (wide, at) = (true, at + 1),
                _ => at += 1,
            }
        }
        // Escapes are ASCII: the raw text is UTF-8 exactly when the string's value is.
        if wide {
            std::str::from_utf8(&self.b[start..at]).ok()?;
        }
        self.at = at + 1;
        Some(Span {
            start,
            end: at,
            escaped,
        })
    }

    /// A number, checked: `-?(0|[1-9][0-9]*)(.[0-9]+)?` with at most 19 digits on either side
    /// of the point (what the general path reads exactly). Its value when it is a whole
    /// number of at least 0.
    fn number(&mut self) -> Option<Option<u64>> {
        let negative = self.peek()? == b'-';
        self.at += usize::from(negative);
        let (whole, digits) = self.digits()?;
        if digits > 1 && self.b[self.at - digits] == b'0' {
            return None;
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.digits()?;
            return Some(None);
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            return None;
        }
        Some((!negative).then_some(whole))
    }

    /// 1 to 19 decimal digits: their value and count.
    fn digits(&mut self) -> Option<(u64, usize)> {
        let start = self.at;
        let mut v = 0u64;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            if self.at - start == 19 {
                return None;
            }
            v = v * 10 + u64::from(d - b'0');
            self.at += 1;
        }
        let n = self.at - start;
        (n > 0).then_some((v, n))
    }

    /// A string or `null`.
    fn text(&mut self) -> Option<Option<Span>> {
        self.or_null(Self::string_value)
    }

    /// A whole number of at least 0, or `null`; `role` is what it is to the event.
    fn count(&mut self, role: Role) -> Option<Option<u64>> {
        self.or_null(|r| r.number_value(role).flatten())
    }

    /// A `delta` or `message`: an object or `null`.
    fn message(&mut self) -> Option<Option<Message>> {
        self.or_null(|r| {
            let (mut m, mut seen) = (Message::default(), 0);
            r.object(3, |r, key| match key {
                b"content" => set(&mut seen, 0, &mut m.content, r.text()),
                b"reasoning_content" => set(&mut seen, 1, &mut m.reasoning_content, r.text()),
                b"reasoning" => set(&mut seen, 2, &mut m.reasoning, r.text()),
                _ => r.skip(4),
            })?;
            Some(m)
        })
    }

    /// `choices`: an array whose first element (an object) is read and the rest checked, or
    /// `null`.
    fn first_choice(&mut self) -> Option<Choice> {
        // Filled in place, not through `or_null`: moving the choice out of an `Option` cost
        // about a tenth of an event's decoding in the tight loop.
        let mut c = Choice::default();
        self.ws();
        if self.word(b"null").is_some() {
            return Some(c);
        }
        self.array(1, |r, i| {
            if i > 0 {
                return r.skip(2);
            }
            let mut seen = 0;
            r.object(2, |r, key| match key {
                b"delta" => set(&mut seen, 0, &mut c.delta, r.message()),
                b"message" => set(&mut seen, 1, &mut c.message, r.message()),
                b"text" => set(&mut seen, 2, &mut c.text, r.text()),
                b"finish_reason" => set(&mut seen, 3, &mut c.finish_reason, r.text()),
                _ => r.skip(3),
            })
        })?;
        Some(c)
    }

    /// `usage`: an object or `null`.
    fn usage(&mut self) -> Option<Option<Usage>> {
        self.or_null(|r| {
            let (mut u, mut seen) = (Usage::default(), 0);
            r.object(1, |r, key| match key {
                b"prompt_tokens" | b"input_tokens" => set(
                    &mut seen,
                    0,
                    &mut u.prompt_tokens,
                    r.count(Role::PromptTokens),
                ),
                b"completion_tokens" | b"output_tokens" => set(
                    &mut seen,
                    1,
                    &mut u.completion_tokens,
                    r.count(Role::CompletionTokens),
                ),
                b"prompt_tokens_details" | b"input_tokens_details" => {
                    set(&mut seen, 2, &mut u.cached_tokens, r.token_details())
                }
                _ => r.skip(2),
            })?;
            Some(u)
        })
    }

    /// `prompt_tokens_details` (the Responses API's `input_tokens_details`): an object or
    /// `null`; its `cached_tokens`, the prompt tokens the server's cache served.
    fn token_details(&mut self) -> Option<Option<u64>> {
        let details = self.or_null(|r| {
            let (mut cached, mut seen) = (None, 0);
            r.object(2, |r, key| match key {
                b"cached_tokens" => set(&mut seen, 0, &mut cached, r.count(Role::CachedTokens)),
                _ => r.skip(3),
            })?;
            Some(cached)
        })?;
        Some(details.flatten())
    }
}

/// Where the plain run of string bytes from `b[at]` ends: the first quote, backslash, control
/// character or non-ASCII byte (or the end), looked for eight bytes at a time.
fn plain(b: &[u8], mut at: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    // A high bit of `has_zero(w)` is set for each zero byte of `w`, and nowhere below the
    // first one.
    let has_zero = |w: u64| w.wrapping_sub(ONES) & !w & HIGH;
    while let Some(chunk) = b.get(at..at + 8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let stop = has_zero(w ^ (ONES * u64::from(b'"')))
            | has_zero(w ^ (ONES * u64::from(b'\\')))
            | (w.wrapping_sub(ONES * 0x20) & !w & HIGH)
            | (w & HIGH);
        if stop != 0 {
            return at + (stop.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at
}

/// The four hex digits at `b[at..]`.
fn hex4(b: &[u8], at: usize) -> Option<u32> {
    (b.get(at..at + 4)?.iter()).try_fold(0, |v, &c| Some(v << 4 | char::from(c).to_digit(16)?))
}

/// Unescapes a string [`Reader::string`] checked, in place; returns its new length.
fn unescape(s: &mut [u8]) -> usize {
    let (mut r, mut w) = (0, 0);
    while r < s.len() {
        if s[r] != b'\\' {
            s[w] = s[r];
            (r, w) = (r + 1, w + 1);
            continue;
        }
        let c = match s[r + 1] {
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = hex4(s, r + 2).unwrap_or(0);
                let code = if (0xD800..0xDC00).contains(&hi) {
                    let lo = hex4(s, r + 8).unwrap_or(0xDC00);
                    r += 6;
                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                } else {
                    hi
                };
                r += 4;
                char::from_u32(code).unwrap_or('\u{FFFD}')
            }
            other => char::from(other),
        };
        r += 2;
        w += c.encode_utf8(&mut s[w..]).len();
    }
    w
}

#[cfg(test)]
mod tests {
    use super::super::{decode_general, Json};

    /// What the fast reader makes of `doc` (`None`: declined) and what the general path makes
    /// of it, as their debug forms.
    fn both(doc: &[u8]) -> (Option<String>, Result<String, String>) {
        let mut b = doc.to_vec();
        let fast = super::read(&b).map(|e| format!("{:?}", super::payload(&mut b, e)));
        let mut b = doc.to_vec();
        let general = decode_general(&mut b, &mut Json::default())
            .map(|p| format!("{p:?}"))
            .map_err(|e| e.to_string());
        (fast, general)
    }

    #[test]
    fn the_fast_reader_gives_the_general_paths_result_or_declines() {
        let taken = [
            r#"{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":"a\"b\n\u00e9\ud83d\ude00\/\\\b\f\r\t","reasoning_content":"hm","tool_calls":[{"a":[1,{"b":null}]}]},"logprobs":null,"finish_reason":null},{"index":1,"delta":{"content":"ignored"}}],"created":1}"#,
            r#"{"choices":[{"text":"x","finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":0}}}"#,
            r#"{"choices":[],"usage":{"input_tokens":1,"output_tokens":2}}"#,
            r#"{"choices":null,"usage":null}"#,
            r#"{"choices":[{"delta":null,"message":{"content":null,"reasoning":"r"}}]}"#,
            r#"{"choices":[{"message":{"content":"m"},"text":"t"}]}"#,
            r#"{"choices":[{"delta":{"reasoning":"r\u00e9","content":null},"text":"t","finish_reason":"st\u006fp"}]}"#,
            r#"{"choices":[{"delta":{"content":"a"}}],"x_ringperf_sent_ns":123,"x_ringperf_arrived_ns":9999999999999999999}"#,
            " \t\r\n{ \"choices\" : [ { \"delta\" : { \"content\" : \"ü\" } } , 1 , [ ] , { } ] , \"n\" : [ -0 , 0.5 , -12.25 , true , false , null , \"\" ] } \n",
            r#"{}"#,
        ];
        for doc in taken {
            let (fast, general) = both(doc.as_bytes());
            assert_eq!(fast.as_deref(), Some(general.as_deref().unwrap()), "{doc}");
        }
        let declined: [&[u8]; 27] = [
            br#"{"error":{"message":"x"}}"#,
            br#"{"detail":"Not Found"}"#,
            br#"{"type":"response.output_text.delta","delta":"x"}"#,
            br#"{"choices":[],"choices":[]}"#,
            br#"{"usage":{"prompt_tokens":1,"input_tokens":2}}"#,
            br#"{"choices":[{"delta":{"content":5}}]}"#,
            br#"{"choices":[{"finish_reason":"a","finish_reason":"b"}]}"#,
            br#"{"usage":{"prompt_tokens":-1}}"#,
            br#"{"x_ringperf_sent_ns":1.5}"#,
            br#"{"x_ringperf_sent_ns":18446744073709551616}"#,
            br#"{"choices":[1]}"#,
            br#"{"choices":{"text":"x"}}"#,
            br#"[1]"#,
            br#"{"n":1e5}"#,
            br#"{"n":01}"#,
            br#"{"choices":[{"delta":{"content":"\ud800"}}]}"#,
            br#"{"choices":[{"delta":{"content":"\udc00"}}]}"#,
            br#"{"choices":[{"delta":{"content":"\ud800\u0041"}}]}"#,
            // A high surrogate, then text that would read as a low one were it escaped.
            br#"{"choices":[{"delta":{"content":"\ud800abdc00"}}]}"#,
            br#"{"choices":[{"delta":{"content":"a	b"}}]}"#,
            br#"{"choices":[{"delta":{"cont\u0065nt":"x"}}]}"#,
            br#"{"choices":[{"delta":{"content":"\x"}}]}"#,
            b"{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}",
            br#"{"n":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}"#,
            br#"{"choices":[]} x"#,
            br#"{"choices":[],}"#,
            br#"{"choices":[{"delta":{"content":"a"}}]"#,
        ];
        for doc in declined {
            assert_eq!(both(doc).0, None, "{}", String::from_utf8_lossy(doc));
        }
        // Nesting: objects and arrays down to the limit are read, one more level is declined.
        let depth = super::MAX_DEPTH as usize;
        let objects = |n: usize| format!("{}1{}", r#"{"n":"#.repeat(n + 1), "}".repeat(n + 1));
        let arrays = |n: usize| format!(r#"{{"n":{}1{}}}"#, "[".repeat(n), "]".repeat(n));
        for (nest, name) in [
            (&objects as &dyn Fn(usize) -> String, "objects"),
            (&arrays, "arrays"),
        ] {
            let (fast, general) = both(nest(depth).as_bytes());
            assert_eq!(fast, Some(general.unwrap()), "{name} {depth} deep");
            assert_eq!(both(nest(depth + 1).as_bytes()).0, None, "{name} deeper");
        }
    }

    /// Every JSON event of the recorded vLLM and llama.cpp responses.
    fn capture_events() -> Vec<Vec<u8>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/captures");
        let mut events = Vec::new();
        for server in ["vllm", "llamacpp"] {
            for f in std::fs::read_dir(dir.join(server)).unwrap() {
                let raw = std::fs::read(f.unwrap().path()).unwrap();
                for line in raw.split(|&b| b == b'\n') {
                    let line = line.strip_prefix(b"data: ").unwrap_or(line).trim_ascii();
                    if serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(line)
                        .is_ok()
                    {
                        events.push(line.to_vec());
                    }
                }
            }
        }
        events
    }

    #[test]
    fn the_fast_reader_takes_every_event_of_the_real_captures() {
        let mut taken = 0;
        for e in capture_events() {
            let (fast, general) = both(&e);
            let text = String::from_utf8_lossy(&e);
            match fast {
                Some(f) => {
                    assert_eq!(f, general.unwrap(), "{text}");
                    taken += 1;
                }
                None => assert!(text.contains("\"error\""), "declined: {text}"),
            }
        }
        assert!(taken >= 100, "{taken}");
    }

    /// `decode_from` (the event left as it is) gives `decode`'s result (the event rewritten in
    /// place), and reads an event whose kept strings hold no escapes where it lies.
    #[test]
    fn events_that_stay_as_they_are_decode_the_same_and_unescaped_ones_are_not_copied() {
        let mut docs = capture_events();
        docs.push(br#"{"choices":[{"delta":{"content":"a\nb"}}]}"#.to_vec());
        docs.push(
            br#"{"choices":[{"delta":{"content":"\u00e9"},"finish_reason":"stop"}]}"#.to_vec(),
        );
        docs.push(br#"{"choices":[{"delta":{"content":"x"}}],"error":{"message":"m"}}"#.to_vec());
        docs.push(b"{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}".to_vec());
        let (mut borrowed, mut copied) = (0, 0);
        let (mut j, mut copy) = (Json::default(), Vec::new());
        for doc in &docs {
            let text = String::from_utf8_lossy(doc);
            let mut own = doc.clone();
            let want = format!("{:?}", super::super::decode(&mut own, &mut Json::default()));
            let got = super::super::decode_from(doc, &mut copy, &mut j);
            assert_eq!(format!("{got:?}"), want, "{text}");
            let Ok(p) = got else { continue };
            let inside = doc.as_ptr_range().contains(&p.content.as_ptr());
            if super::read(doc).is_some_and(|e| !e.escaped()) {
                assert!(inside || p.content.is_empty(), "copied: {text}");
                borrowed += 1;
            } else {
                assert!(!inside, "{text}");
                copied += 1;
            }
        }
        assert!(
            borrowed >= 100 && copied >= 3,
            "{borrowed} borrowed, {copied} copied"
        );
    }

    /// `e` broken at each byte: the byte dropped, replaced, or another put before it.
    fn broken(e: &[u8]) -> Vec<Vec<u8>> {
        let mut docs = Vec::new();
        for i in 0..e.len() {
            docs.push([&e[..i], &e[i + 1..]].concat());
            for b in *b"\"\\{}[],:0-.e5n \x01\xc3" {
                docs.push([&e[..i], &[b], &e[i + 1..]].concat());
                docs.push([&e[..i], &[b], &e[i..]].concat());
            }
        }
        docs
    }

    /// What a shape that learned `learned` makes of `doc` by its values alone, and what the
    /// full read makes of it, as their debug forms.
    fn shaped(learned: &[u8], doc: &[u8]) -> (Option<String>, Option<String>) {
        let mut shape = super::Shape::default();
        assert!(shape.read(learned).is_some(), "not learned");
        let fast = shape.matched(doc).map(|e| format!("{e:?}"));
        (fast, super::read(doc).map(|e| format!("{e:?}")))
    }

    /// A simulator-like event: its id, text and send stamp.
    fn sim_event(id: &str, text: &str, sent: &str) -> Vec<u8> {
        format!(
            r#"{{"id":"{id}","object":"chat.completion.chunk","created":1795994442,"model":"m","choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}],"x_ringperf_sent_ns":{sent}}}"#
        )
        .into_bytes()
    }

    const USAGE: &[u8] = br#"{"choices":[{"delta":{"content":""},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#;

    #[test]
    fn a_learned_shape_reads_events_that_differ_in_values_as_the_full_read_does() {
        let learned = sim_event("c-1", "a", "100");
        let reasoning =
            br#"{"choices":[{"delta":{"reasoning_content":"think"}}],"x_ringperf_arrived_ns":5}"#;
        let cases: [(&[u8], Vec<u8>); 7] = [
            (&learned, sim_event("c-2", "bb", "123456789")),
            (&learned, sim_event("c-1", "a", "100")),
            (&learned, sim_event("c-22", r#"\n\u00e9\""#, "9999999999999999999")),
            (&learned, sim_event("c-1", "ü", "0")),
            (USAGE, USAGE.to_vec()),
            (
                reasoning,
                br#"{"choices":[{"delta":{"reasoning_content":"more"}}],"x_ringperf_arrived_ns":77}"#.to_vec(),
            ),
            (
                USAGE,
                br#"{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":30,"completion_tokens":1}}"#.to_vec(),
            ),
        ];
        for (learned, doc) in cases {
            let (fast, full) = shaped(learned, &doc);
            assert!(fast.is_some(), "{}", String::from_utf8_lossy(&doc));
            assert_eq!(fast, full, "{}", String::from_utf8_lossy(&doc));
        }
        // Not matched: a value of another type or out of range, a bad string, other bytes
        // around the values.
        let other: [(&[u8], Vec<u8>); 8] = [
            (&learned, sim_event("c-2", "a", "1.5")),
            (&learned, sim_event("c-2", "a", "-1")),
            (&learned, sim_event("c-2", "a", "99999999999999999999")),
            (&learned, sim_event("c-2", r"\x", "1")),
            (&learned, sim_event("c-2", "\u{1}", "1")),
            (&learned, sim_event("c-2", "a", "null")),
            (&learned, sim_event("c-2", "a", "1 ")),
            (
                USAGE,
                br#"{"choices":[{"delta":{"content":""},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":4.5}}"#.to_vec(),
            ),
        ];
        for (learned, doc) in other {
            let (fast, _) = shaped(learned, &doc);
            assert_eq!(fast, None, "{}", String::from_utf8_lossy(&doc));
        }
    }

    /// Capture and simulator events, each learned, then broken one byte at a time: the shape
    /// matches only what the full read takes, and reads it the same.
    #[test]
    fn broken_events_match_a_learned_shape_only_as_the_full_read_takes_them() {
        let events = capture_events();
        let mut events: Vec<_> = events.into_iter().step_by(8).collect();
        events.push(sim_event("chatcmpl-7", "tok", "1795994442000000000"));
        events.push(USAGE.to_vec());
        let (mut matched, mut missed) = (0, 0);
        for e in &events {
            for d in broken(e) {
                match shaped(e, &d) {
                    (Some(f), full) => {
                        assert_eq!(Some(f), full, "{}", String::from_utf8_lossy(&d));
                        matched += 1;
                    }
                    (None, _) => missed += 1,
                }
            }
        }
        assert!(matched > 1000 && missed > 1000, "{matched} {missed}");
    }

    /// Over the real captures in turn, one shape: every answer is the full read's, most events
    /// are read by their values, and a new shape is learned after enough misses in a row.
    #[test]
    fn one_shape_over_real_responses_answers_as_the_full_read_and_relearns() {
        let mut shape = super::Shape::default();
        let mut by_values = 0;
        let events = capture_events();
        for e in &events {
            by_values += usize::from(shape.matched(e).is_some());
            let got = shape.read(e).map(|e| format!("{e:?}"));
            assert_eq!(got, super::read(e).map(|e| format!("{e:?}")));
        }
        assert!(
            by_values * 2 > events.len(),
            "{by_values} of {}",
            events.len()
        );
        // Other events: after RELEARN_AFTER of them in a row, theirs is the shape; a match
        // breaks the run.
        let other = sim_event("x", "y", "1");
        let mut shape = super::Shape::default();
        assert!(shape.read(USAGE).is_some());
        for run in [super::RELEARN_AFTER - 1, super::RELEARN_AFTER] {
            for _ in 0..run {
                assert!(shape.matched(&other).is_none());
                assert!(shape.read(&other).is_some());
            }
            assert!(shape.read(USAGE).is_some());
        }
        assert!(shape.matched(&sim_event("z", "w", "2")).is_some());
        assert!(shape.matched(USAGE).is_none());
        // Declined documents and large ones are not learned.
        let mut fresh = super::Shape::default();
        assert!(fresh.read(br#"{"error":{"message":"x"}}"#).is_none());
        let big = sim_event("b", &"t".repeat(super::LEARN_MAX), "1");
        assert!(fresh.read(&big).is_some() && fresh.matched(&big).is_none());
        let most = super::LEARN_MAX - sim_event("b", "", "1").len();
        let largest = sim_event("b", &"t".repeat(most), "1");
        assert_eq!(largest.len(), super::LEARN_MAX);
        assert!(fresh.read(&largest).is_some() && fresh.matched(&largest).is_some());
    }

    /// Each capture event broken one byte at a time (dropped, replaced, or a byte put before
    /// it): whatever the fast reader accepts, the general path reads the same.
    #[test]
    fn broken_events_are_read_as_the_general_path_reads_them_or_declined() {
        let events = capture_events();
        let (mut accepted, mut declined) = (0, 0);
        for e in events.iter().step_by(events.len() / 12 + 1) {
            for d in broken(e) {
                match both(&d) {
                    (Some(f), general) => {
                        let text = String::from_utf8_lossy(&d);
                        assert_eq!(Ok(f), general, "{text}");
                        accepted += 1;
                    }
                    (None, _) => declined += 1,
                }
            }
        }
        assert!(accepted > 1000 && declined > 1000, "{accepted} {declined}");
    }
}
