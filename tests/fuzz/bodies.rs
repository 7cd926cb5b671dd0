//! The fuzz targets' bodies, shared by the coverage-guided targets in `fuzz_targets/`
//! (`cargo fuzz`, nightly) and by the smoke test that CI runs on stable
//! (`tests/it/fuzz_smoke.rs`). Each takes arbitrary bytes and panics only on a real bug: a
//! panic inside ringperf, a result that depends on how the bytes were split, memory held past
//! a cap, or (for the differential target) an event the reference reads differently.

use ringperf::internals::exchange::{Exchange, Scratch};
use ringperf::internals::http::{chunked, response};
use ringperf::internals::sse::{Framer, MAX_EVENT};
use ringperf::record::{Phase, Record};

/// Where to split `data` in two, from its first byte (so the fuzzer controls it).
fn split_point(data: &[u8]) -> usize {
    match data.first() {
        Some(&b) if !data.is_empty() => b as usize % (data.len() + 1),
        _ => 0,
    }
}

/// Chunked decoding: the same bytes, the same end and the same verdict whether the input
/// arrives whole or in two reads; never more output than input.
pub fn chunked(data: &[u8]) {
    let whole = decode_chunked(&[data]);
    let at = split_point(data);
    let split = decode_chunked(&[&data[..at], &data[at..]]);
    assert_eq!(whole, split, "split at {at}");
    if let Ok((out, _, _)) = &whole {
        assert!(out.len() <= data.len());
    }
}

type Decoded = Result<(Vec<u8>, usize, bool), ringperf::internals::http::ProtocolError>;

fn decode_chunked(pieces: &[&[u8]]) -> Decoded {
    let mut d = chunked::Decoder::new();
    let mut out = Vec::new();
    let mut used = 0;
    for p in pieces {
        if d.is_done() {
            break;
        }
        used += d.decode(p, &mut |x| out.extend_from_slice(x))?;
    }
    Ok((out, used, d.is_done()))
}

/// Response heads and framing: no panic, and two reads give what one read gives.
pub fn head(data: &[u8]) {
    let whole = parse(&[data]);
    let at = split_point(data);
    assert_eq!(whole, parse(&[&data[..at], &data[at..]]), "split at {at}");
}

/// The status, the body and whether it ended; or the error.
type Parsed = Result<(Option<u16>, Vec<u8>, bool), String>;

fn parse(pieces: &[&[u8]]) -> Parsed {
    let mut p = response::Parser::new();
    let mut pending = Vec::new();
    let (mut status, mut body, mut ended) = (None, Vec::new(), false);
    for piece in pieces {
        pending.extend_from_slice(piece);
        let used = p
            .feed(&pending, &mut |part| match part {
                response::Part::Head(h) => status = Some(h.status),
                response::Part::Body(b) => body.extend_from_slice(b),
                response::Part::End => ended = true,
            })
            .map_err(|e| e.to_string())?;
        pending.drain(..used);
        if ended {
            break;
        }
    }
    Ok((status, body, ended))
}

/// The SSE framer: the same events whole or split; never more than the cap held.
pub fn sse(data: &[u8]) {
    let whole = frame(&[data]);
    let at = split_point(data);
    let split = frame(&[&data[..at], &data[at..]]);
    assert_eq!(whole, split, "split at {at}");
}

fn frame(pieces: &[&[u8]]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut f = Framer::new();
    let mut events = Vec::new();
    for p in pieces {
        let r = f.feed(p, &mut |e| {
            assert!(
                e.data.len() <= MAX_EVENT,
                "an event of {} bytes",
                e.data.len()
            );
            events.push((e.event.to_vec(), e.data.to_vec()));
        });
        if r.is_err() {
            return None;
        }
    }
    Some(events)
}

/// The whole response path (head, chunked or not, SSE, OpenAI decoding) on a streamed 200
/// whose body is `data`: no panic, and the same outcome and content whole or split.
pub fn openai(data: &[u8]) {
    let mut raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n".to_vec();
    raw.extend_from_slice(data);
    let whole = exchange(&[&raw]);
    let at = raw.len() - data.len() + split_point(data);
    assert_eq!(whole, exchange(&[&raw[..at], &raw[at..]]), "split at {at}");
    // The decoder alone, on the bytes as one JSON document.
    let mut doc = data.to_vec();
    SCRATCH.with_borrow_mut(|s| {
        let _ = ringperf::internals::api::openai::decode(&mut doc, &mut s.json);
    });
}

