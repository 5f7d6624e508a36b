//! The driver: from a hunt's state and its plan, what to do next. Pure: no I/O, no clock, no
//! git; its randomness is the hunt's seed. The executor ([`crate::exec`]) does what it says,
//! journals it, applies it, and asks again; the simulator (`firstbad sim`) drives the same
//! driver with simulated hosts.
//!
//! One file per phase ([`super::phases`]): the endpoints' baselines, the bisection with its
//! drift checks, the posterior phase, the final re-test.

use super::judge::{Judge, Settings};
use super::phases;
use super::HuntState;
use crate::journal::{BuildOutcome, Event, HuntEnd};
use crate::search::{Bisection, Dag, Next};
use std::collections::HashMap;

/// A test host as the driver sees it: a name and how many boots it takes at once.
#[derive(Debug, Clone)]
pub struct Slot {
    /// The host's name.
    pub name: String,
    /// Boots it runs at once (1 for a machine; a farm's cap for a farm).
    pub capacity: usize,
}

/// A commit's first parent, from the history.
pub type FirstParent = Box<dyn Fn(&str) -> Option<String> + Send>;

/// Reverts culprits (the first argument: one, or several together) on top of a commit (the
/// second) and says what git made of it: a commit of its own in the repository's object store,
/// or why there is none ([`crate::build::revert`]). The same commits make the same revert.
pub type Reverter = Box<dyn Fn(&[String], &str) -> crate::build::revert::RevertMade + Send>;

/// What does not change while a hunt runs.
pub struct Plan {
    /// The candidates (node 0 is the bad endpoint).
    pub dag: Dag,
    /// The good endpoint measured as the baseline.
    pub good: String,
    /// The bad endpoint.
    pub bad: String,
    /// Every good revision bounding the range.
    pub goods: Vec<String>,
    /// How commits are judged.
    pub settings: Settings,
    /// The hosts of the hunt file, retired ones included (the state says which left).
    pub hosts: Vec<Slot>,
    /// Build the next candidates while hosts boot: for hosts that do not share the builder's
    /// cores. Off, a build waits for the boots to end and the boots for the build.
    pub build_ahead: bool,
    /// The seed of the hunt's random choices (the order of interleaved boots).
    pub seed: u64,
    /// A commit's first parent (a read of the immutable history, not of the world).
    pub first_parent: FirstParent,
    /// Reverts a confirmed culprit on top of bad, for a kernel hunt over git
    /// ([`phases::revert`]); none where nothing can build a revert (a command or prebuilt
    /// hunt, the simulator).
    pub revert: Option<Reverter>,
    /// A revert stage of a regression of several steps ([`super::steps::TOGETHER`]): these
    /// culprits reverted together on top of bad and booted in rounds beside good and bad,
    /// read with the first stage's judge ([`Driver::judged`]), and nothing else.
    pub reverting: Option<Vec<String>>,
    /// Boots of the endpoints measured in earlier stages of the run, carried into this
    /// stage's baselines before its first boot ([`phases::baselines`],
    /// [`super::steps::carry`]); empty for a run's first stage.
    pub carry: Vec<(String, Vec<crate::journal::CarriedBoot>)>,
    /// How a commit is judged.
    pub kind: HuntKind,
    /// `firstbad reproduce`: end once the endpoints' baselines confirm the regression
    /// ([`HuntEnd::Reproduced`]) or refute it, bisecting nothing.
    pub stop_at_baselines: bool,
    /// `firstbad watch`: boot good and bad this many times each, interleaved in seeded pairs,
    /// and end ([`HuntEnd::Measured`]), judging nothing.
    pub pairs: Option<usize>,
    /// `firstbad watch`'s automatic hunt: stop once this many boots are spent without an
    /// answer.
    pub budget: Option<usize>,
    /// Whether the hunt forecasts its cost once the baselines are in, and what a no-go does.
    pub forecast: Forecasting,
    /// What makes the forecast when [`Plan::forecast`] asks for one
    /// ([`crate::sim::forecast::forecast`]).
    pub forecaster: phases::forecast::Forecaster,
}

