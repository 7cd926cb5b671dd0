//! Stamped receives on io_uring in one operation, without a task's readiness wait: a ring of
//! the shard's own beside monoio's, with one multishot `recvmsg` per connection into buffers
//! the kernel takes from a shared pool. (monoio has no receive that carries control messages,
//! so without this ring every stamped read is a readiness wait, then a `recvmsg` call.)
//!
//! The kernel receives into a pooled buffer as data arrives, puts the `SCM_TIMESTAMPNS` stamp
//! in the same buffer, and posts a completion; the ring's eventfd wakes a task on monoio's ring
//! ([`serve`]), which hands each completion to its connection and wakes the stream waiting
//! there, having first asked the CPU for that stream's memory, so that the misses of a batch
//! of wakes overlap. The stream's read copies the bytes out and gives the buffer back at once.
//! Bytes for a connection that nobody waits on are copied aside, so an idle connection never
//! holds a buffer.
//!
//! Needs Linux 6.0 (multishot `recvmsg`, provided-buffer rings); [`RecvRing::new`] checks it
//! works on a loopback connection and fails otherwise, and callers then read the old way.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::task::Waker;

use io_uring::{cqueue, opcode, types, IoUring};

/// Bytes of one pooled buffer: the kernel's header, the control message and the payload.
const BUF_LEN: usize = 1024;
/// Buffers in the pool (a power of two, as the kernel asks).
const BUFS: u16 = 1024;
/// Buffer group id of the pool.
const GROUP: u16 = 0;
/// Room for the control message: one `SCM_TIMESTAMPNS` (a header and a timespec).
const CONTROL_LEN: usize = 32;
/// `user_data` of cancellations, whose own completions carry nothing.
const CANCEL: u64 = u64::MAX;
/// Completion queue entries: a burst of arrivals between two reaps fits.
const CQ_ENTRIES: u32 = 32768;

/// What a connection received and nobody read yet.
enum Got {
    /// Pool buffer `bid` holds `len` payload bytes from `at`, received at `stamp`.
    Buf {
        bid: u16,
        at: usize,
        len: usize,
        stamp: Option<u64>,
    },
    /// Bytes copied out of the pool (nobody was waiting when they came).
    Aside { bytes: Vec<u8>, stamp: Option<u64> },
    /// End of file.
    Eof,
    /// An error (errno).
    Err(i32),
}

/// A connection's receives not yet read: the first inline (there is seldom more than one, and
/// a separate allocation would be one more cache miss per event), the rest behind it.
#[derive(Default)]
struct Queue {
    first: Option<Got>,
    rest: VecDeque<Got>,
}

impl Queue {
    fn push(&mut self, g: Got) {
        if self.first.is_none() {
            self.first = Some(g);
        } else {
            self.rest.push_back(g);
        }
    }

    fn pop(&mut self) -> Option<Got> {
        let g = self.first.take();
        self.first = self.rest.pop_front();
        g
    }
}

#[derive(Default)]
struct Link {
    fd: RawFd,
    /// A multishot receive is armed on the socket (until its final completion).
    armed: bool,
    /// The connection was closed: its slot is free once its receive has ended.
    closed: bool,
    ready: Queue,
    /// Bytes already taken from the first entry (a read with less room than it held).
    taken: usize,
    waker: Option<Waker>,
    /// The waiting task's memory (address, bytes), asked for before it is woken.
    task: (usize, usize),
}

/// One shard's receive ring: the ring, its buffer pool and its connections.
pub struct RecvRing {
    // Declared first so that it is dropped first: the kernel lets go of the pool before the
    // pool's memory is unmapped.
    ring: IoUring,
    pool: Pool,
    links: Vec<Link>,
    free: Vec<u32>,
    event: OwnedFd,
    msg: Box<libc::msghdr>,
    /// Submissions queued since the ring was last entered.
    queued: bool,
    /// Set by [`RecvRing::shutdown`]: the reaping task ends.
    shut: bool,
    /// The tasks a reap wakes, with their memory (kept to reuse its allocation).
    woken: Vec<(Waker, (usize, usize))>,
}

