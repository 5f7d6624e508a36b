//! `firstbad sim`: the product's statistics on simulated histories, beside the strategies in
//! use today; `--matched` and `--nightly`.

use firstbad::error::exit_code;

/// The `firstbad sim` arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Every cell, 1000 replicates each (minutes in release); default: the quick run.
    #[arg(long)]
    full: bool,
    /// Replicates per cell (default 1000 with --full, 100 without; 1 to 1,000,000).
    #[arg(long, value_parser = replicate_count)]
    replicates: Option<usize>,
    /// Seed of all random draws: the same seed gives the same table.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only these candidate counts N (repeat or comma-separate), e.g. `--n 64,1024`. With all
    /// four of --n, --d, --noise and --shape, every combination of them is run, whether or not
    /// the published tables have it; with fewer, the quick (or --full) run's cells they keep.
    /// N is 2 to 1,048,576.
    #[arg(long, value_delimiter = ',', value_parser = candidate_count)]
    n: Vec<usize>,
    /// Only these effects Δ/σ, e.g. `--d 1,2` (above 0, at most 100).
    #[arg(long, value_delimiter = ',', value_parser = effect, allow_negative_numbers = true)]
    d: Vec<f64>,
    /// Only these noise kinds: normal, lognormal, outliers, drift, step, failed, burst, wander,
    /// recorded (real boots of tests/corpus/ replayed).
    #[arg(long, value_delimiter = ',', value_parser = noise_name)]
    noise: Vec<String>,
    /// Only these history shapes: one, none, two.
    #[arg(long, value_delimiter = ',', value_parser = shape_name)]
    shape: Vec<String>,
    /// Only these strategies, e.g. `--strategy firstbad-run,research-posterior,majority-25`: git-bisect-K,
    /// majority-K (odd), lkp-gap-K and pinpoint-K take any repeat count K.
    #[arg(long, value_delimiter = ',', value_parser = strategy_name)]
    strategy: Vec<String>,
    /// Boots at equal accuracy: per cell, raise the repeat counts of git bisect, majority
    /// vote, LKP and Pinpoint until each is as accurate as `firstbad run` on the same
    /// histories, and print what that costs against firstbad's boots (histories with a
    /// culprit only).
    #[arg(long, conflicts_with = "strategy")]
    matched: bool,
    /// Nightly detection instead of bisection: firstbad's nightly detector against Otava's
    /// E-divisive and Perfherder's t-test on simulated nightly series (docs/nightly-detection.md).
    #[arg(long, conflicts_with_all = ["strategy", "matched"])]
    nightly: bool,
    /// The forecast against what the hunt then spent: per cell, `firstbad run`'s hunts, each
    /// beside the forecast made from its own baselines (docs/forecast.md). --replicates hunts
    /// a cell (default 100), each forecast from 100 simulated hunts.
    #[arg(long, conflicts_with_all = ["strategy", "matched", "nightly"])]
    forecast: bool,
    /// Threads to run replicates on (default: one per core). The table is the same
    /// whatever this is: each replicate draws from its own seed.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
}

/// Prints the table the arguments ask for; the exit code.
pub(super) fn run(a: Args) -> anyhow::Result<u8> {
    let Args {
        full,
        replicates,
        seed,
        n,
        d,
        noise,
        shape,
        strategy,
        matched,
        nightly,
        forecast,
        jobs,
    } = a;
    if nightly {
        return sim_nightly(replicates, seed);
    }
    if forecast {
        return sim_forecast(replicates, seed);
    }
    let jobs = jobs.map_or_else(firstbad::sim::default_jobs, |j| j as usize);
    let filter = firstbad::sim::Filter {
        n,
        d,
        noise,
        shape,
        strategy,
    };
    if matched {
        return sim_matched(full, replicates, seed, jobs, &filter);
    }
    let rows = firstbad::sim::table(full, replicates, seed, jobs, &filter, |r| {
        eprint!(
            "{}",
            firstbad::sim::markdown(std::slice::from_ref(r))
                .lines()
                .nth(2)
                .map(|l| format!("{l}\n"))
                .unwrap_or_default()
        );
    });
    print!("{}", firstbad::sim::markdown(&rows));
    let phases = firstbad::sim::phases_markdown(&rows);
    if !phases.is_empty() {
        print!("\nWhere firstbad-run's boots went (mean per history):\n\n{phases}");
    }
    Ok(exit_code::OK)
}

/// The most candidates a simulated history has: 64 times the largest published cell
/// (16,384), a history held in memory per replicate and thread.
const MAX_CANDIDATES: usize = 1 << 20;

/// The most replicates a cell runs: a thousand times the published tables' 1000 would take
/// days; the table's figures do not move past it.
const MAX_REPLICATES: usize = 1_000_000;

/// The largest effect Δ/σ simulated: a boot's value is e^(σ·Δ) times the good one, which
/// past a few hundred is no longer a finite number (`--d 1e300` printed 300 digits).
const MAX_EFFECT: f64 = 100.0;