/// Whether a hunt forecasts the rest of its cost once its baselines are in
/// ([`crate::sim::forecast`]), and what it does with a no-go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forecasting {
    /// No forecast: two kernels compared (reproduce, a night), a later step of the regression,
    /// a hunt the simulator runs (a forecast's own).
    Off,
    /// Forecast, and stop on a no-go for a person (`firstbad run`).
    Gate,
    /// Forecast, and go on whatever it says (`firstbad run --despite-forecast`).
    Advise,
    /// Forecast, then stop: the baselines stay in the journal for `firstbad run`
    /// (`firstbad plan`).
    Only,
}

/// How a hunt judges a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HuntKind {
    /// From boots (or runs) that measure a metric, with the hunt's statistics.
    Measured,
    /// From the exit status of one run of a command, as `git bisect run` does
    /// ([`phases::exact`]); the hosts are the checkouts the command runs in.
    ExitStatus {
        /// The command, for messages.
        command: String,
    },
}

/// One thing to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
    /// Build a commit (the builder takes one at a time).
    Build(String),
    /// Boot a built commit on a host and run the workload.
    Boot {
        /// The commit.
        commit: String,
        /// The host.
        host: String,
    },
    /// Run a command hunt's command on a commit in a checkout.
    Test {
        /// The commit.
        commit: String,
        /// The checkout (the plan's host of that index).
        job: u32,
    },
}

/// What the driver says to do now.
// A recorded event carries a boot's samples at most; decisions are few and short-lived.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Decision {
    /// Journal this decision (a verdict, the baselines, a drift check, the confirmation),
    /// apply it, and ask again.
    Record(Event),
    /// Start these, journalled as started, and ask again.
    Start(Vec<Work>),
    /// Nothing to start until something running finishes.
    Wait,
    /// The hunt cannot go on without a person: let what runs finish, then stop.
    Stop(StopReason),
    /// The hunt has ended.
    Done(HuntEnd),
}

/// Why a hunt cannot go on without a person: one variant a reason, each with its exit code
/// ([`StopReason::exit_code`]); the words a person reads are its `Display`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StopReason {
    /// The journal's verdicts do not fit this range (another hunt's journal, or a range that
    /// changed under it): the input's fault, nothing more is run.
    #[error("the journal does not fit this range ({0}); use another hunt.state_dir")]
    JournalDoesNotFit(String),
    /// `firstbad watch`'s automatic hunt spent this many boots without an answer.
    #[error(
        "the hunt spent its budget of {0} boots without an answer; raise series.hunt_boots to \
         go on"
    )]
    BudgetSpent(usize),
    /// Every host of the hunt has left its pool.
    #[error(
        "every host of this hunt has left its pool; fix them, then rerun with \
         `--restore-host NAME` for each"
    )]
    NoHostLeft,
    /// An endpoint does not build, or fails to boot or measure more often than chance allows.
    #[error("{0}")]
    Endpoint(String),
    /// The test host moved, and stayed moved past `drift_lasts_boots` and `_minutes`.
    #[error("{0}")]
    Drifted(String),
    /// The forecast says the hunt is unlikely to name the culprit (`--despite-forecast` goes
    /// on).
    #[error(
        "{0}; the hunt stops before its first candidate: change what the forecast advises, or \
         rerun with --despite-forecast to go on (the baselines are kept)"
    )]
    NoGo(String),
    /// `firstbad plan`: the forecast is made (go or not), and nothing past the baselines runs.
    #[error("forecast made; `firstbad run` goes on from these baselines")]
    Planned {
        /// The forecast's go.
        go: bool,
    },
    /// `firstbad plan` of a hunt that cannot be forecast.
    #[error("no forecast: {0}")]
    NoForecast(String),
    /// A command hunt's run cannot be judged (its command failed to run, or its verdicts
    /// contradict each other), or the search named nothing to test.
    #[error("{0}")]
    Test(String),
}

