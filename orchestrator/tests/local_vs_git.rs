//! Local command hunts (`[test]`) against `git bisect run`: the real `firstbad` binary and real
//! git bisect the same random repositories with the same script, whose verdict comes from
//! marker files the commits carry (BUG from the culprit on, SKIP on some commits).

mod common;
use common::dag::{linear_shape, random_shape, write_repo, Rng, Shape};
use common::{git, git_ok};
use firstbad::journal::{Event, Journal, TestOutcome};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The verdict script: 125 on SKIP, 1 on BUG, 0 otherwise; `extra` runs first.
fn script(dir: &Path, extra: &str) -> PathBuf {
    let p = dir.join("test.sh");
    std::fs::write(
        &p,
        format!("{extra}\ntest -e SKIP && exit 125\ntest -e BUG && exit 1\nexit 0\n"),
    )
    .expect("write script");
    p
}

/// A hunt file for `repo`, good..bad, running `command` on `jobs` checkouts.
fn hunt_file(dir: &Path, name: &str, good: &str, bad: &str, command: &str, extra: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(
        &p,
        format!(
            "[hunt]\nname = \"{name}\"\nrepo = \"repo\"\ngood = \"{good}\"\nbad = \"{bad}\"\n\
             state_dir = \"state-{name}\"\n\n[test]\ncommand = '{command}'\n{extra}\n"
        ),
    )
    .expect("write hunt file");
    p
}

fn firstbad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_firstbad"))
        .args(args)
        .env("FIRSTBAD_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("firstbad runs")
}

/// How a bisection ended: the first bad commit, or the set it is one of.
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    Found(String),
    OneOf(Vec<String>),
}

impl End {
    fn contains(&self, id: &str) -> bool {
        match self {
            End::Found(c) => c == id,
            End::OneOf(cs) => cs.iter().any(|c| c == id),
        }
    }
}

/// The `git bisect <verdict> <id>` lines of a bisect log.
fn verdicts(log: &str) -> Vec<(String, String)> {
    log.lines()
        .filter_map(
            |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                ["git", "bisect", v @ ("good" | "bad" | "skip"), id] => {
                    Some((id.to_string(), v.to_string()))
                }
                _ => None,
            },
        )
        .collect()
}

/// `git bisect run sh <script>`: the commits it tested with their verdicts, and its answer.
fn git_bisect_run(
    repo: &Path,
    bad: &str,
    good: &str,
    script: &Path,
) -> (Vec<(String, String)>, End) {
    git_ok(repo, &["bisect", "start", bad, good]);
    let run = git(
        repo,
        &["bisect", "run", "sh", &script.display().to_string()],
    );
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let log = git_ok(repo, &["bisect", "log"]);
    git_ok(repo, &["bisect", "reset"]);
    let end = if let Some(line) = stdout
        .lines()
        .find(|l| l.ends_with(" is the first bad commit"))
    {
        End::Found(line.split_whitespace().next().expect("id").to_string())
    } else if let Some(pos) = stdout.find("The first bad commit could be any of:\n") {
        let mut c: Vec<String> = stdout[pos..]
            .lines()
            .skip(1)
            .take_while(|l| !l.starts_with("We cannot bisect more"))
            .map(str::to_string)
            .collect();
        c.sort();
        End::OneOf(c)
    } else {
        panic!(
            "git bisect run ended oddly:\n{stdout}\n{}",
            String::from_utf8_lossy(&run.stderr)
        );
    };
    (verdicts(&log), end)
}

