//! Local command hunts: bisect any git repository with a command run in a checkout of each
//! candidate, as `git bisect run` does, on `[test] jobs` checkouts at once.
//!
//! The controller ([`run`]) decides which commits to test and records every start and result
//! in the journal before acting on it; the executor (one thread per checkout, `Worker`) only
//! checks a commit out and runs the command. They talk over channels, so a run that hangs until
//! its timeout holds one checkout and the others keep being fed.
//!
//! # What the command's exit status means
//!
//! As `git bisect run`: 0 is good, 125 is skip, 1–124 are bad. firstbad never turns a run that
//! says nothing about the commit into a verdict, so it differs from git where git guesses:
//!
//! - **126 and 127** (the shell's "not executable" and "command not found"): git counts them as
//!   bad, a known footgun: a typo in the command, or a script that older commits do not have,
//!   "finds" a culprit that has nothing to do with the problem. firstbad stops the hunt with
//!   exit code 5 and a message naming the command; nothing is recorded as a verdict, and a
//!   rerun after the fix resumes. A script that older commits lack should say so itself:
//!   `test -x ./t.sh || exit 125; ./t.sh`.
//! - **128–255, or the shell killed by a signal** (not by firstbad): git aborts `bisect run`
//!   on an exit status of 128 or more; firstbad stops too (exit code 5). Something outside the
//!   commit (the OOM killer, a person's `kill`) ended the run, so the next run may well differ.
//! - **A timeout** (`[test] timeout_s`): the command's whole process group is killed and the
//!   commit is skipped, with the reason in the journal and reports. A hang is a property of
//!   that candidate (one commit that deadlocks the suite should not stop a night's hunt), and
//!   a skip never names a wrong culprit: at worst the answer is a range that holds it. When a
//!   hang *is* the regression, let the command say so: `timeout 60 make check` exits 124, bad.
//!
//! The command runs with `sh -c` in the checkout, with `FIRSTBAD_COMMIT` set to the full id of
//! the candidate; its output goes to `<state_dir>/logs/<commit>.log` and its last lines to the
//! journal with the verdict.
//!
//! # Parallel testing
//!
//! With `jobs = K`, each of K linked worktrees under `<state_dir>/checkouts/` tests one
//! candidate at a time. Whenever checkouts are idle, the controller asks the search for the
//! commits that split the candidates into near-equal parts ([`Bisection::next_parallel`],
//! counting the commits still running), and applies results in the order they arrive
//! ([`Bisection::mark_result`]); the journal keeps that order, so a resume rebuilds the same
//! state. A run whose commit the other results have ruled out is killed at once (journalled as
//! cancelled, never judged), so that its checkout takes a commit that still matters.
//!
//! A checkout that cannot be made or updated (or a log that cannot be written) stops the hunt
//! with exit code 5 rather than retiring that checkout: the checkouts share one disk and one
//! repository, so what breaks one almost always breaks the others, and a rerun resumes. With `jobs = 1` the commits tested, in order, are those `git bisect run` tests.

use crate::build::checkout_detached;
use crate::config::{LocalConfig, TestConfig};
use crate::error::exit_code;
use crate::hunt::{apply_replay, journal_path, short, HuntError, HuntState, Outcome};
use crate::journal::{Entry, Event, HuntEnd, HuntIdentity, Journal, TestOutcome, Verdict};
use crate::search::{Bisection, Next};
use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How many lines of the command's output the journal keeps with each result.
const TAIL_LINES: usize = 20;

/// What a run of the command says about its commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// A verdict, with the reason for a person.
    Verdict(Verdict, String),
    /// The run says nothing about the commit and the hunt must stop (exit code 5).
    Stop(String),
}

