//! Request bytes, built once before the clock starts.
//!
//! Each prepared request is a complete HTTP/1.1 message with a fixed-width `X-Request-ID`
//! field; sending it copies the bytes into the connection's reused write buffer and writes the
//! request's id into that field. No formatting and no allocation happen per request.

/// Width of the hexadecimal request id written into every request.
pub const ID_WIDTH: usize = 16;
const ID_HEADER: &str = "X-Request-ID: ";

/// A complete request with a slot for its id.
#[derive(Debug, Clone)]
pub struct Template {
    bytes: Vec<u8>,
    id_at: usize,
    body_at: usize,
}

/// The parts of a request that are the same for every request of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `Host` header value (`host:port`).
    pub host: String,
    /// Path and query, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Extra header lines, already validated (`Name: value`).
    pub headers: Vec<(String, String)>,
    /// Whether the response is expected as a server-sent event stream.
    pub streaming: bool,
}

impl Template {
    /// Builds `POST path` with a JSON body.
    pub fn post_json(target: &Target, body: &[u8]) -> Template {
        let mut b = Vec::with_capacity(256 + body.len());
        let accept = if target.streaming {
            "text/event-stream"
        } else {
            "application/json"
        };
        b.extend_from_slice(
            format!(
                "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: ringperf/{}\r\nContent-Type: application/json\r\nAccept: {accept}\r\n",
                target.path,
                target.host,
                env!("CARGO_PKG_VERSION")
            )
            .as_bytes(),
        );
        for (name, value) in &target.headers {
            b.extend_from_slice(name.as_bytes());
            b.extend_from_slice(b": ");
            b.extend_from_slice(value.as_bytes());
            b.extend_from_slice(b"\r\n");
        }
        b.extend_from_slice(ID_HEADER.as_bytes());
        let id_at = b.len();
        b.extend_from_slice(&[b'0'; ID_WIDTH]);
        b.extend_from_slice(format!("\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes());
        let body_at = b.len();
        b.extend_from_slice(body);
        Template {
            bytes: b,
            id_at,
            body_at,
        }
    }

    /// Copies the request into `out` (cleared first) with `id` in its `X-Request-ID`.
    #[inline]
    pub fn write_into(&self, out: &mut Vec<u8>, id: u64) {
        out.clear();
        out.extend_from_slice(&self.bytes);
        write_hex(&mut out[self.id_at..self.id_at + ID_WIDTH], id);
    }

    /// The JSON body.
    pub fn body(&self) -> &[u8] {
        &self.bytes[self.body_at..]
    }

    /// Size of the whole request in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never true: a request has at least a request line.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// The id as it appears on the wire and in the records.
pub fn format_id(id: u64) -> String {
    let mut s = [0u8; ID_WIDTH];
    write_hex(&mut s, id);
    String::from_utf8_lossy(&s).into_owned()
}

fn write_hex(out: &mut [u8], mut v: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for slot in out.iter_mut().rev() {
        *slot = DIGITS[(v & 0xf) as usize];
        v >>= 4;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_parses_back_with_its_id_and_body() {
        let headers = vec![("Authorization".to_string(), "Bearer k".to_string())];
        let t = Template::post_json(
            &Target {
                host: "127.0.0.1:8000".into(),
                path: "/v1/chat/completions".into(),
                headers,
                streaming: true,
            },
            br#"{"a":1}"#,
        );
        let mut out = Vec::new();
        t.write_into(&mut out, 0xabc);
        let mut hs = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut hs);
        let n = match req.parse(&out).unwrap() {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => panic!("partial"),
        };
        assert_eq!(req.method, Some("POST"));
        assert_eq!(req.path, Some("/v1/chat/completions"));
        let get = |name: &str| {
            req.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| std::str::from_utf8(h.value).unwrap().to_string())
        };
        assert_eq!(get("x-request-id").unwrap(), format_id(0xabc));
        assert_eq!(get("x-request-id").unwrap(), "0000000000000abc");
        assert_eq!(get("accept").unwrap(), "text/event-stream");
        assert_eq!(get("content-length").unwrap(), "7");
        assert_eq!(&out[n..], br#"{"a":1}"#);
        assert_eq!(t.body(), br#"{"a":1}"#);
        // Reusing the buffer with another id rewrites only the id.
        t.write_into(&mut out, u64::MAX);
        assert!(out.windows(16).any(|w| w == b"ffffffffffffffff"));
        assert_eq!(out.len(), t.len());
    }
}
