//! `firstbad sim`: firstbad's own classifier and search on synthetic noisy histories, side by
//! side with the strategies people use today.
//!
//! Pure code: every replicate draws from a `StdRng` seeded from (seed, cell, replicate), so a
//! table is reproducible bit for bit with the same seed and the same `rand` version.
//!
//! # Histories
//! A linear history of `n` candidate commits after a good endpoint. World index 0 is the good
//! endpoint, `1..=n` the candidates, `n` the bad endpoint. Each commit sits at a level between
//! good (0) and bad (1): one culprit (a step), no culprit (the "bad" endpoint is as good as good),
//! or two culprits (two half steps).
//!
//! # Noise (the metric is a latency, ~35 ms, higher is worse)
//! - `normal`: additive normal noise, σ = 10% of the good mean; bad is Δ/σ·10% slower.
//! - `lognormal`: multiplicative log-normal noise with σ = 0.5 on the log scale (a heavy right
//!   tail on the raw scale); bad is exp(Δ/σ·0.5) times slower.
//! - `outliers`: `normal`, plus 5% of boots slowed 2-5x (a boot where something else ran).
//! - `drift`: `normal`, plus a host drift of +1σ per 100 boots, whatever is booted.
//! - `step`: `normal`, plus a sudden move of the host: from a boot drawn uniformly from the
//!   first 300, every boot is 2σ slower (another job on the host, a firmware or BIOS change).
//! - `failed`: `normal`, plus 10% of boots that fail and give no value (they still cost a boot).
//!
//! # Strategies
//! - `firstbad`: [`crate::sequential`] baselines and per-commit SPRT (alpha = beta = 0.01), the
//!   [`crate::posterior`] search to confidence 0.95. A commit keeps being booted while its SPRT
//!   is undecided; then the posterior picks the next one.
//! - `firstbad-greedy`: the same posterior, re-choosing the commit after every boot.
//! - `git-bisect-1`: one boot per endpoint and per commit, bad when above the endpoints' midpoint.
//! - `majority-5`: five boots per endpoint and per commit, midpoint of the endpoint means,
//!   majority vote of the five boots.
//! - `lkp-gap`: our reading of LKP's rule: three boots per endpoint (up to 12 until their ranges
//!   do not overlap), a commit is bad when its boots do not overlap good's range, good when they
//!   do not overlap bad's; otherwise three more boots up to 12, then the nearer mean.
//! - `pinpoint`: Chromium Pinpoint's comparison: p = min(Mann-Whitney p, KS p); p < 0.01 is
//!   different, p > 0.05 the same, otherwise double the repeats (10, 20, ..., 160); at 160 the
//!   same. Endpoints first (no difference: no culprit); each commit is compared with the good
//!   endpoint's boots, extended to the same count.

mod run;

use crate::config::Direction;
use crate::posterior::{Posterior, Standing};
use crate::sequential::{
    assess_baselines, decide, BaselineOutcome, Call, HostFailures, Model, SequentialConfig,
};
use crate::stats::{ks_2samp, mann_whitney_u, mean};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Good endpoint's mean, in ms (the fsync p50 measured in the qemu set-up).
const BASE: f64 = 35.0;
/// Relative boot-to-boot noise of the additive noise kinds (10%).
const SIGMA_REL: f64 = 0.1;
/// Log-scale σ of the log-normal kind: 0.5 gives a long right tail (p99/p50 ≈ 3.2).
const SIGMA_LN: f64 = 0.5;
/// Share of outlier boots, and the share of failed boots, of those kinds.
const OUTLIER_SHARE: f64 = 0.05;
const FAIL_SHARE: f64 = 0.1;
/// Drift per boot in units of σ: one σ per 100 boots.
const DRIFT_PER_BOOT: f64 = 0.01;
/// The step of the `step` kind, in σ, and the last boot it may start at.
const STEP_SIGMAS: f64 = 2.0;
const STEP_WITHIN: usize = 300;
/// Attempts before a strategy gives up getting one value of a commit (failed boots).
const MAX_ATTEMPTS: usize = 20;

/// Kinds of boot-to-boot noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Noise {
    /// Additive normal noise.
    Normal,
    /// Multiplicative log-normal noise with a heavy right tail.
    LogNormal,
    /// Normal plus 5% outlier boots.
    Outliers,
    /// Normal plus slow host drift.
    Drift,
    /// Normal plus 10% failed boots.
    Failed,
    /// Normal plus a sudden, lasting move of the host (last, so that the other kinds keep
    /// their discriminants and with them their seeds and histories).
    Step,
}

impl Noise {
    /// Short name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Noise::Normal => "normal",
            Noise::LogNormal => "lognormal",
            Noise::Outliers => "outliers",
            Noise::Drift => "drift",
            Noise::Step => "step",
            Noise::Failed => "failed",
        }
    }
}

/// Shapes of history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One commit causes the whole regression.
    OneCulprit,
    /// Nothing regresses: the endpoints are alike.
    NoCulprit,
    /// Two commits each cause half of it.
    TwoCulprits,
}

impl Shape {
    /// Short name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Shape::OneCulprit => "one",
            Shape::NoCulprit => "none",
            Shape::TwoCulprits => "two",
        }
    }
}

/// One cell of the table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    /// Candidate commits.
    pub n: usize,
    /// Effect over noise Δ/σ.
    pub d: f64,
    /// Noise kind.
    pub noise: Noise,
    /// History shape.
    pub shape: Shape,
}

