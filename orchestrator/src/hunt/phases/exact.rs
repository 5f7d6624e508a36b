//! Command hunts judged by the command's exit status (`[test] command`, `git bisect run`'s
//! convention): one run of the command is one verdict, on up to `[test] jobs` checkouts at
//! once. No baselines, no statistics: the phase applies each run's end in the order the runs
//! ended, kills the runs whose commit other results have ruled out, and gives each free
//! checkout a commit that splits the candidates well.
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
//!   rerun after the fix tests that commit again. A script that older commits lack should say
//!   so itself: `test -x ./t.sh || exit 125; ./t.sh`.
//! - **128–255, or the shell killed by a signal** (not by firstbad): git aborts `bisect run`
//!   on an exit status of 128 or more; firstbad stops too (exit code 5). Something outside the
//!   commit (the OOM killer, a person's `kill`) ended the run, so the next run may well differ.
//! - **A timeout** (`[test] timeout_s`): the commit is skipped, with the reason in the journal
//!   and reports. A hang is a property of that candidate (one commit that deadlocks the suite
//!   should not stop a night's hunt), and a skip never names a wrong culprit: at worst the
//!   answer is a range that holds it. When a hang *is* the regression, let the command say so:
//!   `timeout 60 make check` exits 124, bad.

use super::super::driver::{Decision, Driver, StopReason, Work};
use super::super::{short, HuntState};
use crate::journal::{Event, HuntEnd, TestOutcome, Verdict};
use crate::search::Next;

/// What a run of the command says about its commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// A verdict, with the reason for a person.
    Verdict(Verdict, String),
    /// The run says nothing about the commit and the hunt must stop (exit code 5).
    Stop(String),
}

/// Whether a run's end says anything about its commit (a verdict, a skip included).
pub fn speaks(outcome: &TestOutcome) -> bool {
    matches!(judge(outcome, ""), Judgement::Verdict(..))
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

/// The next step of a command hunt judged by exit status.
pub fn next(d: &mut Driver, state: &HuntState, command: &str) -> Decision {
    // The runs that ended, in the order they ended: a verdict each, or a stop.
    if let Some((commit, _, outcome)) = state.tests_unjudged.first() {
        return verdict(d, commit, outcome, command);
    }
    let end = match d.bisection_next() {
        Next::Found(commit) => Some(HuntEnd::Found { commit }),
        Next::OnlySkippedLeft(commits) => Some(HuntEnd::OnlySkippedLeft { commits }),
        Next::Test(_) => None,
    };
    // A run whose commit other results have ruled out holds a checkout for nothing; once the
    // search has ended, nothing still running can change the answer.
    for (commit, job, cancelled) in state.running_tests() {
        if !cancelled && (end.is_some() || !d.bisection().is_candidate(commit)) {
            return Decision::Record(Event::TestCancelled {
                commit: commit.to_owned(),
                job,
            });
        }
    }
    if let Some(end) = end {
        return d.finish(state, end);
    }
    let k = d.plan.hosts.len();
    let running: Vec<(&str, u32)> = state.running_tests().map(|(c, j, _)| (c, j)).collect();
    let free: Vec<u32> = (0..k as u32)
        .filter(|j| !running.iter().any(|(_, r)| r == j))
        .collect();
    if free.is_empty() {
        return Decision::Wait;
    }
    let work: Vec<Work> = d
        .next_parallel(k)
        .into_iter()
        .filter(|c| !running.iter().any(|(r, _)| r == c))
        .zip(free)
        .map(|(commit, job)| Work::Test { commit, job })
        .collect();
    match (work.is_empty(), running.is_empty()) {
        (false, _) => Decision::Start(work),
        (true, false) => Decision::Wait,
        // next() named a commit to test, so next_parallel names one too.
        (true, true) => Decision::Stop(StopReason::Test(
            "the search named no commit to test: a bug in firstbad; rerun resumes".into(),
        )),
    }
}

/// The verdict of one run that ended, or the stop it calls for.
fn verdict(d: &Driver, commit: &str, outcome: &TestOutcome, command: &str) -> Decision {
    match judge(outcome, command) {
        Judgement::Stop(message) => Decision::Stop(StopReason::Test(format!(
            "{}: {message}\n--- last lines of {} ---\n{}",
            short(commit),
            outcome.log.display(),
            outcome.output_tail.join("\n")
        ))),
        Judgement::Verdict(verdict, reason) => {
            // Only a commit the search had already ruled out (its run ended just before it
            // was killed) can contradict the verdicts so far.
            if !d.bisection().is_candidate(commit) {
                if let Err(e) = d.bisection().clone().mark_result(commit, verdict) {
                    return Decision::Stop(StopReason::Test(format!(
                        "{} is {} ({reason}) but that contradicts earlier verdicts ({e}): is \
                         the test flaky? The journal is intact",
                        short(commit),
                        verdict.as_str()
                    )));
                }
            }
            Decision::Record(Event::Verdict {
                commit: commit.to_owned(),
                verdict,
                reason,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

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
        assert!(speaks(&ended(Some(3), None, false)));
        assert!(!speaks(&ended(Some(127), None, false)));
    }
}
