//! GPU telemetry read locally through NVML, on a thread of its own.
//!
//! GenAI-Perf and AIPerf scrape a DCGM exporter that must be installed and running; ringperf
//! loads the NVIDIA driver's own library at run time (nothing to install, and a machine without
//! it simply reports `GPU telemetry unavailable: …`). The sampler thread stays off the shards'
//! cores and stamps samples with the same monotonic clock as the requests, so GPU figures cover
//! exactly the measured window ([`window`]).
//!
//! Everything that reads a GPU goes through the small [`Source`] trait, so the window and
//! energy maths are tested with a fake source on machines without a GPU.

pub mod window;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::clock::now_ns;

/// One reading of one GPU. Fields a GPU does not support are `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Sample {
    /// `CLOCK_MONOTONIC` ns when it was read.
    pub t_ns: u64,
    /// Power draw (mW), averaged by the driver over about a second on recent GPUs.
    pub power_mw: Option<u32>,
    /// Total energy since the driver loaded (mJ).
    pub energy_mj: Option<u64>,
    /// GPU utilisation (%).
    pub gpu_util: Option<u32>,
    /// Memory-bandwidth utilisation (%).
    pub mem_util: Option<u32>,
    /// Memory used (bytes).
    pub mem_used: Option<u64>,
    /// SM clock (MHz).
    pub sm_clock_mhz: Option<u32>,
    /// Temperature (°C).
    pub temp_c: Option<u32>,
    /// Throttle-reason bit mask (NVML's `nvmlClocksThrottleReasons`).
    pub throttle: Option<u64>,
}

/// A GPU as the source names it.
#[derive(Debug, Clone, Serialize)]
pub struct GpuInfo {
    /// Index in the source's numbering.
    pub index: u32,
    /// Product name.
    pub name: String,
}

/// Why GPU telemetry is unavailable, or why a GPU stopped answering.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No NVML library to load: no NVIDIA driver on this host (the loader's error kept).
    #[error("no NVIDIA driver on this host (libnvidia-ml.so.1 not found)")]
    NoDriver(#[source] nvml_wrapper::error::NvmlError),
    /// NVML refused a call (its own message).
    #[error(transparent)]
    Nvml(#[from] nvml_wrapper::error::NvmlError),
    /// The driver lists no GPU.
    #[error("no GPU found")]
    NoGpu,
    /// `--gpus` names a GPU that is not there.
    #[error("--gpus names GPU {index}, but there are {count} GPU(s)")]
    NoSuchGpu {
        /// The index asked for.
        index: u32,
        /// How many GPUs there are.
        count: usize,
    },
    /// A GPU answered none of the readings.
    #[error("no reading answered")]
    NoReading,
    /// The sampler thread could not be started.
    #[error("the GPU sampler thread did not start: {0}")]
    Thread(#[source] std::io::Error),
}

/// Where samples come from: NVML, or a fake in tests.
pub trait Source: Send {
    /// The GPUs available.
    fn gpus(&mut self) -> Result<Vec<GpuInfo>, Error>;
    /// Reads GPU `index` now; an error means the GPU did not answer (it may have dropped out).
    fn read(&mut self, index: u32) -> Result<Sample, Error>;
}

/// The environment variable that names the NVML library to load instead of the driver's.
pub const LIBRARY_ENV: &str = "RINGPERF_NVML_LIBRARY";

/// NVML through nvml-wrapper (the library is loaded at run time).
pub struct Nvml {
    nvml: nvml_wrapper::Nvml,
}

impl Nvml {
    /// Loads NVML: the driver's `libnvidia-ml.so.1`, or the library `$RINGPERF_NVML_LIBRARY`
    /// names (a driver installed elsewhere, or a stand-in); the error says why it is
    /// unavailable.
    pub fn open() -> Result<Nvml, Error> {
        let init = match std::env::var_os(LIBRARY_ENV) {
            Some(path) => nvml_wrapper::Nvml::builder().lib_path(&path).init(),
            None => nvml_wrapper::Nvml::init(),
        };
        match init {
            Ok(nvml) => Ok(Nvml { nvml }),
            Err(e @ nvml_wrapper::error::NvmlError::LibloadingError(_)) => Err(Error::NoDriver(e)),
            Err(e) => Err(e.into()),
        }
    }
}

impl Source for Nvml {
    fn gpus(&mut self) -> Result<Vec<GpuInfo>, Error> {
        let n = self.nvml.device_count()?;
        Ok((0..n)
            .map(|index| GpuInfo {
                index,
                name: self
                    .nvml
                    .device_by_index(index)
                    .and_then(|d| d.name())
                    .unwrap_or_else(|_| "unknown".into()),
            })
            .collect())
    }

    fn read(&mut self, index: u32) -> Result<Sample, Error> {
        use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
        use nvml_wrapper::error::NvmlError;
        let d = self.nvml.device_by_index(index)?;
        let t_ns = now_ns();
        // A GPU that fell off the bus still has a handle, and every reading fails: that is a
        // drop-out, not a sample of nothing (whose missing values would shrink the energy
        // of a window the samples still seem to cover).
        let power = d.power_usage();
        if let Err(NvmlError::GpuLost) = &power {
            return Err(NvmlError::GpuLost.into());
        }
        let util = d.utilization_rates().ok();
        let sample = Sample {
            t_ns,
            power_mw: power.as_ref().ok().copied(),
            energy_mj: d.total_energy_consumption().ok(),
            gpu_util: util.as_ref().map(|u| u.gpu),
            mem_util: util.as_ref().map(|u| u.memory),
            mem_used: d.memory_info().ok().map(|m| m.used),
            sm_clock_mhz: d.clock_info(Clock::SM).ok(),
            temp_c: d.temperature(TemperatureSensor::Gpu).ok(),
            throttle: d.current_throttle_reasons().ok().map(|r| r.bits()),
        };
        if sample
            == (Sample {
                t_ns,
                ..Sample::default()
            })
        {
            return Err(power.err().map_or(Error::NoReading, Error::Nvml));
        }
        Ok(sample)
    }
}

/// Samples of one GPU, in time order, and the time it stopped answering, if it did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Series {
    /// The GPU.
    pub index: u32,
    /// Its name.
    pub name: String,
    /// Readings in time order.
    pub samples: Vec<Sample>,
    /// When reads started failing (and the error), if they did.
    pub dropped_out: Option<(u64, String)>,
}

/// A running sampler thread.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<(Vec<Series>, u64)>>,
}

