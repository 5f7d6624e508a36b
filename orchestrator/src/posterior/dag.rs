//! The posterior over the culprits of a DAG range ([`dag_posterior`]) from each tested commit's
//! [`Evidence`], with the host's trend and steps integrated out, and the classes of hypotheses
//! the tests cannot tell apart ([`classes`], [`class_probability`]).

use super::{logsumexp, NONE_LEVELS, NONE_PRIOR};
use crate::sequential::{Model, Timeline, TREND_PRIOR};
use std::collections::HashMap;

/// What a tested commit's boots say, for [`dag_posterior`]: the mean of its admitted boots, the
/// centres it is judged against, and when its boots ran (for the host's trend and steps).
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// Admitted boots.
    pub k: usize,
    /// Their mean's distance above the good centre, in σ.
    pub above_good: f64,
    /// The bad centre's distance above the good one, in σ (Δ/σ).
    pub effect: f64,
    /// Boots behind each centre ([`Model::n_baseline`]).
    pub n_baseline: f64,
    /// The mean boot time of the admitted boots, from the baselines' mean boot time, in
    /// [`TREND_UNIT`](crate::sequential::TREND_UNIT) boots.
    pub at: f64,
    /// Σ (t − t̄)² over the admitted boots (t in [`TREND_UNIT`](crate::sequential::TREND_UNIT) boots).
    pub stt: f64,
    /// Σ (t − t̄)(y − ȳ) over the admitted boots (y in σ): what the commit's own boots say of
    /// the trend.
    pub sty: f64,
    /// The admitted boots themselves, (y, t) as above: which of them came after a step.
    pub boots: Vec<(f64, f64)>,
}

/// A tested commit's [`Evidence`] from its boots as (raw value, boot time): the boot's place
/// among all of the hunt's boots, on the `timeline` whose origin is the mean place of the
/// baseline boots, where the model's centres stand. `None` when no boot was admitted
/// ([`Timeline::admit`]).
pub fn commit_evidence(
    model: &Model,
    timeline: &Timeline,
    boots: &[(f64, f64)],
) -> Option<Evidence> {
    let kept: Vec<(f64, f64)> = boots
        .iter()
        .filter_map(|&(v, t)| {
            let y = timeline.admit(model, v, t)?;
            Some(((y - model.good) / model.sigma, timeline.tau(t)))
        })
        .collect();
    if kept.is_empty() {
        return None;
    }
    let k = kept.len() as f64;
    let y_bar = kept.iter().map(|b| b.0).sum::<f64>() / k;
    let t_bar = kept.iter().map(|b| b.1).sum::<f64>() / k;
    Some(Evidence {
        k: kept.len(),
        above_good: y_bar,
        effect: (model.bad - model.good) / model.sigma,
        n_baseline: model.n_baseline.max(1.0),
        at: t_bar,
        stt: kept.iter().map(|b| (b.1 - t_bar).powi(2)).sum(),
        sty: kept.iter().map(|b| (b.1 - t_bar) * (b.0 - y_bar)).sum(),
        boots: kept,
    })
}

/// Running sums of one side under one hypothesis, for [`dag_posterior`]'s trend model: Σk,
/// Σk·r, Σk·r², Σk·τ, Σk·τ², Σk·τ·r over its commits (r the mean's distance from the side's
/// centre in σ, τ its mean boot time).
#[derive(Debug, Clone, Copy, Default)]
struct TrendSide {
    w: f64,
    wr: f64,
    wr2: f64,
    wt: f64,
    wt2: f64,
    wtr: f64,
}

impl TrendSide {
    fn add(&mut self, e: &Evidence, r: f64) {
        let k = e.k as f64;
        self.w += k;
        self.wr += k * r;
        self.wr2 += k * r * r;
        self.wt += k * e.at;
        self.wt2 += k * e.at * e.at;
        self.wtr += k * e.at * r;
    }
}

/// Prior probability that the host moved suddenly, once, during the hunt (another job on it,
/// a firmware or BIOS change, a disk that began to fail): a lasting step of its level at an
/// unknown boot, besides the steady trend. [`dag_posterior`] weighs every hypothesis with and
/// without one.
pub const STEP_PRIOR: f64 = 0.1;

/// Prior precision of such a step's size, σ⁻²: a step of 2σ is one prior standard deviation.
pub const STEP_SIZE_PRIOR: f64 = 0.25;

