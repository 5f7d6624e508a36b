//! The strategies compared with `firstbad run`: the posterior search alone (research loops,
//! not the product), and the rules people use today (git bisect with repeats, a majority vote,
//! LKP's gap rule, Pinpoint).

use super::*;

/// Strategies compared. The four people use today take a repeat count: the published setting
/// is in [`Strategy::ALL`], and [`matched`] raises it until the strategy is as accurate as
/// `firstbad run`, to compare boots at equal accuracy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Research, not the product: the sequential classifier with the linear posterior search
    /// alone, staying on a commit while undecided (`firstbad run` is [`Strategy::FirstbadRun`]).
    ResearchPosterior,
    /// Research, not the product: the posterior search re-choosing after every boot.
    ResearchGreedy,
    /// What `firstbad run` does today: git bisect's choice, a sequential test per commit, a
    /// drift check of the good endpoint every 4 verdicts, a final re-test against the parent,
    /// and the DAG posterior's probability as the stated confidence.
    FirstbadRun,
    /// `firstbad run` with the posterior phase booting only the boundary (the most probable
    /// culprit and its parent): the alternative measured for issue 18, item 8; not in
    /// [`Strategy::ALL`].
    FirstbadRunBoundary,
    /// git bisect with `k` boots per commit: their mean against the midpoint of the endpoints'
    /// means. `k = 1` is plain git bisect; more is a wrapper script that averages.
    GitBisect(u32),
    /// `k` boots per commit (odd), majority vote against the endpoints' midpoint.
    Majority(u32),
    /// LKP's non-overlap gap rule, `k` runs a round (LKP's default is 3), at most `4k`.
    LkpGap(u32),
    /// Chromium Pinpoint's comparison, starting at `k` repeats (Pinpoint's is 10) and doubling
    /// up to `16k`.
    Pinpoint(u32),
}

impl Strategy {
    /// Every strategy, the research loops and `firstbad run` first; the others at their
    /// published repeat counts.
    pub const ALL: [Strategy; 7] = [
        Strategy::ResearchPosterior,
        Strategy::ResearchGreedy,
        Strategy::FirstbadRun,
        Strategy::GitBisect(1),
        Strategy::Majority(5),
        Strategy::LkpGap(LKP_RUNS),
        Strategy::Pinpoint(PINPOINT_START),
    ];

    /// Short name in tables: `git-bisect-1`, `majority-5`, `lkp-gap`, `pinpoint`; a repeat
    /// count other than the published one is appended, as in `pinpoint-40`.
    pub fn name(self) -> String {
        match self {
            Strategy::ResearchPosterior => "research-posterior".into(),
            Strategy::ResearchGreedy => "research-greedy".into(),
            Strategy::FirstbadRun => "firstbad-run".into(),
            Strategy::FirstbadRunBoundary => "firstbad-run-boundary".into(),
            Strategy::GitBisect(k) => format!("git-bisect-{k}"),
            Strategy::Majority(k) => format!("majority-{k}"),
            Strategy::LkpGap(LKP_RUNS) => "lkp-gap".into(),
            Strategy::LkpGap(k) => format!("lkp-gap-{k}"),
            Strategy::Pinpoint(PINPOINT_START) => "pinpoint".into(),
            Strategy::Pinpoint(k) => format!("pinpoint-{k}"),
        }
    }

    /// The strategy a [`Strategy::name`] names, any repeat count allowed (`majority-25`).
    pub fn from_name(name: &str) -> Option<Strategy> {
        if let Some(s) = Strategy::ALL.into_iter().find(|s| s.name() == name) {
            return Some(s);
        }
        if name == "firstbad-run-boundary" {
            return Some(Strategy::FirstbadRunBoundary);
        }
        let (family, k) = name.rsplit_once('-')?;
        let k: u32 = k.parse().ok().filter(|&k| k >= 1)?;
        match family {
            "git-bisect" => Some(Strategy::GitBisect(k)),
            "majority" if k % 2 == 1 => Some(Strategy::Majority(k)),
            "lkp-gap" => Some(Strategy::LkpGap(k)),
            "pinpoint" => Some(Strategy::Pinpoint(k)),
            _ => None,
        }
    }
}

