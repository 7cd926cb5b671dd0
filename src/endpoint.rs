//! A server URL, parsed and resolved: `http(s)://host[:port][/prefix]`, the scheme optional.
//! The load's target, scraped pages and hub downloads all go through it.

use std::net::{SocketAddr, ToSocketAddrs};

use serde::Serialize;

/// A URL that cannot be used, and why.
#[derive(Debug, thiserror::Error)]
#[error("{url:?}: {why}")]
pub struct UrlError {
    /// As given.
    pub url: String,
    /// What is wrong with it.
    pub why: String,
}

/// A parsed and resolved target URL.
#[derive(Debug, Clone, Serialize)]
pub struct Endpoint {
    /// `https://`.
    pub tls: bool,
    /// Host as written (used for `Host`, SNI and certificate checks).
    pub host: String,
    /// Port.
    pub port: u16,
    /// Address connected to (resolved once, IPv4 preferred).
    pub addr: SocketAddr,
    /// Path prefix from the URL (without a trailing slash).
    pub prefix: String,
    /// `user:password` from the URL, percent-decoded: sent as HTTP Basic credentials, and a
    /// secret (never written or shown).
    #[serde(skip)]
    pub user_info: Option<String>,
}

/// Percent-decodes `s` (RFC 3986 section 2.1); `None` for a malformed escape.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The secrets in a URL's user information (`user:password@`), as written and decoded: the
/// password, and `user:password` with its Basic token. Empty without user information.
pub fn url_secrets(url: &str) -> Vec<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let Some((info, _)) = authority.rsplit_once('@') else {
        return Vec::new();
    };
    let mut out = vec![info.to_string()];
    if let Some((_, pass)) = info.split_once(':') {
        out.push(pass.to_string());
    }
    if let Some(decoded) = percent_decode(info) {
        if let Some((_, pass)) = decoded.split_once(':') {
            out.push(pass.to_string());
        }
        out.push(basic_token(&decoded));
        out.push(decoded);
    }
    out
}

/// The `Basic` credentials token of `user:password` (RFC 7617).
pub fn basic_token(user_info: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(user_info)
}

