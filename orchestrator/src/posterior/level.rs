//! How much of the regression a commit carries: where its re-test boots sit between good and
//! bad boots of the same rounds ([`level_between`]), and what a culprit's and its parent's
//! levels say of the rest ([`rest`]).

use crate::stats::{mad, median};
use statrs::distribution::{ChiSquared, ContinuousCDF, StudentsT};

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

impl Level {
    /// A level known exactly, with no interval: a kernel that is an endpoint's by identity
    /// sits at 0 (good's) or 1 (bad's) whatever its boots read.
    pub fn exactly(level: f64) -> Level {
        Level {
            level,
            lo: level,
            hi: level,
        }
    }

    /// The share of the regression a commit at this level has undone, read from bad's side:
    /// 1 − level, the interval turned round (a culprit's revert on top of bad).
    pub fn undone(&self) -> Level {
        Level {
            level: 1.0 - self.level,
            lo: 1.0 - self.hi,
            hi: 1.0 - self.lo,
        }
    }
}

/// The normal quantile of the level intervals the confirmation reads ([`rest`]): 0.5% on each
/// side, so that the two readings "some of it came before the parent" and "more came after the
/// culprit" together call a one-step regression several steps in about 1% of hunts (issue 38:
/// at 95% intervals on a wandering host, the demo hunt read as two steps).
pub const LEVEL_Z: f64 = 2.575_829_303_548_901;

/// The level intervals' coverage, in percent, for the words that state it.
pub const LEVEL_PERCENT: u32 = 99;

/// Each side's tail beyond a level interval: 0.5%, as [`LEVEL_Z`].
const LEVEL_TAIL: f64 = (100 - LEVEL_PERCENT) as f64 / 200.0;

/// Variance of the median against the mean's on normal data (π/2): the re-test reads medians,
/// which a burst in one round does not move.
const MEDIAN_VARIANCE: f64 = std::f64::consts::FRAC_PI_2;

/// The noise behind one median of the re-test, on the oriented log scale: the boots' spread
/// and the degrees of freedom it was estimated with (`f64::INFINITY` for the baselines' model,
/// whose σ is already inflated for its few boots).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Noise {
    /// The spread of one boot.
    pub sigma: f64,
    /// The degrees of freedom behind `sigma`.
    pub dof: f64,
}

/// The one-sided level of the test that sets the model's σ aside for a group's own spread:
/// on boots as steady as the baselines', 1 group in 20 is read with its own, wider σ.
const OWN_SPREAD_LEVEL: f64 = 0.95;

impl Noise {
    /// The baselines' model's σ, already inflated for its few boots: no degrees of freedom
    /// to count.
    pub fn model(sigma: f64) -> Noise {
        Noise {
            sigma,
            dof: f64::INFINITY,
        }
    }

    /// The baselines' `sigma`, unless the boots of `values` (oriented) prove it too small: their
    /// robust spread (MAD) beyond the χ² 95% point of `sigma` (a host that moved since the
    /// baselines, a commit whose boots spread as the baselines' did not). Their own spread then
    /// stands, with its few degrees of freedom. The re-test of tests/e2e.rs on 2026-12-05 read
    /// a docs-only parent (2.76, 4.99, 6.37 ms beside good's 3.34, 2.70, 2.53) at 20% of the
    /// regression, 99% interval 14 to 26%, with the baselines' σ: "some of it comes before
    /// the parent", of a commit that cannot have changed the kernel. Its own spread, and a
    /// t quantile of two degrees of freedom, leave it undecided, as a rank test of three
    /// boots against three would (p = 0.1).
    pub fn of(values: &[f64], sigma: f64) -> Noise {
        let model = Noise::model(sigma);
        let n = values.len();
        if n < 2 || sigma <= 0.0 {
            return model;
        }
        // The spread robustly (the MAD): the re-test reads medians so that a burst in one
        // round moves nothing, and one burst must not widen every interval either (a good
        // reference at 6.97 ms beside 3.5 and 3.3 keeps the model's σ).
        let own = mad(values);
        let dof = (n - 1) as f64;
        let bound = ChiSquared::new(dof).map_or(f64::INFINITY, |c| c.inverse_cdf(OWN_SPREAD_LEVEL));
        if dof * own * own / (sigma * sigma) > bound {
            Noise { sigma: own, dof }
        } else {
            model
        }
    }
}

