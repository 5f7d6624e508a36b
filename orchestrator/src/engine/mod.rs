//! The composition of a kernel hunt: a hunt file's range, builder and hosts set up, the
//! engine ([`crate::exec::drive`] on the [`crate::hunt::driver`]) run on them, and the
//! variants of a run: the further steps of a regression, `firstbad watch`'s budgeted hunt and
//! nights, `firstbad reproduce`, and `firstbad try`. It sits above the executor, the hosts,
//! the prebuilt kernels and the simulator (whose forecast it hands the driver), so that none
//! of them depends on another's caller (docs/layout.md).

use crate::build::Builder;
use crate::config::Build;
use crate::config::{ClassifyMode, HuntConfig};
use crate::exec::kernel::KernelBuilder;
use crate::hosts::Host;
use crate::hunt::driver::{self, hunt_seed, Driver, Forecasting, HuntKind, Plan, Slot};
use crate::hunt::judge::{Judge, Settings};
use crate::hunt::prelude::{self, record, HuntRange};
use crate::hunt::{
    check_static, find_agent, meaning, short, state_dir, tuning, HuntError, HuntState, Outcome,
};
use crate::journal::{BootOutcome, BuildOutcome, Event, Journal};
use crate::prebuilt;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod build;
pub mod chain;
mod kernels;
mod prune;
mod stages;
use build::build_recorded;
pub use kernels::Kernels;
use stages::further_steps;

/// Runs (or resumes) a hunt to its end.
pub async fn run(cfg: &HuntConfig) -> Result<Outcome, HuntError> {
    run_with(cfg, None, &[], Forecasting::Gate).await
}

/// Runs (or resumes) a hunt, first applying the verdicts of a `git bisect log` (`firstbad run
/// --replay <file>`) so that they are not tested again, and putting the hosts named in
/// `restore` back into the pool (`--restore-host`). `forecast`: what the forecast made once
/// the baselines are in does ([`Forecasting::Gate`] for `firstbad run`, [`Forecasting::Only`]
/// for `firstbad plan`); the later steps of a regression are not forecast.
pub async fn run_with(
    cfg: &HuntConfig,
    replay: Option<&Path>,
    restore: &[String],
    forecast: Forecasting,
) -> Result<Outcome, HuntError> {
    let (range, kernels) = candidates(cfg)?;
    let ends = (range.goods[0].clone(), range.bad.clone());
    let run = Run {
        stage: "",
        state_dir: &cfg.state_dir,
        classify: cfg.classify.clone(),
        stop_at_baselines: false,
        pairs: None,
        budget: None,
        forecast,
        replay,
        restore,
        carried: &[],
        reverting: None,
        carry: Vec::new(),
    };
    let first = engine(cfg, range, &kernels, run).await?;
    if cfg.build.prebuilt().is_none() {
        return further_steps(cfg, first, &ends, restore).await;
    }
    match cfg.build.prebuilt().and_then(|p| p.chain.as_ref()) {
        // Only a confirmed first bad kernel is narrowed: an unconfirmed one may be the wrong
        // pair of kernels to build the source between.
        Some(chain) if first.exit_code == crate::error::exit_code::OK => {
            match chain::source_stage(cfg, chain, &kernels)? {
                Some(source) => chain::run_source(&source, restore).await,
                None => Ok(first),
            }
        }
        _ => Ok(first),
    }
}

/// `firstbad watch`'s automatic hunt: [`run`] that stops once it has spent `budget` boots
/// without an answer ([`HuntError::BudgetSpent`]).
pub async fn run_budgeted(cfg: &HuntConfig, budget: usize) -> Result<Outcome, HuntError> {
    let (range, kernels) = candidates(cfg)?;
    let run = Run {
        stage: "",
        state_dir: &cfg.state_dir,
        classify: cfg.classify.clone(),
        stop_at_baselines: false,
        pairs: None,
        budget: Some(budget),
        // A night's hunt has no person to stop for: its forecast is in its log and report.
        forecast: Forecasting::Advise,
        replay: None,
        restore: &[],
        carried: &[],
        reverting: None,
        carry: Vec::new(),
    };
    engine(cfg, range, &kernels, run).await
}

/// Where `firstbad reproduce` keeps its journal: beside the hunt's, never in it, so that the
/// bisection of the same hunt file starts on its own.
pub fn reproduce_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("reproduce")
}

