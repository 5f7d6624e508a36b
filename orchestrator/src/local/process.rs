//! One run of a shell command in a directory, as every command hunt runs it: its own process
//! group, killed whole at its deadline or when firstbad dies.

use std::fs::File;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How a run ended.
#[derive(Debug)]
pub struct Ran {
    /// Its exit status (after the kill, for a run that timed out).
    pub status: ExitStatus,
    /// Killed at its deadline.
    pub timed_out: bool,
    /// Wall time.
    pub seconds: f64,
}

/// Runs `sh -c command` in `cwd` with `env` added, its output to `stdout` and `stderr`, and
/// kills its process group at `timeout`. `started` gets the process group id once it runs (to
/// kill it from elsewhere); `Err` when it could not be started or waited for.
pub fn run_shell(
    command: &str,
    cwd: &Path,
    env: &[(&str, &str)],
    (stdout, stderr): (File, File),
    timeout: Duration,
    started: impl FnOnce(i32),
) -> Result<Ran, String> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    {
        use std::os::unix::process::CommandExt;
        // Its own process group, so that a timeout kills everything it started.
        cmd.process_group(0);
        // SAFETY: prctl(2) only, which is async-signal-safe: if firstbad dies (kill -9),
        // the shell is killed too instead of running on in a checkout nobody watches.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
    }
    let start = Instant::now();
    let deadline = start + timeout;
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting sh -c {command:?}: {e}"))?;
    let pgid = child.id() as i32;
    started(pgid);
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Err(format!("waiting for the command: {e}")),
        }
        if Instant::now() >= deadline {
            timed_out = true;
            // SAFETY: kill(2) on the process group created above.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
            break child
                .wait()
                .map_err(|e| format!("waiting for the command: {e}"))?;
        }
        // Short runs are common (a `make check` of a small project, a benchmark of a
        // second): poll finely.
        std::thread::sleep(Duration::from_millis(10));
    };
    Ok(Ran {
        status,
        timed_out,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// One file for both of a run's output streams.
pub fn create(path: &Path) -> std::io::Result<(File, File)> {
    let out = File::create(path)?;
    let err = out.try_clone()?;
    Ok((out, err))
}
