//! One client connection: plain TCP or TLS driven by hand over owned buffers.
//!
//! rustls never owns the socket: ciphertext is read into the connection's own buffer and fed
//! through `read_tls`/`process_new_packets`, and written from `write_tls` output, so TLS and
//! plain connections share the same owned-buffer I/O and the same shutdown path.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use rustls::pki_types::ServerName;

use crate::record::Outcome;

/// Ciphertext buffer size for TLS connections.
const TLS_READ: usize = 16 * 1024;

/// TLS state of a connection (client side for ringperf, server side for the simulator).
struct Tls {
    conn: rustls::Connection,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
}

/// An open connection.
pub struct Conn {
    tcp: TcpStream,
    tls: Option<Box<Tls>>,
    /// True once it has carried a request (a later failure before any byte may be a stale
    /// keep-alive connection and is retried once on a fresh one).
    pub used: bool,
    /// Kernel receive timestamps are on (see [`Conn::enable_rx_timestamps`]).
    stamped: bool,
}

/// Why a connection could not be opened.
#[derive(Debug)]
pub struct ConnectError {
    /// Outcome kind to count.
    pub outcome: Outcome,
    /// What happened.
    pub message: String,
}

impl Conn {
    /// Opens a connection to `addr`, with TLS when `tls` is given.
    pub async fn open(
        addr: std::net::SocketAddr,
        tls: Option<(&Arc<rustls::ClientConfig>, &ServerName<'static>)>,
    ) -> Result<Conn, ConnectError> {
        let tcp = TcpStream::connect_addr(addr)
            .await
            .map_err(|e| ConnectError {
                outcome: Outcome::ConnectFailed,
                message: format!("connect to {addr}: {e}"),
            })?;
        let mut conn = Conn::plain(tcp);
        if let Some((config, name)) = tls {
            let c = rustls::ClientConnection::new(config.clone(), name.clone()).map_err(|e| {
                ConnectError {
                    outcome: Outcome::TlsFailed,
                    message: format!("TLS setup: {e}"),
                }
            })?;
            conn.start_tls(c.into()).await.map_err(|e| ConnectError {
                outcome: Outcome::TlsFailed,
                message: format!("TLS handshake with {addr}: {e}"),
            })?;
        }
        Ok(conn)
    }

    /// A fresh plain connection over `tcp` (Nagle off: events must not wait for more bytes).
    fn plain(tcp: TcpStream) -> Conn {
        let _ = tcp.set_nodelay(true);
        Conn {
            tcp,
            tls: None,
            used: false,
            stamped: false,
        }
    }

    /// Wraps an accepted connection, completing the TLS handshake when `tls` is given.
    pub async fn accept(
        tcp: TcpStream,
        tls: Option<&Arc<rustls::ServerConfig>>,
    ) -> io::Result<Conn> {
        let mut conn = Conn::plain(tcp);
        if let Some(config) = tls {
            let c = rustls::ServerConnection::new(config.clone())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            conn.start_tls(c.into()).await?;
        }
        Ok(conn)
    }

    async fn start_tls(&mut self, c: rustls::Connection) -> io::Result<()> {
        self.tls = Some(Box::new(Tls {
            conn: c,
            inbuf: Vec::with_capacity(TLS_READ),
            outbuf: Vec::with_capacity(4096),
        }));
        self.handshake().await
    }

    /// The socket's descriptor (for `shutdown` on cancellation).
    pub fn fd(&self) -> RawFd {
        self.tcp.as_raw_fd()
    }

    async fn handshake(&mut self) -> io::Result<()> {
        loop {
            let tls = self.tls.as_mut().expect("tls");
            if !tls.conn.is_handshaking() {
                return self.flush_tls().await;
            }
            if tls.conn.wants_write() {
                self.flush_tls().await?;
                continue;
            }
            if self.read_tls().await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "closed during handshake",
                ));
            }
        }
    }

    async fn flush_tls(&mut self) -> io::Result<()> {
        loop {
            let tls = self.tls.as_mut().expect("tls");
            if !tls.conn.wants_write() {
                return Ok(());
            }
            let mut out = std::mem::take(&mut tls.outbuf);
            out.clear();
            tls.conn.write_tls(&mut out)?;
            let (res, out) = self.tcp.write_all(out).await;
            self.tls.as_mut().expect("tls").outbuf = out;
            res?;
        }
    }

    /// Reads ciphertext once and processes it; returns the bytes read (0 at EOF).
    async fn read_tls(&mut self) -> io::Result<usize> {
        let tls = self.tls.as_mut().expect("tls");
        let mut inbuf = std::mem::take(&mut tls.inbuf);
        inbuf.clear();
        let (res, inbuf) = self.tcp.read(inbuf).await;
        let tls = self.tls.as_mut().expect("tls");
        tls.inbuf = inbuf;
        let n = res?;
        let mut rd = &tls.inbuf[..n];
        while !rd.is_empty() {
            tls.conn.read_tls(&mut rd)?;
            tls.conn
                .process_new_packets()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        }
        if n == 0 {
            // Let rustls see the EOF too (it tells an orderly close from a truncation).
            let _ = tls.conn.read_tls(&mut rd);
        }
        Ok(n)
    }

    /// Writes all of `buf`.
    pub async fn send(&mut self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        match self.tls.as_mut() {
            None => {
                let (res, buf) = self.tcp.write_all(buf).await;
                (res.map(|_| ()), buf)
            }
            Some(tls) => {
                if let Err(e) = tls.conn.writer().write_all(&buf) {
                    return (Err(e), buf);
                }
                (self.flush_tls().await, buf)
            }
        }
    }

    /// Appends received bytes to `buf` (at least one, or none at end of file) and returns how
    /// many.
    pub async fn recv(&mut self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        let len = buf.len();
        if buf.capacity() - len < 1024 {
            buf.reserve(buf.capacity().max(4096));
        }
        if self.tls.is_none() {
            let cap = buf.capacity();
            let (res, slice) = self.tcp.read(buf.slice_mut(len..cap)).await;
            return (res, slice.into_inner());
        }
        loop {
            let tls = self.tls.as_mut().expect("tls");
            buf.resize(buf.capacity(), 0);
            let got = tls.conn.reader().read(&mut buf[len..]);
            match got {
                Ok(n) => {
                    buf.truncate(len + n);
                    return (Ok(n), buf);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => buf.truncate(len),
                Err(e) => {
                    buf.truncate(len);
                    return (Err(e), buf);
                }
            }
            match self.read_tls().await {
                Ok(0) => {
                    // EOF without close_notify: report what rustls says on the next loop, or
                    // plain EOF if it has nothing more.
                    let tls = self.tls.as_mut().expect("tls");
                    buf.resize(buf.capacity(), 0);
                    let r = tls.conn.reader().read(&mut buf[len..]);
                    buf.truncate(len + *r.as_ref().unwrap_or(&0));
                    return match r {
                        Ok(n) => (Ok(n), buf),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => (Ok(0), buf),
                        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => (Ok(0), buf),
                        Err(e) => (Err(e), buf),
                    };
                }
                Ok(_) => {
                    if let Err(e) = self.flush_tls().await {
                        return (Err(e), buf);
                    }
                }
                Err(e) => return (Err(e), buf),
            }
        }
    }
}

