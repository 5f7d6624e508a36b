//! The forecast, once the baselines are in and before the first candidate
//! ([`crate::forecast`]): made once and journalled; then a no-go stops the hunt for a person
//! (unless told to go on), and `firstbad plan` stops in any case.

use super::super::driver::{Decision, Driver, Forecasting, StopReason};
use super::super::judge::Judge;
use super::super::state::BootRecord;
use super::super::HuntState;
use crate::forecast;
use crate::journal::{BuildOutcome, Event};
use crate::sequential::Model;

/// The forecast, once the baselines are in and before the first verdict; then what a
/// no-go, or `firstbad plan`, does. A hunt that gave verdicts before it had a forecast
/// (its journal is older) goes on without one. A rerun whose tuning (`[classify]`'s boot caps,
/// rates, posterior phase, re-test) differs from the forecast's, before the first verdict, is
/// forecast again: a no-go's advice is followed by changing them.
pub fn next(d: &Driver, state: &HuntState, judge: &Judge) -> Option<Decision> {
    let mode = d.plan.forecast;
    if mode == Forecasting::Off {
        return None;
    }
    // The tuning is read only before the first candidate: every later decision passes here.
    let tuning = || crate::hunt::tuning(&d.plan.settings.classify);
    let before_candidates = state.verdicts.is_empty() && state.confirm.is_none();
    match &state.forecast {
        Some(f) if !before_candidates || f.tuning == tuning() => match mode {
            Forecasting::Only => Some(Decision::Stop(StopReason::Planned { go: f.go })),
            Forecasting::Gate if !f.go => Some(Decision::Stop(StopReason::NoGo(f.verdict()))),
            _ => None,
        },
        _ => {
            let none = |why: &str| {
                (mode == Forecasting::Only)
                    .then(|| Decision::Stop(StopReason::NoForecast(why.to_owned())))
            };
            if !before_candidates {
                return none(
                    "the hunt is past its baselines (it gave verdicts before forecasts were made)",
                );
            }
            let Some(model) = judge.model() else {
                return none("an absolute threshold (classify.mode) has no model of the noise to simulate the hunt from");
            };
            let forecast = forecast::Forecast {
                tuning: tuning(),
                ..forecast::forecast(&input(d, state, *model))
            };
            Some(Decision::Record(Event::Forecast(forecast)))
        }
    }
}

/// What the forecast of `d`'s hunt is made from: the baselines' model, the candidates left,
/// and the endpoints' boot and build times on these hosts.
fn input(d: &Driver, state: &HuntState, model: Model) -> forecast::Input {
    let endpoints = [d.plan.good.as_str(), d.plan.bad.as_str()];
    let boots: Vec<&BootRecord> = endpoints
        .iter()
        .filter_map(|c| state.boots.get(*c))
        .flatten()
        .collect();
    let seconds: Vec<f64> = boots.iter().filter_map(|r| r.outcome.seconds()).collect();
    let failed = boots.len() - seconds.len();
    // A kernel from the build cache takes no time, which says nothing of the candidates'.
    let builds: Vec<f64> = endpoints
        .iter()
        .filter_map(|c| match state.builds.get(*c) {
            Some(BuildOutcome::Built { seconds, .. }) if *seconds >= 1.0 => Some(*seconds),
            _ => None,
        })
        .collect();
    let median = |v: &[f64]| (!v.is_empty()).then(|| crate::stats::median(v));
    // The simulator's scale: lower is better, as the model's oriented log scale reads it.
    let scaled = |commit: &str| -> Vec<f64> {
        let dir = d.plan.settings.direction;
        state
            .values(commit)
            .iter()
            .map(|&v| crate::sequential::oriented(v, dir).exp())
            .collect()
    };
    let (good, bad) = (scaled(&d.plan.good), scaled(&d.plan.bad));
    let n = state.baseline_boots.unwrap_or(good.len().min(bad.len()));
    forecast::Input {
        model,
        baselines: crate::sim::GivenBaselines {
            good,
            bad,
            boots: n,
        },
        candidates: d.bisection().remaining(),
        classify: d.plan.settings.classify.clone(),
        probe: d.plan.settings.probe,
        seed: d.plan.seed,
        boot_seconds: median(&seconds),
        build_seconds: median(&builds),
        pool: d.pool_size(state),
        build_ahead: d.plan.build_ahead,
        failed_share: failed as f64 / boots.len().max(1) as f64,
        budget: d.plan.budget,
        hunts: forecast::FORECAST_HUNTS,
    }
}
