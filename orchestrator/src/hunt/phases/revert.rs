//! The revert on top (issue 34): once the re-test confirms a culprit, it is reverted on top of
//! the bad endpoint ([`crate::build::revert`]), that kernel built and booted in interleaved
//! rounds beside good and bad until the rounds say how much of the regression reverting the
//! culprit recovers: its level between good and bad read as the re-test reads the parent's
//! ([`rounds::admit`](super::rounds::admit)), with a 99% interval. What a maintainer asks first, and what KernelCI's
//! legacy bisection checked (the revert passing three times) before it mailed a culprit.
//!
//! Kernel hunts over git in baselines mode only: the plan's reverter makes the commit (none in
//! the simulator, a command hunt or a prebuilt one), and a level needs good and bad measured.
//! The verdict and the exit code stay the re-test's: the revert is evidence beside them.

use super::super::driver::{Decision, Driver};
use super::super::judge::Judge;
use super::super::{same_kernel, short, shorts, HuntState};
use super::rounds::{admit, Rounds};
use crate::build::revert::RevertMade;
use crate::config::Direction;
use crate::journal::{BuildOutcome, Event, Recovers};
use crate::posterior::{rounds_to_separate, Level, LEVEL_PERCENT};
use crate::sequential::Model;

/// The revert's next step once the culprit is confirmed (or, in a revert stage, for the
/// plan's culprits together); `None` when there is none to take (not asked for, not
/// confirmed, or done), and the hunt ends.
pub fn next(d: &Driver, state: &HuntState, judge: &Judge) -> Option<Decision> {
    let s = &d.plan.settings;
    if state.reverted.is_some() || !s.classify.revert || !s.baselines_mode() {
        return None;
    }
    let Some(start) = &state.revert else {
        let culprits = match &d.plan.reverting {
            Some(culprits) => culprits.clone(),
            None => {
                let c = state.confirmation.as_ref().filter(|c| c.confirmed)?;
                vec![c.commit.clone()]
            }
        };
        let reverter = d.plan.revert.as_ref()?;
        judge.model()?;
        return Some(Decision::Record(Event::RevertStarted {
            commit: culprits[0].clone(),
            with: culprits[1..].to_vec(),
            onto: d.plan.bad.clone(),
            made: reverter(&culprits, &d.plan.bad),
        }));
    };
    let culprits = start.culprits();
    let (commit, bad) = (start.commit.as_str(), d.plan.bad.as_str());
    let named = shorts(&culprits);
    let done = |revert: Option<&str>, level, recovers, summary| {
        Some(Decision::Record(Event::Reverted {
            commit: commit.to_owned(),
            with: start.with.clone(),
            revert: revert.map(str::to_owned),
            level,
            recovers,
            summary,
        }))
    };
    let revert = match &start.made {
        RevertMade::Applied { revert } => revert.as_str(),
        other => {
            return done(
                None,
                None,
                Recovers::NotMeasured,
                other.describe(&named, short(bad)),
            )
        }
    };
    match state.builds.get(revert) {
        None => {
            let build = d.build(state, revert);
            // The revert commit is on no ref: a resume weeks later may find it pruned by
            // `git gc`. Made again from the same commits it is the same commit, so it is
            // made again before its build starts (milliseconds; nothing is journalled).
            if let (Decision::Start(_), Some(reverter)) = (&build, &d.plan.revert) {
                let again = reverter(&culprits, bad);
                if again != start.made {
                    tracing::warn!(
                        "the revert of {named} on top of {} made again is not the journalled \
                         one: {}",
                        short(bad),
                        again.describe(&named, short(bad))
                    );
                }
            }
            return Some(build);
        }
        Some(failed @ BuildOutcome::Failed { .. }) => {
            let summary = format!(
                "the revert of {named} on top of {} ({}) {}",
                short(bad),
                short(revert),
                failed.failure().unwrap_or_default()
            );
            return done(Some(revert), None, Recovers::NotMeasured, summary);
        }
        Some(BuildOutcome::Built { .. }) => {}
    }
    if let Some((level, recovers, summary)) = an_endpoint_s_kernel(d, state, &named, revert) {
        return done(Some(revert), Some(level), recovers, summary);
    }
    let model = judge.model()?;
    let sides = [revert, d.plan.good.as_str(), bad];
    let rounds = Rounds::of(state, &sides, start.started_before);
    let reading = Reading::from(s.direction, s.classify.min_effect, model, &rounds.values());
    let pairs = s.classify.confirm_pairs.max(1) as usize;
    let max_pairs = (s.classify.confirm_max_pairs as usize).max(pairs);
    let can_decide = rounds_to_separate(reading.effect, reading.floor) <= max_pairs as f64;
    let failed = rounds.failed();
    let stopped = failed > s.classify.max_failed_boots as usize;
    let decided = reading.recovers != Recovers::Undecided;
    if stopped || rounds.over(pairs, max_pairs, decided, can_decide) {
        let mut summary = format!(
            "revert of {named} on top of {} ({}), {} interleaved round(s) beside good and bad: {}",
            short(bad),
            short(revert),
            rounds.complete(),
            reading.words()
        );
        if stopped {
            summary = format!("stopped after {failed} failed boots; {summary}");
        }
        let recovers = if reading.level.is_some() {
            reading.recovers
        } else {
            Recovers::NotMeasured
        };
        return done(Some(revert), reading.level, recovers, summary);
    }
    Some(rounds.boot_next(d, state, &sides, pairs, d.plan.seed ^ 2))
}

