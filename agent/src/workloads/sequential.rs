//! `sequential`: block after block, read or write, of a file or of one or several scratch block
//! devices in parallel, with any block size (the md RAID0 read regression hit sizes that are not
//! page multiples); MB/s per device and in total, per-request latency, and the CPU it cost.

use super::{
    add_latency_metrics, drop_caches, empty_result, open, AlignedBuf, Limits, Outcome,
    WorkloadError, MAX_SERIES_SAMPLES,
};
use firstbad_wire::{IoOp, Sequential, Series, WorkloadResult};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Largest block: one buffer in memory, and test VMs are small.
pub const MAX_BLOCK_BYTES: u32 = 64 << 20;
/// O_DIRECT transfers must be multiples of the logical block size; 512 is the smallest one.
pub const DIRECT_UNIT: u32 = 512;
/// Size of the writes that lay out a file before it is read: large, to be quick.
const PREPARE_BLOCK: usize = 1 << 20;

/// Checks the parameters; the error names the parameter, its value and the allowed range.
pub fn validate(p: &Sequential, limits: &Limits) -> Result<(), String> {
    if !(1..=MAX_BLOCK_BYTES).contains(&p.block_bytes) {
        return Err(format!(
            "sequential: block_bytes = {} is out of range 1..={MAX_BLOCK_BYTES}",
            p.block_bytes
        ));
    }
    if p.direct && !p.block_bytes.is_multiple_of(DIRECT_UNIT) {
        return Err(format!(
            "sequential: block_bytes = {} must be a multiple of {DIRECT_UNIT} with direct = true",
            p.block_bytes
        ));
    }
    if p.bytes < u64::from(p.block_bytes) {
        return Err(format!(
            "sequential: bytes = {} is less than one block ({})",
            p.bytes, p.block_bytes
        ));
    }
    if p.device.is_some() && !p.devices.is_empty() {
        return Err("sequential: give device or devices, not both".to_owned());
    }
    for device in p.device.iter().chain(&p.devices) {
        limits
            .check_device(device)
            .map_err(|e| format!("sequential: {e}"))?;
    }
    for (i, device) in p.devices.iter().enumerate() {
        if p.devices[..i].contains(device) {
            return Err(format!(
                "sequential: devices names {device:?} twice; give each device once"
            ));
        }
    }
    Ok(())
}

/// Bytes written to the scratch directory: the file, unless the targets are devices.
pub fn bytes_needed(p: &Sequential) -> u64 {
    if p.device.is_some() || !p.devices.is_empty() {
        0
    } else {
        p.bytes
    }
}

/// What one reader or writer thread measured on its target.
struct Transfer {
    bytes: u64,
    secs: f64,
    latencies: Vec<f64>,
    cpu: CpuTimes,
}

