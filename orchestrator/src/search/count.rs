//! git's weights: how many candidates each candidate reaches (`do_find_bisection`).
//!
//! git counts every merge with a walk of its whole ancestry (`count_distance`), one merge
//! after another in list order, then fills the single-parent commits in by propagation: a
//! commit reaches one more than its parent. On a kernel-shaped range of a million commits
//! with ~7% merges that is ~70,000 walks of up to a million commits each: git did not finish
//! in 16 minutes, and firstbad's copy of it took 24 minutes (issue 24).
//!
//! Here every candidate's count is computed from the oldest up. A single-parent commit
//! reaches one more than its parent, as in git's own propagation. Merges are counted 64 at a
//! time, one bit of a machine word each: every candidate holds the set of the batch's merges
//! that reach it, spread from child to parents in topological order, and a bit-sliced
//! counter adds the sets up. The walk down stops as soon as all that is left to reach passes
//! through one candidate whose count is already known (in a kernel-shaped history, a mainline
//! commit a few dozen below the batch), so a batch costs about the commits it spans. Batches
//! of a round are independent and run on every core. Only the arithmetic differs from git:
//! the weights are the same numbers, looked at in git's list order, so every early exit and
//! every choice is git's.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rayon::prelude::*;

use super::simplify::Csr;

/// Merges counted together: one bit each of a `u64`.
const BATCH: usize = 64;

/// Bit planes of the bit-sliced counter: counts up to 2^40, past any DAG's 2^32 nodes.
const PLANES: usize = 40;

/// The candidates of one step, renumbered `0..` in the DAG's order (children first, the bad
/// commit 0), with their parents among the candidates, and git's list over them.
pub(super) struct Step {
    /// DAG node index of each candidate.
    pub node: Vec<u32>,
    /// Parents inside the candidates (after simplification), in parent order.
    pub parents: Csr,
    /// The candidate changes none of the paths.
    pub treesame: Vec<bool>,
    /// git's list: its walk order reversed, oldest first.
    pub list: Vec<u32>,
    /// Candidates that are not TREESAME (git's `nr`).
    pub nr: i64,
}

