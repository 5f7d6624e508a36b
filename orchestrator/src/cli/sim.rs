//! `firstbad sim`: the product's statistics on simulated histories, beside the strategies in
//! use today; `--matched` and `--nightly`.

use firstbad::error::exit_code;

/// The `firstbad sim` arguments.
pub(super) struct Args {
    pub(super) full: bool,
    pub(super) replicates: Option<usize>,
    pub(super) seed: u64,
    pub(super) n: Vec<usize>,
    pub(super) d: Vec<f64>,
    pub(super) noise: Vec<String>,
    pub(super) shape: Vec<String>,
    pub(super) strategy: Vec<String>,
    pub(super) matched: bool,
    pub(super) nightly: bool,
    pub(super) jobs: Option<u32>,
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
        jobs,
    } = a;
    if nightly {
        return sim_nightly(replicates, seed);
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

/// Checks a `--strategy` name against [`firstbad::sim::Strategy::from_name`].
pub(super) fn strategy_name(s: &str) -> Result<String, String> {
    match firstbad::sim::Strategy::from_name(s) {
        Some(_) => Ok(s.to_string()),
        None => Err(format!(
            "unknown strategy {s:?}: one of firstbad, firstbad-greedy, firstbad-run, \
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
    let kept = sim::cells(full)
        .into_iter()
        .filter(|c| filter.keeps_cell(c) && c.shape != sim::Shape::NoCulprit);
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