/// Parses a `--n`: two candidates or more (two culprits need two commits, and `--n 0`
/// panicked; issue 61, finding 8), at most [`MAX_CANDIDATES`].
fn candidate_count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (2..=MAX_CANDIDATES).contains(&n) => Ok(n),
        _ => Err(format!(
            "a history of {s} candidate commits cannot be simulated: give a whole number from \
             2 to {MAX_CANDIDATES}"
        )),
    }
}

/// Parses a `--replicates`: 1 to [`MAX_REPLICATES`] (`--replicates 0` panicked).
fn replicate_count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=MAX_REPLICATES).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s} replicates per cell: give a whole number from 1 to {MAX_REPLICATES}"
        )),
    }
}

/// Parses a `--d`: a finite effect above 0 and at most [`MAX_EFFECT`] (`--d nan` printed an
/// empty table with exit 0).
fn effect(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(d) if d > 0.0 && d <= MAX_EFFECT => Ok(d),
        _ => Err(format!(
            "an effect Δ/σ of {s} cannot be simulated: give a number above 0 and at most \
             {MAX_EFFECT} (e.g. 0.5, 1, 2)"
        )),
    }
}

/// Checks a `--noise` name against [`firstbad::sim::Noise::name`].
fn noise_name(s: &str) -> Result<String, String> {
    one_of("noise", s, firstbad::sim::Noise::ALL.map(|n| n.name()))
}

/// Checks a `--shape` name against [`firstbad::sim::Shape::name`].
fn shape_name(s: &str) -> Result<String, String> {
    one_of("shape", s, firstbad::sim::Shape::ALL.map(|n| n.name()))
}

/// `s` when it is one of `names`, else an error naming the `kind` and every name.
fn one_of<const N: usize>(kind: &str, s: &str, names: [&str; N]) -> Result<String, String> {
    if names.contains(&s) {
        Ok(s.to_string())
    } else {
        Err(format!("unknown {kind} {s:?}: one of {}", names.join(", ")))
    }
}

/// Checks a `--strategy` name against [`firstbad::sim::Strategy::from_name`].
pub(super) fn strategy_name(s: &str) -> Result<String, String> {
    match firstbad::sim::Strategy::from_name(s) {
        Some(_) => Ok(s.to_string()),
        None => Err(format!(
            "unknown strategy {s:?}: one of firstbad-run, research-posterior, research-greedy, \
             firstbad-run-boundary, git-bisect-K, \
             majority-K (K odd), lkp-gap, lkp-gap-K, pinpoint, pinpoint-K"
        )),
    }
}

/// `firstbad sim --nightly`: the nightly detectors' table, each row on stderr as it is done.
fn sim_nightly(replicates: Option<usize>, seed: u64) -> anyhow::Result<u8> {
    use firstbad::sim::nightly;
    let reps = replicates.unwrap_or(nightly::NIGHTLY_REPLICATES);
    let rows = nightly::nightly_table(reps, seed, |r| eprint!("{}", nightly::nightly_row(r)));
    print!("{}", nightly::nightly_markdown(&rows));
    Ok(exit_code::OK)
}

/// `firstbad sim --forecast`: the forecast's table, each row on stderr as it is done.
fn sim_forecast(replicates: Option<usize>, seed: u64) -> anyhow::Result<u8> {
    use firstbad::sim;
    let reps = replicates.unwrap_or(100);
    let mut rows = Vec::new();
    for cell in sim::forecast_cells() {
        let row = sim::forecast_check(&cell, reps, seed, firstbad::sim::forecast::FORECAST_HUNTS);
        eprint!("{}", sim::forecast_row(&row));
        rows.push(row);
    }
    print!("{}", sim::forecast_markdown(&rows));
    Ok(exit_code::OK)
}

/// `firstbad sim --matched`: boots at equal accuracy for every cell the filter keeps.
fn sim_matched(
    full: bool,
    replicates: Option<usize>,
    seed: u64,
    jobs: usize,
    filter: &firstbad::sim::Filter,
) -> anyhow::Result<u8> {
    use firstbad::sim;
    let reps = replicates.unwrap_or(if full {
        sim::FULL_REPLICATES
    } else {
        sim::QUICK_REPLICATES
    });
    let mut rows = Vec::new();
    // On no-culprit histories "as accurate" means naming nothing, which a strategy that never
    // names a commit does best: those cells are left out.
    let kept = filter
        .cells(full)
        .into_iter()
        .filter(|c| c.shape != sim::Shape::NoCulprit);
    for cell in kept {
        let m = sim::matched(&cell, reps, seed, jobs, |r| {
            eprintln!(
                "{}: {:.1}% right, {:.0} boots",
                r.strategy.name(),
                100.0 * r.accuracy,
                r.boots_mean
            )
        });
        eprint!("{}", sim::matched_markdown(&m));
        rows.extend(m);
    }
    print!("{}", sim::matched_markdown(&rows));
    Ok(exit_code::OK)
}
