//! The first classification rule: is a commit like good or like bad?
//!
//! Pure code: fed per-boot values of the hunt's metric, returns a decision. The sampling
//! unit is one boot (the many fsyncs inside a boot are summarised by the agent into the
//! metric, e.g. their p50).
//!
//! Work is on a log scale, oriented so that "worse" is always larger: latencies and
//! throughputs are ratio-scale and their boot-to-boot noise is multiplicative.
//!
//! - **Baselines** must separate completely (every bad boot worse than every good boot) and
//!   by at least `min_effect` between medians, or the regression is not reproduced.
//! - **A candidate boot** gets a score: 0 at the good median, 1 at the bad median. Below
//!   [`GOOD_BELOW`] it looks good, above [`BAD_ABOVE`] bad; the middle band counts for
//!   neither, so a boot that lands between the endpoints asks for another boot instead of
//!   deciding.
//! - **A verdict** needs `min_boots` boots that all agree. Otherwise more boots are taken up
//!   to `max_boots`; then 80% agreement decides, and anything less is undecided (a skip).

use crate::config::{ClassifyConfig, Direction};
pub use crate::stats::median;

/// A boot scoring at or below this looks like good (0 = good median, 1 = bad median).
/// 0.35 rather than 0.5: a boot must sit clearly on good's side, not just past the midpoint.
pub const GOOD_BELOW: f64 = 0.35;
/// A boot scoring at or above this looks like bad.
pub const BAD_ABOVE: f64 = 0.65;
/// Share of boots that must agree when `max_boots` is reached without unanimity.
pub const MAJORITY: f64 = 0.8;

/// Both endpoints' per-boot values, and what they establish.
#[derive(Debug, Clone)]
pub struct Baselines {
    good_center: f64,
    bad_center: f64,
    direction: Direction,
    /// Median of good's per-boot values, in the metric's unit.
    pub good_median: f64,
    /// Median of bad's per-boot values, in the metric's unit.
    pub bad_median: f64,
}

/// What the endpoints' boots show.
#[derive(Debug, Clone)]
pub enum BaselineCheck {
    /// Good and bad separate: bisect.
    Confirmed(Baselines, String),
    /// They do not: stop, with the figures.
    NotReproduced(String),
}

/// A decision on one commit.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Like the good endpoint.
    Good(String),
    /// Like the bad endpoint.
    Bad(String),
    /// Boot it again.
    NeedMore,
    /// Boots disagree and the cap is reached: skip the commit.
    Undecided(String),
}

fn oriented(v: f64, direction: Direction) -> f64 {
    // Values are positive latencies or rates; guard against a zero that would be -inf.
    let l = v.max(1e-9).ln();
    match direction {
        Direction::LowerIsBetter => l,
        Direction::HigherIsBetter => -l,
    }
}

