//! Noise-aware search: a posterior over which commit is the culprit, plus "no single culprit".
//!
//! Pure code. The candidates are a linear history indexed oldest first, `0..n`, whose last
//! commit `n - 1` is the bad endpoint (it may itself be the culprit, as in git bisect); the good
//! endpoint sits before index 0. Hypothesis `h` says commits `h..n` are bad and `0..h` good.
//! The extra hypothesis NONE says there is no single step: each tested commit sits at its own
//! level, good, half-way or bad (two culprits, a gradual slide, endpoints that do not really
//! differ).
//!
//! # Likelihood
//! A boot far beyond both centres is left out ([`Model::admit`]); a commit's evidence is the
//! mean of its `k` admitted boots. Under hypothesis `h` the commits before `h` share the good centre and
//! the others the bad centre, and those centres are known only to σ/√n from the baselines. The
//! likelihood integrates that uncertainty out exactly (a Gaussian with a shared error per side,
//! inverted with Sherman-Morrison), so a commit the search has classified good sharpens the good
//! centre for every other commit instead of its evidence saturating against a baseline of a few
//! boots. Boot-to-boot σ is the baselines' estimate, taken as known.
//!
//! # Search
//! Every boot updates the posterior ([`Posterior::observe`]), never a hard verdict, so a
//! wrong-looking boot costs a little probability rather than half the range. The next commit
//! is the one with the most expected information per unit of cost ([`Posterior::choose`]): a
//! boot of a commit whose P(bad) is q teaches about q(1 − q) (the small-signal mutual
//! information of a binary state seen through Gaussian noise), and a commit not yet built costs
//! `build_cost` boots more. Earlier commits may be chosen again. The search stops when one
//! hypothesis reaches the configured confidence ([`Posterior::standing`]).
//!
//! Merges: the hunt reduces a range to its first-parent line first; a DAG-wide posterior is not
//! modelled here.

use crate::sequential::{Model, Timeline, TREND_PRIOR};
use std::collections::HashMap;

/// Levels between good (0) and bad (1) a commit may sit at under NONE: good, half-way, bad.
/// A half-way commit (two culprits) counts as evidence for NONE. A finer grid (0.25, 0.75) let
/// the small error of the baseline centres pass for evidence of NONE in `firstbad sim`.
pub const NONE_LEVELS: [f64; 3] = [0.0, 0.5, 1.0];

/// Prior probability of "no single culprit" (1%): a confirmed regression usually has one. At 5%,
/// one wrong-looking commit was enough in `firstbad sim` for NONE to win before the search had
/// re-tested that commit.
pub const NONE_PRIOR: f64 = 0.01;

/// Where the posterior stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    /// This commit (index) is the culprit with this probability, at or above the target.
    Culprit(usize, f64),
    /// No single culprit, with this probability, at or above the target.
    NoSingleCulprit(f64),
    /// Not yet: the most probable commit and its probability.
    Open(usize, f64),
}

/// The posterior over culprits of a linear history.
#[derive(Debug, Clone)]
pub struct Posterior {
    model: Model,
    /// Boots per commit.
    boots: Vec<u32>,
    /// Admitted boots per commit.
    k: Vec<u32>,
    /// Sum of admitted boots per commit, in units of σ.
    sum_y: Vec<f64>,
    /// Tested commits, ascending.
    tested: Vec<usize>,
    /// Log posterior of each step hypothesis, unnormalised.
    log_step: Vec<f64>,
    /// Log posterior of NONE, unnormalised.
    log_none: f64,
}

fn logsumexp(v: impl Iterator<Item = f64> + Clone) -> f64 {
    let m = v.clone().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + v.map(|x| (x - m).exp()).sum::<f64>().ln()
}

/// Running sums for one side's shared-centre Gaussian: Σw, Σw·r, Σw·r², Σ ln(1/w).
#[derive(Debug, Clone, Copy, Default)]
struct Side {
    w: f64,
    wr: f64,
    wr2: f64,
    ln_inv_w: f64,
}

impl Side {
    fn add(&mut self, k: f64, r: f64) {
        self.w += k;
        self.wr += k * r;
        self.wr2 += k * r * r;
        self.ln_inv_w -= k.ln();
    }

