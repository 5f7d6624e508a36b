//! firstbad's bisection against git's own: random commit DAGs are written as real git
//! repositories, `git bisect run` bisects them with a scripted oracle, and the commits git tested,
//! in order, must be the commits firstbad's search chooses when fed the same verdicts.

mod common;
use common::{git, git_ok};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use firstbad::history::{History, HistoryError};
use firstbad::search::{Bisection, Next, Verdict};

/// xorshift64*: a tiny seeded generator, so that a failing case can be replayed by its seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// A generated history: commit `i`'s parents all have smaller indices; the last commit is the tip.
struct Shape {
    parents: Vec<Vec<usize>>,
    times: Vec<i64>,
}

impl Shape {
    fn ancestors(&self, of: &[usize]) -> Vec<bool> {
        let mut seen = vec![false; self.parents.len()];
        let mut stack: Vec<usize> = of.to_vec();
        for &s in of {
            seen[s] = true;
        }
        while let Some(i) = stack.pop() {
            for &p in &self.parents[i] {
                if !seen[p] {
                    seen[p] = true;
                    stack.push(p);
                }
            }
        }
        seen
    }
}

/// Random history of `n` commits: long linear runs, forks, merges, criss-cross merges, octopus
/// merges and the odd unrelated root, all merged into the final commit. Commit times follow
/// `time_mode`: 0 strictly increasing, 1 runs of equal seconds, 2 all equal, 3 each commit at
/// or after its newest parent (ties across branches).
fn random_shape(rng: &mut Rng, n: usize, time_mode: usize) -> Shape {
    let mut parents: Vec<Vec<usize>> = vec![vec![]];
    let mut tips: Vec<usize> = vec![0];
    while parents.len() < n - 1 {
        let i = parents.len();
        let r = rng.below(100);
        if r < 3 && tips.len() >= 3 {
            // Octopus merge of three or four tips.
            let k = 3 + rng.below(2).min(tips.len() - 3);
            let mut ps = Vec::new();
            for _ in 0..k {
                ps.push(tips.swap_remove(rng.below(tips.len())));
            }
            parents.push(ps);
            tips.push(i);
        } else if r < 9 && tips.len() >= 2 && i + 2 < n {
            // Criss-cross: each of two branches merges the other's tip.
            let a = rng.below(tips.len());
            let mut b = rng.below(tips.len() - 1);
            if b >= a {
                b += 1;
            }
            let (ta, tb) = (tips[a], tips[b]);
            parents.push(vec![ta, tb]);
            parents.push(vec![tb, ta]);
            tips[a] = i;
            tips[b] = i + 1;
        } else if (r < 22 && tips.len() >= 2) || tips.len() > 5 {
            // Merge one tip into another; sometimes the merged branch lives on.
            let a = rng.below(tips.len());
            let mut b = rng.below(tips.len() - 1);
            if b >= a {
                b += 1;
            }
            parents.push(vec![tips[a], tips[b]]);
            tips[a] = i;
            if rng.chance(70) {
                tips.swap_remove(b);
            }
        } else if r < 32 {
            // Fork from anywhere in the past.
            parents.push(vec![rng.below(i)]);
            tips.push(i);
        } else if r < 33 {
            // An unrelated root (a subtree merge brings in a whole history).
            parents.push(vec![]);
            tips.push(i);
        } else {
            // Extend a branch; the first is the mainline and gets most commits.
            let t = if rng.chance(50) {
                0
            } else {
                rng.below(tips.len())
            };
            parents.push(vec![tips[t]]);
            tips[t] = i;
        }
    }
    parents.push(tips.clone());
    let run = 2 + rng.below(5) as i64;
    let mut times: Vec<i64> = Vec::with_capacity(n);
    for (i, ps) in parents.iter().enumerate() {
        let base = 1_600_000_000;
        let t = match time_mode {
            0 => base + 60 * i as i64,
            1 => base + 60 * (i as i64 / run),
            2 => base,
            _ => {
                let newest = ps.iter().map(|&p| times[p]).max().unwrap_or(base);
                newest + 60 * rng.below(3) as i64
            }
        };
        times.push(t);
    }
    Shape { parents, times }
}