/// `url` with its user information replaced, to be shown.
pub fn shown(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (format!("{s}://"), r),
        None => (String::new(), url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rsplit_once('@') {
        Some((_, host)) => format!("{scheme}<redacted>@{host}{}", &rest[end..]),
        None => url.to_string(),
    }
}

impl Endpoint {
    /// Parses and resolves `http(s)://host[:port][/prefix]` (scheme optional: http).
    pub fn parse(url: &str) -> Result<Endpoint, UrlError> {
        let bad = |why: &str| UrlError {
            url: shown(url),
            why: why.to_string(),
        };
        let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else if url.contains("://") {
            return Err(bad("only http:// and https:// are supported"));
        } else {
            (false, url)
        };
        if rest.contains('#') {
            return Err(bad(
                "a fragment ('#…') is never sent to a server: leave it out",
            ));
        }
        if rest.contains('?') {
            return Err(bad(
                "a query ('?…') cannot go on the URL: the endpoint's path is added after the URL, \
                 so it would land before the path; put it on --endpoint (e.g. \
                 /v1/chat/completions?key=value)",
            ));
        }
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        let (user_info, authority) = match authority.rsplit_once('@') {
            Some((info, host)) => {
                let decoded = percent_decode(info)
                    .ok_or_else(|| bad("the user information holds a malformed %-escape"))?;
                (Some(decoded), host)
            }
            None => (None, authority),
        };
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        // What goes on the request line verbatim must not split it (request smuggling).
        if let Some(c) = prefix.chars().find(|c| !c.is_ascii_graphic()) {
            return Err(bad(&format!(
                "the path holds {c:?}: percent-encode it (spaces as %20)"
            )));
        }
        if authority.starts_with('[') && !authority.contains(']') {
            return Err(bad(
                "an IPv6 address opened with '[' is not closed with ']'",
            ));
        }
        let (host, port) = if let Some(end) = authority.strip_prefix('[').and_then(|a| a.find(']'))
        {
            let host = &authority[..end + 2];
            let port = authority[end + 2..].strip_prefix(':');
            (host, port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| bad("the port is not a number from 1 to 65535"))?,
            None if tls => 443,
            None => 80,
        };
        if port == 0 {
            return Err(bad("port 0"));
        }
        let lookup = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = (lookup, port)
            .to_socket_addrs()
            .map_err(|e| bad(&format!("cannot resolve {lookup:?}: {e}")))?
            .collect();
        let addr = addrs
            .iter()
            .find(|a| a.is_ipv4())
            .or(addrs.first())
            .copied()
            .ok_or_else(|| bad("the host resolves to no address"))?;
        Ok(Endpoint {
            tls,
            host: host.to_string(),
            port,
            addr,
            prefix: prefix.to_string(),
            user_info,
        })
    }

    /// `Host` header value.
    pub fn authority(&self) -> String {
        let default = if self.tls { 443 } else { 80 };
        if self.port == default {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// `scheme://authority`: where the URL's requests go.
    pub fn origin(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.authority())
    }

    /// The URL, normalised (scheme, authority, prefix).
    pub fn url(&self) -> String {
        format!("{}{}", self.origin(), self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_information_is_a_secret_sent_as_basic_credentials() {
        let url = "http://admin:p%40ss-word-1@127.0.0.1:9/prefix";
        let e = Endpoint::parse(url).unwrap();
        assert_eq!(e.user_info.as_deref(), Some("admin:p@ss-word-1"));
        assert_eq!((e.host.as_str(), e.port), ("127.0.0.1", 9));
        assert_eq!(e.url(), "http://127.0.0.1:9/prefix");
        let secrets = url_secrets(url);
        for s in ["p%40ss-word-1", "p@ss-word-1", "admin:p@ss-word-1"] {
            assert!(secrets.iter().any(|x| x == s), "{s}: {secrets:?}");
        }
        assert!(secrets.contains(&basic_token("admin:p@ss-word-1")));
        assert_eq!(
            basic_token("Aladdin:open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(shown(url), "http://<redacted>@127.0.0.1:9/prefix");
        let e = Endpoint::parse("http://u:pw%zz@127.0.0.1:9").unwrap_err();
        assert!(!e.to_string().contains("pw"), "{e}");
        assert!(url_secrets("http://127.0.0.1:9/a@b").is_empty());
    }

    #[test]
    fn a_query_or_a_fragment_is_refused_with_where_it_goes() {
        let e = Endpoint::parse("http://127.0.0.1:9/v1?key=1").unwrap_err();
        assert!(e.why.contains("--endpoint"), "{e}");
        let e = Endpoint::parse("127.0.0.1:9#top").unwrap_err();
        assert!(e.why.contains("fragment"), "{e}");
    }

    #[test]
    fn urls() {
        let e = Endpoint::parse("http://127.0.0.1:9000/prefix/").unwrap();
        assert!(!e.tls);
        assert_eq!(e.port, 9000);
        assert_eq!(e.prefix, "/prefix");
        assert_eq!(e.authority(), "127.0.0.1:9000");
        assert_eq!(e.url(), "http://127.0.0.1:9000/prefix");
        let e = Endpoint::parse("localhost:8000").unwrap();
        assert!(e.addr.ip().is_loopback());
        let e = Endpoint::parse("https://127.0.0.1").unwrap();
        assert_eq!(
            (e.tls, e.port, e.authority().as_str()),
            (true, 443, "127.0.0.1")
        );
        let e = Endpoint::parse("http://[::1]:8080").unwrap();
        assert_eq!(e.host, "[::1]");
        assert!(e.addr.is_ipv6());
        for bad in [
            "ftp://x",
            "http://",
            "http://h:notaport",
            "http://h:70000",
            "http://:80",
            "http://[::1",
            "http://127.0.0.1/a b",
            "http://127.0.0.1/v1\r\nX-Evil: 1",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad} accepted");
        }
    }
}