impl Conn {
    /// Asks the kernel to stamp received data (`SO_TIMESTAMPNS`), for [`Conn::recv_stamped`].
    /// Plain connections only: under TLS the stamps would not line up with decrypted bytes.
    pub fn enable_rx_timestamps(&mut self) {
        if self.tls.is_some() {
            return;
        }
        self.stamped = true;
        set_rx_timestamps(self.fd());
    }

    /// Like [`Conn::recv`], and also returns when the kernel received the newest of the bytes
    /// (`CLOCK_MONOTONIC` ns), on plain connections with [`Conn::enable_rx_timestamps`]. The
    /// simulator anchors its timings there, so a burst of requests it has not read yet does
    /// not shift them.
    pub async fn recv_stamped(
        &mut self,
        mut buf: Vec<u8>,
    ) -> (io::Result<(usize, Option<u64>)>, Vec<u8>) {
        if self.tls.is_some() {
            let (r, b) = self.recv(buf).await;
            return (r.map(|n| (n, None)), b);
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(buf.capacity().max(4096));
        }
        loop {
            if let Err(e) = self.tcp.readable(false).await {
                return (Err(e), buf);
            }
            match recvmsg_stamped(self.fd(), &mut buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return (r, buf),
            }
        }
    }
}

/// Turns `SO_TIMESTAMPNS` on for a socket.
fn set_rx_timestamps(fd: RawFd) {
    let one: libc::c_int = 1;
    // SAFETY: setsockopt on an open socket with a valid int option.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// One non-blocking `recvmsg` into `buf`'s spare capacity, with the `SCM_TIMESTAMPNS` stamp
/// converted to `CLOCK_MONOTONIC`.
fn recvmsg_stamped(fd: RawFd, buf: &mut Vec<u8>) -> io::Result<(usize, Option<u64>)> {
    let len = buf.len();
    let spare = buf.capacity() - len;
    let mut iov = libc::iovec {
        // SAFETY: pointer to the spare capacity; the kernel writes at most `spare` bytes.
        iov_base: unsafe { buf.as_mut_ptr().add(len) }.cast(),
        iov_len: spare,
    };
    let mut control = [0u64; 16];
    // SAFETY: a zeroed msghdr is valid; fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: msg points at live buffers for the duration of the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel initialised `n` bytes of the spare capacity.
    unsafe { buf.set_len(len + n as usize) };
    let mut stamp = None;
    // SAFETY: walking the control messages the kernel wrote, with libc's own macros.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                let real = ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128;
                stamp = realtime_to_monotonic(real);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

fn realtime_to_monotonic(real_ns: i128) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    let now_real = ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128;
    let now_mono = crate::clock::now_ns() as i128;
    let mono = now_mono - (now_real - real_ns);
    (real_ns > 0 && mono > 0 && mono <= now_mono).then_some(mono as u64)
}

/// Shuts a socket down in both directions so that any pending read on it completes. Safe to
/// call on a descriptor that is still owned (and later closed) by its connection.
pub fn shutdown(fd: RawFd) {
    // SAFETY: plain syscall on a descriptor the caller guarantees is open.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

/// Descriptors of connections in use, so that a stop can cut them all.
#[derive(Default)]
pub struct FdSet {
    fds: Vec<RawFd>,
    free: Vec<usize>,
}

impl FdSet {
    /// Reserves a place; fill it with [`FdSet::set`].
    pub fn insert(&mut self) -> usize {
        match self.free.pop() {
            Some(i) => i,
            None => {
                self.fds.push(-1);
                self.fds.len() - 1
            }
        }
    }
    /// Records the descriptor at place `i`.
    pub fn set(&mut self, i: usize, fd: RawFd) {
        self.fds[i] = fd;
    }
    /// Frees place `i`.
    pub fn remove(&mut self, i: usize) {
        self.fds[i] = -1;
        self.free.push(i);
    }
    /// Shuts every recorded socket down, so pending reads on them complete.
    pub fn shutdown_all(&self) {
        for &fd in self.fds.iter().filter(|&&fd| fd >= 0) {
            shutdown(fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_receive_stamps_predate_the_read() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        set_rx_timestamps(s.as_raw_fd());
        // The kernel turns packet stamping on a moment after the first socket asks for it.
        std::thread::sleep(std::time::Duration::from_millis(200));
        c.write_all(b"hello").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let mut buf = Vec::with_capacity(64);
        let (n, stamp) = recvmsg_stamped(s.as_raw_fd(), &mut buf).unwrap();
        let now = crate::clock::now_ns();
        assert_eq!((n, &buf[..]), (5, &b"hello"[..]));
        let stamp = stamp.expect("a receive stamp");
        let age = now - stamp;
        assert!(
            (25_000_000..1_000_000_000).contains(&age),
            "stamped {age} ns before the read"
        );
    }
}