/// Runs the workload; its file (if any) lives in `dir`, which the caller removes.
pub fn run(p: &Sequential, dir: &Path, cancel: &AtomicBool) -> Result<Outcome, WorkloadError> {
    let started = Instant::now();
    let requests = p.bytes / u64::from(p.block_bytes);
    let write = p.op == IoOp::Write;
    let on_devices = p.device.is_some() || !p.devices.is_empty();
    let targets: Vec<PathBuf> = if on_devices {
        p.device
            .iter()
            .chain(&p.devices)
            .map(PathBuf::from)
            .collect()
    } else {
        vec![dir.join("data")]
    };
    for path in &targets {
        if on_devices {
            let mut f = open(path, false, false, false)?;
            let size = f
                .seek(SeekFrom::End(0))
                .map_err(WorkloadError::io(path, "seek to end"))?;
            if size < requests * u64::from(p.block_bytes) {
                return Err(WorkloadError::External(format!(
                    "sequential: device {} has {size} bytes, fewer than bytes = {}",
                    path.display(),
                    p.bytes
                )));
            }
        } else if !write && !prepare(path, requests * u64::from(p.block_bytes), cancel)? {
            return Ok(Outcome::Cancelled);
        }
    }
    if !write && p.drop_caches {
        for path in &targets {
            drop_caches(&open(path, false, false, false)?, path)?;
        }
    }
    let files = targets
        .iter()
        .map(|path| open(path, write, p.direct, write && !on_devices))
        .collect::<Result<Vec<_>, _>>()?;
    let t0 = Instant::now();
    // One thread per target, all started together: "several disks in parallel".
    let transfers: Vec<Option<Transfer>> = std::thread::scope(|scope| {
        let handles = files
            .iter()
            .zip(&targets)
            .map(|(file, path)| {
                std::thread::Builder::new()
                    .name(format!("sequential {}", path.display()))
                    .spawn_scoped(scope, move || transfer(p, file, path, requests, cancel))
                    .map_err(|source| WorkloadError::Spawn {
                        name: format!("sequential {}", path.display()),
                        source,
                    })
            })
            .collect::<Vec<_>>();
        handles
            .into_iter()
            .zip(&targets)
            .map(|(handle, path)| {
                handle?.join().map_err(|_| {
                    WorkloadError::Panicked(format!("sequential {}", path.display()))
                })?
            })
            .collect::<Result<Vec<_>, WorkloadError>>()
    })?;
    let wall = t0.elapsed().as_secs_f64();
    let Some(transfers) = transfers.into_iter().collect::<Option<Vec<_>>>() else {
        return Ok(Outcome::Cancelled);
    };
    Ok(Outcome::Done(summarize(
        &transfers,
        wall,
        started.elapsed().as_secs_f64(),
    )))
}

/// Reads or writes `requests` blocks of `file` from the start, or until `p.duration_ms`;
/// `None` when cancelled.
fn transfer(
    p: &Sequential,
    file: &std::fs::File,
    path: &Path,
    requests: u64,
    cancel: &AtomicBool,
) -> Result<Option<Transfer>, WorkloadError> {
    let write = p.op == IoOp::Write;
    let mut buf = AlignedBuf::new(p.block_bytes as usize, 0xa5);
    let limit = (p.duration_ms > 0).then(|| Duration::from_millis(p.duration_ms.into()));
    let mut latencies = Vec::with_capacity(requests.min(MAX_SERIES_SAMPLES as u64) as usize);
    let cpu0 = CpuTimes::of_this_thread();
    let t0 = Instant::now();
    let mut done = 0u64;
    while done < requests {
        if cancel.load(Ordering::Relaxed) {
            return Ok(None);
        }
        if limit.is_some_and(|l| t0.elapsed() >= l) {
            break;
        }
        let offset = done * u64::from(p.block_bytes);
        let t = Instant::now();
        if write {
            file.write_all_at(buf.as_slice(), offset)
                .map_err(WorkloadError::io(path, "write"))?;
        } else {
            file.read_exact_at(buf.as_mut_slice(), offset)
                .map_err(WorkloadError::io(path, "read"))?;
        }
        if latencies.len() < MAX_SERIES_SAMPLES {
            latencies.push(t.elapsed().as_secs_f64() * 1e3);
        }
        done += 1;
    }
    if write {
        // Buffered writes count once they reach the device, as dd conv=fsync counts them.
        file.sync_data()
            .map_err(WorkloadError::io(path, "fdatasync"))?;
    }
    Ok(Some(Transfer {
        bytes: done * u64::from(p.block_bytes),
        secs: t0.elapsed().as_secs_f64(),
        latencies,
        cpu: CpuTimes::of_this_thread() - cpu0,
    }))
}