impl StopReason {
    /// The documented exit code: 2 for a journal that does not fit (bad input), 4 for a spent
    /// budget or a no-go (no answer to be had), 0 for a plan that is a go, 5 for the rest (a
    /// person looks, then a rerun resumes).
    pub fn exit_code(&self) -> u8 {
        use crate::error::exit_code;
        match self {
            StopReason::JournalDoesNotFit(_) | StopReason::NoForecast(_) => exit_code::BAD_INPUT,
            StopReason::BudgetSpent(_)
            | StopReason::NoGo(_)
            | StopReason::Planned { go: false } => exit_code::AMBIGUOUS,
            StopReason::Planned { go: true } => exit_code::OK,
            StopReason::NoHostLeft
            | StopReason::Endpoint(_)
            | StopReason::Drifted(_)
            | StopReason::Test(_) => exit_code::INFRASTRUCTURE,
        }
    }
}

/// The driver of one hunt: the plan and what it derives from the state as it grows.
pub struct Driver {
    /// The plan.
    pub plan: Plan,
    /// Every commit that could be the culprit at the start: the posterior's hypotheses.
    pub hypotheses: Vec<usize>,
    /// The bisection with the state's first `marked` verdicts applied.
    bisection: Bisection,
    marked: usize,
    /// [`Bisection::next`] after `marked` verdicts.
    next: Option<(usize, Next)>,
    /// [`Bisection::next_parallel`] after `marked` verdicts, for `k` commits.
    parallel: std::cell::RefCell<Option<(usize, usize, Vec<String>)>>,
    /// The judge, once the baselines are journalled.
    judge: Option<Judge>,
    /// Rows of the posterior's design matrix by tested commit, kept across decisions.
    pub(super) rows: HashMap<usize, Vec<bool>>,
}

impl Driver {
    /// A driver for `plan`; an error when the range and its endpoints do not fit.
    pub fn new(plan: Plan) -> Result<Driver, String> {
        let bisection =
            Bisection::new(&plan.dag, &plan.bad, &plan.goods).map_err(|e| e.to_string())?;
        let mut hypotheses: Vec<usize> = bisection
            .candidates()
            .filter_map(|id| plan.dag.index_of(id))
            .collect();
        hypotheses.sort_unstable();
        Ok(Driver {
            plan,
            hypotheses,
            bisection,
            marked: 0,
            next: None,
            parallel: Default::default(),
            judge: None,
            rows: HashMap::new(),
        })
    }

    /// A driver for `plan` that judges with `judge` from the start (a revert stage reads its
    /// rounds with the first stage's baselines, which it does not measure again).
    pub fn judged(plan: Plan, judge: Judge) -> Result<Driver, String> {
        let mut d = Driver::new(plan)?;
        d.judge = Some(judge);
        Ok(d)
    }

    /// The bisection as the state's verdicts leave it.
    pub fn bisection(&self) -> &Bisection {
        &self.bisection
    }

    /// git bisect's next step, computed once per verdict.
    pub(super) fn bisection_next(&mut self) -> Next {
        match &self.next {
            Some((marked, next)) if *marked == self.marked => next.clone(),
            _ => {
                let next = self.bisection.next();
                self.next = Some((self.marked, next.clone()));
                next
            }
        }
    }

    /// git bisect's `k` commits to test at once, computed once per verdict and pool size.
    pub(super) fn next_parallel(&self, k: usize) -> Vec<String> {
        let mut cache = self.parallel.borrow_mut();
        match &*cache {
            Some((marked, n, next)) if *marked == self.marked && *n == k => next.clone(),
            _ => {
                let next = self.bisection.next_parallel(k);
                *cache = Some((self.marked, k, next.clone()));
                next
            }
        }
    }