    /// Log density (σ = 1, 2π terms dropped) of the commit means whose deviations from the
    /// estimated centre were added, when that centre is off by N(0, 1/n) shared by them all.
    fn log_density(&self, n: f64) -> f64 {
        let q = self.wr2 - self.wr * self.wr / (n + self.w);
        -0.5 * (q + self.ln_inv_w + (1.0 + self.w / n).ln())
    }
}

impl Posterior {
    /// A flat prior over `n` candidate commits (index `n - 1` is the bad endpoint) and NONE,
    /// judged by `model`.
    pub fn new(n: usize, model: Model) -> Posterior {
        let each = ((1.0 - NONE_PRIOR) / n as f64).ln();
        Posterior {
            model,
            boots: vec![0; n],
            k: vec![0; n],
            sum_y: vec![0.0; n],
            tested: Vec::new(),
            log_step: vec![each; n],
            log_none: NONE_PRIOR.ln(),
        }
    }

    /// Number of candidate commits.
    pub fn len(&self) -> usize {
        self.boots.len()
    }

    /// Always false: a posterior has at least one candidate.
    pub fn is_empty(&self) -> bool {
        self.boots.is_empty()
    }

    /// Boots taken of commit `i` so far.
    pub fn boots(&self, i: usize) -> u32 {
        self.boots[i]
    }

    /// Commit `i`'s bad-vs-good log-likelihood ratio from its own boots, against the baseline
    /// centres with their uncertainty (for the sequential stay rule); 0 when untested.
    pub fn commit_llr(&self, i: usize) -> f64 {
        let k = self.k[i] as usize;
        if k == 0 {
            return 0.0;
        }
        let l = self
            .model
            .mean_loglik(self.mean(i) * self.model.sigma, k, [0.0, 1.0]);
        l[1]
    }

    fn mean(&self, i: usize) -> f64 {
        self.sum_y[i] / f64::from(self.k[i])
    }

    /// Adds one boot of commit `i` with raw value `value`.
    pub fn observe(&mut self, i: usize, value: f64) {
        self.boots[i] += 1;
        let Some(y) = self.model.admit(value) else {
            return;
        };
        if self.k[i] == 0 {
            let at = self.tested.partition_point(|&t| t < i);
            self.tested.insert(at, i);
        }
        self.k[i] += 1;
        self.sum_y[i] += y / self.model.sigma;
        self.recompute();
    }

    fn recompute(&mut self) {
        let m = &self.model;
        let (g, b) = (m.good / m.sigma, m.bad / m.sigma);
        let nb = m.n_baseline.max(1.0);
        let n = self.len();
        // Side densities with the first j tested commits good and the rest bad.
        let t = self.tested.len();
        let mut good = vec![Side::default(); t + 1];
        for j in 0..t {
            let c = self.tested[j];
            good[j + 1] = good[j];
            good[j + 1].add(f64::from(self.k[c]), self.mean(c) - g);
        }
        let mut bad = vec![Side::default(); t + 1];
        for j in (0..t).rev() {
            let c = self.tested[j];
            bad[j] = bad[j + 1];
            bad[j].add(f64::from(self.k[c]), self.mean(c) - b);
        }
        let seg: Vec<f64> = (0..=t)
            .map(|j| good[j].log_density(nb) + bad[j].log_density(nb))
            .collect();
        let prior = ((1.0 - NONE_PRIOR) / n as f64).ln();
        // Hypothesis h makes tested commits < h good: j = number of tested commits below h.
        let mut j = 0;
        for h in 0..n {
            while j < t && self.tested[j] < h {
                j += 1;
            }
            self.log_step[h] = prior + seg[j];
        }
        // NONE: each tested commit independently at one of the levels, centres uncertain.
        let ln_levels = (NONE_LEVELS.len() as f64).ln();
        self.log_none = NONE_PRIOR.ln()
            + self
                .tested
                .iter()
                .map(|&c| {
                    let v = 1.0 / f64::from(self.k[c]) + 1.0 / nb;
                    let y = self.mean(c);
                    logsumexp(NONE_LEVELS.iter().map(|lev| {
                        let at = g + lev * (b - g);
                        -0.5 * ((y - at).powi(2) / v + v.ln())
                    })) - ln_levels
                })
                .sum::<f64>();
    }