impl Sampler {
    /// Starts sampling `gpus` (None: all) every `interval_ns` on a new thread, pinned to
    /// `cpu` when given (a core no shard uses).
    pub fn start(
        mut source: Box<dyn Source>,
        gpus: Option<&[u32]>,
        interval_ns: u64,
        cpu: Option<usize>,
    ) -> Result<Sampler, Error> {
        let all = source.gpus()?;
        if all.is_empty() {
            return Err(Error::NoGpu);
        }
        let chosen: Vec<GpuInfo> = match gpus {
            None => all,
            Some(want) => {
                let mut v = Vec::new();
                for &i in want {
                    match all.iter().find(|g| g.index == i) {
                        Some(g) => v.push(g.clone()),
                        None => {
                            return Err(Error::NoSuchGpu {
                                index: i,
                                count: all.len(),
                            })
                        }
                    }
                }
                v
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ringperf-gpu".into())
            .spawn(move || {
                if let Some(id) = cpu {
                    core_affinity::set_for_current(core_affinity::CoreId { id });
                }
                let cpu0 = crate::clock::thread_cpu_ns();
                let series = sample_loop(source.as_mut(), &chosen, interval_ns, &flag);
                (series, crate::clock::thread_cpu_ns() - cpu0)
            })
            .map_err(Error::Thread)?;
        Ok(Sampler {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread (after one last sample) and returns every sample and the thread's CPU
    /// time (ns).
    pub fn finish(mut self) -> (Vec<Series>, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn sample_loop(
    source: &mut dyn Source,
    gpus: &[GpuInfo],
    interval_ns: u64,
    stop: &AtomicBool,
) -> Vec<Series> {
    let mut series: Vec<Series> = gpus
        .iter()
        .map(|g| Series {
            index: g.index,
            name: g.name.clone(),
            ..Series::default()
        })
        .collect();
    let mut next = now_ns();
    loop {
        let last = stop.load(Ordering::Relaxed);
        for s in series.iter_mut().filter(|s| s.dropped_out.is_none()) {
            match source.read(s.index) {
                Ok(sample) => s.samples.push(sample),
                Err(e) => s.dropped_out = Some((now_ns(), e.to_string())),
            }
        }
        if last {
            return series;
        }
        next += interval_ns.max(1_000_000);
        let now = now_ns();
        if next > now {
            // Sleep in short steps so a stop is noticed within 10 ms.
            let wait = (next - now).min(10_000_000);
            std::thread::sleep(Duration::from_nanos(wait));
            while now_ns() < next && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_nanos((next - now_ns()).min(10_000_000)));
            }
        } else {
            next = now;
        }
    }
}

/// A `--gpus` value that is neither `all` nor a list of GPU indices.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--gpus {0:?}: expected `all` or indices like 0,2")]
pub struct GpusError(pub String);

/// Parses `--gpus`: `all` or a list like `0,2`.
pub fn parse_gpus(s: &str) -> Result<Option<Vec<u32>>, GpusError> {
    if s.trim() == "all" {
        return Ok(None);
    }
    s.split(',')
        .map(|p| p.trim().parse::<u32>().map_err(|_| GpusError(s.into())))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

pub mod fake {
    //! A scripted GPU source, for tests and for measuring the sampler's own cost on machines
    //! without a GPU. Never used by a profile run.
    use super::*;

    /// One scripted GPU: it draws `watts`, its energy counter starts at `start_mj` (and wraps
    /// at `wrap_mj` when set), and its reads fail after `drop_after` reads.
    #[derive(Debug, Clone)]
    pub struct FakeGpu {
        /// Constant power draw (W).
        pub watts: f64,
        /// Energy counter at `t0` (mJ).
        pub start_mj: u64,
        /// The counter wraps at this value.
        pub wrap_mj: Option<u64>,
        /// Reads fail after this many.
        pub drop_after: Option<usize>,
        /// Whether the energy counter is supported.
        pub has_energy: bool,
        /// Time the counter starts from (`CLOCK_MONOTONIC` ns).
        pub t0: u64,
        /// Reads so far.
        pub reads: usize,
    }

    impl FakeGpu {
        /// A steady GPU drawing `watts` from now on.
        pub fn steady(watts: f64) -> FakeGpu {
            FakeGpu {
                watts,
                start_mj: 0,
                wrap_mj: None,
                drop_after: None,
                has_energy: true,
                t0: now_ns(),
                reads: 0,
            }
        }
    }

    /// A set of scripted GPUs.
    #[derive(Debug, Clone)]
    pub struct Fake(pub Vec<FakeGpu>);

    impl Source for Fake {
        fn gpus(&mut self) -> Result<Vec<GpuInfo>, Error> {
            Ok((0..self.0.len() as u32)
                .map(|index| GpuInfo {
                    index,
                    name: "Fake GPU".into(),
                })
                .collect())
        }
        fn read(&mut self, index: u32) -> Result<Sample, Error> {
            let g = &mut self.0[index as usize];
            g.reads += 1;
            if g.drop_after.is_some_and(|n| g.reads > n) {
                return Err(nvml_wrapper::error::NvmlError::GpuLost.into());
            }
            let t = now_ns();
            let mj = g.start_mj + ((t - g.t0) as f64 / 1e9 * g.watts * 1e3) as u64;
            Ok(Sample {
                t_ns: t,
                power_mw: Some((g.watts * 1e3) as u32),
                energy_mj: g.has_energy.then(|| g.wrap_mj.map_or(mj, |w| mj % w)),
                gpu_util: Some(50),
                mem_util: Some(20),
                mem_used: Some(1 << 30),
                sm_clock_mhz: Some(1980),
                temp_c: Some(60),
                throttle: Some(0),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::{Fake, FakeGpu};
    use super::*;

    #[test]
    fn sampler_reads_every_gpu_on_schedule_and_notices_a_dropout() {
        let gpu = |drop_after| FakeGpu {
            drop_after,
            ..FakeGpu::steady(300.0)
        };
        let s = Sampler::start(
            Box::new(Fake(vec![gpu(None), gpu(Some(3))])),
            None,
            20_000_000,
            None,
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(210));
        let (series, cpu_ns) = s.finish();
        assert_eq!(series.len(), 2);
        let n = series[0].samples.len();
        // About 11; a loaded machine may delay the thread, and the schedule then moves on.
        assert!((5..=14).contains(&n), "{n} samples in 210 ms at 20 ms");
        assert!(series[0].samples.windows(2).all(|w| w[0].t_ns < w[1].t_ns));
        assert_eq!(series[1].samples.len(), 3);
        assert!(series[1]
            .dropped_out
            .as_ref()
            .unwrap()
            .1
            .contains("fell off the bus"));
        assert!(cpu_ns < 100_000_000);
    }

    #[test]
    fn gpu_selection() {
        assert_eq!(parse_gpus("all").unwrap(), None);
        assert_eq!(parse_gpus("0,2").unwrap(), Some(vec![0, 2]));
        assert_eq!(parse_gpus("0,x"), Err(GpusError("0,x".into())));
        let fake = Fake(vec![FakeGpu::steady(1.0)]);
        let e = Sampler::start(Box::new(fake), Some(&[3]), 1_000_000, None)
            .err()
            .unwrap();
        assert!(e.to_string().contains("GPU 3"), "{e}");
    }

    #[test]
    fn nvml_is_unavailable_here_with_a_reason_or_works() {
        // On a machine without the NVIDIA driver this fails fast with the library's name.
        match Nvml::open() {
            Err(e) => assert!(!e.to_string().is_empty()),
            Ok(mut n) => assert!(n.gpus().is_ok()),
        }
    }
}
