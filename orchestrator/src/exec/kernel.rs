//! The executor's parts for kernel hunts: the kernel builder and the qemu and ssh hosts
//! behind [`super::Builder`] and [`super::TestHost`].

use super::{BootJob, Task};
use crate::build::BuildError;
use crate::config::WorkloadConfig;
use crate::hosts::{Host, HostError};
use crate::journal::{BootOutcome, BuildOutcome};
use std::sync::Arc;
use std::time::Duration;

/// The kernel builder (one build directory per config and toolchain), off the async threads.
pub struct KernelBuilder(pub Arc<crate::build::Builder>);

impl super::Builder for KernelBuilder {
    fn build(&self, commit: &str) -> Task<Result<BuildOutcome, BuildError>> {
        let (b, c) = (Arc::clone(&self.0), commit.to_owned());
        let log = self.0.log_path(commit);
        Box::pin(async move {
            let build = tokio::task::spawn_blocking(move || b.build(&c));
            tokio::pin!(build);
            // Make's progress, read back from its log, on the build's status line.
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    done = &mut build => return done.expect("a build does not panic"),
                    _ = tick.tick() => {
                        if let Some(progress) = make_progress(&log) {
                            status(&progress);
                        }
                    }
                }
            }
        })
    }
}

/// The builder of a kernel hunt: from source, or a prebuilt hunt's fetch-and-unpack.
pub enum Kernels {
    /// `[build] kind = "source"`.
    Source(KernelBuilder),
    /// `[build] kind = "prebuilt"`.
    Prebuilt(Arc<crate::prebuilt::PrebuiltBuilder>),
}

impl super::Builder for Kernels {
    fn build(&self, commit: &str) -> Task<Result<BuildOutcome, BuildError>> {
        match self {
            Kernels::Source(b) => b.build(commit),
            Kernels::Prebuilt(b) => b.build(commit),
        }
    }
}

/// Sets the running step's status line (the span's message on a terminal).
pub fn status(message: &str) {
    use tracing_indicatif::span_ext::IndicatifSpanExt;
    tracing::Span::current().pb_set_message(message);
}

/// How far a kernel build is, from its log: the targets make has reported (`CC`, `LD`, `AR`,
/// ...) and the last of them, e.g. `412 targets, CC fs/ext4/fsync.o`.
pub fn make_progress(log: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let is_target = |l: &&str| {
        let mut w = l.split_whitespace();
        matches!(
            w.next(),
            Some("CC" | "LD" | "AR" | "AS" | "CC [M]" | "HOSTCC" | "GEN" | "OBJCOPY" | "BUILD")
        ) && w.next().is_some()
    };
    let targets: Vec<&str> = text.lines().filter(is_target).collect();
    let last = targets
        .last()?
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    Some(format!("{} targets, {last}", targets.len()))
}

/// A qemu or ssh host running the hunt's workload.
pub struct KernelHost {
    name: String,
    host: tokio::sync::Mutex<Host>,
    workload: WorkloadConfig,
    /// Seconds added to every boot: a slow host, for measurements of the pool (set from
    /// `FIRSTBAD_TEST_SLOW_HOSTS=name:seconds,...`; tests and benchmarks only).
    delay: Duration,
    /// Boots at once.
    capacity: usize,
    /// The farm, when the host is one.
    farm: Option<Arc<crate::hosts::lava::LavaHost>>,
}

impl KernelHost {
    /// Wraps `host` for the executor.
    pub fn new(host: Host, workload: &WorkloadConfig) -> KernelHost {
        let name = host.name().to_owned();
        let delay = std::env::var("FIRSTBAD_TEST_SLOW_HOSTS")
            .ok()
            .and_then(|v| {
                v.split(',').find_map(|kv| {
                    let (n, s) = kv.split_once(':')?;
                    (n == name).then(|| s.parse::<u64>().ok()).flatten()
                })
            })
            .map_or(Duration::ZERO, Duration::from_secs);
        KernelHost {
            name,
            capacity: host.capacity(),
            farm: host.farm().cloned(),
            host: tokio::sync::Mutex::new(host),
            workload: workload.clone(),
            delay,
        }
    }
}

impl KernelHost {
    /// The farm, when the host is one.
    pub fn farm(&self) -> Option<&Arc<crate::hosts::lava::LavaHost>> {
        self.farm.as_ref()
    }
}

impl super::TestHost for KernelHost {
    fn name(&self) -> &str {
        &self.name
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn boot(self: Arc<Self>, job: BootJob) -> Task<Result<BootOutcome, HostError>> {
        Box::pin(async move {
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            if let Some(farm) = &self.farm {
                // A farm runs several boots at once: no lock.
                status("submitting");
                return farm_boot(farm, &job, &self.workload).await;
            }
            let mut host = self.host.lock().await;
            status("booting");
            boot_and_measure(&mut host, &job, &self.workload).await
        })
    }
}

/// One boot of a built kernel as a farm job, the workload run once by the agent at boot.
pub async fn farm_boot(
    farm: &crate::hosts::lava::LavaHost,
    job: &BootJob,
    workload: &WorkloadConfig,
) -> Result<BootOutcome, HostError> {
    farm.boot(crate::hosts::lava::FarmBoot {
        commit: &job.commit,
        boot: job.boot,
        image: &job.image,
        release: &job.release,
        console: &job.console,
        workload: &workload.workload,
        metric: &workload.metric,
        workload_timeout_s: workload.timeout_s,
        link: &job.farm,
    })
    .await
}

/// One boot of a built kernel on `host` and one run of the workload: the boot's outcome (a
/// failed boot is the candidate's), or the host's own error.
pub async fn boot_and_measure(
    host: &mut Host,
    job: &BootJob,
    workload: &WorkloadConfig,
) -> Result<BootOutcome, HostError> {
    if let Some(farm) = host.farm() {
        return farm_boot(farm, job, workload).await;
    }
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
        Ok(result) => match result.metrics.get(&workload.metric) {
            Some(&value) if value.is_finite() => BootOutcome::Measured {
                kernel_release: identity.kernel_release,
                boot_id: identity.boot_id,
                value,
                result,
                console: console.to_owned(),
                boot_seconds,
            },
            // A metric the agent could not compute is a failed boot that says why, never
            // a value (issue 19, finding 4).
            _ => BootOutcome::Failed {
                reason: match result.unavailable.get(&workload.metric) {
                    Some(why) => format!("the workload could not give {}: {why}", workload.metric),
                    None => format!("the workload reported no {} metric", workload.metric),
                },
                console: console.to_owned(),
                untestable: false,
            },
        },
    })
}