impl Step {
    /// Renumbers the `alive` nodes (with `parents_of` their simplified parents) and walks them
    /// as git does: newest committer date first, ties first-in-first-out, each popped commit
    /// queueing its unseen parents in parent order. `bad` is the first alive node.
    pub(super) fn new<'a>(
        alive: &[bool],
        alive_count: usize,
        treesame: &[bool],
        time: impl Fn(usize) -> i64,
        parents_of: impl Fn(usize) -> &'a [u32],
    ) -> Step {
        const OUT: u32 = u32::MAX;
        let mut pos = vec![OUT; alive.len()];
        let mut node = Vec::with_capacity(alive_count);
        for (i, _) in alive.iter().enumerate().filter(|(_, &a)| a) {
            pos[i] = node.len() as u32;
            node.push(i as u32);
        }
        let mut parents = Csr::default();
        let mut sub_treesame = Vec::with_capacity(node.len());
        for &i in &node {
            let row = parents_of(i as usize).iter().map(|&p| pos[p as usize]);
            parents.push(row.filter(|&p| p != OUT));
            sub_treesame.push(treesame[i as usize]);
        }
        drop(pos);
        let mut seen = vec![false; node.len()];
        let mut queue = BinaryHeap::new();
        let mut ctr: u64 = 0;
        seen[0] = true;
        queue.push((time(node[0] as usize), Reverse(ctr), 0u32));
        let mut list = Vec::with_capacity(node.len());
        while let Some((_, _, i)) = queue.pop() {
            list.push(i);
            for &p in parents.row(i as usize) {
                if !seen[p as usize] {
                    seen[p as usize] = true;
                    ctr += 1;
                    queue.push((time(node[p as usize] as usize), Reverse(ctr), p));
                }
            }
        }
        list.reverse();
        let nr = list.iter().filter(|&&i| !sub_treesame[i as usize]).count() as i64;
        Step {
            node,
            parents,
            treesame: sub_treesame,
            list,
            nr,
        }
    }

    /// git's `do_find_bisection`: weights over the list (indexed by candidate). Returns the
    /// early-exit candidate when `early_exit` is set and one is approximately halfway, else
    /// `None` with all weights filled in.
    pub(super) fn weigh(&self, early_exit: bool) -> (Option<usize>, Vec<i64>) {
        let treesame = &self.treesame;
        let nr = self.nr;
        let halfway = |i: usize, w: i64| !treesame[i] && super::approx_halfway(w, nr);
        let mut weight = vec![0i64; self.node.len()];
        let mut counted = 0i64;
        let mut merges = Vec::new();
        for &i in &self.list {
            let i = i as usize;
            match self.parents.row(i).len() {
                // A TREESAME root reaches no counted commit: weight 0, not counted.
                0 if treesame[i] => weight[i] = 0,
                0 => {
                    weight[i] = 1;
                    counted += 1;
                }
                1 => weight[i] = -1,
                _ => {
                    weight[i] = -2;
                    merges.push(i as u32);
                }
            }
        }
        let reach = self.reach_counts();
        for &m in &merges {
            let m = m as usize;
            weight[m] = reach[m];
            if early_exit && halfway(m, weight[m]) {
                return (Some(m), weight);
            }
            counted += 1;
        }
        while counted < nr {
            for &i in &self.list {
                let i = i as usize;
                if weight[i] >= 0 {
                    continue;
                }
                let known = self
                    .parents
                    .row(i)
                    .iter()
                    .find(|&&p| weight[p as usize] >= 0);
                let Some(&q) = known else { continue };
                if treesame[i] {
                    weight[i] = weight[q as usize];
                } else {
                    weight[i] = weight[q as usize] + 1;
                    counted += 1;
                }
                if early_exit && halfway(i, weight[i]) {
                    return (Some(i), weight);
                }
            }
        }
        (None, weight)
    }

    /// How many candidates each candidate reaches, itself included, TREESAME ones left out:
    /// git's weight of every candidate, computed from the oldest up.
    ///
    /// A single-parent candidate reaches one more than its parent (none more if TREESAME).
    /// Merges are counted in rounds of one batch of 64 per core, going up; a batch's walk
    /// down stops where everything its merges still reach passes through one candidate whose
    /// count is already known, typically a mainline commit a few dozen below the batch in a
    /// kernel-shaped history, so that a round costs about the candidates it spans rather than
    /// everything below it.
    fn reach_counts(&self) -> Vec<i64> {
        const UNKNOWN: i64 = -1;
        let len = self.node.len();
        let threads = rayon::current_num_threads().max(1);
        let mut reach = vec![UNKNOWN; len];
        let mut buffers: Vec<Vec<u64>> = (0..threads).map(|_| vec![0u64; len]).collect();
        let mut merges = Vec::with_capacity(BATCH * threads);
        let mut waiting = Vec::new();
        let mut next = len;
        while next > 0 {
            merges.clear();
            waiting.clear();
            while next > 0 && merges.len() < BATCH * threads {
                next -= 1;
                let own = i64::from(!self.treesame[next]);
                match self.parents.row(next) {
                    [] => reach[next] = own,
                    [p] if reach[*p as usize] != UNKNOWN => reach[next] = reach[*p as usize] + own,
                    // Its parent is a merge of this round, or waits on one.
                    [_] => waiting.push(next),
                    _ => merges.push(next as u32),
                }
            }
            let known = &reach;
            let counts: Vec<[i64; BATCH]> = merges
                .par_chunks(BATCH)
                .zip(buffers.par_iter_mut())
                .map(|(batch, bits)| self.count_batch(batch, bits, known))
                .collect();
            for (batch, counts) in merges.chunks(BATCH).zip(&counts) {
                for (&m, &w) in batch.iter().zip(counts) {
                    reach[m as usize] = w;
                }
            }
            // Oldest first: each one's parent is counted by now.
            for &i in &waiting {
                let p = self.parents.row(i)[0] as usize;
                reach[i] = reach[p] + i64::from(!self.treesame[i]);
            }
        }
        reach
    }

    /// git's `count_distance` for up to 64 merges at once: for each, the candidates it
    /// reaches, itself included, TREESAME ones left out. `known` holds the counts known so far
    /// (negative when not). `reach` is all zero on entry and is left so.
    fn count_batch(&self, batch: &[u32], reach: &mut [u64], known: &[i64]) -> [i64; BATCH] {
        let mut from = reach.len();
        for (bit, &m) in batch.iter().enumerate() {
            reach[m as usize] |= 1 << bit;
            from = from.min(m as usize);
        }
        // Candidates holding bits not yet spread to their parents.
        let mut pending = batch.len();
        // Bit-sliced counter: plane k holds bit k of each merge's count.
        let mut planes = [0u64; PLANES];
        // The merges (bits) that reach the last candidate, counted in one go, and its count.
        let mut rest = (0u64, 0i64);
        // Children come first: when a candidate is reached, everything that reaches it has
        // already spread its bits to it.
        for i in from..reach.len() {
            let bits = reach[i];
            if bits == 0 {
                continue;
            }
            reach[i] = 0;
            if pending == 1 && known[i] >= 0 {
                // All that is left to reach is reached through this one, already counted.
                rest = (bits, known[i]);
                break;
            }
            pending -= 1;
            for &p in self.parents.row(i) {
                let p = p as usize;
                pending += usize::from(reach[p] == 0);
                reach[p] |= bits;
            }
            if !self.treesame[i] {
                let mut carry = bits;
                for plane in planes.iter_mut() {
                    if carry == 0 {
                        break;
                    }
                    let next = *plane & carry;
                    *plane ^= carry;
                    carry = next;
                }
            }
        }
        let mut counts = [0i64; BATCH];
        for (bit, count) in counts.iter_mut().enumerate().take(batch.len()) {
            let sliced: i64 = planes
                .iter()
                .enumerate()
                .map(|(k, plane)| (((plane >> bit) & 1) as i64) << k)
                .sum();
            *count = sliced + if (rest.0 >> bit) & 1 == 1 { rest.1 } else { 0 };
        }
        counts
    }
}
