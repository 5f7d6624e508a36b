//! The console of one boot on an ssh host: the configured local command, copied to the boot's
//! console log and scanned for the first line that fails the boot.

use crate::hosts::HostError;
use std::path::Path;
use std::process::Stdio;
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

/// Starts the console command (if any), copying its output to `log` and reporting the first
/// line that fails the boot.
pub(super) async fn start_console(
    cmd: Option<&str>,
    log: &Path,
) -> Result<
    (
        Option<tokio::process::Child>,
        watch::Receiver<Option<String>>,
    ),
    HostError,
> {
    let (tx, rx) = watch::channel(None);
    let mut file = tokio::fs::File::create(log)
        .await
        .map_err(super::io(format!("creating {}", log.display())))?;
    let Some(cmd) = cmd else {
        let _ = file
            .write_all(b"[firstbad] no console command configured (hosts.console)\n")
            .await;
        // No console: the sender is dropped, and a closed console means nothing on this host
        // (`session::Closed::Ignored`).
        drop(tx);
        return Ok((None, rx));
    };
    let mut c = tokio::process::Command::new("sh");
    c.args(["-c", cmd])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // SAFETY: prctl in the child before exec; async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = c
        .spawn()
        .map_err(super::io(format!("starting the console command `{cmd}`")))?;
    let out = child.stdout.take().expect("stdout is piped");
    let err = child.stderr.take().expect("stderr is piped");
    tokio::spawn(async move {
        // The console command ended: the sender is dropped, which is not a failed kernel
        // (`session::Closed::Ignored`).
        drop(crate::hosts::copy_console(out, err, "console command", file, tx).await);
    });
    Ok((Some(child), rx))
}
