//! One client connection: plain TCP or TLS driven by hand over owned buffers.
//!
//! rustls never owns the socket: ciphertext is read into the connection's own buffer and fed
//! through `read_tls`/`process_new_packets`, and written from `write_tls` output, so TLS and
//! plain connections share the same owned-buffer I/O and the same shutdown path.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use monoio::buf::{IoBuf, IoBufMut};
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use rustls::pki_types::ServerName;

use crate::record::Outcome;
use crate::sys;

/// Ciphertext buffer size for TLS connections.
const TLS_READ: usize = 16 * 1024;

/// TLS state of a connection (client side for ringperf, server side for the simulator).
struct Tls {
    conn: rustls::Connection,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
}

/// An open connection.
pub(crate) struct Conn {
    tcp: TcpStream,
    tls: Option<Box<Tls>>,
    /// True once it has carried a request (a later failure before any byte may be a stale
    /// keep-alive connection and is retried once on a fresh one).
    pub used: bool,
    /// Kernel receive timestamps are on (see [`Conn::enable_rx_timestamps`]).
    stamped: bool,
    /// Kernel transmit stamps, when on (see [`Conn::enable_tx_timestamps`]).
    tx: Option<TxTrack>,
    /// How long opening it took: the TCP connect and the TLS handshake (µs; 0 for none).
    pub opening_us: (u32, u32),
}

/// Which transmit stamp belongs to the latest send.
#[derive(Debug, Default)]
struct TxTrack {
    /// Bytes sent since stamping was turned on (the kernel's key counts the same, mod 2^32).
    sent: u32,
    /// Key of the latest send's last byte.
    want: Option<u32>,
    /// Its stamp, once read (the earliest, should a retransmission stamp it again).
    got: Option<u64>,
}

/// Why a connection could not be opened.
#[derive(Debug)]
pub(crate) struct ConnectError {
    /// Outcome kind to count.
    pub outcome: Outcome,
    /// What happened.
    pub message: String,
}

/// Connects to `to` from source address `from` (`--local-address`: each source address has
/// its own ephemeral ports): a socket bound first, its connect completed by the runtime.
async fn connect_from(
    from: std::net::IpAddr,
    to: std::net::SocketAddr,
) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(to), Type::STREAM.nonblocking(), None)?;
    // The port is chosen at connect, per server address, not reserved at bind: a source
    // address then holds the whole ephemeral range for each server.
    crate::sys::bind_address_no_port(std::os::fd::AsRawFd::as_raw_fd(&socket));
    socket.bind(&std::net::SocketAddr::new(from, 0).into())?;
    match socket.connect(&to.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    let std: std::net::TcpStream = socket.into();
    let tcp = TcpStream::from_std(std)?;
    tcp.writable(false).await?;
    match crate::sys::socket_error(std::os::fd::AsRawFd::as_raw_fd(&tcp)) {
        Some(e) => Err(e),
        None => Ok(tcp),
    }
}

