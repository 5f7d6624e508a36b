//! Rounds of testing against the number of hosts K on a 16,384-commit range, with the
//! parallel choice of `Bisection::next_parallel` and a simulated, noiseless oracle.
//!
//! `cargo bench -p firstbad --bench parallel_rounds`. Pure computation: no git, no hosts.

use std::time::Instant;

use firstbad::search::{Bisection, Dag, Next, Node, Verdict};

/// Commits in the range.
const COMMITS: usize = 16_384;
/// Culprits tried per K, spread evenly over the range.
const CULPRITS: usize = 128;

/// A kernel-like range: a mainline where ~8% of steps merge a topic branch of 1-3 commits
/// forked up to 30 commits back. Listed children first, as `Dag` wants.
fn range() -> Dag {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut below = |n: usize| {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
    };
    // Built oldest first, then reversed.
    let mut parents: Vec<Vec<usize>> = vec![vec![]];
    let mut main = 0usize;
    while parents.len() < COMMITS - 1 {
        let i = parents.len();
        if below(100) < 8 && i + 4 < COMMITS - 1 {
            let base = main.saturating_sub(below(30));
            let len = 1 + below(3);
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
    parents.push(vec![main]);
    let n = parents.len();
    let nodes = (0..n)
        .rev()
        .map(|old| Node {
            id: format!("{old:040x}"),
            parents: parents[old].iter().map(|&p| n - 1 - p).collect(),
            commit_time: old as i64,
        })
        .collect();
    Dag::new(nodes).expect("valid range")
}

fn main() {
    let dag = range();
    let n = dag.len();
    // ancestors_of[c] as a closure over the oldest-first numbering: commit ids encode it.
    let old_of = |id: &str| usize::from_str_radix(id, 16).expect("hex id");
    // For each commit, its ancestors as a bitset would be large; walk on demand instead.
    let reaches = |from: usize, target: usize| -> bool {
        let mut seen = vec![false; n];
        let mut stack = vec![n - 1 - from];
        while let Some(i) = stack.pop() {
            if n - 1 - i == target {
                return true;
            }
            for &p in &dag.nodes()[i].parents {
                if !seen[p] {
                    seen[p] = true;
                    stack.push(p);
                }
            }
        }
        false
    };
    println!("{n} commits with merges; {CULPRITS} culprits spread over the range per K");
    println!("| K hosts | mean rounds | max rounds | log_(K+1) N | commits tested (mean) |");
    println!("|---:|---:|---:|---:|---:|");
    let t = Instant::now();
    for k in [1usize, 2, 3, 4, 7, 8, 15] {
        let (mut total, mut worst, mut tested) = (0usize, 0usize, 0usize);
        for j in 0..CULPRITS {
            // Skip the root (it is good by construction: git's range excludes it too).
            let culprit = 1 + j * (n - 2) / (CULPRITS - 1);
            let mut b = Bisection::new(&dag, &dag.nodes()[0].id, &["root"]).expect("start");
            let mut rounds = 0;
            let found = loop {
                match b.next() {
                    Next::Found(id) => break id,
                    Next::Test(_) => {}
                    other => panic!("{other:?}"),
                }
                rounds += 1;
                for id in b.next_parallel(k) {
                    tested += 1;
                    let v = if reaches(old_of(&id), culprit) {
                        Verdict::Bad
                    } else {
                        Verdict::Good
                    };
                    b.mark_result(&id, v).expect("consistent oracle");
                }
            };
            assert_eq!(old_of(&found), culprit, "K = {k}: wrong culprit");
            total += rounds;
            worst = worst.max(rounds);
        }
        println!(
            "| {k} | {:.2} | {worst} | {:.2} | {:.1} |",
            total as f64 / CULPRITS as f64,
            (n as f64).ln() / ((k + 1) as f64).ln(),
            tested as f64 / CULPRITS as f64
        );
    }
    eprintln!("({:.1} s)", t.elapsed().as_secs_f64());
}
