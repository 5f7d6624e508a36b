//! Local command hunts: bisect any git repository with a command run in a checkout of each
//! candidate, as `git bisect run` does, on `[test] jobs` checkouts at once.
//!
//! They run on the hunt engine: the driver ([`crate::hunt::driver`], its exit-status phase
//! [`crate::hunt::phases::exact`], which says what each exit status means) decides, the
//! executor ([`crate::exec`]) journals every start and result before acting on it, and the
//! checkouts here are its test hosts: each checks a commit out and runs the command. A run
//! that hangs until its timeout holds one checkout and the others keep being fed.
//!
//! The command runs with `sh -c` in the checkout, with `FIRSTBAD_COMMIT` set to the full id of
//! the candidate; its output goes to `<state_dir>/logs/<commit>.log` and its last lines to the
//! journal with the verdict.
//!
//! # Parallel testing
//!
//! With `jobs = K`, each of K linked worktrees under `<state_dir>/checkouts/` tests one
//! candidate at a time. Whenever checkouts are idle, the driver asks the search for the
//! commits that split the candidates into near-equal parts ([`Bisection::next_parallel`],
//! counting the commits still running), and applies results in the order they arrive; the
//! journal keeps that order, so a resume rebuilds the same state. A run whose commit the
//! other results have ruled out is killed at once (journalled as cancelled, never judged), so
//! that its checkout takes a commit that still matters.
//!
//! A checkout that cannot be made or updated (or a log that cannot be written) stops the hunt
//! with exit code 5 rather than retiring that checkout: the checkouts share one disk and one
//! repository, so what breaks one almost always breaks the others, and a rerun resumes. With
//! `jobs = 1` the commits tested, in order, are those `git bisect run` tests.
//!
//! [`Bisection::next_parallel`]: crate::search::Bisection::next_parallel

use crate::build::checkout_detached;
use crate::config::{LocalConfig, TestConfig};
use crate::error::HostError;
use crate::exec::{BootJob, Builder, Task, TestHost};
use crate::hunt::driver::{Driver, HuntKind, Plan, Slot};
use crate::hunt::prelude::{open_hunt, HuntRange, Opened};
use crate::hunt::{short, HuntError, Outcome};
use crate::journal::{BootOutcome, BuildOutcome, Entry, Event, TestOutcome};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub mod measured;
mod process;

pub use crate::hunt::phases::exact::{judge, Judgement};

/// How many lines of the command's output the journal keeps with each result.
const TAIL_LINES: usize = 20;

/// The round of each test: one more than the latest round among the results known when it
/// started. The hunt's rounds are the largest; with one job it is the number of tests.
/// Verdicts journalled without a run (from `--replay`) count as round 0.
pub fn rounds(entries: &[Entry]) -> u32 {
    let mut known = 0u32;
    let mut started: HashMap<&str, u32> = HashMap::new();
    let mut max = 0;
    for e in entries {
        match &e.event {
            Event::TestStarted { commit, .. } => {
                started.insert(commit, known + 1);
                max = max.max(known + 1);
            }
            Event::Verdict { commit, .. } => {
                known = known.max(started.get(commit.as_str()).copied().unwrap_or(0));
            }
            _ => {}
        }
    }
    max
}

/// A command hunt's range: its commits between good and bad, `paths` and `first_parent`
/// applied.
fn range(cfg: &LocalConfig) -> Result<HuntRange, HuntError> {
    HuntRange::load(
        &cfg.source,
        &cfg.repo,
        &cfg.goods,
        &cfg.bad,
        &cfg.paths,
        cfg.first_parent,
    )
}

