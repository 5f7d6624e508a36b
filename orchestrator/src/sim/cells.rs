//! Replicates of a cell, run on every core, and their figures.

use super::*;

/// Runs `strategy` on one history drawn for `cell` from `seed`; the outcome, boots and builds.
pub fn run_one(strategy: Strategy, cell: &Cell, seed: u64) -> (Outcome, World) {
    let mut w = World::new(cell, ChaCha12Rng::seed_from_u64(seed));
    let o = match strategy {
        Strategy::ResearchPosterior => firstbad(&mut w, false),
        Strategy::ResearchGreedy => firstbad(&mut w, true),
        Strategy::FirstbadRun => run::firstbad_run(&mut w, Default::default()),
        Strategy::FirstbadRunBoundary => {
            run::firstbad_run(&mut w, crate::hunt::judge::RefineProbe::Boundary)
        }
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
    /// Share that named every step and nothing else (the named commits are the history's
    /// culprits; none for a history without): a strategy that names one commit cannot do it
    /// on two culprits (issue 31 item 1).
    pub every_step: f64,
    /// Share whose re-tests confirmed a commit that is not a culprit (None for strategies
    /// without a re-test): what must stay near zero whatever the host does.
    pub wrong_confirmed: Option<f64>,
}

pub(super) fn p95(mut v: Vec<f64>) -> f64 {
    crate::stats::nearest_rank(&mut v, 0.95)
}

/// What [`run_cell`] keeps of one replicate: its outcome, whether it was right, and its costs.
pub(super) struct Replicate {
    outcome: Outcome,
    /// The named commit is a true culprit.
    right: bool,
    /// The named commits are exactly the true culprits.
    every_step: bool,
    /// A commit that is not a culprit was confirmed (None: the strategy does not re-test).
    wrong_confirmed: Option<bool>,
    boots: usize,
    builds: usize,
    by_phase: [usize; PHASES.len()],
    verdicts: [usize; 2],
}

/// Runs one replicate drawn from `seed` and keeps its figures.
pub(super) fn replicate(strategy: Strategy, cell: &Cell, seed: u64) -> Replicate {
    let (outcome, w) = run_one(strategy, cell, seed);
    Replicate {
        right: outcome.culprit.is_some_and(|c| w.culprits.contains(&c)),
        every_step: {
            let mut named = outcome.culprits.clone();
            named.sort_unstable();
            named.dedup();
            named == w.culprits
        },
        wrong_confirmed: outcome
            .confirmed
            .as_ref()
            .map(|c| c.iter().any(|x| !w.culprits.contains(x))),
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
pub(super) fn replicates_of(
    strategy: Strategy,
    cell: &Cell,
    seeds: &[u64],
    jobs: usize,
) -> Vec<Replicate> {
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
pub(super) fn run_cell_sampled(
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
    let (mut right, mut wrong, mut none, mut every) = (0usize, 0usize, 0usize, 0usize);
    let mut builds = Vec::new();
    let mut by_phase = [0usize; PHASES.len()];
    let mut verdicts = [0usize; 2];
    let (mut claimed, mut named_right, mut named) = (0.0, 0usize, 0usize);
    let mut claims = false;
    // Runs that said "partial", among right and wrong answers.
    let (mut partial, mut says_partial) = ([0usize; 2], false);
    let mut wrong_confirmed: Option<usize> = None;
    let mut samples = Vec::with_capacity(replicates);
    for x in replicates_of(strategy, cell, &seeds, jobs) {
        let o = x.outcome;
        // Right as the accuracy counts it: a true culprit named, or on a no-culprit history
        // none named.
        let counted = x.right || (o.culprit.is_none() && cell.shape == Shape::NoCulprit);
        right += usize::from(counted);
        every += usize::from(x.every_step);
        if let Some(w) = x.wrong_confirmed {
            *wrong_confirmed.get_or_insert(0) += usize::from(w);
        }
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
        phases: matches!(
            strategy,
            Strategy::FirstbadRun | Strategy::FirstbadRunBoundary
        )
        .then(|| by_phase.map(f)),
        verdicts_wrong: (matches!(
            strategy,
            Strategy::FirstbadRun | Strategy::FirstbadRunBoundary
        ) && verdicts[0] > 0)
            .then(|| verdicts[1] as f64 / verdicts[0] as f64),
        every_step: f(every),
        wrong_confirmed: wrong_confirmed.map(f),
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
        Noise::Burst,
        Noise::Wander,
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

    /// The cells of a run: every combination of the four lists when all four are given
    /// (`--n 64 --d 4 --noise burst --shape two` asks for that cell, whether or not the
    /// published tables have it), else the quick or full run's cells that pass them.
    pub fn cells(&self, full: bool) -> Vec<Cell> {
        let noises: Vec<Noise> = Noise::ALL
            .into_iter()
            .filter(|n| self.noise.iter().any(|x| x == n.name()))
            .collect();
        let shapes: Vec<Shape> = Shape::ALL
            .into_iter()
            .filter(|s| self.shape.iter().any(|x| x == s.name()))
            .collect();
        if self.n.is_empty() || self.d.is_empty() || noises.is_empty() || shapes.is_empty() {
            return cells(full)
                .into_iter()
                .filter(|c| self.keeps_cell(c))
                .collect();
        }
        let mut v = Vec::new();
        for &shape in &shapes {
            for &noise in &noises {
                for &n in &self.n {
                    for &d in &self.d {
                        v.push(Cell { n, d, noise, shape });
                    }
                }
            }
        }
        v
    }

    pub(super) fn keeps(&self, cell: &Cell, s: Strategy) -> bool {
        self.keeps_cell(cell) && any(&self.strategy, |x| *x == s.name())
    }
}

/// True when `v` is empty (no filter) or an element passes.
pub(super) fn any<T>(v: &[T], ok: impl Fn(&T) -> bool) -> bool {
    v.is_empty() || v.iter().any(ok)
}
