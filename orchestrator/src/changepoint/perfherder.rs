//! Mozilla Perfherder's alert detector (treeherder `perfalert.detect_changes` and the 2% floor of
//! `perf/alerts.py`), re-implemented for `firstbad sim --nightly`.
//!
//! Pure code, written here from treeherder's source. One value per revision (a night here):
//!
//! - At each point `i`, the back window is up to `max_back_window` values before it — at least
//!   `min_back_window` (12), more while no alert was seen lately — and the fore window the
//!   `fore_window` (12) values from `i` on. Each window's mean is weighted linearly, highest
//!   next to `i` ((w − j)/w for the j-th value away), its variance is the plain sample variance
//!   around that weighted mean, and t = (fore − back)/√(s²_back/n_back + s²_fore/n_fore).
//! - An alert is a point with full windows, |t| above `t_threshold` (7) and no neighbour with a
//!   larger |t|, whose change of the windows' means is at least `min_change_percent` (2%) of
//!   the back mean.
//!
//! The fore window makes Perfherder wait: an alert at `i` needs the 12 values `i..i + 12`, so a
//! change is reported 11 nights after it lands at the earliest.

/// Perfherder's settings; [`Default`] is treeherder's (`PERFHERDER_ALERTS_*`, threshold 7).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerfherderConfig {
    /// Fewest values in the back window (12).
    pub min_back_window: usize,
    /// Most values in the back window (24).
    pub max_back_window: usize,
    /// Values in the fore window, the point itself included (12).
    pub fore_window: usize,
    /// |t| above which a point may alert (7).
    pub t_threshold: f64,
    /// Smallest change of the windows' means, in percent of the back mean, that alerts
    /// (`PERFHERDER_REGRESSION_THRESHOLD` = 2).
    pub min_change_percent: f64,
}

impl Default for PerfherderConfig {
    fn default() -> Self {
        PerfherderConfig {
            min_back_window: 12,
            max_back_window: 24,
            fore_window: 12,
            t_threshold: 7.0,
            min_change_percent: 2.0,
        }
    }
}