/// Runs (or resumes) a local command hunt to its end: judged by exit status, or by a metric
/// ([`measured`]) when `[test] metric` is set.
pub fn run(cfg: &LocalConfig, replay: Option<&Path>) -> Result<Outcome, HuntError> {
    if let Some(m) = &cfg.test.measure {
        return measured::run(cfg, m, replay);
    }
    let range = range(cfg)?;
    let mut meaning = range.meaning();
    meaning.insert("test.command".into(), cfg.test.command.clone());
    let tuning = BTreeMap::from([("test.jobs".into(), cfg.test.jobs.to_string())]);
    let (_lock, journal, mut state) =
        match open_hunt(&cfg.state_dir, "", &range, meaning, tuning, replay)? {
            Opened::Ended(outcome) => return Ok(*outcome),
            Opened::Run {
                lock,
                journal,
                state,
            } => (lock, journal, *state),
        };
    let k = cfg.test.jobs as usize;
    let checkouts = Checkout::make_all(cfg, k)?;
    let plan = Plan {
        seed: crate::hunt::driver::hunt_seed(&range.goods[0], &range.bad),
        good: range.goods[0].clone(),
        bad: range.bad,
        goods: range.goods,
        dag: range.dag,
        settings: crate::hunt::judge::Settings {
            classify: crate::config::ClassifyConfig::defaults(),
            direction: crate::config::Direction::LowerIsBetter,
            metric: String::new(),
            split: cfg.paths.is_empty(),
            probe: Default::default(),
            // Exit-status hunts keep git's exact order, and checkouts have no kernel identity.
            same_kernel: false,
        },
        hosts: (0..k)
            .map(|j| Slot {
                name: format!("checkout {j}"),
                capacity: 1,
            })
            .collect(),
        build_ahead: false,
        first_parent: Box::new(|_| None),
        revert: None,
        reverting: None,
        carry: Vec::new(),
        kind: HuntKind::ExitStatus {
            command: cfg.test.command.clone(),
        },
        stop_at_baselines: false,
        pairs: None,
        budget: None,
        forecast: crate::hunt::driver::Forecasting::Off,
        forecaster: crate::sim::forecast::forecast,
    };
    drop(range.history);
    let mut driver = Driver::new(plan).map_err(HuntError::BadInput)?;
    let started_at = Instant::now();
    let finished_before = state.tests_finished;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| HuntError::Infrastructure(format!("starting the executor: {e}")))?;
    let result = HuntError::or_interrupted(crate::interrupt::block_on(
        &rt,
        crate::exec::drive(
            &mut driver,
            &mut state,
            &journal,
            &NoBuild,
            &checkouts,
            &crate::exec::Paths {
                consoles: cfg.state_dir.join("logs"),
            },
        ),
    ));
    for c in &checkouts {
        c.kill();
    }
    let end = result?;
    crate::hunt::state_dir::confirm_saved(&journal, &end)?;
    tracing::info!(
        "{} runs of the command in {:.1} s; the hunt took {} rounds with {k} job(s)",
        state.tests_finished - finished_before,
        started_at.elapsed().as_secs_f64(),
        rounds(&journal.events()?)
    );
    Ok(Outcome::of(end, None))
}

/// A command hunt builds nothing before its command runs (the command builds if it must).
struct NoBuild;

impl Builder for NoBuild {
    fn build(&self, commit: &str) -> Task<Result<BuildOutcome, crate::build::BuildError>> {
        let commit = commit.to_owned();
        Box::pin(async move {
            Ok(BuildOutcome::Failed {
                log: PathBuf::new(),
                error_lines: vec![format!(
                    "a command hunt builds nothing, yet {commit} was to be built: a bug in firstbad"
                )],
            })
        })
    }
}

/// One checkout: a linked worktree of the user's repository, where the command runs on one
/// commit at a time; the executor's test host of a command hunt.
struct Checkout {
    name: String,
    job: usize,
    repo: PathBuf,
    src: PathBuf,
    /// The worktree's name in the repository.
    worktree: String,
    test: TestConfig,
    logs: PathBuf,
    /// The command running here and the commit whose run is to be killed.
    group: Mutex<Group>,
}

/// What a checkout runs now, and the kill asked for: under one lock, so that a kill asked
/// for before the command has started is not lost.
#[derive(Default)]
struct Group {
    /// The commit under test and its command's process group, while one runs.
    running: Option<(String, i32)>,
    /// The commit whose run is cancelled (`TestCancelled`), until that run ends.
    cancelled: Option<String>,
}

