//! How sure a report is of its answer ([`Confidence`]): the endpoints' separation, the
//! verdicts' error rates, the final re-test and its posterior probability, drift of the host.

use super::context::Context;
use super::model::{CommitReport, Confidence, Estimate, RestOfRegression};
use crate::config::Direction;
use crate::hunt::HuntState;
use crate::journal::{HuntEnd, Verdict};

/// A probability as a percentage without spurious digits: 0.01 → "1%", 0.005 → "0.5%".
fn percent(p: f64) -> String {
    let s = format!("{:.2}", p * 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// The report's [`Confidence`] from the journal and the endpoints' boots.
pub(super) fn confidence(
    state: &HuntState,
    good: &CommitReport,
    bad: &CommitReport,
    ctx: &Context,
) -> Confidence {
    let worse = |a: f64, b: f64| match ctx.direction {
        Direction::LowerIsBetter => a > b,
        Direction::HigherIsBetter => a < b,
    };
    let gv: Vec<f64> = good.boots.iter().filter_map(|b| b.value).collect();
    let bv: Vec<f64> = bad.boots.iter().filter_map(|b| b.value).collect();
    let separation = (!gv.is_empty() && !bv.is_empty()).then(|| {
        let pairs = gv.iter().flat_map(|g| bv.iter().map(move |b| (*g, *b)));
        pairs.filter(|(g, b)| worse(*b, *g)).count() as f64 / (gv.len() * bv.len()) as f64
    });
    let mut decided = 0;
    let mut skipped = 0;
    for (_, v, _) in &state.verdicts {
        match v {
            Verdict::Skip => skipped += 1,
            Verdict::Good | Verdict::Bad => decided += 1,
        }
    }
    let mut reasons = Vec::new();
    if ctx.reproduction {
        return reproduction(state, separation, reasons);
    }
    match separation {
        Some(s) if s >= 1.0 => reasons
            .push("every bad-endpoint boot is worse than every good-endpoint boot".to_owned()),
        Some(s) => reasons.push(format!(
            "the endpoints overlap: {:.0}% of (good, bad) boot pairs are ordered",
            s * 100.0
        )),
        None => reasons.push("the endpoints are not measured yet".to_owned()),
    }
    // The rates hold against exact centres; the baselines' estimates make a verdict wrong more
    // often (`firstbad sim`: 2.8–3.6% at alpha = beta = 1%, Δ/σ = 1), which the posterior
    // allows for.
    reasons.push(format!(
        "{decided} verdicts from a sequential test at alpha {} and beta {} against the \
         baselines' centres (the centres' own error is not in these rates; the culprit's \
         probability allows for it)",
        percent(ctx.classify.alpha),
        percent(ctx.classify.beta)
    ));
    if skipped > 0 {
        reasons.push(format!("{skipped} commit(s) skipped"));
    }
    let found = matches!(state.end, Some(HuntEnd::Found { .. }));
    let confirmation = state.confirmation.as_ref().filter(|_| found);
    if let Some(c) = confirmation {
        reasons.push(c.summary.clone());
    }
    for d in &state.drift_checks {
        if d.drifted {
            reasons.push(format!("host drift: {}", d.summary));
        }
    }
    let probability = confirmation.and_then(|c| c.confidence);
    let level = match confirmation {
        _ if !found => "low",
        Some(c) if !c.confirmed => "low",
        Some(_) if probability.is_some_and(|p| p >= ctx.classify.confidence) => "high",
        // Absolute mode: no posterior; the re-test and complete separation must carry it.
        Some(_) if probability.is_none() && separation == Some(1.0) => "high",
        Some(_) => "medium",
        // A journal from before the final re-test existed.
        None if separation.unwrap_or(0.0) >= 0.9 => "medium",
        None => "low",
    };
    if !found {
        reasons.push("no single first bad commit (yet)".to_owned());
    }
    let levels = confirmation.and_then(|c| c.levels);
    Confidence {
        level,
        baseline_separation: separation,
        probability,
        confirmed: confirmation.map(|c| c.confirmed),
        culprit_share: levels.map(|l| Estimate::from(l.share())),
        culprit_share_in_metric: levels
            .and_then(|l| l.metric_share(crate::hunt::steps::WHOLE, l.ratio))
            .map(Estimate::from),
        rest: levels.map(|l| {
            let rest = l.rest();
            RestOfRegression {
                before: rest.before,
                after: rest.after,
            }
        }),
        decided_verdicts: decided,
        skipped,
        reasons,
    }
}

/// A reproduction's [`Confidence`]: the two kernels' separation and the baselines' test, which
/// is all it measures.
fn reproduction(
    state: &HuntState,
    separation: Option<f64>,
    mut reasons: Vec<String>,
) -> Confidence {
    if let Some(s) = separation {
        reasons.push(format!(
            "{:.0}% of (good, bad) boot pairs are ordered the way of the regression",
            s * 100.0
        ));
    }
    let (level, test) = match &state.end {
        Some(HuntEnd::Reproduced { summary } | HuntEnd::Measured { summary }) => (
            if separation.unwrap_or(0.0) >= 0.9 {
                "high"
            } else {
                "medium"
            },
            summary.clone(),
        ),
        Some(HuntEnd::NotReproduced { message }) => ("medium", message.clone()),
        _ => ("low", "the baselines are not decided yet".to_owned()),
    };
    reasons.push(format!(
        "the baselines' exact Mann-Whitney test, looked at after {}: {test}",
        crate::sequential::looks_in_words()
    ));
    for d in state.drift_checks.iter().filter(|d| d.drifted) {
        reasons.push(format!("host drift: {}", d.summary));
    }
    Confidence {
        level,
        baseline_separation: separation,
        probability: None,
        confirmed: None,
        culprit_share: None,
        culprit_share_in_metric: None,
        rest: None,
        decided_verdicts: 0,
        skipped: 0,
        reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::percent;

    #[test]
    fn a_rate_prints_without_spurious_digits() {
        assert_eq!(percent(0.01), "1%");
        assert_eq!(percent(0.05), "5%");
        assert_eq!(percent(0.005), "0.5%");
        assert_eq!(percent(0.0125), "1.25%");
    }
}