/// Writes `shape` as a git repository with `git fast-import`; returns each commit's id.
fn write_repo(dir: &Path, shape: &Shape) -> Vec<String> {
    git_ok(dir, &["init", "-q", "-b", "main"]);
    let mut stream = String::new();
    for (i, ps) in shape.parents.iter().enumerate() {
        if ps.is_empty() {
            stream.push_str("reset refs/heads/main\n");
        }
        let msg = format!("c{i}\n");
        stream.push_str(&format!(
            "commit refs/heads/main\nmark :{}\nauthor A U Thor <a@example.org> {t} +0000\n\
             committer C O Mitter <c@example.org> {t} +0000\ndata {}\n{msg}",
            i + 1,
            msg.len(),
            t = shape.times[i],
        ));
        for (k, p) in ps.iter().enumerate() {
            let verb = if k == 0 { "from" } else { "merge" };
            stream.push_str(&format!("{verb} :{}\n", p + 1));
        }
        stream.push('\n');
    }
    let marks = dir.join("marks");
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .arg(format!("--export-marks={}", marks.display()))
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(Stdio::piped())
        .spawn()
        .expect("git fast-import starts");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(stream.as_bytes())
        .expect("fast-import reads the stream");
    assert!(child.wait().expect("fast-import ends").success());
    let mut ids = vec![String::new(); shape.parents.len()];
    for line in std::fs::read_to_string(&marks).expect("marks file").lines() {
        let (mark, id) = line.split_once(' ').expect("mark line");
        let m: usize = mark.trim_start_matches(':').parse().expect("mark number");
        ids[m - 1] = id.to_string();
    }
    ids
}

/// How a bisection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    Found(String),
    OnlySkipped(Vec<String>),
}

/// Runs `git bisect run` with the oracle "bad iff `culprit` is an ancestor-or-self, skip the
/// commits in `skips`"; returns what git tested, in order, and how it ended.
fn git_bisect(
    dir: &Path,
    bad: &str,
    goods: &[&str],
    culprit: &str,
    skips: &[String],
) -> (Vec<(String, Verdict)>, End) {
    let script = dir.join("oracle.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nh=$(git rev-parse BISECT_HEAD)\ncase \" {} \" in *\" $h \"*) exit 125;; esac\n\
             git merge-base --is-ancestor {culprit} $h && exit 1\nexit 0\n",
            skips.join(" ")
        ),
    )
    .expect("write oracle");
    let mut start = vec!["bisect", "start", "--no-checkout", bad];
    start.extend_from_slice(goods);
    git_ok(dir, &start);
    let script_path = script.display().to_string();
    let run = git(dir, &["bisect", "run", "sh", &script_path]);
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let log = git_ok(dir, &["bisect", "log"]);
    git_ok(dir, &["bisect", "reset"]);

    let mut tested = Vec::new();
    for line in log.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let ["git", "bisect", verdict, id] = words[..] {
            let v = match verdict {
                "good" => Verdict::Good,
                "bad" => Verdict::Bad,
                "skip" => Verdict::Skip,
                other => panic!("unexpected log line {other}: {line}"),
            };
            tested.push((id.to_string(), v));
        }
    }
    let end = if let Some(line) = stdout
        .lines()
        .find(|l| l.ends_with(" is the first bad commit"))
    {
        End::Found(line.split_whitespace().next().expect("id").to_string())
    } else if let Some(pos) = stdout.find("The first bad commit could be any of:\n") {
        let rest = &stdout[pos..];
        End::OnlySkipped(
            rest.lines()
                .skip(1)
                .take_while(|l| !l.starts_with("We cannot bisect more"))
                .map(str::to_string)
                .collect(),
        )
    } else {
        panic!(
            "git bisect run ended oddly:\n{stdout}\n{}",
            String::from_utf8_lossy(&run.stderr)
        );
    };
    (tested, end)
}

