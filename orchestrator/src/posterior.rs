//! Noise-aware search: a posterior over which commit is the culprit, plus "no single culprit".
//!
//! Pure code. The candidates are a linear history indexed oldest first, `0..n`, whose last
//! commit `n - 1` is the bad endpoint (it may itself be the culprit, as in git bisect); the good
//! endpoint sits before index 0. Hypothesis `h` says commits `h..n` are bad and `0..h` good.
//! The extra hypothesis NONE says there is no single step: each tested commit sits at its own
//! level anywhere between good and bad (two culprits, a gradual slide, endpoints that do not
//! really differ).
//!
//! Every boot updates the posterior with its likelihood under each hypothesis ([`Posterior::
//! observe`]), never with a hard verdict, so a wrong-looking boot costs a little probability
//! rather than half the range. The next commit is the one with the most expected information
//! per unit of cost ([`Posterior::choose`]): a boot of a commit whose P(bad) is q teaches about
//! q(1 − q) (the small-signal mutual information of a binary state seen through Gaussian noise),
//! and a commit not yet built costs `build_cost` boots more. Earlier commits may be chosen
//! again. The search stops when one hypothesis reaches the configured confidence.
//!
//! Merges: the hunt reduces a range to its first-parent line first; a DAG-wide posterior is not
//! modelled here.

use crate::sequential::Model;

/// Levels between good (0) and bad (1) a commit may sit at under NONE; a uniform grid of five
/// keeps the NONE likelihood cheap and lets a half-way commit count as evidence for it.
pub const NONE_LEVELS: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];

/// Prior probability of "no single culprit" (5%): a confirmed regression usually has one.
pub const NONE_PRIOR: f64 = 0.05;

/// Where the posterior stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    /// This commit (index) is the culprit with this probability, at or above the target.
    Culprit(usize, f64),
    /// No single culprit, with this probability, at or above the target.
    NoSingleCulprit(f64),
    /// Not yet: the most probable commit and its probability.
    Open(usize, f64),
}

/// The posterior over culprits of a linear history.
#[derive(Debug, Clone)]
pub struct Posterior {
    /// log prior + log likelihood of each step hypothesis, relative to "everything good".
    log_step: Vec<f64>,
    /// Per tested commit, the summed log-likelihood (relative to good) at each NONE level.
    per_commit: Vec<[f64; 5]>,
    /// log prior of NONE.
    log_none_prior: f64,
    /// Boots and builds so far, per commit.
    boots: Vec<u32>,
}

fn logsumexp(v: impl Iterator<Item = f64> + Clone) -> f64 {
    let m = v.clone().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + v.map(|x| (x - m).exp()).sum::<f64>().ln()
}

impl Posterior {
    /// A flat prior over `n` candidate commits (index `n - 1` is the bad endpoint) and NONE.
    pub fn new(n: usize) -> Posterior {
        let each = ((1.0 - NONE_PRIOR) / n as f64).ln();
        Posterior {
            log_step: vec![each; n],
            per_commit: vec![[0.0; 5]; n],
            log_none_prior: NONE_PRIOR.ln(),
            boots: vec![0; n],
        }
    }

    /// Number of candidate commits.
    pub fn len(&self) -> usize {
        self.log_step.len()
    }

    /// Always false: a posterior has at least one candidate.
    pub fn is_empty(&self) -> bool {
        self.log_step.is_empty()
    }

    /// Boots taken of commit `i` so far.
    pub fn boots(&self, i: usize) -> u32 {
        self.boots[i]
    }

    /// Adds one boot of commit `i` with raw value `value`, judged by `model`.
    pub fn observe(&mut self, i: usize, value: f64, model: &Model) {
        let mut l = [0.0; 5];
        for (k, &lev) in NONE_LEVELS.iter().enumerate() {
            l[k] = model.boot_loglik_at(value, lev);
        }
        self.observe_loglik(i, l);
    }

    /// Adds one boot of commit `i` given its log-likelihoods (relative to good) at each of
    /// [`NONE_LEVELS`]; `l[4]` is the boot's bad-vs-good log-likelihood ratio.
    pub fn observe_loglik(&mut self, i: usize, l: [f64; 5]) {
        self.boots[i] += 1;
        for (acc, x) in self.per_commit[i].iter_mut().zip(l) {
            *acc += x;
        }
        // Hypothesis h makes commit i bad exactly when h <= i.
        for s in &mut self.log_step[..=i] {
            *s += l[4];
        }
    }

