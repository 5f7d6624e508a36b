//! Range options against git's own: `git bisect start -- <paths>`, `--first-parent`, several
//! goods and a diverged good, on random histories with files, written as real repositories.
//! For each, `git bisect run` with a scripted oracle and firstbad's search fed the same verdicts
//! must test the same commits in the same order and end the same way.

mod common;
use common::{git, git_ok};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use firstbad::history::{History, HistoryError, RangeOptions};
use firstbad::inputs::BuildInputs;
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

/// The files a commit's tree may hold; paths options pick among their directories. C sources:
/// pruning (issue 35) calls one that no build read "not built".
const FILES: [&str; 5] = ["a/x.c", "a/z.c", "b/y.c", "c.c", "d/e/f.c"];

/// A random history with files: commit `i`'s parents have smaller indices; the last is the tip.
struct Shape {
    parents: Vec<Vec<usize>>,
    files: Vec<BTreeMap<&'static str, String>>,
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

/// Random history: mainline, forks, merges (some taking files from the second parent, so that
/// git's simplification follows the side branch), the odd root; each commit changes zero to
/// two files, deletes one now and then. `stable`: every root holds every file and none is
/// deleted, so that every link only modifies files (the same random stream either way).
fn random_shape(rng: &mut Rng, n: usize, stable: bool) -> Shape {
    let all: BTreeMap<&'static str, String> = FILES
        .iter()
        .map(|&f| (f, format!("{f} at root\n")))
        .collect();
    let root = || if stable { all.clone() } else { BTreeMap::new() };
    let mut parents: Vec<Vec<usize>> = vec![vec![]];
    let mut files: Vec<BTreeMap<&'static str, String>> = vec![root()];
    let mut tips: Vec<usize> = vec![0];
    while parents.len() < n {
        let i = parents.len();
        let r = rng.below(100);
        let last = parents.len() == n - 1;
        let ps: Vec<usize> = if last {
            tips.clone()
        } else if (r < 20 && tips.len() >= 2) || tips.len() > 4 {
            let a = rng.below(tips.len());
            let mut b = rng.below(tips.len() - 1);
            if b >= a {
                b += 1;
            }
            let ps = vec![tips[a], tips[b]];
            tips[a] = i;
            if rng.chance(70) {
                tips.swap_remove(b);
            }
            ps
        } else if r < 30 {
            let p = rng.below(i);
            tips.push(i);
            vec![p]
        } else if r < 32 {
            tips.push(i);
            vec![]
        } else {
            let t = if rng.chance(50) {
                0
            } else {
                rng.below(tips.len())
            };
            let p = tips[t];
            tips[t] = i;
            vec![p]
        };
        let mut tree = ps.first().map_or_else(root, |&p| files[p].clone());
        if ps.len() > 1 {
            // Per file: keep the first parent's version or take another parent's.
            for f in FILES {
                if rng.chance(40) {
                    let from = ps[1 + rng.below(ps.len() - 1)];
                    match files[from].get(f) {
                        Some(v) => tree.insert(f, v.clone()),
                        None => tree.remove(f),
                    };
                }
            }
        }
        for _ in 0..rng.below(3) {
            let f = FILES[rng.below(FILES.len())];
            if rng.chance(10) && !stable {
                tree.remove(f);
            } else {
                tree.insert(f, format!("{f} at {i}\n"));
            }
        }
        parents.push(ps);
        files.push(tree);
    }
    Shape { parents, files }
}

/// Writes `shape` with `git fast-import` (full trees, one minute per commit); returns the ids.
fn write_repo(dir: &Path, shape: &Shape) -> Vec<String> {
    git_ok(dir, &["init", "-q", "-b", "main"]);
    let mut stream = String::new();
    for (i, ps) in shape.parents.iter().enumerate() {
        if ps.is_empty() {
            stream.push_str("reset refs/heads/main\n");
        }
        let msg = format!("c{i}\n");
        let t = 1_600_000_000 + 60 * i as i64;
        stream.push_str(&format!(
            "commit refs/heads/main\nmark :{}\nauthor A <a@example.org> {t} +0000\n\
             committer C <c@example.org> {t} +0000\ndata {}\n{msg}",
            i + 1,
            msg.len(),
        ));
        for (k, p) in ps.iter().enumerate() {
            let verb = if k == 0 { "from" } else { "merge" };
            stream.push_str(&format!("{verb} :{}\n", p + 1));
        }
        stream.push_str("deleteall\n");
        for (f, content) in &shape.files[i] {
            stream.push_str(&format!(
                "M 100644 inline {f}\ndata {}\n{content}",
                content.len()
            ));
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
    /// git: "No testable commit found" (only commits outside the paths are left).
    NoTestable,
}

/// `git bisect start [--first-parent] bad goods... [-- paths]` then `git bisect run` with the
/// oracle "bad iff `culprit` is an ancestor-or-self"; returns what git tested and the end.
fn git_bisect(
    dir: &Path,
    bad: &str,
    goods: &[&str],
    opts: &RangeOptions,
    culprit: &str,
) -> (Vec<(String, Verdict)>, End) {
    let script = dir.join("oracle.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nh=$(git rev-parse BISECT_HEAD)\n\
             git merge-base --is-ancestor {culprit} $h && exit 1\nexit 0\n"
        ),
    )
    .expect("write oracle");
    let mut start = vec!["bisect", "start", "--no-checkout"];
    if opts.first_parent {
        start.push("--first-parent");
    }
    start.push(bad);
    start.extend_from_slice(goods);
    if !opts.paths.is_empty() {
        start.push("--");
        start.extend(opts.paths.iter().map(String::as_str));
    }
    let started = git(dir, &start);
    let started_out = String::from_utf8_lossy(&started.stdout).into_owned();
    if String::from_utf8_lossy(&started.stderr).contains("No testable commit found") {
        // git refuses to start: not one commit in the range touches the paths.
        let _ = git(dir, &["bisect", "reset"]);
        return (Vec::new(), End::NoTestable);
    }
    if let Some(line) = started_out
        .lines()
        .find(|l| l.ends_with(" is the first bad commit"))
    {
        // The range holds one testable commit, bad itself: git answers at once (a `git
        // bisect run` now would only re-test bad).
        let _ = git(dir, &["bisect", "reset"]);
        let id = line.split_whitespace().next().expect("id").to_string();
        return (Vec::new(), End::Found(id));
    }
    let script_path = script.display().to_string();
    let run = git(dir, &["bisect", "run", "sh", &script_path]);
    let stdout = format!("{started_out}{}", String::from_utf8_lossy(&run.stdout));
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
    } else if String::from_utf8_lossy(&run.stderr).contains("No testable commit found")
        || String::from_utf8_lossy(&started.stderr).contains("No testable commit found")
    {
        End::NoTestable
    } else {
        panic!(
            "git bisect run ended oddly:\n{stdout}\n{}",
            String::from_utf8_lossy(&run.stderr)
        );
    };
    (tested, end)
}

/// firstbad's search over [`History::range`] with the same oracle.
fn our_bisect(
    dir: &Path,
    bad: &str,
    goods: &[&str],
    opts: &RangeOptions,
    is_bad: &dyn Fn(&str) -> bool,
) -> (Vec<(String, Verdict)>, End) {
    let history = History::open(dir).expect("open repo");
    let range = history.range(bad, goods, opts).expect("load range");
    let good_ids: Vec<&str> = range.goods.iter().map(|g| g.id.as_str()).collect();
    let mut b = Bisection::new(&range.dag, &range.bad.id, &good_ids).expect("start");
    let mut tested = Vec::new();
    loop {
        match b.next() {
            Next::Test(id) => {
                let v = if is_bad(&id) {
                    Verdict::Bad
                } else {
                    Verdict::Good
                };
                b.mark(&id, v).expect("oracle is consistent");
                tested.push((id, v));
                assert!(tested.len() <= range.dag.len(), "no progress");
            }
            Next::Found(id) => return (tested, End::Found(id)),
            // No skips here: only commits outside the paths are left (git: no testable commit).
            Next::OnlySkippedLeft(_) => return (tested, End::NoTestable),
        }
    }
}

/// One random case with paths and/or first-parent; returns (verdicts compared, ended found).
fn check_case(seed: u64, mode: usize) -> (usize, bool) {
    let mut rng = Rng::new(seed);
    let n = 20 + rng.below(181);
    let pruned = mode >= 3;
    let shape = random_shape(&mut rng, n, pruned);
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
        goods.push(rng.below(n - 1));
    }
    goods.sort_unstable();
    goods.dedup();
    let excluded = shape.ancestors(&goods);
    if excluded[bad] {
        return (0, false);
    }
    let candidates: Vec<usize> = (0..n).filter(|&i| !excluded[i]).collect();
    let culprit = candidates[rng.below(candidates.len())];
    let all_paths = ["a/", "b/y.c", "c.c", "d/", "a/z.c", "d/e/f.c"];
    let mut opts = RangeOptions::default();
    if pruned {
        // The files a kernel build read: git bisects `-- <them>`, firstbad prunes the links
        // that touch none of them (every link only modifies files in a stable shape).
        let mut read: Vec<&str> = FILES.to_vec();
        while read.len() > 1 && (read.len() > 3 || rng.chance(50)) {
            read.remove(rng.below(read.len()));
        }
        opts.paths = read.iter().map(|f| f.to_string()).collect();
    } else if mode != 1 {
        for _ in 0..1 + rng.below(2) {
            opts.paths
                .push(all_paths[rng.below(all_paths.len())].to_string());
        }
        opts.paths.dedup();
    }
    opts.first_parent = mode == 1 || mode == 2 || mode == 4;
    let good_ids: Vec<&str> = goods.iter().map(|&g| ids[g].as_str()).collect();
    let is_bad = |id: &str| shape.ancestors(&[index[id]])[culprit];
    let context =
        format!("seed {seed} mode {mode} n {n} goods {goods:?} culprit {culprit} {opts:?}");

