//! A test host that boots one kernel at a time and runs the workload in a session with its
//! agent (a qemu VM, a machine over SSH): the adapter that puts such a host behind
//! [`TestHost`], and the pool's test hosts made from the hunt file's ([`test_hosts`]).

use super::{Host, HostError};
use crate::config::WorkloadConfig;
use crate::exec::kernel::status;
use crate::exec::{BootJob, Task, TestHost};
use crate::journal::BootOutcome;
use std::sync::Arc;
use std::time::Duration;

/// Seconds added to every boot of host `name`: a slow host, for measurements of the pool (set
/// from `FIRSTBAD_TEST_SLOW_HOSTS=name:seconds,...`; tests and benchmarks only).
pub fn test_delay(name: &str) -> Duration {
    std::env::var("FIRSTBAD_TEST_SLOW_HOSTS")
        .ok()
        .and_then(|v| {
            v.split(',').find_map(|kv| {
                let (n, s) = kv.split_once(':')?;
                (n == name).then(|| s.parse::<u64>().ok()).flatten()
            })
        })
        .map_or(Duration::ZERO, Duration::from_secs)
}

/// The executor's test hosts for the hunt file's `hosts` running `workload`: a farm as itself
/// ([`super::lava::Farm`]), a machine behind a [`Machine`].
pub fn test_hosts(hosts: Vec<Host>, workload: &WorkloadConfig) -> Vec<Arc<dyn TestHost>> {
    hosts
        .into_iter()
        .map(|h| -> Arc<dyn TestHost> {
            match h {
                Host::Lava(farm) => Arc::new(super::lava::Farm::new(farm, workload)),
                machine => Arc::new(Machine::new(machine, workload)),
            }
        })
        .collect()
}

/// A qemu or ssh host running the hunt's workload, one boot at a time.
pub struct Machine {
    name: String,
    host: tokio::sync::Mutex<Host>,
    workload: WorkloadConfig,
    /// [`test_delay`].
    delay: Duration,
    /// A VM on this machine (whose pressure is this machine's), not one reached over SSH.
    local: bool,
}

impl Machine {
    /// Wraps `host` for the executor.
    pub fn new(host: Host, workload: &WorkloadConfig) -> Machine {
        let name = host.name().to_owned();
        Machine {
            local: matches!(host, Host::Qemu(_)),
            delay: test_delay(&name),
            name,
            host: tokio::sync::Mutex::new(host),
            workload: workload.clone(),
        }
    }
}

impl TestHost for Machine {
    fn name(&self) -> &str {
        &self.name
    }

    fn pressure(&self) -> Option<crate::pressure::Snapshot> {
        // A qemu VM runs on this machine: its neighbours are this machine's.
        self.local.then(crate::pressure::Snapshot::now)
    }

    fn boot(self: Arc<Self>, job: BootJob) -> Task<Result<BootOutcome, HostError>> {
        Box::pin(async move {
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            let mut host = self.host.lock().await;
            status("booting");
            boot_and_measure(&mut host, &job, &self.workload).await
        })
    }
}

/// One boot of a built kernel on a session host and one run of the workload: the boot's
/// outcome (a failed boot is the candidate's), or the host's own error.
async fn boot_and_measure(
    host: &mut Host,
    job: &BootJob,
    workload: &WorkloadConfig,
) -> Result<BootOutcome, HostError> {
    let console = job.console.as_path();
    let mut session = match host.boot(&job.image, &job.release, console).await {
        Ok(session) => session,
        Err(Err(host_error)) => return Err(host_error),
        Err(Ok(failure)) => {
            return Ok(BootOutcome::Failed {
                reason: failure.reason,
                console: failure.console,
                untestable: false,
            })
        }
    };
    // The agent speaks the wire types of one protocol version: another one's results cannot
    // be read as ours (issue 18: documented as checked, and it was not).
    let protocol = session.identity().protocol;
    if protocol != firstbad_wire::PROTOCOL_VERSION {
        session.shutdown().await;
        return Err(HostError::Agent {
            host: host.name().to_owned(),
            why: format!(
                "its agent speaks protocol {protocol}, this firstbad {}: rebuild the agent \
                 (scripts/build-agent) or firstbad from the same source",
                firstbad_wire::PROTOCOL_VERSION
            ),
        });
    }
    status(&format!(
        "{} up in {:.0} s; running the workload",
        session.identity().kernel_release,
        session.boot_seconds()
    ));
    let r = session
        .run(&workload.workload, Duration::from_secs(workload.timeout_s))
        .await;
    let (identity, boot_seconds) = (session.identity().clone(), session.boot_seconds());
    session.shutdown().await;
    Ok(match r {
        Err(failure) => BootOutcome::Failed {
            reason: failure.reason,
            console: failure.console,
            untestable: false,
        },
        Ok(result) => match super::metric_value(&result, &workload.metric) {
            Ok(value) => BootOutcome::Measured {
                kernel_release: identity.kernel_release,
                boot_id: identity.boot_id,
                value,
                result,
                console: console.to_owned(),
                boot_seconds,
            },
            Err(reason) => BootOutcome::Failed {
                reason,
                console: console.to_owned(),
                untestable: false,
            },
        },
    })
}
