//! The thin layer of system calls that safe Rust does not offer: thread ids and CPU affinity,
//! socket timestamps (receive and transmit), non-blocking sends, descriptor limits, and a CPU
//! cache hint.
//!
//! Every `unsafe` block of the crate lives here, each with the reason it is sound; the rest of
//! the crate calls these safe wrappers.

use std::io;
use std::os::fd::RawFd;

/// Nanoseconds on `CLOCK_MONOTONIC` (the vDSO makes this a few tens of nanoseconds).
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds of CPU time the calling thread has used (user + system).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Nanoseconds of CPU time the whole process has used.
pub fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

#[inline]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clocks used here always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Conversions that reuse a measured `CLOCK_REALTIME` − `CLOCK_MONOTONIC` offset before it is
/// measured again. The offset moves only when the wall clock is stepped (frequency slewing
/// moves both clocks alike), and a step backwards is caught at once (a stamp lands after now);
/// a step forwards shifts at most this many stamps.
const OFFSET_REUSE: u32 = 64;

thread_local! {
    /// The offset (ns) and how many more conversions may use it.
    static REAL_OFFSET: std::cell::Cell<(i128, u32)> = const { std::cell::Cell::new((0, 0)) };
}

/// Converts a `CLOCK_REALTIME` stamp (as the kernel puts on packets) to `CLOCK_MONOTONIC`.
/// `None` for a stamp that is missing (0) or lies in the future. One clock read per stamp;
/// the clocks' offset is read again every [`OFFSET_REUSE`] stamps, and at once when a stamp
/// would land after now.
fn realtime_to_monotonic(real_ns: i128) -> Option<u64> {
    let valid = |mono: i128, now: i128| real_ns > 0 && mono > 0 && mono <= now;
    let (cached, left) = REAL_OFFSET.with(|c| c.get());
    if left > 0 {
        REAL_OFFSET.with(|c| c.set((cached, left - 1)));
        let mono = real_ns - cached;
        if valid(mono, monotonic_ns() as i128) {
            return Some(mono as u64);
        }
    }
    // The wall clock read first: the offset comes out a little small, so a stamp of now
    // never maps after the monotonic reading that follows.
    let off = clock_ns(libc::CLOCK_REALTIME) as i128 - monotonic_ns() as i128;
    REAL_OFFSET.with(|c| c.set((off, OFFSET_REUSE)));
    let mono = real_ns - off;
    valid(mono, monotonic_ns() as i128).then_some(mono as u64)
}

/// The calling thread's kernel id (what `/proc/self/task/<tid>` and affinity calls take).
pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// Restricts thread `tid` (0: the calling thread) to `cpus`.
pub fn set_affinity(tid: i32, cpus: &[usize]) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET only writes inside it and ignores
    // (by the bound check below) ids past its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    for &c in cpus.iter().filter(|&&c| c < max) {
        // SAFETY: `c` is below the set's capacity.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The CPUs thread `tid` (0: the calling thread) may run on.