/// Maps a run's end to a verdict, `git bisect run`'s convention with the exceptions in the
/// module documentation.
pub fn judge(outcome: &TestOutcome, command: &str) -> Judgement {
    if outcome.timed_out {
        return Judgement::Verdict(
            Verdict::Skip,
            format!("timed out after {:.0} s (killed)", outcome.seconds),
        );
    }
    match (outcome.exit_code, outcome.signal) {
        (Some(0), _) => Judgement::Verdict(Verdict::Good, "exit 0".into()),
        (Some(125), _) => Judgement::Verdict(Verdict::Skip, "exit 125".into()),
        (Some(c @ 1..=124), _) => Judgement::Verdict(Verdict::Bad, format!("exit {c}")),
        (Some(c @ (126 | 127)), _) => Judgement::Stop(format!(
            "the test command `{command}` exited {c} ({}): that is the shell failing to run \
             it, not a verdict (git bisect run would call the commit bad). Install or chmod \
             what it runs and rerun to resume; a changed `command` is another hunt (another \
             state_dir), which can start from this one's verdicts: `firstbad log` > file, then \
             `firstbad run --replay file`; make it exit 125 where it cannot run",
            if c == 126 {
                "not executable"
            } else {
                "command not found"
            }
        )),
        (Some(c), _) => Judgement::Stop(format!(
            "the test command `{command}` exited {c}: 128 and above mean it was killed or \
             failed outside the test (git bisect run aborts too); rerun to resume"
        )),
        (None, Some(sig)) => Judgement::Stop(format!(
            "the test command `{command}` was killed by signal {sig} (not by firstbad): \
             nothing is known about the commit; rerun to resume"
        )),
        (None, None) => Judgement::Stop(format!(
            "the test command `{command}` ended without an exit status"
        )),
    }
}

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

/// Runs (or resumes) a local command hunt to its end.
pub fn run(cfg: &LocalConfig, replay: Option<&Path>) -> Result<Outcome, HuntError> {
    let range = crate::hunt::HuntRange::load(
        &cfg.source,
        &cfg.repo,
        &cfg.goods,
        &cfg.bad,
        &cfg.paths,
        cfg.first_parent,
    )?;
    let mut meaning = range.meaning();
    meaning.insert("test.command".into(), cfg.test.command.clone());
    let crate::hunt::HuntRange {
        history,
        dag,
        bad,
        goods,
        info: range_info,
    } = range;
    let good = goods[0].clone();

    std::fs::create_dir_all(cfg.state_dir.join("logs")).map_err(|e| {
        HuntError::BadInput(format!(
            "cannot create state directory {}: {e}",
            cfg.state_dir.display()
        ))
    })?;
    let _lock = crate::hunt::prelude::lock_state_dir(&cfg.state_dir)?;
    let journal = Journal::open(&journal_path(&cfg.state_dir))?;
    let identity = HuntIdentity {
        good: good.clone(),
        bad: bad.clone(),
        fingerprint: crate::hunt::prelude::fingerprint(&meaning),
        meaning,
    };
    crate::hunt::begin_or_resume(
        &journal,
        &identity,
        &cfg.state_dir,
        &dag,
        &goods,
        range_info.as_ref(),
    )?;
    let mut state = HuntState::replay(&journal.events()?);
    if let Some(end) = &state.end {
        tracing::info!("this hunt has already ended; `firstbad report` shows it");
        return Ok(Outcome {
            exit_code: end_code(end),
            end: end.clone(),
            confirmation: None,
        });
    }
    if let Some(file) = replay {
        apply_replay(&history, &dag, &bad, &goods, &journal, &mut state, file)?;
    }
    drop(history);

    let mut bisection =
        Bisection::new(&dag, &bad, &goods).map_err(|e| HuntError::BadInput(e.to_string()))?;
    for (commit, verdict, _) in &state.verdicts {
        bisection.mark_result(commit, *verdict).map_err(|e| {
            HuntError::BadInput(format!(
                "{}: the journal does not fit this range ({e}); use another hunt.state_dir",
                cfg.state_dir.display()
            ))
        })?;
    }

    let k = cfg.test.jobs as usize;
    let pool = Pool::start(cfg, k)?;
    let started_at = Instant::now();
    let mut c = Controller {
        cfg,
        journal: &journal,
        pool: &pool,
        bisection,
        idle: (0..k).rev().collect(),
        running: HashMap::new(),
        cancelled: HashSet::new(),
        runs: 0,
    };
    let result = c.drive();
    pool.kill_all();
    let end = result?;
    journal.append(&Event::Finished { end: end.clone() })?;
    tracing::info!(
        "{} runs of the command in {:.1} s; the hunt took {} rounds with {k} job(s)",
        c.runs,
        started_at.elapsed().as_secs_f64(),
        rounds(&journal.events()?)
    );
    Ok(Outcome {
        exit_code: end_code(&end),
        end,
        confirmation: None,
    })
}