/// Total and per-target MB/s, request latencies, and the CPU the transfer threads used.
fn summarize(transfers: &[Transfer], wall: f64, duration_s: f64) -> WorkloadResult {
    let bytes: u64 = transfers.iter().map(|t| t.bytes).sum();
    let requests: usize = transfers.iter().map(|t| t.latencies.len()).sum();
    let all: Vec<f64> = transfers
        .iter()
        .flat_map(|t| t.latencies.iter().copied())
        .collect();
    let mut r = empty_result("sequential", duration_s);
    add_latency_metrics(
        &mut r,
        "request_latency",
        &all,
        "no request completed (duration_ms ran out before the first)",
    );
    let mb_s = bytes as f64 / 1e6 / wall.max(1e-9);
    r.metrics.insert("mb_s".to_owned(), mb_s);
    r.metrics.insert("bytes".to_owned(), bytes as f64);
    r.metrics.insert("requests".to_owned(), requests as f64);
    r.metrics.insert("secs".to_owned(), wall);
    let per_target: Vec<f64> = transfers
        .iter()
        .map(|t| t.bytes as f64 / 1e6 / t.secs.max(1e-9))
        .collect();
    if transfers.len() > 1 {
        for (i, rate) in per_target.iter().enumerate() {
            r.metrics.insert(format!("dev{i}_mb_s"), *rate);
        }
    }
    // CPU% as top and vmstat count it: 100 is one CPU busy for the whole transfer.
    let pct = |secs: f64| 100.0 * secs / wall.max(1e-9);
    let us = pct(transfers.iter().map(|t| t.cpu.user).sum());
    let sy = pct(transfers.iter().map(|t| t.cpu.system).sum());
    r.metrics.insert("cpu_us_pct".to_owned(), us);
    r.metrics.insert("cpu_sy_pct".to_owned(), sy);
    r.metrics.insert("cpu_pct".to_owned(), us + sy);
    // It was 0 when no CPU time was measured: an efficiency of 0 is a lie, not a number.
    r.set_metric(
        "mb_s_per_cpu_pct",
        if us + sy > 0.0 {
            mb_s / (us + sy)
        } else {
            f64::NAN
        },
        NO_CPU_TIME,
    );
    r.series.insert(
        "request_latency".to_owned(),
        Series {
            unit: "ms".to_owned(),
            samples: all,
            count: None,
        },
    );
    r.series.insert(
        "device_mb_s".to_owned(),
        Series {
            unit: "MB/s".to_owned(),
            samples: per_target,
            count: None,
        },
    );
    r
}

/// Why a rate per CPU percent is unavailable: getrusage counts CPU time in scheduler ticks, so a
/// short transfer can measure none.
pub const NO_CPU_TIME: &str =
    "no CPU time was measured for the I/O threads (the kernel counts it in ticks; the run was \
     too short to register one)";

/// User and system CPU seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    /// In user mode.
    pub user: f64,
    /// In the kernel (for reads and writes: mostly copying and the block layer).
    pub system: f64,
}

impl CpuTimes {
    /// The calling thread's CPU times so far (`getrusage(RUSAGE_THREAD)`); zero if unknown.
    pub fn of_this_thread() -> CpuTimes {
        // SAFETY: rusage is plain old data; all-zero bytes are a valid value.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is writable for the duration of the call.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
            return CpuTimes::default();
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        CpuTimes {
            user: tv(ru.ru_utime),
            system: tv(ru.ru_stime),
        }
    }
}

impl std::ops::Sub for CpuTimes {
    type Output = CpuTimes;
    fn sub(self, rhs: CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user - rhs.user,
            system: self.system - rhs.system,
        }
    }
}