/// Boot times at which a step is considered, evenly spread over the hunt's boots.
pub const STEP_GRID: usize = 24;

/// For a symmetric positive definite `h`: (uᵀh⁻¹u, ln det h, h⁻¹u), by Cholesky.
fn gauss<const D: usize>(h: [[f64; D]; D], u: [f64; D]) -> (f64, f64, [f64; D]) {
    let mut l = [[0.0; D]; D];
    for i in 0..D {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            l[i][j] = if i == j {
                (h[i][i] - s).max(1e-300).sqrt()
            } else {
                (h[i][j] - s) / l[j][j]
            };
        }
    }
    let mut z = [0.0; D];
    for i in 0..D {
        let s: f64 = (0..i).map(|k| l[i][k] * z[k]).sum();
        z[i] = (u[i] - s) / l[i][i];
    }
    let mut x = [0.0; D];
    for i in (0..D).rev() {
        let s: f64 = (i + 1..D).map(|k| l[k][i] * x[k]).sum();
        x[i] = (z[i] - s) / l[i][i];
    }
    let quad = z.iter().map(|v| v * v).sum();
    let ln_det = 2.0 * (0..D).map(|i| l[i][i].ln()).sum::<f64>();
    (quad, ln_det, x)
}

/// The boots after each step time of the grid: count, Σy, Σt of those with t ≥ the step.
type After = Vec<[f64; 3]>;

fn after(boots: &[(f64, f64)], grid: &[f64]) -> After {
    grid.iter()
        .map(|&s| {
            boots
                .iter()
                .filter(|b| b.1 >= s)
                .fold([0.0; 3], |a, b| [a[0] + 1.0, a[1] + b.0, a[2] + b.1])
        })
        .collect()
}

/// How one class of hypotheses explains the boots: its log evidence, and the host's fitted
/// move (β, and the step's grid index and size when a step explains it best).
#[derive(Debug, Clone, Copy)]
struct Fit {
    log_ev: f64,
    beta: f64,
    step: Option<(usize, f64)>,
}

/// The Gaussian linear model behind one class of hypotheses: the good and bad centres' errors
/// (prior precision `nb` each), the trend β (prior precision [`TREND_PRIOR`]) and, with
/// probability [`STEP_PRIOR`], a step at one of the grid's times (size prior
/// [`STEP_SIZE_PRIOR`]), all integrated out. `g`, `b`: both sides' sums; `stt`, `sty`: the
/// within-commit trend sums of all boots; `ka_bad[j]`: boots of bad-side commits after step
/// time `j`; `all_after[j]`: count, Σy, Σt of every boot after it. The log evidence is relative
/// to "no boots" (σ = 1; 2π and Σ ln k terms dropped, the same for every hypothesis).
#[allow(clippy::too_many_arguments)]
fn class_fit(
    g: &TrendSide,
    b: &TrendSide,
    stt: f64,
    sty: f64,
    nb: f64,
    effect: f64,
    ka_bad: &[f64],
    all_after: &After,
) -> Fit {
    let h3 = [
        [nb + g.w, 0.0, g.wt],
        [0.0, nb + b.w, b.wt],
        [g.wt, b.wt, TREND_PRIOR + g.wt2 + b.wt2 + stt],
    ];
    let u3 = [g.wr, b.wr, g.wtr + b.wtr + sty];
    let wr2 = g.wr2 + b.wr2;
    let (q, ln_det, x) = gauss(h3, u3);
    let flat = -0.5 * (wr2 - q + ln_det - 2.0 * nb.ln() - TREND_PRIOR.ln());
    let mut best = Fit {
        log_ev: flat,
        beta: x[2],
        step: None,
    };
    if all_after.is_empty() {
        return best;
    }
    let mut terms = vec![(1.0 - STEP_PRIOR).ln() + flat];
    let (mut top, each) = (flat, (STEP_PRIOR / all_after.len() as f64).ln());
    for (j, a) in all_after.iter().enumerate() {
        let (ka, kb) = (a[0] - ka_bad[j], ka_bad[j]);
        let h4 = [
            [h3[0][0], 0.0, h3[0][2], ka],
            [0.0, h3[1][1], h3[1][2], kb],
            [h3[2][0], h3[2][1], h3[2][2], a[2]],
            [ka, kb, a[2], STEP_SIZE_PRIOR + a[0]],
        ];
        let u4 = [u3[0], u3[1], u3[2], a[1] - effect * kb];
        let (q, ln_det, x) = gauss(h4, u4);
        let ev =
            -0.5 * (wr2 - q + ln_det - 2.0 * nb.ln() - TREND_PRIOR.ln() - STEP_SIZE_PRIOR.ln());
        terms.push(each + ev);
        if ev > top {
            top = ev;
            best.beta = x[2];
            best.step = Some((j, x[3]));
        }
    }
    best.log_ev = logsumexp(terms.iter().copied());
    best
}