impl Conn {
    /// Opens a connection to `addr`, with TLS when `tls` is given.
    pub(crate) async fn open(
        addr: std::net::SocketAddr,
        from: Option<std::net::IpAddr>,
        tls: Option<(&Arc<rustls::ClientConfig>, &ServerName<'static>)>,
    ) -> Result<Conn, ConnectError> {
        let t0 = crate::clock::now_ns();
        let connected = match from {
            None => TcpStream::connect_addr(addr).await,
            Some(ip) => connect_from(ip, addr).await,
        };
        let tcp = connected.map_err(|e| ConnectError {
            outcome: Outcome::ConnectFailed,
            message: match from {
                None => format!("connect to {addr}: {e}"),
                Some(ip) => format!("connect to {addr} from {ip}: {e}"),
            },
        })?;
        let t1 = crate::clock::now_ns();
        let us = |a: u64, b: u64| ((b.saturating_sub(a)) / 1000).min(u64::from(u32::MAX)) as u32;
        let mut conn = Conn::plain(tcp);
        conn.opening_us.0 = us(t0, t1);
        if let Some((config, name)) = tls {
            let c = rustls::ClientConnection::new(config.clone(), name.clone()).map_err(|e| {
                ConnectError {
                    outcome: Outcome::TlsFailed,
                    message: format!("TLS setup: {e}"),
                }
            })?;
            conn.start_tls(c.into()).await.map_err(|e| {
                let e = e.to_string();
                let hint = crate::tls::handshake_hint(&e);
                ConnectError {
                    outcome: Outcome::TlsFailed,
                    message: format!("TLS handshake with {addr}: {e}{hint}"),
                }
            })?;
            conn.opening_us.1 = us(t1, crate::clock::now_ns());
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
            tx: None,
            opening_us: (0, 0),
        }
    }

    /// Wraps an accepted connection, completing the TLS handshake when `tls` is given.
    pub(crate) async fn accept(
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
    pub(crate) fn fd(&self) -> RawFd {
        self.tcp.as_raw_fd()
    }

    /// A kept-alive plain connection with bytes waiting before any request was sent on it (or
    /// closed by the server) is spoiled: those bytes answer nothing. TLS connections may
    /// legitimately hold post-handshake records, so they are not asked.
    pub(crate) fn spoiled(&self) -> bool {
        self.tls.is_none() && sys::input_pending(self.fd())
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
            let (res, out) = self.write_now(out).await;
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

    /// Writes all of `buf` to the socket: as much as it takes at once with a direct
    /// non-blocking send, so the bytes reach the kernel now whatever the driver would batch
    /// (io_uring holds a submission until the thread next waits), the rest asynchronously.
    async fn write_now(&mut self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        let n = match sys::send_now(self.fd(), &buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return (Err(e), buf),
        };
        if let Some(tx) = &mut self.tx {
            tx.sent = tx.sent.wrapping_add(n as u32);
        }
        if n == buf.len() {
            return (Ok(()), buf);
        }
        // The rest when the socket's buffer was full (a long prompt): boxed, being rare, so
        // that its state does not widen every request's task.
        let (res, rest) = Box::pin(self.tcp.write_all(buf.slice(n..))).await;
        if let (Some(tx), Ok(m)) = (&mut self.tx, &res) {
            tx.sent = tx.sent.wrapping_add(*m as u32);
        }
        (res.map(|_| ()), rest.into_inner())
    }

    /// Writes all of `buf` and returns when its first byte was handed to the kernel
    /// (`CLOCK_MONOTONIC` ns, read just before the send).
    pub(crate) async fn send(&mut self, buf: Vec<u8>) -> (io::Result<u64>, Vec<u8>) {
        if let Some(tls) = self.tls.as_mut() {
            if let Err(e) = tls.conn.writer().write_all(&buf) {
                return (Err(e), buf);
            }
            let t = crate::clock::now_ns();
            // Boxed, as in `recv`.
            return (Box::pin(self.flush_tls()).await.map(|_| t), buf);
        }
        let t = crate::clock::now_ns();
        let (res, buf) = self.write_now(buf).await;
        if let Some(tx) = &mut self.tx {
            tx.want = Some(tx.sent.wrapping_sub(1));
            tx.got = None;
            // Most devices (loopback among them) stamp the packet inside the send itself:
            // read it now, one call, before a waiting stamp can wake a read.
            self.drain_tx();
        }
        (res.map(|_| t), buf)
    }

    /// Turns on kernel transmit stamps (plain connections; see [`sys::set_tx_timestamps`]),
    /// read back with [`Conn::tx_stamp`].
    pub(crate) fn enable_tx_timestamps(&mut self) {
        if self.tls.is_none() && sys::set_tx_timestamps(self.fd()) {
            self.tx = Some(TxTrack::default());
        }
    }

    /// When the kernel sent the last byte of the latest [`Conn::send`] (`CLOCK_MONOTONIC`
    /// ns), once its stamp is on the error queue; it is there before any reply can arrive.
    pub(crate) fn tx_stamp(&mut self) -> Option<u64> {
        if self.tx.as_ref()?.got.is_none() {
            self.drain_tx();
        }
        self.tx.as_ref()?.got
    }

    /// Reads the transmit stamps waiting on the error queue, keeping the latest send's; stops
    /// once it has that one (stamps come in order, so the queue is then empty).
    fn drain_tx(&mut self) {
        let fd = self.fd();
        if let Some(tx) = &mut self.tx {
            sys::drain_tx_stamps(fd, &mut |s| {
                if Some(s.key) == tx.want {
                    tx.got = Some(tx.got.map_or(s.at_ns, |g| g.min(s.at_ns)));
                }
                tx.got.is_none()
            });
        }
    }

    /// Appends received bytes to `buf` (at least one, or none at end of file) and returns how
    /// many.
    pub(crate) async fn recv(&mut self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        make_room(&mut buf);
        let len = buf.len();
        if self.tls.is_none() {
            let cap = buf.capacity();
            let (res, slice) = self.tcp.read(buf.slice_mut(len..cap)).await;
            return (res, slice.into_inner());
        }
        // Boxed: a plain connection's every read would otherwise carry the TLS path's state
        // (its reads and writes of ciphertext) in its task. That costs a TLS read an
        // allocation; inline instead, every plain request's task grew by 160 bytes and the
        // CPU per event at 10,000 plain streams by 2–4%.
        Box::pin(self.recv_tls(buf, len)).await
    }

    /// [`Conn::recv`] under TLS: decrypted bytes after `len`, reading ciphertext as needed.
    async fn recv_tls(&mut self, mut buf: Vec<u8>, len: usize) -> (io::Result<usize>, Vec<u8>) {
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
    pub(crate) fn enable_rx_timestamps(&mut self) {
        if self.tls.is_some() {
            return;
        }
        self.stamped = true;
        sys::set_rx_timestamps(self.fd());
    }

    /// Like [`Conn::recv`], and also returns when the kernel received the newest of the bytes
    /// (`CLOCK_MONOTONIC` ns), on plain connections with [`Conn::enable_rx_timestamps`]. The
    /// simulator anchors its timings there, so a burst of requests it has not read yet does
    /// not shift them. Without stamps it is [`Conn::recv`]: one receive operation, no
    /// readiness wait.
    ///
    /// A `buf` without capacity is replaced by `fresh()` just before the read; with stamps,
    /// that is after the wait for data, so a connection that waits holds no buffer. `warm()`
    /// runs between the wait and the read (stamps only): the caller's moment to ask for the
    /// memory the read's processing will touch, while the kernel copies the bytes in.
    pub(crate) async fn recv_stamped(
        &mut self,
        mut buf: Vec<u8>,
        fresh: impl Fn() -> Vec<u8>,
        warm: impl Fn(),
    ) -> (io::Result<(usize, Option<u64>)>, Vec<u8>) {
        if !self.stamped {
            if buf.capacity() == 0 {
                buf = fresh();
            }
            let (r, b) = self.recv(buf).await;
            return (r.map(|n| (n, None)), b);
        }
        loop {
            if let Err(e) = self.wait_readable().await {
                return (Err(e), buf);
            }
            warm();
            if buf.capacity() == 0 {
                buf = fresh();
            }
            make_room(&mut buf);
            match sys::recvmsg_stamped(self.fd(), &mut buf) {
                // A transmit stamp on the error queue also wakes a wait for input: read it, so
                // the next wait sleeps until data comes.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.drain_tx(),
                r => return (r, buf),
            }
        }
    }

    /// Waits until data may have come, for a `recvmsg` to take it. On epoll, monoio's wait
    /// checks the socket with a `poll` call before it sleeps (needed: that is how it learns
    /// that the socket has run dry) and again after it wakes; the second is skipped here, as
    /// the `recvmsg` right after is the same check: a wake of this task counts as readiness,
    /// and a spurious one costs a receive that finds nothing, then another wait. On io_uring
    /// the wait is one poll request whose completion is the wake.
    async fn wait_readable(&self) -> io::Result<()> {
        if !monoio::utils::is_legacy() {
            return self.tcp.readable(false).await;
        }
        let mut wait = std::pin::pin!(self.tcp.readable(false));
        let mut slept = false;
        std::future::poll_fn(|cx| {
            if slept {
                return std::task::Poll::Ready(Ok(()));
            }
            let r = std::future::Future::poll(wait.as_mut(), cx);
            slept = r.is_pending();
            r
        })
        .await
    }
}

/// Grows `buf` when less than 1 KiB of it is free, so that a read can take a useful amount.
fn make_room(buf: &mut Vec<u8>) {
    if buf.capacity() - buf.len() < 1024 {
        buf.reserve(buf.capacity().max(4096));
    }
}

/// Shuts a socket down so that any pending read on it completes.
pub(crate) use sys::shutdown;

/// Descriptors of connections in use, so that a stop can cut them all, and the deadline of
/// the request each one carries.
///
/// A request past its deadline is cut the same way as by a stop: its socket is shut down, so
/// whatever it waits on (connect aside, which has its own limit) ends at once. One table
/// checked by the shard's watcher replaces a timer per request, which would be polled again
/// on every event and would widen every request's task by a timer entry.
#[derive(Default)]
pub(crate) struct FdSet {
    entries: Vec<Entry>,
    free: Vec<usize>,
    /// No deadline of a request in the table is earlier than this (it may be later than the
    /// earliest: a request that left does not raise it).
    next_deadline: u64,
}

#[derive(Clone, Copy)]
struct Entry {
    /// The request's socket, once it has one.
    fd: Option<RawFd>,
    deadline: u64,
    expired: bool,
}

/// A free place.
const FREE: Entry = Entry {
    fd: None,
    deadline: u64::MAX,
    expired: false,
};

impl FdSet {
    /// Reserves a place for a request that must end by `deadline` (`u64::MAX`: never); fill
    /// it with [`FdSet::set`].
    pub(crate) fn insert(&mut self, deadline: u64) -> usize {
        let e = Entry { deadline, ..FREE };
        self.next_deadline = self.next_deadline.min(deadline);
        match self.free.pop() {
            Some(i) => {
                self.entries[i] = e;
                i
            }
            None => {
                self.entries.push(e);
                self.entries.len() - 1
            }
        }
    }
    /// Records the descriptor at place `i`; shuts it down at once if the request there is
    /// already past its deadline.
    pub(crate) fn set(&mut self, i: usize, fd: RawFd) {
        let e = &mut self.entries[i];
        e.fd = Some(fd);
        if e.expired {
            shutdown(fd);
        }
    }
    /// Frees place `i`; true if its request went past its deadline.
    pub(crate) fn remove(&mut self, i: usize) -> bool {
        self.free.push(i);
        std::mem::replace(&mut self.entries[i], FREE).expired
    }
    /// True if the request at place `i` went past its deadline.
    pub(crate) fn expired(&self, i: usize) -> bool {
        self.entries[i].expired
    }
    /// Marks the requests whose deadline is at or before `now` as expired and shuts their
    /// sockets down. Looks at the table only when the earliest deadline may have passed.
    pub(crate) fn expire(&mut self, now: u64) {
        if now < self.next_deadline {
            return;
        }
        let mut next = u64::MAX;
        for e in self.entries.iter_mut().filter(|e| !e.expired) {
            if e.deadline <= now {
                e.expired = true;
                if let Some(fd) = e.fd {
                    shutdown(fd);
                }
            } else {
                next = next.min(e.deadline);
            }
        }
        self.next_deadline = next;
    }
    /// Shuts every recorded socket down, so pending reads on them complete.
    pub(crate) fn shutdown_all(&self) {
        for fd in self.entries.iter().filter_map(|e| e.fd) {
            shutdown(fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    /// A connected loopback pair: (client, server's end).
    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (c, l.accept().unwrap().0)
    }

    /// True once a read on `s` sees end of file (its socket was shut down), false if it would
    /// block instead.
    fn at_eof(s: &mut TcpStream) -> bool {
        s.set_nonblocking(true).unwrap();
        matches!(s.read(&mut [0; 8]), Ok(0))
    }

    #[test]
    fn requests_past_their_deadline_are_cut_and_the_others_are_left_alone() {
        let (mut a, _a) = pair();
        let (mut b, _b) = pair();
        let mut set = FdSet::default();
        let ia = set.insert(100);
        let ib = set.insert(200);
        let ic = set.insert(u64::MAX);
        set.set(ia, a.as_raw_fd());
        set.set(ib, b.as_raw_fd());
        set.expire(99);
        assert!(!set.expired(ia) && !set.expired(ib));
        assert!(!at_eof(&mut a));
        set.expire(100);
        assert!(set.expired(ia) && !set.expired(ib) && !set.expired(ic));
        assert!(at_eof(&mut a));
        assert!(!at_eof(&mut b));
        // The earliest deadline left is 200: nothing changes before it.
        assert_eq!(set.next_deadline, 200);
        assert!(set.remove(ia));
        assert!(!set.remove(ib));
        // A place freed and taken again starts afresh.
        let id = set.insert(300);
        assert_eq!(id, ib);
        assert!(!set.expired(id));
        set.expire(250);
        assert!(!set.expired(id) && !set.expired(ic));
        assert!(!at_eof(&mut b));
    }

    #[test]
    fn a_socket_recorded_after_its_deadline_is_cut_at_once() {
        let (mut a, _a) = pair();
        let mut set = FdSet::default();
        let i = set.insert(10);
        set.expire(10);
        assert!(set.expired(i));
        set.set(i, a.as_raw_fd());
        assert!(at_eof(&mut a));
    }
}
