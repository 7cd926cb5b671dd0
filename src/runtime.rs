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
        RuntimeBuilder::<IoUringDriver>::new()
            .with_entries(entries)
            .enable_timer()
            .build()
            .map(|rt| (FusionRuntime::Uring(rt), "io_uring"))
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