    /// What to do next, given everything journalled so far.
    pub fn next(&mut self, state: &HuntState) -> Decision {
        if let Some(end) = &state.end {
            return Decision::Done(end.clone());
        }
        for (commit, verdict, _) in &state.verdicts[self.marked..] {
            if let Err(e) = self.bisection.mark_result(commit, *verdict) {
                return Decision::Stop(StopReason::JournalDoesNotFit(e.to_string()));
            }
        }
        self.marked = state.verdicts.len();
        if let Some(spent) = self.budget_spent(state) {
            return Decision::Stop(StopReason::BudgetSpent(spent));
        }
        if let Some(d) = phases::hosts::retire_failing(self, state) {
            return d;
        }
        if let HuntKind::ExitStatus { command } = &self.plan.kind {
            let command = command.clone();
            return phases::exact::next(self, state, &command);
        }
        if self.active_hosts(state).next().is_none() {
            return Decision::Stop(StopReason::NoHostLeft);
        }
        // The endpoints must build: a hunt cannot start without both.
        for (endpoint, which) in [(&self.plan.good, "good"), (&self.plan.bad, "bad")] {
            match state.builds.get(endpoint) {
                None => return self.build(state, endpoint),
                Some(failed @ BuildOutcome::Failed { .. }) => {
                    return Decision::Stop(StopReason::Endpoint(format!(
                        "the {which} endpoint {} {}",
                        super::short(endpoint),
                        failed.failure().unwrap_or_default()
                    )))
                }
                Some(BuildOutcome::Built { .. }) => {}
            }
        }
        // Every host busy and nothing to build: nothing to decide until a step ends (a boot's
        // end frees its slot, so no decision waits longer than that).
        if self.free_slots(state).is_empty()
            && (state.building().is_some() || !self.plan.build_ahead)
        {
            return Decision::Wait;
        }
        if let Some(n) = self.plan.pairs {
            return phases::baselines::pairs(self, state, n);
        }
        let judge = match self.judge {
            Some(j) => j,
            None if state.baselines.is_some() => {
                let (g, b) = (state.values(&self.plan.good), state.values(&self.plan.bad));
                let n = state.baseline_boots.unwrap_or(g.len().min(b.len()));
                let j = Judge::from_baselines(&self.plan.settings, &g, &b, n);
                self.judge = Some(j);
                j
            }
            None => return phases::baselines::next(self, state),
        };
        if self.plan.reverting.is_some() {
            return match phases::revert::next(self, state, &judge) {
                Some(d) => d,
                None => {
                    let summary = state.reverted.as_ref().map(|r| r.summary.clone());
                    self.finish(
                        state,
                        HuntEnd::Measured {
                            summary: summary.unwrap_or_default(),
                        },
                    )
                }
            };
        }
        if self.plan.stop_at_baselines {
            let summary = state.baselines.clone().unwrap_or_default();
            return self.finish(state, HuntEnd::Reproduced { summary });
        }
        if let Some(d) = phases::forecast::next(self, state, &judge) {
            return d;
        }
        if state.drift_stop {
            let last = state.drift_checks.last().map(|d| d.summary.as_str());
            return Decision::Stop(StopReason::Drifted(phases::drift::stop_message(
                state,
                &self.plan.good,
                last.unwrap_or(""),
            )));
        }
        if let Some(c) = &state.confirmation {
            if let Some(d) = phases::revert::next(self, state, &judge) {
                return d;
            }
            return self.finish(
                state,
                HuntEnd::Found {
                    commit: c.commit.clone(),
                },
            );
        }
        if state.confirm.is_some() {
            return phases::confirm::next(self, state, &judge);
        }
        match self.bisection_next() {
            Next::Test(_) => phases::bisect::next(self, state, &judge),
            end => {
                let end = match end {
                    Next::Found(commit) => HuntEnd::Found { commit },
                    Next::OnlySkippedLeft(commits) => HuntEnd::OnlySkippedLeft { commits },
                    Next::Test(_) => unreachable!("matched above"),
                };
                match judge.model() {
                    Some(model) if self.plan.settings.classify.refine_boots > 0 => {
                        let model = *model;
                        phases::refine::next(self, state, &judge, &model, end)
                    }
                    _ => match end {
                        HuntEnd::Found { commit } => {
                            phases::confirm::begin(self, state, &judge, &commit)
                        }
                        other => self.finish(state, other),
                    },
                }
            }
        }
    }