/// `firstbad reproduce`: boots the hunt's good and bad kernels, interleaved, until the
/// baselines' statistics confirm the difference (exit 0) or refute it (exit 3), and stops
/// there. The two are compared as they are, whether or not one descends from the other, and
/// always in `classify.mode = "baselines"`: both kernels are measured.
pub async fn reproduce(cfg: &HuntConfig) -> Result<Outcome, HuntError> {
    let (range, kernels) = match cfg.build.prebuilt() {
        // The two ends of the list (or the entries good and bad name), as they are.
        Some(_) => {
            let (list, kernels) = candidates(cfg)?;
            let range =
                HuntRange::two(list.goods[0].clone(), list.bad).map_err(HuntError::BadInput)?;
            (range, kernels)
        }
        None => (
            HuntRange::pair(&cfg.source, &cfg.repo, &cfg.goods, &cfg.bad)?,
            Vec::new(),
        ),
    };
    let dir = reproduce_dir(&cfg.state_dir);
    let run = Run {
        stage: "",
        state_dir: &dir,
        classify: crate::config::ClassifyConfig {
            mode: ClassifyMode::Baselines,
            ..cfg.classify.clone()
        },
        stop_at_baselines: true,
        pairs: None,
        budget: None,
        forecast: Forecasting::Off,
        replay: None,
        restore: &[],
        carried: &[],
        reverting: None,
        carry: Vec::new(),
    };
    engine(cfg, range, &kernels, run).await
}

/// `firstbad watch`: one night of a series. Boots `cfg`'s good (the series' reference) and
/// bad (the night's head) `boots` times each, interleaved in seeded pairs, with every boot
/// journalled in `state_dir` (a kill resumes there), and ends with
/// [`HuntEnd::Measured`](crate::journal::HuntEnd::Measured).
/// The two are compared as they are, as `reproduce` compares them.
pub async fn measure_pair(
    cfg: &HuntConfig,
    state_dir: &Path,
    boots: usize,
) -> Result<Outcome, HuntError> {
    let range = HuntRange::pair(&cfg.source, &cfg.repo, &cfg.goods, &cfg.bad)?;
    let run = Run {
        stage: "",
        state_dir,
        classify: crate::config::ClassifyConfig {
            mode: ClassifyMode::Baselines,
            ..cfg.classify.clone()
        },
        stop_at_baselines: true,
        pairs: Some(boots),
        budget: None,
        forecast: Forecasting::Off,
        replay: None,
        restore: &[],
        carried: &[],
        reverting: None,
        carry: Vec::new(),
    };
    engine(cfg, range, &[], run).await
}

/// How one run of the engine on a kernel hunt file differs between `run` and `reproduce`.
pub(super) struct Run<'a> {
    /// The journal's stage ("" but in a chained hunt's source stage).
    pub(super) stage: &'a str,
    pub(super) state_dir: &'a Path,
    pub(super) classify: crate::config::ClassifyConfig,
    pub(super) stop_at_baselines: bool,
    pub(super) pairs: Option<usize>,
    pub(super) budget: Option<usize>,
    pub(super) forecast: Forecasting,
    pub(super) replay: Option<&'a Path>,
    pub(super) restore: &'a [String],
    /// Hosts that left the pool in an earlier stage of the run, with why: out of this one too.
    pub(super) carried: &'a [(String, String)],
    /// A revert stage: these culprits reverted together on top of bad, read with this judge
    /// (the first stage's, [`crate::hunt::steps::together`]).
    pub(super) reverting: Option<(Vec<String>, Judge)>,
    /// A later step's endpoints' boots of earlier stages ([`crate::hunt::steps::carry`]).
    pub(super) carry: Vec<(String, Vec<crate::journal::CarriedBoot>)>,
}