/// Lays out `bytes` of data in a new file at `path` and writes it back; `false` if cancelled.
pub fn prepare(path: &Path, bytes: u64, cancel: &AtomicBool) -> Result<bool, WorkloadError> {
    let file = open(path, true, false, true)?;
    let buf = vec![0x5au8; PREPARE_BLOCK];
    let mut off = 0u64;
    while off < bytes {
        if cancel.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let len = (bytes - off).min(PREPARE_BLOCK as u64) as usize;
        file.write_all_at(&buf[..len], off)
            .map_err(WorkloadError::io(path, "write"))?;
        off += len as u64;
    }
    file.sync_all().map_err(WorkloadError::io(path, "fsync"))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Sequential {
        Sequential {
            op: IoOp::Read,
            device: None,
            devices: Vec::new(),
            block_bytes: 6144,
            bytes: 6144 * 100,
            duration_ms: 0,
            direct: true,
            drop_caches: false,
        }
    }

    #[test]
    fn validation_names_the_parameter() {
        let l = Limits::default();
        validate(&params(), &l).expect("6144 is 12 sectors: fine for O_DIRECT");
        let e = validate(
            &Sequential {
                block_bytes: 6000,
                ..params()
            },
            &l,
        )
        .unwrap_err();
        assert!(e.contains("multiple of 512"), "{e}");
        let e = validate(
            &Sequential {
                device: Some("/dev/sda".into()),
                ..params()
            },
            &l,
        )
        .unwrap_err();
        assert!(e.contains("not a scratch device"), "{e}");
        let l = Limits {
            devices: vec!["/dev/loop7".into(), "/dev/loop8".into()],
            ..Limits::default()
        };
        let both = |devices: &[&str]| Sequential {
            devices: devices.iter().map(|d| d.to_string()).collect(),
            ..params()
        };
        validate(&both(&["/dev/loop7", "/dev/loop8"]), &l).expect("two scratch devices");
        let e = validate(&both(&["/dev/loop7", "/dev/loop7"]), &l).unwrap_err();
        assert!(e.contains("twice"), "{e}");
        let e = validate(&both(&["/dev/loop7", "/dev/sda"]), &l).unwrap_err();
        assert!(e.contains("\"/dev/sda\" is not a scratch device"), "{e}");
        let e = validate(
            &Sequential {
                device: Some("/dev/loop8".into()),
                ..both(&["/dev/loop7"])
            },
            &l,
        )
        .unwrap_err();
        assert!(e.contains("not both"), "{e}");
    }

    #[test]
    fn total_and_per_device_rates_and_cpu_efficiency() {
        let t = |bytes: u64, secs: f64, user: f64, system: f64| Transfer {
            bytes,
            secs,
            latencies: vec![1.0; 4],
            cpu: CpuTimes { user, system },
        };
        // Two devices over a 2 s wall time: 100 MB in 2 s and 50 MB in 1 s.
        let r = summarize(
            &[t(100_000_000, 2.0, 0.1, 0.5), t(50_000_000, 1.0, 0.1, 0.3)],
            2.0,
            2.5,
        );
        let m = &r.metrics;
        assert_eq!(m["mb_s"], 75.0);
        assert_eq!(m["dev0_mb_s"], 50.0);
        assert_eq!(m["dev1_mb_s"], 50.0);
        assert_eq!(r.series["device_mb_s"].samples, vec![50.0, 50.0]);
        assert!((m["cpu_us_pct"] - 10.0).abs() < 1e-9, "{m:?}");
        assert!((m["cpu_sy_pct"] - 40.0).abs() < 1e-9, "{m:?}");
        assert!((m["mb_s_per_cpu_pct"] - 1.5).abs() < 1e-9, "{m:?}");
        assert_eq!(m["requests"], 8.0);
    }

    // issue 19: a metric that cannot be computed is left out, with the reason.
    #[test]
    fn no_request_and_no_cpu_leave_their_metrics_out_with_a_reason() {
        let none = Transfer {
            bytes: 0,
            secs: 0.0,
            latencies: Vec::new(),
            cpu: CpuTimes::default(),
        };
        let r = summarize(&[none], 0.0, 0.1);
        for name in [
            "request_latency_p50_ms",
            "request_latency_mean_ms",
            "mb_s_per_cpu_pct",
        ] {
            assert!(!r.metrics.contains_key(name), "{name}: {:?}", r.metrics);
            assert!(
                r.unavailable.contains_key(name),
                "{name}: {:?}",
                r.unavailable
            );
        }
        assert!(r.unavailable["mb_s_per_cpu_pct"].contains("no CPU time"));
        assert!(r.metrics.values().all(|v| v.is_finite()), "{:?}", r.metrics);
    }

    #[test]
    fn a_direct_read_with_a_non_page_block_reads_every_block() {
        let dir = tempfile::tempdir().expect("tempdir");
        let Outcome::Done(r) = run(&params(), dir.path(), &AtomicBool::new(false)).expect("run")
        else {
            panic!("cancelled");
        };
        assert_eq!(r.metrics["requests"], 100.0);
        assert_eq!(r.metrics["bytes"], 614400.0);
        assert_eq!(r.series["request_latency"].samples.len(), 100);
        assert!(r.metrics["mb_s"] > 0.0);
    }
}
