//! The host over time: where a hunt's boots stand on the trend's time axis ([`Timeline`]), and
//! the drift check of the good endpoint's re-measurements ([`drift`]) that stops a hunt when
//! the host moved in a way the trend does not explain.

use super::{oriented, Model};
use crate::stats::median;

/// Re-measurements of the good endpoint looked at together by the drift check: the last 4, so
/// that a slow drift is seen within a few checks and an old re-measurement does not mask it.
pub const DRIFT_WINDOW: usize = 4;

/// z-score past which the good endpoint has moved (two-sided p ≈ 0.001 per check: over the
/// handful of checks of a hunt, a false alarm about once in a few hundred hunts).
pub const DRIFT_Z: f64 = 3.29;

/// Smallest move of the good endpoint that counts as drift, as a share of the effect: below a
/// quarter of the way to bad no verdict is at risk.
pub const DRIFT_MIN_SHIFT: f64 = 0.25;

/// Boots of the posterior phase per drift check, for each verdict between checks in the
/// bisection (`drift_check_every`): a verdict there takes 1-10 boots, so 4 boots per verdict
/// keeps the good endpoint re-measured about as often. Without it the phase, which may spend
/// hundreds of boots, ran blind: under a 1σ-per-100-boots drift `firstbad sim` saw it claim
/// 84% for answers right 2.5% of the time.
pub const REFINE_DRIFT_BOOTS_PER_VERDICT: usize = 4;

/// Whether the posterior phase, having spent `spent` boots and last checked for drift at
/// `last`, checks again now (`every`: verdicts between checks in the bisection; 0 = never).
pub fn refine_drift_due(spent: usize, last: usize, every: usize) -> bool {
    every > 0 && spent >= last + every * REFINE_DRIFT_BOOTS_PER_VERDICT
}

/// Largest residual, in σ, that one re-measurement lends the host's trend. A trend is a slow
/// drift (about 1σ per 100 boots): a burst of a busy neighbour, 5-10σ off for a boot or two,
/// fitted as a trend, made the host's true level look like a move the other way once it came
/// back (issue 38). Clipped, one far-off re-measurement tilts the trend by at most this much.
pub const TREND_CLIP: f64 = 3.0;

/// A re-measurement's residual as the trend reads it ([`TREND_CLIP`]).
fn trend_residual(r: f64) -> f64 {
    r.clamp(-TREND_CLIP, TREND_CLIP)
}

/// Boots per unit of the trend's time axis: a host's drift is stated in σ per 100 boots.
pub const TREND_UNIT: f64 = 100.0;

/// Prior precision of a host's linear drift, in (σ per [`TREND_UNIT`] boots)⁻²: a host that
/// slows by 1σ every 100 boots is one prior standard deviation out, 3σ per 100 boots is far
/// out. Over the few hundred boots of a hunt the boots themselves soon outweigh it.
pub const TREND_PRIOR: f64 = 1.0;

/// Where a hunt's boots stand in time, for admitting them ([`Model::admit`]) on a host that
/// drifts: the mean boot time of the baselines, where the model's centres stand, and the trend
/// the good endpoint's re-measurements show ([`Timeline::new`]). A boot is admitted when it
/// lies within 4σ of the centres moved by that trend, so a host slowing steadily does not turn
/// its later boots into "outliers".
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeline {
    /// Mean boot time of the baseline boots.
    pub origin: f64,
    /// The host's trend, σ per [`TREND_UNIT`] boots.
    pub trend: f64,
}

impl Timeline {
    /// The trend from the good endpoint's re-measurements (raw value, boot time) against the
    /// good centre at `origin`: Σ τr / (λ + Σ τ²), shrunk towards none while they are few
    /// (λ = [`TREND_PRIOR`]). Only the admission window uses it: the posterior estimates the
    /// trend from every boot.
    pub fn new(model: &Model, origin: f64, remeasured: &[(f64, f64)]) -> Timeline {
        let flat = Timeline { origin, trend: 0.0 };
        let (mut tr, mut tt) = (0.0, TREND_PRIOR);
        for &(v, t) in remeasured {
            if let Some(y) = flat.admit(model, v, t) {
                let tau = flat.tau(t);
                tr += tau * trend_residual((y - model.good) / model.sigma);
                tt += tau * tau;
            }
        }
        Timeline {
            origin,
            trend: tr / tt,
        }
    }

