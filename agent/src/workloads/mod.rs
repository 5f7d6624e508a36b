//! The workloads the agent runs, and what they share: validation, space needs, scratch files.

pub mod budget;
pub mod command;
pub mod fio;
pub mod fio_job;
pub mod fsync_latency;
pub mod sequential;
pub mod threads;

use firstbad_wire::{percentile, Workload, WorkloadResult};
use std::ffi::CString;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How a workload that did not fail ended.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per run: boxing would buy nothing
pub enum Outcome {
    /// It ran to the end and measured this.
    Done(WorkloadResult),
    /// It stopped early because it was asked to.
    Cancelled,
}

/// Why a workload failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A file operation in the scratch directory failed.
    #[error("{}: {op}: {source}", path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// What was being done to it.
        op: &'static str,
        /// The error from the kernel.
        #[source]
        source: std::io::Error,
    },
    /// A workload thread could not be started.
    #[error("cannot start thread {name}: {source}")]
    Spawn {
        /// The thread's name.
        name: String,
        /// The error from the kernel.
        #[source]
        source: std::io::Error,
    },
    /// A workload thread panicked (a bug in the agent).
    #[error("workload thread {0} panicked")]
    Panicked(String),
    /// An external program (fio, a user's script) failed or printed nothing usable.
    #[error("{0}")]
    External(String),
}

impl WorkloadError {
    /// An [`WorkloadError::Io`] on `path`, for `map_err`.
    pub fn io<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(std::io::Error) -> Self + 'a {
        move |source| WorkloadError::Io {
            path: path.to_owned(),
            op,
            source,
        }
    }
}

/// What the agent was allowed to touch when it was started.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// Block devices workloads may read and overwrite (`--scratch-device`).
    pub devices: Vec<PathBuf>,
    /// Whether `command` workloads may run (`--allow-command`).
    pub allow_command: bool,
    /// How much memory one run may take on this host.
    pub budget: budget::Budget,
}

impl Limits {
    /// Checks that `device` is one of the scratch devices; the error lists them.
    pub fn check_device(&self, device: &str) -> Result<PathBuf, String> {
        let path = PathBuf::from(device);
        if self.devices.contains(&path) {
            Ok(path)
        } else {
            Err(format!(
                "device {device:?} is not a scratch device of this agent (--scratch-device: {:?})",
                self.devices
            ))
        }
    }
}

/// Checks that `device` can serve as a scratch device: it exists, is a block device, and
/// nothing holds it (not mounted, not part of an md array or a device-mapper target, not swap).
///
/// The last check is the kernel's own: `open(O_EXCL)` on a block device fails with EBUSY while
/// anything else has claimed it. The error says what to do.
pub fn check_scratch_device(device: &Path) -> Result<(), String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
    let meta = std::fs::metadata(device).map_err(|e| format!("cannot stat: {e}"))?;
    if !meta.file_type().is_block_device() {
        return Err(
            "not a block device (give a disk such as /dev/vdb, or a loop device made with              `losetup -f --show FILE`)"
                .to_owned(),
        );
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(device)
    {
        Ok(_) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            let mounted = mount_points_of(meta.rdev());
            Err(if mounted.is_empty() {
                "is in use (held by md, device-mapper, swap or another exclusive user); \
                 its contents would be destroyed: give an unused device"
                    .to_owned()
            } else {
                format!(
                    "is mounted on {}; its contents would be destroyed: unmount it or give \
                     another device",
                    mounted.join(", ")
                )
            })
        }
        Err(e) => Err(format!("cannot open: {e}")),
    }
}

/// Where the block device with number `rdev` is mounted, from `/proc/self/mounts`.
fn mount_points_of(rdev: u64) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let source = fields.next()?;
            let target = fields.next()?;
            let meta = std::fs::metadata(source).ok()?;
            (meta.rdev() == rdev).then(|| target.replace("\\040", " "))
        })
        .collect()
}

/// Checks a workload's parameters against `limits`; the error names the parameter and the
/// allowed range.
pub fn validate(workload: &Workload, limits: &Limits) -> Result<(), String> {
    match workload {
        Workload::FsyncLatency(p) => fsync_latency::validate(p),
        Workload::Sequential(p) => sequential::validate(p, limits),
        Workload::Threads(p) => threads::validate(p),
        Workload::Fio(p) => fio::validate(p, limits),
        Workload::Command(p) => command::validate(p, limits),
    }?;
    budget::check(workload, &limits.budget)
}