pub fn affinity(tid: i32) -> io::Result<Vec<usize>> {
    // SAFETY: as above; the kernel fills the set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    let r = unsafe { libc::sched_getaffinity(tid, std::mem::size_of_val(&set), &mut set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: CPU_ISSET reads inside the set for ids below its capacity.
    Ok((0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// A `CLOCK_MONOTONIC` timer descriptor (non-blocking), wrapped in a `UdpSocket` so that an
/// async runtime, which waits for readiness of sockets only, can wait for it to fire (a
/// timerfd polls like any descriptor). The wrapper owns and closes it.
pub fn timerfd() -> io::Result<std::net::UdpSocket> {
    // SAFETY: plain syscall; the result is checked.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor, handed to the wrapper that now owns it.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

/// Arms timer `fd` to fire once at `deadline_ns` (`CLOCK_MONOTONIC`, absolute).
pub fn timerfd_arm(fd: RawFd, deadline_ns: u64) {
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
        },
    };
    // SAFETY: `spec` is a valid itimerspec; a bad descriptor only makes the call fail.
    unsafe { libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
}

/// Clears a fired timer `fd` (reads its expiration count; nothing to read is harmless).
pub fn timerfd_clear(fd: RawFd) {
    let mut expirations = [0u8; 8];
    // SAFETY: reading at most 8 bytes into a local buffer of 8.
    unsafe { libc::read(fd, expirations.as_mut_ptr().cast(), 8) };
}

static INTERRUPT: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
    std::sync::OnceLock::new();

/// Until the run begins to measure, a signal ends the process at once: nothing is lost, and
/// preparing a run (tokenizing, reading a dataset) can take minutes that no one should have to
/// wait out.
static GRACEFUL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The signal that stopped the run (0: none yet).
static SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The signals that stop a run: Ctrl-C, `kill`, and a closed terminal (SIGHUP would otherwise
/// end the process with nothing written).
const STOPPING: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn on_interrupt(signal: libc::c_int) {
    let first = stop_for(
        signal,
        b"\nringperf: interrupted before anything was measured\n",
    );
    if !first {
        end_now(
            signal,
            b"\nringperf: a second signal: stopped at once; the file being written is removed\n",
        );
    }
}

/// Records `signal` as what stopped the run (unless one already did: returns whether this was
/// the first) and raises the [`interrupt_flag`]; before the run measures, ends the process at
/// once, saying `before`. Async-signal-safe.
fn stop_for(signal: libc::c_int, before: &[u8]) -> bool {
    let first = SIGNAL
        .compare_exchange(
            0,
            signal,
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
        )
        .is_ok();
    if !GRACEFUL.load(std::sync::atomic::Ordering::Relaxed) {
        end_now(signal, before);
    }
    if let Some(s) = INTERRUPT.get() {
        s.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    first
}

/// Ends the process now with `128 + signal`, leaving no [`Doomed`] path behind.
/// Async-signal-safe: write(), unlink(), rmdir() and _exit() only.
fn end_now(signal: libc::c_int, msg: &[u8]) -> ! {
    type PathCall = unsafe extern "C" fn(*const libc::c_char) -> libc::c_int;
    for pass in [libc::unlink as PathCall, libc::rmdir] {
        for slot in &DOOMED {
            let p = slot.load(std::sync::atomic::Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: a non-null slot holds a NUL-terminated path that is never freed.
                unsafe { pass(p) };
            }
        }
    }
    // SAFETY: write() and _exit() are async-signal-safe; `msg` is a valid buffer.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::_exit(128 + signal)
    }
}

/// A console write failed. When its reader went away (a closed terminal: EIO; a closed pipe,
/// `| head`: EPIPE), that is a hang-up: the run stops as on SIGHUP, writes what it measured,
/// and exits 129; before the run measures, the process ends at once, as SIGHUP ends it. Any
/// other failure only loses what could not be written.
pub fn write_failed(e: &io::Error) {
    if e.kind() == io::ErrorKind::BrokenPipe || e.raw_os_error() == Some(libc::EIO) {
        stop_for(libc::SIGHUP, b"");
    }
}

/// This process's peak resident memory (`VmHWM`), in bytes. Unlike `getrusage`'s
/// `ru_maxrss`, it is this program's alone: not the memory of the process it was forked from.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Paths that a process ended at once (a second signal, a signal before the run) removes:
/// a file written under its hidden name, a folder made for the run (only if still empty).
const DOOMED_SLOTS: usize = 32;
static DOOMED: [std::sync::atomic::AtomicPtr<libc::c_char>; DOOMED_SLOTS] =
    [const { std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()) }; DOOMED_SLOTS];

/// A path that [`end_now`] removes while this lives.
#[derive(Debug)]
pub struct Doomed(Option<usize>);

/// Marks `path` for removal should the process be ended at once while the mark lives (with
/// every slot taken, the path is not marked).
pub fn doomed(path: &std::path::Path) -> Doomed {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return Doomed(None);
    };
    let p = c.into_raw();
    for (i, slot) in DOOMED.iter().enumerate() {
        if slot
            .compare_exchange(
                std::ptr::null_mut(),
                p,
                std::sync::atomic::Ordering::AcqRel,
                std::sync::atomic::Ordering::Relaxed,
            )
            .is_ok()
        {
            return Doomed(Some(i));
        }
    }
    // SAFETY: `p` came from `into_raw` above and was never shared.
    drop(unsafe { std::ffi::CString::from_raw(p) });
    Doomed(None)
}

impl Drop for Doomed {
    fn drop(&mut self) {
        // The path is left allocated: a signal handler may be reading it on another thread.
        // A few bytes per file written is what that costs.
        if let Some(i) = self.0 {
            DOOMED[i].store(std::ptr::null_mut(), std::sync::atomic::Ordering::Release);
        }
    }
}

/// The signal that stopped this process's run, if one did (SIGINT, SIGTERM or SIGHUP).
pub fn interrupted_by() -> Option<i32> {
    match SIGNAL.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// A stopping signal's name.
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// A flag that Ctrl-C (SIGINT), SIGTERM and SIGHUP set once [`interrupt_gracefully`] was called;
/// before that, either signal ends the process at once, and after the first, a second does
/// (leaving no [`Doomed`] path).
/// The handlers are installed on the first call.
pub fn interrupt_flag() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let mut fresh = false;
    let flag = INTERRUPT
        .get_or_init(|| {
            fresh = true;
            std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false))
        })
        .clone();
    if fresh {
        let handler = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
        for s in STOPPING {
            // SAFETY: the handler only uses atomics, write(), unlink(), rmdir() and _exit(),
            // all async-signal-safe.
            unsafe {
                libc::signal(s, handler);
            }
        }
        // A write past a file-size limit then fails with EFBIG, and the error names the file,
        // instead of the process dying without a word.
        // SAFETY: ignoring a signal is always sound.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        }
    }
    flag
}