/// Runs firstbad's search over the range loaded by history.rs with the same oracle.
fn our_bisect(
    dir: &Path,
    bad: &str,
    goods: &[&str],
    is_bad: &dyn Fn(&str) -> bool,
    skips: &[String],
) -> (Vec<(String, Verdict)>, End) {
    let history = History::open(dir).expect("open repo");
    let dag = history.load_range(bad, goods).expect("load range");
    let mut b = Bisection::new(&dag, bad, goods).expect("start");
    let mut tested = Vec::new();
    loop {
        match b.next() {
            Next::Test(id) => {
                let v = if skips.contains(&id) {
                    Verdict::Skip
                } else if is_bad(&id) {
                    Verdict::Bad
                } else {
                    Verdict::Good
                };
                b.mark(&id, v).expect("oracle is consistent");
                tested.push((id, v));
                assert!(tested.len() <= dag.len(), "no progress");
            }
            Next::Found(id) => return (tested, End::Found(id)),
            Next::OnlySkippedLeft(ids) => return (tested, End::OnlySkipped(ids)),
        }
    }
}

/// One random case: a repository, a range, a culprit, maybe skips; asserts firstbad == git.
fn check_case(seed: u64, with_skips: bool) -> (usize, usize, bool) {
    let mut rng = Rng::new(seed);
    let n = 20 + rng.below(281);
    let time_mode = rng.below(4);
    let shape = random_shape(&mut rng, n, time_mode);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let ids = write_repo(dir, &shape);
    let index: HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), i))
        .collect();

    let bad = n - 1;
    let mut goods: Vec<usize> = vec![rng.below(n / 2)];
    if rng.chance(30) {
        for _ in 0..1 + rng.below(2) {
            goods.push(rng.below(n - 1));
        }
    }
    goods.sort_unstable();
    goods.dedup();
    let excluded = shape.ancestors(&goods);
    let candidates: Vec<usize> = (0..n).filter(|&i| !excluded[i]).collect();
    let culprit = candidates[rng.below(candidates.len())];
    let skips: Vec<String> = if with_skips {
        let percent = 10 + rng.below(40);
        candidates
            .iter()
            .filter(|_| rng.chance(percent))
            .map(|&i| ids[i].clone())
            .collect()
    } else {
        Vec::new()
    };

    let good_ids: Vec<&str> = goods.iter().map(|&g| ids[g].as_str()).collect();
    let is_bad = |id: &str| shape.ancestors(&[index[id]])[culprit];
    let context = format!(
        "seed {seed} n {n} time_mode {time_mode} goods {goods:?} culprit {culprit} skips {}",
        skips.len()
    );

    let (git_tested, git_end) = git_bisect(dir, &ids[bad], &good_ids, &ids[culprit], &skips);
    let (our_tested, our_end) = our_bisect(dir, &ids[bad], &good_ids, &is_bad, &skips);
    let name = |v: &[(String, Verdict)]| {
        v.iter()
            .map(|(id, verdict)| format!("{}:{verdict:?}", index[id.as_str()]))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        name(&our_tested),
        name(&git_tested),
        "tested sequence differs ({context})"
    );
    assert_eq!(our_end, git_end, "outcome differs ({context})");
    match &our_end {
        End::Found(id) => assert_eq!(id, &ids[culprit], "wrong culprit ({context})"),
        End::OnlySkipped(range) => assert!(
            range.contains(&ids[culprit]),
            "culprit outside the reported range ({context})"
        ),
    }
    let merges = shape.parents.iter().filter(|p| p.len() > 1).count();
    (
        git_tested.len(),
        merges,
        matches!(git_end, End::OnlySkipped(_)),
    )
}

/// Runs the cases for `seeds`, printing how much was compared.
fn check_cases(seeds: std::ops::RangeInclusive<u64>, with_skips: bool) {
    let t = Instant::now();
    let (mut cases, mut steps, mut merges, mut only_skipped) = (0, 0, 0, 0);
    for seed in seeds {
        let (s, m, o) = check_case(seed, with_skips);
        cases += 1;
        steps += s;
        merges += m;
        only_skipped += usize::from(o);
    }
    eprintln!(
        "{cases} histories (skips: {with_skips}): {steps} verdicts compared, {merges} merges, \
         {only_skipped} ended with only skipped commits left, {:?}",
        t.elapsed()
    );
}

#[test]
fn random_histories_bisect_exactly_like_git() {
    check_cases(1..=50, false);
}