/// The posterior over the culprits of a DAG range: one probability per hypothesis, then NONE.
///
/// Pure. Hypothesis `h` (one per candidate, flat prior) says `h` and its descendants are bad and
/// everything else good; `bad_under[t][h]` says whether tested commit `t` is bad under `h` (it
/// is `h` or a descendant of it), and `evidence[t]` is `t`'s [`commit_evidence`]. `reference`
/// is the good endpoint's re-measurements (the drift checks), good under every hypothesis.
///
/// The likelihood is [`Posterior`](super::Posterior)'s with the host's moves: the commits good
/// under `h` share the good centre and the others the bad one, each centre known only to
/// σ/√n_baseline, and every boot is moved by β·t, a linear drift of the host in boot order from the
/// baselines' mean boot time (prior sd 1/√[`TREND_PRIOR`] σ per
/// [`TREND_UNIT`](crate::sequential::TREND_UNIT) boots), and, with prior probability
/// [`STEP_PRIOR`], by a lasting step from one of [`STEP_GRID`] boot times on. The centres' errors,
/// β and the step's size are integrated out exactly (a Gaussian linear model), the step's time by
/// summing over the grid. So a commit tested good sharpens the good centre for its neighbours, and
/// every boot, judged by its side under `h`, tells how the host has moved. (Judging each commit
/// alone against the baselines let evidence saturate: in `firstbad sim` 10% of `firstbad run`'s
/// hunts at Δ/σ = 1 then spent hundreds of boots between two neighbours and stated 40% where they
/// were right 60% of the time. Without the trend, a host slowing by 1σ per 100 boots made it name a
/// wrong commit nine times in ten, claiming 93%.) With every boot at the baselines' time the host's
/// moves drop out and this is [`Posterior`](super::Posterior)'s likelihood exactly. NONE ("no
/// single culprit", prior [`NONE_PRIOR`]) puts each tested commit at its own level of
/// [`NONE_LEVELS`], on the boots less the best fit's move of the host, with the same price for
/// fitting one.
///
/// Hypotheses the tests cannot tell apart (the same row pattern) share one likelihood, which
/// is computed once per such class.
pub fn dag_posterior(
    n: usize,
    bad_under: &[Vec<bool>],
    evidence: &[Evidence],
    reference: Option<&Evidence>,
) -> (Vec<f64>, f64) {
    let (p, none, _) = dag_posterior_with_host(n, bad_under, evidence, reference);
    (p, none)
}

/// How the host moved during the hunt, as the most probable hypothesis explains the boots
/// ([`dag_posterior`]'s model): for the report, so a person sees what was taken out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostMove {
    /// The linear trend, σ per [`TREND_UNIT`](crate::sequential::TREND_UNIT) boots.
    pub trend: f64,
    /// A step, when one explains the boots better than none: from this boot time on (in
    /// [`TREND_UNIT`](crate::sequential::TREND_UNIT) boots from the baselines' mean), this
    /// many σ.
    pub step: Option<(f64, f64)>,
}