    /// Boot time `t` in [`TREND_UNIT`]s from the origin.
    pub fn tau(&self, t: f64) -> f64 {
        (t - self.origin) / TREND_UNIT
    }

    /// The boot's value on the oriented log scale when [`Model::admit`] admits it after the
    /// trend is taken out; the value itself is returned as measured.
    pub fn admit(&self, model: &Model, value: f64, t: f64) -> Option<f64> {
        let y = oriented(value, model.direction);
        let moved = self.trend * self.tau(t) * model.sigma;
        let lo = model.good.min(model.bad) - 4.0 * model.sigma + moved;
        let hi = model.good.max(model.bad) + 4.0 * model.sigma + moved;
        (lo..=hi).contains(&y).then_some(y)
    }
}

/// What the drift check saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drift {
    /// Where the recent good boots sit, less the trend the earlier ones showed: 0 = the
    /// baselines' good centre, 1 = the bad centre.
    pub shift: f64,
    /// The move in standard errors (boot noise, the baselines' own uncertainty and the
    /// trend's).
    pub z: f64,
    /// The trend the earlier re-measurements showed, in σ per [`TREND_UNIT`] boots.
    pub trend: f64,
    /// Whether it is drift: |z| ≥ [`DRIFT_Z`], and both the mean's and the median's shift
    /// ≥ [`DRIFT_MIN_SHIFT`] the same way.
    pub drifted: bool,
}

/// Checks the good endpoint's re-measurements (raw value, boot time; oldest first, baselines
/// excluded) against the model, whose centres stand at boot time `origin`: the mean of the last
/// [`DRIFT_WINDOW`] admitted ones, as a z-test against where the earlier ones put the good
/// endpoint by now, a linear trend from the baselines' centre (prior [`TREND_PRIOR`]).
///
/// A slow, steady drift is not a reason to stop: the culprit's posterior
/// ([`crate::posterior::dag_posterior`]) follows a linear trend of the host from every boot.
/// What stops the hunt is a move the trend does not explain: a step (a firmware update,
/// another job on the host), or a drift that speeds up.
///
/// A re-measurement far beyond both centres is an outlier boot and left out, unless the last
/// [`DRIFT_WINDOW`] all are, on the same side: that is the host, not a stray boot (four in a
/// row at a 5% outlier rate: about once in 160 000), and it is drift whatever the trend once
/// their median is [`DRIFT_MIN_SHIFT`] of the way from good to bad.
pub fn drift(model: &Model, origin: f64, remeasured: &[(f64, f64)]) -> Option<Drift> {
    drift_from(model, origin, remeasured, remeasured.len())
}