/// The provided-buffer ring: `BUFS` entries of 16 bytes, then the buffers, in one anonymous
/// mapping (page-aligned, as the kernel asks).
struct Pool {
    base: *mut u8,
    bytes: usize,
    /// Entries published to the kernel so far (the ring's tail).
    tail: u16,
}

impl Pool {
    fn new() -> io::Result<Pool> {
        let bytes = BUFS as usize * (16 + BUF_LEN);
        // SAFETY: a fresh private anonymous mapping; checked for failure below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut pool = Pool {
            base: base.cast(),
            bytes,
            tail: 0,
        };
        for bid in 0..BUFS {
            pool.give(bid);
        }
        Ok(pool)
    }

    fn buf_at(&self, bid: u16) -> *mut u8 {
        // SAFETY (of the arithmetic): `bid < BUFS`, so the buffer lies inside the mapping.
        unsafe {
            self.base
                .add(BUFS as usize * 16 + (bid % BUFS) as usize * BUF_LEN)
        }
    }

    /// Buffer `bid`'s first `len` bytes.
    fn buf(&self, bid: u16, len: usize) -> &[u8] {
        // SAFETY: inside the mapping; the kernel wrote them before it posted the completion
        // that named the buffer, and does not touch it again until it is given back.
        unsafe { std::slice::from_raw_parts(self.buf_at(bid), len.min(BUF_LEN)) }
    }

    /// Hands buffer `bid` (back) to the kernel.
    fn give(&mut self, bid: u16) {
        let entries = self.base.cast::<types::BufRingEntry>();
        // SAFETY: the entry lies inside the mapping, and the kernel reads only entries before
        // the tail; the tail (in entry 0) is published with release ordering, after the entry.
        unsafe {
            let e = &mut *entries.add((self.tail & (BUFS - 1)) as usize);
            e.set_addr(self.buf_at(bid) as u64);
            e.set_len(BUF_LEN as u32);
            e.set_bid(bid);
            self.tail = self.tail.wrapping_add(1);
            let tail = types::BufRingEntry::tail(entries).cast::<std::sync::atomic::AtomicU16>();
            (*tail).store(self.tail, std::sync::atomic::Ordering::Release);
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once, after the ring let go of it.
        unsafe { libc::munmap(self.base.cast(), self.bytes) };
    }
}

impl RecvRing {
    /// A ring whose receives were seen to work: on a loopback connection made here, a
    /// multishot receive must deliver a byte, and its cancellation must end it.
    pub fn new() -> io::Result<RecvRing> {
        let mut b = IoUring::builder();
        b.setup_cqsize(CQ_ENTRIES).setup_coop_taskrun();
        let ring = b.build(256)?;
        let pool = Pool::new()?;
        // SAFETY: the entries start the page-aligned mapping, which outlives the ring's use of
        // it (the ring is dropped first).
        unsafe {
            ring.submitter()
                .register_buf_ring(pool.base as u64, BUFS, GROUP)?
        };
        // SAFETY: eventfd returns a new descriptor or -1.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the descriptor just made, owned from here on.
        let event = unsafe { OwnedFd::from_raw_fd(efd) };
        ring.submitter().register_eventfd(event.as_raw_fd())?;
        // SAFETY: a zeroed msghdr is valid; a multishot receive reads only its lengths.
        let mut msg: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        msg.msg_controllen = CONTROL_LEN as _;
        let mut r = RecvRing {
            ring,
            pool,
            links: Vec::new(),
            free: Vec::new(),
            event,
            msg,
            queued: false,
            shut: false,
            woken: Vec::new(),
        };
        r.check()?;
        Ok(r)
    }

