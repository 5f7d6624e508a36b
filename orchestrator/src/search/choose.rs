//! The next commit to test: git's own choice, and the K-way parallel one.

use super::skip::{self, Pick};
use super::{Bisection, Next};

impl Bisection {
    /// The next step, chosen exactly as `git bisect next` would choose it.
    pub fn next(&self) -> Next {
        let dag = &self.dag;
        let step = self.step();
        let id = |sub: usize| dag.id(step.node[sub] as usize).to_string();
        if step.nr == 0 {
            // git: "No testable commit found. Maybe you started with bad path arguments?"
            // The culprit is one of these commits, none of which touches the paths.
            let left = step.list.iter().rev().map(|&i| id(i as usize)).collect();
            return Next::OnlySkippedLeft(left);
        }
        let nr = step.nr;
        let distance = |w: i64| w.min(nr - w);
        // The bad commit is the first candidate.
        let bad = 0;

        if !self.any_skip {
            let (early, weight) = step.weigh(true);
            let chosen = early.unwrap_or_else(|| {
                // best_bisection: the first commit in list order with the best split.
                let mut best = step.list[0] as usize;
                let mut best_distance = -1;
                for &i in step.list.iter().filter(|&&i| !step.treesame[i as usize]) {
                    let d = distance(weight[i as usize]);
                    if d > best_distance {
                        best = i as usize;
                        best_distance = d;
                    }
                }
                best
            });
            return if chosen == bad {
                Next::Found(id(chosen))
            } else {
                Next::Test(id(chosen))
            };
        }

        // Something was skipped at some point: git's FIND_BISECTION_ALL path.
        let (_, weight) = step.weigh(false);
        let ids = |v: &[usize]| v.iter().map(|&i| dag.id(i).to_string()).collect::<Vec<_>>();
        match skip::pick(dag, &step, &weight, &self.skipped, self.bad) {
            Pick::AllSkipped(tried) => Next::OnlySkippedLeft(ids(&tried)),
            Pick::Chosen(c, tried) if c == bad => {
                if tried.is_empty() {
                    Next::Found(id(c))
                } else {
                    let mut range = ids(&tried);
                    range.push(id(c));
                    Next::OnlySkippedLeft(range)
                }
            }
            Pick::Chosen(c, _) => Next::Test(id(c)),
        }
    }

    /// Up to `k` commits to test at once on `k` idle hosts, chosen so that their verdicts split
    /// the candidates into `k + 1` near-equal parts: the `j`-th is the untested commit whose
    /// count of ancestors in the set is closest to `j * N / (k + 1)`. With `k = 1` this is git's
    /// own choice ([`Bisection::next`]). Empty when [`Bisection::next`] is not a test. Apply
    /// the verdicts with [`Bisection::mark_result`] in any order as they arrive.
    pub fn next_parallel(&self, k: usize) -> Vec<String> {
        let first = match self.next() {
            Next::Test(id) => id,
            _ => return Vec::new(),
        };
        if k <= 1 {
            return vec![first];
        }
        let step = self.step();
        let (_, weight) = step.weigh(false);
        let testable: Vec<usize> = step
            .list
            .iter()
            .map(|&i| i as usize)
            .filter(|&i| !step.treesame[i] && !self.skipped[step.node[i] as usize] && i != 0)
            .collect();
        let nr = step.nr;
        let mut chosen: Vec<usize> = Vec::with_capacity(k);
        for j in 1..=k as i64 {
            // Rounded j * nr / (k + 1): the weight that ends the j-th of k + 1 parts.
            let target = (2 * j * nr + k as i64 + 1) / (2 * (k as i64 + 1));
            let best = testable
                .iter()
                .copied()
                .filter(|c| !chosen.contains(c))
                .min_by_key(|&c| (weight[c] - target).abs());
            match best {
                Some(c) => chosen.push(c),
                None => break,
            }
        }
        chosen.sort_by_key(|&c| weight[c]);
        chosen.dedup();
        chosen
            .into_iter()
            .map(|c| self.dag.id(step.node[c] as usize).to_string())
            .collect()
    }
}