/// The end of a revert that built the very kernel of good or of bad ([`same_kernel::same`],
/// in a hunt that shares verdicts between such commits): no boot can tell it from that
/// endpoint, so none is spent; it recovers all of the regression, or none of it. The demo's
/// revert is good's kernel (the range's other built changes are comments).
fn an_endpoint_s_kernel(
    d: &Driver,
    state: &HuntState,
    named: &str,
    revert: &str,
) -> Option<(Level, Recovers, String)> {
    let (good, bad) = (d.plan.good.as_str(), d.plan.bad.as_str());
    if !d.plan.settings.same_kernel {
        return None;
    }
    let (level, recovers, side, twin, what) = if same_kernel::same(state, revert, good) {
        (0.0, Recovers::All, "the good endpoint", good, "all of it")
    } else if same_kernel::same(state, revert, bad) {
        (
            1.0,
            Recovers::Nothing,
            "the bad endpoint",
            bad,
            "none of it",
        )
    } else {
        return None;
    };
    let not_booted = same_kernel::not_booted(state, revert);
    let summary = format!(
        "revert of {named} on top of {} ({}) builds the kernel of {side} {}: its build differs \
         only in the release string, so it recovers {what}; {not_booted}",
        short(bad),
        short(revert),
        short(twin),
    );
    Some((Level::exactly(level), recovers, summary))
}

/// What the revert's rounds say: its level between good (0) and bad (1), read against good
/// and bad of the same rounds.
#[derive(Debug, Clone, PartialEq)]
struct Reading {
    level: Option<Level>,
    left_out: usize,
    /// The smallest part of the regression that counts (`min_effect` as a share of it).
    floor: f64,
    /// The regression's size in boot noise (Δ/σ).
    effect: f64,
    recovers: Recovers,
}

impl Reading {
    /// The reading of the rounds' `values`: the revert's, good's and bad's.
    fn from(dir: Direction, min_effect: f64, model: &Model, values: &[&[f64]]) -> Reading {
        let a = admit(dir, Some(model), &values[..1], Some((values[1], values[2])));
        let level = a.levels.map(|l| l[0]);
        let floor = model.share_of(min_effect);
        Reading {
            level,
            left_out: a.left_out,
            floor,
            effect: (model.bad - model.good) / model.sigma,
            recovers: match level {
                _ if a.unsettled => Recovers::Undecided,
                Some(l) => recovers(l, floor),
                None => Recovers::Undecided,
            },
        }
    }

    /// The figures and what they say, for a person.
    fn words(&self) -> String {
        let Some(undone) = self.level.as_ref().map(Level::undone) else {
            return "no boot of a side was admitted: nothing measured".to_owned();
        };
        let pc = |x: f64| format!("{:.0}%", 100.0 * x);
        let mut s = format!(
            "it recovers {} of the regression ({LEVEL_PERCENT}% interval {} to {})",
            pc(undone.level),
            pc(undone.lo),
            pc(undone.hi)
        );
        s += match self.recovers {
            Recovers::All => ": all of it, the revert measures as good",
            Recovers::Part => ": part of it, the revert measures between good and bad",
            Recovers::Nothing => ": none of it, the revert measures as bad",
            _ => ": the rounds cannot tell how much",
        };
        if self.left_out > 0 {
            s += &format!(
                " ({} boot(s) left out: more than 4σ beyond every reference, the host's)",
                self.left_out
            );
        }
        s
    }
}

/// What a revert at level `l` recovers, with `floor` the smallest share that counts: all of it
/// when its interval reaches good (within the floor) and stays below half-way, none when it
/// reaches bad and stays above half-way, part when it is clear of both ends by the floor; else
/// the interval is too wide to say.
fn recovers(l: Level, floor: f64) -> Recovers {
    if l.lo > floor && l.hi < 1.0 - floor {
        Recovers::Part
    } else if l.lo <= floor && l.hi < 0.5 {
        Recovers::All
    } else if l.hi >= 1.0 - floor && l.lo > 0.5 {
        Recovers::Nothing
    } else {
        Recovers::Undecided
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(lo: f64, hi: f64) -> Level {
        Level {
            level: (lo + hi) / 2.0,
            lo,
            hi,
        }
    }

    #[test]
    fn a_revert_recovers_all_part_or_none_by_its_interval() {
        let f = 0.05;
        assert_eq!(recovers(level(-0.1, 0.1), f), Recovers::All);
        assert_eq!(recovers(level(0.2, 0.6), f), Recovers::Part);
        assert_eq!(recovers(level(0.9, 1.1), f), Recovers::Nothing);
        assert_eq!(recovers(level(-0.2, 0.7), f), Recovers::Undecided);
        assert_eq!(recovers(level(0.3, 1.2), f), Recovers::Undecided);
    }

    /// The demo's shape (Δ/σ about 13): a revert that undoes the regression reads as good in
    /// three rounds; one that undoes nothing reads as bad.
    #[test]
    fn three_rounds_of_a_large_regression_say_all_or_nothing() {
        let dir = Direction::LowerIsBetter;
        let good = [3.5, 3.1, 3.7, 3.2, 3.4];
        let bad = [63.1, 63.2, 62.9, 63.8, 63.3];
        let m = Model::from_baselines(&good, &bad, dir);
        let (g, b): (&[f64], &[f64]) = (&[3.3, 3.6, 3.4], &[63.0, 63.4, 62.8]);
        let undone = Reading::from(dir, 0.05, &m, &[&[3.4, 3.2, 3.7], g, b]);
        assert_eq!(undone.recovers, Recovers::All, "{undone:?}");
        assert!(undone.words().contains("all of it"), "{}", undone.words());
        let kept = Reading::from(dir, 0.05, &m, &[&[63.2, 63.1, 63.6], g, b]);
        assert_eq!(kept.recovers, Recovers::Nothing, "{kept:?}");
    }
}