    /// Ends the hunt once nothing runs (a late boot's value is still journalled).
    pub(super) fn finish(&self, state: &HuntState, end: HuntEnd) -> Decision {
        if state.running.is_empty() {
            Decision::Record(Event::Finished { end })
        } else {
            Decision::Wait
        }
    }

    /// The boots spent, once they reach the plan's budget ([`Plan::budget`]).
    pub fn budget_spent(&self, state: &HuntState) -> Option<usize> {
        let max = self.plan.budget?;
        // A confirmed culprit is the answer the budget was for: its revert, bounded by the
        // re-test's rounds, runs to its end.
        if state.confirmation.is_some() {
            return None;
        }
        let spent = state.boots.values().map(Vec::len).sum::<usize>() - state.boots_carried;
        (spent >= max).then_some(spent)
    }

    /// Hosts still in the pool.
    pub fn active_hosts<'a>(&'a self, state: &'a HuntState) -> impl Iterator<Item = &'a Slot> + 'a {
        self.plan
            .hosts
            .iter()
            .filter(|h| !state.retired.iter().any(|(r, _)| *r == h.name))
    }

    /// The free boot slots of the pool, one entry a slot, rotated by the hunt's boot count so
    /// that each host measures every side of a batch over the hunt. Empty while a build holds
    /// the cores the boots would share (builds ahead off).
    pub(super) fn free_slots(&self, state: &HuntState) -> Vec<String> {
        if !self.plan.build_ahead && state.building().is_some() {
            return Vec::new();
        }
        let hosts: Vec<&Slot> = self.active_hosts(state).collect();
        if hosts.is_empty() {
            return Vec::new();
        }
        let r = state.boots_started % hosts.len();
        hosts[r..]
            .iter()
            .chain(&hosts[..r])
            .flat_map(|h| {
                let free = h.capacity.saturating_sub(state.running_on(&h.name));
                std::iter::repeat_n(h.name.clone(), free)
            })
            .collect()
    }

    /// How many boots the pool runs at once.
    pub(super) fn pool_size(&self, state: &HuntState) -> usize {
        self.active_hosts(state).map(|h| h.capacity).sum()
    }

    /// Builds `commit` when the builder is free and a build may start now; waits otherwise.
    pub(super) fn build(&self, state: &HuntState, commit: &str) -> Decision {
        match state.building() {
            Some(_) => Decision::Wait,
            None if !self.plan.build_ahead && state.booting() => Decision::Wait,
            None => Decision::Start(vec![Work::Build(commit.to_owned())]),
        }
    }

    /// Boots of `sides` (built commits) for the free slots, each slot to the side that
    /// `pick` chooses given the boots each side has started so far; `None` ends the batch.
    pub(super) fn boots_for(
        &self,
        state: &HuntState,
        mut pick: impl FnMut(usize) -> Option<String>,
    ) -> Decision {
        let work: Vec<Work> = self
            .free_slots(state)
            .into_iter()
            .enumerate()
            .map_while(|(i, host)| pick(i).map(|commit| Work::Boot { commit, host }))
            .collect();
        if work.is_empty() {
            Decision::Wait
        } else {
            Decision::Start(work)
        }
    }
}

/// The seed of a hunt's random choices (the order of endpoint boots): fixed by its endpoints,
/// so that a resumed hunt makes the same choices.
pub fn hunt_seed(good: &str, bad: &str) -> u64 {
    let hex = |s: &str| u64::from_str_radix(&s[..16.min(s.len())], 16).unwrap_or(0);
    hex(good) ^ hex(bad).rotate_left(17)
}