/// From now on the first Ctrl-C, SIGTERM or SIGHUP sets the [`interrupt_flag`] instead of ending the
/// process, so that what was measured can be written.
pub fn interrupt_gracefully() {
    GRACEFUL.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Sets thread `tid`'s nice value (0: the calling thread). Raising it needs no privilege;
/// lowering it below the current value does.
pub fn set_nice(tid: i32, nice: i32) -> io::Result<()> {
    // SAFETY: plain syscall; on Linux PRIO_PROCESS with a thread id applies to that thread.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Raises the open-files soft limit to the hard limit; returns the new soft limit.
pub fn raise_nofile_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                return lim.rlim_max;
            }
        }
    }
    lim.rlim_cur
}

/// True when `fd` is a terminal.
pub fn is_tty(fd: RawFd) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(fd) == 1 }
}

/// The width of the terminal on `fd` in columns, when it is one.
pub fn terminal_columns(fd: RawFd) -> Option<usize> {
    terminal_size(fd).map(|(cols, _)| cols as usize)
}

/// The size of the terminal on `fd` (columns, rows), when it is one.
pub fn terminal_size(fd: RawFd) -> Option<(u16, u16)> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ fills a winsize we own.
    let r = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_col > 0 && ws.ws_row > 0).then_some((ws.ws_col, ws.ws_row))
}

/// A terminal on standard input that hands over each key as it is typed, without echo, and
/// without waiting for one. The terminal keeps its signals: Ctrl-C is still SIGINT. Dropping it
/// restores the terminal as it was.
pub struct Keys {
    saved: libc::termios,
}

