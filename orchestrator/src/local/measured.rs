//! Metric command hunts: a command that prints a number, judged by the whole statistics of a
//! kernel hunt (baselines, the sequential test, drift checks, the posterior phase and the
//! confirmation) instead of by its exit status.
//!
//! They are kernel hunts with other parts: the builder checks each candidate out into a tree of
//! its own under `<state_dir>/trees/` and runs `[test] build` there once, and each of the
//! `[test] jobs` runners runs `[test] command` in a built tree as one boot of a kernel: one run,
//! one value ([`crate::metric::read`]), with the repetitions inside the run kept as
//! sub-samples. The trees stay, so that the good endpoint is re-run beside the candidates (the
//! drift checks) without being built again.
//!
//! What a run's end means, as `git bisect run` reads exit statuses where it can:
//! - 0 and a metric in the output: a sample;
//! - 1 to 124, no metric, a metric at or below zero (the statistics compare logarithms), or a
//!   timeout: a failed sample (kept with its output), counted like a failed boot, never a
//!   verdict;
//! - 125: the commit cannot be tested, and is skipped at once;
//! - 126, 127 (the command cannot run) or a signal: the hunt stops for a person, exit 5;
//! - an output larger than firstbad reads (stdout, or `test.output`, past 64 MiB) or a command
//!   Linux refuses for its length: the hunt stops as bad input, exit 2, since every rerun
//!   would meet it again (issue 32, finding 8).

mod runner;
mod trees;

use crate::config::{LocalConfig, MeasureConfig};
use crate::hunt::driver::{hunt_seed, Driver, HuntKind, Plan, Slot};
use crate::hunt::judge::Judge;
use crate::hunt::prelude::{open_hunt, HuntRange, Opened};
use crate::hunt::{HuntError, Outcome};
use runner::Runner;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use trees::TreeBuilder;

/// The largest output file read for a metric: benchmark tools write kilobytes; a runaway log
/// must not take the controller's memory.
const MAX_OUTPUT_BYTES: u64 = crate::metric::MAX_OUTPUT_BYTES;

/// Lines of a failed run's or build's output kept in the journal.
const FAILED_LINES: usize = 5;

/// Runs (or resumes) a metric command hunt to its end, then each further step of a
/// regression of several in stages of the same journal ([`crate::hunt::steps`]).
pub fn run(
    cfg: &LocalConfig,
    m: &MeasureConfig,
    replay: Option<&Path>,
) -> Result<Outcome, HuntError> {
    let range = super::range(cfg)?;
    let (good, bad) = (range.goods[0].clone(), range.bad.clone());
    let mut first = engine(
        cfg,
        m,
        range,
        Stage::of("", &cfg.state_dir),
        m.classify.clone(),
        Limits::default(),
        replay,
    )?;
    let mut plan = first.steps_plan(&good, &bad, m.classify.max_culprits);
    while let Some((n, part)) = plan.next_part() {
        crate::hunt::log_step(n, &part);
        let Some(range) = crate::hunt::part_range(
            &mut plan,
            &part,
            (&cfg.source, &cfg.repo),
            &cfg.paths,
            cfg.first_parent,
        )?
        else {
            continue;
        };
        let stage = crate::hunt::steps::stage(n);
        let outcome = engine(
            cfg,
            m,
            range,
            Stage::of(&stage, &cfg.state_dir),
            m.classify.clone(),
            Limits::default(),
            None,
        )?;
        first.add_step(&mut plan, n, part, outcome);
    }
    let mut first = first.end_steps(plan);
    first.together = revert_together(cfg, m, &first)?;
    Ok(first)
}

/// When the run confirmed two culprits or more, all of them reverted together on top of bad
/// and run in rounds beside good and bad ([`crate::hunt::steps::TOGETHER`]), as a kernel hunt
/// does ([`crate::engine::run`]).
fn revert_together(
    cfg: &LocalConfig,
    m: &MeasureConfig,
    first: &Outcome,
) -> Result<Option<crate::hunt::Reverted>, HuntError> {
    let settings = settings(cfg, m, m.classify.clone());
    let Some(reverting) =
        crate::hunt::steps::together(first, m.classify.revert, &cfg.state_dir, &settings)?
    else {
        return Ok(None);
    };
    let range = HuntRange::pair(&cfg.source, &cfg.repo, &cfg.goods, &cfg.bad)?;
    let stage = Stage {
        name: crate::hunt::steps::TOGETHER,
        dir: &cfg.state_dir,
        reverting: Some(reverting),
    };
    Ok(engine(
        cfg,
        m,
        range,
        stage,
        m.classify.clone(),
        Limits::default(),
        None,
    )?
    .reverted)
}

