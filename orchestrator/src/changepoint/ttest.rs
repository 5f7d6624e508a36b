//! Student's t distribution and the pooled t-test the detectors use.
//!
//! Pure code. [`crate::stats`] has Student's t density but not its distribution function;
//! the change-point detectors need two-sided p-values and quantiles, so they live here, next
//! to their only users, and are tested against closed forms and published tables.

/// Regularised incomplete beta function I_x(a, b), by its continued fraction (modified Lentz;
/// Numerical Recipes' `betai`/`betacf`), accurate to ~1e-14 relative.
pub(crate) fn incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    use crate::stats::ln_gamma;
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    // The fraction converges fast for x < (a + 1)/(a + b + 2); use the symmetry otherwise.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(x, a, b) / a
    } else {
        1.0 - front * beta_fraction(1.0 - x, b, a) / b
    }
}

/// The continued fraction of [`incomplete_beta`].
fn beta_fraction(x: f64, a: f64, b: f64) -> f64 {
    // Smallest magnitude Lentz's method lets a denominator take, and the convergence goal.
    const TINY: f64 = 1e-300;
    const EPS: f64 = 1e-15;
    let guard = |v: f64| if v.abs() < TINY { TINY } else { v };
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 / guard(1.0 - qab * x / qap);
    let mut h = d;
    // 300 terms: the fraction needs O(√max(a, b)) of them; a, b here are at most ~10⁴.
    for m in 1..300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 / guard(1.0 + aa * d);
        c = guard(1.0 + aa / c);
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 / guard(1.0 + aa * d);
        c = guard(1.0 + aa / c);
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < EPS {
            break;
        }
    }
    h
}

/// Two-sided p-value P(|T| ≥ |t|) of Student's t with `df` degrees of freedom. An infinite
/// `t` gives 0; a NaN gives 1 (no evidence).
pub(crate) fn t_two_sided_p(t: f64, df: f64) -> f64 {
    if t.is_nan() || df <= 0.0 {
        return 1.0;
    }
    if t.is_infinite() {
        return 0.0;
    }
    incomplete_beta(df / (df + t * t), df / 2.0, 0.5).clamp(0.0, 1.0)
}

/// Quantile of Student's t: the `t` with P(T ≤ t) = `p`, by bisection (the detectors call it
/// a few times a night, so speed does not matter and bisection cannot diverge).
pub(crate) fn t_quantile(p: f64, df: f64) -> f64 {
    if p == 0.5 {
        return 0.0;
    }
    if p < 0.5 {
        return -t_quantile(1.0 - p, df);
    }
    // P(T ≥ t) = tail, found in [0, 1e7]: 1e7 is beyond the 1 − 1e-12 quantile at df = 1.
    let tail = 1.0 - p;
    let (mut lo, mut hi) = (0.0f64, 1e7f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_two_sided_p(mid, df) / 2.0 > tail {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Two-sided p-value of Student's pooled two-sample t-test from summary statistics, as scipy's
/// `ttest_ind_from_stats(m1, s1, n1, m2, s2, n2, equal_var=True)` computes it: the pooled
/// variance ((n1 − 1)·s1² + (n2 − 1)·s2²)/(n1 + n2 − 2), df = n1 + n2 − 2. Two points in all
/// give 1; no spread gives 1 for equal means and 0 for different ones.
pub(crate) fn student_p_from_stats(
    m1: f64,
    s1: f64,
    n1: usize,
    m2: f64,
    s2: f64,
    n2: usize,
) -> f64 {
    if n1 + n2 <= 2 {
        return 1.0;
    }
    let (a, b) = (n1 as f64, n2 as f64);
    let df = a + b - 2.0;
    let pooled = ((a - 1.0) * s1 * s1 + (b - 1.0) * s2 * s2) / df;
    let se = (pooled * (1.0 / a + 1.0 / b)).sqrt();
    let diff = m1 - m2;
    if se == 0.0 {
        return if diff == 0.0 { 1.0 } else { 0.0 };
    }
    t_two_sided_p(diff / se, df)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() <= tol * b.abs().max(1e-300), "{a} vs {b}");
    }

    #[test]
    fn t_tails_match_the_closed_forms() {
        // df = 1 is Cauchy: P(|T| ≥ t) = 1 − 2·atan(t)/π.
        for t in [0.3, 1.0, 4.0, 60.0] {
            close(
                t_two_sided_p(t, 1.0),
                1.0 - 2.0 * f64::atan(t) / std::f64::consts::PI,
                1e-12,
            );
        }
        // df = 2: P(|T| ≥ t) = 1 − t/√(t² + 2).
        for t in [0.5, 2.0, 9.0] {
            close(t_two_sided_p(t, 2.0), 1.0 - t / (t * t + 2.0).sqrt(), 1e-12);
        }
        // Large df tends to the normal: P(|Z| ≥ 1.959964) = 0.05.
        close(t_two_sided_p(1.959963984540054, 1e6), 0.05, 1e-4);
        assert_eq!(t_two_sided_p(f64::INFINITY, 5.0), 0.0);
        assert_eq!(t_two_sided_p(f64::NAN, 5.0), 1.0);
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        // Student's t table (two-sided 5% and 1%): t(0.975, 6) = 2.4469, t(0.995, 6) = 3.7074,
        // t(0.975, 10) = 2.2281, t(0.995, 30) = 2.7500.
        close(t_quantile(0.975, 6.0), 2.446_911_851, 1e-8);
        close(t_quantile(0.995, 6.0), 3.707_428_021, 1e-8);
        close(t_quantile(0.975, 10.0), 2.228_138_852, 1e-8);
        close(t_quantile(0.995, 30.0), 2.749_995_654, 1e-8);
        close(t_quantile(0.025, 6.0), -2.446_911_851, 1e-8);
    }

    #[test]
    fn the_pooled_test_follows_its_closed_form_and_edge_cases() {
        assert_eq!(student_p_from_stats(1.0, 0.0, 1, 2.0, 0.0, 1), 1.0);
        assert_eq!(student_p_from_stats(1.0, 0.0, 3, 2.0, 0.0, 3), 0.0);
        assert_eq!(student_p_from_stats(1.0, 0.0, 3, 1.0, 0.0, 3), 1.0);
        // Means 0 and 1, s = 1 each, 3 a side: t = 1/√(2/3) = 1.2247 with df 4, whose
        // distribution function has the closed form F(t) = 1/2 + (3/8)·u·(1 − u²/12) with
        // u = t/√(1 + t²/4) (Student's t, ν = 4).
        let t = 1.0 / (2.0f64 / 3.0).sqrt();
        let u = t / (1.0 + t * t / 4.0).sqrt();
        let f = 0.5 + 0.375 * u * (1.0 - u * u / 12.0);
        close(
            student_p_from_stats(0.0, 1.0, 3, 1.0, 1.0, 3),
            2.0 * (1.0 - f),
            1e-10,
        );
    }
}
