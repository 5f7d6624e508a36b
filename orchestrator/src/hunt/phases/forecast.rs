//! The forecast, once the baselines are in and before the first candidate
//! ([`crate::sim::forecast`]): made once and journalled; then a no-go stops the hunt for a person
//! (unless told to go on), and `firstbad plan` stops in any case.

use super::super::driver::{Decision, Driver, Forecasting, StopReason};
use super::super::judge::Judge;
use super::super::state::BootRecord;
use super::super::HuntState;
use crate::config::ClassifyConfig;
use crate::hunt::judge::RefineProbe;
use crate::journal::Forecast;
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
            let forecast = Forecast {
                tuning: tuning(),
                ..(d.plan.forecaster)(&input(d, state, *model))
            };
            Some(Decision::Record(Event::Forecast(forecast)))
        }
    }
}

/// What the forecast of `d`'s hunt is made from: the baselines' model, the candidates left,
/// and the endpoints' boot and build times on these hosts.
fn input(d: &Driver, state: &HuntState, model: Model) -> Input {
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
    Input {
        model,
        baselines: GivenBaselines {
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
        hunts: FORECAST_HUNTS,
    }
}

/// Simulated hunts behind a forecast: its share of right answers is within about ±4 points
/// (one standard error at 80%), which is all a go/no-go needs.
pub const FORECAST_HUNTS: usize = 100;

/// Makes a forecast from what the baselines measured: [`crate::sim::forecast::forecast`],
/// which runs the simulator on `firstbad run` itself. The driver is handed it through
/// [`Plan::forecaster`](super::super::driver::Plan::forecaster) by whoever composes the hunt
/// ([`crate::engine`]), so that the driver stays below the simulator that drives it.
pub type Forecaster = fn(&Input) -> Forecast;

/// What the forecast is computed from: the baselines' model and the hunt's settings.
#[derive(Debug, Clone)]
pub struct Input {
    /// The judge's model of good and bad, from the baselines.
    pub model: Model,
    /// The baselines' boots the model is estimated from, on the simulator's scale (lower is
    /// better): every simulated hunt starts from them, as the hunt goes on from them.
    pub baselines: GivenBaselines,
    /// Candidates left after pruning, the bad endpoint included.
    pub candidates: usize,
    /// The hunt file's `[classify]` settings.
    pub classify: ClassifyConfig,
    /// How the posterior phase picks its commits.
    pub probe: RefineProbe,
    /// The hunt's seed: the forecast of a hunt is the same on every run.
    pub seed: u64,
    /// Median seconds of an endpoint's boot and workload on these hosts.
    pub boot_seconds: Option<f64>,
    /// Median seconds of the endpoints' builds, when they were built (not from the cache).
    pub build_seconds: Option<f64>,
    /// Boots the pool runs at once.
    pub pool: usize,
    /// Whether builds run while hosts boot.
    pub build_ahead: bool,
    /// Share of the endpoints' boots that failed (each still costs a boot).
    pub failed_share: f64,
    /// Boots the whole hunt may spend (`firstbad watch`'s automatic hunts).
    pub budget: Option<usize>,
    /// Simulated hunts to run ([`FORECAST_HUNTS`]; fewer in unit tests).
    pub hunts: usize,
}

/// Endpoint boots a simulated hunt starts from, confirmed as its baselines, instead of
/// measuring its own: a real hunt's, on the world's scale (lower is better), for a forecast of
/// the rest of that hunt ([`crate::sim::forecast`]). The world boots nothing for them.
#[derive(Debug, Clone, PartialEq)]
pub struct GivenBaselines {
    /// The good endpoint's values, in journal order.
    pub good: Vec<f64>,
    /// The bad endpoint's.
    pub bad: Vec<f64>,
    /// How many of each the judge's model is estimated from.
    pub boots: usize,
}
