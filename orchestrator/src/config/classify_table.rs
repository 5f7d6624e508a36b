//! The `[classify]` table, from raw structs to validated types: the mode, the sequential
//! tests' rates and caps, the drift checks, the re-test and the steps, each within its bound.

use super::bounds;
use super::raw::RawClassify;
use super::validate::Validator;
use super::*;
use crate::error::ConfigError;
use std::path::Path;

/// What an empty `[classify]` table gives: the hunt file's defaults, from the bounds table.
pub(super) fn classify_defaults() -> ClassifyConfig {
    let none = Path::new("");
    let v = Validator {
        path: none,
        base: none,
    };
    classify(&v, RawClassify::default()).expect("the defaults are within their bounds")
}

pub(super) fn classify(v: &Validator, c: RawClassify) -> Result<ClassifyConfig, ConfigError> {
    if c.baseline_boots.is_some() {
        return Err(v.field(
            "classify.baseline_boots",
            "is no longer used: the endpoints are now booted, interleaved, until the \
             regression is confirmed or refuted (8, 16, 32 or 64 boots each); remove it",
        ));
    }
    let mode = match (c.mode.as_deref().unwrap_or("baselines"), c.relative, c.threshold) {
        ("baselines", None, None) => ClassifyMode::Baselines,
        ("relative", Some(r), None) => {
            ClassifyMode::Relative(v.float(&bounds::CLASSIFY_RELATIVE, Some(r))?)
        }
        ("relative", None, None) => {
            return Err(v.field(
                "classify.relative",
                "mode \"relative\" needs relative = a share above 0 (0.2 means bad when 20% worse than good)",
            ))
        }
        ("absolute", None, Some(t)) => {
            ClassifyMode::Absolute(v.float(&bounds::CLASSIFY_THRESHOLD, Some(t))?)
        }
        ("absolute", None, None) => {
            return Err(v.field(
                "classify.threshold",
                "mode \"absolute\" needs threshold = a positive value of the metric (e.g. 500.0 for fsync p99 in ms)",
            ))
        }
        (m @ ("baselines" | "relative" | "absolute"), _, _) => {
            let (field, fits) = if c.relative.is_some() && m != "relative" {
                ("classify.relative", "relative")
            } else {
                ("classify.threshold", "absolute")
            };
            return Err(v.field(
                field,
                format!("belongs to mode = \"{fits}\", not mode = \"{m}\": remove it or change classify.mode"),
            ));
        }
        (other, _, _) => {
            return Err(v.field(
                "classify.mode",
                format!(
                    "{} is not a mode: use \"baselines\", \"relative\" or \"absolute\"",
                    snippet(other)
                ),
            ))
        }
    };
    let classify = ClassifyConfig {
        mode,
        // One boot may decide when it is clear enough: the sequential test's error rates
        // already account for how much one boot proves.
        min_boots: v.int(&bounds::CLASSIFY_MIN_BOOTS, None, c.min_boots)?,
        // At Δ/σ = 1 the sequential test needs ~10-15 boots on average; in `firstbad sim` a
        // cap of 16 left 40% of hunts with undecided commits next to the culprit, 30 12%.
        // A clear regression decides in one boot, so the cap only costs on noisy ones.
        max_boots: v.int(&bounds::CLASSIFY_MAX_BOOTS, None, c.max_boots)?,
        min_effect: v.float(&bounds::CLASSIFY_MIN_EFFECT, c.min_effect)?,
        max_failed_boots: v.int(&bounds::CLASSIFY_MAX_FAILED_BOOTS, None, c.max_failed_boots)?,
        // Issue 4's defaults: 1% error each way per commit, 95% on the culprit.
        alpha: v.float(&bounds::CLASSIFY_ALPHA, c.alpha)?,
        beta: v.float(&bounds::CLASSIFY_BETA, c.beta)?,
        confidence: v.float(&bounds::CLASSIFY_CONFIDENCE, c.confidence)?,
        // `firstbad sim`: a host slowing 1σ per 100 boots defeats an unchecked hunt; one
        // good boot every 4 verdicts costs ~10% more boots at Δ/σ = 1.
        drift_check_every: v.int(
            &bounds::CLASSIFY_DRIFT_CHECK_EVERY,
            None,
            c.drift_check_every,
        )?,
        // A busy neighbour on a shared machine slows 1-3 boots in a row (issue 38: one good
        // boot at 41.8 ms against a 4.3 ms centre, the next two at 12.6 and 5.8 ms). A window
        // of the drift check holds such a burst for at most four re-measurements; six in a
        // row, over three minutes at least, is a host that moved.
        drift_lasts_boots: v.int(
            &bounds::CLASSIFY_DRIFT_LASTS_BOOTS,
            None,
            c.drift_lasts_boots,
        )?,
        drift_lasts_minutes: v.int(
            &bounds::CLASSIFY_DRIFT_LASTS_MINUTES,
            None,
            c.drift_lasts_minutes,
        )?,
        confirm_pairs: v.int(&bounds::CLASSIFY_CONFIRM_PAIRS, None, c.confirm_pairs)?,
        // Three rounds decide a large effect; a round hit by a burst, or Δ/σ near 1, needs
        // more before the re-test's own figures say anything (issue 38 item 3).
        confirm_max_pairs: v.int(
            &bounds::CLASSIFY_CONFIRM_MAX_PAIRS,
            None,
            c.confirm_max_pairs,
        )?,
        // `firstbad sim`, Δ/σ = 1: 74% right at N = 64 without the posterior phase, 85%
        // with 60 boots in all; 60 per bit (docs/simulation.md) ends on the confidence,
        // not the budget, in 99% of the hunts at N = 64 and 1024.
        refine_boots: v.int(&bounds::CLASSIFY_REFINE_BOOTS, None, c.refine_boots)?,
        // A reproduction of two distribution kernels in a suite cannot wait for 64 boots of
        // each: the last look decides (confirmed or not distinguishable) at this count.
        max_baseline_boots: v.int(
            &bounds::CLASSIFY_MAX_BASELINE_BOOTS,
            None,
            c.max_baseline_boots,
        )?,
        // Bug 12309 had two first-bad commits; three leaves room for one more without a run
        // hunting a fourth part that the re-test's intervals placed on noise.
        max_culprits: v.int(&bounds::CLASSIFY_MAX_CULPRITS, None, c.max_culprits)?,
        // A maintainer's first question of a culprit; one incremental build and a few rounds.
        revert: c.revert.unwrap_or(true),
    };
    if classify.min_boots > classify.max_boots {
        return Err(v.field(
            "classify.min_boots",
            format!(
                "{} is more than classify.max_boots ({}): a verdict could never be given",
                classify.min_boots, classify.max_boots
            ),
        ));
    }
    // The baselines confirm a regression when Mann-Whitney's p is below alpha; at their last
    // look it can go no lower than this (issue 61, finding 4).
    let floor = crate::stats::smallest_mann_whitney_p(classify.max_baseline_boots as usize);
    if classify.alpha <= floor {
        return Err(v.field(
            "classify.alpha",
            format!(
                "{} is at or below {:.2e}, the smallest p-value {} boots of each endpoint \
                 (classify.max_baseline_boots) can give: no regression could ever be \
                 confirmed; use at least {} (the default is 0.01)",
                crate::text::number(classify.alpha),
                floor,
                classify.max_baseline_boots,
                rounded_up(floor)
            ),
        ));
    }
    Ok(classify)
}

/// `x` > 0 rounded up to two significant digits, written short (`1.6e-4`): a value the user
/// can copy that is above `x`.
fn rounded_up(x: f64) -> String {
    let e = x.log10().floor() as i32;
    let m = (x / 10f64.powi(e) * 10.0).ceil() / 10.0;
    // Above `x` even if the division rounded down.
    let m = if m * 10f64.powi(e) <= x { m + 0.1 } else { m };
    format!("{}e{e}", (m * 10.0).round() / 10.0)
}