#[test]
fn random_histories_with_skips_bisect_exactly_like_git() {
    check_cases(1001..=1030, true);
}

/// A small repository for the error cases: main has c0..c3, side forks from c1, and an
/// unrelated root lives on `other`.
fn error_repo() -> (tempfile::TempDir, History) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    git_ok(dir, &["init", "-q", "-b", "main"]);
    for i in 0..4 {
        git_ok(
            dir,
            &["commit", "-q", "--allow-empty", "-m", &format!("c{i}")],
        );
        if i == 1 {
            git_ok(dir, &["branch", "side"]);
        }
    }
    git_ok(dir, &["tag", "-a", "-m", "v", "v1", "HEAD~2"]);
    git_ok(dir, &["checkout", "-q", "side"]);
    git_ok(dir, &["commit", "-q", "--allow-empty", "-m", "s"]);
    git_ok(dir, &["checkout", "-q", "--orphan", "other"]);
    git_ok(dir, &["commit", "-q", "--allow-empty", "-m", "o"]);
    git_ok(dir, &["checkout", "-q", "main"]);
    let history = History::open(dir).expect("open");
    (tmp, history)
}

#[test]
fn revision_syntax_resolves_like_git() {
    let (tmp, repo) = error_repo();
    for spec in ["main~2", "v1", "v1^{commit}", "main@{0}", ":/c2", "side^"] {
        let ours = repo.resolve(spec).expect("resolves");
        let named = git_ok(tmp.path(), &["rev-parse", spec]);
        let theirs = git_ok(
            tmp.path(),
            &["rev-parse", &format!("{}^{{commit}}", named.trim())],
        );
        assert_eq!(ours, theirs.trim(), "{spec}");
    }
    let dag = repo.load_range("main", &["v1"]).expect("range");
    assert_eq!(dag.len(), 2);
    let info = repo.info(&dag.nodes()[0].id).expect("info");
    assert_eq!(info.subject, "c3");
    assert_eq!(info.author, "T <t@example.org>");
    let git_date = git_ok(
        tmp.path(),
        &["log", "-1", "--format=%ad", "--date=iso", "main"],
    );
    assert_eq!(info.date, git_date.trim());
}