/// Runs the engine on a kernel hunt's `range` to its end.
pub(super) async fn engine(
    cfg: &HuntConfig,
    range: HuntRange,
    kernels: &[prebuilt::Candidate],
    run: Run<'_>,
) -> Result<Outcome, HuntError> {
    let Run {
        stage,
        state_dir,
        classify,
        stop_at_baselines,
        pairs,
        budget,
        forecast,
        replay,
        restore,
        carried,
        reverting,
        carry,
    } = run;
    // The first good is measured as the baseline; the others only bound the range.
    let good = range.goods[0].clone();
    let meaning = meaning(cfg, &classify, &range)?;
    let (_lock, journal, mut state) =
        match prelude::open_hunt(state_dir, stage, &range, meaning, tuning(&classify), replay)? {
            prelude::Opened::Ended(outcome) => return Ok(*outcome),
            prelude::Opened::Run {
                lock,
                journal,
                state,
            } => (lock, journal, *state),
        };
    // Hosts an earlier stage took out stay out, unless put back in this one (`--restore-host`).
    // The journal is read again only then: the first stage carries nothing.
    let restored: Vec<String> = if carried.is_empty() {
        Vec::new()
    } else {
        journal
            .events()?
            .into_iter()
            .filter_map(|e| match e.event {
                Event::HostRestored { host } => Some(host),
                _ => None,
            })
            .collect()
    };
    for (host, reason) in carried {
        if !state.retired.iter().any(|(h, _)| h == host) && !restored.contains(host) {
            tracing::warn!("host {host} stays out of the pool: it left it in an earlier step");
            record(
                &journal,
                &mut state,
                Event::HostRetired {
                    host: host.clone(),
                    reason: reason.clone(),
                },
            )?;
        }
    }
    for name in restore {
        if !cfg.hosts.iter().any(|h| h.name == *name) {
            return Err(HuntError::BadInput(format!(
                "--restore-host {name}: the hunt file has no [[hosts]] named {name:?}"
            )));
        }
        if state.retired.iter().any(|(h, _)| h == name) {
            tracing::info!("host {name} is back in the pool");
            record(
                &journal,
                &mut state,
                Event::HostRestored { host: name.clone() },
            )?;
        }
    }

    let (builder, hosts) = prepare(cfg, state_dir, &state.retired, kernels).await?;
    let mut range = range;
    // A range to bisect (not reproduce's or a night's two kernels): the commits that cannot
    // change the kernel are left out before the first candidate is chosen.
    let bisects = !stop_at_baselines && reverting.is_none() && range.history.is_some();
    if bisects {
        prune::prune_range(cfg, &mut range, &builder, &journal, &mut state).await?;
    }
    let pruned = state.pruned.as_ref().is_some_and(|p| !p.links.is_empty());
    let hosts = crate::hosts::machine::test_hosts(hosts, &cfg.workload);
    let first_parent = first_parent(&range, kernels)?;
    let revert = reverter(cfg, &range);
    let plan = Plan {
        seed: hunt_seed(&good, &range.bad),
        good,
        bad: range.bad,
        goods: range.goods,
        dag: range.dag,
        settings: {
            let s = settings(cfg);
            Settings {
                classify,
                // Pruned commits share a class with the commit they are TREESAME to, as
                // commits outside `paths` do.
                split: s.split && !pruned,
                ..s
            }
        },
        hosts: cfg
            .hosts
            .iter()
            .map(|h| Slot {
                name: h.name.clone(),
                capacity: hosts
                    .iter()
                    .find(|k| k.name() == h.name)
                    .map_or(1, |k| k.capacity()),
            })
            .collect(),
        build_ahead: build_ahead(cfg),
        first_parent,
        revert,
        reverting: reverting.as_ref().map(|(culprits, _)| culprits.clone()),
        carry,
        kind: HuntKind::Measured,
        stop_at_baselines,
        pairs,
        budget,
        forecast,
        forecaster: crate::sim::forecast::forecast,
    };
    let mut driver = match reverting {
        Some((_, judge)) => Driver::judged(plan, judge),
        None => Driver::new(plan),
    }
    .map_err(HuntError::BadInput)?;
    let paths = crate::exec::Paths {
        consoles: state_dir.join("consoles"),
    };
    let end = tracing::Instrument::instrument(
        crate::exec::drive(&mut driver, &mut state, &journal, &builder, &hosts, &paths),
        tracing::info_span!("hunt", name = %cfg.name),
    )
    .await?;
    // Boots an interrupted run left that this run did not take up (a farm's jobs): nobody
    // reads them.
    crate::exec::left_over(&state, &hosts).await;
    state_dir::confirm_saved(&journal, &end)?;
    Ok(Outcome {
        retired: state.retired.clone(),
        reverted: state.reverted.clone(),
        ..Outcome::of(end, state.confirmation.clone())
    })
}

