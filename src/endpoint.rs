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
}

impl Endpoint {
    /// Parses and resolves `http(s)://host[:port][/prefix]` (scheme optional: http).
    pub fn parse(url: &str) -> Result<Endpoint, UrlError> {
        let bad = |why: &str| UrlError {
            url: url.to_string(),
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
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
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