    /// Receives one byte on a loopback connection through the ring.
    fn check(&mut self) -> io::Result<()> {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let mut tx = std::net::TcpStream::connect(listener.local_addr()?)?;
        let (rx, _) = listener.accept()?;
        super::set_rx_timestamps(rx.as_raw_fd());
        tx.write_all(b"x")?;
        let token = self.open(rx.as_raw_fd());
        self.arm(token);
        self.queued = false;
        self.ring.submit_and_wait(1)?;
        self.reap();
        let got = self.links[token as usize].ready.pop();
        // (Not its stamp: the kernel turns stamping on a moment after the first socket asks.)
        let ok = matches!(&got, Some(Got::Aside { bytes, .. }) if bytes == b"x");
        if let Some(Got::Buf { bid, .. }) = got {
            self.pool.give(bid);
        }
        self.close(token);
        self.settle();
        if !ok || !self.free.contains(&token) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "multishot stamped receives do not work here",
            ));
        }
        Ok(())
    }

    /// Starts receiving on `fd`; the returned token names the connection from now on.
    pub fn open(&mut self, fd: RawFd) -> u32 {
        let token = self.free.pop().unwrap_or_else(|| {
            self.links.push(Link::default());
            self.links.len() as u32 - 1
        });
        self.links[token as usize] = Link {
            fd,
            ..Link::default()
        };
        token
    }

    fn push(&mut self, sqe: io_uring::squeue::Entry) {
        // SAFETY: the entries refer to the boxed msghdr (which lives as long as the ring) or
        // to no memory at all.
        while unsafe { self.ring.submission().push(&sqe) }.is_err() {
            let _ = self.ring.submit();
        }
        self.queued = true;
    }

    /// Arms the connection's multishot receive unless it is armed already.
    fn arm(&mut self, token: u32) {
        let l = &mut self.links[token as usize];
        if l.armed || l.closed || self.shut {
            return;
        }
        l.armed = true;
        let sqe = opcode::RecvMsgMulti::new(types::Fd(l.fd), &*self.msg, GROUP)
            .build()
            .user_data(token as u64);
        self.push(sqe);
    }

    /// Stops receiving on connection `token` (its socket is about to close); its slot is
    /// reused once the receive's last completion came.
    pub fn close(&mut self, token: u32) {
        let l = &mut self.links[token as usize];
        l.closed = true;
        l.waker = None;
        while let Some(g) = l.ready.pop() {
            if let Got::Buf { bid, .. } = g {
                self.pool.give(bid);
            }
        }
        if self.links[token as usize].armed {
            self.push(
                opcode::AsyncCancel::new(token as u64)
                    .build()
                    .user_data(CANCEL),
            );
            self.flush();
        } else {
            self.free.push(token);
        }
    }

    /// Enters the ring when submissions wait.
    fn flush(&mut self) {
        if self.queued {
            self.queued = false;
            let _ = self.ring.submit();
        }
    }

    /// Cancels every receive and waits (up to a second) for their last completions, so that
    /// the kernel writes no more into the pool; wakes the reaping task to end.
    pub fn shutdown(&mut self) {
        self.shut = true;
        for token in 0..self.links.len() as u32 {
            if self.links[token as usize].armed {
                self.push(
                    opcode::AsyncCancel::new(token as u64)
                        .build()
                        .user_data(CANCEL),
                );
            }
        }
        self.settle();
        // SAFETY: an 8-byte write from a local to the eventfd this ring owns.
        unsafe { libc::write(self.event.as_raw_fd(), (&1u64 as *const u64).cast(), 8) };
    }

    /// Submits what waits and reaps until no receive is armed (at most a second).
    fn settle(&mut self) {
        let until = super::monotonic_ns() + 1_000_000_000;
        self.queued = false;
        let _ = self.ring.submit();
        while self.links.iter().any(|l| l.armed) && super::monotonic_ns() < until {
            let ts = types::Timespec::new().nsec(10_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            let _ = self.ring.submitter().submit_with_args(1, &args);
            self.reap();
        }
    }

    /// Hands the completions to their connections and wakes the streams waiting on them;
    /// returns whether the reaping task should go on.
    fn reap(&mut self) -> bool {
        let mut wake = std::mem::take(&mut self.woken);
        for cqe in self.ring.completion() {
            let token = cqe.user_data();
            if token == CANCEL {
                continue;
            }
            let (res, flags) = (cqe.result(), cqe.flags());
            let l = &mut self.links[token as usize];
            if !cqueue::more(flags) {
                l.armed = false;
            }
            let got = match cqueue::buffer_select(flags) {
                Some(bid) => {
                    let b = self.pool.buf(bid, res.max(0) as usize);
                    let got = match types::RecvMsgOut::parse(b, &self.msg) {
                        _ if l.closed => None,
                        Ok(out) if out.payload_data().is_empty() => Some(Got::Eof),
                        Ok(out) if l.waker.is_none() => Some(Got::Aside {
                            bytes: out.payload_data().to_vec(),
                            stamp: stamp_of(out.control_data()),
                        }),
                        Ok(out) => Some(Got::Buf {
                            bid,
                            at: out.payload_data().as_ptr() as usize - b.as_ptr() as usize,
                            len: out.payload_data().len(),
                            stamp: stamp_of(out.control_data()),
                        }),
                        Err(()) => Some(Got::Err(libc::EIO)),
                    };
                    if !matches!(got, Some(Got::Buf { .. })) {
                        self.pool.give(bid);
                    }
                    got
                }
                // The receive ended without data: out of buffers or cancelled (armed again at
                // the next wait), or the socket's error, or its end.
                None if l.closed || res == -libc::ENOBUFS || res == -libc::ECANCELED => None,
                None if res < 0 => Some(Got::Err(-res)),
                None => Some(Got::Eof),
            };
            let l = &mut self.links[token as usize];
            let ended = !l.armed && !l.closed;
            if let Some(g) = got {
                l.ready.push(g);
            }
            if l.ready.first.is_some() || ended {
                if let Some(w) = l.waker.take() {
                    wake.push((w, l.task));
                }
            }
            if l.closed && !l.armed {
                self.free.push(token as u32);
            }
        }
        // Ask for every woken task's memory first (its header, which the wake writes, and
        // its state), so that their misses overlap; then wake them.
        for (w, (at, bytes)) in &wake {
            super::prefetch(w.data(), 64);
            super::prefetch(*at as *const u8, *bytes);
        }
        for (w, _) in wake.drain(..) {
            w.wake();
        }
        self.woken = wake;
        !self.shut
    }

    /// Whether connection `token` has something to read (bytes, its end or an error).
    pub fn has_input(&self, token: u32) -> bool {
        self.links[token as usize].ready.first.is_some()
    }

    /// Whether bytes or an end came on connection `token` that nobody read, completions not
    /// yet handed out included.
    pub fn holds_input(&mut self, token: u32) -> bool {
        self.reap();
        self.has_input(token)
    }

    /// Wakes the current task when connection `token` has something to read.
    pub fn wait(&mut self, token: u32, cx: &mut std::task::Context<'_>) {
        let l = &mut self.links[token as usize];
        match &l.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => l.waker = Some(cx.waker().clone()),
        }
        l.task = super::polling_task();
        self.arm(token);
        self.flush();
    }

    /// Appends what connection `token` received to `buf`, as much as its spare capacity
    /// takes (as one `recvmsg` would take all that is queued), and returns how many bytes,
    /// with the stamp of the newest; `Ok((0, None))` at end of file; `WouldBlock` when
    /// nothing came (see [`RecvRing::has_input`]).
    pub fn take(&mut self, token: u32, buf: &mut Vec<u8>) -> io::Result<(usize, Option<u64>)> {
        let l = &mut self.links[token as usize];
        let (mut n, mut newest) = (0, None);
        loop {
            let room = buf.capacity() - buf.len();
            let (k, stamp, whole) = match &l.ready.first {
                &Some(Got::Buf {
                    bid,
                    at,
                    len,
                    stamp,
                }) if room > 0 => {
                    let k = room.min(len - l.taken);
                    let from = at + l.taken;
                    buf.extend_from_slice(&self.pool.buf(bid, from + k)[from..]);
                    (k, stamp, l.taken + k == len)
                }
                Some(Got::Aside { bytes, stamp }) if room > 0 => {
                    let k = room.min(bytes.len() - l.taken);
                    buf.extend_from_slice(&bytes[l.taken..l.taken + k]);
                    (k, *stamp, l.taken + k == bytes.len())
                }
                None if n == 0 => return Err(io::ErrorKind::WouldBlock.into()),
                Some(Got::Eof) if n == 0 => {
                    l.ready.pop();
                    return Ok((0, None));
                }
                Some(Got::Err(e)) if n == 0 => {
                    let e = io::Error::from_raw_os_error(*e);
                    l.ready.pop();
                    return Err(e);
                }
                // Full, or an end or error after bytes: those first.
                _ => return Ok((n, newest)),
            };
            n += k;
            newest = stamp.or(newest);
            if whole {
                l.taken = 0;
                if let Some(Got::Buf { bid, .. }) = l.ready.pop() {
                    self.pool.give(bid);
                }
            } else {
                l.taken += k;
            }
        }
    }
}

