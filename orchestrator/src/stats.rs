//! Statistical routines written here, tested against scipy reference values.
//!
//! Pure code: no I/O, no clock, no randomness. The rank tests (Mann-Whitney U, two-sample
//! Kolmogorov-Smirnov) serve the re-implemented Pinpoint rule in [`crate::sim`]; the normal and
//! Student-t functions serve the sequential classifier and the culprit posterior.
//!
//! statrs is deliberately not used: its Mann-Whitney exact path returns the complement p-value
//! for small samples (5 vs 5 fully separated gives p = 1.0), see docs/DESIGN.md.

/// Median of a slice (mean of the middle two for even lengths); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The nearest-rank `q` quantile of `values` (sorted in place): the smallest value at or
/// above a share `q` of them, always one of the values. Empty `values` panic.
pub fn nearest_rank(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let k = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[k - 1]
}

/// Arithmetic mean; NaN when empty.
pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// Median absolute deviation from the median, scaled by 1.4826 so that it estimates the
/// standard deviation of normal data (1.4826 = 1 / Φ⁻¹(3/4)).
pub fn mad(values: &[f64]) -> f64 {
    let m = median(values);
    let dev: Vec<f64> = values.iter().map(|v| (v - m).abs()).collect();
    1.4826 * median(&dev)
}

/// Complementary error function, relative error below 1.2e-7 everywhere (Numerical Recipes'
/// Chebyshev fit `erfcc`).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    // Coefficients of the published fit; not tunable.
    let ans = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        ans
    } else {
        2.0 - ans
    }
}

/// Standard normal cumulative distribution function Φ(z).
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// Standard normal upper tail 1 − Φ(z), accurate in the far tail.
pub fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// Standard normal quantile Φ⁻¹(p) (Acklam's rational approximation, relative error < 1.2e-9).
pub fn normal_quantile(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    // Coefficients of Acklam's published approximation.
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    // Break points between the tail and central fits.
    const P_LOW: f64 = 0.024_25;
    if p < P_LOW {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - P_LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -normal_quantile(1.0 - p)
    }
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms; ~15 significant digits).
pub fn ln_gamma(x: f64) -> f64 {
    // Lanczos coefficients for g = 7, n = 9.
    const G: f64 = 7.0;
    const COEF: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection formula.
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = COEF[0];
    let t = x + G + 0.5;
    for (i, c) in COEF.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Log density of Student's t with `nu` degrees of freedom at `x` (location 0, scale 1).
pub fn t_logpdf(x: f64, nu: f64) -> f64 {
    ln_gamma((nu + 1.0) / 2.0)
        - ln_gamma(nu / 2.0)
        - 0.5 * (nu * std::f64::consts::PI).ln()
        - (nu + 1.0) / 2.0 * (1.0 + x * x / nu).ln()
}

/// Result of a two-sample test: the statistic and its two-sided p-value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TestResult {
    /// The test statistic (U of the first sample for Mann-Whitney, D for Kolmogorov-Smirnov).
    pub statistic: f64,
    /// Two-sided p-value.
    pub p_value: f64,
}

/// Mid-ranks (1-based) of the pooled sample, and the tie-correction sum Σ(t³ − t).
fn ranks(pooled: &[f64]) -> (Vec<f64>, f64) {
    let mut idx: Vec<usize> = (0..pooled.len()).collect();
    idx.sort_by(|&a, &b| pooled[a].total_cmp(&pooled[b]));
    let mut r = vec![0.0; pooled.len()];
    let mut ties = 0.0;
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && pooled[idx[j + 1]] == pooled[idx[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = rank;
        }
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        i = j + 1;
    }
    (r, ties)
}

/// Largest n1·n2 for which the exact Mann-Whitney distribution is computed; above it the
/// normal approximation is within ~1e-3 of exact and the table would cost more than it buys.
const MWU_EXACT_MAX_CELLS: usize = 2_500;

/// The smallest p-value [`mann_whitney_u`] gives for `n` values against `n` (every one of
/// one side beyond every one of the other): a test at an alpha at or below it never rejects.
/// The baselines' floor for `classify.alpha` (issue 61, finding 4: alpha 1e-30 turned a +97%
/// regression at Δ/σ 134 into "not reproduced").
pub fn smallest_mann_whitney_p(n: usize) -> f64 {
    let low: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let high: Vec<f64> = (n..2 * n).map(|i| i as f64).collect();
    mann_whitney_u(&high, &low).p_value
}