    /// Normalised probabilities: one per commit, then NONE.
    pub fn probabilities(&self) -> (Vec<f64>, f64) {
        let z = logsumexp(
            self.log_step
                .iter()
                .copied()
                .chain(std::iter::once(self.log_none)),
        );
        (
            self.log_step.iter().map(|l| (l - z).exp()).collect(),
            (self.log_none - z).exp(),
        )
    }

    /// Where the posterior stands against the target `confidence` (e.g. 0.95).
    pub fn standing(&self, confidence: f64) -> Standing {
        let (p, none) = self.probabilities();
        let (best, &pb) = p
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .expect("a posterior has at least one candidate");
        if pb >= confidence {
            Standing::Culprit(best, pb)
        } else if none >= confidence {
            Standing::NoSingleCulprit(none)
        } else {
            Standing::Open(best, pb)
        }
    }

    /// The commit to boot next: the most expected information per unit cost, where a commit not
    /// yet built costs `1 + build_cost` boots and a built one costs 1.
    pub fn choose(&self, build_cost: f64) -> usize {
        let (p, _none) = self.probabilities();
        let total: f64 = p.iter().sum();
        let mut q = 0.0;
        let mut best = (f64::NEG_INFINITY, self.len() - 1);
        for (i, pi) in p.iter().enumerate() {
            // P(commit i is bad | a single culprit) = mass of hypotheses h <= i.
            q += pi / total;
            let gain = q * (1.0 - q);
            let cost = if self.boots[i] > 0 {
                1.0
            } else {
                1.0 + build_cost
            };
            if gain / cost > best.0 {
                best = (gain / cost, i);
            }
        }
        best.1
    }
}

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
/// The likelihood is [`Posterior`]'s with the host's moves: the commits good under `h` share
/// the good centre and the others the bad one, each centre known only to σ/√n_baseline, and
/// every boot is moved by β·t, a linear drift of the host in boot order from the baselines'
/// mean boot time (prior sd 1/√[`TREND_PRIOR`] σ per
/// [`TREND_UNIT`](crate::sequential::TREND_UNIT) boots), and, with prior probability
/// [`STEP_PRIOR`], by a lasting step from one of [`STEP_GRID`] boot times on. The centres'
/// errors, β and the step's size are integrated out exactly (a Gaussian linear model), the
/// step's time by summing over the grid. So a commit tested good sharpens the good centre for
/// its neighbours, and every boot, judged by its side under `h`, tells how the host has moved.
/// (Judging each commit alone against the baselines let evidence saturate: in `firstbad sim`
/// 10% of `firstbad run`'s hunts at Δ/σ = 1 then spent hundreds of boots between two
/// neighbours and stated 40% where they were right 60% of the time. Without the trend, a host
/// slowing by 1σ per 100 boots made it name a wrong commit nine times in ten, claiming 93%.)
/// With every boot at the baselines' time the host's moves drop out and this is
/// [`Posterior`]'s likelihood exactly. NONE ("no single culprit", prior [`NONE_PRIOR`]) puts
/// each tested commit at its own level of [`NONE_LEVELS`], on the boots less the best fit's
/// move of the host, with the same price for fitting one.
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

/// Where a commit's boots sit between the good centre (0) and the bad centre (1), after the
/// host's move is taken out, with a 95% interval: for the confirmation, so that a culprit
/// that explains only part of the regression (two culprits, as with the CFQ queue-depth and
/// dirty-ratio changes that together made fsync take 20 s) is said to be part of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    /// The estimate.
    pub level: f64,
    /// The interval's lower end.
    pub lo: f64,
    /// The interval's upper end.
    pub hi: f64,
}

