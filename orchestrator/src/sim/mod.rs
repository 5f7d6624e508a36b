//! `firstbad sim`: firstbad's own classifier and search on synthetic noisy histories, side by
//! side with the strategies people use today.
//!
//! Pure code: every replicate draws from a `ChaCha12Rng` seeded from (seed, cell, replicate), so a
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
//! - `burst`: `normal`, plus bursts of a busy neighbour: at one boot in twenty a burst begins
//!   that makes the next 1-3 boots 3-10x slower, whatever is booted, then the host is back
//!   (about one boot in ten is in a burst).
//!
//! # Strategies
//! - `firstbad-run`: the product's own loop, `firstbad run`'s driver and judge on simulated
//!   hosts ([`firstbad_run_with`]).
//! - `research-posterior` (research, not the product; `firstbad` in tables before 2026-12-06):
//!   [`crate::sequential`] baselines and per-commit SPRT (alpha = beta = 0.01), the
//!   [`crate::posterior`] search to confidence 0.95. A commit keeps being booted while its SPRT
//!   is undecided; then the posterior picks the next one.
//! - `research-greedy` (research; `firstbad-greedy` before): the same posterior, re-choosing
//!   the commit after every boot.
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
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha12Rng;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

mod cells;
pub mod forecast;
mod forecast_check;
pub mod nightly;
pub mod recorded;
mod strategies;
mod tables;
mod world;

pub use cells::*;
pub use forecast_check::{
    forecast_cells, forecast_check, forecast_markdown, forecast_row, ForecastCheck,
};
pub use run::{firstbad_run_with, GivenBaselines};
pub use strategies::Strategy;
pub use tables::*;
pub use world::{normal, Cell, Noise, Shape, World, PHASES};
// The parts see each other's items through `use super::*`.
#[allow(unused_imports)]
use {strategies::*, world::*};

/// What a strategy concluded about one history.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The commit named as first bad (world index), or None for "no (single) culprit".
    pub culprit: Option<usize>,
    /// The confidence claimed for it, when the strategy states one.
    pub confidence: Option<f64>,
    /// Whether the strategy said the named commit is only part of the regression (its parent
    /// clearly above good, or itself clearly short of bad), when it says so at all.
    pub partial: Option<bool>,
    /// Every commit named as the first bad one of a step, `culprit` first: one for the
    /// strategies that name one.
    pub culprits: Vec<usize>,
    /// The commits whose re-test confirmed them, when the strategy re-tests at all (`firstbad
    /// run`): a wrong commit among them is the failure a user cannot see.
    pub confirmed: Option<Vec<usize>>,
}

/// No culprit named, no confidence claimed.
pub(super) const NOTHING: Outcome = Outcome {
    culprit: None,
    confidence: None,
    partial: None,
    culprits: Vec::new(),
    confirmed: None,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The wandering host is what its doc says: shifts of 1.5-3σ either way, lasting 5-30
    /// boots, about a third of the boots in one.
    #[test]
    fn a_wandering_host_shifts_by_a_few_sigma_for_a_few_boots_and_comes_back() {
        let cell = Cell {
            n: 64,
            d: 0.0,
            noise: Noise::Wander,
            shape: Shape::NoCulprit,
        };
        let mut w = World::new(&cell, rand_chacha::ChaCha12Rng::seed_from_u64(3));
        let (boots, mut shifted, mut lengths, mut sizes) = (30_000, 0usize, Vec::new(), Vec::new());
        for _ in 0..boots {
            let before = w.shift;
            w.boot(0);
            // A boot is in a shift when one was under way, or began with it (at least 5 long).
            if before.0 > 0 || w.shift.0 > 0 {
                shifted += 1;
            }
            if before.0 == 0 && w.shift.0 > 0 {
                lengths.push(w.shift.0 + 1);
                sizes.push(w.shift.1);
            }
        }
        let share = shifted as f64 / boots as f64;
        assert!((0.28..0.42).contains(&share), "{share}");
        assert!(
            lengths.iter().all(|&r| (5..=30).contains(&r)),
            "{lengths:?}"
        );
        assert!(
            sizes.iter().all(|s| (1.5..3.0).contains(&s.abs())),
            "{sizes:?}"
        );
        assert!(sizes.iter().any(|&s| s < 0.0) && sizes.iter().any(|&s| s > 0.0));
    }

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
        for s in [Strategy::ResearchPosterior, Strategy::FirstbadRun] {
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
        // Eight noise kinds at Δ/σ = 1 and 2 with one culprit, no culprit, two culprits at 1 and
        // 2.
        assert_eq!(kept.len(), 16 + 1 + 2);
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
            every_step: 0.0,
            wrong_confirmed: None,
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
