//! `firstbad-agent run`: one workload at boot, its result printed on the console, then exit.
//!
//! For LAVA farm devices the orchestrator cannot reach: the workload is baked into the
//! initramfs, and init (`orchestrator/assets/init`) runs this instead of the server when
//! `/etc/firstbad/workload.json` exists, then powers off. The lines on stdout are
//! [`firstbad_wire::oneshot`]'s; logs go to stderr, as in the server.

use crate::{identity, server, workloads, Common};
use anyhow::Context;
use firstbad_wire::{oneshot, Workload, WorkloadResult};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

/// Exit code when the error line was printed (the result line's is 0).
pub const EXIT_ERROR_PRINTED: u8 = 1;
/// Exit code when nothing could be printed on stdout: no usable token, or stdout is gone.
pub const EXIT_NOTHING_PRINTED: u8 = 2;

/// The run directory inside scratch: one run per boot, so it needs no id.
const RUN_DIR: &str = "firstbad-run-oneshot";

/// Command line of `firstbad-agent run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// File holding the workload as JSON, as the orchestrator sends it over HTTP, e.g.
    /// `{"kind": "fsync-latency", "writers": 1, …}`.
    #[arg(long)]
    workload: PathBuf,
    #[command(flatten)]
    common: Common,
}

/// Runs the workload once and prints the identity and the outcome as console lines; the exit
/// code says which outcome was printed. An error means nothing was printed on stdout.
pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let token = args.common.token()?;
    oneshot::check_token(&token)
        .map_err(anyhow::Error::msg)
        .context("the token cannot tag console lines")?;
    let (lines, ok) = match identity::identity() {
        Ok(identity) => {
            let outcome = run_once(args);
            let ok = outcome.is_ok();
            (oneshot::encode(&token, &identity, &outcome), ok)
        }
        Err(e) => {
            // Without an identity no result can be trusted: say why instead of running.
            let why = format!("cannot read this host's identity: {e}");
            tracing::error!(error = %why, "not running the workload");
            (oneshot::encode_result(&token, &Err(why)), false)
        }
    };
    print(&lines).context("cannot print the result on stdout")?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_ERROR_PRINTED)
    })
}

/// Checks and runs the workload as the server would for `POST /v1/runs`; the error is the
/// line's message (logged whole here, since the line may cut it).
fn run_once(args: &RunArgs) -> Result<WorkloadResult, String> {
    let outcome = check_and_run(args);
    match &outcome {
        Ok(result) => tracing::info!(
            kind = result.kind,
            duration_s = result.duration_s,
            "run done"
        ),
        Err(e) => tracing::error!(error = %e, "run failed"),
    }
    outcome
}

fn check_and_run(args: &RunArgs) -> Result<WorkloadResult, String> {
    let workload = read_workload(&args.workload)?;
    let scratch = args.common.scratch().map_err(|e| format!("{e:#}"))?;
    let limits = args.common.limits().map_err(|e| format!("{e:#}"))?;
    if limits.allow_command {
        tracing::warn!("--allow-command: a command workload runs its script");
    }
    workloads::validate(&workload, &limits).and_then(|()| workloads::check_devices(&workload))?;
    workloads::check_room(&workload, &scratch).map_err(|e| match e {
        workloads::NoRoom::Statvfs(m) | workloads::NoRoom::Short(m) => m,
    })?;

    let run_dir = scratch.join(RUN_DIR);
    if run_dir.exists() {
        // Left by an agent that was killed mid-run on a scratch disk that is not fresh.
        tracing::warn!(dir = %run_dir.display(), "removing a run directory left behind");
        std::fs::remove_dir_all(&run_dir)
            .map_err(|e| format!("{}: cannot remove a stale run: {e}", run_dir.display()))?;
    }
    tracing::info!(kind = workload.kind(), budget = ?limits.budget, "run started");
    // Nothing cancels a one-shot run: init waits for it, and LAVA's timeout ends the job.
    let cancel = AtomicBool::new(false);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        workloads::run(&workload, &run_dir, &limits, &cancel)
    }));
    match outcome {
        Ok(Ok(workloads::Outcome::Done(result))) => Ok(result),
        Ok(Ok(workloads::Outcome::Cancelled)) => Err("the run was cancelled".to_owned()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => {
            Err("the workload panicked (a bug in the agent; stderr has the panic)".to_owned())
        }
    }
}

/// The workload in `path`, a JSON [`Workload`]; the error names the file.
///
/// Only a regular file of at most [`server::BODY_LIMIT`] bytes (the bound of the same JSON
/// in a `POST /v1/runs`) is read: `/dev/zero` was read to 545 MB and a FIFO blocked the run
/// for good (issue 32, finding 5). It is opened without waiting (`O_NONBLOCK`: a FIFO
/// without a writer would block the open itself) and its type checked before any read.
fn read_workload(path: &Path) -> Result<Workload, String> {
    let shown = path.display();
    let limit = server::BODY_LIMIT;
    let bytes = read_small_file(path, limit).map_err(|e| match e {
        SmallFileError::TooLarge => format!(
            "--workload {shown}: more than {limit} bytes, the most a workload may have (one is \
             a few hundred bytes of JSON)"
        ),
        SmallFileError::NotRegular(what) => format!(
            "--workload {shown}: {what}, not a regular file: give the file holding the \
             workload's JSON"
        ),
        SmallFileError::Io(e) => format!("--workload {shown}: cannot read: {e}"),
    })?;
    let text = String::from_utf8(bytes)
        .map_err(|e| format!("--workload {shown}: not a workload: not UTF-8 text ({e})"))?;
    serde_json::from_str(&text).map_err(|e| format!("--workload {shown}: not a workload: {e}"))
}

/// Why [`read_small_file`] read nothing.
#[derive(Debug)]
pub(crate) enum SmallFileError {
    /// It is not a regular file: what it is ("a FIFO").
    NotRegular(&'static str),
    /// It holds more than the bound.
    TooLarge,
    /// The system refused.
    Io(std::io::Error),
}

/// The bytes of `path`, a regular file of at most `limit` bytes. It is opened without
/// waiting (`O_NONBLOCK`: a FIFO without a writer would block the open itself) and its type
/// checked before any read; at most `limit + 1` bytes are read (issue 32, finding 5: the
/// workload; issue 61, finding 5: `--token-file /dev/zero` was read until out of memory).
pub(crate) fn read_small_file(path: &Path, limit: usize) -> Result<Vec<u8>, SmallFileError> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(SmallFileError::Io)?;
    let kind = file.metadata().map_err(SmallFileError::Io)?.file_type();
    if !kind.is_file() {
        return Err(SmallFileError::NotRegular(if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a file"
        }));
    }
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(SmallFileError::Io)?;
    if bytes.len() > limit {
        return Err(SmallFileError::TooLarge);
    }
    Ok(bytes)
}

/// Prints `lines` on stdout, flushing after each, so that a console sees whole lines.
fn print(lines: &[String]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    for line in lines {
        writeln!(out, "{line}")?;
        out.flush()?;
    }
    Ok(())
}
