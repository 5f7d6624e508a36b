//! The executor: does what the driver ([`crate::hunt::driver`]) decides, behind two small
//! traits, a builder and a test host, and feeds each host as soon as it frees.
//!
//! Every step is journalled before it is taken and again when it ends, and applied to the
//! state right after it is journalled ([`crate::hunt::prelude::record`]): the driver reads
//! nothing else. Results are applied in the order they arrive; there is no round barrier.
//! A host error takes that host out of the pool (the boot is a failed one, never a verdict)
//! after transient errors have been retried with backoff; on the last host it stops the
//! hunt once the other running steps are journalled.

pub mod checkpoint;
pub mod kernel;

use crate::build::BuildError;
use crate::error::HostError;
use crate::hunt::driver::{Decision, Driver, Work};
use crate::hunt::prelude::record;
use crate::hunt::{short, HuntError, HuntState};
use crate::journal::{BootOutcome, BuildOutcome, Event, HuntEnd, Recorder, TestOutcome};
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

/// A future the executor runs beside others.
pub type Task<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Builds kernels (or whatever a candidate needs before it is tested), one at a time.
pub trait Builder {
    /// Builds `commit`: a kernel, or a failed build (the candidate's: a skip); `Err` is the
    /// builder's own failure and stops the hunt.
    fn build(&self, commit: &str) -> Task<Result<BuildOutcome, BuildError>>;
}

/// One boot for a host to run.
#[derive(Debug, Clone)]
pub struct BootJob {
    /// The commit.
    pub commit: String,
    /// Its boot number.
    pub boot: u32,
    /// The kernel to boot.
    pub image: PathBuf,
    /// The release the booted kernel must report.
    pub release: String,
    /// Where its console goes.
    pub console: PathBuf,
    /// The boot's way to the journal while it runs, and the checkpoint an earlier run left.
    pub checkpoint: checkpoint::CheckpointLink,
}

/// A test host: boots a kernel and runs the workload.
pub trait TestHost: Send + Sync + 'static {
    /// Its name in the journal.
    fn name(&self) -> &str;
    /// Boots it runs at once (a machine 1, a farm its cap).
    fn capacity(&self) -> usize {
        1
    }
    /// One boot and one run of the workload: the boot's outcome (a failed boot is the
    /// candidate's), or the host's own error.
    fn boot(self: Arc<Self>, job: BootJob) -> Task<Result<BootOutcome, HostError>>;
    /// One run of a command hunt's command on `commit` (a checkout's work); hosts that boot
    /// kernels run no commands.
    fn test(self: Arc<Self>, commit: String) -> Task<Result<TestOutcome, HostError>> {
        let name = self.name().to_owned();
        Box::pin(async move {
            Err(HostError::Missing(format!(
                "host {name} boots kernels and cannot run {}'s test command",
                short(&commit)
            )))
        })
    }
    /// Kills the run of `commit`'s command, if this host is running it (a journalled
    /// `TestCancelled`); its `test` then ends with the kill.
    fn cancel(&self, _commit: &str) {}
    /// The stall counters of the machine this host runs on, when that is the controller's own
    /// (a local VM): read at each boot's start and end, the boot's pressure is journalled
    /// beside it ([`Event::BootPressure`]). Hosts elsewhere have none.
    fn pressure(&self) -> Option<crate::pressure::Snapshot> {
        None
    }
    /// At the end of a hunt: the checkpoints of this host's boots that an interrupted run
    /// left and this run did not take up (a farm cancels the jobs nobody will read).
    fn left_over(self: Arc<Self>, _checkpoints: Vec<checkpoint::Checkpoint>) -> Task<()> {
        Box::pin(async {})
    }
}

/// Hands each host the checkpoints of its boots that the hunt left untaken
/// ([`TestHost::left_over`]).
pub async fn left_over<H: TestHost + ?Sized>(state: &HuntState, hosts: &[Arc<H>]) {
    for h in hosts {
        let mine: Vec<checkpoint::Checkpoint> = state
            .checkpoints
            .values()
            .filter(|c| c.host == h.name())
            .cloned()
            .collect();
        if !mine.is_empty() {
            Arc::clone(h).left_over(mine).await;
        }
    }
}

