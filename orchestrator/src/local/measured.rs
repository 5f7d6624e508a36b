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

use super::process;
use crate::build::checkout_detached;
use crate::config::{LocalConfig, MeasureConfig};
use crate::exec::{BootJob, Builder, Task, TestHost};
use crate::hosts::HostError;
use crate::hunt::driver::{hunt_seed, Driver, HuntKind, Plan, Slot};
use crate::hunt::judge::Judge;
use crate::hunt::prelude::{content_hash, open_hunt, HuntRange, Opened};
use crate::hunt::{short, HuntError, Outcome};
use crate::journal::{BootOutcome, BuildOutcome};
use crate::metric::MetricSpec;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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
    let range = HuntRange::load(
        &cfg.source,
        &cfg.repo,
        &cfg.goods,
        &cfg.bad,
        &cfg.paths,
        cfg.first_parent,
    )?;
    let (good, bad) = (range.goods[0].clone(), range.bad.clone());
    let mut first = engine(
        cfg,
        m,
        range,
        Stage::of("", &cfg.state_dir),
        m.classify.clone(),
        false,
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
            false,
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
/// does ([`crate::hunt::run`]).
fn revert_together(
    cfg: &LocalConfig,
    m: &MeasureConfig,
    first: &Outcome,
) -> Result<Option<crate::hunt::Reverted>, HuntError> {
    let culprits = first.confirmed_culprits();
    if culprits.len() < 2 || !m.classify.revert {
        return Ok(None);
    }
    let settings = settings(cfg, m, m.classify.clone());
    let Some(judge) = crate::hunt::steps::first_judge(&cfg.state_dir, &settings)? else {
        return Ok(None);
    };
    tracing::info!(
        "{} culprits confirmed: reverting them together on top of bad",
        culprits.len()
    );
    let range = HuntRange::pair(&cfg.source, &cfg.repo, &cfg.goods, &cfg.bad)?;
    let stage = Stage {
        name: crate::hunt::steps::TOGETHER,
        dir: &cfg.state_dir,
        reverting: Some((culprits, judge)),
    };
    Ok(engine(cfg, m, range, stage, m.classify.clone(), false, None)?.reverted)
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
fn settings(
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
/// ([`crate::hunt::reproduce`] for kernels).
pub fn reproduce(cfg: &LocalConfig, m: &MeasureConfig) -> Result<Outcome, HuntError> {
    let range = HuntRange::pair(&cfg.source, &cfg.repo, &cfg.goods, &cfg.bad)?;
    let classify = crate::config::ClassifyConfig {
        mode: crate::config::ClassifyMode::Baselines,
        ..m.classify.clone()
    };
    let dir = crate::hunt::reproduce_dir(&cfg.state_dir);
    engine(cfg, m, range, Stage::of("", &dir), classify, true, None)
}

/// Runs the engine on a metric command hunt's `range`, in `state_dir`, to its end.
fn engine(
    cfg: &LocalConfig,
    m: &MeasureConfig,
    range: HuntRange,
    stage: Stage<'_>,
    classify: crate::config::ClassifyConfig,
    stop_at_baselines: bool,
    replay: Option<&Path>,
) -> Result<Outcome, HuntError> {
    let state_dir = stage.dir;
    let mut meaning = range.meaning();
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
    crate::hunt::judging_meaning(&mut meaning, &classify, ("test.direction", m.direction));
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
        kind: HuntKind::Measured,
        stop_at_baselines,
        pairs: None,
        budget: None,
        forecast: crate::hunt::driver::Forecasting::Off,
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

/// Checks each candidate out into a tree of its own and builds it there (shared with the
/// blocking thread of each build).
struct TreeBuilder(Arc<Trees>);

/// Where the trees and build logs live, and the build.
struct Trees {
    repo: PathBuf,
    trees: PathBuf,
    logs: PathBuf,
    /// Keys the worktrees' names (global to the repository) by the state directory.
    key: String,
    /// The repository's `.git/worktrees/`.
    worktrees: PathBuf,
    build: Option<String>,
    timeout: Duration,
}

impl TreeBuilder {
    fn new(
        cfg: &LocalConfig,
        m: &MeasureConfig,
        state_dir: &Path,
    ) -> Result<TreeBuilder, HuntError> {
        let repo = std::fs::canonicalize(&cfg.repo)
            .map_err(|e| HuntError::BadInput(format!("hunt.repo {}: {e}", cfg.repo.display())))?;
        let state_dir = std::fs::canonicalize(state_dir)
            .map_err(|e| HuntError::BadInput(format!("state dir {}: {e}", state_dir.display())))?;
        for dir in ["trees", "builds", "runs"] {
            std::fs::create_dir_all(state_dir.join(dir)).map_err(|e| {
                HuntError::Infrastructure(format!(
                    "cannot create {}/{dir}: {e}",
                    state_dir.display()
                ))
            })?;
        }
        let worktrees = git2::Repository::open(&repo)
            .map_err(|e| HuntError::BadInput(format!("hunt.repo {}: {e}", repo.display())))?
            .path()
            .join("worktrees");
        Ok(TreeBuilder(Arc::new(Trees {
            repo,
            worktrees,
            trees: state_dir.join("trees"),
            logs: state_dir.join("builds"),
            key: content_hash(state_dir.to_string_lossy().as_bytes()),
            build: m.build.clone(),
            timeout: Duration::from_secs(m.build_timeout_s),
        })))
    }
}

impl Trees {
    /// Checks `commit` out into its tree and runs the build there.
    fn build_blocking(&self, commit: &str) -> Result<BuildOutcome, crate::build::BuildError> {
        let tree = self.trees.join(short(commit));
        let name = format!("firstbad-tree-{}-{}", self.key, short(commit));
        // A build killed with firstbad (kill -9) leaves the worktree's index locked; the state
        // directory's lock makes this run its only user.
        let stale = self.worktrees.join(&name).join("index.lock");
        if stale.exists() {
            let _ = std::fs::remove_file(&stale);
        }
        checkout_detached(&self.repo, &tree, &name, commit)?;
        let log = self.logs.join(format!("{}.log", short(commit)));
        let Some(build) = &self.build else {
            std::fs::write(&log, "no [test] build: the checkout is the build\n").map_err(|e| {
                crate::build::BuildError::Io {
                    what: format!("writing {}", log.display()),
                    source: e,
                }
            })?;
            return Ok(built(commit, tree, log, 0.0));
        };
        let files = process::create(&log).map_err(|source| crate::build::BuildError::Io {
            what: format!("creating {}", log.display()),
            source,
        })?;
        let ran = match process::run_shell(
            build,
            &tree,
            &[("FIRSTBAD_COMMIT", commit)],
            files,
            self.timeout,
            |_| {},
        ) {
            Ok(ran) => ran,
            // The same on every commit: the input's fault, not this candidate's (issue 32,
            // finding 8).
            Err(e) if e.never_runs() => {
                return Err(crate::build::BuildError::BadInput(format!(
                    "[test] build: {e}: Linux refuses a command (or an environment) this long; \
                     put the build in a script and run the script"
                )))
            }
            Err(e) => {
                return Ok(BuildOutcome::Failed {
                    log,
                    error_lines: vec![e.to_string()],
                })
            }
        };
        if ran.status.success() && !ran.timed_out {
            return Ok(built(commit, tree, log, ran.seconds));
        }
        let how = if ran.timed_out {
            format!("timed out after {} s", self.timeout.as_secs())
        } else {
            ran.status.to_string()
        };
        // The first line is what a verdict quotes: how it ended and the build's last word.
        let mut said = last_lines(&log, FAILED_LINES);
        let mut error_lines = vec![match said.pop() {
            Some(last) => format!("{how}: {last}"),
            None => how,
        }];
        error_lines.extend(said);
        Ok(BuildOutcome::Failed { log, error_lines })
    }
}

/// A built tree: its "release" is the commit the tree must hold when a run starts.
fn built(commit: &str, tree: PathBuf, log: PathBuf, seconds: f64) -> BuildOutcome {
    BuildOutcome::Built {
        kernel_release: commit.to_owned(),
        image: tree,
        log,
        seconds,
        kernel_id: None,
    }
}

impl Builder for TreeBuilder {
    fn build(&self, commit: &str) -> Task<Result<BuildOutcome, crate::build::BuildError>> {
        let trees = Arc::clone(&self.0);
        let commit = commit.to_owned();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || trees.build_blocking(&commit))
                .await
                .unwrap_or_else(|e| {
                    Err(crate::build::BuildError::Io {
                        what: "the build's thread".into(),
                        source: std::io::Error::other(e.to_string()),
                    })
                })
        })
    }
}

/// One runner: runs the command in a built tree, one sample at a time.
struct Runner {
    name: String,
    command: String,
    timeout: Duration,
    output: Option<PathBuf>,
    metric: MetricSpec,
}

impl TestHost for Runner {
    fn name(&self) -> &str {
        &self.name
    }

    fn boot(self: Arc<Self>, job: BootJob) -> Task<Result<BootOutcome, HostError>> {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || self.sample(&job))
                .await
                .unwrap_or_else(|e| Err(HostError::Missing(format!("the run's thread: {e}"))))
        })
    }
}