    if std::env::var_os("RANGE_DEBUG").is_some() {
        let mut args = vec![
            "rev-list".to_string(),
            "--bisect-all".into(),
            ids[bad].clone(),
        ];
        args.extend(good_ids.iter().map(|g| format!("^{g}")));
        args.push("--".into());
        args.extend(opts.paths.iter().cloned());
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        for l in git_ok(dir, &a).lines() {
            let id = &l[..40];
            eprintln!("git {} {}", index[id], &l[40..]);
        }
        for (i, ps) in shape.parents.iter().enumerate() {
            if !excluded[i] {
                eprintln!("shape {i} {ps:?}");
            }
        }
    }
    let (git_tested, git_end) = git_bisect(dir, &ids[bad], &good_ids, &opts, &ids[culprit]);
    let ours = if pruned {
        let inputs = BuildInputs {
            files: opts.paths.iter().cloned().collect(),
            ..BuildInputs::default()
        };
        let goods: Vec<String> = good_ids.iter().map(|g| g.to_string()).collect();
        let links = History::open(dir)
            .expect("open repo")
            .unchanged_links(&ids[bad], &goods, opts.first_parent, &inputs)
            .expect("prune");
        RangeOptions {
            paths: Vec::new(),
            first_parent: opts.first_parent,
            unchanged: links.into_iter().map(|u| (u.commit, u.parent)).collect(),
        }
    } else {
        opts.clone()
    };
    let (our_tested, our_end) = our_bisect(dir, &ids[bad], &good_ids, &ours, &is_bad);
    let name = |v: &[(String, Verdict)]| {
        v.iter()
            .map(|(id, verdict)| format!("{}:{verdict:?}", index[id.as_str()]))
            .collect::<Vec<_>>()
    };
    // Pruned: the same bisection as firstbad's own `-- <inputs>` one, commit for commit; that
    // one follows git's except in the rare path-limited walks the search module's docs name
    // (one commit more or less, the same answer), where only the answers are compared.
    let mut ends_only = std::env::var_os("RANGE_ENDS_ONLY").is_some();
    if pruned {
        let (by_paths, _) = our_bisect(dir, &ids[bad], &good_ids, &opts, &is_bad);
        assert_eq!(
            name(&our_tested),
            name(&by_paths),
            "pruned and path-limited searches differ ({context})"
        );
        ends_only |= by_paths != git_tested;
    }
    // RANGE_ENDS_ONLY=1 compares only the answers (to study a known sequence difference).
    if !ends_only {
        assert_eq!(
            name(&our_tested),
            name(&git_tested),
            "tested sequence differs ({context})"
        );
    }
    assert_eq!(our_end, git_end, "outcome differs ({context})");
    (git_tested.len(), matches!(git_end, End::Found(_)))
}

