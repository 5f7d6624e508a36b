//! Quick `firstbad sim`: firstbad's classifier and search against today's strategies on
//! synthetic noisy histories (issue 4). The full table is docs/simulation.md; this runs a few
//! cells at N = 64, Δ/σ = 1 with 100 replicates and asserts on what a user relies on: the
//! culprit, the false-culprit rate, and that the stated confidence means what it says.

use firstbad::sim::{run_cell, Cell, CellResult, Noise, Shape, Strategy};

/// Replicates per cell: at 100 the sampling error of a 90% accuracy is ±3 points (1σ).
const REPS: usize = 100;
const SEED: u64 = 4;

fn cell(noise: Noise, shape: Shape) -> Cell {
    Cell {
        n: 64,
        d: 1.0,
        noise,
        shape,
    }
}

fn calibrated(r: &CellResult) {
    let (c, o) = (
        r.claimed.expect("firstbad claims"),
        r.observed.expect("named some"),
    );
    // Issue 4 targets 2 points in the full run; 100 replicates allow ±3 points of noise each
    // way, so 7 points here still fails a posterior that is systematically overconfident.
    assert!(
        (c - o).abs() <= 0.07,
        "claimed {c:.3} vs observed {o:.3}: {r:?}"
    );
}

#[test]
fn firstbad_finds_the_culprit_where_one_run_per_commit_fails() {
    let c = cell(Noise::Normal, Shape::OneCulprit);
    let fb = run_cell(Strategy::FirstbadRun, &c, REPS, SEED);
    let git = run_cell(Strategy::GitBisect(1), &c, REPS, SEED);
    let maj = run_cell(Strategy::Majority(5), &c, REPS, SEED);
    // At Δ/σ = 1 one boot per commit is a coin flip with a bias: over 6 steps it almost never
    // lands on the culprit. `firstbad run` must, at ~95% in docs/simulation.md's tables.
    assert!(git.accuracy <= 0.2, "{git:?}");
    assert!(fb.accuracy >= 0.85, "{fb:?}");
    assert!(fb.accuracy >= maj.accuracy + 0.4, "{fb:?} vs {maj:?}");
    calibrated(&fb);
}

/// What `firstbad run` does (git bisect's choice, a sequential test per commit, the posterior
/// phase, a final re-test and the DAG posterior) must find the culprit as often as the
/// posterior search does (the research loop `research-posterior`), and state a confidence
/// that means it.
#[test]
fn the_strategy_of_firstbad_run_finds_the_culprit_and_states_an_honest_confidence() {
    let c = cell(Noise::Normal, Shape::OneCulprit);
    let run = run_cell(Strategy::FirstbadRun, &c, REPS, SEED);
    let research = run_cell(Strategy::ResearchPosterior, &c, REPS, SEED);
    // 94% here (claimed 96.1%, observed 95.9%), 95.5% in docs/simulation.md's 200 replicates,
    // where the posterior search is right 92.5%. Before the posterior phase chose its boots
    // over the whole range with shared centres (commit 150f2ce) it was 85% here and 88% there;
    // without the posterior phase, 74%.
    assert!(run.accuracy >= 0.88, "{run:?}");
    assert!(
        run.accuracy >= research.accuracy - 0.03,
        "{run:?} vs {research:?}"
    );
    calibrated(&run);
    // A wrong commit confirmed is what a user cannot see: 0.3% in docs/simulation.md's 300
    // histories. (On a host that wanders it is 17%: issue 31 item 4, not met yet.)
    let wrong = run.wrong_confirmed.expect("firstbad run re-tests");
    assert!(wrong <= 0.03, "{run:?}");
}

