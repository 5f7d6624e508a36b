//! E-divisive means change-point detection, as Apache Otava (formerly DataStax's hunter) runs it.
//!
//! Pure, deterministic code, written here from Otava's description (docs/MATH.md) and its
//! `otava/analysis.py` and `otava/change_point_divisive/`:
//!
//! 1. **The divergence** (Matteson & James 2014, α = 1): for a slice `z[s..e]`, every split
//!    `τ` and end `κ` (s < τ < κ ≤ e) scores
//!    Q(τ, κ) = 2/(m+n)·Σ|X−Y| − 2m/((m+n)(n−1))·Σ_X|·| − 2n/((m+n)(m−1))·Σ_Y|·|, with
//!    X = z[s..τ] (n points), Y = z[τ..κ] (m points), the sums over pairs. The candidate is the
//!    τ of the largest Q (the first in (τ, κ) order on ties, as numpy's `argmax`).
//! 2. **The significance test** (Fleming et al., ICPE 2023: the permutation test replaced by a
//!    t-test, which is deterministic and cheap): the candidate splits the segment between its
//!    neighbouring change points into left and right, compared by Student's pooled t-test on
//!    the population standard deviations (numpy `std`, ddof 0, passed to scipy's
//!    `ttest_ind_from_stats`). The candidate is kept while p ≤ the threshold, and the search
//!    recurses on the segments.
//! 3. **Windows** ("split"): the series is searched in windows of `window` points that start
//!    every `window / 2` points (or at the last change point found, if later), with a relaxed
//!    first-pass threshold (10 × `max_p_value` below 0.05): the "weak" change points.
//! 4. **Merge**: the weakest weak change point (largest p-value; when every p passes, the
//!    smallest relative change if it is at most `min_magnitude`) is dropped and its neighbours
//!    re-tested, until every point passes both.
//!
//! One deliberate difference: Otava's merge re-tests the change point after the dropped one and
//! the one after that, leaving the one before it with stale statistics (its right segment ended
//! at the dropped point). Here the two neighbours of the dropped point, before and after, are
//! re-tested: their segments are the ones that changed.

use super::ttest::student_p_from_stats;

/// Settings of E-divisive means; [`Default`] is Otava's `compute_change_points`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EDivisiveConfig {
    /// Points in each search window (Otava: 50). Windows overlap by half.
    pub window: usize,
    /// Largest p-value of the t-test a change point may have (Otava: 0.001).
    pub max_p_value: f64,
    /// Smallest relative change of the means, max(|after/before − 1|, |before/after − 1|), a
    /// change point must exceed (Otava: 0, i.e. any change).
    pub min_magnitude: f64,
}

impl Default for EDivisiveConfig {
    fn default() -> Self {
        EDivisiveConfig {
            window: 50,
            max_p_value: 0.001,
            min_magnitude: 0.0,
        }
    }
}

/// A change point and the t-test between the segments either side of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangePoint {
    /// The first index after the change (never 0).
    pub index: usize,
    /// Two-sided p-value of the t-test of the segment before against the segment after.
    pub p_value: f64,
    /// Mean of the segment before (from the previous change point or the start).
    pub mean_before: f64,
    /// Mean of the segment after (up to the next change point or the end).
    pub mean_after: f64,
    /// mean_after / mean_before − 1 (Otava's forward change; 0 when mean_before is 0).
    pub relative: f64,
}

impl ChangePoint {
    /// Otava's magnitude: the larger of the forward and backward relative changes.
    fn magnitude(&self) -> f64 {
        let fwd = if self.mean_before == 0.0 {
            0.0
        } else {
            self.mean_after / self.mean_before - 1.0
        };
        let back = if self.mean_after == 0.0 {
            0.0
        } else {
            self.mean_before / self.mean_after - 1.0
        };
        fwd.abs().max(back.abs())
    }
}

/// Change points of `series`, in index order (Otava's `compute_change_points`).
pub fn change_points(series: &[f64], cfg: &EDivisiveConfig) -> Vec<ChangePoint> {
    let weak = split(series, cfg.window.max(2), first_pass(cfg.max_p_value));
    merge(weak, series, cfg.max_p_value, cfg.min_magnitude)
}