/// A kernel hunt's range: the git range of `hunt.repo`, or a prebuilt hunt's list of kernels
/// as a line (with the kernels, resolved to their ids).
fn candidates(cfg: &HuntConfig) -> Result<(HuntRange, Vec<prebuilt::Candidate>), HuntError> {
    let Some(p) = cfg.build.prebuilt() else {
        let range = HuntRange::load(
            &cfg.source,
            &cfg.repo,
            &cfg.goods,
            &cfg.bad,
            &cfg.paths,
            cfg.first_parent,
        )?;
        return Ok((range, Vec::new()));
    };
    let bad_input = |m: String| HuntError::BadInput(format!("{}: {m}", cfg.source.display()));
    let kernels = prebuilt::resolve(p).map_err(|e| bad_input(e.to_string()))?;
    let (dag, good, bad) = prebuilt::line(&kernels, p).map_err(bad_input)?;
    tracing::info!(
        "prebuilt kernels, oldest first: {}",
        kernels
            .iter()
            .map(|k| k.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok((HuntRange::without_git(dag, good, bad), kernels))
}

/// A candidate's first parent: from git, or the kernel before it in a prebuilt list.
fn first_parent(
    range: &HuntRange,
    kernels: &[prebuilt::Candidate],
) -> Result<driver::FirstParent, HuntError> {
    if range.history.is_some() {
        return range.first_parents();
    }
    let before: BTreeMap<String, String> = kernels
        .windows(2)
        .map(|w| (w[1].id.clone(), w[0].id.clone()))
        .collect();
    Ok(Box::new(move |c| before.get(c).cloned()))
}

/// The revert of a confirmed culprit on top of bad, for a range over git built from source
/// ([`crate::hunt::phases::revert`]); none for prebuilt kernels.
fn reverter(cfg: &HuntConfig, range: &HuntRange) -> Option<driver::Reverter> {
    if range.history.is_none() || cfg.build.prebuilt().is_some() {
        return None;
    }
    Some(Box::new(crate::build::revert::reverter(&cfg.repo)))
}

/// The judging settings of a kernel hunt.
pub fn settings(cfg: &HuntConfig) -> Settings {
    Settings {
        classify: cfg.classify.clone(),
        direction: cfg.workload.direction,
        metric: cfg.workload.metric.clone(),
        split: cfg.paths.is_empty(),
        probe: Default::default(),
        same_kernel: matches!(&cfg.build, Build::Source(b) if b.prune),
    }
}

/// Whether the next candidates build while the hosts boot: when no host is a local qemu VM
/// sharing the builder's cores (a build beside a boot there adds noise to the boot), unless
/// `FIRSTBAD_BUILD_AHEAD` says `on` or `off`.
fn build_ahead(cfg: &HuntConfig) -> bool {
    match std::env::var("FIRSTBAD_BUILD_AHEAD").as_deref() {
        Ok("on") => true,
        Ok("off") => false,
        _ => !cfg
            .hosts
            .iter()
            .any(|h| matches!(h.kind, crate::config::HostKind::Qemu(_))),
    }
}

/// The builder and the test hosts of a hunt, checked and ready.
/// Hosts in `retired` (a resumed hunt's, from the journal) stay out of the pool.
async fn prepare(
    cfg: &HuntConfig,
    state_dir: &Path,
    retired: &[(String, String)],
    kernels: &[prebuilt::Candidate],
) -> Result<(Kernels, Vec<Host>), HuntError> {
    let agent = find_agent()?;
    check_static(&agent).map_err(HuntError::Infrastructure)?;
    let mut hosts = Vec::new();
    for host_cfg in &cfg.hosts {
        if let Some((_, why)) = retired.iter().find(|(h, _)| *h == host_cfg.name) {
            tracing::warn!(
                "host {} stays out of the pool: it left it earlier in this hunt ({why}); once \
                 it is fixed, `firstbad run --restore-host {}` brings it back",
                host_cfg.name,
                host_cfg.name
            );
            continue;
        }
        let host = Host::new(
            host_cfg,
            &agent,
            &state_dir.join("hosts").join(&host_cfg.name),
        );
        host.preflight()?;
        hosts.push(host);
    }
    if hosts.is_empty() {
        return Err(HuntError::Infrastructure(format!(
            "every host of this hunt has left its pool: {}. Fix them, then rerun with \
             `--restore-host NAME` for each",
            retired
                .iter()
                .map(|(h, why)| format!("{h} ({why})"))
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    let b = match &cfg.build {
        Build::Prebuilt(p) => Kernels::Prebuilt(Arc::new(prebuilt::PrebuiltBuilder::new(
            kernels,
            &p.cache_dir,
        ))),
        Build::Source(b) => {
            let (repo, b) = (cfg.repo.clone(), b.clone());
            let builder = tokio::task::spawn_blocking(move || Builder::new(&repo, &b))
                .await
                .expect("builder setup does not panic")?;
            Kernels::Source(KernelBuilder(Arc::new(builder)))
        }
    };
    Ok((b, hosts))
}

/// Builds one revision with the hunt's configuration, boots it once on the hunt's first
/// host and runs the workload: a check of the set-up before a long hunt. Its steps go to a
/// journal of its own (`<state_dir>/try/try.sqlite`), never to the hunt's, and its console
/// to `<state_dir>/try/consoles/`. With `boot` false it stops once the kernel is built and
/// cached (`firstbad try --build-only`: a build cache warmed before a hunt or a test suite).
pub async fn try_revision(
    cfg: &HuntConfig,
    rev: &str,
    boot: bool,
) -> Result<(BuildOutcome, Option<BootOutcome>), HuntError> {
    let (commit, kernels) = match cfg.build.prebuilt() {
        None => {
            let history = crate::history::History::open(&cfg.repo)
                .map_err(|e| HuntError::BadInput(e.to_string()))?;
            let commit = history
                .resolve(rev)
                .map_err(|e| HuntError::BadInput(format!("{rev}: {e}")))?;
            (commit, Vec::new())
        }
        Some(p) => {
            let kernels = prebuilt::resolve(p).map_err(|e| HuntError::BadInput(e.to_string()))?;
            let k = kernels
                .iter()
                .find(|k| k.kernel.entry == rev || k.id == rev)
                .ok_or_else(|| {
                    HuntError::BadInput(format!(
                        "{rev}: not a kernel of build.kernels; one of: {}",
                        kernels
                            .iter()
                            .map(|k| k.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?;
            (k.id.clone(), kernels)
        }
    };
    let (builder, mut hosts) = prepare(cfg, &cfg.state_dir, &[], &kernels).await?;
    let dir = cfg.state_dir.join("try");
    std::fs::create_dir_all(&dir)
        .map_err(|e| HuntError::BadInput(format!("cannot create {}: {e}", dir.display())))?;
    let journal = Journal::open(&dir.join("try.sqlite"))?;
    let mut state = HuntState::default();
    let built = build_recorded(&journal, &mut state, &builder, &commit).await?;
    let BuildOutcome::Built {
        kernel_release,
        image,
        ..
    } = &built
    else {
        return Ok((built, None));
    };
    if !boot {
        return Ok((built, None));
    }
    let test_host =
        crate::hosts::machine::test_hosts(vec![hosts.remove(0)], &cfg.workload).remove(0);
    let host = test_host.name().to_owned();
    let (notes, mut checkpoints) = tokio::sync::mpsc::unbounded_channel();
    let job = crate::exec::BootJob {
        commit: commit.clone(),
        boot: 1,
        image: image.clone(),
        release: kernel_release.clone(),
        // Under try/ with its journal: what `firstbad try` leaves is no hunt's.
        console: dir
            .join("consoles")
            .join(format!("{}-boot1.log", short(&commit))),
        checkpoint: crate::exec::checkpoint::CheckpointLink::new(notes, None),
    };
    let started = Event::BootStarted {
        commit: commit.clone(),
        boot: 1,
        host: host.clone(),
    };
    record(&journal, &mut state, started)?;
    let boot = tracing::Instrument::instrument(
        Arc::clone(&test_host).boot(job),
        tracing::info_span!("boot", commit = short(&commit), boot = 1, host = %host),
    );
    tokio::pin!(boot);
    // A host journals its checkpoints (a farm's job) while the boot runs.
    let boot = loop {
        tokio::select! {
            b = &mut boot => break b?,
            Some(note) = checkpoints.recv() => {
                crate::exec::checkpoint::record_checkpoint(&journal, &mut state, note)?;
            }
        }
    };
    let finished = Event::BootFinished {
        commit,
        boot: 1,
        host,
        outcome: boot.clone(),
    };
    record(&journal, &mut state, finished)?;
    Ok((built, Some(boot)))
}
