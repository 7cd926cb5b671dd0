//! Server-sent events framing (WHATWG HTML, "Parsing an event stream"), sans-IO.
//!
//! [`Framer::feed`] takes body bytes as they arrive, cut anywhere, and reports each complete
//! event. It follows the standard exactly: lines end in CRLF, LF or CR (a CRLF split between
//! two reads counts once); a leading byte-order mark is dropped; `data:` lines are joined with
//! `\n`; `event:` sets the type; `id:` the last event id; a line starting with `:` is a comment
//! (llama.cpp's keep-alive pings); a line without a colon is a field with an empty value; one
//! space after the colon is dropped; an empty line dispatches the event if it has data.
//!
//! An event that lies whole in the bytes fed (one `data:` line and the empty line after it, as
//! servers send each streamed chunk) is handed out from those bytes, copied nowhere; any other
//! is gathered in the framer's own buffer first.
//!
//! Memory is bounded: an event (its unfinished line plus its data so far) may hold at most
//! [`MAX_EVENT`] bytes. A server that never ends a line or an event gets [`TooLarge`], not
//! the client's memory.

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// The most bytes one event may hold while it is read: its unfinished line plus the data
/// lines gathered so far. One streamed chunk of an LLM server is a few hundred bytes; 512 KiB
/// leaves room for large tool-call arguments and log-probabilities, and keeps 64 streams that
/// all misbehave under 64 MiB, allocator overhead included.
pub const MAX_EVENT: usize = 512 << 10;

/// Buffers grown past this are given back when the framer is reset for the next stream.
const KEEP_CAPACITY: usize = 64 << 10;

/// An event grew past [`MAX_EVENT`]; the framer has dropped it and must be reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge;

/// One dispatched event.
#[derive(Debug)]
pub struct Event<'a> {
    /// The event type; empty means the default, `message`.
    pub event: &'a [u8],
    /// The data lines joined with `\n`, without the final newline.
    pub data: &'a [u8],
}

/// Incremental event-stream parser.
#[derive(Debug, Default)]
pub struct Framer {
    line: Vec<u8>,
    data: Vec<u8>,
    event: Vec<u8>,
    last_id: Vec<u8>,
    after_cr: bool,
    bom_seen: u8,
    started: bool,
    comments: u64,
}

impl Framer {
    /// A framer at the start of a stream.
    pub fn new() -> Framer {
        Framer::default()
    }

    /// Forgets everything, keeping the buffers' capacity, for the next stream.
    pub fn reset(&mut self) {
        for buf in [&mut self.line, &mut self.data] {
            buf.clear();
            if buf.capacity() > KEEP_CAPACITY {
                *buf = Vec::new();
            }
        }
        self.event.clear();
        self.last_id.clear();
        self.after_cr = false;
        self.bom_seen = 0;
        self.started = false;
        self.comments = 0;
    }

    /// Comment lines seen so far (keep-alive pings).
    pub fn comments(&self) -> u64 {
        self.comments
    }

    /// The last event id the stream set.
    pub fn last_event_id(&self) -> &[u8] {
        &self.last_id
    }

    /// True if the stream ended inside an event that was never dispatched (the standard says
    /// to discard it; ringperf counts it).
    pub fn has_pending(&self) -> bool {
        !self.line.is_empty() || !self.data.is_empty()
    }