impl Runner {
    /// One run of the command on `job`'s tree: a sample, a failed sample, or the hunt's end.
    fn sample(&self, job: &BootJob) -> Result<BootOutcome, HostError> {
        let tree = &job.image;
        let failed = |reason: String| BootOutcome::Failed {
            reason,
            console: job.console.clone(),
            untestable: false,
        };
        // Never a sample of another commit: the tree must hold the commit it was built for.
        match head_of(tree) {
            Ok(head) if head == job.release => {}
            Ok(head) => {
                return Ok(failed(format!(
                    "the tree {} holds {}, not {}",
                    tree.display(),
                    short(&head),
                    short(&job.release)
                )))
            }
            Err(e) => return Ok(failed(format!("the tree {}: {e}", tree.display()))),
        }
        let io = |what: String| move |source| HostError::Io { what, source };
        if let Some(dir) = job.console.parent() {
            std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        }
        // One run in a tree at a time: with `jobs` > 1 two runners may sample one commit, and
        // the second would read (or delete) the first's result file. Held until this returns.
        let lock_path = tree.with_extension("run.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io(format!("opening {}", lock_path.display())))?;
        {
            use std::os::unix::io::AsRawFd;
            // SAFETY: flock(2) on a descriptor this function owns; blocking is this thread's.
            if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
                return Err(io(format!("locking {}", lock_path.display()))(
                    std::io::Error::last_os_error(),
                ));
            }
        }
        // A result file left by the previous run must not be read as this run's. Removed
        // inside the checkout only: through a directory that is a link it would be someone
        // else's file (issue 32, finding 2).
        if let Some(rel) = &self.output {
            if let Err(e) = crate::files::remove_inside(tree, rel) {
                return Ok(failed(format!(
                    "cannot remove the last run's {}: {e}",
                    rel.display()
                )));
            }
        }
        let stdout_path = job.console.with_extension("stdout");
        let stdout = std::fs::File::create(&stdout_path)
            .map_err(io(format!("creating {}", stdout_path.display())))?;
        let stderr = std::fs::File::create(&job.console)
            .map_err(io(format!("creating {}", job.console.display())))?;
        let run = job.boot.to_string();
        let ran = process::run_shell(
            &self.command,
            tree,
            &[
                ("FIRSTBAD_COMMIT", job.release.as_str()),
                ("FIRSTBAD_RUN", &run),
            ],
            (stdout, stderr),
            self.timeout,
            |_| {},
        )
        .map_err(process::RunError::into_host_error)?;
        let said = || {
            let mut l = last_lines(&job.console, 1);
            l.pop().map(|l| format!(": {l}")).unwrap_or_default()
        };
        if ran.timed_out {
            return Ok(failed(format!(
                "timed out after {} s{}",
                self.timeout.as_secs(),
                said()
            )));
        }
        use std::os::unix::process::ExitStatusExt;
        match (ran.status.code(), ran.status.signal()) {
            (Some(0), _) => {}
            (Some(125), _) => {
                return Ok(BootOutcome::Failed {
                    reason: format!("exit 125: the command cannot test this commit{}", said()),
                    console: job.console.clone(),
                    untestable: true,
                })
            }
            (Some(code @ 1..=124), _) => {
                return Ok(failed(format!("exit {code}{}", said())));
            }
            (code, signal) => {
                let how = match (code, signal) {
                    (Some(126), _) => "exit 126: the command cannot be executed".to_owned(),
                    (Some(127), _) => "exit 127: the command is not found".to_owned(),
                    (Some(c), _) => format!("exit {c}: the shell reports a signal or an error"),
                    (None, Some(s)) => format!("killed by signal {s}"),
                    (None, None) => "ended without a status".to_owned(),
                };
                return Err(HostError::Command(format!(
                    "[test] command {:?} on {}: {how}{}; see {}. Fix the command, then rerun \
                     to resume",
                    self.command,
                    short(&job.release),
                    said(),
                    job.console.display()
                )));
            }
        }
        let (text, beside) = match &self.output {
            // Read inside the checkout only, through no link, from a regular file, to the cap:
            // a link to a host file was quoted into the journal, a FIFO blocked the hunt and
            // /dev/zero was read until memory ran out (issue 32, finding 2).
            Some(rel) => match crate::files::open_inside(tree, rel)
                .and_then(|f| crate::files::read_capped(f, MAX_OUTPUT_BYTES))
            {
                Ok(bytes) => (
                    String::from_utf8_lossy(&bytes).into_owned(),
                    tree.join(rel).parent().map(Path::to_path_buf),
                ),
                // Bad input, not a failed run: a rerun, or the next commit, would write as
                // much (issue 32, finding 8).
                Err(crate::files::FileError::TooLarge { limit }) => {
                    return Err(HostError::BadInput(format!(
                        "test.output {} holds more than {limit} bytes, the most firstbad reads \
                         for a metric: write only the result there",
                        rel.display()
                    )))
                }
                Err(e) => return Ok(failed(format!("no result file {}: {e}", rel.display()))),
            },
            None => match std::fs::File::open(&stdout_path)
                .map_err(crate::files::FileError::from)
                .and_then(|f| crate::files::read_capped(f, MAX_OUTPUT_BYTES))
            {
                Ok(bytes) => (String::from_utf8_lossy(&bytes).into_owned(), None),
                // Bad input: a rerun would print as much (issue 32, finding 8).
                Err(crate::files::FileError::TooLarge { limit }) => {
                    return Err(HostError::BadInput(format!(
                        "[test] command {:?} printed more than {limit} bytes on stdout, the most \
                         firstbad reads for a metric: print only the result, or write it to a \
                         file and name that file in test.output",
                        crate::report::text::cut(&self.command, 60)
                    )))
                }
                Err(e) => {
                    return Err(HostError::Missing(format!(
                        "reading {}: {e}",
                        stdout_path.display()
                    )))
                }
            },
        };
        let reading = match crate::metric::read(&self.metric, &text, beside.as_deref()) {
            Ok(r) => r,
            Err(why) => return Ok(failed(format!("no metric: {why}"))),
        };
        // A value the statistics' log scale cannot hold is a failed run that says so, never
        // a sample (issue 32, finding 3).
        if let Err(e) = crate::sequential::comparable(&self.metric.field, reading.value) {
            return Ok(failed(format!("no usable metric: {e}")));
        }
        let mut result = firstbad_wire::WorkloadResult {
            kind: "command".into(),
            series: BTreeMap::new(),
            metrics: BTreeMap::new(),
            unavailable: BTreeMap::new(),
            duration_s: ran.seconds,
            system: None,
            vmstat: Vec::new(),
        };
        result.set_metric(&self.metric.field, reading.value, "not a finite number");
        if !reading.samples.is_empty() {
            result.series.insert(
                self.metric.field.clone(),
                firstbad_wire::Series {
                    unit: reading.unit.clone().unwrap_or_default(),
                    samples: reading.samples,
                },
            );
        }
        Ok(BootOutcome::Measured {
            kernel_release: job.release.clone(),
            boot_id: format!("{} run {}", self.name, job.boot),
            value: reading.value,
            result,
            console: job.console.clone(),
            boot_seconds: 0.0,
        })
    }
}

/// The commit a tree's HEAD names.
fn head_of(tree: &Path) -> Result<String, git2::Error> {
    let repo = git2::Repository::open(tree)?;
    let head = repo.head()?.peel_to_commit()?;
    Ok(head.id().to_string())
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