/// A window's linearly weighted mean, its count and its sample variance around that mean
/// (treeherder `analyze` with `linear_weights`); `values` are nearest to the point first.
fn analyze(values: &[f64]) -> (f64, f64, f64) {
    let n = values.len();
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let w = |j: usize| (n - j) as f64 / n as f64;
    let (sum, weights) = values
        .iter()
        .enumerate()
        .fold((0.0, 0.0), |(s, ws), (j, v)| (s + v * w(j), ws + w(j)));
    let avg = sum / weights;
    let var = if n > 1 {
        values.iter().map(|v| (v - avg).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    (avg, n as f64, var)
}

/// treeherder's `calc_t`: 0 for an empty window or equal means, infinite without variance.
fn calc_t(back: &[f64], fore: &[f64]) -> (f64, f64, f64) {
    if back.is_empty() || fore.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let (b, nb, vb) = analyze(back);
    let (f, nf, vf) = analyze(fore);
    let delta = f - b;
    let t = if delta == 0.0 {
        0.0
    } else if vb == 0.0 && vf == 0.0 {
        f64::INFINITY
    } else {
        delta / (vb / nb + vf / nf).sqrt()
    };
    (t, b, f)
}

/// One Perfherder alert: where, and the windows' weighted means either side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Alert {
    /// The first value after the change.
    pub index: usize,
    /// The back window's weighted mean (before the change).
    pub back_mean: f64,
    /// The fore window's weighted mean (from the change on).
    pub fore_mean: f64,
}

/// Indices of `series` at which Perfherder raises an alert (regressions and improvements: the
/// first value after the change), oldest first.
pub fn alerts(series: &[f64], cfg: &PerfherderConfig) -> Vec<usize> {
    alert_details(series, cfg).iter().map(|a| a.index).collect()
}

/// [`alerts`] with the windows' means, which tell a regression from an improvement.
pub fn alert_details(series: &[f64], cfg: &PerfherderConfig) -> Vec<Alert> {
    let n = series.len();
    // Per point: |t|, back count, fore count, back and fore means.
    let mut t = vec![0.0f64; n];
    let mut back_n = vec![0usize; n];
    let mut fore_n = vec![0usize; n];
    let mut means = vec![(0.0f64, 0.0f64); n];
    let mut last_seen_regression = 0usize;
    for i in 1..n {
        let reach = last_seen_regression
            .max(cfg.min_back_window)
            .min(cfg.max_back_window);
        // Back: i − 1, i − 2, … (nearest first), while within reach and the budget.
        let back: Vec<f64> = (1..=reach.min(i).min(cfg.max_back_window))
            .map(|d| series[i - d])
            .collect();
        let fore: Vec<f64> = series[i..(i + cfg.fore_window).min(n)].to_vec();
        back_n[i] = back.len();
        fore_n[i] = fore.len();
        let (ti, b, f) = calc_t(&back, &fore);
        t[i] = ti.abs();
        means[i] = (b, f);
        if t[i] > cfg.t_threshold {
            last_seen_regression = 0;
        } else {
            last_seen_regression += 1;
        }
    }
    (1..n)
        .filter(|&i| {
            back_n[i] >= cfg.min_back_window
                && fore_n[i] >= cfg.fore_window
                && t[i] > cfg.t_threshold
                && t[i - 1] <= t[i]
                && (i + 1 >= n || t[i + 1] <= t[i])
        })
        .filter(|&i| {
            let (b, f) = means[i];
            b != 0.0 && 100.0 * (f - b).abs() / b.abs() >= cfg.min_change_percent
        })
        .map(|i| Alert {
            index: i,
            back_mean: means[i].0,
            fore_mean: means[i].1,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_weights_and_variance_match_treeherder() {
        // treeherder tests/perfalert/test_analyze.py: [1, 2, 3, 4] with linear weights gives
        // avg 2.0, variance 2.0.
        let (avg, n, var) = analyze(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!((avg, n, var), (2.0, 4.0, 2.0));
        // test_calc_t (its windows are single revisions, so linear and uniform weights agree
        // only for equal values): equal windows give 0, constant different ones infinity.
        assert_eq!(calc_t(&[0.0, 0.0], &[0.0, 0.0]).0, 0.0);
        assert_eq!(calc_t(&[0.0, 0.0], &[1.0, 1.0]).0, f64::INFINITY);
    }

    #[test]
    fn treeherder_s_step_alerts_at_its_first_point() {
        // treeherder test_detect_changes: 8 values then 8 one higher, windows of 5, threshold
        // 2: the alert is at index 8 only. (treeherder's series goes 0 → 1, from which a
        // percent change is undefined; its detect_changes has no floor. Shifted by 100 here,
        // the floor switched off.)
        let series: Vec<f64> = (0..16).map(|i| if i < 8 { 100.0 } else { 101.0 }).collect();
        let cfg = PerfherderConfig {
            min_back_window: 5,
            max_back_window: 5,
            fore_window: 5,
            t_threshold: 2.0,
            min_change_percent: 0.0,
        };
        assert_eq!(alerts(&series, &cfg), [8]);
    }

    #[test]
    fn defaults_wait_for_twelve_values_and_ignore_noise() {
        let cfg = PerfherderConfig::default();
        let noise = [0.3, -0.2, 0.1, -0.4, 0.2, 0.0, -0.1, 0.4, -0.3, 0.1];
        let at =
            |i: usize, step: f64| 100.0 + noise[i % noise.len()] + if i >= 30 { step } else { 0.0 };
        let flat: Vec<f64> = (0..60).map(|i| at(i, 0.0)).collect();
        assert!(alerts(&flat, &cfg).is_empty());
        // A 10% step at 30: seen once the 12 values from 30 are in, not with 11.
        let step: Vec<f64> = (0..60).map(|i| at(i, 10.0)).collect();
        assert_eq!(alerts(&step[..42], &cfg), [30]);
        assert!(alerts(&step[..41], &cfg).is_empty());
        assert_eq!(alerts(&step, &cfg), [30]);
        // A 1% step: its t is far above 7, but the change is below the 2% floor.
        let small: Vec<f64> = (0..60).map(|i| at(i, 1.0)).collect();
        let unfloored = PerfherderConfig {
            min_change_percent: 0.0,
            ..cfg
        };
        assert_eq!(alerts(&small, &unfloored), [30]);
        assert!(alerts(&small, &cfg).is_empty());
    }
}