/// Checks, as a run is requested, that the scratch devices it uses are still free (nothing
/// mounted them since the agent started) and hold the bytes it transfers; the error names the
/// device.
pub fn check_devices(workload: &Workload) -> Result<(), String> {
    let (devices, needed): (Vec<&String>, u64) = match workload {
        Workload::Sequential(p) => (
            p.device.iter().chain(&p.devices).collect(),
            p.bytes - p.bytes % u64::from(p.block_bytes.max(1)),
        ),
        Workload::Fio(p) => (p.device.iter().collect(), 0),
        _ => return Ok(()),
    };
    for device in devices {
        let path = Path::new(device);
        check_scratch_device(path)
            .map_err(|e| format!("{} device {device}: {e}", workload.kind()))?;
        let size = device_bytes(path).map_err(|e| format!("device {device}: {e}"))?;
        if size < needed {
            return Err(format!(
                "{}: device {device} has {size} bytes, fewer than bytes = {needed}",
                workload.kind()
            ));
        }
    }
    Ok(())
}

/// The size of a block device in bytes (its end, as `lseek(SEEK_END)` finds it).
fn device_bytes(device: &Path) -> std::io::Result<u64> {
    use std::io::Seek;
    File::open(device)?.seek(std::io::SeekFrom::End(0))
}

/// How many bytes the workload writes to the scratch directory at most (writes to a scratch
/// device need no room in the directory).
pub fn bytes_needed(workload: &Workload) -> u64 {
    match workload {
        Workload::FsyncLatency(p) => fsync_latency::bytes_needed(p),
        Workload::Sequential(p) => sequential::bytes_needed(p),
        Workload::Threads(p) => threads::bytes_needed(p),
        Workload::Fio(p) if p.device.is_none() => budget::fio_bytes_needed(&p.job),
        // On a device fio writes nothing to scratch; a script is trusted (--allow-command).
        Workload::Fio(_) | Workload::Command(_) => 0,
    }
}

/// Why a workload does not fit the scratch directory.
#[derive(Debug)]
pub enum NoRoom {
    /// The free space could not be read.
    Statvfs(String),
    /// It writes more than there is free.
    Short(String),
}

/// Checks that `workload` fits in `scratch`: the same check, and message, for the server and
/// for one-shot runs.
pub fn check_room(workload: &Workload, scratch: &Path) -> Result<(), NoRoom> {
    let needed = bytes_needed(workload);
    let free = free_bytes(scratch)
        .map_err(|e| NoRoom::Statvfs(format!("scratch {}: statvfs: {e}", scratch.display())))?;
    if needed > free {
        // fio's count is the one a user cannot work out alone (issue 32, finding 6).
        let counted = match workload {
            Workload::Fio(_) => format!(
                " ({}): make its files smaller or fewer",
                budget::FIO_SCRATCH_FORMULA
            ),
            _ => String::new(),
        };
        return Err(NoRoom::Short(format!(
            "scratch {} has {} MiB free, but this {} run writes up to {} MiB{counted}",
            scratch.display(),
            free >> 20,
            workload.kind(),
            needed.div_ceil(1 << 20),
        )));
    }
    Ok(())
}

/// Runs `workload` in a fresh directory `run_dir` (inside scratch), which is removed afterwards
/// whether the workload finished, failed, was cancelled or panicked.
///
/// A system snapshot is taken first and a vmstat sample each second; both go into the result.
pub fn run(
    workload: &Workload,
    run_dir: &Path,
    limits: &Limits,
    cancel: &AtomicBool,
) -> Result<Outcome, WorkloadError> {
    std::fs::create_dir(run_dir).map_err(WorkloadError::io(run_dir, "create run directory"))?;
    let guard = RemoveOnDrop(run_dir);
    let system = crate::sysinfo::snapshot(run_dir, &limits.devices);
    // The run's duration covers the vmstat window, so that the series has one sample per
    // whole second of `duration_s` (or one fewer when the stop fell just before a tick).
    let t0 = Instant::now();
    let sampler = crate::sysinfo::VmstatSampler::start();
    let outcome = match workload {
        Workload::FsyncLatency(p) => fsync_latency::run(p, run_dir, cancel),
        Workload::Sequential(p) => sequential::run(p, run_dir, cancel),
        Workload::Threads(p) => threads::run(p, run_dir, cancel),
        Workload::Fio(p) => fio::run(p, run_dir, cancel),
        Workload::Command(p) => command::run(p, run_dir, cancel),
    };
    let vmstat = sampler.stop();
    let duration_s = t0.elapsed().as_secs_f64();
    let outcome = outcome.map(|o| match o {
        Outcome::Done(mut result) => {
            // Each workload says why a metric is missing; this is the net under them all, so
            // that no NaN goes out as `null` (issue 19).
            let changed = result.keep_finite();
            if changed > 0 {
                tracing::warn!(
                    kind = workload.kind(),
                    changed,
                    unavailable = ?result.unavailable,
                    "values that are not finite numbers were left out"
                );
            }
            result.system = Some(system);
            result.vmstat = vmstat;
            result.duration_s = duration_s;
            Outcome::Done(result)
        }
        Outcome::Cancelled => Outcome::Cancelled,
    });
    std::mem::forget(guard);
    let removed = std::fs::remove_dir_all(run_dir);
    let outcome = outcome?;
    removed.map_err(WorkloadError::io(run_dir, "remove run directory"))?;
    Ok(outcome)
}