/// The deciding half of a local hunt: feeds idle checkouts, applies results as they arrive.
struct Controller<'a> {
    cfg: &'a LocalConfig,
    journal: &'a Journal,
    pool: &'a Pool,
    bisection: Bisection,
    /// Checkouts with nothing to do.
    idle: Vec<usize>,
    /// Commits being tested, and where.
    running: HashMap<String, usize>,
    /// Running commits killed because other results ruled them out.
    cancelled: HashSet<String>,
    /// Runs finished in this process.
    runs: usize,
}

impl Controller<'_> {
    /// Runs the hunt to its end.
    fn drive(&mut self) -> Result<HuntEnd, HuntError> {
        let k = self.idle.len() + self.running.len();
        loop {
            // Wait only when no checkout can be given anything new.
            let mut results = Vec::new();
            let must_wait = !self.running.is_empty()
                && (self.idle.is_empty() || !can_dispatch(&self.bisection, &self.running, k));
            if must_wait {
                let done =
                    self.pool.results.recv().map_err(|_| {
                        HuntError::Infrastructure("every test checkout stopped".into())
                    })?;
                results.push(done);
            }
            // Apply every result that has arrived before deciding anything.
            while let Ok(r) = self.pool.results.try_recv() {
                results.push(r);
            }
            for done in results {
                self.apply(done)?;
            }
            // A run whose commit other results have ruled out holds a checkout for nothing.
            for (commit, &job) in &self.running {
                if !self.bisection.is_candidate(commit) && self.cancelled.insert(commit.clone()) {
                    tracing::info!(
                        "cancelling {} on checkout {job}: no longer a candidate",
                        short(commit)
                    );
                    self.pool.cancel(job);
                }
            }
            match self.bisection.next() {
                // Once the search has ended, nothing still running can change the answer:
                // every candidate other than the bad commit has a verdict or a skip.
                Next::Found(commit) => return Ok(HuntEnd::Found { commit }),
                Next::OnlySkippedLeft(commits) => return Ok(HuntEnd::OnlySkippedLeft { commits }),
                Next::Test(_) => {}
            }
            self.dispatch(k)?;
        }
    }

    /// Gives idle checkouts the commits that split the candidates best, counting those running.
    fn dispatch(&mut self, k: usize) -> Result<(), HuntError> {
        if self.idle.is_empty() {
            return Ok(());
        }
        let fresh: Vec<String> = self
            .bisection
            .next_parallel(k)
            .into_iter()
            .filter(|c| !self.running.contains_key(c))
            .take(self.idle.len())
            .collect();
        for commit in fresh {
            let job = self
                .idle
                .pop()
                .expect("one idle checkout per chosen commit");
            tracing::info!(
                "testing {} on checkout {job} ({} candidates left, ~{} steps)",
                short(&commit),
                self.bisection.remaining(),
                self.bisection.steps_left()
            );
            self.journal.append(&Event::TestStarted {
                commit: commit.clone(),
                job: job as u32,
            })?;
            self.pool.send(job, commit.clone())?;
            self.running.insert(commit, job);
        }
        if self.running.is_empty() {
            // next() named a commit to test, so next_parallel names one too.
            return Err(HuntError::Infrastructure(
                "the search named no commit to test".into(),
            ));
        }
        Ok(())
    }

    /// Journals a finished run and, when it says something about its commit, the verdict.
    fn apply(&mut self, done: Done) -> Result<(), HuntError> {
        self.running.remove(&done.commit);
        self.idle.push(done.job);
        let command = &self.cfg.test.command;
        let mut outcome = done.outcome.map_err(|message| {
            HuntError::Infrastructure(format!(
                "checkout {} could not test {}: {message}; rerun to resume",
                done.job,
                short(&done.commit)
            ))
        })?;
        let was_cancelled = self.cancelled.remove(&done.commit);
        // Killed because it no longer mattered: recorded, never judged. (A run that ended by
        // itself just before the kill keeps its verdict.)
        if was_cancelled && outcome.exit_code.is_none() {
            outcome.cancelled = true;
            outcome.signal = None;
        }
        self.journal.append(&Event::TestFinished {
            commit: done.commit.clone(),
            job: done.job as u32,
            outcome: outcome.clone(),
        })?;
        self.runs += 1;
        if outcome.cancelled {
            return Ok(());
        }
        match judge(&outcome, command) {
            Judgement::Stop(message) => Err(HuntError::Infrastructure(format!(
                "{}: {message}\n--- last lines of {} ---\n{}",
                short(&done.commit),
                outcome.log.display(),
                outcome.output_tail.join("\n")
            ))),
            Judgement::Verdict(verdict, reason) => {
                if let Err(e) = self.bisection.mark_result(&done.commit, verdict) {
                    return Err(HuntError::Infrastructure(format!(
                        "{} is {} ({reason}) but that contradicts earlier verdicts ({e}): is \
                         the test flaky? The journal is intact",
                        short(&done.commit),
                        verdict.as_str()
                    )));
                }
                tracing::info!(
                    "{} is {}: {reason} ({} candidates left)",
                    short(&done.commit),
                    verdict.as_str(),
                    self.bisection.remaining()
                );
                self.journal.append(&Event::Verdict {
                    commit: done.commit,
                    verdict,
                    reason,
                })?;
                Ok(())
            }
        }
    }
}