/// [`dag_posterior`], and how the host moved as its most probable hypothesis explains the
/// boots ([`HostMove`]).
pub fn dag_posterior_with_host(
    n: usize,
    bad_under: &[Vec<bool>],
    evidence: &[Evidence],
    reference: Option<&Evidence>,
) -> (Vec<f64>, f64, HostMove) {
    assert_eq!(
        bad_under.len(),
        evidence.len(),
        "one evidence per tested commit"
    );
    let nb = evidence.first().or(reference).map_or(1.0, |e| e.n_baseline);
    let effect = evidence.first().or(reference).map_or(0.0, |e| e.effect);
    let all = || evidence.iter().chain(reference);
    let stt: f64 = all().map(|e| e.stt).sum();
    let sty: f64 = all().map(|e| e.sty).sum();
    // The step grid over the span of the boots' times; none when they all share one time.
    let (lo, hi) = all()
        .flat_map(|e| e.boots.iter().map(|b| b.1))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |a, t| {
            (a.0.min(t), a.1.max(t))
        });
    let grid: Vec<f64> = if hi > lo {
        (0..STEP_GRID)
            .map(|j| lo + (hi - lo) * j as f64 / STEP_GRID as f64)
            .collect()
    } else {
        Vec::new()
    };
    let afters: Vec<After> = evidence.iter().map(|e| after(&e.boots, &grid)).collect();
    let ref_after = reference.map(|r| after(&r.boots, &grid));
    let all_after: After = (0..grid.len())
        .map(|j| {
            afters
                .iter()
                .chain(ref_after.iter())
                .fold([0.0; 3], |a, x| {
                    [a[0] + x[j][0], a[1] + x[j][1], a[2] + x[j][2]]
                })
        })
        .collect();
    let prior = ((1.0 - NONE_PRIOR) / n as f64).ln();
    let mut base = TrendSide::default();
    if let Some(r) = reference {
        base.add(r, r.above_good);
    }
    let mut by_class: HashMap<Vec<bool>, Fit> = HashMap::new();
    let fits: Vec<Fit> = (0..n)
        .map(|h| {
            let key: Vec<bool> = bad_under.iter().map(|b| b[h]).collect();
            *by_class.entry(key).or_insert_with_key(|key| {
                let (mut good, mut bad) = (base, TrendSide::default());
                let mut ka_bad = vec![0.0; grid.len()];
                for ((&is_bad, e), a) in key.iter().zip(evidence).zip(&afters) {
                    if is_bad {
                        bad.add(e, e.above_good - e.effect);
                        for (k, x) in ka_bad.iter_mut().zip(a) {
                            *k += x[0];
                        }
                    } else {
                        good.add(e, e.above_good);
                    }
                }
                class_fit(&good, &bad, stt, sty, nb, effect, &ka_bad, &all_after)
            })
        })
        .collect();
    let log_h: Vec<f64> = fits.iter().map(|f| prior + f.log_ev).collect();
    // NONE on the boots less the best fit's move of the host, paying what fitting it costs.
    let best = fits
        .iter()
        .max_by(|a, b| a.log_ev.total_cmp(&b.log_ev))
        .copied()
        .unwrap_or(Fit {
            log_ev: 0.0,
            beta: 0.0,
            step: None,
        });
    let beta = best.beta;
    let ln_levels = (NONE_LEVELS.len() as f64).ln();
    let mut occam = {
        let precision = TREND_PRIOR + all().map(|e| e.k as f64 * e.at * e.at + e.stt).sum::<f64>();
        -0.5 * (precision / TREND_PRIOR).ln()
    };
    if !grid.is_empty() {
        occam += match best.step {
            Some((j, _)) => {
                (STEP_PRIOR / grid.len() as f64).ln()
                    - 0.5 * ((STEP_SIZE_PRIOR + all_after[j][0]) / STEP_SIZE_PRIOR).ln()
            }
            None => (1.0 - STEP_PRIOR).ln(),
        };
    }
    let within = -0.5 * (beta * beta * stt - 2.0 * beta * sty);
    let stepped = |e: &Evidence, a: Option<&After>| match (best.step, a) {
        (Some((j, size)), Some(a)) => size * a[j][0] / e.k as f64,
        _ => 0.0,
    };
    let at_level = |e: &Evidence, a: Option<&After>, lev: f64| {
        let v = 1.0 / e.k as f64 + 1.0 / nb;
        let r = e.above_good - beta * e.at - stepped(e, a) - lev * e.effect;
        -0.5 * (r * r / v + (v * e.k as f64).ln())
    };
    let log_none = NONE_PRIOR.ln()
        + occam
        + within
        + reference.map_or(0.0, |r| at_level(r, ref_after.as_ref(), 0.0))
        + evidence
            .iter()
            .zip(&afters)
            .map(|(e, a)| {
                logsumexp(NONE_LEVELS.iter().map(|&lev| at_level(e, Some(a), lev))) - ln_levels
            })
            .sum::<f64>();
    let z = logsumexp(log_h.iter().copied().chain(std::iter::once(log_none)));
    let host = HostMove {
        trend: beta,
        step: best.step.map(|(j, size)| (grid[j], size)),
    };
    (
        log_h.iter().map(|l| (l - z).exp()).collect(),
        (log_none - z).exp(),
        host,
    )
}