fn fmt_values(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks that the endpoints' boots show the regression.
pub fn check_baselines(
    good: &[f64],
    bad: &[f64],
    direction: Direction,
    cfg: &ClassifyConfig,
) -> BaselineCheck {
    let figures = format!(
        "good boots [{}] (median {:.2}), bad boots [{}] (median {:.2})",
        fmt_values(good),
        median(good),
        fmt_values(bad),
        median(bad)
    );
    if good.is_empty() || bad.is_empty() {
        return BaselineCheck::NotReproduced(format!("no measurement: {figures}"));
    }
    let g: Vec<f64> = good.iter().map(|&v| oriented(v, direction)).collect();
    let b: Vec<f64> = bad.iter().map(|&v| oriented(v, direction)).collect();
    let g_worst = g.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let b_best = b.iter().copied().fold(f64::INFINITY, f64::min);
    let (gc, bc) = (median(&g), median(&b));
    let effect = (bc - gc).exp() - 1.0;
    if g_worst >= b_best {
        return BaselineCheck::NotReproduced(format!(
            "good and bad overlap: {figures}; the worst good boot is not better than the best bad boot"
        ));
    }
    if effect < cfg.min_effect {
        return BaselineCheck::NotReproduced(format!(
            "difference {:.1}% is below classify.min_effect {:.1}%: {figures}",
            effect * 100.0,
            cfg.min_effect * 100.0
        ));
    }
    BaselineCheck::Confirmed(
        Baselines {
            good_center: gc,
            bad_center: bc,
            direction,
            good_median: median(good),
            bad_median: median(bad),
        },
        format!(
            "regression confirmed, {:.0}% worse: {figures}",
            effect * 100.0
        ),
    )
}

impl Baselines {
    /// Where a value sits: 0 at the good median, 1 at the bad median.
    pub fn score(&self, value: f64) -> f64 {
        (oriented(value, self.direction) - self.good_center) / (self.bad_center - self.good_center)
    }

    /// Classifies a candidate from its per-boot values so far.
    pub fn classify(&self, values: &[f64], cfg: &ClassifyConfig) -> Decision {
        let n = values.len();
        if n < cfg.min_boots as usize {
            return Decision::NeedMore;
        }
        let scores: Vec<f64> = values.iter().map(|&v| self.score(v)).collect();
        let goods = scores.iter().filter(|&&s| s <= GOOD_BELOW).count();
        let bads = scores.iter().filter(|&&s| s >= BAD_ABOVE).count();
        let why = format!(
            "{n} boots [{}], scores [{}] (0 = good median {:.2}, 1 = bad median {:.2})",
            fmt_values(values),
            scores
                .iter()
                .map(|s| format!("{s:.2}"))
                .collect::<Vec<_>>()
                .join(", "),
            self.good_median,
            self.bad_median
        );
        if goods == n {
            return Decision::Good(why);
        }
        if bads == n {
            return Decision::Bad(why);
        }
        if n < cfg.max_boots as usize {
            return Decision::NeedMore;
        }
        let need = (MAJORITY * n as f64).ceil() as usize;
        if goods >= need {
            Decision::Good(format!("{goods} of {why}"))
        } else if bads >= need {
            Decision::Bad(format!("{bads} of {why}"))
        } else {
            Decision::Undecided(format!("boots disagree: {why}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ClassifyConfig {
        ClassifyConfig {
            baseline_boots: 3,
            min_boots: 2,
            max_boots: 5,
            min_effect: 0.2,
            max_failed_boots: 2,
            alpha: 0.01,
            beta: 0.01,
            confidence: 0.95,
        }
    }

    fn confirmed(good: &[f64], bad: &[f64], d: Direction) -> Baselines {
        match check_baselines(good, bad, d, &cfg()) {
            BaselineCheck::Confirmed(b, _) => b,
            BaselineCheck::NotReproduced(m) => panic!("{m}"),
        }
    }

    #[test]
    fn separated_baselines_confirm_and_overlap_does_not() {
        confirmed(
            &[35.0, 36.0, 34.0],
            &[85.0, 90.0, 88.0],
            Direction::LowerIsBetter,
        );
        let BaselineCheck::NotReproduced(m) = check_baselines(
            &[35.0, 50.0, 34.0],
            &[45.0, 90.0, 88.0],
            Direction::LowerIsBetter,
            &cfg(),
        ) else {
            panic!("overlap must not confirm")
        };
        assert!(m.contains("overlap"), "{m}");
    }

    #[test]
    fn a_tiny_effect_is_not_a_regression() {
        let r = check_baselines(
            &[35.0, 35.1, 35.2],
            &[36.0, 36.1, 36.2],
            Direction::LowerIsBetter,
            &cfg(),
        );
        assert!(matches!(r, BaselineCheck::NotReproduced(m) if m.contains("min_effect")));
    }

    #[test]
    fn candidates_like_either_endpoint_are_called_after_min_boots() {
        let b = confirmed(
            &[35.0, 36.0, 34.0],
            &[85.0, 90.0, 88.0],
            Direction::LowerIsBetter,
        );
        assert_eq!(b.classify(&[36.0], &cfg()), Decision::NeedMore);
        assert!(matches!(
            b.classify(&[36.0, 33.0], &cfg()),
            Decision::Good(_)
        ));
        assert!(matches!(
            b.classify(&[80.0, 95.0], &cfg()),
            Decision::Bad(_)
        ));
    }

    #[test]
    fn a_boot_between_the_endpoints_asks_for_more_and_disagreement_is_undecided() {
        let b = confirmed(
            &[35.0, 36.0, 34.0],
            &[85.0, 90.0, 88.0],
            Direction::LowerIsBetter,
        );
        // sqrt(35*88) ~ 55: halfway on the log scale.
        assert_eq!(b.classify(&[36.0, 55.0], &cfg()), Decision::NeedMore);
        let d = b.classify(&[36.0, 88.0, 35.0, 90.0, 34.0], &cfg());
        assert!(matches!(d, Decision::Undecided(_)), "{d:?}");
        let d = b.classify(&[36.0, 55.0, 35.0, 34.0, 34.0], &cfg());
        assert!(matches!(d, Decision::Good(_)), "{d:?}");
    }

    #[test]
    fn throughput_regressions_point_the_other_way() {
        let b = confirmed(
            &[100.0, 98.0, 102.0],
            &[40.0, 42.0, 41.0],
            Direction::HigherIsBetter,
        );
        assert!(b.score(100.0).abs() < 0.05);
        assert!((b.score(41.0) - 1.0).abs() < 0.05);
        assert!(matches!(
            b.classify(&[39.0, 43.0], &cfg()),
            Decision::Bad(_)
        ));
    }
}
