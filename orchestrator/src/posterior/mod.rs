//! Noise-aware search: a posterior over which commit is the culprit, plus "no single culprit".
//!
//! Pure code. The candidates are a linear history indexed oldest first, `0..n`, whose last
//! commit `n - 1` is the bad endpoint (it may itself be the culprit, as in git bisect); the good
//! endpoint sits before index 0. Hypothesis `h` says commits `h..n` are bad and `0..h` good.
//! The extra hypothesis NONE says there is no single step: each tested commit sits at its own
//! level, good, half-way or bad (two culprits, a gradual slide, endpoints that do not really
//! differ).
//!
//! # Likelihood
//! A boot far beyond both centres is left out
//! ([`Model::admit`](crate::sequential::Model::admit)); a commit's evidence is the mean of its
//! `k` admitted boots. Under hypothesis `h` the commits before `h` share the good centre and
//! the others the bad centre, and those centres are known only to σ/√n from the baselines. The
//! likelihood integrates that uncertainty out exactly (a Gaussian with a shared error per side,
//! inverted with Sherman-Morrison), so a commit the search has classified good sharpens the good
//! centre for every other commit instead of its evidence saturating against a baseline of a few
//! boots. Boot-to-boot σ is the baselines' estimate, taken as known.
//!
//! # Search
//! Every boot updates the posterior ([`Posterior::observe`]), never a hard verdict, so a
//! wrong-looking boot costs a little probability rather than half the range. The next commit
//! is the one with the most expected information per unit of cost ([`Posterior::choose`]): a
//! boot of a commit whose P(bad) is q teaches about q(1 − q) (the small-signal mutual
//! information of a binary state seen through Gaussian noise), and a commit not yet built costs
//! `build_cost` boots more. Earlier commits may be chosen again. The search stops when one
//! hypothesis reaches the configured confidence ([`Posterior::standing`]).
//!
//! Merges: the hunt reduces a range to its first-parent line first; a DAG-wide posterior is not
//! modelled here.
//!
//! # Files
//! - `linear.rs`: [`Posterior`], the incremental search over a linear history.
//! - `dag.rs`: [`dag_posterior`] over a DAG range with the host's moves, and its classes.
//! - `level.rs`: how much of the regression one commit carries ([`Level`], [`Rest`]).
//! - `refine.rs`: the posterior phase's next boot ([`refine_step`]).

mod dag;
mod level;
mod linear;
mod refine;

pub use dag::{
    class_probability, classes, commit_evidence, dag_posterior, dag_posterior_with_host, Evidence,
    HostMove, STEP_GRID, STEP_PRIOR, STEP_SIZE_PRIOR,
};
pub use level::{
    in_metric, level_between, rest, rest_open, rounds_to_separate, Level, Median, Noise, Rest,
    StepLevels, LEVEL_PERCENT, LEVEL_Z,
};
pub use linear::{Posterior, Standing};
pub use refine::{
    marginal_precision, refine_budget, refine_step, spread, Candidate, RefineRule, RefineStep,
    REFINE_BUILD_COST, REFINE_MIN_CLASS, REFINE_SPREAD,
};

/// Levels between good (0) and bad (1) a commit may sit at under NONE: good, half-way, bad.
/// A half-way commit (two culprits) counts as evidence for NONE. A finer grid (0.25, 0.75) let
/// the small error of the baseline centres pass for evidence of NONE in `firstbad sim`.
pub const NONE_LEVELS: [f64; 3] = [0.0, 0.5, 1.0];

/// Prior probability of "no single culprit" (1%): a confirmed regression usually has one. At 5%,
/// one wrong-looking commit was enough in `firstbad sim` for NONE to win before the search had
/// re-tested that commit.
pub const NONE_PRIOR: f64 = 0.01;

fn logsumexp(v: impl Iterator<Item = f64> + Clone) -> f64 {
    let m = v.clone().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + v.map(|x| (x - m).exp()).sum::<f64>().ln()
}

/// Fixtures shared by the submodules' tests.
#[cfg(test)]
mod fixtures {
    use crate::config::Direction;
    use crate::sequential::{Model, Timeline};

    /// Good at 35 ms, bad at 45 ms, 5% noise: Δ/σ ≈ 5, so one boot is nearly decisive.
    pub fn model() -> Model {
        Model {
            good: 35f64.ln(),
            bad: 45f64.ln(),
            sigma: 0.05,
            direction: Direction::LowerIsBetter,
            n_baseline: 8.0,
        }
    }

    /// Baselines centred on boot 0, no trend seen yet.
    pub const FLAT: Timeline = Timeline {
        origin: 0.0,
        trend: 0.0,
    };

    /// Boots all at the baselines' time: no trend can show.
    pub fn at_origin(values: &[f64]) -> Vec<(f64, f64)> {
        values.iter().map(|&v| (v, 0.0)).collect()
    }
}
