//! Metric command hunts on real timing noise (issue #20, item 5): a small C program that times
//! its own CPU-bound loop, in a git history of 200 commits with merges, slowed down by 20% at
//! one commit inside a merged topic branch and by 10% more at a later one on the first-parent
//! line. The real `firstbad` binary hunts it by the program's own timer and through hyperfine;
//! real `git bisect run` hunts it with the threshold script a person would write.
//!
//! Nothing here is simulated: the noise is this machine's, with whatever else runs on it. The
//! tests that assert a culprit therefore fail at about 1 - confidence of runs by design. Each
//! test prints its figures as `noise: ...` lines (`-- --nocapture`); docs/metric-hunts.md
//! holds the figures measured and the command that reproduces them.

mod common;
use common::{git_env, git_ok, git_str};
use firstbad::journal::{BootOutcome, Event, Journal};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One test at a time: each measures wall-clock time, and a test running beside it (another
/// hunt, a build) would be measured as part of the noise, or as a regression.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    // A test that failed poisons the lock; the next one still needs the machine to itself.
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Iterations of the loop at the root: about 24 ms on this machine when it is quiet (2 cores,
/// AMD EPYC, no KVM), in the 20 to 40 ms the issue asks for, so that a sample costs little
/// and the program's start-up is small beside it.
const WORK: u64 = 12_000_000;
/// The first slowdown, 20%: the culprit every hunt must name.
const WORK_SLOW: u64 = WORK * 6 / 5;
/// The second slowdown, 10% more, later: what the confirmation must say lies after the culprit.
const WORK_SLOWER: u64 = WORK_SLOW * 11 / 10;

/// How many times test C bisects: enough to see a wrong-commit rate of a few in twenty.
const GIT_BISECTIONS: usize = 20;

/// The program: it times its loop 5 times with CLOCK_MONOTONIC and prints the fastest,
/// `{"ms": 24.1}`, as one times a CPU-bound loop on a shared machine: the fastest of a few is
/// the least disturbed. (Timing one pass, a hunt on this 2-core VM stopped for drift in about
/// one run of the test in three: the machine's speed moved 5-15% between quiet spells.) The
/// loop is a xorshift chain, each step depending on the last, so -O2 can neither vectorise nor
/// fold it; the checksum on stderr keeps it from being dropped.
const BENCH_C: &str = r#"/* revision 0 */
#include <stdio.h>
#include <time.h>
#include "work.h"

int main(void) {
    double best = 1e300;
    unsigned long x = 88172645463325252UL;
    for (int pass = 0; pass < 5; pass++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < WORK; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
        if (ms < best)
            best = ms;
    }
    fprintf(stderr, "checksum %lu\n", x);
    printf("{\"ms\": %.3f}\n", best);
    return 0;
}
"#;

/// The build every hunt and every bisection runs in a checkout.
const BUILD: &str = "cc -O2 -o bench bench.c";

/// The test history in `dir/repo`.
struct History {
    /// Removed at the end, unless a test failed or a hunt stopped for a person (see [`Drop`]).
    dir: Option<tempfile::TempDir>,
    /// A hunt stopped for a person (exit 5): its journal is evidence even where nothing asserts.
    keep: Cell<bool>,
    root: String,
    tip: String,
    /// The 20% slowdown, inside the topic branch `topic-b`.
    culprit: String,
    /// The 10% slowdown, on the first-parent line.
    second: String,
    /// main just before topic-b is forked, and its merge: a night before the culprit and
    /// the first after it.
    before_b: String,
    merged_b: String,
    /// Commits in root..tip, merges included, and the root.
    commits: usize,
}

impl History {
    fn dir(&self) -> &Path {
        self.dir.as_ref().expect("held until drop").path()
    }
    fn repo(&self) -> PathBuf {
        self.dir().join("repo")
    }
}

impl Drop for History {
    /// A failed test, or a hunt that stopped for a person, keeps its directory (the
    /// repository, the state directories and their journals) for a person to read, and says
    /// where.
    fn drop(&mut self) {
        if std::thread::panicking() || self.keep.get() {
            if let Some(dir) = self.dir.take() {
                eprintln!("noise: kept {} for the evidence", dir.keep().display());
            }
        }
    }
}

/// Makes commits with a date that grows by a minute each, so that the history (and its ids)
/// is the same on every run.
struct Committer {
    repo: PathBuf,
    n: u64,
}

impl Committer {
    fn git(&self, args: &[&str]) -> String {
        let date = format!("@{} +0000", 1_700_000_000 + 60 * self.n);
        let out = git_env(
            &self.repo,
            args,
            &[
                ("GIT_AUTHOR_DATE", date.as_str()),
                ("GIT_COMMITTER_DATE", date.as_str()),
            ],
        );
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn write(&self, path: &str, text: &str) {
        let p = self.repo.join(path);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).expect("mkdir in the repo");
        }
        std::fs::write(p, text).expect("write in the repo");
    }

    /// Commits everything with `subject`; returns the new commit's id.
    fn commit(&mut self, subject: &str) -> String {
        self.n += 1;
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", subject]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// A commit that changes no timing: the revision comment of bench.c (so it is rebuilt)
    /// or a line of NOTES, by turns.
    fn chore(&mut self, what: &str) -> String {
        let n = self.n + 1;
        if n & 1 == 0 {
            let c = std::fs::read_to_string(self.repo.join("bench.c")).expect("read bench.c");
            let rest = c.split_once('\n').expect("bench.c has a first line").1;
            self.write("bench.c", &format!("/* revision {n} */\n{rest}"));
        } else {
            let mut notes = std::fs::read_to_string(self.repo.join("NOTES")).unwrap_or_default();
            notes += &format!("note {n}: {what}\n");
            self.write("NOTES", &notes);
        }
        self.commit(&format!("{what} {n}"))
    }

    fn work(&mut self, iterations: u64, subject: &str) -> String {
        self.write("work.h", &format!("#define WORK {iterations}L\n"));
        self.commit(subject)
    }

    /// A topic branch forked here with `topic` commits (`slow` of them at index `at`, counted
    /// from 0), while main gets `main` commits beside it; then merged with --no-ff. Returns
    /// the topic's slow commit, if any.
    fn topic(
        &mut self,
        name: &str,
        topic: usize,
        main: usize,
        slow: Option<(usize, u64)>,
    ) -> Option<String> {
        self.git(&["checkout", "-q", "-b", name]);
        let mut culprit = None;
        for i in 0..topic {
            match slow {
                Some((at, work)) if at == i => {
                    culprit = Some(self.work(work, &format!("{name}: unroll the inner loop")));
                }
                _ => {
                    self.write(
                        &format!("{name}/part{i}.txt"),
                        &format!("{name} part {i}\n"),
                    );
                    self.commit(&format!("{name}: part {i}"));
                }
            }
        }
        self.git(&["checkout", "-q", "main"]);
        for _ in 0..main {
            self.chore("main beside the topic");
        }
        self.n += 1;
        self.git(&[
            "merge",
            "-q",
            "--no-ff",
            "-m",
            &format!("Merge branch '{name}'"),
            name,
        ]);
        culprit
    }
}

/// The history: 200 commits with four topic branches merged with --no-ff; the 20% slowdown is
/// the 5th commit of topic-b (about 37% of the way), the 10% one on main at about 75%.
fn history() -> History {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).expect("mkdir repo");
    let mut c = Committer { repo, n: 0 };
    c.git(&["init", "-q", "-b", "main"]);
    c.write("bench.c", BENCH_C);
    c.write(".gitignore", "bench\nhf.json\n");
    c.write("work.h", &format!("#define WORK {WORK}L\n"));
    let root = c.commit("bench: a CPU-bound loop that times itself");
    let chores = |c: &mut Committer, k: usize| {
        for _ in 0..k {
            c.chore("tidy");
        }
    };
    chores(&mut c, 30);
    c.topic("topic-a", 8, 4, None);
    chores(&mut c, 25);
    let before_b = c.git(&["rev-parse", "HEAD"]);
    let culprit = c
        .topic("topic-b", 10, 5, Some((4, WORK_SLOW)))
        .expect("topic-b holds the slowdown");
    let merged_b = c.git(&["rev-parse", "HEAD"]);
    chores(&mut c, 20);
    c.topic("topic-c", 8, 3, None);
    chores(&mut c, 33);
    let second = c.work(WORK_SLOWER, "bench: check every step of the chain");
    chores(&mut c, 15);
    c.topic("topic-d", 10, 4, None);
    chores(&mut c, 19);
    let tip = c.git(&["rev-parse", "HEAD"]);
    let commits: usize = c
        .git(&["rev-list", "--count", "HEAD"])
        .parse()
        .expect("a count");
    History {
        dir: Some(dir),
        keep: Cell::new(false),
        root,
        tip,
        culprit,
        second,
        before_b,
        merged_b,
        commits,
    }
}

/// One `firstbad run` of a metric hunt, with its journal read back.
struct Hunt {
    label: String,
    code: Option<i32>,
    stdout: String,
    stderr: String,
    wall: Duration,
    state: PathBuf,
    events: Vec<Event>,
}

/// Writes `<name>.toml` beside the repository and runs `firstbad run` on it.
fn hunt(h: &History, name: &str, test: &str) -> Hunt {
    let file = h.dir().join(format!("{name}.toml"));
    std::fs::write(
        &file,
        format!(
            "[hunt]\nname = \"{name}\"\nrepo = \"repo\"\ngood = \"{}\"\nbad = \"{}\"\n\
             state_dir = \"state-{name}\"\n\n[test]\nbuild = \"{BUILD}\"\n{test}\n\n\
             [classify]\nconfidence = 0.99\n",
            h.root, h.tip
        ),
    )
    .expect("write hunt file");
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_firstbad"))
        .args(["run", &file.display().to_string()])
        .env("FIRSTBAD_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("firstbad runs");
    let wall = start.elapsed();
    if out.status.code() == Some(5) {
        h.keep.set(true);
    }
    let state = h.dir().join(format!("state-{name}"));
    let events = Journal::open_read_only(&state.join("journal.sqlite"))
        .and_then(|j| j.events())
        .map(|es| es.into_iter().map(|e| e.event).collect())
        .unwrap_or_else(|e| {
            panic!(
                "{name}: no journal ({e}); firstbad said:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    Hunt {
        label: name.to_owned(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        wall,
        state,
        events,
    }
}

impl Hunt {
    /// The short id after `first bad commit: `, if it named one.
    fn named(&self) -> Option<&str> {
        self.named_all().first().map(|(c, _)| *c)
    }

    /// The journalled confirmation: whether it bore the culprit out, and its summary.
    fn confirmation(&self) -> Option<(bool, &str)> {
        self.events.iter().find_map(|e| match e {
            Event::Confirmation {
                confirmed, summary, ..
            } => Some((*confirmed, summary.as_str())),
            _ => None,
        })
    }

    /// Every run of the command: (commit, its outcome).
    fn runs(&self) -> impl Iterator<Item = (&str, &BootOutcome)> {
        self.events.iter().filter_map(|e| match e {
            Event::BootFinished {
                commit, outcome, ..
            } => Some((commit.as_str(), outcome)),
            _ => None,
        })
    }

    /// The metric of every run of `commit` that gave one.
    fn values(&self, commit: &str) -> Vec<f64> {
        self.runs()
            .filter(|(c, _)| *c == commit)
            .filter_map(|(_, o)| match o {
                BootOutcome::Measured { value, .. } => Some(*value),
                BootOutcome::Failed { .. } => None,
            })
            .collect()
    }

    /// Candidates built.
    fn builds(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::BuildFinished { .. }))
            .count()
    }

    /// The `noise:` line of this hunt: what it named, what it cost, and how noisy the good
    /// endpoint was.
    fn figures(&self, h: &History) -> String {
        let runs = self.runs().count();
        let failed = self
            .runs()
            .filter(|(_, o)| matches!(o, BootOutcome::Failed { .. }))
            .count();
        let named = match self.named() {
            Some(s) if h.culprit.starts_with(s) => format!("{s} (right)"),
            Some(s) => format!("{s} (WRONG)"),
            None => "nothing".to_owned(),
        };
        let good = self.values(&h.root);
        let (mean, cv) = mean_cv(&good);
        let confirmed = match self.confirmation() {
            Some((true, _)) => "confirmed",
            Some((false, _)) => "NOT confirmed",
            None => "no confirmation",
        };
        // Why a hunt stopped for a person is in its `firstbad: ` lines (the error, then what
        // to do), not in its log lines.
        let stopped = match self.code {
            Some(5) => {
                let said: Vec<&str> = self
                    .stderr
                    .lines()
                    .filter_map(|l| l.strip_prefix("firstbad: "))
                    .collect();
                format!("; stopped: {}", said.join(" / "))
            }
            _ => String::new(),
        };
        format!(
            "noise: firstbad {}: exit {:?}, named {named}, {confirmed}, runs {runs} ({failed} \
             failed), builds {}, wall {:.1} s; good: {} runs, mean {mean:.4}, cv {cv:.3}\
             {stopped}",
            self.label,
            self.code,
            self.builds(),
            self.wall.as_secs_f64(),
            good.len(),
        )
    }

    /// The commit named by the run's further step `n` (a regression of several, issue 31).
    fn named_step(&self, n: usize) -> Option<&str> {
        let prefix = format!("first bad commit of step-{n} from ");
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|l| l.split_once(": "))
            .and_then(|(_, l)| l.split_whitespace().next())
    }

    /// Every commit the run named, its own or a further step's, and whether its re-test
    /// confirmed it, in the order printed.
    fn named_all(&self) -> Vec<(&str, bool)> {
        let mut named = Vec::new();
        let mut lines = self.stdout.lines().peekable();
        while let Some(l) = lines.next() {
            let commit = l
                .strip_prefix("first bad commit: ")
                .or_else(|| {
                    l.strip_prefix("first bad commit of step-")
                        .and_then(|l| l.split_once(": "))
                        .map(|(_, c)| c)
                })
                .and_then(|c| c.split_whitespace().next());
            if let Some(c) = commit {
                let confirmed = lines.peek().is_some_and(|n| n.starts_with("confirmed: "));
                named.push((c, confirmed));
            }
        }
        named
    }

    /// Asserts the run found both steps: the 20% culprit and the 10% one each named, and no
    /// other commit confirmed. The bisection itself lands on the 20%
    /// culprit, and its confirmation says more comes after it, in most runs; on a host that
    /// moves mid-hunt (CI, 2026-12-05: a step of −8σ from boot 10 on) it landed on a commit
    /// between the two steps, whose re-test said NOT confirmed and that parts lie before and
    /// after it, and the same run then named both culprits, confirmed: every step in one run,
    /// which is what a user of a two-step regression needs, and what is asserted. (CI,
    /// 2026-12-06: a host that sped up by 59σ from boot 10 on; the refuted commit and an empty
    /// part were counted as culprits then, and the cap of 3 left the 10% step unhunted: a
    /// stage that confirms nothing no longer counts, [`firstbad::hunt::steps::Steps`].)
    ///
    /// Both named, and no other commit confirmed: whether each right one is also confirmed is
    /// issue 57's (a cold run of 2026-12-07: the 20% step +18.1% against its parent at
    /// Mann-Whitney p = 0.000 and NOT confirmed, "its level's interval above the parent's by 9
    /// points, at least 18 needed", the 10% one confirmed), and on this machine's real timing
    /// noise it is not a rule the test can hold every run: it is printed, not asserted.
    fn assert_names_the_culprit(&self, h: &History) {
        assert!(matches!(self.code, Some(0 | 4)), "{}", self.stdout);
        let named = self.named_all();
        let want = [&h.culprit[..12], &h.second[..12]];
        let confirmed_wrong: Vec<&str> = named
            .iter()
            .filter(|(c, confirmed)| *confirmed && !want.contains(c))
            .map(|(c, _)| *c)
            .collect();
        eprintln!("noise: named (commit, confirmed): {named:?}");
        assert!(
            want.iter().all(|w| named.iter().any(|(c, _)| c == w)) && confirmed_wrong.is_empty(),
            "the 20% slowdown is {}, the 10% one {}; both are named and no other commit is \
             confirmed: {named:?}\nstdout:\n{}\nstderr:\n{}",
            want[0],
            want[1],
            self.stdout,
            self.stderr
        );
        if self.named() != Some(want[0]) {
            return;
        }
        assert_eq!(
            self.named_step(2),
            Some(want[1]),
            "the run hunts the part after the 20% culprit and names the 10% slowdown: \
             stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        let (_, summary) = self.confirmation().expect("a journalled confirmation");
        assert!(
            summary
                .contains("the culprit is short of bad: more of the regression may come after it")
                && summary.contains(&format!("the part from {} to bad", &h.culprit[..12])),
            "the 10% slowdown at {} comes after the culprit, and the summary must say so: \
             {summary}",
            &h.second[..12]
        );
    }

    /// Asserts the hunt confirmed the 20% culprit and confirmed no commit but the two planted
    /// steps (exit 0, or 4 when a named commit is not confirmed: see below).
    ///
    /// The bisection itself lands on the 20% culprit in most runs. On a host that moves
    /// mid-hunt it may land elsewhere (CI, 2026-12-06: a step of +16σ from boot 22 on; it
    /// named `tidy 200`, after both steps): the re-test then says NOT confirmed, puts the
    /// named commit's parent at the bad level already, and the run hunts the part before it
    /// and names both steps, confirmed. A wrong commit named and refuted costs boots, not the
    /// answer; a wrong commit *confirmed* is the failure a user cannot see, and is asserted
    /// against.
    fn assert_names(&self, h: &History) {
        let why = || {
            format!(
                "{}: stdout:\n{}\nstderr:\n{}\nstate: {}",
                self.label,
                self.stdout,
                self.stderr,
                self.state.display()
            )
        };
        // Two culprits are what the posterior's model has no hypothesis for (one step from good
        // to bad): commits between them sit at 67% of the way, which it explains as the host
        // moving, and it puts the named culprit at 0% even when the re-test orders it +20%
        // against its parent. The hunt then says NOT confirmed (exit 4) with the right commit,
        // in about a third of the runs here (issue 20's note).
        assert!(matches!(self.code, Some(0 | 4)), "{}", why());
        let named = self.named_all();
        let planted = [&h.culprit[..12], &h.second[..12]];
        let culprit_named = named.iter().any(|(c, _)| *c == planted[0]);
        let wrong_confirmed: Vec<&str> = named
            .iter()
            .filter(|(c, ok)| *ok && !planted.contains(c))
            .map(|(c, _)| *c)
            .collect();
        assert!(
            culprit_named && wrong_confirmed.is_empty(),
            "the 20% slowdown is {}, the 10% one {}: named, and nothing else \
             confirmed (named {named:?}, wrongly confirmed {wrong_confirmed:?}): {}",
            planted[0],
            planted[1],
            why()
        );
        assert!(
            self.confirmation().is_some(),
            "a journalled confirmation: {}",
            why()
        );
    }
}

/// Mean and coefficient of variation (sample sd / mean).
fn mean_cv(v: &[f64]) -> (f64, f64) {
    if v.len() < 2 {
        return (v.first().copied().unwrap_or(f64::NAN), f64::NAN);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt() / mean)
}

#[test]
fn the_history_is_as_planted() {
    let _serial = serial();
    let h = history();
    assert_eq!(h.commits, 200);
    let merges = git_str(&h.repo(), &["rev-list", "--merges", "--count", "HEAD"]);
    assert_eq!(merges, "4");
    // The culprit is off the first-parent line, the second slowdown on it.
    let first_parent = git_ok(&h.repo(), &["rev-list", "--first-parent", "HEAD"]);
    assert!(!first_parent.contains(&h.culprit));
    assert!(first_parent.contains(&h.second));
    let position = |id: &str| {
        let ids = git_ok(
            &h.repo(),
            &["rev-list", "--reverse", "--topo-order", "HEAD"],
        );
        ids.lines().position(|l| l == id).expect("in the history")
    };
    eprintln!(
        "noise: history: {} commits, 4 merges; 20% slowdown {} at {}, 10% slowdown {} at {}",
        h.commits,
        &h.culprit[..12],
        position(&h.culprit),
        &h.second[..12],
        position(&h.second)
    );
}

/// Test A, with the parallel-noise figures of test D: the program's own timer, one run at a
/// time, then two at a time. The run finds both steps of the regression (issue 31): the 20%
/// culprit, then the 10% slowdown in the part its confirmation reads after it; on a host
/// that moves mid-hunt, the bisection may land between them, say NOT confirmed, and name both
/// in the parts it hunts next ([`Hunt::assert_names_the_culprit`]).
///
/// What could still fail it by design is a wrong commit confirmed, at about 1 − confidence
/// (1%) of runs: docs/metric-hunts.md has the rates measured.
#[test]
fn own_timer_run_names_the_20_percent_culprit_then_the_10_percent_step() {
    let _serial = serial();
    let h = history();
    let one = hunt(
        &h,
        "own-timer",
        "command = \"./bench\"\nmetric = \"ms\"\njobs = 1",
    );
    eprintln!("{}", one.figures(&h));
    // Test D: two runs at once on two cores share caches, memory bandwidth and the cores with
    // whatever else runs; the good endpoint's spread shows what that costs. Figures only.
    let two = hunt(
        &h,
        "own-timer-jobs2",
        "command = \"./bench\"\nmetric = \"ms\"\njobs = 2",
    );
    eprintln!("{}", two.figures(&h));
    one.assert_names_the_culprit(&h);
}

/// Test B: hyperfine runs the program 3 times (after a warm-up) per sample; the metric is its
/// fastest (min: the least disturbed, as the program itself reports), and the 3 times are the
/// sample's sub-samples.
///
/// It asserts on real noise that the 20% culprit is named and no other commit than the two
/// planted steps is confirmed ([`Hunt::assert_names`]), so it fails when a wrong commit is
/// confirmed, at about 1 - confidence (1%) of runs by design. The advice that more of the regression comes later is printed, not asserted: no
/// hyperfine hunt measured here gave it (0 of 3, docs/metric-hunts.md), because the hunt ends
/// before the culprit's level between good and bad is known that well (issue 20's note).
#[test]
fn hyperfine_hunt_names_the_20_percent_culprit_and_keeps_each_runs_times() {
    let _serial = serial();
    let h = history();
    let hf = hunt(
        &h,
        "hyperfine",
        "command = \"hyperfine -N --style none --runs 3 --warmup 1 --export-json hf.json \
         ./bench\"\noutput = \"hf.json\"\nmetric = \"min\"\nformat = \"hyperfine\"",
    );
    eprintln!("{}", hf.figures(&h));
    let series: Vec<usize> = hf
        .runs()
        .filter_map(|(_, o)| match o {
            BootOutcome::Measured { result, .. } => {
                Some(result.series.get("min").map_or(0, |s| s.samples.len()))
            }
            BootOutcome::Failed { .. } => None,
        })
        .collect();
    assert!(!series.is_empty(), "no measured run: {}", hf.stderr);
    assert!(
        series.iter().all(|&n| n == 3),
        "every sample holds hyperfine's 3 times: {series:?}"
    );
    hf.assert_names(&h);
    let (_, summary) = hf.confirmation().expect("a journalled confirmation");
    eprintln!(
        "noise: hyperfine: says more comes after the culprit: {}",
        summary.contains("more of the regression may come after it")
    );
}

/// Test C, the peer: `git bisect run` with the script a person writes, a threshold halfway
/// between one run of good and one of bad, measured again before each bisection. Its
/// wrong-commit rate is a figure, not an assertion.
#[test]
fn git_bisect_run_with_a_midpoint_threshold() {
    let _serial = serial();
    let h = history();
    let repo = h.repo();
    // One run of the checkout in `repo` as it is: build, run, read the ms.
    let once = |rev: &str| -> f64 {
        git_ok(&repo, &["checkout", "-q", rev]);
        let out = Command::new("sh")
            .args(["-c", &format!("{BUILD} && ./bench 2>/dev/null")])
            .current_dir(&repo)
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "build or run of {rev} failed");
        let text = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value = serde_json::from_str(text.trim()).expect("a JSON line");
        v["ms"].as_f64().expect("ms is a number")
    };
    let script = h.dir().join("threshold.sh");
    let start = Instant::now();
    let mut wrong = Vec::new();
    let mut runs = 0;
    let mut thresholds = Vec::new();
    for _ in 0..GIT_BISECTIONS {
        let threshold = (once(&h.root) + once(&h.tip)) / 2.0;
        runs += 2;
        git_ok(&repo, &["checkout", "-q", "main"]);
        thresholds.push(threshold);
        std::fs::write(
            &script,
            format!(
                "{BUILD} || exit 125\n\
                 ms=$(./bench 2>/dev/null | sed 's/[^0-9.]//g')\n\
                 awk -v m=\"$ms\" -v t={threshold} 'BEGIN {{ exit !(m > t) }}' && exit 1\n\
                 exit 0\n"
            ),
        )
        .expect("write the script");
        git_ok(&repo, &["bisect", "start", &h.tip, &h.root]);
        let run = common::git(
            &repo,
            &["bisect", "run", "sh", &script.display().to_string()],
        );
        let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
        let log = git_ok(&repo, &["bisect", "log"]);
        git_ok(&repo, &["bisect", "reset"]);
        runs += log
            .lines()
            .filter(|l| l.starts_with("git bisect good") || l.starts_with("git bisect bad"))
            .count()
            // The two endpoints given to `bisect start` are in the log but were not run.
            - 2;
        let named = stdout
            .lines()
            .find(|l| l.ends_with(" is the first bad commit"))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_else(|| panic!("git bisect run named no commit:\n{stdout}"))
            .to_owned();
        if named != h.culprit {
            wrong.push(named[..12].to_owned());
        }
    }
    let wall = start.elapsed();
    let lo = thresholds.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = thresholds.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "noise: git bisect run, midpoint threshold: wrong {}/{GIT_BISECTIONS} ({}), runs {runs} \
         ({:.1} a bisection), wall {:.1} s; thresholds {lo:.1} to {hi:.1} ms",
        wrong.len(),
        if wrong.is_empty() {
            "none".to_owned()
        } else {
            wrong.join(" ")
        },
        runs as f64 / GIT_BISECTIONS as f64,
        wall.as_secs_f64()
    );
    assert!(runs > 2 * GIT_BISECTIONS, "the bisections ran");
}

/// Issue 36, item 4: a nightly series of the program's own repository, as a kernel branch is
/// watched (tests/watch.rs): the `[test]` table of the hunts above in a series file, its
/// branch moved night by night in a bare upstream, and the real `firstbad watch` run each
/// night. Night 1 is the reference (the root), night 2 a head before topic-b (quiet), night 3
/// topic-b's merge: the 20% slowdown is tonight's alarm, and the same cycle hunts it between
/// nights 2 and 3 with the metric command hunt's engine, naming the culprit.
///
/// It asserts a culprit on real noise, so it fails at about 1 - confidence (1%) of runs by
/// design, as the hunts above do. It needs the machine as the timed lane has it, alone:
/// beside two TCG VMs (tests/lava.rs) one run in seven raised a false alarm on the quiet
/// night (4 of the head's 6 runs at 1.7x, 1 of the reference's; the second look kept the
/// split), and the hunt that followed said "not reproduced", as it should.
#[test]
fn a_nightly_series_of_the_benchmark_finds_the_20_percent_step_and_hunts_its_culprit() {
    let _serial = serial();
    let h = history();
    let upstream = h.dir().join("upstream.git");
    git_ok(
        h.dir(),
        &["clone", "-q", "--bare", "--shared", "repo", "upstream.git"],
    );
    let series = h.dir().join("nightly.toml");
    std::fs::write(
        &series,
        format!(
            "[series]\nname = \"bench-nightly\"\nremote = \"upstream.git\"\n\
             branch = \"nightly\"\nrepo = \"watch-repo\"\nstate_dir = \"state-nightly\"\n\
             boots = 6\n\n[detect]\nmin_effect = 0.1\n\n[test]\nbuild = \"{BUILD}\"\n\
             command = \"./bench\"\nmetric = \"ms\"\n\n[classify]\nconfidence = 0.99\n"
        ),
    )
    .expect("write the series file");
    let watch = |head: &str, args: &[&str]| {
        if !head.is_empty() {
            git_ok(&upstream, &["update-ref", "refs/heads/nightly", head]);
        }
        let start = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_firstbad"))
            .arg("watch")
            .arg(&series)
            .args(args)
            .env("FIRSTBAD_LOG", "info")
            .stdin(Stdio::null())
            .output()
            .expect("firstbad runs");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.code() != Some(0) {
            h.keep.set(true);
        }
        assert_eq!(out.status.code(), Some(0), "{said}");
        (said, start.elapsed())
    };
    let (_, first) = watch(&h.root, &[]);
    let (quiet, second) = watch(&h.before_b, &[]);
    assert!(
        !quiet.contains("alarm"),
        "a quiet night raised an alarm: {quiet}"
    );
    let (slow, third) = watch(&h.merged_b, &[]);
    let (status, _) = watch("", &["status"]);
    eprintln!(
        "noise: nightly: nights of {:.1}, {:.1} and {:.1} s (the third with its hunt)",
        first.as_secs_f64(),
        second.as_secs_f64(),
        third.as_secs_f64()
    );
    eprintln!("{status}");
    assert!(
        status.contains("change #1: night 3, +")
            && status.contains(&format!(
                "regression of ms between {} and {}",
                &h.before_b[..12],
                &h.merged_b[..12]
            )),
        "{status}\n{slow}"
    );
    assert!(
        status.contains(&format!("culprit {}, confirmed", &h.culprit[..12])),
        "{status}\n{slow}"
    );
    // No checkout outlives its night or its hunt: a series runs for months.
    let worktrees = git_ok(&h.dir().join("watch-repo"), &["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "{worktrees}");
    for night in ["nights/0002", "nights/0003", "hunts/001"] {
        let trees = h.dir().join("state-nightly").join(night).join("trees");
        assert!(!trees.exists(), "{} is still there", trees.display());
    }
}
