//! The accumulating test: evidence that the head is worse than the reference, added up night
//! after night until it is enough (issue 36, item 1).
//!
//! Judging each night on its own throws away what the nights before it said: 4 boots a side
//! see a 10% step (Δ/σ = 1 at 10% boot noise) at p < 0.01 on about one night in ten, yet a week
//! of such nights holds 28 boots a side, plenty to see it. This test keeps a running sum and
//! fires when the sum is large enough, the false alarms bounded by design.
//!
//! # The statistic
//! Everything is on the oriented log scale (larger is worse), like the rest of the detector.
//! - **The noise**, σ: pooled over every night so far from the differences between two boots
//!   of the same commit on the same night (median |x_i − x_j| / (0.6745 √2), every pair of a
//!   side), so a host that moves between nights, a change of the head and the odd 3x boot do
//!   not inflate it.
//! - **Each side's level on a night**: the mean of its boots, without those far from the
//!   others that night ([`OUTLIER`]: a boot 3x slower is about the host, not the kernel).
//! - **The host's level**: a Kalman filter over the reference's nightly levels with a level and
//!   a slope, so a host that drifts is followed without lag; a night whose reference is more
//!   than [`HOST_MOVE`] standard deviations from the filter's prediction is a host that moved
//!   (another job, a firmware change), and the filter starts again from that night. Tonight's
//!   reference is in the level the head is compared with; on a steady host the nights before
//!   it add their boots, so the head's excess is measured against a level known far better than
//!   tonight's 4 reference boots alone (the within-night difference's variance halves).
//! - **Tonight's evidence**: z = (head level − host level) / its standard deviation.
//! - **The sum**: the one-sided CUSUM of Page (1954) on the log-likelihood ratio of "worse by
//!   `min_effect`" against "no change": S = max(0, S + δ/v · (e − δ/2)), with e the head's
//!   excess, v its variance and δ = ln(1 + min_effect). It fires when S passes the threshold
//!   that gives, on a quiet series, one false alarm in `false_alarm_nights` nights on average
//!   (Siegmund's approximation of the average run length, solved for the threshold).
//! - **Where the change is**: among the nights since the last change (at most [`PLACE_BACK`]
//!   before the sum's current run), the split with the largest likelihood ratio of a move
//!   estimated from the nights after it, so a night that drifted up by chance before the
//!   change is not named.
//! - **After an alarm** the sum starts again from the head's new level, re-estimated from the
//!   nights since the change while the sum stands at 0.
//!
//! A creep adds up like a step; an improvement (negative excess) only drains the sum.

use super::Night;
use crate::config::Direction;
use crate::sequential::oriented_all;
use crate::stats::median;

/// Settings of the accumulating test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AccumulateConfig {
    /// Smallest relative change worth a hunt (0.05 = 5%): the sum is tuned to find it fastest.
    pub min_effect: f64,
    /// Average number of quiet nights between two false alarms (the average run length under
    /// no change). 400: one false alarm a year of nightlies and then some.
    pub false_alarm_nights: f64,
}

impl Default for AccumulateConfig {
    fn default() -> Self {
        AccumulateConfig {
            min_effect: 0.05,
            false_alarm_nights: 400.0,
        }
    }
}

/// Nights before the sum's current run that the change may be placed at: the sum can touch 0
/// on one night after a small change, and a week is as far as a run of quiet nights is worth
/// searching (a longer search finds a chance high stretch long before the change).
const PLACE_BACK: usize = 7;

/// The long-run variance of the nights' standardised evidence over its one-night variance:
/// neighbouring nights are compared with host levels that share the nights before them, which
/// correlates their evidence (lag-1 correlation ≈ 0.14 on the simulator's steady host, so
/// (1 + ρ)/(1 − ρ) ≈ 1.3); the threshold is set for a sum whose steps vary that much more.
const LONG_RUN_VARIANCE: f64 = 1.3;

/// A reference night this many standard deviations from the filter's prediction is a host
/// that moved: 3 is passed by chance about once in 370 nights (and costs only the nights
/// before it), and a host step of 2σ of one boot is about 3.6 standard deviations of a 4-boot
/// level and its prediction.
pub const HOST_MOVE: f64 = 3.0;