    /// Feeds body bytes, reporting each complete event to `on`. Fails, and drops what it
    /// held, when an event grows past [`MAX_EVENT`].
    pub fn feed(
        &mut self,
        mut input: &[u8],
        on: &mut impl FnMut(Event<'_>),
    ) -> Result<(), TooLarge> {
        if !self.started {
            input = self.skip_bom(input);
            if !self.started {
                return Ok(());
            }
        }
        while !input.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if input[0] == b'\n' {
                    input = &input[1..];
                    continue;
                }
            }
            match memchr::memchr2(b'\n', b'\r', input) {
                Some(end) => {
                    if let Some(rest) = self.whole_event(input, end, on) {
                        input = rest;
                        continue;
                    }
                    self.after_cr = input[end] == b'\r';
                    if self.line.is_empty() {
                        self.process_line(&input[..end], on);
                    } else {
                        let mut line = std::mem::take(&mut self.line);
                        append(&mut line, &input[..end]);
                        self.process_line(&line, on);
                        line.clear();
                        self.line = line;
                    }
                    input = &input[end + 1..];
                    if self.data.len() > MAX_EVENT {
                        return Err(self.too_large());
                    }
                }
                None => {
                    if self.line.len() + self.data.len() + input.len() > MAX_EVENT {
                        return Err(self.too_large());
                    }
                    append(&mut self.line, input);
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// When `input` starts with a whole one-line event, a `data` line ending at `input[end]`
    /// and the empty line right after it, with nothing of the event gathered before:
    /// dispatches it from `input` and returns what follows. Else `None`, and nothing is done.
    fn whole_event<'a>(
        &mut self,
        input: &'a [u8],
        end: usize,
        on: &mut impl FnMut(Event<'_>),
    ) -> Option<&'a [u8]> {
        if !self.line.is_empty() || !self.data.is_empty() {
            return None;
        }
        let (name, value) = field(&input[..end]);
        // Past the cap, the gathering path reports the event as too large.
        if name != b"data" || value.len() >= MAX_EVENT {
            return None;
        }
        // The data line's end (CR LF counts once), then the empty line's.
        let mut at = end + 1;
        if input[end] == b'\r' && input.get(at) == Some(&b'\n') {
            at += 1;
        }
        let blank = *input.get(at).filter(|&&b| b == b'\n' || b == b'\r')?;
        self.after_cr = blank == b'\r';
        on(Event {
            event: &self.event,
            data: value,
        });
        self.event.clear();
        Some(&input[at + 1..])
    }

    fn too_large(&mut self) -> TooLarge {
        self.line = Vec::new();
        self.data = Vec::new();
        TooLarge
    }

    fn skip_bom<'a>(&mut self, mut input: &'a [u8]) -> &'a [u8] {
        while let Some(&b) = input.first() {
            if b == BOM[self.bom_seen as usize] {
                self.bom_seen += 1;
                input = &input[1..];
                if self.bom_seen as usize == BOM.len() {
                    self.started = true;
                    return input;
                }
            } else {
                // Not a BOM after all: the bytes matched so far are ordinary line content.
                self.line.extend_from_slice(&BOM[..self.bom_seen as usize]);
                self.started = true;
                return input;
            }
        }
        input
    }