/// Where one run of the engine journals: a stage of a state directory's journal.
struct Stage<'a> {
    name: &'a str,
    dir: &'a Path,
    /// A revert stage: these culprits reverted together, read with this judge (the first
    /// stage's).
    reverting: Option<(Vec<String>, Judge)>,
}

impl<'a> Stage<'a> {
    fn of(name: &'a str, dir: &'a Path) -> Stage<'a> {
        Stage {
            name,
            dir,
            reverting: None,
        }
    }
}

/// How a metric command hunt judges its runs.
pub fn settings(
    cfg: &LocalConfig,
    m: &MeasureConfig,
    classify: crate::config::ClassifyConfig,
) -> crate::hunt::judge::Settings {
    crate::hunt::judge::Settings {
        classify,
        direction: m.direction,
        metric: m.metric.field.clone(),
        split: cfg.paths.is_empty(),
        probe: Default::default(),
        // A program's builds have no kernel identity.
        same_kernel: false,
    }
}

/// `firstbad reproduce` of a metric command hunt: good and bad run, interleaved, until the
/// baselines confirm the difference or refute it; nothing between them is bisected
/// ([`crate::engine::reproduce`] for kernels).
pub fn reproduce(cfg: &LocalConfig, m: &MeasureConfig) -> Result<Outcome, HuntError> {
    let range = HuntRange::pair(&cfg.source, &cfg.repo, &cfg.goods, &cfg.bad)?;
    let classify = crate::config::ClassifyConfig {
        mode: crate::config::ClassifyMode::Baselines,
        ..m.classify.clone()
    };
    let dir = crate::engine::reproduce_dir(&cfg.state_dir);
    let limits = Limits {
        stop_at_baselines: true,
        ..Limits::default()
    };
    engine(cfg, m, range, Stage::of("", &dir), classify, limits, None)
}

/// A series' night of a benchmark ([`crate::watch`]): good (the reference) and bad (the
/// head) run `runs` times each, interleaved, in `state_dir`'s journal, and judged as
/// baselines; nothing is bisected ([`crate::engine::measure_pair`] for kernels).
pub fn measure_pair(
    cfg: &LocalConfig,
    m: &MeasureConfig,
    state_dir: &Path,
    runs: usize,
) -> Result<Outcome, HuntError> {
    let range = HuntRange::pair(&cfg.source, &cfg.repo, &cfg.goods, &cfg.bad)?;
    let classify = crate::config::ClassifyConfig {
        mode: crate::config::ClassifyMode::Baselines,
        ..m.classify.clone()
    };
    let limits = Limits {
        stop_at_baselines: true,
        pairs: Some(runs),
        budget: None,
    };
    engine(
        cfg,
        m,
        range,
        Stage::of("", state_dir),
        classify,
        limits,
        None,
    )
}

/// A series' automatic hunt of a benchmark's regression: the first stage of
/// [`run`], within `budget` runs ([`crate::engine::run_budgeted`] for kernels).
pub fn run_budgeted(
    cfg: &LocalConfig,
    m: &MeasureConfig,
    budget: usize,
) -> Result<Outcome, HuntError> {
    let range = super::range(cfg)?;
    let limits = Limits {
        budget: Some(budget),
        ..Limits::default()
    };
    let stage = Stage::of("", &cfg.state_dir);
    engine(cfg, m, range, stage, m.classify.clone(), limits, None)
}

/// Where one run of the engine stops short of a bisection's end.
#[derive(Debug, Clone, Copy, Default)]
struct Limits {
    /// Once the baselines are judged (`reproduce`, a series' night).
    stop_at_baselines: bool,
    /// After this many rounds of good and bad, whatever they say (a series' night).
    pairs: Option<usize>,
    /// After this many runs (a series' automatic hunt).
    budget: Option<usize>,
}

/// What a metric command hunt's values mean, besides its two commits: the command, its build,
/// where its number is read, and how it is judged. A series of the same `[test]` compares its
/// nights on this ([`crate::watch::meaning`]).
pub fn measurement_meaning(
    cfg: &LocalConfig,
    m: &MeasureConfig,
) -> std::collections::BTreeMap<String, String> {
    judged_meaning(cfg, m, &m.classify)
}

