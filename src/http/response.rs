//! Response heads (with httparse) and body framing, as one incremental parser.
//!
//! [`Parser::feed`] takes whatever bytes have arrived and reports, through a callback, the
//! head once it is complete, each piece of body (de-chunked, as slices of the input) and the
//! end of the response. The caller keeps only the bytes the parser did not consume, which can
//! only be an incomplete head: body bytes are always consumed at once.

use super::chunked;
use super::ProtocolError;

/// The largest response head accepted.
pub const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 128;

/// How the body of a response is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body at all (204, 304, or `Content-Length: 0`).
    Empty,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Neither: the body runs until the server closes the connection.
    UntilClose,
}

/// What the client needs from a response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// True when the connection may carry another request after this response.
    pub keep_alive: bool,
    /// How the body ends.
    pub framing: Framing,
    /// True for `Content-Type: text/event-stream`.
    pub event_stream: bool,
    /// The `Content-Encoding` when it is not `identity` (ringperf asks for none).
    pub encoding: Option<String>,
}

/// One step of a response, reported by [`Parser::feed`].
#[derive(Debug, PartialEq, Eq)]
pub enum Part<'a> {
    /// The head is complete.
    Head(&'a Head),
    /// A piece of the (de-chunked) body.
    Body(&'a [u8]),
    /// The response is complete.
    End,
}

#[derive(Debug)]
enum State {
    Head,
    Length(u64),
    Chunked(chunked::Decoder),
    UntilClose,
    Done,
}

/// Incremental response parser for one response.
#[derive(Debug)]
pub struct Parser {
    state: State,
    head: Option<Head>,
}

impl Default for Parser {
    fn default() -> Self {
        Self::new()
    }
}

impl Parser {
    /// A parser waiting for a response head.
    pub fn new() -> Parser {
        Parser {
            state: State::Head,
            head: None,
        }
    }

    /// The head, once parsed.
    pub fn head(&self) -> Option<&Head> {
        self.head.as_ref()
    }

    /// True once the whole response has been read.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// Feeds received bytes. Returns how many were consumed; the rest (an incomplete head)
    /// must be fed again with more bytes appended. Bytes after the end of the response are
    /// left unconsumed: ringperf never pipelines requests, so the caller knows they are
    /// garbage, and the response before them stands.
    pub fn feed(
        &mut self,
        mut input: &[u8],
        on: &mut impl FnMut(Part<'_>),
    ) -> Result<usize, ProtocolError> {
        let total = input.len();
        loop {
            match &mut self.state {
                State::Head => {
                    let Some((head, used)) = parse_head(input)? else {
                        return Ok(total - input.len());
                    };
                    input = &input[used..];
                    self.state = match head.framing {
                        Framing::Empty => State::Done,
                        Framing::Length(n) => State::Length(n),
                        Framing::Chunked => State::Chunked(chunked::Decoder::new()),
                        Framing::UntilClose => State::UntilClose,
                    };
                    on(Part::Head(self.head.insert(head)));
                    if matches!(self.state, State::Done) {
                        on(Part::End);
                    }
                }
                State::Length(remaining) => {
                    let take = (*remaining as usize).min(input.len());
                    if take > 0 {
                        on(Part::Body(&input[..take]));
                    }
                    *remaining -= take as u64;
                    input = &input[take..];
                    if *remaining == 0 {
                        self.state = State::Done;
                        on(Part::End);
                    } else {
                        return Ok(total);
                    }
                }
                State::Chunked(decoder) => {
                    let used = decoder.decode(input, &mut |data| on(Part::Body(data)))?;
                    input = &input[used..];
                    if decoder.is_done() {
                        self.state = State::Done;
                        on(Part::End);
                    } else {
                        return Ok(total);
                    }
                }
                State::UntilClose => {
                    if !input.is_empty() {
                        on(Part::Body(input));
                    }
                    return Ok(total);
                }
                State::Done => return Ok(total - input.len()),
            }
        }
    }

    /// The connection reached end of file. Ends a read-until-close body; an error anywhere
    /// else before the end.
    pub fn eof(&mut self, on: &mut impl FnMut(Part<'_>)) -> Result<(), ProtocolError> {
        match self.state {
            State::Done => Ok(()),
            State::UntilClose => {
                self.state = State::Done;
                on(Part::End);
                Ok(())
            }
            _ => Err(ProtocolError::IncompleteBody),
        }
    }
}

/// Parses one response head, skipping informational (1xx) responses. `Ok(None)` means more
/// bytes are needed.
pub fn parse_head(input: &[u8]) -> Result<Option<(Head, usize)>, ProtocolError> {
    let mut offset = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let used = match resp.parse(&input[offset..]) {
            Ok(httparse::Status::Complete(n)) if offset + n <= MAX_HEAD => n,
            // The same cap whether the head came in one read or in many.
            Ok(httparse::Status::Complete(_)) | Err(httparse::Error::TooManyHeaders) => {
                return Err(ProtocolError::HeadTooLarge(MAX_HEAD));
            }
            Ok(httparse::Status::Partial) => {
                if input.len() - offset > MAX_HEAD {
                    return Err(ProtocolError::HeadTooLarge(MAX_HEAD));
                }
                return Ok(None);
            }
            Err(e) => return Err(ProtocolError::BadHead(e.to_string())),
        };
        let status = resp.code.unwrap_or(0);
        if (100..200).contains(&status) && status != 101 {
            offset += used;
            continue;
        }
        let http10 = resp.version == Some(0);
        let mut keep_alive = !http10;
        let mut length = None;
        let mut chunked = false;
        let mut event_stream = false;
        let mut encoding = None;
        for h in resp.headers.iter() {
            let value = h.value;
            if h.name.eq_ignore_ascii_case("content-length") {
                let text = std::str::from_utf8(value).unwrap_or("").trim();
                let n: u64 = text
                    .parse()
                    .map_err(|_| ProtocolError::BadHead(format!("bad Content-Length {text:?}")))?;
                // RFC 9112 §6.3: differing lengths leave the body's end unknown.
                if length.is_some_and(|m| m != n) {
                    return Err(ProtocolError::BadHead(
                        "two different Content-Length values".into(),
                    ));
                }
                length = Some(n);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = has_token(value, "chunked");
            } else if h.name.eq_ignore_ascii_case("connection") {
                if has_token(value, "close") {
                    keep_alive = false;
                } else if has_token(value, "keep-alive") {
                    keep_alive = true;
                }
            } else if h.name.eq_ignore_ascii_case("content-encoding") {
                let v = String::from_utf8_lossy(value).trim().to_string();
                if !v.eq_ignore_ascii_case("identity") {
                    encoding = Some(v);
                }
            } else if h.name.eq_ignore_ascii_case("content-type") {
                event_stream = starts_with_ignore_case(value, b"text/event-stream");
            }
        }
        let framing = if status == 204 || status == 304 {
            Framing::Empty
        } else if chunked {
            Framing::Chunked
        } else if let Some(n) = length {
            if n == 0 {
                Framing::Empty
            } else {
                Framing::Length(n)
            }
        } else {
            keep_alive = false;
            Framing::UntilClose
        };
        return Ok(Some((
            Head {
                status,
                keep_alive,
                framing,
                event_stream,
                encoding,
            },
            offset + used,
        )));
    }
}

fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

fn starts_with_ignore_case(value: &[u8], prefix: &[u8]) -> bool {
    value.len() >= prefix.len() && value[..prefix.len()].eq_ignore_ascii_case(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &[u8]) -> (Option<Head>, Vec<u8>, bool, usize) {
        let mut p = Parser::new();
        let mut body = Vec::new();
        let mut ended = false;
        let mut head = None;
        let used = p
            .feed(input, &mut |part| match part {
                Part::Head(h) => head = Some(h.clone()),
                Part::Body(b) => body.extend_from_slice(b),
                Part::End => ended = true,
            })
            .unwrap();
        (head, body, ended, used)
    }

    #[test]
    fn content_length_body() {
        let (head, body, ended, _) = run(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\nhello",
        );
        let head = head.unwrap();
        assert_eq!(head.status, 200);
        assert!(head.keep_alive);
        assert!(!head.event_stream);
        assert_eq!(body, b"hello");
        assert!(ended);
    }

    #[test]
    fn partial_head_consumes_nothing() {
        let (head, _, _, used) = run(b"HTTP/1.1 200 OK\r\nContent-Le");
        assert!(head.is_none());
        assert_eq!(used, 0);
    }

    #[test]
    fn keep_alive_rules() {
        let h = |s: &[u8]| parse_head(s).unwrap().unwrap().0;
        assert!(
            !h(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").keep_alive
        );
        assert!(!h(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").keep_alive);
        assert!(
            h(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n").keep_alive
        );
        let until_close = h(b"HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!(until_close.framing, Framing::UntilClose);
        assert!(!until_close.keep_alive);
        assert_eq!(
            h(b"HTTP/1.1 204 No Content\r\n\r\n").framing,
            Framing::Empty
        );
    }

    #[test]
    fn informational_responses_are_skipped() {
        let (head, body, ended, _) =
            run(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        assert_eq!(head.unwrap().status, 200);
        assert_eq!(body, b"ok");
        assert!(ended);
    }

    #[test]
    fn until_close_ends_at_eof_and_early_eof_is_an_error() {
        let mut p = Parser::new();
        p.feed(b"HTTP/1.1 200 OK\r\n\r\nabc", &mut |_| {}).unwrap();
        let mut ended = false;
        p.eof(&mut |part| ended |= part == Part::End).unwrap();
        assert!(ended);

        let mut p = Parser::new();
        p.feed(
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc",
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(p.eof(&mut |_| {}), Err(ProtocolError::IncompleteBody));
    }

    #[test]
    fn bad_inputs_are_errors_not_panics() {
        let mut p = Parser::new();
        assert!(matches!(
            p.feed(b"NOT HTTP AT ALL\r\n\r\n", &mut |_| {}),
            Err(ProtocolError::BadHead(_))
        ));
        let mut p = Parser::new();
        assert!(matches!(
            p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", &mut |_| {}),
            Err(ProtocolError::BadHead(_))
        ));
        let mut p = Parser::new();
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab";
        let r = p.feed(raw, &mut |_| {});
        assert_eq!(r, Ok(raw.len() - 1), "the trailing byte is left over");
        assert!(p.is_done());
    }

    #[test]
    fn the_head_cap_holds_however_the_reads_split() {
        let big = |filler: usize| {
            let mut h = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Pad: ".to_vec();
            h.resize(h.len() + filler, b'a');
            h.extend_from_slice(b"\r\n\r\n");
            h
        };
        let over = big(MAX_HEAD);
        assert!(matches!(
            parse_head(&over),
            Err(ProtocolError::HeadTooLarge(_))
        ));
        for cut in [1, 4096, MAX_HEAD / 2, MAX_HEAD] {
            let mut p = Parser::new();
            let first = p.feed(&over[..cut], &mut |_| {});
            let r = first.and_then(|used| p.feed(&over[used..], &mut |_| {}));
            assert!(
                matches!(r, Err(ProtocolError::HeadTooLarge(_))),
                "cut {cut}: {r:?}"
            );
        }
        assert!(parse_head(&big(MAX_HEAD - 100)).unwrap().is_some());
    }

    #[test]
    fn eighty_headers_are_fine_and_conflicting_lengths_are_not() {
        let mut h = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n".to_vec();
        for i in 0..80 {
            h.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
        }
        h.extend_from_slice(b"\r\n");
        assert!(parse_head(&h).unwrap().is_some());
        let same = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n";
        assert!(parse_head(same).unwrap().is_some());
        let differ = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n";
        assert!(parse_head(differ)
            .unwrap_err()
            .to_string()
            .contains("two different Content-Length"));
    }
}