/// Host errors that may pass: retried this many times, with doubling waits from
/// [`RETRY_FIRST_WAIT`], before the host leaves the pool.
pub const RETRIES: u32 = 2;
/// The first wait before a retry; a qemu that could not start because the machine was short
/// of memory for a moment, or a lab machine's sshd restarting, is back within seconds.
pub const RETRY_FIRST_WAIT: Duration = Duration::from_secs(2);

/// Whether a host error may pass on its own (an I/O error) rather than need a person.
pub fn transient(e: &HostError) -> bool {
    matches!(e, HostError::Io { .. })
}

// One per running step; a boot's outcome is the common case and is not worth a box.
#[allow(clippy::large_enum_variant)]
enum Done {
    Built(String, Result<BuildOutcome, BuildError>),
    Booted(
        BootJob,
        String,
        Result<BootOutcome, HostError>,
        Option<crate::journal::HostPressure>,
    ),
    Tested(String, u32, Result<TestOutcome, HostError>),
}

/// Where the executor puts what a boot leaves behind.
pub struct Paths {
    /// Console logs (`<short>-boot<N>.log`).
    pub consoles: PathBuf,
}

/// Runs the hunt with `driver` until it ends or stops; `state` is the journal's fold so far.
pub async fn drive<B: Builder, H: TestHost + ?Sized, R: Recorder>(
    driver: &mut Driver,
    state: &mut HuntState,
    journal: &R,
    builder: &B,
    hosts: &[Arc<H>],
    paths: &Paths,
) -> Result<HuntEnd, HuntError> {
    let by_name: HashMap<&str, &Arc<H>> = hosts.iter().map(|h| (h.name(), h)).collect();
    // Kernels the journal calls built whose files are gone (someone cleaned the cache): built
    // again before they are booted, rather than a missing file booted.
    let mut stale: HashSet<String> = state
        .builds
        .iter()
        .filter_map(|(c, b)| match b {
            // A kernel image, or the checkout a metric command hunt built in.
            BuildOutcome::Built { image, .. } if !image.exists() => Some(c.clone()),
            _ => None,
        })
        .collect();
    let mut running: FuturesUnordered<Task<Done>> = FuturesUnordered::new();
    // Boots journal their hosts' checkpoints through this, while they run.
    let (notes, mut checkpoints) = tokio::sync::mpsc::unbounded_channel();
    let mut stop: Option<HuntError> = None;
    let mut stopping = false;
    loop {
        if stop.is_some() && !stopping {
            // What runs a command is killed: its result no longer matters (boots are let
            // finish, so that their values are journalled).
            stopping = true;
            cancel_tests(journal, state, hosts)?;
        }
        if stop.is_none() {
            match driver.next(state) {
                Decision::Record(Event::TestCancelled { commit, job }) => {
                    tracing::info!(
                        "cancelling {} on checkout {job}: no longer a candidate",
                        short(&commit)
                    );
                    cancel_test(journal, state, hosts, commit, job)?;
                    continue;
                }
                Decision::Record(event) => {
                    say(&event, state);
                    record(journal, state, event)?;
                    continue;
                }
                Decision::Done(end) => return Ok(end),
                Decision::Stop(why) => stop = Some(HuntError::from(why)),
                Decision::Wait => {}
                Decision::Start(work) => {
                    let mut started = 0;
                    for w in work {
                        if let Work::Test { commit, job } = &w {
                            let (commit, job) = (commit.clone(), *job);
                            let h = Arc::clone(host_of(hosts, job)?);
                            record(
                                journal,
                                state,
                                Event::TestStarted {
                                    commit: commit.clone(),
                                    job,
                                },
                            )?;
                            tracing::info!(
                                "testing {} on checkout {job} ({} candidates left, ~{} steps)",
                                short(&commit),
                                driver.bisection().remaining(),
                                driver.bisection().steps_left()
                            );
                            let span = tracing::info_span!("test", commit = short(&commit), job);
                            let task = h.test(commit.clone());
                            running.push(Box::pin(
                                async move { Done::Tested(commit, job, task.await) }
                                    .instrument(span),
                            ));
                            started += 1;
                            continue;
                        }
                        let commit = match &w {
                            Work::Build(c) | Work::Boot { commit: c, .. } => c.clone(),
                            Work::Test { .. } => unreachable!("tests handled above"),
                        };
                        let rebuild = matches!(w, Work::Boot { .. }) && stale.contains(&commit);
                        if matches!(w, Work::Build(_)) || rebuild {
                            if state.building().is_some() {
                                continue;
                            }
                            stale.remove(&commit);
                            record(
                                journal,
                                state,
                                Event::BuildStarted {
                                    commit: commit.clone(),
                                },
                            )?;
                            tracing::info!("building {}", short(&commit));
                            let span = tracing::info_span!("build", commit = short(&commit));
                            let task = builder.build(&commit);
                            running.push(Box::pin(
                                async move { Done::Built(commit, task.await) }.instrument(span),
                            ));
                            started += 1;
                            continue;
                        }
                        let Work::Boot { host, .. } = w else {
                            unreachable!("builds handled above")
                        };
                        let Some(h) = by_name.get(host.as_str()) else {
                            return Err(HuntError::Infrastructure(format!(
                                "the driver chose host {host}, which this hunt does not have"
                            )));
                        };
                        let Some(BuildOutcome::Built {
                            kernel_release,
                            image,
                            ..
                        }) = state.builds.get(&commit).cloned()
                        else {
                            return Err(HuntError::Infrastructure(format!(
                                "the driver chose to boot {}, which is not built",
                                short(&commit)
                            )));
                        };
                        let boot = state.boot_number_on(&commit, &host);
                        record(
                            journal,
                            state,
                            Event::BootStarted {
                                commit: commit.clone(),
                                boot,
                                host: host.clone(),
                            },
                        )?;
                        tracing::info!("boot {boot} of {} on {host}", short(&commit));
                        let job = BootJob {
                            console: paths
                                .consoles
                                .join(format!("{}-boot{boot}.log", short(&commit))),
                            commit: commit.clone(),
                            boot,
                            image,
                            release: kernel_release,
                            checkpoint: checkpoint::CheckpointLink::new(
                                notes.clone(),
                                state.checkpoints.get(&(commit.clone(), boot)).cloned(),
                            ),
                        };
                        let span = tracing::info_span!("boot", commit = short(&commit), boot, host = %host);
                        let (host_now, before) = (Arc::clone(h), h.pressure());
                        let task = with_retries(Arc::clone(h), job.clone());
                        running.push(Box::pin(
                            async move {
                                let outcome = task.await;
                                let pressure = before
                                    .zip(host_now.pressure())
                                    .and_then(|(b, a)| a.since(&b));
                                Done::Booted(job, host, outcome, pressure)
                            }
                            .instrument(span),
                        ));
                        started += 1;
                    }
                    if started > 0 {
                        continue;
                    }
                }
            }
        }
        let next = tokio::select! {
            done = running.next() => done,
            Some(note) = checkpoints.recv() => {
                checkpoint::record_checkpoint(journal, state, note)?;
                continue;
            }
        };
        let Some(done) = next else {
            return Err(stop.unwrap_or_else(|| {
                HuntError::Infrastructure(
                    "nothing is running and the driver has nothing to start: a bug in \
                     firstbad; rerun resumes"
                        .into(),
                )
            }));
        };
        match done {
            Done::Built(commit, Ok(outcome)) => {
                match &outcome {
                    BuildOutcome::Built {
                        kernel_release,
                        seconds,
                        ..
                    } => tracing::info!("built {kernel_release} in {seconds:.0} s"),
                    failed @ BuildOutcome::Failed { .. } => tracing::warn!(
                        "{} {}",
                        short(&commit),
                        failed.failure().unwrap_or_default()
                    ),
                }
                record(journal, state, Event::BuildFinished { commit, outcome })?;
            }
            Done::Built(_, Err(e)) => {
                stop.get_or_insert(e.into());
            }
            Done::Booted(job, host, Ok(outcome), pressure) => {
                match &outcome {
                    BootOutcome::Measured { value, .. } => tracing::info!(
                        "{} boot {} on {host}: {value:.3}",
                        short(&job.commit),
                        job.boot
                    ),
                    BootOutcome::Failed {
                        reason, console, ..
                    } => tracing::warn!(
                        "{} boot {} on {host} failed: {reason} (console {})",
                        short(&job.commit),
                        job.boot,
                        console.display()
                    ),
                }
                let (commit, boot) = (job.commit, job.boot);
                record(
                    journal,
                    state,
                    Event::BootFinished {
                        commit: commit.clone(),
                        boot,
                        host: host.clone(),
                        outcome,
                    },
                )?;
                if let Some(pressure) = pressure {
                    record(
                        journal,
                        state,
                        Event::BootPressure {
                            commit,
                            boot,
                            host,
                            pressure,
                        },
                    )?;
                }
            }
            Done::Tested(commit, job, Ok(mut outcome)) => {
                // Killed because it no longer mattered: recorded, never judged. (A run that
                // ended by itself just before the kill keeps its verdict.)
                let cancelled = state
                    .running_tests()
                    .any(|(c, j, cancelled)| cancelled && c == commit && j == job);
                if cancelled && outcome.exit_code.is_none() {
                    outcome.cancelled = true;
                    outcome.signal = None;
                }
                record(
                    journal,
                    state,
                    Event::TestFinished {
                        commit,
                        job,
                        outcome,
                    },
                )?;
            }
            Done::Tested(_, _, Err(e @ HostError::BadInput(_))) => {
                // The same on every checkout and commit: the input's fault, no rerun mends it.
                stop.get_or_insert(e.into());
            }
            Done::Tested(commit, job, Err(e)) => {
                // The checkouts share one disk and one repository: what breaks one almost
                // always breaks the others, so the hunt stops (a rerun resumes).
                stop.get_or_insert(HuntError::Infrastructure(format!(
                    "checkout {job} could not test {}: {e}; rerun to resume",
                    short(&commit)
                )));
            }
            Done::Booted(_, _, Err(e @ (HostError::Command(_) | HostError::BadInput(_))), _) => {
                // Every host runs the same command: retiring this one would only meet the
                // same failure on the next. Nothing is journalled for the run; a rerun redoes it.
                stop.get_or_insert(e.into());
            }
            Done::Booted(job, host, Err(e), _) => {
                let left = driver
                    .active_hosts(state)
                    .filter(|h| h.name != host)
                    .count();
                if left == 0 {
                    // The last host: nothing to journal for this boot (it is redone on a
                    // rerun), but the other running steps still are.
                    stop.get_or_insert(e.into());
                    continue;
                }
                let reason = e.to_string();
                tracing::error!(
                    "host {host} leaves the pool: {reason}; the hunt goes on with the other {left}"
                );
                record(
                    journal,
                    state,
                    Event::HostRetired {
                        host: host.clone(),
                        reason: reason.clone(),
                    },
                )?;
                record(
                    journal,
                    state,
                    Event::BootFinished {
                        commit: job.commit,
                        boot: job.boot,
                        host: host.clone(),
                        outcome: BootOutcome::Failed {
                            reason: format!("host {host} left the pool: {reason}"),
                            console: job.console,
                            untestable: false,
                        },
                    },
                )?;
            }
        }
    }
}