/// Otava's relaxed threshold for the weak change points: 10× below 0.05, 2× below 0.5.
fn first_pass(max_p: f64) -> f64 {
    if max_p < 0.05 {
        max_p * 10.0
    } else if max_p < 0.5 {
        max_p * 2.0
    } else {
        max_p
    }
}

/// The t-test of `left` against `right`, as a change point at `index`.
fn test(series: &[f64], from: usize, index: usize, to: usize) -> ChangePoint {
    let stats = |x: &[f64]| {
        let m = x.iter().sum::<f64>() / x.len() as f64;
        // numpy's std: population (ddof 0), and 0 for a single point.
        let s = if x.len() >= 2 {
            (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / x.len() as f64).sqrt()
        } else {
            0.0
        };
        (m, s)
    };
    let (left, right) = (&series[from..index], &series[index..to]);
    let (ml, sl) = stats(left);
    let (mr, sr) = stats(right);
    ChangePoint {
        index,
        p_value: student_p_from_stats(ml, sl, left.len(), mr, sr, right.len()),
        mean_before: ml,
        mean_after: mr,
        relative: if ml == 0.0 { 0.0 } else { mr / ml - 1.0 },
    }
}

/// The segment bounds around sorted change point indices: [0, c₁), [c₁, c₂), …, [c_k, n).
fn bounds(indices: &[usize], n: usize) -> Vec<(usize, usize)> {
    let mut cuts = vec![0];
    cuts.extend_from_slice(indices);
    cuts.push(n);
    cuts.windows(2)
        .filter(|w| w[0] != w[1])
        .map(|w| (w[0], w[1]))
        .collect()
}

/// The best split of `z[s..e]` (e − s ≥ 2): its τ and Q.
fn candidate(z: &[f64], s: usize, e: usize) -> (usize, f64) {
    let len = e - s;
    // col[k][i] = Σ_{i' < i} |z[s+i'] − z[s+k]| for i ≤ k: column prefix sums of the distance
    // matrix, so that every sum below is a difference of two of them.
    let mut col = vec![vec![0.0f64; len + 1]; len];
    for k in 0..len {
        for i in 0..k {
            col[k][i + 1] = col[k][i] + (z[s + i] - z[s + k]).abs();
        }
    }
    let mut best = (s + 1, f64::NEG_INFINITY);
    // Σ of |·| over pairs within X = z[s..s+t].
    let mut within_x = 0.0;
    for t in 1..len {
        // X gains the point t − 1: its distances to the points before it.
        within_x += col[t - 1][t - 1];
        let n = t as f64;
        let (mut cross, mut within_y) = (0.0, 0.0);
        for k in (t + 1)..=len {
            // Y gains the point k − 1.
            let c = &col[k - 1];
            cross += c[t];
            within_y += c[k - 1] - c[t];
            let m = (k - t) as f64;
            let total = n + m;
            let mut q = 2.0 / total * cross;
            if t > 1 {
                q -= 2.0 * m / (total * (n - 1.0)) * within_x;
            }
            if k - t > 1 {
                q -= 2.0 * n / (total * (m - 1.0)) * within_y;
            }
            if q > best.1 {
                best = (s + t, q);
            }
        }
    }
    best
}

/// One window's change points (local indices), found divisively at threshold `max_p`
/// (Otava's `ChangePointDetector.get_change_points` with the t-test).
fn divisive(z: &[f64], max_p: f64) -> Vec<ChangePoint> {
    let mut found: Vec<ChangePoint> = Vec::new();
    loop {
        let indices: Vec<usize> = found.iter().map(|c| c.index).collect();
        // The segment with the largest divergence offers the candidate (the first on ties).
        let mut best: Option<(usize, f64, usize, usize)> = None;
        for (s, e) in bounds(&indices, z.len()) {
            if e - s < 2 {
                continue;
            }
            let (tau, q) = candidate(z, s, e);
            if best.is_none_or(|b| q > b.1) {
                best = Some((tau, q, s, e));
            }
        }
        let Some((tau, _, s, e)) = best else { break };
        let cp = test(z, s, tau, e);
        if cp.p_value > max_p {
            break;
        }
        let at = found.partition_point(|c| c.index < tau);
        found.insert(at, cp);
    }
    found
}

