//! What a host that runs the workload in a session with its agent (qemu, ssh) does the same
//! way whatever the machine: the boot's token, the waits that a fatal console line cuts
//! short, and the run of the workload watched against the console.

use super::BootFailure;
use crate::agent_client::AgentClient;
use firstbad_wire::{Workload, WorkloadResult};
use std::path::Path;
use std::time::Duration;
use tokio::sync::watch;

/// A fresh token for one boot's agent: 32 hex digits.
pub fn random_token() -> String {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    (0..32)
        .map(|_| format!("{:x}", rng.gen::<u8>() & 0xf))
        .collect()
}

/// Waits `d`, or less when the console reports a fatal line. A console that has closed
/// reports nothing more: the wait is then the whole `d` (issue 30: a loop on a closed
/// console's `changed()` spun without waiting).
pub async fn pause(fatal: &mut watch::Receiver<Option<String>>, d: Duration) {
    let sleep = tokio::time::sleep(d);
    tokio::pin!(sleep);
    tokio::select! {
        _ = &mut sleep => {}
        changed = fatal.changed() => {
            if changed.is_err() {
                sleep.await;
            }
        }
    }
}

/// What a closed console means during the workload.
#[derive(Debug, Clone, Copy)]
pub enum Closed {
    /// The machine is gone (a qemu VM's console is its stdout): the run fails with this.
    Fails(&'static str),
    /// Nothing about the kernel (a console command ended): the run goes on unwatched.
    Ignored,
}

/// Runs `workload` on the agent behind `client`; a fatal console line, a closed console that
/// [`Closed::Fails`], or a timeout makes it a [`BootFailure`] kept with `console`.
pub async fn run_watched(
    client: &AgentClient,
    workload: &Workload,
    timeout: Duration,
    fatal: &mut watch::Receiver<Option<String>>,
    console: &Path,
    closed: Closed,
) -> Result<WorkloadResult, BootFailure> {
    let fail = |reason: String| BootFailure {
        reason,
        console: console.to_owned(),
    };
    let run = client.run(workload, timeout);
    tokio::pin!(run);
    let mut watching = true;
    loop {
        tokio::select! {
            r = &mut run => return r.map_err(|e| fail(format!("workload failed: {e}"))),
            changed = fatal.changed(), if watching => {
                if changed.is_err() {
                    match closed {
                        Closed::Fails(why) => {
                            // Let the console copier drain the last lines.
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            return Err(fail(why.into()));
                        }
                        Closed::Ignored => watching = false,
                    }
                    continue;
                }
                if let Some(line) = fatal.borrow().clone() {
                    return Err(fail(format!("kernel failed during the workload: {line}")));
                }
            }
        }
    }
}