fn check_cases(seeds: std::ops::RangeInclusive<u64>, mode: usize) {
    let (mut cases, mut verdicts, mut found) = (0, 0, 0);
    for seed in seeds {
        let (v, f) = check_case(seed, mode);
        cases += 1;
        verdicts += v;
        found += usize::from(f);
    }
    eprintln!("mode {mode}: {cases} histories, {verdicts} verdicts compared, {found} found");
    assert!(verdicts > cases, "the cases must exercise the search");
}

/// Seeds `default`, or `RANGE_SEEDS=first..=last` to try more (e.g. after a change).
fn seeds(default: std::ops::RangeInclusive<u64>) -> std::ops::RangeInclusive<u64> {
    std::env::var("RANGE_SEEDS")
        .ok()
        .and_then(|s| {
            let (a, b) = s.split_once("..=")?;
            Some(a.parse().ok()?..=b.parse().ok()?)
        })
        .unwrap_or(default)
}

#[test]
fn paths_bisect_exactly_like_git() {
    check_cases(seeds(1..=40), 0);
}

#[test]
fn first_parent_bisects_exactly_like_git() {
    check_cases(seeds(101..=130), 1);
}

#[test]
fn first_parent_with_paths_bisects_exactly_like_git() {
    check_cases(seeds(201..=220), 2);
}

