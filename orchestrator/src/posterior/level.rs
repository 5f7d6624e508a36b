//! How much of the regression a commit carries: where its re-test boots sit between good and
//! bad boots of the same rounds ([`level_between`]), and what a culprit's and its parent's
//! levels say of the rest ([`rest`]).

/// Where a commit's boots sit between the good centre (0) and the bad centre (1), with an
/// interval: for the confirmation, so that a culprit that explains only part of the regression
/// (two culprits, as with the CFQ queue-depth and dirty-ratio changes that together made fsync
/// take 20 s) is said to be part of it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Level {
    /// The estimate.
    pub level: f64,
    /// The interval's lower end.
    pub lo: f64,
    /// The interval's upper end.
    pub hi: f64,
}

/// The normal quantile of the level intervals the confirmation reads ([`rest`]): 0.5% on each
/// side, so that the two readings "some of it came before the parent" and "more came after the
/// culprit" together call a one-step regression several steps in about 1% of hunts (issue 38:
/// at 95% intervals on a wandering host, the demo hunt read as two steps).
pub const LEVEL_Z: f64 = 2.575_829_303_548_901;

/// The level intervals' coverage, in percent, for the words that state it.
pub const LEVEL_PERCENT: u32 = 99;

/// Variance of the median against the mean's on normal data (π/2): the re-test reads medians,
/// which a burst in one round does not move.
const MEDIAN_VARIANCE: f64 = std::f64::consts::FRAC_PI_2;

/// [`Level`] of a commit whose `k` boots have the median `y`, against references measured in
/// the same rounds: the good and bad sides' medians, of `k_ref` boots each (all on the
/// oriented log scale), with boot noise `sigma`. References of the same minutes carry the
/// host's move, which no model of it then has to guess. Var ≈ (π/2)·σ²·(1/k + ((1 − L)² +
/// L²)/k_ref) / (bad − good)²; the interval is ±[`LEVEL_Z`] of it. `None` without an effect to
/// measure against or without boots.
pub fn level_between(
    y: f64,
    k: usize,
    good: f64,
    bad: f64,
    k_ref: f64,
    sigma: f64,
) -> Option<Level> {
    let effect = bad - good;
    if effect <= 0.0 || k == 0 || k_ref <= 0.0 || !y.is_finite() {
        return None;
    }
    let l = (y - good) / effect;
    let var =
        MEDIAN_VARIANCE * sigma * sigma * (1.0 / k as f64 + ((1.0 - l).powi(2) + l * l) / k_ref)
            / (effect * effect);
    let half = LEVEL_Z * var.sqrt();
    Some(Level {
        level: l,
        lo: l - half,
        hi: l + half,
    })
}

/// Rounds of a re-test beside good and bad after which a whole step (the parent at good, the
/// culprit at bad) lies clear of both [`level_between`] intervals by `floor`, for an effect of
/// `effect` σ: k ≥ π·(2z / ((1 − floor)·Δ/σ))². About one round at Δ/σ = 13 (the demo), five at
/// 4, twenty-two at 2: below some effect the re-test alone cannot decide in any budget a hunt
/// would spend, and more rounds there only cost boots.
pub fn rounds_to_separate(effect: f64, floor: f64) -> f64 {
    if effect <= 0.0 || floor >= 1.0 {
        return f64::INFINITY;
    }
    std::f64::consts::PI * (2.0 * LEVEL_Z / ((1.0 - floor) * effect)).powi(2)
}

/// What the [`Level`]s of a culprit and its parent say of the rest of the regression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rest {
    /// The culprit is clearly short of bad, by at least the floor: more comes after it.
    pub after: bool,
    /// The parent is clearly worse than good, by at least the floor: some comes before it.
    pub before: bool,
}

/// [`Rest`] from the parent's and the culprit's levels; `floor` is the smallest part that counts,
/// as a share of the regression (the hunt's `min_effect`, by
/// [`Model::share_of`](crate::sequential::Model::share_of): with a regression of 1800%, 3% of it
/// left over is still 9% slower, and counts). A part must be outside the level's interval ([`LEVEL_Z`]) and at least
/// the floor by its estimate.
pub fn rest(parent: &Level, culprit: &Level, floor: f64) -> Rest {
    Rest {
        after: culprit.hi < 1.0 && 1.0 - culprit.level >= floor,
        before: parent.lo > 0.0 && parent.level >= floor,
    }
}