#[test]
fn nonexistent_revision_is_named() {
    let (_tmp, repo) = error_repo();
    let err = repo
        .load_range("main", &["no-such-tag"])
        .expect_err("must fail");
    assert!(
        matches!(err, HistoryError::RevisionNotFound { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("\"no-such-tag\""), "{err}");
    let err = repo.load_range("main^{tree}", &["v1"]).expect_err("a tree");
    assert!(matches!(err, HistoryError::NotACommit { .. }), "{err:?}");
}

#[test]
fn good_not_ancestor_of_bad_is_an_error_naming_both() {
    let (_tmp, repo) = error_repo();
    let err = repo.load_range("main", &["side"]).expect_err("diverged");
    assert!(
        matches!(err, HistoryError::GoodNotAncestor { .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("\"side\"") && msg.contains("\"main\""),
        "{msg}"
    );
    let err = repo.load_range("v1", &["main"]).expect_err("swapped");
    assert!(matches!(err, HistoryError::GoodAfterBad { .. }), "{err:?}");
    assert!(err.to_string().contains("swap"), "{err}");
    let err = repo.load_range("main", &["other"]).expect_err("unrelated");
    assert!(matches!(err, HistoryError::Unrelated { .. }), "{err:?}");
}

#[test]
fn good_equal_to_bad_is_an_error() {
    let (_tmp, repo) = error_repo();
    let err = repo.load_range("main~2", &["v1"]).expect_err("same commit");
    assert!(matches!(err, HistoryError::GoodEqualsBad { .. }), "{err:?}");
    assert!(err.to_string().contains("nothing to bisect"), "{err}");
}

/// A kernel-like history of about `n` commits: a mainline with a merge every ~12 commits of
/// topic branches of 1..3 commits forked up to 30 commits back. Returns the parents and the tip.
fn kernel_shape(rng: &mut Rng, n: usize) -> (Vec<Vec<usize>>, usize) {
    let mut parents: Vec<Vec<usize>> = vec![vec![]];
    let mut main: usize = 0;
    while parents.len() < n {
        let i = parents.len();
        if rng.chance(8) && i + 4 < n {
            // A topic branch of 1..3 commits forked a little back, merged into mainline.
            let base = main.saturating_sub(rng.below(30));
            let len = 1 + rng.below(3);
            let mut tip = base;
            for k in 0..len {
                parents.push(vec![tip]);
                tip = i + k;
            }
            parents.push(vec![main, tip]);
            main = parents.len() - 1;
        } else {
            parents.push(vec![main]);
            main = i;
        }
    }
    if main != parents.len() - 1 {
        let last = parents.len();
        parents.push(vec![main]);
        main = last;
    }
    (parents, main)
}

/// Issue 24: merges are counted 64 to a machine word, in batches over several cores. On
/// kernel-shaped ranges with a few hundred merges (several words), with runs of commits in
/// the same second and with skips, every commit tested and the outcome must still be git's.
#[test]
fn kernel_shaped_ranges_with_hundreds_of_merges_bisect_exactly_like_git() {
    for seed in 1..=4u64 {
        let mut rng = Rng::new(2400 + seed);
        let (parents, tip) = kernel_shape(&mut rng, 3000);
        let n = parents.len();
        // Odd seeds stamp runs of three commits with the same second, as `git am` does.
        let run = if seed % 2 == 1 { 3 } else { 1 };
        let times = (0..n).map(|i| 1_000_000_000 + (i / run) as i64).collect();
        let shape = Shape { parents, times };
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        let ids = write_repo(dir, &shape);
        let index: HashMap<&str, usize> = ids
            .iter()
            .enumerate()
            .map(|(i, s)| (s.as_str(), i))
            .collect();
        let culprit = 1 + rng.below(n - 1);
        let skips: Vec<String> = if seed > 2 {
            (1..n)
                .filter(|_| rng.chance(5))
                .map(|i| ids[i].clone())
                .collect()
        } else {
            Vec::new()
        };
        let is_bad = |id: &str| shape.ancestors(&[index[id]])[culprit];
        let good = [ids[0].as_str()];
        let (git_tested, git_end) = git_bisect(dir, &ids[tip], &good, &ids[culprit], &skips);
        let (our_tested, our_end) = our_bisect(dir, &ids[tip], &good, &is_bad, &skips);
        let context = format!("seed {seed} n {n} culprit {culprit} skips {}", skips.len());
        assert_eq!(
            our_tested, git_tested,
            "tested sequence differs ({context})"
        );
        assert_eq!(our_end, git_end, "outcome differs ({context})");
    }
}

/// 50 000 commits, kernel-like: a mainline with a merge every ~12 commits of short topic
/// branches. Loading the range and choosing the first commit must work at that size.
#[test]
fn kernel_sized_range_loads_and_chooses() {
    let mut rng = Rng::new(7);
    let (parents, main) = kernel_shape(&mut rng, 50_000);
    let times = (0..parents.len())
        .map(|i| 1_000_000_000 + i as i64)
        .collect();
    let shape = Shape { parents, times };
    let tmp = tempfile::tempdir().expect("tempdir");
    let ids = write_repo(tmp.path(), &shape);
    let history = History::open(tmp.path()).expect("open");

    let t = Instant::now();
    let dag = history.load_range(&ids[main], &[&ids[0]]).expect("range");
    let load = t.elapsed();
    let b = Bisection::new(&dag, &ids[main], &[&ids[0]]).expect("start");
    let t = Instant::now();
    let next = b.next();
    let choose = t.elapsed();
    eprintln!(
        "{} candidates: load {load:?}, first choice {choose:?}, {} steps left",
        b.remaining(),
        b.steps_left()
    );
    assert!(matches!(next, Next::Test(_)));
    // Alone on this 2-core box it loads in ~0.75 s (debug or release: the time is libgit2's)
    // and chooses in ~0.3 s (release). The times are printed, not asserted: under a loaded CI
    // machine a bound flakes (5.4 s once, with a kernel build and a simulation beside it), and
    // the figures that matter are the benchmark's against git itself (benches/load_range.rs).
}