fn judged_meaning(
    cfg: &LocalConfig,
    m: &MeasureConfig,
    classify: &crate::config::ClassifyConfig,
) -> std::collections::BTreeMap<String, String> {
    let mut meaning = std::collections::BTreeMap::new();
    meaning.insert("test.command".into(), cfg.test.command.clone());
    meaning.insert("test.build".into(), m.build.clone().unwrap_or_default());
    meaning.insert(
        "test.output".into(),
        m.output
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "stdout".into()),
    );
    meaning.insert("test.metric".into(), m.metric_name());
    crate::hunt::judging_meaning(&mut meaning, classify, ("test.direction", m.direction));
    meaning
}

/// Runs the engine on a metric command hunt's `range`, in `state_dir`, to its end.
fn engine(
    cfg: &LocalConfig,
    m: &MeasureConfig,
    range: HuntRange,
    stage: Stage<'_>,
    classify: crate::config::ClassifyConfig,
    limits: Limits,
    replay: Option<&Path>,
) -> Result<Outcome, HuntError> {
    let state_dir = stage.dir;
    let mut meaning = range.meaning();
    meaning.extend(judged_meaning(cfg, m, &classify));
    let mut tuning = crate::hunt::tuning(&classify);
    tuning.insert("test.jobs".into(), cfg.test.jobs.to_string());
    let (_lock, journal, mut state) =
        match open_hunt(state_dir, stage.name, &range, meaning, tuning, replay)? {
            Opened::Ended(outcome) => return Ok(*outcome),
            Opened::Run {
                lock,
                journal,
                state,
            } => (lock, journal, *state),
        };
    let builder = TreeBuilder::new(cfg, m, state_dir)?;
    let k = cfg.test.jobs as usize;
    let runners: Vec<Arc<Runner>> = (0..k)
        .map(|j| {
            Arc::new(Runner {
                name: format!("job{j}"),
                command: cfg.test.command.clone(),
                timeout: Duration::from_secs(cfg.test.timeout_s),
                output: m.output.clone(),
                metric: m.metric.clone(),
            })
        })
        .collect();
    let first_parent = range.first_parents()?;
    let plan = Plan {
        seed: hunt_seed(&range.goods[0], &range.bad),
        good: range.goods[0].clone(),
        bad: range.bad,
        goods: range.goods,
        dag: range.dag,
        settings: settings(cfg, m, classify),
        hosts: runners
            .iter()
            .map(|r| Slot {
                name: r.name.clone(),
                capacity: 1,
            })
            .collect(),
        // A build beside a run shares the machine's cores with what is being timed.
        build_ahead: false,
        first_parent,
        // The revert on top is a commit like any candidate: checked out into a tree of its
        // own, built and run there.
        revert: Some(Box::new(crate::build::revert::reverter(&cfg.repo))),
        reverting: stage.reverting.as_ref().map(|(c, _)| c.clone()),
        // A run costs seconds: each step measures its own ends beside each other, and a
        // machine that moved since an earlier stage cannot bias them (kernel runs, whose
        // boots cost minutes, carry theirs: [`crate::hunt::steps::carry`]).
        carry: Vec::new(),
        kind: HuntKind::Measured,
        stop_at_baselines: limits.stop_at_baselines,
        pairs: limits.pairs,
        budget: limits.budget,
        forecast: crate::hunt::driver::Forecasting::Off,
        forecaster: crate::sim::forecast::forecast,
    };
    let mut driver = match stage.reverting {
        Some((_, judge)) => Driver::judged(plan, judge),
        None => Driver::new(plan),
    }
    .map_err(HuntError::BadInput)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| HuntError::Infrastructure(format!("starting the executor: {e}")))?;
    let end = HuntError::or_interrupted(crate::interrupt::block_on(
        &rt,
        tracing::Instrument::instrument(
            crate::exec::drive(
                &mut driver,
                &mut state,
                &journal,
                &builder,
                &runners,
                &crate::exec::Paths {
                    consoles: state_dir.join("runs"),
                },
            ),
            tracing::info_span!("hunt", name = %cfg.name),
        ),
    ))?;
    crate::hunt::state_dir::confirm_saved(&journal, &end)?;
    Ok(Outcome {
        reverted: state.reverted.clone(),
        ..Outcome::of(end, state.confirmation.clone())
    })
}

/// Where a metric command hunt in `state_dir` checks its candidates out, one tree each.
pub fn trees_dir(state_dir: &Path) -> std::path::PathBuf {
    trees::trees_dir(state_dir)
}

/// The last `n` non-empty lines of a file.
fn last_lines(path: &Path, n: usize) -> Vec<String> {
    let mut lines: Vec<String> = super::tail(path, n + 20)
        .into_iter()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let skip = lines.len().saturating_sub(n);
    lines.drain(..skip);
    lines
}
