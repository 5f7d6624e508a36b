//! Random commit DAGs written as real git repositories, with marker files: merges,
//! criss-cross merges, octopus merges and the odd unrelated root, all merged into the tip.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// xorshift64*: a tiny seeded generator, so that a failing case can be replayed by its seed.
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A value in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// True with `percent` % probability.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// A history: commit `i`'s parents all have smaller indices; the last commit is the tip.
pub struct Shape {
    /// Parents of each commit, in order.
    pub parents: Vec<Vec<usize>>,
}

impl Shape {
    /// Which commits are ancestors-or-self of `of`.
    pub fn ancestors(&self, of: &[usize]) -> Vec<bool> {
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

    /// Which commits are descendants-or-self of `of`.
    pub fn descendants(&self, of: usize) -> Vec<bool> {
        let mut d = vec![false; self.parents.len()];
        d[of] = true;
        for i in of + 1..self.parents.len() {
            d[i] = self.parents[i].iter().any(|&p| d[p]);
        }
        d
    }
}

/// A random history of `n` commits (`n` >= 3); `linear` percent of the steps extend the
/// mainline, the rest fork, merge (two or more parents, criss-cross) or start a new root.
pub fn random_shape(rng: &mut Rng, n: usize) -> Shape {
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
    Shape { parents }
}

/// A straight line of `n` commits.
pub fn linear_shape(n: usize) -> Shape {
    Shape {
        parents: (0..n)
            .map(|i| if i == 0 { vec![] } else { vec![i - 1] })
            .collect(),
    }
}

/// Writes `shape` as a git repository (branch `main`, checked out) with `git fast-import`;
/// commit `i` holds a file `n` with `i` in it, and each file of `files(i)` (path, content).
/// Returns each commit's id. Commits are a minute apart, in index order.
pub fn write_repo(
    dir: &Path,
    shape: &Shape,
    files: &dyn Fn(usize) -> Vec<(&'static str, String)>,
) -> Vec<String> {
    super::git_ok(dir, &["init", "-q", "-b", "main"]);
    let mut stream = String::new();
    for (i, ps) in shape.parents.iter().enumerate() {
        if ps.is_empty() {
            stream.push_str("reset refs/heads/main\n");
        }
        let msg = format!("c{i}\n");
        let t = 1_600_000_000 + 60 * i as i64;
        stream.push_str(&format!(
            "commit refs/heads/main\nmark :{}\nauthor A U Thor <a@example.org> {t} +0000\n\
             committer C O Mitter <c@example.org> {t} +0000\ndata {}\n{msg}",
            i + 1,
            msg.len(),
        ));
        for (k, p) in ps.iter().enumerate() {
            let verb = if k == 0 { "from" } else { "merge" };
            stream.push_str(&format!("{verb} :{}\n", p + 1));
        }
        // Every commit's whole tree, so that merges carry exactly the markers given.
        stream.push_str("deleteall\n");
        let mut all = vec![("n", format!("{i}\n"))];
        all.extend(files(i));
        for (path, content) in all {
            stream.push_str(&format!(
                "M 644 inline {path}\ndata {}\n{content}\n",
                content.len()
            ));
        }
        stream.push('\n');
    }
    let marks = dir.join(".git").join("marks");
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
    super::git_ok(dir, &["checkout", "-q", "-f", "main"]);
    ids
}
