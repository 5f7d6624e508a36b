//! The workloads the agent runs, and what they share: validation, space needs, scratch files.

pub mod fsync_latency;

use firstbad_wire::{Workload, WorkloadResult};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How a workload that did not fail ended.
#[derive(Debug)]
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

/// Checks a workload's parameters; the error names the parameter and the allowed range.
pub fn validate(workload: &Workload) -> Result<(), String> {
    match workload {
        Workload::FsyncLatency(p) => fsync_latency::validate(p),
    }
}

/// How many bytes the workload writes to the scratch directory at most.
pub fn bytes_needed(workload: &Workload) -> u64 {
    match workload {
        Workload::FsyncLatency(p) => fsync_latency::bytes_needed(p),
    }
}

/// Runs `workload` in a fresh directory `run_dir` (inside scratch), which is removed afterwards
/// whether the workload finished, failed, was cancelled or panicked.
pub fn run(
    workload: &Workload,
    run_dir: &Path,
    cancel: &AtomicBool,
) -> Result<Outcome, WorkloadError> {
    std::fs::create_dir(run_dir).map_err(WorkloadError::io(run_dir, "create run directory"))?;
    let guard = RemoveOnDrop(run_dir);
    let outcome = match workload {
        Workload::FsyncLatency(p) => fsync_latency::run(p, run_dir, cancel),
    };
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

#[cfg(test)]
mod tests {
    use super::*;

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