impl Keys {
    /// Takes standard input's keys; `None` when it is not a terminal.
    pub fn take() -> Option<Keys> {
        if !is_tty(libc::STDIN_FILENO) {
            return None;
        }
        // SAFETY: tcgetattr fills a termios we own (zeroed is a valid bit pattern for it).
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: as above, on a descriptor that is a terminal.
        if unsafe { libc::tcgetattr(libc::STDIN_FILENO, &mut t) } != 0 {
            return None;
        }
        let saved = t;
        t.c_lflag &= !(libc::ICANON | libc::ECHO);
        t.c_cc[libc::VMIN] = 0;
        t.c_cc[libc::VTIME] = 0;
        // SAFETY: sets the attributes from a termios we own.
        if unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &t) } != 0 {
            return None;
        }
        Some(Keys { saved })
    }

    /// The keys typed since the last call (none waits), at most 64.
    pub fn read(&self) -> Vec<u8> {
        let mut buf = [0u8; 64];
        // SAFETY: reads into a local buffer of its length; VMIN = VTIME = 0 returns at once.
        let n = unsafe { libc::read(libc::STDIN_FILENO, buf.as_mut_ptr().cast(), buf.len()) };
        buf[..n.max(0) as usize].to_vec()
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        // SAFETY: restores the attributes saved from this descriptor.
        unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &self.saved) };
    }
}

/// A new pseudo-terminal of `cols` × `rows`: (the side that reads what is drawn and types,
/// the side a program gets as its terminal). For the dashboard's test and bench.
pub fn open_pty(cols: u16, rows: u16) -> io::Result<(std::fs::File, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (0, 0);
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty fills two descriptors we then own; the name buffer is not asked for.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // Neither is inherited by a program started later (a child that kept the master open
    // would keep the terminal alive after its owner closed it).
    for fd in [master, slave] {
        // SAFETY: sets a flag on a descriptor just opened here.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // SAFETY: both descriptors were just opened and are owned by nobody else.
    Ok(unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::os::fd::OwnedFd::from_raw_fd(slave),
        )
    })
}