/// [`drift`], with only the re-measurements before index `trend_until` lending the trend the
/// recent ones are tested against: a check that keeps re-measuring while a move lasts
/// ([`drift_run`]) tests its newest boots against the trend of the checks before it, not
/// against a trend its own moved boots would bend towards them.
pub fn drift_from(
    model: &Model,
    origin: f64,
    remeasured: &[(f64, f64)],
    trend_until: usize,
) -> Option<Drift> {
    let last = &remeasured[remeasured.len().saturating_sub(DRIFT_WINDOW)..];
    let side = |v: f64| {
        let y = oriented(v, model.direction);
        if model.admit(v).is_some() {
            0
        } else if y > model.good.max(model.bad) {
            1
        } else {
            -1
        }
    };
    if last.len() == DRIFT_WINDOW
        && side(last[0].0) != 0
        && last.iter().all(|b| side(b.0) == side(last[0].0))
    {
        let y: Vec<f64> = last
            .iter()
            .map(|b| oriented(b.0, model.direction))
            .collect();
        let moved = median(&y) - model.good;
        let se = model.sigma * (1.0 / DRIFT_WINDOW as f64 + 1.0 / model.n_baseline.max(1.0)).sqrt();
        let shift = moved / (model.bad - model.good);
        // Far beyond the admitted range is not yet far on the regression's scale: on a timed
        // command's σ of 0.3%, a machine 1.5% quicker once a neighbour ended was all four
        // outside, 0.16 of the way, and stopped a hunt for a person (tests/metric_noise.rs,
        // 2026-12-05). A move is drift at a quarter of the way, as below.
        return Some(Drift {
            shift,
            z: moved / se,
            trend: 0.0,
            drifted: shift.abs() >= DRIFT_MIN_SHIFT,
        });
    }
    let kept: Vec<(usize, (f64, f64))> = remeasured
        .iter()
        .enumerate()
        .filter_map(|(i, &(v, t))| {
            let y = model.admit(v)?;
            Some((
                i,
                ((y - model.good) / model.sigma, (t - origin) / TREND_UNIT),
            ))
        })
        .collect();
    let split = kept.len().saturating_sub(DRIFT_WINDOW);
    let recent: Vec<(f64, f64)> = kept[split..].iter().map(|k| k.1).collect();
    let earlier: Vec<(f64, f64)> = kept[..split]
        .iter()
        .filter(|k| k.0 < trend_until)
        .map(|k| k.1)
        .collect();
    if recent.is_empty() {
        return None;
    }
    // The earlier re-measurements' trend through the good centre: β̂ = Σ τr / (λ + Σ τ²).
    let precision = TREND_PRIOR + earlier.iter().map(|b| b.1 * b.1).sum::<f64>();
    let trend = earlier
        .iter()
        .map(|b| b.1 * trend_residual(b.0))
        .sum::<f64>()
        / precision;
    let k = recent.len() as f64;
    let (r_bar, t_bar) = recent
        .iter()
        .fold((0.0, 0.0), |a, b| (a.0 + b.0 / k, a.1 + b.1 / k));
    let moved = r_bar - trend * t_bar;
    let se = (1.0 / k + 1.0 / model.n_baseline.max(1.0) + t_bar * t_bar / precision).sqrt();
    // The median of the recent residuals must have moved as far, the same way: one stray run
    // inside the admitted range (a TCG hiccup of 14.9 ms beside 3.3 ms) carried the mean of
    // two past the line and stopped the demo hunt. Once the check has re-measured (until the
    // move lasts, [`drift_run`]) the median leaves such a run out; a host that moved moves it.
    let residuals: Vec<f64> = recent.iter().map(|b| b.0 - trend * b.1).collect();
    let robust = median(&residuals) * model.sigma / (model.bad - model.good);
    let z = moved / se;
    let shift = moved * model.sigma / (model.bad - model.good);
    Some(Drift {
        shift,
        z,
        trend,
        drifted: z.abs() >= DRIFT_Z
            && shift.abs() >= DRIFT_MIN_SHIFT
            && robust * shift.signum() >= DRIFT_MIN_SHIFT,
    })
}

/// How many of the newest re-measurements the move has lasted: the run, among the last
/// `newest` of `remeasured` (a check's own boots), of re-measurements at each of which [`drift`]
/// (over the boots up to it) said drifted, counted back from the newest. A burst of a busy
/// neighbour (1-3 boots far off, then back) keeps the window of [`DRIFT_WINDOW`] drifted for
/// at most four re-measurements; a host that moved keeps it drifted for as long as it stays.
pub fn drift_run(model: &Model, origin: f64, remeasured: &[(f64, f64)], newest: usize) -> usize {
    let newest = newest.min(remeasured.len());
    let check = remeasured.len() - newest;
    (0..newest)
        .take_while(|&back| {
            drift_from(model, origin, &remeasured[..remeasured.len() - back], check)
                .is_some_and(|d| d.drifted)
        })
        .count()
}

/// Re-measurements past which a move has lasted whatever its minutes, as a multiple of
/// `drift_lasts_boots`: a command hunt's runs take seconds, and its check must end.
pub const DRIFT_LASTS_CAP: usize = 4;