/// LKP's runs per kernel.
pub(super) const LKP_RUNS: u32 = 3;
/// Pinpoint's first repeat count.
pub(super) const PINPOINT_START: u32 = 10;

/// Interleaved endpoint boots until the regression is confirmed (the model, the mean boot time
/// of the baselines, where its centres stand, and the endpoints' failed boots) or refuted.
pub(super) fn baselines(
    w: &mut World,
    cfg: &SequentialConfig,
) -> Option<(Model, f64, HostFailures)> {
    let n = w.n;
    let first = w.boots + 1;
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    loop {
        let order = if w.rng.gen::<bool>() { [0, n] } else { [n, 0] };
        for i in order {
            let v = w.measure(i, 1);
            if i == 0 {
                good.extend(v);
            } else {
                bad.extend(v);
            }
        }
        match assess_baselines(&good, &bad, Direction::LowerIsBetter, cfg) {
            BaselineOutcome::NeedMore => {}
            BaselineOutcome::Confirmed(m, _) => {
                let boots = w.boots + 1 - first;
                let host = HostFailures {
                    failed: boots - good.len() - bad.len(),
                    boots,
                };
                return Some((m, (first + w.boots) as f64 / 2.0, host));
            }
            BaselineOutcome::Refuted(_) => return None,
        }
    }
}

pub(super) fn firstbad(w: &mut World, greedy: bool) -> Outcome {
    let cfg = SequentialConfig {
        // The simulated effects go down to 5% (Δ/σ = 0.5 at 10% noise): a 2% floor.
        min_effect: 0.02,
        ..SequentialConfig::default()
    };
    // Target confidence of the search (issue 4's default).
    const CONFIDENCE: f64 = 0.95;
    // A build costs about one boot (incremental kernel build ~9 s, boot + workload longer).
    const BUILD_COST: f64 = 1.0;
    let n = w.n;
    let Some((model, _, _)) = baselines(w, &cfg) else {
        return NOTHING;
    };
    let mut post = Posterior::new(n, model);
    // Budget: far beyond what the search needs; reaching it reports the best guess.
    let budget = 60 * (usize::BITS - n.leading_zeros()) as usize;
    let mut current: Option<usize> = None;
    let mut taken = 0;
    loop {
        match post.standing(CONFIDENCE) {
            Standing::Culprit(c, p) => {
                return Outcome {
                    culprit: Some(c + 1),
                    confidence: Some(p),
                    partial: None,
                    culprits: vec![c + 1],
                    confirmed: None,
                }
            }
            Standing::NoSingleCulprit(p) => {
                return Outcome {
                    culprit: None,
                    confidence: Some(p),
                    partial: None,
                    culprits: Vec::new(),
                    confirmed: None,
                }
            }
            Standing::Open(c, p) if taken >= budget => {
                return Outcome {
                    culprit: Some(c + 1),
                    confidence: Some(p),
                    partial: None,
                    culprits: vec![c + 1],
                    confirmed: None,
                }
            }
            Standing::Open(..) => {}
        }
        let stay = current.filter(|&x| {
            !greedy && decide(post.commit_llr(x), post.boots(x) as usize, &cfg) == Call::NeedMore
        });
        let x = stay.unwrap_or_else(|| post.choose(BUILD_COST));
        current = Some(x);
        taken += 1;
        if let Some(v) = w.boot(x + 1) {
            post.observe(x, v);
        }
    }
}

pub(super) fn git_bisect(w: &mut World, k: usize) -> Outcome {
    let n = w.n;
    let g = mean(&w.measure(0, k));
    let b = mean(&w.measure(n, k));
    if b.partial_cmp(&g) != Some(std::cmp::Ordering::Greater) {
        return NOTHING;
    }
    let thr = (g + b) / 2.0;
    bisect(w, |w, mid| mean(&w.measure(mid, k)) > thr)
}