/// Sets `IP_BIND_ADDRESS_NO_PORT` on socket `fd` (Linux 4.2+; ignored where refused): a
/// bind to a source address leaves the port to connect.
pub fn bind_address_no_port(fd: RawFd) {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt on a descriptor the caller owns, with a c_int option value.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Has the process `cmd` starts receive SIGTERM when the thread that starts it ends (its
/// parent died), so that no child outlives its parent.
pub fn die_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl() is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
}

/// Sends SIGINT to process `pid` (a child not yet waited for, so the pid is still its).
pub fn interrupt_process(pid: u32) {
    // SAFETY: kill() has no memory effects.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
}

/// Stops the run as Ctrl-C does: raises SIGINT in this process.
pub fn interrupt() {
    // SAFETY: raise() sends a signal to this thread; its handler is async-signal-safe.
    unsafe { libc::raise(libc::SIGINT) };
}

/// True when a socket has bytes to read or its peer has closed it, without waiting or
/// consuming anything (`MSG_PEEK | MSG_DONTWAIT`).
pub fn input_pending(fd: RawFd) -> bool {
    let mut byte = 0u8;
    // SAFETY: a one-byte peek into a valid local buffer; nothing is consumed.
    let n = unsafe {
        libc::recv(
            fd,
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n >= 0
}

/// Shuts a socket down in both directions so that any pending read on it completes. Safe to
/// call on a descriptor that is still owned (and later closed) by its connection.
pub fn shutdown(fd: RawFd) {
    // SAFETY: plain syscall on a descriptor the caller guarantees is open.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

fn set_int_opt(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> bool {
    // SAFETY: setsockopt on an open socket with a valid int option.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Asks the kernel to stamp received data (`SO_TIMESTAMPNS`), read by [`recvmsg_stamped`].
pub fn set_rx_timestamps(fd: RawFd) {
    set_int_opt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
}

/// Turns the kernel's receive stamping on for the rest of the process's life, so that the
/// first packets of the first connections are stamped too: the kernel enables stamping a few
/// milliseconds after the first socket asks (it defers the switch to a worker), and until then
/// reads come back without a stamp. One idle UDP socket that asks keeps it on.
pub fn keep_rx_timestamping_on() {
    static KEEPER: std::sync::OnceLock<Option<std::net::UdpSocket>> = std::sync::OnceLock::new();
    KEEPER.get_or_init(|| {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
        set_rx_timestamps(std::os::fd::AsRawFd::as_raw_fd(&s));
        Some(s)
    });
}

/// Asks the kernel to report, on the socket's error queue, when each send's last byte left
/// for the device (`SO_TIMESTAMPING` with `TX_SOFTWARE`, stamps only, keyed by byte offset).
/// Read them with [`drain_tx_stamps`]. Returns false where the kernel refuses.
pub fn set_tx_timestamps(fd: RawFd) -> bool {
    let flags = libc::SOF_TIMESTAMPING_TX_SOFTWARE
        | libc::SOF_TIMESTAMPING_SOFTWARE
        | libc::SOF_TIMESTAMPING_OPT_ID
        | libc::SOF_TIMESTAMPING_OPT_TSONLY;
    set_int_opt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_TIMESTAMPING,
        flags as libc::c_int,
    )
}

/// Sends as much of `buf` as the socket takes now, without waiting (`MSG_DONTWAIT`), so the
/// bytes reach the kernel at this instant whatever the runtime's driver would batch.
pub fn send_now(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for `buf.len()` bytes for the duration of the call.
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One non-blocking `recvmsg` into `buf`'s spare capacity, with the `SCM_TIMESTAMPNS` stamp
/// converted to `CLOCK_MONOTONIC`.
pub fn recvmsg_stamped(fd: RawFd, buf: &mut Vec<u8>) -> io::Result<(usize, Option<u64>)> {
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
    // The system call itself: libc's wrapper is a thread-cancellation point, which costs two
    // calls around every receive on this, the hottest path (no thread here is ever cancelled).
    // SAFETY: msg points at live buffers for the duration of the call.
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvmsg,
            fd,
            &mut msg as *mut libc::msghdr,
            libc::MSG_DONTWAIT,
        )
    };
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
                stamp =
                    realtime_to_monotonic(ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

/// `ee_info` of a stamp taken when the packet went to the device.
const SCM_TSTAMP_SND: u32 = 0;

/// A transmit stamp from the error queue: the byte offset it is keyed by, and the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxStamp {
    /// Offset of the stamped send's last byte since stamping was turned on (wraps at 2^32).
    pub key: u32,
    /// `CLOCK_MONOTONIC` ns.
    pub at_ns: u64,
}

/// Reads the transmit stamps waiting on the socket's error queue (non-blocking) and hands
/// each to `on`, for as long as `on` returns true. Draining also clears the error readiness
/// that a waiting stamp signals, so a poll for input does not wake again for it.
pub fn drain_tx_stamps(fd: RawFd, on: &mut impl FnMut(TxStamp) -> bool) {
    loop {
        let mut control = [0u64; 16];
        // SAFETY: a zeroed msghdr is valid; no data buffer (the stamps come without payload).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: msg points at live buffers for the duration of the call.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if n < 0 {
            return;
        }
        let (mut at, mut key) = (None, None);
        // SAFETY: walking the control messages the kernel wrote, with libc's own macros.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
                if level == libc::SOL_SOCKET && kind == libc::SO_TIMESTAMPING {
                    // struct scm_timestamping: [software, deprecated, hardware].
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    at = realtime_to_monotonic(
                        ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128,
                    );
                } else if (level == libc::SOL_IP && kind == libc::IP_RECVERR)
                    || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR)
                {
                    let e: libc::sock_extended_err =
                        std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    if e.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING && e.ee_info == SCM_TSTAMP_SND
                    {
                        key = Some(e.ee_data);
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        if let (Some(at_ns), Some(key)) = (at, key) {
            if !on(TxStamp { key, at_ns }) {
                return;
            }
        }
    }
}

/// Asks the CPU to bring the `bytes` bytes from `p` into its caches, without waiting for
/// them: a hint, never a read (an address that is not mapped is ignored). At thousands of
/// streams each wake finds its stream's memory out of cache; asking for all of it at once
/// lets the misses overlap instead of stalling one after another.
#[inline]
pub fn prefetch<T: ?Sized>(p: *const T, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        for line in cache_lines(p as *const u8 as usize, bytes) {
            // SAFETY: PREFETCHT0 is a hint: it never faults and changes no architectural
            // state, whatever the address.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    line as *const i8,
                )
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, bytes);
}

/// The start of each 64-byte cache line that holds a byte of `start..start + bytes` (at least
/// one line; the range ends at the top of the address space).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn cache_lines(start: usize, bytes: usize) -> impl Iterator<Item = usize> {
    let end = start.saturating_add(bytes.max(1));
    std::iter::successors(Some(start & !63), move |line| {
        line.checked_add(64).filter(|next| *next < end)
    })
}

/// A future that asks for all of its own memory (see [`prefetch`]) each time it is polled,
/// before it runs: a request's task is woken by one event at a time, its state long out of
/// cache.
pub struct Prefetched<F>(pub F);

impl<F: std::future::Future> std::future::Future for Prefetched<F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        prefetch(&*self as *const Self, std::mem::size_of::<Self>());
        // SAFETY: structural pinning of the only field: `Prefetched` never moves it, has no
        // `Drop`, and is `Unpin` only when `F` is.
        unsafe { self.map_unchecked_mut(|p| &mut p.0) }.poll(cx)
    }
}

/// The pending error of socket `fd` (`SO_ERROR`): why a non-blocking connect failed, once
/// the socket is writable.
pub fn socket_error(fd: RawFd) -> Option<io::Error> {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `err` and `len` are valid for writes and sized for SO_ERROR's int; an invalid
    // `fd` makes the call fail, which is reported.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    match (rc, err) {
        (0, 0) => None,
        (0, e) => Some(io::Error::from_raw_os_error(e)),
        _ => Some(io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn a_range_covers_exactly_the_cache_lines_that_hold_its_bytes() {
        let lines = |start, bytes| cache_lines(start, bytes).collect::<Vec<_>>();
        assert_eq!(lines(0x1000, 64), [0x1000]);
        assert_eq!(lines(0x1000, 65), [0x1000, 0x1040]);
        assert_eq!(lines(0x1001, 64), [0x1000, 0x1040]);
        assert_eq!(lines(0x103f, 1), [0x1000]);
        assert_eq!(lines(0x1040, 0), [0x1040]);
        assert_eq!(lines(0x1000, 384).len(), 6);
        assert_eq!(lines(usize::MAX - 10, 64), [usize::MAX & !63]);
    }

    #[test]
    fn a_prefetch_of_any_address_is_a_hint_that_never_faults() {
        // Null, unmapped and kernel addresses: a read of any of them would kill the test.
        prefetch(std::ptr::null::<u8>(), 256);
        prefetch(0x7ead_beef_0000usize as *const u8, 4096);
        prefetch(usize::MAX as *const u8, 64);
        let v = vec![1u64; 100];
        prefetch(v.as_ptr().wrapping_add(v.len()), 8);
        assert_eq!(v.iter().sum::<u64>(), 100);
    }

    #[test]
    fn a_prefetched_future_runs_its_future_through_every_poll() {
        use std::future::Future;
        use std::task::{Context, Poll, Waker};
        // Pending twice, asking to be polled again each time, then its value.
        let mut left = 2;
        let inner = std::future::poll_fn(move |cx: &mut Context<'_>| {
            if left == 0 {
                return Poll::Ready(42);
            }
            left -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        });
        let mut f = std::pin::pin!(Prefetched(inner));
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(f.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(f.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(f.as_mut().poll(&mut cx), Poll::Ready(42));
    }

    #[test]
    fn monotonic_and_nanosecond_grained() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(
            b - a >= 2_000_000,
            "slept 2 ms but clock moved {} ns",
            b - a
        );
        assert!(b - a < 1_000_000_000);
    }

    #[test]
    fn wall_clock_stamps_map_to_the_monotonic_clock_with_the_offset_reused_and_renewed() {
        let real_now = || clock_ns(libc::CLOCK_REALTIME) as i128;
        // More conversions than one offset serves, so it is renewed on the way.
        for _ in 0..3 * OFFSET_REUSE {
            let before = monotonic_ns();
            let m = realtime_to_monotonic(real_now()).expect("a stamp of now converts");
            let after = monotonic_ns();
            // A stamp of now maps between the reads around it (within the reads' own cost).
            assert!(
                m + 1_000_000 >= before && m <= after,
                "{before} ≤ {m} ≤ {after}"
            );
            let past = realtime_to_monotonic(real_now() - 5_000_000).unwrap();
            assert!(past + 4_000_000 <= monotonic_ns() && past + 6_000_000 >= before);
        }
        assert_eq!(realtime_to_monotonic(real_now() + 1_000_000_000), None);
        assert_eq!(realtime_to_monotonic(0), None);
        // A wrong offset (as after a step of the wall clock backwards) that puts a stamp after
        // now is measured again at once instead of refusing the stamp.
        REAL_OFFSET.with(|c| c.set((c.get().0 - 10_000_000_000, OFFSET_REUSE)));
        let m = realtime_to_monotonic(real_now()).expect("renewed offset converts");
        assert!(m <= monotonic_ns() && m + 1_000_000 >= monotonic_ns());
        // One that puts stamps early (a step forwards) serves out its count, then is renewed.
        REAL_OFFSET.with(|c| c.set((c.get().0 + 1_000_000_000, 3)));
        let early = |m: u64| m + 900_000_000 < monotonic_ns();
        for _ in 0..3 {
            assert!(early(realtime_to_monotonic(real_now()).unwrap()));
        }
        assert!(!early(realtime_to_monotonic(real_now()).unwrap()));
    }

    #[test]
    fn thread_cpu_time_grows_with_work() {
        let a = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_ns() > a);
    }

    /// A loopback pair whose receiving end gets kernel receive stamps. The kernel turns
    /// packet stamping on a moment after the first socket asks for it: probe bytes go across
    /// until one comes back stamped.
    fn stamped_pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        c.set_nodelay(true).unwrap();
        let (s, _) = l.accept().unwrap();
        set_rx_timestamps(s.as_raw_fd());
        let deadline = monotonic_ns() + 10_000_000_000;
        let mut buf = Vec::with_capacity(64);
        loop {
            (&c).write_all(b".").unwrap();
            wait_queued(&s, 1);
            buf.clear();
            if let (_, Some(_)) = recvmsg_stamped(s.as_raw_fd(), &mut buf).unwrap() {
                return (c, s);
            }
            assert!(monotonic_ns() < deadline, "the kernel never stamped a read");
        }
    }

    /// Waits until at least `n` bytes are queued on `s` (bounded: 10 s).
    fn wait_queued(s: &std::net::TcpStream, n: libc::c_int) {
        let deadline = monotonic_ns() + 10_000_000_000;
        loop {
            let mut queued: libc::c_int = 0;
            // SAFETY: FIONREAD writes one int.
            assert_eq!(
                unsafe { libc::ioctl(s.as_raw_fd(), libc::FIONREAD, &mut queued) },
                0
            );
            if queued >= n {
                return;
            }
            assert!(monotonic_ns() < deadline, "{queued} of {n} bytes came");
            std::thread::yield_now();
        }
    }

    #[test]
    fn bytes_read_together_carry_the_newest_stamp() {
        let (mut c, s) = stamped_pair();
        c.write_all(b"older").unwrap();
        // Two segments 20 ms apart (the gap is the point of the test), both queued before the
        // socket is read.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = monotonic_ns();
        c.write_all(b"newer").unwrap();
        wait_queued(&s, 10);
        let mut buf = Vec::with_capacity(64);
        let (n, stamp) = recvmsg_stamped(s.as_raw_fd(), &mut buf).unwrap();
        assert_eq!((n, &buf[..]), (10, &b"oldernewer"[..]));
        // One stamp for both, the newer segment's: the older one's arrival is gone.
        assert!(stamp.expect("a receive stamp") >= second);
    }

    #[test]
    fn kernel_receive_stamps_predate_the_read() {
        let (mut c, s) = stamped_pair();
        c.write_all(b"hello").unwrap();
        // The bytes age 30 ms in the socket before the read (the point of the test).
        std::thread::sleep(std::time::Duration::from_millis(30));
        let mut buf = Vec::with_capacity(64);
        let (n, stamp) = recvmsg_stamped(s.as_raw_fd(), &mut buf).unwrap();
        let now = monotonic_ns();
        assert_eq!((n, &buf[..]), (5, &b"hello"[..]));
        let age = now - stamp.expect("a receive stamp");
        assert!(
            (25_000_000..1_000_000_000).contains(&age),
            "stamped {age} ns before the read"
        );
    }

    #[test]
    fn transmit_stamps_come_back_keyed_by_the_last_byte_of_each_send() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        assert!(set_tx_timestamps(c.as_raw_fd()));
        let before = monotonic_ns();
        assert_eq!(send_now(c.as_raw_fd(), b"hello").unwrap(), 5);
        assert_eq!(send_now(c.as_raw_fd(), b", world").unwrap(), 7);
        let after = monotonic_ns();
        let mut got = [0u8; 12];
        s.read_exact(&mut got).unwrap();
        let mut stamps = Vec::new();
        drain_tx_stamps(c.as_raw_fd(), &mut |t| {
            stamps.push(t);
            true
        });
        assert_eq!(
            stamps.iter().map(|t| t.key).collect::<Vec<_>>(),
            vec![4, 11],
            "{stamps:?}"
        );
        for t in &stamps {
            // The conversion from the kernel's realtime stamps costs a few µs of precision.
            assert!(
                t.at_ns + 50_000 >= before && t.at_ns <= after + 50_000,
                "{t:?}"
            );
        }
        // Drained: nothing more, and no error readiness left behind.
        drain_tx_stamps(c.as_raw_fd(), &mut |t| panic!("stale stamp {t:?}"));
        // Stopping early leaves the rest for later.
        send_now(c.as_raw_fd(), b"a").unwrap();
        send_now(c.as_raw_fd(), b"b").unwrap();
        let mut first = Vec::new();
        drain_tx_stamps(c.as_raw_fd(), &mut |t| {
            first.push(t.key);
            false
        });
        let mut rest = Vec::new();
        drain_tx_stamps(c.as_raw_fd(), &mut |t| {
            rest.push(t.key);
            true
        });
        assert_eq!((first, rest), (vec![12], vec![13]));
    }

    #[test]
    fn affinity_round_trips_for_this_thread() {
        std::thread::spawn(|| {
            let all = affinity(0).unwrap();
            assert!(!all.is_empty());
            set_affinity(0, &all[..1]).unwrap();
            assert_eq!(affinity(gettid()).unwrap(), vec![all[0]]);
            set_affinity(0, &all).unwrap();
            assert_eq!(affinity(0).unwrap(), all);
        })
        .join()
        .unwrap();
    }
}