/// The `SCM_TIMESTAMPNS` stamp among control messages, on the monotonic clock.
fn stamp_of(control: &[u8]) -> Option<u64> {
    let hdr = std::mem::size_of::<libc::cmsghdr>();
    let mut at = 0;
    while at + hdr <= control.len() {
        // SAFETY: `hdr` bytes lie inside the slice; read unaligned.
        let c = unsafe {
            control
                .as_ptr()
                .add(at)
                .cast::<libc::cmsghdr>()
                .read_unaligned()
        };
        // `cmsg_len` is a usize on glibc, a u32 on musl.
        #[allow(clippy::unnecessary_cast)]
        let len = c.cmsg_len as usize;
        if len < hdr || at + len > control.len() {
            return None;
        }
        if c.cmsg_level == libc::SOL_SOCKET
            && c.cmsg_type == libc::SCM_TIMESTAMPNS
            && len >= hdr + std::mem::size_of::<libc::timespec>()
        {
            // SAFETY: the timespec lies inside the message, checked just above.
            let ts = unsafe {
                control
                    .as_ptr()
                    .add(at + hdr)
                    .cast::<libc::timespec>()
                    .read_unaligned()
            };
            return super::realtime_to_monotonic(
                ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128,
            );
        }
        at += (len + 7) & !7;
    }
    None
}

