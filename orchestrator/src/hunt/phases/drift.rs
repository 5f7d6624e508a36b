//! Drift checks: the good endpoint booted again after every `drift_check_every` verdicts (and
//! every few boots of the posterior phase), on every host of the pool, and tested against the
//! baselines and the earlier re-measurements' trend ([`sequential::drift`]). A move the trend
//! does not explain stops the hunt for a person once it has lasted `drift_lasts_boots`
//! re-measurements and `drift_lasts_minutes` minutes ([`sequential::drift_lasted`]): every
//! verdict since the last check is then suspect. A shorter move is a burst (a busy
//! neighbour): the check re-measures until the host is back, and the hunt goes on. The re-measurements are also the posterior's firmest evidence of how the host
//! moves.

use super::super::driver::{Decision, Driver, StopReason};
use super::super::evidence::{host_level, reference_boots, trend_origin};
use super::super::judge::{endpoint_failing, Judge};
use super::super::summary::unoriented;
use super::super::HuntState;
use crate::journal::{BootOutcome, Event};
use crate::sequential;

/// Whether a check falls now: after every `every` verdicts in the bisection, or every few
/// boots in the posterior phase (`in_refine`: the boots it has spent).
fn due(state: &HuntState, every: usize, in_refine: Option<usize>) -> bool {
    let v = state.verdicts.len();
    match in_refine {
        None => {
            v > 0
                && v.is_multiple_of(every)
                && !state
                    .drift_checks
                    .iter()
                    .any(|d| d.after_verdicts == v && d.in_refine_after.is_none() && !d.drifted)
        }
        Some(spent) => {
            let last = state
                .drift_checks
                .iter()
                .filter(|d| d.after_verdicts == v && !d.drifted)
                .filter_map(|d| d.in_refine_after)
                .max()
                .unwrap_or(0);
            sequential::refine_drift_due(spent, last, every)
        }
    }
}

/// The drift check's next step, when one is due or under way; `None` lets the phase go on.
pub fn check(
    d: &Driver,
    state: &HuntState,
    judge: &Judge,
    in_refine: Option<usize>,
) -> Option<Decision> {
    let every = d.plan.settings.classify.drift_check_every as usize;
    let model = judge.model()?;
    if every == 0 {
        return None;
    }
    let Some(from) = state.drift_started else {
        return due(state, every, in_refine).then_some(Decision::Record(Event::DriftCheckStarted));
    };
    let good = d.plan.good.as_str();
    let boots = state.boots.get(good).map_or(&[][..], Vec::as_slice);
    if let Some(why) = endpoint_failing(&d.plan.settings, good, "good", boots) {
        return Some(Decision::Stop(StopReason::Endpoint(why)));
    }
    // Every host of the pool re-measures good: each can drift on its own.
    let (done, running) = state.boots_since(good, from);
    let measured = done
        .iter()
        .filter(|r| matches!(r.outcome, BootOutcome::Measured { .. }))
        .count();
    let mut wanted = d
        .pool_size(state)
        .saturating_sub(done.len() + running)
        .max(usize::from(measured == 0 && running == 0));
    if wanted > 0 {
        return Some(d.boots_for(state, |_| {
            (wanted > 0).then(|| {
                wanted -= 1;
                good.to_owned()
            })
        }));
    }
    if running > 0 {
        return Some(Decision::Wait);
    }
    let remeasured = reference_boots(state, good);
    let origin = trend_origin(&d.plan.settings, state, good, &d.plan.bad);
    let check = remeasured.len().saturating_sub(measured);
    let Some(drift) = sequential::drift_from(model, origin, &remeasured, check) else {
        // No value to judge by (the boots failed): another boot of good.
        return Some(d.boots_for(state, |i| (i == 0).then(|| good.to_owned())));
    };
    // How long the move has lasted among this check's re-measurements, newest first.
    let c = &d.plan.settings.classify;
    let run = if drift.drifted {
        sequential::drift_run(model, origin, &remeasured, measured)
    } else {
        0
    };
    let seconds: f64 = done
        .iter()
        .rev()
        .filter_map(|r| r.outcome.seconds())
        .take(run)
        .sum();
    if drift.drifted {
        // A host read as wandering has references booted beside every candidate and every boot
        // read against them (`sequential::HostLevel`): a move that comes back is tracked there,
        // and only one that lasts DRIFT_LASTS_CAP times as long stops the hunt.
        let mut lasts = c.drift_lasts_boots as usize;
        if host_level(&d.plan.settings, state, model, good, &d.plan.bad).wanders() {
            lasts *= sequential::DRIFT_LASTS_CAP;
        }
        if !sequential::drift_lasted(run, seconds, lasts, c.drift_lasts_minutes) {
            // Not on a burst: re-measure while the move has not lasted, and let the host come
            // back (issue 38: a busy neighbour for a few seconds stopped a night's hunt).
            return Some(d.boots_for(state, |i| (i == 0).then(|| good.to_owned())));
        }
    }
    let recent = &remeasured[remeasured.len().saturating_sub(sequential::DRIFT_WINDOW)..];
    let v = state.verdicts.len();
    let when = match in_refine {
        None => format!("after {v} verdicts"),
        Some(spent) => format!("after {spent} boots of the posterior phase"),
    };
    let summary = format!(
        "good endpoint re-measured {when}, recent boots [{}]: {:.2} of the way from the good \
         centre {:.3} to the bad centre {:.3} beyond the trend of the earlier ones ({:+.2}σ per \
         {} boots), z = {:+.1} (drift at |z| ≥ {} and ≥ {} of the way)",
        recent
            .iter()
            .map(|x| format!("{:.3}", x.0))
            .collect::<Vec<_>>()
            .join(", "),
        drift.shift,
        unoriented(model.good, model.direction),
        unoriented(model.bad, model.direction),
        drift.trend,
        sequential::TREND_UNIT,
        drift.z,
        sequential::DRIFT_Z,
        sequential::DRIFT_MIN_SHIFT
    );
    let summary = if drift.drifted {
        format!(
            "{summary}; the move lasted {run} re-measurements over {:.1} min (drift once it \
             lasts {} and {} min)",
            seconds / 60.0,
            c.drift_lasts_boots,
            c.drift_lasts_minutes
        )
    } else if measured > d.pool_size(state) {
        format!(
            "{summary}; re-measured {measured} times: the host came back within the check (a \
             burst, not drift)"
        )
    } else {
        summary
    };
    Some(Decision::Record(Event::DriftCheck {
        after_verdicts: v,
        in_refine_after: in_refine,
        drifted: drift.drifted,
        summary,
    }))
}

/// What the hunt says when it stops on a drifted host.
pub fn stop_message(state: &HuntState, good: &str, summary: &str) -> String {
    let recent = state.boots.get(good).map_or(&[][..], |b| {
        &b[b.len().saturating_sub(sequential::DRIFT_WINDOW)..]
    });
    let mut hosts: Vec<&str> = recent.iter().map(|r| r.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    format!(
        "the test host drifted ({}): {summary}. The verdicts given since the previous check \
         are suspect; check the host, then rerun to resume (the check is repeated first)",
        hosts.join(", ")
    )
}