/// Boots of a side that do not fit in a window this many σ wide with the most of the others
/// that night are the host's doing (a neighbour's job, a stalled disk), not the kernel's, and
/// are left out of the level: 4 boots of normal noise span 6σ about once in 5 000 nights (8
/// boots once in 700), and the 2-5x boots of a busy host are 7-16σ away at 10% noise.
pub const OUTLIER: f64 = 6.0;

/// Random walk of the host's level per night, in σ² (a host's level wanders by about 0.1σ a
/// night on its own), and of its slope (0.02σ a night): enough to follow the simulator's drift
/// of 0.08σ a night without lag, small enough that the level is averaged over many nights.
const LEVEL_WALK: f64 = 0.1 * 0.1;
/// See [`LEVEL_WALK`].
const SLOPE_WALK: f64 = 0.02 * 0.02;
/// The slope's spread when the filter starts (σ a night): a host is not known to drift yet.
const SLOPE_PRIOR: f64 = 0.1;

/// One night as the test saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NightEvidence {
    /// The night (index into the nights given).
    pub night: usize,
    /// The head's excess over the host's level, on the log scale (0.05 ≈ 5% worse).
    pub excess: f64,
    /// Its standard deviation.
    pub sd: f64,
    /// The sum after this night.
    pub sum: f64,
    /// The reference said the host moved this night, and the filter started again.
    pub host_moved: bool,
}

/// What the accumulating test says after the nights so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Accumulation {
    /// Every night with boots of both sides, oldest first.
    pub nights: Vec<NightEvidence>,
    /// The threshold the sum must pass.
    pub threshold: f64,
    /// The boot noise σ on the log scale, pooled over the nights.
    pub sigma: f64,
    /// Every time the sum passed the threshold, oldest first.
    pub alarms: Vec<Alarm>,
}

/// The sum passed the threshold: a change of the head.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Alarm {
    /// The night the change is placed at.
    pub night: usize,
    /// The night the sum passed the threshold.
    pub raised: usize,
    /// The head's move at the change (relative: 0.10 = 10% worse), from the nights from
    /// `night` to `raised` against the level before.
    pub effect: f64,
}

/// A side's level on a night: the mean of its largest group of boots within [`OUTLIER`] σ of
/// each other (the lower group when two are as large: a busy host slows a boot, it does not
/// speed one up), and how many that is. With one boot far off, the other three; with two far
/// off of four (a neighbour's job that lasted two boots), the two that agree with each other,
/// where a median would sit between them.
fn level(v: &[f64], sigma: f64) -> (f64, usize) {
    let kept = kept(v, sigma);
    (kept.iter().sum::<f64>() / kept.len() as f64, kept.len())
}

/// The boots [`level`] keeps, sorted.
fn kept(v: &[f64], sigma: f64) -> Vec<f64> {
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    let width = OUTLIER * sigma;
    let (mut from, mut to) = (0, 0);
    for i in 0..sorted.len() {
        let j = sorted[i..].partition_point(|&x| x <= sorted[i] + width) + i;
        if j - i > to - from {
            (from, to) = (i, j);
        }
    }
    sorted[from..to].to_vec()
}

/// σ from the pairs of boots within each side of each night: None without a pair.
fn pooled_sigma(sides: impl Iterator<Item = Vec<f64>>) -> Option<f64> {
    let mut gaps = Vec::new();
    for side in sides {
        for i in 0..side.len() {
            for j in i + 1..side.len() {
                gaps.push((side[i] - side[j]).abs());
            }
        }
    }
    if gaps.is_empty() {
        return None;
    }
    // median |N(0, 2σ²)| = 0.6745 · √2 · σ.
    Some(median(&gaps) / (0.674_489_75 * std::f64::consts::SQRT_2))
}