/// `firstbad run` then `firstbad log`: what it tested, its answer, and the log itself.
fn firstbad_run(hunt: &Path) -> (Vec<(String, String)>, End, String) {
    let h = hunt.display().to_string();
    let run = firstbad(&["run", &h]);
    let code = run.status.code();
    assert!(
        code == Some(0) || code == Some(4),
        "firstbad run exited {code:?}:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let log = String::from_utf8_lossy(&firstbad(&["log", &h]).stdout).into_owned();
    let first: Vec<String> = log
        .lines()
        .filter_map(|l| l.strip_prefix("# first bad commit: ["))
        .map(|l| l[..40].to_string())
        .collect();
    let mut possible: Vec<String> = log
        .lines()
        .filter_map(|l| l.strip_prefix("# possible first bad commit: ["))
        .map(|l| l[..40].to_string())
        .collect();
    possible.sort();
    let end = match (first.as_slice(), possible.is_empty()) {
        ([one], true) => End::Found(one.clone()),
        ([], false) => End::OneOf(possible),
        _ => panic!("firstbad log has no answer:\n{log}"),
    };
    (verdicts(&log), end, log)
}

/// A random repository in `dir/repo` with BUG from `culprit` on and SKIP on `skips`.
struct Case {
    dir: tempfile::TempDir,
    ids: Vec<String>,
    culprit: usize,
    good: usize,
}

impl Case {
    fn new(shape: &Shape, rng: &mut Rng, skip_percent: usize) -> Case {
        Case::with(shape, rng, skip_percent, false)
    }

    /// [`Case::new`], with the oldest candidate as the culprit when `oldest` is set; the
    /// culprit alone carries a file CULPRIT.
    fn with(shape: &Shape, rng: &mut Rng, skip_percent: usize, oldest: bool) -> Case {
        let n = shape.parents.len();
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).expect("mkdir");
        let good = rng.below(n / 2);
        let excluded = shape.ancestors(&[good]);
        let candidates: Vec<usize> = (0..n - 1).filter(|&i| !excluded[i]).collect();
        let culprit = if oldest {
            candidates[0]
        } else {
            candidates[rng.below(candidates.len())]
        };
        let bug = shape.descendants(culprit);
        let skip: Vec<bool> = (0..n)
            .map(|i| i != n - 1 && i != good && rng.chance(skip_percent))
            .collect();
        let ids = write_repo(&repo, shape, &|i| {
            let mut f = Vec::new();
            if bug[i] {
                f.push(("BUG", String::new()));
            }
            if i == culprit {
                f.push(("CULPRIT", String::new()));
            }
            if skip[i] {
                f.push(("SKIP", String::new()));
            }
            f
        });
        Case {
            dir,
            ids,
            culprit,
            good,
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    fn bad(&self) -> &str {
        self.ids.last().expect("commits")
    }
}

/// With one job, firstbad runs the command on the very commits `git bisect run` runs it on, in
/// the same order, and gives the same answer; with exit 125 on some commits the answer (one
/// commit or a set) is git's and holds the true culprit.
#[test]
fn one_job_tests_what_git_bisect_run_tests_and_answers_the_same() {
    let started = Instant::now();
    let mut cases = 0;
    for seed in 1..=16u64 {
        let mut rng = Rng::new(seed);
        let n = 20 + rng.below(130);
        let shape = random_shape(&mut rng, n);
        let skip_percent = if seed % 2 == 0 { 0 } else { 15 + rng.below(30) };
        let case = Case::new(&shape, &mut rng, skip_percent);
        let script = script(case.path(), "");
        let good = case.ids[case.good].clone();
        let (git_tested, git_end) = git_bisect_run(&case.repo(), case.bad(), &good, &script);
        let command = format!("sh {}", script.display());
        let hunt = hunt_file(case.path(), "k1", &good, case.bad(), &command, "");
        let (ours, our_end, log) = firstbad_run(&hunt);
        assert_eq!(ours, git_tested, "seed {seed}: tested commits differ");
        assert_eq!(our_end, git_end, "seed {seed}: answers differ");
        assert!(
            our_end.contains(&case.ids[case.culprit]),
            "seed {seed}: the true culprit is not in {our_end:?}"
        );
        // git replays firstbad's log.
        let log_file = case.path().join("bisect.log");
        std::fs::write(&log_file, &log).expect("write log");
        let replay = git(
            &case.repo(),
            &["bisect", "replay", &log_file.display().to_string()],
        );
        let out = String::from_utf8_lossy(&replay.stdout);
        // git ends a replay that leaves only skipped commits with a failure status.
        assert!(
            replay.status.success()
                || (matches!(our_end, End::OneOf(_)) && out.contains("We cannot bisect more")),
            "seed {seed}: git bisect replay refused firstbad's log:\n{out}\n{}\n{log}",
            String::from_utf8_lossy(&replay.stderr)
        );
        git_ok(&case.repo(), &["bisect", "reset"]);
        cases += 1;
    }
    eprintln!(
        "{cases} random repositories: firstbad (jobs = 1) == git bisect run, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The `N runs, M verdicts, R rounds` line of `firstbad status`.
fn rounds(hunt: &Path) -> (usize, usize) {
    let out = firstbad(&["status", &hunt.display().to_string()]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.ends_with(" rounds"))
        .unwrap_or_else(|| panic!("no rounds in status:\n{text}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    (w[0].parse().expect("runs"), w[4].parse().expect("rounds"))
}

/// Three jobs: the same answer as git in fewer rounds (and less wall time) than one job.
#[test]
fn three_jobs_give_the_same_answer_in_fewer_rounds() {
    let mut total = [(0usize, 0usize, 0f64); 3]; // (runs, rounds, seconds) for git, K=1, K=3
    for seed in [3u64, 5, 8, 13] {
        let mut rng = Rng::new(seed * 101);
        let shape = if seed % 2 == 0 {
            linear_shape(300)
        } else {
            random_shape(&mut rng, 300)
        };
        let case = Case::new(&shape, &mut rng, 0);
        // Each run costs a fifth of a second, as a small test suite would.
        let script = script(case.path(), "sleep 0.2");
        let good = case.ids[case.good].clone();
        let t = Instant::now();
        let (git_tested, git_end) = git_bisect_run(&case.repo(), case.bad(), &good, &script);
        total[0].0 += git_tested.len();
        total[0].1 += git_tested.len();
        total[0].2 += t.elapsed().as_secs_f64();
        let command = format!("sh {}", script.display());
        let mut ends = Vec::new();
        for (i, jobs) in [(1usize, 1u32), (2, 3)] {
            let name = format!("k{jobs}");
            let hunt = hunt_file(
                case.path(),
                &name,
                &good,
                case.bad(),
                &command,
                &format!("jobs = {jobs}"),
            );
            let t = Instant::now();
            let (_, end, _) = firstbad_run(&hunt);
            total[i].2 += t.elapsed().as_secs_f64();
            let (runs, r) = rounds(&hunt);
            total[i].0 += runs;
            total[i].1 += r;
            ends.push(end);
        }
        assert_eq!(ends[0], git_end, "seed {seed}");
        assert_eq!(ends[1], git_end, "seed {seed}");
        assert_eq!(git_end, End::Found(case.ids[case.culprit].clone()));
    }
    for (label, (runs, rounds, secs)) in ["git bisect run", "firstbad jobs=1", "firstbad jobs=3"]
        .iter()
        .zip(total)
    {
        eprintln!("{label:>16}: {runs} runs, {rounds} rounds, {secs:.1} s (4 hunts of 300 commits, 0.2 s per run)");
    }
    assert!(total[2].1 < total[1].1, "rounds: {total:?}");
    assert!(
        total[1].1 == total[0].1,
        "one job runs what git runs: {total:?}"
    );
}

/// Reads the journal of a hunt's state directory.
fn journal(dir: &Path) -> Vec<Event> {
    Journal::open_read_only(&dir.join("journal.sqlite"))
        .expect("journal")
        .events()
        .expect("events")
        .into_iter()
        .map(|e| e.event)
        .collect()
}

/// Results that came in while `hung` was running, and how its run ended.
fn during_the_run_of(events: &[Event], hung: &str) -> (usize, Option<TestOutcome>) {
    let mut during = 0;
    for e in events
        .iter()
        .skip_while(|e| !matches!(e, Event::TestStarted { commit, .. } if commit == hung))
    {
        match e {
            Event::TestFinished {
                commit, outcome, ..
            } if commit == hung => return (during, Some(outcome.clone())),
            Event::TestFinished { .. } => during += 1,
            _ => {}
        }
    }
    (during, None)
}

/// The culprit's run hangs: it holds one checkout until `timeout_s`, the other checkout keeps
/// testing what is left, and the culprit is a skip whose reason is the timeout (the answer
/// holds it, like git's answer with a skipped culprit).
#[test]
fn a_run_that_hangs_until_its_timeout_is_a_skip_and_holds_one_checkout() {
    let mut rng = Rng::new(77);
    let case = Case::new(&linear_shape(200), &mut rng, 0);
    let script = script(case.path(), "test -e CULPRIT && sleep 300\nsleep 0.05");
    let good = case.ids[case.good].clone();
    let hunt = hunt_file(
        case.path(),
        "hang",
        &good,
        case.bad(),
        &format!("sh {}", script.display()),
        "jobs = 2\ntimeout_s = 5",
    );
    let t = Instant::now();
    let (_, end, _) = firstbad_run(&hunt);
    let secs = t.elapsed().as_secs_f64();
    let culprit = &case.ids[case.culprit];
    assert!(
        matches!(end, End::OneOf(_)) && end.contains(culprit),
        "{end:?}"
    );
    let events = journal(&case.path().join("state-hang"));
    let (during, outcome) = during_the_run_of(&events, culprit);
    let outcome = outcome.expect("the culprit's run ended");
    assert!(outcome.timed_out, "{outcome:?}");
    let reason = events
        .iter()
        .find_map(|e| match e {
            Event::Verdict {
                commit,
                verdict,
                reason,
            } if commit == culprit => Some((*verdict, reason.clone())),
            _ => None,
        })
        .expect("a verdict for the culprit");
    assert_eq!(reason.0, firstbad::journal::Verdict::Skip);
    assert!(reason.1.contains("timed out"), "{reason:?}");
    let runs = events
        .iter()
        .filter(|e| matches!(e, Event::TestFinished { .. }))
        .count();
    eprintln!(
        "the culprit hung {:.1} s until its timeout; the other checkout finished {during} of \
         the {} other runs meanwhile; hunt {secs:.1} s",
        outcome.seconds,
        runs - 1
    );
    assert!((5.0..30.0).contains(&secs), "{secs} s");
}

/// A run hangs on a commit that the other checkout's results then rule out: it is cancelled
/// at once (journalled, never judged) and the hunt ends long before the hang's timeout.
#[test]
fn a_hanging_run_that_is_ruled_out_is_cancelled_without_stalling_the_hunt() {
    let mut rng = Rng::new(78);
    // The culprit is the oldest candidate: every commit of the first two runs is bad, and the
    // hung one is ruled out by the first bad verdict below it.
    let case = Case::with(&linear_shape(200), &mut rng, 0, true);
    let flag = case.path().join("hung");
    let script = script(
        case.path(),
        &format!(
            "if mkdir {f} 2>/dev/null; then echo $FIRSTBAD_COMMIT > {f}/id; sleep 300; fi\nsleep 0.05",
            f = flag.display()
        ),
    );
    let good = case.ids[case.good].clone();
    let hunt = hunt_file(
        case.path(),
        "cancel",
        &good,
        case.bad(),
        &format!("sh {}", script.display()),
        "jobs = 2\ntimeout_s = 60",
    );
    let t = Instant::now();
    let (_, end, _) = firstbad_run(&hunt);
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(end, End::Found(case.ids[case.culprit].clone()));
    let hung = std::fs::read_to_string(flag.join("id"))
        .expect("a run hung")
        .trim()
        .to_string();
    let events = journal(&case.path().join("state-cancel"));
    let (during, outcome) = during_the_run_of(&events, &hung);
    let outcome = outcome.expect("the hung run was ended");
    assert!(outcome.cancelled && !outcome.timed_out, "{outcome:?}");
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, Event::Verdict { commit, .. } if commit == &hung)),
        "a cancelled run was judged"
    );
    eprintln!(
        "the hung run was cancelled after {:.1} s, {during} results later; hunt {secs:.1} s",
        outcome.seconds
    );
    assert!(during >= 1 && secs < 30.0, "{during} results, {secs} s");
}

/// `kill -9` in the middle of a hunt, then the same command: commits with a journalled result
/// are not run again, and the answer is the true culprit.
#[test]
fn kill_9_mid_hunt_then_rerun_tests_no_commit_twice() {
    let mut rng = Rng::new(4242);
    let case = Case::new(&random_shape(&mut rng, 250), &mut rng, 0);
    let ran = case.path().join("ran.log");
    // The commit goes to ran.log once the run is complete, just before its verdict.
    let script = script(
        case.path(),
        &format!("sleep 0.3\necho $FIRSTBAD_COMMIT >> {}", ran.display()),
    );
    let good = case.ids[case.good].clone();
    let hunt = hunt_file(
        case.path(),
        "kill",
        &good,
        case.bad(),
        &format!("sh {}", script.display()),
        "jobs = 2",
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_firstbad"))
        .args(["run", &hunt.display().to_string()])
        .env("FIRSTBAD_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("firstbad starts");
    let state = case.path().join("state-kill");
    let deadline = Instant::now() + Duration::from_secs(60);
    let verdicts_now = || {
        // The journal may not hold its tables yet.
        let Ok(events) =
            Journal::open_read_only(&state.join("journal.sqlite")).and_then(|j| j.events())
        else {
            return Vec::new();
        };
        events
            .into_iter()
            .filter_map(|e| match e.event {
                Event::Verdict { commit, .. } => Some(commit),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    while verdicts_now().len() < 3 {
        assert!(Instant::now() < deadline, "no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let before: HashSet<String> = verdicts_now().into_iter().collect();
    assert!(
        journal(&state)
            .iter()
            .all(|e| !matches!(e, Event::Finished { .. })),
        "killed too late"
    );

    let (_, end, _) = firstbad_run(&hunt);
    assert_eq!(end, End::Found(case.ids[case.culprit].clone()));
    let lines = std::fs::read_to_string(&ran).expect("ran.log");
    let mut count: HashMap<&str, usize> = HashMap::new();
    for l in lines.lines() {
        *count.entry(l).or_default() += 1;
    }
    for c in &before {
        assert_eq!(
            count.get(c.as_str()),
            Some(&1),
            "{c} had a result before the kill"
        );
    }
    let all: Vec<String> = verdicts_now();
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!(
        unique.len(),
        all.len(),
        "a commit has two verdicts: {all:?}"
    );
    eprintln!(
        "killed after {} verdicts; {} verdicts in all, {} runs",
        before.len(),
        all.len(),
        count.values().sum::<usize>()
    );
}

/// 126 (not executable) and 127 (not found) are the shell failing, not verdicts, and so are
/// 128 and above and a shell killed by a signal: the hunt stops with exit code 5, names the
/// command, and journals no verdict; the rerun after a fix resumes and finds the culprit.
#[test]
fn exit_126_127_128_and_signals_stop_the_hunt_and_name_the_command() {
    let mut rng = Rng::new(9);
    let case = Case::new(&linear_shape(40), &mut rng, 0);
    let not_exec = case.path().join("not-executable.sh");
    std::fs::write(&not_exec, "#!/bin/sh\nexit 0\n").expect("write");
    let good = case.ids[case.good].clone();
    for (name, command, says) in [
        ("e127", "./no-such-test-script".to_string(), "exited 127"),
        ("e126", not_exec.display().to_string(), "exited 126"),
        ("e130", "exit 130".to_string(), "exited 130"),
        ("sig9", "kill -9 $$".to_string(), "killed by signal 9"),
    ] {
        let hunt = hunt_file(case.path(), name, &good, case.bad(), &command, "");
        let out = firstbad(&["run", &hunt.display().to_string()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(5), "{stderr}");
        assert!(stderr.contains(&format!("`{command}`")), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        let events = journal(&case.path().join(format!("state-{name}")));
        assert!(
            events.iter().all(|e| !matches!(e, Event::Verdict { .. })),
            "{events:?}"
        );
        assert!(events
            .iter()
            .any(|e| matches!(e, Event::TestFinished { .. })));
    }
    // A fixed command is another hunt (the journal identity holds the command).
    let script = script(case.path(), "");
    let hunt = hunt_file(
        case.path(),
        "fixed",
        &good,
        case.bad(),
        &format!("sh {}", script.display()),
        "",
    );
    let (_, end, _) = firstbad_run(&hunt);
    assert_eq!(end, End::Found(case.ids[case.culprit].clone()));
}

/// `firstbad run --replay` with the log of a finished `git bisect run`: no command is run, the
/// answer is git's; the Markdown report and `status` of a local hunt name it too.
#[test]
fn replaying_git_bisect_run_s_log_runs_nothing_and_answers_the_same() {
    let mut rng = Rng::new(31);
    let case = Case::new(&random_shape(&mut rng, 120), &mut rng, 0);
    let ran = case.path().join("ran.log");
    let script = script(
        case.path(),
        &format!("echo $FIRSTBAD_COMMIT >> {}", ran.display()),
    );
    let good = case.ids[case.good].clone();
    git_ok(&case.repo(), &["bisect", "start", case.bad(), &good]);
    git(
        &case.repo(),
        &["bisect", "run", "sh", &script.display().to_string()],
    );
    let log = git_ok(&case.repo(), &["bisect", "log"]);
    git_ok(&case.repo(), &["bisect", "reset"]);
    let git_runs = std::fs::read_to_string(&ran).expect("git ran the script");
    std::fs::remove_file(&ran).expect("rm");
    let log_file = case.path().join("git-bisect.log");
    std::fs::write(&log_file, &log).expect("write");

    let hunt = hunt_file(
        case.path(),
        "replay",
        &good,
        case.bad(),
        &format!("sh {}", script.display()),
        "",
    );
    let h = hunt.display().to_string();
    let out = firstbad(&["run", &h, "--replay", &log_file.display().to_string()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!ran.exists(), "firstbad ran the command after the replay");
    let culprit = &case.ids[case.culprit];
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&culprit[..12]), "{stdout}");
    let report = String::from_utf8_lossy(&firstbad(&["report", &h]).stdout).into_owned();
    assert!(
        report.contains("## First bad commit") && report.contains(&culprit[..12]),
        "{report}"
    );
    let status = String::from_utf8_lossy(&firstbad(&["status", &h]).stdout).into_owned();
    assert!(
        status.contains(&format!("first bad commit {}", &culprit[..12])),
        "{status}"
    );
    let json = firstbad(&["report", &h, "--format", "json"]);
    assert_eq!(
        json.status.code(),
        Some(2),
        "json of a [test] hunt is refused, not garbled"
    );
    eprintln!(
        "git ran the script {} times; firstbad --replay ran it 0 times",
        git_runs.lines().count()
    );
}

/// A state directory copied mid-hunt (issue 19, finding 5): its checkouts' `.git` files name
/// the original's worktrees, through which libgit2 checked candidates out into the original's
/// files while the copy tested a stale tree, and answered a wrong commit. The copy must test in
/// checkouts of its own, answer the true culprit, and leave the original's checkout alone.
#[test]
fn a_copied_state_dir_tests_in_checkouts_of_its_own() {
    let mut rng = Rng::new(55);
    let case = Case::new(&linear_shape(60), &mut rng, 0);
    let (count, stop) = (case.path().join("count"), case.path().join("stop-at-3"));
    // Stops the first hunt (exit 127) on its third run while `stop` exists; fails with 202 when
    // the files here are not the candidate's (a stale tree).
    let script = script(
        case.path(),
        &format!(
            "n=$(($(cat {c} 2>/dev/null || echo 0) + 1)); echo $n > {c}\n\
             test -e {s} && test $n -ge 3 && exit 127\n\
             test \"$(git rev-parse HEAD)\" = \"$FIRSTBAD_COMMIT\" || exit 201\n\
             test -z \"$(git status --porcelain --untracked-files=no)\" || exit 202",
            c = count.display(),
            s = stop.display()
        ),
    );
    std::fs::write(&stop, "").expect("write");
    let good = case.ids[case.good].clone();
    let command = format!("sh {}", script.display());
    let hunt = hunt_file(case.path(), "orig", &good, case.bad(), &command, "");
    let out = firstbad(&["run", &hunt.display().to_string()]);
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let orig = case.path().join("state-orig");
    let orig_head = || git_ok(&orig.join("checkouts/job0"), &["rev-parse", "HEAD"]);
    let before = orig_head();
    std::fs::remove_file(&stop).expect("rm");

    // The copy: the same hunt in another state directory, resumed from the copied journal.
    let copy = case.path().join("state-copy");
    let cp = Command::new("cp")
        .args([
            "-a",
            &orig.display().to_string(),
            &copy.display().to_string(),
        ])
        .status()
        .expect("cp");
    assert!(cp.success());
    let text = std::fs::read_to_string(&hunt)
        .expect("read")
        .replace("state-orig", "state-copy");
    let copied = case.path().join("copy.toml");
    std::fs::write(&copied, text).expect("write");
    let (_, end, _) = firstbad_run(&copied);
    assert_eq!(end, End::Found(case.ids[case.culprit].clone()));
    assert_eq!(orig_head(), before, "the original's checkout was moved");
    let gitfile = std::fs::read_to_string(copy.join("checkouts/job0/.git")).expect(".git");
    let orig_gitfile = std::fs::read_to_string(orig.join("checkouts/job0/.git")).expect(".git");
    assert_ne!(
        gitfile, orig_gitfile,
        "the copy still uses the original's worktree"
    );
}
