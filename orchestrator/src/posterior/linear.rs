//! The posterior over the culprits of a linear history, updated boot by boot: the search that
//! stands alone ([`Posterior`]), and the reference [`dag_posterior`](super::dag_posterior) must
//! agree with on a line.

use super::{logsumexp, NONE_LEVELS, NONE_PRIOR};
use crate::sequential::Model;

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
    model: Model,
    /// Boots per commit.
    boots: Vec<u32>,
    /// Admitted boots per commit.
    k: Vec<u32>,
    /// Sum of admitted boots per commit, in units of σ.
    sum_y: Vec<f64>,
    /// Tested commits, ascending.
    tested: Vec<usize>,
    /// Log posterior of each step hypothesis, unnormalised.
    log_step: Vec<f64>,
    /// Log posterior of NONE, unnormalised.
    log_none: f64,
}

/// Running sums for one side's shared-centre Gaussian: Σw, Σw·r, Σw·r², Σ ln(1/w).
#[derive(Debug, Clone, Copy, Default)]
struct Side {
    w: f64,
    wr: f64,
    wr2: f64,
    ln_inv_w: f64,
}

impl Side {
    fn add(&mut self, k: f64, r: f64) {
        self.w += k;
        self.wr += k * r;
        self.wr2 += k * r * r;
        self.ln_inv_w -= k.ln();
    }

    /// Log density (σ = 1, 2π terms dropped) of the commit means whose deviations from the
    /// estimated centre were added, when that centre is off by N(0, 1/n) shared by them all.
    fn log_density(&self, n: f64) -> f64 {
        let q = self.wr2 - self.wr * self.wr / (n + self.w);
        -0.5 * (q + self.ln_inv_w + (1.0 + self.w / n).ln())
    }
}

impl Posterior {
    /// A flat prior over `n` candidate commits (index `n - 1` is the bad endpoint) and NONE,
    /// judged by `model`.
    pub fn new(n: usize, model: Model) -> Posterior {
        let each = ((1.0 - NONE_PRIOR) / n as f64).ln();
        Posterior {
            model,
            boots: vec![0; n],
            k: vec![0; n],
            sum_y: vec![0.0; n],
            tested: Vec::new(),
            log_step: vec![each; n],
            log_none: NONE_PRIOR.ln(),
        }
    }

    /// Number of candidate commits.
    pub fn len(&self) -> usize {
        self.boots.len()
    }

    /// Always false: a posterior has at least one candidate.
    pub fn is_empty(&self) -> bool {
        self.boots.is_empty()
    }

    /// Boots taken of commit `i` so far.
    pub fn boots(&self, i: usize) -> u32 {
        self.boots[i]
    }

    /// Commit `i`'s bad-vs-good log-likelihood ratio from its own boots, against the baseline
    /// centres with their uncertainty (for the sequential stay rule); 0 when untested.
    pub fn commit_llr(&self, i: usize) -> f64 {
        let k = self.k[i] as usize;
        if k == 0 {
            return 0.0;
        }
        let l = self
            .model
            .mean_loglik(self.mean(i) * self.model.sigma, k, [0.0, 1.0]);
        l[1]
    }

    fn mean(&self, i: usize) -> f64 {
        self.sum_y[i] / f64::from(self.k[i])
    }

    /// Adds one boot of commit `i` with raw value `value`.
    pub fn observe(&mut self, i: usize, value: f64) {
        self.boots[i] += 1;
        let Some(y) = self.model.admit(value) else {
            return;
        };
        if self.k[i] == 0 {
            let at = self.tested.partition_point(|&t| t < i);
            self.tested.insert(at, i);
        }
        self.k[i] += 1;
        self.sum_y[i] += y / self.model.sigma;
        self.recompute();
    }