/// Removes a run directory when a workload unwinds, so that a panic leaves no files behind.
struct RemoveOnDrop<'a>(&'a Path);

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        // Best effort: we are already unwinding from a panic.
        let _ = std::fs::remove_dir_all(self.0);
    }
}

/// Bytes available to an unprivileged writer in the file system holding `dir` (`statvfs(3)`).
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let c_path = CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statvfs is plain old data; all-zero bytes are a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c_path` is NUL-terminated and `st` is writable for the duration of the call.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // the field types differ between libc targets
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// Sleeps for `duration` unless `cancel` is raised first; `false` when cancelled.
///
/// Sleeps in short steps so that a cancel is honoured within about 10 ms.
pub fn sleep_unless_cancelled(duration: Duration, cancel: &AtomicBool) -> bool {
    const STEP: Duration = Duration::from_millis(10);
    let deadline = Instant::now() + duration;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        std::thread::sleep(STEP.min(deadline - now));
    }
}

/// Most samples kept in one series: every sample goes back in one JSON body (~20 bytes each).
pub const MAX_SERIES_SAMPLES: usize = 1_000_000;

/// Alignment of O_DIRECT buffers: the page size, which satisfies every logical block size.
const DIRECT_ALIGN: usize = 4096;

/// A zero-filled buffer whose start is aligned for O_DIRECT.
pub struct AlignedBuf {
    storage: Vec<u8>,
    offset: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` bytes, aligned to [`DIRECT_ALIGN`], filled with `fill`.
    pub fn new(len: usize, fill: u8) -> Self {
        let storage = vec![fill; len + DIRECT_ALIGN];
        let offset = storage.as_ptr().align_offset(DIRECT_ALIGN);
        AlignedBuf {
            storage,
            offset,
            len,
        }
    }

    /// The aligned bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.storage[self.offset..self.offset + self.len]
    }

    /// The aligned bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.offset..self.offset + self.len]
    }
}

/// Opens `path` for reading or writing, with O_DIRECT if asked; `create` also creates and
/// truncates it.
pub fn open(path: &Path, write: bool, direct: bool, create: bool) -> Result<File, WorkloadError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut opts = std::fs::OpenOptions::new();
    opts.read(!write).write(write);
    if create {
        opts.create(true).truncate(true);
    }
    if direct {
        opts.custom_flags(libc::O_DIRECT);
    }
    opts.open(path).map_err(WorkloadError::io(path, "open"))
}

/// Writes `file` back and drops its cached pages, then, when running as root, the whole page
/// cache (`vm.drop_caches = 3`), so that the reads that follow go to the device.
pub fn drop_caches(file: &File, path: &Path) -> Result<(), WorkloadError> {
    file.sync_data()
        .map_err(WorkloadError::io(path, "fdatasync"))?;
    // SAFETY: a valid open descriptor; offset 0 and length 0 mean the whole file.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(WorkloadError::Io {
            path: path.to_owned(),
            op: "fadvise(DONTNEED)",
            source: std::io::Error::from_raw_os_error(rc),
        });
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        let drop = Path::new("/proc/sys/vm/drop_caches");
        std::fs::write(drop, "3\n").map_err(WorkloadError::io(drop, "write 3"))?;
    }
    Ok(())
}

/// Adds `{prefix}_p50_ms`, p90, p99, p99.9, max and mean of `samples` (latencies in ms) to
/// `result`; with no sample they are unavailable, with `why_none` as the reason.
pub fn add_latency_metrics(
    result: &mut WorkloadResult,
    prefix: &str,
    samples: &[f64],
    why_none: &str,
) {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let pct = |p| percentile(&sorted, p).unwrap_or(f64::NAN);
    let mean = if sorted.is_empty() {
        f64::NAN
    } else {
        sorted.iter().sum::<f64>() / sorted.len() as f64
    };
    for (suffix, value) in [
        ("p50", pct(50.0)),
        ("p90", pct(90.0)),
        ("p99", pct(99.0)),
        ("p999", pct(99.9)),
        ("max", pct(100.0)),
        ("mean", mean),
    ] {
        result.set_metric(&format!("{prefix}_{suffix}_ms"), value, why_none);
    }
}

/// An empty result of `kind`, for the workloads' summaries to fill.
pub fn empty_result(kind: &str, duration_s: f64) -> WorkloadResult {
    WorkloadResult::empty(kind, duration_s)
}

/// A small xorshift64 generator for random offsets: reproducible, no dependency.
pub struct XorShift(u64);