impl Group {
    /// Kills the running command when its commit's run is cancelled.
    fn kill_if_cancelled(&self) {
        if let Some((commit, pgid)) = &self.running {
            if self.cancelled.as_ref() == Some(commit) {
                // SAFETY: kill(2) on a process group this process created; no memory involved.
                unsafe {
                    libc::kill(-pgid, libc::SIGKILL);
                }
            }
        }
    }
}

impl Checkout {
    /// Prepares the checkouts (one at a time: libgit2 adds a worktree through a branch of the
    /// user's repository), at the bad commit, so that a test only checks out.
    fn make_all(cfg: &LocalConfig, k: usize) -> Result<Vec<Arc<Checkout>>, HuntError> {
        let repo = std::fs::canonicalize(&cfg.repo)
            .map_err(|e| HuntError::BadInput(format!("hunt.repo {}: {e}", cfg.repo.display())))?;
        let state_dir = std::fs::canonicalize(&cfg.state_dir).map_err(|e| {
            HuntError::BadInput(format!("state dir {}: {e}", cfg.state_dir.display()))
        })?;
        // Worktree names are global to the repository: key them by the state directory.
        let key = crate::hunt::prelude::content_hash(state_dir.to_string_lossy().as_bytes());
        for dir in ["checkouts", "logs"] {
            std::fs::create_dir_all(state_dir.join(dir)).map_err(|e| {
                HuntError::BadInput(format!("cannot create {}/{dir}: {e}", state_dir.display()))
            })?;
        }
        let git = git2::Repository::open(&repo)
            .map_err(|e| HuntError::BadInput(format!("hunt.repo: {e}")))?;
        let head = git
            .revparse_single(&cfg.bad)
            .map(|o| o.id().to_string())
            .map_err(|e| HuntError::BadInput(format!("hunt.bad: {e}")))?;
        let mut out = Vec::new();
        for job in 0..k {
            let src = state_dir.join("checkouts").join(format!("job{job}"));
            let worktree = format!("firstbad-local-{key}-{job}");
            // A checkout killed with firstbad (kill -9) leaves its index locked; the state
            // directory's lock makes this run the only user of the worktree.
            let stale = git
                .path()
                .join("worktrees")
                .join(&worktree)
                .join("index.lock");
            if stale.exists() {
                std::fs::remove_file(&stale).map_err(|e| {
                    HuntError::Infrastructure(format!("removing {}: {e}", stale.display()))
                })?;
            }
            checkout_detached(&repo, &src, &worktree, &head).map_err(|e| {
                HuntError::Infrastructure(format!("making checkout {}: {e}", src.display()))
            })?;
            out.push(Arc::new(Checkout {
                name: format!("checkout {job}"),
                job,
                repo: repo.clone(),
                src,
                worktree,
                test: cfg.test.clone(),
                logs: state_dir.join("logs"),
                group: Mutex::new(Group::default()),
            }));
        }
        Ok(out)
    }

    /// Kills the command running here, if any (its result no longer matters).
    fn kill(&self) {
        let mut group = self.group.lock().unwrap_or_else(|e| e.into_inner());
        group.cancelled = group.running.as_ref().map(|(c, _)| c.clone());
        group.kill_if_cancelled();
    }
}

impl TestHost for Checkout {
    fn name(&self) -> &str {
        &self.name
    }

    fn boot(self: Arc<Self>, job: BootJob) -> Task<Result<BootOutcome, HostError>> {
        Box::pin(async move {
            Err(HostError::Missing(format!(
                "checkout {} runs commands and boots no kernel ({})",
                self.job,
                short(&job.commit)
            )))
        })
    }

    fn test(self: Arc<Self>, commit: String) -> Task<Result<TestOutcome, HostError>> {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || self.run(&commit))
                .await
                .unwrap_or_else(|e| {
                    Err(HostError::Missing(format!(
                        "the checkout's thread failed: {e}"
                    )))
                })
        })
    }

    fn cancel(&self, commit: &str) {
        let mut group = self.group.lock().unwrap_or_else(|e| e.into_inner());
        group.cancelled = Some(commit.to_owned());
        group.kill_if_cancelled();
    }
}