/// Two-sided Mann-Whitney U test of `x` against `y`; the statistic is U of `x`.
///
/// Exact (scipy `mannwhitneyu(method="exact")`) when there are no ties and n1·n2 ≤ 2500;
/// otherwise the normal approximation with tie and continuity corrections (scipy
/// `method="asymptotic"`). Empty input gives p = 1.
pub fn mann_whitney_u(x: &[f64], y: &[f64]) -> TestResult {
    let (n1, n2) = (x.len(), y.len());
    if n1 == 0 || n2 == 0 {
        return TestResult {
            statistic: 0.0,
            p_value: 1.0,
        };
    }
    let pooled: Vec<f64> = x.iter().chain(y).copied().collect();
    let (r, ties) = ranks(&pooled);
    let r1: f64 = r[..n1].iter().sum();
    let u1 = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let u2 = (n1 * n2) as f64 - u1;
    let u = u1.max(u2);
    let p = if ties == 0.0 && n1 * n2 <= MWU_EXACT_MAX_CELLS {
        // P(U >= u) from the count of rank arrangements, by the standard recursion on
        // (number of x's, number of y's): c(i, j, u) = c(i-1, j, u-j) + c(i, j-1, u).
        let max_u = n1 * n2;
        let w = max_u + 1;
        // dp[j·w + s]: arrangements of i x's and j y's with U = s, built up over i in two
        // buffers allocated once (Pinpoint's rule calls this thousands of times a hunt in
        // `firstbad sim`; a fresh table per i was most of its time, in page faults).
        let mut dp = vec![0.0f64; (n2 + 1) * w];
        for j in 0..=n2 {
            dp[j * w] = 1.0;
        }
        // Row j = 0 is [1, 0, …] for every i (no y: U = 0) and is never written below, so
        // it stays right in both buffers as they swap.
        let mut next = dp.clone();
        for _i in 1..=n1 {
            for j in 1..=n2 {
                for s in 0..=max_u {
                    let from_x = if s >= j { dp[j * w + s - j] } else { 0.0 };
                    next[j * w + s] = from_x + next[(j - 1) * w + s];
                }
            }
            std::mem::swap(&mut dp, &mut next);
        }
        let counts = &dp[n2 * w..];
        let total: f64 = counts.iter().sum();
        // u is an integer here (no ties).
        let k = u.round() as usize;
        let tail: f64 = counts[k.min(max_u)..].iter().sum();
        (2.0 * tail / total).min(1.0)
    } else {
        let n = (n1 + n2) as f64;
        let mu = (n1 * n2) as f64 / 2.0;
        let s = ((n1 * n2) as f64 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)))).sqrt();
        if s == 0.0 {
            1.0
        } else {
            (2.0 * normal_sf((u - mu - 0.5) / s)).min(1.0)
        }
    };
    TestResult {
        statistic: u1,
        p_value: p,
    }
}