/// One median a level is read from (oriented log scale): its value, the boots behind it, and
/// their [`Noise`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Median {
    /// The median.
    pub at: f64,
    /// Boots behind it.
    pub boots: f64,
    /// Their noise.
    pub noise: Noise,
}

impl Median {
    /// A centre of the baselines' model, behind `boots` boots, with its σ.
    pub fn model(at: f64, boots: f64, sigma: f64) -> Median {
        Median {
            at,
            boots,
            noise: Noise::model(sigma),
        }
    }

    /// The median of `values` (oriented), with the baselines' `sigma` unless the values refute
    /// it ([`Noise::of`]); `None` without values.
    pub fn of(values: &[f64], sigma: f64) -> Option<Median> {
        (!values.is_empty()).then(|| Median {
            at: median(values),
            boots: values.len() as f64,
            noise: Noise::of(values, sigma),
        })
    }

    /// The median's variance: (π/2)·σ²/k.
    fn variance(&self) -> f64 {
        MEDIAN_VARIANCE * self.noise.sigma * self.noise.sigma / self.boots
    }
}

/// [`Level`] of a `commit`'s median against references measured in the same rounds, the `good`
/// and `bad` sides' medians (or the baselines' centres). References of the same minutes carry
/// the host's move, which no model of it then has to guess. Var ≈ (π/2)·(σ_c²/k_c +
/// (1 − L)²·σ_g²/k_g + L²·σ_b²/k_b) / (bad − good)²; the interval is ±[`LEVEL_Z`] of it while
/// every σ is the model's, and ± Student's t quantile of the Welch–Satterthwaite degrees of
/// freedom once a median's own boots spread wider ([`Noise::of`]). `None` without an effect
/// to measure against.
pub fn level_between(commit: Median, good: Median, bad: Median) -> Option<Level> {
    let effect = bad.at - good.at;
    let boots = [commit.boots, good.boots, bad.boots];
    if effect <= 0.0 || boots.iter().any(|&k| k <= 0.0) || !commit.at.is_finite() {
        return None;
    }
    let l = (commit.at - good.at) / effect;
    let terms = [
        (commit.variance(), commit.noise.dof),
        ((1.0 - l).powi(2) * good.variance(), good.noise.dof),
        (l * l * bad.variance(), bad.noise.dof),
    ];
    let var: f64 = terms.iter().map(|(v, _)| v).sum();
    // Welch–Satterthwaite: terms of the model (infinite dof) add nothing to the denominator.
    let spread: f64 = terms
        .iter()
        .filter(|(_, dof)| dof.is_finite())
        .map(|(v, dof)| v * v / dof)
        .sum();
    let dof = if spread > 0.0 {
        var * var / spread
    } else {
        f64::INFINITY
    };
    // Past 10⁴ degrees of freedom t is z to four digits; and statrs' inverse (an inverse
    // regularised beta) does not return for the astronomic dof a term of almost no weight
    // gives (a culprit at bad, whose good reference is a wide one: (1 − L)² ≈ 0).
    let quantile = if dof < 1e4 {
        StudentsT::new(0.0, 1.0, dof.max(1.0))
            .map_or(LEVEL_Z, |t| t.inverse_cdf(1.0 - LEVEL_TAIL).max(LEVEL_Z))
    } else {
        LEVEL_Z
    };
    let half = quantile * var.sqrt() / effect;
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

/// The parts of [`rest`] the levels' estimates point to and their intervals cannot yet show:
/// the culprit short of bad by the floor or more while its interval still reaches bad, the
/// parent past good by the floor while its interval still reaches good. More rounds of the
/// re-test settle them; a one-step regression's estimates point past the floor in a few hunts
/// in a hundred, so the rounds they add are few. tests/e2e.rs on 2026-12-07 stopped a two-step
/// re-test at three rounds with the culprit at 68% of the way, its interval 32 to 105%: no
/// further step was read, the one-step posterior gave the right culprit 0.0%, and the run
/// said NOT confirmed of a step it had separated from its parent by +642%.
pub fn rest_open(parent: &Level, culprit: &Level, floor: f64) -> Rest {
    Rest {
        after: culprit.hi >= 1.0 && 1.0 - culprit.level >= floor,
        before: parent.lo <= 0.0 && parent.level >= floor,
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
    /// Bad's centre over good's in the metric's own unit: the levels are read on the log
    /// scale, where a step's share of a large regression is not its share in milliseconds
    /// ([`in_metric`]); absent in journals written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
}

/// A position `p` of the way from good to bad on the log scale (0 good, 1 bad), as a position
/// in the metric's own unit, for a regression that multiplies the metric by `ratio`:
/// `(ratioᵖ − 1) / (ratio − 1)`. Exact for either direction (the metric at `p` is
/// `good · ratioᵖ`), monotone, so an interval's ends map to the interval's ends. A step of a
/// +1870% regression that is 65% of the way on the log scale is 32% of it in milliseconds.
pub fn in_metric(ratio: f64, p: f64) -> f64 {
    if ratio.is_nan() || ratio <= 0.0 || (ratio - 1.0).abs() < 1e-9 {
        return p;
    }
    (ratio.powf(p) - 1.0) / (ratio - 1.0)
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

    /// [`StepLevels::share`] in the metric's own unit, positions `span` of the whole on the
    /// log scale ([`crate::hunt::steps`]), for a whole regression of `ratio`; `None` without
    /// one.
    pub fn metric_share(&self, span: (f64, f64), ratio: Option<f64>) -> Option<Level> {
        let ratio = ratio?;
        let at = |p: f64| in_metric(ratio, span.0 + (span.1 - span.0) * p.clamp(0.0, 1.0));
        Some(Level {
            level: at(self.culprit.level) - at(self.parent.level),
            lo: at(self.culprit.lo) - at(self.parent.hi),
            hi: at(self.culprit.hi) - at(self.parent.lo),
        })
    }

    /// [`StepLevels::metric_share`] when it is worth saying beside the log scale's share: when
    /// the two differ by [`METRIC_SHARE_APART`] or more (at +30% they agree within 4 points).
    pub fn metric_share_apart(&self, span: (f64, f64), ratio: Option<f64>) -> Option<Level> {
        let log = (span.1 - span.0) * self.share().level;
        self.metric_share(span, ratio)
            .filter(|m| (m.level - log).abs() >= METRIC_SHARE_APART)
    }
}

/// How far a step's share in the metric's own unit must be from its share on the log scale
/// for a person to be told both ([`StepLevels::metric_share_apart`]).
pub const METRIC_SHARE_APART: f64 = 0.05;

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo's two-step branch on the qemu host (docs/measurements.md): good 2.79 ms, bad
    /// 55.7 ms, the first step's culprit at 19.8 ms is 65% of the way on the log scale and 32%
    /// in milliseconds; the second step, the rest, 68%. A small regression reads the same on
    /// both scales.
    #[test]
    fn a_share_on_the_log_scale_reads_in_the_metric_s_unit() {
        let ratio: f64 = 55.7 / 2.79;
        let p = (19.8f64 / 2.79).ln() / ratio.ln();
        assert!((p - 0.654).abs() < 0.005, "{p}");
        assert!((in_metric(ratio, p) - 0.32).abs() < 0.005);
        let at = |x: f64| Level {
            level: x,
            lo: x - 0.02,
            hi: x + 0.02,
        };
        let first = StepLevels {
            parent: at(0.0),
            culprit: at(p),
            floor: 0.05,
            ratio: Some(ratio),
        };
        let m = first.metric_share(WHOLE_SPAN, first.ratio).unwrap();
        assert!((m.level - 0.32).abs() < 0.005, "{m:?}");
        assert!(m.lo < m.level && m.level < m.hi, "{m:?}");
        let second = StepLevels {
            parent: at(0.0),
            culprit: at(1.0),
            ..first
        };
        let m = second.metric_share((p, 1.0), Some(ratio)).unwrap();
        assert!((m.level - 0.68).abs() < 0.005, "{m:?}");
        assert!((in_metric(1.3, 0.5) - 0.5).abs() < 0.04);
        assert_eq!(in_metric(1.0, 0.3), 0.3);
        assert_eq!(first.metric_share(WHOLE_SPAN, None), None);
    }

    const WHOLE_SPAN: (f64, f64) = (0.0, 1.0);

    /// A median of `k` boots at `at` with the model's σ = 1.
    fn model(at: f64, k: f64) -> Median {
        Median::model(at, k, 1.0)
    }

    #[test]
    fn a_level_is_where_the_median_sits_between_references_of_the_same_rounds() {
        // Good at 0, bad at 2 (σ = 1), 4 boots of each; a commit's median at 1: half-way.
        let l = level_between(model(1.0, 4.0), model(0.0, 4.0), model(2.0, 4.0)).unwrap();
        // Var = π/2 · (1/4 + 0.5/4) / 4 = 0.147262; half-width 2.5758 · 0.38375 = 0.98847.
        assert!((l.level - 0.5).abs() < 1e-12, "{l:?}");
        assert!((l.hi - l.level - 0.988_47).abs() < 1e-4, "{l:?}");
        assert!((l.level - l.lo - 0.988_47).abs() < 1e-4, "{l:?}");
        // The references moved with the host (good at 3, bad at 5): the same commit, 3 higher,
        // is still half-way.
        let moved = level_between(model(4.0, 4.0), model(3.0, 4.0), model(5.0, 4.0)).unwrap();
        assert!((moved.level - 0.5).abs() < 1e-12);
        // Nothing to measure against.
        assert_eq!(
            level_between(model(1.0, 4.0), model(2.0, 4.0), model(2.0, 4.0)),
            None
        );
        // After rounds_to_separate rounds, a whole step is just clear by the floor.
        for effect in [2.0, 4.0, 13.0] {
            let k = rounds_to_separate(effect, 0.05);
            let half = |k: f64| LEVEL_Z * (MEDIAN_VARIANCE * 2.0 / k).sqrt() / effect;
            assert!((1.0 - 2.0 * half(k) - 0.05).abs() < 1e-9, "{effect}: {k}");
        }
        assert!(rounds_to_separate(13.0, 0.02) < 1.0 && rounds_to_separate(2.0, 0.05) > 20.0);
        assert_eq!(
            level_between(model(1.0, 0.0), model(0.0, 4.0), model(2.0, 4.0)),
            None
        );
    }

    /// Boots as steady as the baselines' keep the model's σ; boots that spread far wider
    /// are read with their own spread and its degrees of freedom.
    #[test]
    fn a_group_keeps_the_models_noise_unless_its_own_boots_refute_it() {
        let steady = Noise::of(&[1.0, 1.1, 0.9], 0.1);
        assert_eq!(steady.dof, f64::INFINITY);
        assert_eq!(steady.sigma, 0.1);
        let wide = Noise::of(&[1.0, 1.6, 1.85], 0.1);
        assert_eq!(wide.dof, 2.0);
        assert!(wide.sigma > 0.3, "{wide:?}");
        // One boot has no spread of its own.
        assert_eq!(Noise::of(&[5.0], 0.1).dof, f64::INFINITY);
    }

    /// The re-test of tests/e2e.rs on 2026-12-05 (ms; lower is better, so ln is oriented): a
    /// docs-only parent beside good and bad of the same three rounds, with a model σ of 0.1.
    /// Read with the baselines' σ it sat at 20%, its interval clear of good: "some of the
    /// regression comes before the parent". Its own spread leaves good inside the interval.
    #[test]
    fn a_parent_whose_boots_spread_wide_is_not_called_a_step_of_its_own() {
        let ln = |v: &[f64]| v.iter().map(|x: &f64| x.ln()).collect::<Vec<_>>();
        let parent = ln(&[2.762, 4.986, 6.369]);
        let good = ln(&[3.342, 2.697, 2.533]);
        let bad = ln(&[59.764, 60.249, 62.550]);
        let at = |v: &[f64], own: bool| {
            let m = Median::of(v, 0.1).unwrap();
            if own {
                m
            } else {
                Median::model(m.at, m.boots, 0.1)
            }
        };
        let old = level_between(at(&parent, false), at(&good, false), at(&bad, false)).unwrap();
        assert!(old.lo > 0.1, "the baselines' σ alone: {old:?}");
        let l = level_between(at(&parent, true), at(&good, true), at(&bad, true)).unwrap();
        assert!((l.level - 0.198).abs() < 0.01, "{l:?}");
        assert!(l.lo < 0.0 && l.hi > 0.5, "{l:?}");
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
