//! git's choice once anything was skipped (`best_bisection_sorted`, `skip_away`), its
//! pseudo-random numbers, and its step estimate.

use std::cmp::Ordering;

use super::count::Step;
use super::dag::Dag;

/// git's `PRN_MODULO`: the range of its pseudo-random numbers.
pub(super) const PRN_MODULO: i32 = 32768;

/// git's `get_prn`: `man 3 rand`'s LCG, seeded with `count` (bisect.c).
pub(super) fn get_prn(count: u32) -> i32 {
    let next = count.wrapping_mul(1_103_515_245).wrapping_add(12_345);
    // The result is below 32768, so the cast is lossless.
    ((next / 65_536) % PRN_MODULO as u32) as i32
}

/// git's `sqrti`: Newton's integer square root in single-precision floats, replicated with
/// `f32` so that rounding matches.
pub(super) fn sqrti(val: i32) -> i32 {
    if val == 0 {
        return 0;
    }
    let v = val as f32;
    let mut x = v;
    loop {
        let y = (x + v / x) / 2.0;
        let d = if y > x { y - x } else { x - y };
        x = y;
        if d < 0.5 {
            break;
        }
    }
    x as i32
}

/// Index into the list of `count` non-skipped candidates that git's `skip_away` draws.
pub(super) fn skip_away_index(count: usize) -> usize {
    // git does this in C `int`; wrapping keeps the same value up to ~65k candidates and the
    // same (implementation-defined) behaviour past that.
    let count = i32::try_from(count).unwrap_or(i32::MAX);
    let prn = get_prn(count as u32);
    let idx = (count.wrapping_mul(prn) / PRN_MODULO).wrapping_mul(sqrti(prn)) / sqrti(PRN_MODULO);
    usize::try_from(idx).unwrap_or(0)
}

/// git's `estimate_bisect_steps`: roughly how many more tests after the current one.
pub fn estimate_bisect_steps(all: usize) -> u32 {
    if all < 3 {
        return 0;
    }
    let n = usize::BITS - 1 - all.leading_zeros();
    let e = 1usize << n;
    let x = all - e;
    if e < 3 * x {
        n
    } else {
        n - 1
    }
}

/// What git's FIND_BISECTION_ALL path picks from all the weights of a step.
pub(super) enum Pick {
    /// This candidate (a step index), and the skipped ones sorted before it (DAG indices).
    Chosen(usize, Vec<usize>),
    /// Every candidate left is skipped: these (DAG indices), in git's order.
    AllSkipped(Vec<usize>),
}

/// `best_bisection_sorted` then `skip_away`: all candidates sorted by `min(w, N - w)`
/// descending then id ascending; the first unless it is skipped, else one drawn from the
/// non-skipped ones by git's PRN, stepping back one place if the draw names the bad commit.
pub(super) fn pick(dag: &Dag, step: &Step, weight: &[i64], skipped: &[bool], bad: usize) -> Pick {
    let nr = step.nr;
    let distance = |w: i64| w.min(nr - w);
    let node = |i: u32| step.node[i as usize] as usize;
    let mut sorted: Vec<u32> = (step.list.iter().copied())
        .filter(|&i| !step.treesame[i as usize])
        .collect();
    // Ids are unique, so the order is total and an unstable sort gives git's order.
    sorted.sort_unstable_by(|&a, &b| {
        match distance(weight[b as usize]).cmp(&distance(weight[a as usize])) {
            Ordering::Equal => dag.id(node(a)).cmp(dag.id(node(b))),
            other => other,
        }
    });
    if !skipped[node(sorted[0])] {
        return Pick::Chosen(sorted[0] as usize, Vec::new());
    }
    let (tried, filtered): (Vec<u32>, Vec<u32>) =
        sorted.into_iter().partition(|&i| skipped[node(i)]);
    let tried = tried.into_iter().map(node).collect();
    if filtered.is_empty() {
        return Pick::AllSkipped(tried);
    }
    let index = skip_away_index(filtered.len());
    let chosen = match filtered.get(index) {
        Some(&c) if node(c) != bad => c,
        Some(_) if index > 0 => filtered[index - 1],
        _ => filtered[0],
    };
    Pick::Chosen(chosen as usize, tried)
}