/// Whether an idle checkout could be given a commit that is not already running.
fn can_dispatch(b: &Bisection, running: &HashMap<String, usize>, k: usize) -> bool {
    if !matches!(b.next(), Next::Test(_)) {
        return true; // the loop ends at once
    }
    b.next_parallel(k)
        .iter()
        .any(|c| !running.contains_key(c.as_str()))
}

fn end_code(end: &HuntEnd) -> u8 {
    match end {
        HuntEnd::Found { .. } => exit_code::OK,
        HuntEnd::OnlySkippedLeft { .. } => exit_code::AMBIGUOUS,
        HuntEnd::NotReproduced { .. } => exit_code::NOT_REPRODUCED,
    }
}

/// A finished run, from a worker.
struct Done {
    job: usize,
    commit: String,
    outcome: Result<TestOutcome, String>,
}

/// The executor: one thread and one linked worktree per job.
struct Pool {
    senders: Vec<mpsc::Sender<String>>,
    results: mpsc::Receiver<Done>,
    /// Process groups of the commands running now, by job, to kill at the end.
    groups: Arc<Mutex<HashMap<usize, i32>>>,
    /// Held while the hunt runs.
    _lock: std::fs::File,
}

impl Pool {
    /// Prepares the checkouts (one at a time: libgit2 adds a worktree through a branch of the
    /// user's repository) and starts one worker per checkout.
    fn start(cfg: &LocalConfig, k: usize) -> Result<Pool, HuntError> {
        let repo = std::fs::canonicalize(&cfg.repo)
            .map_err(|e| HuntError::BadInput(format!("hunt.repo {}: {e}", cfg.repo.display())))?;
        let state_dir = std::fs::canonicalize(&cfg.state_dir).map_err(|e| {
            HuntError::BadInput(format!("state dir {}: {e}", cfg.state_dir.display()))
        })?;
        // Worktree names are global to the repository: key them by the state directory.
        let key = git2::Oid::hash_object(
            git2::ObjectType::Blob,
            state_dir.to_string_lossy().as_bytes(),
        )
        .map(|o| o.to_string()[..12].to_owned())
        .unwrap_or_else(|_| "0".into());
        std::fs::create_dir_all(state_dir.join("checkouts")).map_err(|e| {
            HuntError::BadInput(format!(
                "cannot create {}/checkouts: {e}",
                state_dir.display()
            ))
        })?;
        // One run per state directory at a time: the checkouts below are this run's alone.
        let lock_path = state_dir.join("lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| HuntError::BadInput(format!("{}: {e}", lock_path.display())))?;
        {
            use std::os::unix::io::AsRawFd;
            // SAFETY: flock(2) on a file descriptor we own.
            if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                return Err(HuntError::BadInput(format!(
                    "another `firstbad run` is using {}; wait for it or stop it",
                    state_dir.display()
                )));
            }
        }
        let git_dir = git2::Repository::open(&repo)
            .map(|r| r.path().to_path_buf())
            .map_err(|e| HuntError::BadInput(format!("hunt.repo: {e}")))?;
        let (result_tx, results) = mpsc::channel();
        let groups = Arc::new(Mutex::new(HashMap::new()));
        let mut senders = Vec::new();
        for job in 0..k {
            let src = state_dir.join("checkouts").join(format!("job{job}"));
            let name = format!("firstbad-local-{key}-{job}");
            // A checkout killed with firstbad (kill -9) leaves its index locked; the lock
            // above makes this run the only user of the worktree.
            let stale = git_dir.join("worktrees").join(&name).join("index.lock");
            if stale.exists() {
                std::fs::remove_file(&stale).map_err(|e| {
                    HuntError::Infrastructure(format!("removing {}: {e}", stale.display()))
                })?;
            }
            // Make the worktree now, at the bad commit, so that workers only check out.
            let head = git2::Repository::open(&repo)
                .and_then(|r| r.revparse_single(&cfg.bad).map(|o| o.id().to_string()))
                .map_err(|e| HuntError::BadInput(format!("hunt.bad: {e}")))?;
            checkout_detached(&repo, &src, &name, &head).map_err(|e| {
                HuntError::Infrastructure(format!("making checkout {}: {e}", src.display()))
            })?;
            let (tx, rx) = mpsc::channel::<String>();
            senders.push(tx);
            let worker = Worker {
                job,
                repo: repo.clone(),
                src,
                name,
                test: cfg.test.clone(),
                logs: state_dir.join("logs"),
                groups: Arc::clone(&groups),
            };
            let result_tx = result_tx.clone();
            std::thread::Builder::new()
                .name(format!("job{job}"))
                .spawn(move || {
                    for commit in rx {
                        let outcome = worker.test(&commit);
                        if result_tx
                            .send(Done {
                                job: worker.job,
                                commit,
                                outcome,
                            })
                            .is_err()
                        {
                            break;
                        }
                    }
                })
                .map_err(|e| HuntError::Infrastructure(format!("starting a worker: {e}")))?;
        }
        Ok(Pool {
            senders,
            results,
            groups,
            _lock: lock,
        })
    }

