//! The system state stored with every run: a snapshot at the start and a vmstat-style series.
//!
//! Everything comes from `/proc` and `/sys`; a missing file leaves its field empty rather than
//! failing the run (a tiny test kernel may lack some of them).

use firstbad_wire::{BlockQueue, MountInfo, SystemSnapshot, VmstatSample};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The `vm.dirty_*` sysctls, the knobs behind most writeback latency reports.
const DIRTY_SYSCTLS: &[&str] = &[
    "dirty_ratio",
    "dirty_background_ratio",
    "dirty_bytes",
    "dirty_background_bytes",
    "dirty_expire_centisecs",
    "dirty_writeback_centisecs",
];

fn read_trim(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

fn read_u64(path: impl AsRef<Path>) -> Option<u64> {
    read_trim(path)?.parse().ok()
}

/// Snapshot of the host, for a run whose files live in `dir` and which may use `devices`.
pub fn snapshot(dir: &Path, devices: &[PathBuf]) -> SystemSnapshot {
    let sysctls = DIRTY_SYSCTLS
        .iter()
        .filter_map(|name| {
            read_trim(format!("/proc/sys/vm/{name}")).map(|v| (format!("vm.{name}"), v))
        })
        .collect::<BTreeMap<_, _>>();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem = |key: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get() as u32);
    let mut queues = Vec::new();
    if let Ok(meta) = std::fs::metadata(dir) {
        queues.extend(queue_of_dev(meta.dev()));
    }
    for device in devices {
        if let Ok(meta) = std::fs::metadata(device) {
            queues.extend(queue_of_dev(meta.rdev()));
        }
    }
    SystemSnapshot {
        kernel_release: crate::identity::identity()
            .map(|i| i.kernel_release)
            .unwrap_or_default(),
        cmdline: read_trim("/proc/cmdline").unwrap_or_default(),
        sysctls,
        devices: queues,
        mount: mount_of(dir),
        mem_total_kb: mem("MemTotal"),
        mem_available_kb: mem("MemAvailable"),
        cpus,
        cpu_model,
    }
}

/// The queue settings of the disk behind device number `dev` (its parent when a partition).
fn queue_of_dev(dev: u64) -> Option<BlockQueue> {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let sys = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    // A partition has no queue/ of its own; its disk is the parent directory.
    let disk = if sys.join("partition").exists() {
        sys.parent()?.to_owned()
    } else {
        sys
    };
    let name = disk.file_name()?.to_string_lossy().into_owned();
    let queue = disk.join("queue");
    Some(BlockQueue {
        name,
        scheduler: read_trim(queue.join("scheduler")),
        nr_requests: read_u64(queue.join("nr_requests")),
        queue_depth: read_u64(disk.join("device/queue_depth")),
        read_ahead_kb: read_u64(queue.join("read_ahead_kb")),
    })
}

/// The mount holding `dir`: the longest mount point that is a prefix of it.
fn mount_of(dir: &Path) -> Option<MountInfo> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let m = MountInfo {
                source: f.next()?.to_owned(),
                mount_point: unescape_mount(f.next()?),
                fstype: f.next()?.to_owned(),
                options: f.next()?.to_owned(),
            };
            dir.starts_with(&m.mount_point).then_some(m)
        })
        .max_by_key(|m| m.mount_point.len())
}

/// /proc/self/mounts writes spaces and tabs in paths as octal escapes (`\040`).
fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\134", "\\")
}

/// Counters behind one vmstat line.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Counters {
    pgpgin: u64,
    pgpgout: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    /// user+nice, system+irq+softirq, idle, iowait, in USER_HZ ticks.
    cpu: [u64; 4],
}

fn parse_counters(vmstat: &str, stat: &str) -> Counters {
    let mut c = Counters::default();
    for line in vmstat.lines() {
        let Some((key, value)) = line.split_once(' ') else {
            continue;
        };
        let value = value.trim().parse().unwrap_or(0);
        match key {
            "pgpgin" => c.pgpgin = value,
            "pgpgout" => c.pgpgout = value,
            "nr_dirty" => c.nr_dirty = value,
            "nr_writeback" => c.nr_writeback = value,
            _ => {}
        }
    }
    if let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) {
        // cpu  user nice system idle iowait irq softirq steal ...
        let t: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        let at = |i: usize| t.get(i).copied().unwrap_or(0);
        c.cpu = [at(0) + at(1), at(2) + at(5) + at(6), at(3), at(4)];
    }
    c
}