/// The CUSUM threshold (log-likelihood units) whose average run length under no change is
/// `arl` nights, for k' = δ/(2√v), the reference value in z units: Siegmund's approximation
/// ARL ≈ (e^a − a − 1) / (2k'²) with a = 2k'·(h_z + 1.166), solved by bisection; the
/// log-likelihood threshold is 2k'·h_z.
pub fn threshold(k_prime: f64, arl: f64) -> f64 {
    let run_length = |a: f64| (a.exp() - a - 1.0) / (2.0 * k_prime * k_prime);
    let (mut lo, mut hi) = (0.0_f64, 60.0_f64);
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if run_length(mid) < arl {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    // a is 2k'·(h_z + 1.166) in z units; the log-likelihood threshold is 2k'·h_z.
    (lo - 2.0 * 1.166 * k_prime).max(0.0)
}

/// [`threshold`] for evidence whose long-run variance is `f` times its one-night variance: the
/// sum of such steps is √f times the sum of unit ones, at reference value k'/√f.
fn correlated_threshold(k_prime: f64, arl: f64, f: f64) -> f64 {
    let scaled = k_prime / f.sqrt();
    // The unit sum's threshold in z units, scaled back.
    let h_z = threshold(scaled, arl) / (2.0 * scaled) * f.sqrt();
    2.0 * k_prime * h_z
}

/// The filter over the reference's nightly levels: level and slope, with their covariance.
struct HostFilter {
    level: f64,
    slope: f64,
    /// Covariance [[level, cross], [cross, slope]].
    p: [[f64; 2]; 2],
    /// The night of the last update.
    at: usize,
}

impl HostFilter {
    fn start(night: usize, level: f64, var: f64, sigma2: f64) -> HostFilter {
        HostFilter {
            level,
            slope: 0.0,
            p: [[var, 0.0], [0.0, SLOPE_PRIOR * SLOPE_PRIOR * sigma2]],
            at: night,
        }
    }

    /// Moves to `night`; true when the reference's `level` (variance `var`) says the host moved.
    fn observe(&mut self, night: usize, level: f64, var: f64, sigma2: f64) -> bool {
        let dt = (night - self.at) as f64;
        let [[a, b], [_, d]] = self.p;
        // Predict: x = F x, P = F P Fᵀ + Q with F = [[1, dt], [0, 1]].
        let pred = self.level + dt * self.slope;
        let p00 = a + 2.0 * dt * b + dt * dt * d + dt * LEVEL_WALK * sigma2;
        let p01 = b + dt * d;
        let p11 = d + dt * SLOPE_WALK * sigma2;
        let innovation = level - pred;
        let s = p00 + var;
        if innovation.abs() > HOST_MOVE * s.sqrt() {
            *self = HostFilter::start(night, level, var, sigma2);
            return true;
        }
        let (k0, k1) = (p00 / s, p01 / s);
        self.level = pred + k0 * innovation;
        self.slope += k1 * innovation;
        self.p = [
            [p00 - k0 * p00, p01 - k0 * p01],
            [p01 - k1 * p00, p11 - k1 * p01],
        ];
        self.at = night;
        false
    }
}

/// The accumulating test over the nights so far (oldest first); None when no night has boots
/// of both sides, or no side has two boots to measure the noise with.
pub fn accumulate(
    nights: &[Night],
    direction: Direction,
    cfg: &AccumulateConfig,
) -> Option<Accumulation> {
    let logs = |v: &[f64]| oriented_all(v, direction);
    // Each night with boots of both sides: (night, head's logs, reference's logs).
    let sides: Vec<(usize, Vec<f64>, Vec<f64>)> = nights
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.head.is_empty() && !n.reference.is_empty())
        .map(|(i, n)| (i, logs(&n.head), logs(&n.reference)))
        .collect();
    let every_side = || sides.iter().flat_map(|(_, h, r)| [h, r]);
    let rough = pooled_sigma(every_side().cloned()).filter(|s| *s > 0.0)?;
    // Once more from the boots each side's level keeps: a host that slows one boot in eight
    // spoils a quarter of the pairs, and the median of the pairs moves (σ 1.5x too large).
    let sigma = pooled_sigma(every_side().map(|v| kept(v, rough)))
        .filter(|s| *s > 0.0)
        .unwrap_or(rough);
    let sigma2 = sigma * sigma;
    let delta = cfg.min_effect.ln_1p();

    let mut filter: Option<HostFilter> = None;
    let mut evidence = Vec::with_capacity(sides.len());
    for (night, head, reference) in &sides {
        let (r, kept_r) = level(reference, sigma);
        let (h, kept_h) = level(head, sigma);
        let var_r = sigma2 / kept_r as f64;
        let var_h = sigma2 / kept_h as f64;
        let host_moved = match filter.as_mut() {
            None => {
                filter = Some(HostFilter::start(*night, r, var_r, sigma2));
                false
            }
            Some(f) => f.observe(*night, r, var_r, sigma2),
        };
        let f = filter.as_ref().expect("started above");
        evidence.push(NightEvidence {
            night: *night,
            excess: h - f.level,
            sd: (var_h + f.p[0][0]).sqrt(),
            sum: 0.0,
            host_moved,
        });
    }
    // The threshold for the typical night's precision.
    let k_primes: Vec<f64> = evidence.iter().map(|e| delta / (2.0 * e.sd)).collect();
    let threshold =
        correlated_threshold(median(&k_primes), cfg.false_alarm_nights, LONG_RUN_VARIANCE);
    // The sum, restarted after each alarm from the head's level since the change: what watch
    // does when a person acknowledges the change and the reference moves to the new head. That
    // level is re-estimated from every night since the change while the sum stands at 0, so a
    // false alarm's level (estimated from the few nights that raised it, and too high) falls
    // back as quiet nights come in instead of hiding the next change.
    // The level's own variance adds to each night's: it is estimated from a few nights.
    let (mut sum, mut offset, mut offset_var, mut from) = (0.0_f64, 0.0_f64, 0.0_f64, 0);
    let mut changed_at: Option<usize> = None;
    let mut alarms = Vec::new();
    for i in 0..evidence.len() {
        if let (Some(at), true) = (changed_at, from == i) {
            (offset, offset_var) = pooled(&evidence[at..i]);
        }
        let e = &mut evidence[i];
        let v = e.sd * e.sd + offset_var;
        sum = (sum + delta / v * (e.excess - offset - delta / 2.0)).max(0.0);
        e.sum = sum;
        if sum == 0.0 {
            from = i + 1;
        } else if sum > threshold {
            // Placed among the nights since the last change, not only those of the sum's
            // current run: the sum can touch 0 once after a small change.
            let start = changed_at
                .map_or(0, |at| at + 1)
                .max(from.saturating_sub(PLACE_BACK));
            let at = start + place(&evidence[start..=i], offset);
            let (level, var) = pooled(&evidence[at..=i]);
            alarms.push(Alarm {
                night: evidence[at].night,
                raised: evidence[i].night,
                effect: (level - offset).exp_m1(),
            });
            (sum, offset, offset_var, from, changed_at) = (0.0, level, var, i + 1, Some(at));
        }
    }
    Some(Accumulation {
        nights: evidence,
        threshold,
        sigma,
        alarms,
    })
}