impl XorShift {
    /// A generator from `seed` (0 is replaced, since xorshift would stay at 0).
    pub fn new(seed: u64) -> Self {
        XorShift(seed.max(1))
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Runs `child` until it exits, `cancel` is raised or `timeout` passes; kills its process group
/// in the last two cases. Returns its stdout and stderr, or `None` when cancelled.
pub fn run_child(
    mut command: std::process::Command,
    what: &str,
    timeout: Duration,
    cancel: &AtomicBool,
) -> Result<Option<std::process::Output>, WorkloadError> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = command
        .spawn()
        .map_err(|e| WorkloadError::External(format!("cannot start {what}: {e}")))?;
    // Drain both pipes in threads so that a chatty child never blocks on a full pipe.
    let mut out = child.stdout.take().expect("stdout is piped");
    let mut err = child.stderr.take().expect("stderr is piped");
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + timeout;
    let (status, stopped) = loop {
        match child.try_wait() {
            Ok(Some(status)) => break (status, None),
            Ok(None) => {}
            Err(e) => return Err(WorkloadError::External(format!("{what}: wait: {e}"))),
        }
        let stop = if cancel.load(Ordering::Relaxed) {
            Some("cancelled")
        } else if Instant::now() >= deadline {
            Some("timed out")
        } else {
            None
        };
        if let Some(why) = stop {
            // SAFETY: kill(2) on the child's own process group (created above).
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let status = child
                .wait()
                .map_err(|e| WorkloadError::External(format!("{what}: wait: {e}")))?;
            break (status, Some(why));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    match stopped {
        Some("cancelled") => Ok(None),
        Some(_) => Err(WorkloadError::External(format!(
            "{what} timed out after {} s and was killed",
            timeout.as_secs()
        ))),
        None => Ok(Some(std::process::Output {
            status,
            stdout,
            stderr,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `workloads/*.toml`, parsed as the orchestrator sends it.
    fn repo_workloads() -> Vec<(PathBuf, Workload)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("workloads/")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        files
            .into_iter()
            .map(|path| {
                let text = std::fs::read_to_string(&path).expect("read");
                let w = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                (path, w)
            })
            .collect()
    }

    /// The scratch devices the repository's workloads name, as `--scratch-device`s.
    fn limits_for(workloads: &[(PathBuf, Workload)]) -> Limits {
        let mut devices = Vec::new();
        for (_, w) in workloads {
            match w {
                Workload::Sequential(p) => devices.extend(p.device.iter().chain(&p.devices)),
                Workload::Fio(p) => devices.extend(&p.device),
                _ => {}
            }
        }
        Limits {
            devices: devices.into_iter().map(PathBuf::from).collect(),
            allow_command: false,
            // The demo's guest has memory_mb = 1024 (configs/demo.toml), of which the kernel
            // keeps some: MemTotal there is about 980 MiB; 900 leaves room.
            budget: budget::Budget::for_host_memory(900 << 20),
        }
    }

    // issue 19: the fio allowlist and the bounds must still take every workload we ship.
    #[test]
    fn every_repo_workload_fits_the_demo_guests_bounds() {
        let workloads = repo_workloads();
        assert!(
            workloads.len() >= 17,
            "only {} workload files",
            workloads.len()
        );
        let limits = limits_for(&workloads);
        for (path, w) in &workloads {
            validate(w, &limits).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }

    // issue 19: fio runs the job rendered from the parsed form, so that form must be one fio
    // reads as the author meant: `fio --parse-only` accepts every rendered repo job.
    #[test]
    fn fio_accepts_every_repo_fio_job_as_the_agent_renders_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut n = 0;
        for (path, w) in repo_workloads() {
            let Workload::Fio(p) = w else { continue };
            let job = fio_job::parse(&p.job).expect("valid job");
            let file = dir.path().join("job.fio");
            std::fs::write(&file, job.render(p.device.as_deref())).expect("write job");
            let out = std::process::Command::new("fio")
                .arg("--parse-only")
                .arg(&file)
                .output()
                .expect("fio is installed (scripts/install-deps)");
            assert!(
                out.status.success(),
                "{}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            n += 1;
        }
        assert!(n >= 8, "only {n} fio workloads");
    }

    #[test]
    fn free_bytes_of_tmp_is_positive() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(free_bytes(dir.path()).expect("statvfs") > 0);
    }

    #[test]
    fn a_raised_cancel_cuts_a_sleep_short() {
        let cancel = AtomicBool::new(true);
        let start = Instant::now();
        assert!(!sleep_unless_cancelled(Duration::from_secs(5), &cancel));
        assert!(start.elapsed() < Duration::from_secs(1));
        assert!(sleep_unless_cancelled(
            Duration::from_millis(1),
            &AtomicBool::new(false)
        ));
    }
}
