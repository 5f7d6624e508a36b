//! The posterior phase: which commit to boot next so that the most probable class of
//! hypotheses settles ([`refine_step`]), with its budget and the worth of one more boot.

use super::dag::classes;

/// Build cost of a commit not built yet, in boots, for the posterior phase's choice (as for
/// [`Posterior::choose`](super::Posterior::choose)): an incremental kernel build takes about as
/// long as a boot and run.
pub const REFINE_BUILD_COST: f64 = 1.0;

/// Classes holding less of the posterior than this are not split by booting an untested
/// member: a boot there moves at most this much probability. Their tested boundaries stay
/// candidates, so evidence against a hard verdict can still move the mass there.
pub const REFINE_MIN_CLASS: f64 = 0.001;

/// Untested members of one class weighed as the next boot, evenly spaced (a class of 8192
/// untested commits after a wrong early verdict would otherwise mean 8192 ancestry walks per
/// boot in a real hunt; 16 spaced members find a split within 1/16 of the class's mass). Even,
/// for [`spread`] to pick the same members in the hunt's order and the sim's.
pub const REFINE_SPREAD: usize = 16;

/// At most `k` of `members`, evenly spaced, first and last included when `k` ≥ 2; for an even
/// `k` symmetric, so a caller listing the members newest first (the hunt) gets the same ones
/// as one listing them oldest first (the sim).
pub fn spread(members: &[usize], k: usize) -> Vec<usize> {
    let n = members.len();
    if n <= k {
        return members.to_vec();
    }
    if k <= 1 {
        return members.get(n / 2).into_iter().copied().collect();
    }
    let step = |i: usize| i * (n - 1) / (k - 1);
    (0..k)
        .map(|i| {
            if 2 * i < k {
                members[step(i)]
            } else {
                members[n - 1 - step(k - 1 - i)]
            }
        })
        .collect()
}

/// Boots the posterior phase may spend on a range of `n` candidates: `per_bit` for each bit of
/// the range (⌈log2(n + 1)⌉), like the posterior search's budget. A verdict that went the wrong
/// way early on leaves that many halvings to redo, each needing its own boots; a fixed budget
/// (60 before) ran out in 38 of the 42 wrong answers at N = 16384, Δ/σ = 1 in `firstbad sim`.
pub fn refine_budget(per_bit: usize, n: usize) -> usize {
    per_bit * (usize::BITS - n.leading_zeros()).max(1) as usize
}

/// How much one more boot of a commit with `k` admitted boots adds to what its mean says, relative
/// to its first boot, when the centres are known to `n_baseline` boots: the precision of its
/// evidence is k·n/(k + n) ([`Model::mean_loglik`](crate::sequential::Model::mean_loglik)), so the
/// step from k to k + 1 adds n²/((k + n)(k + 1 + n)). A commit booted far beyond the baselines
/// teaches little more.
pub fn marginal_precision(k: usize, n_baseline: f64) -> f64 {
    let (k, n) = (k as f64, n_baseline.max(1.0));
    n * n / ((k + n) * (k + 1.0 + n))
}

/// What the posterior phase knows of one candidate commit, besides the posterior.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// It can give evidence: it builds, and it has booted or has not failed too often.
    pub usable: bool,
    /// It is built (a boot costs no build).
    pub built: bool,
    /// Its admitted boots so far.
    pub boots: usize,
}

/// The posterior phase's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RefineRule {
    /// Stop when one class holds this much of the posterior (0.95).
    pub confidence: f64,
    /// Stop after this many boots in the phase ([`refine_budget`]).
    pub budget: usize,
    /// Untested commits may be booted, and a class must be a single commit to stop (false
    /// with path-limited ranges, where a class is answered by its tested member).
    pub split: bool,
    /// Boots behind the baseline centres ([`crate::sequential::Model::n_baseline`]).
    pub n_baseline: f64,
}

/// One step of the posterior phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RefineStep {
    /// Boot this hypothesis's commit once more (or for the first time).
    Boot(usize),
    /// Done: the answer (the tested member of the most probable class, or else its first
    /// member in the caller's order: the hunt lists hypotheses newest first),
    /// the class's probability, and whether it reached the confidence.
    Stop {
        /// The hypothesis named.
        answer: usize,
        /// The probability of its class.
        mass: f64,
        /// Whether the rule's confidence was reached (not the budget or a lack of candidates).
        settled: bool,
    },
}

