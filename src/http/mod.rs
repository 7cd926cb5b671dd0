//! HTTP/1.1 client protocol, sans-IO.
//!
//! Nothing here touches a socket or a clock: [`request`] builds request bytes before the run
//! starts, [`response::Parser`] turns received bytes into a head, body pieces and an end, and
//! [`chunked::Decoder`] undoes chunked transfer coding one byte range at a time. Because the
//! parser never needs the whole body, it works the same however the network cuts the bytes;
//! the protocol tests check exactly that at every byte split of real captures.

pub mod chunked;
pub mod request;
pub mod response;

/// What went wrong while reading a response. Each kind is counted separately in the results.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// The status line or a header line is not valid HTTP/1.x.
    #[error("malformed response head: {0}")]
    BadHead(String),
    /// The response head is larger than the parser accepts.
    #[error("response head larger than {0} bytes")]
    HeadTooLarge(usize),
    /// A chunk-size line is not hexadecimal or the size is absurd.
    #[error("malformed chunk size line")]
    BadChunkSize,
    /// A chunk's data is not followed by CRLF.
    #[error("chunk data not followed by CRLF")]
    BadChunkEnd,
    /// The connection closed before the body was complete.
    #[error("connection closed before the response body ended")]
    IncompleteBody,
}