    /// Log posterior mass of NONE, unnormalised.
    fn log_none(&self) -> f64 {
        let k = (NONE_LEVELS.len() as f64).ln();
        self.log_none_prior
            + self
                .per_commit
                .iter()
                .zip(&self.boots)
                .filter(|(_, &b)| b > 0)
                .map(|(l, _)| logsumexp(l.iter().copied()) - k)
                .sum::<f64>()
    }

    /// Normalised probabilities: one per commit, then NONE.
    pub fn probabilities(&self) -> (Vec<f64>, f64) {
        let none = self.log_none();
        let z = logsumexp(self.log_step.iter().copied().chain(std::iter::once(none)));
        (
            self.log_step.iter().map(|l| (l - z).exp()).collect(),
            (none - z).exp(),
        )
    }

    /// Where the posterior stands against the target `confidence` (e.g. 0.95).
    pub fn standing(&self, confidence: f64) -> Standing {
        let (p, none) = self.probabilities();
        let (best, &pb) = p
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .expect("a posterior has at least one candidate");
        if pb >= confidence {
            Standing::Culprit(best, pb)
        } else if none >= confidence {
            Standing::NoSingleCulprit(none)
        } else {
            Standing::Open(best, pb)
        }
    }

    /// The commit to boot next: the most expected information per unit cost, where a commit not
    /// yet built costs `1 + build_cost` boots and a built one costs 1.
    pub fn choose(&self, build_cost: f64) -> usize {
        let (p, _none) = self.probabilities();
        let total: f64 = p.iter().sum();
        let mut q = 0.0;
        let mut best = (f64::NEG_INFINITY, self.len() - 1);
        for (i, pi) in p.iter().enumerate() {
            // P(commit i is bad | a single culprit) = mass of hypotheses h <= i.
            q += pi / total;
            let gain = q * (1.0 - q);
            let cost = if self.boots[i] > 0 {
                1.0
            } else {
                1.0 + build_cost
            };
            if gain / cost > best.0 {
                best = (gain / cost, i);
            }
        }
        best.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One boot that is clearly good (llr -2) or clearly bad (+2).
    fn boot(bad: bool) -> [f64; 5] {
        let s = if bad { 1.0 } else { -1.0 };
        // Levels 0, .25, .5, .75, 1: a linear ramp of evidence towards the side it lies on.
        [0.0, 0.5 * s, 1.0 * s, 1.5 * s, 2.0 * s]
    }

    #[test]
    fn clean_evidence_converges_on_the_culprit() {
        let (n, culprit) = (64, 37);
        let mut p = Posterior::new(n);
        for _ in 0..200 {
            if let Standing::Culprit(c, conf) = p.standing(0.95) {
                assert_eq!(c, culprit);
                assert!(conf >= 0.95);
                return;
            }
            let i = p.choose(1.0);
            p.observe_loglik(i, boot(i >= culprit));
        }
        panic!("no convergence: {:?}", p.standing(0.95));
    }

    #[test]
    fn the_first_choice_halves_the_range_and_built_commits_are_preferred() {
        let p = Posterior::new(64);
        let c = p.choose(0.0);
        assert!((30..=33).contains(&c), "{c}");
        let mut p = Posterior::new(64);
        p.observe_loglik(40, [0.0; 5]);
        // Commit 40 is built; an unbuilt midpoint gains 0.25/2, 40 gains ~0.23.
        assert_eq!(p.choose(1.0), 40);
    }

    #[test]
    fn halfway_commits_raise_no_single_culprit() {
        let mut p = Posterior::new(16);
        // Every tested commit sits exactly halfway, boot after boot: no step explains it.
        for i in [4, 8, 12] {
            for _ in 0..10 {
                p.observe_loglik(i, [0.0, 0.6, 0.8, 0.6, 0.0]);
            }
        }
        assert!(
            matches!(p.standing(0.95), Standing::NoSingleCulprit(_)),
            "{:?}",
            p.standing(0.95)
        );
    }
}