/// Issue 4's target compares boots at equal accuracy. The strategy people would tune to get
/// there is git bisect with more runs per commit, averaged (majority votes, LKP's gap rule and
/// Pinpoint need more or never get there: `firstbad sim --matched`, docs/simulation.md). Given
/// as many boots as `firstbad run` spends, it must be clearly less accurate.
#[test]
fn averaging_git_bisect_given_firstbad_runs_boots_is_less_accurate() {
    let c = cell(Noise::Normal, Shape::OneCulprit);
    let run = run_cell(Strategy::FirstbadRun, &c, REPS, SEED);
    // 8 commits (the endpoints and 6 steps) of k boots each, at least firstbad run's boots.
    let k = (run.boots_mean / 8.0).ceil() as u32;
    let avg = run_cell(Strategy::GitBisect(k), &c, REPS, SEED);
    assert!(avg.boots_mean >= run.boots_mean, "{avg:?} vs {run:?}");
    // Here (seed 1, 100 histories) 201 boots and 95% right against k = 26, 208 boots and
    // 88%; averaging git bisect needed about 300 boots (k = 32 to 48) to be as accurate in
    // docs/simulation.md's --matched tables.
    assert!(avg.accuracy < run.accuracy, "{avg:?} vs {run:?}");
}

/// The confirmation says when the culprit is only part of the regression. With two culprits
/// (half the effect each) it must say so far more often than it raises a false alarm on a
/// right answer with one culprit. The re-test reads the parent's and the culprit's levels
/// against good and bad boots of the same rounds, at 99% (issue 38: levels from every boot,
/// against the baselines' centres and a modelled host move, read a wandering host as a second
/// step in the demo hunt). At Δ/σ = 4 each half (20%) is four times the hunt's `min_effect`
/// and the re-test's rounds resolve it; at Δ/σ = 2 they do not (here 1.0% false alarms against
/// 5.7% found; the old reading from every boot: 4.1% against 34.1%), which issue 31 takes up.
#[test]
fn firstbad_run_says_when_the_culprit_is_only_part_of_the_regression() {
    let at_four = |shape| Cell {
        n: 64,
        d: 4.0,
        noise: Noise::Normal,
        shape,
    };
    let one = run_cell(
        Strategy::FirstbadRun,
        &at_four(Shape::OneCulprit),
        REPS,
        SEED,
    );
    let two = run_cell(
        Strategy::FirstbadRun,
        &at_four(Shape::TwoCulprits),
        REPS,
        SEED,
    );
    let (false_alarm, _) = one.partial.expect("firstbad run says");
    let (second_found, _) = two.partial.expect("firstbad run says");
    // Here (seed 1, 100 histories) 1.0% and 46.9%.
    assert!(false_alarm <= 0.02, "{one:?}");
    assert!(second_found >= false_alarm + 0.1, "{two:?} vs {one:?}");
}

/// A host that slows down steadily (1σ per 100 boots, whatever is booted: a filling disk, a
/// warming room) makes late boots look bad. `firstbad run` must follow the trend rather than
/// name a wrong commit with confidence, where the posterior search, which has no trend, does.
#[test]
fn a_drifting_host_does_not_make_firstbad_run_name_a_wrong_commit() {
    let c = cell(Noise::Drift, Shape::OneCulprit);
    let run = run_cell(Strategy::FirstbadRun, &c, REPS, SEED);
    let research = run_cell(Strategy::ResearchPosterior, &c, REPS, SEED);
    // Before the trend model (docs/simulation.md, N = 1024): 2.5% right, 50% wrong claiming
    // 92.9%, the rest stopped for a person; 93% right with it in 1000 replicates there.
    assert!(run.accuracy >= 0.85, "{run:?}");
    assert!(research.accuracy <= 0.3, "{research:?}");
    calibrated(&run);
}

/// A host that moves suddenly and stays there (2σ slower from a boot among the first 300:
/// another job on it, a firmware change) must not make `firstbad run` name a wrong commit
/// with confidence either.
#[test]
fn a_host_that_steps_does_not_make_firstbad_run_name_a_wrong_commit() {
    let c = cell(Noise::Step, Shape::OneCulprit);
    let run = run_cell(Strategy::FirstbadRun, &c, REPS, SEED);
    // Without the step in the posterior (docs/simulation.md, N = 1024): 52% right, claiming
    // 88%; 89% right with it there.
    assert!(run.accuracy >= 0.8, "{run:?}");
    calibrated(&run);
}