/// Which side of several booted in balanced rounds comes next, given each side's boots so
/// far: the side furthest behind, and among sides level with it, the first of round `r`'s
/// seeded random order. With two sides this is a sequence of pairs, each in a random order,
/// the same on every rerun.
pub fn next_side(counts: &[usize], seed: u64) -> usize {
    let r = *counts.iter().min().expect("at least one side");
    let order = round_order(counts.len(), seed, r);
    *order
        .iter()
        .find(|&&i| counts[i] == r)
        .expect("a side is at the minimum")
}

/// The seeded order of the sides in round `r`: for two sides, the first first with the
/// probability one half ([`first_side_first`]). ChaCha12 by name, not `StdRng`: a resumed
/// hunt must make the choices its first run would have made, and rand does not promise
/// `StdRng`'s algorithm across releases (rand 0.8's `StdRng` is this same ChaCha12 stream, so
/// journals written before read the same).
fn round_order(sides: usize, seed: u64, r: usize) -> Vec<usize> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    if sides == 2 {
        return if first_side_first(seed, r) {
            vec![0, 1]
        } else {
            vec![1, 0]
        };
    }
    let mut order: Vec<usize> = (0..sides).collect();
    let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(
        seed ^ (r as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ sides as u64,
    );
    order.shuffle(&mut rng);
    order
}

/// Whether boot `pair` of an interleaved pair sequence puts the first side first: a balanced
/// random order, the same on every rerun.
fn first_side_first(seed: u64, pair: usize) -> bool {
    use rand::{Rng, SeedableRng};
    rand_chacha::ChaCha12Rng::seed_from_u64(
        seed ^ (pair as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
    )
    .gen::<bool>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The next `k` sides given `counts` done, one after the other.
    fn batch(counts: &mut [usize], seed: u64, k: usize) -> Vec<usize> {
        (0..k)
            .map(|_| {
                let i = next_side(counts, seed);
                counts[i] += 1;
                i
            })
            .collect()
    }

    /// The order of interleaved boots is part of a journal's meaning: a resumed hunt must
    /// choose as its first run did. These are the sides ChaCha12 gives (the same as rand
    /// 0.8's `StdRng`, which wrote every journal before the switch); a dependency that changes
    /// the stream turns this red.
    #[test]
    fn the_seeded_order_of_sides_is_the_stream_journals_were_written_with() {
        let two: Vec<bool> = (0..16).map(|r| first_side_first(42, r)).collect();
        let four: Vec<Vec<usize>> = (0..3).map(|r| round_order(4, 42, r)).collect();
        assert_eq!(
            format!("{two:?} {four:?}"),
            "[false, false, false, true, true, false, false, false, true, false, true, false, \
             true, true, true, true] [[0, 2, 1, 3], [0, 2, 3, 1], [1, 0, 2, 3]]"
        );
    }

    #[test]
    fn batches_of_boots_keep_the_sides_in_balanced_seeded_rounds() {
        for seed in [1u64, 7, 42] {
            for sides in [2usize, 4] {
                let one_by_one = batch(&mut vec![0; sides], seed, 16);
                for k in [2usize, 3, 4] {
                    let (mut counts, mut all) = (vec![0; sides], Vec::new());
                    while all.len() < 16 {
                        all.extend(batch(&mut counts, seed, k));
                    }
                    all.truncate(16);
                    assert_eq!(all, one_by_one, "k = {k}, seed {seed}");
                }
                for round in one_by_one.chunks(sides) {
                    let mut r = round.to_vec();
                    r.sort();
                    assert_eq!(
                        r,
                        (0..sides).collect::<Vec<_>>(),
                        "each round boots each side"
                    );
                }
            }
        }
        assert_eq!(
            batch(&mut [3, 5], 9, 2),
            [0, 0],
            "the side behind catches up first"
        );
    }
}
