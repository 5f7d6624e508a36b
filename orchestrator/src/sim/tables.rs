//! The tables `firstbad sim` prints, and boots at equal accuracy (`--matched`).

use super::*;

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
    for cell in filter.cells(full) {
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
pub(super) fn interpolate(target: f64, hi: (f64, f64), lo: Option<(f64, f64)>) -> f64 {
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
    let mut rng = ChaCha12Rng::seed_from_u64(seed);
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

pub(super) fn pct(x: f64) -> String {
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
         boots mean | boots p95 | builds mean | builds p95 | claimed → observed | said partial: right / wrong | every step named | \
         wrong & confirmed |\n",
    );
    s.push_str("|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|\n");
    for r in results {
        let cal = match (r.claimed, r.observed) {
            (Some(c), Some(o)) => format!("{} → {}", pct(c), pct(o)),
            _ => "—".to_string(),
        };
        let _ =
            writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.0} | {:.1} | {:.0} | {} | {} | {} | {} |",
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
                .map_or("—".to_string(), |(r, w)| format!("{} / {}", pct(r), pct(w))),
            pct(r.every_step),
            r.wrong_confirmed.map_or("—".to_string(), pct)
        );
    }
    s
}
