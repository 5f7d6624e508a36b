//! The bisection: git bisect's choice of commits, each booted until its sequential test
//! calls it. With K boot slots, K commits are under test at once: those chosen to split the
//! candidates into K + 1 near-equal parts (git's own choice when K = 1). A verdict re-plans
//! before more boots; slots left over boot the same commits again, so that their tests end
//! sooner.

use super::super::driver::{Decision, Driver, Work};
use super::super::evidence::{host_level, reference_due};
use super::super::judge::{verdict_of, Judge};
use super::super::same_kernel;
use super::super::HuntState;
use super::drift;
use crate::journal::{BuildOutcome, Event, Verdict};
use crate::search::{Bisection, Next};
use crate::sequential::HostLevel;

/// The bisection's next step.
pub fn next(d: &Driver, state: &HuntState, judge: &Judge) -> Decision {
    let s = &d.plan.settings;
    let mut endpoints: Vec<&str> = d.plan.goods.iter().map(String::as_str).collect();
    endpoints.push(&d.plan.bad);
    let bisection = d.bisection();
    let k = d.pool_size(state).max(1);
    let mut work = under_test(state, bisection, &endpoints);
    for commit in d.next_parallel(k) {
        if work.len() < k && !work.contains(&commit) {
            work.push(commit);
        }
    }
    work.truncate(k);

    // Verdicts first, one at a time: each changes what the others are. On a host that
    // wanders, each boot is read less the host's level at its time.
    let host = state.host_failures(&endpoints);
    let level = judge.model().map_or_else(HostLevel::steady, |m| {
        host_level(s, state, m, &d.plan.good, &d.plan.bad)
    });
    let read = |boots: &[(f64, f64)]| -> Vec<f64> {
        match judge.model() {
            Some(m) => boots.iter().map(|&(v, t)| level.adjust(m, v, t)).collect(),
            None => boots.iter().map(|b| b.0).collect(),
        }
    };
    for commit in &work {
        let call = match state.builds.get(commit) {
            Some(BuildOutcome::Failed { error_lines, .. }) => Some((
                Verdict::Skip,
                format!(
                    "build failed: {}",
                    error_lines
                        .first()
                        .map(String::as_str)
                        .unwrap_or("see the log")
                ),
            )),
            Some(BuildOutcome::Built { .. }) if state.untestable(commit).is_some() => {
                state.untestable(commit).map(|why| (Verdict::Skip, why))
            }
            // One kernel, one verdict: from a commit that built the same kernel, else from
            // the boots of every commit that did.
            Some(BuildOutcome::Built { .. }) if s.same_kernel => {
                same_kernel::verdict(state, commit, &d.plan.goods, &d.plan.bad).or_else(|| {
                    let (boots, failures) = same_kernel::pooled(state, commit);
                    verdict_of(s, judge, &read(&boots), &failures, host)
                })
            }
            Some(BuildOutcome::Built { .. }) => verdict_of(
                s,
                judge,
                &read(&state.timed(commit)),
                &state.failures(commit),
                host,
            ),
            None => None,
        };
        if let Some((verdict, reason)) = call {
            let reason = if level.wanders() && !matches!(verdict, Verdict::Skip) {
                format!("{reason}; {}", level.describe())
            } else {
                reason
            };
            return Decision::Record(Event::Verdict {
                commit: commit.clone(),
                verdict,
                reason,
            });
        }
    }
    if let Some(decision) = drift::check(d, state, judge, None) {
        return decision;
    }

    let unbuilt = work.iter().find(|c| !state.builds.contains_key(*c));
    if let Some(commit) = unbuilt {
        if !d.plan.build_ahead {
            // The build waits for the boots, and then has the cores to itself.
            return d.build(state, commit);
        }
    }
    let mut start = Vec::new();
    if state.building().is_none() {
        let ahead = unbuilt.cloned().or_else(|| {
            d.plan
                .build_ahead
                .then(|| ahead(state, bisection, &work))
                .flatten()
        });
        if let Some(commit) = ahead {
            start.push(Work::Build(commit));
        }
    }
    let bootable: Vec<&String> = work
        .iter()
        .filter(|c| matches!(state.builds.get(*c), Some(BuildOutcome::Built { .. })))
        .collect();
    if !bootable.is_empty() {
        let mut hosts = d.free_slots(state).into_iter();
        // A reference boot of an endpoint beside the candidates, when the host wanders.
        if let Some(commit) = reference_due(s, state, &level, &d.plan.good, &d.plan.bad) {
            if let Some(host) = hosts.next() {
                start.push(Work::Boot { commit, host });
            }
        }
        let mut running: Vec<usize> = bootable.iter().map(|c| state.running_boots(c)).collect();
        for host in hosts {
            let (i, _) = running
                .iter()
                .enumerate()
                .min_by_key(|(_, n)| **n)
                .expect("not empty");
            start.push(Work::Boot {
                commit: bootable[i].clone(),
                host,
            });
            running[i] += 1;
        }
    }
    if start.is_empty() {
        Decision::Wait
    } else {
        Decision::Start(start)
    }
}

/// The commits under test: booted or booting, without a verdict, still candidates, and not
/// endpoints. Derived from the journal, so a resumed hunt goes on with them. Sorted by id, so
/// that the same journal gives the same order.
fn under_test(state: &HuntState, bisection: &Bisection, endpoints: &[&str]) -> Vec<String> {
    let booting = state.running.iter().filter_map(|r| match r {
        super::super::Running::Boot { commit, .. } => Some(commit),
        super::super::Running::Build { .. } | super::super::Running::Test { .. } => None,
    });
    let mut ids: Vec<String> = state
        .boots
        .keys()
        .chain(booting)
        .filter(|c| {
            !endpoints.contains(&c.as_str()) && bisection.is_candidate(c) && !state.has_verdict(c)
        })
        .cloned()
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// A commit to build while the hosts boot: the next candidate under either verdict of the
/// first commit under test, when it is not built yet.
fn ahead(state: &HuntState, bisection: &Bisection, work: &[String]) -> Option<String> {
    let first = work.first()?;
    [Verdict::Bad, Verdict::Good].into_iter().find_map(|v| {
        let mut b = bisection.clone();
        b.mark(first, v).ok()?;
        match b.next() {
            Next::Test(c) if !state.builds.contains_key(&c) => Some(c),
            _ => None,
        }
    })
}