fn read_counters() -> Counters {
    parse_counters(
        &std::fs::read_to_string("/proc/vmstat").unwrap_or_default(),
        &std::fs::read_to_string("/proc/stat").unwrap_or_default(),
    )
}

/// One vmstat line from two readings `secs` apart.
fn sample(before: &Counters, after: &Counters, secs: f64, t_s: f64) -> VmstatSample {
    let d = |a: u64, b: u64| a.saturating_sub(b) as f64;
    let ticks: Vec<f64> = (0..4).map(|i| d(after.cpu[i], before.cpu[i])).collect();
    let total: f64 = ticks.iter().sum();
    let pct = |x: f64| if total > 0.0 { 100.0 * x / total } else { 0.0 };
    let rate = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
    VmstatSample {
        t_s,
        bi: rate(d(after.pgpgin, before.pgpgin)),
        bo: rate(d(after.pgpgout, before.pgpgout)),
        us: pct(ticks[0]),
        sy: pct(ticks[1]),
        id: pct(ticks[2]),
        wa: pct(ticks[3]),
        nr_dirty: after.nr_dirty,
        nr_writeback: after.nr_writeback,
    }
}

/// A thread taking a vmstat sample each second until stopped.
pub struct VmstatSampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Vec<VmstatSample>>>,
}

/// Interval between two samples, as `vmstat 1`.
const VMSTAT_INTERVAL: Duration = Duration::from_secs(1);

impl VmstatSampler {
    /// Starts sampling now.
    pub fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("vmstat".to_owned())
            .spawn(move || {
                let started = Instant::now();
                let mut samples = Vec::new();
                let mut last = read_counters();
                let mut last_t = started;
                let mut next = started + VMSTAT_INTERVAL;
                loop {
                    while Instant::now() < next {
                        if flag.load(Ordering::Relaxed) {
                            return samples;
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let now = Instant::now();
                    let c = read_counters();
                    let secs = now.duration_since(last_t).as_secs_f64();
                    let t_s = now.duration_since(started).as_secs_f64();
                    samples.push(sample(&last, &c, secs, t_s));
                    last = c;
                    last_t = now;
                    next += VMSTAT_INTERVAL;
                }
            })
            .ok();
        VmstatSampler { stop, handle }
    }

    /// Stops sampling and returns the samples (none if the thread could not start).
    pub fn stop(mut self) -> Vec<VmstatSample> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vmstat_line_from_two_readings() {
        let vm1 = "nr_dirty 10\nnr_writeback 0\npgpgin 1000\npgpgout 2000\n";
        let vm2 = "nr_dirty 300\nnr_writeback 20\npgpgin 1400\npgpgout 10000\n";
        let st1 = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3\n";
        let st2 = "cpu  110 10 70 850 50 5 5 0 0 0\ncpu0 1 2 3\n";
        let s = sample(
            &parse_counters(vm1, st1),
            &parse_counters(vm2, st2),
            2.0,
            2.0,
        );
        assert_eq!((s.bi, s.bo), (200.0, 4000.0));
        // 100 ticks in all: 20 user+nice, 30 sys+irq+softirq, 50 idle, 0 iowait.
        assert_eq!((s.us, s.sy, s.id, s.wa), (20.0, 30.0, 50.0, 0.0));
        assert_eq!((s.nr_dirty, s.nr_writeback), (300, 20));
    }

    #[test]
    fn snapshot_of_this_machine() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = snapshot(dir.path(), &[]);
        assert!(
            !s.cmdline.is_empty() && s.mem_total_kb > 0 && s.cpus > 0,
            "{s:?}"
        );
        assert!(s.sysctls.contains_key("vm.dirty_ratio"), "{s:?}");
        let mount = s.mount.expect("tempdir is on some mount");
        assert!(dir.path().starts_with(&mount.mount_point), "{mount:?}");
    }

    #[test]
    fn sampler_takes_one_sample_a_second() {
        let sampler = VmstatSampler::start();
        std::thread::sleep(Duration::from_millis(2300));
        let samples = sampler.stop();
        assert_eq!(samples.len(), 2, "{samples:?}");
        let s = &samples[1];
        let sum = s.us + s.sy + s.id + s.wa;
        assert!((sum - 100.0).abs() < 1e-6 || sum == 0.0, "{s:?}");
    }
}