/// Where a culprit and its first parent sit between good (0) and bad (1) in the re-test's
/// rounds, and the smallest share of the regression that counts: journalled with the
/// confirmation, so that what comes next (another step hunted in the same run, a share of the
/// whole) is read from figures, never from the words.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepLevels {
    /// The parent's level.
    pub parent: Level,
    /// The culprit's level.
    pub culprit: Level,
    /// The smallest share that counts ([`rest`]'s floor).
    pub floor: f64,
}

impl StepLevels {
    /// What the levels say of the rest of the regression.
    pub fn rest(&self) -> Rest {
        rest(&self.parent, &self.culprit, self.floor)
    }

    /// Some of the regression lies before the parent or after the culprit.
    pub fn several(&self) -> bool {
        let r = self.rest();
        r.after || r.before
    }

    /// The culprit's level is above the parent's beyond both intervals, by the floor at least.
    pub fn clear(&self) -> bool {
        self.culprit.lo - self.parent.hi >= self.floor
    }

    /// The step's share of the range between the references: the estimate and the interval
    /// its two levels' intervals allow (conservative: the two share their references, so the
    /// difference's own interval is narrower).
    pub fn share(&self) -> Level {
        Level {
            level: self.culprit.level - self.parent.level,
            lo: self.culprit.lo - self.parent.hi,
            hi: self.culprit.hi - self.parent.lo,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_is_where_the_median_sits_between_references_of_the_same_rounds() {
        // Good at 0, bad at 2 (σ = 1), 4 boots of each; a commit's median at 1: half-way.
        let l = level_between(1.0, 4, 0.0, 2.0, 4.0, 1.0).unwrap();
        // Var = π/2 · (1/4 + 0.5/4) / 4 = 0.147262; half-width 2.5758 · 0.38375 = 0.98847.
        assert!((l.level - 0.5).abs() < 1e-12, "{l:?}");
        assert!((l.hi - l.level - 0.988_47).abs() < 1e-4, "{l:?}");
        assert!((l.level - l.lo - 0.988_47).abs() < 1e-4, "{l:?}");
        // The references moved with the host (good at 3, bad at 5): the same commit, 3 higher,
        // is still half-way.
        let moved = level_between(4.0, 4, 3.0, 5.0, 4.0, 1.0).unwrap();
        assert!((moved.level - 0.5).abs() < 1e-12);
        // Nothing to measure against.
        assert_eq!(level_between(1.0, 4, 2.0, 2.0, 4.0, 1.0), None);
        // After rounds_to_separate rounds, a whole step is just clear by the floor.
        for effect in [2.0, 4.0, 13.0] {
            let k = rounds_to_separate(effect, 0.05);
            let half = |k: f64| LEVEL_Z * (MEDIAN_VARIANCE * 2.0 / k).sqrt() / effect;
            assert!((1.0 - 2.0 * half(k) - 0.05).abs() < 1e-9, "{effect}: {k}");
        }
        assert!(rounds_to_separate(13.0, 0.02) < 1.0 && rounds_to_separate(2.0, 0.05) > 20.0);
        assert_eq!(level_between(1.0, 0, 0.0, 2.0, 4.0, 1.0), None);
    }

    #[test]
    fn the_rest_of_a_regression_lies_outside_both_intervals_and_above_the_floor() {
        let at = |level: f64, half: f64| Level {
            level,
            lo: level - half,
            hi: level + half,
        };
        let whole = rest(&at(0.02, 0.1), &at(0.97, 0.1), 0.05);
        assert_eq!(
            whole,
            Rest {
                after: false,
                before: false
            }
        );
        let half = rest(&at(0.0, 0.1), &at(0.5, 0.1), 0.05);
        assert!(half.after && !half.before);
        let late = rest(&at(0.5, 0.1), &at(1.0, 0.1), 0.05);
        assert!(late.before && !late.after);
    }
}