    fn process_line(&mut self, line: &[u8], on: &mut impl FnMut(Event<'_>)) {
        if line.is_empty() {
            self.dispatch(on);
            return;
        }
        if line[0] == b':' {
            self.comments += 1;
            return;
        }
        let (field, value) = field(line);
        match field {
            b"data" => {
                append(&mut self.data, value);
                self.data.push(b'\n');
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            b"id" if !value.contains(&0) => {
                self.last_id.clear();
                self.last_id.extend_from_slice(value);
            }
            _ => {} // `retry` and unknown fields do not concern a benchmark client.
        }
    }

    fn dispatch(&mut self, on: &mut impl FnMut(Event<'_>)) {
        if self.data.is_empty() {
            self.event.clear();
            return;
        }
        self.data.pop(); // the last data line's newline
        on(Event {
            event: &self.event,
            data: &self.data,
        });
        self.data.clear();
        self.event.clear();
    }
}

/// A field line's name and value: the value follows the first colon, less one space after
/// it; a line without a colon is a name with an empty value.
fn field(line: &[u8]) -> (&[u8], &[u8]) {
    match memchr::memchr(b':', line) {
        Some(colon) => {
            let v = &line[colon + 1..];
            (&line[..colon], v.strip_prefix(b" ").unwrap_or(v))
        }
        None => (line, &b""[..]),
    }
}

/// Appends to an event buffer. Past [`KEEP_CAPACITY`] the buffer is given room for a whole
/// event at once: growing by doubling would leave the freed smaller blocks with the allocator,
/// and a stream cut at the cap would cost about twice the cap.
fn append(buf: &mut Vec<u8>, bytes: &[u8]) {
    let need = buf.len() + bytes.len();
    if need > buf.capacity() && need > KEEP_CAPACITY {
        buf.reserve_exact(MAX_EVENT.max(need) - buf.len());
    }
    buf.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> Vec<(String, String)> {
        let mut f = Framer::new();
        let mut out = Vec::new();
        for c in chunks {
            f.feed(c, &mut |e| {
                out.push((
                    String::from_utf8_lossy(e.event).into_owned(),
                    String::from_utf8_lossy(e.data).into_owned(),
                ))
            })
            .unwrap();
        }
        out
    }

    fn ev(e: &str, d: &str) -> (String, String) {
        (e.to_string(), d.to_string())
    }

    #[test]
    fn whatwg_examples() {
        // Multi-line data, comment, event type, field without colon, no-space value.
        let s = b": ping\n\ndata: first\ndata:second\n\nevent: add\ndata\n\ndata:  two spaces\n\n";
        assert_eq!(
            events(&[s]),
            vec![
                ev("", "first\nsecond"),
                ev("add", ""),
                ev("", " two spaces")
            ]
        );
    }

    #[test]
    fn data_less_event_is_not_dispatched_and_resets_type() {
        assert_eq!(events(&[b"event: x\n\ndata: y\n\n"]), vec![ev("", "y")]);
    }

    #[test]
    fn line_endings_cr_lf_crlf_and_split_crlf() {
        assert_eq!(
            events(&[b"data: a\r\n\r\ndata: b\r\rdata: c\n\n"]),
            vec![ev("", "a"), ev("", "b"), ev("", "c")]
        );
        // CR at the end of one read, LF at the start of the next: one line end, not two.
        assert_eq!(
            events(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]),
            vec![ev("", "a\nb")]
        );
    }

    #[test]
    fn a_whole_one_line_event_is_handed_out_from_the_bytes_fed() {
        // Each ending of the data line and of the empty line after it, with an event type set
        // before, and a last event cut before its empty line.
        let input = b"event: add\ndata: a\n\ndata:b\r\n\r\ndata: c\r\rdata: d\n\rdata: e\n";
        let range = input.as_ptr_range();
        let mut f = Framer::new();
        let mut got = Vec::new();
        f.feed(input, &mut |e| {
            assert!(range.contains(&e.data.as_ptr()), "copied: {:?}", e.data);
            got.push((e.event.to_vec(), e.data.to_vec()));
        })
        .unwrap();
        let want: Vec<(Vec<u8>, Vec<u8>)> = [("add", "a"), ("", "b"), ("", "c"), ("", "d")]
            .iter()
            .map(|(e, d)| (e.as_bytes().to_vec(), d.as_bytes().to_vec()))
            .collect();
        assert_eq!(got, want);
        // The last one is gathered, and dispatched once its empty line comes; the LF after a
        // CR that ended the previous read is not a second empty line.
        assert!(f.has_pending());
        let mut n = 0;
        f.feed(b"\r", &mut |e| {
            assert_eq!(e.data, b"e");
            n += 1
        })
        .unwrap();
        f.feed(b"\ndata: f\n\n", &mut |e| {
            assert_eq!(e.data, b"f");
            n += 1
        })
        .unwrap();
        assert_eq!(n, 2);
        // Two data lines, each ending in CR LF: one event, not two.
        assert_eq!(
            events(&[b"data: a\r\ndata: b\r\n\r\n"]),
            vec![ev("", "a\nb")]
        );
    }

    /// The fast path hands back exactly what follows the event's empty line, and remembers
    /// whether that line ended in a CR (an LF at the start of the next read belongs to it).
    /// Re-reading a blank line would cost nothing visible, so this is checked directly.
    #[test]
    fn a_whole_event_hands_back_exactly_the_bytes_after_its_empty_line() {
        for (input, rest, after_cr) in [
            (&b"data: x\n\nrest"[..], &b"rest"[..], false),
            // The caller drops the LF of a CR LF empty line.
            (b"data: x\r\n\r\nrest", b"\nrest", true),
            (b"data: x\r\rrest", b"rest", true),
            (b"data: x\n\rrest", b"rest", true),
        ] {
            let end = input
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
                .unwrap();
            let mut f = Framer::new();
            let mut n = 0;
            let got = f.whole_event(input, end, &mut |e| {
                assert_eq!(e.data, b"x");
                n += 1;
            });
            assert_eq!(got, Some(rest), "{input:?}");
            assert_eq!((n, f.after_cr), (1, after_cr), "{input:?}");
        }
    }

    #[test]
    fn bom_is_dropped_even_when_split() {
        let mut s = BOM.to_vec();
        s.extend_from_slice(b"data: x\n\n");
        for cut in 0..s.len() {
            assert_eq!(
                events(&[&s[..cut], &s[cut..]]),
                vec![ev("", "x")],
                "cut {cut}"
            );
        }
        // A stream that merely starts with 0xEF keeps it.
        let got = events(&[&[0xEF, b'd'], b"ata: z\n\n"]);
        assert!(got.is_empty(), "field name is not 'data': {got:?}");
    }

    #[test]
    fn pending_event_at_end_is_reported_not_dispatched() {
        let mut f = Framer::new();
        let mut n = 0;
        f.feed(b"data: x\n", &mut |_| n += 1).unwrap();
        assert_eq!(n, 0);
        assert!(f.has_pending());
    }

    #[test]
    fn comments_and_ids_are_tracked() {
        let mut f = Framer::new();
        f.feed(b":\n: ping\nid: 42\ndata: x\n\n", &mut |_| {})
            .unwrap();
        assert_eq!(f.comments(), 2);
        assert_eq!(f.last_event_id(), b"42");
    }

    #[test]
    fn a_line_that_never_ends_is_cut_at_the_cap() {
        let mut f = Framer::new();
        f.feed(b"data: ", &mut |_| panic!()).unwrap();
        let block = vec![b'x'; 64 << 10];
        let mut fed = 6;
        let err = loop {
            match f.feed(&block, &mut |_| panic!("no event ends")) {
                Ok(()) => fed += block.len(),
                Err(e) => break e,
            }
            assert!(fed <= MAX_EVENT, "held {fed} bytes");
        };
        assert_eq!(err, TooLarge);
        assert!(fed + block.len() > MAX_EVENT, "cut early, at {fed}");
        assert!(!f.has_pending(), "what it held is dropped");
        f.reset();
        let mut got = 0;
        f.feed(b"data: ok\n\n", &mut |_| got += 1).unwrap();
        assert_eq!(got, 1, "usable again after a reset");
    }

    #[test]
    fn many_short_data_lines_are_capped_too() {
        let mut f = Framer::new();
        let line = [b"data: ".as_slice(), &[b'y'; 1000], b"\n"].concat();
        let per_line = 1001; // what one line adds to the event's data
        let mut lines = 0;
        while f.feed(&line, &mut |_| panic!("no blank line")).is_ok() {
            lines += 1;
            assert!(
                lines * per_line <= MAX_EVENT + per_line,
                "held {lines} lines"
            );
        }
        assert!(
            (lines + 1) * per_line > MAX_EVENT,
            "cut early, after {lines} lines"
        );
        // A comment line that never ends is a line like any other.
        let mut f = Framer::new();
        let comment = vec![b':'; MAX_EVENT + 1];
        assert_eq!(f.feed(&comment, &mut |_| {}), Err(TooLarge));
    }

    #[test]
    fn an_event_just_under_the_cap_is_dispatched() {
        let mut f = Framer::new();
        let data = vec![b'z'; MAX_EVENT - 16];
        let mut got = 0;
        for part in [b"data: ".as_slice(), &data, b"\n\n"] {
            f.feed(part, &mut |e| got = e.data.len()).unwrap();
        }
        assert_eq!(got, data.len());
    }
}