/// The ring's task on monoio's ring: sleeps on the eventfd, then hands out the completions;
/// ends after [`RecvRing::shutdown`].
pub async fn serve(ring: Rc<RefCell<RecvRing>>) {
    let Ok(event) = ring.borrow().event.try_clone() else {
        return;
    };
    let Ok(file) = monoio::fs::File::from_std(std::fs::File::from(event)) else {
        return;
    };
    let mut count = vec![0u8; 8];
    loop {
        let (r, b) = file.read_at(count, 0).await;
        count = b;
        let mut ring = ring.borrow_mut();
        if r.is_err() || !ring.reap() {
            return;
        }
        ring.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::task::Poll;

    /// Runs `f` with a ring and its reaping task on an io_uring runtime, then shuts the ring
    /// down and checks that the task ends. The ring must work on any kernel from 6.0.
    fn with_ring<F: std::future::Future<Output = ()>>(f: impl FnOnce(Rc<RefCell<RecvRing>>) -> F) {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let major: u32 = release
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        let (mut rt, driver) =
            crate::runtime::build(crate::runtime::Driver::Uring, 256).expect("an io_uring runtime");
        assert_eq!(driver, "io_uring");
        rt.block_on(async move {
            let ring = match RecvRing::new() {
                Ok(r) => Rc::new(RefCell::new(r)),
                Err(e) => {
                    assert!(major < 6, "no receive ring on Linux {release}: {e}");
                    return;
                }
            };
            let reaper = monoio::spawn(serve(ring.clone()));
            f(ring.clone()).await;
            ring.borrow_mut().shutdown();
            reaper.await;
            assert!(ring.borrow().links.iter().all(|l| !l.armed));
        });
    }

    /// A connected pair on loopback: the peer's end, and ours with receive stamps on.
    fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (ours, _) = l.accept().unwrap();
        super::super::set_rx_timestamps(ours.as_raw_fd());
        (peer, ours)
    }

    /// One read of at most `room` bytes through the ring.
    async fn read(
        ring: &Rc<RefCell<RecvRing>>,
        token: u32,
        room: usize,
    ) -> io::Result<(Vec<u8>, Option<u64>)> {
        std::future::poll_fn(|cx| {
            let mut r = ring.borrow_mut();
            if !r.has_input(token) {
                r.wait(token, cx);
                return Poll::Pending;
            }
            let mut buf = Vec::with_capacity(room);
            Poll::Ready(r.take(token, &mut buf).map(|(n, stamp)| {
                assert_eq!(n, buf.len());
                (buf, stamp)
            }))
        })
        .await
    }

    #[test]
    fn bytes_come_in_order_with_the_kernel_stamp_and_then_the_end() {
        with_ring(|ring| async move {
            let (mut peer, ours) = pair();
            let token = ring.borrow_mut().open(ours.as_raw_fd());
            // The kernel turns stamping on a moment after the first socket asks: wait for it.
            let deadline = super::super::monotonic_ns() + 5_000_000_000;
            loop {
                peer.write_all(b".").unwrap();
                if read(&ring, token, 1).await.unwrap().1.is_some() {
                    break;
                }
                assert!(
                    super::super::monotonic_ns() < deadline,
                    "reads never got a stamp"
                );
            }
            let mut got = Vec::new();
            for i in 0..20u8 {
                let before = super::super::monotonic_ns();
                peer.write_all(&[i; 100]).unwrap();
                let (bytes, stamp) = read(&ring, token, 4096).await.unwrap();
                let stamp = stamp.expect("a receive stamp");
                assert!(
                    stamp >= before.saturating_sub(1_000_000),
                    "stamp before the send"
                );
                assert!(
                    stamp <= super::super::monotonic_ns(),
                    "stamp after the read"
                );
                got.extend(bytes);
                while got.len() < (i as usize + 1) * 100 {
                    got.extend(read(&ring, token, 4096).await.unwrap().0);
                }
            }
            let want: Vec<u8> = (0..20u8).flat_map(|i| [i; 100]).collect();
            assert_eq!(got, want);
            drop(peer);
            assert_eq!(read(&ring, token, 4096).await.unwrap(), (Vec::new(), None));
            ring.borrow_mut().close(token);
        });
    }

    #[test]
    fn a_read_with_little_room_leaves_the_rest_for_the_next() {
        with_ring(|ring| async move {
            let (mut peer, ours) = pair();
            let token = ring.borrow_mut().open(ours.as_raw_fd());
            // More than one pooled buffer holds.
            let sent: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
            peer.write_all(&sent).unwrap();
            let mut got = Vec::new();
            while got.len() < sent.len() {
                let (bytes, _) = read(&ring, token, 100).await.unwrap();
                assert!(!bytes.is_empty() && bytes.len() <= 100);
                got.extend(bytes);
            }
            assert_eq!(got, sent);
            ring.borrow_mut().close(token);
        });
    }

    #[test]
    fn bytes_nobody_waits_for_are_kept_and_seen_as_held() {
        with_ring(|ring| async move {
            let (mut peer, ours) = pair();
            let token = ring.borrow_mut().open(ours.as_raw_fd());
            // Arm the receive with a read, then send while nobody waits.
            peer.write_all(b"first").unwrap();
            assert_eq!(read(&ring, token, 64).await.unwrap().0, b"first");
            assert!(!ring.borrow_mut().holds_input(token));
            peer.write_all(b"stray").unwrap();
            let deadline = super::super::monotonic_ns() + 5_000_000_000;
            while !ring.borrow_mut().holds_input(token) {
                assert!(
                    super::super::monotonic_ns() < deadline,
                    "the stray bytes never came"
                );
                monoio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            assert_eq!(read(&ring, token, 64).await.unwrap().0, b"stray");
            ring.borrow_mut().close(token);
        });
    }

    #[test]
    fn a_reset_is_an_error_and_a_closed_slot_is_reused_once_its_receive_ended() {
        with_ring(|ring| async move {
            let (peer, ours) = pair();
            let token = ring.borrow_mut().open(ours.as_raw_fd());
            let linger = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            // SAFETY: setting a plain option from a local on a live socket.
            let r = unsafe {
                libc::setsockopt(
                    peer.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&linger as *const libc::linger).cast(),
                    std::mem::size_of::<libc::linger>() as u32,
                )
            };
            assert_eq!(r, 0);
            drop(peer);
            let e = read(&ring, token, 64).await.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ECONNRESET), "{e}");
            // A connection closed while its receive is armed keeps its slot until the
            // cancellation's completion.
            let (_peer2, ours2) = pair();
            let t2 = ring.borrow_mut().open(ours2.as_raw_fd());
            std::future::poll_fn(|cx| {
                ring.borrow_mut().wait(t2, cx);
                Poll::Ready(())
            })
            .await;
            assert!(ring.borrow().links[t2 as usize].armed);
            ring.borrow_mut().close(t2);
            assert!(!ring.borrow().free.contains(&t2));
            let deadline = super::super::monotonic_ns() + 5_000_000_000;
            while !ring.borrow().free.contains(&t2) {
                assert!(
                    super::super::monotonic_ns() < deadline,
                    "the slot was never freed"
                );
                monoio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            ring.borrow_mut().close(token);
        });
    }

    #[test]
    fn the_stamp_is_found_among_control_messages_and_bad_ones_are_refused() {
        let hdr = std::mem::size_of::<libc::cmsghdr>();
        let message = |level: i32, kind: i32, len: usize| {
            let mut b = vec![0u8; hdr + 16];
            // SAFETY: writing a cmsghdr into a buffer large enough for it, unaligned.
            unsafe {
                let mut c: libc::cmsghdr = std::mem::zeroed();
                c.cmsg_len = len as _;
                c.cmsg_level = level;
                c.cmsg_type = kind;
                b.as_mut_ptr().cast::<libc::cmsghdr>().write_unaligned(c);
            }
            let now = clock_realtime_ts();
            b[hdr..hdr + 8].copy_from_slice(&now.0.to_ne_bytes());
            b[hdr + 8..hdr + 16].copy_from_slice(&now.1.to_ne_bytes());
            b
        };
        let stamp = stamp_of(&message(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, hdr + 16))
            .expect("a stamp of now");
        let now = super::super::monotonic_ns();
        assert!(now.abs_diff(stamp) < 1_000_000_000, "{stamp} against {now}");
        assert_eq!(
            stamp_of(&message(libc::SOL_SOCKET, libc::SCM_TIMESTAMPING, hdr + 16)),
            None
        );
        assert_eq!(
            stamp_of(&message(libc::SOL_IP, libc::SCM_TIMESTAMPNS, hdr + 16)),
            None
        );
        // A length past the end, or too short for a timespec.
        assert_eq!(
            stamp_of(&message(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, hdr + 64)),
            None
        );
        assert_eq!(
            stamp_of(&message(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, hdr + 4)),
            None
        );
        assert_eq!(stamp_of(&[]), None);
    }

    /// The wall clock now, as a timespec's (seconds, nanoseconds).
    fn clock_realtime_ts() -> (i64, i64) {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        (d.as_secs() as i64, d.subsec_nanos() as i64)
    }
}