/// The host (a checkout) of a command hunt's job.
fn host_of<H: ?Sized>(hosts: &[Arc<H>], job: u32) -> Result<&Arc<H>, HuntError> {
    hosts.get(job as usize).ok_or_else(|| {
        HuntError::Infrastructure(format!(
            "the driver chose checkout {job}, which this hunt does not have"
        ))
    })
}

/// Journals the kill of every command still running, and kills them.
fn cancel_tests<H: TestHost + ?Sized, R: Recorder>(
    journal: &R,
    state: &mut HuntState,
    hosts: &[Arc<H>],
) -> Result<(), HuntError> {
    let live: Vec<(String, u32)> = state
        .running_tests()
        .filter(|(_, _, cancelled)| !cancelled)
        .map(|(c, j, _)| (c.to_owned(), j))
        .collect();
    for (commit, job) in live {
        cancel_test(journal, state, hosts, commit, job)?;
    }
    Ok(())
}

/// Journals the kill of the run of `commit` on checkout `job`, then kills it.
fn cancel_test<H: TestHost + ?Sized, R: Recorder>(
    journal: &R,
    state: &mut HuntState,
    hosts: &[Arc<H>],
    commit: String,
    job: u32,
) -> Result<(), HuntError> {
    let host = host_of(hosts, job)?;
    record(
        journal,
        state,
        Event::TestCancelled {
            commit: commit.clone(),
            job,
        },
    )?;
    host.cancel(&commit);
    Ok(())
}