thread_local! {
    /// One scratch for every input (it holds a histogram, costly to make a million times).
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

fn exchange(pieces: &[&[u8]]) -> (String, String, Option<u64>, usize) {
    SCRATCH.with_borrow_mut(|scratch| exchange_with(pieces, scratch))
}

fn exchange_with(pieces: &[&[u8]], scratch: &mut Scratch) -> (String, String, Option<u64>, usize) {
    let mut ex = Exchange::default();
    let mut rec = Record::new(1, 0, Phase::Profiling, 0, Some(0));
    let mut pending = Vec::new();
    for p in pieces {
        if ex.is_done() {
            break;
        }
        pending.extend_from_slice(p);
        let used = ex.feed(&pending, 1, &mut rec, scratch);
        pending.drain(..used);
    }
    if !ex.is_done() {
        ex.eof(2, &mut rec, scratch);
    }
    let events = rec.chunk_gaps_ns.len() + usize::from(rec.first_content_ns.is_some());
    (rec.outcome.name(), rec.text, rec.osl, events)
}

/// The framer against a reference written from the standard's prose, whole input at once:
/// every event the same, or the framer refused an event over its cap.
pub fn sse_differential(data: &[u8]) {
    let Some(got) = frame(&[data]) else {
        assert!(
            data.len() > MAX_EVENT,
            "refused {} bytes as too large",
            data.len()
        );
        return;
    };
    assert_eq!(got, reference_events(data));
}

/// WHATWG "Parsing an event stream", as plainly as it reads: drop one leading BOM; split
/// into lines at CRLF, LF or CR; the last line counts only when it is terminated.
fn reference_events(mut data: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    if data.starts_with(&[0xEF, 0xBB, 0xBF]) {
        data = &data[3..];
    }
    let mut lines = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < data.len() {
        match data[i] {
            b'\r' => {
                lines.push(&data[start..i]);
                if data.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            b'\n' => {
                lines.push(&data[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    let (mut events, mut event, mut buf) = (Vec::new(), Vec::new(), Vec::new());
    for line in lines {
        if line.is_empty() {
            if !buf.is_empty() {
                buf.pop();
                events.push((std::mem::take(&mut event), std::mem::take(&mut buf)));
            } else {
                event.clear();
            }
            continue;
        }
        if line[0] == b':' {
            continue;
        }
        let (field, mut value) = match line.iter().position(|&b| b == b':') {
            Some(c) => (&line[..c], &line[c + 1..]),
            None => (line, &line[line.len()..]),
        };
        if value.first() == Some(&b' ') {
            value = &value[1..];
        }
        match field {
            b"data" => {
                buf.extend_from_slice(value);
                buf.push(b'\n');
            }
            b"event" => event = value.to_vec(),
            _ => {}
        }
    }
    events
}

/// The fast paths against the general one: `data` is two event documents split at its first
/// newline (the whole of it twice when it has none). The one-pass reader on the second, and a
/// shape learned from the first and then matched against the second, each give exactly what
/// simd-json and serde give, errors included.
pub fn openai_differential(data: &[u8]) {
    use ringperf::internals::api::openai::{decode, decode_from, decode_general, Json};
    let (learned, doc) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, data),
    };
    let general = {
        let mut b = doc.to_vec();
        let mut j = Json::default();
        format!(
            "{:?}",
            decode_general(&mut b, &mut j).map_err(|e| e.to_string())
        )
    };
    let fast = {
        let mut b = doc.to_vec();
        let mut j = Json::default();
        format!("{:?}", decode(&mut b, &mut j).map_err(|e| e.to_string()))
    };
    assert_eq!(fast, general, "one-pass reader");
    let mut j = Json::default();
    let mut copy = Vec::new();
    let _ = decode_from(learned, &mut copy, &mut j).map(|p| format!("{p:?}"));
    let shaped = format!(
        "{:?}",
        decode_from(doc, &mut copy, &mut j).map_err(|e| e.to_string())
    );
    assert_eq!(shaped, general, "learned shape");
}

/// The secrets [`redact`] installs. Unlike anything ringperf writes itself: the smoke test
/// installs them in a process that runs every other integration test too.
pub const SECRETS: [&str; 2] = ["sk-fuzz-Qx7Zv9Wq-Plm3", "Zm9vOmJhcg=="];

/// The secrets rule: once a secret is installed, no 8 bytes of it survive [`scrub`] of any
/// text (digits included: only outside text is scrubbed, never ringperf's own numbers), and
/// text is changed only where `<redacted>` stands; a server's text comes out as one line
/// without a control character.
pub fn redact(data: &[u8]) {
    use ringperf::internals::redact::{install, scrub, server_bytes, REDACTED};
    // The secrets' 8-byte windows, each searched for in every output.
    static GRAMS: std::sync::OnceLock<Vec<memchr::memmem::Finder<'static>>> =
        std::sync::OnceLock::new();
    let grams = GRAMS.get_or_init(|| {
        install(SECRETS);
        SECRETS
            .iter()
            .flat_map(|s| s.as_bytes().windows(8).map(memchr::memmem::Finder::new))
            .collect()
    });
    let raw = String::from_utf8_lossy(data);
    let clean = scrub(&raw);
    if let Some(g) = grams.iter().find(|g| g.find(clean.as_bytes()).is_some()) {
        panic!("{:?} survived", String::from_utf8_lossy(g.needle()));
    }
    assert!(clean == raw || clean.contains(REDACTED), "{clean:?}");
    let text = server_bytes(data, 64);
    assert!(!text.chars().any(char::is_control), "{text:?}");
    assert!(text.chars().count() <= 64 * 10 + 1, "{text:?}");
}
