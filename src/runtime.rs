//! Building one monoio runtime per shard, on the driver the user asked for.

use monoio::time::TimeDriver;
use monoio::{FusionRuntime, IoUringDriver, LegacyDriver, RuntimeBuilder};

/// A shard's runtime: io_uring or epoll, both with the (coarse) timer enabled.
pub type Runtime = FusionRuntime<TimeDriver<IoUringDriver>, TimeDriver<LegacyDriver>>;

/// Which I/O driver to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    /// io_uring where the kernel allows it, else epoll.
    Auto,
    /// io_uring only; an error where it is refused.
    Uring,
    /// epoll (monoio's legacy driver).
    Epoll,
}

/// Builds a runtime and says which driver it actually runs.
pub fn build(driver: Driver, entries: u32) -> std::io::Result<(Runtime, &'static str)> {
    let uring = || {
        let ring = |urb: io_uring::Builder| {
            RuntimeBuilder::<IoUringDriver>::new()
                .with_entries(entries)
                .uring_builder(urb)
                .enable_timer()
                .build()
                .map(|rt| (FusionRuntime::Uring(rt), "io_uring"))
        };
        // Completions of a ring's operations run as work queued on the shard's thread. By
        // default the kernel interrupts the thread (an inter-processor interrupt when the
        // sender runs on another CPU) to run it at once; cooperative running (Linux 5.19+)
        // leaves it for the shard's next system call, which a busy shard makes within
        // microseconds and an idle one makes when it waits for completions. At 10,000 streams,
        // where each event arrives alone, the interrupts were about 4% of the shard's time.
        // Older kernels refuse the flags: the plain ring then.
        let mut coop = io_uring::IoUring::builder();
        coop.setup_coop_taskrun().setup_taskrun_flag();
        ring(coop).or_else(|_| ring(io_uring::IoUring::builder()))
    };
    let epoll = || {
        RuntimeBuilder::<LegacyDriver>::new()
            .enable_timer()
            .build()
            .map(|rt| (FusionRuntime::Legacy(rt), "epoll"))
    };
    match driver {
        Driver::Uring => uring(),
        Driver::Epoll => epoll(),
        Driver::Auto => {
            if std::env::var_os("MONOIO_FORCE_LEGACY_DRIVER").is_some() {
                return epoll();
            }
            uring().or_else(|_| epoll())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoll_always_builds_and_auto_reports_its_driver() {
        let (mut rt, name) = build(Driver::Epoll, 256).unwrap();
        assert_eq!(name, "epoll");
        assert_eq!(rt.block_on(async { 7 }), 7);
        let (_, name) = build(Driver::Auto, 256).unwrap();
        assert!(name == "io_uring" || name == "epoll");
    }
}