/// [`Level`] of the commit whose boots gave `e`, on the host that moved as `host` says
/// ([`dag_posterior_with_host`]). The interval carries the commit's own boots and both
/// centres' errors (1/n_baseline each): Var ≈ (1/k + ((1 − L)² + L²)/n_baseline) / (Δ/σ)².
/// `None` without an effect to measure against.
pub fn level(e: &Evidence, host: &HostMove) -> Option<Level> {
    if e.effect <= 0.0 || e.boots.is_empty() {
        return None;
    }
    let moved = |t: f64| {
        host.trend * t
            + host
                .step
                .map_or(0.0, |(at, size)| if t >= at { size } else { 0.0 })
    };
    let k = e.boots.len() as f64;
    let mean = e.boots.iter().map(|&(y, t)| y - moved(t)).sum::<f64>() / k;
    let l = mean / e.effect;
    let var = (1.0 / k + ((1.0 - l).powi(2) + l * l) / e.n_baseline) / (e.effect * e.effect);
    // The normal quantile of 0.975.
    let half = 1.959_963_984_540_054 * var.sqrt();
    Some(Level {
        level: l,
        lo: l - half,
        hi: l + half,
    })
}

/// What the [`Level`]s of a culprit and its parent say of the rest of the regression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rest {
    /// The culprit is clearly short of bad, by at least the floor: more comes after it.
    pub after: bool,
    /// The parent is clearly worse than good, by at least the floor: some comes before it.
    pub before: bool,
}

/// [`Rest`] from the parent's and the culprit's levels; `floor` is the smallest part that
/// counts, as a share of the regression (the hunt's `min_effect`, by [`Model::share_of`]:
/// with a regression of 1800%, 3% of it left over is still 9% slower, and counts).
/// A part must be outside the 95% interval and at least the floor by its estimate.
pub fn rest(parent: &Level, culprit: &Level, floor: f64) -> Rest {
    Rest {
        after: culprit.hi < 1.0 && 1.0 - culprit.level >= floor,
        before: parent.lo > 0.0 && parent.level >= floor,
    }
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

/// Build cost of a commit not built yet, in boots, for the posterior phase's choice (as for
/// [`Posterior::choose`]): an incremental kernel build takes about as long as a boot and run.
pub const REFINE_BUILD_COST: f64 = 1.0;

/// Classes holding less of the posterior than this are not split by booting an untested
/// member: a boot there moves at most this much probability. Their tested boundaries stay
/// candidates, so evidence against a hard verdict can still move the mass there.
pub const REFINE_MIN_CLASS: f64 = 0.001;

/// Untested members of one class weighed as the next boot, evenly spaced (a class of 8192
/// untested commits after a wrong early verdict would otherwise mean 8192 ancestry walks per
/// boot in a real hunt; 16 spaced members find a split within 1/16 of the class's mass). Even,
/// for [`spread`] to pick the same members in the hunt's order and the sim's.
pub const REFINE_SPREAD: usize = 16;

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

/// At most `k` of `members`, evenly spaced, first and last included when `k` ≥ 2; for an even
/// `k` symmetric, so a caller listing the members newest first (the hunt) gets the same ones
/// as one listing them oldest first (the sim).
pub fn spread(members: &[usize], k: usize) -> Vec<usize> {
    let n = members.len();
    if n <= k {
        return members.to_vec();
    }
    if k <= 1 {
        return members.get(n / 2).into_iter().copied().collect();
    }
    let step = |i: usize| i * (n - 1) / (k - 1);
    (0..k)
        .map(|i| {
            if 2 * i < k {
                members[step(i)]
            } else {
                members[n - 1 - step(k - 1 - i)]
            }
        })
        .collect()
}

/// Boots the posterior phase may spend on a range of `n` candidates: `per_bit` for each bit of
/// the range (⌈log2(n + 1)⌉), like the posterior search's budget. A verdict that went the wrong
/// way early on leaves that many halvings to redo, each needing its own boots; a fixed budget
/// (60 before) ran out in 38 of the 42 wrong answers at N = 16384, Δ/σ = 1 in `firstbad sim`.
pub fn refine_budget(per_bit: usize, n: usize) -> usize {
    per_bit * (usize::BITS - n.leading_zeros()).max(1) as usize
}

/// How much one more boot of a commit with `k` admitted boots adds to what its mean says,
/// relative to its first boot, when the centres are known to `n_baseline` boots: the precision
/// of its evidence is k·n/(k + n) ([`Model::mean_loglik`]), so the step from k to k + 1 adds
/// n²/((k + n)(k + 1 + n)). A commit booted far beyond the baselines teaches little more.
pub fn marginal_precision(k: usize, n_baseline: f64) -> f64 {
    let (k, n) = (k as f64, n_baseline.max(1.0));
    n * n / ((k + n) * (k + 1.0 + n))
}

/// What the posterior phase knows of one candidate commit, besides the posterior.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// It can give evidence: it builds, and it has booted or has not failed too often.
    pub usable: bool,
    /// It is built (a boot costs no build).
    pub built: bool,
    /// Its admitted boots so far.
    pub boots: usize,
}