/// The posterior phase's next move, from the posterior `p` (one probability per hypothesis,
/// NONE left out), the tested hypotheses `tested` with their rows `bad_under` (see
/// [`dag_posterior`](super::dag_posterior)) and the boots `spent` so far in the phase.
///
/// Pure, so that `firstbad run` and `firstbad sim` take the same steps. Stops when the most
/// probable class reaches the confidence (and is one commit when splitting), or the budget is
/// spent. Otherwise weighs every usable tested commit and, when splitting, up to
/// [`REFINE_SPREAD`] untested members of each class holding at least [`REFINE_MIN_CLASS`]:
/// the boot with the most expected information per unit of cost, q(1 − q) (q = P(commit bad),
/// from the row of a tested commit or `bad_mass` for an untested one) times
/// [`marginal_precision`], over 1 boot plus [`REFINE_BUILD_COST`] when not built. Every
/// hypothesis, not only the most probable class, so that a wrong hard verdict of the
/// bisection is re-tested when the evidence around it disagrees. Ties go to the lower index.
pub fn refine_step(
    p: &[f64],
    tested: &[usize],
    bad_under: &[Vec<bool>],
    spent: usize,
    rule: &RefineRule,
    candidate: impl Fn(usize) -> Candidate,
    bad_mass: impl Fn(usize) -> f64,
) -> RefineStep {
    assert_eq!(tested.len(), bad_under.len(), "one row per tested commit");
    let all = classes(p, bad_under);
    let (best, mass) = all
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0[0].cmp(&a.0[0])))
        .expect("a range has a candidate");
    let answer = best
        .iter()
        .copied()
        .find(|h| tested.contains(h))
        .unwrap_or(best[0]);
    let stop = |settled| RefineStep::Stop {
        answer,
        mass: *mass,
        settled,
    };
    if *mass >= rule.confidence && (best.len() == 1 || !rule.split) {
        return stop(true);
    }
    if spent >= rule.budget {
        return stop(false);
    }
    let total: f64 = p.iter().sum();
    let mut options: Vec<(usize, f64)> = tested
        .iter()
        .zip(bad_under)
        .map(|(&h, row)| {
            let q: f64 = p.iter().zip(row).filter(|(_, &b)| b).map(|(x, _)| x).sum();
            (h, q)
        })
        .collect();
    if rule.split {
        for (members, m) in &all {
            if *m < REFINE_MIN_CLASS {
                continue;
            }
            let open: Vec<usize> = members
                .iter()
                .copied()
                .filter(|h| !tested.contains(h) && candidate(*h).usable)
                .collect();
            options.extend(
                spread(&open, REFINE_SPREAD)
                    .into_iter()
                    .map(|h| (h, bad_mass(h))),
            );
        }
    }
    options.sort_by_key(|o| o.0);
    let mut choice: Option<(f64, usize)> = None;
    for (h, q) in options {
        let c = candidate(h);
        if !c.usable {
            continue;
        }
        let q = (q / total).clamp(0.0, 1.0);
        let cost = if c.built {
            1.0
        } else {
            1.0 + REFINE_BUILD_COST
        };
        let value = q * (1.0 - q) * marginal_precision(c.boots, rule.n_baseline) / cost;
        if choice.is_none_or(|(v, _)| value > v) {
            choice = Some((value, h));
        }
    }
    match choice {
        Some((v, h)) if v > 0.0 => RefineStep::Boot(h),
        _ => stop(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::posterior::dag::{commit_evidence, dag_posterior};
    use crate::posterior::fixtures::{at_origin, model, FLAT};

    #[test]
    fn classes_group_what_the_tests_cannot_tell_apart() {
        // Line of 6, tested 1 and 3: classes {0, 1}, {2, 3}, {4, 5}.
        let under = vec![
            (0..6).map(|h| h <= 1).collect::<Vec<bool>>(),
            (0..6).map(|h| h <= 3).collect(),
        ];
        let p = [0.1, 0.1, 0.2, 0.3, 0.2, 0.1];
        let c = classes(&p, &under);
        assert_eq!(c.len(), 3);
        assert_eq!(c[1].0, vec![2, 3]);
        assert!((c[1].1 - 0.5).abs() < 1e-12);
        assert_eq!(spread(&[1, 2, 3, 4, 5, 6, 7, 8, 9], 3), vec![1, 5, 9]);
        assert_eq!(spread(&[4, 7], 16), vec![4, 7]);
        // The same members in either order: 0..10 picking 4 gives 0, 3, 6, 9 both ways.
        let up: Vec<usize> = (0..10).collect();
        let down: Vec<usize> = (0..10).rev().collect();
        let mut a = spread(&up, 4);
        let mut b = spread(&down, 4);
        assert_eq!(a, vec![0, 3, 6, 9]);
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        assert_eq!(spread(&[4, 7, 9], 1), vec![7]);
    }

    #[test]
    fn the_refine_budget_and_a_boot_s_worth_follow_their_formulas() {
        // 60 per bit: N = 64 has 7 bits (64 = 0b1000000), N = 16384 has 15.
        assert_eq!(refine_budget(60, 64), 420);
        assert_eq!(refine_budget(60, 16384), 900);
        assert_eq!(refine_budget(60, 1), 60);
        // n²/((k + n)(k + 1 + n)) at n = 16: k = 0 gives 16/17, k = 16 gives 256/(32·33).
        assert!((marginal_precision(0, 16.0) - 16.0 / 17.0).abs() < 1e-12);
        assert!((marginal_precision(16, 16.0) - 256.0 / 1056.0).abs() < 1e-12);
    }

    fn rule(budget: usize) -> RefineRule {
        RefineRule {
            confidence: 0.95,
            budget,
            split: true,
            n_baseline: 8.0,
        }
    }

    /// A line of `n` with the given tested commits and boots: rows, evidence, posterior.
    fn line(n: usize, boots: &[(usize, &[f64])]) -> (Vec<usize>, Vec<Vec<bool>>, Vec<f64>) {
        let m = model();
        let (mut tested, mut under, mut evidence) = (Vec::new(), Vec::new(), Vec::new());
        for &(t, v) in boots {
            tested.push(t);
            under.push((0..n).map(|h| h <= t).collect::<Vec<bool>>());
            evidence.push(commit_evidence(&m, &FLAT, &at_origin(v)).unwrap());
        }
        let (p, _) = dag_posterior(n, &under, &evidence, None);
        (tested, under, p)
    }

    fn prefix(p: &[f64]) -> Vec<f64> {
        p.iter()
            .scan(0.0, |a, x| {
                *a += x;
                Some(*a)
            })
            .collect()
    }

    #[test]
    fn refine_stops_on_a_settled_posterior_or_the_budget() {
        // 9 clearly good, 10 clearly bad at Δ/σ ≈ 5: commit 10 is the culprit.
        let (tested, under, p) = line(16, &[(9, &[35.0, 35.2]), (10, &[45.0, 44.8])]);
        let open = |_| Candidate {
            usable: true,
            built: false,
            boots: 0,
        };
        let q = prefix(&p);
        let step = refine_step(&p, &tested, &under, 0, &rule(60), open, |h| q[h]);
        assert!(
            matches!(step, RefineStep::Stop { answer: 10, settled: true, mass } if mass > 0.95),
            "{step:?}"
        );
        // Only 10 tested (bad): 0..=10 cannot be told apart; an untested member is booted,
        // unless the budget is spent.
        let (tested, under, p) = line(16, &[(10, &[45.0])]);
        let q = prefix(&p);
        let step = refine_step(&p, &tested, &under, 0, &rule(60), open, |h| q[h]);
        assert!(matches!(step, RefineStep::Boot(h) if h < 10), "{step:?}");
        let step = refine_step(&p, &tested, &under, 60, &rule(60), open, |h| q[h]);
        assert!(
            matches!(
                step,
                RefineStep::Stop {
                    answer: 10,
                    settled: false,
                    ..
                }
            ),
            "{step:?}"
        );
    }

    #[test]
    fn refine_re_tests_a_verdict_the_evidence_around_it_doubts() {
        // 4 looked good once (a weak call), 5..=7 bad, 3 half-way, many boots: the doubt is
        // at 4, built and booted once, and that is what gets booted, not a new commit.
        let mid = (35.0f64 * 45.0).sqrt();
        let (tested, under, p) = line(
            8,
            &[
                (3, &[mid, 38.0]),
                (4, &[38.5]),
                (5, &[44.0, 45.0]),
                (7, &[45.0]),
            ],
        );
        let q = prefix(&p);
        let boots = [0, 0, 0, 2, 1, 2, 0, 1];
        let built = |h: usize| Candidate {
            usable: true,
            built: tested.contains(&h),
            boots: boots[h],
        };
        let step = refine_step(&p, &tested, &under, 0, &rule(60), built, |h| q[h]);
        let RefineStep::Boot(h) = step else {
            panic!("{step:?}")
        };
        assert!(tested.contains(&h) && (3..=4).contains(&h), "{h} {p:?}");
        // An unusable commit is never chosen.
        let none = |_| Candidate {
            usable: false,
            built: true,
            boots: 0,
        };
        let step = refine_step(&p, &tested, &under, 0, &rule(60), none, |h| q[h]);
        assert!(
            matches!(step, RefineStep::Stop { settled: false, .. }),
            "{step:?}"
        );
    }
}