/// The posterior probability, from [`dag_posterior`]'s `p`, that the culprit is `claimed` or a
/// commit the tests cannot tell apart from it (the same pattern over the tested commits' rows
/// `bad_under`: with path-limited ranges the commits that do not touch the paths sit in the
/// class of the first one below them that does, which is what `git bisect start -- <paths>`
/// reports as well).
pub fn class_probability(bad_under: &[Vec<bool>], p: &[f64], claimed: usize) -> f64 {
    assert!(claimed < p.len(), "the claimed culprit is a hypothesis");
    let same = |h: usize| bad_under.iter().all(|b| b[h] == b[claimed]);
    (0..p.len()).filter(|&h| same(h)).map(|h| p[h]).sum()
}

/// Every class of hypotheses the tests cannot tell apart (the same pattern over the tested
/// commits, see [`class_probability`]): its members in hypothesis order and its probability, in
/// the order of their first members.
pub fn classes(p: &[f64], bad_under: &[Vec<bool>]) -> Vec<(Vec<usize>, f64)> {
    let mut index: std::collections::HashMap<Vec<bool>, usize> = Default::default();
    let mut out: Vec<(Vec<usize>, f64)> = Vec::new();
    for (h, &ph) in p.iter().enumerate() {
        let key: Vec<bool> = bad_under.iter().map(|b| b[h]).collect();
        let at = *index.entry(key).or_insert_with(|| {
            out.push((Vec::new(), 0.0));
            out.len() - 1
        });
        out[at].0.push(h);
        out[at].1 += ph;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Direction;
    use crate::posterior::fixtures::{at_origin, model, FLAT};
    use crate::posterior::Posterior;
    use crate::sequential::TREND_UNIT;

    /// A line a - b - c - d (d is the bad endpoint), hypotheses in that order.
    fn line_bad_under(tested: &[usize]) -> Vec<Vec<bool>> {
        tested
            .iter()
            .map(|&t| (0..4).map(|h| h <= t).collect())
            .collect()
    }

    #[test]
    fn the_class_probability_follows_the_evidence_and_merges_indistinguishable_commits() {
        let m = model();
        let good = commit_evidence(&m, &FLAT, &at_origin(&[35.0, 35.5])).unwrap();
        let bad = commit_evidence(&m, &FLAT, &at_origin(&[45.0, 44.5])).unwrap();
        let confidence = |under: &[Vec<bool>], evidence: &[Evidence], claimed: usize| {
            let (p, _) = dag_posterior(4, under, evidence, None);
            class_probability(under, &p, claimed)
        };
        // b tested good, c tested bad: c is the culprit, and clearly so at Δ/σ ≈ 5.
        let p = confidence(&line_bad_under(&[1, 2]), &[good.clone(), bad.clone()], 2);
        assert!(p > 0.99, "{p}");
        // Only c tested (bad): a, b and c cannot be told apart; the class holds them all.
        let p_class = confidence(&line_bad_under(&[2]), std::slice::from_ref(&bad), 2);
        assert!(p_class > 0.99, "{p_class}");
        // Claiming b when b looked good is not supported.
        let p_b = confidence(&line_bad_under(&[1, 2]), &[good, bad], 1);
        assert!(p_b < 0.01, "{p_b}");
        // Half-way commits: no single culprit takes the mass.
        let mid = (35.0f64 * 45.0).sqrt();
        let half = commit_evidence(&m, &FLAT, &at_origin(&[mid; 10])).unwrap();
        let p_half = confidence(
            &line_bad_under(&[0, 1, 2]),
            &[half.clone(), half.clone(), half],
            2,
        );
        assert!(p_half < 0.5, "{p_half}");
        // A boot far beyond both centres is not evidence at all.
        assert!(commit_evidence(&m, &FLAT, &at_origin(&[400.0])).is_none());
    }

    #[test]
    fn the_dag_posterior_of_a_line_is_the_posterior_search_s() {
        // The same boots through `Posterior` (linear, incremental) and `dag_posterior` (rows):
        // the same likelihood, so the same probabilities, NONE included.
        let m = model();
        let n = 12;
        let boots: [(usize, f64); 9] = [
            (5, 36.0),
            (5, 38.5),
            (8, 44.0),
            (2, 35.5),
            (8, 41.0),
            (6, 40.0),
            (6, 43.5),
            (11, 45.2),
            (3, 37.0),
        ];
        let mut post = Posterior::new(n, m);
        let mut values = vec![Vec::new(); n];
        for &(i, v) in &boots {
            post.observe(i, v);
            values[i].push(v);
        }
        let (mut under, mut evidence) = (Vec::new(), Vec::new());
        for (t, v) in values.iter().enumerate() {
            if let Some(e) = commit_evidence(&m, &FLAT, &at_origin(v)) {
                under.push((0..n).map(|h| h <= t).collect::<Vec<bool>>());
                evidence.push(e);
            }
        }
        let (p, none) = dag_posterior(n, &under, &evidence, None);
        let (q, q_none) = post.probabilities();
        for (a, b) in p.iter().zip(&q) {
            assert!((a - b).abs() < 1e-12, "{p:?} vs {q:?}");
        }
        assert!((none - q_none).abs() < 1e-12, "{none} vs {q_none}");
    }

    #[test]
    fn two_commits_on_one_side_share_the_centre_s_error() {
        // Reference: the bivariate normal density written out. Two tested commits, k1 = 2 and
        // k2 = 3 boots, means 0.3σ and -0.2σ above good, centres known to 1/n_baseline = 1/4:
        // both good under h = 2, covariance [[1/2 + 1/4, 1/4], [1/4, 1/3 + 1/4]]; under h = 1
        // commit 0 is good and commit 1 bad (Δ/σ = 2), independent sides.
        let ev = |k, above_good| Evidence {
            k,
            above_good,
            effect: 2.0,
            n_baseline: 4.0,
            at: 0.0,
            stt: 0.0,
            sty: 0.0,
            boots: vec![(above_good, 0.0); k],
        };
        let evidence = [ev(2, 0.3), ev(3, -0.2)];
        let under = vec![vec![true, false, false], vec![true, true, false]];
        let (p, _) = dag_posterior(3, &under, &evidence, None);
        let (a, b, d): (f64, f64, f64) = (0.5 + 0.25, 0.25, 1.0 / 3.0 + 0.25);
        let det = a * d - b * b;
        let (x, y) = (0.3, -0.2);
        let quad = (d * x * x - 2.0 * b * x * y + a * y * y) / det;
        let both_good = -0.5 * (quad + det.ln());
        let alone = |v: f64, r: f64| -0.5 * (r * r / v + v.ln());
        let split = alone(a, x) + alone(d, y - 2.0);
        let want = both_good - split;
        assert!(((p[2] / p[1]).ln() - want).abs() < 1e-12, "{p:?} {want}");
    }

    /// ln N(y; 0, C) by Gaussian elimination (C symmetric positive definite, small).
    fn ln_normal_density(y: &[f64], c: &[Vec<f64>]) -> f64 {
        let n = y.len();
        let mut a: Vec<Vec<f64>> = c
            .iter()
            .zip(y)
            .map(|(r, &v)| [&r[..], &[v]].concat())
            .collect();
        let mut ln_det = 0.0;
        for i in 0..n {
            ln_det += a[i][i].ln();
            let pivot = a[i].clone();
            for row in a.iter_mut().skip(i + 1) {
                let f = row[i] / pivot[i];
                for (x, p) in row.iter_mut().zip(&pivot).skip(i) {
                    *x -= f * p;
                }
            }
        }
        // Back-substitution gives C⁻¹y; yᵀC⁻¹y from it.
        let mut x = vec![0.0; n];
        for i in (0..n).rev() {
            let s: f64 = (i + 1..n).map(|k| a[i][k] * x[k]).sum();
            x[i] = (a[i][n] - s) / a[i][i];
        }
        let quad: f64 = y.iter().zip(&x).map(|(a, b)| a * b).sum();
        -0.5 * (quad + ln_det + n as f64 * (2.0 * std::f64::consts::PI).ln())
    }

    #[test]
    fn the_trend_model_is_the_multivariate_normal_written_out() {
        // Reference: every boot's value written out as y = X θ + ε, θ = (good centre's error,
        // bad centre's error, trend β) ~ N(0, diag(1/nb, 1/nb, 1/λ)), ε ~ N(0, I), so y ~
        // N(0, I + X P⁻¹ Xᵀ); and the step mixture on top. Line of 3 hypotheses; commit 0 booted twice, commit 1 three
        // times, the good endpoint re-measured twice; values in σ above good (Δ/σ = 2), times
        // in TREND_UNIT from the baselines' mean.
        let (nb, effect) = (4.0, 2.0);
        let c0 = [(0.3, 0.1), (0.9, 0.5)];
        let c1 = [(1.8, 0.2), (2.4, 0.8), (1.1, 1.4)];
        let refs = [(0.2, 0.3), (1.0, 1.2)];
        let ev = |b: &[(f64, f64)]| {
            let m = Model {
                good: 0.0,
                bad: effect,
                sigma: 1.0,
                direction: Direction::LowerIsBetter,
                n_baseline: nb,
            };
            // On the model's oriented log scale a raw value v is ln v: feed e^y at time τ·U.
            let raw: Vec<(f64, f64)> = b.iter().map(|&(y, t)| (y.exp(), t * TREND_UNIT)).collect();
            commit_evidence(&m, &FLAT, &raw).unwrap()
        };
        let evidence = [ev(&c0), ev(&c1)];
        let under = vec![vec![true, false, false], vec![true, true, false]];
        let (p, _) = dag_posterior(3, &under, &evidence, Some(&ev(&refs)));
        // Written out under h: rows of (bad?, value, time) for every boot.
        let written = |bad0: bool, bad1: bool| {
            let rows: Vec<(bool, f64, f64)> = c0
                .iter()
                .map(|&(y, t)| (bad0, y, t))
                .chain(c1.iter().map(|&(y, t)| (bad1, y, t)))
                .chain(refs.iter().map(|&(y, t)| (false, y, t)))
                .collect();
            let y: Vec<f64> = rows
                .iter()
                .map(|&(b, v, _)| if b { v - effect } else { v })
                .collect();
            // With a step from time s on (size ~ N(0, 1/κ)): one more shared term for the boots
            // at or after s. s runs over the grid dag_posterior uses, the span of the boots'
            // times cut in STEP_GRID.
            let cov = |step: Option<f64>| -> Vec<Vec<f64>> {
                let after = |t: f64| f64::from(u8::from(step.is_some_and(|s| t >= s)));
                rows.iter()
                    .enumerate()
                    .map(|(i, a)| {
                        rows.iter()
                            .enumerate()
                            .map(|(j, b)| {
                                let same_centre = if a.0 == b.0 { 1.0 / nb } else { 0.0 };
                                f64::from(u8::from(i == j))
                                    + same_centre
                                    + a.2 * b.2 / TREND_PRIOR
                                    + after(a.2) * after(b.2) / STEP_SIZE_PRIOR
                            })
                            .collect()
                    })
                    .collect()
            };
            let (lo, hi) = (0.1, 1.4);
            let each = (STEP_PRIOR / STEP_GRID as f64).ln();
            logsumexp(
                std::iter::once((1.0 - STEP_PRIOR).ln() + ln_normal_density(&y, &cov(None)))
                    .chain((0..STEP_GRID).map(|j| {
                        let s = lo + (hi - lo) * j as f64 / STEP_GRID as f64;
                        each + ln_normal_density(&y, &cov(Some(s)))
                    }))
                    .collect::<Vec<f64>>()
                    .into_iter(),
            )
        };
        // h = 0: both bad; h = 1: commit 0 good, commit 1 bad; h = 2: both good.
        let (l0, l1, l2) = (
            written(true, true),
            written(false, true),
            written(false, false),
        );
        assert!(((p[1] / p[0]).ln() - (l1 - l0)).abs() < 1e-10, "{p:?}");
        assert!(((p[2] / p[1]).ln() - (l2 - l1)).abs() < 1e-10, "{p:?}");
    }

    #[test]
    fn a_host_that_slows_down_does_not_move_the_culprit() {
        // Line of 8, the culprit 5 (5, 6, 7 bad), Δ/σ ≈ 5, a host slowing by 1.5σ per 100
        // boots. The bisection tests 3 early (good), 6 (bad), then 4 late, when the host has
        // slowed by 3.6σ: 4 looks bad. The good endpoint's re-measurements show the trend.
        let m = model();
        let at = |level: f64, t: f64| {
            let y = m.good + level * (m.bad - m.good) + 1.5 * m.sigma * t / TREND_UNIT;
            (y.exp(), t)
        };
        let boots: [(usize, Vec<(f64, f64)>); 4] = [
            (3, vec![at(0.0, 10.0), at(0.0, 12.0)]),
            (6, vec![at(1.0, 60.0), at(1.0, 62.0)]),
            (4, vec![at(0.0, 240.0), at(0.0, 242.0), at(0.0, 244.0)]),
            (5, vec![at(1.0, 250.0), at(1.0, 252.0)]),
        ];
        let refs: Vec<(f64, f64)> = [50.0, 100.0, 150.0, 200.0, 246.0]
            .iter()
            .map(|&t| at(0.0, t))
            .collect();
        let posterior = |timed: bool| {
            let time = |b: &[(f64, f64)]| -> Vec<(f64, f64)> {
                b.iter()
                    .map(|&(v, t)| (v, if timed { t } else { 0.0 }))
                    .collect()
            };
            let line = Timeline::new(&m, 0.0, &time(&refs));
            let (mut under, mut evidence) = (Vec::new(), Vec::new());
            for (t, b) in &boots {
                under.push((0..8).map(|h| h <= *t).collect::<Vec<bool>>());
                evidence.push(commit_evidence(&m, &line, &time(b)).unwrap());
            }
            let reference = commit_evidence(&m, &line, &time(&refs));
            dag_posterior(8, &under, &evidence, reference.as_ref()).0
        };
        let with_trend = posterior(true);
        assert!(with_trend[5] > 0.99, "{with_trend:?}");
        // And the report can say how the host moved: 1.5σ per 100 boots, steadily.
        let line = Timeline::new(&m, 0.0, &refs);
        let (mut under, mut evidence) = (Vec::new(), Vec::new());
        for (t, b) in &boots {
            under.push((0..8).map(|h| h <= *t).collect::<Vec<bool>>());
            evidence.push(commit_evidence(&m, &line, b).unwrap());
        }
        let reference = commit_evidence(&m, &line, &refs);
        let (_, _, host) = dag_posterior_with_host(8, &under, &evidence, reference.as_ref());
        assert!((host.trend - 1.5).abs() < 0.3, "{host:?}");
        // The same boots read as if the host stood still point at 4 instead.
        let still = posterior(false);
        assert!(still[5] < 0.01, "{still:?}");
    }

    #[test]
    fn a_host_that_steps_is_seen_as_a_step_and_the_culprit_stays() {
        // Line of 8, culprit 5, Δ/σ ≈ 5; from boot 100 on the host is 3σ slower. 3 is tested
        // before (good) and 4 after (good, but 3σ up: past half-way to bad); the good
        // endpoint re-measured on both sides of the step shows it.
        let m = model();
        let at = |level: f64, t: f64| {
            let step = if t >= 100.0 { 3.0 } else { 0.0 };
            let y = m.good + level * (m.bad - m.good) + step * m.sigma;
            (y.exp(), t)
        };
        let boots: [(usize, Vec<(f64, f64)>); 4] = [
            (3, vec![at(0.0, 10.0), at(0.0, 12.0)]),
            (6, vec![at(1.0, 40.0), at(1.0, 42.0)]),
            (4, vec![at(0.0, 140.0), at(0.0, 142.0), at(0.0, 144.0)]),
            (5, vec![at(1.0, 60.0), at(1.0, 62.0)]),
        ];
        let refs: Vec<(f64, f64)> = [20.0, 50.0, 80.0, 110.0, 130.0, 150.0]
            .iter()
            .map(|&t| at(0.0, t))
            .collect();
        let (mut under, mut evidence) = (Vec::new(), Vec::new());
        for (t, b) in &boots {
            under.push((0..8).map(|h| h <= *t).collect::<Vec<bool>>());
            evidence.push(commit_evidence(&m, &FLAT, b).unwrap());
        }
        let reference = commit_evidence(&m, &FLAT, &refs);
        let (p, _) = dag_posterior(8, &under, &evidence, reference.as_ref());
        assert!(p[5] > 0.95, "{p:?}");
        let (_, _, host) = dag_posterior_with_host(8, &under, &evidence, reference.as_ref());
        let (when, size) = host.step.expect("a step");
        // Shrunk by the priors, and a little of it lent to the trend.
        assert!(
            (2.0..=3.5).contains(&size) && host.trend.abs() < 0.5,
            "{host:?}"
        );
        assert!((0.8..=1.4).contains(&when), "{host:?}");
    }
}