/// The posterior phase's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RefineRule {
    /// Stop when one class holds this much of the posterior (0.95).
    pub confidence: f64,
    /// Stop after this many boots in the phase ([`refine_budget`]).
    pub budget: usize,
    /// Untested commits may be booted, and a class must be a single commit to stop (false
    /// with path-limited ranges, where a class is answered by its tested member).
    pub split: bool,
    /// Boots behind the baseline centres ([`crate::sequential::Model::n_baseline`]).
    pub n_baseline: f64,
}

/// One step of the posterior phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RefineStep {
    /// Boot this hypothesis's commit once more (or for the first time).
    Boot(usize),
    /// Done: the answer (the tested member of the most probable class, or else its first
    /// member in the caller's order: the hunt lists hypotheses newest first),
    /// the class's probability, and whether it reached the confidence.
    Stop {
        /// The hypothesis named.
        answer: usize,
        /// The probability of its class.
        mass: f64,
        /// Whether the rule's confidence was reached (not the budget or a lack of candidates).
        settled: bool,
    },
}

/// The posterior phase's next move, from the posterior `p` (one probability per hypothesis,
/// NONE left out), the tested hypotheses `tested` with their rows `bad_under` (see
/// [`dag_posterior`]) and the boots `spent` so far in the phase.
///
/// Pure, so that `firstbad run` and `firstbad sim` take the same steps. Stops when the most
/// probable class reaches the confidence (and is one commit when splitting), or the budget is
/// spent. Otherwise weighs every usable tested commit and, when splitting, up to
/// [`REFINE_SPREAD`] untested members of each class holding at least [`REFINE_MIN_CLASS`]:
/// the boot with the most expected information per unit of cost, q(1 − q) (q = P(commit bad),
/// from the row of a tested commit or `bad_mass` for an untested one) times
/// [`marginal_precision`], over 1 boot plus [`REFINE_BUILD_COST`] when not built. Every
/// hypothesis, not only the most probable class, so that a wrong hard verdict of the
/// bisection is re-tested when the evidence around it disagrees. Ties go to the lower index.
pub fn refine_step(
    p: &[f64],
    tested: &[usize],
    bad_under: &[Vec<bool>],
    spent: usize,
    rule: &RefineRule,
    candidate: impl Fn(usize) -> Candidate,
    bad_mass: impl Fn(usize) -> f64,
) -> RefineStep {
    assert_eq!(tested.len(), bad_under.len(), "one row per tested commit");
    let all = classes(p, bad_under);
    let (best, mass) = all
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0[0].cmp(&a.0[0])))
        .expect("a range has a candidate");
    let answer = best
        .iter()
        .copied()
        .find(|h| tested.contains(h))
        .unwrap_or(best[0]);
    let stop = |settled| RefineStep::Stop {
        answer,
        mass: *mass,
        settled,
    };
    if *mass >= rule.confidence && (best.len() == 1 || !rule.split) {
        return stop(true);
    }
    if spent >= rule.budget {
        return stop(false);
    }
    let total: f64 = p.iter().sum();
    let mut options: Vec<(usize, f64)> = tested
        .iter()
        .zip(bad_under)
        .map(|(&h, row)| {
            let q: f64 = p.iter().zip(row).filter(|(_, &b)| b).map(|(x, _)| x).sum();
            (h, q)
        })
        .collect();
    if rule.split {
        for (members, m) in &all {
            if *m < REFINE_MIN_CLASS {
                continue;
            }
            let open: Vec<usize> = members
                .iter()
                .copied()
                .filter(|h| !tested.contains(h) && candidate(*h).usable)
                .collect();
            options.extend(
                spread(&open, REFINE_SPREAD)
                    .into_iter()
                    .map(|h| (h, bad_mass(h))),
            );
        }
    }
    options.sort_by_key(|o| o.0);
    let mut choice: Option<(f64, usize)> = None;
    for (h, q) in options {
        let c = candidate(h);
        if !c.usable {
            continue;
        }
        let q = (q / total).clamp(0.0, 1.0);
        let cost = if c.built {
            1.0
        } else {
            1.0 + REFINE_BUILD_COST
        };
        let value = q * (1.0 - q) * marginal_precision(c.boots, rule.n_baseline) / cost;
        if choice.is_none_or(|(v, _)| value > v) {
            choice = Some((value, h));
        }
    }
    match choice {
        Some((v, h)) if v > 0.0 => RefineStep::Boot(h),
        _ => stop(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Direction;
    use crate::sequential::TREND_UNIT;

    /// Good at 35 ms, bad at 45 ms, 5% noise: Δ/σ ≈ 5, so one boot is nearly decisive.
    fn model() -> Model {
        Model {
            good: 35f64.ln(),
            bad: 45f64.ln(),
            sigma: 0.05,
            direction: Direction::LowerIsBetter,
            n_baseline: 8.0,
        }
    }

    #[test]
    fn a_level_is_where_the_boots_sit_between_the_centres_after_the_host_s_move() {
        // Δ/σ = 2, centres from 8 boots each; 4 boots at 1σ above good: half-way.
        let ev = |boots: Vec<(f64, f64)>| Evidence {
            k: boots.len(),
            above_good: boots.iter().map(|b| b.0).sum::<f64>() / boots.len() as f64,
            effect: 2.0,
            n_baseline: 8.0,
            at: 0.0,
            stt: 0.0,
            sty: 0.0,
            boots,
        };
        let still = HostMove {
            trend: 0.0,
            step: None,
        };
        let l = level(&ev(vec![(1.0, 0.0); 4]), &still).unwrap();
        // Var = (1/4 + (0.25 + 0.25)/8) / 4 = 0.078125; half-width 1.96 · 0.27951 = 0.54783.
        assert!((l.level - 0.5).abs() < 1e-12, "{l:?}");
        assert!((l.hi - l.level - 0.547_827).abs() < 1e-6, "{l:?}");
        assert!((l.level - l.lo - 0.547_827).abs() < 1e-6, "{l:?}");
        // The same commit on a host slowing 0.5σ per unit of time, and one that stepped 2σ at
        // time 1: the move is taken out.
        let times = [0.0, 1.0, 2.0, 3.0];
        let trending = ev(times.iter().map(|&t| (1.0 + 0.5 * t, t)).collect());
        let trend = HostMove {
            trend: 0.5,
            step: None,
        };
        assert!((level(&trending, &trend).unwrap().level - 0.5).abs() < 1e-12);
        let stepped = ev(times
            .iter()
            .map(|&t| (if t >= 1.0 { 3.0 } else { 1.0 }, t))
            .collect());
        let step = HostMove {
            trend: 0.0,
            step: Some((1.0, 2.0)),
        };
        assert!((level(&stepped, &step).unwrap().level - 0.5).abs() < 1e-12);
        // Nothing to measure against.
        let flat = Evidence {
            effect: 0.0,
            ..ev(vec![(1.0, 0.0)])
        };
        assert_eq!(level(&flat, &still), None);
    }

    #[test]
    fn clean_evidence_converges_on_the_culprit() {
        let (n, culprit) = (64, 37);
        let mut p = Posterior::new(n, model());
        for _ in 0..200 {
            if let Standing::Culprit(c, conf) = p.standing(0.95) {
                assert_eq!(c, culprit);
                assert!(conf >= 0.95);
                return;
            }
            let i = p.choose(1.0);
            p.observe(i, if i >= culprit { 45.0 } else { 35.0 });
        }
        panic!("no convergence: {:?}", p.standing(0.95));
    }

    #[test]
    fn the_first_choice_halves_the_range_and_built_commits_are_preferred() {
        let p = Posterior::new(64, model());
        let c = p.choose(0.0);
        assert!((30..=33).contains(&c), "{c}");
        let mut p = Posterior::new(64, model());
        // Half-way between good and bad: commit 40 stays near q = 0.5 and is already built.
        p.observe(40, (35.0f64 * 45.0).sqrt());
        assert_eq!(p.choose(1.0), 40);
    }

    #[test]
    fn halfway_commits_raise_no_single_culprit() {
        let mut p = Posterior::new(16, model());
        let mid = (35.0f64 * 45.0).sqrt();
        // Every tested commit sits exactly half-way, boot after boot: no step explains it.
        for i in [4, 8, 12] {
            for _ in 0..10 {
                p.observe(i, mid);
            }
        }
        assert!(
            matches!(p.standing(0.95), Standing::NoSingleCulprit(_)),
            "{:?}",
            p.standing(0.95)
        );
    }

    #[test]
    fn a_good_commit_sharpens_the_good_centre() {
        // Same boots of commit 10 (slightly towards bad), with and without 30 boots of a
        // commit 2 that sit where the baselines put good: the shared centre is then better
        // known, so commit 10's evidence for the hypotheses that call it bad grows.
        let v = 38.0;
        let mut a = Posterior::new(16, model());
        let mut b = Posterior::new(16, model());
        for _ in 0..30 {
            b.observe(2, 35.0);
        }
        for _ in 0..30 {
            a.observe(10, v);
            b.observe(10, v);
        }
        let bad_mass = |p: &Posterior| p.probabilities().0[3..=10].iter().sum::<f64>();
        assert!(
            bad_mass(&b) > bad_mass(&a),
            "{} vs {}",
            bad_mass(&b),
            bad_mass(&a)
        );
    }

    /// Baselines centred on boot 0, no trend seen yet.
    const FLAT: Timeline = Timeline {
        origin: 0.0,
        trend: 0.0,
    };

    /// Boots all at the baselines' time: no trend can show.
    fn at_origin(values: &[f64]) -> Vec<(f64, f64)> {
        values.iter().map(|&v| (v, 0.0)).collect()
    }

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

    #[test]
    fn classes_group_what_the_tests_cannot_tell_apart() {
        // Line of 6, tested 1 and 3: classes {0, 1}, {2, 3}, {4, 5}.
        let under = vec![
            (0..6).map(|h| h <= 1).collect::<Vec<bool>>(),
            (0..6).map(|h| h <= 3).collect(),
        ];
        let p = [0.1, 0.1, 0.2, 0.3, 0.2, 0.1];
        let c = classes(&p, &under);
        assert_eq!(c.len(), 3);
        assert_eq!(c[1].0, vec![2, 3]);
        assert!((c[1].1 - 0.5).abs() < 1e-12);
        assert_eq!(spread(&[1, 2, 3, 4, 5, 6, 7, 8, 9], 3), vec![1, 5, 9]);
        assert_eq!(spread(&[4, 7], 16), vec![4, 7]);
        // The same members in either order: 0..10 picking 4 gives 0, 3, 6, 9 both ways.
        let up: Vec<usize> = (0..10).collect();
        let down: Vec<usize> = (0..10).rev().collect();
        let mut a = spread(&up, 4);
        let mut b = spread(&down, 4);
        assert_eq!(a, vec![0, 3, 6, 9]);
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        assert_eq!(spread(&[4, 7, 9], 1), vec![7]);
    }

    #[test]
    fn the_refine_budget_and_a_boot_s_worth_follow_their_formulas() {
        // 60 per bit: N = 64 has 7 bits (64 = 0b1000000), N = 16384 has 15.
        assert_eq!(refine_budget(60, 64), 420);
        assert_eq!(refine_budget(60, 16384), 900);
        assert_eq!(refine_budget(60, 1), 60);
        // n²/((k + n)(k + 1 + n)) at n = 16: k = 0 gives 16/17, k = 16 gives 256/(32·33).
        assert!((marginal_precision(0, 16.0) - 16.0 / 17.0).abs() < 1e-12);
        assert!((marginal_precision(16, 16.0) - 256.0 / 1056.0).abs() < 1e-12);
    }

    fn rule(budget: usize) -> RefineRule {
        RefineRule {
            confidence: 0.95,
            budget,
            split: true,
            n_baseline: 8.0,
        }
    }

    /// A line of `n` with the given tested commits and boots: rows, evidence, posterior.
    fn line(n: usize, boots: &[(usize, &[f64])]) -> (Vec<usize>, Vec<Vec<bool>>, Vec<f64>) {
        let m = model();
        let (mut tested, mut under, mut evidence) = (Vec::new(), Vec::new(), Vec::new());
        for &(t, v) in boots {
            tested.push(t);
            under.push((0..n).map(|h| h <= t).collect::<Vec<bool>>());
            evidence.push(commit_evidence(&m, &FLAT, &at_origin(v)).unwrap());
        }
        let (p, _) = dag_posterior(n, &under, &evidence, None);
        (tested, under, p)
    }

    fn prefix(p: &[f64]) -> Vec<f64> {
        p.iter()
            .scan(0.0, |a, x| {
                *a += x;
                Some(*a)
            })
            .collect()
    }

    #[test]
    fn refine_stops_on_a_settled_posterior_or_the_budget() {
        // 9 clearly good, 10 clearly bad at Δ/σ ≈ 5: commit 10 is the culprit.
        let (tested, under, p) = line(16, &[(9, &[35.0, 35.2]), (10, &[45.0, 44.8])]);
        let open = |_| Candidate {
            usable: true,
            built: false,
            boots: 0,
        };
        let q = prefix(&p);
        let step = refine_step(&p, &tested, &under, 0, &rule(60), open, |h| q[h]);
        assert!(
            matches!(step, RefineStep::Stop { answer: 10, settled: true, mass } if mass > 0.95),
            "{step:?}"
        );
        // Only 10 tested (bad): 0..=10 cannot be told apart; an untested member is booted,
        // unless the budget is spent.
        let (tested, under, p) = line(16, &[(10, &[45.0])]);
        let q = prefix(&p);
        let step = refine_step(&p, &tested, &under, 0, &rule(60), open, |h| q[h]);
        assert!(matches!(step, RefineStep::Boot(h) if h < 10), "{step:?}");
        let step = refine_step(&p, &tested, &under, 60, &rule(60), open, |h| q[h]);
        assert!(
            matches!(
                step,
                RefineStep::Stop {
                    answer: 10,
                    settled: false,
                    ..
                }
            ),
            "{step:?}"
        );
    }

    #[test]
    fn refine_re_tests_a_verdict_the_evidence_around_it_doubts() {
        // 4 looked good once (a weak call), 5..=7 bad, 3 half-way, many boots: the doubt is
        // at 4, built and booted once, and that is what gets booted, not a new commit.
        let mid = (35.0f64 * 45.0).sqrt();
        let (tested, under, p) = line(
            8,
            &[
                (3, &[mid, 38.0]),
                (4, &[38.5]),
                (5, &[44.0, 45.0]),
                (7, &[45.0]),
            ],
        );
        let q = prefix(&p);
        let boots = [0, 0, 0, 2, 1, 2, 0, 1];
        let built = |h: usize| Candidate {
            usable: true,
            built: tested.contains(&h),
            boots: boots[h],
        };
        let step = refine_step(&p, &tested, &under, 0, &rule(60), built, |h| q[h]);
        let RefineStep::Boot(h) = step else {
            panic!("{step:?}")
        };
        assert!(tested.contains(&h) && (3..=4).contains(&h), "{h} {p:?}");
        // An unusable commit is never chosen.
        let none = |_| Candidate {
            usable: false,
            built: true,
            boots: 0,
        };
        let step = refine_step(&p, &tested, &under, 0, &rule(60), none, |h| q[h]);
        assert!(
            matches!(step, RefineStep::Stop { settled: false, .. }),
            "{step:?}"
        );
    }
}
