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

/// Why a command was not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The shell could not be started.
    #[error("starting sh -c {command}: {source}")]
    Start {
        /// The command's start, for messages (a command may be 128 KiB long).
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The run could not be waited for.
    #[error("waiting for the command: {0}")]
    Wait(#[source] std::io::Error),
}

impl RunError {
    /// True when the command can never start as it is given, on any commit or host: Linux
    /// refused its length, or the environment's (E2BIG, "Argument list too long"; issue 32,
    /// finding 8).
    pub fn never_runs(&self) -> bool {
        matches!(self, RunError::Start { source, .. } if source.raw_os_error() == Some(libc::E2BIG))
    }

    /// The host error a run ends with: bad input when it can never run (the hunt stops with
    /// exit 2, a rerun would fail the same way), else the host's failure.
    pub fn into_host_error(self) -> crate::error::HostError {
        if self.never_runs() {
            crate::error::HostError::BadInput(format!(
                "{self}: Linux refuses a command (or an environment) this long; put the \
                 command in a script and run the script"
            ))
        } else {
            crate::error::HostError::Missing(self.to_string())
        }
    }
}

/// The first characters of a command and its length, for a message.
fn shown(command: &str) -> String {
    // 60 characters: enough to recognise a command, short enough for one line.
    let start = crate::text::cut(command, 60);
    if start.len() == command.len() {
        format!("{command:?}")
    } else {
        format!("{start:?} ({} bytes)", command.len())
    }
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
) -> Result<Ran, RunError> {
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
    let mut child = cmd.spawn().map_err(|source| RunError::Start {
        command: shown(command),
        source,
    })?;
    let pgid = child.id() as i32;
    started(pgid);
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Err(RunError::Wait(e)),
        }
        // firstbad is stopping (Ctrl-C, SIGTERM, [`crate::interrupt`]): what the command
        // started must not run on in a checkout; its result is not journalled.
        let interrupted = crate::interrupt::requested().is_some();
        if interrupted || Instant::now() >= deadline {
            timed_out = !interrupted;
            // SAFETY: kill(2) on the process group created above.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
            break child.wait().map_err(RunError::Wait)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 32, finding 8: a command Linux refuses for its length is bad input, named by its
    /// start, never a host failure a rerun would meet again.
    #[test]
    fn a_command_too_long_for_exec_never_runs_and_is_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let long = format!("true # {}", "x".repeat(200_000));
        let files = create(&dir.path().join("log")).unwrap();
        let e = run_shell(
            &long,
            dir.path(),
            &[],
            files,
            Duration::from_secs(10),
            |_| {},
        )
        .unwrap_err();
        assert!(e.never_runs(), "{e}");
        let shown = e.to_string();
        assert!(
            shown.len() < 200 && shown.contains("(200007 bytes)"),
            "{shown}"
        );
        let e = e.into_host_error();
        assert!(matches!(e, crate::error::HostError::BadInput(_)), "{e}");
        let stopped = crate::hunt::HuntError::from(e);
        assert_eq!(
            stopped.exit_code(),
            crate::error::exit_code::BAD_INPUT,
            "{stopped}"
        );
        let files = create(&dir.path().join("log")).unwrap();
        let ran = run_shell(
            "exit 3",
            dir.path(),
            &[],
            files,
            Duration::from_secs(10),
            |_| {},
        );
        assert_eq!(ran.unwrap().status.code(), Some(3));
    }
}