/// The weak change points of the whole series, from overlapping windows (Otava's `split`),
/// tested against the segments between them.
fn split(series: &[f64], window: usize, max_p: f64) -> Vec<ChangePoint> {
    let step = window / 2;
    let mut indices: Vec<usize> = Vec::new();
    let mut start = 0;
    while start < series.len() {
        let end = (start + window).min(series.len());
        let found = divisive(&series[start..end], max_p);
        let last = found.last().map_or(0, |c| c.index + start);
        for c in found {
            if !indices.contains(&(c.index + start)) {
                indices.push(c.index + start);
            }
        }
        start = last.max(start + step);
    }
    indices.sort_unstable();
    retest(&indices, series)
}

/// Every change point re-tested against the segments between its neighbours.
fn retest(indices: &[usize], series: &[f64]) -> Vec<ChangePoint> {
    (0..indices.len())
        .map(|i| {
            let from = if i == 0 { 0 } else { indices[i - 1] };
            let to = indices.get(i + 1).copied().unwrap_or(series.len());
            test(series, from, indices[i], to)
        })
        .collect()
}

/// Otava's merge: drop the weakest point and re-test its neighbours until all pass.
fn merge(
    mut cps: Vec<ChangePoint>,
    series: &[f64],
    max_p: f64,
    min_magnitude: f64,
) -> Vec<ChangePoint> {
    while !cps.is_empty() {
        // The largest p-value (the first of equals, as Python's max); if it passes, the
        // smallest magnitude (the first of equals, as min), which must exceed the floor.
        let mut weakest = 0;
        for (i, c) in cps.iter().enumerate() {
            if c.p_value > cps[weakest].p_value {
                weakest = i;
            }
        }
        if cps[weakest].p_value < max_p {
            weakest = 0;
            for (i, c) in cps.iter().enumerate() {
                if c.magnitude() < cps[weakest].magnitude() {
                    weakest = i;
                }
            }
            if cps[weakest].magnitude() > min_magnitude {
                return cps;
            }
        }
        cps.remove(weakest);
        let indices: Vec<usize> = cps.iter().map(|c| c.index).collect();
        for i in [weakest.wrapping_sub(1), weakest] {
            if i < cps.len() {
                let from = if i == 0 { 0 } else { indices[i - 1] };
                let to = indices.get(i + 1).copied().unwrap_or(series.len());
                cps[i] = test(series, from, indices[i], to);
            }
        }
    }
    cps
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Otava's tests/change_point_divisive_test.py `SEQUENCE`.
    const SEQUENCE: [f64; 14] = [
        0.3, 2.4, 1.5, -0.9, -0.5, 99.7, 98.3, 99.1, 149.0, 149.7, 149.5, 149.1, 148.8, 150.0,
    ];

    /// Q by its definition, every sum written out (Otava's `compute_Q_and_candidate_slow`).
    fn slow_candidate(z: &[f64]) -> (usize, f64) {
        let mut best = (0, 0.0);
        for tau in 1..z.len() {
            for kappa in tau + 1..=z.len() {
                let (x, y) = (&z[..tau], &z[tau..kappa]);
                let (n, m) = (x.len() as f64, y.len() as f64);
                let a: f64 = x
                    .iter()
                    .flat_map(|a| y.iter().map(move |b| (a - b).abs()))
                    .sum();
                let pairs = |v: &[f64]| -> f64 {
                    (0..v.len())
                        .flat_map(|i| (i + 1..v.len()).map(move |k| (v[i] - v[k]).abs()))
                        .sum()
                };
                let b = if x.len() > 1 {
                    2.0 * m / (m + n) / (n - 1.0) * pairs(x)
                } else {
                    0.0
                };
                let c = if y.len() > 1 {
                    2.0 * n / (m + n) / (m - 1.0) * pairs(y)
                } else {
                    0.0
                };
                let q = 2.0 / (m + n) * a - b - c;
                if q > best.1 {
                    best = (tau, q);
                }
            }
        }
        best
    }

    #[test]
    fn the_fast_divergence_matches_its_definition() {
        let (tau, q) = candidate(&SEQUENCE, 0, SEQUENCE.len());
        let (slow_tau, slow_q) = slow_candidate(&SEQUENCE);
        assert_eq!(tau, slow_tau);
        assert!((q - slow_q).abs() < 1e-9 * slow_q, "{q} vs {slow_q}");
        // And on a slice that does not start at 0.
        let (tau, q) = candidate(&SEQUENCE, 5, 14);
        let (slow_tau, slow_q) = slow_candidate(&SEQUENCE[5..]);
        assert_eq!(tau, slow_tau + 5);
        assert!((q - slow_q).abs() < 1e-9 * slow_q);
    }

    #[test]
    fn otava_s_ttest_detector_finds_5_and_8() {
        // Otava tests/change_point_divisive_test.py::test_ttest: the detector alone
        // (no windows, no merge) at max p 0.01 gives [5, 8].
        let found: Vec<usize> = divisive(&SEQUENCE, 0.01).iter().map(|c| c.index).collect();
        assert_eq!(found, [5, 8]);
        // The whole algorithm with its defaults agrees.
        let all: Vec<usize> = change_points(&SEQUENCE, &EDivisiveConfig::default())
            .iter()
            .map(|c| c.index)
            .collect();
        assert_eq!(all, [5, 8]);
    }

    #[test]
    fn otava_s_single_series_has_its_change_at_10() {
        // Otava tests/analysis_test.py::test_single_series: window 10, max p 0.0001 → [10].
        let series = [
            1.02, 0.95, 0.99, 1.00, 1.12, 1.00, 1.01, 0.98, 1.01, 0.96, 0.50, 0.51, 0.48, 0.48,
            0.55, 0.50, 0.49, 0.51, 0.50, 0.49,
        ];
        let cfg = EDivisiveConfig {
            window: 10,
            max_p_value: 0.0001,
            min_magnitude: 0.0,
        };
        let cps = change_points(&series, &cfg);
        assert_eq!(cps.iter().map(|c| c.index).collect::<Vec<_>>(), [10]);
        let c = cps[0];
        assert!((c.mean_before - 1.004).abs() < 1e-9 && (c.mean_after - 0.501).abs() < 1e-9);
        assert!((c.relative - (0.501 / 1.004 - 1.0)).abs() < 1e-12);
    }

    #[test]
    fn otava_s_significance_tester_cases() {
        // Otava tests/analysis_test.py::test_significance_tester.
        let same = [1.00, 1.02, 1.05, 0.95, 0.98, 1.00, 1.02, 1.05, 0.95, 0.98];
        let p = test(&same, 0, 5, 10).p_value;
        assert!((0.99..=1.01).contains(&p), "{p}");
        let down = [1.00, 1.02, 1.05, 0.95, 0.98, 0.80, 0.82, 0.85, 0.79, 0.77];
        let p = test(&down, 0, 5, 10).p_value;
        assert!(p > 0.0 && p < 0.001, "{p}");
    }

    #[test]
    fn a_flat_or_short_series_has_no_change() {
        let cfg = EDivisiveConfig::default();
        assert!(change_points(&[], &cfg).is_empty());
        assert!(change_points(&[3.0], &cfg).is_empty());
        assert!(change_points(&[3.0; 40], &cfg).is_empty());
        // A gentle alternation is noise, not a change.
        let wiggle: Vec<f64> = (0..120).map(|i| 10.0 + f64::from(i % 3) * 0.1).collect();
        assert!(change_points(&wiggle, &cfg).is_empty());
    }

    #[test]
    fn changes_past_the_first_window_are_found() {
        // Steps at 70 and 130 in 180 points: the windows of 50 must carry the search past
        // the first window, and the merge must keep both.
        let z: Vec<f64> = (0..180)
            .map(|i| {
                let level = if i < 70 {
                    10.0
                } else if i < 130 {
                    12.0
                } else {
                    9.0
                };
                level + [0.1, -0.1, 0.05, -0.05, 0.0][i % 5]
            })
            .collect();
        let cps = change_points(&z, &EDivisiveConfig::default());
        assert_eq!(cps.iter().map(|c| c.index).collect::<Vec<_>>(), [70, 130]);
        assert!((cps[0].relative - 0.2).abs() < 0.01, "{:?}", cps[0]);
        assert!(cps[1].mean_after < cps[1].mean_before);
    }
}