    fn recompute(&mut self) {
        let m = &self.model;
        let (g, b) = (m.good / m.sigma, m.bad / m.sigma);
        let nb = m.n_baseline.max(1.0);
        let n = self.len();
        // Side densities with the first j tested commits good and the rest bad.
        let t = self.tested.len();
        let mut good = vec![Side::default(); t + 1];
        for j in 0..t {
            let c = self.tested[j];
            good[j + 1] = good[j];
            good[j + 1].add(f64::from(self.k[c]), self.mean(c) - g);
        }
        let mut bad = vec![Side::default(); t + 1];
        for j in (0..t).rev() {
            let c = self.tested[j];
            bad[j] = bad[j + 1];
            bad[j].add(f64::from(self.k[c]), self.mean(c) - b);
        }
        let seg: Vec<f64> = (0..=t)
            .map(|j| good[j].log_density(nb) + bad[j].log_density(nb))
            .collect();
        let prior = ((1.0 - NONE_PRIOR) / n as f64).ln();
        // Hypothesis h makes tested commits < h good: j = number of tested commits below h.
        let mut j = 0;
        for h in 0..n {
            while j < t && self.tested[j] < h {
                j += 1;
            }
            self.log_step[h] = prior + seg[j];
        }
        // NONE: each tested commit independently at one of the levels, centres uncertain.
        let ln_levels = (NONE_LEVELS.len() as f64).ln();
        self.log_none = NONE_PRIOR.ln()
            + self
                .tested
                .iter()
                .map(|&c| {
                    let v = 1.0 / f64::from(self.k[c]) + 1.0 / nb;
                    let y = self.mean(c);
                    logsumexp(NONE_LEVELS.iter().map(|lev| {
                        let at = g + lev * (b - g);
                        -0.5 * ((y - at).powi(2) / v + v.ln())
                    })) - ln_levels
                })
                .sum::<f64>();
    }

    /// Normalised probabilities: one per commit, then NONE.
    pub fn probabilities(&self) -> (Vec<f64>, f64) {
        let z = logsumexp(
            self.log_step
                .iter()
                .copied()
                .chain(std::iter::once(self.log_none)),
        );
        (
            self.log_step.iter().map(|l| (l - z).exp()).collect(),
            (self.log_none - z).exp(),
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
    use crate::posterior::fixtures::model;

    #[test]
    fn clean_evidence_converges_on_the_culprit() {
        let (n, culprit) = (64, 37);
        let mut p = Posterior::new(n, model());
        for _ in 0..200 {
            if let Standing::Culprit(c, conf) = p.standing(0.95) {
                assert_eq!(c, culprit);
                assert!(conf >= 0.95);
                return;
            }
            let i = p.choose(1.0);
            p.observe(i, if i >= culprit { 45.0 } else { 35.0 });
        }
        panic!("no convergence: {:?}", p.standing(0.95));
    }

    #[test]
    fn the_first_choice_halves_the_range_and_built_commits_are_preferred() {
        let p = Posterior::new(64, model());
        let c = p.choose(0.0);
        assert!((30..=33).contains(&c), "{c}");
        let mut p = Posterior::new(64, model());
        // Half-way between good and bad: commit 40 stays near q = 0.5 and is already built.
        p.observe(40, (35.0f64 * 45.0).sqrt());
        assert_eq!(p.choose(1.0), 40);
    }

    #[test]
    fn halfway_commits_raise_no_single_culprit() {
        let mut p = Posterior::new(16, model());
        let mid = (35.0f64 * 45.0).sqrt();
        // Every tested commit sits exactly half-way, boot after boot: no step explains it.
        for i in [4, 8, 12] {
            for _ in 0..10 {
                p.observe(i, mid);
            }
        }
        assert!(
            matches!(p.standing(0.95), Standing::NoSingleCulprit(_)),
            "{:?}",
            p.standing(0.95)
        );
    }

    #[test]
    fn a_good_commit_sharpens_the_good_centre() {
        // Same boots of commit 10 (slightly towards bad), with and without 30 boots of a
        // commit 2 that sit where the baselines put good: the shared centre is then better
        // known, so commit 10's evidence for the hypotheses that call it bad grows.
        let v = 38.0;
        let mut a = Posterior::new(16, model());
        let mut b = Posterior::new(16, model());
        for _ in 0..30 {
            b.observe(2, 35.0);
        }
        for _ in 0..30 {
            a.observe(10, v);
            b.observe(10, v);
        }
        let bad_mass = |p: &Posterior| p.probabilities().0[3..=10].iter().sum::<f64>();
        assert!(
            bad_mass(&b) > bad_mass(&a),
            "{} vs {}",
            bad_mass(&b),
            bad_mass(&a)
        );
    }
}