#[test]
fn outlier_boots_do_not_move_the_culprit() {
    let run = run_cell(
        Strategy::FirstbadRun,
        &cell(Noise::Outliers, Shape::OneCulprit),
        REPS,
        SEED,
    );
    assert!(run.accuracy >= 0.85, "{run:?}");
    calibrated(&run);
}

#[test]
fn no_culprit_is_reported_when_good_and_bad_are_alike() {
    let c = cell(Noise::Normal, Shape::NoCulprit);
    let run = run_cell(Strategy::FirstbadRun, &c, REPS, SEED);
    let git = run_cell(Strategy::GitBisect(1), &c, REPS, SEED);
    // Baselines at alpha = 0.01 with looks at 8/16/32/64 boots: a few percent at most.
    assert!(run.wrong <= 0.05, "{run:?}");
    // git bisect with one run names a culprit whenever bad's single boot is slower: ~half.
    assert!(git.wrong >= 0.3, "{git:?}");
}

#[test]
fn the_table_is_reproducible_from_its_seed() {
    let c = cell(Noise::Failed, Shape::OneCulprit);
    let a = run_cell(Strategy::FirstbadRun, &c, 10, SEED);
    let b = run_cell(Strategy::FirstbadRun, &c, 10, SEED);
    assert_eq!(a, b);
}

#[test]
fn the_command_prints_the_same_table_on_one_thread_or_several() {
    let run = |jobs: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_firstbad"))
            .args(["sim", "--replicates", "8", "--n", "64", "--d", "1"])
            .args(["--noise", "failed", "--shape", "one"])
            .args(["--strategy", "firstbad-run,pinpoint", "--jobs", jobs])
            .output()
            .expect("firstbad runs")
    };
    let one = run("1");
    assert!(one.status.success(), "{one:?}");
    let two = run("2");
    assert!(two.status.success(), "{two:?}");
    assert_eq!(
        String::from_utf8_lossy(&one.stdout),
        String::from_utf8_lossy(&two.stdout)
    );
    // No thread at all is refused, naming the flag.
    let none = run("0");
    assert!(!none.status.success(), "{none:?}");
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(err.contains("--jobs"), "{err}");
}

#[test]
fn the_command_prints_the_table_then_where_firstbad_run_s_boots_went() {
    let run = |strategy: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_firstbad"))
            .args(["sim", "--replicates", "5", "--n", "64", "--d", "1"])
            .args([
                "--noise",
                "normal",
                "--shape",
                "one",
                "--strategy",
                strategy,
            ])
            .output()
            .expect("firstbad runs");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    let out = run("firstbad-run,git-bisect-1");
    let (table, phases) = out
        .split_once("Where firstbad-run's boots went")
        .expect("the phase table follows the comparison");
    // The comparison: a row per strategy.
    let rows = |text: &str| text.lines().filter(|l| l.starts_with("| 64 | 1 |")).count();
    assert_eq!(rows(table), 2, "{out}");
    assert!(
        table.contains("| firstbad-run |") && table.contains("| git-bisect-1 |"),
        "{out}"
    );
    // Then firstbad-run's phases alone, with the share of wrong verdicts.
    assert_eq!(rows(phases), 1, "{out}");
    assert!(
        phases
            .contains("| baselines | bisection | posterior | re-test | bisection verdicts wrong |"),
        "{out}"
    );
    // Without firstbad-run there is nothing to account.
    let out = run("git-bisect-1");
    assert!(!out.contains("Where firstbad-run's boots went"), "{out}");
}

/// Issue 31 item 1: a regression of two steps (two half steps of 4σ each, anywhere in 64
/// commits) gives both culprits in one `firstbad run`: the re-test's levels put half of the
/// regression beside the first found, and the run hunts that part next. On one step the
/// same run names one commit and nothing more (a false "several" costs a part's baselines,
/// which refute it).
#[test]
fn firstbad_run_names_every_step_of_a_two_step_regression() {
    let two = Cell {
        n: 64,
        d: 8.0,
        noise: Noise::Normal,
        shape: Shape::TwoCulprits,
    };
    let run = run_cell(Strategy::FirstbadRun, &two, REPS, SEED);
    // 96% in `firstbad sim --n 64 --d 8 --noise normal --shape two --strategy firstbad-run`
    // (seed 1, docs/simulation.md); before this issue, 0%: one culprit a run.
    assert!(run.every_step >= 0.85, "{run:?}");
    let one = Cell {
        shape: Shape::OneCulprit,
        ..two
    };
    let run = run_cell(Strategy::FirstbadRun, &one, REPS, SEED);
    assert!(run.every_step >= 0.95 && run.wrong <= 0.02, "{run:?}");
}