/// A boot on `host`, retried after a transient host error ([`RETRIES`], doubling waits).
fn with_retries<H: TestHost + ?Sized>(
    host: Arc<H>,
    job: BootJob,
) -> Task<Result<BootOutcome, HostError>> {
    Box::pin(async move {
        let mut wait = RETRY_FIRST_WAIT;
        let mut attempt = 0;
        loop {
            match Arc::clone(&host).boot(job.clone()).await {
                Err(e) if transient(&e) && attempt < RETRIES => {
                    tracing::warn!(
                        "host {}: {e}; retrying in {} s",
                        host.name(),
                        wait.as_secs()
                    );
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                    attempt += 1;
                }
                other => return other,
            }
        }
    })
}

/// Says in the log what a decision is, as it is journalled.
fn say(event: &Event, state: &HuntState) {
    match event {
        Event::Verdict {
            commit,
            verdict,
            reason,
        } => tracing::info!("{} is {}: {reason}", short(commit), verdict.as_str()),
        Event::BootsCarried { commit, boots } => tracing::info!(
            "{}: {} boot(s) measured earlier in the run taken into this step's baselines",
            short(commit),
            boots.len()
        ),
        Event::BaselinesConfirmed { summary, .. } => tracing::info!("baselines: {summary}"),
        Event::Forecast(f) => {
            for line in f.lines() {
                tracing::info!("forecast: {line}");
            }
        }
        Event::DriftCheck {
            drifted: false,
            summary,
            ..
        } => tracing::info!("no drift: {summary}"),
        Event::DriftCheck { summary, .. } => tracing::error!("drift: {summary}"),
        Event::ConfirmStarted { commit, parent } => tracing::info!(
            "re-testing {} against its parent {} ({} boots so far)",
            short(commit),
            short(parent),
            state.total_boots()
        ),
        Event::Confirmation {
            confirmed: true,
            summary,
            ..
        } => tracing::info!("culprit confirmed: {summary}"),
        Event::Confirmation { summary, .. } => tracing::warn!("culprit NOT confirmed: {summary}"),
        Event::RevertStarted {
            commit,
            with,
            onto,
            made,
        } => {
            let culprits: Vec<String> = std::iter::once(commit).chain(with).cloned().collect();
            let said = made.describe(&crate::hunt::shorts(&culprits), short(onto));
            match made {
                crate::build::revert::RevertMade::Applied { .. } => {
                    tracing::info!("reverting on top: {said}; booting it beside good and bad")
                }
                _ => tracing::warn!("reverting on top: {said}"),
            }
        }
        Event::Reverted { summary, .. } => tracing::info!("reverted on top: {summary}"),
        Event::HostRetired { host, reason } => {
            tracing::error!("host {host} leaves the pool: {reason}")
        }
        _ => {}
    }
}