/// Plain binary search on the linear history with a hard verdict (true = bad).
pub(super) fn bisect(w: &mut World, mut is_bad: impl FnMut(&mut World, usize) -> bool) -> Outcome {
    let (mut lo, mut hi) = (0, w.n);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if is_bad(w, mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Outcome {
        culprit: Some(hi),
        confidence: None,
        partial: None,
        culprits: vec![hi],
        confirmed: None,
    }
}

pub(super) fn majority(w: &mut World, k: usize) -> Outcome {
    let n = w.n;
    let g = mean(&w.measure(0, k));
    let b = mean(&w.measure(n, k));
    if b.partial_cmp(&g) != Some(std::cmp::Ordering::Greater) {
        return NOTHING;
    }
    let thr = (g + b) / 2.0;
    bisect(w, |w, mid| {
        let v = w.measure(mid, k);
        2 * v.iter().filter(|&&x| x > thr).count() > v.len()
    })
}

pub(super) fn range(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

pub(super) fn lkp_gap(w: &mut World, runs: usize) -> Outcome {
    // LKP runs each kernel 3 times by default and adds runs when in doubt; 12 caps it. Here
    // `runs` a round, at most four rounds.
    let max_runs = 4 * runs;
    let n = w.n;
    let mut good = w.measure(0, runs);
    let mut bad = w.measure(n, runs);
    loop {
        let (_, gmax) = range(&good);
        let (bmin, _) = range(&bad);
        if bmin > gmax {
            break;
        }
        if good.len() >= max_runs {
            return NOTHING;
        }
        good.extend(w.measure(0, runs));
        bad.extend(w.measure(n, runs));
    }
    let (_, gmax) = range(&good);
    let (bmin, _) = range(&bad);
    let (gm, bm) = (mean(&good), mean(&bad));
    bisect(w, |w, mid| {
        let mut v = w.measure(mid, runs);
        loop {
            let (cmin, cmax) = range(&v);
            let above_good = cmin > gmax;
            let below_bad = cmax < bmin;
            if above_good != below_bad {
                return above_good;
            }
            if v.len() >= max_runs {
                let m = mean(&v);
                return (m - gm).abs() > (m - bm).abs();
            }
            v.extend(w.measure(mid, runs));
        }
    })
}

/// Pinpoint's verdict on two samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Comparison {
    Different,
    Same,
    Unknown,
}

pub(super) fn pinpoint_compare(a: &[f64], b: &[f64]) -> Comparison {
    // Pinpoint's thresholds: below 0.01 different, above 0.05 the same.
    let p = mann_whitney_u(a, b).p_value.min(ks_2samp(a, b).p_value);
    if p < 0.01 {
        Comparison::Different
    } else if p > 0.05 {
        Comparison::Same
    } else {
        Comparison::Unknown
    }
}

pub(super) fn pinpoint(w: &mut World, start: usize) -> Outcome {
    // Pinpoint starts at 10 repeats and doubles up to 160; here from `start`, four doublings.
    let max = 16 * start;
    let n = w.n;
    let mut good = w.measure(0, start);
    let mut bad = w.measure(n, start);
    loop {
        match pinpoint_compare(&good, &bad) {
            Comparison::Different => break,
            Comparison::Unknown if good.len() < max => {
                let k = good.len();
                good.extend(w.measure(0, k));
                bad.extend(w.measure(n, k));
            }
            _ => return NOTHING,
        }
    }
    bisect(w, |w, mid| {
        let mut v = w.measure(mid, start);
        loop {
            if good.len() < v.len() {
                let k = v.len() - good.len();
                good.extend(w.measure(0, k));
            }
            match pinpoint_compare(&good[..v.len().min(good.len())], &v) {
                Comparison::Different => return true,
                Comparison::Unknown if v.len() < max => {
                    let k = v.len();
                    v.extend(w.measure(mid, k));
                }
                _ => return false,
            }
        }
    })
}