/// The precision-weighted excess of some nights, and its variance (1 / Σ 1/v).
fn pooled(nights: &[NightEvidence]) -> (f64, f64) {
    let (num, den) = nights.iter().fold((0.0, 0.0), |(n, d), e| {
        let w = 1.0 / (e.sd * e.sd);
        (n + w * e.excess, d + w)
    });
    (num / den, den.recip())
}

/// Where among some nights the change from `offset` lies (its index): the split with the
/// largest likelihood ratio of "the head moved there, by an amount estimated from the nights
/// after it" against "no move", (Σ (e − offset)/v)² / Σ 1/v over the nights after the split.
fn place(nights: &[NightEvidence], offset: f64) -> usize {
    let (mut best, mut best_glr) = (nights.len() - 1, f64::MIN);
    let (mut s, mut w) = (0.0, 0.0);
    for (i, e) in nights.iter().enumerate().rev() {
        let v = e.sd * e.sd;
        s += (e.excess - offset) / v;
        w += 1.0 / v;
        if s > 0.0 && s * s / w > best_glr {
            (best, best_glr) = (i, s * s / w);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changepoint::tests::nights;

    const L: Direction = Direction::LowerIsBetter;

    /// The first night on which the sum has an alarm, watching night by night, and that alarm.
    fn first_alarm(all: &[Night]) -> Option<(usize, Alarm)> {
        (1..=all.len()).find_map(|k| {
            let acc = accumulate(&all[..k], L, &AccumulateConfig::default())?;
            acc.alarms.first().map(|a| (k - 1, *a))
        })
    }

    #[test]
    fn a_ten_percent_step_is_found_within_a_week_where_it_lands() {
        // 10% at 10% boot noise (Δ/σ = 1), 4 boots a side, from night 20: no single night
        // shows it at p < 0.01 more than about one time in ten.
        let (mut within_week, mut placed) = (0, 0);
        for seed in 0..40 {
            let all = nights(40, 4, 0.1, 500 + seed, |i| if i >= 20 { 1.1 } else { 1.0 });
            if let Some((when, a)) = first_alarm(&all) {
                if (20..27).contains(&when) {
                    within_week += 1;
                }
                if a.night.abs_diff(20) <= 2 {
                    placed += 1;
                    assert!(a.raised >= a.night && a.effect > 0.0, "{a:?}");
                }
            }
        }
        // The simulator's figure is 69% within a week; night by night it was 39%.
        assert!(within_week >= 20, "{within_week} of 40 within a week");
        assert!(
            placed >= 28,
            "{placed} of 40 placed within 2 nights of the step"
        );
    }

    #[test]
    fn a_busy_host_s_slow_boots_are_left_out() {
        // Quiet nights where one boot in six of either commit is 3x slower: none is a change.
        let mut alarms = 0;
        for seed in 0..20 {
            let mut all = nights(40, 4, 0.1, 900 + seed, |_| 1.0);
            for (i, night) in all.iter_mut().enumerate() {
                let side = if i % 2 == 0 {
                    &mut night.head
                } else {
                    &mut night.reference
                };
                side[i % 4] *= 3.0;
            }
            let acc = accumulate(&all, L, &AccumulateConfig::default()).unwrap();
            alarms += acc.alarms.len();
            assert!((acc.sigma - 0.1).abs() < 0.03, "σ {:.3}", acc.sigma);
        }
        assert!(alarms <= 2, "{alarms} alarms in 800 quiet nights");
    }

    #[test]
    fn after_an_alarm_the_sum_starts_again_from_the_new_level() {
        // 25% from night 10, then 25% more from night 30: two changes, each named once.
        let all = nights(50, 4, 0.1, 77, |i| match i {
            0..=9 => 1.0,
            10..=29 => 1.25,
            _ => 1.5625,
        });
        let acc = accumulate(&all, L, &AccumulateConfig::default()).unwrap();
        // A step of 2.5σ is raised on its own night or the next; placed from that one night,
        // within a night of where it is, its size within 15 points.
        assert_eq!(acc.alarms.len(), 2, "{:?}", acc.alarms);
        for (a, at) in acc.alarms.iter().zip([10, 30]) {
            assert!(a.night.abs_diff(at) <= 1, "{a:?}");
            assert!((a.effect - 0.25).abs() < 0.15, "{a:?}");
            assert!(a.raised <= at + 1, "{a:?}");
        }
    }

    #[test]
    fn the_threshold_grows_with_the_run_length_and_matches_page_s_tables() {
        // The one-sided CUSUM in z units with k = 0.5, h = 4 has ARL₀ ≈ 336 (Montgomery's
        // table; the two-sided chart's 168 is half of it); in log-likelihood units with δ = 1
        // that is h = 2k·h_z = 4.
        let h = threshold(0.5, 336.0);
        assert!((h - 4.0).abs() < 0.05, "{h}");
        assert!(threshold(0.5, 1000.0) > threshold(0.5, 100.0));
    }

    #[test]
    fn a_side_s_level_and_the_pooled_sigma_shrug_off_outliers() {
        assert_eq!(level(&[1.0, 2.0, 3.0], 1.0), (2.0, 3));
        let (l, kept) = level(&[1.0, 1.1, 0.9, 10.0], 0.1);
        assert!((l - 1.0).abs() < 1e-9 && kept == 3, "{l} {kept}");
        // Two of four far off, and far from each other: the two that agree; two pairs that
        // agree: the lower.
        assert_eq!(level(&[1.0, 1.2, 1.7, 2.2], 0.05), (1.1, 2));
        assert_eq!(level(&[1.0, 1.2, 2.0, 2.2], 0.05), (1.1, 2));
        let (l, kept) = level(&[1.0, 1.2, 1.25, 2.2], 0.05);
        assert!((l - 1.15).abs() < 1e-9 && kept == 3, "{l} {kept}");
        let s = pooled_sigma([vec![1.0, 1.1, 0.9, 1.05], vec![1.0, 0.95, 1.02, 9.0]].into_iter());
        assert!(s.unwrap() < 0.2, "{s:?}");
        assert_eq!(pooled_sigma([vec![1.0], vec![2.0]].into_iter()), None);
    }
}