    fn send(&self, job: usize, commit: String) -> Result<(), HuntError> {
        self.senders[job]
            .send(commit)
            .map_err(|_| HuntError::Infrastructure(format!("checkout {job} stopped")))
    }

    /// Kills the command running on checkout `job`, if any.
    fn cancel(&self, job: usize) {
        let groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&pgid) = groups.get(&job) {
            // SAFETY: kill(2) on a process group this process created; no memory involved.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }

    /// Kills every command still running (their results no longer matter).
    fn kill_all(&self) {
        let groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        for &pgid in groups.values() {
            // SAFETY: kill(2) on a process group this process created; no memory involved.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

/// One checkout and the thread that tests commits in it.
struct Worker {
    job: usize,
    repo: PathBuf,
    src: PathBuf,
    name: String,
    test: TestConfig,
    logs: PathBuf,
    groups: Arc<Mutex<HashMap<usize, i32>>>,
}

impl Worker {
    /// Checks `commit` out and runs the command there; `Err` when that could not be done.
    fn test(&self, commit: &str) -> Result<TestOutcome, String> {
        checkout_detached(&self.repo, &self.src, &self.name, commit)
            .map_err(|e| format!("checkout: {e}"))?;
        let log_path = self.logs.join(format!("{commit}.log"));
        let log =
            std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let err = log
            .try_clone()
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(&self.test.command)
            .current_dir(&self.src)
            .env("FIRSTBAD_COMMIT", commit)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        {
            use std::os::unix::process::CommandExt;
            // Its own process group, so that a timeout kills everything it started.
            cmd.process_group(0);
            // SAFETY: prctl(2) only, which is async-signal-safe: if firstbad dies (kill -9),
            // the shell is killed too instead of testing on in a checkout nobody watches.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
        }
        let start = Instant::now();
        let deadline = start + Duration::from_secs(self.test.timeout_s);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("starting sh -c {:?}: {e}", self.test.command))?;
        let pgid = child.id() as i32;
        self.set_group(Some(pgid));
        let mut timed_out = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(e) => {
                    self.set_group(None);
                    return Err(format!("waiting for the command: {e}"));
                }
            }
            if Instant::now() >= deadline {
                timed_out = true;
                // SAFETY: kill(2) on the process group created above.
                unsafe {
                    libc::kill(-pgid, libc::SIGKILL);
                }
                match child.wait() {
                    Ok(status) => break status,
                    Err(e) => {
                        self.set_group(None);
                        return Err(format!("waiting for the command: {e}"));
                    }
                }
            }
            // Short tests are common (a `make check` of a small project): poll finely.
            std::thread::sleep(Duration::from_millis(10));
        };
        self.set_group(None);
        let seconds = start.elapsed().as_secs_f64();
        use std::os::unix::process::ExitStatusExt;
        Ok(TestOutcome {
            exit_code: if timed_out { None } else { status.code() },
            signal: if timed_out { None } else { status.signal() },
            timed_out,
            cancelled: false,
            seconds,
            output_tail: tail(&log_path, TAIL_LINES),
            log: log_path,
        })
    }

    fn set_group(&self, pgid: Option<i32>) {
        let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        match pgid {
            Some(p) => groups.insert(self.job, p),
            None => groups.remove(&self.job),
        };
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

    fn ended(code: Option<i32>, signal: Option<i32>, timed_out: bool) -> TestOutcome {
        TestOutcome {
            exit_code: code,
            signal,
            timed_out,
            cancelled: false,
            seconds: 3.0,
            output_tail: Vec::new(),
            log: PathBuf::from("x.log"),
        }
    }

    #[test]
    fn exit_statuses_follow_git_bisect_run_except_where_git_guesses() {
        let j = |c| judge(&ended(Some(c), None, false), "make check");
        assert!(matches!(j(0), Judgement::Verdict(Verdict::Good, _)));
        assert!(matches!(j(1), Judgement::Verdict(Verdict::Bad, _)));
        assert!(matches!(j(124), Judgement::Verdict(Verdict::Bad, _)));
        assert!(matches!(j(125), Judgement::Verdict(Verdict::Skip, _)));
        for c in [126, 127, 128, 137, 255] {
            match j(c) {
                Judgement::Stop(m) => assert!(m.contains("`make check`"), "{m}"),
                other => panic!("exit {c} gave {other:?}"),
            }
        }
        assert!(matches!(
            judge(&ended(None, Some(9), false), "t"),
            Judgement::Stop(_)
        ));
        match judge(&ended(None, None, true), "t") {
            Judgement::Verdict(Verdict::Skip, why) => assert!(why.contains("timed out"), "{why}"),
            other => panic!("timeout gave {other:?}"),
        }
    }

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