/// Two-sided two-sample Kolmogorov-Smirnov test, exact p-value by lattice-path counting
/// (scipy `ks_2samp(method="exact")`, R `psmirnov`). O(n1·n2); empty input gives p = 1.
pub fn ks_2samp(x: &[f64], y: &[f64]) -> TestResult {
    let (m, n) = (x.len(), y.len());
    if m == 0 || n == 0 {
        return TestResult {
            statistic: 0.0,
            p_value: 1.0,
        };
    }
    let mut a = x.to_vec();
    let mut b = y.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (mut i, mut j) = (0, 0);
    let mut d: f64 = 0.0;
    while i < m && j < n {
        let v = a[i].min(b[j]);
        while i < m && a[i] <= v {
            i += 1;
        }
        while j < n && b[j] <= v {
            j += 1;
        }
        d = d.max((i as f64 / m as f64 - j as f64 / n as f64).abs());
    }
    // P(D < d) over lattice paths from (0,0) to (m,n) that keep |i/m - j/n| below d; the
    // weights w = i/(i+n) keep the counts as probabilities (R's psmirnov2x).
    let (mm, nn) = if m > n { (n, m) } else { (m, n) };
    let (md, nd) = (mm as f64, nn as f64);
    // Round d down to a lattice value minus a hair, so that paths touching d count as outside.
    let q = (0.5 + (d * md * nd - 1e-7).floor()) / (md * nd);
    let mut u = vec![0.0f64; nn + 1];
    for (jj, uj) in u.iter_mut().enumerate() {
        *uj = if jj as f64 / nd > q { 0.0 } else { 1.0 };
    }
    for ii in 1..=mm {
        let w = ii as f64 / (ii + nn) as f64;
        u[0] = if ii as f64 / md > q { 0.0 } else { w * u[0] };
        for jj in 1..=nn {
            u[jj] = if (ii as f64 / md - jj as f64 / nd).abs() > q {
                0.0
            } else {
                w * u[jj] + u[jj - 1]
            };
        }
    }
    TestResult {
        statistic: d,
        p_value: (1.0 - u[nn]).clamp(0.0, 1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() <= tol * b.abs().max(1e-300), "{a} vs {b}");
    }

    #[test]
    fn normal_functions_match_scipy() {
        // scipy.stats.norm.cdf(z) for z = -3, -1, 0.5, 2.5.
        close(normal_cdf(-3.0), 0.0013498980316300933, 1e-6);
        close(normal_cdf(-1.0), 0.15865525393145707, 1e-6);
        close(normal_cdf(0.5), 0.6914624612740131, 1e-6);
        close(normal_cdf(2.5), 0.9937903346742238, 1e-6);
        // scipy.stats.norm.ppf(p) for p = 0.001, 0.05, 0.975.
        close(normal_quantile(0.001), -3.090232306167813, 1e-8);
        close(normal_quantile(0.05), -1.6448536269514729, 1e-8);
        assert!(normal_quantile(0.5).abs() < 1e-12);
        close(normal_quantile(0.975), 1.959963984540054, 1e-8);
    }

    #[test]
    fn gamma_and_t_density_match_scipy() {
        // scipy.special.gammaln(0.5), gammaln(10.3).
        close(ln_gamma(0.5), 0.5723649429247, 1e-12);
        close(ln_gamma(10.3), 13.482036786138359, 1e-12);
        // scipy.stats.t.logpdf(1.3, 4), t.logpdf(-7.0, 4).
        close(t_logpdf(1.3, 4.0), -1.8618689705575986, 1e-12);
        close(t_logpdf(-7.0, 4.0), -7.440823134092304, 1e-12);
    }

    #[test]
    fn mann_whitney_exact_matches_scipy_and_is_not_the_complement() {
        // scipy.stats.mannwhitneyu([1,2,3,4,5], [6,7,8,9,10], method="exact"): U=0,
        // p=0.007936507936507936. statrs gives 1.0 here (the complement).
        let r = mann_whitney_u(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert_eq!(r.statistic, 0.0);
        close(r.p_value, 0.007936507936507936, 1e-12);
        // mannwhitneyu([1.1,3.4,2.2,5.0,4.1,0.7], [3.9,6.2,5.5,2.9,7.3,4.8,6.6],
        // method="exact"): U=6, p=0.03496503496503496.
        let r = mann_whitney_u(
            &[1.1, 3.4, 2.2, 5.0, 4.1, 0.7],
            &[3.9, 6.2, 5.5, 2.9, 7.3, 4.8, 6.6],
        );
        assert_eq!(r.statistic, 6.0);
        close(r.p_value, 0.03496503496503496, 1e-12);
    }

    #[test]
    fn mann_whitney_asymptotic_with_ties_matches_scipy() {
        // mannwhitneyu([1,2,2,3,3,3,4,5], [3,4,4,5,5,6,7,7,8], method="asymptotic"):
        // U=7.5, p=0.006373133838085873.
        let r = mann_whitney_u(
            &[1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0, 5.0],
            &[3.0, 4.0, 4.0, 5.0, 5.0, 6.0, 7.0, 7.0, 8.0],
        );
        assert_eq!(r.statistic, 7.5);
        close(r.p_value, 0.006373133838085873, 1e-5);
    }

    #[test]
    fn kolmogorov_smirnov_exact_matches_scipy() {
        // scipy.stats.ks_2samp([1..5], [6..10], method="exact"): D=1, p=0.007936507936507936.
        let r = ks_2samp(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert_eq!(r.statistic, 1.0);
        close(r.p_value, 0.007936507936507936, 1e-9);
        // ks_2samp([1.1,3.4,2.2,5.0,4.1,0.7], [3.9,6.2,5.5,2.9,7.3,4.8,6.6], method="exact"):
        // D=0.5714285714285714, p=0.14685314685314685.
        let r = ks_2samp(
            &[1.1, 3.4, 2.2, 5.0, 4.1, 0.7],
            &[3.9, 6.2, 5.5, 2.9, 7.3, 4.8, 6.6],
        );
        close(r.statistic, 0.5714285714285714, 1e-12);
        close(r.p_value, 0.14685314685314685, 1e-9);
        // ks_2samp(a, b, method="exact") with the 10 and 12 values below: D=0.6333333333333333,
        // p=0.015306674749399209.
        let a = [0.61, 1.21, -0.35, 0.92, 0.11, 1.57, 0.43, -0.82, 0.27, 0.95];
        let b = [
            1.31, 0.85, 1.92, 2.41, 0.55, 1.66, 2.05, 1.18, 0.99, 1.74, 2.22, 1.47,
        ];
        let r = ks_2samp(&a, &b);
        close(r.statistic, 0.6333333333333333, 1e-12);
        close(r.p_value, 0.015306674749399209, 1e-9);
        // Same data, mannwhitneyu(a, b, method="exact"): U=15, p=0.0020134664097512397
        // (n1*n2 = 120 without ties takes the exact path).
        let r = mann_whitney_u(&a, &b);
        assert_eq!(r.statistic, 15.0);
        close(r.p_value, 0.0020134664097512397, 1e-9);
    }
}