// Issue 35: a range pruned by build inputs bisects as `git bisect start -- <the inputs>` does:
// the commits that touch no input are git's TREESAME commits.
#[test]
fn a_range_pruned_by_build_inputs_bisects_like_git_limited_to_them() {
    check_cases(seeds(301..=330), 3);
}

#[test]
fn a_pruned_first_parent_range_bisects_like_git_limited_to_the_inputs() {
    check_cases(seeds(401..=420), 4);
}

/// main: c0..c3; side forks from c1 with s1, s2; `other` is an unrelated root.
fn diverged_repo() -> (tempfile::TempDir, Vec<String>) {
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
    git_ok(dir, &["checkout", "-q", "side"]);
    git_ok(dir, &["commit", "-q", "--allow-empty", "-m", "s1"]);
    git_ok(dir, &["commit", "-q", "--allow-empty", "-m", "s2"]);
    git_ok(dir, &["checkout", "-q", "--orphan", "other"]);
    git_ok(dir, &["commit", "-q", "--allow-empty", "-m", "o"]);
    git_ok(dir, &["checkout", "-q", "main"]);
    let ids = ["main~3", "main~2", "main~1", "main", "side"]
        .iter()
        .map(|r| git_ok(dir, &["rev-parse", r]).trim().to_string())
        .collect();
    (tmp, ids)
}

#[test]
fn a_diverged_good_is_replaced_by_the_merge_base_and_said_so() {
    let (tmp, ids) = diverged_repo();
    let h = History::open(tmp.path()).expect("open");
    let r = h
        .range("main", &["side"], &RangeOptions::default())
        .expect("diverged good is bisectable from the merge base");
    // Merge base is c1: candidates c3, c2.
    assert_eq!(r.goods.len(), 1);
    assert_eq!(
        r.goods[0].id, ids[1],
        "the merge base c1 stands in for side"
    );
    assert_eq!(r.dag.len(), 2);
    assert_eq!(r.notes.len(), 1);
    assert!(
        r.notes[0].contains("merge base") && r.notes[0].contains("\"side\""),
        "{:?}",
        r.notes
    );
    // The same range as `git rev-list main ^$(git merge-base main side)`.
    let git_list = git_ok(tmp.path(), &["rev-list", "main", &format!("^{}", ids[1])]);
    let ours: Vec<&str> = r.dag.nodes().iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ours, git_list.lines().collect::<Vec<_>>());
}

#[test]
fn several_goods_swapped_equal_and_unrelated() {
    let (tmp, ids) = diverged_repo();
    let h = History::open(tmp.path()).expect("open");
    let o = RangeOptions::default();
    let r = h
        .range("main", &["main~3", "main~1"], &o)
        .expect("two goods");
    assert_eq!(r.dag.len(), 1, "only c3 is left");
    assert_eq!(r.dag.nodes()[0].id, ids[3]);
    let err = h.range("main~2", &["main"], &o).expect_err("swapped");
    assert!(matches!(err, HistoryError::GoodAfterBad { .. }), "{err:?}");
    assert!(err.to_string().contains("ancestor"), "{err}");
    let err = h.range("main", &["main"], &o).expect_err("equal");
    assert!(matches!(err, HistoryError::GoodEqualsBad { .. }), "{err:?}");
    let err = h.range("main", &["other"], &o).expect_err("unrelated");
    assert!(matches!(err, HistoryError::Unrelated { .. }), "{err:?}");
    assert!(err.to_string().contains("no common history"), "{err}");
    let bad_path = RangeOptions {
        paths: vec!["mm/*.c".into()],
        first_parent: false,
        ..RangeOptions::default()
    };
    let err = h.range("main", &["main~3"], &bad_path).expect_err("glob");
    assert!(matches!(err, HistoryError::BadPath { .. }), "{err:?}");
}