/// One culprit among 64 commits at `d` on the recordings of real boots.
fn recorded(d: f64) -> Cell {
    Cell {
        d,
        ..cell(Noise::Recorded, Shape::OneCulprit)
    }
}

/// Issue 55: the product's loop on this machine's real noise, no boot: `recorded` replays
/// tests/corpus/ (chain's hunt beside the fast tier, a busy neighbour: σ 49% on the log scale,
/// a good kernel's boot at 63.8 ms where its centre is 15; the pool's two VMs beside each
/// other). A regression of the demo's size on the first (Δ/σ 4.5: its source stage's ends) is
/// named and confirmed in every history, as the kernel tests ask of the demo, and no wrong
/// commit is confirmed.
#[test]
fn on_recorded_noise_a_demo_sized_regression_is_named_and_confirmed_every_time() {
    let c = recorded(4.5);
    let r = run_cell(Strategy::FirstbadRun, &c, REPS, SEED);
    // 100% on seeds 4 and 4242 (docs/test-suite.md); the culprit itself, each time.
    assert!(r.accuracy >= 0.99, "{r:?}");
    assert_eq!(r.wrong_confirmed, Some(0.0), "{r:?}");
}

/// Issue 56's figure on real noise, kept from going back: at Δ/σ 2 on the recordings (a busy
/// neighbour; two VMs beside each other; a quiet two-step hunt) `firstbad run` is right 76%
/// here (seed 4; 86% on seed 4242: the recordings are 34-54 boots, so where each history
/// starts in them weighs more than 100 histories' sampling error) and states what it gets
/// (76.4% claimed). Wrong and confirmed is 0%; the aim is ≤ 1% on every host, so more than 3%
/// here fails.
#[test]
fn on_recorded_noise_a_two_sigma_regression_is_named_with_an_honest_confidence() {
    let c = recorded(2.0);
    let r = run_cell(Strategy::FirstbadRun, &c, REPS, SEED);
    assert!(r.accuracy >= 0.7, "{r:?}");
    calibrated(&r);
    assert!(r.wrong_confirmed.expect("re-tests") <= 0.03, "{r:?}");
}

/// The recorded kind is deterministic: the same seed replays the same boots.
#[test]
fn recorded_noise_replays_the_same_histories_for_the_same_seed() {
    let c = recorded(2.0);
    let a = run_cell(Strategy::FirstbadRun, &c, 20, 7);
    let b = run_cell(Strategy::FirstbadRun, &c, 20, 7);
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

/// Issue 61, finding 8: `--n 0`, `--n 18446744073709551615` and `--replicates 0` panicked;
/// `--d nan` printed an empty table with exit 0. Each is refused (exit 2) naming the flag.
#[test]
fn sim_refuses_counts_and_effects_it_cannot_simulate_with_exit_2() {
    for (flag, value) in [
        ("--n", "0"),
        ("--n", "1"),
        ("--n", "18446744073709551615"),
        ("--replicates", "0"),
        ("--d", "nan"),
        ("--d", "inf"),
        ("--d", "0"),
        ("--d", "-1"),
        ("--d", "1e300"),
    ] {
        let mut args = vec![
            ("--n", "64"),
            ("--d", "1"),
            ("--replicates", "2"),
            ("--noise", "normal"),
            ("--shape", "one"),
            ("--strategy", "git-bisect-1"),
        ];
        args.retain(|(f, _)| *f != flag);
        args.push((flag, value));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_firstbad"))
            .arg("sim")
            .args(args.iter().flat_map(|(f, v)| [f, v]))
            .output()
            .expect("firstbad runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(
            err.contains(flag) && err.contains(value) && !err.contains("panicked"),
            "{flag} {value}: {err}"
        );
    }
}