impl Checkout {
    /// Checks `commit` out and runs the command there; `Err` when that could not be done.
    fn run(&self, commit: &str) -> Result<TestOutcome, HostError> {
        checkout_detached(&self.repo, &self.src, &self.worktree, commit)
            .map_err(|e| HostError::Missing(format!("checkout: {e}")))?;
        let log_path = self.logs.join(format!("{commit}.log"));
        let ran = process::run_shell(
            &self.test.command,
            &self.src,
            &[("FIRSTBAD_COMMIT", commit)],
            process::create(&log_path)
                .map_err(|e| HostError::Missing(format!("{}: {e}", log_path.display())))?,
            Duration::from_secs(self.test.timeout_s),
            |pgid| self.set_group(Some((commit.to_owned(), pgid))),
        );
        self.set_group(None);
        let ran = ran.map_err(process::RunError::into_host_error)?;
        use std::os::unix::process::ExitStatusExt;
        let (code, signal) = if ran.timed_out {
            (None, None)
        } else {
            (ran.status.code(), ran.status.signal())
        };
        Ok(TestOutcome {
            exit_code: code,
            signal,
            timed_out: ran.timed_out,
            cancelled: false,
            seconds: ran.seconds,
            output_tail: tail(&log_path, TAIL_LINES),
            log: log_path,
        })
    }

    /// Notes the command running (`None` once it has ended), and kills it at once if its
    /// run was cancelled before it started.
    fn set_group(&self, running: Option<(String, i32)>) {
        let mut group = self.group.lock().unwrap_or_else(|e| e.into_inner());
        if running.is_none() {
            group.cancelled = None;
        }
        group.running = running;
        group.kill_if_cancelled();
    }
}

/// The last `n` lines of a file (read from its last 8 KiB).
fn tail(path: &Path, n: usize) -> Vec<String> {
    let Ok(mut f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(8192);
    if f.seek(SeekFrom::Start(from)).is_err() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    if f.read_to_end(&mut buf).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let mut lines: Vec<&str> = text.lines().collect();
    if from > 0 && !lines.is_empty() {
        lines.remove(0); // a partial line
    }
    let skip = lines.len().saturating_sub(n);
    lines[skip..].iter().map(|l| l.to_string()).collect()
}

/// Every run of a local hunt, in the order the runs started: commit, checkout, how it ended.
pub fn runs(entries: &[Entry]) -> Vec<(String, u32, Option<TestOutcome>)> {
    let mut out: Vec<(String, u32, Option<TestOutcome>)> = Vec::new();
    let mut open: HashSet<usize> = HashSet::new();
    for e in entries {
        match &e.event {
            Event::TestStarted { commit, job } => {
                open.insert(out.len());
                out.push((commit.clone(), *job, None));
            }
            Event::TestFinished {
                commit, outcome, ..
            } => {
                if let Some(&i) = open.iter().find(|&&i| &out[i].0 == commit) {
                    open.remove(&i);
                    out[i].2 = Some(outcome.clone());
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Verdict;

    #[test]
    fn rounds_count_results_known_at_each_start() {
        let at = |event| Entry {
            seq: 0,
            at_ms: 0,
            event,
        };
        let start = |c: &str| {
            at(Event::TestStarted {
                commit: c.into(),
                job: 0,
            })
        };
        let verdict = |c: &str| {
            at(Event::Verdict {
                commit: c.into(),
                verdict: Verdict::Good,
                reason: String::new(),
            })
        };
        // Two at once, then one after the first result: two rounds for three tests.
        let e = [
            start("a"),
            start("b"),
            verdict("a"),
            start("c"),
            verdict("b"),
            verdict("c"),
        ];
        assert_eq!(rounds(&e), 2);
        // One at a time: one round per test.
        let e = [start("a"), verdict("a"), start("b"), verdict("b")];
        assert_eq!(rounds(&e), 2);
        assert_eq!(rounds(&[]), 0);
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let text: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&p, text).unwrap();
        let t = tail(&p, 3);
        assert_eq!(t, ["line 4997", "line 4998", "line 4999"]);
    }
}
