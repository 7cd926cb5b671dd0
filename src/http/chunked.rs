//! Chunked transfer coding (RFC 9112 §7.1), decoded incrementally.
//!
//! The decoder keeps its place in a small state machine, so a chunk-size line or a CRLF may be
//! split across reads anywhere. Data is handed to the sink as slices of the input: no copy.
//! Chunk extensions are skipped, trailer fields are read and ignored. A bare LF is accepted
//! where CRLF is expected, as most clients do.

use super::ProtocolError;

/// Larger than any real chunk; guards the size accumulator against overflow.
const MAX_CHUNK: u64 = 1 << 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading hex digits of a chunk size (`any` = at least one digit seen).
    Size { any: bool },
    /// After the size: skipping a chunk extension until the line ends.
    Extension,
    /// Saw CR at the end of the size line.
    SizeLf,
    /// Inside chunk data.
    Data,
    /// After chunk data: expecting CR or LF.
    DataCr,
    /// After chunk data and CR: expecting LF.
    DataLf,
    /// At the start of a trailer line (or the final empty line).
    TrailerStart,
    /// Inside a trailer field line.
    TrailerText,
    /// Saw CR at the start of a trailer line: the final LF ends the body.
    EndLf,
    /// The last chunk and its trailer have been read.
    Done,
}

/// Incremental chunked-body decoder.
#[derive(Debug, Clone)]
pub struct Decoder {
    state: State,
    size: u64,
    remaining: u64,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder at the start of a chunked body.
    pub fn new() -> Decoder {
        Decoder {
            state: State::Size { any: false },
            size: 0,
            remaining: 0,
        }
    }

    /// True once the terminating chunk and trailer have been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes as much of `input` as belongs to the body, handing data to `sink`.
    /// Returns how many bytes were consumed: all of them unless the body ended inside `input`.
    pub fn decode(
        &mut self,
        input: &[u8],
        sink: &mut impl FnMut(&[u8]),
    ) -> Result<usize, ProtocolError> {
        let mut i = 0;
        while i < input.len() {
            match self.state {
                State::Data => {
                    let take = (self.remaining as usize).min(input.len() - i);
                    sink(&input[i..i + take]);
                    i += take;
                    self.remaining -= take as u64;
                    if self.remaining == 0 {
                        self.state = State::DataCr;
                    }
                    continue;
                }
                State::Done => return Ok(i),
                _ => {}
            }
            let b = input[i];
            i += 1;
            self.state = match self.state {
                State::Size { any } => match b {
                    b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                        let digit = (b as char).to_digit(16).expect("hex digit") as u64;
                        self.size = self.size * 16 + digit;
                        if self.size > MAX_CHUNK {
                            return Err(ProtocolError::BadChunkSize);
                        }
                        State::Size { any: true }
                    }
                    b';' | b' ' | b'\t' if any => State::Extension,
                    b'\r' if any => State::SizeLf,
                    b'\n' if any => self.start_chunk(),
                    _ => return Err(ProtocolError::BadChunkSize),
                },
                State::Extension => match b {
                    b'\r' => State::SizeLf,
                    b'\n' => self.start_chunk(),
                    _ => State::Extension,
                },
                State::SizeLf => match b {
                    b'\n' => self.start_chunk(),
                    _ => return Err(ProtocolError::BadChunkSize),
                },
                State::DataCr => match b {
                    b'\r' => State::DataLf,
                    b'\n' => State::Size { any: false },
                    _ => return Err(ProtocolError::BadChunkEnd),
                },
                State::DataLf => match b {
                    b'\n' => State::Size { any: false },
                    _ => return Err(ProtocolError::BadChunkEnd),
                },
                State::TrailerStart => match b {
                    b'\r' => State::EndLf,
                    b'\n' => State::Done,
                    _ => State::TrailerText,
                },
                State::TrailerText => match b {
                    b'\n' => State::TrailerStart,
                    _ => State::TrailerText,
                },
                State::EndLf => match b {
                    b'\n' => State::Done,
                    _ => return Err(ProtocolError::BadChunkEnd),
                },
                State::Data | State::Done => unreachable!("handled above"),
            };
        }
        Ok(i)
    }

    fn start_chunk(&mut self) -> State {
        let size = std::mem::take(&mut self.size);
        if size == 0 {
            State::TrailerStart
        } else {
            self.remaining = size;
            State::Data
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Result<(Vec<u8>, usize, bool), ProtocolError> {
        let mut d = Decoder::new();
        let mut out = Vec::new();
        let used = d.decode(input, &mut |s| out.extend_from_slice(s))?;
        Ok((out, used, d.is_done()))
    }

    #[test]
    fn simple_body_with_trailer_and_extension() {
        let body = b"5;name=x\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
        let (out, used, done) = decode_all(body).unwrap();
        assert_eq!(out, b"hello, world");
        assert!(done);
        assert_eq!(&body[used..], b"NEXT");
    }

    #[test]
    fn every_split_gives_the_same_bytes() {
        let body = b"a\r\n0123456789\r\n3\r\nabc\r\n0\r\n\r\n";
        for cut in 0..=body.len() {
            let mut d = Decoder::new();
            let mut out = Vec::new();
            let a = d
                .decode(&body[..cut], &mut |s| out.extend_from_slice(s))
                .unwrap();
            assert_eq!(a, cut);
            d.decode(&body[cut..], &mut |s| out.extend_from_slice(s))
                .unwrap();
            assert_eq!(out, b"0123456789abc", "cut at {cut}");
            assert!(d.is_done());
        }
    }

    #[test]
    fn bare_lf_is_accepted() {
        let (out, _, done) = decode_all(b"3\nabc\n0\n\n").unwrap();
        assert_eq!(out, b"abc");
        assert!(done);
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(decode_all(b"zz\r\n"), Err(ProtocolError::BadChunkSize));
        assert_eq!(decode_all(b"\r\n"), Err(ProtocolError::BadChunkSize));
        assert_eq!(decode_all(b"3\r\nabcX"), Err(ProtocolError::BadChunkEnd));
        assert_eq!(
            decode_all(b"ffffffffffffffffff\r\n"),
            Err(ProtocolError::BadChunkSize)
        );
    }

    #[test]
    fn early_eof_is_not_done() {
        let (out, _, done) = decode_all(b"5\r\nhel").unwrap();
        assert_eq!(out, b"hel");
        assert!(!done);
    }
}