/// Whether a move of `run` re-measurements ([`drift_run`]) over `seconds` of boots has lasted
/// long enough to be drift: `boots` re-measurements and `minutes` minutes (unknown durations,
/// all zero, leave it to the boots), or [`DRIFT_LASTS_CAP`] times the boots.
pub fn drift_lasted(run: usize, seconds: f64, boots: usize, minutes: u32) -> bool {
    run >= boots
        && (minutes == 0
            || seconds <= 0.0
            || seconds >= 60.0 * f64::from(minutes)
            || run >= DRIFT_LASTS_CAP * boots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Direction;
    use crate::sequential::tests::five_sigma;

    #[test]
    fn the_posterior_phase_checks_for_drift_every_sixteen_boots_by_default() {
        assert!(!refine_drift_due(15, 0, 4));
        assert!(refine_drift_due(16, 0, 4));
        assert!(!refine_drift_due(20, 16, 4));
        assert!(
            refine_drift_due(33, 16, 4),
            "a pool's batch may step past the mark"
        );
        assert!(!refine_drift_due(1000, 0, 0), "0 turns drift checks off");
    }

    /// tests/metric_noise.rs, 2026-12-05: a timed command with 0.3% noise on a machine that
    /// became 1.5% quicker put four re-measurements in a row below the admitted range, 0.16 of
    /// the way from good to bad: not drift. A quarter of the way and more is.
    #[test]
    fn four_boots_past_the_admitted_range_are_drift_from_a_quarter_of_the_way() {
        let m = Model::from_baselines(
            &[35.02, 34.95, 35.1, 35.0, 35.05],
            &[38.16, 38.1, 38.2, 38.15, 38.12],
            Direction::LowerIsBetter,
        );
        let at = |v: &[f64]| -> Vec<(f64, f64)> {
            v.iter()
                .enumerate()
                .map(|(i, &x)| (x, 10.0 * (i + 1) as f64))
                .collect()
        };
        let quicker = drift(&m, 0.0, &at(&[34.53, 34.38, 34.57, 34.6])).unwrap();
        assert!(
            !quicker.drifted && quicker.shift < -0.1 && quicker.z < -3.29,
            "{quicker:?}"
        );
        let moved = drift(&m, 0.0, &at(&[33.8, 33.7, 33.9, 33.8])).unwrap();
        assert!(moved.drifted && moved.shift < -0.25, "{moved:?}");
    }

    #[test]
    fn drift_is_a_move_of_the_good_endpoint_that_is_both_significant_and_large() {
        let m = five_sigma();
        // Re-measured every 10 boots after baselines centred on boot 0.
        let every_10 = |v: &[f64]| -> Vec<(f64, f64)> {
            v.iter()
                .enumerate()
                .map(|(i, &x)| (x, 10.0 * (i + 1) as f64))
                .collect()
        };
        assert!(drift(&m, 0.0, &[]).is_none());
        // Still at 35: no drift.
        let d = drift(&m, 0.0, &every_10(&[35.3, 34.8])).unwrap();
        assert!(!d.drifted && d.shift.abs() < 0.1, "{d:?}");
        // One boot half-way to bad (39.7) is not enough alone (z ≈ 2.4); three are (z ≈ 3.6).
        let half = (35.0f64 * 45.0).sqrt();
        let one = drift(&m, 0.0, &every_10(&[half])).unwrap();
        assert!(!one.drifted && (one.shift - 0.5).abs() < 0.01, "{one:?}");
        let three = drift(&m, 0.0, &every_10(&[half, half, half])).unwrap();
        assert!(three.drifted, "{three:?}");
        // Only the last DRIFT_WINDOW re-measurements are tested: an old drifted stretch that
        // came back is not drift now.
        let back = every_10(&[half, half, half, 35.0, 35.1, 34.9, 35.0]);
        assert!(!drift(&m, 0.0, &back).unwrap().drifted);
        // A tiny but very precise move is not drift: below a quarter of the effect.
        let tight = Model { sigma: 0.002, ..m };
        let small = drift(&tight, 0.0, &every_10(&[35.5, 35.5, 35.5, 35.5])).unwrap();
        assert!(small.z > DRIFT_Z && !small.drifted, "{small:?}");
    }

    // The demo, 2026-12-01: one run of good at 14.9 ms beside 3.3 ms stopped the hunt as
    // drift; two more re-measurements outvote it.
    #[test]
    fn one_stray_re_measurement_is_outvoted_once_the_check_re_measures() {
        let m = five_sigma();
        let every_10 = |v: &[f64]| -> Vec<(f64, f64)> {
            v.iter()
                .enumerate()
                .map(|(i, &x)| (x, 10.0 * (i + 1) as f64))
                .collect()
        };
        // 44 lies between the centres (admitted): alone, it is drift.
        let alone = drift(&m, 0.0, &every_10(&[44.0])).unwrap();
        assert!(alone.drifted, "{alone:?}");
        let outvoted = drift(&m, 0.0, &every_10(&[44.0, 35.1, 34.9])).unwrap();
        assert!(!outvoted.drifted, "{outvoted:?}");
        let later = drift(&m, 0.0, &every_10(&[35.0, 35.2, 44.0, 35.1, 34.9])).unwrap();
        assert!(!later.drifted, "{later:?}");
        // Three of four are the host: drift.
        let host = drift(&m, 0.0, &every_10(&[35.0, 44.0, 44.2, 43.8])).unwrap();
        assert!(host.drifted, "{host:?}");
    }

    // Issue 38: the chain test's hunt stopped on a shared machine's neighbour. Good sat at
    // 4.3 ms, bad at 63.3; one re-measurement read 41.8 ms, the next 12.6 and 5.8, and the
    // host was back. The move never lasts six re-measurements: not drift. A host that moved
    // and stays is drift once the move has lasted.
    #[test]
    fn a_burst_of_a_busy_neighbour_does_not_last_and_a_host_that_moved_does() {
        let m = Model {
            good: 4.327f64.ln(),
            bad: 63.323f64.ln(),
            sigma: 0.2,
            direction: Direction::LowerIsBetter,
            n_baseline: 8.0,
        };
        let timed = |v: &[f64]| -> Vec<(f64, f64)> {
            v.iter()
                .enumerate()
                .map(|(i, &x)| (x, 10.0 * (i + 1) as f64))
                .collect()
        };
        let earlier = [4.4, 4.2, 4.5, 4.3];
        let burst = [41.829, 12.576, 5.846, 4.4, 4.3, 4.2, 4.4];
        let mut boots: Vec<f64> = earlier.to_vec();
        let mut longest = 0;
        for (i, &b) in burst.iter().enumerate() {
            boots.push(b);
            let run = drift_run(&m, 0.0, &timed(&boots), i + 1);
            longest = longest.max(run);
            assert!(
                !drift_lasted(run, 10.0 * run as f64, 6, 0),
                "{boots:?}: run {run}"
            );
        }
        assert!(longest >= 1, "the burst is seen");
        assert!(
            !drift(&m, 0.0, &timed(&boots)).unwrap().drifted,
            "the host came back"
        );
        // Moved to 30 ms and stays: the run grows with every re-measurement.
        let mut moved: Vec<f64> = earlier.to_vec();
        moved.extend([30.0, 31.0, 29.0, 30.5, 30.2, 29.8]);
        let run = drift_run(&m, 0.0, &timed(&moved), 6);
        assert!(run >= 5, "run {run}");
        moved.push(30.1);
        let run = drift_run(&m, 0.0, &timed(&moved), 7);
        assert!(
            drift_lasted(run, 0.0, 6, 3),
            "run {run}: durations unknown, boots decide"
        );
        assert!(
            !drift_lasted(run, 70.0, 6, 3),
            "70 s is short of three minutes"
        );
        assert!(drift_lasted(run, 200.0, 6, 3));
        assert!(
            drift_lasted(24, 10.0, 6, 3),
            "a command's quick runs: the cap ends it"
        );
    }

    #[test]
    fn a_steady_trend_is_followed_and_a_step_stops_the_hunt() {
        let m = five_sigma();
        let sigmas = |r: f64| (m.good + r * m.sigma).exp();
        // Every 20 boots, the host 1.5σ per 100 boots slower: by the last four re-measurements
        // good sits half-way to bad, which the baselines alone would call drift (z ≈ 4.2).
        let trend: Vec<(f64, f64)> = (1..=10)
            .map(|i| (sigmas(1.5 * 0.2 * i as f64), 20.0 * i as f64))
            .collect();
        let d = drift(&m, 0.0, &trend).unwrap();
        assert!(!d.drifted && d.trend > 1.0, "{d:?}");
        // Flat, then a step all the way to bad: drift.
        let step: Vec<(f64, f64)> = (1..=10)
            .map(|i| (if i > 6 { 45.0 } else { 35.0 }, 20.0 * i as f64))
            .collect();
        let d = drift(&m, 0.0, &step).unwrap();
        assert!(d.drifted && d.trend.abs() < 0.1 && d.shift > 0.9, "{d:?}");
        // A step so far that every boot after it lies beyond both centres (the outlier
        // window): one such re-measurement is a stray boot, four in a row are the host.
        let far: Vec<(f64, f64)> = (1..=10)
            .map(|i| (if i > 6 { 70.0 } else { 35.0 }, 20.0 * i as f64))
            .collect();
        assert!(!drift(&m, 0.0, &far[..7]).unwrap().drifted);
        let d = drift(&m, 0.0, &far).unwrap();
        assert!(d.drifted && d.shift > 2.0, "{d:?}");
    }
}