/// Strategies compared. The four people use today take a repeat count: the published setting
/// is in [`Strategy::ALL`], and [`matched`] raises it until the strategy is as accurate as
/// `firstbad run`, to compare boots at equal accuracy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// firstbad: sequential classifier + posterior search, staying on a commit while undecided.
    Firstbad,
    /// firstbad's posterior, re-choosing after every boot.
    FirstbadGreedy,
    /// What `firstbad run` does today: git bisect's choice, a sequential test per commit, a
    /// drift check of the good endpoint every 4 verdicts, a final re-test against the parent,
    /// and the DAG posterior's probability as the stated confidence.
    FirstbadRun,
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
    /// Every strategy, firstbad first; the others at their published repeat counts.
    pub const ALL: [Strategy; 7] = [
        Strategy::Firstbad,
        Strategy::FirstbadGreedy,
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
            Strategy::Firstbad => "firstbad".into(),
            Strategy::FirstbadGreedy => "firstbad-greedy".into(),
            Strategy::FirstbadRun => "firstbad-run".into(),
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
const LKP_RUNS: u32 = 3;
/// Pinpoint's first repeat count.
const PINPOINT_START: u32 = 10;

/// A synthetic history being measured: levels, noise, and the cost so far.
pub struct World {
    n: usize,
    culprits: Vec<usize>,
    shape: Shape,
    d: f64,
    noise: Noise,
    rng: StdRng,
    boots: usize,
    builds: usize,
    built: Vec<bool>,
    /// The boot from which the host is slower (`step` noise).
    step_at: usize,
    /// The phase of `firstbad run` now booting, and the boots spent in each (see [`PHASES`]).
    phase: usize,
    by_phase: [usize; PHASES.len()],
    /// Verdicts of `firstbad run`'s bisection on commits that are plainly good or bad (not
    /// between two culprits), and how many of them were wrong.
    verdicts: [usize; 2],
}

/// `firstbad run`'s phases, as `firstbad sim` accounts its boots: the endpoints' baselines, the
/// bisection with a sequential test per commit, the posterior phase (drift checks included),
/// and the re-test of the culprit against its parent. Other strategies count every boot in the
/// first.
pub const PHASES: [&str; 4] = ["baselines", "bisection", "posterior", "re-test"];

fn normal<R: Rng>(rng: &mut R) -> f64 {
    // Box-Muller; 1 - u keeps the logarithm finite.
    let u: f64 = 1.0 - rng.gen::<f64>();
    let v: f64 = rng.gen();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

impl World {
    /// Draws a history for `cell` from `rng`.
    pub fn new(cell: &Cell, mut rng: StdRng) -> World {
        let n = cell.n;
        let culprits = match cell.shape {
            Shape::OneCulprit => vec![rng.gen_range(1..=n)],
            Shape::NoCulprit => vec![],
            Shape::TwoCulprits => {
                let a = rng.gen_range(1..=n);
                let mut b = rng.gen_range(1..=n);
                while b == a {
                    b = rng.gen_range(1..=n);
                }
                vec![a.min(b), a.max(b)]
            }
        };
        // Drawn only for the step kind, so the other kinds' histories stay as they were.
        let step_at = if cell.noise == Noise::Step {
            rng.gen_range(1..=STEP_WITHIN)
        } else {
            usize::MAX
        };
        World {
            n,
            culprits,
            shape: cell.shape,
            d: cell.d,
            noise: cell.noise,
            rng,
            boots: 0,
            builds: 0,
            built: vec![false; n + 1],
            step_at,
            phase: 0,
            by_phase: [0; PHASES.len()],
            verdicts: [0; 2],
        }
    }

    /// The world, leaving an empty one in its place (while a simulated host holds it).
    fn take(&mut self) -> World {
        let empty = World {
            n: 0,
            culprits: Vec::new(),
            shape: self.shape,
            d: 0.0,
            noise: self.noise,
            rng: StdRng::seed_from_u64(0),
            boots: 0,
            builds: 0,
            built: Vec::new(),
            step_at: 0,
            phase: 0,
            by_phase: [0; PHASES.len()],
            verdicts: [0; 2],
        };
        std::mem::replace(self, empty)
    }

    fn level(&self, i: usize) -> f64 {
        match self.shape {
            Shape::NoCulprit => 0.0,
            Shape::OneCulprit => f64::from(u8::from(i >= self.culprits[0])),
            Shape::TwoCulprits => {
                0.5 * f64::from(u8::from(i >= self.culprits[0]))
                    + 0.5 * f64::from(u8::from(i >= self.culprits[1]))
            }
        }
    }

    /// Boots commit `i` (0 = good endpoint, `n` = bad endpoint) once: its value, or None when
    /// the boot failed. Counts the boot, and the build the first time.
    pub fn boot(&mut self, i: usize) -> Option<f64> {
        self.boots += 1;
        self.by_phase[self.phase] += 1;
        if !self.built[i] {
            self.built[i] = true;
            self.builds += 1;
        }
        let lev = self.level(i);
        let z = normal(&mut self.rng);
        let additive = |z: f64| {
            let v = BASE * (1.0 + self.d * SIGMA_REL * lev) + BASE * SIGMA_REL * z;
            // A latency stays positive: clamp the far left tail (z < -8 at this σ).
            v.max(0.01 * BASE)
        };
        match self.noise {
            Noise::Normal => Some(additive(z)),
            Noise::LogNormal => Some(BASE * (self.d * SIGMA_LN * lev + SIGMA_LN * z).exp()),
            Noise::Outliers => {
                let v = additive(z);
                if self.rng.gen::<f64>() < OUTLIER_SHARE {
                    Some(v * self.rng.gen_range(2.0..5.0))
                } else {
                    Some(v)
                }
            }
            Noise::Drift => {
                Some(additive(z) + BASE * SIGMA_REL * DRIFT_PER_BOOT * self.boots as f64)
            }
            Noise::Step => {
                let stepped = if self.boots >= self.step_at {
                    STEP_SIGMAS
                } else {
                    0.0
                };
                Some(additive(z) + BASE * SIGMA_REL * stepped)
            }
            Noise::Failed => {
                if self.rng.gen::<f64>() < FAIL_SHARE {
                    None
                } else {
                    Some(additive(z))
                }
            }
        }
    }

    /// `k` values of commit `i`, retrying failed boots (at most [`MAX_ATTEMPTS`] per value).
    fn measure(&mut self, i: usize, k: usize) -> Vec<f64> {
        let mut out = Vec::with_capacity(k);
        for _ in 0..k {
            for _ in 0..MAX_ATTEMPTS {
                if let Some(v) = self.boot(i) {
                    out.push(v);
                    break;
                }
            }
        }
        out
    }
}

/// What a strategy concluded about one history.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// The commit named as first bad (world index), or None for "no (single) culprit".
    pub culprit: Option<usize>,
    /// The confidence claimed for it, when the strategy states one.
    pub confidence: Option<f64>,
    /// Whether the strategy said the named commit is only part of the regression (its parent
    /// clearly above good, or itself clearly short of bad), when it says so at all.
    pub partial: Option<bool>,
}

/// No culprit named, no confidence claimed.
const NOTHING: Outcome = Outcome {
    culprit: None,
    confidence: None,
    partial: None,
};

/// Interleaved endpoint boots until the regression is confirmed (the model, the mean boot time
/// of the baselines, where its centres stand, and the endpoints' failed boots) or refuted.
fn baselines(w: &mut World, cfg: &SequentialConfig) -> Option<(Model, f64, HostFailures)> {
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

fn firstbad(w: &mut World, greedy: bool) -> Outcome {
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
                }
            }
            Standing::NoSingleCulprit(p) => {
                return Outcome {
                    culprit: None,
                    confidence: Some(p),
                    partial: None,
                }
            }
            Standing::Open(c, p) if taken >= budget => {
                return Outcome {
                    culprit: Some(c + 1),
                    confidence: Some(p),
                    partial: None,
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

fn git_bisect(w: &mut World, k: usize) -> Outcome {
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
fn bisect(w: &mut World, mut is_bad: impl FnMut(&mut World, usize) -> bool) -> Outcome {
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
    }
}

fn majority(w: &mut World, k: usize) -> Outcome {
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

fn range(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

fn lkp_gap(w: &mut World, runs: usize) -> Outcome {
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
enum Comparison {
    Different,
    Same,
    Unknown,
}

fn pinpoint_compare(a: &[f64], b: &[f64]) -> Comparison {
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

fn pinpoint(w: &mut World, start: usize) -> Outcome {
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

/// Runs `strategy` on one history drawn for `cell` from `seed`; the outcome, boots and builds.
pub fn run_one(strategy: Strategy, cell: &Cell, seed: u64) -> (Outcome, World) {
    let mut w = World::new(cell, StdRng::seed_from_u64(seed));
    let o = match strategy {
        Strategy::Firstbad => firstbad(&mut w, false),
        Strategy::FirstbadGreedy => firstbad(&mut w, true),
        Strategy::FirstbadRun => run::firstbad_run(&mut w),
        Strategy::GitBisect(k) => git_bisect(&mut w, k as usize),
        Strategy::Majority(k) => majority(&mut w, k as usize),
        Strategy::LkpGap(k) => lkp_gap(&mut w, k as usize),
        Strategy::Pinpoint(k) => pinpoint(&mut w, k as usize),
    };
    (o, w)
}

/// Figures of one strategy over the replicates of one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct CellResult {
    /// The cell.
    pub cell: Cell,
    /// The strategy.
    pub strategy: Strategy,
    /// Replicates run.
    pub replicates: usize,
    /// Share that named a true culprit (no-culprit histories: that named none).
    pub accuracy: f64,
    /// Share that named a commit that is not a culprit (the false-culprit rate when there is
    /// no culprit).
    pub wrong: f64,
    /// Share that named no commit.
    pub no_culprit: f64,
    /// Mean boots per history (failed boots included).
    pub boots_mean: f64,
    /// 95th percentile of boots.
    pub boots_p95: f64,
    /// Mean builds (distinct commits booted, endpoints included).
    pub builds_mean: f64,
    /// 95th percentile of builds.
    pub builds_p95: f64,
    /// Mean claimed confidence when a culprit was named, if the strategy claims one.
    pub claimed: Option<f64>,
    /// Observed accuracy among the runs that named a culprit.
    pub observed: Option<f64>,
    /// Among the runs that named a true culprit, and among those that named a wrong commit,
    /// the share that said the commit is only part of the regression (if the strategy says
    /// so at all): on two-culprit histories the first finds the second culprit, on one-culprit
    /// histories it is a false alarm, and the second catches a wrong answer.
    pub partial: Option<(f64, f64)>,
    /// `firstbad run`'s mean boots in each of its [`PHASES`] (None for other strategies).
    pub phases: Option<[f64; PHASES.len()]>,
    /// `firstbad run`'s bisection: the share of its verdicts on plainly good or bad commits that
    /// were wrong, against the sequential test's nominal alpha and beta (None for other
    /// strategies, or when it gave none).
    pub verdicts_wrong: Option<f64>,
}

fn p95(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    // Nearest-rank 95th percentile.
    let k = ((0.95 * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[k - 1]
}

/// What [`run_cell`] keeps of one replicate: its outcome, whether it was right, and its costs.
struct Replicate {
    outcome: Outcome,
    /// The named commit is a true culprit.
    right: bool,
    boots: usize,
    builds: usize,
    by_phase: [usize; PHASES.len()],
    verdicts: [usize; 2],
}

/// Runs one replicate drawn from `seed` and keeps its figures.
fn replicate(strategy: Strategy, cell: &Cell, seed: u64) -> Replicate {
    let (outcome, w) = run_one(strategy, cell, seed);
    Replicate {
        right: outcome.culprit.is_some_and(|c| w.culprits.contains(&c)),
        outcome,
        boots: w.boots,
        builds: w.builds,
        by_phase: w.by_phase,
        verdicts: w.verdicts,
    }
}

/// The replicates drawn from `seeds`, in their order, run on `jobs` threads. Each replicate
/// owns its random stream, so which thread ran it changes nothing: the figures are the same
/// bit for bit whatever `jobs` is (they are summed in replicate order afterwards).
fn replicates_of(strategy: Strategy, cell: &Cell, seeds: &[u64], jobs: usize) -> Vec<Replicate> {
    if jobs <= 1 || seeds.len() <= 1 {
        return seeds
            .iter()
            .map(|&s| replicate(strategy, cell, s))
            .collect();
    }
    let next = AtomicUsize::new(0);
    let mut out: Vec<Option<Replicate>> = seeds.iter().map(|_| None).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..jobs.min(seeds.len()))
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        // Replicates are handed out one at a time: their costs vary tenfold
                        // (a hunt that hits the boot budget against one decided in 60 boots).
                        let r = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&s) = seeds.get(r) else { break };
                        mine.push((r, replicate(strategy, cell, s)));
                    }
                    mine
                })
            })
            .collect();
        for w in workers {
            match w.join() {
                Ok(done) => {
                    for (r, x) in done {
                        out[r] = Some(x);
                    }
                }
                // A replicate's panic is a bug in the simulated strategy: show it as it was.
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    out.into_iter()
        .map(|x| x.expect("every index below seeds.len() is handed out once"))
        .collect()
}

/// Threads [`run_cell`] uses: one per core.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `replicates` histories of `cell` with `strategy` on every core; see [`run_cell_on`].
pub fn run_cell(strategy: Strategy, cell: &Cell, replicates: usize, seed: u64) -> CellResult {
    run_cell_on(strategy, cell, replicates, seed, default_jobs())
}

/// Runs `replicates` histories of `cell` with `strategy` on `jobs` threads; replicate `r` uses
/// seed `seed ^ hash(cell) ^ r`, the same histories for every strategy and every `jobs`.
pub fn run_cell_on(
    strategy: Strategy,
    cell: &Cell,
    replicates: usize,
    seed: u64,
    jobs: usize,
) -> CellResult {
    run_cell_sampled(strategy, cell, replicates, seed, jobs).0
}

/// One replicate as [`matched`]'s standard error resamples it: right or not (as
/// [`CellResult::accuracy`] counts it) and its boots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Counted in the accuracy.
    pub right: bool,
    /// Boots it took.
    pub boots: usize,
}

/// [`run_cell_on`], with each replicate's [`Sample`] in replicate order.
fn run_cell_sampled(
    strategy: Strategy,
    cell: &Cell,
    replicates: usize,
    seed: u64,
    jobs: usize,
) -> (CellResult, Vec<Sample>) {
    let cell_key = (cell.n as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((cell.d * 1000.0) as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(cell.noise as u64 * 31 + cell.shape as u64);
    let seeds: Vec<u64> = (0..replicates)
        .map(|r| seed ^ cell_key ^ (r as u64).wrapping_mul(0xD1B5_4A32_D192_ED03))
        .collect();
    let (mut right, mut wrong, mut none) = (0usize, 0usize, 0usize);
    let mut builds = Vec::new();
    let mut by_phase = [0usize; PHASES.len()];
    let mut verdicts = [0usize; 2];
    let (mut claimed, mut named_right, mut named) = (0.0, 0usize, 0usize);
    let mut claims = false;
    // Runs that said "partial", among right and wrong answers.
    let (mut partial, mut says_partial) = ([0usize; 2], false);
    let mut samples = Vec::with_capacity(replicates);
    for x in replicates_of(strategy, cell, &seeds, jobs) {
        let o = x.outcome;
        // Right as the accuracy counts it: a true culprit named, or on a no-culprit history
        // none named.
        let counted = x.right || (o.culprit.is_none() && cell.shape == Shape::NoCulprit);
        right += usize::from(counted);
        samples.push(Sample {
            right: counted,
            boots: x.boots,
        });
        builds.push(x.builds as f64);
        for (total, k) in by_phase.iter_mut().zip(x.by_phase) {
            *total += k;
        }
        verdicts[0] += x.verdicts[0];
        verdicts[1] += x.verdicts[1];
        match o.culprit {
            None => none += 1,
            Some(_) => {
                named += 1;
                let ok = x.right;
                if ok {
                    named_right += 1;
                } else {
                    wrong += 1;
                }
                if let Some(p) = o.confidence {
                    claims = true;
                    claimed += p;
                }
                if let Some(part) = o.partial {
                    says_partial = true;
                    partial[usize::from(!ok)] += usize::from(part);
                }
            }
        }
    }
    let f = |k: usize| k as f64 / replicates as f64;
    let boots: Vec<f64> = samples.iter().map(|x| x.boots as f64).collect();
    let result = CellResult {
        cell: *cell,
        strategy,
        replicates,
        accuracy: f(right),
        wrong: f(wrong),
        no_culprit: f(none),
        boots_mean: mean(&boots),
        boots_p95: p95(boots),
        builds_mean: mean(&builds),
        builds_p95: p95(builds),
        claimed: (claims && named > 0).then(|| claimed / named as f64),
        observed: (claims && named > 0).then(|| named_right as f64 / named as f64),
        partial: says_partial.then(|| {
            let share = |k: usize, of: usize| if of == 0 { 0.0 } else { k as f64 / of as f64 };
            (
                share(partial[0], named_right),
                share(partial[1], named - named_right),
            )
        }),
        phases: (strategy == Strategy::FirstbadRun).then(|| by_phase.map(f)),
        verdicts_wrong: (strategy == Strategy::FirstbadRun && verdicts[0] > 0)
            .then(|| verdicts[1] as f64 / verdicts[0] as f64),
    };
    (result, samples)
}

/// The cells of the quick run (test suite) or the full run.
pub fn cells(full: bool) -> Vec<Cell> {
    let mut v = Vec::new();
    let (ns, ds): (&[usize], &[f64]) = if full {
        (&[64, 1024, 16384], &[0.5, 1.0, 2.0])
    } else {
        (&[64], &[1.0])
    };
    // Every noise kind at N = 1024 (the middle size); every size with normal noise. The full
    // cross at N = 16384 would take hours on two cores for little more information.
    for noise in [
        Noise::Normal,
        Noise::LogNormal,
        Noise::Outliers,
        Noise::Drift,
        Noise::Step,
        Noise::Failed,
    ] {
        for &n in ns {
            if full && noise != Noise::Normal && n != 1024 {
                continue;
            }
            for &d in ds {
                v.push(Cell {
                    n,
                    d,
                    noise,
                    shape: Shape::OneCulprit,
                });
            }
        }
    }
    let shape_n = if full { 1024 } else { 64 };
    v.push(Cell {
        n: shape_n,
        d: 1.0,
        noise: Noise::Normal,
        shape: Shape::NoCulprit,
    });
    for &d in if full { &[1.0, 2.0][..] } else { &[1.0][..] } {
        v.push(Cell {
            n: shape_n,
            d,
            noise: Noise::Normal,
            shape: Shape::TwoCulprits,
        });
    }
    v
}

/// Replicates per cell of the full run (issue 4 asks for at least 1000).
pub const FULL_REPLICATES: usize = 1000;
/// Replicates per cell of the quick run.
pub const QUICK_REPLICATES: usize = 100;

/// Which cells and strategies of a run to compute; an empty list lets everything through.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Candidate counts N to keep.
    pub n: Vec<usize>,
    /// Effects Δ/σ to keep.
    pub d: Vec<f64>,
    /// Noise kinds to keep, by [`Noise::name`].
    pub noise: Vec<String>,
    /// History shapes to keep, by [`Shape::name`].
    pub shape: Vec<String>,
    /// Strategies to keep, by [`Strategy::name`].
    pub strategy: Vec<String>,
}

impl Filter {
    /// The strategies named (any repeat count, see [`Strategy::from_name`]; unknown names are
    /// dropped), or [`Strategy::ALL`] when none is.
    pub fn strategies(&self) -> Vec<Strategy> {
        if self.strategy.is_empty() {
            Strategy::ALL.to_vec()
        } else {
            self.strategy
                .iter()
                .filter_map(|n| Strategy::from_name(n))
                .collect()
        }
    }

    /// Whether `cell` passes the N, Δ/σ, noise and shape lists.
    pub fn keeps_cell(&self, cell: &Cell) -> bool {
        any(&self.n, |&n| n == cell.n)
            && any(&self.d, |&d| d == cell.d)
            && any(&self.noise, |x| x == cell.noise.name())
            && any(&self.shape, |x| x == cell.shape.name())
    }

    fn keeps(&self, cell: &Cell, s: Strategy) -> bool {
        self.keeps_cell(cell) && any(&self.strategy, |x| *x == s.name())
    }
}

/// True when `v` is empty (no filter) or an element passes.
fn any<T>(v: &[T], ok: impl Fn(&T) -> bool) -> bool {
    v.is_empty() || v.iter().any(ok)
}

/// Runs every strategy on every cell of the quick or full run that `filter` keeps, on `jobs`
/// threads; `progress` sees each result as it completes (cells in order, strategies in
/// [`Strategy::ALL`] order).
pub fn table(
    full: bool,
    replicates: Option<usize>,
    seed: u64,
    jobs: usize,
    filter: &Filter,
    mut progress: impl FnMut(&CellResult),
) -> Vec<CellResult> {
    let reps = replicates.unwrap_or(if full {
        FULL_REPLICATES
    } else {
        QUICK_REPLICATES
    });
    let strategies = filter.strategies();
    let mut out = Vec::new();
    for cell in cells(full) {
        for &s in &strategies {
            if !filter.keeps(&cell, s) {
                continue;
            }
            let r = run_cell_on(s, &cell, reps, seed, jobs);
            progress(&r);
            out.push(r);
        }
    }
    out
}

/// A strategy family (its repeat count to a strategy) and the repeat counts to try.
pub type Ladder = (fn(u32) -> Strategy, &'static [u32]);

/// Repeat counts [`matched`] tries, per strategy family, smallest (the published one) first.
/// Majority votes stay odd; Pinpoint and LKP grow by about √2 a step. Averaging git bisect,
/// the one that gets there, is finer where it does (Δ/σ = 1 needs 30 to 50), so that the
/// interpolation in [`Matched::boots_at_equal_accuracy`] spans a few points of accuracy.
pub const MATCH_LADDERS: [Ladder; 4] = [
    (
        Strategy::GitBisect,
        &[
            1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 28, 32, 36, 40, 48, 56, 64, 96, 128,
        ],
    ),
    (
        Strategy::Majority,
        &[5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129],
    ),
    (Strategy::LkpGap, &[3, 4, 6, 8, 12, 16, 24, 32]),
    (Strategy::Pinpoint, &[10, 14, 20, 28, 40, 56, 80, 112]),
];

/// One strategy family made as accurate as `firstbad run` by raising its repeat count.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    /// `firstbad run` on the cell: the accuracy to reach, and its boots.
    pub firstbad: CellResult,
    /// The family at the smallest repeat count that reached that accuracy, or at the largest
    /// tried when none did.
    pub at: CellResult,
    /// The repeat count one step smaller, when there is one.
    pub below: Option<CellResult>,
    /// Standard error of `firstbad run`'s share of those boots, when the family reached its
    /// accuracy (see [`share_standard_error`]).
    pub share_se: Option<f64>,
}

impl Matched {
    /// Whether the family reached `firstbad run`'s accuracy.
    pub fn reached(&self) -> bool {
        self.at.accuracy >= self.firstbad.accuracy
    }

    /// The family's mean boots at exactly `firstbad run`'s accuracy, interpolated linearly
    /// between the two repeat counts that bracket it; `None` when it was not reached.
    pub fn boots_at_equal_accuracy(&self) -> Option<f64> {
        if !self.reached() {
            return None;
        }
        Some(interpolate(
            self.firstbad.accuracy,
            (self.at.accuracy, self.at.boots_mean),
            self.below.as_ref().map(|lo| (lo.accuracy, lo.boots_mean)),
        ))
    }
}

/// Boots at accuracy `target`, linear between the rung `hi` = (accuracy, boots) and the rung
/// below it, `lo`; `hi`'s boots when there is no rung below or no slope between them. Never
/// outside the two rungs: the ladder says nothing beyond them.
fn interpolate(target: f64, hi: (f64, f64), lo: Option<(f64, f64)>) -> f64 {
    match lo {
        Some(lo) if hi.0 > lo.0 => {
            let t = (target - lo.0) / (hi.0 - lo.0);
            lo.1 + t.clamp(0.0, 1.0) * (hi.1 - lo.1)
        }
        _ => hi.1,
    }
}

/// Resamples [`share_standard_error`] draws: the error of a standard error from 2000
/// bootstrap resamples is about 1.6% of it (1/√(2·2000)), far below the second digit shown.
pub const SHARE_RESAMPLES: usize = 2000;

/// Bootstrap standard error of `firstbad run`'s share of the boots at equal accuracy.
///
/// The three runs share their histories (replicate `r` of every strategy is the same history),
/// so a resample draws replicate indices once and takes all three runs' replicates at them:
/// a history hard for `firstbad run` is hard for the others too, and the share's error is
/// smaller than the accuracies' errors taken apart would say. Each resample recomputes the
/// three accuracies and mean boots, interpolates as [`Matched::boots_at_equal_accuracy`]
/// does, and takes the share; the result is the standard deviation of the shares. Seeded, so
/// a table reproduces.
pub fn share_standard_error(
    firstbad: &[Sample],
    at: &[Sample],
    below: Option<&[Sample]>,
    resamples: usize,
    seed: u64,
) -> f64 {
    let n = firstbad.len();
    assert!(
        n > 0 && at.len() == n && below.is_none_or(|b| b.len() == n),
        "one sample per history, the same histories in every run"
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let mut idx = vec![0usize; n];
    let figures = |v: &[Sample], idx: &[usize]| {
        let right = idx.iter().filter(|&&i| v[i].right).count();
        let boots: usize = idx.iter().map(|&i| v[i].boots).sum();
        (right as f64 / n as f64, boots as f64 / n as f64)
    };
    let shares: Vec<f64> = (0..resamples)
        .map(|_| {
            for i in idx.iter_mut() {
                *i = rng.gen_range(0..n);
            }
            let (fb_acc, fb_boots) = figures(firstbad, &idx);
            let equal = interpolate(fb_acc, figures(at, &idx), below.map(|b| figures(b, &idx)));
            fb_boots / equal
        })
        .collect();
    let m = mean(&shares);
    let var = shares.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (resamples - 1) as f64;
    var.sqrt()
}

/// Boots at equal accuracy (issue 4's target): runs `firstbad run` on `cell`, then raises each
/// family's repeat count along [`MATCH_LADDERS`] until it is at least as accurate on the same
/// histories, on `jobs` threads. `progress` sees every result as it completes.
pub fn matched(
    cell: &Cell,
    replicates: usize,
    seed: u64,
    jobs: usize,
    mut progress: impl FnMut(&CellResult),
) -> Vec<Matched> {
    let (firstbad, fb_samples) =
        run_cell_sampled(Strategy::FirstbadRun, cell, replicates, seed, jobs);
    progress(&firstbad);
    MATCH_LADDERS
        .iter()
        .map(|(family, ladder)| {
            let mut below: Option<(CellResult, Vec<Sample>)> = None;
            let mut at = None;
            for &k in *ladder {
                let r = run_cell_sampled(family(k), cell, replicates, seed, jobs);
                progress(&r.0);
                let done = r.0.accuracy >= firstbad.accuracy;
                below = at.replace(r);
                if done {
                    break;
                }
            }
            let (at, at_samples) = at.expect("every ladder has a rung");
            let mut m = Matched {
                firstbad: firstbad.clone(),
                at,
                below: below.as_ref().map(|b| b.0.clone()),
                share_se: None,
            };
            if m.reached() {
                m.share_se = Some(share_standard_error(
                    &fb_samples,
                    &at_samples,
                    below.as_ref().map(|b| &b.1[..]),
                    SHARE_RESAMPLES,
                    seed,
                ));
            }
            m
        })
        .collect()
}

/// The table of [`matched`] results (Markdown).
pub fn matched_markdown(results: &[Matched]) -> String {
    let mut s = String::new();
    s.push_str(
        "| N | Δ/σ | noise | culprits | firstbad-run: right, boots | as accurate | right, boots | \
         one step fewer | boots at equal accuracy | firstbad-run's share |\n",
    );
    s.push_str("|---:|---:|---|---|---|---|---|---|---:|---:|\n");
    for m in results {
        let c = &m.firstbad.cell;
        let fb = format!("{}, {:.0}", pct(m.firstbad.accuracy), m.firstbad.boots_mean);
        let at = if m.reached() {
            m.at.strategy.name()
        } else {
            format!("not reached by {}", m.at.strategy.name())
        };
        let below = m.below.as_ref().map_or("—".to_string(), |b| {
            format!(
                "{}: {}, {:.0}",
                b.strategy.name(),
                pct(b.accuracy),
                b.boots_mean
            )
        });
        let (equal, share) = match m.boots_at_equal_accuracy() {
            Some(b) => {
                let share = m.firstbad.boots_mean / b;
                (
                    format!("{b:.0}"),
                    match m.share_se {
                        Some(se) => format!("{share:.2}× ± {se:.2}"),
                        None => format!("{share:.2}×"),
                    },
                )
            }
            None => ("—".to_string(), "—".to_string()),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {}, {:.0} | {} | {} | {} |",
            c.n,
            c.d,
            c.noise.name(),
            c.shape.name(),
            fb,
            at,
            pct(m.at.accuracy),
            m.at.boots_mean,
            below,
            equal,
            share
        );
    }
    s
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// Where `firstbad run`'s boots went: one Markdown row per `firstbad-run` result, mean boots in
/// each of its [`PHASES`]; empty when there is none.
pub fn phases_markdown(results: &[CellResult]) -> String {
    let rows: Vec<(&CellResult, [f64; PHASES.len()])> = results
        .iter()
        .filter_map(|r| r.phases.map(|p| (r, p)))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "| N | Δ/σ | noise | culprits | boots mean | {} | bisection verdicts wrong |\n\
         |---:|---:|---|---|---:|{}---:|\n",
        PHASES.join(" | "),
        "---:|".repeat(PHASES.len())
    );
    for (r, p) in rows {
        let share = |x: f64| {
            if r.boots_mean > 0.0 {
                format!("{x:.1} ({:.0}%)", 100.0 * x / r.boots_mean)
            } else {
                format!("{x:.1}")
            }
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.1} | {} | {} |",
            r.cell.n,
            r.cell.d,
            r.cell.noise.name(),
            r.cell.shape.name(),
            r.boots_mean,
            p.map(share).join(" | "),
            r.verdicts_wrong.map_or("—".to_string(), pct)
        );
    }
    s
}

/// One Markdown table row per result.
pub fn markdown(results: &[CellResult]) -> String {
    let mut s = String::new();
    s.push_str(
        "| N | Δ/σ | noise | culprits | strategy | accuracy | wrong culprit | no culprit | \
         boots mean | boots p95 | builds mean | builds p95 | claimed → observed | said partial: right / wrong |\n",
    );
    s.push_str("|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|\n");
    for r in results {
        let cal = match (r.claimed, r.observed) {
            (Some(c), Some(o)) => format!("{} → {}", pct(c), pct(o)),
            _ => "—".to_string(),
        };
        let _ =
            writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.0} | {:.1} | {:.0} | {} | {} |",
            r.cell.n,
            r.cell.d,
            r.cell.noise.name(),
            r.cell.shape.name(),
            r.strategy.name(),
            pct(r.accuracy),
            pct(r.wrong),
            pct(r.no_culprit),
            r.boots_mean,
            r.boots_p95,
            r.builds_mean,
            r.builds_p95,
            cal,
            r.partial
                .map_or("—".to_string(), |(r, w)| format!("{} / {}", pct(r), pct(w)))
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn firstbad_run_s_boots_are_accounted_to_its_phases() {
        let cell = Cell {
            n: 64,
            d: 1.0,
            noise: Noise::Failed,
            shape: Shape::OneCulprit,
        };
        let r = run_cell(Strategy::FirstbadRun, &cell, 20, 7);
        let p = r.phases.expect("firstbad-run accounts its phases");
        assert!(
            (p.iter().sum::<f64>() - r.boots_mean).abs() < 1e-9,
            "{p:?} against {}",
            r.boots_mean
        );
        // Every hunt confirms the regression, bisects and re-tests (failed boots included).
        assert!(p[0] >= 16.0 && p[1] >= 6.0 && p[3] >= 6.0, "{p:?}");
        let table = phases_markdown(std::slice::from_ref(&r));
        assert!(
            table.contains(
                "| baselines | bisection | posterior | re-test | bisection verdicts wrong |"
            ),
            "{table}"
        );
        let wrong = r.verdicts_wrong.expect("the bisection gave verdicts");
        assert!((0.0..=0.2).contains(&wrong), "{wrong}");
        assert_eq!(table.lines().count(), 3, "{table}");
        // Strategies without phases have no row.
        let g = run_cell(Strategy::GitBisect(1), &cell, 5, 7);
        assert_eq!((g.phases, g.verdicts_wrong), (None, None));
        assert_eq!(phases_markdown(&[g]), "");
    }

    #[test]
    fn a_replicate_is_reproducible_from_its_seed() {
        let cell = Cell {
            n: 64,
            d: 1.0,
            noise: Noise::Outliers,
            shape: Shape::OneCulprit,
        };
        // firstbad-run too: its posterior phase derives every choice from the boots so far,
        // as a resumed hunt must.
        for s in [Strategy::Firstbad, Strategy::FirstbadRun] {
            let (a, wa) = run_one(s, &cell, 42);
            let (b, wb) = run_one(s, &cell, 42);
            assert_eq!(a, b);
            assert_eq!((wa.boots, wa.builds), (wb.boots, wb.builds));
        }
    }

    #[test]
    fn a_cell_s_figures_do_not_depend_on_how_many_threads_ran_it() {
        // Two culprits and failed boots: claims, "partial" flags, skips and phases all vary
        // from replicate to replicate, and the sums of claims are order-sensitive floats.
        for (noise, shape) in [
            (Noise::Failed, Shape::OneCulprit),
            (Noise::Normal, Shape::TwoCulprits),
        ] {
            let cell = Cell {
                n: 64,
                d: 1.0,
                noise,
                shape,
            };
            let one = run_cell_on(Strategy::FirstbadRun, &cell, 12, 3, 1);
            assert!(one.claimed.is_some() && one.partial.is_some(), "{one:?}");
            // More threads than cores, and more than replicates.
            for jobs in [2, 5, 40] {
                let many = run_cell_on(Strategy::FirstbadRun, &cell, 12, 3, jobs);
                assert_eq!(one, many, "{jobs} threads");
            }
        }
    }

    #[test]
    fn noiseless_strategies_find_a_huge_step() {
        let cell = Cell {
            n: 64,
            d: 20.0,
            noise: Noise::Normal,
            shape: Shape::OneCulprit,
        };
        for s in Strategy::ALL {
            let r = run_cell(s, &cell, 20, 1);
            // Pinpoint's min of two p-values calls a good commit different from good in a few
            // percent of comparisons even without noise effects, so it may miss once in 20.
            let floor = if s == Strategy::Pinpoint(PINPOINT_START) {
                0.9
            } else {
                1.0
            };
            assert!(r.accuracy >= floor, "{s:?}: {r:?}");
        }
    }
    #[test]
    fn a_filter_keeps_only_the_cells_and_strategies_named() {
        let f = Filter {
            n: vec![1024],
            d: vec![1.0, 2.0],
            strategy: vec!["firstbad-run".into()],
            ..Filter::default()
        };
        let kept: Vec<(Cell, Strategy)> = cells(true)
            .into_iter()
            .flat_map(|c| Strategy::ALL.map(|s| (c, s)))
            .filter(|(c, s)| f.keeps(c, *s))
            .collect();
        // Six noise kinds at Δ/σ = 1 and 2 with one culprit, no culprit, two culprits at 1 and 2.
        assert_eq!(kept.len(), 12 + 1 + 2);
        assert!(kept
            .iter()
            .all(|(c, s)| c.n == 1024 && c.d >= 1.0 && *s == Strategy::FirstbadRun));
        assert!(Filter::default().keeps(&cells(false)[0], Strategy::Pinpoint(PINPOINT_START)));
    }

    #[test]
    fn a_strategy_is_found_again_from_its_name() {
        for s in Strategy::ALL.into_iter().chain(
            MATCH_LADDERS
                .iter()
                .flat_map(|(f, l)| l.iter().map(|&k| f(k))),
        ) {
            assert_eq!(Strategy::from_name(&s.name()), Some(s), "{}", s.name());
        }
        assert_eq!(
            Strategy::from_name("pinpoint"),
            Some(Strategy::Pinpoint(10))
        );
        assert_eq!(Strategy::from_name("lkp-gap"), Some(Strategy::LkpGap(3)));
        assert_eq!(Strategy::from_name("lkp-gap-3"), Some(Strategy::LkpGap(3)));
        for bad in [
            "majority-4",
            "git-bisect-0",
            "git-bisect",
            "bisect-3",
            "pinpoint-x",
        ] {
            assert_eq!(Strategy::from_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_share_s_standard_error_matches_the_textbook_one_where_there_is_one() {
        // Every run right on every history, so the boots at equal accuracy are the rung's
        // constant 100 and the share is firstbad's mean boots / 100: its standard error is
        // sd(boots) / √n / 100 = 10 / √400 / 100 = 0.005 for boots alternating 40 and 60.
        let n = 400;
        let fb: Vec<Sample> = (0..n)
            .map(|i| Sample {
                right: true,
                boots: if i % 2 == 0 { 40 } else { 60 },
            })
            .collect();
        let rung = |boots| vec![Sample { right: true, boots }; n];
        let se = share_standard_error(&fb, &rung(100), Some(&rung(90)), SHARE_RESAMPLES, 1);
        // The bootstrap's own error at 2000 resamples is about 1.6% of it; 5% is 3 of those.
        assert!((se - 0.005).abs() < 0.05 * 0.005, "{se}");
        // Seeded: the same figure again.
        assert_eq!(
            se,
            share_standard_error(&fb, &rung(100), Some(&rung(90)), SHARE_RESAMPLES, 1)
        );
        // Nothing varies: no error.
        assert_eq!(
            share_standard_error(&rung(50), &rung(100), None, 200, 1),
            0.0
        );
    }

    #[test]
    fn the_share_s_standard_error_pairs_the_runs_by_history() {
        // A history either easy (every run right, few boots) or hard (all wrong, many boots)
        // for all three runs alike: the share barely moves across resamples, because each
        // resample draws the same histories for every run. Unpaired, the accuracies would
        // move apart and the interpolation with them.
        let n = 200;
        let run = |easy: usize, hard: usize| -> Vec<Sample> {
            (0..n)
                .map(|i| {
                    let ok = i % 10 != 0;
                    Sample {
                        right: ok,
                        boots: if ok { easy } else { hard },
                    }
                })
                .collect()
        };
        let paired = share_standard_error(
            &run(50, 100),
            &run(100, 200),
            Some(&run(80, 160)),
            SHARE_RESAMPLES,
            3,
        );
        let mut shuffled = run(100, 200);
        shuffled.rotate_left(1);
        let unpaired = share_standard_error(
            &run(50, 100),
            &shuffled,
            Some(&run(80, 160)),
            SHARE_RESAMPLES,
            3,
        );
        assert!(paired < 0.5 * unpaired, "{paired} against {unpaired}");
    }

    #[test]
    fn boots_at_equal_accuracy_interpolate_between_the_bracketing_repeat_counts() {
        let cell = Cell {
            n: 64,
            d: 1.0,
            noise: Noise::Normal,
            shape: Shape::OneCulprit,
        };
        let result = |strategy, accuracy, boots_mean| CellResult {
            cell,
            strategy,
            replicates: 1000,
            accuracy,
            wrong: 1.0 - accuracy,
            no_culprit: 0.0,
            boots_mean,
            boots_p95: boots_mean,
            builds_mean: 8.0,
            builds_p95: 8.0,
            claimed: None,
            observed: None,
            partial: None,
            phases: None,
            verdicts_wrong: None,
        };
        let firstbad = result(Strategy::FirstbadRun, 0.96, 185.0);
        let m = Matched {
            firstbad: firstbad.clone(),
            at: result(Strategy::GitBisect(48), 0.99, 384.0),
            below: Some(result(Strategy::GitBisect(32), 0.94, 256.0)),
            share_se: None,
        };
        // 0.96 is two fifths of the way from 0.94 to 0.99: 256 + 0.4 · 128.
        let b = m.boots_at_equal_accuracy().expect("reached");
        assert!((b - 307.2).abs() < 1e-9, "{b}");
        assert!(matched_markdown(std::slice::from_ref(&m)).contains("| 307 | 0.60× |"));
        let with_error = Matched {
            share_se: Some(0.031),
            ..m.clone()
        };
        assert!(matched_markdown(&[with_error]).contains("| 307 | 0.60× ± 0.03 |"));
        // The first rung already as accurate: its own boots, not an extrapolation below it.
        let first = Matched {
            below: None,
            ..m.clone()
        };
        assert_eq!(first.boots_at_equal_accuracy(), Some(384.0));
        // Never reached: no figure, and the table says so.
        let short = Matched {
            at: result(Strategy::Pinpoint(112), 0.92, 1456.0),
            ..m
        };
        assert_eq!(short.boots_at_equal_accuracy(), None);
        assert!(matched_markdown(&[short]).contains("not reached by pinpoint-112"));
    }
}
