//! One blocking HTTP/1.1 exchange outside the run: scrapes of `/metrics`, the preflight's
//! `GET /v1/models` and probe request.
//!
//! The bytes go out as given and come back to a caller's sans-IO decoder, read by read, so the
//! load's own parsers judge these responses too. Nothing here is on the hot path.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::endpoint::Endpoint;
use crate::http::ProtocolError;

/// The longest a connection may take to open, whatever the exchange's limit.
const CONNECT_AT_MOST: Duration = Duration::from_secs(15);

/// Where to connect: the address, and for https the TLS configuration and the server name.
pub(crate) struct To<'a> {
    /// The resolved address.
    pub addr: SocketAddr,
    /// `https`: the client configuration and the host as written (SNI, certificate check).
    pub tls: Option<(&'a Arc<rustls::ClientConfig>, &'a str)>,
}

impl<'a> To<'a> {
    /// Where `endpoint` is, with `tls` for https (ignored for http).
    pub(crate) fn of(endpoint: &'a Endpoint, tls: Option<&'a Arc<rustls::ClientConfig>>) -> Self {
        To {
            addr: endpoint.addr,
            tls: tls
                .filter(|_| endpoint.tls)
                .map(|c| (c, endpoint.host.as_str())),
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// Why an exchange failed, by the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No connection (refused, unreachable, timed out).
    #[error("connect: {0}")]
    Connect(#[source] std::io::Error),
    /// The TLS handshake failed.
    #[error("TLS handshake: {0}{hint}", hint = crate::tls::handshake_hint(&.0.to_string()))]
    Tls(#[source] Box<Handshake>),
    /// A step (`socket`, `send`, `read`) failed at the system.
    #[error("{step}: {source}")]
    Io {
        /// The step.
        step: &'static str,
        /// The system's error.
        source: std::io::Error,
    },
    /// The time ran out at a step.
    #[error("{step}: no answer within {timeout:?}")]
    TimedOut {
        /// The step.
        step: &'static str,
        /// The whole exchange's time.
        timeout: Duration,
    },
    /// The server closed the connection before the response ended.
    #[error("read: the connection closed before the response ended")]
    Closed,
    /// The server closed the connection where the response cannot end.
    #[error("read: {0}")]
    Truncated(#[source] ProtocolError),
    /// The response broke HTTP/1.1 framing.
    #[error("{0}")]
    Http(#[source] ProtocolError),
    /// The body passed the most the caller reads (bytes).
    #[error("the body exceeds {} KiB", .0 / 1024)]
    TooLarge(usize),
}

impl Error {
    /// Whether the server closed the connection before its response ended (what a TLS
    /// server does to a plain-text request).
    pub(crate) fn closed_early(&self) -> bool {
        matches!(
            self,
            Error::Closed | Error::Truncated(ProtocolError::IncompleteBody)
        )
    }
}

/// Why a TLS handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum Handshake {
    /// The host is not a name a certificate can be checked against.
    #[error("{0}")]
    Name(#[source] crate::tls::TlsError),
    /// rustls refused the handshake (a certificate, a protocol error).
    #[error("{0}")]
    Tls(#[source] rustls::Error),
    /// The connection failed during the handshake.
    #[error("{0}")]
    Io(#[source] std::io::Error),
    /// The server closed the connection during the handshake.
    #[error("the server closed the connection")]
    Closed,
}

/// Sends `request` and hands each read's bytes to `on_bytes` until it returns true (the
/// response is complete) or the server closes (`on_bytes` gets an empty slice then). The
/// whole exchange gets `timeout`, connecting included.
pub(crate) fn exchange(
    to: &To<'_>,
    request: &[u8],
    timeout: Duration,
    mut on_bytes: impl FnMut(&[u8]) -> Result<bool, Error>,
) -> Result<(), Error> {
    let deadline = Instant::now() + timeout;
    let left = |what: &'static str| {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or(Error::TimedOut {
                step: what,
                timeout,
            })
    };
    // A connection that takes longer than this is not coming (a firewall dropping the
    // packets): a hub download behind one fails in seconds, not at the transfer's limit.
    let connect = timeout.min(CONNECT_AT_MOST);
    let mut tcp = TcpStream::connect_timeout(&to.addr, connect).map_err(Error::Connect)?;
    let io = |step: &'static str| move |source: std::io::Error| Error::Io { step, source };
    tcp.set_read_timeout(Some(left("TLS handshake")?))
        .map_err(io("socket"))?;
    tcp.set_write_timeout(Some(left("send")?))
        .map_err(io("socket"))?;
    let tls = |h| Error::Tls(Box::new(h));
    let mut stream: Box<dyn ReadWrite> = match to.tls {
        Some((config, host)) => {
            let name = crate::tls::server_name(host).map_err(|e| tls(Handshake::Name(e)))?;
            let mut conn = rustls::ClientConnection::new(config.clone(), name)
                .map_err(|e| tls(Handshake::Tls(e)))?;
            while conn.is_handshaking() {
                let moved = conn
                    .complete_io(&mut tcp)
                    .map_err(|e| tls(Handshake::Io(e)))?;
                if moved == (0, 0) {
                    return Err(tls(Handshake::Closed));
                }
            }
            Box::new(rustls::StreamOwned::new(
                conn,
                tcp.try_clone().map_err(io("socket"))?,
            ))
        }
        None => Box::new(tcp.try_clone().map_err(io("socket"))?),
    };
    stream
        .write_all(request)
        .and_then(|()| stream.flush())
        .map_err(io("send"))?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        tcp.set_read_timeout(Some(left("read")?))
            .map_err(io("socket"))?;
        let n = match stream.read(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(Error::TimedOut {
                    step: "read",
                    timeout,
                })
            }
            Err(e) => return Err(io("read")(e)),
        };
        if on_bytes(&buf[..n])? || n == 0 {
            return Ok(());
        }
    }
}

/// The bytes of a request without a body (`GET`, or a `POST` of nothing), closing after it.
pub(crate) fn request(
    method: &str,
    path: &str,
    authority: &str,
    headers: &[(String, String)],
    accept: &str,
) -> Vec<u8> {
    let mut r = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: ringperf/{}\r\nAccept: {accept}\r\nConnection: close\r\n",
        env!("CARGO_PKG_VERSION")
    );
    if method == "POST" {
        r.push_str("Content-Length: 0\r\n");
    }
    for (name, value) in headers {
        r.push_str(&format!("{name}: {value}\r\n"));
    }
    r.push_str("\r\n");
    r.into_bytes()
}

/// A whole response.
pub(crate) struct Fetched {
    /// The status code.
    pub status: u16,
    /// Every header, as sent.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Fetched {
    /// The first header of that name.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `request` and reads the whole response (decoded from chunked where it was).
pub(crate) fn fetch(
    to: &To<'_>,
    request: &[u8],
    timeout: Duration,
    body_cap: usize,
) -> Result<Fetched, Error> {
    use crate::http::response::{Parser, Part};
    let mut parser = Parser::new();
    let (mut status, mut body, mut done) = (0, Vec::new(), false);
    let mut headers = Vec::new();
    let mut pending = Vec::new();
    exchange(to, request, timeout, |bytes| {
        let had_head = status != 0;
        let mut on = |p: Part<'_>| match p {
            Part::Head(h) => status = h.status,
            Part::Body(b) => body.extend_from_slice(b),
            Part::End => done = true,
        };
        if bytes.is_empty() {
            parser.eof(&mut on).map_err(Error::Truncated)?;
            return Ok(true);
        }
        pending.extend_from_slice(bytes);
        let used = parser.feed(&pending, &mut on).map_err(Error::Http)?;
        // Until the head is parsed nothing is consumed, so `pending` starts with the head.
        if !had_head && status != 0 {
            headers = header_list(&pending);
        }
        pending.drain(..used);
        if body.len() > body_cap {
            return Err(Error::TooLarge(body_cap));
        }
        Ok(done)
    })?;
    if !done {
        return Err(Error::Closed);
    }
    Ok(Fetched {
        status,
        headers,
        body,
    })
}

/// The headers of a response head (already checked by the response parser).
fn header_list(head: &[u8]) -> Vec<(String, String)> {
    let mut slots = [httparse::EMPTY_HEADER; 128];
    let mut r = httparse::Response::new(&mut slots);
    match r.parse(head) {
        Ok(_) => r
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_string(),
                    String::from_utf8_lossy(h.value).trim().to_string(),
                )
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}
